//! What each value of the Helm chart changes, in the test process with
//! `helm template`: the image, the policy (and that it never rolls the
//! pods), each certificate mode, the managed-cluster ports and hostNetwork,
//! the skipped namespaces, another namespace, Helm's labels, the
//! PodDisruptionBudget and NOTES.txt.
//! The comparison with the kustomize install is in tests/install/helm_chart.rs.
//!
//! Needs `helm` (3.8 or newer) on the PATH.

use crate::helm_support;

use base64::Engine as _;
use helm_support::{CHART, NAMESPACE, example, helm, object, policy_text, root, template};
use serde_json::Value;

const NAME: &str = "pipelinerollout-webhook";

fn container(docs: &[Value]) -> &Value {
    &object(docs, "Deployment", NAME)["spec"]["template"]["spec"]["containers"][0]
}

/// The NOTES that `helm install --dry-run=client` prints with `extra`
/// arguments; the install must succeed.
fn install_notes(extra: &[&str]) -> String {
    let mut args = vec![
        "install",
        NAME,
        CHART,
        "--namespace",
        NAMESPACE,
        "--dry-run=client",
    ];
    args.extend_from_slice(extra);
    let run = helm(&args);
    assert!(run.success, "{}", run.stderr);
    run.stdout
        .split("NOTES:")
        .nth(1)
        .expect("helm prints the NOTES")
        .to_owned()
}

#[test]
fn the_image_is_the_builds_name_and_version_under_the_users_registry() {
    let chart: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root().join(CHART).join("Chart.yaml")).expect("Chart.yaml"),
    )
    .expect("Chart.yaml is YAML");
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(
        chart["appVersion"],
        env!("CARGO_PKG_VERSION"),
        "Chart.yaml's appVersion must be the crate's version"
    );
    let image = |args: &[&str]| {
        container(&template(args))["image"]
            .as_str()
            .map(str::to_owned)
    };
    // The name and tag image/build.sh and the Dockerfile's documented build
    // give the image; the registry is the user's.
    assert_eq!(
        image(&[]).as_deref(),
        Some(concat!(
            "pipelinerollout-webhook:",
            env!("CARGO_PKG_VERSION")
        ))
    );
    assert_eq!(
        image(&["--set", "image.registry=registry.example.com/"]).as_deref(),
        Some(concat!(
            "registry.example.com/pipelinerollout-webhook:",
            env!("CARGO_PKG_VERSION")
        ))
    );
    let digest = format!("sha256:{}", "ab".repeat(32));
    assert_eq!(
        image(&[
            "--set",
            &format!("image.registry=registry.example.com,image.tag=9.9.9,image.digest={digest}")
        ]),
        Some(format!(
            "registry.example.com/pipelinerollout-webhook@{digest}"
        ))
    );
}

#[test]
fn a_policy_change_changes_the_configmap_and_not_the_pods() {
    let before = template(&[]);
    let after = template(&["--set", "policy.mode=warn,policy.drainTimeout.max=2h"]);
    let pod = |docs: &[Value]| object(docs, "Deployment", NAME)["spec"]["template"].clone();
    assert_eq!(
        pod(&before),
        pod(&after),
        "the pod template must not change with the policy"
    );
    assert_ne!(policy_text(&before), policy_text(&after));
    assert!(policy_text(&after).contains("mode: warn"));
    let annotations = &pod(&before)["metadata"]["annotations"];
    assert!(
        annotations
            .as_object()
            .is_some_and(|a| a.keys().all(|k| !k.contains("checksum"))),
        "no checksum annotation may roll the pods on a policy edit: {annotations}"
    );
}

#[test]
fn generated_certificates_are_trusted_by_both_webhooks() {
    let docs = template(&["-f", &example("gen-ca.yaml").display().to_string()]);
    let secret = object(&docs, "Secret", "pipelinerollout-webhook-tls");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let ca = secret["data"]["ca.crt"].as_str().expect("ca.crt");
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let config = object(&docs, kind, NAME);
        assert_eq!(
            config["webhooks"][0]["clientConfig"]["caBundle"], ca,
            "{kind}"
        );
        assert!(
            config["metadata"]["annotations"].is_null(),
            "no cert-manager annotation"
        );
    }
    let pem = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["tls.crt"].as_str().expect("tls.crt"))
        .expect("base64");
    assert!(String::from_utf8_lossy(&pem).contains("BEGIN CERTIFICATE"));
    assert!(
        !docs.iter().any(|d| d["apiVersion"]
            .as_str()
            .is_some_and(|a| a.starts_with("cert-manager.io"))),
        "genCA needs no cert-manager objects"
    );
}

#[test]
fn an_existing_secret_is_mounted_and_its_ca_trusted() {
    let docs = template(&["-f", &example("existing-secret.yaml").display().to_string()]);
    let pod = &object(&docs, "Deployment", NAME)["spec"]["template"]["spec"];
    let tls = pod["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "tls"))
        .expect("tls volume");
    assert_eq!(tls["secret"]["secretName"], "pipelinerollout-webhook-tls");
    let config = object(&docs, "ValidatingWebhookConfiguration", NAME);
    assert!(
        config["webhooks"][0]["clientConfig"]["caBundle"]
            .as_str()
            .is_some_and(|b| !b.is_empty())
    );
    assert!(
        !docs
            .iter()
            .any(|d| d["kind"] == "Certificate" || d["kind"] == "Secret")
    );
}

#[test]
fn an_existing_issuer_signs_the_serving_certificate_alone() {
    let docs = template(&["-f", &example("own-issuer.yaml").display().to_string()]);
    let certs: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Certificate").collect();
    assert_eq!(certs.len(), 1, "only the serving certificate");
    assert_eq!(certs[0]["spec"]["issuerRef"]["kind"], "ClusterIssuer");
    assert_eq!(certs[0]["spec"]["issuerRef"]["name"], "platform-ca");
    assert!(!docs.iter().any(|d| d["kind"] == "Issuer"));
    let bindings: Vec<String> = docs
        .iter()
        .filter(|d| d["roleRef"]["name"] == "pipelinerollout-force-reapply")
        .map(helm_support::id)
        .collect();
    assert_eq!(
        bindings,
        [
            "ClusterRoleBinding/pipelinerollout-force-reapply-sre",
            "RoleBinding/pipelinerollout-force-reapply-team-a"
        ]
    );
}

#[test]
fn host_network_and_managed_cluster_ports_reach_the_server() {
    let docs = template(&["-f", &example("host-network.yaml").display().to_string()]);
    let pod = &object(&docs, "Deployment", NAME)["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["dnsPolicy"], "ClusterFirstWithHostNet");
    let c = &pod["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(args.contains(&"--listen=0.0.0.0:9443"), "{args:?}");
    assert!(args.contains(&"--admin-listen=0.0.0.0:9080"), "{args:?}");
    assert_eq!(c["ports"][0]["containerPort"], 9443);
    assert_eq!(c["ports"][1]["containerPort"], 9080);
    let annotations =
        &object(&docs, "Deployment", NAME)["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/port"], "9080");
    let policy = object(&docs, "NetworkPolicy", NAME);
    assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["port"], 9443);

    let gke = template(&["-f", &example("gke-private.yaml").display().to_string()]);
    let c = container(&gke);
    assert_eq!(c["ports"][0]["containerPort"], 10250);
    assert!(
        c["args"]
            .as_array()
            .expect("args")
            .iter()
            .any(|a| a == "--listen=0.0.0.0:10250"),
        "{c}"
    );
    assert!(object(&gke, "Deployment", NAME)["spec"]["template"]["spec"]["hostNetwork"].is_null());
}

#[test]
fn skipped_namespaces_are_skipped_by_the_webhooks_and_guarded_by_the_policy() {
    let docs = template(&["--set", "webhook.skippedNamespaces={kube-system,platform}"]);
    let want = serde_json::json!([NAMESPACE, "kube-system", "platform"]);
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let selector = &object(&docs, kind, NAME)["webhooks"][0]["namespaceSelector"];
        assert_eq!(selector["matchExpressions"][0]["values"], want, "{kind}");
    }
    let guard = object(
        &docs,
        "ValidatingAdmissionPolicy",
        "pipelinerollout-webhook-skipped-namespaces",
    );
    assert_eq!(
        guard["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"],
        want
    );
    let args = container(&docs)["args"].as_array().expect("args").clone();
    assert!(
        args.iter()
            .any(|a| a == "--unguarded-namespaces=kube-system,platform"),
        "{args:?}"
    );
}

#[test]
fn one_replica_gets_no_disruption_budget_that_would_block_node_drains() {
    let pdbs = |args: &[&str]| -> Vec<Value> {
        template(args)
            .into_iter()
            .filter(|d| d["kind"] == "PodDisruptionBudget")
            .collect()
    };
    let two = pdbs(&[]);
    assert_eq!(two.len(), 1, "the default two replicas keep one available");
    assert_eq!(two[0]["spec"]["minAvailable"], 1);
    assert!(
        pdbs(&["--set", "replicas=1"]).is_empty(),
        "minAvailable 1 over one replica forbids every eviction"
    );
}

#[test]
fn the_default_rendering_carries_helms_standard_labels() {
    for doc in template(&[]) {
        let labels = &doc["metadata"]["labels"];
        for key in [
            "app.kubernetes.io/instance",
            "app.kubernetes.io/managed-by",
            "helm.sh/chart",
        ] {
            assert!(
                labels[key].is_string(),
                "{} has no {key}: {labels}",
                helm_support::id(&doc)
            );
        }
    }
}

#[test]
fn a_generated_ca_is_new_on_every_rendering() {
    let ca = |docs: &[Value]| {
        object(docs, "Secret", "pipelinerollout-webhook-tls")["data"]["ca.crt"].clone()
    };
    let gen_ca = example("gen-ca.yaml").display().to_string();
    let (first, second) = (template(&["-f", &gen_ca]), template(&["-f", &gen_ca]));
    assert_ne!(
        ca(&first),
        ca(&second),
        "values.yaml says genCA rotates on every upgrade"
    );
}

#[test]
fn another_namespace_is_named_everywhere_the_install_refers_to_itself() {
    let run = helm(&[
        "template",
        NAME,
        CHART,
        "--namespace",
        "platform",
        "--set",
        "serviceMonitor.enabled=true,prometheusRule.enabled=true,dashboard.enabled=true",
    ]);
    assert!(run.success, "{}", run.stderr);
    let docs = helm_support::documents(&run.stdout, "helm template -n platform");
    for doc in &docs {
        let ns = &doc["metadata"]["namespace"];
        assert!(
            ns.is_null() || ns == "platform",
            "{}: namespace {ns}",
            helm_support::id(doc)
        );
    }
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let config = object(&docs, kind, NAME);
        let webhook = &config["webhooks"][0];
        assert_eq!(webhook["clientConfig"]["service"]["namespace"], "platform");
        assert_eq!(
            webhook["namespaceSelector"]["matchExpressions"][0]["values"][0],
            "platform"
        );
        assert_eq!(
            config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "platform/pipelinerollout-webhook-tls"
        );
    }
    let cert = object(&docs, "Certificate", "pipelinerollout-webhook-tls");
    assert_eq!(
        cert["spec"]["dnsNames"][0],
        "pipelinerollout-webhook.platform.svc"
    );
    let own = object(
        &docs,
        "ValidatingAdmissionPolicy",
        "pipelinerollout-webhook-own-account",
    );
    let condition = own["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap_or_default();
    assert!(
        condition.contains("'system:serviceaccount:platform:pipelinerollout-webhook'"),
        "{condition}"
    );
    for binding in docs.iter().filter(|d| d["kind"] == "ClusterRoleBinding") {
        assert_eq!(
            binding["subjects"][0]["namespace"],
            "platform",
            "{}",
            helm_support::id(binding)
        );
    }
    let monitor = object(&docs, "ServiceMonitor", NAME);
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"][0],
        "platform"
    );
    let rules =
        serde_json::to_string(&object(&docs, "PrometheusRule", NAME)["spec"]).expect("JSON");
    assert!(
        !rules.contains("namespace=\\\"pipelinerollout-webhook\\\""),
        "the alerts select the install's namespace: {rules}"
    );
    assert!(rules.contains("namespace=\\\"platform\\\""));
}

#[test]
fn notes_say_how_to_check_the_install_and_remove_the_webhook() {
    let notes = install_notes(&[]);
    for says in [
        "kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations pipelinerollout-webhook",
        "kubectl create --dry-run=server",
        "grep pauseGracePeriodSeconds",
        "kubectl delete validatingwebhookconfiguration/pipelinerollout-webhook mutatingwebhookconfiguration/pipelinerollout-webhook",
        "helm uninstall",
    ] {
        assert!(
            notes.contains(says),
            "NOTES.txt does not say {says:?}:\n{notes}"
        );
    }
}

#[test]
fn self_managed_certificates_name_the_releases_secret_configurations_and_account() {
    let release = "pw";
    let full = "pw-pipelinerollout-webhook";
    let run = helm(&[
        "template",
        release,
        CHART,
        "--namespace",
        "platform",
        "--set",
        "certificates.mode=selfManaged,certificates.selfManaged.certValidity=2weeks",
    ]);
    assert!(run.success, "{}", run.stderr);
    let docs = helm_support::documents(&run.stdout, "helm template pw -n platform (selfManaged)");
    let pod = &object(&docs, "Deployment", full)["spec"]["template"]["spec"];
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let secret = format!("{full}-tls");
    for wanted in [
        "--manage-certs".to_owned(),
        format!("--cert-secret={secret}"),
        format!("--cert-service={full}"),
        format!("--validating-configuration={full}"),
        format!("--mutating-configuration={full}"),
        "--cert-validity=2weeks".to_owned(),
    ] {
        assert!(args.contains(&wanted.as_str()), "{wanted} not in {args:?}");
    }
    assert!(
        !args.iter().any(|a| a.starts_with("--ca-validity")),
        "the default CA validity is the flag's default: {args:?}"
    );
    // Every flag the chart passes is one `serve` has.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"))
        .args(["serve", "--help"])
        .output()
        .expect("serve --help");
    let help = String::from_utf8_lossy(&help.stdout);
    for arg in &args {
        let flag = arg.split('=').next().unwrap_or_default();
        if flag.starts_with("--") {
            assert!(help.contains(flag), "serve has no flag {flag}");
        }
    }
    let volume = pod["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "tls"))
        .expect("the tls volume");
    assert_eq!(volume["secret"]["secretName"], secret.as_str());
    assert_eq!(
        volume["secret"]["optional"], true,
        "the Secret does not exist before the webhook's first start"
    );
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let config = object(&docs, kind, full);
        assert!(
            config["metadata"]["annotations"].is_null(),
            "{kind}: no cert-manager injection"
        );
        assert!(
            config["webhooks"][0]["clientConfig"]["caBundle"].is_null(),
            "{kind}: the webhook writes the caBundle, the chart must not"
        );
        assert_eq!(
            config["webhooks"][0]["clientConfig"]["service"]["name"],
            full
        );
    }
    assert!(
        !docs.iter().any(|d| d["kind"] == "Certificate"
            || d["kind"] == "Issuer"
            || (d["kind"] == "Secret" && d["metadata"]["name"] == secret.as_str())),
        "selfManaged renders no certificate objects"
    );
    let certs = format!("{full}-certs");
    let role = object(&docs, "Role", &certs);
    assert_eq!(role["metadata"]["namespace"], "platform");
    assert_eq!(role["rules"][0]["resourceNames"][0], secret.as_str());
    let cluster_role = object(&docs, "ClusterRole", &certs);
    assert_eq!(cluster_role["rules"][0]["resourceNames"][0], full);
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        let binding = object(&docs, kind, &certs);
        assert_eq!(binding["roleRef"]["name"], certs.as_str(), "{kind}");
        assert_eq!(binding["subjects"][0]["name"], full, "{kind}");
        assert_eq!(binding["subjects"][0]["namespace"], "platform", "{kind}");
    }
    let guard = format!("{full}-own-webhooks");
    let policy = object(&docs, "ValidatingAdmissionPolicy", &guard);
    assert_eq!(
        policy["spec"]["matchConstraints"]["resourceRules"][0]["resourceNames"][0],
        full
    );
    let condition = policy["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap_or_default();
    assert!(
        condition.contains(&format!("'system:serviceaccount:platform:{full}'")),
        "the policy must name the release's service account: {condition}"
    );
    assert_eq!(
        object(&docs, "ServiceAccount", full)["metadata"]["namespace"],
        "platform"
    );
    let binding = object(&docs, "ValidatingAdmissionPolicyBinding", &guard);
    assert_eq!(binding["spec"]["policyName"], guard.as_str());
}

#[test]
fn notes_of_a_self_managed_install_say_where_the_certificate_is_and_what_gitops_must_ignore() {
    let notes = install_notes(&["--set", "certificates.mode=selfManaged"]);
    for says in [
        "kubectl -n pipelinerollout-webhook get secret pipelinerollout-webhook-tls",
        "/webhooks/*/clientConfig/caBundle",
    ] {
        assert!(
            notes.contains(says),
            "NOTES.txt does not say {says:?}:\n{notes}"
        );
    }
    assert!(
        !notes.contains("get certificate"),
        "no cert-manager Certificate to check in selfManaged mode:\n{notes}"
    );
}
