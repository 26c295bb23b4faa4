//! The labels and annotations the rules judge, on any guarded kind: kept
//! from a label or annotation map only when [`crate::kinds::watched`] says
//! so (every other entry is skipped without being built); the owner of a
//! child; and the metadata a rollout copies onto its children.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::GuardedObject;
use super::fields::{ANNOTATIONS, LABELS};
use crate::kinds::{Kind, PARENT_ROLLOUT, watched};
use crate::lenient::{JsonKind, Obj};

/// The watched entries of a label or annotation map, with their values as
/// found (a value need not be a string: the view is lenient).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Keys(pub(super) Vec<(String, Value)>);

impl Keys {
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Every kept entry, in the order found.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// A map key, borrowed from the input when it can be.
pub(super) struct Key<'de>(pub(super) Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeysVisitor;
        impl<'de> Visitor<'de> for KeysVisitor {
            type Value = Keys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of labels or annotations")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut kept = Vec::new();
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    if watched(&key) {
                        kept.push((key.into_owned(), map.next_value::<Value>()?));
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Keys(kept))
            }
        }
        deserializer.deserialize_map(KeysVisitor)
    }
}

/// A rollout's child template (`spec.monoVertex`, ...): only its metadata.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(super) struct Template {
    #[serde(default)]
    pub(super) metadata: Obj<TemplateMeta>,
}

/// The labels and annotations a rollout copies onto every child it makes.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct TemplateMeta {
    #[serde(default)]
    pub(super) labels: Obj<Keys>,
    #[serde(default)]
    pub(super) annotations: Obj<Keys>,
}

/// Which map of an object: its own labels or annotations, or those of the
/// child template of a rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Map {
    /// `metadata.labels`.
    Labels,
    /// `metadata.annotations`.
    Annotations,
    /// `spec.<template>.metadata.labels`.
    TemplateLabels,
    /// `spec.<template>.metadata.annotations`.
    TemplateAnnotations,
}

impl Map {
    /// The dotted path of the map on `kind`, as users write it.
    pub(crate) fn path(self, kind: Kind) -> String {
        let template = kind.template().unwrap_or("template");
        match self {
            Self::Labels => LABELS.dotted().to_owned(),
            Self::Annotations => ANNOTATIONS.dotted().to_owned(),
            Self::TemplateLabels => format!("spec.{template}.{LABELS}"),
            Self::TemplateAnnotations => format!("spec.{template}.{ANNOTATIONS}"),
        }
    }
}

impl GuardedObject {
    pub(crate) fn annotation(&self, key: &str) -> Option<&Value> {
        self.metadata.get()?.annotations.get()?.get(key)
    }

    pub(crate) fn label(&self, key: &str) -> Option<&Value> {
        self.metadata.get()?.labels.get()?.get(key)
    }

    /// The child template's metadata of a rollout of `kind`, as found.
    fn template_meta(&self, kind: Kind) -> Result<Option<&TemplateMeta>, (String, JsonKind)> {
        let Some(key) = kind.template() else {
            return Ok(None);
        };
        let Some(spec) = self.spec.get() else {
            return Ok(None);
        };
        let template = match key {
            "pipeline" => match &spec.pipeline {
                Obj::Present(p) => Ok(&p.metadata),
                Obj::Wrong(found) => Err(*found),
                _ => return Ok(None),
            },
            _ => {
                let t = if key == "monoVertex" {
                    &spec.mono_vertex
                } else {
                    &spec.inter_step_buffer_service
                };
                match t {
                    Obj::Present(t) => Ok(&t.metadata),
                    Obj::Wrong(found) => Err(*found),
                    _ => return Ok(None),
                }
            }
        };
        match template {
            Err(found) => Err((format!("spec.{key}"), found)),
            Ok(Obj::Present(meta)) => Ok(Some(meta)),
            Ok(Obj::Wrong(found)) => Err((format!("spec.{key}.metadata"), *found)),
            Ok(_) => Ok(None),
        }
    }

    /// The value of `key` in `map` of an object of `kind`, when present.
    pub(crate) fn key_in(&self, kind: Kind, map: Map, key: &str) -> Option<&Value> {
        match map {
            Map::Labels => self.label(key),
            Map::Annotations => self.annotation(key),
            Map::TemplateLabels => self.template_meta(kind).ok()??.labels.get()?.get(key),
            Map::TemplateAnnotations => self.template_meta(kind).ok()??.annotations.get()?.get(key),
        }
    }

    /// Where the child template's metadata of a rollout of `kind` (or a
    /// value on the way to it) is not an object: its dotted path and what
    /// was found.
    pub(crate) fn malformed_template(&self, kind: Kind) -> Option<(String, JsonKind)> {
        let meta = match self.template_meta(kind) {
            Err(found) => return Some(found),
            Ok(meta) => meta?,
        };
        let key = kind.template().unwrap_or_default();
        match (&meta.labels, &meta.annotations) {
            (Obj::Wrong(found), _) => Some((format!("spec.{key}.{LABELS}"), *found)),
            (_, Obj::Wrong(found)) => Some((format!("spec.{key}.{ANNOTATIONS}"), *found)),
            _ => None,
        }
    }

    /// The rollout a child of `kind` belongs to: the owner reference of the
    /// rollout's kind, else the `parent-rollout-name` label.
    pub(crate) fn parent(&self, kind: Kind) -> Option<&str> {
        let rollout = kind.rollout().kind();
        let owner = self.owner_references().and_then(|refs| {
            refs.as_array()?
                .iter()
                .find(|o| o.get("kind").and_then(Value::as_str) == Some(rollout))
                .and_then(|o| o.get("name")?.as_str())
        });
        owner.or_else(|| self.label(PARENT_ROLLOUT).and_then(Value::as_str))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kinds::{FORCE_PROMOTE_LABEL, MARKED_FOR_DELETION, UPGRADE_STATE};

    fn view(v: Value) -> GuardedObject {
        GuardedObject::from_json(&v.to_string()).expect("valid JSON")
    }

    #[test]
    fn keeps_the_watched_keys_of_each_map() {
        let child = view(json!({"metadata": {
            "labels": {UPGRADE_STATE: "in-progress", FORCE_PROMOTE_LABEL: false, "app": "x"},
            "annotations": {MARKED_FOR_DELETION: "true", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "ownerReferences": [{"kind": "Other", "name": "o"}, {"kind": "PipelineRollout", "name": "p"}],
        }}));
        let pipeline = Kind::Pipeline;
        assert_eq!(child.label(UPGRADE_STATE), Some(&json!("in-progress")));
        assert_eq!(child.label(FORCE_PROMOTE_LABEL), Some(&json!(false)));
        assert_eq!(child.label("app"), None, "not watched, not kept");
        assert_eq!(
            child.key_in(pipeline, Map::Annotations, MARKED_FOR_DELETION),
            Some(&json!("true"))
        );
        assert_eq!(child.parent(pipeline), Some("p"));
        let by_label = view(json!({"metadata": {"labels": {PARENT_ROLLOUT: "q"}}}));
        assert_eq!(by_label.parent(Kind::MonoVertex), Some("q"));
    }

    #[test]
    fn an_escaped_key_is_the_same_key() {
        // `\/` and `\u0066` spell `/` and `f`: the API server would store
        // the plain key, so the view must see it too.
        let text =
            r#"{"metadata": {"labels": {"numaplane.numaproj.io\/\u0066orce-promote": "true"}}}"#;
        let object = GuardedObject::from_json(text).expect("valid JSON");
        assert_eq!(object.label(FORCE_PROMOTE_LABEL), Some(&json!("true")));
    }

    #[test]
    fn reads_each_rollouts_template() {
        for (kind, key) in [
            (Kind::PipelineRollout, "pipeline"),
            (Kind::MonoVertexRollout, "monoVertex"),
            (Kind::IsbServiceRollout, "interStepBufferService"),
        ] {
            let object = view(json!({"spec": {key: {"metadata": {
                "labels": {FORCE_PROMOTE_LABEL: "true"},
                "annotations": {MARKED_FOR_DELETION: "true"}}}}}));
            assert_eq!(
                object.key_in(kind, Map::TemplateLabels, FORCE_PROMOTE_LABEL),
                Some(&json!("true")),
                "{kind:?}"
            );
            assert_eq!(
                object.key_in(kind, Map::TemplateAnnotations, MARKED_FOR_DELETION),
                Some(&json!("true"))
            );
            assert_eq!(object.malformed_template(kind), None);
            let bad = view(json!({"spec": {key: {"metadata": {"labels": "x"}}}}));
            assert_eq!(
                bad.malformed_template(kind),
                Some((format!("spec.{key}.metadata.labels"), JsonKind::String))
            );
            let worse = view(json!({"spec": {key: [1]}}));
            assert_eq!(
                worse.malformed_template(kind),
                Some((format!("spec.{key}"), JsonKind::Array))
            );
        }
    }
}
