//! Authentication identities and RBAC authorization (Roles, ClusterRoles and their
//! bindings, evaluated like kube-apiserver's RBAC authorizer).

use crate::api::ApiServer;
use serde_json::Value;

/// Who made a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    /// User name, e.g. `alice` or `system:serviceaccount:ns:name`.
    pub name: String,
    /// Groups, e.g. `system:authenticated`.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The all-powerful user of the admin token (group `system:masters`).
    pub fn admin() -> Self {
        Self {
            name: "kubewright-admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }
    /// A user with the given groups (plus `system:authenticated`).
    pub fn new(name: &str, groups: &[&str]) -> Self {
        let mut g: Vec<String> = groups.iter().map(|s| s.to_string()).collect();
        if !g.iter().any(|x| x == "system:authenticated") {
            g.push("system:authenticated".into());
        }
        Self {
            name: name.into(),
            groups: g,
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
        }
    }
    fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
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
pub fn rules_for(srv: &ApiServer, user: &UserInfo, namespace: &str) -> Vec<Value> {
    let mut rules = Vec::new();
    let role_rules = |key: &str, ns: &str, name: &str| -> Vec<Value> {
        srv.storage
            .get(key, ns, name)
            .and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    };
    for b in srv
        .storage
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
        for b in srv
            .storage
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
pub fn authorize(srv: &ApiServer, user: &UserInfo, a: &Attributes<'_>) -> bool {
    if user.is_master() {
        return true;
    }
    // Everyone may review their own access and identity (kubectl auth can-i / whoami).
    if matches!(a.group, "authorization.k8s.io" | "authentication.k8s.io")
        && a.resource.starts_with("selfsubject")
    {
        return true;
    }
    rules_for(srv, user, a.namespace)
        .iter()
        .any(|r| rule_allows(r, a))
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
        format!("\"{}\" ", a.name)
    };
    let res = match a.subresource {
        Some(s) => format!("{}/{s}", a.resource),
        None => a.resource.to_string(),
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", a.namespace)
    };
    format!(
        "{gr} {name}is forbidden: User \"{}\" cannot {} resource \"{res}\" in API group \"{}\" {scope}",
        user.name, a.verb, a.group
    )
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
        assert_eq!(
            forbidden_message(&u, &a),
            "pods \"p1\" is forbidden: User \"system:serviceaccount:ns:ctl\" cannot get resource \"pods\" in API group \"\" in the namespace \"ns\""
        );
    }
}
