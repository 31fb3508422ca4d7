//! Safe retries for Hodoflow-style APIs.
//!
//! Networks drop answers. When a call times out the sender cannot tell whether it ran, and sending
//! it again could create a second resource or start a workflow twice. This crate makes the retry
//! safe: every attempt of an operation carries the same method, path, body bytes and
//! [`IdempotencyKey`] (or webhook [`DeliveryId`]); the documented retry matrix decides, per
//! [`Surface`], whether an answer is retried ([`Profile::verdict`]); waits follow [`Backoff`] (or a
//! [`Schedule`](schedule::Schedule) of your own) and never undercut the server's `Retry-After`;
//! a [`Budget`] caps attempts and elapsed time; tokens come from a
//! [`TokenExchanger`](auth::TokenExchanger) such as [`ClientCredentials`](auth::ClientCredentials).
//! Outcomes are typed ([`Delivery`](webhook::Delivery), [`Response`],
//! [`MethodAnswer`](modulify::MethodAnswer)) and so is the one [`Error`], which says whether the
//! operation [may have run](Error::may_have_run). A third API of this style is a [`Profile`] of
//! your own.
//!
//! Hodoflow's API is [`HodoflowClient`]'s; the same engine ([`RetryingClient`]) serves Modulify's
//! method API through [`ModulifyClient`], and, with features, an OpenMetrics exposition
//! (`metrics`) and a reqwest-middleware adapter (`middleware`). The durable outbox is the
//! `hodoflow-outbox` crate, built on this one's public API.
//!
//! The [`guide`] has a page per job (webhooks, signing, writes, Modulify, your own token
//! exchanger, budgets and scopes, fleet safety, metrics, the middleware, the retry matrix), each with examples that run against the embedded contract server.
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
//! use hodoflow_retry::{DeliveryId, HodoflowClient, IdempotencyKey, webhook::WebhookOutcome};
//!
//! let server = MockServer::start().await?;
//! let client = HodoflowClient::builder(server.base_url())
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
pub mod middleware;
pub mod profile;
#[cfg(test)]
mod proptests;
mod vendors;

pub use crate::core::auth::secret::Secret;
pub use crate::core::backoff::Backoff;
pub use crate::core::budget::Budget;
pub use crate::core::error::{Error, ErrorKind, Result};
pub use crate::core::key::{DeliveryId, IdempotencyKey};
pub use crate::core::matrix::Verdict;
pub use crate::core::stats::{Retries, Stats};
pub use client::{ClientBuilder, RetryingClient};
pub use profile::Profile;
pub use vendors::Surface;
pub use vendors::hodoflow::client::HodoflowClient;
pub use vendors::hodoflow::outcome::Response;
pub use vendors::modulify::client::ModulifyClient;

pub mod hodoflow {
    //! Hodoflow's API beside [`HodoflowClient`](crate::HodoflowClient): its builder, and a
    //! JSON:API or GraphQL call before it is sent. Webhook deliveries are in
    //! [`webhook`](crate::webhook).
    pub use crate::vendors::hodoflow::builder::HodoflowBuilder;
    pub use crate::vendors::hodoflow::call::Call;
    pub use crate::vendors::hodoflow::limits::TRIGGER_LIMIT;
}

pub mod webhook {
    //! Webhook deliveries: what [`HodoflowClient::deliver`](crate::HodoflowClient::deliver)
    //! sends and returns, the workflow runs it starts, and how a delivery is signed.
    pub use crate::core::key::DeliveryHeader;
    pub use crate::core::signing::{MIN_SECRET_BYTES, SigningSecret};
    pub use crate::vendors::hodoflow::builder::DEFAULT_WEBHOOK_BODY_LIMIT;
    pub use crate::vendors::hodoflow::call::Delivering;
    pub use crate::vendors::hodoflow::outcome::{Delivery, WebhookOutcome};
    pub use crate::vendors::hodoflow::run::{FollowRun, RunState, WorkflowRun};
}

pub mod modulify {
    //! Modulify's method API beside [`ModulifyClient`](crate::ModulifyClient): a method call,
    //! its answer and outcome, and the catalogue of methods and their effects.
    pub use crate::vendors::modulify::builder::ModulifyBuilder;
    pub use crate::vendors::modulify::client::{
        CATALOGUE_REFRESH_MIN, Catalogue, MethodAnswer, MethodCall, ModulifyOutcome, Tool,
    };
    pub use crate::vendors::modulify::tables::Effect;
}

pub mod limit {
    //! The limits a client keeps beyond one call: the credential's rate budget, the adaptive
    //! retry budget, a trigger's window and pacing, the scope a server's signal closed, and the
    //! [`Fleet`] through which the processes of a fleet share them.
    pub use crate::core::limit::Refusal;
    pub use crate::core::limit::figures::{PacingSource, RouteLimit, RoutePacing};
    pub use crate::core::limit::gate::RateBudget;
    pub use crate::core::limit::retry_budget::{Admissions, RetryBudget, RetryBudgetBuilder};
    pub use crate::core::limit::scope::ClosedScope;
    pub use crate::core::limit::shared::{Fleet, FleetAsk, FleetFuture, Heard};
    pub use crate::core::stats::Holding;
}

pub mod text {
    //! Words from elsewhere (a server's, a database's, an error's) made safe to show or keep:
    //! every control and bidirectional character escaped, then bounded in bytes without
    //! splitting a character or a `<redacted>` marker. The outbox keeps a failed call's message
    //! through them.
    pub use crate::core::redact::{bound, escape};
}

pub mod auth {
    //! Tokens: the [`TokenExchanger`] a client asks for one, and the built-in OAuth
    //! client-credentials exchanger.
    pub use crate::core::auth::secret::AccessToken;
    pub use crate::core::auth::{ExchangeFuture, TokenExchanger};
    pub use crate::vendors::hodoflow::oauth::ClientCredentials;
}

pub mod schedule {
    //! Waits of your own between attempts: the [`Schedule`] trait and the adapters of the
    //! `backon` and `backoff` crates (features of the same names).
    #[cfg(feature = "backoff")]
    pub use crate::core::schedule::BackoffCrateSchedule;
    #[cfg(feature = "backon")]
    pub use crate::core::schedule::BackonSchedule;
    pub use crate::core::schedule::Schedule;
}

pub mod attempt {
    //! What each attempt of a call did, as its outcome or error carries it
    //! ([`Error::attempts`](crate::Error::attempts)): the status or transport failure, the
    //! `x-request-id`, and the wait after it and why.
    pub use crate::core::attempt::{Attempt, AttemptResult, TransportKind, WaitReason};
}

pub mod transport {
    //! The attempt transport a test plugs in instead of HTTP
    //! ([`ClientBuilder::transport`](crate::ClientBuilder::transport)), the [`Answer`] a
    //! matrix reads, and how much of it is read.
    pub use crate::core::answer::Answer;
    pub use crate::core::answer_limit::DEFAULT_ANSWER_LIMIT;
    pub use crate::core::transport::{AttemptFuture, AttemptTransport, Outgoing};
}

pub mod clock {
    //! The clock a client reads: tokio's by default, a manual one for tests.
    pub use crate::core::runtime::{Clock, ManualClock, TokioClock};
}

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
