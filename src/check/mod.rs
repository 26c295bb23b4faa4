//! `check`: judges PipelineRollout manifests (files, directories, standard
//! input) as the webhook would judge their creation, or their update from
//! what is deployed, and reports in text, JSON or JUnit XML.
//!
//! [`files`] finds and reads the files, [`documents`] splits each into
//! documents and reads them, [`input`] picks out the PipelineRollouts,
//! [`judge`] gives each to [`crate::admission::decide`] (mutate, then
//! validate the patched object), [`report`] and [`junit`] render the
//! remarks. Its flags are [`CheckArgs`]; `crate::cli` prints the report.

pub mod documents;
pub mod files;
pub mod input;
pub mod judge;
pub mod junit;
pub mod report;

use std::path::PathBuf;

use crate::policy::Policy;
use input::Item;
use judge::{Deployed, ManifestJudge};
use report::{CheckEntry, CheckReport};

/// The requester when `--as` is not given: a user with no permissions, so
/// a manifest that turns on a force is reported.
pub const DEFAULT_USER: &str = "pipelinerollout-webhook:check";

/// Flags of `check`: what it judges, as whom, and how it reports.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// Policy file; without it, the built-in policy.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// The namespace of manifests that set no metadata.namespace.
    #[arg(long, short = 'n', value_name = "NS", default_value = "default")]
    pub namespace: String,
    /// The manifests now deployed (a file, a directory, or a dump of `kubectl get pipelinerollouts -A -o yaml`); a rollout found there by namespace and name is judged as an UPDATE from it. Repeatable.
    #[arg(long, value_name = "PATH")]
    pub against: Vec<String>,
    /// The user the writes are judged for (e.g. system:serviceaccount:argocd:argocd-application-controller).
    #[arg(long = "as", value_name = "USER", default_value = DEFAULT_USER)]
    pub user: String,
    /// A group of that user; repeatable (system:authenticated is always added).
    #[arg(long = "as-group", value_name = "GROUP")]
    pub groups: Vec<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Judge as at this time (RFC 3339) instead of now, so forceReapply.minPauseAge is checked reproducibly.
    #[arg(long, value_parser = crate::policy::timestamp::parse_rfc3339)]
    pub now: Option<time::OffsetDateTime>,
    /// Manifest files, directories (read recursively: .yaml, .yml, .json), or - for standard input.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,
}

/// `--output` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// One line per finding, then a summary.
    Text,
    /// A JSON array of findings.
    Json,
    /// A JUnit XML report: one test case per PipelineRollout.
    Junit,
}

/// Reads the deployed objects and the manifests, and judges each
/// PipelineRollout (and each object of another guarded kind).
pub fn check(policy: &Policy, args: &CheckArgs) -> CheckReport {
    let mut report = CheckReport {
        against: !args.against.is_empty(),
        ..CheckReport::default()
    };
    let mut deployed = Deployed::default();
    if report.against {
        let found = files::read_paths(&args.against);
        for item in found.items {
            match item {
                Item::Rollout(manifest) => {
                    let (namespace, name) = judge::identity(&manifest.object, &args.namespace);
                    // The first one of a name wins.
                    if let Some(name) = name {
                        deployed
                            .entry((manifest.kind, namespace, name))
                            .or_insert((manifest.object, manifest.location.label()));
                    }
                }
                Item::Problem(problem) => report.entries.push(CheckEntry::Problem(problem)),
            }
        }
    }
    let inputs = files::read_paths(&args.paths);
    report.files = inputs.files;
    report.skipped = inputs.skipped;
    let judge = ManifestJudge {
        policy,
        user: &args.user,
        groups: &args.groups,
        default_namespace: &args.namespace,
        deployed: &deployed,
        now: args.now.unwrap_or_else(time::OffsetDateTime::now_utc),
    };
    for item in inputs.items {
        report.entries.push(match item {
            Item::Rollout(manifest) => CheckEntry::Rollout(judge.judge(manifest)),
            Item::Problem(problem) => CheckEntry::Problem(problem),
        });
    }
    report
}
