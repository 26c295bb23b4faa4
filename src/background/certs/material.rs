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

use std::collections::BTreeMap;

use time::OffsetDateTime;

use super::inspect::{self, CertInfo, CheckError, For, ServingCheck};
use crate::pki::PemPair;

/// The serving certificate.
pub const TLS_CERT: &str = "tls.crt";
/// The serving certificate's key.
pub const TLS_KEY: &str = "tls.key";
/// The CA that signs (CA Secret), or that signed the serving certificate
/// (serving Secret).
pub const CA_CERT: &str = "ca.crt";
/// Its key (CA Secret only).
pub const CA_KEY: &str = "ca.key";
/// The CA being introduced (in the caBundle, not yet signing).
pub const NEXT_CA_CERT: &str = "ca-next.crt";
/// Its key.
pub const NEXT_CA_KEY: &str = "ca-next.key";
/// The CA being retired (still in the caBundle, no longer signing).
pub const PREVIOUS_CA_CERT: &str = "ca-previous.crt";
/// When the retired CA may leave the caBundle (RFC 3339).
pub const RETIRE_AFTER: &str = "pipelinerollout-webhook.numaproj.io/retire-previous-ca-after";

/// A CA being retired: in the caBundle until `retire_after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Previous {
    /// Its certificate.
    pub cert_pem: String,
    /// When it may leave the caBundle.
    pub retire_after: OffsetDateTime,
}

/// A serving certificate and the CA certificate that signed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serving {
    /// The certificate and its key.
    pub pair: PemPair,
    /// The CA that signed it.
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
    /// The serving certificate (`None`: none yet, the CA has not reached
    /// every webhook's caBundle).
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
        self.bundle_cas()
            .iter()
            .map(|pem| format!("{}\n", pem.trim_end()))
            .collect()
    }

    /// The CA Secret's data.
    pub fn ca_data(&self) -> BTreeMap<String, String> {
        let mut data = BTreeMap::new();
        data.insert(CA_CERT.to_owned(), self.ca.cert_pem.clone());
        data.insert(CA_KEY.to_owned(), self.ca.key_pem.clone());
        if let Some(next) = &self.next_ca {
            data.insert(NEXT_CA_CERT.to_owned(), next.cert_pem.clone());
            data.insert(NEXT_CA_KEY.to_owned(), next.key_pem.clone());
        }
        if let Some(previous) = &self.previous_ca {
            data.insert(PREVIOUS_CA_CERT.to_owned(), previous.cert_pem.clone());
        }
        data
    }

    /// The serving Secret's data, when there is a serving certificate.
    pub fn serving_data(&self) -> Option<BTreeMap<String, String>> {
        let serving = self.serving.as_ref()?;
        Some(BTreeMap::from([
            (TLS_CERT.to_owned(), serving.pair.cert_pem.clone()),
            (TLS_KEY.to_owned(), serving.pair.key_pem.clone()),
            (CA_CERT.to_owned(), serving.ca_pem.clone()),
        ]))
    }

    /// The CA Secret's rotation annotation (the retire time, when a CA is
    /// being retired).
    pub fn annotation(&self) -> Option<String> {
        self.previous_ca
            .as_ref()
            .and_then(|p| rfc3339(p.retire_after))
    }
}

/// `t` in RFC 3339.
pub fn rfc3339(t: OffsetDateTime) -> Option<String> {
    t.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

/// The CA Secret as read: its data (decoded) and the retire annotation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// Key to bytes.
    pub data: BTreeMap<String, Vec<u8>>,
    /// The value of [`RETIRE_AFTER`], if set.
    pub retire_after: Option<String>,
}

/// The serving Secret as read: key to bytes.
pub type Served = BTreeMap<String, Vec<u8>>;

/// Why an entry of a Secret is unusable. The texts are what the
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
    /// The CA being retired is not one CA certificate.
    #[error("{entry}: {0}", entry = PREVIOUS_CA_CERT)]
    PreviousCa(CheckError),
    /// The CA being retired has no retire time.
    #[error("{} has no {} annotation", PREVIOUS_CA_CERT, RETIRE_AFTER)]
    NoRetireAfter,
    /// The retire time is not RFC 3339.
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
    /// The serving certificate failed its check.
    #[error(transparent)]
    Serving(CheckError),
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
    fn checked_ca(
        &self,
        cert: &'static str,
        key: &'static str,
        target: For<'_>,
        now: OffsetDateTime,
    ) -> Result<(PemPair, CertInfo), SecretError> {
        let pair = pair(&self.data, cert, key)?;
        let info = inspect::check_ca(&pair, target, now).map_err(|check| SecretError::Ca {
            cert,
            key,
            check,
        })?;
        Ok((pair, info))
    }

    /// The signing CA, if present and the webhook's at `now`.
    pub fn ca(
        &self,
        target: For<'_>,
        now: OffsetDateTime,
    ) -> Result<(PemPair, CertInfo), SecretError> {
        self.checked_ca(CA_CERT, CA_KEY, target, now)
    }

    /// The CA being introduced: `None` when there is none, `Err` when it
    /// is there but unusable.
    pub fn next_ca(
        &self,
        target: For<'_>,
        now: OffsetDateTime,
    ) -> Option<Result<(PemPair, CertInfo), SecretError>> {
        if !self.data.contains_key(NEXT_CA_CERT) && !self.data.contains_key(NEXT_CA_KEY) {
            return None;
        }
        Some(self.checked_ca(NEXT_CA_CERT, NEXT_CA_KEY, target, now))
    }

    /// The CA being retired, with its validity and when it may leave as
    /// written: `None` when there is none, `Err` when it is there but
    /// unusable.
    pub fn previous_ca(&self) -> Option<Result<(Previous, CertInfo), SecretError>> {
        if !self.data.contains_key(PREVIOUS_CA_CERT) {
            return None;
        }
        Some(text(&self.data, PREVIOUS_CA_CERT).and_then(|pem| {
            let info = inspect::check_ca_cert(&pem).map_err(SecretError::PreviousCa)?;
            let after = self
                .retire_after
                .as_deref()
                .ok_or(SecretError::NoRetireAfter)?;
            let after =
                OffsetDateTime::parse(after, &time::format_description::well_known::Rfc3339)
                    .map_err(SecretError::RetireAfter)?;
            let previous = Previous {
                cert_pem: pem,
                retire_after: after,
            };
            Ok((previous, info))
        }))
    }
}

/// What is wrong with a stored serving certificate.
#[derive(Debug, Clone, PartialEq)]
pub enum ServingProblem {
    /// Absent, unreadable, not matching its key, or not signed by the CA.
    Invalid(SecretError),
    /// Valid, but for other names than the Service's.
    Names(Vec<String>),
}

impl From<ServingCheck> for ServingProblem {
    fn from(check: ServingCheck) -> Self {
        match check {
            ServingCheck::Invalid(c) => Self::Invalid(SecretError::Serving(c)),
            ServingCheck::Names(names) => Self::Names(names),
        }
    }
}

/// The serving certificate of `served`, checked against the CA
/// certificate `ca_pem`.
pub fn serving(
    served: &Served,
    ca_pem: &str,
    target: For<'_>,
    now: OffsetDateTime,
) -> Result<(PemPair, CertInfo), ServingProblem> {
    let pair = pair(served, TLS_CERT, TLS_KEY).map_err(ServingProblem::Invalid)?;
    let info = inspect::check_serving(&pair, ca_pem, target, now)?;
    Ok((pair, info))
}

/// The CA certificate of the serving Secret when it is one CA certificate
/// that signed the serving certificate beside it (what the replicas serve
/// now), valid for `target` at `now`.
pub fn serving_ca(
    served: &Served,
    target: For<'_>,
    now: OffsetDateTime,
) -> Option<(String, CertInfo)> {
    let pem = text(served, CA_CERT).ok()?;
    let info = inspect::check_ca_cert(&pem).ok()?;
    serving(served, &pem, target, now).ok().map(|_| (pem, info))
}
