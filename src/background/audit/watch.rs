//! The watches of the audited kinds: kube-runtime's watcher over
//! [`Audited`] objects, one per kind in [`KINDS`], listed as
//! [`crate::background::list`] lists (one object at a time where the API
//! server streams lists), restarted with backoff when it breaks, turned
//! into [`WatchItem`]s: the events the audit's reflector stores take in.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, Event};

use super::audited::{
    Audited, COUNT, Entry, ISB_SERVICE_ROLLOUTS, KINDS, MONO_VERTEX_ROLLOUTS, NAMESPACE_CONFIGS,
    PIPELINE_ROLLOUTS,
};

/// What a watch delivered, for the kind at `kind` in [`KINDS`].
#[derive(Debug)]
pub enum WatchItem {
    /// A watch event, for the kind's reflector store.
    Event { kind: usize, event: Event<Entry> },
    /// The kind is not served (its CRD is not installed): it has no
    /// objects. Sent once each time the kind goes missing; the watch keeps
    /// retrying with backoff, silently, and lists it once it is served.
    Absent { kind: usize },
    /// The watch failed; it is restarted with backoff.
    Failed { kind: usize, error: String },
}

/// The watch events of one audited kind, restarted with backoff.
pub type Events<const KIND: usize> = BoxStream<'static, watcher::Result<Event<Audited<KIND>>>>;

/// Watches every kind in [`KINDS`], each reporting its own index; the
/// PipelineRollouts from `rollouts` (the reader the leader's controllers
/// share, [`crate::background::rollout_watch`]).
pub fn all(
    client: &kube::Client,
    rollouts: Events<PIPELINE_ROLLOUTS>,
) -> impl futures_util::Stream<Item = WatchItem> + Unpin {
    let watches: [BoxStream<'static, WatchItem>; COUNT] = [
        items(rollouts),
        items(events::<MONO_VERTEX_ROLLOUTS>(client.clone())),
        items(events::<ISB_SERVICE_ROLLOUTS>(client.clone())),
        items(events::<NAMESPACE_CONFIGS>(client.clone())),
    ];
    futures_util::stream::select_all(watches)
}

/// The HTTP status code the API server answered a list or watch with.
fn code(error: &watcher::Error) -> Option<u16> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status.code),
        watcher::Error::WatchError(status) => Some(status.code),
        _ => None,
    }
}

/// Whether a watch error says the resource is not served at all (a list
/// or watch answered 404: no CRD for it; the API server's answer is then
/// plain text, so only the code says so).
pub fn not_served(error: &watcher::Error) -> bool {
    code(error) == Some(404)
}

/// Whether a watch error says the audit may not list the resource (403).
/// For the namespace-level ConfigMaps (a kind whose watch selects by
/// label) this counts as nothing to judge, like a kind not served, so an
/// install whose RBAC predates that watch still audits its rollouts.
fn forbidden(error: &watcher::Error) -> bool {
    code(error) == Some(403)
}

/// The watcher's default backoff (0.8 s doubling to 30 s, with jitter),
/// except that the `Init` the watcher emits before every list attempt does
/// not reset it: otherwise a list that keeps failing (a kind not served)
/// is retried about every second for ever.
struct ListBackoff {
    inner: watcher::DefaultBackoff,
    /// Set while the last event seen was an `Init`.
    init: Arc<AtomicBool>,
}

impl Iterator for ListBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.inner.next()
    }
}

impl Backoff for ListBackoff {
    fn reset(&mut self) {
        if !self.init.load(Ordering::Relaxed) {
            self.inner.reset();
        }
    }
}

/// Watches every object of the kind at `KIND` in [`KINDS`], listed as
/// [`crate::background::list`] lists, restarted with [`ListBackoff`].
pub fn events<const KIND: usize>(client: kube::Client) -> Events<KIND> {
    let api: Api<Audited<KIND>> = Api::all(client);
    let init = Arc::new(AtomicBool::new(false));
    let backoff = ListBackoff {
        inner: watcher::DefaultBackoff::default(),
        init: Arc::clone(&init),
    };
    let config = match KINDS[KIND].label_selector {
        Some(selector) => watcher::Config::default().labels(selector),
        None => watcher::Config::default(),
    };
    crate::background::list::watch(api, config)
        .inspect(move |event| init.store(matches!(event, Ok(Event::Init)), Ordering::Relaxed))
        .backoff(backoff)
        .boxed()
}

/// The object as the store holds it; `None` without a name and namespace.
fn entry<const KIND: usize>(object: Audited<KIND>) -> Option<Entry> {
    let Audited { metadata, view } = object;
    Some(Entry {
        namespace: metadata.namespace?,
        name: metadata.name?,
        uid: metadata.uid,
        view,
    })
}

/// The watch events of the kind at `KIND` as the store's items, naming
/// the kind by `KIND`. A kind that is not served is reported
/// [`WatchItem::Absent`] once, and nothing more is said of it (no restart)
/// until it is served again.
fn items<const KIND: usize>(events: Events<KIND>) -> BoxStream<'static, WatchItem> {
    let kind = KIND;
    let mut absent = false;
    let optional = KINDS[KIND].label_selector.is_some();
    events
        .filter_map(move |event| {
            if event.as_ref().is_ok_and(|e| !matches!(e, Event::Init)) {
                absent = false;
            }
            let event = match event {
                Err(e) if not_served(&e) || (optional && forbidden(&e)) => {
                    let first = !absent;
                    absent = true;
                    return std::future::ready(first.then_some(WatchItem::Absent { kind }));
                }
                Err(e) => {
                    let error = e.to_string();
                    return std::future::ready(Some(WatchItem::Failed { kind, error }));
                }
                Ok(Event::Init) => Some(Event::Init),
                Ok(Event::InitDone) => Some(Event::InitDone),
                Ok(Event::InitApply(object)) => entry(object).map(Event::InitApply),
                Ok(Event::Apply(object)) => entry(object).map(Event::Apply),
                Ok(Event::Delete(object)) => entry(object).map(Event::Delete),
            };
            std::future::ready(event.map(|event| WatchItem::Event { kind, event }))
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn list_failed(status: Status) -> watcher::Error {
        watcher::Error::InitialListFailed(kube::Error::Api(status.boxed()))
    }

    #[test]
    fn only_a_404_says_the_kind_is_not_served() {
        // What kube makes of the API server's plain-text "404 page not found".
        let plain =
            Status::failure("404 page not found", "Failed to parse error data").with_code(404);
        assert!(not_served(&list_failed(plain)));
        let json = Status::failure("not found", "NotFound").with_code(404);
        assert!(not_served(&list_failed(json)));
        let forbidden = Status::failure("cannot list", "Forbidden").with_code(403);
        assert!(!not_served(&list_failed(forbidden.clone())));
        assert!(super::forbidden(&list_failed(forbidden)));
        assert!(!not_served(&watcher::Error::NoResourceVersion));
    }

    #[test]
    fn the_backoff_grows_across_failed_lists_and_resets_after_a_delivered_one() {
        let init = Arc::new(AtomicBool::new(false));
        let mut backoff = ListBackoff {
            inner: watcher::DefaultBackoff::default(),
            init: Arc::clone(&init),
        };
        let first = backoff.next().expect("a delay");
        // The watcher's Init before each try: no reset, the delays grow.
        init.store(true, Ordering::Relaxed);
        for _ in 0..5 {
            backoff.reset();
            backoff.next();
        }
        let later = backoff.next().expect("a delay");
        assert!(later > first * 4, "{first:?} then {later:?}");
        // Something delivered: back to the start.
        init.store(false, Ordering::Relaxed);
        backoff.reset();
        let again = backoff.next().expect("a delay");
        assert!(again < later / 4, "{later:?} then {again:?}");
    }
}
