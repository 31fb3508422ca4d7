//! Deciding, apart from acting: what the engine does after each answer, as a pure step.
//!
//! [`Course`] holds what one call has decided so far (its retries, the attempts that count
//! against `max_attempts` and those drawn from the allowance of paced retries, whether its
//! token was re-exchanged) and the schedule of its waits.
//! [`Course::decide`] takes the attempt's answer, its `Retry-After`, whether the retry budget
//! sent it as a probe, the deadline, `now` and an RNG, and returns one [`Step`]: done, wait and
//! send again, re-exchange the token and send again, or stop with an error. It reads no clock,
//! sends nothing, sleeps nowhere and awaits nothing, so every row of every vendor's table is
//! tested without tokio or a socket (`src/vendors/decided.rs`, beside the tables, since this
//! folder knows none); the engine (`engine.rs`) only acts on the step.
//!
//! The order of the checks is the document's: a success ends the call; a 401 without a token
//! source, or after a re-exchange, stops; the retry matrix's wait, then the attempts budget
//! (every attempt counts, but a retry the server paced with `Retry-After` or the retry budget
//! sent as its probe draws first from the allowance of paced retries), then the elapsed-time
//! budget (the wait must leave an attempt's least time) may stop the rest. What the retry budget (`limit/retry_budget/`) is asked for the next
//! attempt is decided here too, and so is the error of a limiter's refusal.
//!
//! smithy-rs's orchestrator and tower's `retry::Policy` cut the same way: a strategy that only
//! decides, and a loop that only acts.

use std::time::{Duration, SystemTime};

use http::StatusCode;
use rand::Rng;
use tokio::time::Instant;

use crate::core::answer::Answer;
use crate::core::attempt::{TransportKind, WaitReason};
use crate::core::budget::{Budget, Deadline};
use crate::core::classify::{final_error, verdict};
use crate::core::error::{Error, ErrorKind};
use crate::core::limit::Refusal;
use crate::core::limit::retry_budget::{Admission, RetryBudget};
use crate::core::matrix::Verdict;
use crate::core::profile::SurfaceProfile;
use crate::core::runtime::WallAnchor;
use crate::core::schedule::Waits;
use crate::core::stats::RetryCause;

/// What to do after an answer.
#[derive(Debug)]
pub(crate) enum Step {
    /// Hand the answer to the caller.
    Done,
    /// Sleep `wait`, then send again.
    Wait {
        wait: Duration,
        reason: WaitReason,
        cause: RetryCause,
    },
    /// Exchange a fresh token, then send again at once.
    Reexchange { cause: RetryCause },
    /// Stop with this error.
    Stop(Error),
    /// Stop with this error, and alert an operator: the credential itself was refused, a 401
    /// again after a fresh token.
    Refused(Error),
}

/// A step and the verdict it was decided on, for the attempt's log line.
#[derive(Debug)]
pub(crate) struct Decision {
    pub(crate) verdict: Verdict,
    pub(crate) step: Step,
}

/// What the engine heard of one attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Heard<'a> {
    pub(crate) answer: &'a Answer,
    /// The server's `Retry-After`, read from the answer against the wall clock.
    pub(crate) retry_after: Option<Duration>,
}

/// The time of a decision: the engine's instant (for the deadline), and the wall clock's (for
/// the dates an error quotes) counted from an anchor only when a date is quoted; both from the
/// one runtime (`runtime.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    pub(crate) at: Instant,
    pub(crate) anchor: WallAnchor,
}

impl Now {
    /// The wall-clock time of the decision.
    pub(crate) fn wall(&self) -> SystemTime {
        self.anchor.wall_at(self.at)
    }
}

/// One call's course: what it has decided so far, and what it asks of the retry budget next.
#[derive(Debug)]
pub(crate) struct Course<'a> {
    profile: &'static SurfaceProfile,
    waits: Waits<'a>,
    /// Whether the client exchanges its tokens (a 401 may then be re-exchanged once).
    renews_tokens: bool,
    /// The caller waits out `idempotency_key_in_progress` instead of stopping on it.
    wait_for_in_progress: bool,
    /// Set once a 401 was answered with a fresh exchange: another 401 then means the
    /// credential itself is refused.
    reexchanged: bool,
    /// Retries after a wait (a re-exchange is not one): the schedule's step.
    retries: u32,
    /// Attempts sent that count against `max_attempts`.
    counted: u32,
    max_attempts: u32,
    /// Paced retries the call may still send beyond `max_attempts`.
    paced_left: u32,
    /// The attempt in flight drew from the paced allowance.
    drew_paced: bool,
    /// It did so as the retry budget's probe.
    probed: bool,
    next: Next,
}

/// What the next attempt asks of the retry budget, and the answer before it.
#[derive(Debug, Clone, Copy)]
struct Next {
    admission: Admission,
    /// The server paced the next attempt with its `Retry-After`.
    paced: bool,
    cause: Option<RetryCause>,
    status: Option<StatusCode>,
    retry_after: Option<Duration>,
}

impl<'a> Course<'a> {
    /// The course of a call to a surface of `profile` under `budget` that has sent nothing yet.
    pub(crate) fn new(
        profile: &'static SurfaceProfile,
        waits: Waits<'a>,
        renews_tokens: bool,
        budget: &Budget,
    ) -> Self {
        Self {
            profile,
            waits,
            renews_tokens,
            wait_for_in_progress: budget.wait_for_in_progress,
            reexchanged: false,
            retries: 0,
            counted: 0,
            max_attempts: budget.max_attempts,
            paced_left: budget.paced_allowance(),
            drew_paced: false,
            probed: false,
            next: Next {
                admission: Admission::First,
                paced: false,
                cause: None,
                status: None,
                retry_after: None,
            },
        }
    }

    /// What the next attempt asks of the retry budget.
    pub(crate) fn admission(&self) -> Admission {
        self.next.admission
    }

    /// Why the next attempt is a retry; `None` for the first.
    pub(crate) fn cause(&self) -> Option<RetryCause> {
        self.next.cause
    }

    /// Attempts the call may still send that count against `max_attempts`, the next one
    /// included.
    pub(crate) fn attempts_left(&self, deadline: &Deadline) -> u32 {
        deadline.attempts_left(self.counted)
    }

    /// Paced retries the call may still send beyond `max_attempts`.
    pub(crate) fn paced_left(&self) -> u32 {
        self.paced_left
    }

    /// The limiters admitted the next attempt; `probe`: the retry budget sends it as its probe
    /// of a service it holds down. A retry the server paced draws from the allowance while some
    /// is left, and so does a probe sent by the call's final attempt (which would otherwise
    /// keep it for its hold's end); any other attempt counts against `max_attempts`.
    pub(crate) fn admitted(&mut self, probe: bool) {
        let retry = self.next.admission != Admission::First;
        let last = self.counted + 1 >= self.max_attempts;
        self.drew_paced = retry && (self.next.paced || (probe && last)) && self.paced_left > 0;
        self.probed = self.drew_paced && !self.next.paced;
        if self.drew_paced {
            self.paced_left -= 1;
        }
    }

    /// The error when a limiter refuses the next attempt: with the last answer's status and
    /// `Retry-After`, so the caller can schedule the same request later.
    pub(crate) fn refused(&self, refusal: Refusal) -> Error {
        let error = self.with_last_answer(Error::new(refusal.kind, refusal.message));
        match refusal.retry_after {
            Some(wait) if error.retry_after().is_none_or(|server| server < wait) => {
                error.with_retry_after(Some(wait))
            }
            _ => error,
        }
    }

    /// `error` with the last answer's status and `Retry-After`, if an answer came.
    pub(crate) fn with_last_answer(&self, error: Error) -> Error {
        let error = error.with_retry_after(self.next.retry_after);
        match self.next.status {
            Some(status) => error.with_status(status),
            None => error,
        }
    }

    /// The step after `heard`, with `deadline` and `now`; `rng` draws the jitter of a wait.
    pub(crate) fn decide<R: Rng + ?Sized>(
        &mut self,
        heard: Heard<'_>,
        deadline: &Deadline,
        now: Now,
        rng: &mut R,
    ) -> Decision {
        let Heard {
            answer,
            retry_after,
        } = heard;
        if !std::mem::take(&mut self.drew_paced) {
            self.counted += 1;
        }
        let probed = std::mem::take(&mut self.probed);
        let mut verdict = verdict(self.profile, answer);
        if self.wait_for_in_progress {
            verdict = verdict.waiting_for_in_progress();
        }
        let decision = |step| Decision { verdict, step };
        if verdict == Verdict::Success {
            return decision(Step::Done);
        }
        let stopped = || final_error(self.profile, answer, now.wall());
        let reexchange = verdict == Verdict::ReexchangeOnce;
        // Without a token source the caller's own credential was refused: nothing to
        // re-exchange, so the 401 stops at once.
        if reexchange && !self.renews_tokens {
            return decision(Step::Stop(stopped()));
        }
        if reexchange && self.reexchanged {
            return decision(Step::Refused(stopped()));
        }
        let Some((mut wait, mut reason)) = self.waits.plan(verdict, self.retries, retry_after, rng)
        else {
            return decision(Step::Stop(stopped()));
        };
        // A refused probe on the allowance takes no step of the call's own schedule: the retry
        // budget holds the next attempt until its turn to probe, or until the service is back.
        if probed && reason == WaitReason::Backoff {
            (wait, reason) = (Duration::ZERO, WaitReason::Probe);
        }
        // The server paced the next attempt: it asked for it after a second or more, and the
        // wait honours that.
        let paced = !reexchange
            && retry_after.is_some_and(|server| {
                server >= RetryBudget::FREE_AFTER_RETRY_AFTER && wait >= server
            });
        if deadline.attempts_left(self.counted) == 0 && !(paced && self.paced_left > 0) {
            return decision(Step::Stop(stopped()));
        }
        if let Err(refused) = deadline.check_wait(wait, now.at) {
            let error = Error::new(
                ErrorKind::BudgetExhausted,
                format!(
                    "call budget exhausted: the next wait of {:.1}s would leave {:.1}s of the {:.1}s left, and an attempt needs at least {:.1}s",
                    refused.wait.as_secs_f64(),
                    refused.remaining.saturating_sub(refused.wait).as_secs_f64(),
                    refused.remaining.as_secs_f64(),
                    refused.least.as_secs_f64()
                ),
            )
            .with_retry_after(retry_after);
            let error = match answer.status() {
                Some(status) => error.with_status(status),
                None => error,
            };
            return decision(Step::Stop(error));
        }
        let cause = RetryCause::of(
            answer.status(),
            answer.transport(),
            self.profile.in_progress,
        );
        let admission = if reexchange {
            Admission::Reexchange
        } else {
            Admission::Retry {
                after_timeout: answer.transport() == Some(TransportKind::Timeout),
                paced: reason == WaitReason::RetryAfter
                    && retry_after
                        .is_some_and(|server| server >= RetryBudget::FREE_AFTER_RETRY_AFTER),
            }
        };
        self.next = Next {
            admission,
            paced,
            cause: Some(cause),
            status: answer.status(),
            retry_after,
        };
        if reexchange {
            self.reexchanged = true;
            decision(Step::Reexchange { cause })
        } else {
            if reason != WaitReason::Probe {
                self.retries += 1;
            }
            decision(Step::Wait {
                wait,
                reason,
                cause,
            })
        }
    }
}
