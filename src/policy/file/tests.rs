//! The policy file: reading it over the built-in values, start-up
//! errors and rendering.

use super::*;
use crate::policy::model::{DefaultTimeout, Mode};

fn problems(yaml: &str) -> String {
    match Policy::from_yaml(yaml) {
        Ok(p) => panic!("expected an error for {yaml:?}, got {p:?}"),
        Err(e) => e.to_string(),
    }
}

/// The keys of `want` (recursively) that `have` lacks.
fn missing(want: &serde_json::Value, have: &serde_json::Value, path: &str) -> Vec<String> {
    let Some(want) = want.as_object() else {
        return Vec::new();
    };
    want.iter()
        .flat_map(|(key, value)| match have.get(key) {
            Some(had) => missing(value, had, &format!("{path}{key}.")),
            None => vec![format!("{path}{key}")],
        })
        .collect()
}

#[test]
fn built_in_text_sets_every_key() {
    // Every key a policy renders whatever it holds (every key whose
    // default is the built-in's) is in the built-in text, and so is every
    // key of forceReapply.rbac in its second document.
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_str_multiple(BUILT_IN_POLICY).expect("built-in parses");
    let keys = serde_json::to_value(Policy::default()).expect("renders");
    assert_eq!(missing(&keys, &docs[0], ""), Vec::<String>::new());
    assert!(
        keys.get("drainTimeout")
            .is_some_and(|d| d.get("max").is_some())
    );
    let rbac = serde_json::to_value(RbacPolicy::default()).expect("renders");
    let optional = &docs[1]["forceReapply"]["rbac"];
    assert_eq!(missing(&rbac, optional, ""), Vec::<String>::new());
    assert!(docs[0]["forceReapply"].get("rbac").is_none(), "RBAC is off");
}

#[test]
fn delete_undrained_defaults_to_the_force_reapply_lists() {
    let p = Policy::built_in();
    let du = &p.force_reapply.delete_undrained;
    assert_eq!(
        (&du.users, &du.groups, &du.rbac),
        (&p.force_reapply.users, &p.force_reapply.groups, &None)
    );
    assert_eq!(
        p.numaplane.controller_account,
        "system:serviceaccount:numaplane-system:numaplane-sa"
    );
    let p = Policy::from_yaml(
        "forceReapply:\n  groups: [sre]\n  rbac: {verb: force-reapply}\n  deleteUndrained: {users: [bob], rbacVerb: delete-undrained}\nnumaplane: {controllerAccount: ctl}\n",
    )
    .expect("valid");
    let du = &p.force_reapply.delete_undrained;
    assert_eq!(du.users.iter().collect::<Vec<_>>(), ["bob"]);
    assert_eq!(du.groups.iter().collect::<Vec<_>>(), ["sre"]);
    let rbac = du.rbac.as_ref().expect("rbac");
    assert_eq!(
        (rbac.verb.as_str(), rbac.timeout_seconds),
        ("delete-undrained", 2)
    );
    assert_eq!(p.numaplane.controller_account, "ctl");
    assert_eq!(Policy::from_yaml(&p.to_yaml()).expect("round trip"), p);
    for (yaml, want) in [
        (
            "forceReapply:\n  deleteUndrained: {rbacVerb: x}\n",
            "rbacVerb is set but forceReapply.rbac is not",
        ),
        ("forceReapply:\n  deleteUndrained: {user: [x]}\n", "user"),
        (
            "numaplane: {controllerAccount: \"\"}\n",
            "numaplane.controllerAccount is empty",
        ),
    ] {
        assert!(problems(yaml).contains(want), "{yaml}: {}", problems(yaml));
    }
}

#[test]
fn durations_in_every_accepted_form() {
    let p = Policy::from_yaml("drainTimeout:\n  min: 45\n  max: 1h30m\n").expect("valid");
    assert_eq!(
        (p.drain_timeout.rules.min, p.drain_timeout.rules.max),
        (45, 5400)
    );
}

#[test]
fn empty_file_is_the_built_in_policy() {
    assert_eq!(Policy::from_yaml("").expect("empty"), Policy::built_in());
    assert_eq!(
        Policy::from_yaml("# nothing\n").expect("comments"),
        Policy::built_in()
    );
}

#[test]
fn json_is_accepted() {
    let p = Policy::from_yaml(r#"{"mode": "warn", "drainTimeout": {"max": "2h"}}"#)
        .expect("json policy");
    assert_eq!(p.mode, Mode::Warn);
    assert_eq!(p.drain_timeout.rules.max, 7200);
}

#[test]
fn start_up_errors_are_precise() {
    let cases = [
        ("mode: strict\n", "strict"),
        ("drainTimeout:\n  maxx: 1h\n", "maxx"),
        ("forceReapply:\n  user: [a]\n", "user"),
        (
            "drainTimeout:\n  min: 2h\n  max: 1h\n",
            "drainTimeout.min (2h) is above drainTimeout.max (1h)",
        ),
        (
            "drainTimeout:\n  noTimeoutSeconds: 3600\n",
            "must be above drainTimeout.max",
        ),
        (
            "drainTimeout:\n  noTimeoutSeconds: 92233721\n",
            "92233721 is above 92233720",
        ),
        (
            "drainTimeout:\n  allowNoTimeout: false\n",
            "default is none (no timeout) but drainTimeout.allowNoTimeout is false",
        ),
        (
            "drainTimeout:\n  default: 10s\n",
            "drainTimeout.default (10) would be denied",
        ),
        (
            "drainTimeout:\n  default: 2h\n",
            "drainTimeout.default (7200) would be denied",
        ),
        ("drainTimeout:\n  min: 0\n", "min must be at least 1s"),
        ("drainTimeout:\n  min: -5\n", "negative"),
        ("drainTimeout:\n  max: soon\n", "\"soon\" is not a duration"),
        (
            "drainTimeout:\n  defaultRecycleScaleFactor: 0\n",
            "from 1 to 100",
        ),
        (
            "drainTimeout:\n  defaultRecycleScaleFactor: 101\n",
            "from 1 to 100",
        ),
        (
            "drainTimeout:\n  namespaces:\n  - match: [pay]\n    allowNoTimeout: false\n",
            "drainTimeout.namespaces[0].default is none",
        ),
        (
            "drainTimeout:\n  namespaces:\n  - match: [pay]\n    maxx: 1h\n",
            "maxx",
        ),
        (
            "drainTimeout:\n  namespaces:\n  - match: []\n    max: 2h\n",
            "match is empty",
        ),
        (
            "drainTimeout:\n  namespaces:\n  - match: [\"Pay_1\"]\n",
            "not a namespace name",
        ),
        (
            "forceReapply:\n  users: [\"\"]\n",
            "forceReapply.users has an empty name",
        ),
        ("mode: [\n", "invalid policy"),
    ];
    for (yaml, want) in cases {
        let got = problems(yaml);
        assert!(got.contains(want), "{yaml:?}: {got:?} lacks {want:?}");
    }
}

#[test]
fn default_seconds_at_or_above_no_timeout_need_allow_no_timeout() {
    let yaml = "drainTimeout:\n  default: 40000000\n  allowNoTimeout: false\n";
    assert!(problems(yaml).contains("no timeout"));
    let ok = Policy::from_yaml("drainTimeout:\n  default: 40000000\n").expect("allowed");
    assert_eq!(
        ok.drain_timeout.rules.default,
        DefaultTimeout::Seconds(40_000_000)
    );
}

#[test]
fn rbac_settings() {
    let p = Policy::from_yaml("forceReapply:\n  rbac: {verb: force-reapply}\n").expect("valid");
    let rbac = p.force_reapply.rbac.clone().expect("rbac");
    assert_eq!(
        (
            rbac.verb.as_str(),
            rbac.cache_ttl_seconds,
            rbac.timeout_seconds
        ),
        ("force-reapply", 10, 2)
    );
    assert_eq!(Policy::from_yaml(&p.to_yaml()).expect("round trip"), p);
    let p = Policy::from_yaml("forceReapply:\n  rbac: {verb: approve, cacheTTL: 0, timeout: 1s}\n")
        .expect("valid");
    assert_eq!(
        p.force_reapply
            .rbac
            .map(|r| (r.cache_ttl_seconds, r.timeout_seconds)),
        Some((0, 1))
    );
    assert!(Policy::built_in().force_reapply.rbac.is_none());
    for (yaml, want) in [
        (
            "forceReapply:\n  rbac: {verb: \"force reapply\"}\n",
            "is not a verb",
        ),
        ("forceReapply:\n  rbac: {timeout: 30s}\n", "from 1s to 10s"),
        ("forceReapply:\n  rbac: {cacheTTL: 1h}\n", "above 5m"),
        ("forceReapply:\n  rbac: {verbs: [x]}\n", "verbs"),
    ] {
        assert!(problems(yaml).contains(want), "{yaml}: {}", problems(yaml));
    }
}

#[test]
fn rendering_round_trips() {
    let p = Policy::from_yaml(
        "mode: warn\ndrainTimeout:\n  default: 5m\n  max: 1h30m\n  namespaces:\n  - match: [\"pay-*\"]\n    allowNoTimeout: false\nforceReapply:\n  users: [a, \"b:c\"]\n",
    )
    .expect("valid");
    let text = p.to_yaml();
    assert_eq!(
        Policy::from_yaml(&text).expect("rendered text parses"),
        p,
        "{text}"
    );
    assert_eq!(
        Policy::from_yaml(&Policy::built_in().to_yaml()).expect("built-in renders"),
        Policy::built_in()
    );
}

#[test]
fn built_in_policy_has_the_documented_values() {
    let p = Policy::built_in();
    assert_eq!(p.mode, Mode::Enforce);
    assert_eq!(p.drain_timeout.rules.default, DefaultTimeout::NoTimeout);
    assert_eq!(p.drain_timeout.no_timeout_seconds, 31_536_000);
    assert!(p.drain_timeout.rules.allow_no_timeout);
    assert_eq!(p.drain_timeout.rules.min, 30);
    assert_eq!(p.drain_timeout.rules.max, 3600);
    assert_eq!(p.drain_timeout.default_recycle_scale_factor, 50);
    assert!(p.drain_timeout.namespaces.is_empty());
    assert!(
        p.force_reapply
            .users
            .contains("system:serviceaccount:argocd:argocd-server")
    );
    assert!(p.force_reapply.groups.contains("system:masters"));
    assert!(p.force_reapply.require_pausing);
    assert!(p.force_reapply.gate_force_promote);
}

#[test]
fn first_matching_override_wins() {
    let p = Policy::from_yaml(
        "drainTimeout:\n  namespaces:\n  - match: [\"pay-*\", ledger]\n    max: 2h\n  - match: [\"*\"]\n    default: 5m\n    allowNoTimeout: false\n",
    )
    .expect("valid policy");
    let scope = p.drain_timeout.scope("pay-eu");
    assert_eq!(scope.matched, Some("pay-*"));
    assert_eq!(scope.rules.max, 7200);
    assert_eq!(scope.rules.min, 30, "keys not given come from above");
    assert_eq!(p.drain_timeout.scope("ledger").rules.max, 7200);
    let other = p.drain_timeout.scope("team-a");
    assert_eq!(other.matched, Some("*"));
    assert_eq!(other.rules.default, DefaultTimeout::Seconds(300));
    assert!(!other.rules.allow_no_timeout);
}

#[test]
fn edit_children_defaults_to_the_delete_undrained_grant() {
    let p = Policy::built_in();
    let ec = &p.force_reapply.edit_children;
    let du = &p.force_reapply.delete_undrained;
    assert_eq!(
        (&ec.users, &ec.groups, &ec.rbac),
        (&du.users, &du.groups, &None)
    );
    let p = Policy::from_yaml(
        "forceReapply:\n  groups: [sre]\n  rbac: {verb: force-reapply}\n  deleteUndrained: {users: [dora], rbacVerb: delete-undrained}\n  editChildren: {groups: [platform]}\n",
    )
    .expect("valid");
    let ec = &p.force_reapply.edit_children;
    assert_eq!(ec.users.iter().collect::<Vec<_>>(), ["dora"]);
    assert_eq!(ec.groups.iter().collect::<Vec<_>>(), ["platform"]);
    assert_eq!(
        ec.rbac.as_ref().map(|r| r.verb.as_str()),
        Some("delete-undrained")
    );
    assert_eq!(ec.grant().key, "forceReapply.editChildren");
    assert_eq!(Policy::from_yaml(&p.to_yaml()).expect("round trip"), p);
    let err =
        Policy::from_yaml("forceReapply:\n  editChildren: {rbacVerb: x}\n").expect_err("no rbac");
    assert!(
        err.to_string()
            .contains("forceReapply.editChildren.rbacVerb is set but forceReapply.rbac is not"),
        "{err}"
    );
}

#[test]
fn namespace_strategy_defaults_to_the_force_reapply_lists() {
    let p = Policy::built_in();
    let ns = &p.force_reapply.namespace_strategy;
    assert_eq!(
        (&ns.users, &ns.groups, &ns.rbac),
        (&p.force_reapply.users, &p.force_reapply.groups, &None)
    );
    let p = Policy::from_yaml(
        "forceReapply:\n  groups: [sre]\n  rbac: {verb: force-reapply}\n  namespaceStrategy: {users: [bob], rbacVerb: namespace-strategy}\n",
    )
    .expect("valid");
    let ns = &p.force_reapply.namespace_strategy;
    assert_eq!(ns.users.iter().collect::<Vec<_>>(), ["bob"]);
    assert_eq!(ns.groups.iter().collect::<Vec<_>>(), ["sre"]);
    assert_eq!(
        ns.rbac.as_ref().map(|r| r.verb.as_str()),
        Some("namespace-strategy")
    );
    assert_eq!(ns.grant().key, "forceReapply.namespaceStrategy");
    assert_eq!(Policy::from_yaml(&p.to_yaml()).expect("round trip"), p);
    for (yaml, want) in [
        (
            "forceReapply:\n  namespaceStrategy: {rbacVerb: x}\n",
            "forceReapply.namespaceStrategy.rbacVerb is set but forceReapply.rbac is not",
        ),
        (
            "forceReapply:\n  rbac: {verb: a}\n  namespaceStrategy: {rbacVerb: \"a b\"}\n",
            "forceReapply.namespaceStrategy.rbacVerb \"a b\" is not a verb",
        ),
        (
            "forceReapply:\n  namespaceStrategy: {groups: [\" \"]}\n",
            "forceReapply.namespaceStrategy.groups has an empty name",
        ),
    ] {
        assert!(problems(yaml).contains(want), "{yaml}: {}", problems(yaml));
    }
}

#[test]
fn the_deleters_the_rollout_gate_and_numaflows_account() {
    let p = Policy::built_in();
    let du = &p.force_reapply.delete_undrained;
    assert_eq!(
        du.own.system_deleters.iter().collect::<Vec<_>>(),
        crate::kinds::SYSTEM_DELETERS
    );
    assert!(!du.own.gate_rollout_deletes);
    assert_eq!(
        p.numaflow.controller_account,
        crate::kinds::NUMAFLOW_CONTROLLER
    );
    let p = Policy::from_yaml(
        "forceReapply:\n  deleteUndrained: {systemDeleters: [gc], gateRolloutDeletes: true}\nnumaflow: {controllerAccount: nf}\n",
    )
    .expect("valid");
    let du = &p.force_reapply.delete_undrained;
    assert_eq!(du.own.system_deleters.iter().collect::<Vec<_>>(), ["gc"]);
    assert!(du.own.gate_rollout_deletes);
    // The lists still default to forceReapply's.
    assert_eq!(du.users, p.force_reapply.users);
    assert_eq!(p.numaflow.controller_account, "nf");
    assert_eq!(Policy::from_yaml(&p.to_yaml()).expect("round trip"), p);
    let yaml = "numaflow: {controllerAccount: \" \"}\n";
    assert!(
        problems(yaml).contains("numaflow.controllerAccount is empty"),
        "{}",
        problems(yaml)
    );
}
