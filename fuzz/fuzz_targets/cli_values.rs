//! Fuzzes the CLI's value parsers, `DUR` (`crates/hodoflow-send/src/duration.rs`) and
//! `--trigger-limit` (`crates/hodoflow-send/src/limit.rs`), compiled here as they are: any text
//! is read without a panic, what is read matches an independent reading, and a refusal over a
//! maximum names the maximum of the value's own kind.
//!
//! Run with: `cargo fuzz run cli_values` from the repository root (see fuzz/README.md).

#![no_main]

#[path = "../../crates/hodoflow-send/src/duration.rs"]
mod duration;
#[path = "../../crates/hodoflow-send/src/limit.rs"]
mod limit;

use std::time::Duration;

use libfuzzer_sys::fuzz_target;

/// The reading of a `DUR` by other means: digits and a unit, in milliseconds, as `u128`.
fn expected_millis(text: &str) -> Option<u128> {
    let text = text.trim();
    let (digits, unit) = if let Some(d) = text.strip_suffix("ms") {
        (d, 1)
    } else if let Some(d) = text.strip_suffix('s') {
        (d, 1_000)
    } else if let Some(d) = text.strip_suffix('m') {
        (d, 60_000)
    } else {
        (text.strip_suffix('h')?, 3_600_000)
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    if significant.len() > 30 {
        return Some(u128::MAX);
    }
    let count: u128 = if significant.is_empty() {
        0
    } else {
        significant.parse().ok()?
    };
    Some(count.saturating_mul(unit))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let expected = expected_millis(text);
    match duration::parse(text) {
        Ok(parsed) => {
            assert!(parsed > Duration::ZERO, "{text:?}");
            assert!(parsed <= duration::MAX_ANY, "{text:?}");
            assert_eq!(Some(parsed.as_millis()), expected, "{text:?}");
        }
        Err(message) => {
            assert!(!message.is_empty());
            // Refused: no unit, not digits, zero, or over the documented maximum.
            if let Some(millis) = expected {
                assert!(
                    millis == 0 || millis > duration::MAX_ANY.as_millis(),
                    "{text:?}: {message}"
                );
            }
        }
    }
    // A call's budget names its own maximum, 24h, whatever the other one; a duration past
    // u64 milliseconds is "too long" instead.
    match duration::parse_call(text) {
        Ok(parsed) => assert!(parsed <= duration::MAX_CALL, "{text:?}"),
        Err(message) => {
            let over = |millis: u128| {
                millis > duration::MAX_CALL.as_millis() && millis <= u128::from(u64::MAX)
            };
            if expected.is_some_and(over) {
                assert!(
                    message.ends_with("is over the maximum of 24h"),
                    "{text:?}: {message}"
                );
            }
        }
    }
    match limit::parse(text) {
        Ok(limit::TriggerLimitArg(None)) => {
            assert!(text.trim().eq_ignore_ascii_case("off"), "{text:?}");
        }
        Ok(limit::TriggerLimitArg(Some(parsed))) => {
            let (count, per) = text.trim().split_once('/').expect("a limit has a slash");
            assert_eq!(count.trim().parse::<u32>().ok(), Some(parsed.requests()));
            assert_eq!(duration::parse(per).ok(), Some(parsed.per()), "{text:?}");
        }
        Err(message) => assert!(!message.is_empty()),
    }
});
