//! Discovery and RestMapper against the embedded server or a real cluster.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use kubewright_client::discovery::Discovery;
use kubewright_core::{GroupVersionKind, Scope};
use kubewright_testing::TestEnv;

#[tokio::test]
async fn discovery_and_rest_mapper() {
    let env = TestEnv::start().await;
    let client = env.client();
    let d = Discovery::run(&client).await.unwrap();
    assert!(d.has_group("") && d.has_group("apps"));
    let apps = d.get("apps").unwrap();
    assert_eq!(apps.preferred_version(), Some("v1"));
    let deploy = apps
        .preferred_resources()
        .iter()
        .find(|r| r.plural == "deployments")
        .unwrap();
    assert_eq!(deploy.kind, "Deployment");
    assert_eq!(deploy.caps.scope, Scope::Namespaced);
    assert!(deploy.caps.subresources.iter().any(|s| s == "scale"));
    assert!(deploy.caps.subresources.iter().any(|s| s == "status"));

    let m = d.rest_mapper();
    for name in [
        "deploy",
        "deployments",
        "deployment",
        "Deployment",
        "deployments.apps",
        "deployments.v1.apps",
    ] {
        let r = m
            .resolve(name)
            .unwrap_or_else(|| panic!("{name} did not resolve"));
        assert_eq!(
            (r.group.as_str(), r.plural.as_str()),
            ("apps", "deployments"),
            "{name}"
        );
    }
    assert_eq!(m.resolve("po").unwrap().plural, "pods");
    assert_eq!(m.resolve("ns").unwrap().caps.scope, Scope::Cluster);
    // `events` exists in the core group and in events.k8s.io: the core group wins, like kubectl.
    assert_eq!(m.resolve("events").unwrap().group, "");
    assert_eq!(
        m.resolve("events.events.k8s.io").unwrap().group,
        "events.k8s.io"
    );
    assert!(m.resolve("no-such-thing").is_none());
    assert_eq!(
        m.kind_for("", "v1", "configmaps"),
        Some(GroupVersionKind::gvk("", "v1", "ConfigMap"))
    );
    let cm = m
        .resource_for(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
        .unwrap();
    assert_eq!(cm.plural, "configmaps");
    assert!(m.category("all").iter().any(|r| r.plural == "pods"));
    let ar = m
        .preferred_for_kind("apps", "Deployment")
        .unwrap()
        .api_resource();
    assert_eq!(ar.api_version, "apps/v1");

    // The on-disk cache round-trips.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("discovery.json");
    let a = Discovery::cached(&client, &file, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    assert!(file.exists());
    let b = Discovery::cached(&client, &file, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        a.rest_mapper().resolve("deploy"),
        b.rest_mapper().resolve("deploy")
    );
}
