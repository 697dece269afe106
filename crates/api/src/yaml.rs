//! YAML documents read as upstream reads them: converted to JSON first
//! (`sigs.k8s.io/yaml`), so an object is then decoded with JSON's strict types (`name:
//! 12345` is a number, not a string), and bounded, so that hostile input cannot hold a
//! thread.
//!
//! The YAML parser's work grows with the square of the nesting of flow collections
//! (`[[[[...`): a 200 KB file of brackets keeps it busy for a minute. [`check_nesting`]
//! refuses such input in one linear pass before anything is parsed.

use std::fmt;

use serde_json::Value;

/// Deepest nesting of flow collections (`[`, `{`) accepted. Kubernetes objects nest a
/// few tens of levels at most; serde_json's own recursion limit is 128.
pub const MAX_FLOW_DEPTH: usize = 100;

/// Why a document was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum YamlError {
    /// Flow collections nest deeper than [`MAX_FLOW_DEPTH`]; `offset` is the byte offset
    /// of the bracket that went too deep.
    TooDeep {
        /// Byte offset of the first bracket beyond the limit.
        offset: usize,
    },
    /// Not YAML, or YAML that has no JSON form (say, a mapping key that is a sequence).
    Invalid(String),
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            YamlError::TooDeep { offset } => write!(
                f,
                "collections nest deeper than {MAX_FLOW_DEPTH} levels (at byte {offset})"
            ),
            YamlError::Invalid(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for YamlError {}

/// Parses one YAML (or JSON, which is YAML) document into its JSON value, after
/// [`check_nesting`]. Errors: [`YamlError::TooDeep`], or [`YamlError::Invalid`] with the
/// parser's message (several documents in one input are refused too).
pub fn to_json(content: &[u8]) -> Result<Value, YamlError> {
    check_nesting(content, MAX_FLOW_DEPTH)?;
    serde_yaml_ng::from_slice(content).map_err(|e| YamlError::Invalid(e.to_string()))
}

/// Checks in one pass that flow collections (`[...]`, `{...}`) nest at most `max` deep.
///
/// Brackets inside quoted scalars and comments do not count. A quote starts a quoted
/// scalar only where a scalar can start (after `[`, `{`, `,`, `:`, `-`, `?` or at the start
/// of a line), so `don't` in a plain scalar is text. Brackets in plain and block scalars
/// count, but a closing one never takes the depth below zero, so balanced text (`[ -f x ]`
/// in a script) never adds up.
pub fn check_nesting(content: &[u8], max: usize) -> Result<(), YamlError> {
    enum State {
        Plain,
        Double,
        Single,
        Comment,
    }
    let mut state = State::Plain;
    let mut depth = 0usize;
    // The last byte of the line that is not a blank, `None` at a line's start.
    let mut last: Option<u8> = None;
    let mut i = 0;
    while i < content.len() {
        let byte = content[i];
        match state {
            State::Double => match byte {
                b'\\' => i += 1,
                b'"' => {
                    state = State::Plain;
                    last = Some(b'"');
                }
                _ => {}
            },
            State::Single => {
                if byte == b'\'' {
                    if content.get(i + 1) == Some(&b'\'') {
                        i += 1;
                    } else {
                        state = State::Plain;
                        last = Some(b'\'');
                    }
                }
            }
            State::Comment => {
                if byte == b'\n' {
                    state = State::Plain;
                    last = None;
                }
            }
            State::Plain => match byte {
                b'\n' => last = None,
                b' ' | b'\t' | b'\r' => {}
                b'#' if i == 0 || matches!(content[i - 1], b' ' | b'\t' | b'\n') => {
                    state = State::Comment;
                }
                b'"' | b'\'' if scalar_can_start(last) => {
                    state = if byte == b'"' {
                        State::Double
                    } else {
                        State::Single
                    };
                }
                b'[' | b'{' => {
                    depth += 1;
                    if depth > max {
                        return Err(YamlError::TooDeep { offset: i });
                    }
                    last = Some(byte);
                }
                b']' | b'}' => {
                    depth = depth.saturating_sub(1);
                    last = Some(byte);
                }
                _ => last = Some(byte),
            },
        }
        i += 1;
    }
    Ok(())
}

fn scalar_can_start(last: Option<u8>) -> bool {
    matches!(last, None | Some(b'[' | b'{' | b',' | b':' | b'-' | b'?'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_nesting_is_refused_at_once() {
        let hostile = "[".repeat(100_000);
        let started = std::time::Instant::now();
        assert_eq!(
            to_json(hostile.as_bytes()),
            Err(YamlError::TooDeep {
                offset: MAX_FLOW_DEPTH
            })
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let json = format!("{{\"a\": {}1{}}}", "[".repeat(150), "]".repeat(150));
        assert!(matches!(
            to_json(json.as_bytes()),
            Err(YamlError::TooDeep { .. })
        ));
        let ok = format!("a: {}1{}", "[".repeat(50), "]".repeat(50));
        assert!(to_json(ok.as_bytes()).is_ok());
    }

    #[test]
    fn brackets_in_strings_and_comments_do_not_count() {
        let deep = "[".repeat(500);
        let doc = format!(
            "a: \"{deep}\"\nb: '{deep}'' {deep}'\n# {deep}\nc: don't {deep}x\nd: [1, '{deep}']\n"
        );
        // `c` is a plain scalar: its brackets count, but `don't` opened no quote.
        assert!(matches!(
            check_nesting(doc.as_bytes(), MAX_FLOW_DEPTH),
            Err(YamlError::TooDeep { .. })
        ));
        let doc = format!("a: \"{deep}\"\nb: '{deep}'' {deep}'\n# {deep}\nd: [1, '{deep}']\n");
        assert_eq!(check_nesting(doc.as_bytes(), MAX_FLOW_DEPTH), Ok(()));
        // Balanced brackets in a block scalar, line after line, never add up.
        let script = "cmd: |\n".to_owned() + &"  if [ -f x ]; then echo {a}; fi\n".repeat(500);
        assert_eq!(check_nesting(script.as_bytes(), MAX_FLOW_DEPTH), Ok(()));
    }

    #[test]
    fn values_keep_their_json_types() {
        let value = to_json(b"metadata: {name: 12345}\nspec: {cpu: 1}\n").unwrap();
        assert_eq!(value["metadata"]["name"], 12345);
        let pod: Result<k8s_openapi::api::core::v1::Pod, _> = serde_json::from_value(value);
        assert!(pod.unwrap_err().to_string().contains("expected a string"));
        assert!(matches!(
            to_json(b"a: 1\n---\nb: 2\n"),
            Err(YamlError::Invalid(_))
        ));
    }
}
