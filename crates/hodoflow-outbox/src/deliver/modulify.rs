//! Modulify's outbox jobs: a method call with its key (unless the catalogue says it only
//! reads), one call of the [`ModulifyClient`] the workers were given.

use std::sync::Arc;

use crate::target::{Deliver, DeliverFuture, Delivered, JobCall, Sent, Target};
use hodoflow_retry::Error;
use hodoflow_retry::ModulifyClient;
use hodoflow_retry::Surface;

impl Deliver for ModulifyClient {
    fn delivers(&self, target: &Target) -> bool {
        matches!(target, Target::Modulify { .. })
    }

    fn down_for(&self, _: &Target) -> Option<std::time::Duration> {
        self.client().service_down_for(Surface::Modulify)
    }

    fn deliver<'a>(&'a self, job: JobCall<'a>) -> DeliverFuture<'a> {
        Box::pin(async move {
            let Target::Modulify { method } = job.target else {
                return Err(Error::invalid_input(
                    "only a Modulify job is delivered by a ModulifyClient",
                ));
            };
            let answer = self
                .call(method, job.body.clone())
                .key(job.identity.clone())
                .fleet(Arc::clone(&job.fleet))
                .send()
                .await?;
            Ok(Sent::new(Delivered::Done, answer.attempts().len() as u32))
        })
    }
}
