//! The layers of `src/` import downwards only: a module may use `crate::<layer>` paths of
//! its own layer and of layers below it, never of one above (docs/ARCHITECTURE.md,
//! "Layers"). Test code (`mod tests`, `tests.rs`, `*_tests.rs`) may use anything.

use std::path::Path;

/// Bottom to top; modules on one line are peers and may use each other.
const LAYERS: &[&[&str]] = &[
    &["private_files"],
    &["storage"],
    &["error"],
    &["protobuf"],
    &["openapi"],
    &["registry"],
    &["crd"],
    &["auth"],
    // The server starts the controllers; the controllers write through its verbs. The
    // simulated kubelet is started by the server, serves pod I/O for it and writes pods
    // through the store like a controller.
    &["http", "controllers", "kubelet"],
    &["fuzzing"],
];

/// Upward uses that stay, each with its reason (a file, the path it uses).
const ALLOWED: &[(&str, &str, &str)] = &[(
    "registry.rs",
    "crd::CrdSchema",
    "a custom resource's ResourceDef carries its CRD schema, which the crd layer builds",
)];

fn rank(layer: &str) -> Option<usize> {
    LAYERS.iter().position(|tier| tier.contains(&layer))
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The production code of a file: comments dropped, the trailing `mod tests` cut.
fn production_code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::a::b::C` path in `code`, as `a::b::C`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let tail = &rest[at + "crate::".len()..];
        let end = tail
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        out.push(tail[..end].trim_end_matches(':').to_string());
        rest = &tail[end..];
    }
    out
}

#[test]
fn lower_layers_do_not_import_higher_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = Vec::new();
    let mut used_allowances = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if rel == "lib.rs" || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let layer = rel.split('/').next().unwrap_or("").trim_end_matches(".rs");
        let Some(own) = rank(layer) else {
            violations.push(format!(
                "{rel}: module `{layer}` is in no layer (add it to LAYERS)"
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("a source file");
        for path in crate_paths(&production_code(&text)) {
            let target = path.split("::").next().unwrap_or("");
            let Some(theirs) = rank(target) else {
                continue; // a re-export of lib.rs, e.g. `crate::Limits`
            };
            if theirs <= own {
                continue;
            }
            if ALLOWED.iter().any(|(f, p, _)| *f == rel && *p == path) {
                used_allowances.push((rel.clone(), path));
                continue;
            }
            violations.push(format!(
                "{rel} ({layer}) uses crate::{path} (a higher layer)"
            ));
        }
    }
    for (f, p, why) in ALLOWED {
        assert!(
            used_allowances.iter().any(|(uf, up)| uf == f && up == p),
            "the allowance for {f} -> {p} ({why}) is no longer needed: remove it"
        );
    }
    violations.sort();
    violations.dedup();
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_scanner_sees_paths() {
    let code = production_code(
        "use crate::http::api::ApiServer;\n// crate::auth::x\nfn f() { crate::registry::meta::now_time(); }\n#[cfg(test)]\nmod tests { use crate::http::Req; }",
    );
    assert_eq!(
        crate_paths(&code),
        ["http::api::ApiServer", "registry::meta::now_time"]
    );
}
