//! Versions of custom resources whose CRD converts through a webhook
//! (`spec.conversion.strategy: Webhook`): objects are stored in the storage version and
//! converted by `apiextensions.k8s.io/v1 ConversionReview`s when they are read, listed
//! (one review per list), watched or written in another version. With the `None`
//! strategy only `apiVersion` changes (which `ApiServer::present` does).

use crate::error::ApiError;
use crate::http::api::ApiServer;
use crate::registry::ResourceDef;
use serde_json::{Value, json};
use std::time::Duration;

/// How long a conversion webhook may take (kube-apiserver's webhook converter).
const CONVERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// The conversion webhook of a custom resource: its client config, its storage version and
/// its kind.
struct Webhook {
    client_config: Value,
    storage_version: String,
    kind: String,
}

fn webhook(srv: &ApiServer, group: &str, plural: &str) -> Option<Webhook> {
    if !group.contains('.') {
        return None;
    }
    let crd = srv.storage.get(
        "apiextensions.k8s.io/customresourcedefinitions",
        "",
        &format!("{plural}.{group}"),
    )?;
    let spec = crd.get("spec")?;
    if spec.pointer("/conversion/strategy").and_then(Value::as_str) != Some("Webhook") {
        return None;
    }
    let client_config = spec.pointer("/conversion/webhook/clientConfig")?.clone();
    let storage_version = spec
        .get("versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?
        .get("name")?
        .as_str()?
        .to_string();
    let kind = spec.pointer("/names/kind")?.as_str()?.to_string();
    Some(Webhook {
        client_config,
        storage_version,
        kind,
    })
}

/// Whether objects of `def` are converted by a webhook (and so need the async paths).
pub(crate) fn by_webhook(srv: &ApiServer, def: &ResourceDef) -> bool {
    def.crd.is_some() && webhook(srv, &def.group, &def.plural).is_some()
}

fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Converts `objects` of `group`/`plural` to `version`: through the CRD's conversion
/// webhook (all objects that need it in one review), or by relabelling `apiVersion`.
pub(crate) async fn convert(
    srv: &ApiServer,
    group: &str,
    plural: &str,
    mut objects: Vec<Value>,
    version: &str,
) -> Result<Vec<Value>, ApiError> {
    let desired = api_version(group, version);
    let pending: Vec<usize> = objects
        .iter()
        .enumerate()
        .filter(|(_, o)| o.get("apiVersion").and_then(Value::as_str) != Some(desired.as_str()))
        .map(|(i, _)| i)
        .collect();
    if pending.is_empty() {
        return Ok(objects);
    }
    let Some(hook) = webhook(srv, group, plural) else {
        for i in pending {
            if let Some(o) = objects[i].as_object_mut() {
                o.insert("apiVersion".into(), Value::String(desired.clone()));
            }
        }
        return Ok(objects);
    };
    // kube-apiserver's text (500 InternalError, without the usual "Internal error
    // occurred" prefix), naming the group/version/kind converted from.
    let from = objects[pending[0]]
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = hook.kind.clone();
    let failed = |why: String| {
        ApiError::new(
            500,
            "InternalError",
            format!("conversion webhook for {from}, Kind={kind} failed: {why}"),
        )
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let sent: Vec<Value> = pending.iter().map(|i| objects[*i].clone()).collect();
    let review = json!({
        "kind": "ConversionReview",
        "apiVersion": "apiextensions.k8s.io/v1",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": sent},
    });
    let body = serde_json::to_vec(&review).unwrap_or_default();
    let raw = crate::http::admission::call::post(
        &srv.storage,
        &hook.client_config,
        body,
        CONVERSION_TIMEOUT,
    )
    .await
    .map_err(failed)?;
    let answer: Value = serde_json::from_slice(&raw).map_err(|_| {
        failed(format!(
            "couldn't get version/kind; json parse error: {}",
            crate::error::go_json_error(&raw)
        ))
    })?;
    let Some(resp) = answer.get("response").filter(|r| r.is_object()) else {
        return Err(failed("no response provided".into()));
    };
    let got = resp.get("uid").and_then(Value::as_str).unwrap_or("");
    if got != uid {
        return Err(failed(format!(
            "expected response.uid=\"{uid}\", got \"{got}\""
        )));
    }
    let result = resp.get("result").cloned().unwrap_or(Value::Null);
    let status = result.get("status").and_then(Value::as_str).unwrap_or("");
    if status != "Success" {
        let message = result.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(failed(if message.is_empty() {
            format!("response.result.status was '{status}', not 'Success'")
        } else {
            message.to_string()
        }));
    }
    let converted = resp
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if converted.len() != pending.len() {
        return Err(failed(format!(
            "returned {} objects, expected {}",
            converted.len(),
            pending.len()
        )));
    }
    for (n, (i, mut out)) in pending.into_iter().zip(converted).enumerate() {
        let original = &objects[i];
        let av = out.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if av != desired {
            return Err(failed(format!(
                "invalid converted object at index {n}: invalid apiVersion \"{av}\", expected \"{desired}\""
            )));
        }
        let kind = out.get("kind").and_then(Value::as_str).unwrap_or("");
        let want = original.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind != want {
            return Err(failed(format!(
                "invalid converted object at index {n}: invalid kind \"{kind}\", expected \"{want}\""
            )));
        }
        // Only labels and annotations may change in metadata; the rest is the original's.
        let mut meta = original.get("metadata").cloned().unwrap_or(json!({}));
        for k in ["labels", "annotations"] {
            match out.pointer(&format!("/metadata/{k}")) {
                Some(v) if !v.is_null() => meta[k] = v.clone(),
                _ => {
                    if let Some(m) = meta.as_object_mut() {
                        m.remove(k);
                    }
                }
            }
        }
        if let Some(o) = out.as_object_mut() {
            o.insert("metadata".into(), meta);
        }
        objects[i] = out;
    }
    Ok(objects)
}

/// [`convert`] for one object.
pub(crate) async fn convert_one(
    srv: &ApiServer,
    group: &str,
    plural: &str,
    object: Value,
    version: &str,
) -> Result<Value, ApiError> {
    let mut out = convert(srv, group, plural, vec![object], version).await?;
    out.pop()
        .ok_or_else(|| ApiError::internal("conversion returned no object"))
}

/// A stored object of `def` in `def`'s version (a no-op unless a webhook converts it).
pub(crate) async fn to_version(
    srv: &ApiServer,
    def: &ResourceDef,
    object: Value,
) -> Result<Value, ApiError> {
    if def.crd.is_none() || webhook(srv, &def.group, &def.plural).is_none() {
        return Ok(object);
    }
    convert_one(srv, &def.group, &def.plural, object, &def.version).await
}

/// Stored objects of `def` in `def`'s version, in one review.
pub(crate) async fn list_to_version(
    srv: &ApiServer,
    def: &ResourceDef,
    objects: Vec<Value>,
) -> Result<Vec<Value>, ApiError> {
    if def.crd.is_none() || webhook(srv, &def.group, &def.plural).is_none() {
        return Ok(objects);
    }
    convert(srv, &def.group, &def.plural, objects, &def.version).await
}

/// An object of `def` (in `def`'s version) as it is stored: in the storage version when a
/// webhook converts the CRD's versions.
pub(crate) async fn to_storage(
    srv: &ApiServer,
    def: &ResourceDef,
    object: Value,
) -> Result<Value, ApiError> {
    if def.crd.is_none() {
        return Ok(object);
    }
    match webhook(srv, &def.group, &def.plural) {
        Some(h) if h.storage_version != def.version => {
            convert_one(srv, &def.group, &def.plural, object, &h.storage_version).await
        }
        _ => Ok(object),
    }
}
