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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use crate::budget::Budget;
use crate::client::RetryingClient;
use crate::error::{Error, Result};
use crate::fleet::{Fleet, FleetFuture};
use crate::key::DeliveryId;
use crate::modulify::ModulifyClient;
use crate::outcome::WebhookOutcome;
use crate::stats::Holding;
use crate::trigger_limit::{PacingSource, TriggerKey, TriggerLimit, TriggerPacing};

use super::job::{Job, JobState, LastError, Record, Slot, Target};
use super::schedule::{LongSchedule, horizon_end, may_send};
use super::store::{Store, StoreFuture};
use super::{Outbox, WallClock};

/// The default number of deliveries a worker runs at once.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// The default lease of a claimed job.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(120);
/// The default time between claims when nothing was due.
pub const DEFAULT_POLL: Duration = Duration::from_millis(200);
/// The most records a worker writes in one transaction.
const MAX_RECORD_BATCH: usize = 256;
/// How long a worker trusts the credential's shared pause it last read: another worker's 429
/// reaches it within this.
pub const PAUSE_READ_EVERY: Duration = Duration::from_millis(100);
/// The longest wait between claims after the store failed.
const CLAIM_RETRY_MAX: Duration = Duration::from_secs(10);
/// The default horizon of a webhook delivery ID (document 001: accepted identities are kept for
/// 7 days).
pub const WEBHOOK_HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);
/// The default horizon of a JSON:API or Modulify key (documents 000 and 004: 24 hours).
pub const KEY_HORIZON: Duration = Duration::from_secs(24 * 3600);
/// The longest lease and horizon a worker accepts: 7 days, the longest a server keeps an
/// identity (document 001). A job in flight under a lease ending later than this from now was
/// claimed with a lease no worker can hold: it is taken as expired, claimed again and
/// `outbox retry` requeues it (a lease of `i64::MAX` milliseconds once wedged an outbox).
pub const MAX_LEASE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Configures the workers of an [`Outbox`]; start them with [`spawn`](Self::spawn) or
/// [`run_until_idle`](Self::run_until_idle).
#[derive(Debug)]
#[must_use]
pub struct WorkerBuilder {
    outbox: Outbox,
    client: RetryingClient,
    modulify: Option<ModulifyClient>,
    name: String,
    concurrency: usize,
    lease: Duration,
    poll: Duration,
    schedule: LongSchedule,
    webhook_horizon: Duration,
    key_horizon: Duration,
    /// The caller's limit (`Some(None)`: no shared window); `None`: the server's figures,
    /// document 001's until known.
    trigger_limit: Option<Option<TriggerLimit>>,
    credential: String,
    on_finished: Option<OnFinished>,
}

/// A callback for every job a pool finished and recorded.
#[derive(Clone)]
struct OnFinished(Arc<dyn Fn(&JobDone) + Send + Sync>);

impl std::fmt::Debug for OnFinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnFinished(..)")
    }
}

/// A job a pool delivered and recorded: its event ID and what it came to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobDone {
    /// The job's event ID.
    pub event_id: String,
    /// Its new state: final, or pending when rescheduled.
    pub state: JobState,
    /// Requests this call sent.
    pub attempts: u32,
}

impl WorkerBuilder {
    pub(crate) fn new(outbox: Outbox, client: RetryingClient) -> Self {
        let base = client.inner.base.as_str().to_owned();
        let credential = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, base.as_bytes());
        let name = format!(
            "worker-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        Self {
            outbox,
            client,
            modulify: None,
            name,
            concurrency: DEFAULT_CONCURRENCY,
            lease: DEFAULT_LEASE,
            poll: DEFAULT_POLL,
            schedule: LongSchedule::default(),
            webhook_horizon: WEBHOOK_HORIZON,
            key_horizon: KEY_HORIZON,
            trigger_limit: None,
            credential: format!("credential:{credential}"),
            on_finished: None,
        }
    }

    /// Calls `callback` for every job this pool delivered, once its result is recorded (not for
    /// a record refused because the claim was lost). It runs on the recorder's task: keep it
    /// short.
    ///
    /// Default: none.
    pub fn on_finished(mut self, callback: impl Fn(&JobDone) + Send + Sync + 'static) -> Self {
        self.on_finished = Some(OnFinished(Arc::new(callback)));
        self
    }

    /// The worker's name in the store's leases.
    ///
    /// Default: `worker-<pid>-<random>`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How many deliveries run at once.
    ///
    /// Default: [`DEFAULT_CONCURRENCY`].
    pub fn concurrency(mut self, deliveries: usize) -> Self {
        self.concurrency = deliveries;
        self
    }

    /// How long a claim holds; after it another worker reclaims the job. It must outlast one
    /// call: at least the client's `max_elapsed` plus one second; at most [`MAX_LEASE`].
    ///
    /// Default: [`DEFAULT_LEASE`].
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long a worker waits before claiming again when nothing was due.
    ///
    /// Default: [`DEFAULT_POLL`].
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll = interval;
        self
    }

    /// The waits between the calls of a job.
    ///
    /// Default: [`LongSchedule::default`].
    pub fn schedule(mut self, schedule: LongSchedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// How long after its first send a webhook delivery ID may still be sent; at most
    /// [`MAX_LEASE`].
    ///
    /// Default: [`WEBHOOK_HORIZON`], 7 days.
    pub fn webhook_horizon(mut self, horizon: Duration) -> Self {
        self.webhook_horizon = horizon;
        self
    }

    /// How long after its first send a JSON:API or Modulify key may still be sent; at most
    /// [`MAX_LEASE`].
    ///
    /// Default: [`KEY_HORIZON`], 24 hours.
    pub fn key_horizon(mut self, horizon: Duration) -> Self {
        self.key_horizon = horizon;
        self
    }

    /// Delivers Modulify jobs through this client (built for Modulify's base URL).
    ///
    /// Default: none; a Modulify job then fails with `invalid_input`.
    pub fn modulify(mut self, client: ModulifyClient) -> Self {
        self.modulify = Some(client);
        self
    }

    /// The per-trigger window every worker of the store shares, or `None` for none. A limit
    /// set here wins over the server's figures.
    ///
    /// Default: the trigger's own limit, as the server states it on every answer
    /// (`RateLimit-Policy: "trigger";q=…;w=…`), and document 001's
    /// [`TriggerLimit::DOCUMENTED`], 100 per 60 s, until it has: the rule of
    /// [`ClientBuilder::pace_triggers`](crate::ClientBuilder::pace_triggers).
    pub fn trigger_limit(mut self, limit: Option<TriggerLimit>) -> Self {
        self.trigger_limit = Some(limit);
        self
    }

    /// The name under which the workers of one credential share their pause.
    ///
    /// Default: derived from the client's base URL.
    pub fn credential(mut self, name: impl Into<String>) -> Self {
        self.credential = format!("credential:{}", name.into());
        self
    }

    fn build(self) -> Result<Arc<Pool>> {
        let budget = self.client.inner.policy.budget;
        if self.concurrency == 0 {
            return Err(Error::invalid_input(
                "a worker needs a concurrency of at least 1",
            ));
        }
        if self.lease < budget.max_elapsed.saturating_add(Duration::from_secs(1)) {
            return Err(Error::invalid_input(format!(
                "the lease of {:?} does not outlast a call of up to {:?}: another worker would send the job again while it runs",
                self.lease, budget.max_elapsed
            )));
        }
        if self.poll.is_zero() {
            return Err(Error::invalid_input("the poll interval must be positive"));
        }
        for (what, value) in [
            ("lease", self.lease),
            ("webhook horizon", self.webhook_horizon),
            ("key horizon", self.key_horizon),
        ] {
            if value > MAX_LEASE {
                return Err(Error::invalid_input(format!(
                    "the {what} of {value:?} is over the 7-day maximum"
                )));
            }
        }
        let fleet: Arc<dyn Fleet> = Arc::new(StoreFleet {
            store: Arc::clone(&self.outbox.store),
            clock: Arc::clone(&self.outbox.clock),
            credential: self.credential.clone(),
            trigger_limit: self.trigger_limit,
            client: self.client.clone(),
            attempt_timeout: budget.attempt_timeout,
            paused: Mutex::new(None),
        });
        Ok(Arc::new(Pool {
            store: Arc::clone(&self.outbox.store),
            clock: Arc::clone(&self.outbox.clock),
            client: self.client,
            modulify: self.modulify,
            name: self.name,
            concurrency: self.concurrency,
            lease: self.lease,
            poll: self.poll,
            schedule: self.schedule,
            webhook_horizon: self.webhook_horizon,
            key_horizon: self.key_horizon,
            budget,
            fleet,
            credential: self.credential,
            on_finished: self.on_finished,
            report: Mutex::new(RunReport::default()),
        }))
    }

    /// Starts the workers in the background; they run until [`Workers::stop`].
    ///
    /// # Errors
    ///
    /// `invalid_input` for a zero concurrency or poll interval, or a lease shorter than a call.
    pub fn spawn(self) -> Result<Workers> {
        let pool = self.build()?;
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(Arc::clone(&pool).run(stopped, false));
        Ok(Workers { pool, stop, task })
    }

    /// Delivers every job due now, and those that come due while it runs, and returns when
    /// none is due and none is in flight here. Jobs rescheduled for later stay pending.
    ///
    /// # Errors
    ///
    /// As for [`spawn`](Self::spawn), and the store's error.
    pub async fn run_until_idle(self) -> Result<RunReport> {
        let pool = self.build()?;
        let (_stop, stopped) = watch::channel(false);
        pool.run(stopped, true).await
    }
}

/// Workers running in the background. Dropping the handle stops them as
/// [`stop`](Self::stop) does, without waiting.
#[derive(Debug)]
pub struct Workers {
    pool: Arc<Pool>,
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
        self.task
            .await
            .map_err(|_| Error::new(crate::ErrorKind::Transport, "the worker task panicked"))?
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

#[derive(Debug)]
struct Pool {
    store: Arc<dyn Store>,
    clock: Arc<dyn WallClock>,
    client: RetryingClient,
    modulify: Option<ModulifyClient>,
    name: String,
    concurrency: usize,
    lease: Duration,
    poll: Duration,
    schedule: LongSchedule,
    webhook_horizon: Duration,
    key_horizon: Duration,
    budget: Budget,
    fleet: Arc<dyn Fleet>,
    /// The scope of the credential's shared pause.
    credential: String,
    on_finished: Option<OnFinished>,
    report: Mutex<RunReport>,
}

impl Pool {
    fn snapshot(&self) -> RunReport {
        *self
            .report
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn count(&self, change: impl FnOnce(&mut RunReport)) {
        change(&mut self.report.lock().unwrap_or_else(|p| p.into_inner()));
    }

    async fn run(
        self: Arc<Self>,
        mut stopped: watch::Receiver<bool>,
        until_idle: bool,
    ) -> Result<RunReport> {
        let permits = Arc::new(Semaphore::new(self.concurrency));
        let mut deliveries = JoinSet::new();
        // Deliveries that may send, as against jobs rescheduled unsent.
        let sending = Arc::new(AtomicUsize::new(0));
        let mut failed_claims: u32 = 0;
        // Results are written in batches by one task: what finished while the last batch was
        // written goes in the next, so a busy pool pays one transaction for many jobs.
        let (finished, to_record) = mpsc::channel(self.concurrency.saturating_mul(4));
        let recorder = tokio::spawn(Arc::clone(&self).record_batches(to_record));
        // Claims run ahead of the deliveries: up to one pool's worth of claimed jobs waits in
        // `queue`, and the next claim is already on its way while they start, so a slot that
        // frees up never waits for a round trip to the store. A claimed job waits here about one
        // delivery; a lease of at least two calls covers that (the default: 120 s for 60 s).
        let mut queue: VecDeque<Job> = VecDeque::new();
        // Only a lease with room for a wait in the queue and a whole call claims ahead; with a
        // tight lease a pool claims for its free slots only, a quarter of them at a time.
        let ahead = if self.lease >= self.budget.max_elapsed.saturating_mul(2) {
            self.concurrency
        } else {
            0
        };
        let claim_at = (self.concurrency / 4).max(1);
        let mut claiming: Option<StoreFuture<'_, Vec<Job>>> = None;
        let mut drained = false;
        // Set when the `Workers` handle was dropped: nobody can stop them any more, so they stop.
        let mut orphaned = false;
        let outcome = loop {
            while deliveries.try_join_next().is_some() {}
            while !queue.is_empty() {
                let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                    break;
                };
                let Some(job) = queue.pop_front() else { break };
                // A job that waited here so long that its lease no longer covers a whole call
                // is left alone: when its lease ends it is claimed again, so two workers never
                // send it at once.
                let now = self.clock.now();
                if job
                    .lease_until
                    .is_some_and(|until| !may_send(now, self.budget.max_elapsed, Some(until)))
                {
                    tracing::debug!(event_id = %job.event_id, "a queued job's lease ran short: left for its lease to end");
                    continue;
                }
                let pool = Arc::clone(&self);
                let finished = finished.clone();
                if sending.load(Ordering::Relaxed) > 0
                    && let Some(down) = self.down_too_long()
                {
                    deliveries.spawn(async move {
                        let done = pool.not_started(job, down).await;
                        drop(permit);
                        let _ = finished.send(done).await;
                    });
                    continue;
                }
                let sending = Sending::count(&sending);
                deliveries.spawn(async move {
                    let done = pool.deliver(job).await;
                    drop(sending);
                    drop(permit);
                    // Only a closed recorder refuses it; the lease then brings the job back.
                    let _ = finished.send(done).await;
                });
            }
            let stopping = orphaned || *stopped.borrow();
            if stopping && claiming.is_none() && queue.is_empty() {
                break Ok(());
            }
            if drained && claiming.is_none() && queue.is_empty() && deliveries.is_empty() {
                break Ok(());
            }
            let busy = self.concurrency - permits.available_permits();
            let wanted = (self.concurrency + ahead).saturating_sub(busy + queue.len());
            let low = if ahead > 0 {
                queue.len() < self.concurrency / 2 + 1
            } else {
                queue.is_empty() && (wanted >= claim_at || busy == 0)
            };
            if claiming.is_none() && !stopping && !drained && low && wanted > 0 {
                claiming =
                    Some(
                        self.store
                            .claim(&self.name, self.clock.now(), self.lease, wanted.max(1)),
                    );
            }
            tokio::select! {
                claimed = async { claiming.as_mut().expect("polled only when set").await }, if claiming.is_some() => {
                    claiming = None;
                    match claimed {
                        Ok(jobs) if jobs.is_empty() => {
                            failed_claims = 0;
                            if until_idle {
                                // Nothing due: finish what is running, then stop.
                                drained = deliveries.is_empty() && queue.is_empty();
                                if !drained {
                                    deliveries.join_next().await;
                                }
                            } else {
                                tokio::select! {
                                    _ = tokio::time::sleep(self.poll) => {}
                                    changed = stopped.changed() => orphaned = changed.is_err(),
                                }
                            }
                        }
                        Ok(jobs) => {
                            failed_claims = 0;
                            self.count(|report| report.claimed += jobs.len() as u64);
                            queue.extend(jobs);
                        }
                        // A run until idle reports the store's failure; a long-running worker
                        // rides out a database restart, waiting longer after each failure.
                        Err(error) if until_idle => break Err(error),
                        Err(error) => {
                            failed_claims += 1;
                            let wait = self
                                .poll
                                .saturating_mul(failed_claims.min(50))
                                .min(CLAIM_RETRY_MAX);
                            tracing::error!(error = %error, wait_ms = wait.as_millis() as u64, "claiming jobs failed; trying again");
                            tokio::select! {
                                _ = tokio::time::sleep(wait) => {}
                                changed = stopped.changed() => orphaned = changed.is_err(),
                            }
                        }
                    }
                }
                _ = deliveries.join_next(), if !deliveries.is_empty() => {}
                changed = stopped.changed(), if !stopping => orphaned = changed.is_err(),
                _ = tokio::time::sleep(self.poll), if claiming.is_none() && deliveries.is_empty() => {}
            }
        };
        while deliveries.join_next().await.is_some() {}
        drop(finished);
        let _ = recorder.await;
        outcome.map(|()| self.snapshot())
    }

    /// Writes the results of finished deliveries, in batches, until every sender is gone.
    async fn record_batches(self: Arc<Self>, mut finished: mpsc::Receiver<Finished>) {
        let mut batch: Vec<Finished> = Vec::new();
        while let Some(first) = finished.recv().await {
            batch.push(first);
            while batch.len() < MAX_RECORD_BATCH {
                match finished.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            let mut seen = Vec::with_capacity(batch.len());
            let mut records = Vec::with_capacity(batch.len());
            for done in batch.drain(..) {
                seen.push((done.event_id, done.record.state, done.record.attempts_added));
                records.push((done.id, done.claim, done.record));
            }
            match self.store.record_many(records).await {
                Ok(written) => {
                    if let Some(callback) = &self.on_finished {
                        for ((event_id, state, attempts), written) in seen.iter().zip(&written) {
                            if *written {
                                (callback.0)(&JobDone {
                                    event_id: event_id.clone(),
                                    state: *state,
                                    attempts: *attempts,
                                });
                            }
                        }
                    }
                    self.count(|report| {
                    for ((event_id, state, attempts), written) in seen.iter().zip(written) {
                        if !written {
                            tracing::warn!(event_id = %event_id, "the job's claim was lost to another worker; its record is dropped");
                            report.claims_lost += 1;
                            continue;
                        }
                        report.attempts += u64::from(*attempts);
                        match state {
                            JobState::Accepted => report.accepted += 1,
                            JobState::Duplicate => report.duplicate += 1,
                            JobState::Done => report.done += 1,
                            JobState::Failed => report.failed += 1,
                            JobState::NeedsReconciliation => report.needs_reconciliation += 1,
                            _ => report.rescheduled += 1,
                        }
                    }
                    })
                }
                Err(error) => {
                    // The leases run out and other workers send these jobs again, under the
                    // same identities: the server deduplicates them.
                    tracing::error!(jobs = seen.len(), error = %error, "the jobs' results could not be recorded");
                }
            }
        }
    }

    /// How long the client has seen the service down, when that is at least one call's budget.
    fn down_too_long(&self) -> Option<Duration> {
        service_down_for(&self.client).filter(|down| *down >= self.budget.max_elapsed)
    }

    /// When `job` was first sent (or counts as sent), and the end of its horizon.
    fn horizon(&self, job: &Job, now: SystemTime) -> (SystemTime, Option<SystemTime>) {
        let horizon = match job.target {
            Target::Webhook { .. } => self.webhook_horizon,
            _ => self.key_horizon,
        };
        // The claim set it (to the first claim, never after the first send); a job claimed
        // through another path counts from now.
        let first_sent_at = job.first_sent_at.unwrap_or(now);
        (first_sent_at, horizon_end(Some(first_sent_at), horizon))
    }

    /// Reschedules a claimed job without sending it, the service having been down for `down`:
    /// what to record, as for a call the retry budget refused before sending.
    async fn not_started(&self, job: Job, down: Duration) -> Finished {
        let (first_sent_at, end) = self.horizon(&job, self.clock.now());
        let refused = Error::new(
            crate::ErrorKind::RetryBudgetExhausted,
            format!(
                "not started: the service has been down for {:.1} s, longer than one call's budget ({:.1} s)",
                down.as_secs_f64(),
                self.budget.max_elapsed.as_secs_f64()
            ),
        );
        let record = self.after(&job, first_sent_at, end, Err(refused)).await;
        Finished {
            id: job.id,
            claim: job.claim,
            event_id: job.event_id,
            record,
        }
    }

    /// Delivers one claimed job: what to record.
    async fn deliver(&self, job: Job) -> Finished {
        let now = self.clock.now();
        let (first_sent_at, end) = self.horizon(&job, now);
        let record = if may_send(now, self.budget.max_elapsed, end) {
            let sent = self.send(&job).await;
            self.after(&job, first_sent_at, end, sent).await
        } else {
            tracing::warn!(
                event_id = %job.event_id,
                "the job reached its deduplication horizon without a definite answer: not sent; reconcile it"
            );
            let state = JobState::NeedsReconciliation;
            ended(state, now, first_sent_at, 0, job.last_error.clone())
        };
        Finished {
            id: job.id,
            claim: job.claim,
            event_id: job.event_id,
            record,
        }
    }

    /// One call for `job`: the final state, the run ID, and the attempts it sent.
    async fn send(&self, job: &Job) -> std::result::Result<(JobState, Option<String>, u32), Error> {
        let fleet = Arc::clone(&self.fleet);
        let identity = job.identity.clone();
        match &job.target {
            Target::Webhook { trigger_token } => {
                let delivery = self
                    .client
                    .deliver(trigger_token.clone(), job.body.clone())
                    .delivery_id(DeliveryId::new(identity))
                    .fleet(fleet)
                    .send()
                    .await?;
                let attempts = delivery.attempts().len() as u32;
                Ok(match delivery.outcome() {
                    WebhookOutcome::Accepted { run_id } => {
                        (JobState::Accepted, run_id.clone(), attempts)
                    }
                    WebhookOutcome::Duplicate => (JobState::Duplicate, None, attempts),
                })
            }
            Target::Write { method, path } => {
                let response = self
                    .client
                    .write(method.clone(), path, identity, job.body.clone())
                    .fleet(fleet)
                    .send()
                    .await?;
                Ok((JobState::Done, None, response.attempts().len() as u32))
            }
            Target::Modulify { method } => {
                let Some(modulify) = &self.modulify else {
                    return Err(Error::invalid_input(
                        "a Modulify job needs workers built with .modulify(ModulifyClient)",
                    ));
                };
                let answer = modulify
                    .call(method, job.body.clone())
                    .key(identity)
                    .fleet(fleet)
                    .send()
                    .await?;
                Ok((JobState::Done, None, answer.attempts().len() as u32))
            }
        }
    }

    /// The record of a call of `job`, which stops at the horizon `end`.
    async fn after(
        &self,
        job: &Job,
        first_sent_at: SystemTime,
        end: Option<SystemTime>,
        sent: std::result::Result<(JobState, Option<String>, u32), Error>,
    ) -> Record {
        let now = self.clock.now();
        let error = match sent {
            Ok((state, run_id, attempts)) => {
                return Record {
                    run_id,
                    ..ended(state, now, first_sent_at, attempts, None)
                };
            }
            Err(error) => error,
        };
        let attempts = error.attempts().len() as u32;
        let last_error = Some(LastError {
            kind: error.kind().as_str().to_owned(),
            status: error.status().map(|status| status.as_u16()),
            request_id: error.request_id().map(str::to_owned),
            message: error.to_string(),
        });
        if !error.is_retryable() {
            return ended(JobState::Failed, now, first_sent_at, attempts, last_error);
        }
        // A call refused before it sent anything (a shared window or pause that stayed closed
        // past its budget) says nothing about the server: the schedule does not move on.
        let step = if attempts == 0 { 1 } else { job.calls + 1 };
        let wait = self
            .schedule
            .wait(step, error.retry_after(), &mut rand::rng());
        let mut next_at = now.checked_add(wait).unwrap_or(now);
        if let Ok(Some(paused)) = self.store.paused_until(&self.credential, now).await {
            next_at = next_at.max(paused);
        }
        if !may_send(next_at, self.budget.max_elapsed, end) {
            tracing::warn!(
                event_id = %job.event_id,
                "the next call would end past the job's deduplication horizon: stopped; reconcile it"
            );
            let state = JobState::NeedsReconciliation;
            return ended(state, now, first_sent_at, attempts, last_error);
        }
        tracing::info!(
            event_id = %job.event_id,
            calls = job.calls + 1,
            wait_s = wait.as_secs(),
            "the call ended retryable: rescheduled"
        );
        Record {
            next_at,
            finished_at: None,
            ..ended(JobState::Pending, now, first_sent_at, attempts, last_error)
        }
    }
}

/// Counts a delivery that may send while it lives, a panic included.
struct Sending(Arc<AtomicUsize>);

impl Sending {
    fn count(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(count))
    }
}

impl Drop for Sending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long `client`'s retry budget has seen the service down; `None` while it is up.
fn service_down_for(client: &RetryingClient) -> Option<Duration> {
    client.stats().service_down_for
}

/// The record of a job that ended in `state` at `now`.
fn ended(
    state: JobState,
    now: SystemTime,
    first_sent_at: SystemTime,
    attempts: u32,
    last_error: Option<LastError>,
) -> Record {
    Record {
        state,
        next_at: now,
        attempts_added: attempts,
        first_sent_at: Some(first_sent_at),
        run_id: None,
        last_error,
        finished_at: Some(now),
    }
}

/// A delivery's result, waiting to be written.
#[derive(Debug)]
struct Finished {
    id: i64,
    claim: u64,
    event_id: String,
    record: Record,
}

/// The fleet of the workers of one store: the credential's pause and the triggers' windows,
/// in the store.
#[derive(Debug)]
struct StoreFleet {
    store: Arc<dyn Store>,
    clock: Arc<dyn WallClock>,
    credential: String,
    /// As [`WorkerBuilder`] holds it.
    trigger_limit: Option<Option<TriggerLimit>>,
    /// The webhook client: the server's figures it learned, and where waits are counted.
    client: RetryingClient,
    /// With the window, how long a slot stays busy before its answer comes.
    attempt_timeout: Duration,
    /// The pause last read, and when: trusted for [`PAUSE_READ_EVERY`].
    paused: Mutex<Option<(tokio::time::Instant, Option<SystemTime>)>>,
}

impl StoreFleet {
    /// The shared window of the trigger with `token`, and where its limit came from; `None`
    /// when the caller turned shared windows off.
    fn pacing(&self, token: &str) -> Option<TriggerPacing> {
        match self.trigger_limit {
            Some(limit) => limit.map(|limit| TriggerPacing::new(limit, PacingSource::Caller)),
            None => Some(
                self.client
                    .inner
                    .engine
                    .triggers
                    .learned_or_documented(TriggerKey::of(token)),
            ),
        }
    }

    /// Until when the credential is paused, if past `now`: from the store at most every
    /// [`PAUSE_READ_EVERY`], so a pool does not read it before every attempt.
    async fn paused_until(&self, now: SystemTime) -> Result<Option<SystemTime>> {
        let cached = *self.paused.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((read, until)) = cached
            && read.elapsed() < PAUSE_READ_EVERY
        {
            return Ok(until.filter(|until| *until > now));
        }
        let until = self.store.paused_until(&self.credential, now).await?;
        *self.paused.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((tokio::time::Instant::now(), until));
        Ok(until)
    }
}

/// The scope of a trigger's window: a name derived from its token, never the token.
fn trigger_scope(token: &str) -> String {
    format!(
        "trigger:{}",
        uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, token.as_bytes())
    )
}

impl Fleet for StoreFleet {
    fn admit<'a>(
        &'a self,
        trigger: Option<&'a str>,
        max_wait: Duration,
    ) -> FleetFuture<'a, std::result::Result<Option<i64>, Duration>> {
        Box::pin(async move {
            let started = tokio::time::Instant::now();
            let wait_or_refuse = async |wait: Duration| {
                if started.elapsed().saturating_add(wait) > max_wait {
                    return Err(wait);
                }
                tokio::time::sleep(wait).await;
                Ok(())
            };
            // Counted from the first wait until this returns, for the client's stats.
            let counters = &self.client.inner.engine.counters;
            let (mut at_gate, mut in_window): (Option<Holding<'_>>, Option<Holding<'_>>) =
                (None, None);
            loop {
                let now = self.clock.now();
                match self.paused_until(now).await {
                    Ok(Some(until)) => {
                        let wait = until.duration_since(now).unwrap_or(Duration::ZERO);
                        at_gate.get_or_insert_with(|| counters.gate_hold.begin(None));
                        wait_or_refuse(wait.max(Duration::from_millis(1))).await?;
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(error = %error, "the shared pause could not be read; sending");
                    }
                }
                let Some((token, pacing)) =
                    trigger.and_then(|token| Some((token, self.pacing(token)?)))
                else {
                    return Ok(None);
                };
                let hold = pacing.limit.per().saturating_add(self.attempt_timeout);
                match self
                    .store
                    .take_slot(&trigger_scope(token), pacing.limit.requests(), hold, now)
                    .await
                {
                    Ok(Slot::Granted(slot)) => return Ok(Some(slot)),
                    Ok(Slot::FreeAt(at)) => {
                        let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
                        in_window.get_or_insert_with(|| counters.trigger_hold.begin(Some(pacing)));
                        if let Err(wait) = wait_or_refuse(wait.max(Duration::from_millis(1))).await
                        {
                            counters.trigger_hold.turned_away(Some(pacing), wait);
                            return Err(wait);
                        }
                    }
                    Err(error) => {
                        tracing::warn!(error = %error, "the shared trigger window could not be read; sending");
                        return Ok(None);
                    }
                }
            }
        })
    }

    fn answered<'a>(&'a self, trigger: Option<&'a str>, slot: i64) -> FleetFuture<'a, ()> {
        Box::pin(async move {
            let per = trigger
                .and_then(|token| self.pacing(token))
                .map_or(Duration::ZERO, |pacing| pacing.limit.per());
            let until = self
                .clock
                .now()
                .checked_add(per)
                .unwrap_or_else(|| self.clock.now());
            if let Err(error) = self.store.release_slot(slot, until).await {
                tracing::warn!(error = %error, "a shared trigger slot could not be released; it frees on its own");
            }
        })
    }

    fn slow_down(&self, wait: Duration) -> FleetFuture<'_, ()> {
        Box::pin(async move {
            let now = self.clock.now();
            let until = now.checked_add(wait).unwrap_or(now);
            {
                let mut cached = self.paused.lock().unwrap_or_else(|p| p.into_inner());
                let known = cached.and_then(|(_, until)| until);
                *cached = Some((tokio::time::Instant::now(), known.max(Some(until))));
            }
            if let Err(error) = self.store.pause(&self.credential, until).await {
                tracing::warn!(error = %error, "the shared pause could not be written");
            }
        })
    }
}
