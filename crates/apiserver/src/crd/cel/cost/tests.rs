use super::*;
use serde_json::json;

/// The estimated cost of `rule` on a node of schema `node`, below the root of the schema.
fn cost_of(node: &Value, rule: &str) -> u64 {
    cost_with(node, rule, false)
}

fn cost_with(node: &Value, rule: &str, optional_old_self: bool) -> u64 {
    let root = node.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
    let decl = decl_of(node, root).expect("a declared type");
    let p = crate::crd::cel::compile_checked(rule).expect("the rule compiles");
    estimate(p.expression(), &decl, optional_old_self)
}

/// Costs kube-apiserver v1.36.2 estimated for these rules, each measured by declaring the rule
/// on the items of an array with a `maxItems` chosen around the budget: accepted with `M`,
/// refused with `M + 1` (and the factor in its message), which pins the cost down. Rules using
/// `oldSelf` were measured on the items of a `map` list.
#[test]
fn costs_match_kube_apiserver() {
    let cases: Vec<Value> =
        serde_json::from_str(include_str!("kube_apiserver_costs.json")).expect("the fixture");
    assert!(cases.len() > 100);
    let mut wrong = Vec::new();
    for case in &cases {
        let rule = case["rule"].as_str().expect("a rule");
        let want = case["cost"].as_u64().expect("a cost");
        let optional = case["optionalOldSelf"] == Value::Bool(true);
        let got = cost_with(&case["schema"], rule, optional);
        if got != want {
            wrong.push(format!(
                "{rule} on {}: {got}, kube-apiserver {want}",
                case["schema"]
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn declared_sizes_follow_the_schema_and_the_request_limit() {
    // maxLength counts code points of up to 4 bytes; unbounded strings fill a request.
    let d = decl_of(&json!({"type": "string", "maxLength": 10}), false).expect("a type");
    assert_eq!(d.size().max, 40);
    let d = decl_of(&json!({"type": "string"}), false).expect("a type");
    assert_eq!(d.size().max, 3 * 1024 * 1024 - 2);
    // An unbounded list holds as many of its smallest items as fit: `{}` plus a comma.
    let d = decl_of(
        &json!({"type": "array", "items": {"type": "object"}}),
        false,
    )
    .expect("a type");
    assert_eq!(d.size().max, (3 * 1024 * 1024 - 2) / 3);
    // Required properties without a default make objects bigger, so fewer fit.
    let item =
        json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}});
    let d = decl_of(&item, false).expect("a type");
    assert_eq!(d.min_size, 2 + 4 + 2 + 4);
    assert_eq!(d.max_cardinality(), 3 * 1024 * 1024 / 13);
    // Nodes without a type are not visible to rules.
    assert!(
        decl_of(
            &json!({"x-kubernetes-preserve-unknown-fields": true}),
            false
        )
        .is_none()
    );
}

#[test]
fn escaping_of_property_names() {
    assert_eq!(
        escape("a-b.c/d").as_deref(),
        Some("a__dash__b__dot__c__slash__d")
    );
    assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
    assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
    assert_eq!(escape("1a"), None);
    assert_eq!(escape("a b"), None);
}

#[test]
fn error_messages_and_totals() {
    let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    assert_eq!(
        cost_error_message("estimated rule cost", 11_022_000, 10_000_000),
        format!("estimated rule cost exceeds budget by factor of 1.102200x {hint}")
    );
    assert_eq!(
        cost_error_message("estimated rule cost", 36_000_000, 10_000_000),
        format!("estimated rule cost exceeds budget by factor of 3.6x {hint}")
    );
    assert_eq!(
        cost_error_message("estimated rule cost", u64::MAX, 10_000_000),
        format!("estimated rule cost exceeds budget by factor of more than 100x {hint}")
    );
    let mut t = TotalCost::default();
    for (i, c) in [
        5,
        2_000_000,
        999_999,
        7_000_000,
        3_000_000,
        1_000_000,
        u64::MAX,
    ]
    .into_iter()
    .enumerate()
    {
        t.observe(format!("r{i}"), c);
    }
    assert_eq!(t.total, u64::MAX);
    let top: Vec<&str> = t.most_expensive.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(top, ["r6", "r3", "r4", "r1"]);
}

#[test]
fn unknown_sizes_saturate() {
    // The size of string(int) is unknown: concatenating it costs the most there is.
    let node = json!({"type": "integer"});
    let c = cost_of(&node, "'n=' + string(self) == 'n=1'");
    assert!(c > 100 * STATIC_ESTIMATED_COST_LIMIT, "{c}");
    // Deeply nested comprehensions over unbounded lists do not overflow.
    let node = json!({"type": "array", "items": {"type": "array", "items": {"type": "string"}}});
    let c = cost_of(
        &node,
        "self.all(x, x.all(y, self.exists(z, z.exists(w, w.contains(y)))))",
    );
    assert_eq!(c, u64::MAX);
}
