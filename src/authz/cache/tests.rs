use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

const ROOMY: Bounds = Bounds {
    entries: 10,
    bytes: 1 << 20,
};

async fn allow(cache: &AnswerCache, key: &str, ttl: Duration) -> (bool, Source) {
    cache
        .get_or_ask(key, ttl, || async { Ok::<_, ()>(true) })
        .await
        .expect("answer")
}

#[tokio::test]
async fn concurrent_misses_share_one_check() {
    let cache = AnswerCache::new(ROOMY);
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
    let cache = AnswerCache::new(ROOMY);
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
async fn a_full_cache_holds_no_more_than_its_entry_bound() {
    let cache = AnswerCache::new(Bounds {
        entries: 3,
        bytes: 1 << 20,
    });
    allow(&cache, "a", Duration::from_secs(60)).await;
    assert_eq!(
        allow(&cache, "a", Duration::from_secs(60)).await.1,
        Source::Cached
    );
    for key in ["b", "c", "d", "e", "f", "g"] {
        allow(&cache, key, Duration::from_secs(60)).await;
        assert!(cache.charged() <= 1 << 20);
        assert!(cache.usage().await.0 <= 3);
    }
}

#[tokio::test]
async fn a_failed_check_leaves_no_entry() {
    let cache = AnswerCache::new(ROOMY);
    for i in 0..5 {
        let got = cache
            .get_or_ask(&format!("forged-{i}"), Duration::from_secs(60), || async {
                Err::<bool, _>("the API server said no")
            })
            .await;
        assert!(got.is_err());
    }
    assert_eq!(cache.usage().await, (0, 0), "failed checks are not kept");
}

#[tokio::test]
async fn an_abandoned_check_leaves_no_entry() {
    let cache = AnswerCache::new(ROOMY);
    let slow = cache.get_or_ask("slow", Duration::from_secs(60), || async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok::<_, ()>(true)
    });
    let timed_out = tokio::time::timeout(Duration::from_millis(10), slow).await;
    assert!(timed_out.is_err(), "the check should have timed out");
    assert_eq!(
        cache.usage().await,
        (0, 0),
        "a check given up on is not kept"
    );
    assert_eq!(
        allow(&cache, "slow", Duration::from_secs(60)).await,
        (true, Source::Fresh),
        "the next caller asks again"
    );
}

/// Expired answers leave the cache, and give their bytes back, within
/// moka's timer granularity (about a second).
#[tokio::test]
async fn expired_answers_are_dropped() {
    let cache = AnswerCache::new(ROOMY);
    for i in 0..5 {
        allow(&cache, &format!("old-{i}"), Duration::ZERO).await;
    }
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    allow(&cache, "new", Duration::from_secs(60)).await;
    let (entries, bytes) = cache.usage().await;
    assert_eq!(entries, 1, "only the live answer is left");
    assert_eq!(bytes, cache.charge_of());
}

/// The bound is hard: the bytes charged never pass it, even before moka
/// has run the tasks that evict for the weigher.
#[tokio::test]
async fn the_byte_bound_holds_whatever_the_key_sizes() {
    let bounds = Bounds {
        entries: 1_000,
        bytes: 10_000,
    };
    let cache = AnswerCache::new(bounds);
    for i in 0..100 {
        let key = format!("{i:04}{}", "g".repeat(1_500));
        allow(&cache, &key, Duration::from_secs(60)).await;
        let bytes = cache.charged();
        assert!(bytes <= bounds.bytes, "{bytes} bytes charged");
    }
    let (entries, bytes) = cache.usage().await;
    let weight = cache.charge_of();
    assert_eq!(weight, ENTRY_BYTES, "a key costs its digest's entry");
    let weight = weight as u64;
    assert!(
        (7_500 / weight..=10_000 / weight).contains(&entries),
        "{entries} entries, {bytes} bytes"
    );
    assert_eq!(bytes as u64, entries * weight, "charges match what is held");
}

/// Concurrent distinct keys, as a flood of forged identities sends them:
/// the bytes charged never pass the bound while they are asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_byte_bound_holds_under_concurrent_misses() {
    let bounds = Bounds {
        entries: 10_000,
        bytes: 50_000,
    };
    let cache = Arc::new(AnswerCache::new(bounds));
    let tasks: Vec<_> = (0..8)
        .map(|lane| {
            let cache = Arc::clone(&cache);
            tokio::spawn(async move {
                for i in 0..200 {
                    let key = format!("{lane}-{i:04}{}", "g".repeat(900));
                    allow(&cache, &key, Duration::from_secs(60)).await;
                    let bytes = cache.charged();
                    assert!(bytes <= bounds.bytes, "{bytes} bytes charged");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("lane");
    }
    assert!(cache.usage().await.1 <= bounds.bytes);
}

/// The cache keeps a key's digest: a requester whose groups take
/// kilobytes costs the cache what any other does.
#[tokio::test]
async fn a_huge_key_costs_what_any_key_costs() {
    let cache = AnswerCache::new(Bounds {
        entries: 10,
        bytes: 1_000,
    });
    let huge = "g".repeat(2_000);
    assert_eq!(
        allow(&cache, &huge, Duration::from_secs(60)).await,
        (true, Source::Fresh)
    );
    assert_eq!(cache.usage().await, (1, cache.charge_of()));
    assert_eq!(
        allow(&cache, &huge, Duration::from_secs(60)).await,
        (true, Source::Cached)
    );
}
