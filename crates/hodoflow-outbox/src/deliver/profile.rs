//! Outbox jobs of a vendor of your own: a [`Target::Route`] job is one request of the
//! [`Profile`] the workers registered under the job's vendor name, sent through that vendor's
//! [`RetryingClient`] with the job's identity as the profile's key.

use std::time::Duration;

use crate::target::{Deliver, DeliverFuture, Delivered, JobCall, Sent, Target};
use hodoflow_retry::Error;
use hodoflow_retry::Profile;
use hodoflow_retry::RetryingClient;

/// The workers' client and profile for the jobs of one vendor of your own.
#[derive(Debug)]
pub(crate) struct ProfileJobs {
    pub(crate) vendor: String,
    pub(crate) client: RetryingClient,
    pub(crate) profile: Profile,
}

impl Deliver for ProfileJobs {
    fn delivers(&self, target: &Target) -> bool {
        matches!(target, Target::Route { vendor, .. } if *vendor == self.vendor)
    }

    fn down_for(&self, _: &Target) -> Option<Duration> {
        self.client.service_down_for(self.profile)
    }

    fn deliver<'a>(&'a self, job: JobCall<'a>) -> DeliverFuture<'a> {
        Box::pin(async move {
            let Target::Route { method, path, .. } = job.target else {
                return Err(Error::invalid_input(
                    "only a job of a vendor of your own is delivered by its profile",
                ));
            };
            let response = job
                .request(&self.client, self.profile, method.clone(), path)
                .send()
                .await?;
            Ok(Sent::new(Delivered::Done, response.attempts().len() as u32))
        })
    }
}
