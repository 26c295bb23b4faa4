//! The Service and the NetworkPolicy: the webhook and admin ports, the
//! one open to all, the other to the namespaces that scrape it.

use crate::manifests::NAMESPACE;
use crate::manifests::install::{Install, one, selects};
use crate::manifests::pod::{pod, ports, service_port};
use crate::manifests::render::{Rendering, on_every_rendering};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// Service: 443 to the webhook port, 8080 to the admin port.
pub(crate) fn service_targets_the_container_ports(r: &Rendering) {
    let pod = pod(&r.install);
    let (listen, admin) = ports(pod.container);
    let service = one(&r.install.services, "Service");
    assert_eq!(service.metadata.namespace.as_deref(), Some(NAMESPACE));
    let service_spec = service.spec.as_ref().expect("Service spec");
    let selector = service_spec.selector.clone().expect("Service selector");
    assert!(
        !selector.is_empty() && selector.iter().all(|(k, v)| pod.labels.get(k) == Some(v)),
        "the Service selects the webhook's pods"
    );
    assert_eq!(
        service_port(service, pod.container, 443),
        listen,
        "Service 443 targets the --listen port"
    );
    assert_eq!(
        service_port(service, pod.container, 8080),
        admin,
        "Service 8080 targets the admin port"
    );
}

#[test]
fn the_service_targets_the_webhook_and_admin_ports() {
    on_every_rendering(service_targets_the_container_ports);
}

/// NetworkPolicy: the webhook port open to all, the admin port to some.
pub(crate) fn network_policy_opens_the_ports(r: &Rendering) {
    let pod = pod(&r.install);
    let (listen, admin) = ports(pod.container);
    check_network_policy(&r.install, &pod.labels, listen, admin);
}

fn check_network_policy(
    install: &Install,
    pod_labels: &BTreeMap<String, String>,
    listen: i32,
    admin: i32,
) {
    let policy = one(&install.network_policies, "NetworkPolicy");
    let spec = policy.spec.as_ref().expect("NetworkPolicy spec");
    assert!(selects(
        &spec.pod_selector.clone().unwrap_or_default(),
        pod_labels
    ));
    let rules = spec.ingress.clone().unwrap_or_default();
    let opens = |port: i32| {
        rules
            .iter()
            .filter(|r| {
                r.ports
                    .iter()
                    .flatten()
                    .any(|p| p.port == Some(IntOrString::Int(port)))
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    let webhook = opens(listen);
    assert!(
        webhook
            .iter()
            .any(|r| r.from.as_ref().is_none_or(Vec::is_empty)),
        "the webhook port is open to the API server, from anywhere"
    );
    let metrics = opens(admin);
    assert!(
        !metrics.is_empty(),
        "the admin port is reachable for scraping"
    );
    for rule in metrics {
        let from = rule.from.unwrap_or_default();
        assert!(
            !from.is_empty()
                && from
                    .iter()
                    .all(|p| p.namespace_selector.is_some() && p.ip_block.is_none()),
            "the admin port is open only to selected namespaces"
        );
    }
}

#[test]
fn the_network_policy_opens_the_webhook_port_to_all_and_the_admin_port_to_some() {
    on_every_rendering(network_policy_opens_the_ports);
}
