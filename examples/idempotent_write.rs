//! Run with: `cargo run --example idempotent_write`
//!
//! JSON:API writes with an Idempotency-Key derived from the business operation:
//! a transient failure is retried with the same key, a replay is reported, and
//! a key reused for different work is a typed error, never a blind retry.

use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, Fault, MockServer};
use hodoflow_retry::{ErrorKind, HodoflowClient, IdempotencyKey};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = MockServer::start().await?;
    let client = HodoflowClient::builder(server.base_url())
        .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .build()?;

    // 1. The key comes from the operation, so a restart after a crash sends the same key.
    let key = IdempotencyKey::from_operation_id("tenant-7:project:launch-2026");
    let body = r#"{"data":{"type":"projects","attributes":{"name":"Launch 2026"}}}"#;

    // 2. The key store is briefly unavailable: 503 idempotency_unavailable, nothing written.
    server.inject(Fault::idempotency_unavailable().on("POST", "/api/json/"));
    let created = client
        .create("/api/json/v1/projects", key.clone(), body)
        .send()
        .await?;
    println!(
        "create -> {} after {} attempts",
        created.status(),
        created.attempts().len()
    );

    // 3. Sending the same operation again replays the stored answer; nothing runs twice.
    let again = client
        .create("/api/json/v1/projects", key.clone(), body)
        .send()
        .await?;
    println!(
        "same operation again -> {} replayed={}",
        again.status(),
        again.replayed()
    );
    println!(
        "  executions on the server: {}",
        server.ledger().writes_executed(key.as_str())
    );

    // 4. The same key with a different body is refused: reconcile, don't mint a new key blindly.
    let other = r#"{"data":{"type":"projects","attributes":{"name":"Something else"}}}"#;
    let error = client
        .create("/api/json/v1/projects", key, other)
        .send()
        .await
        .expect_err("a reused key is a conflict");
    assert_eq!(error.kind(), ErrorKind::KeyReused);
    println!("reused key -> {error}");
    Ok(())
}
