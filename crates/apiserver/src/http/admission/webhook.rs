//! Admission webhooks (`admissionregistration.k8s.io/v1` Validating- and
//! MutatingWebhookConfigurations), dispatched as kube-apiserver v1.36 does: which webhooks
//! a request matches (`rules`, `namespaceSelector`, `objectSelector`, `matchConditions`,
//! `matchPolicy`), the `AdmissionReview` sent, and how answers, failures and
//! `failurePolicy` turn into the request's outcome.

use super::call;
use super::{Attributes, Operation};
use crate::error::ApiError;
use crate::http::api::ApiServer;
use kubewright_core::{LabelSelector, Status};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;

/// One webhook of a configuration.
#[derive(Clone, Debug)]
pub(crate) struct Hook {
    pub name: String,
    client_config: Value,
    rules: Vec<Rule>,
    ignore_failures: bool,
    exact: bool,
    namespace_selector: Option<Value>,
    object_selector: Option<Value>,
    side_effects: String,
    timeout: Duration,
    pub reinvoke_if_needed: bool,
    match_conditions: Vec<(String, String)>,
}

#[derive(Clone, Debug, Default)]
struct Rule {
    operations: Vec<String>,
    groups: Vec<String>,
    versions: Vec<String>,
    resources: Vec<String>,
    scope: String,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn text(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The webhooks of every configuration of one kind, sorted by configuration name.
pub(crate) fn hooks(srv: &ApiServer, mutating: bool) -> Vec<Hook> {
    let plural = if mutating {
        "mutatingwebhookconfigurations"
    } else {
        "validatingwebhookconfigurations"
    };
    let (mut configs, _) = srv
        .storage
        .list(&format!("admissionregistration.k8s.io/{plural}"), None);
    configs.sort_by(|a, b| {
        a.pointer("/metadata/name")
            .and_then(Value::as_str)
            .cmp(&b.pointer("/metadata/name").and_then(Value::as_str))
    });
    let mut out = Vec::new();
    for c in configs {
        for w in c
            .get("webhooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let rules = w
                .get("rules")
                .and_then(Value::as_array)
                .map(|rs| {
                    rs.iter()
                        .map(|r| Rule {
                            operations: strings(r.get("operations")),
                            groups: strings(r.get("apiGroups")),
                            versions: strings(r.get("apiVersions")),
                            resources: strings(r.get("resources")),
                            scope: r
                                .get("scope")
                                .and_then(Value::as_str)
                                .unwrap_or("*")
                                .to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let conditions = w
                .get("matchConditions")
                .and_then(Value::as_array)
                .map(|cs| {
                    cs.iter()
                        .map(|c| (text(c, "name"), text(c, "expression")))
                        .collect()
                })
                .unwrap_or_default();
            out.push(Hook {
                name: text(w, "name"),
                client_config: w.get("clientConfig").cloned().unwrap_or(Value::Null),
                rules,
                ignore_failures: w.get("failurePolicy").and_then(Value::as_str) == Some("Ignore"),
                exact: w.get("matchPolicy").and_then(Value::as_str) == Some("Exact"),
                namespace_selector: w.get("namespaceSelector").cloned(),
                object_selector: w.get("objectSelector").cloned(),
                side_effects: text(w, "sideEffects"),
                timeout: Duration::from_secs(
                    w.get("timeoutSeconds")
                        .and_then(Value::as_u64)
                        .unwrap_or(10)
                        .clamp(1, 30),
                ),
                reinvoke_if_needed: w.get("reinvocationPolicy").and_then(Value::as_str)
                    == Some("IfNeeded"),
                match_conditions: conditions,
            });
        }
    }
    out
}

/// The resource a webhook is called for: the request's, or (matchPolicy Equivalent) the
/// same resource in another version, into which the objects are converted.
#[derive(Clone, Debug)]
pub(crate) struct Invocation {
    pub version: String,
    pub kind: String,
}

fn rule_matches(r: &Rule, attrs: &Attributes, version: &str) -> bool {
    let is_ns = attrs.group.is_empty() && attrs.resource == "namespaces";
    let scope = match r.scope.as_str() {
        "Namespaced" => !is_ns && !attrs.namespace.is_empty(),
        "Cluster" => is_ns || attrs.namespace.is_empty(),
        _ => true,
    };
    let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
    let resource = r.resources.iter().any(|res| {
        let (res, sub) = res.split_once('/').unwrap_or((res, ""));
        (res == "*" || res == attrs.resource) && (sub == "*" || sub == attrs.subresource)
    });
    scope
        && any(&r.operations, attrs.operation.as_str())
        && any(&r.groups, &attrs.group)
        && any(&r.versions, version)
        && resource
}

impl Hook {
    /// Whether the hook's rules match the request, in its version or (Equivalent) another
    /// served version of the same resource.
    fn matches_rules(&self, srv: &ApiServer, attrs: &Attributes) -> Option<Invocation> {
        if self
            .rules
            .iter()
            .any(|r| rule_matches(r, attrs, &attrs.version))
        {
            return Some(Invocation {
                version: attrs.version.clone(),
                kind: attrs.kind.clone(),
            });
        }
        if self.exact {
            return None;
        }
        let mut others: Vec<(String, String)> = srv
            .registry
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .all()
            .filter(|d| {
                d.group == attrs.group && d.plural == attrs.resource && d.version != attrs.version
            })
            .map(|d| (d.version.clone(), d.kind.clone()))
            .collect();
        others.sort_by_key(|(v, _)| std::cmp::Reverse(crate::registry::version_priority(v)));
        others
            .into_iter()
            .find(|(v, _)| self.rules.iter().any(|r| rule_matches(r, attrs, v)))
            .map(|(version, kind)| Invocation { version, kind })
    }

    fn matches_namespace(&self, srv: &ApiServer, attrs: &Attributes) -> bool {
        let Some(sel) = self.namespace_selector.as_ref().and_then(selector) else {
            return true;
        };
        let is_ns = attrs.group.is_empty() && attrs.resource == "namespaces";
        if attrs.namespace.is_empty() && !is_ns {
            // Cluster-scoped objects are never exempted.
            return true;
        }
        if sel.is_empty() {
            return true;
        }
        let labels = if is_ns
            && attrs.subresource.is_empty()
            && matches!(attrs.operation, Operation::Create | Operation::Update)
        {
            attrs.object.as_ref().map(crate::registry::meta::labels)
        } else {
            let name = if is_ns { &attrs.name } else { &attrs.namespace };
            srv.storage
                .get("/namespaces", "", name)
                .map(|n| crate::registry::meta::labels(&n))
        };
        labels.is_some_and(|l| sel.matches(&l))
    }

    fn matches_object(&self, attrs: &Attributes) -> bool {
        let Some(sel) = self.object_selector.as_ref().and_then(selector) else {
            return true;
        };
        if sel.is_empty() {
            return true;
        }
        [&attrs.object, &attrs.old_object]
            .into_iter()
            .flatten()
            .any(|o| sel.matches(&crate::registry::meta::labels(o)))
    }
}

/// A `metav1.LabelSelector` as JSON; `None` when absent (matches everything). A selector
/// that does not parse matches nothing (the configuration's validation refuses those).
fn selector(v: &Value) -> Option<LabelSelector> {
    if v.is_null() {
        return None;
    }
    let typed: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(v.clone()).ok()?;
    Some(LabelSelector::from_k8s(&typed).unwrap_or_else(|_| {
        // Unparseable: a selector no object satisfies.
        LabelSelector::parse("kubewright.io/unmatchable,!kubewright.io/unmatchable")
            .unwrap_or_default()
    }))
}

/// `kind` and `resource` as an AdmissionRequest spells them.
fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn gvr(group: &str, version: &str, resource: &str) -> Value {
    json!({"group": group, "version": version, "resource": resource})
}

fn user_info(attrs: &Attributes) -> Value {
    let mut u = json!({"username": attrs.user.name});
    if !attrs.user.uid.is_empty() {
        u["uid"] = json!(attrs.user.uid);
    }
    if !attrs.user.groups.is_empty() {
        u["groups"] = json!(attrs.user.groups);
    }
    if !attrs.user.extra.is_empty() {
        u["extra"] = json!(attrs.user.extra);
    }
    u
}

/// The `request` of an AdmissionReview (also CEL's `request` in matchConditions).
fn admission_request(attrs: &Attributes, inv: &Invocation, uid: &str, objects: &Objects) -> Value {
    let is_ns = attrs.group.is_empty() && attrs.resource == "namespaces";
    let mut r = json!({
        "uid": uid,
        "kind": gvk(&attrs.group, &inv.version, &inv.kind),
        "resource": gvr(&attrs.group, &inv.version, &attrs.resource),
        "requestKind": gvk(&attrs.group, &attrs.version, &attrs.kind),
        "requestResource": gvr(&attrs.group, &attrs.version, &attrs.resource),
        "operation": attrs.operation.as_str(),
        "userInfo": user_info(attrs),
        "object": objects.object.clone().unwrap_or(Value::Null),
        "oldObject": objects.old.clone().unwrap_or(Value::Null),
        "dryRun": attrs.dry_run,
        "options": attrs.options.clone().unwrap_or(Value::Null),
    });
    if !attrs.subresource.is_empty() {
        r["subResource"] = json!(attrs.subresource);
        r["requestSubResource"] = json!(attrs.subresource);
    }
    if !attrs.name.is_empty() {
        r["name"] = json!(attrs.name);
    }
    let ns = if is_ns { &attrs.name } else { &attrs.namespace };
    if !ns.is_empty() {
        r["namespace"] = json!(ns);
    }
    r
}

/// The objects as a webhook sees them (converted to the version it matched).
struct Objects {
    object: Option<Value>,
    old: Option<Value>,
}

async fn objects_for(
    srv: &ApiServer,
    attrs: &Attributes,
    inv: &Invocation,
) -> Result<Objects, ApiError> {
    if inv.version == attrs.version {
        return Ok(Objects {
            object: attrs.object.clone(),
            old: attrs.old_object.clone(),
        });
    }
    let convert = |o: &Option<Value>| o.clone();
    let (object, old) = (convert(&attrs.object), convert(&attrs.old_object));
    let mut out = Vec::new();
    for o in [object, old] {
        out.push(match o {
            Some(v) if v.get("apiVersion").is_some() && attrs.subresource.is_empty() => Some(
                crate::http::conversion::convert_one(
                    srv,
                    &attrs.group,
                    &attrs.resource,
                    v,
                    &inv.version,
                )
                .await?,
            ),
            other => other,
        });
    }
    let old = out.pop().flatten();
    let object = out.pop().flatten();
    Ok(Objects { object, old })
}

/// Why a webhook is not called, or the error that stops the request before calling it.
enum Skip {
    No,
    Err(ApiError),
}

/// Whether `hook` is called for the request, and in which version (kube-apiserver's
/// `ShouldCallHook`: rules, then namespace and object selectors, then matchConditions).
fn should_call(
    srv: &ApiServer,
    hook: &Hook,
    attrs: &Attributes,
) -> Result<Option<Invocation>, ApiError> {
    let Some(inv) = hook.matches_rules(srv, attrs) else {
        return Ok(None);
    };
    if !hook.matches_namespace(srv, attrs) || !hook.matches_object(attrs) {
        return Ok(None);
    }
    match match_conditions(hook, attrs, &inv) {
        Ok(true) => Ok(Some(inv)),
        Ok(false) => Ok(None),
        Err(Skip::No) => Ok(None),
        Err(Skip::Err(e)) => Err(e),
    }
}

fn match_conditions(hook: &Hook, attrs: &Attributes, inv: &Invocation) -> Result<bool, Skip> {
    if hook.match_conditions.is_empty() {
        return Ok(true);
    }
    let objects = Objects {
        object: attrs.object.clone(),
        old: attrs.old_object.clone(),
    };
    let request = admission_request(attrs, inv, "", &objects);
    let object = attrs.object.clone().unwrap_or(Value::Null);
    let old = attrs.old_object.clone().unwrap_or(Value::Null);
    let vars = [
        ("object", &object),
        ("oldObject", &old),
        ("request", &request),
    ];
    let mut errors = Vec::new();
    for (name, expr) in &hook.match_conditions {
        match crate::crd::cel::evaluate(expr, &vars) {
            Ok(cel::Value::Bool(true)) => {}
            // Any false condition skips the webhook, errors or not.
            Ok(cel::Value::Bool(false)) => return Ok(false),
            Ok(_) => errors.push(format!(
                "expression '{name}' resulted in error: cel expression must evaluate to a bool"
            )),
            Err(e) => errors.push(format!("expression '{name}' resulted in error: {e}")),
        }
    }
    if errors.is_empty() {
        return Ok(true);
    }
    if hook.ignore_failures {
        return Err(Skip::No);
    }
    Err(Skip::Err(ApiError::internal(format!(
        "failed calling webhook \"{}\": {}",
        hook.name,
        errors.join(", ")
    ))))
}

/// What a webhook answered.
pub(crate) struct Answer {
    pub(crate) allowed: bool,
    pub(crate) status: Option<Value>,
    /// The JSON patch, base64-decoded.
    pub(crate) patch: Option<Vec<u8>>,
    pub(crate) warnings: Vec<String>,
}

/// A failure to call the webhook or a bad answer: subject to `failurePolicy`.
pub(crate) struct CallError(pub(crate) String);

async fn call_hook(
    srv: &ApiServer,
    hook: &Hook,
    attrs: &Attributes,
    inv: &Invocation,
    mutating: bool,
) -> Result<(Answer, Objects), Result<CallError, ApiError>> {
    let objects = objects_for(srv, attrs, inv).await.map_err(Err)?;
    let uid = uuid::Uuid::new_v4().to_string();
    let review = json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": admission_request(attrs, inv, &uid, &objects),
    });
    let body = serde_json::to_vec(&review).unwrap_or_default();
    let raw = call::post(&srv.storage, &hook.client_config, body, hook.timeout)
        .await
        .map_err(|e| Ok(CallError(format!("failed to call webhook: {e}"))))?;
    let answer = read_answer(&raw, &uid, mutating).map_err(Ok)?;
    Ok((answer, objects))
}

/// Reads a webhook's answer to the review `uid` as kube-apiserver does: an
/// `admission.k8s.io/v1` AdmissionReview whose response has that uid, a base64 JSON patch
/// only from a mutating webhook and only with `patchType: JSONPatch`.
pub(crate) fn read_answer(raw: &[u8], uid: &str, mutating: bool) -> Result<Answer, CallError> {
    let invalid = |why: String| CallError(format!("received invalid webhook response: {why}"));
    let answer: Value = serde_json::from_slice(raw).map_err(|e| {
        CallError(format!(
            "failed to call webhook: couldn't get version/kind; json parse error: {}",
            go_decode_error(raw, &e)
        ))
    })?;
    let av = text(&answer, "apiVersion");
    let kind = text(&answer, "kind");
    if av != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        return Err(invalid(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={kind}",
            if av.is_empty() { "/" } else { av.as_str() }
        )));
    }
    let Some(resp) = answer.get("response").filter(|r| r.is_object()) else {
        return Err(invalid("webhook response was absent".into()));
    };
    let got = text(resp, "uid");
    if got != uid {
        return Err(invalid(format!(
            "expected response.uid=\"{uid}\", got \"{got}\""
        )));
    }
    let patch = match resp.get("patch").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => {
            use base64::Engine;
            Some(
                base64::engine::general_purpose::STANDARD
                    .decode(p)
                    .map_err(|e| CallError(format!("failed to call webhook: {e}")))?,
            )
        }
        _ => None,
    };
    let patch_type = resp.get("patchType").and_then(Value::as_str);
    if patch.is_some() {
        if !mutating {
            return Err(invalid(
                "validating webhook may not return response.patch".into(),
            ));
        }
        match patch_type {
            None => {
                return Err(invalid(
                    "webhook returned response.patch but not response.patchType".into(),
                ));
            }
            Some("JSONPatch") => {}
            Some(other) => {
                return Err(invalid(format!(
                    "webhook returned invalid response.patchType of \"{other}\""
                )));
            }
        }
    }
    Ok(Answer {
        allowed: resp
            .get("allowed")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        status: resp.get("status").cloned(),
        patch,
        warnings: strings(resp.get("warnings")),
    })
}

/// What client-go's decoder says of a body that is not a JSON object: it reads YAML too,
/// so text is a string scalar, which does not fit the struct it reads the kind into.
fn go_decode_error(raw: &[u8], _e: &serde_json::Error) -> String {
    if raw.iter().all(u8::is_ascii_whitespace) {
        return "unexpected end of JSON input".into();
    }
    let ty = match serde_json::from_slice::<Value>(raw) {
        Ok(Value::Object(_)) => return crate::error::go_json_error(raw),
        Ok(v) => crate::error::go_json_type(&v).unwrap_or("string"),
        Err(_) => "string",
    };
    format!(
        "json: cannot unmarshal {ty} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
    )
}

/// A denial: kube-apiserver's `ToStatusErr`, the webhook's Status with its message
/// prefixed (a code below 400 becomes 400).
fn denied(hook: &str, status: Option<&Value>) -> ApiError {
    let mut s: Status = status
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let denied_by = format!("admission webhook \"{hook}\" denied the request");
    if s.code < 400 {
        s.code = 400;
    }
    if s.status.is_empty() || s.status == "Success" {
        s.status = "Failure".into();
    }
    s.message = if !s.message.is_empty() {
        format!("{denied_by}: {}", s.message)
    } else if !s.reason.is_empty() {
        format!("{denied_by}: {}", s.reason)
    } else {
        format!("{denied_by} without explanation")
    };
    s.kind = "Status".into();
    s.api_version = "v1".into();
    s.metadata = Default::default();
    ApiError::from_status(s)
}

fn call_failed(hook: &str, why: &str) -> ApiError {
    let msg = format!("failed calling webhook \"{hook}\": {why}");
    let mut e = ApiError::internal(msg.clone());
    e.status.details = Some(kubewright_core::StatusDetails {
        causes: vec![kubewright_core::StatusCause {
            message: msg,
            ..Default::default()
        }],
        ..Default::default()
    });
    e
}

/// A dry run reaching a webhook that may have side effects.
fn side_effects_error(hook: &Hook) -> Option<ApiError> {
    (!matches!(hook.side_effects.as_str(), "None" | "NoneOnDryRun")).then(|| {
        ApiError::bad_request(format!(
            "admission webhook \"{}\" does not support dry run",
            hook.name
        ))
    })
}

/// Runs the mutating webhooks over `attrs.object`, applying their patches (with one
/// reinvocation of `IfNeeded` webhooks when a later one changed the object).
pub(crate) async fn mutate(
    srv: &ApiServer,
    attrs: &mut Attributes,
    warnings: &mut Vec<String>,
    basis: &mut Option<Value>,
) -> Result<bool, ApiError> {
    let hooks = hooks(srv, true);
    if hooks.is_empty() {
        return Ok(false);
    }
    let mut any_change = false;
    let mut invoked_reinvocable: HashSet<usize> = HashSet::new();
    let mut to_reinvoke: HashSet<usize> = HashSet::new();
    for round in 0..2 {
        if round == 1 && to_reinvoke.is_empty() {
            break;
        }
        for (i, hook) in hooks.iter().enumerate() {
            if round == 1 && !to_reinvoke.contains(&i) {
                continue;
            }
            let Some(inv) = should_call(srv, hook, attrs)? else {
                continue;
            };
            if attrs.dry_run
                && let Some(e) = side_effects_error(hook)
            {
                return Err(e);
            }
            let (answer, objects) = match call_hook(srv, hook, attrs, &inv, true).await {
                Ok(a) => a,
                Err(Err(e)) => return Err(e),
                Err(Ok(CallError(why))) if hook.ignore_failures => {
                    tracing::warn!(webhook = %hook.name, "failed calling webhook, failing open: {why}");
                    continue;
                }
                Err(Ok(CallError(why))) => return Err(call_failed(&hook.name, &why)),
            };
            warnings.extend(answer.warnings.iter().cloned());
            if !answer.allowed {
                return Err(denied(&hook.name, answer.status.as_ref()));
            }
            let changed = match &answer.patch {
                Some(p) => apply_patch(srv, hook, attrs, &inv, objects, p, basis).await?,
                None => false,
            };
            any_change |= changed;
            if changed && round == 0 {
                to_reinvoke.extend(invoked_reinvocable.iter().copied());
            }
            if hook.reinvoke_if_needed && round == 0 {
                invoked_reinvocable.insert(i);
            }
        }
    }
    Ok(any_change)
}

/// Applies a webhook's JSON patch to the object (in the version the webhook saw), and
/// converts the result back to the request's version. Whether it changed the object.
async fn apply_patch(
    srv: &ApiServer,
    hook: &Hook,
    attrs: &mut Attributes,
    inv: &Invocation,
    objects: Objects,
    patch: &[u8],
    basis: &mut Option<Value>,
) -> Result<bool, ApiError> {
    let ops: json_patch::Patch =
        serde_json::from_slice(patch).map_err(|e| ApiError::internal(e.to_string()))?;
    if ops.0.is_empty() {
        return Ok(false);
    }
    let Some(mut obj) = objects.object else {
        return Err(ApiError::internal(format!(
            "admission webhook \"{}\" attempted to modify the object, which is not supported for this operation",
            hook.name
        )));
    };
    let before = obj.clone();
    // Bounded as a user's patch is (kube-apiserver's copy limit is process-wide): a patch
    // of a few dozen `copy` operations would otherwise double the object each time.
    if let Err(failure) = crate::http::limits::apply_json_patch_bounded(&mut obj, &ops.0) {
        return Err(match failure {
            crate::http::limits::JsonPatchFailure::TooDeep { .. } => ApiError::internal(format!(
                "admission webhook \"{}\" returned a patch nesting the object too deeply",
                hook.name
            )),
            other => ApiError::internal(other.message(&ops.0)),
        });
    }
    if obj == before {
        return Ok(false);
    }
    if inv.version != attrs.version && attrs.subresource.is_empty() {
        obj = crate::http::conversion::convert_one(
            srv,
            &attrs.group,
            &attrs.resource,
            obj,
            &attrs.version,
        )
        .await?;
    }
    let changed = attrs.object.as_ref() != Some(&obj);
    if changed && basis.is_none() {
        *basis = attrs.object.clone();
    }
    attrs.object = Some(obj);
    Ok(changed)
}

/// The JSON patch library's (evanphx/json-patch) text for an operation that does not apply.
pub(crate) fn patch_error(op: &json_patch::PatchOperation) -> String {
    use json_patch::PatchOperation as P;
    match op {
        P::Replace(o) => format!(
            "replace operation does not apply: doc is missing path: {}: missing value",
            o.path
        ),
        P::Add(o) => format!(
            "add operation does not apply: doc is missing path: \"{}\": missing value",
            o.path
        ),
        P::Remove(o) => format!(
            "remove operation does not apply: doc is missing path: \"{}\": missing value",
            o.path
        ),
        P::Move(o) => format!(
            "move operation does not apply: doc is missing from path: \"{}\": missing value",
            o.from
        ),
        P::Copy(o) => format!(
            "copy operation does not apply: doc is missing from path: \"{}\": missing value",
            o.from
        ),
        P::Test(o) => format!("testing value {} failed: test failed", o.path),
    }
}

/// Runs the validating webhooks (all at once, like kube-apiserver); the first failure in
/// webhook order is the request's.
pub(crate) async fn validate(
    srv: &ApiServer,
    attrs: &Attributes,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let hooks = hooks(srv, false);
    if hooks.is_empty() {
        return Ok(());
    }
    let mut calls = Vec::new();
    for hook in &hooks {
        let Some(inv) = should_call(srv, hook, attrs)? else {
            continue;
        };
        if attrs.dry_run
            && let Some(e) = side_effects_error(hook)
        {
            return Err(e);
        }
        calls.push(async move { (hook, call_hook(srv, hook, attrs, &inv, false).await) });
    }
    let results = futures::future::join_all(calls).await;
    let mut first: Option<ApiError> = None;
    for (hook, result) in results {
        let err = match result {
            Ok((answer, _)) => {
                warnings.extend(answer.warnings.iter().cloned());
                if answer.allowed {
                    continue;
                }
                denied(&hook.name, answer.status.as_ref())
            }
            Err(Err(e)) => e,
            Err(Ok(CallError(why))) if hook.ignore_failures => {
                tracing::warn!(webhook = %hook.name, "failed calling webhook, failing open: {why}");
                continue;
            }
            Err(Ok(CallError(why))) => call_failed(&hook.name, &why),
        };
        first.get_or_insert(err);
    }
    match first {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
