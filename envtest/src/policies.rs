//! Waiting for kube-apiserver to finish compiling its admission policies.
//!
//! kube-apiserver releases without the upstream fix of
//! <https://github.com/kubernetes/kubernetes/issues/135757> (the v1.32 the
//! tests run is one) share one map of variable types between every
//! ValidatingAdmissionPolicy they compile and every evaluation of a policy
//! that has variables: a compile that runs while a request is judged can
//! crash the process (`fatal error: concurrent map read and map write` in
//! `DeclTypeProvider.FindStructFieldType`), and every client then sees
//! `Connection refused`. Its policy source recompiles, on a one-second
//! tick, after any change to a policy or a binding (the status controller's
//! type-checking writes included), so a test that installs policies and
//! then writes objects under them must first wait until the ticks stop.

use std::time::{Duration, Instant};

use crate::cluster::Cluster;

/// What kube-apiserver logs on each recompile of its policies.
const REFRESH: &str = "refreshing policies";

impl Cluster {
    /// How many times kube-apiserver has recompiled its admission
    /// policies so far (its log's `refreshing policies` lines).
    pub fn policy_refreshes(&self) -> Result<usize, String> {
        let log = self.dir().join("kube-apiserver.log");
        let text = std::fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        Ok(text.matches(REFRESH).count())
    }

    /// Waits until kube-apiserver has not recompiled its admission
    /// policies for `quiet` (more than its one-second tick, plus the time
    /// a compile takes), for at most `limit`: the time it waited, or why
    /// it stopped waiting. Whoever changes policies or bindings (or lets a
    /// controller write their status) calls it before judging requests.
    pub fn wait_for_policies_compiled(
        &self,
        quiet: Duration,
        limit: Duration,
    ) -> Result<Duration, String> {
        let started = Instant::now();
        let mut seen = self.policy_refreshes()?;
        let mut since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let now = self.policy_refreshes()?;
            if now != seen {
                seen = now;
                since = Instant::now();
            } else if since.elapsed() >= quiet {
                return Ok(started.elapsed());
            }
            if started.elapsed() > limit {
                return Err(format!(
                    "kube-apiserver still recompiles its admission policies after {}s ({seen} recompiles so far)",
                    limit.as_secs()
                ));
            }
        }
    }
}
