//! End-to-end tests through a real kube-apiserver (see envtest/ and
//! docs/end-to-end-tests.md): the Numaplane CRD and the project's manifests
//! installed as users install them, the real webhook binary with the
//! policy users install, and kubectl acting as people, Argo CD and
//! Numaplane.
//!
//! One cluster is shared by the scenarios (an API server takes seconds to
//! start); each scenario works in namespaces of its own. Scenario 7 stops
//! the webhook, so it gets a cluster of its own (see there).
//!
//! Without the binaries these tests print a skip line each, and fail in CI.

use crate::apiserver_support;

use std::io::Write as _;
use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apiserver_support::{
    ALLOW_DATA_LOSS, MUTATE, NO_TIMEOUT_SECONDS, ROLLOUTS, VALIDATE, annotate, annotation_of,
    assert_refused, grant_example_force_bindings, idle, pausing, rollout, set_status, stored,
    team_namespace, timeout_of, timeout_patch,
};
use envtest::{Assets, Cluster, Installation, User, binding, repo_root, require, webhook_calls};
use serde_json::{Value, json};

/// The webhook binary the API server calls.
const WEBHOOK: &str = env!("CARGO_BIN_EXE_pipelinerollout-webhook");
/// The one override the shared webhook's policy adds to the base policy.
const OVERRIDE_MATCH: &str = "e2e-override-*";
/// That override's default: 5m.
const OVERRIDE_DEFAULT_SECONDS: i64 = 300;
/// The RBAC answer cache of the base policy (`cacheTTL` left at its default).
const RBAC_CACHE_TTL: Duration = Duration::from_secs(10);
/// The object that predates the webhooks (scenario 3).
const LEGACY_NAMESPACE: &str = "e2e-legacy";
const LEGACY_NAME: &str = "legacy";
const LEGACY_TIMEOUT: i64 = 7200;

// ---------------------------------------------------------------------------
// The shared cluster

static SHARED: OnceLock<Result<Installation, String>> = OnceLock::new();

/// The shared installation: the base manifests, and a webhook whose policy
/// is the base policy plus one namespace override. One webhook with both
/// (rather than a second webhook and configuration for the override) keeps
/// the installed webhook configurations exactly as rendered; the override
/// only applies to namespaces named `e2e-override-*`, so every other
/// namespace sees the base policy unchanged.
fn shared() -> Option<&'static Installation> {
    envtest::shared(&SHARED, &envtest::test_name(), |assets| {
        Installation::start(
            assets,
            Path::new(WEBHOOK),
            &shared_policy()?,
            before_webhooks,
        )
    })
}

/// `manifests/base/policy.yaml` plus `drainTimeout.namespaces` = one
/// override, after checking the values the scenarios rely on.
fn shared_policy() -> Result<String, String> {
    let text = envtest::base_policy()?;
    let mut policy: Value =
        serde_saphyr::from_str(&text).map_err(|e| format!("base policy.yaml: {e}"))?;
    let expect = |pointer: &str, want: Value| match policy.pointer(pointer) {
        Some(found) if *found == want => Ok(()),
        found => Err(format!(
            "the end-to-end scenarios assume base policy.yaml has {pointer} = {want}, \
             found {found:?}: update tests/apiserver/webhook.rs"
        )),
    };
    expect("/mode", json!("enforce"))?;
    expect("/drainTimeout/default", json!("none"))?;
    expect("/drainTimeout/min", json!("30s"))?;
    expect("/drainTimeout/max", json!("1h"))?;
    expect("/forceReapply/rbac", json!({"verb": "force-reapply"}))?;
    expect("/forceReapply/users", json!([]))?;
    expect("/forceReapply/requirePausing", json!(true))?;
    for absent in ["/drainTimeout/noTimeoutSeconds", "/drainTimeout/namespaces"] {
        if policy.pointer(absent).is_some() {
            return Err(format!(
                "the end-to-end scenarios assume base policy.yaml leaves {absent} out"
            ));
        }
    }
    policy["drainTimeout"]["namespaces"] = json!([{"match": [OVERRIDE_MATCH], "default": "5m"}]);
    Ok(policy.to_string())
}

/// Before the webhooks exist: the other components' RBAC, and scenario 3's
/// object with a timeout the policy forbids.
fn before_webhooks(cluster: &Cluster) -> Result<(), String> {
    apiserver_support::grant_components(cluster)?;
    team_namespace(cluster, LEGACY_NAMESPACE)?;
    let out = cluster.kubectl(User::Admin).create(
        &rollout(LEGACY_NAMESPACE, LEGACY_NAME, Some(json!(LEGACY_TIMEOUT))),
        &[],
    );
    if out.success {
        Ok(())
    } else {
        Err(format!("cannot create the legacy object: {out}"))
    }
}

/// Scenarios still running on the shared cluster (scenario 8 waits for them).
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Counts a scenario as running until dropped (also when it panics).
struct Running;

impl Running {
    fn start() -> Self {
        RUNNING.fetch_add(1, Ordering::SeqCst);
        Self
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------
// Scenarios

#[test]
fn scenario_1_create_without_a_timeout_gets_the_policy_default() {
    let _running = Running::start();
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let alice = cluster.kubectl(User::Alice);
    team_namespace(cluster, "e2e-defaults").expect("namespace");
    team_namespace(cluster, "e2e-override-defaults").expect("namespace");

    // No lifecycle at all: the base policy's `default: none`.
    let sent = rollout("e2e-defaults", "no-timeout", None);
    alice
        .create(&sent, &[])
        .expect_success("alice creates a rollout without a timeout");
    let got = stored(&alice, "e2e-defaults", "no-timeout");
    assert_eq!(timeout_of(&got), &json!(NO_TIMEOUT_SECONDS), "{got}");
    // Nothing else changed: the pipeline spec is what alice sent, plus the
    // timeouts (the deletion timeout's default is deletionTimeout's 30 s).
    let mut expected = sent["spec"]["pipeline"]["spec"].clone();
    expected["lifecycle"] = json!({
        "pauseGracePeriodSeconds": NO_TIMEOUT_SECONDS,
        "deletionGracePeriodSeconds": 30,
    });
    assert_eq!(got["spec"]["pipeline"]["spec"], expected);

    // An empty lifecycle in a namespace the override matches: its default.
    let mut sent = rollout("e2e-override-defaults", "no-timeout", None);
    sent["spec"]["pipeline"]["spec"]["lifecycle"] = json!({});
    alice
        .create(&sent, &[])
        .expect_success("alice creates a rollout in an override namespace");
    let got = stored(&alice, "e2e-override-defaults", "no-timeout");
    assert_eq!(timeout_of(&got), &json!(OVERRIDE_DEFAULT_SECONDS), "{got}");

    // Argo CD's sync (server-side apply as its application controller)
    // gets the default too, and keeps it when it applies the same
    // manifest again (which does not carry the field).
    let manifest = rollout("e2e-defaults", "argocd-synced", None).to_string();
    let argocd = cluster.kubectl(User::ArgocdApplicationController);
    for sync in ["first", "second"] {
        argocd
            .run_with_stdin(
                &[
                    "apply",
                    "--server-side",
                    "--field-manager=argocd-controller",
                    "-f",
                    "-",
                ],
                Some(&manifest),
            )
            .expect_success(&format!("Argo CD's {sync} sync"));
        let got = stored(&alice, "e2e-defaults", "argocd-synced");
        assert_eq!(
            timeout_of(&got),
            &json!(NO_TIMEOUT_SECONDS),
            "after the {sync} sync: {got}"
        );
    }

    // A timeout that is given is kept.
    alice
        .create(&rollout("e2e-defaults", "given", Some(json!(60))), &[])
        .expect_success("alice creates a rollout with a 60 s timeout");
    assert_eq!(
        timeout_of(&stored(&alice, "e2e-defaults", "given")),
        &json!(60)
    );
}

#[test]
fn scenario_2_invalid_timeouts_are_refused_with_the_webhooks_message() {
    let _running = Running::start();
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let alice = cluster.kubectl(User::Alice);
    team_namespace(cluster, "e2e-invalid").expect("namespace");
    let field = "spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds";
    let cases = [
        (
            "string",
            json!("1h"),
            format!("{field} is \"1h\", which is not an integer number of seconds"),
        ),
        (
            "too-short",
            json!(10),
            format!("{field} is 10, below the minimum of 30"),
        ),
        (
            "too-long",
            json!(7200),
            format!("{field} is 7200, above the maximum of 3600"),
        ),
    ];
    for (name, timeout, says) in cases {
        let out = alice.create(&rollout("e2e-invalid", name, Some(timeout)), &[]);
        assert_refused(&out, &says);
        assert!(
            alice.get(ROLLOUTS, "e2e-invalid", name).is_none(),
            "{name} was stored"
        );
    }
}

#[test]
fn scenario_3_a_legacy_object_can_still_be_edited_with_a_warning() {
    let _running = Running::start();
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let alice = cluster.kubectl(User::Alice);
    let numaplane = cluster.kubectl(User::NumaplaneController);
    let (ns, name) = (LEGACY_NAMESPACE, LEGACY_NAME);
    let warning = format!(
        "unchanged, so allowed: pauseGracePeriodSeconds {LEGACY_TIMEOUT} is above the maximum 3600"
    );

    let out = alice
        .run(&["label", ROLLOUTS, name, "-n", ns, "team=payments"])
        .expect_success("alice labels the legacy rollout");
    assert!(
        out.warnings().contains(&warning),
        "no ratcheting warning: {out}"
    );

    let finalizer =
        json!({"metadata": {"finalizers": ["numaplane.numaproj.io/numaplane-controller"]}});
    let out = numaplane
        .merge_patch(ROLLOUTS, ns, name, &finalizer, &[])
        .expect_success("Numaplane adds its finalizer");
    assert!(
        !out.warnings().contains(&warning),
        "Numaplane's controller reached the webhook: {out}"
    );
    let out = numaplane
        .merge_patch(
            ROLLOUTS,
            ns,
            name,
            &json!({"metadata": {"finalizers": null}}),
            &[],
        )
        .expect_success("Numaplane removes its finalizer");
    assert!(
        !out.warnings().contains(&warning),
        "Numaplane's controller reached the webhook: {out}"
    );

    // Ratcheting keeps an old value; it does not let a new bad one in.
    let out = alice.merge_patch(ROLLOUTS, ns, name, &timeout_patch(7300), &[]);
    assert_refused(&out, "is 7300, above the maximum of 3600");

    let got = stored(&alice, ns, name);
    assert_eq!(timeout_of(&got), &json!(LEGACY_TIMEOUT), "{got}");
    assert_eq!(got["metadata"]["labels"]["team"], "payments");
    assert!(got["metadata"]["finalizers"].is_null(), "{got}");
}

#[test]
fn scenario_4_forced_reapply_needs_rbac_and_a_pause() {
    let _running = Running::start();
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-force-reapply";
    team_namespace(cluster, ns).expect("namespace");
    let (alice, admin) = (cluster.kubectl(User::Alice), cluster.kubectl(User::Admin));
    for (name, status) in [
        ("upgrade-pause", pausing(true)),
        ("isbsvc-pause", pausing(false)),
        ("revoked", pausing(true)),
        ("carol", pausing(true)),
        ("unbound", pausing(true)),
        ("idle", idle()),
    ] {
        alice
            .create(&rollout(ns, name, Some(json!(300))), &[])
            .expect_success("alice creates a rollout");
        set_status(cluster, ns, name, status);
    }

    // alice has no permission: refused, saying how to get it.
    let out = annotate(&alice, ns, "upgrade-pause", Some("true"));
    assert_refused(
        &out,
        &format!(
            "user \"alice\" may not set metadata.annotations[\"{ALLOW_DATA_LOSS}\"] to \"true\""
        ),
    );
    assert_refused(&out, "RBAC does not allow verb \"force-reapply\"");

    // A RoleBinding to the manifests' ClusterRole lets her, in this
    // namespace, for either kind of pause. (Other objects than the one she
    // was refused on, whose answer the webhook keeps for the cache TTL.)
    let grant = binding(
        Some(ns),
        "alice-force-reapply",
        "ClusterRole",
        "pipelinerollout-force-reapply",
        &[User::Alice],
    );
    admin
        .create(&grant, &[])
        .expect_success("admin grants alice force-reapply");
    let force_reapply = |allowed| {
        cluster
            .wait_for_access(
                User::Alice,
                "force-reapply",
                "pipelinerollouts.numaplane.numaproj.io",
                ns,
                allowed,
            )
            .expect("RBAC sees the change")
    };
    force_reapply(true);
    annotate(&alice, ns, "isbsvc-pause", Some("true"))
        .expect_success("alice forces a re-apply (ISB service pause)");
    annotate(&alice, ns, "revoked", Some("true"))
        .expect_success("alice forces a re-apply (upgrade pause)");
    let allowed_at = Instant::now();
    annotate(&alice, ns, "revoked", Some("false"))
        .expect_success("alice sets allow-data-loss back to false");
    admin
        .run(&["delete", "rolebinding", "alice-force-reapply", "-n", ns])
        .expect_success("admin revokes the grant");
    force_reapply(false);

    // Argo CD's resource action (a merge patch, as argocd-server) and the
    // group sre: the base install binds neither; the example bindings of
    // manifests/components/force-reapply-bindings bind both.
    let argocd = cluster.kubectl(User::ArgocdServer);
    let action = json!({"metadata": {"annotations": {ALLOW_DATA_LOSS: "true"}}});
    // (On an object of their own: a refusal is cached for the cache TTL.)
    let out = argocd.merge_patch(ROLLOUTS, ns, "unbound", &action, &[]);
    assert_refused(&out, "RBAC does not allow verb \"force-reapply\"");
    let out = annotate(&cluster.kubectl(User::Carol), ns, "unbound", Some("true"));
    assert_refused(&out, "RBAC does not allow verb \"force-reapply\"");
    grant_example_force_bindings(cluster).expect("the example bindings");
    for user in [User::ArgocdServer, User::Carol] {
        cluster
            .wait_for_access(
                user,
                "force-reapply",
                "pipelinerollouts.numaplane.numaproj.io",
                ns,
                true,
            )
            .expect("RBAC sees the example bindings");
    }
    argocd
        .merge_patch(ROLLOUTS, ns, "upgrade-pause", &action, &[])
        .expect_success("Argo CD's allow-data-loss action");
    annotate(&cluster.kubectl(User::Carol), ns, "carol", Some("true"))
        .expect_success("carol (group sre) forces a re-apply");
    assert_eq!(
        annotation_of(&stored(&alice, ns, "upgrade-pause")),
        Some("true")
    );

    // Nothing pauses: refused even for those who may.
    let out = argocd.merge_patch(ROLLOUTS, ns, "idle", &action, &[]);
    assert_refused(&out, "the pipeline is not pausing");

    // Once the answer cached when alice was allowed has expired, the
    // revoked grant refuses again.
    let expired = allowed_at + RBAC_CACHE_TTL + Duration::from_secs(1);
    std::thread::sleep(expired.saturating_duration_since(Instant::now()));
    let out = annotate(&alice, ns, "revoked", Some("true"));
    assert_refused(&out, "RBAC does not allow verb \"force-reapply\"");
}

#[test]
fn scenario_5_only_true_and_false_are_accepted_as_allow_data_loss() {
    let _running = Running::start();
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-annotation-values";
    team_namespace(cluster, ns).expect("namespace");
    let (alice, admin) = (cluster.kubectl(User::Alice), cluster.kubectl(User::Admin));
    for name in ["forced", "idle"] {
        alice
            .create(&rollout(ns, name, Some(json!(300))), &[])
            .expect_success("alice creates a rollout");
    }
    set_status(cluster, ns, "forced", pausing(true));
    set_status(cluster, ns, "idle", idle());

    // "True" is not "true": Numaplane would ignore it. Refused for
    // everyone, even system:masters, while a pause is in progress.
    for who in [&alice, &admin] {
        let out = annotate(who, ns, "forced", Some("True"));
        assert_refused(&out, "is \"True\", which Numaplane ignores");
    }

    // Taking a forced re-apply back needs no permission: "false", or no
    // annotation at all.
    annotate(&admin, ns, "forced", Some("true")).expect_success("system:masters forces a re-apply");
    annotate(&alice, ns, "forced", Some("false"))
        .expect_success("alice sets allow-data-loss to false");
    assert_eq!(annotation_of(&stored(&alice, ns, "forced")), Some("false"));
    annotate(&admin, ns, "forced", Some("true"))
        .expect_success("system:masters forces a re-apply again");
    annotate(&alice, ns, "forced", None).expect_success("alice removes allow-data-loss");
    assert_eq!(annotation_of(&stored(&alice, ns, "forced")), None);
    annotate(&alice, ns, "idle", Some("false"))
        .expect_success("alice sets false while nothing pauses");
}

#[test]
fn scenario_6_server_side_dry_run_is_judged_and_stores_nothing() {
    let _running = Running::start();
    let Some(env) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-dry-run";
    team_namespace(cluster, ns).expect("namespace");
    let alice = cluster.kubectl(User::Alice);

    let out = alice.create(
        &rollout(ns, "bad", Some(json!("1h"))),
        &["--dry-run=server"],
    );
    assert_refused(&out, "is \"1h\", which is not an integer number of seconds");
    assert!(alice.get(ROLLOUTS, ns, "bad").is_none());

    let out = alice
        .create(
            &rollout(ns, "good", None),
            &["--dry-run=server", "-o", "json"],
        )
        .expect_success("a good dry run");
    assert_eq!(
        timeout_of(&out.json()),
        &json!(NO_TIMEOUT_SECONDS),
        "the dry run shows the default"
    );
    assert!(
        alice.get(ROLLOUTS, ns, "good").is_none(),
        "a dry run stored an object"
    );

    // Updates too.
    alice
        .create(&rollout(ns, "stored", Some(json!(60))), &[])
        .expect_success("alice creates a rollout");
    let out = alice.merge_patch(
        ROLLOUTS,
        ns,
        "stored",
        &timeout_patch(7200),
        &["--dry-run=server"],
    );
    assert_refused(&out, "is 7200, above the maximum of 3600");
    alice
        .merge_patch(
            ROLLOUTS,
            ns,
            "stored",
            &timeout_patch(120),
            &["--dry-run=server"],
        )
        .expect_success("a good dry-run update");
    assert_eq!(
        timeout_of(&stored(&alice, ns, "stored")),
        &json!(60),
        "a dry run changed the object"
    );
}

/// Stopping the webhook makes every PipelineRollout write fail, so this
/// scenario runs on a cluster of its own rather than the shared one: the
/// others keep running in parallel, undisturbed, and nothing has to be
/// ordered or locked. The price is one more API server start (a few
/// seconds), which overlaps with the other scenarios.
#[test]
fn scenario_7_webhook_down_refuses_writes_until_it_is_back() {
    let name = envtest::test_name();
    let Some(assets) = require(&name, Assets::find()) else {
        return;
    };
    let policy = envtest::base_policy().expect("base policy");
    let mut env = Installation::start(&assets, Path::new(WEBHOOK), &policy, |_| Ok(()))
        .expect("a cluster of its own");
    let ns = "e2e-webhook-down";
    let admin = env.cluster.kubectl(User::Admin);
    admin
        .run(&["create", "namespace", ns])
        .expect_success("create the namespace");
    admin
        .create(&rollout(ns, "before", None), &[])
        .expect_success("a write while the webhook runs");
    apiserver_support::grant_components(&env.cluster).expect("Numaplane's access");
    env.cluster
        .wait_for_access(User::NumaplaneController, "patch", ROLLOUTS, ns, true)
        .expect("Numaplane may patch rollouts");

    env.webhook.stop();
    // Numaplane's controller never waits for the webhook: its bookkeeping
    // goes on while the webhook is down.
    let finalizer =
        json!({"metadata": {"finalizers": ["numaplane.numaproj.io/numaplane-controller"]}});
    env.cluster
        .kubectl(User::NumaplaneController)
        .merge_patch(ROLLOUTS, ns, "before", &finalizer, &[])
        .expect_success("Numaplane adds its finalizer while the webhook is down");
    let failed = format!("failed calling webhook \"{MUTATE}\"");
    let out = admin.create(&rollout(ns, "while-down", None), &[]);
    assert!(!out.success && out.stderr.contains(&failed), "{out}");
    assert!(
        admin.get(ROLLOUTS, ns, "while-down").is_none(),
        "written while the webhook was down"
    );
    let out = admin.run(&["label", ROLLOUTS, "before", "-n", ns, "team=payments"]);
    assert!(!out.success && out.stderr.contains(&failed), "{out}");

    env.webhook
        .resume(&env.cluster)
        .expect("restart the webhook");
    let deadline = Instant::now() + Duration::from_secs(10);
    let out = loop {
        let out = admin.create(&rollout(ns, "after", None), &[]);
        if out.success || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    out.expect_success("a write once the webhook is back");
    assert_eq!(
        timeout_of(&stored(&admin, ns, "after")),
        &json!(NO_TIMEOUT_SECONDS)
    );
    admin
        .run(&["label", ROLLOUTS, "before", "-n", ns, "team=payments"])
        .expect_success("an update once the webhook is back");
}

/// Not a timed assertion: a report of how long the API server waited for
/// the webhooks, from its own histogram. Its name sorts last, so libtest
/// starts it after the other scenarios; it waits for them to finish.
#[test]
fn scenario_8_latency_as_the_api_server_sees_it() {
    let Some(env) = shared() else { return };
    let deadline = Instant::now() + Duration::from_secs(300);
    while RUNNING.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let metrics = env
        .cluster
        .get_as_admin("/metrics")
        .expect("the API server's /metrics");
    let mut report = format!(
        "Admission webhook latency as kube-apiserver measured it \
         (apiserver_admission_webhook_admission_duration_seconds, shared e2e cluster, {} CPUs; \
         scenario 7's own cluster not included):\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for webhook in [MUTATE, VALIDATE] {
        let calls = webhook_calls(&metrics, webhook);
        assert!(calls.total > 0.0, "the API server never called {webhook}");
        report.push_str(&format!(
            "  {webhook}: {} calls, {:.1}% under 5 ms, {:.1}% under 25 ms\n",
            calls.total,
            100.0 * calls.under_5ms / calls.total,
            100.0 * calls.under_25ms / calls.total
        ));
    }
    print!("{report}");
    let dir = repo_root().join("target/envtest");
    std::fs::create_dir_all(&dir).expect("create target/envtest");
    std::fs::File::create(dir.join("latency-report.txt"))
        .and_then(|mut f| f.write_all(report.as_bytes()))
        .expect("write target/envtest/latency-report.txt");
}
