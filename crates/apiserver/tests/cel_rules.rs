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
              messageExpression: "'found ' + string(size(self.ports.filter(p, p.port <= 1024))) + ' ports at or below 1024'"
            properties:
              id:
                type: string
                x-kubernetes-validations:
                - {{rule: "self == oldSelf", message: "id is immutable"}}
              replicas: {{type: integer}}
              maxReplicas: {{type: integer}}
              ports:
                type: array
                items:
                  type: object
                  properties:
                    name:
                      type: string
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
        err.contains(r#"spec: Invalid value: "object": replicas must not exceed maxReplicas"#),
        "{err}"
    );
    assert!(
        err.contains(r#"spec: Invalid value: "object": found 1 ports at or below 1024"#),
        "{err}"
    );
    assert!(
        err.contains(
            r#"spec.ports[1].name: Invalid value: "string": failed rule: self.matches('^[a-z]+$')"#
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
        err.contains(r#"spec.id: Invalid value: "string": id is immutable"#),
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
