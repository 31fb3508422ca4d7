//! Fuzzes the retry matrix: any surface, any status from 100 to 999, any headers and any body get
//! a verdict, and the rules that hold whatever the body says do hold.
//!
//! Run with: `cargo fuzz run classify` from the repository root (see fuzz/README.md).

#![no_main]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hodoflow_retry::{Profile, Surface, Verdict, attempt::TransportKind, transport::Answer};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

/// Every surface of every profile, Modulify's included.
fn surfaces() -> &'static [Surface] {
    Surface::all()
}

const TRANSPORT_KINDS: [TransportKind; 6] = TransportKind::ALL;

/// The headers the SDK reads; others come from the input's bytes.
const NAMES: [&str; 4] = [
    "retry-after",
    "x-request-id",
    "content-type",
    "idempotency-replayed",
];

/// The first second of the year 10000, the last an HTTP-date can name.
const YEAR_10000: u64 = 253_402_300_800;

/// An answer from the input: now and then none at all, mostly a status, headers and a body (the
/// rest of the input, so JSON error documents are reachable).
fn answer(input: &mut Unstructured<'_>) -> Result<Answer> {
    if input.ratio(1, 16)? {
        return Ok(Answer::no_response(*input.choose(&TRANSPORT_KINDS)?));
    }
    let status =
        StatusCode::from_u16(input.int_in_range(100..=999)?).expect("100 to 999 is a status");
    let mut headers = HeaderMap::new();
    for _ in 0..input.int_in_range(0..=6)? {
        let name = if input.ratio(3, 4)? {
            Some(HeaderName::from_static(input.choose(&NAMES)?))
        } else {
            let len = input.int_in_range(1..=16)?;
            HeaderName::from_bytes(input.bytes(len)?).ok()
        };
        let len = input.int_in_range(0..=40)?;
        let value = HeaderValue::from_bytes(input.bytes(len)?);
        if let (Some(name), Ok(value)) = (name, value) {
            headers.append(name, value);
        }
    }
    let rest = input.len();
    let body = Bytes::copy_from_slice(input.bytes(rest)?);
    Ok(Answer::response(status, headers, body))
}

fn check(input: &mut Unstructured<'_>) -> Result<()> {
    let surface = *input.choose(surfaces())?;
    let now = UNIX_EPOCH + Duration::from_secs(input.int_in_range(0..=YEAR_10000)?);
    let answer = answer(input)?;

    let verdict = Profile::from(surface).verdict(&answer);
    let wait = answer.retry_after(now);

    match answer.status().map(|status| status.as_u16()) {
        None => assert_eq!(
            verdict,
            Verdict::RetryAfterBackoff,
            "no answer on {surface}"
        ),
        Some(status @ (403 | 404 | 413 | 422)) => {
            assert!(
                matches!(verdict, Verdict::Stop(_)),
                "{status} on {surface} gave {verdict:?}"
            );
        }
        Some(200..=299) if surface == Surface::Webhook => {
            assert_eq!(verdict, Verdict::Success, "2xx webhook");
        }
        Some(600..) => assert!(!verdict.retries(), "outside the contract, {verdict:?}"),
        Some(_) => {}
    }
    let has_retry_after = answer
        .headers()
        .is_some_and(|headers| headers.contains_key(header::RETRY_AFTER));
    if !has_retry_after {
        assert_eq!(wait, None, "a wait without Retry-After");
    }
    if let Some(wait) = wait {
        check_date_wait(&answer, now, wait);
    }
    Ok(())
}

/// A wait read from an HTTP-date ends within the dates an HTTP-date can name.
fn check_date_wait(answer: &Answer, now: SystemTime, wait: Duration) {
    let value = answer
        .headers()
        .and_then(|headers| headers.get(header::RETRY_AFTER))
        .expect("a wait comes from a Retry-After");
    let text = value.to_str().expect("only ASCII is read").trim();
    if !text.bytes().all(|byte| byte.is_ascii_digit()) {
        let until = now + wait;
        assert!(
            until <= UNIX_EPOCH + Duration::from_secs(YEAR_10000),
            "{text:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = check(&mut Unstructured::new(data));
});
