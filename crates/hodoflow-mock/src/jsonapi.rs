//! JSON:API reads and unsafe writes (Hodoflow's "Idempotency and retries"), writes guarded by the
//! Idempotency-Key store.

use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::config::Scope;
use crate::fault::FaultAction;
use crate::gate::Principal;
use crate::idempotency::{
    Claim, ScopedKey, Stored, fingerprint, replay, stored_response, valid_key,
};
use crate::reply::{BodyRefusal, api_document, api_error, body_within};
use crate::state::ApiState;

fn resource(kind: &str, id: &str, attributes: &Map<String, Value>) -> Value {
    json!({"type": kind, "id": id, "attributes": attributes})
}

fn not_found() -> Response {
    api_error(StatusCode::NOT_FOUND, "not_found", "Resource not found")
}

/// `GET /api/json/v1/<type>`.
pub(crate) async fn list(
    State(shared): State<ApiState>,
    Path(kind): Path<String>,
    headers: HeaderMap,
) -> Response {
    let principal = match shared.gate.api(&headers, Scope::ApiRead) {
        Ok(p) => p,
        Err(refused) => return refused.into_response(),
    };
    let org = principal.organization;
    let data: Vec<Value> = {
        let resources = crate::lock(&shared.resources);
        let from = (org.clone(), kind.clone(), String::new());
        resources
            .range(from..)
            .take_while(|((o, k, _), _)| *o == org && *k == kind)
            .map(|((_, k, id), attrs)| resource(k, id, attrs))
            .collect()
    };
    api_document(StatusCode::OK, &json!({"data": data}))
}

/// `GET /api/json/v1/<type>/<id>`.
pub(crate) async fn show(
    State(shared): State<ApiState>,
    Path((kind, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let principal = match shared.gate.api(&headers, Scope::ApiRead) {
        Ok(p) => p,
        Err(refused) => return refused.into_response(),
    };
    let key = (principal.organization, kind, id);
    let found = crate::lock(&shared.resources).get(&key).cloned();
    match found {
        Some(attrs) => api_document(
            StatusCode::OK,
            &json!({"data": resource(&key.1, &key.2, &attrs)}),
        ),
        None => not_found(),
    }
}

/// `POST /api/json/v1/<type>`.
pub(crate) async fn create(
    State(shared): State<ApiState>,
    Path(kind): Path<String>,
    fault: Option<axum::Extension<FaultAction>>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let target = Target { kind, id: None };
    write(
        &shared,
        Method::POST,
        &uri,
        target,
        fault.map(|f| f.0),
        &headers,
        body,
    )
    .await
}

/// `PUT`, `PATCH` or `DELETE /api/json/v1/<type>/<id>`.
pub(crate) async fn change(
    State(shared): State<ApiState>,
    Path((kind, id)): Path<(String, String)>,
    fault: Option<axum::Extension<FaultAction>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let target = Target { kind, id: Some(id) };
    write(
        &shared,
        method,
        &uri,
        target,
        fault.map(|f| f.0),
        &headers,
        body,
    )
    .await
}

/// What a write addresses.
#[derive(Debug)]
struct Target {
    kind: String,
    id: Option<String>,
}

async fn write(
    shared: &ApiState,
    method: Method,
    uri: &Uri,
    target: Target,
    fault: Option<FaultAction>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let principal = match shared.gate.api(headers, Scope::ApiWrite) {
        Ok(p) => p,
        Err(refused) => return refused.into_response(),
    };
    let body = match body_within(body, shared.limits.api_body_limit) {
        Ok(body) => body,
        Err(BodyRefusal::TooLarge) => {
            return api_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "Request body too large",
            );
        }
        Err(BodyRefusal::Unreadable(rejection)) => return rejection.into_response(),
    };
    let key = match headers.get("idempotency-key").map(|v| v.to_str()) {
        None => None,
        Some(Ok(k)) if valid_key(k) => Some(ScopedKey {
            organization: principal.organization.clone(),
            principal: principal.client_id.clone(),
            key: k.to_owned(),
        }),
        Some(_) => {
            return api_error(
                StatusCode::BAD_REQUEST,
                "invalid_idempotency_key",
                "Idempotency-Key must be 1 to 255 visible ASCII characters",
            );
        }
    };
    let limits = &shared.limits;
    if let Some(key) = &key {
        let print = fingerprint(method.as_str(), uri.path(), &body);
        let claim = crate::lock(&shared.keys).claim(
            key,
            print,
            shared.clock.now(),
            limits.reservation_timeout,
            limits.idempotency_retention,
        );
        match claim {
            Claim::Run => {}
            Claim::Replay(stored) => return replay(stored),
            Claim::Reused => {
                return api_error(
                    StatusCode::CONFLICT,
                    "idempotency_key_reused",
                    "Idempotency-Key was used with a different request",
                );
            }
            Claim::InProgress => {
                return api_error(
                    StatusCode::CONFLICT,
                    "idempotency_key_in_progress",
                    "A request with this Idempotency-Key is still running",
                );
            }
        }
    }
    match fault {
        Some(FaultAction::SlowExecution { delay_ms }) => tokio::time::sleep(delay_ms).await,
        Some(FaultAction::FailExecution { status }) => {
            if let Some(key) = &key {
                crate::lock(&shared.keys).release(key);
            }
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let code = if status == StatusCode::SERVICE_UNAVAILABLE {
                "unavailable"
            } else {
                "internal_error"
            };
            return api_error(status, code, "The write failed and was not retained");
        }
        _ => {}
    }
    let (status, document) = execute(shared, &principal, &method, target, &body);
    if status.is_success() {
        crate::lock(&shared.ledger).write_executed(key.as_ref().map(|k| k.key.as_str()));
    }
    let stored = Stored {
        status,
        content_type: document.as_ref().map(|_| crate::reply::JSON_API.to_owned()),
        body: document
            .map(|d| Bytes::from(d.to_string()))
            .unwrap_or_default(),
    };
    if let Some(key) = &key {
        crate::lock(&shared.keys).complete(key, stored.clone(), shared.clock.now());
    }
    stored_response(stored)
}

/// Runs a write; the answer's status and document (none for 204).
fn execute(
    shared: &ApiState,
    principal: &Principal,
    method: &Method,
    target: Target,
    body: &[u8],
) -> (StatusCode, Option<Value>) {
    let invalid = |title: &str| {
        let errors =
            json!({"errors": [{"status": "422", "code": "validation_failed", "title": title}]});
        (StatusCode::UNPROCESSABLE_ENTITY, Some(errors))
    };
    let missing = || {
        let errors = json!({"errors": [{"status": "404", "code": "not_found", "title": "Resource not found"}]});
        (StatusCode::NOT_FOUND, Some(errors))
    };
    let org = principal.organization.clone();
    let mut resources = crate::lock(&shared.resources);
    if *method == Method::DELETE {
        let id = target.id.unwrap_or_default();
        return match resources.remove(&(org, target.kind, id)) {
            Some(_) => (StatusCode::NO_CONTENT, None),
            None => missing(),
        };
    }
    let Ok(document) = serde_json::from_slice::<Value>(body) else {
        return invalid("Body is not a JSON:API document");
    };
    let data = &document["data"];
    if data["type"].as_str() != Some(target.kind.as_str()) {
        return invalid("data.type must match the resource type of the path");
    }
    let attributes = match &data["attributes"] {
        Value::Null => Map::new(),
        Value::Object(attrs) => attrs.clone(),
        _ => return invalid("data.attributes must be an object"),
    };
    match target.id {
        None => {
            let id = uuid::Uuid::new_v4().to_string();
            let created = resource(&target.kind, &id, &attributes);
            resources.insert((org, target.kind, id), attributes);
            (StatusCode::CREATED, Some(json!({"data": created})))
        }
        Some(id) => {
            if data["id"].as_str().is_some_and(|given| given != id) {
                return invalid("data.id must match the id of the path");
            }
            let key = (org, target.kind, id);
            let Some(current) = resources.get_mut(&key) else {
                return missing();
            };
            if *method == Method::PATCH {
                current.extend(attributes);
            } else {
                *current = attributes;
            }
            (
                StatusCode::OK,
                Some(json!({"data": resource(&key.1, &key.2, current)})),
            )
        }
    }
}
