//! `Api<K>`: typed (and dynamic) access to one resource type.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::skip::WithoutManagedFields;
use futures::{Stream, StreamExt};
use k8s_openapi::api::autoscaling::v1::Scale;
use kubewright_core::{
    ApiResource, DeleteParams, ListParams, ObjectList, PartialObjectMetadata, Patch, PatchParams,
    PostParams, Request, Resource, Scope, Status, Table, WatchEvent, WatchParams,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// What a delete returned: the object (still present, e.g. with finalizers, or a kind
/// that returns objects) or a success Status (gone).
#[derive(Debug, Clone)]
pub enum DeleteResult<K> {
    /// The object, with a deletionTimestamp when deletion is deferred.
    Object(K),
    /// The object is gone.
    Status(Box<Status>),
}

impl<K> DeleteResult<K> {
    /// The object, when one was returned.
    pub fn object(self) -> Option<K> {
        match self {
            Self::Object(k) => Some(k),
            Self::Status(_) => None,
        }
    }
}

/// Typed access to a resource in a namespace, across all namespaces, or at cluster scope.
///
/// ```no_run
/// # async fn run(client: kubewright_client::Client) -> Result<(), kubewright_client::Error> {
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kubewright_client::Api;
/// use kubewright_core::ListParams;
/// let cms: Api<ConfigMap> = Api::namespaced(client, "default");
/// for cm in cms.list(&ListParams::default()).await? {
///     println!("{:?}", cm.metadata.name);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Api<K: Resource> {
    client: Client,
    request: Request,
    dyntype: K::DynamicType,
    namespace: Option<String>,
    skip_managed_fields: bool,
    /// Ask for Kubernetes protobuf (only for kinds that have it).
    protobuf: bool,
    /// Ask for metadata (`PartialObjectMetadata`) in protobuf: any resource has that form.
    metadata_protobuf: bool,
}

impl<K: Resource> Debug for Api<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("url_path", &self.request.url_path)
            .finish()
    }
}

impl<K> Api<K>
where
    K: Resource,
    K::DynamicType: Default,
{
    /// Every namespace (namespaced types) or the cluster (cluster-scoped types).
    pub fn all(client: Client) -> Self {
        Self::all_with(client, &K::DynamicType::default())
    }
    /// One namespace. For cluster-scoped types the namespace is ignored.
    pub fn namespaced(client: Client, ns: &str) -> Self {
        Self::namespaced_with(client, ns, &K::DynamicType::default())
    }
    /// The client's default namespace.
    pub fn default_namespaced(client: Client) -> Self {
        let ns = client.default_namespace().to_string();
        Self::namespaced(client, &ns)
    }
}

impl<K: Resource> Api<K> {
    /// Every namespace, with explicit type information (dynamic objects).
    pub fn all_with(client: Client, dt: &K::DynamicType) -> Self
    where
        K::DynamicType: Clone,
    {
        let ct = client.content_type();
        Self {
            request: Request::new(K::url_path(dt, None)),
            client,
            dyntype: dt.clone(),
            namespace: None,
            skip_managed_fields: false,
            protobuf: false,
            metadata_protobuf: false,
        }
        .with_content_type(ct)
    }
    /// One namespace, with explicit type information.
    pub fn namespaced_with(client: Client, ns: &str, dt: &K::DynamicType) -> Self
    where
        K::DynamicType: Clone,
    {
        let namespace = (K::scope(dt) == Scope::Namespaced).then(|| ns.to_string());
        let ct = client.content_type();
        Self {
            request: Request::new(K::url_path(dt, namespace.as_deref())),
            client,
            dyntype: dt.clone(),
            namespace,
            skip_managed_fields: false,
            protobuf: false,
            metadata_protobuf: false,
        }
        .with_content_type(ct)
    }
    /// Objects returned by this Api are decoded without `metadata.managedFields` (it
    /// reads as `None`): less memory and CPU for caches and controllers that never read
    /// field ownership. The member is skipped inside the JSON decoder, not decoded and
    /// dropped. Writes are unaffected: the server keeps tracking ownership.
    ///
    /// ```no_run
    /// # async fn run(client: kubewright_client::Client) -> Result<(), kubewright_client::Error> {
    /// use k8s_openapi::api::core::v1::Pod;
    /// let pods = kubewright_client::Api::<Pod>::all(client).without_managed_fields();
    /// for p in pods.list(&Default::default()).await? {
    ///     assert!(p.metadata.managed_fields.is_none());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn without_managed_fields(mut self) -> Self {
        self.skip_managed_fields = true;
        self
    }
    /// Sets the wire format of responses ([`ContentType`]; the default comes from
    /// [`Config::content_type`](crate::Config::content_type)). Protobuf is asked for only
    /// when the kind has a protobuf form (the built-in kinds); custom resources stay JSON.
    /// Metadata-only requests ([`Api::list_metadata`] and the like) ask for protobuf for
    /// every resource, custom ones too: `PartialObjectMetadata` has a protobuf form
    /// whatever the object's kind. Request bodies are always JSON.
    ///
    /// ```no_run
    /// # async fn run(client: kubewright_client::Client) -> Result<(), kubewright_client::Error> {
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kubewright_client::{Api, ContentType};
    /// let pods = Api::<Pod>::all(client).with_content_type(ContentType::Protobuf);
    /// assert_eq!(pods.content_type(), ContentType::Protobuf);
    /// let list = pods.list(&Default::default()).await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_content_type(mut self, ct: crate::ContentType) -> Self {
        self.metadata_protobuf = ct == crate::ContentType::Protobuf;
        self.protobuf = self.metadata_protobuf
            && kubewright_proto::supports(&K::api_version(&self.dyntype), &K::kind(&self.dyntype));
        self
    }
    /// The wire format this Api asks for (JSON for kinds without protobuf).
    pub fn content_type(&self) -> crate::ContentType {
        if self.protobuf {
            crate::ContentType::Protobuf
        } else {
            crate::ContentType::Json
        }
    }
    /// Whether [`Api::without_managed_fields`] is on.
    pub fn skips_managed_fields(&self) -> bool {
        self.skip_managed_fields
    }
    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }
    /// The namespace this Api is bound to.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
    /// The collection URL path.
    pub fn url_path(&self) -> &str {
        &self.request.url_path
    }
    /// Type information.
    pub fn resource(&self) -> ApiResource {
        ApiResource::erase::<K>(&self.dyntype)
    }
}

/// client-go's Accept for protobuf clients: protobuf, else JSON (custom resources,
/// Tables, servers without protobuf).
const PROTOBUF_ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// Tables have no protobuf form: always JSON, as `kubectl get` asks.
const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// The Accept of metadata-only requests: client-go's metadata client asks for protobuf
/// first, then JSON, each as `PartialObjectMetadata(List)`; plain JSON last, for servers
/// that have no metadata form (kube-apiserver answers it with the whole objects).
fn metadata_accept(list: bool, protobuf: bool) -> &'static str {
    match (list, protobuf) {
        (true, true) => {
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
        }
        (true, false) => {
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
        }
        (false, true) => {
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
        }
        (false, false) => {
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
        }
    }
}

impl<K> Api<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
{
    /// Asks for protobuf when this Api does and the request has no Accept of its own.
    fn negotiate(&self, mut req: http::Request<Vec<u8>>) -> http::Request<Vec<u8>> {
        if self.protobuf && !req.headers().contains_key(http::header::ACCEPT) {
            req.headers_mut().insert(
                http::header::ACCEPT,
                http::HeaderValue::from_static(PROTOBUF_ACCEPT),
            );
        }
        req
    }

    /// Sends a request whose response is one `T` (an object of this type or its metadata).
    async fn one<T: DeserializeOwned>(&self, req: http::Request<Vec<u8>>) -> Result<T> {
        let req = self.negotiate(req);
        if self.skip_managed_fields {
            let WithoutManagedFields(obj) = self.client.request(req).await?;
            Ok(obj)
        } else {
            self.client.request(req).await
        }
    }

    /// Sends a request whose response is a list of `T`.
    async fn many<T: DeserializeOwned>(
        &self,
        req: http::Request<Vec<u8>>,
    ) -> Result<ObjectList<T>> {
        let req = self.negotiate(req);
        if self.skip_managed_fields {
            let list: ObjectList<WithoutManagedFields<T>> = self.client.request(req).await?;
            Ok(ObjectList {
                metadata: list.metadata,
                // In place: the wrapper is `repr(transparent)`.
                items: list.items.into_iter().map(|w| w.0).collect(),
            })
        } else {
            self.client.request(req).await
        }
    }

    /// Streams the watch events of a request.
    async fn events<T: DeserializeOwned + Send + 'static>(
        &self,
        req: http::Request<Vec<u8>>,
    ) -> Result<impl Stream<Item = Result<WatchEvent<T>>> + Send + use<T, K>> {
        let (protobuf, chunks) = self
            .client
            .request_stream_typed(self.negotiate(req))
            .await?;
        let chunks = Box::pin(chunks);
        Ok(if self.skip_managed_fields {
            crate::watch::decode_stream::<WithoutManagedFields<T>, _>(protobuf, chunks)
                .map(|ev| ev.map(|ev| ev.map(WithoutManagedFields::into_inner)))
                .left_stream()
        } else {
            crate::watch::decode_stream::<T, _>(protobuf, chunks).right_stream()
        })
    }

    /// Gets an object (404 -> `Error::Api`).
    pub async fn get(&self, name: &str) -> Result<K> {
        self.one(self.request.get(name, None)?).await
    }

    /// Gets an object, `None` when it does not exist.
    pub async fn get_opt(&self, name: &str) -> Result<Option<K>> {
        match self.get(name).await {
            Ok(o) => Ok(Some(o)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Lists one page (or everything when `limit` is unset).
    pub async fn list(&self, lp: &ListParams) -> Result<ObjectList<K>> {
        self.many(self.request.list(lp)?).await
    }

    /// Lists every object, following `continue` tokens page by page (`lp.limit` is the
    /// page size; 500 when unset, like client-go's pager).
    pub async fn list_all(&self, lp: &ListParams) -> Result<ObjectList<K>> {
        let mut lp = lp.clone();
        if lp.limit.is_none() {
            lp.limit = Some(500);
        }
        let mut first = self.list(&lp).await?;
        while let Some(tok) = first.continue_token().map(str::to_string) {
            let page = self.list(&lp.clone().continue_token(&tok)).await?;
            first.items.extend(page.items);
            first.metadata.continue_ = page.metadata.continue_;
            first.metadata.remaining_item_count = None;
        }
        Ok(first)
    }

    /// Creates an object.
    pub async fn create(&self, pp: &PostParams, obj: &K) -> Result<K> {
        self.one(self.request.create(pp, obj)?).await
    }

    /// Replaces an object (PUT); `metadata.resourceVersion` makes it conditional.
    pub async fn replace(&self, name: &str, pp: &PostParams, obj: &K) -> Result<K> {
        self.one(self.request.replace(name, None, pp, obj)?).await
    }

    /// Patches an object with any of the four patch kinds.
    pub async fn patch<P: Serialize + Debug>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K> {
        self.one(self.request.patch(name, None, pp, patch)?).await
    }

    /// Deletes an object.
    pub async fn delete(&self, name: &str, dp: &DeleteParams) -> Result<DeleteResult<K>> {
        let v: serde_json::Value = self.client.request(self.request.delete(name, dp)?).await?;
        decode_delete(v, self.skip_managed_fields, false)
    }

    /// Deletes every object matching the list params; returns the deleted objects.
    pub async fn delete_collection(
        &self,
        dp: &DeleteParams,
        lp: &ListParams,
    ) -> Result<DeleteResult<ObjectList<K>>> {
        let v: serde_json::Value = self
            .client
            .request(self.request.delete_collection(dp, lp)?)
            .await?;
        decode_delete(v, self.skip_managed_fields, true)
    }

    /// Watches from `resource_version` (`""` = current state as ADDED events, then
    /// changes). The stream ends when the server closes it.
    pub async fn watch(
        &self,
        wp: &WatchParams,
        resource_version: &str,
    ) -> Result<impl Stream<Item = Result<WatchEvent<K>>> + Send + use<K>> {
        self.events(self.request.watch(wp, resource_version)?).await
    }

    /// Gets the object via `/status`.
    pub async fn get_status(&self, name: &str) -> Result<K> {
        self.one(self.request.get(name, Some("status"))?).await
    }
    /// Replaces `/status`.
    pub async fn replace_status(&self, name: &str, pp: &PostParams, obj: &K) -> Result<K> {
        self.one(self.request.replace(name, Some("status"), pp, obj)?)
            .await
    }
    /// Patches `/status`.
    pub async fn patch_status<P: Serialize + Debug>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K> {
        self.one(self.request.patch(name, Some("status"), pp, patch)?)
            .await
    }
    /// Gets `/scale`.
    pub async fn get_scale(&self, name: &str) -> Result<Scale> {
        self.client
            .request(self.request.get(name, Some("scale"))?)
            .await
    }
    /// Replaces `/scale`.
    pub async fn replace_scale(&self, name: &str, pp: &PostParams, scale: &Scale) -> Result<Scale> {
        self.client
            .request(self.request.replace(name, Some("scale"), pp, scale)?)
            .await
    }
    /// Patches `/scale`.
    pub async fn patch_scale<P: Serialize + Debug>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<Scale> {
        self.client
            .request(self.request.patch(name, Some("scale"), pp, patch)?)
            .await
    }

    /// Gets only the metadata of an object.
    pub async fn get_metadata(&self, name: &str) -> Result<PartialObjectMetadata> {
        let mut req = self.request.get(name, None)?;
        req.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static(metadata_accept(false, self.metadata_protobuf)),
        );
        self.one(req).await
    }
    /// Lists only metadata.
    pub async fn list_metadata(
        &self,
        lp: &ListParams,
    ) -> Result<ObjectList<PartialObjectMetadata>> {
        let mut req = self.request.list(lp)?;
        req.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static(metadata_accept(true, self.metadata_protobuf)),
        );
        self.many(req).await
    }
    /// Watches only metadata.
    pub async fn watch_metadata(
        &self,
        wp: &WatchParams,
        resource_version: &str,
    ) -> Result<impl Stream<Item = Result<WatchEvent<PartialObjectMetadata>>> + Send + use<K>> {
        let mut req = self.request.watch(wp, resource_version)?;
        req.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static(metadata_accept(false, self.metadata_protobuf)),
        );
        self.events(req).await
    }

    /// Lists objects as the server prints them for `kubectl get`: a [`Table`] of the
    /// resource's columns, a row per object. Asked for in JSON even when this Api uses
    /// protobuf (Tables have none).
    ///
    /// ```no_run
    /// # async fn run(api: kubewright_client::Api<k8s_openapi::api::core::v1::Pod>) -> kubewright_client::Result<()> {
    /// let table = api.list_table(&Default::default()).await?;
    /// let status = table.column("Status");
    /// for row in &table.rows {
    ///     println!("{} {}", row.cells[0], status.map_or(&serde_json::Value::Null, |i| &row.cells[i]));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_table(&self, lp: &ListParams) -> Result<Table> {
        self.table(self.request.list(lp)?).await
    }

    /// One object as the server prints it: a [`Table`] with one row.
    pub async fn get_table(&self, name: &str) -> Result<Table> {
        self.table(self.request.get(name, None)?).await
    }

    async fn table(&self, mut req: http::Request<Vec<u8>>) -> Result<Table> {
        req.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static(TABLE_ACCEPT),
        );
        let table: Table = self.client.request(req).await?;
        if table.kind != "Table" {
            // A server that cannot print tables answers the plain object or list.
            return Err(Error::Decode {
                what: "Table".into(),
                source: serde::de::Error::custom(format!(
                    "the server answered a {:?}, not a Table",
                    table.kind
                )),
            });
        }
        Ok(table)
    }

    /// Collects a finite watch (one with a server timeout) into a Vec.
    pub async fn watch_collect(
        &self,
        wp: &WatchParams,
        resource_version: &str,
    ) -> Result<Vec<WatchEvent<K>>> {
        let s = self.watch(wp, resource_version).await?;
        s.collect::<Vec<_>>().await.into_iter().collect()
    }
}

fn decode_delete<T: DeserializeOwned>(
    mut v: serde_json::Value,
    skip_managed_fields: bool,
    list: bool,
) -> Result<DeleteResult<T>> {
    if v.get("kind").and_then(serde_json::Value::as_str) == Some("Status") {
        let s: Status = serde_json::from_value(v).map_err(|source| Error::Decode {
            what: "Status".into(),
            source,
        })?;
        return Ok(DeleteResult::Status(Box::new(s)));
    }
    if skip_managed_fields {
        let objects = match v.get_mut("items") {
            Some(serde_json::Value::Array(items)) if list => items.iter_mut().collect(),
            _ => vec![&mut v],
        };
        for obj in objects {
            if let Some(meta) = obj
                .get_mut("metadata")
                .and_then(serde_json::Value::as_object_mut)
            {
                meta.remove("managedFields");
            }
        }
    }
    serde_json::from_value(v)
        .map(DeleteResult::Object)
        .map_err(|source| Error::Decode {
            what: "object".into(),
            source,
        })
}
