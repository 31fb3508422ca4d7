//! Whole calls in virtual time: every time the engine reads (its deadline, the gate, the retry
//! budget, `Retry-After` dates) goes through tokio's clock, so under `tokio::time::pause()` a call
//! that waits minutes ends at once, through a transport of the test's own
//! ([`AttemptTransport`]). These are the only tests that do not talk to the contract server over
//! TCP: paused time cannot drive a real socket.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use hodoflow_retry::{
    Budget, DeliveryId, ErrorKind, HodoflowClient, IdempotencyKey,
    attempt::{AttemptResult, TransportKind, WaitReason},
    limit::RetryBudget,
    transport::{Answer, AttemptFuture, AttemptTransport, Outgoing},
    webhook::{Delivery, WebhookOutcome},
};
use http::{HeaderMap, HeaderValue, StatusCode};
use tokio::time::Instant;

/// What the scripted server answers, in order, and what each attempt carried.
#[derive(Debug, Default)]
struct Script {
    answers: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
    /// Until then, every request gets this answer, whatever the answers say.
    answers_until: Option<(Instant, Reply)>,
}

#[derive(Debug, Clone, Copy)]
enum Reply {
    Status(u16, Option<RetryAfter>),
    /// This status with these response headers, sent as they are (`RateLimit`,
    /// `RateLimit-Policy`, a `Retry-After` no parser would take).
    Headers(u16, &'static [(&'static str, &'static str)]),
    /// Never answers: the engine's attempt timeout must end it.
    Hang,
}

#[derive(Debug, Clone, Copy)]
enum RetryAfter {
    Seconds(u64),
    /// An HTTP date this far after the wall clock now.
    DateIn(u64),
}

#[derive(Debug, Clone, PartialEq)]
struct Seen {
    at: Instant,
    /// The method and the path, as `GET /api/json/v1/projects` (a trigger's token shown).
    route: String,
    /// The `Idempotency-Key`; empty when the request has none (a read).
    key: String,
    body: Bytes,
}

impl Script {
    fn new(answers: impl IntoIterator<Item = Reply>) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            answers: Mutex::new(answers.into_iter().collect()),
            seen: Mutex::default(),
            answers_until: None,
        })
    }

    /// A server that answers every request `reply` until `until`, then accepts.
    fn answering_until(until: Instant, reply: Reply) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            answers: Mutex::default(),
            seen: Mutex::default(),
            answers_until: Some((until, reply)),
        })
    }

    /// A server that sheds every request (`503, Retry-After: 1`) until `until`, then accepts.
    fn shedding_until(until: Instant) -> std::sync::Arc<Self> {
        Self::answering_until(until, Reply::Status(503, Some(RetryAfter::Seconds(1))))
    }
}

/// Where the scripted server stands.
const BASE: &str = "http://127.0.0.1:9";

/// The transport over a shared script.
#[derive(Debug)]
struct Scripted(std::sync::Arc<Script>);

impl AttemptTransport for Scripted {
    fn send<'a>(&'a self, attempt: Outgoing<'a>) -> AttemptFuture<'a> {
        let key = attempt
            .headers()
            .get("idempotency-key")
            .map(|key| key.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let read = attempt.method() == http::Method::GET;
        self.0.seen.lock().unwrap().push(Seen {
            at: Instant::now(),
            route: format!("{} {}", attempt.method(), &attempt.url()[BASE.len()..]),
            key,
            body: attempt.body().clone(),
        });
        let reply = match self.0.answers_until {
            Some((until, reply)) if Instant::now() < until => Some(reply),
            _ => self.0.answers.lock().unwrap().pop_front(),
        };
        Box::pin(async move {
            match reply {
                None if read => listed(),
                None => accepted(),
                Some(Reply::Hang) => std::future::pending().await,
                Some(Reply::Status(status, retry_after)) => {
                    let mut headers = HeaderMap::new();
                    let value = match retry_after {
                        None => None,
                        Some(RetryAfter::Seconds(seconds)) => Some(seconds.to_string()),
                        // The real wall clock: the engine reads dates against tokio's, which
                        // started from it.
                        Some(RetryAfter::DateIn(seconds)) => Some(httpdate::fmt_http_date(
                            SystemTime::now() + Duration::from_secs(seconds),
                        )),
                    };
                    if let Some(value) = value {
                        headers.insert("retry-after", HeaderValue::from_str(&value).unwrap());
                    }
                    Answer::response(StatusCode::from_u16(status).unwrap(), headers, refusal())
                }
                Some(Reply::Headers(status, fields)) => {
                    let mut headers = HeaderMap::new();
                    if status == 200 {
                        headers.insert(
                            "content-type",
                            HeaderValue::from_static("application/vnd.api+json"),
                        );
                    }
                    for (name, value) in fields {
                        headers.insert(*name, HeaderValue::from_static(value));
                    }
                    let body = match status {
                        200 => listed_body(),
                        202 => accepted_body(),
                        _ => refusal(),
                    };
                    Answer::response(StatusCode::from_u16(status).unwrap(), headers, body)
                }
            }
        })
    }
}

fn refusal() -> Bytes {
    Bytes::from_static(br#"{"error":"Processing temporarily unavailable"}"#)
}

fn accepted_body() -> Bytes {
    Bytes::from_static(br#"{"status":"accepted","workflow_run_id":"run-1"}"#)
}

fn accepted() -> Answer {
    Answer::response(StatusCode::ACCEPTED, HeaderMap::new(), accepted_body())
}

fn listed_body() -> Bytes {
    Bytes::from_static(br#"{"data":[]}"#)
}

/// A read's answer: an empty JSON:API collection.
fn listed() -> Answer {
    let mut headers = HeaderMap::new();
    headers.insert(
        "content-type",
        HeaderValue::from_static("application/vnd.api+json"),
    );
    Answer::response(StatusCode::OK, headers, listed_body())
}

/// A client of the scripted server, its jitter seeded.
fn scripted(script: &std::sync::Arc<Script>) -> hodoflow_retry::hodoflow::HodoflowBuilder {
    HodoflowClient::builder(BASE)
        .bearer_token("t0k3n")
        .transport(Scripted(script.clone()))
        .seed(7)
}

fn client(script: &std::sync::Arc<Script>, budget: Budget) -> HodoflowClient {
    scripted(script).budget(budget).build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn five_503s_and_a_retry_after_of_30_s_end_in_virtual_time() {
    let script = Script::new(
        [Reply::Status(503, None); 5]
            .into_iter()
            .chain([Reply::Status(503, Some(RetryAfter::Seconds(30)))]),
    );
    let budget = Budget::new()
        .max_attempts(7)
        .max_elapsed(Duration::from_secs(120));
    let id = DeliveryId::new(IdempotencyKey::from_operation_id("order-1:shipped"));
    let started = Instant::now();
    let delivery = client(&script, budget)
        .deliver("trigger-token", r#"{"order":1}"#)
        .delivery_id(id.clone())
        .send()
        .await
        .unwrap();
    let virtual_time = started.elapsed();

    assert!(matches!(
        delivery.outcome(),
        WebhookOutcome::Accepted { run_id: Some(run) } if run == "run-1"
    ));
    assert_eq!(delivery.attempts().len(), 7);
    let seen = script.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 7);
    assert!(
        seen.iter()
            .all(|s| s.key == id.key().as_str() && s.body == r#"{"order":1}"#),
        "one identity, the same bytes, on every attempt"
    );
    // Backoff between the five 503s, then never earlier than the server's 30 s.
    let gaps: Vec<_> = seen.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(
        gaps[..5].iter().all(|gap| *gap < Duration::from_secs(30)),
        "{gaps:?}"
    );
    assert!(gaps[5] >= Duration::from_secs(30), "{gaps:?}");
    assert_eq!(delivery.attempts()[5].wait_reason(), WaitReason::RetryAfter);
    assert!(virtual_time >= Duration::from_secs(30), "{virtual_time:?}");
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_http_date_is_waited_out_on_the_virtual_clock() {
    let script = Script::new([Reply::Status(503, Some(RetryAfter::DateIn(40)))]);
    let started = Instant::now();
    let delivery = client(&script, Budget::new())
        .deliver("trigger-token", "{}")
        .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id(
            "event-1",
        )))
        .send()
        .await
        .unwrap();
    let seen = script.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    // An HTTP date has whole seconds: at least 39 s, never much more than 40 s.
    assert!(gap >= Duration::from_secs(39), "{gap:?}");
    assert!(gap <= Duration::from_secs(42), "{gap:?}");
    assert!(started.elapsed() < Budget::DEFAULT_MAX_ELAPSED);
    assert_eq!(delivery.attempts().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_engine_times_out_a_transport_that_never_answers_and_retries_the_same_key() {
    let script = Script::new([Reply::Hang, Reply::Hang]);
    let budget = Budget::new().attempt_timeout(Duration::from_secs(2));
    let delivery = client(&script, budget)
        .deliver("trigger-token", "{}")
        .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id(
            "event-1",
        )))
        .send()
        .await
        .unwrap();
    let attempts = delivery.attempts();
    assert_eq!(attempts.len(), 3);
    assert_eq!(
        attempts[0].result(),
        AttemptResult::Transport(TransportKind::Timeout)
    );
    assert_eq!(
        attempts[1].result(),
        AttemptResult::Transport(TransportKind::Timeout)
    );
    let seen = script.seen.lock().unwrap().clone();
    assert!(seen.iter().all(|s| s.key == seen[0].key));
    assert!(seen[1].at - seen[0].at >= Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_past_the_budget_stops_at_once_with_it() {
    let script = Script::new([Reply::Status(503, Some(RetryAfter::Seconds(90)))]);
    let started = Instant::now();
    let error = client(&script, Budget::new())
        .deliver("trigger-token", "{}")
        .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id(
            "event-1",
        )))
        .send()
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::BudgetExhausted);
    assert_eq!(error.retry_after(), Some(Duration::from_secs(90)));
    assert!(!error.may_have_run());
    assert_eq!(started.elapsed(), Duration::ZERO, "nothing slept");
    assert_eq!(script.seen.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_seeded_client_waits_the_same_times_on_every_run() {
    let mut runs = Vec::new();
    for _ in 0..2 {
        let script = Script::new([Reply::Status(503, None); 4]);
        client(&script, Budget::new())
            .deliver("trigger-token", "{}")
            .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id(
                "event-1",
            )))
            .send()
            .await
            .unwrap();
        let seen = script.seen.lock().unwrap().clone();
        runs.push(
            seen.windows(2)
                .map(|w| w[1].at - w[0].at)
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(runs[0], runs[1]);
}

/// Every gap between two attempts the script saw.
fn gaps(script: &Script) -> Vec<Duration> {
    let seen = script.seen.lock().unwrap();
    seen.windows(2).map(|w| w[1].at - w[0].at).collect()
}

#[tokio::test(start_paused = true)]
async fn shedding_with_retry_after_is_ridden_out_by_a_budget_of_that_many_attempts() {
    // Eight shed answers (503 with `Retry-After: 1`), then the server takes the delivery: with
    // no paced allowance every shed answer spends an attempt, so nine attempts ride it out. (The waits still grow with
    // the backoff, the server's second being the least: eight take about 20 s.)
    let script = Script::new([Reply::Status(503, Some(RetryAfter::Seconds(1))); 8]);
    let id = DeliveryId::new(IdempotencyKey::from_operation_id("event-shed"));
    let started = Instant::now();
    let delivery = client(&script, Budget::new().max_attempts(9).paced_retries(0))
        .deliver("trigger-token", r#"{"event":1}"#)
        .delivery_id(id.clone())
        .send()
        .await
        .unwrap();

    assert!(matches!(
        delivery.outcome(),
        WebhookOutcome::Accepted { .. }
    ));
    assert_eq!(delivery.attempts().len(), 9);
    let seen = script.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 9);
    assert!(seen.iter().all(|s| s.key == id.key().as_str()));
    let gaps = gaps(&script);
    assert!(
        gaps.iter().all(|gap| *gap >= Duration::from_secs(1)),
        "never earlier than the server asked: {gaps:?}"
    );
    assert!(started.elapsed() < Budget::DEFAULT_MAX_ELAPSED);
}

#[tokio::test(start_paused = true)]
async fn paced_retries_draw_from_their_allowance_then_count_so_the_sum_is_a_hard_cap() {
    // Always `503` or `429` with `Retry-After: 1`: exactly max_attempts + paced_retries
    // requests, then the last answer's error; `paced_retries(0)`: exactly max_attempts.
    let budget = Budget::new().max_elapsed(Duration::from_secs(3600));
    for (status, attempts, paced) in [
        (503, 5, 0),
        (429, 5, 0),
        (503, 3, 0),
        (503, 3, 4),
        (429, 2, 10),
    ] {
        let script = Script::new([Reply::Status(status, Some(RetryAfter::Seconds(1))); 1_000]);
        let started = Instant::now();
        let budget = budget.max_attempts(attempts).paced_retries(paced);
        let error = client(&script, budget)
            .deliver("trigger-token", "{}")
            .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id(
                "event-1",
            )))
            .send()
            .await
            .unwrap_err();
        let sent = (attempts + paced) as usize;
        assert!(error.is_retryable(), "{error}");
        assert!(!error.may_have_run());
        assert_eq!(error.status().map(|s| s.as_u16()), Some(status));
        assert_eq!(error.attempts().len(), sent, "{status} {attempts} {paced}");
        assert_eq!(error.retry_after(), Some(Duration::from_secs(1)));
        assert_eq!(script.seen.lock().unwrap().len(), sent);
        assert!(started.elapsed() < Duration::from_secs(3600));
        assert!(
            gaps(&script)
                .iter()
                .all(|gap| *gap >= Duration::from_secs(1))
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_default_budget_rides_out_shedding_its_time_allows_in_every_shape() {
    // 20 s of `503, Retry-After: 1`, then 202: five attempts alone end within a few seconds
    // of it; the default allowance of paced retries carries every call through, in each shape,
    // none over max_attempts + paced_retries requests or its budget.
    let most = (Budget::DEFAULT_MAX_ATTEMPTS + Budget::DEFAULT_PACED_RETRIES) as usize;
    for shape in [Shape::Sequential, Shape::Pool(64), Shape::AllInFlight] {
        let script = Script::shedding_until(Instant::now() + Duration::from_secs(20));
        let client = client(&script, Budget::new());
        let ended = in_shape(shape, 200, |n| timed(&client, format!("shed-{n}"))).await;
        let mut longest = 0;
        for (sent, took) in ended {
            let delivery = sent.unwrap_or_else(|error| panic!("{shape:?}: {error}"));
            assert!(matches!(
                delivery.outcome(),
                WebhookOutcome::Accepted { .. }
            ));
            assert!(took <= Budget::DEFAULT_MAX_ELAPSED, "{shape:?}: {took:?}");
            longest = longest.max(delivery.attempts().len());
        }
        assert!(
            longest > Budget::DEFAULT_MAX_ATTEMPTS as usize && longest <= most,
            "{shape:?}: {longest} requests"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_that_leaves_less_than_an_attempt_sends_one_request() {
    // `503, Retry-After: 9` on a 9.5 s budget: the retry would start with 0.5 s left, less than
    // an attempt's least time (1 s), so none is sent and the answer had no ambiguity.
    let script = Script::new([Reply::Status(503, Some(RetryAfter::Seconds(9))); 10]);
    let budget = Budget::new().max_elapsed(Duration::from_millis(9500));
    let started = Instant::now();
    let error = client(&script, budget)
        .deliver("trigger-token", "{}")
        .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id(
            "event-1",
        )))
        .send()
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert_eq!(script.seen.lock().unwrap().len(), 1);
    assert!(!error.may_have_run());
    assert_eq!(error.retry_after(), Some(Duration::from_secs(9)));
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "refused at once, not slept"
    );
}

#[tokio::test(start_paused = true)]
async fn answers_without_retry_after_still_spend_the_attempts() {
    // 503 without `Retry-After`, and with one shorter than a second: the client's own schedule.
    // Without the retry budget, whose refused probes are free (the service found down after
    // four answers, the fifth attempt would probe until the script runs out).
    let script = Script::new(
        [Reply::Status(503, None); 3]
            .into_iter()
            .chain([Reply::Status(503, Some(RetryAfter::Seconds(0))); 9]),
    );
    let client = HodoflowClient::builder("http://127.0.0.1:9")
        .bearer_token("t0k3n")
        .retry_budget(RetryBudget::disabled())
        .transport(Scripted(script.clone()))
        .seed(7)
        .build()
        .unwrap();
    let error = client
        .deliver("trigger-token", "{}")
        .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id(
            "event-1",
        )))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        error.attempts().len(),
        Budget::DEFAULT_MAX_ATTEMPTS as usize
    );
    assert_eq!(script.seen.lock().unwrap().len(), 5);
}

#[tokio::test(start_paused = true)]
async fn one_attempt_is_one_request_even_when_the_server_paces_it() {
    let script = Script::new([Reply::Status(429, Some(RetryAfter::Seconds(1)))]);
    let error = client(&script, Budget::new().max_attempts(1))
        .deliver("trigger-token", "{}")
        .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id(
            "event-1",
        )))
        .send()
        .await
        .unwrap_err();
    assert_eq!(error.attempts().len(), 1);
    assert_eq!(error.retry_after(), Some(Duration::from_secs(1)));
    assert_eq!(script.seen.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_call_in_a_sustained_outage_probes_on_its_allowance_and_keeps_the_last_for_its_holds_end()
{
    // 503 without `Retry-After` for good: after four answers the service is down. The call's
    // held retries may go as the retry budget's probes, each drawn from the paced allowance,
    // so a heal would be seen at the probes' pace; its final attempt is not spent as a probe
    // while its hold lasts, and goes when its hold ends, with time left to be answered. Never
    // more than max_attempts + paced_retries requests, never a burst; with no allowance,
    // exactly max_attempts.
    for paced in [Budget::DEFAULT_PACED_RETRIES, 0] {
        let script = Script::new([Reply::Status(503, None); 1_000]);
        let budget = Budget::new()
            .max_elapsed(Duration::from_secs(20))
            .paced_retries(paced);
        let started = Instant::now();
        let error = client(&script, budget)
            .deliver("trigger-token", "{}")
            .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id(
                "event-1",
            )))
            .send()
            .await
            .unwrap_err();
        assert!(error.is_retryable(), "{error}");
        assert!(!error.may_have_run());
        assert!(started.elapsed() <= Duration::from_secs(20));
        let seen = script.seen.lock().unwrap().clone();
        let max = Budget::DEFAULT_MAX_ATTEMPTS as usize;
        if paced == 0 {
            assert_eq!(seen.len(), max);
        } else {
            assert!(
                seen.len() > max && seen.len() <= max + paced as usize,
                "{} requests",
                seen.len()
            );
        }
        assert_eq!(error.attempts().len(), seen.len());
        assert!(
            seen.windows(2)
                .all(|w| w[1].at - w[0].at >= Duration::from_millis(10)),
            "a burst"
        );
        // The last went after its hold: 20 s less one attempt's time (5 s) and half of it.
        let last = seen[seen.len() - 1].at - seen[0].at;
        assert!(last >= Duration::from_secs(12), "{last:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_whose_final_attempt_is_held_sees_a_blip_end_on_its_paced_allowance() {
    // 503 without `Retry-After` for 5 s, one call of 20 s: its attempts meet the blip and the
    // service is found down. Its final attempt is kept for after the outage, but probes on
    // the allowance of paced retries, once its hold has lasted its share (the hold over
    // eleven), at the probes' pace: the heal is seen within three quarters of the outage's
    // age, not at the hold's end. Without the allowance the final attempt waits out its hold.
    let blip = Duration::from_secs(5);
    let budget = Budget::new().max_elapsed(Duration::from_secs(20));
    for paced in [Budget::DEFAULT_PACED_RETRIES, 0] {
        let started = Instant::now();
        let script = Script::answering_until(started + blip, Reply::Status(503, None));
        let delivery = client(&script, budget.paced_retries(paced))
            .deliver("trigger-token", "{}")
            .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id(
                "event-1",
            )))
            .send()
            .await
            .unwrap_or_else(|error| panic!("paced {paced}: {error}"));
        assert!(matches!(
            delivery.outcome(),
            WebhookOutcome::Accepted { .. }
        ));
        let seen = script.seen.lock().unwrap().clone();
        let last = seen.last().unwrap().at - started;
        assert!(last >= blip, "{last:?}");
        if paced == 0 {
            assert_eq!(seen.len(), Budget::DEFAULT_MAX_ATTEMPTS as usize);
            assert!(
                last >= Duration::from_secs(12),
                "at its hold's end: {last:?}"
            );
        } else {
            assert!(seen.len() <= (Budget::DEFAULT_MAX_ATTEMPTS + paced) as usize);
            assert!(
                last <= blip + blip.mul_f64(RetryBudget::PROBE_AGE_SHARE),
                "at the probes' pace: {last:?}"
            );
        }
    }
}

/// The shapes a sender runs in: one call at a time, a pool of workers, every call at once.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Sequential,
    Pool(usize),
    AllInFlight,
}

/// Delivers an event under the delivery ID of `operation` in a task of its own: its result,
/// and how long the call took.
fn timed(
    client: &HodoflowClient,
    operation: String,
) -> tokio::task::JoinHandle<(hodoflow_retry::Result<Delivery>, Duration)> {
    let client = client.clone();
    tokio::spawn(async move {
        let started = Instant::now();
        let id = DeliveryId::new(IdempotencyKey::from_operation_id(&operation));
        let sent = client
            .deliver("trigger-token", "{}")
            .delivery_id(id)
            .send()
            .await;
        (sent, started.elapsed())
    })
}

/// Runs `count` calls of `call(n)` in `shape`; their results, by `n`.
async fn in_shape<T: Send + 'static, F>(shape: Shape, count: usize, call: F) -> Vec<T>
where
    F: Fn(usize) -> tokio::task::JoinHandle<T>,
{
    let mut ended = Vec::new();
    match shape {
        Shape::Sequential => {
            for n in 0..count {
                ended.push(call(n).await.unwrap());
            }
        }
        Shape::Pool(workers) => {
            for wave in (0..count).collect::<Vec<_>>().chunks(workers) {
                let calls: Vec<_> = wave.iter().map(|&n| call(n)).collect();
                for spawned in calls {
                    ended.push(spawned.await.unwrap());
                }
            }
        }
        Shape::AllInFlight => {
            let calls: Vec<_> = (0..count).map(&call).collect();
            for spawned in calls {
                ended.push(spawned.await.unwrap());
            }
        }
    }
    ended
}

#[tokio::test(start_paused = true)]
async fn a_paced_call_ends_within_its_budget_in_every_shape() {
    // A trigger paced at 3 per 60 s, calls of 5 s: a call waits for a slot within its own
    // budget, or ends with it, nothing sent. No call, in any shape, outlives its budget plus one
    // attempt's time, and no 60 s ever holds more than three sends.
    let budget = Budget::new()
        .max_elapsed(Duration::from_secs(5))
        .attempt_timeout(Duration::from_secs(1));
    for shape in [Shape::Sequential, Shape::Pool(64), Shape::AllInFlight] {
        let script = Script::new([]);
        let client = HodoflowClient::builder("http://127.0.0.1:9")
            .bearer_token("t0k3n")
            .budget(budget)
            .trigger_limit(
                hodoflow_retry::limit::RouteLimit::new(3, Duration::from_secs(60)).unwrap(),
            )
            .transport(Scripted(script.clone()))
            .seed(7)
            .build()
            .unwrap();
        let ended = in_shape(shape, 100, |n| timed(&client, format!("paced-{n}"))).await;
        let mut delivered = 0;
        for (sent, took) in ended {
            assert!(
                took <= Duration::from_secs(6),
                "{shape:?}: a call took {took:?}"
            );
            match sent.map(|delivery| delivery.attempts().len()) {
                Ok(attempts) => {
                    assert_eq!(attempts, 1);
                    delivered += 1;
                }
                Err(error) => {
                    assert_eq!(
                        error.kind(),
                        ErrorKind::BudgetExhausted,
                        "{shape:?}: {error}"
                    );
                    assert!(error.attempts().is_empty(), "{shape:?}: nothing sent");
                }
            }
        }
        let seen = script.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), delivered, "{shape:?}");
        assert!(delivered >= 3, "{shape:?}: the window's three at least");
        for (n, first) in seen.iter().enumerate() {
            let within = seen[n..]
                .iter()
                .take_while(|later| later.at - first.at < Duration::from_secs(60))
                .count();
            assert!(within <= 3, "{shape:?}: {within} sends in 60 s");
        }
        if !matches!(shape, Shape::Sequential) {
            assert_eq!(delivered, 3, "{shape:?}: all at once, the window's three");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_that_may_queue_waits_for_its_slot_then_has_its_whole_budget() {
    // Paced at 1 per 60 s: with `queue`, the second delivery waits for the next window and is
    // then sent, its 5 s budget counted from when it has its slot.
    let script = Script::new([]);
    let client = HodoflowClient::builder("http://127.0.0.1:9")
        .bearer_token("t0k3n")
        .budget(Budget::new().max_elapsed(Duration::from_secs(5)))
        .trigger_limit(hodoflow_retry::limit::RouteLimit::new(1, Duration::from_secs(60)).unwrap())
        .transport(Scripted(script.clone()))
        .build()
        .unwrap();
    let started = Instant::now();
    for n in 0..2 {
        let id = DeliveryId::new(IdempotencyKey::from_operation_id(&format!("queued-{n}")));
        client
            .deliver("trigger-token", "{}")
            .delivery_id(id)
            .queue(Duration::from_secs(120))
            .send()
            .await
            .unwrap_or_else(|e| panic!("delivery {n}: {e}"));
    }
    let seen = script.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(
        seen[1].at - started >= Duration::from_secs(60),
        "the next window"
    );
    // Without `queue`, the same wait is past the budget: refused, nothing sent.
    let id = DeliveryId::new(IdempotencyKey::from_operation_id("not-queued"));
    let refused = client
        .deliver("trigger-token", "{}")
        .delivery_id(id)
        .send()
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::BudgetExhausted);
    assert!(refused.attempts().is_empty());
}

// Holds the server asks for, and the pacing the client keeps, exact in virtual time: the TCP
// suites (`tests/fleet.rs`, `tests/pacing.rs`, `tests/rate_budget.rs`, `tests/auth.rs`,
// `tests/schedules.rs`) check who was held and what was sent, and these check for how long.

/// The JSON:API collection the reads go to.
const PROJECTS: &str = "/api/json/v1/projects";

/// Each request the script saw, as the time since the first.
fn times(script: &Script) -> Vec<Duration> {
    let seen = script.seen.lock().unwrap();
    seen.iter().map(|s| s.at - seen[0].at).collect()
}

/// Reads the collection once; the answer must be a success.
async fn read(client: &HodoflowClient) -> hodoflow_retry::Response {
    client.get(PROJECTS).send().await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_ratelimit_field_with_nothing_remaining_holds_the_next_read_until_its_reset() {
    // Released at the reset, plus the release spread of at most a fifth of the pause; never
    // sooner, and a longer reset holds longer.
    let second = Duration::from_secs(1);
    let cases: [(&'static [(&'static str, &'static str)], Duration); 2] = [
        (&[("ratelimit", r#""default";r=0;t=1"#)], second),
        (&[("ratelimit", r#""default";r=0;t=3"#)], 3 * second),
    ];
    for (fields, reset) in cases {
        let script = Script::new([Reply::Headers(200, fields)]);
        let client = client(&script, Budget::new());
        read(&client).await;
        read(&client).await;
        let gap = gaps(&script)[0];
        assert!(
            gap >= reset && gap <= reset + reset / 5,
            "{fields:?}: {gap:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_malformed_or_unexhausted_ratelimit_field_holds_nothing_back() {
    let cases: [&'static [(&'static str, &'static str)]; 2] = [
        &[("ratelimit", r#""default";r=0;t=soon"#)],
        &[("ratelimit", r#""default";r=7;t=1"#)],
    ];
    for fields in cases {
        let script = Script::new([Reply::Headers(200, fields)]);
        let client = client(&script, Budget::new());
        read(&client).await;
        read(&client).await;
        assert_eq!(gaps(&script), [Duration::ZERO], "{fields:?}");
        assert_eq!(client.stats().gate_wait, Duration::ZERO, "{fields:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn retry_after_wins_over_a_ratelimit_field_on_a_429() {
    // `Retry-After: 1` and `RateLimit: r=0;t=3` on one 429: the retry goes after the second
    // (plus its jitter and the release spread), and the credential reopens then, not at the
    // field's 3 s: a read started after the call goes at once.
    let script = Script::new([Reply::Headers(
        429,
        &[("retry-after", "1"), ("ratelimit", r#""default";r=0;t=3"#)],
    )]);
    let client = client(&script, Budget::new());
    let retried = read(&client).await;
    read(&client).await;
    assert_eq!(retried.attempts().len(), 2);
    assert_eq!(retried.attempts()[0].wait_reason(), WaitReason::RetryAfter);
    let gaps = gaps(&script);
    let second = Duration::from_secs(1);
    assert!(gaps[0] >= second && gaps[0] <= second * 13 / 10, "{gaps:?}");
    assert_eq!(
        gaps[1],
        Duration::ZERO,
        "not held to the 3 s reset: {gaps:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_json_api_429_holds_the_credential_s_reads_for_its_retry_after_and_no_delivery() {
    // The first read meets `429, Retry-After: 1`; over the next 600 ms ten reads and ten
    // deliveries start, one every 30 ms. The reads wait for the credential to reopen and are
    // released over a fifth of the pause after it; the deliveries (not in the credential's API
    // budget) go as they start.
    let script = Script::new([Reply::Status(429, Some(RetryAfter::Seconds(1)))]);
    let client = client(&script, Budget::new());
    let started = Instant::now();
    let limited = {
        let client = client.clone();
        tokio::spawn(async move { client.get(PROJECTS).send().await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut calls = Vec::new();
    for n in 0..20 {
        let client = client.clone();
        calls.push(tokio::spawn(async move {
            if n % 2 == 0 {
                client
                    .get(PROJECTS)
                    .send()
                    .await
                    .map(|r| r.attempts().len())
            } else {
                let id = DeliveryId::new(IdempotencyKey::from_operation_id(&format!("held-{n}")));
                let sent = client.deliver("trigger-token", "{}").delivery_id(id).send();
                sent.await.map(|d| d.attempts().len())
            }
        }));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert_eq!(limited.await.unwrap().unwrap().attempts().len(), 2);
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap(), 1, "sent once");
    }

    let seen = script.seen.lock().unwrap().clone();
    let since = |prefix: &str| -> Vec<Duration> {
        seen[1..]
            .iter()
            .filter(|s| s.route.starts_with(prefix))
            .map(|s| s.at - started)
            .collect()
    };
    let second = Duration::from_secs(1);
    let reads = since("GET ");
    assert_eq!(reads.len(), 11, "the retry and the ten reads");
    let (first, last) = (reads.iter().min().unwrap(), reads.iter().max().unwrap());
    assert!(*first >= second, "a read {first:?} after the 429");
    assert!(*last <= second + second / 5 + second / 10, "{reads:?}");
    let spread: std::collections::BTreeSet<_> = reads.iter().collect();
    assert!(
        spread.len() > 5,
        "released over a spread, not at once: {reads:?}"
    );
    let deliveries = since("POST ");
    assert_eq!(deliveries.len(), 10);
    for (n, at) in deliveries.iter().enumerate() {
        let start = Duration::from_millis(20 + 30 * (2 * n as u64 + 1));
        assert_eq!(
            *at, start,
            "delivery {n} went as it started: {deliveries:?}"
        );
    }
    // Every read that started while the credential was closed waited from its start to its
    // release: the client's gate_wait is that sum (and the retry's own hold).
    let held: Duration = (0..10)
        .map(|n| {
            let start = Duration::from_millis(20 + 60 * n);
            reads
                .iter()
                .copied()
                .filter(|at| *at > start)
                .min()
                .unwrap()
                - start
        })
        .sum();
    let gate_wait = client.stats().gate_wait;
    assert!(
        gate_wait >= held && held >= Duration::from_secs(5),
        "{gate_wait:?} {held:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_rate_budget_spaces_attempts_so_no_span_of_it_holds_more() {
    // 5 per 1.2 s, eight reads one after another: five at once, the other three when the first
    // five leave the span, 1.2 s later.
    let script = Script::new([]);
    let client = HodoflowClient::builder("http://127.0.0.1:9")
        .bearer_token("t0k3n")
        .rate_budget(
            hodoflow_retry::limit::RateBudget::new(5, Duration::from_millis(1200)).unwrap(),
        )
        .transport(Scripted(script.clone()))
        .seed(7)
        .build()
        .unwrap();
    for _ in 0..8 {
        assert_eq!(read(&client).await.attempts().len(), 1);
    }
    let span = Duration::from_millis(1200);
    assert_eq!(
        times(&script),
        [[Duration::ZERO; 5].as_slice(), &[span; 3]].concat()
    );
}

#[tokio::test(start_paused = true)]
async fn a_429_without_a_usable_retry_after_waits_the_fallback() {
    let cases: [&'static [(&'static str, &'static str)]; 4] = [
        &[],
        &[("retry-after", "soon")],
        &[("retry-after", "-1")],
        &[("retry-after", "1.5")],
    ];
    for fields in cases {
        let script = Script::new([Reply::Headers(429, fields)]);
        let delivery = client(&script, Budget::new())
            .deliver("trigger-token", "{}")
            .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id("429")))
            .send()
            .await
            .unwrap();
        let first = &delivery.attempts()[0];
        assert_eq!(
            first.wait_reason(),
            WaitReason::RetryAfterFallback,
            "{fields:?}"
        );
        let fallback = hodoflow_retry::Backoff::DEFAULT_RETRY_AFTER_FALLBACK;
        let gap = gaps(&script)[0];
        assert!(gap >= first.wait(), "{fields:?}: {gap:?} < {first}");
        assert!(
            gap >= fallback && gap <= fallback + fallback / 10,
            "{fields:?}: {gap:?}"
        );
    }
}

/// Exchanges a token after `busy` answers of `429, Retry-After: 1` from the token endpoint, and
/// notes when each exchange started.
#[derive(Debug, Default)]
struct BusyTokenEndpoint {
    busy: std::sync::atomic::AtomicU32,
    started: Mutex<Vec<Instant>>,
}

impl hodoflow_retry::auth::TokenExchanger for BusyTokenEndpoint {
    fn exchange(&self) -> hodoflow_retry::auth::ExchangeFuture<'_> {
        self.started.lock().unwrap().push(Instant::now());
        let busy = self
            .busy
            .fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |n| n.checked_sub(1),
            )
            .is_ok();
        Box::pin(async move {
            if busy {
                Err(hodoflow_retry::Error::token_exchange("slow_down")
                    .with_status(StatusCode::TOO_MANY_REQUESTS)
                    .with_retry_after(Some(Duration::from_secs(1))))
            } else {
                Ok(hodoflow_retry::auth::AccessToken::expiring_in(
                    "t0k3n",
                    Duration::from_secs(600),
                ))
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_token_endpoint_retry_after_holds_every_exchange_until_it_ends() {
    // The first exchange is refused with `Retry-After: 1`: no exchange starts before that
    // second has passed (the shared backoff alone would allow one after 125 to 250 ms), and
    // both calls, the second started 100 ms in, send their reads with the token it brings.
    let endpoint = std::sync::Arc::new(BusyTokenEndpoint::default());
    endpoint.busy.store(1, std::sync::atomic::Ordering::SeqCst);
    let script = Script::new([]);
    let client = HodoflowClient::builder("http://127.0.0.1:9")
        .exchanger(endpoint.clone())
        .transport(Scripted(script.clone()))
        .seed(7)
        .build()
        .unwrap();
    let started = Instant::now();
    let (first, second) = tokio::join!(read(&client), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        read(&client).await
    });
    assert_eq!((first.attempts().len(), second.attempts().len()), (1, 1));
    let exchanges: Vec<_> = endpoint
        .started
        .lock()
        .unwrap()
        .iter()
        .map(|at| *at - started)
        .collect();
    let second = Duration::from_secs(1);
    assert_eq!(exchanges, [Duration::ZERO, second]);
    assert_eq!(times(&script), [Duration::ZERO; 2]);
    assert_eq!(script.seen.lock().unwrap()[0].at - started, second);
}

/// A schedule that waits the durations of a list, then stops.
#[derive(Debug, Clone)]
struct Listed(Vec<Duration>);

impl hodoflow_retry::schedule::Schedule for Listed {
    fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send> {
        Box::new(self.0.clone().into_iter())
    }
}

#[tokio::test(start_paused = true)]
async fn a_custom_schedule_spaces_the_attempts_and_retry_after_is_a_floor_under_it() {
    let ms = Duration::from_millis(1);
    let no_backoff = hodoflow_retry::Backoff::new().base(Duration::ZERO);
    let scheduled = |script: &std::sync::Arc<Script>, schedule: Listed| {
        HodoflowClient::builder("http://127.0.0.1:9")
            .bearer_token("t0k3n")
            .backoff(no_backoff)
            .schedule(schedule)
            .transport(Scripted(script.clone()))
            .seed(7)
            .build()
            .unwrap()
    };
    // Three 503s 30 ms apart, as the schedule says, and no more.
    let script = Script::new([Reply::Status(503, None); 3]);
    let read_ = read(&scheduled(&script, Listed(vec![30 * ms; 10]))).await;
    assert_eq!(read_.attempts().len(), 4);
    assert_eq!(gaps(&script), [30 * ms; 3]);
    // A schedule that says zero waits the server's `Retry-After` (plus its jitter) on a 429 and
    // on a 500 alike.
    for status in [429, 500] {
        let script = Script::new([Reply::Status(status, Some(RetryAfter::Seconds(1)))]);
        let read_ = read(&scheduled(&script, Listed(vec![Duration::ZERO; 4]))).await;
        assert_eq!(read_.attempts()[0].wait_reason(), WaitReason::RetryAfter);
        let gap = gaps(&script)[0];
        let second = Duration::from_secs(1);
        assert!(
            gap >= second && gap <= second * 11 / 10 + ms,
            "{status}: {gap:?}"
        );
    }
    // A schedule that says forever is refused at once, not slept.
    let script = Script::new([Reply::Status(503, None); 10]);
    let started = Instant::now();
    let client = scheduled(&script, Listed(vec![Duration::MAX]));
    let error = client.get(PROJECTS).send().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(script.seen.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_elapsed_budget_spent_on_timeouts_stops_at_its_end() {
    // Every attempt hangs: each ends at its 100 ms timeout, and the call at its 300 ms budget,
    // having sent what fits.
    let script = Script::new([Reply::Hang; 100]);
    let budget = Budget::new()
        .max_attempts(10)
        .max_elapsed(Duration::from_millis(300))
        .attempt_timeout(Duration::from_millis(100));
    let started = Instant::now();
    let error = client(&script, budget)
        .get(PROJECTS)
        .send()
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert!(error.may_have_run());
    assert!(error.attempts().len() >= 2, "{error:?}");
    for attempt in error.attempts() {
        let timed_out = AttemptResult::Transport(TransportKind::Timeout);
        assert_eq!(attempt.result(), timed_out, "{attempt}");
    }
    assert_eq!(error.attempts().len(), script.seen.lock().unwrap().len());
    let timeout = Duration::from_millis(100);
    assert!(
        gaps(&script).iter().all(|gap| *gap >= timeout),
        "{:?}",
        gaps(&script)
    );
    assert!(took >= 2 * timeout && took <= 3 * timeout, "{took:?}");
}

/// Delivers an event to `trigger` at once; its result.
async fn deliver_to(
    client: &HodoflowClient,
    trigger: &str,
    event: &str,
) -> hodoflow_retry::Result<Delivery> {
    let id = DeliveryId::new(IdempotencyKey::from_operation_id(event));
    client.deliver(trigger, "{}").delivery_id(id).send().await
}

/// When each request to a route starting with `route` was seen, since `started`.
fn seen_at(script: &Script, route: &str, started: Instant) -> Vec<Duration> {
    let seen = script.seen.lock().unwrap();
    seen.iter()
        .filter(|s| s.route.starts_with(route))
        .map(|s| s.at - started)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_spent_trigger_window_holds_that_trigger_until_its_reset_and_nothing_else() {
    // A delivery's answer says the trigger's window is spent (`RateLimit: "trigger";r=0;t=2`):
    // the next delivery to it goes at the reset, not before; another trigger and the API go at
    // once.
    let script = Script::new([Reply::Headers(
        202,
        &[
            ("ratelimit-policy", r#""trigger";q=3;w=2"#),
            ("ratelimit", r#""trigger";r=0;t=2"#),
        ],
    )]);
    let client = scripted(&script).pace_triggers().build().unwrap();
    let started = Instant::now();
    deliver_to(&client, "spent", "spent-1").await.unwrap();
    let (again, other, api) = tokio::join!(
        deliver_to(&client, "spent", "spent-2"),
        deliver_to(&client, "other", "other-1"),
        read(&client)
    );
    assert_eq!(again.unwrap().attempts().len(), 1);
    assert_eq!(other.unwrap().attempts().len(), 1);
    assert_eq!(api.attempts().len(), 1);
    let reset = Duration::from_secs(2);
    let spent = seen_at(&script, "POST /api/v1/webhooks/spent", started);
    assert_eq!(spent[0], Duration::ZERO);
    assert!(
        spent[1] >= reset && spent[1] <= reset + reset / 5,
        "{spent:?}"
    );
    assert_eq!(
        seen_at(&script, "POST /api/v1/webhooks/other", started),
        [Duration::ZERO]
    );
    assert_eq!(seen_at(&script, "GET ", started), [Duration::ZERO]);
}

#[tokio::test(start_paused = true)]
async fn a_delivery_s_429_with_retry_after_closes_its_trigger_for_that_long() {
    // `429, Retry-After: 3` on a delivery: it is sent again no sooner than 3 s later, and a
    // delivery to the same trigger started meanwhile waits as long; another trigger does not.
    let script = Script::new([Reply::Status(429, Some(RetryAfter::Seconds(3)))]);
    let client = client(&script, Budget::new());
    let started = Instant::now();
    let (refused, held, other) = tokio::join!(
        deliver_to(&client, "paused", "paused-1"),
        async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            deliver_to(&client, "paused", "paused-2").await
        },
        async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            deliver_to(&client, "other", "other-1").await
        }
    );
    let refused = refused.unwrap();
    assert_eq!(refused.attempts().len(), 2);
    assert_eq!(refused.attempts()[0].wait_reason(), WaitReason::RetryAfter);
    assert_eq!(held.unwrap().attempts().len(), 1);
    assert_eq!(other.unwrap().attempts().len(), 1);
    let pause = Duration::from_secs(3);
    let paused = seen_at(&script, "POST /api/v1/webhooks/paused", started);
    assert_eq!(paused.len(), 3);
    assert_eq!(paused[0], Duration::ZERO);
    assert!(
        paused[1..]
            .iter()
            .all(|at| *at >= pause && *at <= pause + pause / 5 + pause / 10),
        "{paused:?}"
    );
    let other = seen_at(&script, "POST /api/v1/webhooks/other", started);
    assert_eq!(other, [Duration::from_millis(100)]);
}

/// Delivers `count` events named `{prefix}-{n}` to `trigger` at once; each call's result.
async fn burst(client: &HodoflowClient, prefix: &str, count: usize) -> Vec<Delivery> {
    let calls: Vec<_> = (0..count)
        .map(|n| {
            let client = client.clone();
            let event = format!("{prefix}-{n}");
            tokio::spawn(async move { deliver_to(&client, "trigger-token", &event).await })
        })
        .collect();
    let mut done = Vec::new();
    for call in calls {
        done.push(call.await.unwrap().unwrap());
    }
    done
}

#[tokio::test(start_paused = true)]
async fn a_quota_learned_from_ratelimit_policy_paces_a_burst_window_by_window() {
    // Every answer states 4 per second: after the first, a burst of 11 goes 3 at once (4 with
    // the first), then 4 a second later, then 4 a second after that.
    let policy: &'static [(&'static str, &'static str)] =
        &[("ratelimit-policy", r#""trigger";q=4;w=1"#)];
    let script = Script::new([Reply::Headers(202, policy); 12]);
    let client = scripted(&script).pace_triggers().build().unwrap();
    deliver_to(&client, "trigger-token", "first").await.unwrap();
    let sent = burst(&client, "shrunk", 11).await;
    assert!(sent.iter().all(|delivery| delivery.attempts().len() == 1));
    let second = Duration::from_secs(1);
    let windows = [Duration::ZERO, second, 2 * second]
        .map(|at| [at; 4])
        .concat();
    assert_eq!(times(&script), windows);
}

#[tokio::test(start_paused = true)]
async fn the_caller_s_limit_wins_over_the_quota_the_server_states() {
    // The server states 1,000 a minute; the caller's 5 per 800 ms paces the burst: five at
    // once (the first among them), five 800 ms later.
    let policy: &'static [(&'static str, &'static str)] =
        &[("ratelimit-policy", r#""trigger";q=1000;w=60"#)];
    let script = Script::new([Reply::Headers(202, policy); 10]);
    let window = Duration::from_millis(800);
    let client = scripted(&script)
        .trigger_limit(hodoflow_retry::limit::RouteLimit::new(5, window).unwrap())
        .pace_triggers()
        .build()
        .unwrap();
    deliver_to(&client, "trigger-token", "first").await.unwrap();
    burst(&client, "caller", 9).await;
    let windows = [[Duration::ZERO; 5], [window; 5]].concat();
    assert_eq!(times(&script), windows);
}
