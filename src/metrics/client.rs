//! A client's figures: read from its counters at scrape time, then written as families.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::DescriptorEncoder;

use crate::client::RetryingClient;
use crate::core::meter::{HistogramSnapshot, OTHER, Outcome, SeriesKey};
use crate::core::runtime;
use crate::core::stats::Stats;

use super::family::{Label, Series, counter, gauge, histogram, plain, seconds};

/// The status classes of `hodoflow_client_attempts_total`, in the attempt meter's order.
const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "transport_error"];

/// What one client had done when read.
#[derive(Debug)]
pub(super) struct ClientFigures {
    /// The `client` label's value, for a client added by name.
    name: Option<String>,
    stats: Stats,
    /// Time the credential was closed, and routes (triggers) were, each route's time added.
    gate_closed: (Duration, Duration),

    classes: [u64; 6],
    rate_limited: u64,
    /// Each series, its status code as text (empty without one), and its durations.
    durations: Vec<(SeriesKey, String, HistogramSnapshot)>,
    server_address: String,
    server_port: Option<String>,
}

impl ClientFigures {
    /// Reads `client`'s counters now; its series carry `client="<name>"` when `name` is set.
    pub(super) fn read(name: Option<&str>, client: &RetryingClient) -> Self {
        let shared = &client.inner;
        let engine = &shared.engine;
        let durations = engine
            .meter
            .series()
            .into_iter()
            .map(|(key, snapshot)| {
                let code = match key.outcome {
                    Outcome::Status(status) => status.to_string(),
                    _ => String::new(),
                };
                (key, code, snapshot)
            })
            .collect();
        Self {
            name: name.map(str::to_owned),
            stats: engine.stats(),
            gate_closed: engine.limits.gate.closed_time(runtime::now()),

            classes: engine.meter.classes(),
            rate_limited: engine.meter.rate_limited(),
            durations,
            server_address: shared.base.host_str().unwrap_or_default().to_owned(),
            server_port: shared.base.port_or_known_default().map(|p| p.to_string()),
        }
    }

    /// `client="<name>"` when the client is named, then `labels`.
    fn labels<'a>(&'a self, labels: &[Label<'a>]) -> Vec<Label<'a>> {
        let client = self.name.as_deref().map(|name| ("client", name));
        client.into_iter().chain(labels.iter().copied()).collect()
    }

    /// One series without labels of its own: `value` of this client.
    fn one<V>(&self, value: V) -> Vec<(Vec<Label<'_>>, V)> {
        vec![(self.labels(&[]), value)]
    }

    /// Two series by the scope a server closed: the credential's `credential`, the triggers'
    /// `trigger`.
    fn by_scope<V>(&self, credential: V, trigger: V) -> Vec<(Vec<Label<'_>>, V)> {
        vec![
            (self.labels(&[("scope", "credential")]), credential),
            (self.labels(&[("scope", "trigger")]), trigger),
        ]
    }

    /// The duration series: method, status or error type, server address and port.
    fn durations(&self) -> Series<'_, &HistogramSnapshot> {
        self.durations
            .iter()
            .map(|(key, code, snapshot)| {
                let mut labels = vec![("http_request_method", key.method)];
                match key.outcome {
                    Outcome::Status(status) => {
                        labels.push(("http_response_status_code", code.as_str()));
                        // OpenTelemetry: a 4xx or 5xx is an error whose type is its status.
                        if status >= 400 {
                            labels.push(("error_type", code.as_str()));
                        }
                    }
                    Outcome::Transport(kind) => labels.push(("error_type", kind.as_str())),
                    Outcome::Other => labels.push(("error_type", OTHER)),
                }
                labels.push(("server_address", &self.server_address));
                if let Some(port) = &self.server_port {
                    labels.push(("server_port", port));
                }
                (self.labels(&labels), snapshot)
            })
            .collect()
    }
}

/// The series of one family over every client in `clients`, each from `each`.
fn across<'a, V>(
    clients: &'a [ClientFigures],
    each: impl Fn(&'a ClientFigures) -> Series<'a, V>,
) -> Series<'a, V> {
    clients.iter().flat_map(each).collect()
}

/// Writes the client families, each with the series of every client in `clients`.
pub(super) fn encode(clients: &[ClientFigures], out: &mut DescriptorEncoder<'_>) -> fmt::Result {
    counter(
        out,
        plain(
            "hodoflow_client_calls",
            "Calls finished, by outcome: succeeded, or failed (errors before anything was sent included).",
        ),
        across(clients, |c| {
            vec![
                (c.labels(&[("outcome", "succeeded")]), c.stats.succeeded),
                (c.labels(&[("outcome", "failed")]), c.stats.failed),
            ]
        }),
    )?;
    counter(
        out,
        plain(
            "hodoflow_client_attempts",
            "Attempts sent, by what came back: the status class, or transport_error for no answer.",
        ),
        across(clients, |c| {
            CLASSES
                .iter()
                .zip(c.classes)
                // 1xx never ends an attempt over reqwest: shown only if one did.
                .filter(|(class, count)| **class != "1xx" || *count > 0)
                .map(|(class, count)| (c.labels(&[("status_class", *class)]), count))
                .collect()
        }),
    )?;
    counter(
        out,
        plain(
            "hodoflow_client_retries",
            "Retries, by what the attempt before them came back with.",
        ),
        across(clients, |c| {
            let retries = c.stats.retries;
            [
                ("timeout", retries.timeout),
                ("transport", retries.transport),
                ("server_error", retries.server_error),
                ("rate_limited", retries.rate_limited),
                ("unauthorized", retries.unauthorized),
                ("in_progress", retries.in_progress),
            ]
            .into_iter()
            .map(|(cause, count)| (c.labels(&[("cause", cause)]), count))
            .collect()
        }),
    )?;
    counter(
        out,
        plain(
            "hodoflow_client_rate_limited_responses",
            "Answers with status 429 Too Many Requests.",
        ),
        across(clients, |c| c.one(c.rate_limited)),
    )?;
    counter(
        out,
        seconds(
            "hodoflow_client_gate_closed",
            "Time a scope was closed, as servers asked with a 429 and Retry-After or an exhausted RateLimit field: the credential (overlaps once), or triggers (each trigger's time added).",
        ),
        across(clients, |c| {
            c.by_scope(c.gate_closed.0.as_secs_f64(), c.gate_closed.1.as_secs_f64())
        }),
    )?;
    gauge(
        out,
        seconds(
            "hodoflow_client_gate_closed_remaining",
            "How long the credential, or the trigger closed longest, stays closed from now; 0 while open.",
        ),
        across(clients, |c| {
            c.by_scope(
                secs(c.stats.gate_closed_for),
                secs(c.stats.route_closed_for),
            )
        }),
    )?;
    counter(
        out,
        seconds(
            "hodoflow_client_gate_wait",
            "Time calls waited at the credential's gate (a closed gate, the rate budget), summed over calls.",
        ),
        across(clients, |c| c.one(c.stats.gate_wait.as_secs_f64())),
    )?;
    counter(
        out,
        seconds(
            "hodoflow_client_trigger_wait",
            "Time calls waited for a slot of a webhook trigger's window, summed over calls.",
        ),
        across(clients, |c| c.one(c.stats.route_wait.as_secs_f64())),
    )?;
    // Only clients with a retry budget have these figures; a family without one is left out.
    let tokens = across(clients, |c| {
        let tokens = c.stats.retry_budget_tokens.map(u64::from);
        tokens.map(|tokens| c.one(tokens)).unwrap_or_default()
    });
    if !tokens.is_empty() {
        gauge(
            out,
            plain(
                "hodoflow_client_retry_budget_tokens",
                "Tokens left in the retry budget; absent when the budget is disabled.",
            ),
            tokens,
        )?;
    }
    let ratios = across(clients, |c| {
        let ratio = c.stats.retry_budget_throttle_permille;
        ratio
            .map(|permille| c.one(f64::from(permille) / 1000.0))
            .unwrap_or_default()
    });
    if !ratios.is_empty() {
        gauge(
            out,
            plain(
                "hodoflow_client_retry_budget_throttle_ratio",
                "The retry budget's SRE throttle ratio, 0 to 1 (the service counts as down from 0.5); absent when the budget is disabled.",
            ),
            ratios,
        )?;
    }
    counter(
        out,
        plain(
            "hodoflow_client_retry_budget_refusals",
            "Attempts the retry budget refused to send; each ended its call with retry_budget_exhausted.",
        ),
        across(clients, |c| c.one(c.stats.retry_budget_refusals)),
    )?;
    counter(
        out,
        plain(
            "hodoflow_client_token_exchanges",
            "Token exchanges finished, failed ones included.",
        ),
        across(clients, |c| c.one(c.stats.exchanges)),
    )?;
    histogram(
        out,
        seconds(
            "http_client_request_duration",
            "Duration of HTTP client requests: one per attempt, from send to the answer's body read or the transport error (OpenTelemetry's http.client.request.duration).",
        ),
        across(clients, ClientFigures::durations),
    )
}

/// Seconds of an optional duration; 0 for none.
fn secs(duration: Option<Duration>) -> f64 {
    duration.map_or(0.0, |duration| duration.as_secs_f64())
}
