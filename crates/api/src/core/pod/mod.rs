//! Pods: defaulting, validation and the QoS class (upstream `pkg/apis/core/v1/defaults.go`,
//! `pkg/apis/core/validation/validation.go` `ValidatePod*`, `pkg/apis/core/helper/qos`),
//! ephemeral containers, in-place resize and warnings (`pkg/api/pod/warnings.go`), and
//! effective requests and limits (`k8s.io/component-helpers/resource`), and readiness
//! as controllers read it (`pkg/api/v1/pod/util.go`).

pub mod affinity;
pub mod conditions;
pub mod defaults;
pub mod ephemeral;
mod probe;
pub mod qos;
pub mod requests;
pub mod resize;
pub mod service_account;
pub mod template;
pub mod validation;
mod volumes;
pub mod warnings;

pub use defaults::{default_image_pull_policy, default_pod, default_pod_spec};
pub use template::validate_pod_template_spec;
pub use validation::{validate_pod, validate_pod_spec, validate_pod_update};
