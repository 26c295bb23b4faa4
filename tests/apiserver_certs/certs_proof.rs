//! The three-minute proof of `serve --manage-certs` through a real
//! kube-apiserver (the harness of tests/apiserver_certs/certs.rs: the overlay
//! manifests/overlays/self-managed, an `ExternalName` Service naming a
//! replica's loopback address, `envtest::SecretMirror` playing the
//! kubelet): serving certificates of 30 s and CAs of 75 s rotate under a
//! write loop for three minutes on two replicas under leader election,
//! while the serving Secret is deleted, then edited to a CA the webhook
//! did not issue, then the CA Secret is deleted. No write may fail, no
//! healthy replica's `/readyz` may answer 503, and the foreign CA may
//! never reach a caBundle.
//!
//! It takes `one_at_a_time`, as every test of its binary does, so that no
//! other certificate test runs beside it. Without the envtest binaries it
//! prints a skip line, and fails in CI.

use crate::apiserver_certs_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use apiserver_certs_support::load::{bundle_ders, ders, poll_readyz, timed_writes};
use apiserver_certs_support::{
    CA_SECRET, LEADER_ELECT, NAMESPACE, Replica, SECRET, SERVICE, SelfManaged, metric,
    one_at_a_time, secret_data, within,
};
use base64::Engine as _;
use envtest::{Assets, User, require};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::json;

/// How long the write loop runs.
const LOAD: Duration = Duration::from_secs(180);
/// How often the Service switches to the other replica.
const SWITCH_EVERY: Duration = Duration::from_secs(20);
/// The kubelet stand-ins' lags: kubelet-like (not instant), both well
/// inside the propagation delay.
const LAGS: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(3)];

/// Lifetimes and the propagation delay. `serve` keeps a serving
/// certificate only if it lives at least 2 × (p + 3 s) (renewed at the
/// latest p + 3 s before it expires), and a CA only if it lives at least
/// 2 × (3p + 6 s) (a rotation takes three delays and two 3 s margins):
/// with 30 s and 75 s that is p ≤ 12 s and p ≤ 10.5 s, so 10 s, the
/// largest whole second (certificate times are whole seconds). CAs then
/// rotate from 39 s of their life on, serving certificates renew at 17 s.
const FLAGS: [&str; 8] = [
    "--cert-validity=30s",
    "--ca-validity=75s",
    "--cert-propagation=10s",
    LEADER_ELECT,
    // The Deployment passes it as POD_NAMESPACE.
    "--leader-elect-namespace=pipelinerollout-webhook",
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
];

/// What the test does to the Secrets, and from when on (since the load
/// started); each waits for the one before to be repaired.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The serving Secret deleted.
    DeleteServing,
    /// The serving Secret edited to a foreign CA and a leaf it signed.
    ForeignServing,
    /// The CA Secret deleted.
    DeleteCa,
}

const FAULTS: [(Duration, Fault); 3] = [
    (Duration::from_secs(40), Fault::DeleteServing),
    (Duration::from_secs(90), Fault::ForeignServing),
    (Duration::from_secs(140), Fault::DeleteCa),
];

/// The last `lines` lines of a replica's log, without its admission
/// decisions (the writes would fill them).
fn log_tail(replica: &Replica, lines: usize) -> String {
    let all = replica.webhook.log_tail(usize::MAX);
    let kept: Vec<&str> = all
        .lines()
        .filter(|l| !l.contains("server::webhook: decision"))
        .collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}

/// Every line a replica's certificate controller and readiness logged.
fn certificate_log(replica: &Replica) -> String {
    let all = replica.webhook.log_tail(usize::MAX);
    let kept: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("background::certs"))
        .collect();
    format!("replica at {}:\n{}", replica.ip, kept.join("\n"))
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A CA the webhook did not issue, named as the webhook names its own,
/// and a serving certificate it signed for the Service's names: PEM of
/// the CA, the leaf and the leaf's key.
fn foreign_ca() -> Result<(String, String, String), rcgen::Error> {
    let server_name = format!("{SERVICE}.{NAMESPACE}.svc");
    let now = time::OffsetDateTime::now_utc();
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name.push(
        DnType::CommonName,
        format!("pipelinerollout-webhook {server_name} CA"),
    );
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    (ca.not_before, ca.not_after) = (
        now - time::Duration::hours(1),
        now + time::Duration::hours(1),
    );
    let ca_pem = ca.self_signed(&ca_key)?.pem();
    let issuer = Issuer::new(ca, ca_key);
    let names = vec![
        SERVICE.to_owned(),
        format!("{SERVICE}.{NAMESPACE}"),
        server_name.clone(),
        format!("{server_name}.cluster.local"),
    ];
    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(names)?;
    leaf.distinguished_name
        .push(DnType::CommonName, server_name);
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    (leaf.not_before, leaf.not_after) = (
        now - time::Duration::hours(1),
        now + time::Duration::hours(1),
    );
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok((ca_pem, cert.pem(), key.serialize_pem()))
}

#[test]
fn three_minutes_of_rotations_with_both_secrets_deleted_in_turn_and_a_foreign_ca_fail_no_write() {
    let _serial = one_at_a_time();
    let Some(assets) = require("certs proof", Assets::find()) else {
        return;
    };
    let started = Instant::now();
    let env = SelfManaged::start_with_lags(&assets, &["127.0.0.1", "127.0.0.2"], &FLAGS, &LAGS)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "two replicas ready {:?} after the cluster started",
        started.elapsed()
    );
    let (foreign_ca_pem, foreign_cert, foreign_key) = foreign_ca().expect("a foreign CA");
    let foreign = ders(&foreign_ca_pem);
    let admin = env.cluster.kubectl(User::Admin);
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let apply = |fault: Fault| -> Result<(), String> {
        let out = match fault {
            Fault::DeleteServing => admin.run(&["delete", "secret", "-n", NAMESPACE, SECRET]),
            Fault::DeleteCa => admin.run(&["delete", "secret", "-n", NAMESPACE, CA_SECRET]),
            Fault::ForeignServing => admin.merge_patch(
                "secret",
                NAMESPACE,
                SECRET,
                &json!({"data": {
                    "ca.crt": b64(&foreign_ca_pem),
                    "tls.crt": b64(&foreign_cert),
                    "tls.key": b64(&foreign_key),
                }}),
                &[],
            ),
        };
        if out.success {
            Ok(())
        } else {
            Err(format!("{fault:?}: {out}"))
        }
    };

    let ca_secret = || admin.get("secret", NAMESPACE, CA_SECRET);
    // A foreign serving Secret is a trap only while no CA rotation is
    // under way: then the only CA the webhook may keep is the CA Secret's.
    let ready_for = |fault: Fault| match fault {
        Fault::ForeignServing => ca_secret().is_some_and(|s| {
            ["ca-next.crt", "ca-previous.crt"]
                .iter()
                .all(|key| s["data"].get(key).is_none())
        }),
        Fault::DeleteServing | Fault::DeleteCa => true,
    };
    let repaired = |fault: Fault| match fault {
        Fault::DeleteServing => admin.get("secret", NAMESPACE, SECRET).is_some(),
        Fault::ForeignServing => admin
            .get("secret", NAMESPACE, SECRET)
            .is_some_and(|s| s["data"]["ca.crt"].as_str() != Some(b64(&foreign_ca_pem).as_str())),
        Fault::DeleteCa => ca_secret().is_some(),
    };
    let stop = AtomicBool::new(false);
    let (writes, (samples, not_ready), (bundle_polls, foreign_seen), timeline) =
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| timed_writes(&env.cluster, &stop, "proof"));
            let readyz =
                scope.spawn(|| poll_readyz(&env.replicas, &stop, Duration::from_millis(250)));
            // Every second: which caBundles hold the foreign CA, and when.
            let bundles = scope.spawn(|| {
                let start = Instant::now();
                let (mut polls, mut seen) = (0, Vec::new());
                while !stop.load(Ordering::SeqCst) {
                    polls += 1;
                    let all = bundle_ders(&env.cluster);
                    let holding = all.iter().filter(|b| b.contains(&foreign[0])).count();
                    if holding > 0 {
                        seen.push(format!(
                            "at {:?}: {holding} of {} caBundles hold the foreign CA",
                            start.elapsed(),
                            all.len()
                        ));
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
                (polls, seen)
            });
            let load_start = Instant::now();
            // Whatever happens here (a panic included), the other threads stop.
            let _stop_them = StopOnDrop(&stop);
            let outcome = (|| -> Result<Vec<String>, String> {
                let mut timeline = Vec::new();
                let (mut target, mut switches, mut faults) = (0, 1, FAULTS.iter().peekable());
                let mut repairing: Option<(Fault, Instant)> = None;
                while load_start.elapsed() < LOAD {
                    std::thread::sleep(Duration::from_millis(250));
                    let at = load_start.elapsed();
                    if at >= SWITCH_EVERY * switches {
                        switches += 1;
                        target = 1 - target;
                        env.route_to(target)?;
                    }
                    if let Some((fault, since)) = repairing {
                        if repaired(fault) {
                            timeline
                                .push(format!("{fault:?} repaired {:?} later", since.elapsed()));
                            repairing = None;
                        } else if since.elapsed() > Duration::from_secs(15) {
                            return Err(format!("{fault:?} not repaired within 15 s"));
                        }
                        continue;
                    }
                    if let Some(&&(when, fault)) = faults.peek()
                        && at >= when
                        && ready_for(fault)
                    {
                        faults.next();
                        apply(fault)?;
                        timeline.push(format!("{fault:?} at {at:?}"));
                        repairing = Some((fault, Instant::now()));
                    }
                }
                if let Some((fault, _)) = faults.peek() {
                    return Err(format!("the load ended before {fault:?}"));
                }
                Ok(timeline)
            })();
            stop.store(true, Ordering::SeqCst);
            let joined = (
                writer.join().expect("the writer"),
                readyz.join().expect("the readyz poller"),
                bundles.join().expect("the caBundle poller"),
            );
            let timeline = outcome.unwrap_or_else(|why| panic!("{why}"));
            (joined.0, joined.1, joined.2, timeline)
        });
    let logs = || {
        env.replicas
            .iter()
            .map(|r| format!("replica at {}:\n{}", r.ip, log_tail(r, 40)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    eprintln!("{}", timeline.join("; "));

    assert!(
        writes.failures.is_empty(),
        "{} of {} writes failed:\n{}\n{}",
        writes.failures.len(),
        writes.count,
        writes.failures.join("\n"),
        logs()
    );
    assert!(
        writes.count >= 60,
        "only {} writes in {LOAD:?}",
        writes.count
    );
    let printed: Vec<String> = not_ready
        .iter()
        .map(|n| {
            format!(
                "{:?} replica {}: {:?} {}",
                n.at, n.replica, n.status, n.body
            )
        })
        .collect();
    assert!(
        not_ready.iter().all(|n| n.status != Some(503)),
        "/readyz answered 503 on a healthy replica:\n{}\n{}",
        printed.join("\n"),
        logs()
    );
    assert!(
        foreign_seen.is_empty(),
        "the foreign CA reached a caBundle:\n{}\n{}",
        foreign_seen.join("\n"),
        env.replicas
            .iter()
            .map(certificate_log)
            .collect::<Vec<_>>()
            .join("\n")
    );

    // The counters of both replicas: leadership may have moved.
    let total = |prefix: &str| env.replicas.iter().map(|r| metric(r, prefix)).sum::<f64>();
    let step = |step: &str| {
        total(&format!(
            "pipelinerollout_webhook_certs_ca_rotations_total{{step=\"{step}\"}}"
        ))
    };
    // A CA leaving the caBundle after a replaced CA Secret counts as
    // completed too: two rotations are two of each step.
    let (started, switched, rotations) = (step("started"), step("switched"), step("completed"));
    let renewals =
        total("pipelinerollout_webhook_certs_issued_total{kind=\"serving\",reason=\"rotation\"}");
    let errors = total("pipelinerollout_webhook_certs_errors_total");
    assert!(
        started >= 2.0 && switched >= 2.0 && rotations >= 2.0,
        "CA rotations started, switched, completed: {started}, {switched}, {rotations}\n{}",
        logs()
    );
    assert!(renewals >= 4.0, "serving renewals: {renewals}\n{}", logs());
    assert!(
        errors < 20.0,
        "certificate controller errors: {errors}\n{}",
        logs()
    );

    // Once no rotation is under way, every caBundle is exactly the CA
    // that signed the serving certificate.
    let settled = within(Duration::from_secs(45), || {
        let ca = ders(&secret_data(&env.cluster)["ca.crt"]);
        let bundles = bundle_ders(&env.cluster);
        !bundles.is_empty() && bundles.iter().all(|b| *b == ca)
    });
    assert!(
        settled.is_some(),
        "the caBundles never held just the serving Secret's ca.crt:\n{}",
        logs()
    );
    eprintln!(
        "{} writes, none failed, the slowest {:?}; {rotations} CA rotations completed ({started} started, {switched} switched), {renewals} serving renewals, {errors} controller errors; {samples} /readyz samples, {} not 200 (none 503){}; {bundle_polls} caBundle polls, the foreign CA in none",
        writes.count,
        writes.slowest,
        not_ready.len(),
        if printed.is_empty() {
            String::new()
        } else {
            format!(": {}", printed.join("; "))
        },
    );
}
