//! ImageLocality (upstream `framework/plugins/imagelocality`): prefers nodes that already
//! have the pod's images, weighing each image by its size and by how many nodes have it
//! (an image every node has does not favour any).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{Plugin, ScorePlugin};
use crate::framework::runtime::Handle;
use crate::framework::status::Status;
use crate::framework::types::{ImageStateSummary, MAX_NODE_SCORE, NodeInfo, PodInfo};

/// The plugin's name (upstream `names.ImageLocality`).
pub const NAME: &str = "ImageLocality";
const MB: i64 = 1024 * 1024;
/// Below this sum of image sizes a node scores 0 (upstream `minThreshold`, 23 MiB).
pub const MIN_THRESHOLD: i64 = 23 * MB;
/// The sum of image sizes per container at which a node scores 100 (upstream
/// `maxContainerThreshold`, 1000 MiB).
pub const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// Scores nodes by the images they already have (upstream `ImageLocality`). Takes no
/// args.
///
/// Upstream reads the number of nodes from the snapshot in Score; here PreScore records
/// it (Score alone, without PreScore, counts every image as present on all nodes).
#[derive(Debug, Default)]
pub struct ImageLocality;

/// Builds the plugin; `args` are ignored.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(ImageLocality))
}

/// `name` with `:latest` added when it has neither tag nor digest (upstream
/// `normalizedImageName`).
pub fn normalized_image_name(name: &str) -> String {
    let colon = name.rfind(':');
    let slash = name.rfind('/');
    let has_tag = match (colon, slash) {
        (Some(c), Some(s)) => c > s,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if has_tag {
        name.to_owned()
    } else {
        format!("{name}:latest")
    }
}

/// The image's size scaled by the share of nodes that have it (upstream
/// `scaledImageScore`).
fn scaled_image_score(state: &ImageStateSummary, total_num_nodes: Option<usize>) -> i64 {
    let spread = match total_num_nodes {
        Some(total) if total > 0 => state.num_nodes as f64 / total as f64,
        _ => 1.0,
    };
    (state.size as f64 * spread) as i64
}

/// The sum of the scaled scores of the pod's images present on the node, init
/// containers included (upstream `sumImageScores`).
fn sum_image_scores(node: &NodeInfo, pod: &Pod, total_num_nodes: Option<usize>) -> i64 {
    let Some(spec) = pod.spec.as_ref() else {
        return 0;
    };
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .filter_map(|c| c.image.as_deref())
        .filter_map(|image| node.image_states.get(&normalized_image_name(image)))
        .map(|state| scaled_image_score(state, total_num_nodes))
        .sum()
}

/// Maps the sum into `0..=100` between the thresholds (upstream `calculatePriority`).
fn calculate_priority(sum_scores: i64, num_containers: usize) -> i64 {
    let max_threshold =
        MAX_CONTAINER_THRESHOLD.saturating_mul(i64::try_from(num_containers).unwrap_or(i64::MAX));
    if max_threshold <= MIN_THRESHOLD {
        return 0;
    }
    let sum = sum_scores.clamp(MIN_THRESHOLD, max_threshold);
    MAX_NODE_SCORE * (sum - MIN_THRESHOLD) / (max_threshold - MIN_THRESHOLD)
}

impl Plugin for ImageLocality {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl ScorePlugin for ImageLocality {
    fn score(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> (i64, Status) {
        // Upstream lists the snapshot's nodes; the framework keeps their number in the
        // cycle state.
        let total = state
            .read::<crate::framework::runtime::NumAllNodes>(
                crate::framework::runtime::NUM_ALL_NODES_KEY,
            )
            .map(|n| n.0);
        let sum = sum_image_scores(node_info, &pod.pod, total);
        let num_containers = pod.pod.spec.as_ref().map_or(0, |s| {
            s.containers.len() + s.init_containers.as_ref().map_or(0, Vec::len)
        });
        (calculate_priority(sum, num_containers), Status::success())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use k8s_openapi::api::core::v1::{Container, PodSpec};

    use super::*;
    use crate::framework::plugins::helper::testing;

    fn pod(containers: &[&str], init: &[&str]) -> Pod {
        let c = |images: &[&str]| -> Vec<Container> {
            images
                .iter()
                .enumerate()
                .map(|(i, image)| Container {
                    name: format!("c{i}"),
                    image: Some((*image).to_owned()),
                    ..Default::default()
                })
                .collect()
        };
        let mut p = testing::pod("p", &[]);
        p.spec = Some(PodSpec {
            containers: c(containers),
            init_containers: (!init.is_empty()).then(|| c(init)),
            ..Default::default()
        });
        p
    }

    type ImageList<'a> = &'a [(&'a [&'a str], i64)];

    /// Nodes with `(names, size in MiB)` images; the spread counted as the cache does.
    fn nodes(specs: &[ImageList<'_>]) -> Vec<NodeInfo> {
        let mut count: HashMap<String, usize> = HashMap::new();
        for images in specs {
            for (names, _) in images.iter() {
                for n in names.iter().collect::<std::collections::BTreeSet<_>>() {
                    *count.entry(normalized_image_name(n)).or_default() += 1;
                }
            }
        }
        specs
            .iter()
            .enumerate()
            .map(|(i, images)| {
                let mut n = NodeInfo::new(testing::node(&format!("node{}", i + 1), &[]));
                for (names, size) in images.iter() {
                    for name in names.iter() {
                        let name = normalized_image_name(name);
                        let num_nodes = count.get(&name).copied().unwrap_or(0);
                        n.image_states.insert(
                            name,
                            ImageStateSummary {
                                size: size * MB,
                                num_nodes,
                            },
                        );
                    }
                }
                n
            })
            .collect()
    }

    // Upstream image_locality_test.go, TestImageLocalityPriority.
    #[test]
    fn score_table() {
        let node_40_300_2000: ImageList<'_> = &[
            (&["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40),
            (&["gcr.io/300:latest", "gcr.io/300:v1"], 300),
            (&["gcr.io/2000:latest"], 2000),
        ];
        let node_250_10: ImageList<'_> = &[
            (&["gcr.io/250:latest"], 250),
            (&["gcr.io/10:latest", "gcr.io/10:v1"], 10),
        ];
        let node_600_40_900: ImageList<'_> = &[
            (&["gcr.io/600:latest"], 600),
            (&["gcr.io/40:latest"], 40),
            (&["gcr.io/900:latest"], 900),
        ];
        let node_300_600_900: ImageList<'_> = &[
            (&["gcr.io/300:latest"], 300),
            (&["gcr.io/600:latest"], 600),
            (&["gcr.io/900:latest"], 900),
        ];
        let node_4000_30: ImageList<'_> =
            &[(&["gcr.io/4000:latest"], 4000), (&["gcr.io/30:latest"], 30)];
        let node_20_30_40: ImageList<'_> = &[
            (&["gcr.io/20:latest"], 20),
            (&["gcr.io/30:latest"], 30),
            (&["gcr.io/40:latest"], 40),
        ];
        let empty: ImageList<'_> = &[];
        let cases: Vec<(&str, Pod, Vec<ImageList<'_>>, Vec<i64>)> = vec![
            (
                "two images spread on two nodes, prefer the larger image one",
                pod(&["gcr.io/40", "gcr.io/250"], &[]),
                vec![node_40_300_2000, node_250_10],
                vec![0, 5],
            ),
            (
                "two images on one node, prefer this node",
                pod(&["gcr.io/40", "gcr.io/300"], &[]),
                vec![node_40_300_2000, node_250_10],
                vec![7, 0],
            ),
            (
                "if exceed limit, use limit",
                pod(&["gcr.io/10", "gcr.io/4000"], &[]),
                vec![node_4000_30, node_250_10],
                vec![100, 0],
            ),
            (
                "if exceed limit, use limit (with node which has no images present)",
                pod(&["gcr.io/10", "gcr.io/4000"], &[]),
                vec![node_4000_30, node_250_10, empty],
                vec![66, 0, 0],
            ),
            (
                "pod with multiple large images, node2 is preferred",
                pod(&["gcr.io/300", "gcr.io/600", "gcr.io/900"], &[]),
                vec![node_600_40_900, node_300_600_900, empty],
                vec![32, 36, 0],
            ),
            (
                "pod with multiple small images",
                pod(&["gcr.io/30", "gcr.io/40"], &[]),
                vec![node_20_30_40, node_4000_30],
                vec![1, 0],
            ),
            (
                "include InitContainers",
                pod(&["gcr.io/30"], &["gcr.io/300"]),
                vec![node_40_300_2000, node_20_30_40],
                vec![6, 0],
            ),
        ];
        let plugin = new(None, &testing::handle()).unwrap();
        for (name, p, specs, want) in cases {
            let got = testing::run_score(plugin.as_ref(), &PodInfo::new(p), nodes(&specs));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn normalized_names() {
        let cases = [
            ("gcr.io/40", "gcr.io/40:latest"),
            ("gcr.io/40:v1", "gcr.io/40:v1"),
            ("nginx", "nginx:latest"),
            ("localhost:5000/app", "localhost:5000/app:latest"),
            ("localhost:5000/app:1", "localhost:5000/app:1"),
            ("app@sha256:abcd", "app@sha256:abcd"),
        ];
        for (input, want) in cases {
            assert_eq!(normalized_image_name(input), want, "{input}");
        }
    }
}
