//! [`Course::decide`] on every row of every vendor's table, without tokio or a socket.
//!
//! The pure step lives in `core/decide.rs`, which knows no vendor; its tests live here, beside the
//! tables they walk.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header};
use rand::SeedableRng;
use rand::rngs::StdRng;

use std::time::{Duration, SystemTime};

use http::StatusCode;
use tokio::time::Instant;

use crate::core::answer::Answer;
use crate::core::attempt::{TransportKind, WaitReason};
use crate::core::backoff::Backoff;
use crate::core::budget::Budget;
use crate::core::budget::Deadline;
use crate::core::classify;
use crate::core::decide::{Course, Decision, Heard, Now, Step};
use crate::core::error::ErrorKind;
use crate::core::limit::Refusal;
use crate::core::limit::retry_budget::Admission;
use crate::core::matrix::Verdict;
use crate::core::matrix::{Rule, When};
use crate::core::runtime::WallAnchor;
use crate::core::schedule::Waits;
use crate::core::stats::RetryCause;
use crate::vendors::Surface;

const SECOND: Duration = Duration::from_secs(1);

fn rng() -> StdRng {
    StdRng::seed_from_u64(0xdec1de)
}

fn start() -> Now {
    let at = Instant::now();
    Now {
        at,
        anchor: WallAnchor {
            at,
            wall: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        },
    }
}

fn course(surface: Surface) -> Course<'static> {
    course_under(surface, &Budget::new(), true)
}

/// The course of a call to `surface` under `budget`; `renews_tokens`: it has a token source.
fn course_under(surface: Surface, budget: &Budget, renews_tokens: bool) -> Course<'static> {
    Course::new(
        surface.profile(),
        Waits::new(Backoff::new(), None),
        renews_tokens,
        budget,
    )
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
        .filter(|answer| std::ptr::eq(classify::rule_for(surface.profile(), answer), rule))
        .take(8)
        .collect()
}

fn decide_first(surface: Surface, answer: &Answer, renews_tokens: bool) -> Decision {
    let now = start();
    let deadline = Deadline::start(Budget::new(), now.at);
    let mut course = course_under(surface, &Budget::new(), renews_tokens);
    let heard = Heard {
        answer,
        retry_after: answer.retry_after(now.wall()),
    };
    course.decide(heard, &deadline, now, &mut rng())
}

#[test]
fn every_row_of_every_table_decides_its_documented_step() {
    let mut rows = 0;
    for &surface in Surface::all() {
        for rule in surface.profile().rules.rows() {
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
                            matches!(reason, WaitReason::RetryAfterFallback | WaitReason::Backoff),
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
        .map(|surface| surface.profile().rules.rows().len())
        .sum();
    assert_eq!(rows, total);
}

#[test]
fn a_retry_after_on_a_retried_row_is_waited_with_a_small_jitter() {
    for &surface in Surface::all() {
        for rule in surface.profile().rules.rows() {
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
fn a_paced_retry_draws_from_its_allowance_then_counts() {
    // Two attempts and one paced retry: three requests against a server that keeps pacing.
    let now = start();
    let budget = Budget::new().max_attempts(2).paced_retries(1);
    let deadline = Deadline::start(budget, now.at);
    let mut course = course_under(Surface::Webhook, &budget, true);
    let paced = answer(429, String::new(), Some("2"));
    let heard = Heard {
        answer: &paced,
        retry_after: Some(2 * SECOND),
    };
    course.admitted(false);
    for sent in 1..=3 {
        let decision = course.decide(heard, &deadline, now, &mut rng());
        if sent < 3 {
            assert!(matches!(decision.step, Step::Wait { .. }), "{decision:?}");
            assert_eq!(
                course.admission(),
                Admission::Retry {
                    after_timeout: false,
                    paced: true
                },
                "free of retry tokens"
            );
            course.admitted(false);
        } else {
            let Step::Stop(error) = decision.step else {
                panic!("{decision:?}");
            };
            assert_eq!(error.kind(), ErrorKind::RateLimited);
        }
    }
}

#[test]
fn a_final_retry_sent_as_the_probe_draws_from_the_allowance_and_takes_no_backoff() {
    let now = start();
    let unpaced = answer(503, String::new(), None);
    let heard = Heard {
        answer: &unpaced,
        retry_after: None,
    };
    for (probe, sent) in [(false, 2), (true, 3)] {
        let budget = Budget::new().max_attempts(2).paced_retries(1);
        let deadline = Deadline::start(budget, now.at);
        let mut course = course_under(Surface::Webhook, &budget, true);
        course.admitted(false);
        let mut decided = 0;
        loop {
            decided += 1;
            let decision = course.decide(heard, &deadline, now, &mut rng());
            match decision.step {
                // A refused probe takes no backoff: the retry budget paces the next attempt.
                Step::Wait { wait, reason, .. } if probe && decided == 2 => {
                    assert_eq!((wait, reason), (Duration::ZERO, WaitReason::Probe));
                }
                Step::Wait { reason, .. } => assert_eq!(reason, WaitReason::Backoff),
                _ => break,
            }
            // The second attempt goes as the probe, when it does.
            course.admitted(probe && decided == 1);
        }
        assert_eq!(decided, sent, "probe: {probe}");
    }
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
    };
    let mut stops = course(Surface::JsonApiWrite);
    let decision = stops.decide(heard, &deadline, now, &mut rng());
    assert_eq!(decision.verdict, Verdict::Stop(ErrorKind::InProgress));
    let mut waits = course_under(
        Surface::JsonApiWrite,
        &Budget::new().wait_for_in_progress(true),
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
    };
    course.decide(heard, &deadline, now, &mut rng());
    let error = course.refused(Refusal {
        kind: ErrorKind::RetryBudgetExhausted,
        message: "client retry budget exhausted: no tokens".to_owned(),
        retry_after: None,
    });
    assert_eq!(error.kind(), ErrorKind::RetryBudgetExhausted);
    assert_eq!(error.status(), Some(StatusCode::TOO_MANY_REQUESTS));
    assert_eq!(error.retry_after(), Some(2 * SECOND));
}
