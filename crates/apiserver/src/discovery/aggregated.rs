//! Aggregated discovery (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`, and `v2beta1`
//! for kubectl 1.26–1.29): every group, version, resource and subresource in one document
//! each for `/api` and `/apis` (upstream `k8s.io/api/apidiscovery/v2`).

use axum::http::HeaderMap;
use axum::response::Response;
use serde::Serialize;

use super::{Document, GroupVersions, subresources};
use crate::registry::Kind;

/// The `g`, `v` and `as` parameters of the aggregated media types.
const GROUP: &str = "apidiscovery.k8s.io";
const KIND: &str = "APIGroupDiscoveryList";

/// A discovery format a client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// `APIVersions`, `APIGroupList`, `APIResourceList`, ...: `application/json`.
    Legacy,
    /// `apidiscovery.k8s.io/v2`.
    V2,
    /// `apidiscovery.k8s.io/v2beta1`.
    V2Beta1,
}

impl Format {
    fn version(self) -> &'static str {
        match self {
            Format::V2Beta1 => "v2beta1",
            Format::Legacy | Format::V2 => "v2",
        }
    }

    /// The `Content-Type` of an aggregated answer, with the parameters the client sent
    /// (client-go checks them, in any order).
    fn content_type(self) -> String {
        format!("application/json;g={GROUP};v={};as={KIND}", self.version())
    }
}

/// The first format of `accept` (in the client's order of preference, by `q`) that the
/// endpoint serves; an absent header accepts JSON. `aggregated`: whether the endpoint
/// (`/api`, `/apis`) also serves the aggregated formats. `None`: nothing acceptable (406).
pub(super) fn negotiate(accept: Option<&str>, aggregated: bool) -> Option<Format> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Some(Format::Legacy);
    };
    let mut ranges: Vec<(f32, Option<Format>)> = accept
        .split(',')
        .filter_map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next()?.to_ascii_lowercase();
            let mut q = 1.0;
            let (mut g, mut v, mut as_) = (None, None, None);
            for param in parts {
                let (key, value) = param.split_once('=')?;
                let value = value.trim().trim_matches('"');
                match key.trim() {
                    "q" => q = value.parse().unwrap_or(0.0),
                    "g" => g = Some(value),
                    "v" => v = Some(value),
                    "as" => as_ = Some(value),
                    // `charset`, `profile=nopeer` (no peers here): no effect.
                    _ => {}
                }
            }
            let json = matches!(media.as_str(), "application/json" | "application/*" | "*/*");
            let format = match (g, v, as_) {
                (None, None, None) if json => Some(Format::Legacy),
                (Some(GROUP), Some("v2"), Some(KIND)) if aggregated && json => Some(Format::V2),
                (Some(GROUP), Some("v2beta1"), Some(KIND)) if aggregated && json => {
                    Some(Format::V2Beta1)
                }
                _ => None,
            };
            Some((q, format))
        })
        .filter(|(q, _)| *q > 0.0)
        .collect();
    // Stable: equal q keeps the client's order.
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0));
    ranges.into_iter().find_map(|(_, format)| format)
}

/// `metav1.GroupVersionKind`.
#[derive(Serialize)]
struct GroupVersionKind<'a> {
    group: &'a str,
    version: &'a str,
    kind: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct APISubresourceDiscovery<'a> {
    subresource: &'a str,
    response_kind: GroupVersionKind<'a>,
    verbs: Vec<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct APIResourceDiscovery<'a> {
    resource: &'a str,
    response_kind: GroupVersionKind<'a>,
    /// `Namespaced` or `Cluster`.
    scope: &'static str,
    singular_resource: &'a str,
    verbs: &'static [&'static str],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    short_names: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    categories: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    subresources: Vec<APISubresourceDiscovery<'a>>,
}

#[derive(Serialize)]
struct APIVersionDiscovery<'a> {
    version: String,
    resources: Vec<APIResourceDiscovery<'a>>,
    /// `Current`: a single server's own resources are never stale.
    freshness: &'static str,
}

#[derive(Serialize)]
struct Metadata<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
}

#[derive(Serialize)]
struct APIGroupDiscovery<'a> {
    metadata: Metadata<'a>,
    versions: Vec<APIVersionDiscovery<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct APIGroupDiscoveryList<'a> {
    api_version: String,
    kind: &'static str,
    metadata: serde_json::Map<String, serde_json::Value>,
    items: Vec<APIGroupDiscovery<'a>>,
}

fn resource(kind: &dyn Kind) -> APIResourceDiscovery<'_> {
    let info = kind.info();
    APIResourceDiscovery {
        resource: &info.plural,
        response_kind: GroupVersionKind {
            group: &info.group,
            version: &info.version,
            kind: &info.kind,
        },
        scope: if info.namespaced {
            "Namespaced"
        } else {
            "Cluster"
        },
        singular_resource: &info.singular,
        verbs: kind.verbs(),
        short_names: &info.short_names,
        categories: &info.categories,
        subresources: subresources(kind)
            .into_iter()
            .map(|s| APISubresourceDiscovery {
                subresource: s.name,
                response_kind: GroupVersionKind {
                    group: s.group,
                    version: s.version,
                    kind: s.kind,
                },
                verbs: s.verbs,
            })
            .collect(),
    }
}

fn list(groups: &[&GroupVersions<'_>], format: Format) -> Document {
    let items = groups
        .iter()
        .map(|group| APIGroupDiscovery {
            metadata: Metadata { name: group.name },
            versions: group
                .versions
                .iter()
                .map(|(version, kinds)| APIVersionDiscovery {
                    version: version.to_string(),
                    resources: kinds.iter().map(|k| resource(k.as_ref())).collect(),
                    freshness: "Current",
                })
                .collect(),
        })
        .collect();
    Document::json(&APIGroupDiscoveryList {
        api_version: format!("{GROUP}/{}", format.version()),
        kind: KIND,
        metadata: serde_json::Map::new(),
        items,
    })
}

/// The aggregated documents of `/api` (the core group) and `/apis` (named groups), in both
/// versions.
pub(super) struct Documents {
    core: [Document; 2],
    named: [Document; 2],
}

impl Documents {
    pub fn build(groups: &[GroupVersions<'_>]) -> Self {
        let (core, named): (Vec<_>, Vec<_>) = groups.iter().partition(|g| g.name.is_empty());
        Documents {
            core: [list(&core, Format::V2), list(&core, Format::V2Beta1)],
            named: [list(&named, Format::V2), list(&named, Format::V2Beta1)],
        }
    }

    /// The document of `/api` (`core`) or `/apis` in `format` (V2 or V2Beta1).
    pub fn respond(&self, core: bool, format: Format, request: &HeaderMap) -> Response {
        let docs = if core { &self.core } else { &self.named };
        let doc = if format == Format::V2Beta1 {
            &docs[1]
        } else {
            &docs[0]
        };
        doc.respond(request, &format.content_type())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_133: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    const KUBECTL_127: &str = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

    #[test]
    fn negotiates_kubectl_accept_headers() {
        assert_eq!(negotiate(Some(KUBECTL_133), true), Some(Format::V2));
        assert_eq!(negotiate(Some(KUBECTL_127), true), Some(Format::V2Beta1));
        assert_eq!(negotiate(Some(KUBECTL_133), false), Some(Format::Legacy));
        assert_eq!(negotiate(None, true), Some(Format::Legacy));
        assert_eq!(negotiate(Some("*/*"), true), Some(Format::Legacy));
        // Parameters in any order, and client-go's nopeer profile.
        assert_eq!(
            negotiate(
                Some(
                    "application/json; as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io;profile=nopeer"
                ),
                true
            ),
            Some(Format::V2)
        );
        // Quality values order the ranges.
        assert_eq!(
            negotiate(
                Some(
                    "application/json;q=0.5,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
                ),
                true
            ),
            Some(Format::V2)
        );
    }

    #[test]
    fn refuses_formats_it_does_not_serve() {
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf"), true),
            None
        );
        assert_eq!(
            negotiate(
                Some("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"),
                true
            ),
            None
        );
        assert_eq!(
            negotiate(Some("application/json;as=Table;v=v1;g=meta.k8s.io"), true),
            None
        );
        assert_eq!(negotiate(Some("application/json;q=0"), true), None);
    }

    #[test]
    fn content_type_carries_the_requested_version() {
        assert_eq!(
            Format::V2Beta1.content_type(),
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        );
    }
}
