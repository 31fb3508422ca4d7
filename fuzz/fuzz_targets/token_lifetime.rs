//! Fuzzes the client's token cache (`src/core/auth/cache.rs`) with the lifetimes a hostile token
//! endpoint can state: each answer's `expires_in` is `0`, negative, huge, fractional, a string,
//! another JSON value or missing, read by the OAuth answer reader (`oauth.rs`) as
//! `ClientCredentials` reads it, some answers are 503s or come late, and callers arrive with
//! budgets of their own. In tokio's paused time, checked on every input:
//!
//! - nothing panics;
//! - a caller is answered by the end of its own wait, never later;
//! - the exchanges of the one credential never number more than four in any one second,
//!   whatever the endpoint answers (the shared backoff after a failed exchange or a token that
//!   expires at once, 250 ms doubling in its upper half; about 0.9 s between exchanges while a
//!   token is held);
//! - a token handed out is one an exchange issued.
//!
//! Run with: `cargo fuzz run token_lifetime` from the repository root (see fuzz/README.md).

#![no_main]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hodoflow_retry::auth::{AccessToken, ExchangeFuture, TokenExchanger};
use hodoflow_retry::fuzzing::{TokenCache, token_answer};
use http::StatusCode;
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tokio::time::Instant;

/// One answer of the token endpoint: how long it takes, and what it says.
#[derive(Debug, Clone)]
struct Answer {
    delay: Duration,
    unavailable: bool,
    /// `None`: no `expires_in` field.
    expires_in: Option<Value>,
}

/// The scripted token endpoint: its answers in turn (the last one again when they run out),
/// and when each exchange started and what it issued.
#[derive(Debug, Default)]
struct Endpoint {
    answers: Mutex<VecDeque<Answer>>,
    started: Mutex<Vec<Instant>>,
    issued: Mutex<Vec<String>>,
}

impl TokenExchanger for Endpoint {
    fn exchange(&self) -> ExchangeFuture<'_> {
        Box::pin(async move {
            let number = {
                let mut started = self.started.lock().unwrap();
                started.push(Instant::now());
                started.len()
            };
            let answer = {
                let mut answers = self.answers.lock().unwrap();
                match answers.len() {
                    0 => unreachable!("at least one answer"),
                    1 => answers[0].clone(),
                    _ => answers.pop_front().unwrap(),
                }
            };
            tokio::time::sleep(answer.delay).await;
            if answer.unavailable {
                let body = br#"{"error":"temporarily_unavailable"}"#;
                return token_answer(StatusCode::SERVICE_UNAVAILABLE, body, "cs_FUZZ");
            }
            let token = format!("tok-fuzz-{number:04}");
            let mut body = json!({"access_token": token, "token_type": "Bearer"});
            if let Some(expires_in) = answer.expires_in {
                body["expires_in"] = expires_in;
            }
            let read: hodoflow_retry::Result<AccessToken> =
                token_answer(StatusCode::OK, body.to_string().as_bytes(), "cs_FUZZ");
            if read.is_ok() {
                self.issued.lock().unwrap().push(token);
            }
            read
        })
    }
}

/// An `expires_in` a hostile endpoint might state.
fn expires_in(input: &mut Unstructured<'_>) -> Result<Option<Value>> {
    Ok(Some(match input.int_in_range(0..=15u8)? {
        0 => return Ok(None),
        1 => Value::Null,
        2 | 3 => json!(0),
        4 => json!(-1),
        5 => json!(input.arbitrary::<i64>()?),
        6 => json!(u64::MAX),
        7 => json!(1e300),
        8 => json!(input.int_in_range(0..=3u8)? as f64 * 0.4),
        9 => json!(-0.0),
        10 => json!("0"),
        11 => json!(input.arbitrary::<u32>()?.to_string()),
        12 => json!("soon"),
        13 => json!(true),
        _ => json!(input.int_in_range(0..=7200u32)?),
    }))
}

fn answer(input: &mut Unstructured<'_>) -> Result<Answer> {
    Ok(Answer {
        delay: Duration::from_millis(u64::from(input.int_in_range(0..=2_000u16)?)),
        unavailable: input.ratio(1, 8)?,
        expires_in: expires_in(input)?,
    })
}

/// One caller: when it arrives after the one before, how long it waits for a token, and the
/// bound of an exchange it starts.
#[derive(Debug, Clone, Copy)]
struct Caller {
    gap: Duration,
    wait: Duration,
    exchange_timeout: Duration,
}

fn caller(input: &mut Unstructured<'_>) -> Result<Caller> {
    Ok(Caller {
        gap: Duration::from_millis(u64::from(input.int_in_range(0..=1_500u16)?)),
        wait: Duration::from_millis(u64::from(input.int_in_range(1..=30_000u16)?)),
        exchange_timeout: Duration::from_millis(u64::from(input.int_in_range(1..=15_000u16)?)),
    })
}

fn script(input: &mut Unstructured<'_>) -> Result<(Vec<Answer>, Vec<Caller>)> {
    let answers = (0..input.int_in_range(1..=12u8)?)
        .map(|_| answer(input))
        .collect::<Result<_>>()?;
    let callers = (0..input.int_in_range(1..=48u8)?)
        .map(|_| caller(input))
        .collect::<Result<_>>()?;
    Ok((answers, callers))
}

fuzz_target!(|data: &[u8]| {
    let Ok((answers, callers)) = script(&mut Unstructured::new(data)) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a paused runtime");
    runtime.block_on(async move {
        let endpoint = Arc::new(Endpoint {
            answers: Mutex::new(answers.into()),
            ..Endpoint::default()
        });
        let cache = TokenCache::new(endpoint.clone());
        let mut calls = tokio::task::JoinSet::new();
        for caller in callers {
            tokio::time::sleep(caller.gap).await;
            let cache = cache.clone();
            calls.spawn(async move {
                let asked = Instant::now();
                let got = cache.get(caller.wait, caller.exchange_timeout).await;
                assert!(
                    Instant::now() <= asked + caller.wait,
                    "answered {:?} after a wait of {:?}",
                    Instant::now() - asked,
                    caller.wait
                );
                got
            });
        }
        let mut handed = Vec::new();
        while let Some(call) = calls.join_next().await {
            if let Ok(token) = call.expect("no caller panicked") {
                handed.push(token);
            }
        }
        let issued = endpoint.issued.lock().unwrap().clone();
        for token in &handed {
            assert!(issued.contains(token), "{token} was never issued");
        }
        let started = endpoint.started.lock().unwrap().clone();
        for (at, from) in started.iter().enumerate() {
            let within = started[at..]
                .iter()
                .take_while(|then| then.duration_since(*from) < Duration::from_secs(1))
                .count();
            assert!(
                within <= 4,
                "{within} exchanges within a second of exchange {at}: {:?}",
                started
                    .iter()
                    .map(|then| then.duration_since(started[0]))
                    .collect::<Vec<_>>()
            );
        }
    });
});
