//! Prometheus metrics of controllers and clients, with controller-runtime's and
//! client-go's names, and a `/metrics` HTTP endpoint.
//!
//! [`Metrics::register`] creates every family in a `prometheus-client`
//! [`Registry`]: [`ControllerMetrics`], the work-queue metrics
//! ([`QueueMetrics`]) and [`ClientMetrics`]. A [`Manager`](crate::manager::Manager)
//! does this for you and serves the registry; a standalone
//! [`Controller`](crate::controller::Controller) takes them with
//! [`Controller::metrics`](crate::controller::Controller::metrics), and
//! [`serve_metrics`] serves any registry.
//!
//! ```
//! use prometheus_client::registry::Registry;
//! use kubewright_runtime::metrics::Metrics;
//!
//! let mut registry = Registry::default();
//! let metrics = Metrics::register(&mut registry);
//! metrics.controller.for_controller("widgets"); // series start at zero
//! let mut text = String::new();
//! prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
//! assert!(text.contains(r#"controller_runtime_reconcile_total{controller="widgets",result="success"} 0"#));
//! ```

use crate::health::{HttpResponse, serve_http};
use crate::workqueue::QueueMetrics;
/// The metrics library of [`Registry`] and [`Manager::registry`](crate::Manager::registry), for
/// registering metrics of your own without a direct dependency.
pub use prometheus_client;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The content type of the OpenMetrics text format written by [`serve_metrics`].
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// controller-runtime's buckets for `controller_runtime_reconcile_time_seconds`.
const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// client-go's buckets for the request and rate-limiter latency histograms.
const REST_CLIENT_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_time_histogram() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

fn rest_client_histogram() -> Histogram {
    Histogram::new(REST_CLIENT_BUCKETS)
}

/// controller-runtime's `controller_runtime_*` families, labelled by controller name.
///
/// | name | type | meaning |
/// |------|------|---------|
/// | `controller_runtime_reconcile_total{controller,result}` | counter | reconciles by result: `success`, `error`, `requeue` (back-off), `requeue_after` |
/// | `controller_runtime_reconcile_errors_total{controller}` | counter | failed reconciles (errors and panics) |
/// | `controller_runtime_reconcile_panics_total{controller}` | counter | reconciles that panicked |
/// | `controller_runtime_reconcile_time_seconds{controller}` | histogram | duration of a reconcile |
/// | `controller_runtime_active_workers{controller}` | gauge | workers currently reconciling |
/// | `controller_runtime_max_concurrent_reconciles{controller}` | gauge | configured workers |
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    total: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    panics: Family<ControllerLabels, Counter>,
    time: HistogramFamily<ControllerLabels>,
    active_workers: Family<ControllerLabels, Gauge>,
    max_concurrent: Family<ControllerLabels, Gauge>,
}

impl ControllerMetrics {
    /// Creates the families and registers them (once per registry).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            total: Family::default(),
            errors: Family::default(),
            panics: Family::default(),
            time: Family::new_with_constructor(reconcile_time_histogram),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
        };
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            m.total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            m.errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            m.panics.clone(),
        );
        registry.register_with_unit(
            "controller_runtime_reconcile_time",
            "Length of time per reconciliation per controller",
            Unit::Seconds,
            m.time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            m.active_workers.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            m.max_concurrent.clone(),
        );
        m
    }

    /// The series of one controller, created at zero (like controller-runtime does at
    /// controller start).
    pub fn for_controller(&self, controller: &str) -> ControllerMetricsHandle {
        let labels = ControllerLabels {
            controller: controller.to_string(),
        };
        let result = |r: &str| {
            self.total.get_or_create_owned(&ResultLabels {
                controller: controller.to_string(),
                result: r.to_string(),
            })
        };
        ControllerMetricsHandle {
            success: result("success"),
            error: result("error"),
            requeue: result("requeue"),
            requeue_after: result("requeue_after"),
            errors: self.errors.get_or_create_owned(&labels),
            panics: self.panics.get_or_create_owned(&labels),
            time: self.time.get_or_create_owned(&labels),
            active_workers: self.active_workers.get_or_create_owned(&labels),
            max_concurrent: self.max_concurrent.get_or_create_owned(&labels),
        }
    }
}

/// The result label of `controller_runtime_reconcile_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileResultLabel {
    /// Done, awaiting changes.
    Success,
    /// Failed or panicked.
    Error,
    /// Requeued with back-off ([`Action::requeue_with_backoff`](crate::controller::Action::requeue_with_backoff)).
    Requeue,
    /// Requeued after a fixed delay ([`Action::requeue`](crate::controller::Action::requeue)).
    RequeueAfter,
}

/// One controller's resolved metric series (cheap to clone; see [`ControllerMetrics`]).
#[derive(Clone, Debug)]
pub struct ControllerMetricsHandle {
    success: Counter,
    error: Counter,
    requeue: Counter,
    requeue_after: Counter,
    errors: Counter,
    panics: Counter,
    time: Histogram,
    active_workers: Gauge,
    max_concurrent: Gauge,
}

impl ControllerMetricsHandle {
    /// Counts one reconcile with its result and duration.
    pub fn reconciled(&self, result: ReconcileResultLabel, duration: Duration) {
        match result {
            ReconcileResultLabel::Success => self.success.inc(),
            ReconcileResultLabel::Error => {
                self.errors.inc();
                self.error.inc()
            }
            ReconcileResultLabel::Requeue => self.requeue.inc(),
            ReconcileResultLabel::RequeueAfter => self.requeue_after.inc(),
        };
        self.time.observe(duration.as_secs_f64());
    }

    /// Counts one panic (in addition to the error counted by [`reconciled`](Self::reconciled)).
    pub fn panicked(&self) {
        self.panics.inc();
    }

    /// Sets the configured number of workers.
    pub fn set_max_concurrent(&self, workers: usize) {
        self.max_concurrent
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
    }

    /// One more worker is reconciling.
    pub fn worker_started(&self) {
        self.active_workers.inc();
    }

    /// One worker less is reconciling.
    pub fn worker_finished(&self) {
        self.active_workers.dec();
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    host: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    host: String,
    verb: String,
}

/// One HTTP request attempt made by a client, as reported to [`ClientMetrics::observe`].
#[derive(Clone, Copy, Debug)]
pub struct ClientRequest<'a> {
    /// The HTTP method (`GET`, `POST`, ...).
    pub method: &'a str,
    /// The API server's host (and port).
    pub host: &'a str,
    /// The response status, `None` when no response arrived (a transport error).
    pub status: Option<u16>,
    /// From sending the request to the response headers.
    pub latency: Duration,
    /// Time spent waiting for the client's QPS/burst rate limiter.
    pub rate_limiter_wait: Duration,
}

/// client-go's `rest_client_*` families.
///
/// | name | type | labels |
/// |------|------|--------|
/// | `rest_client_requests_total` | counter | `code` (`<error>` without response), `host`, `method` |
/// | `rest_client_request_duration_seconds` | histogram | `host`, `verb` |
/// | `rest_client_rate_limiter_duration_seconds` | histogram | `host`, `verb` |
#[derive(Clone, Debug)]
pub struct ClientMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: HistogramFamily<LatencyLabels>,
    rate_limiter: HistogramFamily<LatencyLabels>,
}

impl ClientMetrics {
    /// Creates the families and registers them (once per registry).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(rest_client_histogram),
            rate_limiter: Family::new_with_constructor(rest_client_histogram),
        };
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host",
            m.requests.clone(),
        );
        registry.register_with_unit(
            "rest_client_request_duration",
            "Request latency in seconds. Broken down by verb, and host",
            Unit::Seconds,
            m.duration.clone(),
        );
        registry.register_with_unit(
            "rest_client_rate_limiter_duration",
            "Client side rate limiter latency in seconds. Broken down by verb, and host",
            Unit::Seconds,
            m.rate_limiter.clone(),
        );
        m
    }

    /// Records one request attempt.
    pub fn observe(&self, request: &ClientRequest<'_>) {
        let code = request
            .status
            .map_or_else(|| "<error>".to_string(), |c| c.to_string());
        self.requests
            .get_or_create(&RequestLabels {
                code,
                host: request.host.to_string(),
                method: request.method.to_string(),
            })
            .inc();
        let labels = LatencyLabels {
            host: request.host.to_string(),
            verb: request.method.to_string(),
        };
        self.duration
            .get_or_create(&labels)
            .observe(request.latency.as_secs_f64());
        self.rate_limiter
            .get_or_create(&labels)
            .observe(request.rate_limiter_wait.as_secs_f64());
    }
}

/// Every metric family of the runtime, registered in one registry.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// `controller_runtime_*`.
    pub controller: ControllerMetrics,
    /// `workqueue_*` (queues are named after their controller).
    pub queue: QueueMetrics,
    /// `rest_client_*`.
    pub client: ClientMetrics,
    /// `leader_election_master_status`.
    pub leader: LeaderMetrics,
}

impl Metrics {
    /// Creates and registers every family (once per registry).
    pub fn register(registry: &mut Registry) -> Self {
        Self {
            controller: ControllerMetrics::register(registry),
            queue: QueueMetrics::register(registry),
            client: ClientMetrics::register(registry),
            leader: LeaderMetrics::register(registry),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    name: String,
}

/// client-go's leader-election gauge, as controller-runtime registers it:
/// `leader_election_master_status{name}` is 1 while this process holds the lease `name`,
/// 0 while it stands by.
#[derive(Clone, Debug)]
pub struct LeaderMetrics {
    status: Family<LeaseLabels, Gauge>,
}

impl LeaderMetrics {
    /// Creates the family and registers it (once per registry).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            status: Family::default(),
        };
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            m.status.clone(),
        );
        m
    }

    /// Records whether this process leads through the lease `name`.
    pub fn set_leading(&self, name: &str, leading: bool) {
        self.status
            .get_or_create(&LeaseLabels { name: name.into() })
            .set(i64::from(leading));
    }
}

/// Encodes `registry` in the OpenMetrics text format.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, registry) {
        // Only a failing `fmt::Write` can fail, and a String never does.
        tracing::error!(error = %e, "encoding metrics failed");
    }
    text
}

/// Serves `GET /metrics` (OpenMetrics text of `registry`) on `listener` until `cancel`
/// fires; other paths answer 404.
#[inline(never)]
#[allow(clippy::manual_async_fn, reason = "boxed where it is built")]
pub fn serve_metrics(
    listener: TcpListener,
    registry: Arc<Registry>,
    cancel: CancellationToken,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    // Boxed where it is built: an `async fn`'s body (and all it awaits) is otherwise
    // compiled again in every crate that awaits it.
    let boxed: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>> =
        Box::pin(serve_metrics_inner(listener, registry, cancel));
    boxed
}

async fn serve_metrics_inner(
    listener: TcpListener,
    registry: Arc<Registry>,
    cancel: CancellationToken,
) {
    serve_http(listener, cancel, move |path, _query| {
        if path == "/metrics" {
            HttpResponse::ok(OPENMETRICS_CONTENT_TYPE, encode(&registry))
        } else {
            HttpResponse::not_found()
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_series() {
        let mut registry = Registry::default();
        let m = ControllerMetrics::register(&mut registry);
        let h = m.for_controller("cms");
        h.set_max_concurrent(4);
        h.worker_started();
        h.reconciled(ReconcileResultLabel::Error, Duration::from_millis(7));
        h.panicked();
        h.reconciled(ReconcileResultLabel::Success, Duration::from_millis(2));
        h.reconciled(ReconcileResultLabel::RequeueAfter, Duration::from_millis(2));
        let text = encode(&registry);
        for line in [
            r#"controller_runtime_reconcile_total{controller="cms",result="error"} 1"#,
            r#"controller_runtime_reconcile_total{controller="cms",result="success"} 1"#,
            r#"controller_runtime_reconcile_total{controller="cms",result="requeue"} 0"#,
            r#"controller_runtime_reconcile_total{controller="cms",result="requeue_after"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="cms"} 1"#,
            r#"controller_runtime_reconcile_panics_total{controller="cms"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="cms"} 3"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="0.005",controller="cms"} 2"#,
            r#"controller_runtime_active_workers{controller="cms"} 1"#,
            r#"controller_runtime_max_concurrent_reconciles{controller="cms"} 4"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }

    #[test]
    fn client_series() {
        let mut registry = Registry::default();
        let m = ClientMetrics::register(&mut registry);
        let req = ClientRequest {
            method: "GET",
            host: "127.0.0.1:6443",
            status: Some(200),
            latency: Duration::from_millis(30),
            rate_limiter_wait: Duration::from_millis(1),
        };
        m.observe(&req);
        m.observe(&req);
        m.observe(&ClientRequest {
            status: None,
            method: "PUT",
            ..req
        });
        let text = encode(&registry);
        for line in [
            r#"rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 2"#,
            r#"rest_client_requests_total{code="<error>",host="127.0.0.1:6443",method="PUT"} 1"#,
            r#"rest_client_request_duration_seconds_bucket{le="0.025",host="127.0.0.1:6443",verb="GET"} 0"#,
            r#"rest_client_request_duration_seconds_bucket{le="0.1",host="127.0.0.1:6443",verb="GET"} 2"#,
            r#"rest_client_rate_limiter_duration_seconds_count{host="127.0.0.1:6443",verb="PUT"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }
}
