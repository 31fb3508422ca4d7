//! JSON:API resources: reads of what was written, PUT, PATCH and DELETE
//! semantics, 404s, isolation between organizations, and the per-credential
//! rate budget.

mod support;

use hodoflow_mock::{Limits, MockServer};
use reqwest::Method;
use serde_json::json;
use support::{
    Caller, JSON_API, MINUTE, OTHER_CLIENT, PROJECTS, Reply, SECOND, clocked, demo, project,
    project_update, two_orgs,
};

#[tokio::test]
async fn reads_back_what_was_written_in_the_list_and_by_id() {
    let (server, caller) = demo().await;
    let apollo = caller.create("op-1", &project("apollo")).await.data_id();
    let gemini = caller.create("op-2", &project("gemini")).await.data_id();

    let listed = caller.get(PROJECTS).await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.header("content-type"), Some(JSON_API));
    let mut names: Vec<(String, String)> = listed.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["type"], "projects");
            (
                r["id"].as_str().unwrap().to_owned(),
                r["attributes"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    names.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        names,
        [
            (apollo.clone(), "apollo".to_owned()),
            (gemini, "gemini".to_owned())
        ]
    );

    let one = caller.get(&format!("{PROJECTS}/{apollo}")).await;
    assert_eq!(one.status, 200);
    assert_eq!(
        one.json(),
        json!({"data": {"type": "projects", "id": apollo, "attributes": {"name": "apollo"}}})
    );
    assert_eq!(
        caller.get("/api/json/v1/tasks").await.json(),
        json!({"data": []})
    );
    let ledger = server.ledger();
    assert_eq!(ledger.total_writes_executed(), 2, "reads execute nothing");
    assert_eq!(ledger.requests_to("GET", PROJECTS).len(), 2);
}

async fn attributes_of(caller: &Caller, path: &str) -> serde_json::Value {
    caller.get(path).await.json()["data"]["attributes"].clone()
}

#[tokio::test]
async fn patch_merges_attributes_and_put_replaces_them() {
    let (server, caller) = demo().await;
    let created = caller
        .create(
            "op-1",
            r#"{"data":{"type":"projects","attributes":{"name":"apollo","color":"red"}}}"#,
        )
        .await;
    let id = created.data_id();
    let path = format!("{PROJECTS}/{id}");

    let patched = caller
        .write(
            Method::PATCH,
            &path,
            Some("op-2"),
            &project_update(&id, r#"{"color":"blue"}"#),
        )
        .await;
    assert_eq!(patched.status, 200);
    assert_eq!(
        patched.json()["data"]["attributes"],
        json!({"name": "apollo", "color": "blue"})
    );
    assert_eq!(
        attributes_of(&caller, &path).await,
        json!({"name": "apollo", "color": "blue"})
    );

    let put = caller
        .write(
            Method::PUT,
            &path,
            Some("op-3"),
            &project_update(&id, r#"{"name":"gemini"}"#),
        )
        .await;
    assert_eq!(put.status, 200);
    assert_eq!(
        attributes_of(&caller, &path).await,
        json!({"name": "gemini"})
    );
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed("op-2"), 1);
    assert_eq!(ledger.writes_executed("op-3"), 1);
}

#[tokio::test]
async fn deletes_with_204_then_the_resource_is_gone_and_the_delete_replays() {
    let (server, caller) = demo().await;
    let (_, path) = caller.create_project("op-1", "apollo").await;

    let deleted = caller.write(Method::DELETE, &path, Some("op-2"), "").await;
    assert_eq!(deleted.status, 204);
    assert!(deleted.body.is_empty());
    let missing = caller.get(&path).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.api_code(), "not_found");

    let replay = caller.write(Method::DELETE, &path, Some("op-2"), "").await;
    assert_eq!(replay.status, 204);
    assert!(replay.replayed());
    let again = caller.write(Method::DELETE, &path, Some("op-3"), "").await;
    assert_eq!(again.status, 404);
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed("op-2"), 1);
    assert_eq!(ledger.writes_executed("op-3"), 0);
}

fn assert_not_found(reply: &Reply) {
    assert_eq!(reply.status, 404);
    assert_eq!(reply.api_code(), "not_found");
    assert_eq!(reply.header("content-type"), Some(JSON_API));
}

#[tokio::test]
async fn answers_404_for_put_patch_delete_and_get_of_a_missing_resource() {
    let (server, caller) = demo().await;
    let path = format!("{PROJECTS}/no-such-id");
    let body = project_update("no-such-id", r#"{"name":"x"}"#);
    for (i, method) in [Method::PUT, Method::PATCH, Method::DELETE]
        .into_iter()
        .enumerate()
    {
        let key = format!("op-{i}");
        assert_not_found(&caller.write(method, &path, Some(&key), &body).await);
    }
    assert_not_found(&caller.get(&path).await);
    assert_eq!(server.ledger().total_writes_executed(), 0);
}

#[tokio::test]
async fn refuses_an_update_whose_id_differs_from_the_path_with_422() {
    let (server, caller) = demo().await;
    let (_, path) = caller.create_project("op-1", "apollo").await;
    let refused = caller
        .write(
            Method::PUT,
            &path,
            Some("op-2"),
            &project_update("another-id", r#"{"name":"x"}"#),
        )
        .await;
    assert_eq!(refused.status, 422);
    assert_eq!(refused.api_code(), "validation_failed");
    assert_eq!(
        attributes_of(&caller, &path).await,
        json!({"name": "apollo"})
    );
    assert_eq!(server.ledger().writes_executed("op-2"), 0);
}

#[tokio::test]
async fn keeps_each_organizations_resources_apart() {
    let server = two_orgs(MockServer::builder()).start().await.unwrap();
    let demo = Caller::demo(&server).await;
    let other = Caller::of(&server, OTHER_CLIENT.0, OTHER_CLIENT.1).await;
    let (id, path) = demo.create_project("op-1", "apollo").await;

    assert_eq!(other.get(PROJECTS).await.json(), json!({"data": []}));
    assert_not_found(&other.get(&path).await);
    let body = project_update(&id, r#"{"name":"stolen"}"#);
    assert_not_found(&other.write(Method::PATCH, &path, Some("op-2"), &body).await);
    assert_not_found(&other.write(Method::DELETE, &path, Some("op-3"), "").await);
    assert_eq!(attributes_of(&demo, &path).await, json!({"name": "apollo"}));
}

#[tokio::test]
async fn limits_a_credential_with_rate_limited_and_retry_after_until_the_window_ends() {
    let limits = Limits {
        api_rate_limit: Some(3),
        ..Limits::default()
    };
    let (clock, builder) = clocked();
    let server = two_orgs(builder.limits(limits)).start().await.unwrap();
    let caller = Caller::demo(&server).await;
    let other = Caller::of(&server, OTHER_CLIENT.0, OTHER_CLIENT.1).await;
    let run_id = caller.deliver_keyed("evt-1").await.run_id().unwrap();

    assert_eq!(caller.get(PROJECTS).await.status, 200);
    assert_eq!(
        caller
            .graphql("{ factQuery(type: \"projects\") { id } }", json!({}))
            .await
            .status,
        200
    );
    assert_eq!(
        caller
            .get(&format!("/api/json/v1/workflow_runs/{run_id}"))
            .await
            .status,
        200
    );
    let limited = caller.create("op-1", &project("apollo")).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.api_code(), "rate_limited");
    assert_eq!(limited.retry_after_secs(), 60);
    assert_eq!(server.ledger().total_writes_executed(), 0);
    assert_eq!(
        other.get(PROJECTS).await.status,
        200,
        "another credential has its own budget"
    );

    clock.advance(MINUTE - 15 * SECOND);
    assert_eq!(caller.get(PROJECTS).await.retry_after_secs(), 15);
    clock.advance(15 * SECOND);
    assert_eq!(caller.create("op-1", &project("apollo")).await.status, 201);
    assert_eq!(server.ledger().writes_executed("op-1"), 1);
}
