//! Bearer tokens: where they come from, and how one token is shared.
//!
//! A [`TokenExchanger`] gets a token; [`ClientCredentials`] is a ready one for the OAuth2
//! client-credentials grant at `/oauth/token`. The engine keeps the token in a cache that
//! refreshes it shortly before it expires and lets concurrent callers share one exchange: after a
//! burst of 401 answers, only the first caller exchanges, and the rest use its new token
//! (document 000: "discard cached token, exchange, retry once"). A failing token endpoint is
//! kept quiet: one exchange at a time, then a backoff shared by every caller (see
//! [`TokenCache`]).
//!
//! Secrets hygiene is manual and happens here: [`Secret`] and [`AccessToken`] print `<redacted>`
//! in `Debug` and `Display`, a failed exchange never quotes the secret or the token endpoint's
//! body, and nothing in this module logs.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::{HeaderValue, StatusCode};
use serde_json::Value;
use tokio::time::Instant;

use crate::answer_limit::{BodyRead, TOKEN_ANSWER_LIMIT, read_body};
use crate::attempt::TransportKind;
use crate::backoff::parse_retry_after;
use crate::clock::wall_now;
use crate::endpoint;
use crate::error::{Error, Result};
use crate::jitter::Jitter;
use crate::profile::hodoflow::TOKEN_PATH;

/// The most a token is refreshed ahead of its expiry.
const MAX_REFRESH_SKEW: Duration = Duration::from_secs(30);

/// The shortest access token [`ClientCredentials`] accepts: a shorter one is guessable, and
/// would be redacted out of ordinary words (a token `ok` in every `"outcome":"ok"`).
pub(crate) const MIN_TOKEN_LEN: usize = 8;

/// A secret string, such as a client secret or a bearer token.
///
/// `Debug` and `Display` print `<redacted>`; only [`Secret::expose`] gives the value.
///
/// # Examples
///
/// ```
/// use hodoflow_retry::Secret;
///
/// let secret = Secret::new("s3cr3t");
/// assert_eq!(format!("{secret} {secret:?}"), "<redacted> <redacted>");
/// assert_eq!(secret.expose(), "s3cr3t");
/// ```
#[derive(Clone)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(Arc::from(value.into()))
    }

    /// The secret value. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self::new(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

/// A bearer token and when it expires. `Debug` prints the token as `<redacted>`.
#[derive(Debug, Clone)]
pub struct AccessToken {
    secret: Secret,
    expires_at: Option<Instant>,
}

impl AccessToken {
    /// A token that expires at `expires_at`, or that is only replaced after a 401 when `None`.
    pub fn new(secret: impl Into<Secret>, expires_at: Option<Instant>) -> Self {
        Self {
            secret: secret.into(),
            expires_at,
        }
    }

    /// A token that expires `lifetime` from now, as an `expires_in` answer says.
    pub fn expiring_in(secret: impl Into<Secret>, lifetime: Duration) -> Self {
        Self::new(secret, Instant::now().checked_add(lifetime))
    }

    /// The token. Never log it.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// When the token expires, if known.
    pub fn expires_at(&self) -> Option<Instant> {
        self.expires_at
    }

    /// The `Authorization: Bearer …` value, marked sensitive.
    ///
    /// An [`ErrorKind::TokenExchange`](crate::ErrorKind::TokenExchange) error when the token
    /// cannot be sent in a header.
    pub(crate) fn authorization(&self) -> Result<HeaderValue> {
        let mut value = HeaderValue::from_str(&format!("Bearer {}", self.secret.expose()))
            .map_err(|_| Error::token_exchange("the token cannot be sent in a header"))?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// The future a [`TokenExchanger`] returns.
pub type ExchangeFuture<'a> = Pin<Box<dyn Future<Output = Result<AccessToken>> + Send + 'a>>;

/// Gets a fresh access token.
///
/// Object-safe, so a client can hold any exchanger as `Arc<dyn TokenExchanger>`. The client
/// calls it when it has no token, shortly before the token expires, and once after a 401.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::{AccessToken, ExchangeFuture, TokenExchanger};
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
    /// Return an [`ErrorKind::TokenExchange`](crate::ErrorKind::TokenExchange) error when it
    /// fails, and never put a secret in it.
    fn exchange(&self) -> ExchangeFuture<'_>;
}

/// A shared exchanger, so the caller can keep a handle on what it gave the client.
impl<T: TokenExchanger + ?Sized> TokenExchanger for Arc<T> {
    fn exchange(&self) -> ExchangeFuture<'_> {
        (**self).exchange()
    }
}

/// A static API token, such as Modulify's (document 004): no exchange. It never expires, so it
/// is sent as it is on every attempt, and the matrices of a static-token API stop on a 401.
#[derive(Debug, Clone)]
pub(crate) struct StaticToken(pub(crate) Secret);

impl TokenExchanger for StaticToken {
    fn exchange(&self) -> ExchangeFuture<'_> {
        let token = AccessToken::new(self.0.clone(), None);
        Box::pin(std::future::ready(Ok(token)))
    }
}

/// The OAuth2 client-credentials grant: `POST {base_url}/oauth/token`.
///
/// Redirects are not followed, so the client secret goes to the configured host only.
///
/// # Examples
///
/// ```
/// use hodoflow_retry::ClientCredentials;
///
/// let exchanger = ClientCredentials::new("https://hodoflow.example", "sender-1", "s3cr3t")?
///     .scope("webhooks");
/// assert!(!format!("{exchanger:?}").contains("s3cr3t"));
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ClientCredentials {
    http: reqwest::Client,
    token_url: reqwest::Url,
    client_id: String,
    client_secret: Secret,
    scope: Option<String>,
    timeout: Duration,
}

impl ClientCredentials {
    /// The default timeout of one exchange: 15 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

    /// An exchanger for the token endpoint under `base_url`.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) error when `base_url` is
    /// not an `http` or `https` URL with a host, or holds a user name, password, query or
    /// fragment, and a
    /// [`ErrorKind::TokenExchange`](crate::ErrorKind::TokenExchange) error when the HTTP client
    /// cannot be built.
    pub fn new(
        base_url: &str,
        client_id: impl Into<String>,
        client_secret: impl Into<Secret>,
    ) -> Result<Self> {
        let http = crate::transport::http_client(false).map_err(|source| {
            Error::token_exchange("the HTTP client could not be built").with_source(source)
        })?;
        Self::with_http_client(base_url, client_id, client_secret, http)
    }

    /// [`new`](Self::new) sending through `http`, without building a client of its own.
    pub(crate) fn with_http_client(
        base_url: &str,
        client_id: impl Into<String>,
        client_secret: impl Into<Secret>,
        http: reqwest::Client,
    ) -> Result<Self> {
        let base = endpoint::base_url(base_url, "the token base URL")?;
        let token_url = format!("{}{TOKEN_PATH}", base.as_str().trim_end_matches('/'));
        let token_url = endpoint::base_url(&token_url, "the token base URL")?;
        Ok(Self {
            http,
            token_url,
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            scope: None,
            timeout: Self::DEFAULT_TIMEOUT,
        })
    }

    /// Exchanges at this URL instead of `{base_url}/oauth/token`, for a token endpoint on
    /// another host.
    ///
    /// Default: `{base_url}/oauth/token`.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) error when `token_url` is
    /// not an `http` or `https` URL with a host, or holds a user name, password or fragment.
    pub fn token_url(mut self, token_url: &str) -> Result<Self> {
        self.token_url = endpoint::endpoint_url(token_url, "the token URL")?;
        Ok(self)
    }

    /// Asks for these scopes, space-separated (`"api_read api_write webhooks"`).
    ///
    /// Default: none, so the server grants the client's default scopes.
    #[must_use]
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Sets the timeout of one exchange.
    ///
    /// Default: 15 s.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends the exchange through this HTTP client, for example one with a custom root
    /// certificate. Configure it not to follow redirects.
    ///
    /// Default: a client of its own that follows no redirects and never retries by itself;
    /// with [`ClientBuilder::client_credentials`](crate::ClientBuilder::client_credentials),
    /// the client's HTTP client.
    #[must_use]
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = http;
        self
    }

    async fn request(&self) -> Result<AccessToken> {
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_id", self.client_id.as_str()),
            ("client_secret", self.client_secret.expose()),
        ];
        if let Some(scope) = &self.scope {
            form.push(("scope", scope.as_str()));
        }
        let unanswered = |source: reqwest::Error| {
            let kind = TransportKind::of(&source);
            Error::token_exchange(format_args!(
                "no answer from the token endpoint ({})",
                kind.as_str()
            ))
            .with_source(source)
        };
        let response = self
            .http
            .post(self.token_url.clone())
            .timeout(self.timeout)
            .form(&form)
            .send()
            .await
            .map_err(unanswered)?;
        let status = response.status();
        // A busy token endpoint's `Retry-After` lengthens the exchanges' shared backoff.
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|value| parse_retry_after(value, wall_now()));
        let body = match read_body(response, TOKEN_ANSWER_LIMIT).await {
            BodyRead::Whole(body) => body,
            BodyRead::Failed(source) => return Err(unanswered(source)),
            BodyRead::TooLarge => {
                return Err(Error::token_exchange(format_args!(
                    "the token endpoint answered {} with a body over {TOKEN_ANSWER_LIMIT} bytes",
                    status.as_u16()
                ))
                .with_status(status));
            }
        };
        read_token_answer(status, &body, Instant::now(), &self.client_secret)
            .map_err(|error| error.with_retry_after(retry_after))
    }
}

impl TokenExchanger for ClientCredentials {
    fn exchange(&self) -> ExchangeFuture<'_> {
        Box::pin(self.request())
    }
}

/// Reads the token endpoint's answer, received at `now`.
///
/// `200 {"access_token","token_type","expires_in","scope"}` is a token. Anything else is a
/// token-exchange error that quotes at most the OAuth error code, and never `secret`.
fn read_token_answer(
    status: StatusCode,
    body: &[u8],
    now: Instant,
    secret: &Secret,
) -> Result<AccessToken> {
    if status != StatusCode::OK {
        let code = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|answer| answer.get("error")?.as_str().map(str::to_owned))
            .filter(|code| is_oauth_error_code(code) && !code.contains(secret.expose()));
        let what = match code {
            Some(code) => format!("the token endpoint answered {} {code}", status.as_u16()),
            None => format!("the token endpoint answered {}", status.as_u16()),
        };
        return Err(Error::token_exchange(what).with_status(status));
    }

    let unreadable = |why: &str| {
        Error::token_exchange(format_args!("the token answer {why}")).with_status(status)
    };
    let answer: Value = serde_json::from_slice(body).map_err(|_| unreadable("is not JSON"))?;
    let token = answer
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| unreadable("has no access_token"))?;
    let token_type = answer.get("token_type").and_then(Value::as_str);
    if token_type.is_some_and(|kind| !kind.eq_ignore_ascii_case("bearer")) {
        return Err(unreadable("is not a Bearer token"));
    }
    let expires_at = match answer.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(expires_in) => {
            let seconds = seconds(expires_in).ok_or_else(|| unreadable("has a bad expires_in"))?;
            now.checked_add(Duration::from_secs(seconds))
        }
    };
    check_issued(token)?;
    let token = AccessToken::new(token, expires_at);
    token
        .authorization()
        .map_err(|_| Error::unusable_token("it cannot be sent in a header"))?;
    Ok(token)
}

/// An issued token that cannot work is refused at once, not exchanged again and again: a
/// control character (CR, LF, NUL, ESC …) cannot go in a header, and a token shorter than
/// [`MIN_TOKEN_LEN`] bytes is no secret. The error never shows the token.
fn check_issued(token: &str) -> Result<()> {
    if token.chars().any(char::is_control) {
        return Err(Error::unusable_token("it holds a control character"));
    }
    if token.len() < MIN_TOKEN_LEN {
        return Err(Error::unusable_token(format_args!(
            "it is shorter than {MIN_TOKEN_LEN} bytes"
        )));
    }
    Ok(())
}

/// `expires_in` as whole seconds: a non-negative number, or digits in a string.
fn seconds(value: &Value) -> Option<u64> {
    match value {
        Value::Number(number) => number.as_u64().or_else(|| {
            let seconds = number.as_f64().filter(|seconds| *seconds >= 0.0)?;
            // Truncation is the intent: a fraction of a second is dropped.
            Some(seconds.min(u64::MAX as f64) as u64)
        }),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// Whether `code` looks like an OAuth error code (`invalid_client`): short, and only the
/// characters RFC 6749 allows, so quoting it cannot leak a body.
fn is_oauth_error_code(code: &str) -> bool {
    (1..=64).contains(&code.len())
        && code
            .bytes()
            .all(|byte| byte.is_ascii_graphic() && byte != b'"' && byte != b'\\')
}

/// A token handed out by a [`TokenCache`], with the exchange it came from.
#[derive(Debug, Clone)]
pub(crate) struct CachedToken {
    token: AccessToken,
    generation: u64,
    /// `Bearer …`, built once per exchange; `None` when the token cannot be a header value.
    authorization: Option<HeaderValue>,
}

impl CachedToken {
    /// The token.
    #[cfg(test)]
    pub(crate) fn token(&self) -> &AccessToken {
        &self.token
    }

    /// The token's text, to redact from what a server echoes. Never log it.
    pub(crate) fn expose(&self) -> &str {
        self.token.secret().expose()
    }

    /// The `Authorization: Bearer …` value, marked sensitive.
    pub(crate) fn authorization(&self) -> Result<HeaderValue> {
        match &self.authorization {
            Some(value) => Ok(value.clone()),
            None => self.token.authorization(),
        }
    }
}

/// The first wait of the shared backoff after a failed exchange.
const EXCHANGE_BACKOFF_FIRST: Duration = Duration::from_millis(250);

/// The longest wait of the shared backoff (a longer `Retry-After` from the token endpoint is
/// still waited in full): the most a healed token endpoint waits for its next exchange.
const EXCHANGE_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How long a caller waits for a token, and how long an exchange it starts may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TokenWait {
    /// The caller gives up waiting (for an exchange in flight, or for the shared backoff to
    /// end) at this instant.
    pub(crate) until: Instant,
    /// The bound of an exchange this caller starts, its connect and body read included. It
    /// runs on without the caller, so other callers may use its token.
    pub(crate) exchange_timeout: Duration,
}

impl TokenWait {
    /// Wait and exchange for at most `limit` from now.
    #[cfg(test)]
    pub(crate) fn within(limit: Duration) -> Self {
        Self {
            until: Instant::now() + limit,
            exchange_timeout: limit,
        }
    }
}

/// Caches one token for every caller, refreshes it before it expires, and single-flights the
/// exchange: at most one is in flight, and every caller that needs a token waits for it.
///
/// An exchange that fails starts a backoff **shared by every caller**: no exchange starts
/// before it ends (250 ms, doubling to at most 5 s, drawn in its upper half; or the token
/// endpoint's `Retry-After` when longer). A caller whose time outlasts the backoff waits it
/// out and takes the next exchange's token; one whose time does not gets the last failure at
/// once. A failing token endpoint therefore sees about one exchange per backoff step, however
/// many callers need a token: 1,000 calls during a 10 s outage cost it about ten exchanges,
/// not one per caller round trip.
///
/// The exchange runs in a task of its own, bounded by the timeout of the caller that started
/// it: a caller that gives up does not cut it short for the others.
#[derive(Clone)]
pub(crate) struct TokenCache {
    inner: Arc<Inner>,
}

struct Inner {
    exchanger: Arc<dyn TokenExchanger>,
    /// The held token, mirrored from `State::held`, so the common case (a fresh token) is read
    /// without taking the state's lock.
    current: std::sync::RwLock<Option<Held>>,
    state: std::sync::Mutex<State>,
    /// Exchanges finished, mirrored from `State::finished`.
    finished: AtomicU64,
    /// Sent the count of finished exchanges when one finishes; callers waiting for the one in
    /// flight subscribe to it.
    done: tokio::sync::watch::Sender<u64>,
    /// Draws the shared backoff's jitter.
    jitter: Jitter,
}

#[derive(Default)]
struct State {
    held: Option<Held>,
    last_failure: Option<Error>,
    finished: u64,
    /// An exchange is in flight.
    in_flight: bool,
    /// Exchanges failed in a row.
    failures: u32,
    /// No exchange starts before this: the shared backoff after a failure.
    retry_at: Option<Instant>,
}

#[derive(Clone)]
struct Held {
    token: CachedToken,
    refresh_at: Option<Instant>,
}

impl Held {
    /// The token, if it need not be refreshed yet at `now`.
    fn fresh(&self, now: Instant) -> Option<CachedToken> {
        self.refresh_at
            .is_none_or(|refresh_at| now < refresh_at)
            .then(|| self.token.clone())
    }
}

impl State {
    /// The held token, if it need not be refreshed yet.
    fn fresh(&self, now: Instant) -> Option<CachedToken> {
        self.held.as_ref()?.fresh(now)
    }

    /// The held token, if it has not expired: good enough while a refresh fails.
    fn unexpired(&self, now: Instant) -> Option<CachedToken> {
        let held = self.held.as_ref()?;
        held.token
            .token
            .expires_at
            .is_none_or(|expires_at| now < expires_at)
            .then(|| held.token.clone())
    }
}

impl TokenCache {
    pub(crate) fn new(exchanger: Arc<dyn TokenExchanger>) -> Self {
        Self {
            inner: Arc::new(Inner {
                exchanger,
                current: std::sync::RwLock::new(None),
                state: std::sync::Mutex::new(State::default()),
                finished: AtomicU64::new(0),
                done: tokio::sync::watch::channel(0).0,
                jitter: Jitter::new(None),
            }),
        }
    }

    /// Exchanges finished, failed ones included.
    pub(crate) fn exchanges(&self) -> u64 {
        self.inner.finished.load(Ordering::Acquire)
    }

    /// A token to send: the cached one while fresh, else the token of the one shared exchange,
    /// waited for within `wait`.
    ///
    /// While a refresh ahead of expiry fails, the old token is used while it lasts.
    pub(crate) async fn get(&self, wait: TokenWait) -> Result<CachedToken> {
        if let Some(token) = self
            .inner
            .current()
            .as_ref()
            .and_then(|held| held.fresh(Instant::now()))
        {
            return Ok(token);
        }
        loop {
            match self.next(wait)? {
                Next::Token(token) => return Ok(token),
                Next::Backoff(at) => tokio::time::sleep_until(at).await,
                Next::Exchange(mut finished) => {
                    if tokio::time::timeout_at(wait.until, finished.changed())
                        .await
                        .is_err()
                    {
                        return Err(Error::token_exchange(format_args!(
                            "no answer from the token endpoint within the {:?} the call \
                             allowed (its attempt timeout or the time left, whichever is less)",
                            wait.exchange_timeout
                        )));
                    }
                }
            }
        }
    }

    /// A new token after `stale` was refused with a 401: `stale` is dropped (if it is still the
    /// cached token), and the token comes from one shared exchange, so a burst of 401s for one
    /// token causes one exchange.
    pub(crate) async fn refresh_after_unauthorized(
        &self,
        stale: &CachedToken,
        wait: TokenWait,
    ) -> Result<CachedToken> {
        {
            let mut state = self.inner.lock();
            if state
                .held
                .as_ref()
                .is_some_and(|held| held.token.generation == stale.generation)
            {
                state.held = None;
                *self.inner.current_mut() = None;
            }
        }
        self.get(wait).await
    }

    /// Under the state's lock: the token if there is one to use, else what to wait for,
    /// starting the exchange if none is in flight and the backoff is over. The last failure
    /// when the caller should not wait: it cannot be retried, or the backoff outlasts `wait`.
    fn next(&self, wait: TokenWait) -> Result<Next> {
        let mut state = self.inner.lock();
        let now = Instant::now();
        if let Some(token) = state.fresh(now) {
            return Ok(Next::Token(token));
        }
        if state.in_flight {
            return Ok(Next::Exchange(self.inner.done.subscribe()));
        }
        if let Some(retry_at) = state.retry_at.filter(|&at| now < at) {
            if let Some(token) = state.unexpired(now) {
                return Ok(Next::Token(token));
            }
            let failure = state
                .last_failure
                .clone()
                .unwrap_or_else(|| Error::token_exchange("the last exchange failed"));
            if !failure.is_retryable() {
                return Err(failure);
            }
            if retry_at >= wait.until {
                return Err(failure.with_note(format_args!(
                    "; the exchanges back off for another {:?}, past the call's time",
                    retry_at - now
                )));
            }
            return Ok(Next::Backoff(retry_at));
        }
        state.in_flight = true;
        let finished = self.inner.done.subscribe();
        drop(state);
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            let result =
                match tokio::time::timeout(wait.exchange_timeout, inner.exchanger.exchange()).await
                {
                    Ok(result) => result,
                    Err(_) => Err(Error::token_exchange(format_args!(
                        "no answer from the token endpoint within {:?}",
                        wait.exchange_timeout
                    ))),
                };
            inner.record(result);
        });
        Ok(Next::Exchange(finished))
    }
}

/// What a caller that found no fresh token does next.
enum Next {
    /// Use this token.
    Token(CachedToken),
    /// Wait for the exchange in flight.
    Exchange(tokio::sync::watch::Receiver<u64>),
    /// Wait for the shared backoff to end.
    Backoff(Instant),
}

impl Inner {
    /// Records an exchange's result: a token is held and ends the backoff; a failure starts
    /// (or lengthens) it.
    fn record(&self, result: Result<AccessToken>) {
        let mut state = self.lock();
        let now = Instant::now();
        state.in_flight = false;
        state.finished += 1;
        self.finished.store(state.finished, Ordering::Release);
        match result {
            Ok(token) => {
                let refresh_at = refresh_at(&token, now);
                let authorization = token.authorization().ok();
                let held = Held {
                    token: CachedToken {
                        token,
                        generation: state.finished,
                        authorization,
                    },
                    refresh_at,
                };
                *self.current_mut() = Some(held.clone());
                state.held = Some(held);
                state.last_failure = None;
                state.failures = 0;
                state.retry_at = None;
            }
            Err(error) => {
                state.failures = state.failures.saturating_add(1);
                let backoff = self
                    .jitter
                    .with(|rng| exchange_backoff(state.failures, rng))
                    .max(error.retry_after().unwrap_or_default());
                state.retry_at = now.checked_add(backoff);
                tracing::warn!(
                    failed_exchanges = state.failures,
                    wait_ms = backoff.as_millis() as u64,
                    retryable = error.is_retryable(),
                    "the token exchange failed; every caller's next exchange waits"
                );
                state.last_failure = Some(error);
            }
        }
        let finished = state.finished;
        drop(state);
        self.done.send_replace(finished);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn current(&self) -> std::sync::RwLockReadGuard<'_, Option<Held>> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn current_mut(&self) -> std::sync::RwLockWriteGuard<'_, Option<Held>> {
        self.current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The shared backoff after the `failures`-th failed exchange in a row: 250 ms doubling to at
/// most 5 s, drawn uniformly in its upper half, so it never shrinks to nothing.
fn exchange_backoff<R: rand::Rng + ?Sized>(failures: u32, rng: &mut R) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    let ceiling = EXCHANGE_BACKOFF_FIRST
        .saturating_mul(1 << doublings)
        .min(EXCHANGE_BACKOFF_MAX);
    let floor = ceiling / 2;
    floor + Duration::from_nanos(rng.random_range(0..=(ceiling - floor).as_nanos() as u64))
}

impl fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCache").finish_non_exhaustive()
    }
}

/// When to refresh `token`, received at `now`: ahead of expiry by a tenth of its lifetime, at
/// most 30 s. `None` when the expiry is unknown.
fn refresh_at(token: &AccessToken, now: Instant) -> Option<Instant> {
    let expires_at = token.expires_at?;
    let skew = (expires_at.saturating_duration_since(now) / 10).min(MAX_REFRESH_SKEW);
    Some(expires_at.checked_sub(skew).unwrap_or(expires_at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::AtomicUsize;

    const SECRET: &str = "s3cr3t-value";

    /// A minute to wait for a token.
    #[allow(non_snake_case)]
    fn WAIT() -> TokenWait {
        TokenWait::within(Duration::from_secs(60))
    }

    /// Counts exchanges; each gives a new token that lives `lifetime`, after `delay`.
    struct Counting {
        exchanges: AtomicUsize,
        lifetime: Option<Duration>,
        delay: Duration,
        fail: bool,
    }

    impl Counting {
        fn new(lifetime: Option<Duration>) -> Arc<Self> {
            Arc::new(Self {
                exchanges: AtomicUsize::new(0),
                lifetime,
                delay: Duration::from_millis(5),
                fail: false,
            })
        }

        fn failing() -> Arc<Self> {
            Arc::new(Self {
                exchanges: AtomicUsize::new(0),
                lifetime: None,
                delay: Duration::from_secs(1),
                fail: true,
            })
        }

        fn count(&self) -> usize {
            self.exchanges.load(Ordering::SeqCst)
        }
    }

    impl TokenExchanger for Counting {
        fn exchange(&self) -> ExchangeFuture<'_> {
            Box::pin(async move {
                let number = self.exchanges.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(self.delay).await;
                if self.fail {
                    return Err(Error::token_exchange("the token endpoint answered 503")
                        .with_status(StatusCode::SERVICE_UNAVAILABLE));
                }
                let expires_at = self
                    .lifetime
                    .and_then(|life| Instant::now().checked_add(life));
                Ok(AccessToken::new(format!("token-{number}"), expires_at))
            })
        }
    }

    #[test]
    fn secrets_and_tokens_print_redacted() {
        let secret = Secret::new(SECRET);
        let token = AccessToken::new(SECRET, None);
        for shown in [
            format!("{secret}"),
            format!("{secret:?}"),
            format!("{token:?}"),
            format!(
                "{:?}",
                ClientCredentials::new("http://127.0.0.1:1", "id", SECRET)
            ),
        ] {
            assert!(!shown.contains(SECRET), "{shown}");
        }
        assert!(format!("{token:?}").contains("<redacted>"));
    }

    #[test]
    fn authorization_is_a_sensitive_bearer_value() {
        let value = AccessToken::new("abc", None)
            .authorization()
            .expect("valid token");
        assert_eq!(value, "Bearer abc");
        assert!(value.is_sensitive());
        let refused = AccessToken::new("a\nb", None).authorization();
        assert_eq!(
            refused.expect_err("invalid").kind(),
            ErrorKind::TokenExchange
        );
    }

    #[test]
    fn a_token_url_replaces_the_default_and_must_be_http() {
        let credentials = ClientCredentials::new("http://127.0.0.1:8080", "id", SECRET)
            .expect("valid")
            .token_url("https://login.example/oauth2/token")
            .expect("valid token URL");
        assert_eq!(
            credentials.token_url.as_str(),
            "https://login.example/oauth2/token"
        );
        let error = ClientCredentials::new("http://127.0.0.1:8080", "id", SECRET)
            .expect("valid")
            .token_url("file:///etc/passwd")
            .expect_err("not http");
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn refuses_a_base_url_that_is_not_http() {
        for base in ["not a url", "ftp://example.com", ""] {
            let error = ClientCredentials::new(base, "id", SECRET).expect_err("invalid URL");
            assert_eq!(error.kind(), ErrorKind::InvalidInput, "{base}");
        }
        let ok = ClientCredentials::new("http://127.0.0.1:8080/", "id", SECRET).expect("valid");
        assert_eq!(ok.token_url.as_str(), "http://127.0.0.1:8080/oauth/token");
    }

    #[tokio::test(start_paused = true)]
    async fn reads_a_token_answer_with_its_expiry() {
        let now = Instant::now();
        let body =
            br#"{"access_token":"tok-0001","token_type":"Bearer","expires_in":3600,"scope":"webhooks"}"#;
        let token = read_token_answer(StatusCode::OK, body, now, &Secret::new(SECRET))
            .expect("valid answer");
        assert_eq!(token.secret().expose(), "tok-0001");
        assert_eq!(token.expires_at(), Some(now + Duration::from_secs(3600)));

        let no_expiry = br#"{"access_token":"tok-0002","token_type":"bearer"}"#;
        let token = read_token_answer(StatusCode::OK, no_expiry, now, &Secret::new(SECRET))
            .expect("valid answer");
        assert_eq!(token.expires_at(), None);

        let string_expiry = br#"{"access_token":"tok-0003","expires_in":"60"}"#;
        let token = read_token_answer(StatusCode::OK, string_expiry, now, &Secret::new(SECRET))
            .expect("valid answer");
        assert_eq!(token.expires_at(), Some(now + Duration::from_secs(60)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_exchange_quotes_the_oauth_code_but_never_the_secret() {
        let secret = Secret::new(SECRET);
        let now = Instant::now();
        let answer = |status: u16, body: &str| {
            let status = StatusCode::from_u16(status).expect("valid status");
            read_token_answer(status, body.as_bytes(), now, &secret).expect_err("refused")
        };

        let invalid = answer(
            401,
            r#"{"error":"invalid_client","error_description":"secret s3cr3t-value is wrong"}"#,
        );
        assert_eq!(invalid.kind(), ErrorKind::TokenExchange);
        assert_eq!(invalid.status(), Some(StatusCode::UNAUTHORIZED));
        assert_eq!(
            invalid.to_string(),
            "token exchange failed: the token endpoint answered 401 invalid_client"
        );
        assert!(!invalid.is_retryable());

        let echoed = answer(400, r#"{"error":"s3cr3t-value"}"#);
        assert!(!echoed.to_string().contains(SECRET), "{echoed}");
        assert!(answer(503, "<html>").is_retryable());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreadable_token_answer_is_an_exchange_error() {
        let secret = Secret::new(SECRET);
        let now = Instant::now();
        for body in [
            "not json",
            "{}",
            r#"{"access_token":""}"#,
            r#"{"access_token":"t","token_type":"mac"}"#,
            r#"{"access_token":"t","expires_in":-5}"#,
            r#"{"access_token":"t\nu"}"#,
        ] {
            let error = read_token_answer(StatusCode::OK, body.as_bytes(), now, &secret)
                .expect_err("unreadable");
            assert_eq!(error.kind(), ErrorKind::TokenExchange, "{body}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_unusable_token_is_refused_at_once_without_showing_it() {
        let secret = Secret::new(SECRET);
        let now = Instant::now();
        for (body, why) in [
            (
                r#"{"access_token":"tok-0001\r\nX-Injected: 1"}"#,
                "control character",
            ),
            (r#"{"access_token":"tok-0001\u0000"}"#, "control character"),
            (
                r#"{"access_token":"\u001b[31mtok-0001"}"#,
                "control character",
            ),
            (r#"{"access_token":"tok\u007f0001"}"#, "control character"),
            (r#"{"access_token":"ok"}"#, "shorter than 8 bytes"),
            (r#"{"access_token":"tok-001"}"#, "shorter than 8 bytes"),
        ] {
            let error = read_token_answer(StatusCode::OK, body.as_bytes(), now, &secret)
                .expect_err("unusable");
            assert_eq!(error.kind(), ErrorKind::TokenExchange, "{body}");
            assert!(!error.is_retryable(), "waiting cannot heal it: {body}");
            assert!(error.to_string().contains("unusable token"), "{error}");
            assert!(error.to_string().contains(why), "{error}");
            assert!(!error.to_string().contains("tok-"), "{error}");
        }
    }

    /// Serves one HTTP request on a std socket; hands back the request text.
    fn serve_once(
        status: &'static str,
        body: &'static str,
    ) -> (String, std::thread::JoinHandle<String>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().expect("accept");
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).expect("read");
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().expect("length");
                }
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let mut request_body = vec![0; length];
            reader.read_exact(&mut request_body).expect("body");
            let answer = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            reader
                .get_mut()
                .write_all(answer.as_bytes())
                .expect("write");
            head + &String::from_utf8_lossy(&request_body)
        });
        (base, server)
    }

    #[tokio::test]
    async fn client_credentials_posts_the_form_and_reads_the_token() {
        let (base, server) = serve_once(
            "200 OK",
            r#"{"access_token":"tok-0009","token_type":"Bearer","expires_in":3600,"scope":"webhooks"}"#,
        );
        let exchanger = ClientCredentials::new(&base, "sender-1", SECRET)
            .expect("valid")
            .scope("webhooks");

        let token = exchanger.exchange().await.expect("token");
        let request = server.join().expect("server thread");

        assert_eq!(token.secret().expose(), "tok-0009");
        assert!(token.expires_at().is_some());
        assert!(
            request.starts_with("POST /oauth/token HTTP/1.1"),
            "{request}"
        );
        assert!(request.contains("application/x-www-form-urlencoded"));
        assert!(request.ends_with(
            "grant_type=client_credentials&client_id=sender-1&client_secret=s3cr3t-value&scope=webhooks"
        ));
    }

    #[tokio::test]
    async fn client_credentials_reports_invalid_client_without_the_secret() {
        let (base, server) = serve_once("401 Unauthorized", r#"{"error":"invalid_client"}"#);
        let exchanger = ClientCredentials::new(&base, "sender-1", SECRET).expect("valid");

        let error = exchanger.exchange().await.expect_err("refused");
        server.join().expect("server thread");

        assert_eq!(error.kind(), ErrorKind::TokenExchange);
        assert!(error.to_string().contains("invalid_client"));
        assert!(!format!("{error} {error:?}").contains(SECRET));
    }

    #[tokio::test]
    async fn client_credentials_reports_an_unreachable_endpoint() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        drop(listener);
        let exchanger = ClientCredentials::new(&base, "sender-1", SECRET).expect("valid");

        let error = exchanger.exchange().await.expect_err("unreachable");
        assert_eq!(error.kind(), ErrorKind::TokenExchange);
        assert!(error.is_retryable());
        assert!(!format!("{error:?}").contains(SECRET));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_thousand_concurrent_401s_cause_one_exchange() {
        let exchanger = Counting::new(None);
        let cache = Arc::new(TokenCache::new(exchanger.clone()));
        let stale = cache.get(WAIT()).await.expect("first token");
        assert_eq!(exchanger.count(), 1);

        let tasks: Vec<_> = (0..1_000)
            .map(|_| {
                let cache = Arc::clone(&cache);
                let stale = stale.clone();
                tokio::spawn(async move { cache.refresh_after_unauthorized(&stale, WAIT()).await })
            })
            .collect();
        for task in tasks {
            let token = task.await.expect("task").expect("refreshed token");
            assert_eq!(token.token().secret().expose(), "token-2");
        }

        assert_eq!(exchanger.count(), 2);
    }

    /// Runs `callers` concurrent `get()`s on `cache`; their results, in spawn order.
    async fn concurrent_gets(cache: &Arc<TokenCache>, callers: usize) -> Vec<Result<CachedToken>> {
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let cache = Arc::clone(cache);
                tokio::spawn(async move { cache.get(WAIT()).await })
            })
            .collect();
        let mut results = Vec::with_capacity(callers);
        for task in tasks {
            results.push(task.await.expect("task"));
        }
        results
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_first_callers_share_one_exchange() {
        let exchanger = Counting::new(Some(Duration::from_secs(3600)));
        let cache = Arc::new(TokenCache::new(exchanger.clone()));

        for token in concurrent_gets(&cache, 100).await {
            token.expect("token");
        }

        assert_eq!(exchanger.count(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn refreshes_the_token_shortly_before_it_expires() {
        let exchanger = Counting::new(Some(Duration::from_secs(100)));
        let cache = TokenCache::new(exchanger.clone());

        let first = cache.get(WAIT()).await.expect("token");
        tokio::time::advance(Duration::from_secs(85)).await;
        let still = cache.get(WAIT()).await.expect("token");
        assert_eq!(exchanger.count(), 1);
        assert_eq!(still.generation, first.generation);

        // A 100 s token is refreshed 10 s (a tenth of its life) before it expires.
        tokio::time::advance(Duration::from_secs(6)).await;
        let renewed = cache.get(WAIT()).await.expect("token");
        assert_eq!(exchanger.count(), 2);
        assert_ne!(renewed.generation, first.generation);
    }

    #[test]
    fn the_shared_backoff_doubles_from_250_ms_to_5_s_in_its_upper_half() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for (failures, ceiling_ms) in [(1, 250), (2, 500), (3, 1_000), (5, 4_000), (6, 5_000)] {
            for _ in 0..100 {
                let wait = exchange_backoff(failures, &mut rng);
                let ceiling = Duration::from_millis(ceiling_ms);
                assert!(
                    wait >= ceiling / 2 && wait <= ceiling,
                    "{failures}: {wait:?}"
                );
            }
        }
        assert!(exchange_backoff(u32::MAX, &mut rng) <= EXCHANGE_BACKOFF_MAX);
    }

    #[test]
    fn refresh_skew_is_a_tenth_of_the_lifetime_and_at_most_30_s() {
        let now = Instant::now();
        let hour = AccessToken::new("t", Some(now + Duration::from_secs(3600)));
        let minute = AccessToken::new("t", Some(now + Duration::from_secs(60)));
        assert_eq!(
            refresh_at(&hour, now),
            Some(now + Duration::from_secs(3570))
        );
        assert_eq!(
            refresh_at(&minute, now),
            Some(now + Duration::from_secs(54))
        );
        assert_eq!(refresh_at(&AccessToken::new("t", None), now), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refresh_for_an_older_token_reuses_the_newer_one() {
        let exchanger = Counting::new(None);
        let cache = TokenCache::new(exchanger.clone());
        let first = cache.get(WAIT()).await.expect("token");
        let second = cache
            .refresh_after_unauthorized(&first, WAIT())
            .await
            .expect("token");
        let again = cache
            .refresh_after_unauthorized(&first, WAIT())
            .await
            .expect("token");

        assert_eq!(again.generation, second.generation);
        assert_eq!(exchanger.count(), 2);
        cache
            .refresh_after_unauthorized(&second, WAIT())
            .await
            .expect("token");
        assert_eq!(exchanger.count(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn callers_queued_behind_a_failed_exchange_share_its_failure() {
        let exchanger = Counting::failing();
        let cache = Arc::new(TokenCache::new(exchanger.clone()));

        // 50 callers with 1.2 s each: the exchange takes 1 s and fails, and the backoff after
        // it (125-250 ms) ends too late for the next exchange to be answered in their time.
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let cache = Arc::clone(&cache);
                tokio::spawn(async move {
                    cache
                        .get(TokenWait::within(Duration::from_millis(1_200)))
                        .await
                })
            })
            .collect();
        for task in tasks {
            let error = task.await.expect("task").expect_err("exchange fails");
            assert_eq!(error.kind(), ErrorKind::TokenExchange);
        }
        assert!(exchanger.count() <= 2, "{} exchanges", exchanger.count());
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_during_the_shared_backoff_is_answered_without_an_exchange() {
        let exchanger = Counting::failing();
        let cache = TokenCache::new(exchanger.clone());
        cache
            .get(TokenWait::within(Duration::from_millis(1_100)))
            .await
            .expect_err("exchange fails");
        assert_eq!(exchanger.count(), 1);

        // The backoff (125-250 ms) outlasts this caller's 100 ms: the failure, at once.
        let asked = Instant::now();
        let error = cache
            .get(TokenWait::within(Duration::from_millis(100)))
            .await
            .expect_err("backing off");
        assert_eq!(Instant::now(), asked, "no wait");
        assert_eq!(exchanger.count(), 1, "no exchange");
        assert!(error.to_string().contains("back off"), "{error}");
        assert!(error.is_retryable());
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_exchange_is_shared_until_its_backoff_ends() {
        struct Refused(AtomicUsize);
        impl TokenExchanger for Refused {
            fn exchange(&self) -> ExchangeFuture<'_> {
                self.0.fetch_add(1, Ordering::SeqCst);
                Box::pin(async {
                    Err(
                        Error::token_exchange("the token endpoint answered 401 invalid_client")
                            .with_status(StatusCode::UNAUTHORIZED),
                    )
                })
            }
        }
        let exchanger = Arc::new(Refused(AtomicUsize::new(0)));
        let cache = Arc::new(TokenCache::new(exchanger.clone()));
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let cache = Arc::clone(&cache);
                tokio::spawn(async move { cache.get(WAIT()).await })
            })
            .collect();
        for task in tasks {
            let error = task.await.expect("task").expect_err("refused");
            assert!(!error.is_retryable(), "{error}");
        }
        assert_eq!(exchanger.0.load(Ordering::SeqCst), 1, "not waited out");
        tokio::time::advance(Duration::from_millis(300)).await;
        cache.get(WAIT()).await.expect_err("refused");
        assert_eq!(exchanger.0.load(Ordering::SeqCst), 2, "tried again later");
    }

    /// Answers 503 (after `delay`) until `healed_at`, then a token.
    struct DownUntil {
        healed_at: Instant,
        delay: Duration,
        failed: AtomicUsize,
        granted: AtomicUsize,
    }

    impl TokenExchanger for DownUntil {
        fn exchange(&self) -> ExchangeFuture<'_> {
            Box::pin(async move {
                tokio::time::sleep(self.delay).await;
                if Instant::now() < self.healed_at {
                    self.failed.fetch_add(1, Ordering::SeqCst);
                    return Err(Error::token_exchange("the token endpoint answered 503")
                        .with_status(StatusCode::SERVICE_UNAVAILABLE));
                }
                self.granted.fetch_add(1, Ordering::SeqCst);
                Ok(AccessToken::expiring_in(
                    "tok-healed",
                    Duration::from_secs(3600),
                ))
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_endpoint_down_10_s_sees_few_exchanges_from_a_thousand_callers() {
        let exchanger = Arc::new(DownUntil {
            healed_at: Instant::now() + Duration::from_secs(10),
            delay: Duration::from_millis(20),
            failed: AtomicUsize::new(0),
            granted: AtomicUsize::new(0),
        });
        let cache = Arc::new(TokenCache::new(exchanger.clone()));
        // 1,000 calls arrive evenly over the 10 s outage, each with the default 60 s.
        let mut tasks = Vec::new();
        for _ in 0..1_000 {
            let cache = Arc::clone(&cache);
            tasks.push(tokio::spawn(async move { cache.get(WAIT()).await }));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for task in tasks {
            let token = task
                .await
                .expect("task")
                .expect("every call outlasts the outage");
            assert_eq!(token.expose(), "tok-healed");
        }
        let failed = exchanger.failed.load(Ordering::SeqCst);
        assert_eq!(
            exchanger.granted.load(Ordering::SeqCst),
            1,
            "one exchange serves all"
        );
        // 250 ms doubling to 5 s, drawn in the upper half: at most 8 steps fit in 10 s.
        assert!(failed <= 9, "{failed} exchanges failed");
        assert_eq!(cache.exchanges(), failed as u64 + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_refresh_ahead_of_expiry_keeps_the_unexpired_token() {
        struct FailsSecond(AtomicUsize);
        impl TokenExchanger for FailsSecond {
            fn exchange(&self) -> ExchangeFuture<'_> {
                Box::pin(async move {
                    if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                        Ok(AccessToken::expiring_in(
                            "tok-0001",
                            Duration::from_secs(100),
                        ))
                    } else {
                        Err(Error::token_exchange("the token endpoint answered 503"))
                    }
                })
            }
        }
        let cache = TokenCache::new(Arc::new(FailsSecond(AtomicUsize::new(0))));
        cache.get(WAIT()).await.expect("token");

        tokio::time::advance(Duration::from_secs(95)).await;
        let kept = cache.get(WAIT()).await.expect("the unexpired token");
        assert_eq!(kept.token().secret().expose(), "tok-0001");

        tokio::time::advance(Duration::from_secs(10)).await;
        cache
            .get(WAIT())
            .await
            .expect_err("expired and not renewed");
    }
}
