//! What cel-go's type checker and cost tracker do for upstream, done here over the parsed
//! expression, as the `cel` crate has neither:
//!
//! - [`check`]: every identifier is `self`, `oldSelf`, a comprehension variable or a type
//!   name; every function is one the environment declares; a field selected on a schema
//!   object is one of its properties (`undefined field 'x'`); the result is of the wanted
//!   kind where it can be told (`cel expression must evaluate to a bool`).
//! - [`estimate`]: an upper bound of the work of one evaluation, computed from the actual
//!   sizes of the lists, maps and strings the expression iterates or scans, checked against
//!   upstream's per-call limit before the expression runs. This is what keeps a rule such
//!   as `self.l.all(x, self.l.all(y, self.l.all(z, x == y)))` from stalling the server.

use cel::Value;
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::objects::Key;

use super::library::{GLOBAL_FUNCTIONS, MEMBER_FUNCTIONS};
use super::value::Shape;

/// One problem found in an expression, at the node `id`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Issue {
    pub id: u64,
    pub message: String,
}

/// What an expression is known to produce.
#[derive(Debug, Clone, Copy)]
enum Ty<'a> {
    Data(&'a Shape),
    Bool,
    Int,
    Double,
    Str,
    List,
    Map,
    Unknown,
}

/// The result kind [`check`] requires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Want {
    Bool,
    String,
}

/// Names that are types, usable as identifiers (`type(x) == int`).
const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "optional_type",
    "google.protobuf.Duration",
    "google.protobuf.Timestamp",
];

struct Checker<'a> {
    root: &'a Shape,
    optional_old_self: bool,
    issues: Vec<Issue>,
    uses_old_self: bool,
}

/// Why [`check`] rejected an expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    /// Problems at nodes of the expression (cel-go's compile issues).
    Issues(Vec<Issue>),
    /// The expression compiles but produces the wrong kind of value.
    Type(&'static str),
}

/// Checks `expr` against the node's shape `root`. Returns whether it refers to `oldSelf`.
///
/// # Errors
///
/// The problems found, each at its node, with cel-go's wording.
pub(crate) fn check(
    expr: &IdedExpr,
    root: &Shape,
    optional_old_self: bool,
    want: Want,
) -> Result<bool, Failure> {
    let mut checker = Checker {
        root,
        optional_old_self,
        issues: Vec::new(),
        uses_old_self: false,
    };
    let ty = checker.walk(expr, &mut Vec::new());
    if !checker.issues.is_empty() {
        return Err(Failure::Issues(checker.issues));
    }
    match want {
        Want::Bool if !could_be_bool(ty) => {
            Err(Failure::Type("cel expression must evaluate to a bool"))
        }
        Want::String if !could_be_string(ty) => {
            Err(Failure::Type("messageExpression must evaluate to a string"))
        }
        _ => Ok(checker.uses_old_self),
    }
}

fn could_be_bool(ty: Ty<'_>) -> bool {
    match ty {
        Ty::Bool | Ty::Unknown => true,
        Ty::Data(shape) => matches!(shape, Shape::Boolean | Shape::Dynamic),
        _ => false,
    }
}

fn could_be_string(ty: Ty<'_>) -> bool {
    match ty {
        Ty::Str | Ty::Unknown => true,
        Ty::Data(shape) => matches!(shape, Shape::String | Shape::Dynamic),
        _ => false,
    }
}

fn undeclared(name: &str) -> String {
    format!("undeclared reference to '{name}' (in container '')")
}

/// The qualified name an expression spells (`a.b.c`), if it is one.
fn qualified(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(s) if !s.test => Some(format!("{}.{}", qualified(&s.operand.expr)?, s.field)),
        _ => None,
    }
}

impl<'a> Checker<'a> {
    fn issue(&mut self, id: u64, message: String) {
        self.issues.push(Issue { id, message });
    }

    fn walk(&mut self, e: &IdedExpr, scope: &mut Vec<(String, Ty<'a>)>) -> Ty<'a> {
        match &e.expr {
            Expr::Unspecified => Ty::Unknown,
            Expr::Literal(lit) => match lit {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::String(_) => Ty::Str,
                _ => Ty::Unknown,
            },
            Expr::Ident(name) => self.ident(e.id, name, scope),
            Expr::List(list) => {
                for item in &list.elements {
                    self.walk(item, scope);
                }
                Ty::List
            }
            Expr::Map(map) => {
                self.entries(&map.entries, scope);
                Ty::Map
            }
            Expr::Struct(s) => {
                self.entries(&s.entries, scope);
                Ty::Unknown
            }
            Expr::Select(select) => {
                if let Some(name) = qualified(&e.expr)
                    && TYPE_NAMES.contains(&name.as_str())
                    && !scope.iter().any(|(v, _)| name.starts_with(v.as_str()))
                {
                    return Ty::Unknown;
                }
                let operand = self.walk(&select.operand, scope);
                let field_ty = match operand {
                    Ty::Data(Shape::Object(fields)) => {
                        match fields
                            .values()
                            .find(|(escaped, _)| *escaped == select.field)
                        {
                            Some((_, shape)) => Ty::Data(shape),
                            None => {
                                self.issue(e.id, format!("undefined field '{}'", select.field));
                                Ty::Unknown
                            }
                        }
                    }
                    Ty::Data(Shape::Map(value)) => Ty::Data(value),
                    _ => Ty::Unknown,
                };
                if select.test { Ty::Bool } else { field_ty }
            }
            Expr::Call(call) => {
                let mut target_ty = None;
                if let Some(target) = &call.target {
                    // `optional.of(x)`: a function in a namespace, not a member call
                    let namespaced = qualified(&target.expr)
                        .map(|ns| format!("{ns}.{}", call.func_name))
                        .filter(|name| GLOBAL_FUNCTIONS.contains(&name.as_str()));
                    let shadowed =
                        matches!(&target.expr, Expr::Ident(n) if scope.iter().any(|(v, _)| v == n));
                    if namespaced.is_none() || shadowed {
                        target_ty = Some(self.walk(target, scope));
                        if !MEMBER_FUNCTIONS.contains(&call.func_name.as_str()) {
                            self.issue(e.id, undeclared(&call.func_name));
                        }
                    }
                } else if !is_operator(&call.func_name)
                    && !GLOBAL_FUNCTIONS.contains(&call.func_name.as_str())
                {
                    self.issue(e.id, undeclared(&call.func_name));
                }
                let args: Vec<Ty<'a>> = call.args.iter().map(|a| self.walk(a, scope)).collect();
                call_type(&call.func_name, target_ty, &args)
            }
            Expr::Comprehension(c) => {
                let range = self.walk(&c.iter_range, scope);
                let (first, second) = match range {
                    Ty::Data(Shape::List(item)) => (Ty::Data(item), Ty::Data(item)),
                    Ty::Data(Shape::Map(value)) => (Ty::Str, Ty::Data(value)),
                    Ty::Data(Shape::Object(_)) => (Ty::Str, Ty::Unknown),
                    _ => (Ty::Unknown, Ty::Unknown),
                };
                let accu = self.walk(&c.accu_init, scope);
                let depth = scope.len();
                match &c.iter_var2 {
                    Some(var2) => {
                        let index = if matches!(range, Ty::Data(Shape::List(_))) {
                            Ty::Int
                        } else {
                            first
                        };
                        scope.push((c.iter_var.clone(), index));
                        scope.push((var2.clone(), second));
                    }
                    None => scope.push((c.iter_var.clone(), first)),
                }
                scope.push((c.accu_var.clone(), accu));
                self.walk(&c.loop_cond, scope);
                self.walk(&c.loop_step, scope);
                scope.truncate(depth);
                scope.push((c.accu_var.clone(), accu));
                let result = self.walk(&c.result, scope);
                scope.truncate(depth);
                result
            }
        }
    }

    fn entries(
        &mut self,
        entries: &[cel::common::ast::IdedEntryExpr],
        scope: &mut Vec<(String, Ty<'a>)>,
    ) {
        for entry in entries {
            match &entry.expr {
                EntryExpr::MapEntry(m) => {
                    self.walk(&m.key, scope);
                    self.walk(&m.value, scope);
                }
                EntryExpr::StructField(f) => {
                    self.walk(&f.value, scope);
                }
            }
        }
    }

    fn ident(&mut self, id: u64, name: &str, scope: &[(String, Ty<'a>)]) -> Ty<'a> {
        if let Some((_, ty)) = scope.iter().rev().find(|(v, _)| v == name) {
            return *ty;
        }
        match name {
            "self" => Ty::Data(self.root),
            "oldSelf" => {
                self.uses_old_self = true;
                if self.optional_old_self {
                    Ty::Unknown
                } else {
                    Ty::Data(self.root)
                }
            }
            _ if TYPE_NAMES.contains(&name) => Ty::Unknown,
            _ => {
                self.issue(id, undeclared(name));
                Ty::Unknown
            }
        }
    }
}

fn is_operator(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('@') || name.starts_with("!_")
}

/// What a call produces, as far as it matters for the result check.
fn call_type<'a>(name: &str, _target: Option<Ty<'a>>, args: &[Ty<'a>]) -> Ty<'a> {
    match name {
        "_==_"
        | "_!=_"
        | "_<_"
        | "_<=_"
        | "_>_"
        | "_>=_"
        | "_&&_"
        | "_||_"
        | "!_"
        | "@in"
        | "@not_strictly_false"
        | "contains"
        | "startsWith"
        | "endsWith"
        | "matches"
        | "isSorted"
        | "isURL"
        | "isQuantity"
        | "isInteger"
        | "isGreaterThan"
        | "isLessThan"
        | "hasValue" => Ty::Bool,
        "size" | "indexOf" | "lastIndexOf" | "int" | "sign" | "compareTo" | "asInteger" => Ty::Int,
        "string" | "lowerAscii" | "upperAscii" | "trim" | "join" | "substring" | "charAt"
        | "replace" | "format" | "getScheme" | "getHost" | "getHostname" | "getPort"
        | "getEscapedPath" => Ty::Str,
        "double" | "asApproximateFloat" => Ty::Double,
        "split" => Ty::List,
        "_?_:_" => match (args.get(1), args.get(2)) {
            (Some(a), Some(b)) if could_be_bool(*a) || could_be_bool(*b) => Ty::Unknown,
            (Some(a), _) => *a,
            _ => Ty::Unknown,
        },
        "_-_" | "-_" | "_*_" | "_/_" | "_%_" => match args.first().copied().map(plain) {
            Some(Ty::Double) => Ty::Double,
            _ => Ty::Int,
        },
        "_+_" => match args.first().copied().map(plain) {
            Some(t @ (Ty::Str | Ty::List | Ty::Double | Ty::Int)) => t,
            _ => Ty::Unknown,
        },
        _ => Ty::Unknown,
    }
}

/// The CEL type of data of a schema type.
fn plain(ty: Ty<'_>) -> Ty<'_> {
    match ty {
        Ty::Data(Shape::Integer) => Ty::Int,
        Ty::Data(Shape::Number) => Ty::Double,
        Ty::Data(Shape::String) => Ty::Str,
        Ty::Data(Shape::Boolean) => Ty::Bool,
        Ty::Data(Shape::List(_)) => Ty::List,
        Ty::Data(Shape::Map(_) | Shape::Object(_)) => Ty::Map,
        other => other,
    }
}

/// Where a value in the data comes from: `self` or `oldSelf`, then fields and elements.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    SelfRoot,
    OldSelfRoot,
    Field(String),
    Elem,
}

/// The data an estimate is made for.
pub(crate) struct Data<'d> {
    pub self_value: &'d Value,
    pub old_self: Option<&'d Value>,
}

impl Data<'_> {
    /// The largest size (list or map length, string length) of the values at `path`.
    fn max_size(&self, path: &[Step]) -> u64 {
        let mut current: Vec<&Value> = match path.first() {
            Some(Step::SelfRoot) => vec![self.self_value],
            Some(Step::OldSelfRoot) => self.old_self.into_iter().collect(),
            _ => return self.global_max(),
        };
        for step in &path[1..] {
            let mut next = Vec::new();
            for value in current {
                match (step, value) {
                    (Step::Field(name), Value::Map(map)) => {
                        if let Some(v) =
                            map.map.get(&Key::String(std::sync::Arc::new(name.clone())))
                        {
                            next.push(v);
                        }
                    }
                    (Step::Elem, Value::List(items)) => next.extend(items.iter()),
                    (Step::Elem, Value::Map(map)) => next.extend(map.map.values()),
                    _ => {}
                }
            }
            current = next;
        }
        current.into_iter().map(size_of).max().unwrap_or(0)
    }

    /// The largest size of any value in the data: the bound for a collection the
    /// expression makes itself (`split`, `map`, ...).
    fn global_max(&self) -> u64 {
        fn walk(v: &Value, max: &mut u64) {
            *max = (*max).max(size_of(v));
            match v {
                Value::List(items) => items.iter().for_each(|i| walk(i, max)),
                Value::Map(map) => map.map.values().for_each(|i| walk(i, max)),
                _ => {}
            }
        }
        let mut max = 0;
        walk(self.self_value, &mut max);
        if let Some(old) = self.old_self {
            walk(old, &mut max);
        }
        max
    }
}

fn size_of(v: &Value) -> u64 {
    match v {
        Value::List(items) => items.len() as u64,
        Value::Map(map) => map.map.len() as u64,
        Value::String(s) => s.len() as u64,
        Value::Bytes(b) => b.len() as u64,
        _ => 1,
    }
}

/// Functions whose work grows with the size of their operands.
const LINEAR: &[&str] = &[
    "_==_",
    "_!=_",
    "@in",
    "_+_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
    "split",
    "join",
    "replace",
    "isSorted",
    "sum",
    "min",
    "max",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "trim",
    "substring",
    "format",
    "string",
    "reverse",
    "charAt",
    "url",
    "isURL",
    "quantity",
    "isQuantity",
    "getQuery",
];

struct Estimator<'d> {
    data: &'d Data<'d>,
    global: Option<u64>,
}

/// An upper bound of the cost of evaluating `expr` on `data`, in units close to cel-go's
/// (one per node and iteration, a tenth per byte or element scanned).
pub(crate) fn estimate(expr: &IdedExpr, data: &Data<'_>) -> u64 {
    let mut estimator = Estimator { data, global: None };
    estimator.cost(expr, &mut Vec::new())
}

impl Estimator<'_> {
    fn global(&mut self) -> u64 {
        *self.global.get_or_insert_with(|| self.data.global_max())
    }

    /// Where the value of `e` comes from in the data, if it is a path into it.
    fn path(e: &IdedExpr, scope: &[(String, Option<Vec<Step>>)]) -> Option<Vec<Step>> {
        match &e.expr {
            Expr::Ident(name) => {
                if let Some((_, path)) = scope.iter().rev().find(|(v, _)| v == name) {
                    return path.clone();
                }
                match name.as_str() {
                    "self" => Some(vec![Step::SelfRoot]),
                    "oldSelf" => Some(vec![Step::OldSelfRoot]),
                    _ => None,
                }
            }
            Expr::Select(s) if !s.test => {
                let mut path = Self::path(&s.operand, scope)?;
                path.push(Step::Field(s.field.clone()));
                Some(path)
            }
            Expr::Call(c) if c.func_name == "_[_]" && c.args.len() == 2 => {
                let mut path = Self::path(&c.args[0], scope)?;
                match &c.args[1].expr {
                    Expr::Literal(LiteralValue::String(key)) => {
                        path.push(Step::Field(key.inner().to_owned()))
                    }
                    _ => path.push(Step::Elem),
                }
                Some(path)
            }
            _ => None,
        }
    }

    /// The size of the value of `e`: from the data for a path, the literal's own size,
    /// else the largest size in the data.
    fn size(&mut self, e: &IdedExpr, scope: &[(String, Option<Vec<Step>>)]) -> u64 {
        match &e.expr {
            Expr::List(list) => list.elements.len() as u64,
            Expr::Map(map) => map.entries.len() as u64,
            Expr::Literal(LiteralValue::String(s)) => s.inner().len() as u64,
            Expr::Literal(_) => 1,
            _ => match Self::path(e, scope) {
                Some(path) => self.data.max_size(&path),
                None => self.global(),
            },
        }
    }

    fn cost(&mut self, e: &IdedExpr, scope: &mut Vec<(String, Option<Vec<Step>>)>) -> u64 {
        match &e.expr {
            Expr::Unspecified | Expr::Literal(_) | Expr::Ident(_) => 1,
            Expr::Select(s) => 1u64.saturating_add(self.cost(&s.operand, scope)),
            Expr::List(list) => list
                .elements
                .iter()
                .fold(1u64, |acc, item| acc.saturating_add(self.cost(item, scope))),
            Expr::Map(map) => self.entries_cost(&map.entries, scope),
            Expr::Struct(s) => self.entries_cost(&s.entries, scope),
            Expr::Call(call) => {
                let mut total: u64 = 1;
                let mut scanned: u64 = 0;
                let linear = LINEAR.contains(&call.func_name.as_str());
                for operand in call.target.iter().map(|t| &**t).chain(call.args.iter()) {
                    total = total.saturating_add(self.cost(operand, scope));
                    if linear {
                        scanned = scanned.saturating_add(self.size(operand, scope));
                    }
                }
                total.saturating_add(scanned / 10)
            }
            Expr::Comprehension(c) => {
                let iterations = self.size(&c.iter_range, scope);
                let mut total = self
                    .cost(&c.iter_range, scope)
                    .saturating_add(self.cost(&c.accu_init, scope));
                let element = Self::path(&c.iter_range, scope).map(|mut p| {
                    p.push(Step::Elem);
                    p
                });
                let depth = scope.len();
                scope.push((c.iter_var.clone(), element.clone()));
                if let Some(var2) = &c.iter_var2 {
                    scope.push((var2.clone(), element));
                }
                scope.push((c.accu_var.clone(), None));
                let per_iteration = 1u64
                    .saturating_add(self.cost(&c.loop_cond, scope))
                    .saturating_add(self.cost(&c.loop_step, scope));
                scope.truncate(depth);
                scope.push((c.accu_var.clone(), None));
                total = total
                    .saturating_add(iterations.saturating_mul(per_iteration))
                    .saturating_add(self.cost(&c.result, scope));
                scope.truncate(depth);
                total
            }
        }
    }

    fn entries_cost(
        &mut self,
        entries: &[cel::common::ast::IdedEntryExpr],
        scope: &mut Vec<(String, Option<Vec<Step>>)>,
    ) -> u64 {
        let mut total: u64 = 1;
        for entry in entries {
            total = total.saturating_add(match &entry.expr {
                EntryExpr::MapEntry(m) => self
                    .cost(&m.key, scope)
                    .saturating_add(self.cost(&m.value, scope)),
                EntryExpr::StructField(f) => self.cost(&f.value, scope),
            });
        }
        total
    }
}
