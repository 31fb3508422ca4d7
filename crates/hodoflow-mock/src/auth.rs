//! `POST /oauth/token`: client credentials for a bearer token. The tokens it issues are kept
//! in the store of the bearer check (`gate.rs`), which every other surface runs first.

use axum::Json;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::config::Scope;
use crate::fault::FaultAction;
use crate::gate::Principal;
use crate::ledger::ExchangeRecord;
use crate::state::ExchangeState;

/// The form of a client-credentials exchange.
#[derive(Debug, Deserialize)]
pub(crate) struct TokenRequest {
    grant_type: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    scope: Option<String>,
}

fn oauth_error(status: StatusCode, error: &str) -> Response {
    (status, Json(json!({"error": error}))).into_response()
}

fn record_exchange(shared: &ExchangeState, client_id: &str, granted: bool) {
    let record = ExchangeRecord {
        client_id: client_id.to_owned(),
        granted,
        at: shared.clock.now(),
    };
    crate::lock(&shared.ledger).exchanged(record);
}

/// `POST /oauth/token`: client credentials for a bearer token. A
/// [`FaultAction::StatedExpiresIn`] changes only what the answer says of its lifetime; a
/// [`FaultAction::IssuedToken`] chooses the token's text.
pub(crate) async fn exchange(
    State(shared): State<ExchangeState>,
    fault: Option<axum::Extension<FaultAction>>,
    form: Result<Form<TokenRequest>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_request");
    };
    if form.grant_type.as_deref() != Some("client_credentials") {
        return oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type");
    }
    let client_id = form.client_id.unwrap_or_default();
    let client = shared
        .clients
        .get(&client_id)
        .filter(|c| Some(c.client_secret.as_str()) == form.client_secret.as_deref());
    let now = shared.clock.now();
    let Some(client) = client else {
        record_exchange(&shared, &client_id, false);
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    };
    let scopes = match form
        .scope
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        None => client.scopes.clone(),
        Some(asked) => {
            let parsed: Option<Vec<Scope>> = asked.split_whitespace().map(Scope::parse).collect();
            match parsed {
                Some(scopes) if scopes.iter().all(|s| client.scopes.contains(s)) => scopes,
                _ => {
                    record_exchange(&shared, &client_id, false);
                    return oauth_error(StatusCode::BAD_REQUEST, "invalid_scope");
                }
            }
        }
    };
    let token = match &fault {
        Some(axum::Extension(FaultAction::IssuedToken { access_token })) => access_token.clone(),
        _ => format!("hft_{}", uuid::Uuid::new_v4().simple()),
    };
    let ttl = shared.limits.token_ttl;
    let principal = Principal {
        client_id: client.client_id.clone(),
        organization: client.organization.clone(),
    };
    crate::lock(&shared.tokens).issue(
        token.clone(),
        principal,
        scopes.clone(),
        now,
        ttl,
        shared.limits.expired_token_memory,
    );
    record_exchange(&shared, &client_id, true);
    let scope: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
    let mut answer = json!({
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": ttl.as_secs(),
        "scope": scope.join(" "),
    });
    if let Some(axum::Extension(FaultAction::StatedExpiresIn { expires_in })) = fault {
        match expires_in {
            Some(stated) => answer["expires_in"] = stated,
            None => {
                if let Some(fields) = answer.as_object_mut() {
                    fields.remove("expires_in");
                }
            }
        }
    }
    Json(answer).into_response()
}
