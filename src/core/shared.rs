//! What every clone of a client shares, and every call it makes reads: the base URL, the
//! sender, the engine (token cache, gate, retry budget, route windows, stats) and the default
//! policy.
//!
//! A call holds a reference to this, not to the client, so the calls, the run follower and the
//! client depend on it and not on each other.

use std::sync::Arc;

use crate::core::engine::{Engine, Policy};
use crate::core::request::RouteUrls;
use crate::core::transport::Sender;

/// A client's shared state, behind the `Arc` every clone holds.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) base: reqwest::Url,
    /// The URLs of the routes its calls sent to lately.
    pub(crate) routes: RouteUrls,
    /// Every attempt of the client's calls goes out through it.
    pub(crate) http: Sender,
    pub(crate) engine: Engine,
    /// The policy of every call that changes none of it.
    pub(crate) policy: Arc<Policy>,
}
