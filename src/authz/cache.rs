//! Recent RBAC answers, keyed by everything that can change them.
//!
//! The cache is bounded twice, by answers and by the bytes of their keys,
//! because a key holds the requester's groups and extra attributes, which a
//! forged request can make large. Answers expire after the policy's
//! cacheTTL; expired answers are dropped whenever a new key is added; when
//! either bound is reached the answer closest to expiry goes first. A check
//! that fails, times out or is abandoned leaves nothing behind. Concurrent
//! misses for one key share one SubjectAccessReview.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

/// One key's answer: set once by the first caller, shared by those who
/// asked meanwhile. Holds when it expires and whether the verb is allowed.
type Slot = Arc<OnceCell<(Instant, bool)>>;

/// What one entry costs beyond its key's bytes: the map's bucket, the
/// slot's allocation and the `String` header, rounded up.
const ENTRY_OVERHEAD: usize = 128;

/// Whether an answer was asked for now or reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// This caller asked the API server.
    Fresh,
    /// The answer was in the cache, or another caller's check was shared.
    Cached,
}

/// How large the cache may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The most answers (and checks in flight) held at once.
    pub entries: usize,
    /// The most bytes of keys (plus a fixed overhead per entry) held at once.
    pub bytes: usize,
}

#[derive(Debug, Default)]
struct Slots {
    map: HashMap<String, Slot>,
    /// Bytes charged for the entries in `map`: each key's length plus
    /// [`ENTRY_OVERHEAD`].
    bytes: usize,
}

impl Slots {
    fn cost(key: &str) -> usize {
        key.len() + ENTRY_OVERHEAD
    }

    fn remove(&mut self, key: &str) {
        if self.map.remove(key).is_some() {
            self.bytes -= Self::cost(key);
        }
    }

    fn drop_expired(&mut self, now: Instant) {
        let mut freed = 0;
        self.map.retain(|key, slot| {
            let live = slot.get().is_none_or(|(expires, _)| *expires > now);
            if !live {
                freed += Self::cost(key);
            }
            live
        });
        self.bytes -= freed;
    }

    /// Removes the answer closest to expiry; false when only checks in
    /// flight are left.
    fn drop_soonest(&mut self) -> bool {
        let soonest = self
            .map
            .iter()
            .filter_map(|(k, s)| s.get().map(|(expires, _)| (*expires, k)))
            .min()
            .map(|(_, k)| k.clone());
        match soonest {
            Some(key) => {
                self.remove(&key);
                true
            }
            None => false,
        }
    }
}

/// A bounded map of answers.
#[derive(Debug)]
pub struct AnswerCache {
    slots: Mutex<Slots>,
    bounds: Bounds,
}

impl AnswerCache {
    /// A cache within `bounds`. Checks in flight count against both bounds
    /// but are never dropped for room; a key larger than the byte bound is
    /// checked without being kept.
    pub fn new(bounds: Bounds) -> Self {
        Self {
            slots: Mutex::new(Slots::default()),
            bounds: Bounds {
                entries: bounds.entries.max(1),
                bytes: bounds.bytes,
            },
        }
    }

    /// How many answers (and checks in flight) it holds, and the bytes
    /// charged for them.
    #[cfg(test)]
    pub fn usage(&self) -> (usize, usize) {
        self.slots.lock().map_or((0, 0), |s| (s.map.len(), s.bytes))
    }

    /// The slot for `key`, and whether it is kept in the map: the live one,
    /// or a new one in place of a missing or expired one.
    fn slot(&self, key: &str) -> (Slot, bool) {
        let Ok(mut slots) = self.slots.lock() else {
            // A poisoned lock only loses the sharing, never the answer.
            return (Slot::default(), false);
        };
        let now = Instant::now();
        if let Some(slot) = slots.map.get(key)
            && slot.get().is_none_or(|(expires, _)| *expires > now)
        {
            return (Arc::clone(slot), true);
        }
        slots.remove(key);
        slots.drop_expired(now);
        let cost = Slots::cost(key);
        if cost > self.bounds.bytes {
            return (Slot::default(), false);
        }
        while slots.map.len() >= self.bounds.entries || slots.bytes + cost > self.bounds.bytes {
            if !slots.drop_soonest() {
                // Full of checks in flight: answer this one without keeping it.
                return (Slot::default(), false);
            }
        }
        let slot = Slot::default();
        slots.map.insert(key.to_owned(), Arc::clone(&slot));
        slots.bytes += cost;
        (slot, true)
    }

    /// The answer for `key`: from the cache, from a check already in flight
    /// for the same key, or from `ask` (whose answer is kept for `ttl`).
    /// Errors are not kept: the next caller asks again.
    pub async fn get_or_ask<E, F>(
        &self,
        key: &str,
        ttl: Duration,
        ask: impl FnOnce() -> F,
    ) -> Result<(bool, Source), E>
    where
        F: Future<Output = Result<bool, E>>,
    {
        let (slot, kept) = self.slot(key);
        // Removes the entry if this call ends (with an error, or dropped by
        // a timeout) while the slot is still unanswered.
        let _unanswered = kept.then(|| Unanswered {
            cache: self,
            key,
            slot: Arc::clone(&slot),
        });
        let mut source = Source::Cached;
        let (_, allowed) = *slot
            .get_or_try_init(|| {
                source = Source::Fresh;
                async move { ask().await.map(|allowed| (Instant::now() + ttl, allowed)) }
            })
            .await?;
        Ok((allowed, source))
    }
}

/// Takes an unanswered slot out of the cache when its caller goes away.
struct Unanswered<'a> {
    cache: &'a AnswerCache,
    key: &'a str,
    slot: Slot,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.slot.initialized() {
            return;
        }
        let Ok(mut slots) = self.cache.slots.lock() else {
            return;
        };
        if slots
            .map
            .get(self.key)
            .is_some_and(|s| Arc::ptr_eq(s, &self.slot))
        {
            slots.remove(self.key);
        }
    }
}

#[cfg(test)]
mod tests;
