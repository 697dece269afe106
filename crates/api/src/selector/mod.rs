//! Label and field selectors (`k8s.io/apimachinery/pkg/labels`, `pkg/fields`): parsed from
//! the `labelSelector` / `fieldSelector` query parameters or from a `metav1.LabelSelector`,
//! matched against an object, and printed back in upstream's canonical form (`Display`),
//! e.g. for `Scale.status.selector`.

mod fields;
mod labels;

pub use fields::{FieldSelector, FieldTerm, escape_value};
pub use labels::{LabelSelector, Operator, Requirement};
