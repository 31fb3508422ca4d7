//! Hodoflow's methods on [`RetryingClient`]: JSON:API writes and reads, GraphQL, webhook
//! deliveries and workflow runs (`docs/wire-contract.md`), and on [`ClientBuilder`] its OAuth
//! client credentials. The client itself (`src/client.rs`) is the same for every vendor and
//! imports none; these are Hodoflow's surfaces of it.

use std::sync::Arc;

use bytes::Bytes;
use http::Method;

use crate::client::{ClientBuilder, RetryingClient};
use crate::core::auth::TokenExchanger;
use crate::core::auth::secret::Secret;
use crate::core::key::IdempotencyKey;
use crate::vendors::hodoflow::call::{Call, Delivering, Operation};
use crate::vendors::hodoflow::oauth::ClientCredentials;
use crate::vendors::hodoflow::run::FollowRun;

impl ClientBuilder {
    /// Exchanges these client credentials at `POST <base_url>/oauth/token`. For a token
    /// endpoint elsewhere, pass [`ClientCredentials::token_url`] to
    /// [`exchanger`](ClientBuilder::exchanger) instead.
    ///
    /// Default: none; set this or [`exchanger`](ClientBuilder::exchanger).
    pub fn client_credentials(
        mut self,
        client_id: impl Into<String>,
        secret: impl Into<Secret>,
    ) -> Self {
        let (client_id, secret) = (client_id.into(), secret.into());
        self.credentials = Some(Box::new(move |base_url: &str, http: reqwest::Client| {
            let exchanger = ClientCredentials::with_http_client(base_url, client_id, secret, http)?;
            Ok(Arc::new(exchanger) as Arc<dyn TokenExchanger>)
        }));
        self
    }
}

impl RetryingClient {
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
            &self.inner,
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
            &self.inner,
            Operation::Read {
                method: Method::GET,
                path: path.to_owned(),
            },
        )
    }

    /// `HEAD path`: a read without a body, retried like `GET`.
    pub fn head(&self, path: &str) -> Call<'_> {
        Call::new(
            &self.inner,
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
            &self.inner,
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
        Delivering::new(&self.inner, trigger_token.into(), body.into())
    }

    /// Follows a workflow run until it succeeds, fails or is cancelled.
    pub fn follow_run(&self, run_id: &str) -> FollowRun<'_> {
        FollowRun::new(&self.inner, run_id)
    }
}
