//! Durations in the policy file: an integer number of seconds or a text
//! such as `45s`, `5m`, `1h30m`; and the drain-timeout default, which may
//! also be `none`.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// What the mutating webhook writes when a rollout sets no drain timeout;
/// written `none` or a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum DefaultTimeout {
    /// No timeout: write `noTimeoutSeconds`.
    #[default]
    NoTimeout,
    Seconds(u64),
}

/// A number of seconds, written as an integer or a duration such as `45s`,
/// `5m`, `1h30m`; rendered as a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seconds(pub u64);

/// Why a text is not a duration; the message is the one operators read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum DurationError {
    /// Not a duration at all.
    #[error(
        "\"{text}\" is not a duration ({reason}); write e.g. 45s, 5m, 1h30m or a number of seconds"
    )]
    NotADuration {
        /// The text as given (trimmed).
        text: String,
        reason: String,
    },
    /// A duration with a fraction of a second.
    #[error("\"{0}\" is not a whole number of seconds")]
    NotWholeSeconds(String),
}

/// Reads a duration: an integer number of seconds or a text such as `5m`.
fn parse_duration(text: &str) -> Result<u64, DurationError> {
    let text = text.trim();
    if let Ok(n) = text.parse::<u64>() {
        return Ok(n);
    }
    let d = humantime::parse_duration(text).map_err(|e| DurationError::NotADuration {
        text: text.to_owned(),
        reason: e.to_string(),
    })?;
    if d.subsec_nanos() != 0 {
        return Err(DurationError::NotWholeSeconds(text.to_owned()));
    }
    Ok(d.as_secs())
}

/// Renders seconds the way the file accepts them: `30s`, `1h`, `1h 30m`.
pub(crate) fn format_seconds(seconds: u64) -> String {
    humantime::format_duration(Duration::from_secs(seconds)).to_string()
}

struct SecondsVisitor;

impl Visitor<'_> for SecondsVisitor {
    type Value = Seconds;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as 45s, 5m or 1h30m, or an integer number of seconds")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seconds, E> {
        Ok(Seconds(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
        u64::try_from(v)
            .map(Seconds)
            .map_err(|_| E::custom(format!("{v} is negative; durations are positive")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Seconds, E> {
        parse_duration(v).map(Seconds).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SecondsVisitor)
    }
}

impl Serialize for Seconds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_seconds(self.0))
    }
}

struct DefaultVisitor;

impl Visitor<'_> for DefaultVisitor {
    type Value = DefaultTimeout;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"none\" (no timeout) or a duration such as 5m")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<DefaultTimeout, E> {
        Ok(DefaultTimeout::Seconds(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<DefaultTimeout, E> {
        SecondsVisitor
            .visit_i64(v)
            .map(|s| DefaultTimeout::Seconds(s.0))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<DefaultTimeout, E> {
        if v.trim() == "none" {
            return Ok(DefaultTimeout::NoTimeout);
        }
        parse_duration(v)
            .map(DefaultTimeout::Seconds)
            .map_err(|e| E::custom(format!("{e}, or \"none\" for no timeout")))
    }
}

impl<'de> Deserialize<'de> for DefaultTimeout {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DefaultVisitor)
    }
}

impl Serialize for DefaultTimeout {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::NoTimeout => s.serialize_str("none"),
            Self::Seconds(n) => s.serialize_str(&format_seconds(*n)),
        }
    }
}

/// `#[serde(with)]` for a number of seconds held as `u64`.
pub(crate) mod as_seconds {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        super::Seconds(*v).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        super::Seconds::deserialize(d).map(|s| s.0)
    }
}

/// `#[serde(with)]` for an optional number of seconds held as `Option<u64>`.
pub(crate) mod as_opt_seconds {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        v.map(super::Seconds).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<super::Seconds>::deserialize(d).map(|s| s.map(|s| s.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_every_accepted_form() {
        let cases = [
            ("45s", 45),
            ("5m", 300),
            ("1h", 3600),
            ("1h30m", 5400),
            ("1h 30m", 5400),
            ("90", 90),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("1.5s").is_err());
        assert!(parse_duration("").is_err());
    }
}
