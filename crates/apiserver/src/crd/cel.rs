//! CEL validation rules of custom resources (`x-kubernetes-validations`), evaluated with
//! the `cel` crate as kube-apiserver does: `self` is the value at the schema node declaring
//! the rule, `oldSelf` its previous value on updates (transition rules), failures become
//! 422 causes at the node's path.

use kubewright_core::StatusCause;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The environment rules are compiled and run in: the standard library and macros plus the
/// strings, lists and math extensions.
pub(crate) fn env() -> &'static Arc<cel::Env> {
    static ENV: OnceLock<Arc<cel::Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = cel::Env::stdlib();
        // These only fail on a duplicate declaration, which a fresh stdlib has none of.
        let _ = env.add_extension(cel::extensions::strings);
        let _ = env.add_extension(cel::extensions::lists);
        let _ = env.add_extension(cel::extensions::math);
        Arc::new(env)
    })
}

/// Stack that compiling, estimating and evaluating rules run on: enough for the deepest rule
/// cel-go's parser limits allow, with room to spare. The `cel` crate's parser takes up to
/// ~200 KiB of stack a nesting level in a debug build, 48 MiB for lists nested as deeply as
/// the limits allow (32 MiB and less for other shapes, a few MiB to estimate and evaluate
/// them). Mapped for the call, and backed by memory only as deep as it is used, when the
/// thread's own stack has less left; a thread would cost 20 times as much.
const RULE_STACK_SIZE: usize = 128 << 20;

/// Runs `f` on a stack with at least [`RULE_STACK_SIZE`] left.
pub(crate) fn on_rule_stack<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RULE_STACK_SIZE, RULE_STACK_SIZE, f)
}

/// A compiled rule or `messageExpression`.
pub(crate) struct Rule {
    expr: cel::IdedExpr,
    /// Whether it refers to `oldSelf` (a transition rule).
    uses_old_self: bool,
}

impl Rule {
    pub(crate) fn expression(&self) -> &cel::IdedExpr {
        &self.expr
    }
}

/// Parses an expression, within cel-go's parser limits (checked on the text first: the parser
/// would run out of stack), turning a panic of the parser into an error.
pub(crate) fn compile(src: &str) -> Result<cel::IdedExpr, String> {
    parse_limits::check(src)?;
    let depth = u16::try_from(parse_limits::MAX_RECURSION_DEPTH).unwrap_or(u16::MAX);
    let parser = env().parser().max_recursion_depth(depth);
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parser.parse(src))) {
        Ok(Ok(p)) => Ok(p),
        // The parser's own count of nesting, which the text check keeps it under.
        Ok(Err(e)) if e.to_string().contains("Recursion limit of") => Err(format!(
            "ERROR: <input>:-1:0: expression recursion limit exceeded: {}",
            parse_limits::MAX_RECURSION_DEPTH
        )),
        // cel-go's layout: the source excerpt under the error is indented by a space.
        Ok(Err(e)) => {
            let e = e.to_string().replace("\n| ", "\n | ");
            if e.starts_with("ERROR: ") {
                Err(e)
            } else {
                Err(format!("ERROR: <input>: {e}"))
            }
        }
        Err(_) => Err("ERROR: <input>: the expression could not be parsed".into()),
    }
}

/// Compiled rules by their text, so that writes of custom resources do not parse their
/// rules again. Cleared when the texts it holds pass [`COMPILED_CACHE_BYTES`].
#[derive(Default)]
struct CompiledCache {
    rules: HashMap<String, Result<Arc<Rule>, String>>,
    bytes: usize,
}

const COMPILED_CACHE_BYTES: usize = 16 << 20;

fn compiled_cache() -> std::sync::MutexGuard<'static, CompiledCache> {
    static CACHE: OnceLock<std::sync::Mutex<CompiledCache>> = OnceLock::new();
    CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Compiles a rule and checks that it only refers to `self` and `oldSelf`, or finds it
/// compiled. Runs on the rule stack (dropping a rule the cache lets go of recurses too).
fn compile_checked(src: &str) -> Result<Arc<Rule>, String> {
    if let Some(found) = compiled_cache().rules.get(src) {
        return found.clone();
    }
    let compiled = compile_checked_uncached(src).map(Arc::new);
    let mut cache = compiled_cache();
    let bytes = src.len() + compiled.as_ref().err().map_or(0, String::len);
    if cache.bytes + bytes > COMPILED_CACHE_BYTES {
        cache.rules.clear();
        cache.bytes = 0;
    }
    if bytes <= COMPILED_CACHE_BYTES
        && cache
            .rules
            .insert(src.to_string(), compiled.clone())
            .is_none()
    {
        cache.bytes += bytes;
    }
    compiled
}

fn compile_checked_uncached(src: &str) -> Result<Rule, String> {
    let expr = compile(src)?;
    let refs = expr.references();
    let mut undeclared: Vec<&str> = refs
        .variables()
        .into_iter()
        .filter(|v| {
            !matches!(*v, "self" | "oldSelf")
                && !declared_by_macro(&expr, v)
                && !is_type_or_namespace(v)
        })
        .collect();
    undeclared.sort();
    if let Some(v) = undeclared.first() {
        return Err(format!(
            "ERROR: <input>: undeclared reference to '{v}' (in container '')"
        ));
    }
    let uses_old_self = refs.has_variable("oldSelf");
    drop(refs);
    Ok(Rule {
        expr,
        uses_old_self,
    })
}

/// Whether `name` is a type (`type(self) == int`) or a namespace of functions (`lists.range`)
/// that rules can name in kube-apiserver and this server evaluates.
pub(crate) fn is_type_or_namespace(name: &str) -> bool {
    const TYPES: [&str; 11] = [
        "bool",
        "bytes",
        "double",
        "int",
        "uint",
        "string",
        "list",
        "map",
        "null_type",
        "type",
        "optional_type",
    ];
    matches!(name, "lists" | "optional")
        || (TYPES.contains(&name) && env().types().find_type(name).is_some())
}

/// Whether `name` is the variable of a comprehension (`all`, `exists`, `map`...) in `expr`.
pub(crate) fn declared_by_macro(expr: &cel::IdedExpr, name: &str) -> bool {
    use cel::common::ast::Expr;
    fn walk(e: &cel::IdedExpr, name: &str) -> bool {
        match &e.expr {
            Expr::Comprehension(c) => {
                c.iter_var == name
                    || c.iter_var2.as_deref() == Some(name)
                    || c.accu_var == name
                    || [
                        &c.iter_range,
                        &c.accu_init,
                        &c.loop_cond,
                        &c.loop_step,
                        &c.result,
                    ]
                    .into_iter()
                    .any(|x| walk(x, name))
            }
            Expr::Call(c) => {
                c.target.as_deref().is_some_and(|t| walk(t, name))
                    || c.args.iter().any(|a| walk(a, name))
            }
            Expr::Select(s) => walk(&s.operand, name),
            Expr::List(l) => l.elements.iter().any(|x| walk(x, name)),
            Expr::Map(m) => m.entries.iter().any(|en| match &en.expr {
                cel::common::ast::EntryExpr::MapEntry(me) => {
                    walk(&me.key, name) || walk(&me.value, name)
                }
                cel::common::ast::EntryExpr::StructField(f) => walk(&f.value, name),
            }),
            Expr::Struct(s) => s.entries.iter().any(|en| match &en.expr {
                cel::common::ast::EntryExpr::MapEntry(me) => {
                    walk(&me.key, name) || walk(&me.value, name)
                }
                cel::common::ast::EntryExpr::StructField(f) => walk(&f.value, name),
            }),
            _ => false,
        }
    }
    walk(expr, name)
}

/// The rules declared at a schema node.
fn rules_of(schema: &Value) -> &[Value] {
    schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// How a rule prints in a CRD validation error: Go's JSON of `apiextensions.ValidationRule`
/// (its field names, HTML-safe escapes).
fn rule_json(r: &Value) -> String {
    let string = |k: &str| Value::String(str_of(r, k).to_string());
    let reason = r
        .get("reason")
        .and_then(Value::as_str)
        .map_or(Value::Null, |x| Value::String(x.to_string()));
    let optional = r
        .get("optionalOldSelf")
        .and_then(Value::as_bool)
        .map_or(Value::Null, Value::Bool);
    let fields = [
        ("Rule", string("rule")),
        ("Message", string("message")),
        ("MessageExpression", string("messageExpression")),
        ("Reason", reason),
        ("FieldPath", string("fieldPath")),
        ("OptionalOldSelf", optional),
    ];
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| {
            let json = serde_json::to_string(v)
                .unwrap_or_default()
                .replace('<', "\\u003c")
                .replace('>', "\\u003e")
                .replace('&', "\\u0026")
                .replace('\u{2028}', "\\u2028")
                .replace('\u{2029}', "\\u2029");
            format!("\"{k}\":{json}")
        })
        .collect();
    format!("{{{}}}", body.join(","))
}

/// Checks the rules of a structural schema compile and fit kube-apiserver's cost budget; `path`
/// is the schema's field path (`spec.versions[0].schema.openAPIV3Schema`). Returns `(field,
/// message)` pairs, the message starting with its reason (`Invalid value: ...`,
/// `Forbidden: ...`): the rules' schema errors first, then their CEL errors, then the
/// schema's total cost, as kube-apiserver orders them.
pub(crate) fn compile_errors(schema: &Value, path: &str, out: &mut Vec<(String, String)>) {
    on_rule_stack(|| compile_errors_on_stack(schema, path, out));
}

fn compile_errors_on_stack(schema: &Value, path: &str, out: &mut Vec<(String, String)>) {
    let mut found = RuleErrors::default();
    let root = NodeScope {
        resource_root: true,
        cardinality: Some(1),
        uncorrelatable: None,
    };
    node_rule_errors(schema, path, &root, &mut found);
    out.append(&mut found.schema);
    out.append(&mut found.cel);
    let total = found.total;
    if total.total > cost::STATIC_ESTIMATED_CRD_COST_LIMIT {
        for (field, _) in &total.most_expensive {
            out.push((
                field.clone(),
                "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema".into(),
            ));
        }
        out.push((
            path.to_string(),
            format!(
                "Forbidden: {}",
                cost::cost_error_message(
                    "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                    total.total,
                    cost::STATIC_ESTIMATED_CRD_COST_LIMIT,
                )
            ),
        ));
    }
}

/// What `compile_errors` finds: errors in how rules are written, errors compiling them, and
/// the running cost total.
#[derive(Default)]
struct RuleErrors {
    schema: Vec<(String, String)>,
    cel: Vec<(String, String)>,
    total: cost::TotalCost,
}

/// Where a schema node sits: `resource_root` at the root and embedded resources;
/// `cardinality` how many times the node can occur in an object, `None` when an array or map
/// above it is unbounded; `uncorrelatable` the path of the highest array above it whose items
/// cannot be matched with their old values (not a `map` list), where rules may not use
/// `oldSelf`.
struct NodeScope<'a> {
    resource_root: bool,
    cardinality: Option<u64>,
    uncorrelatable: Option<&'a str>,
}

fn has_line_breaks(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// The rule errors of a schema node and its children (children first, as kube-apiserver
/// reports them). Rules are not compiled where they, or rules below them, are written wrong.
fn node_rule_errors(schema: &Value, path: &str, scope: &NodeScope<'_>, found: &mut RuleErrors) {
    let schema_errors_before = found.schema.len();
    let child_cardinality = scope
        .cardinality
        .zip(cost::max_elements_factor(schema))
        .map(|(c, f)| cost::mul_guard(c, f));
    let child = |s: &Value, uncorrelatable| NodeScope {
        resource_root: s.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)),
        cardinality: child_cardinality,
        uncorrelatable,
    };
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        let at = format!("{path}.additionalProperties");
        node_rule_errors(ap, &at, &child(ap, scope.uncorrelatable), found);
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, sub) in props {
            let at = format!("{path}.properties[{k}]");
            node_rule_errors(sub, &at, &child(sub, scope.uncorrelatable), found);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        let at = format!("{path}.items");
        let unc = match scope.uncorrelatable {
            Some(u) => Some(u),
            None if str_of(schema, "x-kubernetes-list-type") != "map" => Some(path),
            None => None,
        };
        node_rule_errors(items, &at, &child(items, unc), found);
    }
    let rules = rules_of(schema);
    if rules.is_empty() {
        return;
    }
    for (i, r) in rules.iter().enumerate() {
        rule_schema_errors(r, &format!("{path}.x-kubernetes-validations[{i}]"), found);
    }
    if found.schema.len() > schema_errors_before {
        return;
    }
    let Some(decl) = cost::decl_of(schema, scope.resource_root) else {
        // a node without a type (and lists and maps of such) is invisible to CEL
        found.cel.push((
            format!("{path}.x-kubernetes-validations"),
            "Internal error: internal error: failed to construct type information for x-kubernetes-validations rules: unable to convert structural schema to CEL declarations".into(),
        ));
        return;
    };
    for (i, r) in rules.iter().enumerate() {
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        rule_cel_errors(r, &at, &decl, scope, found);
    }
}

/// Errors in how a rule is written (kube-apiserver's schema errors).
fn rule_schema_errors(r: &Value, at: &str, found: &mut RuleErrors) {
    let rule = str_of(r, "rule").trim();
    let raw_message = str_of(r, "message");
    let message = raw_message.trim();
    let mut push = |field: String, msg: String| found.schema.push((field, msg));
    if rule.is_empty() {
        push(
            format!("{at}.rule"),
            "Required value: rule is not specified".into(),
        );
    } else if !raw_message.is_empty() && message.is_empty() {
        push(
            format!("{at}.message"),
            format!(
                "Invalid value: {}: must be non-empty if specified",
                go_quote(raw_message)
            ),
        );
    } else if has_line_breaks(message) {
        push(
            format!("{at}.message"),
            format!(
                "Invalid value: {}: must not contain line breaks",
                go_quote(raw_message)
            ),
        );
    } else if has_line_breaks(rule) && message.is_empty() {
        push(
            format!("{at}.message"),
            "Required value: message must be specified if rule contains line breaks".into(),
        );
    }
    let me = str_of(r, "messageExpression");
    if !me.is_empty() && me.trim().is_empty() {
        push(
            format!("{at}.messageExpression"),
            "Required value: messageExpression must be non-empty if specified".into(),
        );
    }
    if let Some(reason) = r.get("reason").and_then(Value::as_str)
        && !matches!(
            reason,
            "FieldValueInvalid"
                | "FieldValueForbidden"
                | "FieldValueRequired"
                | "FieldValueDuplicate"
        )
    {
        push(
            format!("{at}.reason"),
            format!(
                "Unsupported value: {}: supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
                go_quote(reason)
            ),
        );
    }
    let field_path = str_of(r, "fieldPath");
    if !field_path.is_empty() && field_path.trim().is_empty() {
        push(
            format!("{at}.fieldPath"),
            format!(
                "Invalid value: {}: must be non-empty if specified",
                go_quote(field_path)
            ),
        );
    }
    if has_line_breaks(field_path) {
        push(
            format!("{at}.fieldPath"),
            format!(
                "Invalid value: {}: must not contain line breaks",
                go_quote(field_path)
            ),
        );
    }
}

/// A rule's compilation and cost errors (kube-apiserver's CEL errors).
fn rule_cel_errors(
    r: &Value,
    at: &str,
    decl: &cost::Decl,
    scope: &NodeScope<'_>,
    found: &mut RuleErrors,
) {
    let rule = str_of(r, "rule");
    let optional_old = r.get("optionalOldSelf") == Some(&Value::Bool(true));
    let compiled = compile_checked(rule);
    // The cost of the rule times the number of times it can run: as often as the node occurs,
    // or, below an unbounded array or map, as often as it fits in a request.
    if let Ok(p) = &compiled {
        let max_cost = cost::estimate(p.expression(), decl, optional_old);
        let runs = scope.cardinality.unwrap_or_else(|| decl.max_cardinality());
        let rule_cost = cost::mul_guard(max_cost, runs);
        if rule_cost > cost::STATIC_ESTIMATED_COST_LIMIT {
            found.cel.push((
                format!("{at}.rule"),
                format!(
                    "Forbidden: {}",
                    cost::cost_error_message(
                        "estimated rule cost",
                        rule_cost,
                        cost::STATIC_ESTIMATED_COST_LIMIT
                    )
                ),
            ));
        }
        found.total.observe(format!("{at}.rule"), rule_cost);
    }
    let p = match &compiled {
        Ok(p) => p,
        Err(e) => {
            found.cel.push((
                format!("{at}.rule"),
                format!("Invalid value: {}: compilation failed: {e}", rule_json(r)),
            ));
            if let Some(b) = r.get("optionalOldSelf").and_then(Value::as_bool) {
                found.cel.push((
                    format!("{at}.optionalOldSelf"),
                    format!("Invalid value: {b}: may not be set if oldSelf is not used in rule"),
                ));
            }
            return;
        }
    };
    let me = str_of(r, "messageExpression");
    if !me.is_empty() {
        match compile_checked(me) {
            Err(e) => found.cel.push((
                format!("{at}.messageExpression"),
                format!(
                    "Invalid value: {}: messageExpression compilation failed: {e}",
                    rule_json(r)
                ),
            )),
            // A message is built once per failure: its cost is not multiplied.
            Ok(mp) => {
                let me_cost = cost::estimate(mp.expression(), decl, optional_old);
                if me_cost > cost::STATIC_ESTIMATED_COST_LIMIT {
                    found.cel.push((
                        format!("{at}.messageExpression"),
                        format!(
                            "Forbidden: {}",
                            cost::cost_error_message(
                                "estimated messageExpression cost",
                                me_cost,
                                cost::STATIC_ESTIMATED_COST_LIMIT
                            )
                        ),
                    ));
                }
                found
                    .total
                    .observe(format!("{at}.messageExpression"), me_cost);
            }
        }
    }
    if p.uses_old_self {
        if let Some(u) = scope.uncorrelatable {
            found.cel.push((
                format!("{at}.rule"),
                format!(
                    "Invalid value: {}: oldSelf cannot be used on the uncorrelatable portion of the schema within {u}",
                    go_quote(rule)
                ),
            ));
        }
    } else if let Some(b) = r.get("optionalOldSelf").and_then(Value::as_bool) {
        found.cel.push((
            format!("{at}.optionalOldSelf"),
            format!("Invalid value: {b}: may not be set if oldSelf is not used in rule"),
        ));
    }
}

/// A JSON value as a CEL value, numbers typed by the schema (`number` is a double).
pub(crate) fn to_cel(v: &Value, schema: Option<&Value>) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => {
            let double =
                schema.and_then(|s| s.get("type")).and_then(Value::as_str) == Some("number");
            match (n.as_i64(), n.as_u64()) {
                (Some(i), _) if !double => cel::Value::Int(i),
                (None, Some(u)) if !double => cel::Value::UInt(u),
                _ => cel::Value::Float(n.as_f64().unwrap_or(0.0)),
            }
        }
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.get("items"));
            cel::Value::List(Arc::new(
                items.iter().map(|i| to_cel(i, item_schema)).collect(),
            ))
        }
        Value::Object(m) => {
            let props = schema
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object);
            let ap = schema
                .and_then(|s| s.get("additionalProperties"))
                .filter(|a| a.is_object());
            let map: HashMap<String, cel::Value> = m
                .iter()
                .map(|(k, child)| {
                    let sub = props.and_then(|p| p.get(k)).or(ap);
                    (k.clone(), to_cel(child, sub))
                })
                .collect();
            cel::Value::Map(map.into())
        }
    }
}

/// The OpenAPI type printed as the "value" of a rule failure (`Invalid value: "object"`).
fn node_type(v: &Value, schema: &Value) -> String {
    match schema.get("type").and_then(Value::as_str) {
        Some(t) => t.to_string(),
        None => match v {
            Value::Object(_) => "object",
            Value::Array(_) => "array",
            Value::String(_) => "string",
            Value::Number(n) if n.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::Bool(_) => "boolean",
            Value::Null => "null",
        }
        .to_string(),
    }
}

enum Outcome {
    Value(cel::Value),
    Error(String),
}

/// Runs a rule with `self` (and `oldSelf`) bound, never panicking.
fn run(p: &Rule, this: &cel::Value, old: Option<&cel::Value>) -> Outcome {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut ctx = cel::Context::with_env(Arc::clone(env()));
        ctx.add_variable_from_value("self", this.clone());
        if let Some(o) = old {
            ctx.add_variable_from_value("oldSelf", o.clone());
        }
        cel::Value::resolve(&p.expr, &ctx)
    }));
    match result {
        Ok(Ok(v)) => Outcome::Value(v),
        Ok(Err(e)) => Outcome::Error(e.to_string()),
        Err(_) => Outcome::Error("internal error".into()),
    }
}

/// `path` + a rule's `fieldPath` (`.spec.x`, `['a.b']`, `.items[0]`...).
fn join_field_path(path: &str, field_path: &str) -> String {
    let fp = field_path.trim();
    if fp.is_empty() {
        return path.to_string();
    }
    let fp = fp.strip_prefix('.').unwrap_or(fp);
    if path.is_empty() {
        fp.to_string()
    } else if fp.starts_with('[') {
        format!("{path}{fp}")
    } else {
        format!("{path}.{fp}")
    }
}

fn rule_error_string(r: &Value) -> String {
    let m = str_of(r, "message").trim();
    if m.is_empty() {
        str_of(r, "rule").trim().to_string()
    } else {
        m.to_string()
    }
}

/// A cause for a rule: `shown` is the bad value as kube-apiserver prints it (`"string"`, `5`),
/// `None` where it leaves it out (objects and arrays).
fn failure(reason: &str, field: String, shown: Option<&str>, detail: &str) -> StatusCause {
    let value = |what: &str| match shown {
        Some(v) => format!("{what}: {v}"),
        None => what.to_string(),
    };
    let (reason, message) = match reason {
        "FieldValueForbidden" => (reason, format!("Forbidden: {detail}")),
        "FieldValueRequired" => (reason, format!("Required value: {detail}")),
        "FieldValueDuplicate" => (reason, value("Duplicate value")),
        _ => (
            "FieldValueInvalid",
            format!("{}: {detail}", value("Invalid value")),
        ),
    };
    StatusCause {
        reason: reason.into(),
        message,
        field,
    }
}

/// A string as Go's `%q` prints it.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A scalar value as kube-apiserver prints a rule's bad value (`%q` strings, `%v` numbers and
/// booleans); `None` for objects and arrays, which it leaves out.
fn shown_value(v: &Value, ty: &str) -> Option<String> {
    if matches!(ty, "object" | "array") {
        return None;
    }
    Some(match v {
        Value::String(s) => go_quote(s),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (None, None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{f:.0}"),
            (None, None, Some(f)) => f.to_string(),
            _ => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        Value::Array(_) | Value::Object(_) => return None,
    })
}

/// Evaluates the rules declared at one node.
fn eval_node_rules(
    v: &Value,
    schema: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<StatusCause>,
) {
    let rules = rules_of(schema);
    if rules.is_empty() {
        return;
    }
    let this = to_cel(v, Some(schema));
    let old_cel = old.map(|o| to_cel(o, Some(schema)));
    let ty = node_type(v, schema);
    // evaluation problems name the node's type, failed rules show its value
    let ty_shown = go_quote(&ty);
    let value_shown = shown_value(v, &ty);
    for r in rules {
        let rule = str_of(r, "rule");
        let p = match compile_checked(rule) {
            Ok(p) => p,
            Err(e) => {
                causes.push(failure(
                    "FieldValueInvalid",
                    path.to_string(),
                    Some(&ty_shown),
                    &format!("compilation failed: {e}"),
                ));
                continue;
            }
        };
        let transition = p.uses_old_self;
        let optional_old = r.get("optionalOldSelf") == Some(&Value::Bool(true));
        let old_binding = match (transition, optional_old, &old_cel) {
            (false, _, Some(_)) if old == Some(v) => continue, // ratcheting: unchanged
            (false, _, _) => None,
            (true, false, None) => continue, // a transition rule on create
            (true, false, Some(o)) => Some(o.clone()),
            (true, true, o) => Some(cel::Value::Opaque(Arc::new(match o {
                Some(o) => cel::objects::OptionalValue::of(o.clone()),
                None => cel::objects::OptionalValue::none(),
            }))),
        };
        let field = join_field_path(path, str_of(r, "fieldPath"));
        let reason = str_of(r, "reason");
        match run(&p, &this, old_binding.as_ref()) {
            Outcome::Value(cel::Value::Bool(true)) => {}
            Outcome::Value(cel::Value::Bool(false)) => {
                let mut detail = None;
                let me = str_of(r, "messageExpression");
                if !me.is_empty()
                    && let Ok(mp) = compile_checked(me)
                    && let Outcome::Value(cel::Value::String(s)) =
                        run(&mp, &this, old_binding.as_ref())
                    && !s.trim().is_empty()
                    && !s.contains('\n')
                {
                    detail = Some(s.trim().to_string());
                }
                let detail = detail.unwrap_or_else(|| {
                    let m = str_of(r, "message").trim();
                    if m.is_empty() {
                        format!("failed rule: {}", rule_error_string(r))
                    } else {
                        m.to_string()
                    }
                });
                causes.push(failure(reason, field, value_shown.as_deref(), &detail));
            }
            Outcome::Value(other) => causes.push(failure(
                "FieldValueInvalid",
                path.to_string(),
                Some(&ty_shown),
                &format!(
                    "rule did not evaluate to a bool: {other:?} evaluating rule: {}",
                    rule_error_string(r)
                ),
            )),
            Outcome::Error(e) => {
                let detail = if e.starts_with("found no matching overload") {
                    format!(
                        "'{e}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                        rule_error_string(r)
                    )
                } else {
                    format!("{e} evaluating rule: {}", rule_error_string(r))
                };
                causes.push(failure(
                    "FieldValueInvalid",
                    path.to_string(),
                    Some(&ty_shown),
                    &detail,
                ));
            }
        }
    }
}

/// Walks a value and its schema, evaluating every rule of the nodes present. `old` is the
/// previous value at the same place (for transition rules), when there is one: object
/// properties correlate by name, list items only in `map` lists (by keys) and `set`s.
pub(crate) fn validate(
    v: &Value,
    schema: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<StatusCause>,
) {
    on_rule_stack(|| validate_node(v, schema, old, path, causes));
}

fn validate_node(
    v: &Value,
    schema: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<StatusCause>,
) {
    if v.is_null() {
        return;
    }
    eval_node_rules(v, schema, old, path, causes);
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let ap = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in m {
                if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let Some(sub) = props.and_then(|p| p.get(k)).or(ap) else {
                    continue;
                };
                let child_old = old.and_then(|o| o.get(k));
                let child_path = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                validate_node(child, sub, child_old, &child_path, causes);
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) else {
                return;
            };
            let list_type = str_of(schema, "x-kubernetes-list-type");
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let old_items = old.and_then(Value::as_array);
            for (i, item) in items.iter().enumerate() {
                let item_old = old_items.and_then(|olds| match list_type {
                    "map" if !keys.is_empty() => olds
                        .iter()
                        .find(|o| keys.iter().all(|k| o.get(k) == item.get(k))),
                    "set" => olds.iter().find(|o| *o == item),
                    _ => None,
                });
                validate_node(item, item_schema, item_old, &format!("{path}[{i}]"), causes);
            }
        }
        _ => {}
    }
}

mod cost;
mod parse_limits;

#[cfg(test)]
mod tests;

/// Evaluates the expression `src` with `vars` bound to JSON values (admission webhooks'
/// `matchConditions` over `object`, `oldObject` and `request`): the result, or the
/// compile or evaluation error. Never panics.
pub(crate) fn evaluate(src: &str, vars: &[(&str, &Value)]) -> Result<cel::Value, String> {
    on_rule_stack(|| {
        let expr = compile(src)?;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut ctx = cel::Context::with_env(Arc::clone(env()));
            for (name, v) in vars {
                ctx.add_variable_from_value(*name, to_cel(v, None));
            }
            cel::Value::resolve(&expr, &ctx)
        }));
        match result {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("internal error".into()),
        }
    })
}
