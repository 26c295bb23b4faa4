//! Certificates: generating a CA and a serving certificate, and the
//! development certificates `serve` uses when none are given.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

/// Why certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused the parameters.
    #[error("cannot generate certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// A file could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
}

/// A CA and a serving certificate it signed, in PEM.
#[derive(Debug, Clone)]
pub struct GeneratedCerts {
    /// The CA certificate (what clients trust; the webhook's caBundle).
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving certificate's private key.
    pub key_pem: String,
}

/// Generates a CA and a serving certificate for `names` (DNS names or IP
/// addresses), both valid from an hour ago for `valid_days` days.
pub fn generate(
    common_name: &str,
    names: &[String],
    valid_days: i64,
) -> Result<GeneratedCerts, CertError> {
    let now = OffsetDateTime::now_utc();
    let not_before = now - Duration::hours(1);
    let not_after = now + Duration::days(valid_days);

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, format!("{common_name} CA"));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = not_before;
    ca.not_after = not_after;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(names.to_vec())?;
    leaf.distinguished_name
        .push(DnType::CommonName, common_name);
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.not_before = not_before;
    leaf.not_after = not_after;
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok(GeneratedCerts {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The files of a certificate set in a directory, named as Kubernetes TLS
/// Secrets name them.
#[derive(Debug, Clone)]
pub struct CertPaths {
    /// `ca.crt`
    pub ca: PathBuf,
    /// `tls.crt`
    pub cert: PathBuf,
    /// `tls.key`
    pub key: PathBuf,
}

impl CertPaths {
    /// The paths in `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            ca: dir.join("ca.crt"),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }

    /// Writes a generated set; the key is readable by its owner only.
    pub fn write(&self, certs: &GeneratedCerts) -> Result<(), CertError> {
        if let Some(dir) = self.ca.parent() {
            fs::create_dir_all(dir).map_err(|source| CertError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        write_file(&self.ca, &certs.ca_pem, false)?;
        write_file(&self.cert, &certs.cert_pem, false)?;
        write_file(&self.key, &certs.key_pem, true)
    }
}

fn write_file(path: &Path, text: &str, private: bool) -> Result<(), CertError> {
    let io_err = |source| CertError::Io {
        path: path.display().to_string(),
        source,
    };
    fs::write(path, text).map_err(io_err)?;
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(io_err)?;
    }
    #[cfg(not(unix))]
    let _ = private;
    Ok(())
}

/// The names the development certificate is valid for.
pub const DEV_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Makes sure `dir` holds development certificates for localhost: reuses
/// them when all three files exist, generates a new set otherwise. Returns
/// the paths and whether they were generated.
pub fn ensure_dev_certs(dir: &Path) -> Result<(CertPaths, bool), CertError> {
    let paths = CertPaths::in_dir(dir);
    if paths.ca.exists() && paths.cert.exists() && paths.key.exists() {
        return Ok((paths, false));
    }
    let names: Vec<String> = DEV_NAMES.iter().map(|s| (*s).to_owned()).collect();
    paths.write(&generate(
        "pipelinerollout-webhook development",
        &names,
        365,
    )?)?;
    Ok((paths, true))
}

/// The name of the kustomize patch `gen-certs` writes beside the certificates.
pub const CA_BUNDLE_PATCH: &str = "ca-bundle.patch.yaml";

/// Writes a JSON 6902 patch (as YAML) that sets the first webhook's
/// `clientConfig.caBundle` to `ca_pem`, for kustomize to apply to both
/// webhook configurations.
pub fn write_ca_bundle_patch(dir: &Path, ca_pem: &str) -> Result<(), CertError> {
    use base64::Engine as _;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    let text = format!(
        "# Written by `pipelinerollout-webhook gen-certs`: the CA that signed the webhook's\n\
         # serving certificate, for the API server to trust. Regenerate, do not edit.\n\
         - op: add\n  path: /webhooks/0/clientConfig/caBundle\n  value: {bundle}\n"
    );
    write_file(&dir.join(CA_BUNDLE_PATCH), &text, false)
}
