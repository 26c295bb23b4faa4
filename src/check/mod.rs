//! `check`: judges PipelineRollout manifests (files, directories, standard
//! input) as the webhook would judge their creation, or their update from
//! what is deployed, and reports in text, JSON or JUnit XML.
//!
//! [`files`] finds and reads the files, [`documents`] splits each into
//! documents and reads them, [`input`] picks out the PipelineRollouts,
//! [`judge`] gives each to [`crate::admission::decide`] (mutate, then
//! validate the patched object), [`report`] and [`junit`] render the
//! remarks. The command's flags and its output are wired in `crate::cli`.

pub mod documents;
pub mod files;
pub mod input;
pub mod judge;
pub mod junit;
pub mod report;

use crate::policy::Policy;
use input::{Inputs, Item};
use judge::{Deployed, ManifestJudge};
use report::{CheckEntry, CheckReport};

/// The requester when `--as` is not given: a user with no permissions, so
/// a manifest that turns on a force is reported.
pub const DEFAULT_USER: &str = "pipelinerollout-webhook:check";

/// What `check` judges, and as whom.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The namespace of manifests that set no metadata.namespace.
    pub namespace: String,
    /// The manifests now deployed; a rollout found there by namespace and
    /// name is judged as an UPDATE from it.
    pub against: Vec<String>,
    /// The user the writes are judged for.
    pub user: String,
    /// That user's groups (`system:authenticated` is added).
    pub groups: Vec<String>,
    /// The time the writes are judged at; `None`: now.
    pub now: Option<time::OffsetDateTime>,
    /// Manifest files, directories, or - for standard input.
    pub paths: Vec<String>,
}

/// Reads the deployed objects and the manifests, and judges each
/// PipelineRollout (and each object of another guarded kind).
pub fn check(policy: &Policy, args: &CheckOptions) -> CheckReport {
    let mut report = CheckReport {
        against: !args.against.is_empty(),
        ..CheckReport::default()
    };
    let mut deployed = Deployed::default();
    if report.against {
        let found = files::read_paths(&args.against);
        warn_empty(&found);
        for item in found.items {
            match item {
                Item::Rollout(manifest) => {
                    let (namespace, name) = judge::identity(&manifest.object, &args.namespace);
                    if let Some(name) = name {
                        deployed.insert(
                            manifest.kind,
                            namespace,
                            name,
                            manifest.object,
                            manifest.location.label(),
                        );
                    }
                }
                Item::Problem(problem) => report.entries.push(CheckEntry::Problem(problem)),
            }
        }
    }
    let inputs = files::read_paths(&args.paths);
    warn_empty(&inputs);
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

fn warn_empty(inputs: &Inputs) {
    for dir in &inputs.empty_dirs {
        eprintln!(
            "warning: {dir} holds no .yaml, .yml or .json files (hidden files and directories are skipped)"
        );
    }
}
