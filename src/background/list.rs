//! How the background controllers list and watch: kube-runtime's watcher,
//! with the initial list taken as a streaming list (the API server's
//! WatchList: `sendInitialEvents`, one object per watch event) so that the
//! raw bytes held at once are one object's, whatever the number and size of
//! the objects stored. A paged list holds a whole page: its body, the
//! buffer it grew into and the parsed objects, all at once: 100
//! PipelineRollouts of 1.4 MiB and 300 carrying 250 KiB of annotations,
//! listed in the client's default pages of 500 (the audit's of 50), took a
//! leader to a 459.6 MiB peak, and to 46.8 MiB listed this way
//! (docs/performance.md, "The leader's memory under large objects";
//! `tests/apiserver/audit.rs` holds it under 64 MiB).
//!
//! Where the API server refuses a streaming list (its WatchList feature is
//! off, as by default before Kubernetes 1.32, or its etcd lacks progress
//! notifications), the watch falls back, for good, to pages of
//! [`FALLBACK_PAGE`] objects.

use std::fmt::Debug;

use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt as _};
use kube::Resource;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

/// Objects per page when the API server offers no streaming list: etcd
/// stores objects of up to 1.5 MiB, so a page holds at most about 8 MiB of
/// objects, parsed from a body of as much.
pub const FALLBACK_PAGE: u32 = 5;

/// Whether a watch error is the API server refusing a streaming list:
/// its message names `sendInitialEvents` (the WatchList feature is off) or
/// `RequestWatchProgress` (its etcd cannot confirm a watch is current, as
/// etcd before 3.4.31 and 3.5.8 cannot).
pub fn refuses_streaming(error: &watcher::Error) -> bool {
    let refusal = |message: &str| {
        message.contains("sendInitialEvents") || message.contains("RequestWatchProgress")
    };
    match error {
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => refusal(&status.message),
        watcher::Error::WatchError(status) => refusal(&status.message),
        _ => false,
    }
}

/// Watches `api` with `config` (its selectors), listing as a streaming list,
/// else in pages of [`FALLBACK_PAGE`]. Errors are the watcher's (restart it
/// with a backoff, as with kube-runtime's own watcher); the refusal that
/// makes it fall back is not passed on.
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let streaming: BoxStream<'static, watcher::Result<Event<K>>> =
        watcher::watcher(api.clone(), config.clone().streaming_lists()).boxed();
    futures_util::stream::unfold(
        (streaming, Some((api, config))),
        |(mut stream, mut fallback)| async move {
            loop {
                let item = stream.next().await?;
                if let Err(error) = &item
                    && refuses_streaming(error)
                    && let Some((api, config)) = fallback.take()
                {
                    tracing::warn!(
                        kind = %K::kind(&Default::default()),
                        page = FALLBACK_PAGE,
                        "the API server offers no streaming list (its WatchList feature is off): listing in small pages instead"
                    );
                    stream = watcher::watcher(api, config.page_size(FALLBACK_PAGE)).boxed();
                    continue;
                }
                return Some((item, (stream, fallback)));
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    #[test]
    fn only_a_refused_streaming_list_falls_back() {
        let refused = |code, message: &str| {
            watcher::Error::WatchStartFailed(kube::Error::Api(
                Status::failure(message, "Invalid").with_code(code).boxed(),
            ))
        };
        assert!(refuses_streaming(&refused(
            422,
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
        )));
        // What kube-apiserver 1.32 answers over etcd 3.4.23, in the watch.
        let old_etcd = watcher::Error::WatchError(
            Status::failure(
                "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled",
                "InternalError",
            )
            .with_code(500)
            .boxed(),
        );
        assert!(refuses_streaming(&old_etcd));
        assert!(!refuses_streaming(&refused(
            422,
            "something else is invalid"
        )));
        assert!(!refuses_streaming(&refused(
            500,
            "etcdserver: request timed out"
        )));
        assert!(!refuses_streaming(&watcher::Error::NoResourceVersion));
    }
}
