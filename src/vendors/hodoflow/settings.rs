//! What only Hodoflow's calls read, set on its builder and held by its client beside the
//! generic [`RetryingClient`](crate::RetryingClient).

use std::time::Duration;

use crate::core::signing::Signer;

/// What only Hodoflow's calls read: the webhook body limit, the signing secrets of deliveries,
/// how often a run is polled.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) webhook_body_limit: usize,
    pub(crate) poll_interval: Duration,
    /// The secrets every delivery is signed with, unless it sets its own.
    pub(crate) signer: Option<Signer>,
}
