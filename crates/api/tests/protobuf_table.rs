//! Generates `crates/api/src/protobuf/table.rs`, the protobuf messages of the kinds Skiff
//! serves, and checks the checked-in file is up to date.
//!
//! Field numbers and shapes come from the `k8s-pb` crate's sources (prost structs generated
//! from upstream's `generated.proto` files), parsed with syn; JSON names come from the
//! k8s-openapi schemas (a prost field `volume_id` is the property matching it
//! case-insensitively without underscores, `volumeID`). The messages are those of the
//! schemas reachable from [`roots`]. Regenerate with
//! `SKIFF_UPDATE_PROTOBUF_TABLE=1 cargo test -p skiff-api --test protobuf_table`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use k8s_openapi::api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::JsonSchema;
use serde_json::Value;
use syn::{Fields, GenericArgument, Item, LitStr, PathArguments, Type};

const TABLE: &str = "src/protobuf/table.rs";

/// Definition names of upstream's hand-written types and their `Type` variant.
const SPECIAL: &[(&str, &str)] = &[
    ("io.k8s.apimachinery.pkg.apis.meta.v1.Time", "Time"),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
        "MicroTime",
    ),
    ("io.k8s.apimachinery.pkg.api.resource.Quantity", "Quantity"),
    (
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
        "IntOrString",
    ),
    (
        "io.k8s.apimachinery.pkg.runtime.RawExtension",
        "RawExtension",
    ),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1", "FieldsV1"),
    ("io.k8s.api.certificates.v1.ExtraValue", "Strings"),
    ("io.k8s.api.authentication.v1.ExtraValue", "Strings"),
    ("io.k8s.api.authorization.v1.ExtraValue", "Strings"),
];

/// Upstream's non-pointer `omitempty` numbers and bools (from the Go types of
/// `k8s.io/api` and `k8s.io/apimachinery/pkg/apis/meta/v1`), by definition and JSON name:
/// Go clients always send them, upstream's JSON leaves them out when zero.
const OMIT_ZERO: &[(&str, &[&str])] = &[
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        &["generation"],
    ),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.Status", &["code"]),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails",
        &["retryAfterSeconds"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        &["stdin", "stdinOnce", "tty"],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainerCommon",
        &["stdin", "stdinOnce", "tty"],
    ),
    ("io.k8s.api.core.v1.ContainerPort", &["hostPort"]),
    ("io.k8s.api.core.v1.VolumeMount", &["readOnly"]),
    (
        "io.k8s.api.core.v1.PodSpec",
        &["hostNetwork", "hostPID", "hostIPC"],
    ),
    (
        "io.k8s.api.core.v1.Probe",
        &[
            "initialDelaySeconds",
            "timeoutSeconds",
            "periodSeconds",
            "successThreshold",
            "failureThreshold",
        ],
    ),
    ("io.k8s.api.core.v1.ServicePort", &["nodePort"]),
    ("io.k8s.api.core.v1.ServiceSpec", &["healthCheckNodePort"]),
    ("io.k8s.api.core.v1.NodeSpec", &["unschedulable"]),
    ("io.k8s.api.core.v1.Event", &["count"]),
    ("io.k8s.api.core.v1.EventSeries", &["count"]),
    ("io.k8s.api.core.v1.ContainerStateTerminated", &["signal"]),
    ("io.k8s.api.core.v1.ContainerImage", &["sizeBytes"]),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimVolumeSource",
        &["readOnly"],
    ),
    ("io.k8s.api.core.v1.NFSVolumeSource", &["readOnly"]),
    ("io.k8s.api.core.v1.ISCSIVolumeSource", &["readOnly"]),
    (
        "io.k8s.api.core.v1.ISCSIPersistentVolumeSource",
        &["readOnly"],
    ),
    ("io.k8s.api.core.v1.RBDVolumeSource", &["readOnly"]),
    (
        "io.k8s.api.core.v1.RBDPersistentVolumeSource",
        &["readOnly"],
    ),
    ("io.k8s.api.core.v1.CephFSVolumeSource", &["readOnly"]),
    (
        "io.k8s.api.core.v1.CephFSPersistentVolumeSource",
        &["readOnly"],
    ),
    (
        "io.k8s.api.core.v1.AWSElasticBlockStoreVolumeSource",
        &["readOnly", "partition"],
    ),
    (
        "io.k8s.api.core.v1.GCEPersistentDiskVolumeSource",
        &["readOnly", "partition"],
    ),
    ("io.k8s.api.core.v1.FlexVolumeSource", &["readOnly"]),
    (
        "io.k8s.api.core.v1.FlexPersistentVolumeSource",
        &["readOnly"],
    ),
    ("io.k8s.api.core.v1.GlusterfsVolumeSource", &["readOnly"]),
    (
        "io.k8s.api.core.v1.GlusterfsPersistentVolumeSource",
        &["readOnly"],
    ),
    ("io.k8s.api.core.v1.CinderVolumeSource", &["readOnly"]),
    (
        "io.k8s.api.core.v1.CinderPersistentVolumeSource",
        &["readOnly"],
    ),
    ("io.k8s.api.core.v1.FCVolumeSource", &["readOnly"]),
    ("io.k8s.api.core.v1.AzureFileVolumeSource", &["readOnly"]),
    (
        "io.k8s.api.core.v1.AzureFilePersistentVolumeSource",
        &["readOnly"],
    ),
    ("io.k8s.api.core.v1.QuobyteVolumeSource", &["readOnly"]),
    ("io.k8s.api.core.v1.PortworxVolumeSource", &["readOnly"]),
    (
        "io.k8s.api.core.v1.ScaleIOVolumeSource",
        &["readOnly", "sslEnabled"],
    ),
    (
        "io.k8s.api.core.v1.ScaleIOPersistentVolumeSource",
        &["readOnly", "sslEnabled"],
    ),
    ("io.k8s.api.core.v1.StorageOSVolumeSource", &["readOnly"]),
    (
        "io.k8s.api.core.v1.StorageOSPersistentVolumeSource",
        &["readOnly"],
    ),
    (
        "io.k8s.api.core.v1.CSIPersistentVolumeSource",
        &["readOnly"],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        &["minReadySeconds", "paused"],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        &[
            "observedGeneration",
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
        ],
    ),
    ("io.k8s.api.apps.v1.ReplicaSetSpec", &["minReadySeconds"]),
    (
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        &[
            "fullyLabeledReplicas",
            "readyReplicas",
            "availableReplicas",
            "observedGeneration",
        ],
    ),
    ("io.k8s.api.apps.v1.StatefulSetSpec", &["minReadySeconds"]),
    (
        "io.k8s.api.apps.v1.StatefulSetStatus",
        &[
            "observedGeneration",
            "readyReplicas",
            "currentReplicas",
            "updatedReplicas",
        ],
    ),
    ("io.k8s.api.apps.v1.DaemonSetSpec", &["minReadySeconds"]),
    (
        "io.k8s.api.apps.v1.DaemonSetStatus",
        &[
            "observedGeneration",
            "updatedNumberScheduled",
            "numberAvailable",
            "numberUnavailable",
        ],
    ),
    (
        "io.k8s.api.batch.v1.JobStatus",
        &["active", "succeeded", "failed"],
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        &["observedGeneration"],
    ),
    ("io.k8s.api.scheduling.v1.PriorityClass", &["globalDefault"]),
    ("io.k8s.api.events.v1.Event", &["deprecatedCount"]),
    ("io.k8s.api.autoscaling.v1.ScaleSpec", &["replicas"]),
];

/// The OpenAPI definitions of the served kinds, their lists, the bodies of their
/// subresources and the meta/v1 kinds of every group version.
fn roots() -> serde_json::Map<String, Value> {
    let mut generator = schemars::generate::SchemaSettings::draft07().into_generator();
    macro_rules! add {
        ($($ty:ty),* $(,)?) => { $( generator.subschema_for::<$ty>(); )* };
    }
    let mut lists = Vec::new();
    macro_rules! with_lists {
        ($($ty:ty),* $(,)?) => { $( add!($ty); lists.push(<$ty as JsonSchema>::schema_name()); )* };
    }
    with_lists!(
        api::core::v1::Pod,
        api::core::v1::Service,
        api::core::v1::ConfigMap,
        api::core::v1::Secret,
        api::core::v1::Namespace,
        api::core::v1::Node,
        api::core::v1::ServiceAccount,
        api::core::v1::Endpoints,
        api::core::v1::Event,
        api::core::v1::LimitRange,
        api::core::v1::ResourceQuota,
        api::core::v1::PersistentVolume,
        api::core::v1::PersistentVolumeClaim,
        api::apps::v1::Deployment,
        api::apps::v1::ReplicaSet,
        api::apps::v1::StatefulSet,
        api::apps::v1::DaemonSet,
        api::apps::v1::ControllerRevision,
        api::batch::v1::Job,
        api::batch::v1::CronJob,
        api::coordination::v1::Lease,
        api::discovery::v1::EndpointSlice,
        api::events::v1::Event,
        api::certificates::v1::CertificateSigningRequest,
        api::node::v1::RuntimeClass,
        api::scheduling::v1::PriorityClass,
        api::policy::v1::PodDisruptionBudget,
        api::storage::v1::StorageClass,
        api::storage::v1::VolumeAttachment,
        api::storage::v1::CSIDriver,
        api::storage::v1::CSINode,
        api::storage::v1::CSIStorageCapacity,
        api::networking::v1::NetworkPolicy,
        api::networking::v1::Ingress,
        api::networking::v1::IngressClass,
        api::networking::v1::IPAddress,
        api::networking::v1::ServiceCIDR,
        api::rbac::v1::Role,
        api::rbac::v1::ClusterRole,
        api::rbac::v1::RoleBinding,
        api::rbac::v1::ClusterRoleBinding,
        api::admissionregistration::v1::ValidatingWebhookConfiguration,
        api::admissionregistration::v1::MutatingWebhookConfiguration,
        api::admissionregistration::v1::ValidatingAdmissionPolicy,
        api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        api::flowcontrol::v1::FlowSchema,
        api::flowcontrol::v1::PriorityLevelConfiguration,
        api::autoscaling::v1::HorizontalPodAutoscaler,
        api::autoscaling::v2::HorizontalPodAutoscaler,
    );
    add!(
        api::core::v1::Binding,
        api::policy::v1::Eviction,
        api::autoscaling::v1::Scale,
        api::authentication::v1::TokenRequest,
        api::authentication::v1::TokenReview,
        api::authentication::v1::SelfSubjectReview,
        api::authorization::v1::SubjectAccessReview,
        api::authorization::v1::SelfSubjectAccessReview,
        api::authorization::v1::LocalSubjectAccessReview,
        api::authorization::v1::SelfSubjectRulesReview,
        meta::DeleteOptions,
        meta::Status,
        meta::ListMeta,
    );
    let mut definitions = generator.take_definitions(true);
    // k8s-openapi's `List<T>` has no schema: upstream's `<Kind>List` is list metadata and
    // items.
    for kind in lists {
        definitions.insert(
            format!("{kind}List"),
            serde_json::json!({"properties": {"metadata": {}, "items": {}}}),
        );
    }
    definitions
}

/// One prost field: tag, Rust name, prost kind (`string`, `message`, ...), label
/// (`optional`, `repeated`, `map`) and, for messages and map values, the definition name.
struct ProstField {
    tag: u32,
    name: String,
    kind: String,
    label: &'static str,
    message: Option<String>,
}

/// k8s-pb's `src` directory, through `cargo metadata` for the host platform only: offline,
/// the packages of other platforms (never downloaded by a Linux build) cannot be resolved.
fn k8s_pb_sources() -> PathBuf {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let host = String::from_utf8_lossy(&version.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: ").map(str::to_owned))
        .expect("rustc -vV names the host");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata JSON");
    let manifest = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "k8s-pb")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("k8s-pb is a dev-dependency");
    Path::new(manifest)
        .parent()
        .expect("k8s-pb dir")
        .join("src")
}

/// Every prost message of k8s-pb's `api` and `apimachinery` modules (name and fields) by
/// lower-cased definition name.
fn prost_messages(src: &Path) -> BTreeMap<String, (String, Vec<ProstField>)> {
    let mut messages = BTreeMap::new();
    let mut files = Vec::new();
    for top in ["api", "apimachinery"] {
        collect(&src.join(top), &mut files);
    }
    for file in files {
        let module: Vec<String> = file
            .strip_prefix(src)
            .expect("under src")
            .parent()
            .expect("mod.rs in a dir")
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let text = std::fs::read_to_string(&file).expect("read k8s-pb source");
        let parsed = syn::parse_file(&text).expect("k8s-pb source parses");
        for item in parsed.items {
            let Item::Struct(item) = item else { continue };
            let Fields::Named(fields) = item.fields else {
                continue;
            };
            let fields = fields
                .named
                .iter()
                .filter_map(|field| prost_field(field, &module))
                .collect();
            let ident = item.ident.to_string();
            let name = format!("io.k8s.{}.{ident}", module.join("."));
            messages.insert(definition_name(&module, &ident), (name, fields));
        }
    }
    messages
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read k8s-pb dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// `io.k8s.<module path>.<name>`, lower-cased: the OpenAPI name of upstream's proto
/// message, as prost's renaming (`HTTPGetAction` to `HttpGetAction`) leaves it findable.
fn definition_name(module: &[String], name: &str) -> String {
    format!("io.k8s.{}.{name}", module.join(".")).to_ascii_lowercase()
}

/// The field's `#[prost(...)]` attribute, read.
fn prost_field(field: &syn::Field, module: &[String]) -> Option<ProstField> {
    let attr = field.attrs.iter().find(|a| a.path().is_ident("prost"))?;
    let (mut kind, mut label, mut tag) = (String::new(), "optional", 0);
    attr.parse_nested_meta(|meta| {
        let ident = meta
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        match ident.as_str() {
            "tag" => {
                tag = meta
                    .value()?
                    .parse::<LitStr>()?
                    .value()
                    .parse()
                    .expect("tag")
            }
            "btree_map" | "hash_map" => {
                let shape = meta.value()?.parse::<LitStr>()?.value();
                let (key, value) = shape.split_once(", ").expect("map shape");
                assert_eq!(key, "string", "map keys are strings");
                kind = value.to_owned();
                label = "map";
            }
            "packed" => {
                meta.value()?.parse::<LitStr>()?;
            }
            "repeated" => label = "repeated",
            "optional" | "boxed" | "required" => {}
            other => {
                // `bytes = "vec"`: the kind, with its Rust representation.
                if meta.input.peek(syn::Token![=]) {
                    meta.value()?.parse::<LitStr>()?;
                }
                kind = other.to_owned();
            }
        }
        Ok(())
    })
    .expect("prost attribute parses");
    let message = (kind == "message").then(|| message_type(&field.ty, module));
    Some(ProstField {
        tag,
        name: field
            .ident
            .as_ref()?
            .to_string()
            .trim_start_matches("r#")
            .to_owned(),
        kind,
        label,
        message,
    })
}

/// The definition name of a message field's type (inside `Option`, `Vec`, `Box`,
/// `BTreeMap<String, _>`), its path resolved against `module`.
fn message_type(ty: &Type, module: &[String]) -> String {
    let Type::Path(path) = ty else {
        panic!("unexpected field type")
    };
    let last = path.path.segments.last().expect("segment");
    if matches!(
        last.ident.to_string().as_str(),
        "Option" | "Vec" | "Box" | "BTreeMap" | "HashMap"
    ) {
        let PathArguments::AngleBracketed(args) = &last.arguments else {
            panic!("wrapper without arguments")
        };
        let inner = args
            .args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .last()
            .expect("wrapped type");
        return message_type(inner, module);
    }
    let mut resolved = module.to_vec();
    let segments: Vec<String> = path
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let (name, parents) = segments.split_last().expect("path");
    for segment in parents {
        match segment.as_str() {
            "super" => {
                resolved.pop();
            }
            "crate" => resolved.clear(),
            other => resolved.push(other.to_owned()),
        }
    }
    definition_name(&resolved, name)
}

fn normalized(name: &str) -> String {
    name.replace('_', "").to_ascii_lowercase()
}

/// The table's source text.
fn generate() -> String {
    let definitions = roots();
    let prost = prost_messages(&k8s_pb_sources());
    let special: BTreeMap<String, &str> = SPECIAL
        .iter()
        .map(|(name, variant)| (name.to_ascii_lowercase(), *variant))
        .collect();
    let by_lower_case: BTreeMap<String, &String> = definitions
        .keys()
        .map(|name| (name.to_ascii_lowercase(), name))
        .collect();
    let omit_zero: BTreeMap<&str, &[&str]> = OMIT_ZERO.iter().copied().collect();
    let mut listed: std::collections::BTreeSet<String> = OMIT_ZERO
        .iter()
        .flat_map(|(name, fields)| fields.iter().map(move |f| format!("{name}.{f}")))
        .collect();

    // (name, prost message, JSON properties): the definitions, then the Go structs
    // embedded inline in them (Volume's VolumeSource, Probe's ProbeHandler, ...), which
    // have no definition and take their JSON names from the embedding one.
    let mut queue: Vec<(String, &Vec<ProstField>, serde_json::Map<String, Value>)> = Vec::new();
    for (name, schema) in &definitions {
        let lower_case = name.to_ascii_lowercase();
        if !name.starts_with("io.k8s.") || special.contains_key(&lower_case) {
            continue;
        }
        let Some((_, fields)) = prost.get(&lower_case) else {
            continue; // newer than k8s-pb's protos: nothing references it on the wire
        };
        let properties = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        queue.push((name.clone(), fields, properties));
    }
    let mut messages: BTreeMap<String, Vec<(u32, String)>> = BTreeMap::new();
    while let Some((name, fields, properties)) = queue.pop() {
        if messages.contains_key(&name) {
            continue;
        }
        let json_name = |field: &ProstField| {
            properties
                .keys()
                .find(|p| normalized(p) == normalized(&field.name))
                .cloned()
        };
        let mut lines = Vec::new();
        for field in fields {
            let Some(json) = json_name(field) else {
                let inline = field
                    .message
                    .as_ref()
                    .and_then(|target| prost.get(target))
                    .filter(|(_, inner)| inner.iter().all(|f| json_name(f).is_some()));
                if let Some((inline_name, inner)) = inline {
                    queue.push((inline_name.clone(), inner, properties.clone()));
                    let ty = format!("Message({inline_name:?})");
                    lines.push((
                        field.tag,
                        format!("F::new({}, \"\", Inline, {ty})", field.tag),
                    ));
                }
                continue; // else a field k8s-openapi does not have
            };
            let ty = match field.kind.as_str() {
                "string" => "String".to_owned(),
                "bytes" => "Bytes".to_owned(),
                "bool" => "Bool".to_owned(),
                "int32" => "Int32".to_owned(),
                "int64" => "Int64".to_owned(),
                "message" => {
                    let target = field.message.as_deref().expect("message type");
                    match special.get(target) {
                        Some(variant) => (*variant).to_owned(),
                        None => {
                            let target = by_lower_case.get(target).unwrap_or_else(|| {
                                panic!("{name}.{json}: message {target} has no schema")
                            });
                            format!("Message({target:?})")
                        }
                    }
                }
                other => panic!("{name}.{json}: unsupported prost type {other}"),
            };
            let omit_zero = omit_zero
                .get(name.as_str())
                .is_some_and(|f| f.contains(&json.as_str()));
            if omit_zero {
                assert!(
                    matches!(ty.as_str(), "Bool" | "Int32" | "Int64") && field.label == "optional",
                    "{name}.{json} is not a singular number or bool"
                );
                listed.remove(&format!("{name}.{json}"));
            }
            let label = match field.label {
                "optional" if omit_zero => "OmitZero",
                "optional" => "Optional",
                "repeated" => "Repeated",
                _ => "Map",
            };
            lines.push((
                field.tag,
                format!("F::new({}, {json:?}, {label}, {ty})", field.tag),
            ));
        }
        lines.sort();
        messages.insert(name, lines);
    }
    assert!(
        listed.is_empty(),
        "OMIT_ZERO names fields the table does not have: {listed:?}"
    );

    let mut out = String::from(
        "//! GENERATED by `crates/api/tests/protobuf_table.rs` from the k8s-pb crate's prost\n\
         //! messages and the k8s-openapi schemas; do not edit. Regenerate with\n\
         //! `SKIFF_UPDATE_PROTOBUF_TABLE=1 cargo test -p skiff-api --test protobuf_table`.\n\n\
         use super::Label::{Inline, Map, OmitZero, Optional, Repeated};\n\
         use super::Type::*;\n\
         use super::{Field as F, Message};\n\n\
         /// The messages, sorted by name; each message's fields sorted by tag.\n\
         pub static MESSAGES: &[Message] = &[\n",
    );
    for (name, lines) in messages {
        writeln!(
            out,
            "    Message {{\n        name: {name:?},\n        fields: &["
        )
        .unwrap();
        for (_, line) in lines {
            writeln!(out, "            {line},").unwrap();
        }
        out.push_str("        ],\n    },\n");
    }
    out.push_str("];\n");
    out
}

#[test]
fn protobuf_table_is_up_to_date() {
    let generated = generate();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(TABLE);
    if std::env::var_os("SKIFF_UPDATE_PROTOBUF_TABLE").is_some() {
        std::fs::write(&path, &generated).expect("write the table");
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == generated,
        "{TABLE} is out of date; regenerate with SKIFF_UPDATE_PROTOBUF_TABLE=1 cargo test -p skiff-api --test protobuf_table"
    );
}
