//! Label validation and label selector parsing with kube-apiserver's error texts
//! (`k8s.io/apimachinery/pkg/util/validation` and `pkg/labels`), word for word: clients
//! show them to users, and tests compare them.

const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

/// Go's `validation.RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum(b[0])
        && is_alnum(b[b.len() - 1])
        && b.iter()
            .all(|c| is_alnum(*c) || matches!(c, b'-' | b'_' | b'.'))
}

fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = vec![];
    if s.len() > 253 {
        errs.push("must be no more than 253 bytes".to_string());
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    if !s.split('.').all(label_ok) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Go's `validation.IsQualifiedName` (a label or annotation key).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = vec![];
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_string());
    }
    if !qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Go's `validation.IsValidLabelValue`.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = vec![];
    if value.len() > 63 {
        errs.push("must be no more than 63 bytes".to_string());
    }
    if !value.is_empty() && !qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    End,
    Ident,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
    Error,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::GreaterThan,
        "in" => Tok::In,
        "<" => Tok::LessThan,
        "!=" => Tok::NotEquals,
        "notin" => Tok::NotIn,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn white(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Go's selector lexer: every token up to the end.
fn lex(input: &str) -> Vec<(Tok, String)> {
    let b = input.as_bytes();
    let mut pos = 0;
    let mut out = vec![];
    loop {
        while pos < b.len() && white(b[pos]) {
            pos += 1;
        }
        if pos >= b.len() || b[pos] == 0 {
            out.push((Tok::End, String::new()));
            return out;
        }
        if special(b[pos]) {
            let mut buf = String::new();
            let mut last: Option<(Tok, String)> = None;
            while pos < b.len() && special(b[pos]) {
                buf.push(b[pos] as char);
                if let Some(t) = keyword(&buf) {
                    last = Some((t, buf.clone()));
                } else if last.is_some() {
                    break;
                }
                pos += 1;
            }
            match last {
                Some(t) => out.push(t),
                None => out.push((Tok::Error, format!("error expected: keyword found '{buf}'"))),
            }
        } else {
            let start = pos;
            while pos < b.len() && b[pos] != 0 && !special(b[pos]) && !white(b[pos]) {
                pos += 1;
            }
            let lit = String::from_utf8_lossy(&b[start..pos]).into_owned();
            out.push((keyword(&lit).unwrap_or(Tok::Ident), lit));
        }
    }
}

struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

impl Parser {
    /// A token; in a value context `in` and `notin` are identifiers.
    fn lookahead(&self, values: bool) -> (Tok, String) {
        let (t, l) = self
            .items
            .get(self.pos)
            .cloned()
            .unwrap_or((Tok::End, String::new()));
        match t {
            Tok::In | Tok::NotIn if values => (Tok::Ident, l),
            t => (t, l),
        }
    }
    fn consume(&mut self, values: bool) -> (Tok, String) {
        let r = self.lookahead(values);
        self.pos = (self.pos + 1).min(self.items.len());
        r
    }

    fn parse(&mut self) -> Result<(), String> {
        loop {
            let (tok, lit) = self.lookahead(true);
            match tok {
                Tok::Ident | Tok::DoesNotExist => {
                    self.requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    let (t, l) = self.consume(true);
                    match t {
                        Tok::End => return Ok(()),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(true);
                            if t2 != Tok::Ident && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::End => return Ok(()),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<(), String> {
        let (mut tok, mut lit) = self.consume(true);
        let not_exists = tok == Tok::DoesNotExist;
        if not_exists {
            (tok, lit) = self.consume(true);
        }
        if tok != Tok::Ident {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let key = lit;
        let errs = qualified_name_errors(&key);
        if !errs.is_empty() {
            return Err(format!(
                "<nil>: Invalid value: {}: {}",
                crate::error::go_quote(&key),
                errs.join("; ")
            ));
        }
        let (t, _) = self.lookahead(true);
        if not_exists || t == Tok::End || t == Tok::Comma {
            return Ok(());
        }
        let (op, lit) = self.consume(false);
        let mut values: Vec<String> = match op {
            Tok::In | Tok::NotIn => self.set_values()?,
            Tok::Equals | Tok::DoubleEquals | Tok::NotEquals | Tok::GreaterThan | Tok::LessThan => {
                self.exact_value()?
            }
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        };
        values.sort();
        values.dedup();
        let mut errs = vec![];
        if matches!(op, Tok::GreaterThan | Tok::LessThan) {
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(format!(
                        "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                        crate::error::go_quote(v)
                    ));
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let msgs = label_value_errors(v);
            if !msgs.is_empty() {
                errs.push(format!(
                    "values[{i}][{key}]: Invalid value: {}: {}",
                    crate::error::go_quote(v),
                    msgs.join("; ")
                ));
            }
        }
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }

    fn set_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(true);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(true);
        match tok {
            Tok::Ident | Tok::Comma => {
                let s = self.identifiers()?;
                if self.consume(true).0 != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(s)
            }
            Tok::ClosedPar => {
                self.consume(true);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn identifiers(&mut self) -> Result<Vec<String>, String> {
        let mut s: Vec<String> = vec![];
        loop {
            let (tok, lit) = self.consume(true);
            match tok {
                Tok::Ident => {
                    s.push(lit);
                    let (t2, l2) = self.lookahead(true);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(s),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if s.is_empty() {
                        s.push(String::new());
                    }
                    let (t2, _) = self.lookahead(true);
                    if t2 == Tok::ClosedPar {
                        s.push(String::new());
                        return Ok(s);
                    }
                    if t2 == Tok::Comma {
                        self.consume(true);
                        s.push(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(true);
        if tok == Tok::End || tok == Tok::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(true);
        if tok == Tok::Ident {
            return Ok(vec![lit]);
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

/// Why kube-apiserver refuses a label selector, in its words; `None` when it accepts it.
pub fn label_selector_error(selector: &str) -> Option<String> {
    Parser {
        items: lex(selector),
        pos: 0,
    }
    .parse()
    .err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_errors_match_kube_apiserver() {
        // Answers of a v1.36 kube-apiserver.
        let name_part = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        let value = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        let cases: Vec<(&str, Option<String>)> = vec![
            ("a in", Some("unable to parse requirement: found '' expected: '('".into())),
            ("-a=b", Some(format!("unable to parse requirement: <nil>: Invalid value: \"-a\": {name_part}"))),
            ("a=b c", Some("found 'c', expected: ',' or 'end of string'".into())),
            ("a=-b", Some(format!("unable to parse requirement: values[0][a]: Invalid value: \"-b\": {value}"))),
            ("a in (x", Some("unable to parse requirement: found '', expected: ',' or ')'".into())),
            ("a in (x,", Some("unable to parse requirement: found '', expected: ',', or identifier".into())),
            ("a=", None),
            ("=a", Some("found '=', expected: !, identifier, or 'end of string'".into())),
            ("a==b,", Some("found '', expected: identifier after ','".into())),
            ("a,,b", Some("found ',', expected: identifier after ','".into())),
            ("!", Some("unable to parse requirement: found '', expected: identifier".into())),
            ("!a=b", Some("found '=', expected: ',' or 'end of string'".into())),
            ("a>1", None),
            ("a>b", Some("unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer".into())),
            ("a!", Some("unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt".into())),
            ("a in ()", None),
            ("/a=x", Some("unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty".into())),
            ("a!=b!=c", Some("found '!=', expected: ',' or 'end of string'".into())),
            ("a in x", Some("unable to parse requirement: found 'x' expected: '('".into())),
            ("app=web,tier notin (a,b),!old", None),
        ];
        for (sel, want) in cases {
            assert_eq!(label_selector_error(sel), want, "{sel}");
        }
    }
}
