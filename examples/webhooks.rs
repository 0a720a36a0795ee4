//! An operator's webhooks: a defaulting (mutating) webhook, a validating webhook and a
//! conversion webhook for a custom resource served in two versions, all from one
//! `WebhookServer`, registered with the API server and exercised through it.
//!
//! Runs against $KUBECONFIG when set (the API server must reach 127.0.0.1, as a local
//! kube-apiserver or `kw serve` does), else against a freshly started embedded API server.
//! It removes what it created (the CRD, the webhook configurations, its namespace).

use kubewright::client::Api;
use kubewright::core::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kubewright::crd::merge_crds;
use kubewright::k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kubewright::k8s_openapi::api::core::v1::Namespace;
use kubewright::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubewright::k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kubewright::runtime::webhook::{
    AdmissionRequest, HookOptions, Mutation, Verdict, WebhookClient, WebhookServer, conversion,
};
use kubewright_examples::Connection;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The first version: retention as text ("30d").
pub mod v1 {
    use kubewright::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// A backup schedule.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "webhooks.example.kubewright.dev",
        version = "v1",
        kind = "Backup",
        namespaced
    )]
    #[serde(rename_all = "camelCase")]
    pub struct BackupSpec {
        /// `hourly` or `daily`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub schedule: Option<String>,
        /// How long to keep backups, e.g. `30d`.
        pub retention: String,
    }
}

/// The second version, stored: retention in days.
pub mod v2 {
    use kubewright::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// A backup schedule.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "webhooks.example.kubewright.dev",
        version = "v2",
        kind = "Backup",
        namespaced
    )]
    #[serde(rename_all = "camelCase")]
    pub struct BackupSpec {
        /// `hourly` or `daily` (defaulted to `daily` by the mutating webhook).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub schedule: Option<String>,
        /// Days to keep backups (at most 365, checked by the validating webhook).
        pub retention_days: i64,
    }
}

const GROUP: &str = "webhooks.example.kubewright.dev";

/// Converts a Backup between `v1` and `v2`.
fn convert(mut obj: Value, desired: &str) -> Result<Value, String> {
    let spec = obj
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or("the object has no spec")?;
    match desired.rsplit_once('/').map(|(_, v)| v) {
        Some("v2") => {
            let text = spec
                .remove("retention")
                .and_then(|r| r.as_str().map(str::to_string))
                .ok_or("v1 spec.retention is missing")?;
            let days = text
                .strip_suffix('d')
                .and_then(|d| d.parse::<i64>().ok())
                .ok_or_else(|| format!("v1 spec.retention {text:?} is not a number of days"))?;
            spec.insert("retentionDays".into(), days.into());
        }
        Some("v1") => {
            let days = spec
                .remove("retentionDays")
                .and_then(|d| d.as_i64())
                .ok_or("v2 spec.retentionDays is missing")?;
            spec.insert("retention".into(), format!("{days}d").into());
        }
        _ => return Err(format!("cannot convert to {desired}")),
    }
    Ok(obj)
}

/// A CA and a serving certificate for 127.0.0.1, written to a fresh directory.
fn certificates() -> Result<(std::path::PathBuf, String), Box<dyn std::error::Error>> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
    let key = KeyPair::generate()?;
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?
        .signed_by(&key, &ca)?;
    let dir = std::env::temp_dir().join(format!("kubewright-webhooks-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("tls.crt"), cert.pem())?;
    std::fs::write(dir.join("tls.key"), key.serialize_pem())?;
    Ok((dir, ca.pem()))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    println!("connected to {}", conn.describe());
    let client = conn.client.clone();
    let ns = format!("webhooks-demo-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.clone()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await?;
    let this_namespace = HookOptions {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "kubernetes.io/metadata.name".to_string(),
                ns.clone(),
            )])),
            ..Default::default()
        }),
        ..Default::default()
    };

    // One server for the three webhooks.
    let (dir, ca) = certificates()?;
    let server = WebhookServer::builder("127.0.0.1:0".parse()?)
        .tls_files(dir.join("tls.crt"), dir.join("tls.key"))
        .mutate_with(
            "/default-backup",
            this_namespace.clone(),
            |req: AdmissionRequest<v2::Backup>| async move {
                let Some(mut backup) = req.object else {
                    return Mutation::allow();
                };
                backup.spec.schedule.get_or_insert_with(|| "daily".into());
                Mutation::patch(backup)
            },
        )
        .validate_with(
            "/validate-backup",
            this_namespace,
            |req: AdmissionRequest<v2::Backup>| async move {
                match req.object {
                    Some(b) if b.spec.retention_days > 365 => Verdict::deny(format!(
                        "retentionDays {} is over the limit of 365",
                        b.spec.retention_days
                    )),
                    Some(b)
                        if b.spec
                            .schedule
                            .as_deref()
                            .is_some_and(|s| s != "daily" && s != "hourly") =>
                    {
                        Verdict::deny("schedule must be hourly or daily")
                    }
                    _ => Verdict::allow(),
                }
            },
        )
        .convert("/convert-backup", convert)
        .build()?;
    let url = WebhookClient::Url(format!("https://{}", server.local_addr()));
    println!("webhook server on {}", server.local_addr());
    let cancel = CancellationToken::new();
    let registered =
        server_run(server, cancel.clone(), &url, ca.as_bytes(), client.clone()).await?;

    let result = demo(&client, &ns, &url, &ca).await;

    // Clean up whatever happened.
    let (mutating, validating) = registered;
    let _ = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .delete(&mutating, &DeleteParams::default())
        .await;
    let _ = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .delete(&validating, &DeleteParams::default())
        .await;
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    let _ = Api::<CustomResourceDefinition>::all(client.clone())
        .delete(&format!("backups.{GROUP}"), &DeleteParams::default())
        .await;
    cancel.cancel();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Starts the server in the background and registers its admission webhooks; returns
/// the names of the configurations.
async fn server_run(
    server: WebhookServer,
    cancel: CancellationToken,
    url: &WebhookClient,
    ca: &[u8],
    client: kubewright::Client,
) -> Result<(String, String), kubewright::Error> {
    let name = format!("backups.{GROUP}");
    let mutating = server.mutating_configuration(&name, url, Some(ca));
    let validating = server.validating_configuration(&name, url, Some(ca));
    tokio::spawn(server.run(cancel));
    let apply = PatchParams::apply("webhooks-example").force();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(
            &name,
            &apply,
            &Patch::Apply(with_kind(&mutating, "MutatingWebhookConfiguration")),
        )
        .await?;
    Api::<ValidatingWebhookConfiguration>::all(client)
        .patch(
            &name,
            &apply,
            &Patch::Apply(with_kind(&validating, "ValidatingWebhookConfiguration")),
        )
        .await?;
    Ok((name.clone(), name))
}

fn with_kind<T: serde::Serialize>(obj: &T, kind: &str) -> Value {
    let mut v = serde_json::to_value(obj).unwrap_or_default();
    v["apiVersion"] = "admissionregistration.k8s.io/v1".into();
    v["kind"] = kind.into();
    v
}

async fn demo(
    client: &kubewright::Client,
    ns: &str,
    url: &WebhookClient,
    ca: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    // The CRD: both versions from the derives, v2 stored, converted by the webhook.
    let mut crd = merge_crds(
        vec![
            <v1::Backup as kubewright::crd::CustomResourceExt>::crd(),
            <v2::Backup as kubewright::crd::CustomResourceExt>::crd(),
        ],
        "v2",
    )?;
    crd.spec.conversion = Some(conversion(url, "/convert-backup", Some(ca.as_bytes())));
    let mut crd_json = serde_json::to_value(&crd)?;
    crd_json["apiVersion"] = "apiextensions.k8s.io/v1".into();
    crd_json["kind"] = "CustomResourceDefinition".into();
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(
            &format!("backups.{GROUP}"),
            &PatchParams::apply("webhooks-example").force(),
            &Patch::Apply(crd_json),
        )
        .await?;
    let backups_v1: Api<v1::Backup> = Api::namespaced(client.clone(), ns);
    let backups_v2: Api<v2::Backup> = Api::namespaced(client.clone(), ns);

    // 1. Defaulted: no schedule given, the mutating webhook sets one. The CRD and the
    // webhook configurations take a moment to be served and picked up.
    let first = v2::Backup::new(
        "nightly",
        v2::BackupSpec {
            schedule: None,
            retention_days: 30,
        },
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let created = loop {
        match backups_v2.create(&PostParams::default(), &first).await {
            Ok(b) if b.spec.schedule.is_some() => break b,
            Ok(_) => {
                // Created before the webhook was in effect: try again.
                backups_v2
                    .delete("nightly", &DeleteParams::default())
                    .await?;
            }
            Err(e) if Instant::now() < deadline && (e.is_not_found() || e.is_conflict()) => {}
            Err(e) => return Err(e.into()),
        }
        if Instant::now() > deadline {
            return Err("the webhooks never took effect".into());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!(
        "1. created v2 Backup nightly without a schedule; the defaulting webhook set schedule={:?}",
        created.spec.schedule.as_deref().unwrap_or("")
    );

    // 2. Refused by the validating webhook.
    let too_long = v2::Backup::new(
        "forever",
        v2::BackupSpec {
            schedule: Some("daily".into()),
            retention_days: 1000,
        },
    );
    match backups_v2.create(&PostParams::default(), &too_long).await {
        Err(e) => println!(
            "2. refused: {}",
            e.status().map(|s| s.message.as_str()).unwrap_or("")
        ),
        Ok(_) => return Err("a 1000-day retention was admitted".into()),
    }

    // 3. Read in v1: the conversion webhook turns retentionDays into text.
    let as_v1 = backups_v1.get("nightly").await?;
    println!("3. read as v1: retention={:?}", as_v1.spec.retention);
    if as_v1.spec.retention != "30d" {
        return Err(format!("expected 30d, got {}", as_v1.spec.retention).into());
    }

    // 4. Written in v1, stored in v2.
    let weekly = v1::Backup::new(
        "weekly",
        v1::BackupSpec {
            schedule: Some("hourly".into()),
            retention: "14d".into(),
        },
    );
    backups_v1.create(&PostParams::default(), &weekly).await?;
    let as_v2 = backups_v2.get("weekly").await?;
    println!(
        "4. created as v1 with retention 14d; read as v2: retentionDays={}",
        as_v2.spec.retention_days
    );
    if as_v2.spec.retention_days != 14 {
        return Err("the v1 object did not convert to 14 days".into());
    }
    println!("done: defaulting, validation and conversion all went through the webhook server");
    Ok(())
}
