//! Controller integration tests: run against the embedded server, or a real cluster when
//! KUBEWRIGHT_TEST_KUBECONFIG is set. Every test uses its own namespace and a label
//! selector unique to the run; the custom resource tests use a CRD with a random group
//! and delete it at the end.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubewright_client::{Api, Client};
use kubewright_core::{
    ApiResource, DeleteParams, DynamicObject, ListParams, ObjectKey, ObjectMeta, Patch,
    PatchParams, PostParams, Resource, ResourceExt, Scope, WatchEvent, WatchParams,
};
use kubewright_runtime::controller::{
    Action, Controller, ControllerError, Predicate, ReconcileReport, ReconcileResult, Reconciler,
    Source,
};
use kubewright_runtime::finalizer::{FinalizerEvent, finalizer};
use kubewright_runtime::metrics::{Metrics, encode};
use kubewright_runtime::owner::{OwnerError, set_controller_reference_with};
use kubewright_runtime::{InformerParams, InformerThreads, SharedInformerFactory};
use kubewright_testing::TestEnv;
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Every wait in these tests ends after this, failing the test.
const DEADLINE: Duration = Duration::from_secs(30);
/// Garbage collection of dependents of a custom resource whose CRD was just created: a
/// real garbage collector notices new resource types on a 30 s discovery resync.
const GC_DEADLINE: Duration = Duration::from_secs(90);

#[derive(Debug, thiserror::Error)]
enum TestError {
    #[error(transparent)]
    Client(#[from] kubewright_client::Error),
    #[error(transparent)]
    Owner(#[from] OwnerError),
    #[error("{0}")]
    Other(String),
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Collects reconcile reports and lets a test wait for a condition on them.
#[derive(Clone)]
struct Reports(Arc<watch::Sender<Vec<ReconcileReport>>>);

impl Reports {
    fn new() -> Self {
        Self(Arc::new(watch::channel(Vec::new()).0))
    }
    fn observer(&self) -> impl Fn(&ReconcileReport) + Send + Sync + 'static {
        let tx = self.0.clone();
        move |r| tx.send_modify(|v| v.push(r.clone()))
    }
    fn snapshot(&self) -> Vec<ReconcileReport> {
        self.0.borrow().clone()
    }
    async fn wait(
        &self,
        what: &str,
        mut pred: impl FnMut(&[ReconcileReport]) -> bool,
    ) -> Vec<ReconcileReport> {
        let mut rx = self.0.subscribe();
        match tokio::time::timeout(DEADLINE, rx.wait_for(|v| pred(v))).await {
            Ok(Ok(v)) => v.clone(),
            _ => panic!(
                "timed out waiting for {what}; reports: {:#?}",
                self.snapshot()
                    .iter()
                    .map(|r| (r.key.to_string(), r.result.clone()))
                    .collect::<Vec<_>>()
            ),
        }
    }
}

fn of<'a>(
    reports: &'a [ReconcileReport],
    name: &'a str,
) -> impl Iterator<Item = &'a ReconcileReport> {
    reports.iter().filter(move |r| r.key.name == name)
}

fn count(reports: &[ReconcileReport], name: &str, result: &ReconcileResult) -> usize {
    of(reports, name).filter(|r| &r.result == result).count()
}

/// A label unique to this test run, so that a real cluster's other objects never match.
fn run_label(env: &TestEnv) -> (String, String) {
    ("kubewright.test/run".to_string(), env.unique_name("ctl"))
}

fn configmap(name: &str, label: &(String, String), data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([label.clone()].into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

fn selector(label: &(String, String)) -> String {
    format!("{}={}", label.0, label.1)
}

/// Waits, on a watch with a deadline, until `pred` holds for the object `name` (`None`:
/// it does not exist); returns the object it held for.
async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    pred: impl FnMut(Option<&K>) -> bool,
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + Debug + Send + 'static,
{
    wait_for_within(api, name, what, DEADLINE, pred).await
}

/// [`wait_for`] with its own deadline.
async fn wait_for_within<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    within: Duration,
    mut pred: impl FnMut(Option<&K>) -> bool,
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + Debug + Send + 'static,
{
    let deadline = Instant::now() + within;
    let fields = format!("metadata.name={name}");
    let result = tokio::time::timeout_at(deadline, async {
        loop {
            let list = api
                .list(&ListParams::default().fields(&fields))
                .await
                .unwrap();
            let mut current = list.items.into_iter().next();
            if pred(current.as_ref()) {
                return current;
            }
            let rv = list.metadata.resource_version.unwrap_or_default();
            let wp = WatchParams::default().fields(&fields).timeout(10);
            let mut stream = Box::pin(api.watch(&wp, &rv).await.unwrap());
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => current = Some(o),
                    Ok(WatchEvent::Deleted(_)) => current = None,
                    // Bookmarks, errors (e.g. 410): list again.
                    _ => break,
                }
                if pred(current.as_ref()) {
                    return current;
                }
            }
        }
    })
    .await;
    match result {
        Ok(obj) => obj,
        Err(_) => panic!("timed out waiting for {what} ({name})"),
    }
}

/// Runs a controller in a task; returns its shutdown token and handle.
fn spawn<K, R, C>(
    controller: Controller<K>,
    reconciler: R,
    ctx: Arc<C>,
) -> (CancellationToken, JoinHandle<Result<(), ControllerError>>)
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + Debug + Send + Sync + 'static,
    R: Reconciler<K, C>,
    C: Send + Sync + 'static,
{
    let stop = CancellationToken::new();
    let handle = tokio::spawn(controller.shutdown_on(stop.clone()).run(reconciler, ctx));
    (stop, handle)
}

/// Cancels and waits for a controller, expecting a graceful stop.
async fn stop(token: CancellationToken, handle: JoinHandle<Result<(), ControllerError>>) {
    token.cancel();
    tokio::time::timeout(DEADLINE, handle)
        .await
        .expect("controller did not stop in time")
        .expect("controller task panicked")
        .expect("controller stopped with an error");
}

// ---------------------------------------------------------------------------------------
// A custom resource with a random group
// ---------------------------------------------------------------------------------------

struct Crd {
    ar: ApiResource,
    name: String,
}

async fn create_crd(env: &TestEnv) -> Crd {
    let group = format!("{}.kubewright.test", env.unique_name("c"));
    let name = format!("widgets.{group}");
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                }}}
            }]
        }
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    wait_for(&crds, &name, "CRD Established", |c| {
        c.and_then(|c| c.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            })
    })
    .await;
    let ar = ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Widget".into(),
        plural: "widgets".into(),
        scope: Scope::Namespaced,
    };
    Crd { ar, name }
}

/// Runs `body` with a fresh CRD, then strips the finalizers of its objects in `ns` and
/// deletes it, whatever happened (leftovers would block a real cluster's cleanup).
async fn with_crd<F, Fut>(env: &TestEnv, ns: &str, body: F)
where
    F: FnOnce(ApiResource) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let crd = create_crd(env).await;
    let result = tokio::spawn(body(crd.ar.clone())).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(env.client(), ns, &crd.ar);
    if let Ok(list) = widgets.list(&ListParams::default()).await {
        let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        for w in list.items {
            let _ = widgets
                .patch(&w.name_any(), &PatchParams::default(), &strip)
                .await;
        }
    }
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let _ = crds.delete(&crd.name, &DeleteParams::default()).await;
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Creates a widget, retrying while a just-Established CRD is not served yet.
async fn create_widget(
    api: &Api<DynamicObject>,
    ar: &ApiResource,
    name: &str,
    size: i64,
) -> DynamicObject {
    let obj = DynamicObject::new(name, ar).data(json!({"spec": {"size": size}}));
    let deadline = Instant::now() + DEADLINE;
    loop {
        match api.create(&PostParams::default(), &obj).await {
            Ok(o) => return o,
            Err(e) if e.is_not_found() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("create widget {name}: {e}"),
        }
    }
}

struct WidgetCtx {
    client: Client,
    ar: ApiResource,
    label: (String, String),
    cleaned: Mutex<Vec<String>>,
}

fn dependent_name(widget: &DynamicObject) -> String {
    format!("{}-config", widget.name_any())
}

/// The desired ConfigMap of a widget: `size` copied from its spec.
fn desired_configmap(widget: &DynamicObject, ctx: &WidgetCtx) -> ConfigMap {
    let mut cm = configmap(&dependent_name(widget), &ctx.label, &[]);
    cm.metadata.namespace = widget.namespace().map(str::to_string);
    cm.data = Some(BTreeMap::from([(
        "size".to_string(),
        widget.data["spec"]["size"].to_string(),
    )]));
    cm
}

async fn apply_configmap(ctx: &WidgetCtx, ns: &str, cm: &ConfigMap) -> Result<(), TestError> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
    let pp = PatchParams::apply("kubewright-controller-test").force();
    api.patch(&cm.name_any(), &pp, &Patch::Apply(cm)).await?;
    Ok(())
}

/// Keeps `<widget>-config` in sync with the widget, owned by it.
async fn sync_widget(widget: Arc<DynamicObject>, ctx: Arc<WidgetCtx>) -> Result<Action, TestError> {
    let ns = widget
        .namespace()
        .ok_or_else(|| TestError::Other("widget without namespace".into()))?
        .to_string();
    let mut cm = desired_configmap(&widget, &ctx);
    set_controller_reference_with(&*widget, &ctx.ar, &mut cm)?;
    apply_configmap(&ctx, &ns, &cm).await?;
    Ok(Action::await_change())
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

/// The seed controller: a ConfigMap per Widget, owned by it. Create, update, delete of
/// the dependent (the owns() mapping recreates it) and garbage collection after the
/// widget is deleted.
#[tokio::test]
async fn configmap_per_widget_follows_the_widget() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let client = env.client();
    let label = run_label(&env);
    let ns2 = ns.clone();
    with_crd(&env, &ns, move |ar| async move {
        let ns = ns2;
        let factory = Arc::new(SharedInformerFactory::new(client.clone()));
        let reports = Reports::new();
        let controller = Controller::<DynamicObject>::new_with(
            &factory,
            ar.clone(),
            Source::dynamic(&ar, InformerParams::default().namespace(&ns)),
        )
        .owns::<ConfigMap>(
            InformerParams::default()
                .namespace(&ns)
                .labels(&selector(&label)),
        )
        .named("widget-configmaps")
        .on_result(reports.observer());
        let ctx = Arc::new(WidgetCtx {
            client: client.clone(),
            ar: ar.clone(),
            label: label.clone(),
            cleaned: Mutex::new(Vec::new()),
        });
        let (token, handle) = spawn(controller, sync_widget, ctx);

        let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let widget = create_widget(&widgets, &ar, "w1", 3).await;
        let uid = widget.uid().unwrap().to_string();

        // Create: the dependent appears, controlled by the widget.
        let cm = wait_for(&cms, "w1-config", "dependent created", |cm| {
            cm.and_then(|c| c.data.as_ref())
                .and_then(|d| d.get("size"))
                .map(String::as_str)
                == Some("3")
        })
        .await
        .unwrap();
        let owner = cm.controller_owner().expect("controller reference");
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Widget", "w1", uid.as_str())
        );
        assert_eq!(owner.api_version, ar.api_version);
        assert_eq!(owner.block_owner_deletion, Some(true));

        // Update: the dependent follows.
        widgets
            .patch(
                "w1",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"size": 5}})),
            )
            .await
            .unwrap();
        wait_for(&cms, "w1-config", "dependent updated", |cm| {
            cm.and_then(|c| c.data.as_ref())
                .and_then(|d| d.get("size"))
                .map(String::as_str)
                == Some("5")
        })
        .await;

        // Deleting the dependent reconciles its owner (owns() mapping): it comes back.
        let old_uid = cms
            .get("w1-config")
            .await
            .unwrap()
            .uid()
            .unwrap()
            .to_string();
        cms.delete("w1-config", &DeleteParams::default())
            .await
            .unwrap();
        let recreated = wait_for(&cms, "w1-config", "dependent recreated", |cm| {
            cm.is_some_and(|c| c.uid() != Some(old_uid.as_str()))
        })
        .await
        .unwrap();
        assert_eq!(recreated.data.unwrap()["size"], "5");

        // Delete the widget: the garbage collector removes the dependent.
        widgets
            .delete("w1", &DeleteParams::background())
            .await
            .unwrap();
        // kube-controller-manager's garbage collector watches a new resource type (this
        // test's CRD) only after its next discovery resync, every 30 s: allow for that.
        wait_for_within(
            &cms,
            "w1-config",
            "dependent garbage-collected",
            GC_DEADLINE,
            |cm| cm.is_none(),
        )
        .await;
        // The widget's key is no longer reconciled once it left the cache.
        reports
            .wait("w1 missing from the cache", |r| {
                count(r, "w1", &ReconcileResult::Missing) > 0
            })
            .await;
        let all = reports.snapshot();
        assert!(
            of(&all, "w1").all(|r| matches!(
                r.result,
                ReconcileResult::Success | ReconcileResult::Missing
            )),
            "{all:#?}"
        );
        stop(token, handle).await;
        factory.shutdown().await;
    })
    .await;
}

/// The finalizer variant: cleanup runs (and deletes an unowned "external" ConfigMap)
/// before the widget may go.
#[tokio::test]
async fn finalizer_cleanup_runs_before_the_widget_goes() {
    const FINALIZER: &str = "kubewright.test/cleanup";
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let client = env.client();
    let label = run_label(&env);
    let ns2 = ns.clone();
    with_crd(&env, &ns, move |ar| async move {
        let ns = ns2;
        let ctx = Arc::new(WidgetCtx {
            client: client.clone(),
            ar: ar.clone(),
            label,
            cleaned: Mutex::new(Vec::new()),
        });
        let reconcile = |widget: Arc<DynamicObject>, ctx: Arc<WidgetCtx>| async move {
            let ns = widget.namespace().unwrap_or_default().to_string();
            let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &ctx.ar);
            finalizer(&api, FINALIZER, widget, |event| async move {
                match event {
                    FinalizerEvent::Apply(w) => {
                        apply_configmap(&ctx, &ns, &desired_configmap(&w, &ctx)).await?;
                    }
                    FinalizerEvent::Cleanup(w) => {
                        let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
                        match cms
                            .delete(&dependent_name(&w), &DeleteParams::default())
                            .await
                        {
                            Ok(_) => {}
                            Err(e) if e.is_not_found() => {}
                            Err(e) => return Err(TestError::from(e)),
                        }
                        ctx.cleaned.lock().unwrap().push(w.name_any());
                    }
                }
                Ok::<Action, TestError>(Action::await_change())
            })
            .await
        };
        let factory = Arc::new(SharedInformerFactory::new(client.clone()));
        let controller = Controller::<DynamicObject>::new_with(
            &factory,
            ar.clone(),
            Source::dynamic(&ar, InformerParams::default().namespace(&ns)),
        );
        let (token, handle) = spawn(controller, reconcile, ctx.clone());

        let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        create_widget(&widgets, &ar, "w2", 7).await;
        wait_for(&cms, "w2-config", "external ConfigMap created", |cm| {
            cm.is_some()
        })
        .await;
        let w = wait_for(&widgets, "w2", "finalizer added", |w| {
            w.is_some_and(|w| w.finalizers().iter().any(|f| f == FINALIZER))
        })
        .await
        .unwrap();
        assert!(w.metadata.deletion_timestamp.is_none());
        assert!(ctx.cleaned.lock().unwrap().is_empty());

        widgets
            .delete("w2", &DeleteParams::default())
            .await
            .unwrap();
        wait_for(&widgets, "w2", "widget gone after cleanup", |w| w.is_none()).await;
        assert_eq!(*ctx.cleaned.lock().unwrap(), vec!["w2".to_string()]);
        // Cleanup deleted the ConfigMap before the finalizer was removed.
        assert!(cms.get_opt("w2-config").await.unwrap().is_none());
        stop(token, handle).await;
        factory.shutdown().await;
    })
    .await;
}

/// Failing reconciles of one key are retried with growing intervals (5 ms doubling);
/// another key starts its own back-off from the beginning.
#[tokio::test]
async fn errors_back_off_per_key() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let reports = Reports::new();
    let controller = Controller::<ConfigMap>::from_client(
        env.client(),
        InformerParams::default()
            .namespace(&ns)
            .labels(&selector(&label)),
    )
    .on_result(reports.observer());
    let reconcile = |cm: Arc<ConfigMap>, _: Arc<()>| async move {
        Err::<Action, String>(format!("{} always fails", cm.name_any()))
    };
    let (token, handle) = spawn(controller, reconcile, Arc::new(()));

    api.create(&PostParams::default(), &configmap("a", &label, &[]))
        .await
        .unwrap();
    let errors = |r: &[ReconcileReport], name: &str| {
        of(r, name)
            .filter(|r| matches!(r.result, ReconcileResult::Error(_)))
            .count()
    };
    reports
        .wait("6 failures of a", |r| errors(r, "a") >= 6)
        .await;
    api.create(&PostParams::default(), &configmap("b", &label, &[]))
        .await
        .unwrap();
    let all = reports
        .wait("9 failures of a, 4 of b", |r| {
            errors(r, "a") >= 9 && errors(r, "b") >= 4
        })
        .await;

    let intervals = |name: &str| -> Vec<Duration> {
        let starts: Vec<Instant> = of(&all, name).map(|r| r.started).collect();
        starts.windows(2).map(|w| w[1] - w[0]).collect()
    };
    let a = intervals("a");
    let b = intervals("b");
    eprintln!("a: {a:?}\nb: {b:?}");
    // Never sooner than the back-off: 5 ms × 2^i (the timer has 1 ms granularity).
    for (name, iv) in [("a", &a), ("b", &b)] {
        for (i, d) in iv.iter().enumerate() {
            let nominal = Duration::from_millis(5 << i);
            assert!(
                *d + Duration::from_millis(1) >= nominal,
                "{name}: interval {i} = {d:?} < {nominal:?}"
            );
        }
    }
    // Growing, with tolerance for scheduling stalls (a stall lengthens one interval and
    // makes the next look short): never shrinking by more than half (or 50 ms), and
    // doubling as a rule (the median ratio of consecutive intervals).
    for (name, iv) in [("a", &a), ("b", &b)] {
        for i in 1..iv.len() {
            let tolerance = (iv[i - 1] / 2).max(Duration::from_millis(50));
            assert!(
                iv[i] + tolerance >= iv[i - 1],
                "{name}: intervals not growing: {iv:?}"
            );
        }
        let mut ratios: Vec<f64> = iv
            .windows(2)
            .map(|w| w[1].as_secs_f64() / w[0].as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        let median = ratios[ratios.len() / 2];
        assert!(
            (1.5..=3.0).contains(&median),
            "{name}: median growth {median} in {iv:?}"
        );
    }
    // Per key: b started from the initial back-off while a was far into its own (a was
    // created first and had failed 6 times when b was created).
    assert!(
        b[0] < a[5],
        "b's first retry {:?} vs a's 6th {:?}",
        b[0],
        a[5]
    );
    stop(token, handle).await;
}

/// 8 workers and a storm of updates on 16 objects: no key is ever reconciled by two
/// workers at once, yet workers do run in parallel, and every final state is seen.
#[tokio::test]
async fn no_key_is_reconciled_concurrently() {
    const OBJECTS: usize = 16;
    const UPDATES: usize = 12;
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);

    #[derive(Default)]
    struct State {
        in_flight: Mutex<HashSet<String>>,
        violations: Mutex<Vec<String>>,
        running: AtomicUsize,
        max_running: AtomicUsize,
        reconciles: AtomicUsize,
        /// The last `n` seen per object.
        seen: Mutex<HashMap<String, usize>>,
        progress: watch::Sender<usize>,
    }
    let state = Arc::new(State::default());
    let reconcile = |cm: Arc<ConfigMap>, s: Arc<State>| async move {
        let name = cm.name_any();
        if !s.in_flight.lock().unwrap().insert(name.clone()) {
            s.violations.lock().unwrap().push(name.clone());
        }
        let running = s.running.fetch_add(1, Ordering::SeqCst) + 1;
        s.max_running.fetch_max(running, Ordering::SeqCst);
        // Simulated work, long enough for updates to arrive meanwhile.
        tokio::time::sleep(Duration::from_millis(2 + rand::random::<u64>() % 8)).await;
        s.running.fetch_sub(1, Ordering::SeqCst);
        s.in_flight.lock().unwrap().remove(&name);
        s.reconciles.fetch_add(1, Ordering::SeqCst);
        let n = cm
            .data
            .as_ref()
            .and_then(|d| d.get("n"))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        s.seen.lock().unwrap().insert(name, n);
        s.progress.send_modify(|p| *p += 1);
        Ok::<_, std::convert::Infallible>(Action::await_change())
    };
    let controller = Controller::<ConfigMap>::from_client(
        env.client(),
        InformerParams::default()
            .namespace(&ns)
            .labels(&selector(&label)),
    )
    .workers(8);
    let (token, handle) = spawn(controller, reconcile, state.clone());

    // The storm: every object created, then updated UPDATES times, all concurrently.
    let storm = (0..OBJECTS).map(|i| {
        let api = api.clone();
        let label = label.clone();
        async move {
            let name = format!("cm-{i}");
            api.create(
                &PostParams::default(),
                &configmap(&name, &label, &[("n", "0")]),
            )
            .await
            .unwrap();
            for n in 1..=UPDATES {
                let patch = Patch::Merge(json!({"data": {"n": n.to_string()}}));
                api.patch(&name, &PatchParams::default(), &patch)
                    .await
                    .unwrap();
            }
        }
    });
    futures::future::join_all(storm).await;

    let mut progress = state.progress.subscribe();
    tokio::time::timeout(
        DEADLINE,
        progress.wait_for(|_| {
            let seen = state.seen.lock().unwrap();
            seen.len() == OBJECTS && seen.values().all(|n| *n == UPDATES)
        }),
    )
    .await
    .expect("every final state reconciled")
    .unwrap();
    stop(token, handle).await;

    assert!(
        state.violations.lock().unwrap().is_empty(),
        "reconciled concurrently: {:?}",
        state.violations.lock().unwrap()
    );
    assert!(
        state.max_running.load(Ordering::SeqCst) >= 2,
        "workers never ran in parallel"
    );
    assert!(state.max_running.load(Ordering::SeqCst) <= 8);
    assert!(state.reconciles.load(Ordering::SeqCst) >= OBJECTS);
}

/// A panic in reconcile is caught, counted in the metrics, and the key retried.
#[tokio::test]
async fn panic_in_reconcile_is_caught_counted_and_retried() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let reports = Reports::new();
    let attempts = Arc::new(AtomicUsize::new(0));
    let reconcile = |_cm: Arc<ConfigMap>, attempts: Arc<AtomicUsize>| async move {
        if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("boom on the first attempt");
        }
        Ok::<_, std::convert::Infallible>(Action::await_change())
    };
    let controller = Controller::<ConfigMap>::from_client(
        env.client(),
        InformerParams::default()
            .namespace(&ns)
            .labels(&selector(&label)),
    )
    .named("panicky")
    .metrics(&metrics)
    .on_result(reports.observer());
    let (token, handle) = spawn(controller, reconcile, attempts.clone());

    api.create(&PostParams::default(), &configmap("p", &label, &[]))
        .await
        .unwrap();
    let all = reports
        .wait("success after the panic", |r| {
            count(r, "p", &ReconcileResult::Success) == 1
        })
        .await;
    let results: Vec<_> = of(&all, "p").map(|r| r.result.clone()).collect();
    assert_eq!(
        results,
        vec![
            ReconcileResult::Panic("boom on the first attempt".into()),
            ReconcileResult::Success
        ]
    );
    let text = encode(&registry);
    for line in [
        r#"controller_runtime_reconcile_panics_total{controller="panicky"} 1"#,
        r#"controller_runtime_reconcile_errors_total{controller="panicky"} 1"#,
        r#"controller_runtime_reconcile_total{controller="panicky",result="error"} 1"#,
        r#"controller_runtime_reconcile_total{controller="panicky",result="success"} 1"#,
        r#"controller_runtime_reconcile_time_seconds_count{controller="panicky"} 2"#,
        r#"controller_runtime_max_concurrent_reconciles{controller="panicky"} 1"#,
        r#"controller_runtime_active_workers{controller="panicky"} 0"#,
        r#"workqueue_retries_total{name="panicky"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    stop(token, handle).await;
}

/// Graceful shutdown: no new work is taken, the reconciles in flight complete.
#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_reconciles() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);

    #[derive(Default)]
    struct Counts {
        started: AtomicUsize,
        finished: AtomicUsize,
        changed: watch::Sender<()>,
        /// Reconciles hold here until the test opens the gate (after shutdown began).
        gate: watch::Sender<bool>,
    }
    let counts = Arc::new(Counts::default());
    let reconcile = |_cm: Arc<ConfigMap>, c: Arc<Counts>| async move {
        c.started.fetch_add(1, Ordering::SeqCst);
        c.changed.send_replace(());
        // Work in flight: shutdown must wait for it to finish.
        let mut gate = c.gate.subscribe();
        let _ = gate.wait_for(|open| *open).await;
        c.finished.fetch_add(1, Ordering::SeqCst);
        Ok::<_, std::convert::Infallible>(Action::await_change())
    };
    let controller = Controller::<ConfigMap>::from_client(
        env.client(),
        InformerParams::default()
            .namespace(&ns)
            .labels(&selector(&label)),
    )
    .workers(4)
    .shutdown_timeout(DEADLINE);
    let (token, handle) = spawn(controller, reconcile, counts.clone());
    for i in 0..12 {
        api.create(
            &PostParams::default(),
            &configmap(&format!("g-{i}"), &label, &[]),
        )
        .await
        .unwrap();
    }
    let mut changed = counts.changed.subscribe();
    tokio::time::timeout(
        DEADLINE,
        changed.wait_for(|_| counts.started.load(Ordering::SeqCst) >= 4),
    )
    .await
    .expect("4 reconciles started")
    .unwrap();
    // All 4 workers are busy and 8 keys wait in the queue: shut down, then let the
    // in-flight reconciles finish.
    assert_eq!(counts.finished.load(Ordering::SeqCst), 0);
    token.cancel();
    counts.gate.send_replace(true);
    stop(token, handle).await;
    let (started, finished) = (
        counts.started.load(Ordering::SeqCst),
        counts.finished.load(Ordering::SeqCst),
    );
    assert_eq!(started, finished, "half-done work at shutdown");
    assert_eq!(
        started, 4,
        "shutdown finishes the in-flight reconciles and starts no queued one"
    );
}

/// A reconcile that never finishes is aborted after the shutdown timeout, reported.
#[tokio::test]
async fn shutdown_timeout_aborts_hung_reconciles() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let entered = Arc::new(watch::channel(false).0);
    let reconcile = |_cm: Arc<ConfigMap>, entered: Arc<watch::Sender<bool>>| async move {
        entered.send_replace(true);
        std::future::pending::<()>().await;
        Ok::<_, std::convert::Infallible>(Action::await_change())
    };
    let controller = Controller::<ConfigMap>::from_client(
        env.client(),
        InformerParams::default()
            .namespace(&ns)
            .labels(&selector(&label)),
    )
    .named("hung")
    .shutdown_timeout(Duration::from_millis(200));
    let (token, handle) = spawn(controller, reconcile, entered.clone());
    api.create(&PostParams::default(), &configmap("h", &label, &[]))
        .await
        .unwrap();
    tokio::time::timeout(DEADLINE, entered.subscribe().wait_for(|e| *e))
        .await
        .unwrap()
        .unwrap();
    token.cancel();
    let result = tokio::time::timeout(DEADLINE, handle)
        .await
        .unwrap()
        .unwrap();
    match result {
        Err(ControllerError::ShutdownTimedOut {
            controller,
            in_flight,
            timeout,
        }) => {
            assert_eq!(
                (controller.as_str(), in_flight, timeout),
                ("hung", 1, Duration::from_millis(200))
            );
        }
        other => panic!("expected ShutdownTimedOut, got {other:?}"),
    }
}

/// Caches that cannot sync make `run` fail with a typed error naming them.
#[tokio::test]
async fn cache_sync_timeout_is_a_typed_error() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let group = format!("{}.kubewright.test", env.unique_name("missing"));
    let ar = ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Ghost".into(),
        plural: "ghosts".into(),
        scope: Scope::Namespaced,
    };
    let factory = Arc::new(SharedInformerFactory::new(env.client()));
    let controller = Controller::<DynamicObject>::new_with(
        &factory,
        ar.clone(),
        Source::dynamic(&ar, InformerParams::default().namespace(&ns)),
    )
    .cache_sync_timeout(Duration::from_millis(500));
    let reconcile =
        |_o: Arc<DynamicObject>, _: Arc<()>| async { Ok::<_, String>(Action::await_change()) };
    let started = Instant::now();
    let result = tokio::time::timeout(DEADLINE, controller.run(reconcile, Arc::new(())))
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(500));
    match result {
        Err(ControllerError::CacheSync { controller, source }) => {
            assert_eq!(controller, "ghost");
            assert_eq!(source.timeout, Duration::from_millis(500));
            assert_eq!(source.pending.len(), 1, "{source}");
            assert!(source.pending[0].contains("ghosts"), "{source}");
        }
        other => panic!("expected CacheSync, got {other:?}"),
    }
    factory.shutdown().await;
}

/// Predicates filter update events: with `labels_changed`, a data update does not
/// reconcile, a label update does.
#[tokio::test]
async fn predicates_filter_events() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let reports = Reports::new();
    let controller = Controller::<ConfigMap>::from_client(
        env.client(),
        Source::new(
            InformerParams::default()
                .namespace(&ns)
                .labels(&selector(&label)),
        )
        .predicate(Predicate::labels_changed()),
    )
    .on_result(reports.observer());
    let reconcile =
        |_cm: Arc<ConfigMap>, _: Arc<()>| async { Ok::<_, String>(Action::await_change()) };
    let (token, handle) = spawn(controller, reconcile, Arc::new(()));

    api.create(
        &PostParams::default(),
        &configmap("a", &label, &[("v", "1")]),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &configmap("b", &label, &[]))
        .await
        .unwrap();
    reports
        .wait("a and b reconciled once", |r| {
            count(r, "a", &ReconcileResult::Success) == 1
                && count(r, "b", &ReconcileResult::Success) == 1
        })
        .await;
    // A data update of a (filtered), then a label update of b (passes). With one worker
    // and a FIFO queue, had a been queued it would be reconciled before b.
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"extra": "yes"}}})),
    )
    .await
    .unwrap();
    let all = reports
        .wait("b reconciled again", |r| {
            count(r, "b", &ReconcileResult::Success) == 2
        })
        .await;
    assert_eq!(count(&all, "a", &ReconcileResult::Success), 1, "{all:#?}");
    stop(token, handle).await;
}

/// The names of the threads that called [`Threads::record`].
#[derive(Clone, Default)]
struct Threads(Arc<Mutex<BTreeSet<String>>>);

impl Threads {
    fn record(&self) {
        let name = std::thread::current().name().unwrap_or_default().to_owned();
        self.0.lock().unwrap().insert(name);
    }
    fn names(&self) -> BTreeSet<String> {
        self.0.lock().unwrap().clone()
    }
}

/// A controller over a factory on a dedicated thread: its predicate runs there, with the
/// watch, and its reconciler on the caller's runtime.
#[tokio::test]
async fn a_controller_over_a_dedicated_informer_thread() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let factory = Arc::new(
        SharedInformerFactory::new(env.client())
            .threads(InformerThreads::Dedicated(std::num::NonZeroUsize::MIN)),
    );
    let predicate_threads = Threads::default();
    let seen = predicate_threads.clone();
    let reports = Reports::new();
    let controller = Controller::<ConfigMap>::new(
        &factory,
        Source::new(
            InformerParams::default()
                .namespace(&ns)
                .labels(&selector(&label)),
        )
        .predicate(Predicate::new(move |_old, _new| {
            seen.record();
            true
        })),
    )
    .on_result(reports.observer());
    let reconcile_threads = Threads::default();
    let seen = reconcile_threads.clone();
    let reconcile = move |_cm: Arc<ConfigMap>, _: Arc<()>| {
        seen.record();
        async { Ok::<_, String>(Action::await_change()) }
    };
    let (token, handle) = spawn(controller, reconcile, Arc::new(()));
    api.create(
        &PostParams::default(),
        &configmap("a", &label, &[("v", "1")]),
    )
    .await
    .unwrap();
    reports
        .wait("a reconciled", |r| {
            count(r, "a", &ReconcileResult::Success) == 1
        })
        .await;
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    reports
        .wait("a reconciled again", |r| {
            count(r, "a", &ReconcileResult::Success) == 2
        })
        .await;
    stop(token, handle).await;
    factory.shutdown().await;
    assert_eq!(
        predicate_threads.names(),
        BTreeSet::from(["kubewright-informers".to_owned()])
    );
    let reconcile_threads = reconcile_threads.names();
    assert!(
        !reconcile_threads.is_empty() && !reconcile_threads.contains("kubewright-informers"),
        "{reconcile_threads:?}"
    );
}

/// `watches` maps events of another resource to primary keys, and `on_missing` is
/// called (instead of reconcile) for a key whose object was deleted.
#[tokio::test]
async fn watches_mapper_and_on_missing() {
    const TARGET: &str = "kubewright.test/target";
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let secrets: Api<Secret> = Api::namespaced(env.client(), &ns);
    let reports = Reports::new();
    let missing = Arc::new(Mutex::new(Vec::<ObjectKey>::new()));
    let reconciler = (|_cm: Arc<ConfigMap>, _: Arc<Mutex<Vec<ObjectKey>>>| async {
        Ok::<_, String>(Action::await_change())
    })
    .with_on_missing(
        |key: ObjectKey, missing: Arc<Mutex<Vec<ObjectKey>>>| async move {
            missing.lock().unwrap().push(key);
        },
    );
    let controller = Controller::<ConfigMap>::from_client(
        env.client(),
        InformerParams::default()
            .namespace(&ns)
            .labels(&selector(&label)),
    )
    .watches::<Secret>(
        InformerParams::default()
            .namespace(&ns)
            .labels(&selector(&label)),
        |s: &Secret| {
            s.annotations()
                .get(TARGET)
                .map(|t| vec![ObjectKey::new(s.namespace(), t)])
                .unwrap_or_default()
        },
    )
    .on_result(reports.observer());
    let (token, handle) = spawn(controller, reconciler, missing.clone());

    cms.create(&PostParams::default(), &configmap("target", &label, &[]))
        .await
        .unwrap();
    reports
        .wait("target reconciled", |r| {
            count(r, "target", &ReconcileResult::Success) == 1
        })
        .await;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("pointer".into()),
            labels: Some([label.clone()].into()),
            annotations: Some([(TARGET.to_string(), "target".to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    reports
        .wait("target reconciled for the secret", |r| {
            count(r, "target", &ReconcileResult::Success) == 2
        })
        .await;

    cms.delete("target", &DeleteParams::default())
        .await
        .unwrap();
    reports
        .wait("target missing", |r| {
            count(r, "target", &ReconcileResult::Missing) == 1
        })
        .await;
    assert_eq!(
        *missing.lock().unwrap(),
        vec![ObjectKey::new(Some(&ns), "target")]
    );
    // The secret still points at the deleted object: its events keep mapping to the
    // key, which is now missing and never reconciled.
    secrets
        .patch(
            "pointer",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touch": "1"}}})),
        )
        .await
        .unwrap();
    let all = reports
        .wait("target missing again", |r| {
            count(r, "target", &ReconcileResult::Missing) == 2
        })
        .await;
    assert_eq!(count(&all, "target", &ReconcileResult::Success), 2);
    stop(token, handle).await;
}

/// An error policy decides the requeue: here a fixed 50 ms instead of the back-off, and
/// `Action::requeue` reconciles again without errors.
#[tokio::test]
async fn error_policy_and_requeue_after() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let reports = Reports::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let reconciler = (|cm: Arc<ConfigMap>, calls: Arc<AtomicUsize>| async move {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        match (cm.name_any().as_str(), n) {
            ("e", _) => Err("fails".to_string()),
            _ => Ok(Action::requeue(Duration::from_millis(50))),
        }
    })
    .with_error_policy(|_obj: &Arc<ConfigMap>, _e: &String, _c: &AtomicUsize| {
        Action::requeue(Duration::from_millis(50))
    });
    let controller = Controller::<ConfigMap>::from_client(
        env.client(),
        InformerParams::default()
            .namespace(&ns)
            .labels(&selector(&label)),
    )
    .on_result(reports.observer());
    let (token, handle) = spawn(controller, reconciler, calls);
    api.create(&PostParams::default(), &configmap("e", &label, &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &configmap("r", &label, &[]))
        .await
        .unwrap();
    let all = reports
        .wait("5 errors of e, 5 requeues of r", |r| {
            of(r, "e").count() >= 5
                && count(
                    r,
                    "r",
                    &ReconcileResult::RequeueAfter(Duration::from_millis(50)),
                ) >= 5
        })
        .await;
    for name in ["e", "r"] {
        let starts: Vec<Instant> = of(&all, name).map(|r| r.started).collect();
        for w in starts.windows(2).take(4) {
            // A fixed 50 ms each time, no exponential growth.
            assert!(
                w[1] - w[0] >= Duration::from_millis(49),
                "{name}: {:?}",
                w[1] - w[0]
            );
        }
    }
    stop(token, handle).await;
}
