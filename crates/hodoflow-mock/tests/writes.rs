//! JSON:API unsafe writes and the Idempotency-Key store (Hodoflow's "Idempotency and
//! retries"): replay, reuse and in-progress conflicts, 5xx release, an unavailable store, the
//! reservation and retention windows, key scope, and refused requests.

mod support;

use std::time::Duration;

use hodoflow_mock::{Fault, Limits, MockServer};
use reqwest::Method;
use support::{
    Caller, DAY, JSON_API, MINUTE, OTHER_CLIENT, PROJECTS, SECOND, SECOND_CLIENT, clocked, demo,
    project, project_update, start_slow_write, two_orgs, without_lost_races,
};

#[tokio::test]
async fn replays_a_completed_write_with_the_replayed_header() {
    let (server, caller) = demo().await;
    let first = caller.create("op-1", &project("apollo")).await;
    assert_eq!(first.status, 201);
    assert_eq!(first.header("content-type"), Some(JSON_API));
    assert!(!first.replayed());
    assert_eq!(first.json()["data"]["attributes"]["name"], "apollo");

    let replay = caller.create("op-1", &project("apollo")).await;
    assert!(replay.replayed());
    assert_eq!(replay.status, first.status);
    assert_eq!(replay.body, first.body);
    assert_eq!(replay.header("content-type"), first.header("content-type"));

    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed("op-1"), 1);
    assert_eq!(ledger.requests_with_key("op-1").len(), 2);
    assert_eq!(caller.count(PROJECTS).await, 1);
}

/// Writes once under `op-1`, then the same key with another request, which
/// must be refused as reused without executing.
async fn assert_reuse_refused(
    caller: &Caller,
    server: &MockServer,
    method: Method,
    path: &str,
    body: &str,
) {
    let reused = caller.write(method, path, Some("op-1"), body).await;
    assert_eq!(reused.status, 409);
    assert_eq!(reused.api_code(), "idempotency_key_reused");
    assert_eq!(reused.json()["errors"][0]["status"], "409");
    assert!(!reused.replayed());
    assert_eq!(server.ledger().writes_executed("op-1"), 1);
}

#[tokio::test]
async fn refuses_the_same_key_with_another_body_as_reused() {
    let (server, caller) = demo().await;
    caller.create("op-1", &project("apollo")).await;
    assert_reuse_refused(&caller, &server, Method::POST, PROJECTS, &project("gemini")).await;
    let one_more_space = format!("{} ", project("apollo"));
    assert_reuse_refused(&caller, &server, Method::POST, PROJECTS, &one_more_space).await;
}

#[tokio::test]
async fn refuses_the_same_key_on_another_path_as_reused() {
    let (server, caller) = demo().await;
    caller.create("op-1", &project("apollo")).await;
    assert_reuse_refused(
        &caller,
        &server,
        Method::POST,
        "/api/json/v1/tasks",
        &project("apollo"),
    )
    .await;
}

#[tokio::test]
async fn refuses_the_same_key_with_another_method_as_reused() {
    let (server, caller) = demo().await;
    let (id, path) = caller.create_project("op-0", "apollo").await;
    let body = project_update(&id, r#"{"name":"gemini"}"#);
    let put = caller.write(Method::PUT, &path, Some("op-1"), &body).await;
    assert_eq!(put.status, 200);
    assert_reuse_refused(&caller, &server, Method::PATCH, &path, &body).await;
}

#[tokio::test]
async fn answers_a_concurrent_duplicate_with_idempotency_key_in_progress() {
    let (server, caller) = demo().await;
    let body = project("apollo");
    let (key, first, duplicate) = without_lost_races(|round| {
        let (server, caller) = (&server, caller.clone());
        async move {
            let key = format!("op-{round}");
            let slow = start_slow_write(server, &caller, &key, Duration::from_millis(400)).await;
            // Let the first claim its key; a replay below shows it did not.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let duplicate = caller.create(&key, &project("apollo")).await;
            let first = slow.await.unwrap();
            (!first.replayed() && !duplicate.replayed()).then_some((key, first, duplicate))
        }
    })
    .await;
    assert_eq!(first.status, 201);
    assert_eq!(duplicate.status, 409);
    assert_eq!(duplicate.api_code(), "idempotency_key_in_progress");
    assert_eq!(server.ledger().writes_executed(&key), 1);
    let after = caller.create(&key, &body).await;
    assert!(after.replayed());
    assert_eq!(after.body, first.body);
}

#[tokio::test]
async fn releases_the_key_after_a_5xx_so_a_retry_executes() {
    let (server, caller) = demo().await;
    for (status, code) in [(500, "internal_error"), (503, "unavailable")] {
        let key = format!("op-{status}");
        server.inject(Fault::fail_execution(status).on("POST", PROJECTS));
        let failed = caller.create(&key, &project("apollo")).await;
        assert_eq!(failed.status, status);
        assert_eq!(failed.api_code(), code);
        assert_eq!(server.ledger().writes_executed(&key), 0);

        let retry = caller.create(&key, &project("apollo")).await;
        assert_eq!(retry.status, 201);
        assert!(!retry.replayed());
        assert_eq!(server.ledger().writes_executed(&key), 1);
        assert!(caller.create(&key, &project("apollo")).await.replayed());
    }
    assert_eq!(caller.count(PROJECTS).await, 2);
}

#[tokio::test]
async fn refuses_with_idempotency_unavailable_and_writes_nothing() {
    let (server, caller) = demo().await;
    server.inject(Fault::idempotency_unavailable().on("POST", PROJECTS));
    let refused = caller.create("op-1", &project("apollo")).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.api_code(), "idempotency_unavailable");
    assert_eq!(server.ledger().writes_executed("op-1"), 0);
    assert_eq!(
        caller.get(PROJECTS).await.json()["data"],
        serde_json::json!([])
    );

    let retry = caller.create("op-1", &project("apollo")).await;
    assert_eq!(retry.status, 201);
    assert!(!retry.replayed());
    assert_eq!(server.ledger().writes_executed("op-1"), 1);
}

#[tokio::test]
async fn releases_a_stranded_reservation_after_five_minutes() {
    let (clock, builder) = clocked();
    let server = builder.start().await.unwrap();
    let caller = Caller::demo(&server).await;
    let body = project("apollo");
    let key = without_lost_races(|round| {
        let (server, caller) = (&server, caller.clone());
        async move {
            let key = format!("op-{round}");
            let stranded = start_slow_write(server, &caller, &key, Duration::from_secs(60)).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
            let probe = caller.create(&key, &project("apollo")).await;
            // The client gives up: the server drops the write, its reservation stays.
            stranded.abort();
            (probe.api_code() == "idempotency_key_in_progress").then_some(key)
        }
    })
    .await;

    clock.advance(5 * MINUTE - SECOND);
    let held = caller.create(&key, &body).await;
    assert_eq!(held.api_code(), "idempotency_key_in_progress");
    assert_eq!(server.ledger().writes_executed(&key), 0);

    clock.advance(SECOND);
    let retry = caller.create(&key, &body).await;
    assert_eq!(retry.status, 201);
    assert!(!retry.replayed());
    assert_eq!(server.ledger().writes_executed(&key), 1);
    assert!(caller.create(&key, &body).await.replayed());
}

/// Writes under `op-1`, then checks it is replayed until `retention` has
/// passed and runs again from then on.
async fn assert_retained_for(limits: Option<Limits>, retention: Duration) {
    let (clock, mut builder) = clocked();
    if let Some(limits) = limits {
        builder = builder.limits(limits);
    }
    let server = builder.start().await.unwrap();
    let mut caller = Caller::demo(&server).await;
    let first = caller.create("op-1", &project("apollo")).await;

    clock.advance(retention - SECOND);
    caller.refresh().await;
    let replay = caller.create("op-1", &project("apollo")).await;
    assert!(replay.replayed());
    assert_eq!(replay.body, first.body);

    clock.advance(SECOND);
    caller.refresh().await;
    let again = caller.create("op-1", &project("apollo")).await;
    assert_eq!(again.status, 201);
    assert!(!again.replayed());
    assert_ne!(again.data_id(), first.data_id());
    assert_eq!(server.ledger().writes_executed("op-1"), 2);
}

#[tokio::test]
async fn retains_a_completed_answer_for_24_hours_then_runs_the_key_again() {
    assert_retained_for(None, DAY).await;
}

#[tokio::test]
async fn retains_a_completed_answer_for_a_configured_window() {
    let limits = Limits {
        idempotency_retention: 10 * MINUTE,
        ..Limits::default()
    };
    assert_retained_for(Some(limits), 10 * MINUTE).await;
}

#[tokio::test]
async fn scopes_a_key_by_tenant_and_service_account() {
    let server = two_orgs(MockServer::builder()).start().await.unwrap();
    let demo = Caller::demo(&server).await;
    let colleague = Caller::of(&server, SECOND_CLIENT.0, SECOND_CLIENT.1).await;
    let other_org = Caller::of(&server, OTHER_CLIENT.0, OTHER_CLIENT.1).await;
    let body = project("apollo");

    let mut firsts = Vec::new();
    for caller in [&demo, &colleague, &other_org] {
        let first = caller.create("op-1", &body).await;
        assert_eq!(first.status, 201);
        assert!(!first.replayed());
        firsts.push(first);
    }
    assert_eq!(server.ledger().writes_executed("op-1"), 3);
    for (caller, first) in [&demo, &colleague, &other_org].into_iter().zip(&firsts) {
        let replay = caller.create("op-1", &body).await;
        assert!(replay.replayed());
        assert_eq!(replay.data_id(), first.data_id());
    }
    assert_eq!(server.ledger().writes_executed("op-1"), 3);
}

#[tokio::test]
async fn refuses_an_invalid_key_with_400_and_accepts_255_characters() {
    let (server, caller) = demo().await;
    let too_long = "k".repeat(256);
    for key in ["", "two words", too_long.as_str()] {
        let refused = caller.create(key, &project("apollo")).await;
        assert_eq!(refused.status, 400, "{key:?}");
        assert_eq!(refused.api_code(), "invalid_idempotency_key");
    }
    let not_ascii = caller
        .write_request(Method::POST, PROJECTS, None, &project("apollo"))
        .header(
            "idempotency-key",
            reqwest::header::HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        );
    assert_eq!(support::send(not_ascii).await.status, 400);
    assert_eq!(server.ledger().total_writes_executed(), 0);

    let longest = "k".repeat(255);
    assert_eq!(
        caller.create(&longest, &project("apollo")).await.status,
        201
    );
    assert_eq!(server.ledger().writes_executed(&longest), 1);
}

/// A project document of exactly `size` bytes.
fn project_of_size(size: usize) -> String {
    let frame = project("").len();
    project(&"x".repeat(size - frame))
}

#[tokio::test]
async fn refuses_a_body_over_the_limit_with_413_and_accepts_one_at_the_limit() {
    let (server, caller) = demo().await;
    let at_limit = caller.create("op-at", &project_of_size(1_048_576)).await;
    assert_eq!(at_limit.status, 201);
    for (key, size) in [("op-over", 1_048_577), ("op-far-over", 3 << 20)] {
        let refused = caller.create(key, &project_of_size(size)).await;
        assert_eq!(refused.status, 413, "{size} bytes");
        assert_eq!(refused.api_code(), "payload_too_large");
        assert_eq!(refused.header("content-type"), Some(JSON_API));
    }
    assert_eq!(server.ledger().total_writes_executed(), 1);
}

#[tokio::test]
async fn refuses_a_body_over_a_configured_limit() {
    let limits = Limits {
        api_body_limit: 256,
        ..Limits::default()
    };
    let server = MockServer::builder().limits(limits).start().await.unwrap();
    let caller = Caller::demo(&server).await;
    assert_eq!(
        caller.create("op-1", &project_of_size(256)).await.status,
        201
    );
    assert_eq!(
        caller.create("op-2", &project_of_size(257)).await.status,
        413
    );
    assert_eq!(server.ledger().total_writes_executed(), 1);
}

#[tokio::test]
async fn refuses_an_invalid_document_with_422_and_replays_the_refusal() {
    let (server, caller) = demo().await;
    let invalid = [
        "not json",
        r#"{"data":{"type":"tasks","attributes":{}}}"#,
        r#"{"data":{"type":"projects","attributes":"flat"}}"#,
    ];
    for (i, body) in invalid.iter().enumerate() {
        let key = format!("op-{i}");
        let refused = caller.create(&key, body).await;
        assert_eq!(refused.status, 422, "{body}");
        assert_eq!(refused.api_code(), "validation_failed");
        let replay = caller.create(&key, body).await;
        assert!(replay.replayed(), "a 4xx is retained");
        assert_eq!(replay.status, 422);
        assert_eq!(replay.body, refused.body);
    }
    assert_eq!(server.ledger().total_writes_executed(), 0);
}

#[tokio::test]
async fn executes_every_write_without_a_key() {
    let (server, caller) = demo().await;
    for _ in 0..2 {
        let created = caller
            .write(Method::POST, PROJECTS, None, &project("apollo"))
            .await;
        assert_eq!(created.status, 201);
        assert!(!created.replayed());
    }
    assert_eq!(server.ledger().total_writes_executed(), 2);
    assert_eq!(caller.count(PROJECTS).await, 2);
}
