//! Installing what users install: the Numaplane CRD and the project's
//! manifests as `kubectl kustomize` renders them, changed only where an API
//! server without pods forces it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::user::User;
use crate::webhook::Webhook;

/// Kinds of the rendered manifests that are created as rendered.
pub(crate) const INSTALLED: [&str; 10] = [
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// Kinds that are left out: nothing runs pods here. The webhook runs as a
/// local process instead of the Deployment, with the policy file itself
/// instead of the ConfigMap, reached by URL instead of the Service.
pub(crate) const SKIPPED: [&str; 5] = [
    "Deployment",
    "Service",
    "PodDisruptionBudget",
    "NetworkPolicy",
    "ConfigMap",
];

/// The repository's root: the directory above this crate's (`envtest/`).
/// [`CRD`](crate::CRD) and [`MANIFESTS`](crate::MANIFESTS) are relative to it.
pub fn repo_root() -> &'static Path {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir.parent().unwrap_or(crate_dir)
}

/// What [`Cluster::install_manifests`] created.
#[derive(Debug, Clone, Default)]
pub struct Installed {
    /// `Kind/name` of every object created.
    pub objects: Vec<String>,
    /// The mutating webhooks' names (`webhooks[].name`).
    pub mutating: Vec<String>,
    /// The validating webhooks' names.
    pub validating: Vec<String>,
}

impl Cluster {
    /// Creates the CustomResourceDefinition in `crd` (a YAML file) and waits
    /// until it is Established.
    pub fn install_crd(&self, crd: &Path) -> Result<(), String> {
        let admin = self.kubectl(User::Admin);
        let file = crd.display().to_string();
        let out = admin.run(&["create", "-f", &file, "-o", "name"]);
        if !out.success {
            return Err(format!("cannot install the CRD: {out}"));
        }
        let name = out.stdout.trim().to_owned();
        // A large CRD (Numaflow's Pipeline is 650 kB) may have no
        // conditions yet when `kubectl wait` first looks: it then fails
        // at once rather than waiting, so ask again.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = admin.run(&[
                "wait",
                "--for=condition=Established",
                "--timeout=30s",
                &name,
            ]);
            if out.success {
                return Ok(());
            }
            if !out.stderr.contains(".status.conditions accessor error")
                || Instant::now() > deadline
            {
                return Err(format!("{name} did not become Established: {out}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Renders `kustomization` (such as `manifests/base`) with `kubectl
    /// kustomize` and creates what an API server without pods can use:
    /// Namespaces, ServiceAccounts, RBAC and both kinds of webhook
    /// configuration (`INSTALLED` in `install.rs`), with each webhook's
    /// `clientConfig.service` replaced by `clientConfig.url` =
    /// `https://127.0.0.1:PORT` + the service's `path`, pointing at
    /// `webhook`, and `caBundle` = the cluster's CA. Everything else is
    /// created exactly as rendered. A kind the harness does not know is an
    /// error, so a new manifest needs a decision here.
    pub fn install_manifests(
        &self,
        kustomization: &Path,
        webhook: &Webhook,
    ) -> Result<Installed, String> {
        let base_url = webhook.base_url();
        let ca_bundle = self.pki().ca_bundle();
        self.create_rendered(
            kustomization,
            |_| None,
            |config| point_at(config, &base_url, &ca_bundle),
        )
    }

    /// Renders `kustomization` and creates its objects as admin: those of
    /// an `INSTALLED` kind, and those of a `SKIPPED` kind that `stand_in`
    /// replaces with an object to create instead. `configure` changes each
    /// webhook configuration and returns the names of its webhooks. A kind
    /// in neither list is an error. Namespaces go first and the webhook
    /// configurations last: the webhooks then ask RBAC that is already
    /// there.
    pub(crate) fn create_rendered(
        &self,
        kustomization: &Path,
        stand_in: impl Fn(&Value) -> Option<Value>,
        mut configure: impl FnMut(&mut Value) -> Result<Vec<String>, String>,
    ) -> Result<Installed, String> {
        let docs = render(self.kubectl_binary(), kustomization)?;
        let mut installed = Installed::default();
        let (mut first, mut rest, mut webhooks) = (Vec::new(), Vec::new(), Vec::new());
        for mut doc in docs {
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            let id = format!("{kind}/{name}");
            if SKIPPED.contains(&kind.as_str()) {
                if let Some(replacement) = stand_in(&doc) {
                    installed.objects.push(id);
                    rest.push(replacement);
                }
                continue;
            }
            if !INSTALLED.contains(&kind.as_str()) {
                return Err(format!(
                    "{} renders {id}, which envtest/src/install.rs neither installs nor skips: \
                     add its kind to INSTALLED or SKIPPED",
                    kustomization.display()
                ));
            }
            installed.objects.push(id);
            match kind.as_str() {
                "Namespace" => first.push(doc),
                "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => {
                    let names = configure(&mut doc)?;
                    if kind.starts_with("Mutating") {
                        installed.mutating.extend(names);
                    } else {
                        installed.validating.extend(names);
                    }
                    webhooks.push(doc);
                }
                _ => rest.push(doc),
            }
        }
        for batch in [first, rest, webhooks] {
            self.create_all(batch)?;
        }
        Ok(installed)
    }

    /// Creates every object in `objects` as admin, in one kubectl run.
    pub fn create_all(&self, objects: Vec<Value>) -> Result<(), String> {
        if objects.is_empty() {
            return Ok(());
        }
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        let out = self.kubectl(User::Admin).create(&list, &[]);
        if out.success {
            Ok(())
        } else {
            Err(format!("cannot create objects: {out}"))
        }
    }

    /// Waits until the API server calls the webhooks: a server-side dry
    /// run of a PipelineRollout without a drain timeout comes back with one
    /// (every mutating webhook in `installed` answered), and one with a
    /// string timeout is denied by the first validating webhook. Creates
    /// `namespace` for the probes.
    pub fn wait_for_webhooks(&self, installed: &Installed, namespace: &str) -> Result<(), String> {
        let admin = self.kubectl(User::Admin);
        let out = admin.run(&["create", "namespace", namespace]);
        if !out.success && !out.stderr.contains("AlreadyExists") {
            return Err(format!("cannot create the probe namespace: {out}"));
        }
        let probe = |timeout: Value| {
            json!({
                "apiVersion": "numaplane.numaproj.io/v1alpha1",
                "kind": "PipelineRollout",
                "metadata": {"name": "envtest-probe", "namespace": namespace},
                "spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": timeout}}}},
            })
        };
        let denied_by = installed
            .validating
            .first()
            .map(|name| format!("admission webhook \"{name}\" denied the request"));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let defaulted = admin.create(&probe(Value::Null), &["--dry-run=server", "-o", "json"]);
            let mutating_ok = installed.mutating.is_empty()
                || (defaulted.success
                    && !defaulted.json()["spec"]["pipeline"]["spec"]["lifecycle"]
                        ["pauseGracePeriodSeconds"]
                        .is_null());
            let refused = admin.create(&probe(json!("probe")), &["--dry-run=server"]);
            let validating_ok = denied_by
                .as_ref()
                .is_none_or(|text| !refused.success && refused.stderr.contains(text));
            if mutating_ok && validating_ok {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the API server does not call the webhooks after 30s:\n{defaulted}\n{refused}"
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// `kubectl kustomize DIR`, as documents.
pub(crate) fn render(kubectl: &Path, kustomization: &Path) -> Result<Vec<Value>, String> {
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(kustomization)
        .output()
        .map_err(|e| format!("cannot run kubectl kustomize: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "kubectl kustomize {} failed: {}",
            kustomization.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .map_err(|e| format!("{} renders invalid YAML: {e}", kustomization.display()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Points every webhook of a webhook configuration at `base_url` (keeping
/// the rendered `service.path`) with `ca_bundle`; returns their names.
fn point_at(config: &mut Value, base_url: &str, ca_bundle: &str) -> Result<Vec<String>, String> {
    let config_name = config["metadata"]["name"]
        .as_str()
        .unwrap_or("?")
        .to_owned();
    let webhooks = config["webhooks"]
        .as_array_mut()
        .ok_or_else(|| format!("webhook configuration {config_name} has no webhooks list"))?;
    let mut names = Vec::new();
    for webhook in webhooks {
        let name = webhook["name"].as_str().unwrap_or("?").to_owned();
        let client = webhook["clientConfig"]
            .as_object_mut()
            .ok_or_else(|| format!("webhook {name} has no clientConfig"))?;
        let service = client.remove("service").ok_or_else(|| {
            format!(
                "webhook {name}: clientConfig has no service (the harness replaces it with a url)"
            )
        })?;
        if client.contains_key("url") {
            return Err(format!(
                "webhook {name}: clientConfig has both service and url"
            ));
        }
        let path = service["path"].as_str().unwrap_or_default();
        client.insert("url".to_owned(), json!(format!("{base_url}{path}")));
        client.insert("caBundle".to_owned(), json!(ca_bundle));
        names.push(name);
    }
    Ok(names)
}
