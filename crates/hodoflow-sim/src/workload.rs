//! The workload: open-loop Poisson arrivals spread over N senders of mixed shapes.
//!
//! Open loop, as in the OSDI'22 artifact: events arrive whatever happens to earlier ones, so a
//! slow server does not slow the arrivals (a closed loop would hide metastability by pausing
//! its own load). Each event goes to a sender drawn uniformly; a sender's shape caps how many
//! of its events are in flight, and the rest wait in its FIFO (a tokio semaphore's waiters are
//! served in order). Arrivals wake the driver at their time, which tokio's timer rounds up to the
//! millisecond; each is stamped with its exact time.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::recorder::{Count, Recorder};
use crate::rng::Rng;
use crate::scenario::Scenario;
use crate::server::Clock;

/// One sender: delivers one event, `true` when it was delivered, `false` when given up.
pub(crate) trait Deliver: Send + Sync + std::fmt::Debug + 'static {
    /// Delivers event `event`.
    fn deliver(&self, event: u64) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;

    /// What its retry budget let go, by rule: the SDK's senders only.
    fn admissions(&self) -> Option<hodoflow_retry::limit::Admissions> {
        None
    }
}

/// A sender and its shape's slots (`None`: no limit).
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub(crate) sender: Arc<dyn Deliver>,
    pub(crate) slots: Option<Arc<Semaphore>>,
}

/// Offers the scenario's events to `senders` until the run ends.
pub(crate) async fn drive(
    scenario: &Scenario,
    senders: Vec<Slot>,
    recorder: Recorder,
    clock: Clock,
) {
    let mut rng = Rng::derive(scenario.seed, 0xa441_7a15);
    let end = scenario.duration.as_secs_f64();
    let n = senders.len() as u64;
    let mut next = rng.exp(1.0 / scenario.rate);
    let mut event = 0u64;
    loop {
        tokio::time::sleep_until(clock.wake_at(next.min(end))).await;
        let now = clock.now();
        if now >= end {
            break;
        }
        while next <= now {
            let slot = senders[rng.below(n) as usize].clone();
            recorder.count(Count::Offered, next);
            let id = event;
            event += 1;
            let recorder = recorder.clone();
            tokio::spawn(async move {
                let _permit = match &slot.slots {
                    Some(slots) => Some(slots.acquire().await),
                    None => None,
                };
                let delivered = slot.sender.deliver(id).await;
                let what = if delivered {
                    Count::Goodput
                } else {
                    Count::Lost
                };
                recorder.count(what, clock.now());
            });
            let rate = scenario.rate * scenario.trigger.load_at(next);
            next += rng.exp(1.0 / rate);
        }
    }
}
