//! The reqwest-middleware adapter over real TCP: one `Idempotency-Key` on every attempt (the
//! caller's, or one generated once and reported), `Retry-After` never undercut, the matrix's
//! stops, budgets, and a streaming body sent once; each checked against the server's ledger.

mod support;

use std::time::Duration;

use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_MODULIFY_TOKEN, Fault, MockServer};
use hodoflow_retry::{
    Budget, ErrorKind,
    attempt::WaitReason,
    auth::{ClientCredentials, TokenExchanger},
    limit::RetryBudget,
    middleware::{RetryMiddleware, RetryReport},
    webhook::WebhookOutcome,
};
use reqwest_middleware::ClientWithMiddleware;
use serde_json::Value;
use support::{Captured, JSON_API, PROJECTS, TRIGGER, WEBHOOKS, fast_backoff, project, server};

// Every test again over h2c, as over_h2c::<name>.
support::over_h2c!(
    a_create_whose_answers_are_lost_runs_once_with_the_callers_key_on_every_attempt,
    a_generated_key_is_the_same_on_every_attempt_and_reported,
    a_429_with_retry_after_1_is_retried_no_earlier_than_1_s,
    a_webhook_delivery_answered_duplicate_after_a_lost_202_is_a_success,
    a_403_404_or_422_is_returned_after_one_attempt,
    a_trigger_token_the_server_echoes_is_not_in_the_error,
    the_attempt_budget_ends_the_call_on_the_last_answer,
    every_answer_lost_is_an_error_that_may_have_run_with_the_key,
    the_elapsed_budget_refuses_a_retry_after_past_it,
    a_streaming_body_is_sent_once_and_not_retried,
    with_an_exchanger_a_401_is_reexchanged_once_and_without_one_it_stops,
    a_retry_budget_shared_with_a_client_ends_the_retries_of_both,
    an_idempotent_method_on_a_path_no_profile_claims_is_retried_without_a_key,
    a_post_to_a_path_no_profile_claims_is_sent_once_without_a_key,
    with_the_callers_key_a_post_to_a_path_no_profile_claims_is_retried_with_it,
);

/// A client with the middleware, its budget `attempts` and millisecond backoff, over the test's
/// protocol; requests carry their own `Authorization` (no exchanger).
fn stack(attempts: u32) -> ClientWithMiddleware {
    let retry = RetryMiddleware::builder()
        .budget(support::budget(attempts))
        .backoff(fast_backoff())
        .build()
        .unwrap();
    reqwest_middleware::ClientBuilder::new(support::http_client())
        .with(retry)
        .build()
}

/// `Bearer <token>` from the demo credentials, exchanged once by the test.
async fn bearer(server: &MockServer) -> String {
    let credentials =
        ClientCredentials::new(&server.base_url(), DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
            .unwrap()
            .http_client(support::http_client());
    let token = credentials.exchange().await.unwrap();
    format!("Bearer {}", token.secret().expose())
}

fn url(server: &MockServer, path: &str) -> String {
    format!("{}{path}", server.base_url())
}

fn report(response: &reqwest::Response) -> RetryReport {
    response
        .extensions()
        .get::<RetryReport>()
        .expect("the middleware's report")
        .clone()
}

/// The SDK error inside a middleware error.
fn sdk_error(error: &reqwest_middleware::Error) -> &hodoflow_retry::Error {
    match error {
        reqwest_middleware::Error::Middleware(error) => error
            .downcast_ref::<hodoflow_retry::Error>()
            .expect("the SDK error"),
        other => panic!("not the middleware's error: {other:?}"),
    }
}

#[tokio::test]
async fn a_create_whose_answers_are_lost_runs_once_with_the_callers_key_on_every_attempt() {
    let server = server().await;
    let auth = bearer(&server).await;
    server.inject(Fault::execute_then_close().on("POST", JSON_API).times(2));
    let response = stack(5)
        .post(url(&server, PROJECTS))
        .header("authorization", &auth)
        .header("idempotency-key", "mw-create-1")
        .header("content-type", "application/vnd.api+json")
        .body(project("mw-one"))
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 201, "the replay of the first execution");
    let report = report(&response);
    assert_eq!(report.idempotency_key().unwrap().as_str(), "mw-create-1");
    assert_eq!(report.attempts().len(), 3);
    assert!(report.replayed(), "the answer replays the first execution");
    assert_eq!(report.delivery(), None, "a write, not a delivery");
    let ledger = server.ledger();
    let writes = ledger.requests_to("POST", JSON_API);
    assert_eq!(writes.len(), 3);
    assert!(
        writes
            .iter()
            .all(|r| r.idempotency_key.as_deref() == Some("mw-create-1"))
    );
    assert_eq!(ledger.writes_executed("mw-create-1"), 1);
    assert_eq!(ledger.total_writes_executed(), 1, "exactly one resource");
}

#[tokio::test]
async fn a_generated_key_is_the_same_on_every_attempt_and_reported() {
    let server = server().await;
    let auth = bearer(&server).await;
    server.inject(Fault::execute_then_close().on("POST", JSON_API));
    let (captured, _guard) = Captured::on_this_thread(tracing::Level::INFO);
    let response = stack(5)
        .post(url(&server, PROJECTS))
        .header("authorization", &auth)
        .header("content-type", "application/vnd.api+json")
        .body(project("mw-generated"))
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 201);
    let key = report(&response).idempotency_key().unwrap().clone();
    assert_eq!(
        uuid::Uuid::parse_str(key.as_str())
            .unwrap()
            .get_version_num(),
        4
    );
    let ledger = server.ledger();
    let writes = ledger.requests_to("POST", JSON_API);
    assert_eq!(writes.len(), 2);
    assert!(
        writes
            .iter()
            .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())),
        "{writes:?}"
    );
    assert_eq!(ledger.total_writes_executed(), 1);
    let logs = captured.text();
    assert!(logs.contains("generated an Idempotency-Key"), "{logs}");
    assert!(logs.contains(key.as_str()), "{logs}");
    assert!(
        !logs.contains(auth.trim_start_matches("Bearer ")),
        "no token logged"
    );
}

#[tokio::test]
async fn a_429_with_retry_after_1_is_retried_no_earlier_than_1_s() {
    let server = server().await;
    let auth = bearer(&server).await;
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "1")
            .on("POST", JSON_API),
    );
    let response = stack(5)
        .post(url(&server, PROJECTS))
        .header("authorization", &auth)
        .header("idempotency-key", "mw-429")
        .header("content-type", "application/vnd.api+json")
        .body(project("mw-paced"))
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 201);
    // The retry was planned for the server's second (that the engine sleeps no less than it
    // plans: tests/paused_time.rs).
    let report = report(&response);
    let refused = &report.attempts()[0];
    assert_eq!(refused.status().map(|s| s.as_u16()), Some(429));
    assert_eq!(refused.wait_reason(), WaitReason::RetryAfter, "{refused}");
    assert!(refused.wait() >= Duration::from_secs(1), "{refused}");
    let ledger = server.ledger();
    assert_eq!(ledger.requests_to("POST", JSON_API).len(), 2);
    assert_eq!(ledger.writes_executed("mw-429"), 1);
}

#[tokio::test]
async fn a_webhook_delivery_answered_duplicate_after_a_lost_202_is_a_success() {
    let server = server().await;
    let auth = bearer(&server).await;
    server.inject(Fault::execute_then_close().on("POST", WEBHOOKS));
    let response = stack(5)
        .post(server.webhook_url(TRIGGER))
        .header("authorization", &auth)
        .header("idempotency-key", "mw-delivery-1")
        .header("content-type", "application/json")
        .body(r#"{"order":4711}"#)
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 202);
    let report = report(&response);
    assert_eq!(report.attempts().len(), 2);
    assert!(report.error().is_none());
    assert_eq!(report.delivery(), Some(&WebhookOutcome::Duplicate));
    let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(body["status"], "duplicate", "{body}");
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery("mw-delivery-1").len(), 1);
    assert_eq!(ledger.duplicates_for_delivery("mw-delivery-1"), 1);
}

#[tokio::test]
async fn a_403_404_or_422_is_returned_after_one_attempt() {
    for status in [403, 404, 422] {
        let server = server().await;
        let auth = bearer(&server).await;
        server.inject(Fault::respond(status).on("POST", JSON_API).times(5));
        let response = stack(5)
            .post(url(&server, PROJECTS))
            .header("authorization", &auth)
            .body(project("mw-refused"))
            .send()
            .await
            .unwrap();

        assert_eq!(response.status(), status);
        let report = report(&response);
        assert_eq!(report.attempts().len(), 1, "{status}");
        let error = report.error().expect("the matrix's stop");
        assert!(!error.is_retryable(), "{status}: {error}");
        assert_eq!(error.idempotency_key(), report.idempotency_key());
        let ledger = server.ledger();
        assert_eq!(ledger.requests_to("POST", JSON_API).len(), 1, "{status}");
        assert_eq!(ledger.total_writes_executed(), 0);
    }
}

#[tokio::test]
async fn a_trigger_token_the_server_echoes_is_not_in_the_error() {
    let server = server().await;
    let auth = bearer(&server).await;
    let echo = format!(r#"{{"error":"{TRIGGER}"}}"#);
    server.inject(Fault::respond(422).body(&echo).on("POST", WEBHOOKS));
    let response = stack(3)
        .post(url(&server, &format!("{WEBHOOKS}{TRIGGER}")))
        .header("authorization", &auth)
        .header("idempotency-key", "mw-echo-1")
        .body("{}")
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 422);
    let error = report(&response)
        .error()
        .expect("the matrix's stop")
        .clone();
    let text = format!("{error} {error:?}");
    assert!(text.contains("<redacted>"), "{text}");
    assert!(!text.contains(TRIGGER), "{text}");
    assert_eq!(server.ledger().requests_to("POST", WEBHOOKS).len(), 1);
    assert_eq!(server.ledger().total_runs(), 0);
}

#[tokio::test]
async fn the_attempt_budget_ends_the_call_on_the_last_answer() {
    let server = server().await;
    let auth = bearer(&server).await;
    server.inject(Fault::respond(500).on("POST", JSON_API).times(10));
    let response = stack(3)
        .post(url(&server, PROJECTS))
        .header("authorization", &auth)
        .body(project("mw-500"))
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 500, "the last answer");
    assert_eq!(report(&response).attempts().len(), 3);
    assert!(report(&response).error().is_some());
    assert_eq!(server.ledger().requests_to("POST", JSON_API).len(), 3);
}

#[tokio::test]
async fn every_answer_lost_is_an_error_that_may_have_run_with_the_key() {
    let server = server().await;
    let auth = bearer(&server).await;
    server.inject(Fault::execute_then_close().on("POST", JSON_API).times(10));
    let error = stack(2)
        .post(url(&server, PROJECTS))
        .header("authorization", &auth)
        .body(project("mw-lost"))
        .send()
        .await
        .unwrap_err();

    let error = sdk_error(&error);
    assert_eq!(error.kind(), ErrorKind::Transport, "{error}");
    assert!(error.may_have_run());
    assert_eq!(error.attempts().len(), 2);
    let key = error.idempotency_key().expect("the generated key").as_str();
    let ledger = server.ledger();
    assert_eq!(ledger.requests_with_key(key).len(), 2);
    assert_eq!(ledger.writes_executed(key), 1, "ran once");
}

#[tokio::test]
async fn the_elapsed_budget_refuses_a_retry_after_past_it() {
    let server = server().await;
    let auth = bearer(&server).await;
    server.inject(
        Fault::respond(503)
            .header("Retry-After", "30")
            .on("GET", JSON_API),
    );
    let retry = RetryMiddleware::builder()
        .budget(Budget::new().max_elapsed(Duration::from_secs(2)))
        .build()
        .unwrap();
    let client = reqwest_middleware::ClientBuilder::new(support::http_client())
        .with(retry)
        .build();
    let response = client
        .get(url(&server, PROJECTS))
        .header("authorization", &auth)
        .send()
        .await
        .unwrap();

    // Refused, not slept: the same engine refuses it in no time at all in tests/paused_time.rs.
    assert_eq!(response.status(), 503);
    let error = report(&response).error().unwrap().clone();
    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert_eq!(error.retry_after(), Some(Duration::from_secs(30)));
    assert_eq!(server.ledger().requests_to("GET", JSON_API).len(), 1);
}

#[tokio::test]
async fn a_streaming_body_is_sent_once_and_not_retried() {
    let server = server().await;
    let auth = bearer(&server).await;
    server.inject(Fault::respond(503).on("POST", JSON_API).times(5));
    let response = stack(5)
        .post(url(&server, PROJECTS))
        .header("authorization", &auth)
        .body(reqwest::Body::wrap(project("mw-stream")))
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 503);
    let report = report(&response);
    let key = report.idempotency_key().expect("a key even so").as_str();
    let ledger = server.ledger();
    assert_eq!(ledger.requests_to("POST", JSON_API).len(), 1);
    assert_eq!(ledger.requests_with_key(key).len(), 1);
}

#[tokio::test]
async fn with_an_exchanger_a_401_is_reexchanged_once_and_without_one_it_stops() {
    let server = server().await;
    server.inject(Fault::expired_token().on("GET", JSON_API));
    let credentials =
        ClientCredentials::new(&server.base_url(), DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
            .unwrap()
            .http_client(support::http_client());
    let retry = RetryMiddleware::builder()
        .exchanger(credentials)
        .backoff(fast_backoff())
        .build()
        .unwrap();
    let client = reqwest_middleware::ClientBuilder::new(support::http_client())
        .with(retry.clone())
        .build();
    let response = client.get(url(&server, PROJECTS)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(report(&response).attempts().len(), 2);
    assert_eq!(
        retry.stats().exchanges,
        2,
        "the first token and one re-exchange"
    );

    server.inject(Fault::expired_token().on("GET", JSON_API));
    let auth = bearer(&server).await;
    let response = stack(5)
        .get(url(&server, PROJECTS))
        .header("authorization", &auth)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        401,
        "the caller's own credential: nothing to exchange"
    );
    assert_eq!(report(&response).attempts().len(), 1);
}

#[tokio::test]
async fn a_retry_budget_shared_with_a_client_ends_the_retries_of_both() {
    let server = server().await;
    server.inject(Fault::respond(500).on("GET", JSON_API).times(20));
    // Room for one retry in all, shared by the middleware and a client.
    let shared = RetryBudget::builder()
        .capacity(5)
        .retry_cost(5)
        .timeout_retry_cost(5)
        .adaptive(false)
        .build()
        .unwrap();
    let client = support::demo(support::builder(&server).retry_budget(shared.clone()));
    let retry = RetryMiddleware::from_client(&client);
    let stack = reqwest_middleware::ClientBuilder::new(support::http_client())
        .with(retry)
        .build();
    let response = stack.get(url(&server, PROJECTS)).send().await.unwrap();

    assert_eq!(response.status(), 500);
    let report = report(&response);
    assert_eq!(
        report.attempts().len(),
        2,
        "the first attempt and the one retry"
    );
    let error = report.error().unwrap();
    assert_eq!(error.kind(), ErrorKind::RetryBudgetExhausted, "{error}");
    assert_eq!(shared.tokens(), Some(0));
    let error = client.get(PROJECTS).send().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::RetryBudgetExhausted, "{error}");
    assert_eq!(error.attempts().len(), 1, "the client may not retry either");
    assert_eq!(server.ledger().requests_to("GET", JSON_API).len(), 3);
}

// A path no profile claims (`/v1/...`, which the Hodoflow profile does not describe; the contract
// server answers it as Modulify): the vendor-neutral table.

/// Modulify's `send_message` body.
const MESSAGE: &str = r#"{"projectId":"site_1","prompt":"Add a footer."}"#;

#[tokio::test]
async fn an_idempotent_method_on_a_path_no_profile_claims_is_retried_without_a_key() {
    let server = server().await;
    let auth = format!("Bearer {DEMO_MODULIFY_TOKEN}");
    server.inject(Fault::respond(503).on("GET", "/v1/tools").times(1));
    server.inject(
        Fault::respond(429)
            .header("retry-after", "0")
            .on("GET", "/v1/tools")
            .times(1),
    );
    let read = stack(5)
        .get(url(&server, "/v1/tools"))
        .header("authorization", &auth)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    assert_eq!(report(&read).attempts().len(), 3);
    assert_eq!(report(&read).idempotency_key(), None);

    // PUT is idempotent (RFC 9110): retried on 5xx without a key, and stopped by the 404.
    server.inject(Fault::respond(502).on("PUT", "/v1/send_message").times(2));
    let put = stack(5)
        .put(url(&server, "/v1/send_message"))
        .header("authorization", &auth)
        .body(MESSAGE)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 404);
    assert_eq!(report(&put).attempts().len(), 3);
    let ledger = server.ledger();
    assert_eq!(ledger.requests_to("GET", "/v1/tools").len(), 3);
    assert_eq!(ledger.requests_to("PUT", "/v1/send_message").len(), 3);
    assert!(
        ledger
            .requests()
            .iter()
            .all(|r| r.idempotency_key.is_none()),
        "no key is added on a path no vendor claims: {:?}",
        ledger.requests()
    );
}

#[tokio::test]
async fn a_post_to_a_path_no_profile_claims_is_sent_once_without_a_key() {
    let server = server().await;
    let auth = format!("Bearer {DEMO_MODULIFY_TOKEN}");
    server.inject(
        Fault::fail_execution(503)
            .on("POST", "/v1/send_message")
            .times(1),
    );
    let refused = stack(5)
        .post(url(&server, "/v1/send_message"))
        .header("authorization", &auth)
        .body(MESSAGE)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503, "handed back, not retried");
    assert_eq!(report(&refused).attempts().len(), 1);
    assert_eq!(report(&refused).idempotency_key(), None);

    // A lost answer is not retried either: it may have run, and nothing makes a repeat safe.
    server.inject(
        Fault::execute_then_close()
            .on("POST", "/v1/send_message")
            .times(1),
    );
    let lost = stack(5)
        .post(url(&server, "/v1/send_message"))
        .header("authorization", &auth)
        .body(MESSAGE)
        .send()
        .await;
    assert!(lost.is_err(), "{lost:?}");
    let ledger = server.ledger();
    let sent = ledger.requests_to("POST", "/v1/send_message");
    assert_eq!(sent.len(), 2, "one attempt each: {sent:?}");
    assert!(sent.iter().all(|r| r.idempotency_key.is_none()), "{sent:?}");
    assert_eq!(
        ledger.modulify_total_executions(),
        1,
        "the lost one ran, once"
    );
}

#[tokio::test]
async fn with_the_callers_key_a_post_to_a_path_no_profile_claims_is_retried_with_it() {
    let server = server().await;
    let auth = format!("Bearer {DEMO_MODULIFY_TOKEN}");
    server.inject(
        Fault::fail_execution(503)
            .on("POST", "/v1/send_message")
            .times(1),
    );
    server.inject(
        Fault::execute_then_close()
            .on("POST", "/v1/send_message")
            .times(1),
    );
    let sent = stack(5)
        .post(url(&server, "/v1/send_message"))
        .header("authorization", &auth)
        .header("idempotency-key", "order-4711:notify")
        .body(MESSAGE)
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    assert_eq!(
        sent.headers()
            .get("idempotency-replayed")
            .map(|v| v.as_bytes()),
        Some(&b"true"[..]),
        "the lost answer came back as a replay"
    );
    let report = report(&sent);
    assert_eq!(report.attempts().len(), 3);
    assert_eq!(
        report.idempotency_key().map(|key| key.as_str()),
        Some("order-4711:notify")
    );
    let ledger = server.ledger();
    assert_eq!(ledger.requests_with_key("order-4711:notify").len(), 3);
    assert_eq!(ledger.requests_to("POST", "/v1/send_message").len(), 3);
    assert_eq!(ledger.modulify_executions("order-4711:notify"), 1);
}
