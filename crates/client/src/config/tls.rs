//! TLS: PEM parsing and the rustls client configuration.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rustls::DigitallySignedStruct;
use rustls::client::ResolvesClientCert;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use secrecy::ExposeSecret as _;

use super::error::{ConfigError, pem_reason};
use super::{ClientIdentity, Config};

/// Parse every `CERTIFICATE` block of a PEM bundle into DER. `what` names the source
/// in errors (e.g. `certificate-authority-data of cluster "prod"`). An input without
/// any certificate is an error.
pub fn certs_from_pem(pem: &[u8], what: &str) -> Result<Vec<Vec<u8>>, ConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::Pem {
            what: what.to_owned(),
            reason: pem_reason(&e),
        })?;
    if certs.is_empty() {
        return Err(ConfigError::Pem {
            what: what.to_owned(),
            reason: "no CERTIFICATE block found".to_owned(),
        });
    }
    Ok(certs)
}

/// Parse the first private key (PKCS#1 RSA, SEC1 EC or PKCS#8) of a PEM input.
pub(crate) fn key_from_pem(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, ConfigError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| ConfigError::Pem {
        what: what.to_owned(),
        reason: match e {
            rustls_pki_types::pem::Error::NoItemsFound => {
                "no PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block found".to_owned()
            }
            other => pem_reason(&other),
        },
    })
}

impl ClientIdentity {
    /// Parse the certificate chain and the key (errors name `what`).
    pub(crate) fn parse(
        &self,
        what: &str,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), ConfigError> {
        let chain = certs_from_pem(&self.cert_chain_pem, &format!("{what}: client certificate"))?
            .into_iter()
            .map(CertificateDer::from)
            .collect();
        let key = key_from_pem(self.key_pem.expose_secret(), &format!("{what}: client key"))?;
        Ok((chain, key))
    }

    /// Check that the certificate chain and the key parse, and that the key is usable
    /// with the ring provider and matches the certificate.
    pub fn validate(&self, what: &str) -> Result<(), ConfigError> {
        self.certified_key(what).map(|_| ())
    }

    /// The parsed chain and signing key, ready for rustls (errors name `what`).
    pub(crate) fn certified_key(&self, what: &str) -> Result<CertifiedKey, ConfigError> {
        let (chain, key) = self.parse(what)?;
        let provider = ring_provider();
        CertifiedKey::from_der(chain, key, &provider).map_err(|e| ConfigError::Pem {
            what: format!("{what}: client certificate/key"),
            reason: e.to_string(),
        })
    }
}

/// The TLS client certificate of an exec credential plugin, for rustls.
///
/// It presents whatever certificate the plugin returned last: the
/// [`Authenticator`](super::Authenticator) replaces it whenever it re-runs the plugin
/// (expiry, or [`Authenticator::invalidate`](super::Authenticator::invalidate) after a
/// 401), so new connections present the new certificate. Install it as
/// `rustls::ClientConfig::client_auth_cert_resolver`, and open new connections when
/// [`ExecCertResolver::generation`] changes.
#[derive(Default)]
pub struct ExecCertResolver {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    generation: AtomicU64,
}

impl fmt::Debug for ExecCertResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecCertResolver")
            .field("has_certificate", &self.current().is_some())
            .field("generation", &self.generation())
            .finish()
    }
}

impl ExecCertResolver {
    /// The certificate presented by new connections, if any.
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Incremented every time the certificate changes (0 before the plugin first
    /// returned one).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Present `identity` from now on (`None`: no client certificate). Errors name
    /// `what`; the previous certificate is kept on error.
    pub(crate) fn set(
        &self,
        identity: Option<&ClientIdentity>,
        what: &str,
    ) -> Result<(), ConfigError> {
        let next = identity
            .map(|i| i.certified_key(what).map(Arc::new))
            .transpose()?;
        let mut current = self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let same = match (&*current, &next) {
            (None, None) => true,
            (Some(a), Some(b)) => a.cert == b.cert,
            _ => false,
        };
        if !same {
            *current = next;
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }
}

impl ResolvesClientCert for ExecCertResolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.current()
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// The provider of every TLS connection: *ring*, which builds with a C compiler only.
#[allow(
    deprecated,
    reason = "ring by choice: rustls 0.23.48 deprecates its provider for lacking post-quantum key exchange, which aws-lc-rs has at the cost of a C and cmake build"
)]
fn ring_provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

pub(crate) fn rustls_config(config: &Config) -> Result<rustls::ClientConfig, ConfigError> {
    let provider = Arc::new(ring_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Tls(e.to_string()))?;

    let builder = if config.accept_invalid_certs {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoCertificateVerification { provider }))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for (i, der) in config.root_certs.iter().flatten().enumerate() {
            roots
                .add(CertificateDer::from(der.as_slice()).into_owned())
                .map_err(|e| ConfigError::Pem {
                    what: format!("root certificate #{i}"),
                    reason: e.to_string(),
                })?;
        }
        builder.with_root_certificates(roots)
    };

    let mut tls = match &config.client_identity {
        Some(identity) => {
            let (chain, key) = identity.parse("client identity")?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| ConfigError::Pem {
                    what: "client identity: client certificate/key".to_owned(),
                    reason: e.to_string(),
                })?
        }
        None => builder.with_no_client_auth(),
    };
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tls)
}

/// Accepts any server certificate (`insecure-skip-tls-verify`), but still checks that
/// handshake signatures are made by the presented certificate's key.
#[derive(Debug)]
struct NoCertificateVerification {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for NoCertificateVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
