//! The texts of the certificate errors, which the controller logs and
//! `/readyz` reports: a table of every kind, then the texts real Secrets
//! and caBundles produce.

use super::world::World;
use super::{Served, at, served, served_chain, settings, settled, stored, t0, unix};
use crate::background::certs::bundle::OurWebhook;
use crate::background::certs::material::{
    CA_CERT, CA_KEY, CheckError, NEXT_CA_CERT, NEXT_CA_KEY, PREVIOUS_CA_CERT, SecretError,
    TLS_CERT, TLS_KEY,
};
use crate::background::certs::plan::{self, Change, Reason};
use crate::background::certs::{readiness, trust};

#[test]
fn every_error_says_what_is_wrong_in_the_secrets_own_words() {
    let cases: [(Box<dyn std::error::Error>, &str); 15] = [
        (
            Box::new(SecretError::Missing(TLS_CERT)),
            "tls.crt is missing",
        ),
        (
            Box::new(SecretError::NotText(TLS_KEY)),
            "tls.key is not text",
        ),
        (
            Box::new(SecretError::Ca {
                cert: CA_CERT,
                key: CA_KEY,
                check: CheckError::NotCa,
            }),
            "the CA in ca.crt and ca.key: not a CA certificate",
        ),
        (
            Box::new(SecretError::Ca {
                cert: NEXT_CA_CERT,
                key: NEXT_CA_KEY,
                check: CheckError::KeyMismatch,
            }),
            "the CA in ca-next.crt and ca-next.key: the key does not belong to the certificate",
        ),
        (
            Box::new(SecretError::PreviousCa(CheckError::NoPem)),
            "ca-previous.crt: no PEM certificate",
        ),
        (
            Box::new(SecretError::NoRetireAfter),
            "ca-previous.crt has no pipelinerollout-webhook.numaproj.io/retire-previous-ca-after annotation",
        ),
        (
            Box::new(CheckError::NotOne(3)),
            "3 certificates where exactly one belongs",
        ),
        (
            Box::new(CheckError::CannotServe {
                name: "hook.ns.svc".into(),
                why: "the caBundle does not trust the served certificate".into(),
            }),
            "a serving certificate it signs is not trusted for hook.ns.svc: the caBundle does not trust the served certificate",
        ),
        (
            Box::new(SecretError::TwoRotations),
            "ca-next.crt and ca-previous.crt at once: the older rotation is dropped",
        ),
        (
            Box::new(SecretError::Serving(CheckError::KeyMismatch)),
            "the key does not belong to the certificate",
        ),
        (
            Box::new(CheckError::Expired(t0())),
            "expired at 2027-01-15 8:00:00.0 +00:00:00",
        ),
        (
            Box::new(trust::TrustError::EmptyBundle),
            "the caBundle holds no certificate",
        ),
        (
            Box::new(trust::TrustError::NothingServed),
            "no certificate is served",
        ),
        (
            Box::new(trust::TrustError::InvalidName("not a name!".into())),
            "not a name!: invalid dns name",
        ),
        (
            Box::new(trust::TrustError::Verifier("no root trust anchors".into())),
            "cannot build a verifier: no root trust anchors",
        ),
    ];
    for (error, want) in cases {
        assert_eq!(error.to_string(), want);
    }
}

/// What the plan says is wrong after `edit` of the CA Secret or `serve`
/// of the serving Secret (the first change's reason).
fn why_replaced(edit: impl FnOnce(&mut super::Stored), serve: impl FnOnce(&mut Served)) -> String {
    let first = settled();
    let (mut s, mut d) = (stored(&first), served(&first));
    edit(&mut s);
    serve(&mut d);
    let next = plan::plan(Some(&s), Some(&d), at(2), &settings(), |_| true).expect("plan");
    match next.changes.first() {
        Some(
            Change::CaIssued(Reason::Invalid(why)) | Change::ServingIssued(Reason::Invalid(why)),
        ) => why.to_string(),
        other => panic!("not replaced as invalid: {other:?}"),
    }
}

#[test]
fn a_hand_edited_secret_is_logged_with_what_is_wrong() {
    let other = World::settled_material(settings());
    let other_leaf = other.serving.clone().expect("serving").pair;
    let put = |key: &'static str, value: String| {
        move |d: &mut std::collections::BTreeMap<String, Vec<u8>>| {
            d.insert(key.to_owned(), value.into_bytes());
        }
    };
    let ca = |key: &'static str, value: String| {
        let put = put(key, value);
        move |s: &mut super::Stored| put(&mut s.data)
    };
    let none = |_: &mut Served| {};
    let keep = |_: &mut super::Stored| {};
    assert_eq!(
        why_replaced(keep, |d| drop(d.remove(TLS_CERT))),
        "tls.crt is missing"
    );
    assert_eq!(
        why_replaced(keep, |d| drop(
            d.insert(TLS_KEY.to_owned(), vec![0xff, 0xfe])
        )),
        "tls.key is not text"
    );
    assert_eq!(
        why_replaced(ca(CA_CERT, "not pem".into()), none),
        "the CA in ca.crt and ca.key: no PEM certificate"
    );
    assert_eq!(
        why_replaced(|s| drop(s.data.remove(CA_KEY)), none),
        "ca.key is missing"
    );
    assert_eq!(
        why_replaced(ca(CA_KEY, other.ca.key_pem.clone()), none),
        "the CA in ca.crt and ca.key: the key does not belong to the certificate"
    );
    assert_eq!(
        why_replaced(ca(CA_CERT, other_leaf.cert_pem.clone()), none),
        "the CA in ca.crt and ca.key: not a CA certificate"
    );
    let first = settled();
    assert_eq!(
        why_replaced(
            ca(
                CA_CERT,
                format!("{}{}", first.ca.cert_pem, other.ca.cert_pem)
            ),
            none
        ),
        "the CA in ca.crt and ca.key: 2 certificates where exactly one belongs"
    );
    let constrained = super::world::name_constrained_ca();
    let why = why_replaced(
        |s| {
            s.data
                .insert(CA_CERT.into(), constrained.cert_pem.clone().into_bytes());
            s.data
                .insert(CA_KEY.into(), constrained.key_pem.clone().into_bytes());
        },
        none,
    );
    assert!(
        why.starts_with(
            "the CA in ca.crt and ca.key: a serving certificate it signs is not trusted for hook.ns.svc: "
        ),
        "{why}"
    );
    assert!(
        why_replaced(keep, put(TLS_KEY, "garbage".into())).starts_with("the key is unreadable: ")
    );
    assert!(
        why_replaced(keep, put(TLS_CERT, other_leaf.cert_pem.clone()))
            .starts_with("the key does not belong to the certificate"),
    );
}

#[test]
fn an_unusable_or_foreign_previous_ca_is_dropped_with_what_is_wrong() {
    let first = settled();
    let other = World::settled_material(settings());
    let d = served(&first);
    let mut s = stored(&first);
    s.data.insert(
        PREVIOUS_CA_CERT.to_owned(),
        other.ca.cert_pem.clone().into_bytes(),
    );
    let next = plan::plan(Some(&s), Some(&d), at(2), &settings(), |_| true).expect("plan");
    assert_eq!(
        next.changes.first(),
        Some(&Change::Dropped(SecretError::NoRetireAfter))
    );
    s.retire_after = Some("tomorrow".into());
    let next = plan::plan(Some(&s), Some(&d), at(2), &settings(), |_| true).expect("plan");
    let why = match next.changes.first() {
        Some(Change::Dropped(why)) => why.to_string(),
        other => panic!("not dropped: {other:?}"),
    };
    assert!(
        why.starts_with("pipelinerollout-webhook.numaproj.io/retire-previous-ca-after: "),
        "{why}"
    );
    s.retire_after = Some("2100-01-01T00:00:00Z".into());
    let next = plan::plan(Some(&s), Some(&d), at(15), &settings(), |_| true).expect("plan");
    let why = match next.changes.first() {
        Some(Change::Dropped(why)) => why.to_string(),
        other => panic!("not dropped: {other:?}"),
    };
    assert!(
        why.starts_with("ca-previous.crt stays past ")
            && why.ends_with(
                ", one propagation delay after the serving certificate left it: dropped from the caBundle"
            ),
        "{why}"
    );
    assert_eq!(next.material.bundle_cas(), [first.ca.cert_pem.as_str()]);
}

#[test]
fn readyz_says_which_webhook_does_not_trust_the_served_certificate_and_why() {
    let material = settled();
    let stranger = World::settled_material(settings());
    let chain = served_chain(&material);
    let now = unix(at(2));
    let judge = |bundle: &str, chain: &[Vec<u8>]| {
        let configs = [vec![OurWebhook {
            name: "w".into(),
            ca_bundle: bundle.as_bytes().to_vec(),
        }]];
        readiness::judge(&configs, chain, "hook.ns.svc", now)
            .expect_err("not trusted")
            .to_string()
    };
    assert_eq!(
        judge("", &chain),
        "webhook w: the caBundle holds no certificate"
    );
    assert_eq!(
        judge(&material.bundle(), &[]),
        "webhook w: no certificate is served"
    );
    let why = judge(&stranger.bundle(), &chain);
    assert!(
        why.starts_with(
            "webhook w: the caBundle does not trust the served certificate for hook.ns.svc: "
        ),
        "{why}"
    );
}
