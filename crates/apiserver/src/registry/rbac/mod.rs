//! rbac.authorization.k8s.io/v1 roles, clusterroles, rolebindings and clusterrolebindings
//! (upstream `pkg/registry/rbac/*`), served but not yet enforced: no escalation check on
//! writes and no authorization from them.
//!
//! Upstream's strategies allow create on update; names are path segments; a binding's
//! roleRef is immutable. Roles print Name and Created At; bindings print Name, Role and
//! Age, with Users, Groups and ServiceAccounts under `-o wide`.

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use skiff_api::field::ErrorList;
use skiff_api::rbac;

use super::printers::{self, AGE, NAME, column, wide};
use super::{Registry, Strategy, TableColumn};

/// Adds roles, rolebindings, clusterroles and clusterrolebindings, in upstream's order.
pub fn add(registry: &mut Registry) {
    registry.add(ClusterRoleBindings);
    registry.add(ClusterRoles);
    registry.add(RoleBindings);
    registry.add(Roles);
}

/// `Created At` of the role printers: the creation time in RFC 3339, UTC.
const CREATED_AT: TableColumn = column(
    "Created At",
    "date",
    "CreationTimestamp is a timestamp representing the server time when this object was \
     created. It is not guaranteed to be set in happens-before order across separate \
     operations. Clients may not set this value. It is represented in RFC3339 form and is in \
     UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: \
     https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    0,
);

fn role_columns() -> Vec<TableColumn> {
    vec![NAME, CREATED_AT]
}

fn role_row(metadata: &ObjectMeta) -> Vec<Value> {
    let created = metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_else(|| Value::from("0001-01-01T00:00:00Z"));
    vec![Value::from(printers::name(metadata)), created]
}

/// The binding columns; `kind` is `roleBinding` or `clusterRoleBinding`.
fn binding_columns(
    role_description: &'static str,
    users: &'static str,
    groups: &'static str,
    service_accounts: &'static str,
) -> Vec<TableColumn> {
    vec![
        NAME,
        column("Role", "string", role_description, 0),
        AGE,
        wide("Users", "string", users),
        wide("Groups", "string", groups),
        wide("ServiceAccounts", "string", service_accounts),
    ]
}

fn binding_row(
    metadata: &ObjectMeta,
    role_ref: &RoleRef,
    subjects: Option<&Vec<Subject>>,
) -> Vec<Value> {
    let [users, groups, service_accounts, _] =
        rbac::subjects_strings(subjects.map(Vec::as_slice).unwrap_or_default());
    vec![
        Value::from(printers::name(metadata)),
        Value::from(format!("{}/{}", role_ref.kind, role_ref.name)),
        printers::age(metadata),
        Value::from(users.join(", ")),
        Value::from(groups.join(", ")),
        Value::from(service_accounts.join(", ")),
    ]
}

/// Namespaced roles.
pub struct Roles;

impl Strategy for Roles {
    type Object = Role;

    fn name_rule(&self) -> skiff_api::names::ValidateNameFn {
        skiff_api::names::validate_path_segment_name
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn validate(&self, object: &Role) -> ErrorList {
        rbac::validate_role(object)
    }

    fn columns(&self) -> Vec<TableColumn> {
        role_columns()
    }

    fn row(&self, object: &Role) -> Vec<Value> {
        role_row(&object.metadata)
    }
}

/// Cluster roles, with their aggregation rule.
pub struct ClusterRoles;

impl Strategy for ClusterRoles {
    type Object = ClusterRole;

    fn name_rule(&self) -> skiff_api::names::ValidateNameFn {
        skiff_api::names::validate_path_segment_name
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn validate(&self, object: &ClusterRole) -> ErrorList {
        rbac::validate_cluster_role(object)
    }

    fn columns(&self) -> Vec<TableColumn> {
        role_columns()
    }

    fn row(&self, object: &ClusterRole) -> Vec<Value> {
        role_row(&object.metadata)
    }
}

/// Namespaced role bindings.
pub struct RoleBindings;

impl Strategy for RoleBindings {
    type Object = RoleBinding;

    fn name_rule(&self) -> skiff_api::names::ValidateNameFn {
        skiff_api::names::validate_path_segment_name
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn default(&self, object: &mut RoleBinding) {
        rbac::default_role_binding(object);
    }

    fn validate(&self, object: &RoleBinding) -> ErrorList {
        rbac::validate_role_binding(object)
    }

    fn validate_update(&self, new: &RoleBinding, old: &RoleBinding) -> ErrorList {
        let mut errors = rbac::validate_role_binding(new);
        errors.extend(rbac::validate_role_ref_update(&new.role_ref, &old.role_ref));
        errors
    }

    fn columns(&self) -> Vec<TableColumn> {
        binding_columns(
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the \
             global namespace. If the RoleRef cannot be resolved, the Authorizer must return an \
             error.",
            "Users in the roleBinding",
            "Groups in the roleBinding",
            "ServiceAccounts in the roleBinding",
        )
    }

    fn row(&self, object: &RoleBinding) -> Vec<Value> {
        binding_row(&object.metadata, &object.role_ref, object.subjects.as_ref())
    }
}

/// Cluster role bindings.
pub struct ClusterRoleBindings;

impl Strategy for ClusterRoleBindings {
    type Object = ClusterRoleBinding;

    fn name_rule(&self) -> skiff_api::names::ValidateNameFn {
        skiff_api::names::validate_path_segment_name
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn default(&self, object: &mut ClusterRoleBinding) {
        rbac::default_cluster_role_binding(object);
    }

    fn validate(&self, object: &ClusterRoleBinding) -> ErrorList {
        rbac::validate_cluster_role_binding(object)
    }

    fn validate_update(&self, new: &ClusterRoleBinding, old: &ClusterRoleBinding) -> ErrorList {
        let mut errors = rbac::validate_cluster_role_binding(new);
        errors.extend(rbac::validate_role_ref_update(&new.role_ref, &old.role_ref));
        errors
    }

    fn columns(&self) -> Vec<TableColumn> {
        binding_columns(
            "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef \
             cannot be resolved, the Authorizer must return an error.",
            "Users in the clusterRoleBinding",
            "Groups in the clusterRoleBinding",
            "ServiceAccounts in the clusterRoleBinding",
        )
    }

    fn row(&self, object: &ClusterRoleBinding) -> Vec<Value> {
        binding_row(&object.metadata, &object.role_ref, object.subjects.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::{Value, json};

    use crate::registry::testing::{Reply, Server};

    #[tokio::test]
    async fn roles_and_bindings_through_the_rest_layer() {
        let server = Server::start().await;
        let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]});
        let Reply { status, body, .. } = server.send("POST", roles, &role).await;
        assert_eq!(status, 201, "{body}");
        let Reply { status, body, .. } = server
            .send("GET", &format!("{roles}/pod-reader"), &Value::Null)
            .await;
        assert_eq!(
            (status, &body["rules"][0]["verbs"]),
            (StatusCode::OK, &json!(["get", "list"]))
        );
        let table = server.table(roles).await;
        assert_eq!(table["columnDefinitions"][1]["name"], "Created At");
        let created = table["rows"][0]["cells"][1]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(created.ends_with('Z') && created.len() == 20, "{created}");

        // Non-resource URLs only in cluster roles.
        let mut bad = role.clone();
        bad["metadata"]["name"] = json!("bad");
        bad["rules"] = json!([{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]);
        let Reply { status, body, .. } = server.send("POST", roles, &bad).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(
            body["details"]["causes"][0]["field"],
            "rules[0].nonResourceURLs"
        );
        let cluster_roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
        bad["kind"] = json!("ClusterRole");
        bad["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]});
        let Reply { status, body, .. } = server.send("POST", cluster_roles, &bad).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(
            body["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["agg"],
            "yes"
        );

        // Bindings: defaults, columns, immutable roleRef; PUT creates.
        let bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "readers"},
            "roleRef": {"kind": "ClusterRole", "name": "bad"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                         {"kind": "ServiceAccount", "name": "default", "namespace": "kube-system"}]});
        let Reply { status, body, .. } = server
            .send("PUT", &format!("{bindings}/readers"), &binding)
            .await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
        assert_eq!(body["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
        let table = server.table(bindings).await;
        let names: Vec<&Value> = table["columnDefinitions"]
            .as_array()
            .map(|c| c.iter().map(|c| &c["name"]).collect())
            .unwrap_or_default();
        assert_eq!(
            names,
            ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
        );
        let cells = &table["rows"][0]["cells"];
        assert_eq!(cells[1], "ClusterRole/bad");
        assert_eq!(cells[3], "alice");
        assert_eq!(cells[4], "devs");
        assert_eq!(cells[5], "kube-system/default");
        let mut changed = body.clone();
        changed["roleRef"]["name"] = json!("other");
        let Reply { status, body, .. } = server
            .send("PUT", &format!("{bindings}/readers"), &changed)
            .await;
        assert_eq!(status, 422, "{body}");
        let cause = &body["details"]["causes"][0];
        assert_eq!(
            (&cause["field"], &cause["reason"]),
            (&json!("roleRef"), &json!("FieldValueInvalid"))
        );
        assert!(
            cause["message"]
                .as_str()
                .unwrap_or_default()
                .ends_with("cannot change roleRef")
        );

        // A ServiceAccount subject of a cluster binding needs a namespace.
        let mut no_ns = binding.clone();
        no_ns["metadata"]["name"] = json!("no-ns");
        no_ns["subjects"] = json!([{"kind": "ServiceAccount", "name": "default"}]);
        let Reply { status, body, .. } = server.send("POST", bindings, &no_ns).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(
            body["details"]["causes"][0]["field"],
            "subjects[0].namespace"
        );
    }
}
