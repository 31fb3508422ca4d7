//! An outbox's figures as a metrics [`Source`]: the store's (jobs by state, those a call may
//! have run by state, the oldest due job), read at scrape time with three short queries, and
//! this process's (deliveries, enqueues) from the outbox's meter.

use std::time::Duration;

use crate::meter::Enqueue;
use crate::{JobState, Outbox};
use hodoflow_retry::metrics::{Figures, Source, SourceFuture};

/// The states a worker records: every state but in flight.
const RECORDED: [JobState; 6] = [
    JobState::Accepted,
    JobState::Duplicate,
    JobState::Done,
    JobState::Failed,
    JobState::NeedsReconciliation,
    JobState::Pending,
];

/// Reads the `hodoflow_outbox_*` families: jobs by state and the oldest due job are the store's,
/// every process's; deliveries, enqueues and latencies are those of this process's clones of
/// the outbox and the workers built from them.
impl Source for Outbox {
    fn read(&self) -> SourceFuture<'_> {
        Box::pin(async move {
            let now = self.clock.wall();
            let counts = self.store.counts().await?;
            let may_have_run = self.store.may_have_run_counts().await?;
            let oldest = self.store.oldest_due(now).await?;
            let oldest_due_age = oldest
                .and_then(|due| now.duration_since(due).ok())
                .unwrap_or(Duration::ZERO);
            let meter = &self.meter;
            let by_state = |counts: &crate::Counts| {
                JobState::ALL
                    .into_iter()
                    .map(|state| (vec![("state", state.as_str().to_owned())], counts.of(state)))
                    .collect::<Vec<_>>()
            };
            let label = |name: &'static str, value: &str| vec![(name, value.to_owned())];
            Ok(Figures::new()
                .gauge(
                    "hodoflow_outbox_jobs",
                    "Jobs in the store, by state (every process's).",
                    by_state(&counts),
                )
                .gauge(
                    "hodoflow_outbox_jobs_may_have_run",
                    "Jobs in the store a call may have run (sent and unanswered, or in progress), by state.",
                    by_state(&may_have_run),
                )
                .gauge_seconds(
                    "hodoflow_outbox_oldest_due_job_age",
                    "How long the job due longest has been due (pending, or in flight past its lease); 0 when none is due.",
                    [(vec![], oldest_due_age)],
                )
                .counter(
                    "hodoflow_outbox_deliveries",
                    "Calls of jobs this process's workers finished and recorded, by outcome: the final state, or rescheduled.",
                    RECORDED
                        .into_iter()
                        .map(|state| (label("outcome", outcome(state)), meter.recorded_in(state))),
                )
                .counter(
                    "hodoflow_outbox_claims_lost",
                    "Records this process's workers dropped because the job's lease had run out and another worker had claimed it.",
                    [(vec![], meter.claims_lost())],
                )
                .counter(
                    "hodoflow_outbox_enqueued_jobs",
                    "Jobs this process stored (an event ID already stored is not counted again).",
                    [(vec![], meter.enqueued_jobs())],
                )
                .histogram_seconds(
                    "hodoflow_outbox_enqueue_duration",
                    "Duration of this process's enqueue calls: one observation per call that did not fail, a batch of enqueue_many as one.",
                    Enqueue::ALL
                        .into_iter()
                        .map(|how| (label("operation", how.as_str()), meter.enqueue_durations(how))),
                )
                .histogram_seconds(
                    "hodoflow_outbox_delivery_latency",
                    "Time from a job's enqueue to its final state, for the jobs this process's workers finished, by that state.",
                    RECORDED
                        .into_iter()
                        .filter(|state| state.is_final())
                        .map(|state| (label("outcome", outcome(state)), meter.latencies(state))),
                ))
        })
    }
}

/// A recorded state as an outcome: its name, or `rescheduled` for pending.
fn outcome(state: JobState) -> &'static str {
    match state {
        JobState::Pending => "rescheduled",
        state => state.as_str(),
    }
}
