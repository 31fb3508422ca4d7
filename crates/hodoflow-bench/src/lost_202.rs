//! `lost_202`: what a lost answer costs when the server had already committed.
//!
//! 1,000 deliveries, 64 at a time; the server commits each delivery and then, for 20% of
//! requests (seeded), closes the connection instead of answering `202`. Each sender runs
//! against a fresh, identical server with the same seed, and the ledger says how many runs
//! each event started:
//!
//! - the SDK, with a delivery ID per event (defaults otherwise);
//! - each peer (`reqwest-retry`, reqwest's built-in retry, backon; the SDK's attempts and
//!   backoff where the peer has them) posting without a delivery ID, as its user would: the
//!   server falls back to a hash of trigger token and body in a 2-hour bucket; once with the
//!   event's body, once with a body that carries its send time, stamped when the request is
//!   built;
//! - an application retry loop on plain reqwest that builds the body again, with a fresh send
//!   time, for each attempt (the same schedule as the `reqwest-retry` peer's policy);
//! - plain reqwest with no retry: what is lost when nobody retries.
//!
//! Target: the SDK creates 0 duplicate runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hodoflow_mock::{DEMO_TRIGGER_TOKEN, Fault, MockServer};
use hodoflow_retry::{Backoff, DeliveryId, IdempotencyKey, limit::RetryBudget};
use reqwest_retry::{RetryDecision, RetryPolicy as _};
use serde_json::{Value, json};

use crate::peers::{self, Peer, Schedule, Sender};
use crate::report::Report;
use crate::size::Size;
use crate::{Result, drive, server};

const LOSS: f64 = 0.2;
const SEED: u64 = 0x202;
const CONCURRENCY: usize = 64;

/// The event's body, with its send time when `stamped`.
fn body(event: u64, stamped: bool) -> Bytes {
    let mut body = json!({"event": event, "kind": "order.shipped", "order_id": 4711 + event});
    if stamped {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        body["sent_at_ns"] = json!(now.as_nanos().to_string());
    }
    Bytes::from(body.to_string())
}

/// A fresh server that loses 20% of answers after committing.
async fn lossy_server() -> Result<MockServer> {
    let server = server::start().await?;
    server.inject(
        Fault::execute_then_close()
            .on("POST", server::WEBHOOKS)
            .probability(LOSS, SEED),
    );
    Ok(server)
}

/// How the events' runs can be told apart in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Identity {
    /// One delivery ID per event: the ledger's identities are the events.
    DeliveryId,
    /// No delivery ID: the server hashes each body, so an event whose body changes between
    /// attempts has several identities (and one whose retry crossed a 2-hour bucket too).
    /// Holds the attempts the senders sent, counted on the client side.
    BodyHash { attempts_sent: u64 },
}

/// What the ledger says about a variant, and what its senders saw.
fn figures(
    server: &MockServer,
    deliveries: u64,
    identity: Identity,
    failed: &BTreeMap<String, u64>,
) -> Result<Value> {
    let ledger = server.ledger();
    let requests = ledger.requests_to("POST", server::WEBHOOKS);
    let answers_lost = requests
        .iter()
        .filter(|r| r.fault.as_deref() == Some("execute_then_close"))
        .count();
    // Runs per delivery identity (the ID, or `hash:..` of a header-less delivery).
    let recorded = serde_json::to_value(&ledger)?;
    let identities = recorded["deliveries"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let runs: u64 = identities
        .values()
        .map(|runs| runs.as_array().map_or(0, Vec::len) as u64)
        .sum();
    let sender_failures: u64 = failed.values().sum();
    let requests_seen = requests.len() as u64;
    // Every request that reaches the server executes (the fault closes after the commit).
    // When the server saw every attempt the senders sent, every event ran at least once.
    let events_with_a_run = match identity {
        Identity::DeliveryId => Some(identities.len() as u64),
        Identity::BodyHash { attempts_sent } if attempts_sent == requests_seen => Some(deliveries),
        Identity::BodyHash { .. } => None,
    };
    Ok(json!({
        "requests": requests_seen,
        "attempts_sent": match identity {
            Identity::DeliveryId => None,
            Identity::BodyHash { attempts_sent } => Some(attempts_sent),
        },
        "answers_lost": answers_lost,
        "retries_sent": requests_seen.saturating_sub(deliveries),
        "runs": runs,
        "delivery_identities": identities.len(),
        "events_with_a_run": events_with_a_run,
        "duplicate_runs": events_with_a_run.map(|ran| runs - ran),
        "duplicate_runs_at_least": runs.saturating_sub(deliveries),
        "sender_failures": sender_failures,
        "sender_failures_by_kind": failed,
    }))
}

fn tally(results: Vec<Option<String>>) -> BTreeMap<String, u64> {
    let mut failed = BTreeMap::new();
    for kind in results.into_iter().flatten() {
        *failed.entry(kind).or_default() += 1;
    }
    failed
}

pub(crate) async fn run(size: Size) -> Result<Report> {
    let deliveries = size.pick(1_000, 20);
    let mut report = Report::new("lost_202");
    report.param("deliveries", deliveries);
    report.param("concurrency", CONCURRENCY);
    report.param("fault", format!("execute_then_close with probability {LOSS}, seed {SEED:#x}, on every webhook request (retries too)"));
    report.param("sdk_config", peers::SDK_DEFAULTS);
    for peer in Peer::ALL {
        report.param(peer.label(), peer.describe(Schedule::SDK_DEFAULT));
    }

    // The SDK: one delivery ID per event.
    let server = lossy_server().await?;
    let sdk = peers::sdk(&server.base_url(), Backoff::default(), RetryBudget::new())?;
    let results = drive::each(deliveries, CONCURRENCY, move |event| {
        let sdk = sdk.clone();
        async move {
            let id = DeliveryId::new(IdempotencyKey::from_operation_id(&format!("lost-{event}")));
            let sent = sdk
                .deliver(DEMO_TRIGGER_TOKEN, body(event, false))
                .delivery_id(id)
                .send()
                .await;
            sent.err().map(|e| e.kind().as_str().to_owned())
        }
    })
    .await;
    let sdk = figures(&server, deliveries, Identity::DeliveryId, &tally(results))?;
    eprintln!("lost_202: sdk {sdk}");
    let sdk_duplicates = sdk["duplicate_runs"].as_u64().unwrap_or(u64::MAX);
    report.figure("sdk", sdk);

    // Each peer, no delivery ID; the body built once per event, stamped or not.
    for (peer, stamped) in Peer::ALL
        .into_iter()
        .flat_map(|peer| [(peer, false), (peer, true)])
    {
        let label = format!(
            "{}_{}",
            peer.label(),
            if stamped { "stamped_body" } else { "same_body" }
        );
        let server = lossy_server().await?;
        let sender = Sender::retrying(peer, &server.base_url(), Schedule::SDK_DEFAULT).await?;
        let client = sender.clone();
        let results = drive::each(deliveries, CONCURRENCY, move |event| {
            let sender = client.clone();
            async move {
                sender
                    .deliver(None, body(event, stamped))
                    .await
                    .err()
                    .map(|_| "no_answer".to_owned())
            }
        })
        .await;
        let attempts_sent = sender.attempts().unwrap_or(0);
        let identity = Identity::BodyHash { attempts_sent };
        let measured = figures(&server, deliveries, identity, &tally(results))?;
        eprintln!("lost_202: {label} {measured}");
        report.figure(&label, measured);
    }

    // An application's own retry loop on plain reqwest, building the body for each attempt.
    let server = lossy_server().await?;
    let sender = Sender::plain(&server.base_url()).await?;
    let attempts = Arc::new(AtomicU64::new(0));
    let counted = attempts.clone();
    let results = drive::each(deliveries, CONCURRENCY, move |event| {
        let (sender, attempts) = (sender.clone(), counted.clone());
        async move { resend_rebuilt(&sender, event, &attempts).await }
    })
    .await;
    let attempts_sent = attempts.load(Ordering::Relaxed);
    let identity = Identity::BodyHash { attempts_sent };
    let measured = figures(&server, deliveries, identity, &tally(results))?;
    eprintln!("lost_202: app_retry_rebuilt_stamped_body {measured}");
    report.figure("app_retry_rebuilt_stamped_body", measured);

    // Plain reqwest, no retry at all.
    let server = lossy_server().await?;
    let sender = Sender::plain(&server.base_url()).await?;
    let results = drive::each(deliveries, CONCURRENCY, move |event| {
        let sender = sender.clone();
        async move {
            sender
                .deliver(None, body(event, false))
                .await
                .err()
                .map(|_| "no_answer".to_owned())
        }
    })
    .await;
    // One attempt per event.
    let identity = Identity::BodyHash {
        attempts_sent: deliveries,
    };
    let measured = figures(&server, deliveries, identity, &tally(results))?;
    eprintln!("lost_202: reqwest_no_retry {measured}");
    report.figure("reqwest_no_retry", measured);

    report.note("duplicate_runs = runs - events with a run, from the server's ledger; with delivery IDs an event is its ID; without, every request that reaches the server runs (the fault closes after the commit), so when the server saw every attempt sent (attempts_sent = requests, counted under each peer's retry: a middleware under reqwest-retry, reqwest's classifier, backon's loop) every event has a run; otherwise only duplicate_runs_at_least = runs - deliveries is known");
    report.note("reqwest-retry 0.9 does retry a POST whose connection closed after sending, without an answer: its default strategy treats hyper's IncompleteMessage as transient (retries_sent follows answers_lost)");
    report.note("without a delivery ID the server deduplicates on a hash of token and body: a retry of the same bytes is caught, a body rebuilt with a new send time is a new delivery");
    report.note("reqwest_no_retry: sender_failures are events whose sender got no answer and cannot tell whether they ran; they did run (events_with_a_run), so the sender, not the server, lost them");
    report.at_most("sdk.duplicate_runs", sdk_duplicates as f64, 0.0);
    Ok(report)
}

/// Up to 5 attempts with `reqwest-retry`'s schedule, each with a freshly built, freshly
/// stamped body: retried on no answer, 429 and 5xx. `Some(kind)` when it gave up.
async fn resend_rebuilt(sender: &Sender, event: u64, attempts: &AtomicU64) -> Option<String> {
    let policy = peers::retry_policy(Schedule::SDK_DEFAULT);
    let started = SystemTime::now();
    let mut retries = 0;
    loop {
        attempts.fetch_add(1, Ordering::Relaxed);
        let retryable = match sender.deliver(None, body(event, true)).await {
            Ok(status) if status.is_success() => return None,
            Ok(status) => status.is_server_error() || status.as_u16() == 429,
            Err(_) => true,
        };
        if !retryable {
            return Some("refused".to_owned());
        }
        match policy.should_retry(started, retries) {
            RetryDecision::Retry { execute_after } => {
                let wait = execute_after
                    .duration_since(SystemTime::now())
                    .unwrap_or_default();
                tokio::time::sleep(wait).await;
                retries += 1;
            }
            RetryDecision::DoNotRetry => return Some("gave_up".to_owned()),
        }
    }
}
