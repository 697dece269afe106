//! scheduling.k8s.io/v1 priorityclasses: `SetDefaults_PriorityClass`,
//! `ValidatePriorityClass`, `ValidatePriorityClassUpdate`
//! (`pkg/apis/scheduling/validation`) and the built-in system classes.

use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::field::{ErrorList, FieldError, Path};
use crate::validation::immutable;

/// Names with this prefix are reserved for [`system_priority_classes`].
pub const SYSTEM_PREFIX: &str = "system-";
/// The highest value a user-defined class may have.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;
/// `system-cluster-critical`'s value; `system-node-critical` is 1000 higher.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2 * HIGHEST_USER_DEFINABLE_PRIORITY;

/// `system-node-critical` and `system-cluster-critical`, as the API server creates them
/// at start (upstream `scheduling.SystemPriorityClasses`).
pub fn system_priority_classes() -> Vec<PriorityClass> {
    let class = |name: &str, value: i32, description: &str| PriorityClass {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        value: Some(value),
        global_default: Some(false),
        description: Some(description.to_owned()),
        preemption_policy: Some("PreemptLowerPriority".to_owned()),
    };
    vec![
        class(
            "system-node-critical",
            SYSTEM_CRITICAL_PRIORITY + 1000,
            "Used for system critical pods that must not be moved from their current node.",
        ),
        class(
            "system-cluster-critical",
            SYSTEM_CRITICAL_PRIORITY,
            "Used for system critical pods that must run in the cluster, but can be moved to \
             another node if necessary.",
        ),
    ]
}

/// preemptionPolicy PreemptLowerPriority.
pub fn default(class: &mut PriorityClass) {
    class
        .preemption_policy
        .get_or_insert_with(|| "PreemptLowerPriority".to_owned());
}

/// Whether `name` with `value` and `global_default` is one of the system classes:
/// upstream's `IsKnownSystemPriorityClass`, with its messages.
fn known_system_class(name: &str, value: i32, global_default: bool) -> Result<(), String> {
    let classes = system_priority_classes();
    let class = classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .ok_or_else(|| format!("{name} is not a known system priority class"))?;
    let expected = class.value.unwrap_or_default();
    if expected != value {
        return Err(format!("value of {name} PriorityClass must be {expected}"));
    }
    if global_default {
        return Err(format!(
            "globalDefault of {name} PriorityClass must be false"
        ));
    }
    Ok(())
}

/// Reserved `system-` names, the user-definable maximum, the preemption policy.
pub fn validate(class: &PriorityClass) -> ErrorList {
    let mut errors = Vec::new();
    let name = class.metadata.name.as_deref().unwrap_or("");
    let value = class.value.unwrap_or(0);
    if name.starts_with(SYSTEM_PREFIX) {
        if let Err(why) = known_system_class(name, value, class.global_default == Some(true)) {
            errors.push(FieldError::forbidden(
                &Path::new("metadata").child("name"),
                format!(
                    "priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system \
                     use only. error: {why}"
                ),
            ));
        }
    } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
        errors.push(FieldError::forbidden(
            &Path::new("value"),
            format!(
                "maximum allowed value of a user defined priority is \
                 {HIGHEST_USER_DEFINABLE_PRIORITY}"
            ),
        ));
    }
    if let Some(policy) = class.preemption_policy.as_deref()
        && !matches!(policy, "Never" | "PreemptLowerPriority")
    {
        errors.push(FieldError::not_supported(
            &Path::new("preemptionPolicy"),
            policy,
            &["Never", "PreemptLowerPriority"],
        ));
    }
    errors
}

/// The value and the preemption policy are immutable.
pub fn validate_update(new: &PriorityClass, old: &PriorityClass) -> ErrorList {
    let mut errors = Vec::new();
    if new.value != old.value {
        errors.push(FieldError::forbidden(
            &Path::new("value"),
            "may not be changed in an update.",
        ));
    }
    errors.extend(immutable(
        &new.preemption_policy,
        &old.preemption_policy,
        &Path::new("preemptionPolicy"),
    ));
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, value: i32) -> PriorityClass {
        let mut class = PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            value: Some(value),
            ..Default::default()
        };
        default(&mut class);
        class
    }

    #[test]
    fn system_classes_validate() {
        for class in system_priority_classes() {
            assert!(validate(&class).is_empty(), "{class:?}");
        }
    }

    #[test]
    fn messages_match_upstream() {
        assert_eq!(
            validate(&class("high", 1_000_000_001))[0].to_string(),
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
        );
        assert_eq!(
            validate(&class("system-mine", 5))[0].to_string(),
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved \
             for system use only. error: system-mine is not a known system priority class"
        );
        assert_eq!(
            validate(&class("system-node-critical", 5))[0].to_string(),
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved \
             for system use only. error: value of system-node-critical PriorityClass must be \
             2000001000"
        );
        assert_eq!(
            validate_update(&class("high", 2), &class("high", 1))[0].to_string(),
            "value: Forbidden: may not be changed in an update."
        );
    }
}
