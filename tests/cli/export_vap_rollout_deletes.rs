//! Rule 21's exported CEL, evaluated by the `cel` interpreter on the
//! stored objects a PipelineRollout DELETE carries: the warning names the
//! deletion timeout in the webhook's own words, and under
//! `gateRolloutDeletes` the gate allows the system deleters and the
//! permitted users and refuses anyone else, saying why; and the same
//! DELETEs answered by the webhook's `admission::answer` beside it (a
//! differential table). The interpreter has
//! no `authorizer`, so the policies here grant by lists only; the RBAC verb,
//! the real API server's CEL and the binding's `[Warn]` are exercised by
//! tests/apiserver/vap.rs.

use crate::cel_support;

use cel_support::table::{Case, Expect, case, run};
use cel_support::{Request, Resource, judged, policy_named};
use pipelinerollout_webhook::kinds::Kind;
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::rollout::GuardedObject;
use pipelinerollout_webhook::vap::{self, Exported};
use serde_json::{Value, json};

/// What one exported policy says of a DELETE of `stored` by `user`:
/// whether its one validation holds, and its message.
fn judge(exported: &Exported, user: &str, groups: &[&str], stored: &Value) -> (bool, String) {
    let request =
        Request::delete(Resource::of(Kind::PipelineRollout), stored.clone()).by(user, groups);
    let verdicts = judged(exported, &request);
    assert_eq!(verdicts.len(), 1, "one validation");
    (verdicts[0].holds, verdicts[0].message.clone())
}

fn rollout(lifecycle: Value) -> Value {
    json!({"apiVersion": "numaplane.numaproj.io/v1alpha1", "kind": "PipelineRollout",
        "metadata": {"name": "demo", "namespace": "team"},
        "spec": {"pipeline": {"spec": {"lifecycle": lifecycle}}}})
}

#[test]
fn the_warning_names_the_deletion_timeout_in_the_webhooks_words() {
    let export = vap::export(&Policy::built_in(), "p");
    let warnings = policy_named(&export, vap::ROLLOUT_DELETE_WARNINGS_SUFFIX);
    let cases = [
        (
            "no lifecycle",
            json!({"metadata": {"name": "demo"}, "spec": {"pipeline": {}}}),
            "at most 30s (0s with Numaflow's minimal CRDs)",
        ),
        (
            "lifecycle a string",
            rollout(json!("oops")),
            "at most 30s (0s with Numaflow's minimal CRDs)",
        ),
        (
            "600",
            rollout(json!({"deletionGracePeriodSeconds": 600})),
            "at most 600s",
        ),
        (
            "0",
            rollout(json!({"deletionGracePeriodSeconds": 0})),
            "0s, so not drained at all",
        ),
        (
            "-5",
            rollout(json!({"deletionGracePeriodSeconds": -5})),
            "-5s, so not drained at all",
        ),
        (
            "deprecated 120",
            rollout(json!({"deleteGracePeriodSeconds": 120})),
            "at most 120s",
        ),
        (
            "both: deletionGracePeriodSeconds first",
            rollout(json!({"deletionGracePeriodSeconds": 45, "deleteGracePeriodSeconds": 120})),
            "at most 45s",
        ),
        (
            "deletion null",
            rollout(json!({"deletionGracePeriodSeconds": null, "deleteGracePeriodSeconds": 120})),
            "at most 120s",
        ),
        (
            "a string",
            rollout(json!({"deletionGracePeriodSeconds": "600"})),
            "for an unreadable deletion timeout (\"600\")",
        ),
        (
            "a long string, cut at 20 characters",
            rollout(json!({"deletionGracePeriodSeconds": "six hundred seconds, please"})),
            "for an unreadable deletion timeout (\"six hundred seconds)",
        ),
        (
            "a fraction",
            rollout(json!({"deletionGracePeriodSeconds": 600.5})),
            "for an unreadable deletion timeout (600.5)",
        ),
    ];
    for (name, stored, words) in cases {
        let (holds, message) = judge(warnings, "alice", &[], &stored);
        assert!(!holds, "{name}: every DELETE is warned about");
        assert_eq!(
            message,
            format!(
                "its Pipelines are deleted too, each drained {words}, then undrained data is lost"
            ),
            "{name}"
        );
        let view: GuardedObject = serde_json::from_value(stored).expect("a lenient view");
        assert_eq!(
            view.deletion_timeout().to_string(),
            words,
            "{name}: the webhook's words"
        );
    }
}

#[test]
fn under_gate_rollout_deletes_only_the_permitted_delete_a_rollout() {
    let policy = Policy::from_yaml(
        "forceReapply:\n  users: [bob]\n  groups: [sre]\n  deleteUndrained:\n    gateRolloutDeletes: true\n",
    )
    .expect("valid");
    let export = vap::export(&policy, "p");
    let gate = policy_named(&export, vap::ROLLOUT_DELETES_SUFFIX);
    let warnings = policy_named(&export, vap::ROLLOUT_DELETE_WARNINGS_SUFFIX);
    let stored = rollout(json!({"deletionGracePeriodSeconds": 600}));
    let gc = "system:serviceaccount:kube-system:generic-garbage-collector";
    for (who, user, groups, allowed) in [
        ("a user of deleteUndrained", "bob", &[][..], true),
        ("a member of its group", "dana", &["sre"][..], true),
        ("a system deleter", gc, &[][..], true),
        ("anyone else", "alice", &["dev"][..], false),
    ] {
        let (holds, message) = judge(gate, user, groups, &stored);
        assert_eq!(holds, allowed, "{who}: {message}");
        // The warning is given where the delete goes through, not where
        // it is refused (the webhook gives it with allowed requests only).
        let (quiet, _) = judge(warnings, user, groups, &stored);
        assert_eq!(quiet, !allowed, "{who}: warned iff allowed");
        if !allowed {
            assert_eq!(
                message,
                "user \"alice\" may not delete this PipelineRollout: Numaplane then deletes its Pipelines, each drained at most 600s before what was not consumed is dropped, and the webhook's policy (forceReapply.deleteUndrained.gateRolloutDeletes) requires the forceReapply.deleteUndrained permission for it; it is not in forceReapply.deleteUndrained.users and none of its groups is in forceReapply.deleteUndrained.groups; ask a platform admin to add you to forceReapply.deleteUndrained"
            );
        }
    }
    // Warn mode: the gate's binding warns, and the warning is always given.
    let warn = Policy::from_yaml(
        "mode: warn\nforceReapply:\n  deleteUndrained:\n    gateRolloutDeletes: true\n",
    )
    .expect("valid");
    let export = vap::export(&warn, "p");
    let (holds, _) = judge(
        policy_named(&export, vap::ROLLOUT_DELETE_WARNINGS_SUFFIX),
        "alice",
        &[],
        &stored,
    );
    assert!(
        !holds,
        "warn mode warns of the deletion timeout even when the gate would refuse"
    );
    // Not gated: no gate policy.
    let plain = vap::export(&Policy::built_in(), "p");
    assert!(plain.policies.iter().all(|p| {
        !p.policy
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .ends_with(vap::ROLLOUT_DELETES_SUFFIX)
    }));
}

/// A DELETE of a rollout whose lifecycle is `lifecycle`, by alice.
fn delete(name: &str, lifecycle: Value, expect: Expect) -> Case {
    case(
        format!("DELETE {name}"),
        Request::delete(Resource::of(Kind::PipelineRollout), rollout(lifecycle)),
        expect,
    )
}

/// JSON escapes a quote; the warning's CEL writes the string as it is
/// (docs/vap.md).
const ESCAPED: &str =
    "the webhook JSON-escapes a quote in an unreadable timeout, the exported warning does not";

/// Every case of `cases`, expected denied by rule 21's gate.
fn gated(cases: Vec<Case>) -> Vec<Case> {
    cases
        .into_iter()
        .map(|c| Case {
            expect: Expect::Denied("rule 21"),
            ..c
        })
        .collect()
}

/// Rule 21 in both engines: the warning for each way of giving the
/// deletion timeout, and the gate for each deleter, in enforce and warn
/// mode.
#[test]
fn rule_21_warns_and_gates_as_the_webhook_does() {
    let d = |v: Value| json!({"deletionGracePeriodSeconds": v});
    let timeouts = || {
        vec![
            delete("no lifecycle", Value::Null, Expect::Allowed),
            delete("600", d(json!(600)), Expect::Allowed),
            delete("0", d(json!(0)), Expect::Allowed),
            delete("-5", d(json!(-5)), Expect::Allowed),
            delete(
                "deprecated 120",
                json!({"deleteGracePeriodSeconds": 120}),
                Expect::Allowed,
            ),
            delete(
                "both",
                json!({"deletionGracePeriodSeconds": 45, "deleteGracePeriodSeconds": 120}),
                Expect::Allowed,
            ),
            delete("\"600\"", d(json!("600")), Expect::Allowed),
            delete(
                "a long string",
                d(json!("six hundred seconds, please")),
                Expect::Allowed,
            ),
            delete("600.5", d(json!(600.5)), Expect::Allowed),
            delete("a quoted string", d(json!("6\"0")), Expect::Allowed).words_differ(ESCAPED),
        ]
    };
    run("built-in", &Policy::built_in(), &timeouts());

    let gate = Policy::from_yaml(
        "forceReapply:\n  deleteUndrained:\n    users: [bob]\n    groups: [sre]\n    gateRolloutDeletes: true\n",
    )
    .expect("valid");
    let stored = || rollout(d(json!(600)));
    let by = |who: &str, user: &str, groups: &[&str], expect| {
        case(
            format!("DELETE by {who}"),
            Request::delete(Resource::of(Kind::PipelineRollout), stored()).by(user, groups),
            expect,
        )
    };
    let gc = pipelinerollout_webhook::kinds::SYSTEM_DELETERS[0];
    let mut cases = vec![
        by("alice", "alice", &["devs"], Expect::Denied("rule 21")),
        case(
            "DELETE by alice, a dry run",
            Request::delete(Resource::of(Kind::PipelineRollout), stored()).dry_run(),
            Expect::Denied("rule 21"),
        ),
        by("bob, in its users", "bob", &[], Expect::Allowed),
        by("dana, in its group", "dana", &["sre"], Expect::Allowed),
        by("the garbage collector", gc, &[], Expect::Allowed),
    ];
    cases.extend(gated(timeouts()));
    run("gated", &gate, &cases);

    let warn = Policy::from_yaml(
        "mode: warn\nforceReapply:\n  deleteUndrained:\n    gateRolloutDeletes: true\n",
    )
    .expect("valid");
    run("warn mode, gated", &warn, &gated(timeouts()));
}
