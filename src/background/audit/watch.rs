//! The watch of one kind: kube-runtime's watcher over slim objects,
//! restarted with backoff when it breaks, turned into [`WatchItem`]s the
//! audit's store takes in.

use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};

use super::kinds::{AuditedKind, KINDS};
use super::slim::Slim;

/// What a watch delivered, for the kind at `kind` in [`KINDS`].
#[derive(Debug)]
pub enum WatchItem {
    /// A (re)list begins: objects not seen again before [`WatchItem::Listed`]
    /// are gone.
    Listing {
        /// The kind's index in [`KINDS`].
        kind: usize,
    },
    /// The list is complete.
    Listed {
        /// The kind's index in [`KINDS`].
        kind: usize,
    },
    /// An object as stored now.
    Stored {
        /// The kind's index in [`KINDS`].
        kind: usize,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its uid.
        uid: Option<String>,
        /// The kept parts, as JSON.
        json: Box<str>,
    },
    /// An object was deleted.
    Deleted {
        /// The kind's index in [`KINDS`].
        kind: usize,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The watch failed; it is restarted with backoff.
    Failed {
        /// The kind's index in [`KINDS`].
        kind: usize,
        /// Why.
        error: String,
    },
}

fn index_of<K: AuditedKind>() -> usize {
    KINDS
        .iter()
        .position(|k| k.group == K::GROUP && k.kind == K::KIND)
        .unwrap_or(0)
}

/// Watches every object of `K` in the cluster, slim, with the watcher's
/// default backoff between restarts.
pub fn kind<K: AuditedKind>(client: kube::Client) -> BoxStream<'static, WatchItem> {
    let kind = index_of::<K>();
    let api: Api<Slim<K>> = Api::all(client);
    watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |event| {
            std::future::ready(match event {
                Ok(Event::Init) => Some(WatchItem::Listing { kind }),
                Ok(Event::InitDone) => Some(WatchItem::Listed { kind }),
                Ok(Event::Apply(object) | Event::InitApply(object)) => {
                    let Slim { metadata, json, .. } = object;
                    match (metadata.namespace, metadata.name) {
                        (Some(namespace), Some(name)) => Some(WatchItem::Stored {
                            kind,
                            namespace,
                            name,
                            uid: metadata.uid,
                            json,
                        }),
                        _ => None,
                    }
                }
                Ok(Event::Delete(object)) => {
                    match (object.metadata.namespace, object.metadata.name) {
                        (Some(namespace), Some(name)) => Some(WatchItem::Deleted {
                            kind,
                            namespace,
                            name,
                        }),
                        _ => None,
                    }
                }
                Err(e) => Some(WatchItem::Failed {
                    kind,
                    error: e.to_string(),
                }),
            })
        })
        .boxed()
}
