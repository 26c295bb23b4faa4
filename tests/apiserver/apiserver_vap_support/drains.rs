//! The cases of the rules the export carries beyond rules 2 to 8, under the
//! built-in policy: a PipelineRollout's deletion timeout (rules 16 to 18)
//! and pause-timestamp in its template (rule 19); a Pipeline's own
//! lifecycle (as a user and as Numaplane's controller) and pause-timestamp
//! (as a user, Numaplane's and Numaflow's controllers); an owned child's
//! DELETE (rule 20: a user, a dry run, the controller, the garbage
//! collector, a permitted user, an unowned child); Numaplane's
//! namespace-level ConfigMap with each strategy (rules 23 and 24).

use serde_json::{Value, json};
use test_builders::pipeline_rollout;

use super::cases::{
    Account, CONFIGMAPS, Case, ISB_SERVICES, MONOVERTICES, PIPELINES, create, create_of, delete_of,
    update, update_of,
};
use envtest::User;

/// Numaflow's pause-timestamp annotation.
pub(super) const PAUSE_TIMESTAMP: &str = "numaflow.numaproj.io/pause-timestamp";

/// Numaflow's controller.
pub const NUMAFLOW: Account = Account {
    name: "system:serviceaccount:numaflow-system:numaflow-sa",
    groups: &[
        "system:serviceaccounts",
        "system:serviceaccounts:numaflow-system",
        "system:authenticated",
    ],
};

/// Kubernetes' garbage collector (a system deleter).
pub const GARBAGE_COLLECTOR: Account = Account {
    name: "system:serviceaccount:kube-system:generic-garbage-collector",
    groups: &[
        "system:serviceaccounts",
        "system:serviceaccounts:kube-system",
        "system:authenticated",
    ],
};

/// The accounts admin impersonates.
pub const ACCOUNTS: [Account; 2] = [NUMAFLOW, GARBAGE_COLLECTOR];

/// A child of `kind` with `labels`, `annotations` and `spec`.
pub(super) fn child(kind: &str, labels: Value, annotations: Value, spec: Value) -> Value {
    json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": kind,
        "metadata": {"labels": labels, "annotations": annotations}, "spec": spec})
}

/// A Pipeline whose lifecycle sets all three timeouts (Numaflow's CRD
/// defaults each to 30, so the stored object always has them).
pub(super) fn pipeline(pause: Value, deletion: Value, deprecated: Value) -> Value {
    child(
        "Pipeline",
        json!({}),
        json!({}),
        json!({"lifecycle": {"pauseGracePeriodSeconds": pause,
            "deletionGracePeriodSeconds": deletion, "deleteGracePeriodSeconds": deprecated}}),
    )
}

/// `object` with an unrelated label changed.
pub(super) fn edited(mut object: Value) -> Value {
    object["metadata"]["labels"]["app"] = json!("edited");
    object
}

/// `object` with the pause-timestamp `at`.
pub(super) fn stamped(mut object: Value, at: &str) -> Value {
    object["metadata"]["annotations"][PAUSE_TIMESTAMP] = json!(at);
    object
}

/// A ConfigMap, labelled as Numaplane's namespace-level one or not.
pub(super) fn config(labelled: bool, data: Option<Value>) -> Value {
    let mut object =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"app": "x"}}});
    if labelled {
        object["metadata"]["labels"]["numaplane.numaproj.io/config"] =
            json!("namespace-level-config");
    }
    if let Some(data) = data {
        object["data"] = data;
    }
    object
}

/// A ConfigMap (labelled as the namespace-level one or not) whose
/// `upgradeStrategy` is `value`.
pub(super) fn strategy(labelled: bool, value: &str) -> Value {
    config(labelled, Some(json!({"upgradeStrategy": value})))
}

/// Every case of this table, in namespace `ns`.
pub fn built_in(ns: &'static str) -> Vec<Case> {
    let mut cases = rollouts();
    cases.extend(pipelines());
    cases.extend(deletes());
    cases.extend(edits());
    cases.extend(configs());
    cases.into_iter().map(|c| c.ns(ns)).collect()
}

/// Rules 16 to 18 and 19 on PipelineRollouts.
fn rollouts() -> Vec<Case> {
    let deletion = |v: Value| {
        pipeline_rollout()
            .with_timeout(json!(600))
            .with_deletion_timeout(v)
    };
    let deprecated = |v: Value| {
        pipeline_rollout().with_timeout(json!(600)).with_field(
            &[
                "spec",
                "pipeline",
                "spec",
                "lifecycle",
                "deleteGracePeriodSeconds",
            ],
            v,
        )
    };
    let mut cases = Vec::new();
    for v in [
        json!(30),
        json!(29),
        json!(0),
        json!(3600),
        json!(3601),
        json!(31_536_000),
        json!(10_000_000_000_u64),
        json!("1h"),
        json!("six \"hundred\" seconds,\tif you please"),
        json!(30.5),
    ] {
        cases.push(create(
            &format!("deletion timeout {v}"),
            deletion(v.clone()),
        ));
        cases.push(create(
            &format!("deprecated deletion timeout {v}"),
            deprecated(v),
        ));
    }
    cases.push(create(
        "deletion 30 and deprecated 5 (ignored)",
        deletion(json!(30)).with_field(
            &[
                "spec",
                "pipeline",
                "spec",
                "lifecycle",
                "deleteGracePeriodSeconds",
            ],
            json!(5),
        ),
    ));
    cases.push(update(
        "deletion 29 unchanged",
        deletion(json!(29)),
        deletion(json!(29)).with_unrelated_edit(),
    ));
    cases.push(update(
        "deletion 30 -> 29",
        deletion(json!(30)),
        deletion(json!(29)),
    ));
    cases.push(update(
        "deprecated 29 unchanged",
        deprecated(json!(29)),
        deprecated(json!(29)).with_unrelated_edit(),
    ));
    cases.push(update(
        "deprecated 29 -> 5",
        deprecated(json!(29)),
        deprecated(json!(5)),
    ));
    let template = |at: Option<&str>| {
        let doc = pipeline_rollout().with_timeout(json!(600));
        match at {
            Some(at) => doc.with_field(
                &[
                    "spec",
                    "pipeline",
                    "metadata",
                    "annotations",
                    PAUSE_TIMESTAMP,
                ],
                json!(at),
            ),
            None => doc,
        }
    };
    let at = "2026-01-01T00:00:00Z";
    cases.push(create("pause-timestamp in the template", template(Some(at))).by(User::Admin));
    cases.push(update(
        "pause-timestamp added to the template",
        template(None),
        template(Some(at)),
    ));
    cases.push(update(
        "pause-timestamp kept in the template",
        template(Some(at)),
        template(Some(at)).with_unrelated_edit(),
    ));
    cases.push(update(
        "pause-timestamp removed from the template",
        template(Some(at)),
        template(None),
    ));
    cases
}

/// A Pipeline's lifecycle and pause-timestamp.
fn pipelines() -> Vec<Case> {
    let ok = || pipeline(json!(30), json!(30), json!(30));
    let mut cases = vec![create_of(PIPELINES, "Pipeline 30/30/30", ok())];
    for (name, object) in [
        ("pause 29", pipeline(json!(29), json!(30), json!(30))),
        ("pause 3601", pipeline(json!(3601), json!(30), json!(30))),
        (
            "pause no timeout",
            pipeline(json!(31_536_000), json!(30), json!(30)),
        ),
        (
            "pause 10^10",
            pipeline(json!(10_000_000_000_u64), json!(30), json!(30)),
        ),
        ("deletion 29", pipeline(json!(30), json!(29), json!(30))),
        ("deletion 3601", pipeline(json!(30), json!(3601), json!(30))),
        (
            "deletion no timeout",
            pipeline(json!(30), json!(31_536_000), json!(30)),
        ),
        (
            "deletion 10^10",
            pipeline(json!(30), json!(10_000_000_000_u64), json!(30)),
        ),
        (
            "deletion 30, deprecated 5",
            pipeline(json!(30), json!(30), json!(5)),
        ),
    ] {
        cases.push(create_of(
            PIPELINES,
            &format!("Pipeline {name}"),
            object.clone(),
        ));
        cases.push(
            create_of(PIPELINES, &format!("Pipeline {name}"), object).by(User::NumaplaneController),
        );
    }
    cases.push(
        create_of(
            PIPELINES,
            "Pipeline pause \"1h\"",
            pipeline(json!("1h"), json!(30), json!(30)),
        )
        .rejected(),
    );
    let bad = || pipeline(json!(29), json!(5), json!(30));
    cases.push(update_of(
        PIPELINES,
        "Pipeline 29/5 unchanged",
        bad(),
        edited(bad()),
    ));
    for user in [User::Alice, User::NumaplaneController] {
        cases.push(
            update_of(
                PIPELINES,
                "Pipeline deletion 30 -> 5",
                ok(),
                pipeline(json!(30), json!(5), json!(30)),
            )
            .by(user),
        );
        cases.push(
            update_of(
                PIPELINES,
                "Pipeline pause 30 -> 3601",
                ok(),
                pipeline(json!(3601), json!(30), json!(30)),
            )
            .by(user),
        );
    }
    let (t1, t2) = ("2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z");
    cases.push(create_of(
        PIPELINES,
        "Pipeline with pause-timestamp",
        stamped(ok(), t1),
    ));
    for case in [
        update_of(PIPELINES, "pause-timestamp set", ok(), stamped(ok(), t1)),
        update_of(
            PIPELINES,
            "pause-timestamp changed",
            stamped(ok(), t1),
            stamped(ok(), t2),
        ),
    ] {
        cases.push(case.clone());
        cases.push(case.clone().by(User::NumaplaneController));
        cases.push(case.by_account(NUMAFLOW));
    }
    cases.push(update_of(
        PIPELINES,
        "pause-timestamp kept",
        stamped(ok(), t1),
        edited(stamped(ok(), t1)),
    ));
    cases.push(update_of(
        PIPELINES,
        "pause-timestamp removed",
        stamped(ok(), t1),
        ok(),
    ));
    cases
}

/// Rule 20.
fn deletes() -> Vec<Case> {
    let owned = |kind: &str| {
        child(
            kind,
            json!({"numaplane.numaproj.io/parent-rollout-name": "demo"}),
            json!({}),
            json!({}),
        )
    };
    let mut cases = Vec::new();
    for (resource, kind) in [
        (PIPELINES, "Pipeline"),
        (MONOVERTICES, "MonoVertex"),
        (ISB_SERVICES, "InterStepBufferService"),
    ] {
        let case = || delete_of(resource, &format!("owned {kind}"), owned(kind));
        cases.push(case());
        cases.push(case().dry_run());
        cases.push(case().by(User::NumaplaneController));
        cases.push(case().by(User::ArgocdServer));
        cases.push(case().by_account(GARBAGE_COLLECTOR));
    }
    cases.push(delete_of(
        PIPELINES,
        "unowned Pipeline",
        child("Pipeline", json!({}), json!({}), json!({})),
    ));
    cases
}

/// Rule 26: through the main resource, and a forged status through
/// `/status`.
fn edits() -> Vec<Case> {
    let owned = |kind: &str, spec: Value| {
        child(
            kind,
            json!({"numaplane.numaproj.io/parent-rollout-name": "demo", "app": "x"}),
            json!({}),
            spec,
        )
    };
    let with = |mut object: Value, path: &[&str], value: Value| {
        let mut at = &mut object;
        for key in path {
            at = &mut at[*key];
        }
        *at = value;
        object
    };
    let rollout_ref = json!([{"apiVersion": "numaplane.numaproj.io/v1alpha1",
        "kind": "PipelineRollout", "name": "demo", "uid": "00000000-0000-0000-0000-000000000001"}]);
    let config_ref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "c",
        "uid": "00000000-0000-0000-0000-000000000002"}]);
    let mut cases = Vec::new();
    for (resource, kind) in [
        (PIPELINES, "Pipeline"),
        (MONOVERTICES, "MonoVertex"),
        (ISB_SERVICES, "InterStepBufferService"),
    ] {
        let base = || owned(kind, json!({}));
        // Each a merge patch on the stored object, as kubectl patch sends.
        let update = |what: &str, patch: Value| {
            update_of(resource, &format!("owned {kind}: {what}"), base(), patch).on_stored()
        };
        let pointed = || json!({"metadata": {"ownerReferences": config_ref.clone()}});
        let keyed = || json!({"metadata": {"labels": {"numaplane.numaproj.io/note": "x"}}});
        cases.extend([
            update("ownerReferences pointed at a ConfigMap", pointed()),
            update("ownerReferences pointed at a ConfigMap", pointed()).by(User::Admin),
            update("a Numaplane label added", keyed()),
            update("a Numaplane label added", keyed()).by_account(GARBAGE_COLLECTOR),
            update(
                "its own label edited",
                json!({"metadata": {"labels": {"app": "y"}}}),
            ),
            update(
                "status.phase forged",
                json!({"status": {"phase": "Failed"}}),
            )
            .through_status(),
            update(
                "status.phase forged",
                json!({"status": {"phase": "Failed"}}),
            )
            .through_status()
            .by(User::Admin),
            create_of(
                resource,
                &format!("{kind} owned by an ownerReference"),
                with(
                    child(kind, json!({}), json!({}), json!({})),
                    &["metadata", "ownerReferences"],
                    rollout_ref.clone(),
                ),
            ),
        ]);
    }
    for (resource, kind) in [(PIPELINES, "Pipeline"), (MONOVERTICES, "MonoVertex")] {
        let limits = |n: i64| json!({"spec": {"limits": {"readBatchSize": n}}});
        let stored = || owned(kind, json!({"limits": {"readBatchSize": 500}}));
        let phase = |p: &str| owned(kind, json!({"lifecycle": {"desiredPhase": p}}));
        cases.extend([
            update_of(
                resource,
                &format!("owned {kind}: spec.limits changed"),
                stored(),
                limits(100),
            )
            .on_stored(),
            update_of(
                resource,
                &format!("owned {kind}: spec.limits changed"),
                stored(),
                limits(100),
            )
            .on_stored()
            .by(User::NumaplaneController),
            update_of(
                resource,
                &format!("owned {kind}: paused"),
                phase("Running"),
                json!({"spec": {"lifecycle": {"desiredPhase": "Paused"}}}),
            )
            .on_stored(),
        ]);
    }
    let replicas = |n: i64| owned("MonoVertex", json!({"replicas": n}));
    cases.push(
        update_of(
            MONOVERTICES,
            "owned MonoVertex: scaled",
            replicas(1),
            json!({"spec": {"replicas": 3}}),
        )
        .on_stored(),
    );
    cases
}

/// Rules 23 and 24.
fn configs() -> Vec<Case> {
    let mut cases = Vec::new();
    for value in [
        "progressive",
        "pause-and-drain",
        "no-strategy",
        "",
        "  ",
        "fast",
    ] {
        let case = || {
            create_of(
                CONFIGMAPS,
                &format!("upgradeStrategy {value:?}"),
                strategy(true, value),
            )
        };
        cases.push(case());
        cases.push(case().by(User::ArgocdServer));
    }
    cases.push(create_of(
        CONFIGMAPS,
        "no upgradeStrategy",
        config(true, Some(json!({"other": "x"}))),
    ));
    // Keys Numaplane's Go decoder reads as upgradeStrategy.
    for (name, data) in [
        (
            "UpgradeStrategy no-strategy",
            json!({"UpgradeStrategy": "no-strategy"}),
        ),
        ("UPGRADESTRATEGY empty", json!({"UPGRADESTRATEGY": ""})),
        (
            "UpgradeStrategy progressive",
            json!({"UpgradeStrategy": "progressive"}),
        ),
        (
            "upgradeStrategy and upgradestrategy",
            json!({"upgradeStrategy": "pause-and-drain", "upgradestrategy": ""}),
        ),
    ] {
        cases.push(create_of(CONFIGMAPS, name, config(true, Some(data))));
    }
    cases.push(update_of(
        CONFIGMAPS,
        "upgradestrategy added to pause-and-drain",
        strategy(true, "pause-and-drain"),
        config(
            true,
            Some(json!({"upgradeStrategy": "pause-and-drain", "upgradestrategy": "no-strategy"})),
        ),
    ));
    cases.push(update_of(
        CONFIGMAPS,
        "two keys kept",
        config(
            true,
            Some(json!({"upgradeStrategy": "", "upgradestrategy": "progressive"})),
        ),
        edited(config(
            true,
            Some(json!({"upgradeStrategy": "", "upgradestrategy": "progressive"})),
        )),
    ));
    // Rule 27: Numaflow controller definitions outside Numaplane's namespace.
    let definitions = || {
        let mut object = config(
            false,
            Some(json!({"controller_definitions.yaml": "controllerDefinitions: []\n"})),
        );
        object["metadata"]["labels"]["numaplane.numaproj.io/config"] =
            json!("numaflow-controller-definitions");
        object
    };
    let unlabelled = config(
        false,
        Some(json!({"controller_definitions.yaml": "controllerDefinitions: []\n"})),
    );
    cases.push(create_of(
        CONFIGMAPS,
        "controller definitions",
        definitions(),
    ));
    cases.push(create_of(CONFIGMAPS, "controller definitions", definitions()).by(User::Admin));
    cases.push(update_of(
        CONFIGMAPS,
        "the definitions label added",
        unlabelled.clone(),
        definitions(),
    ));
    cases.push(update_of(
        CONFIGMAPS,
        "the definitions label removed",
        definitions(),
        unlabelled,
    ));
    cases.push(create_of(CONFIGMAPS, "no data", config(true, None)));
    cases.push(create_of(
        CONFIGMAPS,
        "unlabelled no-strategy",
        strategy(false, "no-strategy"),
    ));
    cases.push(update_of(
        CONFIGMAPS,
        "no-strategy kept",
        strategy(true, "no-strategy"),
        edited(strategy(true, "no-strategy")),
    ));
    cases.push(update_of(
        CONFIGMAPS,
        "progressive -> no-strategy",
        strategy(true, "progressive"),
        strategy(true, "no-strategy"),
    ));
    cases.push(update_of(
        CONFIGMAPS,
        "no-strategy -> blank",
        strategy(true, "no-strategy"),
        strategy(true, " "),
    ));
    cases.push(update_of(
        CONFIGMAPS,
        "\"fast\" kept",
        strategy(true, "fast"),
        edited(strategy(true, "fast")),
    ));
    cases.push(update_of(
        CONFIGMAPS,
        "\"fast\" -> \"faster\"",
        strategy(true, "fast"),
        strategy(true, "faster"),
    ));
    cases.push(update_of(
        CONFIGMAPS,
        "label added to no-strategy",
        strategy(false, "no-strategy"),
        strategy(true, "no-strategy"),
    ));
    cases.push(update_of(
        CONFIGMAPS,
        "label removed",
        strategy(true, "no-strategy"),
        strategy(false, "no-strategy"),
    ));
    cases
}
