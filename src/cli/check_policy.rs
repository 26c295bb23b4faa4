//! `check-policy`: print the effective policy, or why the file is invalid.

use std::path::Path;
use std::process::ExitCode;

use crate::policy::Policy;

/// Runs `check-policy`: exit 0 with the policy printed, 2 with the error.
pub(crate) fn run(file: &Path) -> ExitCode {
    match Policy::from_file(file) {
        Ok(policy) => {
            print!("{}", policy.to_yaml());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}
