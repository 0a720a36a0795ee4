//! Client integration tests: run against the embedded server, or a real cluster when
//! KUBEWRIGHT_TEST_KUBECONFIG is set.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubewright_client::{Api, DeleteResult};
use kubewright_core::{
    ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams,
    PostParams, ResourceExt, Scope, WatchEvent, WatchParams,
};
use kubewright_testing::TestEnv;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

fn cm(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
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
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

#[tokio::test]
async fn configmap_crud() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let created = api
        .create(
            &PostParams::default(),
            &cm("one", &[("t", "crud")], &[("a", "1")]),
        )
        .await
        .unwrap();
    assert!(created.uid().is_some());
    assert!(created.resource_version().is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    let got = api.get("one").await.unwrap();
    assert_eq!(got.data.as_ref().unwrap()["a"], "1");
    assert!(api.get_opt("missing").await.unwrap().is_none());

    let mut changed = got.clone();
    changed
        .data
        .as_mut()
        .unwrap()
        .insert("b".into(), "2".into());
    let replaced = api
        .replace("one", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_ne!(replaced.resource_version(), got.resource_version());
    assert_eq!(replaced.data.as_ref().unwrap().len(), 2);

    let list = api
        .list(&ListParams::default().labels("t=crud"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert!(list.resource_version().is_some());

    match api.delete("one", &DeleteParams::default()).await.unwrap() {
        DeleteResult::Status(s) => assert_eq!(s.status, "Success"),
        DeleteResult::Object(o) => panic!("expected a Status, got {o:?}"),
    }
    assert!(api.get("one").await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn secret_and_deployment_crud_with_scale() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let secrets: Api<Secret> = Api::namespaced(env.client(), &ns);
    let mut data = BTreeMap::new();
    data.insert(
        "password".to_string(),
        k8s_openapi::ByteString(b"hunter2".to_vec()),
    );
    let s = Secret {
        metadata: ObjectMeta {
            name: Some("creds".into()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &s).await.unwrap();
    let got = secrets.get("creds").await.unwrap();
    assert_eq!(got.data.unwrap()["password"].0, b"hunter2");
    assert_eq!(got.type_.as_deref(), Some("Opaque"));

    let deploys: Api<Deployment> = Api::namespaced(env.client(), &ns);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}
        }
    }))
    .unwrap();
    let created = deploys.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let scale = deploys.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(2));
    assert_eq!(
        scale.status.as_ref().unwrap().selector.as_deref(),
        Some("app=web")
    );
    // The Deployment controller of a real cluster writes status (and with it the
    // resourceVersion) at any time: re-read and retry on 409 Conflict, as callers must.
    let mut scale2 = scale.clone();
    loop {
        scale2.spec.as_mut().unwrap().replicas = Some(5);
        match deploys
            .replace_scale("web", &PostParams::default(), &scale2)
            .await
        {
            Ok(_) => break,
            Err(e) if e.is_conflict() => scale2 = deploys.get_scale("web").await.unwrap(),
            Err(e) => panic!("replace_scale: {e}"),
        }
    }
    let after = deploys.get("web").await.unwrap();
    assert_eq!(after.spec.replicas, Some(5));
    assert_eq!(
        after.metadata.generation,
        Some(2),
        "a spec change bumps generation"
    );
    // A status write does not bump generation and does not change spec. (The answer to
    // the write is checked: a real Deployment controller rewrites status right after.)
    let after = deploys
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 5, "readyReplicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(after.metadata.generation, Some(2));
    assert_eq!(after.spec.replicas, Some(5));
    assert_eq!(
        after.status.as_ref().and_then(|s| s.ready_replicas),
        Some(3)
    );
}

#[tokio::test]
async fn all_four_patch_kinds() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<Deployment> = Api::namespaced(env.client(), &ns);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "p"}},
            "template": {"metadata": {"labels": {"app": "p"}}, "spec": {"containers": [
                {"name": "main", "image": "img:1"}, {"name": "side", "image": "side:1"}
            ]}}
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &d).await.unwrap();

    // JSON merge patch: null deletes, lists replaced whole.
    let p = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": null, "b": "2"}}})),
        )
        .await
        .unwrap();
    assert_eq!(p.labels().get("b").map(String::as_str), Some("2"));
    assert!(!p.labels().contains_key("a"));

    // JSON patch.
    let p = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Json(json!([{"op": "replace", "path": "/spec/replicas", "value": 3}])),
        )
        .await
        .unwrap();
    assert_eq!(p.spec.replicas, Some(3));
    // A failed test op is 422.
    let err = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Json(json!([{"op": "test", "path": "/spec/replicas", "value": 99}])),
        )
        .await
        .unwrap_err();
    assert!(err.is_invalid(), "{err}");

    // Strategic merge: containers merge by name.
    let p = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "side:2"}]}}}})),
        )
        .await
        .unwrap();
    let containers = p.spec.template.spec.as_ref().unwrap().containers.clone();
    assert_eq!(containers.len(), 2);
    assert_eq!(
        containers
            .iter()
            .find(|c| c.name == "side")
            .unwrap()
            .image
            .as_deref(),
        Some("side:2")
    );

    // Server-side apply: replicas was last set by an Update (the JSON patch), so a first
    // apply with another value conflicts with that manager too; owner-a forces.
    let applied = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p"}, "spec": {"replicas": 4}});
    let err = api
        .patch(
            "p",
            &PatchParams::apply("owner-a"),
            &Patch::Apply(applied.clone()),
        )
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let p = api
        .patch(
            "p",
            &PatchParams::apply("owner-a").force(),
            &Patch::Apply(applied.clone()),
        )
        .await
        .unwrap();
    assert_eq!(p.spec.replicas, Some(4));
    let mf = p.metadata.managed_fields.clone().unwrap_or_default();
    assert!(mf.iter().any(
        |m| m.manager.as_deref() == Some("owner-a") && m.operation.as_deref() == Some("Apply")
    ));
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p"}, "spec": {"replicas": 7}});
    let err = api
        .patch(
            "p",
            &PatchParams::apply("owner-b"),
            &Patch::Apply(other.clone()),
        )
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let causes = err
        .status()
        .and_then(|s| s.details.clone())
        .map(|d| d.causes)
        .unwrap_or_default();
    assert!(
        causes
            .iter()
            .any(|c| c.reason == "FieldManagerConflict" && c.field == ".spec.replicas"),
        "{causes:?}"
    );
    // Re-applying the same configuration is accepted and changes nothing of ours: no
    // new generation, owner-a's managedFields entry (and its timestamp) unchanged. The
    // resourceVersion is not compared: a real Deployment controller writes status.
    let again = api
        .patch("p", &PatchParams::apply("owner-a"), &Patch::Apply(applied))
        .await
        .unwrap();
    assert_eq!(again.metadata.generation, p.metadata.generation);
    let owner_a = |d: &Deployment| {
        d.metadata
            .managed_fields
            .iter()
            .flatten()
            .find(|m| m.manager.as_deref() == Some("owner-a"))
            .cloned()
    };
    assert!(owner_a(&p).is_some());
    assert_eq!(owner_a(&again), owner_a(&p));
    // A second manager conflicts on owner-a's field, unless forced.
    let p = api
        .patch(
            "p",
            &PatchParams::apply("owner-b").force(),
            &Patch::Apply(other),
        )
        .await
        .unwrap();
    assert_eq!(p.spec.replicas, Some(7));
}

#[tokio::test]
async fn optimistic_concurrency_conflict() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let first = api
        .create(&PostParams::default(), &cm("occ", &[], &[("v", "1")]))
        .await
        .unwrap();
    let mut a = first.clone();
    a.data.as_mut().unwrap().insert("v".into(), "2".into());
    api.replace("occ", &PostParams::default(), &a)
        .await
        .unwrap();
    let mut stale = first.clone();
    stale.data.as_mut().unwrap().insert("v".into(), "3".into());
    let err = api
        .replace("occ", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(api.get("occ").await.unwrap().data.unwrap()["v"], "2");
}

#[tokio::test]
async fn pagination_with_limit() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    for i in 0..7 {
        api.create(
            &PostParams::default(),
            &cm(&format!("page-{i}"), &[("set", "pages")], &[]),
        )
        .await
        .unwrap();
    }
    let lp = ListParams::default().labels("set=pages").limit(3);
    let p1 = api.list(&lp).await.unwrap();
    assert_eq!(p1.items.len(), 3);
    let tok = p1.continue_token().expect("a continue token").to_string();
    // Changes after the first page do not show in later pages (consistent snapshot).
    api.create(
        &PostParams::default(),
        &cm("page-zz", &[("set", "pages")], &[]),
    )
    .await
    .unwrap();
    let p2 = api.list(&lp.clone().continue_token(&tok)).await.unwrap();
    assert_eq!(p2.items.len(), 3);
    let p3 = api
        .list(&lp.clone().continue_token(p2.continue_token().unwrap()))
        .await
        .unwrap();
    assert_eq!(p3.items.len(), 1);
    assert!(p3.continue_token().is_none());
    let mut names: Vec<String> = p1
        .iter()
        .chain(p2.iter())
        .chain(p3.iter())
        .map(|c| c.name_any())
        .collect();
    names.sort();
    assert_eq!(
        names,
        (0..7).map(|i| format!("page-{i}")).collect::<Vec<_>>()
    );
    let all = api
        .list_all(&ListParams::default().labels("set=pages").limit(2))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 8);
    let bad = api
        .list(&lp.clone().continue_token("not-a-token!"))
        .await
        .unwrap_err();
    assert!(bad.is_bad_request() || bad.is_gone(), "{bad}");
}

#[tokio::test]
async fn watch_from_resource_version() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let created = api
        .create(
            &PostParams::default(),
            &cm("w", &[("w", "1")], &[("n", "0")]),
        )
        .await
        .unwrap();
    let rv = created.resource_version().unwrap().to_string();
    let wp = WatchParams::default().labels("w=1").timeout(20);
    let stream = api.watch(&wp, &rv).await.unwrap();
    let mut stream = Box::pin(stream);
    let mut changed = created.clone();
    changed
        .data
        .as_mut()
        .unwrap()
        .insert("n".into(), "1".into());
    api.replace("w", &PostParams::default(), &changed)
        .await
        .unwrap();
    api.delete("w", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    let deadline = tokio::time::sleep(Duration::from_secs(15));
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            ev = stream.next() => match ev {
                Some(Ok(WatchEvent::Modified(o))) => seen.push(("MODIFIED", o.data.unwrap_or_default().get("n").cloned())),
                Some(Ok(WatchEvent::Deleted(_))) => { seen.push(("DELETED", None)); break; }
                Some(Ok(WatchEvent::Bookmark(_))) => {}
                Some(Ok(other)) => panic!("unexpected event {other:?}"),
                Some(Err(e)) => panic!("watch error: {e}"),
                None => break,
            },
            _ = &mut deadline => panic!("no DELETED event within 15s; saw {seen:?}"),
        }
    }
    assert_eq!(
        seen,
        vec![("MODIFIED", Some("1".to_string())), ("DELETED", None)]
    );
}

#[tokio::test]
async fn metadata_only_list() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    api.create(
        &PostParams::default(),
        &cm("meta", &[("m", "1")], &[("big", "x")]),
    )
    .await
    .unwrap();
    let list = api
        .list_metadata(&ListParams::default().labels("m=1"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("meta"));
    let one = api.get_metadata("meta").await.unwrap();
    assert_eq!(one.types.unwrap().kind, "PartialObjectMetadata");
}

#[tokio::test]
async fn server_side_tables_in_json_even_over_protobuf() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns)
        .with_content_type(kubewright_client::ContentType::Protobuf);
    for name in ["t-a", "t-b"] {
        api.create(
            &PostParams::default(),
            &cm(name, &[("t", "1")], &[("k", "v")]),
        )
        .await
        .unwrap();
    }
    let table = api
        .list_table(&ListParams::default().labels("t=1"))
        .await
        .unwrap();
    assert_eq!(
        (table.api_version.as_str(), table.kind.as_str()),
        ("meta.k8s.io/v1", "Table")
    );
    // ConfigMaps print Name, Data and Age (kube-apiserver's printer).
    let (name, data) = (table.column("Name").unwrap(), table.column("Data").unwrap());
    assert!(table.column("Age").is_some());
    let mut names: Vec<_> = table.rows.iter().map(|r| r.cells[name].clone()).collect();
    names.sort_by_key(|v| v.to_string());
    assert_eq!(names, [json!("t-a"), json!("t-b")]);
    assert!(table.rows.iter().all(|r| r.cells[data] == json!(1)));
    // Each row carries the object's metadata by default.
    let obj = table.rows[0].object.as_ref().unwrap();
    assert_eq!(obj["kind"], "PartialObjectMetadata");
    assert!(
        !table
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default()
            .is_empty()
    );

    let one = api.get_table("t-a").await.unwrap();
    assert_eq!(one.rows.len(), 1);
    assert_eq!(one.rows[0].cells[name], json!("t-a"));
    assert!(api.get_table("nope").await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn errors_map_to_helpers() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    assert!(api.get("nope").await.unwrap_err().is_not_found());
    api.create(&PostParams::default(), &cm("dup", &[], &[]))
        .await
        .unwrap();
    let e = api
        .create(&PostParams::default(), &cm("dup", &[], &[]))
        .await
        .unwrap_err();
    assert!(e.is_already_exists() && !e.is_conflict(), "{e}");
    let e = api
        .create(&PostParams::default(), &cm("Not_Valid", &[], &[]))
        .await
        .unwrap_err();
    assert!(e.is_invalid(), "{e}");
    let causes = e
        .status()
        .and_then(|s| s.details.clone())
        .map(|d| d.causes)
        .unwrap_or_default();
    assert!(
        causes.iter().any(|c| c.field == "metadata.name"),
        "{causes:?}"
    );
    let other_ns: Api<ConfigMap> = Api::namespaced(env.client(), &env.unique_name("no-such-ns"));
    assert!(
        other_ns
            .create(&PostParams::default(), &cm("x", &[], &[]))
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn dynamic_api_on_a_crd() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let group = format!("{}.kubewright.test", env.unique_name("t"));
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wg"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}}, "required": ["size"]}
                }}}
            }]
        }
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    // Wait for Established (watch, with a deadline).
    let name = format!("widgets.{group}");
    let wp = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(30);
    let established = tokio::time::timeout(Duration::from_secs(30), async {
        let mut s = Box::pin(crds.watch(&wp, "").await.unwrap());
        while let Some(Ok(ev)) = s.next().await {
            if let WatchEvent::Added(c) | WatchEvent::Modified(c) = ev {
                let ok = c
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if ok {
                    return true;
                }
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(established, "CRD not Established in time");

    let ar = ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Widget".into(),
        plural: "widgets".into(),
        scope: Scope::Namespaced,
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(env.client(), &ns, &ar);
    // A freshly Established CRD may take a moment to serve on a real cluster: retry briefly.
    let obj = DynamicObject::new("w1", &ar).data(json!({"spec": {"size": 3}}));
    let mut created = None;
    for _ in 0..50 {
        match widgets.create(&PostParams::default(), &obj).await {
            Ok(o) => {
                created = Some(o);
                break;
            }
            Err(e) if e.is_not_found() => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("create widget: {e}"),
        }
    }
    let created = created.expect("the widget endpoint never appeared");
    assert_eq!(created.data["spec"]["size"], 3);
    let invalid = DynamicObject::new("w2", &ar).data(json!({"spec": {"size": 0}}));
    let err = widgets
        .create(&PostParams::default(), &invalid)
        .await
        .unwrap_err();
    assert!(err.is_invalid(), "{err}");
    let list = widgets.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    crds.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn json_patch_test_of_a_missing_path_against_null_passes() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    api.create(&PostParams::default(), &cm("jp", &[], &[("a", "1")]))
        .await
        .unwrap();
    let p = Patch::Json(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/f"]}
    ]));
    let got = api.patch("jp", &PatchParams::default(), &p).await.unwrap();
    assert_eq!(got.finalizers(), ["example.com/f"]);
    let p = Patch::Json(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["other"]}
    ]));
    assert!(
        api.patch("jp", &PatchParams::default(), &p)
            .await
            .unwrap_err()
            .is_invalid()
    );
    api.patch(
        "jp",
        &PatchParams::default(),
        &Patch::Json(json!([{"op": "remove", "path": "/metadata/finalizers"}])),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn without_managed_fields_decodes_objects_without_field_ownership() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let lean = api.clone().without_managed_fields();
    assert!(lean.skips_managed_fields() && !api.skips_managed_fields());

    // Every write records managedFields on the server; the lean Api never decodes them.
    let created = lean
        .create(
            &PostParams::default(),
            &cm("lean", &[("t", "lean")], &[("a", "1")]),
        )
        .await
        .unwrap();
    assert!(created.metadata.managed_fields.is_none());
    assert!(
        api.get("lean")
            .await
            .unwrap()
            .metadata
            .managed_fields
            .is_some()
    );
    let got = lean.get("lean").await.unwrap();
    assert!(got.metadata.managed_fields.is_none());
    assert_eq!(got.data.as_ref().unwrap()["a"], "1");

    // A read-modify-write through the lean Api keeps the server's ownership records.
    let mut changed = got.clone();
    changed
        .data
        .as_mut()
        .unwrap()
        .insert("b".into(), "2".into());
    let replaced = lean
        .replace("lean", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert!(replaced.metadata.managed_fields.is_none());
    let full = api.get("lean").await.unwrap();
    assert!(!full.metadata.managed_fields.unwrap().is_empty());

    let lp = ListParams::default().labels("t=lean");
    let list = lean.list(&lp).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert!(list.items[0].metadata.managed_fields.is_none());
    let metas = lean.list_metadata(&lp).await.unwrap();
    assert!(metas.items[0].metadata.managed_fields.is_none());
    assert!(
        api.list_metadata(&lp).await.unwrap().items[0]
            .metadata
            .managed_fields
            .is_some()
    );

    let rv = list.metadata.resource_version.clone().unwrap();
    let mut events = Box::pin(
        lean.watch(&WatchParams::default().labels("t=lean"), &rv)
            .await
            .unwrap(),
    );
    lean.patch(
        "lean",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"c": "3"}})),
    )
    .await
    .unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match ev {
        WatchEvent::Modified(cm) => {
            assert!(cm.metadata.managed_fields.is_none());
            assert_eq!(cm.data.unwrap()["c"], "3");
        }
        other => panic!("unexpected {other:?}"),
    }
    match lean.delete("lean", &DeleteParams::default()).await.unwrap() {
        DeleteResult::Object(cm) => assert!(cm.metadata.managed_fields.is_none()),
        DeleteResult::Status(_) => {}
    }
}
