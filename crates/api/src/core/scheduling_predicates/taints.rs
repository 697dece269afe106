//! Taints and tolerations (upstream `k8s.io/api/core/v1` `Toleration.ToleratesTaint` and
//! `k8s.io/component-helpers/scheduling/corev1` `TolerationsTolerateTaint`,
//! `FindMatchingUntoleratedTaint`).

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// The taint effect that evicts running pods; the kubelet only admits against it.
pub const TAINT_EFFECT_NO_EXECUTE: &str = "NoExecute";
/// The taint effect that keeps new pods off a node.
pub const TAINT_EFFECT_NO_SCHEDULE: &str = "NoSchedule";

/// Whether `toleration` tolerates `taint` (upstream `ToleratesTaint`): an empty effect
/// matches every effect, an empty key every key (with `Exists`); the operator `Equal` (or
/// empty) needs the same value, `Exists` any value; any other operator tolerates nothing.
pub fn tolerates_taint(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("") {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        "Exists" => true,
        _ => false,
    }
}

/// Whether any of `tolerations` tolerates `taint` (upstream `TolerationsTolerateTaint`).
pub fn tolerations_tolerate_taint(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates_taint(t, taint))
}

/// The first of the `taints` selected by `filter` that no toleration tolerates (upstream
/// `FindMatchingUntoleratedTaint`); `None` when all of them are tolerated.
pub fn find_matching_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| filter(t))
        .find(|t| !tolerations_tolerate_taint(tolerations, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn toleration(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Toleration {
            key: opt(key),
            operator: opt(op),
            value: opt(value),
            effect: opt(effect),
            ..Default::default()
        }
    }

    #[test]
    fn tolerates_taint_table() {
        let t = taint("dedicated", "gpu", "NoExecute");
        let cases = [
            (
                "Equal same key, value, effect",
                toleration("dedicated", "Equal", "gpu", "NoExecute"),
                true,
            ),
            (
                "empty operator means Equal",
                toleration("dedicated", "", "gpu", "NoExecute"),
                true,
            ),
            (
                "Equal other value",
                toleration("dedicated", "Equal", "cpu", "NoExecute"),
                false,
            ),
            (
                "Equal without value",
                toleration("dedicated", "Equal", "", "NoExecute"),
                false,
            ),
            (
                "Exists any value",
                toleration("dedicated", "Exists", "", "NoExecute"),
                true,
            ),
            (
                "empty effect matches every effect",
                toleration("dedicated", "Exists", "", ""),
                true,
            ),
            (
                "other effect",
                toleration("dedicated", "Exists", "", "NoSchedule"),
                false,
            ),
            ("other key", toleration("other", "Exists", "", ""), false),
            (
                "empty key with Exists tolerates everything",
                toleration("", "Exists", "", ""),
                true,
            ),
            (
                "empty key with Exists and an effect",
                toleration("", "Exists", "", "NoExecute"),
                true,
            ),
            (
                "empty key with Exists, other effect",
                toleration("", "Exists", "", "NoSchedule"),
                false,
            ),
            (
                "empty key with Equal needs the value",
                toleration("", "Equal", "gpu", ""),
                true,
            ),
            (
                "unknown operator",
                toleration("dedicated", "Gt", "gpu", ""),
                false,
            ),
        ];
        for (name, tol, want) in cases {
            assert_eq!(tolerates_taint(&tol, &t), want, "{name}");
        }
        // A taint without value is tolerated by Equal without value.
        let bare = taint("node.kubernetes.io/not-ready", "", "NoExecute");
        assert!(tolerates_taint(
            &toleration("node.kubernetes.io/not-ready", "Equal", "", ""),
            &bare
        ));
    }

    #[test]
    fn finds_the_first_untolerated_filtered_taint() {
        let taints = [
            taint("a", "", "NoSchedule"),
            taint("b", "", "NoExecute"),
            taint("c", "", "NoExecute"),
        ];
        let no_execute = |t: &Taint| t.effect == TAINT_EFFECT_NO_EXECUTE;
        assert_eq!(
            find_matching_untolerated_taint(&taints, &[], no_execute).map(|t| t.key.as_str()),
            Some("b")
        );
        let tol_b = [toleration("b", "Exists", "", "")];
        assert_eq!(
            find_matching_untolerated_taint(&taints, &tol_b, no_execute).map(|t| t.key.as_str()),
            Some("c")
        );
        let tol_bc = [
            toleration("b", "Exists", "", ""),
            toleration("c", "Exists", "", ""),
        ];
        assert_eq!(
            find_matching_untolerated_taint(&taints, &tol_bc, no_execute),
            None
        );
        // The NoSchedule taint is filtered out for the kubelet but not for the scheduler.
        assert_eq!(
            find_matching_untolerated_taint(&taints, &tol_bc, |_| true).map(|t| t.key.as_str()),
            Some("a")
        );
        assert_eq!(find_matching_untolerated_taint(&[], &[], |_| true), None);
    }
}
