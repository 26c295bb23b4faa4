//! What `numaflow_controller.rs` shares between its scenarios: Numaplane's
//! part as the tests play it (the child from the rollout's template, the
//! pause, the apply and resume), the namespace with a healthy
//! InterStepBufferService, the API server's webhook counts, and waiting.

use std::time::{Duration, Instant};

use envtest::{Cluster, User};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::apiserver_children_support::{UPGRADE_STATE, team};
use crate::apiserver_support::{ROLLOUTS, idle, pausing, rollout, set_status};

pub const PIPELINES: &str = "pipelines.numaflow.numaproj.io";
pub const ISBSVCS: &str = "interstepbufferservices.numaflow.numaproj.io";
pub const PARENT: &str = "numaplane.numaproj.io/parent-rollout-name";
pub const PAUSE_TIMESTAMP: &str = "numaflow.numaproj.io/pause-timestamp";
/// The name the sample's pipeline gives its InterStepBufferService.
pub const ISBSVC: &str = "my-isbsvc";

/// What the API server counted of its calls to the webhooks.
pub struct ApiServerCounts {
    /// Calls (`apiserver_admission_webhook_admission_duration_seconds_count`).
    pub calls: f64,
    /// Refusals the webhooks answered
    /// (`apiserver_admission_webhook_rejection_count`, `error_type="no_error"`).
    pub rejected: f64,
    /// Calls that failed: unreachable, timed out, a bad answer
    /// (`apiserver_admission_webhook_rejection_count`, other error types).
    pub failed: f64,
}

impl ApiServerCounts {
    pub fn read(cluster: &Cluster) -> Self {
        let metrics = cluster
            .get_as_admin("/metrics")
            .expect("the API server's /metrics");
        let mut counts = Self {
            calls: 0.0,
            rejected: 0.0,
            failed: 0.0,
        };
        for line in metrics.lines() {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            if !series.contains("pipelinerollout-webhook") {
                continue;
            }
            if series.starts_with("apiserver_admission_webhook_admission_duration_seconds_count{") {
                counts.calls += value;
            } else if series.starts_with("apiserver_admission_webhook_rejection_count{") {
                if series.contains("error_type=\"no_error\"") {
                    counts.rejected += value;
                } else {
                    counts.failed += value;
                }
            }
        }
        counts
    }
}

/// Alice's rollout `demo` (with `timeout`, or none) in a fresh team
/// namespace, and its child `demo-0`, made by Numaplane and running under
/// Numaflow; returns the child's name.
pub fn running_child(cluster: &Cluster, ns: &str, timeout: Option<Value>) -> String {
    team_with_isbsvc(cluster, ns);
    cluster
        .kubectl(User::Alice)
        .create(&rollout(ns, "demo", timeout), &[])
        .expect_success("alice creates a rollout");
    let child = numaplane_creates_child(cluster, ns, "demo", 0, "promoted");
    wait_for_phase(cluster, ns, &child, "Running", Duration::from_secs(60));
    child
}

/// Alice's and carol's namespace, with an InterStepBufferService that
/// Numaflow installed and reports healthy.
pub fn team_with_isbsvc(cluster: &Cluster, ns: &str) {
    team(cluster, ns);
    // What the ServiceAccount controller makes in every namespace: the
    // account Numaflow's pods run as (they are created, never run).
    cluster
        .create_all(vec![json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": ns}})])
        .expect("the namespace's default ServiceAccount");
    numaplane_creates_isbsvc(cluster, ns);
    let statefulset = format!("isbsvc-{ISBSVC}-js");
    let admin = cluster.kubectl(User::Admin);
    let found = poll(Duration::from_secs(60), || {
        admin.get("statefulsets.apps", ns, &statefulset)
    })
    .unwrap_or_else(|| panic!("Numaflow made no StatefulSet {ns}/{statefulset}"));
    // As the StatefulSet controller and the kubelets would report three
    // ready pods of the current revision.
    let replicas = found["spec"]["replicas"].as_u64().unwrap_or(3);
    let revision = format!("{statefulset}-1");
    admin
        .merge_patch(
            "statefulsets.apps",
            ns,
            &statefulset,
            &json!({"status": {
                "observedGeneration": found["metadata"]["generation"],
                "replicas": replicas, "readyReplicas": replicas,
                "currentReplicas": replicas, "updatedReplicas": replicas,
                "availableReplicas": replicas,
                "currentRevision": revision, "updateRevision": revision,
            }}),
            &["--subresource=status"],
        )
        .expect_success("the StatefulSet's status, as its pods would make it");
    poll(Duration::from_secs(60), || {
        let object = admin.get(ISBSVCS, ns, ISBSVC)?;
        (object["status"]["phase"] == "Running").then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "the InterStepBufferService never ran: {}",
            get(cluster, ISBSVCS, ns, ISBSVC)["status"]
        )
    });
}

/// Numaplane creates the InterStepBufferService the sample's pipeline
/// names (JetStream, the controller config's `latest`).
pub fn numaplane_creates_isbsvc(cluster: &Cluster, ns: &str) {
    let isbsvc = json!({
        "apiVersion": "numaflow.numaproj.io/v1alpha1",
        "kind": "InterStepBufferService",
        "metadata": {"name": ISBSVC, "namespace": ns, "labels": {PARENT: "isbsvc"}},
        "spec": {"jetstream": {"version": "latest"}},
    });
    cluster
        .kubectl(User::NumaplaneController)
        .create(&isbsvc, &[])
        .expect_success("Numaplane creates the InterStepBufferService");
}

/// Numaplane makes child `<rollout>-<index>` from the rollout's pipeline
/// template, owned by the rollout and labelled `state`; returns its name.
pub fn numaplane_creates_child(
    cluster: &Cluster,
    ns: &str,
    rollout: &str,
    index: u32,
    state: &str,
) -> String {
    let parent = get(cluster, ROLLOUTS, ns, rollout);
    let name = format!("{rollout}-{index}");
    let template = &parent["spec"]["pipeline"];
    let mut annotations = template["metadata"]["annotations"].clone();
    if !annotations.is_object() {
        annotations = json!({});
    }
    let child = json!({
        "apiVersion": "numaflow.numaproj.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {
            "name": name, "namespace": ns,
            "labels": {PARENT: rollout, UPGRADE_STATE: state},
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "numaplane.numaproj.io/v1alpha1", "kind": "PipelineRollout",
                "name": rollout, "uid": parent["metadata"]["uid"],
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": template["spec"],
    });
    cluster
        .kubectl(User::NumaplaneController)
        .create(&child, &[])
        .expect_success("Numaplane creates the child");
    name
}

/// Numaplane's pause-and-drain: the rollout's status says pausing and the
/// child's desired phase is Paused; then it waits (up to `wait`) for
/// Numaflow to report Paused. Returns the paused child, if it paused, and
/// how long after `pause-timestamp` that was seen.
pub fn numaplane_pauses_until_paused(
    cluster: &Cluster,
    ns: &str,
    rollout: &str,
    child: &str,
    wait: Duration,
) -> (Option<Value>, Duration) {
    numaplane_pauses(cluster, ns, rollout, child);
    let pause_began = poll(Duration::from_secs(30), || {
        let object = cluster.kubectl(User::Admin).get(PIPELINES, ns, child)?;
        let stamp = object["metadata"]["annotations"][PAUSE_TIMESTAMP].as_str()?;
        OffsetDateTime::parse(stamp, &Rfc3339).ok()
    })
    .expect("Numaflow writes pause-timestamp when it starts pausing");
    let since = || {
        let elapsed = OffsetDateTime::now_utc() - pause_began;
        Duration::try_from(elapsed).unwrap_or_default()
    };
    let deadline = Instant::now() + wait.saturating_sub(since());
    loop {
        let object = get(cluster, PIPELINES, ns, child);
        if object["status"]["phase"] == "Paused" {
            return (Some(object), since());
        }
        if Instant::now() >= deadline {
            return (None, since());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Numaplane starts a pause-and-drain: the rollout's status says pausing
/// and the child's desired phase is Paused.
pub fn numaplane_pauses(cluster: &Cluster, ns: &str, rollout: &str, child: &str) {
    set_status(cluster, ns, rollout, pausing(true));
    cluster
        .kubectl(User::NumaplaneController)
        .merge_patch(
            PIPELINES,
            ns,
            child,
            &json!({"spec": {"lifecycle": {"desiredPhase": "Paused"}}}),
            &[],
        )
        .expect_success("Numaplane pauses the child");
}

/// Numaplane's apply after a pause: the rollout's pipeline spec onto the
/// child, desired phase Running; Numaflow resumes it (and drops
/// `pause-timestamp`); the rollout's status is then idle.
pub fn numaplane_applies_and_resumes(cluster: &Cluster, ns: &str, rollout: &str, child: &str) {
    let mut spec = get(cluster, ROLLOUTS, ns, rollout)["spec"]["pipeline"]["spec"].clone();
    spec["lifecycle"]["desiredPhase"] = json!("Running");
    cluster
        .kubectl(User::NumaplaneController)
        .merge_patch(PIPELINES, ns, child, &json!({"spec": spec}), &[])
        .expect_success("Numaplane applies the new spec and resumes the child");
    let resumed = poll(Duration::from_secs(30), || {
        let object = cluster.kubectl(User::Admin).get(PIPELINES, ns, child)?;
        let done = object["status"]["phase"] == "Running"
            && object["metadata"]["annotations"][PAUSE_TIMESTAMP].is_null();
        done.then_some(object)
    })
    .unwrap_or_else(|| {
        panic!(
            "Numaflow did not resume the child: {}",
            get(cluster, PIPELINES, ns, child)["status"]
        )
    });
    assert_eq!(
        resumed["spec"]["vertices"][1]["udf"]["container"]["image"],
        "quay.io/numaio/numaflow-go/map-cat:v2",
        "the child runs the new UDF image"
    );
    set_status(cluster, ns, rollout, idle());
}

/// A merge patch of the rollout setting the `cat` vertex's image.
pub fn udf_image(tag: &str) -> Value {
    let mut spec = rollout("x", "x", None)["spec"]["pipeline"]["spec"].clone();
    spec["vertices"][1]["udf"]["container"]["image"] =
        json!(format!("quay.io/numaio/numaflow-go/{tag}"));
    json!({"spec": {"pipeline": {"spec": {"vertices": spec["vertices"]}}}})
}

/// Waits (up to `limit`) until the child reports `phase`; returns it.
pub fn wait_for_phase(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    phase: &str,
    limit: Duration,
) -> Value {
    poll(limit, || {
        let object = cluster.kubectl(User::Admin).get(PIPELINES, ns, name)?;
        (object["status"]["phase"] == phase).then_some(object)
    })
    .unwrap_or_else(|| {
        panic!(
            "{ns}/{name} never reported {phase}: {}",
            get(cluster, PIPELINES, ns, name)["status"]
        )
    })
}

pub fn get(cluster: &Cluster, resource: &str, ns: &str, name: &str) -> Value {
    cluster
        .kubectl(User::Admin)
        .get(resource, ns, name)
        .unwrap_or_else(|| panic!("{resource} {ns}/{name} is not there"))
}

/// Calls `found` every 500 ms until it gives a value or `limit` passes.
pub fn poll<T>(limit: Duration, mut found: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = found() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Prints a measurement past libtest's capture, so that CI's log shows it.
pub fn say(line: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Rule 29 on what the real Numaflow made for the child `child` of the
/// PipelineRollout `demo`: alice, who may edit Services in `ns` (as
/// Kubernetes' `edit` role lets her), may not point its daemon Service at
/// pods of her own.
pub fn the_daemon_numaflow_made_is_refused_to_an_editor(cluster: &Cluster, ns: &str, child: &str) {
    cluster
        .create_all(vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "services", "namespace": ns},
                "rules": [{"apiGroups": [""], "resources": ["services"], "verbs": ["get", "patch"]}]}),
            envtest::binding(Some(ns), "services", "Role", "services", &[User::Alice]),
        ])
        .expect("alice may edit Services");
    cluster
        .wait_for_access(User::Alice, "patch", "services", ns, true)
        .expect("access");
    let service = format!("{child}-daemon-svc");
    let admin = cluster.kubectl(User::Admin);
    poll(Duration::from_secs(60), || {
        admin.get("services", ns, &service)
    })
    .unwrap_or_else(|| panic!("Numaflow made no daemon Service {ns}/{service}"));
    let out = cluster.kubectl(User::Alice).merge_patch(
        "services",
        ns,
        &service,
        &json!({"spec": {"selector": {"app": "mine"}}}),
        &[],
    );
    crate::apiserver_children_support::assert_refused_by(
        &out,
        "validate-numaflow-workloads.pipelinerollout-webhook.numaplane.numaproj.io",
        &format!(
            "may not change spec.selector of this Service of Pipeline \"{child}\" of PipelineRollout \"demo\""
        ),
    );
}
