//! CEL validation rules (`x-kubernetes-validations`) of a CRD through kubectl, against the
//! embedded server (or a real cluster with KUBEWRIGHT_TEST_KUBECONFIG). Skips with a
//! message when kubectl is absent.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod support;

use support::{Kubectl, have_kubectl, rand_u64, retry_until_served};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_validation_rules_through_kubectl() {
    if !have_kubectl() {
        return;
    }
    let env = Kubectl::start().await;
    let group = format!("c{:08x}.kubewright.test", rand_u64() as u32);
    let crd_name = format!("widgets.{group}");
    let crd = format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {crd_name}
spec:
  group: {group}
  scope: Cluster
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.replicas <= self.maxReplicas"
              message: "replicas must not exceed maxReplicas"
            - rule: "self.ports.all(p, p.port > 1024)"
              messageExpression: "self.ports.exists(p, p.port <= 80) ? 'a port is at or below 80' : 'a port is at or below 1024'"
            properties:
              id:
                type: string
                x-kubernetes-validations:
                - {{rule: "self == oldSelf", message: "id is immutable"}}
              replicas: {{type: integer}}
              maxReplicas: {{type: integer}}
              ports:
                type: array
                # bounds keep the rules within kube-apiserver's estimated cost budget
                maxItems: 16
                items:
                  type: object
                  x-kubernetes-validations:
                  - rule: "self.port > 1024"
                    messageExpression: "'port ' + self.name + ' is at or below 1024'"
                  properties:
                    name:
                      type: string
                      maxLength: 63
                      x-kubernetes-validations:
                      - rule: "self.matches('^[a-z]+$')"
                    port: {{type: integer}}
"#
    );
    env.ok(&["create", "-f", "-"], Some(&crd));
    env.ok(
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd_name}"),
            "--timeout=30s",
        ],
        None,
    );
    let widget = |id: &str, replicas: i64, ports: &str| {
        format!(
            "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  id: {id}\n  replicas: {replicas}\n  maxReplicas: 3\n  ports: {ports}\n"
        )
    };
    // A valid object is accepted (the endpoint may take a moment on a real cluster).
    let valid = widget("a1", 2, "[{name: http, port: 8080}]");
    let created = retry_until_served(|| {
        let (ok, _, err) = env.run(&["create", "-f", "-"], Some(&valid));
        (ok, err)
    });
    assert!(created, "custom resource creation never succeeded");

    // Invalid objects are rejected with the rules' messages at the rules' paths.
    let (ok, _, err) = env.run(
        &["create", "-f", "-"],
        Some(
            &widget("a2", 5, "[{name: http, port: 80}, {name: Bad, port: 8081}]")
                .replace("w1", "w2"),
        ),
    );
    assert!(!ok);
    assert!(err.contains("is invalid"), "{err}");
    assert!(
        err.contains(r#"spec: Invalid value: replicas must not exceed maxReplicas"#),
        "{err}"
    );
    assert!(
        err.contains(r#"spec: Invalid value: a port is at or below 80"#),
        "{err}"
    );
    assert!(
        err.contains(r#"spec.ports[0]: Invalid value: port http is at or below 1024"#),
        "{err}"
    );
    assert!(
        err.contains(
            r#"spec.ports[1].name: Invalid value: "Bad": failed rule: self.matches('^[a-z]+$')"#
        ),
        "{err}"
    );

    // Transition rule: the id cannot change, other fields can.
    env.ok(
        &[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"replicas":3}}"#,
        ],
        None,
    );
    let (ok, _, err) = env.run(
        &[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"id":"b1"}}"#,
        ],
        None,
    );
    assert!(!ok);
    assert!(
        err.contains(r#"spec.id: Invalid value: "b1": id is immutable"#),
        "{err}"
    );
    let (ok, _, err) = env.run(&["replace", "-f", "-"], Some(&widget("b1", 1, "[]")));
    assert!(!ok);
    assert!(err.contains("id is immutable"), "{err}");
    let got = env.json(&["get", "widget", "w1"]);
    assert_eq!(got["spec"]["id"], "a1");
    assert_eq!(got["spec"]["replicas"], 3);

    // A rule that does not compile fails the CRD itself.
    let bad_name = format!("gadgets.{group}");
    let bad = format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {bad_name}}}
spec:
  group: {group}
  scope: Cluster
  names: {{plural: gadgets, singular: gadget, kind: Gadget}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations: [{{rule: "self.a =="}}]
            properties: {{a: {{type: integer}}}}
"#
    );
    let (ok, _, err) = env.run(&["create", "-f", "-"], Some(&bad));
    if ok {
        env.run(&["delete", "crd", &bad_name, "--ignore-not-found"], None);
    }
    assert!(!ok, "a CRD with a rule that does not compile was accepted");
    assert!(
        err.contains(
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
        ) && err.contains("compilation failed"),
        "{err}"
    );

    env.ok(&["delete", "widget", "w1"], None);
    env.ok(&["delete", "crd", &crd_name], None);
}

/// A CRD for `crd_rule_cost_budget`: `ports` and their names with or without bounds.
fn ports_crd(crd_name: &str, group: &str, bounds: bool) -> String {
    let (max_items, max_length) = if bounds {
        (
            "\n                maxItems: 64",
            "\n                      maxLength: 63",
        )
    } else {
        ("", "")
    };
    format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {crd_name}}}
spec:
  group: {group}
  scope: Cluster
  names: {{plural: ports, singular: port, kind: Port}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              ports:
                type: array{max_items}
                items:
                  type: object
                  properties:
                    name:
                      type: string{max_length}
                      x-kubernetes-validations:
                      - rule: "self.matches('^[a-z]+$')"
"#
    )
}

/// kube-apiserver estimates the worst-case cost of each rule from the schema's bounds (or the
/// most a request can hold) and refuses CRDs over budget, per rule and for the whole schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_rule_cost_budget() {
    if !have_kubectl() {
        return;
    }
    let env = Kubectl::start().await;
    let group = format!("b{:08x}.kubewright.test", rand_u64() as u32);
    let crd_name = format!("ports.{group}");
    const HINT: &str = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";

    // A regex on a string of unbounded length, in a list of unbounded size: refused.
    let (ok, _, err) = env.run(
        &["create", "-f", "-"],
        Some(&ports_crd(&crd_name, &group, false)),
    );
    if ok {
        env.run(&["delete", "crd", &crd_name, "--ignore-not-found"], None);
    }
    assert!(!ok, "a CRD with a rule over the cost budget was accepted");
    let rule_field = "spec.validation.openAPIV3Schema.properties[spec].properties[ports].items.properties[name].x-kubernetes-validations[0].rule";
    assert!(
        err.contains(&format!(
            r#"The CustomResourceDefinition "{crd_name}" is invalid"#
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{rule_field}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {HINT}"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{rule_field}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {HINT}"
        )),
        "{err}"
    );

    // With maxItems and maxLength, the same rule is accepted.
    env.ok(
        &["create", "-f", "-"],
        Some(&ports_crd(&crd_name, &group, true)),
    );
    env.ok(&["delete", "crd", &crd_name], None);

    // Rules within budget one by one, over it together: the total is refused, with the
    // factor by which it exceeds the budget and the four most expensive rules. Each rule
    // costs 1000 items x (contains on a string of up to 88000 bytes: 8800, plus 4), plus 3:
    // 8,804,003, and 12 of them 105,648,036.
    let total_name = format!("budgets.{group}");
    let rules: String = (0..12)
        .map(|_| "\n            - rule: \"self.l.all(x, x.contains('abc'))\"")
        .collect();
    let total = format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {total_name}}}
spec:
  group: {group}
  scope: Cluster
  names: {{plural: budgets, singular: budget, kind: Budget}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:{rules}
            properties:
              l:
                type: array
                maxItems: 1000
                items: {{type: string, maxLength: 22000}}
"#
    );
    let (ok, _, err) = env.run(&["create", "-f", "-"], Some(&total));
    if ok {
        env.run(&["delete", "crd", &total_name, "--ignore-not-found"], None);
    }
    assert!(!ok, "a CRD over the total cost budget was accepted");
    assert!(!err.contains("estimated rule cost exceeds budget"), "{err}");
    let base = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    for i in 0..4 {
        assert!(
            err.contains(&format!(
                "{base}[{i}].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            )),
            "{err}"
        );
    }
    assert_eq!(
        err.matches("contributed to estimated rule cost").count(),
        4,
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of 1.056480x {HINT}"
        )),
        "{err}"
    );
}

/// `(` x n + `inner` + `)` x n.
fn nest(open: &str, inner: &str, close: &str, n: usize) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

/// A CRD of kind Deep whose `spec` has `rules` (with messages) over `n` and `b`, and a
/// field `x` of any value.
fn deep_crd(crd_name: &str, group: &str, plural: &str, rules: &[(&str, String)]) -> String {
    let rules: Vec<serde_json::Value> = rules
        .iter()
        .map(|(m, r)| serde_json::json!({"rule": r, "message": m}))
        .collect();
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": plural, "singular": "deep", "kind": "Deep"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {
                        "type": "object",
                        "x-kubernetes-validations": rules,
                        "properties": {
                            "n": {"type": "integer"},
                            "b": {"type": "boolean"},
                            "x": {"x-kubernetes-preserve-unknown-fields": true}
                        }
                    }}
                }}
            }]
        }
    })
    .to_string()
}

/// Rules as deeply nested as kube-apiserver's CEL parser allows are accepted and run on
/// writes; one level deeper they are refused with its errors, the server staying up. Bodies
/// nested 10,000 deep are refused before their schema or rules are looked at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_rules_and_objects() {
    if !have_kubectl() {
        return;
    }
    let env = Kubectl::start().await;
    let group = format!("d{:08x}.kubewright.test", rand_u64() as u32);
    let field = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations";

    // One level too deep for the parse (300 parentheses) and for building the expression
    // (300 additions): refused with cel-go's errors.
    let too_deep = [
        ("parentheses", nest("(", "self.n", ")", 300) + " > 0"),
        ("sums", "self.n".to_string() + &" + 1".repeat(300) + " > 0"),
    ];
    let bad_name = format!("toodeeps.{group}");
    let (ok, _, err) = env.run(
        &["create", "-f", "-"],
        Some(&deep_crd(&bad_name, &group, "toodeeps", &too_deep)),
    );
    if ok {
        env.run(&["delete", "crd", &bad_name, "--ignore-not-found"], None);
    }
    assert!(!ok, "a CRD with a rule nested 300 deep was accepted");
    assert!(
        err.contains(&format!(
            r#"The CustomResourceDefinition "{bad_name}" is invalid"#
        )),
        "{err}"
    );
    for (i, e) in [
        "expression recursion limit exceeded: 250",
        "max recursion depth exceeded",
    ]
    .into_iter()
    .enumerate()
    {
        let msg = format!(
            r#","Message":"{}","MessageExpression":"","Reason":null,"FieldPath":"","OptionalOldSelf":null}}: compilation failed: ERROR: <input>:-1:0: {e}"#,
            too_deep[i].0
        );
        assert!(
            err.contains(&format!("{field}[{i}].rule: Invalid value: {{\"Rule\":\""))
                && err.contains(&msg),
            "{i}: {err}"
        );
    }

    // The deepest of each shape: accepted, and run on every write.
    let deepest = [
        ("parentheses", nest("(", "self.n", ")", 249) + " > 0"),
        ("calls", nest("int(", "self.n", ")", 249) + " > 0"),
        (
            "macros",
            (0..249).fold("self.b".to_string(), |r, i| format!("[1].all(x{i}, {r})")),
        ),
        (
            "sums",
            "1".to_string() + &" + 1".repeat(248) + " + self.n > 249",
        ),
        ("ternaries", "false ? false : ".repeat(248) + "self.n > 0"),
        (
            "lists",
            format!("size({}) == 1", nest("[", "self.n", "]", 248)),
        ),
    ];
    let crd_name = format!("deeps.{group}");
    env.ok(
        &["create", "-f", "-"],
        Some(&deep_crd(&crd_name, &group, "deeps", &deepest)),
    );
    env.ok(
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd_name}"),
            "--timeout=30s",
        ],
        None,
    );
    // `x` nested 100 deep (the body 103): within what both servers decode.
    let x = nest("[", "1", "]", 100);
    let deep = |name: &str, n: i64, b: bool| {
        format!(
            r#"{{"apiVersion": "{group}/v1", "kind": "Deep", "metadata": {{"name": "{name}"}}, "spec": {{"n": {n}, "b": {b}, "x": {x}}}}}"#
        )
    };
    let created = retry_until_served(|| {
        let (ok, _, err) = env.run(&["create", "-f", "-"], Some(&deep("d1", 1, true)));
        (ok, err)
    });
    assert!(created, "custom resource creation never succeeded");
    let got = env.json(&["get", "deep", "d1"]);
    assert_eq!(got["spec"]["x"].to_string(), x);
    let (ok, _, err) = env.run(&["create", "-f", "-"], Some(&deep("d2", 0, false)));
    assert!(!ok, "an object failing the rules was accepted");
    for m in ["parentheses", "calls", "macros", "sums", "ternaries"] {
        assert!(
            err.contains(&format!("spec: Invalid value: {m}")),
            "{m}: {err}"
        );
    }
    assert!(!err.contains("lists"), "{err}");

    // Bodies nested 10,000 deep (a schema, an object): refused as kube-apiserver's decoder
    // refuses them.
    let schema = nest(
        r#"{"type":"object","properties":{"a":"#,
        r#"{"type":"string"}"#,
        "}}",
        10_000,
    );
    let crd = format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{{"name":"deepers.{group}"}},"spec":{{"group":"{group}","scope":"Cluster","names":{{"plural":"deepers","kind":"Deeper"}},"versions":[{{"name":"v1","served":true,"storage":true,"schema":{{"openAPIV3Schema":{schema}}}}}]}}}}"#
    );
    let post = |path: &str, body: &str| {
        let file = env.dir.path().join("body.json");
        std::fs::write(&file, body).unwrap();
        let (ok, out, err) = env.run(
            &["create", "--raw", path, "-f", file.to_str().unwrap()],
            None,
        );
        assert!(!ok, "{out}");
        err
    };
    let err = post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    );
    assert_eq!(
        err.trim(),
        r#"Error from server (BadRequest): the object provided is unrecognized (must be of type CustomResourceDefinition): couldn't get version/kind; json parse error: invalid character '{' exceeded max depth ({"apiVersion":"apiextensions.k ...)"#
    );
    let object = deep("d3", 1, true).replace(&x, &nest("[", "1", "]", 10_000));
    let err = post(&format!("/apis/{group}/v1/deeps"), &object);
    assert_eq!(
        err.trim(),
        format!(
            r#"Error from server (BadRequest): the object provided is unrecognized (must be of type Deep): couldn't get version/kind; json parse error: invalid character '[' exceeded max depth ({} ...)"#,
            &object[..30]
        )
    );

    env.ok(&["delete", "deep", "d1"], None);
    env.ok(&["delete", "crd", &crd_name], None);
}
