//! Signed deliveries (`docs/wire-contract.md`, "Signed deliveries"): every attempt is signed again
//! when it is sent, over the same body bytes and delivery ID, and the contract server's verdicts
//! and a third-party Standard Webhooks verifier (the `standardwebhooks` crate) both accept it.
//!
//! `standardwebhooks` checks timestamps against the machine's real clock, which a test cannot
//! move. So where a test moves time (a retry 6 minutes later, in tokio's paused time and on the
//! server's injected clock), the third-party crate recomputes the signature for the attempt's own
//! timestamp, and the contract server, whose clock moved with the test's, judges the time window.

mod support;

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use hodoflow_mock::{
    DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, Fault, ManualClock, MockServer, MockServerBuilder,
    SignatureVerdict, SignedRecord, TriggerSeed,
};
use hodoflow_retry::{
    Budget, ErrorKind, HodoflowClient,
    attempt::TransportKind,
    schedule::Schedule,
    transport::{Answer, AttemptFuture, AttemptTransport, Outgoing},
    webhook::{SigningSecret, WebhookOutcome},
};
use standardwebhooks::Webhook;
use support::{
    Captured, EVENT, TRIGGER, WEBHOOKS, assert_nothing_sent, assert_stopped_at_once, builder,
    deliver, delivery, demo, fast_limits, identity, server_with,
};

/// The trigger's secret (the `standardwebhooks` crate's own test secret, 24 bytes).
const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
/// The secret rotated in beside it (31 bytes).
const NEXT: &str = "whsec_bmV4dC1zZWNyZXQtZm9yLXRoZS1yb3RhdGlvbi0wMQ==";
/// A secret the trigger never had (34 bytes).
const WRONG: &str = "whsec_d3Jvbmctc2VjcmV0LXRoZS10cmlnZ2VyLW5ldmVyLWhhZA==";

/// The demo trigger, demanding deliveries signed with any of `secrets`.
fn signed_trigger(secrets: &[&str]) -> TriggerSeed {
    secrets.iter().fold(TriggerSeed::demo(), |trigger, secret| {
        trigger.signing_secret(secret)
    })
}

/// A contract server whose demo trigger demands signatures with `secrets`.
async fn signed_server(secrets: &[&str]) -> MockServer {
    let builder = MockServer::builder()
        .limits(fast_limits())
        .trigger(signed_trigger(secrets));
    server_with(builder).await
}

/// A client of `server` that signs every delivery with `secrets`.
fn signing_client(server: &MockServer, secrets: &[&str]) -> HodoflowClient {
    demo(builder(server).signing_secrets(secrets.iter().copied()))
}

/// The third-party verifier's verdict on `record`, on the machine's clock.
fn third_party(secret: &str, record: &SignedRecord) -> Result<(), standardwebhooks::WebhookError> {
    Webhook::new(secret)
        .expect("a valid secret")
        .verify(record.body(), record.headers())
}

/// The `v1` signatures `record` carried.
fn signatures(record: &SignedRecord) -> Vec<String> {
    let value = record.headers()["webhook-signature"].to_str().unwrap();
    value.split(' ').map(str::to_owned).collect()
}

#[tokio::test]
async fn two_503s_then_202_are_three_attempts_with_one_id_one_body_three_timestamps_and_valid_signatures()
 {
    let server = signed_server(&[SECRET]).await;
    // Failed in the handler, after the signature check: each 503 says Retry-After: 1.
    server.inject(Fault::fail_execution(503).on("POST", WEBHOOKS).times(2));

    let delivery = deliver(&signing_client(&server, &[SECRET]), "order-4711:signed").await;

    assert_eq!(delivery.attempts().len(), 3);
    let id = identity(&delivery);
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery(&id), [support::run_id(&delivery)]);
    assert_eq!(ledger.requests_with_key(&id).len(), 3);
    let received = ledger.signed_deliveries_with_id(&id);
    assert_eq!(received.len(), 3, "{received:?}");
    let timestamps: BTreeSet<i64> = received.iter().filter_map(|r| r.timestamp).collect();
    assert_eq!(timestamps.len(), 3, "a fresh timestamp each: {received:?}");
    for record in &received {
        assert_eq!(record.verdict, SignatureVerdict::Accepted);
        assert_eq!(record.body().as_ref(), EVENT, "the same bytes every time");
        assert_eq!(record.webhook_id.as_deref(), Some(id.as_str()));
        third_party(SECRET, record).expect("standardwebhooks accepts every attempt");
    }
}

#[tokio::test]
async fn a_lost_202_on_a_signed_trigger_is_retried_signed_and_answered_duplicate_with_one_run() {
    let server = signed_server(&[SECRET]).await;
    server.inject(Fault::execute_then_close().on("POST", WEBHOOKS));

    let delivery = deliver(&signing_client(&server, &[SECRET]), "order-4711:lost").await;

    assert_eq!(delivery.outcome(), &WebhookOutcome::Duplicate);
    let id = identity(&delivery);
    let ledger = server.ledger();
    assert_eq!(ledger.runs_for_delivery(&id).len(), 1, "exactly one run");
    assert_eq!(ledger.duplicates_for_delivery(&id), 1);
    let received = ledger.signed_deliveries_with_id(&id);
    assert_eq!(received.len(), 2);
    for record in received {
        assert_eq!(record.verdict, SignatureVerdict::Accepted);
        third_party(SECRET, record).unwrap();
    }
}

#[tokio::test]
async fn a_wrong_secret_stops_after_one_422_naming_its_fingerprint_and_never_the_secret() {
    let (captured, _guard) = Captured::on_this_thread(tracing::Level::TRACE);
    let server = signed_server(&[SECRET]).await;
    let id = delivery("order-4711:wrong-secret");

    let error = signing_client(&server, &[WRONG])
        .deliver(TRIGGER, EVENT)
        .delivery_id(id.clone())
        .send()
        .await
        .expect_err("the trigger refuses the signature");

    assert_stopped_at_once(&error, ErrorKind::Unprocessable, &server);
    let message = error.to_string();
    let fingerprint = SigningSecret::new(WRONG).unwrap().fingerprint();
    assert!(message.contains(&fingerprint), "{message}");
    assert!(
        message.contains("a re-signed retry with the same secret cannot succeed"),
        "{message}"
    );
    let ledger = server.ledger();
    assert_eq!(ledger.total_runs(), 0);
    let received = ledger.signed_deliveries_with_id(id.key().as_str());
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].verdict, SignatureVerdict::NoMatch);
    let sent_signature = signatures(received[0]).remove(0);
    drop(_guard);
    let output = format!("{} {message} {error:?}", captured.text());
    for secret in [WRONG, &WRONG[6..], &sent_signature[3..]] {
        assert!(!output.contains(secret), "the output shows {secret}");
    }

    // Nothing was recorded under the refused ID: signed with the right secret, it runs once.
    let corrected = signing_client(&server, &[SECRET])
        .deliver(TRIGGER, EVENT)
        .delivery_id(id.clone())
        .send()
        .await
        .unwrap();
    assert!(matches!(
        corrected.outcome(),
        WebhookOutcome::Accepted { .. }
    ));
    assert_eq!(
        server.ledger().runs_for_delivery(id.key().as_str()).len(),
        1
    );
}

#[tokio::test]
async fn a_rotation_sends_both_signatures_and_a_verifier_holding_either_secret_accepts() {
    let server = signed_server(&[SECRET, NEXT]).await;
    let client = signing_client(&server, &[SECRET, NEXT]);

    let first = deliver(&client, "order-4711:rotation").await;
    // The rotation ends: the trigger holds the new secret only.
    server.put_trigger(signed_trigger(&[NEXT]));
    let second = deliver(&client, "order-4711:rotated").await;

    let ledger = server.ledger();
    for delivery in [&first, &second] {
        let received = ledger.signed_deliveries_with_id(&identity(delivery));
        let [record] = received.as_slice() else {
            panic!("one attempt: {received:?}");
        };
        assert_eq!(record.verdict, SignatureVerdict::Accepted);
        assert_eq!(signatures(record).len(), 2, "one signature per secret");
        third_party(SECRET, record).expect("a verifier with the old secret accepts");
        third_party(NEXT, record).expect("a verifier with the new secret accepts");
        assert!(
            third_party(WRONG, record).is_err(),
            "and with another, refuses"
        );
    }
}

#[tokio::test]
async fn a_rotated_secret_refuses_once_and_the_error_names_both_fingerprints() {
    let server = signed_server(&[SECRET]).await;
    server.inject(Fault::rotated_secret().on("POST", WEBHOOKS));

    let error = signing_client(&server, &[SECRET, NEXT])
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery("order-4711:rotated-away"))
        .send()
        .await
        .unwrap_err();

    assert_stopped_at_once(&error, ErrorKind::Unprocessable, &server);
    for secret in [SECRET, NEXT] {
        let fingerprint = SigningSecret::new(secret).unwrap().fingerprint();
        assert!(error.to_string().contains(&fingerprint), "{error}");
    }
}

#[tokio::test]
async fn a_delivery_may_sign_with_its_own_secret_and_a_malformed_one_sends_nothing() {
    let server = signed_server(&[SECRET]).await;
    let client = demo(builder(&server));

    let unsigned = client
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery("order-4711:unsigned"))
        .send()
        .await
        .unwrap_err();
    let own = client
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery("order-4711:own-secret"))
        .signing_secret(SECRET)
        .send()
        .await
        .unwrap();

    assert_eq!(unsigned.status().map(|s| s.as_u16()), Some(422));
    assert!(!unsigned.to_string().contains("fingerprint"), "{unsigned}");
    let verdicts: Vec<SignatureVerdict> = server
        .ledger()
        .signed_deliveries()
        .iter()
        .map(|record| record.verdict)
        .collect();
    assert_eq!(
        verdicts,
        [SignatureVerdict::MissingHeader, SignatureVerdict::Accepted]
    );
    assert!(matches!(own.outcome(), WebhookOutcome::Accepted { .. }));

    let fresh = signed_server(&[SECRET]).await;
    for malformed in [
        "C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
        "whsec_c2hvcnQtc2VjcmV0",
        "whsec_C2FVsBQI!!!scChlQIMV+b5sSYspob7oD",
    ] {
        let error = demo(builder(&fresh))
            .deliver(TRIGGER, EVENT)
            .delivery_id(delivery("order-4711:malformed"))
            .signing_secret(malformed)
            .send()
            .await
            .unwrap_err();
        assert_nothing_sent(&error, ErrorKind::InvalidInput, &fresh);
        assert!(!error.to_string().contains(&malformed[6..14]), "{error}");
    }
}

#[test]
fn a_malformed_client_secret_is_an_error_at_build_time_that_never_quotes_it() {
    for malformed in [
        "",
        "whsec_",
        "whsec_c2hvcnQtc2VjcmV0",
        "sk_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
    ] {
        let error = HodoflowClient::builder("http://127.0.0.1:9")
            .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
            .signing_secrets([SECRET, malformed])
            .build()
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        let text = format!("{error} {error:?}");
        assert!(text.contains("signing secret 2 of 2"), "{text}");
        assert!(
            malformed.len() < 8 || !text.contains(&malformed[3..12]),
            "{text}"
        );
        assert!(!text.contains(&SECRET[6..]), "{text}");
    }
}

/// Waits the same time before every retry: the wait the test chose.
#[derive(Debug)]
struct Steady(Duration);

impl Schedule for Steady {
    fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send> {
        Box::new(std::iter::repeat(self.0))
    }
}

/// Sends each attempt to the contract server over TCP from a thread of its own, blocking the
/// test's runtime meanwhile: tokio's paused clock cannot drive a real socket, and a blocked
/// runtime does not move its clock. Before each attempt the server's injected clock is moved on
/// by the virtual time passed since the last one, so both clocks agree.
#[derive(Debug)]
struct Forward {
    clock: ManualClock,
    last: Mutex<tokio::time::Instant>,
}

impl AttemptTransport for Forward {
    fn send<'a>(&'a self, attempt: Outgoing<'a>) -> AttemptFuture<'a> {
        let now = tokio::time::Instant::now();
        let passed = now - std::mem::replace(&mut *self.last.lock().unwrap(), now);
        self.clock.advance(passed);
        let request = (
            attempt.method().clone(),
            attempt.url().to_owned(),
            attempt.headers().clone(),
            attempt.body().clone(),
        );
        let answer = blocking(move |http| async move {
            let (method, url, headers, body) = request;
            let response = http
                .request(method, url)
                .headers(headers)
                .body(body)
                .send()
                .await?;
            let status = response.status();
            let headers = response.headers().clone();
            Ok(Answer::response(status, headers, response.bytes().await?))
        })
        .unwrap_or_else(|_: reqwest::Error| Answer::no_response(TransportKind::Other));
        Box::pin(async move { answer })
    }
}

/// Runs `work` with a reqwest client on a runtime of its own, in a thread of its own.
fn blocking<T, F>(work: impl FnOnce(reqwest::Client) -> F + Send + 'static) -> T
where
    T: Send + 'static,
    F: Future<Output = T>,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(work(reqwest::Client::new()))
    })
    .join()
    .expect("the forwarding thread finishes")
}

/// A contract server on a runtime of its own (real time, its own thread), for a test whose
/// runtime is paused.
fn server_apart(builder: MockServerBuilder) -> (MockServer, tokio::runtime::Runtime) {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime.block_on(builder.start()).unwrap();
        (server, runtime)
    })
    .join()
    .unwrap()
}

/// A bearer token of the demo client, exchanged over TCP from a thread of its own.
fn demo_token(server: &MockServer) -> String {
    let url = format!("{}/oauth/token", server.base_url());
    blocking(move |http| async move {
        let form = [
            ("grant_type", "client_credentials"),
            ("client_id", DEMO_CLIENT_ID),
            ("client_secret", DEMO_CLIENT_SECRET),
        ];
        let answer = http
            .post(url)
            .form(&form)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        answer["access_token"].as_str().unwrap().to_owned()
    })
}

/// Sends `record`'s headers and body to the trigger again, now; the status answered.
fn replay(server: &MockServer, token: &str, record: &SignedRecord) -> u16 {
    let url = server.webhook_url(TRIGGER);
    let (headers, body, token) = (
        record.headers().clone(),
        record.body().clone(),
        token.to_owned(),
    );
    blocking(move |http| async move {
        let sent = http
            .post(url)
            .bearer_auth(token)
            .header("idempotency-key", "replayed-headers")
            .headers(headers)
            .body(Bytes::clone(&body))
            .send()
            .await
            .unwrap();
        sent.status().as_u16()
    })
}

#[tokio::test(start_paused = true)]
async fn a_retry_six_minutes_later_is_signed_again_and_verifies_while_the_first_signature_went_stale()
 {
    let clock = ManualClock::new();
    let builder = MockServer::builder()
        .limits(fast_limits())
        .clock(clock.clone())
        .trigger(signed_trigger(&[SECRET]));
    let (server, runtime) = server_apart(builder);
    let token = demo_token(&server);
    server.inject(Fault::fail_execution(503).on("POST", WEBHOOKS));
    let client = HodoflowClient::builder(server.base_url())
        .bearer_token(token.as_str())
        .signing_secret(SECRET)
        .transport(Forward {
            clock,
            last: Mutex::new(tokio::time::Instant::now()),
        })
        .build()
        .unwrap();
    let six_minutes = Duration::from_secs(360);
    let id = delivery("order-4711:six-minutes");

    let delivery = client
        .deliver(TRIGGER, EVENT)
        .delivery_id(id.clone())
        .schedule(Steady(six_minutes))
        .budget(
            Budget::new()
                .max_attempts(3)
                .max_elapsed(Duration::from_secs(900)),
        )
        .send()
        .await
        .unwrap();

    assert_eq!(delivery.attempts().len(), 2);
    assert!(matches!(
        delivery.outcome(),
        WebhookOutcome::Accepted { .. }
    ));
    let ledger = server.ledger();
    let received = ledger.signed_deliveries_with_id(id.key().as_str());
    let [first, retry] = received.as_slice() else {
        panic!("two attempts: {received:?}");
    };
    assert!(retry.timestamp.unwrap() - first.timestamp.unwrap() >= 360);
    assert_eq!(retry.verdict, SignatureVerdict::Accepted, "six minutes on");
    // The third-party crate computes the signature of the retry's own timestamp...
    let expected = Webhook::new(SECRET)
        .unwrap()
        .sign(id.key().as_str(), retry.timestamp.unwrap(), retry.body())
        .unwrap();
    assert_eq!(signatures(retry), [expected]);
    // ... and accepts the first attempt on the machine's clock, which did not move.
    third_party(SECRET, first).expect("the first attempt verifies when it is sent");
    // Sent again now, the first attempt's headers are stale on the server's moved clock.
    assert_eq!(replay(&server, &token, first), 422);
    let last = server.ledger().signed_deliveries().last().unwrap().verdict;
    assert_eq!(last, SignatureVerdict::Stale);
    assert_eq!(
        server.ledger().runs_for_delivery(id.key().as_str()).len(),
        1
    );
    drop(server);
    runtime.shutdown_background();
}
