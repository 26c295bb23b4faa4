//! The webhook's TLS configuration: the serving certificate and key (and,
//! optionally, the CA that client certificates must chain to), read from PEM
//! files into a rustls configuration that can be swapped without a restart.
//!
//! The swap is an `ArcSwap` of the whole `ServerConfig`, taken by each new
//! handshake, rather than a `ResolvesServerCert` over a swapped key: the
//! client CA is reloaded with the certificate, and it lives in the
//! configuration's verifier, not in the resolver
//! (`certificate_rotated_through_data_symlink_twice`,
//! tests/https/operations.rs).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::version::{TLS12, TLS13};
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate, key or client CA cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file is unreadable or holds no certificate.
    #[error("cannot read certificate {path}: {source}")]
    Cert {
        /// The file.
        path: String,
        /// What went wrong.
        source: ChainError,
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
    /// The client CA file is unreadable or unusable.
    #[error("cannot use client CA {path}: {reason}")]
    ClientCa {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// The crypto provider the webhook uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The files the TLS configuration is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Serving certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// When set, clients must present a certificate signed by this CA (PEM).
    pub client_ca: Option<PathBuf>,
}

impl TlsFiles {
    /// Every file, for watching and comparing contents.
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        let mut paths = vec![self.cert.clone(), self.key.clone()];
        paths.extend(self.client_ca.clone());
        paths
    }
}

/// Why a file yields no certificate chain.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The file is unreadable or not PEM.
    #[error(transparent)]
    Pem(#[from] rustls_pki_types::pem::Error),
    /// The file holds no certificate.
    #[error("no PEM certificate in the file")]
    Empty,
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, ChainError> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(path).and_then(|iter| iter.collect::<Result<_, _>>())?;
    if chain.is_empty() {
        return Err(ChainError::Empty);
    }
    Ok(chain)
}

/// Reads a certificate chain and its private key, and checks they belong
/// together.
fn load_certified_key(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    let cert_name = cert.display().to_string();
    let key_name = key.display().to_string();
    let chain = read_chain(cert).map_err(|source| TlsError::Cert {
        path: cert_name.clone(),
        source,
    })?;
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key_name.clone(),
        reason: e.to_string(),
    })?;
    let certified =
        CertifiedKey::from_der(chain, private, &provider()).map_err(|e| TlsError::Mismatch {
            cert: cert_name,
            key: key_name,
            reason: e.to_string(),
        })?;
    Ok(Arc::new(certified))
}

/// The notAfter of a certificate, as a Unix timestamp.
fn not_after(cert: &CertificateDer<'_>) -> Option<i64> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    Some(parsed.validity().not_after.timestamp())
}

/// A loaded TLS configuration.
#[derive(Debug, Clone)]
pub struct LoadedTls {
    /// The rustls configuration: TLS 1.2 and 1.3, ALPN `h2` and `http/1.1`.
    pub config: Arc<ServerConfig>,
    /// The serving certificate's notAfter, as a Unix timestamp.
    pub(crate) not_after: Option<i64>,
    /// The served chain (DER, leaf first).
    pub(crate) chain: Vec<CertificateDer<'static>>,
}

/// Builds the rustls configuration from the files.
pub fn load(files: &TlsFiles) -> Result<LoadedTls, TlsError> {
    let certified = load_certified_key(&files.cert, &files.key)?;
    build(files, certified)
}

/// A throwaway self-signed certificate, for serving until the real files
/// exist (`--manage-certs` before the Secret is written): nobody trusts
/// it, so the replica stays not ready.
pub(crate) fn placeholder(files: &TlsFiles) -> Result<LoadedTls, TlsError> {
    let mismatch = |reason: String| TlsError::Mismatch {
        cert: files.cert.display().to_string(),
        key: files.key.display().to_string(),
        reason,
    };
    let generated = crate::pki::generate(
        "pipelinerollout-webhook placeholder",
        &["placeholder.invalid".to_owned()],
        1,
    )
    .map_err(|e| mismatch(e.to_string()))?;
    let chain = vec![
        CertificateDer::from_pem_slice(generated.cert_pem.as_bytes())
            .map_err(|e| mismatch(e.to_string()))?,
    ];
    let key = PrivateKeyDer::from_pem_slice(generated.key_pem.as_bytes())
        .map_err(|e| mismatch(e.to_string()))?;
    let certified =
        CertifiedKey::from_der(chain, key, &provider()).map_err(|e| mismatch(e.to_string()))?;
    build(files, Arc::new(certified))
}

fn build(files: &TlsFiles, certified: Arc<CertifiedKey>) -> Result<LoadedTls, TlsError> {
    let not_after = certified.cert.first().and_then(not_after);
    let chain = certified.cert.clone();
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&TLS13, &TLS12])
        .map_err(|e| TlsError::Mismatch {
            cert: files.cert.display().to_string(),
            key: files.key.display().to_string(),
            reason: e.to_string(),
        })?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let ca_err = |reason: String| TlsError::ClientCa {
                path: ca.display().to_string(),
                reason,
            };
            let mut roots = RootCertStore::empty();
            for cert in read_chain(ca).map_err(|e| ca_err(e.to_string()))? {
                roots.add(cert).map_err(|e| ca_err(e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| ca_err(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(LoadedTls {
        config: Arc::new(config),
        not_after,
        chain,
    })
}

/// The TLS configuration in force: each new handshake takes the latest
/// one, established connections keep theirs.
pub type TlsState = ArcSwap<ServerConfig>;
