//! The schedule's arithmetic, as tables: when a serving certificate is
//! renewed, when a CA rotation starts, how long a leaf lives, until when a
//! retired CA stays, and which lifetimes `serve` accepts.

use std::time::Duration;

use super::at;
use crate::background::certs::schedule::{self, BACKDATE, LifetimeError, check_lifetimes, signed};

/// (issued, not_after) in seconds from t0: notBefore is backdated.
fn life(issued: i64, not_after: i64) -> (time::OffsetDateTime, time::OffsetDateTime) {
    (at(issued) - signed(BACKDATE), at(not_after))
}

#[test]
fn a_serving_certificate_is_renewed_at_two_thirds_or_a_propagation_delay_and_margin_before_it_ends()
{
    // (issued, not_after, propagation, renewed at)
    let cases = [
        (0, 30, 10, 17),    // 30 - 10 - 3 comes before 2/3 (20)
        (0, 30, 2, 20),     // two thirds
        (0, 600, 180, 400), // two thirds
        (0, 300, 180, 117), // 300 - 183
        (0, 10, 10, 0),     // never before it was issued
        (100, 130, 10, 117),
    ];
    for (issued, not_after, p, want) in cases {
        let (nb, na) = life(issued, not_after);
        let got = schedule::renew_at(nb, na, Duration::from_secs(p));
        assert_eq!(got, at(want), "{issued}..{not_after}, propagation {p}");
    }
}

#[test]
fn a_ca_rotation_starts_at_two_thirds_or_three_propagation_delays_and_two_margins_before_it_ends() {
    // (issued, not_after, propagation, due)
    let cases = [
        (0, 75, 10, 39), // 75 - 30 - 6
        (0, 75, 2, 50),  // two thirds
        (0, 3600, 180, 2400),
        (0, 30, 10, 0),
    ];
    for (issued, not_after, p, want) in cases {
        let (nb, na) = life(issued, not_after);
        let got = schedule::rotate_ca_at(nb, na, Duration::from_secs(p));
        assert_eq!(got, at(want), "{issued}..{not_after}, propagation {p}");
    }
}

#[test]
fn a_leaf_ends_a_propagation_delay_before_its_ca_at_the_latest() {
    // (now, life, CA's notAfter, propagation, leaf's notAfter)
    let cases = [
        (0, 30, 75, 10, 30),
        (40, 30, 75, 10, 65),
        (60, 30, 75, 10, 65),
    ];
    for (now, life, ca, p, want) in cases {
        let got = schedule::leaf_not_after(
            at(now),
            Duration::from_secs(life),
            at(ca),
            Duration::from_secs(p),
        );
        assert_eq!(got, at(want), "issued at {now}");
    }
}

#[test]
fn a_retired_ca_stays_no_longer_than_its_life_or_a_propagation_delay_after_the_switch() {
    // (written, previous CA's notAfter, serving issued, propagation, kept until)
    let cases = [
        (52, 75, 42, 10, 52),         // as written at the switch
        (10_000_000, 75, 42, 10, 55), // a far-future date: capped (42 + 10 + 3)
        (10_000_000, 45, 42, 10, 45), // never past its own end
        (40, 75, 42, 10, 40),
    ];
    for (written, prev_end, issued, p, want) in cases {
        let got = schedule::retire_by(
            at(written),
            at(prev_end),
            at(issued),
            Duration::from_secs(p),
        );
        assert_eq!(got, at(want), "written {written}");
    }
}

#[test]
fn lifetimes_that_cannot_renew_in_time_are_refused_with_the_least_that_works() {
    let s = Duration::from_secs;
    let cases = [
        (s(30), s(75), s(10), Ok(())),
        (s(2_419_200), s(157_680_000), s(180), Ok(())),
        (
            s(30),
            s(75),
            s(180),
            Err(LifetimeError::CertTooShort {
                cert: "30s".into(),
                propagation: "3m".into(),
                margin: "3s".into(),
                least: "6m 6s".into(),
            }),
        ),
        (
            s(30),
            s(60),
            s(10),
            Err(LifetimeError::CaTooShort {
                ca: "1m".into(),
                propagation: "10s".into(),
                margins: "6s".into(),
                least: "1m 12s".into(),
            }),
        ),
        (s(100), s(100), s(10), Err(LifetimeError::CertOutlivesCa)),
    ];
    for (cert, ca, p, want) in cases {
        assert_eq!(check_lifetimes(cert, ca, p), want, "{cert:?} {ca:?} {p:?}");
    }
    let text = check_lifetimes(s(30), s(75), s(180))
        .expect_err("refused")
        .to_string();
    assert!(
        text.starts_with("--cert-validity 30s is too short for --cert-propagation 3m"),
        "{text}"
    );
}
