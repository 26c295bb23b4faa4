//! The rotation schedule, the CA rotation's phases, hand-edited Secrets,
//! the caBundle's targets and the readiness verdict, as tables of cases
//! on simulated time.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{ServiceReference, WebhookClientConfig};
use time::OffsetDateTime;

use super::bundle::{self, Configuration, OurWebhook, ServiceRef};
use super::material::{self, Material, Stored};
use super::plan::{self, Change, Plan, Reason, Settings};
use super::{readiness, trust};

mod messages;

fn settings() -> Settings {
    Settings {
        common_name: "hook.ns.svc".to_owned(),
        names: vec![
            "hook".into(),
            "hook.ns".into(),
            "hook.ns.svc".into(),
            "hook.ns.svc.cluster.local".into(),
        ],
        ca_validity: Duration::from_secs(30),
        cert_validity: Duration::from_secs(6),
        propagation: Duration::from_secs(2),
    }
}

fn t0() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).expect("time")
}

fn at(secs: i64) -> OffsetDateTime {
    t0() + time::Duration::seconds(secs)
}

fn stored(material: &Material) -> Stored {
    Stored {
        data: material
            .data()
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes()))
            .collect(),
        retire_after: material.annotation(),
    }
}

fn run(from: Option<&Material>, now: OffsetDateTime, carried: bool) -> Plan {
    plan::plan(from.map(stored).as_ref(), now, &settings(), |_| carried).expect("plan")
}

/// The DER of each certificate `material` serves, as readiness reads them.
fn served_chain(material: &Material) -> Vec<Vec<u8>> {
    trust::pem_certificates(material.serving.cert_pem.as_bytes())
        .iter()
        .map(|c| c.as_ref().to_vec())
        .collect()
}

/// The caBundle trusts the serving certificate for the Service's name.
fn assert_trusted(material: &Material, now: OffsetDateTime, what: &str) {
    let chain = trust::pem_certificates(material.serving.cert_pem.as_bytes());
    let unix = u64::try_from(now.unix_timestamp()).expect("unix");
    if let Err(why) = trust::verify(material.bundle().as_bytes(), &chain, "hook.ns.svc", unix) {
        panic!("{what}: {why}");
    }
}

#[test]
fn a_missing_secret_gets_a_ca_and_a_serving_certificate_that_then_stay() {
    let first = run(None, t0(), true);
    assert_eq!(
        first.changes,
        [
            Change::CaIssued(Reason::Initial),
            Change::ServingIssued(Reason::Initial)
        ]
    );
    assert_eq!(first.material.bundle_cas().len(), 1);
    assert_trusted(&first.material, t0(), "fresh");
    let again = run(Some(&first.material), at(1), true);
    assert!(again.changes.is_empty(), "{:?}", again.changes);
    assert_eq!(again.material, first.material);
    assert!(again.wake_at <= at(4), "wakes for the renewal at 2/3 of 6s");
}

#[test]
fn the_serving_certificate_is_renewed_at_two_thirds_of_its_life_under_the_same_ca() {
    let first = run(None, t0(), true).material;
    let cases = [(3, false), (4, true), (5, true)];
    for (secs, renewed) in cases {
        let next = run(Some(&first), at(secs), true);
        assert_eq!(
            next.changes == [Change::ServingIssued(Reason::Due)],
            renewed,
            "at {secs}s: {:?}",
            next.changes
        );
        assert_eq!(next.material.ca, first.ca, "the CA stays");
        assert_trusted(&next.material, at(secs), "renewed");
    }
}

#[test]
fn hand_edits_are_replaced_keeping_the_ca_when_it_is_usable() {
    let first = run(None, t0(), true).material;
    let edit = |key: &str, value: &str| {
        let mut s = stored(&first);
        s.data.insert(key.to_owned(), value.as_bytes().to_vec());
        s
    };
    let other = run(None, t0(), true).material;
    let cases = [
        (edit(material::TLS_CERT, "garbage"), false),
        (edit(material::TLS_KEY, &other.serving.key_pem), false),
        (edit(material::TLS_CERT, &other.serving.cert_pem), false),
        (edit(material::CA_KEY, &other.ca.key_pem), true),
        (edit(material::CA_CERT, "not pem"), true),
        (edit(material::CA_CERT, &first.serving.cert_pem), true),
    ];
    for (i, (stored, ca_replaced)) in cases.into_iter().enumerate() {
        let next = plan::plan(Some(&stored), at(1), &settings(), |_| true).expect("plan");
        let want_first = if ca_replaced {
            matches!(
                next.changes.first(),
                Some(Change::CaIssued(Reason::Invalid(_)))
            )
        } else {
            matches!(
                next.changes.as_slice(),
                [Change::ServingIssued(Reason::Invalid(_))]
            )
        };
        assert!(want_first, "case {i}: {:?}", next.changes);
        assert_eq!(next.material.ca == first.ca, !ca_replaced, "case {i}");
        assert_trusted(&next.material, at(1), &format!("case {i}"));
    }
}

#[test]
fn a_serving_certificate_for_other_names_is_reissued() {
    let first = run(None, t0(), true).material;
    let mut moved = settings();
    moved.names = vec!["other.ns.svc".into()];
    moved.common_name = "other.ns.svc".into();
    let next = plan::plan(Some(&stored(&first)), at(1), &moved, |_| true).expect("plan");
    assert_eq!(next.changes, [Change::ServingIssued(Reason::Names)]);
}

#[test]
fn a_ca_rotation_walks_three_steps_and_every_step_is_trusted() {
    let mut material = run(None, t0(), true).material;
    let old_ca = material.ca.cert_pem.clone();
    // Renew the serving certificate along the way, as the controller would.
    for secs in [4, 8, 12, 16] {
        material = run(Some(&material), at(secs), true).material;
    }
    // 2/3 of 30s: a new CA joins the bundle; the serving one is unchanged.
    let started = run(Some(&material), at(20), false);
    assert!(
        started.changes.contains(&Change::RotationStarted),
        "{:?}",
        started.changes
    );
    assert_eq!(started.material.bundle_cas().len(), 2);
    assert_eq!(started.material.ca.cert_pem, old_ca, "still signing");
    assert_trusted(&started.material, at(20), "started");
    let material = started.material;
    // Not carried by the webhooks yet: no switch, whatever the time.
    let waiting = run(Some(&material), at(23), false);
    assert!(!waiting.changes.contains(&Change::RotationSwitched));
    // Carried, but the propagation delay (2s) has not passed.
    let early = run(Some(&material), at(21), true);
    assert!(!early.changes.contains(&Change::RotationSwitched));
    // Carried and delayed enough: the serving certificate switches.
    let switched = run(Some(&material), at(23), true);
    assert!(
        switched.changes.contains(&Change::RotationSwitched),
        "{:?}",
        switched.changes
    );
    assert!(
        switched
            .changes
            .contains(&Change::ServingIssued(Reason::CaSwitch))
    );
    assert_ne!(switched.material.ca.cert_pem, old_ca);
    assert_eq!(
        switched.material.previous_ca.as_deref(),
        Some(old_ca.as_str())
    );
    assert_eq!(
        switched.material.bundle_cas().len(),
        2,
        "old CA still trusted"
    );
    assert_trusted(&switched.material, at(23), "switched");
    let material = switched.material;
    // A new leader reading the Secret mid-rotation continues: the retire
    // time is in the Secret.
    let too_soon = run(Some(&material), at(24), true);
    assert!(!too_soon.changes.contains(&Change::RotationCompleted));
    assert_eq!(too_soon.material.bundle_cas().len(), 2);
    let done = run(Some(&material), at(25), true);
    assert!(
        done.changes.contains(&Change::RotationCompleted),
        "{:?}",
        done.changes
    );
    assert_eq!(
        done.material.bundle_cas(),
        [done.material.ca.cert_pem.as_str()]
    );
    assert!(!done.material.bundle().contains(old_ca.trim()));
    assert_trusted(&done.material, at(25), "completed");
}

#[test]
fn an_unusable_next_ca_is_dropped_and_the_rotation_begins_again() {
    let first = run(None, t0(), true).material;
    let started = run(Some(&first), at(20), false).material;
    let mut s = stored(&started);
    s.data
        .insert(material::NEXT_CA_KEY.to_owned(), b"garbage".to_vec());
    let next = plan::plan(Some(&s), at(21), &settings(), |_| false).expect("plan");
    assert!(
        matches!(next.changes.first(), Some(Change::Dropped(_))),
        "{:?}",
        next.changes
    );
    assert!(next.changes.contains(&Change::RotationStarted));
    assert_eq!(next.material.bundle_cas().len(), 2);
}

#[test]
fn the_serving_certificate_never_outlives_its_ca() {
    let first = run(None, t0(), true).material;
    // 28s: past the start of the rotation; the CA ends at 30s.
    let late = run(Some(&first), at(28), false).material;
    let chain = trust::pem_certificates(late.serving.cert_pem.as_bytes());
    let (_, cert) = x509_parser::parse_x509_certificate(chain[0].as_ref()).expect("x509");
    assert!(cert.validity().not_after.timestamp() <= at(30).unix_timestamp());
}

fn client_config(service: Option<(&str, &str)>, bundle: &str) -> WebhookClientConfig {
    WebhookClientConfig {
        ca_bundle: Some(ByteString(bundle.as_bytes().to_vec())),
        service: service.map(|(namespace, name)| ServiceReference {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            path: Some("/validate".to_owned()),
            port: Some(443),
        }),
        url: service
            .is_none()
            .then(|| "https://example.invalid/validate".to_owned()),
    }
}

#[test]
fn only_webhooks_that_call_the_service_get_the_bundle_and_only_when_stale() {
    let service = ServiceRef {
        name: "hook".into(),
        namespace: "ns".into(),
    };
    let material = run(None, t0(), true).material;
    let bundle = material.bundle();
    let configs = [
        ("ours-current", client_config(Some(("ns", "hook")), &bundle)),
        ("ours-stale", client_config(Some(("ns", "hook")), "old")),
        (
            "other-namespace",
            client_config(Some(("elsewhere", "hook")), "x"),
        ),
        ("other-service", client_config(Some(("ns", "other")), "x")),
        ("by-url", client_config(None, "x")),
    ];
    let ours = bundle::ours(configs.iter().map(|(n, c)| (*n, c)), &service);
    let names: Vec<&str> = ours.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["ours-current", "ours-stale"]);
    let configuration = Configuration { exists: true, ours };
    let patch = bundle::patch(&configuration, &bundle).expect("a patch");
    let patched: Vec<&str> = patch["webhooks"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|w| w["name"].as_str())
        .collect();
    assert_eq!(patched, ["ours-stale"]);
    let fresh = Configuration {
        exists: true,
        ours: vec![OurWebhook {
            name: "ours".into(),
            ca_bundle: bundle.clone().into_bytes(),
        }],
    };
    assert_eq!(bundle::patch(&fresh, &bundle), None);
    assert!(bundle::carries(bundle.as_bytes(), &material.bundle_cas()));
    assert!(!bundle::carries(b"", &material.bundle_cas()));
}

#[test]
fn readiness_needs_every_webhook_of_the_service_to_trust_the_served_certificate() {
    let material = run(None, t0(), true).material;
    let stranger = run(None, t0(), true).material;
    let chain = served_chain(&material);
    let hook = |bundle: &str| OurWebhook {
        name: "w".into(),
        ca_bundle: bundle.as_bytes().to_vec(),
    };
    let config = |hooks: Vec<OurWebhook>| Configuration {
        exists: true,
        ours: hooks,
    };
    let now = u64::try_from(at(1).unix_timestamp()).expect("unix");
    let both = format!("{}{}", stranger.bundle(), material.bundle());
    let cases = [
        (
            "trusted",
            vec![config(vec![hook(&material.bundle())])],
            true,
        ),
        (
            "a bundle with two CAs",
            vec![config(vec![hook(&both)])],
            true,
        ),
        (
            "another CA",
            vec![config(vec![hook(&stranger.bundle())])],
            false,
        ),
        (
            "one of two untrusting",
            vec![config(vec![hook(&material.bundle()), hook("")])],
            false,
        ),
        ("no webhook calls the Service", vec![config(vec![])], false),
    ];
    for (name, configs, want) in cases {
        let got = readiness::judge(&configs, &chain, "hook.ns.svc", now);
        assert_eq!(got.is_ok(), want, "{name}: {got:?}");
    }
    let later = u64::try_from(at(10).unix_timestamp()).expect("unix");
    let expired = readiness::judge(
        &[config(vec![hook(&material.bundle())])],
        &chain,
        "hook.ns.svc",
        later,
    );
    assert!(expired.is_err(), "an expired certificate is not trusted");
}
