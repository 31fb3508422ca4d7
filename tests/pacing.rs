//! Per-trigger pacing, one rule: the caller's limit, else the server's `RateLimit-Policy`,
//! else Hodoflow's documented default; checked against the contract server's ledger over real TCP.

mod support;

use std::time::Duration;

use hodoflow_mock::{Limits, MockServer, RequestRecord};
use hodoflow_retry::{
    ErrorKind, HodoflowClient,
    hodoflow::TRIGGER_LIMIT,
    limit::{PacingSource, RouteLimit, RoutePacing},
};
use support::{EVENT, TRIGGER, WEBHOOKS, budget, builder, delivery, demo, server_where};

/// Delivers `count` events named `{prefix}-{n}` at once; each call's result, in order.
async fn burst(
    client: &HodoflowClient,
    prefix: &str,
    count: usize,
) -> Vec<hodoflow_retry::Result<hodoflow_retry::webhook::Delivery>> {
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
        Some(RoutePacing::new(
            RouteLimit::new(1000, Duration::from_secs(60)).unwrap(),
            PacingSource::Server
        ))
    );

    let delivered = burst(&client, "learned", 300).await;

    for delivery in delivered {
        assert_eq!(delivery.expect("accepted").attempts().len(), 1);
    }
    let requests = deliveries(&server);
    assert_eq!(requests.len(), 301);
    assert_eq!(refused_429(&requests), 0);
    assert_eq!(server.ledger().total_runs(), 301);
    // The 300 went without a stall: none waited for a slot.
    let stats = client.stats();
    assert_eq!(stats.route_held_for, None);
    assert_eq!(stats.route_wait, Duration::ZERO, "never held: {stats:?}");
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

    let documented = RoutePacing::new(TRIGGER_LIMIT, PacingSource::Documented);
    assert_eq!(client.trigger_pacing(TRIGGER), Some(documented));
    let held: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert_eq!(held.len(), 1, "the 101st waits for the window");
    assert_eq!(held[0].kind(), ErrorKind::BudgetExhausted, "{}", held[0]);
    assert!(held[0].attempts().is_empty(), "nothing sent");
    assert_eq!(deliveries(&server).len(), 100);
    assert_eq!(client.stats().route_held_by, Some(documented));
}

/// The server admits 1,000 a minute and says so; the caller's 5 a minute holds: of 10
/// deliveries 5 are sent, and the rest, whose wait for the next window is past their 2 s
/// budgets, stop at once with nothing sent. (How the caller's limit spaces a burst over its
/// windows: tests/paused_time.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_s_limit_wins_over_the_server_s_figures() {
    let server = server_where(|limits: &mut Limits| {
        limits.webhook_rate_limit = 1000;
    })
    .await;
    let client = demo(
        builder(&server)
            .budget(budget(5).max_elapsed(Duration::from_secs(2)))
            .trigger_limit(RouteLimit::new(5, Duration::from_secs(60)).unwrap())
            .pace_triggers(),
    );
    support::deliver(&client, "first").await;

    let delivered = burst(&client, "caller", 9).await;

    assert_eq!(
        client.trigger_pacing(TRIGGER).map(|p| p.source),
        Some(PacingSource::Caller)
    );
    let refused: Vec<_> = delivered.iter().filter_map(|d| d.as_ref().err()).collect();
    assert_eq!(refused.len(), 5, "5 a minute, not 1000: {refused:?}");
    for error in refused {
        assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
        assert!(error.attempts().is_empty(), "nothing sent: {error}");
    }
    let requests = deliveries(&server);
    assert_eq!(requests.len(), 5);
    assert_eq!(refused_429(&requests), 0);
    assert_eq!(
        client
            .stats()
            .route_held_by
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
    // The server refuses a fifth request in its window of a second: none was refused, so the
    // sends kept to its 4 a second. (The burst's spacing in time: tests/paused_time.rs.)
    assert_eq!(refused_429(&requests), 0, "{requests:?}");
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

    // The server would refuse a fourth in its window: held until the reset, not refused. (How
    // long: tests/paused_time.rs.)
    let requests = deliveries(&server);
    assert_eq!(requests.len(), 4);
    assert_eq!(refused_429(&requests), 0, "held, not refused: {requests:?}");
    assert!(
        paced.stats().route_wait > Duration::ZERO,
        "held at the client"
    );
    assert_eq!(
        paced.stats().gate_closed_for,
        None,
        "the trigger's, not the credential's"
    );
}
