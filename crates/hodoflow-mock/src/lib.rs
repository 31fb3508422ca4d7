//! A contract server for Hodoflow-style APIs, faithful to the vendors' pages and
//! `docs/wire-contract.md`, built to prove retries.
//!
//! It serves the token exchange, JSON:API reads and Idempotency-Key guarded
//! writes, workflow runs, GraphQL `factQuery` and webhook triggers. Faults are
//! injected per request ([`Fault`]): an answer without execution, a connection
//! closed before or after the commit, delays, an expired token. The
//! [`Ledger`] counts executions apart from requests, so a test can prove that
//! a retried write ran once and a retried delivery started one run. Every
//! window runs on an injectable [`Clock`].
//!
//! **Modulify** (Modulify's "Idempotency and retries"), a second API with a related but different
//! contract, is served on the same port under `/v1/`: `POST /v1/<method>` and the catalogue `GET
//! /v1/tools`, static bearer tokens ([`DEMO_MODULIFY_TOKEN`], [`ModulifyTokenSeed`]), keys per
//! token that keep only successes, and the same faults and ledger. `src/modulify/mod.rs` documents
//! the order of its checks and the body conventions of its reference methods; [`ToolSeed`] adds
//! methods to its catalogue.
//!
//! # Examples
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use hodoflow_mock::{Fault, MockServer};
//!
//! let server = MockServer::start().await?;
//! // The next delivery commits, then its answer is lost.
//! server.inject(Fault::execute_then_close().on("POST", "/api/v1/webhooks/"));
//! // ... deliver with the SDK, then read what really happened:
//! assert_eq!(server.ledger().total_runs(), 0);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

mod auth;
mod clock;
mod config;
mod control;
mod fault;
mod gate;
mod goaway;
mod graphql;
mod idempotency;
mod jsonapi;
mod ledger;
mod modulify;
mod rate;
mod redact;
mod reply;
mod runs;
mod server;
mod signature;
mod state;
mod stores;
mod webhook;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{
    ClientSeed, DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_MODULIFY_TOKEN, DEMO_ORGANIZATION,
    DEMO_TRIGGER_TOKEN, Limits, ModulifyTokenSeed, RunOutcome, Scope, TriggerSeed,
};
pub use fault::{Fault, FaultAction, Firing};
pub use ledger::{ExchangeRecord, Ledger, RequestRecord, SignedRecord};
pub use modulify::ToolSeed;
pub use redact::redact_path;
pub use server::{MockServer, MockServerBuilder};
pub use signature::{SignatureVerdict, TOLERANCE as SIGNATURE_TOLERANCE, sign_delivery};
pub use webhook::DELIVERY_HEADERS;

/// Locks a store; a panic elsewhere does not poison the server for later requests.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
