//! JSON:API unsafe writes: one Idempotency-Key and the same bytes on every attempt, so a retry
//! after a lost answer is replayed and the write runs once; the stops of Hodoflow's
//! "Idempotency and retries" never retry.

mod support;

use std::time::Duration;

use bytes::Bytes;
use hodoflow_mock::{Fault, MockServer, Scope};
use hodoflow_retry::{
    Backoff, Error, ErrorKind, HodoflowClient, IdempotencyKey, Response,
    attempt::{AttemptResult, TransportKind},
};
use http::{HeaderMap, HeaderValue, Method};
use serde_json::Value;
use support::{
    JSON_API, PROJECTS, assert_nothing_sent, assert_stopped_at_once, client, eventually, key,
    project, server, statuses,
};
use tokio::task::JoinHandle;

// Every test again over h2c, as over_h2c::<name>.
support::over_h2c!(
    a_lost_write_answer_is_replayed_and_the_write_runs_once,
    every_attempt_sends_the_same_bytes_so_a_retry_after_a_lost_answer_replays_instead_of_conflicting,
    a_lost_delete_answer_is_replayed_as_204_and_the_delete_runs_once,
    a_write_whose_every_answer_is_lost_may_have_run_and_ran_once,
    a_write_that_cannot_connect_is_retried_and_certainly_never_ran,
    idempotency_unavailable_is_retried_with_the_same_key_and_the_write_runs_once,
    a_500_on_every_attempt_stops_after_exactly_max_attempts_with_nothing_written,
    a_token_without_the_write_scope_is_forbidden_after_one_attempt,
    a_write_to_a_missing_resource_is_not_found_after_one_attempt,
    a_key_reused_with_a_different_body_is_a_conflict_after_one_attempt,
    a_key_still_in_progress_stops_after_one_attempt_and_says_it_may_have_run,
    waiting_for_a_key_in_progress_when_opted_in_ends_in_the_replay,
    a_body_over_the_servers_limit_is_payload_too_large_after_one_attempt,
    a_body_that_fails_validation_is_unprocessable_after_one_attempt,
    a_bad_key_is_refused_when_it_is_made_so_nothing_can_be_sent,
    an_authorization_or_idempotency_key_header_from_the_caller_is_refused_and_nothing_is_sent,
    a_read_method_or_a_path_outside_json_api_is_not_a_write_and_nothing_is_sent,
);

/// The ID of the resource in a JSON:API document.
fn id_of(body: &[u8]) -> String {
    let document: Value = serde_json::from_slice(body).expect("a JSON:API document");
    document["data"]["id"]
        .as_str()
        .expect("a resource ID")
        .to_owned()
}

/// Creates a project from `body` once and expects it refused.
async fn refused(client: &HodoflowClient, body: impl Into<Bytes>) -> Error {
    client
        .create(PROJECTS, key("project:refused"), body)
        .send()
        .await
        .expect_err("the write is refused")
}

/// The projects the server holds.
async fn projects(client: &HodoflowClient) -> Vec<Value> {
    let listed: Value = client.get(PROJECTS).send().await.unwrap().json().unwrap();
    listed["data"].as_array().expect("a list").clone()
}

/// Starts creating project `name` under `key` in the background, with an execution that holds the
/// key `millis` long, and returns once the server has it, so a second request meets the key in
/// progress.
async fn start_slow_write(
    server: &MockServer,
    client: &HodoflowClient,
    key: &IdempotencyKey,
    name: &'static str,
    millis: u64,
) -> JoinHandle<hodoflow_retry::Result<Response>> {
    let slow = Fault::slow_execution(Duration::from_millis(millis));
    server.inject(slow.on("POST", JSON_API));
    let first = tokio::spawn({
        let (client, key) = (client.clone(), key.clone());
        async move { client.create(PROJECTS, key, project(name)).send().await }
    });
    eventually("the first write has arrived", || {
        !server.ledger().requests_with_key(key.as_str()).is_empty()
    })
    .await;
    // The key is reserved right after arrival; leave that a margin far below the execution.
    tokio::time::sleep(Duration::from_millis(50)).await;
    first
}

#[tokio::test]
async fn a_lost_write_answer_is_replayed_and_the_write_runs_once() {
    let server = server().await;
    server.inject(Fault::execute_then_close().on("POST", JSON_API));
    let client = client(&server);
    let key = key("project-apollo:create");

    let response = client
        .create(PROJECTS, key.clone(), project("Apollo"))
        .send()
        .await
        .unwrap();

    assert_eq!(response.status().as_u16(), 201);
    assert!(response.replayed());
    assert_eq!(statuses(response.attempts()), [None, Some(201)]);
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed(key.as_str()), 1);
    let sent = ledger.requests_with_key(key.as_str());
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].status, None, "the first answer was lost");

    let again = client
        .create(PROJECTS, key.clone(), project("Apollo"))
        .send()
        .await
        .unwrap();
    assert!(again.replayed());
    assert_eq!(
        again.body(),
        response.body(),
        "the stored answer, byte for byte"
    );
    let stored = projects(&client).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["id"], id_of(response.body()).as_str());
    assert_eq!(server.ledger().writes_executed(key.as_str()), 1);
}

#[tokio::test]
async fn every_attempt_sends_the_same_bytes_so_a_retry_after_a_lost_answer_replays_instead_of_conflicting()
 {
    let server = server().await;
    server.inject(Fault::close_before_execute().on("POST", JSON_API));
    server.inject(Fault::execute_then_close().on("POST", JSON_API));
    // Not canonical JSON: re-serializing it on a retry would change the fingerprint and the
    // server would answer 409 idempotency_key_reused instead of a replay.
    let body = Bytes::from_static(
        b"{ \"data\" : {\"attributes\":{\"tags\":[\"b\",\"a\"],\"name\":\"Gemini\"},  \"type\":\"projects\"} }\n",
    );
    let key = key("project-gemini:create");

    let response = client(&server)
        .create(PROJECTS, key.clone(), body)
        .send()
        .await
        .unwrap();

    assert!(response.replayed());
    assert_eq!(statuses(response.attempts()), [None, None, Some(201)]);
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed(key.as_str()), 1);
    assert_eq!(ledger.requests_with_key(key.as_str()).len(), 3);
}

#[tokio::test]
async fn a_lost_delete_answer_is_replayed_as_204_and_the_delete_runs_once() {
    let server = server().await;
    let client = client(&server);
    let created = client
        .create(PROJECTS, key("project-hermes:create"), project("Hermes"))
        .send()
        .await
        .unwrap();
    let path = format!("{PROJECTS}/{}", id_of(created.body()));
    server.inject(Fault::execute_then_close().on("DELETE", JSON_API));
    let key = key("project-hermes:delete");

    let response = client
        .write(Method::DELETE, &path, key.clone(), Bytes::new())
        .send()
        .await
        .unwrap();

    assert_eq!(response.status().as_u16(), 204);
    assert!(response.replayed());
    assert_eq!(statuses(response.attempts()), [None, Some(204)]);
    assert_eq!(server.ledger().writes_executed(key.as_str()), 1);
    assert!(projects(&client).await.is_empty());
}

#[tokio::test]
async fn a_write_whose_every_answer_is_lost_may_have_run_and_ran_once() {
    let server = server().await;
    server.inject(Fault::execute_then_close().on("POST", JSON_API).times(100));
    let key = key("project-nyx:create");

    let error = support::client_with(&server, support::budget(3))
        .create(PROJECTS, key.clone(), project("Nyx"))
        .send()
        .await
        .unwrap_err();

    support::assert_every_answer_lost(&error, 3);
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed(key.as_str()), 1, "it did run, once");
    assert_eq!(ledger.requests_with_key(key.as_str()).len(), 3);
}

#[tokio::test]
async fn a_write_that_cannot_connect_is_retried_and_certainly_never_ran() {
    // A port nothing listens on any more: every connection is refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let client = HodoflowClient::builder(base)
        .exchanger(support::Forged)
        .backoff(support::fast_backoff())
        .budget(support::budget(3))
        .build()
        .unwrap();

    let error = client
        .create(PROJECTS, key("project-eos:create"), project("Eos"))
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::Transport, "{error}");
    assert!(!error.may_have_run(), "a refused connection sent nothing");
    assert_eq!(error.attempts().len(), 3);
    for attempt in error.attempts() {
        let refused = AttemptResult::Transport(TransportKind::Connect);
        assert_eq!(attempt.result(), refused, "{attempt}");
    }
}

#[tokio::test]
async fn idempotency_unavailable_is_retried_with_the_same_key_and_the_write_runs_once() {
    let server = server().await;
    server.inject(Fault::idempotency_unavailable().on("POST", JSON_API));
    let key = key("project-artemis:create");

    let response = client(&server)
        .create(PROJECTS, key.clone(), project("Artemis"))
        .send()
        .await
        .unwrap();

    assert_eq!(statuses(response.attempts()), [Some(503), Some(201)]);
    assert!(
        !response.replayed(),
        "nothing was written by the refused attempt"
    );
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed(key.as_str()), 1);
    assert_eq!(ledger.requests_with_key(key.as_str()).len(), 2);
}

#[tokio::test]
async fn a_500_on_every_attempt_stops_after_exactly_max_attempts_with_nothing_written() {
    let server = server().await;
    server.inject(Fault::fail_execution(500).on("POST", JSON_API).times(100));
    let key = key("project-vulcan:create");

    let error = support::client_with(&server, support::budget(3))
        .create(PROJECTS, key.clone(), project("Vulcan"))
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::Server, "{error}");
    assert_eq!(statuses(error.attempts()), [Some(500); 3]);
    assert!(!error.may_have_run(), "every attempt got a definite answer");
    assert!(error.is_retryable());
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed(key.as_str()), 0);
    assert_eq!(ledger.requests_with_key(key.as_str()).len(), 3);
}

#[tokio::test]
async fn a_token_without_the_write_scope_is_forbidden_after_one_attempt() {
    let (server, client) = support::scoped(&[Scope::ApiRead]).await;

    let error = refused(&client, project("Ceres")).await;

    assert_stopped_at_once(&error, ErrorKind::Forbidden, &server);
    assert_eq!(server.ledger().total_writes_executed(), 0);
}

#[tokio::test]
async fn a_write_to_a_missing_resource_is_not_found_after_one_attempt() {
    let server = server().await;
    let body = r#"{"data":{"type":"projects","id":"missing","attributes":{"name":"Juno"}}}"#;

    let error = client(&server)
        .write(
            Method::PATCH,
            &format!("{PROJECTS}/missing"),
            key("project-juno:rename"),
            body,
        )
        .send()
        .await
        .unwrap_err();

    assert_stopped_at_once(&error, ErrorKind::NotFound, &server);
    assert_eq!(server.ledger().total_writes_executed(), 0);
}

#[tokio::test]
async fn a_key_reused_with_a_different_body_is_a_conflict_after_one_attempt() {
    let server = server().await;
    let client = client(&server);
    let key = key("project-minerva:create");
    client
        .create(PROJECTS, key.clone(), project("Minerva"))
        .send()
        .await
        .unwrap();

    let error = client
        .create(PROJECTS, key.clone(), project("Minerva II"))
        .send()
        .await
        .unwrap_err();

    assert_stopped_at_once(&error, ErrorKind::KeyReused, &server);
    assert_eq!(server.ledger().writes_executed(key.as_str()), 1);
}

#[tokio::test]
async fn a_key_still_in_progress_stops_after_one_attempt_and_says_it_may_have_run() {
    let server = server().await;
    let client = client(&server);
    let key = key("project-janus:create");
    let first = start_slow_write(&server, &client, &key, "Janus", 500).await;

    let error = client
        .create(PROJECTS, key.clone(), project("Janus"))
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::InProgress, "{error}");
    assert_eq!(statuses(error.attempts()), [Some(409)]);
    assert!(error.may_have_run(), "the first request may still commit");
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status().as_u16(), 201);
    assert_eq!(server.ledger().writes_executed(key.as_str()), 1);
}

#[tokio::test]
async fn waiting_for_a_key_in_progress_when_opted_in_ends_in_the_replay() {
    let server = server().await;
    // Waits of 0 to 100 ms between polls of the key, 50 attempts at most: seconds of room.
    let backoff = Backoff::new()
        .base(Duration::from_millis(100))
        .cap(Duration::from_millis(100));
    let client = support::demo(support::builder(&server).backoff(backoff));
    let key = key("project-vesta:create");
    let first = start_slow_write(&server, &client, &key, "Vesta", 300).await;

    let waited = client
        .create(PROJECTS, key.clone(), project("Vesta"))
        .budget(support::budget(50).wait_for_in_progress(true))
        .send()
        .await
        .unwrap();

    let first = first.await.unwrap().unwrap();
    assert!(waited.replayed());
    assert_eq!(waited.status().as_u16(), 201);
    assert_eq!(waited.body(), first.body());
    let seen = statuses(waited.attempts());
    let (last, waits) = seen.split_last().unwrap();
    assert_eq!(*last, Some(201));
    assert!(
        !waits.is_empty() && waits.iter().all(|s| *s == Some(409)),
        "{seen:?}"
    );
    assert_eq!(server.ledger().writes_executed(key.as_str()), 1);
}

#[tokio::test]
async fn a_body_over_the_servers_limit_is_payload_too_large_after_one_attempt() {
    let server = support::server_where(|limits| limits.api_body_limit = 16).await;

    let error = refused(&client(&server), project("Atlas")).await;

    assert_stopped_at_once(&error, ErrorKind::PayloadTooLarge, &server);
    assert_eq!(server.ledger().total_writes_executed(), 0);
}

#[tokio::test]
async fn a_body_that_fails_validation_is_unprocessable_after_one_attempt() {
    let server = server().await;

    let error = refused(&client(&server), r#"{"data":{"type":"users"}}"#).await;

    assert_stopped_at_once(&error, ErrorKind::Unprocessable, &server);
    assert_eq!(server.ledger().total_writes_executed(), 0);
}

#[tokio::test]
async fn a_bad_key_is_refused_when_it_is_made_so_nothing_can_be_sent() {
    let server = server().await;

    for bad in [
        String::new(),
        "has a space".to_owned(),
        "k".repeat(256),
        "ünicode".to_owned(),
        "tab\there".to_owned(),
    ] {
        let error = IdempotencyKey::new(&bad).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{bad:?}");
        assert!(error.attempts().is_empty());
    }
    assert!(IdempotencyKey::new("k".repeat(255)).is_ok());
    assert!(server.ledger().requests().is_empty());
}

#[tokio::test]
async fn an_authorization_or_idempotency_key_header_from_the_caller_is_refused_and_nothing_is_sent()
{
    let server = server().await;
    let client = client(&server);

    for name in ["authorization", "idempotency-key"] {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_static("Bearer hijack"));
        let error = client
            .create(PROJECTS, key("project-loki:create"), project("Loki"))
            .headers(headers)
            .send()
            .await
            .unwrap_err();
        assert_nothing_sent(&error, ErrorKind::InvalidInput, &server);
    }
}

#[tokio::test]
async fn a_read_method_or_a_path_outside_json_api_is_not_a_write_and_nothing_is_sent() {
    let server = server().await;
    let client = client(&server);

    let as_get = client
        .write(Method::GET, PROJECTS, key("x"), project("X"))
        .send()
        .await
        .unwrap_err();
    let outside = client
        .create("/api/v1/projects", key("x"), project("X"))
        .send()
        .await
        .unwrap_err();

    assert_nothing_sent(&as_get, ErrorKind::InvalidInput, &server);
    assert_nothing_sent(&outside, ErrorKind::InvalidInput, &server);
}
