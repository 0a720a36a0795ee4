//! The first operator's test (docs/first-operator.md, "Testing it"): the same body on the
//! embedded API server and, with KUBEWRIGHT_TEST_KUBECONFIG, on a real cluster.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use k8s_openapi::api::core::v1::ConfigMap;
use kubewright::core::{DeleteParams, PostParams};
use kubewright::runtime::wait::{await_condition, conditions};
use kubewright::runtime::{CancellationToken, InformerParams, Manager};
use kubewright::testing::TestEnv;
use kubewright::{Api, ResourceExt};
use kubewright_examples::backup::{self, Backup, BackupSpec};
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_backup_gets_its_configmap_status_and_cleanup() {
    let env = TestEnv::start().await;
    // TestEnv sent tracing output (reconcile errors included) to the test's output.
    assert!(tracing::dispatcher::has_been_set());
    env.install_crds([Backup::crd()]).await;
    let ns = env.namespace().await;

    let mut manager = Manager::builder(env.client())
        .cache_defaults(InformerParams::all().namespace(&ns))
        .build()
        .unwrap();
    backup::add_to(&mut manager).unwrap();
    let cancel = CancellationToken::new();
    let running = tokio::spawn(manager.run(cancel.clone()));

    let backups: Api<Backup> = Api::namespaced(env.client(), &ns);
    let spec = BackupSpec {
        source: "data-0".into(),
        schedule: "0 3 * * *".into(),
        retain: 3,
    };
    let created = backups
        .create(&PostParams::default(), &Backup::new("nightly", spec))
        .await
        .unwrap();
    // A reconcile error would show in this test's output (TestEnv logs to it), not only
    // as this timeout.
    let ready = await_condition(backups.clone(), "nightly", |b: Option<&Backup>| {
        b.is_some_and(Backup::is_ready)
    });
    let ready = tokio::time::timeout(DEADLINE, ready)
        .await
        .expect("nightly never became Ready")
        .unwrap()
        .unwrap();
    assert_eq!(ready.finalizers(), [backup::FINALIZER]);
    let cm = Api::<ConfigMap>::namespaced(env.client(), &ns)
        .get(&backup::config_map_name("nightly"))
        .await
        .unwrap();
    assert_eq!(cm.data.as_ref().unwrap()["retain"], "3");
    assert_eq!(cm.owner_references()[0].uid, created.uid().unwrap());

    // The status and the finalizer were written as the operator's field manager.
    let managers: Vec<(String, Option<String>)> = ready
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.manager.unwrap_or_default(), m.subresource))
        .collect();
    assert!(
        managers.contains(&(backup::MANAGER.into(), Some("status".into())))
            && managers.contains(&(backup::MANAGER.into(), None)),
        "{managers:?}"
    );

    backups
        .delete("nightly", &DeleteParams::default())
        .await
        .unwrap();
    let uid = created.uid().unwrap();
    let gone = await_condition(backups.clone(), "nightly", conditions::is_deleted(uid));
    tokio::time::timeout(DEADLINE, gone)
        .await
        .expect("nightly was never deleted")
        .unwrap();
    cancel.cancel();
    running.await.unwrap().unwrap();
}
