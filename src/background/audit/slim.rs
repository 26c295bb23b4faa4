//! Slim objects: a stored object read straight from the bytes the API
//! server sends, keeping only the paths a kind's [`Shape`] names. Skipped
//! subtrees (the pipeline spec, `managedFields`, other annotations) are
//! passed over without being built, so what is kept does not grow with the
//! size of the spec. Reading never fails on a wrong shape: a value that is
//! not the object or list the shape expects is kept as a small stand-in of
//! the same JSON type, so the rules still say what was found where.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::audited::Shape;
use super::audited::{COUNT, KINDS, KindEntry};

/// The longest string kept where an object or a list was expected.
const STAND_IN_CHARS: usize = 64;

/// Reads one value, keeping what `Shape` names.
struct Pruned<'s>(&'s Shape);

impl<'de> DeserializeSeed<'de> for Pruned<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        match self.0 {
            Shape::Leaf => Value::deserialize(deserializer),
            shape => deserializer.deserialize_any(PrunedVisitor(shape)),
        }
    }
}

struct PrunedVisitor<'s>(&'s Shape);

impl<'de> Visitor<'de> for PrunedVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.chars().take(STAND_IN_CHARS).collect()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Pruned(self.0).deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        match self.0 {
            Shape::Items(item) => {
                while let Some(v) = seq.next_element_seed(Pruned(item))? {
                    items.push(v);
                }
            }
            // A list where an object was expected: an empty list says so.
            _ => while seq.next_element::<IgnoredAny>()?.is_some() {},
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        match self.0 {
            Shape::Fields(fields) => {
                while let Some(key) = map.next_key::<String>()? {
                    match fields.iter().find(|(name, _)| *name == key) {
                        Some((_, shape)) => {
                            let value = map.next_value_seed(Pruned(shape))?;
                            kept.insert(key, value);
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
            }
            // An object where a list was expected: an empty object says so.
            _ => while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {},
        }
        Ok(Value::Object(kept))
    }
}

/// Reads `json` keeping what `shape` names (for the tests and the
/// benchmark's size check).
pub fn prune(json: &str, shape: &Shape) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(json);
    let value = Pruned(shape).deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// One stored object of the kind at `KIND` in [`KINDS`], slim: its
/// identity, and the kept parts as compact JSON text (what the audit
/// judges).
#[derive(Clone)]
pub struct Slim<const KIND: usize> {
    /// Name, namespace, uid and resourceVersion only.
    pub metadata: ObjectMeta,
    /// The kept parts, as JSON.
    pub json: Box<str>,
}

impl<const KIND: usize> Slim<KIND> {
    /// The kind's entry (a compile error when `KIND` is not in the table).
    const ENTRY: &'static KindEntry = {
        assert!(KIND < COUNT, "no such kind in the audit's table");
        &KINDS[KIND]
    };
}

impl<const KIND: usize> fmt::Debug for Slim<KIND> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slim")
            .field("namespace", &self.metadata.namespace)
            .field("name", &self.metadata.name)
            .field("bytes", &self.json.len())
            .finish()
    }
}

impl<const KIND: usize> Slim<KIND> {
    /// Builds the slim object from an already pruned value. The
    /// resourceVersion goes into the metadata (the watch resumes from it)
    /// but not into the JSON judged, so a write that changes nothing the
    /// rules read leaves the object as it was.
    pub fn from_value(mut value: Value) -> Self {
        let text = |key: &str| {
            value
                .get("metadata")
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let metadata = ObjectMeta {
            name: text("name"),
            namespace: text("namespace"),
            uid: text("uid"),
            resource_version: text("resourceVersion"),
            ..ObjectMeta::default()
        };
        if let Some(Value::Object(meta)) = value.get_mut("metadata") {
            meta.remove("resourceVersion");
        }
        Self {
            metadata,
            json: value.to_string().into_boxed_str(),
        }
    }
}

impl<'de, const KIND: usize> Deserialize<'de> for Slim<KIND> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Pruned(Self::ENTRY.shape).deserialize(deserializer)?;
        Ok(Self::from_value(value))
    }
}

/// Never sent: the audit only reads these.
impl<const KIND: usize> Serialize for Slim<KIND> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.json)
    }
}

impl<const KIND: usize> kube::Resource for Slim<KIND> {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        Self::ENTRY.kind.into()
    }

    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        Self::ENTRY.group.into()
    }

    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        Self::ENTRY.version.into()
    }

    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        Self::ENTRY.plural.into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SHAPE: Shape = Shape::Fields(&[
        ("metadata", Shape::Fields(&[("name", Shape::Leaf)])),
        (
            "spec",
            Shape::Fields(&[("keep", Shape::Leaf), ("deep", Shape::Fields(&[]))]),
        ),
        (
            "list",
            Shape::Items(&Shape::Fields(&[("type", Shape::Leaf)])),
        ),
    ]);

    #[test]
    fn keeps_only_the_named_paths_and_stands_in_for_wrong_shapes() {
        let cases = [
            (
                "skipped keys are dropped, leaves kept whole",
                json!({"metadata": {"name": "a", "managedFields": [1, 2]},
                       "spec": {"keep": {"x": [1]}, "big": "y".repeat(10_000)}}),
                json!({"metadata": {"name": "a"}, "spec": {"keep": {"x": [1]}}}),
            ),
            (
                "list items keep their fields",
                json!({"list": [{"type": "T", "other": 1}, "odd"]}),
                json!({"list": [{"type": "T"}, "odd"]}),
            ),
            (
                "a string where an object was expected is kept short",
                json!({"spec": "z".repeat(1_000)}),
                json!({"spec": "z".repeat(STAND_IN_CHARS)}),
            ),
            (
                "a list where an object was expected becomes an empty list",
                json!({"spec": {"deep": [1, 2, 3]}}),
                json!({"spec": {"deep": []}}),
            ),
            (
                "an object where a list was expected becomes an empty object",
                json!({"list": {"a": 1}}),
                json!({"list": {}}),
            ),
            (
                "numbers, booleans and null stay",
                json!({"spec": 1, "list": null, "metadata": true}),
                json!({"spec": 1, "list": null, "metadata": true}),
            ),
        ];
        for (name, input, want) in cases {
            let got = prune(&input.to_string(), &SHAPE).expect(name);
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn only_invalid_json_fails() {
        assert!(prune("{\"spec\": ", &SHAPE).is_err());
        assert!(prune("[]", &SHAPE).is_ok());
        assert!(prune("\"text\"", &SHAPE).is_ok());
    }
}
