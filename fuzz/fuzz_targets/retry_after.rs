//! Fuzzes the `Retry-After` parser: any bytes a header value can hold are read without a panic,
//! delay-seconds read as their value (saturating), and any other reading is a date's wait.
//!
//! Run with: `cargo fuzz run retry_after` from the repository root (see fuzz/README.md).

#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use hodoflow_retry::transport::Answer;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use libfuzzer_sys::fuzz_target;

/// The first second of the year 10000, the last an HTTP-date can name.
const YEAR_10000: u64 = 253_402_300_800;
/// The SDK reads a longer `Retry-After` as 7 days (`retry_after::MAX_RETRY_AFTER`).
const MAX_RETRY_AFTER_SECS: u64 = 7 * 24 * 3600;

fuzz_target!(|data: &[u8]| {
    // The first eight bytes, when there are eight, pick `now`; the rest is the header value.
    let (now, bytes) = match data.split_first_chunk::<8>() {
        Some((seconds, rest)) => (u64::from_le_bytes(*seconds) % YEAR_10000, rest),
        None => (1_790_000_000, data),
    };
    let now = UNIX_EPOCH + Duration::from_secs(now);
    let Ok(value) = HeaderValue::from_bytes(bytes) else {
        return;
    };
    let mut headers = HeaderMap::new();
    headers.insert(header::RETRY_AFTER, value.clone());
    let answer = Answer::response(StatusCode::TOO_MANY_REQUESTS, headers, Bytes::new());
    let wait = answer.retry_after(now);

    let Ok(text) = value.to_str() else {
        assert_eq!(wait, None, "a value outside visible ASCII is not read");
        return;
    };
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
        let significant = text.trim_start_matches('0');
        let seconds = if significant.len() > 20 {
            u64::MAX
        } else {
            let wide: u128 = text.parse().expect("at most 20 significant digits fit");
            u64::try_from(wide).unwrap_or(u64::MAX)
        };
        let seconds = seconds.min(MAX_RETRY_AFTER_SECS);
        assert_eq!(wait, Some(Duration::from_secs(seconds)), "{text:?}");
    } else if let Some(wait) = wait {
        // Anything else read is an HTTP-date: it names a whole second of the years 1970 to 9999.
        assert!(wait.as_secs() <= MAX_RETRY_AFTER_SECS, "{text:?}");
        let until = now + wait;
        let since_epoch = until.duration_since(UNIX_EPOCH).expect("after the epoch");
        assert!(since_epoch.as_secs() < YEAR_10000, "{text:?}");
        if !wait.is_zero() {
            assert_eq!(since_epoch.subsec_nanos(), 0, "{text:?}");
        }
    }
});
