//! Indexed Jobs (upstream `pkg/controller/job/indexed_job_utils.go`, KEP-2214): each pod
//! carries its completion index in the annotation and label
//! `batch.kubernetes.io/job-completion-index`, is named `<job>-<index>-<random>` with
//! hostname `<job>-<index>`, and sees the index in `JOB_COMPLETION_INDEX`. The
//! succeeded indexes are kept in `status.completedIndexes` as ordered intervals
//! (`"1,3-5,7"`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec,
};

/// The annotation (and label) holding a pod's completion index.
pub(crate) const COMPLETION_INDEX_KEY: &str = "batch.kubernetes.io/job-completion-index";
/// The environment variable through which containers see their index.
pub(crate) const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// The completion index of a pod, if its annotation holds a non-negative integer
/// (upstream `getCompletionIndex`; anything else is `unknownCompletionIndex`).
pub(crate) fn completion_index(pod: &Pod) -> Option<usize> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX_KEY)?
        .parse::<usize>()
        .ok()
}

/// A set of completion indexes as ordered, disjoint, non-adjacent intervals (upstream
/// `orderedIntervals`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OrderedIntervals(Vec<(usize, usize)>);

impl OrderedIntervals {
    /// Parses `"1,3-5"`, keeping only indexes below `completions` (upstream
    /// `parseIndexesFromString`); malformed items are skipped, as upstream logs and
    /// skips them.
    pub(crate) fn parse(s: &str, completions: usize) -> Self {
        let mut set = BTreeSet::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (first, last) = match item.split_once('-') {
                Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                    (Ok(a), Ok(b)) if a <= b => (a, b),
                    _ => continue,
                },
                None => match item.parse::<usize>() {
                    Ok(a) => (a, a),
                    Err(_) => continue,
                },
            };
            if first >= completions {
                continue;
            }
            set.extend(first..=last.min(completions.saturating_sub(1)));
        }
        Self::from_sorted(set)
    }

    fn from_sorted(set: BTreeSet<usize>) -> Self {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for ix in set {
            match out.last_mut() {
                Some((_, last)) if *last + 1 == ix => *last = ix,
                _ => out.push((ix, ix)),
            }
        }
        Self(out)
    }

    /// The union with `new` (upstream `withOrderedIndexes`).
    pub(crate) fn with(&self, new: impl IntoIterator<Item = usize>) -> Self {
        let mut set: BTreeSet<usize> = self.iter().collect();
        set.extend(new);
        Self::from_sorted(set)
    }

    /// The union with `other` (upstream `merge`).
    pub(crate) fn merge(&self, other: &Self) -> Self {
        self.with(other.iter())
    }

    /// The intervals, `(first, last)` inclusive, ascending and apart.
    pub(crate) fn intervals(&self) -> &[(usize, usize)] {
        &self.0
    }

    /// Every index, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().flat_map(|&(a, b)| a..=b)
    }

    /// Whether `ix` is in the set.
    pub(crate) fn has(&self, ix: usize) -> bool {
        self.0.iter().any(|&(a, b)| a <= ix && ix <= b)
    }

    /// How many indexes the set holds.
    pub(crate) fn total(&self) -> usize {
        self.0.iter().map(|&(a, b)| b - a + 1).sum()
    }
}

impl std::fmt::Display for OrderedIntervals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, &(a, b)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match b - a {
                0 => write!(f, "{a}")?,
                // Upstream writes two adjacent indexes as a list, not a range.
                1 => write!(f, "{a},{b}")?,
                _ => write!(f, "{a}-{b}")?,
            }
        }
        Ok(())
    }
}

/// The succeeded indexes before and after counting `pods` (upstream
/// `calculateSucceededIndexes`): the status's `completedIndexes` and those plus the
/// succeeded pods that still carry the tracking finalizer.
pub(crate) fn succeeded_indexes(
    completed: Option<&str>,
    completions: usize,
    pods: &[std::sync::Arc<Pod>],
    has_finalizer: impl Fn(&Pod) -> bool,
) -> (OrderedIntervals, OrderedIntervals) {
    let prev = OrderedIntervals::parse(completed.unwrap_or(""), completions);
    let new = pods.iter().filter_map(|p| {
        let ix = completion_index(p)?;
        let succeeded = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
        (succeeded && ix < completions && has_finalizer(p)).then_some(ix)
    });
    let all = prev.with(new);
    (prev, all)
}

/// The `count` lowest indexes below `completions` that are not `finished` (succeeded or,
/// with `backoffLimitPerIndex`, failed) and have no active pod (upstream
/// `firstPendingIndexes`).
pub(crate) fn first_pending_indexes(
    finished: &OrderedIntervals,
    active: &[std::sync::Arc<Pod>],
    count: usize,
    completions: usize,
) -> Vec<usize> {
    let held: BTreeSet<usize> = active.iter().filter_map(|p| completion_index(p)).collect();
    (0..completions)
        .filter(|ix| !finished.has(*ix) && !held.contains(ix))
        .take(count)
        .collect()
}

/// The active pods to delete because their index is missing, out of range or repeated
/// (upstream `appendDuplicatedIndexPodsForRemoval`); of a repeated index, a ready pod is
/// kept before one that is not.
pub(crate) fn duplicated_index_pods(
    active: &[std::sync::Arc<Pod>],
    completions: usize,
) -> Vec<std::sync::Arc<Pod>> {
    let mut seen = BTreeSet::new();
    let mut sorted: Vec<&std::sync::Arc<Pod>> = active.iter().collect();
    // Ready pods first within an index, so that a repeat deletes the less advanced one.
    sorted.sort_by_key(|p| {
        (
            completion_index(p),
            !skiff_api::core::pod::conditions::is_pod_ready(p),
        )
    });
    let mut remove = Vec::new();
    for p in sorted {
        match completion_index(p) {
            Some(ix) if ix < completions && seen.insert(ix) => {}
            _ => remove.push(std::sync::Arc::clone(p)),
        }
    }
    remove
}

/// `JOB_COMPLETION_INDEX` from the index annotation in every container and init
/// container that does not set it (upstream `addCompletionIndexEnvVariables`).
pub(crate) fn add_completion_index_env(template: &mut PodTemplateSpec) {
    let Some(spec) = template.spec.as_mut() else {
        return;
    };
    let add = |c: &mut Container| {
        let env = c.env.get_or_insert_with(Vec::new);
        if env.iter().any(|e| e.name == COMPLETION_INDEX_ENV) {
            return;
        }
        env.push(EnvVar {
            name: COMPLETION_INDEX_ENV.to_owned(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    api_version: None,
                    field_path: format!("metadata.annotations['{COMPLETION_INDEX_KEY}']"),
                }),
                ..Default::default()
            }),
        });
    };
    spec.containers.iter_mut().for_each(add);
    spec.init_containers.iter_mut().flatten().for_each(add);
}

/// The template of index `ix`'s pod: the index annotation and label, and the hostname
/// `<job>-<ix>` (upstream `addCompletionIndexAnnotation`, `addCompletionIndexLabel`).
pub(crate) fn template_for_index(
    template: &PodTemplateSpec,
    job_name: &str,
    ix: usize,
) -> PodTemplateSpec {
    let mut t = template.clone();
    let meta = t.metadata.get_or_insert_with(Default::default);
    for map in [&mut meta.annotations, &mut meta.labels] {
        map.get_or_insert_with(Default::default)
            .insert(COMPLETION_INDEX_KEY.to_owned(), ix.to_string());
    }
    if let Some(spec) = t.spec.as_mut() {
        spec.hostname = Some(format!("{job_name}-{ix}"));
    }
    t
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(ix: Option<&str>, phase: &str) -> Arc<Pod> {
        let mut annotations = std::collections::BTreeMap::new();
        if let Some(ix) = ix {
            annotations.insert(COMPLETION_INDEX_KEY.to_owned(), ix.to_owned());
        }
        Arc::new(Pod {
            metadata: ObjectMeta {
                annotations: Some(annotations),
                ..Default::default()
            },
            spec: None,
            status: Some(k8s_openapi::api::core::v1::PodStatus {
                phase: Some(phase.to_owned()),
                ..Default::default()
            }),
        })
    }

    #[test]
    fn intervals_parse_and_print_as_upstream() {
        let s = OrderedIntervals::parse("0,2-4,5,9,x,7-6, 12", 10);
        assert_eq!(s.to_string(), "0,2-5,9");
        assert_eq!(s.total(), 6);
        assert!(s.has(3) && !s.has(1) && !s.has(12));
        assert_eq!(s.with([1, 7, 8]).to_string(), "0-5,7-9");
        assert_eq!(OrderedIntervals::parse("3-4", 10).to_string(), "3,4");
        assert_eq!(OrderedIntervals::parse("", 10).to_string(), "");
        assert_eq!(OrderedIntervals::parse("2-100", 5).to_string(), "2-4");
        let failed = OrderedIntervals::parse("1,6-7", 10);
        let merged = s.merge(&failed);
        assert_eq!(merged.to_string(), "0-7,9");
        assert_eq!(merged.intervals(), &[(0, 7), (9, 9)]);
        assert_eq!(merged.total(), 9);
        assert_eq!(OrderedIntervals::default().merge(&failed), failed);
    }

    #[test]
    fn pending_indexes_skip_succeeded_and_active() {
        let succeeded = OrderedIntervals::parse("0,2", 6);
        let active = vec![pod(Some("1"), "Running"), pod(Some("4"), "Pending")];
        assert_eq!(first_pending_indexes(&succeeded, &active, 3, 6), vec![3, 5]);
        assert_eq!(first_pending_indexes(&succeeded, &active, 1, 6), vec![3]);
    }

    #[test]
    fn succeeded_indexes_count_only_tracked_pods_in_range() {
        let pods = vec![
            pod(Some("1"), "Succeeded"),
            pod(Some("9"), "Succeeded"),
            pod(Some("2"), "Failed"),
            pod(None, "Succeeded"),
        ];
        let (prev, all) = succeeded_indexes(Some("0"), 5, &pods, |_| true);
        assert_eq!(
            (prev.to_string(), all.to_string()),
            ("0".into(), "0,1".into())
        );
        let (_, untracked) = succeeded_indexes(Some("0"), 5, &pods, |_| false);
        assert_eq!(untracked.to_string(), "0");
    }

    #[test]
    fn repeated_and_invalid_indexes_are_removed() {
        let active = vec![
            pod(Some("0"), "Running"),
            pod(Some("0"), "Running"),
            pod(Some("7"), "Running"),
            pod(None, "Running"),
            pod(Some("1"), "Running"),
        ];
        assert_eq!(duplicated_index_pods(&active, 3).len(), 3);
    }

    #[test]
    fn index_env_and_template() {
        let mut t: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "spec": {"containers": [{"name": "a"}, {"name": "b", "env": [
                {"name": "JOB_COMPLETION_INDEX", "value": "mine"}]}],
                "initContainers": [{"name": "i"}]},
        }))
        .expect("template");
        add_completion_index_env(&mut t);
        let t = template_for_index(&t, "work", 3);
        let spec = t.spec.as_ref().expect("spec");
        assert_eq!(spec.hostname.as_deref(), Some("work-3"));
        let env = |c: &Container| c.env.clone().unwrap_or_default();
        assert!(env(&spec.containers[0])[0].value_from.is_some());
        assert_eq!(env(&spec.containers[1]).len(), 1);
        assert_eq!(
            env(&spec.init_containers.as_ref().expect("init")[0]).len(),
            1
        );
        let meta = t.metadata.expect("meta");
        assert_eq!(meta.labels.expect("labels")[COMPLETION_INDEX_KEY], "3");
    }
}
