//! Modulify over real TCP against the contract server's ledger: the catalogue decides the key,
//! one key on every attempt, a lost answer is replayed and the method runs once, and each row of
//! Modulify's table (`docs/wire-contract.md`, "Modulify") ends the way it says.

mod support;

use std::time::Duration;

use hodoflow_mock::{DEMO_MODULIFY_TOKEN, Fault, MockServer, ToolSeed};
use hodoflow_retry::{
    Budget, ErrorKind, IdempotencyKey, ModulifyClient, RetryingClient,
    attempt::WaitReason,
    modulify::{Effect, MethodAnswer, ModulifyOutcome},
};
use http::{HeaderMap, HeaderValue};
use support::{fast_backoff, server, statuses};

support::over_h2c!(
    a_lost_answer_is_replayed_and_the_method_runs_once,
    two_500s_are_retried_with_the_same_key_and_the_third_attempt_runs_once,
    an_adding_method_without_a_key_gets_one_random_key_on_every_attempt,
    a_read_only_method_is_sent_without_a_key,
    an_answer_over_1_mb_lost_then_repeated_is_a_replay_without_the_answer,
    a_key_reused_with_another_body_stops_after_one_attempt_as_key_reused,
    a_4xx_releases_the_key_so_the_fixed_body_runs_under_the_same_key,
    a_401_stops_after_one_attempt_without_an_exchange,
    replays_do_not_count_against_the_per_minute_budget,
);

const SEND_MESSAGE: &str = "/v1/send_message";

/// A message to send: a method that adds something each time.
fn message(prompt: &str) -> String {
    format!(r#"{{"projectId":"site_1","prompt":"{prompt}"}}"#)
}

fn modulify_client(server: &MockServer) -> ModulifyClient {
    modulify_with(server, support::budget(5))
}

fn modulify_with(server: &MockServer, budget: Budget) -> ModulifyClient {
    support::modulify_builder(server)
        .bearer_token(DEMO_MODULIFY_TOKEN)
        .budget(budget)
        .build()
        .expect("a client")
}

/// The `Idempotency-Key` of each request to `path`, in order.
fn keys_sent(server: &MockServer, path: &str) -> Vec<Option<String>> {
    server
        .ledger()
        .requests_to("POST", path)
        .iter()
        .map(|request| request.idempotency_key.clone())
        .collect()
}

async fn send(modulify: &ModulifyClient, key: &IdempotencyKey, body: String) -> MethodAnswer {
    modulify
        .call("send_message", body)
        .key(key.clone())
        .send()
        .await
        .expect("the call succeeds")
}

#[tokio::test]
async fn a_lost_answer_is_replayed_and_the_method_runs_once() {
    let server = server().await;
    let modulify = modulify_client(&server);
    server.inject(
        Fault::execute_then_close()
            .on("POST", SEND_MESSAGE)
            .times(1),
    );
    let key = IdempotencyKey::from_operation_id("order-1:notify");

    let answer = send(&modulify, &key, message("Add a footer.")).await;

    assert_eq!(answer.outcome(), ModulifyOutcome::Replayed);
    assert!(answer.answer_kept());
    assert_eq!(statuses(answer.attempts()), [None, Some(200)]);
    assert_eq!(answer.key(), Some(&key));
    assert_eq!(answer.effect(), Effect::Adds);
    assert!(
        answer.data().is_some(),
        "the replay carries the original data"
    );
    let ledger = server.ledger();
    assert_eq!(ledger.modulify_executions(key.as_str()), 1);
    assert_eq!(ledger.modulify_replays(key.as_str()), 1);
    assert_eq!(
        keys_sent(&server, SEND_MESSAGE),
        [Some(key.as_str().to_owned()), Some(key.as_str().to_owned())]
    );
}

#[tokio::test]
async fn two_500s_are_retried_with_the_same_key_and_the_third_attempt_runs_once() {
    let server = server().await;
    let modulify = modulify_client(&server);
    server.inject(Fault::fail_execution(500).on("POST", SEND_MESSAGE).times(2));
    let key = IdempotencyKey::from_operation_id("order-2:notify");

    let answer = send(&modulify, &key, message("Add a header.")).await;

    assert_eq!(answer.outcome(), ModulifyOutcome::Ok);
    assert_eq!(
        statuses(answer.attempts()),
        [Some(500), Some(500), Some(200)]
    );
    assert_eq!(server.ledger().modulify_executions(key.as_str()), 1);
    let keys = keys_sent(&server, SEND_MESSAGE);
    assert_eq!(keys.len(), 3);
    assert!(
        keys.iter()
            .all(|sent| sent.as_deref() == Some(key.as_str())),
        "{keys:?}"
    );
}

#[tokio::test]
async fn a_409_in_progress_waits_its_retry_after_and_the_method_runs_once() {
    let server = server().await;
    let modulify = modulify_client(&server);
    let key = IdempotencyKey::from_operation_id("order-3:notify");
    // The first call holds the key for 1.5 s; the second meets it in progress.
    server.inject(
        Fault::slow_execution(Duration::from_millis(1500))
            .on("POST", SEND_MESSAGE)
            .times(1),
    );
    let first = {
        let modulify = modulify.clone();
        let key = key.clone();
        tokio::spawn(async move { send(&modulify, &key, message("Slow.")).await })
    };
    support::eventually("the first call holds the key", || {
        server.ledger().requests_to("POST", SEND_MESSAGE).len() == 1
    })
    .await;

    let second = send(&modulify, &key, message("Slow.")).await;

    let first = first.await.unwrap();
    assert_eq!(first.outcome(), ModulifyOutcome::Ok);
    assert_eq!(second.outcome(), ModulifyOutcome::Replayed);
    assert_eq!(second.body(), first.body());
    let seen = statuses(second.attempts());
    assert_eq!(seen.first(), Some(&Some(409)), "{seen:?}");
    assert_eq!(seen.last(), Some(&Some(200)), "{seen:?}");
    // The retry after the 409 was planned for its Retry-After (that the engine sleeps no less
    // than it plans: tests/paused_time.rs).
    let in_progress = &second.attempts()[0];
    assert_eq!(
        in_progress.wait_reason(),
        WaitReason::RetryAfter,
        "{in_progress}"
    );
    assert!(
        in_progress.wait() >= Duration::from_secs(1),
        "{in_progress}"
    );
    let ledger = server.ledger();
    assert!(
        ledger
            .requests_to("POST", SEND_MESSAGE)
            .iter()
            .any(|request| request.status == Some(409)),
        "a 409 was answered"
    );
    assert_eq!(ledger.modulify_executions(key.as_str()), 1);
}

#[tokio::test]
async fn a_409_with_retry_after_1_waits_at_least_a_second_with_the_same_key() {
    let server = server().await;
    let modulify = modulify_client(&server);
    server.inject(
        Fault::respond(409)
            .header("Retry-After", "1")
            .body(r#"{"data":null,"error":{"code":"idempotency_key_in_progress","message":"running"}}"#)
            .on("POST", SEND_MESSAGE)
            .times(1),
    );
    let key = IdempotencyKey::from_operation_id("order-4:notify");

    let answer = send(&modulify, &key, message("Wait.")).await;

    assert_eq!(statuses(answer.attempts()), [Some(409), Some(200)]);
    let in_progress = &answer.attempts()[0];
    assert_eq!(
        in_progress.wait_reason(),
        WaitReason::RetryAfter,
        "{in_progress}"
    );
    assert!(
        in_progress.wait() >= Duration::from_secs(1),
        "{in_progress}"
    );
    let ledger = server.ledger();
    assert_eq!(
        keys_sent(&server, SEND_MESSAGE),
        [Some(key.as_str().to_owned()), Some(key.as_str().to_owned())]
    );
    assert_eq!(ledger.modulify_executions(key.as_str()), 1);
}

#[tokio::test]
async fn a_409_in_progress_past_the_budget_is_in_progress_and_may_have_run() {
    let server = server().await;
    let budget = Budget::new()
        .max_attempts(2)
        .max_elapsed(Duration::from_secs(5));
    let modulify = modulify_with(&server, budget);
    server.inject(
        Fault::respond(409)
            .header("Retry-After", "0")
            .body(r#"{"data":null,"error":{"code":"idempotency_key_in_progress","message":"running"}}"#)
            .on("POST", SEND_MESSAGE)
            .times(u32::MAX),
    );

    let error = modulify
        .call("send_message", message("Never ends."))
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::InProgress, "{error}");
    assert_eq!(statuses(error.attempts()), [Some(409), Some(409)]);
    assert!(error.may_have_run(), "the first may still commit");
    let key = error.idempotency_key().expect("the key to call again with");
    assert_eq!(
        keys_sent(&server, SEND_MESSAGE),
        [Some(key.as_str().to_owned()), Some(key.as_str().to_owned())],
        "both attempts carried the key the error names"
    );
    assert_eq!(server.ledger().modulify_executions(key.as_str()), 0);
}

#[tokio::test]
async fn a_key_reused_with_another_body_stops_after_one_attempt_as_key_reused() {
    let server = server().await;
    let modulify = modulify_client(&server);
    let key = IdempotencyKey::from_operation_id("order-5:notify");
    send(&modulify, &key, message("First.")).await;

    let error = modulify
        .call("send_message", message("Second."))
        .key(key.clone())
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::KeyReused, "{error}");
    assert_eq!(statuses(error.attempts()), [Some(422)]);
    assert!(!error.may_have_run(), "{error:?}");
    assert_eq!(server.ledger().modulify_executions(key.as_str()), 1);
}

#[tokio::test]
async fn a_bad_key_is_refused_before_anything_is_sent() {
    let server = server().await;
    let modulify = modulify_client(&server);

    for blank in ["", "   "] {
        let error = modulify
            .call("send_message", message("Never sent."))
            .operation_id(blank)
            .send()
            .await
            .unwrap_err();
        support::assert_nothing_sent(&error, ErrorKind::InvalidInput, &server);
    }
    // A key the type refuses cannot be made at all.
    assert!(IdempotencyKey::new("x".repeat(256)).is_err());
    assert!(IdempotencyKey::new("with space").is_err());
}

#[tokio::test]
async fn a_body_that_is_not_a_json_object_or_too_large_is_refused_before_anything_is_sent() {
    let server = server().await;
    let modulify = modulify_client(&server);

    let error = modulify
        .call("send_message", "[1]")
        .send()
        .await
        .unwrap_err();
    support::assert_nothing_sent(&error, ErrorKind::InvalidInput, &server);
    let big = format!(r#"{{"prompt":"{}"}}"#, "x".repeat(1_048_576));
    let error = modulify.call("send_message", big).send().await.unwrap_err();
    support::assert_nothing_sent(&error, ErrorKind::PayloadTooLarge, &server);
    let error = modulify
        .call("../oauth/token", "{}")
        .send()
        .await
        .unwrap_err();
    support::assert_nothing_sent(&error, ErrorKind::InvalidInput, &server);
}

#[tokio::test]
async fn a_read_only_method_is_sent_without_a_key() {
    let server = server().await;
    let modulify = modulify_client(&server);

    let answer = modulify
        .call("list_sites", "{}")
        .key(IdempotencyKey::new("ignored-for-reads").unwrap())
        .send()
        .await
        .unwrap();

    assert_eq!(answer.effect(), Effect::Read);
    assert_eq!(answer.key(), None);
    assert_eq!(answer.outcome(), ModulifyOutcome::Ok);
    assert_eq!(keys_sent(&server, "/v1/list_sites"), [None]);
}

#[tokio::test]
async fn an_adding_method_without_a_key_gets_one_random_key_on_every_attempt() {
    let server = server().await;
    let modulify = modulify_client(&server);
    // A 503 that releases the key, then an answer lost after the run, then the replay.
    server.inject(
        Fault::fail_execution(503)
            .on("POST", "/v1/create_site")
            .times(1),
    );
    server.inject(
        Fault::execute_then_close()
            .on("POST", "/v1/create_site")
            .times(1),
    );

    let answer = modulify
        .call("create_site", r#"{"name":"Atlas"}"#)
        .send()
        .await
        .unwrap();

    let key = answer
        .key()
        .expect("an adding method carries a key")
        .as_str();
    assert!(
        uuid::Uuid::parse_str(key).is_ok_and(|uuid| uuid.get_version_num() == 4),
        "{key}"
    );
    let keys = keys_sent(&server, "/v1/create_site");
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(
        keys.iter().all(|sent| sent.as_deref() == Some(key)),
        "{keys:?}"
    );
    assert_eq!(answer.outcome(), ModulifyOutcome::Replayed);
    assert_eq!(server.ledger().modulify_executions(key), 1);

    // A second call is new work: a new key, a second site.
    let again = modulify
        .call("create_site", r#"{"name":"Atlas"}"#)
        .send()
        .await
        .unwrap();
    assert_ne!(again.key().unwrap().as_str(), key);
    assert_eq!(server.ledger().modulify_executions_of("create_site"), 2);
}

#[tokio::test]
async fn idempotent_and_destructive_methods_carry_a_key_too() {
    let server = server().await;
    let modulify = modulify_client(&server);
    let site = modulify
        .call("create_site", r#"{"name":"Vesta"}"#)
        .send()
        .await
        .unwrap();
    let id = site.data().unwrap()["site"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let renamed = modulify
        .call(
            "rename_site",
            format!(r#"{{"projectId":"{id}","name":"Vesta 2"}}"#),
        )
        .send()
        .await
        .unwrap();
    let deleted = modulify
        .call("delete_site", format!(r#"{{"projectId":"{id}"}}"#))
        .send()
        .await
        .unwrap();

    assert_eq!(renamed.effect(), Effect::Idempotent);
    assert_eq!(deleted.effect(), Effect::Destructive);
    for path in ["/v1/rename_site", "/v1/delete_site"] {
        let keys = keys_sent(&server, path);
        assert!(matches!(keys.as_slice(), [Some(_)]), "{path}: {keys:?}");
    }
}

#[tokio::test]
async fn an_answer_over_1_mb_lost_then_repeated_is_a_replay_without_the_answer() {
    let server = server().await;
    let modulify = modulify_client(&server);
    server.inject(
        Fault::execute_then_close()
            .on("POST", "/v1/create_backup")
            .times(1),
    );
    let key = IdempotencyKey::from_operation_id("site-1:backup");

    let answer = modulify
        .call(
            "create_backup",
            r#"{"siteId":"site_1","answer_bytes":1100000}"#,
        )
        .key(key.clone())
        .send()
        .await
        .unwrap();

    assert_eq!(answer.outcome(), ModulifyOutcome::ReplayedWithoutAnswer);
    assert!(!answer.answer_kept());
    assert_eq!(answer.data(), None);
    assert_eq!(answer.status().as_u16(), 200);
    assert_eq!(statuses(answer.attempts()), [None, Some(200)]);
    assert_eq!(server.ledger().modulify_executions(key.as_str()), 1);
}

#[tokio::test]
async fn a_4xx_releases_the_key_so_the_fixed_body_runs_under_the_same_key() {
    let server = server().await;
    let modulify = modulify_client(&server);
    let key = IdempotencyKey::from_operation_id("order-6:notify");

    let error = modulify
        .call("send_message", r#"{"projectId":"site_1"}"#)
        .key(key.clone())
        .send()
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unprocessable, "{error}");
    assert_eq!(statuses(error.attempts()), [Some(422)]);
    assert_eq!(server.ledger().modulify_executions(key.as_str()), 0);

    let fixed = send(&modulify, &key, message("Fixed.")).await;

    assert_eq!(fixed.outcome(), ModulifyOutcome::Ok);
    assert_eq!(server.ledger().modulify_executions(key.as_str()), 1);
}

#[tokio::test]
async fn a_401_stops_after_one_attempt_without_an_exchange() {
    let server = server().await;
    let modulify = modulify_client(&server);
    server.inject(Fault::expired_token().on("POST", SEND_MESSAGE).times(1));

    let error = modulify
        .call("send_message", message("Refused."))
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::Unauthorized, "{error}");
    assert_eq!(statuses(error.attempts()), [Some(401)]);
    let ledger = server.ledger();
    assert_eq!(ledger.requests_to("POST", SEND_MESSAGE).len(), 1);
    assert!(
        ledger.exchanges().is_empty(),
        "a static token is never exchanged"
    );
}

#[tokio::test]
async fn an_unknown_token_stops_at_the_catalogue_and_no_method_is_sent() {
    let server = server().await;
    let modulify = support::modulify_builder(&server)
        .bearer_token("mfy_not_a_token")
        .build()
        .unwrap();

    let error = modulify
        .call("send_message", message("Never sent."))
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::Unauthorized, "{error}");
    assert_eq!(error.attempts().len(), 1);
    assert!(!error.to_string().contains("mfy_not_a_token"), "{error}");
    assert!(server.ledger().requests_to("POST", "/v1/").is_empty());
}

#[tokio::test]
async fn replays_do_not_count_against_the_per_minute_budget() {
    // Two calls a minute: the first send and one more (the catalogue read is not counted).
    let server = support::server_where(|limits| limits.modulify_rate_limit = 2).await;
    let modulify = modulify_client(&server);
    let key = IdempotencyKey::from_operation_id("order-7:notify");
    send(&modulify, &key, message("Once.")).await;

    for _ in 0..10 {
        let replay = send(&modulify, &key, message("Once.")).await;
        assert_eq!(replay.outcome(), ModulifyOutcome::Replayed);
        assert_eq!(statuses(replay.attempts()), [Some(200)]);
    }
    let fresh = send(
        &modulify,
        &IdempotencyKey::from_operation_id("order-8:notify"),
        message("Another."),
    )
    .await;

    assert_eq!(fresh.outcome(), ModulifyOutcome::Ok);
    assert_eq!(statuses(fresh.attempts()), [Some(200)]);
    let ledger = server.ledger();
    assert_eq!(ledger.modulify_rate_counted(), 2);
    assert_eq!(ledger.modulify_replays(key.as_str()), 10);
    assert!(
        ledger
            .requests()
            .iter()
            .all(|request| request.status != Some(429))
    );
}

#[tokio::test]
async fn a_spent_per_minute_budget_is_waited_out_with_the_same_key() {
    let server = support::server_where(|limits| {
        limits.modulify_rate_limit = 1;
        limits.modulify_rate_window = Duration::from_secs(1);
    })
    .await;
    let modulify = modulify_client(&server);
    let key = IdempotencyKey::from_operation_id("order-9:notify");
    // One call spends the window (the catalogue read is not counted).
    send(
        &modulify,
        &IdempotencyKey::from_operation_id("order-9:first"),
        message("1"),
    )
    .await;

    let answer = send(&modulify, &key, message("2")).await;

    let seen = statuses(answer.attempts());
    assert_eq!(seen.first(), Some(&Some(429)), "{seen:?}");
    assert_eq!(seen.last(), Some(&Some(200)), "{seen:?}");
    assert_eq!(server.ledger().modulify_executions(key.as_str()), 1);
}

#[tokio::test]
async fn the_catalogue_is_read_once_and_a_method_it_lacks_is_refused() {
    let server = server().await;
    let modulify = modulify_client(&server);
    for n in 0..3 {
        send(
            &modulify,
            &IdempotencyKey::from_operation_id(&format!("order-10:{n}")),
            message("m"),
        )
        .await;
    }
    assert_eq!(server.ledger().requests_to("GET", "/v1/tools").len(), 1);

    let error = modulify.call("send_mesage", "{}").send().await.unwrap_err();

    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    assert!(
        error.to_string().contains("not in the catalogue"),
        "{error}"
    );
    assert!(error.attempts().is_empty());
    assert!(
        server
            .ledger()
            .requests_to("POST", "/v1/send_mesage")
            .is_empty()
    );
    let tools = modulify.refresh_tools().await.unwrap();
    assert_eq!(server.ledger().requests_to("GET", "/v1/tools").len(), 2);
    let effect = |name: &str| tools.get(name).map(|tool| tool.effect());
    assert_eq!(effect("get_site"), Some(Effect::Read));
    assert_eq!(effect("set_job_enabled"), Some(Effect::Idempotent));
    assert_eq!(effect("send_site_email"), Some(Effect::Adds));
    assert_eq!(effect("delete_site"), Some(Effect::Destructive));
}

#[tokio::test]
async fn a_method_beyond_the_reference_catalogue_is_classified_by_its_hints() {
    let builder = MockServer::builder()
        .modulify_tool(ToolSeed::new("archive_site"))
        .modulify_tool(ToolSeed::new("count_visits").read_only(true));
    let server = support::server_with(builder).await;
    let modulify = modulify_client(&server);

    let archived = modulify.call("archive_site", "{}").send().await.unwrap();
    let counted = modulify.call("count_visits", "{}").send().await.unwrap();

    // No hints at all: destructive by the Model Context Protocol's defaults, so with a key.
    assert_eq!(archived.effect(), Effect::Destructive);
    assert!(archived.key().is_some());
    assert_eq!(counted.effect(), Effect::Read);
    assert_eq!(keys_sent(&server, "/v1/count_visits"), [None]);
}

#[tokio::test]
async fn a_callers_authorization_or_idempotency_key_header_is_refused_before_sending() {
    let server = server().await;
    let modulify = modulify_client(&server);
    for name in ["authorization", "idempotency-key"] {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_static("x"));
        let error = modulify
            .call("send_message", message("m"))
            .headers(headers)
            .send()
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        assert!(server.ledger().requests_to("POST", SEND_MESSAGE).is_empty());
    }
}

#[tokio::test]
async fn a_modulify_client_wraps_any_retrying_client_with_a_static_token() {
    let server = server().await;
    let client = RetryingClient::builder(server.base_url())
        .bearer_token(DEMO_MODULIFY_TOKEN)
        .backoff(fast_backoff())
        .build()
        .unwrap();
    let modulify = ModulifyClient::new(client.clone());

    modulify.call("list_sites", "{}").send().await.unwrap();

    assert_eq!(client.stats().calls, 2, "the catalogue and the call");
    let ledger = server.ledger();
    assert_eq!(ledger.requests_to("GET", "/v1/tools").len(), 1);
    assert_eq!(ledger.requests_to("POST", "/v1/list_sites").len(), 1);
    assert!(support::builder(&server).bearer_token("").build().is_err());
}

#[tokio::test]
async fn a_429_closes_the_credentials_gate_so_other_calls_wait_instead_of_bouncing() {
    let server = support::server_where(|limits| {
        limits.modulify_rate_limit = 3;
        limits.modulify_rate_window = Duration::from_secs(1);
    })
    .await;
    let modulify = modulify_client(&server);
    for n in 0..3 {
        let key = IdempotencyKey::from_operation_id(&format!("order-12:spend-{n}"));
        send(&modulify, &key, message("spend")).await;
    }
    let first = {
        let modulify = modulify.clone();
        tokio::spawn(async move {
            let key = IdempotencyKey::from_operation_id("order-12:first");
            send(&modulify, &key, message("first")).await
        })
    };
    support::eventually("the budget is spent", || {
        server
            .ledger()
            .requests()
            .iter()
            .any(|request| request.status == Some(429))
    })
    .await;

    let later: Vec<_> = (0..2)
        .map(|n| {
            let modulify = modulify.clone();
            tokio::spawn(async move {
                let key = IdempotencyKey::from_operation_id(&format!("order-12:later-{n}"));
                send(&modulify, &key, message("later")).await
            })
        })
        .collect();
    first.await.unwrap();
    for call in later {
        assert_eq!(statuses(call.await.unwrap().attempts()), [Some(200)]);
    }

    let refused = server
        .ledger()
        .requests()
        .iter()
        .filter(|request| request.status == Some(429))
        .count();
    assert_eq!(refused, 1, "the calls after the 429 waited at the gate");
}

/// The builder a Modulify user starts from: its token and the generic settings, nothing of
/// Hodoflow's; a lost answer is replayed through it as through a client built by hand.
#[tokio::test]
async fn the_modulify_builder_builds_a_client_that_replays_a_lost_answer() {
    let server = server().await;
    server.inject(
        Fault::execute_then_close()
            .on("POST", SEND_MESSAGE)
            .times(1),
    );
    let modulify = ModulifyClient::builder(server.base_url())
        .bearer_token(DEMO_MODULIFY_TOKEN)
        .backoff(fast_backoff())
        .budget(Budget::new().max_attempts(3))
        .build()
        .unwrap();

    let sent = modulify
        .call("send_message", message("Built."))
        .operation_id("builder:notify")
        .send()
        .await
        .unwrap();

    assert_eq!(sent.outcome(), ModulifyOutcome::Replayed);
    let key = IdempotencyKey::from_operation_id("builder:notify");
    assert_eq!(server.ledger().modulify_executions(key.as_str()), 1);
}

#[tokio::test]
async fn the_modulify_builder_refuses_to_build_without_a_token() {
    let error = ModulifyClient::builder("http://127.0.0.1:9")
        .budget(Budget::new())
        .build()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    assert!(error.to_string().contains("bearer_token"), "{error}");
}
