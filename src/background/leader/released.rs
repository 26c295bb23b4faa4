//! The watch of the Lease that wakes the election loop: a replica waiting
//! for the Lease sleeps until the expiry it last read, so it is told when
//! the Lease is released (no holder) or deleted, and campaigns at once.

use std::sync::Arc;

use futures_util::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Wakes `released` whenever the Lease has no holder (released, or never
/// held), and `deleted` when it is deleted.
pub async fn watch(
    api: Api<Lease>,
    name: String,
    (released, deleted): (Arc<Notify>, Arc<Notify>),
    stop: CancellationToken,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher::watcher(api, config).default_backoff();
    let mut stream = std::pin::pin!(stream);
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return,
            event = stream.next() => event,
        };
        match event {
            None => return,
            Some(Ok(Event::Apply(lease) | Event::InitApply(lease))) => {
                let free = lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.holder_identity.as_deref())
                    .is_none_or(str::is_empty);
                if free {
                    released.notify_one();
                }
            }
            Some(Ok(Event::Delete(_))) => deleted.notify_one(),
            Some(Ok(Event::Init | Event::InitDone)) => {}
            Some(Err(e)) => {
                tracing::debug!(error = %e, "the watch of the Lease failed; restarting with backoff");
            }
        }
    }
}
