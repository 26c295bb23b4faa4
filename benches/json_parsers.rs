//! The request parse alone, with two JSON readers behind the same lenient
//! serde types the webhook reads an AdmissionReview with (a mirror of
//! `admission::request`'s envelope): serde_json (what the webhook uses) and
//! sonic-rs (SIMD), plus sonic-rs's lazy field access alone. Run side by
//! side: `cargo bench --bench json_parsers`; see BENCHMARKS.md (simd-json
//! was measured too, slower on large bodies, and dropped).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pipelinerollout_webhook::lenient::{Obj, Text};
use pipelinerollout_webhook::policy::UserInfo;
use pipelinerollout_webhook::rollout::PipelineRollout;
use serde::Deserialize;
use serde_json::Value;
use support::{MAIN, fixture, grown};

mod support;

#[derive(Deserialize)]
#[allow(dead_code)]
struct Envelope {
    #[serde(default, rename = "apiVersion")]
    api_version: Text,
    #[serde(default)]
    kind: Text,
    #[serde(default)]
    request: Obj<RequestFields>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct RequestFields {
    #[serde(default)]
    uid: Text,
    #[serde(default)]
    name: Text,
    #[serde(default)]
    namespace: Text,
    #[serde(default)]
    operation: Text,
    #[serde(default)]
    user_info: Obj<UserInfo>,
    #[serde(default)]
    object: Obj<PipelineRollout>,
    #[serde(default)]
    old_object: Obj<PipelineRollout>,
    #[serde(default)]
    dry_run: Option<Value>,
}

/// What each reader must agree on: the uid and the timeout slot.
fn summary(e: &Envelope) -> Option<(String, String)> {
    let request = e.request.get()?;
    let uid = request.uid.as_deref()?.to_owned();
    let object = request.object.get()?;
    Some((uid, format!("{:?}", object.timeout())))
}

fn parsers(c: &mut Criterion) {
    let bodies = [
        ("07-validate-14KiB", fixture(MAIN)),
        ("07-validate-1MiB-objects", grown(1024 * 1024)),
    ];
    for (name, body) in &bodies {
        let a: Envelope = serde_json::from_slice(body).expect("serde_json reads it");
        let b: Envelope = sonic_rs::from_slice(body).expect("sonic-rs reads it");
        assert_eq!(summary(&a), summary(&b), "{name}: sonic-rs agrees");
    }
    let mut group = c.benchmark_group("parse");
    for (name, body) in &bodies {
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::new("serde_json", name), body, |b, body| {
            b.iter(|| {
                black_box(
                    serde_json::from_slice::<Envelope>(black_box(body))
                        .ok()
                        .map(|e| e.request.get().is_some()),
                )
            });
        });
        group.bench_with_input(BenchmarkId::new("sonic_rs", name), body, |b, body| {
            b.iter(|| {
                black_box(
                    sonic_rs::from_slice::<Envelope>(black_box(body))
                        .ok()
                        .map(|e| e.request.get().is_some()),
                )
            });
        });
    }
    group.finish();

    // Lazy field access: only the subtrees the rules read, everything else
    // skipped by SIMD scanning. Not a drop-in (the lenient types would then
    // read each subtree), measured here to see what skipping alone costs.
    let mut tree = sonic_rs::PointerTree::new();
    for top in [["apiVersion"], ["kind"]] {
        tree.add_path(top);
    }
    for key in [
        "uid",
        "resource",
        "subResource",
        "name",
        "namespace",
        "operation",
        "userInfo",
        "dryRun",
    ] {
        tree.add_path(["request", key]);
    }
    for object in ["object", "oldObject"] {
        tree.add_path(["request", object, "metadata", "annotations"]);
        tree.add_path(["request", object, "metadata", "uid"]);
        tree.add_path(["request", object, "spec", "pipeline", "spec", "lifecycle"]);
        tree.add_path(["request", object, "spec", "strategy"]);
        tree.add_path(["request", object, "status"]);
    }
    let mut group = c.benchmark_group("lazy");
    for (name, body) in &bodies {
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("sonic_rs_get_many", name),
            body,
            |b, body| {
                b.iter(|| {
                    black_box(
                        sonic_rs::get_many(black_box(body.as_slice()), &tree)
                            .map(|v| v.len())
                            .ok(),
                    )
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, parsers);
criterion_main!(benches);
