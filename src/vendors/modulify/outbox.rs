//! Modulify's outbox jobs: a method call with its key (unless the catalogue says it only
//! reads), one call of the [`ModulifyClient`] the workers were given.

use std::sync::Arc;

use bytes::Bytes;

use crate::core::error::Error;
use crate::core::key::IdempotencyKey;
use crate::core::limit::shared::Fleet;
use crate::vendors::Surface;
use crate::vendors::modulify::client::ModulifyClient;
use crate::vendors::target::{Deliver, DeliverFuture, Delivered, Target};

impl Deliver for ModulifyClient {
    fn delivers(&self, target: &Target) -> bool {
        matches!(target, Target::Modulify { .. })
    }

    fn down_for(&self, _: &Target) -> Option<std::time::Duration> {
        self.client().service_down_for(Surface::Modulify)
    }

    fn deliver<'a>(
        &'a self,
        target: &'a Target,
        identity: &'a IdempotencyKey,
        body: &'a Bytes,
        fleet: Arc<dyn Fleet>,
        _queue: std::time::Duration,
    ) -> DeliverFuture<'a> {
        Box::pin(async move {
            let Target::Modulify { method } = target else {
                return Err(Error::invalid_input(
                    "only a Modulify job is delivered by a ModulifyClient",
                ));
            };
            let answer = self
                .call(method, body.clone())
                .key(identity.clone())
                .fleet(fleet)
                .send()
                .await?;
            Ok((Delivered::Done, answer.attempts().len() as u32))
        })
    }
}
