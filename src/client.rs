//! [`RetryingClient`] and its builder: the client every vendor's client wraps, with the settings
//! that mean the same for every vendor (token source, budgets, backoff, limiters, answer limit,
//! transport). A vendor's own settings and calls are on its thin client:
//! [`HodoflowClient`](crate::HodoflowClient) and [`ModulifyClient`](crate::ModulifyClient); a
//! vendor of your own is a [`Profile`](crate::Profile) sent through
//! [`RetryingClient::request`].

use std::collections::HashMap;
use std::sync::Arc;

use crate::core::auth::secret::Secret;
use crate::core::auth::{StaticToken, TokenCache, TokenExchanger};
use crate::core::budget::Budget;
use crate::core::endpoint;
use crate::core::engine::Endpoint;
use crate::core::engine_options::{EngineOptions, engine_setters};
use crate::core::error::{Error, Result};
use crate::core::limit::RouteKey;
use crate::core::limit::scope::ClosedScope;
use crate::core::limit::window::{RouteLimit, Windows};
use crate::core::request::RouteUrls;
use crate::core::runtime;
use crate::core::schedule::{Schedule, SharedSchedule};
use crate::core::shared::Shared;
use crate::core::stats::Stats;
use crate::core::transport::{self, AttemptTransport, Sender};

/// How a vendor's ready exchanger is made when the client is built: from the base URL and the
/// reqwest client the exchange shares (Hodoflow's client credentials).
pub(crate) type MakeExchanger =
    Box<dyn FnOnce(&str, reqwest::Client) -> Result<Arc<dyn TokenExchanger>> + Send>;

/// Builds a [`RetryingClient`]: only the settings every vendor shares. A vendor's client has a
/// builder of its own with these and its own
/// ([`HodoflowClient::builder`](crate::HodoflowClient::builder),
/// [`ModulifyClient::builder`](crate::ModulifyClient::builder)).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::{Budget, RetryingClient};
///
/// let client = RetryingClient::builder("https://api.example")
///     .bearer_token("an API token")
///     .budget(Budget::new().max_attempts(3).max_elapsed(Duration::from_secs(20)))
///     .build()?;
/// # let _ = client;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[must_use]
pub struct ClientBuilder {
    base_url: String,
    /// A vendor's ready exchanger, made at build time from the base URL and the client's reqwest
    /// client (Hodoflow's client credentials: `vendors/hodoflow/builder.rs`).
    pub(crate) credentials: Option<MakeExchanger>,
    bearer: Option<Secret>,
    /// The budget, backoff and schedule, the exchanger, the rate and retry budgets and the
    /// answer limit: what the client and the middleware both build their engine from.
    options: EngineOptions,
    /// How the calls to each route (a key the vendor derives from the path, such as a
    /// webhook trigger's) are paced: set by a vendor's builder, none by default.
    pub(crate) routes: PacingSettings,
    http: Option<reqwest::Client>,
    transport: Option<Arc<dyn AttemptTransport>>,
    http2_prior_knowledge: bool,
    seed: Option<u64>,
}

/// How a client paces the calls to each route: a limit for every route, limits for some, and
/// whether to learn a route's limit from the server's `RateLimit-Policy`, starting from the
/// vendor's documented default. What a vendor's builder sets (Hodoflow's trigger limits).
#[derive(Debug)]
pub(crate) struct PacingSettings {
    pub(crate) every: Option<RouteLimit>,
    pub(crate) overrides: HashMap<RouteKey, RouteLimit>,
    pub(crate) learn: bool,
    pub(crate) until_told: Option<RouteLimit>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base_url", &endpoint::shown(&self.base_url))
            .field("policy", &self.options.policy)
            .field("answer_limit", &self.options.answer_limit)
            .field("rate_budget", &self.options.rate_budget)
            .field("retry_budget", &self.options.retry_budget)
            .field("routes", &self.routes)
            .field("http2_prior_knowledge", &self.http2_prior_knowledge)
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
            routes: PacingSettings {
                every: None,
                overrides: HashMap::new(),
                learn: false,
                until_told: None,
            },
            http: None,
            transport: None,
            http2_prior_knowledge: false,
            seed: None,
        }
    }

    /// Sends this static API token as the bearer token of every attempt, with no exchange: for
    /// an API whose tokens are issued once, such as Modulify's (`docs/wire-contract.md`,
    /// "Modulify"; see [`ModulifyClient`](crate::ModulifyClient)). The token is a secret: never
    /// logged, and redacted from errors when a server echoes it.
    ///
    /// Default: none; set this or [`exchanger`](Self::exchanger) (a Hodoflow client may set
    /// [`client_credentials`](crate::hodoflow::HodoflowBuilder::client_credentials) instead).
    pub fn bearer_token(mut self, token: impl Into<Secret>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    /// Whether a static bearer token is set.
    pub(crate) fn has_bearer_token(&self) -> bool {
        self.bearer.is_some()
    }

    /// Gets tokens from your own exchanger: an OAuth flow, a secrets manager. A 401 makes the
    /// client ask it again, once per call.
    ///
    /// Default: none; set this or [`bearer_token`](Self::bearer_token).
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

    /// Sends through this reqwest client (custom TLS roots, proxies, HTTP/2 settings); a
    /// vendor's token exchange (Hodoflow's client credentials) sends through it too. Configure it
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
        self.options.validate()?;
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
            .map(|token| RouteKey::named("token", token.expose()).short());
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
                        "no token source: set bearer_token(..) or exchanger(..) (a Hodoflow client: client_credentials(..))",
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
                self.routes.every,
                self.routes.overrides,
                self.routes.learn,
                self.routes.until_told,
            ),
            self.seed,
            endpoint,
        );
        Ok(RetryingClient {
            inner: Arc::new(Shared {
                base,
                routes: RouteUrls::default(),
                http: sender,
                engine,
                policy: Arc::new(policy),
            }),
        })
    }
}

/// A client that makes every call to a Hodoflow-style API safe to retry: the engine every
/// vendor's client sends through, and [`request`](Self::request) for a vendor described by a
/// [`Profile`](crate::Profile) of your own.
///
/// Cheap to clone: clones share the connection pool, the token cache, the credential's gate,
/// the retry budget, the route windows and the stats. Build one client per credential and
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

    /// Whom the client sends for, as every process of a fleet names it: its base URL, and for
    /// a static token a short hash of it (two tokens have limits of their own). Never a secret;
    /// a [`Fleet`](crate::limit::Fleet) names the scopes it shares by it.
    pub fn endpoint(&self) -> &str {
        &self.inner.engine.endpoint.name
    }

    /// The budget of each of its calls, unless a call sets its own: an outbox's lease must
    /// outlast it.
    pub fn budget(&self) -> Budget {
        self.inner.policy.budget
    }
}

impl AsRef<RetryingClient> for RetryingClient {
    fn as_ref(&self) -> &RetryingClient {
        self
    }
}

/// A vendor builder's setters that hand their value to the same setter of the [`ClientBuilder`]
/// underneath (its field `client`), each documented as the vendor's builder offers it.
macro_rules! handed_on {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty)?);)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $($arg: $ty)?) -> Self {
                self.client = self.client.$name($($arg)?);
                self
            }
        )*
    };
}
pub(crate) use handed_on;

/// The settings every vendor's builder hands on unchanged to the [`ClientBuilder`] underneath:
/// budgets, backoff, limiters, answer limit, HTTP client or transport, seed.
macro_rules! generic_setters {
    () => {
        $crate::client::handed_on! {
            /// The attempt and elapsed-time budget of every call, overridable per call. See
            /// [`ClientBuilder::budget`](crate::ClientBuilder::budget).
            budget(budget: $crate::core::budget::Budget);
            /// The backoff between retries, overridable per call. See
            /// [`ClientBuilder::backoff`](crate::ClientBuilder::backoff).
            backoff(backoff: $crate::core::backoff::Backoff);
            /// Waits of your own between attempts. See
            /// [`ClientBuilder::schedule`](crate::ClientBuilder::schedule).
            schedule(schedule: impl $crate::core::schedule::Schedule + 'static);
            /// The credential's rate budget, shared with the clients given the same one. See
            /// [`ClientBuilder::rate_budget`](crate::ClientBuilder::rate_budget).
            rate_budget(budget: $crate::core::limit::gate::RateBudget);
            /// The adaptive retry budget, shared with the clients given the same one. See
            /// [`ClientBuilder::retry_budget`](crate::ClientBuilder::retry_budget).
            retry_budget(budget: $crate::core::limit::retry_budget::RetryBudget);
            /// The most bytes of an answer read. See
            /// [`ClientBuilder::max_answer_bytes`](crate::ClientBuilder::max_answer_bytes).
            max_answer_bytes(bytes: usize);
            /// Sends through this reqwest client (a vendor's token exchange too). See
            /// [`ClientBuilder::http_client`](crate::ClientBuilder::http_client).
            http_client(http: reqwest::Client);
            /// Sends every attempt through `transport` (tests, simulations). See
            /// [`ClientBuilder::transport`](crate::ClientBuilder::transport).
            transport(transport: impl $crate::core::transport::AttemptTransport);
            /// Seeds the jitter's draws (tests, simulations). See
            /// [`ClientBuilder::seed`](crate::ClientBuilder::seed).
            seed(seed: u64);
            /// Speaks HTTP/2 without TLS (h2c). See
            /// [`ClientBuilder::http2_prior_knowledge`](crate::ClientBuilder::http2_prior_knowledge).
            http2_prior_knowledge();
        }
    };
}
pub(crate) use generic_setters;
