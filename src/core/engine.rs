//! The engine: an interpreter of one call's [`Plan`], with one exit.
//!
//! It asks the plan what to do (`plan.rs`, pure), does it, and tells the plan what happened:
//! asks the [`Limiters`] for the attempt's scope, gets the token, sends, lets the limiters hear
//! the answer, records the attempt, sleeps. It decides nothing of its own. A call has one exit
//! ([`Engine::attempts`]), where its attempts are attached to what it returns and what it keeps
//! of a server's words is cleaned of every secret (`redact.rs`), whichever step ended it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use tracing::Instrument;

use crate::core::answer::{Answer, Fields, FinalAnswer};
use crate::core::attempt::{Attempt, MAX_REQUEST_ID, TransportKind, WaitReason};
use crate::core::auth::{CachedToken, TokenCache, TokenWait};
use crate::core::backoff::Backoff;
use crate::core::budget::{Budget, Deadline};
use crate::core::classify;
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::jitter::{Draws, Jitter};
use crate::core::limit::retry_budget::Admission;
use crate::core::limit::scope::{self, Scope, ServiceKey};
use crate::core::limit::shared::Fleet;
use crate::core::limit::{Ask, Limiters, Permits, Queued};
use crate::core::matrix::Verdict;
use crate::core::otel;
use crate::core::plan::{Event, Now, Plan, Step};
use crate::core::profile::SurfaceProfile;
use crate::core::redact::Secrets;
use crate::core::request::FixedRequest;
use crate::core::retry_after::parse_retry_after;
use crate::core::runtime::{self, WallAnchor};
use crate::core::schedule::{SharedSchedule, Waits};
use crate::core::stats::{Counters, RetryCause, Stats};
use crate::core::transport::Transport;

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
    /// How long a call may queue for its route's window before it starts (its budget starts
    /// once it has its slots); `None`: the wait is part of its budget.
    pub(crate) queue: Option<Duration>,
}

/// How often a queued call looks whether its service has been down too long; a queue
/// allowance shorter than this is none.
const QUEUE_LOOK_AGAIN: Duration = Duration::from_secs(1);

/// Whom a client sends for: its endpoint, by a hash (its services' keys) and by a name the
/// processes of a fleet share (a base URL and never a secret).
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
}

impl Endpoint {
    /// The endpoint named `name` (never a secret).
    pub(crate) fn new(name: &str) -> Self {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        name.hash(&mut hasher);
        Self {
            id: hasher.finish(),
            name: name.into(),
        }
    }
}

/// What the engine needs of its client. The attempts leave through a [`Transport`]: the
/// client's own reqwest client, or the rest of a reqwest-middleware stack.
#[derive(Debug)]
pub(crate) struct Engine {
    /// `None` in a middleware stack without an exchanger: the request's own `Authorization`
    /// is sent as it is, and a 401 stops.
    pub(crate) tokens: Option<TokenCache>,
    pub(crate) limits: Limiters,
    pub(crate) counters: Counters,
    /// Attempts by status class and their durations (feature `metrics`).
    #[cfg(feature = "metrics")]
    pub(crate) meter: crate::core::meter::AttemptMeter,
    /// The most bytes of a JSON:API, read or GraphQL answer read.
    pub(crate) answer_limit: usize,
    /// The client's draws: backoff jitter.
    pub(crate) jitter: Jitter,
    pub(crate) endpoint: Endpoint,
}

impl Engine {
    /// Runs `request` until the plan says stop or done.
    pub(crate) async fn run<T: Transport>(
        &self,
        request: &FixedRequest,
        policy: &Policy,
        transport: &mut T,
    ) -> Result<FinalAnswer> {
        policy.budget.validate()?;
        self.counters.call_started();
        // Pinned in place, so that its span is read after it ends: no second copy of the span
        // is held while the call is in flight.
        let mut call = std::pin::pin!(
            self.attempts(request, policy, transport)
                .instrument(otel::call_span(request))
        );
        let result = call.as_mut().await;
        let span = call.span();
        self.counters.call_ended(result.is_ok());
        otel::record_call(span, &result);
        span.in_scope(|| self.trace_call(&result));
        result
    }

    /// [`run`](Self::run) from one allocation per call, which owns the request, the policy and
    /// the attempt loop's state, and ends with `then` (what the caller makes of the result and
    /// the request): the caller's future stays small while the call is in flight, and a
    /// caller that moves it (into a task, a `select!`, a local and then `.await`) moves a
    /// pointer, not the loop. What `then` holds (a delivery's ID) is held once, in the
    /// allocation.
    pub(crate) fn run_boxed<'a, T: Transport + 'a, O: 'a>(
        &'a self,
        request: FixedRequest,
        policy: Arc<Policy>,
        mut transport: T,
        then: impl FnOnce(Result<FinalAnswer>, FixedRequest) -> O + Send + 'a,
    ) -> Pin<Box<impl Future<Output = O> + Send + 'a>> {
        Box::pin(async move {
            let result = self.run(&request, &policy, &mut transport).await;
            then(result, request)
        })
    }

    /// The service a request's answers speak for.
    pub(crate) fn service(&self, request: &FixedRequest) -> ServiceKey {
        ServiceKey {
            endpoint: self.endpoint.id,
            name: request.profile.scopes.service,
        }
    }

    /// What the client has done so far: the counters, the retry tokens left, the exchanges.
    pub(crate) fn stats(&self) -> Stats {
        let budget = &self.limits.retry_budget;
        let now = runtime::now();
        Stats {
            retry_budget_tokens: budget.tokens(),
            retry_budget_throttle_permille: budget
                .throttle_ratio()
                .map(|ratio| (ratio * 1000.0).round() as u32),
            retry_budget_waiting: budget.waiting(),
            retry_budget_local_rejections: budget.local_rejections(),
            retry_budget_send_interval: self.limits.rates.interval(),
            service_down_for: budget.down_for(),
            exchanges: self.tokens.as_ref().map_or(0, TokenCache::exchanges),
            gate_closed_for: self.limits.gate.closed_for(Scope::Credential, now),
            route_closed_for: self
                .limits
                .gate
                .closed(now)
                .into_iter()
                .filter(|(scope, ..)| *scope != Scope::Credential)
                .map(|(_, left, _)| left)
                .max(),
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
            route_wait_ms = stats.route_wait.as_millis() as u64,
            exchanges = stats.exchanges,
            "call finished"
        );
    }

    /// The one exit of a call: its attempts are attached to what it returns, and what a server
    /// said that it keeps (each `x-request-id`, the error code an error quotes) is cleaned of
    /// every secret of the client and the request (`redact.rs`), whichever step ended it.
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
        let cleaner = request.cleaner(self.tokens.as_ref().map(TokenCache::secrets));
        match ended {
            Ok((status, headers, body)) => {
                attempts
                    .iter_mut()
                    .for_each(|attempt| attempt.clean(&cleaner));
                Ok(FinalAnswer {
                    status,
                    headers,
                    body,
                    attempts,
                    cleaner,
                })
            }
            Err(error) => Err(error.with_attempts(attempts).cleaned(&cleaner)),
        }
    }

    /// Interprets the call's [`Plan`]: each step's effect, and what happened back to the plan.
    /// `attempts` and `token` are the exit's to report.
    async fn act<T: Transport>(
        &self,
        request: &FixedRequest,
        policy: &Policy,
        transport: &mut T,
        attempts: &mut Vec<Attempt>,
        token: &mut Option<CachedToken>,
    ) -> Result<(StatusCode, HeaderMap, Bytes)> {
        let profile = request.profile;
        let waits = Waits::new(policy.backoff, policy.schedule.as_ref());
        let holds_token = self.tokens.is_some();
        // A call that may queue takes its route's slots first; its budget starts after.
        // An allowance under a second is no queue: the wait is the budget's, as without one.
        // A queue's wait (rare) runs from an allocation of its own, freed before the first
        // attempt.
        let queued = match (policy.queue, request.route_key) {
            (Some(max), Some(_)) if max >= QUEUE_LOOK_AGAIN => {
                Some(Box::new(Box::pin(self.queue(request, policy, max)).await?))
            }
            _ => None,
        };
        let started = runtime::now();
        let mut plan = Plan::new(profile, policy.budget, waits, holds_token, started);
        let mut call = CallState {
            request,
            policy,
            secrets: self.tokens.as_ref().map(TokenCache::secrets),
            admission: Admission::First,
            attempts_left: policy.budget.max_attempts,
            paced_left: policy.budget.paced_allowance(),
            queued,
            permits: None,
            answer: None,
            attempts,
            token,
        };
        let mut event = Event::Begin;
        // The first step is taken when the plan starts: the clock is read once for both.
        let mut first = Some(started);
        loop {
            let step = {
                let at = first.take().unwrap_or_else(runtime::now);
                let now = Now {
                    at,
                    anchor: WallAnchor::get(at),
                };
                let answer = call.answer.as_ref();
                plan.next(event, answer, now, &mut Draws(&self.jitter))
            };
            event = match step {
                Step::Admit {
                    admission,
                    attempts_left,
                    paced_left,
                    retry,
                } => {
                    call.admission = admission;
                    (call.attempts_left, call.paced_left) = (attempts_left, paced_left);
                    self.admit(&mut call, plan.deadline(), retry).await
                }
                Step::Token(wait) => self.token(&mut call, wait).await,
                Step::Send { timeout } => {
                    self.attempt(transport, &mut call, plan.deadline(), timeout)
                        .await
                }
                Step::Sleep {
                    wait,
                    reason,
                    cause,
                    verdict,
                } => {
                    call.waits(wait, reason, cause, verdict);
                    runtime::sleep(wait).await;
                    Event::Waited
                }
                Step::Reexchange {
                    wait,
                    cause,
                    verdict,
                } => {
                    call.waits(Duration::ZERO, WaitReason::Reexchange, cause, verdict);
                    // A re-exchange (rare) from an allocation of its own.
                    Box::pin(self.reexchange(&call, wait)).await
                }
                Step::Done { refund, verdict } => {
                    call.trace(verdict, None);
                    self.limits.retry_budget.succeeded(refund);
                    // Only an answer with a status is a success.
                    return call.answer.and_then(Answer::into_parts).ok_or_else(|| {
                        Error::new(ErrorKind::Transport, "no answer from the server")
                    });
                }
                Step::Stop {
                    error,
                    alert,
                    verdict,
                } => return Err(call.stopped(error, alert, verdict)),
            };
        }
    }

    /// Queues a call for up to `max` ([`Policy::queue`]) for its route's slots, before it starts. It
    /// stops queueing, sending nothing, once the service it would send to has been down for
    /// longer than its budget: no call started then could ride the outage out.
    async fn queue(
        &self,
        request: &FixedRequest,
        policy: &Policy,
        max: Duration,
    ) -> Result<Queued> {
        let budget = policy.budget.max_elapsed;
        let started = runtime::now();
        let service = self.service(request);
        let down_too_long = || {
            self.limits
                .retry_budget
                .service_down_for(service)
                .filter(|down| *down >= budget)
        };
        let not_started = |down: Duration| {
            Error::new(
                ErrorKind::RetryBudgetExhausted,
                format!(
                    "not started: the service has been down for {:.1} s, longer than one call's budget ({:.1} s), while it queued {:.1} s for its route's window; nothing was sent, send it again later",
                    down.as_secs_f64(),
                    budget.as_secs_f64(),
                    runtime::now()
                        .saturating_duration_since(started)
                        .as_secs_f64()
                ),
            )
        };
        if let Some(down) = down_too_long() {
            return Err(not_started(down));
        }
        let ask = Ask {
            queue_wait: Some(max),
            ..self.ask(request, policy, Deadline::start(policy.budget, started))
        };
        // The slots are waited for in one queue (its place kept); once a second it is looked
        // whether the service has been down too long meanwhile.
        let watching = async {
            loop {
                runtime::sleep(QUEUE_LOOK_AGAIN).await;
                if let Some(down) = down_too_long() {
                    return down;
                }
            }
        };
        tokio::select! {
            queued = self.limits.queue(&ask) => match queued {
                Ok(queued) => Ok(queued),
                Err(refusal) => {
                    let error = Error::new(refusal.kind, refusal.message);
                    Err(error.with_retry_after(refusal.retry_after))
                }
            },
            down = watching => Err(not_started(down)),
        }
    }

    /// What each attempt of `request` asks of the limiters: its scope, route and service.
    fn ask<'a>(
        &'a self,
        request: &'a FixedRequest,
        policy: &'a Policy,
        deadline: Deadline,
    ) -> Ask<'a> {
        let profile = request.profile;
        Ask {
            endpoint: &self.endpoint.name,
            scope: profile.scopes.sits_in(request.route_key),
            route: request.route_key,
            route_name: request.route_name(),
            service: self.service(request),
            admission: Admission::First,
            attempts_left: policy.budget.max_attempts,
            paced_left: policy.budget.paced_allowance(),
            deadline,
            counters: &self.counters,
            fleet: policy.fleet.as_deref(),
            queue_wait: None,
        }
    }

    /// What the call's next attempt asks of the limiters, within `deadline`: built for each
    /// question, so that a call in flight does not carry it.
    fn ask_of<'a>(&'a self, call: &CallState<'a, '_>, deadline: &Deadline) -> Ask<'a> {
        Ask {
            admission: call.admission,
            attempts_left: call.attempts_left,
            paced_left: call.paced_left,
            ..self.ask(call.request, call.policy, *deadline)
        }
    }

    /// Asks the limiters to admit the next attempt; counts a retry once it is admitted.
    async fn admit(
        &self,
        call: &mut CallState<'_, '_>,
        deadline: &Deadline,
        retry: Option<RetryCause>,
    ) -> Event {
        // The limiters' waits are small here (a retry budget's slow path has an allocation
        // of its own): no larger than the attempt a call in flight carries anyway.
        let ask = self.ask_of(call, deadline);
        let queued = call.queued.take().map(|queued| *queued);
        let admitted = self.limits.admit_with(&ask, queued).await;
        match admitted {
            Ok(admitted) => {
                let (cost, probe) = (admitted.cost(), admitted.is_probe());
                call.permits = Some(admitted);
                if let Some(cause) = retry {
                    self.counters.retried(cause);
                }
                Event::Admitted { cost, probe }
            }
            Err(refusal) => Event::Refused(refusal),
        }
    }

    /// Gets the token for the attempt, within `wait`.
    async fn token(&self, call: &mut CallState<'_, '_>, wait: TokenWait) -> Event {
        let Some(tokens) = &self.tokens else {
            return Event::Ready;
        };
        // The cached token at once; an exchange (rare) from an allocation of its own, so that
        // a call in flight does not carry room for one.
        let got = match tokens.fresh() {
            Some(fresh) => Ok(fresh),
            None => Box::pin(tokens.get(wait)).await,
        };
        match got {
            Ok(fresh) => {
                *call.token = Some(fresh);
                Event::Ready
            }
            Err(error) => Event::Failed(error),
        }
    }

    /// Sends the attempt, lets the limiters hear its answer, and records it.
    async fn attempt<T: Transport>(
        &self,
        transport: &mut T,
        call: &mut CallState<'_, '_>,
        deadline: &Deadline,
        timeout: Duration,
    ) -> Event {
        let request = call.request;
        let sent = call.attempts.len();
        let got = match self
            .send(request, transport, call.token.as_ref(), timeout, sent)
            .await
        {
            Ok(got) => got,
            Err(error) => return Event::Failed(error),
        };
        let fields = got.headers().map(Fields::of);
        // The wall clock only for a `Retry-After` to read (an HTTP date is counted from it).
        let retry_after = fields
            .and_then(|fields| fields.retry_after())
            .and_then(|value| parse_retry_after(value, runtime::wall_now()));
        let signal = scope::signal(
            &request.profile.scopes,
            request.route_key,
            &got,
            fields.as_ref(),
            retry_after,
            &self.limits.windows.policy_memo,
        );
        if let Some(admitted) = call.permits.take() {
            let ask = self.ask_of(call, deadline);
            let slot = self.limits.heard(admitted, &ask, &signal);
            if ask.fleet.is_some() {
                // The fleet's store (rare) from an allocation of its own, as the admission.
                Box::pin(self.limits.heard_by_fleet(slot, &ask, &signal)).await;
            }
        }
        let request_id = fields.and_then(|fields| fields.request_id());
        call.attempts
            .push(record(sent as u32 + 1, &got, request_id, request.profile));
        call.answer = Some(got);
        Event::Answered { retry_after }
    }

    /// Exchanges the token again after a 401, within `wait`.
    async fn reexchange(&self, call: &CallState<'_, '_>, wait: TokenWait) -> Event {
        let (Some(tokens), Some(sent)) = (&self.tokens, call.token.as_ref()) else {
            return Event::Waited;
        };
        match tokens.refresh_after_unauthorized(sent, wait).await {
            Ok(_) => Event::Waited,
            Err(error) => Event::Failed(error),
        }
    }

    /// Sends attempt `sent + 1` with the held token, within `timeout`: counted, traced and
    /// metered.
    async fn send<T: Transport>(
        &self,
        request: &FixedRequest,
        transport: &mut T,
        token: Option<&CachedToken>,
        timeout: Duration,
        sent: usize,
    ) -> Result<Answer> {
        let authorization = token.map(CachedToken::authorization).transpose()?;
        let limit = request.profile.answer_limit.unwrap_or(self.answer_limit);
        self.counters.attempt_sent();
        #[cfg(feature = "metrics")]
        let sent_at = runtime::now();
        // Pinned in place, so that its span is read after it ends (as the call's).
        let mut sending = std::pin::pin!(
            transport
                .send(request, authorization, timeout, limit)
                .instrument(otel::attempt_span(request, sent as u32 + 1))
        );
        let answer = sending.as_mut().await;
        #[cfg(feature = "metrics")]
        self.meter.attempt(
            &request.method,
            &answer,
            runtime::now().saturating_duration_since(sent_at),
        );
        otel::record_attempt(sending.span(), &answer);
        Ok(answer)
    }
}

/// What one call holds while the engine interprets its plan: its ask of the limiters, the
/// permits of the attempt in flight, the last answer, and the exit's records and token.
struct CallState<'a, 'e> {
    request: &'a FixedRequest,
    policy: &'a Policy,
    /// What a server's words are cleaned of before they are logged, with the request's own:
    /// the client's secrets (read when a line is written, so a token issued mid-call counts).
    secrets: Option<&'a Secrets>,
    /// What the retry budget charges for the next attempt, and what the call may still send:
    /// the parts of its [`Ask`] the plan sets.
    admission: Admission,
    attempts_left: u32,
    paced_left: u32,
    /// The route's slots it queued for (rare, so boxed), which its first attempt goes with.
    queued: Option<Box<Queued>>,
    permits: Option<Permits>,
    answer: Option<Answer>,
    attempts: &'e mut Vec<Attempt>,
    token: &'e mut Option<CachedToken>,
}

impl CallState<'_, '_> {
    /// The wait chosen after the last attempt: recorded on it, and traced.
    fn waits(&mut self, wait: Duration, reason: WaitReason, cause: RetryCause, verdict: Verdict) {
        self.trace(verdict, Some((wait, reason, cause)));
        if let Some(last) = self.attempts.last_mut() {
            last.set_wait(wait, reason);
        }
    }

    /// The call stops with `error`, after its last attempt is traced; `alert`: a 401 again
    /// after a fresh token, an operator must know.
    fn stopped(&self, error: Error, alert: bool, verdict: Option<Verdict>) -> Error {
        if let Some(verdict) = verdict {
            self.trace(verdict, None);
        }
        if alert {
            tracing::error!(
                attempt = self.attempts.len(),
                status = 401,
                request_id = self.request_id().as_deref().unwrap_or("-"),
                "unauthorized again after a token re-exchange: stopping; alert an operator",
            );
        }
        error
    }

    /// The last answer's `x-request-id` as it may be logged: cleaned of every secret, escaped
    /// and bounded, as the attempt keeps it.
    fn request_id(&self) -> Option<String> {
        let id = self.answer.as_ref()?.request_id()?;
        Some(self.request.cleaner(self.secrets).text(id, MAX_REQUEST_ID))
    }

    /// One event for the last attempt: number, status or transport error, `x-request-id`,
    /// verdict, and the wait chosen after it. Never a token, a body or a route URL.
    fn trace(&self, verdict: Verdict, wait: Option<(Duration, WaitReason, RetryCause)>) {
        let Some(answer) = &self.answer else {
            return;
        };
        let traced = match wait {
            Some(_) => tracing::enabled!(tracing::Level::WARN),
            None => tracing::enabled!(tracing::Level::INFO),
        };
        if !traced {
            return;
        }
        let number = self.attempts.len();
        let result = match (answer.status(), answer.transport()) {
            (Some(status), _) => status.as_str().to_owned(),
            (None, Some(kind)) => kind.as_str().to_owned(),
            (None, None) => "-".to_owned(),
        };
        let request_id = self.request_id();
        let request_id = request_id.as_deref().unwrap_or("-");
        match wait {
            Some((wait, reason, cause)) => {
                let wait_ms = wait.as_millis() as u64;
                tracing::warn!(attempt = number, result = %result, request_id, verdict = ?verdict, wait_ms, reason = reason.as_str(), cause = cause.as_str(), "attempt will be retried");
            }
            None => {
                tracing::info!(attempt = number, result = %result, request_id, verdict = ?verdict, "attempt finished");
            }
        }
    }
}

/// The record of attempt `number`: an answer that the same key is still running (the
/// profile's `in_progress` status, unless its matrix row says otherwise, such as Hodoflow's 409
/// for a reused key) says the operation may be running.
fn record(
    number: u32,
    answer: &Answer,
    request_id: Option<&str>,
    profile: &SurfaceProfile,
) -> Attempt {
    match answer.status() {
        Some(status) => {
            let request_id = request_id.map(str::to_owned);
            let mut attempt = Attempt::answered(number, status, request_id);
            if profile.in_progress == Some(status.as_u16())
                && matches!(
                    classify::verdict(profile, answer),
                    Verdict::Stop(ErrorKind::InProgress) | Verdict::RetryAfterServerWait
                )
            {
                attempt.mark_running();
            }
            attempt
        }
        None => Attempt::unanswered(number, answer.transport().unwrap_or(TransportKind::Other)),
    }
}
