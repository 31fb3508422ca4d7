//! Span fields named as OpenTelemetry's HTTP client semantic conventions name them.
//!
//! An exporter built on `tracing-opentelemetry` shows a call as OpenTelemetry tooling expects:
//! the call is a span `hodoflow_retry.request` and each attempt a child span
//! `hodoflow_retry.attempt` of kind client (the conventions ask for one span per resend), both
//! named `{method} {url.template}` through the `otel.name` field. Where the conventions have a
//! name, the field carries it; the crate's own fields stay beside them.
//!
//! | field | on | value |
//! |---|---|---|
//! | `http.request.method` | both | `POST` |
//! | `server.address`, `server.port` | both | the base URL's host and port |
//! | `url.template` | both | the route, route tokens as `<redacted>`, no query |
//! | `url.full` | attempt | scheme, host, port and route: never a token or a query |
//! | `http.request.resend_count` | attempt | 1 for the first retry, absent on the first attempt |
//! | `http.response.status_code` | both | the attempt's status; the call's last status |
//! | `error.type` | both | the status of a 4xx or 5xx, the transport error (`timeout`, `closed`, …), or the call's error kind (`budget_exhausted`, …) |
//!
//! Field values are only built when a subscriber listens: disabled spans cost a branch.

use tracing::Span;
use tracing::field::Empty;

use crate::core::answer::Answer;
use crate::core::answer::FinalAnswer;
use crate::core::error::Result;
use crate::core::request::FixedRequest;

/// The span of one call.
pub(crate) fn call_span(request: &FixedRequest) -> Span {
    tracing::info_span!(
        "hodoflow_retry.request",
        otel.name = %format_args!("{} {}", request.method, request.route),
        surface = request.profile.name,
        method = %request.method,
        route = %request.route,
        key = request.identity.as_deref().unwrap_or("-"),
        http.request.method = %request.method,
        server.address = request.url.host_str().unwrap_or_default(),
        server.port = port(request),
        url.template = %request.route,
        http.response.status_code = Empty,
        error.type = Empty,
    )
}

/// The port, as the integer OpenTelemetry expects (exporters read unsigned fields as text).
fn port(request: &FixedRequest) -> Option<i64> {
    request.url.port_or_known_default().map(i64::from)
}

/// Records how the call ended on its span.
pub(crate) fn record_call(span: &Span, result: &Result<FinalAnswer>) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(answered) => {
            span.record(
                "http.response.status_code",
                i64::from(answered.status.as_u16()),
            );
        }
        Err(error) => {
            if let Some(status) = error.status() {
                span.record("http.response.status_code", i64::from(status.as_u16()));
            }
            span.record("error.type", error.kind().as_str());
        }
    }
}

/// The span of attempt `number` (1 for the first), a client span per the conventions.
pub(crate) fn attempt_span(request: &FixedRequest, number: u32) -> Span {
    let span = tracing::info_span!(
        "hodoflow_retry.attempt",
        otel.name = %format_args!("{} {}", request.method, request.route),
        otel.kind = "client",
        attempt = i64::from(number),
        http.request.method = %request.method,
        server.address = request.url.host_str().unwrap_or_default(),
        server.port = port(request),
        url.template = %request.route,
        url.full = %format_args!(
            "{}://{}{}",
            request.url.scheme(),
            request.url.authority(),
            request.route
        ),
        http.request.resend_count = Empty,
        http.response.status_code = Empty,
        error.type = Empty,
    );
    if number > 1 && !span.is_disabled() {
        span.record("http.request.resend_count", i64::from(number - 1));
    }
    span
}

/// Records what attempt `span` came back with.
pub(crate) fn record_attempt(span: &Span, answer: &Answer) {
    if span.is_disabled() {
        return;
    }
    match (answer.status(), answer.transport()) {
        (Some(status), _) => {
            span.record("http.response.status_code", i64::from(status.as_u16()));
            if status.is_client_error() || status.is_server_error() {
                span.record("error.type", status.as_str());
            }
        }
        (None, Some(kind)) => {
            span.record("error.type", kind.as_str());
        }
        (None, None) => {}
    }
}
