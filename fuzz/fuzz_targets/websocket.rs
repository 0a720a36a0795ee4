//! The Kubernetes WebSocket channel protocols on both ends: the server's exec and
//! port-forward sessions reading a client's frames, and the client's exec and
//! port-forward reading a server's. Frames of any opcode, length form, mask and
//! fragmentation; channel bytes, base64 text, resize JSON, the v5 close signal, port
//! prefixes.
//!
//! Input: the first byte chooses the side (bit 0: client side), the session (bit 1:
//! port-forward) and the server's sub-protocol (bits 2 to 4); the rest is the raw bytes
//! the peer sends before closing. Checks: no panic, no hang (each session ends once its
//! peer has closed).
#![no_main]

use kubewright_fuzz::runtime;
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(runtime);

fuzz_target!(|data: &[u8]| {
    let Some((&which, frames)) = data.split_first() else {
        return;
    };
    let port_forward = which & 2 != 0;
    if which & 1 == 1 {
        let v5 = which & 4 != 0;
        RT.block_on(kubewright_client::fuzzing::websocket_session(
            port_forward,
            v5,
            frames,
        ));
    } else {
        RT.block_on(kubewright_apiserver::fuzzing::websocket_session(
            which >> 2,
            port_forward,
            frames,
        ));
    }
});
