//! `retry_after`: does a retry wait as long as the server asked?
//!
//! 200 operations start at once, each to its own trigger; the server refuses the first
//! attempt of 100 of them with `429` and of the other 100 with `503`, each with
//! `Retry-After: 1`, and accepts every later attempt. For
//! every refusal followed by another attempt with the same delivery ID, the gap is the
//! retry's arrival minus the refusal's arrival, both on the server's monotonic clock
//! (`RequestRecord::arrived`). A gap under 1 s is early; lateness is the gap minus 1 s.
//! The SDK runs with its defaults. Each peer (`reqwest-retry`, reqwest's built-in retry,
//! backon with its documented Retry-After `adjust`; the SDK's attempts and backoff where the
//! peer has them; a delivery ID header so its attempts can be paired) is measured the same way
//! on a fresh server, for context.
//! Targets: 0 operations failed, 0 early, lateness p99 <= 500 ms.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hodoflow_mock::{Fault, MockServer};
use hodoflow_retry::{Backoff, DeliveryId, IdempotencyKey, limit::RetryBudget};
use serde_json::{Value, json};

use crate::figures::{ms, percentile, round};
use crate::peers::{self, Peer, Schedule, Sender};
use crate::report::Report;
use crate::size::Size;
use crate::{Result, drive, server};

const RETRY_AFTER: Duration = Duration::from_secs(1);
const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711}"#;

/// A fresh server with one trigger per operation, whose first request is refused with 429
/// (the first half) or 503 (the second half), `Retry-After: 1`. Returns the trigger tokens.
async fn refusing_server(operations: u64) -> Result<(MockServer, Vec<String>)> {
    let server = server::start().await?;
    let tokens = server::triggers(&server, "trg_retry_after", operations);
    let secs = RETRY_AFTER.as_secs();
    for (n, token) in tokens.iter().enumerate() {
        let refusal = if (n as u64) < operations / 2 {
            Fault::respond(429)
                .header("Retry-After", &secs.to_string())
                .body(r#"{"error":"Rate limit exceeded"}"#)
        } else {
            Fault::webhook_unavailable(secs)
        };
        server.inject(
            refusal
                .on("POST", &format!("{}{token}", server::WEBHOOKS))
                .times(1),
        );
    }
    Ok((server, tokens))
}

/// Every (refusal, next attempt) gap, by delivery ID, and the span over which the refusals
/// arrived.
fn gaps(server: &MockServer) -> (Vec<Duration>, Duration) {
    let ledger = server.ledger();
    let mut by_id: HashMap<&str, Vec<_>> = HashMap::new();
    for request in ledger.requests_to("POST", server::WEBHOOKS) {
        if let Some(id) = request.idempotency_key.as_deref() {
            by_id.entry(id).or_default().push(request);
        }
    }
    let mut gaps = Vec::new();
    let mut refused = Vec::new();
    for attempts in by_id.values_mut() {
        attempts.sort_by_key(|r| r.seq);
        for attempt in attempts.iter() {
            if matches!(attempt.status, Some(429 | 503)) {
                refused.push(attempt.arrived);
            }
        }
        for pair in attempts.windows(2) {
            if matches!(pair[0].status, Some(429 | 503)) {
                gaps.push(pair[1].arrived.saturating_duration_since(pair[0].arrived));
            }
        }
    }
    let spread = match (refused.iter().min(), refused.iter().max()) {
        (Some(first), Some(last)) => *last - *first,
        _ => Duration::ZERO,
    };
    (gaps, spread)
}

fn figures((gaps, spread): (Vec<Duration>, Duration), results: &[Option<&'static str>]) -> Value {
    let mut failed = BTreeMap::<&str, u64>::new();
    for kind in results.iter().flatten() {
        *failed.entry(kind).or_default() += 1;
    }
    let gaps = &gaps;
    let early = gaps.iter().filter(|gap| **gap < RETRY_AFTER).count();
    let lateness: Vec<f64> = gaps.iter().map(|gap| ms(*gap) - ms(RETRY_AFTER)).collect();
    json!({
        "retries_after_refusal": gaps.len(),
        "early": early,
        "earliest_gap_ms": round(gaps.iter().min().map_or(0.0, |gap| ms(*gap)), 1),
        "lateness_p50_ms": round(percentile(&lateness, 50.0), 1),
        "lateness_p99_ms": round(percentile(&lateness, 99.0), 1),
        "lateness_max_ms": round(percentile(&lateness, 100.0), 1),
        "refusals_arrived_over_ms": round(ms(spread), 1),
        "operations_failed": failed.values().sum::<u64>(),
        "operations_failed_by_kind": failed,
    })
}

pub(crate) async fn run(size: Size) -> Result<Report> {
    let operations: u64 = size.pick(200, 10);
    let each = operations / 2;
    let mut report = Report::new("retry_after");
    report.param("operations", operations);
    report.param(
        "refusals",
        format!("the first attempt of {each} operations 429, of {each} others 503, each with Retry-After: 1; each operation has its own trigger"),
    );
    report.param("concurrency", operations);
    report.param("sdk_config", peers::SDK_DEFAULTS);
    for peer in Peer::ALL {
        report.param(peer.label(), peer.describe(Schedule::SDK_DEFAULT));
    }
    report.param(
        "early_means",
        "retry arrival - refusal arrival < 1 s, server clock",
    );

    let (server, tokens) = refusing_server(operations).await?;
    let sdk = peers::sdk(&server.base_url(), Backoff::default(), RetryBudget::new())?;
    let client = sdk.clone();
    let triggers = Arc::new(tokens);
    let results = drive::each(operations, operations as usize, move |op| {
        let (sdk, triggers) = (client.clone(), triggers.clone());
        async move {
            let id = DeliveryId::new(IdempotencyKey::from_operation_id(&format!(
                "retry-after-{op}"
            )));
            sdk.deliver(triggers[op as usize].as_str(), Bytes::from_static(BODY))
                .delivery_id(id)
                .send()
                .await
                .err()
                .map(|e| e.kind().as_str())
        }
    })
    .await;
    let mut sdk_figures = figures(gaps(&server), &results);
    sdk_figures["retry_budget_refusals"] = json!(sdk.stats().retry_budget_refusals);
    let sdk = sdk_figures;
    eprintln!("retry_after: sdk {sdk}");
    let early = sdk["early"].as_u64().unwrap_or(u64::MAX);
    let sdk_failed = sdk["operations_failed"].as_u64().map(|n| n as f64);
    let lateness_p99 = sdk["lateness_p99_ms"].as_f64().unwrap_or(f64::INFINITY);
    report.figure("sdk", sdk);

    for peer in Peer::ALL {
        let label = peer.label();
        let (server, tokens) = refusing_server(operations).await?;
        let sender = Sender::retrying(peer, &server.base_url(), Schedule::SDK_DEFAULT).await?;
        let triggers = Arc::new(tokens);
        let results = drive::each(operations, operations as usize, move |op| {
            let (sender, triggers) = (sender.clone(), triggers.clone());
            async move {
                let id = format!("retry-after-{label}-{op}");
                match sender
                    .deliver_to(&triggers[op as usize], Some(&id), Bytes::from_static(BODY))
                    .await
                {
                    Ok(status) if status.is_success() => None,
                    Ok(_) => Some("refused"),
                    Err(_) => Some("no_answer"),
                }
            }
        })
        .await;
        let measured = figures(gaps(&server), &results);
        eprintln!("retry_after: {label} {measured}");
        report.figure(label, measured);
    }

    report.note("the SDK closes what a refusal speaks for: a trigger's 429 with Retry-After closes that trigger until the stated instant, released with jitter (a fifth of the wait at most); a 503 with Retry-After holds its own call, which waits the stated time; every operation here has its own trigger, so no refusal holds another operation: lateness is the jitter and the machine, never earliness");
    report.note("a retry that follows a Retry-After of at least 1 s is free in the default retry budget: the server paced it");
    let failed = sdk_failed.unwrap_or(f64::INFINITY);
    report.exactly("sdk.operations_failed", failed, 0.0);
    report.at_most("sdk.early", early as f64, 0.0);
    report.at_most("sdk.lateness_p99_ms", lateness_p99, 500.0);
    Ok(report)
}
