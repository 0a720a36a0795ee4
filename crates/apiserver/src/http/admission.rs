//! Admission, as kube-apiserver runs it on every write: mutating webhooks, then (after
//! the registry's own validation) ValidatingAdmissionPolicies and validating webhooks.
//!
//! [`Attributes`] is what every admission step sees of a request (the `AdmissionRequest`
//! of a webhook; `request`, `object`, `oldObject` of a policy's CEL).
//!
//! The write paths of `http/api.rs`, `http/patch.rs` and `http/delete.rs` run the
//! built-in mutating plugins (`pods::mutate` on a new pod) and [`mutate`] on the decoded
//! object, then take the writer's managedFields from the object as it was before
//! mutation ([`Admission::basis`]), prepare and validate it as the registry does, then
//! run the built-in validating plugins and [`validate`] on the object about to be
//! stored, all for requests from clients. Writes of the server's own controllers (garbage collection,
//! namespace deletion, the bootstrap policy) skip admission, like kube-apiserver's
//! internal writes that do not go through its HTTP handlers.

pub(crate) mod call;
pub(crate) mod pod_security;
pub(crate) mod pods;
pub(crate) mod policy;
pub(crate) mod webhook;

use crate::auth::rbac::UserInfo;
use crate::error::ApiError;
use crate::http::api::ApiServer;
use crate::registry::ResourceDef;
use serde_json::{Value, json};

/// The operation being admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
    /// pods/exec, attach, portforward: not admitted yet (see docs/webhooks.md).
    #[allow(dead_code)]
    Connect,
}

impl Operation {
    /// As webhooks and policies spell it: `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// One request, as admission sees it.
#[derive(Clone, Debug)]
pub(crate) struct Attributes {
    pub operation: Operation,
    /// API group of the resource ("" for core).
    pub group: String,
    /// Version the request was made in.
    pub version: String,
    /// Kind of the object.
    pub kind: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource ("" for the main resource).
    pub subresource: String,
    /// Object name ("" on a create with generateName, before one is generated).
    pub name: String,
    /// Namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// Who asked.
    pub user: UserInfo,
    /// The new object (create, update), or the options of a connect.
    pub object: Option<Value>,
    /// The current object (update, delete).
    pub old_object: Option<Value>,
    /// CreateOptions, UpdateOptions, DeleteOptions (or null).
    pub options: Option<Value>,
    /// A dry run.
    pub dry_run: bool,
}

impl Attributes {
    /// Attributes of a request on `def` (objects, name and options filled in later).
    pub(crate) fn new(
        operation: Operation,
        def: &ResourceDef,
        subresource: Option<&str>,
        namespace: &str,
        name: &str,
        user: &UserInfo,
        dry_run: bool,
    ) -> Self {
        Attributes {
            operation,
            group: def.group.clone(),
            version: def.version.clone(),
            kind: def.kind.clone(),
            resource: def.plural.clone(),
            subresource: subresource.unwrap_or("").to_string(),
            name: name.to_string(),
            namespace: if def.namespaced {
                namespace.to_string()
            } else {
                String::new()
            },
            user: user.clone(),
            object: None,
            old_object: None,
            options: None,
            dry_run,
        }
    }

    /// Sets the options object (`CreateOptions`, `UpdateOptions`, `DeleteOptions`), as
    /// kube-apiserver passes them: with `dryRun: ["All"]` on a dry run.
    pub(crate) fn with_options(mut self, kind: &str, mut fields: Value) -> Self {
        if let Some(o) = fields.as_object_mut() {
            o.insert("kind".into(), json!(kind));
            o.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
            if self.dry_run {
                o.insert("dryRun".into(), json!(["All"]));
            }
        }
        self.options = Some(fields);
        self
    }
}

/// The admission of one client request: its attributes (objects set per step) and the
/// warnings admission gave, for the response's `Warning` headers.
#[derive(Debug)]
pub(crate) struct Admission {
    pub attrs: Attributes,
    pub warnings: Vec<String>,
    /// The object as the writer sent it, kept when mutating admission changed it.
    /// kube-apiserver's field manager records the writer's managedFields before
    /// mutating admission runs, so what admission adds is owned by no one: the write
    /// paths take the writer's fields from this object when it is set.
    pub basis: Option<Value>,
}

impl Admission {
    pub(crate) fn new(attrs: Attributes) -> Self {
        Self {
            attrs,
            warnings: Vec::new(),
            basis: None,
        }
    }
}

/// Mutating admission: the mutating webhooks over `adm.attrs.object` (the built-in
/// mutating plugins, which run first, are the caller's). Whether they changed it; the
/// object before the first change is kept in `adm.basis` unless that is already set.
pub(crate) async fn mutate(srv: &ApiServer, adm: &mut Admission) -> Result<bool, ApiError> {
    let def = srv
        .registry
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&adm.attrs.group, &adm.attrs.version, &adm.attrs.resource);
    let ty = def
        .as_deref()
        .and_then(|d| crate::registry::schema::for_resource(d, None));
    let before = adm.attrs.object.clone();
    let mut pass = if adm.attrs.subresource.is_empty() {
        policy::mutating::mutate(&srv.storage, &mut adm.attrs, ty, None)?
    } else {
        policy::mutating::Pass::default()
    };
    if pass.changed && adm.basis.is_none() {
        adm.basis = before;
    }
    let hooks_changed =
        webhook::mutate(srv, &mut adm.attrs, &mut adm.warnings, &mut adm.basis).await?;
    if hooks_changed {
        pass.changed_after();
    }
    let mut changed = pass.changed || hooks_changed;
    if pass.needs_reinvocation() {
        let again = policy::mutating::mutate(&srv.storage, &mut adm.attrs, ty, Some(&pass))?;
        changed |= again.changed;
    }
    Ok(changed)
}

/// Validating admission: PodSecurity, ValidatingAdmissionPolicies, then the validating
/// webhooks (kube-apiserver's order; ResourceQuota, last, is the caller's).
pub(crate) async fn validate(srv: &ApiServer, adm: &mut Admission) -> Result<(), ApiError> {
    let warnings = pod_security::validate(srv, &adm.attrs)?;
    adm.warnings.extend(warnings);
    let warnings = policy::validate(&srv.storage, &adm.attrs)?;
    adm.warnings.extend(warnings);
    webhook::validate(srv, &adm.attrs, &mut adm.warnings).await
}
