//! The limits the calls of many processes share: the scopes a server closed, and the routes'
//! windows, through a store.
//!
//! In one process the client's own limiters hold every call (`gate.rs`, `window.rs`). Workers
//! in many processes share them through the database they already share (the outbox's store):
//! before each attempt the engine asks a [`Fleet`] for the attempt's scope, and tells it what
//! the server said, each scope under the same name in every process (its endpoint's name, and
//! for a route a name derived from its key, never the key). What a server stated of a route's
//! window travels with the window, so a worker that starts later paces as the fleet does. The
//! outbox implements [`Fleet`]; nothing below the outbox knows a store.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::core::limit::figures::RouteLimit;
use crate::core::limit::scope::{Closing, Scope, Signal};
use crate::core::limit::{Ask, Limiter, Refusal};
use crate::core::runtime;

/// The future of a [`Fleet`] method.
pub(crate) type FleetFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Whom a shared limit is asked for: the scope of one attempt, named as every process names it.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(feature = "outbox"),
    allow(dead_code, reason = "read by the outbox's store")
)]
pub(crate) struct FleetAsk<'a> {
    /// The client's endpoint as the fleet names it (a base URL; never a secret).
    pub(crate) endpoint: &'a str,
    /// The service the attempt's answers speak for, as its vendor's profile names it: with the
    /// endpoint, whose limits these are (one vendor's never hold another's).
    pub(crate) service: &'static str,
    /// The scope the attempt sits in.
    pub(crate) scope: Scope,
    /// The route's key (a route's token), for the fleet to derive the route's name from.
    pub(crate) route: Option<&'a str>,
}

/// Limits shared by the workers of many processes.
pub(crate) trait Fleet: Send + Sync + fmt::Debug {
    /// Before an attempt: waits while its scope is closed and, for a route with a window, for a
    /// slot of the shared window, at most `max_wait`. The slot, if one was taken, goes back
    /// with [`answered`](Self::answered).
    fn admit<'a>(
        &'a self,
        shared: FleetAsk<'a>,
        max_wait: Duration,
    ) -> FleetFuture<'a, Result<Option<i64>, Refusal>>;

    /// The attempt of `slot` was answered (or gave up): the slot stays busy for one window of
    /// its route; `learned` is what the answer stated of the window.
    fn answered<'a>(
        &'a self,
        shared: FleetAsk<'a>,
        slot: i64,
        learned: Option<RouteLimit>,
    ) -> FleetFuture<'a, ()>;

    /// The server closed a scope: every worker holds it.
    fn close<'a>(&'a self, shared: FleetAsk<'a>, closing: Closing) -> FleetFuture<'a, ()>;
}

/// A slot of a shared window, by the store's ID.
#[derive(Debug)]
pub(crate) struct SharedSlot(i64);

/// The fleet's limits as a [`Limiter`]: asked only for an outbox worker's calls.
#[derive(Debug)]
pub(crate) struct SharedLimits;

impl Ask<'_> {
    /// The attempt as the fleet names it.
    fn shared(&self) -> FleetAsk<'_> {
        FleetAsk {
            endpoint: self.endpoint,
            service: self.service.name,
            scope: self.scope,
            route: self.route_name,
        }
    }
}

impl Limiter for SharedLimits {
    type Permit = Option<SharedSlot>;

    /// Waits for the fleet's closed scope and shared window, within the time left; a store
    /// that does not answer ends the call when its time does.
    async fn admit(&self, ask: &Ask<'_>) -> Result<Option<SharedSlot>, Refusal> {
        let Some(fleet) = ask.fleet else {
            return Ok(None);
        };
        let max_wait = ask.max_wait();
        match runtime::timeout(max_wait, fleet.admit(ask.shared(), max_wait)).await {
            Some(admitted) => admitted.map(|slot| slot.map(SharedSlot)),
            None => Err(Refusal::past_budget(format!(
                "the fleet's store did not answer for the shared limits of {} within the {:.1}s this call has left to wait",
                ask.scope.label(),
                max_wait.as_secs_f64()
            ))),
        }
    }

    /// Gives the shared slot back with what the answer stated of its window, and closes for
    /// every worker the scope the answer closed.
    async fn heard(&self, slot: Option<SharedSlot>, ask: &Ask<'_>, signal: &Signal<'_>) {
        let Some(fleet) = ask.fleet else {
            return;
        };
        if let Some(SharedSlot(slot)) = slot {
            fleet
                .answered(ask.shared(), slot, signal.window.limit)
                .await;
        }
        if let Some(closing) = signal.closes {
            fleet.close(ask.shared(), closing).await;
        }
    }
}
