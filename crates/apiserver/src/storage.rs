//! Revisioned in-memory storage with an etcd-like global revision counter, a bounded
//! event history for watch resumption, and point-in-time snapshots for paginated lists.
//!
//! With a data directory, every change is first appended to a write-ahead log
//! (`objects.wal`) and synced; only then is it applied in memory, sent to watchers and
//! acknowledged. A change that cannot be made durable fails with [`StorageError`] and
//! changes nothing. Each record is framed (magic, length, CRC-32), so recovery finds every
//! intact record whatever a crash or a full disk left behind. Opening compacts the log
//! into a snapshot whose header carries the revision counter.
//!
//! Revisions never go backwards, even when the end of the log is lost after it was
//! acknowledged (a disk or file system that drops written blocks): they are reserved in
//! blocks of [`RV_BLOCK`] in a file of their own (`revision.reserved`, replaced atomically)
//! before any of them is handed out, and a restart continues after the reservation.
//!
//! Damage in the middle of the log (intact records after a damaged one) stops [`Storage::open`]
//! with [`CorruptLog`], as etcd refuses to start on a corrupt WAL: skipping a record could
//! bring a deleted object back. Only a torn end, what a crash leaves, is cut silently.
//! [`OpenOptions::salvage`] loads every intact record instead, for an operator who has
//! decided that is better than restoring a backup.
//!
//! Reads never wait for the disk: a write runs its closure and syncs the log holding
//! only the writers' lock, and takes the state lock just to apply the change.

pub mod autoscaling;
pub mod events;

use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;

/// Type of a stored change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted.
    Deleted,
}

/// One committed change.
#[derive(Clone, Debug)]
pub struct Event {
    /// Revision of the change.
    pub rv: u64,
    /// Storage key of the resource (`group/plural`).
    pub resource: String,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for deletes: the last state stamped with the delete RV).
    pub object: Arc<Value>,
    /// The object before the change (none for creates).
    pub prev: Option<Arc<Value>>,
    /// The object as served JSON, rendered once for all watchers of one API version:
    /// (apiVersion, bytes).
    pub rendered: std::sync::OnceLock<(String, bytes::Bytes)>,
    /// The same as Kubernetes protobuf (`k8s\0` + runtime.Unknown), for protobuf watchers.
    pub rendered_pb: std::sync::OnceLock<(String, bytes::Bytes)>,
}

/// A resource kept under another resource's key in that resource's form, as
/// kube-apiserver's storage codec keeps it: `events.k8s.io` Events are core v1 Events in
/// storage, so each Event is one object whichever API wrote it, and each API sees (and
/// watches) all of them in its own form.
pub struct View {
    /// The resource whose key holds the objects.
    pub stored: &'static str,
    /// A stored object in the viewing resource's form.
    pub read: fn(&Value) -> Value,
    /// An object of the viewing resource in the stored form.
    pub write: fn(&Value) -> Value,
}

static VIEWS: [(&str, View); 2] = [
    (
        "events.k8s.io/events",
        View {
            stored: "/events",
            read: events::to_events_v1,
            write: events::to_core_v1,
        },
    ),
    // autoscaling/v1 HorizontalPodAutoscalers are autoscaling/v2 ones in storage.
    (
        HPA_V1_KEY,
        View {
            stored: "autoscaling/horizontalpodautoscalers",
            read: autoscaling::to_v1,
            write: autoscaling::to_v2,
        },
    ),
];

/// The key autoscaling/v1 HorizontalPodAutoscalers are read and written under (a view of
/// the v2 ones).
pub const HPA_V1_KEY: &str = "autoscaling/horizontalpodautoscalers@v1";

/// How `resource` is kept under another resource's key, if it is.
pub fn view(resource: &str) -> Option<&'static View> {
    VIEWS.iter().find(|(r, _)| *r == resource).map(|(_, v)| v)
}

/// The key that holds `resource`'s objects (and names its changes' events).
pub fn stored_key(resource: &str) -> &str {
    view(resource).map_or(resource, |v| v.stored)
}

impl View {
    fn read_all(&self, objs: Vec<Arc<Value>>) -> Vec<Arc<Value>> {
        objs.iter().map(|o| Arc::new((self.read)(o))).collect()
    }
}

/// Outcome of a read-modify-write closure.
pub enum Mutation {
    /// Store this object (create or update).
    Put(Value),
    /// Delete the object.
    Delete,
    /// Change nothing.
    Keep,
}

type Objects = BTreeMap<(String, String), Arc<Value>>;

/// What `mutate` returns: the stored object (None when deleted/absent) and the event.
pub type MutateResult = (Option<Arc<Value>>, Option<Arc<Event>>);

/// Buffered events, a live receiver, and the current revision.
pub type WatchStart = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>, u64);

/// A change that could not be made durable. Nothing was changed: memory, watchers and
/// the log are as they were before the write, so the server stays consistent.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Appending the record or syncing it to disk failed (e.g. the disk is full).
    #[error("storage: resourceVersion {rv} could not be persisted to {}: {source}", path.display())]
    Persist {
        /// The revision the write would have had.
        rv: u64,
        /// The log file.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: io::Error,
    },
    /// What an earlier failed append left in the log could not be cut off yet; the log
    /// takes no records until it can (so a damaged record never sits mid-log).
    #[error("storage: {} could not be repaired after a failed write: {source}", path.display())]
    Repair {
        /// The log file.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: io::Error,
    },
}

/// Background writers (controllers, bootstrap) that ignore failures and retry on their
/// next pass use `()` as their error type.
impl From<StorageError> for () {
    fn from(_: StorageError) -> Self {}
}

/// The log's file name in the data directory.
const LOG: &str = "objects.wal";
/// Where a compaction writes before it renames over [`LOG`].
const LOG_TMP: &str = "objects.wal.tmp";
/// The log of older versions (one JSON document per line), read once and compacted away.
const LEGACY_LOG: &str = "objects.jsonl";
/// The highest revision reserved so far (decimal), replaced atomically.
const RESERVED: &str = "revision.reserved";
/// Where a reservation is written before it is renamed over [`RESERVED`].
const RESERVED_TMP: &str = "revision.reserved.tmp";
/// Revisions reserved at a time: one small file write per this many changes, and a
/// restart skips at most this many revisions.
pub const RV_BLOCK: u64 = 1000;

/// How [`Storage::open_with_options`] treats a damaged log.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenOptions {
    /// Load every intact record of a log damaged in the middle, dropping the damaged
    /// ones (which may bring back objects whose deletion was lost), instead of refusing
    /// to start.
    pub salvage: bool,
}

/// The log is damaged in the middle: intact records follow a damaged one, so something
/// acknowledged was lost and what remains may not be a state the server ever had.
/// [`Storage::open`] fails with it (inside an [`io::Error`] of kind `InvalidData`).
#[derive(Debug, thiserror::Error)]
#[error(
    "{}: {damaged} damaged bytes inside the log (the first at byte {offset}), followed by intact \
     records, and {unreadable} unreadable records; refusing to start from a log that may have \
     lost acknowledged changes, a deletion among them (as etcd refuses a corrupt WAL). Restore \
     the data directory from a backup, or start once with salvage (kw serve \
     --salvage-corrupt-log) to load every intact record and drop the damaged ones",
    path.display()
)]
pub struct CorruptLog {
    /// The log file.
    pub path: PathBuf,
    /// Offset of the first damaged byte.
    pub offset: u64,
    /// Damaged bytes before the last intact record.
    pub damaged: u64,
    /// Intact (checksummed) records that are not records of the log.
    pub unreadable: u64,
}

/// Starts every record. 0xFF never occurs in UTF-8, so it never occurs in a JSON payload:
/// after damage the next record is found by scanning for it.
const MAGIC: [u8; 4] = [0xFF, b'k', b'w', 0x01];
/// Magic, payload length (u32 LE), CRC-32 of length and payload (u32 LE).
const HEADER: usize = 12;

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32 (IEEE, as zlib and Ethernet) over the concatenation of `parts`.
fn crc32(parts: &[&[u8]]) -> u32 {
    let mut c = !0u32;
    for part in parts {
        for &b in *part {
            c = CRC_TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
        }
    }
    !c
}

/// Appends one framed record to `out`.
fn frame_into(out: &mut Vec<u8>, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "record larger than 4 GiB"))?
        .to_le_bytes();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc32(&[&len, payload]).to_le_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// The payload of an intact record at the start of `b`.
fn record_at(b: &[u8]) -> Option<&[u8]> {
    let header = b.get(..HEADER)?;
    if header.get(..4)? != MAGIC {
        return None;
    }
    let len_bytes: [u8; 4] = header.get(4..8)?.try_into().ok()?;
    let crc = u32::from_le_bytes(header.get(8..12)?.try_into().ok()?);
    let len = usize::try_from(u32::from_le_bytes(len_bytes)).ok()?;
    let payload = b.get(HEADER..HEADER.checked_add(len)?)?;
    (crc32(&[&len_bytes, payload]) == crc).then_some(payload)
}

/// The intact records of a log, in order. Damaged or torn regions are skipped: the scan
/// resumes at the next intact record.
struct Records<'a> {
    buf: &'a [u8],
    pos: usize,
    /// End of the last intact record.
    good_end: usize,
    /// Bytes skipped as damaged (including a torn tail).
    skipped: usize,
    /// Where the first damaged region starts.
    first_damage: Option<usize>,
}

impl<'a> Records<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            pos: 0,
            good_end: 0,
            skipped: 0,
            first_damage: None,
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            let rest = self.buf.get(self.pos..).filter(|r| !r.is_empty())?;
            if let Some(payload) = record_at(rest) {
                self.pos += HEADER + payload.len();
                self.good_end = self.pos;
                return Some(payload);
            }
            let skip = rest
                .get(1..)
                .and_then(|r| r.windows(MAGIC.len()).position(|w| w == MAGIC))
                .map_or(rest.len(), |i| i + 1);
            self.first_damage.get_or_insert(self.pos);
            self.skipped += skip;
            self.pos += skip;
        }
    }
}

/// A change as logged.
#[derive(serde::Serialize)]
struct RecordOut<'a> {
    rv: u64,
    r: &'a str,
    ns: &'a str,
    n: &'a str,
    /// The object; none for a delete.
    o: Option<&'a Value>,
}

/// The first record of a compacted log: the complete state follows, and the revision
/// counter stands at `snapshot` (deletes leave no object to carry their revision).
#[derive(serde::Serialize)]
struct SnapshotOut {
    snapshot: u64,
}

/// Any record as read back (both kinds, and lines of the legacy log).
#[derive(serde::Deserialize)]
struct RecordIn {
    snapshot: Option<u64>,
    rv: Option<u64>,
    r: Option<String>,
    ns: Option<String>,
    n: Option<String>,
    o: Option<Value>,
}

impl RecordIn {
    fn is_change(&self) -> bool {
        self.rv.is_some() && self.r.is_some() && self.ns.is_some() && self.n.is_some()
    }
}

/// Applies one record read back from the log; false when it is not a record at all.
fn apply_record(inner: &mut Inner, rec: RecordIn) -> bool {
    if let Some(rv) = rec.snapshot {
        // A compacted log holds the complete state: whatever was read before it is older.
        inner.data.clear();
        inner.rv = inner.rv.max(rv);
        return true;
    }
    let (Some(rv), Some(r), Some(ns), Some(n)) = (rec.rv, rec.r, rec.ns, rec.n) else {
        return false;
    };
    let objs = inner.data.entry(r).or_default();
    match rec.o {
        Some(o) if !o.is_null() => {
            objs.insert((ns, n), Arc::new(o));
        }
        _ => {
            objs.remove(&(ns, n));
        }
    }
    inner.rv = inner.rv.max(rv);
    true
}

/// Loads every record of a log's bytes into `inner`: a torn end is left for the caller to
/// cut (the offset where it starts is returned), damage in the middle fails with
/// [`CorruptLog`] unless salvaging.
fn load_log(inner: &mut Inner, bytes: &[u8], path: &Path, options: OpenOptions) -> io::Result<u64> {
    let mut records = Records::new(bytes);
    let mut unreadable = 0usize;
    for payload in records.by_ref() {
        let rec = serde_json::from_slice::<RecordIn>(payload);
        if !rec.is_ok_and(|rec| apply_record(inner, rec)) {
            unreadable += 1;
        }
    }
    let tail = bytes.len() - records.good_end;
    if tail > 0 {
        tracing::warn!(
            "dropping a torn record ({tail} bytes) at the end of {}",
            path.display()
        );
    }
    let damaged = records.skipped.saturating_sub(tail);
    if damaged > 0 || unreadable > 0 {
        let corrupt = CorruptLog {
            path: path.to_path_buf(),
            offset: records.first_damage.unwrap_or(0) as u64,
            damaged: damaged as u64,
            unreadable: unreadable as u64,
        };
        if !options.salvage {
            return Err(io::Error::new(io::ErrorKind::InvalidData, corrupt));
        }
        tracing::warn!("salvaging: {corrupt}");
    }
    Ok(records.good_end as u64)
}

/// What a log recovers to: the keys of its objects (resource, namespace, name) and the
/// revision.
pub type Recovered = (Vec<(String, String, String)>, u64);

/// What recovery makes of a log's bytes, for the fuzz target, or why it refused.
pub(crate) fn recover_for_fuzzing(bytes: &[u8], salvage: bool) -> Result<Recovered, String> {
    let mut inner = Inner {
        rv: 1,
        data: HashMap::new(),
        history: VecDeque::new(),
        compacted: 1,
    };
    let good_end = load_log(&mut inner, bytes, Path::new(LOG), OpenOptions { salvage })
        .map_err(|e| e.to_string())?;
    assert!(good_end as usize <= bytes.len());
    let objects = inner
        .data
        .iter()
        .flat_map(|(r, objs)| {
            objs.keys()
                .map(move |(ns, n)| (r.clone(), ns.clone(), n.clone()))
        })
        .collect();
    Ok((objects, inner.rv))
}

/// Loads the legacy log (one JSON record per line); returns the lines it had to skip.
/// Bytes, not UTF-8 text: a line torn inside a multi-byte character is skipped like any
/// other, and a torn record followed by an intact one on the same line (the old writer
/// kept appending after a failed write) yields the intact one.
fn load_legacy(inner: &mut Inner, bytes: &[u8]) -> usize {
    let mut bad = 0;
    for line in bytes.split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let rec = std::iter::once(0)
            .chain(
                line.iter()
                    .enumerate()
                    .skip(1)
                    .filter(|(_, b)| **b == b'{')
                    .map(|(i, _)| i),
            )
            .filter_map(|i| serde_json::from_slice::<RecordIn>(line.get(i..)?).ok())
            .find(RecordIn::is_change);
        if !rec.is_some_and(|rec| apply_record(inner, rec)) {
            bad += 1;
        }
    }
    bad
}

/// The log file as the WAL uses it (tests substitute one that fails).
trait LogFile: Send {
    /// Writes all of `buf` at the end of the file.
    fn append(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes the written bytes durable.
    fn sync(&mut self) -> io::Result<()>;
    /// Cuts the file to `len` bytes.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
}

impl LogFile for std::fs::File {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        io::Write::write_all(self, buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.sync_data()
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.set_len(len)
    }
}

/// How many more bytes the data directory may take (`None`: no limit). Tests lower it to
/// simulate a full disk; production never sets it.
#[derive(Clone, Default)]
struct Space(Arc<Mutex<Option<u64>>>);

impl Space {
    fn set(&self, free: Option<u64>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = free;
    }

    /// Writes `buf`; past the limit, writes what fits and fails like a full disk.
    fn write(&self, file: &mut dyn LogFile, buf: &[u8]) -> io::Result<()> {
        let fits = match self.0.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            None => buf.len(),
            Some(free) => {
                let n = usize::try_from(*free).unwrap_or(usize::MAX).min(buf.len());
                *free -= n as u64;
                n
            }
        };
        file.append(buf.get(..fits).unwrap_or(buf))?;
        if fits < buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "no space left on device (simulated)",
            ));
        }
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// The file's contents, or None when it does not exist.
fn read_if_exists(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("reading {}: {e}", path.display()),
        )),
    }
}

fn object_rv(o: &Value) -> u64 {
    o.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// Writes the state as a new log (snapshot header, then one record per object), syncs it
/// and renames it over the old log. On failure the old log is untouched.
fn compact(dir: &Path, inner: &Inner, space: &Space) -> io::Result<()> {
    let tmp = dir.join(LOG_TMP);
    let write = || -> io::Result<()> {
        // Owner-only, as etcd's files: the log holds Secrets in plain text.
        let mut file = crate::private_files::private_file_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        let mut buf = Vec::with_capacity(1 << 20);
        frame_into(
            &mut buf,
            &serde_json::to_vec(&SnapshotOut { snapshot: inner.rv })?,
        )?;
        for (resource, objs) in &inner.data {
            for ((ns, n), o) in objs {
                let rec = RecordOut {
                    rv: object_rv(o),
                    r: resource,
                    ns,
                    n,
                    o: Some(o),
                };
                frame_into(&mut buf, &serde_json::to_vec(&rec)?)?;
                if buf.len() >= 1 << 20 {
                    space.write(&mut file, &buf)?;
                    buf.clear();
                }
            }
        }
        space.write(&mut file, &buf)?;
        file.sync_all()?;
        std::fs::rename(&tmp, dir.join(LOG))
    };
    let result = write();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The write-ahead log: every change is appended as a framed record and synced before it
/// is applied in memory and acknowledged.
struct Wal {
    path: PathBuf,
    file: Box<dyn LogFile>,
    space: Space,
    /// Length of the log up to the end of its last durable record.
    len: u64,
    /// A failed append may have left bytes after `len`: they are cut before the next one.
    dirty: bool,
    /// A directory whose entries (a renamed or created log) still need an fsync.
    unsynced_dir: Option<PathBuf>,
    /// False after a failed write until a write succeeds again (reported by /readyz).
    healthy: bool,
}

impl Wal {
    fn new(path: PathBuf, file: Box<dyn LogFile>, len: u64, space: Space) -> Self {
        Self {
            path,
            file,
            space,
            len,
            dirty: false,
            unsynced_dir: None,
            healthy: true,
        }
    }

    fn persist_error(&self, rv: u64, source: io::Error) -> StorageError {
        StorageError::Persist {
            rv,
            path: self.path.clone(),
            source,
        }
    }

    /// Appends `ev` durably; on failure the log is (or will be, before the next append)
    /// cut back to its last durable record.
    fn append(&mut self, ev: &Event) -> Result<(), StorageError> {
        let rec = RecordOut {
            rv: ev.rv,
            r: &ev.resource,
            ns: &ev.namespace,
            n: &ev.name,
            o: (ev.kind != EventType::Deleted).then_some(&*ev.object),
        };
        let mut frame = Vec::new();
        serde_json::to_vec(&rec)
            .map_err(io::Error::from)
            .and_then(|payload| frame_into(&mut frame, &payload))
            .map_err(|e| self.persist_error(ev.rv, e))?;
        self.repair()?;
        if let Some(dir) = &self.unsynced_dir {
            sync_dir(dir).map_err(|e| self.persist_error(ev.rv, e))?;
            self.unsynced_dir = None;
        }
        let res = self
            .space
            .write(&mut *self.file, &frame)
            .and_then(|()| self.file.sync());
        match res {
            Ok(()) => {
                self.len += frame.len() as u64;
                self.healthy = true;
                Ok(())
            }
            Err(e) => {
                tracing::error!("failed to persist revision {}: {e}", ev.rv);
                self.healthy = false;
                self.dirty = true;
                if let Err(repair) = self.repair() {
                    tracing::error!("{repair}; retrying before the next write");
                }
                Err(self.persist_error(ev.rv, e))
            }
        }
    }

    /// Cuts whatever a failed append left after the last durable record.
    fn repair(&mut self) -> Result<(), StorageError> {
        if !self.dirty {
            return Ok(());
        }
        let len = self.len;
        if let Err(source) = self.file.truncate(len).and_then(|()| self.file.sync()) {
            self.healthy = false;
            return Err(StorageError::Repair {
                path: self.path.clone(),
                source,
            });
        }
        self.dirty = false;
        Ok(())
    }
}

/// The revisions reserved on disk ahead of use.
struct Reservation {
    dir: PathBuf,
    /// Revisions up to this one may be handed out.
    upto: u64,
    space: Space,
}

impl Reservation {
    /// Makes sure `rv` is reserved, writing the next block's reservation when it is not.
    fn cover(&mut self, rv: u64) -> Result<(), StorageError> {
        if rv <= self.upto {
            return Ok(());
        }
        let upto = rv.saturating_add(RV_BLOCK - 1);
        write_reserved(&self.dir, upto, &self.space).map_err(|source| StorageError::Persist {
            rv,
            path: self.dir.join(RESERVED),
            source,
        })?;
        self.upto = upto;
        Ok(())
    }
}

/// Replaces the reservation file with `upto`, durably (a crash leaves the old or the new).
fn write_reserved(dir: &Path, upto: u64, space: &Space) -> io::Result<()> {
    let tmp = dir.join(RESERVED_TMP);
    let write = || -> io::Result<()> {
        let mut file = crate::private_files::private_file_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        space.write(&mut file, format!("{upto}\n").as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, dir.join(RESERVED))?;
        sync_dir(dir)
    };
    let result = write();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The reserved revision of a data directory (0 when it has none yet).
fn read_reserved(dir: &Path) -> io::Result<u64> {
    let path = dir.join(RESERVED);
    let Some(bytes) = read_if_exists(&path)? else {
        return Ok(0);
    };
    std::str::from_utf8(&bytes)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: not a revision ({} bytes); it holds the highest resourceVersion ever \
                     handed out. Restore it from a backup, or remove it only if {LOG} is \
                     known to hold every acknowledged change",
                    path.display(),
                    bytes.len()
                ),
            )
        })
}

/// Runs blocking file I/O without stalling the async runtime: on a multi-threaded
/// runtime the worker's other tasks move to another thread meanwhile. (A current-thread
/// runtime has no other thread to give them to.)
fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// What only writers touch: the log and the reservation. Held while a change is decided
/// and made durable, so writes are serialized, but never by readers.
#[derive(Default)]
struct Writer {
    wal: Option<Wal>,
    reserved: Option<Reservation>,
}

struct Inner {
    rv: u64,
    data: HashMap<String, Objects>,
    history: VecDeque<Arc<Event>>,
    /// The oldest revision a watch may start from (events after it are in history).
    compacted: u64,
}

/// The storage shared by every handler.
pub struct Storage {
    /// The state: objects, history, revision. Held only in memory, never across I/O.
    inner: Mutex<Inner>,
    /// Serializes writes and owns the files (taken before `inner`, never after it).
    writer: Mutex<Writer>,
    /// Whether writes reach the disk (a data directory is open).
    durable: bool,
    /// False after a write could not be persisted, until one is again (for /readyz).
    healthy: std::sync::atomic::AtomicBool,
    history_cap: usize,
    tx: broadcast::Sender<Arc<Event>>,
    /// Simulated free space of the data directory (tests of a full disk).
    space: Space,
}

/// A requested revision is older than the history window.
#[derive(Debug, Clone, Copy)]
pub struct TooOld {
    /// The oldest revision still available.
    pub oldest: u64,
    /// The current revision.
    pub current: u64,
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

impl Storage {
    /// A storage keeping `history_cap` events for watch resumption.
    pub fn new(history_cap: usize) -> Self {
        let (tx, _) = broadcast::channel(128 * 1024);
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                data: HashMap::new(),
                history: VecDeque::new(),
                compacted: 1,
            }),
            writer: Mutex::new(Writer::default()),
            durable: false,
            healthy: std::sync::atomic::AtomicBool::new(true),
            history_cap: history_cap.max(16),
            tx,
            space: Space::default(),
        }
    }

    /// A storage persisted in `dir` (created if missing). Every record of the log is
    /// loaded (a torn end, what a crash leaves, is cut), the revision counter continues
    /// after every revision ever reserved, and the log is compacted. When the compaction
    /// cannot be written (e.g. the disk is full) the existing log is used as it is.
    /// Watches cannot resume across a restart: older revisions get 410 Expired.
    ///
    /// A log damaged in the middle fails with [`CorruptLog`]; see
    /// [`Storage::open_with_options`] to salvage it.
    pub fn open(dir: &Path, history_cap: usize) -> io::Result<Self> {
        Self::open_with(dir, history_cap, Space::default(), OpenOptions::default())
    }

    /// [`Storage::open`] with a choice of what to do with a damaged log.
    pub fn open_with_options(
        dir: &Path,
        history_cap: usize,
        options: OpenOptions,
    ) -> io::Result<Self> {
        Self::open_with(dir, history_cap, Space::default(), options)
    }

    fn open_with(
        dir: &Path,
        history_cap: usize,
        space: Space,
        options: OpenOptions,
    ) -> io::Result<Self> {
        crate::private_files::create_private_dir(dir)?;
        let path = dir.join(LOG);
        let legacy = dir.join(LEGACY_LOG);
        // Left by a compaction that did not finish; the log itself is complete.
        match std::fs::remove_file(dir.join(LOG_TMP)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                tracing::warn!("could not remove {LOG_TMP} in {}: {e}", dir.display());
            }
            _ => {}
        }
        let mut storage = Self::new(history_cap);
        storage.space = space.clone();
        {
            let mut inner = storage.lock();
            let had_legacy = match read_if_exists(&legacy)? {
                Some(bytes) => {
                    let bad = load_legacy(&mut inner, &bytes);
                    if bad > 0 {
                        tracing::warn!("skipped {bad} damaged lines of {}", legacy.display());
                    }
                    true
                }
                None => false,
            };
            let (mut good_end, mut file_len) = (0u64, 0u64);
            if let Some(bytes) = read_if_exists(&path)? {
                good_end = load_log(&mut inner, &bytes, &path, options)?;
                file_len = bytes.len() as u64;
            }
            // Objects an older version kept under a view's own key move to the stored
            // resource (in its form), so the compaction below writes them there.
            for (resource, v) in &VIEWS {
                if let Some(objs) = inner.data.remove(*resource) {
                    let to = inner.data.entry(v.stored.to_string()).or_default();
                    for (key, obj) in objs {
                        to.entry(key).or_insert_with(|| Arc::new((v.write)(&obj)));
                    }
                }
            }
            // Whatever the log lost, no revision it may have handed out is handed out again.
            inner.rv = inner.rv.max(read_reserved(dir)?);
            inner.compacted = inner.rv;
            let wal = match compact(dir, &inner, &space) {
                Ok(()) => {
                    let file = std::fs::OpenOptions::new().append(true).open(&path)?;
                    let len = file.metadata()?.len();
                    let mut wal = Wal::new(path, Box::new(file), len, space.clone());
                    match sync_dir(dir) {
                        Ok(()) if had_legacy => {
                            // Its contents are in the new log, whose header supersedes it
                            // anyway should this removal not survive a crash.
                            if let Err(e) = std::fs::remove_file(&legacy) {
                                tracing::warn!("could not remove {}: {e}", legacy.display());
                            }
                        }
                        Ok(()) => {}
                        Err(e) => {
                            tracing::warn!("could not sync {}: {e}", dir.display());
                            wal.unsynced_dir = Some(dir.to_path_buf());
                        }
                    }
                    wal
                }
                Err(e) => {
                    tracing::warn!(
                        "could not compact {} ({e}); continuing with the log as it is",
                        path.display()
                    );
                    let file = crate::private_files::private_file_options()
                        .create(true)
                        .append(true)
                        .open(&path)?;
                    let mut wal = Wal::new(path, Box::new(file), good_end, space.clone());
                    // The file may be new: its directory entry must be durable too.
                    wal.unsynced_dir = Some(dir.to_path_buf());
                    if file_len > good_end {
                        // Cut the torn tail (this needs no space) so that new records
                        // follow the last intact one.
                        wal.dirty = true;
                        if let Err(e) = wal.repair() {
                            tracing::warn!("{e}; retrying before the next write");
                        }
                    }
                    wal
                }
            };
            storage
                .healthy
                .store(wal.healthy, std::sync::atomic::Ordering::SeqCst);
            let upto = inner.rv;
            let mut writer = storage.writer.lock().unwrap_or_else(|e| e.into_inner());
            writer.wal = Some(wal);
            writer.reserved = Some(Reservation {
                dir: dir.to_path_buf(),
                upto,
                space,
            });
        }
        storage.durable = true;
        Ok(storage)
    }

    /// Test hook simulating a full disk: the data directory takes at most `bytes` more
    /// bytes (`None`: no limit). A write that does not fit fails like ENOSPC after writing
    /// what fits.
    #[doc(hidden)]
    pub fn set_free_space(&self, bytes: Option<u64>) {
        self.space.set(bytes);
    }

    /// False when a write could not be persisted.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn writer(&self) -> MutexGuard<'_, Writer> {
        // A failed write leaves the log as it was (or marked for repair): recover.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated (every mutation
        // is a single insert/remove), so recover from poisoning.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current revision.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Reads one object.
    pub fn get(&self, resource: &str, ns: &str, name: &str) -> Option<Arc<Value>> {
        if let Some(v) = view(resource) {
            return self.get(v.stored, ns, name).map(|o| Arc::new((v.read)(&o)));
        }
        self.lock()
            .data
            .get(resource)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Lists objects (optionally in one namespace) at the current revision, in key order.
    pub fn list(&self, resource: &str, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        if let Some(v) = view(resource) {
            let (objs, rv) = self.list(v.stored, ns);
            return (v.read_all(objs), rv);
        }
        let inner = self.lock();
        (Self::collect(inner.data.get(resource), ns), inner.rv)
    }

    fn collect(objs: Option<&Objects>, ns: Option<&str>) -> Vec<Arc<Value>> {
        let Some(objs) = objs else { return vec![] };
        match ns {
            Some(ns) => objs
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
            None => objs.values().cloned().collect(),
        }
    }

    /// Lists objects as they were at revision `rv`, reconstructed from history.
    pub fn list_at(
        &self,
        resource: &str,
        ns: Option<&str>,
        rv: u64,
        after: Option<&str>,
    ) -> Result<Vec<Arc<Value>>, TooOld> {
        if let Some(v) = view(resource) {
            return Ok(v.read_all(self.list_at(v.stored, ns, rv, after)?));
        }
        let inner = self.lock();
        if rv < inner.compacted {
            return Err(TooOld {
                oldest: inner.compacted,
                current: inner.rv,
            });
        }
        // Undo the changes made after `rv`: walking newest to oldest, the last write for a
        // key is the oldest change's previous state, i.e. the state at `rv`.
        let mut undo: BTreeMap<(String, String), Option<Arc<Value>>> = BTreeMap::new();
        for ev in inner.history.iter().rev() {
            if ev.rv <= rv {
                break;
            }
            if ev.resource == resource {
                undo.insert((ev.namespace.clone(), ev.name.clone()), ev.prev.clone());
            }
        }
        let lower: Bound<(String, String)> = match (after.and_then(|a| a.split_once('/')), ns) {
            (Some((n, name)), _) => Bound::Excluded((n.to_string(), name.to_string())),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let empty = Objects::new();
        let objs = inner.data.get(resource).unwrap_or(&empty);
        let mut cur = objs.range((lower.clone(), Bound::Unbounded)).peekable();
        let mut und = undo.range((lower, Bound::Unbounded)).peekable();
        let mut out = Vec::new();
        loop {
            let next_cur = cur.peek().map(|(k, _)| *k);
            let next_und = und.peek().map(|(k, _)| *k);
            let (key, value) = match (next_cur, next_und) {
                (None, None) => break,
                (Some(c), Some(u)) if u <= c => {
                    if u == c {
                        cur.next();
                    }
                    let (k, v) = und
                        .next()
                        .map(|(k, v)| (k, v.clone()))
                        .unwrap_or_else(|| (u, None));
                    (k, v)
                }
                (Some(_), _) => match cur.next() {
                    Some((k, v)) => (k, Some(v.clone())),
                    None => break,
                },
                (None, Some(_)) => match und.next() {
                    Some((k, v)) => (k, v.clone()),
                    None => break,
                },
            };
            if let Some(ns) = ns
                && key.0 != ns
            {
                break;
            }
            if let Some(v) = value {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// Atomically reads an object, lets `f` decide, and commits the result. Returns the
    /// stored object (None when deleted or absent) and the event when anything was written.
    ///
    /// With a data directory the change is durable before it becomes visible: when it
    /// cannot be persisted, the call fails with the [`StorageError`] (converted into `E`)
    /// and nothing changes, in memory or for watchers.
    pub fn mutate<E: From<StorageError>>(
        &self,
        resource: &str,
        ns: &str,
        name: &str,
        f: impl FnOnce(Option<&Arc<Value>>, u64) -> Result<Mutation, E>,
    ) -> Result<MutateResult, E> {
        if let Some(v) = view(resource) {
            let (stored, ev) = self.mutate_key::<E>(v.stored, ns, name, |cur, rv| {
                let shown = cur.map(|c| Arc::new((v.read)(c)));
                Ok(match f(shown.as_ref(), rv)? {
                    Mutation::Put(obj) => Mutation::Put((v.write)(&obj)),
                    m => m,
                })
            })?;
            return Ok((stored.map(|o| Arc::new((v.read)(&o))), ev));
        }
        self.mutate_key(resource, ns, name, f)
    }

    /// [`Storage::mutate`] of the objects under `resource`'s own key.
    fn mutate_key<E: From<StorageError>>(
        &self,
        resource: &str,
        ns: &str,
        name: &str,
        f: impl FnOnce(Option<&Arc<Value>>, u64) -> Result<Mutation, E>,
    ) -> Result<MutateResult, E> {
        if self.durable {
            off_runtime(|| self.mutate_locked(resource, ns, name, f))
        } else {
            self.mutate_locked(resource, ns, name, f)
        }
    }

    /// [`Storage::mutate_key`] on the calling thread.
    fn mutate_locked<E: From<StorageError>>(
        &self,
        resource: &str,
        ns: &str,
        name: &str,
        f: impl FnOnce(Option<&Arc<Value>>, u64) -> Result<Mutation, E>,
    ) -> Result<MutateResult, E> {
        // Only writers change the state, and they hold this lock: what is read here stays
        // current until the change is applied below.
        let mut writer = self.writer();
        let key = (ns.to_string(), name.to_string());
        let (current, next_rv) = {
            let inner = self.lock();
            let current = inner.data.get(resource).and_then(|m| m.get(&key)).cloned();
            (current, inner.rv + 1)
        };
        let (kind, object) = match f(current.as_ref(), next_rv)? {
            Mutation::Keep => return Ok((current, None)),
            Mutation::Put(mut obj) => {
                set_rv(&mut obj, next_rv);
                let kind = if current.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (kind, Arc::new(obj))
            }
            Mutation::Delete => {
                let Some(prev) = &current else {
                    return Ok((None, None));
                };
                let mut last = (**prev).clone();
                set_rv(&mut last, next_rv);
                (EventType::Deleted, Arc::new(last))
            }
        };
        let ev = Arc::new(Event {
            rv: next_rv,
            resource: resource.to_string(),
            namespace: ns.to_string(),
            name: name.to_string(),
            kind,
            object: object.clone(),
            prev: current,
            rendered: std::sync::OnceLock::new(),
            rendered_pb: std::sync::OnceLock::new(),
        });
        if self.durable {
            let w = &mut *writer;
            let persisted = w
                .reserved
                .as_mut()
                .map_or(Ok(()), |r| r.cover(next_rv))
                .and_then(|()| w.wal.as_mut().map_or(Ok(()), |wal| wal.append(&ev)));
            self.healthy
                .store(persisted.is_ok(), std::sync::atomic::Ordering::SeqCst);
            persisted?;
        }
        // Durable: apply and publish (under the state lock, so that a watch that starts
        // meanwhile sees the event either in history or on its receiver, never both).
        let mut inner = self.lock();
        inner.rv = next_rv;
        let stored = if kind == EventType::Deleted {
            if let Some(m) = inner.data.get_mut(resource) {
                m.remove(&key);
            }
            None
        } else {
            inner
                .data
                .entry(resource.to_string())
                .or_default()
                .insert(key, object.clone());
            Some(object)
        };
        inner.history.push_back(ev.clone());
        while inner.history.len() > self.history_cap {
            if let Some(old) = inner.history.pop_front() {
                inner.compacted = old.rv;
            }
        }
        // No receivers is fine.
        let _ = self.tx.send(ev.clone());
        Ok((stored, Some(ev)))
    }

    /// Subscribes to changes after revision `from`: returns the buffered events after it
    /// (all resources; callers filter) and a live receiver that continues exactly after them.
    pub fn watch_from(&self, from: u64) -> Result<WatchStart, TooOld> {
        let inner = self.lock();
        if from < inner.compacted {
            return Err(TooOld {
                oldest: inner.compacted,
                current: inner.rv,
            });
        }
        let past: Vec<Arc<Event>> = inner
            .history
            .iter()
            .filter(|e| e.rv > from)
            .cloned()
            .collect();
        Ok((past, self.tx.subscribe(), inner.rv))
    }

    /// The buffered events after revision `from` (all resources) and the current
    /// revision, without subscribing.
    pub fn events_after(&self, from: u64) -> Result<(Vec<Arc<Event>>, u64), TooOld> {
        let inner = self.lock();
        if from < inner.compacted {
            return Err(TooOld {
                oldest: inner.compacted,
                current: inner.rv,
            });
        }
        // History is in revision order: skip to the first event after `from`.
        let start = inner.history.partition_point(|e| e.rv <= from);
        let past = inner.history.range(start..).cloned().collect();
        Ok((past, inner.rv))
    }

    /// A snapshot of one resource plus a live receiver starting right after it.
    pub fn snapshot_and_watch(
        &self,
        resource: &str,
        ns: Option<&str>,
    ) -> (Vec<Arc<Value>>, broadcast::Receiver<Arc<Event>>, u64) {
        if let Some(v) = view(resource) {
            let (objs, rx, rv) = self.snapshot_and_watch(v.stored, ns);
            return (v.read_all(objs), rx, rv);
        }
        let inner = self.lock();
        (
            Self::collect(inner.data.get(resource), ns),
            self.tx.subscribe(),
            inner.rv,
        )
    }

    /// Drops history up to the current revision: older revisions get 410 from now on (a
    /// starting server does it once its bootstrap is written; tests use it to force 410s).
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.compacted = inner.rv;
    }

    /// Every resource key that has objects in a namespace.
    pub fn resources_in_namespace(&self, ns: &str) -> Vec<String> {
        let inner = self.lock();
        inner
            .data
            .iter()
            .filter(|(_, objs)| objs.keys().any(|(n, _)| n == ns))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Every object of every resource, with the revision they are current at (the
    /// garbage collector's index is built from it).
    pub fn all_objects(&self) -> (Vec<(String, Arc<Value>)>, u64) {
        let inner = self.lock();
        let all = inner
            .data
            .iter()
            .flat_map(|(k, objs)| objs.values().map(move |v| (k.clone(), v.clone())))
            .collect();
        (all, inner.rv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CM: &str = "/configmaps";

    fn tempdir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    const EVENTS_V1: &str = "events.k8s.io/events";

    fn v1_event(name: &str, note: &str) -> Value {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "ns"}, "note": note,
            "regarding": {"kind": "Pod", "name": "p"}, "eventTime": "2026-12-04T12:00:00.000000Z",
            "reportingController": "x.io/c", "reportingInstance": "c-1", "action": "A",
            "reason": "R", "type": "Normal"})
    }

    #[cfg(unix)]
    #[test]
    fn the_data_directory_and_its_log_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("data");
        {
            let s = Storage::open(&dir, 100).unwrap();
            s.mutate_key::<StorageError>(EVENTS_V1, "ns", "a", |_, _| {
                Ok(Mutation::Put(v1_event("a", "secret")))
            })
            .unwrap();
        }
        // Reopened: the log is rewritten by compaction, still owner-only.
        drop(Storage::open(&dir, 100).unwrap());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(LOG)), 0o600);
    }

    #[test]
    fn an_events_v1_event_is_a_core_event_in_storage() {
        let s = Storage::new(100);
        let (stored, ev) = s
            .mutate::<StorageError>(EVENTS_V1, "ns", "e", |cur, _| {
                assert!(cur.is_none());
                Ok(Mutation::Put(v1_event("e", "hello")))
            })
            .unwrap();
        // The writer gets its own form back; storage and its watchers the core one.
        assert_eq!(stored.unwrap()["note"], "hello");
        let ev = ev.unwrap();
        assert_eq!(
            (ev.resource.as_str(), ev.object["message"].as_str()),
            ("/events", Some("hello"))
        );
        let core = s.get("/events", "ns", "e").unwrap();
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["reportingComponent"], "x.io/c");
        assert!(core.get("note").is_none());
        // Each API reads, lists and updates the other's objects in its own form.
        assert_eq!(s.list(EVENTS_V1, Some("ns")).0.len(), 1);
        assert!(s.list(EVENTS_V1, Some("other")).0.is_empty());
        s.mutate::<StorageError>("/events", "ns", "e", |cur, _| {
            let mut o = (**cur.unwrap()).clone();
            o["message"] = json!("changed");
            Ok(Mutation::Put(o))
        })
        .unwrap();
        let v1 = s.get(EVENTS_V1, "ns", "e").unwrap();
        assert_eq!(
            (v1["note"].as_str(), v1["regarding"]["name"].as_str()),
            (Some("changed"), Some("p"))
        );
        let rv = object_rv(&v1);
        let old = s.list_at(EVENTS_V1, Some("ns"), rv - 1, None).unwrap();
        assert_eq!(old[0]["note"], "hello");
        let (snap, _, _) = s.snapshot_and_watch(EVENTS_V1, None);
        assert_eq!(snap[0]["note"], "changed");
        s.mutate::<StorageError>(EVENTS_V1, "ns", "e", |cur, _| {
            assert_eq!(cur.unwrap()["note"], "changed");
            Ok(Mutation::Delete)
        })
        .unwrap();
        assert!(s.get("/events", "ns", "e").is_none());
    }

    #[test]
    fn events_an_older_version_kept_apart_join_the_core_ones_on_open() {
        let dir = tempdir();
        {
            let s = Storage::open(dir.path(), 100).unwrap();
            // As versions before the view stored them: under their own key, in their form.
            s.mutate_key::<StorageError>(EVENTS_V1, "ns", "old", |_, _| {
                Ok(Mutation::Put(v1_event("old", "kept")))
            })
            .unwrap();
        }
        let s = Storage::open(dir.path(), 100).unwrap();
        let core = s.get("/events", "ns", "old").unwrap();
        assert_eq!(core["message"], "kept");
        assert_eq!(s.get(EVENTS_V1, "ns", "old").unwrap()["note"], "kept");
        assert!(!s.all_objects().0.iter().any(|(k, _)| k == EVENTS_V1));
    }

    fn try_put(s: &Storage, name: &str, data: Value) -> Result<u64, StorageError> {
        let (obj, _) = s.mutate::<StorageError>(CM, "ns", name, |_, _| {
            Ok(Mutation::Put(
                json!({"metadata": {"name": name}, "data": data}),
            ))
        })?;
        Ok(object_rv(&obj.unwrap()))
    }

    fn try_delete(s: &Storage, name: &str) -> Result<(), StorageError> {
        let (obj, ev) = s.mutate::<StorageError>(CM, "ns", name, |_, _| Ok(Mutation::Delete))?;
        assert!(obj.is_none() && ev.is_some(), "{name} was deleted");
        Ok(())
    }

    /// name -> data of every stored configmap.
    fn state(s: &Storage) -> BTreeMap<String, Value> {
        s.list(CM, None)
            .0
            .iter()
            .map(|o| {
                (
                    o["metadata"]["name"].as_str().unwrap().to_string(),
                    o["data"].clone(),
                )
            })
            .collect()
    }

    /// Opens `dir` from its log alone, as if the revision reservation had been lost with
    /// it: these tests check what the log recovers, revisions included.
    fn open_log(dir: &Path) -> Storage {
        open_log_with(dir, Space::default()).unwrap()
    }

    fn open_log_with(dir: &Path, space: Space) -> io::Result<Storage> {
        let _ = std::fs::remove_file(dir.join(RESERVED));
        Storage::open_with(dir, 100, space, OpenOptions::default())
    }

    fn log_bytes(dir: &Path) -> Vec<u8> {
        std::fs::read(dir.join(LOG)).unwrap()
    }

    #[test]
    fn crc32_matches_the_ieee_check_value() {
        assert_eq!(crc32(&[b"123456789"]), 0xCBF4_3926);
        assert_eq!(crc32(&[b"1234", b"56789"]), 0xCBF4_3926);
    }

    #[test]
    fn persists_across_reopen_and_survives_a_torn_write() {
        let dir = tempdir();
        {
            let s = Storage::open(dir.path(), 100).unwrap();
            put(&s, "a", 1);
            put(&s, "b", 2);
            put(&s, "a", 3);
            try_delete(&s, "b").unwrap();
        }
        // A crash in the middle of appending a record.
        let mut bytes = log_bytes(dir.path());
        bytes.extend_from_slice(&MAGIC);
        bytes.extend_from_slice(b"\x20\x00\x00\x00\x01\x02\x03\x04{\"rv\": 99, \"r\"");
        std::fs::write(dir.path().join(LOG), &bytes).unwrap();
        let s = open_log(dir.path());
        let (items, rv) = s.list(CM, None);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["v"], 3);
        assert_eq!(rv, 5, "revisions continue after a restart");
        let next = put(&s, "c", 1);
        assert_eq!(next, 6);
        assert!(s.is_healthy());
        drop(s);
        let s = open_log(dir.path());
        assert_eq!(s.list(CM, None).0.len(), 2);
        assert_eq!(s.current_rv(), 6);
    }

    /// (a) A crash can tear the last record at any byte, including inside a multi-byte
    /// UTF-8 character: startup succeeds with every earlier write. Odd offsets start with
    /// a full disk (no compaction: the torn tail is cut in place) and check that the log
    /// keeps working after it.
    #[test]
    fn a_record_torn_at_any_byte_keeps_every_earlier_write() {
        let dir = tempdir();
        let src = dir.path().join("src");
        let (before, rv_before, start);
        {
            let s = Storage::open(&src, 100).unwrap();
            try_put(&s, "a", json!({"k": "v"})).unwrap();
            try_put(&s, "b", json!({"k": "grüße"})).unwrap();
            try_delete(&s, "a").unwrap();
            before = state(&s);
            rv_before = s.current_rv();
            start = log_bytes(&src).len();
            try_put(&s, "z", json!("é✓日🦀")).unwrap();
        }
        let bytes = log_bytes(&src);
        let torn = &bytes[start..];
        assert!(
            torn.iter().filter(|b| *b & 0xC0 == 0x80).count() >= 6,
            "some cuts fall inside multi-byte characters"
        );
        let work = dir.path().join("work");
        for cut in start..bytes.len() {
            let _ = std::fs::remove_dir_all(&work);
            std::fs::create_dir_all(&work).unwrap();
            std::fs::write(work.join(LOG), &bytes[..cut]).unwrap();
            let full_disk = cut % 2 == 1;
            let space = Space::default();
            space.set(full_disk.then_some(0));
            let s =
                open_log_with(&work, space.clone()).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            assert_eq!(state(&s), before, "cut at {cut}");
            assert_eq!(s.current_rv(), rv_before, "cut at {cut}");
            if !full_disk {
                continue;
            }
            space.set(None);
            assert_eq!(try_put(&s, "after", json!("é")).unwrap(), rv_before + 1);
            drop(s);
            let s = open_log(&work);
            let mut expected = before.clone();
            expected.insert("after".into(), json!("é"));
            assert_eq!(state(&s), expected, "cut at {cut}, after a write");
            assert_eq!(s.current_rv(), rv_before + 1);
        }
        let s = Storage::open(&src, 100).unwrap();
        assert_eq!(state(&s)["z"], json!("é✓日🦀"));
    }

    /// A damaged region in the middle of the log (a torn record followed by intact ones,
    /// or a flipped bit) stops the start, leaving the log as it is; salvage loads every
    /// intact record around it.
    #[test]
    fn damage_inside_the_log_refuses_to_start_unless_salvaged() {
        let dir = tempdir();
        let (after_a, after_b);
        {
            let s = Storage::open(dir.path(), 100).unwrap();
            put(&s, "a", 1);
            after_a = log_bytes(dir.path()).len();
            put(&s, "b", 2);
            after_b = log_bytes(dir.path()).len();
            put(&s, "c", 3);
            try_delete(&s, "a").unwrap();
        }
        let good = log_bytes(dir.path());
        let salvage = OpenOptions { salvage: true };
        let refused = |bytes: &[u8], offset: usize| {
            std::fs::write(dir.path().join(LOG), bytes).unwrap();
            let Err(e) = Storage::open(dir.path(), 100) else {
                panic!("a log damaged in the middle was opened");
            };
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            let corrupt = e.get_ref().and_then(|e| e.downcast_ref::<CorruptLog>());
            assert!(
                corrupt.is_some_and(|c| c.offset == offset as u64 && c.damaged > 0),
                "{e}"
            );
            assert!(e.to_string().contains("--salvage-corrupt-log"), "{e}");
            assert_eq!(log_bytes(dir.path()), bytes, "the log is left as it was");
        };
        // A torn record (header and half a payload) between b and c.
        let mut torn = good[..after_b].to_vec();
        torn.extend_from_slice(&good[after_b..after_b + HEADER + 9]);
        torn.extend_from_slice(&good[after_b..]);
        refused(&torn, after_b);
        let s = Storage::open_with_options(dir.path(), 100, salvage).unwrap();
        assert_eq!(state(&s).keys().collect::<Vec<_>>(), ["b", "c"]);
        assert!(s.current_rv() >= 5);
        drop(s);
        // Salvaged once, the compacted log opens normally.
        drop(Storage::open(dir.path(), 100).unwrap());
        // A flipped bit inside b's record: b is lost, the records around it are not.
        let mut flipped = good.clone();
        flipped[after_a + HEADER + 5] ^= 0x04;
        refused(&flipped, after_a);
        let s = Storage::open_with_options(dir.path(), 100, salvage).unwrap();
        assert_eq!(state(&s).keys().collect::<Vec<_>>(), ["c"]);
    }

    /// Item 11 of the reliability round: acknowledged changes lost from the end of the
    /// log after the fact (a disk that dropped written blocks). The restarted server must
    /// not hand out their revisions again, or watchers would see two objects under one.
    #[test]
    fn revisions_lost_with_the_end_of_the_log_are_never_handed_out_again() {
        let dir = tempdir();
        let (cut, highest);
        {
            let s = Storage::open(dir.path(), 100).unwrap();
            put(&s, "a", 1);
            cut = log_bytes(dir.path()).len();
            put(&s, "b", 2);
            highest = put(&s, "c", 3);
        }
        let bytes = log_bytes(dir.path());
        std::fs::write(dir.path().join(LOG), &bytes[..cut]).unwrap();
        let s = Storage::open(dir.path(), 100).unwrap();
        assert_eq!(
            state(&s).keys().collect::<Vec<_>>(),
            ["a"],
            "b and c are lost"
        );
        assert!(s.current_rv() >= highest, "{} < {highest}", s.current_rv());
        let next = put(&s, "d", 4);
        assert!(next > highest, "revision {next} was already handed out");
        assert!(s.watch_from(highest).is_err(), "a lost revision is too old");
        drop(s);
        // The log alone, without the reservation, would have reused them.
        let s = open_log(dir.path());
        assert!(s.current_rv() >= next, "the log's header keeps the counter");
    }

    #[test]
    fn revisions_are_reserved_a_block_ahead_and_the_file_is_replaced_whole() {
        let dir = tempdir();
        let mut r = Reservation {
            dir: dir.path().to_path_buf(),
            upto: 0,
            space: Space::default(),
        };
        let on_disk = || read_reserved(dir.path()).unwrap();
        assert_eq!(on_disk(), 0, "no reservation yet");
        r.cover(5).unwrap();
        assert_eq!((r.upto, on_disk()), (5 + RV_BLOCK - 1, 5 + RV_BLOCK - 1));
        std::fs::write(dir.path().join(RESERVED), "x").unwrap();
        r.cover(RV_BLOCK).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join(RESERVED)).unwrap(),
            b"x",
            "no write"
        );
        r.cover(RV_BLOCK + 5).unwrap();
        assert_eq!(on_disk(), RV_BLOCK + 5 + RV_BLOCK - 1);
        assert!(!dir.path().join(RESERVED_TMP).exists());
        // A full disk: the reservation fails whole and the old one stays.
        r.space.set(Some(2));
        assert!(matches!(
            r.cover(10 * RV_BLOCK),
            Err(StorageError::Persist { .. })
        ));
        assert_eq!(on_disk(), RV_BLOCK + 5 + RV_BLOCK - 1);
        // A reservation file that is not a number stops the start.
        std::fs::write(dir.path().join(RESERVED), "12a\n").unwrap();
        let e = Storage::open(dir.path(), 100).err().unwrap();
        assert!(e.to_string().contains("not a revision"), "{e}");
    }

    /// A log whose sync blocks until released, to see what waits for it.
    struct SlowSync {
        file: std::fs::File,
        started: std::sync::mpsc::Sender<()>,
        release: Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
    }

    impl LogFile for SlowSync {
        fn append(&mut self, buf: &[u8]) -> io::Result<()> {
            self.file.append(buf)
        }
        fn sync(&mut self) -> io::Result<()> {
            let _ = self.started.send(());
            let _ = self.release.lock().unwrap().recv();
            self.file.sync()
        }
        fn truncate(&mut self, len: u64) -> io::Result<()> {
            self.file.truncate(len)
        }
    }

    /// Storage whose next sync blocks: returns the sender that releases it and the
    /// receiver told when a sync starts.
    fn with_slow_sync(
        s: &Storage,
        dir: &Path,
    ) -> (std::sync::mpsc::Sender<()>, std::sync::mpsc::Receiver<()>) {
        let (release_tx, release_rx) = std::sync::mpsc::channel();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(LOG))
            .unwrap();
        s.writer().wal.as_mut().unwrap().file = Box::new(SlowSync {
            file,
            started: started_tx,
            release: Arc::new(Mutex::new(release_rx)),
        });
        (release_tx, started_rx)
    }

    /// Item 9: a write waiting for the disk blocks neither reads nor watches.
    #[test]
    fn reads_and_watches_do_not_wait_for_a_write_syncing_the_log() {
        let dir = tempdir();
        let s = Arc::new(Storage::open(dir.path(), 100).unwrap());
        put(&s, "a", 1);
        let (release, started) = with_slow_sync(&s, dir.path());
        let writer = std::thread::spawn({
            let s = s.clone();
            move || put(&s, "b", 2)
        });
        started.recv().unwrap();
        // The write is inside its sync; read from another thread with a deadline, so a
        // regression fails instead of hanging.
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn({
            let s = s.clone();
            move || {
                let seen = (
                    s.get(CM, "ns", "a").is_some(),
                    s.get(CM, "ns", "b").is_none(),
                    s.list(CM, None).0.len(),
                    s.watch_from(s.current_rv()).is_ok(),
                    s.is_healthy(),
                );
                let _ = done_tx.send(seen);
            }
        });
        let seen = done_rx.recv_timeout(std::time::Duration::from_secs(20));
        release.send(()).unwrap();
        let rv = writer.join().unwrap();
        assert_eq!(
            seen.expect("reads waited for the sync"),
            (true, true, 1, true, true),
            "the unsynced write is not visible"
        );
        assert_eq!(s.get(CM, "ns", "b").map(|o| object_rv(&o)), Some(rv));
    }

    /// Item 9: the worker thread a handler writes from keeps running other tasks.
    #[test]
    fn a_write_syncing_the_log_does_not_stall_the_runtime() {
        let dir = tempdir();
        let s = Arc::new(Storage::open(dir.path(), 100).unwrap());
        put(&s, "a", 1);
        let (release, started) = with_slow_sync(&s, dir.path());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let write = rt.spawn({
            let s = s.clone();
            async move { put(&s, "b", 2) }
        });
        started.recv().unwrap();
        // The only worker is the one writing; another task must still run.
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            tokio::task::yield_now().await;
            let _ = tx.send(());
        });
        let ran = rx.recv_timeout(std::time::Duration::from_secs(20));
        release.send(()).unwrap();
        rt.block_on(write).unwrap();
        assert!(ran.is_ok(), "the runtime stalled while the log was syncing");
    }

    /// The old line-based log: read as bytes (a tear inside a multi-byte character is no
    /// error), an intact record after a torn one on the same line is found, and the data
    /// moves to the framed log.
    #[test]
    fn legacy_log_is_read_as_bytes_and_migrated() {
        let dir = tempdir();
        let rec = |rv: u64, n: &str, data: Option<&str>| {
            let o = data.map(|d| json!({"metadata": {"name": n}, "data": d}));
            serde_json::to_string(&json!({"rv": rv, "r": CM, "ns": "ns", "n": n, "o": o})).unwrap()
        };
        let torn_mid = rec(2, "torn", Some("日本"));
        let torn_mid = &torn_mid.as_bytes()[..torn_mid.find('日').unwrap() + 1];
        let torn_tail = rec(5, "tail", Some("日本"));
        let torn_tail = &torn_tail.as_bytes()[..torn_tail.find('本').unwrap() + 2];
        let mut legacy = Vec::new();
        legacy.extend_from_slice(rec(1, "a", Some("1")).as_bytes());
        legacy.push(b'\n');
        legacy.extend_from_slice(torn_mid);
        legacy.extend_from_slice(rec(3, "b", Some("ü")).as_bytes());
        legacy.push(b'\n');
        legacy.extend_from_slice(rec(4, "a", None).as_bytes());
        legacy.push(b'\n');
        legacy.extend_from_slice(torn_tail);
        assert!(std::str::from_utf8(&legacy).is_err());
        std::fs::write(dir.path().join(LEGACY_LOG), &legacy).unwrap();
        let s = Storage::open(dir.path(), 100).unwrap();
        assert_eq!(state(&s), BTreeMap::from([("b".into(), json!("ü"))]));
        assert_eq!(s.current_rv(), 4);
        assert!(!dir.path().join(LEGACY_LOG).exists());
        drop(s);
        let s = Storage::open(dir.path(), 100).unwrap();
        assert_eq!(state(&s), BTreeMap::from([("b".into(), json!("ü"))]));
        assert_eq!(s.current_rv(), 4);
    }

    /// (b) A full disk at every possible point of an append: the write fails, nothing
    /// changes (memory, watchers, log), and once space returns writes succeed; a restart
    /// has every acknowledged write and none of the failed ones.
    #[test]
    fn a_full_disk_fails_the_write_and_changes_nothing() {
        let dir = tempdir();
        let s = Storage::open(dir.path(), 100).unwrap();
        try_put(&s, "a", json!("1")).unwrap();
        try_put(&s, "b", json!("1")).unwrap();
        let rv = s.current_rv();
        let len = log_bytes(dir.path()).len();
        let (_, mut rx, _) = s.watch_from(rv).unwrap();
        let before = state(&s);
        let mut failures = 0;
        let acked = loop {
            s.set_free_space(Some(failures));
            let name = format!("x{failures:03}");
            match try_put(&s, &name, json!("ü".repeat(20))) {
                Ok(new_rv) => break (name, new_rv),
                Err(e) => {
                    let StorageError::Persist {
                        rv: failed_rv,
                        source,
                        ..
                    } = &e
                    else {
                        panic!("{e}")
                    };
                    assert_eq!(*failed_rv, rv + 1);
                    assert_eq!(source.kind(), io::ErrorKind::StorageFull, "{e}");
                    assert!(e.to_string().contains("could not be persisted"), "{e}");
                    assert_eq!(state(&s), before);
                    assert_eq!(s.current_rv(), rv);
                    assert!(s.get(CM, "ns", &name).is_none());
                    assert!(rx.try_recv().is_err(), "watchers saw a failed write");
                    assert_eq!(log_bytes(dir.path()).len(), len, "the log was cut back");
                    assert!(!s.is_healthy());
                    // Deletes fail the same way.
                    s.set_free_space(Some(0));
                    assert!(try_delete(&s, "a").is_err());
                    assert!(s.get(CM, "ns", "a").is_some());
                    failures += 1;
                }
            }
        };
        assert!(
            failures > 60,
            "every byte of the record was a failure point"
        );
        assert_eq!(acked.1, rv + 1);
        assert!(s.is_healthy());
        assert_eq!(rx.try_recv().unwrap().name, acked.0);
        s.set_free_space(None);
        try_delete(&s, "a").unwrap();
        let rv = try_put(&s, "c", json!("1")).unwrap();
        let expected = state(&s);
        assert_eq!(expected.keys().collect::<Vec<_>>(), ["b", "c", &acked.0]);
        drop(s);
        let s = open_log(dir.path());
        assert_eq!(state(&s), expected);
        assert_eq!(s.current_rv(), rv);
        let mut records = Records::new(&[]);
        let bytes = log_bytes(dir.path());
        records.buf = &bytes;
        assert!(records.by_ref().count() > 0);
        assert_eq!(records.skipped, 0, "no damaged bytes in the log");
    }

    /// A log file whose sync or truncate fails on demand.
    struct Flaky {
        file: std::fs::File,
        fail_sync: Arc<std::sync::atomic::AtomicU32>,
        fail_truncate: Arc<std::sync::atomic::AtomicU32>,
    }

    fn take(n: &std::sync::atomic::AtomicU32) -> bool {
        use std::sync::atomic::Ordering;
        n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
            .is_ok()
    }

    impl LogFile for Flaky {
        fn append(&mut self, buf: &[u8]) -> io::Result<()> {
            self.file.append(buf)
        }
        fn sync(&mut self) -> io::Result<()> {
            if take(&self.fail_sync) {
                return Err(io::Error::other("injected EIO on sync"));
            }
            self.file.sync()
        }
        fn truncate(&mut self, len: u64) -> io::Result<()> {
            if take(&self.fail_truncate) {
                return Err(io::Error::other("injected failure to truncate"));
            }
            self.file.truncate(len)
        }
    }

    /// A failed sync (the record is complete in the file but not acknowledged) whose
    /// rollback also fails at first: no later record is appended until the unacknowledged
    /// one is cut, so it never resurfaces.
    #[test]
    fn a_failed_sync_is_cut_before_anything_else_is_appended() {
        use std::sync::atomic::AtomicU32;
        let dir = tempdir();
        let s = Storage::open(dir.path(), 100).unwrap();
        try_put(&s, "a", json!("1")).unwrap();
        let fail_sync = Arc::new(AtomicU32::new(1));
        let fail_truncate = Arc::new(AtomicU32::new(2));
        {
            let file = std::fs::OpenOptions::new()
                .append(true)
                .open(dir.path().join(LOG))
                .unwrap();
            let mut writer = s.writer();
            writer.wal.as_mut().unwrap().file = Box::new(Flaky {
                file,
                fail_sync: fail_sync.clone(),
                fail_truncate: fail_truncate.clone(),
            });
        }
        let len = log_bytes(dir.path()).len();
        let e = try_put(&s, "b", json!("1")).unwrap_err();
        assert!(e.to_string().contains("injected EIO"), "{e}");
        assert!(
            log_bytes(dir.path()).len() > len,
            "the record is in the file"
        );
        let e = try_put(&s, "c", json!("1")).unwrap_err();
        assert!(matches!(e, StorageError::Repair { .. }), "{e}");
        assert_eq!(state(&s).keys().collect::<Vec<_>>(), ["a"]);
        let rv = try_put(&s, "d", json!("1")).unwrap();
        assert_eq!(rv, 3);
        drop(s);
        let s = open_log(dir.path());
        assert_eq!(state(&s).keys().collect::<Vec<_>>(), ["a", "d"]);
        assert_eq!(s.current_rv(), 3);
    }

    /// (c) Revisions never go back across restarts and compactions, even when the newest
    /// changes were deletes; a watch from the last revision clients saw gets new events,
    /// an older one gets TooOld (410).
    #[test]
    fn revisions_never_go_back_when_the_newest_changes_were_deletes() {
        let dir = tempdir();
        let max;
        {
            let s = Storage::open(dir.path(), 100).unwrap();
            for n in ["a", "b", "c"] {
                try_put(&s, n, json!("1")).unwrap();
            }
            try_delete(&s, "b").unwrap();
            try_delete(&s, "c").unwrap();
            max = s.current_rv();
            assert_eq!(max, 6);
        }
        // Two restarts in a row: the second compacts a log that holds no change at all.
        drop(open_log(dir.path()));
        let s = open_log(dir.path());
        assert_eq!(s.current_rv(), max);
        assert!(matches!(
            s.watch_from(max - 1),
            Err(TooOld { oldest, current }) if oldest == max && current == max
        ));
        assert!(s.list_at(CM, None, max - 1, None).is_err());
        let (past, mut rx, _) = s.watch_from(max).unwrap();
        assert!(past.is_empty());
        assert_eq!(try_put(&s, "d", json!("1")).unwrap(), max + 1);
        let ev = rx.try_recv().unwrap();
        assert_eq!((ev.rv, ev.name.as_str()), (max + 1, "d"));
    }

    /// When the compacted log cannot be written at startup (full disk), the server starts
    /// from the log as it is, cuts its torn tail in place, and appends after it.
    #[test]
    fn startup_with_a_full_disk_uses_the_log_as_it_is() {
        let dir = tempdir();
        {
            let s = Storage::open(dir.path(), 100).unwrap();
            put(&s, "a", 1);
            put(&s, "b", 2);
            try_delete(&s, "a").unwrap();
        }
        let mut bytes = log_bytes(dir.path());
        let good = bytes.len();
        bytes.extend_from_slice(&MAGIC);
        bytes.extend_from_slice(b"\xff\x00");
        std::fs::write(dir.path().join(LOG), &bytes).unwrap();
        let space = Space::default();
        space.set(Some(0));
        let s = open_log_with(dir.path(), space.clone()).unwrap();
        assert_eq!(state(&s).keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(s.current_rv(), 4);
        assert!(!dir.path().join(LOG_TMP).exists());
        assert_eq!(log_bytes(dir.path()).len(), good, "the torn tail was cut");
        let e = try_put(&s, "c", json!("1")).unwrap_err();
        assert!(
            matches!(&e, StorageError::Persist { source, .. } if source.kind() == io::ErrorKind::StorageFull)
        );
        space.set(None);
        assert_eq!(try_put(&s, "c", json!("1")).unwrap(), 5);
        drop(s);
        let s = open_log(dir.path());
        assert_eq!(state(&s).keys().collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(s.current_rv(), 5);
    }

    fn put(s: &Storage, name: &str, v: i64) -> u64 {
        let (obj, _) = s
            .mutate::<()>(CM, "ns", name, |_, _| {
                Ok(Mutation::Put(json!({"metadata": {"name": name}, "v": v})))
            })
            .unwrap();
        object_rv(&obj.unwrap())
    }

    #[test]
    fn revisions_and_snapshots() {
        let s = Storage::new(100);
        let r1 = put(&s, "a", 1);
        let r2 = put(&s, "b", 1);
        assert!(r2 > r1);
        put(&s, "a", 2);
        s.mutate::<()>("/configmaps", "ns", "b", |_, _| Ok(Mutation::Delete))
            .unwrap();
        let at_r2 = s.list_at("/configmaps", Some("ns"), r2, None).unwrap();
        assert_eq!(
            s.list_at("/configmaps", Some("ns"), r2, Some("ns/a"))
                .unwrap()
                .len(),
            1
        );
        assert_eq!(at_r2.len(), 2);
        assert_eq!(at_r2[0]["v"], 1);
        let now = s.list("/configmaps", None).0;
        assert_eq!(now.len(), 1);
        assert_eq!(now[0]["v"], 2);
        let (past, _rx, _) = s.watch_from(r1).unwrap();
        assert_eq!(past.len(), 3);
        s.compact();
        assert!(s.watch_from(r1).is_err());
        assert!(s.list_at("/configmaps", None, r2, None).is_err());
    }
}
