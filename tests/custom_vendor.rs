//! A vendor written as data with public items only (`examples/custom_vendor.rs`, the IETF
//! Idempotency-Key draft) runs through the same engine as the built-in ones: over real TCP to the
//! example's server of the draft, each test checks the server's ledger (what it executed).

#[allow(
    dead_code,
    reason = "the example's main is the example's, not the tests'"
)]
#[path = "../examples/custom_vendor.rs"]
mod example;

use std::time::Duration;

use example::{DRAFT, client, draft, draft_server, order, seen};
use hodoflow_retry::profile::{Profile, When};
use hodoflow_retry::{ErrorKind, IdempotencyKey, Surface, Verdict};
use http::Method;

#[tokio::test]
async fn the_example_runs_and_its_order_runs_once() {
    example::run().await.unwrap();
}

#[tokio::test]
async fn a_retry_that_meets_its_original_in_flight_waits_out_the_409_and_gets_the_one_answer() {
    // The work outlasts the first attempt's timeout: the retry finds it running.
    let server = draft_server::start(true).await.unwrap();
    let client = client(&server.base, Duration::from_millis(100)).unwrap();

    let placed = order(&client, "order-1", r#"{"sku":"a"}"#).await.unwrap();

    assert_eq!(placed.status(), 201);
    assert_eq!(placed.body().as_ref(), br#"{"order":1}"#);
    let seen = seen(placed.attempts());
    assert_eq!(
        seen.first().map(String::as_str),
        Some("timeout"),
        "{seen:?}"
    );
    assert!(seen.iter().any(|status| status == "409"), "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("201"), "{seen:?}");
    assert_eq!(server.executed(), ["order-1"]);
}

#[tokio::test]
async fn a_key_reused_with_another_payload_stops_at_the_422_without_a_retry() {
    let server = draft_server::start(false).await.unwrap();
    let client = client(&server.base, Duration::from_secs(2)).unwrap();
    order(&client, "order-2", r#"{"sku":"a"}"#).await.unwrap();

    let error = order(&client, "order-2", r#"{"sku":"b"}"#)
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::KeyReused, "{error}");
    assert_eq!(seen(error.attempts()), ["422"]);
    assert!(!error.is_retryable());
    assert_eq!(server.executed(), ["order-2"]);
}

#[tokio::test]
async fn a_profile_that_sends_no_key_meets_the_drafts_400_and_nothing_runs() {
    let server = draft_server::start(false).await.unwrap();
    let client = client(&server.base, Duration::from_secs(2)).unwrap();
    let keyless = draft("ietf_draft_keyless")
        .sends_key(false)
        .build()
        .unwrap();

    let error = client
        .request(keyless, Method::POST, "/orders")
        .body(r#"{"sku":"a"}"#)
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::ClientError, "{error}");
    assert_eq!(seen(error.attempts()), ["400"]);
    assert!(!error.is_retryable());
    assert!(server.executed().is_empty());
}

#[tokio::test]
async fn without_the_callers_key_one_is_made_for_the_call_and_kept_on_every_attempt() {
    let server = draft_server::start(true).await.unwrap();
    let client = client(&server.base, Duration::from_millis(100)).unwrap();

    let placed = client
        .request(*DRAFT, Method::POST, "/orders")
        .body(r#"{"sku":"c"}"#)
        .send()
        .await
        .unwrap();

    assert_eq!(placed.status(), 201);
    assert!(
        placed.attempts().len() >= 3,
        "{:?}",
        seen(placed.attempts())
    );
    let executed = server.executed();
    assert_eq!(
        executed.len(),
        1,
        "the retries carried the first key: {executed:?}"
    );
    IdempotencyKey::new(&executed[0]).expect("a key the client made");
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    let server = draft_server::start(false).await.unwrap();
    let client = client(&server.base, Duration::from_secs(2)).unwrap();
    let keyless = draft("ietf_draft_no_keys")
        .sends_key(false)
        .build()
        .unwrap();
    let short_keys = draft("ietf_draft_short_keys")
        .key_max_len(8)
        .build()
        .unwrap();
    let key = || IdempotencyKey::new("order-with-a-long-key").unwrap();
    let mut owned = http::HeaderMap::new();
    owned.insert("idempotency-key", "mine".parse().unwrap());

    let refused = [
        client
            .request(keyless, Method::POST, "/orders")
            .idempotency_key(key())
            .send()
            .await
            .unwrap_err(),
        client
            .request(short_keys, Method::POST, "/orders")
            .idempotency_key(key())
            .send()
            .await
            .unwrap_err(),
        client
            .request(*DRAFT, Method::POST, "/orders")
            .headers(owned)
            .send()
            .await
            .unwrap_err(),
        client
            .request(*DRAFT, Method::POST, "/../orders")
            .send()
            .await
            .unwrap_err(),
    ];

    for error in refused {
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        assert!(error.attempts().is_empty(), "{error}");
        assert!(!error.may_have_run());
    }
    assert!(server.executed().is_empty());
}

#[test]
fn a_profile_is_checked_when_it_is_built() {
    let stop = Verdict::Stop(ErrorKind::UnexpectedStatus);
    let retry = Verdict::RetryAfterBackoff;
    let whole = || {
        Profile::builder("whole")
            .rule(When::NoResponse, retry, "retry")
            .rule(When::Other, stop, "stop")
    };
    whole().build().unwrap();

    let broken = [
        Profile::builder("no_timeout_row").rule(When::Other, stop, "stop"),
        Profile::builder("no_other_row").rule(When::NoResponse, retry, "retry"),
        Profile::builder("Not Snake").rule(When::NoResponse, retry, "retry"),
        whole().rule(
            When::Status(&[500]),
            Verdict::Success,
            "a 500 is no success",
        ),
        whole().rule(When::Status(&[700]), stop, "no such status"),
        whole().rule(When::Range(299, 200), stop, "an empty range"),
        whole().key_max_len(0),
        whole().key_max_len(256),
        whole().closes(42, hodoflow_retry::profile::Reach::Call),
    ];
    for builder in broken {
        let error = builder.build().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    }
}

#[test]
fn a_profile_answers_for_its_matrix_as_the_engine_reads_it() {
    assert_eq!(DRAFT.name(), "ietf_draft");
    assert!(DRAFT.sends_key());
    assert_eq!(DRAFT.verdict_on_status(201), Verdict::Success);
    assert_eq!(DRAFT.verdict_on_status(409), Verdict::RetryAfterServerWait);
    assert_eq!(
        DRAFT.verdict_on_status(422),
        Verdict::Stop(ErrorKind::KeyReused)
    );
    assert_eq!(
        DRAFT.verdict_on_status(418),
        Verdict::Stop(ErrorKind::UnexpectedStatus)
    );
    // The built-in tables are values of the same type.
    let webhook = Profile::from(Surface::Webhook);
    assert_eq!(webhook.name(), Surface::Webhook.as_str());
    assert_eq!(
        webhook.verdict_on_status(404),
        Verdict::Stop(ErrorKind::NotFound)
    );
    assert_ne!(webhook, *DRAFT);
}
