//! Safe retries for Hodoflow-style APIs.
//!
//! Networks drop answers. When a call times out the sender cannot tell whether it ran, and sending
//! it again could create a second resource or start a workflow twice. This crate makes the retry
//! safe: every attempt of an operation carries the same method, path, body bytes and
//! [`IdempotencyKey`] (or webhook [`DeliveryId`]); the documented retry matrix decides, per
//! [`Surface`], whether an answer is retried ([`classify`]); waits follow [`Backoff`] (or a
//! [`Schedule`] of your own) and never undercut the server's `Retry-After`; a [`Budget`] caps
//! attempts and elapsed time; tokens come from a [`TokenExchanger`] such as
//! [`ClientCredentials`]. Outcomes are typed ([`Delivery`], [`Response`], [`MethodAnswer`]) and
//! so is the one [`Error`], which says whether the operation [may have run](Error::may_have_run).
//!
//! The same engine serves Modulify's method API through [`ModulifyClient`], and, with features,
//! a durable outbox (`outbox-sqlite`, `outbox-postgres`), an OpenMetrics exposition (`metrics`)
//! and a reqwest-middleware adapter (`middleware`).
//!
//! The [`guide`] has a page per job (webhooks, signing, writes, Modulify, your own token
//! exchanger, budgets and scopes, fleet safety, the outbox, metrics, the middleware, the retry
//! matrix), each with examples that run against the embedded contract server.
//!
//! # Examples
//!
//! Deliver an event to a webhook trigger, here on the embedded contract server whose network
//! loses the first answer after the server committed it. The retry carries the same delivery ID,
//! so the server answers `duplicate` and starts no second run:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN, Fault, MockServer};
//! use hodoflow_retry::{DeliveryId, IdempotencyKey, RetryingClient, WebhookOutcome};
//!
//! let server = MockServer::start().await?;
//! let client = RetryingClient::builder(server.base_url())
//!     .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
//!     .build()?;
//!
//! server.inject(Fault::execute_then_close().on("POST", "/api/v1/webhooks/"));
//! let id = DeliveryId::new(IdempotencyKey::from_operation_id("order-4711:shipped"));
//! let delivery = client
//!     .deliver(DEMO_TRIGGER_TOKEN, r#"{"order":4711}"#)
//!     .delivery_id(id.clone())
//!     .send()
//!     .await?;
//!
//! assert_eq!(delivery.outcome(), &WebhookOutcome::Duplicate);
//! assert_eq!(delivery.attempts().len(), 2);
//! assert_eq!(server.ledger().runs_for_delivery(id.key().as_str()).len(), 1);
//! # Ok(())
//! # }
//! ```
//!
//! Fix the identity of an operation before its first send, from a stable business operation ID,
//! so that every retry, even one after a restart, repeats the same operation:
//!
//! ```
//! use hodoflow_retry::{DeliveryId, IdempotencyKey};
//!
//! let key = IdempotencyKey::from_operation_id("order-4711:create-invoice");
//! assert_eq!(key, IdempotencyKey::from_operation_id("order-4711:create-invoice"));
//!
//! // A webhook delivery sends its identity as Idempotency-Key.
//! let delivery = DeliveryId::new(IdempotencyKey::from_operation_id("order-4711:shipped"));
//! assert_eq!(delivery.header().name(), "idempotency-key");
//!
//! // A caller's own key is checked before anything is sent.
//! let error = IdempotencyKey::new("").unwrap_err();
//! assert_eq!(error.to_string(), "invalid input: idempotency key is empty");
//! ```
//!
//! # Tracing
//!
//! Each operation is a span `hodoflow_retry.request`, each attempt a child span
//! `hodoflow_retry.attempt` ending in an event (status or transport error, `x-request-id`,
//! verdict, wait and its reason), with OpenTelemetry's HTTP client attribute names where they
//! have one; `cargo run --example opentelemetry` exports them. A second 401 after a re-exchange is
//! an error-level event: alert on it. No bearer token, client secret, trigger token, signing
//! secret or body is recorded at any level.

#![deny(missing_docs)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod core;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
pub mod guide;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "middleware")]
mod middleware;
#[cfg(feature = "outbox")]
#[cfg_attr(
    not(any(feature = "outbox-sqlite", feature = "outbox-postgres")),
    allow(
        dead_code,
        unused_imports,
        reason = "the helpers the stores share serve a backend: `outbox` alone builds the core (as the fuzz targets do)"
    )
)]
pub mod outbox;
pub mod profile;
#[cfg(test)]
mod proptests;
mod vendors;

pub use crate::core::answer::Answer;
pub use crate::core::answer_limit::DEFAULT_ANSWER_LIMIT;
pub use crate::core::attempt::{Attempt, AttemptResult, TransportKind, WaitReason};
pub use crate::core::auth::secret::{AccessToken, Secret};
pub use crate::core::auth::{ExchangeFuture, TokenExchanger};
pub use crate::core::backoff::Backoff;
pub use crate::core::budget::Budget;
pub use crate::core::error::{Error, ErrorKind, Result};
pub use crate::core::key::{DeliveryHeader, DeliveryId, IdempotencyKey};
pub use crate::core::limit::figures::{PacingSource, TriggerLimit, TriggerPacing};
pub use crate::core::limit::gate::RateBudget;
pub use crate::core::limit::retry_budget::{RetryBudget, RetryBudgetBuilder};
pub use crate::core::limit::scope::ClosedScope;
pub use crate::core::matrix::Verdict;
pub use crate::core::runtime::{Clock, ManualClock, TokioClock};
#[cfg(feature = "backoff")]
pub use crate::core::schedule::BackoffCrateSchedule;
#[cfg(feature = "backon")]
pub use crate::core::schedule::BackonSchedule;
pub use crate::core::schedule::Schedule;
pub use crate::core::signing::{MIN_SECRET_BYTES, SigningSecret};
pub use crate::core::stats::{Retries, Stats};
pub use crate::core::transport::{AttemptFuture, AttemptTransport, Outgoing};
pub use client::{ClientBuilder, DEFAULT_WEBHOOK_BODY_LIMIT, RetryingClient};
#[cfg(feature = "middleware")]
pub use middleware::{RetryMiddleware, RetryMiddlewareBuilder, RetryReport};
pub use profile::Profile;
pub use vendors::hodoflow::call::{Call, Delivering};
pub use vendors::hodoflow::oauth::ClientCredentials;
pub use vendors::hodoflow::outcome::{Delivery, Response, WebhookOutcome};
pub use vendors::hodoflow::run::{FollowRun, RunState, WorkflowRun};
pub use vendors::modulify::client::{
    CATALOGUE_REFRESH_MIN, Catalogue, MethodAnswer, MethodCall, ModulifyClient, ModulifyOutcome,
    Tool,
};
pub use vendors::modulify::tables::Effect;
pub use vendors::{Surface, classify};

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
