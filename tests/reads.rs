//! Reads: naturally repeatable, so a 5xx or a lost answer is retried with bounded backoff, and a
//! 403 or 404 is not.

mod support;

use hodoflow_mock::{Fault, Scope};
use hodoflow_retry::{ErrorKind, attempt::WaitReason};
use serde_json::Value;
use support::{
    PROJECTS, assert_nothing_sent, assert_stopped_at_once, client, key, project, server, statuses,
};

#[tokio::test]
async fn a_written_resource_reads_back_in_one_attempt() {
    let server = server().await;
    let client = client(&server);
    let created: Value = client
        .create(PROJECTS, key("project-apollo:create"), project("Apollo"))
        .send()
        .await
        .unwrap()
        .json()
        .unwrap();
    let id = created["data"]["id"].as_str().unwrap();
    let path = format!("{PROJECTS}/{id}");

    let response = client.get(&path).send().await.unwrap();

    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.attempts().len(), 1);
    assert!(!response.replayed());
    let read: Value = response.json().unwrap();
    assert_eq!(read["data"]["id"], id);
    assert_eq!(read["data"]["attributes"]["name"], "Apollo");
    let ledger = server.ledger();
    let sent = ledger.requests_to("GET", &path);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].idempotency_key, None, "a read carries no key");
}

#[tokio::test]
async fn a_500_on_a_read_is_retried_after_backoff_and_the_second_attempt_succeeds() {
    let server = server().await;
    server.inject(Fault::respond(500).on("GET", PROJECTS));

    let response = client(&server).get(PROJECTS).send().await.unwrap();

    assert_eq!(statuses(response.attempts()), [Some(500), Some(200)]);
    assert_eq!(response.attempts()[0].wait_reason(), WaitReason::Backoff);
    assert_eq!(server.ledger().requests_to("GET", PROJECTS).len(), 2);
}

#[tokio::test]
async fn a_read_whose_connection_closed_is_retried() {
    let server = server().await;
    server.inject(Fault::close_before_execute().on("GET", PROJECTS));

    let response = client(&server).get(PROJECTS).send().await.unwrap();

    assert_eq!(statuses(response.attempts()), [None, Some(200)]);
    let ledger = server.ledger();
    let sent = ledger.requests_to("GET", PROJECTS);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].status, None);
}

#[tokio::test]
async fn a_missing_resource_is_not_found_after_one_attempt() {
    let server = server().await;

    let error = client(&server)
        .get(&format!("{PROJECTS}/missing"))
        .send()
        .await
        .unwrap_err();

    assert_stopped_at_once(&error, ErrorKind::NotFound, &server);
}

#[tokio::test]
async fn a_token_without_the_read_scope_is_forbidden_after_one_attempt() {
    let (server, client) = support::scoped(&[Scope::Webhooks]).await;

    let error = client.get(PROJECTS).send().await.unwrap_err();

    assert_stopped_at_once(&error, ErrorKind::Forbidden, &server);
}

#[tokio::test]
async fn a_path_that_could_leave_the_base_url_is_refused_and_nothing_is_sent() {
    let server = server().await;
    let client = client(&server);

    for path in [
        "//evil.example/api/json/v1/projects",
        "api/json/v1/projects",
    ] {
        let error = client.get(path).send().await.unwrap_err();
        assert_nothing_sent(&error, ErrorKind::InvalidInput, &server);
    }
}

#[tokio::test]
async fn a_head_is_a_read_retried_after_a_503_without_a_key() {
    let server = server().await;
    server.inject(Fault::respond(503).on("HEAD", PROJECTS));

    let head = client(&server).head(PROJECTS).send().await.unwrap();

    assert_eq!(statuses(head.attempts()), [Some(503), Some(200)]);
    assert!(head.body().is_empty());
    let ledger = server.ledger();
    let sent = ledger.requests_to("HEAD", PROJECTS);
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|request| request.idempotency_key.is_none()));
}
