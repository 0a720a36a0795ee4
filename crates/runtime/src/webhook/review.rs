//! The wire types of admission (`admission.k8s.io/v1 AdmissionReview`) and CRD conversion
//! (`apiextensions.k8s.io/v1 ConversionReview`). k8s-openapi has neither: they are not
//! in the API server's OpenAPI document.

use kubewright_core::Status;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// `AdmissionReview`, as the API server sends it (with `request`) and as a webhook
/// answers (with `response`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReview {
    /// `admission.k8s.io/v1` (or `v1beta1`); the answer repeats the request's.
    #[serde(default)]
    pub api_version: String,
    /// `AdmissionReview`.
    #[serde(default)]
    pub kind: String,
    /// What is being admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<RawAdmissionRequest>,
    /// The webhook's decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<AdmissionResponse>,
}

/// Group, version and kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionKind {
    /// API group (empty for core).
    #[serde(default)]
    pub group: String,
    /// Version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

/// Group, version and resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionResource {
    /// API group (empty for core).
    #[serde(default)]
    pub group: String,
    /// Version.
    #[serde(default)]
    pub version: String,
    /// Resource (plural).
    #[serde(default)]
    pub resource: String,
}

/// Who made the request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInfo {
    /// User name.
    #[serde(default)]
    pub username: String,
    /// UID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Groups.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub groups: Vec<String>,
    /// Extra attributes.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The operation being admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// A create.
    Create,
    /// An update (also patch and apply).
    Update,
    /// A delete.
    Delete,
    /// A connect (exec, attach, port-forward, proxy).
    Connect,
}

/// An admission request with the objects as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawAdmissionRequest {
    /// Echoed in the response.
    pub uid: String,
    /// The kind of the object, in the version the webhook asked for.
    pub kind: GroupVersionKind,
    /// The resource, in the version the webhook asked for.
    pub resource: GroupVersionResource,
    /// The subresource (`status`, `scale`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_resource: Option<String>,
    /// The kind of the original request (differs under `matchPolicy: Equivalent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_kind: Option<GroupVersionKind>,
    /// The resource of the original request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_resource: Option<GroupVersionResource>,
    /// The subresource of the original request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_sub_resource: Option<String>,
    /// The object's name (may be empty on create with `generateName`).
    #[serde(default)]
    pub name: String,
    /// The namespace (absent for cluster-scoped objects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The operation.
    pub operation: Operation,
    /// Who asked.
    #[serde(default)]
    pub user_info: UserInfo,
    /// The new object (create, update, connect options).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// The existing object (update, delete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Value>,
    /// Whether this is a dry run: side effects are forbidden.
    #[serde(default)]
    pub dry_run: bool,
    /// The operation's options (`CreateOptions`, `UpdateOptions`, `DeleteOptions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Value>,
}

/// A webhook's decision.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// The request's uid.
    pub uid: String,
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Why not (code, reason, message), when denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// A base64-encoded JSON patch (RFC 6902).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// `JSONPatch` when `patch` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// Added to the audit event.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub audit_annotations: BTreeMap<String, String>,
    /// Shown to the client as `Warning` headers.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub warnings: Vec<String>,
}

/// `ConversionReview`: the API server asks a webhook to convert custom resources.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionReview {
    /// `apiextensions.k8s.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `ConversionReview`.
    #[serde(default)]
    pub kind: String,
    /// What to convert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<ConversionRequest>,
    /// The converted objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ConversionResponse>,
}

/// A conversion request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionRequest {
    /// Echoed in the response.
    #[serde(default, deserialize_with = "null_default")]
    pub uid: String,
    /// The `apiVersion` to convert to (`group/version`).
    #[serde(rename = "desiredAPIVersion")]
    pub desired_api_version: String,
    /// The objects, in any versions of the resource.
    #[serde(default, deserialize_with = "null_default")]
    pub objects: Vec<Value>,
}

/// A conversion answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionResponse {
    /// The request's uid.
    #[serde(default, deserialize_with = "null_default")]
    pub uid: String,
    /// The objects in the desired version, in the request's order.
    #[serde(default, deserialize_with = "null_default")]
    pub converted_objects: Vec<Value>,
    /// `Success`, or `Failure` with a message.
    #[serde(default, deserialize_with = "null_default")]
    pub result: Status,
}

/// Go encodes an empty slice or map as `null`: read it as empty.
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
    use super::*;

    #[test]
    fn go_nulls_read_as_empty() {
        // What kube-apiserver sends: an empty response with null slices.
        let review: ConversionReview = serde_json::from_str(
            r#"{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1",
                "request":{"uid":"u","desiredAPIVersion":"g/v2","objects":null},
                "response":{"uid":"","convertedObjects":null,"result":{"metadata":{}}}}"#,
        )
        .unwrap();
        assert!(review.request.unwrap().objects.is_empty());
        let admission: AdmissionReview = serde_json::from_str(
            r#"{"request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},
                "resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE",
                "userInfo":{"username":"a","groups":null,"extra":null},"object":null}}"#,
        )
        .unwrap();
        assert!(admission.request.unwrap().user_info.groups.is_empty());
    }
}
