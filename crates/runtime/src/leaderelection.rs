//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! `tools/leaderelection` semantics.
//!
//! Candidates share one lock (a [`LeaseLock`], or any [`ResourceLock`]). A candidate
//! acquires the lock when it is free (no holder) or expired, the leader renews it every
//! [`retry_period`](LeaderElectionConfig::retry_period), and a leader that could not renew
//! within [`renew_deadline`](LeaderElectionConfig::renew_deadline) steps down:
//!
//! * **Expiry is judged on the local clock.** A candidate never trusts the `renewTime`
//!   written by another machine: it notes *when it observed* the lease record change and
//!   considers the lease expired `leaseDurationSeconds` after that (client-go's
//!   `observedTime`). Clock skew between machines does not matter, only clock rates.
//! * **Optimistic concurrency.** Every write is a PUT carrying the resourceVersion of the
//!   lease read before (a 409 means someone else wrote first); a missing lease is created
//!   (a 409 means another candidate created it first).
//! * **Stepping down.** The deadline runs from the moment the last *successful* renewal
//!   was *sent*, so a leader always stops before any candidate can consider the lease
//!   expired (`renew_deadline < lease_duration`), even while a request hangs. A leader
//!   that sees another holder in the lease steps down at once.
//! * `leaseTransitions` is incremented whenever the holder changes; `acquireTime` is kept
//!   across renewals.
//! * **Release.** With [`release_on_cancel`](LeaderElectionConfig::release_on_cancel), a
//!   leader that stops clears `holderIdentity` and sets `leaseDurationSeconds: 1` so that
//!   the next candidate takes over at its next attempt instead of waiting for expiry.
//!
//! Timing follows client-go: candidates retry every `retry_period` with a jitter of up to
//! [`JITTER_FACTOR`] × `retry_period` (and additionally wake up exactly when the lease
//! they watch expires); the configuration must satisfy
//! `lease_duration > renew_deadline > JITTER_FACTOR × retry_period`.
//!
//! All time is [`tokio::time`], so tests can run with a paused clock.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use kubewright_runtime::leaderelection::{LeaderElector, LeaseLock};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run(client: kubewright_client::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let identity = std::env::var("POD_NAME").unwrap_or_else(|_| "dev".into());
//! let lock = LeaseLock::new(client, "kube-system", "my-controller", identity);
//! let elector = LeaderElector::builder(lock)
//!     .lease_duration(Duration::from_secs(15))
//!     .renew_deadline(Duration::from_secs(10))
//!     .retry_period(Duration::from_secs(2))
//!     .release_on_cancel(true)
//!     .on_started_leading(|leading: CancellationToken| async move {
//!         // Do the leader's work until `leading` is cancelled.
//!         leading.cancelled().await;
//!     })
//!     .on_stopped_leading(|| eprintln!("stopped leading"))
//!     .on_new_leader(|id| eprintln!("new leader: {id}"))
//!     .build()?;
//!
//! let shutdown = CancellationToken::new();
//! // e.g. cancel `shutdown` on SIGTERM; health checks can call `elector.check(..)`.
//! let outcome = elector.run(shutdown.clone()).await;
//! eprintln!("leader election ended: {outcome:?}");
//! # Ok(()) }
//! ```

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kubewright_client::{Api, Client};
use kubewright_core::{ObjectMeta, PostParams};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

/// client-go's `JitterFactor`: candidates wait `retry_period × (1 + rand × 1.2)` between
/// attempts, and `renew_deadline` must exceed `retry_period × 1.2`.
pub const JITTER_FACTOR: f64 = 1.2;

/// The content of a leader election lock (client-go's `LeaderElectionRecord`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderElectionRecord {
    /// The holder; empty when the lock is free.
    pub holder_identity: String,
    /// How long, after a candidate observed the record change, the lease stays valid.
    pub lease_duration_seconds: i32,
    /// When the current holder acquired the lock.
    pub acquire_time: Option<MicroTime>,
    /// When the current holder last renewed the lock.
    pub renew_time: Option<MicroTime>,
    /// How many times the holder changed.
    pub leader_transitions: i32,
}

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaderElectionError {
    /// The configuration is invalid.
    #[error("invalid leader election configuration: {0}")]
    Config(#[from] ConfigError),
    /// A request to the API server failed.
    #[error("lock request failed: {0}")]
    Api(#[from] kubewright_client::Error),
    /// `update` was called before `get` or `create`.
    #[error("lock {0} is not initialized: call get or create first")]
    LockNotInitialized(String),
    /// A (custom) lock could not be reached.
    #[error("lock {lock} is unavailable: {reason}")]
    Unavailable {
        /// The lock.
        lock: String,
        /// Why.
        reason: String,
    },
    /// The health check failed: we believe we lead, but have not renewed for too long.
    #[error("failed election to renew leadership on lease {name}: last renewal {since:?} ago")]
    RenewalOverdue {
        /// The election's name.
        name: String,
        /// Time since the last successful renewal.
        since: Duration,
    },
}

/// Why a [`LeaderElectionConfig`] is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A duration is zero.
    #[error("{0} must be greater than zero")]
    NotPositive(&'static str),
    /// `lease_duration <= renew_deadline`.
    #[error(
        "lease_duration ({lease_duration:?}) must be greater than renew_deadline ({renew_deadline:?})"
    )]
    LeaseDurationNotAboveRenewDeadline {
        /// The lease duration.
        lease_duration: Duration,
        /// The renew deadline.
        renew_deadline: Duration,
    },
    /// `renew_deadline <= JITTER_FACTOR × retry_period`.
    #[error(
        "renew_deadline ({renew_deadline:?}) must be greater than retry_period ({retry_period:?}) × {JITTER_FACTOR}"
    )]
    RenewDeadlineNotAboveRetryPeriod {
        /// The renew deadline.
        renew_deadline: Duration,
        /// The retry period.
        retry_period: Duration,
    },
    /// The lock's identity is empty.
    #[error("the lock identity is empty")]
    EmptyIdentity,
}

/// Timing and behaviour of a [`LeaderElector`]; the defaults are client-go's
/// (15 s / 10 s / 2 s, no release).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// How long candidates wait, after observing the last change of the lease, before
    /// taking it over. Written to the lease in whole seconds (rounded up).
    pub lease_duration: Duration,
    /// A leader that could not renew for this long steps down.
    pub renew_deadline: Duration,
    /// How often the leader renews and candidates retry.
    pub retry_period: Duration,
    /// Release the lease when leadership ends, so the next candidate need not wait for
    /// it to expire.
    pub release_on_cancel: bool,
    /// A name for logs and health checks (default: the lock's description).
    pub name: Option<String>,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: false,
            name: None,
        }
    }
}

impl LeaderElectionConfig {
    /// Checks `lease_duration > renew_deadline > JITTER_FACTOR × retry_period > 0`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.lease_duration.is_zero() {
            return Err(ConfigError::NotPositive("lease_duration"));
        }
        if self.renew_deadline.is_zero() {
            return Err(ConfigError::NotPositive("renew_deadline"));
        }
        if self.retry_period.is_zero() {
            return Err(ConfigError::NotPositive("retry_period"));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseDurationNotAboveRenewDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(ConfigError::RenewDeadlineNotAboveRetryPeriod {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written to the lease: whole seconds, rounded up, so that
    /// candidates never wait less than this elector assumes.
    pub fn lease_duration_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs_f64().ceil();
        if secs >= f64::from(i32::MAX) {
            i32::MAX
        } else {
            // In range: checked above, and at least 1.
            (secs as i32).max(1)
        }
    }
}

/// The storage of a leader election record (client-go's `resourcelock.Interface`).
///
/// [`LeaseLock`] is the implementation for Leases; wrappers can add behaviour (e.g. fault
/// injection in tests). `update` must be conditional on the version read by the last
/// `get`, `create` or `update`.
pub trait ResourceLock: Send + Sync + 'static {
    /// The identity of this candidate.
    fn identity(&self) -> &str;
    /// A description for logs, e.g. `namespace/name`.
    fn describe(&self) -> String;
    /// Reads the record; `None` when the lock object does not exist.
    fn get(&self) -> BoxFuture<'_, Result<Option<LeaderElectionRecord>, LeaderElectionError>>;
    /// Creates the lock object with `record` (fails when it exists).
    fn create(
        &self,
        record: LeaderElectionRecord,
    ) -> BoxFuture<'_, Result<(), LeaderElectionError>>;
    /// Replaces the record, conditional on the version last read or written.
    fn update(
        &self,
        record: LeaderElectionRecord,
    ) -> BoxFuture<'_, Result<(), LeaderElectionError>>;
}

impl<L: ResourceLock + ?Sized> ResourceLock for Arc<L> {
    fn identity(&self) -> &str {
        (**self).identity()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn get(&self) -> BoxFuture<'_, Result<Option<LeaderElectionRecord>, LeaderElectionError>> {
        (**self).get()
    }
    fn create(
        &self,
        record: LeaderElectionRecord,
    ) -> BoxFuture<'_, Result<(), LeaderElectionError>> {
        (**self).create(record)
    }
    fn update(
        &self,
        record: LeaderElectionRecord,
    ) -> BoxFuture<'_, Result<(), LeaderElectionError>> {
        (**self).update(record)
    }
}

/// A [`ResourceLock`] on a `coordination.k8s.io/v1` Lease.
pub struct LeaseLock {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    cached: Mutex<Option<Lease>>,
}

impl std::fmt::Debug for LeaseLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseLock")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl LeaseLock {
    /// A lock on the Lease `namespace/name`, for the candidate `identity` (unique per
    /// process, e.g. pod name plus a random suffix).
    pub fn new(client: Client, namespace: &str, name: &str, identity: impl Into<String>) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.into(),
            cached: Mutex::new(None),
        }
    }

    /// The Lease as last read or written.
    pub fn lease(&self) -> Option<Lease> {
        self.cached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn store(&self, lease: Option<Lease>) {
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = lease;
    }
}

/// The record stored in a Lease.
pub fn record_from_lease(lease: &Lease) -> LeaderElectionRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaderElectionRecord {
        holder_identity: spec.holder_identity.unwrap_or_default(),
        lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
        acquire_time: spec.acquire_time,
        renew_time: spec.renew_time,
        leader_transitions: spec.lease_transitions.unwrap_or_default(),
    }
}

/// Writes `record` into a Lease spec, keeping the fields a record does not cover.
pub fn apply_record(spec: &mut LeaseSpec, record: &LeaderElectionRecord) {
    spec.holder_identity = Some(record.holder_identity.clone());
    spec.lease_duration_seconds = Some(record.lease_duration_seconds);
    spec.acquire_time = record.acquire_time.clone();
    spec.renew_time = record.renew_time.clone();
    spec.lease_transitions = Some(record.leader_transitions);
}

impl ResourceLock for LeaseLock {
    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn get(&self) -> BoxFuture<'_, Result<Option<LeaderElectionRecord>, LeaderElectionError>> {
        Box::pin(async move {
            let lease = self.api.get_opt(&self.name).await?;
            let record = lease.as_ref().map(record_from_lease);
            self.store(lease);
            Ok(record)
        })
    }

    fn create(
        &self,
        record: LeaderElectionRecord,
    ) -> BoxFuture<'_, Result<(), LeaderElectionError>> {
        Box::pin(async move {
            let mut spec = LeaseSpec::default();
            apply_record(&mut spec, &record);
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(self.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(spec),
            };
            let created = self.api.create(&PostParams::default(), &lease).await?;
            self.store(Some(created));
            Ok(())
        })
    }

    fn update(
        &self,
        record: LeaderElectionRecord,
    ) -> BoxFuture<'_, Result<(), LeaderElectionError>> {
        Box::pin(async move {
            let mut lease = self
                .lease()
                .ok_or_else(|| LeaderElectionError::LockNotInitialized(self.describe()))?;
            let mut spec = lease.spec.take().unwrap_or_default();
            apply_record(&mut spec, &record);
            lease.spec = Some(spec);
            // The cached resourceVersion makes the PUT conditional.
            let updated = self
                .api
                .replace(&self.name, &PostParams::default(), &lease)
                .await?;
            self.store(Some(updated));
            Ok(())
        })
    }
}

/// How [`LeaderElector::run`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// The cancellation token was cancelled (while a candidate or while leading).
    Cancelled,
    /// We led, then could not renew in time (or saw another holder) and stepped down.
    LeadershipLost,
    /// Another `run` of this elector is in progress.
    AlreadyRunning,
}

type StartedFn = Arc<dyn Fn(CancellationToken) -> BoxFuture<'static, ()> + Send + Sync>;
type StoppedFn = Arc<dyn Fn() + Send + Sync>;
type NewLeaderFn = Arc<dyn Fn(&str) + Send + Sync>;

/// Builds a [`LeaderElector`].
pub struct LeaderElectorBuilder {
    lock: Arc<dyn ResourceLock>,
    config: LeaderElectionConfig,
    started: Option<StartedFn>,
    stopped: Option<StoppedFn>,
    new_leader: Option<NewLeaderFn>,
}

impl std::fmt::Debug for LeaderElectorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElectorBuilder")
            .field("lock", &self.lock.describe())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl LeaderElectorBuilder {
    /// Replaces the whole configuration.
    #[must_use]
    pub fn config(mut self, config: LeaderElectionConfig) -> Self {
        self.config = config;
        self
    }
    /// Sets [`LeaderElectionConfig::lease_duration`].
    #[must_use]
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.config.lease_duration = d;
        self
    }
    /// Sets [`LeaderElectionConfig::renew_deadline`].
    #[must_use]
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.config.renew_deadline = d;
        self
    }
    /// Sets [`LeaderElectionConfig::retry_period`].
    #[must_use]
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.config.retry_period = d;
        self
    }
    /// Sets [`LeaderElectionConfig::release_on_cancel`].
    #[must_use]
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.config.release_on_cancel = release;
        self
    }
    /// Sets [`LeaderElectionConfig::name`].
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config.name = Some(name.into());
        self
    }
    /// Called when we become leader. The closure itself runs synchronously at that
    /// moment; the future it returns is spawned and should run the leader's work until
    /// the token is cancelled (leadership lost, or [`LeaderElector::run`] cancelled).
    ///
    /// When `run` is cancelled, the lease keeps being renewed until this future
    /// finishes, and only then is leadership given up (and the lease released), so the
    /// next leader never overlaps with work still in flight. When renewal fails, the token
    /// is cancelled at the renew deadline, whatever the future does. Either way `run` only
    /// returns once the future has finished, so it must honour the token.
    #[must_use]
    pub fn on_started_leading<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.started = Some(Arc::new(move |t| Box::pin(f(t))));
        self
    }
    /// Called (synchronously; must not block) when leadership ends, before the lease is
    /// released. Not called when we never led.
    #[must_use]
    pub fn on_stopped_leading(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.stopped = Some(Arc::new(f));
        self
    }
    /// Called (synchronously; must not block) when a new holder is observed, including
    /// ourselves.
    #[must_use]
    pub fn on_new_leader(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.new_leader = Some(Arc::new(f));
        self
    }
    /// Validates the configuration and builds the elector.
    pub fn build(self) -> Result<LeaderElector, LeaderElectionError> {
        self.config.validate()?;
        if self.lock.identity().is_empty() {
            return Err(ConfigError::EmptyIdentity.into());
        }
        let name = self
            .config
            .name
            .clone()
            .unwrap_or_else(|| self.lock.describe());
        let (leading, _) = watch::channel(false);
        Ok(LeaderElector {
            inner: Arc::new(Inner {
                lock: self.lock,
                config: self.config,
                name,
                started: self.started,
                stopped: self.stopped,
                new_leader: self.new_leader,
                state: Mutex::new(State::default()),
                leading,
                running: AtomicBool::new(false),
            }),
        })
    }
}

#[derive(Default)]
struct State {
    /// The record last read or written.
    observed: Option<LeaderElectionRecord>,
    /// When `observed` last changed, on our clock.
    observed_time: Option<Instant>,
    /// The last successful acquire or renew.
    last_renew: Option<Instant>,
    /// The holder last reported through `on_new_leader`.
    reported_leader: String,
}

struct Inner {
    lock: Arc<dyn ResourceLock>,
    config: LeaderElectionConfig,
    name: String,
    started: Option<StartedFn>,
    stopped: Option<StoppedFn>,
    new_leader: Option<NewLeaderFn>,
    state: Mutex<State>,
    leading: watch::Sender<bool>,
    running: AtomicBool,
}

/// Elects one leader among candidates sharing a lock (see the
/// [module documentation](self)). Cheap to clone; clones share state, so one clone can
/// [`run`](Self::run) while others query [`is_leader`](Self::is_leader) or
/// [`check`](Self::check).
#[derive(Clone)]
pub struct LeaderElector {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("name", &self.inner.name)
            .field("identity", &self.identity())
            .field("leading", &self.is_leader())
            .finish_non_exhaustive()
    }
}

fn micro_now() -> MicroTime {
    let now = Timestamp::now();
    MicroTime(Timestamp::from_microsecond(now.as_microsecond()).unwrap_or(now))
}

fn jittered(d: Duration, factor: f64) -> Duration {
    d + d.mul_f64(factor * rand::random::<f64>())
}

/// Waits for an optional task and clears it; pending forever when there is none.
async fn join_task(task: &mut Option<JoinHandle<()>>) {
    match task {
        Some(handle) => {
            if let Err(e) = handle.await
                && e.is_panic()
            {
                tracing::error!("the on_started_leading task panicked");
            }
            *task = None;
        }
        None => std::future::pending().await,
    }
}

impl LeaderElector {
    /// A builder over `lock` with the default configuration.
    pub fn builder(lock: impl ResourceLock) -> LeaderElectorBuilder {
        LeaderElectorBuilder {
            lock: Arc::new(lock),
            config: LeaderElectionConfig::default(),
            started: None,
            stopped: None,
            new_leader: None,
        }
    }

    /// Our identity.
    pub fn identity(&self) -> &str {
        self.inner.lock.identity()
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.inner.config
    }

    /// Whether we currently lead (between `on_started_leading` and `on_stopped_leading`).
    pub fn is_leader(&self) -> bool {
        *self.inner.leading.borrow()
    }

    /// A receiver of leadership changes (`true` while leading).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.inner.leading.subscribe()
    }

    /// The holder last observed in the lock (client-go's `GetLeader`).
    pub fn leader(&self) -> Option<String> {
        self.state()
            .observed
            .as_ref()
            .map(|r| r.holder_identity.clone())
            .filter(|h| !h.is_empty())
    }

    /// A health check (client-go's `HealthzAdaptor`): fails when we believe we lead but
    /// the last successful renewal is older than `lease_duration + max_tolerable_expiration`
    /// (e.g. the election task is stuck). Always succeeds while not leading.
    pub fn check(&self, max_tolerable_expiration: Duration) -> Result<(), LeaderElectionError> {
        if !self.is_leader() {
            return Ok(());
        }
        let Some(last) = self.state().last_renew else {
            return Ok(());
        };
        let since = last.elapsed();
        if since > self.inner.config.lease_duration + max_tolerable_expiration {
            return Err(LeaderElectionError::RenewalOverdue {
                name: self.inner.name.clone(),
                since,
            });
        }
        Ok(())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_me(&self, holder: &str) -> bool {
        holder == self.identity()
    }

    /// Whether the observed record names us as holder (client-go's `IsLeader`).
    fn observed_holder_is_me(&self) -> bool {
        self.state()
            .observed
            .as_ref()
            .is_some_and(|r| self.is_me(&r.holder_identity))
    }

    fn set_observed(&self, record: LeaderElectionRecord) {
        let mut st = self.state();
        st.observed = Some(record);
        st.observed_time = Some(Instant::now());
    }

    /// When the lease held by someone else expires on our clock.
    fn foreign_expiry(&self) -> Option<Instant> {
        let st = self.state();
        let r = st.observed.as_ref()?;
        if r.holder_identity.is_empty() || self.is_me(&r.holder_identity) {
            return None;
        }
        let secs = u64::try_from(r.lease_duration_seconds).unwrap_or(0);
        Some(st.observed_time? + Duration::from_secs(secs))
    }

    fn maybe_report_transition(&self) {
        let holder = {
            let mut st = self.state();
            let holder = st
                .observed
                .as_ref()
                .map(|r| r.holder_identity.clone())
                .unwrap_or_default();
            if holder == st.reported_leader {
                return;
            }
            st.reported_leader = holder.clone();
            holder
        };
        if holder.is_empty() {
            return;
        }
        tracing::info!(lock = %self.inner.name, leader = %holder, "new leader observed");
        if let Some(f) = &self.inner.new_leader {
            f(&holder);
        }
    }

    /// Conflicts are the normal outcome of a lost race; anything else is worth a warning.
    fn log_lock_error(&self, e: &LeaderElectionError, what: &str) {
        let race = matches!(e, LeaderElectionError::Api(api) if api.is_conflict() || api.is_already_exists());
        if race {
            tracing::debug!(lock = %self.inner.name, error = %e, "{what}");
        } else {
            tracing::warn!(lock = %self.inner.name, error = %e, "{what}");
        }
    }

    /// One attempt to acquire or renew (client-go's `tryAcquireOrRenew`).
    async fn try_acquire_or_renew(&self) -> bool {
        let lock = &self.inner.lock;
        let now = micro_now();
        let mut record = LeaderElectionRecord {
            holder_identity: self.identity().to_string(),
            lease_duration_seconds: self.inner.config.lease_duration_seconds(),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            leader_transitions: 0,
        };

        // 1. Fast path: the leader updates optimistically with the version it wrote last.
        let fast = {
            let st = self.state();
            match (&st.observed, st.observed_time) {
                (Some(obs), Some(t)) if self.is_me(&obs.holder_identity) => {
                    let secs = u64::try_from(obs.lease_duration_seconds).unwrap_or(0);
                    (t + Duration::from_secs(secs) > Instant::now())
                        .then(|| (obs.acquire_time.clone(), obs.leader_transitions))
                }
                _ => None,
            }
        };
        if let Some((acquire_time, transitions)) = fast {
            record.acquire_time = acquire_time;
            record.leader_transitions = transitions;
            match lock.update(record.clone()).await {
                Ok(()) => {
                    self.set_observed(record);
                    return true;
                }
                Err(e) => {
                    tracing::debug!(lock = %self.inner.name, error = %e, "optimistic renewal failed, falling back to the slow path");
                }
            }
        }

        // 2. Read the record, or create it.
        let old = match lock.get().await {
            Ok(Some(old)) => old,
            Ok(None) => {
                return match lock.create(record.clone()).await {
                    Ok(()) => {
                        self.set_observed(record);
                        true
                    }
                    Err(e) => {
                        self.log_lock_error(&e, "creating the lock failed");
                        false
                    }
                };
            }
            Err(e) => {
                self.log_lock_error(&e, "reading the lock failed");
                return false;
            }
        };

        // 3. Note when the record changed, on our clock; check holder and expiry.
        let observed_time = {
            let mut st = self.state();
            if st.observed.as_ref() != Some(&old) {
                st.observed = Some(old.clone());
                st.observed_time = Some(Instant::now());
            }
            st.observed_time.unwrap_or_else(Instant::now)
        };
        let secs = u64::try_from(old.lease_duration_seconds).unwrap_or(0);
        let expired = observed_time + Duration::from_secs(secs) < Instant::now();
        let mine = self.is_me(&old.holder_identity);
        if !old.holder_identity.is_empty() && !expired && !mine {
            tracing::trace!(lock = %self.inner.name, holder = %old.holder_identity, "lock is held and has not expired");
            return false;
        }

        // 4. Take over (or renew) with a conditional update.
        if mine {
            record.acquire_time = old.acquire_time.clone();
            record.leader_transitions = old.leader_transitions;
        } else {
            record.leader_transitions = old.leader_transitions.saturating_add(1);
        }
        match lock.update(record.clone()).await {
            Ok(()) => {
                self.set_observed(record);
                true
            }
            Err(e) => {
                self.log_lock_error(&e, "updating the lock failed");
                false
            }
        }
    }

    /// Retries until the lock is acquired; returns when the successful attempt was sent,
    /// or `None` when cancelled.
    async fn acquire(&self, cancel: &CancellationToken) -> Option<Instant> {
        let cfg = &self.inner.config;
        loop {
            let sent = Instant::now();
            let ok = tokio::select! {
                _ = cancel.cancelled() => return None,
                r = timeout(cfg.renew_deadline, self.try_acquire_or_renew()) => r.unwrap_or(false),
            };
            self.maybe_report_transition();
            if ok {
                return Some(sent);
            }
            let now = Instant::now();
            let mut wake = now + jittered(cfg.retry_period, JITTER_FACTOR);
            // Try again right when the lease we watch expires, if that is sooner.
            if let Some(expiry) = self.foreign_expiry()
                && expiry > now
            {
                wake = wake.min(expiry + Duration::from_millis(1));
            }
            tokio::select! {
                _ = cancel.cancelled() => return None,
                _ = sleep_until(wake) => {}
            }
        }
    }

    /// Leads until cancelled or until renewal fails; `acquired` is when the successful
    /// acquisition was sent.
    async fn lead(&self, cancel: &CancellationToken, acquired: Instant) -> RunOutcome {
        let cfg = &self.inner.config;
        self.state().last_renew = Some(Instant::now());
        let leading = cancel.child_token();
        self.inner.leading.send_replace(true);
        tracing::info!(lock = %self.inner.name, identity = %self.identity(), "became leader");
        let mut task = self
            .inner
            .started
            .as_ref()
            .map(|f| tokio::spawn(f(leading.clone())));

        let mut deadline = acquired + cfg.renew_deadline;
        let mut next_renew = Instant::now() + cfg.retry_period;
        let mut cancelled = false;
        let outcome = 'lead: loop {
            if cancelled && task.is_none() {
                break 'lead RunOutcome::Cancelled;
            }
            tokio::select! {
                biased;
                _ = sleep_until(deadline) => break 'lead RunOutcome::LeadershipLost,
                _ = cancel.cancelled(), if !cancelled => {
                    // Stop the work, but keep the lease until the work has stopped.
                    cancelled = true;
                    leading.cancel();
                }
                _ = join_task(&mut task), if cancelled => {}
                _ = sleep_until(next_renew) => {
                    let sent = Instant::now();
                    let renewed = tokio::select! {
                        r = self.try_acquire_or_renew() => r,
                        _ = sleep_until(deadline) => break 'lead RunOutcome::LeadershipLost,
                    };
                    self.maybe_report_transition();
                    if renewed {
                        deadline = sent + cfg.renew_deadline;
                        self.state().last_renew = Some(Instant::now());
                    } else if !self.observed_holder_is_me() {
                        tracing::warn!(lock = %self.inner.name, holder = ?self.leader(), "the lock has another holder");
                        break 'lead RunOutcome::LeadershipLost;
                    }
                    next_renew = Instant::now() + cfg.retry_period;
                }
            }
        };

        self.inner.leading.send_replace(false);
        leading.cancel();
        match outcome {
            RunOutcome::LeadershipLost => {
                tracing::warn!(lock = %self.inner.name, identity = %self.identity(), "leadership lost: the lock was not renewed in time");
            }
            _ => {
                tracing::info!(lock = %self.inner.name, identity = %self.identity(), "stopped leading");
            }
        }
        if let Some(f) = &self.inner.stopped {
            f();
        }
        if task.is_some() {
            join_task(&mut task).await;
        }
        if cfg.release_on_cancel {
            self.release().await;
        }
        outcome
    }

    /// Gives the lock up if we still hold it: no holder, `leaseDurationSeconds: 1`.
    async fn release(&self) -> bool {
        let attempt = async {
            let lock = &self.inner.lock;
            let Some(current) = lock.get().await? else {
                return Ok::<bool, LeaderElectionError>(true);
            };
            if !self.is_me(&current.holder_identity) {
                self.set_observed(current);
                return Ok(true);
            }
            let now = micro_now();
            let released = LeaderElectionRecord {
                holder_identity: String::new(),
                lease_duration_seconds: 1,
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                leader_transitions: current.leader_transitions,
            };
            lock.update(released.clone()).await?;
            self.set_observed(released);
            Ok(true)
        };
        match timeout(self.inner.config.renew_deadline, attempt).await {
            Ok(Ok(released)) => {
                tracing::info!(lock = %self.inner.name, "released the lock");
                released
            }
            Ok(Err(e)) => {
                tracing::warn!(lock = %self.inner.name, error = %e, "failed to release the lock");
                false
            }
            Err(_) => {
                tracing::warn!(lock = %self.inner.name, "timed out releasing the lock");
                false
            }
        }
    }

    /// Runs one term: tries to acquire the lock until it succeeds (or `cancel` fires),
    /// then leads, renewing, until `cancel` fires or renewal fails.
    ///
    /// Call it again (with the same or a new elector) to stand for election again after
    /// [`RunOutcome::LeadershipLost`]; a restarted process should use a new identity.
    #[inline(never)]
    #[allow(clippy::manual_async_fn, reason = "boxed where it is built")]
    pub fn run(
        &self,
        cancel: CancellationToken,
    ) -> impl std::future::Future<Output = RunOutcome> + Send + '_ {
        // Boxed where it is built: an `async fn`'s body (and all it awaits) is otherwise
        // compiled again in every crate that awaits it.
        let boxed: std::pin::Pin<Box<dyn std::future::Future<Output = RunOutcome> + Send + '_>> =
            Box::pin(self.run_inner(cancel));
        boxed
    }

    async fn run_inner(&self, cancel: CancellationToken) -> RunOutcome {
        if self.inner.running.swap(true, Ordering::AcqRel) {
            return RunOutcome::AlreadyRunning;
        }
        struct Running<'a>(&'a AtomicBool);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _running = Running(&self.inner.running);
        {
            let mut st = self.state();
            *st = State::default();
        }
        tracing::info!(lock = %self.inner.name, identity = %self.identity(), "attempting to acquire the leader lease");
        let Some(acquired) = self.acquire(&cancel).await else {
            return RunOutcome::Cancelled;
        };
        self.lead(&cancel, acquired).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kubewright_core::Status;
    use std::sync::atomic::AtomicUsize;

    /// A shared in-memory lock object: (version, record).
    #[derive(Clone, Default)]
    struct Store(Arc<Mutex<(u64, Option<LeaderElectionRecord>)>>);

    impl Store {
        fn record(&self) -> Option<LeaderElectionRecord> {
            self.0.lock().unwrap().1.clone()
        }
        fn set(&self, r: LeaderElectionRecord) {
            let mut g = self.0.lock().unwrap();
            g.0 += 1;
            g.1 = Some(r);
        }
    }

    struct MemLock {
        store: Store,
        id: String,
        seen: Mutex<Option<u64>>,
        blocked: Arc<AtomicBool>,
    }

    impl MemLock {
        fn new(store: &Store, id: &str) -> (Self, Arc<AtomicBool>) {
            let blocked = Arc::new(AtomicBool::new(false));
            (
                Self {
                    store: store.clone(),
                    id: id.into(),
                    seen: Mutex::new(None),
                    blocked: blocked.clone(),
                },
                blocked,
            )
        }
        fn check(&self) -> Result<(), LeaderElectionError> {
            if self.blocked.load(Ordering::SeqCst) {
                return Err(LeaderElectionError::Unavailable {
                    lock: "mem".into(),
                    reason: "blocked".into(),
                });
            }
            Ok(())
        }
    }

    fn api_err(code: u16) -> LeaderElectionError {
        LeaderElectionError::Api(kubewright_client::Error::Api(Box::new(Status::from_http(
            code, "",
        ))))
    }

    impl ResourceLock for MemLock {
        fn identity(&self) -> &str {
            &self.id
        }
        fn describe(&self) -> String {
            "mem/lock".into()
        }
        fn get(&self) -> BoxFuture<'_, Result<Option<LeaderElectionRecord>, LeaderElectionError>> {
            Box::pin(async move {
                self.check()?;
                let g = self.store.0.lock().unwrap();
                *self.seen.lock().unwrap() = g.1.as_ref().map(|_| g.0);
                Ok(g.1.clone())
            })
        }
        fn create(
            &self,
            record: LeaderElectionRecord,
        ) -> BoxFuture<'_, Result<(), LeaderElectionError>> {
            Box::pin(async move {
                self.check()?;
                let mut g = self.store.0.lock().unwrap();
                if g.1.is_some() {
                    return Err(api_err(409));
                }
                g.0 += 1;
                g.1 = Some(record);
                *self.seen.lock().unwrap() = Some(g.0);
                Ok(())
            })
        }
        fn update(
            &self,
            record: LeaderElectionRecord,
        ) -> BoxFuture<'_, Result<(), LeaderElectionError>> {
            Box::pin(async move {
                self.check()?;
                let mut g = self.store.0.lock().unwrap();
                let mut seen = self.seen.lock().unwrap();
                if *seen != Some(g.0) {
                    return Err(api_err(409));
                }
                g.0 += 1;
                g.1 = Some(record);
                *seen = Some(g.0);
                Ok(())
            })
        }
    }

    const LEASE: Duration = Duration::from_secs(15);
    const RENEW: Duration = Duration::from_secs(10);
    const RETRY: Duration = Duration::from_secs(2);

    #[derive(Default)]
    struct Log {
        started: AtomicUsize,
        stopped: AtomicUsize,
        leaders: Mutex<Vec<String>>,
    }

    fn elector(
        store: &Store,
        id: &str,
        release: bool,
        log: &Arc<Log>,
    ) -> (LeaderElector, Arc<AtomicBool>) {
        let (lock, blocked) = MemLock::new(store, id);
        let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
        let e = LeaderElector::builder(lock)
            .lease_duration(LEASE)
            .renew_deadline(RENEW)
            .retry_period(RETRY)
            .release_on_cancel(release)
            .on_started_leading(move |t: CancellationToken| {
                l1.started.fetch_add(1, Ordering::SeqCst);
                async move { t.cancelled().await }
            })
            .on_stopped_leading(move || {
                l2.stopped.fetch_add(1, Ordering::SeqCst);
            })
            .on_new_leader(move |id| l3.leaders.lock().unwrap().push(id.to_string()))
            .build()
            .unwrap();
        (e, blocked)
    }

    async fn until_leading(e: &LeaderElector) -> Instant {
        let mut rx = e.subscribe();
        rx.wait_for(|l| *l).await.unwrap();
        Instant::now()
    }

    #[test]
    fn config_validation() {
        let ok = LeaderElectionConfig::default();
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(ok.lease_duration_seconds(), 15);
        let c = |l: u64, r: u64, p: u64| LeaderElectionConfig {
            lease_duration: Duration::from_millis(l),
            renew_deadline: Duration::from_millis(r),
            retry_period: Duration::from_millis(p),
            ..Default::default()
        };
        assert_eq!(c(2000, 1500, 400).validate(), Ok(()));
        assert_eq!(c(2500, 1500, 400).lease_duration_seconds(), 3);
        assert!(matches!(
            c(10_000, 10_000, 2000).validate(),
            Err(ConfigError::LeaseDurationNotAboveRenewDeadline { .. })
        ));
        // 1.2 × 1000 ms = 1200 ms is not enough.
        assert!(matches!(
            c(5000, 1200, 1000).validate(),
            Err(ConfigError::RenewDeadlineNotAboveRetryPeriod { .. })
        ));
        assert_eq!(c(5000, 1201, 1000).validate(), Ok(()));
        assert_eq!(
            c(0, 0, 0).validate(),
            Err(ConfigError::NotPositive("lease_duration"))
        );
        assert_eq!(
            c(5000, 1000, 0).validate(),
            Err(ConfigError::NotPositive("retry_period"))
        );
        let store = Store::default();
        let (lock, _) = MemLock::new(&store, "");
        assert!(matches!(
            LeaderElector::builder(lock).build(),
            Err(LeaderElectionError::Config(ConfigError::EmptyIdentity))
        ));
        let (lock, _) = MemLock::new(&store, "a");
        assert!(matches!(
            LeaderElector::builder(lock)
                .renew_deadline(Duration::from_secs(20))
                .build(),
            Err(LeaderElectionError::Config(_))
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn acquires_renews_and_releases() {
        let store = Store::default();
        let log = Arc::new(Log::default());
        let (a, _) = elector(&store, "a", true, &log);
        let cancel = CancellationToken::new();
        let run = tokio::spawn({
            let (a, c) = (a.clone(), cancel.clone());
            async move { a.run(c).await }
        });
        until_leading(&a).await;
        assert!(a.is_leader());
        assert_eq!(a.leader().as_deref(), Some("a"));
        let first = store.record().unwrap();
        assert_eq!(first.holder_identity, "a");
        assert_eq!(first.lease_duration_seconds, 15);
        assert_eq!(first.leader_transitions, 0);
        assert_eq!(first.acquire_time, first.renew_time);
        tokio::time::sleep(Duration::from_secs(7)).await;
        let later = store.record().unwrap();
        assert!(later.renew_time >= first.renew_time);
        assert_eq!(later.acquire_time, first.acquire_time);
        assert_eq!(
            a.check(Duration::from_secs(1)).map_err(|e| e.to_string()),
            Ok(())
        );
        // A second run of the same elector is refused.
        assert_eq!(
            a.run(CancellationToken::new()).await,
            RunOutcome::AlreadyRunning
        );
        cancel.cancel();
        assert_eq!(run.await.unwrap(), RunOutcome::Cancelled);
        assert!(!a.is_leader());
        let released = store.record().unwrap();
        assert_eq!(released.holder_identity, "");
        assert_eq!(released.lease_duration_seconds, 1);
        assert_eq!(released.leader_transitions, 0);
        assert_eq!(log.started.load(Ordering::SeqCst), 1);
        assert_eq!(log.stopped.load(Ordering::SeqCst), 1);
        assert_eq!(*log.leaders.lock().unwrap(), vec!["a".to_string()]);
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_happen_every_retry_period() {
        let store = Store::default();
        let log = Arc::new(Log::default());
        let (a, _) = elector(&store, "a", false, &log);
        let cancel = CancellationToken::new();
        let run = tokio::spawn({
            let (a, c) = (a.clone(), cancel.clone());
            async move { a.run(c).await }
        });
        until_leading(&a).await;
        let v0 = store.0.lock().unwrap().0;
        tokio::time::sleep(RETRY * 5 + Duration::from_millis(100)).await;
        let v1 = store.0.lock().unwrap().0;
        assert_eq!(v1 - v0, 5, "one write per retry period");
        cancel.cancel();
        assert_eq!(run.await.unwrap(), RunOutcome::Cancelled);
        // No release: the record still names us.
        assert_eq!(store.record().unwrap().holder_identity, "a");
    }

    #[tokio::test(start_paused = true)]
    async fn takeover_waits_for_expiry_on_the_local_clock() {
        let store = Store::default();
        let log = Arc::new(Log::default());
        let (a, _) = elector(&store, "a", false, &log);
        let (b, _) = elector(&store, "b", false, &log);
        let ca = CancellationToken::new();
        let ra = tokio::spawn({
            let (a, c) = (a.clone(), ca.clone());
            async move { a.run(c).await }
        });
        until_leading(&a).await;
        let cb = CancellationToken::new();
        let rb = tokio::spawn({
            let (b, c) = (b.clone(), cb.clone());
            async move { b.run(c).await }
        });
        // A remote clock far in the future must not matter: b judges by observation.
        tokio::time::sleep(RETRY * 3).await;
        assert!(!b.is_leader());
        assert_eq!(b.leader().as_deref(), Some("a"));
        let killed = Instant::now();
        ca.cancel();
        assert_eq!(ra.await.unwrap(), RunOutcome::Cancelled);
        let took_over = until_leading(&b).await;
        let waited = took_over - killed;
        assert!(
            waited >= LEASE - RETRY - RETRY,
            "took over after {waited:?}"
        );
        assert!(
            waited <= LEASE + RETRY.mul_f64(1.0 + JITTER_FACTOR) + Duration::from_millis(100),
            "took over after {waited:?}"
        );
        let r = store.record().unwrap();
        assert_eq!(r.holder_identity, "b");
        assert_eq!(r.leader_transitions, 1);
        cb.cancel();
        rb.await.unwrap();
        assert_eq!(
            *log.leaders.lock().unwrap(),
            vec!["a".to_string(), "a".to_string(), "b".to_string()]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn release_lets_the_next_candidate_in_at_once() {
        let store = Store::default();
        let log = Arc::new(Log::default());
        let (a, _) = elector(&store, "a", true, &log);
        let (b, _) = elector(&store, "b", false, &log);
        let ca = CancellationToken::new();
        let ra = tokio::spawn({
            let (a, c) = (a.clone(), ca.clone());
            async move { a.run(c).await }
        });
        until_leading(&a).await;
        let cb = CancellationToken::new();
        let rb = tokio::spawn({
            let (b, c) = (b.clone(), cb.clone());
            async move { b.run(c).await }
        });
        tokio::time::sleep(RETRY * 2).await;
        let released_at = Instant::now();
        ca.cancel();
        ra.await.unwrap();
        let took_over = until_leading(&b).await;
        assert!(took_over - released_at <= RETRY.mul_f64(1.0 + JITTER_FACTOR));
        assert_eq!(store.record().unwrap().leader_transitions, 1);
        cb.cancel();
        rb.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn steps_down_when_renewals_fail() {
        let store = Store::default();
        let log = Arc::new(Log::default());
        let (a, blocked) = elector(&store, "a", false, &log);
        let run = tokio::spawn({
            let a = a.clone();
            async move { a.run(CancellationToken::new()).await }
        });
        until_leading(&a).await;
        tokio::time::sleep(Duration::from_millis(4100)).await;
        // Renewals at 2 s and 4 s succeeded; the next one (6 s) fails.
        blocked.store(true, Ordering::SeqCst);
        let blocked_at = Instant::now();
        let mut rx = a.subscribe();
        rx.wait_for(|l| !*l).await.unwrap();
        let stepped_down = Instant::now() - blocked_at;
        // Deadline: last successful renewal (sent at ~4 s) + 10 s.
        assert!(
            stepped_down <= RENEW && stepped_down >= RENEW - RETRY,
            "stepped down after {stepped_down:?}"
        );
        assert_eq!(run.await.unwrap(), RunOutcome::LeadershipLost);
        assert_eq!(log.stopped.load(Ordering::SeqCst), 1);
        // The lease itself was never given up (no release): candidates wait for expiry.
        assert_eq!(store.record().unwrap().holder_identity, "a");
    }

    #[tokio::test(start_paused = true)]
    async fn steps_down_at_once_when_another_holder_appears() {
        let store = Store::default();
        let log = Arc::new(Log::default());
        let (a, _) = elector(&store, "a", false, &log);
        let run = tokio::spawn({
            let a = a.clone();
            async move { a.run(CancellationToken::new()).await }
        });
        until_leading(&a).await;
        let mut stolen = store.record().unwrap();
        stolen.holder_identity = "intruder".into();
        stolen.leader_transitions += 1;
        store.set(stolen);
        let t0 = Instant::now();
        assert_eq!(run.await.unwrap(), RunOutcome::LeadershipLost);
        assert!(Instant::now() - t0 <= RETRY + Duration::from_millis(10));
        assert_eq!(a.leader().as_deref(), Some("intruder"));
        assert!(
            log.leaders
                .lock()
                .unwrap()
                .contains(&"intruder".to_string())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_keeps_renewing_until_the_work_stops() {
        let store = Store::default();
        let (lock, _) = MemLock::new(&store, "a");
        let stopped_at = Arc::new(Mutex::new(None));
        let s = stopped_at.clone();
        let a = LeaderElector::builder(lock)
            .lease_duration(LEASE)
            .renew_deadline(RENEW)
            .retry_period(RETRY)
            .release_on_cancel(true)
            .on_started_leading(|t: CancellationToken| async move {
                t.cancelled().await;
                // Slow shutdown of the leader's work: longer than the lease.
                tokio::time::sleep(Duration::from_secs(30)).await;
            })
            .on_stopped_leading(move || *s.lock().unwrap() = Some(Instant::now()))
            .build()
            .unwrap();
        let cancel = CancellationToken::new();
        let run = tokio::spawn({
            let (a, c) = (a.clone(), cancel.clone());
            async move { a.run(c).await }
        });
        until_leading(&a).await;
        let t0 = Instant::now();
        cancel.cancel();
        tokio::time::sleep(Duration::from_secs(20)).await;
        // Still leading and renewing while the work winds down.
        assert!(a.is_leader());
        assert_eq!(store.record().unwrap().holder_identity, "a");
        assert_eq!(run.await.unwrap(), RunOutcome::Cancelled);
        let stopped = stopped_at.lock().unwrap().unwrap();
        assert!(stopped - t0 >= Duration::from_secs(30));
        assert_eq!(store.record().unwrap().holder_identity, "");
    }

    #[tokio::test(start_paused = true)]
    async fn health_check_fails_when_renewal_is_overdue() {
        let store = Store::default();
        let log = Arc::new(Log::default());
        let (a, _) = elector(&store, "a", false, &log);
        // Not leading: healthy.
        assert!(a.check(Duration::ZERO).is_ok());
        // Simulate a stuck election task: leading, last renewal long ago.
        a.inner.leading.send_replace(true);
        a.state().last_renew = Some(Instant::now());
        tokio::time::advance(LEASE + Duration::from_secs(5)).await;
        assert!(a.check(Duration::from_secs(10)).is_ok());
        tokio::time::advance(Duration::from_secs(6)).await;
        let err = a.check(Duration::from_secs(10)).unwrap_err();
        assert!(
            matches!(err, LeaderElectionError::RenewalOverdue { .. }),
            "{err}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn only_one_of_many_candidates_leads() {
        let store = Store::default();
        let log = Arc::new(Log::default());
        let cancel = CancellationToken::new();
        let mut electors = Vec::new();
        for i in 0..5 {
            let (e, _) = elector(&store, &format!("c{i}"), false, &log);
            let (e2, c) = (e.clone(), cancel.clone());
            tokio::spawn(async move { e2.run(c).await });
            electors.push(e);
        }
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(700)).await;
            let leaders = electors.iter().filter(|e| e.is_leader()).count();
            assert!(leaders <= 1);
        }
        assert_eq!(electors.iter().filter(|e| e.is_leader()).count(), 1);
        assert_eq!(log.started.load(Ordering::SeqCst), 1);
        cancel.cancel();
    }
}
