//! The error bodies of each surface, shaped as `docs/wire-contract.md` fixes them.

use std::time::Duration;

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;

/// The JSON:API media type.
pub(crate) const JSON_API: &str = "application/vnd.api+json";

/// `{"errors": [{"status", "code", "title"}]}` with the JSON:API media type.
pub(crate) fn api_error(status: StatusCode, code: &str, title: &str) -> Response {
    let body = json!({"errors": [{"status": status.as_str(), "code": code, "title": title}]});
    api_document(status, &body)
}

/// A JSON:API document with the JSON:API media type.
pub(crate) fn api_document(status: StatusCode, body: &serde_json::Value) -> Response {
    let mut response = (status, Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON_API));
    response
}

/// `{"error": "<runtime body>"}`, the webhook error form.
pub(crate) fn webhook_error(status: StatusCode, runtime_body: &str) -> Response {
    (status, Json(json!({"error": runtime_body}))).into_response()
}

/// `{"data": null, "error": {"code", "message"}}`, the Modulify error form
/// (`docs/wire-contract.md`, "The envelope and its errors").
pub(crate) fn modulify_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({"data": null, "error": {"code": code, "message": message}});
    (status, Json(body)).into_response()
}

/// Why a request body cannot be used.
#[derive(Debug)]
pub(crate) enum BodyRefusal {
    /// Over the surface's limit, or over axum's buffer limit: the surface's own 413.
    TooLarge,
    /// It could not be read; axum's rejection answers it.
    Unreadable(BytesRejection),
}

/// The raw body when it was read in full and is at most `limit` bytes.
///
/// A body far over the limit is cut off by axum's buffer limit; it must still
/// get the surface's own 413 body, not axum's plain text.
pub(crate) fn body_within(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
) -> Result<Bytes, BodyRefusal> {
    match body {
        Ok(body) if body.len() <= limit => Ok(body),
        Ok(_) => Err(BodyRefusal::TooLarge),
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            Err(BodyRefusal::TooLarge)
        }
        Err(rejection) => Err(BodyRefusal::Unreadable(rejection)),
    }
}

/// Adds `Retry-After` in delay-seconds, rounded up so a client never comes back early.
pub(crate) fn with_retry_after(mut response: Response, wait: Duration) -> Response {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
    response
}

/// `2026-12-01T02:15:14Z`: RFC 3339 in UTC, whole seconds.
pub(crate) fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::rfc3339;

    #[test]
    fn formats_rfc3339_in_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_793_585_714);
        assert_eq!(rfc3339(t), "2026-11-02T02:15:14Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
    }
}
