//! A serving Secret edited to a CA the webhook did not issue (with a leaf
//! it signed for the Service): replaced under the webhook's CA, and the
//! foreign CA never reaches the caBundle, whether or not the CA Secret is
//! there too.

use super::world::World;
use super::{at, served, settings, settled, stored};
use crate::background::certs::plan::{self, Change, Reason};

#[test]
fn a_serving_secret_edited_to_a_foreign_ca_is_replaced_and_the_foreign_ca_never_trusted() {
    let ours = settled();
    let stranger = World::settled_material(settings());
    let foreign = served(&stranger);
    let our_ca = stored(&ours);
    let bundle = ours.bundle();
    // The caBundle as the webhook wrote it: our CA only.
    let carried = |cas: &[&str]| cas.iter().all(|c| bundle.contains(c.trim()));
    // (case, the CA Secret)
    let cases = [
        ("the CA Secret intact", Some(&our_ca)),
        ("the CA Secret deleted too", None),
    ];
    for (case, ca_secret) in cases {
        let next =
            plan::plan(ca_secret, Some(&foreign), at(2), &settings(), carried).expect("plan");
        let cas = next.material.bundle_cas();
        assert!(
            !cas.contains(&stranger.ca.cert_pem.as_str()),
            "{case}: the foreign CA is in the caBundle: {:?}",
            next.changes
        );
        if ca_secret.is_some() {
            assert_eq!(
                cas,
                [ours.ca.cert_pem.as_str()],
                "{case}: the caBundle stays"
            );
            assert!(
                matches!(
                    next.changes.as_slice(),
                    [Change::ServingIssued(Reason::Invalid(_))]
                ),
                "{case}: {:?}",
                next.changes
            );
            let serving = next
                .material
                .serving
                .as_ref()
                .expect("a serving certificate");
            assert_eq!(serving.ca_pem, ours.ca.cert_pem, "{case}: issued by our CA");
            assert!(next.write_serving && !next.write_ca, "{case}");
        }
    }
}
