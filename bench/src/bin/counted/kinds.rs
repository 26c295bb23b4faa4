//! The request bodies of the other kinds the webhook judges, built once from
//! the captured fixture 07 so that their objects are as large as a real
//! rollout's: an UPDATE of a child Pipeline's pause timeout by a holder of
//! forceReapply.editChildren (a member of `system:masters`, which the
//! built-in policy names), and a user's CREATE of Numaplane's
//! namespace-level ConfigMap. Both are allowed.

use serde_json::{Value, json};

use crate::CountedError;
use crate::decision::{DENIED, Encoding, fixture};

/// A user with no grant.
const ALICE: (&str, &[&str]) = ("alice", &["devs", "system:authenticated"]);
/// A member of `system:masters`, who holds every grant of the built-in policy.
const ADMIN: (&str, &[&str]) = ("admin", &["system:masters", "system:authenticated"]);

/// The review around `object` and `old` by `user`, compact.
#[allow(clippy::too_many_arguments)]
fn review(
    user: (&str, &[&str]),
    group: &str,
    version: &str,
    kind: &str,
    resource: &str,
    operation: &str,
    object: Value,
    old: Value,
) -> Result<Vec<u8>, CountedError> {
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": resource});
    let body = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "5b0c1f3e-7a2d-4c8e-9f61-2d4e6a8b0c13",
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": object["metadata"]["name"].clone(),
            "namespace": "team-a",
            "operation": operation,
            "userInfo": {"username": user.0, "groups": user.1},
            "object": object,
            "oldObject": old,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"},
        },
    });
    serde_json::to_vec(&body).map_err(|e| CountedError::Https(format!("review: {e}")))
}

fn rollout() -> Result<Value, CountedError> {
    let bytes = fixture(DENIED, Encoding::Compact)?;
    let review: Value = serde_json::from_slice(&bytes)
        .map_err(|e| CountedError::Https(format!("{DENIED}: {e}")))?;
    Ok(review["request"]["object"].clone())
}

/// A child Pipeline of fixture 07's rollout whose pause timeout an admin
/// moves from 60 to 120 seconds (within the built-in policy's range; a
/// change of a child's spec needs forceReapply.editChildren).
pub fn child_pipeline() -> Result<Vec<u8>, CountedError> {
    let rollout = rollout()?;
    let name = format!(
        "{}-0",
        rollout["metadata"]["name"].as_str().unwrap_or("pipeline")
    );
    let child = |pause: u64| {
        let mut spec = rollout["spec"]["pipeline"]["spec"].clone();
        spec["lifecycle"] = json!({"pauseGracePeriodSeconds": pause});
        json!({
            "apiVersion": "numaflow.numaproj.io/v1alpha1",
            "kind": "Pipeline",
            "metadata": {
                "name": name,
                "namespace": "team-a",
                "labels": {"numaplane.numaproj.io/parent-rollout-name":
                    rollout["metadata"]["name"].clone()},
                "annotations": rollout["metadata"]["annotations"].clone(),
                "managedFields": rollout["metadata"]["managedFields"].clone(),
            },
            "spec": spec,
        })
    };
    review(
        ADMIN,
        "numaflow.numaproj.io",
        "v1alpha1",
        "Pipeline",
        "pipelines",
        "UPDATE",
        child(120),
        child(60),
    )
}

/// Numaplane's namespace-level ConfigMap created with the progressive
/// strategy, carrying fixture 07's annotations and managedFields.
pub fn namespace_config() -> Result<Vec<u8>, CountedError> {
    let rollout = rollout()?;
    let object = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "numaplane-config",
            "namespace": "team-a",
            "labels": {"numaplane.numaproj.io/config": "namespace-level-config"},
            "annotations": rollout["metadata"]["annotations"].clone(),
            "managedFields": rollout["metadata"]["managedFields"].clone(),
        },
        "data": {"upgradeStrategy": "progressive"},
    });
    review(
        ALICE,
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        "CREATE",
        object,
        Value::Null,
    )
}
