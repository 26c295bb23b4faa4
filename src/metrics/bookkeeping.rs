//! Rule 15's refusals of service accounts: a write of Numaplane's
//! bookkeeping keys by a service account other than the policy's
//! `numaplane.controllerAccount`. When Numaplane's controller runs under
//! another account, every child it writes is refused this way; this
//! counter is where that shows at run time.
//!
//! The labels are bounded: the kind written, and whether the account is in
//! the controller account's namespace (the usual sign of a controller
//! account renamed or misconfigured). Never the username, which anyone
//! who reaches the webhook's port can forge.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::kinds::Kind;
use crate::policy::rules::Violation;

/// The prefix of a service account's username.
const SERVICE_ACCOUNT: &str = "system:serviceaccount:";

/// Labels of a refusal.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// The kind written (Pipeline, PipelineRollout, ...).
    pub kind: &'static str,
    /// "true" when the account is in the namespace of
    /// `numaplane.controllerAccount`, else "false".
    pub controller_namespace: &'static str,
}

/// Service-account writes refused by rule 15, by kind and namespace.
#[derive(Debug, Clone, Default)]
pub struct BookkeepingRefusals {
    family: Family<RefusalLabels, Counter>,
}

/// The namespace of a service account's username, if it is one.
fn account_namespace(username: &str) -> Option<&str> {
    let rest = username.strip_prefix(SERVICE_ACCOUNT)?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty()).then_some(namespace)
}

impl BookkeepingRefusals {
    /// Registers the counter, every series at zero.
    pub fn register(registry: &mut Registry) -> Self {
        let refusals = Self::default();
        registry.register(
            "bookkeeping_refusals",
            "Writes by a service account refused by rule 15 (Numaplane's bookkeeping keys, which only numaplane.controllerAccount changes), by kind and by whether the account is in the controller account's namespace",
            refusals.family.clone(),
        );
        for kind in Kind::ALL {
            for controller_namespace in ["true", "false"] {
                refusals
                    .family
                    .get_or_create(&RefusalLabels {
                        kind: kind.kind(),
                        controller_namespace,
                    })
                    .inc_by(0);
            }
        }
        refusals
    }

    /// Counts one refused write of `kind` when `denials` hold a change of
    /// a bookkeeping key by a service account (once per request).
    pub fn record(&self, kind: Kind, denials: &[Violation]) {
        let refusal = denials.iter().find_map(|violation| match violation {
            Violation::BookkeepingChanged {
                user, controller, ..
            } => account_namespace(user).map(|ns| (ns, account_namespace(controller))),
            _ => None,
        });
        if let Some((namespace, controller)) = refusal {
            let same = if controller == Some(namespace) {
                "true"
            } else {
                "false"
            };
            self.family
                .get_or_create(&RefusalLabels {
                    kind: kind.kind(),
                    controller_namespace: same,
                })
                .inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::account_namespace;

    #[test]
    fn only_service_accounts_have_a_namespace() {
        for (username, namespace) in [
            (
                "system:serviceaccount:numaplane-system:numaplane-sa",
                Some("numaplane-system"),
            ),
            ("system:serviceaccount:team:deployer", Some("team")),
            ("system:serviceaccount::nameless", None),
            ("system:serviceaccount:no-name", None),
            ("alice", None),
            ("system:admin", None),
            ("", None),
        ] {
            assert_eq!(account_namespace(username), namespace, "{username:?}");
        }
    }
}
