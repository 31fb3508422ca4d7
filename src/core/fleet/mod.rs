//! What the calls of many processes share: the credential's pause and a trigger's window.
//!
//! In one process the client's own gate and trigger limiter hold every call (`gate.rs`,
//! `trigger_limit.rs`). Workers in many processes share them through the database they already
//! share (the outbox's store): the engine asks a [`Fleet`] before each attempt and tells it what
//! the server said. The outbox implements it; nothing below the outbox knows a store.

pub(crate) mod gate;
pub(crate) mod retry_budget;
pub(crate) mod trigger_limit;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// The future of a [`Fleet`] method.
pub(crate) type FleetFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Limits shared by the workers of many processes.
pub(crate) trait Fleet: Send + Sync + fmt::Debug {
    /// Before an attempt: waits for the credential's shared pause to end and, for a delivery to
    /// `trigger` (its token), for a slot of its shared window. `Err(wait)` when either would
    /// take longer than `max_wait`. The slot, if one was taken, goes back with
    /// [`answered`](Self::answered).
    fn admit<'a>(
        &'a self,
        trigger: Option<&'a str>,
        max_wait: Duration,
    ) -> FleetFuture<'a, Result<Option<i64>, Duration>>;

    /// The attempt of `slot`, a delivery to `trigger` (its token), was answered (or gave up):
    /// the slot stays busy for one window of that trigger.
    fn answered<'a>(&'a self, trigger: Option<&'a str>, slot: i64) -> FleetFuture<'a, ()>;

    /// The server asked the credential to slow down for `wait`: every worker pauses.
    fn slow_down(&self, wait: Duration) -> FleetFuture<'_, ()>;
}
