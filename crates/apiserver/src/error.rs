//! API errors rendered as `Status` bodies.

use crate::registry::ResourceDef;
use kubewright_core::{Status, StatusCause, StatusDetails};

/// An error answered to the client as a Status.
#[derive(Debug, Clone)]
pub struct ApiError(pub Box<Status>, pub Option<u32>);

impl ApiError {
    pub(crate) fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self(Box::new(Status::failure(code, reason, message)), None)
    }
    fn with(mut self, details: StatusDetails) -> Self {
        self.0.details = Some(details);
        self
    }
    /// 400 BadRequest.
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", msg)
    }
    /// 404 NotFound for an object.
    pub fn not_found(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", def.group_resource()),
        )
        .with(details(def, name))
    }
    /// 404 for a namespace.
    pub fn namespace_not_found(ns: &str) -> Self {
        Self::new(404, "NotFound", format!("namespaces \"{ns}\" not found")).with(StatusDetails {
            name: ns.into(),
            kind: "namespaces".into(),
            ..Default::default()
        })
    }
    /// 404 for an unknown path.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with(StatusDetails::default())
    }
    /// 409 AlreadyExists.
    pub fn already_exists(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", def.group_resource()),
        )
        .with(details(def, name))
    }
    /// 409 Conflict with a reason text.
    pub fn conflict(def: &ResourceDef, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                def.group_resource()
            ),
        )
        .with(details(def, name))
    }
    /// 409 Conflict for a stale resourceVersion.
    pub fn optimistic_lock(def: &ResourceDef, name: &str) -> Self {
        Self::conflict(
            def,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }
    /// 422 Invalid with field causes.
    pub fn invalid(def: &ResourceDef, name: &str, causes: Vec<StatusCause>) -> Self {
        let summary = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect::<Vec<_>>()
            .join(", ");
        let group = if def.group.is_empty() {
            String::new()
        } else {
            format!(".{}", def.group)
        };
        Self::new(
            422,
            "Invalid",
            format!("{}{group} \"{name}\" is invalid: {summary}", def.kind),
        )
        .with(StatusDetails {
            name: name.into(),
            group: def.group.clone(),
            kind: def.kind.clone(),
            causes,
            ..Default::default()
        })
    }
    /// 422 for one field.
    pub fn invalid_field(
        def: &ResourceDef,
        name: &str,
        field: &str,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        let message = message.into();
        let kind_text = match reason {
            "FieldValueRequired" => "Required value",
            "FieldValueForbidden" => "Forbidden",
            "FieldValueNotSupported" => "Unsupported value",
            "FieldValueDuplicate" => "Duplicate value",
            "FieldValueTooLong" => "Too long",
            _ => "Invalid value",
        };
        Self::invalid(
            def,
            name,
            vec![StatusCause {
                reason: reason.into(),
                message: format!("{kind_text}: {message}"),
                field: field.into(),
            }],
        )
    }
    /// 422 Invalid with a plain message (e.g. ListOptions, DeleteOptions).
    pub fn invalid_msg(msg: impl Into<String>) -> Self {
        Self::new(422, "Invalid", msg)
    }
    /// 403 Forbidden.
    pub fn forbidden(def: &ResourceDef, name: &str, msg: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", msg).with(details(def, name))
    }
    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(msg: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", msg)
    }
    /// 406 NotAcceptable.
    pub fn not_acceptable(msg: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", msg)
    }
    /// 410 Expired.
    pub fn expired(msg: impl Into<String>) -> Self {
        Self::new(410, "Expired", msg)
    }
    /// 413 RequestEntityTooLarge.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }
    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(msg: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", msg)
    }
    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }
    /// 500 InternalError.
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", msg.into()),
        )
    }
    /// 504 Timeout.
    pub fn timeout(msg: impl Into<String>, retry_after: u32) -> Self {
        let mut e = Self::new(504, "Timeout", msg);
        e.0.details = Some(StatusDetails {
            retry_after_seconds: retry_after as i32,
            ..Default::default()
        });
        e.1 = Some(retry_after);
        e
    }
    /// The HTTP code.
    pub fn code(&self) -> u16 {
        self.0.code
    }
}

/// A write that could not be made durable: 500 InternalError, as kube-apiserver answers
/// storage failures (`Internal error occurred: ...` with the error as the cause).
impl From<crate::storage::StorageError> for ApiError {
    fn from(e: crate::storage::StorageError) -> Self {
        let msg = e.to_string();
        let mut err = Self::internal(msg.clone());
        err.0.details = Some(StatusDetails {
            causes: vec![StatusCause {
                message: msg,
                ..Default::default()
            }],
            ..Default::default()
        });
        err
    }
}

fn details(def: &ResourceDef, name: &str) -> StatusDetails {
    StatusDetails {
        name: name.into(),
        group: def.group.clone(),
        kind: def.plural.clone(),
        ..Default::default()
    }
}
