//! What the webhook tests against an API server share: serving certificates, a
//! namespace selector, and the removal of cluster-scoped leftovers.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kubewright_client::{Api, Client};
use kubewright_core::DeleteParams;
use kubewright_testing::TestEnv;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use std::collections::BTreeMap;
use std::path::Path;

/// Serving certificate for 127.0.0.1 in `dir`; returns the CA (PEM) for `caBundle`.
pub fn certificates(dir: &Path) -> String {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
    ca.pem()
}

pub fn only_namespace(ns: &str) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: Some(BTreeMap::from([(
            "kubernetes.io/metadata.name".to_string(),
            ns.to_string(),
        )])),
        ..Default::default()
    })
}

/// Cluster-scoped leftovers of a test, deleted when it ends, also when it fails: a
/// webhook configuration or a CRD whose webhook no longer answers would break later
/// requests (namespace deletion cannot list a resource it cannot convert). Drop runs
/// the deletions on a thread of its own with a fresh client, since the test's runtime
/// may be unwinding.
pub struct Leftovers {
    /// The embedded server goes away with the test (and runs on the test's runtime, which
    /// a blocking cleanup would stall): nothing to do there.
    embedded: bool,
    config: kubewright_client::Config,
    pub validating: Vec<String>,
    pub mutating: Vec<String>,
    pub crds: Vec<String>,
}

impl Leftovers {
    pub fn new(env: &TestEnv) -> Self {
        Self {
            embedded: env.is_embedded(),
            config: env.config().clone(),
            validating: Vec::new(),
            mutating: Vec::new(),
            crds: Vec::new(),
        }
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        if self.embedded {
            return;
        }
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        use kubewright_core::{Patch, PatchParams};
        let config = self.config.clone();
        let (validating, mutating, crds) = (
            std::mem::take(&mut self.validating),
            std::mem::take(&mut self.mutating),
            std::mem::take(&mut self.crds),
        );
        let cleanup = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let Ok(client) = Client::new(config) else { return };
                let v: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
                for name in &validating {
                    let _ = v.delete(name, &DeleteParams::default()).await;
                }
                let m: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
                for name in &mutating {
                    let _ = m.delete(name, &DeleteParams::default()).await;
                }
                let c: Api<CustomResourceDefinition> = Api::all(client);
                for name in &crds {
                    // Without its webhook the CRD's objects can only go if nothing
                    // needs converting.
                    let none = serde_json::json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
                    let _ = c
                        .patch(name, &PatchParams::default(), &Patch::Merge(none))
                        .await;
                    let _ = c.delete(name, &DeleteParams::default()).await;
                }
            });
        });
        let _ = cleanup.join();
    }
}

/// This process's resident memory in bytes (Linux), for the embedded server's footprint.
#[allow(dead_code)] // not every test file that includes this module uses it
pub fn rss() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
