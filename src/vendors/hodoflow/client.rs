//! [`HodoflowClient`]: Hodoflow's calls (JSON:API writes and reads, GraphQL, webhook
//! deliveries and workflow runs; `docs/wire-contract.md`) on a [`RetryingClient`], which is the
//! same for every vendor and imports none, and the settings only Hodoflow's calls read.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;

use crate::client::RetryingClient;
use crate::core::auth::secret::Secret;
use crate::core::error::Result;
use crate::core::key::IdempotencyKey;
use crate::core::limit::scope::ClosedScope;
use crate::core::limit::window::RoutePacing;
use crate::core::stats::Stats;
use crate::vendors::Surface;
use crate::vendors::hodoflow::call::{Call, Delivering, Operation};
use crate::vendors::hodoflow::routes::trigger_key;
use crate::vendors::hodoflow::run::FollowRun;
use crate::vendors::hodoflow::settings::Settings;

/// A client of Hodoflow's API: every write, read, GraphQL query and webhook delivery made safe
/// to retry, with its identity fixed before the first attempt.
///
/// Cheap to clone: clones share the connection pool, the token cache, the credential's gate,
/// the retry budget, the trigger windows and the stats. Build one client per credential and
/// clone it into every task that sends with it, so they all respect one budget and one gate.
///
/// # Examples
///
/// ```no_run
/// use hodoflow_retry::{DeliveryId, HodoflowClient, IdempotencyKey};
///
/// # async fn run() -> hodoflow_retry::Result<()> {
/// let client = HodoflowClient::builder("https://hodoflow.example")
///     .client_credentials("sender-1", "s3cr3t")
///     .build()?;
/// let delivery = client
///     .deliver("the trigger token", r#"{"order":4711}"#)
///     .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id("order-4711:shipped")))
///     .send()
///     .await?;
/// println!("{:?}", delivery.outcome());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct HodoflowClient {
    client: RetryingClient,
    settings: Arc<Settings>,
}

impl HodoflowClient {
    /// Checks a JSON:API write as [`write`](Self::write) does before it sends anything: an
    /// unsafe method (POST, PUT, PATCH, DELETE) and a path under `/api/json/`. For a sender
    /// that keeps writes to send later (an outbox checks each before storing it).
    ///
    /// # Errors
    ///
    /// `invalid_input`, saying what is wrong.
    pub fn check_write(method: &Method, path: &str) -> Result<()> {
        crate::vendors::hodoflow::requests::check_write(method, path)
    }

    /// Checks a trigger's token as [`deliver`](Self::deliver) does before it sends anything:
    /// one non-empty URL path segment.
    ///
    /// # Errors
    ///
    /// `invalid_input`; the message never quotes the token, a secret.
    pub fn check_trigger_token(token: &str) -> Result<()> {
        crate::vendors::hodoflow::routes::check_trigger_token(token)
    }

    pub(crate) fn new(client: RetryingClient, settings: Settings) -> Self {
        Self {
            client,
            settings: Arc::new(settings),
        }
    }

    /// The client the calls go through, for what every vendor's client shares: a
    /// [`Profile`](crate::Profile)'s [`request`](RetryingClient::request), the middleware's
    /// `RetryMiddleware::from_client` and the metrics' `Metrics::client` (features `middleware`,
    /// `metrics`), which take this client too.
    pub fn client(&self) -> &RetryingClient {
        &self.client
    }

    /// What this client and its clones have done so far. See [`RetryingClient::stats`]: its
    /// `route_*` figures are this client's webhook triggers, each a route with a window of its
    /// own.
    pub fn stats(&self) -> Stats {
        self.client.stats()
    }

    /// Every scope a server closed and that is still closed. See
    /// [`RetryingClient::closed_scopes`].
    pub fn closed_scopes(&self) -> Vec<ClosedScope> {
        self.client.closed_scopes()
    }

    /// How long the service behind `surface` has been down. See
    /// [`RetryingClient::service_down_for`].
    pub fn service_down_for(&self, surface: Surface) -> Option<Duration> {
        self.client.service_down_for(surface)
    }

    /// The limit this client paces deliveries to the trigger with `trigger_token` at now, and
    /// where it came from ([`HodoflowBuilder::trigger_limit`](crate::hodoflow::HodoflowBuilder::trigger_limit),
    /// the server's `RateLimit-Policy` or Hodoflow's documented default); `None` when it does
    /// not pace them.
    pub fn trigger_pacing(&self, trigger_token: &str) -> Option<RoutePacing> {
        self.client
            .inner
            .engine
            .limits
            .windows
            .pacing(trigger_key(trigger_token))
    }

    /// A JSON:API unsafe write (`POST`, `PUT`, `PATCH` or `DELETE` under `/api/json/`) with its
    /// Idempotency-Key, identical on every attempt.
    pub fn write(
        &self,
        method: Method,
        path: &str,
        key: IdempotencyKey,
        body: impl Into<Bytes>,
    ) -> Call<'_> {
        Call::new(
            &self.client.inner,
            Operation::Write {
                method,
                path: path.to_owned(),
                key,
                body: body.into(),
            },
        )
    }

    /// `POST path` with `key`: create a resource.
    pub fn create(&self, path: &str, key: IdempotencyKey, body: impl Into<Bytes>) -> Call<'_> {
        self.write(Method::POST, path, key, body)
    }

    /// `GET path`: a read, retried with bounded backoff.
    pub fn get(&self, path: &str) -> Call<'_> {
        Call::new(
            &self.client.inner,
            Operation::Read {
                method: Method::GET,
                path: path.to_owned(),
            },
        )
    }

    /// `HEAD path`: a read without a body, retried like `GET`.
    pub fn head(&self, path: &str) -> Call<'_> {
        Call::new(
            &self.client.inner,
            Operation::Read {
                method: Method::HEAD,
                path: path.to_owned(),
            },
        )
    }

    /// A GraphQL `factQuery` document with its variables: read-only, no key.
    pub fn graphql(&self, query: &str, variables: serde_json::Value) -> Call<'_> {
        let body = serde_json::json!({"query": query, "variables": variables});
        Call::new(
            &self.client.inner,
            Operation::GraphQl {
                body: Bytes::from(body.to_string()),
            },
        )
    }

    /// Delivers `body` to the webhook trigger with `trigger_token` (a secret: never logged).
    ///
    /// Set the delivery ID with [`Delivering::delivery_id`], or pass a relay's provider
    /// header with [`Delivering::headers`].
    pub fn deliver(
        &self,
        trigger_token: impl Into<Secret>,
        body: impl Into<Bytes>,
    ) -> Delivering<'_> {
        Delivering::new(
            &self.client.inner,
            &self.settings,
            trigger_token.into(),
            body.into(),
        )
    }

    /// Follows a workflow run until it succeeds, fails or is cancelled.
    pub fn follow_run(&self, run_id: &str) -> FollowRun<'_> {
        FollowRun::new(&self.client.inner, self.settings.poll_interval, run_id)
    }
}

impl AsRef<RetryingClient> for HodoflowClient {
    fn as_ref(&self) -> &RetryingClient {
        &self.client
    }
}
