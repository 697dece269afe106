//! The subset of Kubernetes JSONPath (`k8s.io/client-go/util/jsonpath`) that
//! CustomResourceDefinitions use: printer columns (`additionalPrinterColumns[].jsonPath`)
//! and selectable fields. A path is what goes inside the template's braces:
//! `.spec.replicas`, `.status.conditions[?(@.type=="Ready")].status`, `.items[0].name`,
//! `.items[*].name`, `['a.b'].c`, `..name`.
//!
//! Missing keys give no result rather than an error, as upstream's printers run with
//! `AllowMissingKeys(true)`.

use serde_json::Value;

/// One step of a parsed path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// `.name` or `['name']`.
    Field(String),
    /// `.*` or `[*]`: every member or item.
    Wildcard,
    /// `[n]`; negative counts from the end.
    Index(i64),
    /// `..name`: `name` at any depth.
    Recursive(String),
    /// `[?(@.a.b == "x")]` (or `!=`): the items whose field compares so.
    Filter {
        path: Vec<String>,
        equal: bool,
        literal: Value,
    },
    /// `[?(@.a)]`: the items that have the field.
    Exists(Vec<String>),
}

/// A parsed JSONPath.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

/// Why a path does not parse, in upstream's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

impl JsonPath {
    /// Parses `path` (with or without the surrounding `{}`). Errors: an empty path, an
    /// unterminated bracket or quote, a filter other than `@.field`, `@.field == literal`
    /// or `@.field != literal`.
    pub fn parse(path: &str) -> Result<Self, ParseError> {
        let trimmed = path.trim();
        let inner = trimmed
            .strip_prefix('{')
            .and_then(|p| p.strip_suffix('}'))
            .unwrap_or(trimmed);
        let mut parser = Parser {
            text: inner,
            pos: 0,
        };
        let steps = parser.steps()?;
        if steps.is_empty() {
            return Err(ParseError(format!("invalid JSONPath {path:?}: no field")));
        }
        Ok(JsonPath { steps })
    }

    /// The values the path reaches in `root`, in document order.
    pub fn find<'v>(&self, root: &'v Value) -> Vec<&'v Value> {
        let mut current = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for value in current {
                apply(step, value, &mut next);
            }
            current = next;
        }
        current
    }

    /// The first value found, as upstream's column printers take it.
    pub fn first<'v>(&self, root: &'v Value) -> Option<&'v Value> {
        self.find(root).into_iter().next()
    }

    /// The path as a field label, when it is a plain chain of fields (`.spec.color` →
    /// `spec.color`), as selectable fields name themselves.
    pub fn field_label(&self) -> Option<String> {
        let fields: Option<Vec<&str>> = self
            .steps
            .iter()
            .map(|s| match s {
                Step::Field(name) => Some(name.as_str()),
                _ => None,
            })
            .collect();
        fields.map(|f| f.join("."))
    }
}

/// A value as upstream's JSONPath printer writes it: strings bare, everything else as
/// JSON.
pub fn print(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn lookup<'v>(value: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, key| v.get(key.as_str()))
}

fn apply<'v>(step: &Step, value: &'v Value, out: &mut Vec<&'v Value>) {
    match step {
        Step::Field(name) => out.extend(value.get(name.as_str())),
        Step::Wildcard => match value {
            Value::Object(map) => out.extend(map.values()),
            Value::Array(items) => out.extend(items.iter()),
            _ => {}
        },
        Step::Index(index) => {
            if let Value::Array(items) = value {
                let len = items.len() as i64;
                let at = if *index < 0 { len + index } else { *index };
                if (0..len).contains(&at) {
                    out.extend(usize::try_from(at).ok().and_then(|i| items.get(i)));
                }
            }
        }
        Step::Recursive(name) => descend(name, value, out),
        Step::Filter {
            path,
            equal,
            literal,
        } => {
            if let Value::Array(items) = value {
                out.extend(items.iter().filter(|item| {
                    lookup(item, path).is_some_and(|found| (found == literal) == *equal)
                }));
            }
        }
        Step::Exists(path) => {
            if let Value::Array(items) = value {
                out.extend(items.iter().filter(|item| lookup(item, path).is_some()));
            }
        }
    }
}

fn descend<'v>(name: &str, value: &'v Value, out: &mut Vec<&'v Value>) {
    match value {
        Value::Object(map) => {
            out.extend(map.get(name));
            for child in map.values() {
                descend(name, child, out);
            }
        }
        Value::Array(items) => {
            for child in items {
                descend(name, child, out);
            }
        }
        _ => {}
    }
}

struct Parser<'t> {
    text: &'t str,
    pos: usize,
}

impl<'t> Parser<'t> {
    fn rest(&self) -> &'t str {
        &self.text[self.pos..]
    }

    fn error(&self, what: &str) -> ParseError {
        ParseError(format!(
            "invalid JSONPath {:?} at {}: {what}",
            self.text, self.pos
        ))
    }

    fn steps(&mut self) -> Result<Vec<Step>, ParseError> {
        let mut steps = Vec::new();
        while !self.rest().is_empty() {
            let rest = self.rest();
            if let Some(after) = rest.strip_prefix("..") {
                let name = identifier(after);
                if name.is_empty() {
                    return Err(self.error("expected a field name after '..'"));
                }
                self.pos += 2 + name.len();
                steps.push(Step::Recursive(name.to_owned()));
            } else if let Some(after) = rest.strip_prefix('.') {
                if after.starts_with('*') {
                    self.pos += 2;
                    steps.push(Step::Wildcard);
                } else if after.starts_with('[') || after.is_empty() {
                    // `.[0]` and a trailing `.` (the root) add nothing.
                    self.pos += 1;
                } else {
                    let name = identifier(after);
                    if name.is_empty() {
                        return Err(self.error("expected a field name after '.'"));
                    }
                    self.pos += 1 + name.len();
                    steps.push(Step::Field(name.to_owned()));
                }
            } else if rest.starts_with('[') {
                steps.push(self.bracket()?);
            } else if rest.starts_with('@') || rest.starts_with('$') {
                // `$` and `@` name the root.
                self.pos += 1;
            } else {
                let name = identifier(rest);
                if name.is_empty() {
                    return Err(self.error("unexpected character"));
                }
                self.pos += name.len();
                steps.push(Step::Field(name.to_owned()));
            }
        }
        Ok(steps)
    }

    fn bracket(&mut self) -> Result<Step, ParseError> {
        let rest = self.rest();
        let Some(close) = closing_bracket(rest) else {
            return Err(self.error("unterminated '['"));
        };
        let inner = rest[1..close].trim();
        let step = if inner == "*" {
            Step::Wildcard
        } else if let Some(quoted) = quoted(inner) {
            Step::Field(quoted.to_owned())
        } else if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
            self.filter(filter.trim())?
        } else if let Ok(index) = inner.parse::<i64>() {
            Step::Index(index)
        } else {
            return Err(self.error("expected an index, a quoted name, '*' or a filter"));
        };
        self.pos += close + 1;
        Ok(step)
    }

    fn filter(&self, filter: &str) -> Result<Step, ParseError> {
        let field_path = |text: &str| -> Result<Vec<String>, ParseError> {
            let text = text.trim();
            let Some(rest) = text.strip_prefix("@.") else {
                return Err(self.error("a filter compares a field of '@'"));
            };
            let parts: Vec<String> = rest.split('.').map(str::to_owned).collect();
            if parts.iter().any(String::is_empty) {
                return Err(self.error("empty field name in filter"));
            }
            Ok(parts)
        };
        for (operator, equal) in [("==", true), ("!=", false)] {
            if let Some((left, right)) = filter.split_once(operator) {
                let right = right.trim();
                let literal = match quoted(right) {
                    Some(text) => Value::String(text.to_owned()),
                    None => serde_json::from_str(right).map_err(|_| {
                        self.error("a filter compares with a quoted string, a number or a boolean")
                    })?,
                };
                return Ok(Step::Filter {
                    path: field_path(left)?,
                    equal,
                    literal,
                });
            }
        }
        Ok(Step::Exists(field_path(filter)?))
    }
}

/// The leading run of characters a bare field name may have.
fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '/'))
        .unwrap_or(text.len());
    &text[..end]
}

/// `'x'` or `"x"` without the quotes.
fn quoted(text: &str) -> Option<&str> {
    let quote = text.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    text.strip_prefix(quote)?.strip_suffix(quote)
}

/// The index of the `]` closing the `[` at the start of `text`, skipping quoted text.
fn closing_bracket(text: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn find(path: &str, value: &Value) -> Vec<Value> {
        JsonPath::parse(path)
            .unwrap()
            .find(value)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn paths_reach_what_upstream_printers_reach() {
        let object = json!({
            "metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "x"}},
            "spec": {"replicas": 3, "items": [{"name": "i0"}, {"name": "i1"}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False"}
            ]}
        });
        assert_eq!(find(".spec.replicas", &object), [json!(3)]);
        assert_eq!(find("{.spec.replicas}", &object), [json!(3)]);
        assert_eq!(find(".spec.items[1].name", &object), [json!("i1")]);
        assert_eq!(find(".spec.items[-1].name", &object), [json!("i1")]);
        assert_eq!(
            find(".spec.items[*].name", &object),
            [json!("i0"), json!("i1")]
        );
        assert_eq!(
            find(".status.conditions[?(@.type==\"Ready\")].status", &object),
            [json!("True")]
        );
        assert_eq!(
            find(".status.conditions[?(@.type!='Ready')].type", &object),
            [json!("Synced")]
        );
        assert_eq!(
            find(".metadata.labels['app.kubernetes.io/name']", &object),
            [json!("x")]
        );
        assert_eq!(find("..name", &object).len(), 3);
        assert!(find(".spec.missing.deeper", &object).is_empty());
        assert!(find(".spec.items[5]", &object).is_empty());
        assert_eq!(
            JsonPath::parse(".spec.color").unwrap().field_label(),
            Some("spec.color".to_owned())
        );
        assert_eq!(
            JsonPath::parse(".spec.items[0]").unwrap().field_label(),
            None
        );
        assert_eq!(print(&json!("s")), "s");
        assert_eq!(print(&json!({"a": 1})), r#"{"a":1}"#);
    }

    #[test]
    fn bad_paths_are_refused() {
        for bad in ["", ".spec[", ".spec[?(x==1)]", ".spec[abc]", ".", "{}"] {
            assert!(JsonPath::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
