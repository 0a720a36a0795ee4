//! The standard output of an exec credential plugin (`client.authentication.k8s.io/v1`
//! ExecCredential): JSON of any shape, tokens, PEM certificates and keys, timestamps.
//!
//! Input: the plugin's output. Checks: no panic, and an error never repeats the token or
//! key the output carried (unless another field it may quote holds the same text).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Err(e) = kubewright_client::fuzzing::exec_credential(data) else {
        return;
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    // Only the secrets must stay out of the error: any other string of the output may be
    // quoted (the kind, the apiVersion, an expirationTimestamp that does not parse), and
    // may happen to contain a secret's text.
    let mut others = Vec::new();
    collect_strings(&v, "", &mut others);
    for field in ["token", "clientKeyData"] {
        let pointer = format!("/status/{field}");
        let Some(secret) = v.pointer(&pointer).and_then(|s| s.as_str()) else {
            continue;
        };
        if secret.len() < 12 || others.iter().any(|o| o.contains(secret)) || !e.contains(secret) {
            continue;
        }
        // The error holds the secret's text. It may come from elsewhere (the configured
        // apiVersion, the error's own words): then the same output with other secrets
        // gives errors that hold it too. A leak follows the secret.
        let with = |c: char| {
            let mut other = v.clone();
            if let Some(s) = other.pointer_mut(&pointer) {
                *s = serde_json::Value::String(c.to_string().repeat(secret.chars().count()));
            }
            let bytes = serde_json::to_vec(&other).unwrap_or_default();
            kubewright_client::fuzzing::exec_credential(&bytes).err()
        };
        let elsewhere = [with('x'), with('y')]
            .iter()
            .all(|e2| e2.as_ref().is_some_and(|e2| e2.contains(secret)));
        assert!(elsewhere, "the error shows the {field}: {e}");
    }
});

/// Every string in `v` (keys too) except the secrets themselves.
fn collect_strings(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => {
            if at != "/status/token" && at != "/status/clientKeyData" {
                out.push(s.clone());
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                collect_strings(x, &format!("{at}/{i}"), out);
            }
        }
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                out.push(k.clone());
                collect_strings(x, &format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
}
