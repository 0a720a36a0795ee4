//! Go's `encoding/json` syntax errors, word for word: kube-apiserver passes them on in
//! its messages (`json parse error: invalid character '}' looking for beginning of object
//! key string`), so the embedded server reproduces its scanner's error states.

/// The error Go's `json.Unmarshal` reports for malformed `data`; "unexpected end of JSON
/// input" when it ends early. (Only called for data that does not parse.)
pub fn syntax_error(data: &[u8]) -> String {
    // The scanner recurses: past the server's nesting limit (limits.rs) answer what Go's
    // scanner answers past its own, before recursing that deep.
    if let Some(c) = first_too_deep(data, MAX_JSON_DEPTH) {
        return invalid(c, "exceeded max depth");
    }
    let mut s = Scanner { data, pos: 0 };
    match s.top() {
        Err(e) => e,
        Ok(()) => "unexpected end of JSON input".into(),
    }
}

struct Scanner<'a> {
    data: &'a [u8],
    pos: usize,
}

type Res = Result<(), String>;

const EOF: &str = "unexpected end of JSON input";

/// `'x'` as Go's scanner quotes a byte in its messages.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => "'\"'".into(),
        b'\\' => r"'\\'".into(),
        b'\n' => r"'\n'".into(),
        b'\r' => r"'\r'".into(),
        b'\t' => r"'\t'".into(),
        0x07 => r"'\a'".into(),
        0x08 => r"'\b'".into(),
        0x0c => r"'\f'".into(),
        0x0b => r"'\v'".into(),
        c if c < 0x20 || c == 0x7f => format!("'\\x{c:02x}'"),
        c if c < 0x80 => format!("'{}'", c as char),
        // A byte of a multi-byte sequence: Go quotes it as the Latin-1 rune.
        c if c < 0xa0 => format!("'\\u{:04x}'", u32::from(c)),
        c => format!("'{}'", char::from(c)),
    }
}

fn invalid(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }
    fn next(&mut self) -> Result<u8, String> {
        let c = self.peek().ok_or_else(|| EOF.to_string())?;
        self.pos += 1;
        Ok(c)
    }
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.pos += 1;
        }
    }

    fn top(&mut self) -> Res {
        self.skip_ws();
        self.value()?;
        self.skip_ws();
        match self.peek() {
            Some(c) => Err(invalid(c, "after top-level value")),
            None => Ok(()),
        }
    }

    fn value(&mut self) -> Res {
        self.skip_ws();
        let c = self.next()?;
        match c {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.number(c),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            c => Err(invalid(c, "looking for beginning of value")),
        }
    }

    fn object(&mut self) -> Res {
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            match self.next()? {
                b'"' => self.string()?,
                c => return Err(invalid(c, "looking for beginning of object key string")),
            }
            self.skip_ws();
            match self.next()? {
                b':' => {}
                c => return Err(invalid(c, "after object key")),
            }
            self.value()?;
            self.skip_ws();
            match self.next()? {
                b',' => {}
                b'}' => return Ok(()),
                c => return Err(invalid(c, "after object key:value pair")),
            }
        }
    }

    fn array(&mut self) -> Res {
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.value()?;
            self.skip_ws();
            match self.next()? {
                b',' => {}
                b']' => return Ok(()),
                c => return Err(invalid(c, "after array element")),
            }
        }
    }

    fn string(&mut self) -> Res {
        loop {
            match self.next()? {
                b'"' => return Ok(()),
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        for _ in 0..4 {
                            let h = self.next()?;
                            if !h.is_ascii_hexdigit() {
                                return Err(invalid(h, "in \\u hexadecimal character escape"));
                            }
                        }
                    }
                    c => return Err(invalid(c, "in string escape code")),
                },
                c if c < 0x20 => return Err(invalid(c, "in string literal")),
                _ => {}
            }
        }
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    fn number(&mut self, first: u8) -> Res {
        let mut c = first;
        if c == b'-' {
            c = self.next()?;
            if !c.is_ascii_digit() {
                return Err(invalid(c, "in numeric literal"));
            }
        }
        if c != b'0' {
            self.digits();
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let d = self.next()?;
            if !d.is_ascii_digit() {
                return Err(invalid(d, "after decimal point in numeric literal"));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            let mut d = self.next()?;
            if d == b'+' || d == b'-' {
                d = self.next()?;
            }
            if !d.is_ascii_digit() {
                return Err(invalid(d, "in exponent of numeric literal"));
            }
            self.digits();
        }
        Ok(())
    }

    fn literal(&mut self, word: &str) -> Res {
        for expected in word.bytes().skip(1) {
            let c = self.next()?;
            if c != expected {
                return Err(invalid(
                    c,
                    &format!("in literal {word} (expecting {})", quote_char(expected)),
                ));
            }
        }
        Ok(())
    }
}

/// Nesting depth of a JSON request body. kube-apiserver's decoder allows 10,000 levels;
/// this server stops where serde_json's recursion limit does (127 levels), which keeps
/// every recursive walk of an object (pruning, defaulting, field sets, encoding,
/// dropping) far from the end of a 2 MiB thread stack. The answer has kube-apiserver's
/// text for its own limit.
pub(crate) const MAX_JSON_DEPTH: usize = 127;

/// The bracket at which `body` (JSON) nests deeper than `max` arrays and objects, if it
/// does. A byte scan, so the check itself cannot run out of stack.
pub(crate) fn first_too_deep(body: &[u8], max: usize) -> Option<u8> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in body {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Some(b);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Whether `body` (JSON) nests deeper than `max` arrays and objects.
pub(crate) fn json_too_deep(body: &[u8], max: usize) -> bool {
    first_too_deep(body, max).is_some()
}

/// How many arrays and objects `v` nests (a scalar 0), without recursing.
pub(crate) fn nesting_depth(v: &serde_json::Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 1)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            serde_json::Value::Array(a) => stack.extend(a.iter().map(|c| (c, depth + 1))),
            serde_json::Value::Object(m) => stack.extend(m.values().map(|c| (c, depth + 1))),
            _ => continue,
        }
        deepest = deepest.max(depth);
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::syntax_error;

    #[test]
    fn go_scanner_messages() {
        for (input, want) in [
            (
                &b"{\"apiVersion\": \"v1\", \"kind\": "[..],
                "unexpected end of JSON input",
            ),
            (
                b"xyz",
                "invalid character 'x' looking for beginning of value",
            ),
            (
                b"{\"a\":1, }",
                "invalid character '}' looking for beginning of object key string",
            ),
            (b"{\"a\" 1}", "invalid character '1' after object key"),
            (
                b"{\"a\":1 \"b\"}",
                "invalid character '\"' after object key:value pair",
            ),
            (b"[1 2]", "invalid character '2' after array element"),
            (b"{} x", "invalid character 'x' after top-level value"),
            (b"tru", "unexpected end of JSON input"),
            (
                b"trux",
                "invalid character 'x' in literal true (expecting 'e')",
            ),
            (b"-x", "invalid character 'x' in numeric literal"),
            (
                b"1.x",
                "invalid character 'x' after decimal point in numeric literal",
            ),
            (b"\"a\nb\"", "invalid character '\\n' in string literal"),
            (b"\"\\q\"", "invalid character 'q' in string escape code"),
            (
                b"i\xb7",
                "invalid character 'i' looking for beginning of value",
            ),
        ] {
            assert_eq!(
                syntax_error(input),
                want,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
