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
//!
//! `overhead_signed` is the same comparison between the SDK signing every delivery (a Standard
//! Webhooks HMAC-SHA256 over each attempt, made when it is sent) and the SDK unsigned, against
//! identical unsigned servers, so that the ratio is the sender's cost of signing alone (an
//! unsigned trigger ignores the headers; verifying is the receiver's cost).
//! Target: signed/unsigned >= 0.95.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN};
use hodoflow_retry::{Backoff, DeliveryId, HodoflowClient, IdempotencyKey, limit::RetryBudget};
use http::StatusCode;
use tokio::process::Command;

use crate::figures::{median, percentile, round};
use crate::memory::Holder;
use crate::peers::{self, Sender};
use crate::report::Report;
use crate::size::Size;
use crate::{Result, server};

const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711,"carrier":"dhl","items":[{"sku":"A-100","qty":2},{"sku":"B-220","qty":1}]}"#;

/// The SDK's ratio to reqwest must be at least this.
const TARGET_RATIO: f64 = 0.98;

/// The signing SDK's ratio to the unsigned SDK must be at least this.
const TARGET_SIGNED_RATIO: f64 = 0.95;

/// The secret of the signed side (24 bytes): the `standardwebhooks` crate's test secret.
const SIGNING_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

/// One side of the comparison.
#[derive(Debug, Clone)]
enum Peer {
    Sdk(HodoflowClient),
    Reqwest(Sender),
}

/// A client a comparison measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The SDK with its defaults.
    Sdk,
    /// The SDK with its defaults, signing every delivery.
    SdkSigned,
    /// Plain reqwest, as the SDK builds it.
    Reqwest,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Sdk => "sdk",
            Side::SdkSigned => "sdk_signed",
            Side::Reqwest => "reqwest",
        }
    }

    /// The `count` child's holder and whether it signs.
    fn holder(self) -> (Holder, bool) {
        match self {
            Side::Sdk => (Holder::Sdk, false),
            Side::SdkSigned => (Holder::Sdk, true),
            Side::Reqwest => (Holder::Reqwest, false),
        }
    }
}

/// A comparison: its report's name, its two sides (the ratio is the first's rate over the
/// second's) and the least ratio it targets.
#[derive(Debug, Clone, Copy)]
struct Comparison {
    name: &'static str,
    sides: [Side; 2],
    target: f64,
}

/// `overhead`: the SDK against plain reqwest.
const OVERHEAD: Comparison = Comparison {
    name: "overhead",
    sides: [Side::Sdk, Side::Reqwest],
    target: TARGET_RATIO,
};

/// `overhead_signed`: the SDK signing every delivery against the SDK unsigned.
const OVERHEAD_SIGNED: Comparison = Comparison {
    name: "overhead_signed",
    sides: [Side::SdkSigned, Side::Sdk],
    target: TARGET_SIGNED_RATIO,
};

impl Peer {
    /// A fresh client of `side` for the server at `base`.
    async fn connect(side: Side, base: &str) -> Result<Self> {
        Ok(match side {
            Side::Sdk => Peer::Sdk(peers::sdk(base, Backoff::default(), RetryBudget::new())?),
            // The same defaults as `peers::sdk`, and a signing secret.
            Side::SdkSigned => Peer::Sdk(
                HodoflowClient::builder(base)
                    .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
                    .signing_secret(SIGNING_SECRET)
                    .build()?,
            ),
            Side::Reqwest => Peer::Reqwest(Sender::plain(base).await?),
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

/// Runs `requests` deliveries of `holder`'s client (the SDK signing each when `signed`),
/// `concurrency` at a time (1 for the counts), after its token exchange, against the contract
/// server at `base_url`; returns how many failed.
///
/// This is the bench binary's hidden `count` mode: the overhead scenario runs it under
/// `valgrind --tool=callgrind` at two request counts, against a server in its own process, and
/// takes the difference of the instructions over the difference of the requests.
///
/// # Errors
///
/// When the client cannot be built or its token exchange fails.
pub async fn count_requests(
    holder: Holder,
    signed: bool,
    base_url: &str,
    requests: u64,
    concurrency: usize,
) -> Result<u64> {
    let side = match (holder, signed) {
        (Holder::Reqwest, _) => Side::Reqwest,
        (_, false) => Side::Sdk,
        (_, true) => Side::SdkSigned,
    };
    let peer = Peer::connect(side, base_url).await?;
    let ids = Arc::new(AtomicU64::new(0));
    let (_, failed) = batch(&peer, concurrency.max(1), requests, &ids).await;
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
    side: Side,
    base_url: &str,
    requests: u64,
    counted: bool,
) -> Result<Option<u64>> {
    let (holder, signed) = side.holder();
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
        .args(signed.then_some("--signed"))
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

/// The request counts of the smoke runs: enough that the per-request difference is the
/// delivery's, few enough that four runs under callgrind take seconds.
const SMOKE_COUNTED_REQUESTS: [u64; 2] = [10, 40];

/// Set to 1 (as `.ci/run` does, after installing valgrind) to fail instead of reporting the
/// instructions uncounted when valgrind is missing.
const REQUIRE_VALGRIND: &str = "CI_REQUIRES_VALGRIND";

/// Instructions per request of each side of `comparison`, from callgrind; the JSON figure.
/// Counted at both sizes, so a smoke run (and its test) shows the ratio too: a regression of
/// the happy path's cost is seen without a full run. Without valgrind the count child still
/// runs, natively, and the figure says why nothing was counted.
///
/// Each side runs once natively, uncounted, before anything is counted: the first client
/// against a fresh server spent 1,000 to 2,000 instructions a request more than the same client
/// later (plain reqwest 89,594 first against 88,506 after the SDK), so whichever side was counted
/// first paid for the server's warm-up.
async fn instructions(size: Size, exe: &Path, comparison: Comparison) -> Result<serde_json::Value> {
    let counted = valgrind_runs().await;
    if !counted && std::env::var(REQUIRE_VALGRIND).as_deref() == Ok("1") {
        return Err(format!("{REQUIRE_VALGRIND}=1 but valgrind does not run").into());
    }
    if !counted {
        eprintln!(
            "{}: valgrind not found; instructions not counted (apt-get install valgrind)",
            comparison.name
        );
        if size == Size::Full {
            return Ok(serde_json::json!({
                "counted": false,
                "why": "valgrind not found: apt-get install valgrind",
            }));
        }
    }
    let requests = size.pick(COUNTED_REQUESTS, SMOKE_COUNTED_REQUESTS);
    let server = server::start().await?;
    for side in comparison.sides {
        count_in_child(exe, side, &server.base_url(), requests[1], false).await?;
    }
    let mut figures = serde_json::Map::new();
    let mut per_request = [0.0; 2];
    let name = comparison.name;
    for (at, side) in comparison.sides.into_iter().enumerate() {
        let mut totals = Vec::new();
        for n in requests {
            let total = count_in_child(exe, side, &server.base_url(), n, counted).await?;
            eprintln!("{name}: callgrind {} x{n}: {total:?}", side.name());
            totals.push(total);
        }
        let each = match (totals[0], totals[1]) {
            (Some(few), Some(many)) => {
                Some(many.saturating_sub(few) as f64 / (requests[1] - requests[0]) as f64)
            }
            _ => None,
        };
        per_request[at] = each.unwrap_or(0.0);
        figures.insert(
            side.name().to_owned(),
            serde_json::json!({
                "instructions_per_request": each.map(|n| round(n, 0)),
                "instructions_total": totals,
                "requests": requests,
            }),
        );
    }
    figures.insert("counted".to_owned(), counted.into());
    if !counted {
        figures.insert(
            "why".to_owned(),
            "valgrind not found: apt-get install valgrind".into(),
        );
    }
    figures.insert(
        format!(
            "{}_over_{}",
            comparison.sides[0].name(),
            comparison.sides[1].name()
        ),
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
    compare(size, exe, OVERHEAD).await
}

/// `overhead_signed`: the SDK signing every delivery against the SDK unsigned.
pub(crate) async fn run_signed(size: Size, exe: &Path) -> Result<Report> {
    compare(size, exe, OVERHEAD_SIGNED).await
}

async fn compare(size: Size, exe: &Path, comparison: Comparison) -> Result<Report> {
    let runs = size.pick(9, 1);
    let warmup = size.pick(1_000, 10);
    let ids = Arc::new(AtomicU64::new(0));
    let [first, second] = comparison.sides;

    let mut report = Report::new(comparison.name);
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
    if comparison.sides.contains(&Side::Reqwest) {
        report.param(
            "reqwest_config",
            "reqwest 0.13 rustls, default pool, redirects off, retry::never() (as the SDK builds it)",
        );
    }
    if comparison.sides.contains(&Side::SdkSigned) {
        report.param(
            "sdk_signed_config",
            "the same defaults and one 24-byte whsec_ signing secret: every attempt carries webhook-id, webhook-timestamp and a v1 HMAC-SHA256 webhook-signature; the servers' trigger is unsigned (it ignores them), so only the sender's signing is measured",
        );
    }
    report.param(
        "interleaving",
        format!(
            "pair i is one {a} run and one {b} run back to back, the order alternating ({a} first in even pairs); ratio of pair i = {a} rate / {b} rate; the target is held against the median over the pairs",
            a = first.name(),
            b = second.name()
        ),
    );
    report.param(
        "instructions",
        format!(
            "valgrind --tool=callgrind --callgrind-out-file=/dev/null hodoflow-bench count --holder sdk|reqwest [--signed] --url URL --requests N, for N = {} and {}, at concurrency 1 against a contract server in the parent process: (instructions at {} - at {}) / {}, all of the client process's threads",
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
                let peer = Peer::connect(comparison.sides[side], &server.base_url()).await?;
                let (_, warm_failed) = batch(&peer, concurrency, warmup, &ids).await;
                let (took, failed) = batch(&peer, concurrency, count, &ids).await;
                failures += warm_failed + failed;
                let rate = count as f64 / took.as_secs_f64();
                eprintln!(
                    "{}: c={concurrency} pair {} {}: {rate:.0} req/s",
                    comparison.name,
                    run + 1,
                    comparison.sides[side].name()
                );
                rates[side].push(rate);
            }
        }
        let ratios: Vec<f64> = rates[0].iter().zip(&rates[1]).map(|(a, b)| a / b).collect();
        let ratio = round(median(&ratios), 3);
        report.param(&format!("requests_per_run_c{concurrency}"), count);
        report.figure(&format!("ratio_c{concurrency}"), ratio);
        report.figure(&format!("ratio_spread_c{concurrency}"), spread(&ratios));
        report.figure(
            &format!("ratio_pairs_c{concurrency}"),
            ratios.iter().map(|r| round(*r, 3)).collect::<Vec<_>>(),
        );
        for (at, side) in comparison.sides.into_iter().enumerate() {
            report.figure(
                &format!("{}_rps_median_c{concurrency}", side.name()),
                round(median(&rates[at]), 0),
            );
            report.figure(
                &format!("{}_rps_runs_c{concurrency}", side.name()),
                rates[at].iter().map(|r| round(*r, 0)).collect::<Vec<_>>(),
            );
        }
        report.at_least(&format!("ratio_c{concurrency}"), ratio, comparison.target);
    }
    report.figure("failed_deliveries", failures);
    report.figure("instructions", instructions(size, exe, comparison).await?);
    report.note("instructions are counted by valgrind's callgrind, not sampled: the same binary and requests give the same count within a fraction of a percent, whatever else the machine runs; they count the client only (the server runs in the parent), including its runtime threads and its reading of each answer");
    if size == Size::Smoke {
        report.note("smoke: instructions are counted at 10 and 40 requests (with valgrind), so the ratio to reqwest shows a regression of the happy path's cost; the rates mean nothing");
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
