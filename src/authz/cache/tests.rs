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
async fn a_full_cache_drops_the_oldest_answer_first() {
    let cache = AnswerCache::new(Bounds {
        entries: 3,
        bytes: 1 << 20,
    });
    for (key, ttl) in [("a", 30), ("b", 10), ("c", 20)] {
        allow(&cache, key, Duration::from_secs(ttl)).await;
    }
    allow(&cache, "d", Duration::from_secs(40)).await;
    assert_eq!(cache.usage().0, 3);
    for (key, kept) in [("a", true), ("b", false), ("c", true), ("d", true)] {
        let (_, source) = allow(&cache, key, Duration::from_secs(40)).await;
        assert_eq!(source == Source::Cached, kept, "{key}");
        if !kept {
            break; // asking again re-inserted it and evicted another
        }
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
    assert_eq!(cache.usage(), (0, 0), "failed checks are not kept");
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
    assert_eq!(cache.usage(), (0, 0), "a check given up on is not kept");
    assert_eq!(
        allow(&cache, "slow", Duration::from_secs(60)).await,
        (true, Source::Fresh),
        "the next caller asks again"
    );
}

#[tokio::test]
async fn expired_answers_go_when_a_key_is_added() {
    let cache = AnswerCache::new(ROOMY);
    for i in 0..5 {
        allow(&cache, &format!("old-{i}"), Duration::ZERO).await;
    }
    allow(&cache, "new", Duration::from_secs(60)).await;
    assert_eq!(cache.usage().0, 1, "only the live answer is left");
}

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
        let (entries, bytes) = cache.usage();
        assert!(bytes <= bounds.bytes, "{bytes} bytes in {entries} entries");
    }
    let (entries, _) = cache.usage();
    assert_eq!(entries, 10_000 / (1_504 + ENTRY_OVERHEAD));
}

#[tokio::test]
async fn a_key_above_the_byte_bound_is_answered_but_not_kept() {
    let cache = AnswerCache::new(Bounds {
        entries: 10,
        bytes: 1_000,
    });
    let huge = "g".repeat(2_000);
    assert_eq!(
        allow(&cache, &huge, Duration::from_secs(60)).await,
        (true, Source::Fresh)
    );
    assert_eq!(cache.usage(), (0, 0));
    assert_eq!(
        allow(&cache, &huge, Duration::from_secs(60)).await,
        (true, Source::Fresh)
    );
}
