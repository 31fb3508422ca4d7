//! The plan of one call: what the engine does next, asked before and after each attempt.
//!
//! [`Plan::next`] takes what just happened ([`Event`]: the call began, the limiters admitted or
//! refused an attempt, a token came or failed, an answer came back, a wait ended) and returns
//! the one [`Step`] to take: ask the limiters, get a token, send with a timeout, sleep, exchange
//! the token again, or end the call. It reads no clock (the time is handed in), sends nothing,
//! sleeps nowhere and awaits nothing, so the order of every check is one function, tested
//! without tokio or a socket; after an answer it asks [`Course::decide`] (`decide.rs`), the
//! matrix's step.
//!
//! The budget is the whole call: the deadline starts when the plan does, at `send()`; every
//! attempt counts against `max_attempts`, or draws from its bounded allowance of paced
//! retries; no attempt starts with less than the budget's least
//! attempt time left; a wait that would leave less is refused at once (`budget.rs`).
//!
//! smithy-rs's orchestrator asks one `RetryStrategy` before the first attempt
//! (`should_attempt_initial_request`) and after each (`should_attempt_retry`) and only does what
//! it is told; this is that strategy, and `engine.rs` is the orchestrator.

use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::core::answer::Answer;
use crate::core::attempt::WaitReason;
use crate::core::auth::TokenWait;
use crate::core::budget::{Budget, Deadline};
use crate::core::decide::{Course, Decision, Step as After};
pub(crate) use crate::core::decide::{Heard, Now};
use crate::core::error::{Error, ErrorKind};
use crate::core::limit::Refusal;
use crate::core::limit::retry_budget::Admission;
use crate::core::matrix::Verdict;
use crate::core::profile::SurfaceProfile;
use crate::core::schedule::Waits;
use crate::core::stats::RetryCause;

/// What the engine does next.
#[derive(Debug)]
pub(crate) enum Step {
    /// Ask the limiters to admit the next attempt, as `admission`, with `attempts_left` to
    /// send (this one included) and `paced_left` paced retries beyond them; `retry` says why it
    /// is a retry.
    Admit {
        admission: Admission,
        attempts_left: u32,
        paced_left: u32,
        retry: Option<RetryCause>,
    },
    /// Get a token for the attempt, waiting within `wait`.
    Token(TokenWait),
    /// Send the attempt, within `timeout`.
    Send { timeout: Duration },
    /// Sleep `wait` before the next attempt.
    Sleep {
        wait: Duration,
        reason: WaitReason,
        cause: RetryCause,
        verdict: Verdict,
    },
    /// Exchange the token again after a 401, within `wait`, then send again.
    Reexchange {
        wait: TokenWait,
        cause: RetryCause,
        verdict: Verdict,
    },
    /// The last answer is the call's result; `refund` retry tokens go back to the budget.
    Done { refund: u32, verdict: Verdict },
    /// The call stops with `error`. `alert`: the credential itself was refused (a 401 again
    /// after a fresh token): an operator must know.
    Stop {
        error: Error,
        alert: bool,
        verdict: Option<Verdict>,
    },
}

/// What just happened.
#[derive(Debug)]
pub(crate) enum Event {
    /// The call began.
    Begin,
    /// The limiters admitted the attempt; `cost` retry tokens it took; `probe`: it goes as the
    /// retry budget's probe of a service it holds down.
    Admitted { cost: u32, probe: bool },
    /// A limiter refused it: nothing was sent for it.
    Refused(Refusal),
    /// The token for the attempt (or a re-exchanged one) is ready.
    Ready,
    /// Getting a token failed.
    Failed(Error),
    /// The attempt came back (or gave up), with this `Retry-After`; the answer is handed to
    /// [`Plan::next`] beside it.
    Answered { retry_after: Option<Duration> },
    /// A wait ended.
    Waited,
}

/// One call's plan: its deadline, its course, and what the next step waits for.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    deadline: Deadline,
    course: Course<'a>,
    /// Whether the client holds the token (and so gets it before each attempt).
    holds_token: bool,
    /// Retry tokens the call's attempts took, refunded if it succeeds.
    spent: u32,
}

impl<'a> Plan<'a> {
    /// The plan of a call to `profile` under `budget`, begun at `now`.
    pub(crate) fn new(
        profile: &'static SurfaceProfile,
        budget: Budget,
        waits: Waits<'a>,
        holds_token: bool,
        now: Instant,
    ) -> Self {
        Self {
            deadline: Deadline::start(budget, now),
            course: Course::new(profile, waits, holds_token, &budget),
            holds_token,
            spent: 0,
        }
    }

    /// The call's deadline, which every limiter's wait ends in time for.
    pub(crate) fn deadline(&self) -> &Deadline {
        &self.deadline
    }

    /// The step after `event`, at `now`, with the last attempt's `answer` (if one came);
    /// `rng` draws the jitter of a wait.
    pub(crate) fn next<R: Rng + ?Sized>(
        &mut self,
        event: Event,
        answer: Option<&Answer>,
        now: Now,
        rng: &mut R,
    ) -> Step {
        match event {
            Event::Begin | Event::Waited => self.before_attempt(now),
            Event::Admitted { cost, probe } => {
                self.spent += cost;
                self.course.admitted(probe);
                // Read after every wait: a token that expired while the call waited is
                // refreshed before it is sent, never sent stale.
                if self.holds_token {
                    match self.token_wait(now) {
                        Ok(wait) => Step::Token(wait),
                        Err(error) => stop(error, None),
                    }
                } else {
                    self.send(now)
                }
            }
            Event::Ready => self.send(now),
            Event::Refused(refusal) => stop(self.course.refused(refusal), None),
            Event::Failed(error) => stop(error, None),
            Event::Answered { retry_after } => match answer {
                Some(answer) => self.after_answer(
                    Heard {
                        answer,
                        retry_after,
                    },
                    now,
                    rng,
                ),
                None => stop(
                    Error::new(ErrorKind::Transport, "no answer from the server"),
                    None,
                ),
            },
        }
    }

    /// Before an attempt: stop when no attempt's least time is left, else ask the limiters.
    fn before_attempt(&self, now: Now) -> Step {
        if self.deadline.attempt_timeout(now.at).is_none() {
            return stop(self.no_time_left(now), None);
        }
        Step::Admit {
            admission: self.course.admission(),
            attempts_left: self.course.attempts_left(&self.deadline),
            paced_left: self.course.paced_left(),
            retry: self.course.cause(),
        }
    }

    /// Send, with the attempt timeout clamped to what is left; stop when too little is.
    fn send(&self, now: Now) -> Step {
        match self.deadline.attempt_timeout(now.at) {
            Some(timeout) => Step::Send { timeout },
            None => stop(self.no_time_left(now), None),
        }
    }

    fn after_answer<R: Rng + ?Sized>(&mut self, heard: Heard<'_>, now: Now, rng: &mut R) -> Step {
        let Decision { verdict, step } = self.course.decide(heard, &self.deadline, now, rng);
        match step {
            After::Done => Step::Done {
                refund: self.spent,
                verdict,
            },
            After::Stop(error) => stop(error, Some(verdict)),
            After::Refused(error) => Step::Stop {
                error,
                alert: true,
                verdict: Some(verdict),
            },
            After::Wait {
                wait,
                reason,
                cause,
            } => Step::Sleep {
                wait,
                reason,
                cause,
                verdict,
            },
            After::Reexchange { cause } => match self.token_wait(now) {
                Ok(wait) => Step::Reexchange {
                    wait,
                    cause,
                    verdict,
                },
                Err(error) => stop(error, Some(verdict)),
            },
        }
    }

    /// How long a call waits for a token: while time is left for the attempt after it. An
    /// exchange it starts is bounded by the attempt timeout, its connect and body read
    /// included, whatever the exchanger's own timeout; one that runs out is a retryable
    /// `token_exchange` failure.
    fn token_wait(&self, now: Now) -> Result<TokenWait, Error> {
        if self.deadline.attempt_timeout(now.at).is_none() {
            return Err(self.no_time_left(now));
        }
        let left = self.deadline.max_wait(now.at);
        Ok(TokenWait {
            until: now.at.checked_add(left).unwrap_or(now.at),
            exchange_timeout: self.deadline.attempt_limit(),
        })
    }

    /// `budget_exhausted`, nothing more sent: less than an attempt's least time is left.
    fn no_time_left(&self, now: Now) -> Error {
        let error = Error::new(
            ErrorKind::BudgetExhausted,
            format!(
                "call budget exhausted: {:.1}s of the {:.1}s budget is left, and an attempt needs at least {:.1}s; nothing more was sent",
                self.deadline.remaining(now.at).as_secs_f64(),
                self.deadline.max_elapsed().as_secs_f64(),
                self.deadline.least().as_secs_f64()
            ),
        );
        self.course.with_last_answer(error)
    }
}

fn stop(error: Error, verdict: Option<Verdict>) -> Step {
    Step::Stop {
        error,
        alert: false,
        verdict,
    }
}
