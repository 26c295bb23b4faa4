//! Recent RBAC answers, keyed by everything that can change them: a
//! `moka` cache, with a hard byte bound of our own around it.
//!
//! Answers expire after the policy's cacheTTL, read at each check (a
//! reloaded policy changes it), so each answer carries its own time to live
//! ([`moka::Expiry`]) rather than the cache one for all. Concurrent misses
//! for one key share one SubjectAccessReview (`try_get_with`); a check that
//! fails, times out or is abandoned leaves nothing behind.
//!
//! A key holds the requester's groups and extra attributes, which a forged
//! request can make large, so the cache keeps the key's SHA-256 digest, not
//! the key: moka frees removed entries (and its table of checks in flight)
//! only when crossbeam-epoch collects them, and with whole keys the
//! forged-identity flood of tests/https/rbac.rs left 27 MiB behind a
//! round. An entry weighs [`ENTRY_BYTES`], in units of the byte bound
//! divided by the entry bound (at least one unit), so that the one bound in
//! units bounds both; moka sizes its frequency sketch by its capacity,
//! which in units stays near the number of answers. moka enforces its weigher
//! asynchronously: an insert is counted, and something evicted for it, only
//! when its pending tasks run, so under a flood of forged identities moka
//! alone would hold more than its capacity for a while. Hence the bound is
//! ours: a key is charged to a counter before it is asked for, and moka's
//! eviction listener takes it off when the entry leaves; a key that does
//! not fit is answered without being kept (after one run of moka's pending
//! tasks, which drops what expired). moka's own capacity is three quarters
//! of the bound, so that once its tasks have run there is room for new keys
//! (the unit test `the_byte_bound_holds_whatever_the_key_sizes` and the
//! forged-identity floods of tests/https/rbac.rs show the bound).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use moka::future::Cache;

/// What one entry costs: the key's digest, moka's entry and its
/// bookkeeping, rounded up.
const ENTRY_BYTES: usize = 160;

/// A key as the cache holds it: the SHA-256 digest of the key's text.
type Digest = [u8; 32];

fn digest(key: &str) -> Digest {
    let mut out = [0; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, key.as_bytes()).as_ref());
    out
}

/// Whether an answer was asked for now or reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// This caller asked the API server.
    Fresh,
    /// The answer was in the cache, or another caller's check was shared.
    Cached,
}

/// How large the cache may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// The most answers held at once.
    pub(crate) entries: usize,
    /// The most bytes of entries ([`ENTRY_BYTES`] each) held at once,
    /// checks in flight included.
    pub(crate) bytes: usize,
}

/// One answer, and how long it is kept.
#[derive(Debug, Clone, Copy)]
struct Answer {
    allowed: bool,
    ttl: Duration,
}

struct PerAnswer;

impl moka::Expiry<Digest, Answer> for PerAnswer {
    fn expire_after_create(&self, _: &Digest, answer: &Answer, _: Instant) -> Option<Duration> {
        Some(answer.ttl)
    }
}

/// A bounded map of answers.
pub(crate) struct AnswerCache {
    answers: Cache<Digest, Answer>,
    /// Units charged for the keys held or being asked for.
    charged: Arc<AtomicUsize>,
    /// The most units charged at once.
    bound: usize,
    /// Bytes a unit: the byte bound divided by the entry bound.
    unit: usize,
}

impl std::fmt::Debug for AnswerCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerCache")
            .field("charged", &self.charged)
            .field("bound", &self.bound)
            .finish_non_exhaustive()
    }
}

/// What an entry weighs against the bound, in units of `unit` bytes.
fn weight(unit: usize) -> usize {
    ENTRY_BYTES.div_ceil(unit)
}

impl AnswerCache {
    /// A cache within `bounds`. Checks in flight count against the byte
    /// bound; a key that does not fit is checked without being kept.
    pub(crate) fn new(bounds: Bounds) -> Self {
        let unit = (bounds.bytes / bounds.entries.max(1)).max(1);
        let bound = bounds.bytes / unit;
        let charged = Arc::new(AtomicUsize::new(0));
        let released = Arc::clone(&charged);
        let answers = Cache::builder()
            .max_capacity(u64::try_from(bound.saturating_mul(3) / 4).unwrap_or(u64::MAX))
            .weigher(move |_: &Digest, _: &Answer| u32::try_from(weight(unit)).unwrap_or(u32::MAX))
            .expire_after(PerAnswer)
            .eviction_listener(move |_: Arc<Digest>, _, _| {
                released.fetch_sub(weight(unit), Ordering::AcqRel);
            })
            .build();
        Self {
            answers,
            charged,
            bound,
            unit,
        }
    }

    /// How many answers it holds, and the bytes charged for them and for
    /// the checks in flight.
    #[cfg(test)]
    async fn usage(&self) -> (u64, usize) {
        self.answers.run_pending_tasks().await;
        (self.answers.entry_count(), self.charged())
    }

    /// The bytes charged so far, without running moka's pending tasks.
    #[cfg(test)]
    fn charged(&self) -> usize {
        self.charged.load(Ordering::Acquire) * self.unit
    }

    /// The bytes an entry is charged, whatever its key.
    #[cfg(test)]
    fn charge_of(&self) -> usize {
        weight(self.unit) * self.unit
    }

    /// Charges `cost` units if they fit under the bound.
    fn charge(&self, cost: usize) -> bool {
        self.charged
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held + cost <= self.bound).then_some(held + cost)
            })
            .is_ok()
    }

    /// The answer for `key`: cached, shared with a check in flight, or from
    /// `ask` (then kept for `ttl`; an error is not kept).
    ///
    /// moka's futures are large, and every request's future holds this
    /// one's state whether it asks RBAC or not: boxing it here keeps that
    /// off the request (11 k instructions a request of copying the
    /// handler's future, `bench/instructions.sh`).
    pub(crate) async fn get_or_ask<E, F>(
        &self,
        key: &str,
        ttl: Duration,
        ask: impl FnOnce() -> F,
    ) -> Result<(bool, Source), E>
    where
        F: Future<Output = Result<bool, E>>,
        E: Clone + Send + Sync + 'static,
    {
        Box::pin(self.lookup(key, ttl, ask)).await
    }

    async fn lookup<E, F>(
        &self,
        key: &str,
        ttl: Duration,
        ask: impl FnOnce() -> F,
    ) -> Result<(bool, Source), E>
    where
        F: Future<Output = Result<bool, E>>,
        E: Clone + Send + Sync + 'static,
    {
        let key = digest(key);
        if let Some(answer) = self.answers.get(&key).await {
            return Ok((answer.allowed, Source::Cached));
        }
        let cost = weight(self.unit);
        let fits = self.charge(cost) || {
            self.answers.run_pending_tasks().await;
            self.charge(cost)
        };
        if !fits {
            return ask().await.map(|allowed| (allowed, Source::Fresh));
        }
        let charge = Charge {
            charged: &self.charged,
            cost,
            kept: AtomicBool::new(false),
        };
        let asked = AtomicBool::new(false);
        let init = async {
            asked.store(true, Ordering::Release);
            let allowed = ask().await?;
            // Once `init` returns Ok, moka inserts the answer even if this
            // caller is dropped: the charge stays until it is evicted.
            charge.kept.store(true, Ordering::Release);
            Ok(Answer { allowed, ttl })
        };
        let answer = self
            .answers
            .try_get_with(key, init)
            .await
            .map_err(|e: Arc<E>| E::clone(&e))?;
        let source = if asked.load(Ordering::Acquire) {
            Source::Fresh
        } else {
            Source::Cached
        };
        Ok((answer.allowed, source))
    }
}

/// The units charged for a key being asked for: given back when dropped,
/// unless its answer was kept (moka's eviction listener gives them back).
struct Charge<'a> {
    charged: &'a AtomicUsize,
    cost: usize,
    kept: AtomicBool,
}

impl Drop for Charge<'_> {
    fn drop(&mut self) {
        if !self.kept.load(Ordering::Acquire) {
            self.charged.fetch_sub(self.cost, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests;
