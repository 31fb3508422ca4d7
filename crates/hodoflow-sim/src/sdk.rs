//! placeholder until the transport seam lands
use std::future::Future;
use std::pin::Pin;

use crate::recorder::Recorder;
use crate::server::{Clock, Server};
use crate::workload::Deliver;

/// The SDK's sender (placeholder).
#[derive(Debug)]
pub(crate) struct SdkSender;

impl SdkSender {
    pub(crate) fn new(_budget: bool, _s: Server, _r: Recorder, _c: Clock, _seed: u64) -> Self {
        SdkSender
    }
}

impl Deliver for SdkSender {
    fn deliver(&self, _event: u64) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async { false })
    }
}
