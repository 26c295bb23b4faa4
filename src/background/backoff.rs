//! The one backoff of background work: kube-runtime's exponential backoff
//! (the one its watchers restart with), here without jitter, doubling
//! from a first wait up to a longest one. The certificate controller,
//! the readiness check and the audit's report writes retry with it.

use std::time::Duration;

use kube::runtime::utils::Backoff as _;
use kube::runtime::watcher::ExponentialBackoff;

/// Waits that double from `first` up to `max`; [`Backoff::reset`] after a
/// success.
pub struct Backoff {
    waits: ExponentialBackoff,
    max: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        let builder = backon::ExponentialBuilder::default()
            .with_min_delay(first)
            .with_max_delay(max)
            .with_factor(2.0)
            .without_max_times();
        Self {
            waits: ExponentialBackoff::from(builder),
            max,
        }
    }

    pub fn next_wait(&mut self) -> Duration {
        self.waits.next().unwrap_or(self.max)
    }

    pub fn reset(&mut self) {
        self.waits.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(250), Duration::from_secs(1));
        let waits: Vec<u128> = (0..4).map(|_| b.next_wait().as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_wait(), Duration::from_millis(250));
    }
}
