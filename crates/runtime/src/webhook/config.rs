//! Generating the objects that register webhooks with the API server:
//! `ValidatingWebhookConfiguration`, `MutatingWebhookConfiguration`, and the `conversion`
//! stanza of a CustomResourceDefinition.

use super::{Operation, WebhookServer};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
    ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

/// Where the API server reaches the webhook server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookClient {
    /// A URL (`https://host:port`, no path): for servers outside the cluster, or on the
    /// API server's own host in tests. The handler's path is appended.
    Url(String),
    /// A Service in the cluster.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port (443 when `None`).
        port: Option<i32>,
    },
}

impl WebhookClient {
    /// The client config for `path`, trusting `ca_bundle` (PEM) when given.
    pub fn client_config(&self, path: &str, ca_bundle: Option<&[u8]>) -> WebhookClientConfig {
        let ca_bundle = ca_bundle.map(|ca| ByteString(ca.to_vec()));
        match self {
            WebhookClient::Url(base) => WebhookClientConfig {
                url: Some(format!("{}{path}", base.trim_end_matches('/'))),
                ca_bundle,
                service: None,
            },
            WebhookClient::Service {
                namespace,
                name,
                port,
            } => WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path.to_string()),
                    port: *port,
                }),
                ca_bundle,
                url: None,
            },
        }
    }
}

/// How a handler is registered in the generated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct HookOptions {
    /// The webhook's name (a qualified name such as `vmonitor.example.com`); derived
    /// from the path and the resource's group when unset.
    pub name: Option<String>,
    /// The operations sent to it (create and update by default).
    pub operations: Vec<Operation>,
    /// `Fail` (default) or `Ignore` when the webhook cannot be called.
    pub failure_policy: String,
    /// 1 to 30 seconds (10 by default).
    pub timeout_seconds: i32,
    /// Only objects in namespaces matching this.
    pub namespace_selector: Option<LabelSelector>,
    /// Only objects matching this.
    pub object_selector: Option<LabelSelector>,
    /// CEL conditions, all of which must hold for the webhook to be called.
    pub match_conditions: Vec<(String, String)>,
    /// Mutating only: `IfNeeded` to be called again after later mutations, or `Never`.
    pub reinvocation_policy: Option<String>,
}

impl Default for HookOptions {
    fn default() -> Self {
        Self {
            name: None,
            operations: vec![Operation::Create, Operation::Update],
            failure_policy: "Fail".into(),
            timeout_seconds: 10,
            namespace_selector: None,
            object_selector: None,
            match_conditions: Vec::new(),
            reinvocation_policy: None,
        }
    }
}

fn operation_name(op: Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

impl super::Hook {
    fn name(&self) -> String {
        if let Some(n) = &self.options.name {
            return n.clone();
        }
        let stem: String = self
            .path
            .trim_start_matches('/')
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        let group = if self.resource.group.contains('.') {
            self.resource.group.clone()
        } else if self.resource.group.is_empty() {
            "core.kubewright.io".into()
        } else {
            format!("{}.kubewright.io", self.resource.group)
        };
        format!("{}.{group}", stem.trim_matches('-'))
    }

    fn rules(&self) -> Vec<RuleWithOperations> {
        vec![RuleWithOperations {
            api_groups: Some(vec![self.resource.group.clone()]),
            api_versions: Some(vec![self.resource.version.clone()]),
            operations: Some(
                self.options
                    .operations
                    .iter()
                    .map(|o| operation_name(*o).to_string())
                    .collect(),
            ),
            resources: Some(vec![self.resource.plural.clone()]),
            scope: None,
        }]
    }

    fn conditions(&self) -> Option<Vec<MatchCondition>> {
        (!self.options.match_conditions.is_empty()).then(|| {
            self.options
                .match_conditions
                .iter()
                .map(|(name, expression)| MatchCondition {
                    name: name.clone(),
                    expression: expression.clone(),
                })
                .collect()
        })
    }
}

impl WebhookServer {
    /// A `ValidatingWebhookConfiguration` named `name` with one webhook per validating
    /// handler, reached through `client`.
    pub fn validating_configuration(
        &self,
        name: &str,
        client: &WebhookClient,
        ca_bundle: Option<&[u8]>,
    ) -> ValidatingWebhookConfiguration {
        ValidatingWebhookConfiguration {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            webhooks: Some(
                self.hooks()
                    .iter()
                    .filter(|h| !h.mutating)
                    .map(|h| ValidatingWebhook {
                        name: h.name(),
                        admission_review_versions: vec!["v1".into()],
                        client_config: client.client_config(&h.path, ca_bundle),
                        failure_policy: Some(h.options.failure_policy.clone()),
                        match_policy: Some("Equivalent".into()),
                        namespace_selector: h.options.namespace_selector.clone(),
                        object_selector: h.options.object_selector.clone(),
                        rules: Some(h.rules()),
                        side_effects: "None".into(),
                        timeout_seconds: Some(h.options.timeout_seconds),
                        match_conditions: h.conditions(),
                    })
                    .collect(),
            ),
        }
    }

    /// A `MutatingWebhookConfiguration` named `name` with one webhook per mutating
    /// handler, reached through `client`.
    pub fn mutating_configuration(
        &self,
        name: &str,
        client: &WebhookClient,
        ca_bundle: Option<&[u8]>,
    ) -> MutatingWebhookConfiguration {
        MutatingWebhookConfiguration {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            webhooks: Some(
                self.hooks()
                    .iter()
                    .filter(|h| h.mutating)
                    .map(|h| MutatingWebhook {
                        name: h.name(),
                        admission_review_versions: vec!["v1".into()],
                        client_config: client.client_config(&h.path, ca_bundle),
                        failure_policy: Some(h.options.failure_policy.clone()),
                        match_policy: Some("Equivalent".into()),
                        namespace_selector: h.options.namespace_selector.clone(),
                        object_selector: h.options.object_selector.clone(),
                        reinvocation_policy: h.options.reinvocation_policy.clone(),
                        rules: Some(h.rules()),
                        side_effects: "None".into(),
                        timeout_seconds: Some(h.options.timeout_seconds),
                        match_conditions: h.conditions(),
                    })
                    .collect(),
            ),
        }
    }
}

/// The `spec.conversion` of a CRD whose versions a conversion webhook at `path` converts.
/// Combine with [`merge_crds`](https://docs.rs/kubewright/latest/kubewright/crd/fn.merge_crds.html)
/// for a CRD of several versions derived from several structs.
pub fn conversion(
    client: &WebhookClient,
    path: &str,
    ca_bundle: Option<&[u8]>,
) -> apiext::CustomResourceConversion {
    let config = client.client_config(path, ca_bundle);
    apiext::CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(apiext::WebhookConversion {
            client_config: Some(apiext::WebhookClientConfig {
                ca_bundle: config.ca_bundle,
                url: config.url,
                service: config.service.map(|s| apiext::ServiceReference {
                    name: s.name,
                    namespace: s.namespace,
                    path: s.path,
                    port: s.port,
                }),
            }),
            conversion_review_versions: vec!["v1".into()],
        }),
    }
}
