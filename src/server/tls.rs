//! The webhook's TLS configuration: the serving certificate and key, read
//! from PEM files, behind a resolver so a new pair can be swapped in.

use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::version::{TLS12, TLS13};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate and key cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file is unreadable or holds no certificate.
    #[error("cannot read certificate {path}: {reason}")]
    Cert {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The key file is unreadable or holds no private key.
    #[error("cannot read private key {path}: {reason}")]
    Key {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The key does not fit the certificate, or rustls cannot use it.
    #[error("certificate {cert} and key {key} cannot be used together: {reason}")]
    Mismatch {
        /// The certificate file.
        cert: String,
        /// The key file.
        key: String,
        /// What rustls said.
        reason: String,
    },
}

/// The crypto provider the webhook uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads a certificate chain and its private key, and checks they belong
/// together.
pub fn load_certified_key(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    let cert_name = cert.display().to_string();
    let key_name = key.display().to_string();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|iter| iter.collect::<Result<_, _>>())
        .map_err(|e| TlsError::Cert {
            path: cert_name.clone(),
            reason: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Cert {
            path: cert_name,
            reason: "no PEM certificate in the file".into(),
        });
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key_name.clone(),
        reason: e.to_string(),
    })?;
    let mismatch = |reason: String| TlsError::Mismatch {
        cert: cert_name.clone(),
        key: key_name.clone(),
        reason,
    };
    let certified =
        CertifiedKey::from_der(chain, private, &provider()).map_err(|e| mismatch(e.to_string()))?;
    Ok(Arc::new(certified))
}

/// Hands every handshake the current certificate; [`CertResolver::set`]
/// swaps it for new connections without touching established ones.
#[derive(Debug)]
pub struct CertResolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertResolver {
    /// A resolver serving `key`.
    pub fn new(key: Arc<CertifiedKey>) -> Self {
        Self {
            current: RwLock::new(key),
        }
    }

    /// Serves `key` from the next handshake on.
    pub fn set(&self, key: Arc<CertifiedKey>) {
        match self.current.write() {
            Ok(mut guard) => *guard = key,
            Err(poisoned) => *poisoned.into_inner() = key,
        }
    }

    /// The certificate served now.
    pub fn get(&self) -> Arc<CertifiedKey> {
        match self.current.read() {
            Ok(guard) => Arc::clone(&guard),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.get())
    }
}

/// A rustls server configuration: TLS 1.2 and 1.3, ALPN `h2` and
/// `http/1.1`, certificates from `resolver`.
pub fn server_config(resolver: Arc<CertResolver>) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&TLS13, &TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
