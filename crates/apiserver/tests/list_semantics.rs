//! List semantics from the API definitions: strategic merge patch (patch strategies and
//! merge keys) and server-side apply (list types and map keys, for built-ins and for a CRD's
//! schema), through kubectl against the embedded server or a real cluster
//! (KUBEWRIGHT_TEST_KUBECONFIG). Skips with a message when kubectl is absent.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use serde_json::{Value, json};

mod support;

use support::{Kubectl, have_kubectl, rand_u64, retry_until_served};

/// kubectl in a namespace of its own, plus the CRDs a test created (deleted at the end).
struct Env {
    kubectl: Kubectl,
    ns: String,
    crds: Vec<String>,
}

impl std::ops::Deref for Env {
    type Target = Kubectl;
    fn deref(&self) -> &Kubectl {
        &self.kubectl
    }
}

fn rand_u32() -> u32 {
    rand_u64() as u32
}

impl Env {
    async fn start() -> Option<Self> {
        if !have_kubectl() {
            return None;
        }
        let ns = format!("kwlist-{:08x}", rand_u32());
        let mut kubectl = Kubectl::start().await;
        kubectl.ok(&["create", "namespace", &ns], None);
        kubectl.namespace = Some(ns.clone());
        Some(Self {
            kubectl,
            ns,
            crds: vec![],
        })
    }

    #[track_caller]
    fn get(&self, what: &str, name: &str) -> Value {
        let out = self.ok(
            &["get", what, name, "-o", "json", "--show-managed-fields"],
            None,
        );
        serde_json::from_str(&out).unwrap()
    }

    #[track_caller]
    fn strategic(&self, what: &str, name: &str, patch: Value) {
        self.ok(
            &[
                "patch",
                what,
                name,
                "--type",
                "strategic",
                "-p",
                &patch.to_string(),
            ],
            None,
        );
    }

    /// Server-side apply as `manager`; returns (success, stderr).
    fn apply(&self, manager: &str, doc: &str) -> (bool, String) {
        let (ok, _, err) = self.run(
            &[
                "apply",
                "--server-side",
                "--field-manager",
                manager,
                "-f",
                "-",
            ],
            Some(doc),
        );
        (ok, err)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = self.run(&["delete", "namespace", &self.ns, "--wait=false"], None);
        for crd in &self.crds {
            let _ = self.run(&["delete", "crd", crd, "--wait=false"], None);
        }
    }
}

/// name -> item of a list of objects keyed by `key`.
fn by(list: &Value, key: &str) -> std::collections::BTreeMap<String, Value> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|i| (i[key].to_string().trim_matches('"').to_string(), i.clone()))
        .collect()
}

/// The fieldsV1 of a manager's entry (operation `op`).
fn managed<'a>(obj: &'a Value, manager: &str, op: &str) -> &'a Value {
    let entries = obj["metadata"]["managedFields"].as_array().unwrap();
    let e = entries
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == op)
        .unwrap_or_else(|| panic!("no {op} entry of {manager}: {entries:#?}"));
    &e["fieldsV1"]
}

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    metadata:
      labels: {app: web}
    spec:
      tolerations:
      - {key: a, operator: Exists}
      containers:
      - name: web
        image: nginx:1.27
        env:
        - {name: A, value: "1"}
        - {name: B, value: "2"}
        ports:
        - {containerPort: 80, name: http}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategic_merge_patch_follows_the_api_definitions() {
    let Some(env) = Env::start().await else {
        return;
    };
    env.ok(&["create", "-f", "-"], Some(DEPLOYMENT));

    // Container env merges by name (Deployment -> PodTemplateSpec -> PodSpec -> Container).
    env.strategic(
        "deployment",
        "web",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web",
            "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]}}}}),
    );
    let d = env.get("deployment", "web");
    let c = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(c.as_array().unwrap().len(), 1, "{c}");
    assert_eq!(c[0]["image"], "nginx:1.27");
    let envs = by(&c[0]["env"], "name");
    assert_eq!(envs.len(), 3, "{}", c[0]["env"]);
    assert_eq!(envs["A"]["value"], "1");
    assert_eq!(envs["B"]["value"], "3");
    assert_eq!(envs["C"]["value"], "4");

    // Container ports merge by containerPort.
    env.strategic(
        "deployment",
        "web",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web",
            "ports": [{"containerPort": 80, "name": "web"}, {"containerPort": 8080, "name": "alt"}]}]}}}}),
    );
    let d = env.get("deployment", "web");
    let ports = by(
        &d["spec"]["template"]["spec"]["containers"][0]["ports"],
        "containerPort",
    );
    assert_eq!(ports.len(), 2, "{ports:?}");
    assert_eq!(ports["80"]["name"], "web");
    assert_eq!(ports["8080"]["name"], "alt");

    // Tolerations have no patch strategy: the list is replaced.
    env.strategic(
        "deployment",
        "web",
        json!({"spec": {"template": {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}}}),
    );
    let d = env.get("deployment", "web");
    assert_eq!(
        d["spec"]["template"]["spec"]["tolerations"],
        json!([{"key": "b", "operator": "Exists"}])
    );

    // DeploymentSpec.strategy has the retainKeys strategy: `$retainKeys` clears
    // rollingUpdate (which a Recreate deployment may not have).
    env.strategic(
        "deployment",
        "web",
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
    );
    let d = env.get("deployment", "web");
    assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));

    // Service ports merge by port.
    env.ok(
        &["create", "-f", "-"],
        Some(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n  - {name: http, port: 80, targetPort: 8080}\n",
        ),
    );
    env.strategic(
        "service",
        "web",
        json!({"spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}),
    );
    let svc = env.get("service", "web");
    let ports = by(&svc["spec"]["ports"], "port");
    assert_eq!(ports.len(), 2, "{}", svc["spec"]["ports"]);
    assert_eq!(ports["80"]["targetPort"], 8080);
    assert_eq!(ports["443"]["targetPort"], 8443);

    // Finalizers merge as a set of primitives; `$deleteFromPrimitiveList` removes values.
    env.ok(
        &["create", "-f", "-"],
        Some(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fin\n  finalizers: [example.com/a]\n",
        ),
    );
    env.strategic(
        "configmap",
        "fin",
        json!({"metadata": {"finalizers": ["example.com/b", "example.com/a"]}}),
    );
    let mut fins: Vec<String> =
        serde_json::from_value(env.get("configmap", "fin")["metadata"]["finalizers"].clone())
            .unwrap();
    fins.sort();
    assert_eq!(fins, ["example.com/a", "example.com/b"]);
    env.strategic(
        "configmap",
        "fin",
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a"]}}),
    );
    assert_eq!(
        env.get("configmap", "fin")["metadata"]["finalizers"],
        json!(["example.com/b"])
    );
    env.ok(
        &[
            "patch",
            "configmap",
            "fin",
            "--type",
            "merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
        None,
    );
}

const APPLY_A: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shared
spec:
  selector:
    matchLabels: {app: shared}
  template:
    metadata:
      labels: {app: shared}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        env:
        - {name: A, value: "1"}
        ports:
        - {containerPort: 80, name: http}
"#;

const APPLY_B: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shared
spec:
  template:
    spec:
      containers:
      - name: web
        env:
        - {name: B, value: "2"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_keys_list_items_by_the_schema() {
    let Some(env) = Env::start().await else {
        return;
    };
    let (ok, err) = env.apply("team-a", APPLY_A);
    assert!(ok, "{err}");
    // Another manager owning a different env entry of the same container: no conflict.
    let (ok, err) = env.apply("team-b", APPLY_B);
    assert!(ok, "{err}");
    let (ok, err) = env.apply("team-a", APPLY_A);
    assert!(ok, "re-applying A must not conflict: {err}");
    let d = env.get("deployment", "shared");
    let c = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(c.as_array().unwrap().len(), 1, "{c}");
    let envs = by(&c[0]["env"], "name");
    assert_eq!(envs.len(), 2, "{}", c[0]["env"]);
    assert_eq!(envs["A"]["value"], "1");
    assert_eq!(envs["B"]["value"], "2");

    // managedFields as kube-apiserver shapes them.
    let a = &managed(&d, "team-a", "Apply")["f:spec"]["f:template"]["f:spec"]["f:containers"][r#"k:{"name":"web"}"#];
    assert_eq!(a["."], json!({}), "{a:#}");
    assert_eq!(a["f:name"], json!({}), "{a:#}");
    assert_eq!(a["f:image"], json!({}), "{a:#}");
    assert_eq!(
        a["f:env"][r#"k:{"name":"A"}"#],
        json!({".": {}, "f:name": {}, "f:value": {}}),
        "{a:#}"
    );
    assert!(a["f:env"].get(r#"k:{"name":"B"}"#).is_none(), "{a:#}");
    // Container ports are keyed by [containerPort, protocol]; protocol defaults to TCP.
    assert_eq!(
        a["f:ports"][r#"k:{"containerPort":80,"protocol":"TCP"}"#],
        json!({".": {}, "f:containerPort": {}, "f:name": {}}),
        "{a:#}"
    );
    let b = &managed(&d, "team-b", "Apply")["f:spec"]["f:template"]["f:spec"]["f:containers"][r#"k:{"name":"web"}"#];
    assert_eq!(
        b["f:env"][r#"k:{"name":"B"}"#],
        json!({".": {}, "f:name": {}, "f:value": {}}),
        "{b:#}"
    );
    assert!(b["f:env"].get(r#"k:{"name":"A"}"#).is_none(), "{b:#}");
    assert!(b.get("f:image").is_none(), "{b:#}");

    // The same ports entry (80/TCP, given explicitly) with another name conflicts.
    let conflicting = APPLY_B.replace(
        "        env:\n",
        "        ports:\n        - {containerPort: 80, protocol: TCP, name: other}\n        env:\n",
    );
    let (ok, err) = env.apply("team-b", &conflicting);
    assert!(!ok, "expected a conflict");
    assert!(
        err.contains("conflict") && err.contains(r#"ports[containerPort=80,protocol="TCP"].name"#),
        "{err}"
    );
    // 80/UDP is another entry: no conflict.
    let udp = APPLY_B.replace(
        "        env:\n",
        "        ports:\n        - {containerPort: 80, protocol: UDP, name: dns}\n        env:\n",
    );
    let (ok, err) = env.apply("team-b", &udp);
    assert!(ok, "{err}");
    let d = env.get("deployment", "shared");
    let ports = d["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(ports.len(), 2, "{ports:?}");
    let b = &managed(&d, "team-b", "Apply")["f:spec"]["f:template"]["f:spec"]["f:containers"][r#"k:{"name":"web"}"#];
    assert_eq!(
        b["f:ports"][r#"k:{"containerPort":80,"protocol":"UDP"}"#],
        json!({".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}),
        "{b:#}"
    );
    // Dropping B's env entry from B's configuration removes it (A's stays).
    let without_env = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: shared\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        ports:\n        - {containerPort: 80, protocol: UDP, name: dns}\n";
    let (ok, err) = env.apply("team-b", without_env);
    assert!(ok, "{err}");
    let d = env.get("deployment", "shared");
    let envs = by(
        &d["spec"]["template"]["spec"]["containers"][0]["env"],
        "name",
    );
    assert_eq!(envs.keys().collect::<Vec<_>>(), ["A"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_on_a_custom_resource_uses_its_list_map_keys() {
    let Some(mut env) = Env::start().await else {
        return;
    };
    let group = format!("g{:08x}.kubewright.test", rand_u32());
    let crd_name = format!("routes.{group}");
    let crd = format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {crd_name}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: routes, singular: route, kind: Route}}
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
              backends:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [host, port]
                items:
                  type: object
                  required: [host, port]
                  properties:
                    host: {{type: string}}
                    port: {{type: integer}}
                    weight: {{type: integer}}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {{type: string}}
"#
    );
    env.ok(&["create", "-f", "-"], Some(&crd));
    env.crds.push(crd_name.clone());
    env.ok(
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd_name}"),
            "--timeout=30s",
        ],
        None,
    );
    let doc = |backend: &str, tag: &str| {
        format!(
            "apiVersion: {group}/v1\nkind: Route\nmetadata:\n  name: r1\nspec:\n  backends:\n  - {backend}\n  tags: [{tag}]\n"
        )
    };
    let first = doc("{host: a.example, port: 80, weight: 1}", "blue");
    // The CR endpoint may take a moment to be served after Established on a real cluster.
    let applied = retry_until_served(|| env.apply("team-a", &first));
    assert!(applied, "applying the custom resource never succeeded");
    // Same host, another port: another entry of the map-list; another tag of the set.
    let (ok, err) = env.apply(
        "team-b",
        &doc("{host: a.example, port: 8080, weight: 2}", "green"),
    );
    assert!(ok, "{err}");
    let r = env.get("route", "r1");
    let backends = r["spec"]["backends"].as_array().unwrap();
    assert_eq!(backends.len(), 2, "{backends:?}");
    let mut tags: Vec<String> = serde_json::from_value(r["spec"]["tags"].clone()).unwrap();
    tags.sort();
    assert_eq!(tags, ["blue", "green"]);
    let a = &managed(&r, "team-a", "Apply")["f:spec"];
    assert_eq!(
        a["f:backends"][r#"k:{"host":"a.example","port":80}"#],
        json!({".": {}, "f:host": {}, "f:port": {}, "f:weight": {}}),
        "{a:#}"
    );
    assert_eq!(a["f:tags"][r#"v:"blue""#], json!({}), "{a:#}");
    let b = &managed(&r, "team-b", "Apply")["f:spec"];
    assert!(
        b["f:backends"]
            .get(r#"k:{"host":"a.example","port":8080}"#)
            .is_some(),
        "{b:#}"
    );
    assert!(
        b["f:backends"]
            .get(r#"k:{"host":"a.example","port":80}"#)
            .is_none(),
        "{b:#}"
    );
    // Changing A's entry conflicts, on the keyed path.
    let (ok, err) = env.apply(
        "team-b",
        &doc("{host: a.example, port: 80, weight: 5}", "green"),
    );
    assert!(!ok, "expected a conflict");
    assert!(
        err.contains("conflict") && err.contains(r#"backends[host="a.example",port=80].weight"#),
        "{err}"
    );
    env.ok(&["delete", "route", "r1", "--timeout=20s"], None);
}
