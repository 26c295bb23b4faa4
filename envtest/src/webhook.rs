//! The real webhook binary, serving on loopback with a certificate from the
//! cluster's CA and asking the cluster's RBAC as its own service account.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::cluster::{Cluster, User, free_port};
use crate::http;
use crate::process::{Process, wait_until};

/// How to run the webhook.
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// The `pipelinerollout-webhook` binary (from a test of the webhook's
    /// own package: `env!("CARGO_BIN_EXE_pipelinerollout-webhook")`).
    pub binary: PathBuf,
    /// A name for its log file and messages (unique per cluster).
    pub name: String,
    /// The policy file (`--policy`).
    pub policy: PathBuf,
    /// More flags for `serve`.
    pub extra_args: Vec<String>,
    /// The kubeconfig it reaches the API server with; `None`: the webhook
    /// service account's ([`Cluster::kubeconfig`] of [`User::Webhook`]).
    pub kubeconfig: Option<PathBuf>,
}

/// A webhook process; stopped when dropped. It keeps its ports and
/// certificate across [`Webhook::stop`] and [`Webhook::start`], so the
/// webhook configurations stay valid.
#[derive(Debug)]
pub struct Webhook {
    options: WebhookOptions,
    addr: SocketAddr,
    admin: SocketAddr,
    args: Vec<String>,
    log: PathBuf,
    process: Option<Process>,
}

impl Webhook {
    /// Starts `pipelinerollout-webhook serve` on free loopback ports, with a
    /// serving certificate for 127.0.0.1 signed by the cluster's CA, the
    /// kubeconfig of the webhook's service account and
    /// `--shutdown-delay 0s`, and waits until its `/readyz` answers 200.
    pub fn start(cluster: &Cluster, options: WebhookOptions) -> Result<Self, String> {
        let dir = cluster.dir().join(&options.name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let pair = cluster
            .pki()
            .serving(&options.name, &["127.0.0.1", "localhost"])?;
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        for (path, text) in [(&cert, &pair.cert_pem), (&key, &pair.key_pem)] {
            std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
            let admin = SocketAddr::from(([127, 0, 0, 1], free_port()?));
            let mut args: Vec<String> = [
                "serve",
                "--listen",
                &addr.to_string(),
                "--admin-listen",
                &admin.to_string(),
                "--tls-cert",
                &cert.display().to_string(),
                "--tls-key",
                &key.display().to_string(),
                "--policy",
                &options.policy.display().to_string(),
                "--kubeconfig",
                &options
                    .kubeconfig
                    .clone()
                    .unwrap_or_else(|| cluster.kubeconfig(User::Webhook))
                    .display()
                    .to_string(),
                "--shutdown-delay",
                "0s",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
            args.extend(options.extra_args.iter().cloned());
            let mut webhook = Self {
                options: options.clone(),
                addr,
                admin,
                args,
                log: cluster.dir().join(format!("{}.log", options.name)),
                process: None,
            };
            match webhook.resume(cluster) {
                Ok(()) => return Ok(webhook),
                // A port picked a moment ago was taken since: pick others.
                Err(why) if attempt < 3 && port_taken(&why) => continue,
                Err(why) => return Err(why),
            }
        }
    }

    /// Starts `pipelinerollout-webhook serve --manage-certs` listening on
    /// `listen`, serving `cert_dir`'s `tls.crt` and `tls.key` (which a
    /// [`SecretMirror`](crate::SecretMirror) fills), with the webhook
    /// service account's kubeconfig, the Secret's and Service's namespace
    /// `namespace`, `--shutdown-delay 0s` and `--reload-interval 1s`, and
    /// waits until its `/readyz` answers 200 (the caBundle trusts what it
    /// serves).
    pub fn start_managed(
        cluster: &Cluster,
        options: WebhookOptions,
        listen: SocketAddr,
        cert_dir: &std::path::Path,
        namespace: &str,
    ) -> Result<Self, String> {
        let kubeconfig = cluster.kubeconfig(User::Webhook);
        let mut webhook =
            Self::managed(cluster, options, listen, cert_dir, namespace, &kubeconfig)?;
        webhook.resume(cluster)?;
        Ok(webhook)
    }

    /// [`Webhook::start_managed`] with the kubeconfig `kubeconfig`, waiting
    /// only until it serves (`/healthz` answers 200), ready or not.
    pub fn spawn_managed(
        cluster: &Cluster,
        options: WebhookOptions,
        listen: SocketAddr,
        cert_dir: &std::path::Path,
        namespace: &str,
        kubeconfig: &std::path::Path,
    ) -> Result<Self, String> {
        let mut webhook = Self::managed(cluster, options, listen, cert_dir, namespace, kubeconfig)?;
        let mut process = cluster.spawn(
            &webhook.options.name,
            &webhook.options.binary,
            &webhook.args,
            Duration::from_secs(5),
        )?;
        let admin = webhook.admin;
        let serving = wait_until(
            &mut process,
            &format!("webhook {}", webhook.options.name),
            Duration::from_secs(30),
            || match http::get(admin, "/healthz", None)? {
                (200, _) => Ok(()),
                (status, body) => Err(format!("/healthz: {status} {}", body.trim())),
            },
        );
        webhook.process = Some(process);
        serving.map(|()| webhook)
    }

    fn managed(
        cluster: &Cluster,
        options: WebhookOptions,
        listen: SocketAddr,
        cert_dir: &std::path::Path,
        namespace: &str,
        kubeconfig: &std::path::Path,
    ) -> Result<Self, String> {
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let path = |file: &str| cert_dir.join(file).display().to_string();
        let mut args: Vec<String> = [
            "serve",
            "--listen",
            &listen.to_string(),
            "--admin-listen",
            &admin.to_string(),
            "--tls-cert",
            &path("tls.crt"),
            "--tls-key",
            &path("tls.key"),
            "--manage-certs",
            "--cert-secret-namespace",
            namespace,
            "--policy",
            &options.policy.display().to_string(),
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--shutdown-delay",
            "0s",
            "--reload-interval",
            "1s",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(options.extra_args.iter().cloned());
        Ok(Self {
            log: cluster.dir().join(format!("{}.log", options.name)),
            options,
            addr: listen,
            admin,
            args,
            process: None,
        })
    }

    /// `/readyz` of its admin server: the status and the body.
    pub fn readyz(&self) -> Result<(u16, String), String> {
        http::get(self.admin, "/readyz", None)
    }

    /// The base of the webhook configurations' `clientConfig.url`:
    /// `https://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// POSTs `body` to `path` on the webhook port directly, as any pod on
    /// the network could, trusting `cluster`'s CA: the status and the body.
    pub fn post_json(
        &self,
        cluster: &Cluster,
        path: &str,
        body: &str,
    ) -> Result<(u16, String), String> {
        let tls = http::Tls::new(cluster.pki().ca_pem(), None)?;
        http::post_json(self.addr, path, body, Some(&tls))
    }

    /// Where its admin server (`/readyz`, `/metrics`) listens.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
    }

    /// GETs `path` from its admin server (`/metrics`, `/readyz`): the
    /// status and the body.
    pub fn admin_get(&self, path: &str) -> Result<(u16, String), String> {
        http::get(self.admin, path, None)
    }

    /// The process id of the running webhook (`None` when stopped).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Process::pid)
    }

    /// Sends it `signal` (such as `TERM` or `KILL`) and returns at once;
    /// [`Webhook::wait_exit`] waits for the end.
    pub fn signal(&self, signal: &str) -> Result<(), String> {
        let pid = self.pid().ok_or("the webhook is not running")?;
        let out = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .output()
            .map_err(|e| format!("cannot run kill: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "kill -{signal} {pid}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Waits (up to `timeout`) until the process has ended, as after
    /// [`Webhook::signal`]; then it counts as stopped.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            match self.process.as_mut().map(Process::exited) {
                None | Some(Some(_)) => {
                    self.stop();
                    return Ok(());
                }
                Some(None) if std::time::Instant::now() >= deadline => {
                    return Err(format!(
                        "webhook {} still runs after {timeout:?}",
                        self.options.name
                    ));
                }
                Some(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// The end of its log (also once it has stopped: the log of every run
    /// so far).
    pub fn log_tail(&self, lines: usize) -> String {
        crate::process::log_tail(&self.log, lines)
    }

    /// Stops it (SIGTERM, as kubelet would) and waits until it is gone.
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.stop();
        }
    }

    /// Starts it again after [`Webhook::stop`], on the same ports with the
    /// same files, and waits until it is ready.
    pub fn resume(&mut self, cluster: &Cluster) -> Result<(), String> {
        self.stop();
        let mut process = cluster.spawn(
            &self.options.name,
            &self.options.binary,
            &self.args,
            Duration::from_secs(5),
        )?;
        let admin = self.admin;
        let ready = wait_until(
            &mut process,
            &format!("webhook {}", self.options.name),
            Duration::from_secs(30),
            || match http::get(admin, "/readyz", None)? {
                (200, _) => Ok(()),
                (status, body) => Err(format!("/readyz: {status} {}", body.trim())),
            },
        );
        self.process = Some(process);
        ready
    }
}

/// Whether a start-up error says a port was taken.
pub(crate) fn port_taken(why: &str) -> bool {
    why.to_lowercase().contains("address already in use")
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.stop();
    }
}
