//! What upstream's admission plugins do to every new pod, in upstream's order:
//! ServiceAccount (the `default` account, the token volume and the account's
//! imagePullSecrets; see [`super::service_account`]), DefaultTolerationSeconds (tolerate
//! not-ready and unreachable nodes for 300 s) and Priority (priority and preemptionPolicy
//! from the PriorityClass).

use k8s_openapi::api::core::v1::{Pod, PodSpec, Toleration};
use k8s_openapi::api::scheduling::v1::PriorityClass;

use crate::error::{ApiError, GroupResource};
use crate::registry::Context;

/// The built-in PriorityClasses, valid even before they are stored.
const SYSTEM_PRIORITY_CLASSES: &[(&str, i32)] = &[
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

/// The taints every pod tolerates for 300 s unless it says otherwise.
const DEFAULT_TOLERATED_TAINTS: &[&str] = &[
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// Applies the admission plugins to a new pod. Errors: 403 from the ServiceAccount plugin
/// (see [`super::service_account::admit`]), and when the named PriorityClass does not
/// exist or the pod sets its own priority.
pub async fn admit(ctx: &Context<'_>, pod: &mut Pod) -> Result<(), ApiError> {
    super::service_account::admit(ctx, pod).await?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let Some(spec) = pod.spec.as_mut() else {
        return Ok(());
    };
    add_default_tolerations(spec);
    admit_priority(ctx, &name, spec).await?;
    Ok(())
}

/// 403 Forbidden for pod `name`, the admission plugins' refusal.
pub(super) fn forbidden(name: &str, why: &str) -> ApiError {
    ApiError::forbidden(&GroupResource::new("", "pods"), name, why)
}

/// Upstream Priority plugin: the priority of the named class, or of the global default
/// class, or 0; preemptionPolicy from the class, `PreemptLowerPriority` by default.
async fn admit_priority(ctx: &Context<'_>, name: &str, spec: &mut PodSpec) -> Result<(), ApiError> {
    let resource = GroupResource::new("scheduling.k8s.io", "priorityclasses");
    let class_name = spec.priority_class_name.clone().unwrap_or_default();
    let class: Option<PriorityClass> = if class_name.is_empty() {
        let classes = ctx.objects.list(&resource, None).await?;
        classes
            .into_iter()
            .filter_map(|v| serde_json::from_value::<PriorityClass>(v).ok())
            .find(|c| c.global_default == Some(true))
    } else {
        match ctx.objects.get(&resource, None, &class_name).await {
            Ok(v) => serde_json::from_value(v).ok(),
            Err(e) if e.code == 404 => {
                let system = SYSTEM_PRIORITY_CLASSES
                    .iter()
                    .find(|(n, _)| *n == class_name);
                let Some((_, value)) = system else {
                    return Err(forbidden(
                        name,
                        &format!("no PriorityClass with name {class_name} was found"),
                    ));
                };
                Some(PriorityClass {
                    value: Some(*value),
                    ..Default::default()
                })
            }
            Err(e) => return Err(e),
        }
    };
    let priority = class.as_ref().and_then(|c| c.value).unwrap_or(0);
    if let Some(given) = spec.priority.filter(|p| *p != priority) {
        return Err(forbidden(
            name,
            &format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
            ),
        ));
    }
    spec.priority = Some(priority);
    if class_name.is_empty()
        && let Some(default_class) = class.as_ref()
    {
        spec.priority_class_name = default_class.metadata.name.clone();
    }
    if spec.preemption_policy.is_none() {
        let policy = class
            .and_then(|c| c.preemption_policy)
            .unwrap_or_else(|| "PreemptLowerPriority".to_owned());
        spec.preemption_policy = Some(policy);
    }
    Ok(())
}

/// Upstream DefaultTolerationSeconds.
fn add_default_tolerations(spec: &mut PodSpec) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for key in DEFAULT_TOLERATED_TAINTS {
        let tolerated = tolerations.iter().any(|t| {
            let effect = t.effect.as_deref().unwrap_or("");
            let key_matches = match t.key.as_deref().unwrap_or("") {
                "" => t.operator.as_deref() == Some("Exists"),
                k => k == *key,
            };
            key_matches && (effect.is_empty() || effect == "NoExecute")
        });
        if !tolerated {
            tolerations.push(Toleration {
                key: Some((*key).to_owned()),
                operator: Some("Exists".to_owned()),
                effect: Some("NoExecute".to_owned()),
                toleration_seconds: Some(300),
                value: None,
            });
        }
    }
}
