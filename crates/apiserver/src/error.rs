//! API errors rendered as `Status` bodies.

mod go_json;
mod go_labels;

use kubewright_core::{Status, StatusCause, StatusDetails};

pub use go_json::syntax_error as go_json_error;
pub(crate) use go_json::{MAX_JSON_DEPTH, first_too_deep, json_too_deep, nesting_depth};
pub use go_labels::{label_selector_error, label_value_errors, qualified_name_errors};

/// An error answered to the client as a Status.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The `Status` body.
    pub status: Box<Status>,
    /// The `Retry-After` header's seconds, if the answer carries one.
    pub retry_after: Option<u32>,
    /// Whether the answer carries `X-Content-Type-Options: nosniff` (kube-apiserver's
    /// authorization filter sets it on its 403s; handlers' errors do not).
    pub nosniff: bool,
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self::from_status(Status::failure(code, reason, message))
    }
    /// An error answering `status` as it is.
    pub fn from_status(status: Status) -> Self {
        Self {
            status: Box::new(status),
            retry_after: None,
            nosniff: false,
        }
    }
    /// Marks a 403 as the authorization filter's (`X-Content-Type-Options: nosniff`).
    pub fn authorization_failure(mut self) -> Self {
        self.nosniff = true;
        self
    }
    pub(crate) fn with(mut self, details: StatusDetails) -> Self {
        self.status.details = Some(details);
        self
    }
    /// 400 BadRequest.
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", msg)
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
    /// 422 Invalid with a message. An options error
    /// (`ListOptions.meta.k8s.io "" is invalid: <field>: <error>`) gets the details
    /// kube-apiserver gives it: group `meta.k8s.io`, the options kind and the cause.
    pub fn invalid_msg(msg: impl Into<String>) -> Self {
        let msg = msg.into();
        let details = options_details(&msg);
        let mut e = Self::new(422, "Invalid", msg);
        e.status.details = details;
        e
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
        e.status.details = Some(StatusDetails {
            retry_after_seconds: retry_after as i32,
            ..Default::default()
        });
        e.retry_after = Some(retry_after);
        e
    }
    /// The HTTP code.
    pub fn code(&self) -> u16 {
        self.status.code
    }
}

/// A write that could not be made durable: 500 InternalError, as kube-apiserver answers
/// storage failures (`Internal error occurred: ...` with the error as the cause).
impl From<crate::storage::StorageError> for ApiError {
    fn from(e: crate::storage::StorageError) -> Self {
        Self::internal_cause(e.to_string())
    }
}

impl ApiError {
    /// 500 InternalError with the error as its only cause, as kube-apiserver's
    /// `NewInternalError` writes it.
    pub fn internal_cause(msg: impl Into<String>) -> Self {
        let msg = msg.into();
        let mut err = Self::internal(msg.clone());
        err.status.details = Some(StatusDetails {
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

/// The word Go's `encoding/json` uses for a JSON value's type in an `UnmarshalTypeError`
/// (`None` for `null`, which decodes into anything).
pub(crate) fn go_json_type(v: &serde_json::Value) -> Option<&'static str> {
    use serde_json::Value;
    match v {
        Value::Null => None,
        Value::Bool(_) => Some("bool"),
        Value::Number(_) => Some("number"),
        Value::String(_) => Some("string"),
        Value::Array(_) => Some("array"),
        Value::Object(_) => Some("object"),
    }
}

/// A field error's cause as kube-apiserver reports it: `Required value`.
pub(crate) fn required_cause(field: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.into(),
    }
}

/// `Invalid value: <value>: <why>`, the value already printed as Go prints it.
pub(crate) fn invalid_cause(field: &str, value: &str, why: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {value}: {why}"),
        field: field.into(),
    }
}

/// `Forbidden: <why>`.
pub(crate) fn forbidden_cause(field: &str, why: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueForbidden".into(),
        message: format!("Forbidden: {why}"),
        field: field.into(),
    }
}

/// apimachinery's `IsDNS1123Label` error text.
pub(crate) const DNS_LABEL_ERROR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// apimachinery's `IsDNS1123Subdomain` error text.
pub(crate) const DNS_SUBDOMAIN_ERROR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// A value as Go's `encoding/json` writes it: compact, map keys sorted, `<`, `>`, `&`,
/// U+2028 and U+2029 escaped. (Field errors print structured values this way.)
pub(crate) fn go_json_text(v: &serde_json::Value) -> String {
    serde_json::to_string(v)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// A string quoted like Go's `%q` (`strconv.Quote`), as kube-apiserver quotes names in its
/// messages.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_errors_have_details() {
        let e = ApiError::invalid_msg(
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        );
        let d = e.status.details.unwrap();
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
        assert!(
            ApiError::invalid_msg("something else")
                .status
                .details
                .is_none()
        );
    }
}
