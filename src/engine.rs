//! The one attempt loop every surface runs:
//! fixed request -> attempt -> classify -> wait -> next attempt -> outcome.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use tokio::time::Instant;
use tracing::Instrument;

use crate::attempt::{Attempt, TransportKind};
use crate::auth::TokenCache;
use crate::backoff::Backoff;
use crate::budget::{Budget, Deadline};
use crate::classify::{Answer, Surface, Verdict, classify, final_error};
use crate::error::{Error, ErrorKind, Result};
use crate::rate::RateGate;
use crate::request::FixedRequest;

/// The least time an attempt needs: a rate-budget wait must leave this much of the budget.
const MIN_ATTEMPT: Duration = Duration::from_millis(1);

/// How one operation retries: its budget and its backoff, set per client and per call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    pub(crate) budget: Budget,
    pub(crate) backoff: Backoff,
}

/// What the engine needs of its client.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) http: reqwest::Client,
    pub(crate) tokens: TokenCache,
    pub(crate) gate: RateGate,
}

/// The final, successful answer and every attempt that led to it.
#[derive(Debug)]
pub(crate) struct Answered {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) attempts: Vec<Attempt>,
}

impl Engine {
    /// Runs `request` until the matrix says stop or the budget ends.
    pub(crate) async fn run(&self, request: &FixedRequest, policy: Policy) -> Result<Answered> {
        policy.budget.validate()?;
        let span = tracing::info_span!(
            "hodoflow_retry.request",
            surface = request.surface.as_str(),
            method = %request.method,
            route = %request.route,
            key = request.identity.as_deref().unwrap_or("-"),
        );
        self.attempts(request, policy).instrument(span).await
    }

    async fn attempts(
        &self,
        request: &FixedRequest,
        Policy { budget, backoff }: Policy,
    ) -> Result<Answered> {
        let mut token = self.tokens.get().await?;
        let deadline = Deadline::start(budget, Instant::now());
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut reexchanged = false;
        let mut retries = 0;
        loop {
            let number = attempts.len() as u32 + 1;
            if let Err(error) = self.take_rate_slot(request, &deadline).await {
                return Err(error.with_attempts(attempts));
            }
            let Some(timeout) = deadline.attempt_timeout(Instant::now()) else {
                let error = exhausted("no time left for another attempt".to_owned());
                return Err(error.with_attempts(attempts));
            };
            let authorization = match token.authorization() {
                Ok(value) => value,
                Err(error) => return Err(error.with_attempts(attempts)),
            };
            let answer = self.send(request, authorization, timeout).await;
            let retry_after = answer.retry_after(SystemTime::now());
            self.note_rate_limit(request, &answer, retry_after);
            let mut verdict = classify(request.surface, &answer);
            if budget.wait_for_in_progress {
                verdict = verdict.waiting_for_in_progress();
            }
            attempts.push(record(number, &answer));
            let elapsed = deadline.elapsed(Instant::now());
            if verdict == Verdict::ReexchangeOnce && reexchanged {
                tracing::error!(
                    attempt = number,
                    status = 401,
                    request_id = answer.request_id().unwrap_or("-"),
                    "unauthorized again after a token re-exchange: stopping; alert an operator",
                );
                return Err(stopped(request, &answer, attempts));
            }
            let next = match verdict {
                Verdict::Success => {
                    trace_attempt(&answer, number, verdict, None, elapsed);
                    // Only an answer with a status is classified a success.
                    let Some((status, headers, body)) = answer.into_parts() else {
                        return Err(Error::new(
                            ErrorKind::Transport,
                            "no answer from the server",
                        ));
                    };
                    return Ok(Answered {
                        status,
                        headers,
                        body,
                        attempts,
                    });
                }
                _ if deadline.attempts_left(number) == 0 => None,
                _ => backoff.wait(verdict, retries, retry_after, &mut rand::rng()),
            };
            let Some((wait, reason)) = next else {
                trace_attempt(&answer, number, verdict, None, elapsed);
                return Err(stopped(request, &answer, attempts));
            };
            if let Err(refused) = deadline.check_wait(wait, Instant::now()) {
                trace_attempt(&answer, number, verdict, None, elapsed);
                let message = format!(
                    "the next wait of {:?} ends past the {:?} left",
                    refused.wait, refused.remaining
                );
                let mut error = exhausted(message)
                    .with_retry_after(retry_after)
                    .with_attempts(attempts);
                if let Some(status) = answer.status() {
                    error = error.with_status(status);
                }
                return Err(error);
            }
            if let Some(last) = attempts.last_mut() {
                last.set_wait(wait, reason);
            }
            trace_attempt(
                &answer,
                number,
                verdict,
                Some((wait, reason.as_str())),
                elapsed,
            );
            if verdict == Verdict::ReexchangeOnce {
                reexchanged = true;
                token = match self.tokens.refresh_after_unauthorized(&token).await {
                    Ok(fresh) => fresh,
                    Err(error) => return Err(error.with_attempts(attempts)),
                };
            } else {
                retries += 1;
                tokio::time::sleep(wait).await;
            }
        }
    }

    /// Waits for a slot of the credential's rate budget, or refuses when the wait would
    /// leave no time for the attempt.
    async fn take_rate_slot(&self, request: &FixedRequest, deadline: &Deadline) -> Result<()> {
        let now = Instant::now();
        let max_wait = deadline.remaining(now).saturating_sub(MIN_ATTEMPT);
        match self.gate.reserve(request.lane, now, max_wait) {
            Ok(wait) if wait.is_zero() => Ok(()),
            Ok(wait) => {
                tracing::debug!(
                    wait_ms = wait.as_millis() as u64,
                    "waiting for the rate budget"
                );
                tokio::time::sleep(wait).await;
                Ok(())
            }
            Err(wait) => Err(exhausted(format!(
                "the rate budget has no slot for {wait:?}"
            ))),
        }
    }

    /// A 429 with `Retry-After` pauses every operation of its lane.
    fn note_rate_limit(
        &self,
        request: &FixedRequest,
        answer: &Answer,
        retry_after: Option<Duration>,
    ) {
        if answer.status() == Some(StatusCode::TOO_MANY_REQUESTS)
            && let Some(wait) = retry_after
        {
            self.gate.pause_until(request.lane, Instant::now() + wait);
        }
    }

    /// One attempt. Never fails: no answer is an answer too.
    async fn send(
        &self,
        request: &FixedRequest,
        authorization: http::HeaderValue,
        timeout: Duration,
    ) -> Answer {
        let sent = self
            .http
            .request(request.method.clone(), request.url.clone())
            .headers(request.headers.clone())
            .header(http::header::AUTHORIZATION, authorization)
            .body(request.body.clone())
            .timeout(timeout)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) => return Answer::no_response(TransportKind::of(&error)),
        };
        let status = response.status();
        let headers = response.headers().clone();
        match response.bytes().await {
            Ok(body) => Answer::response(status, headers, body),
            // The server answered a delivery: it committed, whatever the body said.
            Err(_) if request.surface == Surface::Webhook => {
                Answer::response(status, headers, Bytes::new())
            }
            // A write or read is retried with the same key: a replay brings the body back.
            Err(error) => Answer::no_response(TransportKind::of(&error)),
        }
    }
}

/// The record of attempt `number`.
fn record(number: u32, answer: &Answer) -> Attempt {
    match answer.status() {
        Some(status) => Attempt::answered(number, status, answer.request_id().map(str::to_owned)),
        None => Attempt::unanswered(number, answer.transport().unwrap_or(TransportKind::Other)),
    }
}

/// A `budget_exhausted` error: `retry budget exhausted: {why}`.
fn exhausted(why: String) -> Error {
    Error::new(
        ErrorKind::BudgetExhausted,
        format!("retry budget exhausted: {why}"),
    )
}

/// The error of the answer the engine stopped on, with every attempt.
fn stopped(request: &FixedRequest, answer: &Answer, attempts: Vec<Attempt>) -> Error {
    final_error(request.surface, answer, SystemTime::now()).with_attempts(attempts)
}

/// One event per attempt: number, status or transport error, `x-request-id`,
/// verdict, and the wait chosen. Never a token, a body or a trigger URL.
fn trace_attempt(
    answer: &Answer,
    number: u32,
    verdict: Verdict,
    wait: Option<(Duration, &str)>,
    elapsed: Duration,
) {
    let elapsed_ms = elapsed.as_millis() as u64;
    let result = match (answer.status(), answer.transport()) {
        (Some(status), _) => status.as_str().to_owned(),
        (None, Some(kind)) => kind.as_str().to_owned(),
        (None, None) => "-".to_owned(),
    };
    let (wait_ms, reason) = wait.map_or((0, "none"), |(d, r)| (d.as_millis() as u64, r));
    let request_id = answer.request_id().unwrap_or("-");
    if wait.is_some() {
        tracing::warn!(attempt = number, result = %result, request_id, verdict = ?verdict, wait_ms, reason, elapsed_ms, "attempt will be retried");
    } else {
        tracing::info!(attempt = number, result = %result, request_id, verdict = ?verdict, elapsed_ms, "attempt finished");
    }
}
