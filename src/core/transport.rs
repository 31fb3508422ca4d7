//! The HTTP client the SDK builds for itself.
//!
//! rustls with aws-lc-rs (reqwest's default provider), HTTP/2 by ALPN on `https://`, and on
//! `http://` HTTP/1.1 or, when asked, HTTP/2 with prior knowledge. It follows no redirect (one
//! would carry the bearer token elsewhere) and never retries by itself: reqwest 0.13 retries
//! HTTP/2 refusals unless told not to, and such a retry would be a request the engine never
//! counted, budgeted or recorded. The engine retries them instead, as
//! [`TransportKind::Refused`](crate::attempt::TransportKind::Refused).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue, Method};

use crate::core::answer::Answer;
use crate::core::answer_limit::{BodyRead, read_body};
use crate::core::attempt::TransportKind;
use crate::core::profile::SurfaceProfile;
use crate::core::request::FixedRequest;
use crate::core::runtime;

/// The client: HTTP/2 from the first byte on `http://` when `prior_knowledge`.
pub(crate) fn http_client(prior_knowledge: bool) -> reqwest::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never());
    let builder = if prior_knowledge {
        builder.http2_prior_knowledge()
    } else {
        builder
    };
    builder.build()
}

/// The seam between the engine and the network: one attempt of a fixed request -> its
/// [`Answer`]. The engine decides, waits and records; a transport only sends. Two exist: the
/// client's own [`reqwest::Client`] ([`Http`]), and, with feature `middleware`, the rest of a
/// reqwest-middleware stack (its `Next`), so both run the one attempt loop.
pub(crate) trait Transport: Send {
    /// Sends one attempt with `authorization` (none: the request's own headers stand) within
    /// `timeout`, reading at most `limit` bytes of the answer. Never fails: no answer is an
    /// answer too.
    fn send(
        &mut self,
        request: &FixedRequest,
        authorization: Option<HeaderValue>,
        timeout: Duration,
        limit: usize,
    ) -> impl Future<Output = Answer> + Send;
}

/// Where a client's attempts go: its reqwest client, or a transport of the caller's.
#[derive(Clone)]
pub(crate) enum Sender {
    Reqwest(reqwest::Client),
    Custom(Arc<dyn AttemptTransport>),
}

impl fmt::Debug for Sender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sender::Reqwest(http) => http.fmt(f),
            Sender::Custom(transport) => f.debug_tuple("Custom").field(transport).finish(),
        }
    }
}

/// The client's own sender: its reqwest client or its custom transport.
#[derive(Debug)]
pub(crate) struct Http<'a>(pub(crate) &'a Sender);

impl Transport for Http<'_> {
    async fn send(
        &mut self,
        request: &FixedRequest,
        authorization: Option<HeaderValue>,
        timeout: Duration,
        limit: usize,
    ) -> Answer {
        match self.0 {
            Sender::Reqwest(http) => {
                // The engine keeps the timeout, as for a transport of your own: reqwest's own
                // per-request timeout would allocate the request's extensions and a boxed
                // timer on every attempt.
                let sent = async {
                    // Not a `match` around the read: its scrutinee would be held while reading.
                    let response = match http.execute(attempt(request, authorization)).await {
                        Ok(response) => response,
                        Err(error) => return Answer::no_response(TransportKind::of(&error)),
                    };
                    answer_of(response, request.profile, limit).await
                };
                runtime::timeout(timeout, sent)
                    .await
                    .unwrap_or_else(|_| Answer::no_response(TransportKind::Timeout))
            }
            Sender::Custom(transport) => {
                let outgoing = Outgoing {
                    request,
                    headers: headers_of(request, authorization),
                    timeout,
                };
                // The engine keeps the attempt timeout: an unfinished send is dropped, and the
                // attempt is a timeout whatever the transport was doing.
                runtime::timeout(timeout, transport.send(outgoing))
                    .await
                    .unwrap_or_else(|_| Answer::no_response(TransportKind::Timeout))
            }
        }
    }
}

/// The future of an [`AttemptTransport`]'s send.
pub type AttemptFuture<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// A transport of your own for a client's attempts, set with
/// [`ClientBuilder::transport`](crate::ClientBuilder::transport): an in-memory server for tests
/// and simulations, or a stack of your own. The engine still decides everything (identity,
/// matrix, budgets, waits); a transport only carries one attempt and brings back its
/// [`Answer`].
///
/// The engine keeps the attempt's timeout itself: a send that has not finished within
/// [`Outgoing::timeout`] is dropped, and the attempt counts as
/// [`TransportKind::Timeout`]. A server behind the transport may still execute it, as a real
/// one would.
///
/// # Examples
///
/// ```
/// use bytes::Bytes;
/// use http::{HeaderMap, StatusCode};
/// use hodoflow_retry::{DeliveryId, IdempotencyKey, HodoflowClient, transport::{Answer, AttemptFuture, AttemptTransport, Outgoing}};
///
/// /// Accepts every delivery.
/// #[derive(Debug)]
/// struct Accepting;
///
/// impl AttemptTransport for Accepting {
///     fn send<'a>(&'a self, attempt: Outgoing<'a>) -> AttemptFuture<'a> {
///         assert!(attempt.headers().contains_key("idempotency-key"));
///         let body = Bytes::from_static(br#"{"status":"accepted","workflow_run_id":"run-1"}"#);
///         Box::pin(async move { Answer::response(StatusCode::ACCEPTED, HeaderMap::new(), body) })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> hodoflow_retry::Result<()> {
/// let client = HodoflowClient::builder("http://127.0.0.1:9")
///     .bearer_token("t0k3n")
///     .transport(Accepting)
///     .build()?;
/// let id = DeliveryId::new(IdempotencyKey::from_operation_id("order-1:shipped"));
/// let delivery = client.deliver("route-token", "{}").delivery_id(id).send().await?;
/// assert_eq!(delivery.attempts().len(), 1);
/// # Ok(())
/// # }
/// ```
pub trait AttemptTransport: Send + Sync + fmt::Debug + 'static {
    /// Sends one attempt and brings back its answer, or [`Answer::no_response`] when none came.
    fn send<'a>(&'a self, attempt: Outgoing<'a>) -> AttemptFuture<'a>;
}

/// One attempt as a custom [`AttemptTransport`] sends it: the fixed method, URL, headers
/// (`Authorization` included when the client holds the token) and body bytes, the same on
/// every attempt of the operation; a signed delivery's `webhook-timestamp` and
/// `webhook-signature` are made for each attempt as it is handed over.
pub struct Outgoing<'a> {
    request: &'a FixedRequest,
    headers: HeaderMap,
    timeout: Duration,
}

impl Outgoing<'_> {
    /// The method.
    pub fn method(&self) -> &Method {
        &self.request.method
    }

    /// The full URL. It may hold a route token: a secret, never to be logged.
    pub fn url(&self) -> &str {
        self.request.url.as_str()
    }

    /// The path for logs, with route tokens redacted.
    pub fn route(&self) -> &str {
        &self.request.route
    }

    /// The headers, the Idempotency-Key or delivery ID and `Authorization` included.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body bytes, never re-serialized.
    pub fn body(&self) -> &Bytes {
        &self.request.body
    }

    /// The time the engine gives this attempt.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// Shows the method, the route and the body's length: no token, no body.
impl fmt::Debug for Outgoing<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outgoing")
            .field("method", self.method())
            .field("route", &self.route())
            .field("body", &crate::core::redact::BodyLen(self.body().len()))
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// One attempt of `request` as reqwest sends it: the fixed method, URL, headers and body
/// bytes, and `authorization` when the engine holds the token. Its timeout is the engine's.
pub(crate) fn attempt(
    request: &FixedRequest,
    authorization: Option<HeaderValue>,
) -> reqwest::Request {
    let mut attempt = reqwest::Request::new(request.method.clone(), request.url.clone());
    *attempt.headers_mut() = headers_of(request, authorization);
    *attempt.body_mut() = Some(request.body.clone().into());
    attempt
}

/// The headers of one attempt of `request`: its fixed headers, `authorization` when the engine
/// holds the token, and on a signed delivery this attempt's timestamp and signature, made now.
fn headers_of(request: &FixedRequest, authorization: Option<HeaderValue>) -> HeaderMap {
    let mut headers = request.headers.attempt_map();
    if let Some(authorization) = authorization {
        headers.insert(AUTHORIZATION, authorization);
    }
    if request.signer.is_some() {
        request.sign(&mut headers, crate::core::runtime::wall_now());
    }
    headers
}

/// Reads `response` into an [`Answer`], at most `limit` bytes of its body.
///
/// An `async` block rather than an `async fn`: the future holds the response once, where an
/// `async fn` would hold its argument and the local it moves into.
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn would hold the response twice"
)]
pub(crate) fn answer_of(
    mut response: reqwest::Response,
    profile: &'static SurfaceProfile,
    limit: usize,
) -> impl Future<Output = Answer> + Send {
    async move {
        let status = response.status();
        let headers = std::mem::take(response.headers_mut());
        match read_body(&mut response, limit).await {
            BodyRead::Whole(body) => Answer::response(status, headers, body),
            // A delivery's success is its status: the server committed, however long the body
            // (a webhook's 202 is accepted, its run ID unknown).
            BodyRead::TooLarge if profile.status_is_the_answer && status.is_success() => {
                Answer::response(status, headers, Bytes::new())
            }
            BodyRead::TooLarge => Answer::too_large(status, headers),
            // The server answered a delivery: it committed, whatever the body said.
            BodyRead::Failed(_) if profile.status_is_the_answer => {
                Answer::response(status, headers, Bytes::new())
            }
            // A write or read is retried with the same key: a replay brings the body back.
            BodyRead::Failed(error) => Answer::no_response(TransportKind::of(&error)),
        }
    }
}
