//! HTTP/2 semantics in the matrix (RFC 9113 section 8.7): a stream the server refused with
//! `REFUSED_STREAM`, or cut off by a `GOAWAY` whose last stream ID is below it, was not
//! processed: it is retried, and never reported as "may have run". Any other reset after the
//! request was sent may have run. Everything here runs over h2c against the contract server.

mod support;

use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, Fault, MockServer};
use hodoflow_retry::{
    ErrorKind, HodoflowClient,
    attempt::{AttemptResult, TransportKind},
    auth::{AccessToken, ClientCredentials, ExchangeFuture, TokenExchanger},
    webhook::WebhookOutcome,
};
use support::{
    EVENT, JSON_API, Protocol, TRIGGER, WEBHOOKS, builder_for, delivery, demo, identity, key,
    project, server, statuses,
};

const REFUSED: AttemptResult = AttemptResult::Transport(TransportKind::Refused);

/// A client of `server` over h2c with the demo credentials.
fn h2c(server: &MockServer) -> HodoflowClient {
    demo(builder_for(server, Protocol::H2c))
}

/// Hands out one token exchanged beforehand, so the first connection the client opens is the
/// one that carries the call, not a token exchange.
struct Prefetched(AccessToken);

impl TokenExchanger for Prefetched {
    fn exchange(&self) -> ExchangeFuture<'_> {
        let token = self.0.clone();
        Box::pin(async move { Ok(token) })
    }
}

/// A client over h2c whose token is already exchanged.
async fn h2c_with_token(server: &MockServer) -> HodoflowClient {
    let token = ClientCredentials::new(&server.base_url(), DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .unwrap()
        .exchange()
        .await
        .expect("a token");
    builder_for(server, Protocol::H2c)
        .exchanger(Prefetched(token))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_client_with_prior_knowledge_speaks_http2_to_the_contract_server_token_exchange_included()
{
    let server = server().await;

    support::deliver(&h2c(&server), "order-4711:h2c").await;
    support::deliver(&support::client(&server), "order-4711:http1").await;

    let versions: Vec<_> = server
        .ledger()
        .requests()
        .iter()
        .map(|request| (request.path.clone(), request.version.clone()))
        .collect();
    let webhook = "/api/v1/webhooks/<redacted>".to_owned();
    assert_eq!(
        versions,
        [
            ("/oauth/token".to_owned(), "HTTP/2.0".to_owned()),
            (webhook.clone(), "HTTP/2.0".to_owned()),
            ("/oauth/token".to_owned(), "HTTP/1.1".to_owned()),
            (webhook, "HTTP/1.1".to_owned()),
        ]
    );
}

#[tokio::test]
async fn a_refused_stream_is_retried_and_the_delivery_runs_once() {
    let server = server().await;
    server.inject(Fault::refuse_stream().on("POST", WEBHOOKS));

    let delivery = support::deliver(&h2c(&server), "order-4711:refused-once").await;

    assert!(
        matches!(delivery.outcome(), WebhookOutcome::Accepted { .. }),
        "the refused attempt was never processed, so the retry is the first delivery: {:?}",
        delivery.outcome()
    );
    let results: Vec<_> = delivery.attempts().iter().map(|a| a.result()).collect();
    assert_eq!(results[0], REFUSED);
    assert_eq!(statuses(delivery.attempts()), [None, Some(202)]);
    let key = identity(&delivery);
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery(&key).len(), 1, "exactly one run");
    assert_eq!(ledger.duplicates_for_delivery(&key), 0);
    let sent = ledger.requests_with_key(&key);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].fault.as_deref(), Some("refuse_stream"));
}

#[tokio::test]
async fn a_write_refused_on_every_attempt_never_ran_and_says_so() {
    let server = server().await;
    server.inject(Fault::refuse_stream().on("POST", JSON_API).times(100));
    let key = key("project-refused:create");

    let error = h2c(&server)
        .create(support::PROJECTS, key.clone(), project("Refused"))
        .budget(support::budget(3))
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::Transport, "{error}");
    assert!(!error.may_have_run(), "every stream was refused: {error:?}");
    let results: Vec<_> = error.attempts().iter().map(|a| a.result()).collect();
    assert_eq!(results, [REFUSED; 3]);
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed(key.as_str()), 0);
    assert_eq!(ledger.requests_with_key(key.as_str()).len(), 3);
}

#[tokio::test]
async fn a_goaway_below_the_request_is_retried_on_a_new_connection_and_runs_once() {
    let server = server().await;
    let client = h2c_with_token(&server).await;
    server.go_away_connections(1);

    let delivery = support::deliver(&client, "order-4711:goaway").await;

    let results: Vec<_> = delivery.attempts().iter().map(|a| a.result()).collect();
    assert_eq!(results[0], REFUSED, "{:?}", delivery.attempts());
    assert_eq!(statuses(delivery.attempts()), [None, Some(202)]);
    let key = identity(&delivery);
    let ledger = server.ledger();
    assert_eq!(ledger.go_aways(), 1);
    assert_eq!(ledger.runs_for_delivery(&key).len(), 1, "exactly one run");
    assert_eq!(
        ledger.requests_with_key(&key).len(),
        1,
        "the refused request never reached the routes"
    );
}

#[tokio::test]
async fn a_delivery_whose_every_connection_goes_away_never_ran() {
    let server = server().await;
    let client = h2c_with_token(&server).await;
    server.go_away_connections(100);

    let error = client
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery("order-4711:goaway-always"))
        .budget(support::budget(3))
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::Transport, "{error}");
    assert!(!error.may_have_run(), "{error:?}");
    let results: Vec<_> = error.attempts().iter().map(|a| a.result()).collect();
    assert_eq!(results, [REFUSED; 3]);
    let ledger = server.ledger();
    assert_eq!(ledger.go_aways(), 3);
    assert_eq!(ledger.total_runs(), 0);
}

#[tokio::test]
async fn a_reset_after_the_request_was_sent_may_have_run() {
    let server = server().await;
    // The write commits, then its stream is reset with INTERNAL_ERROR: no word that it did not run.
    server.inject(Fault::execute_then_close().on("POST", JSON_API).times(100));
    let key = key("project-reset:create");

    let error = h2c(&server)
        .create(support::PROJECTS, key.clone(), project("Reset"))
        .budget(support::budget(2))
        .send()
        .await
        .unwrap_err();

    assert!(error.may_have_run(), "{error:?}");
    let results: Vec<_> = error.attempts().iter().map(|a| a.result()).collect();
    let closed = AttemptResult::Transport(TransportKind::Closed);
    assert_eq!(results, [closed; 2]);
    assert_eq!(server.ledger().writes_executed(key.as_str()), 1, "it ran");
}

#[tokio::test]
async fn over_http1_a_refusal_is_a_closed_connection_that_may_have_run() {
    let server = server().await;
    server.inject(Fault::refuse_stream().on("POST", JSON_API).times(100));

    let error = support::client_with(&server, support::budget(2))
        .create(
            support::PROJECTS,
            key("project-http1:create"),
            project("Old"),
        )
        .send()
        .await
        .unwrap_err();

    assert!(
        error.may_have_run(),
        "HTTP/1.1 cannot say it was not processed"
    );
    let results: Vec<_> = error.attempts().iter().map(|a| a.result()).collect();
    assert!(!results.contains(&REFUSED), "{results:?}");
}
