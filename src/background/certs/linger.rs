//! The CAs the replicas may still serve from after the Secrets lost them.
//! Pure: no I/O.
//!
//! The plan keeps in the caBundle every CA the Secrets name; when both
//! Secrets are deleted at once (or the CA Secret is replaced while the
//! serving Secret is gone), the CAs the replicas' mounted certificates are
//! from are in neither, and the replicas serve those certificates until
//! the kubelet delivers the new one. The controller remembers the CAs it
//! last handed the replicas ([`Lingering`]); one the plan drops when it
//! issues a replacement CA stays in the caBundle until a propagation
//! delay and a margin after a serving certificate not from it was
//! written, and never past its own end. Memory is all there is: a
//! restarted controller remembers nothing.

use std::time::Duration;

use time::OffsetDateTime;

use super::material::{self, Material};
use super::plan::{Change, Plan};
use super::schedule;

/// At most this many CAs linger (a Secret deleted again and again
/// cannot grow the caBundle).
pub const MAX_LINGERING: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    pem: String,
    not_after: OffsetDateTime,
    /// When a serving certificate not from it was written.
    left_at: Option<OffsetDateTime>,
}

/// The controller's memory of the CAs the replicas may serve from.
#[derive(Debug, Clone, Default)]
pub struct Lingering {
    /// The CAs of the last serving certificates written: the serving
    /// Secret's CA and the one being retired.
    served_from: Vec<String>,
    entries: Vec<Entry>,
}

/// Whether the plan issues a CA in place of the stored one (to the plan,
/// two deleted Secrets look like a new install; the memory tells them
/// apart).
fn replaces_ca(plan: &Plan) -> bool {
    plan.changes
        .iter()
        .any(|c| matches!(c, Change::CaIssued(_)))
}

impl Lingering {
    /// Before `plan`'s writes at `now`: lets go of the lingering CAs
    /// whose time is up, and keeps the CAs the replicas may serve from
    /// that the plan drops because it replaces the CA. Returns how many
    /// left and how many were kept.
    pub fn update(
        &mut self,
        plan: &Plan,
        now: OffsetDateTime,
        propagation: Duration,
    ) -> (usize, usize) {
        let before = self.entries.len();
        self.entries.retain(|e| now < leaves(e, propagation));
        let left = before - self.entries.len();
        if !replaces_ca(plan) {
            return (left, 0);
        }
        let planned = plan.material.bundle_cas();
        let mut kept = 0;
        for pem in &self.served_from {
            if planned.contains(&pem.as_str()) || self.entries.iter().any(|e| e.pem == *pem) {
                continue;
            }
            // What it remembers was checked when the plan made it.
            let not_after = material::check_ca_cert(pem).map_or(now, |v| v.not_after);
            if now >= not_after {
                continue;
            }
            self.entries.push(Entry {
                pem: pem.clone(),
                not_after,
                left_at: None,
            });
            kept += 1;
        }
        let excess = self.entries.len().saturating_sub(MAX_LINGERING);
        self.entries.drain(..excess);
        (left, kept)
    }

    /// The caBundle: the lingering CAs, then the plan's.
    pub fn bundle(&self, planned: &Material) -> String {
        let planned = planned.bundle_cas();
        material::bundle(
            self.entries
                .iter()
                .map(|e| e.pem.as_str())
                .filter(|pem| !planned.contains(pem))
                .chain(planned.iter().copied()),
        )
    }

    /// After `material`'s writes at `now`: remembers what the replicas
    /// are handed and starts the clock of each lingering CA the serving
    /// certificate is not from. Returns when the next one leaves.
    pub fn written(
        &mut self,
        material: &Material,
        now: OffsetDateTime,
        propagation: Duration,
    ) -> Option<OffsetDateTime> {
        if let Some(serving) = &material.serving {
            self.served_from = material
                .previous_ca
                .iter()
                .map(|p| p.cert_pem.clone())
                .chain([serving.ca_pem.clone()])
                .collect();
            for entry in &mut self.entries {
                if entry.left_at.is_none() && entry.pem != serving.ca_pem {
                    entry.left_at = Some(now);
                }
            }
        }
        self.entries.iter().map(|e| leaves(e, propagation)).min()
    }
}

fn leaves(entry: &Entry, propagation: Duration) -> OffsetDateTime {
    entry.left_at.map_or(entry.not_after, |t| {
        schedule::retire_after(t, propagation).min(entry.not_after)
    })
}
