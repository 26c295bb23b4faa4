//! The API server's own measurements of the webhooks it calls.

/// Calls of one webhook, from the API server's histogram buckets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WebhookCalls {
    /// All calls.
    pub total: f64,
    /// Those that took at most 5 ms.
    pub under_5ms: f64,
    /// Those that took at most 25 ms.
    pub under_25ms: f64,
}

/// The calls of `webhook` (its name in the webhook configuration) in the
/// API server's `apiserver_admission_webhook_admission_duration_seconds`
/// histogram, as `/metrics` (`metrics`) shows it; its buckets are
/// cumulative, summed here over operations and outcomes.
pub fn webhook_calls(metrics: &str, webhook: &str) -> WebhookCalls {
    let mut calls = WebhookCalls {
        total: 0.0,
        under_5ms: 0.0,
        under_25ms: 0.0,
    };
    let name = format!("name=\"{webhook}\"");
    for line in metrics.lines() {
        let Some(rest) =
            line.strip_prefix("apiserver_admission_webhook_admission_duration_seconds_bucket{")
        else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if !labels.contains(&name) {
            continue;
        }
        if labels.contains("le=\"+Inf\"") {
            calls.total += value;
        } else if labels.contains("le=\"0.005\"") {
            calls.under_5ms += value;
        } else if labels.contains("le=\"0.025\"") {
            calls.under_25ms += value;
        }
    }
    calls
}
