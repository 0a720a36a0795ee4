//! Event recorder integration tests: run against the embedded server, or a real cluster
//! when KUBEWRIGHT_TEST_KUBECONFIG is set. Each test uses its own namespace and only
//! looks at Events about its own objects.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kubewright_client::{Api, Client, Config};
use kubewright_core::{ListParams, ObjectMeta, PostParams};
use kubewright_runtime::events::{
    Event, EventRecorder, EventRecorderConfig, EventType, Reporter, object_reference,
};
use kubewright_testing::TestEnv;
use std::time::Duration;

const CONTROLLER: &str = "kubewright.test/events";

async fn config_map(client: &Client, ns: &str, name: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

/// Our Events about `regarding` in `ns`.
async fn events_about(client: &Client, ns: &str, regarding: &ObjectReference) -> Vec<K8sEvent> {
    let api: Api<K8sEvent> = Api::namespaced(client.clone(), ns);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reporting_controller.as_deref() == Some(CONTROLLER)
                && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == regarding.uid.as_deref()
        })
        .collect()
}

#[tokio::test]
async fn identical_events_become_one_series() {
    let env = TestEnv::start().await;
    let client = env.client();
    let ns = env.namespace().await;
    let cm = config_map(&client, &ns, "series-target").await;
    let regarding = object_reference(&cm);
    let recorder = EventRecorder::new(client.clone(), Reporter::new(CONTROLLER, "test-1"));

    let n = 10;
    for _ in 0..n {
        assert!(recorder.publish(
            &regarding,
            Event::new(EventType::Normal, "Synced", "Reconcile").note("config map is up to date"),
        ));
    }
    assert!(recorder.publish(
        &regarding,
        Event::new(EventType::Warning, "SyncFailed", "Reconcile").note("something broke"),
    ));
    recorder.shutdown().await;
    // After shutdown nothing is accepted.
    assert!(!recorder.publish(
        &regarding,
        Event::new(EventType::Normal, "Late", "Reconcile")
    ));

    let stats = recorder.stats();
    println!("{stats:?}");
    assert_eq!(stats.queued, n + 1);
    assert_eq!(stats.created, 2);
    assert_eq!(stats.aggregated, n - 1);
    assert!(stats.series_updates >= 1);
    assert_eq!(stats.failed, 0);
    assert_eq!(stats.dropped_closed, 1);

    let events = events_about(&client, &ns, &regarding).await;
    assert_eq!(events.len(), 2, "{events:#?}");
    let synced = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("Synced"))
        .unwrap();
    let series = synced.series.as_ref().expect("a series");
    assert!(series.count >= 2);
    assert_eq!(series.count, n as i32);
    assert!(series.last_observed_time >= synced.event_time.clone().unwrap());
    assert_eq!(synced.type_.as_deref(), Some("Normal"));
    assert_eq!(synced.action.as_deref(), Some("Reconcile"));
    assert_eq!(synced.note.as_deref(), Some("config map is up to date"));
    assert_eq!(synced.reporting_instance.as_deref(), Some("test-1"));
    assert_eq!(synced.metadata.namespace.as_deref(), Some(ns.as_str()));
    assert!(
        synced
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("series-target.")
    );
    let regarding_back = synced.regarding.as_ref().unwrap();
    assert_eq!(regarding_back.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(regarding_back.name.as_deref(), Some("series-target"));

    let failed = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("SyncFailed"))
        .unwrap();
    assert!(failed.series.is_none());
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
}

#[tokio::test]
async fn long_notes_are_truncated_and_related_objects_kept() {
    let env = TestEnv::start().await;
    let client = env.client();
    let ns = env.namespace().await;
    let cm = config_map(&client, &ns, "note-target").await;
    let other = config_map(&client, &ns, "note-related").await;
    let regarding = object_reference(&cm);
    let recorder = EventRecorder::new(client.clone(), Reporter::new(CONTROLLER, "test-2"));
    assert!(
        recorder.publish(
            &regarding,
            Event::new(EventType::Normal, "Copied", "Copy")
                .note("x".repeat(5000))
                .related(object_reference(&other)),
        )
    );
    recorder.shutdown().await;
    assert_eq!(recorder.stats().failed, 0);
    let events = events_about(&client, &ns, &regarding).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].note.as_deref().map(str::len), Some(1024));
    assert_eq!(
        events[0].related.as_ref().and_then(|r| r.name.as_deref()),
        Some("note-related")
    );
}

#[tokio::test]
async fn spam_filter_drops_and_counts_bursts() {
    let env = TestEnv::start().await;
    let client = env.client();
    let ns = env.namespace().await;
    let noisy = config_map(&client, &ns, "noisy").await;
    let quiet = config_map(&client, &ns, "quiet").await;
    let recorder = EventRecorder::new(client.clone(), Reporter::new(CONTROLLER, "test-3"));
    let noisy_ref = object_reference(&noisy);
    let accepted = (0..40)
        .filter(|i| {
            recorder.publish(
                &noisy_ref,
                Event::new(EventType::Normal, format!("Reason{i}"), "Reconcile"),
            )
        })
        .count();
    // Another object has its own budget.
    assert!(recorder.publish(
        &object_reference(&quiet),
        Event::new(EventType::Normal, "Hello", "Reconcile")
    ));
    recorder.shutdown().await;
    let stats = recorder.stats();
    println!("{stats:?}");
    assert_eq!(accepted, 25);
    assert_eq!(stats.dropped_spam, 15);
    assert_eq!(stats.created, 26);
    assert_eq!(stats.failed, 0);
    assert_eq!(events_about(&client, &ns, &noisy_ref).await.len(), 25);
}

#[tokio::test]
async fn publish_never_blocks_when_the_queue_is_full() {
    // Nothing listens on port 1: every write fails, so the writer is stuck retrying the
    // first event and the tiny queue stays full.
    let client = Client::new(Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    let capacity = 4usize;
    let recorder = EventRecorder::with_config(
        client,
        Reporter::new(CONTROLLER, "test-4"),
        EventRecorderConfig {
            queue_capacity: capacity,
            retry_delay: Duration::from_secs(1),
            shutdown_timeout: Duration::from_millis(500),
            ..Default::default()
        },
    );
    let total = 1000usize;
    // A hang guard, not a timing assertion.
    let returned = tokio::time::timeout(Duration::from_secs(60), async {
        let mut returned = 0usize;
        for i in 0..total {
            let regarding = ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("ConfigMap".into()),
                name: Some(format!("cm-{i}")),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{i}")),
                ..Default::default()
            };
            recorder.publish(&regarding, Event::new(EventType::Normal, "Tick", "Test"));
            returned += 1;
        }
        returned
    })
    .await
    .expect("publish blocked");
    assert_eq!(returned, total);
    let stats = recorder.stats();
    println!("{stats:?}");
    assert_eq!(stats.queued + stats.dropped_queue_full, total as u64);
    // The queue holds `capacity` events; the writer may hold one more in flight.
    assert!(stats.queued <= capacity as u64 + 1, "{stats:?}");
    assert!(
        stats.dropped_queue_full >= (total - capacity - 1) as u64,
        "{stats:?}"
    );
    // Shutdown is bounded even though nothing can be written.
    tokio::time::timeout(Duration::from_secs(30), recorder.shutdown())
        .await
        .expect("shutdown is bounded");
    assert_eq!(stats.created, 0);
}
