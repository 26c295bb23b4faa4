//! The Events' flag of `serve`: the namespaces no Event is written from.

/// The Events' flag of `serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct EventArgs {
    /// The namespaces the webhook configurations skip (comma-separated), besides the webhook's own (POD_NAMESPACE): a request about them cannot come from the API server, so it records no Event.
    #[arg(
        long,
        env = "WEBHOOK_UNGUARDED_NAMESPACES",
        value_delimiter = ',',
        default_value = "kube-system,pipelinerollout-webhook"
    )]
    pub unguarded_namespaces: Vec<String>,
}

impl EventArgs {
    /// The namespaces no Event is written from: those given, and the
    /// webhook's own `own` (`POD_NAMESPACE`, which the Deployment sets),
    /// which the webhook configurations always skip.
    pub fn unguarded(&self, own: Option<String>) -> Vec<String> {
        let mut all: Vec<String> = self
            .unguarded_namespaces
            .iter()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect();
        if let Some(own) = own.filter(|n| !n.is_empty() && !all.contains(n)) {
            all.push(own);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_webhooks_own_namespace_is_always_unguarded() {
        let given = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let cases = [
            (
                "the defaults, in the manifests' namespace",
                given(&["kube-system", "pipelinerollout-webhook"]),
                Some("pipelinerollout-webhook"),
                vec!["kube-system", "pipelinerollout-webhook"],
            ),
            (
                "installed elsewhere",
                given(&["kube-system", "pipelinerollout-webhook"]),
                Some("webhooks"),
                vec!["kube-system", "pipelinerollout-webhook", "webhooks"],
            ),
            (
                "outside a pod",
                given(&["kube-system"]),
                None,
                vec!["kube-system"],
            ),
            (
                "blanks dropped",
                given(&[" kube-system ", ""]),
                Some(""),
                vec!["kube-system"],
            ),
        ];
        for (name, list, own, want) in cases {
            let args = EventArgs {
                unguarded_namespaces: list,
            };
            assert_eq!(args.unguarded(own.map(str::to_owned)), want, "{name}");
        }
    }
}
