//! What every clone of a client shares, and every call it makes reads: the base URL, the
//! sender, the engine (token cache, gate, retry budget, trigger limiter, stats), the default
//! policy and the surface limits.
//!
//! A call holds a reference to this, not to the client, so the calls, the run follower and the
//! client depend on it and not on each other.

use std::time::Duration;

use crate::core::engine::{Engine, Policy};
use crate::core::signing::Signer;
use crate::core::transport::Sender;

/// A client's shared state, behind the `Arc` every clone holds.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) base: reqwest::Url,
    /// Every attempt of the client's calls goes out through it.
    pub(crate) http: Sender,
    pub(crate) engine: Engine,
    pub(crate) policy: Policy,
    pub(crate) webhook_body_limit: usize,
    pub(crate) poll_interval: Duration,
    /// The secrets every delivery is signed with, unless it sets its own.
    pub(crate) signer: Option<Signer>,
}
