//! `POST /oauth/token` and the bearer check every surface runs first.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::SystemTime;

use axum::Json;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::config::Scope;
use crate::reply::{api_error, webhook_error};
use crate::state::Shared;

/// Who a valid bearer token speaks for.
#[derive(Debug, Clone)]
pub(crate) struct Principal {
    pub client_id: String,
    pub organization: String,
}

/// Why a request was not authorized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Denial {
    Missing,
    Expired,
    Unknown,
    InsufficientScope,
}

impl Denial {
    /// The JSON:API and GraphQL answer.
    pub(crate) fn api_response(self) -> Response {
        let (status, title) = match self {
            Denial::Missing => (StatusCode::UNAUTHORIZED, "Missing bearer token"),
            Denial::Expired => (StatusCode::UNAUTHORIZED, "Access token expired"),
            Denial::Unknown => (StatusCode::UNAUTHORIZED, "Invalid access token"),
            Denial::InsufficientScope => (StatusCode::FORBIDDEN, "Insufficient scope"),
        };
        let code = if status == StatusCode::FORBIDDEN {
            "forbidden"
        } else {
            "unauthorized"
        };
        let mut response = api_error(status, code, title);
        if self == Denial::Expired {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(
                    r#"Bearer error="invalid_token", error_description="The access token expired""#,
                ),
            );
        }
        response
    }

    /// The webhook answer (document 001): an expired or missing token is
    /// `missing_credentials` (exchange once, retry once); an unknown one is
    /// `Unauthorized` (fix authentication).
    pub(crate) fn webhook_response(self) -> Response {
        match self {
            Denial::Missing | Denial::Expired => {
                webhook_error(StatusCode::UNAUTHORIZED, "missing_credentials")
            }
            Denial::Unknown => webhook_error(StatusCode::UNAUTHORIZED, "Unauthorized"),
            Denial::InsufficientScope => webhook_error(StatusCode::FORBIDDEN, "Insufficient scope"),
        }
    }
}

#[derive(Debug)]
struct Issued {
    principal: Principal,
    scopes: Vec<Scope>,
    expires_at: SystemTime,
}

/// Issued tokens, forgotten `expired_token_memory` after they expire.
#[derive(Default)]
pub(crate) struct TokenStore {
    tokens: HashMap<String, Issued>,
    /// (forget at, token), in issue order; the TTL is fixed, so also in time order.
    forget: VecDeque<(SystemTime, String)>,
}

/// Counts only: the keys are bearer tokens.
impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStore")
            .field("tokens", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

impl TokenStore {
    fn prune(&mut self, now: SystemTime) {
        while let Some((at, _)) = self.forget.front() {
            if *at > now {
                break;
            }
            if let Some((_, token)) = self.forget.pop_front() {
                self.tokens.remove(&token);
            }
        }
    }

    fn check(&mut self, token: &str, scope: Scope, now: SystemTime) -> Result<Principal, Denial> {
        self.prune(now);
        let issued = self.tokens.get(token).ok_or(Denial::Unknown)?;
        if issued.expires_at <= now {
            return Err(Denial::Expired);
        }
        if !issued.scopes.contains(&scope) {
            return Err(Denial::InsufficientScope);
        }
        Ok(issued.principal.clone())
    }
}

/// Checks the bearer token of a request for `scope`.
pub(crate) fn authorize(
    shared: &Shared,
    headers: &HeaderMap,
    scope: Scope,
) -> Result<Principal, Denial> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(Denial::Missing)?;
    crate::lock(&shared.tokens).check(token, scope, shared.clock.now())
}

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

/// `POST /oauth/token`: client credentials for a bearer token.
pub(crate) async fn exchange(
    State(shared): State<Arc<Shared>>,
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
        shared.record_exchange(&client_id, false);
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
                    shared.record_exchange(&client_id, false);
                    return oauth_error(StatusCode::BAD_REQUEST, "invalid_scope");
                }
            }
        }
    };
    let token = format!("hft_{}", uuid::Uuid::new_v4().simple());
    let ttl = shared.limits.token_ttl;
    {
        let mut store = crate::lock(&shared.tokens);
        store.prune(now);
        store.tokens.insert(
            token.clone(),
            Issued {
                principal: Principal {
                    client_id: client.client_id.clone(),
                    organization: client.organization.clone(),
                },
                scopes: scopes.clone(),
                expires_at: now + ttl,
            },
        );
        store.forget.push_back((
            now + ttl + shared.limits.expired_token_memory,
            token.clone(),
        ));
    }
    shared.record_exchange(&client_id, true);
    let scope: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
    Json(json!({
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": ttl.as_secs(),
        "scope": scope.join(" "),
    }))
    .into_response()
}
