//! Request parameters: list, watch, create, patch and delete options.

use serde::Serialize;

/// How `resourceVersion` is interpreted on a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionMatch {
    /// Exactly that version (410 if compacted).
    Exact,
    /// That version or newer.
    NotOlderThan,
}

impl VersionMatch {
    fn as_str(self) -> &'static str {
        match self {
            Self::Exact => "Exact",
            Self::NotOlderThan => "NotOlderThan",
        }
    }
}

/// Options of a list request.
///
/// ```
/// use kubewright_core::ListParams;
/// let lp = ListParams::default().labels("app=web").limit(100);
/// assert_eq!(lp.label_selector.as_deref(), Some("app=web"));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListParams {
    /// Label selector, e.g. `app=web,tier!=db`.
    pub label_selector: Option<String>,
    /// Field selector, e.g. `metadata.name=x`.
    pub field_selector: Option<String>,
    /// Page size (0 = server default, unpaged).
    pub limit: Option<u32>,
    /// Continue token from a previous page.
    pub continue_token: Option<String>,
    /// resourceVersion: unset = most recent, `"0"` = any.
    pub resource_version: Option<String>,
    /// How `resource_version` is matched.
    pub version_match: Option<VersionMatch>,
    /// Server-side timeout in seconds.
    pub timeout: Option<u32>,
}

impl ListParams {
    /// Sets the label selector.
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string());
        self
    }
    /// Sets the field selector.
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_string());
        self
    }
    /// Sets the page size.
    #[must_use]
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
    /// Sets the continue token.
    #[must_use]
    pub fn continue_token(mut self, token: &str) -> Self {
        self.continue_token = Some(token.to_string());
        self
    }
    /// Asks for any version (`resourceVersion=0`): served from cache, may be stale.
    #[must_use]
    pub fn match_any(mut self) -> Self {
        self.resource_version = Some("0".into());
        self.version_match = None;
        self
    }
    /// Asks for exactly version `rv`.
    #[must_use]
    pub fn at(mut self, rv: &str) -> Self {
        self.resource_version = Some(rv.into());
        self.version_match = Some(VersionMatch::Exact);
        self
    }
    /// Asks for version `rv` or newer.
    #[must_use]
    pub fn not_older_than(mut self, rv: &str) -> Self {
        self.resource_version = Some(rv.into());
        self.version_match = Some(VersionMatch::NotOlderThan);
        self
    }
    /// Sets the server-side timeout.
    #[must_use]
    pub fn timeout(mut self, secs: u32) -> Self {
        self.timeout = Some(secs);
        self
    }

    /// Query pairs for this request.
    pub fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        if let Some(l) = self.label_selector.as_ref().filter(|s| !s.is_empty()) {
            q.push(("labelSelector", l.clone()));
        }
        if let Some(f) = self.field_selector.as_ref().filter(|s| !s.is_empty()) {
            q.push(("fieldSelector", f.clone()));
        }
        if let Some(l) = self.limit.filter(|l| *l > 0) {
            q.push(("limit", l.to_string()));
        }
        if let Some(c) = self.continue_token.as_ref().filter(|s| !s.is_empty()) {
            q.push(("continue", c.clone()));
        }
        if let Some(rv) = &self.resource_version {
            q.push(("resourceVersion", rv.clone()));
        }
        if let Some(m) = self.version_match {
            q.push(("resourceVersionMatch", m.as_str().to_string()));
        }
        if let Some(t) = self.timeout {
            q.push(("timeoutSeconds", t.to_string()));
        }
        q
    }
}

/// Options of a watch request.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchParams {
    /// Label selector.
    pub label_selector: Option<String>,
    /// Field selector.
    pub field_selector: Option<String>,
    /// Server-side timeout in seconds (default 290, as client-go's reflector uses at most 10 min).
    pub timeout: Option<u32>,
    /// Ask for BOOKMARK events (default on).
    pub bookmarks: bool,
    /// Streaming list: initial ADDED events, then a bookmark with `k8s.io/initial-events-end`.
    pub send_initial_events: bool,
}

impl Default for WatchParams {
    fn default() -> Self {
        Self {
            label_selector: None,
            field_selector: None,
            timeout: Some(290),
            bookmarks: true,
            send_initial_events: false,
        }
    }
}

impl WatchParams {
    /// Sets the label selector.
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string());
        self
    }
    /// Sets the field selector.
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_string());
        self
    }
    /// Sets the server-side timeout.
    #[must_use]
    pub fn timeout(mut self, secs: u32) -> Self {
        self.timeout = Some(secs);
        self
    }
    /// Turns bookmarks off.
    #[must_use]
    pub fn disable_bookmarks(mut self) -> Self {
        self.bookmarks = false;
        self
    }
    /// Requests a streaming list (`sendInitialEvents=true`).
    #[must_use]
    pub fn streaming_lists(mut self) -> Self {
        self.send_initial_events = true;
        self.bookmarks = true;
        self
    }

    /// Query pairs for a watch starting at `resource_version` (empty = from now with
    /// synthetic ADDED events for current objects).
    pub fn query_pairs(&self, resource_version: &str) -> Vec<(&'static str, String)> {
        let mut q = vec![("watch", "true".to_string())];
        if let Some(l) = self.label_selector.as_ref().filter(|s| !s.is_empty()) {
            q.push(("labelSelector", l.clone()));
        }
        if let Some(f) = self.field_selector.as_ref().filter(|s| !s.is_empty()) {
            q.push(("fieldSelector", f.clone()));
        }
        if !resource_version.is_empty() {
            q.push(("resourceVersion", resource_version.to_string()));
        }
        if let Some(t) = self.timeout {
            q.push(("timeoutSeconds", t.to_string()));
        }
        if self.bookmarks {
            q.push(("allowWatchBookmarks", "true".to_string()));
        }
        if self.send_initial_events {
            q.push(("sendInitialEvents", "true".to_string()));
            q.push(("resourceVersionMatch", "NotOlderThan".to_string()));
        }
        q
    }
}

/// Server-side field validation of write requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValidationDirective {
    /// Fail on unknown or duplicate fields (400).
    Strict,
    /// Drop them and return `Warning` headers (server default).
    Warn,
    /// Drop them silently.
    Ignore,
}

impl ValidationDirective {
    fn as_str(self) -> &'static str {
        match self {
            Self::Strict => "Strict",
            Self::Warn => "Warn",
            Self::Ignore => "Ignore",
        }
    }
}

/// Options of create and replace requests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PostParams {
    /// `dryRun=All`: validate and return the result without persisting.
    pub dry_run: bool,
    /// The field manager recorded in managedFields.
    pub field_manager: Option<String>,
    /// Field validation.
    pub field_validation: Option<ValidationDirective>,
}

impl PostParams {
    /// Query pairs.
    pub fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        if self.dry_run {
            q.push(("dryRun", "All".to_string()));
        }
        if let Some(fm) = &self.field_manager {
            q.push(("fieldManager", fm.clone()));
        }
        if let Some(v) = self.field_validation {
            q.push(("fieldValidation", v.as_str().to_string()));
        }
        q
    }
}

/// A patch body, by mechanism.
#[derive(Clone, Debug, PartialEq)]
pub enum Patch<T: Serialize> {
    /// Server-side apply (`application/apply-patch+yaml`; JSON is valid YAML).
    Apply(T),
    /// RFC 6902 JSON Patch (`application/json-patch+json`).
    Json(T),
    /// RFC 7386 JSON merge patch (`application/merge-patch+json`).
    Merge(T),
    /// Strategic merge patch (`application/strategic-merge-patch+json`, built-ins only).
    Strategic(T),
}

impl<T: Serialize> Patch<T> {
    /// The Content-Type of this patch.
    pub fn content_type(&self) -> &'static str {
        match self {
            Self::Apply(_) => "application/apply-patch+yaml",
            Self::Json(_) => "application/json-patch+json",
            Self::Merge(_) => "application/merge-patch+json",
            Self::Strategic(_) => "application/strategic-merge-patch+json",
        }
    }
    /// Whether this is a server-side apply.
    pub fn is_apply(&self) -> bool {
        matches!(self, Self::Apply(_))
    }
    /// Serialises the body.
    pub fn to_body(&self) -> Result<Vec<u8>, serde_json::Error> {
        match self {
            Self::Apply(t) | Self::Json(t) | Self::Merge(t) | Self::Strategic(t) => {
                serde_json::to_vec(t)
            }
        }
    }
}

/// Options of a patch request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PatchParams {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// Take ownership of conflicting fields (apply only).
    pub force: bool,
    /// Field manager (required for apply).
    pub field_manager: Option<String>,
    /// Field validation.
    pub field_validation: Option<ValidationDirective>,
}

impl PatchParams {
    /// Params for a server-side apply by `manager`.
    pub fn apply(manager: &str) -> Self {
        Self {
            field_manager: Some(manager.to_string()),
            ..Default::default()
        }
    }
    /// Forces conflicts (builder style).
    #[must_use]
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }
    /// Dry run (builder style).
    #[must_use]
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }
    /// Query pairs.
    pub fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        if self.dry_run {
            q.push(("dryRun", "All".to_string()));
        }
        if self.force {
            q.push(("force", "true".to_string()));
        }
        if let Some(fm) = &self.field_manager {
            q.push(("fieldManager", fm.clone()));
        }
        if let Some(v) = self.field_validation {
            q.push(("fieldValidation", v.as_str().to_string()));
        }
        q
    }
}

/// What happens to dependents when an owner is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PropagationPolicy {
    /// Dependents are left alone (ownerReferences removed).
    Orphan,
    /// Owner removed now, dependents later by the garbage collector.
    Background,
    /// Owner stays until its blocking dependents are gone.
    Foreground,
}

/// Preconditions of a delete.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    /// Only delete if the uid matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Only delete if the resourceVersion matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// Options of a delete request, sent as a `DeleteOptions` body.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteParams {
    /// `dryRun: ["All"]` when true.
    #[serde(serialize_with = "ser_dry_run", skip_serializing_if = "is_false")]
    pub dry_run: bool,
    /// Grace period; 0 deletes at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<u32>,
    /// Propagation policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub propagation_policy: Option<PropagationPolicy>,
    /// Preconditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Preconditions>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn ser_dry_run<S: serde::Serializer>(_: &bool, s: S) -> Result<S::Ok, S::Error> {
    ["All"].serialize(s)
}

impl DeleteParams {
    /// Background propagation.
    pub fn background() -> Self {
        Self {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        }
    }
    /// Foreground propagation.
    pub fn foreground() -> Self {
        Self {
            propagation_policy: Some(PropagationPolicy::Foreground),
            ..Default::default()
        }
    }
    /// Orphan dependents.
    pub fn orphan() -> Self {
        Self {
            propagation_policy: Some(PropagationPolicy::Orphan),
            ..Default::default()
        }
    }
    /// Dry run (builder style).
    #[must_use]
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }
    /// Grace period (builder style).
    #[must_use]
    pub fn grace_period(mut self, secs: u32) -> Self {
        self.grace_period_seconds = Some(secs);
        self
    }
    /// Preconditions (builder style).
    #[must_use]
    pub fn preconditions(mut self, p: Preconditions) -> Self {
        self.preconditions = Some(p);
        self
    }
    /// The `DeleteOptions` JSON body.
    pub fn to_body(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut v = serde_json::to_value(self)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("kind".into(), "DeleteOptions".into());
            o.insert("apiVersion".into(), "v1".into());
        }
        serde_json::to_vec(&v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_body() {
        let b = DeleteParams::foreground()
            .dry_run()
            .preconditions(Preconditions {
                uid: Some("u".into()),
                resource_version: None,
            })
            .to_body()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["propagationPolicy"], "Foreground");
        assert_eq!(v["dryRun"], serde_json::json!(["All"]));
        assert_eq!(v["preconditions"]["uid"], "u");
        assert_eq!(v["kind"], "DeleteOptions");
    }

    #[test]
    fn watch_query() {
        let q = WatchParams::default().streaming_lists().query_pairs("");
        assert!(q.contains(&("sendInitialEvents", "true".into())));
        assert!(q.contains(&("resourceVersionMatch", "NotOlderThan".into())));
        assert!(!q.iter().any(|(k, _)| *k == "resourceVersion"));
    }
}
