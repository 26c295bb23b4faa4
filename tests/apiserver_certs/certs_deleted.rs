//! Both certificate Secrets deleted at once (`serve --manage-certs`),
//! through a real kube-apiserver: the leader keeps the CA the replica
//! serves from in the caBundle beside the new CA until the replica serves
//! the new certificate and a propagation delay has passed, so no write
//! fails; then the old CA leaves. The harness is tests/apiserver_certs/certs.rs's.

use crate::apiserver_certs_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use apiserver_certs_support::load::write_in_a_loop;
use apiserver_certs_support::{
    CA_SECRET, NAMESPACE, SECRET, SelfManaged, ca_bundles, ca_secret_data, one_at_a_time,
    pem_blocks, ready, secret_data, within,
};
use envtest::{Assets, User, require};

#[test]
fn both_secrets_deleted_at_once_no_write_fails_and_the_old_ca_leaves_after_the_new_certificate() {
    let _serial = one_at_a_time();
    let Some(assets) = require("certs both Secrets deleted", Assets::find()) else {
        return;
    };
    // A short propagation delay, so the old CA leaves within the test.
    let env = SelfManaged::start(&assets, &["127.0.0.1"], &["--cert-propagation=4s"])
        .unwrap_or_else(|e| panic!("{e}"));
    let replica = &env.replicas[0];
    let cluster = &env.cluster;
    let old_ca = pem_blocks(&secret_data(cluster)["ca.crt"]);
    assert_eq!(old_ca.len(), 1);
    let admin = cluster.kubectl(User::Admin);
    let stop = AtomicBool::new(false);
    let (writes, failures, kept) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| write_in_a_loop(cluster, &stop, "deleted"));
        std::thread::sleep(Duration::from_secs(2));
        let out = admin.run(&["-n", NAMESPACE, "delete", "secret", SECRET, CA_SECRET]);
        // The new CA joins beside the old one; the old one is never
        // missing from any caBundle meanwhile.
        let mut kept = true;
        let joined = within(Duration::from_secs(10), || {
            let bundles = ca_bundles(cluster);
            kept &= bundles.iter().all(|b| pem_blocks(b).contains(&old_ca[0]));
            bundles.iter().all(|b| pem_blocks(b).len() == 2)
        });
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::SeqCst);
        let (writes, failures) = writer.join().expect("the writer");
        out.expect_success("delete both Secrets");
        assert!(
            joined.is_some(),
            "no new CA beside the old one within 10 s:\n{}",
            replica.webhook.log_tail(30)
        );
        (writes, failures, kept)
    });
    assert!(
        failures.is_empty(),
        "{} of {writes} writes failed:\n{}\n{}",
        failures.len(),
        failures.join("\n"),
        replica.webhook.log_tail(30)
    );
    assert!(
        kept,
        "the old CA left a caBundle before the replica served the new certificate"
    );
    // The write loop logs a decision line per webhook call: the whole log.
    let log = replica.webhook.log_tail(usize::MAX);
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("both deleted?")),
        "the deletion is logged:\n{}",
        replica.webhook.log_tail(30)
    );
    // Then, once the replica serves the new certificate and the delay
    // (4 s and a 3 s margin) has passed, the old CA leaves.
    let left = within(Duration::from_secs(20), || {
        let new_ca = ca_secret_data(cluster)
            .get("ca.crt")
            .map(|pem| pem_blocks(pem))
            .unwrap_or_default();
        ca_bundles(cluster).iter().all(|b| pem_blocks(b) == new_ca)
    });
    assert!(
        left.is_some(),
        "the old CA is still in the caBundle 20 s on:\n{}",
        replica.webhook.log_tail(30)
    );
    assert!(ready(replica), "the replica is ready");
    let out = env.write("after-deleted");
    assert!(out.success, "{out}");
    eprintln!(
        "{writes} writes across both Secrets deleted, none failed; the old CA left after {left:?}"
    );
}
