use kubewright::CustomResource;

#[derive(CustomResource)]
#[kube(group = "example.com")]
struct FooSpec {
    size: i32,
}

fn main() {}
