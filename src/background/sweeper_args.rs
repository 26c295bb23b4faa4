//! The stale-force sweeper's flags of `serve` ([`super::sweeper`]).

use std::time::Duration;

/// The stale-force sweeper's flags of `serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct SweeperArgs {
    /// Watch PipelineRollouts and reset allow-data-loss to "false" once a forced re-apply's pause is over (needs get, list, watch and patch on pipelinerollouts).
    #[arg(long, env = "WEBHOOK_RESET_STALE_FORCE")]
    pub reset_stale_force: bool,
    /// How long the pause must have been over before the sweeper resets a force.
    #[arg(long, env = "WEBHOOK_STALE_FORCE_GRACE", default_value = "10s", value_parser = humantime::parse_duration)]
    pub stale_force_grace: Duration,
}

impl SweeperArgs {
    /// The grace the sweeper runs with; `None`: no sweeper.
    pub fn grace(&self) -> Option<Duration> {
        self.reset_stale_force.then_some(self.stale_force_grace)
    }
}
