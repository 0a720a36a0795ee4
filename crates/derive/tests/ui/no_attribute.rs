use kubewright::CustomResource;

#[derive(CustomResource)]
struct FooSpec {
    size: i32,
}

fn main() {}
