//! `overhead`: what the SDK costs on the happy path.
//!
//! The SDK and plain reqwest send the same successful webhook deliveries (the same body, a
//! distinct delivery ID header on each) to the in-process contract server, at concurrency 1
//! and 64. Every run gets a fresh, identical server, so that no run pays for the ledger and
//! the delivery store another run grew; each side's client is built and warmed up against
//! it (a token exchange, then 1,000 deliveries at the run's concurrency) before the timed
//! deliveries. Runs are interleaved in pairs, SDK-reqwest, reqwest-SDK, ..., so that drift on
//! a shared machine falls on both sides of a pair; each pair gives one ratio, and the median
//! ratio over the pairs, with its spread, is the figure. Because a rate on a shared 2-core
//! machine is noisy, the client's instructions per request are counted too, with callgrind
//! (`apt-get install valgrind`), in a child process at two request counts. Target:
//! SDK/reqwest >= 0.98 (median ratio).

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hodoflow_mock::DEMO_TRIGGER_TOKEN;
use hodoflow_retry::{Backoff, DeliveryId, IdempotencyKey, RetryBudget, RetryingClient};
use http::StatusCode;
use tokio::process::Command;

use crate::figures::{median, percentile, round};
use crate::memory::Holder;
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

/// Runs `requests` deliveries of `holder`'s client one after another, after its token
/// exchange, against the contract server at `base_url`; returns how many failed.
///
/// This is the bench binary's hidden `count` mode: the overhead scenario runs it under
/// `valgrind --tool=callgrind` at two request counts, against a server in its own process, and
/// takes the difference of the instructions over the difference of the requests.
///
/// # Errors
///
/// When the client cannot be built or its token exchange fails.
pub async fn count_requests(holder: Holder, base_url: &str, requests: u64) -> Result<u64> {
    let peer = Peer::connect(if holder == Holder::Sdk { 0 } else { 1 }, base_url).await?;
    let ids = Arc::new(AtomicU64::new(0));
    let (_, failed) = batch(&peer, 1, requests, &ids).await;
    Ok(failed)
}

/// The request counts of the two `count` runs under callgrind: per request is the difference
/// of their instructions over the difference of the counts, so start-up cancels out.
const COUNTED_REQUESTS: [u64; 2] = [100, 2_100];

/// The total a callgrind run prints on stderr, `==PID== Collected : N`.
fn collected(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|line| {
        let (_, total) = line.split_once("Collected :")?;
        total.trim().parse().ok()
    })
}

/// Runs `exe count` for `holder` with `requests` under callgrind (natively when not
/// `counted`); returns the instructions callgrind collected.
async fn count_in_child(
    exe: &Path,
    holder: Holder,
    base_url: &str,
    requests: u64,
    counted: bool,
) -> Result<Option<u64>> {
    let mut command = if counted {
        let mut command = Command::new("valgrind");
        command
            .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
            .arg(exe);
        command
    } else {
        Command::new(exe)
    };
    let output = command
        .args(["count", "--holder", holder.name(), "--url", base_url])
        .args(["--requests", &requests.to_string()])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot start the count child (is valgrind installed?): {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("the count child failed: {stderr}").into());
    }
    if !counted {
        return Ok(None);
    }
    Ok(Some(collected(&stderr).ok_or_else(|| {
        format!("no callgrind total in: {stderr}")
    })?))
}

/// Instructions per request of each side, from callgrind; the JSON figure.
async fn instructions(size: Size, exe: &Path) -> Result<serde_json::Value> {
    let counted = size == Size::Full;
    if counted && !valgrind_runs().await {
        eprintln!(
            "overhead: valgrind not found; instructions not counted (apt-get install valgrind)"
        );
        return Ok(serde_json::json!({
            "counted": false,
            "why": "valgrind not found: apt-get install valgrind",
        }));
    }
    let requests = size.pick(COUNTED_REQUESTS, [2, 4]);
    let server = server::start().await?;
    let mut figures = serde_json::Map::new();
    let mut per_request = [0.0; 2];
    for (side, holder) in [Holder::Sdk, Holder::Reqwest].into_iter().enumerate() {
        let mut totals = Vec::new();
        for n in requests {
            let total = count_in_child(exe, holder, &server.base_url(), n, counted).await?;
            eprintln!("overhead: callgrind {} x{n}: {total:?}", holder.name());
            totals.push(total);
        }
        let each = match (totals[0], totals[1]) {
            (Some(few), Some(many)) => {
                Some(many.saturating_sub(few) as f64 / (requests[1] - requests[0]) as f64)
            }
            _ => None,
        };
        per_request[side] = each.unwrap_or(0.0);
        figures.insert(
            holder.name().to_owned(),
            serde_json::json!({
                "instructions_per_request": each.map(|n| round(n, 0)),
                "instructions_total": totals,
                "requests": requests,
            }),
        );
    }
    figures.insert("counted".to_owned(), counted.into());
    figures.insert(
        "sdk_over_reqwest".to_owned(),
        if counted && per_request[1] > 0.0 {
            round(per_request[0] / per_request[1], 3).into()
        } else {
            serde_json::Value::Null
        },
    );
    Ok(figures.into())
}

/// Whether `valgrind --version` runs.
async fn valgrind_runs() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|status| status.success())
}

/// The median of `ratios` and their spread: min, quartiles (nearest rank), max.
fn spread(ratios: &[f64]) -> serde_json::Value {
    serde_json::json!({
        "min": round(percentile(ratios, 0.0), 3),
        "p25": round(percentile(ratios, 25.0), 3),
        "median": round(median(ratios), 3),
        "p75": round(percentile(ratios, 75.0), 3),
        "max": round(percentile(ratios, 100.0), 3),
    })
}

pub(crate) async fn run(size: Size, exe: &Path) -> Result<Report> {
    let runs = size.pick(9, 1);
    let warmup = size.pick(1_000, 10);
    let ids = Arc::new(AtomicU64::new(0));

    let mut report = Report::new("overhead");
    report.param("pairs", runs);
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
        "reqwest 0.13 rustls, default pool, redirects off, retry::never() (as the SDK builds it)",
    );
    report.param(
        "interleaving",
        "pair i is one SDK run and one reqwest run back to back, the order alternating (SDK first in even pairs); ratio of pair i = SDK rate / reqwest rate; the target is held against the median over the pairs",
    );
    report.param(
        "instructions",
        format!(
            "valgrind --tool=callgrind --callgrind-out-file=/dev/null hodoflow-bench count --holder sdk|reqwest --url URL --requests N, for N = {} and {}, at concurrency 1 against a contract server in the parent process: (instructions at {} - at {}) / {}, all of the client process's threads",
            COUNTED_REQUESTS[0],
            COUNTED_REQUESTS[1],
            COUNTED_REQUESTS[1],
            COUNTED_REQUESTS[0],
            COUNTED_REQUESTS[1] - COUNTED_REQUESTS[0]
        ),
    );
    let mut failures = 0;
    for concurrency in [1usize, 64] {
        let count = size.pick(if concurrency == 1 { 15_000 } else { 60_000 }, 20);
        let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for run in 0..runs {
            // Interleaved, the order alternating, so that drift falls on both.
            let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for side in order {
                let server = server::start().await?;
                let peer = Peer::connect(side, &server.base_url()).await?;
                let (_, warm_failed) = batch(&peer, concurrency, warmup, &ids).await;
                let (took, failed) = batch(&peer, concurrency, count, &ids).await;
                failures += warm_failed + failed;
                let rate = count as f64 / took.as_secs_f64();
                eprintln!(
                    "overhead: c={concurrency} pair {} {}: {rate:.0} req/s",
                    run + 1,
                    SIDES[side]
                );
                rates[side].push(rate);
            }
        }
        let ratios: Vec<f64> = rates[0]
            .iter()
            .zip(&rates[1])
            .map(|(sdk, reqwest)| sdk / reqwest)
            .collect();
        let ratio = round(median(&ratios), 3);
        report.param(&format!("requests_per_run_c{concurrency}"), count);
        report.figure(&format!("ratio_c{concurrency}"), ratio);
        report.figure(&format!("ratio_spread_c{concurrency}"), spread(&ratios));
        report.figure(
            &format!("ratio_pairs_c{concurrency}"),
            ratios.iter().map(|r| round(*r, 3)).collect::<Vec<_>>(),
        );
        report.figure(
            &format!("sdk_rps_median_c{concurrency}"),
            round(median(&rates[0]), 0),
        );
        report.figure(
            &format!("reqwest_rps_median_c{concurrency}"),
            round(median(&rates[1]), 0),
        );
        report.figure(
            &format!("sdk_rps_runs_c{concurrency}"),
            rates[0].iter().map(|r| round(*r, 0)).collect::<Vec<_>>(),
        );
        report.figure(
            &format!("reqwest_rps_runs_c{concurrency}"),
            rates[1].iter().map(|r| round(*r, 0)).collect::<Vec<_>>(),
        );
        report.at_least(&format!("ratio_c{concurrency}"), ratio, TARGET_RATIO);
    }
    report.figure("failed_deliveries", failures);
    report.figure("instructions", instructions(size, exe).await?);
    report.note("instructions are counted by valgrind's callgrind, not sampled: the same binary and requests give the same count within a fraction of a percent, whatever else the machine runs; they count the client only (the server runs in the parent), including its runtime threads and its reading of each answer");
    if size == Size::Smoke {
        report.note("smoke: the count child runs without valgrind; no instructions counted");
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collected_reads_the_callgrind_total() {
        let stderr = "==4711== Callgrind, a call-graph generating cache profiler\n==4711== Events    : Ir\n==4711== Collected : 123456789\n==4711== \n==4711== I   refs:      123,456,789\n";
        assert_eq!(collected(stderr), Some(123_456_789));
        assert_eq!(collected("nothing here"), None);
    }
}
