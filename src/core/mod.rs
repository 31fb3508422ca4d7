//! The mechanism, vendor-blind: what every API the SDK serves shares.
//!
//! A fixed request, one attempt's answer and the headers read from it (`Retry-After`,
//! `RateLimit`), the matrix lookup, the pure [`plan`] of a call (asked before and after each
//! attempt; after an answer it asks the pure [`decide`] step) and the [`engine`] that
//! interprets it, budgets, the one [`runtime`] (time and sleep), keys, errors, attempt records,
//! stats, OpenTelemetry and the transport; [`limit`] for every limit on sending, each asked for
//! a scope (the retry budget, the send rate, a route's window, the credential's gate, the
//! fleet's shared limits) and [`auth`] for tokens.
//!
//! The rule of this folder: nothing here names a vendor. It imports nothing from
//! `crate::vendors` (a test in `tests/layout.rs` fails on any such import), and it holds no
//! vendor's path, header value, status-code special case, limit or document number: a vendor
//! hands those in as data, a [`profile::SurfaceProfile`], read by the mechanism.

pub(crate) mod answer;
pub(crate) mod answer_limit;
pub(crate) mod ascii;
pub(crate) mod attempt;
pub(crate) mod auth;
pub(crate) mod backoff;
pub(crate) mod budget;
pub(crate) mod call_options;
pub(crate) mod classify;
pub(crate) mod decide;
pub(crate) mod endpoint;
pub(crate) mod engine;
pub(crate) mod engine_options;
pub(crate) mod error;
pub(crate) mod jitter;
pub(crate) mod key;
pub(crate) mod limit;
pub(crate) mod map;
pub(crate) mod matrix;
#[cfg(feature = "metrics")]
pub(crate) mod meter;
pub(crate) mod otel;
pub(crate) mod plan;
pub(crate) mod profile;
pub(crate) mod rate_limit_field;
pub(crate) mod redact;
pub(crate) mod request;
pub(crate) mod retry_after;
pub(crate) mod runtime;
pub(crate) mod schedule;
pub(crate) mod shared;
pub(crate) mod signing;
pub(crate) mod stats;
pub(crate) mod transport;
