//! Run with: `cargo run --example quickstart`
//!
//! The main job on the embedded contract server, with no setup: deliver an event
//! and follow its run, survive a lost 202 without a second run, and survive a
//! lost write answer without a second write. The server's ledger proves it.

use std::time::Duration;

use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN, Fault, MockServer};
use hodoflow_retry::{DeliveryId, IdempotencyKey, RetryingClient};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. A contract server on 127.0.0.1, seeded with a demo client and trigger.
    let server = MockServer::start().await?;

    // 2. A client with the demo credentials and the default budget (5 attempts, 60 s).
    let client = RetryingClient::builder(server.base_url())
        .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .poll_interval(Duration::from_millis(200))
        .build()?;

    // 3. Deliver an event with a delivery ID derived from the business event, then follow the run.
    let created = DeliveryId::new(IdempotencyKey::from_operation_id("order-4711:created"));
    let delivery = client
        .deliver(DEMO_TRIGGER_TOKEN, r#"{"order":4711,"event":"created"}"#)
        .delivery_id(created)
        .send()
        .await?;
    let run_id = delivery
        .run_id()
        .ok_or("an accepted delivery carries a run ID")?;
    println!("delivery order-4711:created -> {:?}", delivery.outcome());
    let run = client.follow_run(run_id).send().await?;
    println!(
        "  run {} -> {:?} after {} polls",
        run.id(),
        run.state(),
        run.polls()
    );

    // 4. The network loses the 202 of the next delivery after the server committed it.
    server.inject(Fault::execute_then_close().on("POST", "/api/v1/webhooks/"));
    let shipped = DeliveryId::new(IdempotencyKey::from_operation_id("order-4711:shipped"));
    let delivery = client
        .deliver(DEMO_TRIGGER_TOKEN, r#"{"order":4711,"event":"shipped"}"#)
        .delivery_id(shipped.clone())
        .send()
        .await?;
    println!("delivery order-4711:shipped -> {:?}", delivery.outcome());
    for attempt in delivery.attempts() {
        println!("  {attempt}");
    }
    let runs = server
        .ledger()
        .runs_for_delivery(shipped.key().as_str())
        .len();
    println!("  the server started {runs} run for it");

    // 5. The network loses the answer of a write after it executed.
    server.inject(Fault::execute_then_close().on("POST", "/api/json/"));
    let key = IdempotencyKey::from_operation_id("order-4711:create-invoice");
    let body = r#"{"data":{"type":"invoices","attributes":{"order":4711,"total":"99.00"}}}"#;
    let response = client
        .create("/api/json/v1/invoices", key.clone(), body)
        .send()
        .await?;
    println!(
        "write order-4711:create-invoice -> {} replayed={}",
        response.status(),
        response.replayed()
    );
    for attempt in response.attempts() {
        println!("  {attempt}");
    }
    let writes = server.ledger().writes_executed(key.as_str());
    println!("  the server executed it {writes} time");
    Ok(())
}
