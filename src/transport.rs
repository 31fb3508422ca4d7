//! The HTTP client the SDK builds for itself.
//!
//! rustls with aws-lc-rs (reqwest's default provider), HTTP/2 by ALPN on `https://`, and on
//! `http://` HTTP/1.1 or, when asked, HTTP/2 with prior knowledge. It follows no redirect (one
//! would carry the bearer token elsewhere) and never retries by itself: reqwest 0.13 retries
//! HTTP/2 refusals unless told not to, and such a retry would be a request the engine never
//! counted, budgeted or recorded. The engine retries them instead, as
//! [`TransportKind::Refused`](crate::TransportKind::Refused).

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
