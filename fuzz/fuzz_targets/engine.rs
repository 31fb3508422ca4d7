//! Fuzzes the attempt loop itself: a whole call of the `HodoflowClient` against a server on
//! loopback whose every answer comes from the input, raw bytes on the wire, so the engine meets
//! statuses, headers, bodies and broken HTTP that no contract allows, across several attempts.
//!
//! Run with: `cargo fuzz run engine` from the repository root (see fuzz/README.md).

#![no_main]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use hodoflow_retry::{
    Backoff, Budget, DeliveryId, ErrorKind, HodoflowClient, IdempotencyKey,
    auth::{AccessToken, ExchangeFuture, TokenExchanger},
    limit::RetryBudget,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;

/// The most answers one input scripts; the budget allows at most this many attempts.
const MAX_ANSWERS: usize = 5;
/// Each call's elapsed-time budget, and each attempt's timeout.
const MAX_ELAPSED: Duration = Duration::from_millis(300);
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(100);
/// The answer limit the client is built with, small so the fuzzer crosses it easily.
const ANSWER_LIMIT: usize = 4096;

const STATUSES: &[u16] = &[
    200, 201, 202, 204, 301, 304, 400, 401, 403, 404, 409, 413, 422, 429, 500, 502, 503, 504, 599,
];
const NAMES: &[&str] = &[
    "retry-after",
    "ratelimit",
    "x-request-id",
    "idempotency-replayed",
    "content-length",
    "transfer-encoding",
    "content-type",
];
const VALUES: &[&str] = &[
    "0",
    "1",
    "18446744073709551615",
    "9223372036854775807",
    "-1",
    "\"default\";r=0;t=1",
    "\"default\";r=0;t=18446744073709551615",
    "true",
    "chunked",
    "Fri, 31 Dec 9999 23:59:59 GMT",
];
const BODIES: &[&str] = &[
    "",
    "{\"status\":\"accepted\",\"workflow_run_id\":\"r\"}",
    "{\"status\":\"duplicate\"}",
    "{\"error\":\"missing_credentials\"}",
    "{\"errors\":[{\"code\":\"idempotency_key_in_progress\"}]}",
    "{\"errors\":[{\"code\":\"idempotency_unavailable\"}]}",
    "{\"errors\":[{\"extensions\":{\"code\":\"GRAPHQL_PARSE_FAILED\"}}]}",
];

/// The answers the server writes, one per connection, for the input being run.
static SCRIPT: Mutex<VecDeque<Vec<u8>>> = Mutex::new(VecDeque::new());
/// The requests the server read for the input being run.
static SEEN: Mutex<usize> = Mutex::new(0);
/// The input being run: a connection accepted during one input never answers or counts for
/// the next.
static GENERATION: AtomicU64 = AtomicU64::new(0);

struct World {
    runtime: Runtime,
    base_url: String,
    http: reqwest::Client,
}

/// The runtime and the server, started once for every input.
fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("a loopback port");
        let base_url = format!("http://{}", listener.local_addr().expect("bound"));
        runtime.spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    continue;
                };
                let generation = GENERATION.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 1 << 16 {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let answer = {
                        let mut script = SCRIPT.lock().unwrap();
                        if GENERATION.load(Ordering::SeqCst) != generation {
                            return;
                        }
                        *SEEN.lock().unwrap() += 1;
                        script.pop_front().unwrap_or_default()
                    };
                    let _ = stream.write_all(&answer).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("an HTTP client");
        World {
            runtime,
            base_url,
            http,
        }
    })
}

/// A token without a network round trip: the target is the attempt loop, not the exchange.
struct Fixed;

impl TokenExchanger for Fixed {
    fn exchange(&self) -> ExchangeFuture<'_> {
        Box::pin(async {
            Ok(AccessToken::expiring_in(
                "hft_FUZZ",
                Duration::from_secs(3600),
            ))
        })
    }
}

/// One raw answer: mostly a status line, headers and a body picked from the input, sometimes
/// bytes that are not HTTP at all, or nothing.
fn answer(input: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    match input.int_in_range(0..=15u8)? {
        0 => return Ok(Vec::new()),
        1 => {
            let len = input.int_in_range(0..=64usize)?;
            return Ok(input.bytes(len.min(input.len()))?.to_vec());
        }
        _ => {}
    }
    let status = if input.ratio(1, 10)? {
        input.int_in_range(100..=999u16)?
    } else {
        *input.choose(STATUSES)?
    };
    let mut text = format!("HTTP/1.1 {status} Fuzz\r\nconnection: close\r\n");
    let mut declared = false;
    for _ in 0..input.int_in_range(0..=4u8)? {
        let name = *input.choose(NAMES)?;
        declared |= name == "content-length" || name == "transfer-encoding";
        let value = if input.ratio(1, 4)? {
            let len = input.int_in_range(0..=24usize)?;
            String::from_utf8_lossy(input.bytes(len.min(input.len()))?).replace(['\r', '\n'], "")
        } else {
            (*input.choose(VALUES)?).to_owned()
        };
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    let body: Vec<u8> = match input.int_in_range(0..=7u8)? {
        // Over the client's limit, with or without a declared length.
        0 => vec![b'x'; ANSWER_LIMIT + input.int_in_range(1..=8192usize)?],
        1 => {
            let len = input.int_in_range(0..=256usize)?;
            input.bytes(len.min(input.len()))?.to_vec()
        }
        _ => input.choose(BODIES)?.as_bytes().to_vec(),
    };
    if !declared && input.ratio(3, 4)? {
        text.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    let mut raw = text.into_bytes();
    raw.extend_from_slice(&body);
    Ok(raw)
}

fn run(input: &mut Unstructured<'_>) -> Result<()> {
    let world = world();
    let surface = input.int_in_range(0..=3u8)?;
    let attempts = input.int_in_range(1..=MAX_ANSWERS as u32)?;
    let mut script = VecDeque::new();
    for _ in 0..attempts {
        script.push_back(answer(input)?);
    }
    {
        let mut next = SCRIPT.lock().unwrap();
        GENERATION.fetch_add(1, Ordering::SeqCst);
        *next = script;
        *SEEN.lock().unwrap() = 0;
    }

    let client = HodoflowClient::builder(&world.base_url)
        .exchanger(Fixed)
        .http_client(world.http.clone())
        .max_answer_bytes(ANSWER_LIMIT)
        .retry_budget(RetryBudget::disabled())
        .budget(
            Budget::new()
                .max_attempts(attempts)
                .max_elapsed(MAX_ELAPSED)
                .attempt_timeout(ATTEMPT_TIMEOUT),
        )
        .backoff(
            Backoff::new()
                .base(Duration::from_millis(1))
                .cap(Duration::from_millis(2))
                .retry_after_fallback(Duration::from_millis(1)),
        )
        .build()
        .expect("a valid client");
    let key = IdempotencyKey::from_operation_id("fuzz");
    let result = world.runtime.block_on(async {
        match surface {
            0 => client
                .deliver("trg_FUZZ", "{}")
                .delivery_id(DeliveryId::new(key))
                .send()
                .await
                .map(|delivery| delivery.attempts().to_vec()),
            1 => client
                .create("/api/json/v1/projects", key, "{}")
                .send()
                .await
                .map(|response| response.attempts().to_vec()),
            2 => client
                .get("/api/json/v1/projects")
                .send()
                .await
                .map(|response| response.attempts().to_vec()),
            _ => client
                .graphql("{ facts }", serde_json::Value::Null)
                .send()
                .await
                .map(|response| response.attempts().to_vec()),
        }
    });
    let attempts_made = match &result {
        Ok(made) => made.clone(),
        Err(error) => {
            if error.kind() == ErrorKind::AnswerTooLarge
                && error.status().is_some_and(|status| status.is_success())
            {
                assert!(
                    error.may_have_run(),
                    "a 2xx over the limit: the server acted"
                );
            }
            let text = format!("{error} {error:?}");
            assert!(
                !text.contains("hft_FUZZ"),
                "the bearer token is never echoed"
            );
            if surface == 0 {
                assert!(
                    !text.contains("trg_FUZZ"),
                    "the trigger token is never echoed"
                );
            }
            error.attempts().to_vec()
        }
    };
    // Counted, not timed: the waits the engine planned between its attempts fit the budget
    // (how long a call takes against its budget is tested in paused time, in tests/).
    let waited: Duration = attempts_made.iter().map(|attempt| attempt.wait()).sum();
    assert!(
        waited <= MAX_ELAPSED,
        "the planned waits {waited:?} fit the budget"
    );
    let made = attempts_made.len();
    assert!(made <= attempts as usize, "{made} attempts of {attempts}");
    assert!(
        *SEEN.lock().unwrap() <= made,
        "no request the client did not record"
    );
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
