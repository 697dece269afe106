//! The enum values of upstream's OpenAPI (Kubernetes 1.33): upstream's documents give
//! every field of a type tagged `+enum` an `enum` list of its values and end its
//! description with a `Possible enum values:` paragraph, one line per value; `kubectl
//! explain` prints both. The k8s-openapi schemas carry neither, so [`add_enums`] adds
//! them from the table in `enums.txt` (see its header for the format).

use serde_json::{Map, Value};

/// The table: blocks of `definition.property` targets and `value<TAB>description` lines.
const TABLE: &str = include_str!("enums.txt");

/// One enum field: where it is and its values with their descriptions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumField {
    /// `io.k8s.api.core.v1.Container`.
    pub definition: &'static str,
    /// `imagePullPolicy`.
    pub property: &'static str,
    /// The values (sorted, as upstream lists them) and the text after each.
    pub values: Vec<(&'static str, &'static str)>,
}

/// Every enum field of the table. Malformed lines (a target without a property, a value
/// line before any target) are skipped.
pub fn enum_fields() -> Vec<EnumField> {
    let mut fields = Vec::new();
    let mut targets: Vec<(&'static str, &'static str)> = Vec::new();
    let mut values: Vec<(&'static str, &'static str)> = Vec::new();
    let mut flush = |targets: &mut Vec<_>, values: &mut Vec<(&'static str, &'static str)>| {
        values.sort();
        for (definition, property) in targets.drain(..) {
            fields.push(EnumField {
                definition,
                property,
                values: values.clone(),
            });
        }
        values.clear();
    };
    for line in TABLE.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut targets, &mut values);
            continue;
        }
        match line.split_once('\t') {
            Some((value, description)) if !targets.is_empty() => {
                values.push((value, description.trim()));
            }
            Some(_) => {}
            None => targets.extend(line.split_whitespace().filter_map(|t| t.rsplit_once('.'))),
        }
    }
    flush(&mut targets, &mut values);
    fields
}

/// The `Possible enum values:` paragraph of a field's description.
pub fn enum_paragraph(values: &[(&str, &str)]) -> String {
    let mut out = String::from("Possible enum values:");
    for (value, description) in values {
        out.push_str(&format!("\n - `{value:?}`"));
        if !description.is_empty() {
            out.push(' ');
            out.push_str(description);
        }
    }
    out
}

/// Adds `enum` and the description paragraph to every enum field of `definitions` (the
/// OpenAPI v2 definitions by name). Fields the definitions lack are left out.
pub fn add_enums(definitions: &mut Map<String, Value>) {
    for field in enum_fields() {
        let property = definitions
            .get_mut(field.definition)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(field.property))
            .and_then(Value::as_object_mut);
        let Some(property) = property else { continue };
        let values: Vec<Value> = field.values.iter().map(|(v, _)| (*v).into()).collect();
        property.insert("enum".to_owned(), Value::Array(values));
        let paragraph = enum_paragraph(&field.values);
        let description = match property.get("description").and_then(Value::as_str) {
            Some(text) if !text.is_empty() => format!("{text}\n\n{paragraph}"),
            _ => paragraph,
        };
        property.insert("description".to_owned(), description.into());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_table_parses() {
        let fields = enum_fields();
        assert!(fields.len() > 40, "{}", fields.len());
        let pull = fields
            .iter()
            .find(|f| f.definition == "io.k8s.api.core.v1.EphemeralContainer")
            .unwrap();
        assert_eq!(pull.property, "imagePullPolicy");
        let values: Vec<_> = pull.values.iter().map(|(v, _)| *v).collect();
        assert_eq!(values, ["Always", "IfNotPresent", "Never"]);
        for field in &fields {
            assert!(!field.values.is_empty(), "{field:?}");
            assert!(field.definition.starts_with("io.k8s.api."), "{field:?}");
        }
    }

    #[test]
    fn adds_enum_and_paragraph() {
        let mut definitions = Map::new();
        definitions.insert(
            "io.k8s.api.core.v1.PodSpec".to_owned(),
            json!({"properties": {"restartPolicy": {"type": "string", "description": "Restart policy."}}}),
        );
        add_enums(&mut definitions);
        let property = &definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["restartPolicy"];
        assert_eq!(property["enum"], json!(["Always", "Never", "OnFailure"]));
        assert_eq!(
            property["description"],
            "Restart policy.\n\nPossible enum values:\n - `\"Always\"`\n - `\"Never\"`\n - `\"OnFailure\"`"
        );
    }
}
