//! One mutation, two engines: the MutatingAdmissionPolicy that
//! `export-vap --mutating` writes must store what the webhook's `/mutate`
//! stores. Every case goes through a real kube-apiserver twice, with the
//! same policy (tests/fixtures/policies/defaults.yaml): first with only the
//! project's mutating webhook registered, then with only the exported
//! policy. Both results (the stored object, or a server-side dry run's
//! answer) are compared field by field (`spec`, the annotations and the
//! labels), and each must hold what the case expects, so that two engines
//! that both did nothing cannot agree. CREATE and UPDATE; a timeout
//! absent, null, present, or removed by the update; each level of the
//! lifecycle missing, or not an object; the namespaces' own defaults and
//! "no timeout"; and the one-shot reset of allow-data-loss.
//!
//! MutatingAdmissionPolicy is `admissionregistration.k8s.io/v1` from
//! Kubernetes 1.36: on an older API server this test fails (CI runs it on
//! 1.37 only). Without the binaries it prints a skip line, and fails in CI.

use std::path::Path;
use std::time::{Duration, Instant};

use envtest::{Assets, Cluster, Installation, User, require};
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::vap::mutating::export_mutating;
use serde_json::{Value, json};

use crate::apiserver_support::{ROLLOUTS, rollout};

const POLICY: &str = include_str!("../fixtures/policies/defaults.yaml");
const ALLOW: &str = "numaplane.numaproj.io/allow-data-loss";
/// `noTimeoutSeconds`: the default "none".
const NONE: i64 = 31_536_000;
/// The namespaces, with the pause and deletion defaults the policy gives them.
const NAMESPACES: [(&str, i64, i64); 4] = [
    ("map-plain", NONE, 60),
    ("payments-eu", 300, NONE),
    ("ledger", 300, 60),
    ("payroll", 600, 60),
];

/// How a case writes.
#[derive(Clone, Copy, PartialEq)]
enum Write {
    Create,
    DryRunCreate,
    /// An UPDATE (`kubectl replace`) of the stored object.
    Update,
    DryRunUpdate,
}

struct Case {
    label: &'static str,
    ns: &'static str,
    /// For an UPDATE: the object first stored, and the status then written.
    stored: Option<(Value, Option<Value>)>,
    write: Write,
    /// What is written.
    object: Value,
    /// The lifecycle the result must hold (`Value::Null`: none at all).
    lifecycle: Value,
    /// The allow-data-loss annotation the result must hold.
    allow: Option<&'static str>,
}

fn named(name: &str, ns: &str, lifecycle: Option<Value>) -> Value {
    let mut object = rollout(ns, name, None);
    if let Some(lifecycle) = lifecycle {
        object["spec"]["pipeline"]["spec"]["lifecycle"] = lifecycle;
    }
    object
}

fn both(pause: i64, deletion: i64) -> Value {
    json!({"pauseGracePeriodSeconds": pause, "deletionGracePeriodSeconds": deletion})
}

fn with_allow(mut object: Value, value: &str) -> Value {
    object["metadata"]["annotations"] = json!({ALLOW: value});
    object
}

fn status(pausing: bool) -> Value {
    let (state, reason) = if pausing {
        ("True", "PipelinePausing")
    } else {
        ("False", "Unpaused")
    };
    json!({"phase": "Deployed", "upgradeInProgress": "", "conditions": [{
        "type": "PipelinePausingOrPaused", "status": state, "reason": reason,
        "message": reason, "lastTransitionTime": "2026-06-01T10:00:00Z"}]})
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let case = |label, ns, write, object, lifecycle| Case {
        label,
        ns,
        stored: None,
        write,
        object,
        lifecycle,
        allow: None,
    };
    for (ns, pause, deletion) in NAMESPACES {
        cases.push(case(
            "no lifecycle",
            ns,
            Write::Create,
            named("absent", ns, None),
            both(pause, deletion),
        ));
    }
    let (ns, pause, deletion) = NAMESPACES[1];
    cases.extend([
        case(
            "dry run, no lifecycle",
            ns,
            Write::DryRunCreate,
            named("dry", ns, None),
            both(pause, deletion),
        ),
        case(
            "pause set",
            ns,
            Write::Create,
            named(
                "pause-set",
                ns,
                Some(json!({"pauseGracePeriodSeconds": 120})),
            ),
            both(120, deletion),
        ),
        case(
            "both set",
            ns,
            Write::Create,
            named("both-set", ns, Some(both(45, 90))),
            both(45, 90),
        ),
        case(
            "the deprecated deletion timeout set",
            ns,
            Write::Create,
            named(
                "deprecated",
                ns,
                Some(json!({"deleteGracePeriodSeconds": 45})),
            ),
            json!({"deleteGracePeriodSeconds": 45, "pauseGracePeriodSeconds": pause}),
        ),
        case(
            "pause null",
            ns,
            Write::Create,
            named(
                "pause-null",
                ns,
                Some(json!({"pauseGracePeriodSeconds": null, "deletionGracePeriodSeconds": 90})),
            ),
            both(pause, 90),
        ),
        case(
            "lifecycle null",
            ns,
            Write::Create,
            named("lifecycle-null", ns, Some(Value::Null)),
            both(pause, deletion),
        ),
        case(
            "lifecycle empty",
            ns,
            Write::Create,
            named("lifecycle-empty", ns, Some(json!({}))),
            both(pause, deletion),
        ),
        case(
            "lifecycle not an object",
            ns,
            Write::Create,
            named("lifecycle-string", ns, Some(json!("30s"))),
            json!("30s"),
        ),
    ]);
    let mut no_pipeline_spec = named("no-pipeline-spec", ns, None);
    if let Some(pipeline) = no_pipeline_spec["spec"]["pipeline"].as_object_mut() {
        pipeline.remove("spec");
    }
    cases.push(case(
        "spec.pipeline.spec missing",
        ns,
        Write::Create,
        no_pipeline_spec,
        both(pause, deletion),
    ));
    let (ns, pause, deletion) = NAMESPACES[0];
    let update = |label, write, stored: Value, object: Value, lifecycle| Case {
        label,
        ns,
        stored: Some((stored, None)),
        write,
        object,
        lifecycle,
        allow: None,
    };
    cases.extend([
        update(
            "an update removes both",
            Write::Update,
            named("removed", ns, Some(both(45, 90))),
            named("removed", ns, None),
            both(pause, deletion),
        ),
        update(
            "a dry-run update removes the pause timeout",
            Write::DryRunUpdate,
            named("dry-removed", ns, Some(both(45, 90))),
            named(
                "dry-removed",
                ns,
                Some(json!({"deletionGracePeriodSeconds": 90})),
            ),
            both(pause, 90),
        ),
        update(
            "an update keeps both",
            Write::Update,
            named("kept", ns, Some(both(45, 90))),
            named("kept", ns, Some(both(50, 95))),
            both(50, 95),
        ),
    ]);
    // The one-shot reset: only on an UPDATE that keeps "true" once the
    // stored pause is over.
    for (label, pausing, write, allow) in [
        ("one-shot: the pause is over", false, Write::Update, "false"),
        ("one-shot: still pausing", true, Write::Update, "true"),
        (
            "one-shot: a dry run, the pause over",
            false,
            Write::DryRunUpdate,
            "false",
        ),
    ] {
        let name = match (pausing, write) {
            (true, _) => "force-pausing",
            (false, Write::Update) => "force-over",
            _ => "force-dry",
        };
        let object = with_allow(named(name, ns, Some(both(45, 90))), "true");
        cases.push(Case {
            label,
            ns,
            stored: Some((object.clone(), Some(status(pausing)))),
            write,
            object,
            lifecycle: both(45, 90),
            allow: Some(allow),
        });
    }
    cases.push(Case {
        label: "one-shot: a CREATE keeps \"true\"",
        ns,
        stored: None,
        write: Write::Create,
        object: with_allow(named("force-created", ns, Some(both(45, 90))), "true"),
        lifecycle: both(45, 90),
        allow: Some("true"),
    });
    cases
}

/// What is compared of a result.
fn compared(object: &Value) -> Value {
    json!({
        "spec": object["spec"],
        "annotations": object["metadata"]["annotations"],
        "labels": object["metadata"]["labels"],
    })
}

/// Each field where `webhook` and `policy` differ, by its path.
fn differ(path: &str, webhook: &Value, policy: &Value, out: &mut Vec<String>) {
    match (webhook, policy) {
        (Value::Object(w), Value::Object(p)) => {
            for key in w.keys().chain(p.keys().filter(|k| !w.contains_key(*k))) {
                let (a, b) = (&w.get(key), &p.get(key));
                let (a, b) = (a.unwrap_or(&Value::Null), b.unwrap_or(&Value::Null));
                if a != b || w.contains_key(key) != p.contains_key(key) {
                    differ(&format!("{path}/{key}"), a, b, out);
                }
            }
        }
        _ if webhook != policy => out.push(format!(
            "{path}: the webhook stored {}, the policy {}",
            shown(webhook),
            shown(policy)
        )),
        _ => out.push(format!("{path}: present with one engine only")),
    }
}

fn shown(value: &Value) -> String {
    if value.is_null() {
        "nothing".to_owned()
    } else {
        value.to_string()
    }
}

/// Writes one case as admin: the result object, or why there is none.
fn run_case(cluster: &Cluster, case: &Case) -> Result<Value, String> {
    let admin = cluster.kubectl(User::Admin);
    let name = case.object["metadata"]["name"].as_str().unwrap_or_default();
    if let Some((stored, status)) = &case.stored {
        let out = admin.create(stored, &[]);
        if !out.success {
            return Err(format!("storing {name}: {out}"));
        }
        if let Some(status) = status {
            let patch = json!({"status": status}).to_string();
            let out = admin.run(&[
                "patch",
                ROLLOUTS,
                name,
                "-n",
                case.ns,
                "--type=merge",
                "-p",
                &patch,
                "--subresource=status",
            ]);
            if !out.success {
                return Err(format!("the status of {name}: {out}"));
            }
        }
    }
    let dry: &[&str] = &["--dry-run=server", "-o", "json"];
    let text = case.object.to_string();
    let out = match case.write {
        Write::Create => admin.create(&case.object, &[]),
        Write::DryRunCreate => admin.create(&case.object, dry),
        Write::Update => admin.run_with_stdin(&["replace", "-f", "-"], Some(&text)),
        Write::DryRunUpdate => {
            let mut args = vec!["replace", "-f", "-"];
            args.extend_from_slice(dry);
            admin.run_with_stdin(&args, Some(&text))
        }
    };
    if !out.success {
        return Err(format!("{out}"));
    }
    match case.write {
        Write::DryRunCreate | Write::DryRunUpdate => Ok(out.json()),
        _ => admin
            .get(ROLLOUTS, case.ns, name)
            .ok_or_else(|| format!("{name} is not stored")),
    }
}

/// Every case under the engine now registered, then their objects removed.
fn run_all(cluster: &Cluster, cases: &[Case]) -> Vec<Result<Value, String>> {
    let results = cases.iter().map(|c| run_case(cluster, c)).collect();
    let admin = cluster.kubectl(User::Admin);
    for (ns, _, _) in NAMESPACES {
        admin
            .run(&["delete", ROLLOUTS, "--all", "-n", ns, "--wait=true"])
            .expect_success("the cases' rollouts are removed");
    }
    results
}

/// Waits until a dry-run create in the first namespace comes back with
/// (or, `active` false, without) a default drain timeout.
fn wait_for_defaults(cluster: &Cluster, active: bool) -> Result<(), String> {
    let admin = cluster.kubectl(User::Admin);
    let probe = named("probe", NAMESPACES[0].0, None);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = admin.create(&probe, &["--dry-run=server", "-o", "json"]);
        let defaulted = out.success
            && out.json()["spec"]["pipeline"]["spec"]["lifecycle"]["pauseGracePeriodSeconds"]
                == NONE;
        if out.success && defaulted == active {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the defaults are {}applied after 30s: {out}",
                if active { "not " } else { "still " }
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What the case expects of a result, or what is wrong.
fn expected(case: &Case, result: &Value) -> Option<String> {
    let lifecycle = &result["spec"]["pipeline"]["spec"]["lifecycle"];
    let allow = result["metadata"]["annotations"][ALLOW].as_str();
    if *lifecycle != case.lifecycle || allow != case.allow {
        Some(format!(
            "lifecycle {lifecycle} and allow-data-loss {allow:?}, expected {} and {:?}",
            case.lifecycle, case.allow
        ))
    } else {
        None
    }
}

#[test]
fn the_exported_mutating_policy_stores_what_the_webhook_stores() {
    let test = envtest::test_name();
    let Some(assets) = require(&test, Assets::find()) else {
        return;
    };
    let started = Instant::now();
    let policy = Policy::from_yaml(POLICY).expect("the defaults policy is valid");
    let webhook = Path::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"));
    let env = Installation::start(&assets, webhook, POLICY, |cluster| {
        cluster.create_all(
            NAMESPACES
                .iter()
                .map(|(ns, _, _)| {
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
                })
                .collect(),
        )
    })
    .expect("the webhook installs");
    let cluster = &env.cluster;
    let admin = cluster.kubectl(User::Admin);
    // Only /mutate: the validating webhooks would refuse some cases.
    admin
        .run(&["delete", "validatingwebhookconfigurations", "--all"])
        .expect_success("the validating webhooks are removed");
    let cases = cases();
    let by_webhook = run_all(cluster, &cases);

    admin
        .run(&["delete", "mutatingwebhookconfigurations", "--all"])
        .expect_success("the mutating webhook is removed");
    wait_for_defaults(cluster, false).unwrap_or_else(|e| panic!("{e}"));
    let export = export_mutating(&policy, "map-e2e");
    let file = cluster.dir().join("map-e2e.yaml");
    std::fs::write(&file, export.to_yaml().expect("the export renders")).expect("write the export");
    admin
        .run(&["create", "-f", &file.display().to_string()])
        .expect_success("the exported MutatingAdmissionPolicy installs");
    wait_for_defaults(cluster, true).unwrap_or_else(|e| panic!("{e}"));
    let by_policy = run_all(cluster, &cases);

    let mut wrong = Vec::new();
    for ((case, webhook), policy) in cases.iter().zip(&by_webhook).zip(&by_policy) {
        let label = format!("{} ({})", case.label, case.ns);
        match (webhook, policy) {
            (Ok(w), Ok(p)) => {
                let mut differences = Vec::new();
                differ("", &compared(w), &compared(p), &mut differences);
                wrong.extend(differences.into_iter().map(|d| format!("{label}: {d}")));
                if let Some(why) = expected(case, w) {
                    wrong.push(format!("{label}: the webhook: {why}"));
                }
            }
            (w, p) => wrong.push(format!("{label}: the webhook: {w:?}\n  the policy: {p:?}")),
        }
    }
    eprintln!(
        "mutating_policy: {} cases, each through /mutate and through the MutatingAdmissionPolicy, in {:.1}s",
        cases.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        wrong.is_empty(),
        "{} case(s) where the engines differ or miss what is expected:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
