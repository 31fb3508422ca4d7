//! [`ModulifyBuilder`]: a Modulify client with only the settings that mean something for
//! Modulify. Its token is static (no exchange), its deliveries are not webhooks (no signing, no
//! trigger windows): what is left are the generic settings of any client, each handed to the
//! [`ClientBuilder`] underneath.

use crate::client::{ClientBuilder, generic_setters, handed_on};
use crate::core::auth::secret::Secret;
use crate::core::error::Result;
use crate::vendors::modulify::client::ModulifyClient;

/// Builds a [`ModulifyClient`]: [`ModulifyClient::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until it is built"]
pub struct ModulifyBuilder {
    client: ClientBuilder,
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
    }

    generic_setters!();

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
