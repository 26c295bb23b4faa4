//! The count of Kubernetes Events (`crate::events`), by reason and what
//! became of each.

use prometheus_client::registry::Registry;

use crate::events::{EventCounts, EventLabels};
use crate::policy::rules::EventReason;

/// What can become of an Event (`crate::events`).
const EVENT_RESULTS: [&str; 5] = ["sent", "failed", "dropped", "unverified", "unguarded"];

/// Registers the Event counter (which the Event queue counts into), every
/// reason and result at zero.
pub fn register(registry: &mut Registry) -> EventCounts {
    let events = EventCounts::default();
    registry.register(
        "events",
        "Kubernetes Events on the objects the webhook judges, by reason and result (sent, failed, dropped, unverified, unguarded)",
        events.clone(),
    );
    for reason in EventReason::ALL {
        for result in EVENT_RESULTS {
            events
                .get_or_create(&EventLabels {
                    reason: reason.as_str(),
                    result,
                })
                .inc_by(0);
        }
    }
    events
}
