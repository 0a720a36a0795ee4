//! kube-apiserver's `PodSecurity` admission plugin: the Pod Security Standards
//! (`privileged`, `baseline`, `restricted`) a namespace selects with its
//! `pod-security.kubernetes.io/{enforce,warn,audit}[-version]` labels.
//!
//! - **Pods** (create, and updates that change containers or images; the
//!   `ephemeralcontainers` and `resize` subresources too): the `enforce` level refuses
//!   a violating pod with 403 `pods "x" is forbidden: violates PodSecurity
//!   "restricted:latest": <reason> (<detail>), ...`; the `warn` level admits it with
//!   the warning `would violate PodSecurity "<level>:<version>": ...`.
//! - **Workloads** with a pod template (Deployments, ReplicaSets, StatefulSets,
//!   DaemonSets, Jobs, CronJobs, ReplicationControllers, PodTemplates): warnings only.
//! - **Namespaces**: invalid labels are 422; raising `enforce` warns about the existing
//!   pods that would violate it.
//!
//! Texts, check order and version rules follow pod-security-admission v0.36: `latest`
//! (and any version past it) evaluates the v1.35 rules, the newest any check has.
//! The audit annotations are not emulated (the embedded server has no audit log), and
//! no exemptions are configured, as with kube-apiserver's defaults.

use crate::error::ApiError;
use crate::http::admission::{Attributes, Operation};
use crate::http::api::ApiServer;
use kubewright_core::StatusCause;
use serde_json::Value;
use std::collections::BTreeSet;

const PREFIX: &str = "pod-security.kubernetes.io/";
/// The newest rules a check has (pod-security-admission v0.36).
const MAX_MINOR: u32 = 35;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    fn parse(s: &str) -> Option<Level> {
        match s {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// A policy version: `latest`, or `v1.<minor>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    Latest,
    Minor(u32),
}

impl Version {
    fn parse(s: &str) -> Option<Version> {
        if s == "latest" {
            return Some(Version::Latest);
        }
        let minor = s.strip_prefix("v1.")?;
        let canonical = minor == "0" || (!minor.starts_with('0') && !minor.is_empty());
        if !canonical || !minor.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        minor.parse().ok().map(Version::Minor)
    }

    /// The rules evaluated: the version, capped at the newest rules there are.
    fn rules(self) -> u32 {
        match self {
            Version::Latest => MAX_MINOR,
            Version::Minor(m) => m.min(MAX_MINOR),
        }
    }

    fn text(self) -> String {
        match self {
            Version::Latest => "latest".into(),
            Version::Minor(m) => format!("v1.{m}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LevelVersion {
    level: Level,
    version: Version,
}

impl LevelVersion {
    const PRIVILEGED: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };

    fn text(self) -> String {
        format!("{}:{}", self.level.as_str(), self.version.text())
    }
}

/// The policy of a namespace's labels, and the errors of its invalid labels.
struct Policy {
    enforce: LevelVersion,
    warn: LevelVersion,
    errors: Vec<StatusCause>,
}

fn label_error(key: &str, value: &str, why: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {why}", crate::error::go_quote(value)),
        field: format!("metadata.labels[{PREFIX}{key}]"),
    }
}

/// `PolicyToEvaluate`: an invalid enforce level fails closed (restricted), an invalid
/// warn or audit level open (privileged), an invalid version reads as `latest`; warn
/// takes enforce's level and version when only enforce is set and it is stricter.
fn policy_of(labels: Option<&serde_json::Map<String, Value>>) -> Policy {
    let mut p = Policy {
        enforce: LevelVersion::PRIVILEGED,
        warn: LevelVersion::PRIVILEGED,
        errors: Vec::new(),
    };
    let Some(labels) = labels else {
        return p;
    };
    let get = |k: &str| {
        labels
            .get(&format!("{PREFIX}{k}"))
            .map(|v| v.as_str().unwrap_or(""))
    };
    const LEVELS: &str = "must be one of privileged, baseline, restricted";
    const VERSIONS: &str = "must be \"latest\" or \"v1.x\"";
    let level = |key: &str, on_error: Level, errors: &mut Vec<StatusCause>| {
        get(key).map(|v| match Level::parse(v) {
            Some(l) => (l, true),
            None => {
                errors.push(label_error(key, v, LEVELS));
                (on_error, false)
            }
        })
    };
    let version = |key: &str, errors: &mut Vec<StatusCause>| {
        get(key).map(|v| {
            Version::parse(v).unwrap_or_else(|| {
                errors.push(label_error(key, v, VERSIONS));
                Version::Latest
            })
        })
    };
    let mut errors = Vec::new();
    let enforce = level("enforce", Level::Restricted, &mut errors);
    if let Some((l, _)) = enforce {
        p.enforce.level = l;
    }
    if let Some(v) = version("enforce-version", &mut errors) {
        p.enforce.version = v;
    }
    // Audit is parsed for its errors only (no audit log here).
    let _ = level("audit", Level::Privileged, &mut errors);
    let _ = version("audit-version", &mut errors);
    let warn = level("warn", Level::Privileged, &mut errors);
    if let Some((l, _)) = warn {
        p.warn.level = l;
    }
    let warn_version = version("warn-version", &mut errors);
    if let Some(v) = warn_version {
        p.warn.version = v;
    }
    if warn.is_none() && enforce.is_some_and(|(_, valid)| valid) && p.enforce.level > p.warn.level {
        p.warn.level = p.enforce.level;
        if warn_version.is_none() {
            p.warn.version = p.enforce.version;
        }
    }
    p.errors = errors;
    p
}

/// The pod-template resources, where the plugin only warns.
fn template_of<'a>(group: &str, resource: &str, obj: &'a Value) -> Option<Option<&'a Value>> {
    let spec = || obj.get("spec");
    Some(match (group, resource) {
        ("", "podtemplates") => obj.get("template"),
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => spec().and_then(|s| s.get("template")),
        ("batch", "cronjobs") => spec()
            .and_then(|s| s.get("jobTemplate"))
            .and_then(|j| j.get("spec"))
            .and_then(|s| s.get("template")),
        _ => return None,
    })
}

/// The plugin on one request: warnings to add, or the error that refuses it.
pub(crate) fn validate(srv: &ApiServer, attrs: &Attributes) -> Result<Vec<String>, ApiError> {
    if !matches!(attrs.operation, Operation::Create | Operation::Update) {
        return Ok(Vec::new());
    }
    let Some(obj) = attrs.object.as_ref() else {
        return Ok(Vec::new());
    };
    match (attrs.group.as_str(), attrs.resource.as_str()) {
        ("", "pods") => pod(srv, attrs, obj),
        ("", "namespaces") => namespace(srv, attrs, obj),
        (group, resource) => {
            let Some(template) = template_of(group, resource, obj) else {
                return Ok(Vec::new());
            };
            if !attrs.subresource.is_empty() {
                return Ok(Vec::new());
            }
            let Some(policy) = namespace_policy(srv, &attrs.namespace) else {
                return Ok(Vec::new());
            };
            let Some(template) = template else {
                return Ok(Vec::new());
            };
            let null = Value::Null;
            let meta = template.get("metadata").unwrap_or(&null);
            let spec = template.get("spec").unwrap_or(&null);
            Ok(warning(policy.warn, meta, spec).into_iter().collect())
        }
    }
}

fn namespace_policy(srv: &ApiServer, ns: &str) -> Option<Policy> {
    let namespace = srv.storage.get("/namespaces", "", ns)?;
    Some(policy_of(
        namespace
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object),
    ))
}

fn warning(lv: LevelVersion, meta: &Value, spec: &Value) -> Option<String> {
    let failures = evaluate(lv, meta, spec);
    (!failures.is_empty()).then(|| {
        format!(
            "would violate PodSecurity \"{}\": {}",
            lv.text(),
            detail(&failures)
        )
    })
}

fn pod(srv: &ApiServer, attrs: &Attributes, obj: &Value) -> Result<Vec<String>, ApiError> {
    if matches!(
        attrs.subresource.as_str(),
        "exec" | "attach" | "binding" | "eviction" | "log" | "portforward" | "proxy" | "status"
    ) {
        return Ok(Vec::new());
    }
    let Some(policy) = namespace_policy(srv, &attrs.namespace) else {
        return Err(ApiError::new(
            500,
            "InternalError",
            format!(
                "Internal error occurred: failed to lookup namespace {}",
                crate::error::go_quote(&attrs.namespace)
            ),
        ));
    };
    if policy.errors.is_empty()
        && policy.enforce.level == Level::Privileged
        && policy.warn.level == Level::Privileged
    {
        return Ok(Vec::new());
    }
    if attrs.operation == Operation::Update
        && let Some(old) = &attrs.old_object
        && !significant_update(obj, old)
    {
        return Ok(Vec::new());
    }
    let null = Value::Null;
    let meta = obj.get("metadata").unwrap_or(&null);
    let spec = obj.get("spec").unwrap_or(&null);
    let failures = evaluate(policy.enforce, meta, spec);
    if !failures.is_empty() {
        let reg = srv.registry.read().unwrap_or_else(|e| e.into_inner());
        let why = format!(
            "violates PodSecurity \"{}\": {}",
            policy.enforce.text(),
            detail(&failures)
        );
        return Err(match reg.get("", "v1", "pods") {
            Some(def) => ApiError::forbidden_because(&def, &attrs.name, &why),
            None => ApiError::new(403, "Forbidden", why),
        });
    }
    Ok(warning(policy.warn, meta, spec).into_iter().collect())
}

/// Whether a pod update is evaluated: container counts, an image, or an ephemeral
/// container changed.
fn significant_update(new: &Value, old: &Value) -> bool {
    fn list<'a>(pod: &'a Value, key: &str) -> &'a [Value] {
        crate::registry::resources::items(pod.get("spec").unwrap_or(&Value::Null), key)
    }
    fn image(c: &Value) -> Option<&Value> {
        c.get("image")
    }
    for key in ["containers", "initContainers"] {
        let (n, o) = (list(new, key), list(old, key));
        if n.len() != o.len() || n.iter().zip(o).any(|(a, b)| image(a) != image(b)) {
            return true;
        }
    }
    let old_ephemeral = list(old, "ephemeralContainers");
    list(new, "ephemeralContainers").iter().any(|c| {
        !old_ephemeral
            .iter()
            .any(|o| o.get("name") == c.get("name") && image(o) == image(c))
    })
}

/// Namespace writes: invalid labels refused; a stricter `enforce` warns about the
/// existing pods that would violate it.
fn namespace(srv: &ApiServer, attrs: &Attributes, obj: &Value) -> Result<Vec<String>, ApiError> {
    if !attrs.subresource.is_empty() {
        return Ok(Vec::new());
    }
    let labels = |o: &Value| {
        o.get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .cloned()
    };
    let new = policy_of(labels(obj).as_ref());
    let old = attrs
        .old_object
        .as_ref()
        .filter(|_| attrs.operation == Operation::Update)
        .map(|o| policy_of(labels(o).as_ref()));
    if !new.errors.is_empty() {
        let same_errors = old.as_ref().is_some_and(|o| {
            o.errors.len() == new.errors.len()
                && o.errors
                    .iter()
                    .zip(&new.errors)
                    .all(|(a, b)| a.field == b.field && a.message == b.message)
        });
        if !same_errors {
            let reg = srv.registry.read().unwrap_or_else(|e| e.into_inner());
            let name = attrs.name.clone();
            return Err(match reg.get("", "v1", "namespaces") {
                Some(def) => ApiError::invalid(&def, &name, new.errors),
                None => ApiError::new(422, "Invalid", "invalid PodSecurity labels"),
            });
        }
    }
    let Some(old) = old else {
        return Ok(Vec::new());
    };
    let (now, before) = (new.enforce, old.enforce);
    if now == before
        || now.level == Level::Privileged
        || (now.version == before.version && now.level <= before.level)
    {
        return Ok(Vec::new());
    }
    Ok(existing_pods(srv, &attrs.name, now))
}

/// The warnings of a namespace's existing pods against a new enforce level: pods
/// grouped by their reasons, the first (by name) of each group named.
fn existing_pods(srv: &ApiServer, ns: &str, lv: LevelVersion) -> Vec<String> {
    const MAX_PODS: usize = 3000;
    let (pods, _) = srv.storage.list("/pods", Some(ns));
    // One pod per controller first, the rest of each controller's pods after them.
    let mut seen = BTreeSet::new();
    let (mut first, mut rest) = (Vec::new(), Vec::new());
    for p in &pods {
        let controller = p
            .get("metadata")
            .and_then(|m| m.get("ownerReferences"))
            .and_then(Value::as_array)
            .and_then(|refs| {
                refs.iter()
                    .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            })
            .and_then(|r| r.get("uid"))
            .and_then(Value::as_str);
        match controller {
            Some(uid) if !seen.insert(uid.to_string()) => rest.push(p),
            _ => first.push(p),
        }
    }
    first.extend(rest);
    let total = first.len();
    let checked = total.min(MAX_PODS);
    let null = Value::Null;
    // reasons -> (pods, the smallest name)
    let mut by_reasons: std::collections::BTreeMap<String, (usize, String)> = Default::default();
    for p in first.iter().take(checked) {
        let failures = evaluate(
            lv,
            p.get("metadata").unwrap_or(&null),
            p.get("spec").unwrap_or(&null),
        );
        if failures.is_empty() {
            continue;
        }
        let reasons: Vec<&str> = failures.iter().map(|f| f.reason.as_str()).collect();
        let name = crate::registry::meta::meta_str(p, "name")
            .unwrap_or("")
            .to_string();
        let entry = by_reasons
            .entry(reasons.join(", "))
            .or_insert((0, name.clone()));
        entry.0 += 1;
        if name < entry.1 {
            entry.1 = name;
        }
    }
    let mut warnings = Vec::new();
    if checked < total {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
        ));
    }
    if !by_reasons.is_empty() {
        warnings.push(format!(
            "existing pods in namespace {} violate the new PodSecurity enforce level {}",
            crate::error::go_quote(ns),
            crate::error::go_quote(&lv.text())
        ));
    }
    let mut lines: Vec<String> = by_reasons
        .into_iter()
        .map(|(reasons, (n, name))| match n {
            1 => format!("{name}: {reasons}"),
            2 => format!("{name} (and 1 other pod): {reasons}"),
            n => format!("{name} (and {} other pods): {reasons}", n - 1),
        })
        .collect();
    lines.sort();
    warnings.extend(lines);
    warnings
}

/// One failed check.
#[derive(Debug, PartialEq, Eq)]
struct Failure {
    reason: String,
    detail: String,
}

fn fail(reason: impl Into<String>, detail: impl Into<String>) -> Option<Failure> {
    Some(Failure {
        reason: reason.into(),
        detail: detail.into(),
    })
}

/// `reason1 (detail1), reason2 (detail2)`.
fn detail(failures: &[Failure]) -> String {
    failures
        .iter()
        .map(|f| {
            if f.detail.is_empty() {
                f.reason.clone()
            } else {
                format!("{} ({})", f.reason, f.detail)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `"a", "b"` (not escaped, as upstream).
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let inner: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", inner.join("\", \""))
}

fn plural<'a>(one: &'a str, many: &'a str, n: usize) -> &'a str {
    if n == 1 { one } else { many }
}

/// `container "a"` / `containers "a", "b"`.
fn containers_phrase<S: AsRef<str>>(names: &[S]) -> String {
    format!(
        "{} {}",
        plural("container", "containers", names.len()),
        join_quote(names)
    )
}

/// The pod's view for the checks.
struct Pod<'a> {
    meta: &'a Value,
    spec: &'a Value,
    /// Init, regular, then ephemeral containers.
    containers: Vec<&'a Value>,
}

impl<'a> Pod<'a> {
    fn new(meta: &'a Value, spec: &'a Value) -> Self {
        let containers = ["initContainers", "containers", "ephemeralContainers"]
            .iter()
            .filter_map(|k| spec.get(*k).and_then(Value::as_array))
            .flatten()
            .collect();
        Pod {
            meta,
            spec,
            containers,
        }
    }

    fn pod_sc(&self, path: &[&str]) -> Option<&'a Value> {
        path.iter()
            .try_fold(self.spec.get("securityContext")?, |v, k| v.get(*k))
            .filter(|v| !v.is_null())
    }

    /// The containers whose `securityContext` value at `path` `bad` judges bad, and
    /// their values.
    fn containers_where(
        &self,
        path: &[&str],
        bad: impl Fn(Option<&'a Value>) -> bool,
    ) -> Vec<(&'a str, Option<&'a Value>)> {
        self.containers
            .iter()
            .filter_map(|c| {
                let v = c
                    .get("securityContext")
                    .and_then(|sc| path.iter().try_fold(sc, |v, k| v.get(*k)))
                    .filter(|v| !v.is_null());
                bad(v).then(|| (name(c), v))
            })
            .collect()
    }

    fn is_windows(&self) -> bool {
        self.spec
            .get("os")
            .and_then(|o| o.get("name"))
            .and_then(Value::as_str)
            == Some("windows")
    }

    fn host_users_off(&self) -> bool {
        self.spec.get("hostUsers").and_then(Value::as_bool) == Some(false)
    }
}

fn name(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or("")
}

fn str_of(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or("")
}

fn is_true(v: Option<&Value>) -> bool {
    v.and_then(Value::as_bool) == Some(true)
}

/// The checks of a level at a version, in upstream's order: baseline IDs sorted, then
/// restricted IDs sorted; a restricted check replaces the baseline one it overrides.
fn evaluate(lv: LevelVersion, meta: &Value, spec: &Value) -> Vec<Failure> {
    if lv.level == Level::Privileged {
        return Vec::new();
    }
    let v = lv.version.rules();
    let restricted = lv.level == Level::Restricted;
    let pod = Pod::new(meta, spec);
    let p = &pod;
    type Check<'c> = Box<dyn Fn() -> Option<Failure> + 'c>;
    let mut checks: Vec<Check> = vec![
        Box::new(|| app_armor(p)),
        Box::new(move || {
            (!restricted || v < 22)
                .then(|| capabilities_baseline(p))
                .flatten()
        }),
        Box::new(|| host_namespaces(p)),
        Box::new(move || (!restricted).then(|| host_path_volumes(p)).flatten()),
        Box::new(|| host_ports(p)),
        Box::new(move || (v >= 34).then(|| host_probes(p)).flatten()),
        Box::new(|| privileged(p)),
        // From v1.35 restricted runs its own strict copy (below), and baseline lets a
        // pod in a user namespace unmask /proc.
        Box::new(move || {
            let skip = v >= 35 && (restricted || p.host_users_off());
            (!skip).then(|| proc_mount(p)).flatten()
        }),
        Box::new(move || se_linux(p, v)),
        Box::new(move || {
            (!restricted || v < 19)
                .then(|| seccomp_baseline(p, v))
                .flatten()
        }),
        Box::new(move || sysctls(p, v)),
        Box::new(|| host_process(p)),
    ];
    if restricted {
        let windows_skip = move || v >= 25 && p.is_windows();
        let userns_skip = move || v >= 35 && p.host_users_off();
        checks.extend::<[Check; 7]>([
            Box::new(move || {
                (v >= 8 && !windows_skip())
                    .then(|| allow_privilege_escalation(p))
                    .flatten()
            }),
            Box::new(move || {
                (v >= 22 && !windows_skip())
                    .then(|| capabilities_restricted(p))
                    .flatten()
            }),
            Box::new(move || (v >= 35).then(|| proc_mount(p)).flatten()),
            Box::new(|| restricted_volumes(p)),
            Box::new(move || (!userns_skip()).then(|| run_as_non_root(p)).flatten()),
            Box::new(move || {
                (v >= 23 && !userns_skip())
                    .then(|| run_as_user(p))
                    .flatten()
            }),
            Box::new(move || {
                (v >= 19 && !windows_skip())
                    .then(|| seccomp_restricted(p))
                    .flatten()
            }),
        ]);
    }
    checks.iter().filter_map(|c| c()).collect()
}

/// `pod` / `containers "a"` / `pod and containers "a", "b"`.
fn setters<S: AsRef<str>>(pod: bool, names: &[S]) -> String {
    let mut parts = Vec::new();
    if pod {
        parts.push("pod".to_string());
    }
    if !names.is_empty() {
        parts.push(containers_phrase(names));
    }
    parts.join(" and ")
}

fn app_armor(p: &Pod) -> Option<Failure> {
    let ok = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
    let pod_type = p.pod_sc(&["appArmorProfile", "type"]);
    let pod_bad = pod_type.is_some_and(|t| !ok(str_of(Some(t))));
    let bad = p.containers_where(&["appArmorProfile", "type"], |t| {
        t.is_some_and(|t| !ok(str_of(Some(t))))
    });
    let mut values: BTreeSet<String> = bad.iter().map(|(_, t)| str_of(*t).to_string()).collect();
    if pod_bad {
        values.insert(str_of(pod_type).to_string());
    }
    let mut annotations: Vec<String> = p
        .meta
        .get("annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("container.apparmor.security.beta.kubernetes.io/"))
        .filter_map(|(k, v)| {
            let v = v.as_str().unwrap_or("");
            (!(v.is_empty() || v == "runtime/default" || v.starts_with("localhost/")))
                .then(|| format!("{k}={}", crate::error::go_quote(v)))
        })
        .collect();
    annotations.sort();
    if !pod_bad && bad.is_empty() && annotations.is_empty() {
        return None;
    }
    let names: Vec<&str> = bad.iter().map(|(n, _)| *n).collect();
    let mut who = setters(pod_bad, &names);
    if !annotations.is_empty() {
        let a = plural("annotation", "annotations", annotations.len());
        who = if who.is_empty() {
            a.to_string()
        } else {
            format!("{who} and {a}")
        };
    }
    let list: Vec<String> = values.into_iter().chain(annotations).collect();
    fail(
        plural(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            list.len(),
        ),
        format!(
            "{who} must not set AppArmor profile type to {}",
            join_quote(&list)
        ),
    )
}

fn cap_list(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn capabilities_baseline(p: &Pod) -> Option<Failure> {
    const ALLOWED: [&str; 13] = [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ];
    let mut caps = BTreeSet::new();
    let bad = p.containers_where(&["capabilities", "add"], |add| {
        cap_list(add).iter().any(|c| !ALLOWED.contains(c))
    });
    for (_, add) in &bad {
        caps.extend(cap_list(*add).into_iter().filter(|c| !ALLOWED.contains(c)));
    }
    if bad.is_empty() {
        return None;
    }
    let names: Vec<&str> = bad.iter().map(|(n, _)| *n).collect();
    let caps: Vec<&str> = caps.into_iter().collect();
    fail(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&names),
            join_quote(&caps)
        ),
    )
}

fn host_namespaces(p: &Pod) -> Option<Failure> {
    let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .iter()
        .filter(|k| is_true(p.spec.get(**k)))
        .map(|k| format!("{k}=true"))
        .collect();
    (!set.is_empty())
        .then(|| fail("host namespaces", set.join(", ")))
        .flatten()
}

fn volumes<'a>(p: &Pod<'a>) -> impl Iterator<Item = &'a Value> {
    p.spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn host_path_volumes(p: &Pod) -> Option<Failure> {
    let names: Vec<&str> = volumes(p)
        .filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(name)
        .collect();
    (!names.is_empty())
        .then(|| {
            fail(
                "hostPath volumes",
                format!(
                    "{} {}",
                    plural("volume", "volumes", names.len()),
                    join_quote(&names)
                ),
            )
        })
        .flatten()
}

fn host_ports(p: &Pod) -> Option<Failure> {
    let mut names = Vec::new();
    let mut ports = BTreeSet::new();
    for c in &p.containers {
        let used: Vec<i64> = c
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|port| port.get("hostPort").and_then(Value::as_i64))
            .filter(|&h| h != 0)
            .collect();
        if !used.is_empty() {
            names.push(name(c));
            ports.extend(used.iter().map(i64::to_string));
        }
    }
    if names.is_empty() {
        return None;
    }
    let ports: Vec<String> = ports.into_iter().collect();
    fail(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&names),
            plural("uses", "use", names.len()),
            plural("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

fn host_probes(p: &Pod) -> Option<Failure> {
    let mut names = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for c in &p.containers {
        let handlers = ["livenessProbe", "readinessProbe", "startupProbe"]
            .iter()
            .filter_map(|k| c.get(*k))
            .chain(
                ["postStart", "preStop"]
                    .iter()
                    .filter_map(|k| c.get("lifecycle").and_then(|l| l.get(*k))),
            );
        for h in handlers {
            for kind in ["httpGet", "tcpSocket"] {
                let host = str_of(h.get(kind).and_then(|x| x.get("host")));
                if !host.is_empty() {
                    names.insert(name(c));
                    hosts.insert(host);
                }
            }
        }
    }
    if names.is_empty() {
        return None;
    }
    let names: Vec<&str> = names.into_iter().collect();
    let hosts: Vec<&str> = hosts.into_iter().collect();
    fail(
        "probe or lifecycle host",
        format!(
            "{} {} {} {}",
            containers_phrase(&names),
            plural("uses", "use", names.len()),
            plural(
                "probe or lifecycle host",
                "probe or lifecycle hosts",
                hosts.len()
            ),
            join_quote(&hosts)
        ),
    )
}

fn privileged(p: &Pod) -> Option<Failure> {
    let bad: Vec<&str> = p
        .containers_where(&["privileged"], is_true)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    (!bad.is_empty())
        .then(|| {
            fail(
                "privileged",
                format!(
                    "{} must not set securityContext.privileged=true",
                    containers_phrase(&bad)
                ),
            )
        })
        .flatten()
}

fn proc_mount(p: &Pod) -> Option<Failure> {
    let bad = p.containers_where(&["procMount"], |m| {
        m.is_some_and(|m| str_of(Some(m)) != "Default")
    });
    if bad.is_empty() {
        return None;
    }
    let names: Vec<&str> = bad.iter().map(|(n, _)| *n).collect();
    let types: BTreeSet<&str> = bad.iter().map(|(_, m)| str_of(*m)).collect();
    let types: Vec<&str> = types.into_iter().collect();
    fail(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&names),
            join_quote(&types)
        ),
    )
}

fn se_linux(p: &Pod, v: u32) -> Option<Failure> {
    let type_ok = |t: &str| {
        matches!(
            t,
            "" | "container_t" | "container_init_t" | "container_kvm_t"
        ) || (v >= 31 && t == "container_engine_t")
    };
    let mut types = BTreeSet::new();
    let (mut user, mut role) = (false, false);
    let mut judge = |o: &Value| {
        let t = str_of(o.get("type"));
        let mut bad = false;
        if !type_ok(t) {
            types.insert(t.to_string());
            bad = true;
        }
        if !str_of(o.get("user")).is_empty() {
            user = true;
            bad = true;
        }
        if !str_of(o.get("role")).is_empty() {
            role = true;
            bad = true;
        }
        bad
    };
    let pod_bad = p.pod_sc(&["seLinuxOptions"]).is_some_and(&mut judge);
    let mut names = Vec::new();
    for c in &p.containers {
        if let Some(o) = c
            .get("securityContext")
            .and_then(|s| s.get("seLinuxOptions"))
            .filter(|o| !o.is_null())
            && judge(o)
        {
            names.push(name(c));
        }
    }
    if !pod_bad && names.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    if !types.is_empty() {
        let t: Vec<String> = types.into_iter().collect();
        data.push(format!(
            "{} {}",
            plural("type", "types", t.len()),
            join_quote(&t)
        ));
    }
    if user {
        data.push("user may not be set".to_string());
    }
    if role {
        data.push("role may not be set".to_string());
    }
    fail(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters(pod_bad, &names),
            data.join("; ")
        ),
    )
}

fn seccomp_type_ok(t: &str) -> bool {
    matches!(t, "RuntimeDefault" | "Localhost")
}

fn seccomp_baseline(p: &Pod, v: u32) -> Option<Failure> {
    if v < 19 {
        // The annotations of the alpha API.
        let annotations = p.meta.get("annotations").and_then(Value::as_object);
        let ok = |val: &str| {
            matches!(val, "runtime/default" | "docker/default") || val.starts_with("localhost/")
        };
        let mut keys = vec!["seccomp.security.alpha.kubernetes.io/pod".to_string()];
        keys.extend(
            p.containers
                .iter()
                .map(|c| format!("container.seccomp.security.alpha.kubernetes.io/{}", name(c))),
        );
        let bad: BTreeSet<String> = keys
            .iter()
            .filter_map(|k| {
                let val = annotations?.get(k)?.as_str().unwrap_or("");
                (!ok(val)).then(|| format!("{k}={}", crate::error::go_quote(val)))
            })
            .collect();
        if bad.is_empty() {
            return None;
        }
        let bad: Vec<String> = bad.into_iter().collect();
        return fail(
            "seccompProfile",
            format!(
                "forbidden {} {}",
                plural("annotation", "annotations", bad.len()),
                bad.join(", ")
            ),
        );
    }
    let pod_type = p.pod_sc(&["seccompProfile", "type"]);
    let pod_bad = pod_type.is_some_and(|t| !seccomp_type_ok(str_of(Some(t))));
    let bad = p.containers_where(&["seccompProfile", "type"], |t| {
        t.is_some_and(|t| !seccomp_type_ok(str_of(Some(t))))
    });
    if !pod_bad && bad.is_empty() {
        return None;
    }
    let mut values: BTreeSet<&str> = bad.iter().map(|(_, t)| str_of(*t)).collect();
    if pod_bad {
        values.insert(str_of(pod_type));
    }
    let names: Vec<&str> = bad.iter().map(|(n, _)| *n).collect();
    let values: Vec<&str> = values.into_iter().collect();
    fail(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters(pod_bad, &names),
            join_quote(&values)
        ),
    )
}

fn sysctls(p: &Pod, v: u32) -> Option<Failure> {
    let allowed = |n: &str| {
        matches!(
            n,
            "kernel.shm_rmid_forced"
                | "net.ipv4.ip_local_port_range"
                | "net.ipv4.tcp_syncookies"
                | "net.ipv4.ping_group_range"
                | "net.ipv4.ip_unprivileged_port_start"
        ) || (v >= 27 && n == "net.ipv4.ip_local_reserved_ports")
            || (v >= 29
                && matches!(
                    n,
                    "net.ipv4.tcp_keepalive_time"
                        | "net.ipv4.tcp_fin_timeout"
                        | "net.ipv4.tcp_keepalive_intvl"
                        | "net.ipv4.tcp_keepalive_probes"
                ))
            || (v >= 32 && matches!(n, "net.ipv4.tcp_rmem" | "net.ipv4.tcp_wmem"))
    };
    let bad: Vec<&str> = p
        .pod_sc(&["sysctls"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| str_of(s.get("name")))
        .filter(|n| !allowed(n))
        .collect();
    (!bad.is_empty())
        .then(|| fail("forbidden sysctls", bad.join(", ")))
        .flatten()
}

fn host_process(p: &Pod) -> Option<Failure> {
    let pod_bad = is_true(p.pod_sc(&["windowsOptions", "hostProcess"]));
    let names: Vec<&str> = p
        .containers_where(&["windowsOptions", "hostProcess"], is_true)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    (pod_bad || !names.is_empty())
        .then(|| {
            fail(
                "hostProcess",
                format!(
                    "{} must not set securityContext.windowsOptions.hostProcess=true",
                    setters(pod_bad, &names)
                ),
            )
        })
        .flatten()
}

fn allow_privilege_escalation(p: &Pod) -> Option<Failure> {
    let bad: Vec<&str> = p
        .containers_where(&["allowPrivilegeEscalation"], |v| {
            v.and_then(Value::as_bool) != Some(false)
        })
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    (!bad.is_empty())
        .then(|| {
            fail(
                "allowPrivilegeEscalation != false",
                format!(
                    "{} must set securityContext.allowPrivilegeEscalation=false",
                    containers_phrase(&bad)
                ),
            )
        })
        .flatten()
}

fn capabilities_restricted(p: &Pod) -> Option<Failure> {
    let mut missing_drop = Vec::new();
    let mut adding = Vec::new();
    let mut caps = BTreeSet::new();
    for c in &p.containers {
        let capabilities = c
            .get("securityContext")
            .and_then(|s| s.get("capabilities"))
            .filter(|v| !v.is_null());
        let Some(capabilities) = capabilities else {
            missing_drop.push(name(c));
            continue;
        };
        if !cap_list(capabilities.get("drop")).contains(&"ALL") {
            missing_drop.push(name(c));
        }
        let extra: Vec<&str> = cap_list(capabilities.get("add"))
            .into_iter()
            .filter(|c| *c != "NET_BIND_SERVICE")
            .collect();
        if !extra.is_empty() {
            adding.push(name(c));
            caps.extend(extra);
        }
    }
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_phrase(&missing_drop)
        ));
    }
    if !adding.is_empty() {
        let caps: Vec<&str> = caps.into_iter().collect();
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quote(&caps)
        ));
    }
    (!details.is_empty())
        .then(|| fail("unrestricted capabilities", details.join("; ")))
        .flatten()
}

fn restricted_volumes(p: &Pod) -> Option<Failure> {
    const ALLOWED: [&str; 9] = [
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "image",
        "persistentVolumeClaim",
        "projected",
        "secret",
    ];
    const RESTRICTED: [&str; 21] = [
        "hostPath",
        "gcePersistentDisk",
        "awsElasticBlockStore",
        "gitRepo",
        "nfs",
        "iscsi",
        "glusterfs",
        "rbd",
        "flexVolume",
        "cinder",
        "cephfs",
        "flocker",
        "fc",
        "azureFile",
        "vsphereVolume",
        "quobyte",
        "azureDisk",
        "photonPersistentDisk",
        "portworxVolume",
        "scaleIO",
        "storageos",
    ];
    let set = |v: &Value, k: &str| v.get(k).is_some_and(|s| !s.is_null());
    let mut names = Vec::new();
    let mut types = BTreeSet::new();
    for v in volumes(p) {
        if ALLOWED.iter().any(|k| set(v, k)) {
            continue;
        }
        names.push(name(v));
        types.insert(
            RESTRICTED
                .iter()
                .find(|k| set(v, k))
                .copied()
                .unwrap_or("unknown"),
        );
    }
    if names.is_empty() {
        return None;
    }
    let types: Vec<&str> = types.into_iter().collect();
    fail(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            plural("volume", "volumes", names.len()),
            join_quote(&names),
            plural("uses", "use", names.len()),
            plural(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    )
}

fn run_as_non_root(p: &Pod) -> Option<Failure> {
    let pod_value = p.pod_sc(&["runAsNonRoot"]).and_then(Value::as_bool);
    let pod_bad = pod_value == Some(false);
    let pod_ok = pod_value == Some(true);
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in &p.containers {
        match c
            .get("securityContext")
            .and_then(|s| s.get("runAsNonRoot"))
            .and_then(Value::as_bool)
        {
            Some(false) => explicit.push(name(c)),
            Some(true) => {}
            None if !pod_ok => implicit.push(name(c)),
            None => {}
        }
    }
    if pod_bad || !explicit.is_empty() {
        return fail(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters(pod_bad, &explicit)
            ),
        );
    }
    (!implicit.is_empty())
        .then(|| {
            fail(
                "runAsNonRoot != true",
                format!(
                    "pod or {} must set securityContext.runAsNonRoot=true",
                    containers_phrase(&implicit)
                ),
            )
        })
        .flatten()
}

fn run_as_user(p: &Pod) -> Option<Failure> {
    let zero = |v: Option<&Value>| v.and_then(Value::as_i64) == Some(0);
    let pod_bad = zero(p.pod_sc(&["runAsUser"]));
    let names: Vec<&str> = p
        .containers_where(&["runAsUser"], zero)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    (pod_bad || !names.is_empty())
        .then(|| {
            fail(
                "runAsUser=0",
                format!("{} must not set runAsUser=0", setters(pod_bad, &names)),
            )
        })
        .flatten()
}

fn seccomp_restricted(p: &Pod) -> Option<Failure> {
    let pod_type = p.pod_sc(&["seccompProfile", "type"]);
    let pod_set = pod_type.is_some_and(|t| seccomp_type_ok(str_of(Some(t))));
    let pod_bad = pod_type.is_some() && !pod_set;
    let mut values = BTreeSet::new();
    if pod_bad {
        values.insert(str_of(pod_type));
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in &p.containers {
        let t = c
            .get("securityContext")
            .and_then(|s| s.get("seccompProfile"))
            .filter(|s| !s.is_null())
            .map(|s| str_of(s.get("type")));
        match t {
            Some(t) if !seccomp_type_ok(t) => {
                explicit.push(name(c));
                values.insert(t);
            }
            Some(_) => {}
            None if !pod_set => implicit.push(name(c)),
            None => {}
        }
    }
    if pod_bad || !explicit.is_empty() {
        let values: Vec<&str> = values.into_iter().collect();
        return fail(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                setters(pod_bad, &explicit),
                join_quote(&values)
            ),
        );
    }
    (!implicit.is_empty())
        .then(|| {
            fail(
                "seccompProfile",
                format!(
                    "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                    containers_phrase(&implicit)
                ),
            )
        })
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(level: &str, pod: Value) -> String {
        let lv = LevelVersion {
            level: Level::parse(level).unwrap(),
            version: Version::Latest,
        };
        detail(&evaluate(lv, &pod["metadata"], &pod["spec"]))
    }

    #[test]
    fn an_empty_container_violates_restricted_four_times() {
        let pod =
            json!({"metadata": {}, "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}});
        assert_eq!(run("baseline", pod.clone()), "");
        assert_eq!(
            run("restricted", pod),
            "allowPrivilegeEscalation != false (container \"nginx\" must set securityContext.allowPrivilegeEscalation=false), \
             unrestricted capabilities (container \"nginx\" must set securityContext.capabilities.drop=[\"ALL\"]), \
             runAsNonRoot != true (pod or container \"nginx\" must set securityContext.runAsNonRoot=true), \
             seccompProfile (pod or container \"nginx\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
    }

    #[test]
    fn baseline_texts() {
        let pod = json!({"metadata": {}, "spec": {
        "hostNetwork": true, "hostIPC": true,
        "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}, {"name": "net.ipv4.tcp_rmem", "value": "1"}]},
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        "containers": [
            {"name": "a", "ports": [{"containerPort": 80, "hostPort": 80}, {"containerPort": 1, "hostPort": 10000}],
             "securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN", "CHOWN", "NET_RAW"]}}},
            {"name": "b", "livenessProbe": {"httpGet": {"host": "localhost", "port": 1}}}
        ]}});
        assert_eq!(
            run("baseline", pod),
            "non-default capabilities (container \"a\" must not include \"NET_RAW\", \"SYS_ADMIN\" in securityContext.capabilities.add), \
             host namespaces (hostNetwork=true, hostIPC=true), \
             hostPath volumes (volume \"h\"), \
             hostPort (container \"a\" uses hostPorts 10000, 80), \
             probe or lifecycle host (container \"b\" uses probe or lifecycle host \"localhost\"), \
             privileged (container \"a\" must not set securityContext.privileged=true), \
             forbidden sysctls (kernel.msgmax)"
        );
    }

    #[test]
    fn labels_parse_as_upstream() {
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (format!("{PREFIX}{k}"), json!(v)))
                .collect::<serde_json::Map<_, _>>()
        };
        let p = policy_of(Some(&labels(&[("enforce", "baseline")])));
        assert_eq!(p.warn.level, Level::Baseline);
        assert!(p.errors.is_empty());
        let p = policy_of(Some(&labels(&[
            ("enforce", "bogus"),
            ("warn-version", "1.25"),
        ])));
        assert_eq!(p.enforce.level, Level::Restricted);
        assert_eq!(p.warn.level, Level::Privileged);
        assert_eq!(p.errors.len(), 2);
        assert_eq!(
            p.errors[1].message,
            "Invalid value: \"1.25\": must be \"latest\" or \"v1.x\""
        );
        assert_eq!(Version::parse("v1.01"), None);
        assert_eq!(Version::parse("v1.0"), Some(Version::Minor(0)));
        assert_eq!(Version::parse("v1.99").map(Version::rules), Some(35));
    }
}
