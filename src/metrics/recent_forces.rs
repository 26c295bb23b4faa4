//! The most recent force decisions, as a gauge per decision: when it was
//! taken, labelled with the gate, the result, the PipelineRollout and the
//! user, so that an alert can say who forced which rollout and the
//! dashboard can show forces by namespace. Only the last [`KEPT`] of each
//! result are kept, so a stream of forces (or of forged requests) cannot
//! grow the metrics without bound, and a flood of denials cannot push an
//! allowed force out before its alert fires.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// How many decisions of each result the gauge keeps.
pub const KEPT: usize = 64;

/// The longest label value kept (a Kubernetes name is at most 253 bytes).
const MAX_LABEL: usize = 253;

/// Labels of one force decision.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ForceLabels {
    /// force-reapply or force-promote.
    pub gate: &'static str,
    /// allowed, denied or would_deny.
    pub result: &'static str,
    /// The PipelineRollout's namespace (not `namespace`, which Prometheus
    /// gives the scraped pod's).
    pub rollout_namespace: String,
    /// The PipelineRollout's name.
    pub rollout: String,
    /// Who asked (userInfo.username).
    pub user: String,
}

/// The gauge family and, per result, the order its children were set in.
#[derive(Debug, Default)]
pub struct RecentForces {
    /// `pipelinerollout_webhook_force_decision_timestamp_seconds`.
    pub family: Family<ForceLabels, Gauge<f64, AtomicU64>>,
    order: Mutex<BTreeMap<&'static str, VecDeque<ForceLabels>>>,
}

impl RecentForces {
    /// Records a decision taken now; forgets the oldest of the same result
    /// beyond [`KEPT`].
    pub fn record(
        &self,
        (gate, result): (&'static str, &'static str),
        namespace: &str,
        name: &str,
        user: &str,
    ) {
        let labels = ForceLabels {
            gate,
            result,
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
        // it; the queues themselves are still consistent.
        let mut order = self.order.lock().unwrap_or_else(|e| e.into_inner());
        let queue = order.entry(result).or_default();
        queue.retain(|kept| kept != &labels);
        queue.push_back(labels);
        while queue.len() > KEPT {
            if let Some(oldest) = queue.pop_front() {
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

    const ALLOWED: (&str, &str) = ("force-reapply", "allowed");
    const DENIED: (&str, &str) = ("force-reapply", "denied");

    fn encoded(forces: &RecentForces) -> String {
        let mut registry = Registry::default();
        registry.register("forces", "test", forces.family.clone());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
        out
    }

    fn count(text: &str, result: &str) -> usize {
        text.lines()
            .filter(|l| l.contains(&format!("result=\"{result}\"")))
            .count()
    }

    #[test]
    fn a_force_is_labelled_with_its_rollout_and_user() {
        let forces = RecentForces::default();
        forces.record(ALLOWED, "team-a", "orders", "alice");
        let text = encoded(&forces);
        assert!(
            text.contains(
                "forces{gate=\"force-reapply\",result=\"allowed\",rollout_namespace=\"team-a\",rollout=\"orders\",user=\"alice\"} "
            ),
            "{text}"
        );
    }

    #[test]
    fn only_the_most_recent_are_kept() {
        let forces = RecentForces::default();
        for i in 0..KEPT + 10 {
            forces.record(ALLOWED, "team-a", &format!("p{i}"), "alice");
        }
        // The newest one again: it stays once instead of counting twice.
        forces.record(ALLOWED, "team-a", &format!("p{}", KEPT + 9), "alice");
        let text = encoded(&forces);
        assert_eq!(count(&text, "allowed"), KEPT, "{text}");
        assert!(
            !text.contains("rollout=\"p9\""),
            "the oldest are gone: {text}"
        );
        assert!(text.contains("rollout=\"p10\""), "{text}");
    }

    #[test]
    fn a_flood_of_denials_keeps_the_allowed_forces() {
        let forces = RecentForces::default();
        forces.record(ALLOWED, "team-a", "orders", "argocd-server");
        for i in 0..KEPT * 3 {
            forces.record(DENIED, "team-b", &format!("p{i}"), &format!("mallory-{i}"));
        }
        let text = encoded(&forces);
        assert_eq!(count(&text, "denied"), KEPT, "{text}");
        assert_eq!(count(&text, "allowed"), 1, "{text}");
    }

    #[test]
    fn long_values_are_clipped_on_a_character_boundary() {
        let long = "é".repeat(200);
        assert!(clip(&long).len() <= MAX_LABEL);
        assert!(clip(&long).chars().all(|c| c == 'é'));
    }
}
