//! Webhook deliveries (Hodoflow's webhook sender guide): both routes, delivery identity by header
//! precedence or by hash in a two-hour bucket, deduplication per organization
//! for seven days, `202 accepted` / `202 duplicate`, and every refusal.

mod support;

use hodoflow_mock::{
    DEMO_ORGANIZATION, DEMO_TRIGGER_TOKEN, Limits, ManualClock, MockServer, TriggerSeed,
};
use serde_json::json;
use support::{
    Caller, DAY, HOUR, MINUTE, OTHER_CLIENT, OTHER_TRIGGER, Reply, SECOND, clocked, demo, two_orgs,
};

const ORDER: &str = r#"{"order":42}"#;
/// A second trigger of the demo organization.
const SECOND_TRIGGER: &str = "trg_second_5e6f";

fn assert_accepted(reply: &Reply) -> String {
    assert_eq!(reply.status, 202, "{:?}", reply.body);
    assert_eq!(reply.delivery_status(), "accepted");
    let run_id = reply.run_id().unwrap();
    let parsed = uuid::Uuid::parse_str(&run_id).unwrap();
    assert_eq!(parsed.hyphenated().to_string(), run_id);
    run_id
}

fn assert_duplicate(reply: &Reply) {
    assert_eq!(reply.status, 202, "{:?}", reply.body);
    assert_eq!(reply.json(), json!({"status": "duplicate"}));
}

fn assert_refused(reply: &Reply, status: u16, runtime_body: &str) {
    assert_eq!(reply.status, status, "{:?}", reply.body);
    assert_eq!(reply.json(), json!({"error": runtime_body}));
}

#[tokio::test]
async fn accepts_a_first_delivery_with_a_uuid_run_id_and_answers_a_retry_duplicate() {
    let (server, caller) = demo().await;
    let run_id = assert_accepted(&caller.deliver_keyed("evt-1").await);
    assert_duplicate(&caller.deliver_keyed("evt-1").await);
    assert_duplicate(&caller.deliver_keyed("evt-1").await);

    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery("evt-1"), [run_id]);
    assert_eq!(ledger.duplicates_for_delivery("evt-1"), 2);
    assert_eq!(ledger.total_runs(), 1);
}

#[tokio::test]
async fn routes_the_legacy_org_qualified_path_and_shares_its_deduplication() {
    let (server, caller) = demo().await;
    let legacy = format!("/api/v1/webhooks/{DEMO_ORGANIZATION}/{DEMO_TRIGGER_TOKEN}");
    let key = [("idempotency-key", "evt-1")];
    assert_accepted(&support::send(caller.delivery_to(&legacy, &key, ORDER)).await);
    assert_duplicate(&caller.deliver_keyed("evt-1").await);
    assert_duplicate(&support::send(caller.delivery_to(&legacy, &key, ORDER)).await);

    let wrong_org = format!("/api/v1/webhooks/globex/{DEMO_TRIGGER_TOKEN}");
    let refused =
        support::send(caller.delivery_to(&wrong_org, &[("idempotency-key", "evt-2")], ORDER)).await;
    assert_refused(&refused, 404, "Trigger not found");
    assert_eq!(server.ledger().total_runs(), 1);
}

/// The provider headers from the highest precedence to the lowest.
const PRECEDENCE: [&str; 4] = [
    "Idempotency-Key",
    "X-GitHub-Delivery",
    "X-Shopify-Webhook-Id",
    "X-Twilio-Idempotency-Token",
];

#[tokio::test]
async fn takes_the_delivery_identity_from_the_first_header_in_precedence_order() {
    let (server, caller) = demo().await;
    for pair in PRECEDENCE.windows(2) {
        let (higher, lower) = (pair[0], pair[1]);
        let (high_id, low_id) = (format!("{higher}-over-{lower}"), format!("{lower}-alone"));
        // Alone, the lower header is the identity.
        assert_accepted(&caller.deliver(&[(lower, &low_id)], ORDER).await);
        // With both, the higher one is: a new identity, so a new run.
        assert_accepted(
            &caller
                .deliver(&[(higher, &high_id), (lower, &low_id)], ORDER)
                .await,
        );
        assert_duplicate(&caller.deliver(&[(higher, &high_id)], ORDER).await);
        let ledger = server.ledger();
        assert_eq!(
            ledger.runs_for_delivery(&high_id).len(),
            1,
            "{higher} over {lower}"
        );
        assert_eq!(ledger.runs_for_delivery(&low_id).len(), 1, "{lower} alone");
    }
    let all: Vec<(&str, &str)> = PRECEDENCE.iter().map(|h| (*h, "all-four")).collect();
    assert_accepted(&caller.deliver(&all, ORDER).await);
    assert_eq!(server.ledger().runs_for_delivery("all-four").len(), 1);
}

#[tokio::test]
async fn skips_an_empty_delivery_header() {
    let (server, caller) = demo().await;
    let headers = [("Idempotency-Key", ""), ("X-GitHub-Delivery", "gh-1")];
    assert_accepted(&caller.deliver(&headers, ORDER).await);
    assert_duplicate(
        &caller
            .deliver(&[("X-GitHub-Delivery", "gh-1")], ORDER)
            .await,
    );
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery("gh-1").len(), 1);
    assert!(ledger.runs_for_delivery("").is_empty());
}

#[tokio::test]
async fn never_takes_x_request_id_as_the_delivery_identity() {
    let (server, caller) = demo().await;
    // Same body, another attempt ID: the body hash makes it a duplicate.
    assert_accepted(
        &caller
            .deliver(&[("X-Request-Id", "attempt-1")], ORDER)
            .await,
    );
    assert_duplicate(
        &caller
            .deliver(&[("X-Request-Id", "attempt-2")], ORDER)
            .await,
    );
    // Same attempt ID, another body: a new delivery.
    assert_accepted(
        &caller
            .deliver(&[("X-Request-Id", "attempt-2")], r#"{"order":43}"#)
            .await,
    );
    let ledger = server.ledger();
    assert!(ledger.runs_for_delivery("attempt-1").is_empty());
    assert!(ledger.runs_for_delivery("attempt-2").is_empty());
    assert_eq!(ledger.total_runs(), 2);
}

/// A server on a manual clock, with tokens that outlive every window tested here.
async fn clocked_server(builder_limits: Limits) -> (ManualClock, MockServer) {
    let limits = Limits {
        token_ttl: 30 * DAY,
        ..builder_limits
    };
    let (clock, builder) = clocked();
    let builder = two_orgs(builder.limits(limits))
        .trigger(TriggerSeed::new(SECOND_TRIGGER, DEMO_ORGANIZATION));
    (clock, builder.start().await.unwrap())
}

#[tokio::test]
async fn dedupes_a_headerless_delivery_within_its_two_hour_bucket_and_runs_again_in_the_next() {
    let (clock, server) = clocked_server(Limits::default()).await;
    let caller = Caller::demo(&server).await;
    assert_accepted(&caller.deliver(&[], ORDER).await);
    clock.advance(2 * HOUR - SECOND);
    assert_duplicate(&caller.deliver(&[], ORDER).await);
    assert_eq!(server.ledger().total_runs(), 1);

    clock.advance(SECOND);
    assert_accepted(&caller.deliver(&[], ORDER).await);
    assert_duplicate(&caller.deliver(&[], ORDER).await);
    assert_eq!(server.ledger().total_runs(), 2);
}

#[tokio::test]
async fn hashes_the_trigger_token_and_the_raw_body() {
    let (_clock, server) = clocked_server(Limits::default()).await;
    let caller = Caller::demo(&server).await;
    assert_accepted(&caller.deliver(&[], ORDER).await);
    assert_accepted(&caller.deliver(&[], r#"{"order": 42}"#).await);
    assert_accepted(&support::send(caller.delivery(SECOND_TRIGGER, &[], ORDER)).await);
    assert_duplicate(&support::send(caller.delivery(SECOND_TRIGGER, &[], ORDER)).await);
    assert_eq!(server.ledger().total_runs(), 3);
}

#[tokio::test]
async fn dedupes_per_organization() {
    let server = two_orgs(MockServer::builder()).start().await.unwrap();
    let demo = Caller::demo(&server).await;
    let other = Caller::of(&server, OTHER_CLIENT.0, OTHER_CLIENT.1).await;
    let key = [("Idempotency-Key", "evt-1")];
    assert_accepted(&demo.deliver(&key, ORDER).await);
    assert_accepted(&support::send(other.delivery(OTHER_TRIGGER, &key, ORDER)).await);
    assert_duplicate(&support::send(other.delivery(OTHER_TRIGGER, &key, ORDER)).await);
    assert_duplicate(&demo.deliver(&key, ORDER).await);
    assert_eq!(server.ledger().runs_for_delivery("evt-1").len(), 2);
}

/// Delivers `evt-1`, then checks it is a duplicate until `retention` has
/// passed and runs again from then on.
async fn assert_identity_retained_for(limits: Limits) {
    let retention = limits.delivery_retention;
    let (clock, server) = clocked_server(limits).await;
    let caller = Caller::demo(&server).await;
    let first = assert_accepted(&caller.deliver_keyed("evt-1").await);
    clock.advance(retention - SECOND);
    assert_duplicate(&caller.deliver_keyed("evt-1").await);
    clock.advance(SECOND);
    let second = assert_accepted(&caller.deliver_keyed("evt-1").await);
    assert_ne!(first, second);
    assert_eq!(server.ledger().runs_for_delivery("evt-1"), [first, second]);
}

#[tokio::test]
async fn retains_a_delivery_identity_for_seven_days_then_runs_it_again() {
    assert_identity_retained_for(Limits::default()).await;
}

#[tokio::test]
async fn retains_a_delivery_identity_for_a_configured_window() {
    let limits = Limits {
        delivery_retention: 3 * HOUR,
        ..Limits::default()
    };
    assert_identity_retained_for(limits).await;
}

#[tokio::test]
async fn refuses_a_body_over_1_mib_and_accepts_one_of_exactly_1_mib() {
    let (server, caller) = demo().await;
    let at_limit = support::json_of_size(1_048_576);
    assert_accepted(
        &caller
            .deliver(&[("Idempotency-Key", "evt-at")], &at_limit)
            .await,
    );
    for (key, size) in [("evt-over", 1_048_577), ("evt-far-over", 3 << 20)] {
        let body = support::json_of_size(size);
        let refused = caller.deliver(&[("Idempotency-Key", key)], &body).await;
        assert_refused(&refused, 413, "Request body too large");
    }
    assert_eq!(server.ledger().total_runs(), 1);
}

#[tokio::test]
async fn limits_each_trigger_to_100_requests_per_fixed_60_second_window() {
    let (clock, server) = clocked_server(Limits::default()).await;
    let caller = Caller::demo(&server).await;
    for i in 0..100 {
        if i == 50 {
            clock.advance(MINUTE - SECOND);
        }
        assert_accepted(&caller.deliver_keyed(&format!("evt-{i}")).await);
    }
    let limited = caller.deliver_keyed("evt-100").await;
    assert_refused(&limited, 429, "Rate limit exceeded");
    assert_eq!(limited.retry_after_secs(), 1);
    assert_accepted(&support::send(caller.delivery(SECOND_TRIGGER, &[], ORDER)).await);
    assert_eq!(server.ledger().total_runs(), 101);

    clock.advance(SECOND);
    assert_accepted(&caller.deliver_keyed("evt-100").await);
    assert_eq!(server.ledger().runs_for_delivery("evt-100").len(), 1);
}

#[tokio::test]
async fn says_how_long_to_wait_in_retry_after_and_recovers_after_the_window() {
    let limits = Limits {
        webhook_rate_limit: 2,
        ..Limits::default()
    };
    let (clock, server) = clocked_server(limits).await;
    let caller = Caller::demo(&server).await;
    caller.deliver_keyed("evt-1").await;
    caller.deliver_keyed("evt-2").await;
    assert_eq!(caller.deliver_keyed("evt-3").await.retry_after_secs(), 60);
    clock.advance(25 * SECOND);
    assert_eq!(caller.deliver_keyed("evt-3").await.retry_after_secs(), 35);
    clock.advance(35 * SECOND);
    assert_accepted(&caller.deliver_keyed("evt-3").await);
    assert_eq!(server.ledger().total_runs(), 3);
}

#[tokio::test]
async fn answers_an_unknown_or_deactivated_trigger_with_trigger_not_found() {
    let server = two_orgs(MockServer::builder()).start().await.unwrap();
    let caller = Caller::demo(&server).await;
    let unknown = support::send(caller.delivery("trg_never_seeded", &[], ORDER)).await;
    assert_refused(&unknown, 404, "Trigger not found");
    let foreign = support::send(caller.delivery(OTHER_TRIGGER, &[], ORDER)).await;
    assert_refused(&foreign, 404, "Trigger not found");

    server.put_trigger(TriggerSeed::demo().inactive());
    let deactivated = caller.deliver_keyed("evt-1").await;
    assert_refused(&deactivated, 404, "Trigger not found");
    assert_eq!(
        deactivated.body, unknown.body,
        "indistinguishable from an unknown token"
    );
    assert_eq!(server.ledger().total_runs(), 0);

    server.put_trigger(TriggerSeed::demo());
    assert_accepted(&caller.deliver_keyed("evt-1").await);
}

#[tokio::test]
async fn refuses_a_body_that_is_not_json_with_processing_failed() {
    let (server, caller) = demo().await;
    for body in ["order=42", "", "{\"order\":"] {
        let refused = caller.deliver(&[("Idempotency-Key", "evt-1")], body).await;
        assert_refused(&refused, 422, "Processing failed");
    }
    assert_eq!(server.ledger().total_runs(), 0);
    assert_accepted(&caller.deliver_keyed("evt-1").await);
}

#[tokio::test]
async fn refuses_a_trigger_with_unsupported_authentication() {
    let server = MockServer::builder()
        .trigger(TriggerSeed::demo().unsupported_auth())
        .start()
        .await
        .unwrap();
    let caller = Caller::demo(&server).await;
    let refused = caller.deliver_keyed("evt-1").await;
    assert_refused(&refused, 422, "Unsupported trigger authentication");
    assert_eq!(server.ledger().total_runs(), 0);
}

#[tokio::test]
async fn states_the_trigger_s_window_in_ratelimit_fields_on_every_answer_past_the_check() {
    let limits = Limits {
        webhook_rate_limit: 2,
        webhook_rate_window: 30 * SECOND,
        ..Limits::default()
    };
    let (clock, server) = clocked_server(limits).await;
    let caller = Caller::demo(&server).await;
    let fields = |reply: &Reply| {
        (
            reply.header("ratelimit-policy").map(str::to_owned),
            reply.header("ratelimit").map(str::to_owned),
        )
    };
    let policy = Some(r#""trigger";q=2;w=30"#.to_owned());

    let first = caller.deliver_keyed("evt-1").await;
    assert_accepted(&first);
    assert_eq!(
        fields(&first),
        (policy.clone(), Some(r#""trigger";r=1;t=30"#.to_owned()))
    );
    clock.advance(10 * SECOND);
    let refused = caller
        .deliver(&[("idempotency-key", "evt-2")], "not json")
        .await;
    assert_refused(&refused, 422, "Processing failed");
    assert_eq!(
        fields(&refused),
        (policy.clone(), Some(r#""trigger";r=0;t=20"#.to_owned())),
        "a 422 after the window check counts and says so"
    );
    let limited = caller.deliver_keyed("evt-3").await;
    assert_refused(&limited, 429, "Rate limit exceeded");
    assert_eq!(
        fields(&limited),
        (policy.clone(), Some(r#""trigger";r=0;t=20"#.to_owned()))
    );
    let unknown = support::send(caller.delivery("trg_never_seeded", &[], ORDER)).await;
    assert_refused(&unknown, 404, "Trigger not found");
    assert_eq!(fields(&unknown), (None, None), "refused before the check");
}

#[tokio::test]
async fn states_a_sub_second_window_rounded_up_and_can_send_no_fields() {
    let limits = Limits {
        webhook_rate_limit: 1000,
        webhook_rate_window: std::time::Duration::from_millis(600),
        ..Limits::default()
    };
    let (_clock, server) = clocked_server(limits).await;
    let caller = Caller::demo(&server).await;
    let reply = caller.deliver_keyed("evt-1").await;
    assert_eq!(
        reply.header("ratelimit-policy"),
        Some(r#""trigger";q=1000;w=1"#)
    );
    assert_eq!(reply.header("ratelimit"), Some(r#""trigger";r=999;t=1"#));

    let silent = Limits {
        webhook_rate_limit_fields: false,
        ..Limits::default()
    };
    let (_clock, server) = clocked_server(silent).await;
    let caller = Caller::demo(&server).await;
    let reply = caller.deliver_keyed("evt-1").await;
    assert_accepted(&reply);
    assert_eq!(reply.header("ratelimit-policy"), None);
    assert_eq!(reply.header("ratelimit"), None);
}
