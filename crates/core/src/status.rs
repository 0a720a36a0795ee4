//! `meta.k8s.io/v1 Status`: the body of every API error and of some deletes.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A `Status` object as returned by the API server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Always `Status`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Always `v1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// List metadata (usually empty; carries `continue` for expired pages).
    #[serde(default)]
    pub metadata: StatusListMeta,
    /// `Success` or `Failure`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Machine-readable reason, e.g. `NotFound`; may be empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Extra data about the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// HTTP status code (absent on success statuses from delete).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: u16,
}

fn is_zero(c: &u16) -> bool {
    *c == 0
}

/// The `metadata` of a Status (a ListMeta).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusListMeta {
    /// Continue token (for expired pagination).
    #[serde(default, rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_: Option<String>,
    /// Resource version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// `details` of a Status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// Name of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API group (omitted for core).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Resource plural, or the Kind for `Invalid`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// UID of the object concerned (deletes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Individual causes (field errors, apply conflicts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds the client should wait before retrying.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub retry_after_seconds: i32,
}

fn is_zero_i32(c: &i32) -> bool {
    *c == 0
}

/// One cause in a Status's details.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusCause {
    /// e.g. `FieldValueRequired`, `FieldManagerConflict`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Field path, e.g. `metadata.name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl Status {
    /// A failure status with the given code, reason and message.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            kind: "Status".into(),
            api_version: "v1".into(),
            status: "Failure".into(),
            message: message.into(),
            reason: reason.into(),
            code,
            ..Default::default()
        }
    }

    /// A Status synthesised from an HTTP status when the body was not a Status
    /// (e.g. a text/plain 429, an unknown-path 404).
    pub fn from_http(code: u16, body: &str) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            406 => "NotAcceptable",
            409 => "Conflict",
            410 => "Expired",
            413 => "RequestEntityTooLarge",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        };
        let mut msg: String = body.trim().chars().take(1024).collect();
        if msg.is_empty() {
            msg = format!("the server responded with HTTP {code}");
        }
        Self::failure(code, reason, msg)
    }

    /// Sets details (builder style).
    #[must_use]
    pub fn with_details(mut self, details: StatusDetails) -> Self {
        self.details = Some(details);
        self
    }

    /// Whether this is a failure status.
    pub fn is_failure(&self) -> bool {
        self.status == "Failure"
    }

    /// 404 NotFound.
    pub fn is_not_found(&self) -> bool {
        self.code == 404 || self.reason == "NotFound"
    }
    /// 409 AlreadyExists.
    pub fn is_already_exists(&self) -> bool {
        self.reason == "AlreadyExists"
    }
    /// 409 Conflict (optimistic concurrency, preconditions, apply conflicts).
    pub fn is_conflict(&self) -> bool {
        self.reason == "Conflict" || (self.code == 409 && self.reason.is_empty())
    }
    /// 410 Expired/Gone: relist.
    pub fn is_gone(&self) -> bool {
        self.code == 410 || self.reason == "Expired" || self.reason == "Gone"
    }
    /// 403 Forbidden.
    pub fn is_forbidden(&self) -> bool {
        self.code == 403 || self.reason == "Forbidden"
    }
    /// 401 Unauthorized.
    pub fn is_unauthorized(&self) -> bool {
        self.code == 401 || self.reason == "Unauthorized"
    }
    /// 422 Invalid.
    pub fn is_invalid(&self) -> bool {
        self.code == 422 || self.reason == "Invalid"
    }
    /// 429 TooManyRequests.
    pub fn is_too_many_requests(&self) -> bool {
        self.code == 429 || self.reason == "TooManyRequests"
    }
    /// 400 BadRequest.
    pub fn is_bad_request(&self) -> bool {
        self.code == 400 || self.reason == "BadRequest"
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code,
            if self.reason.is_empty() {
                "Unknown"
            } else {
                &self.reason
            },
            self.message
        )
    }
}

impl std::error::Error for Status {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_server_status() {
        let s: Status = serde_json::from_str(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"x\" not found","reason":"NotFound","details":{"name":"x","kind":"configmaps"},"code":404}"#,
        )
        .unwrap();
        assert!(s.is_not_found());
        assert_eq!(s.details.unwrap().kind, "configmaps");
    }

    #[test]
    fn synthesises_from_http() {
        let s = Status::from_http(429, "Too many requests, please try again later.\n");
        assert!(s.is_too_many_requests());
        assert_eq!(s.message, "Too many requests, please try again later.");
        assert!(Status::from_http(410, "").is_gone());
    }
}
