//! End-to-end tests of the force lifecycle through a real kube-apiserver:
//! the one-shot reset stored by the next write, the sweeper resetting
//! without any write, the minimum pause age, and the Events each step
//! records (none for a dry run). Same harness and skip rules as
//! tests/apiserver/webhook.rs; this module runs its own cluster, whose webhook also runs
//! the sweeper (as the Deployment in manifests/base does).

use crate::apiserver_support;

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use apiserver_support::{
    ALLOW_DATA_LOSS, ROLLOUTS, annotate, annotation_of, assert_refused, events_in, idle, pausing,
    rollout, set_status, stored, team_namespace,
};
use envtest::{Cluster, Installation, User};
use serde_json::{Value, json};

/// The sweeper's grace here: long enough that a write right after the
/// pause ends is reset by /mutate first, short enough to wait for.
const GRACE: Duration = Duration::from_secs(6);
/// Namespaces whose override asks for a pause of at least an hour.
const YOUNG_MATCH: &str = "e2e-young-*";

static SHARED: OnceLock<Result<Installation, String>> = OnceLock::new();

fn shared() -> Option<&'static Installation> {
    envtest::shared(&SHARED, &envtest::test_name(), |assets| {
        let grace = format!("{}s", GRACE.as_secs());
        Installation::start_with(
            assets,
            Path::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook")),
            &policy()?,
            &["--reset-stale-force", "--stale-force-grace", &grace],
            |cluster| {
                apiserver_support::grant_components(cluster)?;
                apiserver_support::grant_example_force_bindings(cluster)
            },
        )
    })
}

/// The base policy plus an override asking for a minimum pause age, and
/// the one-shot forcePromote.
fn policy() -> Result<String, String> {
    let text = envtest::base_policy()?;
    let mut policy: Value =
        serde_saphyr::from_str(&text).map_err(|e| format!("base policy.yaml: {e}"))?;
    policy["drainTimeout"]["namespaces"] = json!([{"match": [YOUNG_MATCH], "minPauseAge": "1h"}]);
    policy["forcePromote"] = json!({"oneShot": true});
    Ok(policy.to_string())
}

/// Creates `ns/name` with a valid timeout and `status`.
fn rollout_with_status(cluster: &Cluster, ns: &str, name: &str, status: Value) {
    cluster
        .kubectl(User::Admin)
        .create(&rollout(ns, name, Some(json!(300))), &[])
        .expect_success("admin creates a rollout");
    set_status(cluster, ns, name, status);
}

/// The Events recorded on `ns/name`, as (reason, type, note), waiting up to
/// 10 s for `want` reasons to be there (Events are sent off the request
/// path).
fn events_of(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    want: &[&str],
) -> Vec<(String, String, String)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<(String, String, String)> = events_in(cluster, ns)
            .iter()
            .filter(|e| e["regarding"]["name"] == name)
            .map(|e| {
                assert_eq!(e["reportingController"], "pipelinerollout-webhook", "{e}");
                assert_eq!(e["regarding"]["kind"], "PipelineRollout", "{e}");
                assert!(
                    e["regarding"]["uid"]
                        .as_str()
                        .is_some_and(|u| !u.is_empty()),
                    "{e}"
                );
                let text = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
                (text("reason"), text("type"), text("note"))
            })
            .collect();
        let has_all = want.iter().all(|w| found.iter().any(|(r, _, _)| r == w));
        if has_all || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[track_caller]
fn assert_event(events: &[(String, String, String)], reason: &str, kind: &str, says: &str) {
    assert!(
        events
            .iter()
            .any(|(r, t, n)| r == reason && t == kind && n.contains(says)),
        "no {kind} Event {reason} saying {says:?} in {events:#?}"
    );
}

#[test]
fn the_next_write_after_the_pause_stores_the_reset() {
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-one-shot";
    team_namespace(cluster, ns).expect("namespace");
    rollout_with_status(cluster, ns, "p", pausing(true));
    let server = cluster.kubectl(User::ArgocdServer);
    annotate(&server, ns, "p", Some("true")).expect_success("Argo CD's allow-data-loss action");
    assert_eq!(annotation_of(&stored(&server, ns, "p")), Some("true"));

    // Numaplane applies the forced change and the pause ends...
    set_status(cluster, ns, "p", idle());
    // ...and the next Argo CD sync (an update keeping the annotation) is
    // stored with the annotation reset, the user told why.
    let controller = cluster.kubectl(User::ArgocdApplicationController);
    let out = controller
        .merge_patch(
            ROLLOUTS,
            ns,
            "p",
            &json!({"metadata": {"labels": {"synced": "2"}}}),
            &[],
        )
        .expect_success("the next sync");
    let warnings = out.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("forced re-apply is over")),
        "kubectl shows the reset: {warnings:?}\n{out}"
    );
    let got = stored(&controller, ns, "p");
    assert_eq!(annotation_of(&got), Some("false"), "{got}");
    assert_eq!(got["metadata"]["labels"]["synced"], "2");

    let events = events_of(
        cluster,
        ns,
        "p",
        &["ForceReapplyAllowed", "ForceReapplyReset"],
    );
    assert_event(
        &events,
        "ForceReapplyAllowed",
        "Warning",
        "allowed by the admission webhook",
    );
    assert_event(&events, "ForceReapplyAllowed", "Warning", "argocd-server");
    assert_event(
        &events,
        "ForceReapplyReset",
        "Normal",
        "by the mutating webhook",
    );
}

#[test]
fn the_sweeper_resets_a_force_whose_pause_ended_without_a_write() {
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-sweeper";
    team_namespace(cluster, ns).expect("namespace");
    rollout_with_status(cluster, ns, "p", pausing(false));
    let admin = cluster.kubectl(User::Admin);
    annotate(&admin, ns, "p", Some("true")).expect_success("a break-glass force by an admin");
    // The pause ends through the status alone: no write of the rollout.
    let ended = Instant::now();
    set_status(cluster, ns, "p", idle());

    // Not before the grace period...
    std::thread::sleep(GRACE / 2);
    assert_eq!(
        annotation_of(&stored(&admin, ns, "p")),
        Some("true"),
        "reset too early"
    );
    // ...but soon after it.
    let deadline = ended + GRACE + Duration::from_secs(15);
    loop {
        if annotation_of(&stored(&admin, ns, "p")) == Some("false") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sweeper did not reset the force; webhook log:\n{}",
            env.webhook.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let events = events_of(cluster, ns, "p", &["ForceReapplyReset"]);
    assert_event(
        &events,
        "ForceReapplyReset",
        "Normal",
        "by the stale-force sweeper",
    );

    // A force still in its pause is left alone.
    rollout_with_status(cluster, ns, "still-pausing", pausing(true));
    annotate(&admin, ns, "still-pausing", Some("true")).expect_success("force while pausing");
    std::thread::sleep(GRACE + Duration::from_secs(2));
    assert_eq!(
        annotation_of(&stored(&admin, ns, "still-pausing")),
        Some("true"),
        "a force is never reset while its pause is in progress"
    );
}

/// A pausing status whose pause began `ago` before now.
fn pausing_since(ago: Duration) -> Value {
    let start = time::OffsetDateTime::now_utc() - ago;
    let start = start
        .replace_nanosecond(0)
        .unwrap_or(start)
        .format(&time::format_description::well_known::Rfc3339)
        .expect("format a time");
    json!({"phase": "Pending", "upgradeInProgress": "PipelinePauseAndDrain",
           "pauseStatus": {"lastPauseBeginTime": start}})
}

#[test]
fn a_force_waits_for_the_minimum_pause_age_and_dry_runs_record_nothing() {
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-young-pause";
    team_namespace(cluster, ns).expect("namespace");
    rollout_with_status(cluster, ns, "p", pausing_since(Duration::from_secs(300)));
    let server = cluster.kubectl(User::ArgocdServer);

    // Five minutes into the pause, with a minimum of 1h here: refused,
    // saying from when a force will be allowed.
    let out = annotate(&server, ns, "p", Some("true"));
    assert_refused(&out, "the pause has lasted 5m");
    assert_refused(&out, "minimum of 1h");
    assert_refused(&out, "force only from 20");
    let events = events_of(cluster, ns, "p", &["ForceReapplyDenied"]);
    assert_event(&events, "ForceReapplyDenied", "Warning", "has lasted 5m");

    // A dry run of the same force is judged, and records no Event.
    let before = events_of(cluster, ns, "p", &[]).len();
    let out = server.run(&[
        "annotate",
        ROLLOUTS,
        "p",
        "-n",
        ns,
        &format!("{ALLOW_DATA_LOSS}=true"),
        "--overwrite",
        "--dry-run=server",
    ]);
    assert_refused(&out, "the pause has lasted 5m");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        events_of(cluster, ns, "p", &[]).len(),
        before,
        "no Event for a dry run"
    );

    // Once the recorded start is old enough, the force is allowed.
    set_status(cluster, ns, "p", pausing_since(Duration::from_secs(7200)));
    annotate(&server, ns, "p", Some("true")).expect_success("a force after 2h of pausing");
    let events = events_of(cluster, ns, "p", &["ForceReapplyAllowed"]);
    assert_event(
        &events,
        "ForceReapplyAllowed",
        "Warning",
        "pause had lasted 2h",
    );
}

/// Waits up to 10 s until `ns/name` has at least `count` Events `reason`;
/// returns their notes.
fn notes_of(cluster: &Cluster, ns: &str, name: &str, reason: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let notes: Vec<String> = events_of(cluster, ns, name, &[])
            .into_iter()
            .filter(|(r, _, _)| r == reason)
            .map(|(_, _, note)| note)
            .collect();
        if notes.len() >= count || Instant::now() > deadline {
            return notes;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn every_refused_force_is_an_event_naming_its_own_user() {
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-three-refusals";
    team_namespace(cluster, ns).expect("namespace");
    rollout_with_status(cluster, ns, "p", pausing(true));
    // Numaplane's controller would be a third, were it not kept off the
    // webhooks (docs/security.md).
    let users = [User::Alice, User::ArgocdApplicationController];
    for user in users {
        let out = annotate(&cluster.kubectl(user), ns, "p", Some("true"));
        assert_refused(&out, "RBAC does not allow verb \"force-reapply\"");
    }
    let notes = notes_of(cluster, ns, "p", "ForceReapplyDenied", users.len());
    assert_eq!(
        notes.len(),
        users.len(),
        "one Event per refusal: {notes:#?}"
    );
    for user in users {
        let named = format!("\"{}\"", user.name());
        assert_eq!(
            notes.iter().filter(|n| n.contains(&named)).count(),
            1,
            "exactly one Event names {named}: {notes:#?}"
        );
    }
}

/// A forged AdmissionReview (fixture 07, as admin, who may force) sent to
/// the webhook port itself, not through the API server.
fn forged(namespace: &str, name: &str, uid: &str, user: &str) -> Value {
    let path = envtest::repo_root().join(
        "tests/fixtures/admission/07-allow-data-loss-true-kubectl-annotate-alice-validate.json",
    );
    let text = std::fs::read_to_string(&path).expect("fixture 07");
    let mut review: Value = serde_json::from_str(&text).expect("fixture 07 is JSON");
    let request = &mut review["request"];
    request["namespace"] = json!(namespace);
    request["name"] = json!(name);
    request["userInfo"] =
        json!({"username": user, "groups": ["system:masters", "system:authenticated"]});
    for object in ["object", "oldObject"] {
        request[object]["metadata"]["namespace"] = json!(namespace);
        request[object]["metadata"]["name"] = json!(name);
        request[object]["metadata"]["uid"] = json!(uid);
    }
    review
}

#[test]
fn a_forged_request_writes_an_event_only_about_a_real_object_in_a_guarded_namespace() {
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-forged";
    team_namespace(cluster, ns).expect("namespace");
    rollout_with_status(cluster, ns, "real", pausing(true));
    let admin = cluster.kubectl(User::Admin);
    let stored = stored(&admin, ns, "real");
    let uid = stored["metadata"]["uid"].as_str().expect("uid").to_owned();
    let made_up = "00000000-0000-0000-0000-000000000000";
    let requests = [
        (
            "an object that does not exist",
            forged(ns, "ghost", made_up, "mallory"),
        ),
        (
            "a real name with another uid",
            forged(ns, "real", made_up, "mallory"),
        ),
        (
            "a namespace the webhooks skip",
            forged("kube-system", "real", &uid, "mallory"),
        ),
        (
            "the real object, by a user name with a newline",
            forged(ns, "real", &uid, "mallory\nFORGED"),
        ),
    ];
    for (what, review) in requests {
        let (status, body) = env
            .webhook
            .post_json(cluster, "/validate?timeout=5s", &review.to_string())
            .expect("the webhook answers");
        assert_eq!(status, 200, "{what}: {body}");
        let answer: Value = serde_json::from_str(&body).expect("an AdmissionReview");
        assert_eq!(answer["response"]["allowed"], true, "{what}: {body}");
    }
    // The one real object gets its Event, its user name escaped...
    let notes = notes_of(cluster, ns, "real", "ForceReapplyAllowed", 1);
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert!(notes[0].contains("mallory\\nFORGED"), "{notes:#?}");
    assert!(!notes[0].contains('\n'), "{notes:#?}");
    // ...and nothing else is written, here or in kube-system.
    assert!(events_of(cluster, ns, "ghost", &[]).is_empty());
    let in_kube_system = events_in(cluster, "kube-system");
    let ours: Vec<&Value> = in_kube_system
        .iter()
        .filter(|e| e["reportingController"] == "pipelinerollout-webhook")
        .collect();
    assert!(ours.is_empty(), "{ours:#?}");
}

/// Numaplane's status during (or after) the progressive upgrade of `child`.
fn progressive(in_progress: bool, child: &str) -> Value {
    json!({
        "upgradeInProgress": if in_progress { "Progressive" } else { "" },
        "progressiveStatus": {"upgradingPipelineStatus": {"name": child}},
    })
}

#[test]
fn a_force_promote_is_reset_by_the_first_write_after_its_upgrade() {
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-force-promote";
    team_namespace(cluster, ns).expect("namespace");
    rollout_with_status(cluster, ns, "p", progressive(true, "p-1"));
    let record = "pipelinerollout-webhook.numaplane.numaproj.io/force-promote-for";
    let promote =
        |object: &Value| object["spec"]["strategy"]["progressive"]["forcePromote"].clone();

    // Argo CD's force-promote while the upgrade of p-1 is stuck in assessment.
    let server = cluster.kubectl(User::ArgocdServer);
    server
        .merge_patch(
            ROLLOUTS,
            ns,
            "p",
            &json!({"spec": {"strategy": {"progressive": {"forcePromote": true}}}}),
            &[],
        )
        .expect_success("Argo CD turns forcePromote on");
    let object = stored(&server, ns, "p");
    assert_eq!(promote(&object), json!(true));
    assert_eq!(
        object["metadata"]["annotations"][record], "upgrade:p-1",
        "{object}"
    );

    // A sync while the upgrade is still on: kept, with rule 12's warning.
    let sync = cluster.kubectl(User::ArgocdApplicationController);
    let label = |value: &str| json!({"metadata": {"labels": {"synced": value}}});
    let out = sync
        .merge_patch(ROLLOUTS, ns, "p", &label("1"), &[])
        .expect_success("a sync during the upgrade");
    assert!(
        out.warnings()
            .iter()
            .any(|w| w.contains("forcePromote is still true")),
        "{out}"
    );
    assert_eq!(promote(&stored(&server, ns, "p")), json!(true));

    // The record is the webhook's own (rule 25): alice cannot forge it to
    // a value no reset reads, and a write that drops it gets it back.
    let alice = cluster.kubectl(User::Alice);
    let out = alice.merge_patch(
        ROLLOUTS,
        ns,
        "p",
        &json!({"metadata": {"annotations": {record: "never:"}}}),
        &[],
    );
    assert!(
        !out.success
            && out.stderr.contains("\"never:\"")
            && out.stderr.contains("leave the annotation out"),
        "a forged record: {out}"
    );
    sync.merge_patch(
        ROLLOUTS,
        ns,
        "p",
        &json!({"metadata": {"annotations": {record: null}}}),
        &[],
    )
    .expect_success("a sync that drops the record");
    assert_eq!(
        stored(&server, ns, "p")["metadata"]["annotations"][record],
        "upgrade:p-1",
        "the dropped record is put back"
    );

    // The upgrade ends; the next write turns forcePromote off.
    set_status(cluster, ns, "p", progressive(false, "p-1"));
    let out = sync
        .merge_patch(ROLLOUTS, ns, "p", &label("2"), &[])
        .expect_success("the first sync after the upgrade");
    assert!(
        out.warnings()
            .iter()
            .any(|w| w.contains("forcePromote was reset to false")),
        "{out}"
    );
    let object = stored(&server, ns, "p");
    assert_eq!(promote(&object), json!(false), "{object}");
    assert!(
        object["metadata"]["annotations"][record].is_null(),
        "{object}"
    );
    assert_eq!(object["metadata"]["labels"]["synced"], "2");
    let notes = notes_of(cluster, ns, "p", "ForcePromoteReset", 1);
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert!(
        notes[0].contains("argocd-application-controller"),
        "{notes:#?}"
    );
}
