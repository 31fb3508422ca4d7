//! [`HodoflowBuilder`]: a Hodoflow client with the generic settings of any client, each handed
//! to the [`ClientBuilder`] underneath, and Hodoflow's own: its OAuth client credentials, the
//! signing secrets of webhook deliveries, trigger pacing, the webhook body limit and how often a
//! workflow run is polled.

use std::sync::Arc;
use std::time::Duration;

use crate::client::{ClientBuilder, generic_setters, handed_on};
use crate::core::auth::TokenExchanger;
use crate::core::auth::secret::Secret;
use crate::core::error::{Error, Result};
use crate::core::limit::window::RouteLimit;
use crate::core::signing::Signer;
use crate::vendors::hodoflow::client::HodoflowClient;
use crate::vendors::hodoflow::limits::TRIGGER_LIMIT;
use crate::vendors::hodoflow::oauth::ClientCredentials;
use crate::vendors::hodoflow::routes::trigger_key;
use crate::vendors::hodoflow::settings::Settings;

/// The default client-side limit of a webhook body: 1,048,576 bytes (Hodoflow's webhook sender
/// guide, "Limits and checkpoints").
pub const DEFAULT_WEBHOOK_BODY_LIMIT: usize = 1_048_576;

/// Builds a [`HodoflowClient`]: [`HodoflowClient::builder`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::{Budget, HodoflowClient};
///
/// let client = HodoflowClient::builder("https://hodoflow.example")
///     .client_credentials("sender-1", "s3cr3t")
///     .budget(Budget::new().max_attempts(3).max_elapsed(Duration::from_secs(20)))
///     .build()?;
/// # let _ = client;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until it is built"]
pub struct HodoflowBuilder {
    client: ClientBuilder,
    webhook_body_limit: usize,
    poll_interval: Duration,
    signing_secrets: Vec<Secret>,
}

impl HodoflowClient {
    /// A client of Hodoflow's API at `base_url` (scheme, host, port, optional path prefix).
    pub fn builder(base_url: impl Into<String>) -> HodoflowBuilder {
        let mut client = ClientBuilder::new(base_url);
        client.routes.until_told = Some(TRIGGER_LIMIT);
        HodoflowBuilder {
            client,
            webhook_body_limit: DEFAULT_WEBHOOK_BODY_LIMIT,
            poll_interval: Duration::from_secs(1),
            signing_secrets: Vec::new(),
        }
    }
}

impl HodoflowBuilder {
    /// Exchanges these client credentials at `POST <base_url>/oauth/token`. For a token
    /// endpoint elsewhere, pass [`ClientCredentials::token_url`] to
    /// [`exchanger`](Self::exchanger) instead.
    ///
    /// Default: none; set this, [`exchanger`](Self::exchanger) or
    /// [`bearer_token`](Self::bearer_token).
    pub fn client_credentials(
        mut self,
        client_id: impl Into<String>,
        secret: impl Into<Secret>,
    ) -> Self {
        let (client_id, secret) = (client_id.into(), secret.into());
        self.client.credentials = Some(Box::new(move |base_url: &str, http: reqwest::Client| {
            let exchanger = ClientCredentials::with_http_client(base_url, client_id, secret, http)?;
            Ok(Arc::new(exchanger) as Arc<dyn TokenExchanger>)
        }));
        self
    }

    handed_on! {
        /// Gets tokens from your own exchanger instead of client credentials. See
        /// [`ClientBuilder::exchanger`].
        exchanger(exchanger: impl TokenExchanger + 'static);
        /// Sends this token as the bearer token of every attempt, with no exchange. See
        /// [`ClientBuilder::bearer_token`].
        bearer_token(token: impl Into<Secret>);
    }

    generic_setters!();

    /// The largest webhook body sent; a larger one is refused before anything is sent.
    ///
    /// Default: [`DEFAULT_WEBHOOK_BODY_LIMIT`], 1,048,576 bytes, the server's default limit.
    pub fn webhook_body_limit(mut self, bytes: usize) -> Self {
        self.webhook_body_limit = bytes;
        self
    }

    /// Paces the deliveries to every webhook trigger to `limit` on the client, so a burst
    /// waits here instead of bouncing off 429s, whatever the server's `RateLimit-Policy` says:
    /// the caller's limit wins over the server's figures. [`TRIGGER_LIMIT`](crate::hodoflow::TRIGGER_LIMIT) is
    /// the default of Hodoflow's webhook sender guide, 100 requests per 60 s. A wait for a slot
    /// counts against the call's `max_elapsed`, the first attempt's included; a delivery that
    /// may queue for its slot before its budget starts says so with
    /// [`Delivering::queue`](crate::webhook::Delivering::queue).
    ///
    /// Default: no pacing (only the server's 429s pace deliveries); see
    /// [`pace_triggers`](Self::pace_triggers) to pace at the server's own figures.
    pub fn trigger_limit(mut self, limit: RouteLimit) -> Self {
        self.client.routes.every = Some(limit);
        self
    }

    /// Paces the deliveries to the trigger with `trigger_token` to `limit`, whatever
    /// [`trigger_limit`](Self::trigger_limit) says. The token is kept only as a hash.
    ///
    /// Default: none.
    pub fn trigger_limit_for(mut self, trigger_token: &str, limit: RouteLimit) -> Self {
        self.client
            .routes
            .overrides
            .insert(trigger_key(trigger_token), limit);
        self
    }

    /// Paces the deliveries to every webhook trigger that has no
    /// [`trigger_limit`](Self::trigger_limit) at the trigger's own limit, as the server states
    /// it on every answer (`RateLimit-Policy: "trigger";q=100;w=60`), and at the documented
    /// default, [`TRIGGER_LIMIT`](crate::hodoflow::TRIGGER_LIMIT), until the server has said. The precedence is
    /// the caller's limit, then the server's figures, then the documented default
    /// (`docs/wire-contract.md`, "RateLimit fields").
    /// [`Stats::route_held_by`](crate::Stats::route_held_by) says which one held calls.
    ///
    /// Default: off (no pacing unless [`trigger_limit`](Self::trigger_limit) is set).
    ///
    /// # Examples
    ///
    /// ```
    /// use hodoflow_retry::HodoflowClient;
    ///
    /// let client = HodoflowClient::builder("https://hodoflow.example")
    ///     .client_credentials("sender-1", "s3cr3t")
    ///     .pace_triggers()
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), hodoflow_retry::Error>(())
    /// ```
    pub fn pace_triggers(mut self) -> Self {
        self.client.routes.learn = true;
        self
    }

    /// How often [`HodoflowClient::follow_run`] polls a run.
    ///
    /// Default: 1 s.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
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
    /// use hodoflow_retry::HodoflowClient;
    ///
    /// let client = HodoflowClient::builder("https://hodoflow.example")
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

    /// Builds the client.
    ///
    /// # Errors
    ///
    /// An `invalid_input` error when a signing secret is not `whsec_` followed by the base64 of
    /// at least 24 bytes (the error does not quote it), the poll interval is zero, and as
    /// [`ClientBuilder::build`] says: a base URL that is not an http(s) URL with a host (or
    /// that holds a user name, password, query or fragment), no token source, an invalid
    /// budget, a zero answer limit.
    pub fn build(self) -> Result<HodoflowClient> {
        let signer = Signer::parse(&self.signing_secrets)?;
        if self.poll_interval.is_zero() {
            return Err(Error::invalid_input("the poll interval must be positive"));
        }
        let client = self.client.build()?;
        Ok(HodoflowClient::new(
            client,
            Settings {
                webhook_body_limit: self.webhook_body_limit,
                poll_interval: self.poll_interval,
                signer,
            },
        ))
    }
}
