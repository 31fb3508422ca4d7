//! The one attempt loop every surface runs, acting only:
//! fixed request -> slots -> attempt -> record -> [`Course::decide`] -> sleep or re-exchange ->
//! next attempt -> outcome.
//!
//! What to do after an answer is decided in `decide.rs`, a pure step; here are the effects: the
//! retry budget's admission, the trigger's window, the credential's gate, the fleet's shared
//! limits, the token, the send, the records and the sleeps. A call has one exit
//! ([`Engine::attempts`]), where its attempts are attached to what it returns and the secrets an
//! error could quote are redacted, whichever step ended it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use tracing::Instrument;

use crate::core::answer::{Answer, FinalAnswer};
use crate::core::attempt::{Attempt, TransportKind, WaitReason};
use crate::core::auth::{CachedToken, TokenCache, TokenWait};
use crate::core::backoff::Backoff;
use crate::core::budget::{Budget, Deadline};
use crate::core::clock;
use crate::core::clock::wall_now;
use crate::core::decide::{Course, Decision, Heard, Now, Step};
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::fleet::Fleet;
use crate::core::fleet::gate::RateGate;
use crate::core::fleet::retry_budget::{Limits, RetryBudget};
use crate::core::fleet::trigger_limit::{TriggerLimiter, WindowSlot};
use crate::core::jitter::Jitter;
use crate::core::matrix::Verdict;
use crate::core::otel;
use crate::core::profile::Vendor;
use crate::core::rate_limit_field;
use crate::core::request::FixedRequest;
use crate::core::schedule::{SharedSchedule, Waits};
use crate::core::stats::{Counters, Stats};
use crate::core::transport::Transport;

/// The least time an attempt needs: a rate-budget wait must leave this much of the budget.
const MIN_ATTEMPT: Duration = Duration::from_millis(1);

/// How one operation retries: its budget, its backoff and its schedule, set per client and per
/// call.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    pub(crate) budget: Budget,
    pub(crate) backoff: Backoff,
    /// Replaces the backoff's own waits when set; its `Retry-After` fallback still applies.
    pub(crate) schedule: Option<SharedSchedule>,
    /// Limits shared with other processes (the outbox's workers); `None` for plain calls.
    pub(crate) fleet: Option<Arc<dyn Fleet>>,
}

/// What the engine needs of its client. The attempts leave through a [`Transport`]: the
/// client's own reqwest client, or the rest of a reqwest-middleware stack.
#[derive(Debug)]
pub(crate) struct Engine {
    /// `None` in a middleware stack without an exchanger: the request's own `Authorization`
    /// is sent as it is, and a 401 stops.
    pub(crate) tokens: Option<TokenCache>,
    pub(crate) gate: RateGate,
    pub(crate) triggers: TriggerLimiter,
    pub(crate) retry_budget: RetryBudget,
    pub(crate) counters: Counters,
    /// Attempts by status class and their durations (feature `metrics`).
    #[cfg(feature = "metrics")]
    pub(crate) meter: crate::core::meter::AttemptMeter,
    /// The most bytes of a JSON:API, read or GraphQL answer read.
    pub(crate) answer_limit: usize,
    /// The client's draws: backoff jitter and the gate's spread.
    pub(crate) jitter: Jitter,
}

impl Engine {
    /// Runs `request` until the matrix says stop or the budget ends.
    pub(crate) async fn run<T: Transport>(
        &self,
        request: &FixedRequest,
        policy: &Policy,
        transport: &mut T,
    ) -> Result<FinalAnswer> {
        policy.budget.validate()?;
        self.counters.call_started();
        let span = otel::call_span(request);
        let result = self
            .attempts(request, policy, transport)
            .instrument(span.clone())
            .await;
        self.counters.call_ended(result.is_ok());
        otel::record_call(&span, &result);
        span.in_scope(|| self.trace_call(&result));
        result
    }

    /// [`run`](Self::run) from one allocation per call, which owns the request, the policy and
    /// the attempt loop's state: the caller's future stays small while the call is in flight,
    /// and a caller that moves it (into a task, a `select!`, a local and then `.await`) moves a
    /// few hundred bytes, not the loop. The request comes back with the result, for what the
    /// caller reads of it after.
    pub(crate) fn run_boxed<'a, T: Transport + 'a>(
        &'a self,
        request: FixedRequest,
        policy: Policy,
        mut transport: T,
    ) -> Pin<Box<impl Future<Output = (Result<FinalAnswer>, FixedRequest)> + Send + 'a>> {
        Box::pin(async move {
            let result = self.run(&request, &policy, &mut transport).await;
            (result, request)
        })
    }

    /// What the client has done so far: the counters, the retry tokens left, the exchanges.
    pub(crate) fn stats(&self) -> Stats {
        Stats {
            retry_budget_tokens: self.retry_budget.tokens(),
            retry_budget_throttle_permille: self
                .retry_budget
                .throttle_ratio()
                .map(|ratio| (ratio * 1000.0).round() as u32),
            retry_budget_waiting: self.retry_budget.waiting(),
            retry_budget_local_rejections: self.retry_budget.local_rejections(),
            retry_budget_send_interval: self
                .retry_budget
                .send_rate()
                .map(|rate| Duration::from_secs_f64(1.0 / rate)),
            service_down_for: self.retry_budget.down_for(),
            exchanges: self.tokens.as_ref().map_or(0, TokenCache::exchanges),
            gate_closed_for: self.gate.closed_for(clock::now()),
            ..self.counters.snapshot()
        }
    }

    /// One event per call with the client's counters, for dashboards built on tracing.
    fn trace_call(&self, result: &Result<FinalAnswer>) {
        if !tracing::enabled!(tracing::Level::DEBUG) {
            return;
        }
        let (attempts, outcome) = match result {
            Ok(answered) => (answered.attempts.len(), "ok"),
            Err(error) => (error.attempts().len(), error.kind().as_str()),
        };
        let stats = self.stats();
        tracing::debug!(
            attempts,
            outcome,
            client_calls = stats.calls,
            client_attempts = stats.attempts,
            client_retries = stats.retries.total(),
            client_retry_refusals = stats.retry_budget_refusals,
            retry_tokens_left = stats.retry_budget_tokens.map(i64::from).unwrap_or(-1),
            throttle_permille = stats
                .retry_budget_throttle_permille
                .map(i64::from)
                .unwrap_or(-1),
            waiting_for_budget = stats.retry_budget_waiting,
            local_rejections = stats.retry_budget_local_rejections,
            send_interval_ms = stats
                .retry_budget_send_interval
                .map_or(-1, |every| every.as_millis() as i64),
            gate_wait_ms = stats.gate_wait.as_millis() as u64,
            trigger_wait_ms = stats.trigger_wait.as_millis() as u64,
            exchanges = stats.exchanges,
            "call finished"
        );
    }

    /// The one exit of a call: its attempts are attached to what it returns, and a trigger
    /// token or bearer token an error quotes is redacted, whichever step ended it.
    async fn attempts<T: Transport>(
        &self,
        request: &FixedRequest,
        policy: &Policy,
        transport: &mut T,
    ) -> Result<FinalAnswer> {
        let mut attempts = Vec::new();
        let mut token = None;
        let ended = self
            .act(request, policy, transport, &mut attempts, &mut token)
            .await;
        match ended {
            Ok((status, headers, body)) => Ok(FinalAnswer {
                status,
                headers,
                body,
                attempts,
            }),
            Err(error) => {
                let error = error.redacting(secret(&token));
                let error = match request.trigger_token() {
                    Some(trigger) => error.redacting(trigger),
                    None => error,
                };
                Err(error.with_attempts(attempts))
            }
        }
    }

    /// Acts out a call's [`Course`]: takes its slots, sends, records, sleeps; what to do after
    /// each answer is [`Course::decide`]'s. `attempts` and `token` are the exit's to report.
    async fn act<T: Transport>(
        &self,
        request: &FixedRequest,
        policy: &Policy,
        transport: &mut T,
        attempts: &mut Vec<Attempt>,
        token: &mut Option<CachedToken>,
    ) -> Result<(StatusCode, HeaderMap, Bytes)> {
        let budget = policy.budget;
        // The first attempt's place in the trigger's window is taken before the budget starts
        // (`trigger_limit.rs`): queueing is not retrying. An outbox worker's call counts it, as
        // its lease measures the whole call.
        let mut queued = match (&policy.fleet, request.trigger) {
            (None, Some(_)) => Some(self.trigger_slot(request, budget.max_elapsed).await?),
            _ => None,
        };
        let deadline = Deadline::start(budget, clock::now());
        let mut course = Course::new(
            request.profile,
            Waits::new(policy.backoff, policy.schedule.as_ref()),
            self.tokens.is_some(),
            budget.wait_for_in_progress,
        );
        let profile = request.profile;
        let limit = profile.answer_limit.unwrap_or(self.answer_limit);
        // Retry tokens this call took, refunded if it succeeds.
        let mut spent = 0;
        loop {
            let number = attempts.len() as u32 + 1;
            let now = clock::now();
            let limits = Limits {
                max_wait: deadline.remaining(now).saturating_sub(MIN_ATTEMPT),
                hold: deadline.hold(now),
                due: deadline.due(now),
                rides_out: deadline.max_elapsed(),
            };
            let ticket = match self.retry_budget.admit(course.admission(), limits).await {
                Ok(ticket) => ticket,
                Err(refusal) => {
                    self.counters.retry_refused();
                    tracing::debug!(
                        attempt = number,
                        "the retry budget refused to send this attempt"
                    );
                    return Err(course.refused(&refusal));
                }
            };
            spent += ticket.cost();
            if let Some(cause) = course.cause() {
                self.counters.retried(cause);
            }
            let slot = match queued.take() {
                Some(slot) => slot,
                None => {
                    let max_wait = deadline.remaining(clock::now()).saturating_sub(MIN_ATTEMPT);
                    self.trigger_slot(request, max_wait).await?
                }
            };
            self.pass_gate(&deadline).await?;
            let fleet_slot = match &policy.fleet {
                None => None,
                Some(fleet) => self.fleet_slot(fleet.as_ref(), request, &deadline).await?,
            };
            let Some(timeout) = deadline.attempt_timeout(clock::now()) else {
                return Err(exhausted("no time left for another attempt".to_owned()));
            };
            // Read after every wait: a token that expired while the call waited is refreshed
            // before it is sent, never sent stale.
            if let Some(tokens) = &self.tokens {
                *token = Some(tokens.get(token_wait(&deadline)?).await?);
            }
            let authorization = token.as_ref().map(CachedToken::authorization).transpose()?;
            self.counters.attempt_sent();
            let attempt_span = otel::attempt_span(request, number);
            #[cfg(feature = "metrics")]
            let sent_at = clock::now();
            let answer = transport
                .send(request, authorization, timeout, limit)
                .instrument(attempt_span.clone())
                .await;
            #[cfg(feature = "metrics")]
            self.meter.attempt(
                &request.method,
                &answer,
                clock::now().saturating_duration_since(sent_at),
            );
            otel::record_attempt(&attempt_span, &answer);
            // What the answer says of the trigger's window is learned before its slot is
            // released, so the slot is held for the window the server just stated.
            if let (Some(trigger), Some(headers), Some(policy)) = (
                request.trigger,
                answer.headers(),
                profile.vendor.trigger_policy,
            ) {
                self.triggers
                    .heard(trigger, rate_limit_field::trigger_window(headers, policy));
            }
            if let Some(slot) = slot {
                slot.release_after_window();
            }
            if let (Some(fleet), Some(slot)) = (&policy.fleet, fleet_slot) {
                fleet.answered(request.trigger_token(), slot).await;
            }
            let wall = wall_now();
            let retry_after = answer.retry_after(wall);
            let closed_for = self.note_rate_limit(profile.vendor, &answer, retry_after);
            if let (Some(fleet), Some(wait)) = (&policy.fleet, closed_for) {
                fleet.slow_down(wait).await;
            }
            let probe = ticket.is_probe();
            self.retry_budget
                .answered(ticket, answer.status(), retry_after);
            attempts.push(record(number, &answer));
            let now = Now {
                at: clock::now(),
                wall,
            };
            let heard = Heard {
                answer: &answer,
                retry_after,
                probe,
            };
            let Decision { verdict, step } = self
                .jitter
                .with(|rng| course.decide(heard, &deadline, now, rng));
            let elapsed = deadline.elapsed(now.at);
            let (wait, reason, cause) = match step {
                Step::Done => {
                    trace_attempt(&answer, number, verdict, None, elapsed);
                    self.retry_budget.succeeded(spent);
                    // Only an answer with a status is classified a success.
                    return answer.into_parts().ok_or_else(|| {
                        Error::new(ErrorKind::Transport, "no answer from the server")
                    });
                }
                Step::Stop(error) => {
                    trace_attempt(&answer, number, verdict, None, elapsed);
                    return Err(error);
                }
                Step::Refused(error) => {
                    tracing::error!(
                        attempt = number,
                        status = 401,
                        request_id = answer.request_id().unwrap_or("-"),
                        "unauthorized again after a token re-exchange: stopping; alert an operator",
                    );
                    return Err(error);
                }
                Step::Wait {
                    wait,
                    reason,
                    cause,
                } => (wait, reason, cause),
                Step::Reexchange { cause } => (Duration::ZERO, WaitReason::Reexchange, cause),
            };
            if let Some(last) = attempts.last_mut() {
                last.set_wait(wait, reason);
            }
            trace_attempt(
                &answer,
                number,
                verdict,
                Some((wait, reason.as_str(), cause.as_str())),
                elapsed,
            );
            match (reason, &self.tokens, token.as_ref()) {
                (WaitReason::Reexchange, Some(tokens), Some(sent)) => {
                    tokens
                        .refresh_after_unauthorized(sent, token_wait(&deadline)?)
                        .await?;
                }
                _ => tokio::time::sleep(wait).await,
            }
        }
    }

    /// Waits for the fleet's shared pause and trigger window, when the call has a fleet
    /// (an outbox worker's), within the time left.
    async fn fleet_slot(
        &self,
        fleet: &dyn Fleet,
        request: &FixedRequest,
        deadline: &Deadline,
    ) -> Result<Option<i64>> {
        let max_wait = deadline.remaining(clock::now()).saturating_sub(MIN_ATTEMPT);
        // The store behind the fleet is bounded too: a store that does not answer ends the
        // call when its time does.
        let admitted =
            tokio::time::timeout(max_wait, fleet.admit(request.trigger_token(), max_wait)).await;
        match admitted {
            Ok(Ok(slot)) => Ok(slot),
            Err(_) => Err(exhausted(format!(
                "the fleet's store did not answer for the shared pause or trigger window within the {max_wait:?} left"
            ))),
            Ok(Err(wait)) => Err(exhausted(format!(
                "the fleet's shared pause or trigger window stays closed for {wait:?}, past the time left"
            ))),
        }
    }

    /// Waits for a slot of the trigger's window, when the request is a delivery to a paced
    /// trigger, at most `max_wait`.
    async fn trigger_slot(
        &self,
        request: &FixedRequest,
        max_wait: Duration,
    ) -> Result<Option<WindowSlot>> {
        let Some(trigger) = request.trigger else {
            return Ok(None);
        };
        match self
            .triggers
            .acquire(trigger, max_wait, &self.counters.trigger_hold)
            .await
        {
            Ok(None) => Ok(None),
            Ok(Some((slot, waited))) => {
                if !waited.is_zero() {
                    self.counters.waited_for_trigger(waited);
                    tracing::debug!(
                        wait_ms = waited.as_millis() as u64,
                        "waited for a slot of the trigger's window"
                    );
                }
                Ok(Some(slot))
            }
            Err(()) => Err(exhausted(format!(
                "the trigger's window had no free slot within {max_wait:?}"
            ))),
        }
    }

    /// Waits for the credential's gate; refuses when the wait would leave no time for the
    /// attempt.
    async fn pass_gate(&self, deadline: &Deadline) -> Result<()> {
        let now = clock::now();
        let max_wait = deadline.remaining(now).saturating_sub(MIN_ATTEMPT);
        let reserved = self
            .jitter
            .with(|rng| self.gate.reserve(now, max_wait, rng));
        match reserved {
            Ok(wait) if wait.is_zero() => Ok(()),
            Ok(wait) => {
                self.counters.waited_at_gate(wait);
                tracing::debug!(
                    wait_ms = wait.as_millis() as u64,
                    "waiting at the credential's gate"
                );
                let _held = self.counters.gate_hold.begin(None);
                tokio::time::sleep(wait).await;
                Ok(())
            }
            Err(wait) => Err(exhausted(format!(
                "the credential's gate stays closed for {wait:?}, past the time left"
            ))),
        }
    }

    /// A status of the vendor's `slow_down` (429 or 503) with `Retry-After`, or a `RateLimit`
    /// field with nothing remaining, closes the credential's gate. `Retry-After` wins when both
    /// are present.
    /// Returns how long the gate was closed for, if it was.
    fn note_rate_limit(
        &self,
        vendor: &Vendor,
        answer: &Answer,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        let headers = answer.headers()?;
        let slow_down = answer
            .status()
            .is_some_and(|status| vendor.slow_down.contains(&status.as_u16()));
        let exhausted = rate_limit_field::exhausted_for(headers, vendor.trigger_policy);
        let closed_for = match retry_after {
            Some(wait) if slow_down || exhausted.is_some() => Some(wait),
            _ => exhausted,
        };
        let closed_for = closed_for.filter(|wait| !wait.is_zero())?;
        self.gate.close_for(clock::now(), closed_for);
        tracing::debug!(
            wait_ms = closed_for.as_millis() as u64,
            "the server asked the credential to slow down: gate closed"
        );
        Some(closed_for)
    }
}

/// How long a call waits for a token: while time is left for the attempt after it. An exchange
/// it starts is bounded by the attempt timeout, its connect and body read included, whatever
/// the exchanger's own timeout; one that runs out is a retryable `token_exchange` failure.
fn token_wait(deadline: &Deadline) -> Result<TokenWait> {
    let now = clock::now();
    if deadline.attempt_timeout(now).is_none() {
        return Err(exhausted("no time left for the token exchange".to_owned()));
    }
    let left = deadline.remaining(now).saturating_sub(MIN_ATTEMPT);
    Ok(TokenWait {
        until: now.checked_add(left).unwrap_or(now),
        exchange_timeout: deadline.attempt_limit(),
    })
}

/// The bearer token to keep out of error messages; none when the caller sent its own.
fn secret(token: &Option<CachedToken>) -> &str {
    token.as_ref().map_or("", CachedToken::expose)
}

/// The record of attempt `number`.
fn record(number: u32, answer: &Answer) -> Attempt {
    match answer.status() {
        Some(status) => Attempt::answered(number, status, answer.request_id().map(str::to_owned)),
        None => Attempt::unanswered(number, answer.transport().unwrap_or(TransportKind::Other)),
    }
}

/// A `budget_exhausted` error: `call budget exhausted: {why}`.
fn exhausted(why: String) -> Error {
    Error::new(
        ErrorKind::BudgetExhausted,
        format!("call budget exhausted: {why}"),
    )
}

/// One event per attempt: number, status or transport error, `x-request-id`,
/// verdict, and the wait chosen. Never a token, a body or a trigger URL.
fn trace_attempt(
    answer: &Answer,
    number: u32,
    verdict: Verdict,
    wait: Option<(Duration, &str, &str)>,
    elapsed: Duration,
) {
    let traced = match wait {
        Some(_) => tracing::enabled!(tracing::Level::WARN),
        None => tracing::enabled!(tracing::Level::INFO),
    };
    if !traced {
        return;
    }
    let elapsed_ms = elapsed.as_millis() as u64;
    let status = answer.status();
    let result = match (&status, answer.transport()) {
        (Some(status), _) => status.as_str(),
        (None, Some(kind)) => kind.as_str(),
        (None, None) => "-",
    };
    let request_id = answer.request_id().unwrap_or("-");
    match wait {
        Some((wait, reason, cause)) => {
            let wait_ms = wait.as_millis() as u64;
            tracing::warn!(attempt = number, result = %result, request_id, verdict = ?verdict, wait_ms, reason, cause, elapsed_ms, "attempt will be retried");
        }
        None => {
            tracing::info!(attempt = number, result = %result, request_id, verdict = ?verdict, elapsed_ms, "attempt finished");
        }
    }
}
