//! `kw serve` as a child process and kubectl against it, shared by the serve tests.

#![allow(dead_code, clippy::unwrap_used)] // test code: each file uses part of it

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub struct Serve {
    pub child: Child,
    pub kubeconfig: PathBuf,
    pub stdout: Vec<String>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `kw serve` with `args`, reads its banner up to the `try:` hint.
pub fn serve(dir: &Path, args: &[&str]) -> Serve {
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kw"))
        .args(["serve", "--port", "0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .args(args)
        .env("KW_LOG", "error")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stdout = Vec::new();
    loop {
        let line = lines.next().expect("kw serve exited early").unwrap();
        let done = line.starts_with("try:");
        stdout.push(line);
        if done {
            break;
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    Serve {
        child,
        kubeconfig,
        stdout,
    }
}

pub fn have_kubectl() -> bool {
    let ok = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipping: kubectl is not installed");
    }
    ok
}

pub fn kubectl(s: &Serve, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
