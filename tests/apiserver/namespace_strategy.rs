//! End-to-end: Numaplane's namespace-level ConfigMap (rules 23 and 24)
//! through a real kube-apiserver with the project's manifests and policy.
//!
//! A ConfigMap labelled `numaplane.numaproj.io/config:
//! namespace-level-config` sets the upgrade strategy of every rollout in
//! its namespace. A tenant (alice, who may write ConfigMaps there) may not
//! make it `no-strategy`, empty or blank, nor add the label to a ConfigMap
//! that says so; she may write `progressive`; an unknown value is refused
//! with the three Numaplane accepts. Argo CD's API server (in the base
//! policy's forceReapply.users, which forceReapply.namespaceStrategy takes
//! by default) and `system:masters` may. A ConfigMap without the label is
//! never sent to the webhook: neither the API server's call count for the
//! webhook nor the webhook's own request counter moves. A namespace-level
//! ConfigMap stored before the webhook is reported by the audit. Rule 24's
//! decisions are Events on the ConfigMap
//! (`apiserver_namespace_strategy_events`). Numaflow controller
//! definitions (rule 27) share the installation
//! (`apiserver_controller_definitions`), and so do the writes that leave a
//! namespace to Numaplane's cluster default (`apiserver_namespace_fallback`).
//!
//! The scenarios share one cluster and take turns (`TURN`): the counter
//! test needs no other request in flight.

use crate::apiserver_children_support;
#[path = "apiserver_controller_definitions/mod.rs"]
mod apiserver_controller_definitions;
#[path = "apiserver_namespace_fallback/mod.rs"]
mod apiserver_namespace_fallback;
#[path = "apiserver_namespace_strategy_events/mod.rs"]
mod apiserver_namespace_strategy_events;

use std::path::Path;
use std::sync::{Mutex, MutexGuard, OnceLock};

use envtest::{Cluster, Installation, Output, User, binding, webhook_calls};
use serde_json::{Value, json};

static SHARED: OnceLock<Result<Installation, String>> = OnceLock::new();
static TURN: Mutex<()> = Mutex::new(());

const WEBHOOK: &str = "validate-namespace-config.pipelinerollout-webhook.numaplane.numaproj.io";
const LABEL: &str = "numaplane.numaproj.io/config";

/// The shared installation, and this scenario's turn on it.
fn shared() -> Option<(&'static Installation, MutexGuard<'static, ()>)> {
    let env = envtest::shared(&SHARED, &envtest::test_name(), |assets| {
        Installation::start(
            assets,
            Path::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook")),
            &policy()?,
            before_webhooks,
        )
    })?;
    Some((env, TURN.lock().unwrap_or_else(|e| e.into_inner())))
}

/// The base install's policy, with Argo CD's API server in
/// forceReapply.namespaceStrategy.users (its groups stay forceReapply's:
/// system:masters; its RBAC verb too: force-reapply).
fn policy() -> Result<String, String> {
    let base = envtest::base_policy()?;
    let policy = base.replacen(
        "forceReapply:\n",
        "forceReapply:\n  namespaceStrategy:\n    users: [\"system:serviceaccount:argocd:argocd-server\"]\n",
        1,
    );
    if policy == base {
        return Err("the base policy has no forceReapply section".to_owned());
    }
    Ok(policy)
}

/// The namespace whose namespace-level ConfigMap predates the webhook.
const PREDATING: &str = "e2e-ns-strategy-audit";

/// The namespace whose namespace-level ConfigMap, made before the webhook,
/// has two keys Numaplane reads as upgradeStrategy.
const PREDATING_FOLDED: &str = "e2e-ns-strategy-audit-folded";

/// Argo CD's API server may write ConfigMaps everywhere (as its install
/// grants it), so that its writes reach admission; the PolicyReport CRD
/// for the audit; Numaplane's NumaflowController and
/// NumaflowControllerRollout CRDs; a namespace-level ConfigMap with `no-strategy` made
/// before the webhook, so that nothing judged it.
fn before_webhooks(cluster: &Cluster) -> Result<(), String> {
    for crd in [
        "tests/fixtures/wgpolicyk8s.io_policyreports.yaml",
        "tests/fixtures/numaplane/numaplane.numaproj.io_numaflowcontrollers.yaml",
        "tests/fixtures/numaplane/numaplane.numaproj.io_numaflowcontrollerrollouts.yaml",
    ] {
        cluster.install_crd(&envtest::repo_root().join(crd))?;
    }
    let all = ["get", "list", "create", "update", "patch"];
    cluster.create_all(vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PREDATING}}),
        config_map(PREDATING, "numaplane-config", true, "no-strategy"),
        config_map(PREDATING, "settings", false, "no-strategy"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PREDATING_FOLDED}}),
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": apiserver_controller_definitions::PREDATING_DEFINITIONS}}),
        apiserver_controller_definitions::definitions(
            apiserver_controller_definitions::PREDATING_DEFINITIONS,
            "defs",
            true,
            "alice",
        ),
        labelled(
            PREDATING_FOLDED,
            "numaplane-config",
            json!({"upgradeStrategy": "pause-and-drain", "upgradestrategy": ""}),
        ),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "e2e-configmaps"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": all}]}),
        binding(
            None,
            "e2e-configmaps",
            "ClusterRole",
            "e2e-configmaps",
            &[User::ArgocdServer],
        ),
    ])
}

/// A namespace where alice and carol may write ConfigMaps, and carol is
/// granted the custom verb `force-reapply` on them (what the policy's RBAC
/// check asks for a namespace-level ConfigMap).
fn team(cluster: &Cluster, ns: &str) {
    let verbs = ["get", "list", "create", "update", "patch"];
    cluster
        .create_all(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "configmaps", "namespace": ns},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]}),
            binding(Some(ns), "configmaps", "Role", "configmaps", &[User::Alice, User::Carol]),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "strategy", "namespace": ns},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["force-reapply"]}]}),
            binding(Some(ns), "strategy", "Role", "strategy", &[User::Carol]),
        ])
        .expect("the team namespace");
    for user in [User::Alice, User::Carol] {
        cluster
            .wait_for_access(user, "patch", "configmaps", ns, true)
            .expect("access");
    }
}

/// A ConfigMap `name` in `ns`, labelled as the namespace's configuration
/// when `labelled`, with `upgradeStrategy: strategy`.
fn config_map(ns: &str, name: &str, labelled: bool, strategy: &str) -> Value {
    let labels = if labelled {
        json!({LABEL: "namespace-level-config"})
    } else {
        json!({"app": "demo"})
    };
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "data": {"upgradeStrategy": strategy},
    })
}

/// A ConfigMap `name` in `ns`, labelled as the namespace's configuration,
/// with `data`.
fn labelled(ns: &str, name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {LABEL: "namespace-level-config"}},
        "data": data,
    })
}

fn strategy_of(cluster: &Cluster, ns: &str, name: &str) -> Option<String> {
    let object = cluster.kubectl(User::Admin).get("configmap", ns, name)?;
    object["data"]["upgradeStrategy"]
        .as_str()
        .map(str::to_owned)
}

#[track_caller]
fn assert_refused(out: &Output, says: &str) {
    assert!(!out.success, "expected a refusal: {out}");
    assert!(
        out.stderr.contains(&format!(
            "admission webhook \"{WEBHOOK}\" denied the request"
        )),
        "refused, but not by {WEBHOOK}: {out}"
    );
    assert!(
        out.stderr.contains(says),
        "the refusal does not say {says:?}: {out}"
    );
}

fn set_strategy(cluster: &Cluster, user: User, ns: &str, name: &str, strategy: &str) -> Output {
    cluster.kubectl(user).merge_patch(
        "configmap",
        ns,
        name,
        &json!({"data": {"upgradeStrategy": strategy}}),
        &[],
    )
}

#[test]
fn a_tenant_may_not_make_the_namespace_upgrade_without_draining() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-ns-strategy";
    team(cluster, ns);

    let out = cluster.kubectl(User::Alice).create(
        &config_map(ns, "numaplane-config", true, "no-strategy"),
        &[],
    );
    assert_refused(
        &out,
        "user \"alice\" may not set data.upgradeStrategy to \"no-strategy\" in namespace \"e2e-ns-strategy\": every rollout there would then upgrade by plain apply, with no pause and no drain",
    );
    assert!(
        out.stderr.contains("forceReapply.namespaceStrategy"),
        "{out}"
    );
    assert!(
        out.stderr.contains(
            "RBAC does not allow verb \"force-reapply\" on configmaps \"numaplane-config\" in namespace \"e2e-ns-strategy\""
        ),
        "{out}"
    );
    assert_eq!(strategy_of(cluster, ns, "numaplane-config"), None);

    cluster
        .kubectl(User::Alice)
        .create(
            &config_map(ns, "numaplane-config", true, "progressive"),
            &[],
        )
        .expect_success("alice writes progressive");

    let out = set_strategy(cluster, User::Alice, ns, "numaplane-config", "drain");
    assert_refused(
        &out,
        "data.upgradeStrategy is \"drain\", which Numaplane does not accept: it ignores the ConfigMap and only logs an error its operators see; write one of \"progressive\", \"pause-and-drain\" or \"no-strategy\"",
    );
    for blank in ["", "  "] {
        let out = set_strategy(cluster, User::Alice, ns, "numaplane-config", blank);
        assert_refused(&out, "Numaplane reads it as \"no-strategy\"");
    }
    // A dry run is judged like any other request.
    let out = cluster.kubectl(User::Alice).merge_patch(
        "configmap",
        ns,
        "numaplane-config",
        &json!({"data": {"upgradeStrategy": "no-strategy"}}),
        &["--dry-run=server"],
    );
    assert_refused(&out, "may not set data.upgradeStrategy");
    assert_eq!(
        strategy_of(cluster, ns, "numaplane-config").as_deref(),
        Some("progressive")
    );

    set_strategy(
        cluster,
        User::Alice,
        ns,
        "numaplane-config",
        "pause-and-drain",
    )
    .expect_success("alice writes pause-and-drain");
    // Argo CD's API server is in forceReapply.users, which
    // forceReapply.namespaceStrategy takes by default.
    set_strategy(
        cluster,
        User::ArgocdServer,
        ns,
        "numaplane-config",
        "no-strategy",
    )
    .expect_success("argocd-server, in the policy's users list");
    // Unchanged, it stays allowed for anyone, with a warning kubectl shows.
    let out = cluster.kubectl(User::Alice).merge_patch(
        "configmap",
        ns,
        "numaplane-config",
        &json!({"data": {"note": "x"}}),
        &[],
    );
    let out = out.expect_success("an unrelated change to a stored no-strategy");
    assert!(
        out.stderr.contains("Warning: unchanged, so allowed: upgradeStrategy \"no-strategy\" makes every rollout in \"e2e-ns-strategy\" upgrade without draining"),
        "{out}"
    );
    set_strategy(cluster, User::Alice, ns, "numaplane-config", "progressive")
        .expect_success("back to progressive");
    // system:masters is in forceReapply.groups.
    set_strategy(cluster, User::Admin, ns, "numaplane-config", "")
        .expect_success("admin, in system:masters");
    set_strategy(cluster, User::Alice, ns, "numaplane-config", "progressive")
        .expect_success("back to progressive");
    // Carol holds the custom verb on ConfigMaps in this namespace.
    set_strategy(cluster, User::Carol, ns, "numaplane-config", "no-strategy")
        .expect_success("carol, whom RBAC grants force-reapply on configmaps");
}

#[test]
fn unlabelled_configmaps_never_reach_the_webhook_and_adding_the_label_is_judged() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-ns-strategy-label";
    team(cluster, ns);
    let api_server_calls = || {
        let metrics = cluster
            .get_as_admin("/metrics")
            .expect("the API server's /metrics");
        webhook_calls(&metrics, WEBHOOK).total
    };
    let (calls, answered) = (
        api_server_calls(),
        apiserver_children_support::validate_requests(env),
    );
    cluster
        .kubectl(User::Alice)
        .create(&config_map(ns, "settings", false, "no-strategy"), &[])
        .expect_success("an ordinary ConfigMap");
    set_strategy(cluster, User::Alice, ns, "settings", "")
        .expect_success("an ordinary ConfigMap, changed");
    assert_eq!(
        api_server_calls(),
        calls,
        "the API server called the webhook"
    );
    assert_eq!(
        apiserver_children_support::validate_requests(env),
        answered,
        "the webhook answered a request"
    );

    set_strategy(cluster, User::Alice, ns, "settings", "no-strategy")
        .expect_success("still ordinary");
    let out = cluster.kubectl(User::Alice).run(&[
        "label",
        "configmap",
        "settings",
        "-n",
        ns,
        &format!("{LABEL}=namespace-level-config"),
    ]);
    assert_refused(
        &out,
        "user \"alice\" may not set data.upgradeStrategy to \"no-strategy\"",
    );
    assert!(
        api_server_calls() > calls,
        "the label made it reach the webhook"
    );
    let stored = cluster
        .kubectl(User::Admin)
        .get("configmap", ns, "settings")
        .expect("stored");
    assert_eq!(stored["metadata"]["labels"][LABEL], Value::Null);
    // With progressive, the label may be added; removing it leaves the
    // namespace to Numaplane's default, which this cluster does not hold
    // (no numaplane-controller-config): taken as no-strategy, refused.
    set_strategy(cluster, User::Alice, ns, "settings", "progressive").expect_success("progressive");
    let alice = cluster.kubectl(User::Alice);
    alice
        .run(&[
            "label",
            "configmap",
            "settings",
            "-n",
            ns,
            &format!("{LABEL}=namespace-level-config"),
        ])
        .expect_success("labelling a progressive ConfigMap");
    assert_refused(
        &alice.run(&[
            "label",
            "configmap",
            "settings",
            "-n",
            ns,
            &format!("{LABEL}-"),
        ]),
        "by removing its label: Numaplane would then use Numaplane's cluster default, which the webhook cannot read",
    );
}

/// The results of the audit's report of `namespace`, once it has any
/// (waits up to 120 s).
#[track_caller]
fn report_results(env: &Installation, namespace: &str) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let report = env.cluster.kubectl(User::Admin).get(
            "policyreports.wgpolicyk8s.io",
            namespace,
            "pipelinerollout-webhook",
        );
        let results: Vec<Value> = report
            .map(|r| r["results"].as_array().cloned().unwrap_or_default())
            .unwrap_or_default();
        if !results.is_empty() {
            return results;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no report for {namespace} after 120 s; log:\n{}",
            env.webhook.log_tail(40)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

#[test]
fn the_audit_reports_a_stored_strategy_that_skips_draining() {
    let Some((env, _turn)) = shared() else { return };
    let results = report_results(env, PREDATING);
    let of = |rule: &str| {
        results
            .iter()
            .find(|r| r["rule"] == rule)
            .unwrap_or_else(|| panic!("no {rule} result: {results:#?}"))
    };
    let strategy = of("namespace-strategy");
    assert_eq!(strategy["result"], "warn", "{strategy:#}");
    assert_eq!(strategy["resources"][0]["kind"], "ConfigMap");
    assert_eq!(strategy["resources"][0]["apiVersion"], "v1");
    assert_eq!(strategy["resources"][0]["name"], "numaplane-config");
    assert!(
        strategy["message"].as_str().is_some_and(|m| m.contains(
            "upgradeStrategy is \"no-strategy\": every rollout in namespace \"e2e-ns-strategy-audit\" upgrades by plain apply"
        )),
        "{strategy:#}"
    );
    assert_eq!(of("namespace-strategy-value")["result"], "pass");
    // The unlabelled ConfigMap is neither listed nor reported.
    assert!(
        results
            .iter()
            .all(|r| r["resources"][0]["name"] != "settings"),
        "{results:#?}"
    );
}

/// Numaplane decodes `data` with Go's encoding/json, which matches keys in
/// any case and keeps the last of several in byte order: each of these
/// reads as no-strategy, and each is refused to a tenant.
#[test]
fn keys_numaplane_reads_in_any_case_are_judged_as_it_reads_them() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-ns-strategy-fold";
    team(cluster, ns);
    let alice = cluster.kubectl(User::Alice);
    let folded = " (which Numaplane reads as upgradeStrategy: Go matches keys in any case)";

    let out = alice.create(
        &labelled(
            ns,
            "numaplane-config",
            json!({"UpgradeStrategy": "no-strategy"}),
        ),
        &[],
    );
    assert_refused(
        &out,
        &format!(
            "user \"alice\" may not set data.UpgradeStrategy{folded} to \"no-strategy\" in namespace \"{ns}\""
        ),
    );
    let out = alice.create(
        &labelled(ns, "numaplane-config", json!({"UPGRADESTRATEGY": ""})),
        &[],
    );
    assert_refused(
        &out,
        &format!(
            "may not set data.UPGRADESTRATEGY{folded} to empty or blank (Numaplane reads it as \"no-strategy\")"
        ),
    );
    let out = alice.create(
        &labelled(
            ns,
            "numaplane-config",
            json!({"upgradeStrategy": "pause-and-drain", "upgradestrategy": ""}),
        ),
        &[],
    );
    assert_refused(
        &out,
        "data has both \"upgradestrategy\" and \"upgradeStrategy\", which Numaplane reads as the same field upgradeStrategy",
    );
    assert!(
        out.stderr.contains(&format!(
            "may not set data.upgradestrategy{folded} to empty or blank"
        )),
        "{out}"
    );
    assert_eq!(
        cluster
            .kubectl(User::Admin)
            .get("configmap", ns, "numaplane-config"),
        None,
        "nothing stored"
    );

    // An admin's pause-and-drain, and a tenant's key that Numaplane would
    // read over it.
    cluster
        .kubectl(User::Admin)
        .create(
            &config_map(ns, "numaplane-config", true, "pause-and-drain"),
            &[],
        )
        .expect_success("the admin's pause-and-drain");
    let out = alice.merge_patch(
        "configmap",
        ns,
        "numaplane-config",
        &json!({"data": {"upgradestrategy": "no-strategy"}}),
        &[],
    );
    assert_refused(
        &out,
        "keep one key, spelled upgradeStrategy, with one of \"progressive\", \"pause-and-drain\" or \"no-strategy\"",
    );
    assert!(
        out.stderr.contains(&format!(
            "may not set data.upgradestrategy{folded} to \"no-strategy\""
        )),
        "{out}"
    );
    let stored = cluster
        .kubectl(User::Admin)
        .get("configmap", ns, "numaplane-config")
        .expect("stored");
    assert_eq!(
        stored["data"],
        json!({"upgradeStrategy": "pause-and-drain"})
    );

    // A key in another case that reads as a strategy that drains is allowed,
    // and no longer warned of as missing.
    let out = alice
        .create(
            &labelled(
                ns,
                "other-config",
                json!({"UpgradeStrategy": "progressive"}),
            ),
            &[],
        )
        .expect_success("UpgradeStrategy: progressive");
    assert!(!out.stderr.contains("no data.upgradeStrategy"), "{out}");
}

#[test]
fn the_audit_reports_keys_numaplane_reads_as_one_as_a_failure() {
    let Some((env, _turn)) = shared() else { return };
    let results = report_results(env, PREDATING_FOLDED);
    let of = |rule: &str| {
        results
            .iter()
            .find(|r| r["rule"] == rule)
            .unwrap_or_else(|| panic!("no {rule} result: {results:#?}"))
    };
    let value = of("namespace-strategy-value");
    assert_eq!(value["result"], "fail", "{value:#}");
    assert!(
        value["message"].as_str().is_some_and(|m| m.contains(
            "data has both \"upgradestrategy\" and \"upgradeStrategy\", which Numaplane reads as the same field upgradeStrategy"
        )),
        "{value:#}"
    );
    // What Numaplane reads: the empty upgradestrategy, so no-strategy.
    let strategy = of("namespace-strategy");
    assert_eq!(strategy["result"], "warn", "{strategy:#}");
    assert!(
        strategy["message"]
            .as_str()
            .is_some_and(|m| m.contains("empty or blank (Numaplane reads it as \"no-strategy\")")),
        "{strategy:#}"
    );
}
