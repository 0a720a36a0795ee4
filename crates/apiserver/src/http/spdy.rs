//! The server side of SPDY/3.1 as Kubernetes uses it: kubectl's port-forward, on an
//! upgraded connection (`Upgrade: SPDY/3.1`) or tunnelled through a WebSocket
//! (`SPDY/3.1+portforward.k8s.io`, kubectl 1.31+).
//!
//! Only what the Go implementation (moby/spdystream) exchanges is implemented: SYN_STREAM
//! from the client answered by SYN_REPLY, DATA with FIN, RST_STREAM, PING (echoed),
//! GOAWAY, and SETTINGS, HEADERS and WINDOW_UPDATE, which are read and ignored as
//! spdystream ignores them (it has no flow control). Header blocks are zlib streams
//! with the SPDY/3 dictionary, one per direction for the whole connection.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use futures::{SinkExt, StreamExt};
use std::collections::HashMap;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

/// The SPDY/3 header compression dictionary (draft-mbelshe-httpbis-spdy-00, 2.6.10.1).
const DICTIONARY: &[u8] = include_bytes!("spdy_dictionary.bin");

const VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const FLAG_FIN: u8 = 0x01;

/// RST_STREAM status: the stream is refused (a repeated or even stream id).
const PROTOCOL_ERROR: u32 = 1;
/// RST_STREAM status: the stream was not opened (too many streams are open).
const REFUSED_STREAM: u32 = 3;

/// The largest frame accepted (the 24-bit length allows 16 MiB).
const MAX_FRAME: usize = 1 << 20;
/// The largest decompressed header block accepted.
const MAX_HEADER_BLOCK: usize = 64 * 1024;
/// Header values one block may unpack to (each NUL in a value starts another).
const MAX_HEADER_VALUES: usize = 1024;
/// Streams one session may have open at once; more are refused with RST_STREAM
/// `REFUSED_STREAM`. Each forwarded connection takes two.
const MAX_OPEN_STREAMS: usize = 1024;
/// How long the first stream of a port-forward pair waits for the second (the kubelet's
/// `streamCreationTimeout`, 30 s): then it gets an error and both are dropped.
const STREAM_PAIR_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Data frames sent are at most this long.
const DATA_CHUNK: usize = 32 * 1024;
/// Buffer between a stream's handler and the connection.
const PIPE: usize = 64 * 1024;

/// Why a SPDY session ended badly.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpdyError {
    /// Reading or writing the connection failed.
    #[error("spdy connection: {0}")]
    Io(#[from] std::io::Error),
    /// The peer broke the protocol.
    #[error("spdy protocol error: {0}")]
    Protocol(String),
}

/// A stream the client opened: its headers, and its data as a byte stream. Reading
/// gives what the client sends (end of file at its FIN); writing sends DATA frames;
/// shutting down (or dropping) sends FIN.
#[derive(Debug)]
pub(crate) struct SpdyStream {
    pub headers: Vec<(String, String)>,
    pub io: DuplexStream,
}

impl SpdyStream {
    /// The first value of header `name` (names are lower case on the wire).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Serves a SPDY session on `io` until the client goes away, handing each stream the
/// client opens to `streams`.
pub(crate) async fn serve<IO>(io: IO, streams: mpsc::Sender<SpdyStream>) -> Result<(), SpdyError>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(io);
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        while let Some(frame) = out_rx.recv().await {
            if wr.write_all(&frame).await.is_err() {
                return;
            }
        }
        let _ = wr.shutdown().await;
    });
    let mut session = Session {
        out: out_tx,
        streams: HashMap::new(),
        last_id: 0,
        inflate: Decompress::new(true),
        deflate: new_deflate(),
    };
    let result = session.read_loop(&mut rd, &streams).await;
    // Handlers see end of file on every stream still open.
    for (_, s) in session.streams.drain() {
        s.pump.abort();
    }
    drop(session);
    let _ = writer.await;
    result
}

fn new_deflate() -> Compress {
    let mut c = Compress::new(Compression::default(), true);
    // The dictionary is a fixed, valid input: setting it cannot fail on a fresh stream.
    let _ = c.set_dictionary(DICTIONARY);
    c
}

struct StreamState {
    /// Our end: data from the client is written here.
    to_handler: tokio::io::WriteHalf<DuplexStream>,
    /// Sends the handler's writes as DATA frames.
    pump: tokio::task::JoinHandle<()>,
    /// The client has sent FIN.
    remote_closed: bool,
}

struct Session {
    out: mpsc::Sender<Vec<u8>>,
    streams: HashMap<u32, StreamState>,
    last_id: u32,
    inflate: Decompress,
    deflate: Compress,
}

impl Session {
    async fn read_loop<R: AsyncRead + Unpin>(
        &mut self,
        rd: &mut R,
        handlers: &mpsc::Sender<SpdyStream>,
    ) -> Result<(), SpdyError> {
        let mut header = [0u8; 8];
        loop {
            match rd.read_exact(&mut header).await {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e.into()),
            }
            let flags = header[4];
            let len = u32::from_be_bytes([0, header[5], header[6], header[7]]) as usize;
            if len > MAX_FRAME {
                return Err(SpdyError::Protocol(format!(
                    "a frame of {len} bytes is over the limit of {MAX_FRAME}"
                )));
            }
            let mut body = vec![0u8; len];
            rd.read_exact(&mut body).await?;
            if header[0] & 0x80 == 0 {
                let id = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
                self.data(id, flags, &body).await;
                continue;
            }
            let version = u16::from_be_bytes([header[0] & 0x7f, header[1]]);
            if version != VERSION {
                return Err(SpdyError::Protocol(format!(
                    "SPDY version {version}, not {VERSION}"
                )));
            }
            let kind = u16::from_be_bytes([header[2], header[3]]);
            match kind {
                SYN_STREAM => self.syn_stream(flags, &body, handlers).await?,
                RST_STREAM => {
                    let id = stream_id(&body)?;
                    if let Some(s) = self.streams.remove(&id) {
                        s.pump.abort();
                    }
                }
                PING => {
                    if body.len() != 4 {
                        return Err(SpdyError::Protocol("a PING without a 4-byte id".into()));
                    }
                    // Odd ids are the client's own pings: echo them.
                    if body[3] & 1 == 1 {
                        let _ = self.out.send(control(PING, 0, &body)).await;
                    }
                }
                GOAWAY => return Ok(()),
                HEADERS => {
                    // Keep the decompressor in step; the headers themselves are unused.
                    if body.len() < 4 {
                        return Err(SpdyError::Protocol("a short HEADERS frame".into()));
                    }
                    self.header_block(&body[4..])?;
                }
                // SETTINGS, WINDOW_UPDATE, NOOP and unknown types: nothing to do.
                _ => {}
            }
        }
    }

    async fn syn_stream(
        &mut self,
        flags: u8,
        body: &[u8],
        handlers: &mpsc::Sender<SpdyStream>,
    ) -> Result<(), SpdyError> {
        if body.len() < 10 {
            return Err(SpdyError::Protocol("a short SYN_STREAM frame".into()));
        }
        let id = stream_id(body)?;
        // The header block must be read whatever happens to the stream: the zlib stream
        // continues across frames.
        let headers = self.header_block(&body[10..])?;
        if id == 0 || id % 2 == 0 || id <= self.last_id {
            self.reset(id, PROTOCOL_ERROR).await;
            return Ok(());
        }
        self.last_id = id;
        if self.streams.len() >= MAX_OPEN_STREAMS {
            // Streams closed both ways are only forgotten here, when the table is full.
            self.streams
                .retain(|_, s| !(s.remote_closed && s.pump.is_finished()));
            if self.streams.len() >= MAX_OPEN_STREAMS {
                self.reset(id, REFUSED_STREAM).await;
                return Ok(());
            }
        }
        let reply = self.reply_block();
        let mut payload = id.to_be_bytes().to_vec();
        payload.extend_from_slice(&reply);
        let _ = self.out.send(control(SYN_REPLY, 0, &payload)).await;

        let (ours, theirs) = tokio::io::duplex(PIPE);
        let (mut from_handler, mut to_handler) = tokio::io::split(ours);
        if flags & FLAG_FIN != 0 {
            let _ = to_handler.shutdown().await;
        }
        let out = self.out.clone();
        let pump = tokio::spawn(async move {
            let mut buf = vec![0u8; DATA_CHUNK];
            loop {
                match from_handler.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        let _ = out.send(data_frame(id, FLAG_FIN, &[])).await;
                        return;
                    }
                    Ok(n) => {
                        if out.send(data_frame(id, 0, &buf[..n])).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        self.streams.insert(
            id,
            StreamState {
                to_handler,
                pump,
                remote_closed: flags & FLAG_FIN != 0,
            },
        );
        if handlers
            .send(SpdyStream {
                headers,
                io: theirs,
            })
            .await
            .is_err()
        {
            // Nobody handles streams any more: the stream ends at once.
            if let Some(s) = self.streams.remove(&id) {
                s.pump.abort();
            }
        }
        Ok(())
    }

    async fn data(&mut self, id: u32, flags: u8, data: &[u8]) {
        let Some(s) = self.streams.get_mut(&id) else {
            // A stream that is gone (reset, or never opened): spdystream drops these too.
            return;
        };
        if !data.is_empty() && s.to_handler.write_all(data).await.is_err() {
            // The handler stopped reading: what the client sends is discarded.
        }
        if flags & FLAG_FIN != 0 {
            s.remote_closed = true;
            let _ = s.to_handler.shutdown().await;
        }
    }

    /// Ends stream `id` with RST_STREAM and `status`.
    async fn reset(&mut self, id: u32, status: u32) {
        let mut rst = id.to_be_bytes().to_vec();
        rst.extend_from_slice(&status.to_be_bytes());
        let _ = self.out.send(control(RST_STREAM, 0, &rst)).await;
    }

    /// Decompresses and parses one header block.
    fn header_block(&mut self, compressed: &[u8]) -> Result<Vec<(String, String)>, SpdyError> {
        let mut plain = Vec::new();
        let mut input = compressed;
        let mut buf = [0u8; 4096];
        loop {
            let (in0, out0) = (self.inflate.total_in(), self.inflate.total_out());
            let mut dictionary_set = false;
            match self
                .inflate
                .decompress(input, &mut buf, FlushDecompress::Sync)
            {
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate.set_dictionary(DICTIONARY).map_err(|e| {
                        SpdyError::Protocol(format!("header dictionary refused: {e}"))
                    })?;
                    dictionary_set = true;
                }
                Err(e) => {
                    return Err(SpdyError::Protocol(format!(
                        "header block does not decompress: {e}"
                    )));
                }
            }
            let consumed = (self.inflate.total_in() - in0) as usize;
            let produced = (self.inflate.total_out() - out0) as usize;
            plain.extend_from_slice(&buf[..produced]);
            input = &input[consumed.min(input.len())..];
            if plain.len() > MAX_HEADER_BLOCK {
                return Err(SpdyError::Protocol(format!(
                    "a header block over {MAX_HEADER_BLOCK} bytes"
                )));
            }
            if input.is_empty() && produced < buf.len() {
                break;
            }
            if consumed == 0 && produced == 0 && !dictionary_set {
                return Err(SpdyError::Protocol(
                    "a header block that does not decompress to the end".into(),
                ));
            }
        }
        parse_header_block(&plain)
    }

    /// An empty header block, compressed in this direction's zlib stream.
    fn reply_block(&mut self) -> Vec<u8> {
        let plain = 0u32.to_be_bytes();
        let mut input = &plain[..];
        let mut out = Vec::with_capacity(64);
        let mut buf = [0u8; 256];
        loop {
            let (in0, out0) = (self.deflate.total_in(), self.deflate.total_out());
            if self
                .deflate
                .compress(input, &mut buf, FlushCompress::Sync)
                .is_err()
            {
                break;
            }
            let consumed = (self.deflate.total_in() - in0) as usize;
            let produced = (self.deflate.total_out() - out0) as usize;
            out.extend_from_slice(&buf[..produced]);
            input = &input[consumed.min(input.len())..];
            if (input.is_empty() && produced < buf.len()) || (consumed == 0 && produced == 0) {
                break;
            }
        }
        out
    }
}

fn stream_id(body: &[u8]) -> Result<u32, SpdyError> {
    if body.len() < 4 {
        return Err(SpdyError::Protocol("a frame without a stream id".into()));
    }
    Ok(u32::from_be_bytes([
        body[0] & 0x7f,
        body[1],
        body[2],
        body[3],
    ]))
}

/// Parses an uncompressed header block: a count, then length-prefixed names and values
/// (several values of one name are separated by NUL).
pub(crate) fn parse_header_block(mut b: &[u8]) -> Result<Vec<(String, String)>, SpdyError> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], SpdyError> {
        if b.len() < n {
            return Err(SpdyError::Protocol("a truncated header block".into()));
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Ok(head)
    }
    fn len(b: &mut &[u8]) -> Result<usize, SpdyError> {
        let raw = take(b, 4)?;
        Ok(u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize)
    }
    let count = len(&mut b)?;
    if count > MAX_HEADER_VALUES {
        return Err(SpdyError::Protocol(format!("{count} headers in one block")));
    }
    let mut out = Vec::with_capacity(count);
    // What the parsed headers hold: a name is repeated for each of its values, so a block
    // of one long name and a value of NULs would otherwise unpack to the name's length
    // times the number of NULs (32 KiB x 32 Ki from a 64 KiB block).
    let mut unpacked = 0usize;
    for _ in 0..count {
        let n = len(&mut b)?;
        let name = String::from_utf8_lossy(take(&mut b, n)?).to_ascii_lowercase();
        let n = len(&mut b)?;
        let value = take(&mut b, n)?;
        for v in value.split(|&c| c == 0) {
            unpacked = unpacked.saturating_add(name.len() + v.len());
            if out.len() >= MAX_HEADER_VALUES || unpacked > MAX_HEADER_BLOCK {
                return Err(SpdyError::Protocol(format!(
                    "a header block unpacking to over {MAX_HEADER_VALUES} values or {MAX_HEADER_BLOCK} bytes"
                )));
            }
            out.push((name.clone(), String::from_utf8_lossy(v).into_owned()));
        }
    }
    Ok(out)
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(8 + payload.len());
    f.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    f.extend_from_slice(&kind.to_be_bytes());
    let len = payload.len() as u32;
    f.push(flags);
    f.extend_from_slice(&len.to_be_bytes()[1..]);
    f.extend_from_slice(payload);
    f
}

fn data_frame(id: u32, flags: u8, data: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(8 + data.len());
    f.extend_from_slice(&(id & 0x7fff_ffff).to_be_bytes());
    f.push(flags);
    f.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
    f.extend_from_slice(data);
    f
}

/// Serves kubectl's port-forward protocol (`portforward.k8s.io`) on a SPDY session: the
/// client opens an `error` and a `data` stream per connection, paired by `requestID`,
/// each naming the `port`. Each pair is connected to what `dial(port)` returns; a dial
/// error is written to the error stream, as the kubelet does.
pub(crate) async fn portforward<IO, D, Fut, S>(io: IO, dial: D) -> Result<(), SpdyError>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    D: Fn(u16) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<S, String>> + Send + 'static,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<SpdyStream>(16);
    let session = tokio::spawn(serve(io, tx));
    let dial = std::sync::Arc::new(dial);
    // Half-made pairs by request id, each with the time its first stream came; they are
    // bounded by the session's open streams and dropped after STREAM_PAIR_TIMEOUT.
    let mut pending: HashMap<String, PendingPair> = HashMap::new();
    loop {
        let first_deadline = pending.values().map(|p| p.deadline).min();
        let stream = tokio::select! {
            s = rx.recv() => match s {
                Some(s) => s,
                None => break,
            },
            _ = async {
                match first_deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => {
                let now = tokio::time::Instant::now();
                let expired: Vec<String> = pending
                    .iter()
                    .filter(|(_, p)| p.deadline <= now)
                    .map(|(k, _)| k.clone())
                    .collect();
                for request in expired {
                    if let Some(PendingPair { error: Some(mut err), .. }) = pending.remove(&request) {
                        // As the kubelet reports it on the error stream.
                        let text = format!("(request={request}) timed out waiting for streams");
                        tokio::spawn(async move {
                            let _ = err.io.write_all(text.as_bytes()).await;
                            let _ = err.io.shutdown().await;
                        });
                    }
                }
                continue;
            }
        };
        let request = stream.header("requestid").unwrap_or("").to_string();
        let kind = stream.header("streamtype").unwrap_or("").to_string();
        let entry = pending
            .entry(request.clone())
            .or_insert_with(|| PendingPair {
                error: None,
                data: None,
                deadline: tokio::time::Instant::now() + STREAM_PAIR_TIMEOUT,
            });
        match kind.as_str() {
            "error" => entry.error = Some(stream),
            "data" => entry.data = Some(stream),
            // An unknown stream type: dropping it ends it with FIN.
            _ => {
                if entry.error.is_none() && entry.data.is_none() {
                    pending.remove(&request);
                }
                continue;
            }
        }
        if let Some(PendingPair {
            error: Some(_),
            data: Some(_),
            ..
        }) = pending.get(&request)
            && let Some(PendingPair {
                error: Some(err),
                data: Some(data),
                ..
            }) = pending.remove(&request)
        {
            let dial = dial.clone();
            tokio::spawn(async move { forward(err, data, &*dial).await });
        }
    }
    session
        .await
        .map_err(|e| SpdyError::Protocol(format!("session task: {e}")))?
}

/// The streams of one port-forward request seen so far.
struct PendingPair {
    error: Option<SpdyStream>,
    data: Option<SpdyStream>,
    /// When the pair is given up if it is still not whole.
    deadline: tokio::time::Instant,
}

async fn forward<D, Fut, S>(mut err: SpdyStream, mut data: SpdyStream, dial: &D)
where
    D: Fn(u16) -> Fut,
    Fut: std::future::Future<Output = Result<S, String>>,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let port = data
        .header("port")
        .and_then(|p| p.trim().parse::<u16>().ok());
    let result = match port {
        None => Err(format!(
            "invalid port header {:?}",
            data.header("port").unwrap_or("")
        )),
        Some(port) => match dial(port).await {
            Ok(mut conn) => {
                let _ = tokio::io::copy_bidirectional(&mut data.io, &mut conn).await;
                Ok(())
            }
            Err(e) => Err(e),
        },
    };
    if let Err(text) = result {
        let _ = err.io.write_all(text.as_bytes()).await;
    }
    let _ = data.io.shutdown().await;
    let _ = err.io.shutdown().await;
}

/// The byte stream tunnelled through a WebSocket (`SPDY/3.1+portforward.k8s.io`): each
/// binary message carries the next bytes, in both directions.
pub(crate) fn tunnel<W, E>(ws: W) -> DuplexStream
where
    W: futures::Stream<Item = Result<tokio_tungstenite::tungstenite::Message, E>>
        + futures::Sink<tokio_tungstenite::tungstenite::Message>
        + Unpin
        + Send
        + 'static,
    E: Send,
    <W as futures::Sink<tokio_tungstenite::tungstenite::Message>>::Error: Send,
{
    use tokio_tungstenite::tungstenite::Message;
    let (ours, theirs) = tokio::io::duplex(PIPE);
    tokio::spawn(async move {
        let (mut sink, mut source) = ws.split();
        let (mut rd, mut wr) = tokio::io::split(ours);
        let mut buf = vec![0u8; DATA_CHUNK];
        let mut reading = true;
        loop {
            tokio::select! {
                msg = source.next() => match msg {
                    Some(Ok(Message::Binary(data))) => {
                        if wr.write_all(&data).await.is_err() {
                            break;
                        }
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    // Text is not part of the tunnel; a close or an error ends it.
                    _ => break,
                },
                n = rd.read(&mut buf), if reading => match n {
                    Ok(0) | Err(_) => {
                        reading = false;
                        let _ = sink.send(Message::Close(None)).await;
                    }
                    Ok(n) => {
                        if sink.send(Message::Binary(buf[..n].to_vec().into())).await.is_err() {
                            break;
                        }
                    }
                },
            }
        }
        let _ = wr.shutdown().await;
        let _ = sink.close().await;
    });
    theirs
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
    use super::*;

    /// The client side, as spdystream writes it: one zlib stream with the dictionary.
    struct Client {
        deflate: Compress,
        inflate: Decompress,
    }

    impl Client {
        fn new() -> Self {
            Self {
                deflate: new_deflate(),
                inflate: Decompress::new(true),
            }
        }

        fn block(&mut self, headers: &[(&str, &str)]) -> Vec<u8> {
            let mut plain = (headers.len() as u32).to_be_bytes().to_vec();
            for (k, v) in headers {
                plain.extend_from_slice(&(k.len() as u32).to_be_bytes());
                plain.extend_from_slice(k.as_bytes());
                plain.extend_from_slice(&(v.len() as u32).to_be_bytes());
                plain.extend_from_slice(v.as_bytes());
            }
            let mut out = Vec::with_capacity(plain.len() + 64);
            self.deflate
                .compress_vec(&plain, &mut out, FlushCompress::Sync)
                .unwrap();
            out
        }

        fn syn_stream(&mut self, id: u32, headers: &[(&str, &str)]) -> Vec<u8> {
            let mut body = id.to_be_bytes().to_vec();
            body.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
            body.extend(self.block(headers));
            control(SYN_STREAM, 0, &body)
        }

        /// Reads one frame: (control type or None for data, stream id, flags, payload).
        async fn frame<R: AsyncRead + Unpin>(
            &mut self,
            r: &mut R,
        ) -> (Option<u16>, u32, u8, Vec<u8>) {
            let mut h = [0u8; 8];
            r.read_exact(&mut h).await.unwrap();
            let len = u32::from_be_bytes([0, h[5], h[6], h[7]]) as usize;
            let mut body = vec![0u8; len];
            r.read_exact(&mut body).await.unwrap();
            if h[0] & 0x80 == 0 {
                return (
                    None,
                    u32::from_be_bytes([h[0], h[1], h[2], h[3]]),
                    h[4],
                    body,
                );
            }
            let kind = u16::from_be_bytes([h[2], h[3]]);
            let id = if body.len() >= 4 {
                stream_id(&body).unwrap()
            } else {
                0
            };
            if kind == SYN_REPLY {
                let mut plain = Vec::with_capacity(256);
                let input = &body[4..];
                if let Err(e) =
                    self.inflate
                        .decompress_vec(input, &mut plain, FlushDecompress::Sync)
                {
                    assert!(e.needs_dictionary().is_some(), "{e}");
                    self.inflate.set_dictionary(DICTIONARY).unwrap();
                    let used = self.inflate.total_in() as usize;
                    self.inflate
                        .decompress_vec(&input[used..], &mut plain, FlushDecompress::Sync)
                        .unwrap();
                }
                assert_eq!(plain, 0u32.to_be_bytes(), "an empty header block");
            }
            (Some(kind), id, h[4], body)
        }
    }

    async fn echo_or_refuse(port: u16) -> Result<DuplexStream, String> {
        if port != 80 {
            return Err(format!("connection refused on port {port}"));
        }
        let (a, mut b) = tokio::io::duplex(1024);
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            while let Ok(n) = b.read(&mut buf).await {
                if n == 0 || b.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        });
        Ok(a)
    }

    #[tokio::test]
    async fn port_forward_pairs_streams_and_reports_dial_errors() {
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(portforward(server_io, echo_or_refuse));
        let (mut rd, mut wr) = tokio::io::split(client_io);
        let mut c = Client::new();
        // Request 0 to port 80: error stream (closed at once by the client), data stream.
        let err_headers = [("streamtype", "error"), ("port", "80"), ("requestid", "0")];
        let data_headers = [("streamtype", "data"), ("port", "80"), ("requestid", "0")];
        wr.write_all(&c.syn_stream(1, &err_headers)).await.unwrap();
        assert_eq!(c.frame(&mut rd).await.0, Some(SYN_REPLY));
        wr.write_all(&data_frame(1, FLAG_FIN, &[])).await.unwrap();
        wr.write_all(&c.syn_stream(3, &data_headers)).await.unwrap();
        let reply = c.frame(&mut rd).await;
        assert_eq!((reply.0, reply.1), (Some(SYN_REPLY), 3));
        wr.write_all(&data_frame(3, 0, b"hello")).await.unwrap();
        let echoed = c.frame(&mut rd).await;
        assert_eq!(
            (echoed.0, echoed.1, echoed.3.as_slice()),
            (None, 3, &b"hello"[..])
        );
        // A ping from the client (odd id) comes back.
        wr.write_all(&control(PING, 0, &7u32.to_be_bytes()))
            .await
            .unwrap();
        assert_eq!(c.frame(&mut rd).await.0, Some(PING));

        // Request 1 to port 81: the dial fails; the text arrives on its error stream.
        wr.write_all(&c.syn_stream(
            5,
            &[("streamtype", "error"), ("port", "81"), ("requestid", "1")],
        ))
        .await
        .unwrap();
        c.frame(&mut rd).await;
        wr.write_all(&c.syn_stream(
            7,
            &[("streamtype", "data"), ("port", "81"), ("requestid", "1")],
        ))
        .await
        .unwrap();
        c.frame(&mut rd).await;
        let mut error_text = Vec::new();
        let mut fins = 0;
        while fins < 2 {
            let (kind, id, flags, body) = c.frame(&mut rd).await;
            assert_eq!(kind, None, "only data frames now");
            if id == 5 {
                error_text.extend(body);
            }
            if flags & FLAG_FIN != 0 && (id == 5 || id == 7) {
                fins += 1;
            }
        }
        assert_eq!(
            String::from_utf8(error_text).unwrap(),
            "connection refused on port 81"
        );

        // GOAWAY ends the session cleanly.
        let mut goaway = 0u32.to_be_bytes().to_vec();
        goaway.extend_from_slice(&0u32.to_be_bytes());
        wr.write_all(&control(GOAWAY, 0, &goaway)).await.unwrap();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn bad_input_ends_the_session_with_an_error() {
        // A frame longer than the limit.
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let session = tokio::spawn(portforward(server, echo_or_refuse));
        let mut huge = control(SYN_STREAM, 0, &[]);
        huge[5..8].copy_from_slice(&[0xff, 0xff, 0xff]);
        client.write_all(&huge).await.unwrap();
        let err = session.await.unwrap().unwrap_err();
        assert!(err.to_string().contains("over the limit"), "{err}");

        // A header block that is not zlib.
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let session = tokio::spawn(portforward(server, echo_or_refuse));
        let mut body = 1u32.to_be_bytes().to_vec();
        body.extend_from_slice(&[0; 6]);
        body.extend_from_slice(b"not zlib at all");
        client
            .write_all(&control(SYN_STREAM, 0, &body))
            .await
            .unwrap();
        let err = session.await.unwrap().unwrap_err();
        assert!(err.to_string().contains("decompress"), "{err}");

        // The wrong version.
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let session = tokio::spawn(portforward(server, echo_or_refuse));
        let mut frame = control(PING, 0, &1u32.to_be_bytes());
        frame[1] = 2;
        client.write_all(&frame).await.unwrap();
        let err = session.await.unwrap().unwrap_err();
        assert!(err.to_string().contains("version 2"), "{err}");
    }

    /// A header block of one 32 KiB name whose value is 32 Ki NULs: 64 KiB that would
    /// unpack to 32 Ki copies of the name (1 GiB).
    fn amplifying_block() -> Vec<u8> {
        let name = "n".repeat(32 * 1024);
        let value = "\0".repeat(32 * 1024 - 16);
        let mut plain = 1u32.to_be_bytes().to_vec();
        plain.extend_from_slice(&(name.len() as u32).to_be_bytes());
        plain.extend_from_slice(name.as_bytes());
        plain.extend_from_slice(&(value.len() as u32).to_be_bytes());
        plain.extend_from_slice(value.as_bytes());
        plain
    }

    #[test]
    fn header_values_cannot_amplify_a_block() {
        let plain = amplifying_block();
        assert!(plain.len() <= MAX_HEADER_BLOCK);
        let err = parse_header_block(&plain).unwrap_err();
        assert!(err.to_string().contains("unpacking to over"), "{err}");
        // Many values of a short name are fine up to the count limit.
        let value = vec![b'v'; MAX_HEADER_VALUES * 2 - 1]
            .into_iter()
            .enumerate()
            .map(|(i, c)| if i % 2 == 1 { 0 } else { c })
            .collect::<Vec<u8>>();
        let mut b = 1u32.to_be_bytes().to_vec();
        b.extend_from_slice(&1u32.to_be_bytes());
        b.extend_from_slice(b"a");
        b.extend_from_slice(&(value.len() as u32).to_be_bytes());
        b.extend_from_slice(&value);
        assert_eq!(parse_header_block(&b).unwrap().len(), MAX_HEADER_VALUES);
        let mut more = value.clone();
        more.extend_from_slice(b"\0v");
        let mut b = 1u32.to_be_bytes().to_vec();
        b.extend_from_slice(&1u32.to_be_bytes());
        b.extend_from_slice(b"a");
        b.extend_from_slice(&(more.len() as u32).to_be_bytes());
        b.extend_from_slice(&more);
        assert!(parse_header_block(&b).is_err());
    }

    #[tokio::test]
    async fn an_amplifying_syn_stream_ends_the_session() {
        let (client, server) = tokio::io::duplex(1 << 20);
        let session = tokio::spawn(portforward(server, echo_or_refuse));
        let (_rd, mut wr) = tokio::io::split(client);
        let mut c = Client::new();
        let mut compressed = Vec::with_capacity(1 << 16);
        c.deflate
            .compress_vec(&amplifying_block(), &mut compressed, FlushCompress::Sync)
            .unwrap();
        let mut body = 1u32.to_be_bytes().to_vec();
        body.extend_from_slice(&[0; 6]);
        body.extend(compressed);
        assert!(body.len() < 1024, "{} bytes on the wire", body.len());
        wr.write_all(&control(SYN_STREAM, 0, &body)).await.unwrap();
        let err = session.await.unwrap().unwrap_err();
        assert!(err.to_string().contains("unpacking to over"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_half_made_pair_is_given_up_after_the_kubelets_timeout() {
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(portforward(server_io, echo_or_refuse));
        let (mut rd, mut wr) = tokio::io::split(client_io);
        let mut c = Client::new();
        let start = tokio::time::Instant::now();
        wr.write_all(&c.syn_stream(
            1,
            &[("streamtype", "error"), ("port", "80"), ("requestid", "7")],
        ))
        .await
        .unwrap();
        assert_eq!(c.frame(&mut rd).await.0, Some(SYN_REPLY));
        // No data stream follows: after 30 s the error stream says so and ends.
        let mut text = Vec::new();
        loop {
            let (kind, id, flags, body) = c.frame(&mut rd).await;
            assert_eq!((kind, id), (None, 1));
            text.extend(body);
            if flags & FLAG_FIN != 0 {
                break;
            }
        }
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "(request=7) timed out waiting for streams"
        );
        assert!(start.elapsed() >= STREAM_PAIR_TIMEOUT);
        drop(wr);
        drop(rd);
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn open_streams_are_bounded_per_session() {
        let (client_io, server_io) = tokio::io::duplex(1 << 20);
        let server = tokio::spawn(portforward(server_io, echo_or_refuse));
        let (mut rd, mut wr) = tokio::io::split(client_io);
        let mut c = Client::new();
        let unknown = [("streamtype", "other"), ("requestid", "1")];
        // The handler drops streams of an unknown type (FIN from us); the client never
        // closes its side, so each stays open.
        let mut fins = 0;
        for i in 0..MAX_OPEN_STREAMS as u32 {
            wr.write_all(&c.syn_stream(2 * i + 1, &unknown))
                .await
                .unwrap();
            loop {
                match c.frame(&mut rd).await {
                    (None, ..) => fins += 1,
                    (kind, id, ..) => {
                        assert_eq!((kind, id), (Some(SYN_REPLY), 2 * i + 1));
                        break;
                    }
                }
            }
        }
        let refused = 2 * MAX_OPEN_STREAMS as u32 + 1;
        wr.write_all(&c.syn_stream(refused, &unknown))
            .await
            .unwrap();
        let (kind, id, _, body) = loop {
            let f = c.frame(&mut rd).await;
            if f.0.is_some() {
                break f;
            }
            fins += 1;
        };
        assert_eq!((kind, id), (Some(RST_STREAM), refused));
        assert_eq!(body[4..], REFUSED_STREAM.to_be_bytes());
        // Once the client closes one, a new stream is taken again.
        wr.write_all(&data_frame(1, FLAG_FIN, &[])).await.unwrap();
        while fins < MAX_OPEN_STREAMS {
            assert_eq!(c.frame(&mut rd).await.0, None);
            fins += 1;
        }
        let next = refused + 2;
        wr.write_all(&c.syn_stream(next, &unknown)).await.unwrap();
        let (kind, id, ..) = c.frame(&mut rd).await;
        assert_eq!((kind, id), (Some(SYN_REPLY), next));
        drop(wr);
        drop(rd);
        server.await.unwrap().unwrap();
    }

    #[test]
    fn header_blocks_parse_and_refuse_truncation() {
        let mut b = 1u32.to_be_bytes().to_vec();
        b.extend_from_slice(&4u32.to_be_bytes());
        b.extend_from_slice(b"Port");
        b.extend_from_slice(&5u32.to_be_bytes());
        b.extend_from_slice(b"80\x0081");
        assert_eq!(
            parse_header_block(&b).unwrap(),
            [
                ("port".to_string(), "80".to_string()),
                ("port".to_string(), "81".to_string())
            ]
        );
        assert!(parse_header_block(&b[..b.len() - 1]).is_err());
        assert!(parse_header_block(&[0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
