//! Discovery (aggregated v2 with a legacy fallback), an in-memory and optional on-disk
//! cache, and a [`RestMapper`] resolving kinds, plurals, singulars and short names.

use crate::client::Client;
use crate::error::{Error, Result};
use kubewright_core::{ApiResource, GroupVersionKind, Scope};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const AGGREGATED_ACCEPT: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

/// What a resource supports, besides its identity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiCapabilities {
    /// Namespaced or cluster-scoped.
    #[serde(with = "scope_serde")]
    pub scope: Scope,
    /// Singular name (e.g. `deployment`).
    pub singular: String,
    /// Verbs.
    pub verbs: Vec<String>,
    /// Short names (e.g. `deploy`).
    pub short_names: Vec<String>,
    /// Categories (e.g. `all`).
    pub categories: Vec<String>,
    /// Subresources (e.g. `status`, `scale`).
    pub subresources: Vec<String>,
}

mod scope_serde {
    use kubewright_core::Scope;
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(s: &Scope, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(if *s == Scope::Namespaced {
            "Namespaced"
        } else {
            "Cluster"
        })
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Scope, D::Error> {
        let s = String::deserialize(d)?;
        Ok(if s == "Cluster" {
            Scope::Cluster
        } else {
            Scope::Namespaced
        })
    }
}

/// One discovered resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscoveredResource {
    /// Group, version, kind, plural.
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural.
    pub plural: String,
    /// Capabilities.
    pub caps: ApiCapabilities,
}

impl DiscoveredResource {
    /// As an [`ApiResource`] for dynamic APIs.
    pub fn api_resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&self.group, &self.version, &self.kind),
            &self.plural,
            self.caps.scope,
        )
    }
}

/// One API group with its versions in preference order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiGroup {
    /// Group name (empty for core).
    pub name: String,
    /// Versions, preferred first.
    pub versions: Vec<String>,
    /// Resources per version.
    pub resources: BTreeMap<String, Vec<DiscoveredResource>>,
}

impl ApiGroup {
    /// The preferred version.
    pub fn preferred_version(&self) -> Option<&str> {
        self.versions.first().map(String::as_str)
    }
    /// Resources of the preferred version.
    pub fn preferred_resources(&self) -> &[DiscoveredResource] {
        self.preferred_version()
            .and_then(|v| self.resources.get(v))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

/// The server's API surface.
///
/// ```no_run
/// # async fn run(client: kubewright_client::Client) -> Result<(), kubewright_client::Error> {
/// let discovery = kubewright_client::discovery::Discovery::run(&client).await?;
/// let mapper = discovery.rest_mapper();
/// let deploy = mapper.resolve("deploy").expect("deployments are served");
/// assert_eq!(deploy.plural, "deployments");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Discovery {
    groups: BTreeMap<String, ApiGroup>,
    /// Whether the server answered aggregated discovery.
    pub aggregated: bool,
}

impl Discovery {
    /// Discovers everything: aggregated discovery when the server offers it, else one
    /// request per group version.
    pub async fn run(client: &Client) -> Result<Self> {
        let mut d = Self::default();
        match (
            aggregated(client, "/api").await?,
            aggregated(client, "/apis").await?,
        ) {
            (Some(core), Some(rest)) => {
                d.aggregated = true;
                for g in core.into_iter().chain(rest) {
                    d.groups.insert(g.name.clone(), g);
                }
            }
            _ => d.legacy(client).await?,
        }
        Ok(d)
    }

    /// Like [`Discovery::run`], but reuses a cache file younger than `ttl`, and writes
    /// it after a fresh discovery. A corrupt cache file is ignored.
    pub async fn cached(client: &Client, cache_file: &Path, ttl: Duration) -> Result<Self> {
        if let Ok(meta) = tokio::fs::metadata(cache_file).await {
            let fresh = meta
                .modified()
                .ok()
                .and_then(|m| SystemTime::now().duration_since(m).ok())
                .is_some_and(|age| age < ttl);
            if fresh
                && let Ok(bytes) = tokio::fs::read(cache_file).await
                && let Ok(d) = serde_json::from_slice::<Discovery>(&bytes)
            {
                return Ok(d);
            }
        }
        let d = Self::run(client).await?;
        if let Some(dir) = cache_file.parent() {
            let _ = tokio::fs::create_dir_all(dir).await;
        }
        if let Ok(bytes) = serde_json::to_vec(&d) {
            let tmp = PathBuf::from(format!("{}.tmp", cache_file.display()));
            if tokio::fs::write(&tmp, bytes).await.is_ok() {
                let _ = tokio::fs::rename(&tmp, cache_file).await;
            }
        }
        Ok(d)
    }

    /// Re-runs discovery in place.
    pub async fn refresh(&mut self, client: &Client) -> Result<()> {
        *self = Self::run(client).await?;
        Ok(())
    }

    async fn legacy(&mut self, client: &Client) -> Result<()> {
        let api: Value = client
            .request(http::Request::get("/api").body(vec![]).map_err(http_err)?)
            .await?;
        let mut gvs: Vec<(String, Vec<String>)> = Vec::new();
        let core_versions: Vec<String> = api["versions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        gvs.push((String::new(), core_versions));
        let apis: Value = client
            .request(http::Request::get("/apis").body(vec![]).map_err(http_err)?)
            .await?;
        for g in apis["groups"].as_array().into_iter().flatten() {
            let name = g["name"].as_str().unwrap_or("").to_string();
            let preferred = g["preferredVersion"]["version"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let mut versions: Vec<String> = g["versions"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v["version"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            versions.sort_by_key(|v| v != &preferred);
            gvs.push((name, versions));
        }
        for (group, versions) in gvs {
            let mut ag = ApiGroup {
                name: group.clone(),
                versions: versions.clone(),
                resources: BTreeMap::new(),
            };
            for v in versions {
                let path = if group.is_empty() {
                    format!("/api/{v}")
                } else {
                    format!("/apis/{group}/{v}")
                };
                let list: Value = match client
                    .request(http::Request::get(path).body(vec![]).map_err(http_err)?)
                    .await
                {
                    Ok(l) => l,
                    // A group version that vanished (e.g. CRD deleted) between requests.
                    Err(e) if e.is_not_found() => continue,
                    Err(e) => return Err(e),
                };
                ag.resources
                    .insert(v.clone(), parse_resource_list(&group, &v, &list));
            }
            self.groups.insert(group, ag);
        }
        Ok(())
    }

    /// Every group.
    pub fn groups(&self) -> impl Iterator<Item = &ApiGroup> {
        self.groups.values()
    }

    /// One group.
    pub fn get(&self, group: &str) -> Option<&ApiGroup> {
        self.groups.get(group)
    }

    /// Whether a group is served.
    pub fn has_group(&self, group: &str) -> bool {
        self.groups.contains_key(group)
    }

    /// Finds the resource of a GVK.
    pub fn resolve_gvk(&self, gvk: &GroupVersionKind) -> Option<&DiscoveredResource> {
        self.groups
            .get(&gvk.group)?
            .resources
            .get(&gvk.version)?
            .iter()
            .find(|r| r.kind == gvk.kind)
    }

    /// A RestMapper over the discovered resources.
    pub fn rest_mapper(&self) -> RestMapper {
        let mut entries = Vec::new();
        for g in self.groups.values() {
            for (i, v) in g.versions.iter().enumerate() {
                for r in g.resources.get(v).into_iter().flatten() {
                    entries.push((r.clone(), i == 0));
                }
            }
        }
        RestMapper { entries }
    }
}

fn http_err(e: http::Error) -> Error {
    Error::Request(kubewright_core::RequestError::Build(e))
}

async fn aggregated(client: &Client, path: &str) -> Result<Option<Vec<ApiGroup>>> {
    let req = http::Request::get(path)
        .header(http::header::ACCEPT, AGGREGATED_ACCEPT)
        .body(vec![])
        .map_err(http_err)?;
    let resp = match client.send(req).await {
        Ok(r) => r,
        Err(e) => return Err(e),
    };
    let ct = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let status = resp.status();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .map_err(|e| Error::Body(Box::new(e)))?
        .to_bytes();
    if status == http::StatusCode::NOT_FOUND && path == "/api" {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(Error::Api(Box::new(crate::client::status_from_body(
            status, &body,
        ))));
    }
    if !ct.contains("as=APIGroupDiscoveryList") {
        return Ok(None);
    }
    let doc: Value = serde_json::from_slice(&body).map_err(|source| Error::Decode {
        what: "APIGroupDiscoveryList".into(),
        source,
    })?;
    let mut out = Vec::new();
    for item in doc["items"].as_array().into_iter().flatten() {
        let name = item["metadata"]["name"].as_str().unwrap_or("").to_string();
        let mut g = ApiGroup {
            name: name.clone(),
            ..Default::default()
        };
        for v in item["versions"].as_array().into_iter().flatten() {
            let version = v["version"].as_str().unwrap_or("").to_string();
            let mut rs = Vec::new();
            for r in v["resources"].as_array().into_iter().flatten() {
                let plural = r["resource"].as_str().unwrap_or("").to_string();
                let kind = r["responseKind"]["kind"].as_str().unwrap_or("").to_string();
                let strs = |k: &str| -> Vec<String> {
                    r[k].as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|x| x.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default()
                };
                let subs = r["subresources"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|s| s["subresource"].as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                rs.push(DiscoveredResource {
                    group: name.clone(),
                    version: version.clone(),
                    kind,
                    plural,
                    caps: ApiCapabilities {
                        scope: if r["scope"] == "Cluster" {
                            Scope::Cluster
                        } else {
                            Scope::Namespaced
                        },
                        singular: r["singularResource"].as_str().unwrap_or("").to_string(),
                        verbs: strs("verbs"),
                        short_names: strs("shortNames"),
                        categories: strs("categories"),
                        subresources: subs,
                    },
                });
            }
            g.versions.push(version.clone());
            g.resources.insert(version, rs);
        }
        out.push(g);
    }
    Ok(Some(out))
}

fn parse_resource_list(group: &str, version: &str, list: &Value) -> Vec<DiscoveredResource> {
    let entries = list["resources"].as_array().cloned().unwrap_or_default();
    let mut out: Vec<DiscoveredResource> = Vec::new();
    for r in &entries {
        let name = r["name"].as_str().unwrap_or("");
        if name.contains('/') {
            continue;
        }
        let strs = |k: &str| -> Vec<String> {
            r[k].as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let subresources = entries
            .iter()
            .filter_map(|s| {
                s["name"]
                    .as_str()?
                    .strip_prefix(&format!("{name}/"))
                    .map(str::to_string)
            })
            .collect();
        out.push(DiscoveredResource {
            group: group.to_string(),
            version: version.to_string(),
            kind: r["kind"].as_str().unwrap_or("").to_string(),
            plural: name.to_string(),
            caps: ApiCapabilities {
                scope: if r["namespaced"] == Value::Bool(true) {
                    Scope::Namespaced
                } else {
                    Scope::Cluster
                },
                singular: r["singularName"]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .unwrap_or_else(|| r["kind"].as_str().unwrap_or("").to_lowercase()),
                verbs: strs("verbs"),
                short_names: strs("shortNames"),
                categories: strs("categories"),
                subresources,
            },
        });
    }
    out
}

/// Maps between kinds and resources, and resolves what users type (`deploy`,
/// `deployments`, `deployment`, `deployments.apps`, `Deployment`).
#[derive(Clone, Debug, Default)]
pub struct RestMapper {
    /// (resource, served in the group's preferred version).
    entries: Vec<(DiscoveredResource, bool)>,
}

impl RestMapper {
    /// The resource for a GVK (exact version).
    pub fn resource_for(&self, gvk: &GroupVersionKind) -> Option<&DiscoveredResource> {
        self.entries
            .iter()
            .map(|(r, _)| r)
            .find(|r| r.group == gvk.group && r.version == gvk.version && r.kind == gvk.kind)
    }

    /// The preferred-version resource for a group and kind.
    pub fn preferred_for_kind(&self, group: &str, kind: &str) -> Option<&DiscoveredResource> {
        let mut matches: Vec<&(DiscoveredResource, bool)> = self
            .entries
            .iter()
            .filter(|(r, _)| r.group == group && r.kind == kind)
            .collect();
        matches.sort_by_key(|(_, preferred)| !preferred);
        matches.first().map(|(r, _)| r)
    }

    /// The kind of a resource (`group/version` + plural).
    pub fn kind_for(&self, group: &str, version: &str, plural: &str) -> Option<GroupVersionKind> {
        self.entries
            .iter()
            .map(|(r, _)| r)
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .map(|r| GroupVersionKind::gvk(&r.group, &r.version, &r.kind))
    }

    /// Resolves a name as kubectl does: plural, singular, short name or kind, optionally
    /// qualified by group (`deployments.apps`) or by version and group
    /// (`deployments.v1.apps`). Preferred versions and the core group win ties.
    pub fn resolve(&self, name: &str) -> Option<&DiscoveredResource> {
        let lower = name.to_ascii_lowercase();
        let candidates = |res: &str,
                          group: Option<&str>,
                          version: Option<&str>|
         -> Vec<&(DiscoveredResource, bool)> {
            self.entries
                .iter()
                .filter(|(r, _)| {
                    let name_ok = r.plural == res
                        || r.caps.singular == res
                        || r.kind.to_ascii_lowercase() == res
                        || r.caps.short_names.iter().any(|s| s == res);
                    name_ok
                        && group.is_none_or(|g| r.group == g)
                        && version.is_none_or(|v| r.version == v)
                })
                .collect()
        };
        let mut found = candidates(&lower, None, None);
        if found.is_empty()
            && let Some((res, rest)) = lower.split_once('.')
        {
            found = candidates(res, Some(rest), None);
            if found.is_empty()
                && let Some((version, group)) = rest.split_once('.')
            {
                found = candidates(res, Some(group), Some(version));
            }
        }
        found.sort_by_key(|(r, preferred)| (!preferred, !r.group.is_empty(), r.group.clone()));
        found.first().map(|(r, _)| r)
    }

    /// Every resource in a category (e.g. `all`), preferred versions only.
    pub fn category(&self, category: &str) -> Vec<&DiscoveredResource> {
        self.entries
            .iter()
            .filter(|(r, p)| *p && r.caps.categories.iter().any(|c| c == category))
            .map(|(r, _)| r)
            .collect()
    }
}
