//! Run with: `cargo run --example custom_exchanger`
//!
//! Plug your own token source into the client: here an exchanger that fetches
//! the client secret from a (pretend) secret store before each exchange. The
//! client caches the token, refreshes it before expiry, and re-exchanges once
//! on a 401, sharing one exchange between concurrent callers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, Fault, MockServer};
use hodoflow_retry::{
    HodoflowClient, Secret,
    auth::{ClientCredentials, ExchangeFuture, TokenExchanger},
};

/// Reads the secret from a store each time, then exchanges client credentials.
struct VaultExchanger {
    base_url: String,
    exchanges: AtomicU32,
}

impl VaultExchanger {
    fn secret_from_store(&self) -> Secret {
        // A real sender would read its secret manager here.
        Secret::new(DEMO_CLIENT_SECRET)
    }
}

impl TokenExchanger for VaultExchanger {
    fn exchange(&self) -> ExchangeFuture<'_> {
        Box::pin(async move {
            self.exchanges.fetch_add(1, Ordering::Relaxed);
            let credentials =
                ClientCredentials::new(&self.base_url, DEMO_CLIENT_ID, self.secret_from_store())?;
            credentials.exchange().await
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = MockServer::start().await?;
    let exchanger = Arc::new(VaultExchanger {
        base_url: server.base_url(),
        exchanges: AtomicU32::new(0),
    });
    let client = HodoflowClient::builder(server.base_url())
        .exchanger(exchanger.clone())
        .build()?;

    // The token expires under the next read: one re-exchange, one retry.
    server.inject(Fault::expired_token().on("GET", "/api/json/"));
    let response = client.get("/api/json/v1/projects").send().await?;
    println!(
        "read -> {} after {} attempts",
        response.status(),
        response.attempts().len()
    );
    println!("exchanges: {}", exchanger.exchanges.load(Ordering::Relaxed));
    Ok(())
}
