//! A JSON reader that skims: a serde [`Deserializer`] over a byte slice
//! that reads strictly what its visitors read and passes over everything
//! they skip (serde's `IgnoredAny`, which the lenient types and every
//! derived struct use for unknown fields) by scanning to the matching
//! bracket or quote.
//!
//! Most of an AdmissionReview is what no rule reads: `managedFields`, the
//! `kubectl.kubernetes.io/last-applied-configuration` annotation (one long
//! string of escaped quotes), the pipeline's vertices. A serde visitor
//! reads each of their keys and values; here a skipped object or array
//! costs a scan for its closing bracket 64 bytes at a time with SIMD
//! compares (`skim/blocks.rs`), and a skipped string a search for its closing
//! quote eight bytes at a time, by `memchr` past 64 bytes, and by blocks
//! from its first escape (the binary needs no `-C target-cpu`).
//! docs/performance.md ("A reader that skims") has the counts.
//!
//! What is skipped is checked for structure only: brackets that balance,
//! strings that end, escapes that name an escape (`\"`, `\\`, `\/`, `\b`,
//! `\f`, `\n`, `\r`, `\t`, `\uXXXX`). Numbers, `true`, `false`, `null`,
//! commas and colons inside a skipped value are not checked, nor is the
//! UTF-8 of a skipped string: a body that the API server sends is always
//! valid JSON, and a forged one is answered from the fields that were read
//! (docs/robustness.md). Everything read is read strictly: numbers and
//! strings with escapes are handed to serde_json itself, so they mean what
//! they mean to serde_json. A struct's field names are matched as bytes:
//! a name that is no field's is skipped like its value.

mod blocks;

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::forward_to_deserialize_any;

/// How deep values may nest, as serde_json allows (its recursion limit).
const MAX_DEPTH: usize = 128;

/// Reads `T` from `input`, skimming what `T` skips. On failure, the answer
/// of serde_json reading the whole body as `T` (its error, with a position).
pub fn from_slice<'de, T: de::Deserialize<'de>>(input: &'de [u8]) -> Result<T, serde_json::Error> {
    let mut reader = Reader::new(input);
    match T::deserialize(&mut reader).and_then(|value| reader.end().map(|()| value)) {
        Ok(value) => Ok(value),
        Err(_) => serde_json::from_slice(input),
    }
}

/// Reads `T` from `input`, skimming what `T` skips, without the fallback:
/// the reader's own error (for tests of the reader).
#[cfg(test)]
pub fn from_slice_strictly<'de, T: de::Deserialize<'de>>(
    input: &'de [u8],
) -> Result<T, serde_json::Error> {
    let mut reader = Reader::new(input);
    let value = T::deserialize(&mut reader)?;
    reader.end()?;
    Ok(value)
}

type Error = serde_json::Error;

/// The name by which [`RawText`] asks this reader for a value's text.
const RAW_TEXT: &str = "$pipelinerollout_webhook::skim::RawText";

/// A JSON value's text as found: borrowed from the input when this reader
/// reads it (the value passed over, checked for structure only, as a
/// skipped value is), else written back from what another deserializer
/// gives (compact JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawText<'de>(pub Cow<'de, str>);

impl<'de: 'a, 'a> de::Deserialize<'de> for RawText<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RawVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for RawVisitor<'a> {
            type Value = RawText<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(RawText(Cow::Borrowed(v)))
            }
            fn visit_newtype_struct<D: Deserializer<'de>>(
                self,
                deserializer: D,
            ) -> Result<Self::Value, D::Error> {
                let value = <serde_json::Value as de::Deserialize>::deserialize(deserializer)?;
                Ok(RawText(Cow::Owned(value.to_string())))
            }
        }
        deserializer.deserialize_newtype_struct(RAW_TEXT, RawVisitor(std::marker::PhantomData))
    }
}

struct Reader<'de> {
    input: &'de [u8],
    pos: usize,
    /// How many more levels of `{` and `[` may open.
    depth_left: usize,
}

fn error(what: impl fmt::Display, pos: usize) -> Error {
    de::Error::custom(format_args!("{what} at byte {pos}"))
}

fn fault(fault: blocks::Fault) -> Error {
    error(fault.what, fault.at)
}

impl<'de> Reader<'de> {
    fn new(input: &'de [u8]) -> Self {
        Self {
            input,
            pos: 0,
            depth_left: MAX_DEPTH,
        }
    }

    fn end(&mut self) -> Result<(), Error> {
        self.skip_whitespace();
        if self.pos < self.input.len() {
            return Err(error("trailing characters", self.pos));
        }
        Ok(())
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.input.get(self.pos) {
            self.pos += 1;
        }
    }

    /// Before an object's or array's next item: false at `close`; past
    /// the `,` that must separate it from the one before (none before the
    /// `first`); else the error `expected`.
    fn next_item(&mut self, close: u8, first: bool, expected: &'static str) -> Result<bool, Error> {
        match self.peek()? {
            b if b == close => Ok(false),
            b',' if !first => {
                self.pos += 1;
                Ok(true)
            }
            _ if first => Ok(true),
            _ => Err(error(expected, self.pos)),
        }
    }

    fn peek(&mut self) -> Result<u8, Error> {
        self.skip_whitespace();
        self.input
            .get(self.pos)
            .copied()
            .ok_or_else(|| error("EOF while parsing a value", self.pos))
    }

    fn expect(&mut self, byte: u8, what: &str) -> Result<(), Error> {
        if self.peek()? == byte {
            self.pos += 1;
            Ok(())
        } else {
            Err(error(format_args!("expected {what}"), self.pos))
        }
    }

    fn enter(&mut self) -> Result<(), Error> {
        self.depth_left = self
            .depth_left
            .checked_sub(1)
            .ok_or_else(|| error("recursion limit exceeded", self.pos))?;
        Ok(())
    }

    /// Passes over the string whose opening quote is at `self.pos`: to just
    /// past its closing quote. Checks that each escape names one.
    fn skip_string(&mut self) -> Result<(), Error> {
        let body = self.pos + 1;
        match find_quote_or_backslash(self.input, body) {
            Some(end) if self.input[end] == b'"' => self.pos = end + 1,
            // Nothing before the first escape needs a second look.
            Some(escape) => {
                self.pos = blocks::string_end(self.input, self.pos, escape).map_err(fault)?;
            }
            None => return Err(error("EOF while parsing a string", self.pos)),
        }
        Ok(())
    }

    /// Passes over one value, checked for structure only (see the module's
    /// doc): brackets balance, strings end, escapes name one.
    fn skip_value(&mut self) -> Result<(), Error> {
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' | b'[' => self.skip_container(),
            b'}' | b']' | b',' | b':' => Err(error("expected value", self.pos)),
            _ => {
                // A number or a literal: to the next delimiter.
                let start = self.pos;
                while let Some(&b) = self.input.get(self.pos) {
                    if matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                        break;
                    }
                    self.pos += 1;
                }
                debug_assert!(self.pos > start);
                Ok(())
            }
        }
    }

    /// Passes over the object or array whose bracket is at `self.pos`
    /// (see [`blocks`]).
    fn skip_container(&mut self) -> Result<(), Error> {
        self.pos = blocks::container_end(self.input, self.pos, self.depth_left).map_err(fault)?;
        Ok(())
    }

    /// The text of the value at `self.pos`, passed over as [`skip_value`]
    /// does (checked for structure only).
    ///
    /// [`skip_value`]: Self::skip_value
    fn raw_text(&mut self) -> Result<&'de str, Error> {
        self.skip_whitespace();
        let start = self.pos;
        self.skip_value()?;
        std::str::from_utf8(&self.input[start..self.pos])
            .map_err(|e| error("invalid UTF-8", start + e.valid_up_to()))
    }

    /// The span of the number or literal at `self.pos`, consumed.
    fn scalar_span(&mut self) -> &'de [u8] {
        let start = self.pos;
        while let Some(&b) = self.input.get(self.pos) {
            if !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E' | b'a'..=b'z') {
                break;
            }
            self.pos += 1;
        }
        &self.input[start..self.pos]
    }

    /// Reads the string at `self.pos` for `visitor`: borrowed when it has
    /// no escape, else decoded by serde_json. As bytes for a struct's field
    /// names (`bytes`): no field name has an escape or a byte past ASCII.
    fn read_string<V: Visitor<'de>>(&mut self, visitor: V, bytes: bool) -> Result<V::Value, Error> {
        let start = self.pos;
        let body = start + 1;
        if let Some(end) = find_quote_or_backslash(self.input, body)
            && self.input[end] == b'"'
        {
            let text = &self.input[body..end];
            self.pos = end + 1;
            if bytes {
                return visitor.visit_borrowed_bytes(text);
            }
            if let Some(at) = text.iter().position(|&b| b < 0x20) {
                return Err(error("control character in a string", body + at));
            }
            let text = std::str::from_utf8(text)
                .map_err(|e| error("invalid UTF-8 in a string", body + e.valid_up_to()))?;
            return visitor.visit_borrowed_str(text);
        }
        self.skip_string()?;
        let mut strict = serde_json::Deserializer::from_slice(&self.input[start..self.pos]);
        strict.deserialize_any(visitor)
    }
}

/// Bytes that are 1 in every lane of a word.
const ONES: u64 = u64::from_ne_bytes([1; 8]);
/// The top bit of every lane of a word.
const TOPS: u64 = u64::from_ne_bytes([0x80; 8]);

/// The lanes of `word` equal to `byte`, flagged by their top bit. A lane
/// above a flagged one may be flagged wrongly; the lowest flag is right.
fn lanes_equal(word: u64, byte: u8) -> u64 {
    let x = word ^ (ONES * u64::from(byte));
    x.wrapping_sub(ONES) & !x & TOPS
}

/// How far a string is searched eight bytes at a time before `memchr`
/// takes over: most strings of an object are shorter, and for those a call
/// of `memchr` costs more than the search.
const SHORT: usize = 64;

/// The index of the first `"` or `\` at or after `from`: eight bytes at a
/// time over the first [`SHORT`] bytes, then by `memchr` (SIMD, chosen at
/// run time).
#[inline]
fn find_quote_or_backslash(input: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    let short = input.len().min(from + SHORT);
    while let Some(chunk) = input.get(at..at + 8)
        && at < short
    {
        let Ok(lanes) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let word = u64::from_le_bytes(lanes);
        let found = lanes_equal(word, b'"') | lanes_equal(word, b'\\');
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    if at < short {
        return input[at..]
            .iter()
            .position(|&b| b == b'"' || b == b'\\')
            .map(|i| at + i);
    }
    memchr::memchr2(b'"', b'\\', input.get(at..)?).map(|i| at + i)
}

/// Hands the span of the next value to serde_json's own method of the same
/// name: for what the lenient types never ask of this reader.
macro_rules! delegate {
    ($($method:ident),*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                self.skip_whitespace();
                let start = self.pos;
                self.skip_value()?;
                let mut strict = serde_json::Deserializer::from_slice(&self.input[start..self.pos]);
                let value = strict.$method(visitor)?;
                strict.end()?;
                Ok(value)
            }
        )*
    };
}

impl<'de> Deserializer<'de> for &mut Reader<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.peek()? {
            b'{' => {
                self.enter()?;
                self.pos += 1;
                let value = visitor.visit_map(Entries {
                    reader: &mut *self,
                    first: true,
                })?;
                self.depth_left += 1;
                self.expect(b'}', "`,` or `}`")?;
                Ok(value)
            }
            b'[' => {
                self.enter()?;
                self.pos += 1;
                let value = visitor.visit_seq(Elements {
                    reader: &mut *self,
                    first: true,
                })?;
                self.depth_left += 1;
                self.expect(b']', "`,` or `]`")?;
                Ok(value)
            }
            b'"' => self.read_string(visitor, false),
            b'-' | b'0'..=b'9' => {
                let span = self.scalar_span();
                let mut strict = serde_json::Deserializer::from_slice(span);
                let value = strict.deserialize_any(visitor)?;
                strict.end()?;
                Ok(value)
            }
            _ => {
                let at = self.pos;
                match self.scalar_span() {
                    b"null" => visitor.visit_unit(),
                    b"true" => visitor.visit_bool(true),
                    b"false" => visitor.visit_bool(false),
                    _ => Err(error("expected value", at)),
                }
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.peek()? == b'n' && self.input[self.pos..].starts_with(b"null") {
            self.pos += 4;
            return visitor.visit_none();
        }
        visitor.visit_some(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.skip_value()?;
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        if name == RAW_TEXT {
            return visitor.visit_borrowed_str(self.raw_text()?);
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.peek()? == b'"' {
            return self.read_string(visitor, true);
        }
        self.deserialize_any(visitor)
    }

    forward_to_deserialize_any! {
        str string map struct seq tuple tuple_struct
    }

    delegate!(
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_unit
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.skip_whitespace();
        let start = self.pos;
        self.skip_value()?;
        let mut strict = serde_json::Deserializer::from_slice(&self.input[start..self.pos]);
        let value = strict.deserialize_enum(name, variants, visitor)?;
        strict.end()?;
        Ok(value)
    }
}

struct Entries<'a, 'de> {
    reader: &'a mut Reader<'de>,
    first: bool,
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let reader = &mut *self.reader;
        if !reader.next_item(b'}', std::mem::take(&mut self.first), "expected `,` or `}`")? {
            return Ok(None);
        }
        if reader.peek()? != b'"' {
            return Err(error("key must be a string", reader.pos));
        }
        seed.deserialize(&mut *reader).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        self.reader.expect(b':', "`:`")?;
        seed.deserialize(&mut *self.reader)
    }
}

struct Elements<'a, 'de> {
    reader: &'a mut Reader<'de>,
    first: bool,
}

impl<'de> SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let reader = &mut *self.reader;
        if !reader.next_item(b']', std::mem::take(&mut self.first), "expected `,` or `]`")? {
            return Ok(None);
        }
        seed.deserialize(&mut *reader).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::{Value, json};

    use super::*;
    use crate::lenient::{Obj, Text};

    #[derive(Debug, Deserialize, PartialEq, Default)]
    struct Kept {
        #[serde(default)]
        name: Text,
        #[serde(default)]
        value: Option<Value>,
        #[serde(default)]
        inner: Obj<Box<Kept>>,
    }

    fn kept(text: &str) -> Result<Kept, serde_json::Error> {
        from_slice_strictly(text.as_bytes())
    }

    #[test]
    fn reads_what_serde_json_reads() {
        let texts = [
            r#"{"name":"a","value":{"x":[1,-2.5e3,true,null,"\u00e9\"\n"]}}"#,
            r#" { "inner" : { "name" : "b\/c" , "value" : 18446744073709551615 } } "#,
            r#"{"name":7,"value":null,"other":{"deep":[[[{"a":"\\"}]]]}}"#,
            r#"{"value":"π ✓","inner":null}"#,
            r#"{"value":[]}"#,
            r#"{"value":{}}"#,
        ];
        for text in texts {
            let want: Kept = serde_json::from_str(text).expect("serde_json reads it");
            assert_eq!(kept(text).expect("skim reads it"), want, "{text}");
        }
    }

    #[test]
    fn a_skipped_value_is_checked_for_structure_only() {
        // Not JSON, but inside a value nothing reads: answered.
        for skipped in [
            r#"{"a" 1 2}"#,
            r#"[tru, nul, 1.2.3, "\u00e9"]"#,
            "\"\u{1}\"",
            r#"{"x" [] "y"}"#,
            // Balanced, though a bracket closes one of the other kind.
            r#"{"a":[1}]"#,
        ] {
            let text = format!(r#"{{"name":"n","skipped":{skipped}}}"#);
            let read = kept(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(read.name, Text(Some("n".into())));
        }
        // Brackets that do not balance, strings that do not end, escapes
        // that name none, too deep: refused even where skipped.
        let deep = format!(r#"{{"skipped":{}{}}}"#, "[".repeat(200), "]".repeat(200));
        for broken in [
            r#"{"skipped":{"a":[1}}"#,
            r#"{"skipped":["a]}"#,
            r#"{"skipped":"\q"}"#,
            r#"{"skipped":"\u12g4"}"#,
            r#"{"skipped":]}"#,
            r#"{"skipped":{}"#,
            deep.as_str(),
        ] {
            assert!(kept(broken).is_err(), "{broken}");
        }
    }

    #[test]
    fn what_is_read_is_read_strictly() {
        for broken in [
            r#"{"name":"a"}x"#,
            r#"{"name":"a",}"#,
            r#"{"name" "a"}"#,
            r#"{,"name":"a"}"#,
            "{\"name\":\"a\u{1}\"}",
            r#"{"value":[1,]}"#,
            r#"{"value":01}"#,
            r#"{"value":1.}"#,
            r#"{"value":+1}"#,
            r#"{"value":nul}"#,
            r#"{"value":"\ud800"}"#,
            r#"{"name":"a""#,
            "",
        ] {
            assert!(kept(broken).is_err(), "{broken:?}");
        }
        assert!(from_slice_strictly::<Kept>(b"{\"name\":\"\xff\"}").is_err());
    }

    #[test]
    fn a_body_that_cannot_be_read_gets_serde_jsons_error() {
        let error = from_slice::<Kept>(b"hello").expect_err("not JSON");
        assert_eq!(error.to_string(), "expected value at line 1 column 1");
        let error = from_slice::<Kept>(br#"{"name":"a"} x"#).expect_err("trailing");
        assert!(error.to_string().contains("line 1 column 14"), "{error}");
    }

    #[test]
    fn strings_end_at_the_first_unescaped_quote_at_any_length() {
        // Across the eight-byte words and past the short search.
        for length in [0, 1, 7, 8, 9, 63, 64, 65, 200] {
            for tail in ["", r#"\""#, r#"\\"#, r#"\u0041"#] {
                let content = format!("{}{tail}", "x".repeat(length));
                let text = format!(r#"{{"skipped":"{content}","name":"{content}"}}"#);
                let want: Kept = serde_json::from_str(&text).expect("JSON");
                assert_eq!(kept(&text).expect("skim"), want, "{text}");
            }
        }
    }

    #[test]
    fn raw_text_is_the_value_as_found() {
        #[derive(Deserialize)]
        struct Raw<'a> {
            #[serde(borrow)]
            spec: RawText<'a>,
        }
        let text = r#"{"spec": {"b":[1, 2],"a":"\""} }"#;
        let raw: Raw<'_> = from_slice(text.as_bytes()).expect("reads");
        assert_eq!(raw.spec.0, r#"{"b":[1, 2],"a":"\""}"#);
        assert!(matches!(raw.spec.0, Cow::Borrowed(_)));
        // Another deserializer gives the value written back.
        let value = json!({"spec": {"b": [1, 2]}});
        let raw: Raw<'_> = Raw::deserialize(&value).expect("reads");
        assert_eq!(raw.spec.0, r#"{"b":[1,2]}"#);
    }
}
