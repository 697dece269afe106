//! Field selectors as upstream's `k8s.io/apimachinery/pkg/fields` (`selector.go`):
//! comma-separated `field=value`, `field==value` and `field!=value` terms; `\,`, `\=` and
//! `\\` escape in values.

use std::fmt;

/// A field name and value, as [`FieldSelector::transform`] rewrites them.
pub type FieldTerm = (String, String);

/// One term: the field equals (or, negated, differs from) the value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    field: String,
    value: String,
    negated: bool,
}

/// A parsed field selector (`metadata.name=x,status.phase!=Running`). Empty matches
/// everything. `Display` gives upstream's canonical string (terms sorted, values escaped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<Term>,
}

/// Splits on commas that are not escaped; escapes stay in the terms.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

/// The first `!=`, `==` or `=` in the term.
fn split_term(term: &str) -> Option<(&str, &str, bool)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], value, negated));
            }
        }
    }
    None
}

/// Removes the escapes of a value; an unknown escape or a bare `,` / `=` is an error.
fn unescape_value(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut escaped = false;
    for c in value.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                ));
            }
            out.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {c}"
                ));
            }
            _ => out.push(c),
        }
    }
    if escaped {
        return Err("invalid field selector: invalid escape sequence: \\".to_owned());
    }
    Ok(out)
}

/// Escapes `\`, `,` and `=` in a value (upstream `EscapeValue`).
pub fn escape_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
}

impl FieldSelector {
    /// Parses the query-parameter syntax (`=`, `==`, `!=`; `\` escapes). Errors carry
    /// upstream's message (`invalid selector: 'x'; can't understand 'x'`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = if text.is_empty() {
            Vec::new()
        } else {
            split_terms(text)
        };
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((field, value, negated)) = split_term(part) else {
                return Err(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                ));
            };
            terms.push(Term {
                field: field.to_owned(),
                value: unescape_value(value)?,
                negated,
            });
        }
        Ok(FieldSelector { terms })
    }

    /// The field names used, so the server can reject unsupported ones
    /// (`field label not supported: spec.foo`).
    pub fn fields(&self) -> Vec<&str> {
        self.terms.iter().map(|t| t.field.as_str()).collect()
    }

    /// Whether the object's fields (`field(name)` gives a field's value; an absent field
    /// counts as the empty string, as upstream) satisfy every requirement.
    pub fn matches(&self, field: &dyn Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let actual = field(&t.field).unwrap_or_default();
            (actual == t.value) != t.negated
        })
    }

    /// Whether the selector has no term.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The value `field` must equal, when a term requires exactly that (upstream
    /// `RequiresExactMatch`; lets a list of pods by `spec.nodeName` use an index).
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && !t.negated)
            .map(|t| t.value.as_str())
    }

    /// Rewrites field names and values (upstream `Transform`), e.g. to map a legacy field
    /// label to its current name; `None` from `f` drops the term.
    pub fn transform<F>(&self, f: F) -> Result<Self, String>
    where
        F: Fn(&str, &str) -> Result<Option<FieldTerm>, String>,
    {
        let mut terms = Vec::new();
        for term in &self.terms {
            if let Some((field, value)) = f(&term.field, &term.value)? {
                terms.push(Term {
                    field,
                    value,
                    negated: term.negated,
                });
            }
        }
        Ok(FieldSelector { terms })
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, term) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if term.negated { "!=" } else { "=" };
            write!(f, "{}{op}{}", term.field, escape_value(&term.value))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_field(name: &str) -> Option<String> {
        match name {
            "metadata.name" => Some("web-0".into()),
            "metadata.namespace" => Some("default".into()),
            "spec.nodeName" => Some("node-1".into()),
            "status.phase" => Some("Running".into()),
            "metadata.annotations" => Some("a=b,c".into()),
            _ => None,
        }
    }

    #[test]
    fn parses_and_prints() {
        let cases = [
            ("", ""),
            ("metadata.name=web-0", "metadata.name=web-0"),
            ("metadata.name==web-0", "metadata.name=web-0"),
            (
                "status.phase!=Running,spec.nodeName=n",
                "spec.nodeName=n,status.phase!=Running",
            ),
            (",a=b,,", "a=b"),
            ("a=x\\,y\\=z\\\\", "a=x\\,y\\=z\\\\"),
            ("a=", "a="),
        ];
        for (text, canonical) in cases {
            let selector = FieldSelector::parse(text).expect(text);
            assert_eq!(selector.to_string(), canonical, "{text}");
            assert_eq!(FieldSelector::parse(canonical).expect(canonical), selector);
        }
        let selector = FieldSelector::parse("a=x\\,y").expect("escaped");
        assert_eq!(selector.requires_exact_match("a"), Some("x,y"));
        assert_eq!(selector.fields(), vec!["a"]);
    }

    #[test]
    fn errors() {
        assert_eq!(
            FieldSelector::parse("a,b=c").unwrap_err(),
            "invalid selector: 'a,b=c'; can't understand 'a'"
        );
        assert_eq!(
            FieldSelector::parse("a=b=c").unwrap_err(),
            "invalid field selector: unescaped character in value: ="
        );
        assert_eq!(
            FieldSelector::parse("a=\\x").unwrap_err(),
            "invalid field selector: invalid escape sequence: \\x"
        );
        assert_eq!(
            FieldSelector::parse("a=x\\").unwrap_err(),
            "invalid field selector: invalid escape sequence: \\"
        );
    }

    #[test]
    fn matching() {
        let yes = [
            "",
            "metadata.name=web-0",
            "spec.nodeName==node-1,status.phase!=Pending",
            "spec.unknown=",
            "spec.unknown!=x",
            "metadata.annotations=a\\=b\\,c",
        ];
        for text in yes {
            let selector = FieldSelector::parse(text).expect(text);
            assert!(selector.matches(&pod_field), "{text}");
        }
        let no = [
            "metadata.name=web-1",
            "status.phase!=Running",
            "spec.unknown=x",
        ];
        for text in no {
            let selector = FieldSelector::parse(text).expect(text);
            assert!(!selector.matches(&pod_field), "{text}");
        }
    }

    #[test]
    fn transform_renames_and_drops() {
        let selector = FieldSelector::parse("name=a,spec.host=n,drop=x").expect("valid");
        let renamed = selector
            .transform(|field, value: &str| match field {
                "name" => Ok(Some(("metadata.name".into(), value.into()))),
                "spec.host" => Ok(Some(("spec.nodeName".into(), value.into()))),
                "drop" => Ok(None),
                other => Err(format!("field label not supported: {other}")),
            })
            .expect("known fields");
        assert_eq!(renamed.to_string(), "metadata.name=a,spec.nodeName=n");
        let err = FieldSelector::parse("x=1")
            .expect("valid")
            .transform(|field, _| Err(format!("field label not supported: {field}")))
            .unwrap_err();
        assert_eq!(err, "field label not supported: x");
        assert_eq!(renamed.requires_exact_match("spec.nodeName"), Some("n"));
        assert_eq!(renamed.requires_exact_match("metadata.namespace"), None);
    }
}
