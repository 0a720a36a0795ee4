//! The controllers a test expects from a real cluster: CRD establishment and cleanup,
//! namespace lifecycle (content deletion, finalize, default ServiceAccount) and the
//! garbage collector (background, foreground and orphan propagation), and ClusterRole
//! aggregation (bootstrap.rs, with the default RBAC policy created at start), and the
//! replicaset and deployment controllers (workloads.rs). The storage object protection
//! controllers, the pod garbage collector and the ttl-after-finished controller are
//! kubewright-controllers', run beside the server by the crates above it.

pub(crate) mod bootstrap;
pub(crate) mod cronjobs;
pub(crate) mod daemonsets;
pub(crate) mod disruption;
pub(crate) mod endpoints;
pub(crate) mod gc;
pub(crate) mod jobs;
pub(crate) mod nodes;
pub(crate) mod resource_claims;
pub(crate) mod statefulsets;
pub(crate) mod workloads;

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
            let pass = std::panic::AssertUnwindSafe(workloads::reconcile(&srv));
            if let Err(panic) = futures::FutureExt::catch_unwind(pass).await {
                report_panic("workloads", panic.as_ref());
            }
            if srv.storage.current_rv() == before {
                break;
            }
        }
    }
}

/// One pass of every controller. A controller that panics is reported and skipped for
/// this pass, as controller-runtime recovers a reconciler's panic: the others still run,
/// and it runs again on the next pass.
pub fn reconcile_all(srv: &Arc<ApiServer>) {
    let passes: [(&str, Pass); 10] = [
        ("crd", |s| crds(s)),
        ("namespace", |s| namespaces(s)),
        ("garbage-collector", |s| gc::collect(s)),
        ("clusterrole-aggregation", |s| {
            crate::controllers::bootstrap::aggregate_cluster_roles(s)
        }),
        ("service-ip", |s| service_ips(s)),
        ("resourcequota", |s| quotas(s)),
        ("apiservice", |s| {
            crate::controllers::bootstrap::api_services(s)
        }),
        ("service-cidr", |s| service_cidrs(s)),
        ("resourceclaim", |s| resource_claims::reconcile(s)),
        ("node-lifecycle", |s| nodes::reconcile(s)),
    ];
    for (name, pass) in passes {
        guarded(name, || pass(srv));
    }
}

/// One controller's pass over the whole store.
type Pass = fn(&Arc<ApiServer>);

/// Runs one controller's pass, reporting a panic instead of letting it end the loop
/// that runs every controller.
fn guarded(name: &str, pass: impl FnOnce()) -> bool {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(pass)) {
        Ok(()) => true,
        Err(panic) => {
            report_panic(name, panic.as_ref());
            false
        }
    }
}

fn report_panic(controller: &str, panic: &(dyn std::any::Any + Send)) {
    let why = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    tracing::error!(controller, panic = %why, "an embedded controller panicked; it runs again on the next pass");
}

const CIDR_FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";

/// Whether `ip` lies in `cidr` (`a.b.c.d/n` or an IPv6 prefix).
fn in_cidr(ip: &str, cidr: &str) -> bool {
    let Some((base, bits)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(ip), Ok(base), Ok(bits)) = (
        ip.parse::<std::net::IpAddr>(),
        base.parse::<std::net::IpAddr>(),
        bits.parse::<u32>(),
    ) else {
        return false;
    };
    match (ip, base) {
        (std::net::IpAddr::V4(a), std::net::IpAddr::V4(b)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(a) & mask == u32::from(b) & mask
        }
        (std::net::IpAddr::V6(a), std::net::IpAddr::V6(b)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

/// ServiceCIDRs as kube-controller-manager's service-cidr-controller keeps them: each
/// gets the `networking.k8s.io/service-cidr-finalizer` and a Ready condition (applied to
/// its status); a deleted one keeps its finalizer while a Service's cluster IP lies in
/// it and in no other ServiceCIDR.
fn service_cidrs(srv: &ApiServer) {
    let Some(def) = srv.def("networking.k8s.io", "v1", "servicecidrs") else {
        return;
    };
    let key = def.storage_key();
    let cidrs = srv.storage.list(&key, None).0;
    let ranges = |o: &Value| -> Vec<String> {
        o.pointer("/spec/cidrs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str().map(str::to_string))
            .collect()
    };
    let ips: Vec<String> = srv
        .storage
        .list("/services", None)
        .0
        .iter()
        .flat_map(|svc| {
            svc.pointer("/spec/clusterIPs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|ip| ip.as_str().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect();
    let ty = crate::registry::schema::builtin_def("io.k8s.api.networking.v1.ServiceCIDR");
    for cidr in &cidrs {
        let name = meta_str(cidr, "name").unwrap_or("").to_string();
        let has_fin = cidr
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == CIDR_FINALIZER));
        if cidr.pointer("/metadata/deletionTimestamp").is_some() {
            let mine = ranges(cidr);
            let others: Vec<String> = cidrs
                .iter()
                .filter(|o| {
                    meta_str(o, "name") != Some(name.as_str())
                        && o.pointer("/metadata/deletionTimestamp").is_none()
                })
                .flat_map(|o| ranges(o))
                .collect();
            let in_use = ips.iter().any(|ip| {
                mine.iter().any(|c| in_cidr(ip, c)) && !others.iter().any(|c| in_cidr(ip, c))
            });
            if has_fin && !in_use {
                remove_finalizer(srv, &key, "", &name, CIDR_FINALIZER);
            }
            continue;
        }
        let ready = cidr
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(|c| c.get("type") == Some(&json!("Ready"))));
        if has_fin && ready {
            continue;
        }
        let _ = srv.storage.mutate::<()>(&key, "", &name, |cur, _| {
            let Some(cur) = cur else {
                return Ok(Mutation::Keep);
            };
            let mut next = (**cur).clone();
            if !has_fin {
                let fins = meta_mut(&mut next)
                    .entry("finalizers")
                    .or_insert_with(|| json!([]));
                if let Some(a) = fins.as_array_mut() {
                    a.push(json!(CIDR_FINALIZER));
                }
                let changed = crate::registry::fields::compare(cur, &next, ty);
                crate::registry::meta::record_update(
                    &mut next,
                    "kube-controller-manager",
                    "networking.k8s.io/v1",
                    None,
                    &changed,
                );
            }
            if !ready {
                let condition = json!({"type": "Ready", "status": "True",
                    "lastTransitionTime": crate::registry::meta::now_time(), "reason": "",
                    "message": "Kubernetes Service CIDR is ready"});
                next["status"]["conditions"] = json!([condition]);
                // Applied: the controller owns what its configuration names.
                let applied = json!({"status": {"conditions": [condition]}});
                crate::registry::meta::record_managed(
                    &mut next,
                    "service-cidr-controller",
                    "Apply",
                    "networking.k8s.io/v1",
                    Some("status"),
                    crate::registry::fields::paths_of(&applied, ty),
                    &Default::default(),
                    true,
                );
            }
            Ok(Mutation::Put(next))
        });
    }
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
                // Written meanwhile (e.g. admission charged a create): the status was
                // computed from an older quota. Upstream's update would conflict; the
                // write's own pass computes it again.
                if meta_str(cur, "resourceVersion") != meta_str(&q, "resourceVersion") {
                    return Ok(Mutation::Keep);
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_controller_does_not_stop_the_others() {
        let ran = std::cell::Cell::new(Vec::new());
        let log = |name: &str| {
            let mut v = ran.take();
            v.push(name.to_string());
            ran.set(v);
        };
        assert!(guarded("first", || log("first")));
        assert!(!guarded("broken", || panic!("a bad object")));
        assert!(guarded("after", || log("after")));
        assert_eq!(ran.take(), ["first", "after"]);
    }
}
