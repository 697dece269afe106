use serde_json::{Value, json};

use super::*;

/// A realistic CRD: two versions with different schemas, status and scale subresources,
/// printer columns, defaults, a list-map, a selectable field.
fn crontab() -> Value {
    let v1_schema = json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["cronSpec"],
                "properties": {
                    "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
                    "image": {"type": "string"},
                    "replicas": {"type": "integer", "minimum": 0, "default": 1},
                    "suspend": {"type": "boolean", "default": false},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string"},
                                "port": {"type": "integer", "format": "int32"},
                                "protocol": {"type": "string", "default": "TCP", "enum": ["TCP", "UDP"]}
                            }
                        }
                    },
                    "selector": {"type": "string"}
                }
            },
            "status": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer"},
                    "labelSelector": {"type": "string"},
                    "lastScheduleTime": {"type": "string", "format": "date-time", "nullable": true}
                }
            }
        }
    });
    let mut beta_schema = v1_schema.clone();
    beta_schema["properties"]["spec"]["properties"]
        .as_object_mut()
        .expect("properties")
        .remove("ports");
    let subresources = json!({
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.labelSelector"
        }
    });
    let columns = json!([
        {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "kind": "CronTab", "shortNames": ["ct"], "categories": ["all"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": v1_schema},
                 "subresources": subresources.clone(), "additionalPrinterColumns": columns.clone(),
                 "selectableFields": [{"jsonPath": ".spec.cronSpec"}]},
                {"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
                 "deprecationWarning": "stable.example.com/v1beta1 CronTab is deprecated",
                 "schema": {"openAPIV3Schema": beta_schema},
                 "subresources": subresources, "additionalPrinterColumns": columns}
            ]
        }
    })
}

fn crd_from(value: Value) -> CustomResourceDefinition {
    let mut crd: CustomResourceDefinition = serde_json::from_value(value).expect("crd");
    defaults(&mut crd);
    prepare_for_create(&mut crd);
    crd
}

fn errors(crd: &CustomResourceDefinition) -> Vec<String> {
    validate_crd(crd).iter().map(ToString::to_string).collect()
}

/// The errors of the CRD after `edit`.
fn errors_after(edit: impl FnOnce(&mut Value)) -> Vec<String> {
    let mut value = crontab();
    edit(&mut value);
    errors(&crd_from(value))
}

fn single_version_with_schema(schema: Value) -> Value {
    let mut value = crontab();
    value["spec"]["versions"] = json!([{
        "name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": schema}
    }]);
    value
}

#[test]
fn realistic_crd_is_valid_and_defaulted() {
    let crd = crd_from(crontab());
    assert_eq!(errors(&crd), Vec::<String>::new());
    assert_eq!(crd.spec.names.singular.as_deref(), Some("crontab"));
    assert_eq!(crd.spec.names.list_kind.as_deref(), Some("CronTabList"));
    assert_eq!(
        crd.spec.conversion.as_ref().map(|c| c.strategy.as_str()),
        Some("None")
    );
    let status = crd.status.as_ref().expect("status");
    assert_eq!(
        status.stored_versions.as_deref(),
        Some(&["v1".to_owned()][..])
    );
    assert_eq!(crd.metadata.generation, Some(1));
}

#[test]
fn names_group_scope_and_versions_report_upstream_messages() {
    assert_eq!(
        errors_after(|v| v["metadata"]["name"] = json!("wrong.stable.example.com")),
        vec![
            r#"metadata.name: Invalid value: "wrong.stable.example.com": must be spec.names.plural+"."+spec.group"#
        ]
    );
    assert_eq!(
        errors_after(|v| {
            v["spec"]["group"] = json!("example");
            v["metadata"]["name"] = json!("crontabs.example");
        }),
        vec![r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#]
    );
    assert_eq!(
        errors_after(|v| v["spec"]["scope"] = json!("Global")),
        vec![
            r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#
        ]
    );
    let got = errors_after(|v| v["spec"]["versions"][1]["storage"] = json!(true));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].starts_with("spec.versions: Invalid value: "),
        "{got:?}"
    );
    assert!(got[0].ends_with(": must have exactly one version marked as storage version"));
    assert_eq!(
        got[1],
        r#"status.storedVersions: Invalid value: ["v1"]: must have the storage version v1beta1"#
    );
    let got = errors_after(|v| v["spec"]["versions"][1]["name"] = json!("v1"));
    assert!(
        got.iter()
            .any(|e| e.ends_with(": must contain unique version names")),
        "{got:?}"
    );
    let got = errors_after(|v| {
        v["spec"]["names"]["kind"] = json!("Cron_Tab");
        v["spec"]["names"]["shortNames"] = json!(["c t"]);
    });
    assert!(
        got.contains(&r#"spec.names.kind: Invalid value: "Cron_Tab": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#.to_owned()),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|e| e.starts_with(r#"spec.names.shortNames[0]: Invalid value: "c t": "#)),
        "{got:?}"
    );
    assert_eq!(
        errors_after(|v| v["spec"]["names"]["listKind"] = json!("CronTab")),
        vec![
            r#"spec.names.listKind: Invalid value: "CronTab": kind and listKind may not be the same"#
        ]
    );
    assert_eq!(
        errors_after(|v| {
            v["spec"]["versions"][1]
                .as_object_mut()
                .expect("version")
                .remove("schema");
        }),
        vec!["spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required"]
    );
    assert_eq!(
        errors_after(|v| v["spec"]["versions"][1]["deprecated"] = json!(false)),
        vec![
            r#"spec.versions[1].deprecationWarning: Invalid value: "stable.example.com/v1beta1 CronTab is deprecated": can only be set for deprecated versions"#
        ]
    );
}

#[test]
fn subresources_columns_and_selectable_fields_report_upstream_messages() {
    let scale = |field: &str, value: &str| {
        let (field, value) = (field.to_owned(), value.to_owned());
        errors_after(move |v| {
            for i in 0..2 {
                v["spec"]["versions"][i]["subresources"]["scale"][&field] = json!(value);
            }
        })
    };
    assert_eq!(
        scale("specReplicasPath", ".replicas"),
        vec![
            r#"spec.subresources.scale.specReplicasPath: Invalid value: ".replicas": should be a json path under .spec"#
        ]
    );
    assert_eq!(
        scale("statusReplicasPath", "status.replicas"),
        vec![
            r#"spec.subresources.scale.statusReplicasPath: Invalid value: "status.replicas": must be a simple json path starting with ."#
        ]
    );
    assert_eq!(
        scale("labelSelectorPath", ".metadata.labels"),
        vec![
            r#"spec.subresources.scale.labelSelectorPath: Invalid value: ".metadata.labels": should be a json path under either .spec or .status"#
        ]
    );
    assert_eq!(
        errors_after(|v| {
            for i in 0..2 {
                v["spec"]["versions"][i]["additionalPrinterColumns"][0]["type"] = json!("float");
            }
        }),
        vec![
            r#"spec.additionalPrinterColumns[0].type: Invalid value: "float": must be one of boolean,date,integer,number,string"#
        ]
    );
    // Different columns per version stay per version.
    assert_eq!(
        errors_after(
            |v| v["spec"]["versions"][1]["additionalPrinterColumns"][0]["jsonPath"] =
                json!("spec.cronSpec")
        ),
        vec![
            r#"spec.versions[1].additionalPrinterColumns[0].JSONPath: Invalid value: "spec.cronSpec": must be a simple json path starting with ."#
        ]
    );
    let selectable = |paths: Value| {
        errors_after(move |v| {
            v["spec"]["versions"][0]["selectableFields"] = paths.clone();
            v["spec"]["versions"][1]["selectableFields"] = paths;
        })
    };
    // Identical selectable fields are hoisted to the spec, where the schemas are not.
    assert_eq!(
        selectable(json!([{"jsonPath": ".spec.cronSpec"}])),
        vec![
            r#"spec.selectableFields: Invalid value: "": selectableFields may only be set when validations.schema is included"#
        ]
    );
    // With per-version selectable fields (they differ), the version's schema is used.
    let got = errors_after(|v| {
        v["spec"]["versions"][0]["selectableFields"] =
            json!([{"jsonPath": ".spec"}, {"jsonPath": ".spec.nope"}]);
    });
    assert_eq!(
        got,
        vec![
            r#"spec.versions[0].selectableFields[0].jsonPath: Invalid value: ".spec": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."#,
            r#"spec.versions[0].selectableFields[1].jsonPath: Invalid value: ".spec.nope": is an invalid path: does not refer to a valid field"#,
        ]
    );
    let nine: Vec<Value> = (0..9)
        .map(|i| json!({"jsonPath": format!(".spec.f{i}")}))
        .collect();
    let got = errors_after(|v| {
        let props = v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            .as_object_mut()
            .expect("props");
        for i in 0..9 {
            props.insert(format!("f{i}"), json!({"type": "string"}));
        }
        v["spec"]["versions"][0]["selectableFields"] = Value::Array(nine);
    });
    assert_eq!(
        got,
        vec!["spec.versions[0].selectableFields: Too many: 9: must have at most 8 items"]
    );
}

#[test]
fn conversion_rules_report_upstream_messages() {
    assert_eq!(
        errors_after(|v| v["spec"]["conversion"] = json!({"strategy": "Webhook"})),
        vec![
            "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
            "spec.conversion.conversionReviewVersions: Required value",
        ]
    );
    assert_eq!(
        errors_after(|v| v["spec"]["conversion"] = json!({
            "strategy": "Webhook",
            "webhook": {"clientConfig": {"service": {"name": "conv", "namespace": "default"}},
                        "conversionReviewVersions": ["v2"]}
        })),
        vec![
            r#"spec.conversion.conversionReviewVersions: Invalid value: ["v2"]: must include at least one of v1, v1beta1"#
        ]
    );
    assert_eq!(
        errors_after(|v| v["spec"]["conversion"] = json!({
            "strategy": "Webhook",
            "webhook": {"clientConfig": {"url": "https://conv.example.com/convert"},
                        "conversionReviewVersions": ["v1"]}
        })),
        Vec::<String>::new()
    );
    assert_eq!(
        errors_after(|v| v["spec"]["conversion"] = json!({
            "strategy": "None",
            "webhook": {"clientConfig": {"url": "https://conv.example.com"}, "conversionReviewVersions": ["v1"]}
        })),
        vec![
            "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
            "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
        ]
    );
    assert_eq!(
        errors_after(|v| v["spec"]["preserveUnknownFields"] = json!(true)),
        vec![
            "spec.preserveUnknownFields: Invalid value: true: must be false in order to use defaults in the schema",
            "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"
        ]
    );
}

#[test]
fn structural_schema_rules_report_upstream_messages() {
    let check = |schema: Value| errors(&crd_from(single_version_with_schema(schema)));
    let root = "spec.validation.openAPIV3Schema";
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}})
        ),
        vec![format!(
            "{root}.properties[spec].type: Required value: must not be empty for specified object fields"
        )]
    );
    assert_eq!(
        check(json!({"type": "object", "properties": {"spec": {"type": "object", "$ref": "#/x"}}})),
        vec![format!(
            "{root}.properties[spec].$ref: Forbidden: $ref is not supported"
        )]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"l": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}})
        ),
        vec![format!(
            "{root}.properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        )]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"m": {"type": "object",
            "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}}})
        ),
        vec![format!(
            "{root}.properties[m].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        )]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"metadata": {"type": "object",
            "properties": {"labels": {"type": "object"}}}}})
        ),
        vec![format!(
            "{root}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        )]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"metadata": {"type": "object",
            "properties": {"name": {"type": "string", "maxLength": 10}}}}})
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"l": {"type": "array",
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}})
        ),
        vec![format!(
            "{root}.properties[l].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
        )]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"t": {"type": "string", "x-kubernetes-embedded-resource": true}}})
        ),
        vec![
            format!(
                "{root}.properties[t].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
            ),
            format!(
                "{root}.properties[t].type: Invalid value: \"string\": must be object if x-kubernetes-embedded-resource is true"
            ),
        ]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"x": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}}})
        ),
        vec![format!(
            "{root}.properties[x].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"
        )]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true,
            "anyOf": [{"type": "integer"}, {"type": "string"}]}}})
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"p": {"type": "string",
            "anyOf": [{"type": "string"}]}}})
        ),
        vec![format!(
            "{root}.properties[p].anyOf[0].type: Forbidden: must be empty to be structural"
        )]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"p": {"type": "object"}},
            "allOf": [{"properties": {"q": {"maxLength": 1}}}]})
        ),
        vec![format!(
            "{root}.properties[q]: Required value: because it is defined in {root}.allOf[0].properties[q]"
        )]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"r": {"type": "integer", "default": "one"}}})
        ),
        vec![format!(
            "{root}.properties[r].default: Invalid value: \"string\":  in body must be of type integer: \"string\""
        )]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"s": {"type": "object", "default": {"a": 1},
            "properties": {"b": {"type": "integer"}}}}})
        ),
        vec![format!(
            "{root}.properties[s].default: Invalid value: {{\"a\":1}}: must not have unknown fields"
        )]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}})
        ),
        vec![format!(
            "{root}.properties[metadata].default: Forbidden: must not be set in top-level metadata"
        )]
    );
    assert_eq!(
        check(
            json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "(abc"}}})
        ),
        vec![format!(
            "{root}.properties[s].pattern: Invalid value: \"(abc\": must be a valid regular expression, but isn't: error parsing regexp: unclosed group: `(abc`"
        )]
    );
    // The status subresource restricts the root.
    let mut value =
        single_version_with_schema(json!({"type": "array", "items": {"type": "string"}}));
    value["spec"]["versions"][0]["subresources"] = json!({"status": {}});
    let got = errors(&crd_from(value));
    assert!(
        got.contains(&format!("{root}.type: Invalid value: \"array\": only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled")),
        "{got:?}"
    );
}

#[test]
fn updates_keep_group_and_plural_and_established_kind() {
    let old = crd_from(crontab());
    let mut new = old.clone();
    new.spec.group = "other.example.com".to_owned();
    new.metadata.name = Some("crontabs.other.example.com".to_owned());
    prepare_for_update(&mut new, &old);
    let got: Vec<String> = validate_crd_update(&new, &old)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        vec![r#"spec.group: Invalid value: "other.example.com": field is immutable"#]
    );
    assert_eq!(new.metadata.generation, Some(2));

    let mut new = old.clone();
    new.spec.names.kind = "Tab".to_owned();
    new.spec.names.list_kind = Some("TabList".to_owned());
    assert!(validate_crd_update(&new, &old).is_empty());
    let mut established = old.clone();
    if let Some(status) = established.status.as_mut() {
        status.conditions = Some(vec![
            serde_json::from_value(json!({
                "type": "Established", "status": "True"
            }))
            .expect("condition"),
        ]);
    }
    let got: Vec<String> = validate_crd_update(&new, &established)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        vec![r#"spec.names.kind: Invalid value: "Tab": field is immutable"#]
    );
}

#[test]
fn custom_resources_are_defaulted_pruned_and_validated() {
    let crd = crd_from(crontab());
    let schema = schema_for_version(&crd, "v1")
        .expect("structural")
        .expect("schema");
    let mut object = json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": "my-cron"},
        "spec": {"cronSpec": "* * * * */5", "image": "busybox", "color": "red",
                 "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]},
        "status": {"lastScheduleTime": null}
    });
    apply_defaults(&schema, &mut object);
    let pruned = prune(&schema, &mut object);
    assert_eq!(pruned, vec!["spec.color"]);
    assert_eq!(object["spec"]["replicas"], json!(1));
    assert_eq!(object["spec"]["suspend"], json!(false));
    assert_eq!(object["spec"]["ports"][0]["protocol"], json!("TCP"));
    assert_eq!(object["status"]["lastScheduleTime"], Value::Null);
    let got: Vec<String> = validate_object(&schema, &object, &Path::default())
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        vec![r#"spec.ports[1]: Duplicate value: {"name":"http"}"#]
    );

    object["spec"]["replicas"] = json!(-2);
    object["spec"]["cronSpec"] = json!("never");
    object["spec"]["ports"] = json!([{"name": "http", "protocol": "SCTP"}]);
    let got: Vec<String> = validate_object(&schema, &object, &Path::default())
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        vec![
            r#"spec.cronSpec: Invalid value: "never": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'"#,
            r#"spec.ports[0].protocol: Unsupported value: "SCTP": supported values: "TCP", "UDP""#,
            r#"spec.replicas: Invalid value: -2: spec.replicas in body should be greater than or equal to 0"#,
        ]
    );
    let scale = crd.spec.versions[0]
        .subresources
        .as_ref()
        .and_then(|s| s.scale.clone())
        .expect("scale");
    let got: Vec<String> = validate_scale(&object, &scale)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        vec![".spec.replicas: Invalid value: -2: should be a non-negative integer"]
    );
}

#[test]
fn published_openapi_has_type_meta_and_v2_stripping() {
    let crd = crd_from(crontab());
    let schema = schema_for_version(&crd, "v1").expect("structural");
    let v3 = openapi_schema(
        schema.as_ref(),
        "stable.example.com",
        "v1",
        "CronTab",
        OpenApiVersion::V3,
    );
    assert_eq!(
        v3["properties"]["metadata"]["allOf"][0]["$ref"],
        json!("#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    );
    assert_eq!(v3["properties"]["kind"]["type"], json!("string"));
    assert_eq!(
        v3["properties"]["spec"]["properties"]["replicas"]["default"],
        json!(1)
    );
    assert_eq!(
        v3["properties"]["status"]["properties"]["lastScheduleTime"]["nullable"],
        json!(true)
    );
    assert_eq!(
        v3["x-kubernetes-group-version-kind"],
        json!([{"group": "stable.example.com", "version": "v1", "kind": "CronTab"}])
    );
    let v2 = openapi_schema(
        schema.as_ref(),
        "stable.example.com",
        "v1",
        "CronTab",
        OpenApiVersion::V2,
    );
    assert_eq!(
        v2["properties"]["metadata"]["$ref"],
        json!("#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    );
    assert_eq!(
        v2["properties"]["status"]["properties"]["lastScheduleTime"],
        json!({"format": "date-time"})
    );
    let list = openapi_list_schema(
        "stable.example.com",
        "v1",
        "CronTab",
        "CronTabList",
        "crontabs",
        OpenApiVersion::V3,
    );
    assert_eq!(
        list["properties"]["items"]["items"]["$ref"],
        json!("#/components/schemas/com.example.stable.v1.CronTab")
    );
}
