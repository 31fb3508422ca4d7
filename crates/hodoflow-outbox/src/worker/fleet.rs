//! The fleet of one store's workers: the scopes a server closed, the routes' windows and the
//! services found down (`outage.rs`), kept in the store so every process on it shares them.
//!
//! Each scope is named as every process names it: the service and the endpoint of the client
//! that sent (`webhooks http://hodoflow.example`, `modulify http://modulify.example token
//! 1a2b3c4d`), and for a trigger's route a name derived from its token (`… trigger <uuid>`,
//! never the token). So one vendor's 429 never holds another vendor's jobs, and one trigger's
//! never holds another trigger's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use hodoflow_retry::Result;
use hodoflow_retry::clock::Clock;
use hodoflow_retry::limit::{
    Fleet, FleetAsk, FleetFuture, Heard, Holding, PacingSource, Refusal, RouteLimit, RoutePacing,
};

use crate::job::Slot;
use crate::store::Store;

use super::outage::{Outages, Turn};

use super::*;

/// Pauses read from the store and trusted for [`PAUSE_READ_EVERY`], kept at most this many.
const KEEP_PAUSES_READ: usize = 1024;

/// The fleet of the workers of one store: the closed scopes and the triggers' windows, in the
/// store.
#[derive(Debug)]
pub(super) struct StoreFleet {
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Arc<dyn Clock>,
    /// The name the caller gave the main client's endpoint, replacing its base URL in the names
    /// of its scopes.
    pub(super) credential: Option<String>,
    /// As [`WorkerBuilder`] holds it.
    pub(super) trigger_limit: Option<Option<RouteLimit>>,
    /// The main client's endpoint ([`RetryingClient::endpoint`](hodoflow_retry::RetryingClient::endpoint)),
    /// which [`credential`](Self::credential) renames.
    pub(super) endpoint: String,
    /// With the window, how long a slot stays busy before its answer comes.
    pub(super) attempt_timeout: Duration,
    /// The pauses last read, by scope, and when: each trusted for [`PAUSE_READ_EVERY`].
    pub(super) paused: Mutex<HashMap<String, (tokio::time::Instant, Option<SystemTime>)>>,
    /// The windows' figures last read from the store, by scope, and when.
    pub(super) windows: Mutex<HashMap<String, (tokio::time::Instant, Option<RouteLimit>)>>,
    /// The services the fleet holds down, as last read.
    pub(super) outages: Outages,
}

impl StoreFleet {
    /// The name of `scope` of an attempt, as every worker of the store names it. An endpoint
    /// too long for a store's scope ([`MAX_SCOPE`](crate::MAX_SCOPE)) is named by a
    /// hash of it instead.
    pub(super) fn scope_name(&self, ask: FleetAsk<'_>, in_route: bool) -> String {
        let endpoint = match &self.credential {
            Some(name) if ask.endpoint() == self.endpoint => name.as_str(),
            _ => ask.endpoint(),
        };
        let name = |endpoint: &str| match (in_route, ask.route()) {
            (true, Some(token)) => {
                format!("{} {endpoint} trigger {}", ask.service(), trigger_id(token))
            }
            _ => format!("{} {endpoint}", ask.service()),
        };
        let named = name(endpoint);
        if named.len() <= crate::MAX_SCOPE {
            return named;
        }
        let hashed = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, endpoint.as_bytes());
        name(&format!("endpoint {hashed}"))
    }

    /// The shared window `window` of the trigger of `ask`, and where its limit came from;
    /// `None` when the caller turned shared windows off. The server's figures this process
    /// learned win; else those another worker learned and left in the store (read at most
    /// every [`PAUSE_READ_EVERY`]), so a worker that starts later paces as the fleet does; else
    /// the vendor's documented default.
    pub(super) async fn pacing(&self, ask: FleetAsk<'_>, window: &str) -> Option<RoutePacing> {
        if let Some(limit) = self.trigger_limit {
            return limit.map(|limit| RoutePacing::new(limit, PacingSource::Caller));
        }
        let here = ask.pacing()?;
        if here.source != PacingSource::Documented {
            return Some(here);
        }
        let cached = self.lock_windows().get(window).copied();
        let stated = match cached {
            Some((read, stated))
                if tokio::time::Instant::now().saturating_duration_since(read)
                    < PAUSE_READ_EVERY =>
            {
                stated
            }
            _ => {
                let stated = match self.store.window(window).await {
                    Ok(stated) => {
                        stated.and_then(|(requests, per)| RouteLimit::new(requests, per).ok())
                    }
                    Err(error) => {
                        tracing::warn!(error = %error, "a shared window's figures could not be read");
                        None
                    }
                };
                let mut windows = self.lock_windows();
                if windows.len() >= KEEP_PAUSES_READ {
                    windows.clear();
                }
                windows.insert(window.to_owned(), (tokio::time::Instant::now(), stated));
                stated
            }
        };
        Some(match stated {
            Some(limit) => RoutePacing::new(limit, PacingSource::Server),
            None => here,
        })
    }

    fn lock_windows(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (tokio::time::Instant, Option<RouteLimit>)>>
    {
        self.windows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Until when `scope` is paused, if past `now`: from the store at most every
    /// [`PAUSE_READ_EVERY`], so a pool does not read it before every attempt.
    pub(super) async fn paused_until(
        &self,
        scope: &str,
        now: SystemTime,
    ) -> Result<Option<SystemTime>> {
        let cached = self.lock_paused().get(scope).copied();
        if let Some((read, until)) = cached
            && tokio::time::Instant::now().saturating_duration_since(read) < PAUSE_READ_EVERY
        {
            return Ok(until.filter(|until| *until > now));
        }
        let until = self.store.paused_until(scope, now).await?;
        self.remember(scope, until);
        Ok(until)
    }

    fn remember(&self, scope: &str, until: Option<SystemTime>) {
        let mut paused = self.lock_paused();
        if !paused.contains_key(scope) && paused.len() >= KEEP_PAUSES_READ {
            paused.clear();
        }
        paused.insert(scope.to_owned(), (tokio::time::Instant::now(), until));
    }

    fn lock_paused(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (tokio::time::Instant, Option<SystemTime>)>>
    {
        self.paused.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A trigger, by a name derived from its token: never the token.
pub(super) fn trigger_id(token: &str) -> uuid::Uuid {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, token.as_bytes())
}

impl Fleet for StoreFleet {
    fn admit<'a>(
        &'a self,
        ask: FleetAsk<'a>,
        max_wait: Duration,
    ) -> FleetFuture<'a, std::result::Result<Option<i64>, Refusal>> {
        Box::pin(async move {
            let started = tokio::time::Instant::now();
            let scope = self.scope_name(ask, ask.in_route_scope());
            let wait_or_refuse = async |wait: Duration, what: &str| {
                let waited = tokio::time::Instant::now().saturating_duration_since(started);
                if waited.saturating_add(wait) > max_wait {
                    return Err(Refusal::past_budget(format!(
                        "{what} for {:.1}s, past the {:.1}s this call has left to wait",
                        wait.as_secs_f64(),
                        max_wait.saturating_sub(waited).as_secs_f64()
                    ))
                    .with_retry_after(wait));
                }
                tokio::time::sleep(wait).await;
                Ok(())
            };
            // Counted from the first wait until this returns, for the client's stats.
            let (mut at_gate, mut in_window): (Option<Holding<'_>>, Option<Holding<'_>>) =
                (None, None);
            // While the fleet holds the attempt's service down, it goes only as the fleet's
            // probe.
            let service = self.scope_name(ask, false);
            loop {
                let now = self.clock.wall();
                match self.outages.turn(&*self.store, &service, now).await {
                    Turn::Go => break,
                    Turn::Wait(at) => {
                        let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
                        at_gate.get_or_insert_with(|| ask.hold_closed());
                        let what = format!(
                            "the fleet holds the {} service down, its next probe",
                            ask.service()
                        );
                        wait_or_refuse(wait.max(Duration::from_millis(1)), &what).await?;
                    }
                }
            }
            loop {
                let now = self.clock.wall();
                match self.paused_until(&scope, now).await {
                    Ok(Some(until)) => {
                        let wait = until.duration_since(now).unwrap_or(Duration::ZERO);
                        at_gate.get_or_insert_with(|| ask.hold_closed());
                        let what = format!("the fleet holds {} closed", ask.scope_label());
                        wait_or_refuse(wait.max(Duration::from_millis(1)), &what).await?;
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(error = %error, "a shared pause could not be read; sending");
                    }
                }
                if ask.route().is_none() {
                    return Ok(None);
                }
                let window = self.scope_name(ask, true);
                let Some(pacing) = self.pacing(ask, &window).await else {
                    return Ok(None);
                };
                let hold = pacing.limit.per().saturating_add(self.attempt_timeout);
                match self
                    .store
                    .take_slot(&window, pacing.limit.requests(), hold, now)
                    .await
                {
                    Ok(Slot::Granted(slot)) => return Ok(Some(slot)),
                    Ok(Slot::FreeAt(at)) => {
                        // A slot still out for an attempt in flight frees when its answer
                        // comes, long before the end its hold was taken for: look again within
                        // one window, and give up only when the call's time is out.
                        let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
                        let step = wait.min(pacing.limit.per()).max(Duration::from_millis(1));
                        in_window.get_or_insert_with(|| ask.hold_in_window(pacing));
                        let what = "the trigger's shared window is full";
                        if let Err(refusal) = wait_or_refuse(step, what).await {
                            ask.turned_away(pacing, wait);
                            return Err(refusal.with_retry_after(wait));
                        }
                    }
                    Err(error) => {
                        tracing::warn!(error = %error, "the shared trigger window could not be read; sending");
                        return Ok(None);
                    }
                }
            }
        })
    }

    fn answered<'a>(
        &'a self,
        ask: FleetAsk<'a>,
        slot: i64,
        learned: Option<RouteLimit>,
    ) -> FleetFuture<'a, ()> {
        Box::pin(async move {
            let now = self.clock.wall();
            if ask.route().is_none() {
                return;
            }
            let window = self.scope_name(ask, true);
            // What the server stated of the window travels with its slots, for every worker.
            if let Some(limit) = learned {
                match self
                    .store
                    .learn_window(&window, limit.requests(), limit.per(), now)
                    .await
                {
                    Ok(()) => {
                        self.lock_windows()
                            .insert(window.clone(), (tokio::time::Instant::now(), Some(limit)));
                    }
                    Err(error) => {
                        tracing::warn!(error = %error, "a shared window's figures could not be written");
                    }
                }
            }
            let per = self
                .pacing(ask, &window)
                .await
                .map_or(Duration::ZERO, |pacing| pacing.limit.per());
            let until = now.checked_add(per).unwrap_or(now);
            if let Err(error) = self.store.release_slot(slot, until).await {
                tracing::warn!(error = %error, "a shared trigger slot could not be released; it frees on its own");
            }
        })
    }

    fn close<'a>(
        &'a self,
        ask: FleetAsk<'a>,
        pause: Duration,
        why: &'a str,
    ) -> FleetFuture<'a, ()> {
        Box::pin(async move {
            let scope = self.scope_name(ask, ask.in_route_scope());
            let now = self.clock.wall();
            let until = now.checked_add(pause).unwrap_or(now);
            {
                let known = self.lock_paused().get(&scope).and_then(|(_, until)| *until);
                self.remember(&scope, known.max(Some(until)));
            }
            if let Err(error) = self.store.pause(&scope, until, why, now).await {
                tracing::warn!(error = %error, "a shared pause could not be written");
            }
        })
    }

    fn heard<'a>(&'a self, ask: FleetAsk<'a>, heard: Heard) -> FleetFuture<'a, ()> {
        Box::pin(async move {
            let service = self.scope_name(ask, false);
            self.outages
                .heard(&*self.store, &service, heard, self.clock.wall())
                .await;
        })
    }
}
