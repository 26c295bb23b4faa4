//! etcd and kube-apiserver on loopback, with static-token users and RBAC;
//! kube-controller-manager on request.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::http::{self, Tls};
use crate::kubectl::Kubectl;
use crate::pki::{self, Pki};
use crate::process::{Janitor, Process, wait_until};
use crate::user::User;
use crate::{Assets, Missing};

/// A running etcd and kube-apiserver, stopped (and their scratch directory
/// removed) when dropped or when the test process ends.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    pki: Pki,
    api: SocketAddr,
    tokens: BTreeMap<User, String>,
    kubectl: PathBuf,
    /// Servers, stopped in reverse order.
    processes: Mutex<Vec<Process>>,
    /// The kube-apiserver's binary and arguments, to start it again.
    apiserver: Mutex<Option<(PathBuf, Vec<String>)>>,
    janitor: Mutex<Option<Janitor>>,
}

/// Set to keep each cluster's scratch directory after the tests.
pub const KEEP: &str = "ENVTEST_KEEP";

/// Attempts when a freshly picked port turns out to be taken.
const PORT_ATTEMPTS: usize = 3;

impl Cluster {
    /// Starts etcd and kube-apiserver (`--authorization-mode=RBAC`) on free
    /// loopback ports with a fresh scratch directory and CA, and waits until
    /// the API server is ready.
    pub fn start(assets: &Assets) -> Result<Self, String> {
        let base = scratch_base();
        let dir = tempfile::Builder::new()
            .prefix("envtest-")
            .tempdir_in(&base)
            .map_err(|e| format!("cannot make a scratch directory in {}: {e}", base.display()))?
            .keep();
        // ENVTEST_KEEP=1 keeps the directory (logs, kubeconfigs) to look at.
        let janitor = if std::env::var_os(KEEP).is_some_and(|v| !v.is_empty()) {
            let line = format!("envtest: {KEEP} is set, keeping {}\n", dir.display());
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        } else {
            Some(Janitor::start(&dir)?)
        };
        let mut tokens = BTreeMap::new();
        for user in User::ALL {
            tokens.insert(user, pki::token()?);
        }
        let mut cluster = Self {
            dir,
            pki: Pki::new()?,
            api: SocketAddr::from(([127, 0, 0, 1], 0)),
            tokens,
            kubectl: assets.kubectl.clone(),
            processes: Mutex::new(Vec::new()),
            apiserver: Mutex::new(None),
            janitor: Mutex::new(janitor),
        };
        cluster.write_files()?;
        let mut attempt = 1;
        loop {
            match cluster.start_servers(assets) {
                Ok(()) => return Ok(cluster),
                // A port picked a moment ago was taken since: pick others.
                Err(why) if attempt < PORT_ATTEMPTS && port_taken(&why) => {
                    cluster.stop_all();
                    attempt += 1;
                }
                Err(why) => return Err(why),
            }
        }
    }

    /// The API server's URL.
    pub fn server(&self) -> String {
        format!("https://{}", self.api)
    }

    /// The cluster's CA (it signs the API server's and the webhook's
    /// serving certificates).
    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// A scratch directory, removed with the cluster.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A kubeconfig for `user` (token authentication).
    pub fn kubeconfig(&self, user: User) -> PathBuf {
        self.dir
            .join("kubeconfig")
            .join(format!("{}.yaml", user.file_name()))
    }

    /// A kubeconfig for `user` that reaches the API server at `server`
    /// (such as a [`Proxy`](crate::Proxy)'s address) instead of its own
    /// port, written to the scratch directory as `NAME.yaml`. The API
    /// server's certificate is for 127.0.0.1, so any loopback port works.
    pub fn kubeconfig_via(
        &self,
        user: User,
        server: SocketAddr,
        name: &str,
    ) -> Result<PathBuf, String> {
        let text = self.kubeconfig_text(
            &format!("https://{server}"),
            &user.file_name(),
            &self.tokens[&user],
        );
        let path = self.dir.join("kubeconfig").join(format!("{name}.yaml"));
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }

    /// A kubeconfig reaching `server` (trusting the cluster's CA) as
    /// `user_name` with bearer `token`, as JSON text.
    pub(crate) fn kubeconfig_text(&self, server: &str, user_name: &str, token: &str) -> String {
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "envtest", "cluster": {
                "server": server,
                "certificate-authority": self.dir.join("pki/ca.crt"),
            }}],
            "users": [{"name": user_name, "user": {"token": token}}],
            "contexts": [{"name": "envtest",
                "context": {"cluster": "envtest", "user": user_name}}],
            "current-context": "envtest",
        })
        .to_string()
    }

    /// The API server's address on loopback.
    pub fn api_addr(&self) -> SocketAddr {
        self.api
    }

    /// kubectl acting as `user`.
    pub fn kubectl(&self, user: User) -> Kubectl {
        Kubectl {
            binary: self.kubectl.clone(),
            kubeconfig: self.kubeconfig(user),
            cache_dir: self.dir.join("kubectl-cache").join(user.file_name()),
            user,
        }
    }

    /// The kubectl binary (for `kubectl kustomize` and other commands that
    /// need no user).
    pub fn kubectl_binary(&self) -> &Path {
        &self.kubectl
    }

    /// Waits (up to 10 s) until RBAC answers `allowed` to "may `user`
    /// `verb` `resource` in `namespace`" (`kubectl auth can-i`, as admin
    /// impersonating the user and its groups). RBAC sees new bindings
    /// through an informer, a moment after they are written.
    pub fn wait_for_access(
        &self,
        user: User,
        verb: &str,
        resource: &str,
        namespace: &str,
        allowed: bool,
    ) -> Result<(), String> {
        let mut args = vec![
            "auth",
            "can-i",
            verb,
            resource,
            "-n",
            namespace,
            "--as",
            user.name(),
        ];
        for group in user.groups() {
            args.extend(["--as-group", group]);
        }
        let admin = self.kubectl(User::Admin);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let out = admin.run(&args);
            let answer = out.stdout.trim();
            if answer == if allowed { "yes" } else { "no" } {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!("RBAC still answers {answer:?} after 10 s: {out}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// GETs `path` from the API server as admin: the body, or why not
    /// (including a status other than 200).
    pub fn get_as_admin(&self, path: &str) -> Result<String, String> {
        let tls = Tls::new(self.pki.ca_pem(), Some(&self.tokens[&User::Admin]))?;
        match http::get(self.api, path, Some(&tls))? {
            (200, body) => Ok(body),
            (status, body) => Err(format!("GET {path}: HTTP {status}: {body}")),
        }
    }

    /// The pids of the servers it runs (etcd, kube-apiserver, and
    /// kube-controller-manager when started), not those of webhooks.
    pub fn server_pids(&self) -> Vec<u32> {
        let processes = self.processes.lock().expect("lock");
        processes.iter().map(Process::pid).collect()
    }

    /// Starts a process that lives no longer than the cluster (and never
    /// outlives the test process); its output goes to `NAME.log` in the
    /// scratch directory.
    pub(crate) fn spawn(
        &self,
        name: &str,
        program: &Path,
        args: &[String],
        grace: Duration,
    ) -> Result<Process, String> {
        let log = self.dir.join(format!("{name}.log"));
        let process = Process::spawn(name, program, args, &log, grace)?;
        if let Some(janitor) = self.janitor.lock().expect("janitor lock").as_mut() {
            janitor.watch(&process);
        }
        Ok(process)
    }

    /// Starts kube-controller-manager with only `controllers` (a
    /// `--controllers` value, such as
    /// `validatingadmissionpolicy-status-controller`), no leader election
    /// and no serving port, and waits until it logs that each named
    /// controller started. The caller waits for the effect it needs.
    pub fn start_controller_manager(&self, controllers: &str) -> Result<(), String> {
        self.start_controller_manager_with(controllers, &[])
    }

    /// [`Cluster::start_controller_manager`] with each controller writing
    /// as its own service account (`--use-service-account-credentials`),
    /// as a real control plane runs them: the garbage collector is then
    /// `system:serviceaccount:kube-system:generic-garbage-collector`.
    pub fn start_controllers_as_service_accounts(&self, controllers: &str) -> Result<(), String> {
        self.start_controller_manager_with(controllers, &["--use-service-account-credentials"])
    }

    fn start_controller_manager_with(
        &self,
        controllers: &str,
        extra: &[&str],
    ) -> Result<(), String> {
        let binary = Assets::kube_controller_manager().map_err(|m: Missing| m.to_string())?;
        let mut args = vec![
            format!("--kubeconfig={}", self.kubeconfig(User::Admin).display()),
            format!("--controllers={controllers}"),
            "--leader-elect=false".to_owned(),
            "--secure-port=0".to_owned(),
            // 1.37 says a controller started only at -v=1.
            "--v=1".to_owned(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let mut process = self.spawn("kube-controller-manager", &binary, &args, Duration::ZERO)?;
        let log = self.dir.join("kube-controller-manager.log");
        let named: Vec<&str> = controllers
            .split(',')
            .filter(|c| !c.starts_with('-') && *c != "*")
            .collect();
        let result = wait_until(
            &mut process,
            "kube-controller-manager",
            Duration::from_secs(30),
            || {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                // 1.32 logs "Started controller", 1.37 "Controller starting...".
                let started = |c: &&str| {
                    ["\"Started controller\"", "\"Controller starting...\""]
                        .iter()
                        .any(|said| text.contains(&format!("{said} controller=\"{c}\"")))
                };
                match named.iter().find(|c| !started(c)) {
                    None => Ok(()),
                    Some(c) => Err(format!("controller {c} not started yet")),
                }
            },
        );
        self.processes.lock().expect("lock").push(process);
        result
    }

    /// Keeps `process` running until the cluster stops (it stops first).
    pub(crate) fn keep(&self, process: Process) {
        self.processes.lock().expect("lock").push(process);
    }

    /// Stops the kept processes whose name `matches`, and waits for each.
    pub(crate) fn stop_processes(&self, matches: impl Fn(&str) -> bool) {
        let stopped: Vec<Process> = self
            .processes
            .lock()
            .expect("lock")
            .extract_if(.., |process| matches(process.name()))
            .collect();
        for mut process in stopped {
            process.stop();
        }
    }

    fn write_files(&self) -> Result<(), String> {
        let write = |name: &str, text: &str| {
            let path = self.dir.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
        };
        let serving = self
            .pki
            .serving("kube-apiserver", &["127.0.0.1", "localhost"])?;
        write("pki/ca.crt", self.pki.ca_pem())?;
        write("pki/apiserver.crt", &serving.cert_pem)?;
        write("pki/apiserver.key", &serving.key_pem)?;
        let (private, public) = pki::signing_key()?;
        write("pki/sa.key", &private)?;
        write("pki/sa.pub", &public)?;
        let mut csv = String::new();
        for (user, token) in &self.tokens {
            csv.push_str(&format!(
                "{token},{},{}-uid,\"{}\"\n",
                user.name(),
                user.file_name(),
                user.groups().join(",")
            ));
        }
        write("pki/tokens.csv", &csv)
    }

    fn write_kubeconfigs(&self) -> Result<(), String> {
        let dir = self.dir.join("kubeconfig");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (user, token) in &self.tokens {
            let text = self.kubeconfig_text(&self.server(), &user.file_name(), token);
            let path = self.kubeconfig(*user);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(())
    }

    fn start_servers(&mut self, assets: &Assets) -> Result<(), String> {
        let (client, peer, secure) = (free_port()?, free_port()?, free_port()?);
        self.api = SocketAddr::from(([127, 0, 0, 1], secure));
        self.write_kubeconfigs()?;
        let data = self.dir.join(format!("etcd-{client}"));
        let url = |port: u16| format!("http://127.0.0.1:{port}");
        let etcd_args = vec![
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls={}", url(client)),
            format!("--advertise-client-urls={}", url(client)),
            format!("--listen-peer-urls={}", url(peer)),
            format!("--initial-advertise-peer-urls={}", url(peer)),
            format!("--initial-cluster=default={}", url(peer)),
            "--logger=zap".to_owned(),
        ];
        let mut etcd = self.spawn("etcd", &assets.etcd, &etcd_args, Duration::ZERO)?;
        let etcd_addr = SocketAddr::from(([127, 0, 0, 1], client));
        let ready = wait_until(
            &mut etcd,
            "etcd",
            Duration::from_secs(30),
            || match http::get(etcd_addr, "/health", None)? {
                (200, body) if body.contains("true") => Ok(()),
                (status, body) => Err(format!("/health: {status} {body}")),
            },
        );
        self.processes.lock().expect("lock").push(etcd);
        ready?;

        let pki = self.dir.join("pki");
        let file = |name: &str| pki.join(name).display().to_string();
        let apiserver_args = vec![
            format!("--etcd-servers={}", url(client)),
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            format!("--secure-port={secure}"),
            format!("--tls-cert-file={}", file("apiserver.crt")),
            format!("--tls-private-key-file={}", file("apiserver.key")),
            format!("--service-account-key-file={}", file("sa.pub")),
            format!("--service-account-signing-key-file={}", file("sa.key")),
            format!("--service-account-issuer={}", self.server()),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            format!("--token-auth-file={}", file("tokens.csv")),
            "--authorization-mode=RBAC".to_owned(),
            // No nodes: without this the API server keeps warning that it
            // cannot reconcile its own endpoints.
            "--endpoint-reconciler-type=none".to_owned(),
        ];
        *self.apiserver.lock().expect("lock") =
            Some((assets.kube_apiserver.clone(), apiserver_args));
        self.start_apiserver()
    }

    /// Starts kube-apiserver with the arguments it was first started with
    /// and waits until it is ready.
    fn start_apiserver(&self) -> Result<(), String> {
        let (binary, args) = self
            .apiserver
            .lock()
            .expect("lock")
            .clone()
            .ok_or("kube-apiserver was never started")?;
        let mut apiserver = self.spawn("kube-apiserver", &binary, &args, Duration::ZERO)?;
        let tls = Tls::new(self.pki.ca_pem(), Some(&self.tokens[&User::Admin]))?;
        let api = self.api;
        let ready = wait_until(
            &mut apiserver,
            "kube-apiserver",
            Duration::from_secs(90),
            || match http::get(api, "/readyz", Some(&tls))? {
                (200, _) => Ok(()),
                (status, body) => Err(format!("/readyz: {status} {}", body.trim())),
            },
        );
        self.processes.lock().expect("lock").push(apiserver);
        ready
    }

    /// Stops kube-apiserver (SIGKILL, as a crash would), leaving etcd and
    /// everything stored; [`Cluster::restart_apiserver`] starts it again.
    pub fn stop_apiserver(&self) {
        let stopped = {
            let mut processes = self.processes.lock().expect("lock");
            processes
                .iter()
                .position(|p| p.name() == "kube-apiserver")
                .map(|i| processes.remove(i))
        };
        if let Some(mut process) = stopped {
            process.stop();
        }
    }

    /// Starts kube-apiserver again after [`Cluster::stop_apiserver`], on
    /// the same port with the same flags, and waits until it is ready.
    pub fn restart_apiserver(&self) -> Result<(), String> {
        self.stop_apiserver();
        self.start_apiserver()
    }

    fn stop_all(&self) {
        let mut processes = self.processes.lock().expect("lock");
        while let Some(mut process) = processes.pop() {
            process.stop();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_all();
        // The janitor (dropped next) then removes the scratch directory.
    }
}

/// Whether a start-up error says a port was taken.
fn port_taken(why: &str) -> bool {
    why.to_lowercase().contains("address already in use")
}

/// A port on 127.0.0.1 that was free a moment ago, for servers that cannot
/// report a port they bound themselves (etcd, kube-apiserver) and for
/// addresses a configuration must name before its server starts.
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))
}

/// Where scratch directories go: /dev/shm when it is usable (etcd syncs
/// every write to disk; on tmpfs that costs nothing), else the temp dir.
fn scratch_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let writable = tempfile::tempdir_in(shm).is_ok();
    if writable {
        shm.to_owned()
    } else {
        std::env::temp_dir()
    }
}
