//! Differential tests: the embedded server must answer like kube-apiserver.
//!
//! Each scenario (tests/differential/cases.rs) sends raw HTTP requests in a fresh
//! namespace. Its answers are normalised (uids, times, resourceVersions, generated names,
//! the namespace name, addresses) and compared field by field, as a list of JSON paths,
//! with the real server's answers recorded in tests/fixtures/differential/*.json.
//!
//! With `KUBEWRIGHT_TEST_KUBECONFIG` the scenarios also run against the live cluster:
//! the embedded answers are compared with the live ones, and the live ones with the
//! fixtures. `KUBEWRIGHT_RECORD_FIXTURES=1` rewrites the fixtures from the live cluster:
//!
//! ```sh
//! KUBEWRIGHT_RECORD_FIXTURES=1 KUBEWRIGHT_TEST_KUBECONFIG=/path/kubeconfig \
//!   cargo nextest run -p kubewright-apiserver --test differential
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

#[path = "differential/cases.rs"]
mod cases;
#[path = "differential/harness.rs"]
mod harness;

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                harness::check(cases::$name()).await;
            }
        )*
    };
}

scenarios!(
    version,
    discovery,
    discovery_aggregated,
    configmap_crud,
    configmap_secret_tables,
    write_errors,
    list_errors,
    apply_errors,
    status_apply,
    webhook_urls,
    malformed_json,
    node_proxy,
    continue_tokens,
    hpa_v1,
    null_values,
    namespace,
    serviceaccount_secret,
    deployment,
    service,
    auth,
    watch,
    custom_resource,
    custom_resource_defaults,
    options_errors,
    generation_and_status,
    pod,
    reviews,
    watch_list,
    watch_changes,
    finalizers,
    misc_errors,
    metadata_protobuf,
    builtin_protobuf,
    quantities,
    strategic_patches,
    deletion_options,
    empty_collections,
    zero_scalars,
    apply_ownership,
    watch_selectors,
    status_subresource,
    status_metadata,
    immutable_fields,
    service_updates,
    create_validation,
    job_updates,
    claim_updates,
    service_allocation,
    spec_validation,
    pod_admission,
    spec_validation_more,
    status_validation,
    quota_and_limits,
    pod_security,
    quota_scopes,
    quota_admission,
    endpoints_tables,
    printers,
    kind_defaults,
    limit_range_kinds,
    quota_updates,
    go_type_errors,
    leases_and_events,
    events_two_apis,
    field_selector_labels,
    managers_per_version,
    dynamic_resources,
    mutating_policies,
    pagination,
);
