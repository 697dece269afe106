use serde_json::json;

use super::*;

fn schema(value: Json) -> JSONSchemaProps {
    serde_json::from_value(value).expect("schema")
}

fn messages(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn root() -> Path {
    Path::new("spec.validation.openAPIV3Schema")
}

/// The schema of the tests: rules at the root, on a nested object, on a string, on the
/// items of a list of type map, and transition rules.
fn widget_schema() -> JSONSchemaProps {
    schema(json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "has(self.spec)", "message": "spec is required",
             "reason": "FieldValueRequired", "fieldPath": ".spec"},
            {"rule": "self.metadata.name != 'forbidden'"}
        ],
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.replicas <= self.maxReplicas",
                     "message": "replicas must be no more than maxReplicas"}
                ],
                "properties": {
                    "replicas": {"type": "integer"},
                    "maxReplicas": {"type": "integer"},
                    "name": {"type": "string",
                             "x-kubernetes-validations": [{"rule": "self.startsWith('a')"}]},
                    "immutable": {"type": "string", "x-kubernetes-validations": [
                        {"rule": "self == oldSelf", "message": "immutable",
                         "reason": "FieldValueForbidden"}]},
                    "tags": {"type": "array", "items": {"type": "string"},
                             "x-kubernetes-validations": [
                                 {"rule": "self.all(t, t.lowerAscii() == t) && self.isSorted()",
                                  "message": "tags must be lower case and sorted"}]},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string"},
                                           "port": {"type": "integer"}},
                            "x-kubernetes-validations": [
                                {"rule": "self.port > 0",
                                 "messageExpression": "'port ' + string(self.port) + ' of ' + self.name + ' must be positive'"},
                                {"rule": "self.port >= oldSelf.port", "message": "port may not decrease"}
                            ]
                        }
                    }
                }
            }
        }
    }))
}

#[test]
fn rules_pass_and_fail_with_upstreams_messages() {
    let validator = compile(&widget_schema(), &root()).expect("compiles");
    let good = json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"replicas": 1, "maxReplicas": 3, "name": "abc", "immutable": "x",
                 "tags": ["a", "b"], "ports": [{"name": "http", "port": 80}]}
    });
    assert_eq!(
        messages(&validator.validate(&good, None, &Path::default())),
        Vec::<String>::new()
    );

    let bad = json!({
        "metadata": {"name": "forbidden"},
        "spec": {"replicas": 5, "maxReplicas": 3, "name": "bcd", "tags": ["b", "a"],
                 "ports": [{"name": "http", "port": 0}]}
    });
    assert_eq!(
        messages(&validator.validate(&bad, None, &Path::default())),
        vec![
            r#": Invalid value: "object": failed rule: self.metadata.name != 'forbidden'"#,
            r#"spec: Invalid value: "object": replicas must be no more than maxReplicas"#,
            r#"spec.name: Invalid value: "string": failed rule: self.startsWith('a')"#,
            r#"spec.ports[0]: Invalid value: "object": port 0 of http must be positive"#,
            r#"spec.tags: Invalid value: "array": tags must be lower case and sorted"#,
        ]
    );

    // reason and fieldPath; an evaluation error (an absent field)
    let errors = validator.validate(&json!({"metadata": {"name": "w"}}), None, &Path::default());
    assert_eq!(
        messages(&errors),
        vec!["spec: Required value: spec is required"]
    );
    assert_eq!(errors[0].kind.reason(), "FieldValueRequired");
    let missing = json!({"metadata": {"name": "w"}, "spec": {"replicas": 1}});
    assert_eq!(
        messages(&validator.validate(&missing, None, &Path::default())),
        vec![
            r#"spec: Invalid value: "object": no such key: maxReplicas evaluating rule: replicas must be no more than maxReplicas"#
        ]
    );
}

#[test]
fn transition_rules_run_on_update_where_old_values_correlate() {
    let validator = compile(&widget_schema(), &root()).expect("compiles");
    let old = json!({"metadata": {"name": "w"}, "spec": {"replicas": 1, "maxReplicas": 1,
        "immutable": "x", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 90}]}});
    let new = json!({"metadata": {"name": "w"}, "spec": {"replicas": 1, "maxReplicas": 1,
        "immutable": "y", "ports": [{"name": "b", "port": 85}, {"name": "a", "port": 80},
                                    {"name": "c", "port": 1}]}});
    // on create the transition rules are skipped
    assert!(validator.validate(&new, None, &Path::default()).is_empty());
    // on update: items correlate by key (`b` moved to index 0 and decreased), `c` is new
    let errors = validator.validate(&new, Some(&old), &Path::default());
    assert_eq!(
        messages(&errors),
        vec![
            "spec.immutable: Forbidden: immutable",
            r#"spec.ports[0]: Invalid value: "object": port may not decrease"#,
        ]
    );
    assert_eq!(errors[0].kind.reason(), "FieldValueForbidden");
    assert!(
        validator
            .validate(&old, Some(&old), &Path::default())
            .is_empty()
    );
}

#[test]
fn optional_old_self_and_libraries() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "items": {"type": "array", "items": {"type": "integer"}},
                    "url": {"type": "string"}, "q": {"type": "string"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "ios": {"x-kubernetes-int-or-string": true}
                },
                "x-kubernetes-validations": [
                    {"rule": "!oldSelf.hasValue() || self.v >= oldSelf.value().v",
                     "optionalOldSelf": true, "message": "v may not decrease"},
                    {"rule": "self.items.sum() == 6 && self.items.min() == 1 && self.items.max() == 3 && self.items.indexOf(2) == 1", "message": "lists"},
                    {"rule": "url(self.url).getHost() == 'example.com:8443' && url(self.url).getPort() == '8443' && isURL(self.url)", "message": "url"},
                    {"rule": "quantity(self.q).isGreaterThan(quantity('1Gi')) && isQuantity(self.q)", "message": "quantity"},
                    {"rule": "self.labels.all(k, k.matches('^[a-z]+$')) && 'app' in self.labels && self.labels['app'].split('-').join('+') == 'a+b'", "message": "labels"},
                    {"rule": "self.ios == 3 || self.ios.endsWith('%')", "message": "int-or-string"}
                ]
            }
        }
    }));
    let validator = compile(&s, &root()).expect("compiles");
    let spec = |v: i64, ios: Json| {
        json!({"spec": {"v": v, "items": [1, 2, 3], "url": "https://example.com:8443/p?a=1",
                        "q": "2Gi", "labels": {"app": "a-b"}, "ios": ios}})
    };
    assert!(
        validator
            .validate(&spec(2, json!(3)), None, &Path::default())
            .is_empty()
    );
    assert!(
        validator
            .validate(&spec(2, json!("5%")), None, &Path::default())
            .is_empty()
    );
    assert_eq!(
        messages(&validator.validate(
            &spec(1, json!("5")),
            Some(&spec(2, json!(3))),
            &Path::default()
        )),
        vec![
            r#"spec: Invalid value: "object": v may not decrease"#,
            r#"spec: Invalid value: "object": int-or-string"#,
        ]
    );
}

#[test]
fn compile_errors_on_the_crd_paths() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object",
                "properties": {"replicas": {"type": "integer"},
                    "list": {"type": "array", "items": {"type": "object",
                        "properties": {"a": {"type": "string"}},
                        "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a"}]}}},
                "x-kubernetes-validations": [
                    {"rule": "self.replicas >"},
                    {"rule": "foo(self.replicas)"},
                    {"rule": "self.nope == 1"},
                    {"rule": "self.replicas + 1"},
                    {"rule": "self.replicas > 0", "messageExpression": "self.replicas"},
                    {"rule": "self.replicas > 0", "optionalOldSelf": true},
                    {"rule": "self.replicas > 0", "reason": "Bogus", "fieldPath": ".nope"}
                ]
            }
        }
    }));
    let errors = compile(&s, &root()).expect_err("invalid rules");
    let p = "spec.validation.openAPIV3Schema.properties[spec]";
    let uncorrelatable = format!(
        "{p}.properties[list].items.x-kubernetes-validations[0].rule: Invalid value: \"self.a == oldSelf.a\": oldSelf cannot be used on the uncorrelatable portion of the schema within {p}.properties[list]"
    );
    // rule 6's errors keep the node's rules from compiling, not the rules under it
    assert_eq!(
        messages(&errors),
        vec![
            uncorrelatable.clone(),
            format!(
                r#"{p}.x-kubernetes-validations[6].reason: Unsupported value: "Bogus": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#
            ),
            format!(
                r#"{p}.x-kubernetes-validations[6].fieldPath: Invalid value: ".nope": fieldPath must be a valid path"#
            ),
        ]
    );

    // without the schema errors of rule 6, the rules compile and fail as upstream's do
    let mut s = s;
    let spec = s
        .properties
        .as_mut()
        .and_then(|p| p.get_mut("spec"))
        .expect("spec");
    spec.x_kubernetes_validations.as_mut().expect("rules").pop();
    let errors = compile(&s, &root()).expect_err("invalid rules");
    let rule = |r: &str, extra: &str| {
        format!(
            r#"apiextensions.ValidationRule{{Rule:"{r}", Message:"", MessageExpression:"{extra}", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}}"#
        )
    };
    let got = messages(&errors);
    assert_eq!(got[0], uncorrelatable);
    assert!(
        got[1].starts_with(&format!(
            "{p}.x-kubernetes-validations[0].rule: Invalid value: {}: compilation failed: ERROR: <input>:1:16: Syntax error: ",
            rule("self.replicas >", "")
        )),
        "{}",
        got[1]
    );
    assert_eq!(
        got[2],
        format!(
            "{p}.x-kubernetes-validations[1].rule: Invalid value: {}: compilation failed: ERROR: <input>:1:4: undeclared reference to 'foo' (in container '')\n | foo(self.replicas)\n | ...^",
            rule("foo(self.replicas)", "")
        )
    );
    assert_eq!(
        got[3],
        format!(
            "{p}.x-kubernetes-validations[2].rule: Invalid value: {}: compilation failed: ERROR: <input>:1:5: undefined field 'nope'\n | self.nope == 1\n | ....^",
            rule("self.nope == 1", "")
        )
    );
    assert_eq!(
        got[4],
        format!(
            "{p}.x-kubernetes-validations[3].rule: Invalid value: {}: cel expression must evaluate to a bool",
            rule("self.replicas + 1", "")
        )
    );
    assert_eq!(
        got[5],
        format!(
            "{p}.x-kubernetes-validations[4].messageExpression: Invalid value: {}: messageExpression must evaluate to a string",
            rule("self.replicas > 0", "self.replicas")
        )
    );
    assert_eq!(
        got[6],
        format!(
            "{p}.x-kubernetes-validations[5].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
        )
    );
    assert_eq!(got.len(), 7);
}

#[test]
fn runaway_rules_are_stopped_before_they_run() {
    let s = schema(json!({
        "type": "object",
        "properties": {"l": {"type": "array", "items": {"type": "integer"},
            "x-kubernetes-validations": [
                {"rule": "self.all(x, self.all(y, x == y || x != y))"},
                {"rule": "self.all(x, x >= 0)"}
            ]}}
    }));
    let validator = compile(&s, &root()).expect("compiles");
    let small = json!({"l": [1, 2, 3]});
    assert!(
        validator
            .validate(&small, None, &Path::default())
            .is_empty()
    );
    let big = json!({"l": (0..2000).collect::<Vec<i64>>()});
    assert_eq!(
        messages(&validator.validate(&big, None, &Path::default())),
        vec![
            r#"l: Invalid value: "array": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(x, self.all(y, x == y || x != y))"#
        ]
    );
}

#[test]
fn every_declared_function_resolves() {
    // each name the static check accepts is one the environment really has: calling it
    // with wrong arguments is a no-such-overload, never an undeclared reference
    let Ok(env) = ENV.as_ref() else {
        panic!("environment");
    };
    for name in library::GLOBAL_FUNCTIONS {
        let program = env.compile(&format!("{name}(1, 2, 3, 4)")).expect("parses");
        let result = program.execute(&Context::with_env(env.clone()));
        assert!(
            !matches!(result, Err(ExecutionError::UndeclaredReference(_))),
            "{name}: {result:?}"
        );
    }
    for name in library::MEMBER_FUNCTIONS {
        let program = env
            .compile(&format!("[1].{name}(1, 2, 3, 4)"))
            .expect("parses");
        let result = program.execute(&Context::with_env(env.clone()));
        assert!(
            !matches!(result, Err(ExecutionError::UndeclaredReference(_))),
            "{name}: {result:?}"
        );
    }
}
