//! The draft's three answers, from a small server of the draft over real TCP on 127.0.0.1:0,
//! through the client's own engine; each test checks the server's ledger (what it executed).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap as AxumHeaders, StatusCode};
use axum::routing::post as route_post;
use bytes::Bytes;

use super::post;
use crate::core::attempt::AttemptResult;
use crate::core::error::ErrorKind;
use crate::core::key::IdempotencyKey;
use crate::core::transport::Http;
use crate::{Backoff, Budget, RetryingClient};

/// What the server did with one key: running, or done with the answer it stored.
enum Entry {
    Running { body: Bytes },
    Done { body: Bytes, answer: String },
}

#[derive(Default)]
struct Ledger {
    keys: HashMap<String, Entry>,
    /// Operations executed, in order.
    executed: Vec<String>,
}

#[derive(Clone)]
struct Server {
    ledger: Arc<Mutex<Ledger>>,
    /// Set when an operation runs until the server has answered a 409 for its key (so a retry
    /// surely meets it in flight, however slow the machine); unset, it runs at once.
    conflict_seen: Option<Arc<tokio::sync::Notify>>,
}

/// `POST /orders` as the draft says: 400 without a key, 409 while the key's original runs,
/// 422 for the key with another payload, the stored answer for a repeat, else executed once.
async fn orders(
    State(server): State<Server>,
    headers: AxumHeaders,
    body: Bytes,
) -> (StatusCode, String) {
    let Some(key) = headers
        .get("idempotency-key")
        .and_then(|key| key.to_str().ok())
    else {
        return (
            StatusCode::BAD_REQUEST,
            "missing Idempotency-Key".to_owned(),
        );
    };
    let key = key.to_owned();
    {
        let mut ledger = server.ledger.lock().unwrap();
        match ledger.keys.get(&key) {
            Some(Entry::Running { body: first } | Entry::Done { body: first, .. })
                if *first != body =>
            {
                return (StatusCode::UNPROCESSABLE_ENTITY, "key reused".to_owned());
            }
            Some(Entry::Running { .. }) => {
                if let Some(seen) = &server.conflict_seen {
                    seen.notify_one();
                }
                return (StatusCode::CONFLICT, "in flight".to_owned());
            }
            Some(Entry::Done { answer, .. }) => return (StatusCode::CREATED, answer.clone()),
            None => {
                ledger
                    .keys
                    .insert(key.clone(), Entry::Running { body: body.clone() });
            }
        }
    }
    // The operation runs to its end whether or not the client waits for it, as a server's
    // does: a handler dropped with its connection must not leave the key running for ever.
    let run = tokio::spawn(async move {
        if let Some(seen) = &server.conflict_seen {
            seen.notified().await;
        }
        let mut ledger = server.ledger.lock().unwrap();
        ledger.executed.push(key.clone());
        let answer = format!(r#"{{"order":{}}}"#, ledger.executed.len());
        ledger.keys.insert(
            key,
            Entry::Done {
                body,
                answer: answer.clone(),
            },
        );
        answer
    });
    (StatusCode::CREATED, run.await.unwrap())
}

/// `held`: each operation runs until a retry of it has met the 409.
async fn serve(held: bool) -> (String, Arc<Mutex<Ledger>>) {
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let app = Router::new()
        .route("/orders", route_post(orders))
        .with_state(Server {
            ledger: Arc::clone(&ledger),
            conflict_seen: held.then(Arc::default),
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), ledger)
}

fn client(base: &str, attempt_timeout: Duration) -> RetryingClient {
    RetryingClient::builder(base)
        .bearer_token("draft-token")
        .budget(
            Budget::new()
                .max_attempts(10)
                .attempt_timeout(attempt_timeout)
                .max_elapsed(Duration::from_secs(10)),
        )
        .backoff(
            Backoff::new()
                .base(Duration::from_millis(5))
                .retry_after_fallback(Duration::from_millis(20)),
        )
        .build()
        .unwrap()
}

/// Sends `key` (or no key) and `body` to `/orders` through the client's engine.
async fn send(
    client: &RetryingClient,
    key: Option<&IdempotencyKey>,
    body: &'static str,
) -> crate::Result<crate::core::answer::FinalAnswer> {
    let inner = &client.inner;
    let request = post(
        &inner.base,
        "/orders",
        key,
        Bytes::from_static(body.as_bytes()),
    )?;
    inner
        .engine
        .run(&request, &inner.policy, &mut Http(&inner.http))
        .await
}

fn statuses(attempts: &[crate::Attempt]) -> Vec<String> {
    attempts
        .iter()
        .map(|attempt| match attempt.result() {
            AttemptResult::Status(status) => status.as_u16().to_string(),
            AttemptResult::Transport(kind) => kind.as_str().to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn a_retry_that_meets_its_original_in_flight_waits_out_the_409_and_gets_the_one_answer() {
    // The work outlasts the first attempt's timeout: the retry finds it running.
    let (base, ledger) = serve(true).await;
    let client = client(&base, Duration::from_millis(100));
    let key = IdempotencyKey::new("order-1").unwrap();
    let answered = send(&client, Some(&key), r#"{"sku":"a"}"#).await.unwrap();
    assert_eq!(answered.status, StatusCode::CREATED);
    assert_eq!(answered.body, Bytes::from_static(br#"{"order":1}"#));
    let seen = statuses(&answered.attempts);
    assert_eq!(
        seen.first().map(String::as_str),
        Some("timeout"),
        "{seen:?}"
    );
    assert!(seen.iter().any(|status| status == "409"), "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("201"), "{seen:?}");
    assert_eq!(ledger.lock().unwrap().executed, ["order-1"]);
}

#[tokio::test]
async fn a_key_reused_with_another_payload_stops_at_the_422_without_a_retry() {
    let (base, ledger) = serve(false).await;
    let client = client(&base, Duration::from_secs(2));
    let key = IdempotencyKey::new("order-2").unwrap();
    send(&client, Some(&key), r#"{"sku":"a"}"#).await.unwrap();
    let error = send(&client, Some(&key), r#"{"sku":"b"}"#)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::KeyReused);
    assert_eq!(statuses(error.attempts()), ["422"]);
    assert_eq!(ledger.lock().unwrap().executed, ["order-2"]);
}

#[tokio::test]
async fn a_request_without_its_key_stops_at_the_400_and_nothing_runs() {
    let (base, ledger) = serve(false).await;
    let client = client(&base, Duration::from_secs(2));
    let error = send(&client, None, r#"{"sku":"a"}"#).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::ClientError);
    assert_eq!(statuses(error.attempts()), ["400"]);
    assert!(!error.is_retryable());
    assert!(ledger.lock().unwrap().executed.is_empty());
}
