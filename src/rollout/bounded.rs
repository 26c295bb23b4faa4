//! The view as a store keeps it: what admission's reader reads of a stored
//! object, cut so that what is kept is bounded whatever a tenant stores.
//! The audit and the stale-force sweeper hold every stored rollout and
//! namespace-level ConfigMap this way, for as long as it is stored.
//!
//! Of the labels and annotations, only the keys the stored-object rules
//! read are kept ([`KEPT_KEYS`]); ownerReferences, finalizers and a child's
//! `spec` and `status` text are dropped (no audited kind is a child); the
//! rest is cut to the bounds below. Wrong shapes are kept as the view
//! records them (the JSON type found), so the rules still say what was
//! found where.

use serde_json::Value;

use super::keys::{Keys, TemplateMeta};
use super::lifecycle::Lifecycle;
use super::{ConfigData, FORCE_PROMOTE_FOR, GuardedObject};
use crate::kinds::{
    ALLOW_DATA_LOSS, BOOKKEEPING_ANNOTATIONS, BOOKKEEPING_LABELS, FORCE_PROMOTE_LABEL,
    MARKED_FOR_DELETION,
};
use crate::lenient::{Obj, Text};
use crate::namespace_config::CONFIG_LABEL;

/// The most bytes of one string kept (before [`CUT_MARK`]): the rules read
/// a few hundred bytes of any value.
const LEAF_BYTES: usize = 512;

/// What a cut string ends with, so that it never reads as a valid value.
const CUT_MARK: &str = "…";

/// The most entries kept of a list or an object kept as found.
const LEAF_ENTRIES: usize = 16;

/// How many levels of lists and objects below a value kept as found are
/// kept; deeper ones are kept empty.
const LEAF_DEPTH: usize = 4;

/// The bytes of strings (and of keys inside values) one object keeps in
/// all; past it they are kept empty, marked as cut.
const OBJECT_BUDGET: usize = 16 * 1024;

/// The label and annotation keys kept: the switches and records the
/// stored-object rules read on a rollout (its own annotations and its
/// child template's keys) and on a namespace-level ConfigMap (its label).
const KEPT_KEYS: [&[&str]; 3] = [
    &[
        ALLOW_DATA_LOSS,
        FORCE_PROMOTE_FOR,
        CONFIG_LABEL,
        FORCE_PROMOTE_LABEL,
        MARKED_FOR_DELETION,
    ],
    &BOOKKEEPING_LABELS,
    &BOOKKEEPING_ANNOTATIONS,
];

/// The string bytes an object may still keep.
struct Budget(usize);

impl Budget {
    /// Cuts `text` to [`LEAF_BYTES`] and to what is left, which pays for it.
    fn text(&mut self, text: &mut String) {
        let limit = LEAF_BYTES.min(self.0);
        if text.len() <= limit {
            self.0 -= text.len();
            return;
        }
        let end = (0..=limit)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        self.0 -= end;
        // A new string: a cut one would keep the whole one's memory.
        *text = [&text[..end], CUT_MARK].concat();
    }

    fn lenient(&mut self, text: &mut Text) {
        if let Some(text) = &mut text.0 {
            self.text(text);
        }
    }

    /// Cuts a value kept as found: its strings, and its lists and objects
    /// to [`LEAF_ENTRIES`] entries, `depth` more levels down.
    fn value(&mut self, value: &mut Value, depth: usize) {
        match value {
            Value::String(text) => self.text(text),
            Value::Array(items) => {
                let found = std::mem::take(items);
                if depth > 0 {
                    for mut item in found.into_iter().take(LEAF_ENTRIES) {
                        self.value(&mut item, depth - 1);
                        items.push(item);
                    }
                }
            }
            Value::Object(map) => {
                let found = std::mem::take(map);
                if depth > 0 {
                    for (mut key, mut inner) in found.into_iter().take(LEAF_ENTRIES) {
                        self.text(&mut key);
                        self.value(&mut inner, depth - 1);
                        map.insert(key, inner);
                    }
                }
            }
            _ => {}
        }
    }

    fn slot(&mut self, value: &mut Option<Value>) {
        if let Some(value) = value {
            self.value(value, LEAF_DEPTH);
        }
    }

    /// Keeps the [`KEPT_KEYS`] of a label or annotation map, cut.
    fn keys(&mut self, keys: &mut Obj<Keys>) {
        if let Obj::Present(Keys(entries)) = keys {
            entries.retain(|(key, _)| KEPT_KEYS.iter().any(|kept| kept.contains(&key.as_str())));
            entries.shrink_to_fit();
            for (_, value) in entries {
                self.value(value, LEAF_DEPTH);
            }
        }
    }

    fn template(&mut self, meta: &mut Obj<TemplateMeta>) {
        if let Obj::Present(meta) = meta {
            self.keys(&mut meta.labels);
            self.keys(&mut meta.annotations);
        }
    }

    fn lifecycle(&mut self, lifecycle: &mut Obj<Lifecycle>) {
        if let Obj::Present(l) = lifecycle {
            self.slot(&mut l.pause_grace_period_seconds);
            self.slot(&mut l.deletion_grace_period_seconds);
            self.slot(&mut l.delete_grace_period_seconds);
        }
    }

    /// A ConfigMap's `data`: the strategy's value cut, under the key it
    /// was found under.
    fn data(&mut self, data: &mut Obj<ConfigData>) {
        if let Obj::Present(found) = data
            && let Some(value) = found.strategy_value_mut()
        {
            self.value(value, LEAF_DEPTH);
        }
    }
}

impl GuardedObject {
    /// Reads a stored object as the audit and the sweeper keep it:
    /// admission's reader, then [`bounded`](Self::bounded). Only invalid
    /// JSON fails.
    pub(crate) fn from_stored(json: &[u8]) -> Result<Self, serde_json::Error> {
        crate::skim::from_slice::<Self>(json).map(Self::bounded)
    }

    /// This view, bounded as the module says.
    fn bounded(mut self) -> Self {
        let mut budget = Budget(OBJECT_BUDGET);
        self.child = None;
        if let Obj::Present(meta) = &mut self.metadata {
            meta.owner_references = None;
            meta.finalizers = None;
            budget.keys(&mut meta.annotations);
            budget.keys(&mut meta.labels);
            budget.lenient(&mut meta.uid);
        }
        if let Obj::Present(spec) = &mut self.spec {
            if let Obj::Present(pipeline) = &mut spec.pipeline {
                budget.template(&mut pipeline.metadata);
                if let Obj::Present(inner) = &mut pipeline.spec {
                    budget.lifecycle(&mut inner.lifecycle);
                }
            }
            for template in [&mut spec.mono_vertex, &mut spec.inter_step_buffer_service] {
                if let Obj::Present(template) = template {
                    budget.template(&mut template.metadata);
                }
            }
            if let Obj::Present(strategy) = &mut spec.strategy {
                if let Obj::Present(recycle) = &mut strategy.recycle_strategy {
                    budget.slot(&mut recycle.scale_factor);
                }
                if let Obj::Present(progressive) = &mut strategy.progressive {
                    budget.slot(&mut progressive.force_promote);
                }
            }
            for rider in spec.riders.items_mut() {
                if let Obj::Present(rider) = rider
                    && let Obj::Present(definition) = &mut rider.definition
                {
                    budget.lenient(&mut definition.api_version);
                    budget.lenient(&mut definition.kind);
                }
            }
            budget.lifecycle(&mut spec.lifecycle);
        }
        if let Obj::Present(status) = &mut self.status {
            budget.lenient(&mut status.upgrade_in_progress);
            for condition in status.conditions.items_mut() {
                if let Obj::Present(c) = condition {
                    for text in [
                        &mut c.type_,
                        &mut c.status,
                        &mut c.reason,
                        &mut c.last_transition_time,
                    ] {
                        budget.lenient(text);
                    }
                }
            }
            if let Obj::Present(pause) = &mut status.pause_status {
                budget.lenient(&mut pause.last_pause_begin_time);
            }
            if let Obj::Present(progressive) = &mut status.progressive_status
                && let Obj::Present(upgrading) = &mut progressive.upgrading_pipeline_status
            {
                budget.lenient(&mut upgrading.name);
            }
        }
        budget.data(&mut self.data);
        self
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::lenient::JsonKind;
    use crate::rollout::{LifecycleKey, TimeoutSlot};

    fn stored(object: &Value) -> GuardedObject {
        GuardedObject::from_stored(object.to_string().as_bytes()).expect("JSON")
    }

    /// The value `pauseGracePeriodSeconds` keeps when it is `value`.
    fn kept(value: Value) -> Value {
        let object = json!({"spec": {"pipeline": {"spec": {"lifecycle": {
            "pauseGracePeriodSeconds": value}}}}});
        match stored(&object).lifecycle_timeout(LifecycleKey::Pause) {
            TimeoutSlot::Set(value) => value.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_string_is_cut_at_a_char_boundary_and_marked() {
        let long = "é".repeat(200_000);
        let end = (0..=LEAF_BYTES)
            .rev()
            .find(|&i| long.is_char_boundary(i))
            .unwrap_or(0);
        let object = stored(&json!({"metadata": {"annotations": {ALLOW_DATA_LOSS: long}}}));
        let got = object.allow_data_loss().and_then(Value::as_str);
        assert_eq!(got, Some(format!("{}{CUT_MARK}", &long[..end]).as_str()));
        let exact = "x".repeat(LEAF_BYTES);
        assert_eq!(
            kept(json!(exact)),
            json!(exact),
            "a string of the bound is kept whole"
        );
    }

    #[test]
    fn a_value_kept_as_found_keeps_few_entries_and_levels() {
        let wide: serde_json::Map<String, Value> =
            (0..1_000).map(|i| (format!("k{i:04}"), json!(i))).collect();
        let got = kept(json!({"wide": wide, "long": (0..1_000).collect::<Vec<_>>()}));
        assert_eq!(
            got["wide"].as_object().map(serde_json::Map::len),
            Some(LEAF_ENTRIES)
        );
        assert_eq!(got["long"].as_array().map(Vec::len), Some(LEAF_ENTRIES));
        let mut deep = json!("bottom");
        for _ in 0..50 {
            deep = json!([deep]);
        }
        let mut level = &kept(deep);
        let mut depth = 0;
        while let Some(inner) = level.as_array().and_then(|a| a.first()) {
            level = inner;
            depth += 1;
        }
        assert_eq!(depth, LEAF_DEPTH, "levels past the depth are kept empty");
    }

    #[test]
    fn one_objects_strings_share_a_budget_and_every_item_stays() {
        let big = "y".repeat(10_000);
        let conditions: Vec<Value> = (0..200).map(|_| json!({"type": big})).collect();
        let object = stored(&json!({"status": {"conditions": conditions}}));
        let kept = format!("{object:?}");
        assert!(
            kept.len() < OBJECT_BUDGET + 200 * 200,
            "kept {} bytes of {} stored",
            kept.len(),
            200 * 10_000
        );
        let Obj::Present(status) = &object.status else {
            panic!("a status")
        };
        let items = status.conditions.items();
        assert_eq!(
            items.len(),
            200,
            "every item is still there, for the rules to count"
        );
        let last = items[199].get().and_then(|c| c.type_.as_deref());
        assert_eq!(
            last,
            Some(CUT_MARK),
            "past the budget a string is kept empty, marked as cut"
        );
    }

    #[test]
    fn only_the_kept_keys_stay_and_wrong_shapes_are_recorded() {
        let object = stored(&json!({
            "kind": "PipelineRollout",
            "metadata": {
                "annotations": {ALLOW_DATA_LOSS: "true", "numaplane.numaproj.io/other": "x"},
                "ownerReferences": [{"kind": "X", "name": "y".repeat(10_000)}],
                "finalizers": ["z".repeat(10_000)],
            },
            "spec": {"pipeline": "p".repeat(10_000), "riders": {"a": 1}},
        }));
        assert!(object.forces_reapply());
        assert_eq!(object.annotation("numaplane.numaproj.io/other"), None);
        assert_eq!(
            (object.owner_references(), object.finalizers()),
            (None, None)
        );
        assert_eq!(object.child_content(), None);
        assert_eq!(
            object.timeout(),
            TimeoutSlot::Blocked {
                path: "spec.pipeline",
                found: JsonKind::String
            }
        );
        assert!(matches!(
            object.spec.get().map(|s| &s.riders),
            Some(crate::lenient::List::Wrong(JsonKind::Object))
        ));
        assert!(
            GuardedObject::from_stored(b"{\"spec\": ").is_err(),
            "only invalid JSON fails"
        );
    }

    #[test]
    fn a_long_strategy_is_cut_under_the_keys_it_was_found_under() {
        let object = stored(&json!({"data": {
            "upgradeStrategy": "x".repeat(1_000), "UpgradeStrategy": "y", "other": "z"}}));
        let cut = format!("{}{CUT_MARK}", "x".repeat(LEAF_BYTES));
        let expected = <ConfigData as serde::Deserialize>::deserialize(
            json!({"upgradeStrategy": cut, "UpgradeStrategy": "y"}),
        )
        .expect("data");
        assert_eq!(object.config_data(), &Obj::Present(expected));
    }
}
