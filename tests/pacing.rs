//! Per-trigger pacing, one rule: the caller's limit, else the server's `RateLimit-Policy`,
//! else Hodoflow's documented default; checked against the contract server's ledger over real TCP.

mod support;

use std::time::Duration;

use hodoflow_mock::{Limits, MockServer, RequestRecord};
use hodoflow_retry::{ErrorKind, PacingSource, RetryingClient, TriggerLimit, TriggerPacing};
use support::{EVENT, TRIGGER, WEBHOOKS, budget, builder, delivery, demo, server_where};

/// Delivers `count` events named `{prefix}-{n}` at once; each call's result, in order.
async fn burst(
    client: &RetryingClient,
    prefix: &str,
    count: usize,
) -> Vec<hodoflow_retry::Result<hodoflow_retry::Delivery>> {
    let calls = (0..count).map(|n| {
        let client = client.clone();
        let id = delivery(&format!("{prefix}-{n}"));
        tokio::spawn(async move { client.deliver(TRIGGER, EVENT).delivery_id(id).send().await })
    });
    let mut done = Vec::new();
    for call in calls.collect::<Vec<_>>() {
        done.push(call.await.expect("the call did not panic"));
    }
    done
}

/// The deliveries the server saw, in arrival order.
fn deliveries(server: &MockServer) -> Vec<RequestRecord> {
    server
        .ledger()
        .requests_to("POST", WEBHOOKS)
        .into_iter()
        .cloned()
        .collect()
}

/// The most arrivals in any span of `window`, sliding.
fn most_in_any(requests: &[RequestRecord], window: Duration) -> usize {
    let mut most = 0;
    for (first, request) in requests.iter().enumerate() {
        let within = requests[first..]
            .iter()
            .take_while(|later| later.arrived.duration_since(request.arrived) < window)
            .count();
        most = most.max(within);
    }
    most
}

fn refused_429(requests: &[RequestRecord]) -> usize {
    requests.iter().filter(|r| r.status == Some(429)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_policy_says_1000_a_minute_is_paced_at_1000_not_the_documented_100() {
    let server = server_where(|limits: &mut Limits| {
        limits.webhook_rate_limit = 1000;
        limits.webhook_rate_window = Duration::from_secs(60);
    })
    .await;
    let client = demo(
        builder(&server)
            .budget(budget(5).max_elapsed(Duration::from_secs(5)))
            .pace_triggers(),
    );
    // One first, so the server's figures are known before the burst.
    support::deliver(&client, "first").await;
    assert_eq!(
        client.trigger_pacing(TRIGGER),
        Some(TriggerPacing::new(
            TriggerLimit::new(1000, Duration::from_secs(60)).unwrap(),
            PacingSource::Server
        ))
    );

    let (delivered, took) = support::timed(burst(&client, "learned", 300)).await;

    for delivery in delivered {
        assert_eq!(delivery.expect("accepted").attempts().len(), 1);
    }
    let requests = deliveries(&server);
    assert_eq!(requests.len(), 301);
    assert_eq!(refused_429(&requests), 0);
    assert_eq!(server.ledger().total_runs(), 301);
    let spread = requests[300].arrived.duration_since(requests[1].arrived);
    assert!(
        spread < Duration::from_secs(3),
        "the 300 went without a stall: {spread:?} (took {took:?})"
    );
    let stats = client.stats();
    assert_eq!(stats.trigger_held_for, None);
    assert_eq!(stats.trigger_wait, Duration::ZERO, "never held: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_states_nothing_is_paced_at_the_documented_100_a_minute() {
    let server = server_where(|limits: &mut Limits| {
        limits.webhook_rate_limit = 1_000_000;
        limits.webhook_rate_limit_fields = false;
    })
    .await;
    let client = demo(
        builder(&server)
            .budget(budget(5).max_elapsed(Duration::from_secs(1)))
            .pace_triggers(),
    );

    let outcomes = burst(&client, "silent", 101).await;

    let documented = TriggerPacing::new(TriggerLimit::DOCUMENTED, PacingSource::Documented);
    assert_eq!(client.trigger_pacing(TRIGGER), Some(documented));
    let held: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert_eq!(held.len(), 1, "the 101st waits for the window");
    assert_eq!(held[0].kind(), ErrorKind::BudgetExhausted, "{}", held[0]);
    assert!(held[0].attempts().is_empty(), "nothing sent");
    assert_eq!(deliveries(&server).len(), 100);
    assert_eq!(client.stats().trigger_held_by, Some(documented));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_s_limit_wins_over_the_server_s_figures() {
    let server = server_where(|limits: &mut Limits| {
        limits.webhook_rate_limit = 1000;
    })
    .await;
    let window = Duration::from_millis(800);
    let client = demo(
        builder(&server)
            .trigger_limit(TriggerLimit::new(5, window).unwrap())
            .pace_triggers(),
    );
    support::deliver(&client, "first").await;

    let delivered = burst(&client, "caller", 9).await;

    assert!(delivered.iter().all(Result::is_ok));
    assert_eq!(
        client.trigger_pacing(TRIGGER).map(|p| p.source),
        Some(PacingSource::Caller)
    );
    let requests = deliveries(&server);
    assert_eq!(requests.len(), 10);
    assert_eq!(most_in_any(&requests, window), 5, "5 per 800 ms, not 1000");
    let stats = client.stats();
    assert!(stats.trigger_wait > Duration::ZERO);
    assert_eq!(
        stats
            .trigger_held_by
            .map(|p| (p.limit.requests(), p.source)),
        Some((5, PacingSource::Caller))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smaller_quota_learned_midway_paces_the_burst_under_it_with_no_429() {
    let window = Duration::from_secs(1);
    let server = server_where(|limits: &mut Limits| {
        limits.webhook_rate_limit = 4;
        limits.webhook_rate_window = window;
    })
    .await;
    let client = demo(
        builder(&server)
            .budget(budget(5).max_elapsed(Duration::from_secs(10)))
            .pace_triggers(),
    );
    // The documented 100 until the first answer; then the server's 4 per second.
    support::deliver(&client, "first").await;

    let delivered = burst(&client, "shrunk", 11).await;

    assert!(delivered.iter().all(Result::is_ok));
    let requests = deliveries(&server);
    assert_eq!(requests.len(), 12);
    assert_eq!(refused_429(&requests), 0, "{requests:?}");
    assert!(most_in_any(&requests, window) <= 4);
    assert_eq!(server.ledger().total_runs(), 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_another_sender_spent_holds_the_trigger_until_its_reset() {
    let window = Duration::from_secs(2);
    let server = server_where(|limits: &mut Limits| {
        limits.webhook_rate_limit = 3;
        limits.webhook_rate_window = window;
    })
    .await;
    let paced = demo(builder(&server).pace_triggers());
    let other = demo(builder(&server));

    support::deliver(&paced, "paced-1").await;
    support::deliver(&other, "other-1").await;
    // The third of the window: the answer says nothing is left ("trigger";r=0).
    support::deliver(&paced, "paced-2").await;
    support::deliver(&paced, "paced-3").await;

    let requests = deliveries(&server);
    assert_eq!(requests.len(), 4);
    assert_eq!(refused_429(&requests), 0, "held, not refused: {requests:?}");
    let waited = requests[3].arrived.duration_since(requests[0].arrived);
    assert!(waited >= window - Duration::from_millis(50), "{waited:?}");
    assert_eq!(
        paced.stats().gate_closed_for,
        None,
        "the trigger's, not the credential's"
    );
}
