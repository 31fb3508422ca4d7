//! Shared by the integration tests: a contract server on 127.0.0.1:0 and a client for it.

#![allow(dead_code, reason = "each test file uses a part of the support module")]

use std::time::Duration;

use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, Limits, MockServer, MockServerBuilder};
use hodoflow_retry::{Backoff, Budget, RetryingClient};

pub use hodoflow_mock::DEMO_TRIGGER_TOKEN as TRIGGER;

/// Millisecond backoff, so real-socket tests stay fast.
pub fn fast_backoff() -> Backoff {
    Backoff::new()
        .base(Duration::from_millis(5))
        .cap(Duration::from_millis(40))
}

/// A budget of `attempts` with room to spare in time.
pub fn budget(attempts: u32) -> Budget {
    Budget::new()
        .max_attempts(attempts)
        .max_elapsed(Duration::from_secs(20))
        .attempt_timeout(Duration::from_secs(5))
}

/// Limits with millisecond workflow runs.
pub fn fast_limits() -> Limits {
    Limits {
        run_queued_for: Duration::from_millis(20),
        run_running_for: Duration::from_millis(40),
        ..Limits::default()
    }
}

/// A server with the demo seeds and fast runs.
pub async fn server() -> MockServer {
    server_with(MockServer::builder().limits(fast_limits())).await
}

/// A server from `builder`.
pub async fn server_with(builder: MockServerBuilder) -> MockServer {
    builder
        .start()
        .await
        .expect("the contract server starts on 127.0.0.1:0")
}

/// A client of `server` with the demo credentials, fast backoff and a 5-attempt budget.
pub fn client(server: &MockServer) -> RetryingClient {
    client_with(server, budget(5))
}

/// A client of `server` with `budget`.
pub fn client_with(server: &MockServer, budget: Budget) -> RetryingClient {
    RetryingClient::builder(server.base_url())
        .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .backoff(fast_backoff())
        .budget(budget)
        .build()
        .expect("a valid client")
}
