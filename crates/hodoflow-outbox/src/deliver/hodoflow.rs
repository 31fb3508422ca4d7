//! Hodoflow's outbox jobs: a webhook delivery with its delivery ID, a JSON:API write with its
//! key, each one call of the [`HodoflowClient`] the workers were built with.

use std::sync::Arc;

use crate::target::{Deliver, DeliverFuture, Delivered, JobCall, Sent, Target, unresolved};
use hodoflow_retry::DeliveryId;
use hodoflow_retry::Error;
use hodoflow_retry::HodoflowClient;
use hodoflow_retry::Surface;
use hodoflow_retry::webhook::WebhookOutcome;

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

    fn deliver<'a>(&'a self, job: JobCall<'a>) -> DeliverFuture<'a> {
        Box::pin(async move {
            let (identity, body) = (job.identity, job.body);
            match job.target {
                Target::Webhook { trigger } => {
                    let Some(token) = trigger.token() else {
                        return Err(unresolved(trigger));
                    };
                    let delivery = self
                        .deliver(token.clone(), body.clone())
                        .delivery_id(DeliveryId::new(identity.clone()))
                        .fleet(Arc::clone(&job.fleet))
                        .queue(job.queue)
                        .send()
                        .await?;
                    let attempts = delivery.attempts().len() as u32;
                    let outcome = match delivery.outcome() {
                        WebhookOutcome::Accepted { run_id } => Delivered::Accepted {
                            run_id: run_id.clone(),
                        },
                        WebhookOutcome::Duplicate => Delivered::Duplicate,
                        // A success this outbox does not name apart.
                        _ => Delivered::Done,
                    };
                    Ok(Sent::new(outcome, attempts))
                }
                Target::Write { method, path } => {
                    let response = self
                        .write(method.clone(), path, identity.clone(), body.clone())
                        .fleet(Arc::clone(&job.fleet))
                        .send()
                        .await?;
                    Ok(Sent::new(Delivered::Done, response.attempts().len() as u32))
                }
                Target::Modulify { .. } | Target::Route { .. } => Err(Error::invalid_input(
                    "only a webhook or JSON:API write job is delivered by a HodoflowClient",
                )),
            }
        })
    }
}
