use kubewright::CustomResource;

#[derive(CustomResource)]
#[kube(
    group = "Example.COM",
    version = "1",
    kind = "foo",
    shortname = "F",
    printcolumn(name = "X", json_path = "spec.x", type = "float"),
    printcolumn = r#"{"name": "Y", "jsonPath": ".spec.y""#,
    scale(spec = ".status.replicas", status = ".spec.replicas"),
    validation(message = "no rule"),
    validation(rule = "self.x > 0", reason = "Because"),
    namespaced = "yes"
)]
struct FooSpec {
    x: i32,
}

#[derive(CustomResource)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Bar",
    kind = "Baz",
    plural = "Bars"
)]
struct BarSpec {
    x: i32,
}

#[derive(CustomResource)]
#[kube(group = "example.com", version = "v1", kind = "QuxSpec")]
struct QuxSpec {
    x: i32,
}

fn main() {}
