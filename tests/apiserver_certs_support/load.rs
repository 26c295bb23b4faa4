//! Load and watchers for the long certificate tests: a write loop that
//! times each write, a `/readyz` poller for every replica and the
//! caBundles as DER certificates.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use envtest::{Cluster, User};
use pipelinerollout_webhook::background::certs::trust::pem_certificates;

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
    pem_certificates(pem.as_bytes())
        .into_iter()
        .map(|der| der.as_ref().to_vec())
        .collect()
}
