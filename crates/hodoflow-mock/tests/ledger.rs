//! The ledger: requests counted apart from executions, runs per delivery
//! identity, token exchanges, and what each request record holds.

mod support;

use hodoflow_mock::{
    DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANIZATION, DEMO_TRIGGER_TOKEN, Fault,
};
use reqwest::Method;
use support::{
    Caller, PROJECTS, SECOND, aligned_start, clocked, credentials, demo, exchange, project,
};

#[tokio::test]
async fn counts_executions_apart_from_requests() {
    let (server, caller) = demo().await;
    let statuses = [
        caller.create("op-1", &project("apollo")).await.status,
        caller.create("op-1", &project("apollo")).await.status,
        caller.create("op-1", &project("gemini")).await.status,
    ];
    assert_eq!(statuses, [201, 201, 409]);
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed("op-1"), 1);
    let records = ledger.requests_with_key("op-1");
    assert_eq!(records.len(), 3);
    let recorded: Vec<Option<u16>> = records.iter().map(|r| r.status).collect();
    assert_eq!(recorded, [Some(201), Some(201), Some(409)]);
    let seqs: Vec<u64> = ledger.requests().iter().map(|r| r.seq).collect();
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "arrival order from 0"
    );
    assert_eq!(
        ledger.requests().len(),
        4,
        "the exchange, then three writes"
    );
}

#[tokio::test]
async fn does_not_count_replays_conflicts_refusals_or_failed_writes() {
    let (server, caller) = demo().await;
    caller.create("op-1", &project("apollo")).await;
    caller.create("op-1", &project("apollo")).await;
    caller.create("op-1", &project("gemini")).await;
    caller.create("op-2", "not json").await;
    server.inject(Fault::fail_execution(500).on("POST", PROJECTS));
    caller.create("op-3", &project("apollo")).await;
    server.inject(Fault::idempotency_unavailable().on("POST", PROJECTS));
    caller.create("op-4", &project("apollo")).await;
    caller
        .with_token("hft_unknown")
        .create("op-5", &project("apollo"))
        .await;

    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed("op-1"), 1);
    for key in ["op-2", "op-3", "op-4", "op-5"] {
        assert_eq!(ledger.writes_executed(key), 0, "{key}");
    }
    assert_eq!(ledger.total_writes_executed(), 1);
}

#[tokio::test]
async fn counts_writes_without_a_key_under_the_empty_key() {
    let (server, caller) = demo().await;
    caller
        .write(Method::POST, PROJECTS, None, &project("a"))
        .await;
    caller
        .write(Method::POST, PROJECTS, None, &project("b"))
        .await;
    caller.create("op-1", &project("c")).await;
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed(""), 2);
    assert_eq!(ledger.total_writes_executed(), 3);
}

#[tokio::test]
async fn counts_runs_per_delivery_identity_and_the_duplicates_answered() {
    let (server, caller) = demo().await;
    let first = caller.deliver_keyed("evt-1").await.run_id().unwrap();
    caller.deliver_keyed("evt-1").await;
    caller.deliver_keyed("evt-1").await;
    let second = caller.deliver_keyed("evt-2").await.run_id().unwrap();
    caller.deliver(&[], r#"{"order":7}"#).await;
    caller.deliver(&[], r#"{"order":7}"#).await;

    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery("evt-1"), [first]);
    assert_eq!(ledger.duplicates_for_delivery("evt-1"), 2);
    assert_eq!(ledger.runs_for_delivery("evt-2"), [second]);
    assert_eq!(ledger.duplicates_for_delivery("evt-2"), 0);
    assert!(ledger.runs_for_delivery("evt-3").is_empty());
    assert_eq!(ledger.total_runs(), 3, "two keyed, one by hash");
}

#[tokio::test]
async fn records_method_redacted_path_status_request_id_key_and_server_time() {
    let (clock, builder) = clocked();
    let server = builder.start().await.unwrap();
    let caller = Caller::demo(&server).await;
    clock.advance(5 * SECOND);
    let delivery = caller.deliver_keyed("evt-1").await;
    let legacy = format!("/api/v1/webhooks/{DEMO_ORGANIZATION}/{DEMO_TRIGGER_TOKEN}");
    support::send(caller.delivery_to(&legacy, &[("Idempotency-Key", "evt-2")], "{}")).await;
    caller.get(&format!("{PROJECTS}?page=2")).await;

    let ledger = server.ledger();
    let record = &ledger.requests_with_key("evt-1")[0];
    assert_eq!(record.method, "POST");
    assert_eq!(record.path, "/api/v1/webhooks/<redacted>");
    assert_eq!(record.status, Some(202));
    assert_eq!(record.request_id, delivery.request_id());
    assert_eq!(record.idempotency_key.as_deref(), Some("evt-1"));
    assert_eq!(record.fault, None);
    assert_eq!(record.at, aligned_start() + 5 * SECOND);
    assert_eq!(
        ledger.requests_with_key("evt-2")[0].path,
        "/api/v1/webhooks/acme/<redacted>"
    );
    assert_eq!(ledger.requests_to("POST", "/api/v1/webhooks/").len(), 2);
    assert_eq!(
        ledger.requests_to("GET", PROJECTS)[0].path,
        PROJECTS,
        "without the query"
    );
    assert!(
        ledger
            .requests()
            .iter()
            .all(|r| !r.path.contains(DEMO_TRIGGER_TOKEN))
    );
    let gap = ledger.requests_with_key("evt-2")[0].arrived - record.arrived;
    assert!(
        gap > std::time::Duration::ZERO,
        "arrival on the monotonic clock"
    );
}

#[tokio::test]
async fn records_every_token_exchange_granted_or_not() {
    let (clock, builder) = clocked();
    let server = builder.start().await.unwrap();
    exchange(&server, &credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)).await;
    clock.advance(SECOND);
    exchange(&server, &credentials(DEMO_CLIENT_ID, "wrong")).await;
    exchange(&server, &credentials("nobody", "x")).await;

    let ledger = server.ledger();
    let seen: Vec<(&str, bool)> = ledger
        .exchanges()
        .iter()
        .map(|e| (e.client_id.as_str(), e.granted))
        .collect();
    assert_eq!(
        seen,
        [
            (DEMO_CLIENT_ID, true),
            (DEMO_CLIENT_ID, false),
            ("nobody", false)
        ]
    );
    assert_eq!(ledger.exchanges()[0].at, aligned_start());
    assert_eq!(ledger.exchanges()[1].at, aligned_start() + SECOND);
    assert_eq!(ledger.tokens_issued(), 1);
    assert_eq!(ledger.requests_to("POST", "/oauth/token").len(), 3);
}
