//! The schedule, the CA rotation's phases, hand-edited and deleted
//! Secrets, the caBundle's targets and the readiness verdict, as tables of
//! cases on simulated time, and a simulated cluster ([`World`]) in which
//! replicas serve what the Secret held a propagation delay ago.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{ServiceReference, WebhookClientConfig};
use time::OffsetDateTime;

use super::bundle::{self, OurWebhook};
use super::material::{self, Material, Served, Stored};
use super::plan::{self, Change, Plan, Reason};
use super::{CertOptions, ServiceRef, readiness, trust};

mod deleted;
mod foreign;
mod messages;
mod schedule;
mod world;

use world::World;

/// Serving certificates of 30 s, CAs of 75 s, a propagation delay of 10 s:
/// the end-to-end test's lifetimes.
fn settings() -> CertOptions {
    CertOptions {
        secret: "hook-tls".to_owned(),
        ca_secret: "hook-ca".to_owned(),
        secret_namespace: "ns".to_owned(),
        service: ServiceRef {
            name: "hook".into(),
            namespace: "ns".into(),
        },
        validating: "hook".to_owned(),
        mutating: "hook".to_owned(),
        ca_validity: Duration::from_secs(75),
        cert_validity: Duration::from_secs(30),
        propagation: Duration::from_secs(10),
    }
}

fn t0() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).expect("time")
}

fn at(secs: i64) -> OffsetDateTime {
    t0() + time::Duration::seconds(secs)
}

fn unix(t: OffsetDateTime) -> u64 {
    u64::try_from(t.unix_timestamp()).expect("unix")
}

/// The CA Secret of `material`, as read back.
fn stored(material: &Material) -> Stored {
    Stored {
        data: material.ca_data(),
        retire_after: material.annotation(),
    }
}

/// The serving Secret of `material`, as read back.
fn served(material: &Material) -> Served {
    material.serving_data().expect("a serving certificate")
}

/// A fresh install, settled: both Secrets written, the caBundle carried.
fn settled() -> Material {
    let mut world = World::new(settings());
    world.run_until(at(1));
    world.material()
}

/// One plan over `material`'s Secrets at `now`, the caBundle carried.
fn replan(material: &Material, now: OffsetDateTime) -> Plan {
    let (s, d) = (stored(material), served(material));
    plan::plan(Some(&s), Some(&d), now, &settings(), |_| true).expect("plan")
}

/// The DER of each certificate `material` serves, as readiness reads them.
fn served_chain(material: &Material) -> Vec<Vec<u8>> {
    let pem = &material.serving.as_ref().expect("serving").pair.cert_pem;
    trust::pem_certificates(pem.as_bytes())
        .iter()
        .map(|c| c.as_ref().to_vec())
        .collect()
}

#[test]
fn a_fresh_install_writes_the_ca_and_the_ca_bundle_first_then_the_serving_certificate() {
    let first = plan::plan(None, None, t0(), &settings(), |_| false).expect("plan");
    assert_eq!(first.changes, [Change::CaIssued(Reason::Initial)]);
    assert!(
        first.write_ca && !first.write_serving,
        "no leaf before the caBundle"
    );
    assert_eq!(first.material.bundle_cas().len(), 1);
    let s = stored(&first.material);
    let second = plan::plan(Some(&s), None, at(1), &settings(), |_| true).expect("plan");
    assert_eq!(second.changes, [Change::ServingIssued(Reason::Initial)]);
    assert!(!second.write_ca && second.write_serving);
    let serving = second.material.serving.as_ref().expect("serving");
    assert_eq!(
        serving.ca_pem, first.material.ca.cert_pem,
        "ca.crt is its CA"
    );
    assert_eq!(
        trust::pem_certificates(serving.ca_pem.as_bytes()).len(),
        1,
        "ca.crt is one certificate"
    );
    let again = replan(&second.material, at(2));
    assert!(again.changes.is_empty() && !again.write_ca && !again.write_serving);
    assert!(
        !second.material.ca_data().contains_key(material::TLS_KEY)
            && !second
                .material
                .serving_data()
                .expect("data")
                .contains_key(material::CA_KEY),
        "the CA key is in the CA Secret only, the serving key in the serving Secret only"
    );
}

#[test]
fn which_cas_are_kept_and_which_are_replaced() {
    let first = settled();
    let other = World::settled_material(settings());
    let constrained = world::name_constrained_ca();
    let both = format!("{}{}", first.ca.cert_pem, other.ca.cert_pem);
    let far = material::rfc3339(at(10_000_000)).expect("time");
    // (what, the edit, whether the signing CA is replaced, the CAs of the
    // caBundle after: how many, and whether the stranger's is among them)
    type Edit = Box<dyn Fn(&mut Stored)>;
    let put = |key: &'static str, value: String| -> Edit {
        Box::new(move |s: &mut Stored| {
            s.data.insert(key.to_owned(), value.clone().into_bytes());
        })
    };
    let cases: Vec<(&str, Edit, bool, usize)> = vec![
        ("untouched", Box::new(|_| {}), false, 1),
        (
            "a second CA appended to ca.crt",
            put(material::CA_CERT, both),
            true,
            2,
        ),
        (
            "another CA without its key",
            put(material::CA_CERT, other.ca.cert_pem.clone()),
            true,
            2,
        ),
        (
            "another CA with its key (an operator's CA)",
            Box::new({
                let other = other.clone();
                move |s: &mut Stored| {
                    s.data.insert(
                        material::CA_CERT.into(),
                        other.ca.cert_pem.clone().into_bytes(),
                    );
                    s.data.insert(
                        material::CA_KEY.into(),
                        other.ca.key_pem.clone().into_bytes(),
                    );
                }
            }),
            false,
            2,
        ),
        (
            "a CA whose name constraints exclude the Service, with its key",
            Box::new(move |s: &mut Stored| {
                s.data.insert(
                    material::CA_CERT.into(),
                    constrained.cert_pem.clone().into_bytes(),
                );
                s.data.insert(
                    material::CA_KEY.into(),
                    constrained.key_pem.clone().into_bytes(),
                );
            }),
            true,
            2,
        ),
        (
            "a foreign ca-previous.crt retiring in 115 days",
            Box::new({
                let other = other.clone();
                move |s: &mut Stored| {
                    s.data.insert(
                        material::PREVIOUS_CA_CERT.into(),
                        other.ca.cert_pem.clone().into_bytes(),
                    );
                    s.retire_after = Some(far.clone());
                }
            }),
            false,
            1,
        ),
    ];
    for (what, edit, replaced, cas) in cases {
        let mut s = stored(&first);
        edit(&mut s);
        let d = served(&first);
        // 15 s in: past one propagation delay since the serving certificate
        // was issued, before it is due.
        let next = plan::plan(Some(&s), Some(&d), at(15), &settings(), |_| true).expect("plan");
        let is_replaced = matches!(
            next.changes.first(),
            Some(Change::CaIssued(Reason::Invalid(_)))
        );
        assert_eq!(is_replaced, replaced, "{what}: {:?}", next.changes);
        let bundle = next.material.bundle_cas();
        assert_eq!(bundle.len(), cas, "{what}: the caBundle's CAs");
        if replaced {
            assert_eq!(
                bundle[0], first.ca.cert_pem,
                "{what}: the CA the replicas serve from stays"
            );
        }
        assert!(
            !next.material.bundle().contains(other.ca.cert_pem.trim()) || what.contains("operator"),
            "{what}: the stranger's CA is never injected"
        );
        for pem in bundle {
            assert_eq!(
                trust::pem_certificates(pem.as_bytes()).len(),
                1,
                "{what}: one per entry"
            );
        }
    }
}

#[test]
fn a_ca_that_cannot_serve_the_service_is_replaced_once_and_then_stays() {
    let mut world = World::new(settings());
    world.run_until(at(1));
    let constrained = world::name_constrained_ca();
    world.edit_ca(|s| {
        s.data.insert(
            material::CA_CERT.into(),
            constrained.cert_pem.clone().into_bytes(),
        );
        s.data.insert(
            material::CA_KEY.into(),
            constrained.key_pem.clone().into_bytes(),
        );
    });
    let before = world.writes;
    world.run_until(at(11));
    // Replaced (CA Secret), the caBundle gains the new CA, then one
    // propagation delay later the serving certificate switches (serving
    // Secret); nothing else in 10 s of passes every 200 ms.
    assert!(
        world.writes - before <= 3,
        "{} writes",
        world.writes - before
    );
    assert_ne!(world.material().ca.cert_pem, constrained.cert_pem);
}

#[test]
fn through_rotations_deletions_and_foreign_cas_the_ca_bundle_always_trusts_what_every_replica_serves()
 {
    let mut world = World::new(settings());
    world.run_until(at(1));
    let stranger = World::settled_material(settings());
    // Three minutes of 30 s certificates and 75 s CAs, with a pass every
    // 200 ms, replicas 9.5 s and 5 s behind the Secret, and at 40 s the
    // serving Secret deleted, at 80 s the CA Secret deleted, at 120 s the
    // CA Secret edited to a stranger's CA.
    for (until, event) in [(40, 0), (80, 1), (120, 2), (180, 3)] {
        world.run_until(at(until));
        match event {
            0 => world.delete_serving(),
            1 => world.delete_ca(),
            2 => world.edit_ca(|s| {
                s.data.insert(
                    material::CA_CERT.into(),
                    stranger.ca.cert_pem.clone().into_bytes(),
                );
            }),
            _ => {}
        }
    }
    assert!(world.failures.is_empty(), "{:#?}", world.failures);
    let m = &world.metrics;
    assert!(m.ca_rotations >= 2, "CA rotations: {m:?}");
    assert!(m.serving_renewals >= 4, "serving renewals: {m:?}");
    assert!(
        world.writes < 60,
        "{} Secret writes in 3 minutes",
        world.writes
    );
    assert!(
        !world
            .material()
            .bundle()
            .contains(stranger.ca.cert_pem.trim())
    );
}

#[test]
fn a_serving_certificate_for_other_names_is_reissued() {
    let first = settled();
    let mut moved = settings();
    moved.service.name = "other".into();
    let (s, d) = (stored(&first), served(&first));
    let next = plan::plan(Some(&s), Some(&d), at(2), &moved, |_| true).expect("plan");
    assert_eq!(next.changes, [Change::ServingIssued(Reason::Names)]);
}

#[test]
fn the_serving_certificate_ends_a_propagation_delay_before_its_ca() {
    let first = settled();
    // 45 s: the CA (75 s) is rotated from 39 s on; its leaves end by 65 s.
    let mut s = stored(&first);
    s.data.remove(material::NEXT_CA_CERT);
    let d = Served::new();
    let next = plan::plan(Some(&s), Some(&d), at(45), &settings(), |_| true).expect("plan");
    let leaf = next.material.serving.expect("serving").pair.cert_pem;
    let info = material::validity(&leaf).expect("validity");
    assert!(info.not_after <= at(65), "{}", info.not_after);
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
    let material = settled();
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
    let patch = bundle::patch(&ours, &bundle).expect("a patch");
    let patched: Vec<&str> = patch["webhooks"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|w| w["name"].as_str())
        .collect();
    assert_eq!(patched, ["ours-stale"]);
    let fresh = [OurWebhook {
        name: "ours".into(),
        ca_bundle: bundle.clone().into_bytes(),
    }];
    assert_eq!(bundle::patch(&fresh, &bundle), None);
    assert!(bundle::carries(bundle.as_bytes(), &material.bundle_cas()));
    assert!(!bundle::carries(b"", &material.bundle_cas()));
}

#[test]
fn readiness_needs_every_webhook_of_the_service_to_trust_the_served_certificate() {
    let material = settled();
    let stranger = World::settled_material(settings());
    let chain = served_chain(&material);
    let hook = |bundle: &str| OurWebhook {
        name: "w".into(),
        ca_bundle: bundle.as_bytes().to_vec(),
    };
    let config = |hooks: Vec<OurWebhook>| hooks;
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
        let got = readiness::judge(&configs, &chain, "hook.ns.svc", unix(at(2)));
        assert_eq!(got.is_ok(), want, "{name}: {got:?}");
    }
    let expired = readiness::judge(
        &[config(vec![hook(&material.bundle())])],
        &chain,
        "hook.ns.svc",
        unix(at(40)),
    );
    assert!(expired.is_err(), "an expired certificate is not trusted");
}
