//! Exponential backoff for retrying calls to the API server.

use std::time::Duration;

/// Waits that double from `first` up to `max`; [`Backoff::reset`] after a
/// success.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// From `first` up to `max`.
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            next: first,
        }
    }

    /// The wait before the next attempt.
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }

    /// Back to the first wait.
    pub fn reset(&mut self) {
        self.next = self.first;
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
