//! Best-effort removal of secrets from free text, such as an exec plugin's standard
//! error, before it goes into an error message or a log.
//!
//! What is replaced by `[redacted]`:
//! - PEM blocks (`-----BEGIN …-----` to `-----END …-----`, or to the end of the text);
//! - the credential after `Bearer` (any) and `Basic` (base64-looking);
//! - the value of a `key=value` or `key: value` pair whose key ends with a secret-ish
//!   name (`token`, `secret`, `password`, `key`, `credential`, `authorization`, `cookie`,
//!   `session`, `signature`, …), quoted or not;
//! - runs of 24 or more token characters (`A-Za-z0-9+/=_-.~%`) that mix upper case, lower
//!   case and digits (base64, JWTs, API keys), and runs of 32 or more hex digits.
//!
//! Short secrets in prose ("your code is 1234") cannot be recognised; that is why only a
//! bounded tail of such text is ever kept.

const REDACTED: &str = "[redacted]";

/// Key suffixes (lower case) whose values are secrets.
const SECRET_KEYS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "apikey",
    "api_key",
    "api-key",
    "key",
    "key-data",
    "keydata",
    "credential",
    "credentials",
    "authorization",
    "cookie",
    "session",
    "signature",
];

/// A run of token characters this long may be a secret.
const MIN_SECRET_RUN: usize = 24;
/// A run of hex digits this long may be a secret.
const MIN_HEX_RUN: usize = 32;

/// `text` with everything that looks like a credential replaced by `[redacted]`.
pub(crate) fn redact_secrets(text: &str) -> String {
    let text = redact_pem(text);
    let text = redact_assignments(&text);
    let text = redact_auth_schemes(&text);
    redact_long_runs(&text)
}

fn redact_pem(text: &str) -> String {
    const BEGIN: &str = "-----BEGIN ";
    const END: &str = "-----END ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(BEGIN) {
        out.push_str(&rest[..start]);
        out.push_str("[redacted PEM block]");
        let block = &rest[start..];
        // The end of the END line's closing dashes, or of the text.
        let end = block
            .find(END)
            .and_then(|e| {
                let after = e + END.len();
                block[after..]
                    .find("-----")
                    .map(|d| after + d + "-----".len())
            })
            .unwrap_or(block.len());
        rest = &block[end..];
    }
    out.push_str(rest);
    out
}

fn is_key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_KEYS.iter().any(|k| key.ends_with(k))
}

/// Redacts the values of `key=value` and `key: value` pairs with secret-ish keys.
fn redact_assignments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if matches!(bytes[i], b'=' | b':')
            && let Some((start, end)) = secret_value_at(text, i)
        {
            out.push_str(&text[copied..start]);
            out.push_str(REDACTED);
            copied = end;
            i = end;
            continue;
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    out
}

/// For the separator at `sep`: the byte range of the value to redact, when the key
/// before it is secret-ish and the value is not empty.
fn secret_value_at(text: &str, sep: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    // The key: identifier characters before the separator, past spaces and a quote.
    let mut key_end = sep;
    while key_end > 0 && bytes[key_end - 1] == b' ' {
        key_end -= 1;
    }
    if key_end > 0 && matches!(bytes[key_end - 1], b'"' | b'\'') {
        key_end -= 1;
    }
    let quoted_key = key_end < sep && matches!(bytes[key_end], b'"' | b'\'');
    let mut key_start = key_end;
    while key_start > 0 && is_key_char(bytes[key_start - 1]) {
        key_start -= 1;
    }
    let key = &text[key_start..key_end];
    if key.is_empty() || !is_secret_key(key) {
        return None;
    }
    // `key: value` also occurs in prose ("failed to get token: exit status 1"): take
    // it only for a quoted key, a key with `_` or `-`, or a key that starts a line or
    // follows `{` or `,` (YAML, JSON, logfmt-ish output).
    if bytes[sep] == b':' && !quoted_key && !key.contains(['_', '-']) {
        let mut before = key_start;
        while before > 0 && matches!(bytes[before - 1], b' ' | b'\t') {
            before -= 1;
        }
        if before > 0 && !matches!(bytes[before - 1], b'\n' | b'\r' | b'{' | b',') {
            return None;
        }
    }
    // The value: quoted, or up to a delimiter.
    let mut start = sep + 1;
    while start < bytes.len() && matches!(bytes[start], b' ' | b'\t') {
        start += 1;
    }
    let (start, end) = match bytes.get(start) {
        Some(&q @ (b'"' | b'\'')) => {
            let inner = start + 1;
            let len = bytes[inner..]
                .iter()
                .position(|&b| b == q || b == b'\n')
                .unwrap_or(bytes.len() - inner);
            (inner, inner + len)
        }
        _ => {
            let len = bytes[start..]
                .iter()
                .position(|&b| {
                    b.is_ascii_whitespace()
                        || matches!(b, b'"' | b'\'' | b',' | b';' | b'&' | b')' | b'}' | b']')
                })
                .unwrap_or(bytes.len() - start);
            (start, start + len)
        }
    };
    let value = &text[start..end];
    // `Authorization: Bearer x`: the scheme pass redacts the credential.
    if value.is_empty()
        || value == REDACTED
        || value.eq_ignore_ascii_case("bearer")
        || value.eq_ignore_ascii_case("basic")
    {
        return None;
    }
    Some((start, end))
}

/// Redacts the credential after `Bearer` and a base64-looking one after `Basic`.
fn redact_auth_schemes(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let scheme = ["bearer", "basic"].into_iter().find(|s| {
            bytes
                .get(i..i + s.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(s.as_bytes()))
        });
        let at_word_start = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let (Some(scheme), true) = (scheme, at_word_start) else {
            i += 1;
            continue;
        };
        let mut start = i + scheme.len();
        if bytes.get(start) != Some(&b' ') {
            i += 1;
            continue;
        }
        while bytes.get(start) == Some(&b' ') {
            start += 1;
        }
        let len = bytes[start..]
            .iter()
            .position(|&b| b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b',' | b';'))
            .unwrap_or(bytes.len() - start);
        let credential = &text[start..start + len];
        let secret = match scheme {
            // Not the word after "bearer" in prose ("no bearer token configured").
            "bearer" => {
                credential != REDACTED
                    && (credential.len() >= 16
                        || credential.bytes().any(|b| !b.is_ascii_alphabetic()))
            }
            _ => {
                credential.len() >= 8
                    && credential
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                    && !credential.bytes().all(|b| b.is_ascii_lowercase())
            }
        };
        if secret {
            out.push_str(&text[copied..start]);
            out.push_str(REDACTED);
            copied = start + len;
            i = copied;
        } else {
            i = start;
        }
    }
    out.push_str(&text[copied..]);
    out
}

fn is_run_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-' | b'.' | b'~' | b'%')
}

fn looks_secret(run: &str) -> bool {
    let has = |f: fn(&u8) -> bool| run.as_bytes().iter().any(f);
    let mixed =
        has(u8::is_ascii_uppercase) && has(u8::is_ascii_lowercase) && has(u8::is_ascii_digit);
    if run.len() >= MIN_SECRET_RUN && mixed {
        return true;
    }
    let hex = run.bytes().filter(u8::is_ascii_hexdigit).count();
    run.len() >= MIN_HEX_RUN
        && hex == run.len()
        && has(u8::is_ascii_digit)
        && has(u8::is_ascii_alphabetic)
}

/// Redacts long runs of token characters that look random (see the module docs).
fn redact_long_runs(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if !is_run_char(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_run_char(bytes[i]) {
            i += 1;
        }
        if looks_secret(&text[start..i]) {
            out.push_str(&text[copied..start]);
            out.push_str(REDACTED);
            copied = i;
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::redact_secrets;

    const JWT: &str = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJzdWIiOiJhbGljZSIsImV4cCI6MTcwMDAwMDAwMH0.c2lnbmF0dXJlLWJ5dGVzLWhlcmUtMTIzNDU2";

    fn assert_redacted(input: &str, secret: &str) -> String {
        let out = redact_secrets(input);
        assert!(!out.contains(secret), "{secret:?} survived in {out:?}");
        assert!(out.contains("[redacted"), "{out:?}");
        out
    }

    #[test]
    fn tokens_keys_and_pem_blocks_are_redacted() {
        let out = assert_redacted(&format!("got token {JWT} from cache"), JWT);
        assert_eq!(out, "got token [redacted] from cache");
        let out = assert_redacted("error: token=s3cr3t&state=xyz", "s3cr3t");
        assert_eq!(out, "error: token=[redacted]&state=xyz");
        assert_redacted(r#"{"access_token": "abc def", "ok": true}"#, "abc def");
        assert_redacted("client_secret: hunter2", "hunter2");
        assert_redacted("PASSWORD='p a s s'", "p a s s");
        let out = assert_redacted("sent Authorization: Bearer abc.def", "abc.def");
        assert_eq!(out, "sent Authorization: Bearer [redacted]");
        assert_redacted("header: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz");
        assert_redacted(
            "aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY found",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        );
        assert_redacted("token: abc\npassword: hunter", "hunter");
        assert_redacted("{\"token\":\"abc\"}", "abc");
        assert_redacted(
            "sha 0123456789abcdef0123456789abcdef01234567",
            "0123456789abcdef0123456789abcdef01234567",
        );
        let pem = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----\nafter";
        let out = assert_redacted(pem, "MIIEpAIBAAKCAQEA");
        assert_eq!(out, "before\n[redacted PEM block]\nafter");
        // A block cut off by truncation is redacted to the end.
        let out = assert_redacted("x -----BEGIN EC PRIVATE KEY-----\nabc", "abc");
        assert_eq!(out, "x [redacted PEM block]");
    }

    #[test]
    fn ordinary_messages_are_kept() {
        for text in [
            "error: You must be logged in to the server (Unauthorized)",
            "failed to get token: exit status 1",
            "see https://example.com/docs/login for basic authentication help",
            "/usr/local/bin/gke-gcloud-auth-plugin: not found",
            "login required: run `aws sso login --profile dev`",
            "time: 12:30:05, key not found",
            "no bearer token configured",
            "",
        ] {
            assert_eq!(redact_secrets(text), text);
        }
        // Non-ASCII text is kept intact.
        assert_eq!(redact_secrets("échec: réessayez"), "échec: réessayez");
    }
}
