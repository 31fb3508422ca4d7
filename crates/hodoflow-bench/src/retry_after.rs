//! `retry_after`: does a retry wait as long as the server asked?
//!
//! 200 operations start at once; the server refuses the first 100 webhook requests with `429`
//! and the next 100 with `503`, each with `Retry-After: 1`, and accepts everything after. For
//! every refusal followed by another attempt with the same delivery ID, the gap is the
//! retry's arrival minus the refusal's arrival, both on the server's monotonic clock
//! (`RequestRecord::arrived`). A gap under 1 s is early; lateness is the gap minus 1 s.
//! The SDK runs with its defaults. `reqwest-retry` (default policy, a delivery ID header so
//! its attempts can be paired) is measured the same way on a fresh server, for context.
//! Target: 0 early.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use hodoflow_mock::{DEMO_TRIGGER_TOKEN, Fault, MockServer};
use hodoflow_retry::{Backoff, DeliveryId, IdempotencyKey, RetryBudget};
use serde_json::{Value, json};

use crate::figures::{ms, percentile, round};
use crate::peers::{self, Sender};
use crate::report::Report;
use crate::scenario::Size;
use crate::{Result, drive, server};

const RETRY_AFTER: Duration = Duration::from_secs(1);
const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711}"#;

/// A fresh server that refuses the first `each` deliveries with 429 and the next `each`
/// with 503, both with `Retry-After: 1`.
async fn refusing_server(each: u32) -> Result<MockServer> {
    let server = server::start().await?;
    let secs = RETRY_AFTER.as_secs().to_string();
    server.inject(
        Fault::respond(429)
            .header("Retry-After", &secs)
            .body(r#"{"error":"Rate limit exceeded"}"#)
            .on("POST", server::WEBHOOKS)
            .times(each),
    );
    server.inject(
        Fault::webhook_unavailable(RETRY_AFTER.as_secs())
            .on("POST", server::WEBHOOKS)
            .times(each),
    );
    Ok(server)
}

/// Every (refusal, next attempt) gap, by delivery ID.
fn gaps(server: &MockServer) -> Vec<Duration> {
    let ledger = server.ledger();
    let mut by_id: HashMap<&str, Vec<_>> = HashMap::new();
    for request in ledger.requests_to("POST", server::WEBHOOKS) {
        if let Some(id) = request.idempotency_key.as_deref() {
            by_id.entry(id).or_default().push(request);
        }
    }
    let mut gaps = Vec::new();
    for attempts in by_id.values_mut() {
        attempts.sort_by_key(|r| r.seq);
        for pair in attempts.windows(2) {
            if matches!(pair[0].status, Some(429 | 503)) {
                gaps.push(pair[1].arrived.saturating_duration_since(pair[0].arrived));
            }
        }
    }
    gaps
}

fn figures(gaps: &[Duration], failed: usize) -> Value {
    let early = gaps.iter().filter(|gap| **gap < RETRY_AFTER).count();
    let lateness: Vec<f64> = gaps.iter().map(|gap| ms(*gap) - ms(RETRY_AFTER)).collect();
    json!({
        "retries_after_refusal": gaps.len(),
        "early": early,
        "earliest_gap_ms": round(gaps.iter().min().map_or(0.0, |gap| ms(*gap)), 1),
        "lateness_p50_ms": round(percentile(&lateness, 50.0), 1),
        "lateness_p99_ms": round(percentile(&lateness, 99.0), 1),
        "lateness_max_ms": round(percentile(&lateness, 100.0), 1),
        "operations_failed": failed,
    })
}

pub(crate) async fn run(size: Size) -> Result<Report> {
    let operations: u32 = size.pick(200, 10);
    let each = operations / 2;
    let mut report = Report::new("retry_after");
    report.param("operations", operations);
    report.param(
        "refusals",
        format!("the first {each} requests 429, the next {each} 503, each with Retry-After: 1"),
    );
    report.param("concurrency", operations);
    report.param(
        "sdk_config",
        "defaults (5 attempts, backoff 500 ms..30 s, retry budget 500 tokens)",
    );
    report.param(
        "reqwest_retry_policy",
        "ExponentialBackoff::builder().build_with_max_retries(4): full jitter, 1 s doubling",
    );
    report.param(
        "early_means",
        "retry arrival - refusal arrival < 1 s, server clock",
    );

    let server = refusing_server(each).await?;
    let sdk = peers::sdk(&server.base_url(), Backoff::default(), RetryBudget::new())?;
    let results = drive::each(operations.into(), operations as usize, move |op| {
        let sdk = sdk.clone();
        async move {
            let id = DeliveryId::new(IdempotencyKey::from_operation_id(&format!(
                "retry-after-{op}"
            )));
            sdk.deliver(DEMO_TRIGGER_TOKEN, Bytes::from_static(BODY))
                .delivery_id(id)
                .send()
                .await
                .is_err()
        }
    })
    .await;
    let sdk_gaps = gaps(&server);
    let sdk = figures(&sdk_gaps, results.iter().filter(|failed| **failed).count());
    eprintln!("retry_after: sdk {sdk}");
    let early = sdk["early"].as_u64().unwrap_or(u64::MAX);
    report.figure("sdk", sdk);

    let server = refusing_server(each).await?;
    let sender = Sender::with_retry(&server.base_url(), peers::default_retry_policy()).await?;
    let results = drive::each(operations.into(), operations as usize, move |op| {
        let sender = sender.clone();
        async move {
            let id = format!("retry-after-rr-{op}");
            !matches!(sender.deliver(Some(&id), Bytes::from_static(BODY)).await, Ok(status) if status.is_success())
        }
    })
    .await;
    let peer = figures(
        &gaps(&server),
        results.iter().filter(|failed| **failed).count(),
    );
    eprintln!("retry_after: reqwest_retry {peer}");
    report.figure("reqwest_retry", peer);

    report.note("a 429 or 503 with Retry-After closes the SDK's gate for every call of the client, so calls that start meanwhile wait without meeting a refusal and are not in the gaps");
    report.at_most("sdk.early", early as f64, 0.0);
    Ok(report)
}
