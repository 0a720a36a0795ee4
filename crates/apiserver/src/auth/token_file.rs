//! kube-apiserver's `--token-auth-file` format (`kw serve --token-auth-file`): CSV records `token,user,uid[,"group1,group2"]`
//! (further columns are ignored), read the way kube-apiserver reads it.

use std::fmt;

/// One user of a token file.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenUser {
    /// The bearer token.
    pub token: String,
    /// User name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Groups (the fourth column split at commas; `system:authenticated` is added at
    /// authentication).
    pub groups: Vec<String>,
}

impl fmt::Debug for TokenUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenUser")
            .field("token", &"<redacted>")
            .field("name", &self.name)
            .field("uid", &self.uid)
            .field("groups", &self.groups)
            .finish()
    }
}

/// Why a token file was refused. Never contains a token.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenFileError {
    /// A record with fewer than three columns (kube-apiserver's wording).
    #[error(
        "token file '{path}' must have at least 3 columns (token, user name, user uid), found {found}"
    )]
    TooFewColumns {
        /// The file.
        path: String,
        /// Columns in the record.
        found: usize,
    },
    /// A quoted field that never ends, or a quote inside an unquoted field.
    #[error("token file '{path}': record on line {line}: {problem}")]
    Syntax {
        /// The file.
        path: String,
        /// 1-based line where the record starts.
        line: usize,
        /// What is wrong.
        problem: &'static str,
    },
}

/// Parses the content of a token file. Records with an empty token are skipped (as
/// kube-apiserver does, with a warning); for a duplicated token the last record wins.
pub fn parse(path: &str, content: &str) -> Result<Vec<TokenUser>, TokenFileError> {
    let mut users: Vec<TokenUser> = Vec::new();
    for (line, record) in records(path, content)? {
        if record.len() < 3 {
            return Err(TokenFileError::TooFewColumns {
                path: path.to_string(),
                found: record.len(),
            });
        }
        if record[0].is_empty() {
            eprintln!("warning: empty token in token file '{path}', line {line}: skipped");
            continue;
        }
        let groups = match record.get(3) {
            Some(g) => g.split(',').map(str::to_string).collect(),
            None => Vec::new(),
        };
        let user = TokenUser {
            token: record[0].clone(),
            name: record[1].clone(),
            uid: record[2].clone(),
            groups,
        };
        match users.iter_mut().find(|u| u.token == user.token) {
            Some(existing) => {
                eprintln!("warning: duplicate token in token file '{path}', line {line}");
                *existing = user;
            }
            None => users.push(user),
        }
    }
    Ok(users)
}

/// CSV records (RFC 4180 with Go's encoding/csv leniencies: `\r\n` or `\n`, blank lines
/// skipped, a variable number of fields), each with the line it starts on.
fn records(path: &str, content: &str) -> Result<Vec<(usize, Vec<String>)>, TokenFileError> {
    let syntax = |line, problem| TokenFileError::Syntax {
        path: path.to_string(),
        line,
        problem,
    };
    let mut out = Vec::new();
    let mut chars = content.chars().peekable();
    let mut line = 1;
    while chars.peek().is_some() {
        let start = line;
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        let mut was_quoted = false;
        loop {
            let Some(c) = chars.next() else {
                if quoted {
                    return Err(syntax(start, "extraneous or missing \" in quoted-field"));
                }
                fields.push(std::mem::take(&mut field));
                break;
            };
            if quoted {
                match c {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    '"' => quoted = false,
                    '\n' => {
                        line += 1;
                        field.push('\n');
                    }
                    c => field.push(c),
                }
                continue;
            }
            match c {
                ',' => {
                    fields.push(std::mem::take(&mut field));
                    was_quoted = false;
                }
                '"' if field.is_empty() && !was_quoted => {
                    quoted = true;
                    was_quoted = true;
                }
                '"' => return Err(syntax(start, "bare \" in non-quoted-field")),
                '\r' if chars.peek() == Some(&'\n') => {}
                '\n' => {
                    line += 1;
                    fields.push(std::mem::take(&mut field));
                    break;
                }
                c if was_quoted => {
                    let _ = c;
                    return Err(syntax(start, "extraneous or missing \" in quoted-field"));
                }
                c => field.push(c),
            }
        }
        // A blank line is no record.
        if !(fields.len() == 1 && fields[0].is_empty()) {
            out.push((start, fields));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_apiserver_format() {
        let users = parse(
            "t.csv",
            "tok-a,alice,uid-1,\"devs,ops\"\n\ntok-b,bob,uid-2\r\ntok-c,carol,uid-3,viewers,ignored\n",
        )
        .unwrap();
        assert_eq!(users.len(), 3);
        assert_eq!(users[0].name, "alice");
        assert_eq!(users[0].uid, "uid-1");
        assert_eq!(users[0].groups, ["devs", "ops"]);
        assert_eq!(users[1].token, "tok-b");
        assert!(users[1].groups.is_empty());
        assert_eq!(users[2].groups, ["viewers"]);
    }

    #[test]
    fn empty_tokens_skipped_duplicates_replaced() {
        let users = parse("t.csv", ",nobody,u0\nx,first,u1\nx,second,u2\n").unwrap();
        assert_eq!(users.len(), 1);
        assert_eq!(users[0].name, "second");
    }

    #[test]
    fn bad_records_are_named_without_tokens() {
        let err = parse("t.csv", "secret-token,alice\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "token file 't.csv' must have at least 3 columns (token, user name, user uid), found 2"
        );
        let err = parse("t.csv", "ok,a,u\nsecret-token,\"unterminated,u\n").unwrap_err();
        assert!(
            matches!(err, TokenFileError::Syntax { line: 2, .. }),
            "{err}"
        );
        assert!(!err.to_string().contains("secret-token"));
        let err = parse("t.csv", "sec\"ret,a,u\n").unwrap_err();
        assert!(matches!(err, TokenFileError::Syntax { line: 1, .. }));
        assert!(!format!("{:?}", parse("t.csv", "tok,a,u").unwrap()).contains("tok,"));
    }
}
