//! `kw serve --token-auth-file`: kube-apiserver's CSV token file (quoted fields, CRLF,
//! records with too few columns, empty tokens, duplicates).
//!
//! Input: the file's text. Checks: no panic; every user has a non-empty token, unique
//! across the file; `Debug` redacts it; an error never contains a token of the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match kubewright_apiserver::parse_token_file("tokens.csv", text) {
        Ok(users) => {
            let mut seen = std::collections::HashSet::new();
            for u in &users {
                assert!(!u.token.is_empty(), "a user without a token");
                assert!(seen.insert(u.token.clone()), "a token twice");
                assert!(format!("{u:?}").contains("token: \"<redacted>\""), "{u:?}");
            }
        }
        Err(e) => {
            let shown = e.to_string();
            // The first field of each line is a token; none may appear in the error.
            // Checked for tokens of 12 or more letters and digits: the error's fixed
            // wording has no such run, so one found there came from the file.
            for line in text.lines() {
                let token = line.split(',').next().unwrap_or("").trim_matches('"');
                if token.len() >= 12 && token.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    assert!(!shown.contains(token), "{shown}");
                }
            }
        }
    }
});
