//! The other engine of the differential tables: the webhook's decision
//! path (`admission::answer`, as `/validate` runs it) on the AdmissionReview
//! the API server would send for a [`Request`], and [`agree`], which
//! compares it with what every exported policy makes of the same request.

use std::time::Duration;

use pipelinerollout_webhook::admission::{self, AnswerContext};
use pipelinerollout_webhook::authz::{Authorizer, StaticLists};
use pipelinerollout_webhook::namespace_config::ClusterDefault;
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::vap::{self, Export};
use serde_json::{Value, json};

use super::{Request, judge};

/// The webhook's answer.
#[derive(Debug, Clone)]
pub struct Webhook {
    /// Whether the rules judged it.
    pub judged: bool,
    /// Whether it was allowed.
    pub allowed: bool,
    /// Each denial's message.
    pub denials: Vec<String>,
    /// Its warnings.
    pub warnings: Vec<String>,
}

/// `/validate`'s answer to `request` under `policy`, permissions from the
/// policy's lists only.
pub fn webhook(policy: &Policy, request: &Request) -> Webhook {
    let r = request.resource;
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "cel-table",
            "kind": {"group": r.group, "version": r.version, "kind": r.kind},
            "resource": {"group": r.group, "version": r.version, "resource": r.resource},
            "name": request.name,
            "namespace": request.namespace,
            "operation": request.operation,
            "userInfo": {"username": request.user, "groups": request.groups},
            // The API server decodes the body and encodes it again.
            "object": go_round_trip(&request.object),
            "oldObject": go_round_trip(&request.old_object),
            "dryRun": request.dry_run,
        }
    });
    let authorizer = Authorizer::StaticLists(StaticLists::new("the tables grant by lists"));
    // A cluster default that drains: a namespace left to it is then no
    // decision, which the export cannot make (it cannot read the default).
    let drains = ClusterDefault::Strategy("progressive");
    let context = AnswerContext {
        cluster_default: Some(&drains),
        ..AnswerContext::now(&authorizer, Duration::from_secs(1))
    };
    let body = review.to_string().into_bytes();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (_, outcome) = runtime
        .block_on(admission::answer(
            admission::Webhook::Validate,
            policy,
            &body,
            context,
        ))
        .expect("the review parses");
    Webhook {
        judged: outcome.judged,
        allowed: outcome.allowed(),
        denials: outcome
            .verdict
            .denials
            .iter()
            .map(ToString::to_string)
            .collect(),
        warnings: outcome.verdict.warnings.clone(),
    }
}

/// What the exported policies, as bound, make of one request.
#[derive(Debug, Clone, Default)]
pub struct Policies {
    /// The first failing validation's message of each policy bound
    /// `[Deny]`: what the API server refuses with.
    pub denials: Vec<String>,
    /// Each failing validation's message of the policies bound `[Warn,
    /// Audit]` (warn mode): what the webhook would deny.
    pub would_deny: Vec<String>,
    /// Each failing validation's message of the policies bound `[Warn]`
    /// alone (rule 21's warning): a warning the webhook gives as well.
    pub warnings: Vec<String>,
    /// The rule labels of the failing validations of the policies that
    /// deny (or, in warn mode, would deny), in order.
    pub rules: Vec<&'static str>,
}

/// The exported policies' answer to `request`.
pub fn policies(export: &Export, request: &Request) -> Policies {
    let mut out = Policies::default();
    for p in &export.policies {
        let failing: Vec<_> = judge(p, request)
            .unwrap_or_default()
            .into_iter()
            .filter(|v| !v.holds)
            .collect();
        let messages = failing.iter().map(|v| v.message.clone());
        match p.binding.spec.validation_actions.as_slice() {
            [warn] if warn == "Warn" => {
                out.warnings.extend(messages);
                continue;
            }
            [deny] if deny == "Deny" => out.denials.extend(messages.take(1)),
            _ => out.would_deny.extend(messages),
        }
        out.rules.extend(failing.iter().map(|v| v.rule));
    }
    out
}

/// Whether the exported messages (denials, and rule 21's warning) must be
/// the webhook's word for word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Words {
    /// Each exported denial is one of the webhook's denials, and rule 21's
    /// warnings are the same.
    Same,
    /// They differ by design, for this reason: only the verdict (and
    /// whether rule 21 warns) is compared.
    Differ(&'static str),
}

/// Both engines' answers to one request, once they agree.
#[derive(Debug, Clone)]
pub struct Agreement {
    /// The exported policies'.
    pub policies: Policies,
    /// The webhook's.
    pub webhook: Webhook,
}

/// The exported policies of `policy` and the webhook on `request`: the same
/// verdict (denied, or in warn mode warned "would deny"), each exported
/// denial word for word one of the webhook's where `words` says so, and
/// rule 21's warning given by both, word for word. `Err` says how they
/// differ, with both answers.
pub fn agree(policy: &Policy, request: &Request, words: Words) -> Result<Agreement, String> {
    let export = vap::export(policy, "p");
    let cel = policies(&export, request);
    let hook = webhook(policy, request);
    let mut found = Vec::new();
    if cel.denials.is_empty() != hook.allowed {
        found.push("they disagree on denying it".to_owned());
    }
    let hook_would_deny = hook
        .warnings
        .iter()
        .any(|w| w.starts_with("warn mode, would deny:"));
    if cel.would_deny.is_empty() == hook_would_deny {
        found.push("they disagree on warning that enforce mode would deny it".to_owned());
    }
    if words == Words::Same {
        for d in &cel.denials {
            if !hook.denials.contains(d) {
                found.push(format!("the webhook does not deny with the words {d:?}"));
            }
        }
    }
    let rule_21 = |w: &String| w.starts_with("its Pipelines are deleted too");
    let hook_21: Vec<&String> = hook.warnings.iter().filter(|w| rule_21(w)).collect();
    let cel_21: Vec<&String> = cel.warnings.iter().collect();
    let same_21 = match words {
        Words::Same => hook_21 == cel_21,
        Words::Differ(_) => hook_21.len() == cel_21.len(),
    };
    if !same_21 {
        found.push("they disagree on rule 21's warning".to_owned());
    }
    if found.is_empty() {
        Ok(Agreement {
            policies: cel,
            webhook: hook,
        })
    } else {
        Err(format!(
            "{}\n    exported: {cel:?}\n    webhook: {hook:?}",
            found.join("; ")
        ))
    }
}

/// A JSON value as the API server passes it on: Go decodes a number that
/// is not an int64 literal as a float64 and writes a float64 back in its
/// shortest form, without an exponent below 1e21 (so `30.0` becomes `30`
/// and 2^63 becomes `9223372036854776000`).
pub fn go_round_trip(value: &Value) -> Value {
    match value {
        Value::Number(n) if n.as_i64().is_none() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            let text = if f.is_finite() && f.abs() < 1e21 {
                format!("{f}")
            } else {
                format!("{f:e}")
            };
            serde_json::from_str(&text).unwrap_or_else(|_| value.clone())
        }
        Value::Array(items) => Value::Array(items.iter().map(go_round_trip).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), go_round_trip(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[test]
fn go_round_trip_of_numbers() {
    let cases = [
        ("30.0", "30"),
        ("30.5", "30.5"),
        ("1e3", "1000"),
        ("9223372036854775808", "9223372036854776000"),
        ("18446744073709551615", "18446744073709552000"),
        ("1e20", "100000000000000000000"),
        ("-5", "-5"),
    ];
    for (sent, seen) in cases {
        let sent: Value = serde_json::from_str(sent).expect("JSON");
        let seen: Value = serde_json::from_str(seen).expect("JSON");
        assert_eq!(go_round_trip(&sent), seen, "{sent}");
    }
}
