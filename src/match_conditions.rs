//! The CEL `matchConditions` of the webhook rules for the children and for
//! MonoVertexRollouts and ISBServiceRollouts, generated from the keys in
//! [`crate::kinds`]: the API server sends a write of one of these only when
//! it sets, changes or removes one of the keys rules 13 to 15 judge, or a
//! child's `pause-timestamp` is set or changed by anyone but Numaflow's
//! controller (rule 19), or an owned child is deleted by anyone but
//! Numaplane's controller and Kubernetes' own deleters (rule 20), or a
//! Pipeline's `spec.lifecycle` drain timeout is set or changed (rules 2 to
//! 4 and 16 to 18); for a rollout, when it turns on
//! `spec.strategy.progressive.forcePromote`. The Numaplane controller
//! writes children constantly: none of its writes reach the webhook but
//! one of `pause-timestamp`, and a condition of its own
//! ([`controller_exempt`]) keeps it off every other webhook. The accounts
//! are the policy's ([`Accounts`]): `cargo xtask generate` writes the
//! expressions, with placeholders for them, into the chart's
//! `files/match-conditions.yaml`, and the chart writes its policy values
//! (or the built-in ones) in their place, also into
//! `manifests/base/webhooks.yaml`.

use crate::kinds::{
    BOOKKEEPING_ANNOTATIONS, BOOKKEEPING_LABELS, FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION,
    NUMAFLOW_CONTROLLER, NUMAPLANE_CONTROLLER, PARENT_ROLLOUT, PAUSE_TIMESTAMP, SYSTEM_DELETERS,
};

/// The kinds whose webhook rule carries a generated matchCondition (a
/// PipelineRollout goes to the webhook on every write: its drain timeout
/// is judged and defaulted).
pub const FILTERED: [Kind; 5] = [
    Kind::Pipeline,
    Kind::MonoVertex,
    Kind::InterStepBufferService,
    Kind::MonoVertexRollout,
    Kind::IsbServiceRollout,
];

/// The labels whose change sends a write to the webhook.
fn label_keys() -> Vec<&'static str> {
    std::iter::once(FORCE_PROMOTE_LABEL)
        .chain(BOOKKEEPING_LABELS)
        .collect()
}

/// The annotations whose change sends a write to the webhook.
fn annotation_keys() -> Vec<&'static str> {
    std::iter::once(MARKED_FOR_DELETION)
        .chain(BOOKKEEPING_ANNOTATIONS)
        .collect()
}

/// `has(o.a) && has(o.a.b) && ...` for every step of `path` below `root`
/// (`metadata` is on every object, so it needs no guard).
fn guard(root: &str, path: &[&str]) -> String {
    let first = usize::from(path.first() == Some(&"metadata")) + 1;
    (first..=path.len())
        .map(|n| format!("has({root}.{})", path[..n].join(".")))
        .collect::<Vec<_>>()
        .join(" && ")
}

/// A CEL list of string literals.
fn list(keys: &[&str]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("'{k}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// Whether key `k` is in the map at `path` of `root`.
fn present(root: &str, path: &[&str]) -> String {
    format!("({} && k in {root}.{})", guard(root, path), path.join("."))
}

/// Key `k` in the map at `path` of `root` as one string: `'='` and its
/// value when present, `''` when absent (so that a value of `''` differs
/// from none).
fn value(root: &str, path: &[&str]) -> String {
    let map = format!("{root}.{}", path.join("."));
    format!(
        "({} && k in {map} ? '=' + {map}[k] : '')",
        guard(root, path)
    )
}

/// Whether a CREATE carries one of `keys` in the map at `path`.
fn created(path: &[&str], keys: &[&str]) -> String {
    format!("{}.exists(k, {})", list(keys), present("object", path))
}

/// Whether an UPDATE sets, changes or removes one of `keys` in the map at `path`.
fn changed(path: &[&str], keys: &[&str]) -> String {
    format!(
        "{}.exists(k, {} != {})",
        list(keys),
        value("object", path),
        value("oldObject", path)
    )
}

/// Whether `forcePromote` is `true` in `root`.
fn force_promote_on(root: &str) -> String {
    let path = ["spec", "strategy", "progressive", "forcePromote"];
    format!(
        "({} && {root}.{} == true)",
        guard(root, &path),
        path.join(".")
    )
}

/// The accounts the expressions name: the policy's
/// `numaplane.controllerAccount`, `numaflow.controllerAccount` and
/// `forceReapply.deleteUndrained.systemDeleters`, whose writes (or
/// deletes) are kept off the webhook, as the rules would allow them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accounts<'a> {
    /// Numaplane's controller (`numaplane.controllerAccount`).
    pub numaplane: &'a str,
    /// Numaflow's controller (`numaflow.controllerAccount`).
    pub numaflow: &'a str,
    /// Kubernetes' own deleters of children
    /// (`forceReapply.deleteUndrained.systemDeleters`).
    pub system_deleters: &'a [&'a str],
}

impl Accounts<'static> {
    /// The built-in policy's accounts.
    pub const BUILT_IN: Self = Self {
        numaplane: NUMAPLANE_CONTROLLER,
        numaflow: NUMAFLOW_CONTROLLER,
        system_deleters: &SYSTEM_DELETERS,
    };

    /// What the chart's copy of the expressions names instead, each
    /// replaced (quoted: [`literal`]) by the policy value of the same name
    /// when the chart renders: a literal `'@numaplane.controllerAccount@'`,
    /// and the list `['@forceReapply.deleteUndrained.systemDeleters@']`
    /// as a whole.
    pub const PLACEHOLDERS: Self = Self {
        numaplane: "@numaplane.controllerAccount@",
        numaflow: "@numaflow.controllerAccount@",
        system_deleters: &["@forceReapply.deleteUndrained.systemDeleters@"],
    };
}

/// `text` as a CEL string literal: single-quoted, with `\` and `'` escaped.
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// The name of the matchCondition that keeps Numaplane's controller off a
/// webhook.
pub const CONTROLLER_CONDITION: &str = "not-numaplane-controller";

/// The matchCondition expression that keeps Numaplane's controller off a
/// webhook: one string comparison per request, so that an unreachable
/// webhook (failurePolicy Fail) never stalls the controller's own writes.
/// The chart puts it on every webhook but the children's, whose
/// expression keeps the controller's writes of `pause-timestamp` (rule 19).
pub fn controller_exempt(accounts: &Accounts<'_>) -> String {
    format!(
        "request.userInfo.username != {}",
        literal(accounts.numaplane)
    )
}

/// Whether a DELETE of a child is one rule 20 judges: the stored object
/// (`oldObject`; `object` is null on DELETE and is never read) carries the
/// parent-rollout-name label, and the deleter is neither Numaplane's
/// controller nor one of Kubernetes' own deleters (their deletes never
/// wait for the webhook).
fn deleted_owned_child(accounts: &Accounts<'_>) -> String {
    let deleters: Vec<String> = accounts
        .system_deleters
        .iter()
        .map(|a| literal(a))
        .collect();
    format!(
        "request.userInfo.username != {} && !(request.userInfo.username in [{}]) && has(oldObject.metadata.labels) && '{PARENT_ROLLOUT}' in oldObject.metadata.labels",
        literal(accounts.numaplane),
        deleters.join(", ")
    )
}

/// Whether a CREATE or UPDATE of a child sets or changes pause-timestamp
/// (rule 19) as anyone but Numaflow's controller (removing it is allowed).
/// Numaplane's controller is judged too: it never writes the annotation.
fn pause_timestamp_written(update: bool, accounts: &Accounts<'_>) -> String {
    let path = ["metadata", "annotations"];
    let new = format!(
        "({} && '{PAUSE_TIMESTAMP}' in object.metadata.annotations)",
        guard("object", &path)
    );
    let written = if update {
        let value = |root: &str| {
            format!(
                "({} && '{PAUSE_TIMESTAMP}' in {root}.metadata.annotations ? '=' + {root}.metadata.annotations['{PAUSE_TIMESTAMP}'] : '')",
                guard(root, &path)
            )
        };
        format!("{new} && {} != {}", value("object"), value("oldObject"))
    } else {
        new
    };
    format!(
        "(request.userInfo.username != {} && {written})",
        literal(accounts.numaflow)
    )
}

/// The drain timeouts of a Pipeline's `spec.lifecycle` that Numaflow reads.
pub const LIFECYCLE_TIMEOUTS: [&str; 3] = [
    "pauseGracePeriodSeconds",
    "deletionGracePeriodSeconds",
    "deleteGracePeriodSeconds",
];

/// Whether a write of a Pipeline carries (CREATE) or changes (UPDATE) one
/// of its lifecycle timeouts (the child's expression leaves Numaplane's
/// controller out). The
/// values are integers (Numaflow's CRD says so), so presence and value are
/// compared apart, and no `null` meets an integer.
fn lifecycle_written(operation_create: bool) -> String {
    let has = |root: &str, key: &str| guard(root, &["spec", "lifecycle", key]);
    let per_key: Vec<String> = LIFECYCLE_TIMEOUTS
        .iter()
        .map(|key| {
            if operation_create {
                format!("({})", has("object", key))
            } else {
                let (new, old) = (has("object", key), has("oldObject", key));
                format!(
                    "(({new}) != ({old}) || (({new}) && object.spec.lifecycle.{key} != oldObject.spec.lifecycle.{key}))"
                )
            }
        })
        .collect();
    format!(
        "(request.resource.resource == 'pipelines' && ({}))",
        per_key.join(" || ")
    )
}

/// The matchCondition expression for writes of `kind`, naming the
/// built-in policy's accounts: true when the write touches what the rules
/// judge. `None` for a PipelineRollout.
pub fn expression(kind: Kind) -> Option<String> {
    expression_for(kind, &Accounts::BUILT_IN)
}

/// [`expression`], naming `accounts`.
pub fn expression_for(kind: Kind, accounts: &Accounts<'_>) -> Option<String> {
    let (labels, annotations): (Vec<&str>, Vec<&str>) = if kind.is_child() {
        (vec!["metadata", "labels"], vec!["metadata", "annotations"])
    } else {
        let template = kind.template()?;
        if kind == Kind::PipelineRollout {
            return None;
        }
        (
            vec!["spec", template, "metadata", "labels"],
            vec!["spec", template, "metadata", "annotations"],
        )
    };
    let (label_keys, annotation_keys) = (label_keys(), annotation_keys());
    let mut on_create = vec![
        created(&labels, &label_keys),
        created(&annotations, &annotation_keys),
    ];
    let mut on_update = vec![
        changed(&labels, &label_keys),
        changed(&annotations, &annotation_keys),
    ];
    if !kind.is_child() {
        on_create.push(force_promote_on("object"));
        on_update.push(format!(
            "({} && !{})",
            force_promote_on("object"),
            force_promote_on("oldObject")
        ));
        // Numaplane's controller is kept off by a condition of its own.
        return Some(format!(
            "request.operation == 'CREATE' ? ({}) : ({})",
            on_create.join(" || "),
            on_update.join(" || ")
        ));
    }
    on_create.push(lifecycle_written(true));
    on_update.push(lifecycle_written(false));
    // Every write of Numaplane's controller is left out but one of
    // pause-timestamp, which rule 19 refuses it too.
    Some(format!(
        "request.operation == 'DELETE' ? ({}) : (request.operation == 'CREATE' ? ({} || (request.userInfo.username != {np} && ({}))) : ({} || (request.userInfo.username != {np} && ({}))))",
        deleted_owned_child(accounts),
        pause_timestamp_written(false, accounts),
        on_create.join(" || "),
        pause_timestamp_written(true, accounts),
        on_update.join(" || "),
        np = literal(accounts.numaplane),
    ))
}

/// The name of the matchCondition on the rule for `kind` (the children
/// share one webhook and one expression).
pub fn name(kind: Kind) -> String {
    if kind.is_child() {
        "children-force-keys".to_owned()
    } else {
        format!("{}-force-keys", kind.resource())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_judged_key_is_in_the_expressions() {
        for kind in FILTERED {
            let text = expression(kind).expect("an expression");
            for key in label_keys().iter().chain(&annotation_keys()) {
                assert!(text.contains(&format!("'{key}'")), "{kind:?}: {key}");
            }
            assert_eq!(text.contains("forcePromote"), !kind.is_child(), "{kind:?}");
            assert_eq!(
                text.contains("deletionGracePeriodSeconds"),
                kind.is_child(),
                "{kind:?}"
            );
        }
        assert_eq!(expression(Kind::PipelineRollout), None);
    }

    #[test]
    fn a_rollouts_expression_reads_its_own_template() {
        let text = expression(Kind::MonoVertexRollout).expect("an expression");
        assert!(
            text.contains("has(object.spec.monoVertex.metadata.labels)"),
            "{text}"
        );
        assert!(!text.contains("interStepBufferService"), "{text}");
    }
}

#[cfg(test)]
mod evaluated {
    //! The expressions evaluated by a CEL interpreter on the shapes the API
    //! server sends (the real API server runs them in
    //! `tests/apiserver_children.rs`).
    use serde_json::{Value, json};

    use super::*;

    fn matches(kind: Kind, operation: &str, object: Value, old: Value) -> bool {
        matches_as(kind, operation, "alice", object, old)
    }

    fn matches_as(kind: Kind, operation: &str, user: &str, object: Value, old: Value) -> bool {
        let text = expression(kind).expect("an expression");
        evaluate(&text, kind, operation, user, (object, old))
    }

    fn evaluate(
        text: &str,
        kind: Kind,
        operation: &str,
        user: &str,
        (object, old): (Value, Value),
    ) -> bool {
        let program = cel::Program::compile(text).expect("compiles");
        let mut context = cel::Context::default();
        let value = |v: Value| cel::to_value(v).expect("a CEL value");
        context.add_variable_from_value("object", value(object));
        context.add_variable_from_value("oldObject", value(old));
        context.add_variable_from_value(
            "request",
            value(json!({"operation": operation,
                "resource": {"resource": kind.resource()},
                "userInfo": {"username": user}})),
        );
        match program.execute(&context).expect("evaluates") {
            cel::Value::Bool(b) => b,
            other => panic!("not a bool: {other:?}"),
        }
    }

    fn child(labels: Value, annotations: Value) -> Value {
        json!({"metadata": {"name": "p", "labels": labels, "annotations": annotations}, "spec": {}})
    }

    #[test]
    fn a_child_write_is_sent_only_when_a_judged_key_changes() {
        let state = json!({UPGRADE: "promoted"});
        let base = child(state.clone(), json!({}));
        let cases = [
            (
                "an ordinary label",
                child(json!({UPGRADE: "promoted", "app": "x"}), json!({})),
                false,
            ),
            (
                "the spec",
                {
                    let mut o = base.clone();
                    o["spec"] = json!({"lifecycle": {"desiredPhase": "Paused"}});
                    o
                },
                false,
            ),
            (
                "force-promote added",
                child(
                    json!({UPGRADE: "promoted", FORCE_PROMOTE_LABEL: "true"}),
                    json!({}),
                ),
                true,
            ),
            (
                "force-promote added empty",
                child(
                    json!({UPGRADE: "promoted", FORCE_PROMOTE_LABEL: ""}),
                    json!({}),
                ),
                true,
            ),
            (
                "upgrade-state changed",
                child(json!({UPGRADE: "recyclable"}), json!({})),
                true,
            ),
            ("upgrade-state removed", child(json!({}), json!({})), true),
            (
                "marked-for-deletion",
                child(state.clone(), json!({MARKED_FOR_DELETION: "true"})),
                true,
            ),
            (
                "no labels at all",
                json!({"metadata": {"name": "p"}, "spec": {}}),
                true,
            ),
        ];
        for (name, object, want) in cases {
            assert_eq!(
                matches(Kind::Pipeline, "UPDATE", object, base.clone()),
                want,
                "{name}"
            );
        }
        assert!(!matches(
            Kind::Pipeline,
            "CREATE",
            child(json!({"app": "x"}), json!({})),
            Value::Null
        ));
        assert!(matches(
            Kind::MonoVertex,
            "CREATE",
            child(state, json!({})),
            Value::Null
        ));
        let bare = json!({"metadata": {"name": "p"}, "spec": {}});
        assert!(!matches(Kind::Pipeline, "UPDATE", bare.clone(), bare));
    }

    #[test]
    fn a_pipeline_lifecycle_write_is_sent_unless_the_controller_makes_it() {
        let state = json!({UPGRADE: "promoted"});
        let with = |lifecycle: Value| {
            let mut o = child(state.clone(), json!({}));
            o["spec"] = json!({"lifecycle": lifecycle});
            o
        };
        let crd = || json!({"pauseGracePeriodSeconds": 30, "deletionGracePeriodSeconds": 30, "deleteGracePeriodSeconds": 30, "desiredPhase": "Running"});
        let stored = with(crd());
        let edit = |key: &str, v: Value| {
            let mut l = crd();
            l[key] = v;
            with(l)
        };
        let cases = [
            (
                "pause changed",
                edit("pauseGracePeriodSeconds", json!(0)),
                true,
            ),
            (
                "deletion changed",
                edit("deletionGracePeriodSeconds", json!(0)),
                true,
            ),
            (
                "deprecated changed",
                edit("deleteGracePeriodSeconds", json!(5)),
                true,
            ),
            (
                "desiredPhase only",
                edit("desiredPhase", json!("Paused")),
                false,
            ),
            ("no change", stored.clone(), false),
            (
                "pause removed",
                with(json!({"deletionGracePeriodSeconds": 30, "deleteGracePeriodSeconds": 30})),
                true,
            ),
        ];
        for (name, object, want) in cases {
            assert_eq!(
                matches(Kind::Pipeline, "UPDATE", object.clone(), stored.clone()),
                want,
                "{name}"
            );
            assert!(
                !matches_as(
                    Kind::Pipeline,
                    "UPDATE",
                    NUMAPLANE_CONTROLLER,
                    object,
                    stored.clone()
                ),
                "{name}, by the controller"
            );
        }
        // A MonoVertex's lifecycle is not sent.
        assert!(!matches(
            Kind::MonoVertex,
            "UPDATE",
            edit("pauseGracePeriodSeconds", json!(0)),
            stored.clone()
        ));
        // A CREATE by a user carries the CRD's defaults: sent; by the
        // controller: not (with no Numaplane key on it).
        let plain = json!({"metadata": {"name": "p"}, "spec": {"lifecycle": crd()}});
        assert!(matches(
            Kind::Pipeline,
            "CREATE",
            plain.clone(),
            Value::Null
        ));
        assert!(!matches_as(
            Kind::Pipeline,
            "CREATE",
            NUMAPLANE_CONTROLLER,
            plain,
            Value::Null
        ));
        let bare = json!({"metadata": {"name": "p"}, "spec": {}});
        assert!(!matches(Kind::Pipeline, "CREATE", bare, Value::Null));
    }

    #[test]
    fn a_rollout_write_is_sent_for_its_template_and_force_promote() {
        let rollout = |labels: Value, force: bool| {
            json!({"metadata": {"name": "r"}, "spec": {
                "strategy": {"progressive": {"forcePromote": force}},
                "interStepBufferService": {"metadata": {"labels": labels}, "spec": {}}}})
        };
        let kind = Kind::IsbServiceRollout;
        let base = rollout(json!({}), false);
        assert!(!matches(
            kind,
            "UPDATE",
            rollout(json!({"app": "x"}), false),
            base.clone()
        ));
        assert!(matches(
            kind,
            "UPDATE",
            rollout(json!({FORCE_PROMOTE_LABEL: "true"}), false),
            base.clone()
        ));
        assert!(matches(
            kind,
            "UPDATE",
            rollout(json!({}), true),
            base.clone()
        ));
        assert!(!matches(
            kind,
            "UPDATE",
            rollout(json!({}), true),
            rollout(json!({}), true)
        ));
        assert!(!matches(
            kind,
            "UPDATE",
            rollout(json!({}), false),
            rollout(json!({}), true)
        ));
        assert!(matches(
            kind,
            "CREATE",
            rollout(json!({}), true),
            Value::Null
        ));
        assert!(!matches(
            kind,
            "CREATE",
            json!({"metadata": {"name": "r"}, "spec": {}}),
            Value::Null
        ));
    }

    #[test]
    fn a_child_delete_is_sent_when_owned_and_not_by_a_system_deleter() {
        let owned = child(json!({PARENT_ROLLOUT: "demo"}), json!({}));
        let cases = [
            (
                "a user deletes an owned child",
                "alice",
                owned.clone(),
                true,
            ),
            (
                "Numaplane's controller",
                NUMAPLANE_CONTROLLER,
                owned.clone(),
                false,
            ),
            (
                "the garbage collector",
                SYSTEM_DELETERS[0],
                owned.clone(),
                false,
            ),
            (
                "the namespace controller",
                SYSTEM_DELETERS[1],
                owned.clone(),
                false,
            ),
            (
                "Numaflow's controller",
                NUMAFLOW_CONTROLLER,
                owned.clone(),
                true,
            ),
            (
                "a child no rollout owns",
                "alice",
                child(json!({"app": "x"}), json!({})),
                false,
            ),
            (
                "no labels",
                "alice",
                json!({"metadata": {"name": "p"}}),
                false,
            ),
        ];
        for kind in [
            Kind::Pipeline,
            Kind::MonoVertex,
            Kind::InterStepBufferService,
        ] {
            for (name, user, old, want) in &cases {
                // On DELETE the API server sends `object: null`.
                assert_eq!(
                    matches_as(kind, "DELETE", user, Value::Null, old.clone()),
                    *want,
                    "{kind:?}: {name}"
                );
            }
        }
    }

    #[test]
    fn a_pause_timestamp_write_is_sent_unless_numaflow_writes_it() {
        let at = |t: &str| child(json!({UPGRADE: "promoted"}), json!({PAUSE_TIMESTAMP: t}));
        let none = child(json!({UPGRADE: "promoted"}), json!({}));
        let t0 = "2026-01-01T00:00:00Z";
        let t1 = "2025-01-01T00:00:00Z";
        let cases = [
            ("a user sets it", "alice", at(t0), none.clone(), true),
            ("a user backdates it", "alice", at(t1), at(t0), true),
            ("a user leaves it", "alice", at(t0), at(t0), false),
            ("a user removes it", "alice", none.clone(), at(t0), false),
            (
                "Numaflow sets it",
                NUMAFLOW_CONTROLLER,
                at(t0),
                none.clone(),
                false,
            ),
            (
                "Numaflow removes it",
                NUMAFLOW_CONTROLLER,
                none.clone(),
                at(t0),
                false,
            ),
            (
                "Numaplane changes it",
                NUMAPLANE_CONTROLLER,
                at(t1),
                at(t0),
                true,
            ),
        ];
        for (name, user, new, old, want) in cases {
            assert_eq!(
                matches_as(Kind::Pipeline, "UPDATE", user, new, old),
                want,
                "{name}"
            );
        }
        let plain = child(json!({"app": "x"}), json!({PAUSE_TIMESTAMP: t0}));
        assert!(matches_as(
            Kind::Pipeline,
            "CREATE",
            "alice",
            plain.clone(),
            Value::Null
        ));
        assert!(!matches_as(
            Kind::Pipeline,
            "CREATE",
            NUMAFLOW_CONTROLLER,
            plain,
            Value::Null
        ));
    }

    #[test]
    fn the_policys_accounts_are_the_ones_kept_off() {
        let (numaplane, numaflow) = (
            "system:serviceaccount:numaplane:numaplane-controller-manager",
            "system:serviceaccount:numaflow:numaflow-controller",
        );
        let deleters = ["system:serviceaccount:ops:o'brien\\gc"];
        let accounts = Accounts {
            numaplane,
            numaflow,
            system_deleters: &deleters,
        };
        let text = expression_for(Kind::Pipeline, &accounts).expect("an expression");
        let promoted = child(json!({UPGRADE: "promoted"}), json!({}));
        let recyclable = child(json!({UPGRADE: "recyclable"}), json!({}));
        let owned = child(json!({PARENT_ROLLOUT: "demo"}), json!({}));
        let stamped = child(
            json!({UPGRADE: "promoted"}),
            json!({PAUSE_TIMESTAMP: "2026-01-01T00:00:00Z"}),
        );
        let relabel = || (recyclable.clone(), promoted.clone());
        let cases = [
            (
                "the policy's Numaplane relabels",
                numaplane,
                "UPDATE",
                relabel(),
                false,
            ),
            (
                "the built-in Numaplane relabels",
                NUMAPLANE_CONTROLLER,
                "UPDATE",
                relabel(),
                true,
            ),
            ("alice relabels", "alice", "UPDATE", relabel(), true),
            (
                "the policy's Numaplane stamps",
                numaplane,
                "UPDATE",
                (stamped.clone(), promoted.clone()),
                true,
            ),
            (
                "the policy's Numaflow stamps",
                numaflow,
                "UPDATE",
                (stamped.clone(), promoted.clone()),
                false,
            ),
            (
                "the built-in Numaflow stamps",
                NUMAFLOW_CONTROLLER,
                "UPDATE",
                (stamped, promoted.clone()),
                true,
            ),
            (
                "the policy's deleter deletes",
                deleters[0],
                "DELETE",
                (Value::Null, owned.clone()),
                false,
            ),
            (
                "the policy's Numaplane deletes",
                numaplane,
                "DELETE",
                (Value::Null, owned.clone()),
                false,
            ),
            (
                "the built-in garbage collector deletes",
                SYSTEM_DELETERS[0],
                "DELETE",
                (Value::Null, owned),
                true,
            ),
        ];
        for (name, user, operation, objects, want) in cases {
            assert_eq!(
                evaluate(&text, Kind::Pipeline, operation, user, objects),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn the_controllers_own_condition_leaves_only_it_out() {
        let accounts = Accounts {
            numaplane: "system:serviceaccount:numaplane:numaplane-controller-manager",
            ..Accounts::BUILT_IN
        };
        let text = controller_exempt(&accounts);
        let sent = |user: &str| {
            evaluate(
                &text,
                Kind::MonoVertexRollout,
                "UPDATE",
                user,
                (json!({}), json!({})),
            )
        };
        assert!(!sent(accounts.numaplane));
        assert!(sent(NUMAPLANE_CONTROLLER));
        assert!(sent("alice"));
        assert_eq!(literal("a'b\\c"), "'a\\'b\\\\c'");
    }

    const UPGRADE: &str = crate::kinds::UPGRADE_STATE;
}
