//! Hodoflow's outbox jobs: a webhook delivery with its delivery ID, a JSON:API write with its
//! key, each one call of the [`HodoflowClient`] the workers were built with.

use std::sync::Arc;

use bytes::Bytes;

use crate::core::error::Error;
use crate::core::key::{DeliveryId, IdempotencyKey};
use crate::core::limit::shared::Fleet;
use crate::vendors::Surface;
use crate::vendors::hodoflow::client::HodoflowClient;
use crate::vendors::hodoflow::outcome::WebhookOutcome;
use crate::vendors::target::{Deliver, DeliverFuture, Delivered, Target, unresolved};

impl Deliver for HodoflowClient {
    fn delivers(&self, target: &Target) -> bool {
        matches!(target, Target::Webhook { .. } | Target::Write { .. })
    }

    fn down_for(&self, target: &Target) -> Option<std::time::Duration> {
        match target {
            Target::Webhook { .. } => self.service_down_for(Surface::Webhook),
            _ => self.service_down_for(Surface::JsonApiWrite),
        }
    }

    fn deliver<'a>(
        &'a self,
        target: &'a Target,
        identity: &'a IdempotencyKey,
        body: &'a Bytes,
        fleet: Arc<dyn Fleet>,
        queue: std::time::Duration,
    ) -> DeliverFuture<'a> {
        Box::pin(async move {
            match target {
                Target::Webhook { trigger } => {
                    let Some(token) = trigger.token() else {
                        return Err(unresolved(trigger));
                    };
                    let delivery = self
                        .deliver(token.clone(), body.clone())
                        .delivery_id(DeliveryId::new(identity.clone()))
                        .fleet(fleet)
                        .queue(queue)
                        .send()
                        .await?;
                    let attempts = delivery.attempts().len() as u32;
                    Ok(match delivery.outcome() {
                        WebhookOutcome::Accepted { run_id } => (
                            Delivered::Accepted {
                                run_id: run_id.clone(),
                            },
                            attempts,
                        ),
                        WebhookOutcome::Duplicate => (Delivered::Duplicate, attempts),
                    })
                }
                Target::Write { method, path } => {
                    let response = self
                        .write(method.clone(), path, identity.clone(), body.clone())
                        .fleet(fleet)
                        .send()
                        .await?;
                    Ok((Delivered::Done, response.attempts().len() as u32))
                }
                Target::Modulify { .. } | Target::Route { .. } => Err(Error::invalid_input(
                    "only a webhook or JSON:API write job is delivered by a HodoflowClient",
                )),
            }
        })
    }
}
