//! The one store trait both backends implement, and the schema they share.
//!
//! Every method is one statement or one short transaction, so a crash between any two leaves the
//! outbox consistent: a job is pending, in flight under a lease, or final. Times are milliseconds
//! since the Unix epoch on the outbox's clock (injected in tests), stored as 64-bit integers.
//!
//! # Why the fleet's state is kept by scope
//!
//! A server's signal closes exactly what it names: one trigger's window, one credential's rate
//! budget, one vendor endpoint. Each pause and each learned window is therefore a row of its own,
//! keyed by a *scope*, the workers' name for what the signal closed (`hodoflow
//! http://127.0.0.1:8080` for a credential, the same and `trigger 1a2b3c4d` for one trigger). The
//! store treats a scope as opaque text of at most [`MAX_SCOPE`](super::MAX_SCOPE) bytes, never a
//! secret: it is shown on the status page and by `outbox status`. A window's figures learned from
//! the server (`RateLimit-Policy`) are kept beside its slots, so a worker that starts later paces
//! as the server said, not as the documents' defaults.
//!
//! # Schema (SQLite version 3, PostgreSQL version 5), the same columns in both backends
//!
//! ```sql
//! outbox_schema (version)                          -- the migrations applied
//! outbox_jobs (
//!     id, event_id UNIQUE, kind, method, route, body, identity, state,
//!     calls, attempts, next_at, created_at, first_sent_at, finished_at,
//!     lease_owner, lease_until, claim, run_id,
//!     last_kind, last_status, last_request_id, last_message,
//!     may_have_run                                 -- sticky: set by a record, never cleared
//! )                                                -- index (state, next_at): keyset pages
//!                                                  -- (PostgreSQL version 4: (state, next_at,
//!                                                  -- id); SQLite's index ends in the rowid)
//! outbox_pauses (scope PRIMARY KEY, until_ms, why) -- a closed scope, shared by workers
//! outbox_slots (id, scope, busy_until)             -- a window's busy slots, shared by workers
//! outbox_windows (scope PRIMARY KEY, requests, per_ms, learned_at)
//!                                                  -- a window's limit the server stated
//! ```
//!
//! Version 2 adds the partial index `outbox_jobs_claimable (next_at, id)` of the pending and
//! in-flight jobs (a job in flight is due at its lease's end). Version 3, PostgreSQL only:
//! triggers that `NOTIFY outbox_jobs` with the table's schema when a job is inserted or made
//! pending (`wake.rs`). Version 4, PostgreSQL only: the page index on `(state, next_at, id)`.
//!
//! SQLite version 3 and PostgreSQL version 5, the same change: `outbox_jobs.may_have_run`
//! (false for the jobs stored before) with the partial index `outbox_jobs_may_have_run (state)`
//! of the jobs that have it, `outbox_pauses.why` (empty for the pauses written before), and the
//! table `outbox_windows`. Each runs in place on open, in the transaction of the migrations; a
//! pause written before under a `credential:` scope stays until it ends.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hodoflow_retry::{Error, Result};

use super::job::{
    Counts, Due, Job, JobState, NewJob, Outage, Pause, Probe, Record, ServiceOutage, Slot,
};
use super::page::Cursor;
use super::wake::Wakeups;

/// The future a [`Store`] method returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// Where the outbox keeps its jobs and the state its workers share: SQLite
/// (`SqliteStore`, feature `sqlite`) or PostgreSQL
/// (`PostgresStore`, feature `postgres`).
///
/// Open: a store of your own implements it, builds the jobs it returns with [`Job::new`] and
/// its fields, and runs the contract's checks, [`conformance::check`](super::conformance::check),
/// which both stores here pass; [`Outbox::new`](super::Outbox::new) takes it.
pub trait Store: Send + Sync + fmt::Debug {
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

    /// How many jobs are in each state. Read on every status page load and metrics scrape:
    /// keep the counts as jobs change rather than count the jobs (the built-in stores keep
    /// them with triggers), so a read costs the same with a million jobs as with ten.
    fn counts(&self) -> StoreFuture<'_, Counts>;

    /// How many jobs in each state a call may have run ([`Job::may_have_run`]): one read of a
    /// partial index of those jobs only, so it costs no more with a million other jobs.
    fn may_have_run_counts(&self) -> StoreFuture<'_, Counts>;

    /// What is due at `now`: the pending jobs due, the jobs in flight, and when the next one
    /// is due; of every job, or of the jobs of `events` only. Read from the indexes: no job is
    /// listed, and the count for every job costs no more with a backlog of a million.
    fn due(&self, now: SystemTime, events: Option<Arc<[String]>>) -> StoreFuture<'_, Due>;

    /// Wake-ups for one idle worker: sent when a job may have become due (PostgreSQL: by any
    /// process, through `LISTEN`/`NOTIFY`; SQLite: through this store). See [`Wakeups`].
    fn wakeups(&self) -> Wakeups;
    /// Since when the job due longest has been due: the least `next_at` of the jobs a claim at
    /// `now` takes (pending with `next_at <= now`, or in flight with an ended lease); `None`
    /// when none is due. One read of the claim's index. `now` minus this is the backlog's age,
    /// the figure that tells a backlog that grows from one that is worked off. A job under a
    /// wedged lease (ending past [`MAX_LEASE`](super::MAX_LEASE) from now), which a claim also
    /// takes, has no time it became due and is not counted.
    fn oldest_due(&self, now: SystemTime) -> StoreFuture<'_, Option<SystemTime>>;

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

    /// Pauses `scope` until `until` for `why`, or keeps a pause of it that ends later (and that
    /// pause's reason): a pause is never shortened. Pauses ended at `now` are removed (of every
    /// scope). `why` is cut to [`MAX_PAUSE_REASON`](super::MAX_PAUSE_REASON) bytes.
    ///
    /// `invalid_input` for a blank scope or one over [`MAX_SCOPE`](super::MAX_SCOPE) bytes, or
    /// an end past the year 9999.
    fn pause(
        &self,
        scope: &str,
        until: SystemTime,
        why: &str,
        now: SystemTime,
    ) -> StoreFuture<'_, ()>;

    /// Until when `scope` is paused, if past `now`.
    ///
    /// `invalid_input` for a scope no pause can have (blank, over
    /// [`MAX_SCOPE`](super::MAX_SCOPE) bytes).
    fn paused_until(&self, scope: &str, now: SystemTime) -> StoreFuture<'_, Option<SystemTime>>;

    /// Every scope paused past `now`, with its end and its reason, in the order of the scopes'
    /// text. One read of a table of one row per scope paused lately.
    fn pauses(&self, now: SystemTime) -> StoreFuture<'_, Vec<Pause>>;

    /// Keeps the limit the server stated for the window `scope` (`requests` per `per`, to the
    /// millisecond) at `now`, in place of what was kept before, unless that was stated later
    /// (two workers writing what they read at once: the later reading wins). A worker that
    /// starts later reads it with [`window`](Self::window) and paces as the server said.
    ///
    /// `invalid_input` for a scope as for [`pause`](Self::pause), no request, a window shorter
    /// than a millisecond, or a time past the year 9999.
    fn learn_window(
        &self,
        scope: &str,
        requests: u32,
        per: Duration,
        now: SystemTime,
    ) -> StoreFuture<'_, ()>;

    /// The limit last stated for the window `scope`: `requests` per `per`; `None` when none
    /// was kept.
    ///
    /// `invalid_input` for a scope as for [`paused_until`](Self::paused_until).
    fn window(&self, scope: &str) -> StoreFuture<'_, Option<(u32, Duration)>>;

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

    /// The outage of the service `scope`, if a worker found it down and none found it up since.
    ///
    /// `invalid_input` for a scope as for [`paused_until`](Self::paused_until).
    fn outage(&self, scope: &str) -> StoreFuture<'_, Option<Outage>>;

    /// Every service the fleet holds down (a worker found it down and none found it up since),
    /// with its outage, in the order of the scopes' text. One read of a table of one row per
    /// service the workers reported on.
    fn outages(&self) -> StoreFuture<'_, Vec<ServiceOutage>>;

    /// A worker found the service `scope` down at `now` (a refused answer), down since `since`
    /// (its outage's onset). It is down unless a worker found it up at or after `now` (that
    /// answer is newer), since the earliest onset reported; a new outage's first probe may go
    /// at once. Times are the workers' wall clocks.
    ///
    /// `invalid_input` for a scope as for [`pause`](Self::pause), or a time past the year 9999.
    fn service_down(&self, scope: &str, since: SystemTime, now: SystemTime) -> StoreFuture<'_, ()>;

    /// A worker's attempt to the service `scope` was accepted at `now`: its outage ends for
    /// every worker, unless a worker found it down after `now`.
    ///
    /// `invalid_input` as for [`service_down`](Self::service_down).
    fn service_up(&self, scope: &str, now: SystemTime) -> StoreFuture<'_, ()>;

    /// Takes the turn of the fleet's probe of the service `scope`, down: granted when its
    /// probe time came by `now`, the next then not before `next`; else when the next may go;
    /// [`Probe::Up`] when the service is not down. Atomic across workers and processes.
    ///
    /// `invalid_input` as for [`service_down`](Self::service_down).
    fn take_probe(&self, scope: &str, next: SystemTime, now: SystemTime) -> StoreFuture<'_, Probe>;

    /// The backlog over time, for a status page's chart: how many jobs were not final (created,
    /// and not yet finished) at each of `points` times `from`, `from + step`, `from + 2·step`,
    /// … (a job requeued by an operator counts from its creation, as it is not final now).
    /// `step` is at least 1 ms. Exact at whole seconds; the built-in stores keep the jobs
    /// created and finished by second as they change, so an hour's chart reads 3,600 rows at
    /// most, however many jobs there are.
    fn backlog(&self, from: SystemTime, step: Duration, points: usize)
    -> StoreFuture<'_, Vec<u64>>;
}

/// `scope` if a store may keep it: not blank, at most [`MAX_SCOPE`](super::MAX_SCOPE) bytes.
pub(crate) fn check_scope(scope: &str) -> Result<()> {
    if scope.is_empty() {
        return Err(Error::invalid_input("a scope is blank"));
    }
    if scope.len() > super::MAX_SCOPE {
        return Err(Error::invalid_input(format!(
            "a scope is {} bytes long; at most {} are kept",
            scope.len(),
            super::MAX_SCOPE
        )));
    }
    Ok(())
}

/// `why` cut to [`MAX_PAUSE_REASON`](super::MAX_PAUSE_REASON) bytes, at a character's start.
pub(crate) fn pause_reason(why: &str) -> &str {
    let mut end = why.len().min(super::MAX_PAUSE_REASON);
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    &why[..end]
}

/// The stored figures of a window `requests` per `per`: `invalid_input` for no request or a
/// window shorter than a millisecond.
pub(crate) fn window_row(requests: u32, per: Duration) -> Result<(i64, i64)> {
    let per_ms = i64::try_from(per.as_millis()).unwrap_or(i64::MAX);
    if requests == 0 || per_ms == 0 {
        return Err(Error::invalid_input(format!(
            "a window of {requests} requests per {per:?}: at least one request per millisecond or more is kept"
        )));
    }
    Ok((i64::from(requests), per_ms))
}

/// The figures of a stored window row.
pub(crate) fn window_of(requests: i64, per_ms: i64) -> (u32, Duration) {
    (
        u32::try_from(requests).unwrap_or(u32::MAX),
        Duration::from_millis(u64::try_from(per_ms).unwrap_or(0)),
    )
}

/// The second a time in milliseconds falls in, for the backlog's history: rounded up, so a
/// job created (or finished) at or before a whole second counts at that second.
pub(crate) fn second_of(millis: i64) -> i64 {
    millis.saturating_add(999).div_euclid(1000)
}

/// The backlog at `points` times from `from` every `step` (milliseconds), from the jobs not
/// finished now and the history after `from`'s second, `(second, entered, finished)`: at a
/// time, the jobs not finished now, less those created after it, plus those finished after
/// it. Exact at whole seconds; within the second otherwise.
pub(crate) fn backlog_from_history(
    not_finished: i64,
    rows: impl IntoIterator<Item = (i64, i64, i64)>,
    from: i64,
    step: i64,
    points: usize,
) -> Vec<u64> {
    let mut rows: Vec<(i64, i64, i64)> = rows.into_iter().collect();
    // Newest first: walking the points from the last, each takes the rows after it.
    rows.sort_unstable_by_key(|row| std::cmp::Reverse(row.0));
    let mut counts = vec![0_u64; points];
    let (mut at, mut backlog) = (0, not_finished);
    for (index, count) in counts.iter_mut().enumerate().rev() {
        let point = i64::try_from(index)
            .ok()
            .and_then(|index| index.checked_mul(step))
            .and_then(|offset| from.checked_add(offset))
            .unwrap_or(i64::MAX);
        let second = point.div_euclid(1000);
        while let Some(&(row, entered, finished)) = rows.get(at) {
            if row <= second {
                break;
            }
            backlog = backlog - entered + finished;
            at += 1;
        }
        *count = u64::try_from(backlog).unwrap_or(0);
    }
    counts
}

/// The step of [`Store::backlog`] in milliseconds: 1 at least.
pub(crate) fn backlog_step(step: Duration) -> i64 {
    i64::try_from(step.as_millis()).unwrap_or(i64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::{backlog_from_history, check_scope, pause_reason, second_of, window_row};
    use hodoflow_retry::ErrorKind;

    #[test]
    fn a_scope_is_kept_up_to_200_bytes_and_a_reason_is_cut_at_a_character() {
        assert!(check_scope(&"s".repeat(200)).is_ok());
        for refused in [String::new(), "s".repeat(201)] {
            let error = check_scope(&refused).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        }
        // 199 ASCII bytes, then a two-byte character across the 200th byte: cut before it.
        let why = format!("{}é and more", "w".repeat(199));
        assert_eq!(pause_reason(&why), "w".repeat(199));
        assert_eq!(pause_reason("slow down"), "slow down");
    }

    #[test]
    fn a_window_needs_a_request_and_a_millisecond() {
        use std::time::Duration;
        assert_eq!(
            window_row(10_000, Duration::from_secs(60)).unwrap(),
            (10_000, 60_000)
        );
        assert!(window_row(0, Duration::from_secs(60)).is_err());
        assert!(window_row(1, Duration::from_micros(999)).is_err());
    }

    #[test]
    fn the_backlog_at_a_time_is_now_less_the_jobs_created_after_plus_those_finished_after() {
        // Seconds 11..=13: 2 created at 11, 1 finished at 12, 3 created and 1 finished at 13;
        // 5 jobs not finished now. At 10 s: 5 - 5 + 2 = 2; at 11 s: 5 - 3 + 2 = 4; at 12 s:
        // 5 - 3 + 1 = 3; at 13 s and after: 5.
        let rows = [(11, 2, 0), (12, 0, 1), (13, 3, 1)];
        assert_eq!(
            backlog_from_history(5, rows, 10_000, 1_000, 5),
            vec![2, 4, 3, 5, 5]
        );
        // Between whole seconds a point reads its second's history.
        assert_eq!(backlog_from_history(5, rows, 10_500, 1_000, 2), vec![2, 4]);
        assert_eq!(backlog_from_history(0, [], 0, 1, 3), vec![0, 0, 0]);
        // A time counts at its second rounded up: at or before a whole second, at it.
        assert_eq!(
            (second_of(11_000), second_of(10_001), second_of(0)),
            (11, 11, 0)
        );
    }
}
