//! The clients compared: the SDK, plain `reqwest`, and `reqwest-retry` over
//! `reqwest-middleware`, each set up as its user would.
//!
//! [`Sender`] is on reqwest 0.12 (`reqwest012`), which reqwest-retry 0.8 and
//! reqwest-middleware 0.4 need; the SDK and the memory scenario's plain reqwest are on 0.13.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN};
use hodoflow_retry::{Backoff, RetryBudget, RetryingClient};
use http::{HeaderValue, StatusCode};
use reqwest_middleware::ClientWithMiddleware;
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;

use crate::Result;

/// The backoff used where a scenario's figures depend on time: 50 ms doubling to 2 s, full
/// jitter. The SDK's default is 500 ms doubling to 30 s.
pub(crate) const FAST_BASE: Duration = Duration::from_millis(50);
/// The cap of the fast backoff.
pub(crate) const FAST_CAP: Duration = Duration::from_secs(2);

/// The SDK's client for the demo credentials, with `backoff` and `retry_budget`.
pub(crate) fn sdk(
    base_url: &str,
    backoff: Backoff,
    retry_budget: RetryBudget,
) -> Result<RetryingClient> {
    Ok(RetryingClient::builder(base_url)
        .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .backoff(backoff)
        .retry_budget(retry_budget)
        .build()?)
}

/// The HTTP client the SDK built for itself on reqwest 0.12: reqwest's default pool (no idle
/// limit, 90 s idle timeout), redirects off, rustls.
pub(crate) fn http_client() -> Result<reqwest012::Client> {
    Ok(reqwest012::Client::builder()
        .redirect(reqwest012::redirect::Policy::none())
        .build()?)
}

/// `reqwest-retry`'s exponential policy with 4 retries (5 attempts): full jitter, doubling
/// from `min` up to `max`. Its own default range is 1 s to 30 min.
pub(crate) fn retry_policy(min: Duration, max: Duration) -> ExponentialBackoff {
    ExponentialBackoff::builder()
        .retry_bounds(min, max)
        .build_with_max_retries(4)
}

/// How a report describes the SDK run with its defaults.
pub(crate) const SDK_DEFAULTS: &str =
    "defaults (5 attempts, backoff 500 ms..30 s, retry budget 500 tokens)";

/// How a report describes [`default_retry_policy`].
pub(crate) const REQWEST_RETRY_DEFAULTS: &str =
    "ExponentialBackoff::builder().build_with_max_retries(4): full jitter, 1 s doubling";

/// `reqwest-retry`'s policy as its documentation builds it: 4 retries, defaults otherwise.
pub(crate) fn default_retry_policy() -> ExponentialBackoff {
    ExponentialBackoff::builder().build_with_max_retries(4)
}

/// A webhook sender on a bare HTTP client: what a user of plain `reqwest` (or of
/// `reqwest-retry`, through [`Sender::with_retry`]) writes. It exchanges one token up front
/// and sends the same headers as the SDK.
#[derive(Debug, Clone)]
pub(crate) struct Sender {
    client: ClientWithMiddleware,
    base_url: String,
    url: String,
    authorization: HeaderValue,
    attempts: Option<Arc<AtomicU64>>,
}

impl Sender {
    /// Plain `reqwest`, no retry.
    pub(crate) async fn plain(base_url: &str) -> Result<Self> {
        let http = http_client()?;
        let authorization = bearer(&http, base_url).await?;
        Ok(Self {
            client: reqwest_middleware::ClientBuilder::new(http).build(),
            base_url: base_url.to_owned(),
            url: webhook_url(base_url, DEMO_TRIGGER_TOKEN),
            authorization,
            attempts: None,
        })
    }

    /// `reqwest` wrapped in `RetryTransientMiddleware` with `policy`, and inside it a
    /// middleware that counts the attempts the retry middleware sends.
    pub(crate) async fn with_retry(base_url: &str, policy: ExponentialBackoff) -> Result<Self> {
        let http = http_client()?;
        let authorization = bearer(&http, base_url).await?;
        let attempts = Arc::new(AtomicU64::new(0));
        Ok(Self {
            client: reqwest_middleware::ClientBuilder::new(http)
                .with(RetryTransientMiddleware::new_with_policy(policy))
                .with(CountAttempts(attempts.clone()))
                .build(),
            base_url: base_url.to_owned(),
            url: webhook_url(base_url, DEMO_TRIGGER_TOKEN),
            authorization,
            attempts: Some(attempts),
        })
    }

    /// Attempts sent so far, counted under the retry middleware; `None` for plain reqwest.
    pub(crate) fn attempts(&self) -> Option<u64> {
        self.attempts.as_ref().map(|n| n.load(Ordering::Relaxed))
    }

    /// Posts `body` to the demo trigger, with `Idempotency-Key: id` when given, and reads the
    /// answer's body. Errors are what the client returned: no answer, after its retries.
    pub(crate) async fn deliver(&self, id: Option<&str>, body: Bytes) -> Result<StatusCode> {
        self.post(&self.url, id, body).await
    }

    /// [`Sender::deliver`] to the trigger `token` of the demo organization.
    pub(crate) async fn deliver_to(
        &self,
        token: &str,
        id: Option<&str>,
        body: Bytes,
    ) -> Result<StatusCode> {
        self.post(&webhook_url(&self.base_url, token), id, body)
            .await
    }

    async fn post(&self, url: &str, id: Option<&str>, body: Bytes) -> Result<StatusCode> {
        let mut request = self
            .client
            .post(url)
            .header(http::header::AUTHORIZATION, self.authorization.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(id) = id {
            request = request.header("idempotency-key", id);
        }
        let response = request.send().await?;
        let status = response.status();
        // Read the answer as a user would: the run ID, or `duplicate`.
        let body = response.bytes().await?;
        if status == StatusCode::ACCEPTED {
            serde_json::from_slice::<Accepted>(&body)?;
        }
        Ok(status)
    }
}

/// A `202` answer's body.
#[derive(Debug, serde::Deserialize)]
#[allow(dead_code)] // Parsed for the cost of parsing; the fields are not read.
struct Accepted {
    status: String,
    workflow_run_id: Option<String>,
}

fn webhook_url(base_url: &str, token: &str) -> String {
    format!("{base_url}/api/v1/webhooks/{token}")
}

/// Counts every request that passes through it.
struct CountAttempts(Arc<AtomicU64>);

#[async_trait::async_trait]
impl reqwest_middleware::Middleware for CountAttempts {
    async fn handle(
        &self,
        request: reqwest012::Request,
        extensions: &mut http::Extensions,
        next: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest012::Response> {
        self.0.fetch_add(1, Ordering::Relaxed);
        next.run(request, extensions).await
    }
}

/// Exchanges the demo credentials for a bearer token, as a plain reqwest user would.
async fn bearer(http: &reqwest012::Client, base_url: &str) -> Result<HeaderValue> {
    let form = format!(
        "grant_type=client_credentials&client_id={DEMO_CLIENT_ID}&client_secret={DEMO_CLIENT_SECRET}"
    );
    let response = http
        .post(format!("{base_url}/oauth/token"))
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form)
        .send()
        .await?
        .error_for_status()?;
    let token: serde_json::Value = serde_json::from_slice(&response.bytes().await?)?;
    let token = token["access_token"]
        .as_str()
        .ok_or("the token response has no access_token")?;
    Ok(HeaderValue::from_str(&format!("Bearer {token}"))?)
}
