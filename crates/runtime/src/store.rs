//! A thread-safe object cache with secondary indexes (client-go's `Indexer`), the
//! [`Delta`]s that describe how it changes, and a typed read API over it ([`Lister`]).
//!
//! The [`Store`] holds `Arc<K>` values keyed by namespace and name. Objects are decoded
//! once and moved into an `Arc`; every read hands out clones of that `Arc`, never deep
//! copies.
//!
//! * Reads ([`Store::get`], [`Store::list`], [`Store::by_index`], ...) take a shared lock
//!   and never wait for user code: index functions run outside the lock.
//! * Writes ([`Store::upsert`], [`Store::delete`], [`Store::replace`]) are serialised with
//!   each other and usually come from one [`Reflector`](crate::reflector::Reflector).
//! * [`Store::replace`] builds the new maps and indexes next to the old ones and swaps them
//!   in under the exclusive lock, so a reader sees either the whole old state or the whole
//!   new state, never half a relist. Objects that vanished come back as
//!   [`Delta::Deleted`] with `final_state_unknown: true` (client-go's
//!   `DeletedFinalStateUnknown`), carrying their last known state.
//! * The namespace index ([`NAMESPACE_INDEX`]) is built in; more indexes can be added at any
//!   time with [`Store::add_indexer`] and are built from the current contents.
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewright_core::{LabelSelector, ObjectMeta};
//! use kubewright_runtime::store::{Delta, Store};
//!
//! fn cm(ns: &str, name: &str, team: &str) -> Arc<ConfigMap> {
//!     Arc::new(ConfigMap {
//!         metadata: ObjectMeta {
//!             namespace: Some(ns.into()),
//!             name: Some(name.into()),
//!             resource_version: Some("1".into()),
//!             labels: Some([("team".to_string(), team.to_string())].into()),
//!             ..Default::default()
//!         },
//!         ..Default::default()
//!     })
//! }
//!
//! let store: Store<ConfigMap> = Store::new();
//! store
//!     .add_indexer("team", |cm: &ConfigMap| {
//!         cm.metadata.labels.iter().flatten()
//!             .filter(|(k, _)| *k == "team").map(|(_, v)| v.clone()).collect()
//!     })
//!     .unwrap();
//! assert!(matches!(store.upsert(cm("a", "one", "red")), Delta::Added(_)));
//! store.upsert(cm("a", "two", "blue"));
//! store.upsert(cm("b", "three", "red"));
//!
//! assert_eq!(store.len(), 3);
//! assert!(store.get_by_key("a/one").is_some());
//! assert_eq!(store.by_index("team", "red").unwrap().len(), 2);
//!
//! let lister = store.lister();
//! assert_eq!(lister.namespace("a").list().len(), 2);
//! let blue = LabelSelector::parse("team=blue").unwrap();
//! assert_eq!(lister.list_matching(&blue)[0].metadata.name.as_deref(), Some("two"));
//!
//! // A relist that no longer contains "a/two" reports it as deleted with its last state.
//! let deltas = store.replace(vec![cm("a", "one", "red"), cm("b", "three", "red")]);
//! assert!(deltas.iter().any(|d| matches!(d,
//!     Delta::Deleted { obj, final_state_unknown: true } if obj.metadata.name.as_deref() == Some("two"))));
//! assert_eq!(store.len(), 2);
//! ```

use kubewright_core::{LabelSelector, ObjectKey, Resource, ResourceExt};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Name of the built-in index from namespace to objects (client-go's `NamespaceIndex`).
/// Cluster-scoped objects are indexed under the empty string.
pub const NAMESPACE_INDEX: &str = "namespace";

/// An index function: the index values of an object (for example its labels' values, or
/// the names of the nodes it refers to). Called outside the store's lock; it may read the
/// store but must not write to it.
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Errors of index operations.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// An index with this name exists already (the namespace index is built in).
    #[error("an index named {0:?} already exists")]
    IndexExists(String),
    /// No index with this name.
    #[error("there is no index named {0:?}")]
    UnknownIndex(String),
}

/// One change to a store, as delivered to event handlers and by
/// [`Reflector::into_stream`](crate::reflector::Reflector::into_stream).
///
/// Objects are shared `Arc`s: the value in the store and the value in the delta are the
/// same allocation.
pub enum Delta<K> {
    /// An object appeared (created, listed for the first time, or started matching the
    /// selector).
    Added(Arc<K>),
    /// An object changed; `old` is what the store held before.
    Updated {
        /// The previous state.
        old: Arc<K>,
        /// The new state (now in the store).
        new: Arc<K>,
    },
    /// An object went away.
    Deleted {
        /// Its last state: from the DELETED event, or the last state the store knew.
        obj: Arc<K>,
        /// True when the deletion was inferred from a relist (the object vanished while
        /// the watch was down), so `obj` may be older than the object's real final state:
        /// client-go's `DeletedFinalStateUnknown`.
        final_state_unknown: bool,
    },
    /// A periodic resync: the object did not change, and is delivered again so that
    /// consumers can re-check it (handlers see it as an update with `old == new`).
    Sync(Arc<K>),
    /// A list (the initial one, or a relist after an expired watch or an error)
    /// completed: the store now holds exactly the listed objects. Comes after that list's
    /// `Added`, `Updated` and `Deleted` deltas.
    Replaced {
        /// The list's resourceVersion; the watch resumes from here.
        resource_version: String,
    },
}

impl<K> Delta<K> {
    /// The object this change took out of the store, if any.
    pub(crate) fn into_retired(self) -> Option<Arc<K>> {
        match self {
            Self::Updated { old, .. } => Some(old),
            Self::Deleted { obj, .. } => Some(obj),
            _ => None,
        }
    }
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Added(o) => Self::Added(o.clone()),
            Self::Updated { old, new } => Self::Updated {
                old: old.clone(),
                new: new.clone(),
            },
            Self::Deleted {
                obj,
                final_state_unknown,
            } => Self::Deleted {
                obj: obj.clone(),
                final_state_unknown: *final_state_unknown,
            },
            Self::Sync(o) => Self::Sync(o.clone()),
            Self::Replaced { resource_version } => Self::Replaced {
                resource_version: resource_version.clone(),
            },
        }
    }
}

impl<K: Resource> fmt::Debug for Delta<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = |o: &Arc<K>| {
            format!(
                "{}@{}",
                ObjectKey::from_obj(&**o),
                o.resource_version().unwrap_or("")
            )
        };
        match self {
            Self::Added(o) => write!(f, "Added({})", key(o)),
            Self::Updated { old, new } => write!(f, "Updated({} -> {})", key(old), key(new)),
            Self::Deleted {
                obj,
                final_state_unknown,
            } => write!(
                f,
                "Deleted({}, final_state_unknown: {final_state_unknown})",
                key(obj)
            ),
            Self::Sync(o) => write!(f, "Sync({})", key(o)),
            Self::Replaced { resource_version } => write!(f, "Replaced(@{resource_version})"),
        }
    }
}

/// Something that names an object in a store: an [`ObjectKey`], or a `"ns/name"` /
/// `"name"` string.
pub trait AsObjectKey {
    /// The key.
    fn as_object_key(&self) -> Cow<'_, ObjectKey>;
}

impl AsObjectKey for ObjectKey {
    fn as_object_key(&self) -> Cow<'_, ObjectKey> {
        Cow::Borrowed(self)
    }
}

impl AsObjectKey for str {
    fn as_object_key(&self) -> Cow<'_, ObjectKey> {
        Cow::Owned(ObjectKey::parse(self))
    }
}

impl AsObjectKey for String {
    fn as_object_key(&self) -> Cow<'_, ObjectKey> {
        Cow::Owned(ObjectKey::parse(self))
    }
}

impl<T: AsObjectKey + ?Sized> AsObjectKey for &T {
    fn as_object_key(&self) -> Cow<'_, ObjectKey> {
        (**self).as_object_key()
    }
}

type Items<K> = HashMap<String, HashMap<String, Arc<K>>>;
type IndexValues = HashMap<String, HashSet<ObjectKey>>;

struct Inner<K> {
    /// namespace ("" for cluster-scoped) -> name -> object. Doubles as the namespace index.
    items: Items<K>,
    len: usize,
    /// Index functions, in registration order, cheap to snapshot.
    funcs: Arc<Vec<(String, IndexFn<K>)>>,
    /// Index name -> value -> keys.
    indexes: HashMap<String, IndexValues>,
}

struct Shared<K> {
    inner: RwLock<Inner<K>>,
    /// Serialises writers, so that a writer can read, compute outside the lock, and then
    /// commit without another writer interleaving.
    writer: Mutex<()>,
}

/// A thread-safe cache of `Arc<K>` keyed by namespace/name, with secondary indexes.
/// Cheap to clone: clones share the same contents. See the [module docs](self).
pub struct Store<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<K> fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.read();
        f.debug_struct("Store")
            .field("len", &g.len)
            .field(
                "indexes",
                &g.funcs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<K> Default for Store<K> {
    fn default() -> Self {
        Self {
            shared: Arc::new(Shared {
                inner: RwLock::new(Inner {
                    items: HashMap::new(),
                    len: 0,
                    funcs: Arc::new(Vec::new()),
                    indexes: HashMap::new(),
                }),
                writer: Mutex::new(()),
            }),
        }
    }
}

fn ns_name<K: Resource>(obj: &K) -> (&str, &str) {
    let m = obj.meta();
    (
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or(""),
    )
}

fn key_of(ns: &str, name: &str) -> ObjectKey {
    ObjectKey::new(Some(ns), name)
}

fn same_version<K: Resource>(a: &K, b: &K) -> bool {
    match (a.resource_version(), b.resource_version()) {
        (Some(x), Some(y)) => !x.is_empty() && x == y,
        _ => false,
    }
}

/// Per-index value changes of one write: (index name, values removed, values added).
type IndexChanges = Vec<(String, Vec<String>, Vec<String>)>;

fn index_changes<K>(
    funcs: &[(String, IndexFn<K>)],
    old: Option<&K>,
    new: Option<&K>,
) -> IndexChanges {
    let mut out = Vec::new();
    for (name, f) in funcs {
        let before = old.map(|o| f(o)).unwrap_or_default();
        let after = new.map(|o| f(o)).unwrap_or_default();
        if before == after {
            continue;
        }
        let removed: Vec<String> = before
            .iter()
            .filter(|v| !after.contains(v))
            .cloned()
            .collect();
        let added: Vec<String> = after.into_iter().filter(|v| !before.contains(v)).collect();
        if !removed.is_empty() || !added.is_empty() {
            out.push((name.clone(), removed, added));
        }
    }
    out
}

impl<K> Inner<K> {
    fn get(&self, ns: &str, name: &str) -> Option<&Arc<K>> {
        self.items.get(ns)?.get(name)
    }

    fn apply_index_changes(&mut self, key: &ObjectKey, changes: IndexChanges) {
        for (index, removed, added) in changes {
            let Some(values) = self.indexes.get_mut(&index) else {
                continue;
            };
            for v in removed {
                if let Some(set) = values.get_mut(&v) {
                    set.remove(key);
                    if set.is_empty() {
                        values.remove(&v);
                    }
                }
            }
            for v in added {
                values.entry(v).or_default().insert(key.clone());
            }
        }
    }
}

/// Inserts or replaces; true when the key is new. Allocates the key strings only for new
/// keys.
fn insert_item<K>(items: &mut Items<K>, ns: &str, name: &str, obj: Arc<K>) -> bool {
    match items.get_mut(ns) {
        Some(names) => match names.get_mut(name) {
            Some(v) => {
                *v = obj;
                false
            }
            None => {
                names.insert(name.to_string(), obj);
                true
            }
        },
        None => {
            items.insert(ns.to_string(), HashMap::from([(name.to_string(), obj)]));
            true
        }
    }
}

fn build_index<K>(items: &Items<K>, f: &IndexFn<K>) -> IndexValues {
    let mut values: IndexValues = HashMap::new();
    for (ns, names) in items {
        for (name, obj) in names {
            for v in f(obj) {
                values.entry(v).or_default().insert(key_of(ns, name));
            }
        }
    }
    values
}

impl<K> Store<K> {
    /// An empty store with only the namespace index.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner<K>> {
        // Every write commits with single map operations under the write lock, so the
        // state is consistent even after a panic elsewhere: recover from poisoning.
        self.shared.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner<K>> {
        self.shared.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn writer(&self) -> MutexGuard<'_, ()> {
        self.shared.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.read().len
    }

    /// Whether the store holds no objects.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The object stored under a key (`"ns/name"`, `"name"` for cluster-scoped objects, or
    /// an [`ObjectKey`]).
    pub fn get_by_key<Q: AsObjectKey + ?Sized>(&self, key: &Q) -> Option<Arc<K>> {
        let key = key.as_object_key();
        self.read()
            .get(key.namespace.as_deref().unwrap_or(""), &key.name)
            .cloned()
    }

    /// The object in `namespace` (None for cluster-scoped) named `name`.
    pub fn get_by_name(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.read().get(namespace.unwrap_or(""), name).cloned()
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let g = self.read();
        let mut out = Vec::with_capacity(g.len);
        for names in g.items.values() {
            out.extend(names.values().cloned());
        }
        out
    }

    /// Every key, in no particular order.
    pub fn keys(&self) -> Vec<ObjectKey> {
        let g = self.read();
        let mut out = Vec::with_capacity(g.len);
        for (ns, names) in &g.items {
            out.extend(names.keys().map(|n| key_of(ns, n)));
        }
        out
    }

    /// Every object in one namespace (`""` for cluster-scoped objects).
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.read()
            .items
            .get(namespace)
            .map(|names| names.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Every object for which `pred` holds (evaluated under the read lock: keep it cheap).
    pub fn list_filtered(&self, mut pred: impl FnMut(&K) -> bool) -> Vec<Arc<K>> {
        let g = self.read();
        let mut out = Vec::new();
        for names in g.items.values() {
            out.extend(names.values().filter(|o| pred(o)).cloned());
        }
        out
    }

    /// The names of the indexes (including [`NAMESPACE_INDEX`]).
    pub fn index_names(&self) -> Vec<String> {
        let g = self.read();
        std::iter::once(NAMESPACE_INDEX.to_string())
            .chain(g.funcs.iter().map(|(n, _)| n.clone()))
            .collect()
    }

    /// Adds a named index, built at once from the current contents and kept up to date by
    /// every later write. Fails if the name is taken.
    pub fn add_indexer<F>(&self, name: &str, f: F) -> Result<(), StoreError>
    where
        F: Fn(&K) -> Vec<String> + Send + Sync + 'static,
    {
        let f: IndexFn<K> = Arc::new(f);
        let _w = self.writer();
        if name == NAMESPACE_INDEX || self.read().indexes.contains_key(name) {
            return Err(StoreError::IndexExists(name.to_string()));
        }
        // No other writer can run: build from a consistent read, then commit.
        let values = build_index(&self.read().items, &f);
        let mut g = self.write();
        let mut funcs = (*g.funcs).clone();
        funcs.push((name.to_string(), f));
        g.funcs = Arc::new(funcs);
        g.indexes.insert(name.to_string(), values);
        Ok(())
    }

    /// Keys of the objects whose index `index` contains `value`.
    pub fn index_keys(&self, index: &str, value: &str) -> Result<Vec<ObjectKey>, StoreError> {
        let g = self.read();
        if index == NAMESPACE_INDEX {
            return Ok(g
                .items
                .get(value)
                .map(|names| names.keys().map(|n| key_of(value, n)).collect())
                .unwrap_or_default());
        }
        let values = g
            .indexes
            .get(index)
            .ok_or_else(|| StoreError::UnknownIndex(index.to_string()))?;
        Ok(values
            .get(value)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default())
    }

    /// Objects whose index `index` contains `value`.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, StoreError> {
        let g = self.read();
        if index == NAMESPACE_INDEX {
            return Ok(g
                .items
                .get(value)
                .map(|names| names.values().cloned().collect())
                .unwrap_or_default());
        }
        let values = g
            .indexes
            .get(index)
            .ok_or_else(|| StoreError::UnknownIndex(index.to_string()))?;
        Ok(values
            .get(value)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| g.get(k.namespace.as_deref().unwrap_or(""), &k.name))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Every value that index `index` currently holds (client-go's `ListIndexFuncValues`).
    pub fn index_values(&self, index: &str) -> Result<Vec<String>, StoreError> {
        let g = self.read();
        if index == NAMESPACE_INDEX {
            return Ok(g.items.keys().cloned().collect());
        }
        g.indexes
            .get(index)
            .map(|values| values.keys().cloned().collect())
            .ok_or_else(|| StoreError::UnknownIndex(index.to_string()))
    }

    /// A typed read API over this store.
    pub fn lister(&self) -> Lister<K> {
        Lister {
            store: self.clone(),
        }
    }
}

impl<K: Resource> Store<K> {
    /// The stored object with the same namespace and name as `obj`.
    pub fn get(&self, obj: &K) -> Option<Arc<K>> {
        let (ns, name) = ns_name(obj);
        self.read().get(ns, name).cloned()
    }

    /// Inserts or replaces an object; returns [`Delta::Added`] or [`Delta::Updated`].
    pub fn upsert(&self, obj: Arc<K>) -> Delta<K> {
        let _w = self.writer();
        let (old, funcs) = {
            let g = self.read();
            let (ns, name) = ns_name(&*obj);
            (g.get(ns, name).cloned(), g.funcs.clone())
        };
        let changes = index_changes(&funcs, old.as_deref(), Some(&*obj));
        {
            let mut g = self.write();
            let (ns, name) = ns_name(&*obj);
            if !changes.is_empty() {
                g.apply_index_changes(&key_of(ns, name), changes);
            }
            if insert_item(&mut g.items, ns, name, obj.clone()) {
                g.len += 1;
            }
        }
        match old {
            Some(old) => Delta::Updated { old, new: obj },
            None => Delta::Added(obj),
        }
    }

    /// Removes the object with `obj`'s namespace and name. Returns [`Delta::Deleted`]
    /// carrying `obj` (the final state, as a DELETED watch event reports it), or `None`
    /// when the store did not hold it.
    pub fn delete(&self, obj: Arc<K>) -> Option<Delta<K>> {
        let _w = self.writer();
        let (old, funcs) = {
            let g = self.read();
            let (ns, name) = ns_name(&*obj);
            (g.get(ns, name).cloned()?, g.funcs.clone())
        };
        let changes = index_changes(&funcs, Some(&*old), None);
        {
            let mut g = self.write();
            let (ns, name) = ns_name(&*obj);
            if !changes.is_empty() {
                g.apply_index_changes(&key_of(ns, name), changes);
            }
            let mut emptied = false;
            if let Some(names) = g.items.get_mut(ns) {
                names.remove(name);
                emptied = names.is_empty();
            }
            if emptied {
                g.items.remove(ns);
            }
            g.len -= 1;
        }
        drop(old);
        Some(Delta::Deleted {
            obj,
            final_state_unknown: false,
        })
    }

    /// Replaces the whole contents with `objects` (a relist) atomically, and returns what
    /// changed: `Added` for new keys, `Updated` for keys whose resourceVersion changed, and
    /// `Deleted { final_state_unknown: true }` (with the last known state) for keys that
    /// are gone. Objects whose resourceVersion did not change keep their existing `Arc`
    /// and produce no delta.
    ///
    /// The new maps and indexes are built while readers keep using the old ones; the swap
    /// happens under the exclusive lock, and the old maps are freed after it is released.
    pub fn replace(&self, objects: Vec<Arc<K>>) -> Vec<Delta<K>> {
        let _w = self.writer();
        let mut deltas = Vec::new();
        let (items, len, indexes) = {
            let g = self.read();
            let mut items: Items<K> = HashMap::with_capacity(g.items.len().max(1));
            let mut len = 0usize;
            for obj in objects {
                let (ns, name) = ns_name(&*obj);
                let stored = match g.get(ns, name) {
                    Some(old) if same_version(&**old, &*obj) => old.clone(),
                    Some(old) => {
                        deltas.push(Delta::Updated {
                            old: old.clone(),
                            new: obj.clone(),
                        });
                        obj.clone()
                    }
                    None => {
                        deltas.push(Delta::Added(obj.clone()));
                        obj.clone()
                    }
                };
                if insert_item(&mut items, ns, name, stored) {
                    len += 1;
                }
            }
            for (ns, names) in &g.items {
                let new_names = items.get(ns);
                for (name, old) in names {
                    if !new_names.is_some_and(|n| n.contains_key(name)) {
                        deltas.push(Delta::Deleted {
                            obj: old.clone(),
                            final_state_unknown: true,
                        });
                    }
                }
            }
            let indexes: HashMap<String, IndexValues> = g
                .funcs
                .iter()
                .map(|(n, f)| (n.clone(), build_index(&items, f)))
                .collect();
            (items, len, indexes)
        };
        let (old_items, old_indexes) = {
            let mut g = self.write();
            g.len = len;
            (
                std::mem::replace(&mut g.items, items),
                std::mem::replace(&mut g.indexes, indexes),
            )
        };
        // Free the old maps outside the lock.
        drop(old_items);
        drop(old_indexes);
        deltas
    }
}

/// A typed read API over a [`Store`] (client-go's listers): everything, one namespace,
/// label-selected, or by index. Returns shared `Arc<K>`s, never deep copies.
pub struct Lister<K> {
    store: Store<K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
        }
    }
}

impl<K> fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lister")
            .field("store", &self.store)
            .finish()
    }
}

impl<K: Resource> Lister<K> {
    /// A lister over `store`.
    pub fn new(store: Store<K>) -> Self {
        Self { store }
    }

    /// The underlying store.
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// Every object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.store.list()
    }

    /// Every object whose labels match `selector`.
    pub fn list_matching(&self, selector: &LabelSelector) -> Vec<Arc<K>> {
        if selector.is_empty() {
            return self.store.list();
        }
        self.store.list_filtered(|o| selector.matches(o.labels()))
    }

    /// The object with this key (`"ns/name"` or `"name"`).
    pub fn get_by_key<Q: AsObjectKey + ?Sized>(&self, key: &Q) -> Option<Arc<K>> {
        self.store.get_by_key(key)
    }

    /// A cluster-scoped object by name.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.store.get_by_name(None, name)
    }

    /// Objects whose index `index` contains `value`.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, StoreError> {
        self.store.by_index(index, value)
    }

    /// A view of one namespace.
    pub fn namespace(&self, namespace: &str) -> NamespaceLister<'_, K> {
        NamespaceLister {
            store: &self.store,
            namespace: namespace.to_string(),
        }
    }
}

/// A [`Lister`] restricted to one namespace (client-go's `<Kind>NamespaceLister`).
pub struct NamespaceLister<'a, K> {
    store: &'a Store<K>,
    namespace: String,
}

impl<K> fmt::Debug for NamespaceLister<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceLister")
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl<K: Resource> NamespaceLister<'_, K> {
    /// Every object in the namespace (served by the namespace index).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.store.list_namespace(&self.namespace)
    }

    /// Every object in the namespace whose labels match `selector`.
    pub fn list_matching(&self, selector: &LabelSelector) -> Vec<Arc<K>> {
        let g = self.store.read();
        g.items
            .get(&self.namespace)
            .map(|names| {
                names
                    .values()
                    .filter(|o| selector.matches(o.labels()))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The object named `name` in the namespace.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.store.get_by_name(Some(&self.namespace), name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kubewright_core::ObjectMeta;
    use std::collections::BTreeMap;

    pub(crate) fn cm(ns: &str, name: &str, rv: &str, labels: &[(&str, &str)]) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: (!ns.is_empty()).then(|| ns.to_string()),
                name: Some(name.to_string()),
                resource_version: Some(rv.to_string()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn label_index(key: &'static str) -> impl Fn(&ConfigMap) -> Vec<String> + Send + Sync {
        move |o: &ConfigMap| o.labels().get(key).cloned().into_iter().collect()
    }

    fn names(objs: &[Arc<ConfigMap>]) -> Vec<String> {
        let mut v: Vec<String> = objs
            .iter()
            .map(|o| ObjectKey::from_obj(&**o).to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn upsert_get_delete() {
        let s: Store<ConfigMap> = Store::new();
        assert!(s.is_empty());
        assert!(matches!(s.upsert(cm("a", "x", "1", &[])), Delta::Added(_)));
        let d = s.upsert(cm("a", "x", "2", &[]));
        assert!(
            matches!(&d, Delta::Updated { old, new } if old.metadata.resource_version.as_deref() == Some("1") && new.metadata.resource_version.as_deref() == Some("2"))
        );
        s.upsert(cm("", "cluster", "3", &[]));
        assert_eq!(s.len(), 2);
        assert!(s.get_by_key("a/x").is_some());
        assert!(s.get_by_key(&ObjectKey::parse("cluster")).is_some());
        assert!(s.get(&cm("a", "x", "9", &[])).is_some());
        let mut keys: Vec<String> = s.keys().iter().map(ToString::to_string).collect();
        keys.sort();
        assert_eq!(keys, vec!["a/x", "cluster"]);
        // The delete carries the event's object (final state), not the stored one.
        let d = s.delete(cm("a", "x", "5", &[])).unwrap();
        assert!(
            matches!(d, Delta::Deleted { obj, final_state_unknown: false } if obj.metadata.resource_version.as_deref() == Some("5"))
        );
        assert!(s.delete(cm("a", "x", "6", &[])).is_none());
        assert_eq!(s.len(), 1);
        assert!(s.list_namespace("a").is_empty());
        assert_eq!(s.index_values(NAMESPACE_INDEX).unwrap(), vec![""]);
    }

    #[test]
    fn store_shares_arcs_no_copies() {
        let s: Store<ConfigMap> = Store::new();
        let obj = cm("a", "x", "1", &[]);
        s.upsert(obj.clone());
        assert!(Arc::ptr_eq(&obj, &s.get_by_key("a/x").unwrap()));
        assert!(Arc::ptr_eq(&obj, &s.list()[0]));
        assert!(Arc::ptr_eq(
            &obj,
            &s.by_index(NAMESPACE_INDEX, "a").unwrap()[0]
        ));
    }

    #[test]
    fn indexers_follow_value_changes() {
        let s: Store<ConfigMap> = Store::new();
        s.add_indexer("team", label_index("team")).unwrap();
        assert_eq!(
            s.add_indexer("team", label_index("team")),
            Err(StoreError::IndexExists("team".into()))
        );
        assert_eq!(
            s.add_indexer(NAMESPACE_INDEX, label_index("x")),
            Err(StoreError::IndexExists(NAMESPACE_INDEX.into()))
        );
        s.upsert(cm("a", "x", "1", &[("team", "red")]));
        s.upsert(cm("a", "y", "1", &[("team", "red")]));
        s.upsert(cm("b", "z", "1", &[("team", "blue")]));
        assert_eq!(
            names(&s.by_index("team", "red").unwrap()),
            vec!["a/x", "a/y"]
        );
        // x moves from red to blue.
        s.upsert(cm("a", "x", "2", &[("team", "blue")]));
        assert_eq!(names(&s.by_index("team", "red").unwrap()), vec!["a/y"]);
        assert_eq!(
            names(&s.by_index("team", "blue").unwrap()),
            vec!["a/x", "b/z"]
        );
        // y loses the label: no value at all.
        s.upsert(cm("a", "y", "2", &[]));
        assert!(s.by_index("team", "red").unwrap().is_empty());
        let mut vals = s.index_values("team").unwrap();
        vals.sort();
        assert_eq!(vals, vec!["blue"]);
        s.delete(cm("b", "z", "3", &[("team", "blue")]));
        assert_eq!(names(&s.by_index("team", "blue").unwrap()), vec!["a/x"]);
        assert_eq!(
            s.index_keys("team", "blue").unwrap(),
            vec![ObjectKey::parse("a/x")]
        );
        assert_eq!(
            s.by_index("nope", "x").unwrap_err(),
            StoreError::UnknownIndex("nope".into())
        );
        // A relist rebuilds the index from the new contents.
        s.replace(vec![
            cm("a", "x", "2", &[("team", "blue")]),
            cm("c", "w", "4", &[("team", "red")]),
        ]);
        assert_eq!(names(&s.by_index("team", "red").unwrap()), vec!["c/w"]);
        assert_eq!(names(&s.by_index("team", "blue").unwrap()), vec!["a/x"]);
    }

    #[test]
    fn indexer_added_later_is_built_from_contents() {
        let s: Store<ConfigMap> = Store::new();
        for i in 0..10 {
            let team = if i % 2 == 0 { "even" } else { "odd" };
            s.upsert(cm("a", &format!("o{i}"), "1", &[("team", team)]));
        }
        s.add_indexer("team", label_index("team")).unwrap();
        assert_eq!(s.by_index("team", "even").unwrap().len(), 5);
        assert_eq!(s.by_index("team", "odd").unwrap().len(), 5);
        assert_eq!(s.index_names(), vec![NAMESPACE_INDEX, "team"]);
    }

    #[test]
    fn replace_reports_final_state_unknown_deletes() {
        let s: Store<ConfigMap> = Store::new();
        let kept = cm("a", "kept", "1", &[]);
        s.upsert(kept.clone());
        s.upsert(cm("a", "changed", "1", &[]));
        s.upsert(cm("a", "gone", "7", &[("last", "known")]));
        let deltas = s.replace(vec![
            cm("a", "kept", "1", &[]),
            cm("a", "changed", "2", &[]),
            cm("b", "new", "3", &[]),
        ]);
        let rendered: Vec<String> = deltas.iter().map(|d| format!("{d:?}")).collect();
        assert_eq!(
            rendered,
            vec![
                "Updated(a/changed@1 -> a/changed@2)",
                "Added(b/new@3)",
                "Deleted(a/gone@7, final_state_unknown: true)"
            ]
        );
        match &deltas[2] {
            Delta::Deleted { obj, .. } => assert_eq!(obj.labels()["last"], "known"),
            other => panic!("{other:?}"),
        }
        // Unchanged objects keep their Arc.
        assert!(Arc::ptr_eq(&kept, &s.get_by_key("a/kept").unwrap()));
        assert_eq!(s.len(), 3);
        assert_eq!(names(&s.list()), vec!["a/changed", "a/kept", "b/new"]);
        assert!(s.replace(vec![]).len() == 3 && s.is_empty());
    }

    #[test]
    fn replace_is_atomic_for_readers() {
        let s: Store<ConfigMap> = Store::new();
        s.add_indexer("gen", label_index("gen")).unwrap();
        let generation = |g: usize| -> Vec<Arc<ConfigMap>> {
            let gen_label = g.to_string();
            (0..500)
                .map(|i| {
                    cm(
                        &format!("ns{}", i % 7),
                        &format!("o{i}"),
                        &g.to_string(),
                        &[("gen", gen_label.as_str())],
                    )
                })
                .collect()
        };
        s.replace(generation(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let s = s.clone();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut checks = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) || checks < 50 {
                        let all = s.list();
                        assert_eq!(all.len(), 500, "a reader saw a partial relist");
                        let g = all[0].labels()["gen"].clone();
                        assert!(
                            all.iter().all(|o| o.labels()["gen"] == g),
                            "mixed generations"
                        );
                        assert_eq!(s.len(), 500);
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        for g in 1..40 {
            let deltas = s.replace(generation(g));
            assert_eq!(deltas.len(), 500);
            assert!(deltas.iter().all(|d| matches!(d, Delta::Updated { .. })));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() >= 50);
        }
        assert_eq!(s.by_index("gen", "39").unwrap().len(), 500);
        assert!(s.by_index("gen", "38").unwrap().is_empty());
    }

    #[test]
    fn lister_selectors_and_namespaces() {
        let s: Store<ConfigMap> = Store::new();
        s.upsert(cm("a", "web-1", "1", &[("app", "web"), ("tier", "fe")]));
        s.upsert(cm("a", "web-2", "1", &[("app", "web")]));
        s.upsert(cm("b", "web-3", "1", &[("app", "web"), ("tier", "fe")]));
        s.upsert(cm("b", "db", "1", &[("app", "db")]));
        s.upsert(cm("", "global", "1", &[]));
        let l = s.lister();
        let sel = |t: &str| LabelSelector::parse(t).unwrap();
        assert_eq!(l.list().len(), 5);
        assert_eq!(l.list_matching(&sel("")).len(), 5);
        assert_eq!(
            names(&l.list_matching(&sel("app=web,tier=fe"))),
            vec!["a/web-1", "b/web-3"]
        );
        assert_eq!(
            names(&l.list_matching(&sel("app in (db),!tier"))),
            vec!["b/db"]
        );
        assert_eq!(
            names(&l.list_matching(&sel("tier!=fe,app"))),
            vec!["a/web-2", "b/db"]
        );
        assert_eq!(names(&l.namespace("a").list()), vec!["a/web-1", "a/web-2"]);
        assert_eq!(
            names(&l.namespace("b").list_matching(&sel("app=web"))),
            vec!["b/web-3"]
        );
        assert!(l.namespace("c").list().is_empty());
        assert!(l.namespace("b").get("db").is_some());
        assert!(l.namespace("a").get("db").is_none());
        assert!(l.get("global").is_some());
        assert!(l.get_by_key("b/db").is_some());
        assert_eq!(l.by_index(NAMESPACE_INDEX, "b").unwrap().len(), 2);
    }
}
