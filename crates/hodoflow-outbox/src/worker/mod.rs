//! The worker pool: claims due jobs under a lease, delivers each through the client, records
//! the result, and shares the credential's pause and the triggers' windows through the store.
//!
//! A worker claims at most as many jobs as it has free delivery slots (its concurrency), so a
//! claimed job starts at once and its lease measures a delivery, not a queue. The lease must
//! outlast one call (the budget's `max_elapsed` plus a margin): a worker that dies leaves its
//! jobs in flight, and another worker reclaims them when the lease ends and sends them again
//! under the same identity, which the server deduplicates.
//!
//! Once the client's retry budget has seen the service down for longer than one call's budget,
//! a job started would only hold for its whole call and end refused, its lease held all the
//! while. So the pool keeps one delivery in flight, which carries the retry budget's probes and
//! finds the service back, and reschedules every other queued job without sending it, as a call
//! refused before it sent anything: pending, due again on the schedule's first step, never
//! failed.

//! One file per idea: `builder.rs` (the configuration), `pool.rs` (the loop that claims,
//! delivers through each vendor's `Deliver`, `../target.rs`, and records), `fleet.rs` (the
//! store-backed pause and windows); the handle of running workers is here.

mod builder;
mod fleet;
mod outage;
mod pool;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use hodoflow_retry::{Error, Result};

use builder::OnFinished;
pub use builder::{JobDone, WorkerBuilder};
use fleet::StoreFleet;
pub use outage::{FAILURES_TO_HOLD, OUTAGE_READ_EVERY};
use pool::WorkerPool;

/// The default number of deliveries a worker runs at once.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// The default lease of a claimed job.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(120);
/// The default time between claims when nothing was due and the store cannot wake the worker
/// for another process's jobs (SQLite).
pub const DEFAULT_POLL: Duration = Duration::from_millis(200);
/// The default longest sleep of an idle worker its store wakes (PostgreSQL): a lost
/// notification costs at most this.
pub const DEFAULT_SAFETY_POLL: Duration = Duration::from_secs(30);
/// The most records a worker writes in one transaction.
const MAX_RECORD_BATCH: usize = 256;
/// How long a worker trusts the credential's shared pause it last read: another worker's 429
/// reaches it within this.
pub const PAUSE_READ_EVERY: Duration = Duration::from_millis(100);
/// The longest wait between claims after the store failed.
const CLAIM_RETRY_MAX: Duration = Duration::from_secs(10);
/// The default horizon of a webhook delivery ID (Hodoflow's webhook sender guide: accepted
/// identities are kept for 7 days).
pub const WEBHOOK_HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);
/// The default horizon of a JSON:API or Modulify key (24 hours: the "Idempotency and retries"
/// pages of Hodoflow and of Modulify).
pub const KEY_HORIZON: Duration = Duration::from_secs(24 * 3600);
/// The longest lease and horizon a worker accepts: 7 days, the longest a server keeps an
/// identity (Hodoflow's webhook sender guide). A job in flight under a lease ending later than this
/// from now was claimed with a lease no worker can hold: it is taken as expired, claimed again and
/// `outbox retry` requeues it (a lease of `i64::MAX` milliseconds once wedged an outbox).
pub const MAX_LEASE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Workers running in the background. Dropping the handle stops them as
/// [`stop`](Self::stop) does, without waiting.
#[derive(Debug)]
pub struct Workers {
    pool: Arc<WorkerPool>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<RunReport>>,
}

impl Workers {
    /// What they have done so far.
    pub fn report(&self) -> RunReport {
        self.pool.snapshot()
    }

    /// Stops claiming, waits for the deliveries in flight to be recorded, and returns what the
    /// workers did.
    ///
    /// # Errors
    ///
    /// The store's error that stopped the workers, if one did.
    pub async fn stop(self) -> Result<RunReport> {
        let _ = self.stop.send(true);
        self.task.await.map_err(|_| {
            Error::new(
                hodoflow_retry::ErrorKind::Transport,
                "the worker task panicked",
            )
        })?
    }
}

/// What workers did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunReport {
    /// Jobs claimed.
    pub claimed: u64,
    /// Deliveries the server accepted.
    pub accepted: u64,
    /// Deliveries the server had already accepted.
    pub duplicate: u64,
    /// Writes and Modulify calls that succeeded.
    pub done: u64,
    /// Jobs stopped on a permanent error.
    pub failed: u64,
    /// Jobs rescheduled after a call that ended retryable.
    pub rescheduled: u64,
    /// Jobs stopped at their horizon.
    pub needs_reconciliation: u64,
    /// Records refused because the claim had been lost to another worker.
    pub claims_lost: u64,
    /// Requests sent.
    pub attempts: u64,
}
