//! What the audit holds: every watched object, slim, with its latest
//! results, by namespace; which objects await judging; which namespaces'
//! reports need building again. Pure: the watch feeds it, the auditor
//! judges what it hands out.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use super::judge::ObjectResults;
use super::watch::WatchItem;
use crate::rollout::GuardedObject;

/// An object within its namespace: its kind's index and its name.
pub type Name = (usize, String);

/// One stored object.
#[derive(Debug, Clone)]
pub struct StoredObject {
    /// Its uid, for the report's resource reference.
    pub uid: Option<String>,
    /// What the rules read.
    pub view: Arc<GuardedObject>,
    /// Its results, once judged.
    pub results: Option<ObjectResults>,
}

/// Every object the watches deliver, and what is left to do.
#[derive(Debug, Default)]
pub struct Store {
    namespaces: BTreeMap<String, BTreeMap<Name, StoredObject>>,
    /// Objects to judge.
    unjudged: BTreeSet<(String, Name)>,
    /// Namespaces whose report must be built again.
    changed: BTreeSet<String>,
    /// Per kind being (re)listed: what the list has delivered so far.
    listing: BTreeMap<usize, HashSet<(String, String)>>,
    /// Kinds whose first list is complete.
    listed: BTreeSet<usize>,
}

impl Store {
    /// Takes in one watch item; says whether the kind's list just completed.
    pub fn take(&mut self, item: WatchItem) -> bool {
        match item {
            WatchItem::Listing { kind } => {
                self.listing.insert(kind, HashSet::new());
                false
            }
            WatchItem::Listed { kind } => {
                if let Some(seen) = self.listing.remove(&kind) {
                    self.forget_unseen(kind, &seen);
                }
                self.listed.insert(kind);
                true
            }
            WatchItem::Stored {
                kind,
                namespace,
                name,
                uid,
                view,
            } => {
                if let Some(seen) = self.listing.get_mut(&kind) {
                    seen.insert((namespace.clone(), name.clone()));
                }
                let objects = self.namespaces.entry(namespace.clone()).or_default();
                let key = (kind, name);
                let same = objects
                    .get(&key)
                    .is_some_and(|e| e.view == view && e.uid == uid);
                if !same {
                    // The results so far stay until the new ones replace
                    // them, so an unchanged outcome changes no report.
                    let results = objects.remove(&key).and_then(|e| e.results);
                    objects.insert(key.clone(), StoredObject { uid, view, results });
                    self.unjudged.insert((namespace, key));
                }
                false
            }
            WatchItem::Deleted {
                kind,
                namespace,
                name,
            } => {
                self.remove(&namespace, &(kind, name));
                false
            }
            WatchItem::Absent { kind } => {
                // Not served: it has no objects, and its list is complete.
                self.listing.remove(&kind);
                self.forget_unseen(kind, &HashSet::new());
                self.listed.insert(kind)
            }
            WatchItem::Failed { .. } => false,
        }
    }

    fn remove(&mut self, namespace: &str, key: &Name) {
        if let Some(objects) = self.namespaces.get_mut(namespace)
            && objects.remove(key).is_some()
        {
            if objects.is_empty() {
                self.namespaces.remove(namespace);
            }
            self.unjudged.remove(&(namespace.to_owned(), key.clone()));
            self.changed.insert(namespace.to_owned());
        }
    }

    /// Removes the objects of `kind` a relist did not deliver (deleted
    /// while the watch was down).
    fn forget_unseen(&mut self, kind: usize, seen: &HashSet<(String, String)>) {
        let gone: Vec<(String, Name)> = self
            .namespaces
            .iter()
            .flat_map(|(ns, objects)| {
                objects
                    .keys()
                    .filter(|(k, name)| *k == kind && !seen.contains(&(ns.clone(), name.clone())))
                    .map(|key| (ns.clone(), key.clone()))
            })
            .collect();
        for (namespace, key) in gone {
            self.remove(&namespace, &key);
        }
    }

    /// Whether every kind in `kinds` has completed its first list.
    pub fn listed(&self, kinds: usize) -> bool {
        (0..kinds).all(|k| self.listed.contains(&k))
    }

    /// Marks every object to be judged again (a new policy, the interval).
    pub fn judge_all_again(&mut self) {
        for (namespace, objects) in &self.namespaces {
            for key in objects.keys() {
                self.unjudged.insert((namespace.clone(), key.clone()));
            }
        }
    }

    /// Up to `limit` objects to judge, with their views.
    pub fn next_unjudged(&self, limit: usize) -> Vec<(String, Name, Arc<GuardedObject>)> {
        self.unjudged
            .iter()
            .take(limit)
            .filter_map(|(ns, key)| {
                let entry = self.namespaces.get(ns)?.get(key)?;
                Some((ns.clone(), key.clone(), Arc::clone(&entry.view)))
            })
            .collect()
    }

    /// Whether objects wait to be judged.
    pub fn has_unjudged(&self) -> bool {
        !self.unjudged.is_empty()
    }

    /// Records an object's results (when it is still there as judged).
    pub fn set_results(
        &mut self,
        namespace: &str,
        key: &Name,
        view: &Arc<GuardedObject>,
        results: ObjectResults,
    ) {
        self.unjudged.remove(&(namespace.to_owned(), key.clone()));
        if let Some(entry) = self
            .namespaces
            .get_mut(namespace)
            .and_then(|o| o.get_mut(key))
            && (Arc::ptr_eq(&entry.view, view) || entry.view == *view)
        {
            if entry.results.as_ref() != Some(&results) {
                self.changed.insert(namespace.to_owned());
            }
            entry.results = Some(results);
        }
    }

    /// The namespaces whose reports changed since the last call.
    pub fn take_changed(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.changed)
    }

    /// The objects of `namespace` (none when it has no objects left).
    pub fn objects(&self, namespace: &str) -> Option<&BTreeMap<Name, StoredObject>> {
        self.namespaces.get(namespace)
    }

    /// Every namespace with objects, and its objects.
    pub fn all(&self) -> impl Iterator<Item = (&String, &BTreeMap<Name, StoredObject>)> {
        self.namespaces.iter()
    }

    /// How many objects are held.
    pub fn len(&self) -> usize {
        self.namespaces.values().map(BTreeMap::len).sum()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::background::audit::judge::{RuleResult, Status};

    fn stored(ns: &str, name: &str, json: &str) -> WatchItem {
        WatchItem::Stored {
            kind: 0,
            namespace: ns.to_owned(),
            name: name.to_owned(),
            uid: None,
            view: Arc::new(GuardedObject::from_json(json).expect("JSON")),
        }
    }

    fn pass() -> ObjectResults {
        vec![RuleResult {
            rule: crate::policy::rules::Rule::TimeoutRange,
            status: Status::Pass,
            message: None,
        }]
    }

    #[test]
    fn a_relist_forgets_what_it_no_longer_delivers_and_an_unchanged_object_is_not_judged_again() {
        let mut store = Store::default();
        store.take(WatchItem::Listing { kind: 0 });
        store.take(stored("a", "x", "{}"));
        store.take(stored("b", "y", "{}"));
        assert!(!store.listed(1));
        assert!(store.take(WatchItem::Listed { kind: 0 }));
        assert!(store.listed(1));
        for (ns, key, json) in store.next_unjudged(10) {
            store.set_results(&ns, &key, &json, pass());
        }
        assert_eq!(store.take_changed().len(), 2);
        // The same object again: nothing to judge.
        store.take(stored("a", "x", "{}"));
        assert!(!store.has_unjudged());
        // A relist without b/y: its namespace is gone and must be reported.
        store.take(WatchItem::Listing { kind: 0 });
        store.take(stored("a", "x", "{}"));
        store.take(WatchItem::Listed { kind: 0 });
        assert!(store.objects("b").is_none());
        assert_eq!(store.take_changed(), BTreeSet::from(["b".to_owned()]));
        assert_eq!(store.len(), 1);
        // A result that does not change leaves the report alone.
        store.judge_all_again();
        for (ns, key, json) in store.next_unjudged(10) {
            store.set_results(&ns, &key, &json, pass());
        }
        assert!(store.take_changed().is_empty());
    }

    #[test]
    fn a_kind_not_served_counts_as_listed_with_no_objects() {
        let mut store = Store::default();
        store.take(WatchItem::Listing { kind: 0 });
        store.take(stored("a", "x", "{}"));
        store.take(WatchItem::Listed { kind: 0 });
        // Kind 1 was served once, then its CRD went away.
        store.take(WatchItem::Listing { kind: 1 });
        store.take(WatchItem::Stored {
            kind: 1,
            namespace: "b".to_owned(),
            name: "m".to_owned(),
            uid: None,
            view: Arc::default(),
        });
        assert!(!store.listed(3), "kind 1 is mid-list, kind 2 unheard of");
        assert!(store.take(WatchItem::Absent { kind: 2 }));
        assert!(!store.listed(3), "kind 1 is still mid-list");
        store.take(WatchItem::Absent { kind: 1 });
        assert!(store.listed(3), "every kind is listed or absent");
        assert!(
            store.objects("b").is_none(),
            "an absent kind has no objects"
        );
        assert_eq!(store.len(), 1);
        // Served again: its list delivers its objects as usual.
        store.take(WatchItem::Listing { kind: 2 });
        assert!(store.listed(3), "a relist keeps the kind listed");
    }
}
