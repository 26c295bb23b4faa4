//! Checks of the harness itself: the optional kube-controller-manager, an
//! API server stopped and started again, and that a killed test process
//! leaves nothing behind. Each starts a cluster
//! of its own (no webhook). Without the binaries they print a skip line
//! each, and fail in CI.

use std::time::{Duration, Instant};

use serde_json::json;

use envtest::{Assets, Cluster, User, require};

#[test]
fn harness_starts_kube_controller_manager_on_request() {
    let name = envtest::test_name();
    let Some(assets) = require(&name, Assets::find()) else {
        return;
    };
    if require(&name, Assets::kube_controller_manager()).is_none() {
        return;
    }
    let cluster = &Cluster::start(&assets).expect("the test cluster starts");
    cluster
        .start_controller_manager("validatingadmissionpolicy-status-controller")
        .expect("kube-controller-manager starts");
    // Type checking is written by the controller manager, not the API
    // server: comparing a string (a ConfigMap's data value) with an int is
    // only found with the ConfigMap's schema. This policy has no binding,
    // so it affects nothing.
    let configmaps = json!({"apiGroups": [""], "apiVersions": ["v1"],
        "operations": ["CREATE"], "resources": ["configmaps"]});
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "envtest-type-check"},
        "spec": {
            "matchConstraints": {"resourceRules": [configmaps]},
            "validations": [{"expression": "object.data.nosuchfield < 100"}],
        },
    });
    let admin = cluster.kubectl(User::Admin);
    admin
        .create(&policy, &[])
        .expect_success("create a ValidatingAdmissionPolicy");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = admin
            .run(&[
                "get",
                "validatingadmissionpolicy",
                "envtest-type-check",
                "-o",
                "json",
            ])
            .expect_success("read the policy");
        let warnings = &out.json()["status"]["typeChecking"]["expressionWarnings"];
        if let Some(first) = warnings.get(0) {
            assert_eq!(
                first["fieldRef"], "spec.validations[0].expression",
                "{warnings}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no type checking after 30 s: {out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Set for the helper below: where it writes the pids and scratch directory.
const KILLED_HELPER: &str = "ENVTEST_KILLED_HELPER_REPORT";

#[test]
fn harness_leaves_no_process_behind_when_the_test_process_is_killed() {
    let name = envtest::test_name();
    if require(&name, Assets::find()).is_none() {
        return;
    }
    // libtest names tests by their module path without the crate's name.
    let helper = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::harness_killed_helper"),
        None => "harness_killed_helper".to_owned(),
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("report");
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", &helper, "--ignored", "--test-threads=1"])
        .env(KILLED_HELPER, &report)
        // Its scratch directory must go, whatever this run keeps.
        .env_remove(envtest::KEEP)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run the helper");
    let deadline = Instant::now() + Duration::from_secs(120);
    let text = loop {
        if let Ok(text) = std::fs::read_to_string(&report) {
            break text;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the helper {helper} exited ({status}) before starting its cluster");
        }
        assert!(
            Instant::now() < deadline,
            "the helper did not start its cluster"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    child.kill().expect("SIGKILL the helper");
    child.wait().expect("reap the helper");

    let mut lines = text.lines();
    let scratch = std::path::PathBuf::from(lines.next().expect("scratch directory"));
    let pids: Vec<u32> = lines.map(|l| l.parse().expect("pid")).collect();
    assert!(pids.len() >= 2, "etcd and kube-apiserver: {pids:?}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let alive: Vec<u32> = pids.iter().copied().filter(|p| running(*p)).collect();
        if alive.is_empty() && !scratch.exists() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "20 s after the test process was killed, still running: {alive:?}; \
             scratch directory left: {}",
            scratch.exists()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Started by the test above, which kills it; does nothing otherwise.
#[test]
#[ignore = "helper of harness_leaves_no_process_behind_when_the_test_process_is_killed"]
fn harness_killed_helper() {
    let Some(report) = std::env::var_os(KILLED_HELPER) else {
        return;
    };
    let assets = Assets::find().expect("assets");
    let cluster = Cluster::start(&assets).expect("the helper's cluster");
    let mut text = format!("{}\n", cluster.dir().display());
    for pid in cluster.server_pids() {
        text.push_str(&format!("{pid}\n"));
    }
    let partial = std::path::PathBuf::from(&report).with_extension("partial");
    std::fs::write(&partial, text).expect("write the report");
    std::fs::rename(&partial, &report).expect("publish the report");
    // Killed long before this ends.
    std::thread::sleep(Duration::from_secs(120));
}

/// Whether `pid` is a live process (a zombie holds nothing and counts as gone).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn harness_stops_and_restarts_the_api_server_keeping_what_is_stored() {
    let name = envtest::test_name();
    let Some(assets) = require(&name, Assets::find()) else {
        return;
    };
    let cluster = &Cluster::start(&assets).expect("the test cluster starts");
    let admin = cluster.kubectl(User::Admin);
    let map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kept", "namespace": "default"}, "data": {"k": "v"}});
    admin.create(&map, &[]).expect_success("create a ConfigMap");
    cluster.stop_apiserver();
    assert!(
        cluster.get_as_admin("/readyz").is_err(),
        "the API server answers after being stopped"
    );
    cluster
        .restart_apiserver()
        .expect("the API server starts again");
    let kept = admin
        .get("configmaps", "default", "kept")
        .expect("the ConfigMap is still stored");
    assert_eq!(kept["data"]["k"], "v");
}
