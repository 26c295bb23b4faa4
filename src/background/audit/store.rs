//! What the audit holds: per kind, kube-runtime's reflector store of the
//! objects its watch delivers (its writer takes each watch event, and a
//! relist replaces the store whole, so objects deleted while the watch was
//! down are gone); on top, each judged object's latest results by
//! namespace, which objects await judging, and which namespaces' reports
//! need building again. Pure: the watch feeds it, the auditor judges what
//! it hands out.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures_util::FutureExt as _;
use kube::runtime::reflector::{ObjectRef, store::Writer};
use kube::runtime::watcher::Event;

use super::audited::{COUNT, Entry};
use super::judge::ObjectResults;
use super::watch::WatchItem;
use crate::rollout::GuardedObject;

/// An object within its namespace: its kind's index and its name.
pub type Name = (usize, String);

/// One judged object: as it was judged, and its results.
#[derive(Debug, Clone)]
pub struct StoredObject {
    pub object: Arc<Entry>,
    pub results: ObjectResults,
}

/// Every object the watches deliver, and what is left to do.
pub struct Store {
    /// Per kind, the writer of its reflector store.
    kinds: Vec<Writer<Entry>>,
    namespaces: BTreeMap<String, BTreeMap<Name, StoredObject>>,
    /// Objects to judge.
    unjudged: BTreeSet<(String, Name)>,
    /// Namespaces whose report must be built again.
    changed: BTreeSet<String>,
}

impl Default for Store {
    fn default() -> Self {
        Self {
            kinds: (0..COUNT).map(Writer::new).collect(),
            namespaces: BTreeMap::new(),
            unjudged: BTreeSet::new(),
            changed: BTreeSet::new(),
        }
    }
}

impl Store {
    /// Takes in one watch item; says whether the kind's list just completed.
    pub fn take(&mut self, item: WatchItem) -> bool {
        match item {
            WatchItem::Event { kind, event } => {
                self.kinds[kind].apply_watcher_event(&event);
                match event {
                    Event::Apply(object) => {
                        if let Some(stored) = self.get(kind, &object.namespace, &object.name) {
                            self.offer(kind, stored);
                        }
                        false
                    }
                    Event::Delete(object) => {
                        self.remove(&object.namespace, &(kind, object.name));
                        false
                    }
                    Event::InitDone => {
                        self.relisted(kind);
                        true
                    }
                    // The writer holds a relist's objects until it is done.
                    Event::Init | Event::InitApply(_) => false,
                }
            }
            WatchItem::Absent { kind } => {
                // Not served: it has no objects, and its list is complete.
                let writer = &mut self.kinds[kind];
                writer.apply_watcher_event(&Event::Init);
                writer.apply_watcher_event(&Event::InitDone);
                self.relisted(kind);
                true
            }
            WatchItem::Failed { .. } => false,
        }
    }

    /// The object of `kind` stored as `namespace`/`name`.
    fn get(&self, kind: usize, namespace: &str, name: &str) -> Option<Arc<Entry>> {
        self.kinds[kind]
            .as_reader()
            .get(&ObjectRef::new_with(name, kind).within(namespace))
    }

    /// Takes in an object as stored now: it waits to be judged unless it
    /// was judged as it is.
    fn offer(&mut self, kind: usize, stored: Arc<Entry>) {
        let key = (kind, stored.name.clone());
        let judged = self
            .namespaces
            .get_mut(&stored.namespace)
            .and_then(|objects| objects.get_mut(&key));
        match judged {
            Some(judged) if *judged.object == *stored => judged.object = stored,
            // The results so far stay until the new ones replace them, so
            // an unchanged outcome changes no report.
            _ => {
                self.unjudged.insert((stored.namespace.clone(), key));
            }
        }
    }

    /// After a (re)list of `kind` is in its store: what it no longer holds
    /// (deleted while the watch was down) is forgotten, and what it holds
    /// is taken in.
    fn relisted(&mut self, kind: usize) {
        let gone: Vec<(String, Name)> = self
            .namespaces
            .iter()
            .flat_map(|(ns, objects)| objects.keys().map(move |key| (ns, key)))
            .chain(self.unjudged.iter().map(|(ns, key)| (ns, key)))
            .filter(|(ns, (k, name))| *k == kind && self.get(kind, ns, name).is_none())
            .map(|(ns, key)| (ns.clone(), key.clone()))
            .collect();
        for (namespace, key) in gone {
            self.remove(&namespace, &key);
        }
        for stored in self.kinds[kind].as_reader().state() {
            self.offer(kind, stored);
        }
    }

    fn remove(&mut self, namespace: &str, key: &Name) {
        let waiting = self.unjudged.remove(&(namespace.to_owned(), key.clone()));
        let mut judged = false;
        if let Some(objects) = self.namespaces.get_mut(namespace) {
            judged = objects.remove(key).is_some();
            if objects.is_empty() {
                self.namespaces.remove(namespace);
            }
        }
        if waiting || judged {
            self.changed.insert(namespace.to_owned());
        }
    }

    /// Whether every kind in `kinds` has completed its first list.
    pub fn listed(&self, kinds: usize) -> bool {
        self.kinds[..kinds]
            .iter()
            .all(|w| w.as_reader().wait_until_ready().now_or_never().is_some())
    }

    /// Marks every object to be judged again (a new policy, the interval).
    pub fn judge_all_again(&mut self) {
        for (kind, writer) in self.kinds.iter().enumerate() {
            for stored in writer.as_reader().state() {
                let key = (kind, stored.name.clone());
                self.unjudged.insert((stored.namespace.clone(), key));
            }
        }
    }

    /// Up to `limit` objects to judge, with their views.
    pub fn next_unjudged(&self, limit: usize) -> Vec<(String, Name, Arc<GuardedObject>)> {
        self.unjudged
            .iter()
            .take(limit)
            .map(|(ns, key)| {
                let view = self
                    .get(key.0, ns, &key.1)
                    .map(|stored| Arc::clone(&stored.view))
                    .unwrap_or_default();
                (ns.clone(), key.clone(), view)
            })
            .collect()
    }

    #[cfg(test)]
    /// Whether objects wait to be judged.
    pub fn has_unjudged(&self) -> bool {
        !self.unjudged.is_empty()
    }

    /// Records an object's results (when it is still stored as judged).
    pub fn set_results(
        &mut self,
        namespace: &str,
        key: &Name,
        view: &Arc<GuardedObject>,
        results: ObjectResults,
    ) {
        self.unjudged.remove(&(namespace.to_owned(), key.clone()));
        let Some(stored) = self.get(key.0, namespace, &key.1) else {
            return;
        };
        if !(Arc::ptr_eq(&stored.view, view) || stored.view == *view) {
            return;
        }
        let objects = self.namespaces.entry(namespace.to_owned()).or_default();
        if objects
            .get(key)
            .is_none_or(|before| before.results != results)
        {
            self.changed.insert(namespace.to_owned());
        }
        let judged = StoredObject {
            object: stored,
            results,
        };
        objects.insert(key.clone(), judged);
    }

    /// The namespaces whose reports changed since the last call.
    pub fn take_changed(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.changed)
    }

    /// The judged objects of `namespace` (none when it has none left).
    pub fn objects(&self, namespace: &str) -> Option<&BTreeMap<Name, StoredObject>> {
        self.namespaces.get(namespace)
    }

    /// Every namespace with judged objects, and its objects.
    pub fn all(&self) -> impl Iterator<Item = (&String, &BTreeMap<Name, StoredObject>)> {
        self.namespaces.iter()
    }

    /// How many objects are held.
    pub fn len(&self) -> usize {
        self.kinds.iter().map(|w| w.as_reader().len()).sum()
    }

    /// Whether none are.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::background::audit::judge::{RuleResult, Status};

    fn entry(ns: &str, name: &str, json: &str) -> Entry {
        Entry {
            namespace: ns.to_owned(),
            name: name.to_owned(),
            uid: None,
            view: Arc::new(GuardedObject::from_json(json).expect("JSON")),
        }
    }

    fn event(kind: usize, event: Event<Entry>) -> WatchItem {
        WatchItem::Event { kind, event }
    }

    fn listed(ns: &str, name: &str, json: &str) -> WatchItem {
        event(0, Event::InitApply(entry(ns, name, json)))
    }

    fn stored(ns: &str, name: &str, json: &str) -> WatchItem {
        event(0, Event::Apply(entry(ns, name, json)))
    }

    fn pass() -> ObjectResults {
        vec![RuleResult {
            rule: crate::policy::rules::Rule::TimeoutRange,
            status: Status::Pass,
            message: None,
        }]
    }

    fn judge_all(store: &mut Store) {
        for (ns, key, view) in store.next_unjudged(10) {
            store.set_results(&ns, &key, &view, pass());
        }
    }

    #[test]
    fn a_relist_forgets_what_it_no_longer_delivers_and_an_unchanged_object_is_not_judged_again() {
        let mut store = Store::default();
        store.take(event(0, Event::Init));
        store.take(listed("a", "x", "{}"));
        store.take(listed("b", "y", "{}"));
        assert!(!store.listed(1));
        assert!(store.take(event(0, Event::InitDone)));
        assert!(store.listed(1));
        judge_all(&mut store);
        assert_eq!(store.take_changed().len(), 2);
        // The same object again: nothing to judge.
        store.take(stored("a", "x", "{}"));
        assert!(!store.has_unjudged());
        // A relist without b/y: its namespace is gone and must be reported.
        store.take(event(0, Event::Init));
        store.take(listed("a", "x", "{}"));
        store.take(event(0, Event::InitDone));
        assert!(store.objects("b").is_none());
        assert_eq!(store.take_changed(), BTreeSet::from(["b".to_owned()]));
        assert_eq!(store.len(), 1);
        assert!(!store.has_unjudged(), "a/x is as judged");
        // A result that does not change leaves the report alone.
        store.judge_all_again();
        judge_all(&mut store);
        assert!(store.take_changed().is_empty());
        // A change the rules read is judged again; a deletion is reported.
        store.take(stored(
            "a",
            "x",
            r#"{"status": {"upgradeInProgress": "x"}}"#,
        ));
        assert!(store.has_unjudged());
        store.take(event(0, Event::Delete(entry("a", "x", "{}"))));
        assert!(!store.has_unjudged());
        assert_eq!(store.take_changed(), BTreeSet::from(["a".to_owned()]));
        assert!(store.is_empty());
    }

    #[test]
    fn a_kind_not_served_counts_as_listed_with_no_objects() {
        let mut store = Store::default();
        store.take(event(0, Event::Init));
        store.take(listed("a", "x", "{}"));
        store.take(event(0, Event::InitDone));
        // Kind 1 was served once, then its CRD went away.
        store.take(event(1, Event::Init));
        store.take(event(1, Event::InitApply(entry("b", "m", "{}"))));
        store.take(event(1, Event::InitDone));
        assert_eq!(store.len(), 2);
        assert!(!store.listed(3), "kind 2 unheard of");
        assert!(store.take(WatchItem::Absent { kind: 2 }));
        assert!(store.listed(3), "every kind is listed or absent");
        store.take(WatchItem::Absent { kind: 1 });
        assert!(store.listed(3));
        assert!(
            store.objects("b").is_none()
                && store.next_unjudged(10).iter().all(|(ns, ..)| ns != "b"),
            "an absent kind has no objects"
        );
        assert_eq!(store.len(), 1);
        // Served again: its list delivers its objects as usual.
        store.take(event(2, Event::Init));
        assert!(store.listed(3), "a relist keeps the kind listed");
    }
}
