//! Controller toolkit: work queues and rate limiters, reflector, store, informers.

pub mod workqueue;
