//! Informer integration tests: run against the embedded server, or a real cluster when
//! KUBEWRIGHT_TEST_KUBECONFIG is set. Every test works in its own namespace and selects
//! its objects with a label only they carry.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kubewright_client::{Api, Error as ClientError};
use kubewright_core::{
    ApiResource, DeleteParams, ListParams, ObjectKey, ObjectList, ObjectMeta, Patch, PatchParams,
    PostParams, ResourceExt, WatchParams,
};
use kubewright_runtime::reflector::WatchStream;
use kubewright_runtime::{
    Delta, HandlerFuncs, Informer, InformerParams, InformerThreads, ListWatch, Reflector,
    ReflectorConfig, SharedInformerFactory, Store,
};
use kubewright_testing::TestEnv;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

const LABEL: &str = "kubewright.test/informer";

/// A label value unique to one test run.
fn unique() -> String {
    format!("t{:08x}", rand::random::<u32>())
}

fn cm(name: &str, labels: &[(&str, &str)], v: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        data: Some([("v".to_string(), v.to_string())].into()),
        ..Default::default()
    }
}

fn v_of(cm: &ConfigMap) -> String {
    cm.data
        .as_ref()
        .and_then(|d| d.get("v"))
        .cloned()
        .unwrap_or_default()
}

async fn set_v(api: &Api<ConfigMap>, name: &str, v: &str) -> ConfigMap {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": v}})),
    )
    .await
    .unwrap()
}

/// Creates `names` with bounded concurrency (16 requests in flight).
async fn create_all(api: &Api<ConfigMap>, names: &[String], labels: &[(&str, &str)]) {
    futures::stream::iter(names.iter().map(|n| {
        let obj = cm(n, labels, "0");
        async move { api.create(&PostParams::default(), &obj).await.map(|_| ()) }
    }))
    .buffer_unordered(16)
    .try_collect::<Vec<()>>()
    .await
    .unwrap();
}

/// What a recording handler saw.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    Add {
        name: String,
        v: String,
    },
    Update {
        name: String,
        old_v: String,
        new_v: String,
    },
    Delete {
        name: String,
        v: String,
        unknown: bool,
    },
}

impl Ev {
    fn name(&self) -> &str {
        match self {
            Ev::Add { name, .. } | Ev::Update { name, .. } | Ev::Delete { name, .. } => name,
        }
    }
}

fn recorder() -> (HandlerFuncs<ConfigMap>, mpsc::UnboundedReceiver<Ev>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (t1, t2, t3) = (tx.clone(), tx.clone(), tx);
    let h = HandlerFuncs::new()
        .on_add(move |o: Arc<ConfigMap>| {
            let _ = t1.send(Ev::Add {
                name: o.name_any(),
                v: v_of(&o),
            });
        })
        .on_update(move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
            let _ = t2.send(Ev::Update {
                name: new.name_any(),
                old_v: v_of(&old),
                new_v: v_of(&new),
            });
        })
        .on_delete(move |o: Arc<ConfigMap>, unknown| {
            let _ = t3.send(Ev::Delete {
                name: o.name_any(),
                v: v_of(&o),
                unknown,
            });
        });
    (h, rx)
}

/// A handler for any type that reports "add|update|delete <name>".
fn name_events<K>() -> (HandlerFuncs<K>, mpsc::UnboundedReceiver<String>)
where
    K: kubewright_core::Resource + Send + Sync + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let (t1, t2, t3) = (tx.clone(), tx.clone(), tx);
    let h = HandlerFuncs::new()
        .on_add(move |o: Arc<K>| {
            let _ = t1.send(format!("add {}", o.name_any()));
        })
        .on_update(move |_old: Arc<K>, new: Arc<K>| {
            let _ = t2.send(format!("update {}", new.name_any()));
        })
        .on_delete(move |o: Arc<K>, _unknown| {
            let _ = t3.send(format!("delete {}", o.name_any()));
        });
    (h, rx)
}

/// Receives events until `done(all events so far)` holds, failing after `within`.
async fn recv_until(
    rx: &mut mpsc::UnboundedReceiver<Ev>,
    within: Duration,
    mut done: impl FnMut(&[Ev]) -> bool,
) -> Vec<Ev> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    while !done(&seen) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(ev)) => seen.push(ev),
            Ok(None) => panic!("handler channel closed; saw {seen:?}"),
            Err(_) => panic!(
                "timed out after {within:?}; saw {} events, last: {:?}",
                seen.len(),
                seen.last()
            ),
        }
    }
    seen
}

/// Waits (with a deadline) until the informer's counters satisfy `cond`.
async fn wait_stats<K>(
    informer: &Informer<K>,
    within: Duration,
    cond: impl FnMut(&kubewright_runtime::reflector::ReflectorStats) -> bool,
) where
    K: kubewright_core::Resource + Send + Sync + 'static,
{
    let mut rx = informer.subscribe_stats();
    tokio::time::timeout(within, rx.wait_for(cond))
        .await
        .unwrap_or_else(|_| panic!("timed out; stats: {:?}", informer.stats()))
        .unwrap();
}

/// The server's view of the labelled objects: name -> resourceVersion.
async fn server_state(api: &Api<ConfigMap>, selector: &str) -> BTreeMap<String, String> {
    api.list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| (o.name_any(), o.resource_version().unwrap().to_string()))
        .collect()
}

fn store_state(store: &Store<ConfigMap>) -> BTreeMap<String, String> {
    store
        .list()
        .iter()
        .map(|o| (o.name_any(), o.resource_version().unwrap().to_string()))
        .collect()
}

#[tokio::test]
async fn syncs_a_thousand_configmaps() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let run = unique();
    let names: Vec<String> = (0..1000).map(|i| format!("cm-{i:04}")).collect();
    create_all(&api, &names, &[(LABEL, &run)]).await;
    // Unlabelled neighbours that the informer must not pick up.
    create_all(&api, &["other-1".into(), "other-2".into()], &[]).await;

    let selector = format!("{LABEL}={run}");
    let informer = Informer::new(api.clone(), ReflectorConfig::default().labels(&selector));
    let (handler, mut rx) = recorder();
    let reg = informer.add_handler(handler);
    informer.start();
    tokio::time::timeout(Duration::from_secs(60), informer.wait_for_sync())
        .await
        .expect("sync within 60s");
    assert!(informer.has_synced());

    let store = informer.store();
    assert_eq!(store.len(), 1000);
    let keys: BTreeSet<ObjectKey> = store.keys().into_iter().collect();
    let expected: BTreeSet<ObjectKey> =
        names.iter().map(|n| ObjectKey::new(Some(&ns), n)).collect();
    assert_eq!(keys, expected);
    assert_eq!(store_state(&store), server_state(&api, &selector).await);
    // The handler got exactly one add per object.
    let adds = recv_until(&mut rx, Duration::from_secs(30), |s| s.len() == 1000).await;
    let added: BTreeSet<&str> = adds
        .iter()
        .map(|e| match e {
            Ev::Add { name, .. } => name.as_str(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(added.len(), 1000);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !reg.has_synced() {
        assert!(Instant::now() < deadline, "handler never reported synced");
        tokio::task::yield_now().await;
    }
    let stats = informer.stats();
    assert_eq!(stats.completed_lists(), 1);
    assert_eq!(stats.errors, 0);
    informer.shutdown().await;
}

#[tokio::test]
async fn updates_and_deletes_reach_handlers_in_order() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let run = unique();
    let informer = Informer::new(
        api.clone(),
        ReflectorConfig::default().labels(&format!("{LABEL}={run}")),
    );
    let (handler, mut rx) = recorder();
    informer.add_handler(handler);
    informer.start();
    assert!(informer.wait_for_sync().await);

    let names: Vec<String> = (0..10).map(|i| format!("obj-{i}")).collect();
    // Each object's writes are sequential; objects proceed concurrently.
    futures::stream::iter(names.iter().map(|n| {
        let api = api.clone();
        let run = run.clone();
        async move {
            api.create(&PostParams::default(), &cm(n, &[(LABEL, &run)], "0"))
                .await
                .unwrap();
            for v in 1..=5 {
                set_v(&api, n, &v.to_string()).await;
            }
            api.delete(n, &DeleteParams::default()).await.unwrap();
        }
    }))
    .buffer_unordered(10)
    .collect::<Vec<()>>()
    .await;

    let events = recv_until(&mut rx, Duration::from_secs(30), |s| {
        s.iter().filter(|e| matches!(e, Ev::Delete { .. })).count() == names.len()
    })
    .await;
    for n in &names {
        let mine: Vec<Ev> = events.iter().filter(|e| e.name() == n).cloned().collect();
        let mut expected = vec![Ev::Add {
            name: n.clone(),
            v: "0".into(),
        }];
        for v in 1..=5 {
            expected.push(Ev::Update {
                name: n.clone(),
                old_v: (v - 1).to_string(),
                new_v: v.to_string(),
            });
        }
        expected.push(Ev::Delete {
            name: n.clone(),
            v: "5".into(),
            unknown: false,
        });
        assert_eq!(mine, expected, "events of {n}");
    }
    assert!(informer.store().is_empty());
    informer.shutdown().await;
}

#[tokio::test]
async fn watch_resumes_across_server_timeouts_without_losing_or_repeating_events() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let run = unique();
    let selector = format!("{LABEL}={run}");
    // The server ends every watch after 1 s, mid-stream; the reflector must resume each
    // time from the last resourceVersion it saw.
    let informer = Informer::new(
        api.clone(),
        ReflectorConfig::default()
            .labels(&selector)
            .watch_timeout(Duration::from_secs(1)),
    );
    let (handler, mut rx) = recorder();
    informer.add_handler(handler);
    informer.start();
    assert!(informer.wait_for_sync().await);

    let names: Vec<String> = (0..8).map(|i| format!("w-{i}")).collect();
    create_all(&api, &names, &[(LABEL, &run)]).await;
    let watches_before = informer.stats().watches;
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = names
        .iter()
        .map(|n| {
            let api = api.clone();
            let n = n.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                // Pacing of the writes (not a wait for a condition): about 40 writes/s each.
                let mut pace = tokio::time::interval(Duration::from_millis(25));
                let mut v = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    pace.tick().await;
                    v += 1;
                    set_v(&api, &n, &v.to_string()).await;
                }
                (n, v)
            })
        })
        .collect();
    // Keep writing across at least four watch resumptions.
    wait_stats(&informer, Duration::from_secs(60), |s| {
        s.watches >= watches_before + 4
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let mut finals: HashMap<String, u32> = HashMap::new();
    for w in writers {
        let (n, v) = w.await.unwrap();
        finals.insert(n, v);
    }
    let total: u32 = finals.values().sum();
    let events = recv_until(&mut rx, Duration::from_secs(60), |s| {
        let mut last: HashMap<&str, u32> = HashMap::new();
        for e in s {
            if let Ev::Update { name, new_v, .. } = e {
                last.insert(name, new_v.parse().unwrap());
            }
        }
        finals
            .iter()
            .all(|(n, v)| *v == 0 || last.get(n.as_str()) == Some(v))
    })
    .await;
    for n in &names {
        let mine: Vec<&Ev> = events.iter().filter(|e| e.name() == n).collect();
        assert_eq!(
            mine[0],
            &Ev::Add {
                name: n.clone(),
                v: "0".into()
            }
        );
        // Every write exactly once, in order: no gap (lost event), no repeat.
        for (i, e) in mine[1..].iter().enumerate() {
            assert_eq!(
                *e,
                &Ev::Update {
                    name: n.clone(),
                    old_v: i.to_string(),
                    new_v: (i + 1).to_string()
                },
                "event {i} of {n}"
            );
        }
        assert_eq!(mine.len() as u32 - 1, finals[n]);
    }
    let stats = informer.stats();
    assert!(stats.watches >= watches_before + 4, "{stats:?}");
    assert_eq!(
        stats.completed_lists(),
        1,
        "resumption must not relist: {stats:?}"
    );
    assert_eq!(stats.expired, 0);
    assert_eq!(
        store_state(&informer.store()),
        server_state(&api, &selector).await
    );
    eprintln!(
        "{total} updates over {} watches",
        stats.watches - watches_before + 1
    );
    informer.shutdown().await;
}

/// A ListWatch whose watch requests wait at a gate the test controls: lets a test make
/// changes while the reflector is between two watches.
struct GatedApi {
    api: Api<ConfigMap>,
    open: watch::Receiver<bool>,
    waiting: Arc<watch::Sender<u64>>,
}

impl ListWatch<ConfigMap> for GatedApi {
    fn list<'a>(
        &'a self,
        lp: &'a ListParams,
    ) -> BoxFuture<'a, Result<ObjectList<ConfigMap>, ClientError>> {
        self.api.list(lp).boxed()
    }

    fn watch<'a>(
        &'a self,
        wp: &'a WatchParams,
        rv: &'a str,
    ) -> BoxFuture<'a, Result<WatchStream<ConfigMap>, ClientError>> {
        async move {
            self.waiting.send_modify(|n| *n += 1);
            let mut open = self.open.clone();
            let _ = open.wait_for(|o| *o).await.is_ok();
            Ok(self.api.watch(wp, rv).await?.boxed())
        }
        .boxed()
    }
}

#[tokio::test]
async fn forced_410_relists_and_store_matches_server_embedded_only() {
    if kubewright_testing::embedded_only("a 410 cannot be forced on a real cluster") {
        return;
    }
    let env = TestEnv::start().await;
    let Some(server) = env.server() else {
        unreachable!("embedded_only() returned false: the server is embedded")
    };
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let run = unique();
    let selector = format!("{LABEL}={run}");
    let names: Vec<String> = (0..20).map(|i| format!("r-{i:02}")).collect();
    create_all(&api, &names, &[(LABEL, &run)]).await;

    let (gate, open) = watch::channel(true);
    let waiting = Arc::new(watch::Sender::new(0u64));
    let informer = Informer::new(
        GatedApi {
            api: api.clone(),
            open,
            waiting: waiting.clone(),
        },
        ReflectorConfig::default()
            .labels(&selector)
            .watch_timeout(Duration::from_secs(1)),
    );
    let (handler, mut rx) = recorder();
    informer.add_handler(handler);
    informer.start();
    assert!(informer.wait_for_sync().await);
    recv_until(&mut rx, Duration::from_secs(10), |s| s.len() == 20).await;
    wait_stats(&informer, Duration::from_secs(10), |s| s.watches >= 1).await;

    // Hold the reflector between two watches.
    gate.send_replace(false);
    let mut w = waiting.subscribe();
    let before = *w.borrow_and_update();
    tokio::time::timeout(Duration::from_secs(10), w.wait_for(|n| *n > before))
        .await
        .expect("the watch did not end")
        .unwrap();

    // Changes the reflector cannot see as events.
    for n in &names[0..5] {
        api.delete(n, &DeleteParams::default()).await.unwrap();
    }
    for n in &names[5..10] {
        set_v(&api, n, "changed").await;
    }
    api.patch(
        &names[10],
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {LABEL: null}}})),
    )
    .await
    .unwrap();
    let added: Vec<String> = (0..5).map(|i| format!("new-{i}")).collect();
    create_all(&api, &added, &[(LABEL, &run)]).await;

    // Compact the history: resuming from the reflector's version now gets 410.
    server.compact();
    gate.send_replace(true);
    wait_stats(&informer, Duration::from_secs(30), |s| {
        s.expired >= 1 && s.completed_lists() >= 2
    })
    .await;

    // The relist's deltas, as the handler saw them.
    let events = recv_until(&mut rx, Duration::from_secs(10), |s| s.len() == 16).await;
    let mut deleted: Vec<&str> = Vec::new();
    let mut updated: Vec<&str> = Vec::new();
    let mut created: Vec<&str> = Vec::new();
    for e in &events {
        match e {
            Ev::Delete { name, v, unknown } => {
                assert!(
                    *unknown,
                    "{name}: a relist delete must be final_state_unknown"
                );
                assert_eq!(v, "0", "{name}: the last known state");
                deleted.push(name);
            }
            Ev::Update { name, old_v, new_v } => {
                assert_eq!((old_v.as_str(), new_v.as_str()), ("0", "changed"));
                updated.push(name);
            }
            Ev::Add { name, .. } => created.push(name),
        }
    }
    deleted.sort();
    updated.sort();
    created.sort();
    let expected_deleted: Vec<&str> = names[0..5]
        .iter()
        .chain(std::iter::once(&names[10]))
        .map(String::as_str)
        .collect();
    assert_eq!(deleted, expected_deleted);
    assert_eq!(
        updated,
        names[5..10].iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(
        created,
        added.iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(
        store_state(&informer.store()),
        server_state(&api, &selector).await
    );
    assert_eq!(informer.store().len(), 19);
    informer.shutdown().await;
}

#[tokio::test]
async fn indexer_queries_follow_changes_of_the_indexed_value() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let run = unique();
    let informer = Informer::new(
        api.clone(),
        ReflectorConfig::default().labels(&format!("{LABEL}={run}")),
    );
    informer
        .add_indexer("team", |o: &ConfigMap| {
            o.labels().get("team").cloned().into_iter().collect()
        })
        .unwrap();
    let (handler, mut rx) = recorder();
    informer.add_handler(handler);
    informer.start();
    assert!(informer.wait_for_sync().await);
    let store = informer.store();
    let team = |t: &str| -> Vec<String> {
        let mut v: Vec<String> = store
            .by_index("team", t)
            .unwrap()
            .iter()
            .map(|o| o.name_any())
            .collect();
        v.sort();
        v
    };

    for (n, t) in [("a", "red"), ("b", "red"), ("c", "blue")] {
        api.create(
            &PostParams::default(),
            &cm(n, &[(LABEL, &run), ("team", t)], "0"),
        )
        .await
        .unwrap();
    }
    recv_until(&mut rx, Duration::from_secs(10), |s| s.len() == 3).await;
    assert_eq!(team("red"), vec!["a", "b"]);
    assert_eq!(team("blue"), vec!["c"]);

    // a moves to blue.
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "blue"}}, "data": {"v": "1"}})),
    )
    .await
    .unwrap();
    recv_until(&mut rx, Duration::from_secs(10), |s| s.len() == 1).await;
    assert_eq!(team("red"), vec!["b"]);
    assert_eq!(team("blue"), vec!["a", "c"]);

    // b loses its team.
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": null}}})),
    )
    .await
    .unwrap();
    recv_until(&mut rx, Duration::from_secs(10), |s| s.len() == 1).await;
    assert!(team("red").is_empty());
    assert_eq!(store.index_values("team").unwrap(), vec!["blue"]);

    // c is deleted.
    api.delete("c", &DeleteParams::default()).await.unwrap();
    recv_until(&mut rx, Duration::from_secs(10), |s| s.len() == 1).await;
    assert_eq!(team("blue"), vec!["a"]);

    // An index added while running is built from the current contents, then maintained.
    informer
        .add_indexer("v", |o: &ConfigMap| vec![v_of(o)])
        .unwrap();
    let mut zero: Vec<String> = store
        .by_index("v", "0")
        .unwrap()
        .iter()
        .map(|o| o.name_any())
        .collect();
    zero.sort();
    assert_eq!(zero, vec!["b"]);
    set_v(&api, "b", "2").await;
    recv_until(&mut rx, Duration::from_secs(10), |s| s.len() == 1).await;
    assert!(store.by_index("v", "0").unwrap().is_empty());
    assert_eq!(store.by_index("v", "2").unwrap()[0].name_any(), "b");

    // The lister answers by namespace and selector from the same cache.
    let lister = informer.lister();
    let blue = kubewright_core::LabelSelector::parse("team=blue").unwrap();
    let got: Vec<String> = lister
        .namespace(&ns)
        .list_matching(&blue)
        .iter()
        .map(|o| o.name_any())
        .collect();
    assert_eq!(got, vec!["a"]);
    assert!(lister.namespace("elsewhere").list().is_empty());
    informer.shutdown().await;
}

#[tokio::test]
async fn factory_shares_one_informer_and_one_watch() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let run = unique();
    let selector = format!("{LABEL}={run}");
    let factory = SharedInformerFactory::new(env.client()).strip_managed_fields(true);
    let params = InformerParams::default().namespace(&ns).labels(&selector);

    // Two controllers ask for the same informer ...
    let a = factory.informer::<ConfigMap>(params.clone());
    let b = factory.informer::<ConfigMap>(params.clone());
    assert!(Arc::ptr_eq(&a, &b));
    // ... a third asks for a different one.
    let other =
        factory.informer::<ConfigMap>(params.clone().labels(&format!("{LABEL}={run}-other")));
    assert!(!Arc::ptr_eq(&a, &other));
    assert_eq!(factory.len(), 2);

    let (ha, mut rx_a) = recorder();
    let (hb, mut rx_b) = recorder();
    a.add_handler(ha);
    b.add_handler(hb);
    let watches_before = env.server().map(|s| s.watch_count("/configmaps"));
    factory.start();
    factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    // Both informers have their watch open.
    wait_stats(&a, Duration::from_secs(10), |s| s.watches >= 1).await;
    wait_stats(&other, Duration::from_secs(10), |s| s.watches >= 1).await;

    api.create(&PostParams::default(), &cm("shared", &[(LABEL, &run)], "0"))
        .await
        .unwrap();
    let want = |s: &[Ev]| s.len() == 1;
    assert_eq!(
        recv_until(&mut rx_a, Duration::from_secs(10), want).await[0].name(),
        "shared"
    );
    assert_eq!(
        recv_until(&mut rx_b, Duration::from_secs(10), want).await[0].name(),
        "shared"
    );
    let cached = a.store().get_by_key(&format!("{ns}/shared")).unwrap();
    assert!(cached.metadata.managed_fields.is_none());
    assert!(other.store().is_empty());

    if let (Some(server), Some(before)) = (env.server(), watches_before) {
        // One watch for the shared informer, one for the other: not one per controller.
        assert_eq!(server.watch_count("/configmaps") - before, 2);
    }
    factory.shutdown().await;
    assert!(a.is_stopped() && other.is_stopped());
    // Asking again after shutdown returns the same (stopped) informer.
    assert!(Arc::ptr_eq(&a, &factory.informer::<ConfigMap>(params)));
}

#[tokio::test]
async fn a_factory_on_a_dedicated_thread_runs_its_informers_and_handlers_there() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let run = unique();
    let selector = format!("{LABEL}={run}");
    let names: Vec<String> = (0..3).map(|i| format!("d{i}")).collect();
    create_all(&api, &names, &[(LABEL, &run)]).await;

    let factory = SharedInformerFactory::new(env.client())
        .threads(InformerThreads::Dedicated(std::num::NonZeroUsize::MIN));
    let informer =
        factory.informer::<ConfigMap>(InformerParams::default().namespace(&ns).labels(&selector));
    // Where each handler runs: an inline handler and a handler task.
    let (threads_tx, mut threads) = mpsc::unbounded_channel();
    informer.add_inline_handler(thread_recorder("inline", threads_tx.clone()));
    informer.add_handler(thread_recorder("task", threads_tx.clone()));
    let (h, mut events) = recorder();
    informer.add_handler(h);
    let runtime = Arc::new(std::sync::Mutex::new(None));
    let rt = runtime.clone();
    informer.add_inline_handler(HandlerFuncs::new().on_add(move |_| {
        *rt.lock().unwrap() = Some(tokio::runtime::Handle::current());
    }));
    factory.start();
    factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        recv_until(&mut events, Duration::from_secs(10), |s| s.len() == 3)
            .await
            .len(),
        3
    );
    set_v(&api, "d1", "changed").await;
    recv_until(
        &mut events,
        Duration::from_secs(10),
        |s| matches!(s.last(), Some(Ev::Update { name, .. }) if name == "d1"),
    )
    .await;
    // Three adds and one update, from each handler, all on the informers' thread.
    let mut seen = BTreeSet::new();
    while seen.len() < 8 {
        let (kind, name, thread) = tokio::time::timeout(Duration::from_secs(10), threads.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out; saw {seen:?}"))
            .unwrap();
        assert_eq!(thread, "kubewright-informers", "{kind} handler for {name}");
        seen.insert((kind, name));
    }
    assert!(seen.contains(&("inline", "d1 updated".to_string())));
    assert!(seen.contains(&("task", "d1 updated".to_string())));

    // Shutting down stops the informer and ends the thread's runtime: a task parked on
    // it is cancelled then.
    let handle = runtime.lock().unwrap().clone().unwrap();
    let parked = handle.spawn(std::future::pending::<()>());
    factory.shutdown().await;
    assert!(informer.is_stopped());
    let ended = tokio::time::timeout(Duration::from_secs(10), parked)
        .await
        .expect("the informers' runtime still runs");
    assert!(ended.is_err_and(|e| e.is_cancelled()));
}

/// Where a handler saw each add and update: (which handler, what, thread name).
type ThreadSeen = mpsc::UnboundedSender<(&'static str, String, String)>;

/// A handler reporting the thread it ran on for each add and update.
fn thread_recorder(kind: &'static str, tx: ThreadSeen) -> HandlerFuncs<ConfigMap> {
    let report = move |tx: &ThreadSeen, what: String| {
        let thread = std::thread::current()
            .name()
            .unwrap_or_default()
            .to_string();
        let _ = tx.send((kind, what, thread));
    };
    let t2 = tx.clone();
    HandlerFuncs::new()
        .on_add(move |o: Arc<ConfigMap>| report(&tx, o.name_any()))
        .on_update(move |_, o: Arc<ConfigMap>| report(&t2, format!("{} updated", o.name_any())))
}

/// By default a factory used from a multi-thread runtime runs its informers on threads
/// of its own; from a current-thread runtime, on the caller's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_factory_in_a_multi_thread_runtime_runs_its_informers_on_its_own_threads() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let run = unique();
    let (a, b) = (format!("{run}-a"), format!("{run}-b"));
    create_all(&api, &["a0".to_string()], &[(LABEL, &a)]).await;
    create_all(&api, &["b0".to_string()], &[(LABEL, &b)]).await;

    let factory = SharedInformerFactory::new(env.client());
    let (tx, mut seen) = mpsc::unbounded_channel();
    for run in [&a, &b] {
        let params = InformerParams::default()
            .namespace(&ns)
            .labels(&format!("{LABEL}={run}"));
        factory
            .informer::<ConfigMap>(params)
            .add_inline_handler(thread_recorder("inline", tx.clone()));
    }
    factory.start();
    factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    set_v(&api, "b0", "changed").await;
    let mut got = BTreeSet::new();
    while got.len() < 3 {
        let (_, what, thread) = tokio::time::timeout(Duration::from_secs(10), seen.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out; saw {got:?}"))
            .unwrap();
        assert_eq!(thread, "kubewright-informers", "handler for {what}");
        got.insert(what);
    }
    assert_eq!(
        got,
        BTreeSet::from(["a0".into(), "b0".into(), "b0 updated".into()])
    );
    factory.shutdown().await;
}

#[tokio::test]
async fn a_default_factory_in_a_current_thread_runtime_runs_its_informers_there() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let run = unique();
    create_all(&api, &["c0".to_string()], &[(LABEL, &run)]).await;
    let factory = SharedInformerFactory::new(env.client());
    let (tx, mut seen) = mpsc::unbounded_channel();
    factory
        .informer::<ConfigMap>(
            InformerParams::default()
                .namespace(&ns)
                .labels(&format!("{LABEL}={run}")),
        )
        .add_inline_handler(thread_recorder("inline", tx));
    factory.start();
    factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let (_, what, thread) = tokio::time::timeout(Duration::from_secs(10), seen.recv())
        .await
        .expect("the add arrives")
        .unwrap();
    assert_eq!(what, "c0");
    assert_eq!(thread, std::thread::current().name().unwrap_or_default());
    factory.shutdown().await;
}

#[tokio::test]
async fn streaming_list_metadata_and_dynamic_informers() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let run = unique();
    let selector = format!("{LABEL}={run}");
    let names: Vec<String> = (0..30).map(|i| format!("s-{i:02}")).collect();
    create_all(&api, &names, &[(LABEL, &run)]).await;

    // A streaming list: initial ADDED events, then the initial-events-end bookmark.
    let streaming = Informer::new(
        api.clone(),
        ReflectorConfig::default()
            .labels(&selector)
            .streaming_list(),
    );
    let (handler, mut rx) = recorder();
    streaming.add_handler(handler);
    streaming.start();
    assert!(streaming.wait_for_sync().await);
    assert_eq!(streaming.store().len(), 30);
    recv_until(&mut rx, Duration::from_secs(10), |s| s.len() == 30).await;
    let stats = streaming.stats();
    if env.is_embedded() {
        assert_eq!(stats.streaming_lists, 1, "{stats:?}");
        assert_eq!(stats.lists, 0, "{stats:?}");
        assert_eq!(stats.streaming_fallbacks, 0, "{stats:?}");
    } else {
        // A real server may have the WatchList feature off: then it falls back.
        assert_eq!(stats.completed_lists(), 1, "{stats:?}");
    }
    // The stream that carried the list keeps delivering changes.
    api.create(&PostParams::default(), &cm("late", &[(LABEL, &run)], "0"))
        .await
        .unwrap();
    let ev = recv_until(&mut rx, Duration::from_secs(10), |s| s.len() == 1).await;
    assert_eq!(
        ev[0],
        Ev::Add {
            name: "late".into(),
            v: "0".into()
        }
    );

    // Raw delta stream of a streaming reflector: 31 adds, then Replaced.
    let mut deltas = Reflector::new(
        api.clone(),
        ReflectorConfig::default()
            .labels(&selector)
            .streaming_list(),
    )
    .into_stream();
    let mut adds = 0;
    loop {
        let d = tokio::time::timeout(Duration::from_secs(10), deltas.next())
            .await
            .expect("delta within 10s")
            .expect("stream open")
            .expect("no error");
        match d {
            Delta::Added(_) => adds += 1,
            Delta::Replaced { resource_version } => {
                assert!(!resource_version.is_empty());
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(adds, 31);
    drop(deltas);

    let factory = SharedInformerFactory::new(env.client());
    let ar = ApiResource::erase::<ConfigMap>(&());
    let params = InformerParams::default().namespace(&ns).labels(&selector);
    let meta = factory.metadata_informer(&ar, params.clone());
    let dynamic = factory.dynamic_informer(&ar, params.clone());
    assert_eq!(factory.len(), 2);
    factory.start();
    factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();

    let meta_objs = meta.store().list();
    assert_eq!(meta_objs.len(), 31);
    assert!(meta_objs.iter().all(|o| o.labels()[LABEL] == run));
    let meta_names: BTreeSet<String> = meta_objs.iter().map(|o| o.name_any()).collect();
    assert!(meta_names.contains("late") && meta_names.contains("s-00"));

    let dyn_objs = dynamic.store().list();
    assert_eq!(dyn_objs.len(), 31);
    assert!(dyn_objs.iter().all(|o| o.data["data"]["v"] == "0"));

    // Both follow changes.
    let (dh, mut drx) = name_events();
    dynamic.add_handler(dh);
    let (mh, mut mrx) = name_events();
    meta.add_handler(mh);
    set_v(&api, "s-00", "9").await;
    api.delete("s-01", &DeleteParams::default()).await.unwrap();
    for rx in [&mut drx, &mut mrx] {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = BTreeSet::new();
        while !(seen.contains("update s-00") && seen.contains("delete s-01")) {
            let ev = tokio::time::timeout_at(deadline, rx.recv())
                .await
                .expect("change within 10s")
                .unwrap();
            seen.insert(ev);
        }
    }
    let server = server_state(&api, &selector).await;
    let rvs = |objs: Vec<(String, String)>| objs.into_iter().collect::<BTreeMap<_, _>>();
    assert_eq!(
        rvs(dynamic
            .store()
            .list()
            .iter()
            .map(|o| (o.name_any(), o.resource_version().unwrap().to_string()))
            .collect()),
        server
    );
    assert_eq!(
        rvs(meta
            .store()
            .list()
            .iter()
            .map(|o| (o.name_any(), o.resource_version().unwrap().to_string()))
            .collect()),
        server
    );
    let s00 = dynamic.store().get_by_key(&format!("{ns}/s-00")).unwrap();
    assert_eq!(s00.data["data"]["v"], "9");
    factory.shutdown().await;
    streaming.shutdown().await;
}
