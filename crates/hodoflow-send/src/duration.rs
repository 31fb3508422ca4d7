//! `DUR` values such as `500ms`, `30s`, `2m` or `1h`.
//!
//! A bare number is refused rather than guessed: `--max-elapsed 30` could mean seconds or
//! milliseconds, and a budget a thousand times off is worse than a usage error.

use std::time::Duration;

/// The units a `DUR` accepts, longest suffix first so `ms` is not read as `m`.
const UNITS: [(&str, u64); 4] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];

/// Parses a positive whole number followed by `ms`, `s`, `m` or `h`.
///
/// # Errors
///
/// A sentence saying what is wrong and what is expected, for clap to show as a usage error.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let expected = "expected a whole number followed by ms, s, m or h, such as 500ms, 30s or 2m";
    let text = text.trim();
    let Some((digits, millis_per_unit)) = UNITS
        .iter()
        .find_map(|(suffix, millis)| text.strip_suffix(suffix).map(|digits| (digits, *millis)))
    else {
        return Err(format!("'{text}' has no unit: {expected}"));
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("'{text}' is not a duration: {expected}"));
    }
    let count: u64 = digits
        .parse()
        .map_err(|_| format!("'{text}' is too long a duration"))?;
    let millis = count
        .checked_mul(millis_per_unit)
        .ok_or_else(|| format!("'{text}' is too long a duration"))?;
    if millis == 0 {
        return Err(format!("'{text}' is zero: a duration must be positive"));
    }
    Ok(Duration::from_millis(millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_unit() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse(" 15s "), Ok(Duration::from_secs(15)));
    }

    #[test]
    fn refuses_a_bare_number_an_unknown_unit_and_zero() {
        assert!(parse("30").unwrap_err().contains("no unit"));
        assert!(parse("5x").unwrap_err().contains("no unit"));
        assert!(parse("ms").unwrap_err().contains("not a duration"));
        assert!(parse("-5s").unwrap_err().contains("not a duration"));
        assert!(parse("1.5s").unwrap_err().contains("not a duration"));
        assert!(parse("0s").unwrap_err().contains("positive"));
    }

    #[test]
    fn refuses_an_overflow() {
        assert!(
            parse("99999999999999999999s")
                .unwrap_err()
                .contains("too long")
        );
        assert!(
            parse("18446744073709551615h")
                .unwrap_err()
                .contains("too long")
        );
    }
}
