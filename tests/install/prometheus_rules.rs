//! The chart's alerts (templates/prometheusrule.yaml) with promtool:
//! `promtool check rules` on the rendered rules, and `promtool test rules`
//! with the unit tests of tests/fixtures/prometheus/alerts-test.yaml
//! (default values) and alerts-test-self-managed.yaml (what
//! `certificates.mode=selfManaged` adds or changes), in which every alert
//! fires on the series that should fire it and stays quiet otherwise. Also: every alert has a severity, a summary, a
//! description and a runbook section in docs/observability.md, and its
//! thresholds come from the values.
//!
//! Needs promtool (Debian's `prometheus` package) and helm; without
//! promtool the promtool tests print a skip line, and fail when CI=true.

use crate::helm_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use helm_support::{object, root, template, write};
use serde_json::Value;

const UNIT_TESTS: &str = "tests/fixtures/prometheus/alerts-test.yaml";
const SELF_MANAGED_TESTS: &str = "tests/fixtures/prometheus/alerts-test-self-managed.yaml";
const RUNBOOKS: &str = "docs/observability.md";
const NAME: &str = "pipelinerollout-webhook";

/// promtool, or `None` after a skip line (a failure when CI=true).
fn promtool(test: &str) -> Option<&'static str> {
    let found = Command::new("promtool").arg("--version").output().is_ok();
    if found {
        return Some("promtool");
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{test}: promtool is not installed, and CI=true: install Debian's prometheus package"
        );
    }
    eprintln!("SKIPPED {test}: promtool is not installed (Debian's prometheus package has it)");
    None
}

/// The values that render every alert: the defaults, with the certificate
/// work's alerts of `certificates.mode=selfManaged`.
const EVERY_ALERT: [&str; 2] = ["--set", "certificates.mode=selfManaged"];

/// Each file of unit tests and the values whose rules it tests.
const SUITES: [(&str, &[&str]); 2] = [(UNIT_TESTS, &[]), (SELF_MANAGED_TESTS, &EVERY_ALERT)];

/// The PrometheusRule of the chart with `args` (monitoring on).
fn rule(args: &[&str]) -> Value {
    let mut all = vec!["--set", "prometheusRule.enabled=true"];
    all.extend_from_slice(args);
    object(&template(&all), "PrometheusRule", NAME).clone()
}

/// Every alerting rule of `rule`.
fn alerts(rule: &Value) -> Vec<Value> {
    rule["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn names(rule: &Value) -> BTreeSet<String> {
    alerts(rule)
        .iter()
        .map(|a| a["alert"].as_str().expect("alert name").to_owned())
        .collect()
}

fn run(program: &str, args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn promtool_checks_the_rendered_rules() {
    let Some(promtool) = promtool("promtool_checks_the_rendered_rules") else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let monitoring = helm_support::example("monitoring.yaml")
        .display()
        .to_string();
    for args in [
        vec![],
        vec!["-f", monitoring.as_str()],
        vec!["--set", "sweeper.enabled=false"],
        EVERY_ALERT.to_vec(),
    ] {
        let spec = serde_json::to_string(&rule(&args)["spec"]).expect("JSON");
        write(dir.path(), "rules.yaml", &spec);
        let (ok, said) = run(promtool, &["check", "rules", "rules.yaml"], dir.path());
        assert!(ok, "promtool check rules ({args:?}):\n{said}");
        assert!(said.contains("SUCCESS"), "{said}");
    }
}

#[test]
fn promtool_unit_tests_fire_and_stay_quiet() {
    let Some(promtool) = promtool("promtool_unit_tests_fire_and_stay_quiet") else {
        return;
    };
    for (file, values) in SUITES {
        let mut spec = rule(values)["spec"].clone();
        // promtool compares an alert's annotations whole, so the unit tests
        // give them only for the alert whose annotations carry its labels
        // (ForceAllowed: who forced which rollout); the others' are checked
        // by every_alert_says_what_to_do, and left out here.
        for group in spec["groups"].as_array_mut().expect("groups") {
            for alert in group["rules"].as_array_mut().expect("rules") {
                if alert["alert"] != "PipelineRolloutWebhookForceAllowed"
                    && let Some(a) = alert.as_object_mut()
                {
                    a.remove("annotations");
                }
            }
        }
        let dir = tempfile::tempdir().expect("dir");
        write(
            dir.path(),
            "rules.yaml",
            &serde_json::to_string(&spec).expect("JSON"),
        );
        let tests = std::fs::read_to_string(root().join(file)).expect(file);
        write(dir.path(), "alerts-test.yaml", &tests);
        let (ok, said) = run(promtool, &["test", "rules", "alerts-test.yaml"], dir.path());
        assert!(
            ok,
            "promtool test rules {file} (values {values:?}):\n{said}"
        );
        assert!(said.contains("SUCCESS"), "{said}");
    }
}

#[test]
fn every_alert_has_a_test_that_fires_it_and_one_that_keeps_it_quiet() {
    let mut problems = Vec::new();
    for (file, values) in SUITES {
        let tests: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(root().join(file)).expect(file))
                .expect("the unit tests are YAML");
        let (mut fired, mut quiet) = (BTreeSet::new(), BTreeSet::new());
        for test in tests["tests"].as_array().expect("tests") {
            for case in test["alert_rule_test"].as_array().expect("alert_rule_test") {
                let name = case["alertname"].as_str().expect("alertname").to_owned();
                if case["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()) {
                    fired.insert(name);
                } else {
                    quiet.insert(name);
                }
            }
        }
        let all = names(&rule(values));
        // The self-managed suite tests what that mode adds or changes; the
        // default suite every alert of the defaults.
        let owned: BTreeSet<String> = if values.is_empty() {
            all.clone()
        } else {
            all.difference(&names(&rule(&[]))).cloned().collect()
        };
        let never_fired: Vec<_> = owned.difference(&fired).collect();
        let never_quiet: Vec<_> = owned.difference(&quiet).collect();
        if !never_fired.is_empty() || !never_quiet.is_empty() {
            problems.push(format!(
                "{file}: no test fires {never_fired:?}; none keeps {never_quiet:?} quiet"
            ));
        }
        let unknown: Vec<_> = fired.union(&quiet).filter(|n| !all.contains(*n)).collect();
        if !unknown.is_empty() {
            problems.push(format!(
                "{file} tests alerts that values {values:?} do not render: {unknown:?}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// GitHub's anchor of a Markdown heading.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_alert_says_what_to_do_and_has_a_runbook_section() {
    let docs = std::fs::read_to_string(root().join(RUNBOOKS)).expect(RUNBOOKS);
    let anchors: BTreeSet<String> = docs
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect();
    let mut problems = Vec::new();
    for alert in alerts(&rule(&EVERY_ALERT)) {
        let name = alert["alert"].as_str().unwrap_or("?");
        let severity = alert["labels"]["severity"].as_str().unwrap_or_default();
        if !["critical", "warning", "info"].contains(&severity) {
            problems.push(format!("{name}: severity {severity:?}"));
        }
        for key in ["summary", "description"] {
            if alert["annotations"][key]
                .as_str()
                .is_none_or(|t| t.len() < 20)
            {
                problems.push(format!("{name}: no {key}"));
            }
        }
        let runbook = alert["annotations"]["runbook"].as_str().unwrap_or_default();
        match runbook.split_once('#') {
            Some((page, section)) if page == RUNBOOKS && anchors.contains(section) => {}
            _ => problems.push(format!(
                "{name}: runbook {runbook:?} is not a section of {RUNBOOKS} (add a heading `### {name}`)"
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn thresholds_are_values() {
    let expr = |args: &[&str], alert: &str| -> String {
        alerts(&rule(args))
            .into_iter()
            .find(|a| a["alert"] == alert)
            .map(|a| a["expr"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    let soon = "PipelineRolloutWebhookCertificateExpiresSoon";
    assert!(
        expr(&[], soon).contains("< 14 * 86400"),
        "{}",
        expr(&[], soon)
    );
    let set = [
        "--set",
        "prometheusRule.thresholds.certificateWarningDays=30,prometheusRule.thresholds.latencyP99Seconds=1.5",
    ];
    assert!(
        expr(&set, soon).contains("< 30 * 86400"),
        "{}",
        expr(&set, soon)
    );
    assert!(expr(&set, "PipelineRolloutWebhookSlow").contains("> 1.5"));
    let untrusted = "PipelineRolloutWebhookCertificateUntrusted";
    let failing = "PipelineRolloutWebhookCertificateWorkFailing";
    let defaults = names(&rule(&[]));
    assert!(
        !defaults.contains(untrusted) && !defaults.contains(failing),
        "the certificate work's alerts only with certificates.mode selfManaged (without \
         --manage-certs, certs_trusted is 0 on every replica)"
    );
    assert!(names(&rule(&EVERY_ALERT)).contains(untrusted));
    // The webhook renews its own certificate 9 days before expiry: a
    // 14-day warning would fire before every renewal.
    assert!(
        expr(&EVERY_ALERT, soon).contains("< 5 * 86400"),
        "{}",
        expr(&EVERY_ALERT, soon)
    );
    let certs = [
        "--set",
        "certificates.mode=selfManaged,prometheusRule.thresholds.certificateErrors=7",
    ];
    assert!(
        expr(&certs, failing).contains("[15m])) > 7"),
        "{}",
        expr(&certs, failing)
    );
    let slow = [
        "--set",
        "certificates.mode=selfManaged,prometheusRule.thresholds.certificateUntrustedFor=20m",
    ];
    let for_of = alerts(&rule(&slow))
        .into_iter()
        .find(|a| a["alert"] == untrusted)
        .map(|a| a["for"].clone());
    assert_eq!(for_of, Some(Value::from("20m")));
    let without = names(&rule(&["--set", "sweeper.enabled=false"]));
    assert!(
        !without.contains("PipelineRolloutWebhookSweeperFailing"),
        "no sweeper alert without the sweeper"
    );
}
