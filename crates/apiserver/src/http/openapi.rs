//! OpenAPI documents, as kube-apiserver publishes them:
//!
//! - `/openapi/v3`: an index of one document per group version served, each with a
//!   `serverRelativeURL` carrying the document's hash;
//! - `/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`: an OpenAPI 3.0 document
//!   with the resource paths (operations with `x-kubernetes-action`,
//!   `x-kubernetes-group-version-kind`, query parameters such as `fieldValidation`, patch
//!   content types) and the component schemas they reach;
//! - `/openapi/v2`: one Swagger 2.0 document with every path and definition, as JSON or
//!   as the gnostic protobuf message kubectl downloads for client-side validation.
//!
//! Built-in schemas come from the definition tables of `crate::openapi`; custom
//! resources get the `openAPIV3Schema` of their CRD version. The registry is read at request
//! time (custom resources come and go); documents are cached per group version and rebuilt
//! when the resources they describe change.

mod paths;
mod proto_v2;

use crate::error::ApiError;
use crate::http::api::ApiServer;
use crate::http::{self as h, Body, Req};
use crate::openapi::schemas::{self, BUILTINS, V2_REF, V3_REF};
use crate::registry::ResourceDef;
use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use paths::Flavor;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};

/// The Kubernetes version the documents claim.
const K8S_VERSION: &str = "v1.32.0";
const PROTO_V2: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The content type kube-apiserver answers for either protobuf spelling (Go's
/// `mime.ParseMediaType` rejects the `@` of the other).
const PROTO_V2_CT: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const PROTO_V3: &str = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf";
const CRD_STORAGE_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// Serves `/openapi/v2` and `/openapi/v3[/...]`.
pub fn serve(srv: &Arc<ApiServer>, req: &Req) -> Option<Response<Body>> {
    if req.method != Method::GET && req.method != Method::HEAD {
        return Some(h::error_response(&ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({})",
            req.method
        ))));
    }
    let path = req.path.trim_end_matches('/');
    Some(match path {
        "/openapi/v2" => serve_v2(srv, req),
        "/openapi/v3" => serve_v3_index(srv, req),
        p => match p.strip_prefix("/openapi/v3/") {
            Some(gv) => serve_v3_doc(srv, req, gv),
            None => h::error_response(&ApiError::path_not_found()),
        },
    })
}

/// A rendered document and its hash.
struct Doc {
    body: Bytes,
    hash: String,
}

/// Cached documents: key -> (fingerprint of what they describe, document).
type DocCache = HashMap<String, (String, Arc<Doc>)>;
static CACHE: LazyLock<Mutex<DocCache>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// A served resource and, for a custom resource, its CRD version's schema and the CRD
/// object's identity (uid and resourceVersion, part of the cache fingerprint).
struct Entry {
    def: Arc<ResourceDef>,
    crd_schema: Option<Value>,
    crd_rev: String,
}

/// Resources served, grouped by (group, version), read from the registry now.
fn snapshot(srv: &ApiServer) -> BTreeMap<(String, String), Vec<Entry>> {
    let defs: Vec<Arc<ResourceDef>> = srv
        .registry
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .all()
        .filter(|d| !d.is_virtual())
        .cloned()
        .collect();
    let mut out: BTreeMap<(String, String), Vec<Entry>> = BTreeMap::new();
    for def in defs {
        let (crd_schema, crd_rev) = if def.crd.is_some() {
            let name = format!("{}.{}", def.plural, def.group);
            match srv.storage.get(CRD_STORAGE_KEY, "", &name) {
                Some(crd) => {
                    let schema = crd
                        .pointer("/spec/versions")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .find(|v| v.get("name").and_then(Value::as_str) == Some(&def.version))
                        .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
                        .cloned();
                    let rev = format!(
                        "{}@{}",
                        crd.pointer("/metadata/uid")
                            .and_then(Value::as_str)
                            .unwrap_or(""),
                        crd.pointer("/metadata/resourceVersion")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                    );
                    (schema, rev)
                }
                None => (None, String::new()),
            }
        } else {
            (None, String::new())
        };
        out.entry((def.group.clone(), def.version.clone()))
            .or_default()
            .push(Entry {
                def,
                crd_schema,
                crd_rev,
            });
    }
    out
}

fn fingerprint(entries: &[Entry]) -> String {
    let mut s = String::new();
    for e in entries {
        let d = &e.def;
        s.push_str(&format!(
            "{}/{}/{}/{}/{}/{}/{}/{}/{}/{:?}/{};",
            d.group,
            d.version,
            d.plural,
            d.kind,
            d.namespaced,
            d.has_status,
            d.scale.is_some(),
            d.builtin,
            d.delete_returns_object,
            d.verbs,
            e.crd_rev
        ));
    }
    s
}

/// `api/v1` or `apis/<group>/<version>`.
fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn cached(key: String, fp: String, build: impl FnOnce() -> Value) -> Arc<Doc> {
    {
        let cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((f, d)) = cache.get(&key)
            && *f == fp
        {
            return d.clone();
        }
    }
    let body = serde_json::to_vec(&build()).unwrap_or_default();
    let doc = Arc::new(Doc {
        hash: hash_hex(&body),
        body: Bytes::from(body),
    });
    CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, (fp, doc.clone()));
    doc
}

/// A stable 128-bit hash (two FNV-1a passes with different bases), upper-case hex.
fn hash_hex(b: &[u8]) -> String {
    let fnv = |basis: u64| {
        b.iter().fold(basis, |h, x| {
            (h ^ u64::from(*x)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    format!(
        "{:016X}{:016X}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x6c62_272e_07bb_0142)
    )
}

/// The definition names (kind, list) of a resource, adding custom and unknown kinds'
/// schemas to `extra`.
fn kind_schemas(e: &Entry, extra: &mut BTreeMap<String, Value>) -> (String, String) {
    let d = &e.def;
    if d.crd.is_none() {
        let b = &*BUILTINS;
        let kind = b
            .kinds
            .get(&(d.group.clone(), d.version.clone(), d.kind.clone()));
        let list = b.kinds.get(&(
            d.group.clone(),
            d.version.clone(),
            format!("{}List", d.kind),
        ));
        if let (Some(k), Some(l)) = (kind, list) {
            return (k.clone(), l.clone());
        }
    }
    let mut names = Vec::new();
    for (name, schema) in schemas::crd_schemas(&d.group, &d.version, &d.kind, e.crd_schema.as_ref())
    {
        names.push(name.clone());
        extra.insert(name, schema);
    }
    // crd_schemas returns the list first, then the kind.
    (
        names.pop().unwrap_or_default(),
        names.pop().unwrap_or_default(),
    )
}

fn info() -> Value {
    json!({"title": "Kubernetes", "version": K8S_VERSION})
}

fn security_scheme() -> Value {
    json!({"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"}})
}

/// The OpenAPI 3.0 document of one group version.
fn build_v3(entries: &[Entry]) -> Value {
    let mut extra = BTreeMap::new();
    let mut paths = Map::new();
    for e in entries {
        let (kind, list) = kind_schemas(e, &mut extra);
        for (p, item) in paths::resource_paths(&e.def, &kind, &list, Flavor::V3) {
            paths.insert(p, item);
        }
    }
    let paths = Value::Object(paths);
    let components = schemas::closure(&paths, V3_REF, &BUILTINS.schemas, &extra);
    json!({
        "openapi": "3.0.0",
        "info": info(),
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": security_scheme()},
        "security": [{"BearerToken": []}],
    })
}

/// The Swagger 2.0 document of everything served.
fn build_v2(all: &BTreeMap<(String, String), Vec<Entry>>) -> Value {
    let mut extra = BTreeMap::new();
    let mut paths = Map::new();
    for e in all.values().flatten() {
        let (kind, list) = kind_schemas(e, &mut extra);
        for (p, item) in paths::resource_paths(&e.def, &kind, &list, Flavor::V2) {
            paths.insert(p, item);
        }
    }
    let paths = Value::Object(paths);
    let mut definitions = schemas::closure(&paths, V2_REF, &BUILTINS.schemas, &extra);
    for s in definitions.values_mut() {
        schemas::to_v2(s);
    }
    json!({
        "swagger": "2.0",
        "info": info(),
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": security_scheme(),
        "security": [{"BearerToken": []}],
    })
}

fn v3_doc_for(group: &str, version: &str, entries: &[Entry]) -> Arc<Doc> {
    cached(
        format!("v3:{}", gv_key(group, version)),
        fingerprint(entries),
        || build_v3(entries),
    )
}

/// Whether the client accepts JSON (no Accept header counts as yes).
fn accepts_json(req: &Req) -> bool {
    let Some(accept) = req.header("accept").filter(|a| !a.trim().is_empty()) else {
        return true;
    };
    accept.split(',').any(|part| {
        let essence = part.split(';').next().unwrap_or("").trim();
        let essence = essence.to_ascii_lowercase();
        matches!(
            essence.as_str(),
            "application/json" | "*/*" | "application/*"
        )
    })
}

fn not_acceptable(proto: &str) -> Response<Body> {
    h::error_response(&ApiError::not_acceptable(format!(
        "only the following media types are accepted: application/json (not {proto})"
    )))
}

fn json_response(doc: &Doc) -> Response<Body> {
    let mut r = h::response(StatusCode::OK, "application/json", doc.body.clone());
    set_etag(&mut r, &doc.hash);
    r
}

fn set_etag(r: &mut Response<Body>, hash: &str) {
    if let Ok(v) = HeaderValue::from_str(&format!("\"{hash}\"")) {
        r.headers_mut().insert(header::ETAG, v);
    }
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
}

/// 304 when the client's `If-None-Match` names the current document.
fn not_modified(req: &Req, doc: &Doc) -> Option<Response<Body>> {
    let inm = req.header("if-none-match")?;
    let tag = format!("\"{}\"", doc.hash);
    if !inm.split(',').any(|t| t.trim() == tag || t.trim() == "*") {
        return None;
    }
    let mut r = h::response(StatusCode::NOT_MODIFIED, "application/json", Bytes::new());
    r.headers_mut().remove(header::CONTENT_TYPE);
    set_etag(&mut r, &doc.hash);
    Some(r)
}

/// Whether the client's first acceptable type for `/openapi/v2` is the protobuf form
/// (`None`: neither that nor JSON is accepted).
fn wants_v2_proto(req: &Req) -> Option<bool> {
    let Some(accept) = req.header("accept").filter(|a| !a.trim().is_empty()) else {
        return Some(false);
    };
    accept.split(',').find_map(|part| {
        let essence = part.split(';').next().unwrap_or("").trim();
        match essence.to_ascii_lowercase().as_str() {
            "application/json" | "*/*" | "application/*" => Some(false),
            // The `@` spelling (kubectl's) is the deprecated one; both are served.
            PROTO_V2 | PROTO_V2_CT => Some(true),
            _ => None,
        }
    })
}

/// The protobuf form of the current v2 document, cached by the JSON document's hash.
fn v2_proto(doc: &Doc) -> Arc<Doc> {
    /// (hash of the JSON document, its protobuf form).
    type Cached = Option<(String, Arc<Doc>)>;
    static PROTO: Mutex<Cached> = Mutex::new(None);
    if let Some((h, d)) = &*PROTO.lock().unwrap_or_else(|e| e.into_inner())
        && *h == doc.hash
    {
        return d.clone();
    }
    let json: Value = serde_json::from_slice(&doc.body).unwrap_or(Value::Null);
    let body = proto_v2::document(&json);
    let d = Arc::new(Doc {
        hash: hash_hex(&body),
        body: Bytes::from(body),
    });
    *PROTO.lock().unwrap_or_else(|e| e.into_inner()) = Some((doc.hash.clone(), d.clone()));
    d
}

fn serve_v2(srv: &ApiServer, req: &Req) -> Response<Body> {
    let Some(proto) = wants_v2_proto(req) else {
        return h::error_response(&ApiError::not_acceptable(format!(
            "only the following media types are accepted: application/json, {PROTO_V2}"
        )));
    };
    let all = snapshot(srv);
    let fp: String = all.values().map(|e| fingerprint(e)).collect();
    let doc = cached("v2".into(), fp, || build_v2(&all));
    if !proto {
        if let Some(r) = not_modified(req, &doc) {
            return r;
        }
        return json_response(&doc);
    }
    let pb = v2_proto(&doc);
    if let Some(r) = not_modified(req, &pb) {
        return r;
    }
    let mut r = h::response(StatusCode::OK, PROTO_V2_CT, pb.body.clone());
    set_etag(&mut r, &pb.hash);
    r
}

fn serve_v3_index(srv: &ApiServer, req: &Req) -> Response<Body> {
    if !accepts_json(req) {
        return not_acceptable(PROTO_V3);
    }
    let mut paths = Map::new();
    for ((group, version), entries) in snapshot(srv) {
        let doc = v3_doc_for(&group, &version, &entries);
        let key = gv_key(&group, &version);
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", doc.hash)}),
        );
    }
    h::encode(StatusCode::OK, &json!({ "paths": paths }), &h::Format::Json)
}

fn serve_v3_doc(srv: &ApiServer, req: &Req, gv: &str) -> Response<Body> {
    let segs: Vec<&str> = gv.split('/').collect();
    let (group, version) = match segs.as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return h::error_response(&ApiError::path_not_found()),
    };
    let mut all = snapshot(srv);
    let Some(entries) = all.remove(&(group.to_string(), version.to_string())) else {
        return h::error_response(&ApiError::path_not_found());
    };
    if !accepts_json(req) {
        return not_acceptable(PROTO_V3);
    }
    let doc = v3_doc_for(group, version, &entries);
    let Some(asked) = req.q("hash") else {
        if let Some(r) = not_modified(req, &doc) {
            return r;
        }
        return json_response(&doc);
    };
    if asked != doc.hash {
        // A stale hash: point the client at the current document, as kube-apiserver does.
        let mut r = h::response(StatusCode::MOVED_PERMANENTLY, "text/plain", Bytes::new());
        let location = format!("/openapi/v3/{}?hash={}", gv_key(group, version), doc.hash);
        if let Ok(v) = HeaderValue::from_str(&location) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        return r;
    }
    let mut r = match not_modified(req, &doc) {
        Some(r) => r,
        None => json_response(&doc),
    };
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, immutable"),
    );
    let expires = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(24 * 365))
        .map(|t| t.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string())
        .ok();
    if let Some(v) = expires.and_then(|e| HeaderValue::from_str(&e).ok()) {
        r.headers_mut().insert(header::EXPIRES, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::api::ServerOptions;
    use http_body_util::BodyExt;

    fn server() -> Arc<ApiServer> {
        ApiServer::new(ServerOptions {
            default_namespaces: false,
            ..ServerOptions::default()
        })
    }

    fn req(path: &str, query: &[(&str, &str)], accept: Option<&str>) -> Req {
        let mut headers = http::HeaderMap::new();
        if let Some(a) = accept {
            headers.insert(header::ACCEPT, HeaderValue::from_str(a).unwrap());
        }
        Req {
            method: Method::GET,
            path: path.to_string(),
            query: query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            query_all: query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            headers,
            body: Bytes::new(),
            user: crate::auth::rbac::UserInfo::admin(),
            upgrade: None,
        }
    }

    async fn call(
        srv: &Arc<ApiServer>,
        path: &str,
        query: &[(&str, &str)],
        accept: Option<&str>,
    ) -> (StatusCode, http::HeaderMap, Value) {
        let resp = serve(srv, &req(path, query, accept)).expect("served");
        let (parts, body) = resp.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        let v = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        (parts.status, parts.headers, v)
    }

    fn hdr(h: &http::HeaderMap, k: header::HeaderName) -> &str {
        h.get(k).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    /// Fetches a group version's document through the index, as kubectl does.
    async fn gv_doc(srv: &Arc<ApiServer>, key: &str) -> Value {
        let (code, _, index) = call(srv, "/openapi/v3", &[], None).await;
        assert_eq!(code, StatusCode::OK);
        let url = index["paths"][key]["serverRelativeURL"]
            .as_str()
            .unwrap_or_else(|| panic!("{key} missing from the index"))
            .to_string();
        let (path, hash) = url.split_once("?hash=").unwrap();
        let (code, headers, doc) =
            call(srv, path, &[("hash", hash)], Some("application/json")).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(hdr(&headers, header::CACHE_CONTROL), "public, immutable");
        doc
    }

    fn assert_refs_resolve(doc: &Value, prefix: &str, section: &str) {
        let mut refs = Vec::new();
        schemas::collect_refs(doc, "", &mut refs);
        assert!(!refs.is_empty());
        let defs = doc.pointer(section).and_then(Value::as_object).unwrap();
        for r in refs {
            let name = r
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("foreign reference {r}"));
            assert!(defs.contains_key(name), "unresolved reference {r}");
        }
    }

    /// No `$ref` with siblings in a v3 document (they would be ignored).
    fn assert_no_ref_siblings(v: &Value) {
        match v {
            Value::Object(o) => {
                if o.get("$ref").is_some_and(Value::is_string) {
                    assert_eq!(o.len(), 1, "$ref with siblings: {v}");
                }
                o.values().for_each(assert_no_ref_siblings);
            }
            Value::Array(a) => a.iter().for_each(assert_no_ref_siblings),
            _ => {}
        }
    }

    fn param_names(op: &Value) -> Vec<String> {
        op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str().map(str::to_string))
            .collect()
    }

    #[tokio::test]
    async fn v3_index_lists_group_versions() {
        let srv = server();
        let (code, headers, index) = call(&srv, "/openapi/v3", &[], None).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(hdr(&headers, header::CACHE_CONTROL), "no-cache, private");
        for key in [
            "api/v1",
            "apis/apps/v1",
            "apis/rbac.authorization.k8s.io/v1",
        ] {
            let url = index["paths"][key]["serverRelativeURL"].as_str().unwrap();
            assert!(
                url.starts_with(&format!("/openapi/v3/{key}?hash=")),
                "{url}"
            );
        }
        // Stable across requests.
        let (_, _, again) = call(&srv, "/openapi/v3", &[], None).await;
        assert_eq!(index, again);
    }

    #[tokio::test]
    async fn apps_v1_document_has_paths_operations_and_schemas() {
        let srv = server();
        let doc = gv_doc(&srv, "apis/apps/v1").await;
        assert_eq!(doc["openapi"], "3.0.0");
        let item = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
        let patch = &item["patch"];
        assert_eq!(patch["x-kubernetes-action"], "patch");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "kind": "Deployment", "version": "v1"})
        );
        let names = param_names(patch);
        for p in ["fieldValidation", "dryRun", "fieldManager", "force"] {
            assert!(names.contains(&p.to_string()), "{p} in {names:?}");
        }
        let content = patch["requestBody"]["content"].as_object().unwrap();
        for t in [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
        ] {
            assert!(content.contains_key(t), "{t}");
        }
        assert_eq!(item["get"]["x-kubernetes-action"], "get");
        assert_eq!(item["put"]["x-kubernetes-action"], "put");
        assert_eq!(item["delete"]["x-kubernetes-action"], "delete");
        assert!(param_names(&item["put"]).contains(&"fieldValidation".to_string()));
        let coll = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"];
        assert_eq!(coll["get"]["x-kubernetes-action"], "list");
        assert_eq!(coll["post"]["x-kubernetes-action"], "post");
        assert_eq!(coll["delete"]["x-kubernetes-action"], "deletecollection");
        assert!(param_names(&coll["post"]).contains(&"fieldValidation".to_string()));
        assert!(doc["paths"]["/apis/apps/v1/deployments"]["get"].is_object());
        let scale = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"];
        assert_eq!(
            scale["patch"]["x-kubernetes-group-version-kind"],
            json!({"group": "autoscaling", "kind": "Scale", "version": "v1"})
        );
        assert!(
            doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status"]["patch"]
                .is_object()
        );

        let schemas = &doc["components"]["schemas"];
        let deploy = &schemas["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deploy["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        // k8s-openapi marks metadata and spec required; Kubernetes does not.
        assert!(deploy.get("required").is_none(), "{}", deploy["required"]);
        assert_eq!(
            deploy["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(deploy["properties"]["spec"]["description"].is_string());
        assert_eq!(
            schemas["io.k8s.api.apps.v1.DeploymentList"]["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "DeploymentList", "version": "v1"}])
        );
        assert!(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
        assert!(schemas["io.k8s.api.autoscaling.v1.Scale"].is_object());
        // Only what the paths reach.
        assert!(schemas.get("io.k8s.api.batch.v1.Job").is_none());
        assert_refs_resolve(&doc, V3_REF, "/components/schemas");
        assert_no_ref_siblings(&doc);
    }

    #[tokio::test]
    async fn core_v1_document_carries_patch_extensions() {
        let srv = server();
        let doc = gv_doc(&srv, "api/v1").await;
        assert_refs_resolve(&doc, V3_REF, "/components/schemas");
        let s = &doc["components"]["schemas"];
        let containers = &s["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        let spec = &s["io.k8s.api.core.v1.PodSpec"]["properties"];
        for f in ["initContainers", "ephemeralContainers", "imagePullSecrets"] {
            assert_eq!(spec[f]["x-kubernetes-patch-merge-key"], "name", "{f}");
        }
        assert_eq!(
            spec["volumes"]["x-kubernetes-patch-strategy"],
            "merge,retainKeys"
        );
        let c = &s["io.k8s.api.core.v1.Container"]["properties"];
        assert_eq!(c["env"]["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(
            c["volumeMounts"]["x-kubernetes-patch-merge-key"],
            "mountPath"
        );
        assert_eq!(c["ports"]["x-kubernetes-patch-merge-key"], "containerPort");
        assert_eq!(
            s["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"]["x-kubernetes-patch-merge-key"],
            "port"
        );
        assert_eq!(
            s["io.k8s.api.core.v1.PodStatus"]["properties"]["conditions"]["x-kubernetes-patch-merge-key"],
            "type"
        );
        let meta = &s["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"];
        assert_eq!(
            meta["ownerReferences"]["x-kubernetes-patch-merge-key"],
            "uid"
        );
        assert_eq!(meta["finalizers"]["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(meta["finalizers"]["x-kubernetes-list-type"], "set");
        assert_eq!(
            s["io.k8s.api.core.v1.ObjectReference"]["x-kubernetes-map-type"],
            "atomic"
        );
        // Subresources served by the server.
        let p = &doc["paths"];
        assert!(p["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]["post"].is_object());
        assert!(p["/api/v1/namespaces/{name}/finalize"]["put"].is_object());
        assert!(p["/api/v1/namespaces/{name}"]["get"].is_object());
        assert!(p["/api/v1/namespaces/{namespace}/namespaces"].is_null());
        assert_eq!(
            p["/api/v1/namespaces/{namespace}/pods/{name}"]["get"]["x-kubernetes-group-version-kind"],
            json!({"group": "", "kind": "Pod", "version": "v1"})
        );
    }

    #[tokio::test]
    async fn hash_handling_and_negotiation() {
        let srv = server();
        let (code, headers, _) =
            call(&srv, "/openapi/v3/apis/apps/v1", &[("hash", "0123")], None).await;
        assert_eq!(code, StatusCode::MOVED_PERMANENTLY);
        let loc = hdr(&headers, header::LOCATION);
        assert!(loc.starts_with("/openapi/v3/apis/apps/v1?hash="), "{loc}");
        assert!(!loc.ends_with("=0123"));
        let (code, headers, doc) = call(&srv, "/openapi/v3/apis/apps/v1", &[], None).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(hdr(&headers, header::CACHE_CONTROL), "no-cache, private");
        assert!(doc["paths"].is_object());
        let (code, _, _) = call(&srv, "/openapi/v3/apis/nope.example.com/v1", &[], None).await;
        assert_eq!(code, StatusCode::NOT_FOUND);
        let (code, _, _) = call(&srv, "/openapi/v3/apis/apps/v1", &[], Some(PROTO_V3)).await;
        assert_eq!(code, StatusCode::NOT_ACCEPTABLE);
    }

    #[tokio::test]
    async fn v2_document() {
        let srv = server();
        let (code, _, _) = call(&srv, "/openapi/v2", &[], Some("application/xml")).await;
        assert_eq!(code, StatusCode::NOT_ACCEPTABLE);
        let accept = format!("application/json, {PROTO_V2}");
        let (code, headers, doc) = call(&srv, "/openapi/v2", &[], Some(&accept)).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(hdr(&headers, header::CONTENT_TYPE), "application/json");
        assert_eq!(doc["swagger"], "2.0");
        assert_refs_resolve(&doc, V2_REF, "/definitions");
        let deploy = &doc["definitions"]["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deploy["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(
            doc["definitions"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["x-kubernetes-patch-merge-key"],
            "name"
        );
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert!(param_names(patch).contains(&"fieldValidation".to_string()));
        assert!(param_names(patch).contains(&"body".to_string()));
        assert_eq!(patch["x-kubernetes-action"], "patch");
    }

    /// The fields of a protobuf message: (number, varint or bytes).
    fn pb_fields(mut b: &[u8]) -> Vec<(u32, Result<u64, Vec<u8>>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let mut v = 0u64;
            for i in 0.. {
                let x = b[0];
                *b = &b[1..];
                v |= u64::from(x & 0x7f) << (7 * i);
                if x & 0x80 == 0 {
                    break;
                }
            }
            v
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let k = varint(&mut b);
            let num = (k >> 3) as u32;
            match k & 7 {
                0 => out.push((num, Ok(varint(&mut b)))),
                1 => {
                    out.push((num, Ok(u64::from_le_bytes(b[..8].try_into().unwrap()))));
                    b = &b[8..];
                }
                2 => {
                    let n = varint(&mut b) as usize;
                    out.push((num, Err(b[..n].to_vec())));
                    b = &b[n..];
                }
                w => panic!("wire type {w}"),
            }
        }
        out
    }

    fn pb_get(b: &[u8], num: u32) -> Vec<Vec<u8>> {
        pb_fields(b)
            .into_iter()
            .filter(|(n, _)| *n == num)
            .filter_map(|(_, v)| v.err())
            .collect()
    }

    /// A `Named*` entry's value by name.
    fn pb_named(entries: &[Vec<u8>], name: &str) -> Option<Vec<u8>> {
        entries.iter().find_map(|e| {
            (pb_get(e, 1).first().map(Vec::as_slice) == Some(name.as_bytes()))
                .then(|| pb_get(e, 2).into_iter().next().unwrap_or_default())
        })
    }

    #[tokio::test]
    async fn v2_document_as_protobuf() {
        let srv = server();
        let (json_code, json_headers, doc) = call(&srv, "/openapi/v2", &[], None).await;
        assert_eq!(json_code, StatusCode::OK);
        for accept in [
            PROTO_V2.to_string(),
            format!("{PROTO_V2}, application/json"),
            PROTO_V2_CT.to_string(),
        ] {
            let resp = serve(&srv, &req("/openapi/v2", &[], Some(&accept))).unwrap();
            let (parts, body) = resp.into_parts();
            assert_eq!(parts.status, StatusCode::OK);
            assert_eq!(hdr(&parts.headers, header::CONTENT_TYPE), PROTO_V2_CT);
            let etag = hdr(&parts.headers, header::ETAG).to_string();
            assert_ne!(etag, hdr(&json_headers, header::ETAG));
            let pb = body.collect().await.unwrap().to_bytes();
            // Document{swagger = 1, info = 2, paths = 8, definitions = 9}.
            assert_eq!(pb_get(&pb, 1), [b"2.0".to_vec()]);
            let info = &pb_get(&pb, 2)[0];
            assert_eq!(pb_get(info, 1), [b"Kubernetes".to_vec()]);
            let defs = pb_get(&pb_get(&pb, 9)[0], 1);
            assert_eq!(defs.len(), doc["definitions"].as_object().unwrap().len());
            let ssar = pb_named(&defs, "io.k8s.api.authorization.v1.SelfSubjectAccessReview")
                .expect("SelfSubjectAccessReview defined");
            // Schema{type = 22 TypeItem{value = 1}, properties = 25, vendor_extension = 31}.
            assert_eq!(pb_get(&pb_get(&ssar, 22)[0], 1), [b"object".to_vec()]);
            let props = pb_get(&pb_get(&ssar, 25)[0], 1);
            let spec = pb_named(&props, "spec").unwrap();
            assert_eq!(
                pb_get(&spec, 1),
                [
                    b"#/definitions/io.k8s.api.authorization.v1.SelfSubjectAccessReviewSpec"
                        .to_vec()
                ]
            );
            let gvk = pb_named(&pb_get(&ssar, 31), "x-kubernetes-group-version-kind").unwrap();
            // Any{yaml = 2}: the JSON text.
            let yaml: Value = serde_json::from_slice(&pb_get(&gvk, 2)[0]).unwrap();
            assert_eq!(
                yaml,
                json!([{"group": "authorization.k8s.io", "kind": "SelfSubjectAccessReview", "version": "v1"}])
            );
            let paths = pb_get(&pb_get(&pb, 8)[0], 2);
            assert_eq!(paths.len(), doc["paths"].as_object().unwrap().len());
            // PathItem{patch = 8} with Operation{parameters = 8}.
            let item = pb_named(
                &paths,
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
            )
            .unwrap();
            let patch = &pb_get(&item, 8)[0];
            assert_eq!(pb_get(patch, 8).len(), doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]["parameters"].as_array().unwrap().len());
            // Cached: the same bytes again, and 304 for the ETag.
            let again = serve(&srv, &req("/openapi/v2", &[], Some(&accept))).unwrap();
            let again = again.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(again, pb);
            let mut r = req("/openapi/v2", &[], Some(&accept));
            r.headers
                .insert(header::IF_NONE_MATCH, HeaderValue::from_str(&etag).unwrap());
            assert_eq!(serve(&srv, &r).unwrap().status(), StatusCode::NOT_MODIFIED);
        }
    }

    #[tokio::test]
    async fn custom_resources_are_documented() {
        let srv = server();
        let crd_def = srv
            .def("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .unwrap();
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {
                "group": "stable.example.com", "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "description": "the spec", "properties": {
                            "cronSpec": {"type": "string"}, "replicas": {"type": "integer"}}}
                    }}}
                }]
            }
        });
        let stored = srv.create_object(&crd_def, "", crd, "test", false).unwrap();
        {
            let mut reg = srv.registry.write().unwrap();
            for d in crate::crd::defs_from_crd(&stored) {
                reg.insert(d);
            }
        }
        let doc = gv_doc(&srv, "apis/stable.example.com/v1").await;
        assert_refs_resolve(&doc, V3_REF, "/components/schemas");
        let s = &doc["components"]["schemas"]["com.example.stable.v1.CronTab"];
        assert_eq!(
            s["x-kubernetes-group-version-kind"],
            json!([{"group": "stable.example.com", "kind": "CronTab", "version": "v1"}])
        );
        assert_eq!(
            s["properties"]["spec"]["properties"]["cronSpec"]["type"],
            "string"
        );
        assert_eq!(
            s["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(s["properties"]["kind"]["type"], "string");
        let patch = &doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]
            ["patch"];
        assert!(param_names(patch).contains(&"fieldValidation".to_string()));
        let content = patch["requestBody"]["content"].as_object().unwrap();
        assert!(content.contains_key("application/merge-patch+json"));
        assert!(!content.contains_key("application/strategic-merge-patch+json"));
        assert!(
            doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/status"]
                .is_object()
        );
        assert!(doc["components"]["schemas"]["com.example.stable.v1.CronTabList"].is_object());

        // The v2 document has it too.
        let (_, _, v2) = call(&srv, "/openapi/v2", &[], None).await;
        assert!(v2["definitions"]["com.example.stable.v1.CronTab"].is_object());
        assert_refs_resolve(&v2, V2_REF, "/definitions");

        // Removing the resource drops it from the index.
        srv.registry
            .write()
            .unwrap()
            .remove_group_resource("stable.example.com", "crontabs");
        let (_, _, index) = call(&srv, "/openapi/v3", &[], None).await;
        assert!(index["paths"].get("apis/stable.example.com/v1").is_none());
    }

    #[test]
    fn every_served_builtin_kind_has_a_schema() {
        for d in crate::registry::builtin_resources()
            .into_iter()
            .chain(crate::registry::review_resources())
        {
            let k = (d.group.clone(), d.version.clone(), d.kind.clone());
            let name = BUILTINS.kinds.get(&k).unwrap_or_else(|| panic!("{k:?}"));
            assert!(BUILTINS.schemas.contains_key(name), "{name}");
        }
    }
}
