//! kubectl 1.32 as a real client of the embedded server (or of a real cluster when
//! KUBEWRIGHT_TEST_KUBECONFIG is set). Skips with a message when kubectl is absent.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use kubewright_apiserver::TestServer;
use serde_json::Value;

mod support;

use support::{Kubectl, have_kubectl, rand_u64, retry_until_served};

/// kubectl plus the namespaces and cluster-scoped RBAC objects a test created (deleted
/// when it ends).
struct Env {
    kubectl: Kubectl,
    namespaces: Vec<String>,
    /// Label values (`kwctl-test=<value>`) of the ClusterRoles, ClusterRoleBindings and
    /// Nodes made.
    cluster_labels: Vec<String>,
}

impl std::ops::Deref for Env {
    type Target = Kubectl;
    fn deref(&self) -> &Kubectl {
        &self.kubectl
    }
}

impl Env {
    async fn start() -> Self {
        Self {
            kubectl: Kubectl::start().await,
            namespaces: vec![],
            cluster_labels: vec![],
        }
    }

    /// A label value for cluster-scoped objects (RBAC, nodes), which are deleted at the end.
    fn cluster_label(&mut self, value: &str) -> String {
        self.cluster_labels.push(value.to_string());
        value.to_string()
    }

    fn namespace(&mut self) -> String {
        let ns = format!("kwctl-{:08x}", rand_u64() as u32);
        self.ok(&["create", "namespace", &ns], None);
        self.namespaces.push(ns.clone());
        ns
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for l in &self.cluster_labels {
            let sel = format!("kwctl-test={l}");
            let _ = self.run(
                &[
                    "delete",
                    "clusterroles,clusterrolebindings,nodes",
                    "-l",
                    &sel,
                    "--wait=false",
                ],
                None,
            );
        }
        for ns in &self.namespaces {
            let _ = self.run(&["delete", "namespace", ns, "--wait=false"], None);
        }
    }
}

const APP: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports:
        - containerPort: 80
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 80
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  mode: production
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_get_patch_delete() {
    if !have_kubectl() {
        return;
    }
    let mut env = Env::start().await;
    let ns = env.namespace();
    let out = env.ok(&["apply", "-n", &ns, "-f", "-"], Some(APP));
    assert!(out.contains("deployment.apps/web created"), "{out}");
    assert!(out.contains("service/web created"), "{out}");
    assert!(out.contains("configmap/web-config created"), "{out}");
    // Re-applying unchanged objects is a no-op.
    let out = env.ok(&["apply", "-n", &ns, "-f", "-"], Some(APP));
    assert!(out.contains("deployment.apps/web unchanged"), "{out}");

    let d = env.json(&["get", "-n", &ns, "deployment", "web"]);
    assert_eq!(d["spec"]["replicas"], 2);
    assert!(
        d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    let yaml = env.ok(&["get", "-n", &ns, "cm", "web-config", "-o", "yaml"], None);
    assert!(yaml.contains("mode: production"), "{yaml}");
    let wide = env.ok(&["get", "-n", &ns, "deploy", "-o", "wide"], None);
    assert!(
        wide.contains("CONTAINERS") && wide.contains("nginx:1.27"),
        "{wide}"
    );
    let svc = env.ok(&["get", "-n", &ns, "svc", "web"], None);
    assert!(svc.contains("ClusterIP"), "{svc}");

    // Client-side apply of a change: a strategic merge patch computed by kubectl.
    let changed = APP.replace("nginx:1.27", "nginx:1.28");
    let out = env.ok(&["apply", "-n", &ns, "-f", "-"], Some(&changed));
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    let d = env.json(&["get", "-n", &ns, "deployment", "web"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.28"
    );
    assert_eq!(d["metadata"]["generation"], 2);

    // The three patch kinds.
    env.ok(&["patch", "-n", &ns, "deployment", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}"#], None);
    let d = env.json(&["get", "-n", &ns, "deployment", "web"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "strategic merge keeps both containers"
    );
    env.ok(
        &[
            "patch",
            "-n",
            &ns,
            "cm",
            "web-config",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"mode":null,"extra":"1"}}"#,
        ],
        None,
    );
    let cm = env.json(&["get", "-n", &ns, "cm", "web-config"]);
    assert!(
        cm["data"].get("mode").is_none() && cm["data"]["extra"] == "1",
        "{cm}"
    );
    env.ok(
        &[
            "patch",
            "-n",
            &ns,
            "deployment",
            "web",
            "--type",
            "json",
            "-p",
            r#"[{"op":"replace","path":"/spec/replicas","value":4}]"#,
        ],
        None,
    );
    assert_eq!(
        env.json(&["get", "-n", &ns, "deployment", "web"])["spec"]["replicas"],
        4
    );

    // Scale through the scale subresource.
    env.ok(
        &["scale", "-n", &ns, "deployment", "web", "--replicas=1"],
        None,
    );
    assert_eq!(
        env.json(&["get", "-n", &ns, "deployment", "web"])["spec"]["replicas"],
        1
    );

    // Delete (kubectl waits for the object to go away through a watch).
    let out = env.ok(
        &["delete", "-n", &ns, "deployment", "web", "--timeout=20s"],
        None,
    );
    assert!(out.contains("deleted"), "{out}");
    let (ok, _, err) = env.run(&["get", "-n", &ns, "deployment", "web"], None);
    assert!(!ok && err.contains("NotFound"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_and_conflicts() {
    if !have_kubectl() {
        return;
    }
    let mut env = Env::start().await;
    let ns = env.namespace();
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n";
    let out = env.ok(&["apply", "--server-side", "-n", &ns, "-f", "-"], Some(cm));
    assert!(out.contains("serverside-applied"), "{out}");
    let got = env.json(&["get", "-n", &ns, "cm", "ssa", "--show-managed-fields"]);
    let mf = got["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        mf.iter()
            .any(|m| m["manager"] == "kubectl" && m["operation"] == "Apply"),
        "{mf:?}"
    );
    // Another manager changing the same field conflicts...
    let other = cm.replace("\"1\"", "\"2\"");
    let (ok, _, err) = env.run(
        &[
            "apply",
            "--server-side",
            "--field-manager",
            "other",
            "-n",
            &ns,
            "-f",
            "-",
        ],
        Some(&other),
    );
    assert!(!ok && err.contains("conflict"), "{err}");
    // ...unless forced.
    env.ok(
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager",
            "other",
            "-n",
            &ns,
            "-f",
            "-",
        ],
        Some(&other),
    );
    assert_eq!(env.json(&["get", "-n", &ns, "cm", "ssa"])["data"]["a"], "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_with_timeout_and_discovery() {
    if !have_kubectl() {
        return;
    }
    let mut env = Env::start().await;
    let ns = env.namespace();
    env.ok(&["apply", "-n", &ns, "-f", "-"], Some(APP));
    // `get -w` streams Table rows until the request timeout ends it.
    let (_, out, err) = env.run(
        &[
            "get",
            "-n",
            &ns,
            "cm",
            "-w",
            "--request-timeout=2s",
            "-l",
            "app!=none",
        ],
        None,
    );
    assert!(out.contains("web-config"), "stdout: {out}\nstderr: {err}");
    let res = env.ok(&["api-resources"], None);
    for needle in [
        "deployments",
        "deploy",
        "apps/v1",
        "configmaps",
        "customresourcedefinitions",
        "leases",
    ] {
        assert!(res.contains(needle), "api-resources lacks {needle}:\n{res}");
    }
    // A second run uses kubectl's discovery cache (HTTP cache revalidation).
    let again = env.ok(&["api-resources"], None);
    assert_eq!(res.lines().count(), again.lines().count());
    // Typed kubectl commands send protobuf bodies.
    env.ok(
        &[
            "create",
            "configmap",
            "from-literal",
            "-n",
            &ns,
            "--from-literal=a=b",
            "--from-literal=n=1",
        ],
        None,
    );
    assert_eq!(
        env.json(&["get", "-n", &ns, "cm", "from-literal"])["data"]["n"],
        "1"
    );
    env.ok(
        &[
            "create",
            "secret",
            "generic",
            "s",
            "-n",
            &ns,
            "--from-literal=password=hunter2",
        ],
        None,
    );
    assert_eq!(
        env.json(&["get", "-n", &ns, "secret", "s"])["data"]["password"],
        "aHVudGVyMg=="
    );
    let can = env.ok(&["auth", "can-i", "get", "pods", "-n", &ns], None);
    assert_eq!(can.trim(), "yes");
    let explain = env.ok(&["explain", "deployment.spec.replicas"], None);
    assert!(
        explain.contains("replicas") && explain.contains("integer"),
        "{explain}"
    );
    let versions = env.ok(&["api-versions"], None);
    assert!(
        versions.lines().any(|l| l == "apps/v1") && versions.lines().any(|l| l == "v1"),
        "{versions}"
    );
    let raw = env.ok(&["get", "--raw", "/version"], None);
    let v: Value = serde_json::from_str(&raw).unwrap();
    assert!(v["gitVersion"].as_str().unwrap().starts_with('v'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_through_a_crd() {
    if !have_kubectl() {
        return;
    }
    let mut env = Env::start().await;
    let ns = env.namespace();
    let group = format!("g{:08x}.kubewright.test", rand_u64() as u32);
    let crd = format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: monitors.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: monitors, singular: monitor, kind: Monitor, shortNames: [mon]}}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    additionalPrinterColumns:
    - {{name: Target, type: string, jsonPath: .spec.target}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [target]
            properties:
              target: {{type: string}}
              interval: {{type: integer, minimum: 1, default: 30}}
          status:
            type: object
            properties:
              healthy: {{type: boolean}}
"#
    );
    env.ok(&["create", "-f", "-"], Some(&crd));
    env.ok(
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/monitors.{group}"),
            "--timeout=30s",
        ],
        None,
    );
    let cr = format!(
        "apiVersion: {group}/v1\nkind: Monitor\nmetadata:\n  name: m1\nspec:\n  target: example.com\n"
    );
    // The CR endpoint may take a moment to be served after Established on a real cluster.
    let created = retry_until_served(|| {
        let (ok, _, err) = env.run(&["create", "-n", &ns, "-f", "-"], Some(&cr));
        (ok, err)
    });
    assert!(created, "custom resource creation never succeeded");
    // Resource names are qualified with the group: other tests (and the demo) install
    // other `monitors` CRDs into a shared cluster, and a bare `monitors` is ambiguous.
    let plural = format!("monitors.{group}");
    let singular = format!("monitor.{group}");
    let got = env.json(&["get", "-n", &ns, &plural, "m1"]);
    assert_eq!(got["spec"]["interval"], 30, "schema default applied");
    let table = env.ok(&["get", "-n", &ns, &plural], None);
    assert!(
        table.contains("TARGET") && table.contains("example.com"),
        "{table}"
    );
    env.ok(
        &[
            "patch",
            "-n",
            &ns,
            &singular,
            "m1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"target":"other.com"}}"#,
        ],
        None,
    );
    assert_eq!(
        env.json(&["get", "-n", &ns, &singular, "m1"])["spec"]["target"],
        "other.com"
    );
    // Strategic merge patch is not allowed on custom resources.
    let (ok, _, err) = env.run(
        &[
            "patch",
            "-n",
            &ns,
            &singular,
            "m1",
            "--type",
            "strategic",
            "-p",
            r#"{"spec":{"target":"x"}}"#,
        ],
        None,
    );
    assert!(
        !ok && err.contains("UnsupportedMediaType")
            || err.contains("415")
            || err.contains("strategic"),
        "{err}"
    );
    let bad = format!(
        "apiVersion: {group}/v1\nkind: Monitor\nmetadata:\n  name: bad\nspec:\n  interval: 0\n"
    );
    let (ok, _, err) = env.run(&["create", "-n", &ns, "-f", "-"], Some(&bad));
    assert!(
        !ok && err.contains("spec.target") && err.contains("spec.interval"),
        "{err}"
    );
    env.ok(
        &["delete", "-n", &ns, &singular, "m1", "--timeout=20s"],
        None,
    );
    env.ok(
        &[
            "delete",
            "crd",
            &format!("monitors.{group}"),
            "--timeout=30s",
        ],
        None,
    );
}

/// The embedded server's `--data-dir`: objects (custom resources included) survive a
/// restart. Embedded-only: a real cluster has its own storage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_dir_survives_restart_embedded_only() {
    if kubewright_testing::embedded_only("data directories are a feature of the embedded server") {
        return;
    }
    if !have_kubectl() {
        return;
    }
    // The servers come and go; one Env (kubeconfig path and kubectl cache) serves both.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let kc = dir.path().join("kubeconfig");
    let env = Env {
        kubectl: Kubectl {
            kubeconfig: kc.clone(),
            dir,
            server: None,
            namespace: None,
        },
        namespaces: vec![],
        cluster_labels: vec![],
    };
    let run = |args: &[&str], stdin: Option<&str>| env.ok(args, stdin);
    let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: notes.persist.kubewright.test}
spec:
  group: persist.kubewright.test
  scope: Namespaced
  names: {plural: notes, singular: note, kind: Note}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"#;
    let first_rv;
    {
        let server = TestServer::builder().data_dir(&data).start().await.unwrap();
        server.write_kubeconfig(&kc).unwrap();
        run(&["create", "-f", "-"], Some(crd));
        run(
            &[
                "wait",
                "--for=condition=Established",
                "crd/notes.persist.kubewright.test",
                "--timeout=20s",
            ],
            None,
        );
        run(
            &["create", "-n", "default", "-f", "-"],
            Some(
                "apiVersion: persist.kubewright.test/v1\nkind: Note\nmetadata: {name: n1}\ntext: hello\n",
            ),
        );
        run(
            &[
                "create",
                "configmap",
                "-n",
                "default",
                "kept",
                "--from-literal=k=v",
            ],
            None,
        );
        first_rv = run(
            &[
                "get",
                "cm",
                "-n",
                "default",
                "kept",
                "-o",
                "jsonpath={.metadata.resourceVersion}",
            ],
            None,
        );
        server.stop();
    }
    let server = TestServer::builder().data_dir(&data).start().await.unwrap();
    server.write_kubeconfig(&kc).unwrap();
    assert_eq!(
        run(
            &[
                "get",
                "cm",
                "-n",
                "default",
                "kept",
                "-o",
                "jsonpath={.data.k}"
            ],
            None
        ),
        "v"
    );
    assert_eq!(
        run(
            &[
                "get",
                "cm",
                "-n",
                "default",
                "kept",
                "-o",
                "jsonpath={.metadata.resourceVersion}"
            ],
            None
        ),
        first_rv
    );
    assert_eq!(
        run(
            &[
                "get",
                "notes",
                "-n",
                "default",
                "n1",
                "-o",
                "jsonpath={.text}"
            ],
            None
        ),
        "hello"
    );
    // Writes continue with newer revisions.
    run(
        &[
            "create",
            "configmap",
            "-n",
            "default",
            "later",
            "--from-literal=k=v",
        ],
        None,
    );
    let later: u64 = run(
        &[
            "get",
            "cm",
            "-n",
            "default",
            "later",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ],
        None,
    )
    .parse()
    .unwrap();
    assert!(later > first_rv.parse::<u64>().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_for_a_service_account() {
    if !have_kubectl() {
        return;
    }
    let mut env = Env::start().await;
    let ns = env.namespace();
    let rbac = format!(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {{name: reader, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: cm-reader, namespace: {ns}}}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: reader-binding, namespace: {ns}}}
subjects:
- kind: ServiceAccount
  name: reader
  namespace: {ns}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-reader}}
"#
    );
    env.ok(&["apply", "-f", "-"], Some(&rbac));
    let token = env
        .ok(&["create", "token", "reader", "-n", &ns], None)
        .trim()
        .to_string();
    assert!(!token.is_empty());
    let as_sa = |args: &[&str]| {
        let mut a = vec!["--token", token.as_str()];
        a.extend_from_slice(args);
        env.run(&a, None)
    };
    let (ok, out, err) = as_sa(&["get", "configmaps", "-n", &ns]);
    assert!(ok, "reader may list configmaps: {out}{err}");
    let (ok, _, err) = as_sa(&["get", "secrets", "-n", &ns]);
    assert!(
        !ok && err.contains("Forbidden")
            && err.contains(&format!("system:serviceaccount:{ns}:reader")),
        "{err}"
    );
    let (ok, _, err) = as_sa(&[
        "create",
        "configmap",
        "nope",
        "-n",
        &ns,
        "--from-literal=a=b",
    ]);
    assert!(
        !ok && err.contains("cannot create resource \"configmaps\""),
        "{err}"
    );
    let (_, out, _) = as_sa(&["auth", "can-i", "list", "configmaps", "-n", &ns]);
    assert_eq!(out.trim(), "yes");
    let (_, out, _) = as_sa(&["auth", "can-i", "delete", "configmaps", "-n", &ns]);
    assert_eq!(out.trim(), "no");
    let (ok, out, err) = as_sa(&["auth", "whoami", "-o", "json"]);
    assert!(ok, "{err}");
    let who: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        who["status"]["userInfo"]["username"],
        format!("system:serviceaccount:{ns}:reader")
    );
    // An unknown token is a 401.
    let (ok, _, err) = env.run(
        &[
            "--token",
            "not-a-real-token",
            "get",
            "configmaps",
            "-n",
            &ns,
        ],
        None,
    );
    assert!(!ok && err.contains("Unauthorized"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_cluster_roles_and_aggregation() {
    if !have_kubectl() {
        return;
    }
    let mut env = Env::start().await;
    let ns = env.namespace();
    // The bootstrap roles exist and the aggregated ones carry their parts' rules.
    let view = env.json(&["get", "clusterrole", "view"]);
    assert!(view["aggregationRule"]["clusterRoleSelectors"].is_array());
    let grants = |role: &Value, group: &str, resource: &str, verb: &str| {
        role["rules"].as_array().into_iter().flatten().any(|r| {
            let has = |k: &str, v: &str| {
                r[k].as_array()
                    .is_some_and(|a| a.iter().any(|x| x == v || x == "*"))
            };
            has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
        })
    };
    assert!(grants(&view, "", "pods", "list"), "{view}");
    assert!(!grants(&view, "", "secrets", "get"), "{view}");
    let edit = env.json(&["get", "clusterrole", "edit"]);
    assert!(grants(&edit, "apps", "deployments", "update"));
    assert!(grants(&edit, "", "pods", "list"), "edit includes view");
    let admin = env.json(&["get", "clusterrole", "admin"]);
    assert!(grants(
        &admin,
        "rbac.authorization.k8s.io",
        "rolebindings",
        "create"
    ));
    assert!(grants(
        &env.json(&["get", "clusterrole", "cluster-admin"]),
        "anything",
        "anything",
        "delete"
    ));
    let binding = env.json(&["get", "clusterrolebinding", "cluster-admin"]);
    assert_eq!(binding["subjects"][0]["name"], "system:masters");

    // A ServiceAccount bound to `view` in one namespace.
    let manifest = format!(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {{name: viewer, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: viewer-view, namespace: {ns}}}
subjects: [{{kind: ServiceAccount, name: viewer, namespace: {ns}}}]
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}
"#
    );
    env.ok(&["apply", "-f", "-"], Some(&manifest));
    let token = env
        .ok(&["create", "token", "viewer", "-n", &ns], None)
        .trim()
        .to_string();
    let as_sa = |args: &[&str]| {
        let mut a = vec!["--token", token.as_str()];
        a.extend_from_slice(args);
        env.run(&a, None)
    };
    let (ok, out, err) = as_sa(&["get", "pods", "-n", &ns]);
    assert!(ok, "view may list pods: {out}{err}");
    let (ok, _, err) = as_sa(&["get", "secrets", "-n", &ns]);
    assert!(!ok && err.contains("Forbidden"), "{err}");
    let (ok, _, err) = as_sa(&["create", "configmap", "c", "-n", &ns, "--from-literal=a=b"]);
    assert!(!ok && err.contains("forbidden"), "{err}");
    let (_, out, _) = as_sa(&["auth", "can-i", "list", "deployments.apps", "-n", &ns]);
    assert_eq!(out.trim(), "yes");

    // A ClusterRole labelled aggregate-to-view extends `view` (and so this binding):
    // podtemplates, which `view` does not grant.
    let part = format!("kw-view-podtemplates-{:08x}", rand_u64() as u32);
    let role = format!(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {part}
  labels: {{rbac.authorization.k8s.io/aggregate-to-view: "true"}}
rules:
- apiGroups: [""]
  resources: [podtemplates]
  verbs: [get, list, watch]
"#
    );
    let allowed = || {
        let (_, out, _) = as_sa(&["auth", "can-i", "list", "podtemplates", "-n", &ns]);
        out.trim() == "yes"
    };
    let wait_for = |want: bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while allowed() != want {
            assert!(
                std::time::Instant::now() < deadline,
                "aggregation did not converge to allowed={want}: view has {}",
                env.json(&["get", "clusterrole", "view"])["rules"]
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    assert!(!allowed());
    env.ok(&["apply", "-f", "-"], Some(&role));
    wait_for(true);
    assert!(grants(
        &env.json(&["get", "clusterrole", "admin"]),
        "",
        "podtemplates",
        "list"
    ));
    env.ok(&["delete", "clusterrole", &part], None);
    wait_for(false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_and_rbac_escalation_prevention() {
    if !have_kubectl() {
        return;
    }
    let mut env = Env::start().await;
    let ns = env.namespace();
    let setup = format!(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {{name: lead, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: lead-admin, namespace: {ns}}}
subjects: [{{kind: ServiceAccount, name: lead, namespace: {ns}}}]
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}}
"#
    );
    env.ok(&["apply", "-f", "-"], Some(&setup));
    let lead = format!("system:serviceaccount:{ns}:lead");

    // Impersonation by an administrator: requests run as the impersonated identity.
    let (ok, out, err) = env.run(&["--as", &lead, "get", "secrets", "-n", &ns], None);
    assert!(ok, "lead may read secrets in its namespace: {out}{err}");
    let (ok, _, err) = env.run(&["--as", &lead, "get", "secrets", "-n", "default"], None);
    assert!(
        !ok && err.contains(&format!("User \"{lead}\" cannot list resource \"secrets\"")),
        "{err}"
    );
    let (ok, _, err) = env.run(&["--as", "nobody-at-all", "get", "pods", "-n", &ns], None);
    assert!(
        !ok && err.contains("User \"nobody-at-all\" cannot list"),
        "{err}"
    );
    let (_, out, _) = env.run(
        &["auth", "can-i", "create", "roles", "-n", &ns, "--as", &lead],
        None,
    );
    assert_eq!(out.trim(), "yes");
    let who = env.json(&["auth", "whoami", "--as", "alice", "--as-group", "devs"]);
    assert_eq!(who["status"]["userInfo"]["username"], "alice");
    let groups = who["status"]["userInfo"]["groups"].to_string();
    assert!(
        groups.contains("devs") && groups.contains("system:authenticated"),
        "{groups}"
    );

    // Impersonation needs the `impersonate` verb.
    let token = env
        .ok(&["create", "token", "lead", "-n", &ns], None)
        .trim()
        .to_string();
    let as_lead = |args: &[&str]| {
        let mut a = vec!["--token", token.as_str()];
        a.extend_from_slice(args);
        env.run(&a, None)
    };
    // kube-apiserver v1.35+ (constrained impersonation) first tries the mode for plain
    // users, whose error names the request: `impersonate-on:user-info:<verb>`.
    let (ok, _, err) = as_lead(&["--as", "someone-else", "get", "pods", "-n", &ns]);
    assert!(
        !ok && err.contains(&format!(
            "pods is forbidden: User \"{lead}\" cannot impersonate-on:user-info:list resource \"pods\" in API group \"\" in the namespace \"{ns}\""
        )),
        "{err}"
    );
    // `admin` holds the legacy `impersonate` verb on serviceaccounts in its namespace.
    let (ok, out, err) = as_lead(&["--as", &lead, "get", "secrets", "-n", &ns]);
    assert!(ok, "legacy impersonation of a ServiceAccount: {out}{err}");
    // The mode that last succeeded for a requester is tried first next time, so now the
    // legacy error comes first.
    let (ok, _, err) = as_lead(&["--as", "someone-else", "get", "pods", "-n", &ns]);
    assert!(
        !ok && err.contains(&format!(
            "users \"someone-else\" is forbidden: User \"{lead}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        )),
        "{err}"
    );

    // Escalation prevention: lead may grant what it holds, nothing more.
    let role = |name: &str, resource: &str| {
        format!(
            r#"{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role",
                "metadata":{{"name":"{name}","namespace":"{ns}"}},
                "rules":[{{"apiGroups":[""],"resources":["{resource}"],"verbs":["get"]}}]}}"#
        )
    };
    let create = |body: &str| {
        let mut a = vec!["--token", token.as_str()];
        a.extend(["create", "-f", "-"]);
        env.run(&a, Some(body))
    };
    let (ok, out, err) = create(&role("cm-get", "configmaps"));
    assert!(ok, "{out}{err}");
    let (ok, _, err) = create(&role("nodes-get", "nodes"));
    assert!(
        !ok && err.contains("attempting to grant RBAC permissions not currently held"),
        "{err}"
    );
    let binding = |name: &str, role: &str| {
        format!(
            r#"{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",
                "metadata":{{"name":"{name}","namespace":"{ns}"}},
                "subjects":[{{"kind":"User","name":"bob","apiGroup":"rbac.authorization.k8s.io"}}],
                "roleRef":{{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"{role}"}}}}"#
        )
    };
    let (ok, out, err) = create(&binding("bob-view", "view"));
    assert!(ok, "view is within admin: {out}{err}");
    let (ok, _, err) = create(&binding("bob-root", "cluster-admin"));
    assert!(
        !ok && err.contains("attempting to grant RBAC permissions not currently held"),
        "{err}"
    );
}

/// Runs `attempt` until it succeeds (a real cluster's RBAC sees new bindings a moment
/// after they are written); returns its last output.
fn eventually(mut attempt: impl FnMut() -> (bool, String, String)) -> (bool, String, String) {
    let mut last = attempt();
    for _ in 0..50 {
        if last.0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        last = attempt();
    }
    last
}

/// Legacy (`impersonate` on users) and constrained (`impersonate:<mode>` on the identity
/// plus `impersonate-on:<mode>:<verb>` on the request) impersonation grants, with
/// kube-apiserver v1.36's texts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_legacy_and_constrained_grants() {
    if !have_kubectl() {
        return;
    }
    let mut env = Env::start().await;
    let ns = env.namespace();
    let label = env.cluster_label(&ns);
    let setup = format!(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {{name: deputy, namespace: {ns}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: scoped, namespace: {ns}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: nodeagent, namespace: {ns}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: other, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: pat-view, namespace: {ns}}}
subjects: [{{kind: User, name: pat, apiGroup: rbac.authorization.k8s.io}}]
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ns}-legacy-users, labels: {{kwctl-test: {label}}}}}
rules: [{{apiGroups: [""], resources: [users], verbs: [impersonate]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ns}-deputy, labels: {{kwctl-test: {label}}}}}
subjects: [{{kind: ServiceAccount, name: deputy, namespace: {ns}}}]
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ns}-legacy-users}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ns}-user-info, labels: {{kwctl-test: {label}}}}}
rules: [{{apiGroups: [authentication.k8s.io], resources: [users], verbs: ["impersonate:user-info"]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ns}-scoped, labels: {{kwctl-test: {label}}}}}
subjects: [{{kind: ServiceAccount, name: scoped, namespace: {ns}}}]
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ns}-user-info}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: list-pods-as-user, namespace: {ns}}}
rules: [{{apiGroups: [""], resources: [pods], verbs: ["impersonate-on:user-info:list"]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: scoped-list-pods, namespace: {ns}}}
subjects: [{{kind: ServiceAccount, name: scoped, namespace: {ns}}}]
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: list-pods-as-user}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ns}-node, labels: {{kwctl-test: {label}}}}}
rules:
- {{apiGroups: [authentication.k8s.io], resources: [nodes], verbs: ["impersonate:arbitrary-node"]}}
- {{apiGroups: [authentication.k8s.io], resources: [selfsubjectreviews], verbs: ["impersonate-on:arbitrary-node:create"]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ns}-nodeagent, labels: {{kwctl-test: {label}}}}}
subjects: [{{kind: ServiceAccount, name: nodeagent, namespace: {ns}}}]
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ns}-node}}
"#
    );
    env.ok(&["apply", "-f", "-"], Some(&setup));
    let sa = |name: &str| format!("system:serviceaccount:{ns}:{name}");
    let token = |name: &str| {
        env.ok(&["create", "token", name, "-n", &ns], None)
            .trim()
            .to_string()
    };
    let (deputy, scoped, nodeagent) = (token("deputy"), token("scoped"), token("nodeagent"));
    let with = |tok: &str, args: &[&str]| {
        let mut a = vec!["--token", tok];
        a.extend_from_slice(args);
        env.run(&a, None)
    };

    // Legacy: `impersonate` on users lets deputy act as any user, for any request.
    let (ok, out, err) = eventually(|| with(&deputy, &["--as", "pat", "get", "pods", "-n", &ns]));
    assert!(ok, "{out}{err}");
    let (ok, out, err) = with(&deputy, &["--as", "pat", "auth", "whoami", "-o", "json"]);
    assert!(ok, "{out}{err}");
    let who: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], "pat");
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        serde_json::json!(["system:authenticated"])
    );
    // The impersonated user's own rights apply.
    let (ok, _, err) = with(&deputy, &["--as", "pat", "get", "secrets", "-n", &ns]);
    assert!(
        !ok && err.contains(&format!(
            "User \"pat\" cannot list resource \"secrets\" in API group \"\" in the namespace \"{ns}\""
        )),
        "{err}"
    );
    // Groups and ServiceAccounts need their own grants (legacy errors: legacy succeeded last).
    let (ok, _, err) = with(
        &deputy,
        &[
            "--as",
            "pat",
            "--as-group",
            "devs",
            "get",
            "pods",
            "-n",
            &ns,
        ],
    );
    assert!(
        !ok && err.contains(&format!(
            "groups \"devs\" is forbidden: User \"{}\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope",
            sa("deputy")
        )),
        "{err}"
    );
    let (ok, _, err) = with(&deputy, &["--as", &sa("other"), "get", "pods", "-n", &ns]);
    assert!(
        !ok && err.contains(&format!(
            "serviceaccounts \"other\" is forbidden: User \"{}\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"{ns}\"",
            sa("deputy")
        )),
        "{err}"
    );

    // Constrained: `impersonate:user-info` on users plus `impersonate-on:user-info:list` on
    // pods lets scoped list pods as pat, and nothing else.
    let (ok, out, err) = eventually(|| with(&scoped, &["--as", "pat", "get", "pods", "-n", &ns]));
    assert!(ok, "{out}{err}");
    let denied = |args: &[&str], want: String| {
        let mut a = vec!["--as", "pat"];
        a.extend_from_slice(args);
        let (ok, _, err) = with(&scoped, &a);
        assert!(
            !ok && err.contains(&want),
            "{args:?}: want {want}\ngot {err}"
        );
    };
    let on = |verb: &str, what: &str, n: &str| {
        format!(
            "{what} is forbidden: User \"{}\" cannot impersonate-on:user-info:{verb} resource \"{}\" in API group \"\" in the namespace \"{n}\"",
            sa("scoped"),
            what.split(' ').next().unwrap_or_default()
        )
    };
    denied(
        &["get", "configmaps", "-n", &ns],
        on("list", "configmaps", &ns),
    );
    denied(
        &["get", "pod", "x", "-n", &ns],
        on("get", "pods \"x\"", &ns),
    );
    denied(
        &["create", "configmap", "c", "--from-literal=a=b", "-n", &ns],
        on("create", "configmaps", &ns),
    );
    denied(
        &["get", "pods", "-n", "default"],
        on("list", "pods", "default"),
    );
    denied(
        &["--as-group", "devs", "get", "pods", "-n", &ns],
        format!(
            "groups.authentication.k8s.io \"devs\" is forbidden: User \"{}\" cannot impersonate:user-info resource \"groups\" in API group \"authentication.k8s.io\" at the cluster scope",
            sa("scoped")
        ),
    );
    denied(
        &["--as-group", "system:masters", "get", "pods", "-n", &ns],
        "at the cluster scope: impersonating the system:masters group is not allowed".into(),
    );
    let (ok, _, err) = with(&scoped, &["--as", &sa("other"), "get", "pods", "-n", &ns]);
    assert!(
        !ok && err.contains(&format!(
            "pods is forbidden: User \"{}\" cannot impersonate-on:serviceaccount:list resource \"pods\"",
            sa("scoped")
        )),
        "{err}"
    );
    let ssr = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
    let (ok, _, err) = env.run(
        &[
            "--token",
            &scoped,
            "--as",
            "pat",
            "create",
            "--raw",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            "-f",
            "-",
        ],
        Some(ssr),
    );
    assert!(
        !ok && err.contains(&format!(
            "selfsubjectreviews.authentication.k8s.io is forbidden: User \"{}\" cannot impersonate-on:user-info:create resource \"selfsubjectreviews\" in API group \"authentication.k8s.io\" at the cluster scope",
            sa("scoped")
        )),
        "{err}"
    );

    // A node impersonated through `impersonate:arbitrary-node` is in `system:nodes`.
    let (ok, out, err) = eventually(|| {
        with(
            &nodeagent,
            &["--as", "system:node:n1", "auth", "whoami", "-o", "json"],
        )
    });
    assert!(ok, "{out}{err}");
    let who: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], "system:node:n1");
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        serde_json::json!(["system:nodes", "system:authenticated"])
    );
    let (ok, _, err) = with(
        &nodeagent,
        &["--as", "system:node:n1", "get", "pods", "-n", &ns],
    );
    assert!(
        !ok && err.contains(&format!(
            "pods is forbidden: User \"{}\" cannot impersonate-on:arbitrary-node:list resource \"pods\" in API group \"\" in the namespace \"{ns}\"",
            sa("nodeagent")
        )),
        "{err}"
    );

    // `impersonate:associated-node`: a ServiceAccount may act as the node its pod runs on
    // (known from its pod-bound token), and only that node.
    let node = format!("{ns}-n1");
    let agent_setup = format!(
        r#"
apiVersion: v1
kind: Node
metadata: {{name: {node}, labels: {{kwctl-test: {label}}}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: agent, namespace: {ns}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: agent, namespace: {ns}}}
spec: {{serviceAccountName: agent, nodeName: {node}, containers: [{{name: c, image: busybox}}]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ns}-associated-node, labels: {{kwctl-test: {label}}}}}
rules:
- {{apiGroups: [authentication.k8s.io], resources: [nodes], verbs: ["impersonate:associated-node"]}}
- {{apiGroups: [authentication.k8s.io], resources: [selfsubjectreviews], verbs: ["impersonate-on:associated-node:create"]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ns}-agent, labels: {{kwctl-test: {label}}}}}
subjects: [{{kind: ServiceAccount, name: agent, namespace: {ns}}}]
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ns}-associated-node}}
"#
    );
    env.ok(&["apply", "-f", "-"], Some(&agent_setup));
    let agent = env
        .ok(
            &[
                "create",
                "token",
                "agent",
                "-n",
                &ns,
                "--bound-object-kind",
                "Pod",
                "--bound-object-name",
                "agent",
            ],
            None,
        )
        .trim()
        .to_string();
    let who = env.json(&["--token", &agent, "auth", "whoami"]);
    assert_eq!(
        who["status"]["userInfo"]["extra"]["authentication.kubernetes.io/node-name"],
        serde_json::json!([node])
    );
    let (ok, out, err) = eventually(|| {
        with(
            &agent,
            &[
                "--as",
                &format!("system:node:{node}"),
                "auth",
                "whoami",
                "-o",
                "json",
            ],
        )
    });
    assert!(ok, "{out}{err}");
    let who: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        serde_json::json!(["system:nodes", "system:authenticated"])
    );
    let (ok, _, err) = env.run(
        &[
            "--token",
            &agent,
            "--as",
            "system:node:elsewhere",
            "create",
            "--raw",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            "-f",
            "-",
        ],
        Some(ssr),
    );
    assert!(
        !ok && err.contains(&format!(
            "User \"{}\" cannot impersonate-on:arbitrary-node:create resource \"selfsubjectreviews\"",
            sa("agent")
        )),
        "{err}"
    );
    // A pod bound to a node that no kubelet runs would never finish terminating.
    env.ok(
        &[
            "delete",
            "pod",
            "agent",
            "-n",
            &ns,
            "--grace-period=0",
            "--force",
        ],
        None,
    );

    // An administrator may impersonate anything: uid and groups as asked.
    let who = env.json(&[
        "auth",
        "whoami",
        "--as",
        "pat",
        "--as-uid",
        "u-1",
        "--as-group",
        "devs",
    ]);
    assert_eq!(who["status"]["userInfo"]["username"], "pat");
    assert_eq!(who["status"]["userInfo"]["uid"], "u-1");
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        serde_json::json!(["devs", "system:authenticated"])
    );
}

/// Kinds without a PATCH endpoint (SelfSubjectAccessReview, ...) cannot use server-side
/// field validation, so kubectl validates them itself against `/openapi/v2`, which it
/// downloads only as protobuf.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_kinds_validated_client_side() {
    if !have_kubectl() {
        return;
    }
    let env = Env::start().await;
    let file = env.dir.path().join("ssar.json");
    std::fs::write(
        &file,
        r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"list","resource":"pods","namespace":"default"}}}"#,
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let out = env.json(&["create", "-f", f]);
    assert_eq!(out["kind"], "SelfSubjectAccessReview");
    assert_eq!(out["spec"]["resourceAttributes"]["verb"], "list");
    assert!(out["status"]["allowed"].is_boolean(), "{out}");

    // A field the schema does not have is reported by kubectl's own validation.
    std::fs::write(
        &file,
        r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"bogus":1,"resourceAttributes":{"verb":"list","resource":"pods"}}}"#,
    )
    .unwrap();
    let (ok, _, err) = env.run(&["create", "-f", f, "-o", "json"], None);
    assert!(!ok);
    assert!(
        err.contains(r#"unknown field "bogus""#) && err.contains("--validate=false"),
        "{err}"
    );
    // With validation off the server ignores it, as kube-apiserver does.
    let out = env.ok(&["create", "-f", f, "-o", "json", "--validate=false"], None);
    assert!(out.contains("SelfSubjectAccessReview"));
}
