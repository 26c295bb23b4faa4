//! What can stop the generator, each with the message it prints.

use std::io;

/// Why a file could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line is not one the generator knows.
    #[error("{0}")]
    Usage(&'static str),
    /// A source or a committed copy could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file, relative to the repository's root.
        path: String,
        /// What the system said.
        source: io::Error,
    },
    /// A generated file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file, relative to the repository's root.
        path: String,
        /// What the system said.
        source: io::Error,
    },
    /// helm is not installed.
    #[error(
        "cannot run helm ({0}): the alert components and manifests/base are rendered from the \
         Helm chart, which needs Helm 3.8 or newer on the PATH (.ci/run installs it)"
    )]
    NoHelm(io::Error),
    /// `helm template` refused the chart.
    #[error("helm {args} failed:\n{stderr}")]
    Helm {
        /// The arguments it ran with.
        args: String,
        /// What it printed on standard error.
        stderr: String,
    },
    /// A source is not the YAML or JSON it should be.
    #[error("{what} does not parse: {message}")]
    Parse {
        /// Which file or rendering.
        what: String,
        /// What the parser said.
        message: String,
    },
    /// A source parses but lacks what the generator takes from it.
    #[error("{0}")]
    Shape(String),
}
