//! Hostile servers and careless input: the client never panics, never reads an answer past its
//! limit, never sends a stale token or a credential it was not given, never echoes a secret, and
//! refuses bad values before anything is sent.
//!
//! The server is `support::hostile`: raw HTTP/1.1 on 127.0.0.1:0 that answers whatever a test
//! scripts. Its ledger (every request it read) is the judge of what was sent.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hodoflow_retry::{
    Backoff, Budget, DeliveryId, Error, ErrorKind, HodoflowClient, IdempotencyKey,
    attempt::WaitReason,
    auth::ClientCredentials,
    limit::{RateBudget, RetryBudget, RouteLimit},
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use tokio::task::JoinSet;

use support::Captured;
use support::hostile::{Bearer, HOSTILE_SECRET, HOSTILE_TOKEN_PREFIX, Hostile, Reply, Seen};

const TRIGGER: &str = "trg_HOSTILE_trigger_88";
const WEBHOOK: &str = "/api/v1/webhooks/";
const PROJECTS: &str = "/api/json/v1/projects";
const GIB: u64 = 1 << 30;
const ACCEPTED: &str = r#"{"status":"accepted","workflow_run_id":"run_1"}"#;

fn client_for(server: &Hostile) -> hodoflow_retry::hodoflow::HodoflowBuilder {
    HodoflowClient::builder(server.url())
        .client_credentials("hostile-sender", HOSTILE_SECRET)
        .backoff(
            Backoff::new()
                .base(Duration::from_millis(2))
                .cap(Duration::from_millis(10))
                .retry_after_fallback(Duration::from_millis(5)),
        )
        .budget(
            Budget::new()
                .max_attempts(4)
                .max_elapsed(Duration::from_secs(10))
                .attempt_timeout(Duration::from_secs(5)),
        )
}

fn id(op: &str) -> DeliveryId {
    DeliveryId::new(IdempotencyKey::from_operation_id(op))
}

fn key(op: &str) -> IdempotencyKey {
    IdempotencyKey::from_operation_id(op)
}

/// The process's peak resident set, from `/proc/self/status`, in MiB.
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// A call of each surface, spawned so that a panic shows as a failed join.
async fn each_surface(client: &HodoflowClient, op: &str) -> Vec<(&'static str, Result<(), Error>)> {
    let mut calls = JoinSet::new();
    let (c, o) = (client.clone(), op.to_owned());
    calls.spawn(async move {
        let sent = c.deliver(TRIGGER, "{}").delivery_id(id(&o)).send().await;
        ("webhook", sent.map(drop))
    });
    let (c, o) = (client.clone(), op.to_owned());
    calls.spawn(async move {
        let sent = c.create(PROJECTS, key(&o), "{}").send().await;
        ("write", sent.map(drop))
    });
    let c = client.clone();
    calls.spawn(async move { ("read", c.get(PROJECTS).send().await.map(drop)) });
    let mut results = Vec::new();
    while let Some(joined) = calls.join_next().await {
        results.push(joined.expect("a call never panics"));
    }
    results
}

#[tokio::test]
async fn a_retry_after_past_any_instant_stops_the_call_without_a_panic() {
    for value in [
        "18446744073709551615",
        "9223372036854775807",
        "9223372036854775808",
        "99999999999999999999999999",
    ] {
        for status in [429, 503] {
            let value = value.to_owned();
            let server =
                Hostile::start(move |_, _| Reply::status(status).header("retry-after", &value))
                    .await;
            let client = client_for(&server).build().unwrap();
            for (surface, result) in each_surface(&client, "huge").await {
                let error = result.expect_err("nothing succeeds");
                assert!(
                    matches!(
                        error.kind(),
                        ErrorKind::BudgetExhausted | ErrorKind::RetryBudgetExhausted
                    ),
                    "{surface} {status}: {error}"
                );
                assert!(
                    error
                        .retry_after()
                        .is_some_and(|wait| wait > Duration::from_secs(3600))
                );
                assert!(!error.may_have_run(), "every attempt was answered");
            }
            let api = server.seen_under("/api/");
            assert!(api.len() <= 3, "at most one attempt each: {}", api.len());

            // A 429 closed the credential, for an hour at most: the next call sends nothing. A
            // 503's `Retry-After` is its call's own wait: the next call sends once and stops.
            let before = server.seen_under("/api/").len();
            let error = client.get(PROJECTS).send().await.unwrap_err();
            assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
            let sent = usize::from(status == 503);
            assert_eq!(server.seen_under("/api/").len(), before + sent);
        }
    }
}

#[tokio::test]
async fn a_rate_limit_reset_past_any_instant_is_ignored_without_a_panic() {
    let server = Hostile::start(|_, n| {
        Reply::json(200, r#"{"data":[]}"#).header(
            "ratelimit",
            &format!(r#""default";r=0;t=1844674407370955161{}"#, n % 6),
        )
    })
    .await;
    let client = client_for(&server).build().unwrap();
    client
        .get(PROJECTS)
        .send()
        .await
        .expect("the answer itself is a success");
    client
        .get(PROJECTS)
        .send()
        .await
        .expect("a reset no structured field can hold is ignored");
    assert_eq!(server.seen_under("/api/").len(), 2);
}

#[tokio::test]
async fn a_rate_budget_period_past_any_instant_refuses_the_second_call() {
    let server = Hostile::start(|_, _| Reply::json(200, r#"{"data":[]}"#)).await;
    let client = client_for(&server)
        .rate_budget(RateBudget::new(1, Duration::MAX).unwrap())
        .build()
        .unwrap();
    client.get(PROJECTS).send().await.unwrap();
    let error = client.get(PROJECTS).send().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert_eq!(server.seen_under("/api/").len(), 1);
}

#[tokio::test]
async fn a_trigger_window_past_any_instant_refuses_the_second_delivery() {
    let server = Hostile::start(|_, _| Reply::json(202, ACCEPTED)).await;
    let client = client_for(&server)
        .trigger_limit(RouteLimit::new(1, Duration::MAX).unwrap())
        .budget(Budget::new().max_elapsed(Duration::from_millis(200)))
        .build()
        .unwrap();
    client
        .deliver(TRIGGER, "{}")
        .delivery_id(id("window-1"))
        .send()
        .await
        .unwrap();
    let second = client
        .deliver(TRIGGER, "{}")
        .delivery_id(id("window-2"))
        .send()
        .await;
    assert_eq!(second.unwrap_err().kind(), ErrorKind::BudgetExhausted);
    assert_eq!(server.seen_under(WEBHOOK).len(), 1);
}

#[tokio::test]
async fn following_a_run_with_budgets_past_any_instant_never_panics() {
    let server = Hostile::start(|seen, n| {
        let state = if n < 2 { "running" } else { "succeeded" };
        assert!(seen.path.starts_with("/api/json/v1/workflow_runs/run_1"));
        Reply::json(
            200,
            &format!(r#"{{"data":{{"id":"run_1","type":"workflow_runs","attributes":{{"state":"{state}"}}}}}}"#),
        )
    })
    .await;
    let client = client_for(&server).build().unwrap();
    let run = client
        .follow_run("run_1")
        .poll_interval(Duration::from_millis(5))
        .max_elapsed(Duration::MAX)
        .send()
        .await
        .expect("the run succeeds on the third poll");
    assert_eq!(run.polls(), 3);

    let server = Hostile::start(|_, _| {
        Reply::json(
            200,
            r#"{"data":{"id":"run_1","type":"workflow_runs","attributes":{"state":"running"}}}"#,
        )
    })
    .await;
    let client = client_for(&server).build().unwrap();
    let error = client
        .follow_run("run_1")
        .poll_interval(Duration::MAX)
        .max_elapsed(Duration::MAX)
        .send()
        .await
        .expect_err("a poll interval past any instant ends the follow");
    assert_eq!(error.kind(), ErrorKind::BudgetExhausted);
}

#[tokio::test]
async fn a_gigabyte_answer_is_never_buffered_and_a_write_stops_with_answer_too_large() {
    for content_length in [true, false] {
        let server = Hostile::start(move |seen, _| {
            let status = if seen.path.starts_with(WEBHOOK) {
                202
            } else {
                201
            };
            Reply::status(status).endless(GIB, content_length)
        })
        .await;
        let client = client_for(&server).build().unwrap();
        // A delivery's 202 is its answer, whatever its body: accepted, its run ID unknown.
        let delivery = client.deliver(TRIGGER, "{}").delivery_id(id("gib")).send();
        let delivered = delivery.await.expect("a 202 is accepted, its body unread");
        assert_eq!(
            delivered.outcome(),
            &hodoflow_retry::webhook::WebhookOutcome::Accepted { run_id: None }
        );
        assert_eq!(delivered.attempts().len(), 1);

        let write = client.create(PROJECTS, key("gib"), "{}").send().await;
        let error = write.expect_err("a 1 GiB answer is refused");
        assert_eq!(error.kind(), ErrorKind::AnswerTooLarge, "{error}");
        assert!(error.may_have_run());

        assert_eq!(server.seen_under("/api/").len(), 2, "neither was retried");
        let written = server.written();
        assert!(
            written < 64 << 20,
            "the client stopped reading: {} MiB written (content-length {content_length})",
            written >> 20
        );
    }
    let peak = peak_rss_mib();
    eprintln!("peak RSS with 1 GiB answers offered: {peak} MiB");
    assert!(peak < 256, "peak RSS {peak} MiB");
}

#[tokio::test]
async fn an_oversized_answer_the_matrix_retries_anyway_is_retried() {
    let server = Hostile::start(|_, n| match n {
        0 => Reply::status(503).endless(100 << 20, true),
        _ => Reply::json(201, r#"{"data":{"id":"p1","type":"projects"}}"#),
    })
    .await;
    let client = client_for(&server)
        .max_answer_bytes(1 << 20)
        .build()
        .unwrap();
    let created = client
        .create(PROJECTS, key("big-503"), "{}")
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    assert_eq!(created.attempts().len(), 2);
    let keys: Vec<_> = server
        .seen_under(PROJECTS)
        .iter()
        .map(|seen| seen.header_values("idempotency-key").join(","))
        .collect();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], keys[1], "the same key on the retry");

    let server = Hostile::start(|_, _| Reply::status(404).endless(2 << 20, false)).await;
    let client = client_for(&server)
        .max_answer_bytes(1 << 20)
        .build()
        .unwrap();
    let error = client.get(PROJECTS).send().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::AnswerTooLarge);
    assert!(!error.may_have_run(), "a 404 did nothing");
    assert_eq!(server.seen_under("/api/").len(), 1);
}

#[tokio::test]
async fn a_gigabyte_token_answer_is_a_token_exchange_error() {
    let server = Hostile::builder()
        .scripts_tokens()
        .start(|seen, _| {
            assert_eq!(seen.path, "/oauth/token", "nothing is sent without a token");
            Reply::json(200, "").endless(GIB, false)
        })
        .await;
    let client = client_for(&server).build().unwrap();
    let error = client.get(PROJECTS).send().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::TokenExchange, "{error}");
    assert!(error.to_string().contains("over 65536 bytes"), "{error}");
    assert!(server.written() < 64 << 20);
}

#[tokio::test]
async fn base_and_token_urls_with_credentials_queries_or_other_schemes_are_refused() {
    let server = Hostile::start(|_, _| Reply::json(202, ACCEPTED)).await;
    let port = server.port();
    let refused = [
        format!("http://user:hunter2@127.0.0.1:{port}"),
        format!("http://hunter2@127.0.0.1:{port}"),
        format!("http://127.0.0.1:{port}/?tenant=hunter2"),
        format!("http://127.0.0.1:{port}/#hunter2"),
        format!("ftp://127.0.0.1:{port}"),
        "127.0.0.1".to_owned(),
    ];
    for base in &refused {
        let error = HodoflowClient::builder(base)
            .client_credentials("hostile-sender", HOSTILE_SECRET)
            .build()
            .expect_err(base);
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{base}");
        assert!(!format!("{error} {error:?}").contains("hunter2"), "{error}");

        let credentials = ClientCredentials::new(base, "hostile-sender", HOSTILE_SECRET);
        assert!(credentials.is_err(), "{base}");
    }
    let credentials = ClientCredentials::new(&server.url(), "hostile-sender", HOSTILE_SECRET)
        .unwrap()
        .token_url(&format!("http://user:hunter2@127.0.0.1:{port}/oauth/token"));
    let error = credentials.expect_err("userinfo in the token URL");
    assert!(!error.to_string().contains("hunter2"));
    assert!(server.seen().is_empty(), "nothing was sent");

    // Hosts are case-insensitive, as URLs define them; exactly one Authorization header goes out.
    let client = HodoflowClient::builder(format!("HTTP://LOCALHOST:{port}/"))
        .client_credentials("hostile-sender", HOSTILE_SECRET)
        .build()
        .unwrap();
    let delivery = client
        .deliver(TRIGGER, "{}")
        .delivery_id(id("case"))
        .send()
        .await;
    assert_eq!(delivery.unwrap().run_id(), Some("run_1"));
    for seen in server.seen() {
        assert!(
            seen.header_values("authorization").len() <= 1,
            "{:?}",
            seen.path
        );
    }
}

#[tokio::test]
async fn blank_operation_ids_are_refused_before_anything_is_sent() {
    let server = Hostile::start(|_, _| Reply::json(202, ACCEPTED)).await;
    let client = client_for(&server).build().unwrap();
    for blank in ["", " ", "\t \n"] {
        let delivery = client
            .deliver(TRIGGER, "{}")
            .delivery_id(id(blank))
            .send()
            .await;
        assert_eq!(delivery.unwrap_err().kind(), ErrorKind::InvalidInput);
        let write = client.create(PROJECTS, key(blank), "{}").send().await;
        assert_eq!(write.unwrap_err().kind(), ErrorKind::InvalidInput);
    }
    assert!(server.seen().is_empty(), "not even a token exchange");
}

#[tokio::test]
async fn a_429_without_a_usable_retry_after_waits_at_least_the_fallback() {
    let mut variants = JoinSet::new();
    for retry_after in [None, Some("soon"), Some("-1"), Some("1.5")] {
        variants.spawn(async move {
            let server = Hostile::start(move |_, n| match (n, retry_after) {
                (0, Some(value)) => Reply::status(429).header("retry-after", value),
                (0, None) => Reply::status(429),
                _ => Reply::json(202, ACCEPTED),
            })
            .await;
            let client = client_for(&server)
                .backoff(Backoff::new().base(Duration::from_millis(1)))
                .build()
                .unwrap();
            let delivery = client.deliver(TRIGGER, "{}").delivery_id(id("429")).send();
            let delivery = delivery.await.unwrap();
            // Planned for the documented 2 s at least (slept as planned: the same answers in
            // tests/paused_time.rs).
            let refused = &delivery.attempts()[0];
            assert_eq!(refused.wait_reason(), WaitReason::RetryAfterFallback);
            assert!(
                refused.wait() >= Backoff::DEFAULT_RETRY_AFTER_FALLBACK,
                "{retry_after:?}: {refused}, under the documented 2 s"
            );
            assert_eq!(server.seen_under(WEBHOOK).len(), 2);
        });
    }
    while let Some(variant) = variants.join_next().await {
        variant.expect("each variant waits the fallback");
    }
}

#[tokio::test]
async fn a_token_that_expired_while_the_call_waited_is_renewed_before_it_is_sent() {
    // 401 once: the client re-exchanges. Then a 429 with `Retry-After: 2` holds the call past
    // the fresh token's 1 s lifetime. The server refuses any expired token with a 401.
    let server = Hostile::builder()
        .token_ttl(Duration::from_secs(1))
        .start(|seen, n| match (n, seen.bearer) {
            (0, _) | (_, Bearer::Expired | Bearer::Unknown) => {
                Reply::json(401, r#"{"error":"missing_credentials"}"#)
            }
            (1, Bearer::Valid) => Reply::status(429).header("retry-after", "2"),
            (_, Bearer::Valid) => Reply::json(202, ACCEPTED),
        })
        .await;
    let client = client_for(&server).build().unwrap();
    let delivery = client
        .deliver(TRIGGER, "{}")
        .delivery_id(id("stale"))
        .send()
        .await;
    let delivery = delivery.expect("a token that expired while waiting is renewed, not alerted");
    assert_eq!(delivery.attempts().len(), 3);
    let sent = server.seen_under(WEBHOOK);
    assert_eq!(
        sent.iter().map(|seen| seen.bearer).collect::<Vec<_>>()[1..],
        [Bearer::Valid, Bearer::Valid],
        "no stale token was sent"
    );
    assert_eq!(
        server.issued().len(),
        3,
        "first, after the 401, after expiry"
    );
}

#[tokio::test]
async fn a_token_endpoint_down_for_a_moment_is_waited_out_not_failed() {
    let exchanges = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&exchanges);
    let server = Hostile::builder()
        .scripts_tokens()
        .start(move |seen, _| {
            if !seen.path.starts_with("/oauth/token") {
                return Reply::json(202, ACCEPTED);
            }
            match counted.fetch_add(1, Ordering::SeqCst) {
                0 => Reply::status(503),
                1 => Reply::Hangup,
                _ => Reply::json(
                    200,
                    r#"{"access_token":"hft_HOSTILE_late","token_type":"Bearer","expires_in":60}"#,
                ),
            }
        })
        .await;
    let client = client_for(&server).build().unwrap();
    let delivery = client
        .deliver(TRIGGER, "{}")
        .delivery_id(id("late"))
        .send()
        .await;
    assert_eq!(
        delivery
            .expect("a 503 and a hang-up, then a token")
            .attempts()
            .len(),
        1
    );
    assert_eq!(exchanges.load(Ordering::SeqCst), 3);
    assert_eq!(
        server.seen_under(WEBHOOK).len(),
        1,
        "sent once, with the token"
    );

    // A refusal is not waited out: 401 invalid_client stops at once, nothing sent.
    let server = Hostile::builder()
        .scripts_tokens()
        .start(|_, _| Reply::json(401, r#"{"error":"invalid_client"}"#))
        .await;
    let client = client_for(&server).build().unwrap();
    let error = client.get(PROJECTS).send().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::TokenExchange);
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn a_second_401_after_a_fresh_exchange_is_the_only_unauthorized() {
    let server = Hostile::start(|_, _| Reply::json(401, r#"{"errors":[{"status":"401"}]}"#)).await;
    let client = client_for(&server).build().unwrap();
    let error = client.get(PROJECTS).send().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unauthorized);
    assert_eq!(error.attempts().len(), 2);
    assert_eq!(server.seen_under("/api/").len(), 2);
    assert_eq!(server.issued().len(), 2);
}

#[tokio::test]
async fn a_server_that_echoes_the_tokens_it_was_sent_is_not_echoed() {
    let server = Hostile::start(|seen, _| {
        let bearer = seen.header_values("authorization").join("");
        let bearer = bearer.trim_start_matches("Bearer ");
        if seen.path.starts_with(WEBHOOK) {
            let trigger = seen.path.trim_start_matches(WEBHOOK);
            Reply::json(422, &format!(r#"{{"error":"{trigger} {bearer}"}}"#))
        } else {
            Reply::json(
                422,
                &format!(r#"{{"errors":[{{"status":"422","code":"{bearer}"}}]}}"#),
            )
        }
    })
    .await;
    let client = client_for(&server).build().unwrap();
    let token = || server.issued()[0].clone();
    let write = client
        .create(PROJECTS, key("echo"), "{}")
        .send()
        .await
        .unwrap_err();
    assert_eq!(write.kind(), ErrorKind::Unprocessable);
    let text = format!("{write} {write:?}");
    assert!(!text.contains(&token()), "{text}");
    let delivery = client
        .deliver(TRIGGER, "{}")
        .delivery_id(id("echo"))
        .send()
        .await;
    let delivery = delivery.unwrap_err();
    let text = format!("{delivery} {delivery:?}");
    assert!(
        !text.contains(&token()) && !text.contains(TRIGGER),
        "{text}"
    );
    assert!(
        delivery
            .body()
            .is_some_and(|body| body.windows(TRIGGER.len()).any(|w| w == TRIGGER.as_bytes())),
        "the body is the server's own text, kept as it came"
    );
}

/// One random answer: statuses across the whole range and beyond the contract, every header
/// the client reads with good, bad and absurd values, bodies from empty to endless, and
/// answers that are not HTTP.
fn random_reply(rng: &mut StdRng) -> Reply {
    const STATUSES: &[u16] = &[
        200, 201, 202, 204, 206, 299, 301, 302, 304, 307, 308, 400, 401, 403, 404, 405, 409, 410,
        413, 415, 422, 425, 429, 431, 451, 499, 500, 501, 502, 503, 504, 505, 507, 599,
    ];
    const RETRY_AFTERS: &[&str] = &[
        "0",
        "1",
        "18446744073709551615",
        "9223372036854775807",
        "-1",
        "1.5",
        "soon",
        "",
        "Wed, 21 Oct 2015 07:28:00 GMT",
        "Fri, 31 Dec 9999 23:59:59 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT, 3",
    ];
    const BODIES: &[&str] = &[
        "",
        "{}",
        "null",
        "[]",
        "{\"errors\":[{\"code\":\"idempotency_key_in_progress\"}]}",
        "{\"errors\":[{\"code\":\"idempotency_key_reused\"}]}",
        "{\"errors\":[{\"code\":\"idempotency_unavailable\"}]}",
        "{\"errors\":[{\"extensions\":{\"code\":\"GRAPHQL_VALIDATION_FAILED\"}}]}",
        "{\"errors\":\"not a list\"}",
        "{\"error\":\"missing_credentials\"}",
        "{\"error\":\"Unauthorized\"}",
        "{\"status\":\"accepted\",\"workflow_run_id\":\"run_x\"}",
        "{\"status\":\"duplicate\"}",
        "{\"status\":\"accepted\",\"workflow_run_id\":12}",
        "{\"data\":{\"id\":\"x\",\"type\":\"projects\"}}",
        "{\"data\":{\"attributes\":{\"state\":\"succeeded\"}}}",
        "{\"access_token\":\"\"}",
        "\u{0}\u{1}\u{ff}not json",
    ];
    match rng.random_range(0..100) {
        0..=2 => return Reply::Hangup,
        3..=5 => {
            let len = rng.random_range(0..64);
            return Reply::Raw((0..len).map(|_| rng.random()).collect());
        }
        6..=7 => {
            return Reply::Raw(b"HTTP/1.1 999 Nope\r\ncontent-length: 5\r\n\r\nhello".to_vec());
        }
        _ => {}
    }
    let status = STATUSES[rng.random_range(0..STATUSES.len())];
    let mut reply = Reply::status(status);
    if rng.random_bool(0.5) {
        reply = reply.header(
            "retry-after",
            RETRY_AFTERS[rng.random_range(0..RETRY_AFTERS.len())],
        );
    }
    if rng.random_bool(0.2) {
        let t: u64 = rng.random();
        let r = rng.random_range(0..3);
        reply = reply.header(
            "ratelimit",
            &format!("\"default\";r={r};t={}", t >> rng.random_range(0..64)),
        );
    }
    if rng.random_bool(0.2) {
        reply = reply.header(
            "idempotency-replayed",
            if rng.random() { "true" } else { "yes" },
        );
    }
    if rng.random_bool(0.3) {
        reply = reply.header("x-request-id", &format!("req_{}", rng.random::<u32>()));
    }
    if rng.random_bool(0.05) {
        reply = reply.header("content-type", "application/json; charset=\u{7f}");
    }
    match rng.random_range(0..100) {
        0..=3 => reply.endless(rng.random_range(1..(64u64 << 20)), rng.random()),
        4..=9 => {
            let len = rng.random_range(0..300_000);
            reply.body((0..len).map(|_| rng.random_range(b' '..=b'~')).collect())
        }
        _ => reply.body(
            BODIES[rng.random_range(0..BODIES.len())]
                .as_bytes()
                .to_vec(),
        ),
    }
}

#[tokio::test]
async fn thousands_of_random_answers_end_every_call_typed_within_its_budget() {
    let _ = tracing_log::LogTracer::init();
    let (captured, _guard) = Captured::on_this_thread(tracing::Level::TRACE);

    const CLIENTS: usize = 64;
    const CALLS: usize = 32;
    const MAX_ELAPSED: Duration = Duration::from_millis(800);
    let seed: u64 = std::env::var("HOSTILE_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("HOSTILE_SEED={seed}");
    let rng = Arc::new(std::sync::Mutex::new(StdRng::seed_from_u64(seed)));
    let answers = Arc::new(AtomicUsize::new(0));
    let server = {
        let (rng, answers) = (Arc::clone(&rng), Arc::clone(&answers));
        Hostile::start(move |_, _| {
            answers.fetch_add(1, Ordering::Relaxed);
            random_reply(&mut rng.lock().unwrap())
        })
        .await
    };
    // A fresh client for each call: one `Retry-After` of an hour closes a client's gate, and
    // every later call of it would meet the gate instead of the server.
    // One connection pool for all of them: building a TLS-capable reqwest client loads the
    // platform's roots, milliseconds each, and the pool holds no state the gate keeps.
    let http = support::http_client();
    let fresh_client = || {
        client_for(&server)
            .http_client(http.clone())
            .budget(
                Budget::new()
                    .max_attempts(4)
                    .max_elapsed(MAX_ELAPSED)
                    .attempt_timeout(Duration::from_millis(300)),
            )
            .retry_budget(RetryBudget::disabled())
            .max_answer_bytes(256 * 1024)
            .build()
            .unwrap()
    };
    let mut senders = JoinSet::new();
    for sender in 0..CLIENTS {
        let clients: Vec<HodoflowClient> = (0..CALLS).map(|_| fresh_client()).collect();
        senders.spawn(async move {
            let mut ended = Vec::new();
            for (call, client) in clients.into_iter().enumerate() {
                let op = format!("random-{sender}-{call}");
                let started = Instant::now();
                let result = match call % 4 {
                    0 => client
                        .deliver(TRIGGER, "{}")
                        .delivery_id(id(&op))
                        .send()
                        .await
                        .map(drop),
                    1 => client
                        .create(PROJECTS, key(&op), "{}")
                        .send()
                        .await
                        .map(drop),
                    2 => client.get(PROJECTS).send().await.map(drop),
                    _ => client
                        .graphql("{ facts }", serde_json::json!({}))
                        .send()
                        .await
                        .map(drop),
                };
                ended.push((
                    started.elapsed(),
                    result.err().map(|e| (e.kind(), e.to_string())),
                ));
            }
            ended
        });
    }
    let mut calls = 0;
    let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
    while let Some(joined) = senders.join_next().await {
        for (took, error) in joined.expect("no call panics") {
            calls += 1;
            // A guard against a call that never ends, not a measure of its budget: the hostile
            // server streams random bodies of up to 64 MiB on the same runtime as the 64
            // senders, so a call's own timers fire late under load. That each call ends within
            // its budget is tested in paused time (`tests/paused_time.rs`).
            assert!(
                took <= MAX_ELAPSED * 20,
                "a call took {took:?}: it hung: {error:?}"
            );
            let kind = error.as_ref().map_or("ok", |(kind, _)| kind.as_str());
            *kinds.entry(kind).or_default() += 1;
        }
    }
    let answers = answers.load(Ordering::Relaxed);
    eprintln!(
        "{calls} calls, {answers} random answers: {kinds:?}; peak RSS {} MiB",
        peak_rss_mib()
    );
    assert_eq!(calls, CLIENTS * CALLS);
    assert!(answers >= 2000, "thousands of answers: {answers}");
    assert!(peak_rss_mib() < 512);

    let trace = captured.text();
    assert!(!trace.contains(HOSTILE_SECRET));
    assert!(
        !trace.contains(HOSTILE_TOKEN_PREFIX),
        "an access token was traced"
    );
    assert!(!trace.contains(TRIGGER), "the trigger token was traced");
}

#[tokio::test]
async fn the_ledger_never_sees_two_authorization_headers_or_a_stale_token() {
    let server = Hostile::start(|_, n| match n % 3 {
        0 => Reply::status(503).header("retry-after", "0"),
        _ => Reply::json(202, ACCEPTED),
    })
    .await;
    let client = client_for(&server).build().unwrap();
    for op in 0..10 {
        client
            .deliver(TRIGGER, "{}")
            .delivery_id(id(&format!("ledger-{op}")))
            .send()
            .await
            .unwrap();
    }
    let sent: Vec<Seen> = server.seen_under(WEBHOOK);
    assert!(sent.len() >= 10);
    for seen in &sent {
        assert_eq!(seen.header_values("authorization").len(), 1);
        assert_eq!(seen.bearer, Bearer::Valid);
    }
}

/// The hostile-input audit's traversal forms: each is refused with `invalid_input` before anything
/// is sent, and the contract server's ledger shows no request, no exchange, no run and no write.
#[tokio::test]
async fn dot_segments_never_leave_their_surface_on_the_contract_server() {
    let server = support::server().await;
    let client = support::client(&server);
    let token = support::TRIGGER;
    let writes = [
        format!("/api/json/%2e%2e/%2e%2e/api/v1/webhooks/{token}"),
        format!("/api/json/%2E%2E/%2E%2E/api/v1/webhooks/{token}"),
        format!("/api/json/.%2e/%2e./api/v1/webhooks/{token}"),
        format!("/api/json/../../api/v1/webhooks/{token}"),
        "/api/json/../../oauth/token".to_owned(),
        format!("/api/json/..\\..\\api/v1/webhooks/{token}"),
        format!("/api/json/.\t./.\n./api/v1/webhooks/{token}"),
        "/api/json/v1/./projects".to_owned(),
        "/api/json/v1/projects/%2e".to_owned(),
        format!("/api/json/..%2F..%2Fapi/v1/webhooks/{token}"),
    ];
    for path in &writes {
        let error = client
            .write(http::Method::POST, path, key("traversal"), "{}")
            .send()
            .await
            .expect_err("a dot segment is refused");
        support::assert_nothing_sent(&error, ErrorKind::InvalidInput, &server);
    }
    let error = client
        .get("/api/json/%2e%2e/%2e%2e/oauth/token")
        .send()
        .await
        .expect_err("a read's dot segment is refused too");
    support::assert_nothing_sent(&error, ErrorKind::InvalidInput, &server);
    for dots in [".", ".."] {
        let error = client
            .deliver(dots, "{}")
            .delivery_id(id("traversal"))
            .send()
            .await
            .expect_err("a dot trigger token is refused");
        support::assert_nothing_sent(&error, ErrorKind::InvalidInput, &server);
        let error = client
            .deliver(token, "{}")
            .legacy_org(dots)
            .delivery_id(id("traversal"))
            .send()
            .await
            .expect_err("a dot organization is refused");
        support::assert_nothing_sent(&error, ErrorKind::InvalidInput, &server);
    }
    let ledger = server.ledger();
    assert_eq!(ledger.total_runs(), 0, "no webhook ran");
    assert_eq!(ledger.total_writes_executed(), 0, "no write ran");
}

/// A listener on 127.0.0.1:0 that accepts every connection and never answers nor closes one.
async fn silent_listener() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    addr
}

/// A token endpoint that accepts the connection and never answers used to hold each exchange
/// for the exchanger's own 15 s: the exchange is now bounded by the attempt timeout and the time
/// left, so the call ends within its budget, saying which wait ran out.
#[tokio::test]
async fn a_silent_token_endpoint_ends_the_call_within_its_budget() {
    let addr = silent_listener().await;
    let client = HodoflowClient::builder(format!("http://{addr}"))
        .client_credentials("hostile-sender", HOSTILE_SECRET)
        .budget(
            Budget::new()
                .max_attempts(3)
                .max_elapsed(Duration::from_secs(3))
                .attempt_timeout(Duration::from_secs(1)),
        )
        .build()
        .unwrap();
    // A guard, not a measure: the exchanger's own 15 s timeout would outlast it; that the call's
    // budget bounds the exchange is read from the message below.
    let error = tokio::time::timeout(
        Duration::from_secs(12),
        client
            .deliver(TRIGGER, "{}")
            .delivery_id(id("silent-token"))
            .send(),
    )
    .await
    .expect("the exchange is bounded by the call, not by the exchanger's 15 s")
    .expect_err("no token, no delivery");
    assert_eq!(error.kind(), ErrorKind::TokenExchange, "{error}");
    let message = error.to_string();
    assert!(
        message.contains("the call had left") || message.contains("the call has left"),
        "{error}"
    );
    assert!(
        !message.contains("15s"),
        "the exchanger's own timeout did not apply: {error}"
    );
    assert!(
        error.attempts().is_empty(),
        "nothing reached the API: {error:?}"
    );
}

/// The Modulify catalogue read is part of the call: a server that accepts the connection and
/// never answers `GET /v1/tools` ends the call within its budget (the client's own budget, 60 s
/// with a 15 s attempt timeout, no longer applies to it), and nothing is sent to the method.
#[tokio::test]
async fn a_silent_catalogue_read_ends_the_call_within_its_budget() {
    let addr = silent_listener().await;
    let modulify = hodoflow_retry::ModulifyClient::builder(format!("http://{addr}"))
        .bearer_token("mfy_HOSTILE_token_1234")
        .build()
        .unwrap();
    // A guard, not a measure: the client's own 15 s attempt timeout would outlast it.
    let call = modulify.call("send_message", "{}").budget(
        Budget::new()
            .max_elapsed(Duration::from_secs(2))
            .attempt_timeout(Duration::from_secs(1)),
    );
    let error = tokio::time::timeout(Duration::from_secs(12), call.send())
        .await
        .expect("the catalogue read is bounded by the call's budget, not the client's")
        .expect_err("no catalogue, no call");
    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert!(error.to_string().contains("catalogue"), "{error}");
}

/// A duration over its documented maximum (24 h for a call's budget) is `invalid_input` where it
/// enters, in the builder and per call, and nothing is sent.
#[tokio::test]
async fn a_budget_over_24_hours_is_invalid_input_before_anything_is_sent() {
    let server = support::server().await;
    let absurd = Duration::from_secs(5_000_000_000_000 * 3600);
    for budget in [
        Budget::new().max_elapsed(absurd),
        Budget::new().max_elapsed(Budget::MAX + Duration::from_millis(1)),
        Budget::new().attempt_timeout(Budget::MAX + Duration::from_secs(1)),
    ] {
        let built = support::builder(&server)
            .client_credentials("c", "s")
            .budget(budget)
            .build();
        assert_eq!(
            built.expect_err("refused at build").kind(),
            ErrorKind::InvalidInput
        );
        let error = support::client(&server)
            .get(support::PROJECTS)
            .budget(budget)
            .send()
            .await
            .expect_err("refused per call");
        support::assert_nothing_sent(&error, ErrorKind::InvalidInput, &server);
    }
    assert!(Budget::new().max_elapsed(Budget::MAX).validate().is_ok());
}
