//! Liveness and readiness.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the webhook can take traffic.
#[derive(Debug, Default)]
pub(crate) struct Health {
    loaded: AtomicBool,
    stopping: AtomicBool,
    trust_required: AtomicBool,
    trusted: AtomicBool,
}

impl Health {
    /// Marks the certificate and policy loaded and the listener bound.
    pub(crate) fn set_serving(&self) {
        self.loaded.store(true, Ordering::SeqCst);
    }

    /// Marks the start of shutdown: not ready from now on.
    pub(crate) fn set_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Makes readiness wait, from now on, until [`Health::set_trusted`]
    /// says the caBundle trusts the served certificate (`--manage-certs`).
    pub(crate) fn require_trust(&self) {
        self.trust_required.store(true, Ordering::SeqCst);
    }

    /// Whether the caBundle trusts the served certificate.
    pub(crate) fn set_trusted(&self, trusted: bool) {
        self.trusted.store(trusted, Ordering::SeqCst);
    }

    /// `Ok` when ready; otherwise why not.
    pub(crate) fn readiness(&self) -> Result<(), &'static str> {
        if self.stopping.load(Ordering::SeqCst) {
            Err("shutting down")
        } else if !self.loaded.load(Ordering::SeqCst) {
            Err("starting: certificate, policy or listener not ready yet")
        } else if self.trust_required.load(Ordering::SeqCst) && !self.trusted.load(Ordering::SeqCst)
        {
            Err("the webhook configurations' caBundle does not trust the served certificate (yet)")
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_between_serving_and_stopping() {
        let health = Health::default();
        assert!(health.readiness().is_err(), "not ready before load");
        health.set_serving();
        assert_eq!(health.readiness(), Ok(()));
        health.set_stopping();
        assert_eq!(health.readiness(), Err("shutting down"));
    }

    #[test]
    fn with_managed_certificates_ready_only_once_trusted() {
        let health = Health::default();
        health.require_trust();
        health.set_serving();
        assert!(health.readiness().is_err(), "serving but not trusted");
        health.set_trusted(true);
        assert_eq!(health.readiness(), Ok(()));
        health.set_trusted(false);
        assert!(health.readiness().is_err(), "trust lost");
    }
}
