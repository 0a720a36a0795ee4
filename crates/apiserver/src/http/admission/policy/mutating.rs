//! MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding
//! (`admissionregistration.k8s.io/v1`), applied as kube-apiserver v1.36's `mutating`
//! admission plugin does (`k8s.io/apiserver/pkg/admission/plugin/policy/mutating`), before
//! the mutating webhooks.
//!
//! For every binding that names an existing policy (policies by name, then bindings by
//! name) whose `matchConstraints` and `matchResources` select the request, for each param:
//! the `matchConditions` must all be true, then each mutation runs on the object as the
//! previous ones left it:
//! - `JSONPatch`: the expression's list of `JSONPatch{op, path, value, from}` is applied
//!   as a JSON patch (RFC 6902);
//! - `ApplyConfiguration`: the expression's `Object{...}` is merged into the object as
//!   server-side apply merges (maps and map-lists by key, atomic fields replaced), without
//!   owning anything.
//!
//! An expression that fails, a result of the wrong type or a patch that does not apply
//! refuses the request (`policy '<p>' with binding '<b>' denied request: <why>`) unless the
//! policy's `failurePolicy` is `Ignore`. A policy with `reinvocationPolicy: IfNeeded` runs
//! once more when a later policy or webhook changed the object after it.
//!
//! The CEL environment is the validating policies' (the same variables, library and
//! limits). Struct literals (`Object{...}`, `Object.spec{...}`, `JSONPatch{...}`) build
//! maps of their fields: their fields are not checked against the object's schema (upstream
//! type-checks them), and what is set is read as JSON.

use super::{
    CompiledPolicy, Dispatch, Expression, FailurePolicy, Input, Matched, Program, Variables,
    request_value, to_cel,
};
use crate::crd::cel as crd_cel;
use crate::error::ApiError;
use crate::http::admission::Attributes;
use crate::registry::schema::Ty;
use crate::storage::Storage;
use serde_json::Value;

/// Storage key of MutatingAdmissionPolicies.
const POLICIES: &str = "admissionregistration.k8s.io/mutatingadmissionpolicies";
/// Storage key of MutatingAdmissionPolicyBindings.
const BINDINGS: &str = "admissionregistration.k8s.io/mutatingadmissionpolicybindings";

/// One mutation of a policy, compiled.
struct Mutation {
    json_patch: bool,
    expression: Option<Expression>,
}

/// What one pass over the policies did.
#[derive(Default)]
pub(crate) struct Pass {
    /// Whether the object changed.
    pub changed: bool,
    /// `(policy, binding)` pairs that may run again (`reinvocationPolicy: IfNeeded`), each
    /// with whether the object changed after it last ran.
    reinvocable: Vec<((String, String), bool)>,
}

impl Pass {
    /// Whether some `IfNeeded` policy saw an object that has changed since.
    pub(crate) fn needs_reinvocation(&self) -> bool {
        self.reinvocable.iter().any(|(_, changed)| *changed)
    }

    /// Notes that something after the policies that ran so far (a later policy, a webhook)
    /// changed the object.
    pub(crate) fn changed_after(&mut self) {
        for (_, c) in &mut self.reinvocable {
            *c = true;
        }
    }
}

/// Runs the mutating policies over `attrs.object` (creates and updates of objects), the
/// pairs of `only` alone when it is given (a reinvocation). `ty` is the object's schema.
pub(crate) fn mutate(
    storage: &Storage,
    attrs: &mut Attributes,
    ty: Option<Ty<'_>>,
    only: Option<&Pass>,
) -> Result<Pass, ApiError> {
    let mut pass = Pass::default();
    if attrs.object.is_none() {
        return Ok(pass);
    }
    let (bindings, _) = storage.list(BINDINGS, None);
    if bindings.is_empty() {
        return Ok(pass);
    }
    let by_policy = super::by_policy(&bindings);
    crd_cel::on_rule_stack(|| {
        for (policy_name, bindings) in &by_policy {
            let Some(policy) = storage.get(POLICIES, "", policy_name) else {
                continue;
            };
            for binding in bindings {
                let pair = (policy_name.to_string(), name_of(binding));
                if let Some(only) = only
                    && !only.reinvocable.iter().any(|(p, c)| *p == pair && *c)
                {
                    continue;
                }
                let changed = run_pair(storage, attrs, &policy, binding, ty)?;
                if changed {
                    pass.changed = true;
                    pass.changed_after();
                }
                if policy
                    .pointer("/spec/reinvocationPolicy")
                    .and_then(Value::as_str)
                    == Some("IfNeeded")
                    && only.is_none()
                {
                    pass.reinvocable.push((pair, false));
                }
            }
        }
        Ok::<(), ApiError>(())
    })?;
    Ok(pass)
}

fn name_of(v: &Value) -> String {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// One policy with one binding: whether it changed the object.
fn run_pair(
    storage: &Storage,
    attrs: &mut Attributes,
    policy: &Value,
    binding: &Value,
    ty: Option<Ty<'_>>,
) -> Result<bool, ApiError> {
    let policy_name = name_of(policy);
    let binding_name = name_of(binding);
    let spec = policy.get("spec").unwrap_or(&Value::Null);
    let fail = match spec.get("failurePolicy").and_then(Value::as_str) {
        Some("Ignore") => FailurePolicy::Ignore,
        _ => FailurePolicy::Fail,
    };
    let named = attrs_view(attrs);
    let denied = |why: String| denial(&named, &policy_name, &binding_name, &why);
    // Matching, params and the request variables read the request as it came to this
    // policy; the borrow ends before the object is mutated.
    let mut dispatch = Dispatch {
        storage,
        attrs,
        denied: Vec::new(),
        warnings: Vec::new(),
        namespace: None,
    };
    let Some(constraints) = spec.get("matchConstraints").filter(|c| c.is_object()) else {
        return match fail {
            FailurePolicy::Ignore => Ok(false),
            FailurePolicy::Fail => Err(denied(
                "failed to configure policy: policy contained no match constraints, a required field"
                    .into(),
            )),
        };
    };
    let configured = |r: Result<Option<Matched>, String>| match r {
        Ok(m) => Ok(m),
        Err(e) if fail == FailurePolicy::Fail => {
            Err(denied(format!("failed to configure binding: {e}")))
        }
        Err(_) => Ok(None),
    };
    let Some(matched) = configured(dispatch.matches(constraints))? else {
        return Ok(false);
    };
    let bspec = binding.get("spec").unwrap_or(&Value::Null);
    if let Some(mr) = bspec.get("matchResources").filter(|m| m.is_object())
        && configured(dispatch.matches(mr))?.is_none()
    {
        return Ok(false);
    }
    let param_kind = match spec.get("paramKind").filter(|p| p.is_object()) {
        None => None,
        Some(pk) => match dispatch.param_resource(pk) {
            Ok(r) => Some(r),
            Err(e) if fail == FailurePolicy::Fail => {
                return Err(denied(format!("failed to configure policy: {e}")));
            }
            Err(_) => return Ok(false),
        },
    };
    let params = match dispatch.params(param_kind.as_ref(), bspec.get("paramRef")) {
        Ok(p) => p,
        Err(e) if fail == FailurePolicy::Fail => {
            return Err(denied(format!("failed to configure binding: {e}")));
        }
        Err(_) => return Ok(false),
    };
    let namespace = dispatch.namespace_object()?;
    let request = to_cel(&request_value(attrs, &matched));
    let old_object = attrs.old_object.as_ref().map_or(cel::Value::Null, to_cel);
    let compiled = CompiledPolicy::get(spec, param_kind.is_some());
    let names: Vec<String> = compiled.variables.iter().map(|(n, _)| n.clone()).collect();
    let mutations: Vec<Mutation> = spec
        .get("mutations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| {
            let json_patch = m.get("patchType").and_then(Value::as_str) == Some("JSONPatch");
            let at = if json_patch {
                "/jsonPatch/expression"
            } else {
                "/applyConfiguration/expression"
            };
            Mutation {
                json_patch,
                expression: m
                    .pointer(at)
                    .and_then(Value::as_str)
                    .map(|text| Expression::mutation(text, param_kind.is_some(), &names)),
            }
        })
        .collect();
    let mut changed = false;
    for param in &params {
        let input_for = |object: &Value| Input {
            object: to_cel(object),
            old_object: old_object.clone(),
            request: request.clone(),
            params: param.as_deref().map_or(cel::Value::Null, to_cel),
            namespace: namespace.clone(),
        };
        let object = attrs.object.clone().unwrap_or(Value::Null);
        let mut vars = Variables {
            policy: &compiled,
            values: Default::default(),
            mutating: true,
        };
        // Match conditions see the object as it came to this policy.
        let input = input_for(&object);
        let mut selected = true;
        for mc in &compiled.match_conditions {
            match vars.run(mc, &input) {
                Ok(cel::Value::Bool(false)) => {
                    selected = false;
                    break;
                }
                Ok(_) => {}
                Err(e) if fail == FailurePolicy::Fail => return Err(denied(e)),
                Err(_) => {
                    selected = false;
                    break;
                }
            }
        }
        if !selected {
            continue;
        }
        let mut object = object;
        for m in &mutations {
            let Some(expr) = &m.expression else { continue };
            // Each mutation reads the object as the previous one left it.
            let input = input_for(&object);
            let mut vars = Variables {
                policy: &compiled,
                values: Default::default(),
                mutating: true,
            };
            let result = vars
                .run_mutation(expr, &input)
                .and_then(|v| apply(&mut object, v, m.json_patch, ty));
            match result {
                Ok(()) => {}
                Err(e) if fail == FailurePolicy::Fail => return Err(denied(e)),
                Err(_) => {}
            }
        }
        if attrs.object.as_ref() != Some(&object) {
            changed = true;
            attrs.object = Some(object);
        }
    }
    Ok(changed)
}

/// What a refusal names: the request's resource, group and name.
struct Named {
    resource: String,
    group: String,
    name: String,
}

fn attrs_view(attrs: &Attributes) -> Named {
    Named {
        resource: attrs.resource.clone(),
        group: attrs.group.clone(),
        name: super::request_name(attrs),
    }
}

/// kube-apiserver's refusal: 403 with reason `Invalid`, the message also its only cause.
fn denial(n: &Named, policy: &str, binding: &str, why: &str) -> ApiError {
    let message = format!("policy '{policy}' with binding '{binding}' denied request: {why}");
    ApiError::new(403, "Invalid", message.clone()).with(kubewright_core::StatusDetails {
        name: n.name.clone(),
        group: n.group.clone(),
        kind: n.resource.clone(),
        causes: vec![kubewright_core::StatusCause {
            message,
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// Applies one mutation's result to `object`.
fn apply(
    object: &mut Value,
    result: Value,
    json_patch: bool,
    ty: Option<Ty<'_>>,
) -> Result<(), String> {
    if json_patch {
        let Value::Array(ops) = result else {
            return Err(format!(
                "JSONPatch expression must return a list of JSONPatch, got {}",
                kind_of(&result)
            ));
        };
        let mut patch = Vec::with_capacity(ops.len());
        for op in ops {
            let op: json_patch::PatchOperation = serde_json::from_value(op)
                .map_err(|e| format!("JSON Patch: invalid operation: {e}"))?;
            patch.push(op);
        }
        let mut doc = object.clone();
        // Bounded as every JSON patch kube-apiserver applies (its copy limit is
        // process-wide), and no deeper than a JSON body.
        if let Err(failure) = crate::http::limits::apply_json_patch_bounded(&mut doc, &patch) {
            return Err(match failure {
                crate::http::limits::JsonPatchFailure::TooDeep { .. } => {
                    "JSON Patch: the patched object nests too deeply".to_string()
                }
                other => format!("JSON Patch: {}", other.message(&patch)),
            });
        }
        *object = doc;
        return Ok(());
    }
    if !result.is_object() {
        return Err(format!(
            "ApplyConfiguration expression must return an Object, got {}",
            kind_of(&result)
        ));
    }
    crate::http::patch::merge_applied(object, &result, ty);
    if crate::error::nesting_depth(object) > crate::error::MAX_JSON_DEPTH {
        return Err("the applied configuration nests the object too deeply".into());
    }
    Ok(())
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

impl Expression {
    /// A mutation's expression: its struct literals build maps.
    fn mutation(text: &str, has_params: bool, declared_variables: &[String]) -> Self {
        let mut e = Expression::new_with(text, has_params, declared_variables, &["jsonpatch"]);
        if let Ok(p) = &e.program {
            let mut expr = p.expr.clone();
            structs_as_maps(&mut expr);
            e.program = Ok(std::sync::Arc::new(Program {
                expr,
                names: p.names.clone(),
                variables: p.variables.clone(),
            }));
        }
        e
    }
}

impl Variables<'_> {
    /// Runs a mutation's expression: its value as JSON.
    fn run_mutation(&mut self, e: &Expression, input: &Input) -> Result<Value, String> {
        let v = self.run(e, input)?;
        v.json()
            .map_err(|err| format!("expression '{}' resulted in error: {err}", e.text))
    }
}

/// `jsonpatch.escapeKey`: a map key as one JSON pointer token (`~` as `~0`, `/` as `~1`).
pub(super) fn escape_key(key: std::sync::Arc<String>) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Rewrites struct literals (`Object{a: 1}`, `Object.spec{...}`, `JSONPatch{...}`) into
/// map literals of their fields.
fn structs_as_maps(e: &mut cel::IdedExpr) {
    use cel::common::ast::{EntryExpr, Expr, IdedEntryExpr, LiteralValue, MapEntryExpr, MapExpr};
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if let Expr::Struct(s) = &mut e.expr {
            let entries = std::mem::take(&mut s.entries)
                .into_iter()
                .map(|en| match en.expr {
                    EntryExpr::StructField(f) => IdedEntryExpr {
                        id: en.id,
                        expr: EntryExpr::MapEntry(MapEntryExpr {
                            key: cel::IdedExpr {
                                id: en.id,
                                expr: Expr::Literal(LiteralValue::String(f.field.into())),
                            },
                            value: f.value,
                            optional: f.optional,
                        }),
                    },
                    other => IdedEntryExpr {
                        id: en.id,
                        expr: other,
                    },
                })
                .collect();
            e.expr = Expr::Map(MapExpr { entries });
        }
        match &mut e.expr {
            Expr::Call(c) => {
                if let Some(t) = c.target.as_deref_mut() {
                    stack.push(t);
                }
                stack.extend(c.args.iter_mut());
            }
            Expr::Select(s) => stack.push(&mut s.operand),
            Expr::List(l) => stack.extend(l.elements.iter_mut()),
            Expr::Map(m) => {
                for en in &mut m.entries {
                    match &mut en.expr {
                        EntryExpr::MapEntry(me) => {
                            stack.push(&mut me.key);
                            stack.push(&mut me.value);
                        }
                        EntryExpr::StructField(f) => stack.push(&mut f.value),
                    }
                }
            }
            Expr::Comprehension(c) => {
                let c = &mut **c;
                stack.push(&mut c.iter_range);
                stack.push(&mut c.accu_init);
                stack.push(&mut c.loop_cond);
                stack.push(&mut c.loop_step);
                stack.push(&mut c.result);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn eval_mutation(src: &str, object: &Value) -> Value {
        let mut expr = crd_cel::compile(src).expect("parses");
        structs_as_maps(&mut expr);
        let mut ctx = cel::Context::with_env(Arc::clone(crd_cel::env()));
        ctx.add_variable_from_value("object", to_cel(object));
        cel::Value::resolve(&expr, &ctx)
            .expect("evaluates")
            .json()
            .expect("JSON")
    }

    #[test]
    fn struct_literals_build_their_fields() {
        let v = eval_mutation(
            r#"Object{metadata: Object.metadata{labels: {"a": object.data.k}}, data: {"x": "y"}}"#,
            &json!({"data": {"k": "v"}}),
        );
        assert_eq!(
            v,
            json!({"metadata": {"labels": {"a": "v"}}, "data": {"x": "y"}})
        );
        let v = eval_mutation(
            r#"[1, 2].map(i, JSONPatch{op: "add", path: "/a/-", value: i})"#,
            &json!({}),
        );
        assert_eq!(
            v,
            json!([{"op": "add", "path": "/a/-", "value": 1}, {"op": "add", "path": "/a/-", "value": 2}])
        );
    }

    #[test]
    fn escape_key_makes_one_pointer_token() {
        let e = Expression::mutation(
            r#"[JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("example.com/a~b"), value: "x"}]"#,
            false,
            &[],
        );
        let compiled = CompiledPolicy::get(&json!({}), false);
        let mut vars = Variables {
            policy: &compiled,
            values: Default::default(),
            mutating: true,
        };
        let input = Input {
            object: cel::Value::Null,
            old_object: cel::Value::Null,
            request: cel::Value::Null,
            params: cel::Value::Null,
            namespace: cel::Value::Null,
        };
        let v = vars.run_mutation(&e, &input).unwrap();
        assert_eq!(v[0]["path"], json!("/metadata/labels/example.com~1a~0b"));
    }

    #[test]
    fn json_patch_copies_are_bounded_like_every_patch() {
        // 30 copies of /data into itself double it each time: 100 bytes * 2^30 unbounded.
        let mut obj = json!({"data": {"a": "x".repeat(100)}});
        let ops: Vec<Value> = (0..30)
            .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/k{i}")}))
            .collect();
        let err = apply(&mut obj, Value::Array(ops), true, None).unwrap_err();
        assert!(
            err.starts_with(
                "JSON Patch: Unable to complete the copy, the accumulated size increase of copy is "
            ) && err.ends_with(", exceeding the limit 3145728"),
            "{err}"
        );
        // The object is left as it was.
        assert_eq!(obj, json!({"data": {"a": "x".repeat(100)}}));
        // A copy below its own source nests one level deeper each time: refused before the
        // object nests deeper than a JSON body may.
        let mut obj = json!({"a": {"b": 1}});
        let ops: Vec<Value> = (0..200)
            .map(|_| json!({"op": "copy", "from": "/a", "path": "/a/b"}))
            .collect();
        let err = apply(&mut obj, Value::Array(ops), true, None).unwrap_err();
        assert_eq!(err, "JSON Patch: the patched object nests too deeply");
    }

    #[test]
    fn json_patches_apply_or_say_why_not() {
        let mut obj = json!({"metadata": {"name": "x"}});
        apply(
            &mut obj,
            json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]),
            true,
            None,
        )
        .unwrap();
        assert_eq!(obj["metadata"]["labels"], json!({"a": "b"}));
        let err = apply(
            &mut obj,
            json!([{"op": "replace", "path": "/metadata/annotations/x", "value": "y"}]),
            true,
            None,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "JSON Patch: replace operation does not apply: doc is missing path: /metadata/annotations/x: missing value"
        );
        // A failed patch leaves the object as it was.
        assert_eq!(
            obj,
            json!({"metadata": {"name": "x", "labels": {"a": "b"}}})
        );
        assert!(apply(&mut obj, json!("nope"), true, None).is_err());
    }

    #[test]
    fn apply_configurations_merge_lists_by_key() {
        let ty = crate::registry::schema::builtin_def("io.k8s.api.core.v1.Pod");
        let mut pod = json!({"spec": {"containers": [
            {"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]}});
        apply(
            &mut pod,
            json!({"spec": {"containers": [{"name": "b", "env": [{"name": "X", "value": "1"}]}]}}),
            false,
            ty,
        )
        .unwrap();
        assert_eq!(
            pod,
            json!({"spec": {"containers": [{"name": "a", "image": "nginx"},
                {"name": "b", "image": "busybox", "env": [{"name": "X", "value": "1"}]}]}})
        );
        assert!(apply(&mut pod, json!([1]), false, ty).is_err());
    }
}
