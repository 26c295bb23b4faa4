//! The one-shot forcePromote (`forcePromote.oneShot`): `/mutate` records the
//! upgrade a forcePromote is for, and resets it once that upgrade is over.

use serde_json::{Value, json};

use super::fixtures::{built_in, mutated, pipeline_rollout, policy};
use super::runner::{Mismatches, Named, run_table};
use crate::policy::Policy;
use crate::policy::rules::EventReason;
use crate::policy::rules::force_promote_reset::RESET_WARNING;
use crate::rollout::FORCE_PROMOTE_FOR;

/// What `/mutate` should do.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// No patch.
    Nothing,
    /// Adds the record with this value.
    Records(&'static str),
    /// Turns forcePromote off and drops the record.
    Resets,
    /// Drops a record whose forcePromote is gone.
    DropsRecord,
}

struct ResetCase {
    name: &'static str,
    policy: Policy,
    old: Option<Value>,
    new: Value,
    expect: Expect,
}

impl Named for ResetCase {
    fn name(&self) -> &str {
        self.name
    }
}

/// The stored status of a progressive upgrade of child `child`.
fn progressive(in_progress: bool, child: &str) -> Value {
    json!({
        "upgradeInProgress": if in_progress { "Progressive" } else { "" },
        "progressiveStatus": {"upgradingPipelineStatus": {"name": child}},
    })
}

/// A rollout with forcePromote `on`, the record `record` and `status`.
fn rollout(on: bool, record: Option<&str>, status: Option<Value>) -> Value {
    let mut doc = pipeline_rollout()
        .with_timeout(600)
        .with_deletion_timeout(30)
        .with_force_promote(on);
    if let Some(record) = record {
        doc = doc.with_field(&["metadata", "annotations", FORCE_PROMOTE_FOR], record);
    }
    if let Some(status) = status {
        doc = doc.with_status(status);
    }
    doc.into_json()
}

fn cases() -> Vec<ResetCase> {
    use Expect::*;
    let on = || policy("forcePromote:\n  oneShot: true\n");
    let case = |name, old, new, expect| ResetCase {
        name,
        policy: on(),
        old,
        new,
        expect,
    };
    let during = |child| Some(progressive(true, child));
    let after = |child| Some(progressive(false, child));
    vec![
        case(
            "turned on during the upgrade of p-1",
            Some(rollout(false, None, during("p-1"))),
            rollout(true, None, during("p-1")),
            Records("upgrade:p-1"),
        ),
        case(
            "turned on after the upgrade of p-1",
            Some(rollout(false, None, after("p-1"))),
            rollout(true, None, after("p-1")),
            Records("after:p-1"),
        ),
        case(
            "turned on before any upgrade",
            Some(rollout(false, None, None)),
            rollout(true, None, None),
            Records("after:"),
        ),
        case(
            "created with forcePromote",
            None,
            rollout(true, None, None),
            Records("after:"),
        ),
        case(
            "created with forcePromote and no annotations at all",
            None,
            {
                let mut doc = rollout(true, None, None);
                if let Some(meta) = doc["metadata"].as_object_mut() {
                    meta.remove("annotations");
                }
                doc
            },
            Records("after:"),
        ),
        case(
            "kept on, its upgrade still in progress",
            Some(rollout(true, Some("upgrade:p-1"), during("p-1"))),
            rollout(true, Some("upgrade:p-1"), during("p-1")),
            Nothing,
        ),
        case(
            "kept on, its upgrade over",
            Some(rollout(true, Some("upgrade:p-1"), after("p-1"))),
            rollout(true, Some("upgrade:p-1"), after("p-1")),
            Resets,
        ),
        case(
            "kept on, set after p-1, no upgrade since",
            Some(rollout(true, Some("after:p-1"), after("p-1"))),
            rollout(true, Some("after:p-1"), after("p-1")),
            Nothing,
        ),
        case(
            "kept on, set after p-1, the upgrade of p-2 in progress",
            Some(rollout(true, Some("after:p-1"), during("p-2"))),
            rollout(true, Some("after:p-1"), during("p-2")),
            Nothing,
        ),
        case(
            "kept on, set after p-1, the upgrade of p-2 over",
            Some(rollout(true, Some("after:p-1"), after("p-2"))),
            rollout(true, Some("after:p-1"), after("p-2")),
            Resets,
        ),
        case(
            "kept on, set before any upgrade, the upgrade of p-1 over",
            Some(rollout(true, Some("after:"), after("p-1"))),
            rollout(true, Some("after:"), after("p-1")),
            Resets,
        ),
        case(
            "kept on, a stored record it cannot read: replaced by the upgrade now",
            Some(rollout(true, Some("junk"), after("p-2"))),
            rollout(true, Some("junk"), after("p-2")),
            Records("after:p-2"),
        ),
        case(
            "kept on, the write drops the record: put back",
            Some(rollout(true, Some("upgrade:p-1"), during("p-1"))),
            rollout(true, None, during("p-1")),
            Records("upgrade:p-1"),
        ),
        case(
            "turned on, a record left over from before: replaced",
            Some(rollout(false, Some("upgrade:p-0"), after("p-1"))),
            rollout(true, Some("upgrade:p-0"), after("p-1")),
            Records("after:p-1"),
        ),
        case(
            "turned on with a record the write sets: left for /validate to refuse",
            Some(rollout(false, None, after("p-1"))),
            rollout(true, Some("never:"), after("p-1")),
            Nothing,
        ),
        case(
            "kept on, the write changes the record: left for /validate to refuse",
            Some(rollout(true, Some("upgrade:p-1"), during("p-1"))),
            rollout(true, Some("upgrade:p-9"), during("p-1")),
            Nothing,
        ),
        case(
            "turned off, its record left behind",
            Some(rollout(true, Some("upgrade:p-1"), during("p-1"))),
            rollout(false, Some("upgrade:p-1"), during("p-1")),
            DropsRecord,
        ),
        ResetCase {
            policy: built_in(),
            ..case(
                "oneShot off (the built-in policy), its upgrade over",
                Some(rollout(true, Some("upgrade:p-1"), after("p-1"))),
                rollout(true, Some("upgrade:p-1"), after("p-1")),
                Nothing,
            )
        },
    ]
}

fn check(case: &ResetCase, m: &mut Mismatches) {
    let d = mutated(&case.policy, case.old.as_ref(), &case.new);
    let mut patched = case.new.clone();
    if let Err(e) = json_patch::patch(&mut patched, &d.patch) {
        m.check(false, || {
            format!("the patch does not apply: {e}: {:?}", d.patch)
        });
        return;
    }
    let promote = &patched["spec"]["strategy"]["progressive"]["forcePromote"];
    let record = &patched["metadata"]["annotations"][FORCE_PROMOTE_FOR];
    let resets = d
        .events
        .iter()
        .filter(|e| e.reason == EventReason::ForcePromoteReset)
        .count();
    match case.expect {
        Expect::Nothing => m.check(d.patch.is_empty(), || format!("a patch {:?}", d.patch)),
        Expect::Records(want) => {
            m.equal("the record", record, &json!(want));
            m.equal("forcePromote", promote, &json!(true));
        }
        Expect::Resets => {
            m.equal("forcePromote", promote, &json!(false));
            m.equal("the record", record, &Value::Null);
            m.equal(
                "warnings",
                d.warnings.as_slice(),
                &[RESET_WARNING.to_owned()],
            );
            m.check(
                d.audit
                    .get("force-promote-reset")
                    .is_some_and(|a| a.contains("argocd-server")),
                || format!("audit {:?}", d.audit),
            );
        }
        Expect::DropsRecord => {
            m.equal("the record", record, &Value::Null);
            m.equal("forcePromote", promote, &json!(false));
        }
    }
    m.equal(
        "reset Events",
        resets,
        usize::from(case.expect == Expect::Resets),
    );
    for w in &d.warnings {
        m.check(w.chars().count() < 120, || format!("long warning {w}"));
    }
}

#[test]
fn one_shot_force_promote_table() {
    run_table("one-shot forcePromote", &cases(), check);
}
