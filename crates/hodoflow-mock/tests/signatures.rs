//! Signed deliveries (`docs/wire-contract.md`, "Signed deliveries"): a trigger with signing secrets
//! checks the three Standard Webhooks headers, a ±300 s window on the injected clock and any one
//! `v1` signature against any secret, before deduplication; a refusal is `422 Unsupported trigger
//! authentication`, runs nothing and records no identity; the ledger keeps each verdict.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hodoflow_mock::{
    Clock, Fault, MockServer, MockServerBuilder, SignatureVerdict, TriggerSeed, sign_delivery,
};
use serde_json::json;
use support::{Caller, Reply, clocked, send};

const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const NEXT: &str = "whsec_bmV4dC1zZWNyZXQtZm9yLXRoZS1yb3RhdGlvbi0wMQ==";
const BODY: &str = r#"{"order":42}"#;
const WEBHOOK: &str = "/api/v1/webhooks/trg_demo_4b1d9c0e7f";

/// A server whose demo trigger demands `secrets`, on `builder`'s clock.
async fn signed(builder: MockServerBuilder, secrets: &[&str]) -> (MockServer, Caller) {
    let trigger = secrets.iter().fold(TriggerSeed::demo(), |trigger, secret| {
        trigger.signing_secret(secret)
    });
    let server = builder.trigger(trigger).start().await.unwrap();
    let caller = Caller::demo(&server).await;
    (server, caller)
}

fn unix(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Delivers [`BODY`] as `id` with these signature headers (`None`: left out).
async fn deliver(
    caller: &Caller,
    id: &str,
    timestamp: Option<i64>,
    signature: Option<&str>,
) -> Reply {
    let timestamp = timestamp.map(|t| t.to_string());
    let mut headers = vec![("idempotency-key", id), ("webhook-id", id)];
    if let Some(timestamp) = &timestamp {
        headers.push(("webhook-timestamp", timestamp.as_str()));
    }
    if let Some(signature) = signature {
        headers.push(("webhook-signature", signature));
    }
    send(caller.delivery_to(WEBHOOK, &headers, BODY)).await
}

/// Delivers [`BODY`] as `id`, signed with `secret` at `timestamp`.
async fn deliver_signed(caller: &Caller, id: &str, secret: &str, timestamp: i64) -> Reply {
    let signature = sign_delivery(secret, id, timestamp, BODY.as_bytes()).unwrap();
    deliver(caller, id, Some(timestamp), Some(&signature)).await
}

fn assert_refused(reply: &Reply) {
    assert_eq!(reply.status, 422, "{:?}", reply.body);
    assert_eq!(
        reply.json(),
        json!({"error": "Unsupported trigger authentication"})
    );
}

fn verdicts(server: &MockServer) -> Vec<SignatureVerdict> {
    let ledger = server.ledger();
    ledger
        .signed_deliveries()
        .iter()
        .map(|r| r.verdict)
        .collect()
}

#[tokio::test]
async fn accepts_a_valid_signature_and_records_the_verdict_with_the_bytes_received() {
    let (clock, builder) = clocked();
    let (server, caller) = signed(builder, &[SECRET]).await;

    let reply = deliver_signed(&caller, "evt-1", SECRET, unix(clock.now())).await;

    assert_eq!(reply.status, 202, "{:?}", reply.body);
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery("evt-1").len(), 1);
    let [record] = ledger.signed_deliveries() else {
        panic!("one record");
    };
    assert_eq!(record.verdict, SignatureVerdict::Accepted);
    assert_eq!(record.webhook_id.as_deref(), Some("evt-1"));
    assert_eq!(record.body().as_ref(), BODY.as_bytes());
    assert!(
        record.headers().get("authorization").is_none(),
        "no token kept"
    );
}

#[tokio::test]
async fn refuses_a_delivery_missing_any_of_the_three_headers_and_runs_nothing() {
    let (clock, builder) = clocked();
    let (server, caller) = signed(builder, &[SECRET]).await;
    let now = unix(clock.now());
    let signature = sign_delivery(SECRET, "evt-1", now, BODY.as_bytes()).unwrap();
    let timestamp = now.to_string();

    assert_refused(&deliver(&caller, "evt-1", None, Some(&signature)).await);
    assert_refused(&deliver(&caller, "evt-1", Some(now), None).await);
    let no_id = send(caller.delivery_to(
        WEBHOOK,
        &[
            ("idempotency-key", "evt-1"),
            ("webhook-timestamp", timestamp.as_str()),
            ("webhook-signature", signature.as_str()),
        ],
        BODY,
    ))
    .await;
    assert_refused(&no_id);

    assert_eq!(server.ledger().total_runs(), 0);
    assert_eq!(verdicts(&server), [SignatureVerdict::MissingHeader; 3]);
}

#[tokio::test]
async fn accepts_a_timestamp_within_300_seconds_of_the_injected_clock_either_side_and_no_further() {
    let (clock, builder) = clocked();
    let (_server, caller) = signed(builder, &[SECRET]).await;
    let now = unix(clock.now());

    assert_refused(&deliver_signed(&caller, "evt-old", SECRET, now - 301).await);
    assert_refused(&deliver_signed(&caller, "evt-new", SECRET, now + 301).await);
    assert_eq!(
        deliver_signed(&caller, "evt-old", SECRET, now - 300)
            .await
            .status,
        202
    );
    assert_eq!(
        deliver_signed(&caller, "evt-new", SECRET, now + 300)
            .await
            .status,
        202
    );
    clock.advance(Duration::from_secs(301));
    let stale = deliver_signed(&caller, "evt-late", SECRET, now).await;
    assert_refused(&stale);
}

#[tokio::test]
async fn a_refused_delivery_records_no_identity_so_a_corrected_retry_runs_once() {
    let (clock, builder) = clocked();
    let (server, caller) = signed(builder, &[SECRET]).await;
    let now = unix(clock.now());

    assert_refused(&deliver_signed(&caller, "evt-1", NEXT, now).await);
    let corrected = deliver_signed(&caller, "evt-1", SECRET, now).await;

    assert_eq!(corrected.delivery_status(), "accepted");
    assert_eq!(server.ledger().runs_for_delivery("evt-1").len(), 1);
    assert_eq!(
        verdicts(&server),
        [SignatureVerdict::NoMatch, SignatureVerdict::Accepted]
    );
}

#[tokio::test]
async fn verifies_before_deduplication_so_a_duplicate_must_be_signed_too() {
    let (clock, builder) = clocked();
    let (server, caller) = signed(builder, &[SECRET]).await;
    let now = unix(clock.now());
    assert_eq!(
        deliver_signed(&caller, "evt-1", SECRET, now).await.status,
        202
    );

    assert_refused(&deliver(&caller, "evt-1", Some(now), Some("v1,Zm9yZ2Vk")).await);
    let repeat = deliver_signed(&caller, "evt-1", SECRET, now + 1).await;

    assert_eq!(repeat.delivery_status(), "duplicate");
    assert_eq!(server.ledger().duplicates_for_delivery("evt-1"), 1);
    assert_eq!(server.ledger().runs_for_delivery("evt-1").len(), 1);
}

#[tokio::test]
async fn during_a_rotation_any_listed_signature_may_match_any_secret() {
    let (clock, builder) = clocked();
    let (_server, caller) = signed(builder, &[SECRET, NEXT]).await;
    let now = unix(clock.now());
    let old = sign_delivery(SECRET, "evt-2", now, BODY.as_bytes()).unwrap();
    let new = sign_delivery(NEXT, "evt-2", now, BODY.as_bytes()).unwrap();
    let forged = "v1,Zm9yZ2VkLXNpZ25hdHVyZS1vZi0zMi1ieXRlcyEhISE=";

    assert_eq!(
        deliver_signed(&caller, "evt-1", NEXT, now).await.status,
        202
    );
    let both = format!("{forged} {old} {new}");
    assert_eq!(
        deliver(&caller, "evt-2", Some(now), Some(&both))
            .await
            .status,
        202
    );
    assert_refused(&deliver(&caller, "evt-3", Some(now), Some(forged)).await);
}

#[tokio::test]
async fn a_skewed_clock_refuses_a_fresh_signature_and_a_rotated_secret_a_valid_one() {
    let (clock, builder) = clocked();
    let (server, caller) = signed(builder, &[SECRET]).await;
    let now = unix(clock.now());
    server.inject(Fault::skewed_clock(400).on("POST", "/api/v1/webhooks/"));
    server.inject(Fault::skewed_clock(-400).on("POST", "/api/v1/webhooks/"));
    server.inject(Fault::rotated_secret().on("POST", "/api/v1/webhooks/"));

    assert_refused(&deliver_signed(&caller, "evt-1", SECRET, now).await);
    assert_refused(&deliver_signed(&caller, "evt-1", SECRET, now).await);
    assert_refused(&deliver_signed(&caller, "evt-1", SECRET, now).await);
    let after = deliver_signed(&caller, "evt-1", SECRET, now).await;

    assert_eq!(after.delivery_status(), "accepted", "the faults are spent");
    assert_eq!(
        verdicts(&server),
        [
            SignatureVerdict::Stale,
            SignatureVerdict::Future,
            SignatureVerdict::NoMatch,
            SignatureVerdict::Accepted
        ]
    );
    let faults: Vec<Option<String>> = server
        .ledger()
        .requests_to("POST", "/api/v1/webhooks/")
        .iter()
        .map(|r| r.fault.clone())
        .collect();
    assert_eq!(faults[0].as_deref(), Some("skewed_clock"));
    assert_eq!(faults[2].as_deref(), Some("rotated_secret"));
}

#[tokio::test]
async fn a_skew_of_any_size_refuses_without_overflowing_the_clock() {
    let (clock, builder) = clocked();
    let (server, caller) = signed(builder, &[SECRET]).await;
    let now = unix(clock.now());
    for skew in [i64::MAX, i64::MIN] {
        server.inject(Fault::skewed_clock(skew).on("POST", "/api/v1/webhooks/"));
        assert_refused(&deliver_signed(&caller, "evt-1", SECRET, now).await);
    }
    assert_eq!(
        verdicts(&server),
        [SignatureVerdict::Stale, SignatureVerdict::Future]
    );
}

#[tokio::test]
async fn an_unsigned_trigger_ignores_the_signature_headers() {
    let (server, caller) = support::demo().await;

    let reply = deliver(&caller, "evt-1", Some(0), Some("v1,bm90LWNoZWNrZWQ=")).await;

    assert_eq!(reply.delivery_status(), "accepted");
    assert!(server.ledger().signed_deliveries().is_empty());
}

#[tokio::test]
async fn the_ledger_json_and_debug_show_verdicts_never_signatures_bodies_or_secrets() {
    let (clock, builder) = clocked();
    let (server, caller) = signed(builder, &[SECRET]).await;
    let now = unix(clock.now());
    let signature = sign_delivery(SECRET, "evt-1", now, BODY.as_bytes()).unwrap();
    deliver(&caller, "evt-1", Some(now), Some(&signature)).await;

    let ledger = server.ledger();
    let shown = format!("{} {ledger:?}", serde_json::to_string(&ledger).unwrap());
    assert!(shown.contains("\"verdict\":\"accepted\""), "{shown}");
    for hidden in [&signature[3..], &SECRET[6..], BODY] {
        assert!(!shown.contains(hidden), "{hidden} in {shown}");
    }
}
