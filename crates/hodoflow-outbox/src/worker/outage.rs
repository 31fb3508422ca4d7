//! Services the fleet holds down: what one worker's retry budget found (or
//! [`FAILURES_TO_HOLD`] failures in a row it met), shared through the store, so every process
//! holds a service down within [`OUTAGE_READ_EVERY`] of the first to find it, and the whole fleet probes it one attempt at a time, on the retry budget's schedule
//! ([`RetryBudget::probe_interval`]). Without it each process probes on its own: twenty
//! processes sent twenty times one client's probes into an outage.
//!
//! The store is read at most every [`OUTAGE_READ_EVERY`] a service, or after a refused answer
//! while this process does not hold the service down (so a process meeting an outage learns at
//! its next attempt that another found it first), and written only when what this process
//! knows changes (a service found down, or up again), never once an attempt. A
//! store that fails or does not answer leaves each process to its own retry budget: the
//! attempt goes, as it would without a fleet.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use hodoflow_retry::limit::{Heard, RetryBudget};

use crate::job::{Outage, Probe};
use crate::store::Store;

/// How long a worker trusts what it last read of a service's outage: another process's
/// finding reaches it within this.
pub const OUTAGE_READ_EVERY: Duration = Duration::from_millis(250);
/// Failed attempts in a row (5xx answers, or none) after which one worker holds the service
/// down for the fleet, before its own retry budget finds it down: a worker with a long healthy
/// history needs seconds of refusals for its ratio to cross, and a fleet sends at its whole
/// healthy rate meanwhile. Six, so a service failing a fifth of its attempts at random holds
/// the fleet about once in 20,000 attempts, for one probe's time and up to
/// [`OUTAGE_READ_EVERY`] more; one failing a third of them, about once in 1,100 (every other
/// second at a thousand attempts a second): a service that degraded sees less load, and
/// nothing waits longer than that.
pub const FAILURES_TO_HOLD: u32 = 6;
/// Services kept at most; past this, what was read is forgotten and read again.
const KEEP_SERVICES: usize = 1024;

/// What this process knows of the services the fleet holds down.
#[derive(Debug, Default)]
pub(super) struct Outages {
    known: Mutex<HashMap<String, Known>>,
    /// One probe's turn taken at a time in this process: the others find it in `known`.
    turn: tokio::sync::Mutex<()>,
}

/// What this process knows of one service.
#[derive(Debug, Clone, Copy)]
struct Known {
    /// When it was read from the store (or written), on this process's monotonic clock.
    read: tokio::time::Instant,
    /// The outage, while the fleet holds the service down.
    outage: Option<Outage>,
    /// This process took the fleet's probe turn and has not heard the probe's answer: an
    /// accepted answer now ends the outage for the fleet.
    probing: bool,
}

/// Whether an attempt may go, as the fleet's outage of its service says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Turn {
    /// The service is not held down, or this attempt is the fleet's probe: send.
    Go,
    /// Another process probes: wait until this time, then ask again.
    Wait(SystemTime),
}

impl Outages {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Known>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What this process now knows of `scope`, read or written just now.
    fn learned(&self, scope: &str, outage: Option<Outage>, probing: bool) {
        let read = tokio::time::Instant::now();
        self.remember(
            scope,
            Known {
                read,
                outage,
                probing,
            },
        );
    }

    fn remember(&self, scope: &str, known: Known) {
        let mut all = self.lock();
        if !all.contains_key(scope) && all.len() >= KEEP_SERVICES {
            all.clear();
        }
        all.insert(scope.to_owned(), known);
    }

    /// The outage of the service `scope` as last read, read again when older than
    /// [`OUTAGE_READ_EVERY`]; `None` while the fleet does not hold it down, or when the store
    /// failed.
    async fn outage(&self, store: &dyn Store, scope: &str) -> Option<Outage> {
        let cached = self.lock().get(scope).copied();
        if let Some(known) = cached
            && known.read.elapsed() < OUTAGE_READ_EVERY
        {
            return known.outage;
        }
        let outage = match store.outage(scope).await {
            Ok(outage) => outage,
            Err(error) => {
                tracing::warn!(error = %error, "a service's shared outage could not be read; sending");
                None
            }
        };
        let probing = cached.is_some_and(|known| known.probing) && outage.is_some();
        self.learned(scope, outage, probing);
        outage
    }

    /// Whether an attempt to the service `scope` may go at `now`: at once while the fleet
    /// does not hold it down; while it does, only as the fleet's probe, when the probe's time
    /// came and this process takes its turn (the next then waits
    /// [`RetryBudget::probe_interval`] of the outage's age).
    pub(super) async fn turn(&self, store: &dyn Store, scope: &str, now: SystemTime) -> Turn {
        let Some(outage) = self.outage(store, scope).await else {
            return Turn::Go;
        };
        if outage.probe_at() > now {
            return Turn::Wait(outage.probe_at());
        }
        let _turn = self.turn.lock().await;
        // Another attempt of this process may have taken the turn while this one waited.
        let known = self.lock().get(scope).copied();
        match known.and_then(|known| known.outage) {
            None => return Turn::Go,
            Some(outage) if outage.probe_at() > now => return Turn::Wait(outage.probe_at()),
            Some(_) => {}
        }
        let down_for = now.duration_since(outage.since()).unwrap_or(Duration::ZERO);
        let next = now
            .checked_add(RetryBudget::probe_interval(down_for))
            .unwrap_or(now);
        let (turn, outage, probing) = match store.take_probe(scope, next, now).await {
            Ok(Probe::Granted) => (Turn::Go, Some(Outage::new(outage.since(), next)), true),
            Ok(Probe::NotBefore(at)) => {
                (Turn::Wait(at), Some(Outage::new(outage.since(), at)), false)
            }
            Ok(Probe::Up) => (Turn::Go, None, false),
            Err(error) => {
                tracing::warn!(error = %error, "a shared probe's turn could not be taken; sending");
                return Turn::Go;
            }
        };
        self.learned(scope, outage, probing);
        turn
    }

    /// What an answer told this process of the service `scope`, at `now`: a refused answer
    /// while its retry budget finds the service down, or the [`FAILURES_TO_HOLD`]th failure
    /// in a row, holds the service down for the fleet, if the fleet does not already; an accepted answer ends the fleet's outage when it answers
    /// this process's probe, or when this process finds the service up.
    pub(super) async fn heard(
        &self,
        store: &dyn Store,
        scope: &str,
        heard: Heard,
        now: SystemTime,
    ) {
        let known = self.lock().get(scope).copied();
        let held = known.is_some_and(|known| known.outage.is_some());
        let probing = known.is_some_and(|known| known.probing);
        if !heard.accepted() {
            if let Some(known) = known.filter(|known| known.probing) {
                self.remember(
                    scope,
                    Known {
                        probing: false,
                        ..known
                    },
                );
            }
            if held {
                return;
            }
            let down_for = match heard.down_for() {
                Some(down_for) => down_for,
                None if heard.failed_in_a_row() >= FAILURES_TO_HOLD => Duration::ZERO,
                None => {
                    // Refused, and not yet found down here: another process may have found it,
                    // so the next attempt reads the store rather than what it read before.
                    self.lock().remove(scope);
                    return;
                }
            };
            let since = now.checked_sub(down_for).unwrap_or(now);
            if let Err(error) = store.service_down(scope, since, now).await {
                tracing::warn!(error = %error, "a service's outage could not be shared");
                return;
            }
            self.remember(
                scope,
                Known {
                    read: tokio::time::Instant::now(),
                    outage: Some(Outage::new(since, now)),
                    probing: false,
                },
            );
        } else if held && (probing || heard.down_for().is_none()) {
            if let Err(error) = store.service_up(scope, now).await {
                tracing::warn!(error = %error, "a service's recovery could not be shared");
                return;
            }
            self.learned(scope, None, false);
        }
    }
}
