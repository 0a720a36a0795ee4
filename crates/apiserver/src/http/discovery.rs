//! Discovery documents (legacy and aggregated v2), /version and health endpoints.

use crate::error::ApiError;
use crate::http::api::ApiServer;
use crate::http::{self as h, Body, Format, Req};
use crate::registry::{Registry, ResourceDef};
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// kube-apiserver's order of the built-in groups in discovery (the aggregator's group
/// priorities, highest first); custom resource groups follow, by name.
const GROUP_ORDER: [&str; 21] = [
    "",
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "resource.k8s.io",
    "flowcontrol.apiserver.k8s.io",
];

/// The served groups in discovery order, each with its versions (preferred first).
fn ordered_groups(reg: &Registry) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = reg.groups().into_iter().collect();
    groups.sort_by_key(|(g, _)| {
        let rank = GROUP_ORDER
            .iter()
            .position(|o| o == g)
            .unwrap_or(GROUP_ORDER.len());
        (rank, g.clone())
    });
    groups
}

/// One entry of a group version's resource list: a resource or a subresource.
struct Entry {
    /// `pods` or `pods/status`.
    name: String,
    kind: String,
    /// The group and version of the kind when it is not the listed one's.
    kind_gv: Option<(&'static str, &'static str)>,
    verbs: Vec<&'static str>,
    namespaced: bool,
    /// Of a resource (not a subresource).
    main: Option<Main>,
}

struct Main {
    singular: String,
    short_names: Vec<String>,
    categories: Vec<String>,
    storage_version_hash: Option<String>,
}

const STATUS_VERBS: [&str; 3] = ["get", "patch", "update"];

/// The subresources of a resource as kube-apiserver lists them: name, kind, the kind's
/// group and version when foreign, verbs.
#[allow(clippy::type_complexity)]
fn subresources(
    d: &ResourceDef,
) -> Vec<(
    &'static str,
    String,
    Option<(&'static str, &'static str)>,
    Vec<&'static str>,
)> {
    let mut subs = vec![];
    let core = d.group.is_empty();
    if d.has_status {
        subs.push(("status", d.kind.clone(), None, STATUS_VERBS.to_vec()));
    }
    if d.scale.is_some() {
        subs.push((
            "scale",
            "Scale".into(),
            Some(("autoscaling", "v1")),
            STATUS_VERBS.to_vec(),
        ));
    }
    if core && d.plural == "namespaces" {
        subs.push(("finalize", d.kind.clone(), None, vec!["update"]));
    }
    if core && d.plural == "nodes" {
        subs.push((
            "proxy",
            "NodeProxyOptions".into(),
            None,
            vec!["create", "delete", "get", "patch", "update"],
        ));
    }
    if core && d.plural == "pods" {
        // Pod I/O is served whether or not the simulated kubelet runs (without it, a pod
        // has no node and gets kube-apiserver's "does not have a host assigned").
        subs.push((
            "attach",
            "PodAttachOptions".into(),
            None,
            vec!["create", "get"],
        ));
        subs.push(("exec", "PodExecOptions".into(), None, vec!["create", "get"]));
        subs.push(("log", "Pod".into(), None, vec!["get"]));
        subs.push((
            "portforward",
            "PodPortForwardOptions".into(),
            None,
            vec!["create", "get"],
        ));
        subs.push(("binding", "Binding".into(), None, vec!["create"]));
        subs.push((
            "eviction",
            "Eviction".into(),
            Some(("policy", "v1")),
            vec!["create"],
        ));
    }
    if core && d.plural == "serviceaccounts" {
        subs.push((
            "token",
            "TokenRequest".into(),
            Some(("authentication.k8s.io", "v1")),
            vec!["create"],
        ));
    }
    if d.crd.is_none() {
        // Built-ins list subresources by name; custom resources status, then scale.
        subs.sort_by_key(|s| s.0);
    }
    subs
}

/// The storage versions of custom resources: `(group, plural)` -> version.
type StorageVersions = HashMap<(String, String), String>;

/// The storage version of every custom resource, read from the stored CRDs.
fn crd_storage_versions(srv: &ApiServer) -> StorageVersions {
    let (crds, _) = srv
        .storage
        .list("apiextensions.k8s.io/customresourcedefinitions", None);
    crds.iter()
        .filter_map(|crd| {
            let group = crd.pointer("/spec/group")?.as_str()?.to_string();
            let plural = crd.pointer("/spec/names/plural")?.as_str()?.to_string();
            let version = crd
                .pointer("/spec/versions")?
                .as_array()?
                .iter()
                .find(|v| v.get("storage") == Some(&Value::Bool(true)))?
                .get("name")?
                .as_str()?
                .to_string();
            Some(((group, plural), version))
        })
        .collect()
}

/// The group, version and kind a resource is stored as.
fn storage_gvk(d: &ResourceDef, crds: &StorageVersions) -> (String, String, String) {
    // Kinds kube-apiserver stores in another version or group.
    if d.group == "events.k8s.io" && d.kind == "Event" {
        return (String::new(), "v1".into(), "Event".into());
    }
    if d.group == "autoscaling" && d.kind == "HorizontalPodAutoscaler" {
        return (d.group.clone(), "v2".into(), d.kind.clone());
    }
    if d.group == "apiextensions.k8s.io" && d.kind == "CustomResourceDefinition" {
        return (d.group.clone(), "v1beta1".into(), d.kind.clone());
    }
    let version = match &d.crd {
        Some(_) => crds
            .get(&(d.group.clone(), d.plural.clone()))
            .cloned()
            .unwrap_or_else(|| d.version.clone()),
        None => d.version.clone(),
    };
    (d.group.clone(), version, d.kind.clone())
}

/// `storageVersionHash`: the first 8 bytes of the SHA-256 of the storage
/// `group/version/kind`, base64, as kube-apiserver computes it.
fn storage_version_hash(d: &ResourceDef, crds: &StorageVersions) -> Option<String> {
    use base64::Engine;
    let stored = d.normalizer.is_some() || d.crd.is_some();
    if !stored || d.is_virtual() {
        return None;
    }
    let (g, v, k) = storage_gvk(d, crds);
    let digest = sha256(format!("{g}/{v}/{k}").as_bytes());
    Some(base64::engine::general_purpose::STANDARD.encode(&digest[..8]))
}

/// The resource list of a group version, in kube-apiserver's order.
fn entries(reg: &Registry, crds: &StorageVersions, group: &str, version: &str) -> Vec<Entry> {
    let mut defs: Vec<&Arc<ResourceDef>> = reg
        .all()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    defs.sort_by(|a, b| a.plural.cmp(&b.plural));
    let mut out = Vec::new();
    for d in defs {
        let mut verbs = d.verbs.clone();
        if d.crd.is_some() {
            // The order the custom resource handler lists them in.
            let order = [
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "create",
                "update",
                "watch",
            ];
            verbs.sort_by_key(|v| order.iter().position(|o| o == v));
        }
        out.push(Entry {
            name: d.plural.clone(),
            kind: d.kind.clone(),
            kind_gv: None,
            verbs,
            namespaced: d.namespaced,
            main: Some(Main {
                singular: d.singular.clone(),
                short_names: d.short_names.clone(),
                categories: d.categories.clone(),
                storage_version_hash: storage_version_hash(d, crds),
            }),
        });
        for (sub, kind, kind_gv, verbs) in subresources(d) {
            out.push(Entry {
                name: format!("{}/{sub}", d.plural),
                kind,
                kind_gv,
                verbs,
                namespaced: d.namespaced,
                main: None,
            });
        }
    }
    out
}

fn legacy_resource_list(
    reg: &Registry,
    crds: &StorageVersions,
    group: &str,
    version: &str,
) -> Option<Value> {
    let list = entries(reg, crds, group, version);
    if list.is_empty() {
        return None;
    }
    let resources: Vec<Value> = list
        .into_iter()
        .map(|e| {
            let mut r = json!({
                "name": e.name,
                "singularName": e.main.as_ref().map(|m| m.singular.as_str()).unwrap_or(""),
                "namespaced": e.namespaced,
            });
            if let Some((g, v)) = e.kind_gv {
                r["group"] = json!(g);
                r["version"] = json!(v);
            }
            r["kind"] = json!(e.kind);
            r["verbs"] = json!(e.verbs);
            if let Some(m) = &e.main {
                if !m.short_names.is_empty() {
                    r["shortNames"] = json!(m.short_names);
                }
                if !m.categories.is_empty() {
                    r["categories"] = json!(m.categories);
                }
                if let Some(h) = &m.storage_version_hash {
                    r["storageVersionHash"] = json!(h);
                }
            }
            r
        })
        .collect();
    Some(if group.is_empty() {
        // kube-apiserver's core list carries no apiVersion.
        json!({"kind": "APIResourceList", "groupVersion": version, "resources": resources})
    } else {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/{version}"), "resources": resources})
    })
}

fn aggregated(reg: &Registry, core: bool, dv: &str) -> Value {
    let mut items = Vec::new();
    for (group, versions) in ordered_groups(reg) {
        if group.is_empty() != core {
            continue;
        }
        let versions: Vec<Value> = versions
            .iter()
            .map(|v| {
                let custom = reg
                    .all()
                    .any(|d| d.group == group && d.version == *v && d.crd.is_some());
                // Built-in kinds leave the group and version of their own group version
                // empty; custom resources name them.
                let own = |kind: &str, gv: Option<(&str, &str)>| match gv {
                    Some((g, v)) => json!({"group": g, "version": v, "kind": kind}),
                    None if custom => json!({"group": group, "version": v, "kind": kind}),
                    None => json!({"group": "", "version": "", "kind": kind}),
                };
                let mut resources: Vec<Value> = Vec::new();
                for e in entries(reg, &StorageVersions::new(), &group, v) {
                    match &e.main {
                        Some(m) => {
                            let mut r = json!({
                                "resource": e.name,
                                "responseKind": own(&e.kind, e.kind_gv),
                                "scope": if e.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": m.singular,
                                "verbs": e.verbs,
                            });
                            if !m.short_names.is_empty() {
                                r["shortNames"] = json!(m.short_names);
                            }
                            if !m.categories.is_empty() {
                                r["categories"] = json!(m.categories);
                            }
                            resources.push(r);
                        }
                        None => {
                            let Some(last) = resources.last_mut() else { continue };
                            let sub = e.name.rsplit('/').next().unwrap_or("");
                            let s = json!({"subresource": sub, "responseKind": own(&e.kind, e.kind_gv), "verbs": e.verbs});
                            match last.get_mut("subresources").and_then(Value::as_array_mut) {
                                Some(a) => a.push(s),
                                None => last["subresources"] = json!([s]),
                            }
                        }
                    }
                }
                json!({"version": v, "resources": resources, "freshness": "Current"})
            })
            .collect();
        let metadata = if group.is_empty() {
            json!({})
        } else {
            json!({"name": group})
        };
        items.push(json!({"metadata": metadata, "versions": versions}));
    }
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{dv}"), "metadata": {}, "items": items})
}

fn group_doc(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

fn aggregated_response(req: &Req, body: Value, dv: &str) -> Response<Body> {
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let etag = format!("\"{:016X}\"", fnv(&bytes));
    if req.header("if-none-match") == Some(etag.as_str()) {
        // A 304 carries no Content-Type: HTTP caches merge these headers into the cached
        // response, which must keep its aggregated-discovery media type.
        let mut r = h::response(StatusCode::NOT_MODIFIED, "application/json", Bytes::new());
        r.headers_mut().remove(http::header::CONTENT_TYPE);
        r.headers_mut()
            .insert("cache-control", HeaderValue::from_static("public"));
        r.headers_mut()
            .insert("vary", HeaderValue::from_static("Accept"));
        if let Ok(v) = HeaderValue::from_str(&etag) {
            r.headers_mut().insert("etag", v);
        }
        return r;
    }
    let ct = format!("application/json;g=apidiscovery.k8s.io;v={dv};as=APIGroupDiscoveryList");
    let mut r = h::response(StatusCode::OK, &ct, Bytes::from(bytes));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        r.headers_mut().insert("etag", v);
    }
    r.headers_mut()
        .insert("vary", HeaderValue::from_static("Accept"));
    r.headers_mut()
        .insert("cache-control", HeaderValue::from_static("public"));
    r
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, x| {
        (h ^ u64::from(*x)).wrapping_mul(0x100000001b3)
    })
}

/// Serves non-resource paths. Returns None when the path is unknown. Like kube-apiserver,
/// authorizes first (`nonResourceURLs` rules; the verb is the lowercased method).
pub fn serve(srv: &Arc<ApiServer>, req: &Req) -> Option<Response<Body>> {
    let verb = req.method.as_str().to_ascii_lowercase();
    if !crate::auth::rbac::authorize_path(&srv.storage, &req.user, &verb, &req.path) {
        let mut e = ApiError::new(
            403,
            "Forbidden",
            format!(
                "forbidden: User \"{}\" cannot {verb} path \"{}\"",
                req.user.name, req.path
            ),
        )
        .authorization_failure();
        e.status.details = Some(Default::default());
        return Some(h::error_response(&e));
    }
    let path = req.path.trim_end_matches('/');
    let reg = srv
        .registry
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let ok = |v: Value| h::encode(StatusCode::OK, &v, &Format::Json);
    Some(match path {
        "/version" => ok(json!({
            "major": "1", "minor": "32", "emulationMajor": "1", "emulationMinor": "32",
            "minCompatibilityMajor": "1", "minCompatibilityMinor": "31",
            "gitVersion": "v1.32.0-kubewright", "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0",
            "compiler": "rustc", "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        })),
        "/healthz" | "/livez" | "/readyz" => health(req, path, srv.storage.is_healthy()),
        p if p.starts_with("/livez/")
            || p.starts_with("/readyz/")
            || p.starts_with("/healthz/") =>
        {
            let check = p.rsplit('/').next().unwrap_or("");
            if matches!(check, "ping" | "etcd" | "log" | "poststarthook") {
                h::text(StatusCode::OK, "ok")
            } else {
                h::text(
                    StatusCode::NOT_FOUND,
                    format!("404 page not found: no check named {check:?}"),
                )
            }
        }
        "/api" => match h::negotiate_discovery(req) {
            Format::Discovery(dv) => aggregated_response(req, aggregated(&reg, true, dv), dv),
            _ => ok(
                json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
            ),
        },
        "/apis" => match h::negotiate_discovery(req) {
            Format::Discovery(dv) => aggregated_response(req, aggregated(&reg, false, dv), dv),
            _ => {
                let groups: Vec<Value> = ordered_groups(&reg)
                    .iter()
                    .filter(|(g, _)| !g.is_empty())
                    .map(|(g, vs)| group_doc(g, vs))
                    .collect();
                ok(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
            }
        },
        "/openapi/v2" | "/openapi/v3" => return crate::http::openapi::serve(srv, req),
        p if p.starts_with("/openapi/v3/") => return crate::http::openapi::serve(srv, req),
        p => {
            let segs: Vec<&str> = p.trim_start_matches('/').split('/').collect();
            match segs.as_slice() {
                // An unknown core version is the API's 404; other unknown paths Go's.
                ["api", v] => legacy_resource_list(&reg, &crd_storage_versions(srv), "", v)
                    .map(ok)
                    .unwrap_or_else(|| h::error_response(&ApiError::path_not_found())),
                ["apis", g] => match reg.groups().get(*g) {
                    Some(vs) => ok({
                        let mut d = group_doc(g, vs);
                        d["kind"] = json!("APIGroup");
                        d["apiVersion"] = json!("v1");
                        d
                    }),
                    None => page_not_found(),
                },
                ["apis", g, v] => legacy_resource_list(&reg, &crd_storage_versions(srv), g, v)
                    .map(ok)
                    .unwrap_or_else(page_not_found),
                _ => return None,
            }
        }
    })
}

/// Go's `http.NotFound`: what kube-apiserver answers for a path nothing serves.
pub fn page_not_found() -> Response<Body> {
    let mut r = h::text(StatusCode::NOT_FOUND, "404 page not found\n");
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// SHA-256 (FIPS 180-4), for discovery's storage version hashes.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

fn health(req: &Req, path: &str, storage_ok: bool) -> Response<Body> {
    let checks = [
        "ping",
        "log",
        "etcd",
        "poststarthook/start-kube-apiserver-admission-initializer",
    ];
    let excluded: Vec<&str> = req
        .query_all
        .iter()
        .filter(|(k, _)| k == "exclude")
        .map(|(_, v)| v.as_str())
        .collect();
    let failed = |c: &str| c == "etcd" && !storage_ok && !excluded.contains(&c);
    let any_failed = checks.iter().any(|c| failed(c));
    let name = path.trim_start_matches('/');
    if req.query.contains_key("verbose") || any_failed {
        let mut out = String::new();
        for c in checks {
            if excluded.contains(&c) {
                out.push_str(&format!("[+]{c} excluded: ok\n"));
            } else if failed(c) {
                out.push_str(&format!("[-]{c} failed: reason withheld\n"));
            } else {
                out.push_str(&format!("[+]{c} ok\n"));
            }
        }
        if any_failed {
            out.push_str(&format!("{name} check failed\n"));
            return h::text(StatusCode::INTERNAL_SERVER_ERROR, out);
        }
        out.push_str(&format!("{name} check passed\n"));
        return h::text(StatusCode::OK, out);
    }
    h::text(StatusCode::OK, "ok")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_and_storage_version_hashes() {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha256(&[b'a'; 1000])),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        );
        // As a v1.36 kube-apiserver reports them.
        let reg = Registry::new();
        let none = StorageVersions::new();
        let hash =
            |g: &str, v: &str, p: &str| storage_version_hash(&reg.get(g, v, p).unwrap(), &none);
        assert_eq!(
            hash("", "v1", "configmaps").as_deref(),
            Some("qFsyl6wFWjQ=")
        );
        assert_eq!(
            hash("apps", "v1", "daemonsets").as_deref(),
            Some("dd7pWHUlMKQ=")
        );
        assert_eq!(
            hash("events.k8s.io", "v1", "events").as_deref(),
            Some("r2yiGXH7wu8=")
        );
        assert_eq!(hash("", "v1", "bindings"), None);
    }

    #[test]
    fn groups_in_kube_apiserver_order() {
        let names: Vec<String> = ordered_groups(&Registry::new())
            .into_iter()
            .map(|(g, _)| g)
            .collect();
        assert_eq!(
            &names[..4],
            ["", "apiregistration.k8s.io", "apps", "events.k8s.io"]
        );
        let v1 = entries(&Registry::new(), &StorageVersions::new(), "", "v1");
        let names: Vec<&str> = v1.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(&names[..3], ["bindings", "componentstatuses", "configmaps"]);
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }
}
