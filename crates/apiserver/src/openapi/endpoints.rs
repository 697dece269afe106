//! The REST endpoints of the served kinds as OpenAPI describes them, independent of the
//! OpenAPI version: paths, operations (with upstream's operation IDs, actions and
//! `x-kubernetes-group-version-kind`), parameters, bodies and replies. [`super::v2`] and
//! [`super::v3`] render them.

use super::schemas::{Catalog, Gvk};
use crate::discovery::subresources;
use crate::registry::{Kind, Registry};

/// An HTTP method of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Put,
    Post,
    Delete,
    Patch,
}

impl Method {
    /// The key of the operation in a path item.
    pub fn key(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::Put => "put",
            Method::Post => "post",
            Method::Delete => "delete",
            Method::Patch => "patch",
        }
    }
}

/// A query parameter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Param {
    pub name: &'static str,
    /// `string`, `integer` or `boolean`.
    pub type_: &'static str,
    pub description: &'static str,
}

const fn param(name: &'static str, type_: &'static str, description: &'static str) -> Param {
    Param {
        name,
        type_,
        description,
    }
}

/// On every path.
pub(crate) const PRETTY: Param = param("pretty", "string", "If 'true', the output is indented.");

const DRY_RUN: Param = param(
    "dryRun",
    "string",
    "When present (only value: All), the request runs every stage but nothing is stored.",
);
const FIELD_MANAGER: Param = param(
    "fieldManager",
    "string",
    "The name of the actor making the change, recorded in managedFields.",
);
/// The parameter whose presence on PATCH tells kubectl that the server validates fields
/// (`Ignore`, `Warn`, `Strict`), so that it leaves validation to the server.
const FIELD_VALIDATION: Param = param(
    "fieldValidation",
    "string",
    "How to treat unknown or duplicate fields in the body: Ignore (drop them), Warn (drop them and warn in a Warning header, the default) or Strict (fail with 400 BadRequest).",
);
const FORCE: Param = param(
    "force",
    "boolean",
    "Re-acquire conflicting fields from other managers (apply patches only).",
);
const CONTINUE: Param = param(
    "continue",
    "string",
    "The continue token of the previous page of a paginated list.",
);
const FIELD_SELECTOR: Param = param(
    "fieldSelector",
    "string",
    "Only objects whose fields match this selector (metadata.name=x,spec.nodeName!=y).",
);
const LABEL_SELECTOR: Param = param(
    "labelSelector",
    "string",
    "Only objects whose labels match this selector (app=web,tier in (a,b)).",
);
const LIMIT: Param = param(
    "limit",
    "integer",
    "The largest number of objects to return; the rest follow with the continue token.",
);
const RESOURCE_VERSION: Param = param(
    "resourceVersion",
    "string",
    "The resource version the list or watch starts from; see resourceVersionMatch.",
);
const RESOURCE_VERSION_MATCH: Param = param(
    "resourceVersionMatch",
    "string",
    "How resourceVersion applies to a list: NotOlderThan or Exact.",
);
const SEND_INITIAL_EVENTS: Param = param(
    "sendInitialEvents",
    "boolean",
    "With watch: first send the current objects as ADDED events, then a bookmark.",
);
const TIMEOUT_SECONDS: Param = param(
    "timeoutSeconds",
    "integer",
    "The longest time the list or watch may take, in seconds.",
);
const WATCH: Param = param(
    "watch",
    "boolean",
    "Stream the changes (ADDED, MODIFIED, DELETED, BOOKMARK) instead of listing.",
);
const ALLOW_WATCH_BOOKMARKS: Param = param(
    "allowWatchBookmarks",
    "boolean",
    "With watch: the server may send BOOKMARK events carrying the latest resource version.",
);
const GRACE_PERIOD_SECONDS: Param = param(
    "gracePeriodSeconds",
    "integer",
    "Seconds to wait before the object is deleted; 0 deletes at once.",
);
const ORPHAN_DEPENDENTS: Param = param(
    "orphanDependents",
    "boolean",
    "Deprecated: use propagationPolicy. Whether dependents are orphaned.",
);
const PROPAGATION_POLICY: Param = param(
    "propagationPolicy",
    "string",
    "How dependents are deleted: Orphan, Background or Foreground.",
);
const IGNORE_STORE_READ_ERROR: Param = param(
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "boolean",
    "Delete an object that cannot be read from the store (unsafe).",
);

const LIST_PARAMS: &[Param] = &[
    ALLOW_WATCH_BOOKMARKS,
    CONTINUE,
    FIELD_SELECTOR,
    LABEL_SELECTOR,
    LIMIT,
    RESOURCE_VERSION,
    RESOURCE_VERSION_MATCH,
    SEND_INITIAL_EVENTS,
    TIMEOUT_SECONDS,
    WATCH,
];
const WRITE_PARAMS: &[Param] = &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION];
const PATCH_PARAMS: &[Param] = &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE];
const DELETE_PARAMS: &[Param] = &[
    DRY_RUN,
    GRACE_PERIOD_SECONDS,
    IGNORE_STORE_READ_ERROR,
    ORPHAN_DEPENDENTS,
    PROPAGATION_POLICY,
];
const DELETE_COLLECTION_PARAMS: &[Param] = &[
    CONTINUE,
    DRY_RUN,
    FIELD_SELECTOR,
    GRACE_PERIOD_SECONDS,
    IGNORE_STORE_READ_ERROR,
    LABEL_SELECTOR,
    LIMIT,
    ORPHAN_DEPENDENTS,
    PROPAGATION_POLICY,
    RESOURCE_VERSION,
    RESOURCE_VERSION_MATCH,
    SEND_INITIAL_EVENTS,
    TIMEOUT_SECONDS,
];

/// The patch media types the server accepts.
pub(crate) const PATCH_TYPES: [&str; 4] = [
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

/// What an operation takes or returns: a definition, or text (logs, streams).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Payload {
    /// A definition by name.
    Schema(String),
    /// A string (a log, a stream's upgrade).
    Text,
}

/// One operation of a path.
#[derive(Debug, Clone)]
pub(crate) struct Operation<'a> {
    pub method: Method,
    /// Upstream's operation ID: `listCoreV1NamespacedPod`, `patchAppsV1NamespacedDeploymentScale`.
    pub id: String,
    pub description: String,
    /// `x-kubernetes-action`: get, list, post, put, patch, delete, deletecollection.
    pub action: &'static str,
    /// `x-kubernetes-group-version-kind`: the kind the operation serves.
    pub gvk: Option<Gvk<'a>>,
    pub params: &'static [Param],
    /// The request body: a definition (a patch body is `Patch`, with [`PATCH_TYPES`]).
    pub body: Option<String>,
    pub reply: Payload,
    /// The reply codes besides 200 and 401: 201 Created, 202 Accepted.
    pub also: &'static [u16],
}

impl Operation<'_> {
    pub fn is_patch(&self) -> bool {
        self.method == Method::Patch
    }
}

/// A path parameter (`name`, `namespace`).
#[derive(Debug, Clone)]
pub(crate) struct PathParam {
    pub name: &'static str,
    pub description: String,
}

/// A path and its operations.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint<'a> {
    /// `/api/v1/namespaces/{namespace}/pods/{name}`.
    pub path: String,
    /// The OpenAPI v3 document it belongs to: `api/v1`, `apis/apps/v1`.
    pub document: String,
    /// The tag of its operations: `core_v1`.
    pub tag: String,
    pub path_params: Vec<PathParam>,
    pub operations: Vec<Operation<'a>>,
}

/// The OpenAPI v3 document of a group version: `api/v1` or `apis/<group>/<version>`.
pub(crate) fn document_of(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `Core`, `Apps`, `RbacAuthorization`: the group in operation IDs.
fn group_id(group: &str) -> String {
    if group.is_empty() {
        return "Core".to_owned();
    }
    group
        .trim_end_matches(".k8s.io")
        .split('.')
        .map(capitalize)
        .collect()
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The tag of a group version's operations: `core_v1`, `apps_v1`, `rbacAuthorization_v1`.
pub(crate) fn tag(group: &str, version: &str) -> String {
    let id = group_id(group);
    let mut chars = id.chars();
    let lower: String = match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    };
    format!("{lower}_{version}")
}

/// Builds the operations of one kind.
struct KindEndpoints<'a> {
    kind: &'a dyn Kind,
    gvk: Gvk<'a>,
    /// `CoreV1`.
    prefix_id: String,
    /// `Namespaced` for namespaced kinds.
    scope_id: &'static str,
    schema: String,
}

impl<'a> KindEndpoints<'a> {
    fn id(&self, verb: &str, suffix: &str) -> String {
        format!(
            "{verb}{}{}{}{suffix}",
            self.prefix_id, self.scope_id, self.gvk.kind
        )
    }

    fn op(
        &self,
        method: Method,
        id: String,
        description: String,
        action: &'static str,
        params: &'static [Param],
    ) -> Operation<'a> {
        Operation {
            method,
            id,
            description,
            action,
            gvk: Some(self.gvk),
            params,
            body: None,
            reply: Payload::Schema(self.schema.clone()),
            also: &[],
        }
    }

    fn collection(&self) -> Vec<Operation<'a>> {
        let kind = self.gvk.kind;
        let list = format!("{}List", self.schema);
        vec![
            Operation {
                reply: Payload::Schema(list),
                ..self.op(
                    Method::Get,
                    self.id("list", ""),
                    format!("list or watch objects of kind {kind}"),
                    "list",
                    LIST_PARAMS,
                )
            },
            Operation {
                body: Some(self.schema.clone()),
                also: &[201, 202],
                ..self.op(
                    Method::Post,
                    self.id("create", ""),
                    format!("create a {kind}"),
                    "post",
                    WRITE_PARAMS,
                )
            },
            Operation {
                body: Some(super::schemas::DELETE_OPTIONS.to_owned()),
                reply: Payload::Schema(super::schemas::STATUS.to_owned()),
                ..self.op(
                    Method::Delete,
                    format!("delete{}Collection{}{kind}", self.prefix_id, self.scope_id),
                    format!("delete collection of {kind}"),
                    "deletecollection",
                    DELETE_COLLECTION_PARAMS,
                )
            },
        ]
    }

    fn all_namespaces(&self) -> Operation<'a> {
        let kind = self.gvk.kind;
        Operation {
            reply: Payload::Schema(format!("{}List", self.schema)),
            ..self.op(
                Method::Get,
                format!("list{}{kind}ForAllNamespaces", self.prefix_id),
                format!("list or watch objects of kind {kind}"),
                "list",
                LIST_PARAMS,
            )
        }
    }

    fn item(&self) -> Vec<Operation<'a>> {
        let kind = self.gvk.kind;
        vec![
            self.op(
                Method::Get,
                self.id("read", ""),
                format!("read the specified {kind}"),
                "get",
                &[],
            ),
            Operation {
                body: Some(self.schema.clone()),
                also: &[201],
                ..self.op(
                    Method::Put,
                    self.id("replace", ""),
                    format!("replace the specified {kind}"),
                    "put",
                    WRITE_PARAMS,
                )
            },
            Operation {
                body: Some(super::schemas::PATCH.to_owned()),
                also: &[201],
                ..self.op(
                    Method::Patch,
                    self.id("patch", ""),
                    format!("partially update the specified {kind}"),
                    "patch",
                    PATCH_PARAMS,
                )
            },
            Operation {
                body: Some(super::schemas::DELETE_OPTIONS.to_owned()),
                reply: Payload::Schema(super::schemas::STATUS.to_owned()),
                also: &[202],
                ..self.op(
                    Method::Delete,
                    self.id("delete", ""),
                    format!("delete a {kind}"),
                    "delete",
                    DELETE_PARAMS,
                )
            },
        ]
    }

    /// The operations of a subresource for its verbs (`get`, `create`, `update`, `patch`,
    /// `delete`). `body`: the definition of the subresource's body kind, or `None` for a
    /// stream.
    fn subresource(
        &self,
        name: &str,
        verbs: &[&str],
        gvk: Gvk<'a>,
        body: Option<String>,
    ) -> Vec<Operation<'a>> {
        let kind = self.gvk.kind;
        let suffix = capitalize(name);
        let reply = body.clone().map_or(Payload::Text, Payload::Schema);
        verbs
            .iter()
            .filter_map(|verb| {
                let (method, id_verb, action, params, text) = match *verb {
                    "get" => (Method::Get, "read", "get", &[][..], "read"),
                    "create" => (Method::Post, "create", "post", WRITE_PARAMS, "create"),
                    "update" => (Method::Put, "replace", "put", WRITE_PARAMS, "replace"),
                    "patch" => (
                        Method::Patch,
                        "patch",
                        "patch",
                        PATCH_PARAMS,
                        "partially update",
                    ),
                    "delete" => (Method::Delete, "delete", "delete", &[][..], "delete"),
                    _ => return None,
                };
                let body = match method {
                    Method::Patch => Some(super::schemas::PATCH.to_owned()),
                    Method::Post | Method::Put => body.clone(),
                    Method::Get | Method::Delete => None,
                };
                Some(Operation {
                    method,
                    id: self.id(id_verb, &suffix),
                    description: format!("{text} {name} of the specified {kind}"),
                    action,
                    gvk: Some(gvk),
                    params,
                    body,
                    reply: reply.clone(),
                    also: match method {
                        Method::Post => &[201, 202],
                        Method::Put | Method::Patch => &[201],
                        Method::Get | Method::Delete => &[],
                    },
                })
            })
            .collect()
    }
}

fn path_param(name: &'static str, description: String) -> PathParam {
    PathParam { name, description }
}

/// Every endpoint of `registry`'s kinds, and each group version's discovery document
/// (`/api/v1/`), as upstream's OpenAPI lists them (watch paths aside: the deprecated
/// `/watch/` prefix is not served).
pub(crate) fn endpoints<'a>(registry: &'a Registry, catalog: &Catalog<'a>) -> Vec<Endpoint<'a>> {
    let mut out = Vec::new();
    for group in crate::discovery::grouped(registry) {
        for (version, kinds) in &group.versions {
            let prefix = if group.name.is_empty() {
                format!("/api/{version}")
            } else {
                format!("/apis/{}/{version}", group.name)
            };
            let document = document_of(group.name, version);
            let prefix_id = format!("{}{}", group_id(group.name), capitalize(version));
            let tag = tag(group.name, version);
            out.push(Endpoint {
                path: format!("{prefix}/"),
                document: document.clone(),
                tag: tag.clone(),
                path_params: Vec::new(),
                operations: vec![Operation {
                    method: Method::Get,
                    id: format!("get{prefix_id}APIResources"),
                    description: "get available resources".to_owned(),
                    action: "get",
                    gvk: None,
                    params: &[],
                    body: None,
                    reply: Payload::Schema(super::schemas::API_RESOURCE_LIST.to_owned()),
                    also: &[],
                }],
            });
            for &kind in kinds {
                out.extend(kind_endpoints(
                    kind.as_ref(),
                    catalog,
                    &prefix,
                    &document,
                    &tag,
                    &prefix_id,
                ));
            }
        }
    }
    out
}

fn kind_endpoints<'a>(
    kind: &'a dyn Kind,
    catalog: &Catalog<'_>,
    prefix: &str,
    document: &str,
    tag: &str,
    prefix_id: &str,
) -> Vec<Endpoint<'a>> {
    let info = kind.info();
    let gvk = Gvk {
        group: &info.group,
        version: &info.version,
        kind: &info.kind,
    };
    let Some(schema) = catalog.name_of(gvk) else {
        return Vec::new();
    };
    let builder = KindEndpoints {
        kind,
        gvk,
        prefix_id: prefix_id.to_owned(),
        scope_id: if info.namespaced { "Namespaced" } else { "" },
        schema: schema.to_owned(),
    };
    let namespace = || {
        path_param(
            "namespace",
            "object name and auth scope, such as for teams and projects".to_owned(),
        )
    };
    let name = || path_param("name", format!("name of the {}", info.kind));
    let scope = if info.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let collection = format!("{prefix}{scope}/{}", info.plural);
    let item = format!("{collection}/{{name}}");
    let endpoint = |path: String, path_params: Vec<PathParam>, operations| Endpoint {
        path,
        document: document.to_owned(),
        tag: tag.to_owned(),
        path_params,
        operations,
    };
    let scoped = |mut params: Vec<PathParam>| {
        if info.namespaced {
            params.push(namespace());
        }
        params
    };

    // Only the operations of the verbs the kind serves; a path with none is left out.
    let served = |operations: Vec<Operation<'a>>| -> Vec<Operation<'a>> {
        operations
            .into_iter()
            .filter(|op| {
                let verb = match op.action {
                    "post" => "create",
                    "put" => "update",
                    action => action,
                };
                kind.verbs().contains(&verb)
            })
            .collect()
    };
    let mut out = vec![
        endpoint(collection, scoped(vec![]), served(builder.collection())),
        endpoint(item.clone(), scoped(vec![name()]), served(builder.item())),
    ];
    if info.namespaced {
        out.push(endpoint(
            format!("{prefix}/{}", info.plural),
            vec![],
            served(vec![builder.all_namespaces()]),
        ));
    }
    out.retain(|e| !e.operations.is_empty());
    for sub in subresources(builder.kind) {
        let body_gvk = Gvk {
            group: sub.group,
            version: sub.version,
            kind: sub.kind,
        };
        let custom = builder
            .kind
            .subresources()
            .iter()
            .find(|s| s.name() == sub.name);
        // A custom subresource without a body kind is a stream: text replies.
        let body = match custom {
            Some(s) if s.kind().is_none() => None,
            _ => catalog.name_of(body_gvk).map(str::to_owned),
        };
        out.push(endpoint(
            format!("{item}/{}", sub.name),
            scoped(vec![name()]),
            builder.subresource(sub.name, &sub.verbs, body_gvk, body),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::testing::registry;

    #[test]
    fn operation_ids_and_tags_follow_upstream() {
        assert_eq!(group_id(""), "Core");
        assert_eq!(group_id("rbac.authorization.k8s.io"), "RbacAuthorization");
        assert_eq!(group_id("events.k8s.io"), "Events");
        assert_eq!(tag("", "v1"), "core_v1");
        assert_eq!(
            tag("rbac.authorization.k8s.io", "v1"),
            "rbacAuthorization_v1"
        );
    }

    #[test]
    fn kinds_get_collection_item_and_subresource_paths() {
        let registry = registry();
        let catalog = Catalog::build(&registry);
        let endpoints = endpoints(&registry, &catalog);
        let find = |path: &str| {
            endpoints
                .iter()
                .find(|e| e.path == path)
                .unwrap_or_else(|| panic!("no {path}"))
        };
        let ids = |path: &str| -> Vec<String> {
            find(path).operations.iter().map(|o| o.id.clone()).collect()
        };
        assert_eq!(
            ids("/api/v1/namespaces/{namespace}/pods"),
            [
                "listCoreV1NamespacedPod",
                "createCoreV1NamespacedPod",
                "deleteCoreV1CollectionNamespacedPod"
            ]
        );
        assert_eq!(ids("/api/v1/pods"), ["listCoreV1PodForAllNamespaces"]);
        assert_eq!(ids("/api/v1/"), ["getCoreV1APIResources"]);
        let scale = find("/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale");
        assert_eq!(scale.document, "apis/apps/v1");
        let patch = scale.operations.iter().find(|o| o.is_patch()).unwrap();
        assert_eq!(patch.id, "patchAppsV1NamespacedDeploymentScale");
        assert_eq!(patch.gvk.unwrap().kind, "Scale");
        assert!(patch.params.iter().any(|p| p.name == "fieldValidation"));
        assert_eq!(
            patch.reply,
            Payload::Schema("io.k8s.api.autoscaling.v1.Scale".to_owned())
        );
        let status = find("/api/v1/namespaces/{namespace}/pods/{name}/status");
        assert_eq!(status.operations.len(), 3);
        assert_eq!(
            status
                .path_params
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>(),
            ["name", "namespace"]
        );
    }
}
