//! JSON text written straight into a buffer, for the answer's fixed shape:
//! strings escaped as RFC 8259 requires, runs of plain bytes copied eight
//! at a time. serde_json's serialiser looks every byte up in a table; the
//! denial message and the audit annotations are most of an answer's bytes.

/// A JSON object being written: keys and values in the order given.
pub(super) struct Object<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Object<'a> {
    /// Opens an object at the end of `out`.
    pub(super) fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, first: true }
    }

    /// Writes `"key":` and hands back the buffer for its value.
    pub(super) fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        string(self.out, key);
        self.out.push(b':');
        self.out
    }

    /// A string member.
    pub(super) fn str(&mut self, key: &str, value: &str) {
        string(self.key(key), value);
    }

    /// A boolean member.
    pub(super) fn bool(&mut self, key: &str, value: bool) {
        let text: &[u8] = if value { b"true" } else { b"false" };
        self.key(key).extend_from_slice(text);
    }

    /// A number member.
    pub(super) fn u16(&mut self, key: &str, value: u16) {
        let text = value.to_string();
        self.key(key).extend_from_slice(text.as_bytes());
    }

    /// Closes the object.
    pub(super) fn close(self) {
        self.out.push(b'}');
    }
}

/// An array of strings.
pub(super) fn strings<'s>(out: &mut Vec<u8>, items: impl IntoIterator<Item = &'s str>) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, item);
    }
    out.push(b']');
}

/// Whether any of the eight bytes of `chunk` is `"`, `\` or a control
/// character (below 0x20): each test sets the high bit of a byte that
/// matches, and no byte of valid UTF-8 text matches by carry alone.
fn needs_escape(chunk: u64) -> bool {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES << 7;
    let below_space = chunk.wrapping_sub(ONES * 0x20) & !chunk;
    let quote = chunk ^ (ONES * u64::from(b'"'));
    let backslash = chunk ^ (ONES * u64::from(b'\\'));
    let is_quote = quote.wrapping_sub(ONES) & !quote;
    let is_backslash = backslash.wrapping_sub(ONES) & !backslash;
    (below_space | is_quote | is_backslash) & HIGH != 0
}

/// `text` as a JSON string, quotes included.
pub(super) fn string(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            if !needs_escape(u64::from_le_bytes(word)) {
                i += 8;
                continue;
            }
        }
        let byte = bytes[i];
        let escape: Option<&[u8]> = match byte {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            _ => None,
        };
        if escape.is_none() && byte >= 0x20 {
            i += 1;
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match escape {
            Some(escape) => out.extend_from_slice(escape),
            None => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(byte >> 4)]);
                out.push(HEX[usize::from(byte & 0xf)]);
            }
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(text: &str) -> String {
        let mut out = Vec::new();
        string(&mut out, text);
        String::from_utf8(out).unwrap_or_else(|e| panic!("{text:?} written as non-UTF-8: {e}"))
    }

    #[test]
    fn strings_read_back_as_written_and_match_serde_json() {
        let cases = [
            "",
            "plain",
            "exactly8",
            "a message longer than eight bytes, with no escapes at all",
            "quote \" and backslash \\ in the middle of a longer run of text",
            "\"\\\"\\",
            "controls \n \r \t \u{8} \u{c} \u{0} \u{1f} \u{7f} end",
            "unicode: jürgen-名前 ✓ 𝄞, and a quote after it\"",
            "ends with a newline\n",
            "{\"kubectl\":\"last-applied\",\"spec\":{\"a\":[1,2]}}",
        ];
        for text in cases {
            let out = written(text);
            let read: String = serde_json::from_str(&out)
                .unwrap_or_else(|e| panic!("{text:?} written as {out:?}: {e}"));
            assert_eq!(read, text, "{out}");
            let serde = serde_json::to_string(text).unwrap_or_default();
            assert_eq!(out, serde, "{text:?}: the same text serde_json writes");
        }
    }

    #[test]
    fn every_byte_below_0x80_is_written_as_serde_json_writes_it() {
        for byte in 0u8..0x80 {
            let text = format!("0123456789{}abcdefgh", char::from(byte));
            let serde = serde_json::to_string(&text).unwrap_or_default();
            assert_eq!(written(&text), serde, "byte {byte:#04x}");
        }
    }

    #[test]
    fn objects_and_arrays_are_json() {
        let mut out = Vec::new();
        let mut object = Object::open(&mut out);
        object.str("uid", "u-1");
        object.bool("allowed", false);
        object.u16("code", 403);
        strings(object.key("warnings"), ["a", "b\"c"]);
        object.close();
        let value: serde_json::Value =
            serde_json::from_slice(&out).unwrap_or(serde_json::Value::Null);
        assert_eq!(
            value,
            serde_json::json!({"uid": "u-1", "allowed": false, "code": 403, "warnings": ["a", "b\"c"]})
        );
    }
}
