//! What the end-to-end scenarios share: PipelineRollouts as users write
//! them, Numaplane's status, and checks of what the client sees.
// Not every test binary uses every item.
#![allow(dead_code)]

use envtest::{Cluster, Installation, Kubectl, Output, User, binding, repo_root};
use serde_json::{Value, json};

/// The validating webhook's name, as `manifests/base/webhooks.yaml` has it.
pub const VALIDATE: &str = "validate.pipelinerollout-webhook.numaplane.numaproj.io";
/// The mutating webhook's name.
pub const MUTATE: &str = "mutate.pipelinerollout-webhook.numaplane.numaproj.io";
/// The annotation that forces a re-apply.
pub const ALLOW_DATA_LOSS: &str = "numaplane.numaproj.io/allow-data-loss";
/// The resource, as kubectl names it.
pub const ROLLOUTS: &str = "pipelinerollouts";
/// What `default: none` writes: the built-in `noTimeoutSeconds` (README,
/// "Policy reference"), which the base policy does not change.
pub const NO_TIMEOUT_SECONDS: i64 = 31_536_000;

const RBAC: &str = "rbac.authorization.k8s.io/v1";

/// Every Event (events.k8s.io/v1) in `ns`, as the admin lists them.
pub fn events_in(cluster: &Cluster, ns: &str) -> Vec<Value> {
    let out = cluster
        .kubectl(User::Admin)
        .run(&["get", "events.v1.events.k8s.io", "-n", ns, "-o", "json"])
        .expect_success("list events");
    out.json()["items"].as_array().cloned().unwrap_or_default()
}

/// The value of one series of the webhook's own `/metrics` (its admin
/// port), named exactly as the text format writes it, such as
/// `pipelinerollout_webhook_events_total{reason="X",result="sent"}`; 0 when
/// the webhook does not export it.
pub fn webhook_sample(env: &Installation, series: &str) -> f64 {
    webhook_metrics(env)
        .lines()
        .filter_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .sum()
}

/// The sum of every series of one metric of the webhook's own `/metrics`,
/// such as `pipelinerollout_webhook_denials_total` over all its rules.
pub fn webhook_family_sum(env: &Installation, family: &str) -> f64 {
    webhook_metrics(env)
        .lines()
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The webhook's `/metrics` text (its admin port).
fn webhook_metrics(env: &Installation) -> String {
    let (status, text) = env
        .webhook
        .admin_get("/metrics")
        .expect("the webhook's /metrics");
    assert_eq!(status, 200, "the webhook's /metrics: {text}");
    text
}

/// A Role (`namespace` given) or ClusterRole granting `verbs` on
/// `resources` of numaplane.numaproj.io.
pub fn role(namespace: Option<&str>, name: &str, resources: &[&str], verbs: &[&str]) -> Value {
    let rules =
        json!([{"apiGroups": ["numaplane.numaproj.io"], "resources": resources, "verbs": verbs}]);
    match namespace {
        Some(namespace) => json!({"apiVersion": RBAC, "kind": "Role",
            "metadata": {"name": name, "namespace": namespace}, "rules": rules}),
        None => json!({"apiVersion": RBAC, "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": rules}),
    }
}

/// What Argo CD's and Numaplane's own installs grant their accounts: all
/// of PipelineRollouts, and (Numaplane) their status.
pub fn grant_components(cluster: &Cluster) -> Result<(), String> {
    let all = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    cluster.create_all(vec![
        role(None, "e2e-argocd", &[ROLLOUTS], &all),
        role(
            None,
            "e2e-numaplane",
            &[ROLLOUTS, "pipelinerollouts/status"],
            &all,
        ),
        binding(
            None,
            "e2e-argocd",
            "ClusterRole",
            "e2e-argocd",
            &[User::ArgocdServer, User::ArgocdApplicationController],
        ),
        binding(
            None,
            "e2e-numaplane",
            "ClusterRole",
            "e2e-numaplane",
            &[User::NumaplaneController],
        ),
    ])
}

/// The example bindings of the force-reapply ClusterRole
/// (`manifests/components/force-reapply-bindings`: Argo CD's argocd-server
/// and the group sre), which the base install leaves out.
pub fn grant_example_force_bindings(cluster: &Cluster) -> Result<(), String> {
    let path = repo_root().join("manifests/components/force-reapply-bindings/bindings.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let objects = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).map_err(|e| format!("{}: {e}", path.display())))
        .collect::<Result<Vec<Value>, String>>()?;
    cluster.create_all(objects)
}

/// A namespace where alice and carol may write PipelineRollouts, once RBAC
/// says so. Plain RBAC: the aggregated `edit` role is empty without a
/// controller manager.
pub fn team_namespace(cluster: &Cluster, name: &str) -> Result<(), String> {
    let verbs = ["get", "list", "watch", "create", "update", "patch"];
    cluster.create_all(vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        role(Some(name), "pipelinerollout-writer", &[ROLLOUTS], &verbs),
        binding(
            Some(name),
            "pipelinerollout-writers",
            "Role",
            "pipelinerollout-writer",
            &[User::Alice, User::Carol],
        ),
    ])?;
    for user in [User::Alice, User::Carol] {
        cluster.wait_for_access(
            user,
            "patch",
            "pipelinerollouts.numaplane.numaproj.io",
            name,
            true,
        )?;
    }
    Ok(())
}

/// The Numaplane sample rollout, named `namespace/name`, with `timeout` as
/// its drain timeout (`None`: no `lifecycle` at all).
pub fn rollout(namespace: &str, name: &str, timeout: Option<Value>) -> Value {
    let path = repo_root().join("tests/fixtures/numaplane-sample-pipelinerollout.yaml");
    let text = std::fs::read_to_string(&path).expect("read the sample PipelineRollout");
    let mut object: Value = serde_saphyr::from_str(&text).expect("the sample is YAML");
    object["metadata"] = json!({"name": name, "namespace": namespace});
    // The sample leaves `riders:` empty (null): create drops it, server-side
    // apply refuses it ("must be of type array").
    if let Some(spec) = object["spec"].as_object_mut() {
        spec.retain(|_, v| !v.is_null());
    }
    let spec = &mut object["spec"]["pipeline"]["spec"];
    match timeout {
        Some(timeout) => spec["lifecycle"] = json!({"pauseGracePeriodSeconds": timeout}),
        None => {
            spec.as_object_mut()
                .expect("pipeline spec")
                .remove("lifecycle");
        }
    }
    object
}

/// The drain timeout of a PipelineRollout (`Null` when absent).
pub fn timeout_of(object: &Value) -> &Value {
    &object["spec"]["pipeline"]["spec"]["lifecycle"]["pauseGracePeriodSeconds"]
}

/// A merge patch setting the drain timeout to `seconds`.
pub fn timeout_patch(seconds: i64) -> Value {
    json!({"spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": seconds}}}}})
}

/// The stored object; panics if it is not there.
#[track_caller]
pub fn stored(kubectl: &Kubectl, namespace: &str, name: &str) -> Value {
    kubectl
        .get(ROLLOUTS, namespace, name)
        .unwrap_or_else(|| panic!("{namespace}/{name} is not stored"))
}

/// Checks that the validating webhook refused the request and that its
/// message, as the client got it, contains `says`.
#[track_caller]
pub fn assert_refused(out: &Output, says: &str) {
    assert!(!out.success, "expected the webhook to refuse: {out}");
    let by = format!("admission webhook \"{VALIDATE}\" denied the request");
    assert!(
        out.stderr.contains(&by),
        "refused, but not by {VALIDATE}: {out}"
    );
    assert!(
        out.stderr.contains(says),
        "the refusal does not say {says:?}: {out}"
    );
}

/// Writes `status` through the status subresource, as Numaplane does.
#[track_caller]
pub fn set_status(cluster: &Cluster, namespace: &str, name: &str, status: Value) {
    cluster
        .kubectl(User::NumaplaneController)
        .merge_patch(
            ROLLOUTS,
            namespace,
            name,
            &json!({"status": status}),
            &["--subresource=status"],
        )
        .expect_success("Numaplane writes the status");
}

/// A status saying the pipeline is pausing: through the rollout's own
/// pause-and-drain upgrade, or (`upgrade` false) through an
/// ISBServiceRollout update, which leaves `upgradeInProgress` empty.
pub fn pausing(upgrade: bool) -> Value {
    let upgrade = if upgrade { "PipelinePauseAndDrain" } else { "" };
    status(upgrade, "True", "PipelinePausing")
}

/// A status saying nothing pauses.
pub fn idle() -> Value {
    status("", "False", "Unpaused")
}

fn status(upgrade: &str, pausing: &str, reason: &str) -> Value {
    let condition = json!({
        "type": "PipelinePausingOrPaused",
        "status": pausing,
        "reason": reason,
        "message": reason,
        "lastTransitionTime": "2026-06-01T10:00:00Z",
    });
    json!({"phase": "Deployed", "upgradeInProgress": upgrade, "conditions": [condition]})
}

/// `kubectl annotate` of allow-data-loss: set to `value`, or removed.
pub fn annotate(kubectl: &Kubectl, namespace: &str, name: &str, value: Option<&str>) -> Output {
    let change = match value {
        Some(value) => format!("{ALLOW_DATA_LOSS}={value}"),
        None => format!("{ALLOW_DATA_LOSS}-"),
    };
    kubectl.run(&[
        "annotate",
        ROLLOUTS,
        name,
        "-n",
        namespace,
        &change,
        "--overwrite",
    ])
}

/// The allow-data-loss annotation of a PipelineRollout.
pub fn annotation_of(object: &Value) -> Option<&str> {
    object["metadata"]["annotations"][ALLOW_DATA_LOSS].as_str()
}
