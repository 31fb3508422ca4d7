//! Client-side pacing of deliveries, per route (a target with a request window of its own).
//!
//! A vendor may document a window per route (Hodoflow's: 100 requests per 60 s, and a 429
//! past that). A sender with a burst of 300 events for one such route would send 300, bounce
//! 200 off 429s, and retry them all after `Retry-After`. The limiter lets at most `requests`
//! attempts per route be "in the window" at once instead, so the burst waits on the client.
//!
//! Each route has a semaphore of `requests` permits. An attempt holds one from before it is
//! sent until `per` after its answer (or its failure) came back. Any two attempts that share a
//! permit therefore arrive at the server at least `per` apart, whatever the network's delay,
//! so no window of `per` — fixed at any alignment, or sliding — ever holds more than
//! `requests` arrivals. Waiters are served in order (tokio's semaphore is fair).
//!
//! # One rule, three sources
//!
//! The limit of a route comes from, in this order:
//! 1. the caller (a vendor client's setter, a command-line flag): it always wins;
//! 2. the server's own figures, the `q` and `w` of the `RateLimit-Policy` the vendor names for
//!    its routes
//!    (`docs/wire-contract.md`, "RateLimit fields"; `rate_limit_field.rs`), learned from every
//!    delivery's answer;
//! 3. the vendor's documented default, until the server has said.
//!
//! [`PacingSource`] names which one paces a route. Learned figures change a live semaphore:
//! a larger quota adds permits; a smaller one forgets the free permits and owes the rest, each
//! forgotten as its slot comes back, so the permits out plus the permits free never exceed the
//! new quota once the held slots are back. A slot's hold is read again when it would end, so a
//! window that grew holds the slots already out for the longer window too. (A `RateLimit`
//! of that policy with `r=0;t=…`, the server's window spent by this sender or another, closes the
//! route's route at the gate until the reset: `gate.rs`.)
//!
//! # The budget
//!
//! A wait for a slot is part of the call's budget, the first attempt's included: the call's
//! `max_elapsed` bounds it from `send()` to its result. A sender with more events than a window
//! takes (a batch, the outbox) queues the events and starts a call when a slot is near, not a
//! call that waits minutes for its slot.
//!
//! Why not `governor`? Its GCRA counts send times: with a burst of `requests` it lets up to
//! twice that into one window, and paced one at a time it admits exactly `requests` by send
//! time, so the network's jitter can still put one more into a window at the server. It cannot
//! reserve a slot, so a call cannot learn whether its wait fits its budget. And its async waits
//! use `futures-timer`, which tokio's paused test clock does not drive.

use std::collections::HashMap;

use crate::core::map::Map;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::core::error::Result;
pub use crate::core::limit::figures::{PacingSource, RouteLimit, RoutePacing};
use crate::core::limit::scope::{RouteKey, Signal};
use crate::core::limit::{Ask, Limiter, Refusal};
use crate::core::rate_limit_field::{PolicyMemo, RouteWindow};
use crate::core::runtime;
use crate::core::stats::Hold;

/// The routes seen with a limit (or with learned figures); idle ones are forgotten past this
/// many.
const KEEP_IDLE_ROUTES: usize = 1024;

/// Paces the deliveries of one client, route by route, and keeps what the server said of
/// each route's window.
#[derive(Debug)]
pub(crate) struct Windows {
    /// The caller's limit for every route.
    every: Option<RouteLimit>,
    /// The caller's limit for some routes.
    overrides: Map<RouteKey, RouteLimit>,
    /// Paces the routes the caller set no limit for: at the server's figures, `until_told`
    /// until it has sent them.
    learn: bool,
    /// The limit before the server has said: the vendor's documented default, if it has one.
    until_told: Option<RouteLimit>,
    state: Mutex<State>,
    /// The last `RateLimit-Policy` line its routes' answers carried, read once.
    pub(crate) policy_memo: PolicyMemo,
}

#[derive(Debug, Default)]
struct State {
    lanes: Map<RouteKey, Lane>,
    /// The server's figures per route, whether or not the route is paced here (an outbox's
    /// shared windows read them too).
    learned: Map<RouteKey, RouteLimit>,
}

/// A paced route: its limit now, and the semaphore its slots are taken from.
#[derive(Debug)]
struct Lane {
    pacing: RoutePacing,
    shared: Arc<LaneShared>,
}

#[derive(Debug)]
struct LaneShared {
    permits: Arc<Semaphore>,
    state: Mutex<LaneState>,
}

#[derive(Debug)]
struct LaneState {
    /// Permits to forget as their slots come back: the quota shrank below the slots out.
    owed: usize,
    /// How long a slot stays out after its answer.
    per: Duration,
}

/// A slot of a route's window, held from before an attempt until `per` after its answer.
/// Dropped unused, it frees at once.
#[derive(Debug)]
pub(crate) struct WindowSlot {
    permit: Option<OwnedSemaphorePermit>,
    lane: Arc<LaneShared>,
}

impl WindowSlot {
    /// The attempt's answer (or failure) is in: the slot frees one window from now, the
    /// window as it is when that time comes (a window learned meanwhile that grew holds it
    /// longer).
    pub(crate) fn release_after_window(mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let lane = Arc::clone(&self.lane);
        let answered = runtime::now();
        tokio::spawn(async move {
            loop {
                let until = answered.checked_add(lane.per());
                match until {
                    Some(until) if until > runtime::now() => runtime::sleep_until(until).await,
                    Some(_) => break,
                    // A window past any instant: the slot never frees.
                    None => std::future::pending().await,
                }
            }
            lane.give_back(permit);
        });
    }
}

impl Drop for WindowSlot {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            self.lane.give_back(permit);
        }
    }
}

impl LaneShared {
    fn new(limit: RouteLimit) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(limit.requests() as usize)),
            state: Mutex::new(LaneState {
                owed: 0,
                per: limit.per(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LaneState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn per(&self) -> Duration {
        self.lock().per
    }

    /// A slot's permit comes back: forgotten while the quota is owed some.
    fn give_back(&self, permit: OwnedSemaphorePermit) {
        let mut state = self.lock();
        if state.owed > 0 {
            state.owed -= 1;
            permit.forget();
        } else {
            drop(permit);
        }
    }

    /// From `from` permits per `per` to `to` per `limit.per()`. Under the lane's lock, as every
    /// permit that comes back is, so the permits out, free and owed always add up.
    fn resize(&self, from: u32, to: RouteLimit) {
        let mut state = self.lock();
        state.per = to.per();
        let (from, to) = (from as usize, to.requests() as usize);
        if to > from {
            let more = to - from;
            let paid = more.min(state.owed);
            state.owed -= paid;
            self.permits.add_permits(more - paid);
        } else if from > to {
            let fewer = from - to;
            let forgotten = self.permits.forget_permits(fewer);
            state.owed += fewer - forgotten;
        }
    }
}

impl Windows {
    /// `every` for each route without an entry in `overrides`; when both are empty, the
    /// server's figures (`until_told`, the vendor's documented default, until known) if `learn`,
    /// else no pacing.
    pub(crate) fn new(
        every: Option<RouteLimit>,
        overrides: HashMap<RouteKey, RouteLimit>,
        learn: bool,
        until_told: Option<RouteLimit>,
    ) -> Self {
        Self {
            every,
            overrides: overrides.into_iter().collect(),
            learn,
            until_told,
            state: Mutex::new(State::default()),
            policy_memo: PolicyMemo::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The limit `route` is paced at here, and its source; `None` when it is not paced.
    pub(crate) fn pacing(&self, route: RouteKey) -> Option<RoutePacing> {
        let state = self.lock();
        self.pacing_in(&state, route)
    }

    /// Whether any route may be paced here: a limit set for every route or some, or the
    /// server's figures to learn. Without one, [`pacing_in`](Self::pacing_in) is `None` for
    /// every route.
    fn paces_any(&self) -> bool {
        self.every.is_some() || !self.overrides.is_empty() || self.learn
    }

    fn pacing_in(&self, state: &State, route: RouteKey) -> Option<RoutePacing> {
        if let Some(limit) = self.overrides.get(&route).or(self.every.as_ref()) {
            return Some(RoutePacing::new(*limit, PacingSource::Caller));
        }
        if !self.learn {
            return None;
        }
        self.learned_or_told(state, route)
    }

    /// The server's figures for `route`, or the vendor's default when it has sent none:
    /// the limit of a route the caller set none for, here or in an outbox's shared window.
    pub(crate) fn learned_or_documented(&self, route: RouteKey) -> Option<RoutePacing> {
        self.learned_or_told(&self.lock(), route)
    }

    /// What an answer of `route` said of its window: its figures are kept (and pace it, when
    /// the caller set none), and a spent window holds its next slot until the reset.
    pub(crate) fn heard_window(&self, route: RouteKey, window: RouteWindow) {
        if window == RouteWindow::default() {
            return;
        }
        let mut state = self.lock();
        if let Some(limit) = window.limit
            && state.learned.get(&route) != Some(&limit)
        {
            if !state.learned.contains_key(&route) && state.learned.len() >= KEEP_IDLE_ROUTES {
                let State { lanes, learned } = &mut *state;
                learned.retain(|key, _| lanes.contains_key(key));
            }
            state.learned.insert(route, limit);
            let pacing = self.pacing_in(&state, route);
            if let (Some(lane), Some(pacing)) = (state.lanes.get_mut(&route), pacing)
                && lane.pacing != pacing
            {
                lane.shared
                    .resize(lane.pacing.limit.requests(), pacing.limit);
                lane.pacing = pacing;
            }
        }
    }

    /// Waits for a slot of `route`'s window, at most `max_wait`, counted in `hold` while it
    /// waits. `Ok(None)` when the route is not paced; `Err(())` when no slot freed in time.
    /// The wait is returned with the slot.
    pub(crate) async fn acquire(
        &self,
        route: RouteKey,
        max_wait: Duration,
        hold: &Hold,
    ) -> Result<Option<(WindowSlot, Duration)>, ()> {
        let Some((lane, pacing)) = self.lane(route) else {
            return Ok(None);
        };
        let permit = match Arc::clone(&lane.permits).try_acquire_owned() {
            Ok(permit) => (permit, Duration::ZERO),
            Err(_) => {
                // Counted from the first wait to the slot.
                let started = runtime::now();
                let _held = hold.begin(Some(pacing));
                match runtime::timeout(max_wait, Arc::clone(&lane.permits).acquire_owned()).await {
                    Ok(Ok(permit)) => (permit, runtime::now().saturating_duration_since(started)),
                    // The semaphore is never closed; a timeout means the window stayed full.
                    Ok(Err(_)) | Err(_) => return Err(()),
                }
            }
        };
        let (permit, waited) = permit;
        let slot = WindowSlot {
            permit: Some(permit),
            lane,
        };
        Ok(Some((slot, waited)))
    }

    fn lane(&self, route: RouteKey) -> Option<(Arc<LaneShared>, RoutePacing)> {
        let mut state = self.lock();
        let pacing = self.pacing_in(&state, route)?;
        if !state.lanes.contains_key(&route) && state.lanes.len() >= KEEP_IDLE_ROUTES {
            state
                .lanes
                .retain(|_, lane| Arc::strong_count(&lane.shared) > 1);
        }
        let lane = state.lanes.entry(route).or_insert_with(|| Lane {
            pacing,
            shared: Arc::new(LaneShared::new(pacing.limit)),
        });
        Some((Arc::clone(&lane.shared), lane.pacing))
    }
}

impl Windows {
    fn learned_or_told(&self, state: &State, route: RouteKey) -> Option<RoutePacing> {
        match state.learned.get(&route) {
            Some(limit) => Some(RoutePacing::new(*limit, PacingSource::Server)),
            None => self
                .until_told
                .map(|limit| RoutePacing::new(limit, PacingSource::Documented)),
        }
    }
}

impl Limiter for Windows {
    type Permit = Option<WindowSlot>;

    /// Waits for a slot of the attempt's route, when the route is paced, within its time.
    async fn admit(&self, ask: &Ask<'_>) -> std::result::Result<Option<WindowSlot>, Refusal> {
        // A client that paces no route (none set, none to learn) reads no clock and takes no
        // lock for a call.
        let Some(route) = ask.route.filter(|_| self.paces_any()) else {
            return Ok(None);
        };
        let max_wait = ask.max_wait();
        match self
            .acquire(route, max_wait, &ask.counters.route_hold)
            .await
        {
            Ok(None) => Ok(None),
            Ok(Some((slot, waited))) => {
                if !waited.is_zero() {
                    ask.counters.waited_for_route(waited);
                    tracing::debug!(
                        wait_ms = waited.as_millis() as u64,
                        "waited for a slot of the route's window"
                    );
                }
                Ok(Some(slot))
            }
            Err(()) => Err(Refusal::past_budget(format!(
                "the route's window had no free slot within the {:.1}s this call has left to wait",
                max_wait.as_secs_f64()
            ))),
        }
    }

    /// Learns what the answer said of the route's window, then lets its slot go one window
    /// after the answer.
    fn heard(&self, slot: Option<WindowSlot>, ask: &Ask<'_>, signal: &Signal<'_>) {
        if let Some(route) = ask.route {
            self.heard_window(route, signal.window);
        }
        if let Some(slot) = slot {
            slot.release_after_window();
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);
    /// A vendor's documented default, as Hodoflow's: 100 per 60 s.
    const UNTIL_TOLD: RouteLimit = RouteLimit::from_parts(100, Duration::from_secs(60));

    fn limiter(requests: u32, per: Duration) -> Windows {
        Windows::new(
            Some(RouteLimit::new(requests, per).unwrap()),
            HashMap::new(),
            false,
            Some(UNTIL_TOLD),
        )
    }

    fn learning() -> Windows {
        Windows::new(None, HashMap::new(), true, Some(UNTIL_TOLD))
    }

    fn policy(requests: u32, per: Duration) -> RouteWindow {
        RouteWindow {
            limit: Some(RouteLimit::new(requests, per).unwrap()),
            spent_for: None,
        }
    }

    async fn take(limiter: &Windows, route: RouteKey, max_wait: Duration) -> WindowSlot {
        limiter
            .acquire(route, max_wait, &Hold::default())
            .await
            .expect("a slot in time")
            .expect("paced")
            .0
    }

    async fn refused(limiter: &Windows, route: RouteKey) -> bool {
        limiter
            .acquire(route, Duration::ZERO, &Hold::default())
            .await
            .is_err()
    }

    #[test]
    fn refuses_an_empty_limit() {
        assert!(RouteLimit::new(0, SECOND).is_err());
        assert!(RouteLimit::new(1, Duration::ZERO).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unpaced_route_never_waits() {
        let limiter = Windows::new(None, HashMap::new(), false, Some(UNTIL_TOLD));
        let slot = limiter
            .acquire(RouteKey::of("t"), Duration::ZERO, &Hold::default())
            .await
            .unwrap();
        assert!(slot.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_frees_one_window_after_its_answer() {
        let limiter = limiter(2, 10 * SECOND);
        let route = RouteKey::of("t");
        let hold = Hold::default();
        let start = Instant::now();
        let (first, wait) = limiter
            .acquire(route, SECOND, &hold)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(wait, Duration::ZERO);
        let (second, _) = limiter
            .acquire(route, SECOND, &hold)
            .await
            .unwrap()
            .unwrap();
        assert!(
            limiter.acquire(route, SECOND, &hold).await.is_err(),
            "a third within the window does not fit a 1 s wait"
        );
        tokio::time::sleep(3 * SECOND).await;
        first.release_after_window();
        second.release_after_window();
        let (_, waited) = limiter
            .acquire(route, 60 * SECOND, &hold)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            start.elapsed(),
            SECOND + 3 * SECOND + 10 * SECOND,
            "the 1 s refused wait, the 3 s answer, then the 10 s window"
        );
        assert_eq!(waited, 10 * SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn routes_are_paced_apart_and_overrides_win() {
        let slow = RouteKey::of("slow");
        let limiter = Windows::new(
            Some(RouteLimit::new(1, SECOND).unwrap()),
            HashMap::from([(slow, RouteLimit::new(3, SECOND).unwrap())]),
            false,
            Some(UNTIL_TOLD),
        );
        let a = take(&limiter, RouteKey::of("a"), Duration::ZERO).await;
        assert!(refused(&limiter, RouteKey::of("a")).await);
        assert!(
            !refused(&limiter, RouteKey::of("b")).await,
            "another route has its own window"
        );
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(take(&limiter, slow, Duration::ZERO).await);
        }
        assert!(refused(&limiter, slow).await);
        drop((a, held));
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_are_served_in_order() {
        let limiter = Arc::new(limiter(1, SECOND));
        let route = RouteKey::of("t");
        let held = take(&limiter, route, Duration::ZERO).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for n in 0..5 {
            let (limiter, order) = (Arc::clone(&limiter), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let slot = take(&limiter, route, 60 * SECOND).await;
                order.lock().unwrap().push(n);
                slot.release_after_window();
            }));
            tokio::task::yield_now().await;
        }
        held.release_after_window();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    #[tokio::test(start_paused = true)]
    async fn learning_paces_at_the_documented_default_then_at_the_server_s_figures() {
        let limiter = learning();
        let route = RouteKey::of("t");
        assert_eq!(
            limiter.pacing(route),
            Some(RoutePacing::new(UNTIL_TOLD, PacingSource::Documented))
        );
        let mut held = Vec::new();
        for _ in 0..100 {
            held.push(take(&limiter, route, Duration::ZERO).await);
        }
        assert!(refused(&limiter, route).await, "100 per 60 s until told");
        limiter.heard_window(route, policy(1000, 60 * SECOND));
        assert_eq!(
            limiter
                .pacing(route)
                .map(|p| (p.limit.requests(), p.source)),
            Some((1000, PacingSource::Server))
        );
        for _ in 0..900 {
            held.push(take(&limiter, route, Duration::ZERO).await);
        }
        assert!(refused(&limiter, route).await, "1000 out: the new quota");
    }

    #[tokio::test(start_paused = true)]
    async fn the_caller_s_limit_wins_over_the_server_s_figures() {
        let route = RouteKey::of("t");
        let limiter = Windows::new(
            Some(RouteLimit::new(2, SECOND).unwrap()),
            HashMap::new(),
            true,
            Some(UNTIL_TOLD),
        );
        limiter.heard_window(route, policy(1000, 60 * SECOND));
        assert_eq!(
            limiter
                .pacing(route)
                .map(|p| (p.limit.requests(), p.source)),
            Some((2, PacingSource::Caller))
        );
        let (_a, _b) = (
            take(&limiter, route, Duration::ZERO).await,
            take(&limiter, route, Duration::ZERO).await,
        );
        assert!(refused(&limiter, route).await);
        assert_eq!(
            limiter.learned_or_documented(route).map(|p| p.source),
            Some(PacingSource::Server),
            "the figures are still kept, for an outbox's shared window"
        );
        assert_eq!(
            Windows::new(None, HashMap::new(), false, Some(UNTIL_TOLD)).pacing(route),
            None,
            "without learning nor a limit, nothing paces"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_smaller_quota_forgets_free_permits_and_owes_the_held_ones() {
        let limiter = learning();
        let route = RouteKey::of("t");
        limiter.heard_window(route, policy(10, SECOND));
        let mut held: Vec<WindowSlot> = Vec::new();
        for _ in 0..6 {
            held.push(take(&limiter, route, Duration::ZERO).await);
        }
        // 6 out, 4 free; down to 3: the 4 free are forgotten and 3 of the 6 out are owed.
        limiter.heard_window(route, policy(3, SECOND));
        assert!(refused(&limiter, route).await);
        for slot in held.drain(..3) {
            drop(slot);
        }
        assert!(
            refused(&limiter, route).await,
            "the first three back pay what is owed"
        );
        for slot in held.drain(..) {
            drop(slot);
        }
        let again: Vec<WindowSlot> = vec![
            take(&limiter, route, Duration::ZERO).await,
            take(&limiter, route, Duration::ZERO).await,
            take(&limiter, route, Duration::ZERO).await,
        ];
        assert!(refused(&limiter, route).await, "exactly the new quota");
        // Back up to 5 with 3 out: 2 more now.
        limiter.heard_window(route, policy(5, SECOND));
        let more = vec![
            take(&limiter, route, Duration::ZERO).await,
            take(&limiter, route, Duration::ZERO).await,
        ];
        assert!(refused(&limiter, route).await);
        drop((again, more));
    }

    #[tokio::test(start_paused = true)]
    async fn a_larger_quota_pays_what_is_owed_first() {
        let limiter = learning();
        let route = RouteKey::of("t");
        limiter.heard_window(route, policy(4, SECOND));
        let held: Vec<WindowSlot> = vec![
            take(&limiter, route, Duration::ZERO).await,
            take(&limiter, route, Duration::ZERO).await,
            take(&limiter, route, Duration::ZERO).await,
            take(&limiter, route, Duration::ZERO).await,
        ];
        limiter.heard_window(route, policy(1, SECOND)); // owes 3
        limiter.heard_window(route, policy(2, SECOND)); // owes 2
        drop(held);
        let a = take(&limiter, route, Duration::ZERO).await;
        let b = take(&limiter, route, Duration::ZERO).await;
        assert!(refused(&limiter, route).await, "2 per window, no more");
        drop((a, b));
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_that_grew_holds_the_slots_already_out_for_it() {
        let limiter = learning();
        let route = RouteKey::of("t");
        limiter.heard_window(route, policy(1, SECOND));
        let start = Instant::now();
        take(&limiter, route, Duration::ZERO)
            .await
            .release_after_window();
        limiter.heard_window(route, policy(1, 5 * SECOND));
        take(&limiter, route, 60 * SECOND).await;
        assert_eq!(
            start.elapsed(),
            5 * SECOND,
            "not the 1 s window it left under"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_is_counted_while_it_lasts() {
        let limiter = Arc::new(limiter(1, 10 * SECOND));
        let hold = Arc::new(Hold::default());
        let route = RouteKey::of("t");
        take(&limiter, route, Duration::ZERO)
            .await
            .release_after_window();
        let waiter = {
            let (limiter, hold) = (Arc::clone(&limiter), Arc::clone(&hold));
            tokio::spawn(async move { limiter.acquire(route, 60 * SECOND, &hold).await.is_ok() })
        };
        tokio::time::sleep(4 * SECOND).await;
        assert_eq!(hold.held_for(Instant::now()), Some(4 * SECOND));
        assert_eq!(
            hold.by().map(|p| (p.limit.requests(), p.source)),
            Some((1, PacingSource::Caller))
        );
        assert!(waiter.await.unwrap());
        assert_eq!(hold.held_for(Instant::now()), None);
    }
}
