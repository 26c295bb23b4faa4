//! Lenient JSON shapes: read what we judge, tolerate anything else.
//!
//! The API server sends whole objects, and a user can put any JSON inside a
//! PipelineRollout's embedded pipeline spec (the CRD preserves unknown fields).
//! A strict, typed parse would fail on the first wrongly typed field and leave
//! us without the request's uid to answer with. These wrappers record a wrong
//! shape instead of failing, in the same single pass over the bytes, and skip
//! the content they do not keep without building it.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The JSON type of a value, used to say what was found where an object or a
/// list was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonKind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl JsonKind {
    /// The kind of an already parsed value.
    pub fn of(value: &serde_json::Value) -> Self {
        match value {
            serde_json::Value::Null => Self::Null,
            serde_json::Value::Bool(_) => Self::Bool,
            serde_json::Value::Number(_) => Self::Number,
            serde_json::Value::String(_) => Self::String,
            serde_json::Value::Array(_) => Self::Array,
            serde_json::Value::Object(_) => Self::Object,
        }
    }
}

impl fmt::Display for JsonKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Null => "null",
            Self::Bool => "a boolean",
            Self::Number => "a number",
            Self::String => "a string",
            Self::Array => "an array",
            Self::Object => "an object",
        })
    }
}

/// A JSON value that should be an object of shape `T`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Obj<T> {
    /// The key was not there.
    #[default]
    Missing,
    /// The key was there with `null`.
    Null,
    /// An object, read as `T`.
    Present(T),
    /// Something other than an object.
    Wrong(JsonKind),
}

impl<T> Obj<T> {
    pub fn get(&self) -> Option<&T> {
        match self {
            Self::Present(t) => Some(t),
            _ => None,
        }
    }
}

/// A JSON value that should be an array of `T`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum List<T> {
    /// The key was not there.
    #[default]
    Missing,
    /// The key was there with `null`.
    Null,
    /// An array, read element by element.
    Present(Vec<T>),
    /// Something other than an array.
    Wrong(JsonKind),
}

impl<T> List<T> {
    /// The elements, or nothing when it is not an array.
    pub fn items(&self) -> &[T] {
        match self {
            Self::Present(items) => items,
            _ => &[],
        }
    }

    /// The elements, to change in place (none when it is not an array).
    pub fn items_mut(&mut self) -> &mut [T] {
        match self {
            Self::Present(items) => items,
            _ => &mut [],
        }
    }
}

/// Implements the non-container visits shared by [`Obj`] and [`List`]: each
/// records the kind it found.
macro_rules! wrong_kind_visits {
    () => {
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Self::Value::Null)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Self::Value::Null)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Self::Value::Wrong(JsonKind::Bool))
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Self::Value::Wrong(JsonKind::Number))
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Self::Value::Wrong(JsonKind::Number))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Self::Value::Wrong(JsonKind::Number))
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Self::Value::Wrong(JsonKind::String))
        }
    };
}

struct ObjVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
    type Value = Obj<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    wrong_kind_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Obj::Wrong(JsonKind::Array))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(Obj::Present)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ObjVisitor(PhantomData))
    }
}

struct ListVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
    type Value = List<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    wrong_kind_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(List::Present(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(List::Wrong(JsonKind::Object))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ListVisitor(PhantomData))
    }
}

/// A JSON string, or nothing when the value is absent or of another type.
///
/// For envelope fields such as names and groups where a wrong type is not
/// worth an error of its own: it reads as absent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Text(pub Option<String>);

impl Text {
    pub fn as_deref(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Text, E> {
        Ok(Text(None))
    }
    fn visit_none<E: de::Error>(self) -> Result<Text, E> {
        Ok(Text(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Text, E> {
        Ok(Text(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Text, E> {
        Ok(Text(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Text, E> {
        Ok(Text(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Text, E> {
        Ok(Text(None))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
        Ok(Text(Some(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Text, E> {
        Ok(Text(Some(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Text(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Text(None))
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq, Default)]
    struct Inner {
        #[serde(default)]
        a: Option<serde_json::Value>,
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Outer {
        #[serde(default)]
        inner: Obj<Inner>,
        #[serde(default)]
        list: List<Obj<Inner>>,
        #[serde(default)]
        name: Text,
    }

    fn parse(json: &str) -> Outer {
        serde_json::from_str(json).expect("lenient parse never fails on valid JSON")
    }

    #[test]
    fn records_wrong_shapes_instead_of_failing() {
        let cases = [
            (r#"{}"#, Obj::Missing),
            (r#"{"inner":null}"#, Obj::Null),
            (r#"{"inner":"x"}"#, Obj::Wrong(JsonKind::String)),
            (r#"{"inner":[1,{"a":2}]}"#, Obj::Wrong(JsonKind::Array)),
            (r#"{"inner":3.5}"#, Obj::Wrong(JsonKind::Number)),
            (r#"{"inner":false}"#, Obj::Wrong(JsonKind::Bool)),
            (
                r#"{"inner":{"a":1,"other":{"deep":[1,2]}}}"#,
                Obj::Present(Inner {
                    a: Some(serde_json::json!(1)),
                }),
            ),
        ];
        for (json, want) in cases {
            assert_eq!(parse(json).inner, want, "{json}");
        }
    }

    #[test]
    fn lists_keep_good_elements_and_mark_bad_ones() {
        let outer = parse(r#"{"list":[{"a":"x"},"oops",null]}"#);
        assert_eq!(
            outer.list,
            List::Present(vec![
                Obj::Present(Inner {
                    a: Some(serde_json::json!("x"))
                }),
                Obj::Wrong(JsonKind::String),
                Obj::Null,
            ])
        );
        assert_eq!(
            parse(r#"{"list":{"k":1}}"#).list,
            List::Wrong(JsonKind::Object)
        );
    }

    #[test]
    fn text_reads_strings_only() {
        assert_eq!(parse(r#"{"name":"n"}"#).name, Text(Some("n".into())));
        assert_eq!(parse(r#"{"name":7}"#).name, Text(None));
        assert_eq!(parse(r#"{"name":{"x":[1]}}"#).name, Text(None));
    }

    #[test]
    fn invalid_json_is_still_an_error() {
        assert!(serde_json::from_str::<Outer>(r#"{"inner":{"a":}"#).is_err());
    }
}
