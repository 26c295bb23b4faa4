//! The install manifests in `manifests/`: `kubectl kustomize` renders the
//! base and every overlay (the self-signed one after `gen-certs`), every
//! rendered object parses as its k8s-openapi type without losing a field,
//! and the invariants that tie the manifests to the server hold: webhook
//! paths and ports, probes, RBAC, certificates, security context, rules,
//! timeouts, failurePolicy and the policy file.
//!
//! Each invariant is a test of its own that checks every rendering; each
//! rendering also has a test that checks every invariant on it. The
//! renderings are made once per test process (`RENDERINGS`).
//!
//! Needs `kubectl` (with its built-in kustomize) on the PATH; without it the
//! tests fail and say so.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, PodSpec, Probe, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use pipelinerollout_webhook::server::budget::parse_size;
use serde::de::DeserializeOwned;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_pipelinerollout-webhook");

const NAMESPACE: &str = "pipelinerollout-webhook";
const WEBHOOK_CONFIG: &str = "pipelinerollout-webhook";
const MUTATE_NAME: &str = "mutate.pipelinerollout-webhook.numaplane.numaproj.io";
const VALIDATE_NAME: &str = "validate.pipelinerollout-webhook.numaplane.numaproj.io";
const INJECT_CA: &str = "cert-manager.io/inject-ca-from";
const POLICY_CONFIGMAP: &str = "pipelinerollout-webhook-policy";
const TLS_SECRET: &str = "pipelinerollout-webhook-tls";

/// What to do without kubectl: fail, saying so, rather than skip.
const NO_KUBECTL: &str = "kubectl is required for tests/manifests.rs (it renders manifests/ with \
    `kubectl kustomize`) but is not on the PATH: install kubectl 1.24 or newer (apt-get install kubectl \
    from the Kubernetes apt repository, or the binary from the Kubernetes release; Debian's own \
    kubernetes-client 1.20 bundles a kustomize too old for these manifests)";

/// How the API server learns the CA of the serving certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CaSource {
    /// Not at all (the base, which is not installed alone).
    None,
    /// cert-manager's CA injector, through the inject-ca-from annotation.
    CertManager,
    /// `gen-certs`' ca-bundle.patch.yaml.
    GenCerts,
    /// The webhook itself (`serve --manage-certs`).
    SelfManaged,
}

/// What an overlay must render to.
#[derive(Debug, Clone, Copy)]
struct Expect {
    ca: CaSource,
    failure_policy: &'static str,
}

/// Every overlay under manifests/overlays, and what it renders to. A new
/// overlay must be added here (the test `every_overlay_is_checked` says so).
const OVERLAYS: [(&str, Expect); 4] = [
    (
        "cert-manager",
        Expect {
            ca: CaSource::CertManager,
            failure_policy: "Fail",
        },
    ),
    (
        "self-signed",
        Expect {
            ca: CaSource::GenCerts,
            failure_policy: "Fail",
        },
    ),
    (
        "fail-open",
        Expect {
            ca: CaSource::CertManager,
            failure_policy: "Ignore",
        },
    ),
    (
        "self-managed",
        Expect {
            ca: CaSource::SelfManaged,
            failure_policy: "Fail",
        },
    ),
];

// ---------------------------------------------------------------------------
// Rendering

/// A copy of `manifests/` in a temporary directory, so that generated
/// certificates never land in the work tree.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
        copy_dir(&source, &dir.path().join("manifests"));
        Self { dir }
    }

    fn manifests(&self) -> PathBuf {
        self.dir.path().join("manifests")
    }

    fn certs_dir(&self) -> PathBuf {
        self.manifests().join("overlays/self-signed/certs")
    }

    /// Runs `gen-certs` into the copy of the self-signed overlay.
    fn gen_certs(&self) {
        let out = Command::new(BIN)
            .arg("gen-certs")
            .arg("--out")
            .arg(self.certs_dir())
            // Certificates a developer generated in the work tree were
            // copied along; replace them.
            .arg("--force")
            .output()
            .expect("run gen-certs");
        assert!(
            out.status.success(),
            "gen-certs failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `kubectl kustomize` of a directory below `manifests/`, as documents.
    fn render(&self, dir: &str) -> Vec<Value> {
        let path = self.manifests().join(dir);
        let out = match Command::new("kubectl").arg("kustomize").arg(&path).output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{NO_KUBECTL}"),
            Err(e) => panic!("cannot run kubectl: {e}"),
        };
        assert!(
            out.status.success(),
            "`kubectl kustomize manifests/{dir}` failed ({}):\n{}\nkubectl: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            kubectl_version()
        );
        let text = String::from_utf8(out.stdout).expect("kustomize prints UTF-8");
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("manifests/{dir} renders invalid YAML: {e}\n{text}"));
        docs.into_iter().filter(|d| !d.is_null()).collect()
    }
}

fn kubectl_version() -> String {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).replace('\n', "; "))
        .unwrap_or_else(|e| e.to_string())
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create directory");
    for entry in fs::read_dir(from).expect("read manifests directory") {
        let entry = entry.expect("directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

// ---------------------------------------------------------------------------
// Parsing into k8s-openapi types

/// The rendered objects, by kind.
#[derive(Default)]
struct Install {
    namespaces: Vec<Namespace>,
    service_accounts: Vec<ServiceAccount>,
    cluster_roles: Vec<ClusterRole>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
    config_maps: Vec<ConfigMap>,
    secrets: Vec<Secret>,
    deployments: Vec<Deployment>,
    pdbs: Vec<PodDisruptionBudget>,
    services: Vec<Service>,
    network_policies: Vec<NetworkPolicy>,
    mutating: Vec<MutatingWebhookConfiguration>,
    validating: Vec<ValidatingWebhookConfiguration>,
    policies: Vec<ValidatingAdmissionPolicy>,
    policy_bindings: Vec<ValidatingAdmissionPolicyBinding>,
    /// cert-manager.io objects, kept as JSON.
    cert_manager: Vec<Value>,
}

/// Parses `doc` as `T` and checks that nothing was dropped on the way: a
/// misspelt or misplaced field would parse (k8s-openapi ignores unknown
/// keys) but not survive the round trip.
fn typed<T: DeserializeOwned + serde::Serialize>(doc: &Value, what: &str) -> T {
    let parsed: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{what} does not parse as its k8s-openapi type: {e}"));
    let back = serde_json::to_value(&parsed).expect("serialize");
    let mut lost = Vec::new();
    diff(doc, &back, String::new(), &mut lost);
    assert!(
        lost.is_empty(),
        "{what}: fields unknown to the Kubernetes API (misspelt or misplaced?): {lost:?}"
    );
    parsed
}

/// Paths in `original` that `round_trip` lacks or changed.
fn diff(original: &Value, round_trip: &Value, path: String, out: &mut Vec<String>) {
    match (original, round_trip) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let sub = format!("{path}.{key}");
                match b.get(key) {
                    Some(other) => diff(value, other, sub, out),
                    None => out.push(sub),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(x, y, format!("{path}[{i}]"), out);
            }
        }
        (a, b) if a == b => {}
        _ => out.push(format!("{path}: {original} became {round_trip}")),
    }
}

fn parse(docs: &[Value]) -> Install {
    let mut install = Install::default();
    for doc in docs {
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        let kind = doc["kind"].as_str().unwrap_or_default();
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        let what = format!("{kind} {name} ({api_version})");
        match (api_version, kind) {
            ("v1", "Namespace") => install.namespaces.push(typed(doc, &what)),
            ("v1", "ServiceAccount") => install.service_accounts.push(typed(doc, &what)),
            ("v1", "ConfigMap") => install.config_maps.push(typed(doc, &what)),
            ("v1", "Secret") => {
                // kustomize folds long base64 over several lines; the API
                // server's decoder skips the line breaks, k8s-openapi's
                // does not.
                let mut doc = doc.clone();
                if let Some(data) = doc.get_mut("data").and_then(Value::as_object_mut) {
                    for value in data.values_mut() {
                        if let Some(text) = value.as_str() {
                            *value = Value::String(text.replace(['\n', '\r'], ""));
                        }
                    }
                }
                install.secrets.push(typed(&doc, &what));
            }
            ("v1", "Service") => install.services.push(typed(doc, &what)),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
                install.cluster_roles.push(typed(doc, &what));
            }
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
                install.cluster_role_bindings.push(typed(doc, &what));
            }
            ("rbac.authorization.k8s.io/v1", "Role") => install.roles.push(typed(doc, &what)),
            ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
                install.role_bindings.push(typed(doc, &what));
            }
            ("apps/v1", "Deployment") => install.deployments.push(typed(doc, &what)),
            ("policy/v1", "PodDisruptionBudget") => install.pdbs.push(typed(doc, &what)),
            ("networking.k8s.io/v1", "NetworkPolicy") => {
                install.network_policies.push(typed(doc, &what));
            }
            ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
                install.mutating.push(typed(doc, &what));
            }
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
                install.validating.push(typed(doc, &what));
            }
            ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
                install.policies.push(typed(doc, &what));
            }
            ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
                install.policy_bindings.push(typed(doc, &what));
            }
            ("cert-manager.io/v1", "Issuer" | "Certificate") => {
                install.cert_manager.push(doc.clone());
            }
            _ => panic!("unexpected object in the install: {what}"),
        }
    }
    install
}

// ---------------------------------------------------------------------------
// The server's own defaults, read from the binary

/// `serve --help`, split per flag.
fn serve_help() -> BTreeMap<String, String> {
    let out = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .expect("run serve --help");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let mut flags = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if line.starts_with("  ") && trimmed.starts_with('-') && line.len() - trimmed.len() <= 6 {
            if let Some((flag, body)) = current.take() {
                flags.insert(flag, body);
            }
            let flag = trimmed
                .split([' ', ',', '['])
                .find(|w| w.starts_with("--"))
                .unwrap_or(trimmed)
                .to_owned();
            current = Some((flag, String::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((flag, body)) = current {
        flags.insert(flag, body);
    }
    flags
}

/// The default of `flag` (e.g. `--listen`) as `serve --help` states it.
fn default_of(help: &BTreeMap<String, String>, flag: &str) -> Option<String> {
    let body = help
        .get(flag)
        .unwrap_or_else(|| panic!("serve has no flag {flag}"));
    let start = body.find("[default: ")? + "[default: ".len();
    let end = body[start..].find(']')? + start;
    Some(body[start..end].to_owned())
}

/// The value the container gives `flag`: from its args (`--flag=v` or
/// `--flag v`), its environment (`env`), or else the binary's default.
fn flag_value(
    container: &Container,
    help: &BTreeMap<String, String>,
    flag: &str,
    env: &str,
) -> Option<String> {
    let args = container.args.clone().unwrap_or_default();
    let prefix = format!("{flag}=");
    for (i, arg) in args.iter().enumerate() {
        if let Some(value) = arg.strip_prefix(&prefix) {
            return Some(value.to_owned());
        }
        if arg == flag {
            return args.get(i + 1).cloned();
        }
    }
    if let Some(var) = container
        .env
        .iter()
        .flatten()
        .find(|v| v.name == env)
        .and_then(|v| v.value.clone())
    {
        return Some(var);
    }
    default_of(help, flag)
}

fn port_of(address: &str) -> i32 {
    address
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("{address} has no port"))
}

fn duration(text: &str) -> Duration {
    humantime::parse_duration(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

// ---------------------------------------------------------------------------
// Helpers over the typed objects

fn one<'a, T>(items: &'a [T], what: &str) -> &'a T {
    assert_eq!(items.len(), 1, "expected exactly one {what}");
    &items[0]
}

fn named<
    'a,
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
>(
    items: &'a [T],
    name: &str,
    what: &str,
) -> &'a T {
    let found: Vec<&T> = items
        .iter()
        .filter(|i| i.metadata().name.as_deref() == Some(name))
        .collect();
    assert_eq!(found.len(), 1, "expected exactly one {what} named {name}");
    found[0]
}

/// Whether `selector` (matchLabels only) selects `labels`.
fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    assert!(
        selector.match_expressions.is_none(),
        "selectors here use matchLabels only"
    );
    let wanted = selector.match_labels.clone().unwrap_or_default();
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The container port that `port` (a number or a name) stands for.
fn resolve_port(container: &Container, port: &IntOrString) -> i32 {
    let ports = container.ports.clone().unwrap_or_default();
    match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => {
            ports
                .iter()
                .find(|p| p.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("container has no port named {name}"))
                .container_port
        }
    }
}

fn http_probe(container: &Container, probe: Option<&Probe>, what: &str) -> (String, i32) {
    let probe = probe.unwrap_or_else(|| panic!("container has no {what}"));
    let get = probe
        .http_get
        .as_ref()
        .unwrap_or_else(|| panic!("{what} is not an httpGet"));
    assert_eq!(
        get.scheme.as_deref().unwrap_or("HTTP"),
        "HTTP",
        "{what}: the admin port is plain HTTP"
    );
    (
        get.path.clone().unwrap_or_default(),
        resolve_port(container, &get.port),
    )
}

fn sorted(items: Option<&Vec<String>>) -> Vec<String> {
    let mut items = items.cloned().unwrap_or_default();
    items.sort();
    items
}

// ---------------------------------------------------------------------------
// The renderings, made once per test process

/// The certificates `gen-certs` wrote for the self-signed overlay.
struct Certs {
    ca: Vec<u8>,
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// One install as `kubectl kustomize` renders it, parsed, with what it
/// must render to.
struct Rendering {
    /// The directory below `manifests/` (`base`, `overlays/fail-open`, ...).
    dir: String,
    expect: Expect,
    install: Install,
    /// What `gen-certs` wrote before rendering (`CaSource::GenCerts` only).
    certs: Option<Certs>,
    /// What `check-policy` prints for the policy ConfigMap's policy; run
    /// by the first test that needs it.
    effective_policy: OnceLock<String>,
}

/// An overlay of the base with the no-stale-force-sweeper component,
/// written into the workspace (`the_no_stale_force_sweeper_component_...`).
const NO_SWEEPER: &str = "overlays/no-sweeper-test";

/// An overlay of the base with the opt-in components
/// force-reapply-bindings and rollouts-in-skipped-namespaces, written into
/// the workspace.
const WITH_OPT_INS: &str = "overlays/opt-ins-test";

/// What the base and the no-sweeper overlay must render to.
const BASE_EXPECT: Expect = Expect {
    ca: CaSource::None,
    failure_policy: "Fail",
};

/// Every install the invariants are checked on: the base, the no-sweeper
/// overlay and every overlay in [`OVERLAYS`], rendered in parallel from one
/// copy of `manifests/` (the workspace is removed once they are read). A
/// failure is kept as its message, which every test that needs the
/// renderings reports.
static RENDERINGS: LazyLock<Result<Vec<Rendering>, String>> = LazyLock::new(|| {
    std::panic::catch_unwind(render_all).map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "rendering the manifests panicked".to_owned())
    })
});

/// `serve --help`, split per flag (read once).
static HELP: LazyLock<BTreeMap<String, String>> = LazyLock::new(serve_help);

fn renderings() -> &'static [Rendering] {
    match &*RENDERINGS {
        Ok(renderings) => renderings,
        Err(why) => panic!("{why}"),
    }
}

/// The rendering of `dir` (below `manifests/`).
fn rendering(dir: &str) -> &'static Rendering {
    renderings()
        .iter()
        .find(|r| r.dir == dir)
        .unwrap_or_else(|| panic!("manifests/{dir} is not among the renderings"))
}

fn render_all() -> Vec<Rendering> {
    let ws = Workspace::new();
    let overlay = ws.manifests().join(NO_SWEEPER);
    fs::create_dir_all(&overlay).expect("overlay dir");
    fs::write(
        overlay.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../base\ncomponents:\n- ../../components/no-stale-force-sweeper\n",
    )
    .expect("write overlay");
    let overlay = ws.manifests().join(WITH_OPT_INS);
    fs::create_dir_all(&overlay).expect("overlay dir");
    fs::write(
        overlay.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../base\ncomponents:\n- ../../components/force-reapply-bindings\n- ../../components/rollouts-in-skipped-namespaces\n",
    )
    .expect("write overlay");
    let mut wanted = vec![
        ("base".to_owned(), BASE_EXPECT),
        (NO_SWEEPER.to_owned(), BASE_EXPECT),
        (WITH_OPT_INS.to_owned(), BASE_EXPECT),
    ];
    for (name, expect) in &OVERLAYS {
        wanted.push((format!("overlays/{name}"), *expect));
    }
    let mut certs = wanted
        .iter()
        .any(|(_, e)| e.ca == CaSource::GenCerts)
        .then(|| {
            ws.gen_certs();
            let read = |file: &str| fs::read(ws.certs_dir().join(file)).expect(file);
            Certs {
                ca: read("ca.crt"),
                cert: read("tls.crt"),
                key: read("tls.key"),
            }
        });
    let ws = &ws;
    let rendered: Vec<Vec<Value>> = std::thread::scope(|scope| {
        let threads: Vec<_> = wanted
            .iter()
            .map(|(dir, _)| scope.spawn(move || ws.render(dir)))
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    rendered
        .into_iter()
        .zip(wanted)
        .map(|(docs, (dir, expect))| Rendering {
            install: parse(&docs),
            certs: if expect.ca == CaSource::GenCerts {
                certs.take()
            } else {
                None
            },
            dir,
            expect,
            effective_policy: OnceLock::new(),
        })
        .collect()
}

/// Runs `check` on every rendering, saying on stderr (shown when the test
/// fails) which one it checks.
fn on_every_rendering(check: fn(&Rendering)) {
    for rendering in renderings() {
        eprintln!("checking manifests/{}", rendering.dir);
        check(rendering);
    }
}

// ---------------------------------------------------------------------------
// The objects the invariants look at

/// The Deployment's pod: its labels, its spec and its one container.
struct Pod<'a> {
    labels: BTreeMap<String, String>,
    spec: &'a PodSpec,
    container: &'a Container,
}

fn pod(install: &Install) -> Pod<'_> {
    let deployment = one(&install.deployments, "Deployment");
    let template = &deployment.spec.template;
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .expect("pod labels");
    let spec: &PodSpec = template.spec.as_ref().expect("pod spec");
    let container = one(&spec.containers, "container");
    Pod {
        labels,
        spec,
        container,
    }
}

/// The webhook port (the `--listen` port) and the admin port (the
/// `--admin-listen` one) the container uses.
fn ports(container: &Container) -> (i32, i32) {
    let listen = flag_value(container, &HELP, "--listen", "WEBHOOK_LISTEN").expect("--listen");
    let admin = flag_value(container, &HELP, "--admin-listen", "WEBHOOK_ADMIN_LISTEN")
        .expect("--admin-listen");
    (port_of(&listen), port_of(&admin))
}

/// The container port the Service's `port` targets.
fn service_port(service: &Service, container: &Container, port: i32) -> i32 {
    let service_ports = service
        .spec
        .as_ref()
        .expect("Service spec")
        .ports
        .clone()
        .unwrap_or_default();
    let p = service_ports
        .iter()
        .find(|p| p.port == port)
        .unwrap_or_else(|| panic!("the Service has no port {port}"));
    resolve_port(
        container,
        p.target_port.as_ref().unwrap_or(&IntOrString::Int(port)),
    )
}

/// The volume and the file name behind `file` (a path a flag names),
/// checked to be a read-only directory mount.
fn mounted_dir(container: &Container, file: &str) -> (String, String) {
    let mounts = container.volume_mounts.clone().unwrap_or_default();
    let path = Path::new(file);
    let dir = path
        .parent()
        .and_then(Path::to_str)
        .unwrap_or_else(|| panic!("{file} has no directory"))
        .to_owned();
    let mount = mounts
        .iter()
        .find(|m| m.mount_path.trim_end_matches('/') == dir)
        .unwrap_or_else(|| panic!("nothing is mounted at {dir} (for {file})"));
    assert!(
        mount.sub_path.is_none() && mount.sub_path_expr.is_none(),
        "{dir} is mounted as a directory (subPath would never be updated)"
    );
    assert_eq!(mount.read_only, Some(true), "{dir} is mounted read-only");
    (
        mount.name.clone(),
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_else(|| panic!("{file} has no file name"))
            .to_owned(),
    )
}

/// The ConfigMap the `--policy` file comes from, and its key.
fn policy_source(pod: &Pod<'_>) -> (String, String) {
    let volumes = pod.spec.volumes.clone().unwrap_or_default();
    let policy_file =
        flag_value(pod.container, &HELP, "--policy", "WEBHOOK_POLICY").expect("--policy");
    let (policy_volume, policy_key) = mounted_dir(pod.container, &policy_file);
    let policy_cm_name = volumes
        .iter()
        .find(|v| v.name == policy_volume)
        .and_then(|v| v.config_map.as_ref())
        .map(|c| c.name.clone())
        .expect("the policy volume is a ConfigMap");
    (policy_cm_name, policy_key)
}

impl Rendering {
    /// What `check-policy` prints for the policy in the policy ConfigMap.
    fn effective_policy(&self) -> &str {
        self.effective_policy.get_or_init(|| {
            let (policy_cm_name, policy_key) = policy_source(&pod(&self.install));
            let policy_cm = named(&self.install.config_maps, &policy_cm_name, "ConfigMap");
            let policy_text = policy_cm
                .data
                .as_ref()
                .and_then(|d| d.get(&policy_key))
                .unwrap_or_else(|| panic!("ConfigMap {policy_cm_name} has no {policy_key}"));
            check_policy(policy_text)
        })
    }
}

/// The webhook configurations and their one webhook each.
struct Webhooks<'a> {
    mutating: &'a MutatingWebhookConfiguration,
    validating: &'a ValidatingWebhookConfiguration,
    mutate: MutatingWebhook,
    validate: ValidatingWebhook,
}

fn webhooks(install: &Install) -> Webhooks<'_> {
    let mutating = named(
        &install.mutating,
        WEBHOOK_CONFIG,
        "MutatingWebhookConfiguration",
    );
    let validating = named(
        &install.validating,
        WEBHOOK_CONFIG,
        "ValidatingWebhookConfiguration",
    );
    let mutate = one(
        &mutating.webhooks.clone().unwrap_or_default(),
        "mutating webhook",
    )
    .clone();
    let validate = validating
        .webhooks
        .iter()
        .flatten()
        .find(|w| w.name == VALIDATE_NAME)
        .unwrap_or_else(|| panic!("no validating webhook {VALIDATE_NAME}"))
        .clone();
    Webhooks {
        mutating,
        validating,
        mutate,
        validate,
    }
}

fn service_name(service: &Service) -> String {
    service.metadata.name.clone().expect("the Service's name")
}

// ---------------------------------------------------------------------------
// The invariants, one function each; every rendering must hold all of them

/// Every invariant, on one rendering.
fn holds_every_invariant(r: &Rendering) {
    for check in INVARIANTS {
        check(r);
    }
}

/// The invariants, in the order they are read.
const INVARIANTS: [fn(&Rendering); 21] = [
    namespace_is_restricted,
    deployment_selects_at_least_two_replicas,
    args_are_flags_serve_has,
    ports_are_the_listen_ports,
    probes_ask_the_admin_server,
    termination_outlasts_the_shutdown,
    resources_request_and_limit_memory_only,
    memory_limit_holds_the_body_budget,
    security_context_is_restricted,
    pods_spread_over_nodes_and_zones,
    disruption_budget_keeps_one_pod,
    tls_and_policy_are_read_only_directories,
    policy_configmap_keeps_its_name_and_asks_rbac,
    service_targets_the_container_ports,
    webhook_configurations_match_the_server,
    force_key_webhooks_send_only_force_writes,
    ca_comes_from_cert_manager_or_gen_certs,
    rbac_grants_exactly_what_is_needed,
    network_policy_opens_the_ports,
    force_is_granted_only_by_the_opt_in_bindings,
    skipped_namespaces_and_own_account_are_guarded,
];

/// The namespace.
fn namespace_is_restricted(r: &Rendering) {
    let namespace = named(&r.install.namespaces, NAMESPACE, "Namespace");
    let pod_security = namespace
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-security.kubernetes.io/enforce"));
    assert_eq!(
        pod_security.map(String::as_str),
        Some("restricted"),
        "the webhook's namespace enforces the restricted Pod Security level"
    );
}

/// The Deployment and its one container.
fn deployment_selects_at_least_two_replicas(r: &Rendering) {
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

/// Command line: every flag is one the binary has.
fn args_are_flags_serve_has(r: &Rendering) {
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

/// Ports: the webhook port is the --listen port, the admin port the
/// --admin-listen one.
fn ports_are_the_listen_ports(r: &Rendering) {
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

/// Probes on the admin server.
fn probes_ask_the_admin_server(r: &Rendering) {
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

/// Shutdown: kubelet waits longer than the webhook's own shutdown.
fn termination_outlasts_the_shutdown(r: &Rendering) {
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

/// Resources: requests, and a memory limit.
fn resources_request_and_limit_memory_only(r: &Rendering) {
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

/// The memory limit holds the body budget plus the most the rest can
/// take at the default limits (docs/robustness.md, "Memory under a
/// flood": 1024 connections, 512 requests waiting, the process itself).
fn memory_limit_holds_the_body_budget(r: &Rendering) {
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

/// Security context: the container's settings, falling back to the pod's.
fn security_context_is_restricted(r: &Rendering) {
    let pod = pod(&r.install);
    let pod_sc = pod.spec.security_context.clone().unwrap_or_default();
    let sc = pod.container.security_context.clone().unwrap_or_default();
    assert_eq!(
        sc.run_as_non_root.or(pod_sc.run_as_non_root),
        Some(true),
        "runAsNonRoot"
    );
    let user = sc.run_as_user.or(pod_sc.run_as_user).expect("runAsUser");
    assert_eq!(user, 65532, "runs as the distroless nonroot user");
    assert_eq!(
        sc.read_only_root_filesystem,
        Some(true),
        "readOnlyRootFilesystem"
    );
    assert_eq!(
        sc.allow_privilege_escalation,
        Some(false),
        "allowPrivilegeEscalation"
    );
    assert_ne!(sc.privileged, Some(true), "not privileged");
    let caps = sc.capabilities.clone().expect("capabilities");
    assert_eq!(
        caps.drop,
        Some(vec!["ALL".to_owned()]),
        "drops all capabilities"
    );
    assert!(
        caps.add.unwrap_or_default().is_empty(),
        "adds no capability"
    );
    let seccomp = sc
        .seccomp_profile
        .or(pod_sc.seccomp_profile)
        .expect("seccompProfile");
    assert_eq!(seccomp.type_, "RuntimeDefault");
    assert_ne!(pod.spec.host_network, Some(true));
    assert_ne!(pod.spec.host_pid, Some(true));
    assert_ne!(pod.spec.host_ipc, Some(true));
}

/// Topology spread: per node, and per zone without blocking scheduling.
fn pods_spread_over_nodes_and_zones(r: &Rendering) {
    let pod = pod(&r.install);
    let spread = pod
        .spec
        .topology_spread_constraints
        .clone()
        .unwrap_or_default();
    let by_key = |key: &str| {
        spread
            .iter()
            .find(|c| c.topology_key == key)
            .unwrap_or_else(|| panic!("no topologySpreadConstraint on {key}"))
            .clone()
    };
    for key in ["kubernetes.io/hostname", "topology.kubernetes.io/zone"] {
        let c = by_key(key);
        assert!(
            selects(
                c.label_selector.as_ref().expect("labelSelector"),
                &pod.labels
            ),
            "the spread on {key} counts the webhook's pods"
        );
    }
    assert_eq!(
        by_key("topology.kubernetes.io/zone").when_unsatisfiable,
        "ScheduleAnyway"
    );
}

/// PodDisruptionBudget.
fn disruption_budget_keeps_one_pod(r: &Rendering) {
    let pod = pod(&r.install);
    let pdb = one(&r.install.pdbs, "PodDisruptionBudget");
    let pdb_spec = pdb.spec.as_ref().expect("PDB spec");
    assert_eq!(pdb_spec.min_available, Some(IntOrString::Int(1)));
    assert!(selects(
        pdb_spec.selector.as_ref().expect("PDB selector"),
        &pod.labels
    ));
}

/// Volumes: the TLS Secret and the policy ConfigMap, as directories that
/// hold the files the args name.
fn tls_and_policy_are_read_only_directories(r: &Rendering) {
    let pod = pod(&r.install);
    let container = pod.container;
    let volumes = pod.spec.volumes.clone().unwrap_or_default();
    let tls_cert =
        flag_value(container, &HELP, "--tls-cert", "WEBHOOK_TLS_CERT").expect("--tls-cert");
    let tls_key = flag_value(container, &HELP, "--tls-key", "WEBHOOK_TLS_KEY").expect("--tls-key");
    let (cert_volume, cert_file) = mounted_dir(container, &tls_cert);
    let (key_volume, key_file) = mounted_dir(container, &tls_key);
    assert_eq!(
        cert_volume, key_volume,
        "certificate and key come from one Secret"
    );
    assert_eq!(
        (cert_file.as_str(), key_file.as_str()),
        ("tls.crt", "tls.key")
    );
    let tls_volume = volumes
        .iter()
        .find(|v| v.name == cert_volume)
        .expect("TLS volume");
    let secret_name = tls_volume
        .secret
        .as_ref()
        .and_then(|s| s.secret_name.clone())
        .expect("the TLS volume is a Secret");
    assert_eq!(secret_name, TLS_SECRET);
    policy_source(&pod);
}

/// The policy ConfigMap: fixed name (the webhook reloads it; a policy
/// edit does not roll the pods), and a policy the binary accepts, with
/// RBAC authorisation on.
fn policy_configmap_keeps_its_name_and_asks_rbac(r: &Rendering) {
    let (policy_cm_name, _) = policy_source(&pod(&r.install));
    assert_eq!(
        policy_cm_name, POLICY_CONFIGMAP,
        "the policy ConfigMap keeps its name (disableNameSuffixHash): edits are hot-reloaded"
    );
    let effective = r.effective_policy();
    let rendered: Value = serde_saphyr::from_str(effective).unwrap_or_else(|e| {
        panic!("check-policy printed YAML that does not parse ({e}):\n{effective}")
    });
    assert_eq!(
        rendered["forceReapply"]["rbac"]["verb"], "force-reapply",
        "the cluster policy asks RBAC for the verb force-reapply:\n{effective}"
    );
}

/// Service: 443 to the webhook port, 8080 to the admin port.
fn service_targets_the_container_ports(r: &Rendering) {
    let pod = pod(&r.install);
    let (listen, admin) = ports(pod.container);
    let service = one(&r.install.services, "Service");
    assert_eq!(service.metadata.namespace.as_deref(), Some(NAMESPACE));
    let service_spec = service.spec.as_ref().expect("Service spec");
    let selector = service_spec.selector.clone().expect("Service selector");
    assert!(
        !selector.is_empty() && selector.iter().all(|(k, v)| pod.labels.get(k) == Some(v)),
        "the Service selects the webhook's pods"
    );
    assert_eq!(
        service_port(service, pod.container, 443),
        listen,
        "Service 443 targets the --listen port"
    );
    assert_eq!(
        service_port(service, pod.container, 8080),
        admin,
        "Service 8080 targets the admin port"
    );
}

/// Webhook configurations.
fn webhook_configurations_match_the_server(r: &Rendering) {
    let expect = &r.expect;
    let container = pod(&r.install).container;
    let (listen, _) = ports(container);
    let service = one(&r.install.services, "Service");
    let Webhooks {
        mutate, validate, ..
    } = webhooks(&r.install);
    assert_eq!(mutate.name, MUTATE_NAME);
    assert_eq!(validate.name, VALIDATE_NAME);
    assert_eq!(mutate.reinvocation_policy.as_deref(), Some("IfNeeded"));
    let service_name = service_name(service);
    let check_client = |client: &WebhookClientConfig, path: &str| {
        assert!(
            client.url.is_none(),
            "called through the Service, not a URL"
        );
        let svc = client.service.as_ref().expect("clientConfig.service");
        assert_eq!(svc.name, service_name);
        assert_eq!(svc.namespace, NAMESPACE);
        assert_eq!(svc.path.as_deref(), Some(path));
        assert_eq!(
            service_port(service, container, svc.port.unwrap_or(443)),
            listen
        );
    };
    check_client(&mutate.client_config, "/mutate");
    check_client(&validate.client_config, "/validate");
    let check_common = |name: &str,
                        rules: Option<&Vec<RuleWithOperations>>,
                        selector: Option<&LabelSelector>,
                        side_effects: &str,
                        versions: &[String],
                        timeout: Option<i32>,
                        match_policy: Option<&str>,
                        failure_policy: Option<&str>| {
        let rules = rules.cloned().unwrap_or_default();
        let rule = one(&rules, "rule");
        assert_eq!(
            sorted(rule.api_groups.as_ref()),
            ["numaplane.numaproj.io"],
            "{name}"
        );
        assert_eq!(sorted(rule.api_versions.as_ref()), ["*"], "{name}");
        assert_eq!(
            sorted(rule.resources.as_ref()),
            ["pipelinerollouts"],
            "{name}"
        );
        assert_eq!(
            sorted(rule.operations.as_ref()),
            ["CREATE", "UPDATE"],
            "{name}: CREATE and UPDATE only"
        );
        assert_eq!(rule.scope.as_deref(), Some("Namespaced"), "{name}");
        assert_eq!(
            side_effects, "NoneOnDryRun",
            "{name}: Events are recorded, never for a dry run"
        );
        assert_eq!(versions, ["v1"], "{name}");
        let timeout = timeout.expect("timeoutSeconds");
        assert!(
            (1..=5).contains(&timeout),
            "{name}: timeoutSeconds {timeout} is at most 5"
        );
        assert_eq!(match_policy, Some("Equivalent"), "{name}");
        assert_eq!(
            failure_policy,
            Some(expect.failure_policy),
            "{name}: failurePolicy"
        );
        let selector = selector.expect("namespaceSelector");
        assert!(selector.match_labels.is_none(), "{name}");
        let expressions = selector.match_expressions.clone().unwrap_or_default();
        let excluded = one(&expressions, "namespaceSelector expression");
        assert_eq!(excluded.key, "kubernetes.io/metadata.name", "{name}");
        assert_eq!(excluded.operator, "NotIn", "{name}");
        assert_eq!(
            sorted(excluded.values.as_ref()),
            ["kube-system", NAMESPACE],
            "{name}: the webhook's own namespace and kube-system are excluded"
        );
    };
    check_common(
        MUTATE_NAME,
        mutate.rules.as_ref(),
        mutate.namespace_selector.as_ref(),
        &mutate.side_effects,
        &mutate.admission_review_versions,
        mutate.timeout_seconds,
        mutate.match_policy.as_deref(),
        mutate.failure_policy.as_deref(),
    );
    check_common(
        VALIDATE_NAME,
        validate.rules.as_ref(),
        validate.namespace_selector.as_ref(),
        &validate.side_effects,
        &validate.admission_review_versions,
        validate.timeout_seconds,
        validate.match_policy.as_deref(),
        validate.failure_policy.as_deref(),
    );
}

/// The validating configuration's webhooks for the children and the other
/// rollouts: one rule each for the kinds, CEL matchConditions generated
/// from the judged keys (src/match_conditions.rs), failurePolicy Fail in
/// every rendering, otherwise like the PipelineRollout webhook.
fn force_key_webhooks_send_only_force_writes(r: &Rendering) {
    use pipelinerollout_webhook::kinds::Kind;
    use pipelinerollout_webhook::match_conditions;
    let Webhooks {
        validating,
        validate,
        ..
    } = webhooks(&r.install);
    let all = validating.webhooks.clone().unwrap_or_default();
    let names: Vec<&str> = all.iter().map(|w| w.name.as_str()).collect();
    let expected = [
        (
            "validate-children.pipelinerollout-webhook.numaplane.numaproj.io",
            vec![
                Kind::Pipeline,
                Kind::MonoVertex,
                Kind::InterStepBufferService,
            ],
        ),
        (
            "validate-monovertexrollouts.pipelinerollout-webhook.numaplane.numaproj.io",
            vec![Kind::MonoVertexRollout],
        ),
        (
            "validate-isbservicerollouts.pipelinerollout-webhook.numaplane.numaproj.io",
            vec![Kind::IsbServiceRollout],
        ),
    ];
    let mut want_names = vec![VALIDATE_NAME];
    want_names.extend(expected.iter().map(|(n, _)| *n));
    assert_eq!(names, want_names, "the validating webhooks, in order");
    assert_eq!(
        names.len(),
        pipelinerollout_webhook::pki::VALIDATING_WEBHOOKS,
        "gen-certs writes a caBundle for each"
    );
    for (name, kinds) in expected {
        let hook = all.iter().find(|w| w.name == name).expect("listed");
        assert_eq!(
            hook.client_config.service, validate.client_config.service,
            "{name}"
        );
        assert_eq!(
            hook.failure_policy.as_deref(),
            Some("Fail"),
            "{name}: always Fail"
        );
        assert_eq!(hook.side_effects, "NoneOnDryRun", "{name}");
        assert_eq!(hook.admission_review_versions, ["v1"], "{name}");
        assert_eq!(hook.match_policy.as_deref(), Some("Equivalent"), "{name}");
        assert_eq!(hook.timeout_seconds, validate.timeout_seconds, "{name}");
        assert_eq!(
            hook.namespace_selector, validate.namespace_selector,
            "{name}"
        );
        let rules = hook.rules.clone().unwrap_or_default();
        let got: BTreeSet<(String, String)> = rules
            .iter()
            .flat_map(|rule| {
                assert_eq!(
                    sorted(rule.operations.as_ref()),
                    ["CREATE", "UPDATE"],
                    "{name}"
                );
                assert_eq!(rule.scope.as_deref(), Some("Namespaced"), "{name}");
                assert_eq!(sorted(rule.api_versions.as_ref()), ["*"], "{name}");
                let groups = sorted(rule.api_groups.as_ref());
                let resources = sorted(rule.resources.as_ref());
                groups
                    .into_iter()
                    .flat_map(move |g| resources.clone().into_iter().map(move |r| (g.clone(), r)))
            })
            .collect();
        let want: BTreeSet<(String, String)> = kinds
            .iter()
            .map(|k| (k.group().to_owned(), k.resource().to_owned()))
            .collect();
        assert_eq!(got, want, "{name}: the kinds it is for");
        let conditions = hook.match_conditions.clone().unwrap_or_default();
        let condition = one(&conditions, "matchCondition");
        for kind in &kinds {
            assert_eq!(condition.name, match_conditions::name(*kind), "{name}");
            assert_eq!(
                Some(condition.expression.trim()),
                match_conditions::expression(*kind).as_deref(),
                "{name}: paste the output of match_conditions::expression({kind:?}) into manifests/base/webhooks.yaml"
            );
        }
    }
}

/// The CA: injected by cert-manager, or the generated bundle.
fn ca_comes_from_cert_manager_or_gen_certs(r: &Rendering) {
    let install = &r.install;
    let service_name = service_name(one(&install.services, "Service"));
    let Webhooks {
        mutating,
        validating,
        mutate,
        validate,
    } = webhooks(install);
    let annotation = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(INJECT_CA).cloned())
    };
    let _ = &validate;
    let bundles: Vec<_> = std::iter::once(mutate.client_config.ca_bundle.clone())
        .chain(
            validating
                .webhooks
                .iter()
                .flatten()
                .map(|w| w.client_config.ca_bundle.clone()),
        )
        .collect();
    let injects = [
        annotation(&mutating.metadata),
        annotation(&validating.metadata),
    ];
    match r.expect.ca {
        CaSource::None => {
            assert!(
                bundles.iter().all(Option::is_none),
                "the base carries no caBundle"
            );
            assert!(
                injects.iter().all(Option::is_none),
                "the base carries no injection"
            );
        }
        CaSource::CertManager => {
            assert!(
                bundles.iter().all(Option::is_none),
                "cert-manager fills caBundle itself"
            );
            for inject in injects {
                let inject = inject.expect("both configurations carry inject-ca-from");
                check_cert_manager(install, &inject, &service_name);
            }
        }
        CaSource::GenCerts => {
            assert!(injects.iter().all(Option::is_none));
            let certs = r.certs.as_ref().expect("certificates directory");
            let ca = &certs.ca;
            for bundle in bundles {
                let bundle = bundle.expect("every webhook of both configurations carries caBundle");
                assert_eq!(&bundle.0, ca, "caBundle is the generated ca.crt");
            }
            let secret = named(&install.secrets, TLS_SECRET, "Secret");
            assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
            let data = secret.data.clone().unwrap_or_default();
            assert_eq!(data.get("tls.crt").map(|b| &b.0), Some(&certs.cert));
            assert_eq!(data.get("tls.key").map(|b| &b.0), Some(&certs.key));
            check_serving_cert(&certs.cert, ca, &service_name);
        }
        CaSource::SelfManaged => {
            assert!(
                bundles.iter().all(Option::is_none) && injects.iter().all(Option::is_none),
                "the webhook writes the caBundle itself"
            );
            check_self_managed(install);
        }
    }
    if r.expect.ca != CaSource::GenCerts {
        assert!(
            install.secrets.is_empty(),
            "no Secret is rendered: the TLS Secret comes from cert-manager or the webhook"
        );
    }
    let manages = manages_certs(pod(install).container);
    assert_eq!(
        manages,
        r.expect.ca == CaSource::SelfManaged,
        "--manage-certs is set in the self-managed overlay only"
    );
}

/// Whether the container runs `serve --manage-certs`.
fn manages_certs(container: &Container) -> bool {
    let args = container.args.clone().unwrap_or_default();
    args.iter()
        .any(|a| a == "--manage-certs" || a == "--manage-certs=true")
        || container
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "WEBHOOK_MANAGE_CERTS" && e.value.as_deref() == Some("true"))
}

/// `--manage-certs`: the names the webhook uses by default are the names
/// of the rendered objects, and the Secret volume may be absent (the
/// webhook writes the Secret after it starts).
fn check_self_managed(install: &Install) {
    let pod = pod(install);
    let help = &*HELP;
    let value = |flag: &str, env: &str| {
        flag_value(pod.container, help, flag, env).unwrap_or_else(|| panic!("{flag} has a value"))
    };
    let tls_cert = value("--tls-cert", "WEBHOOK_TLS_CERT");
    let (tls_volume, _) = mounted_dir(pod.container, &tls_cert);
    let volume = pod
        .spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == tls_volume)
        .expect("the TLS volume");
    let secret = volume.secret.as_ref().expect("a Secret volume");
    assert_eq!(
        secret.secret_name.as_deref(),
        Some(value("--cert-secret", "WEBHOOK_CERT_SECRET").as_str()),
        "the Secret the webhook writes is the one --tls-cert ({tls_cert}) comes from"
    );
    assert_eq!(
        secret.optional,
        Some(true),
        "the Secret volume is optional: it does not exist before the first start"
    );
    let service = one(&install.services, "Service");
    assert_eq!(
        service.metadata.name.as_deref(),
        Some(value("--cert-service", "WEBHOOK_CERT_SERVICE").as_str())
    );
    let Webhooks {
        mutating,
        validating,
        mutate,
        validate,
    } = webhooks(install);
    assert_eq!(
        validating.metadata.name.as_deref(),
        Some(
            value(
                "--validating-configuration",
                "WEBHOOK_VALIDATING_CONFIGURATION"
            )
            .as_str()
        )
    );
    assert_eq!(
        mutating.metadata.name.as_deref(),
        Some(value("--mutating-configuration", "WEBHOOK_MUTATING_CONFIGURATION").as_str())
    );
    for webhook in [&mutate.client_config, &validate.client_config] {
        let called = webhook.service.as_ref().expect("clientConfig.service");
        assert_eq!(Some(called.name.as_str()), service.metadata.name.as_deref());
        assert_eq!(
            called.namespace, NAMESPACE,
            "the Secret's namespace (POD_NAMESPACE)"
        );
    }
    // Its account may patch nothing but the caBundle of those two
    // configurations: the guard names them and the account.
    let guard = "pipelinerollout-webhook-own-webhooks";
    let policy = named(&install.policies, guard, "ValidatingAdmissionPolicy");
    let binding = named(
        &install.policy_bindings,
        guard,
        "ValidatingAdmissionPolicyBinding",
    );
    assert_eq!(binding.spec.policy_name, guard);
    assert_eq!(binding.spec.validation_actions, vec!["Deny".to_owned()]);
    let spec = policy.spec.clone().unwrap_or_default();
    assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
    let rules = spec
        .match_constraints
        .and_then(|c| c.resource_rules)
        .unwrap_or_default();
    let rule = one(&rules, "the guard's resource rule");
    assert_eq!(
        sorted(rule.resources.as_ref()),
        [
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations"
        ]
    );
    let mut names = vec![
        mutating.metadata.name.clone().unwrap_or_default(),
        validating.metadata.name.clone().unwrap_or_default(),
    ];
    names.sort();
    names.dedup();
    assert_eq!(sorted(rule.resource_names.as_ref()), names);
    let account = pod.spec.service_account_name.clone().unwrap_or_default();
    let username = format!("system:serviceaccount:{NAMESPACE}:{account}");
    let conditions = spec.match_conditions.unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c.expression.contains(&format!("'{username}'"))),
        "the guard applies to {username}"
    );
    for flag in ["--ca-validity", "--cert-validity", "--cert-propagation"] {
        let _ = duration(&value(flag, ""));
    }
    assert!(
        duration(&value("--cert-validity", "")) < duration(&value("--ca-validity", "")),
        "the serving certificate lives shorter than its CA"
    );
}

/// RBAC: the webhook's account, the force-reapply grant, the example bindings.
fn rbac_grants_exactly_what_is_needed(r: &Rendering) {
    check_rbac(&r.install, pod(&r.install).spec, r.effective_policy());
}

/// NetworkPolicy: the webhook port open to all, the admin port to some.
fn network_policy_opens_the_ports(r: &Rendering) {
    let pod = pod(&r.install);
    let (listen, admin) = ports(pod.container);
    check_network_policy(&r.install, &pod.labels, listen, admin);
}

/// Nothing binds the force-reapply ClusterRole, but the example bindings of
/// the opt-in component (Argo CD's argocd-server, the group sre).
fn force_is_granted_only_by_the_opt_in_bindings(r: &Rendering) {
    let role = "pipelinerollout-force-reapply";
    let cluster_wide = r
        .install
        .cluster_role_bindings
        .iter()
        .filter(|b| b.role_ref.name == role);
    let subjects: BTreeSet<(String, String, Option<String>)> = cluster_wide
        .flat_map(|b| b.subjects.clone().unwrap_or_default())
        .map(|s| (s.kind, s.name, s.namespace))
        .collect();
    let namespaced = r
        .install
        .role_bindings
        .iter()
        .filter(|b| b.role_ref.name == role)
        .count();
    assert_eq!(namespaced, 0, "no RoleBinding of {role} is installed");
    if r.dir != WITH_OPT_INS {
        assert!(
            subjects.is_empty(),
            "manifests/{} grants a force to {subjects:?}",
            r.dir
        );
        return;
    }
    let want = BTreeSet::from([
        (
            "ServiceAccount".to_owned(),
            "argocd-server".to_owned(),
            // kustomize must not move it to the webhook's namespace.
            Some("argocd".to_owned()),
        ),
        ("Group".to_owned(), "sre".to_owned(), None),
    ]);
    assert_eq!(subjects, want, "the example bindings");
}

/// The ValidatingAdmissionPolicies of the base: the one for the skipped
/// namespaces names exactly the namespaces the webhooks skip (and, with the
/// opt-in component, admits creates there); the one for the
/// webhook's own account names the Deployment's service account.
fn skipped_namespaces_and_own_account_are_guarded(r: &Rendering) {
    let hooks = webhooks(&r.install);
    let skipped = |selector: Option<&LabelSelector>| -> Vec<String> {
        let expressions = selector
            .and_then(|s| s.match_expressions.clone())
            .unwrap_or_default();
        let expression = one(&expressions, "namespaceSelector expression");
        assert_eq!(expression.key, "kubernetes.io/metadata.name");
        let mut values = expression.values.clone().unwrap_or_default();
        values.sort();
        values
    };
    let validate_skips = skipped(hooks.validate.namespace_selector.as_ref());
    assert_eq!(
        validate_skips,
        skipped(hooks.mutate.namespace_selector.as_ref())
    );
    let policy = |name: &str| {
        let policy = named(&r.install.policies, name, "ValidatingAdmissionPolicy");
        let binding = named(
            &r.install.policy_bindings,
            name,
            "ValidatingAdmissionPolicyBinding",
        );
        let spec = binding.spec.clone();
        assert_eq!(spec.policy_name, name);
        assert_eq!(
            spec.validation_actions,
            vec!["Deny".to_owned()],
            "{name} denies"
        );
        assert!(
            spec.match_resources.is_none(),
            "{name} binds every namespace its policy matches"
        );
        policy.spec.clone().unwrap_or_default()
    };
    let spec = policy("pipelinerollout-webhook-skipped-namespaces");
    assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
    let constraints = spec.match_constraints.clone().unwrap_or_default();
    let selector = constraints.namespace_selector.as_ref();
    let expressions = selector
        .and_then(|s| s.match_expressions.clone())
        .unwrap_or_default();
    let expression = one(&expressions, "the policy's namespaceSelector expression");
    assert_eq!(
        (expression.key.as_str(), expression.operator.as_str()),
        ("kubernetes.io/metadata.name", "In")
    );
    let mut policed = expression.values.clone().unwrap_or_default();
    policed.sort();
    assert_eq!(
        policed, validate_skips,
        "the policy guards exactly what the webhooks skip"
    );
    let blanket = spec
        .validations
        .iter()
        .flatten()
        .any(|v| v.expression == "variables.isUpdate");
    assert_eq!(
        blanket,
        r.dir != WITH_OPT_INS,
        "PipelineRollouts refused there unless opted in"
    );

    let spec = policy("pipelinerollout-webhook-own-account");
    let account = pod(&r.install)
        .spec
        .service_account_name
        .clone()
        .expect("serviceAccountName");
    let username = format!("system:serviceaccount:{NAMESPACE}:{account}");
    let conditions = spec.match_conditions.clone().unwrap_or_default();
    let condition = one(&conditions, "matchCondition");
    assert!(
        condition.expression.contains(&format!("'{username}'")),
        "the own-account policy names {username}: {}",
        condition.expression
    );
}

/// Runs the binary's `check-policy` on `text`; returns the effective policy.
fn check_policy(text: &str) -> String {
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("policy.yaml");
    fs::write(&file, text).expect("write policy");
    let out = Command::new(BIN)
        .arg("check-policy")
        .arg(&file)
        .output()
        .expect("run check-policy");
    assert!(
        out.status.success(),
        "the policy ConfigMap's policy.yaml fails check-policy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The rules granted to `(namespace, name)`'s service account by every
/// binding in the install.
fn rules_of_service_account(install: &Install, namespace: &str, name: &str) -> Vec<PolicyRule> {
    let is_subject = |subjects: Option<&Vec<k8s_openapi::api::rbac::v1::Subject>>,
                      default_ns: Option<&str>| {
        subjects.into_iter().flatten().any(|s| {
            s.kind == "ServiceAccount"
                && s.name == name
                && s.namespace.as_deref().or(default_ns) == Some(namespace)
        })
    };
    let cluster_role = |role: &str| -> Vec<PolicyRule> {
        named(&install.cluster_roles, role, "ClusterRole")
            .rules
            .clone()
            .unwrap_or_default()
    };
    let mut rules = Vec::new();
    for binding in &install.cluster_role_bindings {
        if is_subject(binding.subjects.as_ref(), None) {
            assert_eq!(binding.role_ref.kind, "ClusterRole");
            rules.extend(cluster_role(&binding.role_ref.name));
        }
    }
    for binding in &install.role_bindings {
        let ns = binding.metadata.namespace.as_deref();
        if is_subject(binding.subjects.as_ref(), ns) {
            if binding.role_ref.kind == "ClusterRole" {
                rules.extend(cluster_role(&binding.role_ref.name));
            } else {
                let role = install
                    .roles
                    .iter()
                    .find(|r| r.metadata.name.as_deref() == Some(&binding.role_ref.name))
                    .expect("bound Role");
                rules.extend(role.rules.clone().unwrap_or_default());
            }
        }
    }
    rules
}

fn check_rbac(install: &Install, pod: &PodSpec, effective_policy: &str) {
    // The webhook's service account: create SubjectAccessReviews, nothing else.
    let account = pod
        .service_account_name
        .clone()
        .expect("serviceAccountName");
    let sa = named(&install.service_accounts, &account, "ServiceAccount");
    assert_eq!(sa.metadata.namespace.as_deref(), Some(NAMESPACE));
    assert_ne!(
        pod.automount_service_account_token
            .or(sa.automount_service_account_token),
        Some(false),
        "the token is mounted: the webhook creates SubjectAccessReviews with it"
    );
    let all_rules = rules_of_service_account(install, NAMESPACE, &account);
    let (cert_rules, rules): (Vec<PolicyRule>, Vec<PolicyRule>) =
        all_rules.into_iter().partition(is_cert_rule);
    check_cert_rbac(&cert_rules, manages_certs(&pod.containers[0]));
    // Exactly these rules: SubjectAccessReviews, Events, reading a
    // guarded object before an Event about it, (for the stale-force
    // sweeper, unless its component drops it) reading and patching them,
    // for the audit, listing and watching them and writing PolicyReports;
    // and (with --leader-elect) the Lease. Nothing else; resourceNames only
    // on the Lease.
    // (apiGroups, resources, verbs, resourceNames), each sorted.
    type Rule = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);
    let mut granted: Vec<Rule> = rules
        .iter()
        .map(|rule| {
            assert!(rule.non_resource_urls.is_none());
            (
                sorted(rule.api_groups.as_ref()),
                sorted(rule.resources.as_ref()),
                sorted(Some(&rule.verbs)),
                sorted(rule.resource_names.as_ref()),
            )
        })
        .collect();
    granted.sort();
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut want = vec![
        (
            owned(&["authorization.k8s.io"]),
            owned(&["subjectaccessreviews"]),
            owned(&["create"]),
            vec![],
        ),
        (
            owned(&["events.k8s.io"]),
            owned(&["events"]),
            owned(&["create"]),
            vec![],
        ),
        (
            owned(&["numaplane.numaproj.io"]),
            owned(&[
                "isbservicerollouts",
                "monovertexrollouts",
                "pipelinerollouts",
            ]),
            owned(&["get"]),
            vec![],
        ),
        (
            owned(&["numaflow.numaproj.io"]),
            owned(&["interstepbufferservices", "monovertices", "pipelines"]),
            owned(&["get"]),
            vec![],
        ),
        (
            owned(&["numaplane.numaproj.io"]),
            owned(&[
                "isbservicerollouts",
                "monovertexrollouts",
                "pipelinerollouts",
            ]),
            owned(&["list", "watch"]),
            vec![],
        ),
        (
            owned(&["wgpolicyk8s.io"]),
            owned(&["policyreports"]),
            owned(&["create", "delete", "get", "list", "patch", "update"]),
            vec![],
        ),
    ];
    let container = &pod.containers[0];
    let sweeper_on = container
        .env
        .iter()
        .flatten()
        .any(|e| e.name == "WEBHOOK_RESET_STALE_FORCE" && e.value.as_deref() == Some("true"));
    if sweeper_on {
        want.push((
            owned(&["numaplane.numaproj.io"]),
            owned(&["pipelinerollouts"]),
            owned(&["get", "list", "patch", "watch"]),
            vec![],
        ));
    }
    let leader_elect = flag_value(container, &HELP, "--leader-elect", "WEBHOOK_LEADER_ELECT")
        .is_some_and(|v| v == "true");
    if leader_elect {
        let lease = flag_value(
            container,
            &HELP,
            "--leader-elect-lease-name",
            "WEBHOOK_LEADER_ELECT_LEASE_NAME",
        )
        .expect("the Lease name has a default");
        // Reading, watching and writing the one Lease; create cannot be
        // narrowed to a name.
        want.push((
            owned(&["coordination.k8s.io"]),
            owned(&["leases"]),
            owned(&["get", "list", "patch", "watch"]),
            vec![lease],
        ));
        want.push((
            owned(&["coordination.k8s.io"]),
            owned(&["leases"]),
            owned(&["create"]),
            vec![],
        ));
        // ...and only in the webhook's namespace: from a Role there, never
        // a ClusterRole.
        let touches_leases = |rules: Option<&Vec<PolicyRule>>| {
            rules
                .into_iter()
                .flatten()
                .any(|r| r.resources.iter().flatten().any(|res| res == "leases"))
        };
        assert!(
            !install
                .cluster_roles
                .iter()
                .any(|c| touches_leases(c.rules.as_ref())),
            "no ClusterRole grants leases"
        );
        for role in install
            .roles
            .iter()
            .filter(|r| touches_leases(r.rules.as_ref()))
        {
            assert_eq!(
                role.metadata.namespace.as_deref(),
                Some(NAMESPACE),
                "the Lease's Role lives in the webhook's namespace"
            );
        }
    }
    want.sort();
    assert_eq!(
        granted, want,
        "the webhook's account has exactly the rules it needs (sweeper on: {sweeper_on}, leader election: {leader_elect})"
    );

    // The grant: the custom verb of the policy, on pipelinerollouts only.
    let grant = named(
        &install.cluster_roles,
        "pipelinerollout-force-reapply",
        "ClusterRole",
    );
    let grant_rules = grant.rules.clone().unwrap_or_default();
    let mut granted: Vec<(Vec<String>, Vec<String>, Vec<String>)> = grant_rules
        .iter()
        .map(|rule| {
            (
                sorted(rule.api_groups.as_ref()),
                sorted(rule.resources.as_ref()),
                rule.verbs.clone(),
            )
        })
        .collect();
    granted.sort();
    assert_eq!(
        granted,
        vec![
            (
                owned(&["numaflow.numaproj.io"]),
                owned(&["interstepbufferservices", "monovertices", "pipelines"]),
                owned(&["force-reapply"]),
            ),
            (
                owned(&["numaplane.numaproj.io"]),
                owned(&[
                    "isbservicerollouts",
                    "monovertexrollouts",
                    "pipelinerollouts"
                ]),
                owned(&["force-reapply"]),
            ),
        ],
        "the custom verb on every guarded kind (the SubjectAccessReview asks on the object written)"
    );
    let grant_rule = &grant_rules[0];
    let rendered: Value = serde_saphyr::from_str(effective_policy)
        .unwrap_or_else(|e| panic!("check-policy printed YAML that does not parse: {e}"));
    assert_eq!(
        rendered["forceReapply"]["rbac"]["verb"], grant_rule.verbs[0],
        "the ClusterRole grants the verb the policy asks about"
    );
}

/// A rule of `--manage-certs`: on Secrets or webhook configurations.
fn is_cert_rule(rule: &PolicyRule) -> bool {
    rule.resources.iter().flatten().any(|r| {
        [
            "secrets",
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
        ]
        .contains(&r.as_str())
    })
}

/// A rule as (apiGroups, resources, resourceNames, verbs), each sorted.
type CertRule = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);

/// `--manage-certs`' rules: its Secret by name (create cannot be
/// narrowed), its two webhook configurations by name; none without it.
fn check_cert_rbac(rules: &[PolicyRule], manages: bool) {
    let mut granted: Vec<CertRule> = rules
        .iter()
        .map(|rule| {
            (
                sorted(rule.api_groups.as_ref()),
                sorted(rule.resources.as_ref()),
                sorted(rule.resource_names.as_ref()),
                sorted(Some(&rule.verbs)),
            )
        })
        .collect();
    granted.sort();
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut want = if manages {
        vec![
            (
                owned(&[""]),
                owned(&["secrets"]),
                owned(&["pipelinerollout-webhook-tls"]),
                owned(&["get", "list", "update", "watch"]),
            ),
            (
                owned(&[""]),
                owned(&["secrets"]),
                vec![],
                owned(&["create"]),
            ),
            (
                owned(&["admissionregistration.k8s.io"]),
                owned(&[
                    "mutatingwebhookconfigurations",
                    "validatingwebhookconfigurations",
                ]),
                owned(&["pipelinerollout-webhook"]),
                owned(&["get", "list", "patch", "watch"]),
            ),
        ]
    } else {
        Vec::new()
    };
    want.sort();
    assert_eq!(
        granted, want,
        "the certificate rules are exactly what --manage-certs needs (manages: {manages})"
    );
}

fn check_network_policy(
    install: &Install,
    pod_labels: &BTreeMap<String, String>,
    listen: i32,
    admin: i32,
) {
    let policy = one(&install.network_policies, "NetworkPolicy");
    let spec = policy.spec.as_ref().expect("NetworkPolicy spec");
    assert!(selects(
        &spec.pod_selector.clone().unwrap_or_default(),
        pod_labels
    ));
    let rules = spec.ingress.clone().unwrap_or_default();
    let opens = |port: i32| {
        rules
            .iter()
            .filter(|r| {
                r.ports
                    .iter()
                    .flatten()
                    .any(|p| p.port == Some(IntOrString::Int(port)))
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    let webhook = opens(listen);
    assert!(
        webhook
            .iter()
            .any(|r| r.from.as_ref().is_none_or(Vec::is_empty)),
        "the webhook port is open to the API server, from anywhere"
    );
    let metrics = opens(admin);
    assert!(
        !metrics.is_empty(),
        "the admin port is reachable for scraping"
    );
    for rule in metrics {
        let from = rule.from.unwrap_or_default();
        assert!(
            !from.is_empty()
                && from
                    .iter()
                    .all(|p| p.namespace_selector.is_some() && p.ip_block.is_none()),
            "the admin port is open only to selected namespaces"
        );
    }
}

/// The cert-manager chain behind `inject` (`namespace/certificate`).
fn check_cert_manager(install: &Install, inject: &str, service: &str) {
    let (ns, certificate) = inject.split_once('/').expect("namespace/name");
    assert_eq!(ns, NAMESPACE);
    let find = |kind: &str, name: &str| -> Value {
        install
            .cert_manager
            .iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no cert-manager {kind} {name}"))
            .clone()
    };
    for doc in &install.cert_manager {
        assert_eq!(
            doc["metadata"]["namespace"], NAMESPACE,
            "cert-manager objects live beside the webhook"
        );
    }
    let serving = find("Certificate", certificate);
    assert_eq!(
        serving["spec"]["secretName"], TLS_SECRET,
        "the Secret the Deployment mounts"
    );
    let dns: Vec<&str> = serving["spec"]["dnsNames"]
        .as_array()
        .expect("dnsNames")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        dns.contains(&format!("{service}.{NAMESPACE}.svc").as_str()),
        "the serving certificate names the Service's DNS name: {dns:?}"
    );
    // Issued by a CA Issuer whose CA comes from a self-signed Issuer.
    let issuer_ref = &serving["spec"]["issuerRef"];
    assert_eq!(issuer_ref["kind"], "Issuer");
    let ca_issuer = find("Issuer", issuer_ref["name"].as_str().expect("issuer name"));
    let ca_secret = ca_issuer["spec"]["ca"]["secretName"]
        .as_str()
        .expect("CA Issuer");
    let ca_cert = install
        .cert_manager
        .iter()
        .find(|d| d["kind"] == "Certificate" && d["spec"]["secretName"] == ca_secret)
        .expect("the CA Certificate");
    assert_eq!(ca_cert["spec"]["isCA"], true);
    let root = find(
        "Issuer",
        ca_cert["spec"]["issuerRef"]["name"]
            .as_str()
            .expect("issuer name"),
    );
    assert!(
        root["spec"]["selfSigned"].is_object(),
        "the CA is self-signed"
    );
}

/// The generated serving certificate names the Service and was issued by
/// the CA in the caBundle.
fn check_serving_cert(cert_pem: &[u8], ca_pem: &[u8], service: &str) {
    let (_, cert_pem) = x509_parser::pem::parse_x509_pem(cert_pem).expect("tls.crt is PEM");
    let cert = cert_pem.parse_x509().expect("tls.crt is a certificate");
    let (_, ca_pem) = x509_parser::pem::parse_x509_pem(ca_pem).expect("ca.crt is PEM");
    let ca = ca_pem.parse_x509().expect("ca.crt is a certificate");
    assert_eq!(cert.issuer(), ca.subject(), "tls.crt was issued by ca.crt");
    let names: Vec<String> = cert
        .subject_alternative_name()
        .expect("SAN extension")
        .expect("SAN present")
        .value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => Some((*d).to_owned()),
            _ => None,
        })
        .collect();
    let wanted = format!("{service}.{NAMESPACE}.svc");
    assert!(names.contains(&wanted), "tls.crt names {wanted}: {names:?}");
}

// ---------------------------------------------------------------------------
// Tests: each invariant on every rendering

#[test]
fn the_namespace_enforces_the_restricted_pod_security_level() {
    on_every_rendering(namespace_is_restricted);
}

#[test]
fn the_deployment_runs_at_least_two_replicas_and_selects_its_pods() {
    on_every_rendering(deployment_selects_at_least_two_replicas);
}

#[test]
fn the_container_passes_only_flags_serve_has_and_logs_json() {
    on_every_rendering(args_are_flags_serve_has);
}

#[test]
fn the_container_ports_are_the_listen_and_admin_listen_ports() {
    on_every_rendering(ports_are_the_listen_ports);
}

#[test]
fn the_probes_ask_the_admin_server_over_plain_http() {
    on_every_rendering(probes_ask_the_admin_server);
}

#[test]
fn the_termination_grace_period_outlasts_the_webhooks_shutdown() {
    on_every_rendering(termination_outlasts_the_shutdown);
}

#[test]
fn the_container_requests_cpu_and_memory_and_limits_memory_only() {
    on_every_rendering(resources_request_and_limit_memory_only);
}

#[test]
fn the_memory_limit_holds_the_body_budget_and_80_mib_more() {
    on_every_rendering(memory_limit_holds_the_body_budget);
}

#[test]
fn the_security_context_is_non_root_read_only_and_drops_all_capabilities() {
    on_every_rendering(security_context_is_restricted);
}

#[test]
fn the_pods_spread_over_nodes_and_zones() {
    on_every_rendering(pods_spread_over_nodes_and_zones);
}

#[test]
fn the_pod_disruption_budget_keeps_one_pod() {
    on_every_rendering(disruption_budget_keeps_one_pod);
}

#[test]
fn tls_and_policy_are_mounted_as_read_only_directories() {
    on_every_rendering(tls_and_policy_are_read_only_directories);
}

#[test]
fn the_policy_configmap_keeps_its_name_and_its_policy_asks_rbac() {
    on_every_rendering(policy_configmap_keeps_its_name_and_asks_rbac);
}

#[test]
fn the_service_targets_the_webhook_and_admin_ports() {
    on_every_rendering(service_targets_the_container_ports);
}

#[test]
fn the_webhook_configurations_call_the_service_for_pipelinerollout_writes() {
    on_every_rendering(webhook_configurations_match_the_server);
}

#[test]
fn the_children_and_other_rollouts_are_sent_only_writes_that_touch_a_force() {
    on_every_rendering(force_key_webhooks_send_only_force_writes);
}

#[test]
fn the_ca_comes_from_cert_manager_or_from_gen_certs() {
    on_every_rendering(ca_comes_from_cert_manager_or_gen_certs);
}

#[test]
fn the_rbac_grants_exactly_what_the_webhook_and_the_forcers_need() {
    on_every_rendering(rbac_grants_exactly_what_is_needed);
}

#[test]
fn the_network_policy_opens_the_webhook_port_to_all_and_the_admin_port_to_some() {
    on_every_rendering(network_policy_opens_the_ports);
}

// ---------------------------------------------------------------------------
// Tests: each rendering

#[test]
fn a_force_is_granted_to_no_one_but_by_the_opt_in_example_bindings() {
    on_every_rendering(force_is_granted_only_by_the_opt_in_bindings);
}

#[test]
fn the_skipped_namespaces_and_the_webhooks_own_account_are_guarded_in_process() {
    on_every_rendering(skipped_namespaces_and_own_account_are_guarded);
}

#[test]
fn base_renders_and_holds_the_invariants() {
    let base = rendering("base");
    holds_every_invariant(base);
    assert!(base.install.cert_manager.is_empty());
}

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

#[test]
fn every_overlay_is_checked() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/overlays");
    let found: BTreeSet<String> = fs::read_dir(&dir)
        .expect("manifests/overlays")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let known: BTreeSet<String> = OVERLAYS.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(
        found, known,
        "every overlay in manifests/overlays has expectations in tests/manifests.rs (OVERLAYS)"
    );
}

fn check_overlay(name: &str) {
    holds_every_invariant(rendering(&format!("overlays/{name}")));
}

#[test]
fn cert_manager_overlay() {
    check_overlay("cert-manager");
}

#[test]
fn self_signed_overlay_after_gen_certs() {
    check_overlay("self-signed");
}

#[test]
fn fail_open_overlay() {
    check_overlay("fail-open");
}

#[test]
fn self_signed_overlay_without_gen_certs_fails_clearly() {
    // Without certificates, kustomize refuses rather than rendering an
    // install that cannot work.
    let ws = Workspace::new();
    for file in ["ca.crt", "tls.crt", "tls.key", "ca-bundle.patch.yaml"] {
        let _ = fs::remove_file(ws.certs_dir().join(file));
    }
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(ws.manifests().join("overlays/self-signed"))
        .output()
        .expect(NO_KUBECTL);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("certs/tls.crt"));
}

#[test]
fn gen_certs_base64_patch_matches_ca() {
    // The patch gen-certs writes is the base64 of ca.crt, at the path the
    // overlay expects.
    let ws = Workspace::new();
    ws.gen_certs();
    let patch = fs::read_to_string(ws.certs_dir().join("ca-bundle.patch.yaml")).expect("patch");
    let ops: Vec<Value> = serde_saphyr::from_str(&patch).expect("patch is YAML");
    let op = one(&ops, "patch operation");
    assert_eq!(op["op"], "add");
    assert_eq!(op["path"], "/webhooks/0/clientConfig/caBundle");
    let ca = fs::read(ws.certs_dir().join("ca.crt")).expect("ca.crt");
    assert_eq!(
        op["value"].as_str(),
        Some(
            base64::engine::general_purpose::STANDARD
                .encode(ca)
                .as_str()
        )
    );
}
