//! A reqwest-middleware 0.5 [`Middleware`] that retries by the documented matrix, with the
//! engine of [`RetryingClient`] (feature `middleware`). The docs are on [`RetryMiddleware`], the
//! public face of this module.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{Extensions, HeaderMap, HeaderName, HeaderValue, StatusCode, Version};
use reqwest_middleware::{Middleware, Next};

use crate::client::RetryingClient;
use crate::core::answer::Answer;
use crate::core::attempt::{Attempt, TransportKind};
use crate::core::auth::{TokenCache, TokenExchanger};
use crate::core::engine::Endpoint;
use crate::core::engine::{Engine, Policy};
use crate::core::engine_options::{EngineOptions, engine_setters};
use crate::core::error::{Error, Result};
use crate::core::key::{DeliveryId, IdempotencyKey};
use crate::core::limit::window::Windows;
use crate::core::request::FixedRequest;
use crate::core::stats::Stats;
use crate::core::transport::{self, Transport, answer_of};
use crate::vendors::Surface;
use crate::vendors::hodoflow::outcome::WebhookOutcome;
use crate::vendors::hodoflow::routes::route_of;
use crate::vendors::hodoflow::routes::trigger_key;
use crate::vendors::surface_of;

const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// A reqwest-middleware [`Middleware`] that retries by the documented matrix, with the engine
/// of [`RetryingClient`] (feature `middleware`).
///
/// Services that already send through a
/// [`ClientWithMiddleware`](reqwest_middleware::ClientWithMiddleware) (tracing, auth, caching
/// layers) put [`RetryMiddleware`] into their stack instead of reqwest-retry's
/// `RetryTransientMiddleware`. It is not a second retry loop: each request becomes the same fixed
/// request a [`RetryingClient`] call builds, and the same engine runs it, with one difference
/// only: each attempt goes on down the stack (the middleware's `Next`) instead of out through the
/// client's own reqwest client. So classification, `Retry-After`, the 429 fallback, the
/// [`Budget`](crate::Budget), the shared [`RetryBudget`](crate::limit::RetryBudget) and the
/// credential's gate all behave as they do there.
///
/// # Which matrix a request gets
///
/// The [`Surface`] comes from the method and the path (a prefix before `/api/` is allowed, so a
/// base path works). A path with `/api/json/` or `/api/v1/webhooks/` in it, or ending in
/// `/api/graphql`, is claimed by the Hodoflow profile (`docs/wire-contract.md`):
///
/// | request on a claimed path | surface | key |
/// |---|---|---|
/// | `GET`, `HEAD` (and `OPTIONS`, `TRACE`) | [`Surface::Read`] | none |
/// | `POST` with `/api/v1/webhooks/` in the path | [`Surface::Webhook`] | delivery ID |
/// | `POST /api/graphql` | [`Surface::GraphQl`] | none (read-only) |
/// | `POST`, `PUT`, `PATCH`, `DELETE` (and other unsafe methods) | [`Surface::JsonApiWrite`] | `Idempotency-Key` |
///
/// A path no profile claims gets a vendor-neutral table (`src/vendors/neutral.rs`), since no
/// vendor's matrix says anything about it:
///
/// | request on any other path | surface | retried on | key |
/// |---|---|---|---|
/// | an idempotent method of RFC 9110: `GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT`, `DELETE` | [`Surface::IdempotentMethod`] | no answer, 429, 5xx | none added (the caller's is sent as it is) |
/// | any other method (`POST`, `PATCH`, ...) with the caller's `Idempotency-Key` | [`Surface::CallerKeyed`] | no answer, 429, 5xx | the caller's, the same on every attempt |
/// | any other method without one | none: sent once, never retried | - | none (never generated) |
///
/// A `POST` to a path no vendor claims is not taken for a JSON:API write: a key is generated
/// only where a vendor's document says its server honours one.
///
/// # The key
///
/// Every attempt of an unsafe request carries the same `Idempotency-Key` and the same body bytes.
/// The caller's header is used when present, after the checks of [`IdempotencyKey::new`] (an
/// invalid one is refused before anything is sent); on a webhook delivery, the first delivery
/// header in the order of Hodoflow's webhook sender guide ([`DeliveryId::from_headers`]). Otherwise
/// one random key (UUIDv4) is generated once, before the first attempt, and reported: an `INFO`
/// event `generated an Idempotency-Key` with the key, [`RetryReport::idempotency_key`] in the
/// response's extensions, and [`Error::idempotency_key`] on an error. Send the request again with
/// that key to repeat the same operation.
///
/// A body that cannot be replayed (a stream) is sent once, as it is, through the rest of the
/// stack, and never retried: there are no bytes to send again. Only its key is fixed and
/// reported.
///
/// # Authorization
///
/// In a stack, the credential usually comes from the caller or an earlier middleware: without an
/// exchanger the request's own `Authorization` is sent as it is, no token is cached or
/// exchanged, and a 401 stops at once. With [`RetryMiddlewareBuilder::exchanger`] (or
/// [`RetryMiddleware::from_client`]) the bearer token comes from the exchanger, replacing the
/// request's own, with the matrix's one re-exchange on a 401.
///
/// # Outcomes
///
/// - The final answer (a success, or the answer the matrix or a budget stopped on) is returned
///   as the [`Response`](reqwest::Response), its body read (up to the answer limit) and handed
///   back whole. Its extensions hold a [`RetryReport`]: the key, every attempt, and the SDK
///   [`Error`] when the answer is not a success. The response's `url()` is not the request's:
///   reqwest offers no way to set it on a rebuilt response.
/// - No answer (every attempt lost, a refused key, a budget that ends before any answer) is an
///   `Err(reqwest_middleware::Error::Middleware(..))` wrapping the SDK [`Error`]: downcast it to
///   read [`may_have_run`](Error::may_have_run), the attempts and the key.
///
/// ```
/// # fn example(error: reqwest_middleware::Error) {
/// if let reqwest_middleware::Error::Middleware(error) = &error
///     && let Some(error) = error.downcast_ref::<hodoflow_retry::Error>()
/// {
///     println!("may have run: {}, key: {:?}", error.may_have_run(), error.idempotency_key());
/// }
/// # }
/// ```
///
/// # Migrating from reqwest-retry
///
/// | | reqwest-retry 0.9 `RetryTransientMiddleware` | `RetryMiddleware` |
/// |---|---|---|
/// | `Retry-After` | ignored (an open upstream issue): retries on its own schedule, often early | never undercut; a 429 without it falls back to backoff |
/// | POST, PATCH | retried without a key: a lost answer can create twice | one `Idempotency-Key` on every attempt, generated once when absent |
/// | which answers | any 5xx, 408, 429, connection errors | the documented matrix per surface (a 403, 404 or 422 is never retried) |
/// | limits | a number of retries, or a total duration | [`Budget`](crate::Budget): attempts, elapsed time, per-attempt timeout |
/// | fleet | none | a shared [`RetryBudget`](crate::limit::RetryBudget) and the credential's gate |
/// | streaming bodies | not retried | not retried, sent once |
/// | outcome | the last response, or the last error | the final answer with a [`RetryReport`], or an error holding the SDK [`Error`] |
///
/// ```
/// # fn main() -> Result<(), hodoflow_retry::Error> {
/// use hodoflow_retry::{Budget, middleware::RetryMiddleware};
///
/// // Before: .with(RetryTransientMiddleware::new_with_policy(policy))
/// let retry = RetryMiddleware::builder().budget(Budget::new().max_attempts(4)).build()?;
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(retry)
///     .build();
/// # let _ = client;
/// # Ok(())
/// # }
/// ```
///
/// Cheap to clone: clones share the retry budget, the gate, the token cache and the stats.
#[derive(Debug, Clone)]
pub struct RetryMiddleware {
    engine: EngineOwner,
    policy: Arc<Policy>,
}

/// Whose engine the middleware runs.
#[derive(Debug, Clone)]
enum EngineOwner {
    Own(Arc<Engine>),
    /// A client's: its token cache, gate, retry budget and stats.
    Client(RetryingClient),
}

impl RetryMiddleware {
    /// A builder: no exchanger, [`Budget::default`](crate::Budget::default),
    /// [`Backoff::default`](crate::Backoff::default), a retry budget of its own.
    pub fn builder() -> RetryMiddlewareBuilder {
        RetryMiddlewareBuilder::new()
    }

    /// A middleware that shares `client`'s settings and state: its budget and backoff, token
    /// exchanger and cache, credential's gate, retry budget and stats. Its token replaces the
    /// request's own `Authorization`.
    pub fn from_client(client: &impl AsRef<RetryingClient>) -> Self {
        let client = client.as_ref();
        Self {
            engine: EngineOwner::Client(client.clone()),
            policy: client.inner.policy.clone(),
        }
    }

    /// What the middleware has done so far, as [`RetryingClient::stats`].
    pub fn stats(&self) -> Stats {
        self.engine().stats()
    }

    fn engine(&self) -> &Engine {
        match &self.engine {
            EngineOwner::Own(engine) => engine,
            EngineOwner::Client(client) => &client.inner.engine,
        }
    }
}

/// Builds a [`RetryMiddleware`].
#[must_use]
pub struct RetryMiddlewareBuilder {
    /// What the middleware builds its engine from, set as a client's is.
    options: EngineOptions,
}

impl std::fmt::Debug for RetryMiddlewareBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryMiddlewareBuilder")
            .field("policy", &self.options.policy)
            .field(
                "exchanger",
                &self.options.exchanger.as_ref().map(|_| "<exchanger>"),
            )
            .field("rate_budget", &self.options.rate_budget)
            .field("retry_budget", &self.options.retry_budget)
            .field("answer_limit", &self.options.answer_limit)
            .finish()
    }
}

impl Default for RetryMiddlewareBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl RetryMiddlewareBuilder {
    /// A builder with the defaults of each setter.
    pub fn new() -> Self {
        Self {
            options: EngineOptions::new(),
        }
    }

    engine_setters! {
        owner: "middleware",
        noun: "request",
        per_call: "",
        after_backoff: "",
    }

    /// Adds and refreshes the bearer token from `exchanger`, replacing the request's own
    /// `Authorization`, with one re-exchange on a 401.
    ///
    /// Default: none: the request's `Authorization` is sent as it is and a 401 stops.
    pub fn exchanger(mut self, exchanger: impl TokenExchanger + 'static) -> Self {
        self.options.exchanger = Some(Arc::new(exchanger));
        self
    }

    /// The middleware.
    ///
    /// # Errors
    ///
    /// An `invalid_input` error when the budget is invalid or the answer limit is zero.
    pub fn build(mut self) -> Result<RetryMiddleware> {
        self.options.validate()?;
        let tokens = self.options.exchanger.take().map(TokenCache::new);
        let (engine, policy) = self.options.engine(
            tokens,
            Windows::new(None, HashMap::new(), false, None),
            None,
            Endpoint::new("the middleware's requests"),
        );
        Ok(RetryMiddleware {
            engine: EngineOwner::Own(Arc::new(engine)),
            policy: Arc::new(policy),
        })
    }
}

/// What the middleware did, in the final response's extensions.
#[derive(Debug, Clone)]
pub struct RetryReport {
    key: Option<IdempotencyKey>,
    attempts: Vec<Attempt>,
    error: Option<Arc<Error>>,
    delivery: Option<WebhookOutcome>,
    replayed: bool,
}

impl RetryReport {
    /// The key every attempt carried: the caller's or the generated one; `None` for reads and
    /// GraphQL.
    pub fn idempotency_key(&self) -> Option<&IdempotencyKey> {
        self.key.as_ref()
    }

    /// Every attempt, the last one the answer returned.
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// Why the answer is not a success (the matrix stopped on it, or a budget ended the
    /// retries); `None` for a success and for a stream body sent once.
    pub fn error(&self) -> Option<&Error> {
        self.error.as_deref()
    }

    /// A webhook delivery's outcome, read as [`HodoflowClient::deliver`](crate::HodoflowClient::deliver)
    /// reads it: [`WebhookOutcome::Accepted`] with the run ID for a first delivery, or
    /// [`WebhookOutcome::Duplicate`] for a retry of one the server already accepted (no second
    /// run; a success all the same). `None` for other requests and for an answer that is not a
    /// success.
    pub fn delivery(&self) -> Option<&WebhookOutcome> {
        self.delivery.as_ref()
    }

    /// Whether the server replayed the answer an earlier request with the same key got
    /// (`idempotency-replayed: true`) rather than running the operation again.
    pub fn replayed(&self) -> bool {
        self.replayed
    }
}

/// The key of a request of `surface`: the caller's (checked) or a new one, put into `headers`.
/// `Ok((None, _))` for surfaces without a key; the flag says whether it was generated.
fn identity(surface: Surface, headers: &mut HeaderMap) -> Result<(Option<IdempotencyKey>, bool)> {
    if !surface.sends_key() {
        return Ok((None, false));
    }
    if surface == Surface::Webhook
        && let Some(id) = DeliveryId::from_headers(headers)?
    {
        id.key().check_sendable()?;
        return Ok((Some(id.key().clone()), false));
    }
    if let Some(value) = headers.get(IDEMPOTENCY_KEY) {
        let text = value
            .to_str()
            .map_err(|_| Error::invalid_input("the Idempotency-Key header is not visible ASCII"))?;
        let key = IdempotencyKey::new(text)?;
        key.check_sendable()?;
        return Ok((Some(key), false));
    }
    let key = IdempotencyKey::random();
    headers.insert(IDEMPOTENCY_KEY, key.to_header_value());
    Ok((Some(key), true))
}

/// The middleware's transport: each attempt goes on down the stack.
struct ThroughNext<'a> {
    next: Next<'a>,
    extensions: &'a mut Extensions,
    version: Version,
    /// The caller's own timeout; the engine's per-attempt timeout when shorter wins.
    timeout: Option<Duration>,
    /// The headers of the last answer, to rebuild it when the engine stops on it.
    last: Option<(StatusCode, HeaderMap)>,
}

impl Transport for ThroughNext<'_> {
    async fn send(
        &mut self,
        request: &FixedRequest,
        authorization: Option<HeaderValue>,
        timeout: Duration,
        limit: usize,
    ) -> Answer {
        let timeout = self.timeout.map_or(timeout, |own| own.min(timeout));
        let mut attempt = transport::attempt(request, authorization);
        // The middlewares after this one see the attempt's timeout, as reqwest applies it.
        *attempt.timeout_mut() = Some(timeout);
        *attempt.version_mut() = self.version;
        self.last = None;
        let sent = self.next.clone().run(attempt, self.extensions).await;
        let answer = match sent {
            Ok(response) => answer_of(response, request.profile, limit).await,
            Err(reqwest_middleware::Error::Reqwest(error)) => {
                Answer::no_response(TransportKind::of(&error))
            }
            // A later middleware failed: nothing says whether the request left.
            Err(reqwest_middleware::Error::Middleware(_)) => {
                Answer::no_response(TransportKind::Other)
            }
        };
        if let (Some(status), Some(headers)) = (answer.status(), answer.headers()) {
            self.last = Some((status, headers.clone()));
        }
        answer
    }
}

/// The SDK error as a middleware error, with the key; downcast to read it.
fn failed(error: Error, key: Option<IdempotencyKey>) -> reqwest_middleware::Error {
    reqwest_middleware::Error::middleware(error.with_key(key))
}

/// A response rebuilt from an answer the engine read, with the report in its extensions.
fn response_of(
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    version: Version,
    report: RetryReport,
) -> reqwest::Response {
    let mut response = http::Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    *response.version_mut() = version;
    response.extensions_mut().insert(report);
    reqwest::Response::from(response)
}

#[async_trait::async_trait]
impl Middleware for RetryMiddleware {
    async fn handle(
        &self,
        mut req: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        // A parsed URL has its dot segments resolved already; the check refuses what a
        // server could still read as one.
        crate::core::request::normalize_path(req.url().path()).map_err(|e| failed(e, None))?;
        let keyed = req.headers().contains_key(IDEMPOTENCY_KEY);
        let Some(surface) = surface_of(req.method(), req.url().path(), keyed) else {
            tracing::debug!(
                method = %req.method(),
                route = %route_of(req.url().path()),
                "no profile claims the path and the method is not idempotent: without an \
                 Idempotency-Key it is sent once"
            );
            return send_once(req, extensions, next, None).await;
        };
        let (key, generated) = identity(surface, req.headers_mut()).map_err(|e| failed(e, None))?;
        let route = route_of(req.url().path());
        if generated && let Some(key) = &key {
            tracing::info!(
                idempotency_key = key.as_str(),
                method = %req.method(),
                route = %route,
                "generated an Idempotency-Key"
            );
        }
        let body = match req.body() {
            None => Bytes::new(),
            Some(body) => match body.as_bytes() {
                Some(bytes) => Bytes::copy_from_slice(bytes),
                None => {
                    tracing::debug!("a streaming body cannot be sent again: one attempt");
                    return send_once(req, extensions, next, key).await;
                }
            },
        };
        let mut headers = std::mem::take(req.headers_mut());
        if self.engine().tokens.is_some() {
            headers.remove(AUTHORIZATION);
        }
        let trigger = match surface {
            Surface::Webhook => req.url().path().rsplit('/').next().map(trigger_key),
            _ => None,
        };
        let request = FixedRequest::new(
            surface.profile(),
            req.method().clone(),
            req.url().clone(),
            Cow::Owned(route.into_owned()),
            headers,
            body,
            key.as_ref(),
        )
        .in_route(trigger);
        let version = req.version();
        let mut transport = ThroughNext {
            next,
            extensions,
            version,
            timeout: req.timeout().copied(),
            last: None,
        };
        match self
            .engine()
            .run(&request, &self.policy, &mut transport)
            .await
        {
            Ok(answered) => {
                let delivery = (surface == Surface::Webhook && answered.status.is_success())
                    .then(|| WebhookOutcome::from_body(&answered.body).cleaned(&answered.cleaner));
                let report = RetryReport {
                    key,
                    attempts: answered.attempts,
                    error: None,
                    delivery,
                    replayed: request.profile.vendor.replay.replayed(&answered.headers),
                };
                Ok(response_of(
                    answered.status,
                    answered.headers,
                    answered.body,
                    version,
                    report,
                ))
            }
            Err(error) => match transport.last.take() {
                // The engine stopped on an answer: hand it back, as reqwest-retry does.
                Some((status, headers)) if error.status() == Some(status) => {
                    let body = error.body().cloned().unwrap_or_default();
                    let error = error.with_key(key.clone());
                    let report = RetryReport {
                        key,
                        attempts: error.attempts().to_vec(),
                        error: Some(Arc::new(error)),
                        delivery: None,
                        replayed: false,
                    };
                    Ok(response_of(status, headers, body, version, report))
                }
                _ => Err(failed(error, key)),
            },
        }
    }
}

/// A request that is not repeated (a streaming body; an unsafe method on a path no profile
/// claims, without a key): sent once through the rest of the stack.
async fn send_once(
    req: reqwest::Request,
    extensions: &mut Extensions,
    next: Next<'_>,
    key: Option<IdempotencyKey>,
) -> reqwest_middleware::Result<reqwest::Response> {
    let mut response = next.run(req, extensions).await?;
    let attempt = Attempt::answered(1, response.status(), None);
    response.extensions_mut().insert(RetryReport {
        key,
        attempts: vec![attempt],
        error: None,
        delivery: None,
        replayed: false,
    });
    Ok(response)
}

#[cfg(test)]
mod tests {
    use http::Method;

    use super::*;

    #[test]
    fn classifies_requests_by_method_and_path() {
        let cases = [
            (Method::GET, "/api/json/v1/projects", Surface::Read),
            (Method::POST, "/api/v1/webhooks/trg_1", Surface::Webhook),
            (
                Method::POST,
                "/prefix/api/v1/webhooks/acme/trg_1",
                Surface::Webhook,
            ),
            (Method::POST, "/api/graphql", Surface::GraphQl),
            (Method::POST, "/api/json/v1/projects", Surface::JsonApiWrite),
            (
                Method::DELETE,
                "/api/json/v1/projects/1",
                Surface::JsonApiWrite,
            ),
            (Method::GET, "/api/v1/webhooks/trg_1", Surface::Read),
        ];
        for (method, path, surface) in cases {
            for keyed in [false, true] {
                assert_eq!(
                    surface_of(&method, path, keyed),
                    Some(surface),
                    "{method} {path}"
                );
            }
        }
    }

    #[test]
    fn a_path_no_profile_claims_gets_the_vendor_neutral_table() {
        for method in [Method::HEAD, Method::GET, Method::PUT, Method::DELETE] {
            for path in ["/anything", "/v1/send_message", "/api/other"] {
                assert_eq!(
                    surface_of(&method, path, false),
                    Some(Surface::IdempotentMethod),
                    "{method} {path}"
                );
            }
        }
        for method in [Method::POST, Method::PATCH] {
            assert_eq!(surface_of(&method, "/elsewhere", false), None, "{method}");
            assert_eq!(
                surface_of(&method, "/elsewhere", true),
                Some(Surface::CallerKeyed),
                "{method}"
            );
        }
    }

    #[test]
    fn keeps_a_callers_key_refuses_a_bad_one_and_generates_one_otherwise() {
        let mut headers = HeaderMap::new();
        headers.insert(IDEMPOTENCY_KEY, HeaderValue::from_static("order-1"));
        let (key, generated) = identity(Surface::JsonApiWrite, &mut headers).unwrap();
        assert_eq!(key.unwrap().as_str(), "order-1");
        assert!(!generated);

        let mut headers = HeaderMap::new();
        headers.insert(IDEMPOTENCY_KEY, HeaderValue::from_static(""));
        assert!(identity(Surface::JsonApiWrite, &mut headers).is_err());

        let mut headers = HeaderMap::new();
        let (key, generated) = identity(Surface::JsonApiWrite, &mut headers).unwrap();
        assert!(generated);
        assert_eq!(headers[IDEMPOTENCY_KEY], key.unwrap().as_str());

        let mut headers = HeaderMap::new();
        assert!(identity(Surface::Read, &mut headers).unwrap().0.is_none());
        assert!(headers.is_empty());
    }
}
