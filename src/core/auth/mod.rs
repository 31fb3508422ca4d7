//! Bearer tokens: where they come from, and how one token is shared.
//!
//! A [`TokenExchanger`] gets a token; a vendor may ship a ready one (Hodoflow's OAuth2
//! client-credentials grant, `vendors/hodoflow/oauth.rs`). The engine keeps the token in a cache
//! that refreshes it shortly before it expires and lets concurrent callers share one exchange:
//! after a burst of 401 answers, only the first caller exchanges, and the rest use its new token
//! (Hodoflow's "Idempotency and retries": "discard cached token, exchange, retry once"). A failing
//! token endpoint is kept quiet: one exchange at a time, then a backoff shared by every caller; so
//! is one whose tokens expire at once, as each such token counts as a failed exchange (see
//! [`TokenCache`]).
//!
//! One file per idea: `secret.rs` (the secrets that never print), `exchanger.rs` (the trait,
//! and the static token), `cache.rs` (the shared token).
//!
//! Secrets hygiene is manual and happens here: [`Secret`] and [`AccessToken`] print `<redacted>`
//! in `Debug` and `Display`, a failed exchange never quotes the secret or the token endpoint's
//! body, and nothing in this module logs.

mod cache;
mod exchanger;
pub(crate) mod secret;

pub(crate) use cache::{CachedToken, TokenCache, TokenWait};
pub(crate) use exchanger::StaticToken;
pub use exchanger::{ExchangeFuture, TokenExchanger};
