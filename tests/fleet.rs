//! Fleet safety: the shared retry budget stops a retry storm, a JSON:API 429 closes the
//! credential's API budget for every API call (and no delivery), the per-trigger limiter keeps a
//! burst under the trigger's limit, and a `RateLimit` field with nothing remaining closes the
//! credential until its reset. (`tests/scopes.rs`: whom each signal holds, in every shape.)

mod support;

use std::time::Duration;

use hodoflow_mock::{Fault, Limits, MockServer, RequestRecord};
use hodoflow_retry::{
    Error, ErrorKind, HodoflowClient,
    attempt::WaitReason,
    limit::{Fleet, FleetAsk, FleetFuture, Heard, Refusal, RetryBudget, RouteLimit},
};
use support::{
    EVENT, JSON_API, PROJECTS, TOKEN, TRIGGER, WEBHOOKS, budget, builder, delivery, demo,
    eventually, server, server_where,
};

// Every test again over h2c, as over_h2c::<name>.
support::over_h2c!(
    a_sustained_outage_stays_under_1_10_requests_per_operation_first_attempts_held_too,
    without_the_retry_budget_the_same_storm_sends_every_attempt,
    clients_given_one_retry_budget_drain_it_together,
    a_success_after_retries_refunds_the_bucket,
    a_fleet_hears_every_answer_the_failures_in_a_row_and_when_the_budget_finds_the_service_down,
    a_json_api_429_closes_the_credential_for_its_retry_after_and_its_api_waiters_succeed_after,
    the_trigger_limiter_keeps_a_burst_of_300_under_the_servers_limit,
    without_the_limiter_the_same_burst_meets_429s,
    a_ratelimit_field_with_nothing_remaining_closes_the_gate_until_the_reset,
    a_malformed_or_unexhausted_ratelimit_field_holds_nothing_back,
    retry_after_wins_over_a_ratelimit_field,
    stats_count_calls_attempts_retries_by_cause_and_exchanges
);

/// Every delivery of the webhook surface answered `503` without `Retry-After`.
fn always_503() -> Fault {
    Fault::respond(503)
        .body(r#"{"error":"Processing temporarily unavailable"}"#)
        .on("POST", WEBHOOKS)
        .probability(1.0, 7)
}

/// Delivers `count` distinct events at once, named `{prefix}-{n}`.
async fn storm(client: &HodoflowClient, prefix: &str, count: usize) -> Vec<Error> {
    let calls = (0..count).map(|n| {
        let client = client.clone();
        let id = delivery(&format!("{prefix}-{n}"));
        tokio::spawn(async move { client.deliver(TRIGGER, EVENT).delivery_id(id).send().await })
    });
    join_all(calls)
        .await
        .into_iter()
        .map(|call| call.expect_err("every answer is a 503"))
        .collect()
}

/// Awaits every spawned call, in order; they ran concurrently.
async fn join_all<T>(calls: impl IntoIterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut done = Vec::new();
    for call in calls.into_iter().collect::<Vec<_>>() {
        done.push(call.await.expect("the call did not panic"));
    }
    done
}

fn deliveries(server: &MockServer) -> usize {
    server.ledger().requests_to("POST", WEBHOOKS).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sustained_outage_stays_under_1_10_requests_per_operation_first_attempts_held_too() {
    let server = server().await;
    server.inject(always_503());
    // Calls of 5 s: a held call waits out most of its budget, and the second wave meets an
    // outage older than the budget.
    let client = demo(
        builder(&server).budget(
            support::budget(5)
                .max_elapsed(Duration::from_secs(5))
                .attempt_timeout(Duration::from_secs(1)),
        ),
    );

    // 1,000 calls in two waves of 500 against a server that answers every delivery 503.
    let first = storm(&client, "outage-a", 500).await;
    let second = storm(&client, "outage-b", 500).await;

    let requests = deliveries(&server);
    println!("outage: {requests} requests for 1,000 operations");
    assert!(
        requests * 100 <= 1000 * 110,
        "{requests} requests > 1.10 x 1,000"
    );
    for error in first.iter().chain(&second) {
        assert!(
            matches!(
                error.kind(),
                ErrorKind::RetryBudgetExhausted | ErrorKind::Server | ErrorKind::BudgetExhausted
            ),
            "{error}"
        );
        assert!(!error.may_have_run(), "every 503 is a definite answer");
        assert!(error.is_retryable(), "later, with the same delivery ID");
    }
    let held = second
        .iter()
        .filter(|error| error.attempts().is_empty())
        .count();
    assert!(
        held > 400,
        "while the service is down first attempts are held and refused, sending nothing: {held}"
    );
    let refused = second
        .iter()
        .find(|error| error.attempts().is_empty())
        .expect("one held");
    assert_eq!(refused.kind(), ErrorKind::RetryBudgetExhausted);
    assert!(
        refused.to_string().contains("nothing was sent"),
        "{refused}"
    );
    assert_eq!(server.ledger().total_runs(), 0, "nothing was executed");
    let stats = client.stats();
    assert_eq!((stats.calls, stats.failed), (1000, 1000));
    assert!(
        stats.retry_budget_throttle_permille >= Some(500),
        "{stats:?}"
    );
    assert!(stats.retry_budget_local_rejections >= held as u64);
    assert_eq!(stats.retry_budget_waiting, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_retry_budget_the_same_storm_sends_every_attempt() {
    let server = server().await;
    server.inject(always_503());
    let client = demo(builder(&server).retry_budget(RetryBudget::disabled()));

    let errors = storm(&client, "unbudgeted", 500).await;

    assert_eq!(
        deliveries(&server),
        2500,
        "5 attempts for each of 500 calls"
    );
    assert!(errors.iter().all(|error| error.kind() == ErrorKind::Server));
    assert_eq!(client.stats().retry_budget_tokens, None);
}

#[tokio::test]
async fn clients_given_one_retry_budget_drain_it_together() {
    let server = server().await;
    server.inject(always_503());
    // The plain bucket: what the clients share is the bucket (the adaptive budget would hold
    // the second call as the service is down, and its floor would let more go).
    let shared = RetryBudget::builder()
        .capacity(10)
        .adaptive(false)
        .build()
        .unwrap();
    let first = demo(builder(&server).retry_budget(shared.clone()));
    let second = demo(builder(&server).retry_budget(shared.clone()));

    let drained = storm(&first, "first", 1).await;
    assert_eq!(drained[0].attempts().len(), 3, "two retries of 5 tokens");
    let refused = storm(&second, "second", 1).await;

    assert_eq!(refused[0].kind(), ErrorKind::RetryBudgetExhausted);
    assert_eq!(refused[0].attempts().len(), 1);
    assert_eq!(shared.tokens(), Some(0));
    assert_eq!(deliveries(&server), 4);
}

#[tokio::test]
async fn a_success_after_retries_refunds_the_bucket() {
    let server = server().await;
    server.inject(Fault::respond(503).on("POST", WEBHOOKS).times(2));
    let client = demo(builder(&server));

    let accepted = support::deliver(&client, "refunded").await;

    assert_eq!(accepted.attempts().len(), 3);
    assert_eq!(client.stats().retry_budget_tokens, Some(500));
    assert_eq!(server.ledger().total_runs(), 1);
}

/// A fleet that admits every attempt and keeps what each answer told the call's retry budget:
/// the hook a store of one's own is written against.
#[derive(Debug, Default)]
struct Hearing(std::sync::Mutex<Vec<Heard>>);

impl Fleet for Hearing {
    fn admit<'a>(
        &'a self,
        _: FleetAsk<'a>,
        _: Duration,
    ) -> FleetFuture<'a, Result<Option<i64>, Refusal>> {
        Box::pin(async { Ok(None) })
    }

    fn answered<'a>(
        &'a self,
        _: FleetAsk<'a>,
        _: i64,
        _: Option<RouteLimit>,
    ) -> FleetFuture<'a, ()> {
        Box::pin(async {})
    }

    fn close<'a>(&'a self, _: FleetAsk<'a>, _: Duration, _: &'a str) -> FleetFuture<'a, ()> {
        Box::pin(async {})
    }

    fn heard<'a>(&'a self, _: FleetAsk<'a>, heard: Heard) -> FleetFuture<'a, ()> {
        self.0.lock().unwrap().push(heard);
        Box::pin(async {})
    }
}

/// A delivery meets two 503s, a 429, a third 503, then is accepted. After each answer the fleet
/// hears whether it was accepted, the failures in a row (a 429 neither counts nor ends the run:
/// it speaks of a narrower scope) and, from the fourth refusal of a fresh client, that its
/// budget finds the service down; the server ran the event once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_hears_every_answer_the_failures_in_a_row_and_when_the_budget_finds_the_service_down()
 {
    let server = server().await;
    for fault in [
        Fault::respond(503).times(2),
        Fault::respond(429).header("Retry-After", "1").times(1),
        Fault::respond(503).times(1),
    ] {
        server.inject(fault.on("POST", WEBHOOKS));
    }
    let client = demo(builder(&server).budget(budget(6)));
    let fleet = std::sync::Arc::new(Hearing::default());

    client
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery("heard"))
        .fleet(fleet.clone())
        .send()
        .await
        .expect("accepted after the faults");

    let heard = fleet.0.lock().unwrap().clone();
    let accepted: Vec<bool> = heard.iter().map(Heard::accepted).collect();
    assert_eq!(accepted, [false, false, false, false, true]);
    let in_a_row: Vec<u32> = heard.iter().map(Heard::failed_in_a_row).collect();
    assert_eq!(in_a_row, [1, 2, 2, 3, 0]);
    let down: Vec<bool> = heard
        .iter()
        .map(|heard| heard.down_for().is_some())
        .collect();
    assert_eq!(&down[..4], [false, false, false, true]);
    let ledger = server.ledger();
    assert_eq!(ledger.requests_to("POST", WEBHOOKS).len(), 5);
    assert_eq!(ledger.total_runs(), 1);
}

/// The requests the server saw on the credential (the token endpoint aside).
fn on_credential(requests: &[RequestRecord]) -> Vec<&RequestRecord> {
    requests.iter().filter(|r| r.path != TOKEN).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_api_429_closes_the_credential_for_its_retry_after_and_its_api_waiters_succeed_after()
 {
    let server = server().await;
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "1")
            .body(r#"{"errors":[{"status":"429","code":"rate_limited","title":"Too many"}]}"#)
            .on("GET", JSON_API)
            .times(1),
    );
    let client = demo(builder(&server));

    let limited = {
        let client = client.clone();
        tokio::spawn(async move { client.get(PROJECTS).send().await })
    };
    eventually("the 429 is answered", || {
        server
            .ledger()
            .requests()
            .iter()
            .any(|r| r.status == Some(429))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Calls that start while the credential is closed: reads wait for it, deliveries (which do
    // not sit in the credential's API budget) go at once.
    let mut waiters = Vec::new();
    for n in 0..20 {
        let client = client.clone();
        waiters.push(tokio::spawn(async move {
            if n % 2 == 0 {
                client
                    .get(PROJECTS)
                    .send()
                    .await
                    .map(|r| r.attempts().len())
            } else {
                let id = delivery(&format!("held-{n}"));
                let sent = client.deliver(TRIGGER, EVENT).delivery_id(id).send();
                sent.await.map(|d| d.attempts().len())
            }
        }));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }

    let limited = limited.await.unwrap().unwrap();
    assert_eq!(limited.attempts().len(), 2);
    let retried = &limited.attempts()[0];
    assert_eq!(retried.wait_reason(), WaitReason::RetryAfter, "{retried}");
    assert!(retried.wait() >= Duration::from_secs(1), "{retried}");
    for waiter in waiters {
        assert_eq!(waiter.await.unwrap().unwrap(), 1, "sent once");
    }
    // By arrival order: every delivery before any read after the 429 (how long the reads were
    // held, and their release spread, are checked in tests/paused_time.rs).
    let ledger = server.ledger();
    let requests = on_credential(ledger.requests());
    let at = requests.iter().position(|r| r.status == Some(429)).unwrap();
    let since = |path: &str| -> Vec<u64> {
        requests[at + 1..]
            .iter()
            .filter(|r| r.path.starts_with(path))
            .map(|r| r.seq)
            .collect()
    };
    let reads = since(JSON_API);
    assert_eq!(reads.len(), 11, "the retry and the 10 reads");
    let deliveries = since(WEBHOOKS);
    assert_eq!(deliveries.len(), 10);
    let first = reads.iter().min().copied().unwrap();
    assert!(
        deliveries.iter().all(|seq| *seq < first),
        "the deliveries went before the credential reopened: deliveries {deliveries:?}, reads \
         {reads:?}"
    );
    assert!(
        client.stats().gate_wait > Duration::ZERO,
        "the reads waited"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trigger_limiter_keeps_a_burst_of_300_under_the_servers_limit() {
    let window = Duration::from_millis(600);
    let server = server_where(|limits: &mut Limits| {
        limits.webhook_rate_limit = 100;
        limits.webhook_rate_window = window;
    })
    .await;
    let client = demo(
        builder(&server)
            .budget(budget(5).max_elapsed(Duration::from_secs(30)))
            .trigger_limit(RouteLimit::new(100, window).unwrap()),
    );

    let calls = (0..300).map(|n| {
        let client = client.clone();
        let id = delivery(&format!("paced-{n}"));
        tokio::spawn(async move { client.deliver(TRIGGER, EVENT).delivery_id(id).send().await })
    });
    let delivered = join_all(calls).await;

    for delivery in delivered {
        let delivery = delivery.expect("accepted");
        assert_eq!(delivery.attempts().len(), 1);
        assert!(delivery.run_id().is_some());
    }
    let ledger = server.ledger();
    let requests = ledger.requests_to("POST", WEBHOOKS);
    assert_eq!(requests.len(), 300);
    let refused = requests.iter().filter(|r| r.status == Some(429)).count();
    assert_eq!(refused, 0, "no 429 from a server limited to 100 per 600 ms");
    assert_eq!(ledger.total_runs(), 300);
    let stats = client.stats();
    assert!(stats.route_wait > Duration::ZERO);
    assert_eq!(stats.retries.total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_limiter_the_same_burst_meets_429s() {
    let server = server_where(|limits: &mut Limits| {
        limits.webhook_rate_limit = 100;
        limits.webhook_rate_window = Duration::from_secs(60);
    })
    .await;
    let client = demo(builder(&server).budget(budget(1)));

    let calls = (0..300).map(|n| {
        let client = client.clone();
        let id = delivery(&format!("unpaced-{n}"));
        tokio::spawn(async move { client.deliver(TRIGGER, EVENT).delivery_id(id).send().await })
    });
    let outcomes = join_all(calls).await;

    let ledger = server.ledger();
    let requests = ledger.requests_to("POST", WEBHOOKS);
    let refused = requests.iter().filter(|r| r.status == Some(429)).count();
    println!("without the limiter: {refused} answers of 429");
    assert!(refused > 0, "the burst bounced off the trigger's limit");
    assert_eq!(ledger.total_runs(), 100);
    // Those still at the client when the first 429 came back met the closed gate instead.
    let held = outcomes.iter().filter(|outcome| {
        outcome
            .as_ref()
            .is_err_and(|error| error.attempts().is_empty())
    });
    assert_eq!(held.count() + refused + 100, 300);
}

/// A 200 from `GET PROJECTS` carrying `RateLimit: value`.
fn rate_limited_read(value: &str) -> Fault {
    Fault::respond(200)
        .header("RateLimit", value)
        .body(r#"{"data":[]}"#)
        .on("GET", JSON_API)
        .times(1)
}

/// A read's budget shorter than the 30 s resets below: a read the gate held until one would
/// be refused at once, nothing sent.
fn short() -> hodoflow_retry::Budget {
    budget(5).max_elapsed(Duration::from_secs(2))
}

#[tokio::test]
async fn a_ratelimit_field_with_nothing_remaining_closes_the_gate_until_the_reset() {
    let server = server().await;
    server.inject(rate_limited_read(r#""default";r=0;t=30"#));
    let client = demo(builder(&server));

    client.get(PROJECTS).send().await.unwrap();
    let held = client
        .get(PROJECTS)
        .budget(short())
        .send()
        .await
        .unwrap_err();

    assert_eq!(held.kind(), ErrorKind::BudgetExhausted, "{held}");
    assert!(held.attempts().is_empty(), "nothing sent: {held}");
    let reset = held.retry_after().expect("the time to the reset");
    assert!(
        reset > Duration::from_secs(2) && reset <= Duration::from_secs(30),
        "{reset:?}"
    );
    assert_eq!(server.ledger().requests_to("GET", JSON_API).len(), 1);
}

#[tokio::test]
async fn a_malformed_or_unexhausted_ratelimit_field_holds_nothing_back() {
    for value in [r#""default";r=0;t=soon"#, r#""default";r=7;t=30"#] {
        let server = server().await;
        server.inject(rate_limited_read(value));
        let client = demo(builder(&server));

        client.get(PROJECTS).send().await.unwrap();
        let next = client.get(PROJECTS).budget(short()).send().await;

        let next = next.unwrap_or_else(|error| panic!("{value}: held: {error}"));
        assert_eq!(next.attempts().len(), 1, "{value}");
        assert_eq!(client.stats().gate_closed_for, None, "{value}");
        assert_eq!(server.ledger().requests_to("GET", JSON_API).len(), 2);
    }
}

#[tokio::test]
async fn retry_after_wins_over_a_ratelimit_field() {
    // A 30 s hold would be past the call's 20 s budget; the second the `Retry-After` asks is not.
    let server = server().await;
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "1")
            .header("RateLimit", r#""default";r=0;t=30"#)
            .on("GET", JSON_API)
            .times(1),
    );
    let client = demo(builder(&server));

    let read = client.get(PROJECTS).send().await.unwrap();
    let next = client.get(PROJECTS).budget(short()).send().await;

    assert_eq!(read.attempts().len(), 2);
    let retried = &read.attempts()[0];
    assert_eq!(retried.wait_reason(), WaitReason::RetryAfter, "{retried}");
    assert!(retried.wait() >= Duration::from_secs(1), "{retried}");
    assert!(retried.wait() < Duration::from_secs(30), "{retried}");
    let next = next.expect("the credential reopened after the second, not the 30 s reset");
    assert_eq!(next.attempts().len(), 1);
    assert_eq!(server.ledger().requests_to("GET", JSON_API).len(), 3);
}

#[tokio::test]
async fn stats_count_calls_attempts_retries_by_cause_and_exchanges() {
    let server = server().await;
    server.inject(Fault::execute_then_close().on("POST", WEBHOOKS).times(1));
    server.inject(Fault::respond(503).on("GET", JSON_API).times(1));
    let client = demo(builder(&server));

    support::deliver(&client, "counted").await;
    client.get(PROJECTS).send().await.unwrap();
    let missing = client.get("/api/json/v1/projects/nope").send().await;

    assert!(missing.is_err());
    let stats = client.stats();
    assert_eq!(
        (stats.calls, stats.succeeded, stats.failed),
        (3, 2, 1),
        "{stats:?}"
    );
    assert_eq!(stats.attempts, 5);
    assert_eq!(stats.retries.transport, 1, "the lost 202");
    assert_eq!(stats.retries.server_error, 1);
    assert_eq!(stats.retries.total(), 2);
    assert_eq!(stats.exchanges, 1);
    assert_eq!(server.ledger().tokens_issued(), 1);
    assert_eq!(
        stats.retry_budget_tokens,
        Some(500),
        "both retries refunded"
    );
}
