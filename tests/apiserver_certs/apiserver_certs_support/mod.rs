//! What the tests of `serve --manage-certs` share: the self-managed install
//! with its replicas (each with a lagging kubelet stand-in), a proxy that
//! can cut the API server off, and reading the caBundle, the Secret and the
//! metrics.
// Not every item is used by every test.
#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use envtest::{Assets, Cluster, Installed, SecretMirror, User, Webhook, WebhookOptions, repo_root};
use serde_json::json;

use crate::apiserver_support::rollout;

pub mod load;

/// The webhook binary the API server calls.
pub const WEBHOOK: &str = env!("CARGO_BIN_EXE_pipelinerollout-webhook");
/// The overlay under test.
pub const OVERLAY: &str = "manifests/overlays/self-managed";
/// The namespace, Service, Secret and webhook configurations the overlay names.
pub const NAMESPACE: &str = "pipelinerollout-webhook";
pub const SERVICE: &str = "pipelinerollout-webhook";
pub const SECRET: &str = "pipelinerollout-webhook-tls";
/// The CA Secret (no replica mounts it).
pub const CA_SECRET: &str = "pipelinerollout-webhook-ca";
pub const CONFIGURATION: &str = "pipelinerollout-webhook";
/// The flag that puts the certificate controller under the Lease.
pub const LEADER_ELECT: &str = "--leader-elect=true";
/// Where the writers write.
pub const TEAM: &str = "certs-team";

/// Held by each test for its whole run.
pub static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One replica: the webhook and the kubelet's copy of the Secret it serves
/// (the webhook is declared first, so it stops first).
pub struct Replica {
    /// The webhook process.
    pub webhook: Webhook,
    _mirror: SecretMirror,
    /// The loopback address it listens on.
    pub ip: &'static str,
}

/// A cluster with the self-managed overlay and its replicas.
pub struct SelfManaged {
    /// The replicas, the certificate controller's first.
    pub replicas: Vec<Replica>,
    /// The cluster.
    pub cluster: Cluster,
}

impl SelfManaged {
    /// A cluster with the CRD and the overlay, then one replica per `ip`
    /// (all on the port the first binds, as the Service has one), the first running the
    /// certificate controller and the others serving only (with
    /// [`LEADER_ELECT`] among `flags`, every replica runs it under the
    /// Lease, and the first to start leads); each started
    /// once the one before is ready, each with a kubelet stand-in that
    /// lags a little more than the one before (0.5 s, 1.5 s). `flags` go
    /// to every replica.
    pub fn start(assets: &Assets, ips: &[&'static str], flags: &[&str]) -> Result<Self, String> {
        let lags: Vec<Duration> = (0..ips.len() as u64)
            .map(|i| Duration::from_millis(500 + 1000 * i))
            .collect();
        Self::start_with_lags(assets, ips, flags, &lags)
    }

    /// As [`SelfManaged::start`], with the kubelet stand-in of the replica
    /// at `ips[i]` lagging `lags[i]`.
    pub fn start_with_lags(
        assets: &Assets,
        ips: &[&'static str],
        flags: &[&str],
        lags: &[Duration],
    ) -> Result<Self, String> {
        Self::start_install(assets, &repo_root().join(OVERLAY), ips, flags, lags)
    }

    /// As [`SelfManaged::start_with_lags`], with the install of the
    /// kustomization `install` (the self-managed overlay with components).
    pub fn start_install(
        assets: &Assets,
        install: &Path,
        ips: &[&'static str],
        flags: &[&str],
        lags: &[Duration],
    ) -> Result<Self, String> {
        if lags.len() != ips.len() {
            return Err(format!("{} lags for {} replicas", lags.len(), ips.len()));
        }
        let cluster = Cluster::start(assets)?;
        cluster.install_crd(&repo_root().join(envtest::CRD))?;
        let policy = cluster.dir().join("policy.yaml");
        std::fs::write(&policy, envtest::base_policy()?).map_err(|e| e.to_string())?;
        // The replicas' port is the one the first replica binds; until it
        // reports it, the webhook configurations name the Service's port.
        let installed = cluster.install_self_managed(install, 443)?;
        let mut port = None;
        check_installed(&installed)?;
        cluster.create_all(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM}}),
        ])?;
        let mut replicas = Vec::new();
        for (i, ip) in ips.iter().enumerate() {
            let name = format!("replica-{i}");
            let dir = cluster.dir().join(&name).join("tls");
            let mirror = SecretMirror::start(&cluster, NAMESPACE, SECRET, &dir, lags[i])?;
            let mut extra_args: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
            // With leader election the Lease decides which replica runs the
            // certificate controller; without, the first one does.
            if i > 0 && !flags.contains(&LEADER_ELECT) {
                extra_args.push("--cert-controller=false".to_owned());
            }
            let options = WebhookOptions {
                binary: WEBHOOK.into(),
                name,
                policy: policy.clone(),
                extra_args,
                kubeconfig: None,
            };
            let ip_addr: std::net::IpAddr = ip.parse().map_err(|e| format!("{ip}: {e}"))?;
            let listen = SocketAddr::new(ip_addr, port.unwrap_or(0));
            let mut webhook = Webhook::launch_managed(&cluster, options, listen, &dir, NAMESPACE)?;
            if port.is_none() {
                let bound = webhook.addr().port();
                cluster.set_webhook_port(&installed, bound)?;
                port = Some(bound);
            }
            webhook.wait_ready()?;
            replicas.push(Replica {
                webhook,
                _mirror: mirror,
                ip,
            });
        }
        Ok(Self { replicas, cluster })
    }

    /// The replica the Service points at from now on.
    pub fn route_to(&self, replica: usize) -> Result<(), String> {
        self.cluster
            .point_service_at(NAMESPACE, SERVICE, self.replicas[replica].ip)
    }

    /// Creates one PipelineRollout through the webhooks.
    pub fn write(&self, name: &str) -> envtest::Output {
        self.cluster
            .kubectl(User::Admin)
            .create(&rollout(TEAM, name, None), &[])
    }

    /// Writes until one goes through (the webhooks answer), or fails after `timeout`.
    pub fn wait_for_a_write(&self, prefix: &str, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        let mut i = 0;
        loop {
            i += 1;
            let out = self.write(&format!("{prefix}-{i}"));
            if out.success {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                return Err(format!("no write went through in {timeout:?}: {out}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Starts one more replica at `ip`, serving only, with its own lagging
    /// mirror and `kubeconfig`, without waiting for readiness.
    pub fn spawn_follower(&self, ip: &'static str, kubeconfig: &Path) -> Result<Replica, String> {
        let name = format!("replica-{}", self.replicas.len());
        let dir = self.cluster.dir().join(&name).join("tls");
        let mirror = SecretMirror::start(
            &self.cluster,
            NAMESPACE,
            SECRET,
            &dir,
            Duration::from_millis(500),
        )?;
        // The mirror has the Secret's files before the replica starts, as
        // the kubelet has a volume's before the container starts.
        within(Duration::from_secs(10), || dir.join("tls.crt").exists())
            .ok_or("the mirror wrote no files")?;
        let port = self.replicas[0].webhook.addr().port();
        let options = WebhookOptions {
            binary: WEBHOOK.into(),
            name,
            policy: self.cluster.dir().join("policy.yaml"),
            extra_args: vec!["--cert-controller=false".to_owned()],
            kubeconfig: None,
        };
        let ip_addr: std::net::IpAddr = ip.parse().map_err(|e| format!("{ip}: {e}"))?;
        let webhook = Webhook::spawn_managed(
            &self.cluster,
            options,
            SocketAddr::new(ip_addr, port),
            &dir,
            NAMESPACE,
            kubeconfig,
        )?;
        Ok(Replica {
            webhook,
            _mirror: mirror,
            ip,
        })
    }
}

/// A TCP forwarder to the API server that can be down (it then closes
/// every connection at once) or up.
pub struct Proxy {
    addr: SocketAddr,
    up: Arc<AtomicBool>,
}

impl Proxy {
    /// Forwards to `target`; down until [`Proxy::set_up`].
    pub fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let up = Arc::new(AtomicBool::new(false));
        let is_up = Arc::clone(&up);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if !is_up.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (client.try_clone(), server.try_clone()),
                    (server.try_clone(), client.try_clone()),
                ]
                .into_iter()
                .filter_map(|(a, b)| Some((a.ok()?, b.ok()?)))
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        Self { addr, up }
    }

    pub fn set_up(&self) {
        self.up.store(true, Ordering::SeqCst);
    }

    /// A copy of `kubeconfig` whose server is this proxy.
    pub fn kubeconfig(&self, cluster: &Cluster, kubeconfig: &Path) -> std::path::PathBuf {
        let text = std::fs::read_to_string(kubeconfig).expect("read the kubeconfig");
        let proxied = text.replace(&cluster.server(), &format!("https://{}", self.addr));
        assert_ne!(text, proxied, "the kubeconfig names {}", cluster.server());
        let path = cluster.dir().join("webhook-through-proxy.kubeconfig");
        std::fs::write(&path, proxied).expect("write the kubeconfig");
        path
    }
}

pub fn check_installed(installed: &Installed) -> Result<(), String> {
    if installed.mutating.is_empty() || installed.validating.is_empty() {
        return Err(format!("the overlay installs no webhooks: {installed:?}"));
    }
    Ok(())
}

/// The decoded caBundle of every webhook of both configurations that
/// calls the webhook's Service.
pub fn ca_bundles(cluster: &Cluster) -> Vec<String> {
    webhook_bundles(cluster)
        .into_iter()
        .filter(|(service, _)| service == SERVICE)
        .map(|(_, bundle)| bundle)
        .collect()
}

/// Every webhook of both configurations: the Service it calls ("" for a
/// URL) and its decoded caBundle.
pub fn webhook_bundles(cluster: &Cluster) -> Vec<(String, String)> {
    let admin = cluster.kubectl(User::Admin);
    let mut bundles = Vec::new();
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let out = admin
            .run(&["get", kind, CONFIGURATION, "-o", "json"])
            .expect_success("read a webhook configuration");
        for webhook in out.json()["webhooks"].as_array().into_iter().flatten() {
            let bundle = webhook["clientConfig"]["caBundle"]
                .as_str()
                .unwrap_or_default();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(bundle)
                .unwrap_or_default();
            let service = webhook["clientConfig"]["service"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            bundles.push((service, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    bundles
}

/// The serving Secret's data, decoded.
pub fn secret_data(cluster: &Cluster) -> std::collections::BTreeMap<String, String> {
    named_secret_data(cluster, SECRET)
}

/// The CA Secret's data, decoded.
pub fn ca_secret_data(cluster: &Cluster) -> std::collections::BTreeMap<String, String> {
    named_secret_data(cluster, CA_SECRET)
}

fn named_secret_data(cluster: &Cluster, name: &str) -> std::collections::BTreeMap<String, String> {
    let secret = cluster
        .kubectl(User::Admin)
        .get("secret", NAMESPACE, name)
        .expect("the webhook wrote its Secret");
    secret["data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap_or_default())
                .unwrap_or_default();
            (k.clone(), String::from_utf8_lossy(&bytes).into_owned())
        })
        .collect()
}

/// The PEM blocks of a bundle, normalised.
pub fn pem_blocks(bundle: &str) -> Vec<String> {
    bundle
        .split("-----END CERTIFICATE-----")
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(|b| format!("{b}\n-----END CERTIFICATE-----"))
        .collect()
}

/// GET `path` from a replica's admin port: the status line and the body.
pub fn admin_get(addr: SocketAddr, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    Ok(text)
}

/// The sum of a metric's samples whose line starts with `prefix`.
pub fn metric(replica: &Replica, prefix: &str) -> f64 {
    let text = admin_get(replica.webhook.admin_addr(), "/metrics").expect("metrics");
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next())
        .filter_map(|v| v.parse::<f64>().ok())
        .sum()
}

pub fn ready(replica: &Replica) -> bool {
    replica
        .webhook
        .readyz()
        .is_ok_and(|(status, _)| status == 200)
}

/// Polls `check` every 100 ms until it holds or `timeout` passes: how long it took.
pub fn within(timeout: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if check() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}
