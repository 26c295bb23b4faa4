//! Why a policy cannot be used.

use std::path::Path;

/// Why a policy cannot be used. The message is what the operator reads at
/// start-up, on reload and from `check-policy`.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read policy file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The text is not a policy: bad YAML, an unknown key, a wrong type.
    #[error("{where_}invalid policy: {message}")]
    Parse {
        /// "policy file X: " or empty.
        where_: String,
        /// The parser's words, with the line and column.
        message: String,
    },
    /// The policy parses but cannot be right.
    #[error("{where_}invalid policy: {}", problems.join("; "))]
    Invalid {
        /// "policy file X: " or empty.
        where_: String,
        /// Every problem found, each naming its key.
        problems: Vec<String>,
    },
    /// The built-in policy text itself does not parse: a defect of this
    /// build, which every policy read reports.
    #[error(transparent)]
    BuiltIn(#[from] BuiltInUnreadable),
}

/// The built-in policy text does not parse; kept once, reported by every
/// read of a policy.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the built-in policy does not parse (a defect of this build): {0}")]
pub struct BuiltInUnreadable(pub(super) String);

impl PolicyError {
    /// Names the file the error came from.
    pub(super) fn in_file(self, path: &Path) -> Self {
        let where_ = format!("policy file {}: ", path.display());
        match self {
            Self::Parse { message, .. } => Self::Parse { where_, message },
            Self::Invalid { problems, .. } => Self::Invalid { where_, problems },
            other @ (Self::Read { .. } | Self::BuiltIn(_)) => other,
        }
    }
}
