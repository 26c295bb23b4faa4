//! Recent RBAC answers, keyed by everything that can change them. Answers
//! expire after the policy's cacheTTL; when the cache is full the oldest
//! answer goes first; concurrent misses for one key share one
//! SubjectAccessReview.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

/// One key's answer: set once by the first caller, shared by those who
/// asked meanwhile. Holds when it expires and whether the verb is allowed.
type Slot = Arc<OnceCell<(Instant, bool)>>;

/// Whether an answer was asked for now or reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// This caller asked the API server.
    Fresh,
    /// The answer was in the cache, or another caller's check was shared.
    Cached,
}

/// A bounded map of answers.
#[derive(Debug)]
pub struct AnswerCache {
    slots: Mutex<HashMap<String, Slot>>,
    limit: usize,
}

impl AnswerCache {
    /// A cache of at most about `limit` answers (checks in flight may add
    /// to it for a moment).
    pub fn new(limit: usize) -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
            limit: limit.max(1),
        }
    }

    /// How many answers (and checks in flight) it holds.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.slots.lock().map_or(0, |s| s.len())
    }

    /// The slot for `key`: the live one, or a new one in place of a missing
    /// or expired one.
    fn slot(&self, key: &str) -> Slot {
        let Ok(mut slots) = self.slots.lock() else {
            // A poisoned lock only loses the sharing, never the answer.
            return Slot::default();
        };
        let now = Instant::now();
        if let Some(slot) = slots.get(key)
            && slot.get().is_none_or(|(expires, _)| *expires > now)
        {
            return Arc::clone(slot);
        }
        if slots.len() >= self.limit && !slots.contains_key(key) {
            slots.retain(|_, s| s.get().is_none_or(|(expires, _)| *expires > now));
            if slots.len() >= self.limit {
                let oldest = slots
                    .iter()
                    .filter_map(|(k, s)| s.get().map(|(expires, _)| (*expires, k.clone())))
                    .min();
                if let Some((_, k)) = oldest {
                    slots.remove(&k);
                }
            }
        }
        let slot = Slot::default();
        slots.insert(key.to_owned(), Arc::clone(&slot));
        slot
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
        let slot = self.slot(key);
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn concurrent_misses_share_one_check() {
        let cache = AnswerCache::new(10);
        let asked = AtomicUsize::new(0);
        let ask = || async {
            asked.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, ()>(true)
        };
        let ttl = Duration::from_secs(10);
        let (a, b, c) = tokio::join!(
            cache.get_or_ask("k", ttl, ask),
            cache.get_or_ask("k", ttl, ask),
            cache.get_or_ask("k", ttl, ask),
        );
        assert_eq!(
            asked.load(Ordering::SeqCst),
            1,
            "one check for three callers"
        );
        let sources = [a, b, c].map(|r| r.expect("answer").1);
        assert_eq!(
            sources.iter().filter(|s| **s == Source::Fresh).count(),
            1,
            "{sources:?}"
        );
        assert_eq!(
            cache.get_or_ask("k", ttl, ask).await,
            Ok((true, Source::Cached))
        );
    }

    #[tokio::test]
    async fn expired_answers_and_errors_are_asked_again() {
        let cache = AnswerCache::new(10);
        let got = cache
            .get_or_ask("k", Duration::ZERO, || async { Ok::<_, ()>(true) })
            .await;
        assert_eq!(got, Ok((true, Source::Fresh)));
        let got = cache
            .get_or_ask("k", Duration::ZERO, || async { Ok::<_, ()>(false) })
            .await;
        assert_eq!(got, Ok((false, Source::Fresh)), "a TTL of 0 keeps nothing");
        let err = cache
            .get_or_ask("e", Duration::from_secs(10), || async {
                Err::<bool, _>("down")
            })
            .await;
        assert_eq!(err, Err("down"));
        let got = cache
            .get_or_ask("e", Duration::from_secs(10), || async {
                Ok::<_, &str>(true)
            })
            .await;
        assert_eq!(got, Ok((true, Source::Fresh)), "an error is not kept");
    }

    #[tokio::test]
    async fn a_full_cache_drops_the_oldest_answer_first() {
        let cache = AnswerCache::new(3);
        for (key, ttl) in [("a", 30), ("b", 10), ("c", 20)] {
            let _ = cache
                .get_or_ask(key, Duration::from_secs(ttl), || async {
                    Ok::<_, ()>(true)
                })
                .await;
        }
        let _ = cache
            .get_or_ask("d", Duration::from_secs(40), || async { Ok::<_, ()>(true) })
            .await;
        assert_eq!(cache.len(), 3);
        for (key, kept) in [("a", true), ("b", false), ("c", true), ("d", true)] {
            let (_, source) = cache
                .get_or_ask(key, Duration::from_secs(40), || async { Ok::<_, ()>(true) })
                .await
                .expect("answer");
            assert_eq!(source == Source::Cached, kept, "{key}");
            if !kept {
                break; // asking again re-inserted it and evicted another
            }
        }
    }
}
