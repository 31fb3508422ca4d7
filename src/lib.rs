//! Safe retries for Hodoflow-style APIs.
//!
//! Networks drop answers. When a call times out the sender cannot tell whether it ran, and sending
//! it again could create a second resource or start a workflow twice. This crate makes the retry
//! safe: every attempt of an operation carries the same method, path, body bytes and
//! [`IdempotencyKey`] (or webhook [`DeliveryId`]); the documented retry matrix decides, per
//! [`Surface`], whether an answer is retried ([`classify`]); waits follow [`Backoff`] and the
//! server's `Retry-After`; a [`Budget`] caps attempts and elapsed time; tokens come from a
//! [`TokenExchanger`] such as [`ClientCredentials`]. Outcomes are typed ([`Delivery`],
//! [`Response`]) and so is the one [`Error`], which says whether the operation
//! [may have run](Error::may_have_run).
//!
//! # Examples
//!
//! Fix the identity of an operation before its first send, from a stable business operation ID,
//! so that every retry, even one after a restart, repeats the same operation:
//!
//! ```
//! use hodoflow_retry::{DeliveryId, IdempotencyKey};
//!
//! let key = IdempotencyKey::from_operation_id("order-4711:create-invoice");
//! assert_eq!(key, IdempotencyKey::from_operation_id("order-4711:create-invoice"));
//! assert_eq!(key.to_header_value(), key.as_str());
//!
//! // A webhook delivery sends its identity as Idempotency-Key.
//! let delivery = DeliveryId::new(IdempotencyKey::from_operation_id("order-4711:shipped"));
//! assert_eq!(delivery.header().name(), "idempotency-key");
//!
//! // A caller's own key is checked before anything is sent.
//! let error = IdempotencyKey::new("").unwrap_err();
//! assert_eq!(error.to_string(), "invalid input: idempotency key is empty");
//! ```

#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

mod attempt;
mod auth;
mod backoff;
mod budget;
mod call;
mod classify;
mod client;
mod engine;
mod error;
mod key;
mod outcome;
mod redact;
mod request;
mod run;

pub use attempt::{Attempt, AttemptResult, TransportKind, WaitReason};
pub use auth::{AccessToken, ClientCredentials, ExchangeFuture, Secret, TokenExchanger};
pub use backoff::Backoff;
pub use budget::Budget;
pub use call::{Call, Delivering};
pub use classify::{Answer, Surface, Verdict, classify};
pub use client::{ClientBuilder, DEFAULT_WEBHOOK_BODY_LIMIT, RetryingClient};
pub use error::{Error, ErrorKind, Result};
pub use key::{DeliveryHeader, DeliveryId, IdempotencyKey};
pub use outcome::{Delivery, Response, WebhookOutcome};
pub use run::{FollowRun, RunState, WorkflowRun};
