use kubewright::CustomResource;

#[derive(CustomResource)]
#[kube(group = "example.com", version = "v1", kind = "Foo")]
enum FooSpec {
    A,
    B,
}

#[derive(CustomResource)]
#[kube(group = "example.com", version = "v1", kind = "Bar")]
struct BarSpec<T> {
    value: T,
}

fn main() {}
