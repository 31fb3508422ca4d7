//! The credential's rate budget: attempts are spaced to fit it, and a 429's
//! Retry-After closes the gate for every call of the client.

mod support;

use std::time::Duration;

use hodoflow_mock::{Limits, MockServer};
use hodoflow_retry::{DeliveryId, ErrorKind, HodoflowClient, IdempotencyKey, limit::RateBudget};
use support::{budget, fast_backoff, server_with};

fn limited_server(requests: u32, window: Duration) -> hodoflow_mock::MockServerBuilder {
    MockServer::builder().limits(Limits {
        api_rate_limit: Some(requests),
        api_rate_window: window,
        ..Limits::default()
    })
}

fn client_with_rate(server: &MockServer, rate: Option<RateBudget>) -> HodoflowClient {
    let mut builder = HodoflowClient::builder(server.base_url())
        .client_credentials(
            hodoflow_mock::DEMO_CLIENT_ID,
            hodoflow_mock::DEMO_CLIENT_SECRET,
        )
        .backoff(fast_backoff())
        .budget(budget(5));
    if let Some(rate) = rate {
        builder = builder.rate_budget(rate);
    }
    builder.build().unwrap()
}

#[tokio::test]
async fn spaces_attempts_to_fit_the_rate_budget_so_the_server_never_answers_429() {
    let server = server_with(limited_server(5, Duration::from_secs(1))).await;
    // A little stricter than the server, as a margin for network latency.
    let rate = RateBudget::new(5, Duration::from_millis(1200)).unwrap();
    let client = client_with_rate(&server, Some(rate));

    for _ in 0..8 {
        let read = client.get("/api/json/v1/projects").send().await.unwrap();
        assert_eq!(read.attempts().len(), 1);
    }

    let ledger = server.ledger();
    let reads = ledger.requests_to("GET", "/api/json/v1/projects");
    assert_eq!(reads.len(), 8);
    // The server refuses a sixth request in its window of a second: none was refused, so the
    // client held the 6th to 8th. (When: 1.2 s after the first five, in tests/paused_time.rs.)
    assert!(reads.iter().all(|r| r.status == Some(200)), "no 429");
    assert!(
        client.stats().gate_wait > Duration::ZERO,
        "held at the gate"
    );
}

#[tokio::test]
async fn a_429_retry_after_pauses_every_other_operation_of_the_client() {
    let server = server_with(limited_server(3, Duration::from_secs(1))).await;
    let client = client_with_rate(&server, None);
    for _ in 0..3 {
        client.get("/api/json/v1/projects").send().await.unwrap();
    }
    let refused = client
        .get("/api/json/v1/projects")
        .budget(budget(1))
        .send()
        .await
        .unwrap_err();
    assert_eq!(refused.status().map(|s| s.as_u16()), Some(429));

    let reads = (0..3).map(|_| {
        let client = client.clone();
        tokio::spawn(async move { client.get("/api/json/v1/projects").send().await })
    });
    for read in reads {
        assert_eq!(
            read.await.unwrap().unwrap().attempts().len(),
            1,
            "sent once, after the pause"
        );
    }

    let ledger = server.ledger();
    let all = ledger.requests_to("GET", "/api/json/v1/projects");
    assert_eq!(all.len(), 7);
    // Sent before the server's window ended, any of them would have met a 429 too: the one
    // refusal says they waited out its Retry-After. (For how long: tests/paused_time.rs.)
    assert_eq!(all.iter().filter(|r| r.status == Some(429)).count(), 1);
    assert_eq!(all[3].status, Some(429));
}

#[tokio::test]
async fn a_rate_budget_wait_past_the_operation_budget_stops_before_sending() {
    let server = server_with(MockServer::builder()).await;
    let rate = RateBudget::new(1, Duration::from_secs(3600)).unwrap();
    let client = client_with_rate(&server, Some(rate));
    client.get("/api/json/v1/projects").send().await.unwrap();

    let error = client
        .get("/api/json/v1/projects")
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::BudgetExhausted);
    assert!(error.attempts().is_empty());
    assert!(!error.may_have_run());
    assert_eq!(server.ledger().requests_to("GET", "/api/json/").len(), 1);
}

/// A trigger's window holds that trigger only: once its window of one is spent (the answer
/// says `RateLimit: "trigger";r=0`, the next delivery would get a 429), deliveries to it stop
/// at once, sending nothing, and the credential's API calls go as ever.
#[tokio::test]
async fn a_spent_trigger_window_closes_that_trigger_and_not_the_credential() {
    let server = server_with(MockServer::builder().limits(Limits {
        webhook_rate_limit: 1,
        ..Limits::default()
    }))
    .await;
    let client = client_with_rate(&server, None);
    let deliver = |event: &str| {
        let id = DeliveryId::new(IdempotencyKey::from_operation_id(event));
        client.deliver(support::TRIGGER, "{}").delivery_id(id)
    };
    deliver("e-1").send().await.unwrap();

    // The trigger's window has about a minute left: a delivery to it stops at once, nothing
    // sent, with the time to the window's end.
    let short = budget(3).max_elapsed(Duration::from_secs(2));
    let paused = deliver("e-2").budget(short).send().await.unwrap_err();
    assert_eq!(paused.kind(), ErrorKind::BudgetExhausted);
    assert!(paused.attempts().is_empty());
    assert!(!paused.may_have_run());
    assert!(
        paused
            .retry_after()
            .is_some_and(|wait| wait > Duration::from_secs(50))
    );
    // The API does not sit in the trigger's window: the read is sent at once.
    let read = client
        .get("/api/json/v1/projects")
        .budget(short)
        .send()
        .await
        .expect("a read is not held by a trigger's window");
    assert_eq!(read.attempts().len(), 1);
    let ledger = server.ledger();
    assert_eq!(ledger.requests_to("POST", "/api/v1/webhooks/").len(), 1);
    assert_eq!(ledger.requests_to("GET", "/api/json/").len(), 1);
    assert_eq!(client.stats().gate_closed_for, None);
}
