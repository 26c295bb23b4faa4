//! `check`: judge manifests as the webhook would, and report.

use std::process::ExitCode;

use super::args::{CheckArgs, OutputFormat};
use crate::check::{self, junit};
use crate::policy::Policy;

/// Runs `check`: exit 0 when nothing would be denied, 1 when something
/// would, 2 when some input was unreadable or the policy is invalid.
pub(crate) fn run(args: &CheckArgs) -> ExitCode {
    let policy = match Policy::from_file_or_built_in(args.policy.as_deref()) {
        Ok(policy) => policy,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if args.paths.iter().any(|p| p == "-") && args.against.iter().any(|p| p == "-") {
        eprintln!(
            "standard input (-) can be read only once: give --against or the manifests as files"
        );
        return ExitCode::from(2);
    }
    let report = check::check(&policy, args);
    let rendered = match args.output {
        OutputFormat::Text => report.text(),
        OutputFormat::Json => report.json() + "\n",
        OutputFormat::Junit => junit::render(&report),
    };
    print!("{rendered}");
    if args.output != OutputFormat::Text {
        // The report may go to a file: say what could not be read here too.
        for problem in report.problems() {
            eprintln!("{}: error: {}", problem.location.label(), problem.message);
        }
    }
    ExitCode::from(report.exit_code())
}
