//! Text from a request, made safe for a log line or a message: escaped
//! ([`Escaped`]) or cut short ([`cut`]).
//!
//! The text log format writes a field's value as it is, so a uid or user
//! name holding a newline would start a line of the forger's choosing.
//! [`Escaped`] writes control characters (and backslashes, so that the
//! escaping itself cannot be forged) as Rust escapes: `\n`, `\u{1b}`, `\\`.
//! Everything else, including non-ASCII letters, is written as it is.

use std::fmt;

/// A request's text, escaped for a log line when displayed.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0;
        if !text.chars().any(needs_escape) {
            return f.write_str(text);
        }
        for c in text.chars() {
            if needs_escape(c) {
                write!(f, "{}", c.escape_default())?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\\'
}

/// `namespace/name`, escaped.
#[derive(Debug, Clone, Copy)]
pub struct EscapedObject<'a>(pub &'a str, pub &'a str);

impl fmt::Display for EscapedObject<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Escaped(self.0), Escaped(self.1))
    }
}

/// Cuts a text to `limit` characters, marking the cut with `…`.
pub fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        text.to_owned()
    } else {
        let kept: String = text.chars().take(limit - 1).collect();
        format!("{kept}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_backslashes_are_escaped_and_nothing_else() {
        let cases = [
            ("plain", "alice", "alice"),
            ("unicode letters", "jürgen-名前", "jürgen-名前"),
            ("a newline", "x\nINFO forged line", "x\\nINFO forged line"),
            ("a carriage return", "x\rforged", "x\\rforged"),
            ("an ANSI escape", "\u{1b}[31mred", "\\u{1b}[31mred"),
            ("a backslash", "a\\nb", "a\\\\nb"),
            ("a NUL", "a\0b", "a\\u{0}b"),
        ];
        let failed: Vec<String> = cases
            .iter()
            .filter(|(_, input, want)| Escaped(input).to_string() != *want)
            .map(|(name, input, want)| {
                format!(
                    "{name}: {:?} became {:?}, want {want:?}",
                    input,
                    Escaped(input).to_string()
                )
            })
            .collect();
        assert!(failed.is_empty(), "{failed:#?}");
        assert_eq!(EscapedObject("team\n", "p").to_string(), "team\\n/p");
    }
}
