//! A child's whole `spec` and `status`, kept beside the lenient view for
//! rule 26 (Numaplane's and Numaflow's controllers alone change a rollout's
//! children), and who owns a child.
//!
//! The view is read in one pass: the object's `apiVersion` and `kind` come
//! first in what the API server sends (it writes an object's keys in sorted
//! order), so a rollout's `spec` is read leniently as ever, without
//! building it. A child's (or an object whose kind is not known by then)
//! is kept as its JSON text as well, and its lenient view read from that
//! text: rule 26 compares an old and a new text first, and builds the two
//! JSON trees only when the texts differ.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::keys::Key;
use super::{GuardedObject, Metadata, Spec, Status};
use crate::kinds::{
    ControllerKind, Kind, Made, NUMAFLOW_GROUP, NUMAFLOW_PARENT_LABELS, NUMAPLANE_GROUP,
    PARENT_ROLLOUT,
};
use crate::lenient::{JsonKind, Obj};
use crate::skim::RawText;

/// A child's `spec` and `status` as found, as JSON text (`None`: absent
/// or null).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ChildContent {
    spec: Option<String>,
    status: Option<String>,
}

impl ChildContent {
    pub(crate) fn spec_text(&self) -> Option<&str> {
        self.spec.as_deref()
    }

    pub(crate) fn status_text(&self) -> Option<&str> {
        self.status.as_deref()
    }

    pub(crate) fn spec(&self) -> Option<Value> {
        self.spec.as_deref().map(tree)
    }

    pub(crate) fn status(&self) -> Option<Value> {
        self.status.as_deref().map(tree)
    }
}

/// The JSON tree of a kept text. A text that is not JSON (its value was
/// checked for structure only, as a skipped value is: a forged body) is
/// kept as a JSON string of itself: it then differs from any other text.
fn tree(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// Whether a rollout owns an object, and which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ownership {
    /// Owned: the rollout's name (its ownerReference's, else the
    /// parent-rollout-name label's).
    Owned(String),
    /// Its labels or ownerReferences cannot be read, so an owner may hide
    /// there: judged as owned. What cannot be read.
    Unreadable(String),
    /// No rollout owns it.
    Free,
}

impl Ownership {
    /// The owner's name as a denial shows it.
    pub(crate) fn shown(&self) -> Option<String> {
        match self {
            Self::Owned(name) => Some(name.clone()),
            Self::Unreadable(why) => Some(format!("(unknown: {why})")),
            Self::Free => None,
        }
    }
}

/// Whether an object of this `kind` is a child, what Numaflow makes for
/// one, or names a Numaflow controller version (its whole spec is kept).
fn names_a_child(kind: &str) -> bool {
    Kind::ALL
        .into_iter()
        .any(|k| k.is_child() && k.kind() == kind)
        || Made::ALL.into_iter().any(|k| k.kind() == kind)
        || ControllerKind::ALL.into_iter().any(|k| k.kind() == kind)
}

impl<'de> Deserialize<'de> for GuardedObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ViewVisitor)
    }
}

struct ViewVisitor;

/// A string value, borrowed from the input when it can be; anything else
/// reads as `None` (skipped, never built).
struct MaybeStr<'de>(Option<Cow<'de, str>>);

impl<'de> Deserialize<'de> for MaybeStr<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = MaybeStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(MaybeStr(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(MaybeStr(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
        }
        deserializer.deserialize_any(StrVisitor)
    }
}

/// Reads a kept text into the lenient view of the same part, and the text
/// to keep (`None` for `null`).
fn kept<T, E>(text: &RawText<'_>) -> Result<(Obj<T>, Option<String>), E>
where
    T: for<'a> Deserialize<'a>,
    E: de::Error,
{
    let text = text.0.as_ref();
    if text == "null" {
        return Ok((Obj::Null, None));
    }
    let view = crate::skim::from_slice::<Obj<T>>(text.as_bytes()).map_err(E::custom)?;
    Ok((view, Some(text.to_owned())))
}

impl<'de> Visitor<'de> for ViewVisitor {
    type Value = GuardedObject;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GuardedObject, A::Error> {
        let mut out = GuardedObject::default();
        // None until `kind` is read: then whether it names a child.
        let mut child: Option<bool> = None;
        let mut content = ChildContent::default();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            match key.as_ref() {
                // A rollout's (or a ConfigMap's) apiVersion: no child,
                // unless its `kind` says otherwise.
                "apiVersion" if child.is_none() => {
                    let MaybeStr(version) = map.next_value()?;
                    let version = version.as_deref();
                    let group = version.and_then(|v| v.split_once('/'));
                    if group.is_some_and(|(g, _)| g != NUMAFLOW_GROUP) || version == Some("v1") {
                        child = Some(false);
                    }
                }
                "kind" => {
                    let MaybeStr(kind) = map.next_value()?;
                    child = Some(kind.as_deref().is_some_and(names_a_child));
                }
                "metadata" => out.metadata = map.next_value::<Obj<Metadata>>()?,
                "data" => out.data = map.next_value()?,
                "spec" if child == Some(false) => out.spec = map.next_value::<Obj<Spec>>()?,
                "status" if child == Some(false) => {
                    out.status = map.next_value::<Obj<Status>>()?;
                }
                "spec" => {
                    (out.spec, content.spec) = kept(&map.next_value::<RawText<'de>>()?)?;
                }
                "status" => {
                    (out.status, content.status) = kept(&map.next_value::<RawText<'de>>()?)?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if child != Some(false) {
            out.child = Some(Box::new(content));
        }
        Ok(out)
    }
}

/// An ownerReference's apiVersion group and kind, as far as they read.
fn group_and_kind(reference: &Value) -> (Option<&str>, Option<&str>) {
    let group = reference
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.split_once('/'))
        .map(|(group, _)| group);
    (group, reference.get("kind").and_then(Value::as_str))
}

/// Whether an ownerReference names a Numaplane rollout: its apiVersion's
/// group is Numaplane's, or its kind is a rollout's.
fn names_a_rollout(reference: &Value) -> bool {
    let (group, kind) = group_and_kind(reference);
    group == Some(NUMAPLANE_GROUP)
        || kind.is_some_and(|k| {
            Kind::ALL
                .into_iter()
                .any(|r| !r.is_child() && r.kind() == k)
        })
}

impl GuardedObject {
    /// `metadata.ownerReferences`, as found.
    pub(crate) fn owner_references(&self) -> Option<&Value> {
        self.metadata.get()?.owner_references.as_ref()
    }

    /// `metadata.finalizers`, as found.
    pub(crate) fn finalizers(&self) -> Option<&Value> {
        self.metadata.get()?.finalizers.as_ref()
    }

    /// A child's `spec` and `status` as found: `None` when the object's
    /// `kind` names no child (a rollout's are not kept).
    pub(crate) fn child_content(&self) -> Option<&ChildContent> {
        self.child.as_deref()
    }

    /// Every kept label or annotation (`labels`: the labels) under
    /// Numaplane's or Numaflow's prefix, as found.
    pub(crate) fn prefixed_keys(&self, labels: bool) -> Vec<(&str, &Value)> {
        let Some(meta) = self.metadata.get() else {
            return Vec::new();
        };
        let map = if labels {
            &meta.labels
        } else {
            &meta.annotations
        };
        let prefixes = [NUMAPLANE_GROUP, NUMAFLOW_GROUP];
        map.get()
            .map(|keys| {
                keys.entries()
                    .filter(|(k, _)| {
                        prefixes
                            .iter()
                            .any(|p| k.strip_prefix(p).is_some_and(|rest| rest.starts_with('/')))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether an ownerReference names a Numaplane rollout, or the
    /// ownerReferences cannot be read (an owner may hide there).
    pub(crate) fn owned_by_reference(&self) -> bool {
        match self.owner_references() {
            None => false,
            Some(Value::Array(refs)) => refs.iter().any(names_a_rollout),
            Some(_) => true,
        }
    }

    /// The children this object is Numaflow's making for, as
    /// `(kind, name)`: each ownerReference to a Pipeline, MonoVertex or
    /// InterStepBufferService, and each of Numaflow's labels naming one
    /// (what Numaflow puts on a Vertex, a daemon and a vertex's pods).
    /// `Err`: the labels or ownerReferences cannot be read, so a child may
    /// hide there.
    pub(crate) fn numaflow_parents(&self) -> Result<Vec<(Kind, String)>, String> {
        let mut parents = Vec::new();
        match &self.metadata {
            Obj::Wrong(found) => return Err(format!("metadata is {found}")),
            Obj::Missing | Obj::Null => return Ok(parents),
            Obj::Present(meta) => {
                if let Obj::Wrong(found) = &meta.labels {
                    return Err(format!("metadata.labels is {found}"));
                }
            }
        }
        match self.owner_references() {
            None | Some(Value::Null) => {}
            Some(Value::Array(refs)) => {
                for reference in refs {
                    let (group, kind) = group_and_kind(reference);
                    let child =
                        Kind::from_kind(group.unwrap_or_default(), kind.unwrap_or_default())
                            .filter(|k| k.is_child());
                    match (child, reference.get("name").and_then(Value::as_str)) {
                        (Some(kind), Some(name)) => parents.push((kind, name.to_owned())),
                        (Some(kind), None) => {
                            return Err(format!(
                                "an ownerReference to a {} has no name",
                                kind.kind()
                            ));
                        }
                        (None, _) => {}
                    }
                }
            }
            Some(other) => {
                return Err(format!(
                    "metadata.ownerReferences is {}",
                    JsonKind::of(other)
                ));
            }
        }
        for (label, kind) in NUMAFLOW_PARENT_LABELS {
            match self.label(label) {
                Some(Value::String(name)) => parents.push((kind, name.clone())),
                Some(other) => return Err(format!("label {label} is {}", JsonKind::of(other))),
                None => {}
            }
        }
        parents.sort();
        parents.dedup();
        Ok(parents)
    }

    /// Whether a rollout owns this object: the parent-rollout-name label,
    /// or an ownerReference to a Numaplane rollout. Metadata that cannot
    /// be read is judged as owned.
    pub(crate) fn ownership(&self) -> Ownership {
        match &self.metadata {
            Obj::Wrong(found) => return Ownership::Unreadable(format!("metadata is {found}")),
            Obj::Present(meta) => {
                if let Obj::Wrong(found) = &meta.labels {
                    return Ownership::Unreadable(format!("metadata.labels is {found}"));
                }
                match &meta.owner_references {
                    None | Some(Value::Array(_)) => {}
                    Some(other) => {
                        return Ownership::Unreadable(format!(
                            "metadata.ownerReferences is {}",
                            JsonKind::of(other)
                        ));
                    }
                }
            }
            Obj::Missing | Obj::Null => return Ownership::Free,
        }
        let by_reference = self
            .owner_references()
            .and_then(Value::as_array)
            .and_then(|refs| refs.iter().find(|r| names_a_rollout(r)))
            .map(|r| {
                r.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned()
            });
        if let Some(name) = by_reference {
            return Ownership::Owned(name);
        }
        match self.label(PARENT_ROLLOUT) {
            Some(Value::String(name)) => Ownership::Owned(name.clone()),
            // A label value is a string; anything else still names an owner.
            Some(other) => Ownership::Owned(other.to_string()),
            None => Ownership::Free,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn view(v: Value) -> GuardedObject {
        GuardedObject::from_json(&v.to_string()).expect("valid JSON")
    }

    #[test]
    fn a_childs_spec_and_status_are_kept_and_a_rollouts_are_not() {
        let child = view(
            json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Pipeline",
            "spec": {"vertices": [{"name": "in"}], "lifecycle": {"pauseGracePeriodSeconds": 60}},
            "status": {"phase": "Running"}}),
        );
        let content = child.child_content().expect("kept");
        assert_eq!(content.spec().expect("spec")["vertices"][0]["name"], "in");
        assert_eq!(content.status(), Some(json!({"phase": "Running"})));
        assert_eq!(content.status_text(), Some(r#"{"phase":"Running"}"#));
        // The lenient view reads the same spec.
        assert_eq!(
            child.child_lifecycle_timeout(crate::rollout::LifecycleKey::Pause),
            crate::rollout::TimeoutSlot::Set(&json!(60))
        );
        let rollout = view(json!({"kind": "PipelineRollout", "spec": {"pipeline": {}}}));
        assert_eq!(rollout.child_content(), None);
        // An object whose kind is not known when its spec is read is kept
        // too: a hand-made request may order its keys so.
        let late = view(json!({"spec": {"x": 1}}));
        assert!(late.child_content().is_some());
    }

    #[test]
    fn ownership_by_label_by_reference_or_unreadable() {
        assert_eq!(
            view(json!({"metadata": {"labels": {PARENT_ROLLOUT: "p"}}})).ownership(),
            Ownership::Owned("p".to_owned())
        );
        let by_ref = view(json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"},
            {"apiVersion": "numaplane.numaproj.io/v1alpha1", "kind": "MonoVertexRollout", "name": "m"}]}}));
        assert_eq!(by_ref.ownership(), Ownership::Owned("m".to_owned()));
        assert_eq!(
            view(json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}]}})).ownership(),
            Ownership::Free
        );
        assert_eq!(view(json!({"metadata": {}})).ownership(), Ownership::Free);
        assert_eq!(
            view(json!({"metadata": {"ownerReferences": "x"}})).ownership(),
            Ownership::Unreadable("metadata.ownerReferences is a string".to_owned())
        );
        assert_eq!(
            view(json!({"metadata": {"labels": 3}})).ownership(),
            Ownership::Unreadable("metadata.labels is a number".to_owned())
        );
    }

    #[test]
    fn prefixed_keys_are_numaplanes_and_numaflows() {
        let object = view(json!({"metadata": {"labels": {
            "numaplane.numaproj.io/a": "1", "numaflow.numaproj.io/b": "2",
            "numaplane.numaproj.io.evil/c": "3", "app": "x"}}}));
        let mut keys: Vec<&str> = object.prefixed_keys(true).iter().map(|(k, _)| *k).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["numaflow.numaproj.io/b", "numaplane.numaproj.io/a"]);
    }

    #[test]
    fn the_children_numaflow_made_an_object_for_are_its_owners_and_labels() {
        let object = view(json!({"metadata": {
        "labels": {"numaflow.numaproj.io/pipeline-name": "p-0", "app": "x"},
        "ownerReferences": [
            {"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Pipeline", "name": "p-0"},
            {"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Vertex", "name": "p-0-cat"},
            {"apiVersion": "example.com/v1", "kind": "NoSuchKind", "name": "x"},
        ]}}));
        assert_eq!(
            object.numaflow_parents(),
            Ok(vec![(Kind::Pipeline, "p-0".to_owned())])
        );
        let unnamed = view(json!({"metadata": {"ownerReferences": [
            {"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "MonoVertex"}]}}));
        assert_eq!(
            unnamed.numaflow_parents(),
            Err("an ownerReference to a MonoVertex has no name".to_owned())
        );
        let garbage =
            view(json!({"metadata": {"labels": {"numaflow.numaproj.io/isbsvc-name": 3}}}));
        assert!(garbage.numaflow_parents().is_err());
        assert_eq!(view(json!({})).numaflow_parents(), Ok(vec![]));
    }
}
