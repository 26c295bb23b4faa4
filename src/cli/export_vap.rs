//! `export-vap`: the policy's validation rules as ValidatingAdmissionPolicies,
//! or (`--mutating`) its defaults as a MutatingAdmissionPolicy.

use std::process::ExitCode;

use super::args::ExportVapArgs;
use crate::policy::{Policy, PolicyError};
use crate::vap::mutating::export_mutating;
use crate::vap::{RenderError, export};

/// Why `export-vap` wrote nothing; the message is what the user reads.
#[derive(Debug, thiserror::Error)]
enum ExportVapError {
    /// The policy file does not load.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// `--strict`, and the policy asks for what CEL cannot check.
    #[error("--strict: the policy asks for what the exported policies cannot do: {0}")]
    Strict(String),
    /// The YAML could not be written.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// The output file could not be written.
    #[error("{path}: {source}")]
    Output {
        path: String,
        source: std::io::Error,
    },
}

impl ExportVapError {
    /// The exit code: 1 when `--strict` refuses, 2 otherwise.
    fn code(&self) -> u8 {
        match self {
            Self::Strict(_) => 1,
            _ => 2,
        }
    }
}

/// Runs `export-vap`: 0 when written, 1 when `--strict` refuses, 2 on a bad
/// policy or output file.
pub(crate) fn run(args: &ExportVapArgs) -> ExitCode {
    match write(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("export-vap: {e}");
            ExitCode::from(e.code())
        }
    }
}

fn write(args: &ExportVapArgs) -> Result<(), ExportVapError> {
    let policy = Policy::from_file_or_built_in(args.policy.as_deref())?;
    let (yaml, inexpressible, left_out) = if args.mutating {
        let export = export_mutating(&policy, &args.name);
        (export.to_yaml(), export.inexpressible, export.left_out)
    } else {
        let export = export(&policy, &args.name);
        (export.to_yaml(), export.inexpressible, export.left_out)
    };
    if args.strict && !inexpressible.is_empty() {
        return Err(ExportVapError::Strict(inexpressible.join("; ")));
    }
    if args.strict {
        // Left to the webhook by design: named, and not a failure.
        eprintln!(
            "export-vap: --strict: left to the webhook, whatever the policy: {}",
            left_out.join("; ")
        );
    }
    let yaml = yaml?;
    match &args.output {
        Some(path) => std::fs::write(path, yaml).map_err(|source| ExportVapError::Output {
            path: path.display().to_string(),
            source,
        }),
        None => {
            print!("{yaml}");
            Ok(())
        }
    }
}
