//! Liveness and readiness.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the webhook can take traffic.
#[derive(Debug, Default)]
pub struct Health {
    loaded: AtomicBool,
    stopping: AtomicBool,
}

impl Health {
    /// Marks the certificate and policy loaded and the listener bound.
    pub fn set_serving(&self) {
        self.loaded.store(true, Ordering::SeqCst);
    }

    /// Marks the start of shutdown: not ready from now on.
    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// `Ok` when ready; otherwise why not.
    pub fn readiness(&self) -> Result<(), &'static str> {
        if self.stopping.load(Ordering::SeqCst) {
            Err("shutting down")
        } else if !self.loaded.load(Ordering::SeqCst) {
            Err("starting: certificate, policy or listener not ready yet")
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
}
