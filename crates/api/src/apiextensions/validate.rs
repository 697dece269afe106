//! Validation of custom resources against a structural schema: the OpenAPI v3 checks of
//! kube-openapi's `validate.SchemaValidator` as `pkg/apiserver/validation` turns them into
//! field errors, embedded resources (`schema/objectmeta/validation.go`) and
//! `x-kubernetes-list-type` set/map uniqueness (`schema/listtype/validation.go`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value};

use super::formats;
use super::structural::{NestedValueValidation, Structural, ValueValidation};
use crate::field::{ErrorList, ErrorType, FieldError, Path};
use crate::{meta, names};

/// Validates a custom resource (or any value) against `s` as the API server does on
/// create and update: the OpenAPI v3 keywords (types and `nullable`, formats, `enum`,
/// `pattern`, bounds, lengths, item and property counts, `required`,
/// `additionalProperties`, `allOf`/`anyOf`/`oneOf`/`not`), then the apiVersion, kind and
/// metadata of embedded resources (`x-kubernetes-embedded-resource`), then the uniqueness
/// of `x-kubernetes-list-type: set` items and `map` keys (`Duplicate value`).
///
/// Paths are under `path` (pass `Path::default()` for a whole object, giving
/// `spec.replicas`). The root's own metadata (name, labels, annotations, ...) is not
/// checked here: the registry validates it as for every kind. Call after defaulting and
/// pruning, as upstream does.
pub fn validate_object(s: &Structural, value: &Value, path: &Path) -> ErrorList {
    let mut errs = schema_errors(s, value, path, true);
    errs.extend(validate_embedded(s, value, path));
    errs.extend(validate_list_sets_and_maps(s, value, path));
    errs
}

/// The kube-openapi checks alone, as field errors under `root`. `int_or_string_typed`
/// says whether `x-kubernetes-int-or-string` means `type: [integer, string]` (custom
/// resources) or no type at all (default values, validated against `ToKubeOpenAPI`).
pub(crate) fn schema_errors(
    s: &Structural,
    value: &Value,
    root: &Path,
    int_or_string_typed: bool,
) -> ErrorList {
    let ctx = Ctx {
        int_or_string_typed,
    };
    let mut out = Vec::new();
    ctx.validate(View::S(s), value, "", &mut out);
    out.into_iter().map(|e| e.into_field_error(root)).collect()
}

#[derive(Clone, Copy)]
struct Ctx {
    int_or_string_typed: bool,
}

/// A schema node: a structural schema or a value validation nested under a junctor.
#[derive(Clone, Copy)]
enum View<'a> {
    S(&'a Structural),
    N(&'a NestedValueValidation),
}

impl<'a> View<'a> {
    fn types(self, ctx: Ctx) -> Vec<&'a str> {
        let (type_, int_or_string) = match self {
            View::S(s) => (s.generic.type_.as_str(), s.extensions.int_or_string),
            View::N(n) => (
                n.forbidden_generics.type_.as_str(),
                n.forbidden_extensions.int_or_string,
            ),
        };
        if int_or_string && ctx.int_or_string_typed {
            vec!["integer", "string"]
        } else if type_.is_empty() {
            Vec::new()
        } else {
            vec![type_]
        }
    }

    fn nullable(self) -> bool {
        match self {
            View::S(s) => s.generic.nullable,
            View::N(n) => n.forbidden_generics.nullable,
        }
    }

    fn validation(self) -> &'a ValueValidation {
        match self {
            View::S(s) => s.value_validation(),
            View::N(n) => &n.validation,
        }
    }

    fn property(self, name: &str) -> Option<View<'a>> {
        match self {
            View::S(s) => s.properties.get(name).map(View::S),
            View::N(n) => n.properties.get(name).map(View::N),
        }
    }

    fn property_names(self) -> Vec<&'a String> {
        match self {
            View::S(s) => s.properties.keys().collect(),
            View::N(n) => n.properties.keys().collect(),
        }
    }

    fn items(self) -> Option<View<'a>> {
        match self {
            View::S(s) => s.items.as_deref().map(View::S),
            View::N(n) => n.items.as_deref().map(View::N),
        }
    }

    /// `additionalProperties`: whether extra keys are allowed, and their schema.
    fn additional(self) -> Option<(bool, Option<View<'a>>)> {
        match self {
            View::S(s) => s
                .generic
                .additional_properties
                .as_ref()
                .map(|a| (a.allows, a.structural.as_deref().map(View::S))),
            View::N(n) => n
                .additional_properties
                .as_deref()
                .map(|a| (true, Some(View::N(a)))),
        }
    }
}

/// A kube-openapi error before it becomes a field error.
struct OErr {
    kind: OKind,
    /// kube-openapi's path (`spec.items[0].name`), empty at the root.
    name: String,
    value: Value,
    message: String,
}

enum OKind {
    Required,
    Enum(Vec<String>),
    TooLong(i64),
    TooMany(i64, i64),
    TypeInvalid,
    Invalid,
    /// A junctor's own message, reported at the root with an empty value.
    Composite,
}

impl OErr {
    fn new(kind: OKind, name: &str, value: Value, message: String) -> Self {
        OErr {
            kind,
            name: name.to_owned(),
            value,
            message,
        }
    }

    /// `kubeOpenAPIResultToFieldErrors`.
    fn into_field_error(self, root: &Path) -> FieldError {
        let path = if self.name.is_empty() || self.name == "." {
            root.clone()
        } else {
            root.child(self.name.trim_start_matches('.'))
        };
        let value = if self.value.is_null() {
            Value::from("")
        } else {
            self.value
        };
        match self.kind {
            OKind::Required => FieldError::required(&path, ""),
            OKind::Enum(values) => {
                let refs: Vec<&str> = values.iter().map(String::as_str).collect();
                FieldError::not_supported(&path, value, &refs)
            }
            OKind::TooLong(max) => FieldError::too_long(&path, usize::try_from(max).unwrap_or(0)),
            OKind::TooMany(actual, max) => FieldError {
                kind: ErrorType::TooMany,
                field: path,
                value: Some(Value::from(actual)),
                detail: format!(
                    "must have at most {max} {}",
                    if max == 1 { "item" } else { "items" }
                ),
            },
            OKind::TypeInvalid => FieldError {
                kind: ErrorType::TypeInvalid,
                field: path,
                value: Some(value),
                detail: self.message,
            },
            OKind::Invalid => FieldError::invalid(&path, value, self.message),
            OKind::Composite => FieldError::invalid(root, "", self.message),
        }
    }
}

/// The JSON type kube-openapi infers for a value.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A JSON number as Go holds it after decoding: int64 when it fits, else float64.
enum Num {
    Int(i64),
    Float(f64),
}

fn num(value: &Value) -> Option<Num> {
    let n = value.as_number()?;
    Some(match n.as_i64() {
        Some(i) => Num::Int(i),
        None => Num::Float(n.as_f64().unwrap_or(f64::NAN)),
    })
}

fn in_body(name: &str) -> String {
    format!("{name} in body")
}

/// `%q` of Go, close enough for paths and values.
fn quote(s: &str) -> String {
    format!("{s:?}")
}

impl Ctx {
    fn validate(self, view: View<'_>, data: &Value, name: &str, out: &mut Vec<OErr>) {
        if data.is_null() {
            self.type_check(view, data, name, out);
            self.enum_check(view, data, name, out);
            return;
        }
        self.type_check(view, data, name, out);
        self.junctors(view, data, name, out);
        let v = view.validation();
        if let Value::String(text) = data {
            self.string_check(v, text, name, out);
            self.format_check(v, text, name, out);
        }
        if data.is_number() {
            number_check(v, data, name, out);
        }
        if let Value::Array(items) = data {
            self.slice_check(view, items, name, out);
        }
        self.enum_check(view, data, name, out);
        if let Value::Object(map) = data {
            self.object_check(view, map, name, out);
        }
    }

    fn type_check(self, view: View<'_>, data: &Value, name: &str, out: &mut Vec<OErr>) {
        let types = view.types(self);
        let format = formats::supported(&view.validation().format)
            .map(|_| view.validation().format.clone())
            .unwrap_or_default();
        if types.is_empty() && format.is_empty() {
            return;
        }
        let fail = |expected: String, got: &str| {
            OErr::new(
                OKind::TypeInvalid,
                name,
                Value::from(got),
                format!(
                    "{} must be of type {expected}: {}",
                    in_body(name),
                    quote(got)
                ),
            )
        };
        if data.is_null() {
            if !types.is_empty() && !view.nullable() {
                out.push(fail(types.join(","), "null"));
            }
            return;
        }
        let got = json_type(data);
        let contains = |t: &str| types.contains(&t);
        let float_int = got == "number"
            && data
                .as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
            && contains("integer");
        let int_float = got == "integer" && contains("number");
        let stringish = matches!(data, Value::String(_) | Value::Array(_));
        if !(stringish || format.is_empty() || contains(got) || float_int || int_float) {
            let go_format = match got {
                "integer" => "int64",
                "number" => "float64",
                _ => "",
            };
            out.push(fail(format, go_format));
            return;
        }
        if stringish && !(contains("number") || contains("integer") || format.is_empty()) {
            return;
        }
        if !(contains(got) || float_int || int_float) {
            out.push(fail(types.join(","), got));
        }
    }

    fn junctors(self, view: View<'_>, data: &Value, name: &str, out: &mut Vec<OErr>) {
        let v = view.validation();
        let run = |n: &NestedValueValidation| {
            let mut errs = Vec::new();
            self.validate(View::N(n), data, name, &mut errs);
            errs
        };
        if !v.any_of.is_empty() {
            let mut best: Option<Vec<OErr>> = None;
            let mut ok = false;
            for n in &v.any_of {
                let errs = run(n);
                if errs.is_empty() {
                    ok = true;
                    best = None;
                    break;
                }
                if best.as_ref().is_none_or(|b| errs.len() < b.len()) {
                    best = Some(errs);
                }
            }
            if !ok {
                out.push(OErr::new(
                    OKind::Composite,
                    name,
                    Value::Null,
                    format!("{} must validate at least one schema (anyOf)", quote(name)),
                ));
            }
            out.extend(best.into_iter().flatten());
        }
        if !v.one_of.is_empty() {
            let mut best: Option<Vec<OErr>> = None;
            let mut valid = 0;
            for n in &v.one_of {
                let errs = run(n);
                if errs.is_empty() {
                    valid += 1;
                    best = None;
                } else if valid == 0 && best.as_ref().is_none_or(|b| errs.len() < b.len()) {
                    best = Some(errs);
                }
            }
            if valid != 1 {
                let more = if valid == 0 {
                    "Found none valid".to_owned()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                out.push(OErr::new(
                    OKind::Composite,
                    name,
                    Value::Null,
                    format!(
                        "{} must validate one and only one schema (oneOf). {more}",
                        quote(name)
                    ),
                ));
                out.extend(best.into_iter().flatten());
            }
        }
        if !v.all_of.is_empty() {
            let mut valid = 0;
            for n in &v.all_of {
                let errs = run(n);
                if errs.is_empty() {
                    valid += 1;
                }
                out.extend(errs);
            }
            if valid != v.all_of.len() {
                let more = if valid == 0 { ". None validated" } else { "" };
                out.push(OErr::new(
                    OKind::Composite,
                    name,
                    Value::Null,
                    format!(
                        "{} must validate all the schemas (allOf){more}",
                        quote(name)
                    ),
                ));
            }
        }
        if let Some(not) = &v.not
            && run(not).is_empty()
        {
            out.push(OErr::new(
                OKind::Composite,
                name,
                Value::Null,
                format!("{} must not validate the schema (not)", quote(name)),
            ));
        }
    }

    /// maxLength, minLength, pattern; the first failure only, as kube-openapi.
    fn string_check(self, v: &ValueValidation, text: &str, name: &str, out: &mut Vec<OErr>) {
        let len = i64::try_from(text.chars().count()).unwrap_or(i64::MAX);
        if let Some(max) = v.max_length
            && len > max
        {
            out.push(OErr::new(
                OKind::TooLong(max),
                name,
                Value::from(text),
                format!("{} should be at most {max} chars long", in_body(name)),
            ));
            return;
        }
        if let Some(min) = v.min_length
            && len < min
        {
            out.push(OErr::new(
                OKind::Invalid,
                name,
                Value::from(text),
                format!("{} should be at least {min} chars long", in_body(name)),
            ));
            return;
        }
        if !v.pattern.is_empty() {
            let shown = match formats::regex_match(&v.pattern, text) {
                Ok(true) => return,
                Ok(false) => v.pattern.clone(),
                Err(why) => format!("{}, but pattern is invalid: {why}", v.pattern),
            };
            out.push(OErr::new(
                OKind::Invalid,
                name,
                Value::from(text),
                format!("{} should match '{shown}'", in_body(name)),
            ));
        }
    }

    fn format_check(self, v: &ValueValidation, text: &str, name: &str, out: &mut Vec<OErr>) {
        if let Some(normalized) = formats::supported(&v.format)
            && !formats::valid(&normalized, text)
        {
            out.push(OErr::new(
                OKind::TypeInvalid,
                name,
                Value::from(text),
                format!(
                    "{} must be of type {}: {}",
                    in_body(name),
                    v.format,
                    quote(text)
                ),
            ));
        }
    }

    fn slice_check(self, view: View<'_>, items: &[Value], name: &str, out: &mut Vec<OErr>) {
        if let Some(item_view) = view.items() {
            for (i, item) in items.iter().enumerate() {
                self.validate(item_view, item, &format!("{name}[{i}]"), out);
            }
        }
        let v = view.validation();
        let size = i64::try_from(items.len()).unwrap_or(i64::MAX);
        if let Some(min) = v.min_items
            && size < min
        {
            out.push(OErr::new(
                OKind::Invalid,
                name,
                Value::from(size),
                format!("{} should have at least {min} items", in_body(name)),
            ));
        }
        if let Some(max) = v.max_items
            && size > max
        {
            out.push(OErr::new(
                OKind::TooMany(size, max),
                name,
                Value::from(size),
                String::new(),
            ));
        }
        if v.unique_items {
            let mut seen = BTreeSet::new();
            if items.iter().any(|i| !seen.insert(i.to_string())) {
                out.push(OErr::new(
                    OKind::Invalid,
                    name,
                    Value::Null,
                    format!("{} shouldn't contain duplicates", in_body(name)),
                ));
            }
        }
    }

    fn enum_check(self, view: View<'_>, data: &Value, name: &str, out: &mut Vec<OErr>) {
        let allowed = &view.validation().enum_;
        if allowed.is_empty() || allowed.iter().any(|e| enum_equal(data, e)) {
            return;
        }
        let values: Vec<String> = allowed
            .iter()
            .map(|e| match e {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let listed: Vec<String> = allowed.iter().map(go_print).collect();
        out.push(OErr::new(
            OKind::Enum(values),
            name,
            data.clone(),
            format!("{} should be one of [{}]", in_body(name), listed.join(" ")),
        ));
    }

    fn object_check(
        self,
        view: View<'_>,
        map: &Map<String, Value>,
        name: &str,
        out: &mut Vec<OErr>,
    ) {
        let v = view.validation();
        let count = i64::try_from(map.len()).unwrap_or(i64::MAX);
        if let Some(min) = v.min_properties
            && count < min
        {
            out.push(OErr::new(
                OKind::Invalid,
                name,
                Value::from(count),
                format!("{} should have at least {min} properties", in_body(name)),
            ));
            return;
        }
        if let Some(max) = v.max_properties
            && count > max
        {
            out.push(OErr::new(
                OKind::TooMany(count, max),
                name,
                Value::from(count),
                String::new(),
            ));
            return;
        }
        let keys: BTreeSet<&String> = map.keys().collect();
        match view.additional() {
            Some((false, _)) => {
                for key in &keys {
                    if view.property(key).is_none() {
                        out.push(OErr::new(
                            OKind::Invalid,
                            name,
                            Value::from(key.as_str()),
                            format!("{name}.{key} in body is a forbidden property"),
                        ));
                    }
                }
            }
            Some((true, Some(additional))) => {
                for key in &keys {
                    if view.property(key).is_none() {
                        self.validate(
                            additional,
                            &map[key.as_str()],
                            &format!("{name}.{key}"),
                            out,
                        );
                    }
                }
            }
            _ => {}
        }
        for prop in view.property_names() {
            if let (Some(value), Some(prop_view)) = (map.get(prop.as_str()), view.property(prop)) {
                let child = if name.is_empty() {
                    prop.clone()
                } else {
                    format!("{name}.{prop}")
                };
                self.validate(prop_view, value, &child, out);
            }
        }
        for required in &v.required {
            if !map.contains_key(required) {
                let child = format!("{name}.{required}");
                out.push(OErr::new(
                    OKind::Required,
                    &child,
                    Value::Null,
                    format!("{child} in body is required"),
                ));
            }
        }
    }
}

/// kube-openapi's enum comparison: equal after converting the value to the enum
/// member's Go type (so `1` matches `1.0`).
fn enum_equal(data: &Value, member: &Value) -> bool {
    match (num(data), num(member)) {
        (Some(a), Some(b)) => match (a, b) {
            (Num::Int(a), Num::Int(b)) => a == b,
            (Num::Int(a), Num::Float(b)) => (a as f64) == b,
            (Num::Float(a), Num::Int(b)) => a as i64 == b,
            (Num::Float(a), Num::Float(b)) => a == b,
        },
        _ => data == member,
    }
}

/// Go's `%v` of a decoded JSON value, for enum lists in messages.
fn go_print(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::String(s) => s.clone(),
        Value::Number(_) => match num(value) {
            Some(Num::Int(i)) => i.to_string(),
            Some(Num::Float(f)) => formats::go_float(f),
            None => value.to_string(),
        },
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_print).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => format!(
            "map[{}]",
            map.iter()
                .map(|(k, v)| format!("{k}:{}", go_print(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Value::Bool(b) => b.to_string(),
    }
}

/// multipleOf, minimum, maximum (kube-openapi's `numberValidator`), integers compared
/// as integers (the bound truncated) and floats as floats.
fn number_check(v: &ValueValidation, data: &Value, name: &str, out: &mut Vec<OErr>) {
    let Some(n) = num(data) else {
        return;
    };
    let as_f = match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    };
    if let Some(factor) = v.multiple_of {
        let failed = match n {
            Num::Int(i) if factor >= 1.0 => {
                let f = factor as i64;
                (f != 0 && i % f != 0).then(|| f.to_string())
            }
            _ if factor < 0.0 => {
                out.push(OErr::new(
                    OKind::Invalid,
                    name,
                    Value::from(factor),
                    format!(
                        "factor MultipleOf declared for {name} must be positive: {}",
                        formats::go_float(factor)
                    ),
                ));
                None
            }
            _ => {
                let mult = if factor < 1.0 {
                    1.0 / factor * as_f
                } else {
                    as_f / factor
                };
                (mult.fract() != 0.0 || !mult.is_finite()).then(|| formats::go_float(factor))
            }
        };
        if let Some(shown) = failed {
            out.push(OErr::new(
                OKind::Invalid,
                name,
                data.clone(),
                format!("{} should be a multiple of {shown}", in_body(name)),
            ));
        }
    }
    if let Some(min) = v.minimum {
        let (below, shown) = match n {
            Num::Int(i) => {
                let m = min as i64;
                (
                    if v.exclusive_minimum { i <= m } else { i < m },
                    m.to_string(),
                )
            }
            Num::Float(f) => (
                if v.exclusive_minimum {
                    f <= min
                } else {
                    f < min
                },
                formats::go_float(min),
            ),
        };
        if below {
            let relation = if v.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            out.push(OErr::new(
                OKind::Invalid,
                name,
                data.clone(),
                format!("{} should be {relation} {shown}", in_body(name)),
            ));
        }
    }
    if let Some(max) = v.maximum {
        let (above, shown) = match n {
            Num::Int(i) => {
                let m = max as i64;
                (
                    if v.exclusive_maximum { i >= m } else { i > m },
                    m.to_string(),
                )
            }
            Num::Float(f) => (
                if v.exclusive_maximum {
                    f >= max
                } else {
                    f > max
                },
                formats::go_float(max),
            ),
        };
        if above {
            let relation = if v.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            out.push(OErr::new(
                OKind::Invalid,
                name,
                data.clone(),
                format!("{} should be {relation} {shown}", in_body(name)),
            ));
        }
    }
}

/// Upstream `objectmeta.Validate` without the root: apiVersion and kind required and well
/// formed, metadata a valid ObjectMeta, for every `x-kubernetes-embedded-resource`.
pub(crate) fn validate_embedded(s: &Structural, value: &Value, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    match value {
        Value::Object(map) => {
            if s.extensions.embedded_resource {
                errs.extend(embedded_resource(map, path));
            }
            for (key, child) in sorted(map) {
                if let Some(prop) = s.properties.get(key) {
                    errs.extend(validate_embedded(prop, child, &path.child(key)));
                } else if let Some(additional) = s.additional_properties_schema() {
                    errs.extend(validate_embedded(additional, child, &path.key(key)));
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, item) in items.iter().enumerate() {
                    errs.extend(validate_embedded(item_schema, item, &path.index(i)));
                }
            }
        }
        _ => {}
    }
    errs
}

fn sorted(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let ordered: BTreeMap<&String, &Value> = map.iter().collect();
    ordered.into_iter().collect()
}

/// `validateEmbeddedResource`.
fn embedded_resource(map: &Map<String, Value>, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    for required in ["apiVersion", "kind"] {
        if !map.contains_key(required) {
            errs.push(FieldError::required(&path.child(required), ""));
        }
    }
    for (key, value) in sorted(map) {
        match key.as_str() {
            "apiVersion" => match value.as_str() {
                None => errs.push(FieldError::invalid(
                    &path.child("apiVersion"),
                    value.clone(),
                    "must be a string",
                )),
                Some("") => errs.push(FieldError::invalid(
                    &path.child("apiVersion"),
                    "",
                    "must not be empty",
                )),
                Some(api_version) if api_version != "/" && api_version.matches('/').count() > 1 => {
                    errs.push(FieldError::invalid(
                        &path.child("apiVersion"),
                        api_version,
                        format!("unexpected GroupVersion string: {api_version}"),
                    ))
                }
                Some(_) => {}
            },
            "kind" => match value.as_str() {
                None => errs.push(FieldError::invalid(
                    &path.child("kind"),
                    value.clone(),
                    "must be a string",
                )),
                Some("") => errs.push(FieldError::invalid(
                    &path.child("kind"),
                    "",
                    "must not be empty",
                )),
                Some(kind) => {
                    let problems = names::is_dns1035_label(&kind.to_lowercase());
                    if !problems.is_empty() {
                        errs.push(FieldError::invalid(
                            &path.child("kind"),
                            kind,
                            format!(
                                "may have mixed case, but should otherwise match: {}",
                                problems.join(",")
                            ),
                        ));
                    }
                }
            },
            "metadata" => match serde_json::from_value::<ObjectMeta>(value.clone()) {
                Err(err) => errs.push(FieldError::invalid(
                    &path.child("metadata"),
                    value.clone(),
                    err.to_string(),
                )),
                Ok(mut object_meta) => {
                    if object_meta.name.as_deref().unwrap_or_default().is_empty() {
                        object_meta.name = Some("fakename".to_owned());
                    }
                    let namespaced = object_meta
                        .namespace
                        .as_deref()
                        .is_some_and(|ns| !ns.is_empty());
                    errs.extend(meta::validate_object_meta(
                        &object_meta,
                        namespaced,
                        names::validate_path_segment_name,
                        &path.child("metadata"),
                    ));
                }
            },
            _ => {}
        }
    }
    errs
}

/// Upstream `ValidateListSetsAndMaps`: no two equal items in a `set`, no two items with
/// the same key fields in a `map` (`Duplicate value` at the later item).
pub(crate) fn validate_list_sets_and_maps(s: &Structural, value: &Value, path: &Path) -> ErrorList {
    let Value::Object(map) = value else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    for (key, child) in sorted(map) {
        if let Some(prop) = s.properties.get(key) {
            errs.extend(list_value(prop, child, &path.child(key)));
        } else if let Some(additional) = s.additional_properties_schema() {
            errs.extend(list_value(additional, child, &path.key(key)));
        }
    }
    errs
}

fn list_value(s: &Structural, value: &Value, path: &Path) -> ErrorList {
    match value {
        Value::Array(items) => list_array(s, items, path),
        Value::Object(_) => validate_list_sets_and_maps(s, value, path),
        _ => Vec::new(),
    }
}

fn list_array(s: &Structural, items: &[Value], path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    match s.extensions.list_type.as_deref() {
        Some("set") => {
            for i in non_unique(items) {
                errs.push(FieldError::duplicate(&path.index(i), items[i].clone()));
            }
        }
        Some("map") => errs.extend(list_map(s, items, path)),
        _ => {}
    }
    if let Some(item_schema) = s.items.as_deref() {
        for (i, item) in items.iter().enumerate() {
            errs.extend(list_value(item_schema, item, &path.index(i)));
        }
    }
    errs
}

/// The index of the second appearance of every repeated value.
fn non_unique(items: &[Value]) -> Vec<usize> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut repeated = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let count = seen.entry(item.to_string()).or_insert(0);
        *count += 1;
        if *count == 2 {
            repeated.push(i);
        }
    }
    repeated
}

fn list_map(s: &Structural, items: &[Value], path: &Path) -> ErrorList {
    for (i, item) in items.iter().enumerate() {
        if !item.is_null() && !item.is_object() {
            return vec![FieldError::invalid(
                &path.index(i),
                item.clone(),
                "must be an object for an array of list-type map",
            )];
        }
    }
    if items.len() <= 1 {
        return Vec::new();
    }
    // Keys as objects of the key fields present; a missing single key is "unspecified",
    // distinct from any value (upstream's unspecifiedKeyValue).
    let keys: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut key = Map::new();
            if let Value::Object(fields) = item {
                for name in &s.extensions.list_map_keys {
                    if let Some(v) = fields.get(name) {
                        key.insert(name.clone(), v.clone());
                    }
                }
            }
            Value::Object(key)
        })
        .collect();
    non_unique(&keys)
        .into_iter()
        .map(|i| FieldError::duplicate(&path.index(i), keys[i].clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
    use serde_json::json;

    fn schema(v: Value) -> Structural {
        let props: JSONSchemaProps = serde_json::from_value(v).expect("schema");
        Structural::new(&props).expect("structural")
    }

    fn messages(s: &Structural, value: Value) -> Vec<String> {
        validate_object(s, &value, &Path::default())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn openapi_keywords_report_upstream_messages() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
                        "size": {"type": "string", "enum": ["small", "large"]},
                        "name": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
                        "id": {"type": "string", "format": "uuid"},
                        "ratio": {"type": "number", "multipleOf": 0.5, "nullable": true},
                        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                        "port": {"x-kubernetes-int-or-string": true},
                        "labels": {"type": "object", "maxProperties": 1,
                                   "additionalProperties": {"type": "string"}}
                    }
                }
            }
        }));
        assert!(
            messages(
                &s,
                json!({"spec": {"size": "small", "replicas": 3, "ratio": null,
            "port": "http", "labels": {"a": "b"}}})
            )
            .is_empty()
        );
        let got = messages(
            &s,
            json!({"spec": {"replicas": "3", "name": "abc1", "id": "x", "ratio": 0.7,
                "tags": ["a", "b", "c"], "port": true, "labels": {"a": "b", "c": "d"}}}),
        );
        assert_eq!(
            got,
            vec![
                r#"spec.id: Invalid value: "x": spec.id in body must be of type uuid: "x""#,
                r#"spec.labels: Too many: 2: must have at most 1 item"#,
                r#"spec.name: Invalid value: "abc1": spec.name in body should match '^[a-z]+$'"#,
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
                r#"spec.ratio: Invalid value: 0.7: spec.ratio in body should be a multiple of 0.5"#,
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
                r#"spec.tags: Too many: 3: must have at most 2 items"#,
                r#"spec.size: Required value"#,
            ]
        );
        let got = messages(
            &s,
            json!({"spec": {"size": "medium", "replicas": -1, "name": "abcdefg"}}),
        );
        assert_eq!(
            got,
            vec![
                r#"spec.name: Too long: may not be more than 5 bytes"#,
                r#"spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"#,
                r#"spec.size: Unsupported value: "medium": supported values: "small", "large""#,
            ]
        );
        assert_eq!(
            messages(&s, json!({"spec": null})),
            vec![r#"spec: Invalid value: "null": spec in body must be of type object: "null""#]
        );
    }

    #[test]
    fn junctors_and_forbidden_properties() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "anyOf": [{"pattern": "^x"}, {"pattern": "^y"}]},
                "b": {"type": "object", "additionalProperties": false}
            }
        }));
        let got = messages(&s, json!({"a": "z", "b": {"c": 1}}));
        assert_eq!(
            got,
            vec![
                r#": Invalid value: "": "a" must validate at least one schema (anyOf)"#,
                r#"a: Invalid value: "z": a in body should match '^x'"#,
                r#"b: Invalid value: "c": b.c in body is a forbidden property"#,
            ]
        );
    }

    #[test]
    fn list_sets_maps_and_embedded_resources() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"],
                                    "properties": {"name": {"type": "string"}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "x-kubernetes-preserve-unknown-fields": true}
            }
        }));
        let got = messages(
            &s,
            json!({"tags": ["a", "b", "a"], "ports": [{"name": "x"}, {"name": "x"}],
                   "template": {"kind": "Pod", "metadata": {"name": "Bad_Name", "labels": {"a": "b"}}}}),
        );
        assert_eq!(
            got,
            vec![
                "template.apiVersion: Required value",
                r#"ports[1]: Duplicate value: {"name":"x"}"#,
                r#"tags[2]: Duplicate value: "a""#,
            ]
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
        );
    }
}
