//! What `outbox retry` and the status page's retry button share: requeue one job, unless it
//! was delivered or is in flight under a live lease, and say why not.

use hodoflow_outbox::{Job, JobState, Outbox};

use crate::job_line::delivered;

/// Whether `job` is in flight under a lease no worker can hold: one ending more than
/// `MAX_LEASE` (7 days) from now, written before leases were bounded. It is taken as expired:
/// requeued by `outbox retry`, claimed again by a worker.
fn wedged(job: &Job) -> bool {
    let latest = std::time::SystemTime::now().checked_add(hodoflow_outbox::MAX_LEASE);
    matches!((job.lease_until, latest), (Some(until), Some(latest)) if until > latest)
}

/// Why [`requeue`] did not requeue a job.
#[derive(Debug)]
pub(crate) enum Refused {
    /// No job has that event ID.
    NotFound,
    /// The job was delivered, or is in flight under a live lease.
    Not(JobState),
    /// The store failed.
    Store(hodoflow_retry::Error),
}

impl Refused {
    /// The sentence saying why, for the job of `event_id`.
    pub(crate) fn sentence(&self, event_id: &str) -> String {
        match self {
            Self::NotFound => format!("no job with event ID {event_id} in the outbox"),
            Self::Not(state) => format!(
                "the job of {event_id} is {state}: nothing to retry (only pending, failed and \
                 needs_reconciliation jobs are requeued)"
            ),
            Self::Store(error) => error.to_string(),
        }
    }
}

/// What `outbox retry` and the status page's retry button do: makes the job of `event_id`
/// pending and due now, unless it was delivered or is in flight under a live lease. Returns the
/// job and the state it had.
///
/// # Errors
///
/// Why it was not requeued.
pub(crate) async fn requeue(outbox: &Outbox, event_id: &str) -> Result<(Job, JobState), Refused> {
    let Some(job) = outbox.job(event_id).await.map_err(Refused::Store)? else {
        return Err(Refused::NotFound);
    };
    crate::job_line::remember_secret(&job);
    if delivered(job.state) || (job.state == JobState::InFlight && !wedged(&job)) {
        return Err(Refused::Not(job.state));
    }
    let was = job.state;
    match outbox.retry(event_id).await.map_err(Refused::Store)? {
        Some(job) => Ok((job, was)),
        None => Err(Refused::NotFound),
    }
}
