//! Every fault action over real TCP, each checked against the ledger: what ran
//! on the server, whether an answer left it, and what a retry then gets.

mod support;

use std::time::Duration;

use hodoflow_mock::{Fault, MockServer};
use reqwest::Method;
use serde_json::json;
use support::{PROJECTS, Reply, demo, ledger_until, project, try_send, without_lost_races};

const WEBHOOKS: &str = "/api/v1/webhooks/";

/// The single request the server recorded with `Idempotency-Key: key`.
fn only_request(server: &MockServer, key: &str) -> hodoflow_mock::RequestRecord {
    let ledger = server.ledger();
    let records = ledger.requests_with_key(key);
    assert_eq!(records.len(), 1, "{records:?}");
    records[0].clone()
}

#[tokio::test]
async fn respond_answers_its_status_headers_and_body_without_executing() {
    let (server, caller) = demo().await;
    let limited = Fault::respond(429)
        .header("Retry-After", "2")
        .body(r#"{"errors":[{"status":"429","code":"rate_limited","title":"Slow down"}]}"#);
    server.inject(limited.on("POST", PROJECTS));
    server.inject(
        Fault::respond(503)
            .header("Retry-After", "7")
            .on("POST", WEBHOOKS),
    );

    let write = caller.create("op-1", &project("apollo")).await;
    assert_eq!(write.status, 429);
    assert_eq!(write.retry_after_secs(), 2);
    assert_eq!(write.api_code(), "rate_limited");
    assert_eq!(write.header("content-type"), Some("application/json"));
    let delivery = caller.deliver_keyed("evt-1").await;
    assert_eq!(delivery.status, 503);
    assert_eq!(delivery.retry_after_secs(), 7);
    assert!(delivery.body.is_empty());

    let record = only_request(&server, "op-1");
    assert_eq!(
        (record.status, record.fault.as_deref()),
        (Some(429), Some("respond"))
    );
    assert_eq!(server.ledger().total_writes_executed(), 0);
    assert_eq!(server.ledger().total_runs(), 0);

    assert_eq!(caller.create("op-1", &project("apollo")).await.status, 201);
    assert_eq!(
        caller.deliver_keyed("evt-1").await.delivery_status(),
        "accepted"
    );
}

/// Sends a request the server closes without answering; checks the client
/// saw a transport error and the ledger one unanswered request under `key`.
async fn assert_closed_unanswered(
    server: &MockServer,
    request: reqwest::RequestBuilder,
    key: &str,
    fault: &str,
) {
    let error = try_send(request).await.unwrap_err();
    assert!(error.status().is_none() && !error.is_timeout(), "{error:?}");
    let record = only_request(server, key);
    assert_eq!(record.status, None);
    assert_eq!(record.fault.as_deref(), Some(fault));
}

#[tokio::test]
async fn close_before_execute_drops_a_write_unanswered_and_runs_nothing() {
    let (server, caller) = demo().await;
    server.inject(Fault::close_before_execute().on("POST", PROJECTS));
    let write = caller.write_request(Method::POST, PROJECTS, Some("op-1"), &project("apollo"));
    assert_closed_unanswered(&server, write, "op-1", "close_before_execute").await;
    assert_eq!(server.ledger().writes_executed("op-1"), 0);

    let retry = caller.create("op-1", &project("apollo")).await;
    assert_eq!(retry.status, 201);
    assert!(!retry.replayed(), "the key was never claimed");
    assert_eq!(server.ledger().writes_executed("op-1"), 1);
}

#[tokio::test]
async fn close_before_execute_drops_a_delivery_unanswered_and_starts_no_run() {
    let (server, caller) = demo().await;
    server.inject(Fault::close_before_execute().on("POST", WEBHOOKS));
    let delivery = caller.keyed_delivery("evt-1");
    assert_closed_unanswered(&server, delivery, "evt-1", "close_before_execute").await;
    assert_eq!(server.ledger().total_runs(), 0);
    assert_eq!(
        caller.deliver_keyed("evt-1").await.delivery_status(),
        "accepted"
    );
}

#[tokio::test]
async fn execute_then_close_commits_a_write_loses_its_answer_and_the_retry_replays() {
    let (server, caller) = demo().await;
    server.inject(Fault::execute_then_close().on("POST", PROJECTS));
    let write = caller.write_request(Method::POST, PROJECTS, Some("op-1"), &project("apollo"));
    assert_closed_unanswered(&server, write, "op-1", "execute_then_close").await;
    // The fault's done-criterion: one execution, one request, no answer.
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed("op-1"), 1);
    assert_eq!(ledger.requests_with_key("op-1").len(), 1);

    let retry = caller.create("op-1", &project("apollo")).await;
    assert_eq!(retry.status, 201);
    assert!(retry.replayed());
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed("op-1"), 1);
    assert_eq!(ledger.requests_with_key("op-1").len(), 2);
    assert_eq!(caller.count(PROJECTS).await, 1);
}

#[tokio::test]
async fn execute_then_close_commits_a_delivery_loses_its_202_and_the_retry_is_duplicate() {
    let (server, caller) = demo().await;
    server.inject(Fault::execute_then_close().on("POST", WEBHOOKS));
    let delivery = caller.keyed_delivery("evt-1");
    assert_closed_unanswered(&server, delivery, "evt-1", "execute_then_close").await;
    assert_eq!(server.ledger().runs_for_delivery("evt-1").len(), 1);

    let retry = caller.deliver_keyed("evt-1").await;
    assert_eq!(retry.json(), json!({"status": "duplicate"}));
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery("evt-1").len(), 1);
    assert_eq!(ledger.duplicates_for_delivery("evt-1"), 1);
    assert_eq!(ledger.requests_with_key("evt-1").len(), 2);
}

#[tokio::test]
async fn execute_then_delay_commits_before_a_timed_out_client_sees_an_answer() {
    let (server, caller) = demo().await;
    let impatient = caller.with_timeout(Duration::from_millis(250));
    let key = without_lost_races(|round| {
        let (server, impatient) = (&server, impatient.clone());
        async move {
            let key = format!("op-{round}");
            server.inject(Fault::execute_then_delay(Duration::from_secs(30)).on("POST", PROJECTS));
            let write =
                impatient.write_request(Method::POST, PROJECTS, Some(&key), &project("apollo"));
            let error = try_send(write).await.unwrap_err();
            assert!(error.is_timeout(), "{error:?}");
            // On a stalled machine the timeout may fire before the commit: try again.
            (server.ledger().writes_executed(&key) == 1).then_some(key)
        }
    })
    .await;
    assert_eq!(only_request(&server, &key).status, None);
    let retry = caller.create(&key, &project("apollo")).await;
    assert!(retry.replayed());
    assert_eq!(server.ledger().writes_executed(&key), 1);
}

#[tokio::test]
async fn execute_then_delay_holds_a_committed_answer_back_at_least_the_delay() {
    let (server, caller) = demo().await;
    let delay = Duration::from_millis(150);
    server.inject(Fault::execute_then_delay(delay).on("POST", WEBHOOKS));
    let pending = tokio::spawn(support::send(caller.keyed_delivery("evt-1")));
    // The run exists while the answer is still held back.
    let ledger = ledger_until(&server, |l| l.runs_for_delivery("evt-1").len() == 1).await;
    assert_eq!(ledger.requests_with_key("evt-1")[0].status, None);
    let delivery = pending.await.unwrap();
    assert_eq!(delivery.delivery_status(), "accepted");
    assert_eq!(
        only_request(&server, "evt-1").fault.as_deref(),
        Some("execute_then_delay")
    );
}

#[tokio::test]
async fn delay_then_handle_waits_before_it_handles_the_request() {
    let (server, caller) = demo().await;
    let delay = Duration::from_millis(500);
    server.inject(Fault::delay_then_handle(delay).on("POST", PROJECTS));
    let pending = tokio::spawn(async move { caller.create("op-1", &project("apollo")).await });
    // Received, and held before it runs: nothing is written while the delay lasts.
    let held = ledger_until(&server, |l| l.requests_with_key("op-1").len() == 1).await;
    assert_eq!(held.writes_executed("op-1"), 0);
    assert_eq!(held.requests_with_key("op-1")[0].status, None);
    let write = pending.await.unwrap();
    assert_eq!(write.status, 201);
    let record = only_request(&server, "op-1");
    assert_eq!(
        (record.status, record.fault.as_deref()),
        (Some(201), Some("delay_then_handle"))
    );
    assert_eq!(server.ledger().writes_executed("op-1"), 1);
}

#[tokio::test]
async fn slow_execution_holds_a_delivery_so_a_concurrent_retry_is_duplicate() {
    let (server, caller) = demo().await;
    server.inject(Fault::slow_execution(Duration::from_millis(300)).on("POST", WEBHOOKS));
    let first = tokio::spawn({
        let caller = caller.clone();
        async move { caller.deliver_keyed("evt-1").await }
    });
    ledger_until(&server, |l| l.runs_for_delivery("evt-1").len() == 1).await;
    let retry = caller.deliver_keyed("evt-1").await;
    assert_eq!(retry.json(), json!({"status": "duplicate"}));
    let first = first.await.unwrap();
    assert_eq!(first.delivery_status(), "accepted");
    assert_eq!(
        server.ledger().runs_for_delivery("evt-1"),
        [first.run_id().unwrap()]
    );
}

fn assert_processing_unavailable(reply: &Reply) {
    assert_eq!(reply.status, 503);
    assert_eq!(
        reply.json(),
        json!({"error": "Processing temporarily unavailable"})
    );
    assert!(reply.retry_after_secs() >= 1);
}

#[tokio::test]
async fn fail_execution_refuses_a_delivery_with_503_and_retry_after_and_starts_no_run() {
    let (server, caller) = demo().await;
    server.inject(Fault::fail_execution(503).on("POST", WEBHOOKS));
    assert_processing_unavailable(&caller.deliver_keyed("evt-1").await);
    assert_eq!(server.ledger().total_runs(), 0);
    assert_eq!(
        caller.deliver_keyed("evt-1").await.delivery_status(),
        "accepted"
    );
    assert_eq!(server.ledger().runs_for_delivery("evt-1").len(), 1);
}

#[tokio::test]
async fn webhook_unavailable_answers_503_with_the_given_retry_after() {
    let (server, caller) = demo().await;
    server.inject(Fault::webhook_unavailable(3).on("POST", WEBHOOKS));
    let refused = caller.deliver_keyed("evt-1").await;
    assert_processing_unavailable(&refused);
    assert_eq!(refused.retry_after_secs(), 3);
    assert_eq!(server.ledger().total_runs(), 0);
}

#[tokio::test]
async fn expired_token_answers_each_surface_in_its_own_form_and_runs_nothing() {
    let (server, caller) = demo().await;
    server.inject(Fault::expired_token().times(3));

    let write = caller.create("op-1", &project("apollo")).await;
    assert_eq!(
        (write.status, write.api_code()),
        (401, "unauthorized".to_owned())
    );
    assert_eq!(write.api_title(), "Access token expired");
    assert!(write.header("www-authenticate").is_some());
    let delivery = caller.deliver_keyed("evt-1").await;
    assert_eq!(delivery.status, 401);
    assert_eq!(delivery.json(), json!({"error": "missing_credentials"}));
    let query = caller
        .graphql("{ factQuery(type: \"projects\") { id } }", json!({}))
        .await;
    assert_eq!(query.api_title(), "Access token expired");
    let ledger = server.ledger();
    assert_eq!(
        (ledger.total_writes_executed(), ledger.total_runs()),
        (0, 0)
    );

    // The token itself was fine: the same calls now go through.
    assert_eq!(caller.create("op-1", &project("apollo")).await.status, 201);
    assert_eq!(
        caller.deliver_keyed("evt-1").await.delivery_status(),
        "accepted"
    );
}

#[tokio::test]
async fn times_fires_on_the_next_n_matching_requests_only() {
    let (server, caller) = demo().await;
    server.inject(Fault::respond(503).on("post", PROJECTS).times(2));
    assert_eq!(caller.get(PROJECTS).await.status, 200, "another method");
    assert_eq!(
        caller.deliver_keyed("evt-1").await.status,
        202,
        "another path"
    );
    let statuses: Vec<u16> = [
        caller.create("op-1", &project("apollo")).await.status,
        caller.create("op-1", &project("apollo")).await.status,
        caller.create("op-1", &project("apollo")).await.status,
    ]
    .into();
    assert_eq!(statuses, [503, 503, 201]);
    let faults: Vec<Option<String>> = server
        .ledger()
        .requests_with_key("op-1")
        .iter()
        .map(|r| r.fault.clone())
        .collect();
    assert_eq!(
        faults,
        [Some("respond".to_owned()), Some("respond".to_owned()), None]
    );
    assert_eq!(server.ledger().writes_executed("op-1"), 1);
}

/// Which of `n` reads a probability fault answered 503, on a fresh server.
async fn fired_pattern(p: f64, seed: u64, n: usize) -> Vec<bool> {
    let (server, caller) = demo().await;
    server.inject(Fault::respond(503).on("GET", PROJECTS).probability(p, seed));
    let mut fired = Vec::new();
    for _ in 0..n {
        fired.push(caller.get(PROJECTS).await.status == 503);
    }
    fired
}

#[tokio::test]
async fn probability_fires_the_same_seeded_pattern_on_every_server() {
    let first = fired_pattern(0.5, 42, 40).await;
    assert_eq!(first, fired_pattern(0.5, 42, 40).await);
    let count = first.iter().filter(|f| **f).count();
    assert!((1..40).contains(&count), "fired {count} of 40 at p = 0.5");
    assert_ne!(
        first,
        fired_pattern(0.5, 43, 40).await,
        "another seed, another pattern"
    );
    assert!(fired_pattern(1.0, 7, 10).await.iter().all(|f| *f));
    assert!(!fired_pattern(0.0, 7, 10).await.iter().any(|f| *f));
}

#[tokio::test]
async fn clear_faults_disarms_every_fault() {
    let (server, caller) = demo().await;
    server.inject(Fault::respond(503).on("POST", PROJECTS).times(5));
    server.inject(
        Fault::close_before_execute()
            .on("POST", WEBHOOKS)
            .probability(1.0, 1),
    );
    server.clear_faults();
    assert_eq!(caller.create("op-1", &project("apollo")).await.status, 201);
    assert_eq!(caller.deliver_keyed("evt-1").await.status, 202);
}

#[tokio::test]
async fn a_proxy_rate_limit_answers_429_without_retry_after_above_its_rate() {
    let (server, caller) = demo().await;
    server.inject(Fault::proxy_rate_limit(20).on("POST", WEBHOOKS));

    let mut statuses = Vec::new();
    for n in 0..30 {
        statuses.push(caller.deliver_keyed(&format!("evt-{n}")).await);
    }
    let refused: Vec<_> = statuses
        .iter()
        .filter(|reply| reply.status == 429)
        .collect();
    assert!(
        (9..=10).contains(&refused.len()),
        "a burst of 20 passes, the rest of the 30 sent at once is refused: {}",
        refused.len()
    );
    assert!(
        refused
            .iter()
            .all(|reply| reply.header("retry-after").is_none())
    );
    let ledger = server.ledger();
    assert_eq!(
        ledger.total_runs(),
        30 - refused.len(),
        "a refusal runs nothing"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        caller.deliver_keyed("evt-later").await.status,
        202,
        "tokens come back at the rate"
    );
}

#[tokio::test]
async fn an_outage_window_answers_every_request_until_it_ends() {
    let (server, caller) = demo().await;
    server.inject(
        Fault::webhook_unavailable(0)
            .on("POST", WEBHOOKS)
            .during(Duration::from_millis(600)),
    );

    // Three in a row at once: well inside the window, however loaded the machine.
    for n in 0..3 {
        assert_eq!(caller.deliver_keyed(&format!("evt-{n}")).await.status, 503);
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(caller.deliver_keyed("evt-after").await.status, 202);
    assert_eq!(
        server.ledger().total_runs(),
        1,
        "nothing ran during the window"
    );
}
