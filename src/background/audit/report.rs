//! One namespace's PolicyReport (`wgpolicyk8s.io/v1alpha2`), built from
//! the results held: one result per object and rule, a summary, no owner.
//! Its content is compared by a hash of its canonical JSON, so that a
//! report is written only when what it says changes.

use std::collections::BTreeMap;
use std::hash::{Hash as _, Hasher as _};

use serde::Serialize;
use serde_json::{Value, json};

use super::audited::KINDS;
use super::judge::Status;
use super::store::{Name, StoredObject};

/// The reports' name, policy and source: the webhook's.
pub const REPORT_NAME: &str = "pipelinerollout-webhook";
pub const REPORT_GROUP: &str = "wgpolicyk8s.io";
pub const REPORT_VERSION: &str = "v1alpha2";
pub const REPORT_KIND: &str = "PolicyReport";
pub const REPORT_PLURAL: &str = "policyreports";
/// The label that marks the reports the audit writes.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The annotation saying how many results a report left out for size.
pub const OMITTED: &str = "pipelinerollout-webhook.numaplane.numaproj.io/results-omitted";
/// The largest report written: well under the API server's request limit
/// (3 MiB) and etcd's value limit (1.5 MiB). Past it, passing results are
/// left out first (the summary still counts them), then the rest.
pub const MAX_REPORT_BYTES: usize = 1024 * 1024;

/// A report to write: its body and the hash of its content (the default:
/// a deletion).
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The PolicyReport, built when its write's turn comes; `None` to
    /// delete it (no objects left).
    pub body: Option<Value>,
    /// The hash of [`content`] of the body (0 for a deletion).
    pub hash: u64,
}

/// The counts of a report's results, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub pass: u64,
    pub fail: u64,
    pub warn: u64,
    pub error: u64,
    pub skip: u64,
}

impl Summary {
    fn add(&mut self, status: Status) {
        let slot = match status {
            Status::Pass => &mut self.pass,
            Status::Fail => &mut self.fail,
            Status::Warn => &mut self.warn,
            Status::Error => &mut self.error,
            Status::Skip => &mut self.skip,
        };
        *slot += 1;
    }
}

/// One result as written.
#[derive(Serialize)]
struct ResultOut<'a> {
    policy: &'static str,
    rule: &'static str,
    result: &'static str,
    source: &'static str,
    scored: bool,
    resources: [ResourceOut<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}

/// The object a result is about.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceOut<'a> {
    api_version: String,
    kind: &'static str,
    namespace: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReportOut<'a> {
    api_version: String,
    kind: &'static str,
    metadata: Value,
    summary: Summary,
    results: Vec<ResultOut<'a>>,
}

/// The size of a result as JSON, near enough (the fixed keys and the texts).
fn size_of(r: &ResultOut<'_>) -> usize {
    200 + r.rule.len()
        + r.resources[0].name.len()
        + r.resources[0].namespace.len()
        + r.resources[0].uid.map_or(0, str::len)
        + r.message.map_or(0, str::len)
}

/// The report of `namespace` with its judged `objects`.
pub fn build(namespace: &str, objects: &BTreeMap<Name, StoredObject>) -> Report {
    let mut summary = Summary::default();
    let mut results = Vec::new();
    let mut bytes = 0;
    // In name order, each object's rules in order.
    for ((kind, name), entry) in objects {
        for r in &entry.results {
            summary.add(r.status);
            let out = ResultOut {
                policy: REPORT_NAME,
                rule: r.rule.name(),
                result: r.status.as_str(),
                source: REPORT_NAME,
                scored: true,
                resources: [ResourceOut {
                    api_version: KINDS[*kind].api_version(),
                    kind: KINDS[*kind].kind(),
                    namespace,
                    name,
                    uid: entry.object.uid.as_deref(),
                }],
                message: r.message.as_deref(),
            };
            bytes += size_of(&out);
            results.push(out);
        }
    }
    let mut omitted = 0;
    if bytes > MAX_REPORT_BYTES {
        let before = results.len();
        results.retain(|r| r.result != Status::Pass.as_str() && r.result != Status::Skip.as_str());
        let mut used = 0;
        let keep = results
            .iter()
            .take_while(|r| {
                used += size_of(r);
                used <= MAX_REPORT_BYTES
            })
            .count();
        results.truncate(keep);
        omitted = before - results.len();
    }
    let mut metadata = json!({
        "name": REPORT_NAME,
        "namespace": namespace,
        "labels": {MANAGED_BY: REPORT_NAME},
    });
    if omitted > 0 {
        metadata["annotations"] = json!({OMITTED: omitted.to_string()});
    }
    let out = ReportOut {
        api_version: format!("{REPORT_GROUP}/{REPORT_VERSION}"),
        kind: REPORT_KIND,
        metadata,
        summary,
        results,
    };
    // Writing plain structs and maps to JSON does not fail.
    let value = serde_json::to_value(&out).unwrap_or_default();
    Report {
        hash: content_hash(&value),
        body: Some(value),
    }
}

/// What a report says: its summary, results and omitted count, as
/// canonical JSON (keys sorted: serde_json's maps are sorted, without its
/// `preserve_order`), so that a report read back from the API server
/// hashes the same as the one written.
pub fn content(report: &Value) -> String {
    let omitted = report
        .pointer(&format!(
            "/metadata/annotations/{}",
            OMITTED.replace('/', "~1")
        ))
        .cloned()
        .unwrap_or(Value::Null);
    json!({
        "summary": report.get("summary").cloned().unwrap_or(Value::Null),
        "results": report.get("results").cloned().unwrap_or(Value::Null),
        "omitted": omitted,
    })
    .to_string()
}

/// The hash of [`content`].
pub fn content_hash(report: &Value) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    content(report).hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::background::audit::judge::RuleResult;
    use crate::policy::rules::Rule;

    fn entry(results: Vec<(Rule, Status)>) -> StoredObject {
        let object = super::super::audited::Entry {
            namespace: String::new(),
            name: String::new(),
            uid: Some("u".to_owned()),
            view: std::sync::Arc::default(),
        };
        StoredObject {
            object: std::sync::Arc::new(object),
            results: results
                .into_iter()
                .map(|(rule, status)| RuleResult {
                    rule,
                    status,
                    message: (status != Status::Pass).then(|| "why".into()),
                })
                .collect(),
        }
    }

    #[test]
    fn a_report_lists_every_result_with_a_summary_and_hashes_its_content_only() {
        let mut objects = BTreeMap::new();
        objects.insert(
            (0, "b".to_owned()),
            entry(vec![(Rule::TimeoutRange, Status::Fail)]),
        );
        objects.insert(
            (0, "a".to_owned()),
            entry(vec![
                (Rule::TimeoutRange, Status::Pass),
                (Rule::ForceReapply, Status::Warn),
            ]),
        );
        let report = build("team-a", &objects);
        let body = report.body.as_ref().expect("a body");
        assert_eq!(
            body["summary"],
            json!({"pass": 1, "fail": 1, "warn": 1, "error": 0, "skip": 0})
        );
        let results = body["results"].as_array().expect("results");
        assert_eq!(results.len(), 3);
        assert_eq!(results[0]["resources"][0]["name"], "a");
        assert_eq!(results[2]["result"], "fail");
        assert_eq!(results[2]["message"], "why");
        assert_eq!(results[2]["policy"], REPORT_NAME);
        assert!(body["metadata"].get("ownerReferences").is_none());
        assert!(results[0].get("message").is_none());
        // The same content with other metadata and key order hashes the same.
        let mut reread: Value = serde_json::from_str(&body.to_string()).expect("JSON");
        reread["metadata"]["resourceVersion"] = json!("42");
        assert_eq!(content_hash(&reread), report.hash);
        objects.insert(
            (0, "c".to_owned()),
            entry(vec![(Rule::TimeoutRange, Status::Pass)]),
        );
        assert_ne!(build("team-a", &objects).hash, report.hash);
    }

    #[test]
    fn content_is_canonical_json_whatever_the_key_order() {
        let read: Value = serde_json::from_str(
            r#"{"results": [{"z": 1, "a": {"y": 2, "b": 3}}], "summary": {"pass": 1}}"#,
        )
        .expect("JSON");
        assert_eq!(
            content(&read),
            r#"{"omitted":null,"results":[{"a":{"b":3,"y":2},"z":1}],"summary":{"pass":1}}"#
        );
    }

    #[test]
    fn an_oversized_report_leaves_out_passing_results_first() {
        let mut objects = BTreeMap::new();
        for i in 0..8_000 {
            objects.insert(
                (0, format!("rollout-{i:05}")),
                entry(vec![(Rule::TimeoutRange, Status::Pass)]),
            );
        }
        objects.insert(
            (0, "bad".to_owned()),
            entry(vec![(Rule::TimeoutRange, Status::Fail)]),
        );
        let report = build("big", &objects);
        let body = report.body.expect("a body");
        assert!(body.to_string().len() <= MAX_REPORT_BYTES + 4096);
        assert_eq!(body["summary"]["pass"], 8_000);
        assert_eq!(body["results"].as_array().map(Vec::len), Some(1));
        assert_eq!(body["metadata"]["annotations"][OMITTED], "8000");
    }
}
