//! The kustomize components that change what the base runs: the
//! no-stale-force-sweeper component turns the sweeper off with its RBAC,
//! and the binary reads the variable it sets.

use crate::manifests::holds_every_invariant;
use crate::manifests::install::Install;
use crate::manifests::render::{NO_SWEEPER, rendering};
use std::time::Duration;

/// What `serve` logs at start-up with WEBHOOK_RESET_STALE_FORCE=`value` and
/// no API server to reach.
fn serve_log(value: &str) -> String {
    use std::io::Read as _;
    let dir = tempfile::tempdir().expect("dir");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .arg("--dev-certs-dir")
        .arg(dir.path().join("certs"))
        .env("WEBHOOK_RESET_STALE_FORCE", value)
        .env("KUBECONFIG", dir.path().join("none"))
        .env("HOME", dir.path())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start serve");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    std::thread::sleep(Duration::from_millis(1500));
    let _ = child.kill();
    let _ = child.wait();
    reader.join().unwrap_or_default()
}

#[test]
fn the_no_stale_force_sweeper_component_turns_it_off_with_its_rbac() {
    let base = &rendering("base").install;
    let no_sweeper = rendering(NO_SWEEPER);
    let install = &no_sweeper.install;
    let sweeper_roles = |i: &Install| {
        i.cluster_roles
            .iter()
            .filter(|r| r.metadata.name.as_deref() == Some("pipelinerollout-webhook-sweeper"))
            .count()
    };
    assert_eq!(sweeper_roles(base), 1, "the base runs the sweeper");
    assert_eq!(
        sweeper_roles(install),
        0,
        "the component drops its ClusterRole"
    );
    assert!(
        !install
            .cluster_role_bindings
            .iter()
            .any(|b| b.metadata.name.as_deref() == Some("pipelinerollout-webhook-sweeper")),
        "and its binding"
    );
    let env = |i: &Install| {
        i.deployments[0].spec.template.spec.as_ref().and_then(|p| {
            p.containers[0]
                .env
                .iter()
                .flatten()
                .find(|e| e.name == "WEBHOOK_RESET_STALE_FORCE")
                .and_then(|e| e.value.clone())
        })
    };
    assert_eq!(env(base).as_deref(), Some("true"));
    assert_eq!(env(install).as_deref(), Some("false"));
    // The binary reads the variable: "true" turns the sweeper on (which,
    // with no API server here, it says it cannot run), "false" leaves it off.
    let (on, off) = (serve_log("true"), serve_log("false"));
    for log in [&on, &off] {
        assert!(
            log.contains("serving /validate and /mutate"),
            "serve started:\n{log}"
        );
    }
    assert!(on.contains("--reset-stale-force is set but no API server"));
    assert!(!off.contains("reset-stale-force"));
    holds_every_invariant(no_sweeper);
}
