//! What the two certificate Secrets hold, read and checked. Pure: no I/O.
//!
//! - The CA Secret (`--ca-secret`, no pod mounts it; the leader reads and
//!   writes it through the API) holds the CA that signs (`ca.crt`,
//!   `ca.key`) and during a CA rotation either the CA being introduced
//!   (`ca-next.crt`, `ca-next.key`) or the CA being retired
//!   (`ca-previous.crt`, with the time it may leave the caBundle in an
//!   annotation). The rotation's phase is therefore in the Secret itself,
//!   and a new leader continues where the last one stopped.
//! - The serving Secret (`--cert-secret`, `kubernetes.io/tls`, what every
//!   replica mounts) holds the serving certificate and its key (`tls.crt`,
//!   `tls.key`) and the one CA certificate that signed it (`ca.crt`).
//!
//! A CA is the webhook's when its certificate is exactly one CA
//! certificate, the key beside it is its key (the webhook keeps the key of
//! every CA it signs with, in a Secret no pod mounts), it has not expired,
//! and a serving certificate it signs for the Service's names verifies
//! (a CA whose name constraints exclude the Service cannot serve it).

use std::collections::BTreeMap;

use rcgen::{KeyPair, PublicKeyData as _};
use rustls_pki_types::CertificateDer;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use x509_parser::extensions::GeneralName;

use super::{CertOptions, trust};
use crate::pki::{self, PemPair, Validity};

pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
/// The CA that signs (CA Secret), or that signed the serving certificate
/// (serving Secret).
pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const NEXT_CA_CERT: &str = "ca-next.crt";
pub const NEXT_CA_KEY: &str = "ca-next.key";
pub const PREVIOUS_CA_CERT: &str = "ca-previous.crt";
/// The annotation of the CA Secret that says when the retired CA may
/// leave the caBundle (RFC 3339).
pub const RETIRE_AFTER: &str = "pipelinerollout-webhook.numaproj.io/retire-previous-ca-after";

/// A CA being retired: in the caBundle until `retire_after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Previous {
    pub cert_pem: String,
    pub retire_after: OffsetDateTime,
}

/// A serving certificate and its key, and the CA certificate that signed
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serving {
    pub pair: PemPair,
    pub ca_pem: String,
}

/// Everything the two Secrets hold, valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Material {
    /// The CA that signs.
    pub ca: PemPair,
    /// The CA being introduced, during the first half of a CA rotation.
    pub next_ca: Option<PemPair>,
    /// The CA being retired, during the second half (or after the CA was
    /// replaced, the CA the replicas' certificate is from).
    pub previous_ca: Option<Previous>,
    /// `None`: none yet, the CA has not reached every webhook's caBundle.
    pub serving: Option<Serving>,
}

impl Material {
    /// The CAs the caBundle must hold, oldest first.
    pub fn bundle_cas(&self) -> Vec<&str> {
        let mut cas = Vec::with_capacity(3);
        cas.extend(self.previous_ca.as_ref().map(|p| p.cert_pem.as_str()));
        cas.push(self.ca.cert_pem.as_str());
        cas.extend(self.next_ca.as_ref().map(|n| n.cert_pem.as_str()));
        cas
    }

    #[cfg(test)]
    /// The caBundle: those CAs, concatenated.
    pub fn bundle(&self) -> String {
        bundle(self.bundle_cas())
    }

    pub fn ca_data(&self) -> Served {
        let mut data = Served::new();
        let mut put = |key: &str, pem: &str| data.insert(key.to_owned(), pem.as_bytes().to_vec());
        put(CA_CERT, &self.ca.cert_pem);
        put(CA_KEY, &self.ca.key_pem);
        if let Some(next) = &self.next_ca {
            put(NEXT_CA_CERT, &next.cert_pem);
            put(NEXT_CA_KEY, &next.key_pem);
        }
        if let Some(previous) = &self.previous_ca {
            put(PREVIOUS_CA_CERT, &previous.cert_pem);
        }
        data
    }

    /// The serving Secret's data, when there is a serving certificate.
    pub fn serving_data(&self) -> Option<Served> {
        let serving = self.serving.as_ref()?;
        let mut data = Served::new();
        let mut put = |key: &str, pem: &str| data.insert(key.to_owned(), pem.as_bytes().to_vec());
        put(TLS_CERT, &serving.pair.cert_pem);
        put(TLS_KEY, &serving.pair.key_pem);
        put(CA_CERT, &serving.ca_pem);
        Some(data)
    }

    /// The value of [`RETIRE_AFTER`], when a CA is being retired.
    pub fn annotation(&self) -> Option<String> {
        self.previous_ca
            .as_ref()
            .and_then(|p| rfc3339(p.retire_after))
    }
}

/// A caBundle of `cas` (PEM each), one after the other.
pub fn bundle<'a>(cas: impl IntoIterator<Item = &'a str>) -> String {
    cas.into_iter()
        .map(|pem| format!("{}\n", pem.trim_end()))
        .collect()
}

pub fn rfc3339(t: OffsetDateTime) -> Option<String> {
    t.format(&Rfc3339).ok()
}

/// The CA Secret as read: its data (decoded) and the value of
/// [`RETIRE_AFTER`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    pub data: BTreeMap<String, Vec<u8>>,
    pub retire_after: Option<String>,
}

/// The serving Secret's data as read.
pub type Served = BTreeMap<String, Vec<u8>>;

/// Why an entry of a Secret is unusable. The texts are what the
/// controller logs when it replaces or drops the entry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SecretError {
    #[error("{0} is missing")]
    Missing(&'static str),
    #[error("{0} is not text")]
    NotText(&'static str),
    /// A CA (the signing one or the one being introduced) failed its check.
    #[error("the CA in {cert} and {key}: {check}")]
    Ca {
        cert: &'static str,
        key: &'static str,
        check: CheckError,
    },
    #[error("{entry}: {0}", entry = PREVIOUS_CA_CERT)]
    PreviousCa(CheckError),
    #[error("{} has no {} annotation", PREVIOUS_CA_CERT, RETIRE_AFTER)]
    NoRetireAfter,
    #[error("{entry}: {0}", entry = RETIRE_AFTER)]
    RetireAfter(time::error::Parse),
    /// The CA being retired is still there past the latest time it may
    /// stay (not a CA this webhook retired, or edited).
    #[error(
        "{entry} stays past {0}, one propagation delay after the serving certificate left it: dropped from the caBundle",
        entry = PREVIOUS_CA_CERT
    )]
    Outstays(OffsetDateTime),
    /// Both halves of a CA rotation are present, which no rotation leaves.
    #[error(
        "{} and {} at once: the older rotation is dropped",
        NEXT_CA_CERT,
        PREVIOUS_CA_CERT
    )]
    TwoRotations,
    #[error(transparent)]
    Serving(CheckError),
    /// The serving certificate is valid, but for other names than the
    /// Service's (renewed, not replaced as unusable).
    #[error("{} is for other names than the Service's", TLS_CERT)]
    OtherNames,
}

/// Why a certificate (and its key) failed its check.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckError {
    #[error("no PEM certificate")]
    NoPem,
    #[error("{0} certificates where exactly one belongs")]
    NotOne(usize),
    #[error("not an X.509 certificate: {0}")]
    NotX509(x509_parser::nom::Err<x509_parser::error::X509Error>),
    /// A validity bound is outside what a date can hold.
    #[error(transparent)]
    Validity(#[from] time::error::ComponentRange),
    #[error("the key is unreadable: {0}")]
    UnreadableKey(rcgen::Error),
    #[error("the key does not belong to the certificate")]
    KeyMismatch,
    #[error("not a CA certificate")]
    NotCa,
    #[error("expired at {0}")]
    Expired(OffsetDateTime),
    /// The CA does not trust the serving certificate for the Service.
    #[error(transparent)]
    Untrusted(#[from] trust::TrustError),
    #[error("cannot sign a serving certificate: {0}")]
    CannotSign(String),
    /// A serving certificate the CA signs does not verify for the Service
    /// (name constraints, for one).
    #[error("a serving certificate it signs is not trusted for {name}: {why}")]
    CannotServe { name: String, why: String },
}

fn text(data: &BTreeMap<String, Vec<u8>>, key: &'static str) -> Result<String, SecretError> {
    let bytes = data.get(key).ok_or(SecretError::Missing(key))?;
    String::from_utf8(bytes.clone()).map_err(|_| SecretError::NotText(key))
}

fn pair(
    data: &BTreeMap<String, Vec<u8>>,
    cert: &'static str,
    key: &'static str,
) -> Result<PemPair, SecretError> {
    Ok(PemPair {
        cert_pem: text(data, cert)?,
        key_pem: text(data, key)?,
    })
}

impl Stored {
    /// The CA in `cert` and `key` (the signing one: [`CA_CERT`] and
    /// [`CA_KEY`]), if present and the webhook's at `now`.
    pub fn ca(
        &self,
        cert: &'static str,
        key: &'static str,
        options: &CertOptions,
        now: OffsetDateTime,
    ) -> Result<(PemPair, Validity), SecretError> {
        let pair = pair(&self.data, cert, key)?;
        let validity =
            check_ca(&pair, options, now).map_err(|check| SecretError::Ca { cert, key, check })?;
        Ok((pair, validity))
    }

    /// The CA being introduced: `None` when there is none, `Err` when it
    /// is there but unusable.
    pub fn next_ca(
        &self,
        options: &CertOptions,
        now: OffsetDateTime,
    ) -> Option<Result<(PemPair, Validity), SecretError>> {
        if !self.data.contains_key(NEXT_CA_CERT) && !self.data.contains_key(NEXT_CA_KEY) {
            return None;
        }
        Some(self.ca(NEXT_CA_CERT, NEXT_CA_KEY, options, now))
    }

    /// The CA being retired, with its validity and when it may leave as
    /// written: `None` when there is none, `Err` when it is there but
    /// unusable.
    pub fn previous_ca(&self) -> Option<Result<(Previous, Validity), SecretError>> {
        if !self.data.contains_key(PREVIOUS_CA_CERT) {
            return None;
        }
        Some(text(&self.data, PREVIOUS_CA_CERT).and_then(|pem| {
            let validity = check_ca_cert(&pem).map_err(SecretError::PreviousCa)?;
            let after = self
                .retire_after
                .as_deref()
                .ok_or(SecretError::NoRetireAfter)?;
            let after = OffsetDateTime::parse(after, &Rfc3339).map_err(SecretError::RetireAfter)?;
            let previous = Previous {
                cert_pem: pem,
                retire_after: after,
            };
            Ok((previous, validity))
        }))
    }
}

/// The serving certificate of `served`, checked: its key, signed by the
/// CA certificate `ca_pem` and valid for the Service's name at `now`, and
/// for exactly the Service's names.
pub fn serving(
    served: &Served,
    ca_pem: &str,
    options: &CertOptions,
    now: OffsetDateTime,
) -> Result<(PemPair, Validity), SecretError> {
    let invalid = SecretError::Serving;
    let pair = pair(served, TLS_CERT, TLS_KEY)?;
    let der = one_certificate(&pair.cert_pem).map_err(invalid)?;
    let parsed = parse(&der).map_err(invalid)?;
    key_matches(&pair.key_pem, &parsed.spki).map_err(invalid)?;
    let name = options.server_name();
    if parsed.dns_names.contains(&name) {
        trust::verify(ca_pem.as_bytes(), &[der], &name, unix(now))
            .map_err(|e| invalid(CheckError::Untrusted(e)))?;
    }
    let mut want = options.dns_names();
    want.sort();
    if parsed.dns_names != want {
        return Err(SecretError::OtherNames);
    }
    Ok((pair, parsed.validity))
}

/// The CA certificate of the serving Secret when it is one CA certificate
/// that signed the serving certificate beside it (what the replicas serve
/// now), valid for the Service at `now`.
pub fn serving_ca(
    served: &Served,
    options: &CertOptions,
    now: OffsetDateTime,
) -> Option<(String, Validity)> {
    let pem = text(served, CA_CERT).ok()?;
    let validity = check_ca_cert(&pem).ok()?;
    serving(served, &pem, options, now)
        .ok()
        .map(|_| (pem, validity))
}

fn one_certificate(pem: &str) -> Result<CertificateDer<'static>, CheckError> {
    let mut all = trust::pem_certificates(pem.as_bytes());
    match all.len() {
        0 => Err(CheckError::NoPem),
        1 => Ok(all.remove(0)),
        n => Err(CheckError::NotOne(n)),
    }
}

/// The parts of a certificate the checks look at.
struct Parsed {
    validity: Validity,
    is_ca: bool,
    spki: Vec<u8>,
    /// Sorted.
    dns_names: Vec<String>,
}

fn parse(der: &CertificateDer<'_>) -> Result<Parsed, CheckError> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(der.as_ref()).map_err(CheckError::NotX509)?;
    let time = |t: x509_parser::time::ASN1Time| OffsetDateTime::from_unix_timestamp(t.timestamp());
    let mut dns_names: Vec<String> = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .iter()
        .flat_map(|san| &san.value.general_names)
        .filter_map(|n| match n {
            GeneralName::DNSName(name) => Some((*name).to_owned()),
            _ => None,
        })
        .collect();
    dns_names.sort();
    Ok(Parsed {
        validity: Validity {
            not_before: time(cert.validity().not_before)?,
            not_after: time(cert.validity().not_after)?,
        },
        is_ca: cert.is_ca(),
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
pub fn validity(pem: &str) -> Option<Validity> {
    let der = trust::pem_certificates(pem.as_bytes()).into_iter().next()?;
    parse(&der).ok().map(|p| p.validity)
}

/// Checks a CA certificate without its key: exactly one CA certificate.
pub fn check_ca_cert(cert_pem: &str) -> Result<Validity, CheckError> {
    let parsed = parse(&one_certificate(cert_pem)?)?;
    if parsed.is_ca {
        Ok(parsed.validity)
    } else {
        Err(CheckError::NotCa)
    }
}

/// Checks a CA the webhook signs with: exactly one CA certificate, its
/// key, within its validity at `now`, and able to sign a serving
/// certificate that verifies for the Service.
pub fn check_ca(
    pair: &PemPair,
    options: &CertOptions,
    now: OffsetDateTime,
) -> Result<Validity, CheckError> {
    let parsed = parse(&one_certificate(&pair.cert_pem)?)?;
    if !parsed.is_ca {
        return Err(CheckError::NotCa);
    }
    key_matches(&pair.key_pem, &parsed.spki)?;
    let not_after = parsed.validity.not_after;
    if now >= not_after {
        return Err(CheckError::Expired(not_after));
    }
    let probe = Validity {
        not_before: now - time::Duration::minutes(1),
        not_after: (now + time::Duration::minutes(1)).min(not_after),
    };
    let name = options.server_name();
    let leaf = pki::issue_serving(pair, &name, &options.dns_names(), probe)
        .map_err(|e| CheckError::CannotSign(e.to_string()))?;
    let der = one_certificate(&leaf.cert_pem)?;
    trust::verify(pair.cert_pem.as_bytes(), &[der], &name, unix(now)).map_err(|e| {
        CheckError::CannotServe {
            name: name.clone(),
            why: e.to_string(),
        }
    })?;
    Ok(parsed.validity)
}

fn unix(now: OffsetDateTime) -> u64 {
    u64::try_from(now.unix_timestamp()).unwrap_or(0)
}
