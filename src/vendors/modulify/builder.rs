//! [`ModulifyBuilder`]: a Modulify client with only the settings that mean something for
//! Modulify. Its token is static (no exchange), its deliveries are not webhooks (no signing, no
//! trigger windows): what is left are the generic settings of any client, each handed to the
//! [`ClientBuilder`] underneath.

use crate::client::ClientBuilder;
use crate::core::auth::secret::Secret;
use crate::core::backoff::Backoff;
use crate::core::budget::Budget;
use crate::core::error::Result;
use crate::core::limit::gate::RateBudget;
use crate::core::limit::retry_budget::RetryBudget;
use crate::core::schedule::Schedule;
use crate::core::transport::AttemptTransport;
use crate::vendors::modulify::client::ModulifyClient;

/// Builds a [`ModulifyClient`]: [`ModulifyClient::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until it is built"]
pub struct ModulifyBuilder {
    client: ClientBuilder,
}

/// Setters that hand their value to the same setter of the [`ClientBuilder`] underneath.
macro_rules! handed_on {
    ($($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty);)*) => {
        $(
            $(#[$doc])*
            pub fn $name(self, $arg: $ty) -> Self {
                Self { client: self.client.$name($arg) }
            }
        )*
    };
}

impl ModulifyClient {
    /// A client of Modulify's API at `base_url`, with the settings that mean something for
    /// Modulify only: its API token, budgets, backoff, limits and the transport.
    pub fn builder(base_url: impl Into<String>) -> ModulifyBuilder {
        ModulifyBuilder {
            client: ClientBuilder::new(base_url),
        }
    }
}

impl ModulifyBuilder {
    handed_on! {
        /// Modulify's API token, sent as the bearer token of every attempt (Modulify's tokens
        /// are static: there is no exchange). Never logged, and redacted from errors when a
        /// server echoes it.
        ///
        /// Default: none; [`build`](Self::build) needs one.
        bearer_token(token: impl Into<Secret>);
        /// The attempt and elapsed-time budget of every call, overridable per call. See
        /// [`ClientBuilder::budget`].
        budget(budget: Budget);
        /// The backoff between retries, overridable per call. See [`ClientBuilder::backoff`].
        backoff(backoff: Backoff);
        /// Waits of your own between attempts. See [`ClientBuilder::schedule`].
        schedule(schedule: impl Schedule + 'static);
        /// The credential's rate budget, shared with the clients given the same one. See
        /// [`ClientBuilder::rate_budget`].
        rate_budget(budget: RateBudget);
        /// The adaptive retry budget, shared with the clients given the same one. See
        /// [`ClientBuilder::retry_budget`].
        retry_budget(budget: RetryBudget);
        /// The most bytes of an answer read. See [`ClientBuilder::max_answer_bytes`].
        max_answer_bytes(bytes: usize);
        /// Sends through this reqwest client. See [`ClientBuilder::http_client`].
        http_client(http: reqwest::Client);
        /// Sends every attempt through `transport` (tests, simulations). See
        /// [`ClientBuilder::transport`].
        transport(transport: impl AttemptTransport);
        /// Seeds the jitter's draws (tests, simulations). See [`ClientBuilder::seed`].
        seed(seed: u64);
    }

    /// Speaks HTTP/2 without TLS (h2c). See [`ClientBuilder::http2_prior_knowledge`].
    pub fn http2_prior_knowledge(self) -> Self {
        Self {
            client: self.client.http2_prior_knowledge(),
        }
    }

    /// Builds the client.
    ///
    /// # Errors
    ///
    /// An `invalid_input` error without a [`bearer_token`](Self::bearer_token), and as
    /// [`ClientBuilder::build`] says: a base URL that is not an http(s) URL with a host, an
    /// invalid budget, a zero answer limit.
    pub fn build(self) -> Result<ModulifyClient> {
        if !self.client.has_bearer_token() {
            return Err(crate::core::error::Error::invalid_input(
                "a Modulify client needs its API token: set bearer_token",
            ));
        }
        self.client.build().map(ModulifyClient::new)
    }
}
