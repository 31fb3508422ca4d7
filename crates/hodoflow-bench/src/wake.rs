//! `wake`: how soon a job enqueued into an idle outbox starts, and what an idle worker costs the
//! database.
//!
//! One worker pool idles on a fresh store with a 30 s safety poll (and, so that polling could
//! not start a job sooner, a 30 s poll interval). A second handle on the store (PostgreSQL:
//! its own connections, as another process would; SQLite: the same store, whose wake-up is
//! in-process) enqueues one webhook job at a time, after a pause of 100 to 500 ms that lets the
//! pool fall asleep, and waits for it to be accepted by the contract server. A job's start is
//! its claim: the store stamps `first_sent_at` then, on the same clock as `created_at`, so the
//! latency is `first_sent_at - created_at` (whole milliseconds, as stored).
//!
//! Idle cost (PostgreSQL, full size only): with the pool asleep and nothing due, the database's
//! transactions (`pg_stat_database`, every connection's: the pool's, the listener's, the
//! producer's; minus the two reads of the counter) over a 31 s window (a backend reports its
//! counts within 10 s of going idle, so the window outlasts the safety poll by that).
//!
//! Target: a job enqueued into an idle outbox starts within 50 ms (p99 here).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hodoflow_mock::DEMO_TRIGGER_TOKEN;
use hodoflow_outbox::{JobState, Outbox, Target};
use serde_json::{Value, json};

use crate::Result;
use crate::figures::{median, percentile, round};
use crate::outbox::{Backend, Fresh, postgres_url, skipped_postgres, warm_client};
use crate::report::Report;
use crate::server;
use crate::size::Size;

const TARGET_MS: f64 = 50.0;
const SAFETY_POLL: Duration = Duration::from_secs(30);
const IDLE_WINDOW: Duration = Duration::from_secs(31);

/// Waits until the job of `event` is accepted; at most 10 s.
async fn accepted(outbox: &Outbox, event: &str) -> Result<hodoflow_outbox::Job> {
    let started = Instant::now();
    loop {
        if let Some(job) = outbox.job(event).await?
            && job.state == JobState::Accepted
        {
            return Ok(job);
        }
        if started.elapsed() > Duration::from_secs(10) {
            return Err(format!("{event} was not accepted within 10 s").into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// One store of `backend`: each job's start latency (ms), and the idle transactions if measured.
async fn measure(backend: &Backend, jobs: usize, idle: bool) -> Result<(Vec<f64>, Option<u64>)> {
    let server = server::start().await?;
    let ids = Arc::new(AtomicU64::new(0));
    let client = warm_client(&server, 0, &ids).await?;
    let fresh = Fresh::new(backend, &AtomicU64::new(0)).await?;
    let outbox = fresh.open().await?;
    // The workers' handle is told the token: on PostgreSQL the producer is another handle.
    outbox.add_trigger_token(DEMO_TRIGGER_TOKEN)?;
    let producer = match backend {
        Backend::Sqlite(_) => outbox.clone(),
        Backend::Postgres(_) => fresh.open().await?,
    };
    let workers = outbox
        .workers(client)
        .trigger_limit(None)
        .poll_interval(SAFETY_POLL)
        .safety_poll(SAFETY_POLL)
        .spawn()?;
    let body = Bytes::from_static(br#"{"event":"order.shipped","order_id":4711}"#);
    let mut latencies = Vec::with_capacity(jobs);
    for n in 0..jobs {
        // Spread over 100..=500 ms, the same in every run.
        let pause = 100 + (n as u64 * 137) % 401;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let event = format!("wake-{n}");
        producer
            .enqueue(&event, Target::webhook(DEMO_TRIGGER_TOKEN), body.clone())
            .await?;
        let job = accepted(&producer, &event).await?;
        let started = job
            .first_sent_at
            .ok_or("an accepted job has no first send")?;
        let took = started
            .duration_since(job.created_at)
            .unwrap_or(Duration::ZERO);
        latencies.push(took.as_secs_f64() * 1000.0);
    }
    let transactions = if idle {
        // Everything before is reported once the backends have been idle 10 s.
        tokio::time::sleep(Duration::from_secs(11)).await;
        let before = fresh.transactions().await?;
        tokio::time::sleep(IDLE_WINDOW).await;
        let after = fresh.transactions().await?;
        before
            .zip(after)
            .map(|(before, after)| after.saturating_sub(before).saturating_sub(2))
    } else {
        None
    };
    workers.stop().await?;
    drop((outbox, producer));
    fresh.remove().await?;
    Ok((latencies, transactions))
}

fn figure(latencies: &[f64], transactions: Option<u64>) -> Value {
    json!({
        "jobs": latencies.len(),
        "start_p50_ms": round(median(latencies), 1),
        "start_p99_ms": round(percentile(latencies, 99.0), 1),
        "start_max_ms": round(percentile(latencies, 100.0), 1),
        "idle_transactions_in_31_s": transactions,
    })
}

pub(crate) async fn run(size: Size) -> Result<Report> {
    let jobs = size.pick(100usize, 5);
    let idle = size.pick(true, false);
    let mut report = Report::new("wake");
    report.param("jobs", jobs);
    report.param("safety_poll_s", SAFETY_POLL.as_secs());
    report.param("poll_interval_s", SAFETY_POLL.as_secs());
    report.param(
        "mode",
        "one idle worker pool (16 deliveries); a second store handle enqueues one job at a time after a 100-500 ms pause and waits for it to be accepted; start = first_sent_at - created_at (the claim's stamp, ms)",
    );

    let dir = std::env::temp_dir().join(format!("hodoflow-bench-wake-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (latencies, _) = measure(&Backend::Sqlite(dir.clone()), jobs, false).await?;
    report.figure("sqlite_in_process", figure(&latencies, None));
    report.at_most(
        "sqlite_in_process.start_p99_ms",
        round(percentile(&latencies, 99.0), 1),
        TARGET_MS,
    );
    let _ = std::fs::remove_dir_all(&dir);

    match postgres_url() {
        None => skipped_postgres(&mut report),
        Some(url) => {
            let (latencies, transactions) = measure(&Backend::Postgres(url), jobs, idle).await?;
            report.figure("postgres_notify", figure(&latencies, transactions));
            report.at_most(
                "postgres_notify.start_p99_ms",
                round(percentile(&latencies, 99.0), 1),
                TARGET_MS,
            );
        }
    }
    Ok(report)
}
