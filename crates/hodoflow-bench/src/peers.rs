//! The clients compared: the SDK, plain `reqwest`, and the retrying peers a user would pick
//! today, each set up as its documentation shows:
//!
//! - `reqwest-retry` 0.9's `RetryTransientMiddleware` over `reqwest-middleware` 0.5;
//! - reqwest 0.13's built-in retry, `reqwest::retry::for_host(..)` with a `classify_fn`;
//! - `backon`'s `ExponentialBuilder` around the send, with `.adjust(..)` reading the last
//!   answer's `Retry-After`;
//! - this crate's own `RetryMiddleware` (feature `middleware`) in `RetryTransientMiddleware`'s
//!   place, the drop-in its docs describe.
//!
//! Every client is on reqwest 0.13, the SDK's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable as _};
use bytes::Bytes;
use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN};
use hodoflow_retry::{Backoff, Budget, HodoflowClient, limit::RetryBudget};
use http::{HeaderValue, StatusCode};
use reqwest_middleware::ClientWithMiddleware;
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;

use crate::Result;
use crate::size::Size;

/// The backoff used where a scenario's figures depend on time: 50 ms doubling to 2 s, full
/// jitter. The SDK's default is 500 ms doubling to 30 s.
pub(crate) const FAST_BASE: Duration = Duration::from_millis(50);
/// The cap of the fast backoff.
pub(crate) const FAST_CAP: Duration = Duration::from_secs(2);

/// The SDK's client for the demo credentials, with `backoff` and `retry_budget` and the
/// default call budget.
pub(crate) fn sdk(
    base_url: &str,
    backoff: Backoff,
    retry_budget: RetryBudget,
) -> Result<HodoflowClient> {
    sdk_within(base_url, backoff, retry_budget, Budget::new())
}

/// [`sdk`] with the call budget `budget` (`Budget::new()` is the builder's default).
pub(crate) fn sdk_within(
    base_url: &str,
    backoff: Backoff,
    retry_budget: RetryBudget,
    budget: Budget,
) -> Result<HodoflowClient> {
    Ok(HodoflowClient::builder(base_url)
        .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .budget(budget)
        .backoff(backoff)
        .retry_budget(retry_budget)
        .build()?)
}

/// Attempts in every retrying client, the first included: the SDK's default.
pub(crate) const ATTEMPTS: u32 = 5;

/// A backoff range: full jitter (or the peer's own jitter), doubling from `base` to `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Schedule {
    /// The first retry's delay.
    pub(crate) base: Duration,
    /// The largest delay.
    pub(crate) cap: Duration,
}

impl Schedule {
    /// The SDK's default backoff, 500 ms doubling to 30 s.
    pub(crate) const SDK_DEFAULT: Schedule = Schedule {
        base: Duration::from_millis(500),
        cap: Duration::from_secs(30),
    };
    /// [`FAST_BASE`] doubling to [`FAST_CAP`].
    pub(crate) const FAST: Schedule = Schedule {
        base: FAST_BASE,
        cap: FAST_CAP,
    };

    /// The SDK's backoff over this range.
    pub(crate) fn backoff(self) -> Backoff {
        Backoff::new().base(self.base).cap(self.cap)
    }

    /// `"500 ms..30 s"`.
    pub(crate) fn range(self) -> String {
        format!("{} ms..{} s", self.base.as_millis(), self.cap.as_secs_f64())
    }
}

/// A retrying peer of the SDK, set up as its documentation shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    /// `reqwest-retry` 0.9's `RetryTransientMiddleware` on `reqwest-middleware` 0.5.
    ReqwestRetry,
    /// reqwest 0.13's own retry: `reqwest::retry::for_host(..)`.
    ReqwestBuiltin,
    /// `backon`'s `ExponentialBuilder` around each send, Retry-After read by `.adjust(..)`.
    Backon,
    /// `hodoflow_retry::middleware::RetryMiddleware` on `reqwest-middleware` 0.5, where
    /// `RetryTransientMiddleware` was.
    SdkMiddleware,
}

impl Peer {
    /// Every peer, in the order the scenarios run them.
    pub(crate) const ALL: [Peer; 4] = [
        Peer::ReqwestRetry,
        Peer::ReqwestBuiltin,
        Peer::Backon,
        Peer::SdkMiddleware,
    ];

    /// The peer's name in reports.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Peer::ReqwestRetry => "reqwest_retry",
            Peer::ReqwestBuiltin => "reqwest_builtin_retry",
            Peer::Backon => "backon",
            Peer::SdkMiddleware => "sdk_middleware",
        }
    }

    /// How the peer is configured over `schedule`, for a report's parameters.
    pub(crate) fn describe(self, schedule: Schedule) -> String {
        let retries = ATTEMPTS - 1;
        let range = schedule.range();
        match self {
            Peer::ReqwestRetry => format!(
                "reqwest-retry 0.9.1 on reqwest-middleware 0.5.2: RetryTransientMiddleware, ExponentialBackoff::builder().retry_bounds({range}).build_with_max_retries({retries}) (full jitter), default strategy (5xx, 408, 429 and connection errors)"
            ),
            Peer::ReqwestBuiltin => format!(
                "reqwest 0.13 ClientBuilder::retry(retry::for_host(\"127.0.0.1\").max_retries_per_request({retries}).classify_fn(..)): 429, 5xx and errors without an answer retryable; default budget (20% extra load over 10 s, 10 retries/s floor); no backoff (reqwest retries at once)"
            ),
            Peer::Backon => format!(
                "backon 1.6 ExponentialBuilder::default().with_min_delay/with_max_delay({range}).with_max_times({retries}).with_jitter() (delay + up to one delay more), .when(429, 5xx or no answer), .adjust(|err, dur| Retry-After seconds of the last answer, else dur) as backon's docs show"
            ),
            Peer::SdkMiddleware => format!(
                "hodoflow_retry::middleware::RetryMiddleware (feature middleware) on reqwest-middleware 0.5.2 in RetryTransientMiddleware's place: {ATTEMPTS} attempts, backoff {range}, the default retry budget; the caller's Idempotency-Key, else one generated per request"
            ),
        }
    }
}

/// The HTTP client the SDK builds for itself on reqwest 0.13: reqwest's default pool (no idle
/// limit, 90 s idle timeout), redirects off, rustls; without reqwest's own retry unless one
/// is set.
fn http_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none())
}

/// `reqwest-retry`'s exponential policy with 4 retries (5 attempts): full jitter, doubling
/// over `schedule`. Its own default range is 1 s to 30 min.
pub(crate) fn retry_policy(schedule: Schedule) -> ExponentialBackoff {
    ExponentialBackoff::builder()
        .retry_bounds(schedule.base, schedule.cap)
        .build_with_max_retries(ATTEMPTS - 1)
}

/// How a report describes the SDK run with its defaults.
pub(crate) const SDK_DEFAULTS: &str =
    "defaults (5 attempts, backoff 500 ms..30 s, retry budget 500 tokens)";

/// How a report describes the SDK run with its defaults but the call budget
/// [`Size::call_budget`] gives it: [`SDK_DEFAULTS`] at full size.
pub(crate) fn sdk_defaults(size: Size) -> String {
    match size.call_budget_change() {
        None => SDK_DEFAULTS.to_owned(),
        Some(budget) => format!("{SDK_DEFAULTS} but the call budget: {budget}"),
    }
}

/// A webhook sender on a bare HTTP client: what a user of plain `reqwest`, or of one of the
/// [`Peer`]s, writes. It exchanges one token up front and sends the same headers as the SDK.
#[derive(Debug, Clone)]
pub(crate) struct Sender {
    client: ClientWithMiddleware,
    base_url: String,
    url: String,
    authorization: HeaderValue,
    attempts: Option<Arc<AtomicU64>>,
    /// Behind an `Arc`: the builder is large and a `Sender` is cloned per operation.
    backon: Option<Arc<ExponentialBuilder>>,
}

impl Sender {
    /// Plain `reqwest`, no retry (`reqwest::retry::never()`, as the SDK builds it).
    pub(crate) async fn plain(base_url: &str) -> Result<Self> {
        let http = http_builder().retry(reqwest::retry::never()).build()?;
        let authorization = bearer(&http, base_url).await?;
        Ok(Self {
            client: reqwest_middleware::ClientBuilder::new(http).build(),
            base_url: base_url.to_owned(),
            url: webhook_url(base_url, DEMO_TRIGGER_TOKEN),
            authorization,
            attempts: None,
            backon: None,
        })
    }

    /// `peer` with [`ATTEMPTS`] attempts and backoff over `schedule` where it has one, and a
    /// count of the attempts it sends (under the retry middleware, in reqwest's classifier,
    /// or in backon's loop). The SDK's middleware has its default call budget.
    pub(crate) async fn retrying(peer: Peer, base_url: &str, schedule: Schedule) -> Result<Self> {
        Self::retrying_within(peer, base_url, schedule, Budget::new()).await
    }

    /// [`Sender::retrying`] with the SDK's middleware held to `call_budget`, its attempts
    /// still [`ATTEMPTS`]. The other peers have no time budget of their own.
    pub(crate) async fn retrying_within(
        peer: Peer,
        base_url: &str,
        schedule: Schedule,
        call_budget: Budget,
    ) -> Result<Self> {
        let attempts = Arc::new(AtomicU64::new(0));
        let mut backon = None;
        let (client, authorization) = match peer {
            Peer::ReqwestRetry => {
                let http = http_builder().build()?;
                let authorization = bearer(&http, base_url).await?;
                let client = reqwest_middleware::ClientBuilder::new(http)
                    .with(RetryTransientMiddleware::new_with_policy(retry_policy(
                        schedule,
                    )))
                    .with(CountAttempts(attempts.clone()))
                    .build();
                (client, authorization)
            }
            Peer::ReqwestBuiltin => {
                let host = reqwest::Url::parse(base_url)?
                    .host_str()
                    .unwrap_or_default()
                    .to_owned();
                let counted = attempts.clone();
                let retry = reqwest::retry::for_host(host)
                    .max_retries_per_request(ATTEMPTS - 1)
                    .classify_fn(move |req_rep| {
                        counted.fetch_add(1, Ordering::Relaxed);
                        match req_rep.status() {
                            Some(status)
                                if status.is_server_error()
                                    || status == StatusCode::TOO_MANY_REQUESTS =>
                            {
                                req_rep.retryable()
                            }
                            Some(_) => req_rep.success(),
                            None => req_rep.retryable(),
                        }
                    });
                let http = http_builder().retry(retry).build()?;
                let authorization = bearer(&http, base_url).await?;
                // The classifier saw the token exchange too.
                attempts.store(0, Ordering::Relaxed);
                (
                    reqwest_middleware::ClientBuilder::new(http).build(),
                    authorization,
                )
            }
            Peer::SdkMiddleware => {
                let http = http_builder().retry(reqwest::retry::never()).build()?;
                let authorization = bearer(&http, base_url).await?;
                let retry = hodoflow_retry::middleware::RetryMiddleware::builder()
                    .budget(call_budget.max_attempts(ATTEMPTS))
                    .backoff(schedule.backoff())
                    .build()?;
                let client = reqwest_middleware::ClientBuilder::new(http)
                    .with(retry)
                    .with(CountAttempts(attempts.clone()))
                    .build();
                (client, authorization)
            }
            Peer::Backon => {
                let http = http_builder().retry(reqwest::retry::never()).build()?;
                let authorization = bearer(&http, base_url).await?;
                backon = Some(Arc::new(
                    ExponentialBuilder::default()
                        .with_min_delay(schedule.base)
                        .with_max_delay(schedule.cap)
                        .with_max_times(ATTEMPTS as usize - 1)
                        .with_jitter(),
                ));
                (
                    reqwest_middleware::ClientBuilder::new(http).build(),
                    authorization,
                )
            }
        };
        Ok(Self {
            client,
            base_url: base_url.to_owned(),
            url: webhook_url(base_url, DEMO_TRIGGER_TOKEN),
            authorization,
            attempts: Some(attempts),
            backon,
        })
    }

    /// Attempts sent so far; `None` for plain reqwest.
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
        let Some(backoff) = self.backon.as_deref().copied() else {
            return Ok(self.attempt(url, id, body).await?.0);
        };
        let attempts = self.attempts.clone();
        let sent = (|| {
            let (body, attempts) = (body.clone(), attempts.clone());
            async move {
                if let Some(attempts) = attempts {
                    attempts.fetch_add(1, Ordering::Relaxed);
                }
                match self.attempt(url, id, body).await {
                    Ok((status, retry_after))
                        if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS =>
                    {
                        Err(Failure::Refused {
                            status,
                            retry_after,
                        })
                    }
                    Ok((status, _)) => Ok(status),
                    Err(error) => Err(Failure::NoAnswer(error)),
                }
            }
        })
        .retry(backoff)
        .when(|_: &Failure| true)
        // As backon's documentation reads Retry-After: whole seconds, 0 when unreadable.
        .adjust(|failure: &Failure, dur| match failure {
            Failure::Refused {
                retry_after: Some(retry_after),
                ..
            } => {
                let retry_after = retry_after.to_str().unwrap_or("0");
                let retry_after = retry_after.parse::<u64>().unwrap_or(0);
                Some(Duration::from_secs(retry_after))
            }
            _ => dur,
        })
        .await;
        match sent {
            Ok(status) | Err(Failure::Refused { status, .. }) => Ok(status),
            Err(Failure::NoAnswer(error)) => Err(error),
        }
    }

    /// One request: the answer's status and its `Retry-After`.
    async fn attempt(
        &self,
        url: &str,
        id: Option<&str>,
        body: Bytes,
    ) -> Result<(StatusCode, Option<HeaderValue>)> {
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
        let retry_after = response.headers().get(http::header::RETRY_AFTER).cloned();
        // Read the answer as a user would: the run ID, or `duplicate`.
        let body = response.bytes().await?;
        if status == StatusCode::ACCEPTED {
            serde_json::from_slice::<Accepted>(&body)?;
        }
        Ok((status, retry_after))
    }
}

/// Why one of backon's attempts failed.
#[derive(Debug)]
enum Failure {
    /// A 429 or 5xx answer.
    Refused {
        status: StatusCode,
        retry_after: Option<HeaderValue>,
    },
    /// No answer.
    NoAnswer(crate::Error),
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
        request: reqwest::Request,
        extensions: &mut http::Extensions,
        next: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.0.fetch_add(1, Ordering::Relaxed);
        next.run(request, extensions).await
    }
}

/// Exchanges the demo credentials for a bearer token, as a plain reqwest user would.
pub(crate) async fn bearer(http: &reqwest::Client, base_url: &str) -> Result<HeaderValue> {
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
