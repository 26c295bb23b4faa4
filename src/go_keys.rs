//! How Go's `encoding/json` matches the keys of a JSON object to the fields
//! of a struct, for the values Numaplane decodes that way (the namespace-level
//! ConfigMap's `data`, through `util.StructToStruct`).
//!
//! Go looks a key up by its exact name first, then case-insensitively under
//! Unicode simple case folding, and every key that matches sets the field:
//! the last one decoded wins. `StructToStruct` marshals a Go map before it
//! decodes it, and Go marshals a map with its keys sorted by their bytes, so
//! of several matching keys the greatest in byte order is the one Numaplane
//! keeps, whatever order the user wrote them in.
//!
//! Simple case folding joins an ASCII letter with a non-ASCII character in
//! two places only: `s` with `ſ` (U+017F, long s) and `k` with `K` (U+212A,
//! Kelvin sign). Every other non-ASCII character folds only with non-ASCII
//! ones (`ı` and `İ` fold with nothing), so a key matches a field whose name
//! is ASCII exactly when, character by character, it is that name up to
//! ASCII case and those two.

/// Whether Go's `encoding/json` decodes `key` into the struct field named
/// `field` (whose name is ASCII, as every field Numaplane names is).
pub fn matches_field(key: &str, field: &str) -> bool {
    let mut wanted = field.bytes();
    for c in key.chars() {
        let Some(f) = wanted.next() else {
            return false;
        };
        if fold_to_ascii(c) != Some(f.to_ascii_lowercase()) {
            return false;
        }
    }
    wanted.next().is_none()
}

/// The lower-case ASCII letter or character `c` folds with, if any.
fn fold_to_ascii(c: char) -> Option<u8> {
    match c {
        '\u{17F}' => Some(b's'),
        '\u{212A}' => Some(b'k'),
        c if c.is_ascii() => u8::try_from(c).ok().map(|b| b.to_ascii_lowercase()),
        _ => None,
    }
}

/// The keys of one object that match one field: the one Numaplane keeps
/// (the greatest in byte order) and, when there are several, the greatest
/// of the others, to name in a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched<V> {
    /// The key whose value Go keeps, and that value.
    pub kept: (String, V),
    /// Another key that matches the same field, when there is one.
    pub also: Option<String>,
}

impl<V> Matched<V> {
    /// Adds a matching `key` with its `value` to `matched`.
    pub fn offer(matched: &mut Option<Self>, key: String, value: V) {
        match matched {
            None => {
                *matched = Some(Self {
                    kept: (key, value),
                    also: None,
                });
            }
            Some(m) if key == m.kept.0 => m.kept.1 = value,
            Some(m) if key > m.kept.0 => {
                let (old, _) = std::mem::replace(&mut m.kept, (key, value));
                m.also = Some(old);
            }
            Some(m) => {
                if m.also.as_ref().is_none_or(|also| key > *also) {
                    m.also = Some(key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_fields_as_go_folds_them() {
        let cases = [
            ("upgradeStrategy", true),
            ("UpgradeStrategy", true),
            ("UPGRADESTRATEGY", true),
            ("upgradestrategy", true),
            ("upgradeſtrategy", true),
            ("UPGRADEſTRATEGY", true),
            ("upgradeStrategy ", false),
            ("upgrade-strategy", false),
            ("upgrade_strategy", false),
            ("upgradeStrateg", false),
            ("upgradeStrategyy", false),
            ("", false),
            ("upgradeStrateġy", false),
            ("upgradeStrategı", false),
        ];
        for (key, want) in cases {
            assert_eq!(matches_field(key, "upgradeStrategy"), want, "{key:?}");
        }
        // The Kelvin sign folds with k and K; ı and İ fold with nothing.
        for (key, want) in [
            ("\u{212A}ind", true),
            ("KIND", true),
            ("kınd", false),
            ("kİnd", false),
        ] {
            assert_eq!(matches_field(key, "kind"), want, "{key:?}");
        }
        // Only those two non-ASCII characters fold with an ASCII one.
        let folding: Vec<char> = ('\u{80}'..=char::MAX)
            .filter(|c| fold_to_ascii(*c).is_some())
            .collect();
        assert_eq!(folding, ['\u{17F}', '\u{212A}']);
    }

    #[test]
    fn of_several_matching_keys_the_greatest_in_byte_order_is_kept() {
        let offer_all = |keys: &[(&str, i32)]| {
            let mut m = None;
            for (k, v) in keys {
                Matched::offer(&mut m, (*k).to_owned(), *v);
            }
            m
        };
        /// A case: its name, the keys offered with their values, and the
        /// key kept, its value and another key.
        type Case<'a> = (
            &'a str,
            &'a [(&'a str, i32)],
            Option<(&'a str, i32, Option<&'a str>)>,
        );
        let cases: [Case; 6] = [
            ("none", &[], None),
            (
                "one",
                &[("UPGRADESTRATEGY", 1)],
                Some(("UPGRADESTRATEGY", 1, None)),
            ),
            (
                "lower case sorts after upper case",
                &[("upgradestrategy", 1), ("upgradeStrategy", 2)],
                Some(("upgradestrategy", 1, Some("upgradeStrategy"))),
            ),
            (
                "whatever the order written",
                &[("upgradeStrategy", 2), ("upgradestrategy", 1)],
                Some(("upgradestrategy", 1, Some("upgradeStrategy"))),
            ),
            (
                "a non-ASCII key sorts after every ASCII one",
                &[
                    ("upgradeſtrategy", 3),
                    ("upgradestrategy", 1),
                    ("UpgradeStrategy", 2),
                ],
                Some(("upgradeſtrategy", 3, Some("upgradestrategy"))),
            ),
            (
                "the same key twice keeps the last value",
                &[("upgradeStrategy", 1), ("upgradeStrategy", 2)],
                Some(("upgradeStrategy", 2, None)),
            ),
        ];
        for (name, keys, want) in cases {
            let want = want.map(|(k, v, also)| Matched {
                kept: (k.to_owned(), v),
                also: also.map(str::to_owned),
            });
            assert_eq!(offer_all(keys), want, "{name}");
        }
    }
}
