//! What the certificate Secret holds, read and checked. Pure: no I/O.
//!
//! The Secret (`kubernetes.io/tls`) holds the serving certificate and its
//! key (`tls.crt`, `tls.key`, what every replica serves), the CA that
//! signed it with its key (`ca.crt`, `ca.key`, so the next serving
//! certificate is signed by the same CA), and during a CA rotation either
//! the CA being introduced (`ca-next.crt`, `ca-next.key`) or the CA being
//! retired (`ca-previous.crt`, with the time it may leave the caBundle in
//! an annotation). The rotation's phase is therefore in the Secret itself,
//! and a new leader continues where the last one stopped.

use std::collections::BTreeMap;

use rcgen::{KeyPair, PublicKeyData as _};
use rustls_pki_types::CertificateDer;
use time::OffsetDateTime;
use x509_parser::extensions::GeneralName;

use super::trust;
use crate::pki::PemPair;

/// The serving certificate.
pub const TLS_CERT: &str = "tls.crt";
/// The serving certificate's key.
pub const TLS_KEY: &str = "tls.key";
/// The CA that signed the serving certificate.
pub const CA_CERT: &str = "ca.crt";
/// Its key.
pub const CA_KEY: &str = "ca.key";
/// The CA being introduced (in the caBundle, not yet signing).
pub const NEXT_CA_CERT: &str = "ca-next.crt";
/// Its key.
pub const NEXT_CA_KEY: &str = "ca-next.key";
/// The CA being retired (still in the caBundle, no longer signing).
pub const PREVIOUS_CA_CERT: &str = "ca-previous.crt";
/// When the retired CA may leave the caBundle (RFC 3339).
pub const RETIRE_AFTER: &str = "pipelinerollout-webhook.numaproj.io/retire-previous-ca-after";

/// Everything the Secret holds, valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Material {
    /// The CA that signs.
    pub ca: PemPair,
    /// The serving certificate.
    pub serving: PemPair,
    /// The CA being introduced, during the first half of a CA rotation.
    pub next_ca: Option<PemPair>,
    /// The CA being retired, during the second half.
    pub previous_ca: Option<String>,
    /// When the retired CA may leave the caBundle.
    pub retire_previous_after: Option<OffsetDateTime>,
}

impl Material {
    /// The CAs the caBundle must hold, oldest first.
    pub fn bundle_cas(&self) -> Vec<&str> {
        let mut cas = Vec::with_capacity(2);
        cas.extend(self.previous_ca.as_deref());
        cas.push(self.ca.cert_pem.as_str());
        cas.extend(self.next_ca.as_ref().map(|n| n.cert_pem.as_str()));
        cas
    }

    /// The caBundle: those CAs, concatenated.
    pub fn bundle(&self) -> String {
        self.bundle_cas()
            .iter()
            .map(|pem| {
                let pem = pem.trim_end();
                format!("{pem}\n")
            })
            .collect()
    }

    /// The Secret's data.
    pub fn data(&self) -> BTreeMap<String, String> {
        let mut data = BTreeMap::new();
        data.insert(TLS_CERT.to_owned(), self.serving.cert_pem.clone());
        data.insert(TLS_KEY.to_owned(), self.serving.key_pem.clone());
        data.insert(CA_CERT.to_owned(), self.ca.cert_pem.clone());
        data.insert(CA_KEY.to_owned(), self.ca.key_pem.clone());
        if let Some(next) = &self.next_ca {
            data.insert(NEXT_CA_CERT.to_owned(), next.cert_pem.clone());
            data.insert(NEXT_CA_KEY.to_owned(), next.key_pem.clone());
        }
        if let Some(previous) = &self.previous_ca {
            data.insert(PREVIOUS_CA_CERT.to_owned(), previous.clone());
        }
        data
    }

    /// The Secret's annotations that belong to the rotation (the retire
    /// time, when a CA is being retired).
    pub fn annotation(&self) -> Option<String> {
        self.retire_previous_after.and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
    }
}

/// The Secret as read: its data (decoded) and the retire annotation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// Key to bytes.
    pub data: BTreeMap<String, Vec<u8>>,
    /// The value of [`RETIRE_AFTER`], if set.
    pub retire_after: Option<String>,
}

/// Why an entry of the Secret is unusable. The texts are what the
/// controller logs when it replaces or drops the entry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SecretError {
    /// The key is absent from the Secret's data.
    #[error("{0} is missing")]
    Missing(&'static str),
    /// The value is not UTF-8.
    #[error("{0} is not text")]
    NotText(&'static str),
    /// A CA (the signing one or the one being introduced) failed its check.
    #[error("the CA in {cert} and {key}: {check}")]
    Ca {
        /// Where its certificate is.
        cert: &'static str,
        /// Where its key is.
        key: &'static str,
        /// What the check found.
        check: CheckError,
    },
    /// The CA being retired holds no certificate.
    #[error("{entry}: {0}", entry = PREVIOUS_CA_CERT)]
    PreviousCa(CheckError),
    /// The CA being retired has no retire time.
    #[error("{} has no {} annotation", PREVIOUS_CA_CERT, RETIRE_AFTER)]
    NoRetireAfter,
    /// The retire time is not RFC 3339.
    #[error("{entry}: {0}", entry = RETIRE_AFTER)]
    RetireAfter(time::error::Parse),
    /// Both halves of a CA rotation are present, which no rotation leaves.
    #[error(
        "{} and {} at once: the older rotation is dropped",
        NEXT_CA_CERT,
        PREVIOUS_CA_CERT
    )]
    TwoRotations,
    /// The serving certificate failed its check.
    #[error(transparent)]
    Serving(CheckError),
}

/// Why a certificate (and its key) failed its check.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckError {
    /// The PEM text holds no certificate.
    #[error("no PEM certificate")]
    NoPem,
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
}

impl Stored {
    fn text(&self, key: &'static str) -> Result<String, SecretError> {
        let bytes = self.data.get(key).ok_or(SecretError::Missing(key))?;
        String::from_utf8(bytes.clone()).map_err(|_| SecretError::NotText(key))
    }

    fn pair(&self, cert: &'static str, key: &'static str) -> Result<PemPair, SecretError> {
        Ok(PemPair {
            cert_pem: self.text(cert)?,
            key_pem: self.text(key)?,
        })
    }

    /// The signing CA, if present and usable at `now`.
    pub fn ca(&self, now: OffsetDateTime) -> Result<(PemPair, CertInfo), SecretError> {
        let pair = self.pair(CA_CERT, CA_KEY)?;
        let info = check_ca(&pair, now).map_err(|check| SecretError::Ca {
            cert: CA_CERT,
            key: CA_KEY,
            check,
        })?;
        Ok((pair, info))
    }

    /// The CA being introduced: `None` when there is none, `Err` when it
    /// is there but unusable.
    pub fn next_ca(&self, now: OffsetDateTime) -> Option<Result<PemPair, SecretError>> {
        if !self.data.contains_key(NEXT_CA_CERT) && !self.data.contains_key(NEXT_CA_KEY) {
            return None;
        }
        Some(self.pair(NEXT_CA_CERT, NEXT_CA_KEY).and_then(|pair| {
            check_ca(&pair, now)
                .map(|_| pair)
                .map_err(|check| SecretError::Ca {
                    cert: NEXT_CA_CERT,
                    key: NEXT_CA_KEY,
                    check,
                })
        }))
    }

    /// The CA being retired, with when it may leave: `None` when there is
    /// none, `Err` when it is there but unusable.
    pub fn previous_ca(&self) -> Option<Result<(String, OffsetDateTime), SecretError>> {
        if !self.data.contains_key(PREVIOUS_CA_CERT) {
            return None;
        }
        Some(self.text(PREVIOUS_CA_CERT).and_then(|pem| {
            first_certificate(&pem).map_err(SecretError::PreviousCa)?;
            let after = self
                .retire_after
                .as_deref()
                .ok_or(SecretError::NoRetireAfter)?;
            let after =
                OffsetDateTime::parse(after, &time::format_description::well_known::Rfc3339)
                    .map_err(SecretError::RetireAfter)?;
            Ok((pem, after))
        }))
    }

    /// The serving certificate, checked against `ca` and `names`.
    pub fn serving(
        &self,
        ca: &PemPair,
        names: &[String],
        now: OffsetDateTime,
    ) -> Result<(PemPair, CertInfo), ServingProblem> {
        let pair = self
            .pair(TLS_CERT, TLS_KEY)
            .map_err(ServingProblem::Invalid)?;
        let info = check_serving(&pair, ca, names, now)?;
        Ok((pair, info))
    }
}

/// What is wrong with a stored serving certificate.
#[derive(Debug, Clone, PartialEq)]
pub enum ServingProblem {
    /// Unreadable, not matching its key, or not signed by the CA.
    Invalid(SecretError),
    /// Valid, but for other names than the Service's.
    Names(Vec<String>),
}

/// The validity of a certificate that passed its checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertInfo {
    /// notBefore.
    pub not_before: OffsetDateTime,
    /// notAfter.
    pub not_after: OffsetDateTime,
}

fn first_certificate(pem: &str) -> Result<CertificateDer<'static>, CheckError> {
    trust::pem_certificates(pem.as_bytes())
        .into_iter()
        .next()
        .ok_or(CheckError::NoPem)
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

/// The notAfter of the first certificate in `pem`, for logs.
pub fn not_after(pem: &str) -> Option<OffsetDateTime> {
    let der = first_certificate(pem).ok()?;
    parse(&der).ok().map(|p| p.info.not_after)
}

/// Checks a CA: a CA certificate, its key, within its validity at `now`.
pub fn check_ca(pair: &PemPair, now: OffsetDateTime) -> Result<CertInfo, CheckError> {
    let parsed = parse(&first_certificate(&pair.cert_pem)?)?;
    if !parsed.is_ca {
        return Err(CheckError::NotCa);
    }
    key_matches(&pair.key_pem, &parsed.spki)?;
    if now >= parsed.info.not_after {
        return Err(CheckError::Expired(parsed.info.not_after));
    }
    Ok(parsed.info)
}

/// Checks a serving certificate: its key, signed by `ca` and valid for
/// the Service's name at `now`, and for exactly `names`.
pub fn check_serving(
    pair: &PemPair,
    ca: &PemPair,
    names: &[String],
    now: OffsetDateTime,
) -> Result<CertInfo, ServingProblem> {
    let invalid = |check| ServingProblem::Invalid(SecretError::Serving(check));
    let der = first_certificate(&pair.cert_pem).map_err(invalid)?;
    let parsed = parse(&der).map_err(invalid)?;
    key_matches(&pair.key_pem, &parsed.spki).map_err(invalid)?;
    let unix = u64::try_from(now.unix_timestamp()).unwrap_or(0);
    let verify_name = names.iter().find(|n| n.ends_with(".svc")).or(names.first());
    if let Some(name) = verify_name
        && parsed.dns_names.iter().any(|n| n == name)
    {
        trust::verify(ca.cert_pem.as_bytes(), &[der], name, unix)
            .map_err(|e| invalid(CheckError::Untrusted(e)))?;
    }
    let mut want: Vec<String> = names.to_vec();
    want.sort();
    if parsed.dns_names != want {
        return Err(ServingProblem::Names(parsed.dns_names));
    }
    Ok(parsed.info)
}
