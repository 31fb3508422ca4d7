//! `outage_pool`: what a batch costs a server that stays down, and when it ends.
//!
//! At each concurrency (1, 8, 64, 256) the pool's healthy rate is measured first: its workers
//! loop for 3 s against a healthy server, and the server's webhook requests per second are the
//! rate. Then, with a fresh server answering every delivery `503` without `Retry-After` for the
//! whole run, and a fresh client with a call budget (`max_elapsed`) of 20 s, the pool drains a
//! backlog far larger than it can start in that time, as `hodoflow-send batch` does: no event
//! starts once the client has seen the service down for at least one call's budget, and each
//! event left ends "to retry". A last cell is the batch of the original outage report: 300
//! events at concurrency 64, in the same outage.
//!
//! Figures per concurrency: the server's request rate in the last 5 s of the run (the 5 s before
//! the pool's last event ended) over the healthy rate; requests per operation (the server's
//! webhook requests over the events started, whether they sent anything or not); the events
//! started and not started; the wall time; the requests in each second.
//! Targets: over the healthy rate <= 0.10 and requests per operation <= 1.5 at every
//! concurrency; the 300-event batch ends within 1.2 x the call budget.

use std::time::{Duration, Instant};

use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, Fault, MockServer};
use hodoflow_retry::{Budget, HodoflowClient};
use serde_json::json;

use crate::figures::round;
use crate::report::Report;
use crate::size::Size;
use crate::{Result, drive, server};

const TARGET_OVER_HEALTHY: f64 = 0.10;
const TARGET_REQUESTS_PER_OP: f64 = 1.5;
const TARGET_BATCH_END: f64 = 1.2;
const LAST: Duration = Duration::from_secs(5);
const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711}"#;

/// The SDK with its defaults but a call budget of `max_elapsed`.
fn sdk(server: &MockServer, max_elapsed: Duration) -> Result<HodoflowClient> {
    Ok(HodoflowClient::builder(server.base_url())
        .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .budget(Budget::new().max_elapsed(max_elapsed))
        .build()?)
}

/// A fresh server that answers every delivery 503 without `Retry-After`.
async fn down_server() -> Result<MockServer> {
    let server = server::start().await?;
    server.inject(
        Fault::respond(503)
            .body(r#"{"error":"Processing temporarily unavailable"}"#)
            .on("POST", server::WEBHOOKS)
            .times(u32::MAX),
    );
    Ok(server)
}

pub(crate) async fn run(size: Size) -> Result<Report> {
    let max_elapsed = size.pick(Duration::from_secs(20), Duration::from_secs(1));
    let healthy_for = size.pick(Duration::from_secs(3), Duration::from_millis(200));
    let concurrencies = size.pick(vec![1usize, 8, 64, 256], vec![1, 8]);
    let backlog = size.pick(100_000u64, 2_000);
    let batch_events = size.pick(300u64, 30);
    let batch_concurrency = size.pick(64usize, 8);
    let mut report = Report::new("outage_pool");
    report.param("concurrency", concurrencies.clone());
    report.param("max_elapsed_seconds", max_elapsed.as_secs_f64());
    report.param("healthy_seconds", healthy_for.as_secs_f64());
    report.param("backlog", backlog);
    report.param(
        "server_answer",
        "503 without Retry-After to every delivery, for the whole run",
    );
    report.param(
        "sdk_config",
        "defaults (5 attempts, backoff 500 ms..30 s, default retry budget) with max_elapsed 20 s",
    );
    report.param(
        "pool",
        "hodoflow-send batch's rule: no event starts once service_down_for >= max_elapsed",
    );
    report.param("last_window_seconds", LAST.as_secs_f64());

    for &concurrency in &concurrencies {
        let healthy = server::start().await?;
        let client = sdk(&healthy, max_elapsed)?;
        let start = Instant::now();
        drive::loop_senders(
            &client,
            concurrency,
            start,
            healthy_for,
            "outage-pool-healthy",
            BODY,
        )
        .await;
        let healthy_rps = healthy.ledger().requests_to("POST", server::WEBHOOKS).len() as f64
            / start.elapsed().as_secs_f64();

        let down = down_server().await?;
        let client = sdk(&down, max_elapsed)?;
        let prefix = format!("outage-pool-{concurrency}");
        let start = Instant::now();
        let batch = drive::batch(&client, backlog, concurrency, &prefix, BODY, max_elapsed).await;
        let seen = Seen::of(&down, start, batch.took);
        let per_op = round(seen.requests as f64 / batch.started().max(1) as f64, 3);
        let ratio = round(seen.last_rps / healthy_rps.max(1.0), 4);
        let figures = json!({
            "healthy_requests_per_second": round(healthy_rps, 0),
            "requests": seen.requests,
            "events_started": batch.started(),
            "events_not_started": batch.count(|e| e == drive::Ended::NotStarted),
            "events_delivered": batch.count(|e| e == drive::Ended::Delivered),
            "failed_by_kind": batch.failures(),
            "requests_per_op": per_op,
            "requests_per_second_last_5s": round(seen.last_rps, 2),
            "over_healthy_rate": ratio,
            "seconds": round(batch.took.as_secs_f64(), 2),
            "requests_by_second": seen.by_second,
            "runs": seen.runs,
            "retry_budget_refusals": client.stats().retry_budget_refusals,
        });
        eprintln!("outage_pool: c{concurrency} {figures}");
        let name = format!("c{concurrency}");
        report.at_most(
            &format!("{name}.over_healthy_rate"),
            ratio,
            TARGET_OVER_HEALTHY,
        );
        report.at_most(
            &format!("{name}.requests_per_op"),
            per_op,
            TARGET_REQUESTS_PER_OP,
        );
        report.figure(&name, figures);
    }

    let down = down_server().await?;
    let client = sdk(&down, max_elapsed)?;
    let start = Instant::now();
    let batch = drive::batch(
        &client,
        batch_events,
        batch_concurrency,
        "outage-pool-batch",
        BODY,
        max_elapsed,
    )
    .await;
    let seen = Seen::of(&down, start, batch.took);
    let over_budget = round(batch.took.as_secs_f64() / max_elapsed.as_secs_f64(), 3);
    let figures = json!({
        "events": batch_events,
        "concurrency": batch_concurrency,
        "seconds": round(batch.took.as_secs_f64(), 2),
        "over_max_elapsed": over_budget,
        "events_to_retry": batch.lost(),
        "events_started": batch.started(),
        "failed_by_kind": batch.failures(),
        "requests": seen.requests,
        "runs": seen.runs,
    });
    eprintln!("outage_pool: batch {figures}");
    report.at_most("batch.over_max_elapsed", over_budget, TARGET_BATCH_END);
    report.exactly(
        "batch.events_to_retry",
        batch.lost() as f64,
        batch_events as f64,
    );
    report.figure("batch", figures);
    report.note("the healthy rate is the same concurrency's, looping for 3 s against a fresh healthy server with a fresh client, in the same run");
    report.note("requests_per_op counts every event started, those refused without a request included; events not started (the pool's rule) are not operations");
    report.note("the last 5 s are the 5 s before the pool's last event ended (the whole run when it is shorter)");
    Ok(report)
}

/// What the server saw of a run that began at `start` and lasted `took`.
struct Seen {
    requests: usize,
    runs: usize,
    last_rps: f64,
    by_second: Vec<usize>,
}

impl Seen {
    fn of(server: &MockServer, start: Instant, took: Duration) -> Self {
        let ledger = server.ledger();
        let requests = ledger.requests_to("POST", server::WEBHOOKS);
        let last_from = took.saturating_sub(LAST);
        let window = (took - last_from).as_secs_f64().max(0.001);
        let mut by_second = vec![0; took.as_secs() as usize + 1];
        let mut in_last = 0;
        for request in &requests {
            let at = request.arrived.saturating_duration_since(start);
            if let Some(bin) = by_second.get_mut(at.as_secs() as usize) {
                *bin += 1;
            }
            in_last += usize::from(at >= last_from && at <= took);
        }
        Self {
            requests: requests.len(),
            runs: ledger.total_runs(),
            last_rps: in_last as f64 / window,
            by_second,
        }
    }
}
