//! Entry points for the fuzz targets of `fuzz/`, compiled only under `--cfg fuzzing` (which
//! cargo-fuzz sets): parsers that are private to the crate, reachable by a target without
//! becoming public API. Not for any other use.

use std::time::Duration;

use http::HeaderMap;

/// How long the `RateLimit` fields of `headers` ask the credential to send nothing
/// (`rate_limit_field.rs`).
pub fn rate_limit_exhausted_for(headers: &HeaderMap) -> Option<Duration> {
    crate::core::rate_limit_field::read(
        headers,
        Some(crate::vendors::hodoflow::tables::TRIGGER_POLICY),
        false,
    )
    .1
}

/// What the `"trigger"` policy of the `RateLimit-Policy` and `RateLimit` fields of `headers`
/// says (`rate_limit_field.rs`): its quota and window, and until when a spent window is held.
pub fn rate_limit_trigger_window(
    headers: &HeaderMap,
) -> (Option<(u32, Duration)>, Option<Duration>) {
    let (window, _) = crate::core::rate_limit_field::read(
        headers,
        Some(crate::vendors::hodoflow::tables::TRIGGER_POLICY),
        true,
    );
    (
        window.limit.map(|limit| (limit.requests(), limit.per())),
        window.spent_for,
    )
}

/// Reads the token endpoint's answer `body` with `status`, received now
/// (`vendors/hodoflow/oauth.rs`), as `ClientCredentials` does.
///
/// # Errors
///
/// As the exchange: a token-exchange error for an answer without a usable token.
pub fn token_answer(
    status: http::StatusCode,
    body: &[u8],
    secret: &str,
) -> crate::Result<crate::auth::AccessToken> {
    crate::vendors::hodoflow::oauth::read_token_answer(
        status,
        body,
        tokio::time::Instant::now(),
        &crate::Secret::new(secret),
    )
}

/// The client's token cache (`core/auth/cache.rs`) over an exchanger of the target's own.
#[derive(Debug, Clone)]
pub struct TokenCache(crate::core::auth::TokenCache);

impl TokenCache {
    /// A cache that asks `exchanger` for its tokens.
    pub fn new(exchanger: std::sync::Arc<dyn crate::auth::TokenExchanger>) -> Self {
        Self(crate::core::auth::TokenCache::new(exchanger))
    }

    /// A token's text, waited for at most `wait` from now; an exchange this call starts is
    /// bounded by `exchange_timeout`.
    ///
    /// # Errors
    ///
    /// The cache's: the last failed exchange, or no answer in time.
    pub async fn get(&self, wait: Duration, exchange_timeout: Duration) -> crate::Result<String> {
        let now = tokio::time::Instant::now();
        let wait = crate::core::auth::TokenWait {
            until: now.checked_add(wait).unwrap_or(now),
            exchange_timeout,
        };
        self.0
            .get(wait)
            .await
            .map(|token| token.expose().to_owned())
    }
}
