//! The Deployment controller's pure helpers (upstream
//! `pkg/controller/deployment/util/deployment_util.go` and `pkg/util/hash`): revisions
//! and their annotations, the pod-template hash, maxSurge and maxUnavailable, and the
//! tests on a Deployment's status.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use skiff_api::validation::scaled_value;

/// The revision of a ReplicaSet, and the last one of a Deployment.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// The revisions a ReplicaSet had before a rollback gave it a newer one.
pub const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";
/// The longest revision history kept (upstream `revHistoryLimitInChars`).
pub const REVISION_HISTORY_LIMIT_IN_CHARS: usize = 2000;
/// The Deployment's `spec.replicas` when it last scaled the ReplicaSet.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas` plus maxSurge when the Deployment last scaled the ReplicaSet.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";
/// The label that tells the ReplicaSets of one Deployment apart.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// Annotations of the Deployment never copied to its ReplicaSets (upstream
/// `annotationsToSkip`).
pub fn skip_annotation(key: &str) -> bool {
    key == "kubectl.kubernetes.io/last-applied-configuration"
        || key == REVISION_ANNOTATION
        || key == REVISION_HISTORY_ANNOTATION
        || key == DESIRED_REPLICAS_ANNOTATION
        || key == MAX_REPLICAS_ANNOTATION
        || key == "deprecated.deployment.rollback.to"
}

/// The characters a hash is spelled with (upstream `rand.SafeEncodeString`: no vowels,
/// no look-alikes, so that no word is spelled by chance).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The pod-template hash of `template` with `collision_count` (upstream
/// `controller.ComputeHash`): 32-bit FNV-1a over the template's JSON and the count,
/// its decimal digits spelled in [`ALPHANUMS`]. Stable across restarts and versions of
/// Skiff; not the same string as upstream's (which hashes Go's printing of the struct).
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u32::from(*b);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    };
    feed(&serde_json::to_vec(template).unwrap_or_default());
    if let Some(c) = collision_count {
        feed(&c.to_le_bytes());
    }
    hash.to_string()
        .bytes()
        .map(|d| char::from(ALPHANUMS[usize::from(d) % ALPHANUMS.len()]))
        .collect()
}

/// True when the two templates are equal but for the pod-template-hash label (upstream
/// `EqualIgnoreHash`), with upstream's semantic equality: an absent field equals an
/// empty one (`resources: {}`, `env: []`), as Go's zero values do.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let normal = |t: &PodTemplateSpec| {
        let mut v = serde_json::to_value(t).unwrap_or_default();
        if let Some(labels) = v
            .pointer_mut("/metadata/labels")
            .and_then(serde_json::Value::as_object_mut)
        {
            labels.remove(POD_TEMPLATE_HASH_LABEL);
        }
        prune(&mut v);
        v
    };
    normal(a) == normal(b)
}

/// Removes, bottom-up, the members that are null, `{}` or `[]`.
fn prune(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for x in m.values_mut() {
                prune(x);
            }
            m.retain(|_, x| !is_empty(x));
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(prune),
        _ => {}
    }
}

fn is_empty(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::Object(m) => m.is_empty(),
        serde_json::Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The ReplicaSet's revision (0 when unset or not a number).
pub fn revision(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The Deployment's `spec.replicas` (1 when unset, as defaulted).
pub fn replicas(d: &Deployment) -> i32 {
    d.spec.replicas.unwrap_or(1)
}

/// A ReplicaSet's `spec.replicas`.
pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
}

/// A ReplicaSet's `status.availableReplicas`.
pub fn rs_available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// True for the RollingUpdate strategy (the default).
pub fn is_rolling_update(d: &Deployment) -> bool {
    d.spec
        .strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate")
}

/// maxSurge and maxUnavailable as numbers of pods for the Deployment's replicas
/// (upstream `ResolveFenceposts`): surge rounded up, unavailable down, 25% each when
/// unset, and unavailable 1 when both come to 0. Errors: a value that is no percent.
pub fn resolve_fenceposts(d: &Deployment) -> Result<(i32, i32), String> {
    let quarter = IntOrString::String("25%".to_owned());
    let ru = d
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref());
    let surge = ru.and_then(|r| r.max_surge.as_ref()).unwrap_or(&quarter);
    let unavailable = ru
        .and_then(|r| r.max_unavailable.as_ref())
        .unwrap_or(&quarter);
    let desired = replicas(d);
    let surge = scaled_value(surge, desired, true)?;
    let unavailable = scaled_value(unavailable, desired, false)?;
    if surge == 0 && unavailable == 0 {
        return Ok((0, 1));
    }
    Ok((surge, unavailable))
}

/// How many pods may be unavailable during the rollout (upstream `MaxUnavailable`): 0
/// for Recreate or no replicas, at most `spec.replicas`.
pub fn max_unavailable(d: &Deployment) -> i32 {
    if !is_rolling_update(d) || replicas(d) == 0 {
        return 0;
    }
    let (_, u) = resolve_fenceposts(d).unwrap_or((0, 1));
    u.min(replicas(d))
}

/// How many pods may exist above `spec.replicas` (upstream `MaxSurge`): 0 for Recreate.
pub fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    resolve_fenceposts(d).map(|(s, _)| s).unwrap_or(0)
}

/// The replicas the new ReplicaSet may have now (upstream `NewRSNewReplicas`): with
/// RollingUpdate, as many as fit under `replicas + maxSurge` pods in all, at most
/// `replicas`; with Recreate, `replicas`.
pub fn new_rs_new_replicas(d: &Deployment, all: &[&ReplicaSet], new_rs: &ReplicaSet) -> i32 {
    let want = replicas(d);
    if !is_rolling_update(d) {
        return want;
    }
    let current = rs_replicas(new_rs);
    let total: i32 = all.iter().map(|rs| rs_replicas(rs)).sum();
    let max_total = want + max_surge(d);
    if total >= max_total {
        return current;
    }
    let up = (max_total - total).min((want - current).max(0));
    current + up
}

/// True when the ReplicaSet runs all the Deployment's replicas, available (upstream
/// `IsSaturated`).
pub fn is_saturated(d: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else { return false };
    let desired = rs
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DESIRED_REPLICAS_ANNOTATION))
        .and_then(|v| v.parse::<i32>().ok());
    rs_replicas(rs) == replicas(d)
        && desired == Some(replicas(d))
        && rs_available(rs) == replicas(d)
}

/// True when every replica is updated and available and no old one is left (upstream
/// `DeploymentComplete`).
pub fn deployment_complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let want = replicas(d);
    status.updated_replicas.unwrap_or(0) == want
        && status.replicas.unwrap_or(0) == want
        && status.available_replicas.unwrap_or(0) == want
        && status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// True when the rollout moved since the status the Deployment has (upstream
/// `DeploymentProgressing`).
pub fn deployment_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let n = |v: Option<i32>| v.unwrap_or(0);
    n(new.updated_replicas) > n(old.updated_replicas)
        || n(new.replicas) - n(new.updated_replicas) < n(old.replicas) - n(old.updated_replicas)
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// The condition of `type_` in `status`.
pub fn condition<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(type_))
}

/// True when the Deployment made no progress within `progressDeadlineSeconds` of its
/// last Progressing update (upstream `DeploymentTimedOut`).
pub fn deployment_timed_out(d: &Deployment, status: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(deadline) = d.spec.progress_deadline_seconds else {
        return false;
    };
    let Some(c) = condition(status, "Progressing") else {
        return false;
    };
    match c.reason.as_deref() {
        Some("NewReplicaSetAvailable") => return false,
        Some("ProgressDeadlineExceeded") => return true,
        _ => {}
    }
    c.last_update_time.as_ref().is_some_and(|t| {
        t.0.checked_add(SignedDuration::from_secs(i64::from(deadline)))
            .is_ok_and(|until| until < now)
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn deployment(
        replicas: i32,
        surge: Option<IntOrString>,
        unavailable: Option<IntOrString>,
    ) -> Deployment {
        Deployment {
            spec: DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: surge,
                        max_unavailable: unavailable,
                    }),
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn fenceposts_round_as_upstream() {
        let pct = |s: &str| Some(IntOrString::String(s.into()));
        assert_eq!(resolve_fenceposts(&deployment(10, None, None)), Ok((3, 2)));
        assert_eq!(
            resolve_fenceposts(&deployment(3, pct("0%"), pct("0%"))),
            Ok((0, 1))
        );
        assert_eq!(
            resolve_fenceposts(&deployment(
                3,
                Some(IntOrString::Int(1)),
                Some(IntOrString::Int(0))
            )),
            Ok((1, 0))
        );
        assert_eq!(max_unavailable(&deployment(1, None, pct("100%"))), 1);
        let mut recreate = deployment(3, None, None);
        recreate.spec.strategy = Some(DeploymentStrategy {
            type_: Some("Recreate".into()),
            rolling_update: None,
        });
        assert_eq!((max_surge(&recreate), max_unavailable(&recreate)), (0, 0));
    }

    fn rs(replicas: i32) -> ReplicaSet {
        ReplicaSet {
            spec: k8s_openapi::api::apps::v1::ReplicaSetSpec {
                replicas: Some(replicas),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn new_replica_set_grows_within_the_surge() {
        // 10 replicas, surge 3: the old RS at 10 leaves room for 3 new.
        let d = deployment(10, None, None);
        let (old, new) = (rs(10), rs(0));
        assert_eq!(new_rs_new_replicas(&d, &[&old, &new], &new), 3);
        let (old, new) = (rs(5), rs(7));
        assert_eq!(new_rs_new_replicas(&d, &[&old, &new], &new), 8);
        let (old, new) = (rs(0), rs(10));
        assert_eq!(new_rs_new_replicas(&d, &[&old, &new], &new), 10);
    }

    #[test]
    fn template_hash_is_stable_and_ignores_itself() {
        let mut t = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                ..Default::default()
            }),
            spec: None,
        };
        let h = compute_hash(&t, None);
        assert_eq!(h, compute_hash(&t, None));
        assert_ne!(h, compute_hash(&t, Some(1)));
        assert!(h.bytes().all(|b| ALPHANUMS.contains(&b)), "{h}");
        let plain = t.clone();
        t.metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(POD_TEMPLATE_HASH_LABEL.into(), h);
        assert!(equal_ignore_hash(&t, &plain));
        // An empty field is an absent one.
        let with_empty: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "resources": {}, "env": []}]},
        }))
        .unwrap();
        let without: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c"}]},
        }))
        .unwrap();
        assert!(equal_ignore_hash(&with_empty, &without));
        let other: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "d"}]},
        }))
        .unwrap();
        assert!(!equal_ignore_hash(&other, &without));
    }
}
