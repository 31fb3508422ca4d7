//! The one store trait both backends implement, and the schema they share.
//!
//! Every method is one statement or one short transaction, so a crash between any two leaves the
//! outbox consistent: a job is pending, in flight under a lease, or final. Times are milliseconds
//! since the Unix epoch on the outbox's clock (injected in tests), stored as 64-bit integers.
//!
//! # Schema (version 1), the same columns in both backends
//!
//! ```sql
//! outbox_schema (version)                          -- the migrations applied
//! outbox_jobs (
//!     id, event_id UNIQUE, kind, method, route, body, identity, state,
//!     calls, attempts, next_at, created_at, first_sent_at, finished_at,
//!     lease_owner, lease_until, claim, run_id,
//!     last_kind, last_status, last_request_id, last_message
//! )                                                -- index (state, next_at): keyset pages
//!                                                  -- (PostgreSQL version 3: (state, next_at,
//!                                                  -- id); SQLite's index ends in the rowid)
//! outbox_pauses (scope PRIMARY KEY, until_ms)      -- a credential's pause, shared by workers
//! outbox_slots (id, scope, busy_until)             -- a trigger's window, shared by workers
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use crate::core::error::Result;

use super::job::{Counts, Job, JobState, NewJob, Record, Slot};
use super::page::Cursor;

/// The future a [`Store`] method returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

mod sealed {
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// Where the outbox keeps its jobs and the state its workers share: SQLite
/// (`SqliteStore`, feature `outbox-sqlite`) or PostgreSQL
/// (`PostgresStore`, feature `outbox-postgres`).
///
/// Sealed: the two implementations pass one test suite (`tests/outbox.rs`), and a third would
/// have to as well.
pub trait Store: Sealed + Send + Sync + fmt::Debug {
    /// Inserts `job` unless a job with its event ID exists. Returns the stored job, and whether
    /// it was inserted now.
    fn enqueue(&self, job: NewJob) -> StoreFuture<'_, (Job, bool)>;

    /// [`enqueue`](Self::enqueue) of every job of `jobs`, in one transaction: all are stored, or
    /// none. Returns, in the order of `jobs`, each stored job and whether it was inserted now (a
    /// repeat of an event ID, stored before or earlier in `jobs`, is `false` and changes
    /// nothing).
    fn enqueue_many(&self, jobs: Vec<NewJob>) -> StoreFuture<'_, Vec<(Job, bool)>>;

    /// Claims up to `limit` jobs due at `now`: pending with `next_at <= now`, or in flight with
    /// an ended lease (their worker died). Each becomes in flight for `worker` until
    /// `now + lease`, its claim count one higher. A job in flight is due again at its lease's
    /// end (`next_at = lease_until`, schema version 2), so both kinds are one range of one
    /// partial index on `(next_at, id)`, read in order: a claim costs the same with a backlog of
    /// a million jobs as of ten. Oldest due first. Two workers never claim one job at once
    /// (PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite: one writer).
    fn claim(
        &self,
        worker: &str,
        now: SystemTime,
        lease: Duration,
        limit: usize,
    ) -> StoreFuture<'_, Vec<Job>>;

    /// Writes `record` for the job `id` if it is still in flight under claim `claim`; false when
    /// the claim was lost (the lease ran out and another worker took the job).
    fn record(&self, id: i64, claim: u64, record: Record) -> StoreFuture<'_, bool>;

    /// [`record`](Self::record) for many jobs in one transaction (one statement on
    /// PostgreSQL): whether each record was written, in order. Workers write what finished
    /// while the last batch was written, so a busy pool pays one round trip for many jobs.
    fn record_many(&self, records: Vec<(i64, u64, Record)>) -> StoreFuture<'_, Vec<bool>>;

    /// The job of `event_id`.
    fn get(&self, event_id: &str) -> StoreFuture<'_, Option<Job>>;

    /// How many jobs are in each state.
    fn counts(&self) -> StoreFuture<'_, Counts>;

    /// Up to `limit` jobs in `state` (every state when `None`), oldest first.
    fn list(&self, state: Option<JobState>, limit: usize) -> StoreFuture<'_, Vec<Job>>;

    /// Up to `limit` jobs in `state` (every state when `None`) after `after` (from the first
    /// when `None`), in the order of `(state, next_at, id)` ([`Cursor`] says which order and
    /// what a walk over the pages guarantees), and the cursor of the next page (`None` when
    /// this page is the last). Each state's part is one range of the index on
    /// `(state, next_at)` (with the ID after it), so a page costs the same however deep.
    ///
    /// `invalid_input` when `after` continues a listing of another state than `state`.
    fn list_page(
        &self,
        state: Option<JobState>,
        after: Option<&Cursor>,
        limit: usize,
    ) -> StoreFuture<'_, (Vec<Job>, Option<Cursor>)>;

    /// Makes the job of `event_id` pending and due at `now` again, whatever its state (an
    /// operator's decision, for a failed job or one that needs reconciliation), and forgets
    /// when it was first sent, so its horizon starts again. `None` when there is no such job.
    fn requeue(&self, event_id: &str, now: SystemTime) -> StoreFuture<'_, Option<Job>>;

    /// Pauses `scope` (a credential) until `until`, or later if it is paused longer already.
    fn pause(&self, scope: &str, until: SystemTime) -> StoreFuture<'_, ()>;

    /// Until when `scope` is paused, if past `now`.
    fn paused_until(&self, scope: &str, now: SystemTime) -> StoreFuture<'_, Option<SystemTime>>;

    /// Takes a slot of `scope`'s window: at most `limit` slots busy at once, a slot busy until
    /// `now + hold` (then [`release_slot`](Self::release_slot) moves that to the answer's time
    /// plus the window). Atomic across workers and processes.
    fn take_slot(
        &self,
        scope: &str,
        limit: u32,
        hold: Duration,
        now: SystemTime,
    ) -> StoreFuture<'_, Slot>;

    /// The slot `id` stays busy until `busy_until` (the answer's time plus the window).
    fn release_slot(&self, id: i64, busy_until: SystemTime) -> StoreFuture<'_, ()>;
}
