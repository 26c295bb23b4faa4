//! The binary's commands, run as a user runs them.

use crate::https_support;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use https_support::fixtures_dir;
use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"))
}

fn review(webhook: &str, args: &[&str]) -> (i32, Value, String) {
    let out = bin()
        .args(["review", "--webhook", webhook])
        .args(args)
        .output()
        .expect("run review");
    let stdout: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fixture_path(name: &str) -> String {
    fixtures_dir().join(name).display().to_string()
}

fn fixture_json(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(fixtures_dir().join(name)).expect("fixture"))
        .expect("json")
}

#[test]
fn version_names_the_version_and_the_commit_the_binary_was_built_from() {
    let out = bin().arg("--version").output().expect("run --version");
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8(out.stdout).expect("UTF-8");
    let prefix = concat!(
        "pipelinerollout-webhook ",
        env!("CARGO_PKG_VERSION"),
        " (commit "
    );
    let commit = printed
        .trim_end()
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("--version printed {printed:?}"));
    // The commit the build was told (PIPELINEROLLOUT_WEBHOOK_COMMIT, as the
    // Dockerfile does), else HEAD of this checkout (cargo builds the binary
    // anew when HEAD moves; build.rs), else, with no git, "unknown".
    let head = Command::new("git")
        .args(["rev-parse", "--verify", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    let expected = std::env::var("PIPELINEROLLOUT_WEBHOOK_COMMIT")
        .ok()
        .filter(|given| !given.trim().is_empty())
        .map(|given| given.trim().to_owned())
        .or(head)
        .unwrap_or_else(|| "unknown".to_owned());
    assert_eq!(commit, expected, "--version printed {printed:?}");
}

#[test]
fn review_exit_codes() {
    let file = "01-create-kubectl-apply-validate.json";
    let (code, out, _) = review("validate", &[&fixture_path(file)]);
    assert_eq!(code, 0);
    assert_eq!(out["response"]["allowed"], true);
    assert_eq!(out["response"]["uid"], fixture_json(file)["request"]["uid"]);

    let (code, out, err) = review(
        "validate",
        &[&fixture_path(
            "07-allow-data-loss-true-kubectl-annotate-alice-validate.json",
        )],
    );
    assert_eq!(code, 1);
    assert_eq!(out["response"]["allowed"], false);
    assert!(err.contains("alice"), "{err}");

    let (code, out, _) = review(
        "mutate",
        &[&fixture_path(
            "11-create-no-lifecycle-kubectl-create-mutate.json",
        )],
    );
    assert_eq!(code, 0);
    assert!(
        out["response"]["patch"].is_string(),
        "the patch is base64 text"
    );

    let dir = tempfile::tempdir().expect("dir");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"kind\": \"Pod\"}").expect("write");
    let (code, _, err) = review("validate", &[bad.to_str().expect("path")]);
    assert_eq!(code, 2);
    assert!(err.contains("not an AdmissionReview"), "{err}");
    let prose = dir.path().join("notes.txt");
    std::fs::write(&prose, "just some words\n").expect("write");
    let (code, _, err) = review("validate", &[prose.to_str().expect("path")]);
    assert_eq!(code, 2);
    assert!(
        err.contains("is not an AdmissionReview: expected a JSON or YAML object"),
        "{err}"
    );
    let (code, _, err) = review("validate", &["/does/not/exist.json"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read"), "{err}");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "nope: 1\n").expect("write");
    let (code, _, err) = review(
        "validate",
        &[
            "--policy",
            policy.to_str().expect("path"),
            &fixture_path(file),
        ],
    );
    assert_eq!(code, 2);
    assert!(err.contains("nope"), "{err}");
}

/// A CREATE with a 2h drain timeout, as YAML.
const YAML_REVIEW: &str = r#"
apiVersion: admission.k8s.io/v1
kind: AdmissionReview
request:
  uid: 0d4a8e0c-7a51-4c62-9d4e-yaml00000001
  kind: {group: numaplane.numaproj.io, version: v1alpha1, kind: GuardedObject}
  resource: {group: numaplane.numaproj.io, version: v1alpha1, resource: pipelinerollouts}
  namespace: team-a
  name: my-pipeline
  operation: CREATE
  userInfo:
    username: alice
    groups: [devs, system:authenticated]
  object:
    apiVersion: numaplane.numaproj.io/v1alpha1
    kind: GuardedObject
    metadata: {name: my-pipeline, namespace: team-a}
    spec:
      pipeline:
        spec:
          lifecycle:
            pauseGracePeriodSeconds: 7200
  oldObject: null
  dryRun: false
"#;

#[test]
fn review_reads_yaml_from_stdin_and_a_policy_file() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "drainTimeout:\n  max: 2h\n").expect("write");
    for (policy_args, want_code) in [
        (vec![], 1),
        (vec!["--policy", policy.to_str().expect("path")], 0),
    ] {
        let mut child = bin()
            .args(["review", "--webhook", "validate"])
            .args(&policy_args)
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(YAML_REVIEW.as_bytes())
            .expect("write stdin");
        let out = child.wait_with_output().expect("wait");
        assert_eq!(
            out.status.code(),
            Some(want_code),
            "{policy_args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let answer: Value = serde_json::from_slice(&out.stdout).expect("json answer");
        assert_eq!(
            answer["response"]["uid"],
            "0d4a8e0c-7a51-4c62-9d4e-yaml00000001"
        );
    }
}

#[test]
fn check_policy_prints_the_effective_policy_or_the_error() {
    let dir = tempfile::tempdir().expect("dir");
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "mode: warn\ndrainTimeout:\n  max: 2h\n").expect("write");
    let out = bin().arg("check-policy").arg(&good).output().expect("run");
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("mode: warn"), "{text}");
    assert!(text.contains("max: 2h"), "{text}");
    assert!(
        text.contains("min: 30s"),
        "keys left out show their built-in values: {text}"
    );

    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "drainTimeout:\n  min: 2h\n  max: 1h\n").expect("write");
    let out = bin().arg("check-policy").arg(&bad).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml"), "names the file: {err}");
    assert!(
        err.contains("drainTimeout.min (2h) is above drainTimeout.max (1h)"),
        "{err}"
    );

    let out = bin()
        .arg("check-policy")
        .arg(dir.path().join("missing.yaml"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn serve_refuses_a_bad_policy_at_start_up() {
    let dir = tempfile::tempdir().expect("dir");
    let bad = dir.path().join("policy.yaml");
    std::fs::write(&bad, "drainTimeout:\n  allowNoTimeout: false\n").expect("write");
    let out = bin()
        .args(["--listen", "127.0.0.1:0", "--policy"])
        .arg(&bad)
        .arg("--dev-certs-dir")
        .arg(dir.path().join("certs"))
        .output()
        .expect("run");
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("allowNoTimeout is false"), "{err}");
}

#[test]
fn serve_refuses_lease_settings_that_cannot_work() {
    let dir = tempfile::tempdir().expect("dir");
    let cases = [
        (
            vec!["--leader-elect", "--leader-elect-renew-deadline=15s"],
            "--leader-elect-renew-deadline (15s) must be shorter than --leader-elect-lease-duration (15s)",
        ),
        (
            vec![
                "--leader-elect=true",
                "--leader-elect-lease-duration=2500ms",
            ],
            "--leader-elect-lease-duration must be a whole number of seconds",
        ),
        (
            vec!["--leader-elect", "--leader-elect-lease-name=Webhook"],
            "is not a valid Lease name",
        ),
    ];
    for (flags, says) in cases {
        let out = bin()
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
            ])
            .args(&flags)
            .arg("--dev-certs-dir")
            .arg(dir.path().join("certs"))
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1), "{flags:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{flags:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn serve_with_no_command_generates_and_reuses_dev_certificates() {
    let dir = tempfile::tempdir().expect("dir");
    let certs = dir.path().join("certs");
    let mut first_ca = String::new();
    for round in 0..2 {
        let mut child = bin()
            .args([
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
                "--shutdown-delay",
                "0s",
                "--dev-certs-dir",
            ])
            .arg(&certs)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn serve");
        // The log is read as it comes: the line that reports the bound
        // addresses says the server listens; the whole text is checked
        // after the stop.
        let stderr = child.stderr.take().expect("stderr piped");
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
                let Ok(line) = line else { break };
                if let Some(bound) = envtest::Bound::from_log_line(&line) {
                    let _ = bound_tx.send(bound);
                }
                text.push_str(&line);
                text.push('\n');
            }
            text
        });
        let bound = bound_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("serve reports the addresses it bound");
        std::net::TcpStream::connect(bound.webhook).expect("the webhook listens where it said");
        let ca = std::fs::read_to_string(certs.join("ca.crt")).expect("ca.crt written");
        assert!(certs.join("tls.crt").exists() && certs.join("tls.key").exists());
        if round == 0 {
            first_ca = ca;
        } else {
            assert_eq!(ca, first_ca, "certificates are reused, not regenerated");
        }
        // SIGTERM, not SIGKILL: a graceful stop writes every log line, and
        // the one checked below may come a moment after the port listens.
        let stopped = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if !stopped {
            let _ = child.kill();
        }
        child.wait().expect("wait");
        let err = reader.join().expect("the log reader");
        assert!(err.contains("curl --cacert"), "logs how to try it: {err}");
    }
}

#[test]
fn gen_certs_renews_under_the_same_ca() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("certs");
    let run = |extra: &[&str]| {
        bin()
            .args([
                "gen-certs",
                "--service",
                "webhook",
                "--namespace",
                "team-x",
                "--out",
            ])
            .arg(&out)
            .args(extra)
            .output()
            .expect("run gen-certs")
    };
    let first = run(&[]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let read = |name: &str| std::fs::read_to_string(out.join(name)).expect(name);
    let (ca, cert, patch) = (
        read("ca.crt"),
        read("tls.crt"),
        read("ca-bundle.patch.yaml"),
    );
    assert!(
        patch.contains("path: /webhooks/0/clientConfig/caBundle"),
        "{patch}"
    );

    let again = run(&[]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "refuses to overwrite without --force"
    );
    assert_eq!(read("tls.crt"), cert);

    let renewed = run(&["--force"]);
    assert_eq!(renewed.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&renewed.stdout).contains("caBundle unchanged"));
    assert_eq!(read("ca.crt"), ca, "same CA");
    assert_eq!(read("ca-bundle.patch.yaml"), patch, "same caBundle");
    assert_ne!(read("tls.crt"), cert, "new serving certificate");
    // The renewed certificate chains to the CA and names the Service.
    let files = pipelinerollout_webhook::server::tls::TlsFiles {
        cert: out.join("tls.crt"),
        key: out.join("tls.key"),
        client_ca: None,
    };
    assert!(pipelinerollout_webhook::server::tls::load(&files).is_ok());
    let der = https_support::cert_der(&out.join("tls.crt"));
    let end_entity = rustls_pki_types::CertificateDer::from(der);
    let ca_der =
        rustls_pki_types::CertificateDer::from(https_support::cert_der(&out.join("ca.crt")));
    let anchor = webpki_anchor(&ca_der);
    let cert = webpki::EndEntityCert::try_from(&end_entity).expect("parse");
    let now = rustls_pki_types::UnixTime::now();
    cert.verify_for_usage(
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .all,
        &[anchor],
        &[],
        now,
        webpki::KeyUsage::server_auth(),
        None,
        None,
    )
    .expect("the renewed certificate chains to the kept CA");
    let name = rustls_pki_types::ServerName::try_from("webhook.team-x.svc").expect("name");
    cert.verify_is_valid_for_subject_name(&name)
        .expect("names the Service");

    let rotated = run(&["--force", "--new-ca"]);
    assert_eq!(rotated.status.code(), Some(0));
    assert_ne!(read("ca.crt"), ca, "--new-ca replaces the CA");
}

fn webpki_anchor(
    ca: &rustls_pki_types::CertificateDer<'_>,
) -> rustls_pki_types::TrustAnchor<'static> {
    webpki::anchor_from_trusted_cert(ca)
        .expect("anchor")
        .to_owned()
}

#[test]
fn serve_refuses_managed_certificates_it_cannot_keep() {
    let dir = tempfile::tempdir().expect("dir");
    let tls = |file: &str| dir.path().join("tls").join(file).display().to_string();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--cert-validity=1s"],
            "--cert-validity 1s is too short: at least 3s",
        ),
        (
            &["--cert-validity=2weeks", "--ca-validity=1week"],
            "--cert-validity must be shorter than --ca-validity",
        ),
        (
            &["--kubeconfig=/nonexistent/kubeconfig"],
            "--manage-certs needs the API server, but cannot read kubeconfig /nonexistent/kubeconfig",
        ),
    ];
    for (flags, says) in cases {
        let out = bin()
            .args(["serve", "--manage-certs", "--listen", "127.0.0.1:0"])
            .args(["--admin-listen", "127.0.0.1:0"])
            .args(["--tls-cert", &tls("tls.crt"), "--tls-key", &tls("tls.key")])
            .args(flags)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {err}");
        assert!(err.contains(says), "{flags:?}: {err}");
    }
}

#[test]
fn review_judges_a_child_and_the_other_rollouts() {
    let dir = tempfile::tempdir().expect("dir");
    let review_of = |resource: (&str, &str), user: &str, old: Value, new: Value| {
        let body = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "7d3c4f2a-0000-4000-8000-000000000018",
                "resource": {"group": resource.0, "version": "v1alpha1", "resource": resource.1},
                "namespace": "team-a", "name": "demo-1", "operation": "UPDATE",
                "userInfo": {"username": user, "groups": ["system:authenticated"]},
                "object": new, "oldObject": old,
            }
        });
        let path = dir.path().join(format!("{}-{user}.json", resource.1));
        std::fs::write(&path, body.to_string()).expect("write");
        review("validate", &[path.to_str().expect("path")])
    };
    let labels =
        |labels: Value| serde_json::json!({"metadata": {"name": "demo-1", "labels": labels}});
    let recyclable = serde_json::json!({"numaplane.numaproj.io/upgrade-state": "recyclable"});
    let mut marked = labels(recyclable.clone());
    marked["metadata"]["annotations"] =
        serde_json::json!({"numaplane.numaproj.io/marked-for-deletion": "true"});
    let pipelines = ("numaflow.numaproj.io", "pipelines");
    let (code, out, err) = review_of(
        pipelines,
        "alice",
        labels(recyclable.clone()),
        marked.clone(),
    );
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("without draining"), "{err}");
    assert_eq!(
        out["response"]["auditAnnotations"]["delete-undrained"],
        "denied by rule 14: user \"alice\""
    );
    let argocd = "system:serviceaccount:argocd:argocd-server";
    let (code, out, _) = review_of(pipelines, argocd, labels(recyclable), marked);
    assert_eq!(code, 0, "{out}");
    let template = |labels: Value| {
        serde_json::json!({"metadata": {"name": "demo"},
        "spec": {"monoVertex": {"metadata": {"labels": labels}}}})
    };
    let (code, out, err) = review_of(
        ("numaplane.numaproj.io", "monovertexrollouts"),
        "alice",
        template(serde_json::json!({})),
        template(serde_json::json!({"numaplane.numaproj.io/force-promote": "true"})),
    );
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("spec.monoVertex.metadata.labels"), "{err}");
}
