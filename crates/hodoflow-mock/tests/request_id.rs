//! `x-request-id` on every answer: successes, errors of every surface, and
//! injected faults that answer.

mod support;

use std::collections::HashSet;

use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, Fault, Limits, MockServer};
use reqwest::Method;
use serde_json::json;
use support::{Caller, PROJECTS, Reply, credentials, exchange, http, project, send};

/// One answer of every kind the server gives.
async fn one_of_everything(server: &MockServer) -> Vec<Reply> {
    let caller = Caller::demo(server).await;
    let base = server.base_url();
    let mut replies = vec![
        exchange(server, &credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)).await,
        exchange(server, &credentials(DEMO_CLIENT_ID, "wrong")).await,
        exchange(server, &[("grant_type", "password")]).await,
        caller.create("op-1", &project("apollo")).await,
        caller.create("op-1", &project("apollo")).await,
        caller.create("op-1", &project("gemini")).await,
        caller.create("op-2", "not json").await,
        caller.create("", &project("apollo")).await,
        caller.create("op-3", &support::json_of_size(300)).await,
        caller
            .write(Method::DELETE, &format!("{PROJECTS}/missing"), None, "")
            .await,
        caller.get(PROJECTS).await,
        caller.with_token("hft_unknown").get(PROJECTS).await,
        caller
            .graphql("{ factQuery(type: \"projects\") { id } }", json!({}))
            .await,
        caller.graphql("{ nope", json!({})).await,
        caller.deliver_keyed("evt-1").await,
        caller.deliver_keyed("evt-1").await,
        caller.deliver(&[], "not json").await,
        caller.deliver(&[], &support::json_of_size(300)).await,
        caller.deliver_keyed("evt-2").await,
        caller
            .with_token("hft_unknown")
            .deliver_keyed("evt-3")
            .await,
        send(caller.delivery("trg_unknown", &[], "{}")).await,
        caller.get("/api/json/v1/workflow_runs/unknown").await,
        send(http().get(format!("{base}/no/such/route"))).await,
        send(http().get(format!("{base}/api/v1/webhooks/x"))).await,
    ];
    server.inject(Fault::respond(503).on("GET", PROJECTS));
    replies.push(caller.get(PROJECTS).await);
    server.inject(Fault::expired_token().on("POST", "/api/v1/webhooks/"));
    replies.push(caller.deliver_keyed("evt-4").await);
    server.inject(Fault::idempotency_unavailable().on("POST", PROJECTS));
    replies.push(caller.create("op-4", &project("apollo")).await);
    replies
}

#[tokio::test]
async fn stamps_a_distinct_x_request_id_on_every_answer_and_records_it() {
    let limits = Limits {
        api_body_limit: 256,
        webhook_body_limit: 256,
        webhook_rate_limit: 4,
        ..Limits::default()
    };
    let server = MockServer::builder().limits(limits).start().await.unwrap();
    let replies = one_of_everything(&server).await;
    let statuses: HashSet<u16> = replies.iter().map(|r| r.status).collect();
    for status in [200, 201, 202, 400, 401, 404, 405, 409, 413, 422, 429, 503] {
        assert!(statuses.contains(&status), "no {status} answer was checked");
    }

    let ledger = server.ledger();
    let mut seen = HashSet::new();
    for reply in &replies {
        let id = reply.request_id();
        assert!(
            !id.is_empty(),
            "a {} answer without x-request-id",
            reply.status
        );
        assert!(seen.insert(id.to_owned()), "x-request-id {id} given twice");
        let record = ledger
            .requests()
            .iter()
            .find(|r| r.request_id == id)
            .unwrap();
        assert_eq!(record.status, Some(reply.status));
    }
}
