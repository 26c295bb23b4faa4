//! Both Secrets deleted at once: the controller's memory
//! ([`Lingering`](crate::background::certs::linger::Lingering)) keeps the
//! CAs the replicas serve from in the caBundle beside the new one until
//! every replica serves from the new CA; a restarted controller has no
//! memory to keep them with.

use super::world::World;
use super::{at, settings};
use crate::background::certs::linger::MAX_LINGERING;

#[test]
fn both_secrets_deleted_at_once_every_replica_stays_trusted() {
    // Replicas 9.5 s and 5 s behind the Secret; deleted at 20 s, mid-life
    // of the first CA, and at 70 s, one second after the CA rotation's
    // switch, while the replicas still serve from the retiring CA.
    let mut world = World::new(settings());
    for (until, delete) in [(20, true), (70, true), (150, false)] {
        world.run_until(at(until));
        if delete {
            world.delete_both();
        }
    }
    assert!(world.failures.is_empty(), "{:#?}", world.failures);
    assert!(world.writes < 60, "{} Secret writes", world.writes);
    assert_eq!(
        world.bundle_cas(),
        world.material().bundle_cas().len(),
        "the kept CAs left the caBundle once the replicas served the new certificate"
    );
}

#[test]
fn a_restarted_controller_facing_two_deleted_secrets_cannot_keep_the_old_ca() {
    // The limit docs/install.md states.
    let mut world = World::new(settings());
    world.run_until(at(20));
    world.restart_controller();
    world.delete_both();
    world.run_until(at(40));
    assert!(
        !world.failures.is_empty(),
        "the replicas serve from a CA nothing remembers"
    );
}

#[test]
fn secrets_deleted_again_and_again_keep_the_ca_bundle_bounded() {
    let mut world = World::new(settings());
    let mut most = 0;
    for second in 1..40 {
        world.run_until(at(second));
        world.delete_both();
        most = most.max(world.bundle_cas());
    }
    world.run_until(at(80));
    // The plan's own (at most two) and the kept ones.
    assert!(most <= 2 + MAX_LINGERING, "{most} CAs in the caBundle");
    assert!(world.writes < 200, "{} Secret writes", world.writes);
    assert_eq!(world.bundle_cas(), world.material().bundle_cas().len());
}
