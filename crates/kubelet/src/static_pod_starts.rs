//! One running static pod per full name (upstream pod workers' `allowStaticPodStart`).
//!
//! An edited manifest gives a new pod (new UID) with the same name; two files may even
//! declare the same name. Upstream lets only one of them start at a time: the next waits
//! until the previous one has fully terminated, so an edited host-network pod does not
//! find its own port taken and no two copies of a static pod ever run together.

use std::collections::{HashMap, VecDeque};

use k8s_openapi::api::core::v1::Pod;

use crate::config::static_pod::{CONFIG_SOURCE_ANNOTATION, is_static_pod_source};

/// Which static pod UID may run for each full name, and who waits for it.
#[derive(Default)]
pub struct StaticPodStarts {
    /// Full name -> the UID allowed to run.
    started: HashMap<String, String>,
    /// Full name -> UIDs waiting, first come first served.
    waiting: HashMap<String, VecDeque<String>>,
}

impl StaticPodStarts {
    /// Whether `pod` may be synced now. Pods from other sources always may; a static pod
    /// may when no other UID of its full name was started, else it is queued.
    pub fn allow(&mut self, pod: &Pod) -> bool {
        let (Some(full_name), Some(uid)) = (static_full_name(pod), pod.metadata.uid.as_deref())
        else {
            return true;
        };
        match self.started.get(&full_name) {
            Some(started) if started != uid => {
                let queue = self.waiting.entry(full_name).or_default();
                if !queue.iter().any(|w| w == uid) {
                    queue.push_back(uid.to_owned());
                }
                false
            }
            _ => {
                self.started.insert(full_name, uid.to_owned());
                true
            }
        }
    }

    /// Pod `uid` terminated (or was removed before it started): frees its full name and
    /// returns the UID that may start next, if one waits.
    pub fn terminated(&mut self, uid: &str) -> Option<String> {
        for queue in self.waiting.values_mut() {
            queue.retain(|w| w != uid);
        }
        let full_name = self
            .started
            .iter()
            .find_map(|(name, started)| (started == uid).then(|| name.clone()))?;
        self.started.remove(&full_name);
        let next = self.waiting.get_mut(&full_name)?.pop_front();
        self.waiting.retain(|_, queue| !queue.is_empty());
        next
    }
}

/// `<name>_<namespace>` of a static pod (file or http source), `None` for other pods.
fn static_full_name(pod: &Pod) -> Option<String> {
    let meta = &pod.metadata;
    let source = meta.annotations.as_ref()?.get(CONFIG_SOURCE_ANNOTATION)?;
    is_static_pod_source(source).then(|| {
        format!(
            "{}_{}",
            meta.name.as_deref().unwrap_or(""),
            meta.namespace.as_deref().unwrap_or("")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::static_pod::FILE_SOURCE;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, uid: &str, source: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                annotations: Some(
                    [(CONFIG_SOURCE_ANNOTATION.to_owned(), source.to_owned())].into(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_new_static_pod_waits_for_the_old_one_to_terminate() {
        let mut starts = StaticPodStarts::default();
        assert!(starts.allow(&pod("web-n", "v1", FILE_SOURCE)));
        assert!(
            starts.allow(&pod("web-n", "v1", FILE_SOURCE)),
            "resyncs stay allowed"
        );
        assert!(!starts.allow(&pod("web-n", "v2", FILE_SOURCE)));
        assert!(!starts.allow(&pod("web-n", "v3", FILE_SOURCE)));
        assert!(
            starts.allow(&pod("other-n", "o1", FILE_SOURCE)),
            "other names are free"
        );

        // v2 was edited away before it ever started; v3 is next once v1 is gone.
        assert_eq!(starts.terminated("v2"), None);
        assert_eq!(starts.terminated("v1").as_deref(), Some("v3"));
        assert!(starts.allow(&pod("web-n", "v3", FILE_SOURCE)));
        assert_eq!(starts.terminated("v3"), None);
        assert!(starts.allow(&pod("web-n", "v4", FILE_SOURCE)));
    }

    #[test]
    fn pods_from_other_sources_are_not_gated() {
        let mut starts = StaticPodStarts::default();
        assert!(starts.allow(&pod("web", "a", "api")));
        assert!(starts.allow(&pod("web", "b", "api")));
    }
}
