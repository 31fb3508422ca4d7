//! Property tests: the parsers, the schedule, the matrix and the keys, over generated input.
//!
//! The example tests beside each module pin the documented cases; these check that the rules hold
//! for every input, including the ones nobody thought to write down: any bytes a server could put
//! in `Retry-After`, any backoff setting, any schedule a caller could plug in, any status and
//! body, any key a caller could pass.
//! Case counts are kept moderate so the module runs in a few seconds in CI; raise them locally
//! with a larger `CASES`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::time::Instant;

use crate::answer::Answer;
use crate::attempt::{TransportKind, WaitReason};
use crate::backoff::{Backoff, MAX_RETRY_AFTER, parse_retry_after};
use crate::budget::{Budget, Deadline, Exhausted};
use crate::classify::{classify, final_error};
use crate::error::ErrorKind;
use crate::key::{DeliveryHeader, DeliveryId, IdempotencyKey};
use crate::matrix::Verdict;
use crate::profile::Surface;
use crate::schedule::{Schedule, SharedSchedule, Waits};

/// Cases per property.
const CASES: u32 = 256;

/// Every surface of every profile.
fn surfaces() -> Vec<Surface> {
    Surface::all().to_vec()
}

const TRANSPORT_KINDS: [TransportKind; 6] = TransportKind::ALL;

/// Error codes some row of a matrix matches on, so generated bodies reach the `Code` rows.
const KNOWN_CODES: [&str; 11] = [
    "idempotency_key_reused",
    "invalid_idempotency_key",
    "invalid_request",
    "validation_failed",
    "idempotency_key_in_progress",
    "idempotency_unavailable",
    "missing_credentials",
    "Unauthorized",
    "GRAPHQL_VALIDATION_FAILED",
    "GRAPHQL_PARSE_FAILED",
    "QUERY_COMPLEXITY_EXCEEDED",
];

/// The first second of the year 10000: `httpdate` reads years 1970 to 9999.
const YEAR_10000: u64 = 253_402_300_800;
/// The first second of 2070: an RFC 850 two-digit year is read as 1970 to 2069.
const YEAR_2070: u64 = 3_155_760_000;

const SECONDS_PER_DAY: u64 = 86_400;
const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const LONG_WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The three HTTP-date forms of RFC 9110, section 5.6.7.
#[derive(Debug, Clone, Copy)]
enum DateForm {
    /// `Sun, 06 Nov 1994 08:49:37 GMT`
    ImfFixdate,
    /// `Sunday, 06-Nov-94 08:49:37 GMT`
    Rfc850,
    /// `Sun Nov  6 08:49:37 1994`
    Asctime,
}

/// A civil UTC time, as an HTTP-date shows it.
#[derive(Debug, Clone, Copy)]
struct Civil {
    year: u64,
    month: usize,
    day: u64,
    hour: u64,
    minute: u64,
    second: u64,
    weekday: usize,
}

/// Splits seconds since the epoch into a civil time (Howard Hinnant's `civil_from_days`), written
/// here rather than taken from `httpdate`, so the parser is checked against an independent oracle.
fn civil(seconds: u64) -> Civil {
    let days = seconds / SECONDS_PER_DAY;
    let of_day = seconds % SECONDS_PER_DAY;
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    Civil {
        year,
        month: usize::try_from(month).expect("a month is 1 to 12"),
        day,
        hour: of_day / 3_600,
        minute: of_day % 3_600 / 60,
        second: of_day % 60,
        // 1970-01-01 was a Thursday.
        weekday: usize::try_from((days + 4) % 7).expect("a weekday is 0 to 6"),
    }
}

/// `seconds` since the epoch as an HTTP-date in `form`.
fn format_date(form: DateForm, seconds: u64) -> String {
    let Civil {
        year,
        month,
        day,
        hour,
        minute,
        second,
        weekday,
    } = civil(seconds);
    let month = MONTHS[month - 1];
    match form {
        DateForm::ImfFixdate => format!(
            "{}, {day:02} {month} {year} {hour:02}:{minute:02}:{second:02} GMT",
            WEEKDAYS[weekday]
        ),
        DateForm::Rfc850 => format!(
            "{}, {day:02}-{month}-{:02} {hour:02}:{minute:02}:{second:02} GMT",
            LONG_WEEKDAYS[weekday],
            year % 100
        ),
        DateForm::Asctime => format!(
            "{} {month} {day:>2} {hour:02}:{minute:02}:{second:02} {year}",
            WEEKDAYS[weekday]
        ),
    }
}

/// The seconds since the epoch that `form` can carry.
fn date_seconds(form: DateForm) -> std::ops::Range<u64> {
    match form {
        DateForm::Rfc850 => 0..YEAR_2070,
        DateForm::ImfFixdate | DateForm::Asctime => 0..YEAR_10000,
    }
}

/// A date form, and whole seconds since the epoch within its range.
fn dated() -> impl Strategy<Value = (DateForm, u64)> {
    select(vec![
        DateForm::ImfFixdate,
        DateForm::Rfc850,
        DateForm::Asctime,
    ])
    .prop_flat_map(|form| (Just(form), date_seconds(form)))
}

/// A moment from 1900 to 9999, at nanosecond resolution.
fn moments() -> impl Strategy<Value = SystemTime> {
    (-2_208_988_800i64..253_402_300_800, 0u32..1_000_000_000).prop_map(|(seconds, nanos)| {
        let whole = Duration::from_secs(seconds.unsigned_abs());
        let second = if seconds < 0 {
            UNIX_EPOCH - whole
        } else {
            UNIX_EPOCH + whole
        };
        second + Duration::from_nanos(u64::from(nanos))
    })
}

/// `date` minus `now`, or zero when `date` is not after `now`, counted in nanoseconds.
fn wait_until(date: SystemTime, now: SystemTime) -> Duration {
    let nanos = |time: SystemTime| match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i128::try_from(after.as_nanos()).expect("fits"),
        Err(before) => -i128::try_from(before.duration().as_nanos()).expect("fits"),
    };
    let gap = nanos(date) - nanos(now);
    let gap = u128::try_from(gap.max(0)).expect("not negative");
    Duration::new(
        u64::try_from(gap / 1_000_000_000).expect("fits"),
        u32::try_from(gap % 1_000_000_000).expect("below a second"),
    )
}

/// Bytes a header value may hold: tab, visible ASCII, space and obs-text.
fn header_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![Just(b'\t'), 0x20u8..=0x7E, 0x80u8..=0xFF];
    prop::collection::vec(byte, 0..max)
}

/// Any bytes, and bytes a header value may hold, so both refused and built values occur.
fn value_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![prop::collection::vec(any::<u8>(), 0..48), header_bytes(48)]
}

fn header_value(bytes: &[u8]) -> HeaderValue {
    HeaderValue::from_bytes(bytes).expect("generated from header bytes")
}

/// Headers an answer could carry: the ones the SDK reads, and any others.
fn headers() -> impl Strategy<Value = HeaderMap> {
    let name = prop_oneof![
        select(vec![
            "retry-after",
            "x-request-id",
            "content-type",
            "idempotency-replayed"
        ])
        .prop_map(HeaderName::from_static),
        "[a-z][a-z0-9-]{0,15}".prop_map(|name| {
            HeaderName::from_bytes(name.as_bytes()).expect("lower-case token")
        }),
    ];
    let value = prop_oneof![
        header_bytes(40),
        any::<u32>().prop_map(|seconds| seconds.to_string().into_bytes()),
        (0..YEAR_10000).prop_map(|seconds| format_date(DateForm::ImfFixdate, seconds).into_bytes()),
    ];
    prop::collection::vec((name, value), 0..6).prop_map(|pairs| {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(name, header_value(&value));
        }
        map
    })
}

/// Answer bodies: any bytes, and error documents of each surface's shape with known and other
/// codes.
fn bodies() -> impl Strategy<Value = Bytes> {
    let code = prop_oneof![
        select(KNOWN_CODES.to_vec()).prop_map(String::from),
        ".{0,20}"
    ];
    let document = (0..4u8, code).prop_map(|(shape, code)| {
        let document = match shape {
            0 => serde_json::json!({"errors": [{"status": "409", "code": code}]}),
            1 => serde_json::json!({"error": code}),
            2 => serde_json::json!({"data": null, "error": {"code": code, "message": "m"}}),
            _ => serde_json::json!({"errors": [{"message": "m", "extensions": {"code": code}}]}),
        };
        serde_json::to_vec(&document).expect("a JSON value serializes")
    });
    prop_oneof![prop::collection::vec(any::<u8>(), 0..200), document].prop_map(Bytes::from)
}

/// Modulify answer bodies: its error shape with a known or another code, most of the time.
fn modulify_bodies() -> impl Strategy<Value = Bytes> {
    let code = prop_oneof![
        3 => select(KNOWN_CODES.to_vec()).prop_map(String::from),
        1 => ".{0,20}"
    ];
    let document = code.prop_map(|code| {
        let document = serde_json::json!({"data": null, "error": {"code": code, "message": "m"}});
        Bytes::from(serde_json::to_vec(&document).expect("a JSON value serializes"))
    });
    prop_oneof![3 => document, 1 => bodies()]
}

/// Durations from zero to `Duration::MAX`, with small ones common.
fn durations() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (0u64..=120_000).prop_map(Duration::from_millis),
        (0u64..=86_400 * 365 * 100, 0u32..1_000_000_000)
            .prop_map(|(seconds, nanos)| Duration::new(seconds, nanos)),
        (any::<u64>(), 0u32..1_000_000_000)
            .prop_map(|(seconds, nanos)| Duration::new(seconds, nanos)),
        Just(Duration::MAX),
    ]
}

/// Durations more than zero, up to ones whose end no `Instant` can hold.
fn budget_durations() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (1u64..=120_000).prop_map(Duration::from_millis),
        (1u64..=86_400 * 365 * 100).prop_map(Duration::from_nanos),
        (1u64..=86_400 * 365 * 100).prop_map(Duration::from_secs),
        (1u64..=u64::MAX).prop_map(Duration::from_secs),
        Just(Duration::MAX),
    ]
}

/// Time already spent: zero, or up to a century, which an `Instant` can reach.
fn elapsed_durations() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (1u64..=120_000).prop_map(Duration::from_millis),
        (1u64..=86_400 * 365 * 100).prop_map(Duration::from_secs),
    ]
}

fn retries() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..=40, any::<u32>()]
}

fn verdicts() -> impl Strategy<Value = Verdict> {
    select(vec![
        Verdict::Success,
        Verdict::RetryAfterBackoff,
        Verdict::RetryAfterRetryAfter,
        Verdict::ReexchangeOnce,
        Verdict::Stop(ErrorKind::Forbidden),
        Verdict::Stop(ErrorKind::InProgress),
        Verdict::Stop(ErrorKind::Server),
    ])
}

/// The verdicts that wait for a server's `Retry-After` or back off.
fn waiting_verdicts() -> impl Strategy<Value = Verdict> {
    select(vec![
        Verdict::RetryAfterBackoff,
        Verdict::RetryAfterRetryAfter,
    ])
}

/// The most jitter [`Backoff::wait`] may add to a `Retry-After`: a tenth of it, at most 1 s.
fn retry_after_jitter_max(server_wait: Duration) -> Duration {
    (server_wait / 10).min(Duration::from_secs(1))
}

/// A schedule that waits the durations of a list, then stops.
#[derive(Debug, Clone)]
struct Listed(Vec<Duration>);

impl Schedule for Listed {
    fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send> {
        Box::new(self.0.clone().into_iter())
    }
}

/// Any schedule, recording every wait it hands out, so a property knows what it said.
struct Recorded<S> {
    schedule: S,
    said: Arc<Mutex<Vec<Duration>>>,
}

impl<S: Schedule> Schedule for Recorded<S> {
    fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send> {
        let said = Arc::clone(&self.said);
        Box::new(
            self.schedule
                .start()
                .inspect(move |wait| said.lock().expect("not poisoned").push(*wait)),
        )
    }
}

/// The answers of one operation, as the engine plans its waits: a verdict that waits (or a
/// re-exchange, which must draw nothing) and the server's `Retry-After`, if any.
fn answers() -> impl Strategy<Value = Vec<(Verdict, Option<Duration>)>> {
    let verdict = select(vec![
        Verdict::RetryAfterBackoff,
        Verdict::RetryAfterRetryAfter,
        Verdict::ReexchangeOnce,
    ]);
    prop::collection::vec((verdict, prop::option::of(durations())), 1..12)
}

/// Where one operation stands against its budget when it plans its waits.
#[derive(Debug, Clone, Copy)]
struct Spent {
    max_elapsed: Duration,
    elapsed: Duration,
}

fn spent() -> impl Strategy<Value = Spent> {
    (budget_durations(), elapsed_durations()).prop_map(|(max_elapsed, elapsed)| Spent {
        max_elapsed,
        elapsed,
    })
}

/// Plans the waits of one operation that gets `answers`, with `schedule` and a backoff whose
/// fallback is `fallback`, as the engine does, and checks every wait: never below `Retry-After`,
/// never below the fallback after a 429 without one, never below the schedule's own wait after a
/// 5xx, one wait drawn per retry and none for a re-exchange, a stop only when the schedule has
/// ended, and a wait the budget accepts exactly when it ends before the budget does.
fn plans_keep_the_floors_and_the_budget<S: Schedule + 'static>(
    schedule: S,
    fallback: Duration,
    answers: &[(Verdict, Option<Duration>)],
    spent: Spent,
    seed: u64,
) -> Result<(), TestCaseError> {
    let said = Arc::new(Mutex::new(Vec::new()));
    let shared = SharedSchedule::new(Recorded {
        schedule,
        said: Arc::clone(&said),
    });
    let mut waits = Waits::new(Backoff::new().retry_after_fallback(fallback), Some(&shared));
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let deadline = Deadline::start(Budget::new().max_elapsed(spent.max_elapsed), started);
    let now = started + spent.elapsed;
    let mut retry = 0;
    for &(verdict, retry_after) in answers {
        let before = said.lock().expect("not poisoned").len();
        let planned = waits.plan(verdict, retry, retry_after, &mut rng);
        let drawn = said.lock().expect("not poisoned")[before..].to_vec();
        if verdict == Verdict::ReexchangeOnce {
            prop_assert_eq!(planned, Some((Duration::ZERO, WaitReason::Reexchange)));
            prop_assert!(drawn.is_empty(), "a re-exchange drew {:?}", drawn);
            continue;
        }
        let Some((wait, reason)) = planned else {
            prop_assert!(
                drawn.is_empty(),
                "stopped though the schedule said {:?}",
                drawn
            );
            return Ok(());
        };
        prop_assert_eq!(drawn.len(), 1, "one wait drawn per retry");
        let scheduled = drawn[0];
        match (verdict, retry_after) {
            (Verdict::RetryAfterRetryAfter, Some(server)) => {
                prop_assert_eq!(reason, WaitReason::RetryAfter);
                prop_assert!(
                    wait >= server,
                    "{:?} undercuts Retry-After {:?}",
                    wait,
                    server
                );
                prop_assert!(wait - server <= retry_after_jitter_max(server));
            }
            (Verdict::RetryAfterRetryAfter, None) => {
                prop_assert!(
                    wait >= fallback,
                    "{:?} undercuts the fallback {:?}",
                    wait,
                    fallback
                );
                prop_assert!(
                    wait >= scheduled,
                    "{:?} undercuts the schedule's {:?}",
                    wait,
                    scheduled
                );
                match reason {
                    WaitReason::RetryAfterFallback => {
                        prop_assert!(wait - fallback <= retry_after_jitter_max(fallback));
                    }
                    WaitReason::Backoff => prop_assert_eq!(wait, scheduled),
                    other => prop_assert!(false, "unexpected reason {:?}", other),
                }
            }
            (Verdict::RetryAfterBackoff, Some(server)) => {
                prop_assert!(
                    wait >= server,
                    "{:?} undercuts Retry-After {:?}",
                    wait,
                    server
                );
                prop_assert!(
                    wait >= scheduled,
                    "{:?} undercuts the schedule's {:?}",
                    wait,
                    scheduled
                );
                match reason {
                    WaitReason::RetryAfter => {
                        prop_assert!(wait - server <= retry_after_jitter_max(server));
                    }
                    WaitReason::Backoff => prop_assert_eq!(wait, scheduled),
                    other => prop_assert!(false, "unexpected reason {:?}", other),
                }
            }
            (Verdict::RetryAfterBackoff, None) => {
                prop_assert_eq!((wait, reason), (scheduled, WaitReason::Backoff));
            }
            (other, _) => prop_assert!(false, "not a waiting verdict: {:?}", other),
        }
        let ends_within = spent
            .elapsed
            .checked_add(wait)
            .is_some_and(|end| end < spent.max_elapsed);
        prop_assert_eq!(
            deadline.check_wait(wait, now).is_ok(),
            ends_within,
            "a wait of {:?} at {:?} of {:?}",
            wait,
            spent.elapsed,
            spent.max_elapsed
        );
        retry += 1;
    }
    Ok(())
}

#[test]
fn the_date_oracle_writes_the_rfc_9110_examples() {
    // RFC 9110, section 5.6.7: Sunday, 6 November 1994, 08:49:37 UTC.
    let seconds = 784_111_777;
    assert_eq!(
        format_date(DateForm::ImfFixdate, seconds),
        "Sun, 06 Nov 1994 08:49:37 GMT"
    );
    assert_eq!(
        format_date(DateForm::Rfc850, seconds),
        "Sunday, 06-Nov-94 08:49:37 GMT"
    );
    assert_eq!(
        format_date(DateForm::Asctime, seconds),
        "Sun Nov  6 08:49:37 1994"
    );
    assert_eq!(
        format_date(DateForm::ImfFixdate, YEAR_10000 - 1),
        "Fri, 31 Dec 9999 23:59:59 GMT"
    );
    assert_eq!(
        format_date(DateForm::ImfFixdate, YEAR_2070),
        "Wed, 01 Jan 2070 00:00:00 GMT"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn retry_after_parsing_of_any_header_value_never_panics(
        bytes in value_bytes(),
        now in moments(),
    ) {
        let Ok(value) = HeaderValue::from_bytes(&bytes) else {
            return Ok(());
        };
        let parsed = parse_retry_after(&value, now);
        if value.to_str().is_err() {
            prop_assert_eq!(parsed, None, "a value outside visible ASCII is not read");
        }
    }

    #[test]
    fn retry_after_delay_seconds_parse_to_their_value_clamped_to_7_days(
        digits in prop_oneof!["[0-9]{1,40}", any::<u64>().prop_map(|n| n.to_string())],
        padding in select(vec![("", ""), (" ", ""), ("", "  "), ("\t", " ")]),
        now in moments(),
    ) {
        let text = format!("{}{digits}{}", padding.0, padding.1);
        let value = HeaderValue::from_str(&text).expect("digits and blanks are a header value");
        let significant = digits.trim_start_matches('0');
        let expected = if significant.len() > 20 {
            u64::MAX
        } else {
            let wide: u128 = digits.parse().expect("at most 20 significant digits fit in u128");
            u64::try_from(wide).unwrap_or(u64::MAX)
        };
        let expected = Duration::from_secs(expected).min(MAX_RETRY_AFTER);
        prop_assert_eq!(parse_retry_after(&value, now), Some(expected));
    }

    #[test]
    fn retry_after_http_dates_in_every_form_parse_to_the_wait_from_now(
        (form, seconds) in dated(),
        now in moments(),
    ) {
        let text = format_date(form, seconds);
        let value = HeaderValue::from_str(&text).expect("a date is a header value");
        let date = UNIX_EPOCH + Duration::from_secs(seconds);
        let expected = wait_until(date, now).min(MAX_RETRY_AFTER);
        prop_assert_eq!(parse_retry_after(&value, now), Some(expected), "{}", text);
    }

    #[test]
    fn a_retry_after_date_at_or_before_now_is_no_wait(
        (form, seconds) in dated(),
        late in durations(),
    ) {
        let date = UNIX_EPOCH + Duration::from_secs(seconds);
        let Some(now) = date.checked_add(late) else {
            return Ok(());
        };
        let value = HeaderValue::from_str(&format_date(form, seconds)).expect("a header value");
        prop_assert_eq!(parse_retry_after(&value, now), Some(Duration::ZERO));
    }

    #[test]
    fn junk_retry_after_is_none(
        junk in prop_oneof![
            "[A-Za-z ,:;./_+-]{0,30}",
            "[+-][0-9]{1,10}",
            "[0-9]{1,10}[.,][0-9]{1,5}",
            "[0-9]{1,10} ?(s|sec|seconds|ms)",
            "0x[0-9a-f]{1,8}",
            "[0-9]{1,5} [0-9]{1,5}",
            // An IMF-fixdate with a field out of range: day, hour, minute or second.
            (32u8..=99).prop_map(|day| format!("Wed, {day} Oct 2026 07:28:00 GMT")),
            (24u8..=99).prop_map(|hour| format!("Wed, 21 Oct 2026 {hour}:28:00 GMT")),
            (60u8..=99).prop_map(|minute| format!("Wed, 21 Oct 2026 07:{minute}:00 GMT")),
            (60u8..=99).prop_map(|second| format!("Wed, 21 Oct 2026 07:28:{second} GMT")),
            "[A-Z][a-z]{2}".prop_filter("not a month", |month| !MONTHS.contains(&month.as_str()))
                .prop_map(|month| format!("Wed, 21 {month} 2026 07:28:00 GMT")),
        ],
        now in moments(),
    ) {
        let value = HeaderValue::from_str(&junk).expect("printable ASCII is a header value");
        prop_assert_eq!(parse_retry_after(&value, now), None, "{:?}", junk);
    }

    #[test]
    fn backoff_without_retry_after_never_exceeds_the_cap(
        base in durations(),
        cap in durations(),
        retry in retries(),
        verdict in verdicts(),
        seed in any::<u64>(),
    ) {
        let backoff = Backoff::new().base(base).cap(cap);
        let mut rng = StdRng::seed_from_u64(seed);
        match backoff.wait(verdict, retry, None, &mut rng) {
            Some((wait, WaitReason::Backoff)) => {
                prop_assert!(wait <= cap, "{:?} > cap {:?}", wait, cap);
                prop_assert!(wait <= backoff.ceiling(retry));
            }
            Some((wait, WaitReason::Reexchange)) => {
                prop_assert_eq!(verdict, Verdict::ReexchangeOnce);
                prop_assert_eq!(wait, Duration::ZERO);
            }
            Some((wait, WaitReason::RetryAfterFallback)) => {
                prop_assert_eq!(verdict, Verdict::RetryAfterRetryAfter);
                let fallback = Backoff::DEFAULT_RETRY_AFTER_FALLBACK;
                prop_assert!(wait >= fallback && wait - fallback <= retry_after_jitter_max(fallback));
            }
            Some(other) => prop_assert!(false, "no Retry-After, yet {:?}", other),
            None => prop_assert!(!verdict.retries()),
        }
    }

    #[test]
    fn backoff_never_undercuts_retry_after_and_adds_at_most_the_documented_jitter(
        base in durations(),
        cap in durations(),
        retry in retries(),
        verdict in waiting_verdicts(),
        server_wait in durations(),
        seed in any::<u64>(),
    ) {
        let backoff = Backoff::new().base(base).cap(cap);
        let mut rng = StdRng::seed_from_u64(seed);
        let (wait, reason) = backoff
            .wait(verdict, retry, Some(server_wait), &mut rng)
            .expect("a waiting verdict retries");
        prop_assert!(wait >= server_wait, "{:?} undercuts Retry-After {:?}", wait, server_wait);
        match reason {
            WaitReason::RetryAfter => {
                let jitter = wait - server_wait;
                prop_assert!(jitter <= retry_after_jitter_max(server_wait), "jitter {:?}", jitter);
            }
            WaitReason::Backoff => {
                prop_assert_eq!(verdict, Verdict::RetryAfterBackoff);
                prop_assert!(wait <= cap && wait <= backoff.ceiling(retry));
            }
            other => prop_assert!(false, "unexpected reason {:?}", other),
        }
    }

    #[test]
    fn any_schedule_keeps_the_retry_after_floor_the_fallback_and_the_budget(
        listed in prop::collection::vec(durations(), 0..12),
        fallback in durations(),
        answers in answers(),
        spent in spent(),
        seed in any::<u64>(),
    ) {
        plans_keep_the_floors_and_the_budget(Listed(listed), fallback, &answers, spent, seed)?;
    }

    #[test]
    fn a_deadline_never_accepts_a_wait_that_ends_past_the_budget(
        max_elapsed in budget_durations(),
        elapsed in elapsed_durations(),
        base in durations(),
        cap in durations(),
        retry in retries(),
        verdict in waiting_verdicts(),
        server_wait in prop::option::of(durations()),
        seed in any::<u64>(),
        at_the_edge in prop::option::of(-2i64..=2),
    ) {
        let started = Instant::now();
        let deadline = Deadline::start(Budget::new().max_elapsed(max_elapsed), started);
        let now = started + elapsed;
        let mut rng = StdRng::seed_from_u64(seed);
        let (scheduled, _) = Backoff::new()
            .base(base)
            .cap(cap)
            .wait(verdict, retry, server_wait, &mut rng)
            .expect("a waiting verdict retries");
        // Some waits end within nanoseconds of the budget's end, where an off-by-one would show.
        let wait = match at_the_edge {
            None => scheduled,
            Some(nudge) => {
                let remaining = max_elapsed.saturating_sub(elapsed);
                let step = Duration::from_nanos(nudge.unsigned_abs());
                if nudge < 0 {
                    remaining.saturating_sub(step)
                } else {
                    remaining.saturating_add(step)
                }
            }
        };
        let ends_within = elapsed.checked_add(wait).is_some_and(|end| end < max_elapsed);
        match deadline.check_wait(wait, now) {
            Ok(()) => prop_assert!(ends_within, "accepted {:?} at {:?} of {:?}", wait, elapsed, max_elapsed),
            Err(Exhausted { wait: refused, remaining }) => {
                prop_assert!(!ends_within, "refused {:?} at {:?} of {:?}", wait, elapsed, max_elapsed);
                prop_assert_eq!(refused, wait);
                prop_assert_eq!(remaining, max_elapsed.saturating_sub(elapsed));
            }
        }
    }

    #[test]
    fn a_deadline_never_gives_an_attempt_timeout_past_the_budget(
        max_elapsed in budget_durations(),
        attempt_timeout in budget_durations(),
        elapsed in elapsed_durations(),
    ) {
        let budget = Budget::new().max_elapsed(max_elapsed).attempt_timeout(attempt_timeout);
        let started = Instant::now();
        let deadline = Deadline::start(budget, started);
        let now = started + elapsed;
        prop_assert_eq!(deadline.remaining(now), max_elapsed.saturating_sub(elapsed));
        match deadline.attempt_timeout(now) {
            Some(timeout) => {
                prop_assert!(!timeout.is_zero());
                prop_assert!(timeout <= attempt_timeout);
                prop_assert!(elapsed + timeout <= max_elapsed);
                prop_assert_eq!(timeout, attempt_timeout.min(max_elapsed - elapsed));
            }
            None => prop_assert!(elapsed >= max_elapsed),
        }
    }

    #[test]
    fn classification_is_total_over_every_answer(
        surface in select(surfaces()),
        status in 100u16..=599,
        headers in headers(),
        body in bodies(),
        now in moments(),
    ) {
        let status = StatusCode::from_u16(status).expect("100 to 599 is a status");
        let answer = Answer::response(status, headers, body);
        let verdict = classify(surface, &answer);
        prop_assert!(
            surface.rules().iter().any(|rule| rule.verdict == verdict),
            "{:?} is no verdict of the {} table",
            verdict,
            surface
        );
        let _ = answer.retry_after(now);
        let error = final_error(surface, &answer, now);
        prop_assert_eq!(error.status(), Some(status));
    }

    #[test]
    fn no_answer_is_retried_with_backoff_on_every_surface(
        surface in select(surfaces()),
        kind in select(TRANSPORT_KINDS.to_vec()),
        now in moments(),
    ) {
        let answer = Answer::no_response(kind);
        prop_assert_eq!(classify(surface, &answer), Verdict::RetryAfterBackoff);
        prop_assert_eq!(answer.retry_after(now), None);
        prop_assert_eq!(final_error(surface, &answer, now).kind(), ErrorKind::Transport);
    }

    #[test]
    fn a_2xx_webhook_answer_is_success(
        status in 200u16..=299,
        headers in headers(),
        body in bodies(),
    ) {
        let status = StatusCode::from_u16(status).expect("2xx is a status");
        let answer = Answer::response(status, headers, body);
        prop_assert_eq!(classify(Surface::Webhook, &answer), Verdict::Success);
    }

    #[test]
    fn a_2xx_modulify_answer_is_success_whatever_its_body(
        status in 200u16..=299,
        headers in headers(),
        body in bodies(),
    ) {
        let status = StatusCode::from_u16(status).expect("2xx is a status");
        let answer = Answer::response(status, headers, body);
        prop_assert_eq!(classify(Surface::Modulify, &answer), Verdict::Success);
    }

    #[test]
    fn modulify_tells_409_in_progress_and_422_reuse_by_their_code_alone(
        status in select(vec![409u16, 422]),
        headers in headers(),
        body in modulify_bodies(),
    ) {
        let codes = crate::classify::error_codes(Surface::Modulify, &body);
        let answer = Answer::response(StatusCode::from_u16(status).expect("a status"), headers, body);
        let verdict = classify(Surface::Modulify, &answer);
        let expected = match status {
            409 if codes.iter().any(|code| code == "idempotency_key_in_progress") => {
                Verdict::RetryAfterRetryAfter
            }
            409 => Verdict::Stop(ErrorKind::ClientError),
            _ if codes.iter().any(|code| code == "idempotency_key_reused") => {
                Verdict::Stop(ErrorKind::KeyReused)
            }
            _ => Verdict::Stop(ErrorKind::Unprocessable),
        };
        prop_assert_eq!(verdict, expected);
    }

    #[test]
    fn modulify_never_exchanges_on_401_and_always_retries_429_500_502_503_504(
        status in select(vec![401u16, 429, 500, 502, 503, 504]),
        headers in headers(),
        body in modulify_bodies(),
        kind in select(TRANSPORT_KINDS.to_vec()),
    ) {
        let answer = Answer::response(StatusCode::from_u16(status).expect("a status"), headers, body);
        let verdict = classify(Surface::Modulify, &answer);
        match status {
            401 => prop_assert_eq!(verdict, Verdict::Stop(ErrorKind::Unauthorized)),
            429 => prop_assert_eq!(verdict, Verdict::RetryAfterRetryAfter),
            _ => prop_assert_eq!(verdict, Verdict::RetryAfterBackoff),
        }
        let lost = Answer::no_response(kind);
        prop_assert_eq!(classify(Surface::Modulify, &lost), Verdict::RetryAfterBackoff);
    }

    #[test]
    fn statuses_403_404_413_422_always_stop_on_every_surface(
        surface in select(surfaces()),
        status in select(vec![403u16, 404, 413, 422]),
        headers in headers(),
        body in bodies(),
    ) {
        let answer = Answer::response(
            StatusCode::from_u16(status).expect("a status"),
            headers,
            body,
        );
        let verdict = classify(surface, &answer);
        prop_assert!(matches!(verdict, Verdict::Stop(_)), "{} on {} gave {:?}", status, surface, verdict);
        match status {
            403 => prop_assert_eq!(verdict, Verdict::Stop(ErrorKind::Forbidden)),
            404 => prop_assert_eq!(verdict, Verdict::Stop(ErrorKind::NotFound)),
            _ => {}
        }
    }

    #[test]
    fn an_idempotency_key_round_trips_or_is_refused_as_invalid_input(
        text in prop_oneof![
            "[!-~]{1,255}",
            "[!-~]{253,257}",
            "[!-~]{256,300}",
            "[ -~]{0,20}",
            ".{0,40}",
            any::<String>(),
        ],
    ) {
        let valid = (1..=255).contains(&text.len()) && text.bytes().all(|byte| byte.is_ascii_graphic());
        match IdempotencyKey::new(&text) {
            Ok(key) => {
                prop_assert!(valid, "accepted {:?}", text);
                prop_assert_eq!(key.as_str(), text.as_str());
                prop_assert_eq!(key.to_header_value(), text.as_bytes());
                prop_assert_eq!(key.to_string(), text);
            }
            Err(error) => {
                prop_assert!(!valid, "refused {:?}: {}", text, error);
                prop_assert_eq!(error.kind(), ErrorKind::InvalidInput);
            }
        }
    }

    #[test]
    fn a_delivery_id_from_headers_follows_precedence_round_trips_or_is_refused(
        pairs in prop::collection::vec(
            (
                select(vec![
                    "idempotency-key",
                    "x-github-delivery",
                    "x-shopify-webhook-id",
                    "x-twilio-idempotency-token",
                    "x-request-id",
                ]),
                prop_oneof![
                    "[!-~]{1,40}".prop_map(String::into_bytes),
                    "[ \t]{0,2}[!-~]{1,20}[ \t]{0,2}".prop_map(String::into_bytes),
                    "[ \t]{0,3}".prop_map(String::into_bytes),
                    "[!-~]{250,260}".prop_map(String::into_bytes),
                    header_bytes(20),
                ],
            ),
            0..6,
        ),
    ) {
        let mut headers = HeaderMap::new();
        for (name, value) in &pairs {
            headers.append(*name, header_value(value));
        }
        // The model: the first header in precedence order with a non-blank value, its first
        // non-blank value.
        let chosen = DeliveryHeader::PRECEDENCE.iter().find_map(|&header| {
            pairs
                .iter()
                .find(|(name, value)| *name == header.name() && !value.trim_ascii().is_empty())
                .map(|(_, value)| (header, value.trim_ascii()))
        });
        match (chosen, DeliveryId::from_headers(&headers)) {
            (None, Ok(found)) => prop_assert_eq!(found, None),
            (Some((header, value)), Ok(Some(id))) => {
                prop_assert_eq!(id.header(), header);
                prop_assert_eq!(id.key().as_str().as_bytes(), value);
                prop_assert_eq!(id.key().to_header_value(), value);
            }
            (Some((header, value)), Err(error)) => {
                let valid = value.len() <= 255 && value.iter().all(u8::is_ascii_graphic);
                prop_assert!(!valid, "refused a valid {} value {:?}", header, value);
                prop_assert_eq!(error.kind(), ErrorKind::InvalidInput);
                prop_assert!(error.to_string().contains(header.name()), "{}", error);
            }
            (chosen, found) => prop_assert!(false, "model {:?}, found {:?}", chosen, found),
        }
    }
}

/// backon's `ExponentialBuilder` over its settings, seeded so a case can be replayed. A
/// `total_delay` stays within a century and the factor within 0 to 10: backon 1.6 checks the
/// total with an addition that does not saturate, which panics once its sum nears
/// `Duration::MAX` (a huge total, or a negative factor, which makes the next delay the maximum).
#[cfg(feature = "backon")]
fn backon_builders() -> impl Strategy<Value = backon::ExponentialBuilder> {
    let century = (0u64..=86_400 * 365 * 100).prop_map(Duration::from_secs);
    (
        durations(),
        prop::option::of(durations()),
        prop::option::of(century),
        prop::option::of(0usize..=16),
        (0.0f32..=10.0, any::<bool>(), any::<u64>()),
    )
        .prop_map(|(min, max, total, times, (factor, jitter, seed))| {
            let builder = backon::ExponentialBuilder::new()
                .with_min_delay(min)
                .with_factor(factor)
                .with_jitter_seed(seed)
                .with_total_delay(total);
            let builder = match max {
                Some(max) => builder.with_max_delay(max),
                None => builder.without_max_delay(),
            };
            let builder = match times {
                Some(times) => builder.with_max_times(times),
                None => builder.without_max_times(),
            };
            if jitter {
                builder.with_jitter()
            } else {
                builder
            }
        })
}

#[cfg(feature = "backon")]
proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn a_backon_schedule_keeps_the_retry_after_floor_the_fallback_and_the_budget(
        builder in backon_builders(),
        fallback in durations(),
        answers in answers(),
        spent in spent(),
        seed in any::<u64>(),
    ) {
        let schedule = crate::schedule::BackonSchedule::new(builder);
        plans_keep_the_floors_and_the_budget(schedule, fallback, &answers, spent, seed)?;
    }

    #[test]
    fn a_backon_schedule_waits_what_its_builder_builds_afresh_per_operation(
        builder in backon_builders(),
    ) {
        use backon::BackoffBuilder;

        let schedule = crate::schedule::BackonSchedule::new(builder);
        let built: Vec<_> = builder.build().take(20).collect();
        prop_assert_eq!(schedule.start().take(20).collect::<Vec<_>>(), built.clone());
        prop_assert_eq!(schedule.start().take(20).collect::<Vec<_>>(), built);
    }
}

/// The `backoff` crate's `ExponentialBackoff` over its settings: intervals from zero to
/// `Duration::MAX`, with and without a `max_elapsed_time`.
#[cfg(feature = "backoff")]
fn backoff_crate_schedules() -> impl Strategy<Value = backoff::ExponentialBackoff> {
    (
        durations(),
        durations(),
        prop::option::of(durations()),
        (0.0f64..=2.0, 0.0f64..=10.0),
    )
        .prop_map(|(initial, max, elapsed, (randomization, multiplier))| {
            backoff::ExponentialBackoffBuilder::new()
                .with_initial_interval(initial)
                .with_max_interval(max)
                .with_max_elapsed_time(elapsed)
                .with_randomization_factor(randomization)
                .with_multiplier(multiplier)
                .build()
        })
}

#[cfg(feature = "backoff")]
proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn a_backoff_crate_schedule_keeps_the_retry_after_floor_the_fallback_and_the_budget(
        schedule in backoff_crate_schedules(),
        fallback in durations(),
        answers in answers(),
        spent in spent(),
        seed in any::<u64>(),
    ) {
        let schedule = crate::schedule::BackoffCrateSchedule::new(schedule);
        plans_keep_the_floors_and_the_budget(schedule, fallback, &answers, spent, seed)?;
    }

    #[test]
    fn a_backoff_crate_schedule_starts_afresh_per_operation(
        mut schedule in backoff_crate_schedules(),
        stepped in 0usize..5,
    ) {
        use backoff::backoff::Backoff as _;

        schedule.randomization_factor = 0.0;
        schedule.max_elapsed_time = None;
        for _ in 0..stepped {
            schedule.next_backoff();
        }
        let adapted = crate::schedule::BackoffCrateSchedule::new(schedule.clone());
        schedule.reset();
        let expected: Vec<_> = std::iter::from_fn(|| schedule.next_backoff()).take(20).collect();
        // Even without randomization the crate draws up to a nanosecond of noise.
        let near = |waits: Vec<Duration>| {
            waits.len() == expected.len()
                && waits.iter().zip(&expected).all(|(wait, expected)| {
                    wait.abs_diff(*expected) <= Duration::from_nanos(1)
                })
        };
        for _ in 0..2 {
            let waits: Vec<_> = adapted.start().take(20).collect();
            prop_assert!(near(waits.clone()), "{:?} is not {:?}", waits, expected);
        }
    }
}
