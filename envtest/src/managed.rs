//! The webhook managing its own certificates (`serve --manage-certs`) on
//! a cluster without pods, kubelet or DNS.
//!
//! - [`Cluster::install_self_managed`] installs the manifests keeping each
//!   webhook's `clientConfig.service` (its port set to the webhook's), with
//!   no caBundle, and the Service as an `ExternalName` Service whose name
//!   is a loopback IP: the API server resolves such a Service to that name
//!   and the webhook's port, and still checks the certificate for
//!   `SERVICE.NAMESPACE.svc`, as it does in a cluster. Which replica the
//!   API server calls is [`Cluster::point_service_at`].
//! - [`SecretMirror`] plays the kubelet: it watches the Secret and writes
//!   its data into a directory the way the kubelet updates a Secret volume
//!   (each version in a directory of its own, swapped in at once through a
//!   `..data` symlink that the files link through), so the webhook reads
//!   the Secret's files exactly as it would in a pod. Like the kubelet, it
//!   lags: each version is written a set delay after the API server
//!   reports it (the kubelet's lag is its sync period, up to about a
//!   minute), so a CA rotation that does not wait for the replicas shows.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::install::Installed;
use crate::user::User;

impl Cluster {
    /// Renders `kustomization` and creates what [`Cluster::install_manifests`]
    /// creates, except that the webhooks keep `clientConfig.service` (port
    /// `port`, no caBundle: the webhook writes it) and the Service is
    /// created as `ExternalName` = `127.0.0.1`.
    pub fn install_self_managed(
        &self,
        kustomization: &Path,
        port: u16,
    ) -> Result<Installed, String> {
        self.create_rendered(
            kustomization,
            |doc| {
                (doc["kind"] == "Service").then(|| {
                    json!({
                        "apiVersion": "v1",
                        "kind": "Service",
                        "metadata": {
                            "name": doc["metadata"]["name"],
                            "namespace": doc["metadata"]["namespace"],
                        },
                        "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
                    })
                })
            },
            |config| keep_service(config, port),
        )
    }

    /// Sets every webhook's `clientConfig.service.port` to `port` in the
    /// webhook configurations `installed` holds, once a replica has reported
    /// the port it bound; a JSON patch of the ports alone, which leaves the
    /// caBundle the webhook writes as it is.
    pub fn set_webhook_port(&self, installed: &Installed, port: u16) -> Result<(), String> {
        let admin = self.kubectl(User::Admin);
        let configurations = installed.objects.iter().filter_map(|object| {
            let (kind, name) = object.split_once('/')?;
            kind.ends_with("WebhookConfiguration")
                .then(|| (kind.to_lowercase(), name))
        });
        for (kind, name) in configurations {
            let out = admin.run(&["get", &kind, name, "-o", "json"]);
            if !out.success {
                return Err(format!("cannot read {kind}/{name}: {out}"));
            }
            let count = out.json()["webhooks"].as_array().map_or(0, Vec::len);
            let ops: Vec<Value> = (0..count)
                .map(|i| {
                    json!({"op": "replace", "path": format!("/webhooks/{i}/clientConfig/service/port"), "value": port})
                })
                .collect();
            let patch = Value::Array(ops).to_string();
            let out = admin.run(&["patch", &kind, name, "--type=json", "-p", &patch]);
            if !out.success {
                return Err(format!("cannot set the port of {kind}/{name}: {out}"));
            }
        }
        Ok(())
    }

    /// Points the `ExternalName` Service `namespace/name` at `ip` (a
    /// loopback address a webhook replica listens on).
    pub fn point_service_at(&self, namespace: &str, name: &str, ip: &str) -> Result<(), String> {
        let patch = json!({"spec": {"externalName": ip}});
        let out = self
            .kubectl(User::Admin)
            .merge_patch("service", namespace, name, &patch, &[]);
        if out.success {
            Ok(())
        } else {
            Err(format!(
                "cannot point Service {namespace}/{name} at {ip}: {out}"
            ))
        }
    }
}

/// Sets every webhook's `clientConfig.service.port` to `port` and removes
/// any caBundle; returns their names.
fn keep_service(config: &mut Value, port: u16) -> Result<Vec<String>, String> {
    let webhooks = config["webhooks"]
        .as_array_mut()
        .ok_or("a webhook configuration has no webhooks list")?;
    let mut names = Vec::new();
    for webhook in webhooks {
        let name = webhook["name"].as_str().unwrap_or("?").to_owned();
        let client = webhook["clientConfig"]
            .as_object_mut()
            .ok_or_else(|| format!("webhook {name} has no clientConfig"))?;
        client.remove("caBundle");
        let service = client
            .get_mut("service")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| format!("webhook {name}: clientConfig has no service"))?;
        service.insert("port".to_owned(), json!(port));
        names.push(name);
    }
    Ok(names)
}

/// The kubelet's part for one Secret and one replica: the Secret's data,
/// mirrored into a directory whenever it changes, until dropped.
#[derive(Debug)]
pub struct SecretMirror {
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    child: Arc<Mutex<Option<Child>>>,
    thread: Option<JoinHandle<()>>,
    versions: Arc<AtomicU64>,
}

impl SecretMirror {
    /// Starts mirroring Secret `namespace/name` into `dir` (created; empty
    /// until the Secret exists), watching it with `kubectl get --watch` as
    /// admin and writing each version `lag` after it arrives. An ended
    /// watch is started again.
    pub fn start(
        cluster: &Cluster,
        namespace: &str,
        name: &str,
        dir: &Path,
        lag: Duration,
    ) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let kubectl = cluster.kubectl_binary().to_owned();
        let kubeconfig = cluster.kubeconfig(User::Admin);
        let args: Vec<String> = [
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "get",
            "secrets",
            "-n",
            namespace,
            "--field-selector",
            &format!("metadata.name={name}"),
            "--watch",
            "-o",
            "json",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let child = Arc::new(Mutex::new(None::<Child>));
        let versions = Arc::new(AtomicU64::new(0));
        // Versions in arrival order, each written once its lag has passed.
        let (queue, due) = std::sync::mpsc::channel::<(Instant, Value)>();
        let writer = std::thread::spawn({
            let (versions, dir) = (Arc::clone(&versions), dir.to_owned());
            move || {
                for (at, secret) in due {
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                    // A failed write is written again with the next version.
                    let _ = publish(&dir, &secret, versions.fetch_add(1, Ordering::SeqCst));
                }
            }
        });
        let thread = std::thread::spawn({
            let (stop, child) = (Arc::clone(&stop), Arc::clone(&child));
            move || {
                while !stop.load(Ordering::SeqCst) {
                    let spawned = Command::new(&kubectl)
                        .args(&args)
                        .stdin(Stdio::null())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::null())
                        .spawn();
                    let Ok(mut process) = spawned else {
                        std::thread::sleep(Duration::from_millis(500));
                        continue;
                    };
                    let stdout = process.stdout.take();
                    *child.lock().expect("mirror lock") = Some(process);
                    if let Some(stdout) = stdout {
                        let stream = serde_json::Deserializer::from_reader(BufReader::new(stdout))
                            .into_iter::<Value>();
                        for value in stream {
                            let Ok(value) = value else { break };
                            let items = match value["kind"].as_str() {
                                Some("List") => {
                                    value["items"].as_array().cloned().unwrap_or_default()
                                }
                                _ => vec![value],
                            };
                            for secret in items {
                                let _ = queue.send((Instant::now() + lag, secret));
                            }
                        }
                    }
                    if let Some(mut process) = child.lock().expect("mirror lock").take() {
                        let _ = process.kill();
                        let _ = process.wait();
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                // Dropping the queue ends the writer.
                drop(queue);
                let _ = writer.join();
            }
        });
        Ok(Self {
            dir: dir.to_owned(),
            stop,
            child,
            thread: Some(thread),
            versions,
        })
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many versions of the Secret were written so far.
    pub fn versions(&self) -> u64 {
        self.versions.load(Ordering::SeqCst)
    }
}

impl Drop for SecretMirror {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(process) = self.child.lock().expect("mirror lock").as_mut() {
            let _ = process.kill();
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Writes `secret`'s data into `dir` as the kubelet does: into a new
/// directory `..version`, made current at once by renaming a `..data`
/// symlink onto it; each key is a symlink `KEY -> ..data/KEY`.
fn publish(dir: &Path, secret: &Value, version: u64) -> std::io::Result<()> {
    use base64::Engine as _;
    let io = |e: String| std::io::Error::other(e);
    let mut data = BTreeMap::new();
    for (key, value) in secret["data"].as_object().into_iter().flatten() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.as_str().unwrap_or_default())
            .map_err(|e| io(e.to_string()))?;
        data.insert(key.clone(), bytes);
    }
    let name = format!("..{version}");
    let target = dir.join(&name);
    std::fs::create_dir_all(&target)?;
    for (key, bytes) in &data {
        std::fs::write(target.join(key), bytes)?;
    }
    let link = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&name, &link)?;
    let previous = std::fs::read_link(dir.join("..data")).ok();
    std::fs::rename(&link, dir.join("..data"))?;
    for key in data.keys() {
        let file = dir.join(key);
        if std::fs::symlink_metadata(&file).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(key), &file)?;
        }
    }
    if let Some(previous) = previous.filter(|p| p.as_path() != Path::new(&name)) {
        let _ = std::fs::remove_dir_all(dir.join(previous));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(cert: &str) -> Value {
        use base64::Engine as _;
        let encode = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        json!({"data": {"tls.crt": encode(cert), "tls.key": encode("key")}})
    }

    #[test]
    fn each_version_replaces_the_last_at_once_through_the_data_link() {
        let dir = tempfile::tempdir().expect("dir");
        publish(dir.path(), &secret("one"), 0).expect("first");
        publish(dir.path(), &secret("two"), 1).expect("second");
        let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).expect(f);
        assert_eq!(read("tls.crt"), "two");
        assert_eq!(read("tls.key"), "key");
        assert_eq!(
            std::fs::read_link(dir.path().join("tls.crt")).expect("a link"),
            Path::new("..data/tls.crt")
        );
        assert_eq!(
            std::fs::read_link(dir.path().join("..data")).expect("a link"),
            Path::new("..1")
        );
        assert!(!dir.path().join("..0").exists(), "the old version is gone");
    }
}
