//! The Helm chart through a real kube-apiserver: `helm install` of the
//! default values and of other value sets (an existing Secret, monitoring
//! on, hostNetwork, certificates the webhook manages), with every object
//! accepted; the test's webhook
//! process reached through the chart's own webhook configurations (their
//! clientConfig pointed at it by a post-renderer, as envtest does for
//! kustomize); `helm upgrade` of the policy alone; `helm uninstall`.
//!
//! The value sets share one cluster and run one at a time (one release of
//! the chart per cluster: its webhook configurations are cluster-wide).
//! Without the envtest binaries each test prints a skip line, and fails in
//! CI; helm must be on the PATH.

use crate::helm_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use envtest::{
    CRD, Cluster, Installed, User, Webhook, WebhookOptions, base_policy, shared, test_name,
};
use helm_support::{CHART, NAMESPACE, RELEASE, example, root};
use serde_json::{Value, json};

const CRDS: [&str; 4] = [
    "tests/fixtures/cert-manager/cert-manager.io_certificates.yaml",
    "tests/fixtures/cert-manager/cert-manager.io_issuers.yaml",
    "tests/fixtures/prometheus-operator/monitoring.coreos.com_servicemonitors.yaml",
    "tests/fixtures/prometheus-operator/monitoring.coreos.com_prometheusrules.yaml",
];
const POST_RENDERER: &str = "tests/fixtures/helm/envtest-url";
const TEAM: &str = "team-helm";

/// One cluster with the CRDs, a webhook process, and a scratch directory
/// for Helm's own files.
struct Env {
    webhook: Webhook,
    cluster: Cluster,
    helm_home: tempfile::TempDir,
}

static ENV: OnceLock<Result<Env, String>> = OnceLock::new();
/// One release at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn env() -> Option<&'static Env> {
    shared(&ENV, &test_name(), |assets| {
        let cluster = Cluster::start(assets)?;
        cluster.install_crd(&root().join(CRD))?;
        for crd in CRDS {
            cluster.install_crd(&root().join(crd))?;
        }
        let policy = cluster.dir().join("policy.yaml");
        std::fs::write(&policy, base_policy()?).map_err(|e| e.to_string())?;
        let webhook = Webhook::start(
            &cluster,
            WebhookOptions {
                binary: env!("CARGO_BIN_EXE_pipelinerollout-webhook").into(),
                name: "webhook".to_owned(),
                policy,
                extra_args: Vec::new(),
                kubeconfig: None,
            },
        )?;
        let helm_home = tempfile::tempdir().map_err(|e| e.to_string())?;
        let plugins = helm_home.path().join("plugins");
        copy_dir(&root().join(POST_RENDERER), &plugins.join("envtest-url"))?;
        let out = cluster
            .kubectl(User::Admin)
            .run(&["create", "namespace", TEAM]);
        if !out.success {
            return Err(format!("namespace {TEAM}: {out}"));
        }
        Ok(Env {
            webhook,
            cluster,
            helm_home,
        })
    })
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| e.to_string())?;
    for entry in std::fs::read_dir(from).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        std::fs::copy(entry.path(), to.join(entry.file_name())).map_err(|e| e.to_string())?;
    }
    Ok(())
}

impl Env {
    /// Runs helm against the cluster as admin, with Helm's files in the
    /// scratch directory.
    fn helm(&self, args: &[&str]) -> helm_support::Run {
        let home = self.helm_home.path();
        let out = Command::new("helm")
            .args(args)
            .current_dir(root())
            .env("KUBECONFIG", self.cluster.kubeconfig(User::Admin))
            .env("HELM_PLUGINS", home.join("plugins"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_DATA_HOME", home.join("data"))
            .output()
            .expect("run helm (the chart's tests need it on the PATH)");
        helm_support::Run {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `helm install` or `helm upgrade` (`verb`) of the chart with `args`,
    /// through the post-renderer; panics with Helm's message on failure.
    fn deploy(&self, verb: &str, args: &[&str]) {
        let url = self.webhook.base_url();
        let ca = self.cluster.pki().ca_bundle();
        let kubectl = self.cluster.kubectl_binary().display().to_string();
        let mut all = vec![
            verb,
            RELEASE,
            CHART,
            "--namespace",
            NAMESPACE,
            "--post-renderer",
            "envtest-url",
            "--post-renderer-args",
            &url,
            "--post-renderer-args",
            &ca,
            "--post-renderer-args",
            &kubectl,
        ];
        if verb == "install" {
            all.push("--create-namespace");
        }
        all.extend_from_slice(args);
        let run = self.helm(&all);
        assert!(
            run.success,
            "helm {verb} {args:?}:\n{}{}",
            run.stdout, run.stderr
        );
    }

    /// Runs the README's in-place fail-open commands (the lines after
    /// "# or, in place:" up to the end of their code block) as admin.
    fn run_readme_fail_open_recipe(&self) {
        let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
        let script: Vec<&str> = readme
            .lines()
            .skip_while(|l| !l.contains("manifests/overlays/fail-open     # or, in place:"))
            .skip(1)
            .take_while(|l| l.trim() != "```")
            .map(str::trim_start)
            .collect();
        assert!(!script.is_empty(), "no fail-open recipe in README.md");
        let bin = self.cluster.kubectl_binary();
        let path = format!(
            "{}:{}",
            bin.parent().unwrap_or(Path::new(".")).display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script.join("\n")])
            .env("PATH", path)
            .env("KUBECONFIG", self.cluster.kubeconfig(User::Admin))
            .output()
            .expect("run bash");
        assert!(
            out.status.success(),
            "the README's fail-open recipe failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn kubectl(&self, args: &[&str]) -> envtest::Output {
        self.cluster.kubectl(User::Admin).run(args)
    }

    /// Every object of the release exists in the API server as rendered.
    fn assert_every_object_exists(&self) -> Vec<String> {
        let manifest = self.helm(&["get", "manifest", RELEASE, "--namespace", NAMESPACE]);
        assert!(manifest.success, "helm get manifest: {}", manifest.stderr);
        let docs = helm_support::documents(&manifest.stdout, "helm get manifest");
        let mut ids = Vec::new();
        for doc in &docs {
            let kind = doc["kind"].as_str().expect("kind");
            let name = doc["metadata"]["name"].as_str().expect("name");
            let mut args = vec!["get", kind, name, "-o", "name"];
            if let Some(ns) = doc["metadata"]["namespace"].as_str() {
                args.extend(["--namespace", ns]);
            }
            let out = self.kubectl(&args);
            assert!(
                out.success,
                "{kind}/{name} of the release is not in the API server: {out}"
            );
            ids.push(format!("{kind}/{name}"));
        }
        ids
    }

    /// The API server calls the webhook through the chart's configurations:
    /// a dry run is defaulted and a string timeout denied; then a real
    /// create is stored with the default.
    fn assert_webhooks_answer(&self, name: &str) {
        let installed = Installed {
            objects: Vec::new(),
            mutating: vec!["mutate.pipelinerollout-webhook.numaplane.numaproj.io".to_owned()],
            validating: vec!["validate.pipelinerollout-webhook.numaplane.numaproj.io".to_owned()],
        };
        self.cluster
            .wait_for_webhooks(&installed, TEAM)
            .unwrap_or_else(|e| panic!("{e}\nwebhook log:\n{}", self.webhook.log_tail(20)));
        let out = self
            .cluster
            .kubectl(User::Admin)
            .create(&rollout(name, Value::Null), &["-o", "json"]);
        assert!(out.success, "create {name}: {out}");
        assert_eq!(
            out.json()["spec"]["pipeline"]["spec"]["lifecycle"]["pauseGracePeriodSeconds"],
            31_536_000,
            "the mutating webhook wrote the policy's default (none: one year)"
        );
    }

    /// The dry run NOTES.txt shows, run as it says: the default is written.
    fn assert_notes_dry_run_shows_the_default(&self) {
        let notes = self.helm(&["get", "notes", RELEASE, "--namespace", NAMESPACE]);
        assert!(notes.success, "helm get notes: {}", notes.stderr);
        let manifest: String = notes
            .stdout
            .lines()
            .skip_while(|l| !l.contains("<<'YAML'"))
            .skip(1)
            .take_while(|l| l.trim() != "YAML")
            .map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l)))
            .collect();
        let object: Value = serde_saphyr::from_str(&manifest)
            .unwrap_or_else(|e| panic!("the NOTES' manifest is not YAML ({e}):\n{manifest}"));
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .expect("namespace")
            .to_owned();
        let out = self.kubectl(&["create", "namespace", &namespace]);
        assert!(out.success, "{out}");
        let out = self
            .cluster
            .kubectl(User::Admin)
            .create(&object, &["--dry-run=server", "-o", "json"]);
        assert!(out.success, "the NOTES' dry run: {out}");
        assert_eq!(
            out.json()["spec"]["pipeline"]["spec"]["lifecycle"]["pauseGracePeriodSeconds"],
            31_536_000
        );
        let out = self.kubectl(&["delete", "namespace", &namespace, "--wait=false"]);
        assert!(out.success, "{out}");
    }

    fn uninstall(&self) {
        let run = self.helm(&["uninstall", RELEASE, "--namespace", NAMESPACE, "--wait"]);
        assert!(run.success, "helm uninstall: {}{}", run.stdout, run.stderr);
    }
}

fn rollout(name: &str, timeout: Value) -> Value {
    let mut spec = json!({"pipeline": {"spec": {}}});
    if !timeout.is_null() {
        spec["pipeline"]["spec"]["lifecycle"] = json!({"pauseGracePeriodSeconds": timeout});
    }
    json!({
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "kind": "PipelineRollout",
        "metadata": {"name": name, "namespace": TEAM},
        "spec": spec,
    })
}

fn deployment(env: &Env) -> Value {
    env.kubectl(&["get", "deployment", RELEASE, "-n", NAMESPACE, "-o", "json"])
        .json()
}

fn path(file: PathBuf) -> String {
    file.display().to_string()
}

#[test]
fn default_values_install_upgrade_the_policy_in_place_and_uninstall() {
    let Some(env) = env() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    env.deploy("install", &[]);
    let ids = env.assert_every_object_exists();
    for kind in [
        "Certificate/pipelinerollout-webhook-tls",
        "Issuer/pipelinerollout-webhook-ca",
        "ValidatingAdmissionPolicy/pipelinerollout-webhook-own-account",
    ] {
        assert!(ids.iter().any(|i| i == kind), "{kind} missing from {ids:?}");
    }
    env.assert_webhooks_answer("helm-default");
    env.assert_notes_dry_run_shows_the_default();

    // An upgrade of the policy alone: the ConfigMap changes in place, the
    // pod template (and so the Deployment's generation) does not.
    let before = deployment(env);
    env.deploy(
        "upgrade",
        &[
            "--reuse-values",
            "--set",
            "policy.mode=warn,policy.drainTimeout.max=2h",
        ],
    );
    let after = deployment(env);
    assert_eq!(
        before["spec"]["template"], after["spec"]["template"],
        "the pods would roll"
    );
    assert_eq!(
        before["metadata"]["generation"],
        after["metadata"]["generation"]
    );
    let config = env
        .kubectl(&[
            "get",
            "configmap",
            "pipelinerollout-webhook-policy",
            "-n",
            NAMESPACE,
            "-o",
            "json",
        ])
        .json();
    let policy = config["data"]["policy.yaml"].as_str().unwrap_or_default();
    assert!(
        policy.contains("mode: warn") && policy.contains("max: 2h"),
        "{policy}"
    );

    // The README's in-place fail-open recipe turns every webhook of both
    // configurations to failurePolicy Ignore, not only the first.
    env.run_readme_fail_open_recipe();
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let hooks = env.kubectl(&["get", kind, RELEASE, "-o", "json"]).json()["webhooks"].clone();
        let policies: Vec<&Value> = hooks
            .as_array()
            .map(|h| h.iter().map(|w| &w["failurePolicy"]).collect())
            .unwrap_or_default();
        assert!(
            !policies.is_empty() && policies.iter().all(|p| *p == "Ignore"),
            "{kind} after the recipe: {policies:?}"
        );
    }

    // Uninstall removes both webhook configurations: nothing blocks a
    // PipelineRollout write any more, not even one the webhook denies.
    env.uninstall();
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let out = env.kubectl(&["get", kind, RELEASE]);
        assert!(
            !out.success && out.stderr.contains("NotFound"),
            "{kind} left behind: {out}"
        );
    }
    let out = env
        .cluster
        .kubectl(User::Admin)
        .create(&rollout("after-uninstall", json!("1h")), &[]);
    assert!(
        out.success,
        "a write after the uninstall is still blocked: {out}"
    );
}

#[test]
fn an_existing_secret_install_reaches_the_webhook() {
    let Some(env) = env() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = env.kubectl(&["create", "namespace", NAMESPACE]);
    assert!(out.success || out.stderr.contains("AlreadyExists"), "{out}");
    let pair = env
        .cluster
        .pki()
        .serving(
            "pipelinerollout-webhook.pipelinerollout-webhook.svc",
            &["pipelinerollout-webhook.pipelinerollout-webhook.svc"],
        )
        .expect("serving certificate");
    let dir = tempfile::tempdir().expect("dir");
    let (cert, key) = (
        helm_support::write(dir.path(), "tls.crt", &pair.cert_pem),
        helm_support::write(dir.path(), "tls.key", &pair.key_pem),
    );
    let out = env.kubectl(&[
        "create",
        "secret",
        "tls",
        "pipelinerollout-webhook-tls",
        "-n",
        NAMESPACE,
        &format!("--cert={}", cert.display()),
        &format!("--key={}", key.display()),
    ]);
    assert!(out.success, "{out}");
    let ca = format!(
        "certificates.existingSecret.caBundle={}",
        env.cluster.pki().ca_bundle()
    );
    env.deploy(
        "install",
        &["-f", &path(example("existing-secret.yaml")), "--set", &ca],
    );
    let ids = env.assert_every_object_exists();
    assert!(
        !ids.iter()
            .any(|i| i.starts_with("Certificate/") || i.starts_with("Issuer/")),
        "{ids:?}"
    );
    env.assert_webhooks_answer("helm-existing-secret");
    env.uninstall();
    let out = env.kubectl(&[
        "delete",
        "secret",
        "pipelinerollout-webhook-tls",
        "-n",
        NAMESPACE,
    ]);
    assert!(out.success, "{out}");
}

#[test]
fn monitoring_objects_are_accepted_by_the_prometheus_operators_crds() {
    let Some(env) = env() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    env.deploy("install", &["-f", &path(example("monitoring.yaml"))]);
    let ids = env.assert_every_object_exists();
    for id in [
        "ServiceMonitor/pipelinerollout-webhook",
        "PrometheusRule/pipelinerollout-webhook",
        "ConfigMap/pipelinerollout-webhook-dashboard",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
    }
    let rule = env
        .kubectl(&[
            "get",
            "prometheusrule",
            RELEASE,
            "-n",
            NAMESPACE,
            "-o",
            "json",
        ])
        .json();
    assert!(
        rule["spec"]["groups"]
            .as_array()
            .is_some_and(|g| g.len() >= 5),
        "the API server kept the rule groups: {rule}"
    );
    env.assert_webhooks_answer("helm-monitoring");
    env.uninstall();
}

#[test]
fn a_host_network_install_is_accepted_with_its_ports() {
    let Some(env) = env() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    env.deploy(
        "install",
        &[
            "-f",
            &path(example("host-network.yaml")),
            "-f",
            &path(example("gen-ca.yaml")),
        ],
    );
    env.assert_every_object_exists();
    let pod = &deployment(env)["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["containers"][0]["ports"][0]["containerPort"], 9443);
    let service = env
        .kubectl(&["get", "service", RELEASE, "-n", NAMESPACE, "-o", "json"])
        .json();
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "https");
    env.assert_webhooks_answer("helm-host-network");
    env.uninstall();
}

/// certificates.mode selfManaged, installed without the post-renderer (the
/// test's webhook does not use the managed certificates, and no pod runs
/// here): every object is accepted, the release's service account may
/// write the caBundle and nothing else of its webhook configurations (the
/// chart's RBAC and policy), and `helm upgrade` keeps the caBundle the
/// webhook wrote, which the chart's manifests leave out.
#[test]
fn a_self_managed_install_lets_the_webhook_keep_its_ca_bundle_across_upgrades() {
    let Some(env) = env() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let example = path(example("self-managed.yaml"));
    let install = |verb: &str, extra: &[&str]| {
        let mut args = vec![
            verb,
            RELEASE,
            CHART,
            "--namespace",
            NAMESPACE,
            "-f",
            &example,
        ];
        if verb == "install" {
            args.push("--create-namespace");
        }
        args.extend_from_slice(extra);
        let run = env.helm(&args);
        assert!(run.success, "helm {args:?}:\n{}{}", run.stdout, run.stderr);
    };
    install("install", &[]);
    let ids = env.assert_every_object_exists();
    for id in [
        "Role/pipelinerollout-webhook-certs",
        "RoleBinding/pipelinerollout-webhook-certs",
        "ClusterRole/pipelinerollout-webhook-certs",
        "ClusterRoleBinding/pipelinerollout-webhook-certs",
        "ValidatingAdmissionPolicy/pipelinerollout-webhook-own-webhooks",
        "ValidatingAdmissionPolicy/pipelinerollout-webhook-own-secrets",
        "ValidatingAdmissionPolicyBinding/pipelinerollout-webhook-own-webhooks",
        "PrometheusRule/pipelinerollout-webhook",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
    }
    let account = format!("--as=system:serviceaccount:{NAMESPACE}:{RELEASE}");
    let bundle = env.cluster.pki().ca_bundle();
    let config = |kind: &str| {
        env.kubectl(&["get", kind, RELEASE, "-o", "json"]).json()["webhooks"][0].clone()
    };
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        assert!(
            config(kind)["clientConfig"]["caBundle"].is_null(),
            "{kind}: the chart writes no caBundle"
        );
        // What --manage-certs does, as the webhook's own account.
        let write = format!(
            r#"[{{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"{bundle}"}}]"#
        );
        let out = env.kubectl(&[
            "patch",
            kind,
            RELEASE,
            "--type=json",
            "-p",
            &write,
            &account,
        ]);
        assert!(
            out.success,
            "the webhook's account writes the caBundle: {out}"
        );
        // Anything else is refused by the own-webhooks policy.
        let other = r#"[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]"#;
        let out = env.kubectl(&["patch", kind, RELEASE, "--type=json", "-p", other, &account]);
        assert!(
            !out.success && out.stderr.contains("may change nothing"),
            "the webhook's account switched {kind} to fail open: {out}"
        );
    }
    // Its Secret by name; create cannot be narrowed (docs/rbac.md).
    for (verb, resource, allowed) in [
        ("update", "secrets/pipelinerollout-webhook-tls", true),
        ("watch", "secrets/pipelinerollout-webhook-tls", true),
        ("update", "secrets/someone-elses", false),
        ("get", "secrets/someone-elses", false),
        ("create", "secrets", true),
    ] {
        let out = env.kubectl(&["auth", "can-i", verb, resource, "-n", NAMESPACE, &account]);
        assert_eq!(
            out.stdout.trim() == "yes",
            allowed,
            "can the webhook's account {verb} {resource}? {out}"
        );
    }
    // Nor may it touch another webhook configuration (RBAC by name).
    let out = env.kubectl(&[
        "get",
        "validatingwebhookconfigurations",
        "--all-namespaces",
        &account,
    ]);
    assert!(
        !out.success,
        "the webhook's account lists every configuration: {out}"
    );

    install("upgrade", &["--set", "webhook.timeoutSeconds=7"]);
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let webhook = config(kind);
        assert_eq!(webhook["timeoutSeconds"], 7, "{kind}: the upgrade applied");
        assert_eq!(
            webhook["clientConfig"]["caBundle"],
            bundle.as_str(),
            "{kind}: helm upgrade dropped the caBundle the webhook wrote"
        );
        assert_eq!(webhook["failurePolicy"], "Fail", "{kind}");
    }
    let pod = &deployment(env)["spec"]["template"]["spec"];
    assert!(
        pod["containers"][0]["args"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == "--manage-certs")),
        "{pod}"
    );
    assert_eq!(pod["volumes"][0]["secret"]["optional"], true);
    env.uninstall();
}
