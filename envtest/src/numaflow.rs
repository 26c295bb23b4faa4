//! Numaflow's own controller (`numaflow controller`), run against the
//! test API server as Numaflow's install runs it: its service account
//! `numaflow-system:numaflow-sa` with a token the API server issued, its
//! ClusterRole `numaflow-role`, its `controller-config.yaml`, one instance,
//! leader election off.
//!
//! The controller reads its configuration from the fixed path
//! `/etc/numaflow/controller-config.yaml`. Nothing is written to the
//! machine's `/etc`: the controller runs in a private mount namespace
//! (`unshare --mount`) where `/etc` is an overlay whose upper layer lies in
//! the cluster's scratch directory. The same layer gives it a
//! `resolv.conf` that names only 127.0.0.1, so its look-ups of in-cluster
//! names (the pipelines' daemon Services) fail at once on this machine, as
//! they fail in a cluster whose daemon pods never start, and no query
//! leaves the machine.
//!
//! Its metrics (`:9090`) and health (`:8081`) ports are fixed in its code,
//! so one runs at a time on a machine.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::assets::{Missing, locate};
use crate::cluster::Cluster;
use crate::install::repo_root;
use crate::process::wait_until;
use crate::user::User;

/// Names the Numaflow binary (built from `github.com/numaproj/numaflow/cmd`).
pub const TEST_ASSET_NUMAFLOW: &str = "TEST_ASSET_NUMAFLOW";

/// Numaflow's namespace and its controller's service account, as its
/// install names them.
pub const NUMAFLOW_ACCOUNT: (&str, &str) = ("numaflow-system", "numaflow-sa");

/// The image name Numaflow writes into what it makes (never pulled here:
/// no pod runs).
const IMAGE: &str = "quay.io/numaproj/numaflow:v1.8.1";

/// Where the fixtures of Numaflow's install are (numaproj/numaflow v1.8.1).
const FIXTURES: &str = "tests/fixtures/numaflow-controller";

/// The ports the controller binds, fixed in its code (metrics, health).
const FIXED_PORTS: [u16; 2] = [9090, 8081];

/// Mounts the overlay on `/etc` and starts the controller. Arguments: the
/// upper layer, the overlay's work directory, the kubeconfig, the binary.
const LAUNCH: &str = r#"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc || exit 97
export KUBECONFIG="$3" NUMAFLOW_IMAGE="$5" NUMAFLOW_LEADER_ELECTION_DISABLED=true
exec "$4" controller
"#;

/// Finds the Numaflow binary: `TEST_ASSET_NUMAFLOW`, else `numaflow` in
/// `KUBEBUILDER_ASSETS`.
pub fn numaflow_binary() -> Result<PathBuf, Missing> {
    locate("numaflow", Some(TEST_ASSET_NUMAFLOW), true, false).map_err(|m| Missing(vec![m]))
}

impl Cluster {
    /// Installs what Numaflow's controller needs (its five CRDs as the
    /// minimal install ships them, its namespace, service account,
    /// ClusterRole and binding), then starts `binary` as
    /// `system:serviceaccount:numaflow-system:numaflow-sa` and waits until
    /// its Pipeline controller has started. It stops with the cluster, or
    /// at [`Cluster::stop_numaflow`].
    pub fn start_numaflow(&self, binary: &Path) -> Result<(), String> {
        self.start_numaflow_as(binary, NUMAFLOW_ACCOUNT.1)
    }

    /// [`Cluster::start_numaflow`] under another service account of
    /// Numaflow's namespace (with the same ClusterRole), as an install
    /// that renamed it runs. Its log is `numaflow-ACCOUNT.log`.
    pub fn start_numaflow_as(&self, binary: &Path, account: &str) -> Result<(), String> {
        for port in FIXED_PORTS {
            TcpListener::bind(("0.0.0.0", port)).map_err(|e| {
                format!("Numaflow's controller binds port {port}, which is taken ({e})")
            })?;
        }
        let fixtures = repo_root().join(FIXTURES);
        for kind in [
            "interstepbufferservices",
            "monovertices",
            "pipelines",
            "servingpipelines",
            "vertices",
        ] {
            let crd = fixtures.join(format!("numaflow.numaproj.io_{kind}.yaml"));
            if !self.exists(&["crd", &format!("{kind}.numaflow.numaproj.io")]) {
                self.install_crd(&crd)?;
            }
        }
        let namespace = NUMAFLOW_ACCOUNT.0;
        let admin = self.kubectl(User::Admin);
        if !self.exists(&["clusterrole", "numaflow-role"]) {
            let role = fixtures.join("numaflow-role.yaml").display().to_string();
            let out = admin.run(&["create", "-f", &role]);
            if !out.success {
                return Err(format!("cannot create Numaflow's ClusterRole: {out}"));
            }
        }
        let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": namespace}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": format!("numaflow-role-binding-{account}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "numaflow-role"},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]},
        ]});
        let out = admin.run_with_stdin(&["apply", "-f", "-"], Some(&objects.to_string()));
        if !out.success {
            return Err(format!("cannot create Numaflow's account: {out}"));
        }
        let kubeconfig = self.service_account_kubeconfig(namespace, account)?;

        let root = self.dir().join(format!("numaflow-{account}"));
        let (upper, work) = (root.join("etc"), root.join("overlay-work"));
        for dir in [upper.join("numaflow"), work.clone()] {
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let config = fixtures.join("controller-config.yaml");
        let target = upper.join("numaflow/controller-config.yaml");
        std::fs::copy(&config, &target).map_err(|e| format!("{}: {e}", config.display()))?;
        let resolv = upper.join("resolv.conf");
        std::fs::write(&resolv, "nameserver 127.0.0.1\n")
            .map_err(|e| format!("{}: {e}", resolv.display()))?;

        let mut args: Vec<String> = Vec::new();
        if !running_as_root() {
            // Without root, a user namespace whose root may mount.
            args.extend(["--user", "--map-root-user"].map(str::to_owned));
        }
        args.extend(["--mount", "--propagation", "private", "--", "sh", "-c"].map(str::to_owned));
        args.push(LAUNCH.to_owned());
        args.push("numaflow".to_owned());
        for path in [&upper, &work, &kubeconfig, &binary.to_path_buf()] {
            args.push(path.display().to_string());
        }
        args.push(IMAGE.to_owned());
        let name = format!("numaflow-{account}");
        let mut process = self.spawn(&name, Path::new("unshare"), &args, Duration::from_secs(5))?;
        let started = wait_until(&mut process, &name, Duration::from_secs(60), || {
            let text = self.numaflow_log(account);
            if text.contains("Starting workers") && text.contains("pipeline-controller") {
                Ok(())
            } else {
                Err("its Pipeline controller has not started".to_owned())
            }
        });
        self.keep(process);
        started
    }

    /// Stops every Numaflow controller this cluster started, and waits
    /// until they are gone (their ports are free again).
    pub fn stop_numaflow(&self) {
        self.stop_processes(|name| name.starts_with("numaflow-"));
    }

    /// The log so far of the controller running as `account` (empty
    /// before it starts).
    pub fn numaflow_log(&self, account: &str) -> String {
        std::fs::read_to_string(self.dir().join(format!("numaflow-{account}.log")))
            .unwrap_or_default()
    }

    /// A kubeconfig for service account `namespace:name`, whose token the
    /// API server issues (`kubectl create token`, valid a day).
    pub fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PathBuf, String> {
        let out = self.kubectl(User::Admin).run(&[
            "create",
            "token",
            name,
            "-n",
            namespace,
            "--duration=24h",
        ]);
        if !out.success {
            return Err(format!("no token for {namespace}:{name}: {out}"));
        }
        let user = format!("{namespace}-{name}");
        let text = self.kubeconfig_text(&self.server(), &user, out.stdout.trim());
        let path = self.dir().join("kubeconfig").join(format!("{user}.yaml"));
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }

    /// Whether `kubectl get WHAT` finds it (as admin).
    fn exists(&self, what: &[&str]) -> bool {
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        args.extend(["-o", "name"]);
        self.kubectl(User::Admin).run(&args).success
    }
}

/// Whether this process runs as root (its effective uid, from /proc).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Uid:"))?;
            line.split_whitespace().nth(2).map(|euid| euid == "0")
        })
        .unwrap_or(false)
}
