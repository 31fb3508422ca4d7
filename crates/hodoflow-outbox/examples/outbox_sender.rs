//! Run with: `cargo run -p hodoflow-outbox --example outbox_sender --features sqlite`
//!
//! A sender service with a durable outbox, on the embedded contract server, with no setup. It
//! enqueues 500 order events into an SQLite outbox, starts a worker pool in a child process
//! (this same program, run with `--worker`), and kills that process with SIGKILL in the middle
//! of the batch, while about 10% of answers are lost after the server committed. A restarted
//! worker pool reclaims the dead worker's jobs when their short lease runs out and sends them
//! again under the same delivery IDs. Then the server's ledger checks: exactly one workflow run
//! per event, and every event ends accepted or duplicate. The program exits non-zero otherwise.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hodoflow_mock::{
    DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN, Fault, Limits, MockServer,
};
use hodoflow_outbox::{Counts, JobState, Outbox, Target};
use hodoflow_retry::{Backoff, Budget, HodoflowClient};

const EVENTS: usize = 500;
const WORKERS: usize = 16;
const WEBHOOKS: &str = "/api/v1/webhooks/";
/// How long a claim holds: one call (`max_elapsed` below) plus a second. A job whose worker
/// died is sent again after this; production uses minutes (the default is 120 s).
const LEASE: Duration = Duration::from_secs(3);
/// The first argument of the child process that runs the worker pool.
const WORKER_ARG: &str = "--worker";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(WORKER_ARG) {
        // The child: `outbox_sender --worker <base URL> <outbox file>`.
        return worker_process(&args[2], Path::new(&args[3])).await;
    }
    let started = Instant::now();

    // 1. A contract server on 127.0.0.1 with the demo client and trigger. About 10% of answers
    //    are lost after the server committed (the run started; the sender never hears of it).
    //    The trigger takes 10,000 requests a minute so the demo is not paced for minutes.
    let limits = Limits {
        webhook_rate_limit: 10_000,
        ..Limits::default()
    };
    let server = MockServer::builder().limits(limits).start().await?;
    server.inject(
        Fault::execute_then_close()
            .on("POST", WEBHOOKS)
            .probability(0.10, 1),
    );

    // 2. The outbox: one SQLite file, created and migrated on open.
    let dir = std::env::temp_dir().join(format!("hodoflow-outbox-sender-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("outbox.db");
    let outbox = Outbox::sqlite(&path).await?;

    // 3. The service's producer: one job per order event, persisted with its delivery ID
    //    (derived from the event ID) before anything is sent. Enqueueing again is a no-op.
    for n in 0..EVENTS {
        let body = format!(r#"{{"order":{n},"event":"shipped"}}"#);
        outbox
            .enqueue(&event_id(n), Target::webhook(DEMO_TRIGGER_TOKEN), body)
            .await?;
    }
    println!("enqueued     {EVENTS} events into {}", path.display());

    // 4. The worker pool runs in a child process; kill it with SIGKILL once about a third of
    //    the events have a run. Its jobs in flight stay claimed under its lease.
    let mut child = spawn_worker_process(&server.base_url(), &path)?;
    let crashed = wait_for_runs(&server, &mut child, EVENTS / 3).await?;
    if crashed {
        child.kill()?; // SIGKILL on Unix: no cleanup, no last record.
        child.wait()?;
        let at_crash = outbox.counts().await?;
        println!(
            "crash        worker process killed (SIGKILL) after {} runs: {} recorded, {} in flight, {} pending",
            server.ledger().total_runs(),
            at_crash.accepted + at_crash.duplicate,
            at_crash.in_flight,
            at_crash.pending,
        );
    } else {
        println!("crash        the worker process finished before it could be killed");
    }

    // 5. The restart: a new worker pool on the same file. It delivers what is pending at once,
    //    and reclaims the dead worker's jobs when their lease runs out.
    let restarted = Instant::now();
    let workers = worker_pool(&outbox, client(&server.base_url())?).spawn()?;
    let counts = loop {
        let counts = outbox.counts().await?;
        if counts.pending + counts.in_flight == 0 {
            break counts;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let resumed = workers.stop().await?;
    println!(
        "restart      claimed {} ({} reclaimed after the dead worker's {} s lease), accepted {}, duplicate {}, attempts {} in {:.1} s",
        resumed.claimed,
        reclaimed(&outbox).await?,
        LEASE.as_secs(),
        resumed.accepted,
        resumed.duplicate,
        resumed.attempts,
        restarted.elapsed().as_secs_f64(),
    );

    // 6. The ledger check: one run per event, every job accepted or duplicate.
    let once = check(&server, &outbox, &counts).await?;
    println!(
        "\nexactly once: {}   ({:.1} s)",
        if once { "yes" } else { "NO" },
        started.elapsed().as_secs_f64()
    );
    std::fs::remove_dir_all(&dir)?;
    if !once {
        return Err("an event did not end with exactly one run".into());
    }
    Ok(())
}

/// The event ID of order `n`; the outbox derives the delivery ID from it.
fn event_id(n: usize) -> String {
    format!("order-{n}:shipped")
}

/// The client every worker pool uses. Millisecond backoff keeps the demo quick; a call may
/// take at most 2 s, so the lease of 3 s outlasts it.
fn client(base_url: &str) -> hodoflow_retry::Result<HodoflowClient> {
    HodoflowClient::builder(base_url)
        .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .budget(
            Budget::new()
                .max_attempts(10)
                .max_elapsed(Duration::from_secs(2)),
        )
        .backoff(
            Backoff::new()
                .base(Duration::from_millis(10))
                .cap(Duration::from_millis(200)),
        )
        .build()
}

/// The worker pool of this service. The trigger limit is off because the demo's server takes
/// 10,000 a minute; production keeps the documented 100 per 60 s (the default).
fn worker_pool(outbox: &Outbox, client: HodoflowClient) -> hodoflow_outbox::WorkerBuilder {
    outbox
        .workers(client)
        .concurrency(WORKERS)
        .lease(LEASE)
        .poll_interval(Duration::from_millis(50))
        .trigger_limit(None)
}

/// Starts this program again as the worker process.
fn spawn_worker_process(base_url: &str, path: &Path) -> std::io::Result<Child> {
    Command::new(std::env::current_exe()?)
        .arg(WORKER_ARG)
        .arg(base_url)
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
}

/// The worker process: delivers until nothing is left (unless it is killed first).
async fn worker_process(base_url: &str, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let outbox = Outbox::sqlite(PathBuf::from(path)).await?;
    // The jobs name their trigger by reference: this process reads the token from its own
    // configuration (here, the demo token).
    outbox.add_trigger_token(DEMO_TRIGGER_TOKEN)?;
    worker_pool(&outbox, client(base_url)?)
        .run_until_idle()
        .await?;
    Ok(())
}

/// How many jobs were claimed twice: those the killed worker held when it died.
async fn reclaimed(outbox: &Outbox) -> hodoflow_retry::Result<usize> {
    let jobs = outbox.list(None, EVENTS + 1).await?;
    Ok(jobs.iter().filter(|job| job.claim > 1).count())
}

/// Waits until the ledger shows `runs` runs; false if the child exited first.
async fn wait_for_runs(
    server: &MockServer,
    child: &mut Child,
    runs: usize,
) -> Result<bool, Box<dyn std::error::Error>> {
    while server.ledger().total_runs() < runs {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                return Err(format!("the worker process failed: {status}").into());
            }
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(true)
}

/// Prints what the outbox and the server's ledger say; true when every event has exactly one
/// run and every job ended accepted or duplicate.
async fn check(
    server: &MockServer,
    outbox: &Outbox,
    counts: &Counts,
) -> Result<bool, Box<dyn std::error::Error>> {
    let ledger = server.ledger();
    let jobs = outbox.list(None, EVENTS + 1).await?;
    let runs: Vec<usize> = jobs
        .iter()
        .map(|job| ledger.runs_for_delivery(job.identity.as_str()).len())
        .collect();
    let requests = ledger.requests_to("POST", WEBHOOKS);
    let lost = requests.iter().filter(|r| r.status.is_none()).count();
    let settled = jobs
        .iter()
        .filter(|job| matches!(job.state, JobState::Accepted | JobState::Duplicate))
        .count();
    let to_reconcile = outbox.reconciliation(EVENTS).await?;

    println!("\nthe outbox says");
    println!(
        "  jobs         {:>5}: accepted {}, duplicate {}, failed {}, needs reconciliation {}, left {}",
        jobs.len(),
        counts.accepted,
        counts.duplicate,
        counts.failed,
        counts.needs_reconciliation,
        counts.pending + counts.in_flight,
    );
    println!(
        "  duplicates   {:>5}: the server had accepted an earlier attempt (its answer lost, or its worker killed); {} listed for reconciliation",
        counts.duplicate,
        to_reconcile.len(),
    );
    println!("\nthe server's ledger says");
    println!("  requests     {:>5}: answer lost {lost}", requests.len());
    println!(
        "  runs         {:>5} for {} delivery IDs: one {}, none {}, more than one {}",
        ledger.total_runs(),
        jobs.len(),
        runs.iter().filter(|&&r| r == 1).count(),
        runs.iter().filter(|&&r| r == 0).count(),
        runs.iter().filter(|&&r| r > 1).count(),
    );
    Ok(jobs.len() == EVENTS
        && settled == EVENTS
        && runs.iter().all(|&r| r == 1)
        && ledger.total_runs() == EVENTS)
}
