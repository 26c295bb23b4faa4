//! `export-vap`: the policy's validation rules as a ValidatingAdmissionPolicy.

use std::process::ExitCode;

/// Runs `export-vap`.
pub fn run(args: &crate::vap::ExportVapArgs) -> ExitCode {
    crate::vap::run(args)
}
