//! Budgets and waits: `Retry-After` is honoured in both forms and never undercut, a wait that would
//! end past the budget stops at once, attempts and elapsed time are capped, per call too.

mod support;

use std::time::{Duration, SystemTime};

use hodoflow_mock::Fault;
use hodoflow_retry::{
    Backoff, ErrorKind,
    attempt::{AttemptResult, TransportKind, WaitReason},
};
use support::{
    JSON_API, PROJECTS, TRIGGER, WEBHOOKS, budget, client, client_with, delivery, key, project,
    server, statuses,
};

// Every test again over h2c, as over_h2c::<name>.
support::over_h2c!(
    a_retry_after_beyond_the_budget_stops_at_once_with_the_servers_wait,
    a_real_webhook_rate_limit_longer_than_the_budget_stops_with_the_time_to_the_window_end,
    a_429_with_an_http_date_is_retried_no_earlier_than_that_date,
    max_attempts_caps_the_attempts_the_first_included,
    a_per_call_budget_overrides_the_clients_both_ways,
    an_elapsed_budget_spent_on_timeouts_stops_and_says_the_call_may_have_run,
    a_per_call_backoff_overrides_the_clients
);

const RATE_LIMITED: &str =
    r#"{"errors":[{"status":"429","code":"rate_limited","title":"Rate limit exceeded"}]}"#;

#[tokio::test]
async fn a_retry_after_beyond_the_budget_stops_at_once_with_the_servers_wait() {
    let server = server().await;
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "30")
            .body(RATE_LIMITED)
            .on("POST", JSON_API),
    );
    let key = key("project-helios:create");
    let short = budget(5).max_elapsed(Duration::from_secs(2));

    let error = client(&server)
        .create(PROJECTS, key.clone(), project("Helios"))
        .budget(short)
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert_eq!(error.retry_after(), Some(Duration::from_secs(30)));
    assert_eq!(error.status().map(|s| s.as_u16()), Some(429));
    assert_eq!(statuses(error.attempts()), [Some(429)]);
    assert!(!error.may_have_run());
    assert!(error.is_retryable(), "the same request may succeed later");
    // The 30 s wait was refused, not slept: tests/paused_time.rs, where the refusal takes no
    // time at all.
    let ledger = server.ledger();
    assert_eq!(ledger.requests_with_key(key.as_str()).len(), 1);
    assert_eq!(ledger.writes_executed(key.as_str()), 0);
}

/// The first delivery spends the trigger's window of one (its answer says `RateLimit:
/// "trigger";r=0;t=60`): the trigger is closed until the window ends, so the second sends
/// nothing and stops with the time to the window's end.
#[tokio::test]
async fn a_real_webhook_rate_limit_longer_than_the_budget_stops_with_the_time_to_the_window_end() {
    let server = support::server_where(|limits| limits.webhook_rate_limit = 1).await;
    let client = client(&server);
    client
        .deliver(TRIGGER, "{}")
        .delivery_id(delivery("event-1"))
        .send()
        .await
        .unwrap();

    let error = client
        .deliver(TRIGGER, "{}")
        .delivery_id(delivery("event-2"))
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    let retry_after = error.retry_after().expect("the server's Retry-After");
    assert!(
        (Duration::from_secs(50)..=Duration::from_secs(60)).contains(&retry_after),
        "{retry_after:?} to the end of the 60 s window, well past the 20 s budget"
    );
    assert!(error.attempts().is_empty(), "nothing sent: {error}");
    let ledger = server.ledger();
    assert_eq!(ledger.requests_to("POST", WEBHOOKS).len(), 1);
    assert_eq!(ledger.total_runs(), 1);
}

/// The date is written as now + 2 s, cut to whole seconds, so it lies between 1 and 2 s after
/// the moment it was written. The retry's planned wait is the time left to that date, plus the
/// jitter of a `Retry-After` (at most a tenth); that the engine sleeps no less than it plans,
/// and a date's wait on the virtual clock, are in tests/paused_time.rs.
#[tokio::test]
async fn a_429_with_an_http_date_is_retried_no_earlier_than_that_date() {
    let server = server().await;
    let header = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(2));
    server.inject(
        Fault::respond(429)
            .header("Retry-After", &header)
            .body(RATE_LIMITED)
            .on("GET", PROJECTS),
    );

    let response = client(&server).get(PROJECTS).send().await.unwrap();

    assert_eq!(statuses(response.attempts()), [Some(429), Some(200)]);
    let first = &response.attempts()[0];
    assert_eq!(first.wait_reason(), WaitReason::RetryAfter, "{first}");
    assert!(
        first.wait() > Duration::ZERO && first.wait() <= Duration::from_millis(2200),
        "a date ahead, at most 2 s: {first}"
    );
    assert_eq!(server.ledger().requests_to("GET", PROJECTS).len(), 2);
}

#[tokio::test]
async fn max_attempts_caps_the_attempts_the_first_included() {
    for attempts in [1, 4] {
        let server = server().await;
        server.inject(Fault::respond(503).on("GET", PROJECTS).times(100));

        let error = client_with(&server, budget(attempts))
            .get(PROJECTS)
            .send()
            .await
            .unwrap_err();

        assert_eq!(error.kind(), ErrorKind::Server, "{error}");
        assert_eq!(error.attempts().len(), attempts as usize);
        let sent = server.ledger().requests_to("GET", PROJECTS).len();
        assert_eq!(sent, attempts as usize);
    }
}

#[tokio::test]
async fn a_per_call_budget_overrides_the_clients_both_ways() {
    let server = server().await;
    server.inject(Fault::respond(503).on("GET", PROJECTS).times(2));
    let stingy = client_with(&server, budget(1));
    let generous = client_with(&server, budget(5));

    let widened = stingy.get(PROJECTS).budget(budget(3)).send().await.unwrap();
    server.inject(Fault::respond(503).on("GET", PROJECTS).times(100));
    let narrowed = generous
        .get(PROJECTS)
        .budget(budget(2))
        .send()
        .await
        .unwrap_err();

    assert_eq!(
        statuses(widened.attempts()),
        [Some(503), Some(503), Some(200)]
    );
    assert_eq!(statuses(narrowed.attempts()), [Some(503), Some(503)]);
    assert_eq!(server.ledger().requests_to("GET", PROJECTS).len(), 5);

    // A call's budget is its own: the clients' next calls have the clients' budgets.
    server.clear_faults();
    server.inject(Fault::respond(503).on("GET", PROJECTS).times(3));
    let stingy_again = stingy.get(PROJECTS).send().await.unwrap_err();
    let generous_again = generous.get(PROJECTS).send().await.unwrap();
    assert_eq!(statuses(stingy_again.attempts()), [Some(503)]);
    assert_eq!(
        statuses(generous_again.attempts()),
        [Some(503), Some(503), Some(200)]
    );
    assert_eq!(server.ledger().requests_to("GET", PROJECTS).len(), 9);
}

#[tokio::test]
async fn an_elapsed_budget_spent_on_timeouts_stops_and_says_the_call_may_have_run() {
    let server = server().await;
    server.inject(
        Fault::delay_then_handle(Duration::from_millis(500))
            .on("GET", PROJECTS)
            .times(100),
    );
    let tight = budget(10)
        .max_elapsed(Duration::from_millis(300))
        .attempt_timeout(Duration::from_millis(100));

    let error = client(&server)
        .get(PROJECTS)
        .budget(tight)
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert!(
        error.may_have_run(),
        "requests left and no answer came back"
    );
    assert!(error.attempts().len() >= 2, "{:?}", error.attempts());
    // Each attempt ran out its timeout (the call's times: tests/paused_time.rs).
    for attempt in error.attempts() {
        let timed_out = AttemptResult::Transport(TransportKind::Timeout);
        assert_eq!(attempt.result(), timed_out, "{attempt}");
    }
    let ledger = server.ledger();
    let arrived = ledger.requests_to("GET", PROJECTS);
    assert_eq!(
        arrived.len(),
        error.attempts().len(),
        "every attempt reached the server"
    );
    assert!(
        arrived.iter().all(|request| request.status != Some(200)),
        "none was answered in time"
    );
}

#[tokio::test]
async fn a_per_call_backoff_overrides_the_clients() {
    let server = server().await;
    server.inject(Fault::respond(500).on("GET", PROJECTS).times(2));
    let slow = Backoff::new()
        .base(Duration::from_secs(10))
        .cap(Duration::from_secs(10));
    let client = support::builder(&server)
        .client_credentials(
            hodoflow_mock::DEMO_CLIENT_ID,
            hodoflow_mock::DEMO_CLIENT_SECRET,
        )
        .backoff(slow)
        .budget(budget(3).max_elapsed(Duration::from_secs(60)))
        .build()
        .unwrap();
    let quick = Backoff::new()
        .base(Duration::from_millis(1))
        .cap(Duration::from_millis(4));

    let read = client.get(PROJECTS).backoff(quick).send().await.unwrap();

    assert_eq!(statuses(read.attempts()), [Some(500), Some(500), Some(200)]);
    for waited in &read.attempts()[..2] {
        assert_eq!(waited.wait_reason(), WaitReason::Backoff);
        assert!(waited.wait() <= Duration::from_millis(4), "{waited}");
    }
    assert_eq!(server.ledger().requests_to("GET", PROJECTS).len(), 3);
}
