//! The controllers a test expects from a real cluster: CRD establishment and cleanup,
//! namespace lifecycle (content deletion, finalize, default ServiceAccount) and the
//! garbage collector (background, foreground and orphan propagation), and ClusterRole
//! aggregation (bootstrap.rs, with the default RBAC policy created at start).

pub(crate) mod bootstrap;
pub(crate) mod disruption;
pub(crate) mod gc;

use crate::http::api::ApiServer;
use crate::http::delete::{DeleteOptions, delete_obj};
use crate::registry::ResourceDef;
use crate::registry::meta::{meta_mut, meta_str};
use crate::storage::Mutation;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";
const CRD_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
const CRD_DEFINITION: &str =
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition";

/// Runs the controllers until cancelled.
pub async fn run(srv: Arc<ApiServer>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = srv.kick.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.cancelled() => return,
        }
        // Debounce bursts of writes.
        tokio::time::sleep(Duration::from_millis(10)).await;
        // Repeat while a pass changed something (e.g. dependents orphaned, then the
        // owner's finalizer removed), bounded.
        for _ in 0..8 {
            let before = srv.storage.current_rv();
            reconcile_all(&srv);
            if srv.storage.current_rv() == before {
                break;
            }
        }
    }
}

/// One pass of every controller.
pub fn reconcile_all(srv: &Arc<ApiServer>) {
    crds(srv);
    namespaces(srv);
    gc::collect(srv);
    crate::controllers::bootstrap::aggregate_cluster_roles(srv);
    disruption::reconcile(srv);
    service_ips(srv);
    quotas(srv);
    crate::controllers::bootstrap::api_services(srv);
}

/// ResourceQuotas' `status` (hard and used), as kube-controller-manager's quota
/// controller keeps it.
fn quotas(srv: &ApiServer) {
    for q in srv.storage.list("/resourcequotas", None).0 {
        let status = crate::registry::quota::status(&srv.storage, &q);
        if q.get("status").unwrap_or(&Value::Null) == &status
            || (status == json!({}) && q.get("status").is_none())
        {
            continue;
        }
        let ns = meta_str(&q, "namespace").unwrap_or("").to_string();
        let name = meta_str(&q, "name").unwrap_or("").to_string();
        let _ = srv.storage.mutate::<crate::storage::StorageError>(
            "/resourcequotas",
            &ns,
            &name,
            |cur, _| {
                let Some(cur) = cur else {
                    return Ok(Mutation::Keep);
                };
                let mut next = (**cur).clone();
                next["status"] = status.clone();
                if next == **cur {
                    return Ok(Mutation::Keep);
                }
                crate::registry::quota::record_status_write(
                    cur,
                    &mut next,
                    "kube-controller-manager",
                );
                Ok(Mutation::Put(next))
            },
        );
    }
}

fn def_for_key(srv: &ApiServer, key: &str) -> Option<Arc<ResourceDef>> {
    let reg = srv.registry.read().unwrap_or_else(|e| e.into_inner());
    let mut best: Option<Arc<ResourceDef>> = None;
    for d in reg.all() {
        if d.storage_key() == key {
            match &best {
                Some(b)
                    if crate::registry::version_priority(&b.version)
                        >= crate::registry::version_priority(&d.version) => {}
                _ => best = Some(d.clone()),
            }
        }
    }
    best
}

fn remove_finalizer(srv: &ApiServer, key: &str, ns: &str, name: &str, fin: &str) {
    let _ = srv.storage.mutate::<()>(key, ns, name, |cur, _| {
        let Some(cur) = cur else {
            return Ok(Mutation::Keep);
        };
        let mut next = (**cur).clone();
        let fins: Vec<Value> = next
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !fins.iter().any(|f| f == fin) {
            return Ok(Mutation::Keep);
        }
        let left: Vec<Value> = fins.into_iter().filter(|f| f != fin).collect();
        let deleting = next.pointer("/metadata/deletionTimestamp").is_some();
        if left.is_empty() && deleting {
            return Ok(Mutation::Delete);
        }
        let m = meta_mut(&mut next);
        if left.is_empty() {
            m.remove("finalizers");
        } else {
            m.insert("finalizers".into(), Value::Array(left));
        }
        Ok(Mutation::Put(next))
    });
}

fn crds(srv: &Arc<ApiServer>) {
    let (items, _) = srv.storage.list(CRD_KEY, None);
    for crd in items {
        let name = meta_str(&crd, "name").unwrap_or("").to_string();
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let plural = crd
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if crd.pointer("/metadata/deletionTimestamp").is_some() {
            srv.registry
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove_group_resource(&group, &plural);
            let key = format!("{group}/{plural}");
            for obj in srv.storage.list(&key, None).0 {
                let ns = meta_str(&obj, "namespace").unwrap_or("").to_string();
                let n = meta_str(&obj, "name").unwrap_or("").to_string();
                let _ = srv
                    .storage
                    .mutate::<()>(&key, &ns, &n, |_, _| Ok(Mutation::Delete));
            }
            remove_finalizer(srv, CRD_KEY, "", &name, CRD_FINALIZER);
            continue;
        }
        let established = crd
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.get("type") == Some(&json!("Established"))
                        && c.get("status") == Some(&json!("True"))
                })
            });
        // (Re)register on every pass so spec changes (versions, columns) take effect.
        let defs = crate::crd::defs_from_crd(&crd);
        {
            let mut reg = srv.registry.write().unwrap_or_else(|e| e.into_inner());
            reg.remove_group_resource(&group, &plural);
            for d in defs {
                reg.insert(d);
            }
        }
        let wanted = crate::crd::established_status(&crd);
        let stored_versions_changed =
            crd.pointer("/status/storedVersions") != wanted.get("storedVersions");
        if !established || stored_versions_changed {
            let _ = srv.storage.mutate::<()>(CRD_KEY, "", &name, |cur, _| {
                let Some(cur) = cur else {
                    return Ok(Mutation::Keep);
                };
                let mut next = (**cur).clone();
                next["status"] = crate::crd::established_status(&next);
                // Recorded as kube-apiserver's CRD controllers write it.
                let ty = crate::registry::schema::builtin_def(CRD_DEFINITION);
                let mut changed = crate::registry::fields::compare(cur, &next, ty);
                changed.retain_root("status", true);
                crate::registry::meta::record_update(
                    &mut next,
                    "kube-apiserver",
                    "apiextensions.k8s.io/v1",
                    Some("status"),
                    &changed,
                );
                Ok(Mutation::Put(next))
            });
        }
    }
}

fn namespaces(srv: &Arc<ApiServer>) {
    let (items, _) = srv.storage.list("/namespaces", None);
    let Some(sa_def) = srv.def("", "v1", "serviceaccounts") else {
        return;
    };
    let Some(cm_def) = srv.def("", "v1", "configmaps") else {
        return;
    };
    for ns in items {
        let name = meta_str(&ns, "name").unwrap_or("").to_string();
        if ns.pointer("/metadata/deletionTimestamp").is_none() {
            if srv
                .storage
                .get("/serviceaccounts", &name, "default")
                .is_none()
            {
                let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}});
                let _ = srv.create_object(&sa_def, &name, sa, "kube-controller-manager", false);
            }
            if srv
                .storage
                .get("/configmaps", &name, "kube-root-ca.crt")
                .is_none()
            {
                let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt", "namespace": name},
                    "data": {"ca.crt": "kubewright embedded server: no cluster CA"}});
                let _ = srv.create_object(&cm_def, &name, cm, "kube-controller-manager", false);
            }
            continue;
        }
        // Terminating: delete the content, then finalize.
        let mut remaining = 0usize;
        for key in srv.storage.resources_in_namespace(&name) {
            let Some(def) = def_for_key(srv, &key) else {
                continue;
            };
            for obj in srv.storage.list(&key, Some(&name)).0 {
                remaining += 1;
                if obj.pointer("/metadata/deletionTimestamp").is_none() {
                    let n = meta_str(&obj, "name").unwrap_or("").to_string();
                    let _ = delete_obj(srv, &def, &name, &n, &DeleteOptions::default());
                }
            }
        }
        let left = srv
            .storage
            .resources_in_namespace(&name)
            .iter()
            .map(|k| srv.storage.list(k, Some(&name)).0.len())
            .sum::<usize>();
        if remaining > 0 && left > 0 {
            continue;
        }
        let _ = srv
            .storage
            .mutate::<()>("/namespaces", "", &name, |cur, _| {
                let Some(cur) = cur else {
                    return Ok(Mutation::Keep);
                };
                let meta_fins = cur
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty());
                if meta_fins {
                    let mut next = (**cur).clone();
                    if let Some(spec) = next.get_mut("spec").and_then(Value::as_object_mut) {
                        spec.insert("finalizers".into(), json!([]));
                    }
                    return Ok(if next == **cur {
                        Mutation::Keep
                    } else {
                        Mutation::Put(next)
                    });
                }
                Ok(Mutation::Delete)
            });
    }
}

/// The IPAddress objects of Services' cluster IPs, as kube-apiserver's IP allocator
/// keeps them (one per IP, named by it, with the Service as parent): created for every
/// allocated IP, deleted once no Service holds it. The allocation itself is
/// [`crate::registry::service_alloc`]'s, from the Services; these objects follow it, right
/// after every Service write (and in every pass, for the server's own deletions).
pub(crate) fn service_ips(srv: &ApiServer) {
    const MANAGED_BY: &str = "ipaddress.kubernetes.io/managed-by";
    const ALLOCATOR: &str = "ipallocator.k8s.io";
    let Some(def) = srv.def("networking.k8s.io", "v1", "ipaddresses") else {
        return;
    };
    let key = def.storage_key();
    let mut want: BTreeMap<String, (String, String)> = BTreeMap::new();
    for svc in srv.storage.list("/services", None).0 {
        let parent = (
            meta_str(&svc, "namespace").unwrap_or("").to_string(),
            meta_str(&svc, "name").unwrap_or("").to_string(),
        );
        for ip in svc
            .pointer("/spec/clusterIPs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|ip| ip.parse::<std::net::IpAddr>().is_ok())
        {
            want.insert(ip.to_string(), parent.clone());
        }
    }
    for obj in srv.storage.list(&key, None).0 {
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        let ours = obj.pointer(&format!(
            "/metadata/labels/{}",
            MANAGED_BY.replace('/', "~1")
        )) == Some(&json!(ALLOCATOR));
        let parent = |k: &str| {
            obj.pointer(&format!("/spec/parentRef/{k}"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let held = want.get(&name) == Some(&(parent("namespace"), parent("name")))
            && parent("resource") == "services";
        if held {
            want.remove(&name);
        } else if ours {
            let _ =
                srv.storage
                    .mutate::<crate::storage::StorageError>(&key, "", &name, |cur, _| {
                        Ok(if cur.is_some() {
                            Mutation::Delete
                        } else {
                            Mutation::Keep
                        })
                    });
        }
    }
    for (ip, (ns, name)) in want {
        let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
        let obj = json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
            "metadata": {"name": ip, "labels": {"ipaddress.kubernetes.io/ip-family": family, MANAGED_BY: ALLOCATOR}},
            "spec": {"parentRef": {"resource": "services", "namespace": ns, "name": name}},
        });
        let _ = srv.create_object(&def, "", obj, "kube-apiserver", false);
    }
}
