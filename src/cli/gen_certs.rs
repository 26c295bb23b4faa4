//! `gen-certs`: a CA and a serving certificate for the in-cluster Service.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::DEV_CERTS_DIR;
use super::args::GenCertsArgs;
use crate::pki::{self, CertError};

/// Runs `gen-certs`: exit 0 with what was written, 2 with the error.
pub(crate) fn run(args: &GenCertsArgs) -> ExitCode {
    match gen_certs(args) {
        Ok((paths, renewed)) => {
            let how = if renewed {
                "renewed the serving certificate under the existing CA (caBundle unchanged)"
            } else {
                "made a new CA and serving certificate"
            };
            println!(
                "{how}: wrote {}, {}, {} and {}; valid {} days. Renew with `gen-certs --force` before then and re-apply.",
                paths.ca.display(),
                paths.cert.display(),
                paths.key.display(),
                args.out.join(pki::CA_BUNDLE_PATCH).display(),
                args.days
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen-certs: {e}");
            ExitCode::from(2)
        }
    }
}

/// Why `gen-certs` wrote nothing, or not everything; the message is what
/// it prints after `gen-certs: `.
#[derive(Debug, thiserror::Error)]
enum GenCertsError {
    /// --out is where `serve` keeps its development certificates.
    #[error("{} holds the development certificates of `serve`; choose another --out", .0.display())]
    DevCertsDir(PathBuf),
    /// --out holds certificates and --force is not given.
    #[error("{} already holds certificates; pass --force to renew them", .0.display())]
    Exists(PathBuf),
    /// Making, reading or writing the certificates failed.
    #[error(transparent)]
    Certs(#[from] CertError),
}

/// Writes the certificates; `Ok((paths, true))` when the serving
/// certificate was renewed under an existing CA.
fn gen_certs(args: &GenCertsArgs) -> Result<(pki::CertPaths, bool), GenCertsError> {
    // Never over the development certificates `serve` uses.
    if let (Ok(out), Ok(dev)) = (
        args.out.canonicalize(),
        Path::new(DEV_CERTS_DIR).canonicalize(),
    ) && out == dev
    {
        return Err(GenCertsError::DevCertsDir(args.out.clone()));
    }
    let paths = pki::CertPaths::in_dir(&args.out);
    let existing = paths.cert.exists() || paths.key.exists() || paths.ca.exists();
    if !args.force && existing {
        return Err(GenCertsError::Exists(args.out.clone()));
    }
    let service = &args.service;
    let namespace = &args.namespace;
    let names = vec![
        service.clone(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ];
    let common_name = format!("{service}.{namespace}.svc");
    let reuse = !args.new_ca && paths.ca.exists() && paths.ca_key.exists();
    let generated = if reuse {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|source| CertError::Io {
                path: p.display().to_string(),
                source,
            })
        };
        pki::renew(
            &read(&paths.ca)?,
            &read(&paths.ca_key)?,
            &common_name,
            &names,
            args.days,
        )
    } else {
        pki::generate_with_ca_days(&common_name, &names, args.days, args.days * 10)
    }?;
    paths.write(&generated)?;
    paths.write_ca_key(&generated)?;
    pki::write_ca_bundle_patch(&args.out, &generated.ca_pem)?;
    Ok((paths, reuse))
}
