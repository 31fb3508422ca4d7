//! The one attempt loop every surface runs:
//! fixed request -> attempt -> classify -> wait -> next attempt -> outcome.

use std::time::SystemTime;

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
const MIN_ATTEMPT: std::time::Duration = std::time::Duration::from_millis(1);

/// What the engine needs of its client.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) http: reqwest::Client,
    pub(crate) tokens: TokenCache,
    pub(crate) backoff: Backoff,
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
    pub(crate) async fn run(&self, request: &FixedRequest, budget: Budget) -> Result<Answered> {
        budget.validate()?;
        let span = tracing::info_span!(
            "hodoflow_retry.request",
            surface = request.surface.as_str(),
            method = %request.method,
            route = %request.route,
            key = request.identity.as_deref().unwrap_or("-"),
        );
        self.attempts(request, budget).instrument(span).await
    }

    async fn attempts(&self, request: &FixedRequest, budget: Budget) -> Result<Answered> {
        let mut token = self.tokens.get().await?;
        let deadline = Deadline::start(budget, Instant::now());
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut reexchanged = false;
        let mut retries = 0;
        loop {
            let number = attempts.len() as u32 + 1;
            let Some(timeout) = deadline.attempt_timeout(Instant::now()) else {
                let error = Error::new(
                    ErrorKind::BudgetExhausted,
                    "retry budget exhausted: no time left for another attempt",
                );
                return Err(error.with_attempts(attempts));
            };
            let now = Instant::now();
            match self.gate.reserve(
                request.lane,
                now,
                deadline.remaining(now).saturating_sub(MIN_ATTEMPT),
            ) {
                Ok(wait) if wait.is_zero() => {}
                Ok(wait) => {
                    tracing::debug!(
                        wait_ms = wait.as_millis() as u64,
                        "waiting for the credential's rate budget"
                    );
                    tokio::time::sleep(wait).await;
                }
                Err(wait) => {
                    let message = format!(
                        "retry budget exhausted: the credential's rate budget has no slot for {wait:?}"
                    );
                    return Err(
                        Error::new(ErrorKind::BudgetExhausted, message).with_attempts(attempts)
                    );
                }
            }
            let authorization = match token.authorization() {
                Ok(value) => value,
                Err(error) => return Err(error.with_attempts(attempts)),
            };
            let answer = self.send(request, authorization, timeout).await;
            if answer.status() == Some(StatusCode::TOO_MANY_REQUESTS)
                && let Some(wait) = answer.retry_after(SystemTime::now())
            {
                self.gate.pause_until(request.lane, Instant::now() + wait);
            }
            let mut verdict = classify(request.surface, &answer);
            if budget.wait_for_in_progress {
                verdict = verdict.waiting_for_in_progress();
            }
            attempts.push(match answer.status() {
                Some(status) => {
                    Attempt::answered(number, status, answer.request_id().map(str::to_owned))
                }
                None => {
                    Attempt::unanswered(number, answer.transport().unwrap_or(TransportKind::Other))
                }
            });
            match verdict {
                Verdict::Success => {
                    trace_attempt(
                        &answer,
                        number,
                        verdict,
                        None,
                        deadline.elapsed(Instant::now()),
                    );
                    // A success always has an answer: only a status is classified as one.
                    if let Some((status, headers, body)) = answer.into_parts() {
                        return Ok(Answered {
                            status,
                            headers,
                            body,
                            attempts,
                        });
                    }
                    return Err(Error::new(
                        ErrorKind::Transport,
                        "no answer from the server",
                    ));
                }
                Verdict::ReexchangeOnce if reexchanged => {
                    tracing::error!(
                        attempt = number,
                        status = 401,
                        request_id = answer.request_id().unwrap_or("-"),
                        "unauthorized again after a token re-exchange: stopping; alert an operator",
                    );
                    return Err(stopped(request, &answer, attempts));
                }
                Verdict::Stop(_) => {
                    trace_attempt(
                        &answer,
                        number,
                        verdict,
                        None,
                        deadline.elapsed(Instant::now()),
                    );
                    return Err(stopped(request, &answer, attempts));
                }
                _ => {}
            }
            if deadline.attempts_left(number) == 0 {
                trace_attempt(
                    &answer,
                    number,
                    verdict,
                    None,
                    deadline.elapsed(Instant::now()),
                );
                return Err(stopped(request, &answer, attempts));
            }
            let retry_after = answer.retry_after(SystemTime::now());
            let Some((wait, reason)) =
                self.backoff
                    .wait(verdict, retries, retry_after, &mut rand::rng())
            else {
                return Err(stopped(request, &answer, attempts));
            };
            if let Err(exhausted) = deadline.check_wait(wait, Instant::now()) {
                trace_attempt(
                    &answer,
                    number,
                    verdict,
                    None,
                    deadline.elapsed(Instant::now()),
                );
                let message = format!(
                    "retry budget exhausted: the next wait of {:?} ends past the {:?} left",
                    exhausted.wait, exhausted.remaining
                );
                let mut error = Error::new(ErrorKind::BudgetExhausted, message)
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
                deadline.elapsed(Instant::now()),
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

    /// One attempt. Never fails: no answer is an answer too.
    async fn send(
        &self,
        request: &FixedRequest,
        authorization: http::HeaderValue,
        timeout: std::time::Duration,
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
    wait: Option<(std::time::Duration, &str)>,
    elapsed: std::time::Duration,
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
