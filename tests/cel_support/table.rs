//! A differential table: each case a request, the answer a user relies on
//! (allowed, or denied by a rule), and whether the exported message is the
//! webhook's word for word. [`run`] has both engines answer every case
//! and fails listing every case where they differ from each other or from
//! the table.

use pipelinerollout_webhook::policy::Policy;

use super::Request;
use super::webhook::{Words, agree};

/// The answer a case expects of both engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Allowed (in warn mode: with no "would deny").
    Allowed,
    /// Denied (in warn mode: warned that enforce mode would deny it), an
    /// exported validation whose label starts with this failing, e.g.
    /// `"rule 17"`.
    Denied(&'static str),
}

/// One row of a table.
#[derive(Debug, Clone)]
pub struct Case {
    /// What it is, for failures.
    pub name: String,
    /// The request.
    pub request: Request,
    /// The answer.
    pub expect: Expect,
    /// Whether the exported denial must be the webhook's words.
    pub words: Words,
}

/// A case whose exported denial, if any, is the webhook's word for word.
pub fn case(name: impl Into<String>, request: Request, expect: Expect) -> Case {
    Case {
        name: name.into(),
        request,
        expect,
        words: Words::Same,
    }
}

impl Case {
    /// The exported words differ from the webhook's by design, for `why`.
    pub fn words_differ(mut self, why: &'static str) -> Self {
        self.words = Words::Differ(why);
        self
    }
}

/// What [`run`] counted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    /// Cases.
    pub cases: usize,
    /// Denied (or warned "would deny") by both.
    pub denied: usize,
    /// Denials compared word for word.
    pub same_words: usize,
}

/// Both engines on every case of `cases` under `policy`; panics listing
/// each case where they disagree, or where they agree on another answer
/// than the table's.
pub fn run(label: &str, policy: &Policy, cases: &[Case]) -> Summary {
    let mut found = Vec::new();
    let mut summary = Summary::default();
    for c in cases {
        summary.cases += 1;
        let at = format!("[{label}] {}", c.name);
        let agreed = match agree(policy, &c.request, c.words) {
            Ok(a) => a,
            Err(e) => {
                found.push(format!("{at}: {e}"));
                continue;
            }
        };
        let cel = &agreed.policies;
        let denied = !cel.denials.is_empty() || !cel.would_deny.is_empty();
        let as_expected = match c.expect {
            Expect::Allowed => !denied,
            Expect::Denied(rule) => denied && cel.rules.iter().any(|r| r.starts_with(rule)),
        };
        if !as_expected {
            found.push(format!(
                "{at}: expected {:?}, both engines say otherwise\n    failing: {:?}\n    exported: {:?}\n    webhook: {:?}",
                c.expect, cel.rules, cel, agreed.webhook
            ));
            continue;
        }
        if denied {
            summary.denied += 1;
            if c.words == Words::Same && !cel.denials.is_empty() {
                summary.same_words += 1;
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} of {} cases:\n{}",
        found.len(),
        cases.len(),
        found.join("\n")
    );
    eprintln!(
        "[{label}] {} cases: {} denied by both, {} of those in the webhook's words",
        summary.cases, summary.denied, summary.same_words
    );
    summary
}
