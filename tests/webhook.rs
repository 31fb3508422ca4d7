//! Webhook deliveries: a lost 202 is answered by `duplicate`, never a second run.

mod support;

use std::time::Duration;

use hodoflow_mock::Fault;
use hodoflow_retry::{DeliveryId, IdempotencyKey, WebhookOutcome};
use support::{TRIGGER, client, server};

const BODY: &[u8] = br#"{"order":4711,"event":"shipped"}"#;

fn id(event: &str) -> DeliveryId {
    DeliveryId::new(IdempotencyKey::from_operation_id(event))
}

#[tokio::test]
async fn accepts_a_first_delivery_with_its_run_id() {
    let server = server().await;
    let delivery = client(&server)
        .deliver(TRIGGER, BODY)
        .delivery_id(id("order-4711:shipped"))
        .send()
        .await
        .unwrap();

    let key = delivery.delivery_id().key().as_str().to_owned();
    let ledger = server.ledger();
    assert_eq!(delivery.attempts().len(), 1);
    assert_eq!(
        ledger.runs_for_delivery(&key),
        [delivery.run_id().unwrap().to_owned()]
    );
}

#[tokio::test]
async fn a_lost_202_is_retried_with_the_same_id_and_answered_duplicate_with_one_run() {
    let server = server().await;
    server.inject(Fault::execute_then_close().on("POST", "/api/v1/webhooks/"));

    let delivery = client(&server)
        .deliver(TRIGGER, BODY)
        .delivery_id(id("order-4711:lost"))
        .send()
        .await
        .unwrap();

    assert_eq!(delivery.outcome(), &WebhookOutcome::Duplicate);
    assert_eq!(delivery.attempts().len(), 2);
    let key = delivery.delivery_id().key().as_str().to_owned();
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
    server.inject(
        Fault::execute_then_delay(Duration::from_millis(400)).on("POST", "/api/v1/webhooks/"),
    );
    let budget = support::budget(3).attempt_timeout(Duration::from_millis(100));

    let delivery = client(&server)
        .deliver(TRIGGER, BODY)
        .delivery_id(id("order-4711:slow"))
        .budget(budget)
        .send()
        .await
        .unwrap();

    assert!(delivery.is_duplicate());
    let key = delivery.delivery_id().key().as_str().to_owned();
    assert_eq!(server.ledger().runs_for_delivery(&key).len(), 1);
    assert_eq!(delivery.attempts().len(), 2);
}
