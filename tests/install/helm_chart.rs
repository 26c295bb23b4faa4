//! The Helm chart (`charts/pipelinerollout-webhook`) against the kustomize
//! install, in the test process: `helm template` and `kubectl kustomize`
//! render, and the renderings are compared object by object, so the two
//! installs cannot drift apart (the base and the alert components are
//! generated from the chart by `cargo xtask generate`, so for them this
//! checks the generator; the overlays and the other components are
//! kustomize's own): the default values against the cert-manager
//! overlay, `certificates.mode=selfManaged` against the self-managed one,
//! and each component against its values. Also `helm lint --strict`, the values
//! schema's refusals and `check-policy` on every example's policy; what
//! each value changes is in tests/install/helm_values.rs.
//!
//! Needs `helm` (3.8 or newer) and `kubectl` on the PATH; without them the
//! tests fail and say so.

use crate::helm_support;

use std::process::Command;

use helm_support::{
    CHART, compare, examples, helm, kustomize, policy_text, root, template, try_template, write,
};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_pipelinerollout-webhook");
const OVERLAY: &str = "manifests/overlays/cert-manager";

/// The Namespace is the one object of the kustomize install the chart does
/// not render: Helm keeps its release record in the namespace, so the
/// namespace must exist before `helm install` (`--create-namespace`, or
/// `kubectl create namespace`; docs/install.md labels it for Pod Security).
const NOT_IN_CHART: [&str; 1] = ["Namespace/pipelinerollout-webhook"];

fn assert_same(what: &str, differences: &[String]) {
    assert!(
        differences.is_empty(),
        "{what}: the chart and the kustomize install differ ({} differences). manifests/base \
         and the alert components are rendered from the chart's templates ({CHART}/templates) \
         by `cargo xtask generate`: run it; port a change to an overlay or another component \
         by hand:\n  {}",
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

#[test]
fn self_managed_mode_renders_the_self_managed_overlay() {
    let overlay = "manifests/overlays/self-managed";
    let k = kustomize(overlay, &[]);
    let c = template(&["--set", "certificates.mode=selfManaged"]);
    assert_same(
        &format!("helm template (certificates.mode=selfManaged) vs kubectl kustomize {overlay}"),
        &compare(&k, &c, &NOT_IN_CHART),
    );
    // The comparison is only as good as what it compares: the mode's own
    // objects must be there, and no cert-manager object.
    for wanted in [
        "Role/pipelinerollout-webhook-certs",
        "ClusterRole/pipelinerollout-webhook-certs",
        "ValidatingAdmissionPolicy/pipelinerollout-webhook-own-webhooks",
        "ValidatingAdmissionPolicy/pipelinerollout-webhook-own-secrets",
    ] {
        assert!(
            c.iter().any(|d| helm_support::id(d) == wanted),
            "certificates.mode=selfManaged does not render {wanted}"
        );
    }
    assert!(
        !c.iter().any(|d| d["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("cert-manager.io/"))),
        "certificates.mode=selfManaged renders cert-manager objects"
    );
}

/// What `helm template` needs to render `mutatingAdmissionPolicy.enabled`:
/// it asks no cluster, and the chart renders the MutatingAdmissionPolicy
/// only for one that serves it (Kubernetes 1.36 or newer).
const MAP_API: [&str; 2] = [
    "--api-versions",
    "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
];

/// Each kustomize component and the values that do the same in the chart.
const EQUIVALENTS: [(&[&str], &[&str]); 7] = [
    (
        &["manifests/components/fail-open"],
        &["--set", "webhook.failurePolicy=Ignore"],
    ),
    (
        &[
            "manifests/components/fail-open",
            "manifests/components/validating-admission-policy",
        ],
        &[
            "--set",
            "webhook.failurePolicy=Ignore,validatingAdmissionPolicy.enabled=true",
        ],
    ),
    (
        &["manifests/components/mutating-admission-policy"],
        &[
            "--set",
            "mutatingAdmissionPolicy.enabled=true",
            MAP_API[0],
            MAP_API[1],
        ],
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

/// The components that go with the self-managed overlay, and the values
/// that do the same with `certificates.mode=selfManaged`.
const SELF_MANAGED_EQUIVALENTS: [(&[&str], &[&str]); 1] = [(
    &[
        "manifests/components/prometheus-rule",
        "manifests/components/prometheus-rule-self-managed",
    ],
    &[
        "--set",
        "certificates.mode=selfManaged,prometheusRule.enabled=true",
    ],
)];

#[test]
fn self_managed_components_have_values_that_render_the_same() {
    let mut failures = Vec::new();
    for (components, values) in SELF_MANAGED_EQUIVALENTS {
        let differences = compare(
            &kustomize("manifests/overlays/self-managed", components),
            &template(values),
            &NOT_IN_CHART,
        );
        if !differences.is_empty() {
            failures.push(format!(
                "{components:?} on manifests/overlays/self-managed vs helm template {values:?}:\n  {}",
                differences.join("\n  ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

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

/// The dashboard's source (its copies are written from it by `cargo xtask
/// generate`, whose `--check` CI runs) is JSON with its panels.
#[test]
fn the_dashboard_is_json_with_its_panels() {
    let source =
        std::fs::read(root().join(CHART).join("files/dashboard.json")).expect("chart's dashboard");
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
    let cases: [(&[&str], &str); 8] = [
        (&["--set-string", "replicas=2"], "/replicas"),
        (
            &["--set", "certificates.mode=selfSigned"],
            "/certificates/mode",
        ),
        (
            &["--set", "certificates.selfManaged.certValidity=soon"],
            "/certificates/selfManaged/certValidity",
        ),
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
    let cases: [(&[&str], &str); 8] = [
        (
            &[
                "--set",
                "certificates.mode=selfManaged,leaderElection.enabled=false",
            ],
            "turn leaderElection.enabled on (or run one replica)",
        ),
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
        // The exported policies are the default policy's.
        (
            &[
                "--set",
                "validatingAdmissionPolicy.enabled=true,policy.mode=warn",
            ],
            "Export yours (pipelinerollout-webhook export-vap --policy FILE)",
        ),
        (
            &[
                "--set",
                "mutatingAdmissionPolicy.enabled=true,policy.mode=warn",
                MAP_API[0],
                MAP_API[1],
            ],
            "Export yours (pipelinerollout-webhook export-vap --mutating --policy FILE)",
        ),
        // A cluster that does not serve it.
        (
            &["--set", "mutatingAdmissionPolicy.enabled=true"],
            "pass --api-versions admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
        ),
    ];
    // One replica without election runs the certificate controller alone.
    let single = try_template(&[
        "--set",
        "certificates.mode=selfManaged,leaderElection.enabled=false,replicas=1",
    ]);
    assert!(single.success, "{}", single.stderr);
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

#[test]
fn every_kustomize_component_has_chart_values() {
    let covered: Vec<&str> = EQUIVALENTS
        .iter()
        .chain(SELF_MANAGED_EQUIVALENTS.iter())
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
        "these kustomize components have no chart values in EQUIVALENTS (tests/install/helm_chart.rs): \
         add values that render the same, and the pair there: {missing:?}"
    );
}
