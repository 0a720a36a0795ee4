use kubewright::CustomResource;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, schemars::JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Foo",
    status = "FooStatus"
)]
struct FooSpec {
    size: i32,
}

fn main() {}
