//! Deciding, apart from acting: what the engine does after each answer, as a pure step.
//!
//! [`Course`] holds what one call has decided so far (its retries, the attempts that count
//! against `max_attempts`, whether its token was re-exchanged) and the schedule of its waits.
//! [`Course::decide`] takes the attempt's answer, its `Retry-After`, whether the retry budget
//! sent it as a probe, the deadline, `now` and an RNG, and returns one [`Step`]: done, wait and
//! send again, re-exchange the token and send again, or stop with an error. It reads no clock,
//! sends nothing, sleeps nowhere and awaits nothing, so every row of every profile's table is
//! tested here without tokio or a socket; the engine (`engine.rs`) only acts on the step.
//!
//! The order of the checks is the document's: a success ends the call; a 401 without a token
//! source, or after a re-exchange, stops; the attempts budget, then the retry matrix's wait, then
//! the elapsed-time budget may stop the rest. What the retry budget (`retry_budget.rs`) is asked
//! for the next attempt is decided here too, and so is the error of its refusal.
//!
//! smithy-rs's orchestrator and tower's `retry::Policy` cut the same way: a strategy that only
//! decides, and a loop that only acts.

use std::time::{Duration, SystemTime};

use http::StatusCode;
use rand::Rng;
use tokio::time::Instant;

use crate::answer::Answer;
use crate::attempt::{TransportKind, WaitReason};
use crate::budget::Deadline;
use crate::classify::{classify, final_error};
use crate::error::{Error, ErrorKind};
use crate::matrix::Verdict;
use crate::profile::Surface;
use crate::retry_budget::{Admission, Refusal, RetryBudget};
use crate::schedule::Waits;
use crate::stats::RetryCause;

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
    /// Whether the retry budget sent this attempt as a probe of a service it believes down.
    pub(crate) probe: bool,
}

/// The time of a decision: the engine's instant (for the deadline) and the wall clock's (for
/// the dates an error quotes), both read from the one clock (`clock.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    pub(crate) at: Instant,
    pub(crate) wall: SystemTime,
}

/// One call's course: what it has decided so far, and what it asks of the retry budget next.
#[derive(Debug)]
pub(crate) struct Course<'a> {
    surface: Surface,
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
    /// Attempts that count against `max_attempts`: those the server paced, and refused
    /// probes, count by time.
    counted: u32,
    next: Next,
}

/// What the next attempt asks of the retry budget, and the answer before it.
#[derive(Debug, Clone, Copy)]
struct Next {
    admission: Admission,
    cause: Option<RetryCause>,
    status: Option<StatusCode>,
    retry_after: Option<Duration>,
}

impl<'a> Course<'a> {
    /// The course of a call to `surface` that has sent nothing yet.
    pub(crate) fn new(
        surface: Surface,
        waits: Waits<'a>,
        renews_tokens: bool,
        wait_for_in_progress: bool,
    ) -> Self {
        Self {
            surface,
            waits,
            renews_tokens,
            wait_for_in_progress,
            reexchanged: false,
            retries: 0,
            counted: 0,
            next: Next {
                admission: Admission::First,
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

    /// The error when the retry budget refuses the next attempt: with the last answer's status
    /// and `Retry-After`, so the caller can schedule the same request later.
    pub(crate) fn refused(&self, refusal: &Refusal) -> Error {
        let error = Error::new(
            ErrorKind::RetryBudgetExhausted,
            format!("client retry budget exhausted: {}", refusal.message()),
        )
        .with_retry_after(self.next.retry_after);
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
            probe,
        } = heard;
        let mut verdict = classify(self.surface, answer);
        if self.wait_for_in_progress {
            verdict = verdict.waiting_for_in_progress();
        }
        let decision = |step| Decision { verdict, step };
        if verdict == Verdict::Success {
            return decision(Step::Done);
        }
        let stopped = || final_error(self.surface, answer, now.wall);
        let reexchange = verdict == Verdict::ReexchangeOnce;
        // Without a token source the caller's own credential was refused: nothing to
        // re-exchange, so the 401 stops at once.
        if reexchange && !self.renews_tokens {
            return decision(Step::Stop(stopped()));
        }
        if reexchange && self.reexchanged {
            return decision(Step::Refused(stopped()));
        }
        // A probe the service refused only told the client it is still down: the call keeps
        // its attempt, and the probe pace bounds its load (`retry_budget.rs`).
        let free =
            probe || retry_after.is_some_and(|wait| wait >= RetryBudget::FREE_AFTER_RETRY_AFTER);
        if reexchange || deadline.counts(free) {
            self.counted += 1;
        }
        if deadline.attempts_left(self.counted) == 0 {
            return decision(Step::Stop(stopped()));
        }
        let Some((wait, reason)) = self.waits.plan(verdict, self.retries, retry_after, rng) else {
            return decision(Step::Stop(stopped()));
        };
        if let Err(refused) = deadline.check_wait(wait, now.at) {
            let error = Error::new(
                ErrorKind::BudgetExhausted,
                format!(
                    "call budget exhausted: the next wait of {:?} ends past the {:?} left",
                    refused.wait, refused.remaining
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
            self.surface.profile().in_progress,
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
            cause: Some(cause),
            status: answer.status(),
            retry_after,
        };
        if reexchange {
            self.reexchanged = true;
            decision(Step::Reexchange { cause })
        } else {
            self.retries += 1;
            decision(Step::Wait {
                wait,
                reason,
                cause,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http::{HeaderMap, HeaderValue, header};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;
    use crate::backoff::Backoff;
    use crate::budget::Budget;
    use crate::classify::rule_for;
    use crate::matrix::{Rule, When};

    const SECOND: Duration = Duration::from_secs(1);

    fn rng() -> StdRng {
        StdRng::seed_from_u64(0xdec1de)
    }

    fn start() -> Now {
        Now {
            at: Instant::now(),
            wall: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        }
    }

    fn course(surface: Surface) -> Course<'static> {
        Course::new(surface, Waits::new(Backoff::new(), None), true, false)
    }

    fn answer(status: u16, body: String, retry_after: Option<&'static str>) -> Answer {
        let mut headers = HeaderMap::new();
        if let Some(wait) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static(wait));
        }
        Answer::response(
            StatusCode::from_u16(status).expect("a status"),
            headers,
            Bytes::from(body),
        )
    }

    /// Error bodies carrying `code`, in each of the shapes the profiles read.
    fn bodies(code: &str) -> [String; 4] {
        [
            format!(r#"{{"errors":[{{"code":"{code}"}}]}}"#),
            format!(r#"{{"errors":[{{"extensions":{{"code":"{code}"}}}}]}}"#),
            format!(r#"{{"error":"{code}"}}"#),
            format!(r#"{{"error":{{"code":"{code}"}}}}"#),
        ]
    }

    /// Answers that `surface`'s matrix covers with `rule`, and no other row: each status of a
    /// list, each body shape for a code, the ends and middle of a range, any status for `Other`.
    fn answers_of(surface: Surface, rule: &'static Rule) -> Vec<Answer> {
        let candidates: Vec<Answer> = match rule.when {
            When::NoResponse => [
                TransportKind::Connect,
                TransportKind::Timeout,
                TransportKind::Closed,
            ]
            .into_iter()
            .map(Answer::no_response)
            .collect(),
            When::Status(statuses) => statuses
                .iter()
                .map(|&status| answer(status, String::new(), None))
                .collect(),
            When::Code(statuses, code) => statuses
                .iter()
                .flat_map(|&status| bodies(code).map(|body| answer(status, body, None)))
                .collect(),
            When::Range(low, high) => [low, low + (high - low) / 2, high]
                .into_iter()
                .chain(low..=high)
                .map(|status| answer(status, String::new(), None))
                .collect(),
            When::Other => (100..600)
                .map(|status| answer(status, String::new(), None))
                .collect(),
        };
        candidates
            .into_iter()
            .filter(|answer| std::ptr::eq(rule_for(surface, answer), rule))
            .take(8)
            .collect()
    }

    fn decide_first(surface: Surface, answer: &Answer, renews_tokens: bool) -> Decision {
        let now = start();
        let deadline = Deadline::start(Budget::new(), now.at);
        let mut course = Course::new(
            surface,
            Waits::new(Backoff::new(), None),
            renews_tokens,
            false,
        );
        let heard = Heard {
            answer,
            retry_after: answer.retry_after(now.wall),
            probe: false,
        };
        course.decide(heard, &deadline, now, &mut rng())
    }

    #[test]
    fn every_row_of_every_table_decides_its_documented_step() {
        let mut rows = 0;
        for &surface in Surface::all() {
            for rule in surface.profile().rules {
                let answers = answers_of(surface, rule);
                assert!(!answers.is_empty(), "{surface}: no answer reaches {rule:?}");
                rows += 1;
                for answer in &answers {
                    let seen = format!("{surface} {:?} {:?}", answer.status(), rule.action);
                    let Decision { verdict, step } = decide_first(surface, answer, true);
                    assert_eq!(verdict, rule.verdict, "{seen}");
                    match (rule.verdict, step) {
                        (Verdict::Success, Step::Done) => {}
                        (Verdict::Stop(kind), Step::Stop(error)) => {
                            assert_eq!(error.kind(), kind, "{seen}");
                            assert_eq!(error.status(), answer.status(), "{seen}");
                        }
                        (Verdict::RetryAfterBackoff, Step::Wait { wait, reason, .. }) => {
                            assert_eq!(reason, WaitReason::Backoff, "{seen}");
                            assert!(wait <= Backoff::new().ceiling(0), "{seen}: {wait:?}");
                        }
                        (Verdict::RetryAfterServerWait, Step::Wait { wait, reason, .. }) => {
                            // No Retry-After on the answer: the fallback, or a longer backoff.
                            assert!(
                                matches!(
                                    reason,
                                    WaitReason::RetryAfterFallback | WaitReason::Backoff
                                ),
                                "{seen}: {reason:?}"
                            );
                            assert!(wait > Duration::ZERO, "{seen}");
                        }
                        (Verdict::ReexchangeOnce, Step::Reexchange { cause }) => {
                            assert_eq!(cause, RetryCause::Unauthorized, "{seen}");
                            // The caller's own credential: nothing to re-exchange.
                            let own = decide_first(surface, answer, false);
                            assert!(matches!(own.step, Step::Stop(_)), "{seen}: {own:?}");
                        }
                        (verdict, step) => panic!("{seen}: {verdict:?} decided {step:?}"),
                    }
                }
            }
        }
        let total: usize = Surface::all()
            .iter()
            .map(|surface| surface.profile().rules.len())
            .sum();
        assert_eq!(rows, total);
    }

    #[test]
    fn a_retry_after_on_a_retried_row_is_waited_with_a_small_jitter() {
        for &surface in Surface::all() {
            for rule in surface.profile().rules {
                if !matches!(
                    rule.verdict,
                    Verdict::RetryAfterBackoff | Verdict::RetryAfterServerWait
                ) || rule.when == When::NoResponse
                {
                    continue;
                }
                for plain in answers_of(surface, rule) {
                    let status = plain.status().expect("answered").as_u16();
                    let body = String::from_utf8(plain.body().to_vec()).expect("utf-8");
                    let paced = answer(status, body, Some("3"));
                    let decision = decide_first(surface, &paced, true);
                    let Step::Wait { wait, reason, .. } = decision.step else {
                        panic!("{surface} {status}: {decision:?}");
                    };
                    assert_eq!(reason, WaitReason::RetryAfter, "{surface} {status}");
                    assert!(
                        (3 * SECOND..=3 * SECOND + SECOND * 3 / 10).contains(&wait),
                        "{surface} {status}: {wait:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_second_401_after_a_fresh_token_is_refused_and_alerts() {
        let now = start();
        let deadline = Deadline::start(Budget::new(), now.at);
        let mut course = course(Surface::JsonApiWrite);
        let unauthorized = answer(401, String::new(), None);
        let heard = Heard {
            answer: &unauthorized,
            retry_after: None,
            probe: false,
        };
        let first = course.decide(heard, &deadline, now, &mut rng());
        assert!(matches!(first.step, Step::Reexchange { .. }), "{first:?}");
        assert_eq!(course.admission(), Admission::Reexchange);
        let second = course.decide(heard, &deadline, now, &mut rng());
        let Step::Refused(error) = second.step else {
            panic!("{second:?}");
        };
        assert_eq!(error.kind(), ErrorKind::Unauthorized);
    }

    #[test]
    fn the_last_counted_attempt_stops_with_the_answer_left_over() {
        let now = start();
        let deadline = Deadline::start(Budget::new().max_attempts(2), now.at);
        let mut course = course(Surface::JsonApiWrite);
        let down = answer(503, String::new(), None);
        let heard = Heard {
            answer: &down,
            retry_after: None,
            probe: false,
        };
        let first = course.decide(heard, &deadline, now, &mut rng());
        assert!(matches!(first.step, Step::Wait { .. }), "{first:?}");
        assert_eq!(course.cause(), Some(RetryCause::ServerError));
        let second = course.decide(heard, &deadline, now, &mut rng());
        let Step::Stop(error) = second.step else {
            panic!("{second:?}");
        };
        assert_eq!(error.kind(), ErrorKind::Server);
        assert_eq!(error.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
    }

    #[test]
    fn a_paced_answer_or_a_refused_probe_keeps_the_attempt() {
        let now = start();
        let deadline = Deadline::start(Budget::new().max_attempts(2), now.at);
        let mut course = course(Surface::Webhook);
        let paced = answer(429, String::new(), Some("2"));
        let down = answer(503, String::new(), None);
        let heard = |answer, retry_after, probe| Heard {
            answer,
            retry_after,
            probe,
        };
        for _ in 0..5 {
            let step = course
                .decide(
                    heard(&paced, Some(2 * SECOND), false),
                    &deadline,
                    now,
                    &mut rng(),
                )
                .step;
            assert!(matches!(step, Step::Wait { .. }), "{step:?}");
            assert_eq!(
                course.admission(),
                Admission::Retry {
                    after_timeout: false,
                    paced: true
                }
            );
            let step = course
                .decide(heard(&down, None, true), &deadline, now, &mut rng())
                .step;
            assert!(matches!(step, Step::Wait { .. }), "{step:?}");
        }
        let first = course.decide(heard(&down, None, false), &deadline, now, &mut rng());
        assert!(matches!(first.step, Step::Wait { .. }), "{first:?}");
        let last = course.decide(heard(&down, None, false), &deadline, now, &mut rng());
        assert!(matches!(last.step, Step::Stop(_)), "{last:?}");
    }

    #[test]
    fn a_wait_past_the_deadline_stops_with_the_status_and_retry_after() {
        let now = start();
        let deadline = Deadline::start(Budget::new().max_elapsed(10 * SECOND), now.at);
        let mut course = course(Surface::Webhook);
        let slow = answer(429, String::new(), Some("30"));
        let heard = Heard {
            answer: &slow,
            retry_after: Some(30 * SECOND),
            probe: false,
        };
        let decision = course.decide(heard, &deadline, now, &mut rng());
        let Step::Stop(error) = decision.step else {
            panic!("{decision:?}");
        };
        assert_eq!(error.kind(), ErrorKind::BudgetExhausted);
        assert_eq!(error.status(), Some(StatusCode::TOO_MANY_REQUESTS));
        assert_eq!(error.retry_after(), Some(30 * SECOND));
    }

    #[test]
    fn a_timeout_asks_the_retry_budget_for_a_retry_after_a_timeout() {
        let now = start();
        let deadline = Deadline::start(Budget::new(), now.at);
        let mut course = course(Surface::JsonApiWrite);
        assert_eq!(course.admission(), Admission::First);
        assert_eq!(course.cause(), None);
        let timeout = Answer::no_response(TransportKind::Timeout);
        let heard = Heard {
            answer: &timeout,
            retry_after: None,
            probe: false,
        };
        let step = course.decide(heard, &deadline, now, &mut rng()).step;
        assert!(matches!(
            step,
            Step::Wait {
                cause: RetryCause::Timeout,
                ..
            }
        ));
        assert_eq!(
            course.admission(),
            Admission::Retry {
                after_timeout: true,
                paced: false
            }
        );
    }

    #[test]
    fn waiting_for_in_progress_turns_its_stop_into_a_wait() {
        let now = start();
        let deadline = Deadline::start(Budget::new(), now.at);
        let body = r#"{"errors":[{"code":"idempotency_key_in_progress"}]}"#.to_owned();
        let running = answer(409, body, Some("1"));
        let heard = Heard {
            answer: &running,
            retry_after: Some(SECOND),
            probe: false,
        };
        let mut stops = course(Surface::JsonApiWrite);
        let decision = stops.decide(heard, &deadline, now, &mut rng());
        assert_eq!(decision.verdict, Verdict::Stop(ErrorKind::InProgress));
        let mut waits = Course::new(
            Surface::JsonApiWrite,
            Waits::new(Backoff::new(), None),
            true,
            true,
        );
        let decision = waits.decide(heard, &deadline, now, &mut rng());
        assert!(
            matches!(
                decision.step,
                Step::Wait {
                    cause: RetryCause::InProgress,
                    ..
                }
            ),
            "{decision:?}"
        );
    }

    #[test]
    fn the_retry_budgets_refusal_carries_the_last_answer() {
        let now = start();
        let deadline = Deadline::start(Budget::new(), now.at);
        let mut course = course(Surface::Webhook);
        let slow = answer(429, String::new(), Some("2"));
        let heard = Heard {
            answer: &slow,
            retry_after: Some(2 * SECOND),
            probe: false,
        };
        course.decide(heard, &deadline, now, &mut rng());
        let error = course.refused(&Refusal::Tokens { left: 0, cost: 5 });
        assert_eq!(error.kind(), ErrorKind::RetryBudgetExhausted);
        assert_eq!(error.status(), Some(StatusCode::TOO_MANY_REQUESTS));
        assert_eq!(error.retry_after(), Some(2 * SECOND));
    }
}
