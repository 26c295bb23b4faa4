//! What a child Pipeline with no deletion timeout drains for, as the real
//! kube-apiserver stores it: Numaflow reads
//! `spec.lifecycle.deletionGracePeriodSeconds`, else the deprecated
//! `deleteGracePeriodSeconds`, else `metadata.deletionGracePeriodSeconds`,
//! else 30 s. With Numaflow's full CRDs the API server's schema defaults
//! fill `spec.lifecycle` in; with its minimal CRDs (`spec` preserved as
//! written, no defaults) nothing does, and a deleted custom resource's
//! `metadata.deletionGracePeriodSeconds` is 0: Numaflow then drains for no
//! time at all. docs/rules.md states the result; the audit warns of every
//! rollout whose pipeline sets no deletion timeout.
//!
//! One cluster: the Pipeline CRD installed full, then replaced by the
//! minimal one.

use std::time::{Duration, Instant};

use envtest::{Assets, Cluster, User, repo_root, require, test_name};
use serde_json::{Value, json};

const FULL: &str = "tests/fixtures/numaflow/numaflow.numaproj.io_pipelines.yaml";
const MINIMAL: &str = "tests/fixtures/numaflow-minimal/numaflow.numaproj.io_pipelines.yaml";
const NS: &str = "e2e-deletion-fallback";
const HOLD: &str = "e2e.numaplane.numaproj.io/hold";

/// A Pipeline with no lifecycle, held by a finalizer so that it stays
/// terminating once deleted.
fn pipeline(name: &str) -> Value {
    json!({
        "apiVersion": "numaflow.numaproj.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": name, "namespace": NS, "finalizers": [HOLD]},
        "spec": {"vertices": [{"name": "in", "source": {"generator": {}}}], "edges": []},
    })
}

/// Creates `name`, deletes it, and returns it as stored while terminating.
fn created_then_deleted(cluster: &Cluster, name: &str) -> (Value, Value) {
    let admin = cluster.kubectl(User::Admin);
    let created = admin
        .create(&pipeline(name), &["-o", "json"])
        .expect_success("create the Pipeline")
        .json();
    admin
        .run(&["delete", "pipeline", name, "-n", NS, "--wait=false"])
        .expect_success("delete the Pipeline");
    let terminating = admin
        .get("pipeline", NS, name)
        .expect("held by its finalizer");
    admin
        .merge_patch(
            "pipeline",
            NS,
            name,
            &json!({"metadata": {"finalizers": null}}),
            &[],
        )
        .expect_success("release the Pipeline");
    (created, terminating)
}

#[test]
fn a_pipeline_without_a_deletion_timeout_drains_for_the_crds_default_or_for_nothing() {
    let Some(assets) = require(&test_name(), Assets::find()) else {
        return;
    };
    let cluster = Cluster::start(&assets).expect("start the API server");
    cluster
        .install_crd(&repo_root().join(FULL))
        .expect("the full CRD");
    cluster
        .create_all(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        ])
        .expect("the namespace");

    // The full CRD defaults the lifecycle: 30 s for both deletion fields.
    let (created, terminating) = created_then_deleted(&cluster, "full");
    let lifecycle = &created["spec"]["lifecycle"];
    assert_eq!(lifecycle["deletionGracePeriodSeconds"], 30, "{created:#}");
    assert_eq!(lifecycle["deleteGracePeriodSeconds"], 30, "{created:#}");
    assert_eq!(lifecycle["pauseGracePeriodSeconds"], 30, "{created:#}");
    assert_eq!(
        terminating["metadata"]["deletionGracePeriodSeconds"], 0,
        "{terminating:#}"
    );
    assert!(terminating["metadata"]["deletionTimestamp"].is_string());

    // The minimal CRD, as Numaflow's minimal install ships it: spec is kept
    // as written.
    let minimal = repo_root().join(MINIMAL).display().to_string();
    cluster
        .kubectl(User::Admin)
        .run(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &minimal,
        ])
        .expect_success("replace the CRD by the minimal one");
    // The API server takes a moment to serve the new schema: until it does,
    // a new Pipeline still gets the full CRD's defaults.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut attempt = 0;
    let (created, terminating) = loop {
        attempt += 1;
        let (created, terminating) = created_then_deleted(&cluster, &format!("minimal-{attempt}"));
        if created["spec"].get("lifecycle").is_none() || Instant::now() > deadline {
            break (created, terminating);
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(created["spec"].get("lifecycle"), None, "{created:#}");
    assert_eq!(
        terminating["spec"].get("lifecycle"),
        None,
        "{terminating:#}"
    );
    // What Numaflow falls back to: the object's own grace period, which the
    // API server sets to 0 for a custom resource.
    assert_eq!(
        terminating["metadata"]["deletionGracePeriodSeconds"], 0,
        "{terminating:#}"
    );
}
