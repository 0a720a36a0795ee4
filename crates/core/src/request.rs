//! Building HTTP requests for resource verbs (no I/O).
//!
//! The client sends what these functions build; keeping URL and query construction here
//! makes it testable without a server.

use crate::params::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use serde::Serialize;

/// Errors building a request.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A parameter was invalid (e.g. an empty name).
    #[error("invalid request: {0}")]
    Validation(String),
    /// The body could not be serialised.
    #[error("failed to serialize the request body: {0}")]
    Serialize(#[from] serde_json::Error),
    /// http could not build the request.
    #[error("failed to build the request: {0}")]
    Build(#[from] http::Error),
}

/// Builds requests against one collection URL (e.g. `/api/v1/namespaces/ns/configmaps`).
#[derive(Clone, Debug)]
pub struct Request {
    /// The collection path.
    pub url_path: String,
}

const JSON: &str = "application/json";

fn with_query(path: &str, pairs: &[(&'static str, String)]) -> String {
    if pairs.is_empty() {
        return path.to_string();
    }
    let mut ser = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        ser.append_pair(k, v);
    }
    format!("{path}?{}", ser.finish())
}

fn check_name(name: &str) -> Result<(), RequestError> {
    if name.is_empty() {
        return Err(RequestError::Validation(
            "a non-empty name is required".into(),
        ));
    }
    if name.contains('/') {
        return Err(RequestError::Validation(format!(
            "name {name:?} may not contain '/'"
        )));
    }
    Ok(())
}

impl Request {
    /// A request builder for the given collection path.
    pub fn new(url_path: impl Into<String>) -> Self {
        Self {
            url_path: url_path.into(),
        }
    }

    fn object_path(&self, name: &str, sub: Option<&str>) -> Result<String, RequestError> {
        check_name(name)?;
        Ok(match sub {
            Some(s) => format!("{}/{name}/{s}", self.url_path),
            None => format!("{}/{name}", self.url_path),
        })
    }

    /// `GET` the collection.
    pub fn list(&self, lp: &ListParams) -> Result<http::Request<Vec<u8>>, RequestError> {
        if lp.version_match.is_some() && lp.resource_version.is_none() {
            return Err(RequestError::Validation(
                "resourceVersionMatch requires resourceVersion".into(),
            ));
        }
        Ok(http::Request::get(with_query(&self.url_path, &lp.query_pairs())).body(vec![])?)
    }

    /// `GET` the collection with `watch=true` from `resource_version`.
    pub fn watch(
        &self,
        wp: &WatchParams,
        resource_version: &str,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        Ok(http::Request::get(with_query(
            &self.url_path,
            &wp.query_pairs(resource_version),
        ))
        .body(vec![])?)
    }

    /// `GET` one object (or its subresource).
    pub fn get(
        &self,
        name: &str,
        sub: Option<&str>,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        Ok(http::Request::get(self.object_path(name, sub)?).body(vec![])?)
    }

    /// `POST` a new object to the collection.
    pub fn create<T: Serialize>(
        &self,
        pp: &PostParams,
        obj: &T,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        let body = serde_json::to_vec(obj)?;
        Ok(
            http::Request::post(with_query(&self.url_path, &pp.query_pairs()))
                .header(http::header::CONTENT_TYPE, JSON)
                .body(body)?,
        )
    }

    /// `POST` to a subresource of an object (e.g. `serviceaccounts/x/token`).
    pub fn create_subresource<T: Serialize>(
        &self,
        name: &str,
        sub: &str,
        pp: &PostParams,
        obj: &T,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        let body = serde_json::to_vec(obj)?;
        Ok(http::Request::post(with_query(
            &self.object_path(name, Some(sub))?,
            &pp.query_pairs(),
        ))
        .header(http::header::CONTENT_TYPE, JSON)
        .body(body)?)
    }

    /// `PUT` an object (or a subresource).
    pub fn replace<T: Serialize>(
        &self,
        name: &str,
        sub: Option<&str>,
        pp: &PostParams,
        obj: &T,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        let body = serde_json::to_vec(obj)?;
        Ok(
            http::Request::put(with_query(&self.object_path(name, sub)?, &pp.query_pairs()))
                .header(http::header::CONTENT_TYPE, JSON)
                .body(body)?,
        )
    }

    /// `PATCH` an object (or a subresource).
    pub fn patch<T: Serialize>(
        &self,
        name: &str,
        sub: Option<&str>,
        pp: &PatchParams,
        patch: &Patch<T>,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        if patch.is_apply() && pp.field_manager.is_none() {
            return Err(RequestError::Validation(
                "server-side apply requires a field manager".into(),
            ));
        }
        if pp.force && !patch.is_apply() {
            return Err(RequestError::Validation(
                "force may only be set on server-side apply".into(),
            ));
        }
        Ok(
            http::Request::patch(with_query(&self.object_path(name, sub)?, &pp.query_pairs()))
                .header(http::header::CONTENT_TYPE, patch.content_type())
                .body(patch.to_body()?)?,
        )
    }

    /// `DELETE` one object.
    pub fn delete(
        &self,
        name: &str,
        dp: &DeleteParams,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        Ok(http::Request::delete(self.object_path(name, None)?)
            .header(http::header::CONTENT_TYPE, JSON)
            .body(dp.to_body()?)?)
    }

    /// `DELETE` the collection (objects matching the list params).
    pub fn delete_collection(
        &self,
        dp: &DeleteParams,
        lp: &ListParams,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        Ok(
            http::Request::delete(with_query(&self.url_path, &lp.query_pairs()))
                .header(http::header::CONTENT_TYPE, JSON)
                .body(dp.to_body()?)?,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_urls() {
        let r = Request::new("/api/v1/namespaces/ns/configmaps");
        let req = r
            .list(&ListParams::default().labels("a in (x,y)").limit(5))
            .unwrap();
        assert_eq!(
            req.uri().to_string(),
            "/api/v1/namespaces/ns/configmaps?labelSelector=a+in+%28x%2Cy%29&limit=5"
        );
        assert!(r.get("", None).is_err());
        assert!(r.get("a/b", None).is_err());
        let p = r
            .patch(
                "x",
                Some("status"),
                &PatchParams::apply("me").force(),
                &Patch::Apply(serde_json::json!({})),
            )
            .unwrap();
        assert_eq!(
            p.uri().to_string(),
            "/api/v1/namespaces/ns/configmaps/x/status?force=true&fieldManager=me"
        );
        assert_eq!(p.headers()["content-type"], "application/apply-patch+yaml");
        assert!(
            r.patch(
                "x",
                None,
                &PatchParams::default(),
                &Patch::Apply(serde_json::json!({}))
            )
            .is_err()
        );
    }
}
