//! CEL validation rules of CustomResourceDefinitions (`x-kubernetes-validations`), as
//! upstream's `k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel` (compilation.go,
//! validation.go) with the Kubernetes CEL libraries of `k8s.io/apiserver/pkg/cel/library`.
//!
//! - [`compile`] checks and compiles every rule of a schema once, when the CRD is written,
//!   reporting upstream's errors on the CRD's field paths;
//! - [`Validator::validate`] runs them on a custom resource (and its old version on
//!   update), reporting upstream's errors on the resource's field paths.
//!
//! Parsing and evaluation are the `cel` crate's; what cel-go's checker and cost tracker do
//! is done by the `check` module: undeclared variables and functions, undefined fields of
//! the schema, a non-bool rule, and a bound of each evaluation's work computed from the
//! actual sizes of the data before it runs (see [`Validator::validate`]).

mod check;
mod library;
mod value;

pub use value::RESERVED;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

use cel::common::value::Val;
use cel::objects::OptionalValue;
use cel::{Context, Env, ExecutionError, Program, Value};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, ValidationRule,
};
use serde_json::Value as Json;

use crate::field::{ErrorList, ErrorType, FieldError, Path};
use check::{Data, Failure, Want};
use value::{Shape, additional_of, items_of, to_cel};

/// The most cost one rule (or messageExpression) may take in one evaluation (upstream
/// `celconfig.PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// The most cost all rules together may take validating one object (upstream
/// `celconfig.RuntimeCELCostBudget`).
pub const RUNTIME_COST_BUDGET: i64 = 10_000_000;

/// The longest rule or messageExpression, in code points (cel-go's default
/// `ExpressionSizeCodePointLimit`).
pub const MAX_EXPRESSION_CODE_POINTS: usize = 100_000;

/// The longest message a messageExpression may produce (upstream
/// `celconfig.MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5 * 1024;

/// The reasons a rule may give (upstream `supportedValidationReason`, sorted).
const SUPPORTED_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// The environment every rule is compiled and run in: the CEL standard library, the
/// strings extension and the Kubernetes libraries of [`library`].
static ENV: LazyLock<Result<Arc<Env>, String>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)
        .map_err(|e| e.to_string())?;
    env.add_extension(library::extension)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(env))
});

/// One compiled rule.
#[derive(Debug)]
struct Compiled {
    rule: ValidationRule,
    program: Program,
    message: Option<Program>,
    uses_old_self: bool,
    /// `fieldPath`, normalized, relative to the node (`spec.replicas`, `labels[app]`).
    field_path: Option<String>,
}

/// The rules of one schema node and of the nodes under it.
#[derive(Debug)]
struct Node {
    /// The schema's `type` (`object`, `string`, ...), the value of an Invalid error.
    type_name: String,
    shape: Shape,
    rules: Vec<Compiled>,
    properties: BTreeMap<String, Node>,
    items: Option<Box<Node>>,
    additional: Option<Box<Node>>,
    /// `x-kubernetes-list-map-keys` of a list of type `map`: items correlate by them.
    map_keys: Option<Vec<String>>,
    /// Whether old and new fields and entries correlate (not `x-kubernetes-map-type: atomic`).
    correlatable: bool,
}

/// The compiled `x-kubernetes-validations` of a schema (upstream `cel.Validator`).
#[derive(Debug)]
pub struct Validator {
    root: Option<Node>,
}

/// Compiles every `x-kubernetes-validations` rule of `schema`, the `openAPIV3Schema` of a
/// CRD version, whose root is the custom resource (so `self.metadata.name`, `self.kind`
/// and `self.apiVersion` are visible there).
///
/// `path` is where the schema is in the CRD, e.g.
/// `spec.versions[0].schema.openAPIV3Schema`; errors are reported under it as upstream's
/// CRD validation reports them, in its order (a node's own rules after the nodes under it):
///
/// - each rule's own fields: `rule: Required value: rule is not specified`, message
///   without text or with line breaks, a multi-line rule without message, a blank
///   messageExpression, an unsupported `reason`, a blank, multi-line or invalid `fieldPath`;
/// - where none of those are found at a node or under it, the compilation of its rules:
///   `rule: Invalid value: apiextensions.ValidationRule{...}: compilation failed: ERROR:
///   <input>:1:6: Syntax error: ...` (also for undeclared references, undefined fields and
///   rules over [`MAX_EXPRESSION_CODE_POINTS`]), `cel expression must evaluate to a bool`,
///   the same for `messageExpression` (`messageExpression compilation failed: ...`), `oldSelf`
///   used under a list that is not of type `map` or an atomic object
///   (`oldSelf cannot be used on the uncorrelatable portion of the schema within <path>`),
///   and `optionalOldSelf` set on a rule without `oldSelf`.
///
/// The Invalid value of a compilation error prints the rule as Go's `%#v` does, with
/// `(nil)` or the pointed-to value for `reason` and `optionalOldSelf` (Go prints an address).
///
/// # Errors
///
/// The list of errors above; empty only if there was none.
pub fn compile(schema: &JSONSchemaProps, path: &Path) -> Result<Validator, ErrorList> {
    let env = match ENV.as_ref() {
        Ok(env) => env.clone(),
        Err(e) => {
            return Err(vec![FieldError::internal(
                &path.child("x-kubernetes-validations"),
                format!(
                    "internal error: failed to construct type information for x-kubernetes-validations rules: {e}"
                ),
            )]);
        }
    };
    let mut errors = ErrorList::new();
    let walker = Walker { env: &env };
    let (root, _) = walker.node(schema, path, true, None, &mut errors);
    if errors.is_empty() {
        Ok(Validator { root })
    } else {
        Err(errors)
    }
}

struct Walker<'e> {
    env: &'e Arc<Env>,
}

/// `x-kubernetes-map-type` other than `atomic` (upstream `MapIsCorrelatable`).
fn map_correlatable(schema: &JSONSchemaProps) -> bool {
    schema.x_kubernetes_map_type.as_deref() != Some("atomic")
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

impl Walker<'_> {
    /// The node of `schema` (`None` without rules at it or under it), and whether schema
    /// errors were found at it or under it.
    fn node(
        &self,
        schema: &JSONSchemaProps,
        path: &Path,
        resource_root: bool,
        uncorrelatable: Option<&Path>,
        errors: &mut ErrorList,
    ) -> (Option<Node>, bool) {
        let mut schema_errors = false;

        let mut additional = None;
        if let Some(sub) = additional_of(schema) {
            let embedded = sub.x_kubernetes_embedded_resource == Some(true);
            let (node, bad) = self.node(
                sub,
                &path.child("additionalProperties"),
                embedded,
                uncorrelatable,
                errors,
            );
            additional = node.map(Box::new);
            schema_errors |= bad;
        }

        let mut properties = BTreeMap::new();
        for (name, sub) in schema.properties.iter().flatten() {
            let within = if map_correlatable(schema) {
                uncorrelatable
            } else {
                Some(uncorrelatable.unwrap_or(path))
            };
            let embedded = sub.x_kubernetes_embedded_resource == Some(true);
            let sub_path = path.child("properties").key(name);
            let (node, bad) = self.node(sub, &sub_path, embedded, within, errors);
            schema_errors |= bad;
            // a property CEL cannot name is still validated by its own rules
            if let Some(node) = node {
                properties.insert(name.clone(), node);
            }
        }

        let mut items = None;
        let list_type = schema.x_kubernetes_list_type.as_deref();
        if let Some(sub) = items_of(schema) {
            let within = if list_type == Some("map") {
                uncorrelatable
            } else {
                Some(uncorrelatable.unwrap_or(path))
            };
            let embedded = sub.x_kubernetes_embedded_resource == Some(true);
            let (node, bad) = self.node(sub, &path.child("items"), embedded, within, errors);
            items = node.map(Box::new);
            schema_errors |= bad;
        }

        let rules = schema
            .x_kubernetes_validations
            .as_deref()
            .unwrap_or_default();
        let rules_path = path.child("x-kubernetes-validations");
        for (i, rule) in rules.iter().enumerate() {
            let before = errors.len();
            rule_field_errors(schema, rule, &rules_path.index(i), errors);
            schema_errors |= errors.len() > before;
        }

        let shape = Shape::of(schema, resource_root);
        let mut compiled = Vec::new();
        if !schema_errors {
            for (i, rule) in rules.iter().enumerate() {
                let rule_path = rules_path.index(i);
                if let Some(c) = self.rule(schema, &shape, rule, &rule_path, uncorrelatable, errors)
                {
                    compiled.push(c);
                }
            }
        }

        if compiled.is_empty() && properties.is_empty() && items.is_none() && additional.is_none() {
            return (None, schema_errors);
        }
        let node = Node {
            type_name: schema.type_.clone().unwrap_or_default(),
            shape,
            rules: compiled,
            properties,
            items,
            additional,
            map_keys: (list_type == Some("map")).then(|| {
                schema
                    .x_kubernetes_list_map_keys
                    .clone()
                    .unwrap_or_default()
            }),
            correlatable: map_correlatable(schema),
        };
        (Some(node), schema_errors)
    }

    /// Compiles one rule, reporting its compilation errors.
    fn rule(
        &self,
        schema: &JSONSchemaProps,
        shape: &Shape,
        rule: &ValidationRule,
        rule_path: &Path,
        uncorrelatable: Option<&Path>,
        errors: &mut ErrorList,
    ) -> Option<Compiled> {
        if rule.rule.trim().is_empty() {
            return None;
        }
        let optional = rule.optional_old_self == Some(true);
        let (program, uses_old_self) =
            match self.expression(&rule.rule, shape, optional, Want::Bool) {
                Ok(ok) => ok,
                Err(detail) => {
                    errors.push(invalid_rule(&rule_path.child("rule"), rule, &detail));
                    return None;
                }
            };
        let mut message = None;
        if let Some(source) = rule.message_expression.as_deref().filter(|s| !s.is_empty()) {
            match self.expression(source, shape, optional, Want::String) {
                Ok((p, _)) => message = Some(p),
                Err(detail) => {
                    let detail = match detail.strip_prefix("compilation failed: ") {
                        Some(rest) => format!("messageExpression compilation failed: {rest}"),
                        None => detail,
                    };
                    errors.push(invalid_rule(
                        &rule_path.child("messageExpression"),
                        rule,
                        &detail,
                    ));
                }
            }
        }
        if uses_old_self {
            if let Some(within) = uncorrelatable {
                errors.push(FieldError::invalid(
                    &rule_path.child("rule"),
                    rule.rule.as_str(),
                    format!(
                        "oldSelf cannot be used on the uncorrelatable portion of the schema within {within}"
                    ),
                ));
            }
        } else if let Some(optional) = rule.optional_old_self {
            errors.push(FieldError::invalid(
                &rule_path.child("optionalOldSelf"),
                optional,
                "may not be set if oldSelf is not used in rule",
            ));
        }
        let field_path = rule
            .field_path
            .as_deref()
            .filter(|p| !p.is_empty())
            .and_then(|p| valid_field_path(p, schema));
        Some(Compiled {
            rule: rule.clone(),
            program,
            message,
            uses_old_self,
            field_path,
        })
    }

    /// Parses and checks one expression; the detail of upstream's error if it fails.
    fn expression(
        &self,
        source: &str,
        shape: &Shape,
        optional_old_self: bool,
        want: Want,
    ) -> Result<(Program, bool), String> {
        let size = source.chars().count();
        if size > MAX_EXPRESSION_CODE_POINTS {
            return Err(format!(
                "compilation failed: ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, limit {MAX_EXPRESSION_CODE_POINTS}"
            ));
        }
        let program = self.env.compile(source).map_err(|errors| {
            let issues: Vec<String> = errors
                .errors
                .iter()
                .map(|e| display_issue(source, e.pos.0, e.pos.1, &e.msg))
                .collect();
            format!("compilation failed: {}", issues.join("\n"))
        })?;
        match check::check(program.expression(), shape, optional_old_self, want) {
            Ok(uses_old_self) => Ok((program, uses_old_self)),
            Err(Failure::Type(detail)) => Err(detail.to_owned()),
            Err(Failure::Issues(issues)) => {
                let info = program.source_info();
                let shown: Vec<String> = issues
                    .iter()
                    .map(|issue| {
                        let (line, column) = info
                            .offset_for(issue.id)
                            .map_or((-1, 0), |(start, _)| line_column(source, start as usize));
                        display_issue(source, line, column, &issue.message)
                    })
                    .collect();
                Err(format!("compilation failed: {}", shown.join("\n")))
            }
        }
    }
}

/// The 1-based line and column of byte `offset` of `source`.
fn line_column(source: &str, offset: usize) -> (isize, isize) {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() as isize + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() as isize + 1;
    (line, column)
}

/// One issue as cel-go prints it: `ERROR: <input>:1:6: msg`, then the line of the source
/// and a caret under the column.
fn display_issue(source: &str, line: isize, column: isize, message: &str) -> String {
    let mut out = format!("ERROR: <input>:{line}:{column}: {message}");
    if line >= 1
        && let Some(snippet) = source.split('\n').nth((line - 1) as usize)
    {
        let snippet = snippet.replace('\t', " ");
        out.push_str("\n | ");
        out.push_str(&snippet);
        out.push_str("\n | ");
        out.push_str(&".".repeat(column.max(1) as usize - 1));
        out.push('^');
    }
    out
}

/// Go's `%q` of a string, close enough: Rust's debug quoting.
fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

/// `apiextensions.ValidationRule{...}` as Go's `%#v` prints upstream's internal type.
fn go_rule(rule: &ValidationRule) -> String {
    let reason = match &rule.reason {
        None => "(*apiextensions.FieldValueErrorReason)(nil)".to_owned(),
        Some(r) => format!("(*apiextensions.FieldValueErrorReason)({})", go_quote(r)),
    };
    let optional = match rule.optional_old_self {
        None => "(*bool)(nil)".to_owned(),
        Some(b) => format!("(*bool)({b})"),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{optional}}}",
        go_quote(&rule.rule),
        go_quote(rule.message.as_deref().unwrap_or_default()),
        go_quote(rule.message_expression.as_deref().unwrap_or_default()),
        go_quote(rule.field_path.as_deref().unwrap_or_default()),
    )
}

/// `<path>: Invalid value: apiextensions.ValidationRule{...}: <detail>`. The rule is
/// printed bare (not quoted as a string value would be), so it is carried in the detail.
fn invalid_rule(path: &Path, rule: &ValidationRule, detail: &str) -> FieldError {
    FieldError {
        kind: ErrorType::Invalid,
        field: path.clone(),
        value: None,
        detail: format!("{}: {detail}", go_rule(rule)),
    }
}

/// The checks of a rule's own fields (upstream `ValidateCustomResourceDefinitionOpenAPISchema`).
fn rule_field_errors(
    schema: &JSONSchemaProps,
    rule: &ValidationRule,
    path: &Path,
    errors: &mut ErrorList,
) {
    let trimmed_rule = rule.rule.trim();
    let message = rule.message.as_deref().unwrap_or_default();
    let trimmed_message = message.trim();
    if trimmed_rule.is_empty() {
        errors.push(FieldError::required(
            &path.child("rule"),
            "rule is not specified",
        ));
    } else if !message.is_empty() && trimmed_message.is_empty() {
        errors.push(FieldError::invalid(
            &path.child("message"),
            message,
            "message must be non-empty if specified",
        ));
    } else if has_newlines(trimmed_message) {
        errors.push(FieldError::invalid(
            &path.child("message"),
            message,
            "message must not contain line breaks",
        ));
    } else if has_newlines(trimmed_rule) && trimmed_message.is_empty() {
        errors.push(FieldError::required(
            &path.child("message"),
            "message must be specified if rule contains line breaks",
        ));
    }
    if let Some(expr) = &rule.message_expression
        && !expr.is_empty()
        && expr.trim().is_empty()
    {
        errors.push(FieldError::required(
            &path.child("messageExpression"),
            "messageExpression must be non-empty if specified",
        ));
    }
    if let Some(reason) = &rule.reason
        && !SUPPORTED_REASONS.contains(&reason.as_str())
    {
        errors.push(FieldError::not_supported(
            &path.child("reason"),
            reason.as_str(),
            SUPPORTED_REASONS,
        ));
    }
    if let Some(field_path) = rule.field_path.as_deref().filter(|p| !p.is_empty()) {
        let at = path.child("fieldPath");
        if field_path.trim().is_empty() {
            errors.push(FieldError::invalid(
                &at,
                field_path,
                "fieldPath must be non-empty if specified",
            ));
        }
        if has_newlines(field_path) {
            errors.push(FieldError::invalid(
                &at,
                field_path,
                "fieldPath must not contain line breaks",
            ));
        }
        if valid_field_path(field_path, schema).is_none() {
            errors.push(FieldError::invalid(
                &at,
                field_path,
                "fieldPath must be a valid path",
            ));
        }
    }
}

/// A rule's `fieldPath` (`.spec.replicas`, `.labels['app']`) checked against the schema
/// and normalized as upstream's `ValidFieldPath` prints it (`spec.replicas`, `labels[app]`).
fn valid_field_path(json_path: &str, schema: &JSONSchemaProps) -> Option<String> {
    let mut out = String::new();
    let mut current = schema;
    let mut rest = json_path;
    let step = |name: &str, current: &mut &JSONSchemaProps, out: &mut String| -> Option<()> {
        if let Some(props) = &current.properties {
            *current = props.get(name)?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(name);
        } else if current.additional_properties.is_some() {
            *current = additional_of(current)?;
            out.push_str(&format!("[{name}]"));
        } else {
            return None;
        }
        Some(())
    };
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[', ']']).unwrap_or(after.len());
            let name = &after[..end];
            if name.is_empty() {
                return None;
            }
            step(name, &mut current, &mut out)?;
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("['") {
            // a quoted name: up to the first unescaped quote
            let mut name = String::new();
            let mut chars = after.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        let (_, e) = chars.next()?;
                        name.push(match e {
                            'a' => '\u{7}',
                            'b' => '\u{8}',
                            'f' => '\u{c}',
                            'n' => '\n',
                            'r' => '\r',
                            't' => '\t',
                            'v' => '\u{b}',
                            '\'' => '\'',
                            '\\' => '\\',
                            _ => return None,
                        });
                    }
                    '\'' => {
                        end = Some(i);
                        break;
                    }
                    c => name.push(c),
                }
            }
            let end = end?;
            rest = after[end + 1..].strip_prefix(']')?;
            step(&name, &mut current, &mut out)?;
        } else {
            return None;
        }
    }
    Some(out)
}

/// The CEL values of one evaluation, and the work left.
struct Run<'a> {
    env: &'a Arc<Env>,
    budget: i64,
    errors: ErrorList,
}

impl Validator {
    /// Whether the schema has no rules at all.
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// Runs every rule on `new`, the custom resource (or the part of it the schema was
    /// compiled for), with `old` its stored version on update. `path` is where `new` is
    /// (the root of a custom resource is `Path::default()`).
    ///
    /// Each rule sees its node's value as `self`; a rule using `oldSelf` (a transition rule)
    /// runs only where an old value correlates — fields of objects (unless
    /// `x-kubernetes-map-type: atomic`), entries of maps by key, items of lists of type
    /// `map` by their keys — unless it sets `optionalOldSelf`, which makes `oldSelf` an
    /// optional. JSON `null` values are not validated. A failing rule gives upstream's
    /// error, on `path` extended by its `fieldPath`: `Invalid value: "<type>": <message>`
    /// (`failed rule: <rule>` without message; the messageExpression's result if it
    /// evaluates to a non-empty single-line string), or Forbidden, Required or Duplicate as
    /// its `reason` says. An evaluation error gives
    /// `Invalid value: "<type>": <error> evaluating rule: <rule or message>`.
    ///
    /// Work is bounded before each evaluation: the cost of the rule is estimated from the
    /// sizes of the lists, maps and strings it iterates or scans in this very data
    /// (comprehensions multiply); over [`PER_CALL_LIMIT`] the rule is not run and
    /// validation stops with upstream's `call cost exceeds limit` error, and once all rules
    /// together would exceed [`RUNTIME_COST_BUDGET`] with its `running out of cost budget`
    /// error.
    pub fn validate(&self, new: &Json, old: Option<&Json>, path: &Path) -> ErrorList {
        let (Some(root), Ok(env)) = (&self.root, ENV.as_ref()) else {
            return ErrorList::new();
        };
        let mut run = Run {
            env,
            budget: RUNTIME_COST_BUDGET,
            errors: ErrorList::new(),
        };
        run.node(root, path, new, old);
        run.errors
    }
}

/// The key of a list item of a list of type `map`: its key fields, as JSON.
fn item_key(item: &Json, keys: &[String]) -> Option<String> {
    let object = item.as_object()?;
    let values: Vec<&Json> = keys
        .iter()
        .map(|k| object.get(k).unwrap_or(&Json::Null))
        .collect();
    serde_json::to_string(&values).ok()
}

impl Run<'_> {
    fn node(&mut self, node: &Node, path: &Path, new: &Json, old: Option<&Json>) {
        if new.is_null() || self.budget < 0 {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        self.expressions(node, path, new, old);
        if self.budget < 0 {
            return;
        }
        match new {
            Json::Array(items) => {
                let Some(item_node) = &node.items else {
                    return;
                };
                let mut old_items: HashMap<String, &Json> = HashMap::new();
                if let (Some(keys), Some(Json::Array(old))) = (&node.map_keys, old) {
                    for item in old {
                        if let Some(key) = item_key(item, keys) {
                            old_items.insert(key, item);
                        }
                    }
                }
                for (i, item) in items.iter().enumerate() {
                    let old_item = node
                        .map_keys
                        .as_ref()
                        .and_then(|keys| item_key(item, keys))
                        .and_then(|key| old_items.get(&key).copied());
                    self.node(item_node, &path.index(i), item, old_item);
                    if self.budget < 0 {
                        return;
                    }
                }
            }
            Json::Object(fields) => {
                let old_fields = old.and_then(Json::as_object).filter(|_| node.correlatable);
                for (key, value) in fields {
                    let old_value = old_fields.and_then(|o| o.get(key));
                    if let Some(sub) = &node.additional {
                        self.node(sub, &path.key(key), value, old_value);
                    } else if let Some(sub) = node.properties.get(key) {
                        self.node(sub, &path.child(key), value, old_value);
                    }
                    if self.budget < 0 {
                        return;
                    }
                }
            }
            _ => {}
        }
    }

    fn out_of_budget(&mut self, node: &Node, path: &Path) {
        self.errors.push(FieldError::invalid(
            path,
            node.type_name.as_str(),
            "validation failed due to running out of cost budget, no further validation rules will be run",
        ));
        self.budget = -1;
    }

    /// Charges the estimated cost of `program`; false (with the error reported) if over.
    fn charge(
        &mut self,
        node: &Node,
        path: &Path,
        program: &Program,
        data: &Data<'_>,
        what: &str,
    ) -> bool {
        let cost = check::estimate(program.expression(), data);
        if cost > PER_CALL_LIMIT {
            self.errors.push(FieldError::invalid(
                path,
                node.type_name.as_str(),
                format!(
                    "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for {what}"
                ),
            ));
            self.budget = -1;
            return false;
        }
        if cost as i64 > self.budget {
            self.out_of_budget(node, path);
            return false;
        }
        self.budget -= cost as i64;
        true
    }

    fn expressions(&mut self, node: &Node, path: &Path, new: &Json, old: Option<&Json>) {
        if node.rules.is_empty() {
            return;
        }
        if self.budget <= 0 {
            self.out_of_budget(node, path);
            return;
        }
        let self_value = to_cel(new, &node.shape);
        let old_value = old.map(|o| to_cel(o, &node.shape));
        let data = Data {
            self_value: &self_value,
            old_self: old_value.as_ref(),
        };
        for compiled in &node.rules {
            let rule = &compiled.rule;
            let optional = rule.optional_old_self == Some(true);
            if compiled.uses_old_self && old_value.is_none() && !optional {
                continue;
            }
            let shown = rule_error_string(rule);
            if !self.charge(
                node,
                path,
                &compiled.program,
                &data,
                &format!("rule: {shown}"),
            ) {
                return;
            }
            let old_self = if optional {
                Some(Value::Opaque(Arc::new(match &old_value {
                    Some(v) => OptionalValue::of(v.clone()),
                    None => OptionalValue::none(),
                })))
            } else {
                old_value.clone()
            };
            let result = self.run(&compiled.program, &self_value, old_self);
            match result {
                Ok(Value::Bool(true)) => continue,
                Ok(Value::Bool(false)) => {}
                Ok(_) | Err(ExecutionError::NoSuchOverload(_)) => {
                    self.errors.push(FieldError::invalid(
                        path,
                        node.type_name.as_str(),
                        format!("'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {shown}"),
                    ));
                    continue;
                }
                Err(e) => {
                    self.errors.push(FieldError::invalid(
                        path,
                        node.type_name.as_str(),
                        format!("{} evaluating rule: {shown}", error_text(&e)),
                    ));
                    continue;
                }
            }

            let at = match &compiled.field_path {
                Some(p) => path.child(p),
                None => path.clone(),
            };
            let mut detail = None;
            if let Some(message) = &compiled.message {
                if !self.charge(
                    node,
                    &at,
                    message,
                    &data,
                    &format!(
                        "messageExpression: {:?}",
                        rule.message_expression.as_deref().unwrap_or_default()
                    ),
                ) {
                    return;
                }
                // the messageExpression sees `oldSelf` as a plain value, as upstream
                if let Ok(Value::String(s)) = self.run(message, &self_value, old_value.clone()) {
                    let trimmed = s.trim();
                    if !trimmed.is_empty()
                        && trimmed.len() <= MAX_MESSAGE_EXPRESSION_BYTES
                        && !trimmed.contains('\n')
                    {
                        detail = Some(trimmed.to_owned());
                    }
                }
            }
            let detail = detail.unwrap_or_else(|| rule_message_or_default(rule));
            let error = match rule.reason.as_deref() {
                Some("FieldValueForbidden") => FieldError::forbidden(&at, detail),
                Some("FieldValueRequired") => FieldError::required(&at, detail),
                Some("FieldValueDuplicate") => FieldError::duplicate(&at, node.type_name.as_str()),
                _ => FieldError::invalid(&at, node.type_name.as_str(), detail),
            };
            self.errors.push(error);
        }
    }

    fn run(
        &self,
        program: &Program,
        self_value: &Value,
        old_self: Option<Value>,
    ) -> Result<Value, ExecutionError> {
        let mut context = Context::with_env(self.env.clone());
        let bound: Box<dyn Val> = self_value.clone().try_into()?;
        context.add_variable_as_val("self", bound);
        if let Some(old) = old_self {
            let bound: Box<dyn Val> = old.try_into()?;
            context.add_variable_as_val("oldSelf", bound);
        }
        program.execute(&context)
    }
}

/// cel-go's text of an evaluation error.
fn error_text(error: &ExecutionError) -> String {
    match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        ExecutionError::IndexOutOfBounds(index) => match index {
            Value::Int(i) => format!("index out of bounds: {i}"),
            other => format!("index out of bounds: {other:?}"),
        },
        ExecutionError::FunctionError { message, .. } => message.clone(),
        ExecutionError::UndeclaredReference(name) => {
            format!("undeclared reference to '{name}' (in container '')")
        }
        other => other.to_string(),
    }
}

/// A rule's message, or `failed rule: <rule>` (upstream `ruleMessageOrDefault`).
fn rule_message_or_default(rule: &ValidationRule) -> String {
    match rule.message.as_deref().filter(|m| !m.is_empty()) {
        Some(message) => message.trim().to_owned(),
        None => format!("failed rule: {}", rule.rule.trim()),
    }
}

/// A rule's message, or the rule (upstream `ruleErrorString`).
fn rule_error_string(rule: &ValidationRule) -> String {
    match rule.message.as_deref().filter(|m| !m.is_empty()) {
        Some(message) => message.trim().to_owned(),
        None => rule.rule.trim().to_owned(),
    }
}

#[cfg(test)]
mod tests;
