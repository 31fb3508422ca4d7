//! Token lifetimes a token endpoint should never state: `"expires_in": 0`, negative, huge, a
//! string, or none at all, from the contract server (`Fault::stated_expires_in`, and
//! `Limits::token_ttl` of zero for tokens that really expire at once). A token that lives under
//! a second is sent by the calls that waited for its exchange and counts as a failed exchange;
//! the server's ledger shows how few exchanges that costs.

mod support;

use std::sync::Arc;
use std::time::Duration;

use hodoflow_mock::{Fault, MockServer};
use hodoflow_retry::{Budget, ErrorKind, HodoflowClient};
use serde_json::json;
use support::{TOKEN, TRIGGER, WEBHOOKS, delivery, demo, server, server_where};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Every token answer of `server` states `expires_in` as `stated` (`None`: no field).
fn stating(server: &MockServer, stated: Option<serde_json::Value>) {
    let fault = match stated {
        Some(value) => Fault::stated_expires_in(value),
        None => Fault::no_expires_in(),
    };
    server.inject(fault.on("POST", TOKEN).times(u32::MAX));
}

/// A client of `server` with the demo credentials, `max_elapsed` and a 15 s attempt timeout.
fn client(server: &MockServer, max_elapsed: Duration) -> HodoflowClient {
    demo(
        support::builder(server).budget(
            Budget::new()
                .max_attempts(5)
                .max_elapsed(max_elapsed)
                .attempt_timeout(Duration::from_secs(15)),
        ),
    )
}

/// The token requests `server` saw.
fn exchanges(server: &MockServer) -> Vec<hodoflow_mock::RequestRecord> {
    server
        .ledger()
        .requests_to("POST", TOKEN)
        .into_iter()
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_token_stated_to_expire_at_once_is_sent_once_and_not_exchanged_again() {
    let server = server().await;
    stating(&server, Some(json!(0)));
    let client = client(&server, Duration::from_secs(5));

    let delivered = client
        .deliver(TRIGGER, "{}")
        .delivery_id(delivery("at-once-1"))
        .send()
        .await
        .expect("the token of its own exchange is sent");

    assert_eq!(delivered.attempts().len(), 1);
    assert_eq!(exchanges(&server).len(), 1, "one exchange, no storm");
    assert_eq!(server.ledger().total_runs(), 1);
}

#[tokio::test]
async fn fifty_deliveries_eight_at_a_time_make_a_few_exchanges_a_second() {
    let server = server().await;
    stating(&server, Some(json!(0)));
    let client = client(&server, Duration::from_secs(10));
    let permits = Arc::new(Semaphore::new(8));
    let mut calls = JoinSet::new();
    for n in 0..50 {
        let (client, permits) = (client.clone(), Arc::clone(&permits));
        calls.spawn(async move {
            let _permit = permits.acquire_owned().await.expect("never closed");
            client
                .deliver(TRIGGER, "{}")
                .delivery_id(delivery(&format!("batch-{n}")))
                .send()
                .await
        });
    }
    let mut delivered = 0;
    while let Some(call) = calls.join_next().await {
        if call.expect("no call panicked").is_ok() {
            delivered += 1;
        }
    }

    let arrivals = exchanges(&server);
    let busiest = server.ledger().busiest_second("POST", TOKEN);
    println!(
        "{delivered} of 50 delivered; {} exchanges, at most {busiest} in a second",
        arrivals.len()
    );
    // The shared backoff after each (250 ms doubling to 5 s, drawn in its upper half) lets at
    // most four exchanges start in any second; each serves every call waiting for it.
    assert!(busiest <= 4, "{busiest} exchanges in one second");
    assert!(arrivals.len() <= 12, "{} exchanges", arrivals.len());
    assert_eq!(delivered, 50, "every call outlasts the backoff");
    assert_eq!(server.ledger().total_runs(), 50);
}

#[tokio::test]
async fn a_token_that_really_expires_at_once_ends_the_call_at_once_saying_why() {
    let server = server_where(|limits| limits.token_ttl = Duration::ZERO).await;
    let client = client(&server, Duration::from_secs(5));

    let error = client
        .deliver(TRIGGER, "{}")
        .delivery_id(delivery("expired-1"))
        .send()
        .await
        .expect_err("the server refuses every token as expired");

    assert_eq!(error.kind(), ErrorKind::TokenExchange);
    assert!(
        !error.is_retryable(),
        "another exchange gets another such token"
    );
    let message = error.to_string();
    assert!(
        message.contains("the token endpoint issued tokens that expire at once"),
        "{message}"
    );
    assert!(
        message.contains("refused the last one as expired"),
        "{message}"
    );
    assert_eq!(error.attempts().len(), 1, "the 401, then no re-exchange");
    assert_eq!(exchanges(&server).len(), 1);
    let sent = server.ledger().requests_to("POST", WEBHOOKS).len();
    assert_eq!(sent, 1);
    assert_eq!(server.ledger().total_runs(), 0);
}

#[tokio::test]
async fn hostile_expires_in_values_are_bounded_or_refused_at_once() {
    for (stated, delivers) in [
        (Some(json!("0")), true),
        (Some(json!(0.4)), true),
        (Some(json!(1e300)), true),
        (Some(json!(u64::MAX)), true),
        (None, true),
        (Some(json!(-5)), false),
        (Some(json!("soon")), false),
    ] {
        let server = server().await;
        stating(&server, stated.clone());
        let client = client(&server, Duration::from_secs(5));
        for n in 0..3 {
            let sent = client
                .deliver(TRIGGER, "{}")
                .delivery_id(delivery(&format!("hostile-{n}")))
                .send()
                .await;
            match sent {
                Ok(_) => assert!(delivers, "{stated:?}"),
                Err(error) => {
                    assert!(!delivers, "{stated:?}: {error}");
                    assert_eq!(error.kind(), ErrorKind::TokenExchange);
                    assert!(error.to_string().contains("bad expires_in"), "{error}");
                }
            }
        }
        // Three calls back to back: a held token serves all three; a token that expires at
        // once serves the first and the backoff serves the others; a refusal is shared.
        let count = exchanges(&server).len();
        assert!(count <= 3, "{stated:?}: {count} exchanges");
    }
}

#[tokio::test]
async fn a_call_out_of_time_for_its_token_states_the_time_it_had_not_the_attempt_timeout() {
    let server = server().await;
    server.inject(
        Fault::delay_then_handle(Duration::from_secs(30))
            .on("POST", TOKEN)
            .times(u32::MAX),
    );
    let client = client(&server, Duration::from_secs(2));

    let error = client
        .deliver(TRIGGER, "{}")
        .delivery_id(delivery("slow-token"))
        .send()
        .await
        .expect_err("no token in 2 s");

    let message = error.to_string();
    let left = message
        .strip_prefix("token exchange failed: no answer from the token endpoint within the ")
        .and_then(|rest| rest.split_once("s the call had left"))
        .map(|(figure, rest)| (figure.parse::<f64>().expect("seconds"), rest))
        .unwrap_or_else(|| panic!("{message}"));
    assert!(left.0 <= 2.0, "the time left of a 2 s budget: {message}");
    assert_eq!(
        left.1,
        " (an exchange may take up to 15s, the attempt timeout)"
    );
    assert!(server.ledger().requests_to("POST", WEBHOOKS).is_empty());
}
