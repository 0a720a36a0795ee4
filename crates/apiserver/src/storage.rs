//! Revisioned in-memory storage with an etcd-like global revision counter, a bounded
//! event history for watch resumption, and point-in-time snapshots for paginated lists.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;

/// Type of a stored change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted.
    Deleted,
}

/// One committed change.
#[derive(Clone, Debug)]
pub struct Event {
    /// Revision of the change.
    pub rv: u64,
    /// Storage key of the resource (`group/plural`).
    pub resource: String,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for deletes: the last state stamped with the delete RV).
    pub object: Arc<Value>,
    /// The object before the change (none for creates).
    pub prev: Option<Arc<Value>>,
    /// The object as served JSON, rendered once for all watchers of one version:
    /// (version, bytes).
    pub rendered: std::sync::OnceLock<(String, bytes::Bytes)>,
    /// The same as Kubernetes protobuf (`k8s\0` + runtime.Unknown), for protobuf watchers.
    pub rendered_pb: std::sync::OnceLock<(String, bytes::Bytes)>,
}

/// Outcome of a read-modify-write closure.
pub enum Mutation {
    /// Store this object (create or update).
    Put(Value),
    /// Delete the object.
    Delete,
    /// Change nothing.
    Keep,
}

type Objects = BTreeMap<(String, String), Arc<Value>>;

/// What `mutate` returns: the stored object (None when deleted/absent) and the event.
pub type MutateResult = (Option<Arc<Value>>, Option<Arc<Event>>);

/// Buffered events, a live receiver, and the current revision.
pub type WatchStart = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>, u64);

/// Durable log of committed changes (one JSON line per change, fsynced), compacted into
/// a snapshot when the storage is opened.
struct Wal {
    file: std::fs::File,
    healthy: bool,
}

impl Wal {
    fn append(&mut self, ev: &Event) {
        use std::io::Write;
        let obj = if ev.kind == EventType::Deleted {
            Value::Null
        } else {
            (*ev.object).clone()
        };
        let line = serde_json::json!({"rv": ev.rv, "r": ev.resource, "ns": ev.namespace, "n": ev.name, "o": obj});
        let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
        bytes.push(b'\n');
        let res = self
            .file
            .write_all(&bytes)
            .and_then(|_| self.file.sync_data());
        if let Err(e) = res {
            // Memory stays authoritative; /readyz reports the failure.
            tracing::error!("failed to persist revision {}: {e}", ev.rv);
            self.healthy = false;
        }
    }
}

struct Inner {
    wal: Option<Wal>,
    rv: u64,
    data: HashMap<String, Objects>,
    history: VecDeque<Arc<Event>>,
    /// The oldest revision a watch may start from (events after it are in history).
    compacted: u64,
}

/// The storage shared by every handler.
pub struct Storage {
    inner: Mutex<Inner>,
    history_cap: usize,
    tx: broadcast::Sender<Arc<Event>>,
}

/// A requested revision is older than the history window.
#[derive(Debug, Clone, Copy)]
pub struct TooOld {
    /// The oldest revision still available.
    pub oldest: u64,
    /// The current revision.
    pub current: u64,
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

impl Storage {
    /// A storage keeping `history_cap` events for watch resumption.
    pub fn new(history_cap: usize) -> Self {
        let (tx, _) = broadcast::channel(128 * 1024);
        Self {
            inner: Mutex::new(Inner {
                wal: None,
                rv: 1,
                data: HashMap::new(),
                history: VecDeque::new(),
                compacted: 1,
            }),
            history_cap: history_cap.max(16),
            tx,
        }
    }

    /// A storage persisted in `dir` (created if missing): previous contents are loaded,
    /// a torn final record (crash during a write) is dropped, and the log is compacted.
    /// Watches cannot resume across a restart (history starts empty: 410 Expired).
    pub fn open(dir: &std::path::Path, history_cap: usize) -> std::io::Result<Self> {
        use std::io::{BufRead, Write};
        std::fs::create_dir_all(dir)?;
        let path = dir.join("objects.jsonl");
        let storage = Self::new(history_cap);
        {
            let mut inner = storage.lock();
            if path.exists() {
                let reader = std::io::BufReader::new(std::fs::File::open(&path)?);
                for line in reader.lines() {
                    let line = line?;
                    let Ok(rec) = serde_json::from_str::<Value>(&line) else {
                        tracing::warn!("ignoring a torn record at the end of {}", path.display());
                        break;
                    };
                    let rv = rec["rv"].as_u64().unwrap_or(0);
                    let resource = rec["r"].as_str().unwrap_or("").to_string();
                    let key = (
                        rec["ns"].as_str().unwrap_or("").to_string(),
                        rec["n"].as_str().unwrap_or("").to_string(),
                    );
                    let objs = inner.data.entry(resource).or_default();
                    match rec.get("o") {
                        Some(Value::Null) | None => {
                            objs.remove(&key);
                        }
                        Some(o) => {
                            objs.insert(key, Arc::new(o.clone()));
                        }
                    }
                    inner.rv = inner.rv.max(rv);
                }
            }
            inner.compacted = inner.rv;
            // Compact: rewrite the current state, then switch atomically.
            let tmp = dir.join("objects.jsonl.tmp");
            {
                let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
                for (resource, objs) in &inner.data {
                    for ((ns, name), o) in objs {
                        let rv: u64 = o
                            .pointer("/metadata/resourceVersion")
                            .and_then(Value::as_str)
                            .and_then(|r| r.parse().ok())
                            .unwrap_or(0);
                        let line = serde_json::json!({"rv": rv, "r": resource, "ns": ns, "n": name, "o": **o});
                        serde_json::to_writer(&mut f, &line)?;
                        f.write_all(b"\n")?;
                    }
                }
                f.flush()?;
                f.get_ref().sync_all()?;
            }
            std::fs::rename(&tmp, &path)?;
            let file = std::fs::OpenOptions::new().append(true).open(&path)?;
            inner.wal = Some(Wal {
                file,
                healthy: true,
            });
        }
        Ok(storage)
    }

    /// False when a write could not be persisted.
    pub fn is_healthy(&self) -> bool {
        self.lock().wal.as_ref().is_none_or(|w| w.healthy)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated (every mutation
        // is a single insert/remove), so recover from poisoning.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current revision.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Reads one object.
    pub fn get(&self, resource: &str, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.lock()
            .data
            .get(resource)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Lists objects (optionally in one namespace) at the current revision, in key order.
    pub fn list(&self, resource: &str, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let inner = self.lock();
        (Self::collect(inner.data.get(resource), ns), inner.rv)
    }

    fn collect(objs: Option<&Objects>, ns: Option<&str>) -> Vec<Arc<Value>> {
        let Some(objs) = objs else { return vec![] };
        match ns {
            Some(ns) => objs
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
            None => objs.values().cloned().collect(),
        }
    }

    /// Lists objects as they were at revision `rv`, reconstructed from history.
    pub fn list_at(
        &self,
        resource: &str,
        ns: Option<&str>,
        rv: u64,
        after: Option<&str>,
    ) -> Result<Vec<Arc<Value>>, TooOld> {
        let inner = self.lock();
        if rv < inner.compacted {
            return Err(TooOld {
                oldest: inner.compacted,
                current: inner.rv,
            });
        }
        // Undo the changes made after `rv`: walking newest to oldest, the last write for a
        // key is the oldest change's previous state, i.e. the state at `rv`.
        let mut undo: BTreeMap<(String, String), Option<Arc<Value>>> = BTreeMap::new();
        for ev in inner.history.iter().rev() {
            if ev.rv <= rv {
                break;
            }
            if ev.resource == resource {
                undo.insert((ev.namespace.clone(), ev.name.clone()), ev.prev.clone());
            }
        }
        let lower: Bound<(String, String)> = match (after.and_then(|a| a.split_once('/')), ns) {
            (Some((n, name)), _) => Bound::Excluded((n.to_string(), name.to_string())),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let empty = Objects::new();
        let objs = inner.data.get(resource).unwrap_or(&empty);
        let mut cur = objs.range((lower.clone(), Bound::Unbounded)).peekable();
        let mut und = undo.range((lower, Bound::Unbounded)).peekable();
        let mut out = Vec::new();
        loop {
            let next_cur = cur.peek().map(|(k, _)| *k);
            let next_und = und.peek().map(|(k, _)| *k);
            let (key, value) = match (next_cur, next_und) {
                (None, None) => break,
                (Some(c), Some(u)) if u <= c => {
                    if u == c {
                        cur.next();
                    }
                    let (k, v) = und
                        .next()
                        .map(|(k, v)| (k, v.clone()))
                        .unwrap_or_else(|| (u, None));
                    (k, v)
                }
                (Some(_), _) => match cur.next() {
                    Some((k, v)) => (k, Some(v.clone())),
                    None => break,
                },
                (None, Some(_)) => match und.next() {
                    Some((k, v)) => (k, v.clone()),
                    None => break,
                },
            };
            if let Some(ns) = ns
                && key.0 != ns
            {
                break;
            }
            if let Some(v) = value {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// Atomically reads an object, lets `f` decide, and commits the result. Returns the
    /// stored object (None when deleted or absent) and whether anything was written.
    pub fn mutate<E>(
        &self,
        resource: &str,
        ns: &str,
        name: &str,
        f: impl FnOnce(Option<&Arc<Value>>, u64) -> Result<Mutation, E>,
    ) -> Result<MutateResult, E> {
        let mut inner = self.lock();
        let key = (ns.to_string(), name.to_string());
        let current = inner.data.get(resource).and_then(|m| m.get(&key)).cloned();
        let next_rv = inner.rv + 1;
        match f(current.as_ref(), next_rv)? {
            Mutation::Keep => Ok((current, None)),
            Mutation::Put(mut obj) => {
                inner.rv = next_rv;
                set_rv(&mut obj, next_rv);
                let obj = Arc::new(obj);
                inner
                    .data
                    .entry(resource.to_string())
                    .or_default()
                    .insert(key, obj.clone());
                let kind = if current.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                let ev = self.record(&mut inner, resource, ns, name, kind, obj.clone(), current);
                Ok((Some(obj), Some(ev)))
            }
            Mutation::Delete => {
                let Some(prev) = current else {
                    return Ok((None, None));
                };
                inner.rv = next_rv;
                if let Some(m) = inner.data.get_mut(resource) {
                    m.remove(&key);
                }
                let mut last = (*prev).clone();
                set_rv(&mut last, next_rv);
                let ev = self.record(
                    &mut inner,
                    resource,
                    ns,
                    name,
                    EventType::Deleted,
                    Arc::new(last),
                    Some(prev),
                );
                Ok((None, Some(ev)))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        inner: &mut Inner,
        resource: &str,
        ns: &str,
        name: &str,
        kind: EventType,
        object: Arc<Value>,
        prev: Option<Arc<Value>>,
    ) -> Arc<Event> {
        let ev = Arc::new(Event {
            rv: inner.rv,
            resource: resource.to_string(),
            namespace: ns.to_string(),
            name: name.to_string(),
            kind,
            object,
            prev,
            rendered: std::sync::OnceLock::new(),
            rendered_pb: std::sync::OnceLock::new(),
        });
        inner.history.push_back(ev.clone());
        while inner.history.len() > self.history_cap {
            if let Some(old) = inner.history.pop_front() {
                inner.compacted = old.rv;
            }
        }
        if let Some(wal) = inner.wal.as_mut() {
            wal.append(&ev);
        }
        // No receivers is fine.
        let _ = self.tx.send(ev.clone());
        ev
    }

    /// Subscribes to changes after revision `from`: returns the buffered events after it
    /// (all resources; callers filter) and a live receiver that continues exactly after them.
    pub fn watch_from(&self, from: u64) -> Result<WatchStart, TooOld> {
        let inner = self.lock();
        if from < inner.compacted {
            return Err(TooOld {
                oldest: inner.compacted,
                current: inner.rv,
            });
        }
        let past: Vec<Arc<Event>> = inner
            .history
            .iter()
            .filter(|e| e.rv > from)
            .cloned()
            .collect();
        Ok((past, self.tx.subscribe(), inner.rv))
    }

    /// A snapshot of one resource plus a live receiver starting right after it.
    pub fn snapshot_and_watch(
        &self,
        resource: &str,
        ns: Option<&str>,
    ) -> (Vec<Arc<Value>>, broadcast::Receiver<Arc<Event>>, u64) {
        let inner = self.lock();
        (
            Self::collect(inner.data.get(resource), ns),
            self.tx.subscribe(),
            inner.rv,
        )
    }

    /// Drops history up to the current revision (tests use this to force 410s).
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.compacted = inner.rv;
    }

    /// Every resource key that has objects in a namespace.
    pub fn resources_in_namespace(&self, ns: &str) -> Vec<String> {
        let inner = self.lock();
        inner
            .data
            .iter()
            .filter(|(_, objs)| objs.keys().any(|(n, _)| n == ns))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Every object of every resource (for the garbage collector).
    pub fn all_objects(&self) -> Vec<(String, Arc<Value>)> {
        let inner = self.lock();
        inner
            .data
            .iter()
            .flat_map(|(k, objs)| objs.values().map(move |v| (k.clone(), v.clone())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn persists_across_reopen_and_survives_a_torn_write() {
        let dir = std::env::temp_dir().join(format!(
            "kw-storage-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        {
            let s = Storage::open(&dir, 100).unwrap();
            put(&s, "a", 1);
            put(&s, "b", 2);
            put(&s, "a", 3);
            s.mutate::<()>("/configmaps", "ns", "b", |_, _| Ok(Mutation::Delete))
                .unwrap();
        }
        // Simulate a crash in the middle of appending a record.
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(dir.join("objects.jsonl"))
                .unwrap();
            f.write_all(b"{\"rv\": 99, \"r\": \"/configmaps\", \"ns\"")
                .unwrap();
        }
        let s = Storage::open(&dir, 100).unwrap();
        let (items, rv) = s.list("/configmaps", None);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["v"], 3);
        assert!(rv >= 4, "revisions continue after a restart");
        let next = put(&s, "c", 1);
        assert!(next > rv);
        assert!(s.is_healthy());
        drop(s);
        let s = Storage::open(&dir, 100).unwrap();
        assert_eq!(s.list("/configmaps", None).0.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn put(s: &Storage, name: &str, v: i64) -> u64 {
        let (obj, _) = s
            .mutate::<()>("/configmaps", "ns", name, |_, _| {
                Ok(Mutation::Put(json!({"metadata": {"name": name}, "v": v})))
            })
            .unwrap();
        obj.unwrap()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn revisions_and_snapshots() {
        let s = Storage::new(100);
        let r1 = put(&s, "a", 1);
        let r2 = put(&s, "b", 1);
        assert!(r2 > r1);
        put(&s, "a", 2);
        s.mutate::<()>("/configmaps", "ns", "b", |_, _| Ok(Mutation::Delete))
            .unwrap();
        let at_r2 = s.list_at("/configmaps", Some("ns"), r2, None).unwrap();
        assert_eq!(
            s.list_at("/configmaps", Some("ns"), r2, Some("ns/a"))
                .unwrap()
                .len(),
            1
        );
        assert_eq!(at_r2.len(), 2);
        assert_eq!(at_r2[0]["v"], 1);
        let now = s.list("/configmaps", None).0;
        assert_eq!(now.len(), 1);
        assert_eq!(now[0]["v"], 2);
        let (past, _rx, _) = s.watch_from(r1).unwrap();
        assert_eq!(past.len(), 3);
        s.compact();
        assert!(s.watch_from(r1).is_err());
        assert!(s.list_at("/configmaps", None, r2, None).is_err());
    }
}
