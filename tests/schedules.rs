//! Pluggable schedules over real TCP: a custom schedule is what the engine plans its waits by,
//! yet `Retry-After` is still honoured and the budget still refuses a wait past its end,
//! whatever the schedule says. (That the planned waits are what the server sees between
//! attempts: tests/paused_time.rs, in virtual time.)

mod support;

use std::time::Duration;

use hodoflow_mock::Fault;
use hodoflow_retry::{Backoff, ErrorKind, attempt::WaitReason, schedule::Schedule};
use support::{PROJECTS, TOKEN, TRIGGER, WEBHOOKS, builder, delivery, demo, statuses};

const MS: Duration = Duration::from_millis(1);

/// A schedule that waits the durations of a list, then stops.
#[derive(Debug, Clone)]
struct Listed(Vec<Duration>);

impl Listed {
    fn every(wait: Duration) -> Self {
        Self(vec![wait; 10])
    }
}

impl Schedule for Listed {
    fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send> {
        Box::new(self.0.clone().into_iter())
    }
}

/// No backoff at all: any gap on the server comes from the schedule.
fn no_backoff() -> Backoff {
    Backoff::new().base(Duration::ZERO)
}

#[tokio::test]
async fn a_custom_schedule_is_what_spaces_the_attempts_on_the_server() {
    let server = support::server().await;
    server.inject(Fault::respond(503).on("GET", PROJECTS).times(3));
    let client = demo(
        builder(&server)
            .backoff(no_backoff())
            .schedule(Listed::every(30 * MS)),
    );

    let read = client.get(PROJECTS).send().await.unwrap();

    assert_eq!(
        statuses(read.attempts()),
        [Some(503), Some(503), Some(503), Some(200)]
    );
    // The waits the engine planned are the schedule's; that it sleeps them, no less and no
    // more, is checked in virtual time (tests/paused_time.rs).
    for waited in &read.attempts()[..3] {
        assert_eq!(waited.wait_reason(), WaitReason::Backoff, "{waited}");
        assert_eq!(waited.wait(), 30 * MS, "{waited}");
    }
    assert_eq!(server.ledger().requests_to("GET", PROJECTS).len(), 4);
}

#[tokio::test]
async fn a_retry_after_on_a_429_is_honoured_over_a_schedule_that_says_zero() {
    let server = support::server().await;
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "1")
            .on("GET", PROJECTS),
    );
    let client = demo(builder(&server).schedule(Listed(vec![Duration::ZERO; 4])));

    let read = client.get(PROJECTS).send().await.unwrap();

    assert_eq!(statuses(read.attempts()), [Some(429), Some(200)]);
    let first = &read.attempts()[0];
    assert_eq!(first.wait_reason(), WaitReason::RetryAfter, "{first}");
    assert!(first.wait() >= Duration::from_secs(1), "{first}");
    assert_eq!(server.ledger().requests_to("GET", PROJECTS).len(), 2);
}

/// A 500 does not close the credential's gate, so only the planned wait keeps the floor here
/// (slept as planned: tests/paused_time.rs).
#[tokio::test]
async fn a_retry_after_on_a_500_is_a_floor_under_a_schedule_that_says_zero() {
    let server = support::server().await;
    server.inject(
        Fault::respond(500)
            .header("Retry-After", "1")
            .on("GET", PROJECTS),
    );
    let client = demo(builder(&server).schedule(Listed(vec![Duration::ZERO; 4])));

    let read = client.get(PROJECTS).send().await.unwrap();

    assert_eq!(statuses(read.attempts()), [Some(500), Some(200)]);
    let first = &read.attempts()[0];
    assert_eq!(first.wait_reason(), WaitReason::RetryAfter, "{first}");
    assert!(first.wait() >= Duration::from_secs(1), "{first}");
    assert_eq!(server.ledger().requests_to("GET", PROJECTS).len(), 2);
}

#[tokio::test]
async fn a_schedule_that_says_forever_stops_at_once_with_the_budget_exhausted() {
    let server = support::server().await;
    server.inject(Fault::respond(503).on("GET", PROJECTS).times(10));
    let client = demo(builder(&server).schedule(Listed(vec![Duration::MAX])));

    let error = client.get(PROJECTS).send().await.unwrap_err();

    // The wait was refused, not slept (in no time at all: tests/paused_time.rs).
    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert_eq!(statuses(error.attempts()), [Some(503)]);
    assert_eq!(server.ledger().requests_to("GET", PROJECTS).len(), 1);
}

#[tokio::test]
async fn a_schedule_that_ends_stops_the_retries_with_the_last_answer() {
    let server = support::server().await;
    server.inject(Fault::respond(503).on("GET", PROJECTS).times(10));
    let client = demo(builder(&server).schedule(Listed(vec![MS])));

    let error = client.get(PROJECTS).send().await.unwrap_err();

    assert_eq!(error.kind(), ErrorKind::Server, "{error}");
    assert_eq!(statuses(error.attempts()), [Some(503), Some(503)]);
    assert_eq!(server.ledger().requests_to("GET", PROJECTS).len(), 2);
}

#[tokio::test]
async fn a_per_call_backoff_replaces_the_clients_schedule_and_a_per_call_schedule_the_backoff() {
    let server = support::server().await;
    let client = demo(builder(&server).schedule(Listed(vec![Duration::from_secs(30)])));

    server.inject(Fault::respond(503).on("GET", PROJECTS));
    let quick = client
        .get(PROJECTS)
        .backoff(no_backoff())
        .send()
        .await
        .unwrap();
    server.inject(Fault::respond(503).on("GET", PROJECTS));
    let listed = client
        .get(PROJECTS)
        .schedule(Listed(vec![20 * MS]))
        .send()
        .await
        .unwrap();

    assert_eq!(statuses(quick.attempts()), [Some(503), Some(200)]);
    assert_eq!(quick.attempts()[0].wait(), Duration::ZERO);
    assert_eq!(statuses(listed.attempts()), [Some(503), Some(200)]);
    assert_eq!(listed.attempts()[0].wait(), 20 * MS);
    assert_eq!(server.ledger().requests_to("GET", PROJECTS).len(), 4);
}

#[tokio::test]
async fn a_delivery_retries_on_its_own_schedule_and_starts_one_run() {
    let server = support::server().await;
    server.inject(Fault::respond(503).on("POST", WEBHOOKS));
    let client = demo(builder(&server).backoff(no_backoff()));
    let id = delivery("order-4711:shipped");

    let delivered = client
        .deliver(TRIGGER, "{}")
        .delivery_id(id.clone())
        .schedule(Listed(vec![30 * MS]))
        .send()
        .await
        .unwrap();

    assert_eq!(statuses(delivered.attempts()), [Some(503), Some(202)]);
    assert_eq!(delivered.attempts()[0].wait(), 30 * MS);
    let ledger = server.ledger();
    assert_eq!(ledger.requests_to("POST", WEBHOOKS).len(), 2);
    assert_eq!(ledger.runs_for_delivery(id.key().as_str()).len(), 1);
}

/// The exchanges wait their own backoff, shared by every call (src/core/auth/cache.rs times
/// it in paused time), whatever schedule the calls have: a failed one is retried and the read
/// goes once.
#[tokio::test]
async fn a_failed_token_exchange_is_retried_under_a_custom_schedule() {
    let server = support::server().await;
    server.inject(Fault::respond(503).on("POST", TOKEN));
    let client = demo(
        builder(&server)
            .backoff(no_backoff())
            .schedule(Listed::every(30 * MS)),
    );

    let read = client.get(PROJECTS).send().await.unwrap();

    assert_eq!(statuses(read.attempts()), [Some(200)]);
    let ledger = server.ledger();
    let exchanges = ledger.requests_to("POST", TOKEN);
    assert_eq!(exchanges.len(), 2);
}
