//! Rules 23 and 24 as exported, evaluated by the `cel` interpreter beside
//! the webhook's own decision (`admission::answer`) on the same request:
//! Numaplane's namespace-level ConfigMap created and updated with each
//! strategy, empty, blank, invalid and non-string values, no `data`, no
//! `upgradeStrategy`, the label added, removed or another value, ratcheting,
//! users and groups `forceReapply.namespaceStrategy` permits, and warn mode.
//! The exported policy's objectSelector is applied as the API server
//! applies it (to the object and to the stored object). The interpreter
//! has no `authorizer`, so the policies here grant by users and groups
//! only; the RBAC verb is exercised on a real API server by
//! tests/apiserver/vap.rs. The webhook's notes on a ConfigMap without data
//! or strategy have no exported counterpart (docs/vap.md). Rule 27 on
//! Numaflow controller definitions is judged by the same policy.

use crate::cel_support;

use cel_support::table::{Case, Expect, case, run};
use cel_support::{CONFIGMAPS, Request};
use pipelinerollout_webhook::namespace_config::{
    CONFIG_LABEL, CONTROLLER_DEFINITIONS, NAMESPACE_CONFIG,
};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};
use test_builders::users;

use Expect::{Allowed, Denied};

/// The API server refuses a ConfigMap whose `data` holds a non-string
/// before admission; were one sent, the export's `trim()` would fail and
/// failurePolicy Fail deny it.
const NOT_A_STRING: &str = "the API server refuses a non-string in data before admission; the export's expression would fail (failurePolicy Fail)";

/// A ConfigMap labelled `label` (`None`: not labelled) with `data`.
fn config(label: Option<&str>, data: Option<Value>) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "numaplane-config", "namespace": "team", "labels": {"app": "x"}}});
    if let Some(label) = label {
        object["metadata"]["labels"][CONFIG_LABEL] = json!(label);
    }
    if let Some(data) = data {
        object["data"] = data;
    }
    object
}

/// Numaplane's namespace-level ConfigMap with `upgradeStrategy: value`.
fn strategy(value: impl Into<Value>) -> Value {
    config(
        Some(NAMESPACE_CONFIG),
        Some(json!({"upgradeStrategy": value.into(), "other": "kept"})),
    )
}

fn unlabelled(value: &str) -> Value {
    config(None, Some(json!({"upgradeStrategy": value})))
}

fn create(name: &str, object: Value, expect: Expect) -> Case {
    case(
        format!("CREATE {name}"),
        Request::create(CONFIGMAPS, object),
        expect,
    )
}

fn update(name: &str, old: Value, new: Value, expect: Expect) -> Case {
    case(
        format!("UPDATE {name}"),
        Request::update(CONFIGMAPS, old, new),
        expect,
    )
}

/// The cases whose answer does not depend on who writes (alice writes).
fn cases() -> Vec<Case> {
    let long = "pause-and-drain-please-with-a-very-long-name-indeed";
    vec![
        create("progressive", strategy("progressive"), Allowed),
        create("pause-and-drain", strategy("pause-and-drain"), Allowed),
        create("no-strategy", strategy("no-strategy"), Denied("rule 24")),
        create("empty", strategy(""), Denied("rule 24")),
        create("blank", strategy("  \t"), Denied("rule 24")),
        create("drain", strategy("drain"), Denied("rule 23")),
        create("Progressive", strategy("Progressive"), Denied("rule 23")),
        create(
            "\" progressive\"",
            strategy(" progressive"),
            Denied("rule 23"),
        ),
        create(
            "\"no-strategy \"",
            strategy("no-strategy "),
            Denied("rule 23"),
        ),
        create(
            "a value past 40 characters",
            strategy(long),
            Denied("rule 23"),
        ),
        create("the number 7", strategy(7), Denied("rule 23")).words_differ(NOT_A_STRING),
        create("no data", config(Some(NAMESPACE_CONFIG), None), Allowed),
        create(
            "data without upgradeStrategy",
            config(Some(NAMESPACE_CONFIG), Some(json!({"other": "x"}))),
            Allowed,
        ),
        create(
            "unlabelled, no-strategy",
            unlabelled("no-strategy"),
            Allowed,
        ),
        create(
            "labelled usde-config, no-strategy",
            config(
                Some("usde-config"),
                Some(json!({"upgradeStrategy": "no-strategy"})),
            ),
            Allowed,
        ),
        update(
            "progressive to no-strategy",
            strategy("progressive"),
            strategy("no-strategy"),
            Denied("rule 24"),
        ),
        update(
            "an invalid value to no-strategy",
            strategy("drain"),
            strategy("no-strategy"),
            Denied("rule 24"),
        ),
        update(
            "adding the label to a no-strategy",
            unlabelled("no-strategy"),
            strategy("no-strategy"),
            Denied("rule 24"),
        ),
        update(
            "adding the label to a drain",
            unlabelled("drain"),
            strategy("drain"),
            Denied("rule 23"),
        ),
        update(
            "keeping no-strategy",
            strategy("no-strategy"),
            strategy("no-strategy"),
            Allowed,
        ),
        update(
            "no-strategy to empty",
            strategy("no-strategy"),
            strategy(""),
            Allowed,
        ),
        update(
            "keeping an invalid value",
            strategy("drain"),
            strategy("drain"),
            Allowed,
        ),
        update(
            "one invalid value to another",
            strategy("drain"),
            strategy("Drain"),
            Denied("rule 23"),
        ),
        update(
            "no-strategy to progressive",
            strategy("no-strategy"),
            strategy("progressive"),
            Allowed,
        ),
        update(
            "removing the label, with an invalid value",
            strategy("no-strategy"),
            unlabelled("drain"),
            Allowed,
        ),
        update(
            "the label's value changed, with no-strategy",
            strategy("progressive"),
            config(
                Some("usde-config"),
                Some(json!({"upgradeStrategy": "no-strategy"})),
            ),
            Allowed,
        ),
        update(
            "the label's value changed to namespace-level-config, with no-strategy",
            config(
                Some("usde-config"),
                Some(json!({"upgradeStrategy": "no-strategy"})),
            ),
            strategy("no-strategy"),
            Denied("rule 24"),
        ),
        create("blank with a newline", strategy("\n"), Denied("rule 24")),
        create("a no-break space", strategy("\u{a0}"), Denied("rule 24")),
        update(
            "removing upgradeStrategy",
            strategy("progressive"),
            config(Some(NAMESPACE_CONFIG), Some(json!({"other": "x"}))),
            Allowed,
        ),
        // Numaplane reads data with Go's encoding/json: any case of the key.
        create(
            "UpgradeStrategy: no-strategy",
            config(
                Some(NAMESPACE_CONFIG),
                Some(json!({"UpgradeStrategy": "no-strategy"})),
            ),
            Denied("rule 24"),
        ),
        create(
            "UPGRADESTRATEGY: empty",
            config(Some(NAMESPACE_CONFIG), Some(json!({"UPGRADESTRATEGY": ""}))),
            Denied("rule 24"),
        ),
        create(
            "UpgradeStrategy: progressive",
            config(
                Some(NAMESPACE_CONFIG),
                Some(json!({"UpgradeStrategy": "progressive"})),
            ),
            Allowed,
        ),
        create(
            "UpgradeStrategy: drain",
            config(
                Some(NAMESPACE_CONFIG),
                Some(json!({"UpgradeStrategy": "drain"})),
            ),
            Denied("rule 23"),
        ),
        create(
            "upgradeStrategy pause-and-drain and upgradestrategy empty",
            config(
                Some(NAMESPACE_CONFIG),
                Some(json!({"upgradeStrategy": "pause-and-drain", "upgradestrategy": ""})),
            ),
            Denied("rule 23"),
        ),
        create(
            "three keys that read as progressive",
            config(
                Some(NAMESPACE_CONFIG),
                Some(
                    json!({"UPGRADESTRATEGY": "x", "upgradeStrategy": "no-strategy", "upgradestrategy": "progressive"}),
                ),
            ),
            Denied("rule 23"),
        ),
        update(
            "upgradestrategy no-strategy patched into pause-and-drain",
            strategy("pause-and-drain"),
            config(
                Some(NAMESPACE_CONFIG),
                Some(
                    json!({"upgradeStrategy": "pause-and-drain", "other": "kept", "upgradestrategy": "no-strategy"}),
                ),
            ),
            Denied("rule 23"),
        ),
        update(
            "two keys kept as they were",
            config(
                Some(NAMESPACE_CONFIG),
                Some(json!({"upgradeStrategy": "", "upgradestrategy": "progressive"})),
            ),
            config(
                Some(NAMESPACE_CONFIG),
                Some(json!({"upgradeStrategy": "", "upgradestrategy": "progressive", "note": "x"})),
            ),
            Allowed,
        ),
        update(
            "two keys, the one read changed to empty",
            config(
                Some(NAMESPACE_CONFIG),
                Some(json!({"upgradeStrategy": "", "upgradestrategy": "progressive"})),
            ),
            config(
                Some(NAMESPACE_CONFIG),
                Some(json!({"upgradeStrategy": "", "upgradestrategy": ""})),
            ),
            Denied("rule 23"),
        ),
        update(
            "from two keys to one no-strategy, which the old one read",
            config(
                Some(NAMESPACE_CONFIG),
                Some(json!({"UPGRADESTRATEGY": "progressive", "upgradeStrategy": "no-strategy"})),
            ),
            strategy("no-strategy"),
            Allowed,
        ),
        update(
            "from two keys to one no-strategy, which the old one did not read",
            config(
                Some(NAMESPACE_CONFIG),
                Some(json!({"upgradeStrategy": "progressive", "UPGRADESTRATEGY": "no-strategy"})),
            ),
            strategy("no-strategy"),
            Denied("rule 24"),
        ),
        update(
            "an invalid value, its key's case changed",
            config(
                Some(NAMESPACE_CONFIG),
                Some(json!({"UpgradeStrategy": "drain"})),
            ),
            strategy("drain"),
            Denied("rule 23"),
        ),
        case(
            "CREATE no-strategy, a dry run",
            Request::create(CONFIGMAPS, strategy("no-strategy")).dry_run(),
            Denied("rule 24"),
        ),
    ]
}

/// `no-strategy` written by each of `who`, expecting `expect`.
fn writers(who: &[(&str, &str, &[&str])], expect: Expect) -> Vec<Case> {
    who.iter()
        .flat_map(|(name, user, groups)| {
            [
                case(
                    format!("CREATE no-strategy by {name}"),
                    Request::create(CONFIGMAPS, strategy("no-strategy")).by(user, groups),
                    expect,
                ),
                case(
                    format!("UPDATE progressive to empty by {name}"),
                    Request::update(CONFIGMAPS, strategy("progressive"), strategy(""))
                        .by(user, groups),
                    expect,
                ),
            ]
        })
        .collect()
}

#[test]
fn the_namespace_strategy_decides_as_the_webhook_does() {
    let mut all = cases();
    // namespaceStrategy's lists are forceReapply's where the policy leaves
    // them out: Argo CD's server and system:masters.
    let (admin, argocd) = (users::admin(), users::argocd_server());
    all.extend(writers(
        &[
            (
                "admin (system:masters)",
                users::username(&admin),
                &users::groups(&admin),
            ),
            (
                "Argo CD's server",
                users::username(&argocd),
                &users::groups(&argocd),
            ),
        ],
        Allowed,
    ));
    let carol = users::carol();
    all.extend(writers(
        &[(
            "carol (sre)",
            users::username(&carol),
            &users::groups(&carol),
        )],
        Denied("rule 24"),
    ));
    let summary = run("built-in", &Policy::built_in(), &all);
    assert!(summary.denied >= 15, "{summary:?}");
}

#[test]
fn namespace_strategy_grants_by_its_own_lists() {
    let policy = Policy::from_yaml(
        "forceReapply:\n  namespaceStrategy:\n    users: [bob]\n    groups: [platform]\n",
    )
    .expect("valid");
    let mut all = writers(
        &[
            ("bob, in its users", "bob", &["system:authenticated"]),
            (
                "dana, in its group platform",
                "dana",
                &["platform", "system:authenticated"],
            ),
        ],
        Allowed,
    );
    all.extend(writers(
        &[
            (
                "admin, in forceReapply's groups only",
                "admin",
                &["system:masters"],
            ),
            ("alice", "alice", &["devs"]),
        ],
        Denied("rule 24"),
    ));
    // The permission does not make an invalid value valid.
    all.push(case(
        "CREATE drain by bob",
        Request::create(CONFIGMAPS, strategy("drain")).by("bob", &[]),
        Denied("rule 23"),
    ));
    run("namespaceStrategy lists", &policy, &all);
}

/// Rule 27: Numaflow controller definitions outside Numaplane's namespace.
#[test]
fn controller_definitions_decide_as_the_webhook_does() {
    let data = json!({"controller_definitions.yaml": "controllerDefinitions: []\n"});
    let definitions = || config(Some(CONTROLLER_DEFINITIONS), Some(data.clone()));
    let unlabelled = || config(None, Some(data.clone()));
    let admin = users::admin();
    let numaplane = "system:serviceaccount:numaplane-system:numaplane-sa";
    let all = vec![
        create("definitions by alice", definitions(), Denied("rule 27")),
        update(
            "the label added",
            unlabelled(),
            definitions(),
            Denied("rule 27"),
        ),
        update(
            "definitions changed",
            definitions(),
            {
                let mut changed = definitions();
                changed["data"]["controller_definitions.yaml"] = json!("x: 1\n");
                changed
            },
            Denied("rule 27"),
        ),
        update("the label removed", definitions(), unlabelled(), Allowed),
        case(
            "CREATE definitions by admin (system:masters)",
            Request::create(CONFIGMAPS, definitions())
                .by(users::username(&admin), &users::groups(&admin)),
            Allowed,
        ),
        case(
            "CREATE definitions in numaplane-system",
            Request::create(CONFIGMAPS, definitions()).in_namespace("numaplane-system"),
            Allowed,
        ),
        case(
            "CREATE definitions by Numaplane's controller",
            Request::create(CONFIGMAPS, definitions()).by(numaplane, &["system:serviceaccounts"]),
            Allowed,
        ),
    ];
    let summary = run("controller definitions", &Policy::built_in(), &all);
    assert!(summary.denied >= 3, "{summary:?}");
    let warn = Policy::from_yaml("mode: warn\n").expect("valid");
    run("controller definitions, warn mode", &warn, &all);
}

#[test]
fn warn_mode_warns_where_enforce_denies() {
    let policy = Policy::from_yaml("mode: warn\n").expect("valid");
    let summary = run("warn mode", &policy, &cases());
    assert!(summary.denied >= 10, "{summary:?}");
}
