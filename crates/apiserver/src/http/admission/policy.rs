//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding
//! (`admissionregistration.k8s.io/v1`).

use super::Attributes;
use crate::error::ApiError;
use crate::storage::Storage;

/// Evaluates every policy whose binding matches `attrs`: `Ok` with the warnings of `Warn`
/// bindings, or the error a `Deny` binding (or a failing policy with `failurePolicy:
/// Fail`) gives.
pub(crate) fn validate(storage: &Storage, attrs: &Attributes) -> Result<Vec<String>, ApiError> {
    // Filled in by the ValidatingAdmissionPolicy work (issue 14).
    let _ = (storage, attrs);
    Ok(Vec::new())
}
