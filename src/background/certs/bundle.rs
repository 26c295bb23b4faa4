//! The caBundle in the webhook configurations: which webhooks it belongs
//! in (those whose `clientConfig.service` names the webhook's Service,
//! nothing else), whether they carry a set of CAs, and the patch that
//! writes it, one strategic-merge patch per configuration that names
//! each webhook it changes.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::trust;

/// The field manager of the caBundle patches.
pub const FIELD_MANAGER: &str = "pipelinerollout-webhook-certs";

/// The Service the certificates are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
}

/// Which of the two webhook configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigurationType {
    /// The ValidatingWebhookConfiguration.
    Validating,
    /// The MutatingWebhookConfiguration.
    Mutating,
}

impl ConfigurationType {
    /// Both, in the order they are written.
    pub const BOTH: [Self; 2] = [Self::Validating, Self::Mutating];

    /// The metric label and log word.
    pub fn label(self) -> &'static str {
        match self {
            Self::Validating => "validating",
            Self::Mutating => "mutating",
        }
    }
}

/// One webhook of a configuration: its name and its current caBundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OurWebhook {
    /// `webhooks[].name`.
    pub name: String,
    /// Its `clientConfig.caBundle` (empty when unset).
    pub ca_bundle: Vec<u8>,
}

/// A webhook configuration as read: the webhooks that call `service`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Configuration {
    /// Whether the object exists.
    pub exists: bool,
    /// The webhooks whose clientConfig names the Service.
    pub ours: Vec<OurWebhook>,
}

fn names_service(config: &WebhookClientConfig, service: &ServiceRef) -> bool {
    config
        .service
        .as_ref()
        .is_some_and(|s| s.name == service.name && s.namespace == service.namespace)
}

/// The webhooks of a list of `(name, clientConfig)` that call `service`.
pub fn ours<'a>(
    webhooks: impl IntoIterator<Item = (&'a str, &'a WebhookClientConfig)>,
    service: &ServiceRef,
) -> Vec<OurWebhook> {
    webhooks
        .into_iter()
        .filter(|(_, config)| names_service(config, service))
        .map(|(name, config)| OurWebhook {
            name: name.to_owned(),
            ca_bundle: config
                .ca_bundle
                .as_ref()
                .map(|b| b.0.clone())
                .unwrap_or_default(),
        })
        .collect()
}

/// Whether `bundle` (PEM) holds every CA of `cas` (PEM each).
pub fn carries(bundle: &[u8], cas: &[&str]) -> bool {
    let held = trust::pem_certificates(bundle);
    cas.iter().all(|ca| {
        trust::pem_certificates(ca.as_bytes())
            .iter()
            .all(|c| held.contains(c))
    })
}

/// The strategic-merge patch that sets `bundle` on the named webhooks
/// (`webhooks` merges by name), or `None` when every webhook already holds
/// exactly `bundle`.
pub fn patch(config: &Configuration, bundle: &str) -> Option<Value> {
    use base64::Engine as _;
    let stale: Vec<Value> = config
        .ours
        .iter()
        .filter(|w| w.ca_bundle != bundle.as_bytes())
        .map(|w| {
            json!({
                "name": w.name,
                "clientConfig": {
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(bundle),
                },
            })
        })
        .collect();
    (!stale.is_empty()).then(|| json!({ "webhooks": stale }))
}

/// Reads the two configurations by name (a missing one `exists: false`).
#[derive(Clone)]
pub struct Configurations {
    validating: Api<ValidatingWebhookConfiguration>,
    mutating: Api<MutatingWebhookConfiguration>,
    names: [String; 2],
    service: ServiceRef,
}

impl Configurations {
    /// The configurations named `validating` and `mutating`.
    pub fn new(
        client: kube::Client,
        validating: &str,
        mutating: &str,
        service: ServiceRef,
    ) -> Self {
        Self {
            validating: Api::all(client.clone()),
            mutating: Api::all(client),
            names: [validating.to_owned(), mutating.to_owned()],
            service,
        }
    }

    /// The name of `which`'s configuration.
    pub fn name(&self, which: ConfigurationType) -> &str {
        match which {
            ConfigurationType::Validating => &self.names[0],
            ConfigurationType::Mutating => &self.names[1],
        }
    }

    /// Reads `which`'s configuration.
    pub async fn read(&self, which: ConfigurationType) -> Result<Configuration, kube::Error> {
        let name = self.name(which);
        let configuration = match which {
            ConfigurationType::Validating => self.validating.get_opt(name).await?.map(|c| {
                let hooks = c.webhooks.unwrap_or_default();
                ours(
                    hooks.iter().map(|w| (w.name.as_str(), &w.client_config)),
                    &self.service,
                )
            }),
            ConfigurationType::Mutating => self.mutating.get_opt(name).await?.map(|c| {
                let hooks = c.webhooks.unwrap_or_default();
                ours(
                    hooks.iter().map(|w| (w.name.as_str(), &w.client_config)),
                    &self.service,
                )
            }),
        };
        Ok(
            configuration.map_or_else(Configuration::default, |ours| Configuration {
                exists: true,
                ours,
            }),
        )
    }

    /// Reads both.
    pub async fn read_both(&self) -> Result<[Configuration; 2], kube::Error> {
        Ok([
            self.read(ConfigurationType::Validating).await?,
            self.read(ConfigurationType::Mutating).await?,
        ])
    }

    /// Applies a patch from [`patch`] to `which`'s configuration.
    pub async fn write(&self, which: ConfigurationType, patch: &Value) -> Result<(), kube::Error> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let name = self.name(which);
        match which {
            ConfigurationType::Validating => {
                self.validating
                    .patch(name, &params, &Patch::Strategic(patch))
                    .await?;
            }
            ConfigurationType::Mutating => {
                self.mutating
                    .patch(name, &params, &Patch::Strategic(patch))
                    .await?;
            }
        }
        Ok(())
    }
}
