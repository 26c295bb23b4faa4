//! The `pipelinerollout-webhook` binary: parse the command line, set up
//! logging and the TLS crypto provider, run.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use pipelinerollout_webhook::cli::{self, Cli};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let logging = cli::init_logging(&cli.logging);
    // Another provider may already be installed; ours is used explicitly anyway.
    let _ = rustls::crypto::ring::default_provider().install_default();
    cli::run(cli, &logging)
}
