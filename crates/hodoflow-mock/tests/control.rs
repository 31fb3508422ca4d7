//! The control routes: `POST`/`DELETE /_mock/faults` and `GET /_mock/ledger`,
//! served only when enabled.

mod support;

use hodoflow_mock::{DEMO_TRIGGER_TOKEN, MockServer};
use serde_json::{Value, json};
use support::{Caller, PROJECTS, Reply, http, project, send, try_send};

async fn control_server() -> MockServer {
    MockServer::builder()
        .control_routes(true)
        .start()
        .await
        .unwrap()
}

async fn post_fault(server: &MockServer, fault: Value) -> Reply {
    send(
        http()
            .post(format!("{}/_mock/faults", server.base_url()))
            .json(&fault),
    )
    .await
}

async fn clear_faults(server: &MockServer) -> Reply {
    send(http().delete(format!("{}/_mock/faults", server.base_url()))).await
}

async fn ledger_json(server: &MockServer) -> Reply {
    send(http().get(format!("{}/_mock/ledger", server.base_url()))).await
}

#[tokio::test]
async fn serves_no_control_route_unless_enabled() {
    let server = support::start().await;
    let fault = json!({"action": "close_before_execute"});
    assert_eq!(post_fault(&server, fault).await.status, 404);
    assert_eq!(clear_faults(&server).await.status, 404);
    assert_eq!(ledger_json(&server).await.status, 404);
    let caller = Caller::demo(&server).await;
    assert_eq!(
        caller.create("op-1", &project("apollo")).await.status,
        201,
        "nothing was armed"
    );
}

#[tokio::test]
async fn arms_a_posted_fault_for_the_next_matching_request() {
    let server = control_server().await;
    let caller = Caller::demo(&server).await;
    let fault = json!({
        "action": "execute_then_close",
        "method": "POST",
        "path_prefix": "/api/v1/webhooks/",
    });
    assert_eq!(post_fault(&server, fault).await.status, 204);
    let lost = caller.keyed_delivery("evt-1");
    assert!(try_send(lost).await.is_err());
    assert_eq!(server.ledger().runs_for_delivery("evt-1").len(), 1);
    assert_eq!(
        caller.deliver_keyed("evt-1").await.delivery_status(),
        "duplicate"
    );
}

#[tokio::test]
async fn arms_a_respond_fault_with_headers_for_n_requests() {
    let server = control_server().await;
    let caller = Caller::demo(&server).await;
    let fault = json!({
        "action": {"respond": {"status": 429, "headers": {"Retry-After": "2"}}},
        "method": "POST",
        "path_prefix": "/api/json/",
        "firing": {"times": 2},
    });
    assert_eq!(post_fault(&server, fault).await.status, 204);
    for _ in 0..2 {
        let limited = caller.create("op-1", &project("apollo")).await;
        assert_eq!((limited.status, limited.retry_after_secs()), (429, 2));
    }
    assert_eq!(caller.create("op-1", &project("apollo")).await.status, 201);
    assert_eq!(server.ledger().writes_executed("op-1"), 1);
}

#[tokio::test]
async fn arms_a_seeded_probability_fault_with_a_delay() {
    let server = control_server().await;
    let caller = Caller::demo(&server).await;
    let fault = json!({
        "action": {"delay_then_handle": {"delay_ms": 60}},
        "method": "GET",
        "firing": {"probability": {"p": 1.0, "seed": 3}},
    });
    assert_eq!(post_fault(&server, fault).await.status, 204);
    // Which fault fired is in the ledger below; how long a delay holds is the server's unit
    // tests' (in paused time).
    for _ in 0..2 {
        assert_eq!(caller.get(PROJECTS).await.status, 200);
    }
    let faults: Vec<Option<String>> = server
        .ledger()
        .requests_to("GET", PROJECTS)
        .iter()
        .map(|r| r.fault.clone())
        .collect();
    assert_eq!(
        faults,
        [
            Some("delay_then_handle".to_owned()),
            Some("delay_then_handle".to_owned())
        ]
    );
}

#[tokio::test]
async fn disarms_every_fault_on_delete() {
    let server = control_server().await;
    let caller = Caller::demo(&server).await;
    let fault = json!({"action": {"respond": {"status": 503}}, "firing": {"times": 5}});
    assert_eq!(post_fault(&server, fault).await.status, 204);
    assert_eq!(caller.get(PROJECTS).await.status, 503);
    assert_eq!(clear_faults(&server).await.status, 204);
    assert_eq!(caller.get(PROJECTS).await.status, 200);
}

#[tokio::test]
async fn refuses_a_malformed_fault_with_400_and_arms_nothing() {
    let server = control_server().await;
    let caller = Caller::demo(&server).await;
    for fault in [
        json!({"action": "explode"}),
        json!({"method": "POST"}),
        json!("close"),
    ] {
        assert_eq!(post_fault(&server, fault).await.status, 400);
    }
    assert_eq!(caller.create("op-1", &project("apollo")).await.status, 201);
}

#[tokio::test]
async fn serves_the_ledger_as_json() {
    let server = control_server().await;
    let caller = Caller::demo(&server).await;
    caller.create("op-1", &project("apollo")).await;
    caller.create("op-1", &project("apollo")).await;
    let run_id = caller.deliver_keyed("evt-1").await.run_id().unwrap();
    caller.deliver_keyed("evt-1").await;

    let served = ledger_json(&server).await;
    assert_eq!(served.status, 200);
    let ledger = served.json();
    assert_eq!(ledger["writes"], json!({"op-1": 1}));
    assert_eq!(ledger["deliveries"], json!({"evt-1": [run_id]}));
    assert_eq!(ledger["duplicates"], json!({"evt-1": 1}));
    assert_eq!(
        ledger["exchanges"][0]["client_id"],
        hodoflow_mock::DEMO_CLIENT_ID
    );
    assert_eq!(ledger["exchanges"][0]["granted"], true);
    let requests = ledger["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 5, "control routes are not recorded");
    let delivery = &requests[3];
    assert_eq!(delivery["method"], "POST");
    assert_eq!(delivery["path"], "/api/v1/webhooks/<redacted>");
    assert_eq!(delivery["status"], 202);
    assert_eq!(delivery["idempotency_key"], "evt-1");
    assert!(!served.json().to_string().contains(DEMO_TRIGGER_TOKEN));
}
