//! flowcontrol.apiserver.k8s.io/v1 flowschemas and prioritylevelconfigurations, both with
//! `/status` (upstream `pkg/registry/flowcontrol/*`), served but not yet enforced: requests
//! are not classified or queued by them.
//!
//! Both are cluster-scoped and bump `metadata.generation` on spec changes. The bootstrap
//! objects ([`skiff_api::flowcontrol::bootstrap`]) are created at start by
//! `crate::bootstrap`.

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use serde_json::Value;
use skiff_api::field::ErrorList;
use skiff_api::flowcontrol;

use super::printers::{self, AGE, NAME, column};
use super::{Registry, Strategy, TableColumn};

/// Adds flowschemas and prioritylevelconfigurations.
pub fn add(registry: &mut Registry) {
    registry.add(FlowSchemas);
    registry.add(PriorityLevelConfigurations);
}

/// Flow schemas: classify requests into priority levels.
pub struct FlowSchemas;

impl Strategy for FlowSchemas {
    type Object = FlowSchema;

    fn status_subresource(&self) -> bool {
        true
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut FlowSchema) {
        flowcontrol::default_flow_schema(object);
    }

    fn prepare_for_create(&self, object: &mut FlowSchema) {
        object.status = None;
    }

    fn validate(&self, object: &FlowSchema) -> ErrorList {
        flowcontrol::validate_flow_schema(object)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "PriorityLevel",
                "string",
                "`name` is the name of the priority level configuration being referenced Required.",
                0,
            ),
            column(
                "MatchingPrecedence",
                "string",
                "`matchingPrecedence` is used to choose among the FlowSchemas that match a given \
                 request. The chosen FlowSchema is among those with the numerically lowest (which \
                 we take to be logically highest) MatchingPrecedence.  Each MatchingPrecedence \
                 value must be ranged in [1,10000]. Note that if the precedence is not specified, \
                 it will be set to 1000 as default.",
                0,
            ),
            column(
                "DistinguisherMethod",
                "string",
                "`distinguisherMethod` defines how to compute the flow distinguisher for requests \
                 that match this schema. `nil` specifies that the distinguisher is disabled and \
                 thus will always be the empty string.",
                0,
            ),
            AGE,
            column(
                "MissingPL",
                "string",
                "references a broken or non-existent PriorityLevelConfiguration",
                0,
            ),
        ]
    }

    fn row(&self, object: &FlowSchema) -> Vec<Value> {
        let spec = &object.spec;
        let method = spec
            .distinguisher_method
            .as_ref()
            .map_or("<none>", |m| m.type_.as_str());
        let dangling = object
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Dangling"))
            .map_or("?", |c| c.status.as_deref().unwrap_or_default());
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(spec.priority_level_configuration.name.as_str()),
            Value::from(spec.matching_precedence.unwrap_or(0)),
            Value::from(method),
            printers::age(&object.metadata),
            Value::from(dangling),
        ]
    }
}

/// Priority levels: the concurrency shares and queues of a class of requests.
pub struct PriorityLevelConfigurations;

impl Strategy for PriorityLevelConfigurations {
    type Object = PriorityLevelConfiguration;

    fn status_subresource(&self) -> bool {
        true
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut PriorityLevelConfiguration) {
        flowcontrol::default_priority_level(object);
    }

    fn prepare_for_create(&self, object: &mut PriorityLevelConfiguration) {
        object.status = None;
    }

    fn validate(&self, object: &PriorityLevelConfiguration) -> ErrorList {
        flowcontrol::validate_priority_level(object)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Type",
                "string",
                "`type` indicates whether this priority level is subject to limitation on request \
                 execution.  A value of `\"Exempt\"` means that requests of this priority level \
                 are not subject to a limit (and thus are never queued) and do not detract from \
                 the capacity made available to other priority levels.  A value of `\"Limited\"` \
                 means that (a) requests of this priority level _are_ subject to limits and (b) \
                 some of the server's limited capacity is made available exclusively to this \
                 priority level. Required.",
                0,
            ),
            column(
                "NominalConcurrencyShares",
                "string",
                "`nominalConcurrencyShares` (NCS) contributes to the computation of the \
                 NominalConcurrencyLimit (NominalCL) of this level. This is the number of \
                 execution seats available at this priority level. This is used both for \
                 requests dispatched from this priority level as well as requests dispatched \
                 from other priority levels borrowing seats from this level. The server's \
                 concurrency limit (ServerCL) is divided among the Limited priority levels in \
                 proportion to their NCS values:\n\nNominalCL(i)  = ceil( ServerCL * NCS(i) / \
                 sum_ncs ) sum_ncs = sum[priority level k] NCS(k)\n\nBigger numbers mean a \
                 larger nominal concurrency limit, at the expense of every other priority \
                 level.\n\nIf not specified, this field defaults to a value of 30.\n\nSetting \
                 this field to zero supports the construction of a \"jail\" for this priority \
                 level that is used to hold some request(s)",
                0,
            ),
            column(
                "Queues",
                "string",
                "`queues` is the number of queues for this priority level. The queues exist \
                 independently at each apiserver. The value must be positive.  Setting it to 1 \
                 effectively precludes shufflesharding and thus makes the distinguisher method \
                 of associated flow schemas irrelevant.  This field has a default value of 64.",
                0,
            ),
            column(
                "HandSize",
                "string",
                "`handSize` is a small positive number that configures the shuffle sharding of \
                 requests into queues.  When enqueuing a request at this priority level the \
                 request's flow identifier (a string pair) is hashed and the hash value is used \
                 to shuffle the list of queues and deal a hand of the size specified here.  The \
                 request is put into one of the shortest queues in that hand. `handSize` must be \
                 no larger than `queues`, and should be significantly smaller (so that a few \
                 heavy flows do not saturate most of the queues).  See the user-facing \
                 documentation for more extensive guidance on setting this field.  This field \
                 has a default value of 8.",
                0,
            ),
            column(
                "QueueLengthLimit",
                "string",
                "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a \
                 given queue of this priority level at a time; excess requests are rejected.  \
                 This value must be positive.  If not specified, it will be defaulted to 50.",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &PriorityLevelConfiguration) -> Vec<Value> {
        let none = || Value::from("<none>");
        let mut cells = [none(), none(), none(), none()];
        if let Some(limited) = &object.spec.limited {
            cells[0] = Value::from(limited.nominal_concurrency_shares.unwrap_or(0));
            if let Some(queuing) = &limited.limit_response.queuing {
                cells[1] = Value::from(queuing.queues.unwrap_or(0));
                cells[2] = Value::from(queuing.hand_size.unwrap_or(0));
                cells[3] = Value::from(queuing.queue_length_limit.unwrap_or(0));
            }
        }
        let [shares, queues, hand, limit] = cells;
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(object.spec.type_.as_str()),
            shares,
            queues,
            hand,
            limit,
            printers::age(&object.metadata),
        ]
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::{Value, json};

    use crate::registry::testing::{Reply, Server};

    const GROUP: &str = "/apis/flowcontrol.apiserver.k8s.io/v1";

    #[tokio::test]
    async fn priority_levels_through_the_rest_layer() {
        let server = Server::start().await;
        let uri = format!("{GROUP}/prioritylevelconfigurations");
        let level = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration", "metadata": {"name": "batch"},
            "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}});
        let Reply { status, body, .. } = server.send("POST", &uri, &level).await;
        assert_eq!(status, 201, "{body}");
        let limited = &body["spec"]["limited"];
        assert_eq!(limited["nominalConcurrencyShares"], 30);
        assert_eq!(limited["lendablePercent"], 0);
        assert_eq!(
            limited["limitResponse"]["queuing"],
            json!({"queues": 64, "handSize": 8, "queueLengthLimit": 50})
        );
        let got = server
            .send("GET", &format!("{uri}/batch"), &Value::Null)
            .await;
        assert_eq!(
            (got.status, &got.body["spec"]),
            (StatusCode::OK, &body["spec"])
        );
        let table = server.table(&format!("{uri}/batch")).await;
        assert_eq!(
            table["rows"][0]["cells"]
                .as_array()
                .map(|c| c[..6].to_vec()),
            Some(vec![
                json!("batch"),
                json!("Limited"),
                json!(30),
                json!(64),
                json!(8),
                json!(50)
            ])
        );

        // Status is written through /status only.
        let mut with_status = body.clone();
        with_status["status"] =
            json!({"conditions": [{"type": "ConcurrencyShared", "status": "True"}]});
        let updated = server
            .send("PUT", &format!("{uri}/batch"), &with_status)
            .await;
        assert_eq!(updated.status, 200, "{}", updated.body);
        assert!(
            updated
                .body
                .get("status")
                .is_none_or(|s| s.get("conditions").is_none()),
            "{}",
            updated.body
        );
        let updated = server
            .send("PUT", &format!("{uri}/batch/status"), &with_status)
            .await;
        assert_eq!(updated.status, 200, "{}", updated.body);
        assert_eq!(
            updated.body["status"]["conditions"][0]["type"],
            "ConcurrencyShared"
        );

        let mut bad = level.clone();
        bad["metadata"]["name"] = json!("jail");
        bad["spec"]["limited"]["limitResponse"] = json!({"type": "Reject", "queuing": {}});
        let Reply { status, body, .. } = server.send("POST", &uri, &bad).await;
        assert_eq!(status, 422, "{body}");
        let cause = &body["details"]["causes"][0];
        assert_eq!(cause["field"], "spec.limited.limitResponse.queuing");
        assert_eq!(
            cause["message"],
            "Forbidden: must be nil if limited.limitResponse.type is not Limited"
        );
    }

    #[tokio::test]
    async fn flow_schemas_through_the_rest_layer() {
        let server = Server::start().await;
        let uri = format!("{GROUP}/flowschemas");
        let schema = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": "batch-jobs"},
            "spec": {"priorityLevelConfiguration": {"name": "batch"},
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "Group", "group": {"name": "batch"}}],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["batch"],
                                                   "resources": ["jobs"], "namespaces": ["*"]}]}]}});
        let Reply { status, body, .. } = server.send("POST", &uri, &schema).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["spec"]["matchingPrecedence"], 1000);
        assert_eq!(body["metadata"]["generation"], 1);
        let table = server.table(&uri).await;
        let names: Vec<&Value> = table["columnDefinitions"]
            .as_array()
            .map(|c| c.iter().map(|c| &c["name"]).collect())
            .unwrap_or_default();
        assert_eq!(
            names,
            [
                "Name",
                "PriorityLevel",
                "MatchingPrecedence",
                "DistinguisherMethod",
                "Age",
                "MissingPL"
            ]
        );
        let cells = &table["rows"][0]["cells"];
        assert_eq!(
            (&cells[1], &cells[2], &cells[3], &cells[5]),
            (&json!("batch"), &json!(1000), &json!("ByUser"), &json!("?"))
        );

        let mut bad = schema.clone();
        bad["metadata"]["name"] = json!("bad");
        bad["spec"]["matchingPrecedence"] = json!(10001);
        let Reply { status, body, .. } = server.send("POST", &uri, &bad).await;
        assert_eq!(status, 422, "{body}");
        let cause = &body["details"]["causes"][0];
        assert_eq!(cause["field"], "spec.matchingPrecedence");
        assert_eq!(
            cause["message"],
            "Invalid value: 10001: must not be greater than 10000"
        );
    }

    #[tokio::test]
    async fn bootstrap_creates_the_apf_objects_once() {
        let server = Server::start().await;
        let user = crate::bootstrap::system_user();
        let objects = crate::rest::objects::ServerObjects::new(&server.state, &user, false);
        let endpoint = crate::bootstrap::Endpoint {
            service_ip: [10, 96, 0, 1].into(),
            advertise_address: [192, 0, 2, 10].into(),
            port: 6443,
        };
        for _ in 0..2 {
            crate::bootstrap::run(&server.state.registry.current(), &objects, endpoint)
                .await
                .expect("bootstrap");
        }
        let list = server
            .send("GET", &format!("{GROUP}/flowschemas"), &Value::Null)
            .await;
        assert_eq!(list.status, 200, "{}", list.body);
        let names: Vec<&str> = list.body["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i["metadata"]["name"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(names.len(), 13, "{names:?}");
        for name in [
            "exempt",
            "catch-all",
            "probes",
            "system-nodes",
            "global-default",
        ] {
            assert!(names.contains(&name), "{name}");
        }
        let exempt = server
            .send(
                "GET",
                &format!("{GROUP}/prioritylevelconfigurations/exempt"),
                &Value::Null,
            )
            .await;
        assert_eq!(exempt.status, 200, "{}", exempt.body);
        assert_eq!(
            exempt.body["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
            "true"
        );
        assert_eq!(
            exempt.body["spec"],
            json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}})
        );
        let levels = server
            .send(
                "GET",
                &format!("{GROUP}/prioritylevelconfigurations"),
                &Value::Null,
            )
            .await;
        assert_eq!(levels.body["items"].as_array().map(Vec::len), Some(8));
    }
}
