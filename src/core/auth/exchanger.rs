//! Where a token comes from: the object-safe [`TokenExchanger`], and the static token a
//! static-token API (Modulify) sends as it is.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::core::error::Result;

use crate::core::auth::secret::{AccessToken, Secret};

/// The future a [`TokenExchanger`] returns.
pub type ExchangeFuture<'a> = Pin<Box<dyn Future<Output = Result<AccessToken>> + Send + 'a>>;

/// Gets a fresh access token.
///
/// Object-safe, so a client can hold any exchanger as `Arc<dyn TokenExchanger>`. The client
/// calls it when it has no token, shortly before the token expires, and once after a 401.
/// A token that lives less than 1 s from the start of the exchange is sent only by the calls
/// that waited for it, and the exchange counts as failed: the next one waits the client's
/// shared backoff.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::auth::{AccessToken, ExchangeFuture, TokenExchanger};
///
/// /// Reads a token another process keeps up to date.
/// #[derive(Debug)]
/// struct FromVault;
///
/// impl TokenExchanger for FromVault {
///     fn exchange(&self) -> ExchangeFuture<'_> {
///         Box::pin(async {
///             let token = String::from("token-from-the-vault");
///             Ok(AccessToken::expiring_in(token, Duration::from_secs(300)))
///         })
///     }
/// }
/// ```
pub trait TokenExchanger: Send + Sync {
    /// Exchanges credentials for a new access token.
    ///
    /// Return an [`Error::token_exchange`](crate::Error::token_exchange) error when it fails,
    /// with the token endpoint's status when it answered
    /// ([`Error::with_status`](crate::Error::with_status)): a refusal (`400`, `401`) then fails
    /// every waiting call at once, not retryable, as the built-in exchanger's does. Never put a
    /// secret in it.
    fn exchange(&self) -> ExchangeFuture<'_>;

    /// The secrets this exchanger holds, such as a client secret: the client replaces them
    /// (whole, encoded, or a piece of 8 bytes or more) with `<redacted>` in everything it keeps
    /// of what a server said (an `x-request-id`, an error code, a run ID), as it does every
    /// access token it was issued. Asked once, when the client is built.
    ///
    /// Default: none. An exchanger that wraps another should return the inner one's.
    fn secrets(&self) -> Vec<Secret> {
        Vec::new()
    }
}

/// A shared exchanger, so the caller can keep a handle on what it gave the client.
impl<T: TokenExchanger + ?Sized> TokenExchanger for Arc<T> {
    fn exchange(&self) -> ExchangeFuture<'_> {
        (**self).exchange()
    }

    fn secrets(&self) -> Vec<Secret> {
        (**self).secrets()
    }
}

/// A static API token, such as Modulify's (`docs/wire-contract.md`, "Modulify"): no exchange. It
/// never expires, so it is sent as it is on every attempt, and the matrices of a static-token API
/// stop on a 401.
#[derive(Debug, Clone)]
pub(crate) struct StaticToken(pub(crate) Secret);

impl TokenExchanger for StaticToken {
    fn exchange(&self) -> ExchangeFuture<'_> {
        let token = AccessToken::new(self.0.clone(), None);
        Box::pin(std::future::ready(Ok(token)))
    }

    fn secrets(&self) -> Vec<Secret> {
        vec![self.0.clone()]
    }
}
