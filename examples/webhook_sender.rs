//! Run with: `cargo run --example webhook_sender`
//!
//! A sender service that relays provider events to a webhook trigger: the
//! provider's delivery header is the identity, budgets are set per client, and
//! an error says whether the event may have started a run.

use std::time::Duration;

use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN, Fault, MockServer};
use hodoflow_retry::{Budget, HodoflowClient};
use http::{HeaderMap, HeaderValue};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = MockServer::start().await?;
    let client = HodoflowClient::builder(server.base_url())
        .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .budget(
            Budget::new()
                .max_attempts(4)
                .max_elapsed(Duration::from_secs(10)),
        )
        .build()?;

    // 1. A relayed GitHub event: its X-GitHub-Delivery is the stable delivery ID.
    let mut relayed = HeaderMap::new();
    relayed.insert(
        "x-github-delivery",
        HeaderValue::from_static("72d3162e-cc78-11e3-81ab-4c9367dc0958"),
    );

    // 2. The trigger is briefly unavailable: 503 with Retry-After: 1, twice.
    server.inject(
        Fault::webhook_unavailable(1)
            .on("POST", "/api/v1/webhooks/")
            .times(2),
    );
    let delivery = client
        .deliver(DEMO_TRIGGER_TOKEN, r#"{"action":"opened","number":42}"#)
        .headers(relayed.clone())
        .send()
        .await?;
    println!("relayed delivery -> {:?}", delivery.outcome());
    for attempt in delivery.attempts() {
        println!("  {attempt}");
    }

    // 3. The same event relayed again (the provider retried): no second run.
    let again = client
        .deliver(DEMO_TRIGGER_TOKEN, r#"{"action":"opened","number":42}"#)
        .headers(relayed)
        .send()
        .await?;
    println!("relayed again -> {:?}", again.outcome());

    // 4. A permanent error stops at once; may_have_run says whether to reconcile.
    let mut other = HeaderMap::new();
    other.insert(
        "x-github-delivery",
        HeaderValue::from_static("another-event"),
    );
    let error = client
        .deliver("trg_unknown", "{}")
        .headers(other)
        .send()
        .await
        .expect_err("an unknown trigger is not found");
    println!(
        "unknown trigger -> {error} (kind {:?}, attempts {}, may have run: {})",
        error.kind(),
        error.attempts().len(),
        error.may_have_run()
    );
    Ok(())
}
