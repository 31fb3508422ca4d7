//! Webhook deliveries: a lost 202 is answered by `duplicate`, never a second run; the retry matrix
//! of Hodoflow's webhook sender guide, a relay's provider delivery ID, and the client-side checks
//! that send nothing.

mod support;

use std::time::Duration;

use hodoflow_mock::{DEMO_ORGANIZATION, Fault, Scope, TriggerSeed};
use hodoflow_retry::{
    Error, ErrorKind, HodoflowClient,
    attempt::WaitReason,
    webhook::{DEFAULT_WEBHOOK_BODY_LIMIT, DeliveryHeader, WebhookOutcome},
};
use http::{HeaderMap, HeaderValue};
use support::{
    EVENT, TRIGGER, WEBHOOKS, assert_nothing_sent, assert_stopped_at_once, client, client_with,
    deliver, delivery, identity, run_id, server, statuses,
};

// Every test again over h2c, as over_h2c::<name>.
support::over_h2c!(
    accepts_a_first_delivery_with_its_run_id,
    a_lost_202_is_retried_with_the_same_id_and_answered_duplicate_with_one_run,
    a_timeout_after_commit_is_retried_and_answered_duplicate,
    a_delivery_whose_every_answer_is_lost_may_have_run_and_started_one_run,
    two_503s_with_retry_after_are_waited_out_and_the_third_attempt_is_accepted,
    a_relayed_github_delivery_id_is_the_identity_on_every_attempt,
    a_delivery_with_only_x_request_id_or_an_invalid_provider_id_is_refused_and_nothing_is_sent,
    the_legacy_organization_route_still_delivers,
    an_unknown_trigger_is_not_found_after_one_attempt,
    a_deactivated_trigger_is_not_found_after_one_attempt,
    a_body_over_the_servers_limit_is_payload_too_large_after_one_attempt,
    a_body_the_runtime_cannot_process_is_unprocessable_after_one_attempt,
    an_unsupported_trigger_authentication_is_unprocessable_after_one_attempt,
    a_token_without_the_webhooks_scope_is_forbidden_after_one_attempt,
    a_webhook_unauthorized_stops_at_once_without_a_token_exchange,
    missing_credentials_is_exchanged_once_and_retried_with_the_same_id,
    a_body_over_the_client_limit_is_refused_and_nothing_is_sent,
    a_configured_client_body_limit_is_enforced_before_sending
);

const GITHUB_DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

/// Delivers `body` to `trigger` once with its own delivery ID and expects an error.
async fn refused(client: &HodoflowClient, trigger: &str, body: &'static [u8]) -> Error {
    client
        .deliver(trigger, body)
        .delivery_id(delivery("order-4711:refused"))
        .send()
        .await
        .expect_err("the delivery is refused")
}

/// Headers a relay passes through.
fn relayed(headers: &[(&'static str, &'static str)]) -> HeaderMap {
    headers
        .iter()
        .map(|(name, value)| {
            let name = http::HeaderName::from_static(name);
            (name, HeaderValue::from_static(value))
        })
        .collect()
}

#[tokio::test]
async fn accepts_a_first_delivery_with_its_run_id() {
    let server = server().await;
    let delivery = deliver(&client(&server), "order-4711:shipped").await;

    let key = identity(&delivery);
    let ledger = server.ledger();
    assert_eq!(delivery.attempts().len(), 1);
    assert_eq!(ledger.runs_for_delivery(&key), [run_id(&delivery)]);
}

/// A delivery's future is a pointer to its call's one allocation, not the call: a sender
/// with ten thousand deliveries in flight holds a few bytes a delivery beside them, however
/// it moves the futures (into tasks, a `select!`). Nothing is sent until it is awaited.
#[tokio::test]
async fn a_delivery_s_future_points_to_its_call_and_sends_nothing_until_awaited() {
    let server = server().await;
    let client = client(&server);
    let send = client
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery("order-4711:small"))
        .send();
    let bytes = std::mem::size_of_val(&send);
    assert!(bytes <= 64, "a delivery's future is {bytes} bytes");
    assert!(server.ledger().requests().is_empty(), "nothing sent yet");

    let delivered = send.await.expect("delivered");
    let key = identity(&delivered);
    assert_eq!(
        server.ledger().runs_for_delivery(&key),
        [run_id(&delivered)]
    );
}

#[tokio::test]
async fn a_lost_202_is_retried_with_the_same_id_and_answered_duplicate_with_one_run() {
    let server = server().await;
    server.inject(Fault::execute_then_close().on("POST", WEBHOOKS));

    let delivery = deliver(&client(&server), "order-4711:lost").await;

    assert_eq!(delivery.outcome(), &WebhookOutcome::Duplicate);
    assert_eq!(delivery.attempts().len(), 2);
    let key = identity(&delivery);
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery(&key).len(), 1, "exactly one run");
    let sent = ledger.requests_with_key(&key);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].status, None, "the first answer was lost");
    assert_eq!(sent[1].status, Some(202));
}

#[tokio::test]
async fn a_timeout_after_commit_is_retried_and_answered_duplicate() {
    let server = server().await;
    server.inject(Fault::execute_then_delay(Duration::from_millis(400)).on("POST", WEBHOOKS));
    let budget = support::budget(3).attempt_timeout(Duration::from_millis(100));

    let delivery = client(&server)
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery("order-4711:slow"))
        .budget(budget)
        .send()
        .await
        .unwrap();

    assert!(delivery.is_duplicate());
    let key = identity(&delivery);
    assert_eq!(server.ledger().runs_for_delivery(&key).len(), 1);
    assert_eq!(delivery.attempts().len(), 2);
}

#[tokio::test]
async fn a_delivery_whose_every_answer_is_lost_may_have_run_and_started_one_run() {
    let server = server().await;
    server.inject(Fault::execute_then_close().on("POST", WEBHOOKS).times(100));

    let error = client_with(&server, support::budget(3))
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery("order-4711:unobserved"))
        .send()
        .await
        .unwrap_err();

    support::assert_every_answer_lost(&error, 3);
    let key = delivery("order-4711:unobserved").key().as_str().to_owned();
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery(&key).len(), 1, "it did run, once");
    assert_eq!(ledger.duplicates_for_delivery(&key), 2);
}

#[tokio::test]
async fn two_503s_with_retry_after_are_waited_out_and_the_third_attempt_is_accepted() {
    let server = server().await;
    server.inject(Fault::webhook_unavailable(1).on("POST", WEBHOOKS).times(2));

    let delivery = deliver(&client(&server), "order-4711:busy").await;

    let run_id = run_id(&delivery);
    assert_eq!(
        statuses(delivery.attempts()),
        [Some(503), Some(503), Some(202)]
    );
    // Each retry planned for the server's second (that the engine sleeps no less than it plans:
    // tests/paused_time.rs).
    for attempt in &delivery.attempts()[..2] {
        assert_eq!(attempt.wait_reason(), WaitReason::RetryAfter, "{attempt}");
        assert!(attempt.wait() >= Duration::from_secs(1), "{attempt}");
    }
    let key = identity(&delivery);
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery(&key), [run_id]);
    assert_eq!(ledger.requests_with_key(&key).len(), 3);
}

#[tokio::test]
async fn a_relayed_github_delivery_id_is_the_identity_on_every_attempt() {
    let server = server().await;
    server.inject(Fault::execute_then_close().on("POST", WEBHOOKS));
    let headers = relayed(&[
        ("x-request-id", "relay-attempt-1"),
        ("x-github-delivery", GITHUB_DELIVERY),
    ]);

    let delivery = client(&server)
        .deliver(TRIGGER, EVENT)
        .headers(headers)
        .send()
        .await
        .unwrap();

    assert!(delivery.is_duplicate(), "the retry was recognised");
    assert_eq!(delivery.attempts().len(), 2);
    assert_eq!(
        delivery.delivery_id().header(),
        DeliveryHeader::GitHubDelivery
    );
    assert_eq!(delivery.delivery_id().key().as_str(), GITHUB_DELIVERY);
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery(GITHUB_DELIVERY).len(), 1);
    assert_eq!(ledger.duplicates_for_delivery(GITHUB_DELIVERY), 1);
    assert_eq!(ledger.requests_to("POST", WEBHOOKS).len(), 2);
    assert!(
        ledger.requests_with_key(GITHUB_DELIVERY).is_empty(),
        "passed through as X-GitHub-Delivery, not rewritten as Idempotency-Key"
    );
    assert!(ledger.runs_for_delivery("relay-attempt-1").is_empty());
}

#[tokio::test]
async fn a_delivery_with_only_x_request_id_or_an_invalid_provider_id_is_refused_and_nothing_is_sent()
 {
    let server = server().await;
    let client = client(&server);

    for headers in [
        // X-Request-Id identifies one attempt and changes on retry: never a delivery ID.
        relayed(&[("x-request-id", "relay-attempt-1")]),
        relayed(&[("x-shopify-webhook-id", "has a space")]),
    ] {
        let error = client
            .deliver(TRIGGER, EVENT)
            .headers(headers)
            .send()
            .await
            .unwrap_err();
        assert_nothing_sent(&error, ErrorKind::InvalidInput, &server);
    }
}

#[tokio::test]
async fn the_legacy_organization_route_still_delivers() {
    let server = server().await;

    let delivery = client(&server)
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery("order-4711:legacy"))
        .legacy_org(DEMO_ORGANIZATION)
        .send()
        .await
        .unwrap();

    let run_id = run_id(&delivery);
    let key = identity(&delivery);
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery(&key), [run_id]);
    let legacy = format!("{WEBHOOKS}{DEMO_ORGANIZATION}/");
    assert_eq!(ledger.requests_to("POST", &legacy).len(), 1);
}

#[tokio::test]
async fn an_unknown_trigger_is_not_found_after_one_attempt() {
    let server = server().await;

    let error = refused(&client(&server), "trg_unknown_0000", EVENT).await;

    assert_stopped_at_once(&error, ErrorKind::NotFound, &server);
    assert!(!error.to_string().contains("trg_unknown_0000"), "{error}");
    assert_eq!(server.ledger().total_runs(), 0);
}

#[tokio::test]
async fn a_deactivated_trigger_is_not_found_after_one_attempt() {
    let server = server().await;
    server.put_trigger(TriggerSeed::demo().inactive());

    let error = refused(&client(&server), TRIGGER, EVENT).await;

    assert_stopped_at_once(&error, ErrorKind::NotFound, &server);
    assert_eq!(server.ledger().requests_to("POST", WEBHOOKS).len(), 1);
}

#[tokio::test]
async fn a_body_over_the_servers_limit_is_payload_too_large_after_one_attempt() {
    let server = support::server_where(|limits| limits.webhook_body_limit = 16).await;

    let error = refused(&client(&server), TRIGGER, EVENT).await;

    assert_stopped_at_once(&error, ErrorKind::PayloadTooLarge, &server);
    assert_eq!(error.status().map(|s| s.as_u16()), Some(413));
    assert_eq!(server.ledger().total_runs(), 0);
}

#[tokio::test]
async fn a_body_the_runtime_cannot_process_is_unprocessable_after_one_attempt() {
    let server = server().await;

    let error = refused(&client(&server), TRIGGER, b"not json").await;

    assert_stopped_at_once(&error, ErrorKind::Unprocessable, &server);
    assert_eq!(server.ledger().total_runs(), 0);
}

#[tokio::test]
async fn an_unsupported_trigger_authentication_is_unprocessable_after_one_attempt() {
    let server = server().await;
    server.put_trigger(TriggerSeed::demo().unsupported_auth());

    let error = refused(&client(&server), TRIGGER, EVENT).await;

    assert_stopped_at_once(&error, ErrorKind::Unprocessable, &server);
    assert_eq!(server.ledger().total_runs(), 0);
}

#[tokio::test]
async fn a_token_without_the_webhooks_scope_is_forbidden_after_one_attempt() {
    let (server, client) = support::scoped(&[Scope::ApiRead]).await;

    let error = refused(&client, TRIGGER, EVENT).await;

    assert_stopped_at_once(&error, ErrorKind::Forbidden, &server);
    assert_eq!(server.ledger().total_runs(), 0);
}

#[tokio::test]
async fn a_webhook_unauthorized_stops_at_once_without_a_token_exchange() {
    let server = server().await;
    server.inject(
        Fault::respond(401)
            .body(r#"{"error":"Unauthorized"}"#)
            .on("POST", WEBHOOKS),
    );

    let error = refused(&client(&server), TRIGGER, EVENT).await;

    assert_stopped_at_once(&error, ErrorKind::Unauthorized, &server);
    let ledger = server.ledger();
    assert_eq!(ledger.tokens_issued(), 1, "no re-exchange for Unauthorized");
    assert_eq!(ledger.total_runs(), 0);
}

#[tokio::test]
async fn missing_credentials_is_exchanged_once_and_retried_with_the_same_id() {
    let server = server().await;
    server.inject(Fault::expired_token().on("POST", WEBHOOKS));

    let delivery = deliver(&client(&server), "order-4711:expired").await;

    let run_id = run_id(&delivery);
    assert_eq!(statuses(delivery.attempts()), [Some(401), Some(202)]);
    assert_eq!(delivery.attempts()[0].wait_reason(), WaitReason::Reexchange);
    let key = identity(&delivery);
    let ledger = server.ledger();
    assert_eq!(ledger.tokens_issued(), 2);
    assert_eq!(ledger.requests_with_key(&key).len(), 2);
    assert_eq!(ledger.runs_for_delivery(&key), [run_id]);
}

#[tokio::test]
async fn a_body_over_the_client_limit_is_refused_and_nothing_is_sent() {
    let server = server().await;
    let oversize = vec![b' '; DEFAULT_WEBHOOK_BODY_LIMIT + 1];

    let error = client(&server)
        .deliver(TRIGGER, oversize)
        .delivery_id(delivery("order-4711:huge"))
        .send()
        .await
        .unwrap_err();

    assert_nothing_sent(&error, ErrorKind::PayloadTooLarge, &server);
}

#[tokio::test]
async fn a_configured_client_body_limit_is_enforced_before_sending() {
    let server = server().await;
    let client = support::demo(support::builder(&server).webhook_body_limit(EVENT.len() - 1));

    let error = client
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery("order-4711:limited"))
        .send()
        .await
        .unwrap_err();

    assert_nothing_sent(&error, ErrorKind::PayloadTooLarge, &server);
}
