//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding
//! (`admissionregistration.k8s.io/v1`), evaluated as kube-apiserver v1.36's `validating`
//! admission plugin does (`k8s.io/apiserver/pkg/admission/plugin/policy/validating`).
//!
//! For every binding that names an existing policy, in the order of the policies' names and
//! then the bindings' names:
//! 1. the policy's `matchConstraints` must match the request, then the binding's
//!    `matchResources` (namespace and object selectors, resource rules with their excludes,
//!    `matchPolicy`);
//! 2. the params are collected (`paramKind` + the binding's `paramRef`: one object by name,
//!    or every object a selector picks, each evaluated in turn; none found is an error when
//!    `parameterNotFoundAction` is `Deny`);
//! 3. `matchConditions` run (all must be true), then every validation. A validation that is
//!    false is a failure with its message; one that cannot be evaluated is a failure when the
//!    `failurePolicy` is `Fail` (the default) and nothing when it is `Ignore`.
//! 4. Failures go through the binding's `validationActions`: `Deny` refuses the request,
//!    `Warn` adds a warning, `Audit` does nothing visible here.
//!
//! Configuration errors (a policy without `matchConstraints`, a `paramKind` the server does
//! not serve, params not found, a namespace selector that cannot be read) refuse the request
//! whatever the binding's actions, unless the policy's `failurePolicy` is `Ignore`.
//!
//! CEL runs in the environment of the CRD validation rules (`crate::crd::cel`): the same
//! standard library and extensions, parser limits and stack. Not done (see
//! docs/admission-policies.md): the `authorizer` variable (an expression naming it gets a
//! compilation error), type checking against the OpenAPI schemas (`status.typeChecking`),
//! runtime cost budgets, `auditAnnotations`, and conversion of `object` to the version of an
//! equivalent rule under `matchPolicy: Equivalent`.

use super::{Attributes, Operation};
use crate::crd::cel as crd_cel;
use crate::error::{ApiError, go_quote};
use crate::storage::Storage;
use kubewright_core::{LabelSelector, StatusCause, StatusDetails};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Storage key of ValidatingAdmissionPolicies.
const POLICIES: &str = "admissionregistration.k8s.io/validatingadmissionpolicies";
/// Storage key of ValidatingAdmissionPolicyBindings.
const BINDINGS: &str = "admissionregistration.k8s.io/validatingadmissionpolicybindings";
/// Storage key of Namespaces.
const NAMESPACES: &str = "/namespaces";
/// Storage key of CustomResourceDefinitions (for `paramKind`s and equivalent versions).
const CRDS: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// The longest `messageExpression` result used as a message
/// (`celconfig.MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5 * 1024;

/// Bindings grouped by the policy they bind, policies in name order and each policy's
/// bindings in the order given (storage lists them by name), as both kinds of policy
/// are run.
fn by_policy(bindings: &[Arc<Value>]) -> BTreeMap<&str, Vec<&Value>> {
    let mut by_policy: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for b in bindings {
        if let Some(p) = b.pointer("/spec/policyName").and_then(Value::as_str) {
            by_policy.entry(p).or_default().push(b);
        }
    }
    by_policy
}

/// Evaluates every policy whose binding matches `attrs`: `Ok` with the warnings of `Warn`
/// bindings, or the error a `Deny` binding (or a failing policy with `failurePolicy:
/// Fail`) gives.
///
/// The error is kube-apiserver's: `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy
/// '<policy>' with binding '<binding>' denied request: <message>`, with the validation's
/// `reason` (`Invalid`/422 when it has none, `Forbidden`/403, `Unauthorized`/401,
/// `RequestEntityTooLarge`/413) and the text after the resource as the only cause. Warnings
/// are `Validation failed for ValidatingAdmissionPolicy '<policy>' with binding '<binding>':
/// <message>`, each once.
pub(crate) fn validate(storage: &Storage, attrs: &Attributes) -> Result<Vec<String>, ApiError> {
    let (bindings, _) = storage.list(BINDINGS, None);
    if bindings.is_empty() {
        return Ok(Vec::new());
    }
    let by_policy = by_policy(&bindings);
    let mut run = Dispatch {
        storage,
        attrs,
        denied: Vec::new(),
        warnings: Vec::new(),
        namespace: None,
    };
    crd_cel::on_rule_stack(|| {
        for (policy_name, bindings) in &by_policy {
            let Some(policy) = storage.get(POLICIES, "", policy_name) else {
                continue;
            };
            run.policy(&policy, bindings)?;
        }
        Ok::<(), ApiError>(())
    })?;
    match run.denied.first() {
        Some(d) => Err(d.to_error(attrs)),
        None => Ok(run.warnings),
    }
}

/// A refusal: the policy and binding it came from, its message and reason.
struct Denial {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: Option<String>,
}

impl Denial {
    /// The Status kube-apiserver answers (`admission.NewForbidden` with the reason and code of
    /// the validation, the message also as the only cause).
    fn to_error(&self, attrs: &Attributes) -> ApiError {
        let inner = match &self.binding {
            Some(b) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
                self.policy, self.message
            ),
            None => format!(
                "ValidatingAdmissionPolicy '{}' denied request: {}",
                self.policy, self.message
            ),
        };
        let reason = self.reason.as_deref().unwrap_or("Invalid");
        let code = match reason {
            "Forbidden" => 403,
            "Unauthorized" => 401,
            "RequestEntityTooLarge" => 413,
            _ => 422,
        };
        let resource = if attrs.group.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}.{}", attrs.resource, attrs.group)
        };
        let name = request_name(attrs);
        ApiError::new(
            code,
            reason,
            format!("{resource} {} is forbidden: {inner}", go_quote(&name)),
        )
        .with(StatusDetails {
            name,
            group: attrs.group.clone(),
            kind: attrs.resource.clone(),
            causes: vec![StatusCause {
                message: inner,
                ..Default::default()
            }],
            ..Default::default()
        })
    }
}

/// The name admission errors give: the request's, else the object's name or generateName,
/// else `Unknown` (`admission.extractResourceName`).
fn request_name(attrs: &Attributes) -> String {
    if !attrs.name.is_empty() {
        return attrs.name.clone();
    }
    let meta = |k: &str| {
        attrs
            .object
            .as_ref()
            .and_then(|o| o.pointer(&format!("/metadata/{k}")))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    meta("name")
        .or_else(|| meta("generateName"))
        .unwrap_or("Unknown")
        .to_string()
}

/// One request's evaluation: what it found so far.
struct Dispatch<'a> {
    storage: &'a Storage,
    attrs: &'a Attributes,
    denied: Vec<Denial>,
    warnings: Vec<String>,
    /// The request's Namespace as `namespaceObject` (read once).
    namespace: Option<cel::Value>,
}

/// What a policy does when it cannot be evaluated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FailurePolicy {
    Fail,
    Ignore,
}

/// The outcome of one validation (`PolicyDecision`): a failure (`Deny`, to go through the
/// binding's actions) or nothing.
struct Failure {
    message: String,
    reason: Option<String>,
}

impl Dispatch<'_> {
    /// Evaluates one policy for its bindings.
    fn policy(&mut self, policy: &Value, bindings: &[&Value]) -> Result<(), ApiError> {
        let name = policy
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let spec = policy.get("spec").unwrap_or(&Value::Null);
        let failure_policy = match spec.get("failurePolicy").and_then(Value::as_str) {
            None | Some("Fail") => Ok(FailurePolicy::Fail),
            Some("Ignore") => Ok(FailurePolicy::Ignore),
            Some(other) => Err(other.to_string()),
        };
        let fail = failure_policy.as_ref().map_or(FailurePolicy::Fail, |f| *f);
        let config_error = |this: &mut Self, binding: Option<&str>, err: String| {
            let message = match (failure_policy.as_ref(), binding) {
                (Ok(FailurePolicy::Ignore), _) => return,
                (Err(other), _) => format!("unrecognized failure policy: '{other}'"),
                (Ok(FailurePolicy::Fail), None) => format!("failed to configure policy: {err}"),
                (Ok(FailurePolicy::Fail), Some(_)) => format!("failed to configure binding: {err}"),
            };
            this.denied.push(Denial {
                policy: name.clone(),
                binding: binding.map(str::to_string),
                message,
                reason: None,
            });
        };
        let Some(constraints) = spec.get("matchConstraints").filter(|c| c.is_object()) else {
            config_error(
                self,
                None,
                "policy contained no match constraints, a required field".into(),
            );
            return Ok(());
        };
        let matched = match self.matches(constraints) {
            Ok(Some(m)) => m,
            Ok(None) => return Ok(()),
            Err(e) => {
                config_error(self, None, e);
                return Ok(());
            }
        };
        let param_kind = match spec.get("paramKind").filter(|p| p.is_object()) {
            None => None,
            Some(pk) => match self.param_resource(pk) {
                Ok(r) => Some(r),
                Err(e) => {
                    config_error(self, None, e);
                    return Ok(());
                }
            },
        };
        let compiled = CompiledPolicy::get(spec, param_kind.is_some());
        for binding in bindings {
            let binding_name = binding
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let bspec = binding.get("spec").unwrap_or(&Value::Null);
            if let Some(mr) = bspec.get("matchResources").filter(|m| m.is_object()) {
                match self.matches(mr) {
                    Ok(Some(_)) => {}
                    Ok(None) => continue,
                    Err(e) => {
                        config_error(self, Some(binding_name), e);
                        continue;
                    }
                }
            }
            let params = match self.params(param_kind.as_ref(), bspec.get("paramRef")) {
                Ok(p) => p,
                Err(e) => {
                    config_error(self, Some(binding_name), e);
                    continue;
                }
            };
            let namespace = self.namespace_object()?;
            let mut failures = Vec::new();
            for param in &params {
                let input = Input {
                    object: self.attrs.object.as_ref().map_or(cel::Value::Null, to_cel),
                    old_object: self
                        .attrs
                        .old_object
                        .as_ref()
                        .map_or(cel::Value::Null, to_cel),
                    request: to_cel(&request_value(self.attrs, &matched)),
                    params: param.as_deref().map_or(cel::Value::Null, to_cel),
                    namespace: namespace.clone(),
                };
                compiled.evaluate(&input, fail, &mut failures);
            }
            let actions: Vec<&str> = bspec
                .get("validationActions")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for f in failures {
                for action in &actions {
                    match *action {
                        "Deny" => self.denied.push(Denial {
                            policy: name.clone(),
                            binding: Some(binding_name.to_string()),
                            message: f.message.clone(),
                            reason: f.reason.clone(),
                        }),
                        "Warn" => {
                            let w = format!(
                                "Validation failed for ValidatingAdmissionPolicy '{name}' with binding '{binding_name}': {}",
                                f.message
                            );
                            if !self.warnings.contains(&w) {
                                self.warnings.push(w);
                            }
                        }
                        // Audit: an audit annotation, which this server does not record.
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// The request's namespace for `namespaceObject`: null for cluster-scoped requests and
    /// for Namespaces themselves, 404 when it does not exist.
    fn namespace_object(&mut self) -> Result<cel::Value, ApiError> {
        if let Some(ns) = &self.namespace {
            return Ok(ns.clone());
        }
        let a = self.attrs;
        let is_namespace = a.group.is_empty() && a.version == "v1" && a.kind == "Namespace";
        let value = if a.namespace.is_empty() || is_namespace {
            cel::Value::Null
        } else {
            let ns = self
                .storage
                .get(NAMESPACES, "", &a.namespace)
                .ok_or_else(|| ApiError::namespace_not_found(&a.namespace))?;
            to_cel(&trimmed_namespace(&ns))
        };
        self.namespace = Some(value.clone());
        Ok(value)
    }

    /// Whether a `matchConstraints`/`matchResources` selects the request: `Ok(Some(the
    /// resource and kind it matched as))`, `Ok(None)`, or a configuration error (a selector
    /// that cannot be read, a namespace that does not exist) when the rules match.
    fn matches(&self, m: &Value) -> Result<Option<Matched>, String> {
        let a = self.attrs;
        let ns_match = self.namespace_selector_matches(m.get("namespaceSelector"));
        if ns_match == Ok(false) {
            return Ok(None);
        }
        let obj_match = object_selector_matches(m.get("objectSelector"), a);
        if obj_match == Ok(false) {
            return Ok(None);
        }
        // Defaulted to Equivalent by the API.
        let equivalent = m.get("matchPolicy").and_then(Value::as_str) != Some("Exact");
        let excludes = rules_of(m, "excludeResourceRules");
        if self.rules_match(excludes, equivalent).is_some() {
            return Ok(None);
        }
        let rules = rules_of(m, "resourceRules");
        let matched = if rules.is_empty() {
            Some(Matched {
                version: a.version.clone(),
            })
        } else {
            self.rules_match(rules, equivalent)
        };
        let Some(matched) = matched else {
            return Ok(None);
        };
        ns_match?;
        obj_match?;
        Ok(Some(matched))
    }

    /// The first of `rules` that matches the request (then, under `Equivalent`, one that
    /// matches it in another version the resource is served in).
    fn rules_match(&self, rules: &[Value], equivalent: bool) -> Option<Matched> {
        let a = self.attrs;
        let named_match = |rule: &Value, version: &str| {
            rule_matches(rule, a, version)
                && match rule.get("resourceNames").and_then(Value::as_array) {
                    Some(names) if !names.is_empty() => {
                        names.iter().any(|n| n.as_str() == Some(a.name.as_str()))
                    }
                    _ => true,
                }
        };
        if rules.iter().any(|r| named_match(r, &a.version)) {
            return Some(Matched {
                version: a.version.clone(),
            });
        }
        if !equivalent {
            return None;
        }
        let versions = self.served_versions();
        rules.iter().find_map(|r| {
            versions
                .iter()
                .filter(|v| **v != a.version)
                .find(|v| named_match(r, v))
                .map(|v| Matched { version: v.clone() })
        })
    }

    /// The versions a custom resource is served in (built-in resources are served in one).
    fn served_versions(&self) -> Vec<String> {
        let a = self.attrs;
        if a.group.is_empty() {
            return Vec::new();
        }
        let crd = self
            .storage
            .get(CRDS, "", &format!("{}.{}", a.resource, a.group));
        crd.as_deref()
            .and_then(|c| c.pointer("/spec/versions"))
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
                    .filter_map(|v| v.get("name").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `namespaceSelector`: cluster-scoped requests (other than for Namespaces) always match;
    /// otherwise the labels of the namespace (of the Namespace being created or updated).
    fn namespace_selector_matches(&self, selector: Option<&Value>) -> Result<bool, String> {
        let a = self.attrs;
        let is_namespaces = a.group.is_empty() && a.resource == "namespaces";
        let ns = if is_namespaces && a.namespace.is_empty() {
            a.name.as_str()
        } else {
            a.namespace.as_str()
        };
        if ns.is_empty() && !is_namespaces {
            return Ok(true);
        }
        let Some(selector) = parse_selector(selector)? else {
            return Ok(true);
        };
        let labels = if is_namespaces
            && a.subresource.is_empty()
            && matches!(a.operation, Operation::Create | Operation::Update)
        {
            labels_of(a.object.as_ref())
        } else {
            let found = self.storage.get(NAMESPACES, "", ns);
            match found {
                Some(n) => labels_of(Some(&n)),
                None => return Err(format!("namespaces {} not found", go_quote(ns))),
            }
        };
        Ok(selector.matches(&labels))
    }

    /// The resource (storage key) and scope of a policy's `paramKind`.
    fn param_resource(&self, pk: &Value) -> Result<ParamResource, String> {
        let api_version = pk.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = pk.get("kind").and_then(Value::as_str).unwrap_or("");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let unknown = || {
            format!(
                "failed to find resource referenced by paramKind: '{group}/{version}, Kind={kind}'"
            )
        };
        if let Some(found) =
            builtin_kinds().get(&(group.to_string(), version.to_string(), kind.to_string()))
        {
            return Ok(found.clone());
        }
        let (crds, _) = self.storage.list(CRDS, None);
        for crd in &crds {
            let spec = crd.get("spec").unwrap_or(&Value::Null);
            let str_at = |p: &str| spec.pointer(p).and_then(Value::as_str).unwrap_or("");
            let served = spec
                .get("versions")
                .and_then(Value::as_array)
                .is_some_and(|vs| {
                    vs.iter().any(|v| {
                        v.get("name").and_then(Value::as_str) == Some(version)
                            && v.get("served").and_then(Value::as_bool) != Some(false)
                    })
                });
            if str_at("/group") == group && str_at("/names/kind") == kind && served {
                return Ok(ParamResource {
                    key: format!("{group}/{}", str_at("/names/plural")),
                    namespaced: str_at("/scope") != "Cluster",
                });
            }
        }
        Err(unknown())
    }

    /// The param objects of a binding (`generic.CollectParams`): `[None]` when the policy has
    /// no `paramKind` or the binding no `paramRef`.
    fn params(
        &self,
        kind: Option<&ParamResource>,
        param_ref: Option<&Value>,
    ) -> Result<Vec<Option<Arc<Value>>>, String> {
        let (Some(kind), Some(pr)) = (kind, param_ref.filter(|p| p.is_object())) else {
            return Ok(vec![None]);
        };
        let str_of = |k: &str| pr.get(k).and_then(Value::as_str).unwrap_or("");
        let ref_ns = str_of("namespace");
        let ns = if !kind.namespaced {
            ""
        } else if !ref_ns.is_empty() {
            ref_ns
        } else if !self.attrs.namespace.is_empty() {
            self.attrs.namespace.as_str()
        } else {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                    .into(),
            );
        };
        if !ref_ns.is_empty() && !kind.namespaced {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            );
        }
        let selector = pr.get("selector").filter(|s| !s.is_null());
        let name = str_of("name");
        let found: Vec<Option<Arc<Value>>> = if !name.is_empty() {
            if selector.is_some() {
                return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
            }
            self.storage
                .get(&kind.key, ns, name)
                .into_iter()
                .map(Some)
                .collect()
        } else if let Some(sel) = selector {
            let sel = parse_selector(Some(sel))?;
            let listed = self
                .storage
                .list(&kind.key, kind.namespaced.then_some(ns))
                .0;
            listed
                .into_iter()
                .filter(|o| sel.as_ref().is_none_or(|s| s.matches(&labels_of(Some(o)))))
                .map(Some)
                .collect()
        } else {
            return Err("one of name or selector must be provided".into());
        };
        // Required by the API; a binding stored without it is taken as `Deny`.
        if found.is_empty() && str_of("parameterNotFoundAction") != "Allow" {
            return Err(
                "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
            );
        }
        Ok(found)
    }
}

/// A `paramKind` resolved: the storage key of its resource and its scope.
#[derive(Clone, Debug)]
struct ParamResource {
    key: String,
    namespaced: bool,
}

/// The built-in kinds by (group, version, kind).
fn builtin_kinds() -> &'static HashMap<(String, String, String), ParamResource> {
    static KINDS: OnceLock<HashMap<(String, String, String), ParamResource>> = OnceLock::new();
    KINDS.get_or_init(|| {
        crate::registry::builtin_resources()
            .into_iter()
            .map(|d| {
                let key = d.storage_key();
                (
                    (d.group, d.version, d.kind),
                    ParamResource {
                        key,
                        namespaced: d.namespaced,
                    },
                )
            })
            .collect()
    })
}

/// How a request matched a policy: the version of the rule (the request's, or under
/// `matchPolicy: Equivalent` another one its resource is served in).
#[derive(Clone, Debug)]
struct Matched {
    version: String,
}

/// The rules under `key` of a `matchConstraints`/`matchResources`.
fn rules_of<'v>(m: &'v Value, key: &str) -> &'v [Value] {
    m.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Whether `items` holds `*` or `wanted`.
fn exact_or_wildcard(items: Option<&Value>, wanted: &str) -> bool {
    items.and_then(Value::as_array).is_some_and(|a| {
        a.iter()
            .any(|i| matches!(i.as_str(), Some(s) if s == "*" || s == wanted))
    })
}

/// A `RuleWithOperations` against the request, as if made in `version`
/// (`admission/plugin/webhook/predicates/rules.Matcher`).
fn rule_matches(rule: &Value, a: &Attributes, version: &str) -> bool {
    let is_namespaces = a.group.is_empty() && a.resource == "namespaces";
    let scope = match rule.get("scope").and_then(Value::as_str) {
        None | Some("*") => true,
        Some("Namespaced") => !is_namespaces && !a.namespace.is_empty(),
        Some("Cluster") => is_namespaces || a.namespace.is_empty(),
        Some(_) => false,
    };
    let resource = rule
        .get("resources")
        .and_then(Value::as_array)
        .is_some_and(|rs| {
            rs.iter().filter_map(Value::as_str).any(|r| {
                let (res, sub) = r.split_once('/').unwrap_or((r, ""));
                (res == "*" || res == a.resource) && (sub == "*" || sub == a.subresource)
            })
        });
    scope
        && exact_or_wildcard(rule.get("operations"), a.operation.as_str())
        && exact_or_wildcard(rule.get("apiGroups"), &a.group)
        && exact_or_wildcard(rule.get("apiVersions"), version)
        && resource
}

/// A `metav1.LabelSelector`: `None` when absent or empty (everything matches).
fn parse_selector(v: Option<&Value>) -> Result<Option<LabelSelector>, String> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let typed: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(v.clone()).map_err(|e| format!("Internal error occurred: {e}"))?;
    let sel =
        LabelSelector::from_k8s(&typed).map_err(|e| format!("Internal error occurred: {e}"))?;
    Ok((!sel.is_empty()).then_some(sel))
}

/// The labels of an object (none for `None`).
fn labels_of(v: Option<&Value>) -> BTreeMap<String, String> {
    v.map(crate::registry::meta::labels).unwrap_or_default()
}

/// `objectSelector`: matches when the new or the old object's labels do.
fn object_selector_matches(selector: Option<&Value>, a: &Attributes) -> Result<bool, String> {
    let Some(sel) = parse_selector(selector)? else {
        return Ok(true);
    };
    let matches = |o: Option<&Value>| o.is_some_and(|o| sel.matches(&labels_of(Some(o))));
    Ok(matches(a.object.as_ref()) || matches(a.old_object.as_ref()))
}

/// The Namespace as `namespaceObject` shows it (`cel.CreateNamespaceObject`): spec, status
/// and some of the metadata, no apiVersion or kind.
fn trimmed_namespace(ns: &Value) -> Value {
    const META: [&str; 12] = [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
    ];
    let mut out = Map::new();
    if let Some(meta) = ns.get("metadata").and_then(Value::as_object) {
        let kept: Map<String, Value> = meta
            .iter()
            .filter(|(k, _)| META.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.insert("metadata".into(), Value::Object(kept));
    }
    for k in ["spec", "status"] {
        if let Some(v) = ns.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    Value::Object(out)
}

/// `request` (an `admission.k8s.io/v1` AdmissionRequest as JSON, its empty optional fields
/// left out): `kind`/`resource` as the policy matched the request, `requestKind`/
/// `requestResource` as it was made.
fn request_value(a: &Attributes, matched: &Matched) -> Value {
    let gvk = |version: &str| json!({"group": a.group, "version": version, "kind": a.kind});
    let gvr = |version: &str| json!({"group": a.group, "version": version, "resource": a.resource});
    let mut user = Map::new();
    if !a.user.name.is_empty() {
        user.insert("username".into(), json!(a.user.name));
    }
    if !a.user.uid.is_empty() {
        user.insert("uid".into(), json!(a.user.uid));
    }
    if !a.user.groups.is_empty() {
        user.insert("groups".into(), json!(a.user.groups));
    }
    if !a.user.extra.is_empty() {
        user.insert("extra".into(), json!(a.user.extra));
    }
    let mut r = Map::new();
    r.insert("kind".into(), gvk(&matched.version));
    r.insert("resource".into(), gvr(&matched.version));
    if !a.subresource.is_empty() {
        r.insert("subResource".into(), json!(a.subresource));
    }
    r.insert("requestKind".into(), gvk(&a.version));
    r.insert("requestResource".into(), gvr(&a.version));
    if !a.subresource.is_empty() {
        r.insert("requestSubResource".into(), json!(a.subresource));
    }
    if !a.name.is_empty() {
        r.insert("name".into(), json!(a.name));
    }
    if !a.namespace.is_empty() {
        r.insert("namespace".into(), json!(a.namespace));
    }
    r.insert("operation".into(), json!(a.operation.as_str()));
    r.insert("userInfo".into(), Value::Object(user));
    r.insert("dryRun".into(), json!(a.dry_run));
    if let Some(o) = a.options.as_ref().filter(|o| !o.is_null()) {
        r.insert("options".into(), o.clone());
    }
    Value::Object(r)
}

/// A JSON value as CEL sees it without a schema (integers as `int`, other numbers `double`).
fn to_cel(v: &Value) -> cel::Value {
    crd_cel::to_cel(v, None)
}

/// The variables every expression of one evaluation sees.
struct Input {
    object: cel::Value,
    old_object: cel::Value,
    request: cel::Value,
    params: cel::Value,
    namespace: cel::Value,
}

/// A parsed expression and the `variables.<name>` it reads.
struct Program {
    expr: cel::IdedExpr,
    /// Top-level names it refers to (other than comprehension variables, types and
    /// namespaces of functions).
    names: Vec<String>,
    /// The composited variables it reads; `None` when it uses `variables` other than as
    /// `variables.<name>` (then all are evaluated).
    variables: Option<Vec<String>>,
}

/// Variables every expression may use; `params` only with a `paramKind`.
const DECLARED: [&str; 5] = [
    "object",
    "oldObject",
    "request",
    "namespaceObject",
    "variables",
];

impl Program {
    /// Parses `src` (cached by text), then checks it names only declared variables.
    fn compile(src: &str, has_params: bool, extra: &[&str]) -> Result<Arc<Program>, String> {
        let p = parsed(src)?;
        let undeclared = p.names.iter().find(|n| {
            !DECLARED.contains(&n.as_str())
                && !extra.contains(&n.as_str())
                && (!has_params || n.as_str() != "params")
        });
        match undeclared {
            Some(n) => Err(format!(
                "ERROR: <input>: undeclared reference to '{n}' (in container '')"
            )),
            None => Ok(p),
        }
    }
}

/// Parsed expressions by their text, so that requests do not parse a policy again; cleared
/// when it holds more than [`PARSED_CACHE_ENTRIES`].
fn parsed(src: &str) -> Result<Arc<Program>, String> {
    type Cache = HashMap<String, Result<Arc<Program>, String>>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    const PARSED_CACHE_ENTRIES: usize = 4096;
    let cache = CACHE.get_or_init(Default::default);
    let lock = || cache.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = lock().get(src) {
        return found.clone();
    }
    let result = crd_cel::compile(src).map(|expr| {
        let names = {
            let refs = expr.references();
            let mut names: Vec<String> = refs
                .variables()
                .into_iter()
                .filter(|v| {
                    !crd_cel::declared_by_macro(&expr, v) && !crd_cel::is_type_or_namespace(v)
                })
                .map(str::to_string)
                .collect();
            names.sort();
            names
        };
        let variables = variables_read(&expr);
        Arc::new(Program {
            expr,
            names,
            variables,
        })
    });
    let mut c = lock();
    if c.len() >= PARSED_CACHE_ENTRIES {
        c.clear();
    }
    c.insert(src.to_string(), result.clone());
    result
}

/// The names `expr` reads as `variables.<name>`; `None` when it uses `variables` otherwise.
fn variables_read(expr: &cel::IdedExpr) -> Option<Vec<String>> {
    use cel::common::ast::{EntryExpr, Expr};
    let mut found = Vec::new();
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match &e.expr {
            Expr::Select(s) => match &s.operand.expr {
                Expr::Ident(root) if root == "variables" => {
                    if !found.contains(&s.field) {
                        found.push(s.field.clone());
                    }
                }
                _ => stack.push(&s.operand),
            },
            Expr::Ident(name) if name == "variables" => return None,
            Expr::Call(c) => {
                stack.extend(c.target.as_deref());
                stack.extend(&c.args);
            }
            Expr::Comprehension(c) => stack.extend([
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]),
            Expr::List(l) => stack.extend(&l.elements),
            Expr::Map(m) => stack.extend(m.entries.iter().flat_map(|en| match &en.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })),
            Expr::Struct(s) => stack.extend(s.entries.iter().flat_map(|en| match &en.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })),
            _ => {}
        }
    }
    Some(found)
}

/// One expression of a policy: its text and its program (or compilation error).
struct Expression {
    text: String,
    program: Result<Arc<Program>, String>,
}

impl Expression {
    fn new(text: &str, has_params: bool, declared_variables: &[String]) -> Self {
        Self::new_with(text, has_params, declared_variables, &[])
    }

    /// Like [`Expression::new`], with `extra` names declared too (function namespaces).
    fn new_with(
        text: &str,
        has_params: bool,
        declared_variables: &[String],
        extra: &[&str],
    ) -> Self {
        let program = Program::compile(text, has_params, extra).and_then(|p| {
            let unknown = p
                .variables
                .iter()
                .flatten()
                .find(|v| !declared_variables.contains(v));
            match unknown {
                Some(v) => Err(format!("ERROR: <input>: undefined field '{v}'")),
                None => Ok(p),
            }
        });
        Self {
            text: text.to_string(),
            program,
        }
    }
}

/// A validation: expression, messages and reason.
struct Validation {
    expression: Expression,
    message: String,
    message_expression: Option<Expression>,
    reason: Option<String>,
}

/// A policy's expressions, compiled.
struct CompiledPolicy {
    /// `spec.variables` in order.
    variables: Vec<(String, Expression)>,
    match_conditions: Vec<Expression>,
    validations: Vec<Validation>,
}

impl CompiledPolicy {
    /// Compiles the expressions of a policy's spec. Each expression's parse is cached by its
    /// text, so this only walks the spec.
    fn get(spec: &Value, has_params: bool) -> Self {
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let items = |k: &str| {
            spec.get(k)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let mut names: Vec<String> = Vec::new();
        let mut variables = Vec::new();
        for v in items("variables") {
            let name = text(&v, "name");
            let e = Expression::new(&text(&v, "expression"), has_params, &names);
            names.push(name.clone());
            variables.push((name, e));
        }
        let match_conditions = items("matchConditions")
            .iter()
            .map(|m| Expression::new(&text(m, "expression"), has_params, &names))
            .collect();
        let validations = items("validations")
            .iter()
            .map(|v| Validation {
                expression: Expression::new(&text(v, "expression"), has_params, &names),
                message: text(v, "message"),
                message_expression: v
                    .get("messageExpression")
                    .and_then(Value::as_str)
                    .filter(|m| !m.is_empty())
                    .map(|m| Expression::new(m, has_params, &names)),
                reason: v
                    .get("reason")
                    .and_then(Value::as_str)
                    .filter(|r| !r.is_empty())
                    .map(str::to_string),
            })
            .collect();
        Self {
            variables,
            match_conditions,
            validations,
        }
    }

    /// Runs the match conditions, then the validations, adding their failures.
    fn evaluate(&self, input: &Input, fail: FailurePolicy, out: &mut Vec<Failure>) {
        let mut vars = Variables {
            policy: self,
            values: HashMap::new(),
            mutating: false,
        };
        let on_error = |message: String, out: &mut Vec<Failure>| {
            if fail == FailurePolicy::Fail {
                out.push(Failure {
                    message,
                    reason: None,
                });
            }
        };
        let mut errors: Vec<String> = Vec::new();
        for mc in &self.match_conditions {
            match vars.run(mc, input) {
                Ok(cel::Value::Bool(false)) => return,
                Ok(_) => {}
                Err(e) => {
                    if !errors.contains(&e) {
                        errors.push(e);
                    }
                }
            }
        }
        match errors.len() {
            0 => {}
            1 => return on_error(errors.remove(0), out),
            _ => return on_error(format!("[{}]", errors.join(", ")), out),
        }
        for v in &self.validations {
            match vars.run(&v.expression, input) {
                Ok(cel::Value::Bool(true)) => {}
                Err(e) => on_error(e, out),
                Ok(_) => {
                    let from_expression = v
                        .message_expression
                        .as_ref()
                        .and_then(|me| match vars.run(me, input) {
                            Ok(cel::Value::String(s)) => Some(s.trim().to_string()),
                            _ => None,
                        })
                        .filter(|m| m.len() <= MAX_MESSAGE_EXPRESSION_BYTES && !m.contains('\n'))
                        .unwrap_or_default();
                    let message = if !from_expression.is_empty() {
                        from_expression
                    } else if !v.message.trim().is_empty() {
                        v.message.trim().to_string()
                    } else {
                        format!("failed expression: {}", v.expression.text.trim())
                    };
                    out.push(Failure {
                        message,
                        reason: v.reason.clone(),
                    });
                }
            }
        }
    }
}

/// The composited variables of one evaluation, each evaluated when first read.
struct Variables<'p> {
    policy: &'p CompiledPolicy,
    values: HashMap<String, Result<cel::Value, String>>,
    /// A mutating policy's evaluation: its library (`jsonpatch.escapeKey`) is declared.
    mutating: bool,
}

impl Variables<'_> {
    /// The value of variable `name` (the error text of the expression reading it when it
    /// fails, `composited variable "x" fails to evaluate: ...`).
    fn value(&mut self, name: &str, input: &Input) -> Result<cel::Value, String> {
        if let Some(v) = self.values.get(name) {
            return v.clone();
        }
        let policy = self.policy;
        // A variable reading `variables` as a whole must not evaluate itself again.
        self.values
            .insert(name.to_string(), Err(format!("no such key: {name}")));
        let result = match policy.variables.iter().find(|(n, _)| n == name) {
            None => Err(format!("no such key: {name}")),
            Some((_, e)) => match &e.program {
                Err(err) => Err(format!(
                    "composited variable {} fails to evaluate: compilation error: {err}",
                    go_quote(name)
                )),
                Ok(p) => self.eval(p, input).map_err(|err| {
                    format!(
                        "composited variable {} fails to evaluate: {err}",
                        go_quote(name)
                    )
                }),
            },
        };
        self.values.insert(name.to_string(), result.clone());
        result
    }

    /// Runs an expression of the policy: its value, or kube-apiserver's error text
    /// (`compilation error: ...`, `expression '...' resulted in error: ...`).
    fn run(&mut self, e: &Expression, input: &Input) -> Result<cel::Value, String> {
        let p = e
            .program
            .as_ref()
            .map_err(|err| format!("compilation error: {err}"))?;
        self.eval(p, input)
            .map_err(|err| format!("expression '{}' resulted in error: {err}", e.text))
    }

    /// Evaluates a program with the variables it reads; the error is cel-go's text.
    fn eval(&mut self, p: &Program, input: &Input) -> Result<cel::Value, String> {
        let names: Vec<String> = match &p.variables {
            Some(names) => names.clone(),
            None => self
                .policy
                .variables
                .iter()
                .map(|(n, _)| n.clone())
                .collect(),
        };
        let mut bound: HashMap<String, cel::Value> = HashMap::new();
        let mut failed: Vec<(String, String)> = Vec::new();
        for n in names {
            match self.value(&n, input) {
                Ok(v) => {
                    bound.insert(n, v);
                }
                Err(e) => failed.push((n, e)),
            }
        }
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut ctx = cel::Context::with_env(Arc::clone(crd_cel::env()));
            ctx.add_variable_from_value("object", input.object.clone());
            ctx.add_variable_from_value("oldObject", input.old_object.clone());
            ctx.add_variable_from_value("request", input.request.clone());
            ctx.add_variable_from_value("params", input.params.clone());
            ctx.add_variable_from_value("namespaceObject", input.namespace.clone());
            ctx.add_variable_from_value("variables", cel::Value::Map(bound.into()));
            if self.mutating {
                let _ = ctx.add_function("jsonpatch.escapeKey", mutating::escape_key);
            }
            cel::Value::resolve(&p.expr, &ctx)
        }));
        match result {
            Ok(Ok(v)) => Ok(v),
            // A variable that failed is left out: reading it is its error.
            Ok(Err(cel::ExecutionError::NoSuchKey(k)))
                if failed.iter().any(|(n, _)| n == k.as_str()) =>
            {
                let (_, e) = failed
                    .into_iter()
                    .find(|(n, _)| n == k.as_str())
                    .unwrap_or_default();
                Err(e)
            }
            Ok(Err(e)) => Err(go_error_text(&e)),
            Err(_) => Err("internal error".into()),
        }
    }
}

/// cel-go's text for the errors it shares with the `cel` crate.
fn go_error_text(e: &cel::ExecutionError) -> String {
    match e {
        cel::ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        cel::ExecutionError::DivisionByZero(_) => "division by zero".into(),
        cel::ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        other => other.to_string(),
    }
}

pub(crate) mod mutating;

#[cfg(test)]
mod tests;
