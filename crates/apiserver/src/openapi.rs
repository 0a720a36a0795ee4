//! The OpenAPI definitions of the built-in kinds: k8s-openapi's `schemars` schemas with the
//! list, map and patch extensions kube-apiserver adds (`x-kubernetes-patch-merge-key`, ...),
//! built once. The schema index (`registry::schema`) compiles them; the `/openapi/v2` and
//! `/openapi/v3` documents (`http::openapi`) publish them.

mod k8s_ext;
pub(crate) mod schemas;

use schemas::BUILTINS;
use serde_json::Value;
use std::collections::BTreeMap;

/// Every built-in definition (name -> OpenAPI v3 schema, references as
/// `#/components/schemas/<name>`), built once.
pub(crate) fn builtin_definitions() -> &'static BTreeMap<String, Value> {
    &BUILTINS.schemas
}

/// The definition name of a built-in kind.
pub(crate) fn builtin_kind_definition(
    group: &str,
    version: &str,
    kind: &str,
) -> Option<&'static str> {
    BUILTINS
        .kinds
        .get(&(group.to_string(), version.to_string(), kind.to_string()))
        .map(String::as_str)
}
