//! Run with: `cargo run --example modulify`
//!
//! Modulify (`docs/wire-contract.md`, "Modulify") on the embedded contract server: the catalogue
//! decides which calls carry a key; a lost answer is replayed and the message is sent once; a call
//! whose answer was over 1 MB is not run again, and the client is told to read the current state; a
//! key reused for other work is refused, never retried.

use hodoflow_mock::{DEMO_MODULIFY_TOKEN, Fault, MockServer};
use hodoflow_retry::{ErrorKind, IdempotencyKey, ModulifyClient};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = MockServer::start().await?;
    let modulify = ModulifyClient::builder(server.base_url())
        .bearer_token(DEMO_MODULIFY_TOKEN)
        .build()?;

    // 1. The catalogue, read once: which methods read, set a value, add or destroy.
    for tool in modulify.tools().await?.tools() {
        println!("{:<16} {}", tool.name(), tool.effect());
    }

    // 2. A message (a method that adds): the network loses the answer after the server sent it.
    server.inject(
        Fault::execute_then_close()
            .on("POST", "/v1/send_message")
            .times(1),
    );
    let key = IdempotencyKey::from_operation_id("order-4711:notify");
    let body = r#"{"projectId":"site_1","prompt":"Add a newsletter sign-up form to the footer."}"#;
    let sent = modulify
        .call("send_message", body)
        .key(key.clone())
        .send()
        .await?;
    println!(
        "send_message -> {} after {} attempts; the server ran it {} time(s)",
        sent.outcome(),
        sent.attempts().len(),
        server.ledger().modulify_executions(key.as_str())
    );

    // 3. A read goes without a key, and is retried as it is.
    let sites = modulify.call("list_sites", "{}").send().await?;
    println!("list_sites -> {} (key: {:?})", sites.outcome(), sites.key());

    // 4. A backup whose answer is over 1 MB, lost on the way: the repeat does not run it again,
    //    and has no answer to give back.
    server.inject(
        Fault::execute_then_close()
            .on("POST", "/v1/create_backup")
            .times(1),
    );
    let backup = modulify
        .call(
            "create_backup",
            r#"{"projectId":"site_1","answer_bytes":1100000}"#,
        )
        .operation_id("site-1:nightly-backup")
        .send()
        .await?;
    println!(
        "create_backup -> {} (answer kept: {}): read the current state",
        backup.outcome(),
        backup.answer_kept()
    );

    // 5. The same key for other work is refused with 422, once, never retried.
    let other = r#"{"projectId":"site_1","prompt":"Something else."}"#;
    match modulify.call("send_message", other).key(key).send().await {
        Err(e) if e.kind() == ErrorKind::KeyReused => println!("reused key -> {e}"),
        other => return Err(format!("expected key_reused, got {other:?}").into()),
    }
    Ok(())
}
