//! Containers that run to completion: in a pod that does not restart always
//! (`restartPolicy: Never` or `OnFailure`), a container with a `command` or `args` runs
//! them through the exec handler (the built-in commands by default: `true`, `false`,
//! `echo`, `sh -c`, `sleep`, …), its output going to the container's log. When the handler
//! returns, the container terminates with that exit code (`Completed` or `Error`). With
//! `Never` the pod ends once all its containers did: `Succeeded` when every one exited 0,
//! else `Failed`. With `OnFailure` a failed container starts again after the kubelet's
//! back-off (10 s, doubling, at most 5 min; `CrashLoopBackOff` meanwhile), its
//! `restartCount` and `lastState` recorded. So Jobs finish on their own.
//!
//! Other containers (and every container of a pod that restarts always) run until the pod
//! is deleted, as before.

use super::io::container_env;
use super::{ContainerRef, ExecSession, Kubelet, LogBuf, PodRef, SessionKind};
use crate::http::api::ApiServer;
use crate::registry::meta::{meta_str, now_time};
use crate::storage::Mutation;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncBufReadExt;

const PODS: &str = "/pods";
const BACKOFF_SECS: u64 = 10;
const MAX_BACKOFF_SECS: u64 = 300;

/// Whether `c` of `pod` runs to completion (see the module).
pub(super) fn runs_to_completion(pod: &Value, c: &Value) -> bool {
    let policy = pod
        .pointer("/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Always");
    policy != "Always" && (c.get("command").is_some() || c.get("args").is_some())
}

/// Starts the containers of a just started pod that run to completion.
pub(super) fn start(k: &Kubelet, srv: &Arc<ApiServer>, pod: &Value) {
    for c in pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| runs_to_completion(pod, c))
    {
        let (k, srv, pod, c) = (k.clone(), srv.clone(), pod.clone(), c.clone());
        tokio::spawn(async move { run(k, srv, pod, c).await });
    }
}

fn strings(c: &Value, key: &str) -> Vec<String> {
    c.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// Feeds what is written to the returned writer into `buf`, a line at a time.
fn log_writer(buf: Option<Arc<LogBuf>>) -> super::Output {
    let (w, r) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(r).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(b) = &buf {
                b.push(line);
            }
        }
    });
    Box::new(w)
}

async fn run(k: Kubelet, srv: Arc<ApiServer>, pod: Value, c: Value) {
    let ns = meta_str(&pod, "namespace").unwrap_or("").to_string();
    let name = meta_str(&pod, "name").unwrap_or("").to_string();
    let uid = meta_str(&pod, "uid").unwrap_or("").to_string();
    let container = c
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let on_failure =
        pod.pointer("/spec/restartPolicy").and_then(Value::as_str) == Some("OnFailure");
    let mut command = strings(&c, "command");
    command.extend(strings(&c, "args"));
    let cref = ContainerRef {
        pod: PodRef {
            namespace: ns.clone(),
            name: name.clone(),
            uid: uid.clone(),
        },
        container: container.clone(),
        image: c
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    };
    let mut restarts: u32 = 0;
    loop {
        let started = now_time();
        let buf = k.log_buf(&uid, &container);
        let (_resize_tx, resize) = tokio::sync::mpsc::channel(1);
        let session = ExecSession {
            kind: SessionKind::Exec,
            container: cref.clone(),
            command: command.clone(),
            tty: false,
            env: container_env(&name, &c),
            stdin: None,
            stdout: Some(log_writer(buf.clone())),
            stderr: Some(log_writer(buf)),
            resize,
        };
        let code = k.exec.handle(session).await;
        let restart = on_failure && code != 0;
        let state = json!({"terminated": {"exitCode": code,
            "reason": if code == 0 { "Completed" } else { "Error" },
            "startedAt": started, "finishedAt": now_time()}});
        if !record(&srv, &ns, &name, &uid, &container, state, restart) {
            return;
        }
        if !restart {
            return;
        }
        let delay = (BACKOFF_SECS << restarts.min(10)).min(MAX_BACKOFF_SECS);
        restarts += 1;
        tokio::time::sleep(Duration::from_secs(delay)).await;
        let running = json!({"running": {"startedAt": now_time()}});
        if !record(&srv, &ns, &name, &uid, &container, running, false) {
            return;
        }
    }
}

/// Records a container's new state in its pod's status (and the pod's phase and
/// conditions once every container has terminated); false when the pod is gone or going.
fn record(
    srv: &ApiServer,
    ns: &str,
    name: &str,
    uid: &str,
    container: &str,
    state: Value,
    restart: bool,
) -> bool {
    let r = srv.storage.mutate::<()>(PODS, ns, name, |cur, _| {
        let Some(cur) = cur else {
            return Err(());
        };
        if meta_str(cur, "uid") != Some(uid) || cur.pointer("/metadata/deletionTimestamp").is_some()
        {
            return Err(());
        }
        let mut next = (**cur).clone();
        let Some(statuses) = next
            .pointer_mut("/status/containerStatuses")
            .and_then(Value::as_array_mut)
        else {
            return Err(());
        };
        let Some(s) = statuses
            .iter_mut()
            .find(|s| s.get("name").and_then(Value::as_str) == Some(container))
        else {
            return Err(());
        };
        let running = state.get("running").is_some();
        if restart {
            // Failed: back off before starting again.
            s["lastState"] = state;
            s["state"] = json!({"waiting": {"reason": "CrashLoopBackOff",
                "message": format!("back-off restarting failed container {container}")}});
            s["restartCount"] = json!(s["restartCount"].as_i64().unwrap_or(0) + 1);
        } else {
            s["state"] = state;
        }
        s["ready"] = json!(running);
        s["started"] = json!(running);
        let all_ready = statuses.iter().all(|s| s["ready"] == true);
        let ended: Option<bool> = statuses
            .iter()
            .map(|s| {
                s.pointer("/state/terminated/exitCode")
                    .and_then(Value::as_i64)
                    .map(|c| c == 0)
            })
            .collect::<Option<Vec<bool>>>()
            .map(|all| all.iter().all(|ok| *ok));
        let t = now_time();
        if let Some(ok) = ended {
            next["status"]["phase"] = json!(if ok { "Succeeded" } else { "Failed" });
        }
        if let Some(conds) = next
            .pointer_mut("/status/conditions")
            .and_then(Value::as_array_mut)
        {
            let (status, reason) = match (all_ready, ended.is_some()) {
                (true, _) => ("True", None),
                (false, true) => ("False", Some("PodCompleted")),
                (false, false) => ("False", Some("ContainersNotReady")),
            };
            for c in conds
                .iter_mut()
                .filter(|c| c["type"] == "Ready" || c["type"] == "ContainersReady")
            {
                if c["status"] != status {
                    c["status"] = json!(status);
                    c["lastTransitionTime"] = json!(t);
                }
                match reason {
                    Some(r) => c["reason"] = json!(r),
                    None => {
                        if let Some(m) = c.as_object_mut() {
                            m.remove("reason");
                        }
                    }
                }
            }
        }
        Ok(Mutation::Put(next))
    });
    let ok = r.is_ok();
    if ok {
        srv.kick.notify_one();
    }
    ok
}
