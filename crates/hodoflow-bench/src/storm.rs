//! `storm`: how much load retries add when the server is down.
//!
//! 200 senders loop for 10 s, one operation after another, against a server that answers
//! every delivery `503` without `Retry-After`. Requests per logical operation (the server's
//! count of webhook requests over the operations the senders started) for the SDK with its
//! default retry budget, the SDK with the budget disabled, and each peer (`reqwest-retry`,
//! reqwest's built-in retry, backon), each at 5 attempts and, where the client has a backoff,
//! the same backoff scale, each against a fresh, identical server. Each operation's duration is measured too.
//! Target: the SDK with its default budget <= 1.10 requests per operation. The p99 operation
//! duration of the default budget over that of `RetryBudget::disabled()` is reported, not judged:
//! the target was withdrawn, since a client cannot tell a blip 300 ms old from an outage, and
//! holding a call through a blip (which delivers it) makes it longer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hodoflow_mock::{DEMO_TRIGGER_TOKEN, Fault, MockServer};
use hodoflow_retry::{DeliveryId, HodoflowClient, IdempotencyKey, limit::RetryBudget};
use serde_json::json;
use tokio::sync::Mutex;

use crate::figures::{ms, percentile, round};
use crate::peers::{self, Peer, Schedule, Sender};
use crate::report::Report;
use crate::size::Size;
use crate::{Result, server};

const TARGET_REQUESTS_PER_OP: f64 = 1.10;
const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711}"#;

/// One client under test.
#[derive(Debug, Clone)]
enum Client {
    Sdk(HodoflowClient),
    Peer(Sender),
}

impl Client {
    /// One operation; what it ended in.
    async fn operate(&self, id: String) -> &'static str {
        let body = Bytes::from_static(BODY);
        match self {
            Client::Sdk(client) => {
                let Ok(key) = IdempotencyKey::new(&id) else {
                    return "invalid_id";
                };
                let sent = client
                    .deliver(DEMO_TRIGGER_TOKEN, body)
                    .delivery_id(DeliveryId::new(key))
                    .send()
                    .await;
                match sent {
                    Ok(_) => "accepted",
                    Err(error) => error.kind().as_str(),
                }
            }
            Client::Peer(sender) => match sender.deliver(Some(&id), body).await {
                Ok(status) if status.is_success() => "accepted",
                Ok(status) if status.is_server_error() => "server_error",
                Ok(_) => "other_status",
                Err(_) => "transport",
            },
        }
    }
}

/// What one variant measured.
struct Measured {
    seconds: f64,
    ops: u64,
    requests: usize,
    outcomes: BTreeMap<&'static str, u64>,
    retry_budget_refusals: Option<u64>,
    /// Each operation's duration, in milliseconds.
    durations_ms: Vec<f64>,
}

/// A fresh server that answers every delivery 503 without `Retry-After`.
async fn failing_server() -> Result<MockServer> {
    let server = server::start().await?;
    server.inject(
        Fault::respond(503)
            .body(r#"{"error":"Processing temporarily unavailable"}"#)
            .on("POST", server::WEBHOOKS)
            .times(u32::MAX),
    );
    Ok(server)
}

async fn measure(
    label: &str,
    server: &MockServer,
    client: Client,
    senders: usize,
    duration: Duration,
) -> Result<Measured> {
    let outcomes = Arc::new(Mutex::new(BTreeMap::<&'static str, u64>::new()));
    let durations = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let tasks: Vec<_> = (0..senders)
        .map(|sender| {
            let (client, outcomes, label) = (client.clone(), outcomes.clone(), label.to_owned());
            let durations = durations.clone();
            tokio::spawn(async move {
                let mut mine = BTreeMap::<&'static str, u64>::new();
                let mut took = Vec::new();
                let mut n = 0u64;
                while started.elapsed() < duration {
                    let began = Instant::now();
                    let outcome = client.operate(format!("storm-{label}-{sender}-{n}")).await;
                    took.push(ms(began.elapsed()));
                    *mine.entry(outcome).or_default() += 1;
                    n += 1;
                }
                let mut all = outcomes.lock().await;
                for (outcome, count) in mine {
                    *all.entry(outcome).or_default() += count;
                }
                durations.lock().await.extend(took);
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    let outcomes = outcomes.lock().await.clone();
    let durations_ms = durations.lock().await.clone();
    let seconds = started.elapsed().as_secs_f64();
    let ops: u64 = outcomes.values().sum();
    let requests = server.ledger().requests_to("POST", server::WEBHOOKS).len();
    let retry_budget_refusals = match &client {
        Client::Sdk(client) => Some(client.stats().retry_budget_refusals),
        Client::Peer(_) => None,
    };
    eprintln!(
        "storm: {label}: {ops} ops, {requests} requests, {:.3} per op",
        requests as f64 / ops.max(1) as f64
    );
    Ok(Measured {
        seconds,
        ops,
        requests,
        outcomes,
        retry_budget_refusals,
        durations_ms,
    })
}

pub(crate) async fn run(size: Size) -> Result<Report> {
    let senders = size.pick(200, 4);
    let duration = size.pick(Duration::from_secs(10), Duration::from_millis(200));
    let schedule = Schedule::FAST;
    let backoff = schedule.backoff();
    // Every call of the SDK and of its middleware is held against this server, for most of
    // its budget: the default at full size, a short one at smoke size.
    let call_budget = size.call_budget();
    let mut report = Report::new("storm");
    report.param("senders", senders);
    report.param("seconds", duration.as_secs_f64());
    report.param("server_answer", "503 without Retry-After to every delivery");
    report.param("max_attempts", 5);
    if let Some(budget) = size.call_budget_change() {
        report.param(
            "call_budget",
            format!("the SDK and sdk_middleware: {budget}"),
        );
    }
    report.param(
        "backoff",
        format!(
            "full jitter, {} doubling, for the SDK (Backoff::base/cap) and every peer with a backoff",
            schedule.range()
        ),
    );
    for peer in Peer::ALL {
        report.param(peer.label(), peer.describe(schedule));
    }
    report.param(
        "retry_budget_default",
        "RetryBudget::new(): adaptive (retry bucket of 500 tokens, 5 a retry; SRE ratio K = 2 over 2 min and 5 s; while down, probes three quarters of the outage's age apart, 100 ms to 10 s, and last chances for calls whose time runs out)",
    );

    let mut per_op = BTreeMap::new();
    let mut per_op_p99 = BTreeMap::new();
    for (label, budget) in [
        ("sdk_default_budget", RetryBudget::new()),
        ("sdk_budget_disabled", RetryBudget::disabled()),
    ] {
        let server = failing_server().await?;
        let client = Client::Sdk(peers::sdk_within(
            &server.base_url(),
            backoff,
            budget,
            call_budget,
        )?);
        let measured = measure(label, &server, client, senders, duration).await?;
        per_op_p99.insert(label, percentile(&measured.durations_ms, 99.0));
        per_op.insert(label, record(&mut report, label, &measured));
    }
    for peer in Peer::ALL {
        let label = peer.label();
        let server = failing_server().await?;
        let sender =
            Sender::retrying_within(peer, &server.base_url(), schedule, call_budget).await?;
        let measured = measure(label, &server, Client::Peer(sender), senders, duration).await?;
        per_op.insert(label, record(&mut report, label, &measured));
    }
    let p99 = |label: &str| per_op_p99.get(label).copied().unwrap_or(f64::INFINITY);
    let duration_ratio = round(
        p99("sdk_default_budget") / p99("sdk_budget_disabled").max(f64::MIN_POSITIVE),
        3,
    );
    report.figure("p99_duration_default_over_disabled", duration_ratio);
    report.note("requests_per_op is the server's webhook requests over the operations the senders started in the 10 s (each finished, past the 10 s if need be)");
    report.note("with the default (adaptive) budget the service is found down within the first answers: every attempt, first attempts included, then holds, one probe goes at a time, three quarters of the outage's age after the last (100 ms to 10 s), the calls whose holds end together get up to three last chances as probes, and a held attempt is refused (retry_budget_exhausted, nothing sent) when its time runs out; operations so refused count in ops with no request");
    report.at_most(
        "sdk_default_budget.requests_per_op",
        per_op["sdk_default_budget"],
        TARGET_REQUESTS_PER_OP,
    );
    Ok(report)
}

/// Adds a variant's figures; returns its requests per op.
fn record(report: &mut Report, label: &str, measured: &Measured) -> f64 {
    let per_op = round(measured.requests as f64 / measured.ops.max(1) as f64, 3);
    let mut figures = json!({
        "ops": measured.ops,
        "requests": measured.requests,
        "requests_per_op": per_op,
        "requests_per_second": round(measured.requests as f64 / measured.seconds, 0),
        "seconds_with_tail": round(measured.seconds, 2),
        "duration_p50_ms": round(percentile(&measured.durations_ms, 50.0), 1),
        "duration_p99_ms": round(percentile(&measured.durations_ms, 99.0), 1),
        "outcomes": measured.outcomes,
    });
    if let Some(refusals) = measured.retry_budget_refusals {
        figures["retry_budget_refusals"] = json!(refusals);
    }
    report.figure(label, figures);
    per_op
}
