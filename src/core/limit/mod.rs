//! Admission: every limit on sending an attempt is a [`Limiter`], asked for a scope.
//!
//! Before each attempt the engine asks its [`Limiters`] once, with an [`Ask`]: the scope the
//! attempt sits in (its route's route, or the credential), the service its answer speaks for,
//! what kind of attempt it is and the call's deadline. Each limiter admits it at once, after a
//! wait that ends in time for the attempt, or refuses it with why (a wait that cannot end
//! inside the budget is refused at once, never slept). After the answer each limiter hears
//! what it said of the scopes ([`Signal`], read from the vendor's profile by
//! [`scope::signal`]), with the permit it gave: at once, with no wait, so that a call in flight
//! carries no room for one. Only the fleet's store (`shared.rs`) is awaited after an answer,
//! being over the network, and only for a call given a fleet.
//!
//! One limiter a file, each holding only the scope it is asked for:
//! - `retry_budget/`: the client's retry bucket (`bucket.rs`) and, per service, the SRE
//!   throttle that holds calls while that service is down (`throttle.rs`, `history.rs`);
//! - `cubic.rs`: per scope, the send rate after a 429 without `Retry-After`;
//! - `window.rs`: per route, the pacing of a window (a route's requests per window);
//! - `gate.rs`: the credential's rate budget, and every scope a server closed until an instant;
//! - `shared.rs`: the same scopes, and which services are down, through a store, for workers
//!   in many processes (asked as the others are, but not a [`Limiter`]: its answers are
//!   awaited).
//!
//! tower's `Budget` (`deposit`/`withdraw`) and smithy-rs's `RetryStrategy` (asked before and
//! after each attempt) cut the same way: a limit is a small trait with one question, and a new
//! limit is a new implementation, not a new branch in the engine's loop.

pub(crate) mod cubic;
pub(crate) mod figures;
pub(crate) mod gate;
pub(crate) mod retry_budget;
pub(crate) mod scope;
pub(crate) mod shared;
pub(crate) mod window;

use std::time::Duration;

use crate::core::budget::Deadline;
use crate::core::error::ErrorKind;
use crate::core::runtime;
use crate::core::stats::Counters;

use cubic::SendRates;
use gate::Gate;
use retry_budget::{Admission, RetryBudget, Ticket};
pub(crate) use scope::{RouteKey, Scope, ServiceKey, Signal};
use shared::{Fleet, Heard, SharedLimits, SharedSlot};
use window::{WindowSlot, Windows};

/// What one attempt asks of the limiters.
#[derive(Clone, Copy)]
pub(crate) struct Ask<'a> {
    /// The client's endpoint as a fleet of processes names it (a vendor and a base URL).
    pub(crate) endpoint: &'a str,
    /// The shared scope the attempt sits in: its route, or the credential.
    pub(crate) scope: Scope,
    /// Its route, when it has a window of its own.
    pub(crate) route: Option<RouteKey>,
    /// The route's key as the fleet's store names it (a route's token, hashed there).
    pub(crate) route_name: Option<&'a str>,
    /// The service its answer speaks for.
    pub(crate) service: ServiceKey,
    /// What the retry budget charges for it.
    pub(crate) admission: Admission,
    /// Attempts its call may still send, this one included.
    pub(crate) attempts_left: u32,
    /// Paced retries its call may still send beyond them.
    pub(crate) paced_left: u32,
    /// Its call's deadline: every wait ends in time for the attempt.
    pub(crate) deadline: Deadline,
    /// Where waits are counted.
    pub(crate) counters: &'a Counters,
    /// The limits shared with other processes, for an outbox worker's call.
    pub(crate) fleet: Option<&'a dyn Fleet>,
    /// While the call queues for its route's slots before it starts: how long it may.
    pub(crate) queue_wait: Option<Duration>,
}

impl std::fmt::Debug for Ask<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ask")
            .field("scope", &self.scope)
            .field("service", &self.service)
            .field("admission", &self.admission)
            .field("attempts_left", &self.attempts_left)
            .field("paced_left", &self.paced_left)
            .finish_non_exhaustive()
    }
}

impl Ask<'_> {
    /// The longest any limiter may hold the attempt now: what is left of the call, less the
    /// least time an attempt needs.
    pub(crate) fn max_wait(&self) -> Duration {
        match self.queue_wait {
            Some(queue) => queue,
            None => self.deadline.max_wait(runtime::now()),
        }
    }
}

/// Why an attempt was not sent: nothing was, for it. A [`Fleet`](crate::limit::Fleet) returns
/// one when its wait would pass the call's budget; the call ends with
/// [`ErrorKind::BudgetExhausted`](crate::ErrorKind::BudgetExhausted), not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// [`ErrorKind::BudgetExhausted`] for a wait past the call's budget,
    /// [`ErrorKind::RetryBudgetExhausted`] for the retry budget's refusal.
    pub(crate) kind: ErrorKind,
    /// The whole message, starting with the kind's description.
    pub(crate) message: String,
    /// How long until the scope that refused opens again, when it is known: the earliest the
    /// same request could go.
    pub(crate) retry_after: Option<Duration>,
}

impl Refusal {
    /// A wait past the call's budget: `call budget exhausted: {why}`.
    pub fn past_budget(why: impl std::fmt::Display) -> Self {
        Self {
            kind: ErrorKind::BudgetExhausted,
            message: format!("{}: {why}", ErrorKind::BudgetExhausted.describe()),
            retry_after: None,
        }
    }

    /// The refusal, with how long until its scope opens again: the earliest the same request
    /// could go (an outbox puts its job off until then).
    #[must_use]
    pub fn with_retry_after(mut self, wait: Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }
}

/// One limit on sending attempts, asked for the scope of each attempt.
pub(crate) trait Limiter {
    /// What an admitted attempt holds until its answer.
    type Permit;

    /// Admits the attempt of `ask`: at once, after a wait within its time, or not at all.
    async fn admit(&self, ask: &Ask<'_>) -> Result<Self::Permit, Refusal>;

    /// The attempt of `permit` came back (or gave up) with `signal`: heard at once, with no
    /// wait (a call in flight carries no room for one).
    fn heard(&self, permit: Self::Permit, ask: &Ask<'_>, signal: &Signal<'_>);
}

/// The limiters of one client, asked in one order: the retry budget (may the call send at
/// all, while its service fails?), the send rate, the route's window, the credential's gate,
/// then the fleet's shared limits.
#[derive(Debug)]
pub(crate) struct Limiters {
    pub(crate) retry_budget: RetryBudget,
    pub(crate) rates: SendRates,
    pub(crate) windows: Windows,
    pub(crate) gate: Gate,
}

/// What one admitted attempt holds, one permit per limiter.
#[derive(Debug)]
pub(crate) struct Permits {
    ticket: Ticket,
    sent_at: tokio::time::Instant,
    slot: Option<WindowSlot>,
    shared: Option<SharedSlot>,
}

impl Permits {
    /// The retry tokens the attempt took, refunded if its call succeeds.
    pub(crate) fn cost(&self) -> u32 {
        self.ticket.cost()
    }

    /// Whether the attempt goes as the retry budget's probe of a service it holds down.
    pub(crate) fn is_probe(&self) -> bool {
        self.ticket.is_probe()
    }
}

/// The slots of a route's windows a call took while it queued, before it started: its first
/// attempt goes with them.
#[derive(Debug, Default)]
pub(crate) struct Queued {
    slot: Option<WindowSlot>,
    shared: Option<SharedSlot>,
}

impl Limiters {
    /// Queues the call of `ask` for its route's slots, this client's window and the fleet's,
    /// within `ask.queue_wait`, before its budget starts.
    pub(crate) async fn queue(&self, ask: &Ask<'_>) -> Result<Queued, Refusal> {
        let slot = self.windows.admit(ask).await?;
        let shared = SharedLimits(&self.windows).admit(ask).await?;
        Ok(Queued { slot, shared })
    }

    /// [`admit`](Limiter::admit), with the slots the call queued for, if it did.
    pub(crate) async fn admit_with(
        &self,
        ask: &Ask<'_>,
        queued: Option<Queued>,
    ) -> Result<Permits, Refusal> {
        let ticket = self.retry_budget.admit(ask).await?;
        let sent_at = self.rates.admit(ask).await?;
        let (slot, shared) = match queued {
            Some(Queued { slot, shared }) => (slot, shared),
            None => (self.windows.admit(ask).await?, None),
        };
        self.gate.admit(ask).await?;
        let shared = match shared {
            Some(shared) => Some(shared),
            None => SharedLimits(&self.windows).admit(ask).await?,
        };
        Ok(Permits {
            ticket,
            sent_at,
            slot,
            shared,
        })
    }
}

impl Limiters {
    /// The attempt of `permits` came back (or gave up) with `signal`: the client's own
    /// limiters hear it at once. A call given a fleet then tells the fleet
    /// ([`heard_by_fleet`](Self::heard_by_fleet)) with the shared slot returned here.
    pub(crate) fn heard(
        &self,
        permits: Permits,
        ask: &Ask<'_>,
        signal: &Signal<'_>,
    ) -> Option<SharedSlot> {
        // The window learns what the answer said before its slot is released, so the slot is
        // held for the window the server just stated.
        self.windows.heard(permits.slot, ask, signal);
        self.gate.heard((), ask, signal);
        self.rates.heard(permits.sent_at, ask, signal);
        self.retry_budget.heard(permits.ticket, ask, signal);
        permits.shared
    }

    /// Tells the fleet of a call given one what its attempt's answer said: the shared slot
    /// back, the scope it closed, and what the retry budget now finds of the service.
    pub(crate) async fn heard_by_fleet(
        &self,
        slot: Option<SharedSlot>,
        ask: &Ask<'_>,
        signal: &Signal<'_>,
    ) {
        if ask.fleet.is_none() {
            return;
        }
        let shared = SharedLimits(&self.windows);
        shared.heard(slot, ask, signal).await;
        let accepted = retry_budget::accepted(signal.answer.status());
        let (down_for, failed_in_a_row) = self.retry_budget.service_health(ask.service);
        let heard = Heard {
            accepted,
            down_for,
            failed_in_a_row,
        };
        shared.heard_service(ask, heard).await;
    }
}
