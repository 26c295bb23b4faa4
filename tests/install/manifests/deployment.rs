//! The Deployment and its container: replicas, the flags it passes, its
//! ports and probes, its shutdown, its resources and memory limit.

use crate::manifests::NAMESPACE;
use crate::manifests::binary::{HELP, duration, flag_value};
use crate::manifests::install::{one, selects};
use crate::manifests::pod::{http_probe, pod, ports};
use crate::manifests::render::{Rendering, on_every_rendering};
use pipelinerollout_webhook::server::size::parse_size;
use std::collections::BTreeMap;
use std::time::Duration;

/// The Deployment and its one container.
pub(crate) fn deployment_selects_at_least_two_replicas(r: &Rendering) {
    let deployment = one(&r.install.deployments, "Deployment");
    assert_eq!(deployment.metadata.namespace.as_deref(), Some(NAMESPACE));
    let spec = &deployment.spec;
    assert!(
        spec.replicas.unwrap_or(1) >= 2,
        "at least two replicas: every PipelineRollout write waits for the webhook"
    );
    let pod = pod(&r.install);
    assert!(
        selects(&spec.selector, &pod.labels),
        "the Deployment's selector matches its pods"
    );
}

#[test]
fn the_deployment_runs_at_least_two_replicas_and_selects_its_pods() {
    on_every_rendering(deployment_selects_at_least_two_replicas);
}

/// Command line: every flag is one the binary has.
pub(crate) fn args_are_flags_serve_has(r: &Rendering) {
    let container = pod(&r.install).container;
    let args = container.args.clone().unwrap_or_default();
    for arg in &args {
        if arg.starts_with("--") {
            let flag = arg.split('=').next().unwrap_or(arg);
            assert!(
                HELP.contains_key(flag),
                "the Deployment passes {flag}, which `serve` does not have"
            );
        } else {
            assert_eq!(arg, "serve", "the only bare argument is the command");
        }
    }
    assert!(
        args.iter().any(|a| a == "--log-format=json"),
        "logs as JSON in the cluster"
    );
    assert!(
        args.iter().any(|a| a == "--leader-elect=true"),
        "the replicas elect one to run the background work"
    );
}

#[test]
fn the_container_passes_only_flags_serve_has_and_logs_json() {
    on_every_rendering(args_are_flags_serve_has);
}

/// Ports: the webhook port is the --listen port, the admin port the
/// --admin-listen one.
pub(crate) fn ports_are_the_listen_ports(r: &Rendering) {
    let container = pod(&r.install).container;
    let (listen, admin) = ports(container);
    assert_eq!(listen, 8443, "the webhook listens on 8443");
    assert_eq!(admin, 8080, "the admin server listens on 8080");
    let container_ports: BTreeMap<String, i32> = container
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone().unwrap_or_default(), p.container_port))
        .collect();
    assert_eq!(container_ports.get("https"), Some(&listen));
    assert_eq!(container_ports.get("admin"), Some(&admin));
}

#[test]
fn the_container_ports_are_the_listen_and_admin_listen_ports() {
    on_every_rendering(ports_are_the_listen_ports);
}

/// Probes on the admin server.
pub(crate) fn probes_ask_the_admin_server(r: &Rendering) {
    let container = pod(&r.install).container;
    let (_, admin) = ports(container);
    assert_eq!(
        http_probe(
            container,
            container.liveness_probe.as_ref(),
            "livenessProbe"
        ),
        ("/healthz".to_owned(), admin)
    );
    assert_eq!(
        http_probe(
            container,
            container.readiness_probe.as_ref(),
            "readinessProbe"
        ),
        ("/readyz".to_owned(), admin)
    );
    if container.startup_probe.is_some() {
        let (path, port) = http_probe(container, container.startup_probe.as_ref(), "startupProbe");
        assert!(
            path == "/healthz" || path == "/readyz",
            "startupProbe path {path}"
        );
        assert_eq!(port, admin);
    }
}

#[test]
fn the_probes_ask_the_admin_server_over_plain_http() {
    on_every_rendering(probes_ask_the_admin_server);
}

/// Shutdown: kubelet waits longer than the webhook's own shutdown.
pub(crate) fn termination_outlasts_the_shutdown(r: &Rendering) {
    let pod = pod(&r.install);
    let container = pod.container;
    let delay = duration(
        &flag_value(
            container,
            &HELP,
            "--shutdown-delay",
            "WEBHOOK_SHUTDOWN_DELAY",
        )
        .expect("--shutdown-delay"),
    );
    let grace = duration(
        &flag_value(
            container,
            &HELP,
            "--shutdown-grace",
            "WEBHOOK_SHUTDOWN_GRACE",
        )
        .expect("--shutdown-grace"),
    );
    let termination = pod.spec.termination_grace_period_seconds.unwrap_or(30);
    assert!(
        Duration::from_secs(
            u64::try_from(termination).expect("terminationGracePeriodSeconds is not negative")
        ) > delay + grace,
        "terminationGracePeriodSeconds {termination} must exceed --shutdown-delay + --shutdown-grace ({:?})",
        delay + grace
    );
}

#[test]
fn the_termination_grace_period_outlasts_the_webhooks_shutdown() {
    on_every_rendering(termination_outlasts_the_shutdown);
}

/// Resources: requests, and a memory limit.
pub(crate) fn resources_request_and_limit_memory_only(r: &Rendering) {
    let container = pod(&r.install).container;
    let resources = container.resources.as_ref().expect("resources");
    let requests = resources.requests.clone().unwrap_or_default();
    let limits = resources.limits.clone().unwrap_or_default();
    assert!(
        requests.contains_key("cpu") && requests.contains_key("memory"),
        "requests cpu and memory"
    );
    assert!(limits.contains_key("memory"), "a memory limit");
    assert!(
        !limits.contains_key("cpu"),
        "no CPU limit (throttling adds latency to every write)"
    );
}

#[test]
fn the_container_requests_cpu_and_memory_and_limits_memory_only() {
    on_every_rendering(resources_request_and_limit_memory_only);
}

/// The memory limit holds the body budget plus the most the rest can
/// take at the default limits (docs/robustness.md, "Memory under a
/// flood": 1024 connections, 512 requests waiting, the process itself).
pub(crate) fn memory_limit_holds_the_body_budget(r: &Rendering) {
    let container = pod(&r.install).container;
    let resources = container.resources.as_ref().expect("resources");
    let requests = resources.requests.clone().unwrap_or_default();
    let limits = resources.limits.clone().unwrap_or_default();
    let mib = |q: &str| {
        parse_size(q).unwrap_or_else(|e| panic!("memory quantity {q}: {e}")) / (1024 * 1024)
    };
    let budget = flag_value(
        container,
        &HELP,
        "--max-inflight-body-bytes",
        "WEBHOOK_MAX_INFLIGHT_BODY_BYTES",
    )
    .expect("--max-inflight-body-bytes");
    let (budget, limit) = (mib(&budget), mib(&limits["memory"].0));
    assert!(
        limit >= budget + 80,
        "a memory limit of {limit} MiB cannot hold the {budget} MiB body budget and 80 MiB more"
    );
    assert!(
        mib(&requests["memory"].0) <= limit,
        "requests within limits"
    );
}

#[test]
fn the_memory_limit_holds_the_body_budget_and_80_mib_more() {
    on_every_rendering(memory_limit_holds_the_body_budget);
}

/// glibc returns the audit's large buffers to the system: the allocator's
/// mmap threshold is fixed, not raised after the first large free
/// (docs/performance.md, the audit of what tenants store).
pub(crate) fn allocator_returns_large_buffers(r: &Rendering) {
    let container = pod(&r.install).container;
    let threshold = container
        .env
        .iter()
        .flatten()
        .find(|v| v.name == "MALLOC_MMAP_THRESHOLD_")
        .and_then(|v| v.value.clone());
    assert_eq!(
        threshold.as_deref(),
        Some("131072"),
        "MALLOC_MMAP_THRESHOLD_ fixes glibc's threshold at 128 KiB"
    );
}

#[test]
fn the_allocator_returns_the_audits_large_buffers() {
    on_every_rendering(allocator_returns_large_buffers);
}
