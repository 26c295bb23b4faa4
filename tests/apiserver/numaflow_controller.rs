//! End-to-end with Numaflow's own controller (v1.8.1, built from its Go
//! module by `.ci/run`, found through `TEST_ASSET_NUMAFLOW`) running
//! against the test API server as its service account
//! `numaflow-system:numaflow-sa`, beside the webhook installed from
//! `manifests/base` with the base policy (the sweeper on, as the
//! Deployment runs it).
//!
//! Numaflow does its part for real: it adds its finalizer, makes the
//! Vertices, the daemon Service and Deployment and the buffer Jobs, writes
//! `pause-timestamp`, moves a pausing Pipeline to `Paused` once
//! `pauseGracePeriodSeconds` has passed, resumes it, and holds a deleted
//! one for its deletion timeout. No pod runs, so its daemon is never
//! reached: every pause and every deletion drain lasts exactly as long as
//! its timeout allows, the "cannot drain" case. The test plays the
//! StatefulSet controller and kubelet for the InterStepBufferService (it
//! writes the JetStream StatefulSet's status), and plays Numaplane, whose
//! module the Go module proxy refuses (docs/end-to-end-tests.md): its
//! account creates, pauses, updates, resumes and deletes the children as
//! Numaplane's reconciler does.
//!
//! The scenarios run at once on one cluster, each in a namespace of its
//! own; most of their time is waiting for Numaflow's clock. Afterwards,
//! across the whole run, none of Numaflow's writes was refused or sent to
//! the webhook.

use crate::apiserver_children_support;
use crate::apiserver_numaflow_support::{
    ApiServerCounts, ISBSVC, ISBSVCS, PIPELINES, get, numaplane_applies_and_resumes,
    numaplane_creates_child, numaplane_creates_isbsvc, numaplane_pauses_until_paused, poll,
    running_child, say, tail, the_daemon_numaflow_made_is_refused_to_an_editor, udf_image,
    wait_for_phase,
};
use crate::apiserver_support;

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use apiserver_children_support::{FORCE_PROMOTE, UPGRADE_STATE, assert_refused_by, team};
use apiserver_support::{ROLLOUTS, annotate, annotation_of, assert_refused, rollout, stored};
use envtest::{Cluster, Installation, User};
use serde_json::json;

const NUMAFLOW_USER: &str = "system:serviceaccount:numaflow-system:numaflow-sa";
/// The base policy's minimum drain timeout: case 2's pause.
const SHORT: u64 = 30;
/// How often Numaflow looks at a pausing Pipeline again
/// (`dfv1.DefaultRequeueAfter`), and slack for a loaded machine.
const REQUEUE: u64 = 10;
const SLACK: u64 = 10;

static SHARED: OnceLock<Result<Installation, String>> = OnceLock::new();

/// The installation with Numaflow's controller running, or `None` (a
/// printed skip) when a binary is missing outside CI.
fn shared() -> Option<&'static Installation> {
    let test = envtest::test_name();
    let numaflow = envtest::require(&test, envtest::numaflow_binary())?;
    envtest::shared(&SHARED, &test, move |assets| {
        Installation::start_with(
            assets,
            Path::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook")),
            &envtest::base_policy()?,
            &["--reset-stale-force"],
            |cluster| {
                for crd in [
                    "tests/fixtures/numaplane/numaplane.numaproj.io_monovertexrollouts.yaml",
                    "tests/fixtures/numaplane/numaplane.numaproj.io_isbservicerollouts.yaml",
                ] {
                    cluster.install_crd(&envtest::repo_root().join(crd))?;
                }
                cluster.start_numaflow(&numaflow)?;
                apiserver_support::grant_components(cluster)?;
                grant_numaplane_children(cluster)?;
                apiserver_support::grant_example_force_bindings(cluster)
            },
        )
    })
}

/// Numaplane's and Argo CD's accounts may write the children.
fn grant_numaplane_children(cluster: &Cluster) -> Result<(), String> {
    let all = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    cluster.create_all(vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "e2e-numaflow-children"},
            "rules": [{"apiGroups": ["numaflow.numaproj.io"],
                "resources": ["pipelines", "monovertices", "interstepbufferservices"],
                "verbs": all}]}),
        envtest::binding(
            None,
            "e2e-numaflow-children",
            "ClusterRole",
            "e2e-numaflow-children",
            &[User::ArgocdServer, User::NumaplaneController],
        ),
    ])
}

/// A scenario: it runs in the namespace it is given and returns how long
/// it took.
type Scenario = fn(&Installation, &str) -> Duration;

#[test]
fn numaflow_runs_every_scenario_through_the_webhook() {
    let Some(env) = shared() else { return };
    let scenarios: [(&str, Scenario); 5] = [
        ("nf-default", defaulted_timeout_reaches_numaflow),
        ("nf-pause", undrainable_pause_ends_at_the_timeout),
        ("nf-no-timeout", no_timeout_pause_ends_only_by_a_gated_force),
        ("nf-delete", deletion_is_held_for_the_deletion_timeout),
        ("nf-progressive", progressive_force_promote_is_gated),
    ];
    let started = Instant::now();
    let results: Vec<(&str, std::thread::Result<Duration>)> = std::thread::scope(|scope| {
        let running: Vec<_> = scenarios
            .iter()
            .map(|&(ns, scenario)| (ns, scope.spawn(move || scenario(env, ns))))
            .collect();
        running
            .into_iter()
            .map(|(ns, handle)| (ns, handle.join()))
            .collect()
    });
    let failed: Vec<&str> = results
        .iter()
        .filter(|(_, result)| result.is_err())
        .map(|(ns, _)| *ns)
        .collect();
    assert!(
        failed.is_empty(),
        "scenarios failed (their panics are above): {failed:?}\nNumaflow's log ends:\n{}",
        tail(&env.cluster.numaflow_log(envtest::NUMAFLOW_ACCOUNT.1), 30)
    );
    let mut report = String::new();
    for (ns, result) in &results {
        if let Ok(took) = result {
            report.push_str(&format!("{ns}: {:.1} s\n", took.as_secs_f64()));
        }
    }
    let line = format!(
        "Numaflow scenarios, at once, in {:.1} s:\n{report}",
        started.elapsed().as_secs_f64()
    );
    say(&line);
    nothing_numaflow_wrote_was_refused_or_sent_to_the_webhook(env);
    numaflow_under_an_account_the_policy_does_not_name(env, "nf-account");
}

/// Scenario 1: A rollout with no timeout gets the policy's default from `/mutate`;
/// Numaplane copies it onto the child, and Numaflow runs that child.
fn defaulted_timeout_reaches_numaflow(env: &Installation, ns: &str) -> Duration {
    let started = Instant::now();
    let cluster = &env.cluster;
    let child = running_child(cluster, ns, None);
    let lifecycle =
        get(cluster, ROLLOUTS, ns, "demo")["spec"]["pipeline"]["spec"]["lifecycle"].clone();
    assert_eq!(
        lifecycle,
        json!({"pauseGracePeriodSeconds": apiserver_support::NO_TIMEOUT_SECONDS,
            "deletionGracePeriodSeconds": 30}),
        "/mutate writes the base policy's defaults"
    );
    let running = get(cluster, PIPELINES, ns, &child);
    assert_eq!(
        running["spec"]["lifecycle"]["pauseGracePeriodSeconds"],
        apiserver_support::NO_TIMEOUT_SECONDS,
        "the child Numaflow runs carries the defaulted timeout"
    );
    assert_eq!(
        running["status"]["observedGeneration"],
        running["metadata"]["generation"]
    );
    let finalizers = running["metadata"]["finalizers"].to_string();
    assert!(
        finalizers.contains("numaflow.numaproj.io"),
        "Numaflow's finalizer is on the child: {finalizers}"
    );
    let vertices = cluster
        .kubectl(User::Admin)
        .run(&[
            "get",
            "vertices.numaflow.numaproj.io",
            "-n",
            ns,
            "-l",
            &format!("numaflow.numaproj.io/pipeline-name={child}"),
            "-o",
            "name",
        ])
        .expect_success("list the child's vertices");
    assert_eq!(
        vertices.stdout.lines().count(),
        3,
        "Numaflow made a Vertex for each of in, cat and out: {}",
        vertices.stdout
    );
    started.elapsed()
}

/// Scenario 2: Under pause-and-drain, a UDF image change: Numaplane pauses the
/// child; Numaflow cannot drain it and marks it Paused once the validated
/// timeout has passed; Numaplane applies the new spec and resumes it. The
/// daemon Service Numaflow made for the child is refused to an editor
/// (rule 29), so nothing but the timeout ends the pause.
fn undrainable_pause_ends_at_the_timeout(env: &Installation, ns: &str) -> Duration {
    let started = Instant::now();
    let cluster = &env.cluster;
    let child = running_child(cluster, ns, Some(json!(SHORT)));
    the_daemon_numaflow_made_is_refused_to_an_editor(cluster, ns, &child);
    let alice = cluster.kubectl(User::Alice);
    // The timeout Numaflow acts on is one the policy allows.
    let out = alice.create(&rollout(ns, "too-short", Some(json!(5))), &[]);
    assert_refused(&out, "below the minimum of 30");

    alice
        .merge_patch(ROLLOUTS, ns, "demo", &udf_image("map-cat:v2"), &[])
        .expect_success("alice changes the UDF image");
    let (paused, length) = numaplane_pauses_until_paused(
        cluster,
        ns,
        "demo",
        &child,
        Duration::from_secs(SHORT + REQUEUE + SLACK),
    );
    let paused = paused.expect("Numaflow marks the child Paused once the timeout has passed");
    assert!(
        length >= Duration::from_secs(SHORT) - Duration::from_secs(1),
        "the pause lasted {length:?}, less than the {SHORT} s timeout"
    );
    assert!(
        length <= Duration::from_secs(SHORT + REQUEUE + SLACK),
        "the pause lasted {length:?}, far past the {SHORT} s timeout"
    );
    assert_ne!(
        paused["status"]["drainedOnPause"],
        json!(true),
        "the child was paused by the timeout, not drained"
    );
    let line = format!(
        "nf-pause: paused after {:.1} s against a timeout of {SHORT} s\n",
        length.as_secs_f64()
    );
    say(&line);
    numaplane_applies_and_resumes(cluster, ns, "demo", &child);
    started.elapsed()
}

/// Scenario 3: With the "no timeout" default, the pause does not end on its own; a
/// plain editor's force is refused, a holder's allowed; Numaplane then
/// applies and resumes, and the one-shot sweeper resets the annotation.
fn no_timeout_pause_ends_only_by_a_gated_force(env: &Installation, ns: &str) -> Duration {
    let started = Instant::now();
    let cluster = &env.cluster;
    let child = running_child(cluster, ns, None);
    let alice = cluster.kubectl(User::Alice);
    alice
        .merge_patch(ROLLOUTS, ns, "demo", &udf_image("map-cat:v2"), &[])
        .expect_success("alice changes the UDF image");
    // Three times case 2's timeout, and its requeue, without an end.
    let wait = Duration::from_secs(3 * SHORT + REQUEUE);
    let (paused, length) = numaplane_pauses_until_paused(cluster, ns, "demo", &child, wait);
    assert!(
        paused.is_none(),
        "with no timeout the undrainable pause ended on its own after {length:?}"
    );
    let pausing_now = get(cluster, PIPELINES, ns, &child);
    assert_eq!(pausing_now["status"]["phase"], "Pausing");

    let out = annotate(&alice, ns, "demo", Some("true"));
    assert_refused(
        &out,
        "may not set metadata.annotations[\"numaplane.numaproj.io/allow-data-loss\"]",
    );
    let carol = cluster.kubectl(User::Carol);
    annotate(&carol, ns, "demo", Some("true"))
        .expect_success("carol (group sre, bound to the force-reapply role) forces a re-apply");
    let forced_at = Instant::now();
    // Numaplane sees "true": it stops waiting and applies the spec at once.
    numaplane_applies_and_resumes(cluster, ns, "demo", &child);
    let applied = forced_at.elapsed();
    assert!(
        applied < Duration::from_secs(20),
        "applied {applied:?} after the force, past Numaplane's 20 s requeue"
    );
    // The pause is over; the sweeper resets the force (oneShot).
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let object = stored(&carol, ns, "demo");
        if annotation_of(&object) == Some("false") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "allow-data-loss was not reset after the pause ended: {:?}",
            annotation_of(&object)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    started.elapsed()
}

/// Scenario 4: Deleting the rollout (Argo CD prunes it): Numaplane deletes the child; Numaflow holds it
/// for the deletion timeout `/mutate` wrote, then lets it go.
fn deletion_is_held_for_the_deletion_timeout(env: &Installation, ns: &str) -> Duration {
    let started = Instant::now();
    let cluster = &env.cluster;
    let child = running_child(cluster, ns, Some(json!(SHORT)));
    let deletion = get(cluster, ROLLOUTS, ns, "demo")["spec"]["pipeline"]["spec"]["lifecycle"]
        ["deletionGracePeriodSeconds"]
        .as_u64()
        .expect("/mutate wrote the deletion timeout");

    cluster
        .kubectl(User::ArgocdApplicationController)
        .run(&["delete", ROLLOUTS, "demo", "-n", ns, "--wait=false"])
        .expect_success("Argo CD prunes the rollout");
    // Numaplane's finalizer deletes every child.
    cluster
        .kubectl(User::NumaplaneController)
        .run(&["delete", PIPELINES, &child, "-n", ns, "--wait=false"])
        .expect_success("Numaplane deletes the child");
    let deleted = Instant::now();
    let limit = Duration::from_secs(2 * deletion + 2 * SLACK);
    let gone = loop {
        let held = deleted.elapsed();
        match cluster.kubectl(User::Admin).get(PIPELINES, ns, &child) {
            None => break held,
            Some(_) => assert!(
                held < limit,
                "the deleted child is still there after {held:?} (deletion timeout {deletion} s)"
            ),
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        gone >= Duration::from_secs(deletion) - Duration::from_secs(1),
        "Numaflow let the child go after {gone:?}, before its {deletion} s deletion timeout"
    );
    let line = format!(
        "nf-delete: the child went {:.1} s after its delete, deletion timeout {deletion} s\n",
        gone.as_secs_f64()
    );
    say(&line);
    started.elapsed()
}

/// Scenario 5: Progressive: an upgrade makes the `-1` child; a plain editor's
/// force-promote is refused, a holder's allowed; Numaplane promotes it and
/// Numaflow keeps running both children.
fn progressive_force_promote_is_gated(env: &Installation, ns: &str) -> Duration {
    let started = Instant::now();
    let cluster = &env.cluster;
    let first = running_child(cluster, ns, Some(json!(SHORT)));
    let alice = cluster.kubectl(User::Alice);
    alice
        .merge_patch(ROLLOUTS, ns, "demo", &udf_image("map-cat:v2"), &[])
        .expect_success("alice changes the UDF image");
    let upgrading = numaplane_creates_child(cluster, ns, "demo", 1, "in-progress");
    wait_for_phase(cluster, ns, &upgrading, "Running", Duration::from_secs(60));

    let label = json!({"metadata": {"labels": {FORCE_PROMOTE: "true"}}});
    let out = alice.merge_patch(PIPELINES, ns, &upgrading, &label, &[]);
    assert_refused_by(
        &out,
        apiserver_children_support::CHILDREN_WEBHOOK,
        FORCE_PROMOTE,
    );
    cluster
        .kubectl(User::Carol)
        .merge_patch(PIPELINES, ns, &upgrading, &label, &[])
        .expect_success("carol (group sre) force-promotes");
    // Numaplane promotes the upgrading child and retires the first.
    let numaplane = cluster.kubectl(User::NumaplaneController);
    for (name, state) in [(&upgrading, "promoted"), (&first, "recyclable")] {
        numaplane
            .merge_patch(
                PIPELINES,
                ns,
                name,
                &json!({"metadata": {"labels": {UPGRADE_STATE: state}}}),
                &[],
            )
            .expect_success("Numaplane relabels the children");
    }
    for name in [&upgrading, &first] {
        let object = wait_for_phase(cluster, ns, name, "Running", Duration::from_secs(30));
        assert_eq!(
            object["status"]["observedGeneration"],
            object["metadata"]["generation"]
        );
    }
    started.elapsed()
}

/// Scenario 6: Across the run: Numaflow logged no refusal; the webhook decided
/// nothing for Numaflow's or Numaplane's account (the matchConditions keep
/// those writes off it); and the API server counted as many webhook calls
/// as the webhook logged decisions, as many refusals as it denied, and no
/// failed call (a time-out would delay the write).
fn nothing_numaflow_wrote_was_refused_or_sent_to_the_webhook(env: &Installation) {
    let log = env.cluster.numaflow_log(envtest::NUMAFLOW_ACCOUNT.1);
    assert!(
        log.contains("Updated pipeline phase"),
        "Numaflow's log shows no phase change: is it the controller that ran?"
    );
    for refusal in [
        "denied the request",
        "admission webhook",
        "Forbidden",
        "forbidden",
    ] {
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(refusal)).collect();
        assert!(
            lines.is_empty(),
            "Numaflow's log has {refusal:?}:\n{}",
            lines.join("\n")
        );
    }
    // The API server's counts and the webhook's decisions, once they agree
    // (a decision is logged just after its answer is sent).
    let deadline = Instant::now() + Duration::from_secs(10);
    let (decisions, calls) = loop {
        let log = env.webhook.log_tail(usize::MAX);
        let decisions: Vec<String> = log
            .lines()
            .filter(|l| l.contains(" decision ") || l.contains("\"decision\""))
            .map(str::to_owned)
            .collect();
        let calls = ApiServerCounts::read(&env.cluster);
        if calls.calls == decisions.len() as f64 || Instant::now() > deadline {
            break (decisions, calls);
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(
        !decisions.is_empty(),
        "the webhook logged no decision at all"
    );
    for account in [NUMAFLOW_USER, User::NumaplaneController.name()] {
        let sent: Vec<&String> = decisions.iter().filter(|l| l.contains(account)).collect();
        assert!(
            sent.is_empty(),
            "the webhook was sent writes of {account}:\n{sent:?}"
        );
    }
    let denied = decisions
        .iter()
        .filter(|l| l.contains("allowed=false"))
        .count();
    assert_eq!(
        (calls.calls, calls.rejected, calls.failed),
        (decisions.len() as f64, denied as f64, 0.0),
        "the API server's webhook calls, refusals and failed calls against the webhook's \
         decisions and denials"
    );
    let refused: Vec<&String> = decisions
        .iter()
        .filter(|l| l.contains("allowed=false") && !l.contains(envtest::PROBE_NAMESPACE))
        .collect();
    // The API server runs admission again when a patch meets a conflict
    // (Numaflow writes the child's status meanwhile), so one refused patch
    // can show as two decisions: count the distinct refusals.
    let distinct: std::collections::BTreeSet<&str> = refused
        .iter()
        .filter_map(|l| l.split_once(" object=").map(|(_, rest)| rest))
        .filter_map(|rest| {
            rest.split_once(" dry_run=")
                .map(|(object_and_user, _)| object_and_user)
        })
        .collect();
    assert!(
        refused.iter().all(|l| l.contains("user=\"alice\"")) && distinct.len() == 4,
        "alice's short timeout, daemon Service, force and force-promote are the only \
         refusals beside the install's probe: {refused:?}"
    );
}

/// Scenario 7: Numaflow's controller under a service account the policy
/// does not name (`numaflow-system:numaflow-controller`, as an install that
/// renamed it runs), a common install mistake. The webhook said at start
/// which account it trusts; the renamed controller's writes of a rollout's
/// children (its finalizer, their status) and of their Vertices are refused
/// as anyone's would be (rules 26 and 29) and counted in `denials_total`, so the InterStepBufferService
/// never becomes ready, and its log shows the webhook's message
/// (docs/operations.md says what to do).
fn numaflow_under_an_account_the_policy_does_not_name(env: &Installation, ns: &str) {
    let cluster = &env.cluster;
    let started = env.webhook.log_tail(usize::MAX);
    let warning = started
        .lines()
        .find(|l| l.contains("trusted controller accounts"))
        .expect("serve logs the trusted controller accounts at start");
    assert!(
        warning.contains("WARN") && warning.contains(NUMAFLOW_USER),
        "the start-up warning names Numaflow's trusted account: {warning}"
    );
    let binary = envtest::numaflow_binary().expect("the binary the scenarios ran");
    cluster.stop_numaflow();
    let account = "numaflow-controller";
    cluster
        .start_numaflow_as(&binary, account)
        .expect("Numaflow's controller under a renamed account");
    let denials_before =
        apiserver_support::webhook_family_sum(env, "pipelinerollout_webhook_denials_total");
    team(cluster, ns);
    numaplane_creates_isbsvc(cluster, ns);
    let refused =
        format!("user \\\"system:serviceaccount:numaflow-system:{account}\\\" may not change");
    let logged = poll(Duration::from_secs(30), || {
        let log = cluster.numaflow_log(account);
        let line = log
            .lines()
            .find(|l| l.contains("denied the request") && l.contains(&refused))?;
        Some(line.to_owned())
    })
    .unwrap_or_else(|| {
        panic!(
            "the renamed controller's log shows no refusal; it ends:\n{}",
            tail(&cluster.numaflow_log(account), 20)
        )
    });
    let object = get(cluster, ISBSVCS, ns, ISBSVC);
    assert!(
        object["metadata"]["finalizers"].is_null() && object["status"]["phase"].is_null(),
        "the renamed controller's writes of the InterStepBufferService were stored: {object}"
    );
    let counted =
        apiserver_support::webhook_family_sum(env, "pipelinerollout_webhook_denials_total")
            - denials_before;
    assert!(
        counted >= 1.0,
        "the refusals were not counted in denials_total"
    );
    let decisions = env.webhook.log_tail(usize::MAX);
    // The Vertices left by the child scenario 4 deleted belong to no
    // child any more: rule 29 lets anyone change them.
    let its: Vec<&str> = decisions
        .lines()
        .filter(|l| l.contains(" decision ") && l.contains(&format!(":{account}\"")))
        .filter(|l| !l.contains("object=nf-delete/demo-0-"))
        .collect();
    assert!(
        !its.is_empty() && its.iter().all(|l| l.contains("allowed=false")),
        "every decision for the renamed account is a refusal: {its:?}"
    );
    let line = format!(
        "nf-account: {} writes of the renamed controller refused ({counted} counted); its log:\n{}\n",
        its.len(),
        logged.chars().take(400).collect::<String>()
    );
    say(&line);
}
