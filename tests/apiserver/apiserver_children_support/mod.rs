//! What the scenarios of children (`children.rs`, `child_edits.rs`,
//! `child_deletes.rs`, `drain_timeouts.rs`) share: the CRDs and the RBAC
//! their clusters need, children as Numaplane makes them, Argo CD's child
//! actions, the rollouts' templates, and the checks and counters the
//! scenarios read.
// Not every item is used by every scenario.
#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use envtest::{Cluster, Installation, Output, User, binding, repo_root, webhook_calls};
use serde_json::{Value, json};

use crate::apiserver_support::{self, grant_example_force_bindings, role};

pub const FORCE_PROMOTE: &str = "numaplane.numaproj.io/force-promote";
pub const MARKED_FOR_DELETION: &str = "numaplane.numaproj.io/marked-for-deletion";
pub const UPGRADE_STATE: &str = "numaplane.numaproj.io/upgrade-state";
pub const CHILDREN_WEBHOOK: &str =
    "validate-children.pipelinerollout-webhook.numaplane.numaproj.io";

/// One test module's installation and the turns on it: each module that
/// shares one declares its own.
pub struct Shared {
    installation: OnceLock<Result<Installation, String>>,
    turn: Mutex<()>,
}

impl Shared {
    /// Nothing started yet.
    pub const fn new() -> Self {
        Self {
            installation: OnceLock::new(),
            turn: Mutex::new(()),
        }
    }
}

/// The installation `module`'s scenarios share (started on first use, with
/// `setup` run before the webhooks are registered), and this scenario's
/// turn on it: they run one at a time.
pub fn shared(
    module: &'static Shared,
    setup: fn(&Cluster) -> Result<(), String>,
) -> Option<(&'static Installation, MutexGuard<'static, ()>)> {
    let env = envtest::shared(&module.installation, &envtest::test_name(), |assets| {
        Installation::start(
            assets,
            Path::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook")),
            &envtest::base_policy()?,
            setup,
        )
    })?;
    Some((
        env,
        module.turn.lock().unwrap_or_else(PoisonError::into_inner),
    ))
}

/// The CRDs these scenarios need beyond the PipelineRollout's.
pub const CRDS: [&str; 5] = [
    "tests/fixtures/numaflow/numaflow.numaproj.io_pipelines.yaml",
    "tests/fixtures/numaflow/numaflow.numaproj.io_monovertices.yaml",
    "tests/fixtures/numaflow/numaflow.numaproj.io_interstepbufferservices.yaml",
    "tests/fixtures/numaplane/numaplane.numaproj.io_monovertexrollouts.yaml",
    "tests/fixtures/numaplane/numaplane.numaproj.io_isbservicerollouts.yaml",
];

/// The children: resource (as kubectl names it) and kind.
pub const CHILDREN: [(&str, &str); 3] = [
    ("pipelines.numaflow.numaproj.io", "Pipeline"),
    ("monovertices.numaflow.numaproj.io", "MonoVertex"),
    (
        "interstepbufferservices.numaflow.numaproj.io",
        "InterStepBufferService",
    ),
];

/// The CRDs, and RBAC as Argo CD's and Numaplane's installs grant it: all
/// of the children and the rollouts to both, plus the example bindings of
/// the force-reapply ClusterRole (argocd-server and the group sre).
pub fn before_webhooks(cluster: &Cluster) -> Result<(), String> {
    for crd in CRDS {
        cluster.install_crd(&repo_root().join(crd))?;
    }
    apiserver_support::grant_components(cluster)?;
    let all = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let rules = json!([
        {"apiGroups": ["numaflow.numaproj.io"],
         "resources": ["pipelines", "monovertices", "interstepbufferservices"], "verbs": all},
        {"apiGroups": ["numaplane.numaproj.io"],
         "resources": ["monovertexrollouts", "isbservicerollouts"], "verbs": all},
    ]);
    cluster.create_all(vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "e2e-children"}, "rules": rules}),
        binding(
            None,
            "e2e-children",
            "ClusterRole",
            "e2e-children",
            &[User::ArgocdServer, User::NumaplaneController],
        ),
    ])?;
    grant_example_force_bindings(cluster)
}

/// A namespace where alice and carol may write children and rollouts.
pub fn team(cluster: &Cluster, ns: &str) {
    let verbs = ["get", "list", "watch", "create", "update", "patch"];
    let mut writer = role(
        Some(ns),
        "writer",
        &[
            "pipelinerollouts",
            "monovertexrollouts",
            "isbservicerollouts",
        ],
        &verbs,
    );
    writer["rules"].as_array_mut().expect("rules").push(json!({
        "apiGroups": ["numaflow.numaproj.io"],
        "resources": ["pipelines", "monovertices", "interstepbufferservices"],
        "verbs": verbs,
    }));
    cluster
        .create_all(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            writer,
            binding(
                Some(ns),
                "writers",
                "Role",
                "writer",
                &[User::Alice, User::Carol],
            ),
        ])
        .expect("the team namespace");
    for user in [User::Alice, User::Carol] {
        cluster
            .wait_for_access(user, "patch", "pipelines.numaflow.numaproj.io", ns, true)
            .expect("access");
    }
}

/// A child as Numaplane makes it: owned by its rollout `parent` (a real
/// one, so that Events find their object), labelled with `state`.
pub fn child(cluster: &Cluster, ns: &str, kind: &str, name: &str, state: Option<&str>) {
    let mut labels = json!({"numaplane.numaproj.io/parent-rollout-name": "demo"});
    if let Some(state) = state {
        labels[UPGRADE_STATE] = json!(state);
    }
    let object = json!({
        "apiVersion": "numaflow.numaproj.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "labels": labels,
            "annotations": {"numaplane.numaproj.io/requires-drain": "true"}},
        "spec": {},
    });
    cluster
        .kubectl(User::NumaplaneController)
        .create(&object, &[])
        .expect_success("the controller creates a child");
}

/// Argo CD's force-promote action: the merge patch its server sends.
pub fn force_promote_action(cluster: &Cluster, ns: &str, resource: &str, name: &str) -> Output {
    cluster.kubectl(User::ArgocdServer).merge_patch(
        resource,
        ns,
        name,
        &json!({"metadata": {"labels": {FORCE_PROMOTE: "true"}}}),
        &[],
    )
}

/// Argo CD's delete action on a Pipeline.
pub fn delete_action(cluster: &Cluster, ns: &str, name: &str) -> Output {
    cluster.kubectl(User::ArgocdServer).merge_patch(
        "pipelines.numaflow.numaproj.io",
        ns,
        name,
        &json!({"metadata": {"annotations": {MARKED_FOR_DELETION: "true"}}}),
        &[],
    )
}

#[track_caller]
pub fn assert_refused_by(out: &Output, webhook: &str, says: &str) {
    assert!(!out.success, "expected a refusal: {out}");
    assert!(
        out.stderr.contains(&format!(
            "admission webhook \"{webhook}\" denied the request"
        )),
        "refused, but not by {webhook}: {out}"
    );
    assert!(
        out.stderr.contains(says),
        "the refusal does not say {says:?}: {out}"
    );
}

pub fn label_of(
    cluster: &Cluster,
    resource: &str,
    ns: &str,
    name: &str,
    key: &str,
) -> Option<String> {
    let object = cluster.kubectl(User::Admin).get(resource, ns, name)?;
    object["metadata"]["labels"][key]
        .as_str()
        .map(str::to_owned)
}

/// The Events about `kind` `name` in `ns` as (reason, note), waiting up to
/// 10 s for `want` to be among them.
pub fn events_about(
    cluster: &Cluster,
    ns: &str,
    kind: &str,
    name: &str,
    want: &str,
) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<(String, String)> = apiserver_support::events_in(cluster, ns)
            .iter()
            .filter(|e| e["regarding"]["name"] == name && e["regarding"]["kind"] == kind)
            .map(|e| {
                let text = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
                (text("reason"), text("note"))
            })
            .collect();
        if found.iter().any(|(r, _)| r == want) || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The webhook's own count of the requests it answered on `/validate`.
pub fn validate_requests(env: &Installation) -> f64 {
    let mut stream = TcpStream::connect(env.webhook.admin_addr()).expect("the admin port");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("ask for the metrics");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("the metrics");
    text.lines()
        .filter(|l| {
            l.starts_with("pipelinerollout_webhook_requests_total{")
                && l.contains("webhook=\"validate\"")
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

pub fn children_calls(env: &Installation) -> f64 {
    let metrics = env
        .cluster
        .get_as_admin("/metrics")
        .expect("the API server's /metrics");
    webhook_calls(&metrics, CHILDREN_WEBHOOK).total
}

/// A rollout of `kind` (resource `resource`) named `demo`, its child
/// template labelled `labels`.
pub fn rollout_of(kind: &str, ns: &str, labels: Value) -> Value {
    let (template, spec) = match kind {
        "PipelineRollout" => {
            let mut object = apiserver_support::rollout(ns, "demo", Some(json!(300)));
            object["spec"]["pipeline"]["metadata"] = json!({"labels": labels});
            return object;
        }
        "MonoVertexRollout" => (
            "monoVertex",
            json!({"source": {"udsource": {"container": {"image": "source"}}}, "sink": {"udsink": {"container": {"image": "sink"}}}}),
        ),
        _ => (
            "interStepBufferService",
            json!({"jetstream": {"version": "2.10.3"}}),
        ),
    };
    json!({
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "demo", "namespace": ns},
        "spec": {template: {"metadata": {"labels": labels}, "spec": spec}},
    })
}
