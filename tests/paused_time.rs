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
    Answer, AttemptFuture, AttemptResult, AttemptTransport, Budget, Delivery, DeliveryId,
    ErrorKind, IdempotencyKey, Outgoing, RetryBudget, RetryingClient, TransportKind, WaitReason,
    WebhookOutcome,
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

/// The transport over a shared script.
#[derive(Debug)]
struct Scripted(std::sync::Arc<Script>);

impl AttemptTransport for Scripted {
    fn send<'a>(&'a self, attempt: Outgoing<'a>) -> AttemptFuture<'a> {
        let key = attempt.headers()["idempotency-key"]
            .to_str()
            .unwrap()
            .to_owned();
        self.0.seen.lock().unwrap().push(Seen {
            at: Instant::now(),
            key,
            body: attempt.body().clone(),
        });
        let reply = match self.0.answers_until {
            Some((until, reply)) if Instant::now() < until => Some(reply),
            _ => self.0.answers.lock().unwrap().pop_front(),
        };
        Box::pin(async move {
            match reply {
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
                    let body =
                        Bytes::from_static(br#"{"error":"Processing temporarily unavailable"}"#);
                    Answer::response(StatusCode::from_u16(status).unwrap(), headers, body)
                }
            }
        })
    }
}

fn accepted() -> Answer {
    let body = Bytes::from_static(br#"{"status":"accepted","workflow_run_id":"run-1"}"#);
    Answer::response(StatusCode::ACCEPTED, HeaderMap::new(), body)
}

fn client(script: &std::sync::Arc<Script>, budget: Budget) -> RetryingClient {
    RetryingClient::builder("http://127.0.0.1:9")
        .bearer_token("t0k3n")
        .budget(budget)
        .transport(Scripted(script.clone()))
        .seed(7)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn five_503s_and_a_retry_after_of_30_s_end_in_virtual_time() {
    let wall = std::time::Instant::now();
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
    assert!(
        wall.elapsed() < Duration::from_secs(1),
        "paused time: {:?} of wall time",
        wall.elapsed()
    );
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
    let client = RetryingClient::builder("http://127.0.0.1:9")
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
    // the allowance of paced retries, each once its hold has lasted its share (the hold over
    // eleven): the heal is seen within a share, not at the hold's end. Without the allowance
    // the final attempt waits out its hold.
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
                last < blip + Duration::from_secs(2),
                "within a share: {last:?}"
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
    client: &RetryingClient,
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
        let client = RetryingClient::builder("http://127.0.0.1:9")
            .bearer_token("t0k3n")
            .budget(budget)
            .trigger_limit(hodoflow_retry::TriggerLimit::new(3, Duration::from_secs(60)).unwrap())
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
    let client = RetryingClient::builder("http://127.0.0.1:9")
        .bearer_token("t0k3n")
        .budget(Budget::new().max_elapsed(Duration::from_secs(5)))
        .trigger_limit(hodoflow_retry::TriggerLimit::new(1, Duration::from_secs(60)).unwrap())
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
