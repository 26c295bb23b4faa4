//! A throwaway CA for one test cluster: the API server's and the
//! webhook's serving certificates, and the service-account signing key.

use std::io::Read as _;

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

/// A CA that lives as long as the cluster.
pub struct Pki {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pki { .. }")
    }
}

/// A certificate and its private key, in PEM.
#[derive(Debug, Clone)]
pub struct CertPair {
    /// The certificate.
    pub cert_pem: String,
    /// Its key (PKCS#8).
    pub key_pem: String,
}

fn err(what: &str) -> impl Fn(rcgen::Error) -> String + '_ {
    move |e| format!("cannot generate {what}: {e}")
}

impl Pki {
    /// A new CA, valid from an hour ago for a day.
    pub fn new() -> Result<Self, String> {
        let key = KeyPair::generate().map_err(err("the CA key"))?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err("the CA"))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "envtest CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params);
        let ca_pem = params.self_signed(&key).map_err(err("the CA"))?.pem();
        Ok(Self {
            ca_pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate as a webhook configuration's `caBundle` (base64
    /// of the PEM).
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes())
    }

    /// A serving certificate for `names` (DNS names or IP addresses).
    pub fn serving(&self, common_name: &str, names: &[&str]) -> Result<CertPair, String> {
        let key = KeyPair::generate().map_err(err(common_name))?;
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).map_err(err(common_name))?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        validity(&mut params);
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(err(common_name))?;
        Ok(CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

fn validity(params: &mut CertificateParams) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::hours(1);
    params.not_after = now + Duration::days(1);
}

/// A key pair for signing service-account tokens: the private key
/// (PKCS#8 PEM) and the public key (SPKI PEM; kube-apiserver's
/// `--service-account-key-file` does not read public keys out of PKCS#8).
pub fn signing_key() -> Result<(String, String), String> {
    let key = KeyPair::generate().map_err(err("the service-account key"))?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

/// A random token (128 bits, hex).
pub fn token() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("cannot read /dev/urandom for a token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
