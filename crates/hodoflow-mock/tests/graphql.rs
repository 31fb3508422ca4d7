//! GraphQL `factQuery`: the caller's written resources, and parse, validation
//! and complexity errors as 400 or (configured) 200.

mod support;

use hodoflow_mock::{Limits, MockServer};
use serde_json::{Value, json};
use support::{Caller, OTHER_CLIENT, Reply, demo, project, two_orgs};

const FACTS: &str = r#"{ factQuery(type: "projects") { id attributes } }"#;
const FACTS_BY_VARIABLE: &str =
    "query Facts($kind: String!) { factQuery(type: $kind) { id type attributes } }";

fn facts(reply: &Reply) -> Vec<Value> {
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    reply.json()["data"]["factQuery"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn returns_the_facts_written_through_json_api_with_the_selected_fields() {
    let (server, caller) = demo().await;
    assert!(facts(&caller.graphql(FACTS, json!({})).await).is_empty());
    let apollo = caller.create("op-1", &project("apollo")).await.data_id();
    let gemini = caller.create("op-2", &project("gemini")).await.data_id();

    let mut found = facts(&caller.graphql(FACTS, json!({})).await);
    found.sort_by_key(|f| f["attributes"]["name"].as_str().unwrap().to_owned());
    assert_eq!(
        found,
        [
            json!({"id": apollo, "attributes": {"name": "apollo"}}),
            json!({"id": gemini, "attributes": {"name": "gemini"}}),
        ]
    );
    let by_variable = facts(
        &caller
            .graphql(FACTS_BY_VARIABLE, json!({"kind": "projects"}))
            .await,
    );
    assert_eq!(by_variable.len(), 2);
    assert!(by_variable.iter().all(|f| f["type"] == "projects"));
    assert!(
        facts(
            &caller
                .graphql(FACTS_BY_VARIABLE, json!({"kind": "tasks"}))
                .await
        )
        .is_empty()
    );
    let ledger = server.ledger();
    assert_eq!(ledger.total_writes_executed(), 2, "queries execute nothing");
    assert_eq!(ledger.requests_to("POST", "/api/graphql").len(), 4);
}

#[tokio::test]
async fn returns_only_the_callers_organizations_facts() {
    let server = two_orgs(MockServer::builder()).start().await.unwrap();
    let demo = Caller::demo(&server).await;
    let other = Caller::of(&server, OTHER_CLIENT.0, OTHER_CLIENT.1).await;
    demo.create("op-1", &project("apollo")).await;
    assert!(facts(&other.graphql(FACTS, json!({})).await).is_empty());
    assert_eq!(facts(&demo.graphql(FACTS, json!({})).await).len(), 1);
}

#[tokio::test]
async fn is_read_only_and_never_replays_an_idempotency_key() {
    let (server, caller) = demo().await;
    let body = json!({"query": FACTS});
    let ask = || {
        let request = caller.request(reqwest::Method::POST, "/api/graphql");
        support::send(request.header("idempotency-key", "q-1").json(&body))
    };
    let before = ask().await;
    caller.create("op-1", &project("apollo")).await;
    let after = ask().await;
    assert!(!after.replayed());
    assert_eq!(facts(&before).len(), 0);
    assert_eq!(facts(&after).len(), 1);
    assert_eq!(server.ledger().total_writes_executed(), 1);
}

/// The documents that must fail, with the code each one fails with.
fn broken_documents() -> Vec<(&'static str, Value, &'static str)> {
    let parse = "GRAPHQL_PARSE_FAILED";
    let invalid = "GRAPHQL_VALIDATION_FAILED";
    vec![
        (r#"{ factQuery(type: "projects") { id }"#, json!({}), parse),
        ("mutation { deleteEverything }", json!({}), parse),
        (
            r#"{ factQuery(type: "projects") { id } } }"#,
            json!({}),
            parse,
        ),
        (
            r#"{ factQuery(type: "projects") { id secret } }"#,
            json!({}),
            invalid,
        ),
        ("{ users { id } }", json!({}), invalid),
        (r#"{ factQuery(type: "projects") }"#, json!({}), invalid),
        ("{ factQuery { id } }", json!({}), invalid),
        (FACTS_BY_VARIABLE, json!({}), invalid),
        (
            r#"{ factQuery(type: "projects") { id id id id id id } }"#,
            json!({}),
            "QUERY_COMPLEXITY_EXCEEDED",
        ),
    ]
}

fn assert_graphql_error(reply: &Reply, status: u16, code: &str) {
    assert_eq!(reply.status, status, "{code}: {:?}", reply.body);
    let error = &reply.json()["errors"][0];
    assert_eq!(error["extensions"]["code"], code);
    assert!(!error["message"].as_str().unwrap().is_empty());
    assert!(reply.json().get("data").is_none());
}

/// A server whose documents may select at most six fields, answering errors with `status`.
async fn strict_server(status: u16) -> MockServer {
    let limits = Limits {
        graphql_max_fields: 6,
        graphql_error_status: status,
        ..Limits::default()
    };
    MockServer::builder().limits(limits).start().await.unwrap()
}

async fn assert_errors_answered_with(status: u16) {
    let server = strict_server(status).await;
    let caller = Caller::demo(&server).await;
    for (query, variables, code) in broken_documents() {
        assert_graphql_error(&caller.graphql(query, variables).await, status, code);
    }
    let not_json = caller
        .request(reqwest::Method::POST, "/api/graphql")
        .body("query=x");
    assert_graphql_error(
        &support::send(not_json).await,
        status,
        "GRAPHQL_PARSE_FAILED",
    );
}

#[tokio::test]
async fn answers_parse_validation_and_complexity_errors_with_400() {
    assert_errors_answered_with(400).await;
}

#[tokio::test]
async fn answers_the_same_errors_with_200_when_configured() {
    assert_errors_answered_with(200).await;
}

#[tokio::test]
async fn allows_a_document_at_the_complexity_limit() {
    let server = strict_server(400).await;
    let caller = Caller::demo(&server).await;
    let six_fields = r#"{ factQuery(type: "projects") { id id id id id } }"#;
    assert_eq!(caller.graphql(six_fields, json!({})).await.status, 200);
}

#[tokio::test]
async fn refuses_a_document_over_the_default_complexity_of_50_fields() {
    let (_server, caller) = demo().await;
    let fields = |n: usize| {
        format!(
            r#"{{ factQuery(type: "projects") {{ {} }} }}"#,
            "id ".repeat(n)
        )
    };
    assert_eq!(caller.graphql(&fields(49), json!({})).await.status, 200);
    assert_graphql_error(
        &caller.graphql(&fields(50), json!({})).await,
        400,
        "QUERY_COMPLEXITY_EXCEEDED",
    );
}
