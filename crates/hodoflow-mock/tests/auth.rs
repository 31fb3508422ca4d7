//! The token exchange, and expired, unknown, missing and under-scoped bearer
//! tokens as each surface answers them.

mod support;

use std::time::Duration;

use hodoflow_mock::{
    ClientSeed, DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANIZATION, Limits, MockServer, Scope,
};
use reqwest::Method;
use serde_json::json;
use support::{
    Caller, DAY, HOUR, PROJECTS, Reply, SECOND, clocked, credentials, exchange, project, start,
};

const FACTS: &str = "{ factQuery(type: \"projects\") { id } }";

#[tokio::test]
async fn grants_a_bearer_token_with_every_scope_and_the_ttl_in_the_body() {
    let server = start().await;
    let granted = exchange(&server, &credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)).await;
    assert_eq!(granted.status, 200);
    let body = granted.json();
    assert!(!body["access_token"].as_str().unwrap().is_empty());
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 3600);
    assert_eq!(body["scope"], "api_read api_write webhooks");
    let ledger = server.ledger();
    assert_eq!(ledger.tokens_issued(), 1);
    assert_eq!(ledger.exchanges()[0].client_id, DEMO_CLIENT_ID);
    assert!(ledger.exchanges()[0].granted);
}

#[tokio::test]
async fn grants_the_configured_token_ttl() {
    let limits = Limits {
        token_ttl: Duration::from_secs(90),
        ..Limits::default()
    };
    let server = MockServer::builder().limits(limits).start().await.unwrap();
    let granted = exchange(&server, &credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)).await;
    assert_eq!(granted.json()["expires_in"], 90);
}

#[tokio::test]
async fn grants_only_the_requested_subset_of_scopes() {
    let server = start().await;
    let mut form = credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET);
    form.push(("scope", "api_read webhooks"));
    let granted = exchange(&server, &form).await;
    assert_eq!(granted.status, 200);
    assert_eq!(granted.json()["scope"], "api_read webhooks");

    let reader = Caller::scoped(&server, "api_read").await;
    assert_eq!(reader.get(PROJECTS).await.status, 200);
    let write = reader.create("op-1", &project("a")).await;
    assert_eq!(write.status, 403);
    assert_eq!(server.ledger().total_writes_executed(), 0);
}

#[tokio::test]
async fn refuses_an_unknown_client_or_a_wrong_secret_with_invalid_client() {
    let server = start().await;
    for (id, secret) in [
        (DEMO_CLIENT_ID, "wrong-secret"),
        ("nobody", DEMO_CLIENT_SECRET),
    ] {
        let refused = exchange(&server, &credentials(id, secret)).await;
        assert_eq!(refused.status, 401);
        assert_eq!(refused.json(), json!({"error": "invalid_client"}));
    }
    let mut no_secret = credentials(DEMO_CLIENT_ID, "");
    no_secret.pop();
    assert_eq!(exchange(&server, &no_secret).await.status, 401);
    let ledger = server.ledger();
    assert_eq!(ledger.exchanges().len(), 3);
    assert_eq!(ledger.tokens_issued(), 0);
}

#[tokio::test]
async fn refuses_a_grant_other_than_client_credentials() {
    let server = start().await;
    let mut password = credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET);
    password[0] = ("grant_type", "password");
    let mut missing = credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET);
    missing.remove(0);
    for form in [password, missing] {
        let refused = exchange(&server, &form).await;
        assert_eq!(refused.status, 400);
        assert_eq!(refused.json(), json!({"error": "unsupported_grant_type"}));
    }
    assert_eq!(server.ledger().tokens_issued(), 0);
}

#[tokio::test]
async fn refuses_a_body_that_is_not_a_form_with_invalid_request() {
    let server = start().await;
    let url = format!("{}/oauth/token", server.base_url());
    let body = json!({"grant_type": "client_credentials", "client_id": DEMO_CLIENT_ID});
    let refused = support::send(support::http().post(url).json(&body)).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json(), json!({"error": "invalid_request"}));
}

#[tokio::test]
async fn refuses_an_unknown_scope_or_one_the_client_may_not_have_with_invalid_scope() {
    let reader =
        ClientSeed::new("reader", "reader-secret", DEMO_ORGANIZATION).scopes(&[Scope::ApiRead]);
    let server = MockServer::builder()
        .client(ClientSeed::demo())
        .client(reader)
        .start()
        .await
        .unwrap();
    let asking = |id: &'static str, secret: &'static str, scope: &'static str| {
        let mut form = credentials(id, secret);
        form.push(("scope", scope));
        form
    };
    for form in [
        asking(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, "admin"),
        asking(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, "api_read admin"),
        asking("reader", "reader-secret", "webhooks"),
        asking("reader", "reader-secret", "api_read api_write"),
    ] {
        let refused = exchange(&server, &form).await;
        assert_eq!(refused.status, 400, "{form:?}");
        assert_eq!(refused.json(), json!({"error": "invalid_scope"}));
    }
    let granted = exchange(&server, &credentials("reader", "reader-secret")).await;
    assert_eq!(granted.json()["scope"], "api_read");
    assert_eq!(server.ledger().tokens_issued(), 1);
}

fn assert_api_unauthorized(reply: &Reply, title: &str) {
    assert_eq!(reply.status, 401);
    assert_eq!(reply.api_code(), "unauthorized");
    assert_eq!(reply.json()["errors"][0]["status"], "401");
    assert_eq!(reply.api_title(), title);
}

fn assert_api_expired(reply: &Reply) {
    assert_api_unauthorized(reply, "Access token expired");
    assert!(
        reply
            .header("www-authenticate")
            .unwrap()
            .contains(r#"error="invalid_token""#)
    );
}

#[tokio::test]
async fn json_api_tells_an_expired_token_from_an_unknown_or_missing_one() {
    let (clock, builder) = clocked();
    let server = builder.start().await.unwrap();
    let caller = Caller::demo(&server).await;
    clock.advance(HOUR - SECOND);
    assert_eq!(
        caller.get(PROJECTS).await.status,
        200,
        "still valid one second before the TTL"
    );
    clock.advance(SECOND);

    assert_api_expired(&caller.get(PROJECTS).await);
    let write = caller.create("op-1", &project("a")).await;
    assert_api_expired(&write);
    assert_eq!(server.ledger().total_writes_executed(), 0);

    let unknown = caller.with_token("hft_never_issued").get(PROJECTS).await;
    assert_api_unauthorized(&unknown, "Invalid access token");
    assert!(unknown.header("www-authenticate").is_none());
    let missing =
        support::send(support::http().get(format!("{}{PROJECTS}", server.base_url()))).await;
    assert_api_unauthorized(&missing, "Missing bearer token");
}

#[tokio::test]
async fn graphql_and_workflow_runs_answer_an_expired_token_in_the_json_api_form() {
    let (clock, builder) = clocked();
    let server = builder.start().await.unwrap();
    let caller = Caller::demo(&server).await;
    let run_id = caller.deliver_keyed("evt-1").await.run_id().unwrap();
    clock.advance(HOUR);
    assert_api_expired(&caller.graphql(FACTS, json!({})).await);
    assert_api_expired(
        &caller
            .get(&format!("/api/json/v1/workflow_runs/{run_id}"))
            .await,
    );
    let unknown = caller.with_token("hft_never_issued");
    assert_api_unauthorized(
        &unknown.graphql(FACTS, json!({})).await,
        "Invalid access token",
    );
}

#[tokio::test]
async fn webhooks_answer_missing_credentials_when_expired_or_missing_and_unauthorized_when_unknown()
{
    let (clock, builder) = clocked();
    let server = builder.start().await.unwrap();
    let caller = Caller::demo(&server).await;
    clock.advance(HOUR);

    let expired = caller.deliver_keyed("evt-1").await;
    assert_eq!(expired.status, 401);
    assert_eq!(expired.json(), json!({"error": "missing_credentials"}));
    let missing = support::send(
        support::http()
            .post(server.webhook_url(hodoflow_mock::DEMO_TRIGGER_TOKEN))
            .body("{}"),
    )
    .await;
    assert_eq!(missing.status, 401);
    assert_eq!(missing.json(), json!({"error": "missing_credentials"}));
    let unknown = caller
        .with_token("hft_never_issued")
        .deliver_keyed("evt-1")
        .await;
    assert_eq!(unknown.status, 401);
    assert_eq!(unknown.json(), json!({"error": "Unauthorized"}));
    assert_eq!(server.ledger().total_runs(), 0);

    let mut renewed = caller.clone();
    renewed.refresh().await;
    assert_eq!(
        renewed.deliver_keyed("evt-1").await.delivery_status(),
        "accepted"
    );
}

#[tokio::test]
async fn forgets_an_expired_token_after_the_memory_window_and_then_calls_it_unknown() {
    let (clock, builder) = clocked();
    let server = builder.start().await.unwrap();
    let caller = Caller::demo(&server).await;
    clock.advance(HOUR + DAY - SECOND);
    assert_api_expired(&caller.get(PROJECTS).await);
    clock.advance(SECOND);
    assert_api_unauthorized(&caller.get(PROJECTS).await, "Invalid access token");
    assert_eq!(
        caller.deliver_keyed("evt-1").await.webhook_error(),
        "Unauthorized"
    );
}

fn assert_api_forbidden(reply: &Reply) {
    assert_eq!(reply.status, 403);
    assert_eq!(reply.api_code(), "forbidden");
    assert_eq!(reply.api_title(), "Insufficient scope");
}

#[tokio::test]
async fn refuses_a_token_without_the_surface_scope_with_403() {
    let server = start().await;
    let writer = Caller::demo(&server).await;
    let run_id = writer.deliver_keyed("evt-1").await.run_id().unwrap();

    let hooks_only = Caller::scoped(&server, "webhooks").await;
    assert_api_forbidden(&hooks_only.get(PROJECTS).await);
    assert_api_forbidden(
        &hooks_only
            .get(&format!("/api/json/v1/workflow_runs/{run_id}"))
            .await,
    );
    assert_api_forbidden(&hooks_only.graphql(FACTS, json!({})).await);
    assert_api_forbidden(&hooks_only.create("op-1", &project("a")).await);
    let delete = hooks_only
        .write(Method::DELETE, &format!("{PROJECTS}/x"), Some("op-2"), "")
        .await;
    assert_api_forbidden(&delete);

    let api_only = Caller::scoped(&server, "api_read api_write").await;
    let delivery = api_only.deliver_keyed("evt-2").await;
    assert_eq!(delivery.status, 403);
    assert_eq!(delivery.json(), json!({"error": "Insufficient scope"}));

    let ledger = server.ledger();
    assert_eq!(ledger.total_writes_executed(), 0);
    assert_eq!(ledger.total_runs(), 1);
}

/// `Fault::stated_expires_in` changes what a token answer says of its lifetime, never the
/// token: each one still works for the configured TTL. `Fault::no_expires_in` leaves the field
/// out.
#[tokio::test]
async fn a_token_answer_states_any_expires_in_a_fault_gives_and_the_token_still_works() {
    let server = start().await;
    for stated in [json!(0), json!(-5), json!(1e300), json!("60"), json!(null)] {
        let fault = match &stated {
            serde_json::Value::Null => hodoflow_mock::Fault::no_expires_in(),
            value => hodoflow_mock::Fault::stated_expires_in(value.clone()),
        };
        server.inject(fault.on("POST", "/oauth/token"));
        let granted = exchange(&server, &credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)).await;
        assert_eq!(granted.status, 200, "{stated}");
        let body = granted.json();
        match &stated {
            serde_json::Value::Null => assert!(body.get("expires_in").is_none(), "{body}"),
            value => assert_eq!(&body["expires_in"], value),
        }
        let token = body["access_token"].as_str().unwrap();
        let caller = Caller::demo(&server).await.with_token(token);
        assert_eq!(caller.deliver(&[], "{}").await.status, 202, "{stated}");
    }
    let ledger = server.ledger();
    assert_eq!(
        ledger.tokens_issued(),
        10,
        "5 by the faults, 5 for the callers"
    );
}

/// `Limits::token_ttl` of zero issues tokens that expire at once, for real: the answer says
/// `"expires_in": 0` and the server refuses the token as expired.
#[tokio::test]
async fn a_zero_token_ttl_issues_tokens_that_are_expired_at_once() {
    let limits = Limits {
        token_ttl: Duration::ZERO,
        ..Limits::default()
    };
    let server = MockServer::builder().limits(limits).start().await.unwrap();
    let caller = Caller::demo(&server).await;
    let granted = exchange(&server, &credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)).await;
    assert_eq!(granted.json()["expires_in"], 0);
    let refused = caller.deliver(&[], "{}").await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json(), json!({"error": "missing_credentials"}));
}

/// `Fault::issued_token` chooses the token's text; the token works like any other.
#[tokio::test]
async fn an_issued_token_fault_issues_that_text_as_a_working_token() {
    let server = start().await;
    server.inject(hodoflow_mock::Fault::issued_token("workflow run").on("POST", "/oauth/token"));
    let granted = exchange(&server, &credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)).await;
    assert_eq!(granted.json()["access_token"], "workflow run");
    let caller = Caller::demo(&server).await.with_token("workflow run");
    assert_eq!(caller.deliver(&[], "{}").await.status, 202);
}
