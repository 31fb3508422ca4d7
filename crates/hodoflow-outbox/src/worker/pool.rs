//! The pool loop: claim due jobs up to the free delivery slots, deliver each through the
//! vendor's client, record the results in batches, and stop starting jobs while the service
//! is down.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use hodoflow_retry::Budget;
use hodoflow_retry::limit::Fleet;
use hodoflow_retry::{Error, Result};

use crate::job::{Job, JobState, LastError, Record, Target};
use crate::schedule::{LongSchedule, horizon_end, may_send};
use crate::store::{Store, StoreFuture};
use hodoflow_retry::clock::Clock;

use super::*;
use crate::target::{Deliver, Delivered, JobCall, Sent};

#[derive(Debug)]
pub(super) struct WorkerPool {
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Arc<dyn Clock>,
    /// The workers' clients, one per vendor, each delivering the jobs of its targets.
    pub(super) deliverers: Vec<Arc<dyn Deliver>>,
    pub(super) name: String,
    pub(super) concurrency: usize,
    pub(super) lease: Duration,
    pub(super) poll: Duration,
    pub(super) safety_poll: Duration,
    pub(super) queue: Option<Duration>,
    pub(super) schedule: LongSchedule,
    pub(super) webhook_horizon: Duration,
    pub(super) key_horizon: Duration,
    pub(super) budget: Budget,
    pub(super) fleet: Arc<dyn Fleet>,
    /// The trigger tokens of the outbox's process, which resolve webhook jobs' references.
    pub(super) triggers: Arc<crate::Triggers>,
    pub(super) on_finished: Option<OnFinished>,
    pub(super) report: Mutex<RunReport>,
    /// The outbox's meter, shared with every pool of it (feature `metrics`).
    #[cfg(feature = "metrics")]
    pub(super) meter: Arc<crate::meter::OutboxMeter>,
}

impl WorkerPool {
    pub(super) fn snapshot(&self) -> RunReport {
        *self
            .report
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn count(&self, change: impl FnOnce(&mut RunReport)) {
        change(&mut self.report.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// How long an idle worker sleeps, a wake-up aside: its poll interval when a job another
    /// process enqueues would not wake it (or its clock moves only when told to); else until
    /// the next job is due, at most its safety poll. Nothing is due yet, though the store says
    /// it is (another worker claimed it first): its poll interval.
    async fn idle_wait(&self, woken_by_every_process: bool) -> Duration {
        if !woken_by_every_process || !self.clock.moves_by_itself() {
            return self.poll;
        }
        let now = self.clock.wall();
        match self.store.due(now, None).await {
            Ok(due) => match due.next_at.map(|next| next.duration_since(now)) {
                None => self.safety_poll,
                Some(Ok(wait)) if !wait.is_zero() => wait.min(self.safety_poll),
                Some(_) => self.poll,
            },
            Err(error) => {
                tracing::warn!(error = %error, "reading when the next job is due failed; polling");
                self.poll
            }
        }
    }

    pub(super) async fn run(
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
        let ahead = if self.lease >= self.budget.call_time().saturating_mul(2) {
            self.concurrency
        } else {
            0
        };
        let claim_at = (self.concurrency / 4).max(1);
        let mut claiming: Option<StoreFuture<'_, Vec<Job>>> = None;
        // A run until idle stops at the first empty claim: it never sleeps, so never listens.
        let mut wakeups = (!until_idle).then(|| self.store.wakeups());
        // After an empty claim a long-running pool claims again when its idle wait ends, a
        // wake-up comes or a delivery finishes (its job may be due again soon); meanwhile it
        // keeps starting the jobs it holds and joining the deliveries it runs.
        let mut resting: Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>> = None;
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
                let now = self.clock.wall();
                if job
                    .lease_until
                    .is_some_and(|until| !may_send(now, self.budget.call_time(), Some(until)))
                {
                    tracing::debug!(event_id = %job.event_id, "a queued job's lease ran short: left for its lease to end");
                    continue;
                }
                let pool = Arc::clone(&self);
                let finished = finished.clone();
                if sending.load(Ordering::Relaxed) > 0
                    && let Some(down) = self.down_too_long(&job.target)
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
            if claiming.is_none() && resting.is_none() && !stopping && !drained && low && wanted > 0
            {
                // A wake-up sent from here on is for this claim's successor.
                if let Some(wakeups) = &mut wakeups {
                    wakeups.mark_seen();
                }
                claiming = Some(self.store.claim(
                    &self.name,
                    self.clock.wall(),
                    self.lease,
                    wanted.max(1),
                ));
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
                            } else if let Some(wakeups) = &wakeups {
                                let wait = self.idle_wait(wakeups.every_process()).await;
                                resting = Some(Box::pin(tokio::time::sleep(wait)));
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
                () = async { resting.as_mut().expect("polled only when set").await }, if resting.is_some() => resting = None,
                () = async { wakeups.as_mut().expect("set while resting").changed().await }, if resting.is_some() && wakeups.is_some() => resting = None,
                _ = deliveries.join_next(), if !deliveries.is_empty() => resting = None,
                changed = stopped.changed(), if !stopping => orphaned = changed.is_err(),
                _ = tokio::time::sleep(self.poll), if claiming.is_none() && resting.is_none() && deliveries.is_empty() => {}
            }
        };
        while deliveries.join_next().await.is_some() {}
        drop(finished);
        let _ = recorder.await;
        outcome.map(|()| self.snapshot())
    }

    /// Writes the results of finished deliveries, in batches, until every sender is gone.
    pub(super) async fn record_batches(self: Arc<Self>, mut finished: mpsc::Receiver<Finished>) {
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
                let latency = (done.record.finished_at)
                    .and_then(|finished| finished.duration_since(done.created_at).ok());
                seen.push((
                    done.event_id,
                    done.record.state,
                    done.record.attempts_added,
                    latency,
                ));
                records.push((done.id, done.claim, done.record));
            }
            match self.store.record_many(records).await {
                Ok(written) => {
                    if let Some(callback) = &self.on_finished {
                        for ((event_id, state, attempts, _), written) in seen.iter().zip(&written) {
                            if *written {
                                (callback.0)(&JobDone {
                                    event_id: event_id.clone(),
                                    state: *state,
                                    attempts: *attempts,
                                });
                            }
                        }
                    }
                    #[cfg(feature = "metrics")]
                    for ((_, state, _, latency), written) in seen.iter().zip(&written) {
                        if *written {
                            self.meter.recorded(*state, *latency);
                        } else {
                            self.meter.claim_lost();
                        }
                    }
                    self.count(|report| {
                    for ((event_id, state, attempts, _), written) in seen.iter().zip(written) {
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

    /// How long the service that takes the jobs of `target` has been down, as its client
    /// tells, when that is at least one call's budget: a call started now could not ride it
    /// out. Another service's outage (the other vendor's, webhook ingestion's for a write)
    /// never holds the job.
    pub(super) fn down_too_long(&self, target: &Target) -> Option<Duration> {
        self.deliverers
            .iter()
            .find(|deliverer| deliverer.delivers(target))
            .and_then(|deliverer| deliverer.down_for(target))
            .filter(|down| *down >= self.budget.call_time())
    }

    /// When `job` was first sent (or counts as sent), and the end of its horizon.
    pub(super) fn horizon(&self, job: &Job, now: SystemTime) -> (SystemTime, Option<SystemTime>) {
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
    pub(super) async fn not_started(&self, job: Job, down: Duration) -> Finished {
        let (first_sent_at, end) = self.horizon(&job, self.clock.wall());
        let refused = Error::new(
            hodoflow_retry::ErrorKind::RetryBudgetExhausted,
            format!(
                "not started: the service has been down for {:.1} s, longer than one call's budget ({:.1} s)",
                down.as_secs_f64(),
                self.budget.call_time().as_secs_f64()
            ),
        );
        let record = self.after(&job, first_sent_at, end, Err(refused)).await;
        Finished {
            id: job.id,
            claim: job.claim,
            event_id: job.event_id,
            created_at: job.created_at,
            record,
        }
    }

    /// Delivers one claimed job: what to record.
    pub(super) async fn deliver(&self, mut job: Job) -> Finished {
        let now = self.clock.wall();
        let (first_sent_at, end) = self.horizon(&job, now);
        // A webhook job names its trigger by reference: its token is this process's to know.
        match self.triggers.resolve(&job.target) {
            Ok(Some(target)) => job.target = target,
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(event_id = %job.event_id, error = %error, "the job's trigger token is not known here: not sent");
                let record = Record {
                    next_at: now.checked_add(UNRESOLVED_WAIT).unwrap_or(now),
                    finished_at: None,
                    ..ended(
                        JobState::Pending,
                        now,
                        first_sent_at,
                        0,
                        Some(last_error(&error)),
                    )
                };
                return Finished {
                    id: job.id,
                    claim: job.claim,
                    event_id: job.event_id,
                    created_at: job.created_at,
                    record,
                };
            }
        }
        let record = if may_send(now, self.budget.call_time(), end) {
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
            created_at: job.created_at,
            record,
        }
    }

    /// One call for `job`, through the first of the workers' clients that delivers its target:
    /// the final state, the run ID, and the attempts it sent.
    pub(super) async fn send(&self, job: &Job) -> Result<Sent> {
        match self
            .deliverers
            .iter()
            .find(|deliverer| deliverer.delivers(&job.target))
        {
            Some(deliverer) => {
                let fleet = Arc::clone(&self.fleet);
                // A webhook job queues for its trigger's window before its call starts, as long
                // as its lease leaves room for the whole call after: events queue, not calls.
                let now = self.clock.wall();
                let leased = job
                    .lease_until
                    .and_then(|until| until.duration_since(now).ok())
                    .unwrap_or(Duration::ZERO)
                    .saturating_sub(self.budget.call_time() + Duration::from_secs(1));
                let queue = self.queue.map_or(leased, |max| max.min(leased));
                deliverer
                    .deliver(JobCall {
                        target: &job.target,
                        identity: &job.identity,
                        body: &job.body,
                        fleet,
                        queue,
                    })
                    .await
            }
            None => Err(Error::invalid_input(format!(
                "no client of these workers delivers a {} job: a Modulify job needs workers given .deliver(ModulifyClient), a vendor of your own .vendor(name, client, profile) or .deliver(your Deliver); nothing was sent",
                job.target.kind()
            ))),
        }
    }

    /// The record of a call of `job`, which stops at the horizon `end`.
    pub(super) async fn after(
        &self,
        job: &Job,
        first_sent_at: SystemTime,
        end: Option<SystemTime>,
        sent: Result<Sent>,
    ) -> Record {
        let now = self.clock.wall();
        let error = match sent {
            Ok(Sent {
                outcome, attempts, ..
            }) => {
                let (state, run_id) = match outcome {
                    Delivered::Accepted { run_id } => (JobState::Accepted, run_id),
                    Delivered::Duplicate => (JobState::Duplicate, None),
                    Delivered::Done => (JobState::Done, None),
                };
                return Record {
                    run_id: run_id.map(|id| kept(&id, MAX_STORED_TEXT)),
                    ..ended(state, now, first_sent_at, attempts, None)
                };
            }
            Err(error) => error,
        };
        let attempts = error.attempts().len() as u32;
        let last_error = Some(last_error(&error));
        // Kept on the job (the store never clears it): a later call's answer does not say
        // what an earlier, unanswered one did.
        let may_have_run = error.may_have_run();
        let ran = |record: Record| Record {
            may_have_run,
            ..record
        };
        if !error.is_retryable() {
            // A permanent answer now says nothing of a call before that may have run: a
            // person decides, as at the horizon. Only a job no call may have run fails.
            let state = if may_have_run || job.may_have_run {
                JobState::NeedsReconciliation
            } else {
                JobState::Failed
            };
            if state == JobState::NeedsReconciliation {
                tracing::warn!(
                    event_id = %job.event_id,
                    "the call ended on a permanent answer, but a call of this job may have run it: not failed; reconcile it"
                );
            }
            return ran(ended(state, now, first_sent_at, attempts, last_error));
        }
        // A call refused before it sent anything (a shared window or pause that stayed closed
        // past its budget) says nothing about the server: the schedule does not move on.
        let step = if attempts == 0 { 1 } else { job.calls + 1 };
        let wait = self
            .schedule
            .wait(step, error.retry_after(), &mut rand::rng());
        // A call a closed scope refused carries how long it stays closed as its `Retry-After`,
        // which the schedule's wait already honours.
        let next_at = now.checked_add(wait).unwrap_or(now);
        if !may_send(next_at, self.budget.call_time(), end) {
            tracing::warn!(
                event_id = %job.event_id,
                "the next call would end past the job's deduplication horizon: stopped; reconcile it"
            );
            let state = JobState::NeedsReconciliation;
            return ran(ended(state, now, first_sent_at, attempts, last_error));
        }
        tracing::info!(
            event_id = %job.event_id,
            calls = job.calls + 1,
            wait_s = wait.as_secs(),
            "the call ended retryable: rescheduled"
        );
        ran(Record {
            next_at,
            finished_at: None,
            ..ended(JobState::Pending, now, first_sent_at, attempts, last_error)
        })
    }
}

/// How long a job whose trigger token its worker does not know waits before it is tried again.
const UNRESOLVED_WAIT: Duration = Duration::from_secs(60);

/// The most bytes of a server's text a job keeps: its run ID, the `x-request-id` of its last
/// error (the client keeps 128 already).
const MAX_STORED_TEXT: usize = 256;

/// The most bytes of the message of a job's last error.
const MAX_STORED_MESSAGE: usize = 1024;

/// What a job keeps of the error its call ended with. The client cleaned the server's words
/// in it of every secret it holds, where they entered the error (`redact.rs`); each text is
/// bounded here again, its controls escaped, whatever a delivering client returned.
fn last_error(error: &Error) -> LastError {
    LastError {
        kind: error.kind().as_str().to_owned(),
        status: error.status().map(|status| status.as_u16()),
        request_id: error.request_id().map(|id| kept(id, MAX_STORED_TEXT)),
        message: kept(&error.to_string(), MAX_STORED_MESSAGE),
    }
}

/// `text` as a job keeps it: controls escaped, at most `limit` bytes.
fn kept(text: &str, limit: usize) -> String {
    let escaped = hodoflow_retry::text::escape(text);
    hodoflow_retry::text::bound(&escaped, limit).to_owned()
}

/// Counts a delivery that may send while it lives, a panic included.
pub(super) struct Sending(Arc<AtomicUsize>);

impl Sending {
    pub(super) fn count(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(count))
    }
}

impl Drop for Sending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The record of a job that ended in `state` at `now`.
pub(super) fn ended(
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
        may_have_run: false,
    }
}

/// A delivery's result, waiting to be written.
#[derive(Debug)]
pub(super) struct Finished {
    pub(super) id: i64,
    pub(super) claim: u64,
    pub(super) event_id: String,
    /// When the job was enqueued: its delivery latency counts from here.
    pub(super) created_at: SystemTime,
    pub(super) record: Record,
}
