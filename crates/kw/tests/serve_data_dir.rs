//! `kw serve --data-dir` survives a crash: a write storm through HTTP, SIGKILL in the
//! middle of it, a restart on the same directory. Every write the clients saw
//! acknowledged (2xx) is there, no acknowledged delete came back, and resourceVersions
//! continue upwards.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

const TOKEN: &str = "kw-crash-test";
const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// A `kw serve` child process; killed (SIGKILL) when dropped.
struct Serve {
    child: Child,
    addr: String,
}

impl Serve {
    fn start(data: &Path, kubeconfig: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kw"))
            .arg("serve")
            .args(["--port", "0", "--insecure", "--token", TOKEN])
            .arg("--data-dir")
            .arg(data)
            .arg("--kubeconfig-out")
            .arg(kubeconfig)
            .env("KW_LOG", "error")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("kw serve exited before listening")
                .unwrap();
            if let Some(url) = line.strip_prefix("kubewright API server listening on ") {
                break url.to_string();
            }
        };
        // Keep reading so the child never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self {
            child,
            addr: url.trim_start_matches("http://").to_string(),
        }
    }

    /// SIGKILL, and wait until the process is gone.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One HTTP/1.1 request on its own connection: the status and the JSON body (Null when
/// the body is incomplete or not JSON).
fn request(addr: &str, method: &str, path: &str, body: Option<&Value>) -> io::Result<(u16, Value)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp)?;
    let end = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "no response head"))?;
    let head = String::from_utf8_lossy(&resp[..end]).to_ascii_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no status"))?;
    let mut body = resp[end + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok());
        match size {
            Some(n) if n > 0 && b.len() >= eol + 2 + n => {
                out.extend_from_slice(&b[eol + 2..eol + 2 + n]);
                b = &b[(eol + 4 + n).min(b.len())..];
            }
            _ => break,
        }
    }
    out
}

fn rv(obj: &Value) -> Option<u64> {
    obj["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

/// What a storm client learned about one of its writes.
enum Op {
    /// 201: created with this data index at this revision.
    Created { name: String, i: u64, rv: u64 },
    /// 200: deleted.
    Deleted { name: String },
    /// The delete was sent but its answer never came (the crash): either outcome is fine.
    DeleteUnknown { name: String },
    /// A complete answer that is not a success (never expected).
    Unexpected { what: String },
}

/// Creates (and every third operation deletes) configmaps until its connection fails.
fn storm_client(addr: String, prefix: String, stop: Arc<AtomicBool>, tx: mpsc::Sender<Op>) {
    let mut mine = std::collections::VecDeque::new();
    for i in 0u64.. {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if i % 3 == 2
            && let Some(name) = mine.pop_front()
        {
            let op = match request(&addr, "DELETE", &format!("{CMS}/{name}"), None) {
                Ok((200, _)) => Op::Deleted { name },
                Ok((code, body)) => Op::Unexpected {
                    what: format!("DELETE {name}: {code} {body}"),
                },
                Err(_) => {
                    let _ = tx.send(Op::DeleteUnknown { name });
                    return;
                }
            };
            tx.send(op).unwrap();
            continue;
        }
        let name = format!("{prefix}-{i}");
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"i": i.to_string(), "text": "ünïcødé ✓ 日本語"}});
        match request(&addr, "POST", CMS, Some(&obj)) {
            Ok((201, body)) => match rv(&body) {
                Some(rv) => {
                    mine.push_back(name.clone());
                    tx.send(Op::Created { name, i, rv }).unwrap();
                }
                // The answer was cut off by the crash: not seen as acknowledged.
                None => return,
            },
            Ok((code, body)) => tx
                .send(Op::Unexpected {
                    what: format!("POST {name}: {code} {body}"),
                })
                .unwrap(),
            Err(_) => return,
        }
    }
}

/// Four clients write until `creates` creates were acknowledged; then SIGKILL, with the
/// clients still writing. Returns what the clients learned and how long it took.
fn storm_until_killed(server: &mut Serve, round: usize, creates: usize) -> (Vec<Op>, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let clients: Vec<_> = (0..4)
        .map(|t| {
            let (addr, stop, tx) = (server.addr.clone(), stop.clone(), tx.clone());
            let prefix = format!("storm-{round}-{t}");
            std::thread::spawn(move || storm_client(addr, prefix, stop, tx))
        })
        .collect();
    drop(tx);
    let started = Instant::now();
    let mut ops = Vec::new();
    let mut acked = 0;
    while acked < creates {
        let op = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the storm stalled");
        acked += usize::from(matches!(op, Op::Created { .. }));
        ops.push(op);
    }
    server.kill();
    let took = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    ops.extend(rx.try_iter());
    (ops, took)
}

#[test]
fn acknowledged_writes_survive_sigkill_mid_storm() {
    let dir = tempfile_dir();
    let data = dir.join("data");
    let kubeconfig = dir.join("kubeconfig");
    let mut server = Serve::start(&data, &kubeconfig);
    // Everything acknowledged so far: name -> (data index, revision); acknowledged
    // deletes; deletes whose answer the crash swallowed.
    let mut created: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut deleted = BTreeSet::new();
    let mut unknown = BTreeSet::new();
    let mut last_rv = 0;
    for round in 0..3 {
        let (ops, storm) = storm_until_killed(&mut server, round, 200);
        let mut per_client: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        let (mut creates, mut deletes) = (0, 0);
        for op in ops {
            match op {
                Op::Created { name, i, rv } => {
                    let client = name.rsplit_once('-').unwrap().0.to_string();
                    per_client.entry(client).or_default().push(rv);
                    created.insert(name, (i, rv));
                    creates += 1;
                }
                Op::Deleted { name } => {
                    deleted.insert(name);
                    deletes += 1;
                }
                Op::DeleteUnknown { name } => {
                    unknown.insert(name);
                }
                Op::Unexpected { what } => panic!("unexpected answer: {what}"),
            }
        }
        for rvs in per_client.values() {
            // Increasing within a client, and above everything seen before the restart.
            assert!(
                rvs[0] > last_rv,
                "revision went back: {} <= {last_rv}",
                rvs[0]
            );
            assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
        }
        let max_acked = created.values().map(|(_, rv)| *rv).max().unwrap();

        // Restart on the same directory.
        let restarted = Instant::now();
        server = Serve::start(&data, &kubeconfig);
        let restart = restarted.elapsed();
        let (code, list) = request(&server.addr, "GET", CMS, None).unwrap();
        assert_eq!(code, 200, "{list}");
        let stored: BTreeMap<&str, &Value> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["metadata"]["name"].as_str().unwrap(), o))
            .collect();
        let mut missing = Vec::new();
        for (name, (i, rv)) in &created {
            if deleted.contains(name) {
                assert!(
                    !stored.contains_key(name.as_str()),
                    "acknowledged delete of {name} undone"
                );
            } else if !unknown.contains(name) {
                match stored.get(name.as_str()) {
                    Some(o) => {
                        assert_eq!(o["data"]["i"], i.to_string());
                        assert_eq!(o["data"]["text"], "ünïcødé ✓ 日本語");
                        assert_eq!(self::rv(o), Some(*rv));
                    }
                    None => missing.push(name.clone()),
                }
            }
        }
        assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");
        let unacked_present = stored
            .keys()
            .filter(|n| n.starts_with("storm-") && !created.contains_key(**n))
            .count();
        let list_rv = rv(&list).unwrap();
        assert!(
            list_rv >= max_acked,
            "revision went back: {list_rv} < {max_acked}"
        );
        last_rv = list_rv;
        eprintln!(
            "round {round}: {creates} creates and {deletes} deletes acknowledged in {storm:?} \
             before SIGKILL; restart took {restart:?}; all {} acknowledged objects present \
             ({unacked_present} unacknowledged in-flight creates committed too); max \
             acknowledged RV {max_acked}, RV after restart {list_rv}",
            created.len() - deleted.len() - unknown.len(),
        );
    }
    let (code, after) = request(
        &server.addr,
        "POST",
        CMS,
        Some(&json!({"metadata": {"name": "after-restart"}})),
    )
    .unwrap();
    assert_eq!(code, 201, "{after}");
    assert!(rv(&after).unwrap() > last_rv);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory under the system temp dir (kw has no tempfile dependency).
fn tempfile_dir() -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("kw-crash-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
