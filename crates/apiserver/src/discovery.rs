//! Discovery documents (legacy and aggregated v2), /version and health endpoints.

use crate::api::ApiServer;
use crate::error::ApiError;
use crate::http::{self as h, Body, Format, Req};
use crate::registry::{Registry, ResourceDef};
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;

fn sub_verbs(sub: &str) -> Vec<&'static str> {
    match sub {
        "status" | "scale" => vec!["get", "patch", "update"],
        "finalize" => vec!["update"],
        _ => vec!["create"],
    }
}

fn subresources(d: &ResourceDef) -> Vec<&'static str> {
    let mut subs = vec![];
    if d.has_status {
        subs.push("status");
    }
    if d.scale.is_some() {
        subs.push("scale");
    }
    if d.group.is_empty() && d.plural == "namespaces" {
        subs.push("finalize");
    }
    subs
}

fn legacy_resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs: Vec<&Arc<ResourceDef>> = reg
        .all()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for d in defs {
        let mut r = json!({
            "name": d.plural, "singularName": d.singular, "namespaced": d.namespaced,
            "kind": d.kind, "verbs": d.verbs,
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        for sub in subresources(d) {
            let kind = if sub == "scale" {
                "Scale"
            } else {
                d.kind.as_str()
            };
            let mut sr = json!({"name": format!("{}/{sub}", d.plural), "singularName": "", "namespaced": d.namespaced, "kind": kind, "verbs": sub_verbs(sub)});
            if sub == "scale" {
                sr["group"] = json!("autoscaling");
                sr["version"] = json!("v1");
            }
            resources.push(sr);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn aggregated(reg: &Registry, core: bool, dv: &str) -> Value {
    let mut items = Vec::new();
    for (group, versions) in reg.groups() {
        if group.is_empty() != core {
            continue;
        }
        let versions: Vec<Value> = versions
            .iter()
            .map(|v| {
                let resources: Vec<Value> = reg
                    .all()
                    .filter(|d| d.group == group && d.version == *v)
                    .map(|d| {
                        let mut r = json!({
                            "resource": d.plural,
                            "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
                            "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
                            "singularResource": d.singular,
                            "verbs": d.verbs,
                        });
                        if !d.short_names.is_empty() {
                            r["shortNames"] = json!(d.short_names);
                        }
                        if !d.categories.is_empty() {
                            r["categories"] = json!(d.categories);
                        }
                        let subs: Vec<Value> = subresources(d)
                            .into_iter()
                            .map(|s| {
                                let kind = if s == "scale" {
                                    json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
                                } else {
                                    json!({"group": d.group, "version": d.version, "kind": d.kind})
                                };
                                json!({"subresource": s, "responseKind": kind, "verbs": sub_verbs(s)})
                            })
                            .collect();
                        if !subs.is_empty() {
                            r["subresources"] = Value::Array(subs);
                        }
                        r
                    })
                    .collect();
                json!({"version": v, "resources": resources, "freshness": "Current"})
            })
            .collect();
        items.push(
            json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions}),
        );
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

/// Serves non-resource paths. Returns None when the path is unknown.
pub fn serve(srv: &Arc<ApiServer>, req: &Req) -> Option<Response<Body>> {
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
                let groups: Vec<Value> = reg
                    .groups()
                    .iter()
                    .filter(|(g, _)| !g.is_empty())
                    .map(|(g, vs)| group_doc(g, vs))
                    .collect();
                ok(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
            }
        },
        "/openapi/v2" | "/openapi/v3" => return crate::openapi::serve(srv, req),
        p if p.starts_with("/openapi/v3/") => return crate::openapi::serve(srv, req),
        p => {
            let segs: Vec<&str> = p.trim_start_matches('/').split('/').collect();
            match segs.as_slice() {
                ["api", v] => legacy_resource_list(&reg, "", v)
                    .map(ok)
                    .unwrap_or_else(|| h::error_response(&ApiError::path_not_found())),
                ["apis", g] => match reg.groups().get(*g) {
                    Some(vs) => ok({
                        let mut d = group_doc(g, vs);
                        d["kind"] = json!("APIGroup");
                        d["apiVersion"] = json!("v1");
                        d
                    }),
                    None => h::error_response(&ApiError::path_not_found()),
                },
                ["apis", g, v] => legacy_resource_list(&reg, g, v)
                    .map(ok)
                    .unwrap_or_else(|| h::error_response(&ApiError::path_not_found())),
                _ => return None,
            }
        }
    })
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
