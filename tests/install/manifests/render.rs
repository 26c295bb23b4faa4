//! The renderings: a copy of `manifests/` in a temporary directory, every
//! overlay (and the test overlays) rendered once per test process with
//! `kubectl kustomize`, and what each must render to.

use crate::manifests::BIN;
use crate::manifests::binary::check_policy;
use crate::manifests::install::{Install, named, parse};
use crate::manifests::pod::{pod, policy_source};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{LazyLock, OnceLock};

/// What to do without kubectl: fail, saying so, rather than skip.
pub(crate) const NO_KUBECTL: &str = "kubectl is required for tests/install/manifests/ (it renders manifests/ with \
    `kubectl kustomize`) but is not on the PATH: install kubectl 1.24 or newer (apt-get install kubectl \
    from the Kubernetes apt repository, or the binary from the Kubernetes release; Debian's own \
    kubernetes-client 1.20 bundles a kustomize too old for these manifests)";

/// How the API server learns the CA of the serving certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CaSource {
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
pub(crate) struct Expect {
    pub(crate) ca: CaSource,
    pub(crate) failure_policy: &'static str,
}

/// Every overlay under manifests/overlays, and what it renders to. A new
/// overlay must be added here (the test `every_overlay_is_checked` says so).
pub(crate) const OVERLAYS: [(&str, Expect); 4] = [
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

/// A copy of `manifests/` in a temporary directory, so that generated
/// certificates never land in the work tree.
pub(crate) struct Workspace {
    pub(crate) dir: tempfile::TempDir,
}

impl Workspace {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
        copy_dir(&source, &dir.path().join("manifests"));
        Self { dir }
    }

    pub(crate) fn manifests(&self) -> PathBuf {
        self.dir.path().join("manifests")
    }

    pub(crate) fn certs_dir(&self) -> PathBuf {
        self.manifests().join("overlays/self-signed/certs")
    }

    /// Runs `gen-certs` into the copy of the self-signed overlay.
    pub(crate) fn gen_certs(&self) {
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
    pub(crate) fn render(&self, dir: &str) -> Vec<Value> {
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

/// The certificates `gen-certs` wrote for the self-signed overlay.
pub(crate) struct Certs {
    pub(crate) ca: Vec<u8>,
    pub(crate) cert: Vec<u8>,
    pub(crate) key: Vec<u8>,
}

/// One install as `kubectl kustomize` renders it, parsed, with what it
/// must render to.
pub(crate) struct Rendering {
    /// The directory below `manifests/` (`base`, `overlays/fail-open`, ...).
    pub(crate) dir: String,
    pub(crate) expect: Expect,
    pub(crate) install: Install,
    /// What `gen-certs` wrote before rendering (`CaSource::GenCerts` only).
    pub(crate) certs: Option<Certs>,
    /// What `check-policy` prints for the policy ConfigMap's policy; run
    /// by the first test that needs it.
    pub(crate) effective_policy: OnceLock<String>,
}

/// An overlay of the base with the no-stale-force-sweeper component,
/// written into the workspace (`the_no_stale_force_sweeper_component_...`).
pub(crate) const NO_SWEEPER: &str = "overlays/no-sweeper-test";

/// An overlay of the base with the opt-in components
/// force-reapply-bindings and rollouts-in-skipped-namespaces, written into
/// the workspace.
pub(crate) const WITH_OPT_INS: &str = "overlays/opt-ins-test";

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
pub(crate) static RENDERINGS: LazyLock<Result<Vec<Rendering>, String>> = LazyLock::new(|| {
    std::panic::catch_unwind(render_all).map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "rendering the manifests panicked".to_owned())
    })
});

pub(crate) fn renderings() -> &'static [Rendering] {
    match &*RENDERINGS {
        Ok(renderings) => renderings,
        Err(why) => panic!("{why}"),
    }
}

/// The rendering of `dir` (below `manifests/`).
pub(crate) fn rendering(dir: &str) -> &'static Rendering {
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
pub(crate) fn on_every_rendering(check: fn(&Rendering)) {
    for rendering in renderings() {
        eprintln!("checking manifests/{}", rendering.dir);
        check(rendering);
    }
}

impl Rendering {
    /// What `check-policy` prints for the policy in the policy ConfigMap.
    pub(crate) fn effective_policy(&self) -> &str {
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
