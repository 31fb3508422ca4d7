//! `DUR` values such as `500ms`, `30s`, `2m` or `1h`.
//!
//! A bare number is refused rather than guessed: `--max-elapsed 30` could mean seconds or
//! milliseconds, and a budget a thousand times off is worse than a usage error.
//!
//! Every `DUR` has a documented maximum, checked here, where it enters (flag or environment):
//! 24 hours for a call's budget (`--max-elapsed`, `--attempt-timeout`, the SDK's
//! `Budget::MAX`) and `--store-timeout`, 7 days (168h, the outbox's `MAX_LEASE`) for anything
//! else (`--lease`, a `--trigger-limit` period). Over it is a usage error, exit 2:
//! `--max-elapsed 5000000000000h` was accepted and wedged an outbox with leases ending at
//! `i64::MAX`.

use std::time::Duration;

/// The longest `DUR` of a call's budget: 24 hours.
pub(crate) const MAX_CALL: Duration = hodoflow_retry::Budget::MAX;

/// The longest of any other `DUR`: 7 days.
pub(crate) const MAX_ANY: Duration = hodoflow_outbox::MAX_LEASE;

/// Parses a `DUR` of a call's budget: [`parse`], at most [`MAX_CALL`].
///
/// # Errors
///
/// As [`parse`], and a sentence naming the maximum over it.
pub(crate) fn parse_call(text: &str) -> Result<Duration, String> {
    at_most(text, parse_any(text)?, MAX_CALL, "24h")
}

/// `value`, the duration `text` gives, unless it is over `max`.
fn at_most(text: &str, value: Duration, max: Duration, shown: &str) -> Result<Duration, String> {
    if value > max {
        return Err(format!("'{}' is over the maximum of {shown}", text.trim()));
    }
    Ok(value)
}

/// The units a `DUR` accepts, longest suffix first so `ms` is not read as `m`.
const UNITS: [(&str, u64); 4] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];

/// Parses a positive whole number followed by `ms`, `s`, `m` or `h`, at most [`MAX_ANY`].
///
/// # Errors
///
/// A sentence saying what is wrong and what is expected, for clap to show as a usage error.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    at_most(text, parse_any(text)?, MAX_ANY, "168h (7 days)")
}

/// [`parse`] without a maximum.
fn parse_any(text: &str) -> Result<Duration, String> {
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
    fn refuses_a_duration_over_its_maximum() {
        assert_eq!(parse("168h"), Ok(MAX_ANY));
        assert!(parse("169h").unwrap_err().contains("maximum"));
        assert_eq!(parse_call("24h"), Ok(MAX_CALL));
        assert_eq!(parse_call("1440m"), Ok(MAX_CALL));
        for over in ["25h", "86400001ms", "168h", "169h", "5000000000000h"] {
            assert_eq!(
                parse_call(over).unwrap_err(),
                format!("'{over}' is over the maximum of 24h"),
                "the maximum that applies, whatever the other one"
            );
        }
        assert_eq!(
            parse("169h").unwrap_err(),
            "'169h' is over the maximum of 168h (7 days)"
        );
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
