//! What `check` found, and the text and JSON renderings of it (JUnit is in
//! [`super::junit`]).

use serde::Serialize;

use super::input::{Entry, Location, Problem};
use crate::kinds::{Kind, Resource};
use crate::policy::rules::Rule;
use crate::rollout::KIND;

/// How bad a remark is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The API server would refuse the write.
    Error,
    /// Allowed, with a warning kubectl would show.
    Warning,
    /// Allowed; something the webhook would change (a default).
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Info => "info",
        }
    }
}

/// One thing the webhook would say about a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remark {
    pub severity: Severity,
    /// The rule broken (docs/rules.md), for denials.
    pub rule: Option<Rule>,
    /// The field concerned, dotted, when known.
    pub field: Option<String>,
    /// The message, as the webhook words it.
    pub message: String,
}

/// One manifest, judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgedManifest {
    pub location: Location,
    /// The namespace it was judged in.
    pub namespace: String,
    pub name: Option<String>,
    pub kind: Resource,
    /// CREATE, or UPDATE when `--against` holds a deployed object.
    pub operation: &'static str,
    /// Where the deployed object came from, for an UPDATE.
    pub deployed: Option<String>,
    /// What the webhook would say, in order: defaults, denials, warnings.
    pub remarks: Vec<Remark>,
}

impl JudgedManifest {
    /// `NAMESPACE/NAME`.
    pub fn id(&self) -> String {
        format!(
            "{}/{}",
            self.namespace,
            self.name.as_deref().unwrap_or("<no name>")
        )
    }

    /// Whether the write would be refused.
    pub fn denied(&self) -> bool {
        self.remarks.iter().any(|f| f.severity == Severity::Error)
    }

    pub fn of(&self, severity: Severity) -> impl Iterator<Item = &Remark> {
        self.remarks.iter().filter(move |f| f.severity == severity)
    }
}

/// One entry of the report, in input order.
pub type CheckEntry = Entry<JudgedManifest>;

impl CheckEntry {
    pub fn file(&self) -> &str {
        match self {
            Self::Rollout(judged) => &judged.location.file,
            Self::Problem(problem) => &problem.location.file,
        }
    }
}

/// Everything `check` found.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// Files read (or tried), standard input included.
    pub files: usize,
    /// Documents that are not PipelineRollouts.
    pub skipped: usize,
    /// Whether `--against` was given.
    pub against: bool,
    /// The judged rollouts and the input problems, in input order.
    pub entries: Vec<CheckEntry>,
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl CheckReport {
    pub fn rollouts(&self) -> impl Iterator<Item = &JudgedManifest> {
        self.entries.iter().filter_map(|e| match e {
            CheckEntry::Rollout(judged) => Some(judged),
            CheckEntry::Problem(_) => None,
        })
    }

    pub fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.entries.iter().filter_map(|e| match e {
            CheckEntry::Problem(problem) => Some(problem),
            CheckEntry::Rollout(_) => None,
        })
    }

    /// How many rollouts would be refused.
    pub fn denied(&self) -> usize {
        self.rollouts().filter(|j| j.denied()).count()
    }

    /// 2 when any input was unreadable, else 1 when any rollout would be
    /// denied, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.problems().next().is_some() {
            2
        } else if self.denied() > 0 {
            1
        } else {
            0
        }
    }

    /// The one-line summary.
    pub fn summary(&self) -> String {
        let rollouts = self.rollouts().count();
        let mut notes = Vec::new();
        if self.skipped > 0 {
            notes.push(format!(
                "{} skipped",
                plural(self.skipped, "other document", "other documents")
            ));
        }
        if self.against {
            let updates = self.rollouts().filter(|j| j.deployed.is_some()).count();
            notes.push(format!(
                "{} of deployed objects",
                plural(updates, "judged as an update", "judged as updates")
            ));
        }
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        };
        let unreadable = match self.problems().count() {
            0 => String::new(),
            n => format!(", {}", plural(n, "unreadable input", "unreadable inputs")),
        };
        let others = self
            .rollouts()
            .filter(|j| j.kind != Resource::Guarded(Kind::PipelineRollout))
            .count();
        let checked = match others {
            0 => plural(rollouts, KIND, &format!("{KIND}s")),
            _ => format!(
                "{} and {}",
                plural(rollouts - others, KIND, &format!("{KIND}s")),
                plural(others, "other guarded object", "other guarded objects")
            ),
        };
        let warnings = self.rollouts().map(|j| j.of(Severity::Warning).count());
        format!(
            "checked {checked} in {}{notes}: {} denied, {}{unreadable}",
            plural(self.files, "file", "files"),
            self.denied(),
            plural(warnings.sum(), "warning", "warnings"),
        )
    }

    /// Every remark and unreadable input, in input order: what the text and
    /// JSON outputs list.
    fn records(&self) -> Vec<Record<'_>> {
        let mut records = Vec::new();
        for entry in &self.entries {
            match entry {
                CheckEntry::Rollout(judged) => {
                    records.extend(judged.remarks.iter().map(|f| Record {
                        at: &judged.location,
                        id: Some(judged.id()),
                        file: &judged.location.file,
                        document: judged.location.document,
                        item: judged.location.item,
                        line: judged.location.line,
                        namespace: Some(&judged.namespace),
                        name: judged.name.as_deref(),
                        operation: Some(judged.operation),
                        severity: f.severity,
                        rule: f.rule.map(Rule::number),
                        field: f.field.as_deref(),
                        message: &f.message,
                    }));
                }
                CheckEntry::Problem(problem) => records.push(Record {
                    at: &problem.location,
                    id: None,
                    file: &problem.location.file,
                    document: problem.location.document,
                    item: problem.location.item,
                    line: problem.location.line,
                    namespace: None,
                    name: None,
                    operation: None,
                    severity: Severity::Error,
                    rule: None,
                    field: None,
                    message: &problem.message,
                }),
            }
        }
        records
    }

    /// `FILE[:DOC] NAMESPACE/NAME: SEVERITY: MESSAGE` per remark (and
    /// `FILE[:DOC]: error: MESSAGE` per unreadable input), then the summary.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for r in self.records() {
            let id = r.id.map(|id| format!(" {id}")).unwrap_or_default();
            out.push_str(&format!(
                "{}{id}: {}: {}\n",
                r.at.label(),
                r.severity.as_str(),
                // One line, whatever the message holds.
                r.message.replace(['\r', '\n'], " ")
            ));
        }
        out.push_str(&self.summary());
        out.push('\n');
        out
    }

    /// A JSON array of every remark and unreadable input.
    pub fn json(&self) -> String {
        // Plain strings, numbers and options: serialising cannot fail.
        serde_json::to_string_pretty(&self.records()).unwrap_or_else(|e| format!("[\"{e}\"]"))
    }
}

/// One remark or unreadable input, as the JSON output holds it.
#[derive(Serialize)]
struct Record<'a> {
    #[serde(skip)]
    at: &'a Location,
    /// `NAMESPACE/NAME`, for a remark.
    #[serde(skip)]
    id: Option<String>,
    file: &'a str,
    document: Option<usize>,
    item: Option<usize>,
    line: Option<usize>,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    operation: Option<&'a str>,
    severity: Severity,
    rule: Option<u8>,
    field: Option<&'a str>,
    message: &'a str,
}

#[cfg(test)]
pub(super) mod tests;
