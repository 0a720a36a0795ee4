//! Port-forward over SPDY/3.1 (http/spdy.rs): frames from an untrusted client, zlib
//! header blocks with the SPDY dictionary, stream pairing and the pending-pair timer.
//!
//! Input: the first byte chooses the target: even, the bytes are a whole client session
//! (frames, then end of file); odd, the rest is one uncompressed header block. Checks: no
//! panic, and a header block never unpacks to more values or bytes than its bounds (the
//! 153-byte SYN_STREAM that once unpacked to 1 GiB is the seed `amplifying_block`).
#![no_main]

use kubewright_apiserver::fuzzing;
use kubewright_fuzz::runtime;
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(runtime);

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if which % 2 == 1 {
        if let Ok(values) = fuzzing::spdy_header_block(rest) {
            assert!(values <= 1024, "{values} header values");
        }
        return;
    }
    let _ = RT.block_on(fuzzing::spdy_session(rest));
});
