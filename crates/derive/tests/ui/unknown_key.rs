use kubewright::CustomResource;

#[derive(CustomResource)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Foo",
    colour = "red",
    namespaced
)]
struct FooSpec {
    size: i32,
}

#[derive(CustomResource)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Bar",
    printcolumn(name = "X", json_path = ".spec.x", width = 3)
)]
struct BarSpec {
    size: i32,
}

#[derive(CustomResource)]
#[kube(group = "example.com", version = "v1", kind = "Baz", crates(kube_core = ::kubewright::core))]
struct BazSpec {
    size: i32,
}

fn main() {}
