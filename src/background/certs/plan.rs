//! What the certificate Secret should hold next, and why: the rotation
//! schedule and the CA rotation's phases as a pure function of what it
//! holds now, the time, and whether the webhook configurations carry the
//! caBundle.
//!
//! CA rotation, in three steps that never leave the API server without
//! trust in what is served:
//! 1. at two thirds of the CA's life a new CA joins the Secret
//!    (`ca-next.*`) and the caBundle (both CAs);
//! 2. once every webhook carries both, and the propagation delay has passed
//!    since step 1, the serving certificate is re-issued by the new CA,
//!    which becomes `ca.*`; the old one stays in the caBundle
//!    (`ca-previous.crt`) until the propagation delay has passed again, so
//!    that every replica serves the new certificate first;
//! 3. then the old CA leaves the Secret and the caBundle.

use std::time::Duration;

use time::OffsetDateTime;

use super::material::{self, CheckError, Material, SecretError, ServingProblem, Stored};
use crate::pki::{self, CertError, PemPair, Validity};

/// How far back certificates are valid from, so that a clock a little
/// behind still accepts them. Not part of a certificate's life for the
/// rotation schedule.
pub const BACKDATE: Duration = Duration::from_secs(300);

/// What the certificates are made for and how long they live.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The serving certificate's common name.
    pub common_name: String,
    /// Its DNS names.
    pub names: Vec<String>,
    /// How long a CA is valid.
    pub ca_validity: Duration,
    /// How long a serving certificate is valid (never beyond its CA).
    pub cert_validity: Duration,
    /// How long a change of CA takes to reach every replica and API server.
    pub propagation: Duration,
}

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A certificate could not be issued.
    #[error(transparent)]
    Issue(#[from] CertError),
    /// A CA just issued failed its own check.
    #[error(transparent)]
    Check(#[from] CheckError),
}

/// Why a certificate was issued.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// The Secret did not exist, or the CA was replaced.
    Initial,
    /// Two thirds of its life had passed.
    Due,
    /// Its names were not the Service's.
    Names,
    /// The stored one was unusable.
    Invalid(SecretError),
    /// The CA rotation switched to the new CA.
    CaSwitch,
}

impl Reason {
    /// The metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Initial => "initial",
            Self::Due => "rotation",
            Self::Names => "names",
            Self::Invalid(_) => "invalid",
            Self::CaSwitch => "ca-switch",
        }
    }
}

/// One thing a plan changes, for logs and metrics.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A new signing CA (no rotation: none was usable).
    CaIssued(Reason),
    /// A new serving certificate.
    ServingIssued(Reason),
    /// CA rotation step 1: a new CA joins the caBundle.
    RotationStarted,
    /// Step 2: the serving certificate is signed by the new CA.
    RotationSwitched,
    /// Step 3: the old CA leaves the caBundle.
    RotationCompleted,
    /// An unusable rotation entry was dropped.
    Dropped(SecretError),
}

/// The Secret's next contents.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What it should hold.
    pub material: Material,
    /// What changed (empty: nothing to write).
    pub changes: Vec<Change>,
    /// When to look again at the latest.
    pub wake_at: OffsetDateTime,
}

fn std_to_time(d: Duration) -> time::Duration {
    time::Duration::try_from(d).unwrap_or(time::Duration::MAX)
}

/// When a certificate valid from `not_before` to `not_after` is due: two
/// thirds into its life (not counting [`BACKDATE`]).
pub fn renew_at(not_before: OffsetDateTime, not_after: OffsetDateTime) -> OffsetDateTime {
    let start = (not_before + std_to_time(BACKDATE)).min(not_after);
    start + (not_after - start) * 2 / 3
}

fn validity(now: OffsetDateTime, life: Duration, cap: Option<OffsetDateTime>) -> Validity {
    let not_after = now + std_to_time(life);
    Validity {
        not_before: now - std_to_time(BACKDATE),
        not_after: cap.map_or(not_after, |cap| not_after.min(cap)),
    }
}

fn new_ca(settings: &Settings, now: OffsetDateTime) -> Result<PemPair, CertError> {
    let name = format!("pipelinerollout-webhook {}", settings.common_name);
    pki::issue_ca(&name, validity(now, settings.ca_validity, None))
}

/// Plans the Secret's next contents from `stored` (`None`: no Secret) at
/// `now`. `carried(cas)` says whether every webhook the caBundle belongs
/// in carries all of `cas` (PEM).
pub fn plan(
    stored: Option<&Stored>,
    now: OffsetDateTime,
    settings: &Settings,
    carried: impl Fn(&[&str]) -> bool,
) -> Result<Plan, PlanError> {
    let absent = stored.is_none();
    let empty = Stored::default();
    let stored = stored.unwrap_or(&empty);
    let mut changes = Vec::new();
    let propagation = std_to_time(settings.propagation);

    let (mut ca, mut ca_info, ca_replaced) = match stored.ca(now) {
        Ok((ca, info)) => (ca, info, false),
        Err(why) => {
            let ca = new_ca(settings, now)?;
            let info = material::check_ca(&ca, now)?;
            changes.push(Change::CaIssued(if absent {
                Reason::Initial
            } else {
                Reason::Invalid(why)
            }));
            (ca, info, true)
        }
    };
    let mut next = match (ca_replaced, stored.next_ca(now)) {
        (true, _) | (_, None) => None,
        (false, Some(Ok(next))) => Some(next),
        (false, Some(Err(why))) => {
            changes.push(Change::Dropped(why));
            None
        }
    };
    let mut previous = match (ca_replaced, stored.previous_ca()) {
        (true, _) | (_, None) => None,
        (false, Some(Ok(previous))) => Some(previous),
        (false, Some(Err(why))) => {
            changes.push(Change::Dropped(why));
            None
        }
    };
    if next.is_some() && previous.is_some() {
        changes.push(Change::Dropped(SecretError::TwoRotations));
        previous = None;
    }

    let mut wake_at = now + time::Duration::hours(1);
    let mut switched = false;
    if let Some(candidate) = next.take() {
        let next_info = material::check_ca(&candidate, now)?;
        let switch_at = next_info.not_before + std_to_time(BACKDATE) + propagation;
        if now >= switch_at && carried(&[&ca.cert_pem, &candidate.cert_pem]) {
            previous = Some((ca.cert_pem.clone(), now + propagation));
            ca = candidate;
            ca_info = next_info;
            switched = true;
            changes.push(Change::RotationSwitched);
        } else {
            wake_at = wake_at.min(switch_at.max(now + time::Duration::seconds(1)));
            next = Some(candidate);
        }
    } else if let Some((_, after)) = &previous {
        if now >= *after {
            previous = None;
            changes.push(Change::RotationCompleted);
        } else {
            wake_at = wake_at.min(*after);
        }
    } else {
        let due = renew_at(ca_info.not_before, ca_info.not_after);
        if now >= due {
            let candidate = new_ca(settings, now)?;
            let next_info = material::check_ca(&candidate, now)?;
            wake_at = wake_at.min(next_info.not_before + std_to_time(BACKDATE) + propagation);
            next = Some(candidate);
            changes.push(Change::RotationStarted);
        } else {
            wake_at = wake_at.min(due);
        }
    }

    // The stored serving certificate, kept while it is valid, for the
    // Service's names, signed by the signing CA and not yet due.
    let kept = if switched || ca_replaced {
        Err(if switched {
            Reason::CaSwitch
        } else {
            Reason::Initial
        })
    } else {
        match stored.serving(&ca, &settings.names, now) {
            Ok((pair, info)) if now < renew_at(info.not_before, info.not_after) => {
                wake_at = wake_at.min(renew_at(info.not_before, info.not_after));
                Ok(pair)
            }
            Ok(_) => Err(Reason::Due),
            Err(ServingProblem::Names(_)) => Err(Reason::Names),
            Err(ServingProblem::Invalid(_)) if absent => Err(Reason::Initial),
            Err(ServingProblem::Invalid(why)) => Err(Reason::Invalid(why)),
        }
    };
    let serving = match kept {
        Ok(pair) => pair,
        Err(reason) => {
            let validity = validity(now, settings.cert_validity, Some(ca_info.not_after));
            let pair = pki::issue_serving(&ca, &settings.common_name, &settings.names, validity)?;
            wake_at = wake_at.min(renew_at(validity.not_before, validity.not_after));
            changes.push(Change::ServingIssued(reason));
            pair
        }
    };
    let (previous_ca, retire_previous_after) = match previous {
        Some((pem, after)) => (Some(pem), Some(after)),
        None => (None, None),
    };
    Ok(Plan {
        material: Material {
            ca,
            serving,
            next_ca: next,
            previous_ca,
            retire_previous_after,
        },
        changes,
        wake_at,
    })
}
