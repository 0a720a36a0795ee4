//! The API server core: routing and the resource verbs.

use crate::error::ApiError;
use crate::http::admission::{self, Admission, Attributes, Operation};
use crate::http::conversion;
use crate::http::{self as h, Body, Format, Req};
use crate::registry::fields;
use crate::registry::meta::{self, meta_mut, meta_str, partial_meta};
use crate::registry::{Registry, ResourceDef};
use crate::storage::{Mutation, Storage};
use futures::FutureExt as _;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Server behaviour options.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// How often idle watches with `allowWatchBookmarks` get a bookmark.
    pub bookmark_interval: Duration,
    /// Events kept for watch resumption.
    pub history: usize,
    /// Bearer tokens accepted (empty = no authentication required).
    pub tokens: Vec<String>,
    /// Maximum request body size.
    pub max_body: usize,
    /// Create the `default` and `kube-system` namespaces at start.
    pub default_namespaces: bool,
    /// Persist objects in this directory (in memory only when `None`).
    pub data_dir: Option<std::path::PathBuf>,
    /// Start from a log damaged in the middle by loading every intact record, instead of
    /// refusing to start (see [`crate::CorruptLog`]).
    pub salvage_corrupt_log: bool,
    /// Further bearer tokens and the users they authenticate (authorized by RBAC).
    pub users: Vec<(String, crate::auth::rbac::UserInfo)>,
    /// CA bundle (PEM) that TLS client certificates are verified against; a verified
    /// certificate authenticates its subject CN as the user and O as the groups.
    pub client_ca_pem: Option<String>,
    /// Size, time and concurrency limits.
    pub limits: crate::http::limits::Limits,
    /// The simulated kubelet (off when `None`): a fake Node, pods that run, and their
    /// logs, exec, attach and port-forward.
    pub kubelet: Option<crate::kubelet::Kubelet>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(60),
            history: 100_000,
            tokens: vec![],
            max_body: 3 * 1024 * 1024,
            default_namespaces: true,
            data_dir: None,
            salvage_corrupt_log: false,
            users: vec![],
            client_ca_pem: None,
            limits: crate::http::limits::Limits::default(),
            kubelet: None,
        }
    }
}

/// Counters a test can read (e.g. how many watches were opened).
#[derive(Debug, Default)]
pub struct Stats {
    /// Watch requests served, per storage key.
    pub watches: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

/// The shared server state.
pub struct ApiServer {
    /// Object storage.
    pub storage: Storage,
    /// Served resources.
    pub registry: RwLock<Registry>,
    /// Options.
    pub options: ServerOptions,
    /// Counters.
    pub stats: Stats,
    /// Wakes the background controllers.
    pub(crate) kick: tokio::sync::Notify,
    /// Bumped to end every open watch (fault injection: a dropped connection).
    pub(crate) watch_epoch: tokio::sync::watch::Sender<u64>,
    /// ServiceAccount tokens issued through `serviceaccounts/token`.
    pub(crate) issued_tokens:
        std::sync::Mutex<std::collections::HashMap<String, crate::http::extra::IssuedToken>>,
    /// Requests and watches in flight (`options.limits`).
    pub(crate) inflight: crate::http::limits::Inflight,
    /// Services' cluster IPs and node ports.
    pub(crate) service_alloc: crate::registry::service_alloc::ServiceAllocator,
    /// The garbage collector's index of objects, kept between its passes.
    pub(crate) gc_index: std::sync::Mutex<crate::controllers::gc::GcIndex>,
    /// The pods the resourceclaim controller has yet to look at, kept between its passes.
    pub(crate) claims_index: std::sync::Mutex<crate::controllers::resource_claims::PendingPods>,
    /// What the replicaset and deployment controllers must look at, kept between passes.
    pub(crate) workloads: std::sync::Mutex<crate::controllers::workloads::Workloads>,
    /// The node lifecycle and taint-eviction controllers' memory.
    pub(crate) node_lifecycle: std::sync::Mutex<crate::controllers::nodes::NodeLifecycle>,
    /// The controllers' recent events by what makes them the same (client-go's event
    /// cache): a repeat counts on the stored one.
    pub(crate) recent_events: std::sync::Mutex<std::collections::HashMap<String, (String, String)>>,
}

/// Where a resource request points.
#[derive(Debug, Clone)]
pub struct Target {
    /// The resource.
    pub def: Arc<ResourceDef>,
    /// Namespace from the URL.
    pub namespace: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Subresource.
    pub sub: Option<String>,
    /// Watch through the legacy `/watch/` prefix.
    pub legacy_watch: bool,
}

impl Target {
    fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }
}

pub(crate) enum Route {
    Resource(Target),
    Other,
}

impl ApiServer {
    /// A server with the built-in resources.
    pub fn new(options: ServerOptions) -> Arc<Self> {
        Self::with_storage(Storage::new(options.history), options)
    }

    /// A server whose objects persist in `options.data_dir`.
    pub fn open(options: ServerOptions) -> std::io::Result<Arc<Self>> {
        let storage = match &options.data_dir {
            Some(dir) => Storage::open_with_options(
                dir,
                options.history,
                crate::storage::OpenOptions {
                    salvage: options.salvage_corrupt_log,
                },
            )?,
            None => Storage::new(options.history),
        };
        Ok(Self::with_storage(storage, options))
    }

    fn with_storage(storage: Storage, options: ServerOptions) -> Arc<Self> {
        let s = Arc::new(Self {
            storage,
            registry: RwLock::new(Registry::new()),
            options,
            stats: Stats::default(),
            kick: tokio::sync::Notify::new(),
            issued_tokens: Default::default(),
            inflight: Default::default(),
            service_alloc: Default::default(),
            gc_index: Default::default(),
            claims_index: Default::default(),
            workloads: Default::default(),
            node_lifecycle: Default::default(),
            recent_events: Default::default(),
            watch_epoch: tokio::sync::watch::Sender::new(0),
        });
        if s.options.default_namespaces {
            for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                let _ = s.create_namespace_object(ns);
            }
            crate::controllers::bootstrap::ensure_policy(&s);
            crate::controllers::bootstrap::ensure_service_network(&s);
            crate::controllers::bootstrap::ensure_priority_classes(&s);
            crate::controllers::service_ips(&s);
        }
        s
    }

    fn create_namespace_object(&self, name: &str) -> Result<(), ApiError> {
        let def = self
            .def("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("namespaces missing"))?;
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        self.create_object(&def, "", obj, "kube-apiserver", false)
            .map(|_| ())
    }

    /// What follows a stored write at once: a Service's IPAddress objects, as
    /// kube-apiserver's IP allocator writes them within the request.
    pub(crate) fn after_write(&self, def: &ResourceDef) {
        if def.group.is_empty() && def.plural == "services" {
            crate::controllers::service_ips(self);
        }
    }

    pub(crate) fn def(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.registry
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(group, version, plural)
    }

    /// Parses a resource path into a target.
    pub(crate) fn route(&self, path: &str) -> Result<Route, ApiError> {
        let segs: Vec<String> = path
            .trim_matches('/')
            .split('/')
            .map(percent_decode)
            .collect::<Result<_, _>>()
            .map_err(|_| ApiError::bad_request("invalid percent-encoding in the request path"))?;
        let (group, version, rest) = match segs.first().map(String::as_str) {
            Some("api") if segs.len() >= 3 => ("", segs[1].as_str(), &segs[2..]),
            Some("apis") if segs.len() >= 4 => (segs[1].as_str(), segs[2].as_str(), &segs[3..]),
            _ => return Ok(Route::Other),
        };
        let (legacy_watch, rest) = match rest.first().map(String::as_str) {
            Some("watch") => (true, &rest[1..]),
            _ => (false, rest),
        };
        let mut namespace = None;
        let mut parts = rest;
        if parts.first().map(String::as_str) == Some("namespaces") && parts.len() >= 3 {
            let is_ns_sub = parts.len() == 3 && matches!(parts[2].as_str(), "status" | "finalize");
            if !is_ns_sub {
                namespace = Some(parts[1].clone());
                parts = &parts[2..];
            }
        }
        let Some(plural) = parts.first() else {
            return Ok(Route::Other);
        };
        let Some(def) = self.def(group, version, plural) else {
            return Err(ApiError::path_not_found());
        };
        // `nodes/NAME/proxy/PATH…` carries the path to proxy after the subresource.
        let node_proxy = def.group.is_empty()
            && def.plural == "nodes"
            && parts.get(2).map(String::as_str) == Some("proxy");
        if parts.len() > 3 && !node_proxy {
            return Err(ApiError::path_not_found());
        }
        if def.namespaced != namespace.is_some() && !(def.namespaced && parts.len() == 1) {
            return Err(ApiError::path_not_found());
        }
        Ok(Route::Resource(Target {
            def,
            namespace,
            name: parts.get(1).cloned(),
            sub: parts.get(2).cloned(),
            legacy_watch,
        }))
    }

    /// The user a bearer token authenticates, `None` for an unknown token. Without any
    /// configured token every request is the admin (an open test server); with tokens, a
    /// request without credentials is `system:anonymous` (kube-apiserver's default
    /// `--anonymous-auth=true`), whom RBAC then authorizes.
    pub(crate) fn authenticate(&self, bearer: Option<&str>) -> Option<crate::auth::rbac::UserInfo> {
        let open = self.options.tokens.is_empty()
            && self.options.users.is_empty()
            && self.options.client_ca_pem.is_none();
        let Some(token) = bearer else {
            return Some(if open {
                crate::auth::rbac::UserInfo::admin()
            } else {
                crate::auth::rbac::UserInfo::new("system:anonymous", &["system:unauthenticated"])
            });
        };
        let eq = |a: &str| {
            a.len() == token.len()
                && a.bytes()
                    .zip(token.bytes())
                    .fold(0u8, |acc, (x, y)| acc | (x ^ y))
                    == 0
        };
        if open || self.options.tokens.iter().any(|t| eq(t)) {
            return Some(crate::auth::rbac::UserInfo::admin());
        }
        if let Some((_, u)) = self.options.users.iter().find(|(t, _)| eq(t)) {
            return Some(u.clone());
        }
        let issued = self
            .issued_tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()?;
        // As kube-apiserver validates a bound token: unexpired, and its ServiceAccount
        // (and the pod or Secret it is bound to) still the object it was issued for.
        if !issued.valid(&self.storage, jiff::Timestamp::now()) {
            self.issued_tokens
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(token);
            return None;
        }
        Some(issued.user)
    }

    fn authorize(&self, req: &Req, t: &Target) -> Result<(), ApiError> {
        let watch = t.legacy_watch || req.watch_param();
        let verb = match (&req.method, t.name.is_some()) {
            (&http::Method::GET | &http::Method::HEAD, true) if watch => "watch",
            (&http::Method::GET | &http::Method::HEAD, true) => "get",
            (&http::Method::GET | &http::Method::HEAD, false) if watch => "watch",
            (&http::Method::GET | &http::Method::HEAD, false) => "list",
            (&http::Method::POST, _) => "create",
            (&http::Method::PUT, _) => "update",
            (&http::Method::PATCH, _) => "patch",
            (&http::Method::DELETE, true) => "delete",
            (&http::Method::DELETE, false) => "deletecollection",
            _ => "unknown",
        };
        // A list or watch narrowed to one name by field selector is authorized as that name.
        let selected_name = req
            .q("fieldSelector")
            .and_then(|f| kubewright_core::FieldSelector::parse(f).ok())
            .and_then(|f| f.required_value("metadata.name").map(str::to_string));
        let name = t.name.clone().or(selected_name).unwrap_or_default();
        let attrs = crate::auth::rbac::Attributes {
            verb,
            group: &t.def.group,
            resource: &t.def.plural,
            subresource: t.sub.as_deref(),
            namespace: t.namespace.as_deref().unwrap_or(""),
            name: &name,
        };
        if crate::auth::rbac::authorize(&self.storage, &req.user, &attrs) {
            Ok(())
        } else {
            Err(ApiError::forbidden(
                &t.def,
                &name,
                crate::auth::rbac::forbidden_message(&req.user, &attrs),
            )
            .authorization_failure())
        }
    }

    /// Serves a resource request.
    pub(crate) async fn serve_resource(self: &Arc<Self>, req: Req, t: Target) -> Response<Body> {
        let watch = req.watch_param() || t.legacy_watch;
        let format = h::negotiate(&req, t.name.is_none() || watch).unwrap_or(Format::Json);
        if let Err(e) = self.authorize(&req, &t) {
            return h::error_response_as(&e, &format);
        }
        // Like kube-apiserver: protobuf only for built-in kinds; others need JSON allowed.
        // The 406 itself is a protobuf Status: Status has that form.
        if format == (Format::Protobuf { json: false }) && !t.def.protobuf() {
            return h::error_response_as(&h::unsupported_form(), &format);
        }
        let deprecated = deprecation_warning(&t.def);
        // Pod I/O (log, exec, attach, portforward): the simulated kubelet.
        let mut req = match crate::kubelet::serve(self, req, &t).await {
            Ok(resp) => return resp,
            Err(req) => req,
        };
        // Subresource writes (pods/eviction, pods/binding, serviceaccounts/token,
        // …/scale) are admitted with their own object (Eviction, Binding, TokenRequest,
        // Scale) before the handler reads it.
        if let (Some(name), Some(sub)) = (t.name.as_deref(), t.sub.as_deref())
            && ((req.method == http::Method::POST)
                || (req.method == http::Method::PUT && sub == "scale"))
            && let Err(e) = self.admit_subresource(&mut req, &t, name, sub).await
        {
            return h::error_response_as(&e, &format);
        }
        let result = match (&req.method, &t.name, &t.sub) {
            _ if t.def.is_virtual() => self.serve_virtual(&req, &t),
            (method, None, None) if !t.def.verbs.contains(&verb_of(method, req.watch_param())) => {
                Err(ApiError::method_not_allowed(
                    "the server does not allow this method on the requested resource",
                ))
            }
            (&http::Method::GET, None, None) if req.watch_param() || t.legacy_watch => {
                return crate::http::watch::serve_watch(self.clone(), req, t).await;
            }
            (&http::Method::GET, Some(_), None) if t.legacy_watch || req.watch_param() => {
                return crate::http::watch::serve_watch(self.clone(), req, t).await;
            }
            (&http::Method::GET, None, None) => self.list(&req, &t).await,
            (&http::Method::GET | &http::Method::HEAD, Some(name), sub) => {
                self.get(&req, &t, name, sub.as_deref()).await
            }
            (&http::Method::POST, None, None) => self.create(&req, &t).await,
            (&http::Method::POST, Some(_), Some(_)) => {
                crate::http::extra::create_subresource(self, &req, &t)
            }
            (&http::Method::PUT, Some(name), sub) => {
                self.update(&req, &t, name, sub.as_deref()).await
            }
            (&http::Method::PATCH, Some(name), sub) => {
                crate::http::patch::patch(self, &req, &t, name, sub.as_deref()).await
            }
            (&http::Method::DELETE, Some(name), None) => self.delete(&req, &t, name).await,
            (&http::Method::DELETE, None, None) => self.delete_collection(&req, &t).await,
            _ => Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource".to_string(),
            )),
        };
        let mut resp = match result {
            Ok(r) => r,
            Err(e) => h::error_response_as(&e, &format),
        };
        if let Some(w) = deprecated {
            add_warnings(&mut resp, &[w.to_string()]);
        }
        resp
    }

    /// Resources served without storage: `componentstatuses` (the control plane is
    /// healthy) and `bindings` (a pod's binding, like `pods/binding`).
    fn serve_virtual(self: &Arc<Self>, req: &Req, t: &Target) -> Result<Response<Body>, ApiError> {
        match (t.def.plural.as_str(), &req.method, &t.name) {
            ("componentstatuses", &http::Method::GET, name) => {
                let status = |n: &str| json!({"metadata": {"name": n}, "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]});
                let names = ["scheduler", "controller-manager", "etcd-0"];
                match name {
                    None => Ok(h::encode(
                        StatusCode::OK,
                        &json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {},
                            "items": names.iter().map(|n| status(n)).collect::<Vec<_>>()}),
                        &Format::Json,
                    )),
                    Some(n) if names.contains(&n.as_str()) => {
                        let mut one = status(n);
                        one["kind"] = json!("ComponentStatus");
                        one["apiVersion"] = json!("v1");
                        Ok(h::encode(StatusCode::OK, &one, &Format::Json))
                    }
                    Some(n) => Err(ApiError::not_found(&t.def, n)),
                }
            }
            ("bindings", &http::Method::POST, None) => {
                let body = h::decode_body(req)?;
                let pod = meta_str(&body, "name").unwrap_or("").to_string();
                let pods = self
                    .def("", "v1", "pods")
                    .ok_or_else(|| ApiError::internal("pods are not served"))?;
                let target = Target {
                    def: pods,
                    namespace: t.namespace.clone(),
                    name: Some(pod),
                    sub: Some("binding".into()),
                    legacy_watch: false,
                };
                crate::http::extra::create_subresource(self, req, &target)
            }
            _ => Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            )),
        }
    }

    fn check_sub(&self, t: &Target, sub: Option<&str>) -> Result<(), ApiError> {
        match sub {
            None => Ok(()),
            Some("status") if t.def.has_status => Ok(()),
            Some("scale") if t.def.scale.is_some() => Ok(()),
            Some("finalize") if t.def.group.is_empty() && t.def.plural == "namespaces" => Ok(()),
            Some(_) => Err(ApiError::path_not_found()),
        }
    }

    async fn get(
        &self,
        req: &Req,
        t: &Target,
        name: &str,
        sub: Option<&str>,
    ) -> Result<Response<Body>, ApiError> {
        self.check_sub(t, sub)?;
        let format = h::negotiate(req, false)?;
        let obj = self
            .storage
            .get(&t.def.storage_key(), t.ns(), name)
            .ok_or_else(|| ApiError::not_found(&t.def, name))?;
        if let Format::WrongShape { list_form } = format {
            return Err(h::wrong_shape(&t.def, list_form));
        }
        if sub == Some("scale") {
            return Ok(h::encode(
                StatusCode::OK,
                &crate::http::extra::to_scale(&t.def, &obj)?,
                &format,
            ));
        }
        let obj = conversion::to_version(self, &t.def, (*obj).clone()).await?;
        let obj = self.present(&t.def, &obj);
        Ok(self.render_one(&t.def, obj, &format, req))
    }

    /// The object as served in the URL's version.
    pub(crate) fn present(&self, def: &ResourceDef, obj: &Value) -> Value {
        let mut v = obj.clone();
        if let Some(o) = v.as_object_mut() {
            o.insert("apiVersion".into(), Value::String(def.api_version()));
            o.insert("kind".into(), Value::String(def.kind.clone()));
        }
        if let Some(crd) = &def.crd {
            crd.apply_defaults(&mut v, &def.version);
        }
        v
    }

    /// An object as a list item: kube-apiserver omits `apiVersion` and `kind` in the items
    /// of built-in lists (custom resource lists keep them).
    pub(crate) fn present_item(&self, def: &ResourceDef, obj: &Value) -> Value {
        let mut v = self.present(def, obj);
        if def.crd.is_none()
            && let Some(o) = v.as_object_mut()
        {
            o.remove("apiVersion");
            o.remove("kind");
        }
        v
    }

    pub(crate) fn render_one(
        &self,
        def: &ResourceDef,
        obj: Value,
        format: &Format,
        req: &Req,
    ) -> Response<Body> {
        match format {
            Format::Table => {
                let rv = meta_str(&obj, "resourceVersion").map(|rv| json!({"resourceVersion": rv}));
                match crate::registry::table::table(
                    def,
                    &[Arc::new(obj)],
                    req.q("includeObject"),
                    rv,
                    None,
                ) {
                    Ok(t) => h::encode(StatusCode::OK, &t, &Format::Json),
                    Err(e) => h::error_response(&e),
                }
            }
            Format::PartialMeta { .. } => {
                h::encode(StatusCode::OK, &partial_meta(&obj), &format.encoding())
            }
            f => h::encode(StatusCode::OK, &obj, f),
        }
    }

    fn parse_list_options(req: &Req) -> Result<ListOptions, ApiError> {
        let rv = req
            .q("resourceVersion")
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let rv_match = req
            .q("resourceVersionMatch")
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let cont = req
            .q("continue")
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let invalid = |m: &str| {
            ApiError::invalid_msg(format!("ListOptions.meta.k8s.io \"\" is invalid: {m}"))
        };
        if let Some(m) = &rv_match {
            if rv.is_none() {
                return Err(invalid(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if cont.is_some() {
                return Err(invalid(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if m != "Exact" && m != "NotOlderThan" {
                return Err(invalid(&format!(
                    "resourceVersionMatch: Unsupported value: \"{m}\": supported values: \"Exact\", \"NotOlderThan\", \"\""
                )));
            }
            if m == "Exact" && rv.as_deref() == Some("0") {
                return Err(invalid(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        let rv_num = match &rv {
            Some(s) => Some(s.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid resource version: resourceVersion: Invalid value: {}: {}",
                    crate::error::go_quote(s),
                    go_parse_error("ParseUint", s)
                ))
            })?),
            None => None,
        };
        let limit = match req.q("limit") {
            Some(l) if !l.is_empty() => l
                .parse::<i64>()
                .map_err(|_| ApiError::bad_request(go_parse_error("ParseInt", l)))?
                .max(0) as usize,
            _ => 0,
        };
        let labels = match req.q("labelSelector") {
            Some(s) => parse_label_selector(s)?,
            None => Default::default(),
        };
        let fields_sel = match req.q("fieldSelector") {
            Some(s) => kubewright_core::FieldSelector::parse(s)
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
            None => Default::default(),
        };
        Ok(ListOptions {
            rv: rv_num,
            rv_match,
            cont,
            limit,
            labels,
            fields: fields_sel,
        })
    }

    async fn list(&self, req: &Req, t: &Target) -> Result<Response<Body>, ApiError> {
        let format = h::negotiate(req, true)?;
        if req.q("sendInitialEvents").is_some() {
            return Err(ApiError::invalid_msg(
                "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
            ));
        }
        let opts = Self::parse_list_options(req)?;
        crate::registry::filter::check_field_selector(&t.def, &opts.fields)?;
        let key = t.def.storage_key();
        let ns = t.namespace.as_deref();
        // Pagination: the continue token pins the snapshot revision and the last key.
        let (items, list_rv) = if let Some(tok) = &opts.cont {
            let (rv, after) = decode_continue(tok)?;
            let rv = u64::try_from(rv).unwrap_or_else(|_| self.storage.current_rv());
            let items = self.storage.list_at(&key, ns, rv, Some(&after)).map_err(|_| {
                let mut e = ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.");
                // A token that continues from the same key at the latest revision.
                e.status.metadata.continue_ = Some(encode_continue_inconsistent(&after));
                e
            })?;
            (items, rv)
        } else {
            match (opts.rv, opts.rv_match.as_deref()) {
                (Some(rv), Some("Exact")) | (Some(rv), None)
                    if rv != 0 && (opts.rv_match.is_some() || opts.limit > 0) =>
                {
                    let current = self.storage.current_rv();
                    if rv > current {
                        return Err(too_large_rv(rv, current));
                    }
                    let items = self.storage.list_at(&key, ns, rv, None).map_err(|_| {
                        ApiError::expired("The resourceVersion for the provided list is too old.")
                    })?;
                    (items, rv)
                }
                (Some(rv), _) if rv != 0 => {
                    let (items, current) = self.storage.list(&key, ns);
                    if rv > current {
                        return Err(too_large_rv(rv, current));
                    }
                    (items, current)
                }
                _ => {
                    let (items, current) = self.storage.list(&key, ns);
                    (items, current)
                }
            }
        };
        let filtering = !opts.labels.is_empty() || !opts.fields.is_empty();
        let mut selected = Vec::new();
        let mut next_token = None;
        let mut remaining = 0usize;
        let total = items.len();
        // `resourceVersion=0` is served whole from kube-apiserver's watch cache: the limit
        // does not apply.
        let limit = match (opts.rv, opts.rv_match.as_deref(), &opts.cont) {
            (Some(0), None | Some("NotOlderThan"), None) => 0,
            _ => opts.limit,
        };
        for (i, obj) in items.into_iter().enumerate() {
            if !crate::registry::filter::matches(&t.def, &obj, &opts.labels, &opts.fields) {
                continue;
            }
            selected.push(obj);
            if limit > 0 && selected.len() >= limit {
                // As etcd's paging: more follows when any object, matching or not, comes
                // after the last one returned. The count of what follows is reported
                // without selectors only.
                if i + 1 < total {
                    next_token = selected
                        .last()
                        .map(|o: &Arc<Value>| encode_continue(list_rv, &object_key(o)));
                    remaining = total - i - 1;
                }
                break;
            }
        }
        if conversion::by_webhook(self, &t.def) {
            let objects = selected.iter().map(|o| (**o).clone()).collect();
            selected = conversion::list_to_version(self, &t.def, objects)
                .await?
                .into_iter()
                .map(Arc::new)
                .collect();
        }
        let mut list_meta = json!({"resourceVersion": list_rv.to_string()});
        if let Some(tok) = &next_token {
            list_meta["continue"] = Value::String(tok.clone());
            if !filtering {
                list_meta["remainingItemCount"] = json!(remaining);
            }
        }
        match format {
            Format::WrongShape { list_form } => Err(h::wrong_shape(&t.def, list_form)),
            Format::Table => {
                let table = crate::registry::table::table(
                    &t.def,
                    &selected,
                    req.q("includeObject"),
                    Some(list_meta),
                    None,
                )?;
                Ok(h::encode(StatusCode::OK, &table, &Format::Json))
            }
            Format::PartialMetaList { .. } => {
                let items: Vec<Value> = selected
                    .iter()
                    .map(|o| partial_meta(&self.present(&t.def, o)))
                    .collect();
                Ok(h::encode(
                    StatusCode::OK,
                    &json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "items": items}),
                    &format.encoding(),
                ))
            }
            f => {
                if t.def.crd.is_some() && list_meta.get("continue").is_none() {
                    // Custom resource lists (unstructured) always carry `continue`.
                    list_meta["continue"] = json!("");
                }
                let items: Vec<Value> = selected
                    .iter()
                    .map(|o| self.present_item(&t.def, o))
                    .collect();
                let body = json!({
                    "kind": t.def.list_kind(),
                    "apiVersion": t.def.api_version(),
                    "metadata": list_meta,
                    "items": items,
                });
                Ok(h::encode(StatusCode::OK, &body, &f))
            }
        }
    }

    /// Checks write options shared by create, update and patch.
    pub(crate) fn write_options(req: &Req, apply: bool) -> Result<WriteOptions, ApiError> {
        let options = match req.method {
            http::Method::POST => "CreateOptions",
            http::Method::PUT => "UpdateOptions",
            _ => "PatchOptions",
        };
        let invalid =
            |m: &str| ApiError::invalid_msg(format!("{options}.meta.k8s.io \"\" is invalid: {m}"));
        let dry_run = match req.q("dryRun") {
            None | Some("") => false,
            Some("All") => true,
            Some(v) => {
                return Err(invalid(&format!(
                    "dryRun: Unsupported value: [{}]: supported values: \"All\"",
                    crate::error::go_quote(v)
                )));
            }
        };
        let field_manager = match req.q("fieldManager") {
            Some(m) if m.len() > 128 => {
                return Err(invalid(
                    "fieldManager: Too long: may not be more than 128 bytes",
                ));
            }
            Some(m) if m.chars().any(|c| c.is_control()) => {
                return Err(invalid(
                    "fieldManager: Invalid value: must only contain printable characters",
                ));
            }
            Some(m) if !m.is_empty() => m.to_string(),
            _ if apply => {
                return Err(ApiError::invalid_msg(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            }
            _ => meta::manager_from_user_agent(req.header("user-agent")),
        };
        let validation = match req.q("fieldValidation") {
            None | Some("") => "Warn",
            Some(v @ ("Ignore" | "Warn" | "Strict")) => v,
            Some(v) => {
                return Err(invalid(&format!(
                    "fieldValidation: Unsupported value: {}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                    crate::error::go_quote(v)
                )));
            }
        };
        Ok(WriteOptions {
            dry_run,
            field_manager,
            validation: validation.to_string(),
            warnings: vec![],
            apply: None,
            user: req.user.clone(),
            namespace: path_namespace(&req.path).unwrap_or_default().to_string(),
        })
    }

    /// Normalises an incoming object (typed round trip for built-ins, schema for CRs),
    /// applying the field validation directive.
    pub(crate) fn normalize(
        &self,
        def: &ResourceDef,
        obj: Value,
        wo: &mut WriteOptions,
    ) -> Result<Value, ApiError> {
        self.normalize_checked(def, obj, wo, true)
    }

    /// [`Self::normalize`] for a server-side apply configuration: a custom resource's
    /// required fields are left to the merged object (a status-only apply has no spec).
    pub(crate) fn normalize_applied(
        &self,
        def: &ResourceDef,
        obj: Value,
        wo: &mut WriteOptions,
    ) -> Result<Value, ApiError> {
        self.normalize_checked(def, obj, wo, false)
    }

    fn normalize_checked(
        &self,
        def: &ResourceDef,
        mut obj: Value,
        wo: &mut WriteOptions,
        whole: bool,
    ) -> Result<Value, ApiError> {
        let unknown = if let Some(n) = def.normalizer {
            let cannot_handle = |e: String| {
                ApiError::bad_request(format!(
                    "{} in version \"{}\" cannot be handled as a {}: {e}",
                    def.kind, def.version, def.kind
                ))
            };
            // Go's decoder: a value of the wrong type first.
            if let Some(e) =
                crate::openapi::builtin_kind_definition(&def.group, &def.version, &def.kind)
                    .and_then(|name| crate::registry::go_decode::type_error(name, &obj))
            {
                return Err(cannot_handle(e));
            }
            if let Some(e) = crate::registry::schema::micro_time_error(
                &obj,
                crate::registry::schema::for_resource(def, None),
            ) {
                return Err(cannot_handle(e));
            }
            if let Some(name) =
                crate::openapi::builtin_kind_definition(&def.group, &def.version, &def.kind)
            {
                crate::registry::go_decode::nulls_to_zero(name, &mut obj);
            }
            let normalized = n(&obj).map_err(cannot_handle)?;
            let unknown = unknown_fields(&obj, &normalized, "");
            // Keep the caller's representation (e.g. explicit nulls dropped), typed-clean.
            obj = normalized;
            canonical_quantities(def, &mut obj)?;
            unknown
        } else if let Some(crd) = &def.crd {
            let (pruned, unknown) = crd.prune(&obj, &def.version);
            if whole {
                crd.validate(def, &pruned, &def.version)?;
            } else {
                crd.validate_partial(def, &pruned, &def.version)?;
            }
            obj = pruned;
            unknown
        } else {
            vec![]
        };
        if def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions" {
            crate::crd::validate_crd(def, &obj)?;
        }
        if def.group == "rbac.authorization.k8s.io" {
            let ns = meta_str(&obj, "namespace")
                .filter(|n| !n.is_empty())
                .unwrap_or(&wo.namespace)
                .to_string();
            crate::auth::rbac::check_escalation(&self.storage, &wo.user, def, &obj, &ns)?;
        }
        if !unknown.is_empty() {
            match wo.validation.as_str() {
                "Strict" => {
                    let list = unknown
                        .iter()
                        .map(|u| format!("unknown field \"{u}\""))
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(ApiError::bad_request(format!(
                        "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {list}",
                        def.kind, def.version, def.kind
                    )));
                }
                "Warn" => wo.warnings.extend(
                    unknown
                        .into_iter()
                        .map(|u| format!("unknown field \"{u}\"")),
                ),
                _ => {}
            }
        }
        Ok(obj)
    }

    pub(crate) fn check_namespace(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        if !def.namespaced {
            return Ok(());
        }
        let nsobj = self
            .storage
            .get("/namespaces", "", ns)
            .ok_or_else(|| ApiError::namespace_not_found(ns))?;
        if nsobj.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(ApiError::forbidden(
                def,
                name,
                format!(
                    "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    def.group_resource()
                ),
            ));
        }
        Ok(())
    }

    async fn create(self: &Arc<Self>, req: &Req, t: &Target) -> Result<Response<Body>, ApiError> {
        if !t.def.verbs.contains(&"create") {
            return Err(ApiError::method_not_allowed(
                "create is not supported on this resource",
            ));
        }
        if t.def.normalizer.is_none() && t.def.crd.is_none() {
            return crate::http::extra::review(self, req, t);
        }
        let mut wo = Self::write_options(req, false)?;
        let body = decode_object(req, &t.def)?;
        let mut obj = check_body(&t.def, body, t.namespace.as_deref(), None)?;
        obj = self.normalize(&t.def, obj, &mut wo)?;
        let ns = t.ns().to_string();
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        if meta_str(&obj, "resourceVersion").is_some_and(|rv| !rv.is_empty()) {
            // kube-apiserver's storage refuses it, as an internal error.
            return Err(ApiError::new(
                500,
                "",
                "resourceVersion should not be set on objects to be created",
            ));
        }
        if t.def.namespaced {
            meta_mut(&mut obj).insert("namespace".into(), Value::String(ns.clone()));
        }
        self.check_namespace(&t.def, &ns, &name)?;
        let mut adm = Admission::new(
            Attributes::new(
                Operation::Create,
                &t.def,
                None,
                &ns,
                &name,
                &req.user,
                wo.dry_run,
            )
            .with_options("CreateOptions", options_of(req)),
        );
        let obj = self
            .admit_mutation(&t.def, obj, None, &mut adm, &mut wo)
            .await?;
        let stored = self
            .create_object_admitted(
                &t.def,
                &ns,
                obj,
                &wo.field_manager,
                wo.dry_run,
                "Update",
                Some(&mut adm),
            )
            .await?;
        wo.warnings.append(&mut adm.warnings);
        let mut resp = h::encode(
            StatusCode::CREATED,
            &self.present(&t.def, &stored),
            &h::negotiate(req, false).unwrap_or(Format::Json),
        );
        add_warnings(&mut resp, &wo.warnings);
        self.kick.notify_one();
        Ok(resp)
    }

    /// Prepares and stores a new object (name generation, server-set metadata).
    pub(crate) fn create_object(
        &self,
        def: &ResourceDef,
        ns: &str,
        obj: Value,
        manager: &str,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        self.create_object_as(def, ns, obj, manager, dry_run, "Update")
    }

    /// Like `create_object`, recording `operation` (`Update` or `Apply`) in managedFields.
    /// Without admission (the server's own writes).
    pub(crate) fn create_object_as(
        &self,
        def: &ResourceDef,
        ns: &str,
        obj: Value,
        manager: &str,
        dry_run: bool,
        operation: &str,
    ) -> Result<Value, ApiError> {
        // Without admission nothing awaits (unless a conversion webhook would be needed,
        // which the server's own writes never need).
        self.create_object_admitted(def, ns, obj, manager, dry_run, operation, None)
            .now_or_never()
            .unwrap_or_else(|| {
                Err(ApiError::internal(
                    "a write that needs a conversion webhook went through the synchronous path",
                ))
            })
    }

    /// Mutating admission of a write: the built-in mutating plugins (on a new pod), then
    /// the mutating webhooks over `obj` (`old`: the current object of an update). An
    /// object a webhook changed is decoded again, as kube-apiserver decodes the patched
    /// object (unknown fields dropped, custom resources pruned). The object as the
    /// writer sent it is kept in `adm.basis` when admission changed it.
    pub(crate) async fn admit_mutation(
        &self,
        def: &ResourceDef,
        mut obj: Value,
        old: Option<Value>,
        adm: &mut Admission,
        wo: &mut WriteOptions,
    ) -> Result<Value, ApiError> {
        if adm.attrs.operation == Operation::Create
            && def.group.is_empty()
            && def.plural == "pods"
            && adm.attrs.subresource.is_empty()
        {
            adm.basis = Some(obj.clone());
            // The plugins see the decoded pod (a limit defaults its request).
            decode_new(def, &mut obj);
            let (ns, name) = (adm.attrs.namespace.clone(), adm.attrs.name.clone());
            admission::pods::mutate(self, def, &ns, &name, &mut obj).await?;
        }
        adm.attrs.object = Some(obj);
        adm.attrs.old_object = old;
        let changed = admission::mutate(self, adm).await?;
        let obj = adm.attrs.object.take().unwrap_or(Value::Null);
        adm.attrs.old_object = None;
        if !changed {
            return Ok(obj);
        }
        let saved = std::mem::replace(&mut wo.validation, "Ignore".into());
        let result = self.normalize(def, obj, wo);
        wo.validation = saved;
        result
    }

    /// The create path: server-set metadata, defaults, the kind's preparation and
    /// validation, then validating admission (`adm`) and storage (in the storage version).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn create_object_admitted(
        &self,
        def: &ResourceDef,
        ns: &str,
        mut obj: Value,
        manager: &str,
        dry_run: bool,
        operation: &str,
        mut adm: Option<&mut Admission>,
    ) -> Result<Value, ApiError> {
        let generate = meta_str(&obj, "generateName").map(str::to_string);
        let given = meta_str(&obj, "name")
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        if given.is_none() && generate.is_none() {
            return Err(ApiError::invalid_field(
                def,
                "",
                "metadata.name",
                "FieldValueRequired",
                "name or generateName is required",
            ));
        }
        meta::validate_meta(def, &obj)?;
        let strategy = crate::registry::strategy::for_def(def);
        {
            let m = meta_mut(&mut obj);
            m.insert(
                "uid".into(),
                Value::String(uuid::Uuid::new_v4().to_string()),
            );
            m.insert("creationTimestamp".into(), Value::String(meta::now_time()));
            for f in [
                "resourceVersion",
                "generation",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "managedFields",
                "selfLink",
            ] {
                m.remove(f);
            }
        }
        let ty = crate::registry::schema::for_resource(def, None);
        // The writer's managedFields come from its object before mutating admission
        // changed it (kube-apiserver's field manager runs first): what admission added
        // is owned by no one.
        let basis = adm.as_deref_mut().and_then(|a| a.basis.take());
        // An applier owns what it applied, not what the server defaults.
        let applied =
            (operation == "Apply").then(|| fields::paths_of(basis.as_ref().unwrap_or(&obj), ty));
        // Decoding: what Go's omitempty drops, defaults, and the struct fields Go always
        // writes.
        let decode = |obj: &mut Value| decode_new(def, obj);
        decode(&mut obj);
        // An updater owns what the decoded object adds to an empty one.
        let owned = applied.unwrap_or_else(|| {
            let decoded_basis = basis.map(|mut b| {
                decode(&mut b);
                b
            });
            // Go's zero value of the kind's struct; a custom resource is unstructured, and
            // its zero value is empty, whatever its schema requires.
            let zero = if def.crd.is_some() {
                json!({})
            } else {
                crate::registry::schema::zero_object(ty)
            };
            let mut c = fields::compare(&zero, decoded_basis.as_ref().unwrap_or(&obj), ty);
            if def.has_status {
                c.retain_root("status", false);
            }
            c.changed()
        });
        strategy.prepare_for_create(def, &mut obj);
        // A Service's cluster IP and node ports (before validation, as kube-apiserver's
        // BeginCreate), held for this write until it is stored or fails.
        let _allocated = self.service_alloc.create(
            &self.storage,
            def,
            given.as_deref().unwrap_or(""),
            &mut obj,
            dry_run,
        )?;
        if def.crd.is_none() {
            crate::registry::schema::fill_struct_fields(&mut obj, ty);
        }
        let causes = crate::registry::resources::validate(def, &obj, None);
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                &crate::registry::events::error_def(def),
                given.as_deref().unwrap_or(""),
                causes,
            ));
        }
        if let Some(crd) = &def.crd {
            crd.validate_rules(def, &obj, None, &def.version)?;
        }
        meta::record_managed(
            &mut obj,
            manager,
            operation,
            &def.api_version(),
            None,
            owned,
            &Default::default(),
            false,
        );
        // Encoding: the fields Go writes even when unset (not owned by the creator).
        if def.crd.is_none() {
            crate::registry::schema::fill_go_unset(&mut obj, ty);
        }
        for attempt in 0..8 {
            let name = match (&given, &generate) {
                (Some(n), _) => n.clone(),
                (None, Some(prefix)) => {
                    let mut p = prefix.clone();
                    p.truncate(253 - 5);
                    format!("{p}{}", random_suffix())
                }
                (None, None) => {
                    return Err(ApiError::invalid_field(
                        def,
                        "",
                        "metadata.name",
                        "FieldValueRequired",
                        "name or generateName is required",
                    ));
                }
            };
            if let Err(msg) = meta::validate_name(def, &name) {
                let field = if given.is_some() {
                    "metadata.name"
                } else {
                    "metadata.generateName"
                };
                return Err(ApiError::invalid_field(
                    def,
                    &name,
                    field,
                    "FieldValueInvalid",
                    format!("\"{name}\": {msg}"),
                ));
            }
            meta_mut(&mut obj).insert("name".into(), Value::String(name.clone()));
            if generate.is_some() {
                strategy.canonicalize(&mut obj);
            }
            crate::http::limits::validate_sizes(def, &obj)?;
            if let Some(adm) = adm.as_deref_mut() {
                // LimitRanger's validation, first of the validating plugins.
                if def.group.is_empty() && def.plural == "pods" {
                    admission::pods::validate_limits(self, def, ns, &name, &obj)?;
                }
                if def.group.is_empty() && def.plural == "persistentvolumeclaims" {
                    admission::pods::limit_claim(self, def, ns, &name, &obj)?;
                }
                adm.attrs.name = name.clone();
                adm.attrs.object = Some(obj.clone());
                adm.attrs.old_object = None;
                admission::validate(self, adm).await?;
                adm.attrs.object = None;
                // The ResourceQuota plugin, last of the validating ones.
                if let Some(why) =
                    crate::registry::quota::check_write(&self.storage, def, ns, &obj, None, dry_run)
                {
                    return Err(ApiError::forbidden_because(def, &name, &why));
                }
            }
            if dry_run {
                if let Some(existing) = self.storage.get(&def.storage_key(), ns, &name) {
                    return Err(exists_error(def, &name, &existing));
                }
                return Ok(obj);
            }
            crate::http::limits::check_stored_size(def, &obj, &self.options.limits)?;
            let candidate = conversion::to_storage(self, def, obj.clone()).await?;
            let res = self
                .storage
                .mutate(&def.storage_key(), ns, &name, |cur, _| match cur {
                    Some(existing) => Err(exists_error(def, &name, existing)),
                    None => Ok(Mutation::Put(candidate)),
                });
            match res {
                Ok((Some(stored), _)) => {
                    self.after_write(def);
                    return conversion::to_version(self, def, (*stored).clone()).await;
                }
                Ok((None, _)) => return Err(ApiError::internal("object vanished during create")),
                // Only a taken name is retried with another one (not a storage failure).
                Err(e) if e.status.reason != "AlreadyExists" => return Err(e),
                Err(_) if given.is_none() && attempt < 7 => continue,
                Err(_) if given.is_none() => {
                    let mut e = ApiError::already_exists(def, &name);
                    e.status.message = format!(
                        "{}, the server was not able to generate a unique name for the object",
                        e.status.message
                    );
                    if let Some(d) = e.status.details.as_mut() {
                        d.retry_after_seconds = 1;
                    }
                    e.retry_after = Some(1);
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::internal("name generation failed"))
    }

    /// Admission of a write to a subresource that carries an object of its own kind:
    /// mutating admission may rewrite the body the handler then reads. The embedded
    /// server sends the resource's group and version with that kind, and no oldObject
    /// for `/scale` (kube-apiserver sends the current Scale).
    async fn admit_subresource(
        self: &Arc<Self>,
        req: &mut Req,
        t: &Target,
        name: &str,
        sub: &str,
    ) -> Result<(), ApiError> {
        // An undecodable body gets the handler's own error.
        let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
            return Ok(());
        };
        let (operation, options) = if req.method == http::Method::PUT {
            (Operation::Update, "UpdateOptions")
        } else {
            (Operation::Create, "CreateOptions")
        };
        let dry_run = req.q("dryRun") == Some("All");
        let mut attrs = Attributes::new(
            operation,
            &t.def,
            Some(sub),
            t.ns(),
            name,
            &req.user,
            dry_run,
        )
        .with_options(options, serde_json::json!({}));
        if let Some(kind) = body.get("kind").and_then(Value::as_str) {
            attrs.kind = kind.to_string();
        }
        attrs.object = Some(body);
        let mut adm = Admission::new(attrs);
        if admission::mutate(self, &mut adm).await?
            && let Some(obj) = &adm.attrs.object
        {
            req.body = serde_json::to_vec(obj)
                .map_err(|e| ApiError::internal(format!("encoding the admitted object: {e}")))?
                .into();
        }
        admission::validate(self, &mut adm).await
    }

    async fn update(
        self: &Arc<Self>,
        req: &Req,
        t: &Target,
        name: &str,
        sub: Option<&str>,
    ) -> Result<Response<Body>, ApiError> {
        self.check_sub(t, sub)?;
        let mut wo = Self::write_options(req, false)?;
        let body = decode_object(req, &t.def)?;
        if sub == Some("scale") {
            return crate::http::extra::update_scale(self, req, t, name, body, &wo);
        }
        let obj = check_body(&t.def, body, t.namespace.as_deref(), Some(name))?;
        let obj = self.normalize(&t.def, obj, &mut wo)?;
        let mut adm = Admission::new(
            Attributes::new(
                Operation::Update,
                &t.def,
                sub,
                t.ns(),
                name,
                &req.user,
                wo.dry_run,
            )
            .with_options("UpdateOptions", options_of(req)),
        );
        let obj = self
            .admit_update_mutation(&t.def, t.ns(), name, sub, obj, true, &mut adm, &mut wo)
            .await?;
        let (status, stored) = self
            .update_object_admitted(&t.def, t.ns(), name, sub, obj, &wo, true, Some(&mut adm))
            .await?;
        wo.warnings.append(&mut adm.warnings);
        let mut resp = h::encode(
            status,
            &self.present(&t.def, &stored),
            &h::negotiate(req, false).unwrap_or(Format::Json),
        );
        add_warnings(&mut resp, &wo.warnings);
        self.kick.notify_one();
        Ok(resp)
    }

    /// Mutating admission of an update (PUT or patch) of `name`: the current object is the
    /// `oldObject`; a PUT that creates the object is admitted as a create, and an update of
    /// a missing object is not admitted (it fails with 404).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn admit_update_mutation(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        sub: Option<&str>,
        obj: Value,
        is_put: bool,
        adm: &mut Admission,
        wo: &mut WriteOptions,
    ) -> Result<Value, ApiError> {
        let old = match self.storage.get(&def.storage_key(), ns, name) {
            Some(cur) => self.present(
                def,
                &conversion::to_version(self, def, (*cur).clone()).await?,
            ),
            None if is_put && def.create_on_update && sub.is_none() => {
                adm.attrs.operation = Operation::Create;
                if let Some(o) = adm.attrs.options.as_mut() {
                    o["kind"] = json!("CreateOptions");
                }
                return self.admit_mutation(def, obj, None, adm, wo).await;
            }
            None => return Ok(obj),
        };
        self.admit_mutation(def, obj, Some(old), adm, wo).await
    }

    /// The update path shared by PUT and PATCH, without admission (the server's own
    /// writes). `is_put`: a missing resourceVersion is refused for custom resources (for
    /// patches it means "latest").
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn update_object(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        sub: Option<&str>,
        mut obj: Value,
        wo: &WriteOptions,
        is_put: bool,
    ) -> Result<(StatusCode, Value), ApiError> {
        meta::validate_meta(def, &obj)?;
        let key = def.storage_key();
        if self.storage.get(&key, ns, name).is_none() {
            if is_put && def.create_on_update && sub.is_none() {
                self.check_namespace(def, ns, name)?;
                let stored = self.create_object(def, ns, obj, &wo.field_manager, wo.dry_run)?;
                return Ok((StatusCode::CREATED, stored));
            }
            return Err(ApiError::not_found(def, name));
        }
        let body_rv = self.update_rv(def, name, &obj, is_put)?;
        let mut result: Option<(StatusCode, Value)> = None;
        let outcome = self.storage.mutate(&key, ns, name, |cur, _next| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(def, name));
            };
            let plan = self.plan_update(
                def,
                ns,
                name,
                sub,
                &mut obj,
                wo,
                body_rv.as_deref(),
                cur,
                None,
            )?;
            if plan.same {
                result = Some((StatusCode::OK, (**cur).clone()));
                return Ok(Mutation::Keep);
            }
            if wo.dry_run {
                result = Some((StatusCode::OK, plan.next));
                return Ok(Mutation::Keep);
            }
            if plan.delete {
                result = Some((StatusCode::OK, plan.next));
                return Ok(Mutation::Delete);
            }
            crate::http::limits::check_stored_size(def, &plan.next, &self.options.limits)?;
            Ok(Mutation::Put(plan.next))
        })?;
        match outcome {
            (Some(stored), Some(_)) => Ok((StatusCode::OK, (*stored).clone())),
            _ => result.ok_or_else(|| ApiError::internal("update produced no result")),
        }
    }

    /// The update path of client requests: like [`Self::update_object`], with validating
    /// admission of the prepared object and conversion to and from the storage version.
    /// As kube-apiserver's `GuaranteedUpdate`, the object is prepared from a snapshot of
    /// the stored one and written only if that is still current; otherwise it is prepared
    /// (and admitted) again.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn update_object_admitted(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        sub: Option<&str>,
        obj: Value,
        wo: &WriteOptions,
        is_put: bool,
        mut adm: Option<&mut Admission>,
    ) -> Result<(StatusCode, Value), ApiError> {
        meta::validate_meta(def, &obj)?;
        let key = def.storage_key();
        if self.storage.get(&key, ns, name).is_none() {
            if is_put && def.create_on_update && sub.is_none() {
                self.check_namespace(def, ns, name)?;
                let stored = self
                    .create_object_admitted(
                        def,
                        ns,
                        obj,
                        &wo.field_manager,
                        wo.dry_run,
                        "Update",
                        adm,
                    )
                    .await?;
                return Ok((StatusCode::CREATED, stored));
            }
            return Err(ApiError::not_found(def, name));
        }
        let body_rv = self.update_rv(def, name, &obj, is_put)?;
        let basis = adm.as_deref_mut().and_then(|a| a.basis.take());
        loop {
            let Some(cur) = self.storage.get(&key, ns, name) else {
                return Err(ApiError::not_found(def, name));
            };
            let current = conversion::to_version(self, def, (*cur).clone()).await?;
            let mut incoming = obj.clone();
            let mut plan = self.plan_update(
                def,
                ns,
                name,
                sub,
                &mut incoming,
                wo,
                body_rv.as_deref(),
                &current,
                basis.as_ref(),
            )?;
            // A Service's new cluster IP and node ports (kube-apiserver's BeginUpdate),
            // held for this attempt.
            let _allocated = match sub {
                None => Some(self.service_alloc.update(
                    &self.storage,
                    def,
                    (ns, name),
                    &current,
                    &mut plan.next,
                    wo.dry_run,
                )?),
                Some(_) => None,
            };
            if let Some(adm) = adm.as_deref_mut() {
                adm.attrs.object = Some(plan.next.clone());
                adm.attrs.old_object = Some(self.present(def, &current));
                admission::validate(self, adm).await?;
                adm.attrs.object = None;
                adm.attrs.old_object = None;
                // The ResourceQuota plugin: what the update adds.
                if let Some(why) = crate::registry::quota::check_write(
                    &self.storage,
                    def,
                    ns,
                    &plan.next,
                    Some(&current),
                    wo.dry_run,
                ) {
                    return Err(ApiError::forbidden_because(def, name, &why));
                }
            }
            if plan.same {
                return Ok((StatusCode::OK, current));
            }
            if wo.dry_run {
                return Ok((StatusCode::OK, plan.next));
            }
            let to_store = conversion::to_storage(self, def, plan.next.clone()).await?;
            if !plan.delete {
                crate::http::limits::check_stored_size(def, &to_store, &self.options.limits)?;
            }
            let snapshot_rv = meta_str(&cur, "resourceVersion").map(str::to_string);
            let mut raced = false;
            let outcome = self.storage.mutate(&key, ns, name, |c, _| {
                let Some(c) = c else {
                    return Err(ApiError::not_found(def, name));
                };
                if meta_str(c, "resourceVersion").map(str::to_string) != snapshot_rv {
                    raced = true;
                    return Err(ApiError::internal("the object changed during admission"));
                }
                Ok(if plan.delete {
                    Mutation::Delete
                } else {
                    Mutation::Put(to_store)
                })
            });
            if outcome.is_ok() {
                self.after_write(def);
            }
            match outcome {
                Err(_) if raced => continue,
                Err(e) => return Err(e),
                Ok((Some(stored), Some(_))) if !plan.delete => {
                    let stored = conversion::to_version(self, def, (*stored).clone()).await?;
                    return Ok((StatusCode::OK, stored));
                }
                Ok(_) => return Ok((StatusCode::OK, plan.next)),
            }
        }
    }

    /// The resourceVersion an update is conditional on (a PUT of a custom resource must
    /// name one).
    fn update_rv(
        &self,
        def: &ResourceDef,
        name: &str,
        obj: &Value,
        is_put: bool,
    ) -> Result<Option<String>, ApiError> {
        let body_rv = meta_str(obj, "resourceVersion")
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        if is_put && body_rv.is_none() && !def.builtin {
            return Err(ApiError::invalid_field(
                def,
                name,
                "metadata.resourceVersion",
                "FieldValueInvalid",
                "0x0: must be specified for an update",
            ));
        }
        Ok(body_rv)
    }

    /// The object an update makes of `cur`: preconditions, the merge with the stored
    /// object, defaults, validation, the kind's preparation and managedFields.
    #[allow(clippy::too_many_arguments)]
    fn plan_update(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        sub: Option<&str>,
        obj: &mut Value,
        wo: &WriteOptions,
        body_rv: Option<&str>,
        cur: &Value,
        basis: Option<&Value>,
    ) -> Result<UpdatePlan, ApiError> {
        if let Some(rv) = body_rv
            && meta_str(cur, "resourceVersion") != Some(rv)
        {
            return Err(ApiError::optimistic_lock(def, name));
        }
        if let Some(uid) = meta_str(obj, "uid").filter(|u| !u.is_empty())
            && Some(uid) != meta_str(cur, "uid")
        {
            // As etcd3's storage reports a failed uid precondition.
            return Err(ApiError::conflict(
                def,
                name,
                &format!(
                    "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    storage_key_text(def, ns, name),
                    meta_str(cur, "uid").unwrap_or("")
                ),
            ));
        }
        let ty = crate::registry::schema::for_resource(def, None);
        let strategy = crate::registry::strategy::for_def(def);
        let decode = |obj: &mut Value| {
            let mut next = merge_for_write(def, cur, obj, sub);
            drop_go_empties(def, &mut next);
            if sub != Some("status") {
                strategy.default(def, &mut next);
            } else if def.group.is_empty() && def.plural == "services" {
                // Defaulting runs on every decode, a status update's too.
                crate::registry::defaults::load_balancer_ip_mode(&mut next);
            }
            crate::registry::schema::default_keys(&mut next, ty);
            if def.crd.is_none() {
                crate::registry::schema::fill_struct_fields(&mut next, ty);
                crate::registry::schema::fill_go_unset(&mut next, ty);
            }
            next
        };
        let mut next = decode(obj);
        if let Some(crd) = &def.crd {
            crd.validate_rules(def, &next, Some(cur), &def.version)?;
        }
        // Finalizers may not be added while deleting.
        if cur.pointer("/metadata/deletionTimestamp").is_some() {
            let old: Vec<&Value> = cur
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            let added: Vec<String> = next
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter(|f| !old.contains(f))
                        .map(|f| crate::error::go_quote(f.as_str().unwrap_or_default()))
                        .collect()
                })
                .unwrap_or_default();
            if !added.is_empty() {
                // kube-apiserver validates the metadata update twice (the generic and
                // the kind's checks): the same cause twice, once in the message.
                let cause = kubewright_core::StatusCause {
                    reason: "FieldValueForbidden".into(),
                    message: format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        added.join(", ")
                    ),
                    field: "metadata.finalizers".into(),
                };
                return Err(ApiError::invalid(def, name, vec![cause.clone(), cause]));
            }
        }
        // kube-apiserver's field manager sees the decoded request, before mutating
        // admission (`basis`: the request before a webhook changed it), the kind's
        // PrepareForUpdate and a Service's allocations: what they set is not the writer's.
        let decoded = match basis {
            Some(b) if wo.apply.is_none() => Some(decode(&mut b.clone())),
            _ => (sub.is_none() && wo.apply.is_none()).then(|| next.clone()),
        };
        strategy.prepare_for_update(def, cur, &mut next, sub);
        if sub.is_none() || sub == Some("status") {
            let causes = if sub.is_none() {
                let mut c = crate::registry::immutable::validate_update(def, cur, &next);
                c.extend(crate::registry::resources::validate(def, &next, Some(cur)));
                c
            } else {
                crate::registry::resources::validate_status(def, cur, &next)
            };
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    &crate::registry::events::error_def(def),
                    name,
                    causes,
                ));
            }
        }
        match &wo.apply {
            Some((paths, force)) => {
                meta::record_managed(
                    &mut next,
                    &wo.field_manager,
                    "Apply",
                    &def.api_version(),
                    sub,
                    paths.clone(),
                    &Default::default(),
                    *force,
                );
            }
            // structured-merge-diff's skipNonAppliedManager: an update of an object that
            // has no managedFields (created with nothing to own, or reset) is not tracked.
            None if !meta::has_managed_fields(&next) => {}
            None => {
                let mut changed = fields::compare(cur, decoded.as_ref().unwrap_or(&next), ty);
                // The fields the write may set: a subresource's, or the main resource's.
                if sub == Some("status") {
                    let sm = crate::registry::strategy::status_metadata(def);
                    changed.retain(|p| sm.owns(p));
                } else if def.has_status {
                    changed.retain_root("status", false);
                }
                meta::record_update(
                    &mut next,
                    &wo.field_manager,
                    &def.api_version(),
                    sub,
                    &changed,
                );
            }
        }
        crate::http::limits::validate_sizes(def, &next)?;
        let same = meta::semantically_equal(cur, &next);
        let finalizers_empty = next
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(|a| a.is_empty());
        let delete = next.pointer("/metadata/deletionTimestamp").is_some() && finalizers_empty;
        Ok(UpdatePlan { next, same, delete })
    }

    async fn delete(
        self: &Arc<Self>,
        req: &Req,
        t: &Target,
        name: &str,
    ) -> Result<Response<Body>, ApiError> {
        let opts = crate::http::delete::DeleteOptions::parse(req)?;
        let mut adm = Admission::new(
            Attributes::new(
                Operation::Delete,
                &t.def,
                None,
                t.ns(),
                name,
                &req.user,
                opts.dry_run,
            )
            .with_options("DeleteOptions", opts.admission_options()),
        );
        let mut r = crate::http::delete::delete_one(
            self,
            &t.def,
            t.ns(),
            name,
            &opts,
            &h::object_format(req),
            &mut adm,
        )
        .await?;
        add_warnings(&mut r, &adm.warnings);
        self.kick.notify_one();
        Ok(r)
    }

    async fn delete_collection(
        self: &Arc<Self>,
        req: &Req,
        t: &Target,
    ) -> Result<Response<Body>, ApiError> {
        let opts = crate::http::delete::DeleteOptions::parse(req)?;
        let lo = Self::parse_list_options(req)?;
        crate::registry::filter::check_field_selector(&t.def, &lo.fields)?;
        let (items, rv) = self
            .storage
            .list(&t.def.storage_key(), t.namespace.as_deref());
        let mut deleted = Vec::new();
        let mut warnings = Vec::new();
        for obj in items {
            if !crate::registry::filter::matches(&t.def, &obj, &lo.labels, &lo.fields) {
                continue;
            }
            let ns = meta_str(&obj, "namespace").unwrap_or("").to_string();
            let name = meta_str(&obj, "name").unwrap_or("").to_string();
            // Each item is admitted as a delete of its own.
            let mut adm = Admission::new(
                Attributes::new(
                    Operation::Delete,
                    &t.def,
                    None,
                    &ns,
                    &name,
                    &req.user,
                    opts.dry_run,
                )
                .with_options("DeleteOptions", opts.admission_options()),
            );
            match crate::http::delete::delete_obj_admitted(
                self, &t.def, &ns, &name, &opts, &mut adm,
            )
            .await
            {
                Ok((_, v)) => deleted.push(self.present_item(&t.def, &v)),
                Err(e) if e.code() == 404 => {}
                Err(e) => return Err(e),
            }
            warnings.append(&mut adm.warnings);
        }
        self.kick.notify_one();
        let mut resp = h::encode(
            StatusCode::OK,
            &json!({"kind": t.def.list_kind(), "apiVersion": t.def.api_version(), "metadata": {"resourceVersion": rv.to_string()}, "items": deleted}),
            &h::object_format(req),
        );
        add_warnings(&mut resp, &warnings);
        Ok(resp)
    }
}

/// Options common to writes.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// dryRun=All.
    pub dry_run: bool,
    /// The manager recorded in managedFields.
    pub field_manager: String,
    /// Ignore, Warn or Strict.
    pub validation: String,
    /// Warnings to return.
    pub warnings: Vec<String>,
    /// Server-side apply: the applied field set and whether conflicts were forced.
    pub apply: Option<(std::collections::BTreeSet<fields::Path>, bool)>,
    /// Who writes (for RBAC's escalation checks).
    pub user: crate::auth::rbac::UserInfo,
    /// The namespace of the request path ("" at cluster scope).
    pub namespace: String,
}

/// What an update makes of the stored object.
pub(crate) struct UpdatePlan {
    /// The object to store.
    next: Value,
    /// Semantically the stored object: nothing to write.
    same: bool,
    /// Deleting, and no finalizer left: the object goes.
    delete: bool,
}

/// The options a client sent with a write, as admission passes them on (`fieldManager`,
/// `fieldValidation`; the kind and `dryRun` are added by `Attributes::with_options`).
pub(crate) fn options_of(req: &Req) -> Value {
    let mut o = serde_json::Map::new();
    for k in ["fieldManager", "fieldValidation"] {
        if let Some(v) = req.q(k).filter(|v| !v.is_empty()) {
            o.insert(k.into(), json!(v));
        }
    }
    Value::Object(o)
}

/// Parsed list options.
pub(crate) struct ListOptions {
    pub rv: Option<u64>,
    pub rv_match: Option<String>,
    pub cont: Option<String>,
    pub limit: usize,
    pub labels: kubewright_core::LabelSelector,
    pub fields: kubewright_core::FieldSelector,
}

/// Decoding of a new object as kube-apiserver's decoder leaves it: what Go's omitempty
/// drops, the kind's defaults, and the struct fields Go always writes.
fn decode_new(def: &ResourceDef, obj: &mut Value) {
    let ty = crate::registry::schema::for_resource(def, None);
    drop_go_empties(def, obj);
    crate::registry::strategy::for_def(def).default(def, obj);
    crate::registry::schema::default_keys(obj, ty);
    if def.crd.is_none() {
        crate::registry::schema::fill_struct_fields(obj, ty);
    }
}

/// Merges an incoming object with the stored one for a write to the main resource or a
/// subresource (status split, immutable metadata).
pub(crate) fn merge_for_write(
    def: &ResourceDef,
    cur: &Value,
    obj: &mut Value,
    sub: Option<&str>,
) -> Value {
    // What a `/status` write keeps of the stored metadata besides the server-owned
    // fields (all of it: `None`).
    let status_reset =
        (sub == Some("status")).then(|| crate::registry::strategy::status_metadata(def).reset());
    let mut next = if let Some(reset) = status_reset {
        // .status comes from the request, and the metadata the kind's status strategy
        // keeps; the rest (spec) from storage.
        let mut n = cur.clone();
        copy_member(&mut n, obj, "status");
        if reset.is_some() {
            copy_member(&mut n, obj, "metadata");
        }
        n
    } else {
        let mut n = obj.clone();
        if def.has_status {
            copy_member(&mut n, cur, "status");
        }
        if def.group.is_empty() && def.plural == "namespaces" && sub != Some("finalize") {
            // A namespace's spec.finalizers change only through /finalize.
            let fins = cur.pointer("/spec/finalizers").cloned();
            match fins {
                Some(f) => n["spec"]["finalizers"] = f,
                None => {
                    if let Some(spec) = n.get_mut("spec").and_then(Value::as_object_mut) {
                        spec.remove("finalizers");
                    }
                }
            }
        }
        n
    };
    // Server-owned metadata always comes from storage, and on `/status` what the kind's
    // status strategy resets.
    const SERVER_OWNED: [&str; 9] = [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "name",
        "namespace",
        "resourceVersion",
        "managedFields",
    ];
    let cur_meta = cur.get("metadata").unwrap_or(&Value::Null);
    meta_mut(&mut next);
    for k in SERVER_OWNED
        .iter()
        .chain(status_reset.flatten().unwrap_or_default())
    {
        copy_member(&mut next["metadata"], cur_meta, k);
    }
    if let Some(o) = next.as_object_mut() {
        o.insert("apiVersion".into(), Value::String(def.api_version()));
        o.insert("kind".into(), Value::String(def.kind.clone()));
    }
    next
}

/// Sets `to[key]` to `from[key]`, or removes it when `from` has none.
fn copy_member(to: &mut Value, from: &Value, key: &str) {
    match from.get(key) {
        Some(v) => {
            if let Some(o) = to.as_object_mut() {
                o.insert(key.to_string(), v.clone());
            }
        }
        None => {
            if let Some(o) = to.as_object_mut() {
                o.remove(key);
            }
        }
    }
}

/// What kube-apiserver's decoding into Go structs drops from a built-in object: empty
/// optional lists and maps, zero scalars of non-pointer `omitempty` fields. Done on the
/// object being written, not on an applied configuration, whose empty fields its applier
/// still owns.
fn drop_go_empties(def: &ResourceDef, obj: &mut Value) {
    if def.crd.is_none() {
        crate::registry::schema::drop_empty_optional(
            obj,
            crate::registry::schema::for_resource(def, None),
            crate::registry::strategy::not_omitempty(&def.group, &def.plural),
        );
    }
}

/// Validates kind/apiVersion/name/namespace of a request body against the URL.
/// The namespace segment of a resource path (`.../namespaces/{ns}/{resource}...`).
fn path_namespace(path: &str) -> Option<&str> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    segs.windows(3)
        .find(|w| w[0] == "namespaces")
        .map(|w| w[1])
        .filter(|ns| !ns.is_empty())
}

pub(crate) fn check_body(
    def: &ResourceDef,
    body: Value,
    url_ns: Option<&str>,
    url_name: Option<&str>,
) -> Result<Value, ApiError> {
    let mut obj = body;
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .unwrap_or(&def.kind)
        .to_string();
    let av = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .map(str::to_string);
    let (group, version) = match av.as_deref().map(|a| a.rsplit_once('/')) {
        Some(Some((g, v))) => (g.to_string(), v.to_string()),
        Some(None) => (String::new(), av.clone().unwrap_or_default()),
        None => (def.group.clone(), def.version.clone()),
    };
    if kind != def.kind || group != def.group {
        // kube-apiserver's decoder: the body's kind must be registered for its version,
        // and then convertible to the resource's kind (only the same kind is).
        let registered = crate::openapi::builtin_kind_definition(&group, &version, &kind).is_some();
        let why = if def.crd.is_none() && registered {
            format!(
                "converting ({version}.{kind}) to ({}.{}): unknown conversion",
                internal_package(&def.group),
                def.kind
            )
        } else {
            format!(
                "no kind \"{kind}\" is registered for version \"{}\" in scheme \"pkg/api/legacyscheme/scheme.go:30\"",
                av.as_deref().unwrap_or_default()
            )
        };
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {}: {why}",
            def.kind
        )));
    }
    if !obj.get("metadata").is_none_or(Value::is_object) {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    let body_ns = meta_str(&obj, "namespace")
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    if def.namespaced {
        if let (Some(b), Some(u)) = (&body_ns, url_ns)
            && b != u
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    } else if body_ns.is_some() {
        meta_mut(&mut obj).remove("namespace");
    }
    if let Some(url_name) = url_name {
        match meta_str(&obj, "name") {
            Some(n) if !n.is_empty() && n != url_name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({url_name})"
                )));
            }
            _ => {
                meta_mut(&mut obj).insert("name".into(), Value::String(url_name.to_string()));
            }
        }
    }
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), Value::String(def.api_version()));
        o.insert("kind".into(), Value::String(def.kind.clone()));
    }
    Ok(obj)
}

fn exists_error(def: &ResourceDef, name: &str, existing: &Value) -> ApiError {
    let mut e = ApiError::already_exists(def, name);
    if existing.pointer("/metadata/deletionTimestamp").is_some() {
        e.status.message = format!("object is being deleted: {}", e.status.message);
    }
    e
}

/// Five characters of kube-apiserver's name-suffix alphabet (`utilrand.String`).
pub(crate) fn random_suffix() -> String {
    use rand::RngExt;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Fields present in `input` but not in the normalised object, as dotted paths.
fn unknown_fields(input: &Value, normalized: &Value, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    match (input, normalized) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match b.get(k) {
                    None if !v.is_null()
                        && !(prefix.is_empty() && (k == "apiVersion" || k == "kind"))
                        && !(prefix == "metadata"
                            && v.as_object().is_some_and(|o| o.is_empty()))
                        && !is_empty_value(v) =>
                    {
                        out.push(path);
                    }
                    Some(bv) => out.extend(unknown_fields(v, bv, &path)),
                    None => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
                out.extend(unknown_fields(x, y, &format!("{prefix}[{i}]")));
            }
        }
        _ => {}
    }
    out
}

fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// Go's `strconv` error for a number that does not parse (`ParseInt`, `ParseUint`).
fn go_parse_error(func: &str, s: &str) -> String {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    let why = if !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !(func == "ParseUint" && s.starts_with(['-', '+']))
    {
        "value out of range"
    } else {
        "invalid syntax"
    };
    format!(
        "strconv.{func}: parsing {}: {why}",
        crate::error::go_quote(s)
    )
}

/// The etcd key kube-apiserver keeps an object under, as its storage errors name it.
fn storage_key_text(def: &ResourceDef, ns: &str, name: &str) -> String {
    let resource = if def.crd.is_some()
        || matches!(
            def.group.as_str(),
            "apiextensions.k8s.io" | "apiregistration.k8s.io"
        ) {
        format!("{}/{}", def.group, def.plural)
    } else {
        def.plural.clone()
    };
    if ns.is_empty() {
        format!("/registry/{resource}/{name}")
    } else {
        format!("/registry/{resource}/{ns}/{name}")
    }
}

/// The verb of a request to a collection.
fn verb_of(method: &http::Method, watch: bool) -> &'static str {
    match *method {
        http::Method::GET | http::Method::HEAD if watch => "watch",
        http::Method::GET | http::Method::HEAD => "list",
        http::Method::POST => "create",
        http::Method::DELETE => "deletecollection",
        _ => "unknown",
    }
}

/// The warning kube-apiserver adds to every request for a deprecated kind.
fn deprecation_warning(def: &ResourceDef) -> Option<&'static str> {
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "ComponentStatus") => Some("v1 ComponentStatus is deprecated in v1.19+"),
        ("", "Endpoints") => {
            Some("v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice")
        }
        _ => None,
    }
}

/// Parses a label selector; a selector kube-apiserver refuses gets its error text.
pub(crate) fn parse_label_selector(s: &str) -> Result<kubewright_core::LabelSelector, ApiError> {
    if let Some(msg) = crate::error::label_selector_error(s) {
        return Err(ApiError::bad_request(msg));
    }
    kubewright_core::LabelSelector::parse(s)
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))
}

/// Decodes the body of a create or update of `def` like kube-apiserver: a JSON body that
/// does not parse gets the decoder's message, naming the expected kind and the start of
/// the body.
fn decode_object(req: &Req, def: &ResourceDef) -> Result<Value, ApiError> {
    h::decode_body_as(req, Some(&def.kind)).map_err(|e| {
        let ct = req.header("content-type").unwrap_or("").to_ascii_lowercase();
        let json = ct.is_empty() || ct.starts_with("application/json");
        if !json || e.code() != 400 || serde_json::from_slice::<Value>(&req.body).is_ok() {
            return e;
        }
        let body = &req.body;
        let summary = match body.first() {
            None => "<empty>".to_string(),
            Some(b'{') if body.len() > 30 => {
                format!("{} ...", String::from_utf8_lossy(&body[..30]))
            }
            Some(b'{') => String::from_utf8_lossy(body).into_owned(),
            Some(_) => {
                let hex: String = body.iter().take(30).map(|b| format!("{b:02x}")).collect();
                if body.len() > 30 { format!("{hex} ...") } else { hex }
            }
        };
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {} ({summary})",
            def.kind,
            crate::error::go_json_error(body)
        ))
    })
}

/// The Go package an internal type of `group` lives in, as conversion errors name it.
/// Parses every quantity of a built-in object as kube-apiserver's decoder does: a
/// malformed one is a 400, the others are stored in their canonical form (`0.5` as
/// `500m`), and the values of core/v1 `ResourceList`s are rounded up to milli, as its
/// defaulting does.
fn canonical_quantities(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    use kubewright_core::quantity::{Quantity, QuantityError};
    use kubewright_proto::walk::{QuantityIn, for_each_quantity};
    for_each_quantity(&def.api_version(), &def.kind, obj, &mut |_, v, at| {
        let mut q: Quantity = match v {
            Value::String(s) => s.parse()?,
            Value::Number(n) => n.to_string().parse()?,
            Value::Null => return Ok(()),
            _ => return Err(QuantityError::Format),
        };
        if at == (QuantityIn::ResourceList { core: true }) {
            q.round_up(-3);
        }
        *v = Value::String(q.to_string());
        Ok(())
    })
    .map_err(|e| {
        ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: {e}",
            def.kind, def.version, def.kind
        ))
    })
}

fn internal_package(group: &str) -> &str {
    match group {
        "" | "events.k8s.io" => "core",
        g => g.split('.').next().unwrap_or(g),
    }
}

/// `namespace/name` sort key used by pagination.
pub(crate) fn object_key(obj: &Value) -> String {
    format!(
        "{}/{}",
        meta_str(obj, "namespace").unwrap_or(""),
        meta_str(obj, "name").unwrap_or("")
    )
}

/// The continue token kube-apiserver offers with a 410 for an expired one: revision -1
/// (the latest), the same start key.
fn encode_continue_inconsistent(key: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"v": "meta.k8s.io/v1", "rv": -1, "start": key}).to_string())
}

fn encode_continue(rv: u64, key: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"v": "meta.k8s.io/v1", "rv": rv, "start": key}).to_string())
}

/// Decodes a continue token as kube-apiserver's storage does, with its error texts: the
/// revision (-1: the latest, an inconsistent continuation) and the key to start after.
fn decode_continue(tok: &str) -> Result<(i64, String), ApiError> {
    let bad = |why: &str| {
        ApiError::bad_request(format!(
            "invalid continue token: continue key is not valid{why}"
        ))
    };
    let raw = go_raw_url_base64(tok)
        .map_err(|at| bad(&format!(": illegal base64 data at input byte {at}")))?;
    let v: Value = serde_json::from_slice(&raw)
        .map_err(|_| bad(&format!(": {}", crate::error::go_json_error(&raw))))?;
    // Go's decoding into `continueToken{v, rv int64, start}`: a field of the wrong type
    // (null leaves it zero).
    let top = match &v {
        Value::Object(_) | Value::Null => None,
        Value::String(_) => Some("string"),
        Value::Number(_) => Some("number"),
        Value::Bool(_) => Some("bool"),
        Value::Array(_) => Some("array"),
    };
    if let Some(kind) = top {
        return Err(bad(&format!(
            ": json: cannot unmarshal {kind} into Go value of type storage.continueToken"
        )));
    }
    for (field, want) in [("v", "string"), ("rv", "int64"), ("start", "string")] {
        let kind = match v.get(field) {
            None | Some(Value::Null) => continue,
            Some(Value::String(_)) if want == "string" => continue,
            Some(Value::Number(n)) if want == "int64" && n.is_i64() => continue,
            Some(Value::Number(n)) if want == "int64" => format!("number {n}"),
            Some(Value::String(_)) => "string".to_string(),
            Some(Value::Number(_)) => "number".to_string(),
            Some(Value::Bool(_)) => "bool".to_string(),
            Some(Value::Array(_)) => "array".to_string(),
            Some(Value::Object(_)) => "object".to_string(),
        };
        return Err(bad(&format!(
            ": json: cannot unmarshal {kind} into Go struct field continueToken.{field} of type {want}"
        )));
    }
    let version = v.get("v").and_then(Value::as_str).unwrap_or("");
    if version != "meta.k8s.io/v1" {
        return Err(bad(&format!(
            ": server does not recognize this encoded version {version}"
        )));
    }
    let rv = v.get("rv").and_then(Value::as_i64).unwrap_or(0);
    if rv == 0 {
        return Err(bad(
            ": incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let start = v.get("start").and_then(Value::as_str).unwrap_or("");
    if start.is_empty() {
        return Err(bad(": encoded start key empty (version meta.k8s.io/v1)"));
    }
    Ok((rv, start.to_string()))
}

/// Decodes `s` as Go's `base64.RawURLEncoding.DecodeString` does: no padding, CR and LF
/// skipped, unused trailing bits ignored. The error is the offset Go names.
fn go_raw_url_base64(s: &str) -> Result<Vec<u8>, usize> {
    fn sextet(b: u8) -> Option<u32> {
        Some(u32::from(match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        }))
    }
    let src = s.as_bytes();
    let mut out = Vec::with_capacity(src.len() * 3 / 4);
    let mut si = 0;
    while si < src.len() {
        // One quantum: up to four sextets.
        let (mut val, mut j) = (0u32, 0usize);
        while j < 4 {
            let Some(&b) = src.get(si) else {
                match j {
                    0 => return Ok(out),
                    1 => return Err(si - 1),
                    _ => break,
                }
            };
            si += 1;
            match sextet(b) {
                Some(v) => {
                    val |= v << (18 - 6 * j);
                    j += 1;
                }
                None if b == b'\n' || b == b'\r' => {}
                None => return Err(si - 1),
            }
        }
        let bytes = val.to_be_bytes();
        out.extend_from_slice(&bytes[1..j]);
    }
    Ok(out)
}

fn too_large_rv(rv: u64, current: u64) -> ApiError {
    let mut e = ApiError::timeout(
        // kube-apiserver's NewTimeoutError prefixes its message.
        format!("Timeout: Too large resource version: {rv}, current: {current}"),
        1,
    );
    if let Some(d) = e.status.details.as_mut() {
        d.causes.push(kubewright_core::StatusCause {
            reason: "ResourceVersionTooLarge".into(),
            message: "Too large resource version".into(),
            field: String::new(),
        });
    }
    e
}

pub(crate) fn add_warnings(resp: &mut Response<Body>, warnings: &[String]) {
    let mut sent: Vec<&String> = Vec::new();
    for w in warnings {
        // Identical warnings are sent once, as kube-apiserver's recorder does.
        if sent.contains(&w) {
            continue;
        }
        sent.push(w);
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = http::HeaderValue::from_str(&text) {
            resp.headers_mut().append("warning", v);
        }
    }
}

fn percent_decode(s: &str) -> Result<String, ()> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or(())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| ())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ())
}
