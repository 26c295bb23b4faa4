//! `cargo xtask generate` writes every generated copy in the repository
//! from its one source; `cargo xtask generate --check` writes nothing and
//! fails, naming them, when committed copies differ from what it would
//! write (CI runs it). What comes from where is in docs/generated-files.md.

#![forbid(unsafe_code)]

mod alerts;
mod dashboard;
mod error;
mod helm;
mod kustomize_base;
mod match_conditions;
mod repository;
mod second_line;
mod skipped_namespaces;

use std::process::ExitCode;

use error::Error;
use repository::{Generated, Repository};

/// What the command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Write every generated file.
    Write,
    /// Compare every generated file with what is committed.
    Check,
}

const USAGE: &str = "usage: cargo xtask generate [--check]";

fn mode(args: &[String]) -> Result<Mode, Error> {
    match args {
        [command] if command == "generate" => Ok(Mode::Write),
        [command, flag] if command == "generate" && flag == "--check" => Ok(Mode::Check),
        _ => Err(Error::Usage(USAGE)),
    }
}

/// A step of the generation: the files it writes, from the work tree as
/// the steps before it left it.
type Step = fn(&Repository) -> Result<Vec<Generated>, Error>;

/// The steps, in order: the raw manifests are rendered from the chart
/// after the chart's match conditions and rule 26's variables are written.
const STEPS: [Step; 6] = [
    dashboard::copies,
    match_conditions::files,
    skipped_namespaces::files,
    alerts::components,
    kustomize_base::files,
    second_line::files,
];

fn run(args: &[String]) -> Result<ExitCode, Error> {
    let mode = mode(args)?;
    let repo = Repository::locate();
    let (mut checked, mut stale) = (0, Vec::new());
    for step in STEPS {
        for file in step(&repo)? {
            checked += 1;
            match mode {
                Mode::Write => {
                    if repo.write_if_changed(&file)? {
                        println!("wrote {}", file.path);
                    }
                }
                Mode::Check => {
                    // A missing copy is as stale as a wrong one.
                    if repo.read(&file.path).ok().as_deref() != Some(file.text.as_str()) {
                        stale.push(file.path);
                    }
                }
            }
        }
    }
    if stale.is_empty() {
        if mode == Mode::Check {
            println!("{checked} generated files are up to date");
        }
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "these generated files differ from their source: run `cargo xtask generate` and commit \
         the result (docs/generated-files.md says what each is made from):"
    );
    for path in stale {
        eprintln!("  {path}");
    }
    Ok(ExitCode::FAILURE)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    run(&args).unwrap_or_else(|e| {
        eprintln!("xtask: {e}");
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_generate_with_an_optional_check() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(mode(&args(&["generate"])).ok(), Some(Mode::Write));
        assert_eq!(
            mode(&args(&["generate", "--check"])).ok(),
            Some(Mode::Check)
        );
        for wrong in [&[][..], &["check"], &["generate", "--force"]] {
            assert!(matches!(mode(&args(wrong)), Err(Error::Usage(_))));
        }
    }
}
