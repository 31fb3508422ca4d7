//! The vendors: one folder per API the SDK serves, each to be read beside its documentation.
//!
//! A vendor's folder holds everything its documentation fixes: the literal retry-matrix tables (as
//! [`SurfaceProfile`]s, the shape `core/` reads), its routes and request builders, its client
//! methods, its auth scheme, how its outcomes and replays are read, and its limits:
//! `hodoflow/` and `modulify/` (their pages, and the wire details the SDK assumes, are in
//! `docs/wire-contract.md`); `neutral.rs` holds the vendor-neutral table of RFC 9110's idempotent
//! methods for paths no profile claims.
//!
//! The mechanism in `core/` takes a [`SurfaceProfile`] and reads its fields; it never names a
//! vendor or matches on a surface, and it imports nothing from here (`tests/layout.rs`). A
//! user's third API needs nothing here: [`Profile::builder`](crate::Profile::builder) fills in
//! the same [`SurfaceProfile`] from public items (`examples/custom_vendor.rs`), and
//! [`Surface::profile`] is the only place that maps a public surface to a built-in vendor's
//! data.
//!
//! Choices a reader might not expect, and why:
//! - `SurfaceProfile` stays crate-private behind the public [`Profile`](crate::Profile) handle
//!   and its builder: a profile's fields can change without a semver break, and the built-in
//!   tables stay statics.
//! - [`IdempotencyKey::new`](crate::IdempotencyKey::new) still refuses keys outside 1 to 255
//!   visible ASCII, a documented public contract that both vendors accept; the profile's
//!   `KeyRules` are checked again at send time, where a vendor with a stricter rule would refuse
//!   a key.
//! - The outbox (the `hodoflow-outbox` crate) knows the vendors through their public clients
//!   only: each vendor's checks of a request it keeps to send later are public associated
//!   functions (`HodoflowClient::check_write`, `ModulifyClient::check_method`), so no vendor
//!   knows the outbox.
//! - `RouteLimit` (one `{requests, per}`) is `core/limit/figures.rs`, apart from the
//!   trigger's limiter (`core/limit/window.rs`): the `RateLimit` parser and the stats read it,
//!   and the limiter reads them.
//! - `decide`'s tests are `decided.rs` here, beside the tables they walk: `core/` knows none.

use std::fmt;

#[cfg(test)]
use crate::core::matrix::Rule;
use crate::core::profile::SurfaceProfile;

#[cfg(test)]
mod classify;
#[cfg(test)]
mod decided;
pub(crate) mod hodoflow;
pub(crate) mod modulify;
pub(crate) mod neutral;

#[cfg(test)]
pub(crate) use classify::classify;

/// The surface of `method` on `path` as an adapter meets a request it did not build (see the
/// table of [`RetryMiddleware`](crate::middleware::RetryMiddleware)): the vendor whose routes claim the
/// path, else the neutral table; `None` for a request sent once. `keyed`: the caller gave an
/// `Idempotency-Key`.
#[cfg(feature = "middleware")]
pub(crate) fn surface_of(method: &http::Method, path: &str, keyed: bool) -> Option<Surface> {
    match hodoflow::routes::surface_of(method, path) {
        Some(surface) => Some(surface),
        None => neutral::surface(method, keyed),
    }
}

/// An API surface with a retry matrix of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Surface {
    /// JSON:API unsafe writes: POST, PUT, PATCH and DELETE under `/api/json`, with an
    /// `Idempotency-Key` (Hodoflow's "Idempotency and retries").
    JsonApiWrite,
    /// Webhook deliveries to `/api/v1/webhooks/<token>`, with a delivery ID (Hodoflow's webhook
    /// sender guide).
    Webhook,
    /// Reads: GET and HEAD, naturally repeatable, without a key (Hodoflow's "Idempotency and
    /// retries").
    Read,
    /// GraphQL `factQuery`: read-only, without a key and without response replay (Hodoflow's
    /// "Idempotency and retries").
    GraphQl,
    /// Modulify method calls, `POST /v1/<method>` (Modulify's "Idempotency and retries"): with an
    /// `Idempotency-Key` unless the catalogue says the method only reads.
    Modulify,
    /// An idempotent method of RFC 9110 (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) on a path no
    /// profile claims, as the reqwest-middleware adapter meets it: retried on no answer, 429
    /// and 5xx, without a key.
    IdempotentMethod,
    /// Any other method on a path no profile claims, with the caller's `Idempotency-Key`: the
    /// same retries, that key on every attempt. Without a key such a request is sent once.
    CallerKeyed,
}

impl Surface {
    /// The Hodoflow surfaces (`docs/wire-contract.md`).
    pub const HODOFLOW: [Surface; 4] = [
        Surface::JsonApiWrite,
        Surface::Webhook,
        Surface::Read,
        Surface::GraphQl,
    ];

    /// Every surface of every profile, each with a matrix of its own.
    pub const fn all() -> &'static [Surface] {
        &[
            Surface::JsonApiWrite,
            Surface::Webhook,
            Surface::Read,
            Surface::GraphQl,
            Surface::Modulify,
            Surface::IdempotentMethod,
            Surface::CallerKeyed,
        ]
    }

    /// A stable snake_case name for logs, such as `"json_api_write"`.
    pub const fn as_str(self) -> &'static str {
        self.profile().name
    }

    /// Whether requests of this surface carry an idempotency key or delivery ID. For
    /// [`Surface::Modulify`] the catalogue decides per method: every method but a read-only one
    /// carries a key, so this is true.
    pub const fn sends_key(self) -> bool {
        self.profile().sends_key
    }

    /// The profile of this surface: the one map from a surface to its vendor's data.
    pub(crate) const fn profile(self) -> &'static SurfaceProfile {
        match self {
            Self::JsonApiWrite => &hodoflow::tables::JSON_API_WRITE,
            Self::Webhook => &hodoflow::tables::WEBHOOK,
            Self::Read => &hodoflow::tables::READ,
            Self::GraphQl => &hodoflow::tables::GRAPHQL,
            Self::Modulify => &modulify::tables::CALL,
            Self::IdempotentMethod => &neutral::IDEMPOTENT_METHOD,
            Self::CallerKeyed => &neutral::CALLER_KEYED,
        }
    }

    /// This surface's retry matrix.
    #[cfg(test)]
    pub(crate) const fn rules(self) -> &'static [Rule] {
        self.profile().rules.rows()
    }
}

impl fmt::Display for Surface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
