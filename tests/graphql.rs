//! GraphQL `factQuery`: read-only and keyless; a validation, parse or complexity error is
//! permanent whether it comes as 400 or as 200 with `errors`; 5xx is retried like any read.

mod support;

use hodoflow_mock::Fault;
use hodoflow_retry::{Error, ErrorKind, HodoflowClient};
use serde_json::{Value, json};
use support::{GRAPHQL, PROJECTS, assert_stopped_at_once, client, key, project, server, statuses};

const FACTS: &str = "query Facts($type: String!) { factQuery(type: $type) { id attributes } }";
/// Valid syntax, but `Fact` has no field `secret`.
const INVALID: &str = r#"{ factQuery(type: "projects") { id secret } }"#;
const VALIDATION: &str = "GRAPHQL_VALIDATION_FAILED";

/// Sends `query` once and expects it refused with the GraphQL error `code`.
async fn refused(client: &HodoflowClient, query: &str, code: &str) -> Error {
    let error = client
        .graphql(query, json!({}))
        .send()
        .await
        .expect_err("the document is refused");
    let body: Value = serde_json::from_slice(error.body().expect("an error body")).unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], code, "{body}");
    error
}

#[tokio::test]
async fn a_fact_query_reads_written_resources_without_a_key() {
    let server = server().await;
    let client = client(&server);
    client
        .create(PROJECTS, key("project-apollo:create"), project("Apollo"))
        .send()
        .await
        .unwrap();

    let response = client
        .graphql(FACTS, json!({"type": "projects"}))
        .send()
        .await
        .unwrap();

    assert_eq!(response.attempts().len(), 1);
    let answer: Value = response.json().unwrap();
    assert_eq!(
        answer["data"]["factQuery"][0]["attributes"]["name"],
        "Apollo"
    );
    let ledger = server.ledger();
    let sent = ledger.requests_to("POST", GRAPHQL);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].idempotency_key, None);
}

/// A server answering GraphQL validation errors with `status` refuses [`INVALID`] once.
async fn validation_error_stops_after_one_attempt(status: u16) {
    let server = support::server_where(|limits| limits.graphql_error_status = status).await;

    let error = refused(&client(&server), INVALID, VALIDATION).await;

    assert_stopped_at_once(&error, ErrorKind::GraphQl, &server);
    assert_eq!(error.status().map(|s| s.as_u16()), Some(status));
    assert_eq!(server.ledger().requests_to("POST", GRAPHQL).len(), 1);
}

#[tokio::test]
async fn a_validation_error_as_400_stops_after_one_attempt() {
    validation_error_stops_after_one_attempt(400).await;
}

#[tokio::test]
async fn a_validation_error_as_200_with_errors_stops_after_one_attempt() {
    validation_error_stops_after_one_attempt(200).await;
}

#[tokio::test]
async fn a_parse_or_complexity_error_stops_after_one_attempt() {
    let server = support::server_where(|limits| limits.graphql_max_fields = 2).await;
    let client = client(&server);

    let unparsable = refused(&client, "{ factQuery(type: ", "GRAPHQL_PARSE_FAILED").await;
    assert_stopped_at_once(&unparsable, ErrorKind::GraphQl, &server);

    let wide = r#"{ factQuery(type: "p") { id type attributes } }"#;
    let complex = refused(&client, wide, "QUERY_COMPLEXITY_EXCEEDED").await;
    assert_stopped_at_once(&complex, ErrorKind::GraphQl, &server);
    assert_eq!(server.ledger().requests_to("POST", GRAPHQL).len(), 2);
}

#[tokio::test]
async fn a_503_on_graphql_is_retried_like_a_read() {
    let server = server().await;
    server.inject(Fault::respond(503).on("POST", GRAPHQL));

    let response = client(&server)
        .graphql(FACTS, json!({"type": "projects"}))
        .send()
        .await
        .unwrap();

    assert_eq!(statuses(response.attempts()), [Some(503), Some(200)]);
    let answer: Value = response.json().unwrap();
    assert_eq!(answer["data"]["factQuery"], json!([]));
    assert_eq!(server.ledger().requests_to("POST", GRAPHQL).len(), 2);
}
