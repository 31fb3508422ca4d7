//! A client's and an outbox's figures in the OpenMetrics text format, for Prometheus to scrape
//! (feature `metrics`).
//!
//! [`Metrics`] reads, at each scrape, what a [`RetryingClient`] counted (calls, attempts by
//! status class, retries by cause, 429s, the credential's gate, the retry budget, token
//! exchanges, the duration of every attempt) and what each [`Source`] added to it reads: an
//! outbox's store (jobs by state, the oldest due job) and what this process's workers and
//! producers did (deliveries by outcome, enqueue durations, delivery latencies), or your own.
//! [`Metrics::encode`] returns the exposition; serve it on `/metrics` with [`CONTENT_TYPE`].
//! The metrics guide ([`crate::guide::metrics`], `docs/guide/metrics.md`) lists every family, its
//! type and its labels.
//!
//! # Why `prometheus-client`
//!
//! Two maintained crates are made for this. The `metrics` facade with
//! `metrics-exporter-prometheus` installs a process-wide recorder that any crate's macros write
//! to; its exporter brings an HTTP listener and a push-gateway client by default (hyper,
//! rustls), and a library that records into a global recorder takes that choice from its
//! user. `prometheus-client` is the Prometheus project's own Rust client: a typed registry, an
//! OpenMetrics text encoder, no global state, and a small tree (`dtoa`, `itoa`, `parking_lot`
//! and its derive macro, with no default features). The SDK needs only the encoder: its
//! figures already live in atomics that the engine updates, and are read once per scrape
//! through the crate's collector interface, so nothing is registered globally and two clients
//! in one process never share figures by accident. Behind the `metrics` feature: without it
//! neither the crate nor the engine's per-attempt counting is compiled.
//!
//! # Names and labels
//!
//! OpenTelemetry's name is used where it has one: `http.client.request.duration` is
//! `http_client_request_duration_seconds`, a histogram with OpenTelemetry's advised buckets
//! (5 ms to 10 s) and its attributes in Prometheus form (`http_request_method`,
//! `http_response_status_code`, `error_type`, `server_address`, `server_port`). The rest are
//! `hodoflow_client_*` and `hodoflow_outbox_*`, with units in the name (`_seconds`) and `_total`
//! on counters, as OpenMetrics asks.
//!
//! Labels never carry a trigger token, a key, a delivery ID, an event ID, a path or a body:
//! every label value comes from a fixed set (a method's name or `_OTHER`, a status code, a
//! transport error's kind, a job state, a retry cause), is the client's base URL host and
//! port, or is a client's name given in code ([`Metrics::named_client`]). A client keeps at most 48 duration series; past that, attempts count in one series
//! with `error_type="_OTHER"`.
//!
//! # Examples
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN, MockServer};
//! use hodoflow_retry::metrics::{CONTENT_TYPE, Metrics};
//! use hodoflow_retry::{DeliveryId, IdempotencyKey, HodoflowClient};
//!
//! let server = MockServer::start().await?;
//! let client = HodoflowClient::builder(server.base_url())
//!     .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
//!     .build()?;
//! let id = DeliveryId::new(IdempotencyKey::from_operation_id("order-4711:shipped"));
//! let delivery = client.deliver(DEMO_TRIGGER_TOKEN, r#"{"order":4711}"#);
//! delivery.delivery_id(id).send().await?;
//!
//! let metrics = Metrics::new().client(&client);
//! let body = metrics.encode().await?;
//! assert!(body.contains("hodoflow_client_attempts_total{status_class=\"2xx\"} 1\n"));
//! assert!(body.ends_with("# EOF\n"));
//! assert!(CONTENT_TYPE.starts_with("application/openmetrics-text"));
//! # Ok(())
//! # }
//! ```

mod client;
mod family;
mod source;

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use crate::client::RetryingClient;
use crate::core::error::{Error, ErrorKind, Result};

use client::ClientFigures;

pub use crate::core::meter::Histogram;
pub use source::{Figures, Source, SourceFuture};

/// The media type of [`Metrics::encode`]'s body: OpenMetrics 1.0.0 text, which Prometheus
/// asks for first and reads natively.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What one scrape reads: clients' figures, and those of each [`Source`] (an outbox's).
///
/// Build it once, keep it beside the clients and sources (it holds clones of their handles),
/// and call [`encode`](Self::encode) for each scrape.
///
/// # Examples
///
/// With figures of your own beside the client's (an outbox is such a [`Source`]: add it with
/// `.source(outbox.clone())`), as a sender serving `/metrics` would:
///
/// ```no_run
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// use hodoflow_retry::metrics::{CONTENT_TYPE, Figures, Metrics, Source, SourceFuture};
///
/// /// Events this sender took in: a counter of its own.
/// #[derive(Debug, Default)]
/// struct Intake(AtomicU64);
///
/// impl Source for &'static Intake {
///     fn read(&self) -> SourceFuture<'_> {
///         let taken = self.0.load(Ordering::Relaxed);
///         Box::pin(async move {
///             Ok(Figures::new().counter("sender_events", "Events taken in.", [(vec![], taken)]))
///         })
///     }
/// }
///
/// # async fn example(client: hodoflow_retry::HodoflowClient) -> hodoflow_retry::Result<()> {
/// static INTAKE: Intake = Intake(AtomicU64::new(0));
/// let metrics = Metrics::new().client(&client).source(&INTAKE);
/// // In the `/metrics` handler:
/// let (body, content_type) = (metrics.encode().await?, CONTENT_TYPE);
/// # let _ = (body, content_type);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct Metrics {
    /// Each client, with the `client` label's value when it was added by name.
    clients: Vec<(Option<String>, RetryingClient)>,
    /// Each source, in the order added.
    sources: Vec<Arc<dyn Source>>,
}

impl Metrics {
    /// Metrics of nothing yet: add clients and sources.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads `client`'s figures (and those of its clones, which share them): the
    /// `hodoflow_client_*` families and `http_client_request_duration_seconds`, without a
    /// `client` label. A second call replaces the first; add more clients with
    /// [`named_client`](Self::named_client). Takes any vendor's client
    /// ([`HodoflowClient`](crate::HodoflowClient), [`ModulifyClient`](crate::ModulifyClient)) or
    /// a [`RetryingClient`].
    ///
    /// Default: none.
    pub fn client(self, client: &impl AsRef<RetryingClient>) -> Self {
        self.put(None, client.as_ref())
    }

    /// Reads the figures of one more client, each of its series labelled `client="<name>"`:
    /// several clients in one exposition, such as a Hodoflow client and a
    /// [`ModulifyClient`](crate::ModulifyClient). `name` is chosen in
    /// code, such as `"modulify"`: never a token, a key or anything that varies per request. A
    /// second client of the same name replaces the first.
    ///
    /// Default: none.
    pub fn named_client(
        self,
        name: impl Into<String>,
        client: &impl AsRef<RetryingClient>,
    ) -> Self {
        self.put(Some(name.into()), client.as_ref())
    }

    fn put(mut self, name: Option<String>, client: &RetryingClient) -> Self {
        self.clients.retain(|(held, _)| *held != name);
        self.clients.push((name, client.clone()));
        self
    }

    /// Reads `source`'s figures too, after the clients': an outbox's (the `hodoflow_outbox_*`
    /// families), or your own.
    ///
    /// Default: none.
    pub fn source(mut self, source: impl Source + 'static) -> Self {
        self.sources.push(Arc::new(source));
        self
    }

    /// The exposition now, in OpenMetrics text ([`CONTENT_TYPE`]): every family with its
    /// `# HELP` and `# TYPE` lines, ending in `# EOF`. Reading an outbox runs three short
    /// queries on its store (counts by state, those a call may have run, the oldest due job).
    ///
    /// # Errors
    ///
    /// A source's error (an outbox's store that cannot be read): the scrape fails rather than
    /// showing figures it could not see.
    pub async fn encode(&self) -> Result<String> {
        let scrape = Scrape {
            clients: self
                .clients
                .iter()
                .map(|(name, client)| ClientFigures::read(name.as_deref(), client))
                .collect(),
            sources: {
                let mut read = Vec::with_capacity(self.sources.len());
                for source in &self.sources {
                    read.push(source.read().await?);
                }
                read
            },
        };
        let mut registry = Registry::default();
        registry.register_collector(Box::new(scrape));
        let mut body = String::new();
        prometheus_client::encoding::text::encode(&mut body, &registry).map_err(|_| {
            Error::new(
                ErrorKind::InvalidInput,
                "the metrics could not be encoded as OpenMetrics text",
            )
        })?;
        Ok(body)
    }
}

/// The figures of one scrape, written by the registry's encoder.
#[derive(Debug)]
struct Scrape {
    clients: Vec<ClientFigures>,
    sources: Vec<Figures>,
}

impl Collector for Scrape {
    fn encode(&self, mut out: DescriptorEncoder<'_>) -> fmt::Result {
        if !self.clients.is_empty() {
            client::encode(&self.clients, &mut out)?;
        }
        for figures in &self.sources {
            figures.encode(&mut out)?;
        }
        Ok(())
    }
}
