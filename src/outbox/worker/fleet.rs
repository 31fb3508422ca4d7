//! The fleet of one store's workers: the scopes a server closed and the routes' windows, kept in
//! the store so every process on it shares them.
//!
//! Each scope is named as every process names it: the service and the endpoint of the client
//! that sent (`webhooks http://hodoflow.example`, `modulify http://modulify.example token
//! 1a2b3c4d`), and for a trigger's route a name derived from its token (`… trigger <uuid>`,
//! never the token). So one vendor's 429 never holds another vendor's jobs, and one trigger's
//! never holds another trigger's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::client::RetryingClient;
use crate::core::error::Result;
use crate::core::limit::Refusal;
use crate::core::limit::scope::{Closing, Scope};
use crate::core::limit::shared::{Fleet, FleetAsk, FleetFuture};
use crate::core::limit::window::{PacingSource, RouteLimit, RoutePacing};
use crate::core::runtime::{self, Clock};
use crate::core::stats::Holding;
use crate::vendors::hodoflow::routes::trigger_key;

use crate::outbox::job::Slot;
use crate::outbox::store::Store;

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
    /// The webhook client: the server's figures it learned, and where waits are counted.
    pub(super) client: RetryingClient,
    /// With the window, how long a slot stays busy before its answer comes.
    pub(super) attempt_timeout: Duration,
    /// The pauses last read, by scope, and when: each trusted for [`PAUSE_READ_EVERY`].
    pub(super) paused: Mutex<HashMap<String, (tokio::time::Instant, Option<SystemTime>)>>,
    /// The windows' figures last read from the store, by scope, and when.
    pub(super) windows: Mutex<HashMap<String, (tokio::time::Instant, Option<RouteLimit>)>>,
}

impl StoreFleet {
    /// The name of `scope` of an attempt, as every worker of the store names it. An endpoint
    /// too long for a store's scope ([`MAX_SCOPE`](crate::outbox::MAX_SCOPE)) is named by a
    /// hash of it instead.
    pub(super) fn scope_name(&self, ask: FleetAsk<'_>, scope: Scope) -> String {
        let endpoint = match &self.credential {
            Some(name) if *ask.endpoint == *self.client.inner.engine.endpoint.name => name.as_str(),
            _ => ask.endpoint,
        };
        let name = |endpoint: &str| match (scope, ask.route) {
            (Scope::Route(_), Some(token)) => {
                format!("{} {endpoint} trigger {}", ask.service, trigger_id(token))
            }
            _ => format!("{} {endpoint}", ask.service),
        };
        let named = name(endpoint);
        if named.len() <= crate::outbox::MAX_SCOPE {
            return named;
        }
        let hashed = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, endpoint.as_bytes());
        name(&format!("endpoint {hashed}"))
    }

    /// The shared window `window` of the trigger with `token`, and where its limit came from;
    /// `None` when the caller turned shared windows off. The server's figures this process
    /// learned win; else those another worker learned and left in the store (read at most
    /// every [`PAUSE_READ_EVERY`]), so a worker that starts later paces as the fleet does; else
    /// the vendor's documented default.
    pub(super) async fn pacing(&self, token: &str, window: &str) -> Option<RoutePacing> {
        if let Some(limit) = self.trigger_limit {
            return limit.map(|limit| RoutePacing::new(limit, PacingSource::Caller));
        }
        let here = self
            .client
            .inner
            .engine
            .limits
            .windows
            .learned_or_documented(trigger_key(token))?;
        if here.source != PacingSource::Documented {
            return Some(here);
        }
        let cached = self.lock_windows().get(window).copied();
        let stated = match cached {
            Some((read, stated))
                if runtime::now().saturating_duration_since(read) < PAUSE_READ_EVERY =>
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
                windows.insert(window.to_owned(), (runtime::now(), stated));
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
            && runtime::now().saturating_duration_since(read) < PAUSE_READ_EVERY
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
        paused.insert(scope.to_owned(), (runtime::now(), until));
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
            let started = runtime::now();
            let scope = self.scope_name(ask, ask.scope);
            let wait_or_refuse = async |wait: Duration, what: &str| {
                let waited = runtime::now().saturating_duration_since(started);
                if waited.saturating_add(wait) > max_wait {
                    return Err(Refusal::past_budget(format!(
                        "{what} for {:.1}s, past the {:.1}s this call has left to wait",
                        wait.as_secs_f64(),
                        max_wait.saturating_sub(waited).as_secs_f64()
                    ))
                    .with_retry_after(wait));
                }
                runtime::sleep(wait).await;
                Ok(())
            };
            // Counted from the first wait until this returns, for the client's stats.
            let counters = &self.client.inner.engine.counters;
            let (mut at_gate, mut in_window): (Option<Holding<'_>>, Option<Holding<'_>>) =
                (None, None);
            loop {
                let now = self.clock.wall();
                match self.paused_until(&scope, now).await {
                    Ok(Some(until)) => {
                        let wait = until.duration_since(now).unwrap_or(Duration::ZERO);
                        let hold = match ask.scope {
                            Scope::Route(_) => &counters.route_hold,
                            _ => &counters.gate_hold,
                        };
                        at_gate.get_or_insert_with(|| hold.begin(None));
                        let what = format!("the fleet holds {} closed", ask.scope.label());
                        wait_or_refuse(wait.max(Duration::from_millis(1)), &what).await?;
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(error = %error, "a shared pause could not be read; sending");
                    }
                }
                let Some(token) = ask.route else {
                    return Ok(None);
                };
                let window = self.scope_name(ask, Scope::Route(trigger_key(token)));
                let Some(pacing) = self.pacing(token, &window).await else {
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
                        in_window.get_or_insert_with(|| counters.route_hold.begin(Some(pacing)));
                        let what = "the trigger's shared window is full";
                        if let Err(refusal) = wait_or_refuse(step, what).await {
                            counters.route_hold.turned_away(Some(pacing), wait);
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
            let Some(token) = ask.route else {
                return;
            };
            let window = self.scope_name(ask, Scope::Route(trigger_key(token)));
            // What the server stated of the window travels with its slots, for every worker.
            if let Some(limit) = learned {
                match self
                    .store
                    .learn_window(&window, limit.requests(), limit.per(), now)
                    .await
                {
                    Ok(()) => {
                        self.lock_windows()
                            .insert(window.clone(), (runtime::now(), Some(limit)));
                    }
                    Err(error) => {
                        tracing::warn!(error = %error, "a shared window's figures could not be written");
                    }
                }
            }
            let per = self
                .pacing(token, &window)
                .await
                .map_or(Duration::ZERO, |pacing| pacing.limit.per());
            let until = now.checked_add(per).unwrap_or(now);
            if let Err(error) = self.store.release_slot(slot, until).await {
                tracing::warn!(error = %error, "a shared trigger slot could not be released; it frees on its own");
            }
        })
    }

    fn close<'a>(&'a self, ask: FleetAsk<'a>, closing: Closing) -> FleetFuture<'a, ()> {
        Box::pin(async move {
            let scope = self.scope_name(ask, closing.scope);
            let now = self.clock.wall();
            let until = now.checked_add(closing.pause).unwrap_or(now);
            {
                let known = self.lock_paused().get(&scope).and_then(|(_, until)| *until);
                self.remember(&scope, known.max(Some(until)));
            }
            let why = closing.why.describe();
            if let Err(error) = self.store.pause(&scope, until, &why, now).await {
                tracing::warn!(error = %error, "a shared pause could not be written");
            }
        })
    }
}
