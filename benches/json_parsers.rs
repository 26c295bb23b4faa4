//! The request parse alone, with two JSON readers behind the very serde
//! types the webhook reads an AdmissionReview with (`admission::Envelope`):
//! serde_json (what the webhook uses) and sonic-rs (SIMD), plus sonic-rs's lazy field access alone. Run side by
//! side: `cargo bench --bench json_parsers`; see BENCHMARKS.md (simd-json,
//! slower on large bodies, is not among them).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pipelinerollout_webhook::admission::{AdmissionRequest, Envelope};
use support::{MAIN, fixture, grown};

mod support;

/// The request each reader's envelope gives, for comparing them.
fn request(envelope: Envelope) -> String {
    format!("{:?}", AdmissionRequest::from_envelope(envelope))
}

fn parsers(c: &mut Criterion) {
    let bodies = [
        ("07-validate-14KiB", fixture(MAIN)),
        ("07-validate-1MiB-objects", grown(1024 * 1024)),
    ];
    for (name, body) in &bodies {
        let a: Envelope = serde_json::from_slice(body).expect("serde_json reads it");
        let b: Envelope = sonic_rs::from_slice(body).expect("sonic-rs reads it");
        assert_eq!(request(a), request(b), "{name}: sonic-rs agrees");
    }
    let mut group = c.benchmark_group("parse");
    for (name, body) in &bodies {
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::new("serde_json", name), body, |b, body| {
            b.iter(|| {
                black_box(
                    serde_json::from_slice::<Envelope>(black_box(body))
                        .ok()
                        .map(AdmissionRequest::from_envelope),
                )
            });
        });
        group.bench_with_input(BenchmarkId::new("sonic_rs", name), body, |b, body| {
            b.iter(|| {
                black_box(
                    sonic_rs::from_slice::<Envelope>(black_box(body))
                        .ok()
                        .map(AdmissionRequest::from_envelope),
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
