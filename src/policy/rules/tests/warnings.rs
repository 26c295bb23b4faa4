//! Rule 10: warn mode denies nothing and warns about what it would deny;
//! and every warning, in any mode, fits kubectl's line.

use serde_json::{Value, json};
use test_builders::status::pause_and_drain_status;

use super::defaulting::{mutate_cases, run_mutate};
use super::fixtures::{admin, argocd_server, built_in, pipeline_rollout, rollout_with, warn_mode};
use super::force::{annotation_cases, reapply_cases};
use super::force_promote::promote_cases;
use super::messages::message_cases;
use super::ratcheting::ratchet_cases;
use super::runner::run_table;
use super::timeouts::{namespace_cases, timeout_cases};
use super::validate_case::{Case, check, check_warnings_short, create, run, update};
use crate::policy::Mode;

/// Rule 10: the tables' violations in warn mode.
pub(super) fn warn_cases() -> Vec<Case> {
    let timeout = |v: Value| pipeline_rollout().with_timeout(v);
    let would = "warn mode, would deny: ";
    vec![
        create("warn: T \"1h\"", timeout(json!("1h"))).warn(&[would]),
        create("warn: T 29", timeout(json!(29)))
            .warn(&["warn mode, would deny: pauseGracePeriodSeconds 29"]),
        create("warn: T 3601", timeout(json!(3601))).warn(&[would]),
        create("warn: overflow", timeout(json!(5_000_000_000_u64))).warn(&["overflows"]),
        create("warn: S 0", timeout(json!(600)).with_scale_factor(json!(0)))
            .warn(&["scaleFactor 0"]),
        create(
            "warn: A \"yes\"",
            timeout(json!(600)).with_allow_data_loss(json!("yes")),
        )
        .warn(&["\"yes\""]),
        create(
            "warn: spec.pipeline a string",
            pipeline_rollout().with_field(&["spec", "pipeline"], json!("oops")),
        )
        .warn(&["spec.pipeline is a string"]),
        create(
            "warn: T 29, S 0, A \"yes\"",
            timeout(json!(29))
                .with_scale_factor(json!(0))
                .with_allow_data_loss(json!("yes")),
        )
        .warn(&[
            "pauseGracePeriodSeconds 29",
            "scaleFactor 0",
            "allow-data-loss \"yes\"",
        ]),
        create(
            "warn: alice CREATE A \"true\"",
            timeout(json!(600)).with_allow_data_loss(json!("true")),
        )
        .warn(&["alice may not set allow-data-loss"])
        .audit("force-reapply", "would-deny by rule 6"),
        create(
            "warn: argocd CREATE A \"true\"",
            timeout(json!(600)).with_allow_data_loss(json!("true")),
        )
        .user(argocd_server())
        .warn(&[would])
        .audit("force-reapply", "would-deny by rule 6"),
        update(
            "warn: alice A -> \"true\" while pausing",
            rollout_with(Some("false"), Some(pause_and_drain_status(None))),
            rollout_with(Some("true"), Some(pause_and_drain_status(None))),
        )
        .warn(&[would])
        .audit("force-reapply", "would-deny"),
        update(
            "warn: argocd A -> \"true\" while pausing",
            rollout_with(Some("false"), Some(pause_and_drain_status(None))),
            rollout_with(Some("true"), Some(pause_and_drain_status(None))),
        )
        .user(argocd_server())
        .audit("force-reapply", "allowed: user"),
        create(
            "warn: alice forcePromote",
            timeout(json!(600)).with_force_promote(json!(true)),
        )
        .warn(&["alice may not turn on forcePromote"])
        .audit("force-promote", "would-deny by rule 7"),
        create(
            "warn: admin forcePromote",
            timeout(json!(600)).with_force_promote(json!(true)),
        )
        .user(admin())
        .audit("force-promote", "allowed: user"),
        update(
            "warn: unchanged T \"1h\"",
            timeout(json!("1h")),
            timeout(json!("1h")).with_unrelated_edit(),
        )
        .warn(&["unchanged, so allowed"]),
        update(
            "warn: rule 11",
            timeout(json!(600)).with_allow_data_loss(json!("true")),
            timeout(json!(600))
                .with_allow_data_loss(json!("true"))
                .with_unrelated_edit(),
        )
        .warn(&["\"false\""]),
        create("warn: valid", timeout(json!(600))),
    ]
    .into_iter()
    .map(|c| c.policy(warn_mode()))
    .collect()
}

#[test]
fn warn_mode_table() {
    let mut would_deny = 0;
    run_table("warn mode", &warn_cases(), |case, m| {
        let warned = check(case, m);
        m.check(warned.allowed(), || "warn mode denies nothing".to_owned());
        for w in warned.warnings.iter().filter(|w| w.contains("would deny")) {
            m.check(w.starts_with("warn mode, would deny:"), || w.clone());
        }
        for value in warned.audit.values() {
            m.check(
                value.starts_with("allowed") || value.starts_with("would-deny"),
                || format!("audit {value}"),
            );
        }
        // The same request in enforce mode: each denial is one warning here.
        let enforced = run(&case.clone().policy(built_in()));
        for v in &enforced.denials {
            let expected = format!("warn mode, would deny: {}", v.summary());
            m.check(warned.warnings.contains(&expected), || {
                format!("missing {expected:?} in {:#?}", warned.warnings)
            });
        }
        let count = warned
            .warnings
            .iter()
            .filter(|w| w.starts_with("warn mode, would deny:"))
            .count();
        m.equal(
            "would-deny warnings (one per denial)",
            count,
            enforced.denials.len(),
        );
        would_deny += count;
        for (key, value) in &enforced.audit {
            let Some(warned_value) = warned.audit.get(key) else {
                m.check(false, || {
                    format!("{key}: {value} in enforce, absent in warn")
                });
                continue;
            };
            if let Some(rest) = value.strip_prefix("denied by rule ") {
                let rule = &rest[..1];
                m.check(
                    warned_value.starts_with(&format!("would-deny by rule {rule}")),
                    || format!("{key}: {value} in enforce vs {warned_value} in warn"),
                );
            } else {
                m.equal(key, value, warned_value);
            }
        }
    });
    assert!(would_deny >= 10, "the table exercises warn mode");
}

/// A table's name and its cases.
type NamedTable = (&'static str, fn() -> Vec<Case>);

/// Every `/validate` case of every table, its name prefixed with its table's.
fn all_validate_cases() -> Vec<Case> {
    let tables: [NamedTable; 8] = [
        ("timeouts", timeout_cases),
        ("namespaces", namespace_cases),
        ("annotation", annotation_cases),
        ("re-apply", reapply_cases),
        ("promote", promote_cases),
        ("ratcheting", ratchet_cases),
        ("warn mode", warn_cases),
        ("messages", message_cases),
    ];
    let mut all = Vec::new();
    for (table, cases) in tables {
        all.extend(cases().into_iter().map(|mut case| {
            case.name = format!("{table}: {}", case.name);
            case
        }));
    }
    all
}

#[test]
fn every_warning_is_at_most_120_characters() {
    let mut seen = 0;
    let mut longest = String::new();
    run_table("every /validate case", &all_validate_cases(), |case, m| {
        // The same request in warn mode, so every violation becomes a warning.
        for policy in [case.policy.clone(), {
            let mut p = case.policy.clone();
            p.mode = Mode::Warn;
            p
        }] {
            let d = run(&case.clone().policy(policy));
            check_warnings_short(&d.warnings, m);
            for w in &d.warnings {
                if w.chars().count() > longest.chars().count() {
                    longest.clone_from(w);
                }
                seen += 1;
            }
        }
    });
    run_table("every /mutate case", &mutate_cases(), |case, m| {
        let d = run_mutate(case);
        check_warnings_short(&d.warnings, m);
        seen += d.warnings.len();
    });
    assert!(seen > 100, "only {seen} warnings were checked");
    assert!(!longest.is_empty());
}

/// DOMAIN.md: "Warnings are shown by kubectl; keep each under 120 characters."
/// A long invalid value is cut to 48 characters, but with the 23-character
/// prefix a ratcheted or warn-mode warning can still reach about 135.
#[test]
fn warnings_stay_short_for_long_values() {
    let long = json!("x".repeat(200));
    let cases = vec![
        update(
            "long T unchanged",
            pipeline_rollout().with_timeout(long.clone()),
            pipeline_rollout()
                .with_timeout(long.clone())
                .with_unrelated_edit(),
        ),
        update(
            "long A unchanged",
            pipeline_rollout().with_allow_data_loss(long.clone()),
            pipeline_rollout()
                .with_allow_data_loss(long.clone())
                .with_unrelated_edit(),
        ),
        create(
            "long T in warn mode",
            pipeline_rollout().with_timeout(long.clone()),
        )
        .policy(warn_mode()),
        create(
            "long A in warn mode",
            pipeline_rollout().with_allow_data_loss(long.clone()),
        )
        .policy(warn_mode()),
        create(
            "long S in warn mode",
            pipeline_rollout().with_scale_factor(long),
        )
        .policy(warn_mode()),
    ];
    run_table("long values", &cases, |case, m| {
        let d = run(case);
        m.check(!d.warnings.is_empty(), || "no warning".to_owned());
        check_warnings_short(&d.warnings, m);
    });
}
