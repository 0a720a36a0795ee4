//! What a reconcile returns ([`Action`]) and what reconciles ([`Reconciler`]).

use kubewright_core::ObjectKey;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// When the controller should look at an object again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Requeue {
    /// Only when a watched object changes.
    #[default]
    No,
    /// After a fixed delay.
    After(Duration),
    /// After the per-key back-off of the controller's rate limiter.
    RateLimited,
}

/// What a reconcile asks the controller to do next with the object's key.
///
/// The default is [`Action::await_change`], so that helpers returning `T::default()`
/// (such as [`finalizer`](crate::finalizer::finalizer)) mean "done".
///
/// ```
/// use std::time::Duration;
/// use kubewright_runtime::controller::Action;
/// assert_eq!(Action::requeue(Duration::from_secs(30)).requeue_after(), Some(Duration::from_secs(30)));
/// assert_eq!(Action::await_change(), Action::default());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Action {
    pub(crate) requeue: Requeue,
}

impl Action {
    /// Reconcile again after `after` (controller-runtime's `RequeueAfter`), even if
    /// nothing changes. The key's error back-off is reset. A change of a watched object
    /// still triggers an earlier reconcile.
    pub fn requeue(after: Duration) -> Self {
        Self {
            requeue: Requeue::After(after),
        }
    }

    /// Reconcile again only when a watched object changes.
    pub fn await_change() -> Self {
        Self {
            requeue: Requeue::No,
        }
    }

    /// Reconcile again after the key's exponential back-off, as after an error, but
    /// without counting an error (controller-runtime's `Requeue: true`).
    pub fn requeue_with_backoff() -> Self {
        Self {
            requeue: Requeue::RateLimited,
        }
    }

    /// The fixed delay of [`Action::requeue`], if that is what this is.
    pub fn requeue_after(&self) -> Option<Duration> {
        match self.requeue {
            Requeue::After(d) => Some(d),
            _ => None,
        }
    }

    /// Whether this is [`Action::await_change`].
    pub fn is_await_change(&self) -> bool {
        self.requeue == Requeue::No
    }

    /// Whether this is [`Action::requeue_with_backoff`].
    pub fn is_requeue_with_backoff(&self) -> bool {
        self.requeue == Requeue::RateLimited
    }
}

/// Brings the world in line with one object: controller-runtime's `Reconciler`.
///
/// Any `Fn(Arc<K>, Arc<C>) -> impl Future<Output = Result<Action, E>>` is a reconciler
/// (`E` only needs [`Display`](fmt::Display), so `anyhow::Error` works too). Implement
/// the trait on a type of your own to also override [`error_policy`](Self::error_policy)
/// or [`on_missing`](Self::on_missing), or wrap a closure with
/// [`with_error_policy`](Self::with_error_policy) / [`with_on_missing`](Self::with_on_missing).
///
/// The object is the one in the informer cache (never re-read from the API server), and
/// the controller guarantees that one key is never reconciled by two workers at once.
pub trait Reconciler<K, C>: Send + Sync + 'static {
    /// The error of a failed reconcile.
    type Error: fmt::Display + Send + 'static;

    /// Reconciles `obj`.
    fn reconcile(
        &self,
        obj: Arc<K>,
        ctx: Arc<C>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// Decides what happens after `reconcile` failed. The default retries after the key's
    /// exponential back-off ([`Action::requeue_with_backoff`]), like controller-runtime.
    fn error_policy(&self, obj: &Arc<K>, error: &Self::Error, ctx: &C) -> Action {
        let _ = (obj, error, ctx);
        Action::requeue_with_backoff()
    }

    /// Called instead of `reconcile` when the key's object is no longer in the cache (it
    /// was deleted). The default does nothing: use owner references or a
    /// [finalizer](crate::finalizer) to clean up after deleted objects.
    fn on_missing(&self, key: ObjectKey, ctx: Arc<C>) -> impl Future<Output = ()> + Send {
        let _ = (key, ctx);
        async {}
    }

    /// This reconciler with `policy` as its [`error_policy`](Self::error_policy).
    fn with_error_policy<P>(self, policy: P) -> WithErrorPolicy<Self, P>
    where
        Self: Sized,
        P: Fn(&Arc<K>, &Self::Error, &C) -> Action + Send + Sync + 'static,
    {
        WithErrorPolicy {
            inner: self,
            policy,
        }
    }

    /// This reconciler with `hook` as its [`on_missing`](Self::on_missing).
    fn with_on_missing<F, Fut>(self, hook: F) -> WithOnMissing<Self, F>
    where
        Self: Sized,
        F: Fn(ObjectKey, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send,
    {
        WithOnMissing { inner: self, hook }
    }
}

impl<K, C, F, Fut, E> Reconciler<K, C> for F
where
    K: Send + Sync + 'static,
    C: Send + Sync + 'static,
    F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send,
    E: fmt::Display + Send + 'static,
{
    type Error = E;

    fn reconcile(
        &self,
        obj: Arc<K>,
        ctx: Arc<C>,
    ) -> impl Future<Output = Result<Action, E>> + Send {
        self(obj, ctx)
    }
}

/// A reconciler with a custom error policy; see [`Reconciler::with_error_policy`].
#[derive(Clone, Debug)]
pub struct WithErrorPolicy<R, P> {
    inner: R,
    policy: P,
}

impl<K, C, R, P> Reconciler<K, C> for WithErrorPolicy<R, P>
where
    K: Send + Sync + 'static,
    C: Send + Sync + 'static,
    R: Reconciler<K, C>,
    P: Fn(&Arc<K>, &R::Error, &C) -> Action + Send + Sync + 'static,
{
    type Error = R::Error;

    fn reconcile(
        &self,
        obj: Arc<K>,
        ctx: Arc<C>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        self.inner.reconcile(obj, ctx)
    }

    fn error_policy(&self, obj: &Arc<K>, error: &Self::Error, ctx: &C) -> Action {
        (self.policy)(obj, error, ctx)
    }

    fn on_missing(&self, key: ObjectKey, ctx: Arc<C>) -> impl Future<Output = ()> + Send {
        self.inner.on_missing(key, ctx)
    }
}

/// A reconciler with a hook for deleted objects; see [`Reconciler::with_on_missing`].
#[derive(Clone, Debug)]
pub struct WithOnMissing<R, F> {
    inner: R,
    hook: F,
}

impl<K, C, R, F, Fut> Reconciler<K, C> for WithOnMissing<R, F>
where
    K: Send + Sync + 'static,
    C: Send + Sync + 'static,
    R: Reconciler<K, C>,
    F: Fn(ObjectKey, Arc<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    type Error = R::Error;

    fn reconcile(
        &self,
        obj: Arc<K>,
        ctx: Arc<C>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        self.inner.reconcile(obj, ctx)
    }

    fn error_policy(&self, obj: &Arc<K>, error: &Self::Error, ctx: &C) -> Action {
        self.inner.error_policy(obj, error, ctx)
    }

    fn on_missing(&self, key: ObjectKey, ctx: Arc<C>) -> impl Future<Output = ()> + Send {
        (self.hook)(key, ctx)
    }
}
