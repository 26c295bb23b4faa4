//! What the two certificate Secrets should hold next, and why: the CA
//! rotation's phases as a pure function of what they hold now, the time,
//! and which CAs the webhook configurations' caBundles carry.
//!
//! Two rules keep the API server's trust in what every replica serves:
//! a serving certificate from a CA is written only once every webhook's
//! caBundle carries that CA, and a CA leaves the caBundle only one
//! propagation delay and a margin ([`schedule::retire_after`]) after the
//! serving certificate stopped being its.
//!
//! CA rotation, in three steps:
//! 1. when due ([`schedule::rotate_ca_at`]) a new CA joins the CA Secret
//!    (`ca-next.*`) and the caBundle (both CAs);
//! 2. once every webhook carries both, and the propagation delay has passed
//!    since step 1, the serving certificate is re-issued by the new CA,
//!    which becomes `ca.*`; the old one stays in the caBundle
//!    (`ca-previous.crt`) for one more propagation delay and a margin, so
//!    that every replica serves the new certificate first;
//! 3. then the old CA leaves the CA Secret and the caBundle.
//!
//! A CA that is missing or not the webhook's (a deleted or edited CA
//! Secret) is replaced by a new one the same way: the CA the replicas'
//! certificate is from (the serving Secret's `ca.crt`) stays in the
//! caBundle beside the new CA until every replica serves a certificate
//! from the new CA.

use time::OffsetDateTime;

use super::CertOptions;
use super::material::{
    self, CA_CERT, CA_KEY, CheckError, Material, Previous, SecretError, Served, Serving, Stored,
};
use super::schedule::{self, BACKDATE, signed};
use crate::metrics::certificates::IssueReason;
use crate::pki::{self, CertError, PemPair, Validity};

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Issue(#[from] CertError),
    /// A CA just issued failed its own check.
    #[error(transparent)]
    Check(#[from] CheckError),
}

/// Why a certificate was issued.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    Initial,
    Due,
    /// Its names were not the Service's.
    Names,
    /// The stored one was unusable.
    Invalid(SecretError),
    /// Its Secret was deleted (the other one is still there).
    Deleted,
    /// The serving certificate moved to the CA that signs now.
    CaSwitch,
}

impl Reason {
    /// The metric label (also the logs').
    pub fn label(&self) -> IssueReason {
        match self {
            Self::Initial => IssueReason::Initial,
            Self::Due => IssueReason::Rotation,
            Self::Names => IssueReason::Names,
            Self::Invalid(_) => IssueReason::Invalid,
            Self::Deleted => IssueReason::Deleted,
            Self::CaSwitch => IssueReason::CaSwitch,
        }
    }
}

/// One thing a plan changes, for logs and metrics.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A new signing CA (no rotation: none was usable).
    CaIssued(Reason),
    ServingIssued(Reason),
    /// CA rotation step 1: a new CA joins the caBundle.
    RotationStarted,
    /// Step 2: the signing CA is the new one.
    RotationSwitched,
    /// Step 3: the old CA leaves the caBundle.
    RotationCompleted,
    /// A retired CA's time to leave was later than the rules allow.
    RetireCapped(OffsetDateTime),
    /// An unusable or foreign rotation entry was dropped.
    Dropped(SecretError),
}

/// The Secrets' next contents, what changed, which Secrets to write, and
/// when to look again at the latest.
#[derive(Debug, Clone)]
pub struct Plan {
    pub material: Material,
    pub changes: Vec<Change>,
    pub write_ca: bool,
    pub write_serving: bool,
    pub wake_at: OffsetDateTime,
}

/// A new CA, checked.
fn new_ca(options: &CertOptions, now: OffsetDateTime) -> Result<(PemPair, Validity), PlanError> {
    let name = format!("pipelinerollout-webhook {}", options.server_name());
    let validity = Validity {
        not_before: now - signed(BACKDATE),
        not_after: now + signed(options.ca_validity),
    };
    let ca = pki::issue_ca(&name, validity)?;
    let validity = material::check_ca(&ca, options, now)?;
    Ok((ca, validity))
}

/// `cert_pem` as the CA being retired, one propagation delay and a margin
/// after `switched`.
fn retiring(cert_pem: String, switched: OffsetDateTime, options: &CertOptions) -> Previous {
    let retire_after = schedule::retire_after(switched, options.propagation);
    Previous {
        cert_pem,
        retire_after,
    }
}

fn issued(validity: &Validity) -> OffsetDateTime {
    schedule::issued(validity.not_before, validity.not_after)
}

fn renew_at(validity: &Validity, options: &CertOptions) -> OffsetDateTime {
    schedule::renew_at(validity.not_before, validity.not_after, options.propagation)
}

/// A rotation entry of the CA Secret; `None` when absent, or unusable and
/// dropped (a change).
fn usable<T>(entry: Option<Result<T, SecretError>>, changes: &mut Vec<Change>) -> Option<T> {
    entry?
        .map_err(|why| changes.push(Change::Dropped(why)))
        .ok()
}

/// Plans the Secrets' next contents from the CA Secret `ca_secret` and
/// the serving Secret `served` (`None`: absent) at `now`. `carried(cas)`
/// says whether every webhook the caBundle belongs in carries all of
/// `cas` (PEM).
pub fn plan(
    ca_secret: Option<&Stored>,
    served: Option<&Served>,
    now: OffsetDateTime,
    options: &CertOptions,
    carried: impl Fn(&[&str]) -> bool,
) -> Result<Plan, PlanError> {
    let propagation = signed(options.propagation);
    let initial = ca_secret.is_none() && served.is_none();
    let empty = Stored::default();
    let stored = ca_secret.unwrap_or(&empty);
    let mut changes = Vec::new();
    let mut wake_at = now + time::Duration::hours(1);
    let soon = now + time::Duration::seconds(1);

    let (mut ca, mut ca_info, replaced) = match stored.ca(CA_CERT, CA_KEY, options, now) {
        Ok((ca, info)) => (ca, info, false),
        Err(why) => {
            let (ca, info) = new_ca(options, now)?;
            changes.push(Change::CaIssued(if initial {
                Reason::Initial
            } else if ca_secret.is_none() {
                Reason::Deleted
            } else {
                Reason::Invalid(why)
            }));
            (ca, info, true)
        }
    };
    let mut next = None;
    let mut previous = None;
    if !replaced {
        next = usable(stored.next_ca(options, now), &mut changes);
        previous = usable(stored.previous_ca(), &mut changes);
        if next.is_some() && previous.is_some() {
            changes.push(Change::Dropped(SecretError::TwoRotations));
            previous = None;
        }
    }
    if next.is_none() && previous.is_none() {
        // The CA the replicas' certificate is from, when it is not the
        // signing one (the CA Secret was deleted or edited), stays trusted
        // until they serve one from the signing CA; only while the
        // caBundle carries it (the webhook put it there), so that a
        // serving Secret edited to a foreign CA never brings it in.
        previous = served
            .and_then(|s| material::serving_ca(s, options, now))
            .filter(|(pem, _)| *pem != ca.cert_pem)
            .filter(|(pem, _)| carried(&[pem.as_str()]))
            .map(|(pem, info)| (retiring(pem, now + propagation, options), info));
    }

    if let Some((candidate, info)) = next.take() {
        let switch_at = issued(&info) + propagation;
        if now >= switch_at && carried(&[&ca.cert_pem, &candidate.cert_pem]) {
            previous = Some((retiring(ca.cert_pem, now, options), ca_info));
            (ca, ca_info) = (candidate, info);
            changes.push(Change::RotationSwitched);
        } else {
            wake_at = wake_at.min(switch_at.max(soon));
            next = Some((candidate, info));
        }
    } else if previous.is_none() {
        let due =
            schedule::rotate_ca_at(ca_info.not_before, ca_info.not_after, options.propagation);
        if now >= due {
            let (candidate, info) = new_ca(options, now)?;
            wake_at = wake_at.min(issued(&info) + propagation);
            next = Some((candidate, info));
            changes.push(Change::RotationStarted);
        } else {
            wake_at = wake_at.min(due);
        }
    }

    // The serving certificate: kept while it is valid, for the Service's
    // names and not yet due, from the signing CA or (until the signing CA
    // has reached every API server) from the CA being retired.
    let ca_carried = carried(&[&ca.cert_pem]);
    let ca_settled = ca_carried && now >= issued(&ca_info) + propagation;
    let under = |ca_pem: &str| served.map(|s| material::serving(s, ca_pem, options, now));
    let kept = match under(&ca.cert_pem) {
        Some(Ok((pair, info))) if now < renew_at(&info, options) => {
            wake_at = wake_at.min(renew_at(&info, options));
            let ca_pem = ca.cert_pem.clone();
            Ok(Serving { pair, ca_pem })
        }
        Some(Ok(_)) => Err(Reason::Due),
        Some(Err(SecretError::OtherNames)) => Err(Reason::Names),
        Some(Err(why)) => {
            let from_previous = previous
                .as_ref()
                .and_then(|(p, _)| under(&p.cert_pem).map(|r| (p.cert_pem.clone(), r)));
            match from_previous {
                Some((ca_pem, Ok((pair, info))))
                    if !ca_settled && now < renew_at(&info, options) =>
                {
                    wake_at = wake_at
                        .min(renew_at(&info, options))
                        .min((issued(&ca_info) + propagation).max(soon));
                    Ok(Serving { pair, ca_pem })
                }
                Some((_, Ok(_))) => Err(Reason::CaSwitch),
                _ if initial => Err(Reason::Initial),
                _ => Err(Reason::Invalid(why)),
            }
        }
        // No serving Secret: a new install's, or one deleted (which this
        // pure function cannot tell apart).
        None => Err(Reason::Initial),
    };
    let serving = match kept {
        Ok(serving) => Some(serving),
        Err(reason) if ca_carried => {
            let validity = Validity {
                not_before: now - signed(BACKDATE),
                not_after: schedule::leaf_not_after(
                    now,
                    options.cert_validity,
                    ca_info.not_after,
                    options.propagation,
                ),
            };
            let pair =
                pki::issue_serving(&ca, &options.server_name(), &options.dns_names(), validity)?;
            wake_at = wake_at.min(renew_at(&validity, options).max(soon));
            // The CA being retired leaves a propagation delay and a margin
            // after this certificate, which is not its: no later (a CA
            // kept for a certificate the replicas were serving), and no
            // earlier when they were serving one of its.
            if let Some((p, _)) = previous.as_mut() {
                let after = schedule::retire_after(now, options.propagation);
                p.retire_after = if reason == Reason::CaSwitch {
                    after
                } else {
                    p.retire_after.min(after)
                };
            }
            changes.push(Change::ServingIssued(reason));
            let ca_pem = ca.cert_pem.clone();
            Some(Serving { pair, ca_pem })
        }
        // Not until every caBundle carries the CA (this pass writes it).
        Err(_) => {
            wake_at = wake_at.min(soon);
            None
        }
    };

    // The CA being retired leaves once every replica serves a certificate
    // of the signing CA, one propagation delay after it was issued; it
    // stays while they serve its certificate, or none is written yet.
    let previous_ca = match (previous, &serving) {
        (Some((p, _)), _) if p.cert_pem == ca.cert_pem => None,
        (Some((mut p, info)), Some(s)) if s.ca_pem != p.cert_pem => {
            let serving_issued = material::validity(&s.pair.cert_pem).map_or(now, |v| issued(&v));
            let by = schedule::retire_by(
                p.retire_after,
                info.not_after,
                serving_issued,
                options.propagation,
            );
            let capped = p.retire_after > by + time::Duration::seconds(1);
            if now >= by {
                changes.push(if capped {
                    Change::Dropped(SecretError::Outstays(by))
                } else {
                    Change::RotationCompleted
                });
                None
            } else {
                if capped {
                    changes.push(Change::RetireCapped(by));
                    p.retire_after = by;
                }
                wake_at = wake_at.min(by);
                Some(p)
            }
        }
        (previous, _) => previous.map(|(p, _)| p),
    };
    let material = Material {
        ca,
        next_ca: next.map(|(pair, _)| pair),
        previous_ca,
        serving,
    };
    let write_ca = ca_secret
        .is_none_or(|s| s.data != material.ca_data() || s.retire_after != material.annotation());
    let write_serving = material
        .serving_data()
        .is_some_and(|data| served.is_none_or(|s| *s != data));
    Ok(Plan {
        material,
        changes,
        write_ca,
        write_serving,
        wake_at,
    })
}
