//! OpenAPI documents. Not generated yet: answered with 404 so clients fall back to their
//! compiled-in schemas (kubectl does for built-in types).

use crate::api::ApiServer;
use crate::error::ApiError;
use crate::http::{self as h, Body, Req};
use http::Response;
use std::sync::Arc;

/// Serves `/openapi/v2` and `/openapi/v3[/...]`.
pub fn serve(_srv: &Arc<ApiServer>, _req: &Req) -> Option<Response<Body>> {
    Some(h::error_response(&ApiError::path_not_found()))
}
