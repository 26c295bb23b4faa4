//! The command line: `serve` (the default), `review`, `check`,
//! `check-policy`, `gen-certs` and `export-vap`. [`args`] defines them all
//! (`serve`'s flags are its components' own, flattened); each command's
//! wiring is in the file of its name, logging set-up and its flags in
//! [`logging`].

mod args;
mod check;
mod check_policy;
mod export_vap;
mod gen_certs;
mod logging;
mod review;
mod serve;

use std::process::ExitCode;

pub use self::args::Cli;
pub(crate) use self::args::Command;
pub use self::logging::{LoggingGuard, init_logging};
pub use self::serve::{serving_runtime, shutdown_signal};

pub(crate) use crate::pki::DEV_CERTS_DIR;

/// Runs the parsed command line, logging through `logging`.
pub fn run(cli: Cli, logging: &LoggingGuard) -> ExitCode {
    match cli.command {
        None => serve::run(cli.serve, logging),
        Some(Command::Serve(args)) => serve::run(args, logging),
        Some(Command::Review(args)) => review::run(&args),
        Some(Command::Check(args)) => check::run(&args),
        Some(Command::CheckPolicy { file }) => check_policy::run(&file),
        Some(Command::GenCerts(args)) => gen_certs::run(&args),
        Some(Command::ExportVap(args)) => export_vap::run(&args),
    }
}

/// A runtime for the one-shot commands (`review`, `check`); `Err` is the
/// exit code after saying why.
fn current_thread_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("cannot start the async runtime: {e}");
            ExitCode::from(2)
        })
}
