//! Label and field selectors: parse, print and match.
//!
//! ```
//! use kubewright_core::LabelSelector;
//! use std::collections::BTreeMap;
//! let sel: LabelSelector = "app in (web,api),tier!=db,!legacy".parse().unwrap();
//! let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
//! assert!(sel.matches(&labels));
//! assert_eq!(sel.to_string(), "app in (api,web),!legacy,tier!=db");
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

/// A selector that could not be parsed: what was wrong and where (byte offset).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector {input:?} at position {position}: {message}")]
pub struct SelectorParseError {
    /// The whole input.
    pub input: String,
    /// Byte offset of the problem.
    pub position: usize,
    /// What was expected or found.
    pub message: String,
}

/// One operator of a label requirement.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LabelOp {
    /// `k=v` / `k==v`.
    Equals(String),
    /// `k!=v` (also matches when the key is absent).
    NotEquals(String),
    /// `k in (a,b)`.
    In(BTreeSet<String>),
    /// `k notin (a,b)` (also matches when the key is absent).
    NotIn(BTreeSet<String>),
    /// `k`.
    Exists,
    /// `!k`.
    DoesNotExist,
    /// `k>n` (integers).
    GreaterThan(i64),
    /// `k<n` (integers).
    LessThan(i64),
}

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// Operator and values.
    pub op: LabelOp,
}

impl Requirement {
    /// Whether a label set satisfies this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_fn(|k| labels.get(k).map(String::as_str))
    }

    /// Like [`Requirement::matches`], reading labels through an accessor (no map needed).
    pub fn matches_fn<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        let v = get(&self.key);
        match &self.op {
            LabelOp::Equals(x) => v == Some(x.as_str()),
            LabelOp::NotEquals(x) => v != Some(x.as_str()),
            LabelOp::In(set) => v.is_some_and(|v| set.contains(v)),
            LabelOp::NotIn(set) => !v.is_some_and(|v| set.contains(v)),
            LabelOp::Exists => v.is_some(),
            LabelOp::DoesNotExist => v.is_none(),
            LabelOp::GreaterThan(n) => v
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            LabelOp::LessThan(n) => v
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
        match &self.op {
            LabelOp::Equals(v) => write!(f, "{}={v}", self.key),
            LabelOp::NotEquals(v) => write!(f, "{}!={v}", self.key),
            LabelOp::In(s) => write!(f, "{} in ({})", self.key, join(s)),
            LabelOp::NotIn(s) => write!(f, "{} notin ({})", self.key, join(s)),
            LabelOp::Exists => write!(f, "{}", self.key),
            LabelOp::DoesNotExist => write!(f, "!{}", self.key),
            LabelOp::GreaterThan(n) => write!(f, "{}>{n}", self.key),
            LabelOp::LessThan(n) => write!(f, "{}<{n}", self.key),
        }
    }
}

/// A label selector: requirements joined by AND. The empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// The requirements, all of which must hold.
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses a selector string (see the module docs for the grammar).
    pub fn parse(input: &str) -> Result<Self, SelectorParseError> {
        LabelParser { input, pos: 0 }.parse()
    }

    /// Whether the selector has no requirements (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether a label set matches every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Like [`LabelSelector::matches`], reading labels through an accessor.
    pub fn matches_fn<'a>(&self, get: impl Fn(&str) -> Option<&'a str> + Copy) -> bool {
        self.requirements.iter().all(|r| r.matches_fn(get))
    }

    /// Converts a `metav1.LabelSelector` (matchLabels + matchExpressions).
    pub fn from_k8s(
        sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    ) -> Result<Self, SelectorParseError> {
        let mut requirements = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            requirements.push(Requirement {
                key: k.clone(),
                op: LabelOp::Equals(v.clone()),
            });
        }
        for e in sel.match_expressions.iter().flatten() {
            let values: BTreeSet<String> = e.values.iter().flatten().cloned().collect();
            let op = match e.operator.as_str() {
                "In" => LabelOp::In(values),
                "NotIn" => LabelOp::NotIn(values),
                "Exists" => LabelOp::Exists,
                "DoesNotExist" => LabelOp::DoesNotExist,
                other => {
                    return Err(SelectorParseError {
                        input: format!("{e:?}"),
                        position: 0,
                        message: format!("unknown matchExpressions operator {other:?}"),
                    });
                }
            };
            requirements.push(Requirement {
                key: e.key.clone(),
                op,
            });
        }
        requirements.sort();
        Ok(Self { requirements })
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

struct LabelParser<'a> {
    input: &'a str,
    pos: usize,
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

impl LabelParser<'_> {
    fn err(&self, position: usize, message: impl Into<String>) -> SelectorParseError {
        SelectorParseError {
            input: self.input.to_string(),
            position,
            message: message.into(),
        }
    }
    fn rest(&self) -> &str {
        &self.input[self.pos..]
    }
    fn skip_ws(&mut self) {
        while let Some(c) = self.rest().chars().next() {
            if c.is_whitespace() {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
    }
    fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }
    fn word(&mut self) -> &str {
        let start = self.pos;
        while let Some(c) = self.rest().chars().next() {
            if is_key_char(c) {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
        &self.input[start..self.pos]
    }

    fn parse(mut self) -> Result<LabelSelector, SelectorParseError> {
        let mut requirements = Vec::new();
        self.skip_ws();
        if self.rest().is_empty() {
            return Ok(LabelSelector::default());
        }
        loop {
            self.skip_ws();
            requirements.push(self.requirement()?);
            self.skip_ws();
            if self.rest().is_empty() {
                break;
            }
            if !self.eat(",") {
                return Err(self.err(self.pos, "expected ',' between requirements"));
            }
        }
        requirements.sort();
        Ok(LabelSelector { requirements })
    }

    fn key(&mut self) -> Result<String, SelectorParseError> {
        let start = self.pos;
        let key = self.word().to_string();
        if key.is_empty() {
            return Err(self.err(start, "expected a label key"));
        }
        validate_key(&key).map_err(|m| self.err(start, m))?;
        Ok(key)
    }

    fn value(&mut self) -> Result<String, SelectorParseError> {
        self.skip_ws();
        let start = self.pos;
        let v = self.word().to_string();
        validate_value(&v).map_err(|m| self.err(start, m))?;
        Ok(v)
    }

    fn integer(&mut self) -> Result<i64, SelectorParseError> {
        self.skip_ws();
        let start = self.pos;
        let v = self.word().to_string();
        v.parse::<i64>()
            .map_err(|_| self.err(start, format!("expected an integer, found {v:?}")))
    }

    fn set(&mut self) -> Result<BTreeSet<String>, SelectorParseError> {
        self.skip_ws();
        if !self.eat("(") {
            return Err(self.err(self.pos, "expected '(' to start a value set"));
        }
        let mut set = BTreeSet::new();
        loop {
            set.insert(self.value()?);
            self.skip_ws();
            if self.eat(")") {
                break;
            }
            if !self.eat(",") {
                return Err(self.err(self.pos, "expected ',' or ')' in a value set"));
            }
        }
        Ok(set)
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorParseError> {
        if self.eat("!") {
            self.skip_ws();
            let key = self.key()?;
            return Ok(Requirement {
                key,
                op: LabelOp::DoesNotExist,
            });
        }
        let key = self.key()?;
        self.skip_ws();
        let op = if self.eat("==") || self.eat("=") {
            LabelOp::Equals(self.value()?)
        } else if self.eat("!=") {
            LabelOp::NotEquals(self.value()?)
        } else if self.eat(">") {
            LabelOp::GreaterThan(self.integer()?)
        } else if self.eat("<") {
            LabelOp::LessThan(self.integer()?)
        } else if self.rest().starts_with("notin") && !self.rest()[5..].starts_with(is_key_char) {
            self.pos += 5;
            LabelOp::NotIn(self.set()?)
        } else if self.rest().starts_with("in") && !self.rest()[2..].starts_with(is_key_char) {
            self.pos += 2;
            LabelOp::In(self.set()?)
        } else if self.rest().is_empty() || self.rest().starts_with(',') {
            LabelOp::Exists
        } else {
            return Err(self.err(
                self.pos,
                "expected an operator (=, ==, !=, in, notin, >, <) or ','",
            ));
        };
        Ok(Requirement { key, op })
    }
}

fn is_name_part(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !ok {
            return Err(format!(
                "invalid label key prefix {p:?}: must be a DNS subdomain"
            ));
        }
    }
    if !is_name_part(name, 63) {
        return Err(format!(
            "invalid label key {key:?}: name part must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric"
        ));
    }
    Ok(())
}

fn validate_value(v: &str) -> Result<(), String> {
    if v.is_empty() || is_name_part(v, 63) {
        Ok(())
    } else {
        Err(format!(
            "invalid label value {v:?}: must be empty or at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric"
        ))
    }
}

/// One field requirement: `field=value` or `field!=value`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldRequirement {
    /// Field path, e.g. `metadata.name`, `status.phase`.
    pub field: String,
    /// The value compared against.
    pub value: String,
    /// `true` for `!=`.
    pub negated: bool,
}

/// A field selector: `=`, `==` and `!=` requirements joined by commas.
///
/// Values may escape `,`, `=` and `\` with a backslash.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    /// The requirements, all of which must hold.
    pub requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses a field selector.
    ///
    /// ```
    /// use kubewright_core::FieldSelector;
    /// let s = FieldSelector::parse("metadata.name=web,status.phase!=Running").unwrap();
    /// assert!(s.matches(|f| match f { "metadata.name" => Some("web".into()), "status.phase" => Some("Pending".into()), _ => None }));
    /// ```
    pub fn parse(input: &str) -> Result<Self, SelectorParseError> {
        let err = |position: usize, message: String| SelectorParseError {
            input: input.to_string(),
            position,
            message,
        };
        let mut requirements = Vec::new();
        if input.trim().is_empty() {
            return Ok(Self::default());
        }
        // Split on unescaped commas.
        let mut parts: Vec<(usize, String)> = Vec::new();
        let mut cur = String::new();
        let mut start = 0;
        let mut chars = input.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    cur.push(c);
                    if let Some((_, n)) = chars.next() {
                        cur.push(n);
                    } else {
                        return Err(err(i, "dangling escape character '\\'".into()));
                    }
                }
                ',' => {
                    parts.push((start, std::mem::take(&mut cur)));
                    start = i + 1;
                }
                _ => cur.push(c),
            }
        }
        parts.push((start, cur));
        for (offset, part) in parts {
            let Some((op_at, op_len, negated)) = find_operator(&part) else {
                return Err(err(
                    offset,
                    format!("{part:?} has no operator: expected =, == or !="),
                ));
            };
            let field = trim_field(&part[..op_at]);
            if field.is_empty() {
                return Err(err(
                    offset,
                    "expected a field name before the operator".into(),
                ));
            }
            let raw = part[op_at + op_len..].trim();
            let value = unescape(raw).map_err(|m| err(offset + op_at + op_len, m))?;
            requirements.push(FieldRequirement {
                field: field.to_string(),
                value,
                negated,
            });
        }
        Ok(Self { requirements })
    }

    /// Whether the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Matches using an accessor that returns a field's value (None = field absent,
    /// compared as the empty string, as the API server does).
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|r| {
            let v = get(&r.field).unwrap_or_default();
            (v == r.value) != r.negated
        })
    }

    /// The value required by an `=` requirement on `field`, if any.
    pub fn required_value(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && !r.negated)
            .map(|r| r.value.as_str())
    }
}

/// A field name without surrounding whitespace, except a last whitespace character that a
/// backslash escapes (field names keep their escapes as written, so `a\ ` stays `a\ `
/// and prints back as itself).
fn trim_field(f: &str) -> &str {
    let f = f.trim_start();
    let t = f.trim_end();
    let backslashes = t.bytes().rev().take_while(|&b| b == b'\\').count();
    if backslashes % 2 == 1 {
        let escaped = f[t.len()..].chars().next().map_or(0, char::len_utf8);
        &f[..t.len() + escaped]
    } else {
        t
    }
}

/// The leftmost operator of a requirement that no backslash escapes: its byte offset,
/// its length and whether it is `!=`. As in apimachinery's `splitTerm`, the first
/// position where an operator starts wins (so a value can never hold an operator that the
/// field would otherwise end at), `!=` and `==` before `=` there. Bytes are compared: an
/// offset inside a multi-byte character never matches, as no byte of one is ASCII.
fn find_operator(s: &str) -> Option<(usize, usize, bool)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let next_is_eq = bytes.get(i + 1) == Some(&b'=');
        match bytes[i] {
            b'\\' => {
                i += 2;
                continue;
            }
            b'!' if next_is_eq => return Some((i, 2, true)),
            b'=' if next_is_eq => return Some((i, 2, false)),
            b'=' => return Some((i, 1, false)),
            _ => i += 1,
        }
    }
    None
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n @ ('\\' | ',' | '=')) => out.push(n),
                Some(n) => return Err(format!("invalid escape sequence '\\{n}'")),
                None => return Err("dangling escape character '\\'".into()),
            }
        } else if c == '=' || c == ',' {
            return Err(format!("unescaped '{c}' in value {s:?}"));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
}

impl FromStr for FieldSelector {
    type Err = SelectorParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            // A field ending in `!` keeps a space before `=`, which would else read `!=`.
            let op = match (r.negated, r.field.ends_with('!')) {
                (true, _) => "!=",
                (false, true) => " =",
                (false, false) => "=",
            };
            write!(f, "{}{op}{}", r.field, escape(&r.value))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn valid_label_selectors() {
        let l = labels(&[
            ("app", "web"),
            ("tier", "fe"),
            ("n", "7"),
            ("example.com/x", ""),
        ]);
        let table: &[(&str, bool, &str)] = &[
            ("", true, ""),
            ("app=web", true, "app=web"),
            ("app==web", true, "app=web"),
            ("app = web", true, "app=web"),
            ("app!=web", false, "app!=web"),
            ("missing!=x", true, "missing!=x"),
            ("app in (web, api)", true, "app in (api,web)"),
            ("app notin (web)", false, "app notin (web)"),
            ("missing notin (a)", true, "missing notin (a)"),
            ("app", true, "app"),
            ("!app", false, "!app"),
            ("! missing", true, "!missing"),
            ("n>5", true, "n>5"),
            ("n<5", false, "n<5"),
            ("app>1", false, "app>1"),
            ("example.com/x=", true, "example.com/x="),
            ("app=web,tier=fe", true, "app=web,tier=fe"),
            ("tier=fe,app=web", true, "app=web,tier=fe"),
            ("app,!missing", true, "app,!missing"),
            ("index in (in)", false, "index in (in)"),
            ("in=x", false, "in=x"),
        ];
        for (input, want, printed) in table {
            let s = LabelSelector::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(s.matches(&l), *want, "{input}");
            assert_eq!(s.to_string(), *printed, "{input}");
            assert_eq!(
                LabelSelector::parse(&s.to_string()).unwrap(),
                s,
                "round trip of {input}"
            );
        }
    }

    #[test]
    fn invalid_label_selectors() {
        let table: &[(&str, usize)] = &[
            ("app=", usize::MAX),
            ("=web", 0),
            ("app in web", 7),
            ("app in (a", 9),
            ("app=web,", 8),
            ("app web", 4),
            ("n>x", 2),
            ("-app=x", 0),
            ("app=-x", 4),
            ("Bad_Prefix/x=y", 0),
            ("a,,b", 2),
            ("app=w@b", 5),
        ];
        for (input, pos) in table {
            match LabelSelector::parse(input) {
                Ok(s) if *pos == usize::MAX => assert!(s.matches(&labels(&[("app", "")]))),
                Ok(s) => panic!("{input} parsed as {s}"),
                Err(e) => {
                    assert_eq!(e.position, *pos, "{input}: {e}");
                    assert!(e.to_string().contains(input), "{e}");
                }
            }
        }
    }

    #[test]
    fn field_selectors() {
        let get = |f: &str| match f {
            "metadata.name" => Some("a,b".to_string()),
            "status.phase" => Some("Running".to_string()),
            _ => None,
        };
        assert!(
            FieldSelector::parse("metadata.name=a\\,b")
                .unwrap()
                .matches(get)
        );
        assert!(
            FieldSelector::parse("status.phase==Running,spec.nodeName=")
                .unwrap()
                .matches(get)
        );
        assert!(
            !FieldSelector::parse("status.phase!=Running")
                .unwrap()
                .matches(get)
        );
        let s = FieldSelector::parse("metadata.name!=x\\=y").unwrap();
        assert_eq!(s.requirements[0].value, "x=y");
        assert_eq!(s.to_string(), "metadata.name!=x\\=y");
        assert_eq!(
            FieldSelector::parse("metadata.name=web")
                .unwrap()
                .required_value("metadata.name"),
            Some("web")
        );
        for bad in ["metadata.name", "=x", "a=b=c", "a=b\\"] {
            assert!(FieldSelector::parse(bad).is_err(), "{bad}");
        }
    }

    /// Found by the `field_selector` fuzz target: non-ASCII text before the operator
    /// (and an escaped non-ASCII character) made the parser slice inside a character and
    /// panic, in the API server's request handler too.
    #[test]
    fn field_selectors_with_non_ascii_text() {
        let s = FieldSelector::parse("métadata.nom=café,spec.x!=é").unwrap();
        assert_eq!(s.requirements[0].field, "métadata.nom");
        assert_eq!(s.requirements[0].value, "café");
        assert_eq!(s.requirements[1].field, "spec.x");
        assert!(s.requirements[1].negated);
        assert_eq!(s.requirements[1].value, "é");
        assert_eq!(FieldSelector::parse(&s.to_string()).unwrap(), s);
        let s = FieldSelector::parse("a\\é=b").unwrap();
        assert_eq!(s.requirements[0].field, "a\\é");
        assert_eq!(s.requirements[0].value, "b");
        assert!(FieldSelector::parse("a\\é").is_err());
        assert!(
            FieldSelector::parse("odeNamname=web\x12metadatinvol\u{fffd}ePoa.nama.name=wnding")
                .is_err()
        );
    }

    /// Found by the `field_selector` fuzz target: the operator was searched for `!=`
    /// first, then `==`, then `=`, each over the whole requirement, so
    /// `metadata.name=a\,b==c` parsed as the field `metadata.name=a\,b`, a selector that
    /// printed as one that does not parse. The leftmost operator wins, as upstream.
    /// Found by the `field_selector` fuzz target: `@s\   =` trimmed its field to `@s\`,
    /// which printed as `@s\=`, a selector without an operator.
    #[test]
    fn field_selector_fields_keep_escaped_whitespace() {
        let s = FieldSelector::parse("@s\\   =").unwrap();
        assert_eq!(s.requirements[0].field, "@s\\ ");
        assert_eq!(s.requirements[0].value, "");
        assert_eq!(s.to_string(), "@s\\ =");
        assert_eq!(FieldSelector::parse(&s.to_string()).unwrap(), s);
        let s = FieldSelector::parse(" a\\\\  =b").unwrap();
        assert_eq!(s.requirements[0].field, "a\\\\");
        assert_eq!(FieldSelector::parse(&s.to_string()).unwrap(), s);
        let s = FieldSelector::parse("  metadata.name  ==  web ").unwrap();
        assert_eq!(s.requirements[0].field, "metadata.name");
        assert_eq!(s.requirements[0].value, "web");
    }

    /// Found by the `field_selector` fuzz target: the field `a!` with `=` printed as
    /// `a!=`, the negation.
    #[test]
    fn field_selector_field_ending_in_bang_prints_apart() {
        let s = FieldSelector::parse("a!  =b,c! !=d").unwrap();
        assert_eq!(s.requirements[0].field, "a!");
        assert!(!s.requirements[0].negated);
        assert_eq!(s.requirements[1].field, "c!");
        assert!(s.requirements[1].negated);
        assert_eq!(s.to_string(), "a! =b,c!!=d");
        assert_eq!(FieldSelector::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn field_selector_operator_is_the_leftmost() {
        for bad in [
            "metadata.name=a\\,b==c\\\\d",
            "a=b!=c",
            "a=b==c",
            "a==b=c",
            "a!=b==c",
        ] {
            assert!(FieldSelector::parse(bad).is_err(), "{bad}");
        }
        let s = FieldSelector::parse("a!==b").unwrap_err();
        assert!(s.message.contains("unescaped '='"), "{s}");
        let s = FieldSelector::parse("x\\=y!=z,a==b\\=c").unwrap();
        assert_eq!(s.requirements[0].field, "x\\=y");
        assert!(s.requirements[0].negated);
        assert_eq!(s.requirements[0].value, "z");
        assert_eq!(s.requirements[1].field, "a");
        assert_eq!(s.requirements[1].value, "b=c");
        assert_eq!(FieldSelector::parse(&s.to_string()).unwrap(), s);
    }
}
