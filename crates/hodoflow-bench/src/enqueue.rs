//! `enqueue`: events a second into the outbox with `Outbox::enqueue_many`, and each batch's
//! latency.
//!
//! One producer enqueues `events` webhook jobs (each with its own event ID, the outbox scenario's
//! 115-byte body) in batches of `batch`, into a fresh store: SQLite (one file) and, when
//! `OUTBOX_DATABASE_URL` names a database, PostgreSQL (a fresh database next to it). Each batch
//! is timed from the call to its answer (every job stored, and each answered as stored); events
//! a second is all events over the sum of the batches' times. Then one batch of `batch` repeats of stored
//! event IDs shows the cost of a no-op batch. Rounds alternate nothing: one store at a time,
//! `rounds` fresh stores each, the median round is the figure.
//!
//! Targets: at least 100,000 events a second into SQLite and 50,000 into PostgreSQL.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use bytes::Bytes;
use hodoflow_mock::DEMO_TRIGGER_TOKEN;
use hodoflow_outbox::Target;
use serde_json::{Value, json};

use crate::Result;
use crate::figures::{median, ms, percentile, round};
use crate::outbox::{Backend, Fresh, postgres_url, skipped_postgres};
use crate::report::Report;
use crate::size::Size;

const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711,"carrier":"dhl","items":[{"sku":"A-100","qty":2},{"sku":"B-220","qty":1}]}"#;

const SQLITE_TARGET: f64 = 100_000.0;
const POSTGRES_TARGET: f64 = 50_000.0;

/// The webhook events numbered `numbers`, each with its own event ID and `body`.
fn events_of(numbers: std::ops::Range<usize>, body: &Bytes) -> Vec<(String, Target, Bytes)> {
    numbers
        .map(|n| {
            (
                format!("event-{n:08}"),
                Target::webhook(DEMO_TRIGGER_TOKEN),
                body.clone(),
            )
        })
        .collect()
}

/// One round into a fresh store of `backend`: events a second, and each batch's milliseconds.
async fn round_of(
    backend: &Backend,
    stores: &AtomicU64,
    events: usize,
    batch: usize,
) -> Result<(f64, Vec<f64>, f64)> {
    let fresh = Fresh::new(backend, stores).await?;
    let outbox = fresh.open().await?;
    let body = Bytes::from_static(BODY);
    let mut batches = Vec::new();
    let mut total = 0.0;
    for start in (0..events).step_by(batch) {
        let end = (start + batch).min(events);
        let jobs = events_of(start..end, &body);
        let began = Instant::now();
        let stored = outbox.enqueue_many(jobs).await?;
        let took = began.elapsed();
        if stored.iter().filter(|(_, now)| *now).count() != end - start {
            return Err(
                format!("a batch of fresh events stored fewer than {}", end - start).into(),
            );
        }
        total += took.as_secs_f64();
        batches.push(ms(took));
    }
    // A batch of repeats: every event ID is stored, nothing changes.
    let repeats = events_of(0..batch.min(events), &body);
    let began = Instant::now();
    let again = outbox.enqueue_many(repeats).await?;
    let repeat_ms = ms(began.elapsed());
    if again.iter().any(|(_, now)| *now) {
        return Err("a repeated event ID was stored again".into());
    }
    drop(outbox);
    fresh.remove().await?;
    Ok((events as f64 / total, batches, repeat_ms))
}

/// `rounds` rounds into `backend`: the median rate, and the batch latencies of every round.
async fn figure(
    backend: &Backend,
    stores: &AtomicU64,
    rounds: usize,
    events: usize,
    batch: usize,
) -> Result<(f64, Value)> {
    let mut rates = Vec::new();
    let mut batches = Vec::new();
    let mut repeats = Vec::new();
    for _ in 0..rounds {
        let (rate, times, repeat) = round_of(backend, stores, events, batch).await?;
        rates.push(rate);
        batches.extend(times);
        repeats.push(repeat);
    }
    let rate = median(&rates);
    Ok((
        rate,
        json!({
            "events_per_s": round(rate, 0),
            "events_per_s_runs": rates.iter().map(|rate| round(*rate, 0)).collect::<Vec<_>>(),
            "batch_p50_ms": round(percentile(&batches, 50.0), 3),
            "batch_p99_ms": round(percentile(&batches, 99.0), 3),
            "batch_max_ms": round(percentile(&batches, 100.0), 3),
            "repeat_batch_ms": round(median(&repeats), 3),
        }),
    ))
}

pub(crate) async fn run(size: Size) -> Result<Report> {
    let events = size.pick(200_000usize, 300);
    let batch = size.pick(10_000usize, 100);
    let rounds = size.pick(3usize, 1);
    let stores = AtomicU64::new(0);
    let mut report = Report::new("enqueue");
    report.param("events", events);
    report.param("batch", batch);
    report.param("rounds", rounds);
    report.param("body_bytes", BODY.len());
    report.param(
        "mode",
        "one producer, Outbox::enqueue_many of `batch` fresh webhook events at a time into a fresh store, each batch timed to its answer (every job stored, and each answered as stored); rate = events / sum of batch times; then one batch of repeats",
    );

    let dir = std::env::temp_dir().join(format!("hodoflow-bench-enqueue-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (rate, figure_sqlite) = figure(
        &Backend::Sqlite(dir.clone()),
        &stores,
        rounds,
        events,
        batch,
    )
    .await?;
    report.figure("sqlite", figure_sqlite);
    report.at_least("sqlite.events_per_s", round(rate, 0), SQLITE_TARGET);
    let _ = std::fs::remove_dir_all(&dir);

    match postgres_url() {
        None => skipped_postgres(&mut report),
        Some(url) => {
            let (rate, figure_pg) =
                figure(&Backend::Postgres(url), &stores, rounds, events, batch).await?;
            report.figure("postgres", figure_pg);
            report.at_least("postgres.events_per_s", round(rate, 0), POSTGRES_TARGET);
        }
    }
    Ok(report)
}
