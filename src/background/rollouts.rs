//! The one reader of PipelineRollouts that the leader's audit and
//! stale-force sweeper share: one kube-runtime watcher (listing as
//! [`super::list`] lists, restarted with the audit's backoff) whose
//! objects are read slim into the rules' view ([`Rollout`]), kept in one
//! reflector [`Store`]. The audit takes the watch events after the store
//! has taken them; the sweeper, a kube-runtime `Controller`, takes the
//! store and its subscription. Each object is read and held once, however
//! many of the two run.

use futures_util::{FutureExt as _, StreamExt as _};
use kube::runtime::reflector::{self, ReflectHandle, Store, store::Writer};
use kube::runtime::watcher::Event;
use tokio_util::sync::CancellationToken;

use super::audit::slim::Slim;
use super::audit::watch::{self, Events};
use super::audit::{self, AuditContext, AuditOptions};
use super::sweeper::{self, SweeperContext};
use crate::metrics::sweeper::SweepOutcome;

/// A PipelineRollout as the leader holds it: its identity and the rules'
/// view of what it stores (the audit's table, kind 0).
pub type Rollout = Slim<0>;

/// How many changes the sweeper may lag behind the watch before the
/// watch waits for it.
const CHANGES_BUFFER: usize = 256;

/// What the reader gives: the store, its subscription when one was asked
/// for, and the watch events that fill the store (they must be polled).
struct Reader {
    store: Store<Rollout>,
    changes: Option<ReflectHandle<Rollout>>,
    events: Events<0>,
}

/// Reads every PipelineRollout into one store; `subscribe` asks for a
/// stream of the objects as they change.
fn read(client: &kube::Client, subscribe: bool) -> Reader {
    let writer: Writer<Rollout> = if subscribe {
        Writer::new_shared(CHANGES_BUFFER, ())
    } else {
        Writer::default()
    };
    let store = writer.as_reader();
    let changes = writer.subscribe();
    let events = reflector::reflector(writer, watch::events::<0>(client.clone())).boxed();
    Reader {
        store,
        changes,
        events,
    }
}

/// Runs the audit and the sweeper that are asked for, on one reader of
/// PipelineRollouts, until `stop` is cancelled.
pub async fn run(
    client: kube::Client,
    audit: Option<(AuditContext, AuditOptions)>,
    sweeper: Option<(SweeperContext, std::time::Duration)>,
    stop: CancellationToken,
) {
    let Reader {
        store,
        changes,
        events,
    } = read(&client, sweeper.is_some());
    let events = match &sweeper {
        Some((context, _)) => {
            // What the sweeper's watch did is counted in its block.
            let metrics = context.metrics.clone();
            let mut started = false;
            events
                .inspect(move |event| match event {
                    Err(_) => metrics.record_sweep(SweepOutcome::WatchRestart),
                    Ok(Event::Init) => {
                        if started {
                            metrics.record_sweep(SweepOutcome::WatchRestart);
                        }
                        started = true;
                    }
                    Ok(_) => {}
                })
                .boxed()
        }
        None => events,
    };
    let audit = match audit {
        Some((context, options)) => {
            audit::run(client.clone(), context, options, events, stop.clone()).boxed()
        }
        // Nobody else takes the events: they are polled here, to fill the store.
        None => {
            let stop = stop.clone();
            async move {
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = events.for_each(|_| std::future::ready(())) => {}
                }
            }
            .boxed()
        }
    };
    let sweeper = match (sweeper, changes) {
        (Some((context, grace)), Some(changes)) => {
            sweeper::run(client, context, grace, store, changes, stop).boxed()
        }
        _ => std::future::ready(()).boxed(),
    };
    tokio::join!(audit, sweeper);
}
