//! Finding the binaries, the way controller-runtime's envtest does, and
//! deciding what a test does when they are missing.

use std::fmt;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// Names a directory holding `etcd`, `kube-apiserver` and, optionally,
/// `kube-controller-manager` (what `setup-envtest use -p path` prints).
pub const KUBEBUILDER_ASSETS: &str = "KUBEBUILDER_ASSETS";
/// Names the etcd binary.
pub const TEST_ASSET_ETCD: &str = "TEST_ASSET_ETCD";
/// Names the kube-apiserver binary.
pub const TEST_ASSET_KUBE_APISERVER: &str = "TEST_ASSET_KUBE_APISERVER";
/// Names the kube-controller-manager binary.
pub const TEST_ASSET_KUBE_CONTROLLER_MANAGER: &str = "TEST_ASSET_KUBE_CONTROLLER_MANAGER";
/// Names the kubectl binary.
pub const TEST_ASSET_KUBECTL: &str = "TEST_ASSET_KUBECTL";

/// Where to read how to get the binaries.
const HOW_TO: &str = "`bash .ci/run` provides them; to run the end-to-end tests yourself see \
    docs/end-to-end-tests.md";

/// The binaries an end-to-end test needs.
#[derive(Debug, Clone)]
pub struct Assets {
    /// etcd.
    pub etcd: PathBuf,
    /// kube-apiserver.
    pub kube_apiserver: PathBuf,
    /// kubectl: the tests drive the API server with it.
    pub kubectl: PathBuf,
}

/// What is missing, one entry per binary, each saying where it was looked for.
#[derive(Debug, Clone)]
pub struct Missing(pub Vec<String>);

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {HOW_TO}", self.0.join("; "))
    }
}

impl Assets {
    /// Finds etcd, kube-apiserver and kubectl.
    ///
    /// A binary is the file its `TEST_ASSET_*` variable names; otherwise
    /// the one of that name in the directory `KUBEBUILDER_ASSETS` names;
    /// otherwise (etcd and kubectl only) the first on the PATH.
    /// (setup-envtest's directories hold all three.)
    pub fn find() -> Result<Self, Missing> {
        let etcd = locate("etcd", Some(TEST_ASSET_ETCD), true, true);
        let kube_apiserver = locate(
            "kube-apiserver",
            Some(TEST_ASSET_KUBE_APISERVER),
            true,
            false,
        );
        let kubectl = locate("kubectl", Some(TEST_ASSET_KUBECTL), true, true);
        match (etcd, kube_apiserver, kubectl) {
            (Ok(etcd), Ok(kube_apiserver), Ok(kubectl)) => Ok(Self {
                etcd,
                kube_apiserver,
                kubectl,
            }),
            (etcd, apiserver, kubectl) => Err(Missing(
                [etcd.err(), apiserver.err(), kubectl.err()]
                    .into_iter()
                    .flatten()
                    .collect(),
            )),
        }
    }

    /// Finds kube-controller-manager: `TEST_ASSET_KUBE_CONTROLLER_MANAGER`,
    /// else in `KUBEBUILDER_ASSETS` (setup-envtest's downloads do not hold
    /// one). Only tests that need a controller ask for it.
    pub fn kube_controller_manager() -> Result<PathBuf, Missing> {
        locate(
            "kube-controller-manager",
            Some(TEST_ASSET_KUBE_CONTROLLER_MANAGER),
            true,
            false,
        )
        .map_err(|m| Missing(vec![m]))
    }
}

/// Whether this run is CI (`CI=true`, as CI services set it): there, a
/// missing binary fails the test instead of skipping it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// What a test does when `found` is missing: in CI, fail with what is
/// missing; elsewhere, print one line saying the test was skipped and why
/// (past cargo's output capture, so it is always seen) and return `None`.
pub fn require<T>(test: &str, found: Result<T, Missing>) -> Option<T> {
    match found {
        Ok(found) => Some(found),
        Err(missing) if in_ci() => {
            panic!("end-to-end test {test} cannot run in CI (CI=true): {missing}")
        }
        Err(missing) => {
            // Not `eprintln!`: libtest captures that and shows it only on failure.
            let line = format!("SKIPPED end-to-end test {test}: {missing}\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
    }
}

/// Looks a binary up in its variable, then `KUBEBUILDER_ASSETS`, then the PATH.
pub(crate) fn locate(
    name: &str,
    variable: Option<&str>,
    in_assets_dir: bool,
    on_path: bool,
) -> Result<PathBuf, String> {
    if let Some(variable) = variable
        && let Some(value) = non_empty_var(variable)
    {
        let path = PathBuf::from(&value);
        return executable(&path)
            .map(|()| path)
            .map_err(|why| format!("{name}: {variable}={value} names no usable binary ({why})"));
    }
    let mut looked = Vec::new();
    if let Some(variable) = variable {
        looked.push(format!("{variable} is not set"));
    }
    if in_assets_dir {
        match non_empty_var(KUBEBUILDER_ASSETS) {
            Some(dir) => {
                let path = Path::new(&dir).join(name);
                match executable(&path) {
                    Ok(()) => return Ok(path),
                    Err(why) => looked.push(format!("{KUBEBUILDER_ASSETS}={dir}: {why}")),
                }
            }
            None => looked.push(format!("{KUBEBUILDER_ASSETS} is not set")),
        }
    }
    if on_path {
        if let Some(path) = on_the_path(name) {
            return Ok(path);
        }
        looked.push("not on the PATH".to_owned());
    }
    Err(format!("{name} not found ({})", looked.join(", ")))
}

fn non_empty_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn executable(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", path.display()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("{} is not executable", path.display()));
    }
    Ok(())
}

fn on_the_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| executable(candidate).is_ok())
}
