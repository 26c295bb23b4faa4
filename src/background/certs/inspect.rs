//! The checks of the certificates the Secrets hold. Pure: no I/O.
//!
//! A CA is the webhook's when its certificate is exactly one CA
//! certificate, the key beside it is its key (the webhook keeps the key of
//! every CA it signs with, in a Secret no pod mounts), it has not expired,
//! and a serving certificate it signs for the Service's names verifies
//! (a CA whose name constraints exclude the Service cannot serve it).

use rcgen::{KeyPair, PublicKeyData as _};
use rustls_pki_types::CertificateDer;
use time::OffsetDateTime;
use x509_parser::extensions::GeneralName;

use super::trust;
use crate::pki::{self, PemPair, Validity};

/// Why a certificate (and its key) failed its check.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckError {
    /// The PEM text holds no certificate.
    #[error("no PEM certificate")]
    NoPem,
    /// The PEM text holds more than one certificate.
    #[error("{0} certificates where exactly one belongs")]
    NotOne(usize),
    /// The first certificate does not parse.
    #[error("not an X.509 certificate: {0}")]
    NotX509(x509_parser::nom::Err<x509_parser::error::X509Error>),
    /// A validity bound is outside what a date can hold.
    #[error(transparent)]
    Validity(#[from] time::error::ComponentRange),
    /// The private key does not parse.
    #[error("the key is unreadable: {0}")]
    UnreadableKey(rcgen::Error),
    /// The private key is another certificate's.
    #[error("the key does not belong to the certificate")]
    KeyMismatch,
    /// A CA was expected.
    #[error("not a CA certificate")]
    NotCa,
    /// The CA's notAfter has passed.
    #[error("expired at {0}")]
    Expired(OffsetDateTime),
    /// The CA does not trust the serving certificate for the Service.
    #[error(transparent)]
    Untrusted(#[from] trust::TrustError),
    /// The CA cannot sign a serving certificate at all.
    #[error("cannot sign a serving certificate: {0}")]
    CannotSign(String),
    /// A serving certificate the CA signs does not verify for the Service
    /// (name constraints, for one).
    #[error("a serving certificate it signs is not trusted for {name}: {why}")]
    CannotServe {
        /// The Service's name.
        name: String,
        /// The verifier's text.
        why: String,
    },
}

/// The validity of a certificate that passed its checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertInfo {
    /// notBefore.
    pub not_before: OffsetDateTime,
    /// notAfter.
    pub not_after: OffsetDateTime,
}

/// What a serving certificate is checked for: the Service's names, and
/// the one the API server verifies (`NAME.NAMESPACE.svc`).
#[derive(Debug, Clone, Copy)]
pub struct For<'a> {
    /// Every DNS name it must carry.
    pub names: &'a [String],
    /// The name the API server checks.
    pub server_name: &'a str,
}

/// What the check of a serving certificate found.
#[derive(Debug, Clone, PartialEq)]
pub enum ServingCheck {
    /// Unreadable, not matching its key, or not signed by the CA.
    Invalid(CheckError),
    /// Valid, but for other names than the Service's.
    Names(Vec<String>),
}

/// The only certificate of `pem`.
pub fn one_certificate(pem: &str) -> Result<CertificateDer<'static>, CheckError> {
    let mut all = trust::pem_certificates(pem.as_bytes());
    match all.len() {
        0 => Err(CheckError::NoPem),
        1 => Ok(all.remove(0)),
        n => Err(CheckError::NotOne(n)),
    }
}

/// The parsed parts of a certificate we check.
struct Parsed {
    info: CertInfo,
    is_ca: bool,
    spki: Vec<u8>,
    dns_names: Vec<String>,
}

fn parse(der: &CertificateDer<'_>) -> Result<Parsed, CheckError> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(der.as_ref()).map_err(CheckError::NotX509)?;
    let time = |t: x509_parser::time::ASN1Time| OffsetDateTime::from_unix_timestamp(t.timestamp());
    let info = CertInfo {
        not_before: time(cert.validity().not_before)?,
        not_after: time(cert.validity().not_after)?,
    };
    let is_ca = cert
        .basic_constraints()
        .ok()
        .flatten()
        .is_some_and(|bc| bc.value.ca);
    let mut dns_names: Vec<String> = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(name) => Some((*name).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    dns_names.sort();
    Ok(Parsed {
        info,
        is_ca,
        spki: cert.tbs_certificate.subject_pki.raw.to_vec(),
        dns_names,
    })
}

fn key_matches(key_pem: &str, spki: &[u8]) -> Result<(), CheckError> {
    let key = KeyPair::from_pem(key_pem).map_err(CheckError::UnreadableKey)?;
    if key.subject_public_key_info() == spki {
        Ok(())
    } else {
        Err(CheckError::KeyMismatch)
    }
}

/// The validity of the first certificate in `pem`.
pub fn validity(pem: &str) -> Option<CertInfo> {
    let der = trust::pem_certificates(pem.as_bytes()).into_iter().next()?;
    parse(&der).ok().map(|p| p.info)
}

/// Checks a CA certificate without its key: exactly one CA certificate.
pub fn check_ca_cert(cert_pem: &str) -> Result<CertInfo, CheckError> {
    let parsed = parse(&one_certificate(cert_pem)?)?;
    if parsed.is_ca {
        Ok(parsed.info)
    } else {
        Err(CheckError::NotCa)
    }
}

/// Checks a CA the webhook signs with: exactly one CA certificate, its
/// key, within its validity at `now`, and able to sign a serving
/// certificate that verifies for `target`.
pub fn check_ca(
    pair: &PemPair,
    target: For<'_>,
    now: OffsetDateTime,
) -> Result<CertInfo, CheckError> {
    let parsed = parse(&one_certificate(&pair.cert_pem)?)?;
    if !parsed.is_ca {
        return Err(CheckError::NotCa);
    }
    key_matches(&pair.key_pem, &parsed.spki)?;
    if now >= parsed.info.not_after {
        return Err(CheckError::Expired(parsed.info.not_after));
    }
    let probe = Validity {
        not_before: now - time::Duration::minutes(1),
        not_after: (now + time::Duration::minutes(1)).min(parsed.info.not_after),
    };
    let leaf = pki::issue_serving(pair, target.server_name, target.names, probe)
        .map_err(|e| CheckError::CannotSign(e.to_string()))?;
    let der = one_certificate(&leaf.cert_pem)?;
    trust::verify(
        pair.cert_pem.as_bytes(),
        &[der],
        target.server_name,
        unix(now),
    )
    .map_err(|e| CheckError::CannotServe {
        name: target.server_name.to_owned(),
        why: e.to_string(),
    })?;
    Ok(parsed.info)
}

fn unix(now: OffsetDateTime) -> u64 {
    u64::try_from(now.unix_timestamp()).unwrap_or(0)
}

/// Checks a serving certificate: its key, signed by the CA certificate
/// `ca_pem` and valid for the Service's name at `now`, and for exactly
/// the Service's names.
pub fn check_serving(
    pair: &PemPair,
    ca_pem: &str,
    target: For<'_>,
    now: OffsetDateTime,
) -> Result<CertInfo, ServingCheck> {
    let invalid = ServingCheck::Invalid;
    let der = one_certificate(&pair.cert_pem).map_err(invalid)?;
    let parsed = parse(&der).map_err(invalid)?;
    key_matches(&pair.key_pem, &parsed.spki).map_err(invalid)?;
    if parsed.dns_names.iter().any(|n| n == target.server_name) {
        trust::verify(ca_pem.as_bytes(), &[der], target.server_name, unix(now))
            .map_err(|e| invalid(CheckError::Untrusted(e)))?;
    }
    let mut want: Vec<String> = target.names.to_vec();
    want.sort();
    if parsed.dns_names != want {
        return Err(ServingCheck::Names(parsed.dns_names));
    }
    Ok(parsed.info)
}
