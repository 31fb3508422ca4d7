//! `overhead`: what the SDK costs on the happy path.
//!
//! The SDK and plain reqwest send the same successful webhook deliveries (the same body, a
//! distinct delivery ID header on each) to the in-process contract server, at concurrency 1
//! and 64. Every run gets a fresh, identical server, so that no run pays for the ledger and
//! the delivery store another run grew; each side's client is built and warmed up against
//! it (a token exchange, then 1,000 deliveries at the run's concurrency) before the timed
//! deliveries. Runs alternate SDK-reqwest, reqwest-SDK, ... so that drift falls on both, and
//! the median run of each side gives its rate. Target: SDK/reqwest >= 0.98.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hodoflow_mock::DEMO_TRIGGER_TOKEN;
use hodoflow_retry::{Backoff, DeliveryId, IdempotencyKey, RetryBudget, RetryingClient};
use http::StatusCode;

use crate::figures::{median, round};
use crate::peers::{self, Sender};
use crate::report::Report;
use crate::scenario::Size;
use crate::{Result, server};

const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711,"carrier":"dhl","items":[{"sku":"A-100","qty":2},{"sku":"B-220","qty":1}]}"#;

/// The SDK's ratio to reqwest must be at least this.
const TARGET_RATIO: f64 = 0.98;

/// One side of the comparison.
#[derive(Debug, Clone)]
enum Peer {
    Sdk(RetryingClient),
    Reqwest(Sender),
}

/// The two sides, by index: `SIDES[0]` is the SDK.
const SIDES: [&str; 2] = ["sdk", "reqwest"];

impl Peer {
    /// A fresh client of `side` for the server at `base`.
    async fn connect(side: usize, base: &str) -> Result<Self> {
        Ok(if side == 0 {
            Peer::Sdk(peers::sdk(base, Backoff::default(), RetryBudget::new())?)
        } else {
            Peer::Reqwest(Sender::plain(base).await?)
        })
    }

    /// One delivery; whether it was accepted.
    async fn deliver(&self, id: String, body: Bytes) -> bool {
        match self {
            Peer::Sdk(client) => {
                let Ok(key) = IdempotencyKey::new(&id) else {
                    return false;
                };
                client
                    .deliver(DEMO_TRIGGER_TOKEN, body)
                    .delivery_id(DeliveryId::new(key))
                    .send()
                    .await
                    .is_ok()
            }
            Peer::Reqwest(sender) => {
                matches!(
                    sender.deliver(Some(&id), body).await,
                    Ok(StatusCode::ACCEPTED)
                )
            }
        }
    }
}

/// Sends `count` deliveries from `concurrency` workers; returns the time taken and failures.
async fn batch(
    peer: &Peer,
    concurrency: usize,
    count: u64,
    ids: &Arc<AtomicU64>,
) -> (Duration, u64) {
    let body = Bytes::from_static(BODY);
    let sent = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (peer, body, sent, failed, ids) = (
                peer.clone(),
                body.clone(),
                sent.clone(),
                failed.clone(),
                ids.clone(),
            );
            tokio::spawn(async move {
                while sent.fetch_add(1, Ordering::Relaxed) < count {
                    let id = format!("overhead-{}", ids.fetch_add(1, Ordering::Relaxed));
                    if !peer.deliver(id, body.clone()).await {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        // A worker only panics if the runtime is shutting down.
        let _ = worker.await;
    }
    (started.elapsed(), failed.load(Ordering::Relaxed))
}

pub(crate) async fn run(size: Size) -> Result<Report> {
    let runs = size.pick(7, 1);
    let warmup = size.pick(1_000, 10);
    let ids = Arc::new(AtomicU64::new(0));

    let mut report = Report::new("overhead");
    report.param("runs_per_side", runs);
    report.param("warmup_requests_per_run", warmup);
    report.param("body_bytes", BODY.len());
    report.param(
        "server",
        "a fresh hodoflow-mock per run, in-process on 127.0.0.1:0, sharing the 2-thread runtime",
    );
    report.param(
        "sdk_config",
        "defaults (backoff 500 ms..30 s, retry budget 500 tokens)",
    );
    report.param(
        "reqwest_config",
        "reqwest 0.12 rustls, default pool, redirects off (as the SDK builds it)",
    );
    let mut failures = 0;
    for concurrency in [1usize, 64] {
        let count = size.pick(if concurrency == 1 { 15_000 } else { 60_000 }, 20);
        let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for run in 0..runs {
            // ABBA: alternate which side goes first, to cancel drift.
            let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for side in order {
                let server = server::start().await?;
                let peer = Peer::connect(side, &server.base_url()).await?;
                let (_, warm_failed) = batch(&peer, concurrency, warmup, &ids).await;
                let (took, failed) = batch(&peer, concurrency, count, &ids).await;
                failures += warm_failed + failed;
                let rate = count as f64 / took.as_secs_f64();
                eprintln!(
                    "overhead: c={concurrency} run {} {}: {rate:.0} req/s",
                    run + 1,
                    SIDES[side]
                );
                rates[side].push(rate);
            }
        }
        let (sdk, reqwest) = (median(&rates[0]), median(&rates[1]));
        let ratio = sdk / reqwest;
        report.param(&format!("requests_per_run_c{concurrency}"), count);
        report.figure(&format!("sdk_rps_median_c{concurrency}"), round(sdk, 0));
        report.figure(
            &format!("reqwest_rps_median_c{concurrency}"),
            round(reqwest, 0),
        );
        report.figure(&format!("ratio_c{concurrency}"), round(ratio, 3));
        report.figure(
            &format!("sdk_rps_runs_c{concurrency}"),
            rates[0].iter().map(|r| round(*r, 0)).collect::<Vec<_>>(),
        );
        report.figure(
            &format!("reqwest_rps_runs_c{concurrency}"),
            rates[1].iter().map(|r| round(*r, 0)).collect::<Vec<_>>(),
        );
        report.at_least(
            &format!("ratio_c{concurrency}"),
            round(ratio, 3),
            TARGET_RATIO,
        );
    }
    report.figure("failed_deliveries", failures);
    Ok(report)
}
