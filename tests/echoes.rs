//! A server that echoes every secret the client holds, in every text the client keeps of an
//! answer: the `x-request-id`, the error code an error quotes, and a webhook's run ID, at offsets
//! across the cuts the client makes (100 bytes of a quoted code, 128 of a request ID, 256 of a
//! run ID). No secret's bytes, whole or any piece of 8 bytes or more, may be in what a call
//! returns or logs. (The rows of the outbox's stores are the `hodoflow-outbox` crate's
//! tests/echoes.rs.)
//!
//! The server is `support::hostile` on 127.0.0.1:0; each request's body says what it echoes,
//! where, and after how many bytes of padding.

mod support;

use hodoflow_retry::{DeliveryId, ErrorKind, IdempotencyKey};
use serde_json::json;

use support::Captured;
use support::echo::*;
use support::hostile::{Hostile, Reply};

#[tokio::test]
async fn no_secret_a_server_echoes_is_in_what_a_call_returns_or_logs_across_every_cut() {
    // Every event logged, at every level, the attempts' `x-request-id` included (this binary's
    // other tests' events too: they must not hold a secret either).
    let logged = Captured::everywhere(tracing::Level::TRACE);
    let server = Hostile::start(echo).await;
    let credentials = client(&server, false);
    let bearer = client(&server, true);
    let mut checked = 0;
    for order in orders() {
        let client = if order.secret == "bearer" {
            &bearer
        } else {
            &credentials
        };
        let op = format!("{order:?}");
        let sent = client
            .deliver(TRIGGER, body(&order))
            .delivery_id(DeliveryId::new(IdempotencyKey::from_operation_id(&op)))
            .send()
            .await;
        let shown = match (order.place, sent) {
            (Place::RunId, Ok(delivery)) => {
                let run_id = delivery.run_id().unwrap();
                assert!(run_id.len() <= 256, "{run_id}");
                assert!(
                    run_id.starts_with("xxxx"),
                    "the server's text around it is kept"
                );
                let request_id = delivery.request_id().unwrap();
                assert!(request_id.len() <= 128, "{request_id}");
                format!("{run_id} | {request_id} | {delivery:?}")
            }
            (Place::Refusal, Err(error)) => {
                assert_eq!(error.kind(), ErrorKind::Unprocessable, "{error}");
                assert!(
                    error
                        .to_string()
                        .starts_with("unprocessable request (422 xxxx"),
                    "the SDK's words are as they were: {error}"
                );
                assert!(error.request_id().unwrap().len() <= 128);
                shown_error(&error)
            }
            (place, sent) => panic!("{place:?}: {sent:?}"),
        };
        assert_clean(&op, &shown, &secrets(&server));
        checked += 1;
    }
    assert_eq!(checked, orders().len());
    // The server did echo them: the secrets reached it.
    assert!(!server.issued().is_empty());
    let logs = logged.text();
    assert!(
        logs.contains("request_id="),
        "the attempts were logged with their x-request-id: {logs}"
    );
    if let Some(piece) = leak(&logs, &secrets(&server)) {
        panic!("the logs hold {piece:?}");
    }
}

#[tokio::test]
async fn a_write_refused_with_a_secret_in_its_code_keeps_its_own_words() {
    // A server that answers with the token as the whole code, and with the code that names
    // the SDK's own words: neither rewrites the message around it.
    let server = Hostile::start(|seen, _| {
        let bearer = seen.header_values("authorization").join("");
        let bearer = bearer.trim_start_matches("Bearer ");
        Reply::json(
            409,
            &json!({"errors": [{"status": "409", "code": bearer}]}).to_string(),
        )
        .header("x-request-id", bearer)
    })
    .await;
    let client = client(&server, false);
    let error = client
        .create(
            "/api/json/v1/projects",
            IdempotencyKey::from_operation_id("w"),
            "{}",
        )
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "request refused (409 <redacted>): correct the request; never retried unchanged"
    );
    assert_eq!(error.request_id(), Some("<redacted>"));
    assert_clean("the write's error", &shown_error(&error), &secrets(&server));
}
