//! Passing over a skipped value 64 bytes at a time: where an object or an
//! array ends, and where a string with escapes ends.
//!
//! Each block of 64 bytes is turned into four bit masks (quotes,
//! backslashes, opening and closing brackets) by 16-byte SIMD compares
//! (SSE2 on x86-64 and NEON on aarch64, both part of the base instruction
//! set, so no `-C target-cpu`), through the `wide` crate's safe vectors.
//! From the masks: which characters an escape takes (the backslashes are
//! walked, and each escape is checked), where strings are (a prefix XOR of
//! the unescaped quotes, carried from block to block), and the brackets
//! outside them. A block whose closing brackets are fewer than the levels
//! open cannot end the value, so its brackets are only counted; the
//! others are walked one by one.
//!
//! What this checks, as the reader's skipped values are checked for
//! structure only: strings end, escapes name one, brackets balance and
//! nest no deeper than the levels left. An opening bracket of one kind
//! closed by the other kind (`[}`) is not caught.

use wide::u8x16;

const BLOCK: usize = 64;

/// Why a skipped value is refused, and the byte where that was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fault {
    /// What is wrong, as serde_json would say it.
    pub what: &'static str,
    /// The byte offset in the input.
    pub at: usize,
}

impl Fault {
    fn new(what: &'static str, at: usize) -> Self {
        Self { what, at }
    }
}

/// The bytes of one block that matter to structure, a bit each (bit `i`
/// for the block's byte `i`).
struct Masks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
}

impl Masks {
    fn of(block: &[u8; BLOCK]) -> Self {
        let quote = u8x16::splat(b'"');
        let backslash = u8x16::splat(b'\\');
        // `[` and `{` differ only in bit 5, as do `]` and `}`.
        let fold = u8x16::splat(0x20);
        let open = u8x16::splat(b'{');
        let close = u8x16::splat(b'}');
        let mut masks = Self {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
        };
        for (k, lanes) in block.chunks_exact(16).enumerate() {
            let mut bytes = [0u8; 16];
            bytes.copy_from_slice(lanes);
            let v = u8x16::from(bytes);
            let folded = v | fold;
            let bits = |m: u8x16| u64::from(m.move_mask() as u16) << (16 * k);
            masks.quote |= bits(v.cmp_eq(quote));
            masks.backslash |= bits(v.cmp_eq(backslash));
            masks.open |= bits(folded.cmp_eq(open));
            masks.close |= bits(folded.cmp_eq(close));
        }
        masks
    }
}

/// The masks of the block of `input` at `base`, padded with spaces past
/// the end.
fn masks_at(input: &[u8], base: usize) -> Masks {
    if let Some(block) = input
        .get(base..base + BLOCK)
        .and_then(|b| b.try_into().ok())
    {
        return Masks::of(block);
    }
    let mut block = [b' '; BLOCK];
    let rest = input.get(base..).unwrap_or_default();
    let n = rest.len().min(BLOCK);
    block[..n].copy_from_slice(&rest[..n]);
    Masks::of(&block)
}

/// Bits set from each odd quote up to (not including) the next: the
/// insides of the strings that start in the block.
fn prefix_xor(mut bits: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        bits ^= bits << shift;
    }
    bits
}

/// The characters of a block that an escape takes, a bit each, given
/// `carried` (bit 0 when the block's first byte is taken by a backslash
/// that ended the block before), and whether the block's last byte is a
/// backslash that takes the next block's first. Each escape is checked
/// as JSON has them.
fn escapes(input: &[u8], base: usize, masks: &Masks, carried: u64) -> Result<(u64, u64), Fault> {
    let backslash = masks.backslash;
    if carried == 0 && backslash & (backslash << 1) == 0 {
        // No two backslashes side by side: each takes the byte after it,
        // and only escapes other than `\"` and `\\` need a look.
        let taken = backslash << 1;
        let mut other = taken & !masks.quote & !backslash;
        while other != 0 {
            check_escape(input, base + other.trailing_zeros() as usize - 1)?;
            other &= other - 1;
        }
        let carry = backslash >> 63;
        if carry != 0 {
            check_escape(input, base + BLOCK - 1)?;
        }
        return Ok((taken, carry));
    }
    walk_escapes(input, base, backslash, carried)
}

/// [`escapes`] for runs of backslashes: each walked in order, one taken
/// by the one before it taking none.
fn walk_escapes(
    input: &[u8],
    base: usize,
    backslash: u64,
    carried: u64,
) -> Result<(u64, u64), Fault> {
    let mut taken = carried;
    let mut carry = 0;
    let mut rest = backslash;
    while rest != 0 {
        let i = rest.trailing_zeros();
        rest &= rest - 1;
        let bit = 1u64 << i;
        if taken & bit != 0 {
            continue;
        }
        check_escape(input, base + i as usize)?;
        if i == 63 {
            carry = 1;
        } else {
            taken |= bit << 1;
        }
    }
    Ok((taken, carry))
}

/// Checks the escape whose backslash is at `at`: one of `"\/bfnrt`, or
/// `u` and four hex digits.
fn check_escape(input: &[u8], at: usize) -> Result<(), Fault> {
    match input.get(at + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(()),
        Some(b'u') => {
            let hex = input.get(at + 2..at + 6).unwrap_or_default();
            if hex.len() == 4 && hex.iter().all(u8::is_ascii_hexdigit) {
                Ok(())
            } else {
                Err(Fault::new("invalid \\u escape", at))
            }
        }
        Some(_) => Err(Fault::new("invalid escape", at)),
        None => Err(Fault::new("EOF while parsing a string", at)),
    }
}

/// The masks of the block at `base` and the bits its escapes take, given
/// and updating `carried` (see [`escapes`]). Inlined into both scans: as
/// a call, the 1 MiB parse cost 11 % more.
#[inline(always)]
fn read_block(input: &[u8], base: usize, carried: &mut u64) -> Result<(Masks, u64), Fault> {
    let masks = masks_at(input, base);
    let mut taken = 0;
    if masks.backslash | *carried != 0 {
        (taken, *carried) = escapes(input, base, &masks, *carried)?;
    }
    Ok((masks, taken))
}

/// The index just past the object or array whose opening bracket is at
/// `start`, with at most `levels` levels open at once (that bracket's
/// included).
pub(super) fn container_end(input: &[u8], start: usize, levels: usize) -> Result<usize, Fault> {
    let mut depth = 0usize;
    let mut in_string = 0u64;
    let mut carried = 0u64;
    let mut base = start;
    while base < input.len() {
        let (masks, taken) = read_block(input, base, &mut carried)?;
        let inside = prefix_xor(masks.quote & !taken) ^ in_string;
        in_string = ((inside as i64) >> 63) as u64;
        let opens = masks.open & !inside;
        let closes = masks.close & !inside;
        let (n_open, n_close) = (opens.count_ones() as usize, closes.count_ones() as usize);
        if n_close < depth && depth + n_open <= levels {
            // Cannot end here, nor nest too deep: count.
            depth = depth + n_open - n_close;
        } else if let Some(end) = walk(&mut depth, opens, closes, levels, base)? {
            return Ok(end);
        }
        base += BLOCK;
    }
    Err(Fault::new("EOF while skipping a value", start))
}

/// Walks a block's brackets in order from `depth`: the index just past
/// the bracket that closes the outermost level, if one does.
fn walk(
    depth: &mut usize,
    opens: u64,
    closes: u64,
    levels: usize,
    base: usize,
) -> Result<Option<usize>, Fault> {
    let mut rest = opens | closes;
    while rest != 0 {
        let i = rest.trailing_zeros();
        rest &= rest - 1;
        let at = base + i as usize;
        if opens & (1u64 << i) != 0 {
            if *depth >= levels {
                return Err(Fault::new("recursion limit exceeded", at));
            }
            *depth += 1;
        } else {
            // The first bracket walked is the value's own opening one, so
            // a close finds a level open; a caller that started elsewhere
            // gets an error, not an underflow.
            *depth = depth
                .checked_sub(1)
                .ok_or(Fault::new("unbalanced bracket", at))?;
            if *depth == 0 {
                return Ok(Some(at + 1));
            }
        }
    }
    Ok(None)
}

/// The index just past the closing quote of the string opened by the
/// quote at `opened`, scanned from `from`, where no quote or backslash
/// lies between the two; the escapes checked.
pub(super) fn string_end(input: &[u8], opened: usize, from: usize) -> Result<usize, Fault> {
    let mut carried = 0u64;
    let mut base = from;
    while base < input.len() {
        let (masks, taken) = read_block(input, base, &mut carried)?;
        let quotes = masks.quote & !taken;
        if quotes != 0 {
            return Ok(base + quotes.trailing_zeros() as usize + 1);
        }
        base += BLOCK;
    }
    Err(Fault::new("EOF while parsing a string", opened))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;

    /// The end of the value at `start` as serde_json finds it.
    fn serde_end(text: &str, start: usize) -> usize {
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        values.next().expect("a value").expect("valid JSON");
        start + values.byte_offset()
    }

    fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            // Quotes, backslashes, brackets and controls inside strings.
            "[a-z\"\\\\{}\\[\\]\n\u{1}é ]{0,80}".prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 200, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::from),
                prop::collection::btree_map("[a-z:.\"\\\\]{0,12}", inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn a_container_ends_where_serde_json_ends_it(
            value in any_value(),
            pad in 0usize..70,
            pretty in any::<bool>(),
        ) {
            let body = if pretty {
                serde_json::to_string_pretty(&value)
            } else {
                serde_json::to_string(&value)
            }
            .expect("serialises");
            let text = format!("{}{body} ,1", " ".repeat(pad));
            let got = match body.as_bytes()[0] {
                b'{' | b'[' => container_end(text.as_bytes(), pad, 128),
                b'"' => string_end(text.as_bytes(), pad, pad + 1),
                _ => return Ok(()),
            };
            prop_assert_eq!(got, Ok(serde_end(&text, pad)), "{}", text);
            // Cut anywhere inside, it does not end.
            for cut in ((pad + 1)..(pad + body.len())).step_by((body.len() / 32).max(1)) {
                let short = &text.as_bytes()[..cut];
                let got = match body.as_bytes()[0] {
                    b'"' => string_end(short, pad, pad + 1),
                    _ => container_end(short, pad, 128),
                };
                prop_assert!(got.is_err(), "{:?}", &text[..cut]);
            }
        }
    }

    #[test]
    fn structure_is_checked() {
        let cases: &[(&str, Result<usize, &str>)] = &[
            (r#"{"a":"}"}"#, Ok(9)),
            (r#"[["\"]"],"]"]x"#, Ok(13)),
            (r#"{"a":"\\"}"#, Ok(10)),
            (r#"{"a":"\q"}"#, Err("invalid escape")),
            (r#"{"a":"\u12g4"}"#, Err("invalid \\u escape")),
            (r#"{"a":"\u00e9"}"#, Ok(14)),
            (r#"{"a":[1}"#, Err("EOF while skipping a value")),
            (r#"{"a":"]}"#, Err("EOF while skipping a value")),
            // Balanced, though not matched by kind: not caught.
            (r#"{"a":[1}]"#, Ok(9)),
        ];
        for (text, want) in cases {
            let got = container_end(text.as_bytes(), 0, 128).map_err(|f| f.what);
            assert_eq!(&got, want, "{text}");
        }
    }

    #[test]
    fn nesting_is_limited_to_the_levels_left() {
        for n in [1, 2, 63, 64, 65, 128, 129, 300] {
            let text = format!("{}{}", "[".repeat(n), "]".repeat(n));
            let got = container_end(text.as_bytes(), 0, 128);
            if n <= 128 {
                assert_eq!(got, Ok(2 * n), "{n}");
            } else {
                assert_eq!(
                    got.map_err(|f| f.what),
                    Err("recursion limit exceeded"),
                    "{n}"
                );
            }
            assert_eq!(container_end(text.as_bytes(), 0, n).map(|_| ()), Ok(()));
            assert!(container_end(text.as_bytes(), 0, n - 1).is_err(), "{n}");
        }
        // Many levels opened and closed within blocks never count as deep.
        let wide = format!("[{}]", "[[]],".repeat(500) + "1");
        assert_eq!(container_end(wide.as_bytes(), 0, 3), Ok(wide.len()));
    }

    #[test]
    fn escapes_are_carried_across_blocks() {
        // A backslash as a block's last byte, escaping the next one's first.
        for n in 55..75 {
            let content = format!("{}\\\"{}", "x".repeat(n), "\\\\".repeat(3));
            let text = format!(r#"["{content}"]"#);
            assert_eq!(
                container_end(text.as_bytes(), 0, 128),
                Ok(text.len()),
                "{n}"
            );
            assert_eq!(string_end(text.as_bytes(), 1, 2), Ok(text.len() - 1), "{n}");
        }
    }
}
