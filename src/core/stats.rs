//! Counters of a client, read as a cheap snapshot with [`RetryingClient::stats`].
//!
//! [`RetryingClient::stats`]: crate::RetryingClient::stats

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use http::StatusCode;
use tokio::time::Instant;

use crate::core::attempt::TransportKind;
use crate::core::limit::figures::RoutePacing;
use crate::core::runtime;

/// What a client has done since it was built: a snapshot, shared by its clones.
///
/// # Examples
///
/// ```
/// use hodoflow_retry::HodoflowClient;
///
/// let client = HodoflowClient::builder("https://hodoflow.example")
///     .client_credentials("sender-1", "s3cr3t")
///     .build()?;
/// let stats = client.stats();
/// assert_eq!(stats.calls, 0);
/// assert_eq!(stats.retry_budget_tokens, Some(500));
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Calls started: deliveries, writes, reads, queries and run polls.
    pub calls: u64,
    /// Calls that ended in success.
    pub succeeded: u64,
    /// Calls that ended in an error, including errors before anything was sent.
    pub failed: u64,
    /// Attempts sent.
    pub attempts: u64,
    /// Retries, by what the attempt before them came back with.
    pub retries: Retries,
    /// Attempts this client's retry budget refused to send, retries and (while the service is
    /// down) first attempts: each ended its call with `retry_budget_exhausted`.
    pub retry_budget_refusals: u64,
    /// The retry budget's tokens left, or `None` when it is disabled.
    pub retry_budget_tokens: Option<u32>,
    /// The retry budget's SRE throttle ratio in thousandths (the service is down from 500), or
    /// `None` when it is disabled.
    pub retry_budget_throttle_permille: Option<u32>,
    /// Calls waiting now for a retry token, a probe or a send slot, on every client sharing the
    /// retry budget.
    pub retry_budget_waiting: u64,
    /// Attempts refused without being sent, on every client sharing the retry budget.
    pub retry_budget_local_rejections: u64,
    /// The time between sends the retry budget's rate limiter allows, after a 429 without
    /// `Retry-After`; `None` when it is not engaged.
    pub retry_budget_send_interval: Option<Duration>,
    /// Time calls spent waiting at the credential's gate (a closed gate, the rate budget),
    /// summed over calls.
    pub gate_wait: Duration,
    /// Time calls spent waiting for a slot of a route's window, summed over calls.
    pub route_wait: Duration,
    /// How long calls have been held, without a break, waiting for a slot of a route's
    /// window (this client's pacing, or an outbox's shared window); `None` while none waits.
    /// [`route_held_by`](Self::route_held_by) says which limit holds them.
    pub route_held_for: Option<Duration>,
    /// How long the route window that last turned a call away stays full from now: an
    /// outbox's shared window full past a call's budget puts the job off to later instead of
    /// holding it. `None` when no such window is still full.
    pub route_full_for: Option<Duration>,
    /// The limit of the route window that last held (or turned away) a call, and where it
    /// came from: the caller, the server's `RateLimit-Policy`, or the documented default.
    pub route_held_by: Option<RoutePacing>,
    /// How long calls have been held at the credential's gate (a pause the server asked for,
    /// the rate budget, an outbox's shared pause), without a break; `None` while none waits.
    pub gate_held_for: Option<Duration>,
    /// How long the credential stays closed, as the server asked with a 429 and `Retry-After`
    /// (the vendor's credential-wide one, such as the JSON:API's), or a `RateLimit` field with
    /// nothing remaining; `None` while it is open. It holds the credential's calls only:
    /// [`route_closed_for`](Self::route_closed_for) is a route's.
    pub gate_closed_for: Option<Duration>,
    /// How long the route a server closed longest stays closed from now (its 429 with
    /// `Retry-After`, or its `RateLimit` field with nothing remaining); `None` while none is.
    /// It holds the deliveries to that route only.
    pub route_closed_for: Option<Duration>,
    /// Token exchanges finished, failed ones included.
    pub exchanges: u64,
    /// How long the retry budget has seen the service down (`None` while it is up, or when the
    /// budget is disabled). Once this passes one call's budget, a sender can stop starting
    /// calls: none started now could ride the outage out.
    pub service_down_for: Option<Duration>,
}

/// Retries by cause: what the attempt before the retry came back with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Retries {
    /// The attempt timed out.
    pub timeout: u64,
    /// No answer for another reason: connect error, reset, unreadable body.
    pub transport: u64,
    /// A 5xx answer.
    pub server_error: u64,
    /// A 429 answer.
    pub rate_limited: u64,
    /// A 401, retried once after a token re-exchange.
    pub unauthorized: u64,
    /// A 409 `idempotency_key_in_progress`, waited for by choice.
    pub in_progress: u64,
}

impl Retries {
    /// Every retry, whatever its cause.
    pub fn total(&self) -> u64 {
        self.timeout
            + self.transport
            + self.server_error
            + self.rate_limited
            + self.unauthorized
            + self.in_progress
    }
}

/// Why the engine retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryCause {
    Timeout,
    Transport,
    ServerError,
    RateLimited,
    Unauthorized,
    InProgress,
}

impl RetryCause {
    /// The cause of a retry after an attempt that came back with `status` or `transport`.
    /// `in_progress` is the profile's status for "the same key is still running".
    pub(crate) fn of(
        status: Option<StatusCode>,
        transport: Option<TransportKind>,
        in_progress: Option<u16>,
    ) -> Self {
        match (status, transport) {
            (Some(status), _) if Some(status.as_u16()) == in_progress => Self::InProgress,
            (Some(StatusCode::UNAUTHORIZED), _) => Self::Unauthorized,
            (Some(StatusCode::TOO_MANY_REQUESTS), _) => Self::RateLimited,
            (Some(_), _) => Self::ServerError,
            (None, Some(TransportKind::Timeout)) => Self::Timeout,
            (None, _) => Self::Transport,
        }
    }

    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Transport => "transport",
            Self::ServerError => "server_error",
            Self::RateLimited => "rate_limited",
            Self::Unauthorized => "unauthorized",
            Self::InProgress => "in_progress",
        }
    }
}

/// The live counters behind [`Stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    calls: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    attempts: AtomicU64,
    retries: [AtomicU64; 6],
    retry_budget_refusals: AtomicU64,
    gate_wait_nanos: AtomicU64,
    route_wait_nanos: AtomicU64,
    /// Calls waiting now for a slot of a route's window.
    pub(crate) route_hold: Hold,
    /// Calls waiting now at the credential's gate.
    pub(crate) gate_hold: Hold,
}

/// Calls held back by one kind of limit: how many now, since when without a break, and by
/// which route limit last.
#[derive(Debug, Default)]
pub(crate) struct Hold {
    state: Mutex<HoldState>,
}

#[derive(Debug, Default)]
struct HoldState {
    holding: usize,
    since: Option<Instant>,
    by: Option<RoutePacing>,
    /// A call was turned away: the limit stays closed until then.
    full_until: Option<Instant>,
}

/// One call held, counted in the client's [`Stats`]; it is no longer when this drops.
#[derive(Debug)]
#[must_use = "the call is counted as held only while the guard lives"]
pub struct Holding<'a>(&'a Hold);

impl Hold {
    fn lock(&self) -> std::sync::MutexGuard<'_, HoldState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A call starts waiting, held by `by` (a route's limit; `None` at the gate).
    pub(crate) fn begin(&self, by: Option<RoutePacing>) -> Holding<'_> {
        let mut state = self.lock();
        state.holding += 1;
        state.since.get_or_insert_with(runtime::now);
        if by.is_some() {
            state.by = by;
        }
        Holding(self)
    }

    /// A call was turned away, `by` a limit that stays closed for `wait`.
    pub(crate) fn turned_away(&self, by: Option<RoutePacing>, wait: Duration) {
        let mut state = self.lock();
        if by.is_some() {
            state.by = by;
        }
        if let Some(until) = runtime::now().checked_add(wait) {
            state.full_until = state.full_until.max(Some(until));
        }
    }

    /// How long the limit that last turned a call away stays closed from `now`.
    pub(crate) fn full_for(&self, now: Instant) -> Option<Duration> {
        self.lock()
            .full_until
            .filter(|until| *until > now)
            .map(|until| until - now)
    }

    /// How long calls have been held at `now` without a break; `None` while none is.
    pub(crate) fn held_for(&self, now: Instant) -> Option<Duration> {
        self.lock()
            .since
            .map(|since| now.saturating_duration_since(since))
    }

    /// The route limit that last held a call.
    pub(crate) fn by(&self) -> Option<RoutePacing> {
        self.lock().by
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.holding -= 1;
        if state.holding == 0 {
            state.since = None;
        }
    }
}

impl Counters {
    pub(crate) fn call_started(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn call_ended(&self, succeeded: bool) {
        let counter = if succeeded {
            &self.succeeded
        } else {
            &self.failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn attempt_sent(&self) {
        self.attempts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn retried(&self, cause: RetryCause) {
        self.retries[cause as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn retry_refused(&self) {
        self.retry_budget_refusals.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn waited_at_gate(&self, wait: Duration) {
        self.gate_wait_nanos
            .fetch_add(nanos(wait), Ordering::Relaxed);
    }

    pub(crate) fn waited_for_route(&self, wait: Duration) {
        self.route_wait_nanos
            .fetch_add(nanos(wait), Ordering::Relaxed);
    }

    /// A snapshot of the counters; the budget's tokens and the exchanges are the engine's.
    pub(crate) fn snapshot(&self) -> Stats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let retry = |cause: RetryCause| load(&self.retries[cause as usize]);
        Stats {
            calls: load(&self.calls),
            succeeded: load(&self.succeeded),
            failed: load(&self.failed),
            attempts: load(&self.attempts),
            retries: Retries {
                timeout: retry(RetryCause::Timeout),
                transport: retry(RetryCause::Transport),
                server_error: retry(RetryCause::ServerError),
                rate_limited: retry(RetryCause::RateLimited),
                unauthorized: retry(RetryCause::Unauthorized),
                in_progress: retry(RetryCause::InProgress),
            },
            retry_budget_refusals: load(&self.retry_budget_refusals),
            retry_budget_tokens: None,
            retry_budget_throttle_permille: None,
            retry_budget_waiting: 0,
            retry_budget_local_rejections: 0,
            retry_budget_send_interval: None,
            gate_wait: Duration::from_nanos(load(&self.gate_wait_nanos)),
            route_wait: Duration::from_nanos(load(&self.route_wait_nanos)),
            route_held_for: self.route_hold.held_for(runtime::now()),
            route_full_for: self.route_hold.full_for(runtime::now()),
            route_held_by: self.route_hold.by(),
            gate_held_for: self.gate_hold.held_for(runtime::now()),
            gate_closed_for: None,
            route_closed_for: None,
            exchanges: 0,
            service_down_for: None,
        }
    }
}

fn nanos(wait: Duration) -> u64 {
    u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_retries_by_what_came_back() {
        let cases = [
            (Some(401), None, RetryCause::Unauthorized),
            (Some(429), None, RetryCause::RateLimited),
            (Some(409), None, RetryCause::InProgress),
            (Some(503), None, RetryCause::ServerError),
            (None, Some(TransportKind::Timeout), RetryCause::Timeout),
            (None, Some(TransportKind::Closed), RetryCause::Transport),
        ];
        for (status, transport, cause) in cases {
            let status = status.map(|code| StatusCode::from_u16(code).unwrap());
            assert_eq!(
                RetryCause::of(status, transport, Some(409)),
                cause,
                "{status:?}"
            );
        }
    }

    #[test]
    fn a_snapshot_adds_up_what_was_counted() {
        let counters = Counters::default();
        counters.call_started();
        counters.attempt_sent();
        counters.attempt_sent();
        counters.retried(RetryCause::Timeout);
        counters.retried(RetryCause::InProgress);
        counters.waited_at_gate(Duration::from_millis(150));
        counters.waited_at_gate(Duration::from_millis(50));
        counters.call_ended(true);
        let stats = counters.snapshot();
        assert_eq!((stats.calls, stats.succeeded, stats.failed), (1, 1, 0));
        assert_eq!(stats.attempts, 2);
        assert_eq!(stats.retries.timeout, 1);
        assert_eq!(stats.retries.in_progress, 1);
        assert_eq!(stats.retries.total(), 2);
        assert_eq!(stats.gate_wait, Duration::from_millis(200));
    }
}
