//! Issuing certificates: a CA and a serving certificate it signs (for
//! `gen-certs`, `--manage-certs` and development), their files as
//! Kubernetes TLS Secrets name them, the development certificates `serve`
//! uses when none are given, and the caBundle patches `gen-certs` writes.
//! The Secret and caBundle the webhook keeps itself are
//! [`crate::background::certs`]'s.
//!
//! Every CA carries a Subject Key Identifier (rcgen writes one for a CA)
//! and every serving certificate an Authority Key Identifier naming it.
//! During a CA rotation two CAs with the same subject sit in the caBundle;
//! verifiers that pick the issuer by subject and key identifier (OpenSSL)
//! then find the right one, not just the first with that subject.

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
    /// The CA's private key (kept only by `gen-certs`, to renew the serving
    /// certificate under the same CA).
    ca_key_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving certificate's private key.
    pub key_pem: String,
}

/// From an hour ago for `days` days.
fn validity(days: i64) -> Validity {
    let now = OffsetDateTime::now_utc();
    Validity {
        not_before: now - Duration::hours(1),
        not_after: now + Duration::days(days),
    }
}

/// A certificate's validity: from `not_before` to `not_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Validity {
    pub(crate) not_before: OffsetDateTime,
    pub(crate) not_after: OffsetDateTime,
}

/// A certificate and its private key, in PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PemPair {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
}

/// Makes a self-signed CA named `common_name` CA, valid for `validity`.
pub(crate) fn issue_ca(common_name: &str, validity: Validity) -> Result<PemPair, CertError> {
    let key = KeyPair::generate()?;
    let cert_pem = ca_params(common_name, validity)?.self_signed(&key)?.pem();
    Ok(PemPair {
        cert_pem,
        key_pem: key.serialize_pem(),
    })
}

/// Makes a serving certificate for `names` with a new key, signed by the
/// CA `ca` (certificate and key in PEM), valid for `validity`.
pub(crate) fn issue_serving(
    ca: &PemPair,
    common_name: &str,
    names: &[String],
    validity: Validity,
) -> Result<PemPair, CertError> {
    let ca_key = KeyPair::from_pem(&ca.key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key)?;
    serving_cert(common_name, names, validity, &issuer)
}

fn ca_params(common_name: &str, validity: Validity) -> Result<CertificateParams, CertError> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, format!("{common_name} CA"));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    (ca.not_before, ca.not_after) = (validity.not_before, validity.not_after);
    Ok(ca)
}

fn serving_cert(
    common_name: &str,
    names: &[String],
    validity: Validity,
    issuer: &Issuer<'_, KeyPair>,
) -> Result<PemPair, CertError> {
    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(names.to_vec())?;
    leaf.distinguished_name
        .push(DnType::CommonName, common_name);
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.use_authority_key_identifier_extension = true;
    (leaf.not_before, leaf.not_after) = (validity.not_before, validity.not_after);
    let cert = leaf.signed_by(&key, issuer)?;
    Ok(PemPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Generates a CA and a serving certificate for `names` (DNS names or IP
/// addresses), both valid from an hour ago for `valid_days` days.
pub fn generate(
    common_name: &str,
    names: &[String],
    valid_days: i64,
) -> Result<GeneratedCerts, CertError> {
    generate_with_ca_days(common_name, names, valid_days, valid_days)
}

/// Like [`generate`], with the CA valid for `ca_days` days.
pub(crate) fn generate_with_ca_days(
    common_name: &str,
    names: &[String],
    valid_days: i64,
    ca_days: i64,
) -> Result<GeneratedCerts, CertError> {
    let ca_key = KeyPair::generate()?;
    let ca = ca_params(common_name, validity(ca_days))?;
    let ca_pem = ca.self_signed(&ca_key)?.pem();
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca, ca_key);
    let leaf = serving_cert(common_name, names, validity(valid_days), &issuer)?;
    Ok(GeneratedCerts {
        ca_pem,
        ca_key_pem,
        cert_pem: leaf.cert_pem,
        key_pem: leaf.key_pem,
    })
}

/// Issues a new serving certificate from an existing CA (certificate and
/// key in PEM), so clients that trust the CA need no change.
pub(crate) fn renew(
    ca_pem: &str,
    ca_key_pem: &str,
    common_name: &str,
    names: &[String],
    valid_days: i64,
) -> Result<GeneratedCerts, CertError> {
    let ca_key = KeyPair::from_pem(ca_key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(ca_pem, ca_key)?;
    let leaf = serving_cert(common_name, names, validity(valid_days), &issuer)?;
    Ok(GeneratedCerts {
        ca_pem: ca_pem.to_owned(),
        ca_key_pem: ca_key_pem.to_owned(),
        cert_pem: leaf.cert_pem,
        key_pem: leaf.key_pem,
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
    /// `ca.key`: written only by `gen-certs`, to renew under the same CA.
    pub(crate) ca_key: PathBuf,
}

impl CertPaths {
    /// The paths in `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            ca: dir.join("ca.crt"),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            ca_key: dir.join("ca.key"),
        }
    }

    /// Writes a generated set (without the CA key); the key is readable by
    /// its owner only.
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

    /// Writes the CA's private key, readable by its owner only.
    pub(crate) fn write_ca_key(&self, certs: &GeneratedCerts) -> Result<(), CertError> {
        write_file(&self.ca_key, &certs.ca_key_pem, true)
    }
}

/// Writes `text` to `path`; a `private` file is readable by its owner only
/// from the moment it holds a byte: it is created with mode 0600, and an
/// existing file is restricted before it is truncated and written.
fn write_file(path: &Path, text: &str, private: bool) -> Result<(), CertError> {
    let io_err = |source| CertError::Io {
        path: path.display().to_string(),
        source,
    };
    if !private {
        return fs::write(path, text).map_err(io_err);
    }
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let file = options.open(path).map_err(io_err)?;
        file.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(io_err)?;
        write_all(file, text).map_err(io_err)
    }
    #[cfg(not(unix))]
    write_all(options.open(path).map_err(io_err)?, text).map_err(io_err)
}

fn write_all(mut file: fs::File, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    file.set_len(0)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// The names the development certificate is valid for.
pub const DEV_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Where `serve` keeps development certificates by default
/// (`--dev-certs-dir`).
pub(crate) const DEV_CERTS_DIR: &str = "certs";

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
pub(crate) const CA_BUNDLE_PATCH: &str = "ca-bundle.patch.yaml";

/// The name of the patch for the ValidatingWebhookConfiguration, whose
/// webhooks all need the CA.
const VALIDATING_CA_BUNDLE_PATCH: &str = "ca-bundle-validating.patch.yaml";

/// How many webhooks the ValidatingWebhookConfiguration of
/// `manifests/base/webhooks.yaml` holds (PipelineRollouts, the children,
/// MonoVertexRollouts, ISBServiceRollouts, the Vertices and the workloads
/// Numaflow makes, the Numaflow controller versions, Numaplane's
/// namespace-level ConfigMap); `tests/install/manifests/` checks it.
pub const VALIDATING_WEBHOOKS: usize = 8;

/// Writes JSON 6902 patches (as YAML) that set `clientConfig.caBundle` to
/// `ca_pem`: [`CA_BUNDLE_PATCH`] for the first webhook (the mutating
/// configuration's only one), [`VALIDATING_CA_BUNDLE_PATCH`] for each of
/// the validating configuration's.
pub(crate) fn write_ca_bundle_patch(dir: &Path, ca_pem: &str) -> Result<(), CertError> {
    use base64::Engine as _;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    let header = "# Written by `pipelinerollout-webhook gen-certs`: the CA that signed the webhook's\n\
         # serving certificate, for the API server to trust. Regenerate, do not edit.\n";
    let op = |i: usize| {
        format!("- op: add\n  path: /webhooks/{i}/clientConfig/caBundle\n  value: {bundle}\n")
    };
    write_file(
        &dir.join(CA_BUNDLE_PATCH),
        &format!("{header}{}", op(0)),
        false,
    )?;
    let all: String = (0..VALIDATING_WEBHOOKS).map(op).collect();
    write_file(
        &dir.join(VALIDATING_CA_BUNDLE_PATCH),
        &format!("{header}{all}"),
        false,
    )
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).expect("metadata").permissions().mode() & 0o777
    }

    /// During a CA rotation the caBundle holds two CAs with the same
    /// subject. OpenSSL picks the issuer by subject and, when the
    /// certificate names one, by Authority Key Identifier: with it, the
    /// serving certificate verifies whichever CA comes first.
    #[test]
    fn openssl_verifies_a_serving_certificate_against_two_cas_of_one_subject() {
        if std::process::Command::new("openssl")
            .arg("version")
            .output()
            .is_err()
        {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "openssl is not installed, and CI=true"
            );
            eprintln!("SKIPPED: openssl is not installed");
            return;
        }
        let now = OffsetDateTime::now_utc();
        let validity = Validity {
            not_before: now - Duration::hours(1),
            not_after: now + Duration::days(1),
        };
        let names = ["svc.ns.svc".to_owned()];
        let old = issue_ca("svc.ns.svc", validity).expect("a CA");
        let new = issue_ca("svc.ns.svc", validity).expect("a second CA");
        let dir = tempfile::tempdir().expect("dir");
        for (signer, bundle) in [
            (&new, [&old, &new]),
            (&old, [&new, &old]),
            (&new, [&new, &old]),
        ] {
            let leaf = issue_serving(signer, "svc.ns.svc", &names, validity).expect("a leaf");
            let pem: String = bundle.iter().map(|ca| ca.cert_pem.as_str()).collect();
            fs::write(dir.path().join("bundle.pem"), pem).expect("write");
            fs::write(dir.path().join("leaf.pem"), &leaf.cert_pem).expect("write");
            let out = std::process::Command::new("openssl")
                .args(["verify", "-CAfile", "bundle.pem", "leaf.pem"])
                .current_dir(dir.path())
                .output()
                .expect("openssl");
            assert!(
                out.status.success(),
                "openssl verify: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// The Subject Key Identifier of a CA and the Authority Key
    /// Identifier of a certificate, from PEM.
    fn key_ids(pem: &str) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        use rustls_pki_types::pem::PemObject as _;
        use x509_parser::extensions::ParsedExtension;
        let der = rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM");
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).expect("X.509");
        let (mut ski, mut aki) = (None, None);
        for ext in cert.extensions() {
            match ext.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(id) => ski = Some(id.0.to_vec()),
                ParsedExtension::AuthorityKeyIdentifier(a) => {
                    aki = a.key_identifier.as_ref().map(|id| id.0.to_vec());
                }
                _ => {}
            }
        }
        (ski, aki)
    }

    #[test]
    fn each_ca_has_a_subject_key_identifier_and_each_leaf_names_it() {
        let now = OffsetDateTime::now_utc();
        let validity = Validity {
            not_before: now - Duration::hours(1),
            not_after: now + Duration::days(1),
        };
        let names = ["svc.ns.svc".to_owned()];
        let ca = issue_ca("svc.ns.svc", validity).expect("a CA");
        let leaf = issue_serving(&ca, "svc.ns.svc", &names, validity).expect("a leaf");
        let generated = generate("svc.ns.svc", &names, 1).expect("a set");
        let renewed = renew(
            &generated.ca_pem,
            &generated.ca_key_pem,
            "svc.ns.svc",
            &names,
            1,
        )
        .expect("a renewal");
        for (ca, leaf) in [
            (&ca.cert_pem, &leaf.cert_pem),
            (&generated.ca_pem, &generated.cert_pem),
            (&generated.ca_pem, &renewed.cert_pem),
        ] {
            let (ski, _) = key_ids(ca);
            let (_, aki) = key_ids(leaf);
            assert!(
                ski.as_ref().is_some_and(|id| !id.is_empty()),
                "the CA has an SKI"
            );
            assert_eq!(aki, ski, "the leaf's AKI names its CA's SKI");
        }
    }

    #[test]
    fn private_keys_are_owner_only_whether_new_or_overwritten() {
        let dir = tempfile::tempdir().expect("dir");
        let new = dir.path().join("new.key");
        write_file(&new, "secret", true).expect("write");
        assert_eq!(mode(&new), 0o600);
        assert_eq!(fs::read_to_string(&new).expect("read"), "secret");

        let old = dir.path().join("old.key");
        fs::write(&old, "a much longer old secret").expect("write");
        fs::set_permissions(&old, fs::Permissions::from_mode(0o644)).expect("chmod");
        write_file(&old, "short", true).expect("overwrite");
        assert_eq!(
            mode(&old),
            0o600,
            "an existing world-readable key is restricted"
        );
        assert_eq!(fs::read_to_string(&old).expect("read"), "short");
    }
}
