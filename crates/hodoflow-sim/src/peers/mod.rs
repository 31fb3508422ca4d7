//! The peers: other clients' retry policies, written as models in the sim.
//!
//! A peer is a small rule, "on this answer, retry after `d` or stop", plus whatever state its
//! client shares between calls (a retry budget, gRPC's token count). [`PeerSender`] drives it:
//! it sends attempts to the same [`Server`] the SDK's senders use, with the same sender shapes,
//! and drops an attempt at its timeout exactly as the SDK's engine does (the server goes on
//! serving it). Each model cites the source file and version its defaults come from.

mod backon;
mod grpc;
mod js_loop;
mod osdi22;
mod reqwest_builtin;
mod reqwest_retry;

pub(crate) use self::backon::BackonDefault;
pub(crate) use grpc::GrpcA6;
pub(crate) use js_loop::JsLoop;
pub(crate) use osdi22::Osdi22Client;
pub(crate) use reqwest_builtin::ReqwestBuiltin;
pub(crate) use reqwest_retry::ReqwestRetryDefault;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::recorder::{Count, Recorder};
use crate::rng::Rng;
use crate::server::{Clock, Reply, Server};
use crate::workload::Deliver;

/// What a peer saw of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// `202`, accepted or duplicate: the event is delivered.
    Delivered,
    /// `503` with `Retry-After` (seconds).
    Unavailable(u32),
    /// `429` with `Retry-After` (seconds).
    TooMany(u32),
    /// No answer within the attempt's timeout.
    Timeout,
}

impl From<Reply> for Seen {
    fn from(reply: Reply) -> Self {
        match reply {
            Reply::Accepted | Reply::Duplicate => Seen::Delivered,
            Reply::Unavailable(after) => Seen::Unavailable(after),
            Reply::TooMany(after) => Seen::TooMany(after),
        }
    }
}

/// What a peer does next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Next {
    /// The event is delivered.
    Done,
    /// Send again after this wait.
    Retry(Duration),
    /// Give the event up.
    GiveUp,
}

/// One client's retry policy. One value per sender: state in it is shared by that sender's calls.
pub(crate) trait Peer: Send + Sync + std::fmt::Debug + 'static {
    /// Each attempt's timeout, given the scenario's timeout for clients that have none.
    fn attempt_timeout(&self, scenario_timeout: Duration) -> Duration;

    /// The whole call's deadline, where the client has one (gRPC's).
    fn deadline(&self, _scenario_timeout: Duration) -> Option<Duration> {
        None
    }

    /// After `seen` for attempt `attempt` (1 for the first), at `now` seconds.
    fn next(&self, attempt: u32, seen: Seen, now: f64, rng: &mut Rng) -> Next;
}

/// A sender whose calls follow a [`Peer`].
#[derive(Debug)]
pub(crate) struct PeerSender {
    peer: Arc<dyn Peer>,
    server: Server,
    recorder: Recorder,
    clock: Clock,
    seed: u64,
    scenario_timeout: Duration,
}

impl PeerSender {
    /// A sender of `peer` to `server`.
    pub(crate) fn new(
        peer: Arc<dyn Peer>,
        server: Server,
        recorder: Recorder,
        clock: Clock,
        seed: u64,
        scenario_timeout: Duration,
    ) -> Self {
        PeerSender {
            peer,
            server,
            recorder,
            clock,
            seed,
            scenario_timeout,
        }
    }

    async fn call(&self, event: u64) -> bool {
        let mut rng = Rng::derive(self.seed, event);
        let started = self.clock.now();
        let deadline = self.peer.deadline(self.scenario_timeout);
        let mut attempt = 1;
        loop {
            let mut timeout = self.peer.attempt_timeout(self.scenario_timeout);
            if let Some(deadline) = deadline {
                let left = deadline.as_secs_f64() - (self.clock.now() - started);
                if left <= 0.0 {
                    return false;
                }
                timeout = timeout.min(Duration::from_secs_f64(left));
            }
            let seen = match tokio::time::timeout(timeout, self.server.submit(event, event)).await {
                Ok(reply) => Seen::from(reply),
                Err(_) => {
                    self.recorder.count(Count::Timeout, self.clock.now());
                    Seen::Timeout
                }
            };
            match self.peer.next(attempt, seen, self.clock.now(), &mut rng) {
                Next::Done => return true,
                Next::GiveUp => return false,
                Next::Retry(wait) => {
                    if let Some(deadline) = deadline
                        && self.clock.now() - started + wait.as_secs_f64() >= deadline.as_secs_f64()
                    {
                        return false;
                    }
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    attempt += 1;
                }
            }
        }
    }
}

impl Deliver for PeerSender {
    fn deliver(&self, event: u64) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(self.call(event))
    }
}
