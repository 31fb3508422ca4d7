//! A client's figures: read from its counters at scrape time, then written as families.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::DescriptorEncoder;

use crate::client::RetryingClient;
use crate::core::clock;
use crate::core::meter::{HistogramSnapshot, OTHER, Outcome, SeriesKey};
use crate::core::stats::Stats;

use super::family::{Label, counter, gauge, histogram, plain, seconds};

/// The status classes of `hodoflow_client_attempts_total`, in the attempt meter's order.
const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "transport_error"];

/// What one client had done when read.
#[derive(Debug)]
pub(super) struct ClientFigures {
    stats: Stats,
    gate_closed: Duration,
    classes: [u64; 6],
    rate_limited: u64,
    durations: Vec<(SeriesKey, HistogramSnapshot)>,
    server_address: String,
    server_port: Option<String>,
}

impl ClientFigures {
    /// Reads `client`'s counters now.
    pub(super) fn read(client: &RetryingClient) -> Self {
        let shared = &client.inner;
        let engine = &shared.engine;
        Self {
            stats: engine.stats(),
            gate_closed: engine.gate.closed_time(clock::now()),
            classes: engine.meter.classes(),
            rate_limited: engine.meter.rate_limited(),
            durations: engine.meter.series(),
            server_address: shared.base.host_str().unwrap_or_default().to_owned(),
            server_port: shared.base.port_or_known_default().map(|p| p.to_string()),
        }
    }

    /// Writes the client's families.
    pub(super) fn encode(&self, out: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let stats = &self.stats;
        counter(
            out,
            plain(
                "hodoflow_client_calls",
                "Calls finished, by outcome: succeeded, or failed (errors before anything was sent included).",
            ),
            &[
                (&[("outcome", "succeeded")], stats.succeeded),
                (&[("outcome", "failed")], stats.failed),
            ],
        )?;
        let classes: Vec<([Label<'_>; 1], u64)> = CLASSES
            .iter()
            .zip(self.classes)
            // 1xx never ends an attempt over reqwest: shown only if one did.
            .filter(|(class, count)| **class != "1xx" || *count > 0)
            .map(|(class, count)| ([("status_class", *class)], count))
            .collect();
        let classes: Vec<(&[Label<'_>], u64)> = classes
            .iter()
            .map(|(labels, count)| (labels.as_slice(), *count))
            .collect();
        counter(
            out,
            plain(
                "hodoflow_client_attempts",
                "Attempts sent, by what came back: the status class, or transport_error for no answer.",
            ),
            &classes,
        )?;
        let retries = stats.retries;
        counter(
            out,
            plain(
                "hodoflow_client_retries",
                "Retries, by what the attempt before them came back with.",
            ),
            &[
                (&[("cause", "timeout")], retries.timeout),
                (&[("cause", "transport")], retries.transport),
                (&[("cause", "server_error")], retries.server_error),
                (&[("cause", "rate_limited")], retries.rate_limited),
                (&[("cause", "unauthorized")], retries.unauthorized),
                (&[("cause", "in_progress")], retries.in_progress),
            ],
        )?;
        counter(
            out,
            plain(
                "hodoflow_client_rate_limited_responses",
                "Answers with status 429 Too Many Requests.",
            ),
            &[(&[], self.rate_limited)],
        )?;
        counter(
            out,
            seconds(
                "hodoflow_client_gate_closed",
                "Time the credential's gate was closed, as servers asked with 429 or 503 and Retry-After or an exhausted RateLimit field.",
            ),
            &[(&[], self.gate_closed.as_secs_f64())],
        )?;
        gauge(
            out,
            seconds(
                "hodoflow_client_gate_closed_remaining",
                "How long the credential's gate stays closed from now; 0 while it is open.",
            ),
            &[(&[], secs(stats.gate_closed_for))],
        )?;
        counter(
            out,
            seconds(
                "hodoflow_client_gate_wait",
                "Time calls waited at the credential's gate (a closed gate, the rate budget), summed over calls.",
            ),
            &[(&[], stats.gate_wait.as_secs_f64())],
        )?;
        counter(
            out,
            seconds(
                "hodoflow_client_trigger_wait",
                "Time calls waited for a slot of a webhook trigger's window, summed over calls.",
            ),
            &[(&[], stats.trigger_wait.as_secs_f64())],
        )?;
        if let Some(tokens) = stats.retry_budget_tokens {
            gauge(
                out,
                plain(
                    "hodoflow_client_retry_budget_tokens",
                    "Tokens left in the retry budget; absent when the budget is disabled.",
                ),
                &[(&[], u64::from(tokens))],
            )?;
        }
        if let Some(permille) = stats.retry_budget_throttle_permille {
            gauge(
                out,
                plain(
                    "hodoflow_client_retry_budget_throttle_ratio",
                    "The retry budget's SRE throttle ratio, 0 to 1 (the service counts as down from 0.5); absent when the budget is disabled.",
                ),
                &[(&[], f64::from(permille) / 1000.0)],
            )?;
        }
        counter(
            out,
            plain(
                "hodoflow_client_retry_budget_refusals",
                "Attempts the retry budget refused to send; each ended its call with retry_budget_exhausted.",
            ),
            &[(&[], stats.retry_budget_refusals)],
        )?;
        counter(
            out,
            plain(
                "hodoflow_client_token_exchanges",
                "Token exchanges finished, failed ones included.",
            ),
            &[(&[], stats.exchanges)],
        )?;
        self.encode_durations(out)
    }

    /// OpenTelemetry's `http.client.request.duration`, one series per method and status or
    /// transport error.
    fn encode_durations(&self, out: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let codes: Vec<String> = self
            .durations
            .iter()
            .map(|(key, _)| match key.outcome {
                Outcome::Status(status) => status.to_string(),
                _ => String::new(),
            })
            .collect();
        let labels: Vec<Vec<Label<'_>>> = self
            .durations
            .iter()
            .zip(&codes)
            .map(|((key, _), code)| {
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
                labels
            })
            .collect();
        let series: Vec<(&[Label<'_>], &HistogramSnapshot)> = labels
            .iter()
            .zip(&self.durations)
            .map(|(labels, (_, snapshot))| (labels.as_slice(), snapshot))
            .collect();
        histogram(
            out,
            seconds(
                "http_client_request_duration",
                "Duration of HTTP client requests: one per attempt, from send to the answer's body read or the transport error (OpenTelemetry's http.client.request.duration).",
            ),
            &series,
        )
    }
}

/// Seconds of an optional duration; 0 for none.
fn secs(duration: Option<Duration>) -> f64 {
    duration.map_or(0.0, |duration| duration.as_secs_f64())
}
