//! `kw-bench` with its default variant list, end to end on a small load: every variant
//! that a mode can run syncs, counts every event and ends with the exact final state; the
//! ones a mode cannot run are reported, not waited for. (The benchmark brings its own
//! embedded API server; it does not use `KUBEWRIGHT_TEST_KUBECONFIG`.)

use serde_json::Value;
use std::process::Command;

fn run(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kw-bench"))
        .args(["--pods", "40", "--events", "200", "--quiet", "--json"])
        .args(args)
        .output()
        .expect("kw-bench runs");
    assert!(
        out.status.success(),
        "kw-bench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

fn variants(report: &Value, mode: &str) -> Vec<String> {
    report["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["mode"] == mode)
        .map(|r| {
            assert_eq!(r["result"]["verified"], true, "{r}");
            assert_eq!(r["result"]["sync"]["synced_objects"], 40, "{r}");
            r["variant"].as_str().expect("variant name").to_string()
        })
        .collect()
}

#[test]
fn the_default_replay_run_completes_and_names_what_it_leaves_out() {
    let report = run(&[]);
    let ran = variants(&report, "Replay");
    assert_eq!(ran.len(), 8, "{ran:?}");
    assert!(ran.iter().any(|v| v == "KubewrightLean") && ran.iter().any(|v| v == "KubeRsStrip"));
    let not_run = report["not_run"].as_array().expect("not_run");
    assert_eq!(not_run.len(), 1, "{not_run:?}");
    assert_eq!(not_run[0]["variant"], "KubeRsStreaming");
    assert!(
        not_run[0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("streaming lists")
    );
}

#[test]
fn live_mode_runs_streaming_lists_and_metadata_caches() {
    let report = run(&[
        "--mode",
        "live",
        "--libs",
        "kubewright,kube-rs+streaming,kubewright+metadata,kube-rs+metadata",
    ]);
    let ran = variants(&report, "Live");
    assert_eq!(ran.len(), 4, "{ran:?}");
    assert!(report["not_run"].as_array().expect("not_run").is_empty());
}
