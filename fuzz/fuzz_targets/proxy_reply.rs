//! What an HTTP or SOCKS5 proxy answers the client while it opens a tunnel: a `CONNECT`
//! response head (status line, headers, a body that must not come), or the SOCKS5 method
//! choice, username/password result and connect reply with any address type.
//!
//! Input: the first byte chooses SOCKS5 (odd) or HTTP `CONNECT`; the rest is everything
//! the proxy sends before closing. Checks: no panic, no hang (the reply ends), and an
//! error never shows the proxy's password.
#![no_main]

use kubewright_fuzz::runtime;
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(runtime);

fuzz_target!(|data: &[u8]| {
    let Some((&which, reply)) = data.split_first() else {
        return;
    };
    if let Err(e) = RT.block_on(kubewright_client::fuzzing::proxy_reply(
        which % 2 == 1,
        reply,
    )) {
        assert!(
            !e.contains(kubewright_client::fuzzing::PROXY_PASSWORD),
            "{e}"
        );
    }
});
