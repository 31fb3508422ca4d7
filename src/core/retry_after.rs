//! The `Retry-After` field (RFC 9110, section 10.2.3): delay-seconds or an HTTP-date, read into
//! a wait, clamped to [`MAX_RETRY_AFTER`].
//!
//! A parser of its own, below both the answer that reads it and the backoff that honours it, so
//! neither imports the other for it.

use std::time::{Duration, SystemTime};

use http::HeaderValue;

/// The longest `Retry-After` taken as said: 7 days. A longer one (delay-seconds too large to
/// count, a date in the year 9999) is clamped to it: a call's budget refuses it either way, and
/// the outbox reschedules the job no later than that, never into a time no store can hold.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);

/// Parses a `Retry-After` value: delay-seconds or an HTTP-date (RFC 9110, section 10.2.3).
///
/// A date at or before `now` means no wait. Anything else is `None`, so the caller falls back to
/// backoff. A wait over [`MAX_RETRY_AFTER`] is clamped to it.
pub(crate) fn parse_retry_after(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let text = value.to_str().ok()?.trim();
    if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
        let seconds = text.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER));
    }
    let date = httpdate::parse_http_date(text).ok()?;
    Some(
        date.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_RETRY_AFTER),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_retry_after_delay_seconds() {
        let now = SystemTime::now();
        let parse = |text| parse_retry_after(&HeaderValue::from_static(text), now);
        assert_eq!(parse("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse("0"), Some(Duration::ZERO));
        assert_eq!(parse(" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(parse("604800"), Some(MAX_RETRY_AFTER));
        assert_eq!(parse("604801"), Some(MAX_RETRY_AFTER), "clamped to 7 days");
        assert_eq!(parse("99999999999999999999999"), Some(MAX_RETRY_AFTER));
        assert_eq!(
            parse("Fri, 31 Dec 9999 23:59:59 GMT"),
            Some(MAX_RETRY_AFTER)
        );
    }

    #[test]
    fn parses_retry_after_http_date() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2026 07:28:00 GMT").expect("valid date");
        let parse = |text| parse_retry_after(&HeaderValue::from_static(text), now);
        assert_eq!(
            parse("Wed, 21 Oct 2026 07:28:05 GMT"),
            Some(Duration::from_secs(5))
        );
        // The obsolete RFC 850 and asctime forms are accepted too (RFC 9110, 5.6.7).
        assert_eq!(
            parse("Wednesday, 21-Oct-26 07:28:05 GMT"),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            parse("Wed Oct 21 07:28:05 2026"),
            Some(Duration::from_secs(5))
        );
    }

    #[test]
    fn a_retry_after_date_in_the_past_means_no_wait() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2026 07:28:00 GMT").expect("valid date");
        let past = HeaderValue::from_static("Wed, 21 Oct 2026 07:27:00 GMT");
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
    }

    #[test]
    fn garbage_retry_after_is_ignored() {
        let now = SystemTime::now();
        for text in [
            "",
            "soon",
            "-1",
            "1.5",
            "3 s",
            "Wed, 32 Oct 2026 07:28:00 GMT",
        ] {
            let value = HeaderValue::from_static(text);
            assert_eq!(parse_retry_after(&value, now), None, "{text:?}");
        }
        let binary = HeaderValue::from_bytes(b"\xff3").expect("obs-text is a valid header value");
        assert_eq!(parse_retry_after(&binary, now), None);
    }
}
