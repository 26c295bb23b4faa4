//! PipelineRollout statuses: a pause-and-drain upgrade, the
//! `PipelinePausingOrPaused` condition, and the tables' lists of statuses
//! that are pausing and that are not.

use serde_json::{Value, json};

/// The condition type Numaplane keeps while the child Pipeline pauses.
pub const PAUSING_CONDITION: &str = "PipelinePausingOrPaused";

/// The time written into conditions when the case does not care.
pub const CONDITION_TIME: &str = "2026-06-01T10:00:00Z";

/// A status saying a pause-and-drain upgrade is in progress, whose pause
/// began at `pause_began` (`status.pauseStatus.lastPauseBeginTime`), when
/// given.
pub fn pause_and_drain_status(pause_began: Option<&str>) -> Value {
    let mut status = json!({"phase": "Pending", "upgradeInProgress": "PipelinePauseAndDrain"});
    if let Some(began) = pause_began {
        status["pauseStatus"] = json!({"lastPauseBeginTime": began});
    }
    status
}

/// A deployed status with a healthy-children condition and a condition
/// of type `kind`, all changed at [`CONDITION_TIME`].
pub fn condition_status(kind: &str, status: &str, reason: &str) -> Value {
    json!({"phase": "Deployed", "upgradeInProgress": "", "conditions": [
        {"type": "ChildResourcesHealthy", "status": "True", "reason": "Successful",
         "message": "ok", "lastTransitionTime": CONDITION_TIME},
        {"type": kind, "status": status, "reason": reason,
         "message": reason, "lastTransitionTime": CONDITION_TIME}
    ]})
}

/// A status whose `PipelinePausingOrPaused` condition says the pipeline
/// has been pausing since `since` (and no pause-and-drain upgrade).
pub fn pausing_since(since: &str) -> Value {
    json!({"upgradeInProgress": "", "conditions": [{
        "type": PAUSING_CONDITION, "status": "True",
        "reason": "PipelinePausing", "lastTransitionTime": since
    }]})
}

/// The statuses that say the pipeline is pausing, by name.
pub fn pausing_statuses() -> Vec<(&'static str, Value)> {
    vec![
        ("PipelinePauseAndDrain", pause_and_drain_status(None)),
        (
            "condition PipelinePausing",
            condition_status(PAUSING_CONDITION, "True", "PipelinePausing"),
        ),
    ]
}

/// The statuses that say it is not, by name (`None`: no status at all).
pub fn not_pausing_statuses() -> Vec<(&'static str, Option<Value>)> {
    vec![
        ("no status", None),
        (
            "upgradeInProgress empty",
            Some(json!({"upgradeInProgress": ""})),
        ),
        (
            "Progressive",
            Some(json!({"upgradeInProgress": "Progressive"})),
        ),
        (
            "reason PipelinePaused",
            Some(condition_status(
                PAUSING_CONDITION,
                "True",
                "PipelinePaused",
            )),
        ),
        (
            "status False",
            Some(condition_status(PAUSING_CONDITION, "False", "Unpaused")),
        ),
        (
            "status False reason PipelinePausing",
            Some(condition_status(
                PAUSING_CONDITION,
                "False",
                "PipelinePausing",
            )),
        ),
        (
            "other condition type",
            Some(condition_status("Progressing", "True", "PipelinePausing")),
        ),
    ]
}
