use kubewright::CustomResource;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, schemars::JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Bar",
    status = "not a type!"
)]
struct BarSpec {
    size: i32,
}

fn main() {}
