//! Sizes on the command line, such as `--max-inflight-body-bytes 32Mi`.

const KIB: usize = 1024;

/// Why a size could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a size: use bytes, or a number with KiB, MiB, GiB (or Ki, Mi, Gi)")]
pub struct ParseSizeError(String);

/// Reads a size such as `33554432`, `32MiB` or `32Mi`.
pub fn parse_size(text: &str) -> Result<usize, ParseSizeError> {
    let trimmed = text.trim();
    let digits = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits);
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "Ki" | "KiB" => KIB,
        "Mi" | "MiB" => KIB * KIB,
        "Gi" | "GiB" => KIB * KIB * KIB,
        _ => return Err(ParseSizeError(text.to_owned())),
    };
    number
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| ParseSizeError(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        const MIB: usize = KIB * KIB;
        assert_eq!(parse_size("33554432").ok(), Some(32 * MIB));
        assert_eq!(parse_size("32MiB").ok(), Some(32 * MIB));
        assert_eq!(parse_size("32Mi").ok(), Some(32 * MIB));
        assert_eq!(parse_size(" 512 KiB ").ok(), Some(512 * 1024));
        assert_eq!(parse_size("1Gi").ok(), Some(1024 * MIB));
        for bad in ["", "MiB", "32 MB", "-1", "1.5Mi", "99999999999999999999Gi"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
