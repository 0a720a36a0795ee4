use super::*;
use serde_json::json;

fn check(v: &Value, schema: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    validate(v, schema, old, "", &mut causes);
    causes
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                    {"rule": "!has(self.forbidden)", "reason": "FieldValueForbidden", "fieldPath": ".forbidden", "message": "must not be set"},
                    {"rule": "self.name == oldSelf.name", "message": "name is immutable"},
                    {"rule": "size(self.items) <= self.max", "messageExpression": "'at most ' + string(self.max) + ' items'"}
                ],
                "properties": {
                    "min": {"type": "integer"},
                    "max": {"type": "integer"},
                    "ratio": {"type": "number", "x-kubernetes-validations": [{"rule": "self < 1.0"}]},
                    "name": {"type": "string", "x-kubernetes-validations": [
                        {"rule": "self.startsWith('a') && self.matches('^[a-z]+$')"}
                    ]},
                    "forbidden": {"type": "string"},
                    "items": {
                        "type": "array",
                        "x-kubernetes-validations": [{"rule": "self.all(i, i.n >= 0)", "message": "negative"}],
                        "items": {
                            "type": "object",
                            "x-kubernetes-validations": [{"rule": "self.n != 7", "message": "seven"}],
                            "properties": {"n": {"type": "integer"}}
                        }
                    }
                }
            }
        }
    })
}

fn obj(spec: Value) -> Value {
    json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": spec})
}

#[test]
fn valid_object_passes() {
    let o = obj(json!({"min": 1, "max": 2, "name": "abc", "ratio": 0.5, "items": [{"n": 1}]}));
    assert_eq!(check(&o, &schema(), None), vec![]);
}

#[test]
fn object_rule_failure_has_message_and_path() {
    let o = obj(json!({"min": 3, "max": 2, "items": []}));
    let c = check(&o, &schema(), None);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].field, "spec");
    assert_eq!(c[0].reason, "FieldValueInvalid");
    assert_eq!(c[0].message, "Invalid value: min must not exceed max");
}

#[test]
fn scalar_rules_default_message() {
    let o = obj(json!({"min": 1, "max": 2, "name": "Bad", "ratio": 1.5, "items": []}));
    let mut c = check(&o, &schema(), None);
    c.sort_by(|a, b| a.field.cmp(&b.field));
    assert_eq!(c.len(), 2, "{c:?}");
    assert_eq!(c[0].field, "spec.name");
    assert_eq!(
        c[0].message,
        "Invalid value: \"Bad\": failed rule: self.startsWith('a') && self.matches('^[a-z]+$')"
    );
    // An integral JSON number in a `number` field is a double.
    let o = obj(json!({"min": 1, "max": 2, "ratio": 2, "items": []}));
    let c = check(&o, &schema(), None);
    assert_eq!(c[0].field, "spec.ratio");
    assert_eq!(c[0].message, "Invalid value: 2: failed rule: self < 1.0");
}

#[test]
fn has_reason_and_field_path() {
    let o = obj(json!({"min": 1, "max": 2, "forbidden": "x", "items": []}));
    let c = check(&o, &schema(), None);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].field, "spec.forbidden");
    assert_eq!(c[0].reason, "FieldValueForbidden");
    assert_eq!(c[0].message, "Forbidden: must not be set");
}

#[test]
fn message_expression() {
    let o = obj(json!({"min": 0, "max": 1, "items": [{"n": 1}, {"n": 2}]}));
    let c = check(&o, &schema(), None);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].message, "Invalid value: at most 1 items");
}

#[test]
fn nested_nodes_in_arrays() {
    let o = obj(json!({"min": 0, "max": 5, "items": [{"n": 1}, {"n": 7}, {"n": -1}]}));
    let mut c = check(&o, &schema(), None);
    c.sort_by(|a, b| a.field.cmp(&b.field));
    let fields: Vec<_> = c
        .iter()
        .map(|c| (c.field.as_str(), c.message.as_str()))
        .collect();
    assert_eq!(
        fields,
        vec![
            ("spec.items", "Invalid value: negative"),
            ("spec.items[1]", "Invalid value: seven"),
        ]
    );
}

#[test]
fn transition_rules() {
    let old = obj(json!({"min": 0, "max": 5, "name": "abc", "items": []}));
    // On create, rules using oldSelf are skipped.
    assert_eq!(check(&old, &schema(), None), vec![]);
    let same = obj(json!({"min": 1, "max": 5, "name": "abc", "items": []}));
    assert_eq!(check(&same, &schema(), Some(&old)), vec![]);
    let changed = obj(json!({"min": 0, "max": 5, "name": "abd", "items": []}));
    let c = check(&changed, &schema(), Some(&old));
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].message, "Invalid value: name is immutable");
}

#[test]
fn immutable_scalar_and_optional_old_self() {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "id": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "Value is immutable"}
        ]},
        "n": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true, "message": "may only grow"},
            {"rule": "oldSelf.hasValue() || self < 100", "optionalOldSelf": true, "message": "too big to start"}
        ]}
    }}}});
    let a = obj(json!({"id": "x", "n": 5}));
    assert_eq!(check(&a, &s, None), vec![]);
    let big = obj(json!({"id": "x", "n": 500}));
    let c = check(&big, &s, None);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].message, "Invalid value: 500: too big to start");
    assert_eq!(check(&big, &s, Some(&a)), vec![]);
    let b = obj(json!({"id": "y", "n": 4}));
    let mut c = check(&b, &s, Some(&a));
    c.sort_by(|a, b| a.field.cmp(&b.field));
    assert_eq!(c.len(), 2, "{c:?}");
    assert_eq!(c[0].field, "spec.id");
    assert_eq!(c[0].message, "Invalid value: \"y\": Value is immutable");
    assert_eq!(c[1].field, "spec.n");
    assert_eq!(c[1].message, "Invalid value: 4: may only grow");
}

#[test]
fn unchanged_values_are_ratcheted_and_absent_nodes_skipped() {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'bad'"}]}
    }}}});
    let bad = obj(json!({"a": "bad"}));
    assert_eq!(check(&bad, &s, None).len(), 1);
    assert_eq!(check(&bad, &s, Some(&bad)), vec![]);
    assert_eq!(check(&obj(json!({})), &s, None), vec![]);
}

#[test]
fn runtime_errors_and_odd_rules_do_not_panic() {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-validations": [
        {"rule": "self.missing == 1"},
        {"rule": "self.n / 0 == 1"},
        {"rule": "self.n"},
        {"rule": "self.s.matches('[')"},
        {"rule": "unknownFn(self)"},
        {"rule": "(((("},
        {"rule": "self.s.lowerAscii() == 'abc' && self.s.contains('B') && self.s.endsWith('c') && [1,2].exists(x, x == 2) && [1,2].map(x, x * 2) == [2, 4] && [1,2,3].filter(x, x > 1).size() == 2"}
    ], "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}}});
    let c = check(&obj(json!({"n": 1, "s": "aBc"})), &s, None);
    assert_eq!(c.len(), 6, "{c:#?}");
    assert!(
        c.iter()
            .all(|c| c.field == "spec" && c.reason == "FieldValueInvalid")
    );
    assert!(
        c[0].message.contains("evaluating rule: self.missing == 1"),
        "{}",
        c[0].message
    );
    assert!(
        c[5].message.contains("compilation failed"),
        "{}",
        c[5].message
    );
}

#[test]
fn compile_errors_in_schemas() {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-validations": [
        {"rule": "self.a =="},
        {"rule": "foo.bar == 1"},
        {"rule": "self.all(x, x == 1) && [1].exists_one(y, y == 1)"},
        {"rule": "self.a == 1", "optionalOldSelf": true}
    ]}}});
    let mut out = Vec::new();
    compile_errors(&s, "spec.versions[0].schema.openAPIV3Schema", &mut out);
    let fields: Vec<_> = out.iter().map(|(f, _)| f.as_str()).collect();
    let base = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    assert_eq!(
        fields,
        vec![
            format!("{base}[0].rule"),
            format!("{base}[1].rule"),
            format!("{base}[3].optionalOldSelf"),
        ],
        "{out:#?}"
    );
    assert!(
        out[0]
            .1
            .starts_with("Invalid value: {\"Rule\":\"self.a ==\",\"Message\":\"\",")
    );
    assert!(
        out[0].1.contains("compilation failed: ERROR: <input>"),
        "{}",
        out[0].1
    );
    assert!(
        out[1].1.contains("undeclared reference to 'foo'"),
        "{}",
        out[1].1
    );
    assert_eq!(
        out[2].1,
        "Invalid value: true: may not be set if oldSelf is not used in rule"
    );

    // Rules written wrong are reported, and no rule of the node (or above it) is compiled.
    let s = json!({"type": "object", "properties": {"spec": {"type": "object",
    "x-kubernetes-validations": [{"rule": "self.a =="}],
    "properties": {"a": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "self ==", "reason": "Nope"},
        {"rule": " "},
        {"rule": "self > 0", "message": " "},
        {"rule": "self >\n 0"},
        {"rule": "self > 0", "messageExpression": " "}
    ]}}}}});
    let mut out = Vec::new();
    compile_errors(&s, "spec.validation.openAPIV3Schema", &mut out);
    let base =
        "spec.validation.openAPIV3Schema.properties[spec].properties[a].x-kubernetes-validations";
    let want = [
        (
            format!("{base}[0].reason"),
            "Unsupported value: \"Nope\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
        ),
        (
            format!("{base}[1].rule"),
            "Required value: rule is not specified",
        ),
        (
            format!("{base}[2].message"),
            "Invalid value: \" \": must be non-empty if specified",
        ),
        (
            format!("{base}[3].message"),
            "Required value: message must be specified if rule contains line breaks",
        ),
        (
            format!("{base}[4].messageExpression"),
            "Required value: messageExpression must be non-empty if specified",
        ),
    ];
    let got: Vec<(&str, &str)> = out.iter().map(|(f, m)| (f.as_str(), m.as_str())).collect();
    let want: Vec<(&str, &str)> = want.iter().map(|(f, m)| (f.as_str(), *m)).collect();
    assert_eq!(got, want);
}

#[test]
fn cost_errors_in_schemas() {
    let rule = |r: &str| json!([{"rule": r}]);
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        // 100 x 100 names, each match costing 16: 160,000
        "outer": {"type": "array", "maxItems": 100, "items": {"type": "object", "properties": {
            "inner": {"type": "array", "maxItems": 100, "items": {"type": "object", "properties": {
                "n": {"type": "string", "maxLength": 10, "x-kubernetes-validations": rule("self.matches('^a+b+c+d+$')")}
            }}}
        }}},
        // the same under a list without maxItems: as many strings as fit in a request,
        // 3 MiB / 3 (`"",`), x 16 = 16,777,216
        "unbounded": {"type": "array", "items": {"type": "object", "properties": {
            "n": {"type": "string", "maxLength": 10, "x-kubernetes-validations": rule("self.matches('^a+b+c+d+$')")}
        }}},
        // oldSelf where items cannot be matched with old ones
        "atomic": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 3,
            "x-kubernetes-validations": rule("self == oldSelf")}},
        "keyed": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"], "items": {"type": "object", "required": ["k"],
            "properties": {"k": {"type": "string", "maxLength": 3}},
            "x-kubernetes-validations": rule("self.k == oldSelf.k")}},
        "msg": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "self > 0", "messageExpression": "'bad: ' + string(self)"},
            {"rule": "self > 1", "optionalOldSelf": false}
        ]}
    }}}});
    let mut out = Vec::new();
    compile_errors(&s, "spec.validation.openAPIV3Schema", &mut out);
    let base = "spec.validation.openAPIV3Schema.properties[spec].properties";
    let got: Vec<(&str, &str)> = out
        .iter()
        .map(|(f, m)| (f.as_str(), m.split(" (try").next().unwrap_or(m)))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                format!("{base}[atomic].items.x-kubernetes-validations[0].rule").as_str(),
                format!("Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within {base}[atomic]").as_str()
            ),
            (
                format!("{base}[msg].x-kubernetes-validations[0].messageExpression").as_str(),
                "Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x"
            ),
            (
                format!("{base}[msg].x-kubernetes-validations[1].optionalOldSelf").as_str(),
                "Invalid value: false: may not be set if oldSelf is not used in rule"
            ),
            (
                format!("{base}[unbounded].items.properties[n].x-kubernetes-validations[0].rule").as_str(),
                "Forbidden: estimated rule cost exceeds budget by factor of 1.7x"
            ),
            (
                format!("{base}[msg].x-kubernetes-validations[0].messageExpression").as_str(),
                "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            (
                format!("{base}[unbounded].items.properties[n].x-kubernetes-validations[0].rule").as_str(),
                "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            (
                "spec.validation.openAPIV3Schema",
                "Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x"
            ),
        ],
        "{out:#?}"
    );
}

#[test]
fn rules_on_untyped_nodes() {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"x-kubernetes-preserve-unknown-fields": true, "x-kubernetes-validations": [{"rule": "self.x == 1"}]}
    }}}});
    let mut out = Vec::new();
    compile_errors(&s, "spec.validation.openAPIV3Schema", &mut out);
    assert_eq!(
        out,
        vec![(
            "spec.validation.openAPIV3Schema.properties[spec].properties[a].x-kubernetes-validations".to_string(),
            "Internal error: internal error: failed to construct type information for x-kubernetes-validations rules: unable to convert structural schema to CEL declarations".to_string()
        )]
    );
}

/// Rules nested as deeply as cel-go's parser allows (one shape per limit kube-apiserver was
/// measured at): the CRD check accepts them, and they run on objects. The `cel` crate's
/// parser needs tens of MiB of stack for them in a debug build, the test thread has 2.
fn deepest_rules() -> Vec<(&'static str, String)> {
    let nest = |open: &str, inner: &str, close: &str, n: usize| {
        format!("{}{inner}{}", open.repeat(n), close.repeat(n))
    };
    vec![
        ("parentheses", nest("(", "self.n", ")", 249) + " > 0"),
        ("calls", nest("int(", "self.n", ")", 249) + " > 0"),
        (
            "macros",
            (0..249).fold("self.b".to_string(), |r, i| format!("[1].all(x{i}, {r})")),
        ),
        (
            "sums",
            "1".to_string() + &" + 1".repeat(248) + " + self.n > 249",
        ),
        ("ternaries", "false ? false : ".repeat(248) + "self.n > 0"),
        // always true: their evaluation builds the nested values
        (
            "lists",
            format!("size({}) == 1", nest("[", "self.n", "]", 248)),
        ),
        (
            "maps",
            format!("size({}) == 1", nest("{1: ", "self.n", "}", 248)),
        ),
    ]
}

fn rules_schema(rules: &[String]) -> Value {
    let rules: Vec<Value> = rules.iter().map(|r| json!({"rule": r})).collect();
    json!({
        "type": "object",
        "x-kubernetes-validations": rules,
        "properties": {"n": {"type": "integer"}, "b": {"type": "boolean"}}
    })
}

#[test]
fn deepest_rules_compile_and_run() {
    let rules: Vec<String> = deepest_rules().into_iter().map(|(_, r)| r).collect();
    let s = rules_schema(&rules);
    let mut out = Vec::new();
    compile_errors(&s, "spec.validation.openAPIV3Schema", &mut out);
    assert_eq!(out, vec![]);
    assert_eq!(check(&json!({"n": 1, "b": true}), &s, None), vec![]);
    let failed: Vec<String> = check(&json!({"n": 0, "b": false}), &s, None)
        .into_iter()
        .map(|c| c.message)
        .collect();
    let names: Vec<&str> = deepest_rules().into_iter().map(|(n, _)| n).collect();
    assert_eq!(failed.len(), 5, "{names:?}: {failed:?}");
    assert!(
        failed
            .iter()
            .all(|m| m.starts_with("Invalid value: failed rule: ")),
        "{failed:?}"
    );
}

/// One level deeper, each is refused with kube-apiserver's error, as are rules nested
/// thousands deep and rules over cel-go's size limit, before the parser sees them.
#[test]
fn too_deep_rules_are_refused_with_cel_gos_errors() {
    const PARSE: &str = "ERROR: <input>:-1:0: expression recursion limit exceeded: 250";
    const BUILD: &str = "ERROR: <input>:-1:0: max recursion depth exceeded";
    let nest = |open: &str, inner: &str, close: &str, n: usize| {
        format!("{}{inner}{}", open.repeat(n), close.repeat(n))
    };
    let cases = [
        (nest("(", "self.n", ")", 250) + " > 0", PARSE.to_string()),
        (nest("(", "self.n > 0", ")", 249), PARSE.to_string()),
        (nest("(", "true", ")", 300), PARSE.to_string()),
        (nest("(", "true", ")", 40_000), PARSE.to_string()),
        (nest("[", "", "]", 40_000) + " == []", PARSE.to_string()),
        (
            (0..250).fold("true".to_string(), |r, i| format!("[1].map(x{i}, {r})[0]")),
            PARSE.to_string(),
        ),
        ("false ? false : ".repeat(300) + "true", PARSE.to_string()),
        ("1".to_string() + &" + 1".repeat(249) + " + self.n > 249", BUILD.to_string()),
        ("self".to_string() + &".n".repeat(20_000) + " == 1", BUILD.to_string()),
        ("'a'".to_string() + &".size().string()".repeat(125) + " == ''", BUILD.to_string()),
        (
            format!("'{}' == ''", "a".repeat(100_000)),
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100008, limit 100000".to_string(),
        ),
    ];
    for (rule, error) in cases {
        let s = rules_schema(std::slice::from_ref(&rule));
        let mut out = Vec::new();
        compile_errors(&s, "s", &mut out);
        assert_eq!(out.len(), 1, "{}: {out:?}", &rule[..40]);
        let (field, message) = &out[0];
        assert_eq!(field, "s.x-kubernetes-validations[0].rule");
        assert!(
            message.starts_with("Invalid value: {\"Rule\":")
                && message.ends_with(&format!("}}: compilation failed: {error}")),
            "{}: {}",
            &rule[..40],
            &message[message.len().saturating_sub(200)..]
        );
        // a stored schema with such a rule fails objects instead of the server
        let c = check(&json!({"n": 1}), &s, None);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].message,
            format!("Invalid value: \"object\": compilation failed: {error}")
        );
    }
}

/// Writes of custom resources find their rules compiled: one parse per rule text.
#[test]
fn compiled_rules_are_cached() {
    let rule = format!(
        "{}self.n > 0{} && self.n < 100",
        "(".repeat(200),
        ")".repeat(200)
    );
    let first = on_rule_stack(|| compile_checked(&rule)).expect("the rule compiles");
    let second = on_rule_stack(|| compile_checked(&rule)).expect("the rule compiles");
    assert!(Arc::ptr_eq(&first, &second));
    let broken = "self.n >";
    let e1 = compile_checked(broken).err();
    assert!(e1.is_some());
    assert_eq!(compile_checked(broken).err(), e1);
    assert!(compiled_cache().rules.contains_key(broken));
}

/// Values and schemas as deep as a request body can be: a rule at every level of a schema
/// nested 60 deep (the most a JSON body holds), over an object as deep.
#[test]
fn deep_schemas_and_values_are_walked() {
    let depth = 60;
    let mut s = json!({"type": "integer", "x-kubernetes-validations": [{"rule": "self > 0"}]});
    let mut v = json!(0);
    for _ in 0..depth {
        s = json!({
            "type": "object",
            "properties": {"a": s},
            "x-kubernetes-validations": [{"rule": "self == self && has(self.a)"}]
        });
        v = json!({ "a": v });
    }
    let mut out = Vec::new();
    compile_errors(&s, "s", &mut out);
    assert_eq!(out, vec![]);
    let c = check(&v, &s, None);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].field, vec!["a"; depth].join("."));
    assert_eq!(c[0].message, "Invalid value: 0: failed rule: self > 0");
}
