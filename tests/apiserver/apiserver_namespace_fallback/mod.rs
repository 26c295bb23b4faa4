//! Rule 24 on a namespace left to Numaplane's cluster default, through the
//! real kube-apiserver, on the shared installation of
//! `tests/apiserver/namespace_strategy.rs`. Numaplane keeps one
//! configuration per namespace and falls back to `defaultUpgradeStrategy`
//! of its ConfigMap `numaplane-controller-config` (in `numaplane-system`)
//! when a namespace-level ConfigMap is deleted (any of several), loses its
//! label or sets no strategy. The webhook follows that ConfigMap with a
//! watch: while there is none it takes the default as `no-strategy`, and
//! each of those writes by alice is refused, saying so; once the default
//! is `progressive` they are allowed; once it is empty (`no-strategy`)
//! they are refused again, naming it.

use std::time::{Duration, Instant};

use envtest::{Cluster, Output, User, binding};
use serde_json::{Value, json};

use super::{LABEL, assert_refused, config_map, shared};

/// A namespace where alice may write and delete ConfigMaps.
fn editors(cluster: &Cluster, ns: &str) {
    let verbs = ["get", "list", "create", "update", "patch", "delete"];
    cluster
        .create_all(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "configmaps", "namespace": ns},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]}),
            binding(Some(ns), "configmaps", "Role", "configmaps", &[User::Alice]),
        ])
        .expect("the namespace");
    cluster
        .wait_for_access(User::Alice, "delete", "configmaps", ns, true)
        .expect("access");
}

/// Numaplane's own ConfigMap with `defaultUpgradeStrategy: default`.
fn controller_config(default: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "numaplane-controller-config", "namespace": "numaplane-system"},
        "data": {"config.yaml": format!("logLevel: INFO\ndefaultUpgradeStrategy: \"{default}\"\n")},
    })
}

fn delete(cluster: &Cluster, ns: &str, name: &str, dry_run: bool) -> Output {
    let mut args = vec!["delete", "configmap", name, "-n", ns];
    if dry_run {
        args.push("--dry-run=server");
    }
    cluster.kubectl(User::Alice).run(&args)
}

/// Waits until alice's dry-run DELETE of `ns/name` is allowed (`true`) or
/// refused naming `says`: the webhook's watch has read the new default.
fn wait_for_default(cluster: &Cluster, ns: &str, name: &str, allowed: bool, says: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = delete(cluster, ns, name, true);
        if out.success == allowed && (allowed || out.stderr.contains(says)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the webhook has not read the new default after 30s: {out}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_namespace_is_not_left_to_a_default_that_skips_draining() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-ns-fallback";
    editors(cluster, ns);
    let admin = cluster.kubectl(User::Admin);
    let alice = cluster.kubectl(User::Alice);
    let _ = admin.run(&["create", "namespace", "numaplane-system"]);
    let _ = admin.run(&[
        "delete",
        "configmap",
        "numaplane-controller-config",
        "-n",
        "numaplane-system",
    ]);
    for name in ["config", "second"] {
        alice
            .create(&config_map(ns, name, true, "progressive"), &[])
            .expect_success("a namespace-level ConfigMap that drains");
    }

    // No default to read: taken as no-strategy, and said so.
    let unknown = "Numaplane's cluster default, which the webhook cannot read (no ConfigMap numaplane-controller-config in namespace \"numaplane-system\") and so takes as \"no-strategy\"";
    wait_for_default(cluster, ns, "config", false, unknown);
    assert_refused(
        &delete(cluster, ns, "config", false),
        "by deleting it: Numaplane would then use",
    );
    assert_refused(&delete(cluster, ns, "second", false), unknown);
    let unlabel = json!({"metadata": {"labels": {LABEL: null}}});
    assert_refused(
        &alice.merge_patch("configmap", ns, "config", &unlabel, &[]),
        "by removing its label",
    );
    let no_key = json!({"data": {"upgradeStrategy": null, "other": "x"}});
    assert_refused(
        &alice.merge_patch("configmap", ns, "config", &no_key, &[]),
        "by leaving out data.upgradeStrategy",
    );

    // A default that drains: each is allowed.
    admin
        .create(&controller_config("progressive"), &[])
        .expect_success("Numaplane's ConfigMap");
    wait_for_default(cluster, ns, "second", true, "");
    delete(cluster, ns, "second", false).expect_success("the second ConfigMap deleted");

    // An empty default is no-strategy: refused again, naming it.
    admin
        .run_with_stdin(
            &["replace", "-f", "-"],
            Some(&controller_config("").to_string()),
        )
        .expect_success("the default emptied");
    let named = "Numaplane would then use Numaplane's cluster default \"no-strategy\" there";
    wait_for_default(cluster, ns, "config", false, named);
    assert_refused(&delete(cluster, ns, "config", false), named);
    // Back to no default (what the other scenarios expect), read as such;
    // system:masters may leave the namespace to it.
    admin
        .run(&[
            "delete",
            "configmap",
            "numaplane-controller-config",
            "-n",
            "numaplane-system",
        ])
        .expect_success("Numaplane's ConfigMap removed again");
    wait_for_default(cluster, ns, "config", false, unknown);
    admin
        .run(&["delete", "configmap", "config", "-n", ns])
        .expect_success("system:masters leaves the namespace to the default");
}
