//! The bearer check and rate budget every Hodoflow surface runs first, and the store of the
//! tokens it checks.
//!
//! Apart from `POST /oauth/token` (`auth.rs`), which fills the store, and from the surfaces
//! that run the check, so that each of them takes the [`Gate`] as its own sub-state and none
//! reaches into another's module for it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::clock::Clock;
use crate::config::{Limits, Scope};
use crate::rate::FixedWindows;
use crate::reply::{api_error, webhook_error, with_retry_after};

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

    /// The webhook answer (Hodoflow's webhook sender guide): an expired or missing token is
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

    /// Keeps a token issued at `now` for `ttl`, and its expiry for `memory` after.
    pub(crate) fn issue(
        &mut self,
        token: String,
        principal: Principal,
        scopes: Vec<Scope>,
        now: SystemTime,
        ttl: Duration,
        memory: Duration,
    ) {
        self.prune(now);
        self.tokens.insert(
            token.clone(),
            Issued {
                principal,
                scopes,
                expires_at: now + ttl,
            },
        );
        self.forget.push_back((now + ttl + memory, token));
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

/// The token of a `Bearer` (or `bearer`) `Authorization` header, trimmed, maybe empty.
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
}

/// The bearer check and the per-credential rate budget, with the stores they read.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    pub clock: Arc<dyn Clock>,
    pub limits: Arc<Limits>,
    pub tokens: Arc<Mutex<TokenStore>>,
    pub rates: Arc<Mutex<FixedWindows>>,
}

impl Gate {
    /// Checks the bearer token of a request for `scope`.
    pub(crate) fn authorize(&self, headers: &HeaderMap, scope: Scope) -> Result<Principal, Denial> {
        let token = bearer_token(headers)
            .filter(|t| !t.is_empty())
            .ok_or(Denial::Missing)?;
        crate::lock(&self.tokens).check(token, scope, self.clock.now())
    }

    /// Authorizes `scope` and counts the request against the credential's rate budget.
    pub(crate) fn api(&self, headers: &HeaderMap, scope: Scope) -> Result<Principal, Refusal> {
        let principal = self.authorize(headers, scope).map_err(Refusal::Denied)?;
        if let Some(limit) = self.limits.api_rate_limit {
            let now = self.clock.now();
            let window = self.limits.api_rate_window;
            let subject = format!("client:{}", principal.client_id);
            crate::lock(&self.rates)
                .hit(&subject, limit, window, now)
                .map_err(Refusal::RateLimited)?;
        }
        Ok(principal)
    }
}

/// Why the API gate refused a request.
#[derive(Debug)]
pub(crate) enum Refusal {
    Denied(Denial),
    RateLimited(Duration),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Denied(denial) => denial.api_response(),
            Refusal::RateLimited(wait) => {
                let refused = api_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    "Rate limit exceeded",
                );
                with_retry_after(refused, wait)
            }
        }
    }
}
