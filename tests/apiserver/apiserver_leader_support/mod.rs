//! What the leader-election tests share: the installation with its test
//! Leases, the replicas and their Lease settings, and readings of their
//! metrics, the Lease and the rollouts the sweeper resets.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::apiserver_support::{
    annotate, annotation_of, idle, pausing, rollout, set_status, stored,
};
use envtest::{Cluster, Installation, User, Webhook, WebhookOptions, binding};
use serde_json::json;

/// The Lease settings the replicas run with.
pub const DURATION: Duration = Duration::from_secs(4);
pub const RENEW_DEADLINE: Duration = Duration::from_secs(3);
pub const RETRY_PERIOD: Duration = Duration::from_secs(1);
/// The sweeper's grace.
pub const GRACE: Duration = Duration::from_secs(2);
/// The namespace of the install, and so of the Lease.
pub const NAMESPACE: &str = "pipelinerollout-webhook";
/// The Lease the base install's Role names.
pub const DEFAULT_LEASE: &str = "pipelinerollout-webhook";
/// Leases of their own for the other tests (granted by this file's Role).
pub const TEST_LEASES: [&str; 9] = [
    "leader-evil",
    "leader-renewed",
    "leader-kill",
    "leader-term",
    "leader-cut",
    "leader-gone",
    "leader-clock-behind",
    "leader-clock-ahead",
    "leader-frozen",
];

pub static SHARED: OnceLock<Result<Installation, String>> = OnceLock::new();
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn shared() -> Option<&'static Installation> {
    envtest::shared(&SHARED, &envtest::test_name(), |assets| {
        let env = Installation::start(
            assets,
            Path::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook")),
            &envtest::base_policy()?,
            crate::apiserver_support::grant_components,
        )?;
        // The test Leases, as the base Role grants the default one.
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "e2e-test-leases", "namespace": NAMESPACE},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                       "resourceNames": TEST_LEASES, "verbs": ["get", "list", "watch", "patch"]}]});
        env.cluster.create_all(vec![
            role,
            binding(
                Some(NAMESPACE),
                "e2e-test-leases",
                "Role",
                "e2e-test-leases",
                &[User::Webhook],
            ),
        ])?;
        for lease in TEST_LEASES {
            env.cluster.wait_for_access(
                User::Webhook,
                "patch",
                &format!("leases.coordination.k8s.io/{lease}"),
                NAMESPACE,
                true,
            )?;
        }
        Ok(env)
    })
}

/// One test at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts replica `index` of the election for `lease`, reaching the API
/// server through `kubeconfig` (default: directly).
pub fn replica(
    env: &Installation,
    lease: &str,
    index: usize,
    kubeconfig: Option<PathBuf>,
) -> Webhook {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_pipelinerollout-webhook"));
    replica_of(env, &binary, lease, index, kubeconfig)
}

/// A script that runs the webhook with its wall clock `offset_secs` off in
/// what it writes into the Lease (`PIPELINEROLLOUT_WEBHOOK_TEST_LEASE_CLOCK_OFFSET`);
/// `exec`, so the replica's pid is the script's.
pub fn skewed_binary(env: &Installation, offset_secs: i64) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = env
        .cluster
        .dir()
        .join(format!("webhook-clock-{offset_secs}.sh"));
    let script = format!(
        "#!/bin/sh\nPIPELINEROLLOUT_WEBHOOK_TEST_LEASE_CLOCK_OFFSET={offset_secs} exec {} \"$@\"\n",
        env!("CARGO_BIN_EXE_pipelinerollout-webhook")
    );
    std::fs::write(&path, script).expect("write the script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// [`replica`], running `binary`.
pub fn replica_of(
    env: &Installation,
    binary: &Path,
    lease: &str,
    index: usize,
    kubeconfig: Option<PathBuf>,
) -> Webhook {
    let secs = |d: Duration| format!("{}s", d.as_secs());
    let args = [
        "--leader-elect".to_owned(),
        format!("--leader-elect-namespace={NAMESPACE}"),
        format!("--leader-elect-lease-name={lease}"),
        format!("--leader-elect-lease-duration={}", secs(DURATION)),
        format!("--leader-elect-renew-deadline={}", secs(RENEW_DEADLINE)),
        format!("--leader-elect-retry-period={}", secs(RETRY_PERIOD)),
        "--reset-stale-force".to_owned(),
        format!("--stale-force-grace={}", secs(GRACE)),
    ];
    Webhook::start(
        &env.cluster,
        WebhookOptions {
            binary: binary.to_owned(),
            name: format!("{lease}-{index}"),
            policy: env.cluster.dir().join("policy.yaml"),
            extra_args: args.to_vec(),
            kubeconfig,
        },
    )
    .unwrap_or_else(|e| panic!("replica {index} of {lease} did not start: {e}"))
}

/// The value of one series (`name` or `name{labels}`) in a replica's
/// `/metrics`; 0 when absent or unreadable (a stopped replica leads
/// nothing).
pub fn metric(webhook: &Webhook, series: &str) -> f64 {
    let Ok((200, text)) = webhook.admin_get("/metrics") else {
        return 0.0;
    };
    text.lines()
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok()).flatten()
        })
        .unwrap_or(0.0)
}

pub fn leads(webhook: &Webhook) -> bool {
    metric(webhook, "pipelinerollout_webhook_leader") == 1.0
}

pub fn transitions(webhook: &Webhook, transition: &str) -> f64 {
    metric(
        webhook,
        &format!("pipelinerollout_webhook_leader_transitions_total{{transition=\"{transition}\"}}"),
    )
}

/// How long a replica has followed others without holding the Lease.
pub fn followed_seconds(webhook: &Webhook) -> f64 {
    metric(
        webhook,
        "pipelinerollout_webhook_leader_lease_followed_seconds",
    )
}

/// Creates the Lease `lease` held by `holder` for `seconds`, as the
/// webhook's own service account (its Role lets it create any Lease): what
/// a stolen token of the webhook can write.
pub fn lease_written_by_the_webhooks_token(
    cluster: &Cluster,
    lease: &str,
    holder: &str,
    seconds: i32,
) {
    let object = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": lease, "namespace": NAMESPACE},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds}});
    cluster
        .kubectl(User::Webhook)
        .create(&object, &[])
        .expect_success("the webhook's token writes the Lease");
}

pub fn lease_errors(webhook: &Webhook) -> f64 {
    metric(webhook, "pipelinerollout_webhook_leader_lease_errors_total")
}

pub fn sweeper_resets(webhook: &Webhook) -> f64 {
    metric(
        webhook,
        "pipelinerollout_webhook_force_resets_total{by=\"sweeper\"}",
    )
}

/// Waits until exactly one of `replicas` (those still running) leads;
/// its index.
pub fn one_leader(replicas: &[Webhook], timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    loop {
        let leading: Vec<usize> = (0..replicas.len())
            .filter(|&i| replicas[i].pid().is_some() && leads(&replicas[i]))
            .collect();
        if let [only] = leading[..] {
            return only;
        }
        assert!(
            Instant::now() < deadline,
            "not exactly one leader after {timeout:?} (leading: {leading:?}); logs:\n{}",
            logs(replicas)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn logs(replicas: &[Webhook]) -> String {
    replicas
        .iter()
        .enumerate()
        .map(|(i, w)| format!("--- replica {i}:\n{}", w.log_tail(25)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The Lease's holder, as `kubectl get lease` shows it.
pub fn holder(cluster: &Cluster, lease: &str) -> Option<String> {
    let object = cluster
        .kubectl(User::Admin)
        .get("lease", NAMESPACE, lease)?;
    object["spec"]["holderIdentity"].as_str().map(str::to_owned)
}

/// The identity a replica without POD_NAME takes: host name and pid.
pub fn identity_of(webhook: &Webhook) -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    format!("{host}_{}", webhook.pid().expect("running"))
}

/// Makes `ns/name` with a force whose pause is over (no write after the
/// pause ends): what the sweeper resets.
pub fn stale_force(cluster: &Cluster, ns: &str, name: &str) {
    let admin = cluster.kubectl(User::Admin);
    let out = admin.run(&["create", "namespace", ns]);
    assert!(out.success || out.stderr.contains("AlreadyExists"), "{out}");
    admin
        .create(&rollout(ns, name, Some(json!(300))), &[])
        .expect_success("admin creates a rollout");
    set_status(cluster, ns, name, pausing(false));
    annotate(&admin, ns, name, Some("true")).expect_success("a break-glass force");
    set_status(cluster, ns, name, idle());
}

pub fn is_reset(cluster: &Cluster, ns: &str, name: &str) -> bool {
    annotation_of(&stored(&cluster.kubectl(User::Admin), ns, name)) == Some("false")
}

/// How far the Lease's `renewTime` is from this machine's clock, in
/// seconds (positive: ahead).
pub fn renew_time_offset(cluster: &Cluster, lease: &str) -> i64 {
    let object = cluster
        .kubectl(User::Admin)
        .get("lease", NAMESPACE, lease)
        .expect("the Lease");
    let renew: k8s_openapi::jiff::Timestamp = object["spec"]["renewTime"]
        .as_str()
        .expect("renewTime")
        .parse()
        .expect("an RFC 3339 time");
    (renew - k8s_openapi::jiff::Timestamp::now())
        .total(k8s_openapi::jiff::Unit::Second)
        .expect("seconds")
        .round() as i64
}

/// Sends a stopped replica SIGCONT when dropped, so that a failed assertion
/// never leaves a frozen process behind.
pub struct Thaw<'a>(pub &'a Webhook);

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        let _ = self.0.signal("CONT");
    }
}
