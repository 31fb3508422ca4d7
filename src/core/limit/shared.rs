//! The limits the calls of many processes share: the scopes a server closed, the routes'
//! windows, and which services are down, through a store.
//!
//! In one process the client's own limiters hold every call (`gate.rs`, `window.rs`). Workers
//! in many processes share them through the database they already share (an outbox's store):
//! before each attempt of a call given a [`Fleet`] the engine asks it for the attempt's scope,
//! and tells it what the server said, each scope under the same name in every process (its
//! endpoint's name, and for a route a name derived from its key, never the key). What a server
//! stated of a route's window travels with the window, so a worker that starts later paces as
//! the fleet does. The trait is public so that a store outside this crate can implement it;
//! nothing in this crate knows a store.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::core::limit::figures::{RouteLimit, RoutePacing};
use crate::core::limit::scope::{Scope, Signal};
use crate::core::limit::window::Windows;
use crate::core::limit::{Ask, Refusal};
use crate::core::runtime;
use crate::core::stats::{Counters, Holding};

/// The future of a [`Fleet`] method.
pub type FleetFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Whom a shared limit is asked for: the scope of one attempt, named as every process names it,
/// and where the client counts the attempt's waits.
#[derive(Clone, Copy)]
pub struct FleetAsk<'a> {
    endpoint: &'a str,
    service: &'static str,
    scope: Scope,
    route: Option<&'a str>,
    pacing: Option<RoutePacing>,
    counters: &'a Counters,
}

impl fmt::Debug for FleetAsk<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetAsk")
            .field("endpoint", &self.endpoint)
            .field("service", &self.service)
            .field("scope", &self.scope.label())
            .field("pacing", &self.pacing)
            .finish_non_exhaustive()
    }
}

impl<'a> FleetAsk<'a> {
    /// Whom the client sends for, as every process names it: its base URL, and for a static
    /// token a short hash of it ([`RetryingClient::endpoint`](crate::RetryingClient::endpoint)).
    /// Never a secret.
    pub fn endpoint(&self) -> &'a str {
        self.endpoint
    }

    /// The service the attempt's answers speak for, as its vendor's profile names it: with the
    /// endpoint, whose limits these are (one vendor's never hold another's).
    pub fn service(&self) -> &'static str {
        self.service
    }

    /// The key of the attempt's route, when it has a window of its own (a token in its
    /// URL, say). A secret: derive a name from it (a hash), never store or show it.
    pub fn route(&self) -> Option<&'a str> {
        self.route
    }

    /// Whether the scope asked for is the route's own (a route's window or pause) rather than
    /// the credential's: name it by the route, not only by the endpoint.
    pub fn in_route_scope(&self) -> bool {
        matches!(self.scope, Scope::Route(_))
    }

    /// The scope as a person reads it (`the credential`, a route's noun and a short hash of its key): never a secret.
    pub fn scope_label(&self) -> String {
        self.scope.label()
    }

    /// The route's window as this client knows it: what the server stated, or the vendor's
    /// documented default; `None` for a route without a window, or none at all.
    pub fn pacing(&self) -> Option<RoutePacing> {
        self.pacing
    }

    /// Counts the attempt as held by its closed scope in the client's
    /// [`Stats`](crate::Stats) until the returned guard drops.
    pub fn hold_closed(&self) -> Holding<'a> {
        match self.scope {
            Scope::Route(_) => self.counters.route_hold.begin(None),
            _ => self.counters.gate_hold.begin(None),
        }
    }

    /// Counts the attempt as held by its route's full window, `pacing`, until the returned
    /// guard drops.
    pub fn hold_in_window(&self, pacing: RoutePacing) -> Holding<'a> {
        self.counters.route_hold.begin(Some(pacing))
    }

    /// The attempt was turned away by its route's full window, `pacing`, which frees in
    /// `wait`: the client's [`Stats`](crate::Stats) say so.
    pub fn turned_away(&self, pacing: RoutePacing, wait: Duration) {
        self.counters.route_hold.turned_away(Some(pacing), wait);
    }
}

/// What one answer told a client of its service, for a [`Fleet`] to share: whether the
/// service accepted it (any answer but a 429 or a 5xx; no answer is a refusal), how long the
/// client's retry budget has found the service down, counted from the outage's onset, and how
/// many of its attempts failed in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heard {
    pub(crate) accepted: bool,
    pub(crate) down_for: Option<Duration>,
    pub(crate) failed_in_a_row: u32,
}

impl Heard {
    /// Whether the service accepted the attempt.
    pub fn accepted(&self) -> bool {
        self.accepted
    }

    /// How long this client's retry budget has found the service down, from the onset of its
    /// outage; `None` while it finds it up (or keeps no budget).
    pub fn down_for(&self) -> Option<Duration> {
        self.down_for
    }

    /// The attempts to the service that failed (a 5xx, or no answer) since the newest one it
    /// accepted, this one included, as this client's retry budget counted them (a 429 speaks
    /// of a narrower scope and is not counted). Evidence a fleet may act on before any one
    /// client's ratio finds the service down: a client with a long healthy history needs
    /// seconds of refusals for that. 0 when this answer was accepted or no budget is kept.
    pub fn failed_in_a_row(&self) -> u32 {
        self.failed_in_a_row
    }
}

/// Limits shared by the calls of many processes: the scopes a server closed, the routes'
/// windows and the services found down, kept where every process reads them. Given to a call with its `fleet` setter (an
/// outbox's workers give theirs to every call they make).
///
/// Every method is asked within the call's budget: a store that does not answer ends the call
/// when its time does, and one that fails should let the attempt go (degrading to this
/// process's own limits), never hang.
pub trait Fleet: Send + Sync + fmt::Debug {
    /// Before an attempt: waits while its scope is closed and, for a route with a window, for a
    /// slot of the shared window, at most `max_wait`. The slot, if one was taken, goes back
    /// with [`answered`](Self::answered).
    ///
    /// # Errors
    ///
    /// A [`Refusal`] when the wait would pass `max_wait`: the attempt is not sent.
    fn admit<'a>(
        &'a self,
        ask: FleetAsk<'a>,
        max_wait: Duration,
    ) -> FleetFuture<'a, Result<Option<i64>, Refusal>>;

    /// The attempt of `slot` was answered (or gave up): the slot stays busy for one window of
    /// its route; `learned` is what the answer stated of the window.
    fn answered<'a>(
        &'a self,
        ask: FleetAsk<'a>,
        slot: i64,
        learned: Option<RouteLimit>,
    ) -> FleetFuture<'a, ()>;

    /// The server closed the scope of `ask` for `pause`, because of `why` (a few words, never
    /// a secret): every process holds it.
    fn close<'a>(&'a self, ask: FleetAsk<'a>, pause: Duration, why: &'a str)
    -> FleetFuture<'a, ()>;

    /// After every answer of a call given the fleet: what it told this client of the service
    /// of `ask` ([`FleetAsk::service`] at [`FleetAsk::endpoint`]). A fleet that shares services'
    /// health holds the service down for every process once one finds it down, and up again
    /// once an answer is accepted; it should write only when what it keeps changes, never once
    /// an answer.
    fn heard<'a>(&'a self, ask: FleetAsk<'a>, heard: Heard) -> FleetFuture<'a, ()>;
}

/// A slot of a shared window, by the store's ID.
#[derive(Debug)]
pub(crate) struct SharedSlot(i64);

/// The fleet's limits as a [`Limiter`], with the client's windows (what it knows of a route's
/// pacing): asked only for the calls given a [`Fleet`].
#[derive(Debug)]
pub(crate) struct SharedLimits<'w>(pub(crate) &'w Windows);

impl SharedLimits<'_> {
    /// Tells the fleet, if the call has one, what the answer told this client of the service
    /// of `ask`.
    pub(crate) async fn heard_service(&self, ask: &Ask<'_>, heard: Heard) {
        if let Some(fleet) = ask.fleet {
            fleet.heard(self.ask(ask, ask.scope), heard).await;
        }
    }

    /// The attempt of `ask` as the fleet names it, in `scope`.
    fn ask<'a>(&self, ask: &'a Ask<'_>, scope: Scope) -> FleetAsk<'a> {
        FleetAsk {
            endpoint: ask.endpoint,
            service: ask.service.name,
            scope,
            route: ask.route_name,
            pacing: ask
                .route
                .and_then(|route| self.0.learned_or_documented(route)),
            counters: ask.counters,
        }
    }
}

/// Not a [`Limiter`](super::Limiter): its answers come from a store over the network, so it is awaited after
/// an answer too, where the client's own limiters hear at once.
impl SharedLimits<'_> {
    /// Waits for the fleet's closed scope and shared window, within the time left; a store
    /// that does not answer ends the call when its time does.
    pub(crate) async fn admit(&self, ask: &Ask<'_>) -> Result<Option<SharedSlot>, Refusal> {
        let Some(fleet) = ask.fleet else {
            return Ok(None);
        };
        let max_wait = ask.max_wait();
        match runtime::timeout(max_wait, fleet.admit(self.ask(ask, ask.scope), max_wait)).await {
            Ok(admitted) => admitted.map(|slot| slot.map(SharedSlot)),
            Err(_) => Err(Refusal::past_budget(format!(
                "the fleet's store did not answer for the shared limits of {} within the {:.1}s this call has left to wait",
                ask.scope.label(),
                max_wait.as_secs_f64()
            ))),
        }
    }

    /// Gives the shared slot back with what the answer stated of its window, and closes for
    /// every worker the scope the answer closed.
    pub(crate) async fn heard(&self, slot: Option<SharedSlot>, ask: &Ask<'_>, signal: &Signal<'_>) {
        let Some(fleet) = ask.fleet else {
            return;
        };
        if let Some(SharedSlot(slot)) = slot {
            fleet
                .answered(self.ask(ask, ask.scope), slot, signal.window.limit)
                .await;
        }
        if let Some(closing) = signal.closes {
            let why = closing.why.describe();
            fleet
                .close(self.ask(ask, closing.scope), closing.pause, &why)
                .await;
        }
    }
}
