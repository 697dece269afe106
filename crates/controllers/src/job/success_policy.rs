//! `spec.successPolicy` of Indexed Jobs (upstream `pkg/controller/job/success_policy.go`,
//! KEP-3998, GA in 1.33): the Job succeeds early once the succeeded indexes satisfy one of
//! its rules. The rules are tried in order; a rule with `succeededIndexes` matches when all
//! those indexes succeeded, or, with `succeededCount` too, at least that many of them; a
//! rule with `succeededCount` alone matches when that many indexes succeeded in all.
//!
//! The controller then writes `SuccessCriteriaMet` with reason `SuccessPolicy` and the
//! message "Matched rules at index N", deletes the remaining pods, and once none is left
//! writes `Complete` with the same reason and message.

use k8s_openapi::api::batch::v1::SuccessPolicy;

use super::indexed::OrderedIntervals;

/// The reason of `SuccessCriteriaMet` and `Complete` (upstream `JobReasonSuccessPolicy`).
pub(crate) const REASON: &str = "SuccessPolicy";

/// The message of the first rule of `policy` that `succeeded` satisfies, among indexes
/// below `completions` (upstream `matchSuccessPolicy`): `Matched rules at index N`. None
/// without a policy, before any index succeeded, or when no rule matches; a rule whose
/// `succeededIndexes` names no index below `completions` (or cannot be read) is skipped.
pub(crate) fn match_success_policy(
    policy: Option<&SuccessPolicy>,
    completions: usize,
    succeeded: &OrderedIntervals,
) -> Option<String> {
    let policy = policy?;
    if succeeded.total() == 0 {
        return None;
    }
    let matched = policy.rules.iter().position(|rule| {
        match (&rule.succeeded_indexes, rule.succeeded_count) {
            (Some(indexes), count) => {
                let required = OrderedIntervals::parse(indexes, completions);
                required.total() > 0 && matches_succeeded_indexes(&required, succeeded, count)
            }
            (None, Some(count)) => count_reached(succeeded.total(), count),
            (None, None) => false,
        }
    })?;
    Some(format!("Matched rules at index {matched}"))
}

/// Whether every index of `required` succeeded, or at least `count` of them (upstream
/// `matchSucceededIndexesRule`): one pass over both interval lists.
fn matches_succeeded_indexes(
    required: &OrderedIntervals,
    succeeded: &OrderedIntervals,
    count: Option<i32>,
) -> bool {
    let (want, have) = (required.intervals(), succeeded.intervals());
    let (mut w, mut h) = (0, 0);
    let mut overlap = 0;
    while let (Some(&(w_first, w_last)), Some(&(h_first, h_last))) = (want.get(w), have.get(h)) {
        let (first, last) = (w_first.max(h_first), w_last.min(h_last));
        if first <= last {
            overlap += last - first + 1;
        }
        // Step past whichever interval ends first (both when they end together).
        if h_last <= w_last {
            h += 1;
        }
        if w_last <= h_last {
            w += 1;
        }
    }
    overlap == required.total() || count.is_some_and(|c| count_reached(overlap, c))
}

/// Whether `n` indexes reach the rule's `succeededCount` (compared as upstream compares
/// an int with an int32).
fn count_reached(n: usize, count: i32) -> bool {
    i64::try_from(n).unwrap_or(i64::MAX) >= i64::from(count)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn policy(rules: serde_json::Value) -> SuccessPolicy {
        serde_json::from_value(json!({ "rules": rules })).expect("a success policy")
    }

    fn set(s: &str) -> OrderedIntervals {
        OrderedIntervals::parse(s, 100)
    }

    #[test]
    fn succeeded_indexes_must_all_succeed_unless_a_count_is_given() {
        let required = set("1-3,7,9-10");
        assert!(!matches_succeeded_indexes(&required, &set("0-3,9"), None));
        assert!(matches_succeeded_indexes(&required, &set("0-10"), None));
        assert!(!matches_succeeded_indexes(
            &required,
            &set("1,3,5,7,9-10"),
            None
        ));
        // 1, 3, 7, 9 and 10 of the six required indexes: five.
        assert!(matches_succeeded_indexes(
            &required,
            &set("1,3,5,7,9-10"),
            Some(5)
        ));
        assert!(!matches_succeeded_indexes(
            &required,
            &set("1,3,5,7,9-10"),
            Some(6)
        ));
        // Intervals that end together, and one that spans several required ones.
        assert!(matches_succeeded_indexes(
            &set("2-4,6"),
            &set("0-4,6"),
            None
        ));
        assert!(matches_succeeded_indexes(&set("2,4,6"), &set("1-8"), None));
        assert!(!matches_succeeded_indexes(
            &set("2,4,6"),
            &set("5"),
            Some(2)
        ));
    }

    #[test]
    fn the_first_matching_rule_names_the_message() {
        let p = policy(json!([
            {"succeededCount": 3},
            {"succeededIndexes": "0,4", "succeededCount": 1},
            {"succeededIndexes": "1"},
        ]));
        assert_eq!(match_success_policy(Some(&p), 5, &set("")), None);
        assert_eq!(match_success_policy(Some(&p), 5, &set("2")), None);
        assert_eq!(
            match_success_policy(Some(&p), 5, &set("1")).as_deref(),
            Some("Matched rules at index 2")
        );
        assert_eq!(
            match_success_policy(Some(&p), 5, &set("1,4")).as_deref(),
            Some("Matched rules at index 1")
        );
        assert_eq!(
            match_success_policy(Some(&p), 5, &set("1-3")).as_deref(),
            Some("Matched rules at index 0")
        );
        assert_eq!(match_success_policy(None, 5, &set("0-4")), None);
    }

    #[test]
    fn rules_naming_no_index_in_range_are_skipped() {
        let p = policy(json!([
            {"succeededIndexes": "7-9", "succeededCount": 0},
            {"succeededIndexes": "x"},
            {},
            {"succeededIndexes": "2", "succeededCount": 1},
        ]));
        assert_eq!(
            match_success_policy(Some(&p), 5, &set("0-2")).as_deref(),
            Some("Matched rules at index 3")
        );
        assert_eq!(match_success_policy(Some(&p), 5, &set("0,1")), None);
    }
}
