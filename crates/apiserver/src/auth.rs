//! Authentication helpers, RBAC authorization and impersonation.

pub(crate) mod impersonation;
pub(crate) mod rbac;
pub(crate) mod token_file;
