//! Controller toolkit: work queues and rate limiters, reflector, store, informers.
//!
//! * [`reflector`]: list then watch one resource into a [`Store`], with resumption,
//!   bookmarks, relist on 410, backoff and streaming lists; also a raw [`Delta`] stream.
//! * [`store`]: the thread-safe cache of `Arc<K>` with indexes, and [`Lister`].
//! * [`informer`]: a reflector plus event handlers, each in its own task.
//! * [`factory`]: [`SharedInformerFactory`], one informer per resource and selectors.
//! * [`workqueue`]: client-go's work queues and rate limiters.
//! * [`controller`]: [`Controller`], [`Reconciler`] and [`Action`]: informers -> queue ->
//!   workers, with predicates, owner mappings, back-off, panics caught, graceful shutdown.
//! * [`manager`]: [`Manager`], several controllers with one client, informer factory,
//!   metrics registry and leader election, plus the `/metrics`, `/healthz`, `/readyz`
//!   endpoints ([`metrics`], [`health`]).
//! * [`multicluster`]: [`Fleet`](multicluster::Fleet) and
//!   [`MultiClusterController`](multicluster::MultiClusterController), one controller over
//!   clusters engaged and disengaged at run time.

pub mod controller;
pub mod events;
pub mod factory;
pub mod finalizer;
pub mod health;
pub mod informer;
pub mod leaderelection;
pub mod lean;
pub mod manager;
pub mod metrics;
pub mod multicluster;
pub mod owner;
pub mod reflector;
pub mod store;
pub mod wait;
pub mod webhook;
pub mod workqueue;

pub use controller::{Action, Controller, Predicate, Reconciler, Source};
pub use factory::{CacheSyncError, InformerParams, InformerThreads, SharedInformerFactory};
pub use informer::{EventHandler, HandlerFuncs, HandlerRegistration, Informer};
pub use manager::{LeaderElection, Manager, ManagerBuilder, ManagerError};
pub use reflector::{
    InitialList, ListWatch, MetadataOnly, Reflector, ReflectorConfig, strip_managed_fields,
};
pub use store::{Delta, Lister, NAMESPACE_INDEX, Store};
/// The token [`Manager::run`] and the other `run` methods stop on (tokio-util's), so
/// that callers need not depend on `tokio-util` themselves.
pub use tokio_util::sync::CancellationToken;
