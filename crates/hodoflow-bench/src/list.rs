//! `list`: pages of a million-job outbox, by keyset.
//!
//! A fresh store is filled with `jobs` webhook jobs (`Outbox::enqueue_many`, 10,000 a
//! transaction), then given a mix of states through the store's own calls: 60% of them are
//! claimed, 10,000 a claim, and recorded in one `record_many` each: half of those accepted, a
//! tenth each failed, needing reconciliation and rescheduled (pending an hour later), and a
//! fifth left in flight; the other 40% stay pending. PostgreSQL is then vacuumed and analyzed
//! (`VACUUM ANALYZE`, what autovacuum does on its own a little later): until then the index
//! entries of the 600,000 rows just updated are dead, and a page read from the start of a range
//! steps over them (a first page took 8 ms at p50 and 36 ms at p99 so; BENCHMARKS.md).
//!
//! Then `Outbox::list_page(.., limit 50)` is timed `calls` times each for: the first page of every
//! state; a deep page, after a cursor at the middle job (`event-00500000`, wherever its state put
//! it); the first page of failed jobs; and a deep page of pending jobs. p50 and p99 of each;
//! target: under 200 ms. Last, one `hodoflow-send outbox list --limit 50` process is
//! timed whole (start, open and migration check, the page, exit), when the binary is built next
//! to this one (`cargo build --release -p hodoflow-send`); and the status page of
//! `hodoflow-send outbox serve` on that store: its first load (counts, the backlog chart over the
//! last hour, the failed and needs-reconciliation listings, the paused scopes), then
//! `calls` loads more (the chart is reused for 15 s, so these read the rest), and `calls` loads
//! of a deep page of pending jobs (`/?state=pending&after=CURSOR`), each one GET over loopback
//! timed to the last byte.
//!
//! SQLite (one file) and, when `OUTBOX_DATABASE_URL` names a database, PostgreSQL (a fresh
//! database next to it, dropped after).

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use hodoflow_mock::DEMO_TRIGGER_TOKEN;
use hodoflow_outbox::{Cursor, JobState, Outbox, Record, Target};
use serde_json::{Value, json};

use crate::Result;
use crate::figures::{ms, percentile, round};
use crate::outbox::{Backend, Fresh, postgres_url, skipped_postgres};
use crate::report::Report;
use crate::size::Size;

/// The target of every page's p99.
const TARGET_MS: f64 = 200.0;

/// Jobs a page.
const LIMIT: usize = 50;

/// Jobs of one `enqueue_many` call, and of one claim.
const BATCH: usize = 10_000;

/// Fills `outbox` with `jobs` jobs in the mix of states the module docs say.
async fn fill(outbox: &Outbox, jobs: usize) -> Result<()> {
    let body = Bytes::from_static(br#"{"event":"order.shipped"}"#);
    for start in (0..jobs).step_by(BATCH) {
        let events = (start..(start + BATCH).min(jobs)).map(|n| {
            (
                format!("event-{n:08}"),
                Target::webhook(DEMO_TRIGGER_TOKEN),
                body.clone(),
            )
        });
        outbox.enqueue_many(events).await?;
    }
    let store = outbox.store();
    let lease = Duration::from_secs(600);
    let mut claimed = 0;
    while claimed < jobs * 6 / 10 {
        let now = SystemTime::now();
        let batch = store
            .claim("bench", now, lease, BATCH.min(jobs * 6 / 10 - claimed))
            .await?;
        if batch.is_empty() {
            break;
        }
        claimed += batch.len();
        let records = batch
            .iter()
            .enumerate()
            .filter_map(|(n, job)| {
                let (state, next_at) = match n % 10 {
                    0..5 => (JobState::Accepted, now),
                    5 => (JobState::Failed, now),
                    6 => (JobState::NeedsReconciliation, now),
                    7 => (JobState::Pending, now + Duration::from_secs(3600)),
                    _ => return None,
                };
                let record = Record {
                    state,
                    next_at,
                    attempts_added: 1,
                    first_sent_at: Some(now),
                    run_id: None,
                    last_error: None,
                    finished_at: state.is_final().then_some(now),
                    may_have_run: false,
                };
                Some((job.id, job.claim, record))
            })
            .collect();
        store.record_many(records).await?;
    }
    Ok(())
}

/// `calls` timings of `page`, in milliseconds: p50 and p99, and the jobs of the last call.
async fn timed<F, Fut>(calls: usize, mut page: F) -> Result<Value>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = hodoflow_retry::Result<(usize, bool)>>,
{
    let mut times = Vec::with_capacity(calls);
    let mut last = (0, false);
    for _ in 0..calls {
        let began = Instant::now();
        last = page().await?;
        times.push(ms(began.elapsed()));
    }
    Ok(json!({
        "p50_ms": round(percentile(&times, 50.0), 3),
        "p99_ms": round(percentile(&times, 99.0), 3),
        "jobs": last.0,
        "next": last.1,
    }))
}

/// One `hodoflow-send outbox list --limit 50` process on `spec`, timed whole: its
/// milliseconds, or why it did not run.
fn cli_list(exe: &Path, spec: &str) -> Value {
    let Some(send) = exe.parent().map(|dir| dir.join("hodoflow-send")) else {
        return json!("skipped: no directory of the bench binary");
    };
    if !send.exists() {
        return json!(
            "skipped: build hodoflow-send next to the bench (cargo build --release -p hodoflow-send)"
        );
    }
    let began = Instant::now();
    let ran = std::process::Command::new(&send)
        .env_clear()
        .args(["--json", "outbox", "--outbox", spec, "list", "--limit"])
        .arg(LIMIT.to_string())
        .output();
    let took = ms(began.elapsed());
    match ran {
        Ok(output) if output.status.success() => {
            let listed: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
            json!({
                "ms": round(took, 3),
                "jobs": listed["jobs"].as_array().map_or(0, Vec::len),
                "next": listed["next"].is_string(),
            })
        }
        Ok(output) => json!(format!("failed: exit {:?}", output.status.code())),
        Err(error) => json!(format!("failed: {error}")),
    }
}

/// One GET of `path` from the page at `addr`, timed to the last byte: its milliseconds, and
/// whether it answered 200.
async fn get_page(http: &reqwest::Client, addr: &str, path: &str) -> Result<(f64, bool)> {
    let began = Instant::now();
    let response = http.get(format!("http://{addr}{path}")).send().await?;
    let ok = response.status() == reqwest::StatusCode::OK;
    let _ = response.bytes().await?;
    Ok((ms(began.elapsed()), ok))
}

/// The status page of `hodoflow-send outbox serve` on `spec`: the first load, then `calls`
/// more of the overview and of a deep page of pending jobs after `pending`.
async fn page_loads(exe: &Path, spec: &str, calls: usize, pending: &Cursor) -> Result<Value> {
    use tokio::io::AsyncBufReadExt as _;
    let Some(send) = exe.parent().map(|dir| dir.join("hodoflow-send")) else {
        return Ok(json!("skipped: no directory of the bench binary"));
    };
    if !send.exists() {
        return Ok(json!(
            "skipped: build hodoflow-send next to the bench (cargo build --release -p hodoflow-send)"
        ));
    }
    let mut child = tokio::process::Command::new(&send)
        .env_clear()
        .args([
            "outbox",
            "--outbox",
            spec,
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("the page's standard output")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let addr = loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .map_err(|_| "the page did not start within 30 s")??
            .ok_or("the page exited before listening")?;
        if let Some(rest) = line.strip_prefix("listening on http://") {
            break rest.trim_end_matches('/').to_owned();
        }
    };
    let http = reqwest::Client::new();
    let (first, first_ok) = get_page(&http, &addr, "/").await?;
    let mut overview = Vec::with_capacity(calls);
    let mut deep = Vec::with_capacity(calls);
    let deep_path = format!("/?state=pending&after={pending}");
    let mut all_ok = first_ok;
    for _ in 0..calls {
        let (took, ok) = get_page(&http, &addr, "/").await?;
        overview.push(took);
        all_ok &= ok;
        let (took, ok) = get_page(&http, &addr, &deep_path).await?;
        deep.push(took);
        all_ok &= ok;
    }
    let _ = child.kill().await;
    if !all_ok {
        return Ok(json!("failed: a page did not answer 200"));
    }
    Ok(json!({
        "first_load_ms": round(first, 3),
        "overview_p50_ms": round(percentile(&overview, 50.0), 3),
        "overview_p99_ms": round(percentile(&overview, 99.0), 3),
        "pending_deep_page_p50_ms": round(percentile(&deep, 50.0), 3),
        "pending_deep_page_p99_ms": round(percentile(&deep, 99.0), 3),
    }))
}

/// The figures of one store of `backend`, its targets added to `report`.
async fn figure(
    backend: &Backend,
    name: &str,
    jobs: usize,
    calls: usize,
    exe: &Path,
    report: &mut Report,
) -> Result<()> {
    let stores = AtomicU64::new(0);
    let fresh = Fresh::new(backend, &stores).await?;
    let outbox = fresh.open().await?;
    let began = Instant::now();
    fill(&outbox, jobs).await?;
    let fill_s = began.elapsed().as_secs_f64();
    fresh.analyze().await?;
    let counts = outbox.counts().await?;
    let middle = outbox
        .job(&format!("event-{:08}", jobs / 2))
        .await?
        .ok_or("the middle job is stored")?;
    let middle = Cursor::after(&middle);
    let pending = outbox
        .job(&format!("event-{:08}", jobs - jobs / 20))
        .await?
        .ok_or("a late pending job is stored")?;
    let pending = Cursor::after(&pending);
    let size = |(jobs, next): (Vec<_>, Option<Cursor>)| (jobs.len(), next.is_some());
    let first = timed(calls, || async {
        outbox.list_page(None, None, LIMIT).await.map(size)
    })
    .await?;
    let deep = timed(calls, || async {
        outbox.list_page(None, Some(&middle), LIMIT).await.map(size)
    })
    .await?;
    let failed = timed(calls, || async {
        outbox
            .list_page(Some(JobState::Failed), None, LIMIT)
            .await
            .map(size)
    })
    .await?;
    let deep_pending = timed(calls, || async {
        outbox
            .list_page(Some(JobState::Pending), Some(&pending), LIMIT)
            .await
            .map(size)
    })
    .await?;
    drop(outbox);
    let cli = cli_list(exe, fresh.spec());
    let page = page_loads(exe, fresh.spec(), calls.min(20), &pending).await?;
    for figure in [
        "first_load_ms",
        "overview_p99_ms",
        "pending_deep_page_p99_ms",
    ] {
        if let Some(took) = page[figure].as_f64() {
            report.at_most(&format!("{name}.status_page.{figure}"), took, TARGET_MS);
        }
    }
    for (page, figure) in [
        ("first_page", &first),
        ("deep_page", &deep),
        ("failed_first_page", &failed),
        ("pending_deep_page", &deep_pending),
    ] {
        let p99 = figure["p99_ms"].as_f64().unwrap_or(f64::MAX);
        report.at_most(&format!("{name}.{page}.p99_ms"), p99, TARGET_MS);
    }
    if let Some(took) = cli["ms"].as_f64() {
        report.at_most(&format!("{name}.cli_list_ms"), took, TARGET_MS);
    }
    report.figure(
        name,
        json!({
            "jobs": counts.total(),
            "pending": counts.pending,
            "in_flight": counts.in_flight,
            "accepted": counts.accepted,
            "failed": counts.failed,
            "needs_reconciliation": counts.needs_reconciliation,
            "fill_s": round(fill_s, 1),
            "first_page": first,
            "deep_page": deep,
            "failed_first_page": failed,
            "pending_deep_page": deep_pending,
            "cli_list": cli,
            "status_page": page,
        }),
    );
    fresh.remove().await?;
    Ok(())
}

pub(crate) async fn run(size: Size, exe: &Path) -> Result<Report> {
    let jobs = size.pick(1_000_000usize, 2_000);
    let calls = size.pick(100usize, 5);
    let mut report = Report::new("list");
    report.param("jobs", jobs);
    report.param("limit", LIMIT);
    report.param("calls", calls);
    report.param(
        "mode",
        "Outbox::list_page(state, after, 50) on a store of `jobs` webhook jobs (40% pending, 30% accepted, 6% each failed, needs_reconciliation and rescheduled, 12% in flight), each page timed `calls` times; then one `hodoflow-send outbox list --limit 50` process",
    );
    let dir = std::env::temp_dir().join(format!("hodoflow-bench-list-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let sqlite = figure(
        &Backend::Sqlite(dir.clone()),
        "sqlite",
        jobs,
        calls,
        exe,
        &mut report,
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    sqlite?;
    match postgres_url() {
        None => skipped_postgres(&mut report),
        Some(url) => {
            figure(
                &Backend::Postgres(url),
                "postgres",
                jobs,
                calls,
                exe,
                &mut report,
            )
            .await?;
        }
    }
    Ok(report)
}
