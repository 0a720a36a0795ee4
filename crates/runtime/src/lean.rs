//! Lean caches: objects kept in their compact encoded form and decoded on read.
//!
//! A decoded k8s-openapi `Pod` takes ~40 KB of heap, most of it the inline layout of the
//! many `Option` fields of `PodSpec`, `Container` and `Volume`; its protobuf message,
//! without `managedFields`, is a few KB. An informer of [`Lean<K>`] instead of `K`
//! caches each object as that message (JSON for kinds without protobuf, e.g. custom
//! resources) plus the metadata that keys, selectors and owner lookups need, and decodes
//! the full object only when it is asked for. Everything else is the same informer:
//! the same store, indexes, listers, handlers and controllers.
//!
//! * An arriving protobuf object is not decoded: only its metadata is read, and its
//!   message is kept without `managedFields`. (JSON arrivals are decoded and re-encoded
//!   compactly.)
//! * [`Lean::object`] decodes (tens of µs for a pod, see docs/performance.md); a small
//!   process-wide cache keeps recently decoded objects, so a reconciler that reads the
//!   object its handler read gets it without decoding it again. An object that arrived
//!   recently is kept on its first read; an older one only on its second, so reads
//!   spread over many cold objects (a scan, a periodic resync) do not churn the cache.
//! * [`Resource::meta`] of a `Lean<K>` has the name, namespace, uid, resourceVersion,
//!   generation, creation and deletion timestamps, labels, owner references and
//!   finalizers; annotations and `managedFields` are not kept there (annotations are in
//!   the object).
//! * Index functions run when an object arrives; they may read [`Lean::object`].
//! * Listing everything decodes everything: iterate and decode only what you need.
//!
//! ```no_run
//! # async fn run(client: kubewright_client::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::Pod;
//! use kubewright_runtime::factory::{InformerParams, SharedInformerFactory};
//! use kubewright_runtime::lean::Lean;
//!
//! let factory = SharedInformerFactory::new(client);
//! let pods = factory.informer::<Lean<Pod>>(InformerParams::default());
//! factory.start();
//! factory.wait_for_cache_sync(std::time::Duration::from_secs(60)).await?;
//! if let Some(p) = pods.store().get_by_name(Some("default"), "web-0") {
//!     let pod = p.object()?; // Arc<Pod>, decoded on demand
//!     println!("{:?}", pod.spec.as_ref().map(|s| &s.node_name));
//! }
//! # Ok(()) }
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewright_core::Resource;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::any::Any;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// Why a lean object could not be decoded. Its bytes came from the API server, whose
/// envelope and metadata were checked on arrival; the rest of the message is checked
/// when it is first decoded.
#[derive(Debug, thiserror::Error)]
pub enum LeanError {
    /// The protobuf message did not decode.
    #[error("lean object: {0}")]
    Protobuf(#[from] kubewright_proto::Error),
    /// The JSON did not decode.
    #[error("lean object: {0}")]
    Json(#[from] serde_json::Error),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Protobuf,
    Json,
}

/// An object cached in its compact encoded form; see the [module docs](self).
pub struct Lean<K> {
    id: u64,
    meta: ObjectMeta,
    bytes: Arc<[u8]>,
    format: Format,
    _k: PhantomData<fn() -> K>,
}

impl<K> Clone for Lean<K> {
    fn clone(&self) -> Self {
        Self {
            id: self.id,
            meta: self.meta.clone(),
            bytes: self.bytes.clone(),
            format: self.format,
            _k: PhantomData,
        }
    }
}

impl<K> fmt::Debug for Lean<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lean")
            .field("namespace", &self.meta.namespace)
            .field("name", &self.meta.name)
            .field("resource_version", &self.meta.resource_version)
            .field("format", &self.format)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Default number of decoded objects kept by [`Lean`]'s process-wide cache.
pub const DEFAULT_DECODED_CACHE: usize = 256;

static CAPACITY: AtomicUsize = AtomicUsize::new(DEFAULT_DECODED_CACHE);

/// The most recently decoded objects of every lean type, by object id (FIFO), and the
/// admission doorkeeper for objects read cold (see [`Decoded::admits`]).
#[derive(Default)]
struct Decoded {
    map: HashMap<u64, Arc<dyn Any + Send + Sync>>,
    order: VecDeque<u64>,
    /// Ids of cold objects read once and not admitted, one per slot (`id % len`).
    seen: Vec<u64>,
}

/// Objects created among the last `RECENT × capacity` lean objects count as recent.
const RECENT: u64 = 4;
/// Doorkeeper slots per cached object.
const SEEN_PER_ENTRY: usize = 2;

impl Decoded {
    /// Whether a decoded object read on a cache miss is worth keeping. A recent object
    /// (what a handler and then its reconciler read) is kept on its first read; an older
    /// one on its second read while the doorkeeper still remembers the first. A scan or
    /// random reads over many cold objects then leave the cache alone instead of
    /// evicting (and freeing) a decoded object on every read.
    fn admits(&mut self, id: u64, cap: usize) -> bool {
        let newest = NEXT_ID.load(Ordering::Relaxed);
        if newest.saturating_sub(id) <= RECENT * cap as u64 {
            return true;
        }
        let slots = cap * SEEN_PER_ENTRY;
        if self.seen.len() != slots {
            self.seen = vec![0; slots];
        }
        let slot = &mut self.seen[(id % slots as u64) as usize];
        if *slot == id {
            *slot = 0;
            true
        } else {
            *slot = id;
            false
        }
    }

    fn insert(
        &mut self,
        id: u64,
        obj: Arc<dyn Any + Send + Sync>,
        cap: usize,
    ) -> Vec<Arc<dyn Any + Send + Sync>> {
        if self.map.insert(id, obj).is_none() {
            self.order.push_back(id);
        }
        self.evict_to(cap)
    }

    /// Drops the oldest objects beyond `cap`, returned to be freed outside the lock.
    fn evict_to(&mut self, cap: usize) -> Vec<Arc<dyn Any + Send + Sync>> {
        let mut evicted = Vec::new();
        while self.order.len() > cap {
            if let Some(old) = self.order.pop_front()
                && let Some(o) = self.map.remove(&old)
            {
                evicted.push(o);
            }
        }
        evicted
    }
}

static DECODED: LazyLock<Mutex<Decoded>> = LazyLock::new(Mutex::default);

fn decoded() -> std::sync::MutexGuard<'static, Decoded> {
    DECODED.lock().unwrap_or_else(|e| e.into_inner())
}

/// How a decoded object enters the cache.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Decoded on arrival (JSON): kept.
    Always,
    /// Decoded on a read that missed: kept if [`Decoded::admits`] it.
    IfAdmitted,
}

fn remember(id: u64, obj: Arc<dyn Any + Send + Sync>, keep: Keep) {
    let cap = CAPACITY.load(Ordering::Relaxed);
    if cap == 0 {
        return;
    }
    let evicted = {
        let mut d = decoded();
        if keep == Keep::IfAdmitted && !d.admits(id, cap) {
            return;
        }
        d.insert(id, obj, cap)
    };
    // Freed after the lock is released: other readers do not wait for it.
    drop(evicted);
}

/// Sets how many decoded objects the process-wide cache keeps (default
/// [`DEFAULT_DECODED_CACHE`]; 0 turns it off).
pub fn set_decoded_cache_capacity(n: usize) {
    CAPACITY.store(n, Ordering::Relaxed);
    let evicted = {
        let mut d = decoded();
        d.seen.clear();
        d.evict_to(n)
    };
    drop(evicted);
}

/// The metadata a lean object keeps at hand.
fn trimmed(m: ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        generation: m.generation,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        labels: m.labels,
        owner_references: m.owner_references,
        finalizers: m.finalizers,
        ..Default::default()
    }
}

impl<K> Lean<K>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
{
    /// A decoded object (kept in the cache of decoded objects) and its encoding.
    fn new(obj: K, bytes: Vec<u8>, format: Format) -> Self {
        let lean = Self::encoded(obj.meta().clone(), bytes, format);
        remember(lean.id, Arc::new(obj), Keep::Always);
        lean
    }

    /// A lean copy of a decoded object (stored as JSON without `managedFields`).
    pub fn from_object(mut obj: K) -> Result<Self, LeanError>
    where
        K: Serialize,
    {
        obj.meta_mut().managed_fields = None;
        let bytes = serde_json::to_vec(&obj)?;
        Ok(Self::new(obj, bytes, Format::Json))
    }

    /// The decoded object: from the cache of recently decoded objects, else decoded now
    /// (and kept if the object is recent or was read shortly before; see the
    /// [module docs](self)).
    pub fn object(&self) -> Result<Arc<K>, LeanError> {
        let hit = decoded().map.get(&self.id).cloned();
        if let Some(hit) = hit
            && let Ok(obj) = hit.downcast::<K>()
        {
            return Ok(obj);
        }
        let obj = Arc::new(self.decode()?);
        remember(self.id, obj.clone(), Keep::IfAdmitted);
        Ok(obj)
    }

    /// Decodes the object, bypassing the cache.
    pub fn decode(&self) -> Result<K, LeanError> {
        Ok(match self.format {
            Format::Protobuf => {
                let dt = K::DynamicType::default();
                kubewright_proto::from_raw(&K::api_version(&dt), &K::kind(&dt), &self.bytes)?
            }
            Format::Json => serde_json::from_slice(&self.bytes)?,
        })
    }
}

impl<K> Lean<K> {
    /// An encoded object and its metadata.
    fn encoded(meta: ObjectMeta, bytes: Vec<u8>, format: Format) -> Self {
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            meta: trimmed(meta),
            bytes: bytes.into(),
            format,
            _k: PhantomData,
        }
    }

    /// Bytes held for the encoded object.
    pub fn encoded_len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the object is held as protobuf (else JSON).
    pub fn is_protobuf(&self) -> bool {
        self.format == Format::Protobuf
    }
}

impl<K: Resource> Resource for Lean<K> {
    type DynamicType = K::DynamicType;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn scope(dt: &Self::DynamicType) -> kubewright_core::Scope {
        K::scope(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    /// The kept metadata (see the [module docs](self)).
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    /// The kept metadata; changing it does not change the encoded object.
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

impl<'de, K> Deserialize<'de> for Lean<K>
where
    K: Resource + DeserializeOwned + Serialize + Send + Sync + 'static,
    K::DynamicType: Default,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_newtype_struct(kubewright_proto::RAW_MESSAGE, LeanVisitor(PhantomData))
    }
}

struct LeanVisitor<K>(PhantomData<fn() -> K>);

impl<'de, K> Visitor<'de> for LeanVisitor<K>
where
    K: Resource + DeserializeOwned + Serialize + Send + Sync + 'static,
    K::DynamicType: Default,
{
    type Value = Lean<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    /// Protobuf: the object's message, kept without `managedFields`. Only its metadata
    /// is decoded now.
    fn visit_bytes<E: de::Error>(self, raw: &[u8]) -> Result<Self::Value, E> {
        let dt = K::DynamicType::default();
        let bytes = kubewright_proto::strip_managed_fields(raw).map_err(E::custom)?;
        let meta: ObjectMeta =
            kubewright_proto::metadata_from_raw(&K::api_version(&dt), &K::kind(&dt), &bytes)
                .map_err(E::custom)?;
        Ok(Lean::encoded(meta, bytes, Format::Protobuf))
    }

    /// Any other format (JSON): the object, kept as compact JSON without
    /// `managedFields`.
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let mut obj = K::deserialize(d)?;
        obj.meta_mut().managed_fields = None;
        let bytes = serde_json::to_vec(&obj).map_err(de::Error::custom)?;
        Ok(Lean::new(obj, bytes, Format::Json))
    }
}

impl<K> Serialize for Lean<K>
where
    K: Resource + DeserializeOwned + Serialize + Send + Sync + 'static,
    K::DynamicType: Default,
{
    /// Serializes the decoded object.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.object()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn pod_json() -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "5", "uid": "u",
                "labels": {"a": "b"}, "annotations": {"n": "x"},
                "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"limits": {"cpu": "1"}}}]}})
    }

    #[test]
    fn protobuf_objects_are_kept_encoded_without_managed_fields() {
        let body = kubewright_proto::encode(&pod_json()).unwrap();
        let lean: Lean<Pod> = kubewright_proto::from_slice(&body).unwrap();
        assert!(lean.is_protobuf());
        assert!(lean.encoded_len() < body.len());
        assert_eq!(lean.meta().labels.as_ref().unwrap()["a"], "b");
        assert!(lean.meta().annotations.is_none() && lean.meta().managed_fields.is_none());
        let pod = lean.decode().unwrap();
        assert!(pod.metadata.managed_fields.is_none());
        assert_eq!(pod.metadata.annotations.as_ref().unwrap()["n"], "x");
        let mut want: Pod = serde_json::from_value(pod_json()).unwrap();
        want.metadata.managed_fields = None;
        assert_eq!(pod, want);
        // The first read fills the shared cache: the same Arc comes back twice.
        let (a, b) = (lean.object().unwrap(), lean.object().unwrap());
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn json_objects_are_kept_as_compact_json() {
        let lean: Lean<Pod> = serde_json::from_value(pod_json()).unwrap();
        assert!(!lean.is_protobuf());
        let pod = lean.decode().unwrap();
        assert!(pod.metadata.managed_fields.is_none());
        assert_eq!(pod.spec.as_ref().unwrap().containers[0].name, "c");
        let again = Lean::from_object(pod.clone()).unwrap();
        assert_eq!(again.decode().unwrap(), pod);
        // Serializing a lean object gives the decoded object.
        assert_eq!(
            serde_json::to_value(&lean).unwrap()["metadata"]["annotations"]["n"],
            "x"
        );
    }

    #[test]
    fn cold_objects_are_kept_on_their_second_read() {
        let body = kubewright_proto::encode(&pod_json()).unwrap();
        let cold: Lean<Pod> = kubewright_proto::from_slice(&body).unwrap();
        // Enough newer objects that `cold` is no longer recent.
        let newer = RECENT as usize * CAPACITY.load(Ordering::Relaxed) + 1;
        let _newer: Vec<Lean<Pod>> = (0..newer)
            .map(|_| Lean::encoded(ObjectMeta::default(), Vec::new(), Format::Json))
            .collect();
        let first = cold.object().unwrap();
        let second = cold.object().unwrap();
        assert!(
            !Arc::ptr_eq(&first, &second),
            "a cold object's first read is not kept"
        );
        let third = cold.object().unwrap();
        assert!(Arc::ptr_eq(&second, &third), "its second read is");
    }

    #[test]
    fn garbage_is_a_typed_error() {
        let body = kubewright_proto::encode(&pod_json()).unwrap();
        assert!(kubewright_proto::from_slice::<Lean<Pod>>(&body[..body.len() - 10]).is_err());
        assert!(serde_json::from_str::<Lean<Pod>>("{\"metadata\": 3}").is_err());
    }
}
