//! The Kubernetes CEL libraries the `cel` crate lacks, as upstream's
//! `k8s.io/apiserver/pkg/cel/library`: the list functions (`isSorted`, `sum`, `min`, `max`,
//! `indexOf`, `lastIndexOf`), the URL library (`url`, `isURL`, `getScheme`, `getHost`,
//! `getHostname`, `getPort`, `getEscapedPath`, `getQuery`) and the read-only part of the
//! quantity library (`quantity`, `isQuantity`, `isInteger`, `asInteger`, `asApproximateFloat`,
//! `sign`, `isGreaterThan`, `isLessThan`, `compareTo`).
//!
//! Every function converts its arguments to [`Value`]s, so it works on any list or map the
//! interpreter hands it, and reports a wrong argument type as upstream's runtime
//! `no such overload`.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{DYN_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

/// The function names the environment knows, for the static check of a rule: global
/// functions (`size(x)`) and member functions (`x.size()`). Operators are not listed.
pub(crate) const GLOBAL_FUNCTIONS: &[&str] = &[
    "size",
    "matches",
    "string",
    "int",
    "uint",
    "double",
    "bool",
    "bytes",
    "dyn",
    "type",
    "duration",
    "timestamp",
    "optional.of",
    "optional.none",
    "optional.ofNonZeroValue",
    "strings.quote",
    "url",
    "isURL",
    "quantity",
    "isQuantity",
];

/// Member functions, see [`GLOBAL_FUNCTIONS`].
pub(crate) const MEMBER_FUNCTIONS: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    "hasValue",
    "value",
    "or",
    "orValue",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "join",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "split",
    "substring",
    "format",
    "reverse",
    "isSorted",
    "sum",
    "min",
    "max",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "sign",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
];

/// Registers this library's overloads on `env`.
pub(crate) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], url)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url)?;
    env.add_member_overload("getScheme", "url_get_scheme", DYN_TYPE, vec![], get_scheme)?;
    env.add_member_overload("getHost", "url_get_host", DYN_TYPE, vec![], get_host)?;
    env.add_member_overload(
        "getHostname",
        "url_get_hostname",
        DYN_TYPE,
        vec![],
        get_hostname,
    )?;
    env.add_member_overload("getPort", "url_get_port", DYN_TYPE, vec![], get_port)?;
    env.add_member_overload(
        "getEscapedPath",
        "url_get_escaped_path",
        DYN_TYPE,
        vec![],
        get_escaped_path,
    )?;
    env.add_member_overload("getQuery", "url_get_query", DYN_TYPE, vec![], get_query)?;
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        quantity,
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        is_quantity,
    )?;
    env.add_member_overload(
        "isInteger",
        "quantity_is_integer",
        DYN_TYPE,
        vec![],
        is_integer,
    )?;
    env.add_member_overload(
        "asInteger",
        "quantity_as_integer",
        DYN_TYPE,
        vec![],
        as_integer,
    )?;
    env.add_member_overload(
        "asApproximateFloat",
        "quantity_as_float",
        DYN_TYPE,
        vec![],
        as_approximate_float,
    )?;
    env.add_member_overload("sign", "quantity_sign", DYN_TYPE, vec![], sign)?;
    env.add_member_overload(
        "isGreaterThan",
        "quantity_is_greater_than",
        DYN_TYPE,
        vec![DYN_TYPE],
        is_greater_than,
    )?;
    env.add_member_overload(
        "isLessThan",
        "quantity_is_less_than",
        DYN_TYPE,
        vec![DYN_TYPE],
        is_less_than,
    )?;
    env.add_member_overload(
        "compareTo",
        "quantity_compare_to",
        DYN_TYPE,
        vec![DYN_TYPE],
        compare_to,
    )?;
    Ok(())
}

/// The arguments as [`Value`]s.
fn values(args: &[CowVal<'_, '_>]) -> Result<Vec<Value>, ExecutionError> {
    args.iter().map(|a| Value::try_from(a.as_ref())).collect()
}

/// A [`Value`] as an overload's result.
fn ret<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let boxed: Box<dyn Val> = value.try_into()?;
    Ok(CowVal::from(boxed))
}

fn no_overload(function: &str, args: &[Value]) -> ExecutionError {
    ExecutionError::no_such_member_overload(
        function,
        args.iter().map(|a| a.type_of().to_string()).collect(),
    )
}

/// The list receiver of a list function.
fn list_arg<'a>(function: &str, args: &'a [Value]) -> Result<&'a [Value], ExecutionError> {
    match args.first() {
        Some(Value::List(items)) => Ok(items.as_slice()),
        _ => Err(no_overload(function, args)),
    }
}

/// CEL's ordering of two comparable values of one type (numbers compare across types).
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::UInt(x), Value::UInt(y)) => Some(x.cmp(y)),
        (Value::Int(x), Value::UInt(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Value::UInt(x), Value::Int(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y),
        (Value::Int(x), Value::Float(y)) => (*x as f64).partial_cmp(y),
        (Value::Float(x), Value::Int(y)) => x.partial_cmp(&(*y as f64)),
        (Value::UInt(x), Value::Float(y)) => (*x as f64).partial_cmp(y),
        (Value::Float(x), Value::UInt(y)) => x.partial_cmp(&(*y as f64)),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Bytes(x), Value::Bytes(y)) => Some(x.cmp(y)),
        (Value::Duration(x), Value::Duration(y)) => Some(x.cmp(y)),
        (Value::Timestamp(x), Value::Timestamp(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let items = list_arg("isSorted", &args)?;
    for pair in items.windows(2) {
        match compare(&pair[0], &pair[1]) {
            Some(Ordering::Greater) => return ret(Value::Bool(false)),
            Some(_) => {}
            None => return Err(no_overload("isSorted", &args)),
        }
    }
    ret(Value::Bool(true))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let items = list_arg("sum", &args)?;
    let overflow = || ExecutionError::function_error("sum", "integer overflow");
    let total = match items.first() {
        None | Some(Value::Int(_)) => {
            let mut total: i64 = 0;
            for item in items {
                let Value::Int(n) = item else {
                    return Err(no_overload("sum", &args));
                };
                total = total.checked_add(*n).ok_or_else(overflow)?;
            }
            Value::Int(total)
        }
        Some(Value::UInt(_)) => {
            let mut total: u64 = 0;
            for item in items {
                let Value::UInt(n) = item else {
                    return Err(no_overload("sum", &args));
                };
                total = total.checked_add(*n).ok_or_else(overflow)?;
            }
            Value::UInt(total)
        }
        Some(Value::Float(_)) => {
            let mut total = 0.0;
            for item in items {
                let Value::Float(n) = item else {
                    return Err(no_overload("sum", &args));
                };
                total += n;
            }
            Value::Float(total)
        }
        Some(Value::Duration(_)) => {
            let mut total = chrono::Duration::zero();
            for item in items {
                let Value::Duration(d) = item else {
                    return Err(no_overload("sum", &args));
                };
                total = total.checked_add(d).ok_or_else(overflow)?;
            }
            Value::Duration(total)
        }
        Some(_) => return Err(no_overload("sum", &args)),
    };
    ret(total)
}

fn extreme(name: &str, args: &[Value], wanted: Ordering) -> Result<Value, ExecutionError> {
    let items = list_arg(name, args)?;
    let Some(mut best) = items.first() else {
        return Err(ExecutionError::function_error(
            name,
            format!("{name}(list) argument must not be empty"),
        ));
    };
    for item in &items[1..] {
        match compare(item, best) {
            Some(order) if order == wanted => best = item,
            Some(_) => {}
            None => return Err(no_overload(name, args)),
        }
    }
    Ok(best.clone())
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ret(extreme("min", &values(&args)?, Ordering::Less)?)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ret(extreme("max", &values(&args)?, Ordering::Greater)?)
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let items = list_arg("indexOf", &args)?;
    let needle = args.get(1).ok_or_else(|| no_overload("indexOf", &args))?;
    let found = items.iter().position(|item| item == needle);
    ret(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let items = list_arg("lastIndexOf", &args)?;
    let needle = args
        .get(1)
        .ok_or_else(|| no_overload("lastIndexOf", &args))?;
    let found = items.iter().rposition(|item| item == needle);
    ret(Value::Int(found.map_or(-1, |i| i as i64)))
}

/// A URL as upstream's `url()` parses it (Go's `url.ParseRequestURI`): an absolute URI or
/// an absolute path, no fragment.
#[derive(Debug, PartialEq, Eq)]
struct Url {
    scheme: String,
    host: String,
    path: String,
    query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

impl Url {
    fn parse(text: &str) -> Option<Url> {
        if text.contains('#') || text.chars().any(|c| c.is_control() || c == ' ') {
            return None;
        }
        let (rest, query) = match text.split_once('?') {
            Some((rest, query)) => (rest, query.to_owned()),
            None => (text, String::new()),
        };
        if rest.starts_with('/') {
            return Some(Url {
                scheme: String::new(),
                host: String::new(),
                path: rest.to_owned(),
                query,
            });
        }
        let (scheme, after) = rest.split_once(':')?;
        let mut chars = scheme.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
        if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) {
            return None;
        }
        let (host, path) = match after.strip_prefix("//") {
            Some(authority) => {
                let (host, path) = match authority.find('/') {
                    Some(i) => (&authority[..i], &authority[i..]),
                    None => (authority, ""),
                };
                let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
                (host.to_owned(), path.to_owned())
            }
            None if after.starts_with('/') => (String::new(), after.to_owned()),
            // an opaque URI such as `mailto:x` is no request URI
            None => return None,
        };
        Some(Url {
            scheme: scheme.to_owned(),
            host,
            path,
            query,
        })
    }

    fn hostname_and_port(&self) -> (&str, &str) {
        let host = self.host.as_str();
        if let Some(rest) = host.strip_prefix('[') {
            return match rest.split_once(']') {
                Some((ip, after)) => (ip, after.strip_prefix(':').unwrap_or("")),
                None => (host, ""),
            };
        }
        match host.rsplit_once(':') {
            Some((name, port)) => (name, port),
            None => (host, ""),
        }
    }

    fn query_map(&self) -> Value {
        let mut map: std::collections::HashMap<String, Vec<Value>> = Default::default();
        for pair in self.query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            map.entry(unescape(key))
                .or_default()
                .push(Value::String(Arc::new(unescape(value))));
        }
        let map: std::collections::HashMap<String, Value> = map
            .into_iter()
            .map(|(k, v)| (k, Value::List(Arc::new(v))))
            .collect();
        Value::from(map)
    }
}

/// Query unescaping: `+` is a space, `%XX` a byte; a malformed escape stays as written.
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() && text.is_char_boundary(i + 3) => {
                match u8::from_str_radix(&text[i + 1..i + 3], 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn string_arg(function: &str, args: &[Value]) -> Result<Arc<String>, ExecutionError> {
    match args.first() {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(ExecutionError::no_such_overload(
            function,
            args.iter().map(|a| a.type_of().to_string()).collect(),
        )),
    }
}

fn url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let text = string_arg("url", &args)?;
    match Url::parse(&text) {
        Some(url) => ret(Value::Opaque(Arc::new(url))),
        None => Err(ExecutionError::function_error(
            "url",
            format!(
                "URL parse error during conversion from string: parse {text:?}: invalid URI for request"
            ),
        )),
    }
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let text = string_arg("isURL", &args)?;
    ret(Value::Bool(Url::parse(&text).is_some()))
}

fn quantity_of(text: &str) -> Option<f64> {
    crate::quantity::parse(&K8sQuantity(text.to_owned()))
}

/// A resource quantity (`500m`, `1Gi`), kept and compared as its approximate value.
#[derive(Debug)]
struct Quantity {
    value: f64,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl Eq for Quantity {}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

fn quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let text = string_arg("quantity", &args)?;
    match quantity_of(&text) {
        Some(value) => ret(Value::Opaque(Arc::new(Quantity { value }))),
        None => Err(ExecutionError::function_error(
            "quantity",
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        )),
    }
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let text = string_arg("isQuantity", &args)?;
    ret(Value::Bool(quantity_of(&text).is_some()))
}

/// Defines a receiver-only overload on an opaque value of type `$ty`, computing the result
/// from it with `$body`.
macro_rules! accessor {
    ($name:ident, $cel:literal, $ty:ident, |$v:ident| $body:expr) => {
        fn $name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let args = values(&args)?;
            let $v = args
                .first()
                .and_then(|a| match a {
                    Value::Opaque(o) => o.downcast_ref::<$ty>(),
                    _ => None,
                })
                .ok_or_else(|| no_overload($cel, &args))?;
            let result: Result<Value, ExecutionError> = $body;
            ret(result?)
        }
    };
}

fn text(s: &str) -> Value {
    Value::String(Arc::new(s.to_owned()))
}

accessor!(get_scheme, "getScheme", Url, |u| Ok(text(&u.scheme)));
accessor!(get_host, "getHost", Url, |u| Ok(text(&u.host)));
accessor!(get_hostname, "getHostname", Url, |u| Ok(text(
    u.hostname_and_port().0
)));
accessor!(get_port, "getPort", Url, |u| Ok(text(
    u.hostname_and_port().1
)));
accessor!(get_escaped_path, "getEscapedPath", Url, |u| Ok(text(
    &u.path
)));
accessor!(get_query, "getQuery", Url, |u| Ok(u.query_map()));

accessor!(is_integer, "isInteger", Quantity, |q| Ok(Value::Bool(
    q.value.fract() == 0.0 && q.value.abs() < 9.2e18
)));
accessor!(as_integer, "asInteger", Quantity, |q| {
    if q.value.fract() == 0.0 && q.value.abs() < 9.2e18 {
        Ok(Value::Int(q.value as i64))
    } else {
        Err(ExecutionError::function_error(
            "asInteger",
            "cannot convert value to integer",
        ))
    }
});
accessor!(
    as_approximate_float,
    "asApproximateFloat",
    Quantity,
    |q| Ok(Value::Float(q.value))
);
accessor!(sign, "sign", Quantity, |q| Ok(Value::Int(
    if q.value > 0.0 {
        1
    } else if q.value < 0.0 {
        -1
    } else {
        0
    }
)));

/// Defines a quantity comparison overload: `$map` turns the ordering into the result.
macro_rules! comparison {
    ($name:ident, $cel:literal, |$o:ident| $map:expr) => {
        fn $name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let args = values(&args)?;
            let (Some(a), Some(b)) = (
                args.first().and_then(as_quantity),
                args.get(1).and_then(as_quantity),
            ) else {
                return Err(no_overload($cel, &args));
            };
            let $o = a.value.partial_cmp(&b.value).unwrap_or(Ordering::Equal);
            ret($map)
        }
    };
}

fn as_quantity(value: &Value) -> Option<&Quantity> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<Quantity>(),
        _ => None,
    }
}

comparison!(is_greater_than, "isGreaterThan", |o| Value::Bool(
    o == Ordering::Greater
));
comparison!(is_less_than, "isLessThan", |o| Value::Bool(
    o == Ordering::Less
));
comparison!(compare_to, "compareTo", |o| Value::Int(match o {
    Ordering::Less => -1,
    Ordering::Equal => 0,
    Ordering::Greater => 1,
}));
