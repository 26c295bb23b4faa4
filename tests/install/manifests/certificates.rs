//! The serving certificate and its CA: from cert-manager's injector, from
//! `gen-certs` (its files and the caBundle patch), or from the webhook
//! itself (`serve --manage-certs`, with its names and its guard policy).

use crate::manifests::binary::{HELP, duration, flag_value};
use crate::manifests::install::{Install, named, one, sorted};
use crate::manifests::pod::{mounted_dir, pod};
use crate::manifests::render::{CaSource, NO_KUBECTL, Rendering, Workspace, on_every_rendering};
use crate::manifests::webhooks::{Webhooks, service_name, webhooks};
use crate::manifests::{INJECT_CA, NAMESPACE, TLS_SECRET};
use base64::Engine as _;
use k8s_openapi::api::core::v1::Container;
use serde_json::Value;
use std::fs;
use std::process::Command;

/// The CA: injected by cert-manager, or the generated bundle.
pub(crate) fn ca_comes_from_cert_manager_or_gen_certs(r: &Rendering) {
    let install = &r.install;
    let service_name = service_name(one(&install.services, "Service"));
    let Webhooks {
        mutating,
        validating,
        mutate,
        validate,
    } = webhooks(install);
    let annotation = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(INJECT_CA).cloned())
    };
    let _ = &validate;
    let bundles: Vec<_> = std::iter::once(mutate.client_config.ca_bundle.clone())
        .chain(
            validating
                .webhooks
                .iter()
                .flatten()
                .map(|w| w.client_config.ca_bundle.clone()),
        )
        .collect();
    let injects = [
        annotation(&mutating.metadata),
        annotation(&validating.metadata),
    ];
    match r.expect.ca {
        CaSource::None => {
            assert!(
                bundles.iter().all(Option::is_none),
                "the base carries no caBundle"
            );
            assert!(
                injects.iter().all(Option::is_none),
                "the base carries no injection"
            );
        }
        CaSource::CertManager => {
            assert!(
                bundles.iter().all(Option::is_none),
                "cert-manager fills caBundle itself"
            );
            for inject in injects {
                let inject = inject.expect("both configurations carry inject-ca-from");
                check_cert_manager(install, &inject, &service_name);
            }
        }
        CaSource::GenCerts => {
            assert!(injects.iter().all(Option::is_none));
            let certs = r.certs.as_ref().expect("certificates directory");
            let ca = &certs.ca;
            for bundle in bundles {
                let bundle = bundle.expect("every webhook of both configurations carries caBundle");
                assert_eq!(&bundle.0, ca, "caBundle is the generated ca.crt");
            }
            let secret = named(&install.secrets, TLS_SECRET, "Secret");
            assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
            let data = secret.data.clone().unwrap_or_default();
            assert_eq!(data.get("tls.crt").map(|b| &b.0), Some(&certs.cert));
            assert_eq!(data.get("tls.key").map(|b| &b.0), Some(&certs.key));
            check_serving_cert(&certs.cert, ca, &service_name);
        }
        CaSource::SelfManaged => {
            assert!(
                bundles.iter().all(Option::is_none) && injects.iter().all(Option::is_none),
                "the webhook writes the caBundle itself"
            );
            check_self_managed(install);
        }
    }
    if r.expect.ca != CaSource::GenCerts {
        assert!(
            install.secrets.is_empty(),
            "no Secret is rendered: the TLS Secret comes from cert-manager or the webhook"
        );
    }
    let manages = manages_certs(pod(install).container);
    assert_eq!(
        manages,
        r.expect.ca == CaSource::SelfManaged,
        "--manage-certs is set in the self-managed overlay only"
    );
}

#[test]
fn the_ca_comes_from_cert_manager_or_from_gen_certs() {
    on_every_rendering(ca_comes_from_cert_manager_or_gen_certs);
}

/// Whether the container runs `serve --manage-certs`.
pub(crate) fn manages_certs(container: &Container) -> bool {
    let args = container.args.clone().unwrap_or_default();
    args.iter()
        .any(|a| a == "--manage-certs" || a == "--manage-certs=true")
        || container
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "WEBHOOK_MANAGE_CERTS" && e.value.as_deref() == Some("true"))
}

/// `--manage-certs`: the names the webhook uses by default are the names
/// of the rendered objects, and the Secret volume may be absent (the
/// webhook writes the Secret after it starts).
fn check_self_managed(install: &Install) {
    let pod = pod(install);
    let help = &*HELP;
    let value = |flag: &str, env: &str| {
        flag_value(pod.container, help, flag, env).unwrap_or_else(|| panic!("{flag} has a value"))
    };
    let tls_cert = value("--tls-cert", "WEBHOOK_TLS_CERT");
    let (tls_volume, _) = mounted_dir(pod.container, &tls_cert);
    let volume = pod
        .spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == tls_volume)
        .expect("the TLS volume");
    let secret = volume.secret.as_ref().expect("a Secret volume");
    assert_eq!(
        secret.secret_name.as_deref(),
        Some(value("--cert-secret", "WEBHOOK_CERT_SECRET").as_str()),
        "the Secret the webhook writes is the one --tls-cert ({tls_cert}) comes from"
    );
    assert_eq!(
        secret.optional,
        Some(true),
        "the Secret volume is optional: it does not exist before the first start"
    );
    let service = one(&install.services, "Service");
    assert_eq!(
        service.metadata.name.as_deref(),
        Some(value("--cert-service", "WEBHOOK_CERT_SERVICE").as_str())
    );
    let Webhooks {
        mutating,
        validating,
        mutate,
        validate,
    } = webhooks(install);
    assert_eq!(
        validating.metadata.name.as_deref(),
        Some(
            value(
                "--validating-configuration",
                "WEBHOOK_VALIDATING_CONFIGURATION"
            )
            .as_str()
        )
    );
    assert_eq!(
        mutating.metadata.name.as_deref(),
        Some(value("--mutating-configuration", "WEBHOOK_MUTATING_CONFIGURATION").as_str())
    );
    for webhook in [&mutate.client_config, &validate.client_config] {
        let called = webhook.service.as_ref().expect("clientConfig.service");
        assert_eq!(Some(called.name.as_str()), service.metadata.name.as_deref());
        assert_eq!(
            called.namespace, NAMESPACE,
            "the Secret's namespace (POD_NAMESPACE)"
        );
    }
    // Its account may patch nothing but the caBundle of those two
    // configurations: the guard names them and the account.
    let guard = "pipelinerollout-webhook-own-webhooks";
    let policy = named(&install.policies, guard, "ValidatingAdmissionPolicy");
    let binding = named(
        &install.policy_bindings,
        guard,
        "ValidatingAdmissionPolicyBinding",
    );
    assert_eq!(binding.spec.policy_name, guard);
    assert_eq!(binding.spec.validation_actions, vec!["Deny".to_owned()]);
    let spec = policy.spec.clone().unwrap_or_default();
    assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
    let rules = spec
        .match_constraints
        .and_then(|c| c.resource_rules)
        .unwrap_or_default();
    let rule = one(&rules, "the guard's resource rule");
    assert_eq!(
        sorted(rule.resources.as_ref()),
        [
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations"
        ]
    );
    let mut names = vec![
        mutating.metadata.name.clone().unwrap_or_default(),
        validating.metadata.name.clone().unwrap_or_default(),
    ];
    names.sort();
    names.dedup();
    assert_eq!(sorted(rule.resource_names.as_ref()), names);
    let account = pod.spec.service_account_name.clone().unwrap_or_default();
    let username = format!("system:serviceaccount:{NAMESPACE}:{account}");
    let conditions = spec.match_conditions.unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c.expression.contains(&format!("'{username}'"))),
        "the guard applies to {username}"
    );
    for flag in ["--ca-validity", "--cert-validity", "--cert-propagation"] {
        let _ = duration(&value(flag, ""));
    }
    assert!(
        duration(&value("--cert-validity", "")) < duration(&value("--ca-validity", "")),
        "the serving certificate lives shorter than its CA"
    );
}

/// The cert-manager chain behind `inject` (`namespace/certificate`).
fn check_cert_manager(install: &Install, inject: &str, service: &str) {
    let (ns, certificate) = inject.split_once('/').expect("namespace/name");
    assert_eq!(ns, NAMESPACE);
    let find = |kind: &str, name: &str| -> Value {
        install
            .cert_manager
            .iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no cert-manager {kind} {name}"))
            .clone()
    };
    for doc in &install.cert_manager {
        assert_eq!(
            doc["metadata"]["namespace"], NAMESPACE,
            "cert-manager objects live beside the webhook"
        );
    }
    let serving = find("Certificate", certificate);
    assert_eq!(
        serving["spec"]["secretName"], TLS_SECRET,
        "the Secret the Deployment mounts"
    );
    let dns: Vec<&str> = serving["spec"]["dnsNames"]
        .as_array()
        .expect("dnsNames")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        dns.contains(&format!("{service}.{NAMESPACE}.svc").as_str()),
        "the serving certificate names the Service's DNS name: {dns:?}"
    );
    // Issued by a CA Issuer whose CA comes from a self-signed Issuer.
    let issuer_ref = &serving["spec"]["issuerRef"];
    assert_eq!(issuer_ref["kind"], "Issuer");
    let ca_issuer = find("Issuer", issuer_ref["name"].as_str().expect("issuer name"));
    let ca_secret = ca_issuer["spec"]["ca"]["secretName"]
        .as_str()
        .expect("CA Issuer");
    let ca_cert = install
        .cert_manager
        .iter()
        .find(|d| d["kind"] == "Certificate" && d["spec"]["secretName"] == ca_secret)
        .expect("the CA Certificate");
    assert_eq!(ca_cert["spec"]["isCA"], true);
    let root = find(
        "Issuer",
        ca_cert["spec"]["issuerRef"]["name"]
            .as_str()
            .expect("issuer name"),
    );
    assert!(
        root["spec"]["selfSigned"].is_object(),
        "the CA is self-signed"
    );
}

/// The generated serving certificate names the Service and was issued by
/// the CA in the caBundle.
fn check_serving_cert(cert_pem: &[u8], ca_pem: &[u8], service: &str) {
    let (_, cert_pem) = x509_parser::pem::parse_x509_pem(cert_pem).expect("tls.crt is PEM");
    let cert = cert_pem.parse_x509().expect("tls.crt is a certificate");
    let (_, ca_pem) = x509_parser::pem::parse_x509_pem(ca_pem).expect("ca.crt is PEM");
    let ca = ca_pem.parse_x509().expect("ca.crt is a certificate");
    assert_eq!(cert.issuer(), ca.subject(), "tls.crt was issued by ca.crt");
    let names: Vec<String> = cert
        .subject_alternative_name()
        .expect("SAN extension")
        .expect("SAN present")
        .value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => Some((*d).to_owned()),
            _ => None,
        })
        .collect();
    let wanted = format!("{service}.{NAMESPACE}.svc");
    assert!(names.contains(&wanted), "tls.crt names {wanted}: {names:?}");
}

#[test]
fn self_signed_overlay_without_gen_certs_fails_clearly() {
    // Without certificates, kustomize refuses rather than rendering an
    // install that cannot work.
    let ws = Workspace::new();
    for file in ["ca.crt", "tls.crt", "tls.key", "ca-bundle.patch.yaml"] {
        let _ = fs::remove_file(ws.certs_dir().join(file));
    }
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(ws.manifests().join("overlays/self-signed"))
        .output()
        .expect(NO_KUBECTL);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("certs/tls.crt"));
}

#[test]
fn gen_certs_base64_patch_matches_ca() {
    // The patch gen-certs writes is the base64 of ca.crt, at the path the
    // overlay expects.
    let ws = Workspace::new();
    ws.gen_certs();
    let patch = fs::read_to_string(ws.certs_dir().join("ca-bundle.patch.yaml")).expect("patch");
    let ops: Vec<Value> = serde_saphyr::from_str(&patch).expect("patch is YAML");
    let op = one(&ops, "patch operation");
    assert_eq!(op["op"], "add");
    assert_eq!(op["path"], "/webhooks/0/clientConfig/caBundle");
    let ca = fs::read(ws.certs_dir().join("ca.crt")).expect("ca.crt");
    assert_eq!(
        op["value"].as_str(),
        Some(
            base64::engine::general_purpose::STANDARD
                .encode(ca)
                .as_str()
        )
    );
}
