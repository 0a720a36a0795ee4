//! Admission, as kube-apiserver runs it on every write: mutating webhooks, then (after
//! the registry's own validation) ValidatingAdmissionPolicies and validating webhooks.
//!
//! [`Attributes`] is what every admission step sees of a request (the `AdmissionRequest`
//! of a webhook; `request`, `object`, `oldObject` of a policy's CEL).

pub(crate) mod policy;

use crate::auth::rbac::UserInfo;
use serde_json::Value;

/// The operation being admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
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
