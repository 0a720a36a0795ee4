//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) for the built-in kinds.
//!
//! One schema table (`schema.json`, generated from the Kubernetes `generated.proto` files
//! and Go types by `gen.py`) drives three codecs:
//!
//! * [`from_slice`]: a serde `Deserializer` over the protobuf wire. It decodes a body
//!   straight into the k8s-openapi types (or any type that reads the same JSON), with no
//!   second set of generated types and no intermediate JSON: it presents each message as
//!   the JSON object the server would have sent, applying the Go types' JSON rules
//!   (`omitempty`, inlined structs, Time/Quantity/IntOrString forms). Fields a type
//!   ignores (e.g. `managedFields` under `WithoutManagedFields`) are skipped unread.
//! * [`decode`]: a body to a `serde_json::Value` (the embedded API server's request
//!   bodies).
//! * [`encode`]: a JSON value to a body (the embedded API server's responses).
//!
//! Watch streams are framed by [`watch`].
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! let json = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "a", "namespace": "default"}, "data": {"k": "v"}});
//! let body = kubewright_proto::encode(&json)?;
//! assert!(body.starts_with(b"k8s\0"));
//! let cm: ConfigMap = kubewright_proto::from_slice(&body)?;
//! assert_eq!(cm.metadata.name.as_deref(), Some("a"));
//! assert_eq!(cm.data.unwrap()["k"], "v");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod de;
mod encode;
mod schema;
mod value;
pub mod walk;
pub mod watch;
mod wire;

pub use de::{from_raw, from_slice, metadata_from_raw, strip_managed_fields};
pub use encode::{EncodeError, encode, supports};
pub use value::decode;

/// Low-level writers of the protobuf wire format (for hand-built messages).
pub mod write {
    pub use crate::encode::{envelope, key, ld, varint};
}

/// The prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8; 4] = b"k8s\0";
/// The newtype name that asks this crate's deserializer for the raw protobuf message of
/// an object (`visit_borrowed_bytes`) instead of its fields: a type whose `Deserialize`
/// calls `deserialize_newtype_struct(RAW_MESSAGE, visitor)` receives the message bytes
/// from protobuf and `visit_newtype_struct` from any other format (e.g. JSON).
pub const RAW_MESSAGE: &str = "$kubewright_proto::RawMessage";
/// The Kubernetes protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Deepest message nesting accepted.
const MAX_DEPTH: usize = 100;

const F_REPEATED: u8 = 1;
const F_INLINE: u8 = 2;
const F_OMIT_EMPTY: u8 = 4;
const F_OMIT_ZERO: u8 = 8;
const F_DEFAULT: u8 = 16;

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";
const LIST_META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta";
const APIEXT: &str = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.";

/// Why a protobuf body could not be decoded: what was wrong, and where (the JSON path
/// of the field).
///
/// One pointer wide, so that the decoder's many `Result`s stay small.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(Box<ErrorInner>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct ErrorInner {
    msg: String,
    /// Innermost segment first.
    path: Vec<String>,
}

impl Error {
    #[cold]
    pub(crate) fn new(msg: impl Into<String>) -> Self {
        Self(Box::new(ErrorInner {
            msg: msg.into(),
            path: Vec::new(),
        }))
    }
    #[cold]
    pub(crate) fn at(mut self, segment: &str) -> Self {
        self.0.path.push(segment.to_string());
        self
    }
    /// What was wrong, without the path.
    pub fn message(&self) -> &str {
        &self.0.msg
    }
    /// The dotted JSON path of the field, when known.
    pub fn path(&self) -> Option<String> {
        (!self.0.path.is_empty()).then(|| {
            let path: Vec<&str> = self.0.path.iter().rev().map(String::as_str).collect();
            path.join(".")
        })
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid protobuf body: {}", self.0.msg)?;
        if let Some(path) = self.path() {
            write!(f, " (at {path})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl serde::de::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Self::new(msg.to_string())
    }
}
