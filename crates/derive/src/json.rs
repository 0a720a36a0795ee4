//! The JSON object of a `printcolumn = "{...}"` literal (kube-rs's string form), read
//! without a JSON library so that the macro's build stays small: any JSON is accepted;
//! strings and integers are kept, other values only recognised.

/// A member's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// A string.
    Str(String),
    /// A number (`None` when it is not an integer that fits an i64).
    Num(Option<i64>),
    /// `true`, `false`, `null`, an array or an object.
    Other,
}

/// The members of a JSON object in `text`, or what is wrong with it (with its column).
pub fn object(text: &str) -> Result<Vec<(String, Json)>, ObjectError> {
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
    };
    p.ws();
    if p.peek() != Some(b'{') {
        p.value()?;
        p.ws();
        if p.at < p.s.len() {
            return Err(p.err("trailing characters"));
        }
        return Err(ObjectError::NotAnObject);
    }
    let members = p.members()?;
    p.ws();
    if p.at < p.s.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(members)
}

/// Why a literal is not a JSON object.
#[derive(Debug, PartialEq)]
pub enum ObjectError {
    /// Valid JSON, but not an object.
    NotAnObject,
    /// Not valid JSON: what was expected, at which column (from 1).
    Syntax(String),
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn err(&self, what: &str) -> ObjectError {
        let what = if self.at >= self.s.len() {
            "unexpected end of input"
        } else {
            what
        };
        ObjectError::Syntax(format!("{what} at column {}", self.at + 1))
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8, what: &str) -> Result<(), ObjectError> {
        self.ws();
        if self.peek() == Some(c) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.err(what))
        }
    }

    /// `{ "k": v, ... }`, from its `{`.
    fn members(&mut self) -> Result<Vec<(String, Json)>, ObjectError> {
        self.eat(b'{', "expected `{`")?;
        let mut out = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(out);
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a quoted key"));
            }
            let key = self.string()?;
            self.eat(b':', "expected `:`")?;
            let value = self.value()?;
            out.push((key, value));
            self.ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(out);
                }
                _ => return Err(self.err("expected `,` or `}`")),
            }
        }
    }

    fn value(&mut self) -> Result<Json, ObjectError> {
        self.ws();
        match self.peek() {
            Some(b'"') => self.string().map(Json::Str),
            Some(b'{') => self.members().map(|_| Json::Other),
            Some(b'[') => {
                self.at += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.at += 1;
                    return Ok(Json::Other);
                }
                loop {
                    self.value()?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(Json::Other);
                        }
                        _ => return Err(self.err("expected `,` or `]`")),
                    }
                }
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => {
                for word in ["true", "false", "null"] {
                    if self.s[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(Json::Other);
                    }
                }
                Err(self.err("expected a value"))
            }
        }
    }

    fn number(&mut self) -> Result<Json, ObjectError> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let digits = |p: &mut Self| {
            let from = p.at;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.at += 1;
            }
            p.at > from
        };
        if !digits(self) {
            return Err(self.err("expected a digit"));
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.at += 1;
            integer = false;
            if !digits(self) {
                return Err(self.err("expected a digit"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            integer = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if !digits(self) {
                return Err(self.err("expected a digit"));
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
        Ok(Json::Num(integer.then(|| text.parse().ok()).flatten()))
    }

    /// A string, from its opening quote.
    fn string(&mut self) -> Result<String, ObjectError> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.at += 1;
                    return String::from_utf8(out).map_err(|_| self.err("invalid UTF-8"));
                }
                Some(b'\\') => {
                    self.at += 1;
                    let c = match self.peek() {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let unit = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&unit) {
                                if !self.s[self.at + 1..].starts_with(b"\\u") {
                                    return Err(self.err("unpaired surrogate"));
                                }
                                self.at += 2;
                                let low = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&low) {
                                    return Err(self.err("unpaired surrogate"));
                                }
                                0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                            } else {
                                unit
                            };
                            char::from_u32(code).ok_or_else(|| self.err("unpaired surrogate"))?
                        }
                        _ => return Err(self.err("invalid escape")),
                    };
                    let mut buf = [0; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    self.at += 1;
                }
                Some(c) if c < 0x20 => return Err(self.err("control character in string")),
                Some(c) => {
                    out.push(c);
                    self.at += 1;
                }
            }
        }
    }

    /// The four hex digits after `\u` (leaves `at` on the last one).
    fn hex4(&mut self) -> Result<u32, ObjectError> {
        let digits = self
            .s
            .get(self.at + 1..self.at + 5)
            .ok_or_else(|| self.err("expected four hex digits"))?;
        let text = std::str::from_utf8(digits).map_err(|_| self.err("expected four hex digits"))?;
        let v = u32::from_str_radix(text, 16).map_err(|_| self.err("expected four hex digits"))?;
        self.at += 4;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_printcolumn_object() {
        let m = object(r#" {"name": "Ready \"now\" \u00e9\ud83d\ude00", "priority": 1, "x": [1, {"a": null}], "f": 1.5, "b": true} "#)
            .unwrap();
        assert_eq!(m[0], ("name".into(), Json::Str("Ready \"now\" é😀".into())));
        assert_eq!(m[1], ("priority".into(), Json::Num(Some(1))));
        assert_eq!(m[2].1, Json::Other);
        assert_eq!(m[3].1, Json::Num(None));
        assert_eq!(m[4].1, Json::Other);
    }

    #[test]
    fn says_what_is_wrong() {
        assert_eq!(object("[1]"), Err(ObjectError::NotAnObject));
        assert_eq!(object("\"s\""), Err(ObjectError::NotAnObject));
        for (bad, why) in [
            (r#"{"name": "a""#, "unexpected end of input at column 13"),
            (r#"{"name" "a"}"#, "expected `:` at column 9"),
            (r#"{name: 1}"#, "expected a quoted key at column 2"),
            (r#"{"a": tru}"#, "expected a value at column 7"),
            (r#"{"a": 1} x"#, "trailing characters at column 10"),
            (r#"{"a": "\x"}"#, "invalid escape at column 9"),
            (r#"{"a": -}"#, "expected a digit at column 8"),
        ] {
            assert_eq!(object(bad), Err(ObjectError::Syntax(why.into())), "{bad}");
        }
    }
}
