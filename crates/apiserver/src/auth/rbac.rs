//! Authentication identities and RBAC authorization (Roles, ClusterRoles and their
//! bindings, evaluated like kube-apiserver's RBAC authorizer).

use crate::error::{ApiError, go_quote};
use crate::registry::ResourceDef;
use crate::storage::Storage;
use serde_json::Value;
use std::collections::BTreeMap;

/// Who made a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name, e.g. `alice` or `system:serviceaccount:ns:name`.
    pub name: String,
    /// UID ("" when none).
    pub uid: String,
    /// Groups, e.g. `system:authenticated`.
    pub groups: Vec<String>,
    /// Extra attributes, e.g. `authentication.kubernetes.io/node-name` of a ServiceAccount
    /// token bound to a pod.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The all-powerful user of the admin token (group `system:masters`).
    pub fn admin() -> Self {
        Self {
            name: "kubewright-admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            ..Self::default()
        }
    }
    /// A user with the given groups, plus `system:authenticated` unless they include
    /// `system:unauthenticated`.
    pub fn new(name: &str, groups: &[&str]) -> Self {
        let mut g: Vec<String> = groups.iter().map(|s| s.to_string()).collect();
        if !g
            .iter()
            .any(|x| x == "system:authenticated" || x == "system:unauthenticated")
        {
            g.push("system:authenticated".into());
        }
        Self {
            name: name.into(),
            groups: g,
            ..Self::default()
        }
    }
    /// The identity of a ServiceAccount token.
    pub fn service_account(ns: &str, name: &str) -> Self {
        Self {
            name: format!("system:serviceaccount:{ns}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".into(),
            ],
            ..Self::default()
        }
    }
    pub(crate) fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
    pub(crate) fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// What a request wants to do.
#[derive(Clone, Debug)]
pub struct Attributes<'a> {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: &'a str,
    /// API group.
    pub group: &'a str,
    /// Plural resource.
    pub resource: &'a str,
    /// Subresource, if any.
    pub subresource: Option<&'a str>,
    /// Namespace ("" for cluster scope).
    pub namespace: &'a str,
    /// Object name ("" when none).
    pub name: &'a str,
}

fn strs(v: &Value, k: &str) -> Vec<String> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn rule_allows(rule: &Value, a: &Attributes<'_>) -> bool {
    let verbs = strs(rule, "verbs");
    if !verbs.iter().any(|v| v == "*" || v == a.verb) {
        return false;
    }
    let groups = strs(rule, "apiGroups");
    if !groups.iter().any(|g| g == "*" || g == a.group) {
        return false;
    }
    let want = match a.subresource {
        Some(s) => format!("{}/{s}", a.resource),
        None => a.resource.to_string(),
    };
    let resources = strs(rule, "resources");
    let res_ok = resources.iter().any(|r| {
        r == "*"
            || *r == want
            || (a
                .subresource
                .is_some_and(|s| r.strip_prefix("*/") == Some(s)))
    });
    if !res_ok {
        return false;
    }
    let names = strs(rule, "resourceNames");
    names.is_empty() || (!a.name.is_empty() && names.iter().any(|n| n == a.name))
}

fn subject_matches(subject: &Value, user: &UserInfo, binding_ns: &str) -> bool {
    let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
    match kind {
        "User" => user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = subject
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or(binding_ns);
            user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

/// The rules granted to `user` in `namespace` (cluster-wide rules included).
pub fn rules_for(store: &Storage, user: &UserInfo, namespace: &str) -> Vec<Value> {
    let mut rules = Vec::new();
    let role_rules = |key: &str, ns: &str, name: &str| -> Vec<Value> {
        store
            .get(key, ns, name)
            .and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    };
    for b in store
        .list("rbac.authorization.k8s.io/clusterrolebindings", None)
        .0
    {
        if strs_subjects(&b)
            .iter()
            .any(|s| subject_matches(s, user, ""))
        {
            let name = b
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            rules.extend(role_rules(
                "rbac.authorization.k8s.io/clusterroles",
                "",
                name,
            ));
        }
    }
    if !namespace.is_empty() {
        for b in store
            .list("rbac.authorization.k8s.io/rolebindings", Some(namespace))
            .0
        {
            if strs_subjects(&b)
                .iter()
                .any(|s| subject_matches(s, user, namespace))
            {
                let kind = b
                    .pointer("/roleRef/kind")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let name = b
                    .pointer("/roleRef/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if kind == "ClusterRole" {
                    rules.extend(role_rules(
                        "rbac.authorization.k8s.io/clusterroles",
                        "",
                        name,
                    ));
                } else {
                    rules.extend(role_rules(
                        "rbac.authorization.k8s.io/roles",
                        namespace,
                        name,
                    ));
                }
            }
        }
    }
    rules
}

fn strs_subjects(b: &Value) -> Vec<Value> {
    b.get("subjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Whether `user` may do `a`.
pub fn authorize(store: &Storage, user: &UserInfo, a: &Attributes<'_>) -> bool {
    if user.is_master() {
        return true;
    }
    // Every authenticated user may review their own access and identity (kubectl auth
    // can-i / whoami): the default `system:basic-user` binding to `system:authenticated`.
    if a.verb == "create"
        && matches!(a.group, "authorization.k8s.io" | "authentication.k8s.io")
        && a.resource.starts_with("selfsubject")
        && user.in_group("system:authenticated")
    {
        return true;
    }
    rules_for(store, user, a.namespace)
        .iter()
        .any(|r| rule_allows(r, a))
}

/// Whether `user` may do `verb` on the non-resource URL `path` (`nonResourceURLs` rules of
/// ClusterRoles bound cluster-wide; a trailing `*` matches any suffix).
pub fn authorize_path(store: &Storage, user: &UserInfo, verb: &str, path: &str) -> bool {
    if user.is_master() {
        return true;
    }
    rules_for(store, user, "").iter().any(|r| {
        strs(r, "verbs").iter().any(|v| v == "*" || v == verb)
            && strs(r, "nonResourceURLs").iter().any(|u| {
                u == "*" || u == path || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
            })
    })
}

/// What may be asked of the authorizer: a resource request or a non-resource path.
pub enum Request<'a> {
    /// A resource request.
    Resource(&'a Attributes<'a>),
    /// A non-resource URL with its verb.
    Path { verb: &'a str, path: &'a str },
}

/// Why RBAC allows `req` for `user`, as kube-apiserver's RBAC authorizer words it
/// (`RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to Group "g"`): the first
/// binding, cluster role bindings first, whose role has a rule that allows it. `None` when
/// no binding does.
pub fn allow_reason(store: &Storage, user: &UserInfo, req: &Request<'_>) -> Option<String> {
    let allows = |rule: &Value| match req {
        Request::Resource(a) => rule_allows(rule, a),
        Request::Path { verb, path } => {
            strs(rule, "verbs").iter().any(|v| v == "*" || v == verb)
                && strs(rule, "nonResourceURLs").iter().any(|u| {
                    u == "*"
                        || u == path
                        || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
                })
        }
    };
    let namespace = match req {
        Request::Resource(a) => a.namespace,
        Request::Path { .. } => "",
    };
    let describe = |subject: &Value, binding_ns: &str| {
        let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
        let ns = subject
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or(binding_ns);
        if kind == "ServiceAccount" && !ns.is_empty() {
            format!("{kind} {}", go_quote(&format!("{name}/{ns}")))
        } else {
            format!("{kind} {}", go_quote(name))
        }
    };
    let role = |kind: &str, ns: &str, name: &str| -> Vec<Value> {
        let key = if kind == "ClusterRole" {
            "rbac.authorization.k8s.io/clusterroles"
        } else {
            "rbac.authorization.k8s.io/roles"
        };
        let ns = if kind == "ClusterRole" { "" } else { ns };
        store
            .get(key, ns, name)
            .and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    };
    let mut sources = vec![(
        "rbac.authorization.k8s.io/clusterrolebindings",
        None::<&str>,
    )];
    if !namespace.is_empty() {
        sources.push(("rbac.authorization.k8s.io/rolebindings", Some(namespace)));
    }
    for (key, ns) in sources {
        for b in store.list(key, ns).0 {
            let binding_ns = ns.unwrap_or("");
            let Some(subject) = strs_subjects(&b)
                .into_iter()
                .find(|s| subject_matches(s, user, binding_ns))
            else {
                continue;
            };
            let role_kind = b
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or("");
            let role_name = b
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !role(role_kind, binding_ns, role_name).iter().any(&allows) {
                continue;
            }
            let name = b
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let binding = match ns {
                None => format!("ClusterRoleBinding {}", go_quote(name)),
                Some(n) => format!("RoleBinding {}", go_quote(&format!("{name}/{n}"))),
            };
            return Some(format!(
                "RBAC: allowed by {binding} of {role_kind} {} to {}",
                go_quote(role_name),
                describe(&subject, binding_ns)
            ));
        }
    }
    None
}

/// The Forbidden message of kube-apiserver.
pub fn forbidden_message(user: &UserInfo, a: &Attributes<'_>) -> String {
    let gr = if a.group.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let name = if a.name.is_empty() {
        String::new()
    } else {
        format!("{} ", go_quote(a.name))
    };
    let res = match a.subresource {
        Some(s) => format!("{}/{s}", a.resource),
        None => a.resource.to_string(),
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {}", go_quote(a.namespace))
    };
    format!(
        "{gr} {name}is forbidden: User {} cannot {} resource {} in API group {} {scope}",
        go_quote(&user.name),
        a.verb,
        go_quote(&res),
        go_quote(a.group)
    )
}

/// Whether `owner` (the rules a user holds) covers every permission `rule` grants: each
/// (group, resource, verb, name) and each (URL, verb), with `*` only covered by `*`.
fn covers(owner: &[Value], rule: &Value) -> bool {
    let one = |v: &Value, k: &str, want: &str| strs(v, k).iter().any(|x| x == "*" || x == want);
    let urls = strs(rule, "nonResourceURLs");
    let verbs = strs(rule, "verbs");
    if !urls.is_empty() {
        return urls.iter().all(|u| {
            verbs.iter().all(|verb| {
                owner.iter().any(|o| {
                    one(o, "verbs", verb)
                        && strs(o, "nonResourceURLs").iter().any(|ou| {
                            ou == u
                                || ou == "*"
                                || ou
                                    .strip_suffix('*')
                                    .is_some_and(|p| u.starts_with(p) && !u.ends_with('*'))
                        })
                })
            })
        });
    }
    let names = strs(rule, "resourceNames");
    strs(rule, "apiGroups").iter().all(|g| {
        strs(rule, "resources").iter().all(|r| {
            verbs.iter().all(|verb| {
                owner.iter().any(|o| {
                    if !(one(o, "verbs", verb) && one(o, "apiGroups", g)) {
                        return false;
                    }
                    let res_ok = strs(o, "resources").iter().any(|or| {
                        or == "*"
                            || or == r
                            || or.strip_prefix("*/").is_some_and(|sub| {
                                r.split_once('/').is_some_and(|(_, rs)| rs == sub)
                            })
                    });
                    let owner_names = strs(o, "resourceNames");
                    res_ok
                        && (owner_names.is_empty()
                            || (!names.is_empty() && names.iter().all(|n| owner_names.contains(n))))
                })
            })
        })
    })
}

fn groups_text(user: &UserInfo) -> String {
    let quoted: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

fn rule_text(rule: &Value) -> String {
    let list = |k: &str| {
        let v = strs(rule, k);
        let quoted: Vec<String> = v.iter().map(|x| format!("{x:?}")).collect();
        format!("[{}]", quoted.join(" "))
    };
    let mut parts = Vec::new();
    for (k, label) in [
        ("apiGroups", "APIGroups"),
        ("resources", "Resources"),
        ("resourceNames", "ResourceNames"),
        ("nonResourceURLs", "NonResourceURLs"),
        ("verbs", "Verbs"),
    ] {
        if rule
            .get(k)
            .is_some_and(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        {
            parts.push(format!("{label}:{}", list(k)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// RBAC's privilege-escalation prevention for writes of roles and bindings: a user may
/// only grant permissions it holds itself, unless it may `escalate` (roles) or `bind`
/// (bindings) the role in question.
pub fn check_escalation(
    store: &Storage,
    user: &UserInfo,
    def: &ResourceDef,
    obj: &Value,
    namespace: &str,
) -> Result<(), ApiError> {
    if def.group != "rbac.authorization.k8s.io" || user.is_master() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let ns = if def.namespaced { namespace } else { "" };
    let may = |verb: &str, resource: &str, role_name: &str| {
        authorize(
            store,
            user,
            &Attributes {
                verb,
                group: "rbac.authorization.k8s.io",
                resource,
                subresource: None,
                namespace: ns,
                name: role_name,
            },
        )
    };
    let (requested, what): (Vec<Value>, &str) = match def.plural.as_str() {
        "roles" | "clusterroles" => {
            if may("escalate", &def.plural, name) {
                return Ok(());
            }
            let mut rules = obj
                .get("rules")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if obj.get("aggregationRule").is_some_and(|a| !a.is_null()) {
                // An aggregated role can gather any permission: only full authority may
                // create one.
                rules.push(
                    serde_json::json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
                );
                rules.push(serde_json::json!({"nonResourceURLs": ["*"], "verbs": ["*"]}));
            }
            (rules, "grant")
        }
        "rolebindings" | "clusterrolebindings" => {
            let kind = obj
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or("");
            let role = obj
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let (key, role_ns, resource) = if kind == "Role" {
                ("rbac.authorization.k8s.io/roles", ns, "roles")
            } else {
                ("rbac.authorization.k8s.io/clusterroles", "", "clusterroles")
            };
            if may("bind", resource, role) {
                return Ok(());
            }
            let Some(role_obj) = store.get(key, role_ns, role) else {
                // Like kube-apiserver: a binding to a missing role needs `bind`.
                return Err(ApiError::forbidden(
                    def,
                    name,
                    format!(
                        "{}.rbac.authorization.k8s.io \"{name}\" is forbidden: user \"{}\" (groups={}) is attempting to grant RBAC permissions not currently held: {resource}.rbac.authorization.k8s.io \"{role}\" not found",
                        def.plural,
                        user.name,
                        groups_text(user)
                    ),
                ));
            };
            let rules = role_obj
                .get("rules")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            (rules, "grant")
        }
        _ => return Ok(()),
    };
    let owner = rules_for(store, user, ns);
    let missing: Vec<&Value> = requested.iter().filter(|r| !covers(&owner, r)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = missing.iter().map(|r| rule_text(r)).collect();
    Err(ApiError::forbidden(
        def,
        name,
        format!(
            "{}.rbac.authorization.k8s.io \"{name}\" is forbidden: user \"{}\" (groups={}) is attempting to {what} RBAC permissions not currently held:\n{}",
            def.plural,
            user.name,
            groups_text(user),
            list.join("\n")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rule_matching() {
        let a = Attributes {
            verb: "get",
            group: "",
            resource: "pods",
            subresource: None,
            namespace: "ns",
            name: "p1",
        };
        assert!(rule_allows(
            &json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}),
            &a
        ));
        assert!(rule_allows(
            &json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
            &a
        ));
        assert!(!rule_allows(
            &json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}),
            &a
        ));
        assert!(!rule_allows(
            &json!({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]}),
            &a
        ));
        assert!(rule_allows(
            &json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p1"]}),
            &a
        ));
        assert!(!rule_allows(
            &json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p2"]}),
            &a
        ));
        let log = Attributes {
            subresource: Some("log"),
            ..a.clone()
        };
        assert!(
            !rule_allows(
                &json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}),
                &log
            ),
            "pods does not match pods/log"
        );
        let scale = Attributes {
            verb: "update",
            group: "apps",
            resource: "deployments",
            subresource: Some("scale"),
            namespace: "ns",
            name: "d",
        };
        assert!(rule_allows(
            &json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["*/scale"]}),
            &scale
        ));
        let create = Attributes {
            verb: "create",
            name: "",
            ..a.clone()
        };
        assert!(!rule_allows(
            &json!({"verbs": ["create"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p1"]}),
            &create
        ));
        let u = UserInfo::service_account("ns", "ctl");
        assert!(subject_matches(
            &json!({"kind": "ServiceAccount", "name": "ctl"}),
            &u,
            "ns"
        ));
        assert!(subject_matches(
            &json!({"kind": "Group", "name": "system:serviceaccounts:ns"}),
            &u,
            ""
        ));
        assert!(!subject_matches(
            &json!({"kind": "ServiceAccount", "name": "ctl", "namespace": "other"}),
            &u,
            "ns"
        ));
        let owner = vec![
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "configmaps"]}),
            json!({"verbs": ["*"], "apiGroups": ["apps"], "resources": ["*/scale"]}),
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/*"]}),
        ];
        assert!(covers(
            &owner,
            &json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]})
        ));
        assert!(covers(
            &owner,
            &json!({"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]})
        ));
        assert!(!covers(
            &owner,
            &json!({"verbs": ["delete"], "apiGroups": [""], "resources": ["pods"]})
        ));
        assert!(!covers(
            &owner,
            &json!({"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]})
        ));
        assert!(!covers(
            &owner,
            &json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["pods"]})
        ));
        assert!(covers(
            &owner,
            &json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments/scale"]})
        ));
        assert!(covers(
            &owner,
            &json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/etcd"]})
        ));
        assert!(!covers(
            &owner,
            &json!({"verbs": ["get"], "nonResourceURLs": ["/metrics"]})
        ));
        let named = vec![
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s1"]}),
        ];
        assert!(covers(
            &named,
            &json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s1"]})
        ));
        assert!(!covers(
            &named,
            &json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]})
        ));
        assert_eq!(
            rule_text(&json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]})),
            "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"
        );
        assert_eq!(
            forbidden_message(&u, &a),
            "pods \"p1\" is forbidden: User \"system:serviceaccount:ns:ctl\" cannot get resource \"pods\" in API group \"\" in the namespace \"ns\""
        );
    }
}
