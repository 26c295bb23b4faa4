//! The audit's request budget: a token bucket (`--audit-qps` a second
//! after `--audit-burst` at once), so that the audit's writes never crowd
//! the API server or the webhook's own requests.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A token bucket: `burst` requests at once, then `qps` a second.
#[derive(Debug)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps: qps.max(0.01),
            burst,
            tokens: burst,
            at: Instant::now(),
        }
    }

    /// Takes a token, or says how long until one is there.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }

    /// Waits for a token (or the stop); false when stopped.
    pub async fn acquire(&mut self, stop: &CancellationToken) -> bool {
        loop {
            match self.take(Instant::now()) {
                Ok(()) => return true,
                Err(wait) => {
                    tokio::select! {
                        () = stop.cancelled() => return false,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let mut bucket = Bucket::new(2.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(bucket.take(t0).is_ok());
        }
        let wait = bucket.take(t0).expect_err("empty");
        assert!(
            wait <= Duration::from_millis(500) && wait > Duration::from_millis(400),
            "{wait:?}"
        );
        assert!(bucket.take(t0 + Duration::from_millis(500)).is_ok());
        assert!(bucket.take(t0 + Duration::from_millis(500)).is_err());
        // Idle time refills up to the burst only.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(bucket.take(later).is_ok());
        }
        assert!(bucket.take(later).is_err());
    }
}
