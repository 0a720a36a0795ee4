//! One entry point for integration tests: the embedded API server by default, or a real
//! cluster when `KUBEWRIGHT_TEST_KUBECONFIG` names a kubeconfig.
//!
//! ```no_run
//! # async fn t() {
//! let env = kubewright_testing::TestEnv::start().await;
//! let client = env.client();
//! let ns = env.namespace().await; // unique, deleted when `env` drops
//! # let _ = (client, ns);
//! # }
//! ```
//!
//! [`TestEnv::start`] also installs a `tracing` subscriber that writes to the test's
//! output (shown when a test fails), at `warn` unless `RUST_LOG` says otherwise: a
//! controller's reconcile errors (logged at `error`) show up beside the failed assertion
//! instead of only as a timeout. A subscriber the test installed first is kept.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubewright_apiserver::{ServerBuilder, TestServer};
use kubewright_client::config::{KubeConfigOptions, Kubeconfig};
use kubewright_client::{Api, Client, Config};
use kubewright_core::{
    ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, PostParams, Scope,
    WatchEvent, WatchParams,
};
use std::sync::Mutex;
use std::time::Duration;

/// A builder for an embedded server that runs, beside itself, the controllers a
/// cluster's kube-controller-manager would run, as far as `kubewright-controllers`
/// has them (see its `CONTROLLERS`): the server [`TestEnv::start`] starts.
/// `kubewright_apiserver::TestServer::builder()` is the bare server.
pub fn embedded_server() -> ServerBuilder {
    let controllers: kubewright_apiserver::ServerTask = std::sync::Arc::new(|kubeconfig, stop| {
        Box::pin(kubewright_controllers::run_beside_server(
            kubeconfig,
            kubewright_controllers::Selection::all(),
            stop,
        ))
    });
    TestServer::builder().with_task("kubewright-controllers", controllers)
}

/// The variable that switches tests to a real cluster.
pub const KUBECONFIG_ENV: &str = "KUBEWRIGHT_TEST_KUBECONFIG";

/// Whether the suite runs against a real cluster (`KUBEWRIGHT_TEST_KUBECONFIG` is set).
pub fn real_cluster() -> bool {
    std::env::var(KUBECONFIG_ENV).is_ok_and(|v| !v.is_empty())
}

/// The part of a test name that marks it as one that cannot run on a real cluster. CI's
/// real-cluster stage excludes such tests with a nextest filter (`.config/nextest.toml`,
/// profile `real`), so they are counted as skipped there.
pub const EMBEDDED_ONLY: &str = "embedded_only";

/// For a test that needs the embedded server (white-box hooks, forced faults, its own
/// storage): returns true after printing `skipped: <reason>` when the suite runs against a
/// real cluster; the test then returns. The test's name must contain
/// [`EMBEDDED_ONLY`], so that the runner counts it as skipped instead of passed; a test
/// named otherwise panics here, which keeps skips visible.
///
/// ```no_run
/// #[tokio::test]
/// async fn forced_410_relists_embedded_only() {
///     if kubewright_testing::embedded_only("a 410 cannot be forced on a real cluster") {
///         return;
///     }
///     // ...
/// }
/// ```
#[allow(clippy::panic)]
pub fn embedded_only(reason: &str) -> bool {
    if !real_cluster() {
        return false;
    }
    let thread = std::thread::current();
    let name = thread.name().unwrap_or_default();
    if !name.contains(EMBEDDED_ONLY) {
        panic!(
            "test `{name}` skips on a real cluster ({reason}) but its name lacks `{EMBEDDED_ONLY}`, so the skip would count as a pass"
        );
    }
    eprintln!("skipped: {reason}");
    true
}

/// A test environment: a server (embedded or real), a client, and namespaces to clean up.
pub struct TestEnv {
    server: Option<TestServer>,
    config: Config,
    client: Client,
    namespaces: Mutex<Vec<String>>,
    /// CRDs installed by [`TestEnv::install_crds`], removed from a real cluster on drop.
    crds: Mutex<Vec<String>>,
}

/// Installs the test-output subscriber once per process; a subscriber set before stays.
fn init_test_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("embedded", &self.server.is_some())
            .finish()
    }
}

fn random_suffix() -> String {
    format!("{:08x}", rand::random::<u32>())
}

impl TestEnv {
    /// Starts the environment. Panics (it is a test helper) when the server cannot start
    /// or the configured kubeconfig cannot be read.
    #[allow(clippy::panic)]
    pub async fn start() -> Self {
        init_test_tracing();
        match std::env::var(KUBECONFIG_ENV) {
            Ok(path) if !path.is_empty() => {
                let kc = Kubeconfig::read_from(&path)
                    .unwrap_or_else(|e| panic!("{KUBECONFIG_ENV}={path}: {e}"));
                let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .unwrap_or_else(|e| panic!("{KUBECONFIG_ENV}={path}: {e}"));
                // Tests create hundreds of objects; client-go's 5 QPS would make a run take
                // many minutes. The server's own priority and fairness still applies (a 429
                // with Retry-After is honoured by the client).
                config.qps = 0.0;
                let client = Client::new(config.clone()).unwrap_or_else(|e| panic!("client: {e}"));
                Self {
                    server: None,
                    config,
                    client,
                    namespaces: Mutex::new(vec![]),
                    crds: Mutex::new(vec![]),
                }
            }
            _ => {
                let server = embedded_server()
                    .start()
                    .await
                    .unwrap_or_else(|e| panic!("embedded server: {e}"));
                Self::for_server(server)
            }
        }
    }

    /// An environment over an already started embedded server.
    #[allow(clippy::panic)]
    pub fn for_server(server: TestServer) -> Self {
        let kc = Kubeconfig::from_yaml(&server.kubeconfig())
            .unwrap_or_else(|e| panic!("kubeconfig: {e}"));
        let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .unwrap_or_else(|e| panic!("config: {e}"));
        // Tests are bursty; the embedded server needs no protection.
        config.qps = 0.0;
        let client = Client::new(config.clone()).unwrap_or_else(|e| panic!("client: {e}"));
        Self {
            server: Some(server),
            config,
            client,
            namespaces: Mutex::new(vec![]),
            crds: Mutex::new(vec![]),
        }
    }

    /// Whether this runs on the embedded server (false: a real cluster).
    pub fn is_embedded(&self) -> bool {
        self.server.is_some()
    }

    /// The embedded server, when there is one (white-box checks such as watch counts).
    pub fn server(&self) -> Option<&TestServer> {
        self.server.as_ref()
    }

    /// A client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The client configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A name unique to this run, for cluster-scoped objects: `<prefix>-<random>`.
    pub fn unique_name(&self, prefix: &str) -> String {
        format!("{prefix}-{}", random_suffix())
    }

    /// Creates a namespace with a unique name, waits until its `default` ServiceAccount
    /// exists (as a real cluster needs before admitting pods), and deletes it when the
    /// environment drops.
    #[allow(clippy::panic)]
    pub async fn namespace(&self) -> String {
        let name = format!("kwtest-{}", random_suffix());
        let api: Api<Namespace> = Api::all(self.client.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        self.namespaces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name.clone());
        let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(self.client.clone(), &name);
        let wp = WatchParams::default()
            .fields("metadata.name=default")
            .timeout(30);
        let found = tokio::time::timeout(Duration::from_secs(30), async {
            let Ok(stream) = sas.watch(&wp, "").await else {
                return false;
            };
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                if matches!(ev, Ok(WatchEvent::Added(_))) {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false);
        if !found {
            panic!("namespace {name}: the default ServiceAccount did not appear within 30s");
        }
        name
    }

    /// Installs CustomResourceDefinitions, as envtest's `CRDInstallOptions` does: each is
    /// created (or, when one of that name exists with another spec, replaced), and this
    /// returns once every one is `Established` and its resource is served (a real API
    /// server may answer 404 for a moment after `Established`). On a real cluster they
    /// are deleted when the environment drops, with the objects they hold.
    ///
    /// ```no_run
    /// # async fn t(crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition) {
    /// let env = kubewright_testing::TestEnv::start().await;
    /// env.install_crds([crd]).await; // e.g. `Backup::crd()` from #[derive(CustomResource)]
    /// # }
    /// ```
    #[allow(clippy::panic)]
    pub async fn install_crds(
        &self,
        crds: impl IntoIterator<Item = CustomResourceDefinition>,
    ) -> Vec<CustomResourceDefinition> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let mut installed = Vec::new();
        for crd in crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let created = match api.create(&PostParams::default(), &crd).await {
                Ok(c) => c,
                Err(e) if e.is_already_exists() => {
                    let mut existing = api
                        .get(&name)
                        .await
                        .unwrap_or_else(|e| panic!("get CRD {name}: {e}"));
                    if existing.spec != crd.spec {
                        existing.spec = crd.spec.clone();
                        existing = api
                            .replace(&name, &PostParams::default(), &existing)
                            .await
                            .unwrap_or_else(|e| panic!("update CRD {name}: {e}"));
                    }
                    existing
                }
                Err(e) => panic!("create CRD {name}: {e}"),
            };
            self.crds
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(name.clone());
            installed.push(created);
        }
        for crd in &mut installed {
            let name = crd.metadata.name.clone().unwrap_or_default();
            *crd = wait_established(&api, &name).await;
            wait_served(&self.client, crd).await;
        }
        installed
    }
}

/// Whether a CRD's `Established` condition is true.
fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// Waits (on a watch) until the CRD is `Established`; panics after 60 s.
#[allow(clippy::panic)]
async fn wait_established(
    api: &Api<CustomResourceDefinition>,
    name: &str,
) -> CustomResourceDefinition {
    let wait = async {
        loop {
            let current = api
                .get(name)
                .await
                .unwrap_or_else(|e| panic!("get CRD {name}: {e}"));
            if is_established(&current) {
                return current;
            }
            let rv = current
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default();
            let wp = WatchParams::default()
                .fields(&format!("metadata.name={name}"))
                .timeout(30);
            let Ok(stream) = api.watch(&wp, &rv).await else {
                continue;
            };
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                if let Ok(WatchEvent::Added(c) | WatchEvent::Modified(c)) = ev
                    && is_established(&c)
                {
                    return c;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .unwrap_or_else(|_| panic!("CRD {name} was not Established within 60s"))
}

/// Waits until a list of the CRD's storage version is answered (not 404); panics after 60 s.
#[allow(clippy::panic)]
async fn wait_served(client: &Client, crd: &CustomResourceDefinition) {
    let Some(version) = crd
        .spec
        .versions
        .iter()
        .find(|v| v.served)
        .map(|v| v.name.clone())
    else {
        return;
    };
    let group = &crd.spec.group;
    let ar = ApiResource {
        group: group.clone(),
        version: version.clone(),
        api_version: format!("{group}/{version}"),
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
        scope: if crd.spec.scope == "Namespaced" {
            Scope::Namespaced
        } else {
            Scope::Cluster
        },
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => return,
            Err(e) if e.is_not_found() && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("list {}: {e}", ar.plural),
        }
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        let names: Vec<String> =
            std::mem::take(&mut *self.namespaces.lock().unwrap_or_else(|e| e.into_inner()));
        let crds: Vec<String> =
            std::mem::take(&mut *self.crds.lock().unwrap_or_else(|e| e.into_inner()));
        if (names.is_empty() && crds.is_empty()) || self.server.is_some() {
            // The embedded server goes away with the environment.
            return;
        }
        // Ask a real cluster to delete the namespaces; do not wait for termination.
        let config = self.config.clone();
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let Ok(client) = Client::new(config) else {
                    return;
                };
                let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
                for n in crds {
                    let _ = crd_api.delete(&n, &DeleteParams::default()).await;
                }
                let api: Api<Namespace> = Api::all(client);
                for n in names {
                    let _ = api.delete(&n, &DeleteParams::default()).await;
                }
            });
        })
        .join();
    }
}
