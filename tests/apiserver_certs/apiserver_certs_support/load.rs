//! Load and watchers for the long certificate tests: a write loop that
//! times each write, a `/readyz` poller for every replica and the
//! caBundles as DER certificates.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use envtest::{Cluster, User};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;

use super::{Replica, TEAM, ca_bundles};
use crate::apiserver_support::rollout;

/// What a write loop did.
#[derive(Debug, Default)]
pub struct Writes {
    /// How many writes it made.
    pub count: usize,
    /// Each failed write: when (since the loop started), its number and
    /// kubectl's output.
    pub failures: Vec<String>,
    /// The longest a write took.
    pub slowest: Duration,
}

/// Writes PipelineRollouts one after another until `stop`: how many, and
/// the failures.
pub fn write_in_a_loop(cluster: &Cluster, stop: &AtomicBool, prefix: &str) -> (usize, Vec<String>) {
    let writes = timed_writes(cluster, stop, prefix);
    (writes.count, writes.failures)
}

/// Writes PipelineRollouts one after another (kubectl as admin) until
/// `stop`, timing each.
pub fn timed_writes(cluster: &Cluster, stop: &AtomicBool, prefix: &str) -> Writes {
    let admin = cluster.kubectl(User::Admin);
    let start = Instant::now();
    let mut writes = Writes::default();
    while !stop.load(Ordering::SeqCst) {
        writes.count += 1;
        let count = writes.count;
        let began = Instant::now();
        let out = admin.create(&rollout(TEAM, &format!("{prefix}-{count}"), None), &[]);
        writes.slowest = writes.slowest.max(began.elapsed());
        if !out.success {
            let at = began.duration_since(start);
            writes
                .failures
                .push(format!("write {count} at {at:?}: {out}"));
        }
    }
    writes
}

/// One `/readyz` answer other than 200.
#[derive(Debug, Clone)]
pub struct NotReady {
    /// When, since the poller started.
    pub at: Duration,
    /// The replica's index.
    pub replica: usize,
    /// The status (`None`: no answer).
    pub status: Option<u16>,
    /// The body, or why there was no answer.
    pub body: String,
}

/// Polls every replica's `/readyz` every `every` until `stop`: how many
/// answers it asked for, and every one that was not 200.
pub fn poll_readyz(
    replicas: &[Replica],
    stop: &AtomicBool,
    every: Duration,
) -> (usize, Vec<NotReady>) {
    let start = Instant::now();
    let (mut samples, mut not_ready) = (0, Vec::new());
    while !stop.load(Ordering::SeqCst) {
        for (replica, r) in replicas.iter().enumerate() {
            samples += 1;
            let (status, body) = match r.webhook.readyz() {
                Ok((200, _)) => continue,
                Ok((status, body)) => (Some(status), body),
                Err(why) => (None, why),
            };
            not_ready.push(NotReady {
                at: start.elapsed(),
                replica,
                status,
                body,
            });
        }
        std::thread::sleep(every);
    }
    (samples, not_ready)
}

/// The certificates (DER) of each caBundle of the webhooks that call the
/// webhook's Service.
pub fn bundle_ders(cluster: &Cluster) -> Vec<Vec<Vec<u8>>> {
    ca_bundles(cluster)
        .iter()
        .map(|bundle| ders(bundle))
        .collect()
}

/// The certificates (DER) of a PEM text.
pub fn ders(pem: &str) -> Vec<Vec<u8>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .map(|der| der.as_ref().to_vec())
        .collect()
}

/// What `openssl verify` said about the serving certificate while the
/// caBundle held two CAs (a CA rotation in progress).
#[derive(Debug, Default)]
pub struct OpensslChecks {
    /// Checks made while the caBundle held two CAs.
    pub two_cas: usize,
    /// Of those, the ones where the serving certificate's CA was not the
    /// first of the bundle: what a verifier that takes the first CA with
    /// a matching subject gets wrong.
    pub not_first: usize,
    /// Every check that failed: the certificates and openssl's output.
    pub failures: Vec<String>,
    /// openssl is not installed (and CI is not true): nothing was checked.
    pub skipped: bool,
}

/// Runs `openssl verify -CAfile BUNDLE` on the serving certificate the
/// certificate manager wrote into its Secret, against the caBundle of the
/// webhook configurations, whenever that holds two CAs, until `stop`.
/// The Secret is read before the caBundle: a serving certificate's CA is
/// in the caBundle from before it is written until a propagation period
/// after it is replaced.
pub fn openssl_during_rotations(
    cluster: &Cluster,
    stop: &AtomicBool,
    dir: &std::path::Path,
) -> OpensslChecks {
    let mut checks = OpensslChecks::default();
    if std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_err()
    {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "openssl is not installed, and CI=true"
        );
        eprintln!("SKIPPED the OpenSSL checks: openssl is not installed");
        checks.skipped = true;
        return checks;
    }
    let (leaf, bundle, first) = (
        dir.join("leaf.pem"),
        dir.join("bundle.pem"),
        dir.join("first.pem"),
    );
    let verify = |ca_file: &std::path::Path| {
        std::process::Command::new("openssl")
            .arg("verify")
            .arg("-CAfile")
            .arg(ca_file)
            .arg(&leaf)
            .output()
            .map(|out| {
                (
                    out.status.success(),
                    format!(
                        "{}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    ),
                )
            })
            .unwrap_or_else(|e| (false, format!("cannot run openssl: {e}")))
    };
    while !stop.load(Ordering::SeqCst) {
        let served = super::secret_data(cluster)
            .get("tls.crt")
            .cloned()
            .unwrap_or_default();
        let Some(cas) = ca_bundles(cluster).into_iter().next() else {
            continue;
        };
        let blocks = super::pem_blocks(&cas);
        if blocks.len() == 2 && !served.is_empty() {
            let written = std::fs::write(&leaf, &served)
                .and_then(|()| std::fs::write(&bundle, &cas))
                .and_then(|()| std::fs::write(&first, &blocks[0]));
            if let Err(e) = written {
                checks.failures.push(format!("cannot write the files: {e}"));
                break;
            }
            checks.two_cas += 1;
            if !verify(&first).0 {
                checks.not_first += 1;
            }
            let (ok, said) = verify(&bundle);
            if !ok {
                checks.failures.push(format!(
                    "openssl verify -CAfile bundle: {said}\nbundle:\n{cas}\nserved:\n{served}"
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    checks
}
