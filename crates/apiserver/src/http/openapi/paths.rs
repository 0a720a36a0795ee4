//! Path items and operations of a resource, in OpenAPI 3.0 or Swagger 2.0 form, shaped like
//! kube-apiserver's (operation ids, `x-kubernetes-action`, `x-kubernetes-group-version-kind`,
//! query parameters, request bodies and responses).

use crate::openapi::schemas::{DELETE_OPTIONS, PATCH, STATUS, V2_REF, V3_REF, WATCH_EVENT};
use crate::registry::ResourceDef;
use serde_json::{Map, Value, json};

/// Which document the paths are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flavor {
    /// OpenAPI 3.0 (`/openapi/v3/...`).
    V3,
    /// Swagger 2.0 (`/openapi/v2`).
    V2,
}

const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

/// Query parameters: name, type, description.
const QUERY_PARAMS: &[(&str, &str, &str)] = &[
    (
        "allowWatchBookmarks",
        "boolean",
        "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion. Clients should not assume bookmarks are returned at any specific interval, nor may they assume the server will send any BOOKMARK event during a session. If this is not a watch, this field is ignored.",
    ),
    (
        "continue",
        "string",
        "The continue option should be set when retrieving more results from the server. Since this value is server defined, clients may only use the continue value from a previous query result with identical query parameters (except for the value of continue) and the server may reject a continue value it does not recognize. If the specified continue value is no longer valid whether due to expiration (generally five to fifteen minutes) or a configuration change on the server, the server will respond with a 410 ResourceExpired error together with a continue token.",
    ),
    (
        "dryRun",
        "string",
        "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed",
    ),
    (
        "fieldManager",
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.",
    ),
    (
        "fieldSelector",
        "string",
        "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
    ),
    (
        "fieldValidation",
        "string",
        "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.",
    ),
    (
        "force",
        "boolean",
        "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
    ),
    (
        "gracePeriodSeconds",
        "integer",
        "The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately. If this value is nil, the default grace period for the specified type will be used. Defaults to a per object value if not specified. zero means delete immediately.",
    ),
    (
        "ignoreStoreReadErrorWithClusterBreakingPotential",
        "boolean",
        "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error. A resource is considered corrupt if it can not be retrieved from the underlying storage successfully because of a) its data can not be transformed e.g. decryption failure, or b) it fails to decode into an object. NOTE: unsafe deletion ignores finalizer constraints, skips precondition checks, and removes the object from the storage. WARNING: This may potentially break the cluster if the workload associated with the resource being unsafe-deleted relies on normal deletion flow. Use only if you REALLY know what you are doing. The default value is false, and the user must opt in to enable it",
    ),
    (
        "labelSelector",
        "string",
        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
    ),
    (
        "limit",
        "integer",
        "limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata to a value that can be used with the same initial query to retrieve the next set of results. Setting a limit may return fewer than the requested amount of items (up to zero items) in the event all requested objects are filtered out and clients should only use the presence of the continue field to determine whether more results are available.",
    ),
    (
        "orphanDependents",
        "boolean",
        "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned. If true/false, the \"orphan\" finalizer will be added to/removed from the object's finalizers list. Either this field or PropagationPolicy may be set, but not both.",
    ),
    (
        "pretty",
        "string",
        "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
    ),
    (
        "propagationPolicy",
        "string",
        "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be set, but not both. The default policy is decided by the existing finalizer set in the metadata.finalizers and the resource-specific default policy. Acceptable values are: 'Orphan' - orphan the dependents; 'Background' - allow the garbage collector to delete the dependents in the background; 'Foreground' - a cascading policy that deletes all dependents in the foreground.",
    ),
    (
        "resourceVersion",
        "string",
        "resourceVersion sets a constraint on what resource versions a request may be served from. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset",
    ),
    (
        "resourceVersionMatch",
        "string",
        "resourceVersionMatch determines how resourceVersion is applied to list calls. It is highly recommended that resourceVersionMatch be set for list calls where resourceVersion is set See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset",
    ),
    (
        "sendInitialEvents",
        "boolean",
        "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection. Once all such events have been sent, a synthetic \"Bookmark\" event  will be sent. The bookmark will report the ResourceVersion (RV) corresponding to the set of objects, and be marked with `\"k8s.io/initial-events-end\": \"true\"` annotation. Afterwards, the watch stream will proceed as usual, sending watch events corresponding to changes (subsequent to the RV) to objects watched.",
    ),
    (
        "timeoutSeconds",
        "integer",
        "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.",
    ),
    (
        "watch",
        "boolean",
        "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.",
    ),
];

const LIST_PARAMS: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
const WRITE_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
const PATCH_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
const DELETE_PARAMS: &[&str] = &[
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
];
const DELETE_COLLECTION_PARAMS: &[&str] = &[
    "continue",
    "dryRun",
    "fieldSelector",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "labelSelector",
    "limit",
    "orphanDependents",
    "propagationPolicy",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
];

/// Patch content types: strategic merge patch only for built-ins.
fn patch_types(builtin: bool) -> Vec<&'static str> {
    let mut t = vec![
        "application/apply-patch+yaml",
        "application/json-patch+json",
    ];
    t.push("application/merge-patch+json");
    if builtin {
        t.push("application/strategic-merge-patch+json");
    }
    t
}

struct Ctx<'a> {
    flavor: Flavor,
    def: &'a ResourceDef,
    /// Definition name of the kind.
    schema: &'a str,
    /// Definition name of the list kind.
    list_schema: &'a str,
    tag: String,
    /// `CoreV1`, `AppsV1`, ...
    id: String,
}

impl Ctx<'_> {
    fn schema_ref(&self, name: &str) -> Value {
        let prefix = match self.flavor {
            Flavor::V3 => V3_REF,
            Flavor::V2 => V2_REF,
        };
        json!({ "$ref": format!("{prefix}{name}") })
    }

    fn query(&self, name: &str) -> Value {
        let (ty, desc) = QUERY_PARAMS
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, t, d)| (*t, *d))
            .unwrap_or(("string", ""));
        match self.flavor {
            Flavor::V3 => json!({
                "name": name, "in": "query", "description": desc,
                "schema": {"type": ty, "uniqueItems": true},
            }),
            Flavor::V2 => json!({
                "name": name, "in": "query", "description": desc, "type": ty, "uniqueItems": true,
            }),
        }
    }

    fn path_param(&self, name: &str, desc: String) -> Value {
        match self.flavor {
            Flavor::V3 => json!({
                "name": name, "in": "path", "description": desc, "required": true,
                "schema": {"type": "string", "uniqueItems": true},
            }),
            Flavor::V2 => json!({
                "name": name, "in": "path", "description": desc, "required": true,
                "type": "string", "uniqueItems": true,
            }),
        }
    }

    /// Path-level parameters: `name`, `namespace`, `pretty`.
    fn path_params(&self, named: bool, namespaced: bool, kind_word: &str) -> Value {
        let mut ps = Vec::new();
        if named {
            ps.push(self.path_param("name", format!("name of the {kind_word}")));
        }
        if namespaced {
            ps.push(self.path_param(
                "namespace",
                "object name and auth scope, such as for teams and projects".into(),
            ));
        }
        ps.push(self.query("pretty"));
        Value::Array(ps)
    }

    fn responses(&self, codes: &[(&str, &str)], schema: &str, watch: bool) -> Value {
        let mut out = Map::new();
        for (code, desc) in codes {
            let r = match self.flavor {
                Flavor::V3 => {
                    let mut content = Map::new();
                    let types: &[&str] = if watch {
                        &["application/json", "application/json;stream=watch"]
                    } else {
                        &["application/json", "application/yaml"]
                    };
                    for t in types {
                        content.insert(t.to_string(), json!({"schema": self.schema_ref(schema)}));
                    }
                    json!({"description": desc, "content": content})
                }
                Flavor::V2 => json!({"description": desc, "schema": self.schema_ref(schema)}),
            };
            out.insert(code.to_string(), r);
        }
        out.insert("401".into(), json!({"description": "Unauthorized"}));
        Value::Object(out)
    }

    /// One operation.
    #[allow(clippy::too_many_arguments)]
    fn op(
        &self,
        action: &str,
        id: String,
        description: String,
        params: &[&str],
        body: Option<(&str, Vec<&str>, bool)>,
        responses: Value,
        gvk: &Value,
        produces: &[&str],
    ) -> Value {
        let mut op = Map::new();
        op.insert("tags".into(), json!([self.tag]));
        op.insert("description".into(), json!(description));
        op.insert("operationId".into(), json!(id));
        let mut ps: Vec<Value> = params.iter().map(|p| self.query(p)).collect();
        if let Some((schema, types, required)) = &body {
            match self.flavor {
                Flavor::V3 => {
                    let content: Map<String, Value> = types
                        .iter()
                        .map(|t| (t.to_string(), json!({"schema": self.schema_ref(schema)})))
                        .collect();
                    let mut rb = json!({"content": content});
                    if *required {
                        rb["required"] = json!(true);
                    }
                    op.insert("requestBody".into(), rb);
                }
                Flavor::V2 => {
                    let mut p =
                        json!({"name": "body", "in": "body", "schema": self.schema_ref(schema)});
                    if *required {
                        p["required"] = json!(true);
                    }
                    ps.insert(0, p);
                    op.insert("consumes".into(), json!(types));
                }
            }
        } else if self.flavor == Flavor::V2 {
            op.insert("consumes".into(), json!(["*/*"]));
        }
        if !ps.is_empty() {
            op.insert("parameters".into(), Value::Array(ps));
        }
        if self.flavor == Flavor::V2 {
            op.insert("produces".into(), json!(produces));
            op.insert("schemes".into(), json!(["https"]));
        }
        op.insert("responses".into(), responses);
        op.insert("x-kubernetes-action".into(), json!(action));
        op.insert("x-kubernetes-group-version-kind".into(), gvk.clone());
        Value::Object(op)
    }
}

const PRODUCES: &[&str] = &["application/json", "application/yaml"];
const PRODUCES_LIST: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/json;stream=watch",
];
const PRODUCES_WATCH: &[&str] = &["application/json", "application/json;stream=watch"];

fn camel(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// `CoreV1`, `AppsV1`, `RbacAuthorizationV1`, `StableExampleComV1` and the matching tag
/// (`core_v1`, `rbacAuthorization_v1`).
fn group_ids(group: &str, version: &str) -> (String, String) {
    let g = if group.is_empty() {
        "core"
    } else {
        group.strip_suffix(".k8s.io").unwrap_or(group)
    };
    let parts: Vec<String> = g
        .split(['.', '-'])
        .filter(|p| !p.is_empty())
        .map(camel)
        .collect();
    let id = format!("{}{}", parts.concat(), camel(version));
    let mut tag = parts.concat();
    if let Some(f) = tag.get(..1) {
        tag = format!("{}{}", f.to_lowercase(), &tag[1..]);
    }
    (id, format!("{tag}_{version}"))
}

/// The API path prefix of a group version: `/api/v1` or `/apis/<group>/<version>`.
pub(super) fn gv_prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

fn gvk_value(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// Every path item of a resource. `schema` and `list_schema` are the definition names of
/// its kind and list kind.
pub(super) fn resource_paths(
    def: &ResourceDef,
    schema: &str,
    list_schema: &str,
    flavor: Flavor,
) -> Vec<(String, Value)> {
    let (id, tag) = group_ids(&def.group, &def.version);
    let cx = Ctx {
        flavor,
        def,
        schema,
        list_schema,
        tag,
        id,
    };
    let d = cx.def;
    let kind = d.kind.as_str();
    let gvk = gvk_value(&d.group, &d.version, kind);
    let has = |v: &str| d.verbs.contains(&v);
    let prefix = gv_prefix(&d.group, &d.version);
    let ns = d.namespaced;
    let (scope_path, ns_word) = if ns {
        (format!("{prefix}/namespaces/{{namespace}}"), "Namespaced")
    } else {
        (prefix.clone(), "")
    };
    let coll = format!("{scope_path}/{}", d.plural);
    let item = format!("{coll}/{{name}}");
    let g = &cx.id;
    let mut out = Vec::new();

    // Collection.
    let mut c = Map::new();
    if has("list") {
        c.insert(
            "get".into(),
            cx.op(
                "list",
                format!("list{g}{ns_word}{kind}"),
                format!("list or watch objects of kind {kind}"),
                LIST_PARAMS,
                None,
                cx.responses(&[("200", "OK")], cx.list_schema, false),
                &gvk,
                PRODUCES_LIST,
            ),
        );
    }
    if has("create") {
        c.insert(
            "post".into(),
            cx.op(
                "post",
                format!("create{g}{ns_word}{kind}"),
                format!("create a {kind}"),
                WRITE_PARAMS,
                Some((cx.schema, vec!["*/*"], true)),
                cx.responses(
                    &[("200", "OK"), ("201", "Created"), ("202", "Accepted")],
                    cx.schema,
                    false,
                ),
                &gvk,
                PRODUCES,
            ),
        );
    }
    if has("deletecollection") {
        c.insert(
            "delete".into(),
            cx.op(
                "deletecollection",
                format!("delete{g}Collection{ns_word}{kind}"),
                format!("delete collection of {kind}"),
                DELETE_COLLECTION_PARAMS,
                Some((DELETE_OPTIONS, vec!["*/*"], false)),
                cx.responses(&[("200", "OK")], STATUS, false),
                &gvk,
                PRODUCES,
            ),
        );
    }
    if !c.is_empty() {
        c.insert("parameters".into(), cx.path_params(false, ns, kind));
        out.push((coll.clone(), Value::Object(c)));
    }

    // Item.
    let mut it = Map::new();
    if has("get") {
        it.insert(
            "get".into(),
            cx.op(
                "get",
                format!("read{g}{ns_word}{kind}"),
                format!("read the specified {kind}"),
                &[],
                None,
                cx.responses(&[("200", "OK")], cx.schema, false),
                &gvk,
                PRODUCES,
            ),
        );
    }
    if has("update") {
        it.insert(
            "put".into(),
            cx.replace_op(g, ns_word, kind, "", cx.schema, &gvk),
        );
    }
    if has("patch") {
        it.insert(
            "patch".into(),
            cx.patch_op(g, ns_word, kind, "", cx.schema, &gvk),
        );
    }
    if has("delete") {
        let ok = if d.delete_returns_object {
            cx.schema
        } else {
            STATUS
        };
        let responses = cx.responses(&[("200", "OK"), ("202", "Accepted")], ok, false);
        it.insert(
            "delete".into(),
            cx.op(
                "delete",
                format!("delete{g}{ns_word}{kind}"),
                format!("delete a {kind}"),
                DELETE_PARAMS,
                Some((DELETE_OPTIONS, vec!["*/*"], false)),
                responses,
                &gvk,
                PRODUCES,
            ),
        );
    }
    if !it.is_empty() {
        it.insert("parameters".into(), cx.path_params(true, ns, kind));
        out.push((item.clone(), Value::Object(it)));
    }

    // Subresources.
    let sub = |name: &str, schema: &str, gvk: &Value, suffix: &str| {
        let mut m = Map::new();
        m.insert(
            "get".into(),
            cx.op(
                "get",
                format!("read{g}{ns_word}{kind}{suffix}"),
                format!("read {name} of the specified {kind}"),
                &[],
                None,
                cx.responses(&[("200", "OK")], schema, false),
                gvk,
                PRODUCES,
            ),
        );
        m.insert(
            "put".into(),
            cx.replace_op(g, ns_word, kind, suffix, schema, gvk),
        );
        m.insert(
            "patch".into(),
            cx.patch_op(g, ns_word, kind, suffix, schema, gvk),
        );
        m.insert("parameters".into(), cx.path_params(true, ns, kind));
        (format!("{item}/{name}"), Value::Object(m))
    };
    if d.has_status && has("get") {
        out.push(sub("status", cx.schema, &gvk, "Status"));
    }
    if d.scale.is_some() && has("get") {
        out.push(sub(
            "scale",
            SCALE,
            &gvk_value("autoscaling", "v1", "Scale"),
            "Scale",
        ));
    }
    if d.builtin && d.group.is_empty() && d.version == "v1" {
        let post = |sub: &str, schema: &str, gvk: Value, suffix: &str| {
            let mut m = Map::new();
            m.insert(
                "post".into(),
                cx.op(
                    "post",
                    format!("create{g}{ns_word}{kind}{suffix}"),
                    format!("create {sub} of a {kind}"),
                    WRITE_PARAMS,
                    Some((schema, vec!["*/*"], true)),
                    cx.responses(
                        &[("200", "OK"), ("201", "Created"), ("202", "Accepted")],
                        schema,
                        false,
                    ),
                    &gvk,
                    PRODUCES,
                ),
            );
            m.insert("parameters".into(), cx.path_params(true, ns, sub));
            (format!("{item}/{sub}"), Value::Object(m))
        };
        match d.plural.as_str() {
            "pods" => {
                out.push(post(
                    "binding",
                    "io.k8s.api.core.v1.Binding",
                    gvk_value("", "v1", "Binding"),
                    "Binding",
                ));
                out.push(post(
                    "eviction",
                    "io.k8s.api.policy.v1.Eviction",
                    gvk_value("policy", "v1", "Eviction"),
                    "Eviction",
                ));
            }
            "serviceaccounts" => out.push(post(
                "token",
                "io.k8s.api.authentication.v1.TokenRequest",
                gvk_value("authentication.k8s.io", "v1", "TokenRequest"),
                "Token",
            )),
            "namespaces" => {
                let mut m = Map::new();
                m.insert(
                    "put".into(),
                    cx.op(
                        "put",
                        format!("replace{g}{kind}Finalize"),
                        format!("replace finalize of the specified {kind}"),
                        WRITE_PARAMS,
                        Some((cx.schema, vec!["*/*"], true)),
                        cx.responses(&[("200", "OK"), ("201", "Created")], cx.schema, false),
                        &gvk,
                        PRODUCES,
                    ),
                );
                m.insert("parameters".into(), cx.path_params(true, false, kind));
                out.push((format!("{item}/finalize"), Value::Object(m)));
            }
            _ => {}
        }
    }

    // Lists across namespaces and watches.
    if ns && has("list") {
        let mut m = Map::new();
        m.insert(
            "get".into(),
            cx.op(
                "list",
                format!("list{g}{kind}ForAllNamespaces"),
                format!("list or watch objects of kind {kind}"),
                LIST_PARAMS,
                None,
                cx.responses(&[("200", "OK")], cx.list_schema, false),
                &gvk,
                PRODUCES_LIST,
            ),
        );
        m.insert("parameters".into(), cx.path_params(false, false, kind));
        out.push((format!("{prefix}/{}", d.plural), Value::Object(m)));
    }
    if has("watch") {
        let watch_item = |path: String, id: String, action: &str, named: bool, scoped: bool| {
            let mut m = Map::new();
            let desc = if named {
                format!(
                    "watch changes to an object of kind {kind}. deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter."
                )
            } else {
                format!(
                    "watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a list operation instead."
                )
            };
            m.insert(
                "get".into(),
                cx.op(
                    action,
                    id,
                    desc,
                    LIST_PARAMS,
                    None,
                    cx.responses(&[("200", "OK")], WATCH_EVENT, true),
                    &gvk,
                    PRODUCES_WATCH,
                ),
            );
            m.insert("parameters".into(), cx.path_params(named, scoped, kind));
            (path, Value::Object(m))
        };
        let wscope = if ns {
            format!("{prefix}/watch/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/watch/{}", d.plural)
        };
        out.push(watch_item(
            wscope.clone(),
            format!("watch{g}{ns_word}{kind}List"),
            "watchlist",
            false,
            ns,
        ));
        out.push(watch_item(
            format!("{wscope}/{{name}}"),
            format!("watch{g}{ns_word}{kind}"),
            "watch",
            true,
            ns,
        ));
        if ns {
            out.push(watch_item(
                format!("{prefix}/watch/{}", d.plural),
                format!("watch{g}{kind}ListForAllNamespaces"),
                "watchlist",
                false,
                false,
            ));
        }
    }
    out
}

impl Ctx<'_> {
    fn replace_op(
        &self,
        g: &str,
        ns_word: &str,
        kind: &str,
        suffix: &str,
        schema: &str,
        gvk: &Value,
    ) -> Value {
        let what = if suffix.is_empty() {
            format!("the specified {kind}")
        } else {
            format!("{} of the specified {kind}", suffix.to_lowercase())
        };
        self.op(
            "put",
            format!("replace{g}{ns_word}{kind}{suffix}"),
            format!("replace {what}"),
            WRITE_PARAMS,
            Some((schema, vec!["*/*"], true)),
            self.responses(&[("200", "OK"), ("201", "Created")], schema, false),
            gvk,
            PRODUCES,
        )
    }

    fn patch_op(
        &self,
        g: &str,
        ns_word: &str,
        kind: &str,
        suffix: &str,
        schema: &str,
        gvk: &Value,
    ) -> Value {
        let what = if suffix.is_empty() {
            format!("the specified {kind}")
        } else {
            format!("{} of the specified {kind}", suffix.to_lowercase())
        };
        self.op(
            "patch",
            format!("patch{g}{ns_word}{kind}{suffix}"),
            format!("partially update {what}"),
            PATCH_PARAMS,
            Some((PATCH, patch_types(self.def.builtin), true)),
            self.responses(&[("200", "OK"), ("201", "Created")], schema, false),
            gvk,
            PRODUCES,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_ids_follow_kubernetes_names() {
        assert_eq!(group_ids("", "v1"), ("CoreV1".into(), "core_v1".into()));
        assert_eq!(group_ids("apps", "v1"), ("AppsV1".into(), "apps_v1".into()));
        assert_eq!(
            group_ids("rbac.authorization.k8s.io", "v1"),
            ("RbacAuthorizationV1".into(), "rbacAuthorization_v1".into())
        );
        assert_eq!(
            group_ids("stable.example.com", "v1beta1"),
            (
                "StableExampleComV1beta1".into(),
                "stableExampleCom_v1beta1".into()
            )
        );
    }
}
