//! Following a workflow run: an accepted delivery's run is polled until it ends, with read retries,
//! within a budget of its own.

mod support;

use std::time::Duration;

use hodoflow_mock::{Fault, MockServer, RunOutcome, TriggerSeed};
use hodoflow_retry::{
    ErrorKind, HodoflowClient,
    webhook::{RunState, WorkflowRun},
};
use support::{assert_stopped_at_once, client, deliver, run_id, server};

const RUNS: &str = "/api/json/v1/workflow_runs/";
const POLL: Duration = Duration::from_millis(10);

/// Delivers an event and returns the run it started.
async fn started_run(client: &HodoflowClient, event: &str) -> String {
    run_id(&deliver(client, event).await)
}

/// Follows `run_id` to its end, polling every [`POLL`].
async fn follow(client: &HodoflowClient, run_id: &str) -> WorkflowRun {
    let run = client.follow_run(run_id).poll_interval(POLL).send().await;
    run.expect("the run ends within the budget")
}

#[tokio::test]
async fn follow_run_polls_an_accepted_delivery_until_it_succeeded() {
    let server = server().await;
    let client = client(&server);
    let run_id = started_run(&client, "order-4711:shipped").await;

    let run = follow(&client, &run_id).await;

    assert_eq!(run.id(), run_id);
    assert_eq!(run.state(), &RunState::Succeeded);
    assert!(
        run.polls() >= 2,
        "queued or running first: {} polls",
        run.polls()
    );
    assert_eq!(run.attempts().len(), 1);
    let polled = server.ledger().requests_to("GET", RUNS).len();
    assert_eq!(polled, run.polls() as usize);
}

#[tokio::test]
async fn follow_run_reports_a_run_that_failed() {
    let trigger = TriggerSeed::demo().run_outcome(RunOutcome::Failed);
    let builder = MockServer::builder()
        .limits(support::fast_limits())
        .trigger(trigger);
    let server = support::server_with(builder).await;
    let client = client(&server);
    let run_id = started_run(&client, "order-4711:doomed").await;

    let run = follow(&client, &run_id).await;

    assert_eq!(run.state(), &RunState::Failed);
    assert!(run.state().is_terminal());
}

#[tokio::test]
async fn a_poll_that_meets_a_503_is_retried_within_the_follow() {
    let server = server().await;
    let client = client(&server);
    let run_id = started_run(&client, "order-4711:bumpy").await;
    server.inject(Fault::respond(503).on("GET", RUNS));

    let run = follow(&client, &run_id).await;

    assert_eq!(run.state(), &RunState::Succeeded);
    let ledger = server.ledger();
    let polled = ledger.requests_to("GET", RUNS);
    assert_eq!(polled[0].status, Some(503));
    assert_eq!(polled.len(), run.polls() as usize + 1);
}

#[tokio::test]
async fn a_follow_budget_shorter_than_the_run_ends_in_budget_exhausted() {
    let server =
        support::server_where(|limits| limits.run_running_for = Duration::from_secs(60)).await;
    let client = client(&server);
    let run_id = started_run(&client, "order-4711:long").await;

    let error = client
        .follow_run(&run_id)
        .poll_interval(POLL)
        .max_elapsed(Duration::from_millis(100))
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert!(!server.ledger().requests_to("GET", RUNS).is_empty());
}

#[tokio::test]
async fn following_an_unknown_run_is_not_found_after_one_attempt() {
    let server = server().await;

    let error = client(&server)
        .follow_run("00000000-0000-0000-0000-000000000000")
        .poll_interval(POLL)
        .send()
        .await
        .unwrap_err();

    assert_stopped_at_once(&error, ErrorKind::NotFound, &server);
}
