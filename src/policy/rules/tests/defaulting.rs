//! `/mutate`: a missing drain timeout is filled in with the scope's
//! default, by a patch that changes nothing else; a present one, even an
//! invalid one, is left alone.

use json_patch::PatchOperation;
use serde_json::{Value, json};
use test_builders::rollout::TIMEOUT_PATH;
use test_builders::{PipelineRolloutDoc, set_field};

use super::fixtures::{NOW, alice, built_in, overrides, parse, policy};
use super::runner::{Mismatches, Named, run_table};
use super::validate_case::{check_warnings_short, create, run};
use crate::policy::Policy;
use crate::policy::rules::{GuardedWrite, Operation, Origin, Verdict, mutate};
use crate::rollout::{LifecycleKey, TimeoutSlot};

/// One `/mutate` case.
pub(super) struct MutateCase {
    pub(super) name: String,
    policy: Policy,
    op: Operation,
    ns: &'static str,
    object: Value,
    /// The timeout the patch must write; `None`: no patch.
    want: Option<u64>,
    /// Substring of the one expected warning; `None`: no warning.
    warn: Option<&'static str>,
}

impl Named for MutateCase {
    fn name(&self) -> &str {
        &self.name
    }
}

/// Runs `/mutate` on a case (by alice; an UPDATE leaves the object as stored).
pub(super) fn run_mutate(case: &MutateCase) -> Verdict {
    let object = parse(&case.object);
    let user = alice();
    let write = GuardedWrite {
        kind: crate::kinds::Kind::PipelineRollout,
        operation: case.op,
        namespace: case.ns,
        user: &user,
        object: &object,
        old_object: match case.op {
            Operation::Update => Some(&object),
            Operation::Create | Operation::Delete => None,
        },
        now: NOW,
        origin: Origin::Request,
    };
    mutate(&case.policy, &write)
}

/// A scope for the mutate table: label, policy, namespace, expected default.
type MutateScope = (&'static str, fn() -> Policy, &'static str, u64);

/// Every way T can be missing, in every scope; present values of every
/// type; and the shapes too malformed to patch.
pub(super) fn mutate_cases() -> Vec<MutateCase> {
    let meta = || json!({"name": "p", "namespace": "ns", "labels": {"team": "a"}});
    let pipeline_spec = || {
        json!({
            "vertices": [{"name": "in", "source": {"generator": {}}}],
            "edges": [],
            "watermark": {"disabled": true}
        })
    };
    let strategy = || json!({"recycleStrategy": {"scaleFactor": 50}});
    let wrap = |spec: Value| {
        json!({
            "apiVersion": "numaplane.numaproj.io/v1alpha1",
            "kind": "PipelineRollout",
            "metadata": meta(),
            "spec": spec,
            "status": {"phase": "Deployed"}
        })
    };
    let with_pipeline_spec = |ps: Value| {
        wrap(
            json!({"strategy": strategy(), "pipeline": {"metadata": {"labels": {"x": "y"}}, "spec": ps}}),
        )
    };
    let with_lifecycle = |lc: Value| {
        let mut ps = pipeline_spec();
        set_field(&mut ps, &["lifecycle"], lc);
        with_pipeline_spec(ps)
    };
    let missing: Vec<(&str, Value)> = vec![
        (
            "no spec",
            json!({"apiVersion": "numaplane.numaproj.io/v1alpha1", "kind": "PipelineRollout", "metadata": meta()}),
        ),
        ("spec null", wrap(Value::Null)),
        (
            "spec without pipeline",
            wrap(json!({"strategy": strategy()})),
        ),
        (
            "pipeline null",
            wrap(json!({"strategy": strategy(), "pipeline": null})),
        ),
        (
            "no pipeline.spec",
            wrap(json!({"strategy": strategy(), "pipeline": {"metadata": {"labels": {"x": "y"}}}})),
        ),
        ("pipeline.spec null", with_pipeline_spec(Value::Null)),
        ("no lifecycle", with_pipeline_spec(pipeline_spec())),
        ("lifecycle null", with_lifecycle(Value::Null)),
        ("lifecycle empty", with_lifecycle(json!({}))),
        (
            "lifecycle without T",
            with_lifecycle(json!({"desiredPhase": "Running"})),
        ),
        (
            "T null",
            with_lifecycle(json!({"desiredPhase": "Running", "pauseGracePeriodSeconds": null})),
        ),
    ];
    let scopes: Vec<MutateScope> = vec![
        ("built-in", built_in, "default", 31_536_000),
        ("overrides, first match", overrides, "payments-eu", 300),
        ("overrides, exact name", overrides, "ledger", 300),
        ("overrides, second match", overrides, "payroll", 600),
        ("overrides, no match", overrides, "default", 31_536_000),
        (
            "default 45m",
            || policy("drainTimeout:\n  default: 45m\n"),
            "default",
            2700,
        ),
    ];
    let mut cases = Vec::new();
    for (label, object) in &missing {
        for (scope, make, ns, want) in &scopes {
            for op in [Operation::Create, Operation::Update] {
                cases.push(MutateCase {
                    name: format!("{label}, {scope} ({ns}), {op}"),
                    policy: make(),
                    op,
                    ns,
                    object: object.clone(),
                    want: Some(*want),
                    warn: None,
                });
            }
        }
    }
    // A present T is never changed, even an invalid one.
    for (label, value) in [
        ("\"1h\"", json!("1h")),
        ("30", json!(30)),
        ("0", json!(0)),
        ("-5", json!(-5)),
        ("30.5", json!(30.5)),
        ("true", json!(true)),
        ("false", json!(false)),
        ("\"\"", json!("")),
        ("{}", json!({})),
        ("[]", json!([])),
        ("u64::MAX", json!(u64::MAX)),
        ("31536000", json!(31_536_000)),
    ] {
        for (scope, make, ns, _) in &scopes {
            cases.push(MutateCase {
                name: format!("T {label} present, {scope} ({ns})"),
                policy: make(),
                op: Operation::Create,
                ns,
                object: with_lifecycle(json!({"pauseGracePeriodSeconds": value.clone()})),
                want: None,
                warn: None,
            });
        }
    }
    // Too malformed to patch: no patch, one warning.
    for (label, object, path) in [
        ("spec a string", wrap(json!("x")), "spec is a string"),
        (
            "spec.pipeline a string",
            wrap(json!({"pipeline": "oops"})),
            "spec.pipeline is a string",
        ),
        (
            "spec.pipeline.spec a number",
            with_pipeline_spec(json!(7)),
            "spec.pipeline.spec is a number",
        ),
        (
            "lifecycle an array",
            with_lifecycle(json!([1])),
            "spec.pipeline.spec.lifecycle is an array",
        ),
        (
            "lifecycle a string",
            with_lifecycle(json!("x")),
            "spec.pipeline.spec.lifecycle is a string",
        ),
    ] {
        cases.push(MutateCase {
            name: format!("blocked: {label}"),
            policy: built_in(),
            op: Operation::Create,
            ns: "default",
            object,
            want: None,
            warn: Some(path),
        });
    }
    cases
}

#[test]
fn mutate_table() {
    let cases = mutate_cases();
    let mut patched_count = 0;
    run_table("mutate", &cases, |case, m| {
        if check_mutate(case, m) {
            patched_count += 1;
        }
    });
    assert!(patched_count > 0);
}

/// Checks one `/mutate` case; true if it was patched.
fn check_mutate(case: &MutateCase, m: &mut Mismatches) -> bool {
    let d = run_mutate(case);
    m.check(d.denials.is_empty(), || "/mutate denies nothing".to_owned());
    check_warnings_short(&d.warnings, m);
    match case.warn {
        None => m.check(d.warnings.is_empty(), || {
            format!("warnings: {:?}", d.warnings)
        }),
        Some(part) => {
            m.equal("number of warnings", d.warnings.len(), 1);
            let first = d.warnings.first().map_or("", String::as_str);
            m.check(first.contains(part), || {
                format!("warning lacks {part:?}: {first}")
            });
            m.check(first.contains("not an object"), || {
                format!("warning lacks \"not an object\": {first}")
            });
        }
    }
    let deletion = deletion_default(case);
    if case.want.is_none() && deletion.is_none() {
        m.check(d.patch.is_empty(), || {
            format!("unexpected patch {:?}", d.patch)
        });
        m.equal("defaulted", d.defaulted, None);
        m.check(d.audit.is_empty(), || format!("audit: {:?}", d.audit));
        return false;
    }
    let patch = json_patch::Patch(d.patch.clone());
    m.check(!patch.0.is_empty(), || "no patch".to_owned());
    m.equal("defaulted", d.defaulted, case.want);
    for (key, seconds) in [
        ("drain-timeout-default", case.want),
        ("deletion-timeout-default", deletion),
    ] {
        let audit = d.audit.get(key).map(String::as_str);
        match seconds {
            Some(want) => m.check(
                audit.is_some_and(|a| a.starts_with(&format!("{want} ("))),
                || format!("audit {key} {audit:?}"),
            ),
            None => m.equal(key, audit, None),
        }
    }
    let mut patched = case.object.clone();
    if let Err(e) = json_patch::patch(&mut patched, &patch.0) {
        m.check(false, || format!("the patch {patch:?} does not apply: {e}"));
        return false;
    }
    // T (and the deletion timeout) are the namespace's defaults ...
    let mut expected = case.object.clone();
    if let Some(want) = case.want {
        let pointer = format!("/{}", TIMEOUT_PATH.join("/"));
        m.equal("T", patched.pointer(&pointer), Some(&json!(want)));
        set_field(&mut expected, &TIMEOUT_PATH, json!(want));
    }
    if let Some(seconds) = deletion {
        set_field(&mut expected, &DELETION_PATH, json!(seconds));
    }
    // ... and everything else is unchanged.
    m.check(patched == expected, || {
        format!("patch {patch:?} changes more: {patched:#}")
    });
    // Idempotent: the patched object needs no further change.
    let again = run_mutate(&MutateCase {
        name: format!("{}, again", case.name),
        policy: case.policy.clone(),
        op: case.op,
        ns: case.ns,
        object: patched.clone(),
        want: None,
        warn: None,
    });
    m.check(again.patch.is_empty(), || {
        format!("second patch {:?}", again.patch)
    });
    m.check(again.warnings.is_empty(), || {
        format!("second warnings {:?}", again.warnings)
    });
    m.equal("defaulted again", again.defaulted, None);
    // The default passes /validate in the same namespace.
    if case.want.is_none() {
        return true;
    }
    let checked = run(&create(
        &format!("{}, validated", case.name),
        PipelineRolloutDoc::from_json(patched),
    )
    .policy(case.policy.clone())
    .ns(case.ns));
    m.check(checked.allowed(), || {
        format!("the default is denied: {:?}", checked.denial_message())
    });
    true
}

/// Where the deletion timeout lives in a PipelineRollout.
const DELETION_PATH: [&str; 5] = [
    "spec",
    "pipeline",
    "spec",
    "lifecycle",
    "deletionGracePeriodSeconds",
];

/// The deletion timeout `/mutate` must write for a case: the scope's
/// `deletionTimeout.default` when neither deletion field is set and the
/// lifecycle can hold it.
fn deletion_default(case: &MutateCase) -> Option<u64> {
    let object = parse(&case.object);
    let unset = |key| matches!(object.lifecycle_timeout(key), TimeoutSlot::Unset { .. });
    (unset(LifecycleKey::Deletion) && unset(LifecycleKey::DeprecatedDeletion)).then(|| {
        let dt = &case.policy.deletion_timeout;
        dt.default_seconds(dt.scope(case.ns).rules.default)
    })
}

/// A case of [`mutate_patch_paths`]: the object and the path of the one
/// `add` the patch must make.
struct PatchPathCase {
    name: &'static str,
    object: Value,
    path: &'static str,
}

impl Named for PatchPathCase {
    fn name(&self) -> &str {
        self.name
    }
}

/// The patch for a top-level gap creates every object on the way, and the
/// path of a T that is null is the T itself.
#[test]
fn mutate_patch_paths() {
    let case = |name, object, path| PatchPathCase { name, object, path };
    let cases = vec![
        case("no spec", json!({}), "/spec"),
        case("spec null", json!({"spec": null}), "/spec"),
        case("no pipeline", json!({"spec": {}}), "/spec/pipeline"),
        case(
            "no pipeline.spec",
            json!({"spec": {"pipeline": {}}}),
            "/spec/pipeline/spec",
        ),
        case(
            "no lifecycle",
            json!({"spec": {"pipeline": {"spec": {}}}}),
            "/spec/pipeline/spec/lifecycle",
        ),
        case(
            "lifecycle null",
            json!({"spec": {"pipeline": {"spec": {"lifecycle": null}}}}),
            "/spec/pipeline/spec/lifecycle",
        ),
        case(
            "T null",
            json!({"spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": null}}}}}),
            "/spec/pipeline/spec/lifecycle/pauseGracePeriodSeconds",
        ),
    ];
    run_table("mutate patch paths", &cases, |case, m| {
        let d = run_mutate(&MutateCase {
            name: case.name.to_owned(),
            policy: built_in(),
            op: Operation::Create,
            ns: "default",
            object: case.object.clone(),
            want: None,
            warn: None,
        });
        // The pause timeout's add creates the objects on the way; the
        // deletion timeout's then finds the lifecycle in place.
        let paths: Vec<String> = d
            .patch
            .iter()
            .map(|op| match op {
                PatchOperation::Add(add) => add.path.to_string(),
                other => format!("not an add: {other:?}"),
            })
            .collect();
        m.equal(
            "paths",
            paths,
            vec![
                case.path.to_owned(),
                "/spec/pipeline/spec/lifecycle/deletionGracePeriodSeconds".to_owned(),
            ],
        );
    });
}
