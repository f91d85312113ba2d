//! TLS on the front's port (Apache's proxy `tlsMode=permissive`): a connection whose first byte is 0x16 (the
//! content type of the TLS record carrying a ClientHello) is a TLS handshake (rustls, ring provider, TLS 1.2 and
//! 1.3, ALPN "h2"); any other first byte is plaintext HTTP/2 (its preface starts with "P"). `TlsConfig::from_pem`
//! parses the certificate chain and private key once; `Tls` errors name the PEM at fault.

use std::fmt;
use std::sync::Arc;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// The content type of a TLS handshake record: the first byte a TLS client sends.
pub const TLS_HANDSHAKE: u8 = 0x16;

/// The server side of the port's TLS: a certificate chain and its key, ready to accept.
#[derive(Clone)]
pub struct TlsConfig {
    pub(crate) acceptor: TlsAcceptor,
}

/// Why a certificate / key pair cannot serve TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsError {
    /// The certificate PEM holds no certificate, or one that cannot be parsed.
    Cert(String),
    /// The key PEM holds no (unencrypted) private key, or one that cannot be used.
    Key(String),
    /// The key is not the certificate's.
    Mismatch,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Cert(why) => write!(f, "the TLS certificate PEM is not usable: {why}"),
            TlsError::Key(why) => write!(f, "the TLS private key PEM is not usable: {why}"),
            TlsError::Mismatch => f.write_str("the TLS private key is not the certificate's key"),
        }
    }
}

impl std::error::Error for TlsError {}

impl TlsConfig {
    /// `cert_pem`: the server's certificate, then its chain (PEM "CERTIFICATE" sections); `key_pem`: its private
    /// key, PKCS#8, PKCS#1 (RSA) or SEC1 (EC), unencrypted.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<TlsConfig, TlsError> {
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Cert(e.to_string()))?;
        if chain.is_empty() {
            return Err(TlsError::Cert("no CERTIFICATE section".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| {
            TlsError::Key(match e {
                rustls::pki_types::pem::Error::NoItemsFound => {
                    "no unencrypted PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY section".into()
                }
                e => e.to_string(),
            })
        })?;
        let provider = Arc::new(ring::default_provider());
        provider
            .key_provider
            .load_private_key(key.clone_key())
            .map_err(|e| TlsError::Key(e.to_string()))?;
        let mut config = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Cert(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| match e {
                rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                    TlsError::Mismatch
                }
                e => TlsError::Cert(e.to_string()),
            })?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(TlsConfig {
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }
}
