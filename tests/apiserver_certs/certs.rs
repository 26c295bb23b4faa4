//! Certificates the webhook manages itself (`serve --manage-certs`, the
//! overlay manifests/overlays/self-managed), through a real kube-apiserver:
//! the webhooks call a Service (an `ExternalName` Service naming the
//! replica's loopback address), so the API server checks the served
//! certificate for `pipelinerollout-webhook.pipelinerollout-webhook.svc`
//! against the caBundle the webhook wrote, as in a cluster. The harness
//! plays the kubelet (`envtest::SecretMirror`): it copies the Secret into
//! each replica's certificate directory whenever it changes. The webhook
//! acts as its own service account with the overlay's RBAC.
//!
//! Each test has a cluster of its own (they change the certificates), and
//! they run one at a time (`ONE_AT_A_TIME`): their certificates live
//! seconds, and several clusters at once on a small machine would stretch
//! every step. Without the binaries these tests print a skip line each, and
//! fail in CI.

use crate::apiserver_certs_support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use apiserver_certs_support::load::{openssl_during_rotations, write_in_a_loop};
use apiserver_certs_support::{
    CA_SECRET, CONFIGURATION, LEADER_ELECT, NAMESPACE, Proxy, SECRET, SERVICE, SelfManaged,
    ca_bundles, ca_secret_data, metric, one_at_a_time, pem_blocks, ready, secret_data,
    webhook_bundles, within,
};
use base64::Engine as _;
use envtest::{Assets, Cluster, User, require};
use serde_json::json;

#[test]
fn a_fresh_install_becomes_ready_and_no_write_fails_through_serving_and_ca_rotations_on_two_replicas()
 {
    let _serial = one_at_a_time();
    let Some(assets) = require("certs rotation", Assets::find()) else {
        return;
    };
    // Serving certificates live 10 s (renewed at 5 s, propagation + 3 s
    // before they end), CAs 30 s (rotated from 18 s on), each CA rotation
    // step waits 2 s. Both replicas run
    // under leader election: the first to start holds the Lease and runs
    // the certificate controller.
    let flags = [
        "--cert-validity=10s",
        "--ca-validity=30s",
        "--cert-propagation=2s",
        LEADER_ELECT,
        // The Deployment passes it as POD_NAMESPACE.
        "--leader-elect-namespace=pipelinerollout-webhook",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
    ];
    let started = Instant::now();
    let env = SelfManaged::start(&assets, &["127.0.0.1", "127.0.0.2"], &flags)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "a fresh install with two replicas was ready {:?} after the cluster started",
        started.elapsed()
    );

    // No human step: the caBundle the webhook wrote is its CA, and a write
    // goes through the webhooks.
    let first_ca = secret_data(&env.cluster)["ca.crt"].clone();
    for bundle in ca_bundles(&env.cluster) {
        assert_eq!(
            pem_blocks(&bundle),
            pem_blocks(&first_ca),
            "caBundle is the CA"
        );
    }
    let out = env.write("fresh");
    assert!(out.success, "a write through the webhooks: {out}");

    // Writes in a loop for 40 s while the certificates rotate, the Service
    // alternating between the replicas every 4 s.
    // Meanwhile OpenSSL verifies the serving certificate the webhook wrote
    // against the two-CA caBundle of each rotation, as a probe or mesh
    // that verifies with OpenSSL would: the two CAs share a subject, so it
    // needs the certificate's Authority Key Identifier to pick the CA.
    let stop = AtomicBool::new(false);
    let openssl_dir = tempfile::tempdir().expect("a directory");
    let (writes, failures, openssl) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| write_in_a_loop(&env.cluster, &stop, "load"));
        let verifier =
            scope.spawn(|| openssl_during_rotations(&env.cluster, &stop, openssl_dir.path()));
        let load_start = Instant::now();
        let mut target = 0;
        while load_start.elapsed() < Duration::from_secs(40) {
            std::thread::sleep(Duration::from_secs(4));
            target = 1 - target;
            if let Err(why) = env.route_to(target) {
                stop.store(true, Ordering::SeqCst);
                panic!("{why}");
            }
        }
        stop.store(true, Ordering::SeqCst);
        let (writes, failures) = writer.join().expect("the writer");
        (writes, failures, verifier.join().expect("the verifier"))
    });
    let (leader, follower) = (&env.replicas[0], &env.replicas[1]);
    assert!(
        failures.is_empty(),
        "{} of {writes} writes failed during the rotations:\n{}\nleader log:\n{}\nfollower log:\n{}",
        failures.len(),
        failures.join("\n"),
        leader.webhook.log_tail(30),
        follower.webhook.log_tail(30)
    );
    assert!(writes >= 20, "only {writes} writes in 40 s");
    eprintln!("{writes} writes in 40 s, none failed");
    eprintln!(
        "openssl verify -CAfile <two-CA caBundle>: {} checks, {} with the serving certificate's CA second, {} failed",
        openssl.two_cas,
        openssl.not_first,
        openssl.failures.len()
    );
    assert!(
        openssl.skipped || openssl.failures.is_empty(),
        "OpenSSL does not verify the serving certificate against the caBundle during a rotation:\n{}",
        openssl.failures.join("\n---\n")
    );
    assert!(
        openssl.skipped || openssl.not_first >= 1,
        "no check while the serving certificate's CA was second in the bundle ({} checks with two CAs)",
        openssl.two_cas
    );

    // Both rotations happened, by the leader only.
    let renewed = metric(
        leader,
        "pipelinerollout_webhook_certs_issued_total{kind=\"serving\",reason=\"rotation\"}",
    );
    let completed = metric(
        leader,
        "pipelinerollout_webhook_certs_ca_rotations_total{step=\"completed\"}",
    );
    assert!(renewed >= 3.0, "serving renewals: {renewed}");
    assert!(completed >= 1.0, "completed CA rotations: {completed}");
    assert_eq!(
        (
            metric(leader, "pipelinerollout_webhook_leader "),
            metric(follower, "pipelinerollout_webhook_leader ")
        ),
        (1.0, 0.0),
        "the first replica holds the Lease, the second does not"
    );
    assert_eq!(
        metric(follower, "pipelinerollout_webhook_certs_issued_total"),
        0.0,
        "the replica that does not lead issues nothing"
    );
    assert_eq!(
        metric(leader, "pipelinerollout_webhook_certs_errors_total"),
        0.0,
        "no call of the controller failed (its RBAC suffices):\n{}",
        leader.webhook.log_tail(30)
    );
    // The first CA has left every caBundle; both replicas are ready, so
    // what each serves is trusted by the caBundle in force.
    for bundle in ca_bundles(&env.cluster) {
        assert!(
            !pem_blocks(&bundle).contains(&pem_blocks(&first_ca)[0]),
            "the first CA left the caBundle"
        );
    }
    for replica in [leader, follower] {
        assert!(
            within(Duration::from_secs(5), || ready(replica)).is_some(),
            "replica at {} ready",
            replica.ip
        );
    }
}

#[test]
fn an_overwritten_ca_bundle_is_put_back_and_an_invalid_secret_is_replaced() {
    let _serial = one_at_a_time();
    let Some(assets) = require("certs faults", Assets::find()) else {
        return;
    };
    let env = SelfManaged::start(&assets, &["127.0.0.1"], &[]).unwrap_or_else(|e| panic!("{e}"));
    let replica = &env.replicas[0];
    let admin = env.cluster.kubectl(User::Admin);
    let original = ca_bundles(&env.cluster);

    // The webhook's own account may patch the caBundle (it just did) and
    // nothing else of its webhooks (own-webhooks-policy.yaml).
    let as_webhook = env.cluster.kubectl(User::Webhook);
    for (what, patch) in [
        (
            "switch it off",
            json!([{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]),
        ),
        (
            "narrow its rules",
            json!([{"op": "replace", "path": "/webhooks/0/rules/0/operations", "value": ["DELETE"]}]),
        ),
        (
            "point it elsewhere",
            json!([{"op": "replace", "path": "/webhooks/0/clientConfig/service/name", "value": "elsewhere"}]),
        ),
        (
            "remove a webhook",
            json!([{"op": "remove", "path": "/webhooks/0"}]),
        ),
        (
            "hand it to the garbage collector",
            json!([{"op": "add", "path": "/metadata/ownerReferences", "value": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "gone",
                "uid": "00000000-0000-0000-0000-000000000000"}]}]),
        ),
        (
            "hold it with a finalizer",
            json!([{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/hold"]}]),
        ),
        (
            "relabel it",
            json!([{"op": "add", "path": "/metadata/labels", "value": {"team": "x"}}]),
        ),
    ] {
        for kind in [
            "validatingwebhookconfiguration",
            "mutatingwebhookconfiguration",
        ] {
            let out = as_webhook.run(&[
                "patch",
                kind,
                CONFIGURATION,
                "--type=json",
                "-p",
                &patch.to_string(),
            ]);
            assert!(
                !out.success
                    && out
                        .stderr
                        .contains("may change nothing on its webhook configurations"),
                "the webhook's account may not {what} ({kind}): {out}"
            );
        }
    }

    let stranger = pipelinerollout_webhook::pki::generate("stranger", &["stranger".to_owned()], 1)
        .expect("a CA");
    let other = base64::engine::general_purpose::STANDARD.encode(&stranger.ca_pem);

    // A webhook of someone else's in the same configuration (another
    // Service, its own CA) is never given the webhook's caBundle.
    let foreign = json!({
        "name": "foreign.example.com",
        "clientConfig": {
            "service": {"name": "foreign", "namespace": "default", "path": "/validate"},
            "caBundle": other,
        },
        "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"],
                   "resources": ["widgets"], "operations": ["CREATE"]}],
        "failurePolicy": "Ignore",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    let add = json!([{"op": "add", "path": "/webhooks/-", "value": foreign}]).to_string();
    admin
        .run(&[
            "patch",
            "validatingwebhookconfiguration",
            CONFIGURATION,
            "--type=json",
            "-p",
            &add,
        ])
        .expect_success("add a foreign webhook");
    let foreign_bundle = |cluster: &Cluster| {
        webhook_bundles(cluster)
            .into_iter()
            .find(|(service, _)| service == "foreign")
            .map(|(_, bundle)| bundle)
    };

    // Another actor (an Argo CD sync) writes another caBundle.
    let patch =
        json!([{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": other}])
            .to_string();
    admin
        .run(&[
            "patch",
            "validatingwebhookconfiguration",
            CONFIGURATION,
            "--type=json",
            "-p",
            &patch,
        ])
        .expect_success("overwrite the caBundle");
    let restored = within(Duration::from_secs(5), || {
        ca_bundles(&env.cluster) == original
    })
    .unwrap_or_else(|| {
        panic!(
            "the caBundle was not put back within 5 s:\n{}",
            replica.webhook.log_tail(20)
        )
    });
    eprintln!("caBundle put back {restored:?} after the overwrite");
    assert_eq!(
        foreign_bundle(&env.cluster).as_deref(),
        Some(stranger.ca_pem.as_str()),
        "the foreign webhook keeps its own caBundle"
    );
    let out = env.write("after-overwrite");
    assert!(out.success, "{out}");

    // A hand edit makes the serving certificate garbage: replaced under
    // the same CA (the caBundle does not change), logged.
    let garbage = base64::engine::general_purpose::STANDARD.encode("garbage");
    admin
        .merge_patch(
            "secret",
            NAMESPACE,
            SECRET,
            &json!({"data": {"tls.crt": garbage}}),
            &[],
        )
        .expect_success("break the Secret");
    let replaced = within(Duration::from_secs(5), || {
        secret_data(&env.cluster)["tls.crt"].contains("BEGIN CERTIFICATE")
    })
    .unwrap_or_else(|| {
        panic!(
            "the Secret was not repaired within 5 s:\n{}",
            replica.webhook.log_tail(20)
        )
    });
    eprintln!("invalid serving certificate replaced {replaced:?} after the edit");
    assert_eq!(ca_bundles(&env.cluster), original, "the CA stays");
    assert!(
        replica.webhook.log_tail(40).contains("unusable"),
        "the replacement is logged:\n{}",
        replica.webhook.log_tail(40)
    );
    env.wait_for_a_write("after-edit", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}"));

    // The serving Secret every replica mounts holds no CA key.
    assert!(!secret_data(&env.cluster).contains_key("ca.key"));
    // A hand edit breaks the CA's key: a new CA joins the caBundle beside
    // the one the replica's certificate is from, which stays (the default
    // propagation delay, 3 minutes, is longer than this test) so writes
    // keep going through.
    let old_ca = secret_data(&env.cluster)["ca.crt"].clone();
    admin
        .merge_patch(
            "secret",
            NAMESPACE,
            CA_SECRET,
            &json!({"data": {"ca.key": garbage}}),
            &[],
        )
        .expect_success("break the CA key");
    within(Duration::from_secs(5), || {
        ca_bundles(&env.cluster) != original
    })
    .unwrap_or_else(|| panic!("no new CA within 5 s:\n{}", replica.webhook.log_tail(20)));
    let new_ca = ca_secret_data(&env.cluster)["ca.crt"].clone();
    assert_ne!(pem_blocks(&new_ca), pem_blocks(&old_ca));
    for bundle in ca_bundles(&env.cluster) {
        let blocks = pem_blocks(&bundle);
        assert_eq!(blocks.len(), 2, "the old CA and the new: {bundle}");
        assert!(
            blocks.contains(&pem_blocks(&old_ca)[0]) && blocks.contains(&pem_blocks(&new_ca)[0])
        );
    }
    let recovered = env
        .wait_for_a_write("after-new-ca", Duration::from_secs(15))
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("writes went through {recovered:?} after the CA was replaced");
    assert_eq!(
        foreign_bundle(&env.cluster).as_deref(),
        Some(stranger.ca_pem.as_str()),
        "the new CA went to the webhook's own webhooks only"
    );
    assert!(
        within(Duration::from_secs(5), || ready(replica)).is_some(),
        "ready again"
    );
}

#[test]
fn a_replica_that_cannot_reach_the_api_server_serves_its_last_certificate_and_is_ready_once_it_can()
{
    let _serial = one_at_a_time();
    let Some(assets) = require("certs without an API server", Assets::find()) else {
        return;
    };
    let env = SelfManaged::start(&assets, &["127.0.0.1"], &[]).unwrap_or_else(|e| panic!("{e}"));
    let api: SocketAddr = env
        .cluster
        .server()
        .trim_start_matches("https://")
        .parse()
        .expect("the API server's address");
    let proxy = Proxy::start(api);
    let kubeconfig = proxy.kubeconfig(&env.cluster, &env.cluster.kubeconfig(User::Webhook));
    let follower = env
        .spawn_follower("127.0.0.2", &kubeconfig)
        .unwrap_or_else(|e| panic!("{e}"));

    // It serves, but cannot tell whether the caBundle trusts it: not ready.
    let mut said = String::new();
    let never_ready = within(Duration::from_secs(3), || match follower.webhook.readyz() {
        Ok((200, _)) => true,
        Ok((_, body)) => {
            said = body;
            false
        }
        Err(_) => false,
    });
    assert!(never_ready.is_none(), "ready without reading the caBundle");
    assert!(said.contains("caBundle"), "/readyz says why: {said}");
    // What it serves is the Secret's certificate (the volume's files): the
    // API server's writes through it go through.
    env.cluster
        .point_service_at(NAMESPACE, SERVICE, follower.ip)
        .unwrap_or_else(|e| panic!("{e}"));
    env.wait_for_a_write("through-the-follower", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}\n{}", follower.webhook.log_tail(20)));
    assert!(
        follower
            .webhook
            .log_tail(40)
            .contains("cannot read the webhook configurations"),
        "the retries are logged:\n{}",
        follower.webhook.log_tail(40)
    );

    // The API server comes back: ready after the next retry.
    proxy.set_up();
    let became_ready = within(Duration::from_secs(40), || ready(&follower)).unwrap_or_else(|| {
        panic!(
            "not ready 40 s after the API server came back:\n{}",
            follower.webhook.log_tail(20)
        )
    });
    eprintln!("ready {became_ready:?} after the API server became reachable");
}

#[test]
fn a_controller_restarted_in_the_middle_of_a_ca_rotation_finishes_it_and_no_write_fails() {
    let _serial = one_at_a_time();
    let Some(assets) = require("certs leader change", Assets::find()) else {
        return;
    };
    // CAs live 45 s (rotated from 30 s on), serving certificates 10 s.
    let flags = [
        "--cert-validity=10s",
        "--ca-validity=45s",
        "--cert-propagation=2s",
    ];
    let mut env = SelfManaged::start(&assets, &["127.0.0.1", "127.0.0.2"], &flags)
        .unwrap_or_else(|e| panic!("{e}"));
    // Writes go through the replica that stays up.
    env.route_to(1).unwrap_or_else(|e| panic!("{e}"));
    let has = |cluster: &Cluster, key: &str| ca_secret_data(cluster).contains_key(key);
    let stop = AtomicBool::new(false);
    let cluster = &env.cluster;
    let (leader, _follower) = env.replicas.split_at_mut(1);
    let leader = &mut leader[0];
    let (writes, failures) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| write_in_a_loop(cluster, &stop, "load"));
        let outcome = (|| -> Result<(), String> {
            // Step 1 done (a new CA beside the old one): the controller stops
            // and a new process takes over from the Secret.
            within(Duration::from_secs(45), || has(cluster, "ca-next.crt"))
                .ok_or("no CA rotation started within 45 s")?;
            leader.webhook.stop();
            std::thread::sleep(Duration::from_secs(1));
            leader.webhook.resume(cluster)?;
            // Step 2 done (serving from the new CA, the old one retiring):
            // again.
            within(Duration::from_secs(20), || has(cluster, "ca-previous.crt"))
                .ok_or("the rotation did not switch within 20 s of the restart")?;
            leader.webhook.stop();
            std::thread::sleep(Duration::from_secs(1));
            leader.webhook.resume(cluster)?;
            within(Duration::from_secs(20), || {
                let data = ca_secret_data(cluster);
                !data.contains_key("ca-previous.crt") && !data.contains_key("ca-next.crt")
            })
            .ok_or("the rotation did not complete within 20 s of the second restart")?;
            std::thread::sleep(Duration::from_secs(3));
            Ok(())
        })();
        stop.store(true, Ordering::SeqCst);
        let written = writer.join().expect("the writer");
        if let Err(why) = outcome {
            panic!("{why}\nleader log:\n{}", leader.webhook.log_tail(30));
        }
        written
    });
    assert!(
        failures.is_empty(),
        "{} of {writes} writes failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The last process only finished the rotation: it started none and
    // switched none.
    let leader = &env.replicas[0];
    let steps = |step: &str| {
        metric(
            leader,
            &format!("pipelinerollout_webhook_certs_ca_rotations_total{{step=\"{step}\"}}"),
        )
    };
    assert_eq!(
        (steps("started"), steps("switched"), steps("completed")),
        (0.0, 0.0, 1.0),
        "the third process completed the rotation the first one started"
    );
    for bundle in ca_bundles(&env.cluster) {
        assert_eq!(
            pem_blocks(&bundle),
            pem_blocks(&secret_data(&env.cluster)["ca.crt"])
        );
    }
    eprintln!("{writes} writes across two controller restarts mid-rotation, none failed");
}
