//! Named pieces of work, each repeated a fixed number of times, for counting
//! instructions under callgrind (`bench/instructions.sh`, the CI guard).
//!
//! `counted list` prints every scenario with its iteration count;
//! `counted run NAME` sets the scenario up, warms it up, then runs it in
//! [`measured_loop`], the one function whose instructions count:
//!
//! ```text
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='counted::measured_loop*' \
//!     target/counted/counted run answer-07-denied-compact
//! ```
//!
//! Everything runs on the calling thread (the HTTPS scenarios on a
//! current-thread tokio runtime, client and server together), so the count
//! does not depend on how threads are scheduled. Each scenario checks its
//! answer (allowed or denied) before it is counted.
#![forbid(unsafe_code)]

mod decision;
mod https;
mod kinds;

use std::hint::black_box;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use pipelinerollout_webhook::cli::{self, Cli};

/// Instruction-count scenarios of the webhook (see the module docs).
#[derive(Debug, Parser)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print each scenario's name and iteration count, one a line.
    List,
    /// Set a scenario up, warm it up, then run it in the measured loop.
    Run {
        /// The scenario's name (see `list`).
        name: String,
        /// Iterations measured; the scenario's own count when omitted.
        #[arg(long)]
        iterations: Option<u64>,
    },
}

/// Why a scenario could not run.
#[derive(Debug, thiserror::Error)]
pub enum CountedError {
    /// No scenario of that name.
    #[error("no scenario named {0:?}; `counted list` names them")]
    Unknown(String),
    /// A captured fixture cannot be read or parsed.
    #[error("fixture {path}: {why}")]
    Fixture {
        /// The fixture's path.
        path: String,
        /// What went wrong.
        why: String,
    },
    /// The webhook refused the body or answered otherwise than expected.
    #[error("{scenario}: {why}")]
    Answer {
        /// The scenario.
        scenario: &'static str,
        /// What was wrong with the answer.
        why: String,
    },
    /// Setting up or talking to the in-process server failed.
    #[error("in-process HTTPS: {0}")]
    Https(String),
}

/// A piece of work repeated `n` times.
pub trait Scenario {
    /// Does the work `n` times; the answers are checked during set-up.
    fn run(&mut self, n: u64) -> Result<(), CountedError>;
}

/// One named scenario: how many iterations count, and how to build it.
pub struct Entry {
    /// The name the guard and the baseline use.
    pub name: &'static str,
    /// Iterations measured (enough to make set-up noise negligible, few
    /// enough to keep the guard short under callgrind).
    pub iterations: u64,
    /// Builds the scenario, checked and warmed up.
    pub build: fn(&'static str) -> Result<Box<dyn Scenario>, CountedError>,
}

/// Iterations run before counting, so that caches, pools and lazily built
/// state (the metric series, the allocator's free lists) are warm.
pub const WARM_UP: u64 = 50;

fn scenarios() -> Vec<Entry> {
    let mut all = decision::scenarios();
    all.extend(https::scenarios());
    all
}

/// The loop whose instructions callgrind counts (`--toggle-collect`): it
/// must stay a function of its own, holding no closure whose name would
/// match the toggle as well.
#[inline(never)]
fn measured_loop(scenario: &mut dyn Scenario, n: u64) -> Result<(), CountedError> {
    scenario.run(black_box(n))
}

fn run(name: &str, iterations: Option<u64>) -> Result<u64, CountedError> {
    let entry = scenarios()
        .into_iter()
        .find(|e| e.name == name)
        .ok_or_else(|| CountedError::Unknown(name.to_owned()))?;
    let n = iterations.unwrap_or(entry.iterations);
    let mut scenario = (entry.build)(entry.name)?;
    scenario.run(WARM_UP)?;
    measured_loop(scenario.as_mut(), n)?;
    Ok(n)
}

/// The decision log as `serve` writes it (text, level info, through the log
/// sink), so the HTTPS scenarios count it; its lines go to stderr.
fn production_logging() -> Option<cli::LoggingGuard> {
    match Cli::try_parse_from(["pipelinerollout-webhook", "--log-level", "info"]) {
        Ok(cli) => Some(cli::init_logging(&cli.logging)),
        Err(e) => {
            eprintln!("counted: cannot set up logging as serve does: {e}");
            None
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Command::List => {
            for entry in scenarios() {
                println!("{} {}", entry.name, entry.iterations);
            }
            ExitCode::SUCCESS
        }
        Command::Run { name, iterations } => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let Some(_logging) = production_logging() else {
                return ExitCode::FAILURE;
            };
            match run(&name, iterations) {
                Ok(n) => {
                    println!("{name}: {n} iterations measured");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("counted: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
