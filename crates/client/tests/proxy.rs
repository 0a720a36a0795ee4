//! Proxies: `https://` (CONNECT inside TLS), `socks5://` and `socks5h://` proxies, and
//! proxies from the environment with `NO_PROXY`, against in-process fake proxies that
//! forward to a `TestServer` and count their tunnels.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use base64::Engine as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kubewright_apiserver::TestServer;
use kubewright_client::config::{KubeConfigOptions, Kubeconfig, certs_from_pem};
use kubewright_client::proxy::ProxyEnv;
use kubewright_client::{Api, Client, Config};
use kubewright_core::ListParams;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The name in the TestServer's certificate that does not resolve here: only a proxy
/// (which maps it to 127.0.0.1) can reach it.
const SVC: &str = "kubernetes.default.svc";

/// Where a fake proxy connects for a requested host.
fn route(host: &str, port: u16) -> SocketAddr {
    let ip: IpAddr = match host.parse::<IpAddr>() {
        Ok(ip) if !ip.is_loopback() => ip,
        _ => IpAddr::from([127, 0, 0, 1]),
    };
    SocketAddr::new(ip, port)
}

#[derive(Default)]
struct Seen {
    tunnels: AtomicUsize,
    /// `Proxy-Authorization` headers (HTTP) or `user:password` (SOCKS5).
    credentials: Mutex<Vec<String>>,
    /// `name:<host>:<port>` or `ip:<ip>:<port>`.
    targets: Mutex<Vec<String>>,
}

fn tls_acceptor() -> (tokio_rustls::TlsAcceptor, Vec<u8>) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    #[allow(
        deprecated,
        reason = "ring by choice: rustls 0.23.48 deprecates its provider for lacking post-quantum key exchange, which aws-lc-rs has at the cost of a C and cmake build"
    )]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        ca.der().to_vec(),
    )
}

/// An HTTP CONNECT proxy behind TLS; answers 407 unless `Proxy-Authorization` is
/// `Basic base64(user:password)` when `auth` is set. Returns its address, what it saw
/// and its CA (DER).
async fn https_connect_proxy(auth: Option<&str>) -> (SocketAddr, Arc<Seen>, Vec<u8>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let (acceptor, ca) = tls_acceptor();
    let expected = auth.map(|a| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(a)
        )
    });
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, seen, expected) = (acceptor.clone(), s.clone(), expected.clone());
            tokio::spawn(async move {
                let Ok(mut inbound) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if inbound.read_exact(&mut byte).await.is_err() {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).to_string();
                let authorization = text
                    .lines()
                    .find_map(|l| l.strip_prefix("Proxy-Authorization: "))
                    .map(str::to_owned);
                if let Some(a) = &authorization {
                    seen.credentials.lock().unwrap().push(a.clone());
                }
                if expected.is_some() && authorization != expected {
                    let _ = inbound
                        .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
                        .await;
                    return;
                }
                let target = text.split_whitespace().nth(1).unwrap_or("").to_owned();
                let (host, port) = target.rsplit_once(':').unwrap();
                seen.targets.lock().unwrap().push(format!("name:{target}"));
                let Ok(mut outbound) = TcpStream::connect(route(host, port.parse().unwrap())).await
                else {
                    return;
                };
                seen.tunnels.fetch_add(1, Ordering::SeqCst);
                let _ = inbound
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await;
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (addr, seen, ca)
}

/// A SOCKS5 server (RFC 1928) requiring `user:password` (RFC 1929) when `auth` is set.
async fn socks5_proxy(auth: Option<(&'static str, &'static str)>) -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let seen = s.clone();
            tokio::spawn(async move {
                let _ = socks5_serve(&mut inbound, auth, &seen).await;
            });
        }
    });
    (addr, seen)
}

async fn socks5_serve(
    inbound: &mut TcpStream,
    auth: Option<(&str, &str)>,
    seen: &Seen,
) -> std::io::Result<()> {
    let mut head = [0u8; 2];
    inbound.read_exact(&mut head).await?;
    assert_eq!(head[0], 5);
    let mut methods = vec![0u8; usize::from(head[1])];
    inbound.read_exact(&mut methods).await?;
    if let Some((user, password)) = auth {
        if !methods.contains(&2) {
            return inbound.write_all(&[5, 0xff]).await;
        }
        inbound.write_all(&[5, 2]).await?;
        let got_user = read_len_prefixed(inbound, true).await?;
        let got_password = read_len_prefixed(inbound, false).await?;
        seen.credentials
            .lock()
            .unwrap()
            .push(format!("{got_user}:{got_password}"));
        if (got_user.as_str(), got_password.as_str()) != (user, password) {
            return inbound.write_all(&[1, 1]).await;
        }
        inbound.write_all(&[1, 0]).await?;
    } else {
        assert!(methods.contains(&0));
        inbound.write_all(&[5, 0]).await?;
    }
    let mut request = [0u8; 4];
    inbound.read_exact(&mut request).await?;
    assert_eq!(&request[..3], &[5, 1, 0]);
    let (label, host) = match request[3] {
        1 => {
            let mut ip = [0u8; 4];
            inbound.read_exact(&mut ip).await?;
            ("ip", IpAddr::from(ip).to_string())
        }
        4 => {
            let mut ip = [0u8; 16];
            inbound.read_exact(&mut ip).await?;
            ("ip", IpAddr::from(ip).to_string())
        }
        3 => ("name", read_len_prefixed(inbound, false).await?),
        other => panic!("address type {other}"),
    };
    let port = inbound.read_u16().await?;
    seen.targets
        .lock()
        .unwrap()
        .push(format!("{label}:{host}:{port}"));
    let Ok(mut outbound) = TcpStream::connect(route(&host, port)).await else {
        return inbound.write_all(&[5, 5, 0, 1, 0, 0, 0, 0, 0, 0]).await;
    };
    seen.tunnels.fetch_add(1, Ordering::SeqCst);
    inbound.write_all(&[5, 0, 0, 1, 127, 0, 0, 1, 0, 0]).await?;
    tokio::io::copy_bidirectional(inbound, &mut outbound).await?;
    Ok(())
}

async fn read_len_prefixed<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    version_first: bool,
) -> std::io::Result<String> {
    if version_first {
        let mut version = [0u8; 1];
        s.read_exact(&mut version).await?;
        assert_eq!(version[0], 1, "RFC 1929 version");
    }
    let len = s.read_u8().await?;
    let mut buf = vec![0u8; usize::from(len)];
    s.read_exact(&mut buf).await?;
    Ok(String::from_utf8(buf).unwrap())
}

/// A TLS TestServer and a config for it, without proxies from the environment.
async fn server_and_config() -> (TestServer, Config) {
    let server = TestServer::builder()
        .tls(true)
        .token("proxy-test-token")
        .start()
        .await
        .unwrap();
    let kc = Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).unwrap();
    config.proxy_env = ProxyEnv::none();
    (server, config)
}

fn with_host(config: &mut Config, server: &TestServer, host: &str) {
    config.cluster_url = format!("https://{host}:{}", server.addr().port())
        .parse()
        .unwrap();
}

async fn list(config: Config) -> Result<(), kubewright_client::Error> {
    let client = Client::new(config).unwrap();
    Api::<ConfigMap>::namespaced(client, "default")
        .list(&ListParams::default())
        .await
        .map(|_| ())
}

#[tokio::test]
async fn https_proxy_with_credentials() {
    let (server, mut config) = server_and_config().await;
    let (proxy, seen, proxy_ca) = https_connect_proxy(Some("alice:p@ss")).await;
    config.root_certs.as_mut().unwrap().push(proxy_ca);
    let mut good = config.clone();
    good.proxy_url = Some(
        format!("https://alice:p%40ss@localhost:{}", proxy.port())
            .parse()
            .unwrap(),
    );
    assert!(!format!("{good:?}").contains("p%40ss"));
    let client = Client::new(good).unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let resp = client
        .send(http::Request::get("/version").body(vec![]).unwrap())
        .await
        .unwrap();
    assert_eq!(
        resp.version(),
        http::Version::HTTP_2,
        "h2 inside the tunnel"
    );
    assert_eq!(seen.tunnels.load(Ordering::SeqCst), 1, "one pooled tunnel");
    assert_eq!(
        seen.targets.lock().unwrap()[0],
        format!("name:127.0.0.1:{}", server.addr().port())
    );

    // Wrong credentials: the proxy's 407 is an error without the password.
    let mut bad = config.clone();
    bad.max_retries = 0;
    bad.proxy_url = Some(
        format!("https://alice:wr0ng-pw@localhost:{}", proxy.port())
            .parse()
            .unwrap(),
    );
    let err = list(bad).await.unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(text.contains("407"), "{text}");
    assert!(!text.contains("wr0ng-pw"), "{text}");

    // A proxy whose certificate is not trusted.
    let mut untrusted = config;
    untrusted.max_retries = 0;
    untrusted.root_certs =
        Some(certs_from_pem(server.ca_pem().unwrap().as_bytes(), "server CA").unwrap());
    untrusted.proxy_url = Some(
        format!("https://localhost:{}", proxy.port())
            .parse()
            .unwrap(),
    );
    let err = list(untrusted).await.unwrap_err();
    let debug = format!("{err:?}");
    assert!(
        debug.contains("Tls { proxy") && debug.contains("UnknownIssuer"),
        "{debug}"
    );
}

#[tokio::test]
async fn socks5h_resolves_the_name_at_the_proxy() {
    let (server, mut config) = server_and_config().await;
    let (proxy, seen) = socks5_proxy(Some(("bob", "s0cks-pw"))).await;
    with_host(&mut config, &server, SVC);
    let mut good = config.clone();
    good.proxy_url = Some(
        format!("socks5h://bob:s0cks-pw@127.0.0.1:{}", proxy.port())
            .parse()
            .unwrap(),
    );
    list(good).await.unwrap();
    assert_eq!(seen.tunnels.load(Ordering::SeqCst), 1);
    assert_eq!(
        *seen.targets.lock().unwrap(),
        [format!("name:{SVC}:{}", server.addr().port())]
    );
    assert_eq!(*seen.credentials.lock().unwrap(), ["bob:s0cks-pw"]);

    let mut bad = config;
    bad.max_retries = 0;
    bad.proxy_url = Some(
        format!("socks5h://bob:wr0ng-pw@127.0.0.1:{}", proxy.port())
            .parse()
            .unwrap(),
    );
    let err = list(bad).await.unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(text.contains("authentication failed"), "{text}");
    assert!(!text.contains("wr0ng-pw"), "{text}");
}

#[tokio::test]
async fn socks5_resolves_the_name_locally() {
    let (server, mut config) = server_and_config().await;
    let (proxy, seen) = socks5_proxy(None).await;
    with_host(&mut config, &server, "localhost");
    config.proxy_url = Some(
        format!("socks5://127.0.0.1:{}", proxy.port())
            .parse()
            .unwrap(),
    );
    list(config).await.unwrap();
    assert_eq!(seen.tunnels.load(Ordering::SeqCst), 1);
    let targets = seen.targets.lock().unwrap();
    assert!(targets[0].starts_with("ip:"), "{targets:?}");
}

/// A non-loopback address of this machine, if it has one.
fn local_ip() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[tokio::test]
async fn proxies_from_the_environment_and_no_proxy() {
    let (proxy, seen) = socks5_proxy(None).await;
    let env = |no_proxy: &str| {
        let proxy_url = format!("socks5h://127.0.0.1:{}", proxy.port());
        let no_proxy = no_proxy.to_owned();
        ProxyEnv::from_lookup(move |name| match name {
            "https_proxy" => Some(proxy_url.clone()),
            "HTTP_PROXY" => Some("http://127.0.0.1:9".to_owned()),
            "NO_PROXY" => Some(no_proxy.clone()),
            _ => None,
        })
    };
    let (server, mut config) = server_and_config().await;

    // HTTPS_PROXY is used for https:// servers.
    with_host(&mut config, &server, SVC);
    config.proxy_env = env("example.com");
    list(config.clone()).await.unwrap();
    assert_eq!(seen.tunnels.load(Ordering::SeqCst), 1);

    // An explicit proxy-url wins over the environment.
    let (other, other_seen) = socks5_proxy(None).await;
    let mut explicit = config.clone();
    explicit.proxy_url = Some(
        format!("socks5h://127.0.0.1:{}", other.port())
            .parse()
            .unwrap(),
    );
    list(explicit).await.unwrap();
    assert_eq!(other_seen.tunnels.load(Ordering::SeqCst), 1);
    assert_eq!(seen.tunnels.load(Ordering::SeqCst), 1);

    // Loopback servers are never proxied.
    with_host(&mut config, &server, "127.0.0.1");
    list(config.clone()).await.unwrap();
    with_host(&mut config, &server, "localhost");
    list(config.clone()).await.unwrap();
    assert_eq!(seen.tunnels.load(Ordering::SeqCst), 1);

    // NO_PROXY: a server on a non-loopback address of this machine.
    let Some(ip) = local_ip() else {
        eprintln!("no non-loopback address: NO_PROXY bypass not tested end to end");
        return;
    };
    let server = TestServer::builder()
        .addr(SocketAddr::new(ip, 0))
        .tls(true)
        .token("proxy-test-token")
        .start()
        .await
        .unwrap();
    let kc = Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).unwrap();
    config.tls_server_name = Some("localhost".to_owned());
    config.proxy_env = env("");
    list(config.clone()).await.unwrap();
    assert_eq!(seen.tunnels.load(Ordering::SeqCst), 2, "proxied");
    for no_proxy in [ip.to_string(), format!("{ip}/8"), "*".to_owned()] {
        config.proxy_env = env(&format!("foo.example, {no_proxy}"));
        list(config.clone()).await.unwrap();
        assert_eq!(
            seen.tunnels.load(Ordering::SeqCst),
            2,
            "NO_PROXY={no_proxy}"
        );
    }
}
