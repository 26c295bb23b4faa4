//! Points in time as Kubernetes writes them: RFC 3339, such as
//! `2026-12-01T10:00:00Z`.

use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// A text that is not an RFC 3339 time; the message says what was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an RFC 3339 time such as 2026-12-01T10:00:00Z: {reason}")]
pub(crate) struct TimestampError {
    text: String,
    reason: String,
}

/// Reads a time in RFC 3339, such as `2026-12-01T10:00:00Z` (for `--now`).
pub(crate) fn parse_rfc3339(text: &str) -> Result<OffsetDateTime, TimestampError> {
    OffsetDateTime::parse(text, &Rfc3339).map_err(|e| TimestampError {
        text: text.to_owned(),
        reason: e.to_string(),
    })
}

/// Writes `at` in RFC 3339, in UTC, to the whole second.
pub(crate) fn format_rfc3339_utc(at: OffsetDateTime) -> String {
    let at = at.to_offset(UtcOffset::UTC);
    let at = at.replace_nanosecond(0).unwrap_or(at);
    at.format(&Rfc3339).unwrap_or_else(|_| at.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_read_in_rfc_3339_and_written_in_utc_to_the_second() {
        let at = parse_rfc3339("2026-12-01T11:30:15.75+01:00").expect("an RFC 3339 time");
        assert_eq!(format_rfc3339_utc(at), "2026-12-01T10:30:15Z");
        let e = parse_rfc3339("yesterday")
            .expect_err("not a time")
            .to_string();
        assert!(
            e.starts_with("\"yesterday\" is not an RFC 3339 time"),
            "{e}"
        );
    }
}
