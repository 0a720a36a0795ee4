//! Impersonation (`Impersonate-User`, `-Uid`, `-Group`, `-Extra-*` headers; `kubectl --as`)
//! as kube-apiserver v1.36 does it, with constrained impersonation (KEP-5284, feature gate
//! `ConstrainedImpersonation`, beta and on by default since v1.35).
//!
//! The requested identity is tried against five modes in order, the first that succeeds
//! wins:
//!
//! | mode              | applies to                                      | checks |
//! |-------------------|-------------------------------------------------|--------|
//! | `associated-node` | only a user name `system:node:<n>`, asked by a ServiceAccount whose token is bound to a pod on node `<n>` | `impersonate-on:associated-node:<verb>` on the request, `impersonate:associated-node` on `nodes` `*` |
//! | `arbitrary-node`  | only a user name `system:node:<n>`              | `impersonate-on:arbitrary-node:<verb>`, `impersonate:arbitrary-node` on `nodes` `<n>` |
//! | `serviceaccount`  | only a user name `system:serviceaccount:<ns>:<n>` | `impersonate-on:serviceaccount:<verb>`, `impersonate:serviceaccount` on `serviceaccounts` `<n>` in `<ns>` |
//! | `user-info`       | any other user name, with uid, groups, extras   | `impersonate-on:user-info:<verb>`, `impersonate:user-info` on `users`, `uids`, `groups`, `userextras/<key>` |
//! | legacy            | anything                                        | `impersonate` on `users` or `serviceaccounts` (core group), `uids`, `groups`, `userextras/<key>` |
//!
//! `impersonate-on:<mode>:<verb>` is checked against the request itself (its resource,
//! namespace, name, or its path), so a grant can say "may list pods while impersonating".
//! The constrained modes check `users`, `groups`, `nodes` and `serviceaccounts` in the API
//! group `authentication.k8s.io`; the legacy mode in the core group. A node impersonated
//! through a node mode gets the groups `system:nodes`, `system:authenticated`.
//!
//! When every mode fails, the error is the first one met. Like kube-apiserver, the mode
//! that last succeeded for a requester is tried first on its next request, so which error
//! a requester sees (and, for nodes, which groups it gets) depends on what it impersonated
//! before. kube-apiserver also caches successful checks for 10 seconds; this server does
//! not, so a revoked grant stops working at once rather than up to 10 seconds later.

use crate::auth::rbac::UserInfo;
use crate::error::ApiError;
use crate::error::go_quote;
use crate::storage::Storage;
use kubewright_core::StatusDetails;
use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex, Weak};

const AUTHN_GROUP: &str = "authentication.k8s.io";
const NODE_NAME_EXTRA: &str = "authentication.kubernetes.io/node-name";
/// From this many groups or extra values on, a constrained mode first tries one wildcard
/// check (`*`) before checking each.
const MANY_CHECKS: usize = 4;

/// The attributes of a request or of one impersonation check, as kube-apiserver's
/// authorizer sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Attrs {
    /// Whether this is a resource request (else a non-resource URL).
    pub resource_request: bool,
    /// Verb: `list`, `get`, ..., or the lower-case HTTP method for a non-resource URL.
    pub verb: String,
    /// API group.
    pub group: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource ("" when none).
    pub subresource: String,
    /// Namespace ("" for cluster scope).
    pub namespace: String,
    /// Object name ("" when none).
    pub name: String,
    /// URL path (decoded).
    pub path: String,
}

impl Attrs {
    fn resource(verb: &str, group: &str, resource: &str, namespace: &str, name: &str) -> Self {
        Self {
            resource_request: true,
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Self::default()
        }
    }

    /// A request's attributes, derived from its method and URL like kube-apiserver's
    /// `RequestInfoFactory` (independently of whether the resource exists).
    pub(crate) fn of_request(method: &http::Method, uri: &http::Uri) -> Self {
        let path = percent_decode(uri.path());
        let mut a = Self {
            verb: method.as_str().to_ascii_lowercase(),
            path: path.clone(),
            ..Self::default()
        };
        let trimmed = path.trim_matches('/');
        let parts: Vec<&str> = if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed.split('/').collect()
        };
        let mut rest: &[&str] = match parts.as_slice() {
            ["api", rest @ ..] if parts.len() >= 3 => rest,
            ["apis", group, rest @ ..] if parts.len() >= 4 => {
                a.group = (*group).to_string();
                rest
            }
            _ => return a,
        };
        a.resource_request = true;
        rest = &rest[1..]; // the version
        match rest {
            [special @ ("watch" | "proxy"), tail @ ..] if !tail.is_empty() => {
                a.verb = (*special).to_string();
                rest = tail;
            }
            _ => {
                a.verb = match *method {
                    http::Method::POST => "create",
                    http::Method::GET | http::Method::HEAD => "get",
                    http::Method::PUT => "update",
                    http::Method::PATCH => "patch",
                    http::Method::DELETE => "delete",
                    _ => "",
                }
                .into();
            }
        }
        if let ["namespaces", ns, tail @ ..] = rest {
            a.namespace = (*ns).to_string();
            if !tail.is_empty() && !matches!(tail[0], "status" | "finalize") {
                rest = tail;
            }
        }
        if let Some(r) = rest.first() {
            a.resource = (*r).to_string();
        }
        if let Some(n) = rest.get(1) {
            a.name = (*n).to_string();
        }
        if a.verb != "proxy"
            && let Some(s) = rest.get(2)
        {
            a.subresource = (*s).to_string();
        }
        let query: Vec<(String, String)> = uri
            .query()
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
        let first = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        if a.name.is_empty() && a.verb == "get" {
            let watch =
                first("watch").is_some_and(|w| w != "0" && !w.eq_ignore_ascii_case("false"));
            a.verb = if watch { "watch" } else { "list" }.into();
            // A list or watch narrowed to one name by field selector is authorized as it.
            if let Some(name) = first("fieldSelector")
                .and_then(|f| kubewright_core::FieldSelector::parse(f).ok())
                .and_then(|f| f.required_value("metadata.name").map(str::to_string))
                .filter(|n| !matches!(n.as_str(), "." | "..") && !n.contains(['/', '%']))
            {
                a.name = name;
            }
        }
        if a.name.is_empty() && a.verb == "delete" {
            a.verb = "deletecollection".into();
        }
        a
    }

    fn allowed(&self, store: &Storage, user: &UserInfo) -> bool {
        if !self.resource_request {
            return crate::auth::rbac::authorize_path(store, user, &self.verb, &self.path);
        }
        let a = crate::auth::rbac::Attributes {
            verb: &self.verb,
            group: &self.group,
            resource: &self.resource,
            subresource: (!self.subresource.is_empty()).then_some(self.subresource.as_str()),
            namespace: &self.namespace,
            name: &self.name,
        };
        crate::auth::rbac::authorize(store, user, &a)
    }

    fn check(&self, store: &Storage, user: &UserInfo) -> Result<(), ApiError> {
        if self.allowed(store, user) {
            Ok(())
        } else {
            Err(self.forbidden(user, ""))
        }
    }

    /// kube-apiserver's 403 for these attributes (`responsewriters.ForbiddenStatusError`),
    /// with `reason` appended after a colon when there is one.
    fn forbidden(&self, user: &UserInfo, reason: &str) -> ApiError {
        let mut msg = if self.resource_request {
            let res = if self.subresource.is_empty() {
                self.resource.clone()
            } else {
                format!("{}/{}", self.resource, self.subresource)
            };
            let scope = if self.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {}", go_quote(&self.namespace))
            };
            format!(
                "User {} cannot {} resource {} in API group {} {scope}",
                go_quote(&user.name),
                self.verb,
                go_quote(&res),
                go_quote(&self.group),
            )
        } else {
            format!(
                "User {} cannot {} path {}",
                go_quote(&user.name),
                self.verb,
                go_quote(&self.path)
            )
        };
        if !reason.is_empty() {
            msg = format!("{msg}: {reason}");
        }
        let gr = match (self.resource.as_str(), self.group.as_str()) {
            ("", "") => String::new(),
            (r, "") => r.to_string(),
            (r, g) => format!("{r}.{g}"),
        };
        let message = match (gr.is_empty(), self.name.is_empty()) {
            (true, _) => format!("forbidden: {msg}"),
            (false, true) => format!("{gr} is forbidden: {msg}"),
            (false, false) => format!("{gr} {} is forbidden: {msg}", go_quote(&self.name)),
        };
        let mut e = ApiError::new(403, "Forbidden", message);
        e.status.details = Some(StatusDetails {
            name: self.name.clone(),
            group: self.group.clone(),
            kind: self.resource.clone(),
            ..StatusDetails::default()
        });
        e
    }
}

/// The identity the impersonation headers ask for, as given.
#[derive(Debug, Default)]
struct Wanted {
    name: String,
    uid: String,
    /// `None` when no `Impersonate-Group` header was sent.
    groups: Option<Vec<String>>,
    /// `None` when no `Impersonate-Extra-*` header was sent.
    extra: Option<BTreeMap<String, Vec<String>>>,
}

impl Wanted {
    fn groups(&self) -> &[String] {
        self.groups.as_deref().unwrap_or_default()
    }
    fn only_username(&self) -> bool {
        self.uid.is_empty() && self.groups().is_empty() && self.extra.is_none()
    }
    /// Go's `%#v` of the `user.DefaultInfo`, as kube-apiserver prints it in its 400.
    fn go_syntax(&self) -> String {
        let slice = |v: &[String]| {
            let items: Vec<String> = v.iter().map(|s| go_quote(s)).collect();
            format!("[]string{{{}}}", items.join(", "))
        };
        let groups = match &self.groups {
            None => "[]string(nil)".to_string(),
            Some(g) => slice(g),
        };
        let extra = match &self.extra {
            None => "map[string][]string(nil)".to_string(),
            Some(m) => {
                let items: Vec<String> = m
                    .iter()
                    .map(|(k, v)| format!("{}:{}", go_quote(k), slice(v)))
                    .collect();
                format!("map[string][]string{{{}}}", items.join(", "))
            }
        };
        format!(
            "&user.DefaultInfo{{Name:{}, UID:{}, Groups:{groups}, Extra:{extra}}}",
            go_quote(&self.name),
            go_quote(&self.uid)
        )
    }
}

fn header_text(v: &http::HeaderValue) -> String {
    String::from_utf8_lossy(v.as_bytes()).into_owned()
}

/// Reads the impersonation headers; `None` when no user is impersonated.
fn wanted_user(headers: &http::HeaderMap) -> Result<Option<Wanted>, ApiError> {
    let first = |name: &str| headers.get(name).map(header_text).unwrap_or_default();
    let mut wanted = Wanted {
        name: first("impersonate-user"),
        uid: first("impersonate-uid"),
        ..Wanted::default()
    };
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .map(header_text)
        .collect();
    if !groups.is_empty() {
        wanted.groups = Some(groups);
    }
    for name in headers.keys() {
        let Some(key) = name.as_str().strip_prefix("impersonate-extra-") else {
            continue;
        };
        let key = path_unescape(&key.to_ascii_lowercase());
        let values = headers.get_all(name).iter().map(header_text);
        wanted
            .extra
            .get_or_insert_with(BTreeMap::new)
            .entry(key)
            .or_default()
            .extend(values);
    }
    if wanted.name.is_empty() {
        if wanted.uid.is_empty() && wanted.groups.is_none() && wanted.extra.is_none() {
            return Ok(None);
        }
        return Err(ApiError::bad_request(format!(
            "requested {} without impersonating a user name",
            wanted.go_syntax()
        )));
    }
    Ok(Some(wanted))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    AssociatedNode,
    ArbitraryNode,
    ServiceAccount,
    UserInfo,
    Legacy,
}

/// The order kube-apiserver tries the modes in.
const MODES: [Mode; 5] = [
    Mode::AssociatedNode,
    Mode::ArbitraryNode,
    Mode::ServiceAccount,
    Mode::UserInfo,
    Mode::Legacy,
];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::AssociatedNode => "associated-node",
            Mode::ArbitraryNode => "arbitrary-node",
            Mode::ServiceAccount => "serviceaccount",
            Mode::UserInfo => "user-info",
            Mode::Legacy => "",
        }
    }

    /// Whether the mode can impersonate `wanted` for `requester` at all.
    fn applies(self, wanted: &Wanted, requester: &UserInfo) -> bool {
        match self {
            Mode::AssociatedNode => {
                wanted.only_username()
                    && node_name(&wanted.name).is_some_and(|node| {
                        service_account_name(&requester.name).is_some()
                            && requester
                                .extra
                                .get(NODE_NAME_EXTRA)
                                .is_some_and(|v| v.len() == 1 && v[0] == node)
                    })
            }
            Mode::ArbitraryNode => wanted.only_username() && node_name(&wanted.name).is_some(),
            Mode::ServiceAccount => {
                wanted.only_username() && service_account_name(&wanted.name).is_some()
            }
            Mode::UserInfo => {
                node_name(&wanted.name).is_none() && service_account_name(&wanted.name).is_none()
            }
            Mode::Legacy => true,
        }
    }

    /// Checks whether `requester` may make `request` as `wanted` in this mode: `Ok(None)`
    /// when the mode does not apply, the identity the request runs as when allowed.
    fn check(
        self,
        store: &Storage,
        wanted: &Wanted,
        requester: &UserInfo,
        request: &Attrs,
    ) -> Result<Option<UserInfo>, ApiError> {
        if !self.applies(wanted, requester) {
            return Ok(None);
        }
        let constrained = self != Mode::Legacy;
        let verb = if constrained {
            // May the requester make this very request while impersonating in this mode?
            let on = Attrs {
                verb: format!("impersonate-on:{}:{}", self.name(), request.verb),
                ..request.clone()
            };
            on.check(store, requester)?;
            format!("impersonate:{}", self.name())
        } else {
            "impersonate".to_string()
        };
        let id_group = if constrained { AUTHN_GROUP } else { "" };
        let mut user = UserInfo {
            name: wanted.name.clone(),
            uid: wanted.uid.clone(),
            groups: wanted.groups().to_vec(),
            extra: wanted.extra.clone().unwrap_or_default(),
        };

        // The user name: a user, a node (constrained modes) or a ServiceAccount.
        let mut a = Attrs::resource(&verb, id_group, "users", "", &wanted.name);
        if constrained && let Some(node) = node_name(&wanted.name) {
            a.resource = "nodes".into();
            a.name = node.into();
            user.groups = vec!["system:nodes".into()];
        }
        if let Some((ns, name)) = service_account_name(&wanted.name) {
            a.resource = "serviceaccounts".into();
            a.namespace = ns.into();
            a.name = name.into();
            if wanted.groups().is_empty() {
                user.groups = vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{ns}"),
                ];
            }
        }
        if self == Mode::AssociatedNode {
            // Granted for every node the requester's pod may run on, not one by name.
            a.name = "*".into();
        }
        a.check(store, requester)?;

        if !wanted.uid.is_empty() {
            Attrs::resource(&verb, AUTHN_GROUP, "uids", "", &wanted.uid).check(store, requester)?;
        }

        let groups = wanted.groups();
        if !groups.is_empty() {
            let mut a = Attrs::resource(&verb, id_group, "groups", "", "");
            if constrained {
                if groups.iter().any(String::is_empty) {
                    return Err(a.forbidden(
                        requester,
                        "impersonating the empty string group is not allowed",
                    ));
                }
                if groups.iter().any(|g| g == "system:masters") {
                    a.name = "system:masters".into();
                    return Err(a.forbidden(
                        requester,
                        "impersonating the system:masters group is not allowed",
                    ));
                }
            }
            a.name = "*".into();
            let all = constrained && groups.len() >= MANY_CHECKS && a.allowed(store, requester);
            if !all {
                for g in groups {
                    a.name = g.clone();
                    a.check(store, requester)?;
                }
            }
        }

        if let Some(extra) = &wanted.extra {
            let mut a = Attrs::resource(&verb, AUTHN_GROUP, "userextras", "", "");
            if constrained && let Err(reason) = validate_extra(extra) {
                return Err(a.forbidden(requester, &reason));
            }
            a.subresource = "*".into();
            a.name = "*".into();
            let values: usize = extra.values().map(Vec::len).sum();
            let large = extra.len() >= MANY_CHECKS || values >= MANY_CHECKS;
            let all = constrained && large && a.allowed(store, requester);
            if !all {
                for (key, values) in extra {
                    a.subresource = key.clone();
                    for v in values {
                        a.name = v.clone();
                        a.check(store, requester)?;
                    }
                }
            }
        }

        if user.name == "system:anonymous" {
            ensure_group(&mut user, "system:unauthenticated");
        } else if !user.in_group("system:unauthenticated") {
            ensure_group(&mut user, "system:authenticated");
        }
        Ok(Some(user))
    }
}

fn ensure_group(user: &mut UserInfo, group: &str) {
    if !user.groups.iter().any(|g| g == group) {
        user.groups.push(group.into());
    }
}

/// Applies the impersonation headers of a request by `requester`: the identity the request
/// runs as, the requester itself when it impersonates no one, 400 for groups, uid or
/// extras without a user, 403 when no impersonation mode allows it.
pub(crate) fn impersonate<S: Send + Sync + 'static>(
    owner: &Arc<S>,
    store: &Storage,
    requester: UserInfo,
    method: &http::Method,
    uri: &http::Uri,
    headers: &http::HeaderMap,
) -> Result<UserInfo, ApiError> {
    let Some(wanted) = wanted_user(headers)? else {
        return Ok(requester);
    };
    let request = Attrs::of_request(method, uri);
    let mut first_err = None;
    let cached = last_mode(owner, &requester.name);
    if let Some(i) = cached {
        match MODES[i].check(store, &wanted, &requester, &request) {
            Ok(Some(user)) => return Ok(user),
            Ok(None) => {}
            Err(e) => first_err = Some(e),
        }
    }
    for (i, mode) in MODES.iter().enumerate() {
        if cached == Some(i) {
            continue;
        }
        match mode.check(store, &wanted, &requester, &request) {
            Ok(Some(user)) => {
                remember_mode(owner, &requester.name, i);
                return Ok(user);
            }
            Ok(None) => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    // The legacy mode always applies, so some mode failed with an error.
    Err(first_err.unwrap_or_else(|| ApiError::internal("all impersonation modes failed")))
}

/// Per server, the index of the mode that last succeeded for each requester (by name),
/// at most this many requesters (kube-apiserver keeps an LRU cache of 10,000).
const MODE_CACHE_SIZE: usize = 10_000;

type ModeCaches = Vec<(Weak<dyn Any + Send + Sync>, HashMap<String, usize>)>;

/// Kept beside the servers rather than in them; an entry goes when its server is dropped.
static MODE_CACHES: LazyLock<Mutex<ModeCaches>> = LazyLock::new(Mutex::default);

fn with_mode_cache<T>(
    owner: Weak<dyn Any + Send + Sync>,
    f: impl FnOnce(&mut HashMap<String, usize>) -> T,
) -> T {
    let mut caches = MODE_CACHES.lock().unwrap_or_else(|e| e.into_inner());
    caches.retain(|(w, _)| w.strong_count() > 0);
    let me = owner;
    let idx = match caches.iter().position(|(w, _)| w.ptr_eq(&me)) {
        Some(i) => i,
        None => {
            caches.push((me, HashMap::new()));
            caches.len() - 1
        }
    };
    f(&mut caches[idx].1)
}

fn last_mode<S: Send + Sync + 'static>(owner: &Arc<S>, requester: &str) -> Option<usize> {
    with_mode_cache(Arc::downgrade(owner) as Weak<dyn Any + Send + Sync>, |m| {
        m.get(requester).copied()
    })
}

fn remember_mode<S: Send + Sync + 'static>(owner: &Arc<S>, requester: &str, mode: usize) {
    with_mode_cache(Arc::downgrade(owner) as Weak<dyn Any + Send + Sync>, |m| {
        if m.len() >= MODE_CACHE_SIZE
            && !m.contains_key(requester)
            && let Some(evict) = m.keys().next().cloned()
        {
            m.remove(&evict);
        }
        m.insert(requester.to_string(), mode);
    });
}

/// `system:node:<name>` with a valid node name: the name.
fn node_name(user: &str) -> Option<&str> {
    user.strip_prefix("system:node:")
        .filter(|n| dns1123_subdomain_errors(n).is_empty())
}

/// `system:serviceaccount:<ns>:<name>` with a valid namespace and name (kube's
/// `serviceaccount.SplitUsername`).
fn service_account_name(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!name.contains(':') && is_dns1123_label(ns) && dns1123_subdomain_errors(name).is_empty())
        .then_some((ns, name))
}

fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && label_ok(s)
}

fn label_ok(l: &str) -> bool {
    let b = l.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// apimachinery's `IsDNS1123Subdomain`.
fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !s.split('.').all(label_ok) {
        errs.push(crate::error::DNS_SUBDOMAIN_ERROR.to_string());
    }
    errs
}

/// apimachinery's `IsDomainPrefixedPath` for the field `extra.key`, its errors joined
/// like an aggregate.
fn domain_prefixed_path(key: &str) -> Result<(), String> {
    let invalid = |value: &str, detail: &str| {
        format!("extra.key: Invalid value: {}: {detail}", go_quote(value))
    };
    let (host, path) = match key.split_once('/') {
        Some((h, p)) if !h.is_empty() && !p.is_empty() => (h, p),
        _ => {
            return Err(invalid(
                key,
                "must be a domain-prefixed path (such as \"acme.io/foo\")",
            ));
        }
    };
    let mut errs: Vec<String> = dns1123_subdomain_errors(host)
        .iter()
        .map(|e| invalid(host, e))
        .collect();
    let path_ok = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c));
    if !path_ok {
        errs.push(invalid(
            path,
            "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
        ));
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => {
            errs.dedup();
            Err(format!("[{}]", errs.join(", ")))
        }
    }
}

/// The checks constrained impersonation makes on extras before authorizing them.
fn validate_extra(extra: &BTreeMap<String, Vec<String>>) -> Result<(), String> {
    for (key, values) in extra {
        if key.is_empty() {
            return Err("impersonating the empty string key in extra is not allowed".into());
        }
        domain_prefixed_path(key)
            .map_err(|e| format!("impersonating an invalid key in extra is not allowed: {e}"))?;
        if *key != key.to_lowercase() {
            return Err(format!(
                "impersonating a non-lowercase key in extra is not allowed: {}",
                go_quote(key)
            ));
        }
        if values.is_empty() {
            return Err("impersonating empty values in extra is not allowed".into());
        }
        if values.iter().any(String::is_empty) {
            return Err("impersonating the empty string value in extra is not allowed".into());
        }
    }
    Ok(())
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Go's `url.PathUnescape`: `%XX` decoded; the input unchanged when it is malformed.
fn path_unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            match (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            ) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
                _ => return s.to_string(),
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A URL path with `%XX` decoded (malformed escapes kept as they are).
fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(h << 4 | l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: http::Method, uri: &str) -> Attrs {
        Attrs::of_request(&method, &uri.parse().unwrap_or_default())
    }

    #[test]
    fn request_attributes_like_request_info() {
        let a = attrs(http::Method::GET, "/api/v1/namespaces/ns/pods");
        assert_eq!(
            (
                a.resource_request,
                a.verb.as_str(),
                a.resource.as_str(),
                a.namespace.as_str()
            ),
            (true, "list", "pods", "ns")
        );
        let a = attrs(http::Method::GET, "/api/v1/namespaces/ns/pods?watch=1");
        assert_eq!(a.verb, "watch");
        let a = attrs(http::Method::GET, "/api/v1/namespaces/ns/pods/x?watch=1");
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("get", "x"));
        let a = attrs(
            http::Method::GET,
            "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dx",
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("list", "x"));
        let a = attrs(
            http::Method::DELETE,
            "/apis/apps/v1/namespaces/ns/deployments",
        );
        assert_eq!(
            (a.verb.as_str(), a.group.as_str(), a.resource.as_str()),
            ("deletecollection", "apps", "deployments")
        );
        let a = attrs(http::Method::PUT, "/api/v1/namespaces/ns/status");
        assert_eq!(
            (
                a.resource.as_str(),
                a.name.as_str(),
                a.subresource.as_str(),
                a.namespace.as_str()
            ),
            ("namespaces", "ns", "status", "ns")
        );
        let a = attrs(http::Method::GET, "/api/v1/namespaces/ns/pods/x/log");
        assert_eq!((a.name.as_str(), a.subresource.as_str()), ("x", "log"));
        let a = attrs(http::Method::GET, "/api/v1/watch/namespaces/ns/pods/x");
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "x"));
        for p in ["/version", "/apis", "/apis/apps/v1", "/api/v1", "/"] {
            let a = attrs(http::Method::GET, p);
            assert!(!a.resource_request, "{p}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", p));
        }
    }

    #[test]
    fn forbidden_texts() {
        let u = UserInfo::new("system:serviceaccount:ns:lead", &[]);
        let on = Attrs {
            verb: "impersonate-on:user-info:list".into(),
            ..attrs(http::Method::GET, "/api/v1/namespaces/ns/pods")
        };
        assert_eq!(
            on.forbidden(&u, "").status.message,
            "pods is forbidden: User \"system:serviceaccount:ns:lead\" cannot impersonate-on:user-info:list resource \"pods\" in API group \"\" in the namespace \"ns\""
        );
        let mut g = Attrs::resource(
            "impersonate:user-info",
            AUTHN_GROUP,
            "groups",
            "",
            "system:masters",
        );
        g.name = "system:masters".into();
        assert_eq!(
            g.forbidden(&u, "impersonating the system:masters group is not allowed")
                .status
                .message,
            "groups.authentication.k8s.io \"system:masters\" is forbidden: User \"system:serviceaccount:ns:lead\" cannot impersonate:user-info resource \"groups\" in API group \"authentication.k8s.io\" at the cluster scope: impersonating the system:masters group is not allowed"
        );
        let p = Attrs {
            verb: "impersonate-on:user-info:get".into(),
            ..attrs(http::Method::GET, "/version")
        };
        let e = p.forbidden(&u, "");
        assert_eq!(
            e.status.message,
            "forbidden: User \"system:serviceaccount:ns:lead\" cannot impersonate-on:user-info:get path \"/version\""
        );
        assert_eq!(e.status.details, Some(StatusDetails::default()));
    }

    #[test]
    fn bad_request_prints_the_wanted_user_like_go() {
        let mut h = http::HeaderMap::new();
        for g in ["b", "a", "é\"x"] {
            h.append(
                "impersonate-group",
                http::HeaderValue::from_bytes(g.as_bytes())
                    .unwrap_or(http::HeaderValue::from_static("")),
            );
        }
        h.append("impersonate-extra-zed", http::HeaderValue::from_static("1"));
        h.append("impersonate-extra-zed", http::HeaderValue::from_static("2"));
        h.append(
            "impersonate-extra-example.com%2fa",
            http::HeaderValue::from_static("3"),
        );
        h.append("impersonate-uid", http::HeaderValue::from_static("u"));
        let Err(e) = wanted_user(&h) else {
            panic!("groups without a user must be refused");
        };
        assert_eq!(e.status.code, 400);
        assert_eq!(
            e.status.message,
            r#"requested &user.DefaultInfo{Name:"", UID:"u", Groups:[]string{"b", "a", "é\"x"}, Extra:map[string][]string{"example.com/a":[]string{"3"}, "zed":[]string{"1", "2"}}} without impersonating a user name"#
        );
    }

    #[test]
    fn extra_key_validation_texts() {
        let check = |k: &str| {
            let m = BTreeMap::from([(k.to_string(), vec!["v".to_string()])]);
            validate_extra(&m).err().unwrap_or_default()
        };
        assert_eq!(
            check("foo"),
            "impersonating an invalid key in extra is not allowed: extra.key: Invalid value: \"foo\": must be a domain-prefixed path (such as \"acme.io/foo\")"
        );
        assert!(
            check("ex_ample.com/a")
                .contains("Invalid value: \"ex_ample.com\": a lowercase RFC 1123 subdomain")
        );
        assert_eq!(
            check("example.com/ x"),
            "impersonating an invalid key in extra is not allowed: extra.key: Invalid value: \" x\": Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"
        );
        assert_eq!(
            check("example.com/A"),
            "impersonating a non-lowercase key in extra is not allowed: \"example.com/A\""
        );
        assert_eq!(check("example.com/a/b"), "");
    }

    #[test]
    fn usernames() {
        assert_eq!(
            service_account_name("system:serviceaccount:ns:sa"),
            Some(("ns", "sa"))
        );
        assert_eq!(service_account_name("system:serviceaccount:ns:sa:x"), None);
        assert_eq!(service_account_name("system:serviceaccount:NS:sa"), None);
        assert_eq!(node_name("system:node:n1"), Some("n1"));
        assert_eq!(node_name("system:node:N_1"), None);
        assert_eq!(path_unescape("example.com%2fk"), "example.com/k");
        assert_eq!(path_unescape("bad%zz"), "bad%zz");
    }
}
