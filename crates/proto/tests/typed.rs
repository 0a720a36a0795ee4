#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

//! The serde deserializer over protobuf gives the same typed objects as decoding the
//! same body to JSON first, for kubectl's captured bodies and for objects encoded here.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, Pod, ResourceQuota, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewright_core::{ObjectList, Status, WatchEvent};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::fmt::Debug;

fn same<K: DeserializeOwned + PartialEq + Debug>(pb: &[u8]) {
    let via_json: K = serde_json::from_value(kubewright_proto::decode(pb).unwrap()).unwrap();
    let direct: K = kubewright_proto::from_slice(pb).unwrap();
    assert_eq!(direct, via_json);
}

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../src/testdata/", $name, ".pb")).as_slice()
    };
}

#[test]
fn kubectl_bodies_decode_as_through_json() {
    same::<ConfigMap>(fixture!("configmap"));
    same::<Secret>(fixture!("secret"));
    same::<Secret>(fixture!("secretreg"));
    same::<Deployment>(fixture!("deployment"));
    same::<Namespace>(fixture!("namespace"));
    same::<ServiceAccount>(fixture!("serviceaccount"));
    same::<Job>(fixture!("job"));
    same::<CronJob>(fixture!("cronjob"));
    same::<Service>(fixture!("service"));
    same::<Service>(fixture!("nodeport"));
    same::<Role>(fixture!("role"));
    same::<RoleBinding>(fixture!("rolebinding"));
    same::<ClusterRole>(fixture!("clusterrole"));
    same::<ClusterRoleBinding>(fixture!("clusterrolebinding"));
    same::<Ingress>(fixture!("ingress"));
    same::<PodDisruptionBudget>(fixture!("pdb"));
    same::<PriorityClass>(fixture!("priorityclass"));
    same::<ResourceQuota>(fixture!("quota"));
}

/// A pod with most of what a real one carries: volumes (inlined sources), probes
/// (inlined handlers), quantities, int-or-strings, times, managedFields, owner refs.
fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "default", "uid": "0b6e5cb6-7d36-4d4c-9f4e-2d4f3c1f7a10",
            "resourceVersion": "12345", "generation": 1,
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "5d9c7f6b8"},
            "annotations": {"kubernetes.io/psp": "restricted", "empty": ""},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9c7f6b8",
                "uid": "7a1c2e7e-1111-2222-3333-444455556666", "controller": true, "blockOwnerDeletion": true}],
            "finalizers": ["example.com/x"],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                "apiVersion": "v1", "time": "2026-12-01T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]
        },
        "spec": {
            "volumes": [
                {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "cfg", "configMap": {"name": "web", "defaultMode": 420, "items": [{"key": "a", "path": "a.conf"}]}},
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}], "defaultMode": 420}}
            ],
            "containers": [{
                "name": "web", "image": "nginx:1.27", "args": ["-g", "daemon off;"],
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "A", "value": "1"}, {"name": "EMPTY"},
                        {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "0"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "cfg", "mountPath": "/etc/web", "readOnly": true}],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                    "initialDelaySeconds": 3, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                "readinessProbe": {"tcpSocket": {"port": 8080}, "timeoutSeconds": 1, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 3},
                "securityContext": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": "node-1",
            "securityContext": {"runAsNonRoot": true, "fsGroup": 2000},
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-12-01T10:00:05Z"}],
            "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}], "podIP": "10.244.1.7", "podIPs": [{"ip": "10.244.1.7"}],
            "startTime": "2026-12-01T10:00:00Z", "qosClass": "Burstable",
            "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0, "image": "nginx:1.27",
                "imageID": "docker.io/library/nginx@sha256:abc", "containerID": "containerd://abc", "started": true,
                "state": {"running": {"startedAt": "2026-12-01T10:00:02Z"}}, "lastState": {}}]
        }
    })
}

#[test]
fn a_realistic_pod_decodes_as_through_json() {
    let body = kubewright_proto::encode(&pod("web-1")).unwrap();
    same::<Pod>(&body);
    let direct: Pod = kubewright_proto::from_slice(&body).unwrap();
    // And as the JSON object itself.
    let from_json: Pod = serde_json::from_value(pod("web-1")).unwrap();
    assert_eq!(direct, from_json);
    let c = &direct.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        c.resources.as_ref().unwrap().limits.as_ref().unwrap()["cpu"].0,
        "500m"
    );
    assert_eq!(direct.metadata.managed_fields.as_ref().unwrap().len(), 1);
}

#[test]
fn skipping_wrappers_never_see_managed_fields() {
    #[derive(serde::Deserialize)]
    struct Meta {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    }
    let body = kubewright_proto::encode(&pod("web-1")).unwrap();
    let m: Meta = kubewright_proto::from_slice(&body).unwrap();
    assert_eq!(m.metadata.name.as_deref(), Some("web-1"));
}

#[test]
fn lists_decode_into_object_lists() {
    let list = json!({"apiVersion": "v1", "kind": "PodList",
        "metadata": {"resourceVersion": "99", "continue": "abc", "remainingItemCount": 5},
        "items": [pod("a"), pod("b"), pod("c")]});
    let body = kubewright_proto::encode(&list).unwrap();
    let l: ObjectList<Pod> = kubewright_proto::from_slice(&body).unwrap();
    assert_eq!(l.items.len(), 3);
    assert_eq!(l.metadata.resource_version.as_deref(), Some("99"));
    assert_eq!(l.metadata.continue_.as_deref(), Some("abc"));
    assert_eq!(l.metadata.remaining_item_count, Some(5));
    assert_eq!(l.items[1].metadata.name.as_deref(), Some("b"));
    let want: Pod = serde_json::from_value(pod("c")).unwrap();
    assert_eq!(l.items[2].spec, want.spec);
    let empty =
        kubewright_proto::encode(&json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}}))
            .unwrap();
    let l: ObjectList<Pod> = kubewright_proto::from_slice(&empty).unwrap();
    assert!(l.items.is_empty());
}

#[test]
fn watch_frames_bookmarks_and_errors() {
    let frame = kubewright_proto::watch::encode_frame(
        "MODIFIED",
        &kubewright_proto::encode(&pod("a")).unwrap(),
    );
    let ev: WatchEvent<Pod> = kubewright_proto::watch::from_frame(&frame[4..]).unwrap();
    assert!(matches!(ev, WatchEvent::Modified(p) if p.metadata.name.as_deref() == Some("a")));

    let bm = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"resourceVersion": "42",
        "annotations": {"k8s.io/initial-events-end": "true"}}});
    let frame =
        kubewright_proto::watch::encode_frame("BOOKMARK", &kubewright_proto::encode(&bm).unwrap());
    let ev: WatchEvent<Pod> = kubewright_proto::watch::from_frame(&frame[4..]).unwrap();
    assert!(
        matches!(&ev, WatchEvent::Bookmark(b) if b.is_initial_events_end() && b.metadata.resource_version == "42")
    );

    let st = json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": "too old resource version: 1 (3)", "reason": "Expired", "code": 410});
    let frame =
        kubewright_proto::watch::encode_frame("ERROR", &kubewright_proto::encode(&st).unwrap());
    let ev: WatchEvent<Pod> = kubewright_proto::watch::from_frame(&frame[4..]).unwrap();
    assert!(matches!(ev, WatchEvent::Error(s) if s.is_gone() && s.message.contains("too old")));
    let s: Status = kubewright_proto::from_slice(&kubewright_proto::encode(&st).unwrap()).unwrap();
    assert_eq!(s.code, 410);
}

#[test]
fn malformed_bodies_are_errors_not_panics() {
    let good = kubewright_proto::encode(&pod("a")).unwrap();
    assert!(
        kubewright_proto::from_slice::<Pod>(b"{}")
            .unwrap_err()
            .to_string()
            .contains("prefix")
    );
    // Every truncation and many single-byte corruptions: an error or a value, never a panic.
    for n in 0..good.len() {
        let _ = kubewright_proto::from_slice::<Pod>(&good[..n]);
    }
    for i in 4..good.len() {
        for b in [0x00, 0x02, 0x7f, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[i] = b;
            let _ = kubewright_proto::from_slice::<Pod>(&bad);
        }
    }
    let err = kubewright_proto::from_slice::<Pod>(&good[..good.len() - 3]).unwrap_err();
    assert!(err.to_string().contains("invalid protobuf body"), "{err}");
    // An unknown kind names itself.
    let cr = kubewright_proto::write::envelope("example.com/v1", "Widget", &[]);
    let err = kubewright_proto::from_slice::<Value>(&cr).unwrap_err();
    assert!(err.to_string().contains("Widget"), "{err}");
    // The envelope may name protobuf as its content type, nothing else; both decoders agree.
    let mut typed = kubewright_proto::write::envelope("v1", "ConfigMap", &[]);
    kubewright_proto::write::ld(4, kubewright_proto::MEDIA_TYPE.as_bytes(), &mut typed);
    assert!(kubewright_proto::from_slice::<ConfigMap>(&typed).is_ok());
    assert!(kubewright_proto::decode(&typed).is_ok());
    let mut json = kubewright_proto::write::envelope("v1", "ConfigMap", br#"{"data":{}}"#);
    kubewright_proto::write::ld(4, b"application/json", &mut json);
    let err = kubewright_proto::from_slice::<ConfigMap>(&json).unwrap_err();
    assert!(err.to_string().contains("content type"), "{err}");
    assert!(kubewright_proto::decode(&json).is_err());
}

#[test]
fn unions_and_slice_wrappers_decode_as_through_json() {
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
            "type": "object",
            "properties": {
                "spec": {"type": "object", "additionalProperties": false,
                    "properties": {
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "port": {"x-kubernetes-int-or-string": true},
                        "default": {"type": "string", "default": "x", "enum": ["x", "y"]}
                    },
                    "required": ["tags"]},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}}}]}});
    let body = kubewright_proto::encode(&crd).unwrap();
    same::<CustomResourceDefinition>(&body);
    let direct: CustomResourceDefinition = kubewright_proto::from_slice(&body).unwrap();
    let from_json: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    assert_eq!(direct, from_json);

    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "metadata": {}, "spec": {"user": "alice", "groups": ["g"],
            "extra": {"scopes": ["a", "b"], "empty": []},
            "resourceAttributes": {"verb": "get", "resource": "pods"}}});
    let body = kubewright_proto::encode(&sar).unwrap();
    same::<SubjectAccessReview>(&body);
    let direct: SubjectAccessReview = kubewright_proto::from_slice(&body).unwrap();
    assert_eq!(direct.spec.extra.as_ref().unwrap()["scopes"], ["a", "b"]);
}

#[test]
fn a_message_written_twice_is_merged() {
    use kubewright_proto::write::{envelope, ld};
    // ConfigMap{metadata = 1: {name = 1}, metadata = 1: {labels = 11}, data = 2: {k: v}}.
    let mut meta1 = Vec::new();
    ld(1, b"a", &mut meta1);
    let mut label = Vec::new();
    ld(1, b"app", &mut label);
    ld(2, b"web", &mut label);
    let mut meta2 = Vec::new();
    ld(11, &label, &mut meta2);
    let mut entry = Vec::new();
    ld(1, b"k", &mut entry);
    ld(2, b"v", &mut entry);
    let mut raw = Vec::new();
    ld(1, &meta1, &mut raw);
    ld(2, &entry, &mut raw);
    ld(1, &meta2, &mut raw);
    let body = envelope("v1", "ConfigMap", &raw);
    same::<ConfigMap>(&body);
    let cm: ConfigMap = kubewright_proto::from_slice(&body).unwrap();
    assert_eq!(cm.metadata.name.as_deref(), Some("a"));
    assert_eq!(cm.metadata.labels.as_ref().unwrap()["app"], "web");
    assert_eq!(cm.data.as_ref().unwrap()["k"], "v");
    // The metadata alone merges the same way.
    let meta: ObjectMeta = kubewright_proto::metadata_from_raw("v1", "ConfigMap", &raw).unwrap();
    assert_eq!(meta, cm.metadata);
}

#[test]
fn an_absent_inlined_struct_is_its_zero_value() {
    use kubewright_proto::write::{envelope, ld};
    // Pod{spec = 2: {containers = 2: {name = 1: "c"}, ephemeralContainers = 34: {}}}: the
    // ephemeral container has no EphemeralContainerCommon (field 1), which Go reads as
    // the zero struct, so its required `name` is "" (found by fuzzing: the encoder
    // always writes the inlined struct, and the round trip must agree).
    let mut container = Vec::new();
    ld(1, b"c", &mut container);
    let mut spec = Vec::new();
    ld(2, &container, &mut spec);
    ld(34, &[], &mut spec);
    let mut raw = Vec::new();
    ld(2, &spec, &mut raw);
    let body = envelope("v1", "Pod", &raw);
    let value = kubewright_proto::decode(&body).unwrap();
    assert_eq!(value["spec"]["ephemeralContainers"], json!([{"name": ""}]));
    same::<Pod>(&body);
    // And it survives a round trip through the encoder unchanged.
    let again = kubewright_proto::encode(&value).unwrap();
    assert_eq!(kubewright_proto::decode(&again).unwrap(), value);
}

#[test]
fn metadata_alone_is_the_objects_metadata() {
    let body = kubewright_proto::encode(&pod("web-1")).unwrap();
    let whole: Pod = kubewright_proto::from_slice(&body).unwrap();
    let raw = unknown_raw(&body);
    let meta: ObjectMeta = kubewright_proto::metadata_from_raw("v1", "Pod", raw).unwrap();
    assert_eq!(meta, whole.metadata);
    // Without managedFields, and without any metadata at all.
    let stripped = kubewright_proto::strip_managed_fields(raw).unwrap();
    let meta: ObjectMeta = kubewright_proto::metadata_from_raw("v1", "Pod", &stripped).unwrap();
    assert!(meta.managed_fields.is_none() && meta.labels == whole.metadata.labels);
    let empty: ObjectMeta = kubewright_proto::metadata_from_raw("v1", "Pod", &[]).unwrap();
    assert_eq!(empty, ObjectMeta::default());
    // Kinds without a schema, lists and truncated messages are errors.
    assert!(kubewright_proto::metadata_from_raw::<ObjectMeta>("v1", "Nope", raw).is_err());
    assert!(kubewright_proto::metadata_from_raw::<ObjectMeta>("v1", "PodList", raw).is_err());
    assert!(
        kubewright_proto::metadata_from_raw::<ObjectMeta>("v1", "Pod", &raw[..raw.len() / 2])
            .is_err()
    );
}

/// The `raw` (field 2) of the `runtime.Unknown` of a body.
fn unknown_raw(body: &[u8]) -> &[u8] {
    let mut rest = &body[4..];
    loop {
        let key = rest[0];
        let (len, n) = varint(&rest[1..]);
        let (value, tail) = rest[1 + n..].split_at(len);
        if key == (2 << 3 | 2) {
            return value;
        }
        rest = tail;
    }
}

fn varint(b: &[u8]) -> (usize, usize) {
    let mut v = 0usize;
    for (i, byte) in b.iter().enumerate() {
        v |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    panic!("truncated varint");
}

#[test]
fn partial_object_metadata_of_any_kind() {
    use kubewright_core::PartialObjectMetadata;
    // kube-apiserver answers metadata-only requests with meta.k8s.io/v1 kinds, whatever
    // the objects' own kind (custom resources too).
    let meta = |name: &str| {
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {"name": name, "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                "labels": {"app": "web"}, "creationTimestamp": "2026-12-02T06:00:00Z",
                "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget",
                    "name": "w", "uid": "u-0", "controller": true}],
                "managedFields": [{"manager": "m", "operation": "Apply",
                    "apiVersion": "example.com/v1", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {}}}]}})
    };
    let body = kubewright_proto::encode(&meta("a")).unwrap();
    assert_eq!(kubewright_proto::decode(&body).unwrap(), meta("a"));
    same::<PartialObjectMetadata>(&body);
    let one: PartialObjectMetadata = kubewright_proto::from_slice(&body).unwrap();
    assert_eq!(one.types.as_ref().unwrap().kind, "PartialObjectMetadata");
    assert_eq!(one.metadata.name.as_deref(), Some("a"));
    assert_eq!(
        one.metadata.owner_references.as_ref().unwrap()[0].kind,
        "Widget"
    );

    let list = json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
        "metadata": {"resourceVersion": "9", "continue": "c"}, "items": [meta("a"), meta("b")]});
    let body = kubewright_proto::encode(&list).unwrap();
    let l: ObjectList<PartialObjectMetadata> = kubewright_proto::from_slice(&body).unwrap();
    assert_eq!(l.metadata.resource_version.as_deref(), Some("9"));
    let names: Vec<_> = l
        .items
        .iter()
        .map(|i| i.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    // Items of a protobuf list carry no apiVersion and kind of their own.
    assert_eq!(l.items[1].metadata, one_named(&meta("b")).metadata);

    let frame = kubewright_proto::watch::encode_frame(
        "ADDED",
        &kubewright_proto::encode(&meta("c")).unwrap(),
    );
    let ev: WatchEvent<PartialObjectMetadata> =
        kubewright_proto::watch::from_frame(&frame[4..]).unwrap();
    assert!(matches!(ev, WatchEvent::Added(m) if m.metadata.name.as_deref() == Some("c")));
    // Other meta kinds have no list form.
    assert!(!kubewright_proto::supports("meta.k8s.io/v1", "StatusList"));
    assert!(kubewright_proto::supports(
        "meta.k8s.io/v1",
        "PartialObjectMetadataList"
    ));
}

fn one_named(v: &Value) -> kubewright_core::PartialObjectMetadata {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn embedded_json_of_every_shape_decodes_as_through_json() {
    use k8s_openapi::api::apps::v1::ControllerRevision;
    let data = json!({"words": ["two", {"other": 5}], "name": "n", "list": [1, "two", [3], {"four": 4}, null, false],
        "spec": {"replicas": 3, "ratio": 0.25, "offset": -7, "big": 18446744073709551615u64,
        "on": true, "none": null, "name": "w\u{e9}b", "list": [1, "two", [3], {"four": 4}, null, false],
        "empty": {}, "nested": {"a": {"b": {"c": []}}}}});
    let cr = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "r1", "namespace": "default"}, "revision": 2, "data": data});
    let body = kubewright_proto::encode(&cr).unwrap();
    same::<ControllerRevision>(&body);
    let direct: ControllerRevision = kubewright_proto::from_slice(&body).unwrap();
    assert_eq!(direct.data.0, data);

    // A typed target reads the embedded JSON's members, options and sequences.
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Spec {
        replicas: i32,
        ratio: f64,
        offset: i64,
        big: u64,
        on: bool,
        none: Option<String>,
        name: String,
        empty: std::collections::BTreeMap<String, i32>,
        nested: Value,
    }
    #[derive(serde::Deserialize, Debug, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Word {
        Two,
        Other(i64),
    }
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Name(String);
    #[derive(serde::Deserialize, Debug, PartialEq)]
    #[serde(untagged)]
    enum Item {
        Num(i64),
        Word(Word),
        List(Vec<i64>),
        Map(std::collections::BTreeMap<String, i64>),
        Nothing(Option<bool>),
    }
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Data {
        spec: Spec,
        #[serde(default)]
        words: Vec<Word>,
        #[serde(default)]
        name: Option<Name>,
        #[serde(default)]
        list: Vec<Item>,
    }
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Revision {
        revision: i64,
        data: Data,
    }
    let typed: Revision = kubewright_proto::from_slice(&body).unwrap();
    let via_json: Revision = serde_json::from_value(cr).unwrap();
    assert_eq!(typed, via_json);
    assert_eq!(typed.data.spec.name, "w\u{e9}b");
    assert_eq!(typed.data.words, [Word::Two, Word::Other(5)]);
    assert_eq!(typed.data.name, Some(Name("n".into())));
    assert_eq!(typed.data.list.len(), 6);

    // A type mismatch inside the embedded JSON is an error, not a panic.
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Wrong {
        data: std::collections::BTreeMap<String, Vec<i32>>,
    }
    assert!(kubewright_proto::from_slice::<Wrong>(&body).is_err());
}
