//! Controller toolkit: work queues and rate limiters, reflector, store, informers.
//!
//! * [`reflector`]: list then watch one resource into a [`Store`], with resumption,
//!   bookmarks, relist on 410, backoff and streaming lists; also a raw [`Delta`] stream.
//! * [`store`]: the thread-safe cache of `Arc<K>` with indexes, and [`Lister`].
//! * [`informer`]: a reflector plus event handlers, each in its own task.
//! * [`factory`]: [`SharedInformerFactory`], one informer per resource and selectors.
//! * [`workqueue`]: client-go's work queues and rate limiters.

pub mod events;
pub mod factory;
pub mod finalizer;
pub mod informer;
pub mod leaderelection;
pub mod owner;
pub mod reflector;
pub mod store;
pub mod workqueue;

pub use factory::{CacheSyncError, InformerParams, SharedInformerFactory};
pub use informer::{EventHandler, HandlerFuncs, HandlerRegistration, Informer};
pub use reflector::{
    InitialList, ListWatch, MetadataOnly, Reflector, ReflectorConfig, strip_managed_fields,
};
pub use store::{Delta, Lister, NAMESPACE_INDEX, Store};
