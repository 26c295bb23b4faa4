//! The most recent forces allowed, as a gauge per force: when it was
//! allowed, labelled with the gate, the PipelineRollout and the user, so
//! that an alert can say who forced which rollout. Only the last
//! [`KEPT`] are kept, so a stream of forces (or of forged requests) cannot
//! grow the metrics without bound.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::atomic::AtomicU64;

/// How many forces the gauge keeps.
pub const KEPT: usize = 64;

/// The longest label value kept (a Kubernetes name is at most 253 bytes).
const MAX_LABEL: usize = 253;

/// Labels of one allowed force.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ForceLabels {
    /// force-reapply or force-promote.
    pub gate: &'static str,
    /// The PipelineRollout's namespace (not `namespace`, which Prometheus
    /// gives the scraped pod's).
    pub rollout_namespace: String,
    /// The PipelineRollout's name.
    pub rollout: String,
    /// Who forced it (userInfo.username).
    pub user: String,
}

/// The gauge family and the order its children were set in.
#[derive(Debug, Default)]
pub struct RecentForces {
    /// `pipelinerollout_webhook_force_allowed_timestamp_seconds`.
    pub family: Family<ForceLabels, Gauge<f64, AtomicU64>>,
    order: Mutex<VecDeque<ForceLabels>>,
}

impl RecentForces {
    /// Records a force allowed now; forgets the oldest beyond [`KEPT`].
    pub fn record(&self, gate: &'static str, namespace: &str, name: &str, user: &str) {
        let labels = ForceLabels {
            gate,
            rollout_namespace: clip(namespace),
            rollout: clip(name),
            user: clip(user),
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        self.family.get_or_create(&labels).set(now);
        // A poisoned lock only means another request panicked while holding
        // it; the queue itself is still consistent.
        let mut order = self.order.lock().unwrap_or_else(|e| e.into_inner());
        order.retain(|kept| kept != &labels);
        order.push_back(labels);
        while order.len() > KEPT {
            if let Some(oldest) = order.pop_front() {
                self.family.remove(&oldest);
            }
        }
    }
}

fn clip(text: &str) -> String {
    let mut end = text.len().min(MAX_LABEL);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    fn encoded(forces: &RecentForces) -> String {
        let mut registry = Registry::default();
        registry.register("forces", "test", forces.family.clone());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
        out
    }

    #[test]
    fn a_force_is_labelled_with_its_rollout_and_user() {
        let forces = RecentForces::default();
        forces.record("force-reapply", "team-a", "orders", "alice");
        let text = encoded(&forces);
        assert!(
            text.contains(
                "forces{gate=\"force-reapply\",rollout_namespace=\"team-a\",rollout=\"orders\",user=\"alice\"} "
            ),
            "{text}"
        );
    }

    #[test]
    fn only_the_most_recent_are_kept() {
        let forces = RecentForces::default();
        for i in 0..KEPT + 10 {
            forces.record("force-reapply", "team-a", &format!("p{i}"), "alice");
        }
        // The first one again: it moves to the back instead of counting twice.
        forces.record(
            "force-reapply",
            "team-a",
            &format!("p{}", KEPT + 9),
            "alice",
        );
        let text = encoded(&forces);
        let kept = text.lines().filter(|l| l.starts_with("forces{")).count();
        assert_eq!(kept, KEPT, "{text}");
        assert!(
            !text.contains("rollout=\"p9\""),
            "the oldest are gone: {text}"
        );
        assert!(text.contains("rollout=\"p10\""), "{text}");
    }

    #[test]
    fn long_values_are_clipped_on_a_character_boundary() {
        let long = "é".repeat(200);
        assert!(clip(&long).len() <= MAX_LABEL);
        assert!(clip(&long).chars().all(|c| c == 'é'));
    }
}
