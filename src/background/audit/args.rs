//! The audit's flags of `serve`, and the [`AuditOptions`] it runs with.

use std::time::Duration;

use super::AuditOptions;

/// The audit's flags of `serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct AuditArgs {
    /// Audit every stored PipelineRollout, MonoVertexRollout and ISBServiceRollout into PolicyReports (one per namespace) when an API server can be reached; `--audit=false` turns it off (needs list and watch on pipelinerollouts, monovertexrollouts and isbservicerollouts, and get, list, create, patch and delete on policyreports).
    #[arg(long, env = "WEBHOOK_AUDIT", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub audit: bool,
    /// How often the audit judges every stored object again, changed or not (it also does at start, on every change and after each policy reload).
    #[arg(long, env = "WEBHOOK_AUDIT_INTERVAL", default_value = "1h", value_parser = parse_positive_duration)]
    pub audit_interval: Duration,
    /// The audit's API requests a second (report writes and deletions), after the burst; admission requests are never counted against it.
    #[arg(long, env = "WEBHOOK_AUDIT_QPS", default_value_t = 5.0, value_parser = parse_qps)]
    pub audit_qps: f64,
    /// The audit's API requests allowed at once before --audit-qps applies.
    #[arg(long, env = "WEBHOOK_AUDIT_BURST", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub audit_burst: u32,
}

impl AuditArgs {
    /// What the audit runs with; `None`: `--audit=false`.
    pub fn options(&self) -> Option<AuditOptions> {
        self.audit.then(|| AuditOptions {
            interval: self.audit_interval,
            qps: self.audit_qps,
            burst: self.audit_burst,
            ..AuditOptions::default()
        })
    }
}

/// Why an audit flag's value was refused (clap prints the message after
/// the flag).
#[derive(Debug, thiserror::Error)]
pub enum FlagValueError {
    #[error("must be above 0, e.g. 1h")]
    ZeroDuration,
    #[error("{0}: write a duration such as 30m or 1h")]
    NotADuration(#[from] humantime::DurationError),
    #[error("must be a number of requests a second above 0, e.g. 5 or 0.5")]
    NotARate,
}

fn parse_positive_duration(text: &str) -> Result<Duration, FlagValueError> {
    match humantime::parse_duration(text)? {
        d if d.is_zero() => Err(FlagValueError::ZeroDuration),
        d => Ok(d),
    }
}

fn parse_qps(text: &str) -> Result<f64, FlagValueError> {
    match text.parse::<f64>() {
        Ok(q) if q.is_finite() && q > 0.0 => Ok(q),
        _ => Err(FlagValueError::NotARate),
    }
}
