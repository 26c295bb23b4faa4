//! The caBundle in the webhook configurations: which webhooks it belongs
//! in (those whose `clientConfig.service` names the webhook's Service,
//! nothing else), whether they carry a set of CAs, and the patch that
//! writes it, one strategic-merge patch per configuration that names
//! each webhook it changes.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::{CertOptions, ServiceRef, trust};
use crate::metrics::certificates::Configuration;

/// A webhook that calls the Service: `webhooks[].name` and its
/// `clientConfig.caBundle` (empty when unset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OurWebhook {
    pub name: String,
    pub ca_bundle: Vec<u8>,
}

/// The webhooks of a list of `(name, clientConfig)` that call `service`.
pub fn ours<'a>(
    webhooks: impl IntoIterator<Item = (&'a str, &'a WebhookClientConfig)>,
    service: &ServiceRef,
) -> Vec<OurWebhook> {
    webhooks
        .into_iter()
        .filter(|(_, config)| {
            config
                .service
                .as_ref()
                .is_some_and(|s| s.name == service.name && s.namespace == service.namespace)
        })
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
pub fn patch(ours: &[OurWebhook], bundle: &str) -> Option<Value> {
    use base64::Engine as _;
    let stale: Vec<Value> = ours
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

/// One of the two webhook configurations, read and patched by name.
#[derive(Clone)]
pub struct WebhookConfiguration {
    /// Which of the two: the metric label.
    pub label: Configuration,
    pub name: String,
    pub api: Api<DynamicObject>,
}

/// The ValidatingWebhookConfiguration and the
/// MutatingWebhookConfiguration of `options`, in the order they are
/// written.
pub fn configurations(client: &kube::Client, options: &CertOptions) -> [WebhookConfiguration; 2] {
    let of = |resource: ApiResource, label, name: &String| WebhookConfiguration {
        label,
        name: name.clone(),
        api: Api::all_with(client.clone(), &resource),
    };
    [
        of(
            ApiResource::erase::<ValidatingWebhookConfiguration>(&()),
            Configuration::Validating,
            &options.validating,
        ),
        of(
            ApiResource::erase::<MutatingWebhookConfiguration>(&()),
            Configuration::Mutating,
            &options.mutating,
        ),
    ]
}

/// The part of a webhook the caBundle concerns.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Webhook {
    name: String,
    client_config: WebhookClientConfig,
}

impl WebhookConfiguration {
    /// Reads the configuration's webhooks that call `service` (none when
    /// it is absent).
    pub async fn read(&self, service: &ServiceRef) -> Result<Vec<OurWebhook>, kube::Error> {
        let Some(object) = self.api.get_opt(&self.name).await? else {
            return Ok(Vec::new());
        };
        let webhooks: Option<Vec<Webhook>> =
            serde_json::from_value(object.data["webhooks"].clone())
                .map_err(kube::Error::SerdeError)?;
        let webhooks = webhooks.unwrap_or_default();
        Ok(ours(
            webhooks.iter().map(|w| (w.name.as_str(), &w.client_config)),
            service,
        ))
    }

    /// Applies a patch from [`patch`].
    pub async fn write(&self, patch: &Value) -> Result<(), kube::Error> {
        let params = PatchParams {
            field_manager: Some("pipelinerollout-webhook-certs".to_owned()),
            ..PatchParams::default()
        };
        self.api
            .patch(&self.name, &params, &Patch::Strategic(patch))
            .await?;
        Ok(())
    }
}
