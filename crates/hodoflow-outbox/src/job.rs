//! What the outbox stores: a job per event, its state, and the rows a store reads and writes.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

pub use crate::target::{Target, Trigger};
use hodoflow_retry::IdempotencyKey;
use hodoflow_retry::{Error, Result};

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum JobState {
    /// Waiting for its next attempt time (new, or rescheduled after a call ended retryable).
    Pending,
    /// Claimed by a worker, whose lease says until when.
    InFlight,
    /// A webhook delivery the server accepted, with its workflow run ID.
    Accepted,
    /// A webhook delivery the server had already accepted: no second run. Listed for
    /// reconciliation when no earlier call of this job saw the acceptance.
    Duplicate,
    /// A JSON:API write or Modulify call that succeeded (ran now, or replayed).
    Done,
    /// Stopped on a permanent error (a 403, 404, 413, 422, a reused key, ...), with its kind and
    /// last attempt. Never sent again unless requeued.
    Failed,
    /// Still without a definite answer when the server's deduplication horizon came: a send now
    /// could run it a second time, so it is not sent again. A person or a reconciler decides.
    NeedsReconciliation,
}

impl JobState {
    /// Every state, in the order above.
    pub const ALL: [JobState; 7] = [
        JobState::Pending,
        JobState::InFlight,
        JobState::Accepted,
        JobState::Duplicate,
        JobState::Done,
        JobState::Failed,
        JobState::NeedsReconciliation,
    ];

    /// A stable snake_case name, as stored: `"pending"`, `"needs_reconciliation"`, ...
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InFlight => "in_flight",
            Self::Accepted => "accepted",
            Self::Duplicate => "duplicate",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::NeedsReconciliation => "needs_reconciliation",
        }
    }

    /// The state named `name` (as [`as_str`](Self::as_str) writes it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == name)
    }

    /// Whether the job is finished: nothing more is sent for it.
    pub const fn is_final(self) -> bool {
        !matches!(self, Self::Pending | Self::InFlight)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The last attempt of a job that did not end well: the error's kind, status, `x-request-id`
/// and message.
///
/// The workers store what the client kept of the server's words, already cleaned of every
/// secret the client holds (`x-request-id` and the error code a message quotes, see
/// [`Attempt::request_id`](hodoflow_retry::attempt::Attempt::request_id)), with their control and bidirectional
/// formatting characters escaped: the request ID at most 256 bytes, the message at most 1,024.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastError {
    /// The error kind's name, such as `"transport"` or `"forbidden"`.
    pub kind: String,
    /// The status of the last answer, if one came.
    pub status: Option<u16>,
    /// The `x-request-id` of the last answer.
    pub request_id: Option<String>,
    /// The error's message.
    pub message: String,
}

/// One job as stored.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Job {
    /// The store's ID of the job.
    pub id: i64,
    /// The producer's event ID: unique in the outbox.
    pub event_id: String,
    /// Where it goes.
    pub target: Target,
    /// The body, byte for byte.
    pub body: Bytes,
    /// The delivery ID or `Idempotency-Key` every attempt of every call carries, derived from
    /// the event ID once, at enqueue.
    pub identity: IdempotencyKey,
    /// Where it is.
    pub state: JobState,
    /// Calls made (each one [`RetryingClient`](hodoflow_retry::RetryingClient) call of one or more
    /// attempts).
    pub calls: u32,
    /// Requests sent over all calls.
    pub attempts: u32,
    /// When it is due: its next attempt time while pending; its lease's end while in flight
    /// (when another worker may reclaim it).
    pub next_at: SystemTime,
    /// When it was enqueued.
    pub created_at: SystemTime,
    /// When its first attempt was sent: the deduplication horizon counts from here.
    pub first_sent_at: Option<SystemTime>,
    /// When it reached a final state.
    pub finished_at: Option<SystemTime>,
    /// The workflow run ID of an accepted delivery.
    pub run_id: Option<String>,
    /// The last call's error, if it did not end well.
    pub last_error: Option<LastError>,
    /// The worker holding the job, while in flight.
    pub lease_owner: Option<String>,
    /// Until when the worker's claim holds; after it, another worker reclaims the job.
    pub lease_until: Option<SystemTime>,
    /// How many times the job was claimed: a record for an older claim is refused.
    pub claim: u64,
    /// Whether a call of the job may have run it without saying so: an attempt was sent and
    /// not answered, or the server said the job's key was in progress. Sticky: once set, it
    /// stays set through later calls and an operator's requeue, so a job that may have run is
    /// never shown as one that did not, and never ends plain [`JobState::Failed`].
    pub may_have_run: bool,
}

impl Job {
    /// The job `id` of `new` as it is stored first: pending, due at its creation, no call made
    /// and never claimed. A store of your own builds every job it returns from this and the
    /// fields it keeps.
    pub fn new(id: i64, new: NewJob) -> Self {
        Self {
            id,
            event_id: new.event_id,
            target: new.target,
            body: new.body,
            identity: new.identity,
            state: JobState::Pending,
            calls: 0,
            attempts: 0,
            next_at: new.now,
            created_at: new.now,
            first_sent_at: None,
            finished_at: None,
            run_id: None,
            last_error: None,
            lease_owner: None,
            lease_until: None,
            claim: 0,
            may_have_run: false,
        }
    }

    /// The job `id` a store made of `new` at `now`, the millisecond it wrote as its creation:
    /// what reading the row back would return.
    pub(crate) fn stored(id: i64, new: NewJob, now: i64) -> Self {
        Self::new(
            id,
            NewJob {
                now: from_millis(now),
                ..new
            },
        )
    }
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id)
            .field("event_id", &self.event_id)
            .field("target", &self.target)
            .field("body", &crate::target::BodyLen(self.body.len()))
            .field("identity", &self.identity)
            .field("state", &self.state)
            .field("calls", &self.calls)
            .field("attempts", &self.attempts)
            .field("next_at", &self.next_at)
            .field("run_id", &self.run_id)
            .field("last_error", &self.last_error)
            .field("may_have_run", &self.may_have_run)
            .finish_non_exhaustive()
    }
}

/// A job to insert.
#[derive(Clone, PartialEq, Eq)]
pub struct NewJob {
    /// The producer's event ID.
    pub event_id: String,
    /// Where it goes.
    pub target: Target,
    /// The body.
    pub body: Bytes,
    /// The identity derived from the event ID.
    pub identity: IdempotencyKey,
    /// Now: its creation time, and when it is first due.
    pub now: SystemTime,
}

impl fmt::Debug for NewJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewJob")
            .field("event_id", &self.event_id)
            .field("target", &self.target)
            .field("body", &crate::target::BodyLen(self.body.len()))
            .finish_non_exhaustive()
    }
}

/// What a worker writes back for a job it claimed: its new state and what the call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The new state: pending (rescheduled) or final.
    pub state: JobState,
    /// When it is due again (pending), or now.
    pub next_at: SystemTime,
    /// Requests the call sent.
    pub attempts_added: u32,
    /// When the first attempt of the job was sent (unchanged once set).
    pub first_sent_at: Option<SystemTime>,
    /// The run ID of an accepted delivery.
    pub run_id: Option<String>,
    /// The call's error.
    pub last_error: Option<LastError>,
    /// When the job reached a final state.
    pub finished_at: Option<SystemTime>,
    /// The call may have run the job ([`Error::may_have_run`](hodoflow_retry::Error::may_have_run)): sets [`Job::may_have_run`],
    /// which no record clears.
    pub may_have_run: bool,
}

/// How many jobs are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counts {
    /// [`JobState::Pending`].
    pub pending: u64,
    /// [`JobState::InFlight`].
    pub in_flight: u64,
    /// [`JobState::Accepted`].
    pub accepted: u64,
    /// [`JobState::Duplicate`].
    pub duplicate: u64,
    /// [`JobState::Done`].
    pub done: u64,
    /// [`JobState::Failed`].
    pub failed: u64,
    /// [`JobState::NeedsReconciliation`].
    pub needs_reconciliation: u64,
}

impl Counts {
    /// The count of `state`.
    pub fn of(&self, state: JobState) -> u64 {
        match state {
            JobState::Pending => self.pending,
            JobState::InFlight => self.in_flight,
            JobState::Accepted => self.accepted,
            JobState::Duplicate => self.duplicate,
            JobState::Done => self.done,
            JobState::Failed => self.failed,
            JobState::NeedsReconciliation => self.needs_reconciliation,
        }
    }

    /// Adds `count` jobs in `state`: how a store sums what it read.
    pub fn add(&mut self, state: JobState, count: u64) {
        let slot = match state {
            JobState::Pending => &mut self.pending,
            JobState::InFlight => &mut self.in_flight,
            JobState::Accepted => &mut self.accepted,
            JobState::Duplicate => &mut self.duplicate,
            JobState::Done => &mut self.done,
            JobState::Failed => &mut self.failed,
            JobState::NeedsReconciliation => &mut self.needs_reconciliation,
        };
        *slot += count;
    }

    /// Every job.
    pub fn total(&self) -> u64 {
        JobState::ALL.into_iter().map(|state| self.of(state)).sum()
    }
}

/// What is due in an outbox (or among some of its jobs) at one moment: what an idle worker
/// sleeps by, and what tells a command the outbox is idle, read from the store's indexes
/// without listing a job ([`Store::due`](super::Store::due)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Due {
    /// Pending jobs due now.
    pub due: u64,
    /// Jobs in flight, under a live lease or one that ended (their worker died; they are due
    /// again).
    pub in_flight: u64,
    /// When the next pending or in-flight job is due (a job in flight: its lease's end); `None`
    /// when there is none.
    pub next_at: Option<SystemTime>,
}

impl Due {
    /// `due` pending jobs due, `in_flight` jobs in flight, the next due at `next_at`.
    pub fn new(due: u64, in_flight: u64, next_at: Option<SystemTime>) -> Self {
        Self {
            due,
            in_flight,
            next_at,
        }
    }

    /// Nothing is due and nothing is in flight: a run until idle may stop.
    pub fn is_idle(&self) -> bool {
        self.due == 0 && self.in_flight == 0
    }
}

/// A scope a server's signal closed, shared by every worker of the store: which one, until
/// when, and why ([`Store::pauses`](super::Store::pauses)).
///
/// The scope is the worker's name for what the signal closed (a credential, one trigger, one
/// vendor endpoint), never a secret; the reason is the worker's sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pause {
    /// What is paused, as the worker named it.
    pub scope: String,
    /// Until when.
    pub until: SystemTime,
    /// Why, in the worker's words (the reason of the pause whose end was kept).
    pub why: String,
}

impl Pause {
    /// A pause of `scope` until `until`, for `why`.
    pub fn new(scope: impl Into<String>, until: SystemTime, why: impl Into<String>) -> Self {
        Self {
            scope: scope.into(),
            until,
            why: why.into(),
        }
    }
}

/// A slot of a shared window, granted or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Granted: release it with its ID when the answer came.
    Granted(i64),
    /// Every slot is taken; the first frees at this time.
    FreeAt(SystemTime),
}

/// A service the fleet holds down, as a store keeps it ([`Store::outage`](crate::Store::outage)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    since: SystemTime,
    probe_at: SystemTime,
}

impl Outage {
    /// Down since `since` (its onset), its next probe not before `probe_at`.
    pub fn new(since: SystemTime, probe_at: SystemTime) -> Self {
        Self { since, probe_at }
    }

    /// The outage's onset: the first refused answer a process found it down by.
    pub fn since(&self) -> SystemTime {
        self.since
    }

    /// The earliest the fleet's next probe of the service may go.
    pub fn probe_at(&self) -> SystemTime {
        self.probe_at
    }
}

/// A service the fleet holds down, by name: which one, and its outage
/// ([`Store::outages`](crate::Store::outages)).
///
/// The scope is the worker's name for the service (a vendor's surface at one endpoint), never a
/// secret.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceOutage {
    /// The service, as the worker named it.
    pub scope: String,
    /// Since when it is down, and the earliest its next probe may go.
    pub outage: Outage,
}

impl ServiceOutage {
    /// The service `scope`, held down in `outage`.
    pub fn new(scope: impl Into<String>, outage: Outage) -> Self {
        Self {
            scope: scope.into(),
            outage,
        }
    }
}

/// The turn of a fleet's probe of a service down ([`Store::take_probe`](crate::Store::take_probe)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// This attempt is the fleet's probe.
    Granted,
    /// Another process took the turn: the next goes no sooner than this.
    NotBefore(SystemTime),
    /// The service is not held down (any more): send.
    Up,
}

/// Milliseconds since the Unix epoch, as stored.
pub(crate) fn millis(time: SystemTime) -> i64 {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// The last millisecond a store writes: 9999-12-31T23:59:59.999Z.
pub(crate) const LAST_STORED_MILLIS: i64 = 253_402_300_799_999;

/// `time` as stored milliseconds; `invalid_input` past the year 9999, which no store writes (a
/// lease ending at `i64::MAX` milliseconds once wedged an outbox, shown as the year 292278994).
pub(crate) fn stored_millis(time: SystemTime, what: &str) -> Result<i64> {
    let stored = millis(time);
    if stored > LAST_STORED_MILLIS {
        return Err(Error::invalid_input(format!(
            "the {what} is past the year 9999: the outbox stores no such time"
        )));
    }
    Ok(stored)
}

/// Checks the times of `record` with [`stored_millis`].
pub(crate) fn check_record(record: &Record) -> Result<()> {
    stored_millis(record.next_at, "job's next attempt time")?;
    if let Some(first) = record.first_sent_at {
        stored_millis(first, "job's first send time")?;
    }
    if let Some(finished) = record.finished_at {
        stored_millis(finished, "job's finish time")?;
    }
    Ok(())
}

/// The end of a claim at `now` under `lease`, and the latest lease end a claim may find (`now`
/// plus [`MAX_LEASE`](super::MAX_LEASE)): a job in flight past it is taken as expired.
pub(crate) fn claim_bounds(now: SystemTime, lease: Duration) -> Result<(i64, i64, i64)> {
    let until = now
        .checked_add(lease)
        .ok_or_else(|| Error::invalid_input("the lease end is past the year 9999"))?;
    let until = stored_millis(until, "lease end")?;
    let now = millis(now);
    let wedged_after =
        now.saturating_add(i64::try_from(super::MAX_LEASE.as_millis()).unwrap_or(i64::MAX));
    Ok((now, until, wedged_after))
}

/// The time of stored milliseconds.
pub(crate) fn from_millis(millis: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}
