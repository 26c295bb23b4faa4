//! Rules 16 to 18 as exported, evaluated by the `cel` interpreter beside
//! the webhook's own decision (`admission::answer`) on the same request: the
//! deletion timeout of a PipelineRollout's embedded Pipeline and of a child
//! Pipeline's own lifecycle. Each case must get the table's answer from
//! both engines, and an exported denial must be one of the webhook's
//! denials word for word unless the case says why not. The deprecated
//! field, both fields set, no lifecycle, strings, fractions, negatives,
//! overflow, the no-timeout encoding, the range's edges, ratcheting,
//! namespace overrides and warn mode (the bindings `[Warn, Audit]`).
//! The webhook's warnings about the deprecated or ignored field have no
//! exported counterpart (docs/vap.md); they are not compared.

use crate::cel_support;

use cel_support::table::{Case, Expect, case, run};
use cel_support::{Request, Resource};
use pipelinerollout_webhook::kinds::{Kind, NUMAFLOW_CONTROLLER, NUMAPLANE_CONTROLLER};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};
use test_builders::pipeline_rollout;

use Expect::{Allowed, Denied};

const ROLLOUTS: Resource = Resource::of(Kind::PipelineRollout);
const PIPELINES: Resource = Resource::of(Kind::Pipeline);

/// Beyond int64: the API server decodes it as a double, which the export's
/// integer view refuses as "not an integer", while the webhook, reading the
/// JSON, says it overflows Numaflow's clock. Both deny.
const BEYOND_INT64: &str = "beyond int64 the exported policy says \"not an integer\" (a CEL double) and the webhook \"overflows Numaflow's clock\" (docs/vap.md)";

/// CEL cannot write JSON: the export names an array or an object by its
/// kind where the webhook shows the value.
const NO_JSON: &str = "the export shows an array or an object by its kind (CEL cannot write JSON), the webhook as JSON";

/// A PipelineRollout whose embedded lifecycle is `lifecycle`.
fn rollout(lifecycle: Value) -> Value {
    let mut object = pipeline_rollout().with_lifecycle(lifecycle).into_json();
    object["metadata"]["name"] = json!("demo");
    object
}

fn rollout_cases() -> Vec<Case> {
    let create = |name: &str, lifecycle: Value, expect| {
        case(
            format!("rollout CREATE {name}"),
            Request::create(ROLLOUTS, rollout(lifecycle)),
            expect,
        )
    };
    let d = |v: Value| json!({"deletionGracePeriodSeconds": v});
    let dd = |v: Value| json!({"deleteGracePeriodSeconds": v});
    let mut cases = vec![
        create("no lifecycle fields", json!({}), Allowed),
        create("lifecycle null", Value::Null, Allowed),
        create("600", d(json!(600)), Allowed),
        create("30, the minimum", d(json!(30)), Allowed),
        create("3600, the maximum", d(json!(3600)), Allowed),
        create("29", d(json!(29)), Denied("rule 17")),
        create("3601", d(json!(3601)), Denied("rule 17")),
        create("0", d(json!(0)), Denied("rule 17")),
        create("-5", d(json!(-5)), Denied("rule 17")),
        create("null", d(Value::Null), Allowed),
        create("\"600\"", d(json!("600")), Denied("rule 16")),
        create("\"30s\"", d(json!("30s")), Denied("rule 16")),
        create("600.5", d(json!(600.5)), Denied("rule 16")),
        create(
            "a string of 31 characters",
            d(json!("six hundred seconds, if you can")),
            Denied("rule 16"),
        ),
        create(
            "a string of 30 characters, shown whole",
            d(json!("six hundred seconds, if you c.")),
            Denied("rule 16"),
        ),
        create(
            "29 characters, one a quote: 30 escaped, shown whole",
            d(json!("six hundred \"seconds, if you ")),
            Denied("rule 16"),
        ),
        create(
            "29 characters, two quotes: 31 escaped, cut",
            d(json!("six \"hundred\" seconds, if you")),
            Denied("rule 16"),
        ),
        create(
            "a newline and a tab",
            d(json!("6\n0\t0\r")),
            Denied("rule 16"),
        ),
        create(
            "a string with a quote",
            d(json!("6\"00")),
            Denied("rule 16"),
        ),
        create(
            "a string with a backslash",
            d(json!("6\\00")),
            Denied("rule 16"),
        ),
        create(
            "a string with é",
            d(json!("six cents secondes à peu près, é")),
            Denied("rule 16"),
        ),
        create("1e3, a double", d(json!(1e3)), Allowed),
        create("-0.5", d(json!(-0.5)), Denied("rule 16")),
        create("600.0, an integral double", d(json!(600.0)), Allowed),
        create("true", d(json!(true)), Denied("rule 16")),
        create("an array", d(json!([600])), Denied("rule 16")).words_differ(NO_JSON),
        create("an object", d(json!({"s": 600})), Denied("rule 16")).words_differ(NO_JSON),
        create(
            "31536000, no timeout, not allowed",
            d(json!(31_536_000)),
            Denied("rule 17"),
        ),
        create("9223372037", d(json!(9_223_372_037_i64)), Denied("rule 17")),
        create("i64::MAX", d(json!(i64::MAX)), Denied("rule 18")),
        create(
            "2^63",
            d(json!(9_223_372_036_854_775_808_u64)),
            Denied("rule 16"),
        )
        .words_differ(BEYOND_INT64),
        create("deprecated only, 120", dd(json!(120)), Allowed),
        create("deprecated only, 0", dd(json!(0)), Denied("rule 17")),
        create(
            "deprecated only, \"2m\"",
            dd(json!("2m")),
            Denied("rule 16"),
        ),
        create(
            "both: 60 judged, deprecated 0 ignored",
            json!({"deletionGracePeriodSeconds": 60, "deleteGracePeriodSeconds": 0}),
            Allowed,
        ),
        create(
            "both: 0 judged, deprecated 60 ignored",
            json!({"deletionGracePeriodSeconds": 0, "deleteGracePeriodSeconds": 60}),
            Denied("rule 17"),
        ),
        create(
            "deletion null, deprecated 0 judged",
            json!({"deletionGracePeriodSeconds": null, "deleteGracePeriodSeconds": 0}),
            Denied("rule 17"),
        ),
        create("lifecycle an array", json!([]), Denied("rule 2")),
        create("lifecycle a number", json!(5), Denied("rule 2")),
        create(
            "both: \"30s\" judged, deprecated 60",
            json!({"deletionGracePeriodSeconds": "30s", "deleteGracePeriodSeconds": 60}),
            Denied("rule 16"),
        ),
        create(
            "both null",
            json!({"deletionGracePeriodSeconds": null, "deleteGracePeriodSeconds": null}),
            Allowed,
        ),
        create(
            "lifecycle a string (rule 2 reports it once)",
            json!("Paused"),
            Denied("rule 2"),
        ),
    ];
    cases.push(case(
        "rollout CREATE spec.pipeline.spec a string",
        Request::create(
            ROLLOUTS,
            pipeline_rollout()
                .with_field(&["metadata", "name"], "demo")
                .with_field(&["spec", "pipeline", "spec"], "x")
                .into_json(),
        ),
        Denied("rule 2"),
    ));
    let update = |name: &str, old: Value, new: Value, expect| {
        case(
            format!("rollout UPDATE {name}"),
            Request::update(ROLLOUTS, rollout(old), rollout(new)),
            expect,
        )
    };
    cases.extend([
        update("keeping a stored 0", d(json!(0)), d(json!(0)), Allowed),
        update("0 to 5", d(json!(0)), d(json!(5)), Denied("rule 17")),
        update("600 to 0", d(json!(600)), d(json!(0)), Denied("rule 17")),
        update(
            "keeping a stored \"30s\"",
            d(json!("30s")),
            d(json!("30s")),
            Allowed,
        ),
        update(
            "keeping a stored deprecated 0",
            dd(json!(0)),
            dd(json!(0)),
            Allowed,
        ),
        update(
            "the deprecated 0 renamed deletionGracePeriodSeconds",
            dd(json!(0)),
            d(json!(0)),
            Denied("rule 17"),
        ),
        update(
            "the judged field falls back to a stored deprecated 0",
            json!({"deletionGracePeriodSeconds": 60, "deleteGracePeriodSeconds": 0}),
            dd(json!(0)),
            Denied("rule 17"),
        ),
        update(
            "a stored deprecated 0 kept, deletionGracePeriodSeconds null",
            dd(json!(0)),
            json!({"deletionGracePeriodSeconds": null, "deleteGracePeriodSeconds": 0}),
            Allowed,
        ),
        update(
            "a stored 0 kept as 0.0",
            d(json!(0)),
            d(json!(0.0)),
            Allowed,
        ),
        update(
            "a stored \"30s\" to \"31s\"",
            d(json!("30s")),
            d(json!("31s")),
            Denied("rule 16"),
        ),
        update(
            "a stored 0 kept while the deprecated field is added",
            d(json!(0)),
            json!({"deletionGracePeriodSeconds": 0, "deleteGracePeriodSeconds": 60}),
            Allowed,
        ),
        update(
            "the deprecated 0 kept while deletionGracePeriodSeconds is set to 0",
            dd(json!(0)),
            json!({"deletionGracePeriodSeconds": 0, "deleteGracePeriodSeconds": 0}),
            Denied("rule 17"),
        ),
    ]);
    cases
}

/// A Pipeline whose lifecycle is `lifecycle`, unowned.
fn pipeline(lifecycle: Value) -> Value {
    json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Pipeline",
        "metadata": {"name": "demo", "namespace": "team"},
        "spec": {"lifecycle": lifecycle}})
}

/// A lifecycle as Numaflow's CRD defaults it, with `key` set to `v`.
fn crd(key: &str, v: Value) -> Value {
    let mut l = json!({"pauseGracePeriodSeconds": 30, "deletionGracePeriodSeconds": 30,
        "deleteGracePeriodSeconds": 30});
    l[key] = v;
    l
}

fn pipeline_cases() -> Vec<Case> {
    let d = "deletionGracePeriodSeconds";
    let dd = "deleteGracePeriodSeconds";
    let create = |name: &str, lifecycle: Value, expect| {
        case(
            format!("Pipeline CREATE {name}"),
            Request::create(PIPELINES, pipeline(lifecycle)),
            expect,
        )
    };
    let update = |name: &str, old: Value, new: Value, expect| {
        case(
            format!("Pipeline UPDATE {name}"),
            Request::update(PIPELINES, pipeline(old), pipeline(new)),
            expect,
        )
    };
    let mut cases = vec![
        create("as the CRD defaults it", crd(d, json!(30)), Allowed),
        create("no lifecycle fields", json!({}), Allowed),
        create("lifecycle null", Value::Null, Allowed),
        create("deletion 0", crd(d, json!(0)), Denied("rule 17")),
        create("deletion 3601", crd(d, json!(3601)), Denied("rule 17")),
        create("deletion \"30s\"", crd(d, json!("30s")), Denied("rule 16")),
        create("deletion 9223372037", crd(d, json!(9_223_372_037_i64)), Denied("rule 17")),
        create(
            "deletion 31536000, no timeout",
            crd(d, json!(31_536_000)),
            Denied("rule 17"),
        ),
        create("deprecated 0, deletion 30", crd(dd, json!(0)), Allowed),
        create(
            "deprecated 0 alone",
            json!({"deleteGracePeriodSeconds": 0}),
            Denied("rule 17"),
        ),
        create("pause 0", crd("pauseGracePeriodSeconds", json!(0)), Denied("rule 3")),
        create("lifecycle a string", json!("Paused"), Denied("rule 2")).words_differ(
            "Numaflow's CRD refuses a lifecycle that is not an object before admission; were one sent, the export's reads would fail and failurePolicy Fail deny it",
        ),
        case(
            "Pipeline CREATE deletion 0 by Numaplane's controller",
            Request::create(PIPELINES, pipeline(crd(d, json!(0))))
                .by(NUMAPLANE_CONTROLLER, &["system:serviceaccounts"]),
            Allowed,
        ),
        case(
            "Pipeline CREATE deletion 0 by Numaflow's controller",
            Request::create(PIPELINES, pipeline(crd(d, json!(0))))
                .by(NUMAFLOW_CONTROLLER, &["system:serviceaccounts"]),
            Denied("rule 17"),
        ),
    ];
    cases.extend([
        update(
            "deletion 30 to 0",
            crd(d, json!(30)),
            crd(d, json!(0)),
            Denied("rule 17"),
        ),
        update(
            "keeping a stored 0",
            crd(d, json!(0)),
            crd(d, json!(0)),
            Allowed,
        ),
        update(
            "the ignored deprecated field 30 to 0",
            crd(dd, json!(30)),
            crd(dd, json!(0)),
            Allowed,
        ),
        update(
            "a stored 0 to 5",
            crd(d, json!(0)),
            crd(d, json!(5)),
            Denied("rule 17"),
        ),
    ]);
    cases
}

#[test]
fn the_deletion_timeout_decides_as_the_webhook_does() {
    let policy = Policy::built_in();
    let mut cases = rollout_cases();
    cases.extend(pipeline_cases());
    let summary = run("built-in", &policy, &cases);
    assert!(summary.denied >= 20, "{summary:?}");
}

#[test]
fn namespace_overrides_choose_the_deletion_range() {
    let policy = Policy::from_yaml(
        "deletionTimeout:\n  namespaces:\n  - match: [ledger]\n    default: 10m\n    min: 5m\n    max: 2h\n  - match: [\"batch-*\", \"*-prod\"]\n    allowNoTimeout: true\n",
    )
    .expect("valid");
    let d = |v: i64| json!({"deletionGracePeriodSeconds": v});
    let create = |ns: &str, v: i64, expect| {
        case(
            format!("rollout CREATE {v} in {ns}"),
            Request::create(ROLLOUTS, rollout(d(v))).in_namespace(ns),
            expect,
        )
    };
    let pipe = |ns: &str, v: i64, expect| {
        case(
            format!("Pipeline CREATE {v} in {ns}"),
            Request::create(
                PIPELINES,
                pipeline(crd("deletionGracePeriodSeconds", json!(v))),
            )
            .in_namespace(ns),
            expect,
        )
    };
    let cases = [
        create("team", 60, Allowed),
        create("ledger", 60, Denied("rule 17")),
        create("ledger", 300, Allowed),
        create("ledger", 7200, Allowed),
        create("ledger", 7201, Denied("rule 17")),
        create("team", 7200, Denied("rule 17")),
        create("team", 31_536_000, Denied("rule 17")),
        create("batch-a", 31_536_000, Allowed),
        create("a-prod", 31_536_000, Allowed),
        create("prod", 31_536_000, Denied("rule 17")),
        create("batch-a", 3601, Denied("rule 17")),
        create("batch-a", 9_223_372_036, Allowed),
        create("batch-a", 9_223_372_037, Denied("rule 18")),
        pipe("ledger", 60, Denied("rule 17")),
        pipe("batch-x", 31_536_000, Allowed),
        pipe("team", 31_536_000, Denied("rule 17")),
    ];
    run("overrides", &policy, &cases);
}

#[test]
fn warn_mode_warns_where_enforce_denies() {
    let policy = Policy::from_yaml("mode: warn\n").expect("valid");
    let d = |v: Value| json!({"deletionGracePeriodSeconds": v});
    let cases = [
        case(
            "rollout CREATE 0",
            Request::create(ROLLOUTS, rollout(d(json!(0)))),
            Denied("rule 17"),
        ),
        case(
            "rollout CREATE \"30s\"",
            Request::create(ROLLOUTS, rollout(d(json!("30s")))),
            Denied("rule 16"),
        ),
        case(
            "rollout CREATE 600",
            Request::create(ROLLOUTS, rollout(d(json!(600)))),
            Allowed,
        ),
        case(
            "Pipeline CREATE deletion 0",
            Request::create(
                PIPELINES,
                pipeline(crd("deletionGracePeriodSeconds", json!(0))),
            ),
            Denied("rule 17"),
        ),
    ];
    let summary = run("warn mode", &policy, &cases);
    assert_eq!(summary.denied, 3, "{summary:?}");
}
