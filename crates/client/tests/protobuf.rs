//! Kubernetes protobuf on the wire (`ContentType::Protobuf`): built-in kinds are read,
//! listed, watched and written with protobuf responses decoded straight into the
//! k8s-openapi types; errors arrive as protobuf Status; custom resources stay JSON. Runs
//! against the embedded server, or a real cluster when KUBEWRIGHT_TEST_KUBECONFIG is set.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kubewright_client::{Api, ContentType, Error, RequestObserver};
use kubewright_core::{
    ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams, Scope, WatchEvent,
    WatchParams,
};
use kubewright_testing::TestEnv;
use serde_json::json;
use std::sync::{Arc, Mutex};

/// A client that records the Content-Type of every response.
fn recording(env: &TestEnv) -> (kubewright_client::Client, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let observer: RequestObserver = Arc::new(move |info| {
        s.lock()
            .unwrap()
            .push(info.content_type.unwrap_or("").to_string());
    });
    (env.client().with_observer(observer), seen)
}

fn take(seen: &Mutex<Vec<String>>) -> Vec<String> {
    std::mem::take(&mut *seen.lock().unwrap())
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "pb"}, "annotations": {"a": "é"}},
        "spec": {
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}},
                "ports": [{"name": "http", "containerPort": 8080}]}],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn built_in_kinds_travel_as_protobuf() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let (client, seen) = recording(&env);
    let pb: Api<Pod> =
        Api::namespaced(client.clone(), &ns).with_content_type(ContentType::Protobuf);
    let json: Api<Pod> = Api::namespaced(client, &ns);
    assert_eq!(pb.content_type(), ContentType::Protobuf);
    assert_eq!(json.content_type(), ContentType::Json);

    take(&seen);
    let created = pb.create(&PostParams::default(), &pod("p1")).await.unwrap();
    assert!(
        take(&seen)
            .iter()
            .all(|c| c.starts_with("application/vnd.kubernetes.protobuf"))
    );
    assert_eq!(created.metadata.name.as_deref(), Some("p1"));
    assert!(created.metadata.creation_timestamp.is_some());
    assert!(created.metadata.managed_fields.is_some());

    // The same object read both ways decodes to the same value.
    let via_pb = pb.get("p1").await.unwrap();
    assert!(
        take(&seen)
            .iter()
            .all(|c| c.starts_with("application/vnd.kubernetes.protobuf"))
    );
    let via_json = json.get("p1").await.unwrap();
    assert!(
        take(&seen)
            .iter()
            .all(|c| c.starts_with("application/json"))
    );
    assert_eq!(via_pb, via_json);
    let spec = via_pb.spec.as_ref().unwrap();
    assert_eq!(
        spec.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()["cpu"]
            .0,
        "100m"
    );
    assert_eq!(via_pb.metadata.annotations.as_ref().unwrap()["a"], "é");

    // Lists, with and without managedFields.
    pb.create(&PostParams::default(), &pod("p2")).await.unwrap();
    let lp = ListParams::default().labels("app=pb");
    let list = pb.list(&lp).await.unwrap();
    assert_eq!(list.items.len(), 2);
    assert!(list.metadata.resource_version.is_some());
    let list_json = json.list(&lp).await.unwrap();
    assert_eq!(list.items, list_json.items);
    let lean = pb.clone().without_managed_fields().list(&lp).await.unwrap();
    assert!(
        lean.items
            .iter()
            .all(|p| p.metadata.managed_fields.is_none())
    );
    take(&seen);

    // Writes answer in protobuf too.
    let patched = pb
        .patch(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.as_ref().unwrap()["x"], "y");
    assert!(
        take(&seen)
            .iter()
            .all(|c| c.starts_with("application/vnd.kubernetes.protobuf"))
    );

    // Errors are protobuf Status objects, decoded into Error::Api.
    match pb.get("missing").await {
        Err(Error::Api(s)) => {
            assert_eq!(s.code, 404);
            assert_eq!(s.reason, "NotFound");
            assert!(s.message.contains("missing"), "{}", s.message);
        }
        other => panic!("expected a 404, got {other:?}"),
    }
    match pb.create(&PostParams::default(), &pod("p1")).await {
        Err(Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists")),
        other => panic!("expected a 409, got {other:?}"),
    }
}

#[tokio::test]
async fn watches_and_streaming_lists_in_protobuf() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let (client, seen) = recording(&env);
    let pb: Api<ConfigMap> = Api::namespaced(client, &ns).with_content_type(ContentType::Protobuf);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("w1".into());
    cm.metadata.labels = Some([("t".to_string(), "pb".to_string())].into());
    cm.data = Some([("k".to_string(), "v".to_string())].into());
    pb.create(&PostParams::default(), &cm).await.unwrap();
    take(&seen);

    // A streaming list: ADDED for what exists, then the initial-events-end bookmark.
    let wp = WatchParams {
        label_selector: Some("t=pb".into()),
        bookmarks: true,
        send_initial_events: true,
        timeout: Some(30),
        ..Default::default()
    };
    let mut stream = Box::pin(pb.watch(&wp, "").await.unwrap());
    assert!(take(&seen)[0].starts_with("application/vnd.kubernetes.protobuf"));
    let mut added = Vec::new();
    let rv = loop {
        match stream.next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => added.push(o.metadata.name.unwrap()),
            WatchEvent::Bookmark(b) if b.is_initial_events_end() => {
                break b.metadata.resource_version;
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(added, ["w1"]);
    assert!(!rv.is_empty());

    // Changes arrive as protobuf frames.
    cm.metadata.name = Some("w2".into());
    pb.create(&PostParams::default(), &cm).await.unwrap();
    pb.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    pb.delete("w2", &Default::default()).await.unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        match stream.next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => kinds.push(format!("ADDED {}", o.metadata.name.unwrap())),
            WatchEvent::Modified(o) => {
                assert_eq!(o.data.as_ref().unwrap()["k"], "2");
                kinds.push(format!("MODIFIED {}", o.metadata.name.unwrap()));
            }
            WatchEvent::Deleted(o) => kinds.push(format!("DELETED {}", o.metadata.name.unwrap())),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(s) => panic!("watch error {s:?}"),
        }
    }
    assert_eq!(kinds, ["ADDED w2", "MODIFIED w1", "DELETED w2"]);
}

#[tokio::test]
async fn kinds_without_protobuf_stay_json() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let (client, seen) = recording(&env);
    // Deployments have protobuf: asked for and received.
    let deploys: Api<Deployment> =
        Api::namespaced(client.clone(), &ns).with_content_type(ContentType::Protobuf);
    assert_eq!(deploys.content_type(), ContentType::Protobuf);
    deploys.list(&Default::default()).await.unwrap();
    assert!(take(&seen)[0].starts_with("application/vnd.kubernetes.protobuf"));
    // A dynamic ConfigMap reads protobuf into a DynamicObject.
    let ar = ApiResource::from_gvk_with_plural(
        &kubewright_core::GroupVersionKind::gvk("", "v1", "ConfigMap"),
        "configmaps",
        Scope::Namespaced,
    );
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ar).with_content_type(ContentType::Protobuf);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("d1".into());
    cm.data = Some([("k".to_string(), "v".to_string())].into());
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    take(&seen);
    let obj = dynamic.get("d1").await.unwrap();
    assert!(take(&seen)[0].starts_with("application/vnd.kubernetes.protobuf"));
    assert_eq!(obj.data["data"]["k"], "v");
    assert_eq!(obj.types.as_ref().unwrap().kind, "ConfigMap");
    // A kind the schema does not know is never asked for in protobuf.
    let unknown = ApiResource::from_gvk_with_plural(
        &kubewright_core::GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
        Scope::Namespaced,
    );
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client, &ns, &unknown).with_content_type(ContentType::Protobuf);
    assert_eq!(widgets.content_type(), ContentType::Json);
}

#[tokio::test]
async fn metadata_only_requests_travel_as_protobuf() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let (client, seen) = recording(&env);
    let pb: Api<ConfigMap> =
        Api::namespaced(client.clone(), &ns).with_content_type(ContentType::Protobuf);
    let json: Api<ConfigMap> = Api::namespaced(client, &ns);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("m1".into());
    cm.metadata.labels = Some([("t".to_string(), "meta".to_string())].into());
    cm.metadata.annotations = Some([("note".to_string(), "é".to_string())].into());
    cm.data = Some([("k".to_string(), "v".to_string())].into());
    json.create(&PostParams::default(), &cm).await.unwrap();
    take(&seen);
    let is_pb = |seen: &Mutex<Vec<String>>| {
        let cts = take(seen);
        assert!(
            !cts.is_empty()
                && cts
                    .iter()
                    .all(|c| c.starts_with("application/vnd.kubernetes.protobuf")),
            "{cts:?}"
        );
    };

    // One object and a list: the same metadata as the JSON answers.
    let one = pb.get_metadata("m1").await.unwrap();
    is_pb(&seen);
    assert_eq!(
        one.metadata,
        json.get_metadata("m1").await.unwrap().metadata
    );
    assert_eq!(one.types.as_ref().unwrap().kind, "PartialObjectMetadata");
    assert_eq!(one.metadata.annotations.as_ref().unwrap()["note"], "é");
    assert!(one.metadata.managed_fields.is_some());
    take(&seen);
    let lp = ListParams::default().labels("t=meta");
    let list = pb.list_metadata(&lp).await.unwrap();
    is_pb(&seen);
    assert!(list.metadata.resource_version.is_some());
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata, one.metadata);
    let lean = pb
        .clone()
        .without_managed_fields()
        .list_metadata(&lp)
        .await
        .unwrap();
    assert!(lean.items[0].metadata.managed_fields.is_none());
    assert_eq!(lean.items[0].metadata.labels, one.metadata.labels);
    take(&seen);

    // A streaming list of metadata, then a change.
    let wp = WatchParams {
        label_selector: Some("t=meta".into()),
        bookmarks: true,
        send_initial_events: true,
        timeout: Some(30),
        ..Default::default()
    };
    let mut stream = Box::pin(pb.watch_metadata(&wp, "").await.unwrap());
    is_pb(&seen);
    let mut added = Vec::new();
    loop {
        match stream.next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => added.push(o.metadata.name.unwrap()),
            WatchEvent::Bookmark(b) if b.is_initial_events_end() => break,
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(added, ["m1"]);
    json.patch(
        "m1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await
    .unwrap();
    loop {
        match stream.next().await.unwrap().unwrap() {
            WatchEvent::Modified(o) => {
                assert_eq!(o.metadata.labels.as_ref().unwrap()["x"], "y");
                break;
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    // JSON clients keep asking for JSON.
    take(&seen);
    json.list_metadata(&lp).await.unwrap();
    assert!(take(&seen)[0].starts_with("application/json"));
}

/// The dynamic resource allocation kinds (resource.k8s.io/v1) travel as protobuf too,
/// defaulted by the server and decoded the same both ways.
#[tokio::test]
async fn resource_claims_and_slices_travel_as_protobuf() {
    use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let (client, seen) = recording(&env);
    let claims: Api<ResourceClaim> =
        Api::namespaced(client.clone(), &ns).with_content_type(ContentType::Protobuf);
    let claim: ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "gpu"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}
    }))
    .unwrap();
    take(&seen);
    let created = claims.create(&PostParams::default(), &claim).await.unwrap();
    assert!(
        take(&seen)
            .iter()
            .all(|c| c.starts_with("application/vnd.kubernetes.protobuf"))
    );
    // The server's defaults: one device, counted exactly.
    let spec = created.spec.clone().unwrap();
    let exactly = spec.devices.unwrap().requests.unwrap()[0]
        .exactly
        .clone()
        .unwrap();
    assert_eq!(exactly.allocation_mode.as_deref(), Some("ExactCount"));
    assert_eq!(exactly.count, Some(1));
    let json: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns);
    assert_eq!(
        claims.get("gpu").await.unwrap(),
        json.get("gpu").await.unwrap()
    );

    // Its spec is immutable: a typed 422 naming the field.
    let err = claims
        .patch(
            "gpu",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "other.example.com"}}]}}})),
        )
        .await
        .unwrap_err();
    match err {
        Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(s.message.contains("field is immutable"), "{}", s.message);
        }
        other => panic!("expected a 422, got {other:?}"),
    }

    // A cluster-scoped ResourceSlice, found by its node.
    let slices: Api<ResourceSlice> = Api::all(client).with_content_type(ContentType::Protobuf);
    let name = format!("{ns}-node");
    let slice: ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"driver": "gpu.example.com", "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "A100"}},
                "capacity": {"memory": {"value": "40Gi"}}}]}
    }))
    .unwrap();
    let created = slices.create(&PostParams::default(), &slice).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let found = slices
        .list(&ListParams::default().fields(&format!("spec.nodeName={name}")))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    assert_eq!(
        found.items[0].spec.devices.as_ref().unwrap()[0].name,
        "gpu-0"
    );
    slices.delete(&name, &Default::default()).await.unwrap();
}

/// A pod's claim from a template: kube-controller-manager's resourceclaim controller makes
/// the ResourceClaim (owned by the pod, deleted with it) and names it in the pod's status.
#[tokio::test]
async fn a_pod_gets_its_resource_claims_from_templates() {
    use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let client = env.client();
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), &ns);
    let claims: Api<ResourceClaim> =
        Api::namespaced(client.clone(), &ns).with_content_type(ContentType::Protobuf);
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let pp = PostParams::default();
    let template: ResourceClaimTemplate = serde_json::from_value(json!({
        "metadata": {"name": "gpu"},
        "spec": {"metadata": {"labels": {"from": "template"}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
    }))
    .unwrap();
    templates.create(&pp, &template).await.unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p1"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]}
    }))
    .unwrap();
    let created = pods.create(&pp, &pod).await.unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();

    // Watch the pod until its status names the claim.
    let wp = WatchParams::default()
        .fields("metadata.name=p1")
        .timeout(30);
    let mut events = Box::pin(pods.watch(&wp, &rv).await.unwrap());
    let claim_name = tokio::time::timeout(std::time::Duration::from_secs(35), async {
        while let Some(e) = events.next().await {
            if let Ok(WatchEvent::Modified(p)) = e
                && let Some(s) = p
                    .status
                    .and_then(|s| s.resource_claim_statuses)
                    .and_then(|s| s.into_iter().find(|s| s.name == "gpu"))
            {
                return s.resource_claim_name;
            }
        }
        None
    })
    .await
    .unwrap()
    .expect("the pod's status names its claim");
    assert!(claim_name.starts_with("p1-gpu-"), "{claim_name}");

    let claim = claims.get(&claim_name).await.unwrap();
    let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Pod", "p1"));
    assert_eq!(owner.uid, created.metadata.uid.clone().unwrap());
    assert_eq!(owner.controller, Some(true));
    assert_eq!(
        claim.metadata.annotations.as_ref().unwrap()["resource.kubernetes.io/pod-claim-name"],
        "gpu"
    );
    assert_eq!(claim.metadata.labels.as_ref().unwrap()["from"], "template");
    let spec = claim.spec.unwrap();
    let exactly = spec.devices.unwrap().requests.unwrap()[0]
        .exactly
        .clone()
        .unwrap();
    assert_eq!(exactly.device_class_name, "gpu.example.com");
    assert_eq!(exactly.count, Some(1));
}
