//! The webhook server's certificate, re-read from disk when it changes (cert-manager and
//! kubelet-projected secrets rotate it in place).

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::WebhookError;

/// Resolves the server certificate from a PEM certificate chain and key on disk. A
/// handshake never waits for the disk: it gets the certificate in hand and, unless a
/// check is already under way, starts one on a blocking thread that re-reads both files
/// (a few kilobytes) and, when their bytes changed, parses them again; the next
/// handshakes get the new certificate. A pair that does not parse (e.g. caught
/// half-written) is logged and the previous certificate stays in use.
#[derive(Debug)]
pub(crate) struct ReloadingCert(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: Mutex<Loaded>,
    /// A check of the files is under way.
    checking: AtomicBool,
}

#[derive(Debug)]
struct Loaded {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    key: Arc<CertifiedKey>,
}

impl ReloadingCert {
    /// Loads the pair once; an unreadable or invalid pair is an error here.
    pub(crate) fn new(
        cert: PathBuf,
        key: PathBuf,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, WebhookError> {
        let cert_pem = read(&cert)?;
        let key_pem = read(&key)?;
        let loaded = parse(&cert_pem, &key_pem, &provider).map_err(|message| {
            WebhookError::Tls(format!(
                "{} and {}: {message}",
                cert.display(),
                key.display()
            ))
        })?;
        Ok(Self(Arc::new(Inner {
            cert,
            key,
            provider,
            current: Mutex::new(Loaded {
                cert_pem,
                key_pem,
                key: loaded,
            }),
            checking: AtomicBool::new(false),
        })))
    }

    fn current(&self) -> Arc<CertifiedKey> {
        self.0
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .key
            .clone()
    }

    /// Starts a check of the files unless one runs: on a blocking thread when there is a
    /// Tokio runtime, else here.
    fn check_soon(&self) {
        if self.0.checking.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = self.0.clone();
        let check = move || {
            inner.refresh();
            inner.checking.store(false, Ordering::Release);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(check);
            }
            Err(_) => check(),
        }
    }
}

impl Inner {
    fn refresh(&self) {
        let (Ok(cert_pem), Ok(key_pem)) = (read(&self.cert), read(&self.key)) else {
            return;
        };
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if cert_pem != current.cert_pem || key_pem != current.key_pem {
            match parse(&cert_pem, &key_pem, &self.provider) {
                Ok(key) => {
                    tracing::info!(cert = %self.cert.display(), "webhook serving certificate reloaded");
                    *current = Loaded {
                        cert_pem,
                        key_pem,
                        key,
                    };
                }
                Err(message) => {
                    tracing::warn!(cert = %self.cert.display(), "keeping the previous webhook certificate: {message}");
                }
            }
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let key = self.current();
        self.check_soon();
        Some(key)
    }
}

fn read(path: &std::path::Path) -> Result<Vec<u8>, WebhookError> {
    std::fs::read(path).map_err(|e| WebhookError::Tls(format!("reading {}: {e}", path.display())))
}

/// Parses a PEM chain and key; the message never contains key material.
fn parse(
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("invalid certificate PEM: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate in the certificate file".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("invalid private key PEM: {e}"))?;
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("unusable private key: {e}"))?;
    let certified = CertifiedKey::new(certs, signing);
    certified
        .keys_match()
        .map_err(|e| format!("the key does not match the certificate: {e}"))?;
    Ok(Arc::new(certified))
}
