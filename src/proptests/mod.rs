//! Property tests: the parsers, the schedule, the matrix and the keys, over generated input.
//!
//! The example tests beside each module pin the documented cases; these check that the rules hold
//! for every input, including the ones nobody thought to write down: any bytes a server could put
//! in `Retry-After`, any backoff setting, any schedule a caller could plug in, any status and
//! body, any key a caller could pass.
//! One file per subject: `retry_after.rs`, `schedules.rs` (and `adapters.rs` for the backon and
//! backoff crate schedules), `budget.rs`, `classify.rs`, `keys.rs`; the strategies they share are
//! here.
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

use crate::core::answer::Answer;
use crate::core::attempt::{TransportKind, WaitReason};
use crate::core::backoff::Backoff;
use crate::core::budget::{Budget, Deadline, Exhausted};
use crate::core::error::ErrorKind;
use crate::core::key::{DeliveryHeader, DeliveryId, IdempotencyKey};
use crate::core::matrix::Verdict;
use crate::core::retry_after::{MAX_RETRY_AFTER, parse_retry_after};
use crate::core::schedule::{Schedule, SharedSchedule, Waits};
use crate::vendors::Surface;
use crate::vendors::classify;

/// The final error of `surface`'s table on `answer`.
fn final_error(surface: Surface, answer: &Answer, now: SystemTime) -> crate::Error {
    crate::core::classify::final_error(surface.profile(), answer, now)
}

#[cfg(any(feature = "backon", feature = "backoff"))]
mod adapters;
mod budget;
mod classify;
mod keys;
mod retry_after;
mod schedules;

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
            "idempotency-replayed",
            "ratelimit",
            "ratelimit-policy"
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
        Verdict::RetryAfterServerWait,
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
        Verdict::RetryAfterServerWait,
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
        Verdict::RetryAfterServerWait,
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
            (Verdict::RetryAfterServerWait, Some(server)) => {
                prop_assert_eq!(reason, WaitReason::RetryAfter);
                prop_assert!(
                    wait >= server,
                    "{:?} undercuts Retry-After {:?}",
                    wait,
                    server
                );
                prop_assert!(wait - server <= retry_after_jitter_max(server));
            }
            (Verdict::RetryAfterServerWait, None) => {
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
        // A wait may be slept only when it leaves an attempt's least time of the budget.
        let least = Budget::new()
            .max_elapsed(spent.max_elapsed)
            .least_attempt_time();
        let ends_within = spent
            .elapsed
            .checked_add(wait)
            .is_some_and(|end| end < spent.max_elapsed && spent.max_elapsed - end >= least);
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
