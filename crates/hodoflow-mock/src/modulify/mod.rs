//! Modulify (`docs/wire-contract.md`, "Modulify"): `POST /v1/<method>` and the catalogue `GET
//! /v1/tools`, beside the Hodoflow routes on the same port.
//!
//! # Why a second API
//!
//! Modulify's contract differs from Hodoflow's on exactly the points a retry client must get
//! right, so the SDK needs a server that holds it to them: a key reused with another body is
//! **422** (Hodoflow: 409); a bad key is **400**; a **409** means "the same key is still
//! running: wait `Retry-After`, retry"; only successes are kept (Hodoflow keeps 4xx); an answer
//! over 1 MB is not replayed, its repeat gets `data: null` and must read the current state; the
//! token is static (no exchange); and replays are free against the per-minute budget.
//!
//! # A call, in order
//!
//! 1. The bearer token: missing or unknown, 401 `unauthorized`. Then a request that names no
//!    method (another HTTP method than `POST`, or a path such as `/v1/`, `/v1/a/b` or
//!    `/v1/send_message/`) is 404 `not_found`, with `Allow` where the path takes other methods:
//!    Modulify's table has no 405, and its 404 is "unknown method or object".
//! 2. `Idempotency-Key`, when sent: empty, over 255 bytes or outside 0x21-0x7E, 400
//!    `invalid_idempotency_key`.
//! 3. The body: over `modulify_body_limit`, 413 `payload_too_large`.
//! 4. The method: not in the catalogue, 404 `not_found`; not allowed to the token, 403
//!    `forbidden`.
//! 5. The key (per token; fingerprint = method and raw body bytes): a kept success is replayed
//!    here with `idempotency-replayed: true`, before the budget, so it is free and answered even
//!    when the budget is spent.
//! 6. The token's per-minute budget (`modulify_rate_limit` calls a `modulify_rate_window`):
//!    spent, 429 `rate_limited` with `Retry-After`. Every call that gets here counts.
//! 7. The key again: held by a request still running, 409 `idempotency_key_in_progress` with
//!    `Retry-After`; bound to another method or body, 422 `idempotency_key_reused`.
//! 8. The run: a body that is not a JSON object is 400 `invalid_request`; wrong parameters 422
//!    `validation_failed`; an unknown object 404 `not_found`. Any of these, and any 5xx,
//!    releases the key. A success is kept for `modulify_retention`, unless its body is over
//!    `modulify_answer_kept_limit`: then its repeat gets the original status and
//!    `{"data": null, "message": "the original answer was larger than 1 MB and is not kept:
//!    read the current state instead"}`, without running again.
//!
//! The `Content-Type` is not checked (the example of Modulify's "Idempotency and retries" is
//! `curl -d`, a form type): the body is. The catalogue read, `GET /v1/tools`, needs the token and
//! is not counted against the budget: it describes the API, as the OpenAPI description does.
//!
//! # Body conventions
//!
//! Success is `200 {"data": {...}}`; failure `{"data": null, "error": {"code", "message"}}`.
//!
//! - Any method: `"answer_bytes": N` pads the success answer with `data.padding` so its body is
//!   at least N bytes (at most 64 MiB), for the "answer over 1 MB is not kept" rule.
//! - A run that executes (any method the catalogue does not mark read-only) carries
//!   `data.execution`, its server-wide number from 1, so a test tells two runs apart; a read
//!   carries none and is not counted as an execution.
//! - `get_site`, `delete_site`: `projectId`; `rename_site`: `projectId`, non-empty `name`;
//!   `duplicate_site`: `projectId`, optional `name`. An unknown `projectId` is 404 `not_found`.
//!   A site reads as `{"id", "name", "messages", "emails", "backups"}`.
//! - `list_sites`: nothing; `{"sites": [...]}`.
//! - `create_site`: non-empty string `name`.
//! - `send_message`: strings `projectId` and `prompt` (the project need not exist).
//! - `send_site_email`, `create_backup`: optional string `projectId`.
//! - `set_job_enabled`: non-empty string `jobId`, boolean `enabled`.
//! - A seeded tool ([`ToolSeed`]): any JSON object; `{"tool": name}`.
//!
//! A missing or wrong field is 422 `validation_failed`. Injected [`Fault`](crate::Fault)s apply
//! as to the Hodoflow routes: `fail_execution` answers its 5xx after the key is claimed and
//! releases it, nothing run; `slow_execution` holds the key while the run waits.

mod catalogue;
mod methods;
pub(crate) mod store;

use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRef, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use bytes::Bytes;
use serde_json::{Value, json};

pub use catalogue::ToolSeed;

use crate::fault::FaultAction;
use crate::idempotency::{Claim, ScopedKey, Stored, fingerprint, replay, valid_key};
use crate::reply::{BodyRefusal, body_within, modulify_error, with_retry_after};
use crate::state::ModulifyState;
use methods::Failure;
use store::Account;

/// The message of a repeat whose original answer was too large to keep (Modulify's
/// "Idempotency and retries"; the words are `docs/wire-contract.md`'s).
pub(crate) const NOT_KEPT_MESSAGE: &str =
    "the original answer was larger than 1 MB and is not kept: read the current state instead";

/// The largest `answer_bytes` a call may ask for.
const MAX_ANSWER_BYTES: u64 = 64 << 20;

/// The scope of Modulify keys in [`ScopedKey::organization`]; the principal is the token's
/// index, never the token itself.
const KEY_SCOPE: &str = "modulify";

/// 401 `unauthorized`, also the form of an `expired_token` fault on these routes.
pub(crate) fn unauthorized() -> Response {
    modulify_error(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "missing or unknown API token",
    )
}

pub(crate) fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    ModulifyState: FromRef<S>,
{
    Router::new()
        .route("/v1/tools", get(tools).post(call).fallback(unrouted))
        .route("/v1/{*method}", any(call))
        .route("/v1", any(unrouted))
        .route("/v1/", any(unrouted))
}

/// Every other HTTP method on a Modulify path, and every path under `/v1/` that names no
/// method (`/v1/`, `/v1/a/b`, `/v1/send_message/`): after the token, 404 `not_found` in
/// Modulify's error shape, never axum's bare 405 or 404.
///
/// Modulify's table has no 405: its 404 is "unknown method or object", and an HTTP method
/// and path that name no Modulify method are exactly that. A 400 `invalid_request` would tell
/// the caller to fix the body, which is not what is wrong. `Allow` says what the path takes.
async fn unrouted(
    State(shared): State<ModulifyState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if shared.modulify.authorize(&headers).is_none() {
        return unauthorized();
    }
    not_routed(&method, &uri)
}

/// 404 `not_found` for a request that names no Modulify method: see [`unrouted`].
fn not_routed(method: &Method, uri: &Uri) -> Response {
    let path = uri.path();
    let name = path.strip_prefix("/v1/").unwrap_or_default();
    let (allow, message) = if path == "/v1/tools" {
        (
            "GET, POST",
            format!("{method} {path} is no call: read the catalogue with GET"),
        )
    } else if !name.is_empty() && !name.contains('/') {
        (
            "POST",
            format!("{method} {path} is no call: call methods with POST"),
        )
    } else {
        ("", format!("no method at {path}: call POST /v1/<method>"))
    };
    let mut refused = modulify_error(StatusCode::NOT_FOUND, "not_found", &message);
    if !allow.is_empty() {
        refused
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(allow));
    }
    refused
}

/// `GET /v1/tools`.
async fn tools(State(shared): State<ModulifyState>, headers: HeaderMap) -> Response {
    let modulify = &shared.modulify;
    if modulify.authorize(&headers).is_none() {
        return unauthorized();
    }
    Json(modulify.catalogue.to_json()).into_response()
}

/// `POST /v1/<method>`; any other request under `/v1/` is [`unrouted`].
async fn call(
    State(shared): State<ModulifyState>,
    fault: Option<axum::Extension<FaultAction>>,
    http_method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let method = uri.path().strip_prefix("/v1/").unwrap_or_default();
    let modulify = &shared.modulify;
    let Some(account) = modulify.authorize(&headers) else {
        return unauthorized();
    };
    if http_method != Method::POST || method.is_empty() || method.contains('/') {
        return not_routed(&http_method, &uri);
    }
    let key = match headers.get("idempotency-key").map(|v| v.to_str()) {
        None => None,
        Some(Ok(k)) if valid_key(k) => Some(ScopedKey {
            organization: KEY_SCOPE.to_owned(),
            principal: account.id.clone(),
            key: k.to_owned(),
        }),
        Some(_) => {
            return modulify_error(
                StatusCode::BAD_REQUEST,
                "invalid_idempotency_key",
                "Idempotency-Key must be 1 to 255 visible ASCII characters",
            );
        }
    };
    let body = match body_within(body, shared.limits.modulify_body_limit) {
        Ok(body) => body,
        Err(BodyRefusal::TooLarge) => {
            return modulify_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "request body too large",
            );
        }
        Err(BodyRefusal::Unreadable(_)) => {
            return modulify_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "the body could not be read",
            );
        }
    };
    let Some(tool) = modulify.catalogue.get(method) else {
        return modulify_error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("no method {method}"),
        );
    };
    if !account.seed.may_call(method) {
        return modulify_error(
            StatusCode::FORBIDDEN,
            "forbidden",
            &format!("this token may not call {method}"),
        );
    }
    let guarded = Guarded {
        shared: &shared,
        key: key.as_ref(),
    };
    guarded
        .run(account, tool, fault.map(|f| f.0), &uri, &body)
        .await
}

/// A call past its checks, with its key if it has one: every way out of a run that claimed the
/// key either completes it with a success or releases it.
struct Guarded<'a> {
    shared: &'a ModulifyState,
    key: Option<&'a ScopedKey>,
}

impl Guarded<'_> {
    async fn run(
        &self,
        account: &Account,
        tool: &ToolSeed,
        fault: Option<FaultAction>,
        uri: &Uri,
        body: &Bytes,
    ) -> Response {
        let shared = self.shared;
        let modulify = &shared.modulify;
        let limits = &shared.limits;
        let claim = self.key.map(|key| {
            crate::lock(&modulify.keys).claim(
                key,
                fingerprint("POST", uri.path(), body),
                shared.clock.now(),
                limits.reservation_timeout,
                limits.modulify_retention,
            )
        });
        if let (Some(key), Some(Claim::Replay(stored))) = (self.key, &claim) {
            crate::lock(&shared.ledger).modulify_replayed(&key.key);
            return replay(stored.clone());
        }
        let counted = crate::lock(&shared.rates).hit(
            &format!("modulify:{}", account.id),
            limits.modulify_rate_limit,
            limits.modulify_rate_window,
            shared.clock.now(),
        );
        if let Err(wait) = counted {
            if matches!(claim, Some(Claim::Run)) {
                self.release();
            }
            let refused = modulify_error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "the token's per-minute budget is spent",
            );
            return with_retry_after(refused, wait);
        }
        crate::lock(&shared.ledger).modulify_counted();
        match claim {
            Some(Claim::Reused) => {
                return modulify_error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "idempotency_key_reused",
                    "Idempotency-Key was used with another method or body",
                );
            }
            Some(Claim::InProgress) => return self.in_progress(),
            Some(Claim::Run | Claim::Replay(_)) | None => {}
        }
        match fault {
            Some(FaultAction::SlowExecution { delay_ms }) => self.hold(delay_ms).await,
            Some(FaultAction::FailExecution { status }) => {
                self.release();
                let status =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let code = if status == StatusCode::SERVICE_UNAVAILABLE {
                    "unavailable"
                } else {
                    "internal_error"
                };
                return modulify_error(status, code, "the call failed and was not kept");
            }
            _ => {}
        }
        match self.execute(tool, body) {
            Ok(answer) => self.keep(answer),
            Err(refused) => {
                self.release();
                refused.into_response()
            }
        }
    }

    fn release(&self) {
        if let Some(key) = self.key {
            crate::lock(&self.shared.modulify.keys).release(key);
        }
    }

    /// 409 with `Retry-After`: what is left of the `slow_execution` holding the key, rounded
    /// up, at least 1 s.
    fn in_progress(&self) -> Response {
        let until = self
            .key
            .and_then(|key| crate::lock(&self.shared.modulify.holding).get(key).copied());
        let left = until.map_or(Duration::ZERO, |t| {
            t.saturating_duration_since(Instant::now())
        });
        let refused = modulify_error(
            StatusCode::CONFLICT,
            "idempotency_key_in_progress",
            "a call with this Idempotency-Key is still running",
        );
        with_retry_after(refused, left)
    }

    /// Waits `delay` while the key stays reserved.
    async fn hold(&self, delay: Duration) {
        let holding = &self.shared.modulify.holding;
        if let Some(key) = self.key {
            crate::lock(holding).insert(key.clone(), Instant::now() + delay);
        }
        tokio::time::sleep(delay).await;
        if let Some(key) = self.key {
            crate::lock(holding).remove(key);
        }
    }

    /// Runs the method: the success body, or why it was refused.
    fn execute(&self, tool: &ToolSeed, body: &[u8]) -> Result<Bytes, Refusal> {
        let Ok(Value::Object(params)) = serde_json::from_slice::<Value>(body) else {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "the body must be a JSON object",
            ));
        };
        let invalid = |message: &str| {
            Refusal::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation_failed",
                message,
            )
        };
        let padded_to = match params.get("answer_bytes") {
            None => 0,
            Some(n) => match n.as_u64() {
                Some(n) if n <= MAX_ANSWER_BYTES => usize::try_from(n).unwrap_or(0),
                _ => return Err(invalid("answer_bytes must be a whole number up to 64 MiB")),
            },
        };
        let shared = self.shared;
        let ran = crate::lock(&shared.modulify.workspace).run(&tool.name, &params);
        let mut data = match ran {
            None => json!({"tool": tool.name}),
            Some(Ok(data)) => data,
            Some(Err(Failure::Invalid(message))) => return Err(invalid(&message)),
            Some(Err(Failure::Missing(message))) => {
                return Err(Refusal::new(StatusCode::NOT_FOUND, "not_found", &message));
            }
        };
        if !tool.only_reads() {
            let key = self.key.map(|k| k.key.as_str());
            let number = crate::lock(&shared.ledger).modulify_executed(&tool.name, key);
            data["execution"] = json!(number);
        }
        Ok(padded(data, padded_to))
    }

    /// Keeps a success for replay (or the note that it was too large to keep) and answers it.
    fn keep(&self, answer: Bytes) -> Response {
        let shared = self.shared;
        if let Some(key) = self.key {
            let body = if answer.len() > shared.limits.modulify_answer_kept_limit {
                let note = json!({"data": null, "message": NOT_KEPT_MESSAGE});
                Bytes::from(note.to_string())
            } else {
                answer.clone()
            };
            let stored = Stored {
                status: StatusCode::OK,
                content_type: Some("application/json".to_owned()),
                body,
            };
            crate::lock(&shared.modulify.keys).complete(key, stored, shared.clock.now());
        }
        let mut response = (StatusCode::OK, answer).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// A run refused with a 4xx; the key is released.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl Refusal {
    fn new(status: StatusCode, code: &'static str, message: &str) -> Self {
        Self {
            status,
            code,
            message: message.to_owned(),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        modulify_error(self.status, self.code, &self.message)
    }
}

/// `{"data": data}`, with `data.padding` so the body is at least `size` bytes.
fn padded(mut data: Value, size: usize) -> Bytes {
    let plain = json!({ "data": data }).to_string();
    if plain.len() >= size {
        return Bytes::from(plain);
    }
    data["padding"] = json!("");
    let short = json!({ "data": &data }).to_string().len();
    data["padding"] = json!("x".repeat(size.saturating_sub(short)));
    Bytes::from(json!({ "data": data }).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_makes_the_answer_exactly_the_size_asked_when_it_is_shorter() {
        let data = json!({"site": {"id": "s"}});
        let plain = padded(data.clone(), 0);
        assert_eq!(plain, json!({ "data": data }).to_string());
        assert!(padded(data.clone(), plain.len() + 1).len() > plain.len());
        for size in [plain.len() + 100, 1_048_577] {
            assert_eq!(padded(data.clone(), size).len(), size);
        }
    }
}
