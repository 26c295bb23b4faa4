//! Slim objects: a stored object read straight from the bytes the API
//! server sends, keeping only the paths a kind's [`Shape`] names. Skipped
//! subtrees (the pipeline spec, `managedFields`, other annotations) are
//! passed over without being built, so what is kept does not grow with the
//! size of the spec. Reading never fails on a wrong shape: a value that is
//! not the object or list the shape expects is kept as a small stand-in of
//! the same JSON type, so the rules still say what was found where.
//!
//! What is kept is bounded whatever a tenant stores: a string keeps at most
//! [`LEAF_BYTES`] (the rules read a few hundred bytes of any value; a cut
//! string ends in [`CUT_MARK`], so it never reads as a valid value), a list
//! or object found at a leaf keeps [`LEAF_ENTRIES`] entries to a depth of
//! [`LEAF_DEPTH`], and the strings of one object share [`OBJECT_BUDGET`]
//! bytes; past the budget they are kept empty.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

pub use super::audited::Shape;
use super::audited::{COUNT, KINDS, KindEntry};
use crate::rollout::GuardedObject;

/// The visits both readers share: numbers and booleans are kept as they
/// are, and the description of what is expected.
macro_rules! scalars {
    () => {
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
    };
}

/// `null`, however it is spelled to the visitor, is kept as `null`.
macro_rules! nulls {
    () => {
        fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }

        fn visit_none<E: de::Error>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
    };
}

/// The longest string kept where an object or a list was expected.
const STAND_IN_CHARS: usize = 64;

/// The most bytes of one string kept (before [`CUT_MARK`]).
pub const LEAF_BYTES: usize = 512;

/// What a cut string ends with.
pub const CUT_MARK: &str = "…";

/// The most entries kept of a list or an object found at a leaf.
pub const LEAF_ENTRIES: usize = 16;

/// How many levels of lists and objects below a leaf are kept; deeper ones
/// are kept empty.
pub const LEAF_DEPTH: usize = 4;

/// The bytes of strings (and object keys at leaves) one object keeps in
/// all.
pub const OBJECT_BUDGET: usize = 16 * 1024;

/// The string bytes an object may still keep.
type BytesLeft = Cell<usize>;

/// `v`, cut to [`LEAF_BYTES`] and to what is left of `budget`, which pays
/// for it.
fn keep(v: &str, budget: &BytesLeft) -> String {
    let limit = LEAF_BYTES.min(budget.get());
    if v.len() <= limit {
        budget.set(budget.get() - v.len());
        return v.to_owned();
    }
    let end = (0..=limit)
        .rev()
        .find(|&i| v.is_char_boundary(i))
        .unwrap_or(0);
    budget.set(budget.get() - end);
    let mut cut = String::with_capacity(end + CUT_MARK.len());
    cut.push_str(&v[..end]);
    cut.push_str(CUT_MARK);
    cut
}

/// Reads one value, keeping what `Shape` names.
struct Pruned<'s, 'b>(&'s Shape, &'b BytesLeft);

impl<'de> DeserializeSeed<'de> for Pruned<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        match self.0 {
            Shape::Leaf => deserializer.deserialize_any(Bounded {
                depth: LEAF_DEPTH,
                budget: self.1,
            }),
            shape => deserializer.deserialize_any(PrunedVisitor(shape, self.1)),
        }
    }
}

/// Reads a value at a leaf whole, but bounded: strings cut, lists and
/// objects kept to [`LEAF_ENTRIES`] entries and `depth` more levels.
#[derive(Clone, Copy)]
struct Bounded<'b> {
    depth: usize,
    budget: &'b BytesLeft,
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    scalars!();

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(keep(v, self.budget)))
    }

    nulls!();

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        if let Some(depth) = self.depth.checked_sub(1) {
            let inner = Bounded { depth, ..self };
            while items.len() < LEAF_ENTRIES {
                match seq.next_element_seed(inner)? {
                    Some(v) => items.push(v),
                    None => return Ok(Value::Array(items)),
                }
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        if let Some(depth) = self.depth.checked_sub(1) {
            let inner = Bounded { depth, ..self };
            while kept.len() < LEAF_ENTRIES {
                let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? else {
                    return Ok(Value::Object(kept));
                };
                let key = keep(&key, self.budget);
                let value = map.next_value_seed(inner)?;
                kept.insert(key, value);
            }
        }
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Value::Object(kept))
    }
}

struct PrunedVisitor<'s, 'b>(&'s Shape, &'b BytesLeft);

impl<'de> Visitor<'de> for PrunedVisitor<'_, '_> {
    type Value = Value;

    scalars!();

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.chars().take(STAND_IN_CHARS).collect()))
    }

    nulls!();

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Pruned(self.0, self.1).deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        match self.0 {
            Shape::Items(item) => {
                while let Some(v) = seq.next_element_seed(Pruned(item, self.1))? {
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
            Shape::Fields(fields) | Shape::GoFields(fields) => {
                let go = matches!(self.0, Shape::GoFields(_));
                while let Some(key) = map.next_key::<String>()? {
                    let found = fields.iter().find(|(name, _)| {
                        *name == key || (go && crate::go_keys::matches_field(&key, name))
                    });
                    match found {
                        Some((name, shape)) => {
                            let value = map.next_value_seed(Pruned(shape, self.1))?;
                            if !go || make_room(&mut kept, name, &key) {
                                kept.insert(key, value);
                            }
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

/// Whether to keep `key` among the keys of `kept` that Go reads as the
/// field `name`, making room for it: the view reads the one Go keeps (the
/// greatest in byte order) and one other, so of those at most the two
/// greatest stay, however many case variants a tenant writes.
fn make_room(kept: &mut Map<String, Value>, name: &str, key: &str) -> bool {
    let mut same: Vec<&String> = kept
        .keys()
        .filter(|k| crate::go_keys::matches_field(k, name))
        .collect();
    if same.len() < 2 || same.iter().any(|k| k.as_str() == key) {
        return true;
    }
    same.sort();
    let smallest = same[0].clone();
    if key < smallest.as_str() {
        return false;
    }
    kept.remove(&smallest);
    true
}

/// Reads `json` keeping what `shape` names (for the tests and the
/// benchmark's size check).
pub fn prune(json: &str, shape: &Shape) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(json);
    let value = Pruned(shape, &Cell::new(OBJECT_BUDGET)).deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// One stored object of the kind at `KIND` in [`KINDS`], slim: its
/// identity, and the kept parts read once into the view the rules read
/// (the one admission reads), shared by whoever holds the object.
#[derive(Clone)]
pub struct Slim<const KIND: usize> {
    /// Name, namespace, uid and resourceVersion only.
    pub metadata: ObjectMeta,
    /// What the rules read.
    pub view: Arc<GuardedObject>,
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
            .finish_non_exhaustive()
    }
}

impl<const KIND: usize> Slim<KIND> {
    /// Builds the slim object from an already pruned value. The
    /// resourceVersion goes into the metadata (the watch resumes from it)
    /// but not into the view, so a write that changes nothing the rules
    /// read leaves the view as it was.
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
        // The view reads any JSON object leniently; what was pruned is one.
        let view = GuardedObject::deserialize(&value).unwrap_or_default();
        Self {
            metadata,
            view: Arc::new(view),
        }
    }
}

impl<'de, const KIND: usize> Deserialize<'de> for Slim<KIND> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value =
            Pruned(Self::ENTRY.shape, &Cell::new(OBJECT_BUDGET)).deserialize(deserializer)?;
        Ok(Self::from_value(value))
    }
}

impl<const KIND: usize> kube::Resource for Slim<KIND> {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        Self::ENTRY.kind().into()
    }

    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        Self::ENTRY.resource.group().into()
    }

    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        Self::ENTRY.resource.version().into()
    }

    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        Self::ENTRY.resource.resource().into()
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

    /// The JSON text of `value`'s kept form, by way of `prune`.
    fn kept(value: &Value) -> Value {
        prune(&value.to_string(), &SHAPE).expect("JSON")
    }

    #[test]
    fn what_a_tenant_stores_is_kept_within_bounds() {
        let long = "é".repeat(200_000);
        let cut_string = {
            let end = (0..=LEAF_BYTES)
                .rev()
                .find(|&i| long.is_char_boundary(i))
                .unwrap_or(0);
            format!("{}{CUT_MARK}", &long[..end])
        };
        let got = kept(&json!({"metadata": {"name": long}}));
        assert_eq!(
            got["metadata"]["name"],
            json!(cut_string),
            "a long string is cut at a char boundary and marked"
        );
        assert!(
            got["metadata"]["name"]
                .as_str()
                .is_some_and(|s| s.len() <= LEAF_BYTES + CUT_MARK.len())
        );

        let exact = "x".repeat(LEAF_BYTES);
        let got = kept(&json!({"metadata": {"name": exact}}));
        assert_eq!(
            got["metadata"]["name"],
            json!(exact),
            "a string of the bound is kept whole"
        );

        let wide: serde_json::Map<String, Value> =
            (0..1_000).map(|i| (format!("k{i:04}"), json!(i))).collect();
        let got = kept(
            &json!({"spec": {"keep": {"wide": wide, "long": (0..1_000).collect::<Vec<_>>()}}}),
        );
        let leaf = &got["spec"]["keep"];
        assert_eq!(leaf["wide"].as_object().map(Map::len), Some(LEAF_ENTRIES));
        assert_eq!(leaf["long"].as_array().map(Vec::len), Some(LEAF_ENTRIES));

        let mut deep = json!("bottom");
        for _ in 0..50 {
            deep = json!([deep]);
        }
        let got = kept(&json!({"spec": {"keep": deep}}));
        let mut level = &got["spec"]["keep"];
        let mut depth = 0;
        while let Some(inner) = level.as_array().and_then(|a| a.first()) {
            level = inner;
            depth += 1;
        }
        assert_eq!(depth, LEAF_DEPTH, "levels past the depth are kept empty");
    }

    #[test]
    fn one_objects_strings_share_a_budget() {
        let big = "y".repeat(10_000);
        let many: Vec<Value> = (0..200).map(|_| json!({"type": big})).collect();
        let got = kept(&json!({"list": many}));
        let text = got.to_string();
        assert!(
            text.len() < OBJECT_BUDGET + 200 * 32,
            "kept {} bytes of {} stored",
            text.len(),
            200 * 10_000
        );
        let items = got["list"].as_array().expect("a list");
        assert_eq!(
            items.len(),
            200,
            "every item is still there, for the rules to count"
        );
        assert_eq!(
            items[199]["type"],
            json!(CUT_MARK),
            "past the budget a string is kept empty, marked as cut"
        );
    }

    #[test]
    fn only_invalid_json_fails() {
        assert!(prune("{\"spec\": ", &SHAPE).is_err());
        assert!(prune("[]", &SHAPE).is_ok());
        assert!(prune("\"text\"", &SHAPE).is_ok());
    }
}
