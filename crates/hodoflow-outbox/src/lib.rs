//! A durable outbox for [`hodoflow_retry`]: deliveries that survive crashes, restarts and long
//! outages, with a store from feature `sqlite` or `postgres` (or one of your own).
//!
//! Built on the SDK's public API only, as a crate of yours would be: its clients deliver the
//! jobs ([`Deliver`], one per vendor, yours too), and the store's pauses and windows reach
//! their calls through the SDK's [`Fleet`](hodoflow_retry::limit::Fleet) hook. The
//! [`guide`] walks through it.
//!
//! Hodoflow's webhook sender guide: "Generate it once for a logical event, persist it with the
//! outbound job, and reuse it across every retry of that event." [`Outbox::enqueue`] persists the
//! job with its identity (derived from the event ID) in one statement; enqueueing an event ID again
//! returns the job already stored, so producers may retry too. [`Workers`] claim due jobs under a
//! lease, deliver them through a [`RetryingClient`](hodoflow_retry::RetryingClient), and record the result:
//! accepted with its run ID, duplicate, done, failed (with its kind and last attempt), or
//! rescheduled on the [`LongSchedule`] with the next attempt time and the attempt count. A job
//! whose worker died is reclaimed when its lease runs out, and sent again under the same identity,
//! which the server deduplicates.
//!
//! Never after the horizon: a job is sent only while the server still remembers its identity
//! (7 days for webhook deliveries, 24 hours for JSON:API and Modulify keys, configurable); one
//! still without a definite answer then stops as [`JobState::NeedsReconciliation`] (see
//! [`schedule`](LongSchedule)).
//!
//! Fleet state lives in the same store, by scope: a server's signal pauses what it names (a
//! credential, a trigger, a vendor endpoint) for every worker, with the reason
//! ([`Outbox::pauses`] lists them), and a trigger's window (100 per 60 s by default) is shared
//! with the limit the server stated for it, so four workers do not send 400 a minute to one
//! trigger, and a worker started later paces as the server said.
//!
//! A job a call may have run (an attempt sent and unanswered, or its key in progress) keeps
//! that mark ([`Job::may_have_run`]) across later calls: if a later call ends on a permanent
//! answer, the job needs reconciliation, not a plain failure, since the earlier call may have
//! done what it asked.
//!
//! # Backends, and why these drivers
//!
//! - `SqliteStore` (feature `sqlite`): a file, in WAL mode, the embedded default. The
//!   driver is `rusqlite` with SQLite compiled in (`bundled`): the most used SQLite binding,
//!   maintained, synchronous (each statement runs on tokio's blocking pool), and no system
//!   library to install. `sqlx` would bring an async pool and a macro layer the outbox does not
//!   need, and a second SQLite build next to any `rusqlite` the user already has.
//! - `PostgresStore` (feature `postgres`): many processes on many machines, claims with
//!   `FOR UPDATE SKIP LOCKED`. The driver is `tokio-postgres`: the async PostgreSQL client most
//!   crates build on, maintained with `rust-postgres`, with no pool or ORM on top.
//!
//! Both apply their versioned migrations on open and pass the same test suite
//! ([`conformance`]).

#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(
        dead_code,
        unused_imports,
        reason = "the helpers the stores share serve a backend: the crate without one builds the core (as the fuzz targets do)"
    )
)]

pub mod conformance;
mod deliver;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
mod job;
#[cfg(feature = "metrics")]
pub(crate) mod meter;
#[cfg(feature = "metrics")]
mod metrics;
mod page;
mod schedule;
mod store;
mod target;
mod wake;
mod worker;

pub mod guide {
    //! The outbox's guide: events that survive crashes and long outages, many workers on one
    //! server, your own store or vendor. Its Rust snippets are doctests.
    #![doc = include_str!("../GUIDE.md")]
}

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use hodoflow_retry::IdempotencyKey;
use hodoflow_retry::clock::{Clock, TokioClock};
use hodoflow_retry::{Error, Result};

pub use crate::target::{Deliver, DeliverFuture, Delivered, JobCall, Sent};
pub use job::{
    Counts, Due, Job, JobState, LastError, NewJob, Outage, Pause, Probe, Record, ServiceOutage,
    Slot, Target, Trigger,
};
pub use page::Cursor;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, StoreTimeouts};
pub use schedule::LongSchedule;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use store::{Store, StoreFuture};
pub use wake::{Waker, Wakeups};
pub use worker::{
    DEFAULT_CONCURRENCY, DEFAULT_LEASE, DEFAULT_POLL, DEFAULT_SAFETY_POLL, FAILURES_TO_HOLD,
    JobDone, KEY_HORIZON, MAX_LEASE, OUTAGE_READ_EVERY, PAUSE_READ_EVERY, RunReport,
    WEBHOOK_HORIZON, WorkerBuilder, Workers,
};

pub(crate) use job::{check_record, claim_bounds, from_millis, millis, stored_millis};
pub(crate) use store::{check_scope, pause_reason, window_of, window_row};

/// The largest body a job may hold: the webhook and JSON:API limit of Hodoflow and Modulify's
/// (1,048,576 bytes; `docs/wire-contract.md`).
pub const MAX_BODY: usize = hodoflow_retry::webhook::DEFAULT_WEBHOOK_BODY_LIMIT;

/// The longest event ID.
pub const MAX_EVENT_ID: usize = 1024;

/// The longest scope a store keeps a pause or a window for, in bytes: a scope names what a
/// server's signal closed (a credential, a trigger, a vendor endpoint) and is shown on the
/// status page, so it is a short name, never a secret.
pub const MAX_SCOPE: usize = 200;

/// The longest reason a store keeps with a pause, in bytes; a longer one is cut.
pub const MAX_PAUSE_REASON: usize = 200;

/// A durable outbox over a [`Store`]. Cheap to clone.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN, MockServer};
/// use hodoflow_retry::HodoflowClient;
/// use hodoflow_outbox::{JobState, Outbox, Target};
///
/// let server = MockServer::start().await?;
/// let client = HodoflowClient::builder(server.base_url())
///     .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
///     .build()?;
/// let dir = std::env::temp_dir().join(format!("outbox-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let outbox = Outbox::sqlite(dir.join("outbox.db")).await?;
///
/// let job = outbox
///     .enqueue("order-4711:shipped", Target::webhook(DEMO_TRIGGER_TOKEN), r#"{"order":4711}"#)
///     .await?;
/// assert_eq!(job.state, JobState::Pending);
///
/// outbox.workers(client).run_until_idle().await?;
/// let job = outbox.job("order-4711:shipped").await?.expect("stored");
/// assert_eq!(job.state, JobState::Accepted);
/// assert_eq!(server.ledger().runs_for_delivery(job.identity.as_str()).len(), 1);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Outbox {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    /// The trigger tokens this process knows, by their references: the jobs store references
    /// only, and the workers resolve them here.
    pub(crate) triggers: Arc<Triggers>,
    /// What this process's pools recorded and its enqueues took (feature `metrics`).
    #[cfg(feature = "metrics")]
    pub(crate) meter: Arc<meter::OutboxMeter>,
}

impl Outbox {
    /// An outbox over `store`, on the system clock.
    pub fn new(store: impl Store + 'static) -> Self {
        Self {
            store: Arc::new(store),
            clock: Arc::new(TokioClock),
            triggers: Arc::default(),
            #[cfg(feature = "metrics")]
            meter: Arc::default(),
        }
    }

    /// Schedules by `clock`'s wall-clock time instead of the runtime's (a
    /// [`ManualClock`](hodoflow_retry::clock::ManualClock) in tests of the schedule and the horizon).
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// An outbox in the SQLite file at `path`, created if absent, migrated on open.
    ///
    /// # Errors
    ///
    /// When the file cannot be opened or migrated.
    #[cfg(feature = "sqlite")]
    pub async fn sqlite(path: impl AsRef<std::path::Path>) -> Result<Self> {
        Ok(Self::new(SqliteStore::open(path).await?))
    }

    /// An outbox in the PostgreSQL database at `url` (`postgres://…`), migrated on open.
    ///
    /// # Errors
    ///
    /// When the database cannot be reached or migrated.
    #[cfg(feature = "postgres")]
    pub async fn postgres(url: &str) -> Result<Self> {
        Ok(Self::new(PostgresStore::connect(url).await?))
    }

    /// [`postgres`](Self::postgres) with these bounds on every wait for the database.
    ///
    /// # Errors
    ///
    /// When the database cannot be reached or migrated, or does not answer in time.
    #[cfg(feature = "postgres")]
    pub async fn postgres_with(url: &str, timeouts: StoreTimeouts) -> Result<Self> {
        Ok(Self::new(PostgresStore::connect_with(url, timeouts).await?))
    }

    /// Tells this outbox's workers the token of a trigger, so they can deliver its jobs: a job
    /// stores its trigger's reference, never the token ([`Trigger`]). The
    /// tokens of the jobs this handle enqueued (and its clones) are known already; a worker
    /// process that did not enqueue them learns each token here, from its own configuration
    /// (an environment variable, a file, a secret store). A job whose token its worker does not
    /// know is not sent: it waits, pending, with that error, and is tried again a minute later.
    ///
    /// # Errors
    ///
    /// `invalid_input` for a token that could never be sent (not one path segment).
    pub fn add_trigger_token(&self, token: impl Into<hodoflow_retry::Secret>) -> Result<()> {
        let token = token.into();
        hodoflow_retry::HodoflowClient::check_trigger_token(token.expose())?;
        self.triggers.add(token);
        Ok(())
    }

    /// The store.
    pub fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// Persists a job for `event_id`, with the identity derived from it
    /// ([`IdempotencyKey::from_operation_id`]), due now. An event ID already stored is a no-op
    /// that returns the stored job, whatever `target` and `body` say now.
    ///
    /// The derivation is the one to use for a direct send of the same event:
    /// `DeliveryId::new(IdempotencyKey::from_operation_id(event_id))`, so an event sent directly
    /// and then through the outbox runs once. Where your service derives identities its own
    /// way, pass yours with [`enqueue_with_identity`](Self::enqueue_with_identity).
    ///
    /// # Errors
    ///
    /// `invalid_input`, before anything is stored, for a blank or over-long event ID, one that
    /// holds a NUL or another control character or the job's own trigger token, a target
    /// that cannot be sent (a trigger token or Modulify method that is not one path segment, a
    /// write that is not an unsafe method under `/api/json/`), or a body over [`MAX_BODY`];
    /// the store's error when it fails.
    pub async fn enqueue(
        &self,
        event_id: &str,
        target: Target,
        body: impl Into<Bytes>,
    ) -> Result<Job> {
        Ok(self.enqueue_new(event_id, target, body).await?.0)
    }

    /// [`enqueue`](Self::enqueue), saying whether the job was stored now (`true`) or existed.
    ///
    /// # Errors
    ///
    /// As for [`enqueue`](Self::enqueue).
    pub async fn enqueue_new(
        &self,
        event_id: &str,
        target: Target,
        body: impl Into<Bytes>,
    ) -> Result<(Job, bool)> {
        let identity = IdempotencyKey::from_operation_id(event_id);
        self.store_new(event_id, identity, target, body.into())
            .await
    }

    /// [`enqueue`](Self::enqueue) with the identity the job is sent under: the delivery ID of a
    /// webhook delivery (`delivery_id.key().clone()`), the `Idempotency-Key` of a write or a
    /// Modulify call. For a service that already sends these events directly under identities
    /// of its own: the job keeps them, so an event sent both ways runs once. An event ID already
    /// stored is a no-op that returns the stored job, its identity unchanged.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(outbox: hodoflow_outbox::Outbox) -> hodoflow_retry::Result<()> {
    /// use hodoflow_retry::IdempotencyKey;
    /// use hodoflow_outbox::Target;
    ///
    /// // The key this service has always sent for order 4711's creation.
    /// let key = IdempotencyKey::new("orders-v2:4711:create")?;
    /// let target = Target::create("/api/json/v1/orders");
    /// let job = outbox
    ///     .enqueue_with_identity("order-4711", key.clone(), target, r#"{"n":4711}"#)
    ///     .await?;
    /// assert_eq!(job.identity, key);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As for [`enqueue`](Self::enqueue).
    pub async fn enqueue_with_identity(
        &self,
        event_id: &str,
        identity: IdempotencyKey,
        target: Target,
        body: impl Into<Bytes>,
    ) -> Result<Job> {
        Ok(self
            .store_new(event_id, identity, target, body.into())
            .await?
            .0)
    }

    /// Checks and stores one job: the job, and whether it was stored now.
    async fn store_new(
        &self,
        event_id: &str,
        identity: IdempotencyKey,
        target: Target,
        body: Bytes,
    ) -> Result<(Job, bool)> {
        check_job(event_id, &target, &body)?;
        identity.check_sendable()?;
        self.triggers.learn(&target);
        let job = NewJob {
            event_id: event_id.to_owned(),
            identity,
            target,
            body,
            now: self.clock.wall(),
        };
        #[cfg(feature = "metrics")]
        let started = tokio::time::Instant::now();
        let stored = self.store.enqueue(job).await?;
        #[cfg(feature = "metrics")]
        self.meter.enqueued(
            meter::Enqueue::One,
            usize::from(stored.1),
            tokio::time::Instant::now().saturating_duration_since(started),
        );
        Ok(stored)
    }

    /// Stores a job for each of `events` (event ID, target, body) in one transaction: all of
    /// them, or none. As for [`enqueue`](Self::enqueue), an event ID already stored (or earlier
    /// in `events`) is a no-op that returns the stored job; the flag says whether each job was
    /// stored now. Every event is checked before anything is stored.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(outbox: hodoflow_outbox::Outbox) -> hodoflow_retry::Result<()> {
    /// use hodoflow_outbox::Target;
    ///
    /// let events = (0..1_000).map(|n| {
    ///     (format!("order-{n}"), Target::create("/api/json/v1/orders"), format!(r#"{{"n":{n}}}"#))
    /// });
    /// let stored = outbox.enqueue_many(events).await?;
    /// let new = stored.iter().filter(|(_, now)| *now).count();
    /// # let _ = new;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// `invalid_input` or `payload_too_large` for the first event that could never be sent (as
    /// [`enqueue`](Self::enqueue) says), before anything is stored; the store's error.
    pub async fn enqueue_many<E, B>(
        &self,
        events: impl IntoIterator<Item = (E, Target, B)>,
    ) -> Result<Vec<(Job, bool)>>
    where
        E: Into<String>,
        B: Into<Bytes>,
    {
        let now = self.clock.wall();
        let mut jobs = Vec::new();
        for (event_id, target, body) in events {
            let event_id = event_id.into();
            let body = body.into();
            check_job(&event_id, &target, &body)?;
            self.triggers.learn(&target);
            jobs.push(NewJob {
                identity: IdempotencyKey::from_operation_id(&event_id),
                event_id,
                target,
                body,
                now,
            });
        }
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        #[cfg(feature = "metrics")]
        let started = tokio::time::Instant::now();
        let stored = self.store.enqueue_many(jobs).await?;
        #[cfg(feature = "metrics")]
        self.meter.enqueued(
            meter::Enqueue::Many,
            stored.iter().filter(|(_, now)| *now).count(),
            tokio::time::Instant::now().saturating_duration_since(started),
        );
        Ok(stored)
    }

    /// The job of `event_id`.
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn job(&self, event_id: &str) -> Result<Option<Job>> {
        self.store.get(event_id).await
    }

    /// How many jobs are in each state.
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn counts(&self) -> Result<Counts> {
        self.store.counts().await
    }

    /// How many jobs in each state a call may have run ([`Job::may_have_run`]).
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn may_have_run_counts(&self) -> Result<Counts> {
        self.store.may_have_run_counts().await
    }

    /// Every scope paused now, with its end and its reason ([`Store::pauses`]).
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn pauses(&self) -> Result<Vec<Pause>> {
        self.store.pauses(self.clock.wall()).await
    }

    /// Every service the fleet holds down now, with since when and its next probe
    /// ([`Store::outages`]).
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn outages(&self) -> Result<Vec<ServiceOutage>> {
        self.store.outages().await
    }

    /// What is due now, of every job or of the jobs of `events` only: the pending jobs due, the
    /// jobs in flight and when the next one is due, read from the store's indexes without
    /// listing a job. [`Due::is_idle`] is what a run until idle waits for.
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn due(&self, events: Option<Arc<[String]>>) -> Result<Due> {
        self.store.due(self.clock.wall(), events).await
    }

    /// The backlog over the last `window`: how many jobs were not final at each of `points`
    /// evenly spaced times, the first `window` ago, the last now ([`Store::backlog`]).
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn backlog(&self, window: Duration, points: usize) -> Result<Vec<u64>> {
        let now = self.clock.wall();
        let gaps = u32::try_from(points.saturating_sub(1))
            .unwrap_or(u32::MAX)
            .max(1);
        let step = window / gaps;
        let from = now.checked_sub(step * gaps).unwrap_or(now);
        self.store.backlog(from, step, points).await
    }

    /// Up to `limit` jobs in `state` (all states when `None`), oldest first.
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn list(&self, state: Option<JobState>, limit: usize) -> Result<Vec<Job>> {
        self.store.list(state, limit).await
    }

    /// A page of up to `limit` jobs in `state` (all states when `None`) after `after` (from the
    /// first when `None`), in the order of `(state, next_at, id)`, and the cursor of the next
    /// page, `None` after the last. A page costs the same at any depth; [`Cursor`] says what a
    /// walk over the pages guarantees while jobs change state.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(outbox: hodoflow_outbox::Outbox) -> hodoflow_retry::Result<()> {
    /// let mut after = None;
    /// loop {
    ///     let (jobs, next) = outbox.list_page(None, after.as_ref(), 100).await?;
    ///     for job in &jobs {
    ///         println!("{} {}", job.event_id, job.state);
    ///     }
    ///     match next {
    ///         Some(cursor) => after = Some(cursor),
    ///         None => break,
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// `invalid_input` when `after` continues a listing of another state than `state`; the
    /// store's error.
    pub async fn list_page(
        &self,
        state: Option<JobState>,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<Job>, Option<Cursor>)> {
        self.store.list_page(state, after, limit).await
    }

    /// The checks [`enqueue`](Self::enqueue) makes of one event, alone: for a producer that
    /// checks a whole file before it stores any of it in several
    /// [`enqueue_many`](Self::enqueue_many) batches.
    ///
    /// # Errors
    ///
    /// As for [`enqueue`](Self::enqueue): `invalid_input` or `payload_too_large`.
    pub fn check(event_id: &str, target: &Target, body: &[u8]) -> Result<()> {
        check_job(event_id, target, body)
    }

    /// The jobs a person or a reconciler must look at: those that need reconciliation (no
    /// definite answer before the horizon) and the duplicates (the server had accepted the
    /// event on an attempt whose answer never came, so its run ID is unknown here), up to
    /// `limit` of each.
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn reconciliation(&self, limit: usize) -> Result<Vec<Job>> {
        let mut jobs = self
            .store
            .list(Some(JobState::NeedsReconciliation), limit)
            .await?;
        jobs.extend(self.store.list(Some(JobState::Duplicate), limit).await?);
        Ok(jobs)
    }

    /// Makes the job of `event_id` pending and due now, whatever its state: an operator's
    /// decision, for a failed job or one that needs reconciliation. Its horizon starts again:
    /// requeue a job that needs reconciliation only after making sure the server did not run
    /// it (a send now is a new delivery as far as the server may remember). `None` when there
    /// is none.
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn retry(&self, event_id: &str) -> Result<Option<Job>> {
        self.store.requeue(event_id, self.clock.wall()).await
    }

    /// Workers that deliver this outbox's jobs through `client`, a vendor's client (a
    /// [`HodoflowClient`](hodoflow_retry::HodoflowClient), a [`ModulifyClient`](hodoflow_retry::ModulifyClient))
    /// whose limits, retry budget and stats the workers share; more vendors' clients and your
    /// own with [`WorkerBuilder::deliver`].
    pub fn workers<C>(&self, client: C) -> WorkerBuilder
    where
        C: Deliver + AsRef<hodoflow_retry::RetryingClient> + 'static,
    {
        WorkerBuilder::new(self.clone(), client.as_ref().clone(), Arc::new(client))
    }
}

/// The checks of [`Outbox::enqueue`].
fn check_job(event_id: &str, target: &Target, body: &[u8]) -> Result<()> {
    check_event_id(event_id)?;
    if let Target::Webhook { trigger } = target
        && let Some(token) = trigger.token()
        && token.expose().len() >= 4
        && event_id.contains(token.expose())
    {
        return Err(Error::invalid_input(
            "the event ID holds the job's trigger token, a secret: the event ID is shown \
             wherever the job is (logs, listings, the status page); choose one without it",
        ));
    }
    if body.len() > MAX_BODY {
        return Err(Error::new(
            hodoflow_retry::ErrorKind::PayloadTooLarge,
            format!(
                "payload too large: the body of {} bytes is over the {MAX_BODY}-byte limit; nothing was stored",
                body.len()
            ),
        ));
    }
    target.check()
}

/// The checks of an event ID wherever one enters the outbox (both stores make them too): not
/// blank, at most [`MAX_EVENT_ID`] bytes, and printable text, without a NUL or any other
/// control character (it names the job in URLs, logs and listings; PostgreSQL cannot store a
/// NUL at all).
pub(crate) fn check_event_id(event_id: &str) -> Result<()> {
    if event_id.trim().is_empty() {
        return Err(Error::invalid_input("the event ID is blank"));
    }
    if event_id.len() > MAX_EVENT_ID {
        return Err(Error::invalid_input(format!(
            "the event ID is {} bytes long; at most {MAX_EVENT_ID} are allowed",
            event_id.len()
        )));
    }
    if let Some((at, c)) = event_id.char_indices().find(|(_, c)| c.is_control()) {
        let what = match c {
            '\0' => "a NUL character (U+0000)".to_owned(),
            c => format!("a control character (U+{:04X})", u32::from(c)),
        };
        return Err(Error::invalid_input(format!(
            "the event ID holds {what} at byte {at}: an event ID is printable text"
        )));
    }
    Ok(())
}

/// The trigger tokens a process knows, by the references its jobs store.
#[derive(Default)]
pub(crate) struct Triggers(
    std::sync::RwLock<std::collections::HashMap<uuid::Uuid, hodoflow_retry::Secret>>,
);

impl std::fmt::Debug for Triggers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known = self.0.read().map_or(0, |known| known.len());
        f.debug_struct("Triggers").field("known", &known).finish()
    }
}

impl Triggers {
    fn add(&self, token: hodoflow_retry::Secret) {
        let reference = job::Trigger::reference_of(token.expose());
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(reference, token);
    }

    /// Remembers the token of `target`, a webhook job's being enqueued.
    fn learn(&self, target: &Target) {
        if let Target::Webhook { trigger } = target
            && let Some(token) = trigger.token()
        {
            let reference = trigger.reference();
            let known = self
                .0
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .contains_key(&reference);
            if !known {
                self.add(token.clone());
            }
        }
    }

    /// `target` with its trigger's token, where it needs one and this process knows it; the
    /// error of an unresolved trigger otherwise.
    pub(crate) fn resolve(&self, target: &Target) -> Result<Option<Target>> {
        let Target::Webhook { trigger } = target else {
            return Ok(None);
        };
        if trigger.token().is_some() {
            return Ok(None);
        }
        let known = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&trigger.reference())
            .cloned();
        match known {
            Some(token) => Ok(Some(Target::Webhook {
                trigger: trigger.resolved(token),
            })),
            None => Err(crate::target::unresolved(trigger)),
        }
    }
}
