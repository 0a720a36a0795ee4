//! The garbage collector, as kube-controller-manager's: dependents whose owners are all
//! gone are deleted (background propagation), dependents of an owner deleted in the
//! foreground are deleted first (the owner's `foregroundDeletion` finalizer removed once
//! no dependent blocks it), and an owner deleted with `orphan` propagation has its
//! references removed from its dependents before its `orphan` finalizer goes.
//!
//! The collector keeps an index of every object by uid, brought up to date from the
//! storage's events at the start of each pass (rebuilt from a full listing when the
//! events it needs were compacted away). A pass then looks only at the objects with
//! owner references and the owners waiting for their dependents, so its cost follows
//! the writes since the last pass and the dependents, not every object stored.

use super::{def_for_key, remove_finalizer};
use crate::http::api::ApiServer;
use crate::http::delete::{DeleteOptions, delete_obj};
use crate::registry::meta::{meta_mut, meta_str};
use crate::storage::{EventType, Mutation};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// An object as the collector indexes it.
struct Node {
    /// Storage key of its resource.
    key: String,
    obj: Arc<Value>,
}

impl Node {
    fn namespace(&self) -> &str {
        meta_str(&self.obj, "namespace").unwrap_or("")
    }

    fn name(&self) -> &str {
        meta_str(&self.obj, "name").unwrap_or("")
    }

    fn deleting(&self) -> bool {
        self.obj.pointer("/metadata/deletionTimestamp").is_some()
    }

    fn has_finalizer(&self, f: &str) -> bool {
        self.obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == f))
    }

    fn owner_refs(&self) -> &[Value] {
        self.obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
}

/// The collector's view of storage, kept between passes.
#[derive(Default)]
pub(crate) struct GcIndex {
    /// The revision the index is current at (0: not built yet).
    rv: u64,
    /// Every object with a uid, by uid.
    nodes: HashMap<String, Node>,
    /// The uids of objects with owner references.
    dependents: HashSet<String>,
    /// The uids of owners being deleted with a `foregroundDeletion` or `orphan`
    /// finalizer (waiting for the collector).
    waiting: HashSet<String>,
}

impl GcIndex {
    fn put(&mut self, key: &str, obj: &Arc<Value>) {
        let Some(uid) = meta_str(obj, "uid").map(str::to_string) else {
            return;
        };
        let node = Node {
            key: key.to_string(),
            obj: obj.clone(),
        };
        if node.owner_refs().is_empty() {
            self.dependents.remove(&uid);
        } else {
            self.dependents.insert(uid.clone());
        }
        if node.deleting()
            && (node.has_finalizer("foregroundDeletion") || node.has_finalizer("orphan"))
        {
            self.waiting.insert(uid.clone());
        } else {
            self.waiting.remove(&uid);
        }
        self.nodes.insert(uid, node);
    }

    fn remove(&mut self, obj: &Value) {
        if let Some(uid) = meta_str(obj, "uid") {
            self.nodes.remove(uid);
            self.dependents.remove(uid);
            self.waiting.remove(uid);
        }
    }

    /// Brings the index up to the storage's current revision.
    fn refresh(&mut self, srv: &ApiServer) {
        if self.rv != 0
            && let Ok((events, _)) = srv.storage.events_after(self.rv)
        {
            for e in events {
                match e.kind {
                    EventType::Deleted => self.remove(&e.object),
                    EventType::Added | EventType::Modified => {
                        // An object recreated under its name has a new uid.
                        if let Some(prev) = &e.prev
                            && meta_str(prev, "uid") != meta_str(&e.object, "uid")
                        {
                            self.remove(prev);
                        }
                        self.put(&e.resource, &e.object);
                    }
                }
                self.rv = e.rv;
            }
            return;
        }
        *self = GcIndex::default();
        let (all, rv) = srv.storage.all_objects();
        for (key, obj) in &all {
            self.put(key, obj);
        }
        self.rv = rv.max(1);
    }
}

/// One pass of the garbage collector.
pub(crate) fn collect(srv: &Arc<ApiServer>) {
    let mut index = srv.gc_index.lock().unwrap_or_else(|e| e.into_inner());
    index.refresh(srv);
    if index.dependents.is_empty() && index.waiting.is_empty() {
        return;
    }
    let mut blocked_owners: HashSet<String> = HashSet::new();
    let mut orphaned_owners: HashSet<String> = HashSet::new();
    let dependents: Vec<String> = index.dependents.iter().cloned().collect();
    for uid in dependents {
        let Some(node) = index.nodes.get(&uid) else {
            continue;
        };
        let ns = node.namespace().to_string();
        let name = node.name().to_string();
        let key = node.key.clone();
        let mut live = 0;
        let mut delete_me = false;
        let mut strip: Vec<String> = Vec::new();
        for r in node.owner_refs() {
            let owner_uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
            // An owner must be cluster-scoped or in the dependent's namespace.
            let Some(o) = index
                .nodes
                .get(owner_uid)
                .filter(|o| o.namespace().is_empty() || o.namespace() == ns)
            else {
                continue;
            };
            live += 1;
            if o.deleting() && o.has_finalizer("foregroundDeletion") {
                delete_me = true;
                if r.get("blockOwnerDeletion") == Some(&json!(true)) {
                    blocked_owners.insert(owner_uid.to_string());
                }
            }
            if o.deleting() && o.has_finalizer("orphan") {
                strip.push(owner_uid.to_string());
                orphaned_owners.insert(owner_uid.to_string());
            }
        }
        let deleting = node.deleting();
        if !strip.is_empty() {
            let _ = srv.storage.mutate::<()>(&key, &ns, &name, |cur, _| {
                let Some(cur) = cur else {
                    return Ok(Mutation::Keep);
                };
                let mut next = (**cur).clone();
                if let Some(Value::Array(rs)) = next.pointer_mut("/metadata/ownerReferences") {
                    rs.retain(|r| {
                        !strip
                            .iter()
                            .any(|u| r.get("uid").and_then(Value::as_str) == Some(u))
                    });
                }
                if next
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.is_empty())
                {
                    meta_mut(&mut next).remove("ownerReferences");
                }
                Ok(Mutation::Put(next))
            });
            continue;
        }
        if (live == 0 || delete_me)
            && !deleting
            && let Some(def) = def_for_key(srv, &key)
        {
            let policy = delete_me.then(|| "Foreground".to_string());
            let _ = delete_obj(
                srv,
                &def,
                &ns,
                &name,
                &DeleteOptions {
                    propagation: policy,
                    ..Default::default()
                },
            );
        }
    }
    let waiting: Vec<(String, String, String, bool, bool)> = index
        .waiting
        .iter()
        .filter_map(|uid| {
            let o = index.nodes.get(uid)?;
            Some((
                uid.clone(),
                o.key.clone(),
                format!("{}/{}", o.namespace(), o.name()),
                o.has_finalizer("foregroundDeletion"),
                o.has_finalizer("orphan"),
            ))
        })
        .collect();
    drop(index);
    for (uid, key, ns_name, foreground, orphan) in waiting {
        let (ns, name) = ns_name.split_once('/').unwrap_or(("", &ns_name));
        if foreground && !blocked_owners.contains(&uid) {
            remove_finalizer(srv, &key, ns, name, "foregroundDeletion");
        }
        if orphan && !orphaned_owners.contains(&uid) {
            remove_finalizer(srv, &key, ns, name, "orphan");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::api::ServerOptions;

    fn configmap(srv: &ApiServer, name: &str, owner: Option<(&str, &str)>) -> Value {
        let def = srv.def("", "v1", "configmaps").expect("configmaps served");
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}});
        if let Some((owner_name, uid)) = owner {
            cm["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
                "name": owner_name, "uid": uid}]);
        }
        srv.create_object(&def, "default", cm, "test", false)
            .expect("created")
    }

    fn exists(srv: &ApiServer, name: &str) -> bool {
        srv.storage.get("/configmaps", "default", name).is_some()
    }

    #[test]
    fn dependents_of_deleted_owners_are_collected_from_events() {
        let srv = Arc::new(ApiServer::new(ServerOptions::default()));
        let owner = configmap(&srv, "owner", None);
        let uid = meta_str(&owner, "uid").unwrap_or_default().to_string();
        configmap(&srv, "dependent", Some(("owner", &uid)));
        collect(&srv);
        assert!(exists(&srv, "dependent"), "its owner exists");
        let before = srv.gc_index.lock().map(|i| i.rv).unwrap_or(0);
        assert!(before > 0);
        let _ = srv
            .storage
            .mutate::<()>("/configmaps", "default", "owner", |_, _| {
                Ok(Mutation::Delete)
            });
        collect(&srv);
        assert!(
            !exists(&srv, "dependent"),
            "collected once its owner is gone"
        );
        // The next pass reads the collector's own delete from the events.
        collect(&srv);
        let index = srv.gc_index.lock().unwrap_or_else(|e| e.into_inner());
        assert!(index.rv > before);
        assert!(index.dependents.is_empty());
        assert!(!index.nodes.values().any(|n| n.name() == "dependent"));
    }

    #[test]
    fn a_compacted_history_rebuilds_the_index() {
        let srv = Arc::new(ApiServer::new(ServerOptions {
            history: 16,
            ..Default::default()
        }));
        collect(&srv);
        for i in 0..40 {
            configmap(&srv, &format!("filler-{i}"), None);
        }
        configmap(
            &srv,
            "orphan",
            Some(("gone", "00000000-0000-0000-0000-000000000000")),
        );
        collect(&srv);
        assert!(!exists(&srv, "orphan"), "its owner never existed");
        assert!(exists(&srv, "filler-0"));
    }
}
