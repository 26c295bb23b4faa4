//! The real webhook binary, serving on loopback with a certificate from the
//! cluster's CA and asking the cluster's RBAC as its own service account.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cluster::Cluster;
use crate::http;
use crate::serve::{Bound, ServeCommand, Served};
use crate::user::User;

/// How long a webhook may take to be ready once it reported its addresses.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a stopped webhook has between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

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

/// A webhook process; stopped when dropped. It keeps the addresses it
/// bound first and its certificate across [`Webhook::stop`] and
/// [`Webhook::resume`], so the webhook configurations stay valid.
#[derive(Debug)]
pub struct Webhook {
    options: WebhookOptions,
    /// The command line; after the first start, with the addresses bound.
    command: ServeCommand,
    bound: Bound,
    log: PathBuf,
    served: Option<Served>,
}

impl Webhook {
    /// Starts `pipelinerollout-webhook serve` on loopback ports the kernel
    /// chooses, with a serving certificate for 127.0.0.1 signed by the
    /// cluster's CA, the kubeconfig of the webhook's service account and
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
        let kubeconfig = options
            .kubeconfig
            .clone()
            .unwrap_or_else(|| cluster.kubeconfig(User::Webhook));
        let command = serve_command(&options, &cert, &key, &kubeconfig, &[]);
        let mut webhook = Self::launch(cluster, options, command)?;
        webhook.wait_for("/readyz")?;
        Ok(webhook)
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
        cert_dir: &Path,
        namespace: &str,
    ) -> Result<Self, String> {
        let mut webhook = Self::launch_managed(cluster, options, listen, cert_dir, namespace)?;
        webhook.wait_ready()?;
        Ok(webhook)
    }

    /// [`Webhook::start_managed`] without waiting for readiness: it returns
    /// once the webhook has reported the addresses it bound (with port 0 in
    /// `listen`, [`Webhook::addr`] says which), and [`Webhook::wait_ready`]
    /// waits for the rest.
    pub fn launch_managed(
        cluster: &Cluster,
        options: WebhookOptions,
        listen: SocketAddr,
        cert_dir: &Path,
        namespace: &str,
    ) -> Result<Self, String> {
        let kubeconfig = cluster.kubeconfig(User::Webhook);
        let command = managed(&options, listen, cert_dir, namespace, &kubeconfig);
        Self::launch(cluster, options, command)
    }

    /// Waits until its `/readyz` answers 200.
    pub fn wait_ready(&mut self) -> Result<(), String> {
        self.wait_for("/readyz")
    }

    /// Where the webhook listens (HTTPS).
    pub fn addr(&self) -> SocketAddr {
        self.bound.webhook
    }

    /// [`Webhook::start_managed`] with the kubeconfig `kubeconfig`, waiting
    /// only until it serves (`/healthz` answers 200), ready or not.
    pub fn spawn_managed(
        cluster: &Cluster,
        options: WebhookOptions,
        listen: SocketAddr,
        cert_dir: &Path,
        namespace: &str,
        kubeconfig: &Path,
    ) -> Result<Self, String> {
        let command = managed(&options, listen, cert_dir, namespace, kubeconfig);
        let mut webhook = Self::launch(cluster, options, command)?;
        webhook.wait_for("/healthz")?;
        Ok(webhook)
    }

    /// Starts `command` as a process of `cluster` and notes the addresses
    /// it bound, which later starts reuse.
    fn launch(
        cluster: &Cluster,
        options: WebhookOptions,
        mut command: ServeCommand,
    ) -> Result<Self, String> {
        let log = cluster.dir().join(format!("{}.log", options.name));
        let served = Served::start_with(&command, &log, |program, args| {
            cluster.spawn(&options.name, program, args, GRACE)
        })?;
        let bound = served.bound();
        (command.listen, command.admin_listen) = (bound.webhook, bound.admin);
        Ok(Self {
            options,
            command,
            bound,
            log,
            served: Some(served),
        })
    }

    /// Waits until `path` of its admin server answers 200.
    fn wait_for(&mut self, path: &str) -> Result<(), String> {
        let served = self.served.as_mut().ok_or("the webhook is not running")?;
        served
            .wait_for(path, READY_TIMEOUT)
            .map_err(|why| format!("webhook {}: {why}", self.options.name))
    }

    /// `/readyz` of its admin server: the status and the body.
    pub fn readyz(&self) -> Result<(u16, String), String> {
        http::get(self.bound.admin, "/readyz", None)
    }

    /// The base of the webhook configurations' `clientConfig.url`:
    /// `https://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("https://{}", self.bound.webhook)
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
        http::post_json(self.bound.webhook, path, body, Some(&tls))
    }

    /// Where its admin server (`/readyz`, `/metrics`) listens.
    pub fn admin_addr(&self) -> SocketAddr {
        self.bound.admin
    }

    /// GETs `path` from its admin server (`/metrics`, `/readyz`): the
    /// status and the body.
    pub fn admin_get(&self, path: &str) -> Result<(u16, String), String> {
        http::get(self.bound.admin, path, None)
    }

    /// The process id of the running webhook (`None` when stopped).
    pub fn pid(&self) -> Option<u32> {
        self.served.as_ref().map(Served::pid)
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
            match self.served.as_mut().map(Served::exited) {
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
        if let Some(mut served) = self.served.take() {
            served.stop();
        }
    }

    /// Starts it again after [`Webhook::stop`], on the same addresses with
    /// the same files, and waits until it is ready.
    pub fn resume(&mut self, cluster: &Cluster) -> Result<(), String> {
        self.stop();
        let name = &self.options.name;
        let served = Served::start_with(&self.command, &self.log, |program, args| {
            cluster.spawn(name, program, args, GRACE)
        })?;
        let bound = served.bound();
        self.served = Some(served);
        if bound != self.bound {
            return Err(format!(
                "webhook {name} bound {bound:?} instead of {:?}",
                self.bound
            ));
        }
        self.wait_for("/readyz")
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The command line of a `serve --manage-certs` replica.
fn managed(
    options: &WebhookOptions,
    listen: SocketAddr,
    cert_dir: &Path,
    namespace: &str,
    kubeconfig: &Path,
) -> ServeCommand {
    let more = [
        "--manage-certs",
        "--cert-secret-namespace",
        namespace,
        "--reload-interval",
        "1s",
    ];
    let (cert, key) = (cert_dir.join("tls.crt"), cert_dir.join("tls.key"));
    let mut command = serve_command(options, &cert, &key, kubeconfig, &more);
    command.listen = listen;
    command
}

/// `serve` with the certificate files `cert` and `key`, the options'
/// policy, `kubeconfig` and `--shutdown-delay 0s`, then `more` and the
/// options' extra arguments.
fn serve_command(
    options: &WebhookOptions,
    cert: &Path,
    key: &Path,
    kubeconfig: &Path,
    more: &[&str],
) -> ServeCommand {
    let text = |path: &Path| path.display().to_string();
    let (cert, key) = (text(cert), text(key));
    let (policy, kubeconfig) = (text(&options.policy), text(kubeconfig));
    let mut command = ServeCommand::new(&options.binary);
    command.args = [
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--policy",
        &policy,
        "--kubeconfig",
        &kubeconfig,
        "--shutdown-delay",
        "0s",
    ]
    .iter()
    .chain(more)
    .map(|s| (*s).to_owned())
    .collect();
    command.args.extend(options.extra_args.iter().cloned());
    command
}
