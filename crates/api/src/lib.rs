//! Kubernetes API machinery without I/O, shared by the API server and the kubelet.
//!
//! - [`apply`]: server-side apply and managedFields (structured-merge-diff);
//! - [`cel`]: CEL validation rules of CustomResourceDefinitions (`x-kubernetes-validations`);
//! - [`apiextensions`]: CustomResourceDefinitions: their validation, structural schemas,
//!   and the defaulting, pruning and validation of custom resources;
//! - [`jsonpath`]: the JSONPath subset of CRD printer columns and selectable fields;
//! - [`field`]: upstream's `field.Error` (the causes of a 422 Invalid, the kubelet's
//!   manifest errors);
//! - [`meta`]: ObjectMeta and LabelSelector validation (`pkg/api/validation`);
//! - [`names`]: DNS-1123 names, qualified names, label values
//!   (`k8s.io/apimachinery/pkg/util/validation`);
//! - [`selector`]: label and field selectors (`k8s.io/apimachinery/pkg/labels`, `fields`);
//! - [`patch`]: JSON Patch, JSON Merge Patch and strategic merge patch;
//! - [`core`]: defaulting and validation of the core/v1 kinds (pods, services, ...);
//! - [`duration`]: Go durations (`1m30s`) as `metav1.Duration` fields carry them;
//! - [`protobuf`]: Kubernetes protobuf to and from the JSON form;
//! - [`quantity`]: resource quantities (`500m`, `128Mi`);
//! - [`schema`]: the OpenAPI schemas of the built-in kinds with upstream's patch
//!   strategies and merge keys;
//! - [`version`]: the Kubernetes release Skiff's components report;
//! - [`yaml`]: YAML to JSON as upstream converts it, bounded against hostile nesting.

pub mod apply;
pub mod cel;
pub mod core;
pub mod duration;
pub mod field;
pub mod jsonpath;
pub mod meta;
pub mod names;
pub mod openapi_enums;
pub mod patch;
pub mod protobuf;
pub mod quantity;
pub mod schema;
pub mod selector;
pub mod uuid;
pub mod validation;
pub mod version;
pub mod yaml;

pub mod admissionregistration;
pub mod apiextensions;
pub mod apiregistration;
pub mod apps;
pub mod autoscaling;
pub mod batch;
pub mod certificates;
pub mod coordination;
pub mod discovery;
pub mod events;
pub mod flowcontrol;
pub mod networking;
pub mod node;
pub mod policy;
pub mod rbac;
pub mod scheduling;
pub mod storage;
