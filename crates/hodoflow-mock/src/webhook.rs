//! Webhook deliveries (Hodoflow's webhook sender guide): identity, deduplication per organization,
//! `202 accepted` / `202 duplicate`, and the runtime's error answers.
//!
//! # The trigger's window, said on every answer
//!
//! Each trigger has a fixed window (`Limits::webhook_rate_limit` requests per
//! `Limits::webhook_rate_window`, the guide's 100 per 60 s by default). Every answer that
//! reached the window check (a 202, a 413, 422 or 503 after it, and the 429 of a full window)
//! states it with the IETF RateLimit fields, in the form `docs/wire-contract.md` fixes:
//!
//! ```text
//! RateLimit-Policy: "trigger";q=100;w=60
//! RateLimit: "trigger";r=57;t=42
//! ```
//!
//! `q` is the quota and `w` the window in seconds; `r` what the window still admits after
//! this request (0 on a 429) and `t` the seconds until it resets. `docs/wire-contract.md`
//! leaves the rounding open: `w` and `t` are whole seconds rounded up, at least 1, so a window of
//! 600 ms is stated as `w=1` and a sender that follows it is never faster than the server. Answers
//! refused before the check (401, 403, 404) carry neither field.
//! `Limits::webhook_rate_limit_fields` turns both off, for a deployment that does not send them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::config::Scope;
use crate::config::{Limits, TriggerSeed};
use crate::fault::FaultAction;
use crate::ledger::SignedRecord;
use crate::rate::Left;
use crate::reply::{BodyRefusal, body_within, webhook_error, with_retry_after};
use crate::signature::SignatureVerdict;
use crate::state::WebhookState;

/// The delivery-ID headers in the order of precedence of Hodoflow's webhook sender guide.
pub const DELIVERY_HEADERS: [&str; 4] = [
    "idempotency-key",
    "x-github-delivery",
    "x-shopify-webhook-id",
    "x-twilio-idempotency-token",
];

/// The identity of a delivery: the first non-empty delivery header, else a
/// hash of the trigger token and raw body within a time bucket.
/// `X-Request-Id` is never an identity.
pub(crate) fn delivery_identity(
    headers: &HeaderMap,
    trigger_token: &str,
    body: &[u8],
    now: SystemTime,
    bucket: Duration,
) -> String {
    let from_header = DELIVERY_HEADERS.iter().find_map(|name| {
        headers
            .get(*name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    });
    if let Some(id) = from_header {
        return id.to_owned();
    }
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let bucket_index = since_epoch.as_secs() / bucket.as_secs().max(1);
    let mut hash = Sha256::new();
    hash.update((trigger_token.len() as u64).to_be_bytes());
    hash.update(trigger_token.as_bytes());
    hash.update(bucket_index.to_be_bytes());
    hash.update(body);
    let digest = hash.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("hash:{hex}")
}

/// The largest skew a [`FaultAction::SkewedClock`] applies: 100 years.
const MAX_SKEW_SECS: u64 = 100 * 365 * 24 * 3600;

/// The secret a [`FaultAction::RotatedSecret`] rotates in: no sender holds it.
const ROTATED_IN: &str = "whsec_cm90YXRlZC1pbi1ieS10aGUtY29udHJhY3Qtc2VydmVy";

/// `POST /api/v1/webhooks/<token>`.
pub(crate) async fn deliver(
    State(shared): State<WebhookState>,
    Path(token): Path<String>,
    fault: Option<axum::Extension<FaultAction>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    handle(&shared, None, &token, fault.map(|f| f.0), &headers, body).await
}

/// `POST /api/v1/webhooks/<org_domain>/<token>` (deprecated, still routes).
pub(crate) async fn deliver_legacy(
    State(shared): State<WebhookState>,
    Path((org, token)): Path<(String, String)>,
    fault: Option<axum::Extension<FaultAction>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    handle(
        &shared,
        Some(&org),
        &token,
        fault.map(|f| f.0),
        &headers,
        body,
    )
    .await
}

async fn handle(
    shared: &WebhookState,
    org_domain: Option<&str>,
    token: &str,
    fault: Option<FaultAction>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let principal = match shared.gate.authorize(headers, Scope::Webhooks) {
        Ok(p) => p,
        Err(denial) => return denial.webhook_response(),
    };
    let trigger = crate::lock(&shared.triggers).get(token).cloned();
    let Some(trigger) = trigger.filter(|t| {
        t.active
            && t.organization == principal.organization
            && org_domain.is_none_or(|d| d == t.organization)
    }) else {
        return webhook_error(StatusCode::NOT_FOUND, "Trigger not found");
    };
    let limits = &shared.limits;
    let now = shared.clock.now();
    let window = crate::lock(&shared.rates).hit(
        &format!("trigger:{token}"),
        limits.webhook_rate_limit,
        limits.webhook_rate_window,
        now,
    );
    let answer = match window {
        Ok(_) => admitted(shared, token, &trigger, fault, headers, body, now).await,
        Err(wait) => with_retry_after(
            webhook_error(StatusCode::TOO_MANY_REQUESTS, "Rate limit exceeded"),
            wait,
        ),
    };
    with_rate_limit_fields(answer, limits, window)
}

/// The answer with `RateLimit-Policy` and `RateLimit`, unless the server is configured
/// without them.
fn with_rate_limit_fields(
    mut answer: Response,
    limits: &Limits,
    window: Result<Left, Duration>,
) -> Response {
    if !limits.webhook_rate_limit_fields {
        return answer;
    }
    let left = window.unwrap_or_else(|wait| Left {
        remaining: 0,
        reset: wait,
    });
    let policy = format!(
        "\"trigger\";q={};w={}",
        limits.webhook_rate_limit,
        whole_seconds(limits.webhook_rate_window)
    );
    let remaining = format!(
        "\"trigger\";r={};t={}",
        left.remaining,
        whole_seconds(left.reset)
    );
    let headers = answer.headers_mut();
    for (name, value) in [("ratelimit-policy", policy), ("ratelimit", remaining)] {
        if let Ok(value) = axum::http::HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    answer
}

/// Whole seconds, rounded up, at least 1.
fn whole_seconds(span: Duration) -> u64 {
    (span.as_secs() + u64::from(span.subsec_nanos() > 0)).max(1)
}

/// A delivery the trigger's window admitted: its body, signature, identity and run.
async fn admitted(
    shared: &WebhookState,
    token: &str,
    trigger: &TriggerSeed,
    fault: Option<FaultAction>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    now: SystemTime,
) -> Response {
    let limits = &shared.limits;
    let body = match body_within(body, limits.webhook_body_limit) {
        Ok(body) => body,
        Err(BodyRefusal::TooLarge) => {
            return webhook_error(StatusCode::PAYLOAD_TOO_LARGE, "Request body too large");
        }
        Err(BodyRefusal::Unreadable(rejection)) => return rejection.into_response(),
    };
    if !trigger.signing_secrets.is_empty() {
        // Before deduplication: a refused delivery's identity is not recorded, so a corrected
        // retry with the same ID runs once.
        let (check_at, rotated);
        let secrets = match &fault {
            Some(FaultAction::RotatedSecret) => {
                rotated = [ROTATED_IN.to_owned()];
                check_at = now;
                &rotated[..]
            }
            Some(FaultAction::SkewedClock { skew_secs }) => {
                // Clamped, so that no fault sent to the control endpoint overflows the clock.
                let skew = Duration::from_secs(skew_secs.unsigned_abs().min(MAX_SKEW_SECS));
                check_at = if *skew_secs >= 0 {
                    now + skew
                } else {
                    now - skew
                };
                &trigger.signing_secrets[..]
            }
            _ => {
                check_at = now;
                &trigger.signing_secrets[..]
            }
        };
        let verdict = crate::signature::verify(headers, &body, secrets, check_at);
        crate::lock(&shared.ledger)
            .signature_checked(SignedRecord::new(headers, &body, verdict, check_at));
        if verdict != SignatureVerdict::Accepted {
            return webhook_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Unsupported trigger authentication",
            );
        }
    }
    if trigger.unsupported_auth {
        return webhook_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Unsupported trigger authentication",
        );
    }
    if serde_json::from_slice::<serde::de::IgnoredAny>(&body).is_err() {
        return webhook_error(StatusCode::UNPROCESSABLE_ENTITY, "Processing failed");
    }
    if let Some(FaultAction::FailExecution { status }) = fault {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        let failed = webhook_error(status, "Processing temporarily unavailable");
        // Hodoflow's webhook sender guide: a 503 always says when to come back.
        return if status == StatusCode::SERVICE_UNAVAILABLE {
            with_retry_after(failed, Duration::from_secs(1))
        } else {
            failed
        };
    }
    let identity = delivery_identity(headers, token, &body, now, limits.delivery_hash_bucket);
    let first = crate::lock(&shared.deliveries).first_time(
        &trigger.organization,
        &identity,
        now,
        limits.delivery_retention,
    );
    if !first {
        crate::lock(&shared.ledger).duplicate_answered(&identity);
        return (StatusCode::ACCEPTED, Json(json!({"status": "duplicate"}))).into_response();
    }
    let run_id = crate::lock(&shared.runs).create(
        &trigger.organization,
        trigger.run_outcome,
        now,
        limits.delivery_retention,
    );
    crate::lock(&shared.ledger).run_created(&identity, &run_id);
    if let Some(FaultAction::SlowExecution { delay_ms }) = fault {
        tokio::time::sleep(delay_ms).await;
    }
    (
        StatusCode::ACCEPTED,
        Json(json!({"status": "accepted", "workflow_run_id": run_id})),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const TWO_HOURS: Duration = Duration::from_secs(7200);

    #[test]
    fn identity_follows_header_precedence_and_ignores_request_id() {
        let now = UNIX_EPOCH;
        let mut headers = HeaderMap::new();
        headers.insert("x-request-id", HeaderValue::from_static("req-1"));
        headers.insert("x-twilio-idempotency-token", HeaderValue::from_static("tw"));
        assert_eq!(
            delivery_identity(&headers, "t", b"{}", now, TWO_HOURS),
            "tw"
        );
        headers.insert("x-shopify-webhook-id", HeaderValue::from_static("sh"));
        assert_eq!(
            delivery_identity(&headers, "t", b"{}", now, TWO_HOURS),
            "sh"
        );
        headers.insert("x-github-delivery", HeaderValue::from_static("gh"));
        assert_eq!(
            delivery_identity(&headers, "t", b"{}", now, TWO_HOURS),
            "gh"
        );
        headers.insert("idempotency-key", HeaderValue::from_static(" "));
        assert_eq!(
            delivery_identity(&headers, "t", b"{}", now, TWO_HOURS),
            "gh"
        );
        headers.insert("idempotency-key", HeaderValue::from_static("ik"));
        assert_eq!(
            delivery_identity(&headers, "t", b"{}", now, TWO_HOURS),
            "ik"
        );
    }

    #[test]
    fn hash_identity_changes_with_token_body_and_bucket() {
        let headers = HeaderMap::new();
        let t0 = UNIX_EPOCH + TWO_HOURS * 10;
        let id =
            |token: &str, body: &[u8], at| delivery_identity(&headers, token, body, at, TWO_HOURS);
        let base = id("t", b"{}", t0);
        assert!(base.starts_with("hash:"));
        assert_eq!(
            base,
            id("t", b"{}", t0 + TWO_HOURS - Duration::from_secs(1))
        );
        assert_ne!(base, id("t", b"{}", t0 + TWO_HOURS));
        assert_ne!(base, id("u", b"{}", t0));
        assert_ne!(base, id("t", b"{ }", t0));
    }
}
