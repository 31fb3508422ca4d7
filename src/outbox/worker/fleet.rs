//! The fleet of one store's workers: the credential's pause and the triggers' windows, kept
//! in the store so every process on it shares them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::client::RetryingClient;
use crate::core::error::Result;
use crate::core::fleet::trigger_limit::{PacingSource, TriggerKey, TriggerLimit, TriggerPacing};
use crate::core::fleet::{Fleet, FleetFuture};
use crate::core::stats::Holding;

use crate::outbox::WallClock;
use crate::outbox::job::Slot;
use crate::outbox::store::Store;

use super::*;

/// The fleet of the workers of one store: the credential's pause and the triggers' windows,
/// in the store.
#[derive(Debug)]
pub(super) struct StoreFleet {
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Arc<dyn WallClock>,
    pub(super) credential: String,
    /// As [`WorkerBuilder`] holds it.
    pub(super) trigger_limit: Option<Option<TriggerLimit>>,
    /// The webhook client: the server's figures it learned, and where waits are counted.
    pub(super) client: RetryingClient,
    /// With the window, how long a slot stays busy before its answer comes.
    pub(super) attempt_timeout: Duration,
    /// The pause last read, and when: trusted for [`PAUSE_READ_EVERY`].
    pub(super) paused: Mutex<Option<(tokio::time::Instant, Option<SystemTime>)>>,
}

impl StoreFleet {
    /// The shared window of the trigger with `token`, and where its limit came from; `None`
    /// when the caller turned shared windows off.
    pub(super) fn pacing(&self, token: &str) -> Option<TriggerPacing> {
        match self.trigger_limit {
            Some(limit) => limit.map(|limit| TriggerPacing::new(limit, PacingSource::Caller)),
            None => Some(
                self.client
                    .inner
                    .engine
                    .triggers
                    .learned_or_documented(TriggerKey::of(token)),
            ),
        }
    }

    /// Until when the credential is paused, if past `now`: from the store at most every
    /// [`PAUSE_READ_EVERY`], so a pool does not read it before every attempt.
    pub(super) async fn paused_until(&self, now: SystemTime) -> Result<Option<SystemTime>> {
        let cached = *self.paused.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((read, until)) = cached
            && read.elapsed() < PAUSE_READ_EVERY
        {
            return Ok(until.filter(|until| *until > now));
        }
        let until = self.store.paused_until(&self.credential, now).await?;
        *self.paused.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((tokio::time::Instant::now(), until));
        Ok(until)
    }
}

/// The scope of a trigger's window: a name derived from its token, never the token.
pub(super) fn trigger_scope(token: &str) -> String {
    format!(
        "trigger:{}",
        uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, token.as_bytes())
    )
}

impl Fleet for StoreFleet {
    fn admit<'a>(
        &'a self,
        trigger: Option<&'a str>,
        max_wait: Duration,
    ) -> FleetFuture<'a, std::result::Result<Option<i64>, Duration>> {
        Box::pin(async move {
            let started = tokio::time::Instant::now();
            let wait_or_refuse = async |wait: Duration| {
                if started.elapsed().saturating_add(wait) > max_wait {
                    return Err(wait);
                }
                tokio::time::sleep(wait).await;
                Ok(())
            };
            // Counted from the first wait until this returns, for the client's stats.
            let counters = &self.client.inner.engine.counters;
            let (mut at_gate, mut in_window): (Option<Holding<'_>>, Option<Holding<'_>>) =
                (None, None);
            loop {
                let now = self.clock.now();
                match self.paused_until(now).await {
                    Ok(Some(until)) => {
                        let wait = until.duration_since(now).unwrap_or(Duration::ZERO);
                        at_gate.get_or_insert_with(|| counters.gate_hold.begin(None));
                        wait_or_refuse(wait.max(Duration::from_millis(1))).await?;
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(error = %error, "the shared pause could not be read; sending");
                    }
                }
                let Some((token, pacing)) =
                    trigger.and_then(|token| Some((token, self.pacing(token)?)))
                else {
                    return Ok(None);
                };
                let hold = pacing.limit.per().saturating_add(self.attempt_timeout);
                match self
                    .store
                    .take_slot(&trigger_scope(token), pacing.limit.requests(), hold, now)
                    .await
                {
                    Ok(Slot::Granted(slot)) => return Ok(Some(slot)),
                    Ok(Slot::FreeAt(at)) => {
                        let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
                        in_window.get_or_insert_with(|| counters.trigger_hold.begin(Some(pacing)));
                        if let Err(wait) = wait_or_refuse(wait.max(Duration::from_millis(1))).await
                        {
                            counters.trigger_hold.turned_away(Some(pacing), wait);
                            return Err(wait);
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

    fn answered<'a>(&'a self, trigger: Option<&'a str>, slot: i64) -> FleetFuture<'a, ()> {
        Box::pin(async move {
            let per = trigger
                .and_then(|token| self.pacing(token))
                .map_or(Duration::ZERO, |pacing| pacing.limit.per());
            let until = self
                .clock
                .now()
                .checked_add(per)
                .unwrap_or_else(|| self.clock.now());
            if let Err(error) = self.store.release_slot(slot, until).await {
                tracing::warn!(error = %error, "a shared trigger slot could not be released; it frees on its own");
            }
        })
    }

    fn slow_down(&self, wait: Duration) -> FleetFuture<'_, ()> {
        Box::pin(async move {
            let now = self.clock.now();
            let until = now.checked_add(wait).unwrap_or(now);
            {
                let mut cached = self.paused.lock().unwrap_or_else(|p| p.into_inner());
                let known = cached.and_then(|(_, until)| until);
                *cached = Some((tokio::time::Instant::now(), known.max(Some(until))));
            }
            let why = "the server asked to slow down";
            if let Err(error) = self.store.pause(&self.credential, until, why, now).await {
                tracing::warn!(error = %error, "the shared pause could not be written");
            }
        })
    }
}
