//! Run with: `cargo run --example custom_vendor`
//!
//! A third vendor, written as data with public items only: an API that follows the IETF
//! Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header) and nothing else. The draft
//! says a server answers 400 to a request without its key, 409 while the key's original request
//! is still in flight, and 422 to a key reused with another payload. Its [`Profile`] is the
//! retry matrix and the scopes below; the client sends through it with the same engine,
//! budgets and limiters as Hodoflow's and Modulify's tables.
//!
//! The example starts a small server of the draft on 127.0.0.1 (module `draft_server`), sends
//! an order whose first answer is lost to a timeout (the retry meets the original in flight,
//! waits out the 409 and gets the one answer), then reuses the key with another payload (422,
//! not retried), and checks the server's ledger: each order ran once.

use std::sync::LazyLock;
use std::time::Duration;

use hodoflow_retry::profile::{Profile, ProfileBuilder, Reach, When};
use hodoflow_retry::{
    Backoff, Budget, ErrorKind, IdempotencyKey, RetryingClient, Verdict, attempt::AttemptResult,
};
use http::Method;

/// The draft's profile, built once for the process.
pub static DRAFT: LazyLock<Profile> = LazyLock::new(|| {
    draft("ietf_draft")
        .build()
        .expect("the draft's profile is well formed")
});

/// The draft's retry matrix and scopes, under `name`.
pub fn draft(name: &str) -> ProfileBuilder {
    use ErrorKind::{ClientError, KeyReused, UnexpectedStatus};
    use Verdict::{RetryAfterBackoff, RetryAfterServerWait, Stop, Success};
    Profile::builder(name)
        .rule(
            When::NoResponse,
            RetryAfterBackoff,
            "No answer: retry with the same key",
        )
        .rule(
            When::Range(200, 299),
            Success,
            "Done, or the stored answer replayed",
        )
        .rule(
            When::Status(&[400]),
            Stop(ClientError),
            "The key is missing: MUST reply 400",
        )
        .rule(
            When::Status(&[409]),
            RetryAfterServerWait,
            "The original is in flight: MUST reply 409",
        )
        .rule(
            When::Status(&[422]),
            Stop(KeyReused),
            "The key was reused with another payload: MUST reply 422",
        )
        .rule(
            When::Status(&[429]),
            RetryAfterServerWait,
            "Too many requests: after Retry-After",
        )
        .rule(
            When::Status(&[500, 502, 503, 504]),
            RetryAfterBackoff,
            "Transient: retry with the same key",
        )
        .rule(When::Other, Stop(UnexpectedStatus), "Outside the draft")
        // A 409 is this key's alone; a 429 speaks for the credential.
        .in_progress(409)
        .closes(409, Reach::Call)
        .closes(429, Reach::Credential)
}

/// A client of the draft's server at `base`: short waits, so the example ends at once.
pub fn client(base: &str, attempt_timeout: Duration) -> hodoflow_retry::Result<RetryingClient> {
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
}

/// `POST /orders` of `body` under `key`, through the draft's profile.
pub async fn order(
    client: &RetryingClient,
    key: &str,
    body: &'static str,
) -> hodoflow_retry::Result<hodoflow_retry::Response> {
    client
        .request(*DRAFT, Method::POST, "/orders")
        .idempotency_key(IdempotencyKey::new(key)?)
        .body(body)
        .send()
        .await
}

/// What each attempt got: a status, or the transport's failure (`timeout`).
pub fn seen(attempts: &[hodoflow_retry::attempt::Attempt]) -> Vec<String> {
    attempts
        .iter()
        .map(|attempt| match (attempt.status(), attempt.result()) {
            (Some(status), _) => status.as_u16().to_string(),
            (None, AttemptResult::Transport(kind)) => kind.as_str().to_owned(),
            (None, _) => "no answer".to_owned(),
        })
        .collect()
}

/// The example: a lost answer, then a reused key, against a server of the draft.
pub async fn run() -> Result<(), Box<dyn std::error::Error>> {
    // Each order runs until a retry of it has met the 409, so the retry surely finds it in flight.
    let server = draft_server::start(true).await?;
    // The first attempt's timeout is shorter than the work: its answer is lost.
    let client = client(&server.base, Duration::from_millis(100))?;

    let placed = order(&client, "order-4711", r#"{"sku":"a-1"}"#).await?;
    println!(
        "order-4711: {} after {:?}: {}",
        placed.status(),
        seen(placed.attempts()),
        String::from_utf8_lossy(placed.body())
    );

    let reused = order(&client, "order-4711", r#"{"sku":"b-2"}"#)
        .await
        .expect_err("the draft refuses a reused key");
    assert_eq!(reused.kind(), ErrorKind::KeyReused);
    println!(
        "order-4711 with another payload: {reused} (may have run: {})",
        reused.may_have_run()
    );

    let executed = server.executed();
    println!("the server ran: {executed:?}");
    assert_eq!(executed, ["order-4711"], "one order, run once");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

/// A small server of the draft over real TCP, with a ledger of what it executed.
pub mod draft_server {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;

    /// What the server did with one key: running, or done with the answer it stored.
    enum Entry {
        /// `seen`, when the server holds operations: told when a retry of this key met the 409.
        Running {
            body: Bytes,
            seen: Option<Arc<tokio::sync::Notify>>,
        },
        Done {
            body: Bytes,
            answer: String,
        },
    }

    #[derive(Default)]
    struct Ledger {
        keys: HashMap<String, Entry>,
        /// Operations executed, in order.
        executed: Vec<String>,
    }

    #[derive(Clone)]
    struct Shared {
        ledger: Arc<Mutex<Ledger>>,
        /// Whether an operation runs until the server has answered a 409 for its own key (so a
        /// retry surely meets it in flight, however slow the machine); else it runs at once.
        held: bool,
    }

    /// A running server of the draft.
    pub struct DraftServer {
        /// Its base URL, `http://127.0.0.1:<port>`.
        pub base: String,
        shared: Shared,
    }

    impl std::fmt::Debug for DraftServer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("DraftServer")
                .field("base", &self.base)
                .finish_non_exhaustive()
        }
    }

    impl DraftServer {
        /// The keys of the operations it executed, in order.
        pub fn executed(&self) -> Vec<String> {
            self.shared.ledger.lock().unwrap().executed.clone()
        }
    }

    /// Starts a server on 127.0.0.1:0. `held`: each operation runs until a retry of it has met
    /// the 409.
    pub async fn start(held: bool) -> std::io::Result<DraftServer> {
        let shared = Shared {
            ledger: Arc::default(),
            held,
        };
        let app = Router::new()
            .route("/orders", post(orders))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(DraftServer { base, shared })
    }

    /// `POST /orders` as the draft says: 400 without a key, 409 while the key's original runs,
    /// 422 for the key with another payload, the stored answer for a repeat, else executed once.
    async fn orders(
        State(shared): State<Shared>,
        headers: HeaderMap,
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
        let seen = {
            let mut ledger = shared.ledger.lock().unwrap();
            match ledger.keys.get(&key) {
                Some(Entry::Running { body: first, .. } | Entry::Done { body: first, .. })
                    if *first != body =>
                {
                    return (StatusCode::UNPROCESSABLE_ENTITY, "key reused".to_owned());
                }
                Some(Entry::Running { seen, .. }) => {
                    if let Some(seen) = seen {
                        seen.notify_one();
                    }
                    return (StatusCode::CONFLICT, "in flight".to_owned());
                }
                Some(Entry::Done { answer, .. }) => return (StatusCode::CREATED, answer.clone()),
                None => {
                    let seen = shared.held.then(Arc::default);
                    let running = Entry::Running {
                        body: body.clone(),
                        seen: seen.clone(),
                    };
                    ledger.keys.insert(key.clone(), running);
                    seen
                }
            }
        };
        // The operation runs to its end whether or not the client waits for it, as a server's
        // does: a handler dropped with its connection must not leave the key running for ever.
        let run = tokio::spawn(async move {
            if let Some(seen) = seen {
                seen.notified().await;
            }
            let mut ledger = shared.ledger.lock().unwrap();
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
}
