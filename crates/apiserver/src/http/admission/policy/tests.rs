//! ValidatingAdmissionPolicy evaluation against storage contents built by hand; the texts
//! are kube-apiserver v1.36's, taken from a real server.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use super::*;
use crate::auth::rbac::UserInfo;
use crate::storage::{Mutation, StorageError};

fn put(s: &Storage, key: &str, obj: Value) {
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    s.mutate(key, &ns, &name, |_, _| {
        Ok::<_, StorageError>(Mutation::Put(obj))
    })
    .unwrap();
}

fn remove(s: &Storage, key: &str, ns: &str, name: &str) {
    s.mutate(key, ns, name, |_, _| {
        Ok::<_, StorageError>(Mutation::Delete)
    })
    .unwrap();
}

fn namespace(s: &Storage, name: &str, labels: Value) {
    put(
        s,
        NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": name, "labels": labels, "uid": "u-1", "managedFields": []},
               "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
    );
}

fn configmap(s: &Storage, ns: &str, name: &str, labels: Value, data: Value) {
    put(
        s,
        "/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": data}),
    );
}

fn policy(s: &Storage, name: &str, spec: Value) {
    put(
        s,
        POLICIES,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
               "metadata": {"name": name}, "spec": spec}),
    );
}

fn binding(s: &Storage, name: &str, spec: Value) {
    put(
        s,
        BINDINGS,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": spec}),
    );
}

/// The constraints of a policy on ConfigMap creates and updates.
fn on_configmaps() -> Value {
    json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]})
}

fn create_cm(ns: &str, name: &str, labels: Value, data: Value) -> Attributes {
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns}, "data": data});
    // as the typed round trip leaves them: no empty labels
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        object["metadata"]["labels"] = labels;
    }
    Attributes {
        operation: Operation::Create,
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        resource: "configmaps".into(),
        subresource: String::new(),
        name: name.into(),
        namespace: ns.into(),
        user: UserInfo::admin(),
        object: Some(object),
        old_object: None,
        options: Some(
            json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "fm"}),
        ),
        dry_run: false,
    }
}

fn cm(name: &str, data: Value) -> Attributes {
    create_cm("team", name, json!({}), data)
}

/// A store with namespace `team` (labelled `env: prod`) and `other`, params `limits` in
/// `team`, and the policy of the client test (`crates/client/tests/admission_policy.rs`).
fn client_test_store() -> Storage {
    let s = Storage::new(100);
    namespace(
        &s,
        "team",
        json!({"kubernetes.io/metadata.name": "team", "env": "prod"}),
    );
    namespace(&s, "other", json!({"kubernetes.io/metadata.name": "other"}));
    configmap(&s, "team", "limits", json!({}), json!({"maxKeys": "2"}));
    policy(
        &s,
        "p",
        json!({
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": on_configmaps(),
            "matchConditions": [{"name": "not-the-params", "expression": "object.metadata.name != 'limits'"}],
            "validations": [
                {"expression": "!has(object.data) || size(object.data) <= int(params.data.maxKeys)",
                 "messageExpression": "'at most ' + params.data.maxKeys + ' keys, got ' + string(size(object.data))"},
                {"expression": "!has(object.data) || !('forbidden' in object.data)",
                 "message": "the key forbidden is not allowed", "reason": "Forbidden"}
            ]
        }),
    );
    s
}

fn select_team(actions: &[&str]) -> Value {
    json!({
        "policyName": "p",
        "validationActions": actions,
        "paramRef": {"name": "limits", "namespace": "team", "parameterNotFoundAction": "Deny"},
        "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team"}}}
    })
}

fn status(e: &ApiError) -> (u16, &str, &str) {
    (
        e.status.code,
        e.status.reason.as_str(),
        e.status.message.as_str(),
    )
}

#[test]
fn no_bindings_no_work() {
    let s = client_test_store();
    assert_eq!(
        validate(&s, &cm("a", json!({"forbidden": "x"}))).unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn deny_with_the_default_reason_is_422_invalid() {
    let s = client_test_store();
    binding(&s, "b", select_team(&["Deny"]));
    let e = validate(&s, &cm("probe", json!({"a": "1", "b": "2", "c": "3"}))).unwrap_err();
    assert_eq!(
        status(&e),
        (
            422,
            "Invalid",
            "configmaps \"probe\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: at most 2 keys, got 3"
        )
    );
    let d = e.status.details.as_ref().unwrap();
    assert_eq!(
        (d.name.as_str(), d.group.as_str(), d.kind.as_str()),
        ("probe", "", "configmaps")
    );
    assert_eq!(d.causes.len(), 1);
    assert_eq!(
        d.causes[0].message,
        "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: at most 2 keys, got 3"
    );
    assert_eq!(
        (d.causes[0].reason.as_str(), d.causes[0].field.as_str()),
        ("", "")
    );
    // fine objects pass, and the params themselves are not matched
    assert!(validate(&s, &cm("fine", json!({"a": "1"}))).is_ok());
    assert!(validate(&s, &cm("limits", json!({"a": "1", "b": "2", "c": "3"}))).is_ok());
}

#[test]
fn deny_with_reason_forbidden_is_403() {
    let s = client_test_store();
    binding(&s, "b", select_team(&["Deny"]));
    let e = validate(&s, &cm("bad", json!({"forbidden": "x"}))).unwrap_err();
    assert_eq!(
        status(&e),
        (
            403,
            "Forbidden",
            "configmaps \"bad\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: the key forbidden is not allowed"
        )
    );
}

#[test]
fn warn_admits_with_a_warning_and_audit_is_silent() {
    let s = client_test_store();
    binding(&s, "w", select_team(&["Warn"]));
    assert_eq!(
        validate(&s, &cm("warned", json!({"forbidden": "x"}))).unwrap(),
        vec!["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'w': the key forbidden is not allowed".to_string()]
    );
    remove(&s, BINDINGS, "", "w");
    binding(&s, "a", select_team(&["Audit"]));
    assert!(
        validate(&s, &cm("audited", json!({"forbidden": "x"})))
            .unwrap()
            .is_empty()
    );
    // Deny and Warn together (the API refuses the pair, a stored one does both): the error
    binding(&s, "dw", select_team(&["Deny", "Warn"]));
    assert_eq!(
        validate(&s, &cm("x", json!({"forbidden": "x"})))
            .unwrap_err()
            .status
            .code,
        403
    );
}

#[test]
fn the_binding_selects_namespaces() {
    let s = client_test_store();
    binding(&s, "b", select_team(&["Deny"]));
    assert!(
        validate(
            &s,
            &create_cm("other", "free", json!({}), json!({"forbidden": "x"}))
        )
        .is_ok()
    );
    // the policy's own namespaceSelector narrows too
    let s = client_test_store();
    let mut spec = select_team(&["Deny"]);
    spec["matchResources"] = json!({});
    binding(&s, "b", spec);
    policy(
        &s,
        "p",
        json!({"matchConstraints": {"resourceRules": on_configmaps()["resourceRules"],
                "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}},
               "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
               "validations": [{"expression": "false", "message": "no"}]}),
    );
    assert!(validate(&s, &create_cm("other", "x", json!({}), json!({}))).is_ok());
    assert_eq!(
        validate(&s, &cm("x", json!({}))).unwrap_err().status.code,
        422
    );
}

#[test]
fn params_not_found() {
    let s = client_test_store();
    let mut spec = select_team(&["Deny"]);
    spec["paramRef"]["name"] = json!("missing");
    binding(&s, "b", spec.clone());
    let e = validate(&s, &cm("c1", json!({}))).unwrap_err();
    assert_eq!(
        status(&e),
        (
            422,
            "Invalid",
            "configmaps \"c1\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        )
    );
    // Allow: nothing is evaluated
    spec["paramRef"]["parameterNotFoundAction"] = json!("Allow");
    binding(&s, "b", spec.clone());
    assert!(validate(&s, &cm("c1", json!({"forbidden": "x"}))).is_ok());
    // a Warn binding is still refused: configuration errors do not go through the actions
    spec["paramRef"]["parameterNotFoundAction"] = json!("Deny");
    spec["validationActions"] = json!(["Warn"]);
    binding(&s, "b", spec);
    assert_eq!(
        validate(&s, &cm("c1", json!({}))).unwrap_err().status.code,
        422
    );
}

#[test]
fn param_namespace_defaults_to_the_request_namespace() {
    let s = client_test_store();
    configmap(&s, "other", "limits", json!({}), json!({"maxKeys": "0"}));
    let spec = json!({"policyName": "p", "validationActions": ["Deny"],
        "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}});
    binding(&s, "b", spec);
    assert!(validate(&s, &cm("c", json!({"a": "1"}))).is_ok());
    let e = validate(&s, &create_cm("other", "c", json!({}), json!({"a": "1"}))).unwrap_err();
    assert!(
        e.status
            .message
            .ends_with("denied request: at most 0 keys, got 1"),
        "{}",
        e.status.message
    );
}

#[test]
fn a_param_selector_evaluates_once_per_param() {
    let s = client_test_store();
    configmap(
        &s,
        "team",
        "l1",
        json!({"limit": "yes"}),
        json!({"maxKeys": "5"}),
    );
    configmap(
        &s,
        "team",
        "l2",
        json!({"limit": "yes"}),
        json!({"maxKeys": "1"}),
    );
    policy(
        &s,
        "p",
        json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
               "matchConstraints": on_configmaps(),
               "validations": [{"expression": "size(object.data) <= int(params.data.maxKeys)",
                                "messageExpression": "params.metadata.name + ' allows ' + params.data.maxKeys"}]}),
    );
    binding(
        &s,
        "b",
        json!({"policyName": "p", "validationActions": ["Warn"],
               "paramRef": {"selector": {"matchLabels": {"limit": "yes"}}, "parameterNotFoundAction": "Deny"}}),
    );
    assert_eq!(
        validate(&s, &cm("c", json!({"a": "1", "b": "2"}))).unwrap(),
        vec![
            "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': l2 allows 1"
                .to_string()
        ]
    );
    // no param selected in a namespace without them
    let e = validate(&s, &create_cm("other", "c", json!({}), json!({}))).unwrap_err();
    assert!(
        e.status
            .message
            .ends_with("no params found for policy binding with `Deny` parameterNotFoundAction")
    );
}

#[test]
fn an_unknown_param_kind_is_a_policy_configuration_error() {
    let s = client_test_store();
    policy(
        &s,
        "p",
        json!({"paramKind": {"apiVersion": "v1", "kind": "Nope"},
               "matchConstraints": on_configmaps(), "validations": [{"expression": "true"}]}),
    );
    binding(&s, "b", select_team(&["Deny"]));
    let e = validate(&s, &cm("t1", json!({}))).unwrap_err();
    assert_eq!(
        status(&e),
        (
            422,
            "Invalid",
            "configmaps \"t1\" is forbidden: ValidatingAdmissionPolicy 'p' denied request: failed to configure policy: failed to find resource referenced by paramKind: '/v1, Kind=Nope'"
        )
    );
    // failurePolicy Ignore
    policy(
        &s,
        "p",
        json!({"paramKind": {"apiVersion": "v1", "kind": "Nope"}, "failurePolicy": "Ignore",
               "matchConstraints": on_configmaps(), "validations": [{"expression": "true"}]}),
    );
    assert!(validate(&s, &cm("t1", json!({}))).is_ok());
}

#[test]
fn a_custom_resource_as_param_kind() {
    let s = client_test_store();
    put(
        &s,
        CRDS,
        json!({"metadata": {"name": "limits.example.com"},
               "spec": {"group": "example.com", "scope": "Cluster",
                        "names": {"kind": "Limit", "plural": "limits"},
                        "versions": [{"name": "v1", "served": true, "storage": true}]}}),
    );
    put(
        &s,
        "example.com/limits",
        json!({"apiVersion": "example.com/v1", "kind": "Limit", "metadata": {"name": "global"}, "max": 1}),
    );
    policy(
        &s,
        "p",
        json!({"paramKind": {"apiVersion": "example.com/v1", "kind": "Limit"},
               "matchConstraints": on_configmaps(),
               "validations": [{"expression": "size(object.data) <= params.max", "message": "too many"}]}),
    );
    binding(
        &s,
        "b",
        json!({"policyName": "p", "validationActions": ["Deny"],
               "paramRef": {"name": "global", "parameterNotFoundAction": "Deny"}}),
    );
    assert!(validate(&s, &cm("c", json!({"a": "1"}))).is_ok());
    assert!(
        validate(&s, &cm("c", json!({"a": "1", "b": "2"})))
            .unwrap_err()
            .status
            .message
            .ends_with(": too many")
    );
    // a namespace in the paramRef of a cluster-scoped kind
    binding(
        &s,
        "b",
        json!({"policyName": "p", "validationActions": ["Deny"],
               "paramRef": {"name": "global", "namespace": "team", "parameterNotFoundAction": "Deny"}}),
    );
    assert!(validate(&s, &cm("c", json!({}))).unwrap_err().status.message.ends_with(
        "failed to configure binding: paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
    ));
}

/// A paramless policy whose binding denies in namespace `team`.
fn paramless(s: &Storage, spec: Value) {
    policy(s, "q", spec);
    binding(
        s,
        "qb",
        json!({"policyName": "q", "validationActions": ["Deny"]}),
    );
}

#[test]
fn runtime_errors_and_failure_policy() {
    let s = client_test_store();
    let spec = |fp: &str| {
        json!({"failurePolicy": fp, "matchConstraints": on_configmaps(),
               "validations": [{"expression": "!has(object.data) || !('err' in object.data) || object.data.nokey == 'x'", "message": "runtime"}]})
    };
    paramless(&s, spec("Fail"));
    let e = validate(&s, &cm("c2", json!({"err": "1"}))).unwrap_err();
    assert_eq!(
        status(&e),
        (
            422,
            "Invalid",
            "configmaps \"c2\" is forbidden: ValidatingAdmissionPolicy 'q' with binding 'qb' denied request: expression '!has(object.data) || !('err' in object.data) || object.data.nokey == 'x'' resulted in error: no such key: nokey"
        )
    );
    paramless(&s, spec("Ignore"));
    assert!(validate(&s, &cm("c2", json!({"err": "1"}))).is_ok());
}

#[test]
fn match_conditions() {
    let s = client_test_store();
    let mc_error = "!has(object.metadata.labels) || object.metadata.labels.mcerr != 'boom' || object.metadata.nope == 'x'";
    paramless(
        &s,
        json!({"matchConstraints": on_configmaps(),
               "matchConditions": [{"name": "skip", "expression": "object.metadata.name != 'skipped'"},
                                   {"name": "mc-error", "expression": mc_error}],
               "validations": [{"expression": "false", "message": "denied"}]}),
    );
    assert!(validate(&s, &cm("skipped", json!({}))).is_ok());
    assert!(
        validate(&s, &cm("c", json!({})))
            .unwrap_err()
            .status
            .message
            .ends_with("denied request: denied")
    );
    let e = validate(
        &s,
        &create_cm("team", "c7", json!({"mcerr": "boom"}), json!({})),
    )
    .unwrap_err();
    assert_eq!(
        status(&e),
        (
            422,
            "Invalid",
            "configmaps \"c7\" is forbidden: ValidatingAdmissionPolicy 'q' with binding 'qb' denied request: expression '!has(object.metadata.labels) || object.metadata.labels.mcerr != 'boom' || object.metadata.nope == 'x'' resulted in error: no such key: nope"
        )
    );
    // a match condition that errors goes through the binding's actions
    binding(
        &s,
        "qb",
        json!({"policyName": "q", "validationActions": ["Warn"]}),
    );
    let w = validate(
        &s,
        &create_cm("team", "c7", json!({"mcerr": "boom"}), json!({})),
    )
    .unwrap();
    assert_eq!(w.len(), 1);
    assert!(
        w[0].ends_with("resulted in error: no such key: nope"),
        "{w:?}"
    );
}

#[test]
fn variables_are_evaluated_when_read() {
    let s = client_test_store();
    paramless(
        &s,
        json!({"matchConstraints": on_configmaps(),
               "variables": [{"name": "num", "expression": "has(object.data) ? size(object.data) : 0"},
                             {"name": "bad", "expression": "object.data.nokey == 'x'"},
                             {"name": "twice", "expression": "variables.num * 2"},
                             {"name": "itself", "expression": "variables['itself']"}],
               "validations": [
                   {"expression": "variables.twice <= 4", "messageExpression": "'at most 2, got ' + string(variables.num)"},
                   {"expression": "!has(object.data) || !('var' in object.data) || variables.bad", "message": "var"},
                   {"expression": "!has(object.data) || !('self' in object.data) || variables.itself", "message": "self"}]}),
    );
    assert!(validate(&s, &cm("ok", json!({"a": "1"}))).is_ok());
    assert!(
        validate(&s, &cm("c1", json!({"a": "1", "b": "2", "c": "3"})))
            .unwrap_err()
            .status
            .message
            .ends_with("denied request: at most 2, got 3")
    );
    let e = validate(&s, &cm("c3", json!({"var": "1"}))).unwrap_err();
    assert_eq!(
        e.status.message,
        "configmaps \"c3\" is forbidden: ValidatingAdmissionPolicy 'q' with binding 'qb' denied request: expression '!has(object.data) || !('var' in object.data) || variables.bad' resulted in error: composited variable \"bad\" fails to evaluate: no such key: nokey"
    );
    // a variable that reads `variables` whole does not evaluate itself forever
    let e = validate(&s, &cm("c4", json!({"self": "1"}))).unwrap_err();
    assert!(
        e.status
            .message
            .ends_with("composited variable \"itself\" fails to evaluate: no such key: itself"),
        "{}",
        e.status.message
    );
}

#[test]
fn messages_fall_back_as_kube_apiserver_does() {
    let s = client_test_store();
    let v = |me: &str| json!({"expression": "false", "message": "  the message  ", "messageExpression": me});
    policy(
        &s,
        "q",
        json!({"matchConstraints": on_configmaps(),
               "validations": [v("'  spaced  '"), v("''"), v("'a\\nb'"), v("request.subResource"), v("1"),
                               {"expression": "object.metadata.name == 'x' "},
                               {"expression": "'not a bool'", "message": "m"}]}),
    );
    binding(
        &s,
        "qb",
        json!({"policyName": "q", "validationActions": ["Warn"]}),
    );
    let w = validate(&s, &cm("c", json!({}))).unwrap();
    let prefix = "Validation failed for ValidatingAdmissionPolicy 'q' with binding 'qb': ";
    let shown: Vec<&str> = w.iter().map(|x| x.strip_prefix(prefix).unwrap()).collect();
    // identical warnings are given once
    assert_eq!(
        shown,
        [
            "spaced",
            "the message",
            "failed expression: object.metadata.name == 'x'",
            "m"
        ]
    );
}

#[test]
fn request_and_namespace_object() {
    let s = client_test_store();
    let exprs = [
        ("request.name", "r1"),
        ("request.namespace", "team"),
        ("request.operation", "CREATE"),
        ("request.userInfo.username", "kubewright-admin"),
        ("string(request.dryRun)", "true"),
        (
            "request.kind.group + '/' + request.kind.version + '/' + request.kind.kind",
            "/v1/ConfigMap",
        ),
        (
            "request.resource.resource + ' ' + request.requestResource.resource",
            "configmaps configmaps",
        ),
        ("request.requestKind.kind", "ConfigMap"),
        (
            "request.userInfo.groups.join(',')",
            "system:masters,system:authenticated",
        ),
        ("request.options.fieldManager", "fm"),
        ("string(has(request.subResource))", "false"),
        (
            "namespaceObject.metadata.name + ' ' + namespaceObject.metadata.labels.env",
            "team prod",
        ),
        (
            "namespaceObject.spec.finalizers.join(',') + ' ' + namespaceObject.status.phase",
            "kubernetes Active",
        ),
        (
            "string(has(namespaceObject.metadata.managedFields)) + string(has(namespaceObject.kind))",
            "falsefalse",
        ),
        ("string(oldObject == null)", "true"),
    ];
    let validations: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, (e, _))| json!({"expression": "false", "message": format!("m{i}"), "messageExpression": e}))
        .collect();
    policy(
        &s,
        "q",
        json!({"matchConstraints": on_configmaps(), "validations": validations}),
    );
    binding(
        &s,
        "qb",
        json!({"policyName": "q", "validationActions": ["Warn"]}),
    );
    let mut attrs = cm("r1", json!({}));
    attrs.dry_run = true;
    let w = validate(&s, &attrs).unwrap();
    let prefix = "Validation failed for ValidatingAdmissionPolicy 'q' with binding 'qb': ";
    let mut want: Vec<String> = Vec::new();
    for (_, v) in exprs {
        let w = format!("{prefix}{v}");
        if !want.contains(&w) {
            want.push(w);
        }
    }
    assert_eq!(w, want);
}

#[test]
fn params_are_undeclared_without_a_param_kind_and_authorizer_is_unsupported() {
    let s = client_test_store();
    paramless(
        &s,
        json!({"matchConstraints": on_configmaps(), "validations": [{"expression": "params == null"}]}),
    );
    let e = validate(&s, &cm("c", json!({}))).unwrap_err();
    assert!(
        e.status.message.ends_with(
            "denied request: compilation error: ERROR: <input>: undeclared reference to 'params' (in container '')"
        ),
        "{}",
        e.status.message
    );
    paramless(
        &s,
        json!({"matchConstraints": on_configmaps(), "failurePolicy": "Ignore",
               "validations": [{"expression": "authorizer.group('').resource('pods').check('get').allowed()"}]}),
    );
    assert!(validate(&s, &cm("c", json!({}))).is_ok());
    // a binding without paramRef of a policy with paramKind: params is null
    policy(
        &s,
        "q",
        json!({"matchConstraints": on_configmaps(), "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
               "validations": [{"expression": "params != null", "message": "null params"}]}),
    );
    assert!(
        validate(&s, &cm("c", json!({})))
            .unwrap_err()
            .status
            .message
            .ends_with(": null params")
    );
}

#[test]
fn rules_operations_scope_names_and_excludes() {
    let s = client_test_store();
    let deny = json!([{"expression": "false", "message": "no"}]);
    let with_rules = |rules: Value, extra: Value| {
        let mut mc = json!({"resourceRules": rules});
        if let Value::Object(m) = extra {
            mc.as_object_mut().unwrap().extend(m);
        }
        json!({"matchConstraints": mc, "validations": deny})
    };
    let rule = |ops: Value, res: Value| json!([{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ops, "resources": res}]);
    let denied = |s: &Storage, a: &Attributes| validate(s, a).is_err();
    paramless(
        &s,
        with_rules(rule(json!(["DELETE"]), json!(["configmaps"])), json!({})),
    );
    assert!(!denied(&s, &cm("c", json!({}))));
    let mut del = cm("c", json!({}));
    del.operation = Operation::Delete;
    del.old_object = del.object.take();
    assert!(denied(&s, &del));
    // the name comes from the request
    assert!(
        validate(&s, &del)
            .unwrap_err()
            .status
            .message
            .starts_with("configmaps \"c\" is forbidden")
    );
    // resourceNames
    paramless(
        &s,
        with_rules(
            json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
        "resources": ["configmaps"], "resourceNames": ["only"]}]),
            json!({}),
        ),
    );
    assert!(!denied(&s, &cm("c", json!({}))));
    assert!(denied(&s, &cm("only", json!({}))));
    // subresources
    paramless(
        &s,
        with_rules(rule(json!(["*"]), json!(["configmaps/status"])), json!({})),
    );
    assert!(!denied(&s, &cm("c", json!({}))));
    let mut st = cm("c", json!({}));
    st.subresource = "status".into();
    assert!(denied(&s, &st));
    paramless(
        &s,
        with_rules(rule(json!(["*"]), json!(["*/*"])), json!({})),
    );
    assert!(denied(&s, &st));
    // scope
    paramless(
        &s,
        with_rules(
            json!([{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"],
        "resources": ["*"], "scope": "Cluster"}]),
            json!({}),
        ),
    );
    assert!(!denied(&s, &cm("c", json!({}))));
    // excludes
    paramless(
        &s,
        with_rules(
            rule(json!(["*"]), json!(["*"])),
            json!({"excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]}),
        ),
    );
    assert!(!denied(&s, &cm("c", json!({}))));
    // object selector: new or old labels
    paramless(
        &s,
        with_rules(
            rule(json!(["*"]), json!(["*"])),
            json!({"objectSelector": {"matchLabels": {"x": "y"}}}),
        ),
    );
    assert!(!denied(&s, &cm("c", json!({}))));
    assert!(denied(
        &s,
        &create_cm("team", "c", json!({"x": "y"}), json!({}))
    ));
    // a binding to a policy that does not exist is ignored
    remove(&s, POLICIES, "", "q");
    assert!(!denied(
        &s,
        &create_cm("team", "c", json!({"x": "y"}), json!({}))
    ));
}

#[test]
fn namespaces_are_matched_by_their_own_labels() {
    let s = client_test_store();
    paramless(
        &s,
        json!({"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                   "operations": ["CREATE"], "resources": ["namespaces"], "scope": "Cluster"}],
                 "namespaceSelector": {"matchLabels": {"guarded": "yes"}}},
               "validations": [{"expression": "namespaceObject == null && request.name == object.metadata.name",
                                "message": "guarded"}]}),
    );
    let ns = |labels: Value| Attributes {
        operation: Operation::Create,
        group: String::new(),
        version: "v1".into(),
        kind: "Namespace".into(),
        resource: "namespaces".into(),
        subresource: String::new(),
        name: "new".into(),
        namespace: String::new(),
        user: UserInfo::admin(),
        object: Some(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "new", "labels": labels}}),
        ),
        old_object: None,
        options: None,
        dry_run: false,
    };
    assert!(validate(&s, &ns(json!({}))).is_ok());
    // the expression holds: admitted
    assert!(validate(&s, &ns(json!({"guarded": "yes"}))).is_ok());
    policy(
        &s,
        "q",
        json!({"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                   "operations": ["CREATE"], "resources": ["namespaces"]}],
                 "namespaceSelector": {"matchLabels": {"guarded": "yes"}}},
               "validations": [{"expression": "false", "message": "guarded"}]}),
    );
    let e = validate(&s, &ns(json!({"guarded": "yes"}))).unwrap_err();
    assert_eq!(
        e.status.message,
        "namespaces \"new\" is forbidden: ValidatingAdmissionPolicy 'q' with binding 'qb' denied request: guarded"
    );
}

#[test]
fn other_reasons_and_groups() {
    let s = client_test_store();
    paramless(
        &s,
        json!({"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["*"],
                   "operations": ["*"], "resources": ["deployments"]}]},
               "validations": [{"expression": "object != null || oldObject.metadata.name != 'keep'", "reason": "RequestEntityTooLarge"},
                               {"expression": "object == null || object.spec.replicas < 5", "reason": "Unauthorized", "message": "too many"}]}),
    );
    let dep = |op: Operation, replicas: i64| Attributes {
        operation: op,
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
        resource: "deployments".into(),
        subresource: String::new(),
        name: "keep".into(),
        namespace: "team".into(),
        user: UserInfo::admin(),
        object: (op != Operation::Delete)
            .then(|| json!({"metadata": {"name": "keep"}, "spec": {"replicas": replicas}})),
        old_object: (op == Operation::Delete)
            .then(|| json!({"metadata": {"name": "keep"}, "spec": {"replicas": replicas}})),
        options: None,
        dry_run: false,
    };
    let e = validate(&s, &dep(Operation::Create, 7)).unwrap_err();
    assert_eq!(
        status(&e),
        (
            401,
            "Unauthorized",
            "deployments.apps \"keep\" is forbidden: ValidatingAdmissionPolicy 'q' with binding 'qb' denied request: too many"
        )
    );
    assert_eq!(e.status.details.as_ref().unwrap().group, "apps");
    assert!(validate(&s, &dep(Operation::Create, 1)).is_ok());
    let e = validate(&s, &dep(Operation::Delete, 1)).unwrap_err();
    assert_eq!(
        status(&e),
        (
            413,
            "RequestEntityTooLarge",
            "deployments.apps \"keep\" is forbidden: ValidatingAdmissionPolicy 'q' with binding 'qb' denied request: failed expression: object != null || oldObject.metadata.name != 'keep'"
        )
    );
}

#[test]
fn generated_names_and_missing_constraints() {
    let s = client_test_store();
    policy(&s, "q", json!({"validations": [{"expression": "true"}]}));
    binding(
        &s,
        "qb",
        json!({"policyName": "q", "validationActions": ["Deny"]}),
    );
    let mut a = cm("", json!({}));
    a.object = Some(json!({"metadata": {"generateName": "gen-"}}));
    let e = validate(&s, &a).unwrap_err();
    assert_eq!(
        e.status.message,
        "configmaps \"gen-\" is forbidden: ValidatingAdmissionPolicy 'q' denied request: failed to configure policy: policy contained no match constraints, a required field"
    );
}

#[test]
fn hostile_expressions_do_not_panic() {
    let s = client_test_store();
    let deep = format!("{}1{}", "[".repeat(400), "]".repeat(400));
    paramless(
        &s,
        json!({"matchConstraints": on_configmaps(),
               "validations": [{"expression": deep}, {"expression": "1 / 0 == 1"}, {"expression": "((("},
                               {"expression": "object.data.a.b.c"}, {"expression": "variables.nope"}]}),
    );
    binding(
        &s,
        "qb",
        json!({"policyName": "q", "validationActions": ["Warn"]}),
    );
    let w = validate(&s, &cm("c", json!({"a": "1"}))).unwrap();
    assert_eq!(w.len(), 5, "{w:?}");
    assert!(
        w[0].contains(
            "compilation error: ERROR: <input>:-1:0: expression recursion limit exceeded: 250"
        ),
        "{w:?}"
    );
    assert!(
        w[1].ends_with("resulted in error: division by zero"),
        "{w:?}"
    );
    assert!(
        w[4].ends_with("compilation error: ERROR: <input>: undefined field 'nope'"),
        "{w:?}"
    );
}
