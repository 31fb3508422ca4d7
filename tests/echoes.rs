//! A server that echoes every secret the client holds, in every text the client keeps of an
//! answer: the `x-request-id`, the error code an error quotes, and a webhook's run ID, at offsets
//! across the cuts the client makes (100 bytes of a quoted code, 128 of a request ID, 256 of a
//! run ID and of what an outbox stores). No secret's bytes, whole or any piece of 8 bytes or
//! more, may be in what a call returns or in the rows of either outbox store.
//!
//! The server is `support::hostile` on 127.0.0.1:0; each request's body says what it echoes,
//! where, and after how many bytes of padding.

mod support;

#[cfg(feature = "outbox-postgres")]
#[path = "support/postgres.rs"]
mod pg;

use std::time::Duration;

use hodoflow_retry::outbox::{Job, JobState, Outbox, Target};
use hodoflow_retry::{
    Backoff, Budget, DeliveryId, Error, ErrorKind, HodoflowClient, IdempotencyKey,
    limit::RouteLimit,
};
use serde_json::json;

use support::Captured;
use support::hostile::{HOSTILE_SECRET, Hostile, Reply, Seen};

/// The trigger token; the webhook path holds it. The secrets are random-looking, so that no 8
/// bytes of one are the SDK's own words.
const TRIGGER: &str = "trg_ECHO_5b1e9a7c3d2f40";
/// The signing secret: whsec_ and the base64 of 26 bytes.
const SIGNING: &str = "whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=";
/// A static bearer token, with characters a form body percent-encodes.
const BEARER: &str = "static_6c2e9f1a/b7d3+40=";
/// The webhook route.
const WEBHOOK: &str = "/api/v1/webhooks/";

/// What a request asks the server to echo: which secret, where, after how many bytes.
#[derive(Debug, Clone, Copy)]
struct Echo {
    secret: &'static str,
    place: Place,
    pad: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// `422` with the secret in the error code and in `x-request-id`.
    Refusal,
    /// `202 accepted` with the secret in the run ID and in `x-request-id`.
    RunId,
}

/// The secrets a test's client holds, by the name a request body gives.
const SECRETS: [&str; 5] = ["token", "client", "trigger", "signing", "bearer"];

/// The paddings that put a secret `len` bytes long just before, across and just after `cut`.
fn paddings(cut: usize, len: usize) -> Vec<usize> {
    let mut pads: Vec<usize> = [
        cut.saturating_sub(len + 1),
        cut.saturating_sub(len),
        cut.saturating_sub(len - 1),
        cut.saturating_sub(len / 2),
        cut.saturating_sub(8),
        cut.saturating_sub(7),
        cut - 1,
        cut,
    ]
    .into();
    pads.sort_unstable();
    pads.dedup();
    pads
}

/// The answer the hostile server gives to a request whose body is an [`Echo`]; the token
/// endpoint is the server's own.
fn echo(seen: &Seen, _: usize) -> Reply {
    let order: serde_json::Value = serde_json::from_slice(&seen.body).unwrap_or(json!({}));
    let pad = order["pad"].as_u64().unwrap_or(0) as usize;
    let bearer = seen
        .header_values("authorization")
        .first()
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let secret = match order["secret"].as_str().unwrap_or_default() {
        "token" | "bearer" => bearer,
        "client" => HOSTILE_SECRET.to_owned(),
        "trigger" => seen
            .path
            .strip_prefix(WEBHOOK)
            .unwrap_or_default()
            .to_owned(),
        "signing" => SIGNING.to_owned(),
        _ => String::new(),
    };
    let request_id = format!("{}{secret}\t-tail", "r".repeat(pad));
    let text = format!("{}{secret}\u{202e}\u{1b}[2J-tail", "x".repeat(pad));
    match order["place"].as_str() {
        Some("run_id") => Reply::json(
            202,
            &json!({"status": "accepted", "workflow_run_id": text}).to_string(),
        ),
        _ => Reply::json(422, &json!({"error": text}).to_string()),
    }
    .header("x-request-id", &request_id)
}

/// Every order a test sends: each secret, in each place, across each cut.
fn orders() -> Vec<Echo> {
    let mut orders = Vec::new();
    for secret in SECRETS {
        // The lengths of the echoed secrets are close enough to cut across with 30 bytes.
        for (place, cuts) in [
            (Place::Refusal, &[100, 128, 256][..]),
            (Place::RunId, &[128, 256][..]),
        ] {
            for &cut in cuts {
                for pad in paddings(cut, 30) {
                    orders.push(Echo { secret, place, pad });
                }
            }
        }
    }
    orders
}

fn body(order: &Echo) -> String {
    let place = match order.place {
        Place::Refusal => "refusal",
        Place::RunId => "run_id",
    };
    json!({"secret": order.secret, "place": place, "pad": order.pad}).to_string()
}

/// A client of `server` with client credentials (or the static bearer token) and the signing
/// secret.
fn client(server: &Hostile, bearer: bool) -> HodoflowClient {
    let builder = HodoflowClient::builder(server.url());
    let builder = if bearer {
        builder.bearer_token(BEARER)
    } else {
        builder.client_credentials("echo-sender", HOSTILE_SECRET)
    };
    // Far more deliveries to one trigger a second than Hodoflow's default window takes:
    // this test is about what is kept, not pacing.
    builder
        .trigger_limit(RouteLimit::new(100_000, Duration::from_secs(1)).unwrap())
        .signing_secret(SIGNING)
        .backoff(Backoff::new().base(Duration::from_millis(1)))
        .budget(
            Budget::new()
                .max_attempts(1)
                .max_elapsed(Duration::from_secs(10)),
        )
        .build()
        .unwrap()
}

/// The first piece of 8 bytes or more of any of `secrets` that `text` holds.
fn leak(text: &str, secrets: &[String]) -> Option<String> {
    secrets.iter().find_map(|secret| {
        secret
            .as_bytes()
            .windows(8)
            .find(|piece| text.as_bytes().windows(8).any(|window| window == *piece))
            .map(|piece| String::from_utf8_lossy(piece).into_owned())
    })
}

/// Every secret of a test: the tokens the server issued, the client secret, the trigger token,
/// the signing secret and the static bearer token.
fn secrets(server: &Hostile) -> Vec<String> {
    let mut secrets = server.issued();
    secrets.extend([HOSTILE_SECRET, TRIGGER, SIGNING, BEARER].map(str::to_owned));
    secrets
}

#[track_caller]
fn assert_clean(what: &str, text: &str, secrets: &[String]) {
    if let Some(piece) = leak(text, secrets) {
        panic!("{what} holds {piece:?}: {text}");
    }
    assert!(
        !text.contains(['\u{1b}', '\u{202e}', '\t']),
        "{what} holds a control or bidi character: {text:?}"
    );
}

/// What an error shows of the server, all of it.
fn shown_error(error: &Error) -> String {
    let ids: Vec<String> = error.attempts().iter().map(ToString::to_string).collect();
    format!("{error} | {error:?} | {}", ids.join(" | "))
}

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

/// The stores the suite runs on.
#[derive(Debug, Clone, Copy)]
enum Backend {
    Sqlite,
    #[cfg(feature = "outbox-postgres")]
    Postgres,
}

/// A directory removed when dropped.
struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh outbox on `backend`, and the directory of a SQLite one; `None` when PostgreSQL is
/// not set up (the test says so and passes, unless CI requires it).
async fn fresh(backend: Backend) -> Option<(Outbox, Option<Dir>)> {
    match backend {
        Backend::Sqlite => {
            let dir = Dir(std::env::temp_dir().join(format!(
                "hodoflow-echoes-{}-{}",
                std::process::id(),
                rand::random::<u64>()
            )));
            std::fs::create_dir_all(&dir.0).unwrap();
            let outbox = Outbox::sqlite(dir.0.join("outbox.db")).await.unwrap();
            Some((outbox, Some(dir)))
        }
        #[cfg(feature = "outbox-postgres")]
        Backend::Postgres => {
            let db = pg::database("echoes").await?;
            Some((Outbox::postgres(&db.url).await.unwrap(), None))
        }
    }
}

/// Every text a stored job holds but its target and body (which hold the trigger token and
/// the producer's bytes by design).
fn stored_text(job: &Job) -> String {
    let error = job.last_error.as_ref();
    format!(
        "{} | {:?} | {:?} | {:?} | {:?} | {:?} | {:?}",
        job.event_id,
        job.run_id,
        error.map(|e| &e.kind),
        error.map(|e| e.status),
        error.and_then(|e| e.request_id.as_deref()),
        error.map(|e| &e.message),
        job.lease_owner,
    )
}

async fn the_stored_rows_hold_no_secret_a_server_echoes(backend: Backend) {
    let Some((outbox, _dir)) = fresh(backend).await else {
        return;
    };
    let server = Hostile::start(echo).await;
    let orders: Vec<Echo> = orders()
        .into_iter()
        .filter(|order| order.secret != "bearer")
        .collect();
    let events = orders
        .iter()
        .enumerate()
        .map(|(n, order)| (format!("echo-{n}"), Target::webhook(TRIGGER), body(order)));
    outbox.enqueue_many(events).await.unwrap();
    let report = outbox
        .workers(client(&server, false))
        .trigger_limit(Some(
            RouteLimit::new(100_000, Duration::from_secs(1)).unwrap(),
        ))
        .run_until_idle()
        .await
        .unwrap();
    let refusals = orders
        .iter()
        .filter(|order| order.place == Place::Refusal)
        .count();
    assert_eq!(report.failed as usize, refusals, "{report:?}");
    assert_eq!(report.accepted as usize, orders.len() - refusals);
    let jobs = outbox.list(None, 10_000).await.unwrap();
    assert_eq!(jobs.len(), orders.len());
    for job in &jobs {
        let text = stored_text(job);
        assert_clean(&job.event_id, &text, &secrets(&server));
        match job.state {
            JobState::Accepted => {
                assert!(job.run_id.as_ref().is_some_and(|id| id.len() <= 256));
            }
            JobState::Failed => {
                let error = job.last_error.as_ref().unwrap();
                assert!(error.request_id.as_ref().is_some_and(|id| id.len() <= 256));
                assert!(error.message.len() <= 1024);
            }
            state => panic!("{}: {state}", job.event_id),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_rows_hold_no_secret_a_server_echoes_on_sqlite() {
    the_stored_rows_hold_no_secret_a_server_echoes(Backend::Sqlite).await;
}

#[cfg(feature = "outbox-postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_rows_hold_no_secret_a_server_echoes_on_postgres() {
    the_stored_rows_hold_no_secret_a_server_echoes(Backend::Postgres).await;
}
