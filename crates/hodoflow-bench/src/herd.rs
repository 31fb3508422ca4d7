//! `herd`: do retries of operations that failed together come back together?
//!
//! 1,000 operations, each to its own trigger, are released at once from a barrier, over
//! connections opened by a warm-up round; the server answers the first attempt of each `503`
//! without `Retry-After`, and accepts the retry. The SDK runs with its default backoff (full jitter, 500 ms doubling).
//!
//! Bunching of a set of arrivals = the most arrivals in any 100 ms window (a sliding window
//! starting at any arrival) divided by the mean arrivals per 100 ms over their span (first to
//! last arrival: count / (span / 100 ms), with a span under 100 ms counted as one window).
//!
//! The contract server cannot hold 1,000 requests and answer them in the same instant, so
//! the first attempts fail over a spread of some milliseconds, which itself spreads the
//! retries. Two figures are therefore given: `raw`, the retries' arrival times as they came,
//! and `aligned`, each retry's arrival minus its own failure's arrival, which is the schedule
//! the retries would have had if every failure had happened in the same instant. The target
//! is held against `aligned`, for the default budget (every operation must succeed: a retry
//! that finds the bucket empty waits for the tokens the successes bring back) and for the
//! budget disabled; the plain bucket of earlier releases is reported beside them, and so is
//! each peer (`reqwest-retry`, reqwest's built-in retry, backon), with the SDK's attempts
//! and default backoff where the peer has them, sending the same delivery ID header.
//! Targets: 0 operations failed with the default budget; aligned bunching <= 1.5.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hodoflow_mock::{DEMO_TRIGGER_TOKEN, Fault};
use hodoflow_retry::{Backoff, DeliveryId, HodoflowClient, IdempotencyKey, limit::RetryBudget};
use serde_json::json;
use tokio::sync::Barrier;

use crate::figures::{Bunching, ms, round};
use crate::peers::{self, Peer, Schedule, Sender};
use crate::report::Report;
use crate::size::Size;
use crate::{Result, drive, server};

const WINDOW: Duration = Duration::from_millis(100);
const TARGET_BUNCHING: f64 = 1.5;
const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711}"#;

pub(crate) async fn run(size: Size) -> Result<Report> {
    let operations = size.pick(1_000u64, 20);
    let mut variants = vec![
        ("budget_disabled", Variant::Sdk(RetryBudget::disabled())),
        ("default_budget", Variant::Sdk(RetryBudget::new())),
        (
            "plain_bucket",
            Variant::Sdk(RetryBudget::builder().adaptive(false).build()?),
        ),
    ];
    variants.extend(Peer::ALL.map(|peer| (peer.label(), Variant::Peer(peer))));
    run_with(
        Report::new("herd"),
        operations,
        operations as usize,
        variants,
    )
    .await
}

/// The herd at 10,000 operations, with the default budget only. One process holds the client's
/// and the in-process server's sockets, two per operation in flight, under an open-files limit
/// of 20,000: so 8,000 are released together and the rest as workers free up.
pub(crate) async fn run_10k(size: Size) -> Result<Report> {
    let operations = size.pick(10_000u64, 40);
    let concurrency = size.pick(8_000usize, 40);
    let variants = vec![("default_budget", Variant::Sdk(RetryBudget::new()))];
    let mut report = Report::new("herd_10k");
    report.note("the targets are 0 operations failed and no cost that grows with history (peak RSS is reported; the retry budget's state is a fixed ring of 120 one-second buckets); bunching is reported, not judged: the in-process server takes the 8,000 first attempts over about 2 s, which spreads them unevenly");
    run_with(report, operations, concurrency, variants).await
}

async fn run_with(
    mut report: Report,
    operations: u64,
    concurrency: usize,
    variants: Vec<(&'static str, Variant)>,
) -> Result<Report> {
    report.param("operations", operations);
    report.param("released_together", concurrency);
    report.param("window_ms", ms(WINDOW));
    report.param(
        "failure",
        "the first attempt of each operation: 503 without Retry-After; retries accepted",
    );
    report.param(
        "sdk_backoff",
        "default: full jitter, 500 ms doubling to 30 s",
    );
    report.param("bunching", "max retries in any sliding 100 ms window / (retries / (span / 100 ms)), span = first to last arrival");
    let mut judged = BTreeMap::new();
    for peer in Peer::ALL {
        report.param(peer.label(), peer.describe(Schedule::SDK_DEFAULT));
    }
    for (label, variant) in variants {
        let server = server::start().await?;
        let client = match variant {
            Variant::Sdk(budget) => {
                Client::Sdk(peers::sdk(&server.base_url(), Backoff::default(), budget)?)
            }
            Variant::Peer(peer) => Client::Peer(
                Sender::retrying(peer, &server.base_url(), Schedule::SDK_DEFAULT).await?,
            ),
        };
        // Warm up: one round of successful deliveries opens the connections.
        let warm = client.clone();
        drive::each(operations, concurrency, move |op| {
            let client = warm.clone();
            async move {
                client
                    .deliver(DEMO_TRIGGER_TOKEN, format!("herd-warm-{op}"))
                    .await;
            }
        })
        .await;
        let triggers = server::triggers(&server, "trg_herd", operations);
        for token in triggers.iter() {
            server.inject(
                Fault::respond(503)
                    .body(r#"{"error":"Processing temporarily unavailable"}"#)
                    .on("POST", &format!("{}{token}", server::WEBHOOKS))
                    .times(1),
            );
        }
        let failed = match &client {
            Client::Sdk(sdk) => drive::burst_at(sdk, triggers, "herd", BODY, concurrency).await,
            Client::Peer(sender) => burst_peer(sender, triggers, concurrency).await,
        };

        // Each operation's failure and its retry, from the server's arrival times.
        let ledger = server.ledger();
        let mut attempts: HashMap<&str, Vec<(u64, Instant)>> = HashMap::new();
        for request in ledger.requests_to("POST", server::WEBHOOKS) {
            if let Some(key) = request
                .idempotency_key
                .as_deref()
                .filter(|k| k.starts_with("herd-") && !k.starts_with("herd-warm-"))
            {
                attempts
                    .entry(key)
                    .or_default()
                    .push((request.seq, request.arrived));
            }
        }
        let mut failures = Vec::new();
        let mut retries = Vec::new();
        for tries in attempts.values_mut() {
            tries.sort();
            failures.push(tries[0].1);
            if let Some(retry) = tries.get(1) {
                retries.push((tries[0].1, retry.1));
            }
        }
        let Some(zero) = failures.iter().min().copied() else {
            return Err("no failed first attempt reached the server".into());
        };
        let spread = failures
            .iter()
            .max()
            .map_or(Duration::ZERO, |last| *last - zero);
        let raw: Vec<Duration> = retries.iter().map(|(_, retry)| *retry - zero).collect();
        let aligned: Vec<Duration> = retries
            .iter()
            .map(|(failure, retry)| retry.saturating_duration_since(*failure))
            .collect();
        let raw = Bunching::of(&raw, WINDOW);
        let aligned = Bunching::of(&aligned, WINDOW);
        let figures = json!({
            "retries": retries.len(),
            "retry_budget_refusals": match &client {
                Client::Sdk(sdk) => Some(sdk.stats().retry_budget_refusals),
                Client::Peer(_) => None,
            },
            "operations_failed": failed,
            "failure_spread_ms": round(ms(spread), 1),
            "aligned": bunching(&aligned),
            "raw": bunching(&raw),
        });
        eprintln!("herd: {label} {figures}");
        judged.insert(label, (round(aligned.ratio(), 3), failed));
        report.figure(label, figures);
    }
    report.figure(
        "peak_rss_mib",
        crate::process::peak_rss_bytes().map(|bytes| round(bytes as f64 / 1_048_576.0, 1)),
    );
    if let Some((bunching, failed)) = judged.get("default_budget") {
        report.exactly("default_budget.operations_failed", *failed as f64, 0.0);
        if report.scenario() == "herd" {
            report.at_most(
                "default_budget.aligned.bunching",
                *bunching,
                TARGET_BUNCHING,
            );
        }
    }
    if let Some((bunching, _)) = judged.get("budget_disabled") {
        report.at_most(
            "budget_disabled.aligned.bunching",
            *bunching,
            TARGET_BUNCHING,
        );
    }
    Ok(report)
}

/// What one herd run drives: the SDK with a retry budget, or a peer.
#[derive(Debug)]
enum Variant {
    Sdk(RetryBudget),
    Peer(Peer),
}

/// A client under test.
#[derive(Debug, Clone)]
enum Client {
    Sdk(HodoflowClient),
    Peer(Sender),
}

impl Client {
    /// One delivery of [`BODY`] to `token` with the delivery ID `id`; whether it failed.
    async fn deliver(&self, token: &str, id: String) -> bool {
        match self {
            Client::Sdk(sdk) => {
                let Ok(key) = IdempotencyKey::new(id) else {
                    return true;
                };
                sdk.deliver(token, Bytes::from_static(BODY))
                    .delivery_id(DeliveryId::new(key))
                    .send()
                    .await
                    .is_err()
            }
            Client::Peer(sender) => !matches!(
                sender
                    .deliver_to(token, Some(&id), Bytes::from_static(BODY))
                    .await,
                Ok(status) if status.is_success()
            ),
        }
    }
}

/// [`drive::burst_at`] for a peer: operation `n` delivers to `triggers[n]` with the delivery
/// ID `herd-{n}`, the first `concurrency` released together from a barrier. How many failed.
async fn burst_peer(sender: &Sender, triggers: Vec<String>, concurrency: usize) -> usize {
    let count = triggers.len() as u64;
    let concurrency = concurrency.clamp(1, triggers.len().max(1));
    let barrier = Arc::new(Barrier::new(concurrency));
    let (client, triggers) = (Client::Peer(sender.clone()), Arc::new(triggers));
    drive::each(count, concurrency, move |n| {
        let (client, barrier, triggers) = (client.clone(), barrier.clone(), triggers.clone());
        async move {
            if (n as usize) < concurrency {
                barrier.wait().await;
            }
            client
                .deliver(triggers[n as usize].as_str(), format!("herd-{n}"))
                .await
        }
    })
    .await
    .into_iter()
    .filter(|failed| *failed)
    .count()
}

fn bunching(b: &Bunching) -> serde_json::Value {
    json!({
        "bunching": round(b.ratio(), 3),
        "peak_per_100ms": b.peak,
        "mean_per_100ms": round(b.mean, 1),
        "span_ms": round(ms(b.span), 1),
    })
}
