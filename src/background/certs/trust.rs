//! Whether a set of CA certificates (a caBundle) trusts a serving
//! certificate for a name, the way the API server decides it: the chain,
//! the signatures, the validity and the name, checked by rustls' WebPKI
//! verifier. Pure.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// The certificates of a PEM bundle; an empty list when it holds none.
pub fn pem_certificates(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .collect()
}

/// Why a caBundle does not trust a served certificate. The texts are what
/// `/readyz` and the logs say.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrustError {
    #[error("the caBundle holds an unusable CA: {0}")]
    UnusableCa(rustls::Error),
    #[error("the caBundle holds no certificate")]
    EmptyBundle,
    #[error("no certificate is served")]
    NothingServed,
    #[error("cannot build a verifier: {0}")]
    Verifier(String),
    #[error("{0}: invalid dns name")]
    InvalidName(String),
    #[error("the caBundle does not trust the served certificate for {name}: {source}")]
    Untrusted { name: String, source: rustls::Error },
}

/// `Ok` when `bundle` (PEM, one or more CAs) trusts `chain` (DER, leaf
/// first) for `name` at `now` (Unix seconds); otherwise why not.
pub fn verify(
    bundle: &[u8],
    chain: &[CertificateDer<'_>],
    name: &str,
    now: u64,
) -> Result<(), TrustError> {
    let mut roots = RootCertStore::empty();
    for ca in pem_certificates(bundle) {
        roots.add(ca).map_err(TrustError::UnusableCa)?;
    }
    if roots.is_empty() {
        return Err(TrustError::EmptyBundle);
    }
    let (leaf, intermediates) = chain.split_first().ok_or(TrustError::NothingServed)?;
    let verifier = WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| TrustError::Verifier(e.to_string()))?;
    let server_name = ServerName::try_from(name.to_owned())
        .map_err(|_| TrustError::InvalidName(name.to_owned()))?;
    verifier
        .verify_server_cert(
            leaf,
            intermediates,
            &server_name,
            &[],
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(now)),
        )
        .map(|_| ())
        .map_err(|source| TrustError::Untrusted {
            name: name.to_owned(),
            source,
        })
}
