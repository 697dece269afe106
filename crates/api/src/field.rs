//! Field errors as upstream's `k8s.io/apimachinery/pkg/util/validation/field`: a path into
//! the object (`spec.containers[0].image`), a type (`Required value`, `Invalid value`, ...),
//! the bad value and a detail. The API server turns a list of them into a 422 `Invalid`
//! Status whose causes carry `reason` [`ErrorType::reason`], `message` and `field`.

use std::fmt;

use serde_json::Value;

/// A path into an object, printed as upstream prints it: `spec.containers[0].image`,
/// `metadata.labels[app]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Path(String);

impl Path {
    /// The root field, e.g. `Path::new("spec")`.
    pub fn new(name: &str) -> Self {
        Path(name.to_owned())
    }

    /// `self.name`.
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Path(name.to_owned())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    /// `self[index]`.
    pub fn index(&self, index: usize) -> Self {
        Path(format!("{}[{index}]", self.0))
    }

    /// `self[key]` (a map key; upstream prints it unquoted).
    pub fn key(&self, key: &str) -> Self {
        Path(format!("{}[{key}]", self.0))
    }

    /// The printed path.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The kind of a field error (upstream `field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
    TypeInvalid,
}

impl ErrorType {
    /// The `reason` of a Status cause (`FieldValueRequired`, ...).
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Internal => "InternalError",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The human text (`Required value`, `Unsupported value`, ...).
    pub fn text(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
        }
    }
}

/// One field error. `Display` gives upstream's `Error()`:
/// `spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure"`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub kind: ErrorType,
    pub field: Path,
    /// The bad value; printed for every type but Required, Forbidden, TooLong and Internal.
    pub value: Option<Value>,
    pub detail: String,
}

/// Every error of one validation, in the order found.
pub type ErrorList = Vec<FieldError>;

impl FieldError {
    fn new(kind: ErrorType, field: &Path, value: Option<Value>, detail: impl Into<String>) -> Self {
        FieldError {
            kind,
            field: field.clone(),
            value,
            detail: detail.into(),
        }
    }

    /// `field: Required value[: detail]`.
    pub fn required(field: &Path, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, None, detail)
    }

    /// `field: Invalid value: <value>: detail`.
    pub fn invalid(field: &Path, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Invalid, field, Some(value.into()), detail)
    }

    /// `field: Duplicate value: <value>`.
    pub fn duplicate(field: &Path, value: impl Into<Value>) -> Self {
        Self::new(ErrorType::Duplicate, field, Some(value.into()), "")
    }

    /// `field: Not found: <value>`.
    pub fn not_found(field: &Path, value: impl Into<Value>) -> Self {
        Self::new(ErrorType::NotFound, field, Some(value.into()), "")
    }

    /// `field: Unsupported value: <value>: supported values: "a", "b"`.
    pub fn not_supported(field: &Path, value: impl Into<Value>, supported: &[&str]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorType::NotSupported, field, Some(value.into()), detail)
    }

    /// `field: Forbidden: detail`.
    pub fn forbidden(field: &Path, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, None, detail)
    }

    /// `field: Too long: may not be more than <max> bytes`.
    pub fn too_long(field: &Path, max: usize) -> Self {
        Self::new(
            ErrorType::TooLong,
            field,
            None,
            format!("may not be more than {max} bytes"),
        )
    }

    /// `field: Too many: <actual>: must have at most <max> items` (upstream `TooMany`).
    pub fn too_many(field: &Path, actual: usize, max: usize) -> Self {
        let items = if max == 1 { "item" } else { "items" };
        Self::new(
            ErrorType::TooMany,
            field,
            Some(actual.into()),
            format!("must have at most {max} {items}"),
        )
    }

    /// `field: Internal error: detail`.
    pub fn internal(field: &Path, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Internal, field, None, detail)
    }

    /// The message of a Status cause: everything after `field: `.
    pub fn body(&self) -> String {
        let mut out = self.kind.text().to_owned();
        let hides_value = matches!(
            self.kind,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::Internal
        );
        if let (false, Some(value)) = (hides_value, &self.value) {
            out.push_str(": ");
            match value {
                Value::Null => out.push_str("null"),
                // Strings print quoted (Go's %q), numbers and booleans bare.
                Value::String(s) => out.push_str(&format!("{s:?}")),
                other => out.push_str(&other.to_string()),
            }
        }
        if !self.detail.is_empty() {
            out.push_str(": ");
            out.push_str(&self.detail);
        }
        out
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Joins a list as upstream's aggregate does: one error bare, several as `[a, b]`.
pub fn aggregate(errors: &[FieldError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => {
            let parts: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_upstream() {
        let spec = Path::new("spec");
        let image = spec.child("containers").index(0).child("image");
        assert_eq!(
            FieldError::required(&image, "").to_string(),
            "spec.containers[0].image: Required value"
        );
        assert_eq!(
            FieldError::not_supported(
                &spec.child("restartPolicy"),
                "Sometimes",
                &["Always", "Never"]
            )
            .to_string(),
            r#"spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "Never""#
        );
        let labels = Path::new("metadata").child("labels").key("a/b/c");
        assert_eq!(
            FieldError::invalid(&labels, "a/b/c", "a qualified name must ...").to_string(),
            r#"metadata.labels[a/b/c]: Invalid value: "a/b/c": a qualified name must ..."#
        );
        assert_eq!(
            FieldError::invalid(
                &spec.child("replicas"),
                -1,
                "must be greater than or equal to 0"
            )
            .to_string(),
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
        let two = [
            FieldError::required(&image, ""),
            FieldError::forbidden(&spec, "nope"),
        ];
        assert_eq!(
            aggregate(&two),
            "[spec.containers[0].image: Required value, spec: Forbidden: nope]"
        );
    }
}
