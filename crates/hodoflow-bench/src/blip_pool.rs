//! `blip_pool`: does a short outage cost a batch any event?
//!
//! A backlog of 2,000 events, each with its own delivery ID, drained by a pool of 1, 8, 64 or
//! 256 workers as `hodoflow-send batch` drains a file (no event starts once the client has seen
//! the service down for longer than one call's budget). From the first request the server
//! answers every delivery `503` without `Retry-After` for 0.5, 1.5, 5 or 15 s
//! (`Fault::during`), then heals; and again with `429` without `Retry-After`. Each cell has its
//! own server and client, with the SDK's defaults (5 attempts, backoff 500 ms..30 s, the default
//! retry budget, a call budget of 60 s).
//!
//! Per cell, from the pool and the server's ledger: events lost (not delivered), requests,
//! runs, duplicates executed (runs beyond the first of a delivery ID), wall time, and requests
//! during the blip.
//! Targets: 0 events lost in every cell; 0 duplicates executed.

use std::time::{Duration, Instant};

use hodoflow_mock::Fault;
use hodoflow_retry::{Backoff, Budget, limit::RetryBudget};
use serde_json::{Map, Value, json};

use crate::figures::round;
use crate::report::Report;
use crate::size::Size;
use crate::{Result, drive, peers, server};

const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711}"#;

/// The answers of a blip: the status and its body, neither with `Retry-After`.
const ANSWERS: [(u16, &str); 2] = [
    (503, r#"{"error":"Processing temporarily unavailable"}"#),
    (429, r#"{"error":"Rate limit exceeded"}"#),
];

pub(crate) async fn run(size: Size) -> Result<Report> {
    let events = size.pick(2_000u64, 20);
    let blips = size.pick(
        vec![
            Duration::from_millis(500),
            Duration::from_millis(1_500),
            Duration::from_secs(5),
            Duration::from_secs(15),
        ],
        vec![Duration::from_millis(50)],
    );
    let concurrencies = size.pick(vec![1usize, 8, 64, 256], vec![1, 8]);
    let max_elapsed = Budget::DEFAULT_MAX_ELAPSED;
    let mut report = Report::new("blip_pool");
    report.param("events", events);
    report.param(
        "blip_seconds",
        blips.iter().map(Duration::as_secs_f64).collect::<Vec<_>>(),
    );
    report.param("concurrency", concurrencies.clone());
    report.param(
        "server_answer",
        "503 (then 429) without Retry-After to every delivery for the blip, from the first request, then healthy",
    );
    report.param("sdk_config", peers::SDK_DEFAULTS);
    report.param("max_elapsed_seconds", max_elapsed.as_secs_f64());
    report.param(
        "pool",
        "hodoflow-send batch's rule: no event starts once service_down_for >= max_elapsed",
    );

    let mut lost_total = 0usize;
    let mut duplicates_total = 0usize;
    for (status, answer) in ANSWERS {
        let mut by_blip = Map::new();
        for blip in &blips {
            let mut by_concurrency = Map::new();
            for &concurrency in &concurrencies {
                let name = format!("{status}.{}s.c{concurrency}", blip.as_secs_f64());
                let cell = cell(status, answer, *blip, concurrency, events, max_elapsed).await?;
                eprintln!("blip_pool: {name} {}", cell.figures);
                report.exactly(&format!("{name}.lost"), cell.lost as f64, 0.0);
                lost_total += cell.lost;
                duplicates_total += cell.duplicates;
                by_concurrency.insert(format!("c{concurrency}"), cell.figures);
            }
            by_blip.insert(
                format!("{}s", blip.as_secs_f64()),
                Value::Object(by_concurrency),
            );
        }
        report.figure(&status.to_string(), Value::Object(by_blip));
    }
    report.figure("lost_total", lost_total);
    report.figure("duplicates_executed_total", duplicates_total);
    report.exactly("duplicates_executed_total", duplicates_total as f64, 0.0);
    report.note("lost = events not delivered: failed (by kind in failed_by_kind) or never started (not_started); an event lost is one the batch would list 'to retry'");
    report.note("requests_during_blip counts the server's webhook requests that arrived before the blip ended (the fault is armed just before the first event starts)");
    Ok(report)
}

/// One cell's figures, and the two it is judged by.
struct Cell {
    figures: Value,
    lost: usize,
    duplicates: usize,
}

async fn cell(
    status: u16,
    answer: &str,
    blip: Duration,
    concurrency: usize,
    events: u64,
    max_elapsed: Duration,
) -> Result<Cell> {
    let server = server::start().await?;
    let sdk = peers::sdk(&server.base_url(), Backoff::default(), RetryBudget::new())?;
    let prefix = format!("blip-{status}-{}-{concurrency}", blip.as_millis());
    let armed = Instant::now();
    server.inject(
        Fault::respond(status)
            .body(answer)
            .on("POST", server::WEBHOOKS)
            .during(blip),
    );
    let batch = drive::batch(&sdk, events, concurrency, &prefix, BODY, max_elapsed).await;
    let ledger = server.ledger();
    let requests = ledger.requests_to("POST", server::WEBHOOKS);
    let during = requests
        .iter()
        .filter(|r| r.arrived.saturating_duration_since(armed) < blip)
        .count();
    let mut duplicates = 0;
    let mut without_run = 0;
    for n in 0..events {
        let runs = ledger.runs_for_delivery(&drive::batch_id(&prefix, n)).len();
        duplicates += runs.saturating_sub(1);
        without_run += usize::from(runs == 0);
    }
    let lost = batch.lost();
    let stats = sdk.stats();
    let figures = json!({
        "lost": lost,
        "failed_by_kind": batch.failures(),
        "requests": requests.len(),
        "runs": ledger.total_runs(),
        "events_without_run": without_run,
        "duplicates_executed": duplicates,
        "seconds": round(batch.took.as_secs_f64(), 2),
        "requests_during_blip": during,
        "retry_budget_refusals": stats.retry_budget_refusals,
    });
    Ok(Cell {
        figures,
        lost,
        duplicates,
    })
}
