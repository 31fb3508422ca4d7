//! `modulify`: Modulify's own documented retry loop against the SDK's `ModulifyClient`, on the
//! same faults.
//!
//! Modulify's "Idempotency and retries" prints a JavaScript `Call` loop as the way to retry
//! Modulify calls; a Modulify user starts from it. [`JsCall`](crate::modulify_peer::JsCall) transcribes it line by line
//! (see `modulify_peer.rs`); the SDK runs with its defaults. Each client calls `send_message`
//! on a fresh contract server per share, the same events and faults for both:
//!
//! - `lost_answers`: the server runs the call, then closes the connection instead of
//!   answering, for 20% of requests (seeded, retries included). One call per event, no key
//!   given (the loop's `randomUUID()`, the SDK's random key).
//! - `in_progress`: every execution is held 2.5 s (`slow_execution`); each event is two calls
//!   with the same caller-given key, the second 200 ms after the first: it meets 409
//!   `idempotency_key_in_progress` with `Retry-After`.
//! - `rate_limited`: a burst against a small per-minute budget (`Limits::modulify_rate_limit`
//!   10 calls a 60 s window, twice as many events at once): 429 with `Retry-After` up to 60 s.
//!   The SDK also runs with a 150 s time budget, since its default 60 s cannot hold a 60 s wait.
//! - `server_errors`: 500 `internal_error`, the key released, nothing run (`fail_execution`),
//!   for 30% of requests (seeded, retries included).
//! - `retry_after_date`: each event's first attempt is answered 429 with `Retry-After` as an
//!   HTTP-date 3 s ahead, which RFC 9110 and the contract allow. JavaScript's `Number` reads it
//!   as `NaN` and `setTimeout(NaN)` fires at once.
//!
//! From the server's ledger: events lost (an event whose key never executed), duplicate
//! executions (executions of a key beyond its first), and early retries: a request that
//! follows a 409 or 429 with the same key and arrives (server clock) before the `Retry-After`
//! that answer asked for. The ledger records no headers, so the asked `Retry-After` is worked
//! out from the server's rules (`rounded up, at least 1 s` of what is left of the held
//! execution, or of the fixed rate window, replayed over the ledger's arrivals; the date the
//! fault was given), and checked against the values the loop saw (`retry_after_mismatches`:
//! answers whose observed `Retry-After` differs from the one worked out). Beside them, what the
//! callers saw: a result, a replay, a 4xx body returned as if it were a result (the loop
//! returns `response.json()` for any status it does not retry), or an error.
//!
//! The loop's waits are real seconds, as written: the rate share takes about a minute.
//!
//! Targets: the SDK executes no key twice and sends no retry early, and loses no event of the
//! `in_progress` share.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use hodoflow_mock::{DEMO_MODULIFY_TOKEN, Fault, Limits, MockServer, RequestRecord};
use hodoflow_retry::{Budget, IdempotencyKey, ModulifyClient};
use serde_json::{Value, json};

use crate::figures::round;
use crate::modulify_peer::JsCall;
use crate::report::Report;
use crate::size::Size;
use crate::{Result, drive, server};

const METHOD: &str = "send_message";
const PATH: &str = "/v1/send_message";
const LOSS: f64 = 0.2;
const LOSS_SEED: u64 = 0x004;
const FAILURE: f64 = 0.3;
const FAILURE_SEED: u64 = 0x500;
/// The second call of an `in_progress` event starts this long after the first.
const SECOND_CALL_AFTER: Duration = Duration::from_millis(200);

/// One fault setting.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Share {
    LostAnswers,
    InProgress { hold: Duration },
    RateLimited { limit: u32, window: Duration },
    ServerErrors,
    RetryAfterDate { ahead: Duration },
}

impl Share {
    fn name(self) -> &'static str {
        match self {
            Share::LostAnswers => "lost_answers",
            Share::InProgress { .. } => "in_progress",
            Share::RateLimited { .. } => "rate_limited",
            Share::ServerErrors => "server_errors",
            Share::RetryAfterDate { .. } => "retry_after_date",
        }
    }

    fn describe(self, events: u64) -> String {
        match self {
            Share::LostAnswers => format!(
                "{events} events, one call each without a key; execute_then_close with probability {LOSS}, seed {LOSS_SEED:#x}, on every request"
            ),
            Share::InProgress { hold } => format!(
                "{events} events, each two calls with the same caller-given key, the second {} ms after the first; slow_execution({} ms) on every execution",
                SECOND_CALL_AFTER.as_millis(),
                hold.as_millis()
            ),
            Share::RateLimited { limit, window } => format!(
                "{events} events at once, one call each without a key; Limits::modulify_rate_limit {limit} calls a {} s window",
                window.as_secs()
            ),
            Share::ServerErrors => format!(
                "{events} events, one call each without a key; fail_execution(500) with probability {FAILURE}, seed {FAILURE_SEED:#x}, on every request"
            ),
            Share::RetryAfterDate { ahead } => format!(
                "{events} events, one call each without a key; the first {events} requests answered 429 with Retry-After an HTTP-date about {} s ahead",
                ahead.as_secs()
            ),
        }
    }
}

/// The client under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    /// The `Call` loop of Modulify's "Idempotency and retries".
    Peer,
    /// `ModulifyClient` with its defaults, or this time budget.
    Sdk { max_elapsed: Option<Duration> },
}

impl Client {
    fn label(self) -> String {
        match self {
            Client::Peer => "documented_call_loop".to_owned(),
            Client::Sdk { max_elapsed: None } => "sdk".to_owned(),
            Client::Sdk {
                max_elapsed: Some(budget),
            } => format!("sdk_max_elapsed_{}s", budget.as_secs()),
        }
    }
}

/// A fresh server for `share`, its fault armed. For `retry_after_date`, also the date sent.
async fn server_for(share: Share, events: u64) -> Result<(MockServer, Option<SystemTime>)> {
    let mut limits = Limits {
        modulify_rate_limit: u32::MAX,
        ..server::bench_limits()
    };
    if let Share::RateLimited { limit, window } = share {
        limits.modulify_rate_limit = limit;
        limits.modulify_rate_window = window;
    }
    let server = MockServer::builder().limits(limits).start().await?;
    let mut date = None;
    let fault = match share {
        Share::LostAnswers => Some(Fault::execute_then_close().probability(LOSS, LOSS_SEED)),
        Share::InProgress { hold } => Some(Fault::slow_execution(hold).times(u32::MAX)),
        Share::RateLimited { .. } => None,
        Share::ServerErrors => Some(Fault::fail_execution(500).probability(FAILURE, FAILURE_SEED)),
        Share::RetryAfterDate { ahead } => {
            // Whole seconds, as an HTTP-date has them, rounded up.
            let at = httpdate::HttpDate::from(SystemTime::now() + ahead + Duration::from_secs(1));
            date = Some(SystemTime::from(at));
            Some(
                Fault::respond(429)
                    .header("Retry-After", &at.to_string())
                    .body(r#"{"data":null,"error":{"code":"rate_limited","message":"the token's per-minute budget is spent"}}"#)
                    .times(u32::try_from(events).unwrap_or(u32::MAX)),
            )
        }
    };
    if let Some(fault) = fault {
        server.inject(fault.on("POST", PATH));
    }
    Ok((server, date))
}

/// The body of event `n`.
fn body(n: u64) -> Value {
    json!({"projectId": "site_1", "prompt": format!("Add sign-up form {n} to the footer.")})
}

/// How one call ended, as its caller saw it.
fn peer_outcome(result: &std::result::Result<Value, crate::modulify_peer::Thrown>) -> String {
    match result {
        Ok(value) if value.get("data").is_some_and(|d| !d.is_null()) => "result".to_owned(),
        Ok(value) if value.get("error").is_some() => "returned_error_body".to_owned(),
        Ok(_) => "returned_other".to_owned(),
        Err(thrown) => format!("threw_{}", thrown.as_str()),
    }
}

/// Runs `share` with `client` on a fresh server and measures it.
async fn measure(share: Share, client: Client, events: u64) -> Result<Value> {
    let (server, date) = server_for(share, events).await?;
    let base = server.base_url();
    let started = Instant::now();
    let mut observed = HashMap::new();
    let outcomes: Vec<Vec<String>> = match client {
        Client::Peer => {
            let peer = JsCall::new(&base, DEMO_MODULIFY_TOKEN)?;
            let calls = peer.clone();
            let outcomes = drive::each(events, events as usize, move |n| {
                let peer = calls.clone();
                async move {
                    let body = body(n);
                    if let Share::InProgress { .. } = share {
                        let key = format!("in-progress-{n}");
                        let first = peer.call(METHOD, &body, Some(key.clone()));
                        let second = async {
                            tokio::time::sleep(SECOND_CALL_AFTER).await;
                            peer.call(METHOD, &body, Some(key.clone())).await
                        };
                        let (a, b) = tokio::join!(first, second);
                        vec![peer_outcome(&a), peer_outcome(&b)]
                    } else {
                        vec![peer_outcome(&peer.call(METHOD, &body, None).await)]
                    }
                }
            })
            .await;
            observed = peer.observed_retry_after();
            outcomes
        }
        Client::Sdk { max_elapsed } => {
            let mut budget = Budget::new();
            if let Some(max_elapsed) = max_elapsed {
                budget = budget.max_elapsed(max_elapsed);
            }
            let sdk = ModulifyClient::builder(base.as_str())
                .bearer_token(DEMO_MODULIFY_TOKEN)
                .budget(budget)
                .build()?;
            drive::each(events, events as usize, move |n| {
                let sdk = sdk.clone();
                async move {
                    let body = Bytes::from(body(n).to_string());
                    let outcome = |sent: hodoflow_retry::Result<
                        hodoflow_retry::modulify::MethodAnswer,
                    >| match sent {
                        Ok(answer) => answer.outcome().as_str().to_owned(),
                        Err(error) => format!("error_{}", error.kind().as_str()),
                    };
                    if let Share::InProgress { .. } = share {
                        let key =
                            IdempotencyKey::new(format!("in-progress-{n}")).expect("a valid key");
                        let first = sdk.call(METHOD, body.clone()).key(key.clone()).send();
                        let second = async {
                            tokio::time::sleep(SECOND_CALL_AFTER).await;
                            sdk.call(METHOD, body.clone()).key(key.clone()).send().await
                        };
                        let (a, b) = tokio::join!(first, second);
                        vec![outcome(a), outcome(b)]
                    } else {
                        vec![outcome(sdk.call(METHOD, body).send().await)]
                    }
                }
            })
            .await
        }
    };
    let elapsed = started.elapsed();
    let mut seen = BTreeMap::<String, u64>::new();
    for outcome in outcomes.into_iter().flatten() {
        *seen.entry(outcome).or_default() += 1;
    }
    let mut figures = ledger_figures(&server, share, events, date, &observed);
    let unconfirmed: u64 = seen
        .iter()
        .filter(|(outcome, _)| {
            !matches!(
                outcome.as_str(),
                "result" | "ok" | "replayed" | "replayed_without_answer"
            )
        })
        .map(|(_, n)| n)
        .sum();
    figures["calls_unconfirmed"] = json!(unconfirmed);
    figures["calls_by_outcome"] = json!(seen);
    figures["elapsed_s"] = json!(round(elapsed.as_secs_f64(), 1));
    Ok(figures)
}

/// What the ledger says: events lost, duplicate executions, early retries.
fn ledger_figures(
    server: &MockServer,
    share: Share,
    events: u64,
    date: Option<SystemTime>,
    observed: &HashMap<String, String>,
) -> Value {
    let ledger = server.ledger();
    let mut requests: Vec<&RequestRecord> = ledger.requests_to("POST", PATH);
    requests.sort_by_key(|r| r.seq);
    let keys: BTreeSet<&str> = requests
        .iter()
        .filter_map(|r| r.idempotency_key.as_deref())
        .collect();
    let executions: Vec<u32> = keys
        .iter()
        .map(|key| ledger.modulify_executions(key))
        .collect();
    let executed = executions.iter().filter(|n| **n > 0).count() as u64;
    let duplicates: u64 = executions
        .iter()
        .map(|n| u64::from(n.saturating_sub(1)))
        .sum();
    let asked = asked_retry_after(&requests, share, date);

    let mut by_key: HashMap<&str, Vec<&RequestRecord>> = HashMap::new();
    for request in &requests {
        if let Some(key) = request.idempotency_key.as_deref() {
            by_key.entry(key).or_default().push(request);
        }
    }
    let (mut retries_after_refusal, mut early, mut earliest) = (0u64, 0u64, None::<f64>);
    for attempts in by_key.values() {
        for pair in attempts.windows(2) {
            let (refusal, retry) = (pair[0], pair[1]);
            if !matches!(refusal.status, Some(409 | 429)) {
                continue;
            }
            retries_after_refusal += 1;
            let Some(wait) = asked.get(&refusal.request_id) else {
                continue;
            };
            let gap = retry.at.duration_since(refusal.at).unwrap_or_default();
            if gap < *wait {
                early += 1;
                let short = (wait.as_secs_f64() - gap.as_secs_f64()) * 1000.0;
                earliest = Some(earliest.map_or(short, |e: f64| e.max(short)));
            }
        }
    }
    // The worked-out Retry-After against what the loop saw, where it saw delay-seconds.
    let mut mismatches = 0u64;
    let mut values_seen = BTreeSet::new();
    for request in &requests {
        let Some(text) = observed.get(&request.request_id) else {
            continue;
        };
        values_seen.insert(text.clone());
        if let (Ok(seconds), Some(worked_out)) =
            (text.trim().parse::<u64>(), asked.get(&request.request_id))
            && Duration::from_secs(seconds) != *worked_out
        {
            mismatches += 1;
        }
    }
    let refusals = |status| requests.iter().filter(|r| r.status == Some(status)).count();
    json!({
        "events": events,
        "requests": requests.len(),
        "answers_lost": requests.iter().filter(|r| r.fault.as_deref() == Some("execute_then_close")).count(),
        "answered_409": refusals(409),
        "answered_429": refusals(429),
        "answered_500": refusals(500),
        "events_executed": executed,
        "events_lost": events.saturating_sub(executed),
        "duplicate_executions": duplicates,
        "retries_after_409_or_429": retries_after_refusal,
        "early_retries": early,
        "most_early_ms": earliest.map(|ms| round(ms, 1)),
        "retry_after_seen_by_loop": values_seen.into_iter().take(8).collect::<Vec<_>>(),
        "retry_after_mismatches": mismatches,
    })
}

/// The `Retry-After` each 409 or 429 asked for, by request ID, from the server's rules.
fn asked_retry_after(
    requests: &[&RequestRecord],
    share: Share,
    date: Option<SystemTime>,
) -> HashMap<String, Duration> {
    // `Retry-After` is what is left, rounded up to whole seconds, at least 1.
    let rounded = |left: Duration| {
        let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
        Duration::from_secs(secs.max(1))
    };
    let mut asked = HashMap::new();
    match share {
        Share::InProgress { hold } => {
            // What is left of the execution holding the key: the latest earlier request with
            // the key that was not refused.
            for (i, request) in requests.iter().enumerate() {
                if request.status != Some(409) {
                    continue;
                }
                let holder = requests[..i].iter().rev().find(|r| {
                    r.idempotency_key == request.idempotency_key && r.status != Some(409)
                });
                if let Some(holder) = holder {
                    let ends = holder.at + hold;
                    let left = ends.duration_since(request.at).unwrap_or_default();
                    asked.insert(request.request_id.clone(), rounded(left));
                }
            }
        }
        Share::RateLimited { window, .. } => {
            // The server's fixed window, replayed over the arrivals: it starts at the first
            // call after the last one ended; a refused call is told what is left of it, and
            // not counted. (No call of this share is a replay.) `limit` is the server's.
            let mut current: Option<(SystemTime, u32)> = None;
            for request in requests {
                let now = request.at;
                let (start, count) = current.get_or_insert((now, 0));
                if now.duration_since(*start).unwrap_or_default() >= window {
                    (*start, *count) = (now, 0);
                }
                if request.status == Some(429) {
                    let elapsed = now.duration_since(*start).unwrap_or_default();
                    asked.insert(
                        request.request_id.clone(),
                        rounded(window.saturating_sub(elapsed)),
                    );
                } else {
                    *count += 1;
                }
            }
        }
        Share::RetryAfterDate { .. } => {
            for request in requests.iter().filter(|r| r.status == Some(429)) {
                if let Some(date) = date {
                    let left = date.duration_since(request.at).unwrap_or_default();
                    asked.insert(request.request_id.clone(), left);
                }
            }
        }
        Share::LostAnswers | Share::ServerErrors => {}
    }
    asked
}

pub(crate) async fn run(size: Size) -> Result<Report> {
    let shares = [
        (Share::LostAnswers, size.pick(100, 6)),
        (
            Share::InProgress {
                hold: size.pick(Duration::from_millis(2500), Duration::from_millis(1200)),
            },
            size.pick(20, 2),
        ),
        (
            Share::RateLimited {
                limit: size.pick(10, 2),
                window: size.pick(Duration::from_secs(60), Duration::from_secs(2)),
            },
            size.pick(20, 4),
        ),
        (Share::ServerErrors, size.pick(50, 4)),
        (
            Share::RetryAfterDate {
                ahead: Duration::from_secs(size.pick(3, 1)),
            },
            size.pick(10, 2),
        ),
    ];
    let mut report = Report::new("modulify");
    report.param("method", METHOD);
    report.param(
        "documented_call_loop",
        "the JavaScript Call loop of Modulify's \"Idempotency and retries\" transcribed (modulify_peer.rs): a random UUID key once per call unless given; 5 attempts; 429 or 409: wait Number(Retry-After || 2) s; >= 500: wait attempt * 2 s; else return response.json(); a dropped connection throws",
    );
    report.param(
        "sdk",
        "ModulifyClient over HodoflowClient::builder(..).bearer_token(..) with defaults (5 attempts, 60 s, backoff 500 ms..30 s, retry budget 500 tokens)",
    );
    report.param(
        "early_means",
        "a request following a 409 or 429 with the same key that arrives (server clock) before the Retry-After that answer asked for, worked out from the server's rules",
    );
    let mut sdk_duplicates = 0u64;
    let mut sdk_early = 0u64;
    let mut sdk_lost_in_progress = 0u64;
    for (share, events) in shares {
        let name = share.name();
        report.param(name, share.describe(events));
        let mut clients = vec![Client::Peer, Client::Sdk { max_elapsed: None }];
        if let Share::RateLimited { window, .. } = share {
            clients.push(Client::Sdk {
                max_elapsed: Some(window * 5 / 2),
            });
        }
        let mut figures = serde_json::Map::new();
        for client in clients {
            let measured = measure(share, client, events).await?;
            eprintln!("modulify: {name} {} {measured}", client.label());
            if let Client::Sdk { .. } = client {
                sdk_duplicates += measured["duplicate_executions"]
                    .as_u64()
                    .unwrap_or(u64::MAX);
                sdk_early += measured["early_retries"].as_u64().unwrap_or(u64::MAX);
                if let Share::InProgress { .. } = share {
                    sdk_lost_in_progress += measured["events_lost"].as_u64().unwrap_or(u64::MAX);
                }
            }
            figures.insert(client.label(), measured);
        }
        report.figure(name, Value::Object(figures));
    }
    report.note("events_lost: events whose key never executed (ledger); duplicate_executions: executions of a key beyond its first; calls_unconfirmed: calls whose caller got neither a result nor a replay, whether or not the call ran");
    report.note("the loop's returned_error_body: a 4xx answer other than 409 and 429, returned by response.json() as if it were a result (a 409 or 429 left after five attempts throws instead); threw_fetch_failed: a dropped connection, after which the loop does not retry although the call ran");
    report.note("the SDK at its default 60 s time budget stops at once on a Retry-After whose wait would end past the budget (budget_exhausted, with the server's Retry-After): in rate_limited the events over the window's limit end with that error, not executed; with a longer budget it waits the window out");
    report.exactly("sdk.duplicate_executions", sdk_duplicates as f64, 0.0);
    report.exactly("sdk.early_retries", sdk_early as f64, 0.0);
    report.exactly(
        "sdk.in_progress.events_lost",
        sdk_lost_in_progress as f64,
        0.0,
    );
    Ok(report)
}
