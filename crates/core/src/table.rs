//! Server-side printing: the `meta.k8s.io/v1 Table` that `kubectl get` shows.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::{Deserialize, Serialize};

/// Objects as the server prints them: the columns of the resource's printer and one row
/// per object (`kubectl get` without `-o`). Tables are always JSON: they have no protobuf
/// form, so a client that prefers protobuf asks for them in JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Table {
    /// `meta.k8s.io/v1`.
    pub api_version: String,
    /// `Table`.
    pub kind: String,
    /// The list's metadata (resourceVersion, continue).
    #[serde(default)]
    pub metadata: ListMeta,
    /// The columns, in order.
    #[serde(default)]
    pub column_definitions: Vec<TableColumnDefinition>,
    /// One row per object.
    #[serde(default)]
    pub rows: Vec<TableRow>,
}

impl Table {
    /// The index of the column called `name` (e.g. `"Name"`, `"Age"`).
    pub fn column(&self, name: &str) -> Option<usize> {
        self.column_definitions.iter().position(|c| c.name == name)
    }
}

/// A column of a [`Table`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableColumnDefinition {
    /// Header, e.g. `Name`.
    pub name: String,
    /// OpenAPI type of the cells: `string`, `integer`, `number`, `boolean`.
    #[serde(rename = "type")]
    pub type_: String,
    /// OpenAPI format, e.g. `name`, `date`.
    #[serde(default)]
    pub format: String,
    /// What the column shows.
    #[serde(default)]
    pub description: String,
    /// 0 for the columns `kubectl get` shows, higher for `-o wide` ones.
    #[serde(default)]
    pub priority: i32,
}

/// A row of a [`Table`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableRow {
    /// One cell per column.
    pub cells: Vec<serde_json::Value>,
    /// Row conditions (e.g. `Completed`), when the printer sets them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<serde_json::Value>>,
    /// The object, by default its `PartialObjectMetadata` (`includeObject=Metadata`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<serde_json::Value>,
}
