//! `outbox`: what durability costs.
//!
//! The same successful webhook deliveries go two ways to a fresh, identical contract server:
//! **direct**, `client.deliver(..).delivery_id(..).send()` from 16 tasks per client, and
//! **through the outbox**: one producer enqueues every job first (each `enqueue` timed: the
//! enqueue latency), then worker pools deliver them (`run_until_idle`, 16 deliveries at once
//! per pool, the default), timed from the pools' start until every job is recorded. Jobs per
//! second is jobs over that time; the ratio outbox/direct is the cost of durability.
//!
//! SQLite: one pool on one file. PostgreSQL (when `OUTBOX_DATABASE_URL` names a database): 1, 2
//! and 4 pools, each with its own
//! `Outbox::postgres` (its own connections) and its own `HodoflowClient`, as separate sender
//! processes would have; the direct side then runs as many clients, 16 tasks each. Every
//! measurement gets a fresh database (`CREATE DATABASE`, dropped after). No faults; the outbox's
//! trigger limit is off (`trigger_limit(None)`) and the server's per-trigger limit is lifted,
//! on both sides. Each client is warmed up (a token exchange, then direct deliveries) before
//! anything is timed. Direct and outbox runs alternate, `rounds` times per configuration; each
//! pair gives a ratio and the median is the figure.
//!
//! Targets: outbox/direct >= 0.70 (durability costs under 30%), for SQLite and for each
//! PostgreSQL pool count; 4 pools on PostgreSQL deliver at least as many jobs a second as 1.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hodoflow_mock::{DEMO_TRIGGER_TOKEN, MockServer};
use hodoflow_outbox::{Outbox, Target};
use hodoflow_retry::{Backoff, DeliveryId, HodoflowClient, IdempotencyKey, limit::RetryBudget};
use serde_json::{Value, json};

use crate::figures::{median, ms, percentile, round};
use crate::report::Report;
use crate::size::Size;
use crate::{Result, peers, server};

const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711,"carrier":"dhl","items":[{"sku":"A-100","qty":2},{"sku":"B-220","qty":1}]}"#;

/// Deliveries at once per pool and per direct client: the workers' default (16).
const CONCURRENCY: usize = 16;

/// Outbox jobs a second over direct calls must be at least this (durability costs under 30%).
const TARGET_RATIO: f64 = 0.70;

/// The PostgreSQL pool counts.
const POOLS: [usize; 3] = [1, 2, 4];

/// Where the outbox of one measurement lives.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    /// A fresh SQLite file in this directory.
    Sqlite(PathBuf),
    /// A fresh database next to the one this URL names.
    Postgres(String),
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }
}

/// A fresh, empty store of `backend`, and how to open it again (once per pool).
#[derive(Debug)]
pub(crate) enum Fresh {
    Sqlite(PathBuf),
    Postgres(pg::Database),
}

impl Fresh {
    pub(crate) async fn new(backend: &Backend, n: &AtomicU64) -> Result<Self> {
        let n = n.fetch_add(1, Ordering::Relaxed);
        match backend {
            Backend::Sqlite(dir) => Ok(Fresh::Sqlite(dir.join(format!("outbox-{n}.db")))),
            Backend::Postgres(url) => Ok(Fresh::Postgres(pg::Database::create(url).await?)),
        }
    }

    pub(crate) async fn open(&self) -> Result<Outbox> {
        match self {
            Fresh::Sqlite(path) => Ok(Outbox::sqlite(path).await?),
            Fresh::Postgres(database) => Ok(Outbox::postgres(database.url()).await?),
        }
    }

    /// What `hodoflow-send --outbox` takes for this store: the file's path, or the URL.
    pub(crate) fn spec(&self) -> &str {
        match self {
            Fresh::Sqlite(path) => path.to_str().unwrap_or_default(),
            Fresh::Postgres(database) => database.url(),
        }
    }

    /// Settles a store after a bulk fill as autovacuum would a little later: PostgreSQL's
    /// `VACUUM ANALYZE` (the index entries of the rows the fill updated are dead until a vacuum,
    /// and a scan from the start of a range steps over them; the planner's statistics). SQLite
    /// updates in place and plans without statistics: nothing to do.
    pub(crate) async fn analyze(&self) -> Result<()> {
        match self {
            Fresh::Sqlite(_) => Ok(()),
            Fresh::Postgres(database) => database.analyze().await,
        }
    }

    /// Transactions the store's database committed or rolled back so far, when it can tell
    /// (PostgreSQL's `pg_stat_database`); read after the outboxes using it were dropped.
    pub(crate) async fn transactions(&self) -> Result<Option<u64>> {
        match self {
            Fresh::Sqlite(_) => Ok(None),
            Fresh::Postgres(database) => Ok(Some(database.transactions().await?)),
        }
    }

    pub(crate) async fn remove(self) -> Result<()> {
        match self {
            Fresh::Sqlite(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let mut file = path.clone().into_os_string();
                    file.push(suffix);
                    let _ = std::fs::remove_file(file);
                }
                Ok(())
            }
            Fresh::Postgres(database) => database.drop_it().await,
        }
    }
}

/// A warmed-up client of `server`: the SDK's defaults, a token exchanged, `warmup` deliveries
/// sent at [`CONCURRENCY`].
pub(crate) async fn warm_client(
    server: &MockServer,
    warmup: u64,
    ids: &Arc<AtomicU64>,
) -> Result<HodoflowClient> {
    let client = peers::sdk(&server.base_url(), Backoff::default(), RetryBudget::new())?;
    let failed = direct_batch(std::slice::from_ref(&client), warmup, ids).await;
    if failed > 0 {
        return Err(format!("{failed} warm-up deliveries failed").into());
    }
    Ok(client)
}

/// Sends `count` deliveries from [`CONCURRENCY`] tasks per client; returns how many failed.
async fn direct_batch(clients: &[HodoflowClient], count: u64, ids: &Arc<AtomicU64>) -> u64 {
    let sent = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = clients
        .iter()
        .flat_map(|client| std::iter::repeat_n(client, CONCURRENCY))
        .map(|client| {
            let (client, sent, failed, ids) =
                (client.clone(), sent.clone(), failed.clone(), ids.clone());
            tokio::spawn(async move {
                while sent.fetch_add(1, Ordering::Relaxed) < count {
                    let id = format!("outbox-direct-{}", ids.fetch_add(1, Ordering::Relaxed));
                    let Ok(key) = IdempotencyKey::new(id) else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let delivered = client
                        .deliver(DEMO_TRIGGER_TOKEN, Bytes::from_static(BODY))
                        .delivery_id(DeliveryId::new(key))
                        .send()
                        .await;
                    if delivered.is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    failed.load(Ordering::Relaxed)
}

/// Direct deliveries of `jobs` from `clients` clients on a fresh server: jobs per second.
async fn direct(clients: usize, jobs: u64, warmup: u64, ids: &Arc<AtomicU64>) -> Result<f64> {
    let server = server::start().await?;
    let mut warmed = Vec::new();
    for _ in 0..clients {
        warmed.push(warm_client(&server, warmup, ids).await?);
    }
    let started = Instant::now();
    let failed = direct_batch(&warmed, jobs, ids).await;
    let elapsed = started.elapsed();
    if failed > 0 {
        return Err(format!("{failed} direct deliveries failed").into());
    }
    Ok(jobs as f64 / elapsed.as_secs_f64())
}

/// One measurement through the outbox.
#[derive(Debug, Clone)]
struct Through {
    jobs_per_s: f64,
    /// Each enqueue's latency, milliseconds.
    enqueue_ms: Vec<f64>,
    /// Enqueues a second of the one producer.
    enqueues_per_s: f64,
    /// The database's transactions per delivered job, when the store can tell.
    transactions_per_job: Option<f64>,
    /// Requests the server saw per job (1.0 when no attempt was retried).
    requests_per_job: f64,
}

/// Enqueues `jobs` from one producer, then delivers them with `pools` worker pools, on a
/// fresh server and a fresh store of `backend`.
async fn through_outbox(
    backend: &Backend,
    pools: usize,
    jobs: u64,
    warmup: u64,
    ids: &Arc<AtomicU64>,
    stores: &AtomicU64,
) -> Result<Through> {
    let server = server::start().await?;
    let fresh = Fresh::new(backend, stores).await?;

    // The producer: one enqueue after another, each timed.
    let producer = fresh.open().await?;
    let mut enqueue_ms = Vec::with_capacity(usize::try_from(jobs).unwrap_or(0));
    let enqueueing = Instant::now();
    for _ in 0..jobs {
        let event = format!("outbox-job-{}", ids.fetch_add(1, Ordering::Relaxed));
        let started = Instant::now();
        producer
            .enqueue(
                &event,
                Target::webhook(DEMO_TRIGGER_TOKEN),
                Bytes::from_static(BODY),
            )
            .await?;
        enqueue_ms.push(ms(started.elapsed()));
    }
    let enqueues_per_s = jobs as f64 / enqueueing.elapsed().as_secs_f64();
    drop(producer);

    let mut clients = Vec::new();
    for _ in 0..pools {
        clients.push(warm_client(&server, warmup, ids).await?);
    }
    let requests_before = server.ledger().requests_to("POST", server::WEBHOOKS).len();
    settle().await;
    let transactions_before = fresh.transactions().await?;
    let mut outboxes = Vec::new();
    for _ in 0..pools {
        // A pool of its own process: the jobs name their trigger by reference, and each pool
        // is given the token, as a worker reads it from its configuration.
        let outbox = fresh.open().await?;
        outbox.add_trigger_token(DEMO_TRIGGER_TOKEN)?;
        outboxes.push(outbox);
    }

    let started = Instant::now();
    let runs: Vec<_> = outboxes
        .iter()
        .zip(clients)
        .map(|(outbox, client)| {
            let workers = outbox
                .workers(client)
                .concurrency(CONCURRENCY)
                .trigger_limit(None);
            tokio::spawn(workers.run_until_idle())
        })
        .collect();
    for run in runs {
        run.await.map_err(|_| "a worker pool panicked")??;
    }
    let elapsed = started.elapsed();

    let counts = outboxes[0].counts().await?;
    if counts.accepted != jobs {
        return Err(format!("{jobs} jobs, but the outbox counts {counts:?}").into());
    }
    drop(outboxes);
    settle().await;
    let transactions_after = fresh.transactions().await?;
    let requests = server.ledger().requests_to("POST", server::WEBHOOKS).len() - requests_before;
    fresh.remove().await?;
    Ok(Through {
        jobs_per_s: jobs as f64 / elapsed.as_secs_f64(),
        enqueue_ms,
        enqueues_per_s,
        transactions_per_job: transactions_before
            .zip(transactions_after)
            .map(|(before, after)| after.saturating_sub(before) as f64 / jobs as f64),
        requests_per_job: requests as f64 / jobs as f64,
    })
}

/// Lets the database's backends of closed connections exit and flush their statistics.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// The figures of one configuration over its rounds.
fn config_figure(direct: &[f64], through: &[Through]) -> (f64, Value) {
    let ratios: Vec<f64> = direct
        .iter()
        .zip(through)
        .map(|(direct, through)| through.jobs_per_s / direct)
        .collect();
    let enqueue: Vec<f64> = through.iter().flat_map(|t| t.enqueue_ms.clone()).collect();
    let rates: Vec<f64> = through.iter().map(|t| t.jobs_per_s).collect();
    let ratio = round(median(&ratios), 3);
    let transactions: Vec<f64> = through
        .iter()
        .filter_map(|t| t.transactions_per_job)
        .collect();
    let figure = json!({
        "outbox_jobs_per_s": round(median(&rates), 0),
        "direct_jobs_per_s": round(median(direct), 0),
        "ratio": ratio,
        "ratios": ratios.iter().map(|r| round(*r, 3)).collect::<Vec<_>>(),
        "outbox_jobs_per_s_runs": rates.iter().map(|r| round(*r, 0)).collect::<Vec<_>>(),
        "direct_jobs_per_s_runs": direct.iter().map(|r| round(*r, 0)).collect::<Vec<_>>(),
        "enqueue_p50_ms": round(percentile(&enqueue, 50.0), 3),
        "enqueue_p99_ms": round(percentile(&enqueue, 99.0), 3),
        "enqueue_max_ms": round(percentile(&enqueue, 100.0), 3),
        "enqueues_per_s": round(median(&through.iter().map(|t| t.enqueues_per_s).collect::<Vec<_>>()), 0),
        "transactions_per_job": if transactions.is_empty() { Value::Null } else { round(median(&transactions), 2).into() },
        "requests_per_job": round(median(&through.iter().map(|t| t.requests_per_job).collect::<Vec<_>>()), 3),
    });
    (ratio, figure)
}

/// Runs `rounds` pairs of direct and outbox measurements of `backend` with `pools` pools.
async fn pairs(
    backend: &Backend,
    pools: usize,
    rounds: usize,
    jobs: u64,
    warmup: u64,
    ids: &Arc<AtomicU64>,
    stores: &AtomicU64,
) -> Result<(f64, f64, Value)> {
    let mut direct_rates = Vec::new();
    let mut through = Vec::new();
    for round_n in 0..rounds {
        // Alternate which side goes first, so that drift falls on both.
        let (d, t) = if round_n % 2 == 0 {
            let d = direct(pools, jobs, warmup, ids).await?;
            let t = through_outbox(backend, pools, jobs, warmup, ids, stores).await?;
            (d, t)
        } else {
            let t = through_outbox(backend, pools, jobs, warmup, ids, stores).await?;
            let d = direct(pools, jobs, warmup, ids).await?;
            (d, t)
        };
        eprintln!(
            "outbox: {} x{pools} round {}: direct {:.0} jobs/s, outbox {:.0} jobs/s ({:.3}); enqueue p50 {:.3} ms",
            backend.name(),
            round_n + 1,
            d,
            t.jobs_per_s,
            t.jobs_per_s / d,
            percentile(&t.enqueue_ms, 50.0),
        );
        direct_rates.push(d);
        through.push(t);
    }
    let rate = median(&through.iter().map(|t| t.jobs_per_s).collect::<Vec<_>>());
    let (ratio, figure) = config_figure(&direct_rates, &through);
    Ok((ratio, rate, figure))
}

/// Says in `report` that PostgreSQL was not measured, and how to measure it.
pub(crate) fn skipped_postgres(report: &mut Report) {
    report.figure("postgres", "skipped: OUTBOX_DATABASE_URL is not set");
    report.note("PostgreSQL skipped: set OUTBOX_DATABASE_URL to a database this user may CREATE DATABASE next to");
}

/// The PostgreSQL server of the run, if any.
pub(crate) fn postgres_url() -> Option<String> {
    std::env::var("OUTBOX_DATABASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
}

pub(crate) async fn run(size: Size) -> Result<Report> {
    let jobs = size.pick(20_000u64, 40);
    let warmup = size.pick(1_000u64, 5);
    let rounds = size.pick(3usize, 1);
    let ids = Arc::new(AtomicU64::new(0));
    let stores = AtomicU64::new(0);

    let mut report = Report::new("outbox");
    report.param("jobs", jobs);
    report.param("rounds", rounds);
    report.param("concurrency_per_pool", CONCURRENCY);
    report.param("warmup_deliveries_per_client", warmup);
    report.param("body_bytes", BODY.len());
    report.param(
        "mode",
        "enqueue every job first (one producer, each enqueue timed), then the pools deliver (run_until_idle), timed until every job is recorded",
    );
    report.param(
        "direct",
        "client.deliver(..).delivery_id(..).send() from 16 tasks per client, as many clients as pools",
    );
    report.param(
        "server",
        "a fresh hodoflow-mock per measurement, in-process on 127.0.0.1:0, sharing the 2-thread runtime; no faults; per-trigger limit lifted",
    );
    report.param(
        "sdk_config",
        "defaults (backoff 500 ms..30 s, retry budget 500 tokens); workers: trigger_limit(None), lease and poll defaults",
    );

    let dir = std::env::temp_dir().join(format!("hodoflow-bench-outbox-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let sqlite = Backend::Sqlite(dir.clone());
    let (ratio, _, figure) = pairs(&sqlite, 1, rounds, jobs, warmup, &ids, &stores).await?;
    report.figure("sqlite", figure);
    report.at_least("sqlite.ratio", ratio, TARGET_RATIO);
    let _ = std::fs::remove_dir_all(&dir);

    match postgres_url() {
        None => skipped_postgres(&mut report),
        Some(url) => {
            let postgres = Backend::Postgres(url);
            let mut figures = serde_json::Map::new();
            let mut rates = Vec::new();
            for pools in POOLS {
                let (ratio, rate, figure) =
                    pairs(&postgres, pools, rounds, jobs, warmup, &ids, &stores).await?;
                report.at_least(&format!("postgres_{pools}.ratio"), ratio, TARGET_RATIO);
                figures.insert(format!("pools_{pools}"), figure);
                rates.push(rate);
            }
            let four_over_one = round(rates[2] / rates[0], 3);
            figures.insert("four_over_one".to_owned(), four_over_one.into());
            report.figure("postgres", Value::Object(figures));
            report.at_least("postgres.four_over_one", four_over_one, 1.0);
        }
    }
    report.note("ratio: outbox jobs/s over direct jobs/s in the same round (median over rounds); enqueue latency over every enqueue of every round");
    report.note("transactions_per_job: commits and rollbacks in the fresh database's pg_stat_database over the delivery phase (claims, pause reads, records, the pools' opening), over jobs; SQLite cannot tell");
    Ok(report)
}

/// A throwaway PostgreSQL database per measurement.
mod pg {
    use tokio_postgres::{Client, NoTls};

    use crate::Result;

    /// A database created next to the one a URL names, dropped by [`Database::drop_it`].
    #[derive(Debug)]
    pub(crate) struct Database {
        admin: Client,
        name: String,
        url: String,
    }

    impl Database {
        pub(super) async fn create(url: &str) -> Result<Self> {
            let (admin, connection) = tokio_postgres::connect(url, NoTls).await?;
            tokio::spawn(connection);
            let name = format!("outbox_bench_{}", uuid::Uuid::new_v4().simple());
            admin
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await?;
            Ok(Self {
                admin,
                url: url_of(url, &name),
                name,
            })
        }

        pub(super) fn url(&self) -> &str {
            &self.url
        }

        /// Transactions committed and rolled back in the database, from `pg_stat_database`.
        pub(super) async fn transactions(&self) -> Result<u64> {
            // A fresh snapshot of the cumulative statistics, not this transaction's cached one.
            self.admin
                .batch_execute("SELECT pg_stat_clear_snapshot()")
                .await?;
            let row = self
                .admin
                .query_one(
                    "SELECT (xact_commit + xact_rollback)::BIGINT FROM pg_stat_database WHERE datname = $1",
                    &[&self.name],
                )
                .await?;
            Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
        }

        /// `VACUUM ANALYZE` in the database.
        pub(super) async fn analyze(&self) -> Result<()> {
            let (client, connection) = tokio_postgres::connect(&self.url, NoTls).await?;
            let running = tokio::spawn(connection);
            client.batch_execute("VACUUM ANALYZE").await?;
            drop(client);
            let _ = running.await;
            Ok(())
        }

        pub(super) async fn drop_it(self) -> Result<()> {
            self.admin
                .batch_execute(&format!("DROP DATABASE {} WITH (FORCE)", self.name))
                .await?;
            Ok(())
        }
    }

    /// `url` with its database name replaced by `name`, its query kept.
    fn url_of(url: &str, name: &str) -> String {
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, Some(query)),
            None => (url, None),
        };
        let server = match base.rsplit_once('/') {
            Some((server, _)) if server.len() > "postgres://".len() => server,
            _ => base,
        };
        match query {
            Some(query) => format!("{server}/{name}?{query}"),
            None => format!("{server}/{name}"),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::url_of;

        #[test]
        fn url_of_replaces_the_database_and_keeps_the_query() {
            assert_eq!(
                url_of("postgres://u@127.0.0.1:5432/outbox", "x"),
                "postgres://u@127.0.0.1:5432/x"
            );
            assert_eq!(
                url_of("postgres://u@h/outbox?sslmode=disable", "x"),
                "postgres://u@h/x?sslmode=disable"
            );
        }
    }
}
