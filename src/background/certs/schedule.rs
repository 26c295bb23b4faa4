//! When certificates are renewed and retired, and which lifetimes can be
//! kept to: pure arithmetic on times, so that no certificate is in use at
//! its expiry.
//!
//! A change of a Secret takes up to the propagation delay `p` to reach
//! every replica (the kubelet's sync of the volume) and every API server.
//! So a serving certificate is renewed at two thirds of its life, and at
//! the latest `p` + [`MARGIN`] before it expires; it never outlives its
//! CA's notAfter minus `p`; a CA rotation (which takes `p` to introduce
//! the new CA, then `p` for the replicas to serve its certificate) starts
//! at two thirds of the CA's life, and at the latest `3p` + `2` ×
//! [`MARGIN`] before the CA expires.

use std::time::Duration;

use time::OffsetDateTime;

/// How far back certificates are valid from, so that a clock a little
/// behind still accepts them. Not part of a certificate's life for the
/// schedule.
pub const BACKDATE: Duration = Duration::from_secs(300);

/// What every deadline keeps in hand beyond the propagation delay: clock
/// differences, a readiness check's interval, a retried call.
pub const MARGIN: Duration = Duration::from_secs(3);

pub fn signed(d: Duration) -> time::Duration {
    time::Duration::try_from(d).unwrap_or(time::Duration::MAX)
}

/// When a certificate valid from `not_before` was issued (its notBefore
/// without the backdating), never after `not_after`.
pub fn issued(not_before: OffsetDateTime, not_after: OffsetDateTime) -> OffsetDateTime {
    (not_before + signed(BACKDATE)).min(not_after)
}

/// Two thirds into a certificate's life, and at the latest `before_end`
/// before it expires, but never before it was issued.
fn due(
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    before_end: time::Duration,
) -> OffsetDateTime {
    let start = issued(not_before, not_after);
    let two_thirds: OffsetDateTime = start + (not_after - start) * 2 / 3;
    two_thirds.min(not_after - before_end).max(start)
}

/// When a serving certificate is due: two thirds into its life, and at
/// the latest `propagation` + [`MARGIN`] before it expires.
pub fn renew_at(
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    propagation: Duration,
) -> OffsetDateTime {
    due(not_before, not_after, signed(propagation) + signed(MARGIN))
}

/// When a CA rotation is due: two thirds into the CA's life, and at the
/// latest `3 × propagation` + `2` × [`MARGIN`] before it expires.
pub fn rotate_ca_at(
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    propagation: Duration,
) -> OffsetDateTime {
    let before_end = signed(propagation) * 3 + signed(MARGIN) * 2;
    due(not_before, not_after, before_end)
}

/// The notAfter of a serving certificate issued at `now` for `life` by a
/// CA that expires at `ca_not_after`: never later than `propagation`
/// before the CA expires.
pub fn leaf_not_after(
    now: OffsetDateTime,
    life: Duration,
    ca_not_after: OffsetDateTime,
    propagation: Duration,
) -> OffsetDateTime {
    (now + signed(life)).min(ca_not_after - signed(propagation))
}

/// When a CA that stopped signing the serving certificate at `switched`
/// may leave the caBundle: `propagation` + [`MARGIN`] later, by when every
/// replica serves the certificate issued then (the delay alone leaves no
/// room for the write itself, the watch that carries it or the reload).
pub fn retire_after(switched: OffsetDateTime, propagation: Duration) -> OffsetDateTime {
    switched + signed(propagation) + signed(MARGIN)
}

/// Until when a retired CA stays in the caBundle: the time written beside
/// it, but never beyond its own notAfter nor beyond [`retire_after`] the
/// serving certificate in force was issued.
pub fn retire_by(
    written: OffsetDateTime,
    previous_not_after: OffsetDateTime,
    serving_issued: OffsetDateTime,
    propagation: Duration,
) -> OffsetDateTime {
    written
        .min(previous_not_after)
        .min(retire_after(serving_issued, propagation))
}

/// Why the lifetimes cannot be kept to; the texts are what `serve`
/// refuses to start with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LifetimeError {
    #[error(
        "--cert-validity {cert} is too short for --cert-propagation {propagation}: a serving certificate is renewed at the latest propagation + {margin} before it expires, so it must be valid for at least twice that ({least})"
    )]
    CertTooShort {
        cert: String,
        propagation: String,
        margin: String,
        least: String,
    },
    #[error(
        "--ca-validity {ca} is too short for --cert-propagation {propagation}: a CA rotation takes three propagation delays + {margins} and starts at the latest that long before the CA expires, so a CA must be valid for at least twice that ({least})"
    )]
    CaTooShort {
        ca: String,
        propagation: String,
        margins: String,
        least: String,
    },
    #[error(
        "--cert-validity must be shorter than --ca-validity (a serving certificate never outlives its CA)"
    )]
    CertOutlivesCa,
}

fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Checks that certificates of `cert` and CAs of `ca` can be renewed and
/// rotated with `propagation` to spare before any expiry.
pub fn check_lifetimes(
    cert: Duration,
    ca: Duration,
    propagation: Duration,
) -> Result<(), LifetimeError> {
    let least_cert = (propagation + MARGIN) * 2;
    if cert < least_cert {
        return Err(LifetimeError::CertTooShort {
            cert: human(cert),
            propagation: human(propagation),
            margin: human(MARGIN),
            least: human(least_cert),
        });
    }
    let least_ca = (propagation * 3 + MARGIN * 2) * 2;
    if ca < least_ca {
        return Err(LifetimeError::CaTooShort {
            ca: human(ca),
            propagation: human(propagation),
            margins: human(MARGIN * 2),
            least: human(least_ca),
        });
    }
    if cert >= ca {
        return Err(LifetimeError::CertOutlivesCa);
    }
    Ok(())
}
