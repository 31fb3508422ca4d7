//! An outbox's figures: the store's (jobs by state, those a call may have run by state, the
//! oldest due job), read at scrape time with three short queries, and this process's
//! (deliveries, enqueues) from the outbox's meter.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::DescriptorEncoder;

use crate::core::error::Result;
use crate::core::meter::HistogramSnapshot;
use crate::outbox::meter::Enqueue;
use crate::outbox::{Counts, JobState, Outbox};

use super::family::{counter, gauge, histogram, plain, seconds};

/// The states a worker records: every state but in flight.
const RECORDED: [JobState; 6] = [
    JobState::Accepted,
    JobState::Duplicate,
    JobState::Done,
    JobState::Failed,
    JobState::NeedsReconciliation,
    JobState::Pending,
];

/// What one outbox held and had done when read.
#[derive(Debug)]
pub(super) struct OutboxFigures {
    counts: Counts,
    /// The jobs a call may have run, by state.
    may_have_run: Counts,
    oldest_due_age: Duration,
    recorded: [u64; RECORDED.len()],
    claims_lost: u64,
    enqueued: u64,
    enqueue: [HistogramSnapshot; 2],
    /// By final state: [`RECORDED`] without pending.
    latency: Vec<(JobState, HistogramSnapshot)>,
}

impl OutboxFigures {
    /// Reads `outbox`'s store and meter now.
    ///
    /// # Errors
    ///
    /// The store's error.
    pub(super) async fn read(outbox: &Outbox) -> Result<Self> {
        let now = outbox.clock.wall();
        let counts = outbox.store.counts().await?;
        let may_have_run = outbox.store.may_have_run_counts().await?;
        let oldest = outbox.store.oldest_due(now).await?;
        let meter = &outbox.meter;
        Ok(Self {
            counts,
            may_have_run,
            oldest_due_age: oldest
                .and_then(|due| now.duration_since(due).ok())
                .unwrap_or_default(),
            recorded: RECORDED.map(|state| meter.recorded_in(state)),
            claims_lost: meter.claims_lost(),
            enqueued: meter.enqueued_jobs(),
            enqueue: Enqueue::ALL.map(|how| meter.enqueue_durations(how)),
            latency: RECORDED
                .into_iter()
                .filter(|state| state.is_final())
                .map(|state| (state, meter.latencies(state)))
                .collect(),
        })
    }

    /// Writes the outbox's families.
    pub(super) fn encode(&self, out: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let jobs = JobState::ALL
            .into_iter()
            .map(|state| (vec![("state", state.as_str())], self.counts.of(state)))
            .collect();
        gauge(
            out,
            plain(
                "hodoflow_outbox_jobs",
                "Jobs in the store, by state (every process's).",
            ),
            jobs,
        )?;
        let may_have_run = JobState::ALL
            .into_iter()
            .map(|state| (vec![("state", state.as_str())], self.may_have_run.of(state)))
            .collect();
        gauge(
            out,
            plain(
                "hodoflow_outbox_jobs_may_have_run",
                "Jobs in the store a call may have run (sent and unanswered, or in progress), by state.",
            ),
            may_have_run,
        )?;
        gauge(
            out,
            seconds(
                "hodoflow_outbox_oldest_due_job_age",
                "How long the job due longest has been due (pending, or in flight past its lease); 0 when none is due.",
            ),
            vec![(vec![], self.oldest_due_age.as_secs_f64())],
        )?;
        let deliveries = RECORDED
            .into_iter()
            .zip(self.recorded)
            .map(|(state, count)| (vec![("outcome", outcome(state))], count))
            .collect();
        counter(
            out,
            plain(
                "hodoflow_outbox_deliveries",
                "Calls of jobs this process's workers finished and recorded, by outcome: the final state, or rescheduled.",
            ),
            deliveries,
        )?;
        counter(
            out,
            plain(
                "hodoflow_outbox_claims_lost",
                "Records this process's workers dropped because the job's lease had run out and another worker had claimed it.",
            ),
            vec![(vec![], self.claims_lost)],
        )?;
        counter(
            out,
            plain(
                "hodoflow_outbox_enqueued_jobs",
                "Jobs this process stored (an event ID already stored is not counted again).",
            ),
            vec![(vec![], self.enqueued)],
        )?;
        let enqueues = Enqueue::ALL
            .into_iter()
            .zip(&self.enqueue)
            .map(|(how, snapshot)| (vec![("operation", how.as_str())], snapshot))
            .collect();
        histogram(
            out,
            seconds(
                "hodoflow_outbox_enqueue_duration",
                "Duration of this process's enqueue calls: one observation per call that did not fail, a batch of enqueue_many as one.",
            ),
            enqueues,
        )?;
        let latencies = self
            .latency
            .iter()
            .map(|(state, snapshot)| (vec![("outcome", outcome(*state))], snapshot))
            .collect();
        histogram(
            out,
            seconds(
                "hodoflow_outbox_delivery_latency",
                "Time from a job's enqueue to its final state, for the jobs this process's workers finished, by that state.",
            ),
            latencies,
        )
    }
}

/// A recorded state as an outcome: its name, or `rescheduled` for pending.
fn outcome(state: JobState) -> &'static str {
    match state {
        JobState::Pending => "rescheduled",
        state => state.as_str(),
    }
}
