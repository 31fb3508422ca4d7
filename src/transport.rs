//! The HTTP client the SDK builds for itself.
//!
//! rustls with aws-lc-rs (reqwest's default provider), HTTP/2 by ALPN on `https://`, and on
//! `http://` HTTP/1.1 or, when asked, HTTP/2 with prior knowledge. It follows no redirect (one
//! would carry the bearer token elsewhere) and never retries by itself: reqwest 0.13 retries
//! HTTP/2 refusals unless told not to, and such a retry would be a request the engine never
//! counted, budgeted or recorded. The engine retries them instead, as
//! [`TransportKind::Refused`](crate::TransportKind::Refused).

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use http::header::AUTHORIZATION;

use crate::answer::Answer;
use crate::answer_limit::{BodyRead, read_body};
use crate::attempt::TransportKind;
use crate::profile::SurfaceProfile;
use crate::request::FixedRequest;

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

/// The client's own reqwest client.
#[derive(Debug)]
pub(crate) struct Http<'a>(pub(crate) &'a reqwest::Client);

impl Transport for Http<'_> {
    async fn send(
        &mut self,
        request: &FixedRequest,
        authorization: Option<HeaderValue>,
        timeout: Duration,
        limit: usize,
    ) -> Answer {
        match self
            .0
            .execute(attempt(request, authorization, timeout))
            .await
        {
            Ok(response) => answer_of(response, request.surface.profile(), limit).await,
            Err(error) => Answer::no_response(TransportKind::of(&error)),
        }
    }
}

/// One attempt of `request` as reqwest sends it: the fixed method, URL, headers and body
/// bytes, and `authorization` when the engine holds the token.
pub(crate) fn attempt(
    request: &FixedRequest,
    authorization: Option<HeaderValue>,
    timeout: Duration,
) -> reqwest::Request {
    let mut attempt = reqwest::Request::new(request.method.clone(), request.url.clone());
    *attempt.headers_mut() = request.headers.clone();
    if let Some(authorization) = authorization {
        attempt.headers_mut().insert(AUTHORIZATION, authorization);
    }
    *attempt.body_mut() = Some(request.body.clone().into());
    *attempt.timeout_mut() = Some(timeout);
    attempt
}

/// Reads `response` into an [`Answer`], at most `limit` bytes of its body.
pub(crate) async fn answer_of(
    mut response: reqwest::Response,
    profile: &SurfaceProfile,
    limit: usize,
) -> Answer {
    let status = response.status();
    let headers = std::mem::take(response.headers_mut());
    match read_body(response, limit).await {
        BodyRead::Whole(body) => Answer::response(status, headers, body),
        BodyRead::TooLarge => Answer::too_large(status, headers),
        // The server answered a delivery: it committed, whatever the body said.
        BodyRead::Failed(_) if profile.status_is_the_answer => {
            Answer::response(status, headers, Bytes::new())
        }
        // A write or read is retried with the same key: a replay brings the body back.
        BodyRead::Failed(error) => Answer::no_response(TransportKind::of(&error)),
    }
}
