//! Label selectors as upstream's `k8s.io/apimachinery/pkg/labels` (`selector.go`) and
//! `metav1.LabelSelectorAsSelector`.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as MetaLabelSelector;

use crate::names;

/// How a requirement relates a label to its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `key in (a,b)`: the label is set to one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or set to none of the values.
    NotIn,
    /// `key=a`.
    Equals,
    /// `key==a`.
    DoubleEquals,
    /// `key!=a`: the label is absent or set to another value.
    NotEquals,
    /// `key`: the label is set.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>1`: the label is an integer greater than the value.
    GreaterThan,
    /// `key<1`: the label is an integer less than the value.
    LessThan,
}

/// The binary operators, as upstream lists them in its "expected:" message.
const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

/// One `key op values` term of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

/// Go's `%#v` of a `[]string`, as upstream's errors print bad value lists.
fn go_string_slice(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// `field: Invalid value: <value>: detail` with an already formatted value.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value}: {detail}")
}

/// The key check shared by the parser and [`Requirement::new`]: every broken rule joined by
/// `; `, as one invalid-value error at `path`.
fn check_key(key: &str, path: &str) -> Option<String> {
    let errs = names::is_qualified_name(key);
    (!errs.is_empty()).then(|| invalid(path, &format!("{key:?}"), &errs.join("; ")))
}

impl Requirement {
    /// Builds a requirement, checking as upstream's `NewRequirement`: a valid key, values
    /// that fit the operator (In/NotIn: some; `=`/`==`/`!=`: one; Exists/DoesNotExist: none;
    /// `>`/`<`: one integer) and valid label values. The error aggregates every problem.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, String> {
        let mut errs = Vec::new();
        errs.extend(check_key(key, "key"));
        let list = go_string_slice(&values);
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => errs.push(invalid(
                "values",
                &list,
                "for 'in', 'notin' operators, values set can't be empty",
            )),
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals
                if values.len() != 1 =>
            {
                errs.push(invalid(
                    "values",
                    &list,
                    "exact-match compatibility requires one single value",
                ))
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => errs.push(invalid(
                "values",
                &list,
                "values set must be empty for exists and does not exist",
            )),
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(invalid(
                        "values",
                        &list,
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, value) in values.iter().enumerate() {
                    if value.parse::<i64>().is_err() {
                        errs.push(invalid(
                            &format!("values[{i}]"),
                            &format!("{value:?}"),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, value) in values.iter().enumerate() {
            let value_errs = names::is_valid_label_value(value);
            if !value_errs.is_empty() {
                errs.push(invalid(
                    &format!("values[{i}][{key}]"),
                    &format!("{value:?}"),
                    &value_errs.join("; "),
                ));
            }
        }
        match errs.len() {
            0 => Ok(Requirement {
                key: key.to_owned(),
                operator,
                values,
            }),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, as given.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let listed = |v: &String| self.values.contains(v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => value.is_some_and(listed),
            Operator::NotIn | Operator::NotEquals => !value.is_some_and(listed),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(Ok(actual)), [wanted]) =
                    (value.map(|v| v.parse::<i64>()), self.values.as_slice())
                else {
                    return false;
                };
                let Ok(wanted) = wanted.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    actual > wanted
                } else {
                    actual < wanted
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    /// Upstream's `Requirement.String()`: `!key`, `key`, `key=v`, `key in (a,b)` with the
    /// values sorted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in (",
            Operator::NotIn => " notin (",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
        };
        f.write_str(op)?;
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        f.write_str(&values.join(","))?;
        if matches!(self.operator, Operator::In | Operator::NotIn) {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed label selector (`a=b,c!=d,e in (f,g),!h`): requirements sorted by key, all of
/// which must hold. Empty matches everything; [`LabelSelector::nothing`] matches nothing.
/// `Display` gives upstream's canonical string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl LabelSelector {
    /// Parses the query-parameter syntax. Errors carry upstream's message
    /// (`unable to parse requirement: ...`, `found ',', expected: ...`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let tokens = lex(text);
        let mut requirements = Parser {
            tokens,
            position: 0,
        }
        .parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// From a `metav1.LabelSelector` (matchLabels and matchExpressions with In, NotIn,
    /// Exists, DoesNotExist), as upstream's `LabelSelectorAsSelector`.
    pub fn from_meta(selector: &MetaLabelSelector) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement::new(
                key,
                Operator::Equals,
                vec![value.clone()],
            )?);
        }
        for expression in selector.match_expressions.iter().flatten() {
            let operator = match expression.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            let values = expression.values.clone().unwrap_or_default();
            requirements.push(Requirement::new(&expression.key, operator, values)?);
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// A selector that matches no labels at all (upstream `labels.Nothing()`; prints as
    /// the empty string).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// From an optional `metav1.LabelSelector`: a null selector selects nothing, as
    /// upstream's `LabelSelectorAsSelector(nil)` (a PodDisruptionBudget without selector).
    pub fn from_meta_option(selector: Option<&MetaLabelSelector>) -> Result<Self, String> {
        selector.map_or_else(|| Ok(Self::nothing()), Self::from_meta)
    }

    /// Selects exactly the given labels (`a=b` for each; upstream `SelectorFromSet`).
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        let requirements = labels
            .iter()
            .map(|(key, value)| Requirement {
                key: key.clone(),
                operator: Operator::Equals,
                values: vec![value.clone()],
            })
            .collect();
        LabelSelector {
            requirements,
            nothing: false,
        }
    }

    /// Adds a requirement (kept sorted by key); a selector of nothing stays so.
    pub fn add(&mut self, requirement: Requirement) {
        let at = self
            .requirements
            .partition_point(|r| r.key <= requirement.key);
        self.requirements.insert(at, requirement);
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the selector restricts nothing (and so matches everything).
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(text: &str) -> Option<Token> {
    Some(match text {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits the text into tokens as upstream's lexer; the last one is `End`.
fn lex(text: &str) -> Vec<(Token, String)> {
    let bytes = text.as_bytes();
    let mut pos = 0;
    let mut tokens = Vec::new();
    loop {
        while pos < bytes.len() && is_whitespace(bytes[pos]) {
            pos += 1;
        }
        let Some(&c) = bytes.get(pos) else {
            tokens.push((Token::End, String::new()));
            return tokens;
        };
        if is_special(c) {
            // The longest run of special characters that is still an operator.
            let mut end = pos;
            let mut last: Option<(Token, usize)> = None;
            while end < bytes.len() && is_special(bytes[end]) {
                end += 1;
                match keyword(&text[pos..end]) {
                    Some(token) => last = Some((token, end)),
                    None if last.is_some() => break,
                    None => {}
                }
            }
            match last {
                Some((token, stop)) => {
                    tokens.push((token, text[pos..stop].to_owned()));
                    pos = stop;
                }
                None => {
                    tokens.push((
                        Token::Error,
                        format!("error expected: keyword found '{}'", &text[pos..end]),
                    ));
                    pos = end;
                }
            }
        } else {
            let start = pos;
            while pos < bytes.len() && !is_special(bytes[pos]) && !is_whitespace(bytes[pos]) {
                pos += 1;
            }
            let word = &text[start..pos];
            let token = match keyword(word) {
                Some(token) => token,
                None => Token::Identifier,
            };
            tokens.push((token, word.to_owned()));
        }
    }
}

/// Whether `in` / `notin` count as identifiers (they do where values are expected).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    tokens: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    fn lookahead(&self, context: Context) -> (Token, String) {
        let (token, literal) = self
            .tokens
            .get(self.position)
            .cloned()
            .unwrap_or((Token::End, String::new()));
        match token {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, literal),
            _ => (token, literal),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let item = self.lookahead(context);
        self.position = (self.position + 1).min(self.tokens.len());
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    let (next, next_literal) = self.consume(Context::Values);
                    match next {
                        Token::End => return Ok(requirements),
                        Token::Comma => {
                            let (after, after_literal) = self.lookahead(Context::Values);
                            if after != Token::Identifier && after != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{after_literal}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!(
                                "found '{next_literal}', expected: ',' or 'end of string'"
                            ));
                        }
                    }
                }
                Token::End => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, inferred) = self.parse_key_and_infer_operator()?;
        if let Some(operator) = inferred {
            return Requirement::new(&key, operator, Vec::new());
        }
        let operator = self.parse_operator()?;
        let mut values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        values.sort();
        values.dedup();
        Requirement::new(&key, operator, values)
    }

    /// The key, and Exists / DoesNotExist when no binary operator follows.
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let (mut token, mut literal) = self.consume(Context::Values);
        let negated = token == Token::DoesNotExist;
        if negated {
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        if let Some(err) = check_key(&literal, "<nil>") {
            return Err(err);
        }
        let (next, _) = self.lookahead(Context::Values);
        let operator = if negated {
            Some(Operator::DoesNotExist)
        } else if matches!(next, Token::End | Token::Comma) {
            Some(Operator::Exists)
        } else {
            None
        };
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => return Err(format!("found '{literal}', expected: {BINARY_OPERATORS}")),
        })
    }

    /// `(a,b,,c)`; an empty entry is the empty value.
    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            )),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut values = Vec::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.push(literal);
                    let (next, next_literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{next_literal}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.push(String::new());
                            return Ok(values);
                        }
                        Token::Comma => values.push(String::new()),
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (token, _) = self.lookahead(Context::Values);
        if matches!(token, Token::End | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            Ok(vec![literal])
        } else {
            Err(format!("found '{literal}', expected: identifier"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn parse(text: &str) -> LabelSelector {
        LabelSelector::parse(text).expect(text)
    }

    #[test]
    fn parses_every_operator_and_prints_canonically() {
        let cases = [
            ("", ""),
            ("a=b", "a=b"),
            ("a==b", "a==b"),
            ("a!=b", "a!=b"),
            ("a", "a"),
            ("!a", "!a"),
            ("a>1", "a>1"),
            ("a<1", "a<1"),
            (
                "x in (foo,,baz),y,z notin ()",
                "x in (,baz,foo),y,z notin ()",
            ),
            ("  z in (b, a) , a = ", "a=,z in (a,b)"),
            (
                "env in (prod),tier notin (fe,be)",
                "env in (prod),tier notin (be,fe)",
            ),
            ("a=in,b in (in,notin)", "a=in,b in (in,notin)"),
            ("example.com/app=web", "example.com/app=web"),
            ("x in (a,)", "x in (,a)"),
        ];
        for (text, canonical) in cases {
            assert_eq!(parse(text).to_string(), canonical, "{text}");
        }
    }

    #[test]
    fn matches_as_upstream() {
        let l = labels(&[("app", "web"), ("tier", "fe"), ("n", "5")]);
        let yes = [
            "",
            "app=web",
            "app==web",
            "app",
            "!missing",
            "app in (web,db)",
            "missing!=x",
            "tier!=be",
            "tier notin (be)",
            "missing notin (x)",
            "n>4",
            "n<6",
            "app,tier=fe",
        ];
        for text in yes {
            assert!(parse(text).matches(&l), "{text}");
        }
        let no = [
            "app=db",
            "missing",
            "!app",
            "app in (db)",
            "app!=web",
            "app notin (web)",
            "n>5",
            "n<5",
            "app>1",
            "missing>1",
            "missing=x",
            "app=web,tier=be",
        ];
        for text in no {
            assert!(!parse(text).matches(&l), "{text}");
        }
        assert!(parse("a=").matches(&labels(&[("a", "")])));
        assert!(!parse("a=").matches(&labels(&[])));
    }

    #[test]
    fn syntax_errors_carry_upstream_messages() {
        let cases = [
            ("a=b,", "found '', expected: identifier after ','"),
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            (
                "=a",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            (
                "a in b",
                "unable to parse requirement: found 'b' expected: '('",
            ),
            (
                "a in (b",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            (
                "a in (=)",
                "unable to parse requirement: found '=', expected: ',', ')' or identifier",
            ),
            (
                "a ~ b",
                "unable to parse requirement: found '~', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "a b",
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "a (b)",
                "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "a=(",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "!!a",
                "unable to parse requirement: found '!', expected: identifier",
            ),
            (
                "a>b",
                "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
        ];
        for (text, message) in cases {
            assert_eq!(LabelSelector::parse(text).unwrap_err(), message, "{text}");
        }
        let err = LabelSelector::parse("a/b/c=x").unwrap_err();
        assert!(
            err.starts_with("unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key must consist"),
            "{err}"
        );
        let err = LabelSelector::parse("a=-x").unwrap_err();
        assert!(
            err.starts_with("unable to parse requirement: values[0][a]: Invalid value: \"-x\": a valid label must be"),
            "{err}"
        );
    }

    #[test]
    fn from_meta_label_selector() {
        let meta: MetaLabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "web", "a": "1"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["fe", "be"]},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "b", "operator": "Exists"},
            ],
        }))
        .expect("selector");
        let selector = LabelSelector::from_meta(&meta).expect("valid");
        assert_eq!(
            selector.to_string(),
            "a=1,app=web,b,!canary,env notin (dev),tier in (be,fe)"
        );
        assert!(selector.matches(&labels(&[
            ("a", "1"),
            ("app", "web"),
            ("b", ""),
            ("tier", "fe")
        ])));
        assert!(!selector.matches(&labels(&[
            ("a", "1"),
            ("app", "web"),
            ("b", ""),
            ("tier", "fe"),
            ("canary", "y")
        ])));
        assert!(
            LabelSelector::from_meta(&MetaLabelSelector::default())
                .expect("empty")
                .is_empty()
        );

        let bad: MetaLabelSelector = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{"key": "a", "operator": "Within"}],
        }))
        .expect("selector");
        assert_eq!(
            LabelSelector::from_meta(&bad).unwrap_err(),
            "\"Within\" is not a valid label selector operator"
        );
        let bad: MetaLabelSelector = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{"key": "a", "operator": "In", "values": []},
                                 {"key": "b", "operator": "Exists", "values": ["x"]}],
        }))
        .expect("selector");
        assert_eq!(
            LabelSelector::from_meta(&bad).unwrap_err(),
            "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"
        );
        let err = Requirement::new("-a", Operator::Exists, vec!["x".into()]).unwrap_err();
        assert!(
            err.starts_with("[key: Invalid value: \"-a\": name part must consist"),
            "{err}"
        );
        assert!(err.ends_with(
            "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist]"
        ));
    }

    #[test]
    fn nothing_matches_nothing() {
        let nothing = LabelSelector::from_meta_option(None).expect("null selector");
        assert!(!nothing.matches(&labels(&[])));
        assert!(!nothing.matches(&labels(&[("a", "b")])));
        assert!(!nothing.is_empty());
        assert_eq!(nothing.to_string(), "");
        let everything = LabelSelector::from_meta_option(Some(&MetaLabelSelector::default()))
            .expect("empty selector");
        assert!(everything.matches(&labels(&[("a", "b")])));
        assert!(everything.is_empty());
    }

    #[test]
    fn from_labels_selects_exactly() {
        let selector = LabelSelector::from_labels(&labels(&[("b", "2"), ("a", "1")]));
        assert_eq!(selector.to_string(), "a=1,b=2");
        assert!(selector.matches(&labels(&[("a", "1"), ("b", "2"), ("c", "3")])));
        assert!(!selector.matches(&labels(&[("a", "1")])));
        let reparsed = parse(&selector.to_string());
        assert_eq!(reparsed, selector);
    }
}
