//! The Helm chart (`charts/pipelinerollout-webhook`) against the kustomize
//! install, in the test process: `helm template` and `kubectl kustomize`
//! render, and the renderings are compared object by object, so the two
//! installs cannot drift apart. Also `helm lint --strict`, the values
//! schema's refusals, `check-policy` on every example's policy, and what
//! each value changes.
//!
//! Needs `helm` (3.8 or newer) and `kubectl` on the PATH; without them the
//! tests fail and say so.

mod helm_support;

use std::process::Command;

use base64::Engine as _;
use helm_support::{
    CHART, NAMESPACE, compare, example, examples, helm, kustomize, object, policy_text, root,
    template, try_template, write,
};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_pipelinerollout-webhook");
const OVERLAY: &str = "manifests/overlays/cert-manager";
const NAME: &str = "pipelinerollout-webhook";

/// The Namespace is the one object of the kustomize install the chart does
/// not render: Helm keeps its release record in the namespace, so the
/// namespace must exist before `helm install` (`--create-namespace`, or
/// `kubectl create namespace`; docs/install.md labels it for Pod Security).
const NOT_IN_CHART: [&str; 1] = ["Namespace/pipelinerollout-webhook"];

fn assert_same(what: &str, differences: &[String]) {
    assert!(
        differences.is_empty(),
        "{what}: the chart and the kustomize install differ ({} differences). Port each change \
         to the other side (the chart's templates are in {CHART}/templates):\n  {}",
        differences.len(),
        differences.join("\n  ")
    );
}

#[test]
fn default_values_render_the_cert_manager_overlay() {
    let k = kustomize(OVERLAY, &[]);
    let c = template(&[]);
    assert_same(
        &format!("helm template (default values) vs kubectl kustomize {OVERLAY}"),
        &compare(&k, &c, &NOT_IN_CHART),
    );
    assert!(
        k.iter().any(|d| helm_support::id(d) == NOT_IN_CHART[0]),
        "the kustomize install no longer renders {}: remove it from NOT_IN_CHART",
        NOT_IN_CHART[0]
    );
}

/// Each kustomize component and the values that do the same in the chart.
const EQUIVALENTS: [(&[&str], &[&str]); 5] = [
    (
        &["manifests/components/fail-open"],
        &["--set", "webhook.failurePolicy=Ignore"],
    ),
    (
        &["manifests/components/no-stale-force-sweeper"],
        &["--set", "sweeper.enabled=false"],
    ),
    (
        &["manifests/components/rollouts-in-skipped-namespaces"],
        &["--set", "webhook.allowRolloutsInSkippedNamespaces=true"],
    ),
    (
        &["manifests/components/force-reapply-bindings"],
        &["-f", "tests/fixtures/helm/force-reapply-bindings.yaml"],
    ),
    (
        &[
            "manifests/components/service-monitor",
            "manifests/components/prometheus-rule",
            "manifests/components/dashboard",
        ],
        &[
            "--set",
            "serviceMonitor.enabled=true,prometheusRule.enabled=true,dashboard.enabled=true",
        ],
    ),
];

#[test]
fn every_component_has_values_that_render_the_same() {
    let mut failures = Vec::new();
    for (components, values) in EQUIVALENTS {
        let differences = compare(
            &kustomize(OVERLAY, components),
            &template(values),
            &NOT_IN_CHART,
        );
        if !differences.is_empty() {
            failures.push(format!(
                "{components:?} vs helm template {values:?}:\n  {}",
                differences.join("\n  ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_dashboard_files_are_one_file() {
    let source =
        std::fs::read(root().join(CHART).join("files/dashboard.json")).expect("chart's dashboard");
    for copy in [
        "docs/dashboard.json",
        "manifests/components/dashboard/dashboard.json",
    ] {
        let text = std::fs::read(root().join(copy)).expect(copy);
        assert!(
            text == source,
            "{copy} differs from {CHART}/files/dashboard.json (the source): copy it over"
        );
    }
    let dashboard: Value = serde_json::from_slice(&source).expect("the dashboard is JSON");
    assert!(dashboard["panels"].as_array().is_some_and(|p| p.len() > 10));
}

#[test]
fn lint_strict_passes_with_default_and_example_values() {
    let mut runs = vec![helm(&["lint", "--strict", CHART])];
    for file in examples() {
        let file = file.display().to_string();
        runs.push(helm(&["lint", "--strict", CHART, "-f", &file]));
    }
    let failed: Vec<String> = runs
        .iter()
        .filter(|r| !r.success)
        .map(|r| format!("{}{}", r.stdout, r.stderr))
        .collect();
    assert!(
        failed.is_empty(),
        "helm lint --strict:\n{}",
        failed.join("\n")
    );
    assert!(examples().len() >= 5, "the chart's examples are missing");
}

#[test]
fn the_schema_refuses_wrong_values_with_helms_message() {
    let cases: [(&[&str], &str); 6] = [
        (&["--set-string", "replicas=2"], "/replicas"),
        (
            &["--set", "webhook.failurePolicy=Sometimes"],
            "/webhook/failurePolicy",
        ),
        (&["--set", "policy=enforce"], "/policy"),
        (
            &["--set", "webhook.timeoutSeconds=60"],
            "/webhook/timeoutSeconds",
        ),
        (&["--set", "image.digest=latest"], "/image/digest"),
        (&["--set", "replica=3"], "replica"),
    ];
    for (args, at) in cases {
        let run = try_template(args);
        assert!(
            !run.success,
            "helm template {args:?} was accepted:\n{}",
            run.stdout
        );
        assert!(
            run.stderr
                .contains("values don't meet the specifications of the schema")
                && run.stderr.contains(at),
            "helm template {args:?} should name {at}:\n{}",
            run.stderr
        );
    }
}

#[test]
fn impossible_combinations_fail_with_a_message_that_says_what_to_do() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["--set", "hostNetwork.enabled=true,webhook.port=10250"],
            "10250 is the kubelet's",
        ),
        (
            &[
                "--set",
                "certificates.mode=existingSecret,certificates.existingSecret.name=tls",
            ],
            "certificates.existingSecret.caBundle is required",
        ),
        (
            &[
                "--set",
                "forceReapply.rbac.enabled=false",
                "-f",
                "tests/fixtures/helm/force-reapply-bindings.yaml",
            ],
            "forceReapply.bindings need forceReapply.rbac.enabled",
        ),
        (
            &["--set", "webhook.port=8080"],
            "webhook.port and adminPort must differ",
        ),
    ];
    for (args, says) in cases {
        let run = try_template(args);
        assert!(!run.success, "helm template {args:?} was accepted");
        assert!(
            run.stderr.contains(says),
            "helm template {args:?}:\n{}",
            run.stderr
        );
    }
}

#[test]
fn every_example_policy_passes_check_policy() {
    let dir = tempfile::tempdir().expect("dir");
    let mut files = vec![None];
    files.extend(examples().into_iter().map(Some));
    for file in files {
        let args: Vec<String> = file
            .iter()
            .flat_map(|f| ["-f".to_owned(), f.display().to_string()])
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let policy = write(dir.path(), "policy.yaml", &policy_text(&template(&args)));
        let out = Command::new(BIN)
            .arg("check-policy")
            .arg(&policy)
            .output()
            .expect("run check-policy");
        assert!(
            out.status.success(),
            "the policy of {file:?} fails check-policy:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn container(docs: &[Value]) -> &Value {
    &object(docs, "Deployment", NAME)["spec"]["template"]["spec"]["containers"][0]
}

#[test]
fn the_image_tag_is_the_crate_version_unless_a_digest_pins_it() {
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
    assert_eq!(
        image(&[]).as_deref(),
        Some(concat!(
            "ghcr.io/example/pipelinerollout-webhook:",
            env!("CARGO_PKG_VERSION")
        ))
    );
    let digest = format!("sha256:{}", "ab".repeat(32));
    assert_eq!(
        image(&["--set", &format!("image.tag=9.9.9,image.digest={digest}")]),
        Some(format!("ghcr.io/example/pipelinerollout-webhook@{digest}"))
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
fn every_kustomize_component_has_chart_values() {
    let covered: Vec<&str> = EQUIVALENTS
        .iter()
        .flat_map(|(c, _)| c.iter().copied())
        .collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root().join("manifests/components")).expect("components") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        let dir = format!("manifests/components/{name}");
        if !covered.contains(&dir.as_str()) {
            missing.push(dir);
        }
    }
    assert!(
        missing.is_empty(),
        "these kustomize components have no chart values in EQUIVALENTS (tests/helm_chart.rs): \
         add values that render the same, and the pair there: {missing:?}"
    );
}

#[test]
fn notes_say_how_to_check_the_install_and_remove_the_webhook() {
    let run = helm(&[
        "install",
        NAME,
        CHART,
        "--namespace",
        NAMESPACE,
        "--dry-run=client",
    ]);
    assert!(run.success, "{}", run.stderr);
    let notes = run
        .stdout
        .split("NOTES:")
        .nth(1)
        .expect("helm prints the NOTES");
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
