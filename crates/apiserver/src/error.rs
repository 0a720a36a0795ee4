//! API errors rendered as `Status` bodies.

mod go_json;
mod go_labels;

use crate::registry::ResourceDef;
use kubewright_core::{Status, StatusCause, StatusDetails};

pub use go_json::syntax_error as go_json_error;
pub use go_labels::{label_selector_error, label_value_errors, qualified_name_errors};

/// An error answered to the client as a Status: the Status, the `Retry-After` seconds,
/// and whether the answer carries `X-Content-Type-Options: nosniff` (kube-apiserver's
/// authorization filter sets it on its 403s; handlers' errors do not).
#[derive(Debug, Clone)]
pub struct ApiError(pub Box<Status>, pub Option<u32>, pub bool);

impl ApiError {
    pub(crate) fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self(
            Box::new(Status::failure(code, reason, message)),
            None,
            false,
        )
    }
    /// Marks a 403 as the authorization filter's (`X-Content-Type-Options: nosniff`).
    pub fn authorization_failure(mut self) -> Self {
        self.2 = true;
        self
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
        // Go's aggregate of field errors: without duplicates, one alone, several in
        // brackets.
        let mut all: Vec<String> = Vec::new();
        for c in &causes {
            let text = format!("{}: {}", c.field, c.message);
            if !all.contains(&text) {
                all.push(text);
            }
        }
        let summary = if all.len() == 1 {
            all.join("")
        } else {
            format!("[{}]", all.join(", "))
        };
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
    /// 422 Invalid with a message. An options error
    /// (`ListOptions.meta.k8s.io "" is invalid: <field>: <error>`) gets the details
    /// kube-apiserver gives it: group `meta.k8s.io`, the options kind and the cause.
    pub fn invalid_msg(msg: impl Into<String>) -> Self {
        let msg = msg.into();
        let details = options_details(&msg);
        let mut e = Self::new(422, "Invalid", msg);
        e.0.details = details;
        e
    }
    /// 403 Forbidden.
    pub fn forbidden(def: &ResourceDef, name: &str, msg: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", msg).with(details(def, name))
    }
    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(msg: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", msg).with(StatusDetails::default())
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

/// The cause reason of a field error message (`Forbidden: ...` -> `FieldValueForbidden`).
pub fn field_reason(message: &str) -> &'static str {
    const REASONS: [(&str, &str); 7] = [
        ("Required value", "FieldValueRequired"),
        ("Forbidden", "FieldValueForbidden"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Not found", "FieldValueNotFound"),
    ];
    REASONS
        .iter()
        .find(|(p, _)| message.starts_with(p))
        .map_or("FieldValueInvalid", |(_, r)| r)
}

/// The details of an options error message (`<Kind>.meta.k8s.io "" is invalid: <field>:
/// <error>`), `None` for other messages.
fn options_details(msg: &str) -> Option<StatusDetails> {
    let (kind, rest) = msg.split_once(".meta.k8s.io \"\" is invalid: ")?;
    if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    let (field, message) = rest.split_once(": ")?;
    Some(StatusDetails {
        group: "meta.k8s.io".into(),
        kind: kind.into(),
        causes: vec![StatusCause {
            reason: field_reason(message).into(),
            message: message.into(),
            field: field.into(),
        }],
        ..Default::default()
    })
}

fn details(def: &ResourceDef, name: &str) -> StatusDetails {
    StatusDetails {
        name: name.into(),
        group: def.group.clone(),
        kind: def.plural.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_errors_have_details() {
        let e = ApiError::invalid_msg(
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        );
        let d = e.0.details.unwrap();
        assert_eq!(
            (d.group.as_str(), d.kind.as_str()),
            ("meta.k8s.io", "ListOptions")
        );
        assert_eq!(d.causes[0].reason, "FieldValueForbidden");
        assert_eq!(d.causes[0].field, "resourceVersionMatch");
        assert_eq!(
            d.causes[0].message,
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert!(ApiError::invalid_msg("something else").0.details.is_none());
    }
}
