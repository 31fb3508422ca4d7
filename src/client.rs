//! [`RetryingClient`] and its builder: the entry points of every surface.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::core::auth::secret::Secret;
use crate::core::auth::{StaticToken, TokenCache, TokenExchanger};
use crate::core::endpoint;
use crate::core::engine::Endpoint;
use crate::core::engine_options::{EngineOptions, engine_setters};
use crate::core::error::{Error, Result};
use crate::core::limit::RouteKey;
use crate::core::limit::scope::ClosedScope;
use crate::core::limit::window::{TriggerLimit, TriggerPacing, Windows};
use crate::core::runtime;
use crate::core::schedule::{Schedule, SharedSchedule};
use crate::core::shared::Shared;
use crate::core::signing::Signer;
use crate::core::stats::Stats;
use crate::core::transport::{self, AttemptTransport, Sender};

/// The default client-side limit of a webhook body: 1,048,576 bytes (Hodoflow's webhook sender
/// guide, "Limits and checkpoints").
pub const DEFAULT_WEBHOOK_BODY_LIMIT: usize = 1_048_576;

/// How a vendor's ready exchanger is made when the client is built: from the base URL and the
/// reqwest client the exchange shares.
pub(crate) type MakeExchanger =
    Box<dyn FnOnce(&str, reqwest::Client) -> Result<Arc<dyn TokenExchanger>> + Send>;

/// Builds a [`RetryingClient`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::{Budget, RetryingClient};
///
/// let client = RetryingClient::builder("https://hodoflow.example")
///     .client_credentials("sender-1", "s3cr3t")
///     .budget(Budget::new().max_attempts(3).max_elapsed(Duration::from_secs(20)))
///     .build()?;
/// # let _ = client;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[must_use]
pub struct ClientBuilder {
    base_url: String,
    /// A vendor's ready exchanger, made at build time from the base URL and the client's reqwest
    /// client (Hodoflow's client credentials: `vendors/hodoflow/client.rs`).
    pub(crate) credentials: Option<MakeExchanger>,
    bearer: Option<Secret>,
    /// The budget, backoff and schedule, the exchanger, the rate and retry budgets and the
    /// answer limit: what the client and the middleware both build their engine from.
    options: EngineOptions,
    webhook_body_limit: usize,
    poll_interval: Duration,
    trigger_limit: Option<TriggerLimit>,
    trigger_limits: HashMap<RouteKey, TriggerLimit>,
    pace_triggers: bool,
    http: Option<reqwest::Client>,
    transport: Option<Arc<dyn AttemptTransport>>,
    http2_prior_knowledge: bool,
    seed: Option<u64>,
    signing_secrets: Vec<Secret>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base_url", &endpoint::shown(&self.base_url))
            .field("policy", &self.options.policy)
            .field("webhook_body_limit", &self.webhook_body_limit)
            .field("answer_limit", &self.options.answer_limit)
            .field("rate_budget", &self.options.rate_budget)
            .field("retry_budget", &self.options.retry_budget)
            .field("trigger_limit", &self.trigger_limit)
            .field("pace_triggers", &self.pace_triggers)
            .field("http2_prior_knowledge", &self.http2_prior_knowledge)
            .field("signing_secrets", &self.signing_secrets.len())
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// A builder for the API at `base_url` (scheme, host, port, optional path prefix).
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            credentials: None,
            bearer: None,
            options: EngineOptions::new(),
            webhook_body_limit: DEFAULT_WEBHOOK_BODY_LIMIT,
            poll_interval: Duration::from_secs(1),
            trigger_limit: None,
            trigger_limits: HashMap::new(),
            pace_triggers: false,
            http: None,
            transport: None,
            http2_prior_knowledge: false,
            seed: None,
            signing_secrets: Vec::new(),
        }
    }

    /// Sends this static API token as the bearer token of every attempt, with no exchange: for
    /// an API whose tokens are issued once, such as Modulify's (`docs/wire-contract.md`,
    /// "Modulify"; see [`ModulifyClient`](crate::ModulifyClient)). The token is a secret: never
    /// logged, and redacted from errors when a server echoes it.
    ///
    /// Default: none; set this, [`client_credentials`](Self::client_credentials) or
    /// [`exchanger`](Self::exchanger).
    pub fn bearer_token(mut self, token: impl Into<Secret>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    /// Whether a static bearer token is set.
    pub(crate) fn has_bearer_token(&self) -> bool {
        self.bearer.is_some()
    }

    /// Gets tokens from your own exchanger instead of client credentials.
    ///
    /// Default: none; set this or [`client_credentials`](Self::client_credentials).
    pub fn exchanger(mut self, exchanger: impl TokenExchanger + 'static) -> Self {
        self.options.exchanger = Some(Arc::new(exchanger));
        self
    }

    engine_setters! {
        owner: "client",
        noun: "call",
        per_call: ", overridable per call",
        after_backoff: " It replaces a [`schedule`](Self::schedule) set before it.",
    }

    /// Takes the waits between retries from `schedule` instead of the backoff, overridable per
    /// call; for example a backon builder (feature `backon`). `Retry-After` is never undercut, a
    /// 429 without one still waits the
    /// [`Backoff::retry_after_fallback`](crate::Backoff::retry_after_fallback) of the last
    /// [`backoff`](Self::backoff) set, and the budget still refuses a wait past its end, whatever
    /// the schedule says. A later [`backoff`](Self::backoff) replaces it.
    ///
    /// Default: none: the waits are the [`backoff`](Self::backoff)'s.
    pub fn schedule(mut self, schedule: impl Schedule + 'static) -> Self {
        self.options.policy.schedule = Some(SharedSchedule::new(schedule));
        self
    }

    /// The largest webhook body sent; a larger one is refused before anything is sent.
    ///
    /// Default: 1,048,576 bytes, the server's default limit.
    pub fn webhook_body_limit(mut self, bytes: usize) -> Self {
        self.webhook_body_limit = bytes;
        self
    }

    /// Paces the deliveries to every webhook trigger to `limit` on the client, so a burst
    /// waits here instead of bouncing off 429s, whatever the server's `RateLimit-Policy` says:
    /// the caller's limit wins over the server's figures. [`TriggerLimit::DOCUMENTED`] is
    /// the default of Hodoflow's webhook sender guide, 100 requests per 60 s. A wait for a slot
    /// counts against the call's `max_elapsed`, the first attempt's included; a delivery that
    /// may queue for its slot before its budget starts says so with
    /// [`Delivering::queue`](crate::webhook::Delivering::queue).
    ///
    /// Default: no pacing (only the server's 429s pace deliveries); see
    /// [`pace_triggers`](Self::pace_triggers) to pace at the server's own figures.
    pub fn trigger_limit(mut self, limit: TriggerLimit) -> Self {
        self.trigger_limit = Some(limit);
        self
    }

    /// Paces the deliveries to the trigger with `trigger_token` to `limit`, whatever
    /// [`trigger_limit`](Self::trigger_limit) says. The token is kept only as a hash.
    ///
    /// Default: none.
    pub fn trigger_limit_for(mut self, trigger_token: &str, limit: TriggerLimit) -> Self {
        self.trigger_limits
            .insert(RouteKey::of(trigger_token), limit);
        self
    }

    /// Paces the deliveries to every webhook trigger that has no
    /// [`trigger_limit`](Self::trigger_limit) at the trigger's own limit, as the server states
    /// it on every answer (`RateLimit-Policy: "trigger";q=100;w=60`), and at the documented
    /// default, [`TriggerLimit::DOCUMENTED`], until the server has said. The precedence is
    /// the caller's limit, then the server's figures, then the documented default
    /// (`docs/wire-contract.md`, "RateLimit fields").
    /// [`Stats::trigger_held_by`](crate::Stats::trigger_held_by) says which one held calls.
    ///
    /// Default: off (no pacing unless [`trigger_limit`](Self::trigger_limit) is set).
    ///
    /// # Examples
    ///
    /// ```
    /// use hodoflow_retry::RetryingClient;
    ///
    /// let client = RetryingClient::builder("https://hodoflow.example")
    ///     .client_credentials("sender-1", "s3cr3t")
    ///     .pace_triggers()
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), hodoflow_retry::Error>(())
    /// ```
    pub fn pace_triggers(mut self) -> Self {
        self.pace_triggers = true;
        self
    }

    /// How often [`RetryingClient::follow_run`] polls a run.
    ///
    /// Default: 1 s.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Speaks HTTP/2 from the first byte on plain `http://` URLs (h2c with prior knowledge),
    /// for servers and proxies known to accept it: every call of the client then shares one
    /// connection. Over `https://`, HTTP/2 is negotiated by ALPN without this. A server that
    /// speaks only HTTP/1.1 fails every attempt with a transport error.
    ///
    /// Applies to the HTTP client the SDK builds, which the client-credentials exchange shares.
    /// With [`http_client`](Self::http_client), set
    /// [`reqwest::ClientBuilder::http2_prior_knowledge`] on that client instead.
    ///
    /// Default: off (HTTP/1.1 on `http://`; h2 or HTTP/1.1 by ALPN on `https://`).
    pub fn http2_prior_knowledge(mut self) -> Self {
        self.http2_prior_knowledge = true;
        self
    }

    /// Sends through this reqwest client (custom TLS roots, proxies, HTTP/2 settings); the
    /// client-credentials exchange set with
    /// [`client_credentials`](Self::client_credentials) sends through it too. Configure it
    /// not to follow redirects (a redirect would carry the bearer token elsewhere), and not to
    /// retry on its own (`.retry(reqwest::retry::never())`): reqwest 0.13 retries HTTP/2
    /// refusals by default, unseen by this client's attempts, budgets and records.
    ///
    /// Default: a client with rustls and HTTP/2 by ALPN that follows no redirects and never
    /// retries by itself.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Sends every attempt through `transport` instead of a reqwest client: an in-memory server
    /// for tests and simulations (see [`AttemptTransport`]). The engine, its budgets and its
    /// records are the same; no reqwest client is built unless the client credentials need one
    /// for their token exchange.
    ///
    /// Default: none, the client's own reqwest client.
    pub fn transport(mut self, transport: impl AttemptTransport) -> Self {
        self.transport = Some(Arc::new(transport));
        self
    }

    /// Signs every webhook delivery of this client with `secret`, a Standard Webhooks secret
    /// (`whsec_` followed by the base64 of at least 24 bytes), for triggers that demand signed
    /// deliveries (`docs/wire-contract.md`, "Signed deliveries"). Every attempt carries
    /// `webhook-id` (the delivery ID), `webhook-timestamp` (when that attempt is sent) and
    /// `webhook-signature`, made again for each attempt over the same body bytes, so a retry
    /// minutes later is never stale. Called again, it adds a secret, as
    /// [`signing_secrets`](Self::signing_secrets) does. Writes, reads and GraphQL are never signed.
    ///
    /// The secret is never logged, nor shown in `Debug` or in an error: those name it by its
    /// [fingerprint](crate::webhook::SigningSecret::fingerprint).
    ///
    /// Default: none; deliveries are unsigned. A delivery may override it with
    /// [`Delivering::signing_secrets`](crate::webhook::Delivering::signing_secrets).
    ///
    /// # Examples
    ///
    /// ```
    /// use hodoflow_retry::RetryingClient;
    ///
    /// let client = RetryingClient::builder("https://hodoflow.example")
    ///     .client_credentials("sender-1", "s3cr3t")
    ///     .signing_secret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), hodoflow_retry::Error>(())
    /// ```
    pub fn signing_secret(mut self, secret: impl Into<Secret>) -> Self {
        self.signing_secrets.push(secret.into());
        self
    }

    /// Signs every webhook delivery with each of `secrets`: during a key rotation the old and
    /// the new secret both sign, and every attempt sends both signatures, space-separated, so a
    /// trigger holding either accepts it. Replaces the secrets set before; an empty list turns
    /// signing off. See [`signing_secret`](Self::signing_secret).
    ///
    /// Default: none; deliveries are unsigned.
    pub fn signing_secrets<S: Into<Secret>>(
        mut self,
        secrets: impl IntoIterator<Item = S>,
    ) -> Self {
        self.signing_secrets = secrets.into_iter().map(Into::into).collect();
        self
    }

    /// Seeds the draws of this client's jitter (backoff, the gate's spread), so the same calls
    /// against the same answers wait the same times: for tests and simulations. The retry
    /// budget has a seed of its own
    /// ([`RetryBudgetBuilder::seed`](crate::limit::RetryBudgetBuilder::seed)).
    ///
    /// Default: seeded from the operating system.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Builds the client.
    ///
    /// # Errors
    ///
    /// An `invalid_input` error when the base URL is not an http(s) URL with a host, or holds a
    /// user name, password, query or fragment; when no exchanger or client credentials are set,
    /// the budget is invalid, the answer limit or the poll interval is zero; when a signing
    /// secret is not `whsec_` followed by the base64 of at least 24 bytes (the error does not
    /// quote it).
    pub fn build(mut self) -> Result<RetryingClient> {
        let base = endpoint::base_url(&self.base_url, "the base URL")?;
        let signer = Signer::parse(&self.signing_secrets)?;
        self.options.validate()?;
        if self.poll_interval.is_zero() {
            return Err(Error::invalid_input("the poll interval must be positive"));
        }
        // A custom transport needs a reqwest client only for a client-credentials exchange.
        let needs_http = self.transport.is_none()
            || (self.options.exchanger.is_none() && self.credentials.is_some());
        let http = match self.http {
            Some(http) => Some(http),
            None if needs_http => Some(
                transport::http_client(self.http2_prior_knowledge).map_err(|e| {
                    Error::invalid_input("the HTTP client could not be built").with_source(e)
                })?,
            ),
            None => None,
        };
        if let Some(token) = &self.bearer
            && (token.expose().is_empty()
                || http::HeaderValue::from_str(&format!("Bearer {}", token.expose())).is_err())
        {
            return Err(Error::invalid_input(
                "the bearer token is empty or not a valid header value (it is not shown: it is a secret)",
            ));
        }
        let bearer_tag = self
            .bearer
            .as_ref()
            .filter(|_| self.options.exchanger.is_none() && self.credentials.is_none())
            .map(|token| RouteKey::of(token.expose()).short());
        let exchanger: Arc<dyn TokenExchanger> = match (
            self.options.exchanger.take(),
            self.credentials,
        ) {
            (Some(exchanger), _) => exchanger,
            (None, Some(make)) => make(
                &self.base_url,
                http.clone().expect("built for client credentials"),
            )?,
            (None, None) => match self.bearer {
                Some(token) => Arc::new(StaticToken(token)),
                None => {
                    return Err(Error::invalid_input(
                        "no token source: set client_credentials(..), bearer_token(..) or exchanger(..)",
                    ));
                }
            },
        };
        let sender = match (self.transport, http) {
            (Some(transport), _) => Sender::Custom(transport),
            (None, Some(http)) => Sender::Reqwest(http),
            (None, None) => unreachable!("a reqwest client is built when no transport is set"),
        };
        // Whom the client sends for, as the processes of a fleet name it: the base URL, and for
        // a static token a short hash of it (two tokens have budgets of their own).
        let endpoint = Endpoint::new(&match &bearer_tag {
            Some(tag) => format!("{} token {tag}", base.as_str().trim_end_matches('/')),
            None => base.as_str().trim_end_matches('/').to_owned(),
        });
        let (engine, policy) = self.options.engine(
            Some(TokenCache::new(exchanger)),
            Windows::new(
                self.trigger_limit,
                self.trigger_limits,
                self.pace_triggers,
                TriggerLimit::DOCUMENTED,
            ),
            self.seed,
            endpoint,
        );
        Ok(RetryingClient {
            inner: Arc::new(Shared {
                base,
                http: sender,
                engine,
                policy,
                webhook_body_limit: self.webhook_body_limit,
                poll_interval: self.poll_interval,
                signer,
            }),
        })
    }
}

/// A client that makes every call to a Hodoflow-style API safe to retry.
///
/// Cheap to clone: clones share the connection pool, the token cache, the credential's gate,
/// the retry budget, the trigger limiter and the stats. Build one client per credential and
/// clone it into every task that sends with it, so they all respect one budget and one gate.
#[derive(Debug, Clone)]
pub struct RetryingClient {
    pub(crate) inner: Arc<Shared>,
}

impl RetryingClient {
    /// A builder for the API at `base_url`.
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(base_url)
    }

    /// What this client and its clones have done so far: calls, attempts, retries by cause,
    /// retry tokens left, time waited, exchanges. Cheap: a few atomic loads.
    pub fn stats(&self) -> Stats {
        self.inner.engine.stats()
    }

    /// Every scope a server closed and that is still closed: whom it holds (the credential's API
    /// budget, one trigger), for how long from now, and why. A call that sits in a closed scope
    /// waits for it within its budget, or stops with `budget_exhausted`, nothing sent; a call
    /// in any other scope is not held.
    pub fn closed_scopes(&self) -> Vec<ClosedScope> {
        self.inner
            .engine
            .limits
            .gate
            .closed(runtime::now())
            .into_iter()
            .map(|(scope, remaining, why)| ClosedScope {
                scope: scope.label(),
                remaining,
                why: why.describe(),
            })
            .collect()
    }

    /// The limit this client paces deliveries to the trigger with `trigger_token` at now, and
    /// where it came from ([`ClientBuilder::trigger_limit`], the server's `RateLimit-Policy`
    /// or Hodoflow's documented default); `None` when it does not pace them.
    pub fn trigger_pacing(&self, trigger_token: &str) -> Option<TriggerPacing> {
        self.inner
            .engine
            .limits
            .windows
            .pacing(RouteKey::of(trigger_token))
    }
}
