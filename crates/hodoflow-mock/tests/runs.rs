//! Workflow runs started by accepted deliveries: queued -> running -> a
//! terminal state on the server's clock, readable by their own organization.

mod support;

use std::time::Duration;

use hodoflow_mock::{Limits, ManualClock, MockServer, RunOutcome, TriggerSeed};
use support::{Caller, JSON_API, OTHER_CLIENT, SECOND, clocked, two_orgs};

const QUEUED_FOR: Duration = Duration::from_secs(10);
const RUNNING_FOR: Duration = Duration::from_secs(20);

/// A server on a manual clock whose runs stay queued 10 s and run 20 s, the
/// demo trigger ending its runs in `outcome`.
async fn server_with(outcome: RunOutcome) -> (ManualClock, MockServer) {
    let limits = Limits {
        run_queued_for: QUEUED_FOR,
        run_running_for: RUNNING_FOR,
        ..Limits::default()
    };
    let (clock, builder) = clocked();
    let builder = builder
        .limits(limits)
        .trigger(TriggerSeed::demo().run_outcome(outcome));
    (clock, builder.start().await.unwrap())
}

fn run_path(id: &str) -> String {
    format!("/api/json/v1/workflow_runs/{id}")
}

async fn state_of(caller: &Caller, id: &str) -> String {
    let run = caller.get(&run_path(id)).await;
    assert_eq!(run.status, 200);
    run.json()["data"]["attributes"]["state"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Delivers once and follows the run to `outcome`, one second either side of
/// each change of state.
async fn assert_run_ends(outcome: RunOutcome) {
    let (clock, server) = server_with(outcome).await;
    let caller = Caller::demo(&server).await;
    let run_id = caller.deliver_keyed("evt-1").await.run_id().unwrap();
    assert_eq!(
        server.ledger().runs_for_delivery("evt-1"),
        std::slice::from_ref(&run_id)
    );

    assert_eq!(state_of(&caller, &run_id).await, "queued");
    clock.advance(QUEUED_FOR - SECOND);
    assert_eq!(state_of(&caller, &run_id).await, "queued");
    clock.advance(SECOND);
    assert_eq!(state_of(&caller, &run_id).await, "running");
    clock.advance(RUNNING_FOR - SECOND);
    assert_eq!(state_of(&caller, &run_id).await, "running");
    clock.advance(SECOND);
    assert_eq!(state_of(&caller, &run_id).await, outcome.as_str());
    clock.advance(Duration::from_secs(600));
    assert_eq!(
        state_of(&caller, &run_id).await,
        outcome.as_str(),
        "terminal"
    );
}

#[tokio::test]
async fn a_run_moves_from_queued_through_running_to_succeeded() {
    assert_run_ends(RunOutcome::Succeeded).await;
}

#[tokio::test]
async fn a_run_of_a_failing_workflow_ends_failed() {
    assert_run_ends(RunOutcome::Failed).await;
}

#[tokio::test]
async fn a_run_of_a_cancelled_workflow_ends_cancelled() {
    assert_run_ends(RunOutcome::Cancelled).await;
}

#[tokio::test]
async fn a_run_is_a_json_api_document_with_its_creation_and_last_change_times() {
    let (clock, server) = server_with(RunOutcome::Succeeded).await;
    let caller = Caller::demo(&server).await;
    let run_id = caller.deliver_keyed("evt-1").await.run_id().unwrap();
    clock.advance(QUEUED_FOR + SECOND);

    let run = caller.get(&run_path(&run_id)).await;
    assert_eq!(run.header("content-type"), Some(JSON_API));
    let data = &run.json()["data"];
    assert_eq!(data["type"], "workflow_runs");
    assert_eq!(data["id"], run_id.as_str());
    // The clock starts at 2026-02-17T00:00:00Z; the run turned running 10 s later.
    assert_eq!(data["attributes"]["created_at"], "2026-02-17T00:00:00Z");
    assert_eq!(data["attributes"]["updated_at"], "2026-02-17T00:00:10Z");
}

#[tokio::test]
async fn another_organizations_run_and_an_unknown_run_are_not_found() {
    let server = two_orgs(MockServer::builder()).start().await.unwrap();
    let demo = Caller::demo(&server).await;
    let other = Caller::of(&server, OTHER_CLIENT.0, OTHER_CLIENT.1).await;
    let run_id = demo.deliver_keyed("evt-1").await.run_id().unwrap();

    let hidden = other.get(&run_path(&run_id)).await;
    assert_eq!(hidden.status, 404);
    assert_eq!(hidden.api_code(), "not_found");
    let unknown = demo
        .get(&run_path("00000000-0000-4000-8000-000000000000"))
        .await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.api_code(), "not_found");
    assert_eq!(demo.get(&run_path(&run_id)).await.status, 200);
}
