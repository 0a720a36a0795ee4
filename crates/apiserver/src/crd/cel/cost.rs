//! Static cost estimation of CEL validation rules, as kube-apiserver prices them when a CRD is
//! written: cel-go's checker cost model (`checker/cost.go`) with Kubernetes' size estimator (the
//! schema's `maxLength`/`maxItems`/`maxProperties`, or the most a 3 MiB request can hold) and
//! function costs (`k8s.io/apiserver/pkg/cel/library/cost.go`).
//!
//! The model is reproduced rule for rule, quirks included (an expression's "path" through the
//! schema decides its size; sizes of things the model cannot trace are unknown, i.e. `u64::MAX`),
//! because the verdict is an API contract: a CRD the real server refuses must be refused here, and
//! one it accepts must be accepted.
//!
//! The `cel` crate has no type checker, so a small one here types each node from the schema of
//! `self`, as far as the cost model needs: which overloads a call can resolve to, whether a field
//! selection is on an object or map, and which values are fixed-size scalars.

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// The largest request kube-apiserver accepts, which bounds unbounded lists, maps and strings.
const MAX_REQUEST_SIZE_BYTES: i64 = 3 * 1024 * 1024;
/// The largest estimated cost of one rule (times the number of times it can run) or one
/// `messageExpression`: `StaticEstimatedCostLimit`.
pub(crate) const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// The largest total estimated cost of all the rules of one schema: `StaticEstimatedCRDCostLimit`.
pub(crate) const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;

const STRING_TRAVERSAL_COST_FACTOR: f64 = 0.1;
const REGEX_STRING_LENGTH_COST_FACTOR: f64 = 0.25;
const SELECT_AND_IDENT_COST: u64 = 1;
const LIST_CREATE_BASE_COST: u64 = 10;
const MAP_CREATE_BASE_COST: u64 = 30;
const STRUCT_CREATE_BASE_COST: u64 = 40;
/// `cel.MaxNameFormatRegexSize` and `cel.MaxFormatSize` of the Kubernetes format library.
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;
const MAX_FORMAT_SIZE: u64 = 64;
const ACCUMULATOR_NAMES: [&str; 2] = ["@result", "__result__"];

// ---------------------------------------------------------------------------------------------
// Estimates

/// A `[min, max]` range of a size or a cost; arithmetic saturates at `u64::MAX` like cel-go's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Est {
    min: u64,
    max: u64,
}

impl Est {
    const ZERO: Est = Est { min: 0, max: 0 };
    const UNKNOWN: Est = Est {
        min: 0,
        max: u64::MAX,
    };

    fn fixed(v: u64) -> Est {
        Est { min: v, max: v }
    }

    fn add(self, o: Est) -> Est {
        Est {
            min: self.min.saturating_add(o.min),
            max: self.max.saturating_add(o.max),
        }
    }

    fn mul(self, o: Est) -> Est {
        Est {
            min: self.min.saturating_mul(o.min),
            max: self.max.saturating_mul(o.max),
        }
    }

    /// `MultiplyByCostFactor`: times a factor, rounded up.
    fn factor(self, f: f64) -> Est {
        Est {
            min: mul_factor(self.min, f),
            max: mul_factor(self.max, f),
        }
    }

    fn union(self, o: Est) -> Est {
        Est {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
}

/// `multiplyByCostFactor`: `ceil(x * y)`, `u64::MAX` when it does not fit.
fn mul_factor(x: u64, y: f64) -> u64 {
    let two_to_64 = 18_446_744_073_709_551_616.0_f64;
    let xf = x as f64;
    if xf > 0.0 && y > 0.0 && xf > two_to_64 / y {
        return u64::MAX;
    }
    let c = (xf * y).ceil();
    if c >= two_to_64 { u64::MAX } else { c as u64 }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Container {
    List,
    Map,
}

/// The sizes of the keys (list: `1`) and values of a list or map built in the expression.
#[derive(Clone, Copy, Debug)]
struct EntrySize {
    container: Container,
    key: Est,
    val: Est,
}

fn union_entries(a: Option<EntrySize>, b: Option<EntrySize>) -> Option<EntrySize> {
    let (a, b) = (a?, b?);
    Some(EntrySize {
        container: a.container,
        key: a.key.union(b.key),
        val: a.val.union(b.val),
    })
}

// ---------------------------------------------------------------------------------------------
// Declared types of schema nodes (`SchemaDeclType`)

/// The CEL type of a schema node with Kubernetes' size bounds: `max_elements` is the most
/// elements (list items, map entries, string bytes) it can have, `min_size` the fewest bytes it
/// serializes to.
#[derive(Debug)]
pub(crate) struct Decl {
    kind: DeclKind,
    max_elements: i64,
    min_size: i64,
}

#[derive(Debug)]
enum DeclKind {
    Bool,
    Int,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    IntOrString,
    List(Box<Decl>),
    /// A map with string keys (`additionalProperties`).
    Map(Box<Decl>),
    /// An object; fields by their CEL (escaped) names.
    Object(BTreeMap<String, Decl>),
}

/// The key type of maps: a string without a size bound (`max_elements` 0).
static MAP_KEY: Decl = Decl {
    kind: DeclKind::String,
    max_elements: 0,
    min_size: 2,
};

impl Decl {
    fn simple(kind: DeclKind, min_size: i64) -> Decl {
        Decl {
            kind,
            max_elements: 0,
            min_size,
        }
    }

    /// The number of times a rule on this node can run in one request when the schema above
    /// it does not bound it: as many as fit in the largest request.
    pub(crate) fn max_cardinality(&self) -> u64 {
        let sz = self.min_size.saturating_add(1).max(1);
        u64::try_from(MAX_REQUEST_SIZE_BYTES / sz).unwrap_or(0)
    }

    fn size(&self) -> Est {
        Est {
            min: 0,
            max: u64::try_from(self.max_elements).unwrap_or(0),
        }
    }
}

fn bound(s: &Value, key: &str) -> Option<i64> {
    let v = s.get(key)?;
    v.as_i64()
        .or_else(|| v.as_u64().map(|_| i64::MAX))
        .map(|n| n.max(0))
}

fn is_true(s: &Value, key: &str) -> bool {
    s.get(key) == Some(&Value::Bool(true))
}

fn type_of(s: &Value) -> &str {
    s.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The longest an unbounded string can be.
const MAX_STRING_LEN: i64 = MAX_REQUEST_SIZE_BYTES - 2;

/// The declared type of a structural schema node, or `None` when rules cannot see it (no type,
/// or lists and maps of such). `resource_root` is set for the root of a resource and embedded
/// resources, which always have `apiVersion`, `kind` and `metadata.name`/`generateName`.
pub(crate) fn decl_of(s: &Value, resource_root: bool) -> Option<Decl> {
    if is_true(s, "x-kubernetes-int-or-string") {
        let max = match bound(s, "maxLength") {
            Some(n) => n.saturating_mul(4),
            None => MAX_STRING_LEN,
        };
        return Some(Decl {
            kind: DeclKind::IntOrString,
            max_elements: max,
            min_size: 1,
        });
    }
    match type_of(s) {
        "array" => {
            let items = s.get("items").filter(|i| i.is_object())?;
            let item = decl_of(items, is_true(items, "x-kubernetes-embedded-resource"))?;
            let max = match bound(s, "maxItems") {
                Some(n) => n,
                None => (MAX_REQUEST_SIZE_BYTES - 2) / item.min_size.saturating_add(1).max(1),
            };
            Some(Decl {
                kind: DeclKind::List(Box::new(item)),
                max_elements: max,
                min_size: 2,
            })
        }
        "object" => {
            if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                let val = decl_of(ap, is_true(ap, "x-kubernetes-embedded-resource"))?;
                let max = match bound(s, "maxProperties") {
                    Some(n) => n,
                    None => (MAX_REQUEST_SIZE_BYTES - 2) / val.min_size.saturating_add(6).max(1),
                };
                return Some(Decl {
                    kind: DeclKind::Map(Box::new(val)),
                    max_elements: max,
                    min_size: 2,
                });
            }
            let required: Vec<&str> = s
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut props: Vec<(&str, std::borrow::Cow<'_, Value>)> = s
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| {
                    p.iter()
                        .map(|(k, v)| (k.as_str(), std::borrow::Cow::Borrowed(v)))
                        .collect()
                })
                .unwrap_or_default();
            if resource_root && !has_type_and_object_meta(s) {
                props.retain(|(k, _)| !matches!(*k, "kind" | "apiVersion" | "metadata"));
                let string = serde_json::json!({"type": "string"});
                props.push(("kind", std::borrow::Cow::Owned(string.clone())));
                props.push(("apiVersion", std::borrow::Cow::Owned(string.clone())));
                props.push((
                    "metadata",
                    std::borrow::Cow::Owned(serde_json::json!({
                        "type": "object",
                        "properties": {"name": string, "generateName": string},
                    })),
                ));
            }
            let mut fields = BTreeMap::new();
            let mut min_size: i64 = 2; // {}
            for (name, prop) in props {
                let Some(field) = decl_of(&prop, is_true(&prop, "x-kubernetes-embedded-resource"))
                else {
                    continue;
                };
                // Required properties without a default are always serialized.
                if required.contains(&name) && prop.get("default").is_none() {
                    let name_len = i64::try_from(name.len()).unwrap_or(i64::MAX);
                    min_size = min_size
                        .saturating_add(name_len)
                        .saturating_add(field.min_size)
                        .saturating_add(4);
                }
                if let Some(escaped) = escape(name) {
                    fields.insert(escaped, field);
                }
            }
            Some(Decl {
                kind: DeclKind::Object(fields),
                max_elements: 0,
                min_size,
            })
        }
        "string" => {
            let unbounded = || match s.get("enum").and_then(Value::as_array) {
                Some(e) if !e.is_empty() => e
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|v| i64::try_from(v.len()).unwrap_or(i64::MAX))
                    .max()
                    .unwrap_or(0),
                _ => MAX_STRING_LEN,
            };
            Some(
                match s.get("format").and_then(Value::as_str).unwrap_or("") {
                    "byte" => Decl {
                        kind: DeclKind::Bytes,
                        max_elements: bound(s, "maxLength").unwrap_or(MAX_STRING_LEN),
                        min_size: 2,
                    },
                    "duration" => Decl {
                        kind: DeclKind::Duration,
                        max_elements: 32,
                        min_size: 3,
                    },
                    "date" => Decl {
                        kind: DeclKind::Timestamp,
                        max_elements: 12,
                        min_size: 12,
                    },
                    "date-time" => Decl {
                        kind: DeclKind::Timestamp,
                        max_elements: 32,
                        min_size: 21,
                    },
                    _ => Decl {
                        kind: DeclKind::String,
                        max_elements: match bound(s, "maxLength") {
                            // maxLength counts code points, of up to 4 bytes each.
                            Some(n) => n.saturating_mul(4),
                            None => unbounded(),
                        },
                        min_size: 2,
                    },
                },
            )
        }
        "boolean" => Some(Decl::simple(DeclKind::Bool, 4)),
        "number" => Some(Decl::simple(DeclKind::Double, 1)),
        "integer" => Some(Decl::simple(DeclKind::Int, 1)),
        _ => None,
    }
}

/// Whether a resource root already declares `kind`, `apiVersion` and `metadata.name` and
/// `metadata.generateName` as strings (`WithTypeAndObjectMeta` otherwise declares them).
fn has_type_and_object_meta(s: &Value) -> bool {
    let prop = |v: &Value, k: &str| {
        v.get("properties")
            .and_then(|p| p.get(k))
            .map(type_of)
            .unwrap_or("")
            .to_string()
    };
    let Some(meta) = s.get("properties").and_then(|p| p.get("metadata")) else {
        return false;
    };
    prop(s, "kind") == "string"
        && prop(s, "apiVersion") == "string"
        && type_of(meta) == "object"
        && prop(meta, "name") == "string"
        && prop(meta, "generateName") == "string"
}

/// How a property name is spelled in CEL, or `None` when it cannot be (`cel.Escape`).
pub(crate) fn escape(name: &str) -> Option<String> {
    const RESERVED: [&str; 21] = [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// The factor by which a schema node multiplies how often its children occur: `maxItems` of
/// arrays, `maxProperties` of maps, 1 otherwise; `None` for unbounded arrays and maps.
pub(crate) fn max_elements_factor(s: &Value) -> Option<u64> {
    let positive = |k: &str| bound(s, k).map(|n| u64::try_from(n).unwrap_or(0));
    match type_of(s) {
        "object" if s.get("additionalProperties").is_some() => positive("maxProperties"),
        "array" => positive("maxItems"),
        _ => Some(1),
    }
}

/// `base * factor`, `u64::MAX` when it overflows.
pub(crate) fn mul_guard(base: u64, factor: u64) -> u64 {
    base.saturating_mul(factor)
}

/// The message of a cost over its limit (`getCostErrorMessage`).
pub(crate) fn cost_error_message(what: &str, cost: u64, limit: u64) -> String {
    let f = cost as f64 / limit as f64;
    let factor = if f > 100.0 {
        "more than 100x".to_string()
    } else if f < 1.5 {
        format!("{f:.6}x")
    } else {
        format!("{f:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// The running total of a schema's rule costs, and its most expensive rules.
#[derive(Default)]
pub(crate) struct TotalCost {
    pub(crate) total: u64,
    /// Up to four `(field, cost)`, most expensive first, of rules costing at least 1% of the
    /// schema's limit.
    pub(crate) most_expensive: Vec<(String, u64)>,
}

impl TotalCost {
    pub(crate) fn observe(&mut self, field: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((field, cost));
        self.most_expensive.sort_by_key(|e| std::cmp::Reverse(e.1));
        self.most_expensive.truncate(4);
    }
}

// ---------------------------------------------------------------------------------------------
// Types

/// The type of an expression, as far as costs need it.
#[derive(Clone, Debug)]
enum Ty<'d> {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    Null,
    Type,
    Dyn,
    List(Box<Ty<'d>>),
    Map(Box<Ty<'d>>, Box<Ty<'d>>),
    Object(&'d Decl),
    Optional(Box<Ty<'d>>),
    Quantity,
    Url,
    Ip,
    Cidr,
    Semver,
    Format,
}

impl PartialEq for Ty<'_> {
    fn eq(&self, o: &Self) -> bool {
        match (self, o) {
            (Ty::List(a), Ty::List(b)) | (Ty::Optional(a), Ty::Optional(b)) => a == b,
            (Ty::Map(ak, av), Ty::Map(bk, bv)) => ak == bk && av == bv,
            (Ty::Object(a), Ty::Object(b)) => std::ptr::eq(*a, *b),
            _ => std::mem::discriminant(self) == std::mem::discriminant(o),
        }
    }
}

impl<'d> Ty<'d> {
    fn of(d: &'d Decl) -> Ty<'d> {
        match &d.kind {
            DeclKind::Bool => Ty::Bool,
            DeclKind::Int => Ty::Int,
            DeclKind::Double => Ty::Double,
            DeclKind::String => Ty::String,
            DeclKind::Bytes => Ty::Bytes,
            DeclKind::Duration => Ty::Duration,
            DeclKind::Timestamp => Ty::Timestamp,
            DeclKind::IntOrString => Ty::Dyn,
            DeclKind::List(e) => Ty::List(Box::new(Ty::of(e))),
            DeclKind::Map(v) => Ty::Map(Box::new(Ty::String), Box::new(Ty::of(v))),
            DeclKind::Object(_) => Ty::Object(d),
        }
    }

    /// Whether a value of this type could be one of `want` (dyn could be anything).
    fn could(&self, want: fn(&Ty<'d>) -> bool) -> bool {
        matches!(self, Ty::Dyn) || want(self)
    }

    fn is_list(&self) -> bool {
        matches!(self, Ty::List(_))
    }

    fn is_map(&self) -> bool {
        matches!(self, Ty::Map(..))
    }

    fn is_string(&self) -> bool {
        matches!(self, Ty::String)
    }

    fn is_bytes(&self) -> bool {
        matches!(self, Ty::Bytes)
    }

    fn is_number(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    /// A value of a fixed size (`isScalar`).
    fn is_scalar(&self) -> bool {
        match self {
            Ty::Bool | Ty::Double | Ty::Duration | Ty::Int | Ty::Timestamp | Ty::Uint => true,
            Ty::Optional(t) => t.is_scalar(),
            _ => false,
        }
    }

    /// Field selection adds a cost on maps and objects (`MapKind`, `StructKind`).
    fn selection_costs(&self) -> bool {
        matches!(
            self,
            Ty::Map(..) | Ty::Object(_) | Ty::Quantity | Ty::Url | Ty::Semver | Ty::Format
        )
    }

    /// The element type of a list, or the key type of a map (`Type().Parameters()[0]`).
    fn first_param(&self) -> Option<Ty<'d>> {
        match self {
            Ty::List(e) | Ty::Map(e, _) | Ty::Optional(e) => Some((**e).clone()),
            _ => None,
        }
    }

    fn elem(&self) -> Ty<'d> {
        match self {
            Ty::List(e) => (**e).clone(),
            _ => Ty::Dyn,
        }
    }

    fn field(&self, name: &str) -> Ty<'d> {
        match self {
            Ty::Object(d) => match &d.kind {
                DeclKind::Object(fields) => fields.get(name).map(Ty::of).unwrap_or(Ty::Dyn),
                _ => Ty::Dyn,
            },
            Ty::Map(_, v) => (**v).clone(),
            Ty::Optional(t) => Ty::Optional(Box::new(t.field(name))),
            _ => Ty::Dyn,
        }
    }
}

/// The common type of two values (of a list literal, the branches of `?:`...).
fn join<'d>(a: Ty<'d>, b: Ty<'d>) -> Ty<'d> {
    match (a, b) {
        (Ty::Dyn, b) => b,
        (a, Ty::Dyn) => a,
        (Ty::List(a), Ty::List(b)) => Ty::List(Box::new(join(*a, *b))),
        (Ty::Map(ak, av), Ty::Map(bk, bv)) => {
            Ty::Map(Box::new(join(*ak, *bk)), Box::new(join(*av, *bv)))
        }
        (a, b) if a == b => a,
        _ => Ty::Dyn,
    }
}

/// The overloads whose cost is not the flat cost of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ov {
    Other,
    FormatString,
    StringToBytes,
    BytesToString,
    QuoteString,
    StartsWith,
    EndsWith,
    InList,
    InMap,
    MatchesString,
    ContainsString,
    LogicalOr,
    LogicalAnd,
    Conditional,
    AddString,
    AddBytes,
    AddList,
    CompareString,
    CompareBytes,
    Equals,
    NotEquals,
    IndexList,
    IndexMap,
    CidrIp,
    ContainsIpString,
    ContainsCidrString,
    ListSlice,
    ListFlatten,
    ListsRange,
    ListReverse,
    ListDistinct,
    /// `sort()`, for string or bytes elements when set.
    ListSort(bool),
    ListSortBy(bool),
    SetsContains,
    SetsIntersects,
    SetsEquivalent,
}

/// What a call resolved to: the function's (qualified) name, whether it is called on a target
/// (`x.f()`), and the overloads it may resolve to.
struct CallInfo {
    name: String,
    receiver: bool,
    overloads: Vec<Ov>,
}

/// Namespaces of functions with qualified names (`sets.contains(a, b)`).
const NAMESPACES: [&str; 7] = [
    "sets", "strings", "lists", "optional", "ip", "format", "math",
];

// ---------------------------------------------------------------------------------------------
// The checker

struct Checker<'d> {
    root: &'d Decl,
    optional_old_self: bool,
    scopes: HashMap<String, Vec<Ty<'d>>>,
    types: HashMap<u64, Ty<'d>>,
    calls: HashMap<u64, CallInfo>,
}

impl<'d> Checker<'d> {
    fn new(root: &'d Decl, optional_old_self: bool) -> Self {
        Checker {
            root,
            optional_old_self,
            scopes: HashMap::new(),
            types: HashMap::new(),
            calls: HashMap::new(),
        }
    }

    fn push(&mut self, name: &str, t: Ty<'d>) {
        self.scopes.entry(name.to_string()).or_default().push(t);
    }

    fn pop(&mut self, name: &str) {
        if let Some(s) = self.scopes.get_mut(name) {
            s.pop();
        }
    }

    fn local(&self, name: &str) -> Option<&Ty<'d>> {
        self.scopes.get(name).and_then(|s| s.last())
    }

    fn check(&mut self, e: &IdedExpr) -> Ty<'d> {
        let t = match &e.expr {
            Expr::Unspecified => Ty::Dyn,
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Null => Ty::Null,
                LiteralValue::String(_) => Ty::String,
                LiteralValue::UInt(_) => Ty::Uint,
            },
            Expr::Ident(name) => match self.local(name) {
                Some(t) => t.clone(),
                None => match name.as_str() {
                    "self" => Ty::of(self.root),
                    "oldSelf" if self.optional_old_self => {
                        Ty::Optional(Box::new(Ty::of(self.root)))
                    }
                    "oldSelf" => Ty::of(self.root),
                    _ => Ty::Type,
                },
            },
            Expr::Select(s) => {
                let operand = self.check(&s.operand);
                if s.test {
                    Ty::Bool
                } else {
                    operand.field(&s.field)
                }
            }
            Expr::List(l) => {
                let mut elem = Ty::Dyn;
                for x in &l.elements {
                    let t = self.check(x);
                    elem = join(elem, t);
                }
                Ty::List(Box::new(elem))
            }
            Expr::Map(m) => {
                let (mut k, mut v) = (Ty::Dyn, Ty::Dyn);
                for en in &m.entries {
                    match &en.expr {
                        EntryExpr::MapEntry(me) => {
                            let kt = self.check(&me.key);
                            k = join(k, kt);
                            let vt = self.check(&me.value);
                            v = join(v, vt);
                        }
                        EntryExpr::StructField(f) => {
                            self.check(&f.value);
                        }
                    }
                }
                Ty::Map(Box::new(k), Box::new(v))
            }
            Expr::Struct(s) => {
                for en in &s.entries {
                    match &en.expr {
                        EntryExpr::MapEntry(me) => {
                            self.check(&me.key);
                            self.check(&me.value);
                        }
                        EntryExpr::StructField(f) => {
                            self.check(&f.value);
                        }
                    }
                }
                Ty::Dyn
            }
            Expr::Comprehension(c) => self.check_comprehension(c),
            Expr::Call(c) => self.check_call(e.id, c),
        };
        self.types.insert(e.id, t.clone());
        t
    }

    fn check_comprehension(&mut self, c: &ComprehensionExpr) -> Ty<'d> {
        let range = self.check(&c.iter_range);
        let init = self.check(&c.accu_init);
        let (first, second) = match (&range, c.iter_var2.is_some()) {
            (Ty::List(e), false) => ((**e).clone(), None),
            (Ty::List(e), true) => (Ty::Int, Some((**e).clone())),
            (Ty::Map(k, _), false) => ((**k).clone(), None),
            (Ty::Map(k, v), true) => ((**k).clone(), Some((**v).clone())),
            (_, two) => (Ty::Dyn, two.then_some(Ty::Dyn)),
        };
        self.push(&c.iter_var, first);
        if let (Some(v2), Some(t)) = (&c.iter_var2, second) {
            self.push(v2, t);
        }
        // One pass over the loop (a second one per nesting level would be exponential): an
        // empty list or map literal accumulator takes its type from the step for the result.
        self.push(&c.accu_var, init.clone());
        self.check(&c.loop_cond);
        let step = self.check(&c.loop_step);
        self.pop(&c.accu_var);
        let accu = join(init, step);
        self.pop(&c.iter_var);
        if let Some(v2) = &c.iter_var2 {
            self.pop(v2);
        }
        self.push(&c.accu_var, accu);
        let result = self.check(&c.result);
        self.pop(&c.accu_var);
        result
    }

    /// Whether `e` names a namespace of functions rather than a value.
    fn is_namespace(&self, e: &IdedExpr) -> Option<String> {
        match &e.expr {
            Expr::Ident(n)
                if self.local(n).is_none()
                    && n != "self"
                    && n != "oldSelf"
                    && NAMESPACES.contains(&n.as_str()) =>
            {
                Some(n.clone())
            }
            _ => None,
        }
    }

    fn check_call(&mut self, id: u64, c: &CallExpr) -> Ty<'d> {
        let (name, target) = match &c.target {
            Some(t) => match self.is_namespace(t) {
                Some(ns) => (format!("{ns}.{}", c.func_name), None),
                None => (c.func_name.clone(), Some(self.check(t))),
            },
            None => (c.func_name.clone(), None),
        };
        let args: Vec<Ty<'d>> = c.args.iter().map(|a| self.check(a)).collect();
        let (overloads, t) = match (name.as_str(), c.args.as_slice(), args.first()) {
            // `x.?f`: an optional of the field
            (
                "_?._",
                [
                    _,
                    IdedExpr {
                        expr: Expr::Literal(LiteralValue::String(f)),
                        ..
                    },
                ],
                Some(operand),
            ) => {
                let base = match operand {
                    Ty::Optional(t) => (**t).clone(),
                    t => t.clone(),
                };
                (
                    vec![Ov::Other],
                    Ty::Optional(Box::new(base.field(f.inner()))),
                )
            }
            _ => resolve(&name, target.as_ref(), &args),
        };
        self.calls.insert(
            id,
            CallInfo {
                name,
                receiver: target.is_some(),
                overloads,
            },
        );
        t
    }
}

/// The overloads a call may resolve to and its result type.
fn resolve<'d>(name: &str, target: Option<&Ty<'d>>, args: &[Ty<'d>]) -> (Vec<Ov>, Ty<'d>) {
    use Ov::*;
    let a0 = args.first().cloned().unwrap_or(Ty::Dyn);
    let a1 = args.get(1).cloned().unwrap_or(Ty::Dyn);
    let one = |ov: Ov, t: Ty<'d>| (vec![ov], t);
    match (name, target) {
        ("_&&_", None) => one(LogicalAnd, Ty::Bool),
        ("_||_", None) => one(LogicalOr, Ty::Bool),
        ("!_" | "@not_strictly_false", None) => one(Other, Ty::Bool),
        ("_?_:_", None) => one(
            Conditional,
            join(a1, args.get(2).cloned().unwrap_or(Ty::Dyn)),
        ),
        ("_==_", None) => one(Equals, Ty::Bool),
        ("_!=_", None) => one(NotEquals, Ty::Bool),
        ("_<_" | "_<=_" | "_>_" | "_>=_", None) => {
            let mut ovs = Vec::new();
            if a0.could(Ty::is_string) && a1.could(Ty::is_string) {
                ovs.push(CompareString);
            }
            if a0.could(Ty::is_bytes) && a1.could(Ty::is_bytes) {
                ovs.push(CompareBytes);
            }
            let other =
                |t: &Ty<'d>| t.is_number() || matches!(t, Ty::Bool | Ty::Timestamp | Ty::Duration);
            if ovs.is_empty() || (a0.could(other) && a1.could(other)) {
                ovs.push(Other);
            }
            (ovs, Ty::Bool)
        }
        ("_+_", None) => {
            let both = |f: fn(&Ty<'d>) -> bool| a0.could(f) && a1.could(f);
            let candidates: [(bool, Ov, Ty<'d>); 9] = [
                (both(|t| matches!(t, Ty::Int)), Other, Ty::Int),
                (both(|t| matches!(t, Ty::Uint)), Other, Ty::Uint),
                (both(|t| matches!(t, Ty::Double)), Other, Ty::Double),
                (both(|t| matches!(t, Ty::Duration)), Other, Ty::Duration),
                (
                    a0.could(|t| matches!(t, Ty::Timestamp))
                        && a1.could(|t| matches!(t, Ty::Duration)),
                    Other,
                    Ty::Timestamp,
                ),
                (
                    a0.could(|t| matches!(t, Ty::Duration))
                        && a1.could(|t| matches!(t, Ty::Timestamp)),
                    Other,
                    Ty::Timestamp,
                ),
                (both(Ty::is_string), AddString, Ty::String),
                (both(Ty::is_bytes), AddBytes, Ty::Bytes),
                (
                    both(Ty::is_list),
                    AddList,
                    Ty::List(Box::new(join(a0.elem(), a1.elem()))),
                ),
            ];
            let mut ovs = Vec::new();
            let mut result: Option<Ty<'d>> = None;
            for (ok, ov, t) in candidates {
                if !ok {
                    continue;
                }
                if !ovs.contains(&ov) {
                    ovs.push(ov);
                }
                result = Some(match result {
                    None => t,
                    Some(prev) if prev == t => prev,
                    Some(_) => Ty::Dyn,
                });
            }
            if ovs.is_empty() {
                ovs.push(Other);
            }
            (ovs, result.unwrap_or(Ty::Dyn))
        }
        ("_-_", None) => {
            let t = match (&a0, &a1) {
                (Ty::Timestamp, Ty::Timestamp) => Ty::Duration,
                (Ty::Dyn, b) => b.clone(),
                (a, _) => a.clone(),
            };
            one(Other, t)
        }
        ("_*_" | "_/_" | "_%_", None) => one(Other, join(a0, a1)),
        ("-_", None) => one(Other, a0),
        ("_[_]", None) => match &a0 {
            Ty::List(e) => one(IndexList, (**e).clone()),
            Ty::Map(_, v) => one(IndexMap, (**v).clone()),
            Ty::Optional(inner) => one(
                Other,
                Ty::Optional(Box::new(match &**inner {
                    Ty::List(e) => (**e).clone(),
                    Ty::Map(_, v) => (**v).clone(),
                    _ => Ty::Dyn,
                })),
            ),
            Ty::Dyn => (vec![IndexList, IndexMap], Ty::Dyn),
            _ => one(Other, Ty::Dyn),
        },
        ("_[?_]", None) => {
            let base = match &a0 {
                Ty::Optional(t) => (**t).clone(),
                t => t.clone(),
            };
            let elem = match base {
                Ty::List(e) => *e,
                Ty::Map(_, v) => *v,
                _ => Ty::Dyn,
            };
            one(Other, Ty::Optional(Box::new(elem)))
        }
        ("@in", None) => {
            let mut ovs = Vec::new();
            if a1.could(Ty::is_list) {
                ovs.push(InList);
            }
            if a1.could(Ty::is_map) {
                ovs.push(InMap);
            }
            if ovs.is_empty() {
                ovs.push(Other);
            }
            (ovs, Ty::Bool)
        }
        ("size", _) => one(Other, Ty::Int),
        ("matches", Some(_)) => one(MatchesString, Ty::Bool),
        ("matches", None) => one(Other, Ty::Bool),
        ("contains", Some(t)) if t.could(Ty::is_string) => one(ContainsString, Ty::Bool),
        ("startsWith", Some(_)) => one(StartsWith, Ty::Bool),
        ("endsWith", Some(_)) => one(EndsWith, Ty::Bool),
        ("string", None) => {
            let mut ovs = Vec::new();
            if a0.could(Ty::is_bytes) {
                ovs.push(BytesToString);
            }
            if !a0.is_bytes() {
                ovs.push(Other);
            }
            (ovs, Ty::String)
        }
        ("bytes", None) => {
            let mut ovs = Vec::new();
            if a0.could(Ty::is_string) {
                ovs.push(StringToBytes);
            }
            if !a0.is_string() {
                ovs.push(Other);
            }
            (ovs, Ty::Bytes)
        }
        ("int", None) => one(Other, Ty::Int),
        ("uint", None) => one(Other, Ty::Uint),
        ("double", None) => one(Other, Ty::Double),
        ("bool", None) => one(Other, Ty::Bool),
        ("duration", None) => one(Other, Ty::Duration),
        ("timestamp", None) => one(Other, Ty::Timestamp),
        ("dyn", None) => one(Other, Ty::Dyn),
        ("type", None) => one(Other, Ty::Type),
        (
            "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
            | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds",
            Some(_),
        ) => one(Other, Ty::Int),
        // strings extension
        ("charAt", Some(_)) => one(Other, Ty::String),
        ("indexOf" | "lastIndexOf", Some(_)) => one(Other, Ty::Int),
        ("lowerAscii" | "upperAscii" | "trim" | "substring" | "replace", Some(_)) => {
            one(Other, Ty::String)
        }
        ("reverse", Some(t)) if t.is_string() => one(Other, Ty::String),
        ("split", Some(_)) => one(Other, Ty::List(Box::new(Ty::String))),
        ("join", Some(_)) => one(Other, Ty::String),
        ("format", Some(_)) => one(FormatString, Ty::String),
        ("strings.quote", None) => one(QuoteString, Ty::String),
        // Kubernetes lists library
        ("isSorted", Some(_)) => one(Other, Ty::Bool),
        ("sum" | "min" | "max", Some(t)) => one(Other, t.elem()),
        // Kubernetes regex library
        ("find", Some(_)) => one(Other, Ty::String),
        ("findAll", Some(_)) => one(Other, Ty::List(Box::new(Ty::String))),
        // Kubernetes URL library
        ("url", None) => one(Other, Ty::Url),
        ("isURL", None) => one(Other, Ty::Bool),
        ("getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath", Some(_)) => {
            one(Other, Ty::String)
        }
        ("getQuery", Some(_)) => one(
            Other,
            Ty::Map(
                Box::new(Ty::String),
                Box::new(Ty::List(Box::new(Ty::String))),
            ),
        ),
        // Kubernetes quantity library
        ("quantity", None) => one(Other, Ty::Quantity),
        ("isQuantity" | "isSemver" | "isIP" | "isCIDR" | "ip.isCanonical", None) => {
            one(Other, Ty::Bool)
        }
        ("sign" | "asInteger" | "compareTo", Some(_)) => one(Other, Ty::Int),
        ("isInteger" | "isGreaterThan" | "isLessThan", Some(_)) => one(Other, Ty::Bool),
        ("asApproximateFloat", Some(_)) => one(Other, Ty::Double),
        ("add" | "sub", Some(_)) => one(Other, Ty::Quantity),
        // Kubernetes IP and CIDR libraries
        ("ip", None) => one(Other, Ty::Ip),
        ("ip", Some(_)) => one(CidrIp, Ty::Ip),
        ("cidr", None) => one(Other, Ty::Cidr),
        ("family" | "prefixLength", Some(_)) => one(Other, Ty::Int),
        (
            "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast",
            Some(_),
        ) => one(Other, Ty::Bool),
        ("masked", Some(_)) => one(Other, Ty::Cidr),
        ("containsIP", Some(_)) => match &a0 {
            Ty::String => one(ContainsIpString, Ty::Bool),
            Ty::Dyn => (vec![ContainsIpString, Other], Ty::Bool),
            _ => one(Other, Ty::Bool),
        },
        ("containsCIDR", Some(_)) => match &a0 {
            Ty::String => one(ContainsCidrString, Ty::Bool),
            Ty::Dyn => (vec![ContainsCidrString, Other], Ty::Bool),
            _ => one(Other, Ty::Bool),
        },
        // Kubernetes semver library
        ("semver", None) => one(Other, Ty::Semver),
        ("major" | "minor" | "patch", Some(_)) => one(Other, Ty::Int),
        // Kubernetes format library
        ("format.named", None) => one(Other, Ty::Optional(Box::new(Ty::Format))),
        (n, None) if n.starts_with("format.") => one(Other, Ty::Format),
        ("validate", Some(_)) => one(
            Other,
            Ty::Optional(Box::new(Ty::List(Box::new(Ty::String)))),
        ),
        // optionals
        ("optional.of" | "optional.ofNonZeroValue", None) => one(Other, Ty::Optional(Box::new(a0))),
        ("optional.none", None) => one(Other, Ty::Optional(Box::new(Ty::Dyn))),
        ("hasValue", Some(_)) => one(Other, Ty::Bool),
        ("value" | "orValue", Some(t)) => one(Other, t.first_param().unwrap_or(Ty::Dyn)),
        ("or", Some(t)) => one(Other, t.clone()),
        // lists extension
        ("slice", Some(t)) => one(ListSlice, t.clone()),
        ("flatten", Some(_)) => one(ListFlatten, Ty::List(Box::new(Ty::Dyn))),
        ("lists.range", None) => one(ListsRange, Ty::List(Box::new(Ty::Int))),
        ("reverse", Some(t)) => one(ListReverse, t.clone()),
        ("distinct", Some(t)) => one(ListDistinct, t.clone()),
        ("sort", Some(t)) => (sort_overloads(t, Ov::ListSort), t.clone()),
        ("@sortByAssociatedKeys", Some(t)) => (sort_overloads(&a0, Ov::ListSortBy), t.clone()),
        ("first" | "last", Some(t)) => one(Other, Ty::Optional(Box::new(t.elem()))),
        // sets extension
        ("sets.contains", None) => one(SetsContains, Ty::Bool),
        ("sets.intersects", None) => one(SetsIntersects, Ty::Bool),
        ("sets.equivalent", None) => one(SetsEquivalent, Ty::Bool),
        _ => one(Other, Ty::Dyn),
    }
}

/// The sort overloads of a list: one per comparable element type; a string or bytes one costs
/// more.
fn sort_overloads(list: &Ty<'_>, ov: fn(bool) -> Ov) -> Vec<Ov> {
    match list.elem() {
        Ty::String | Ty::Bytes => vec![ov(true)],
        Ty::Dyn => vec![ov(false), ov(true)],
        _ => vec![ov(false)],
    }
}

// ---------------------------------------------------------------------------------------------
// The coster (cel-go's `checker/cost.go`)

#[derive(Clone)]
struct Local {
    path: Vec<String>,
    size: Option<Est>,
    entry: Option<EntrySize>,
}

/// What a function estimator sees of an argument (`checker.AstNode`).
struct Node<'e, 'd> {
    path: Vec<String>,
    ty: Ty<'d>,
    expr: Option<&'e IdedExpr>,
    computed: Option<Est>,
}

struct CallEst {
    cost: Est,
    result_size: Option<Est>,
}

impl CallEst {
    fn cost(cost: Est) -> CallEst {
        CallEst {
            cost,
            result_size: None,
        }
    }
}

struct Coster<'c, 'd> {
    root: &'d Decl,
    chk: &'c Checker<'d>,
    paths: HashMap<u64, Vec<String>>,
    locals: HashMap<String, Vec<Local>>,
    sizes: HashMap<u64, Est>,
    entries: HashMap<u64, EntrySize>,
}

impl<'c, 'd> Coster<'c, 'd> {
    fn ty(&self, e: &IdedExpr) -> Ty<'d> {
        self.chk.types.get(&e.id).cloned().unwrap_or(Ty::Dyn)
    }

    fn peek(&self, name: &str) -> Option<&Local> {
        self.locals.get(name).and_then(|s| s.last())
    }

    fn push_local(&mut self, name: &str, l: Local) {
        self.locals.entry(name.to_string()).or_default().push(l);
    }

    fn pop_local(&mut self, name: &str) {
        if let Some(s) = self.locals.get_mut(name) {
            s.pop();
        }
    }

    fn path(&self, e: &IdedExpr) -> Vec<String> {
        if let Expr::Ident(n) = &e.expr
            && let Some(l) = self.peek(n)
        {
            return l.path.clone();
        }
        self.paths.get(&e.id).cloned().unwrap_or_default()
    }

    fn extend(&self, e: &IdedExpr, seg: &str) -> Vec<String> {
        let mut p = self.path(e);
        p.push(seg.to_string());
        p
    }

    /// Kubernetes' size estimator: the `max_elements` of the schema node the path leads to.
    fn estimate_size(&self, path: &[String]) -> Option<Est> {
        let (_, rest) = path.split_first()?;
        let mut node = self.root;
        for seg in rest {
            node = match (seg.as_str(), &node.kind) {
                ("@items" | "@values", DeclKind::List(e) | DeclKind::Map(e)) => e,
                ("@keys", DeclKind::Map(_)) => &MAP_KEY,
                (name, DeclKind::Object(fields)) => fields.get(name)?,
                _ => return None,
            };
        }
        Some(node.size())
    }

    fn size(&mut self, e: &IdedExpr) -> Option<Est> {
        if let Some(s) = self.sizes.get(&e.id) {
            return Some(*s);
        }
        if let Some(s) = literal_size(e) {
            return Some(s);
        }
        if let Some(s) = self.estimate_size(&self.path(e)) {
            self.sizes.insert(e.id, s);
            return Some(s);
        }
        if self.ty(e).is_scalar() {
            return Some(Est::fixed(1));
        }
        if let Expr::Ident(n) = &e.expr
            && let Some(s) = self.peek(n).and_then(|l| l.size)
        {
            return Some(s);
        }
        None
    }

    fn size_or_unknown(&mut self, e: &IdedExpr) -> Est {
        self.size(e).unwrap_or(Est::UNKNOWN)
    }

    fn entry(&self, e: &IdedExpr) -> Option<EntrySize> {
        if let Some(s) = self.entries.get(&e.id) {
            return Some(*s);
        }
        if let Expr::Ident(n) = &e.expr {
            return self.peek(n).and_then(|l| l.entry);
        }
        None
    }

    fn node<'e>(&mut self, e: &'e IdedExpr) -> Node<'e, 'd> {
        let mut path = self.path(e);
        if path
            .first()
            .is_some_and(|p| ACCUMULATOR_NAMES.contains(&p.as_str()))
        {
            path.clear();
        }
        Node {
            path,
            ty: self.ty(e),
            expr: Some(e),
            computed: self.size(e),
        }
    }

    /// The size a function estimator sees: computed, else from the schema, else unknown.
    fn node_size(&self, n: &Node<'_, 'd>) -> Est {
        n.computed
            .or_else(|| self.estimate_size(&n.path))
            .unwrap_or(Est::UNKNOWN)
    }

    fn cost(&mut self, e: &IdedExpr) -> Est {
        match &e.expr {
            Expr::Unspecified => Est::ZERO,
            Expr::Literal(_) => Est::ZERO,
            Expr::Ident(name) => {
                let p = match self.peek(name) {
                    Some(l) => l.path.clone(),
                    None => vec![name.clone()],
                };
                self.paths.insert(e.id, p);
                Est::fixed(SELECT_AND_IDENT_COST)
            }
            Expr::Select(s) => {
                if s.test {
                    // presence tests cost nothing in Kubernetes (PresenceTestHasCost(false))
                    return self.cost(&s.operand);
                }
                let mut sum = self.cost(&s.operand);
                if self.ty(&s.operand).selection_costs() {
                    sum = sum.add(Est::fixed(SELECT_AND_IDENT_COST));
                }
                let p = self.extend(&s.operand, &s.field);
                self.paths.insert(e.id, p);
                sum
            }
            Expr::Call(c) => self.cost_call(e, c),
            Expr::List(l) => {
                let mut sum = Est::ZERO;
                let mut item = Est {
                    min: if l.elements.is_empty() { 0 } else { u64::MAX },
                    max: 0,
                };
                for x in &l.elements {
                    sum = sum.add(self.cost(x));
                    item = item.union(self.size_or_unknown(x));
                }
                self.entries.insert(
                    e.id,
                    EntrySize {
                        container: Container::List,
                        key: Est::fixed(1),
                        val: item,
                    },
                );
                sum.add(Est::fixed(LIST_CREATE_BASE_COST))
            }
            Expr::Map(m) => {
                let mut sum = Est::ZERO;
                let empty = m.entries.is_empty();
                let start = Est {
                    min: if empty { 0 } else { u64::MAX },
                    max: 0,
                };
                let (mut key, mut val) = (start, start);
                for en in &m.entries {
                    if let EntryExpr::MapEntry(me) = &en.expr {
                        sum = sum.add(self.cost(&me.key));
                        sum = sum.add(self.cost(&me.value));
                        key = key.union(self.size_or_unknown(&me.key));
                        val = val.union(self.size_or_unknown(&me.value));
                    }
                }
                self.entries.insert(
                    e.id,
                    EntrySize {
                        container: Container::Map,
                        key,
                        val,
                    },
                );
                sum.add(Est::fixed(MAP_CREATE_BASE_COST))
            }
            Expr::Struct(s) => {
                let mut sum = Est::ZERO;
                for en in &s.entries {
                    if let EntryExpr::StructField(f) = &en.expr {
                        sum = sum.add(self.cost(&f.value));
                    }
                }
                sum.add(Est::fixed(STRUCT_CREATE_BASE_COST))
            }
            Expr::Comprehension(c) => self.cost_comprehension(e, c),
        }
    }

    fn range_container(&self, range: &IdedExpr) -> Option<Container> {
        match self.entry(range) {
            Some(en) => Some(en.container),
            None => self.ty(range).is_list().then_some(Container::List),
        }
    }

    fn cost_comprehension(&mut self, e: &IdedExpr, c: &ComprehensionExpr) -> Est {
        let mut sum = self.cost(&c.iter_range);
        sum = sum.add(self.cost(&c.accu_init));
        let accu = Local {
            path: self.path(&c.accu_init),
            size: self.size(&c.accu_init),
            entry: self.entry(&c.accu_init),
        };
        self.push_local(&c.accu_var, accu);

        let range_entry = self.entry(&c.iter_range);
        let is_list = self.range_container(&c.iter_range) == Some(Container::List);
        let range_path = self.path(&c.iter_range);
        let with = |seg: &str| {
            let mut p = range_path.clone();
            p.push(seg.to_string());
            p
        };
        match &c.iter_var2 {
            Some(v2) => {
                let key = Local {
                    path: with(if is_list { "@indices" } else { "@keys" }),
                    size: range_entry.map(|en| en.key),
                    entry: None,
                };
                let val = Local {
                    path: with(if is_list { "@items" } else { "@values" }),
                    size: range_entry.map(|en| en.val),
                    entry: None,
                };
                self.push_local(&c.iter_var, key);
                self.push_local(v2, val);
            }
            None => {
                let single = Local {
                    path: with(if is_list { "@items" } else { "@keys" }),
                    size: range_entry.map(|en| if is_list { en.val } else { en.key }),
                    entry: None,
                };
                self.push_local(&c.iter_var, single);
            }
        }

        let loop_cost = self.cost(&c.loop_cond);
        let step_cost = self.cost(&c.loop_step);

        self.pop_local(&c.iter_var);
        if let Some(v2) = &c.iter_var2 {
            self.pop_local(v2);
        }
        sum = sum.add(self.cost(&c.result));
        self.pop_local(&c.accu_var);

        let range_count = self.size_or_unknown(&c.iter_range);
        sum = sum.add(range_count.mul(step_cost.add(loop_cost)));

        match &c.accu_init.expr {
            Expr::Literal(_) => {
                if let Some(s) = self.size(&c.accu_init) {
                    self.sizes.insert(e.id, s);
                }
            }
            Expr::List(_) | Expr::Map(_) => {
                self.sizes.insert(e.id, range_count);
                if let Some(en) = self.entry(&c.loop_step) {
                    self.entries.insert(e.id, en);
                }
            }
            _ => {}
        }
        sum
    }

    fn cost_call(&mut self, e: &IdedExpr, call: &CallExpr) -> Est {
        let Some(info) = self.chk.calls.get(&e.id) else {
            return Est::ZERO;
        };
        // `dyn(x)` only disables type checking: the cost of x plus one.
        if info.name == "dyn"
            && !info.receiver
            && let [arg] = call.args.as_slice()
        {
            let c = self.cost(arg);
            if let Some(s) = self.size(arg) {
                self.sizes.insert(e.id, s);
            }
            if let Some(en) = self.entry(arg) {
                self.entries.insert(e.id, en);
            }
            return Est::fixed(1).add(c);
        }
        let mut arg_costs = Vec::with_capacity(call.args.len());
        let mut arg_nodes = Vec::with_capacity(call.args.len());
        for a in &call.args {
            arg_costs.push(self.cost(a));
            arg_nodes.push(self.node(a));
        }
        if info.overloads.is_empty() {
            return Est::ZERO;
        }
        let mut sum = Est::ZERO;
        let mut target = None;
        if info.receiver
            && let Some(t) = call.target.as_deref()
        {
            sum = sum.add(self.cost(t));
            target = Some(self.node(t));
        }
        let mut fn_cost = Est {
            min: u64::MAX,
            max: 0,
        };
        let mut result_size: Option<Est> = None;
        for &ov in &info.overloads {
            let oc = self.function_cost(
                e,
                call,
                &info.name,
                ov,
                target.as_ref(),
                &arg_nodes,
                &arg_costs,
            );
            fn_cost = fn_cost.union(oc.cost);
            if let Some(rs) = oc.result_size {
                result_size = Some(match result_size {
                    None => rs,
                    Some(r) => r.union(rs),
                });
            }
            if let (Ov::IndexList | Ov::IndexMap, Some(a0)) = (ov, call.args.first()) {
                result_size = self.entry(a0).map(|en| en.val);
                let seg = if ov == Ov::IndexList {
                    "@items"
                } else {
                    "@values"
                };
                let p = self.extend(a0, seg);
                self.paths.insert(e.id, p);
            }
            if result_size.is_none() {
                result_size = self.size(e);
            }
        }
        if let Some(rs) = result_size {
            self.sizes.insert(e.id, rs);
        }
        sum.add(fn_cost)
    }

    #[allow(clippy::too_many_arguments)]
    fn function_cost(
        &mut self,
        e: &IdedExpr,
        call: &CallExpr,
        name: &str,
        ov: Ov,
        target: Option<&Node<'_, 'd>>,
        args: &[Node<'_, 'd>],
        arg_costs: &[Est],
    ) -> CallEst {
        let arg_sum = arg_costs.iter().fold(Est::ZERO, |s, c| s.add(*c));
        if let Some(est) = self.extension_estimate(ov, target, args) {
            return CallEst {
                cost: est.cost.add(arg_sum),
                result_size: est.result_size,
            };
        }
        if let Some(est) = self.kubernetes_estimate(name, ov, target, args) {
            return CallEst {
                cost: est.cost.add(arg_sum),
                result_size: est.result_size,
            };
        }
        let size = |n: &Node<'_, 'd>| n.computed.unwrap_or(Est::UNKNOWN);
        let tf = STRING_TRAVERSAL_COST_FACTOR;
        match (ov, target, args) {
            (Ov::FormatString, Some(t), _) => {
                return CallEst::cost(size(t).factor(tf).add(arg_sum));
            }
            (Ov::StringToBytes, _, [a]) => {
                let sz = size(a);
                return CallEst {
                    cost: sz.factor(tf).add(arg_sum),
                    result_size: Some(Est {
                        min: sz.min,
                        max: sz.max.wrapping_mul(4),
                    }),
                };
            }
            (Ov::BytesToString, _, [a]) => {
                let sz = size(a);
                return CallEst {
                    cost: sz.factor(tf).add(arg_sum),
                    result_size: Some(Est {
                        min: sz.min / 4,
                        max: sz.max,
                    }),
                };
            }
            (Ov::QuoteString, _, [a]) => {
                let sz = size(a);
                return CallEst {
                    cost: sz.factor(tf).add(arg_sum),
                    result_size: Some(Est {
                        min: sz.min.wrapping_add(2),
                        max: sz.max.wrapping_mul(2).wrapping_add(2),
                    }),
                };
            }
            (Ov::StartsWith | Ov::EndsWith, _, [a]) => {
                return CallEst::cost(size(a).factor(tf).add(arg_sum));
            }
            (Ov::InList, _, [_, list]) => {
                return CallEst::cost(size(list).factor(1.0).add(arg_sum));
            }
            (Ov::MatchesString, Some(t), [re]) => {
                let str_cost = size(t).add(Est::fixed(1)).factor(tf);
                let regex_cost = size(re).factor(REGEX_STRING_LENGTH_COST_FACTOR);
                return CallEst::cost(str_cost.mul(regex_cost).add(arg_sum));
            }
            (Ov::ContainsString, Some(t), [sub]) => {
                let str_cost = size(t).factor(tf);
                let sub_cost = size(sub).factor(tf);
                return CallEst::cost(str_cost.mul(sub_cost).add(arg_sum));
            }
            (Ov::LogicalAnd | Ov::LogicalOr, _, _) => {
                let lhs = arg_costs.first().copied().unwrap_or(Est::ZERO);
                let rhs = arg_costs.get(1).copied().unwrap_or(Est::ZERO);
                return CallEst::cost(Est {
                    min: lhs.min,
                    max: lhs.add(rhs).max,
                });
            }
            (Ov::Conditional, _, [_, t, f]) => {
                let sz = size(t).union(size(f));
                let entries = match (call.args.get(1), call.args.get(2)) {
                    (Some(te), Some(fe)) => union_entries(self.entry(te), self.entry(fe)),
                    _ => None,
                };
                if let Some(en) = entries {
                    self.entries.insert(e.id, en);
                }
                let c = arg_costs.first().copied().unwrap_or(Est::ZERO);
                let ct = arg_costs.get(1).copied().unwrap_or(Est::ZERO);
                let cf = arg_costs.get(2).copied().unwrap_or(Est::ZERO);
                return CallEst {
                    cost: c.add(ct.union(cf)),
                    result_size: Some(sz),
                };
            }
            (Ov::AddString | Ov::AddBytes | Ov::AddList, _, [l, r]) => {
                let rs = size(l).add(size(r));
                let entries = match (call.args.first(), call.args.get(1)) {
                    (Some(le), Some(re)) => union_entries(self.entry(le), self.entry(re)),
                    _ => None,
                };
                if let Some(en) = entries {
                    self.entries.insert(e.id, en);
                }
                let cost = if ov == Ov::AddList {
                    Est::fixed(1).add(arg_sum)
                } else {
                    rs.factor(tf).add(arg_sum)
                };
                return CallEst {
                    cost,
                    result_size: Some(rs),
                };
            }
            (Ov::CompareString | Ov::CompareBytes | Ov::Equals | Ov::NotEquals, _, [l, r, ..]) => {
                let smallest = size(l).max.min(size(r).max);
                let min = u64::from(smallest > 0);
                return CallEst::cost(Est { min, max: smallest }.factor(tf).add(arg_sum));
            }
            _ => {}
        }
        CallEst::cost(Est::fixed(1).add(arg_sum))
    }

    /// The estimators cel-go's lists (v3) and sets extensions register for their overloads.
    fn extension_estimate(
        &self,
        ov: Ov,
        target: Option<&Node<'_, 'd>>,
        args: &[Node<'_, 'd>],
    ) -> Option<CallEst> {
        let allocating = |factor: f64, size: Est| CallEst {
            cost: size
                .factor(factor)
                .add(Est::fixed(1))
                .add(Est::fixed(LIST_CREATE_BASE_COST)),
            result_size: Some(size),
        };
        let sort = |n: &Node<'_, 'd>, strlike: bool| {
            let sz = self.node_size(n);
            let f = if strlike {
                2.0 + STRING_TRAVERSAL_COST_FACTOR
            } else {
                2.0
            };
            allocating(f, sz.mul(sz))
        };
        match (ov, target, args) {
            (Ov::ListSlice, Some(t), [a, b]) => {
                let sz = self.node_size(t);
                let start = literal_uint(a, 0);
                let end = literal_uint(b, sz.max);
                Some(allocating(1.0, Est::fixed(end.wrapping_sub(start))))
            }
            (Ov::ListsRange, None, [n]) => {
                Some(allocating(1.0, Est::fixed(literal_uint(n, u64::MAX))))
            }
            (Ov::ListReverse, Some(t), []) => Some(allocating(1.0, self.node_size(t))),
            (Ov::ListFlatten, Some(t), [] | [_]) => {
                let depth = args.first().map_or(1, |d| literal_uint(d, u64::MAX));
                Some(allocating(depth as f64, self.node_size(t)))
            }
            (Ov::ListDistinct, Some(t), []) => {
                let sz = self.node_size(t);
                Some(allocating(2.0, sz.mul(sz)))
            }
            (Ov::ListSort(s), Some(t), []) => Some(sort(t, s)),
            (Ov::ListSortBy(s), Some(_), [keys]) => Some(sort(keys, s)),
            (Ov::SetsContains | Ov::SetsIntersects | Ov::SetsEquivalent, _, [a, b]) => {
                let f = if ov == Ov::SetsEquivalent { 2.0 } else { 1.0 };
                let c = self
                    .node_size(a)
                    .mul(self.node_size(b))
                    .factor(f)
                    .add(Est::fixed(1));
                Some(CallEst::cost(c))
            }
            _ => None,
        }
    }

    /// The element of a list (or the key of a map) as an estimator sees it.
    fn list_element(&self, list: &Node<'_, 'd>) -> Option<Node<'static, 'd>> {
        let ty = list.ty.first_param()?;
        let path = if list.path.is_empty() {
            Vec::new()
        } else {
            let mut p = list.path.clone();
            p.push("@items".into());
            p
        };
        Some(Node {
            path,
            ty,
            expr: None,
            computed: None,
        })
    }

    /// Kubernetes' `library.CostEstimator.EstimateCallCost`, by function name.
    fn kubernetes_estimate(
        &self,
        name: &str,
        ov: Ov,
        target: Option<&Node<'_, 'd>>,
        args: &[Node<'_, 'd>],
    ) -> Option<CallEst> {
        let tf = STRING_TRAVERSAL_COST_FACTOR;
        let fixed = |c: u64| Some(CallEst::cost(Est::fixed(c)));
        match name {
            "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" => {
                let t = target?;
                match self.list_element(t) {
                    Some(el) => {
                        let mut el_cost = Est::fixed(1);
                        if matches!(el.ty, Ty::String | Ty::Bytes) {
                            el_cost = el_cost.add(self.node_size(&el).factor(tf));
                        }
                        Some(CallEst::cost(self.node_size(t).mul(el_cost)))
                    }
                    None => Some(CallEst::cost(self.node_size(t).factor(tf))),
                }
            }
            "url" | "jsonpatch.escapeKey" => match args {
                [a] => {
                    let sz = self.node_size(a);
                    Some(CallEst {
                        cost: sz.factor(tf),
                        result_size: Some(sz),
                    })
                }
                _ => None,
            },
            "lowerAscii" | "upperAscii" | "substring" | "trim" => {
                let sz = self.node_size(target?);
                Some(CallEst {
                    cost: sz.factor(tf),
                    result_size: Some(sz),
                })
            }
            "replace" => {
                let t = target?;
                let (from, to) = match args {
                    [a, b, ..] => (a, b),
                    _ => return None,
                };
                let sz = self.node_size(t);
                let from = self.node_size(from);
                let with = self.node_size(to);
                let (mut count, mut retained) = (Est::ZERO, Est::ZERO);
                if from.min == 0 {
                    count.max = if sz.max < u64::MAX {
                        sz.max + 1
                    } else {
                        sz.max
                    };
                    retained.max = sz.max;
                } else if with.max <= from.min {
                    count.max = 0;
                    retained.max = sz.max;
                } else {
                    count.max = div_ceil_f(sz.max, from.min);
                }
                if from.max == 0 {
                    count.min = if sz.min < u64::MAX {
                        sz.min + 1
                    } else {
                        sz.min
                    };
                    retained.min = sz.min;
                } else if from.max <= with.min {
                    count.min = 0;
                    retained.min = sz.min;
                } else {
                    count.min = div_ceil_f(sz.min, from.max);
                }
                Some(CallEst {
                    cost: sz.factor(2.0 * tf),
                    result_size: Some(count.mul(with).add(retained)),
                })
            }
            "split" => {
                let sz = self.node_size(target?);
                let max = match args.get(1).and_then(|n| n.expr) {
                    Some(IdedExpr {
                        expr: Expr::Literal(LiteralValue::Int(i)),
                        ..
                    }) => *i.inner() as u64,
                    _ => sz.max,
                };
                Some(CallEst {
                    cost: sz.factor(2.0 * tf),
                    result_size: Some(Est { min: 0, max }),
                })
            }
            "join" => {
                let t = target?;
                let list = self.node_size(t);
                let mut sz = Est::ZERO;
                if let Some(el) = self.list_element(t) {
                    sz = list.mul(self.node_size(&el));
                }
                if let Some(sep) = args.first() {
                    let seps = Est {
                        min: list.min.saturating_sub(1),
                        max: list.max.saturating_sub(1),
                    };
                    sz = sz.add(self.node_size(sep).mul(seps));
                }
                Some(CallEst {
                    cost: sz.factor(tf),
                    result_size: Some(sz),
                })
            }
            "find" | "findAll" => {
                let t = target?;
                let re = args.first()?;
                let sz = self.node_size(t);
                let str_cost = sz.add(Est::fixed(1)).factor(tf);
                let regex_cost = self.node_size(re).factor(REGEX_STRING_LENGTH_COST_FACTOR);
                Some(CallEst {
                    cost: str_cost.mul(regex_cost),
                    result_size: Some(Est {
                        min: 0,
                        max: sz.max,
                    }),
                })
            }
            "cidr" | "isIP" | "isCIDR" | "quantity" | "isQuantity" | "semver" | "isSemver" => {
                let a = args.first()?;
                Some(CallEst::cost(self.node_size(a).factor(tf)))
            }
            "ip" => {
                if ov == Ov::CidrIp {
                    return fixed(1);
                }
                let a = args.first()?;
                Some(CallEst::cost(self.node_size(a).factor(tf)))
            }
            "ip.isCanonical" => {
                let a = args.first()?;
                Some(CallEst::cost(self.node_size(a).factor(2.0 * tf)))
            }
            "masked"
            | "prefixLength"
            | "family"
            | "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast" => fixed(1),
            "containsIP" | "containsCIDR" => {
                let a = args.first()?;
                let sz = Est { min: 4, max: 16 };
                let mut c = sz.add(sz).factor(tf);
                if name == "containsCIDR" {
                    c = c.add(sz.factor(tf)).add(Est::fixed(1));
                }
                if matches!(ov, Ov::ContainsIpString | Ov::ContainsCidrString) {
                    c = c.add(self.node_size(a).factor(tf));
                }
                Some(CallEst::cost(c))
            }
            "validate" => {
                let a = args.first()?;
                Some(CallEst::cost(self.node_size(a).factor(tf).factor(
                    MAX_NAME_FORMAT_REGEX_SIZE * REGEX_STRING_LENGTH_COST_FACTOR,
                )))
            }
            "format.named" | "sign" | "asInteger" | "isInteger" | "asApproximateFloat"
            | "isGreaterThan" | "isLessThan" | "compareTo" | "add" | "sub" | "major" | "minor"
            | "patch" | "getScheme" | "getHostname" | "getHost" | "getPort" | "getEscapedPath"
            | "getQuery" => fixed(1),
            "_==_" => match args {
                [l, r] if l.ty == r.ty => match l.ty {
                    Ty::Ip | Ty::Cidr | Ty::Quantity | Ty::Semver => fixed(1),
                    Ty::Format => Some(CallEst::cost(
                        Est {
                            min: 1,
                            max: MAX_FORMAT_SIZE,
                        }
                        .factor(tf),
                    )),
                    Ty::Url => {
                        // (sic) both sizes are the right-hand side's upstream
                        let size = r.computed.unwrap_or(Est::fixed(1));
                        Some(CallEst::cost(
                            Est {
                                min: 1,
                                max: size.max,
                            }
                            .factor(tf),
                        ))
                    }
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        }
    }
}

/// `ceil(a / b)` computed in floating point, as upstream does.
fn div_ceil_f(a: u64, b: u64) -> u64 {
    (a as f64 / b as f64).ceil() as u64
}

/// An int literal argument as an unsigned number (negative: 0), else `default`.
fn literal_uint(n: &Node<'_, '_>, default: u64) -> u64 {
    match n.expr.map(|e| &e.expr) {
        Some(Expr::Literal(LiteralValue::Int(i))) => u64::try_from(*i.inner()).unwrap_or(0),
        _ => default,
    }
}

/// The size CEL knows from the expression itself (`computeExprSize`).
fn literal_size(e: &IdedExpr) -> Option<Est> {
    let n = match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => s.inner().chars().count(),
        Expr::Literal(LiteralValue::Bytes(b)) => b.inner().len(),
        Expr::Literal(_) => 1,
        Expr::List(l) => l.elements.len(),
        Expr::Map(m) => m.entries.len(),
        _ => return None,
    };
    Some(Est::fixed(u64::try_from(n).unwrap_or(u64::MAX)))
}

/// The estimated worst-case cost of one evaluation of `expr`, with `self` (and `oldSelf`, an
/// optional when `optional_old_self`) of the type `root` declares.
pub(crate) fn estimate(expr: &IdedExpr, root: &Decl, optional_old_self: bool) -> u64 {
    let mut chk = Checker::new(root, optional_old_self);
    chk.check(expr);
    let mut coster = Coster {
        root,
        chk: &chk,
        paths: HashMap::new(),
        locals: HashMap::new(),
        sizes: HashMap::new(),
        entries: HashMap::new(),
    };
    coster.cost(expr).max
}

#[cfg(test)]
mod tests;
