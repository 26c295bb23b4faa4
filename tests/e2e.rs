//! End-to-end tests through a real kube-apiserver (see tests/envtest and
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

mod envtest;

use std::io::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use envtest::{Assets, Cluster, Installation, Kubectl, Output, User, repo_root, require};
use serde_json::{Value, json};

const VALIDATE: &str = "validate.pipelinerollout-webhook.numaplane.numaproj.io";
const MUTATE: &str = "mutate.pipelinerollout-webhook.numaplane.numaproj.io";
const ALLOW_DATA_LOSS: &str = "numaplane.numaproj.io/allow-data-loss";
const ROLLOUTS: &str = "pipelinerollouts";

/// What `default: none` writes: the built-in `noTimeoutSeconds` (README,
/// "Policy reference"), which the base policy does not change.
const NO_TIMEOUT_SECONDS: i64 = 31_536_000;
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
        Installation::start(assets, &shared_policy()?, before_webhooks)
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
            "the end-to-end scenarios assume base policy.yaml has {pointer} = {want}, found {found:?}: update tests/e2e.rs"
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
    let writer = |name: &str, resources: &[&str]| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [{"apiGroups": ["numaplane.numaproj.io"], "resources": resources,
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]})
    };
    let bind = |role: &str, user: User| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{role}-{}", user.name().replace(':', "-"))},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user.name()}]})
    };
    // What Argo CD's and Numaplane's own installs grant their accounts.
    cluster.create_all(vec![
        writer("e2e-argocd", &["pipelinerollouts"]),
        writer(
            "e2e-numaplane",
            &["pipelinerollouts", "pipelinerollouts/status"],
        ),
        bind("e2e-argocd", User::ArgocdServer),
        bind("e2e-argocd", User::ArgocdApplicationController),
        bind("e2e-numaplane", User::NumaplaneController),
    ])?;
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

/// A namespace where alice and carol may write PipelineRollouts (the
/// aggregated `edit` role is empty without a controller manager).
fn team_namespace(cluster: &Cluster, name: &str) -> Result<(), String> {
    cluster.create_all(vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "pipelinerollout-writer", "namespace": name},
            "rules": [{"apiGroups": ["numaplane.numaproj.io"], "resources": ["pipelinerollouts"],
                "verbs": ["get", "list", "watch", "create", "update", "patch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "pipelinerollout-writers", "namespace": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pipelinerollout-writer"},
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": User::Alice.name()},
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": User::Carol.name()}]}),
    ])
}

/// The Numaplane sample rollout, named `namespace/name`, with `timeout` as
/// its drain timeout (`None`: no `lifecycle` at all).
fn rollout(namespace: &str, name: &str, timeout: Option<Value>) -> Value {
    let path = repo_root().join("tests/fixtures/numaplane-sample-pipelinerollout.yaml");
    let text = std::fs::read_to_string(&path).expect("read the sample PipelineRollout");
    let mut object: Value = serde_saphyr::from_str(&text).expect("the sample is YAML");
    object["metadata"] = json!({"name": name, "namespace": namespace});
    let spec = &mut object["spec"]["pipeline"]["spec"];
    match timeout {
        Some(timeout) => spec["lifecycle"] = json!({"pauseGracePeriodSeconds": timeout}),
        None => {
            spec.as_object_mut()
                .expect("pipeline spec")
                .remove("lifecycle");
        }
    }
    object
}

fn timeout_of(object: &Value) -> &Value {
    &object["spec"]["pipeline"]["spec"]["lifecycle"]["pauseGracePeriodSeconds"]
}

/// The stored object; panics if it is not there.
#[track_caller]
fn stored(kubectl: &Kubectl, namespace: &str, name: &str) -> Value {
    kubectl
        .get(ROLLOUTS, namespace, name)
        .unwrap_or_else(|| panic!("{namespace}/{name} is not stored"))
}

/// Checks that the validating webhook refused the request and that its
/// message, as the client got it, contains `says`.
#[track_caller]
fn assert_refused(out: &Output, says: &str) {
    assert!(!out.success, "expected the webhook to refuse: {out}");
    let by = format!("admission webhook \"{VALIDATE}\" denied the request");
    assert!(
        out.stderr.contains(&by),
        "refused, but not by {VALIDATE}: {out}"
    );
    assert!(
        out.stderr.contains(says),
        "the refusal does not say {says:?}: {out}"
    );
}

/// Writes `status` through the status subresource, as Numaplane does.
#[track_caller]
fn set_status(cluster: &Cluster, namespace: &str, name: &str, status: Value) {
    cluster
        .kubectl(User::NumaplaneController)
        .merge_patch(
            ROLLOUTS,
            namespace,
            name,
            &json!({"status": status}),
            &["--subresource=status"],
        )
        .expect_success("Numaplane writes the status");
}

/// A status saying the pipeline is pausing: through the rollout's own
/// pause-and-drain upgrade, or (`upgrade` false) through an
/// ISBServiceRollout update, which leaves `upgradeInProgress` empty.
fn pausing(upgrade: bool) -> Value {
    json!({
        "phase": "Deployed",
        "upgradeInProgress": if upgrade { "PipelinePauseAndDrain" } else { "" },
        "conditions": [{"type": "PipelinePausingOrPaused", "status": "True", "reason": "PipelinePausing",
            "message": "Pipeline pausing", "lastTransitionTime": "2026-06-01T10:00:00Z"}],
    })
}

/// A status saying nothing pauses.
fn idle() -> Value {
    json!({
        "phase": "Deployed",
        "upgradeInProgress": "",
        "conditions": [{"type": "PipelinePausingOrPaused", "status": "False", "reason": "Unpaused",
            "message": "Pipeline unpaused", "lastTransitionTime": "2026-06-01T10:00:00Z"}],
    })
}

/// `kubectl annotate` of allow-data-loss: set to `value`, or removed.
fn annotate(kubectl: &Kubectl, namespace: &str, name: &str, value: Option<&str>) -> Output {
    let change = match value {
        Some(value) => format!("{ALLOW_DATA_LOSS}={value}"),
        None => format!("{ALLOW_DATA_LOSS}-"),
    };
    kubectl.run(&[
        "annotate",
        ROLLOUTS,
        name,
        "-n",
        namespace,
        &change,
        "--overwrite",
    ])
}

fn annotation_of(object: &Value) -> Option<&str> {
    object["metadata"]["annotations"][ALLOW_DATA_LOSS].as_str()
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
    // Nothing else changed: the pipeline spec is what alice sent, plus the timeout.
    let mut expected = sent["spec"]["pipeline"]["spec"].clone();
    expected["lifecycle"] = json!({"pauseGracePeriodSeconds": NO_TIMEOUT_SECONDS});
    assert_eq!(got["spec"]["pipeline"]["spec"], expected);

    // An empty lifecycle in a namespace the override matches: its default.
    let mut sent = rollout("e2e-override-defaults", "no-timeout", None);
    sent["spec"]["pipeline"]["spec"]["lifecycle"] = json!({});
    alice
        .create(&sent, &[])
        .expect_success("alice creates a rollout in an override namespace");
    let got = stored(&alice, "e2e-override-defaults", "no-timeout");
    assert_eq!(timeout_of(&got), &json!(OVERRIDE_DEFAULT_SECONDS), "{got}");

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
        out.warnings().contains(&warning),
        "no ratcheting warning: {out}"
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
        out.warnings().contains(&warning),
        "no ratcheting warning: {out}"
    );

    // Ratcheting keeps an old value; it does not let a new bad one in.
    let out = alice.merge_patch(
        ROLLOUTS,
        ns,
        name,
        &json!({"spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": 7300}}}}}),
        &[],
    );
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
    let grant = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "alice-force-reapply", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pipelinerollout-force-reapply"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]});
    admin
        .create(&grant, &[])
        .expect_success("admin grants alice force-reapply");
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

    // Argo CD's resource action (a merge patch, as argocd-server) and the
    // group sre: both bound in force-reapply-rbac.yaml.
    let argocd = cluster.kubectl(User::ArgocdServer);
    let action = json!({"metadata": {"annotations": {ALLOW_DATA_LOSS: "true"}}});
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
    let set = |t: i64| json!({"spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": t}}}}});
    let out = alice.merge_patch(ROLLOUTS, ns, "stored", &set(7200), &["--dry-run=server"]);
    assert_refused(&out, "is 7200, above the maximum of 3600");
    alice
        .merge_patch(ROLLOUTS, ns, "stored", &set(120), &["--dry-run=server"])
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
    let mut env = Installation::start(&assets, &policy, |_| Ok(())).expect("a cluster of its own");
    let ns = "e2e-webhook-down";
    let admin = env.cluster.kubectl(User::Admin);
    admin
        .run(&["create", "namespace", ns])
        .expect_success("create the namespace");
    admin
        .create(&rollout(ns, "before", None), &[])
        .expect_success("a write while the webhook runs");

    env.webhook.stop();
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
        let calls = latency(&metrics, webhook);
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

/// Calls of one webhook, from the histogram's buckets.
struct Calls {
    total: f64,
    under_5ms: f64,
    under_25ms: f64,
}

fn latency(metrics: &str, webhook: &str) -> Calls {
    let mut calls = Calls {
        total: 0.0,
        under_5ms: 0.0,
        under_25ms: 0.0,
    };
    let name = format!("name=\"{webhook}\"");
    for line in metrics.lines() {
        let Some(rest) =
            line.strip_prefix("apiserver_admission_webhook_admission_duration_seconds_bucket{")
        else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if !labels.contains(&name) {
            continue;
        }
        if labels.contains("le=\"+Inf\"") {
            calls.total += value;
        } else if labels.contains("le=\"0.005\"") {
            calls.under_5ms += value;
        } else if labels.contains("le=\"0.025\"") {
            calls.under_25ms += value;
        }
    }
    calls
}

// ---------------------------------------------------------------------------
// The harness itself

#[test]
fn harness_starts_kube_controller_manager_on_request() {
    let name = envtest::test_name();
    let Some(env) = shared() else { return };
    if require(&name, Assets::kube_controller_manager()).is_none() {
        return;
    }
    let cluster = &env.cluster;
    cluster
        .start_controller_manager("validatingadmissionpolicy-status-controller")
        .expect("kube-controller-manager starts");
    // Type checking is written by the controller manager, not the API
    // server: comparing a string (a ConfigMap's data value) with an int is
    // only found with the ConfigMap's schema. This policy has no binding,
    // so it affects nothing.
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "envtest-type-check"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "object.data.nosuchfield < 100"}]}});
    let admin = cluster.kubectl(User::Admin);
    admin
        .create(&policy, &[])
        .expect_success("create a ValidatingAdmissionPolicy");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = admin
            .run(&[
                "get",
                "validatingadmissionpolicy",
                "envtest-type-check",
                "-o",
                "json",
            ])
            .expect_success("read the policy");
        let warnings = &out.json()["status"]["typeChecking"]["expressionWarnings"];
        if let Some(first) = warnings.get(0) {
            assert_eq!(
                first["fieldRef"], "spec.validations[0].expression",
                "{warnings}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no type checking after 30 s: {out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Set for the helper below: where it writes the pids and scratch directory.
const KILLED_HELPER: &str = "ENVTEST_KILLED_HELPER_REPORT";

#[test]
fn harness_leaves_no_process_behind_when_the_test_process_is_killed() {
    let name = envtest::test_name();
    if require(&name, Assets::find()).is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("report");
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "harness_killed_helper",
            "--ignored",
            "--test-threads=1",
        ])
        .env(KILLED_HELPER, &report)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run the helper");
    let deadline = Instant::now() + Duration::from_secs(120);
    let text = loop {
        if let Ok(text) = std::fs::read_to_string(&report) {
            break text;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the helper exited ({status}) before starting its cluster");
        }
        assert!(
            Instant::now() < deadline,
            "the helper did not start its cluster"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    child.kill().expect("SIGKILL the helper");
    child.wait().expect("reap the helper");

    let mut lines = text.lines();
    let scratch = std::path::PathBuf::from(lines.next().expect("scratch directory"));
    let pids: Vec<u32> = lines.map(|l| l.parse().expect("pid")).collect();
    assert!(pids.len() >= 2, "etcd and kube-apiserver: {pids:?}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let alive: Vec<u32> = pids.iter().copied().filter(|p| running(*p)).collect();
        if alive.is_empty() && !scratch.exists() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "20 s after the test process was killed, still running: {alive:?}; scratch directory left: {}",
            scratch.exists()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Started by the test above, which kills it; does nothing otherwise.
#[test]
#[ignore = "helper of harness_leaves_no_process_behind_when_the_test_process_is_killed"]
fn harness_killed_helper() {
    let Some(report) = std::env::var_os(KILLED_HELPER) else {
        return;
    };
    let assets = Assets::find().expect("assets");
    let cluster = Cluster::start(&assets).expect("the helper's cluster");
    let mut text = format!("{}\n", cluster.dir().display());
    for pid in cluster.server_pids() {
        text.push_str(&format!("{pid}\n"));
    }
    let partial = std::path::PathBuf::from(&report).with_extension("partial");
    std::fs::write(&partial, text).expect("write the report");
    std::fs::rename(&partial, &report).expect("publish the report");
    // Killed long before this ends.
    std::thread::sleep(Duration::from_secs(120));
}

/// Whether `pid` is a live process (a zombie holds nothing and counts as gone).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}
