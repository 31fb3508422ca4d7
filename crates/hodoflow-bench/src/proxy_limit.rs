//! `proxy_limit`: does the client find the rate a reverse proxy admits?
//!
//! A reverse proxy in front of the server answers `429` **without** `Retry-After` above 50
//! requests a second (`Fault::proxy_rate_limit(50)`: a token bucket of 50, refilled at 50 a
//! second, as Envoy's and Traefik's local rate limits and nginx `limit_req` with a burst
//! count). 300 deliveries, each to the demo trigger with its own delivery ID, 16 at a time.
//! The SDK runs with its defaults; the budget disabled and the plain bucket are measured the
//! same way for comparison, each against a fresh server.
//! Targets: 0 operations failed; <= 10% of the requests answered 429.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use hodoflow_mock::{DEMO_TRIGGER_TOKEN, Fault};
use hodoflow_retry::{Backoff, DeliveryId, IdempotencyKey, limit::RetryBudget};
use serde_json::json;

use crate::figures::round;
use crate::report::Report;
use crate::size::Size;
use crate::{Result, drive, peers, server};

const LIMIT: u32 = 50;
const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711}"#;

pub(crate) async fn run(size: Size) -> Result<Report> {
    let deliveries: u64 = size.pick(300, 60);
    let concurrency = 16;
    let mut report = Report::new("proxy_limit");
    report.param("deliveries", deliveries);
    report.param("concurrency", concurrency);
    report.param(
        "limit",
        format!(
            "429 without Retry-After above {LIMIT} requests a second (token bucket of {LIMIT})"
        ),
    );
    report.param("sdk_config", peers::SDK_DEFAULTS);
    let mut judged = (u64::MAX, f64::INFINITY);
    for (label, budget) in [
        ("sdk_default_budget", RetryBudget::new()),
        (
            "sdk_plain_bucket",
            RetryBudget::builder().adaptive(false).build()?,
        ),
        ("sdk_budget_disabled", RetryBudget::disabled()),
    ] {
        let server = server::start().await?;
        server.inject(Fault::proxy_rate_limit(LIMIT).on("POST", server::WEBHOOKS));
        let sdk = peers::sdk(&server.base_url(), Backoff::default(), budget)?;
        let client = sdk.clone();
        let start = Instant::now();
        let results = drive::each(deliveries, concurrency, move |n| {
            let sdk = client.clone();
            async move {
                let id = DeliveryId::new(IdempotencyKey::from_operation_id(&format!("proxy-{n}")));
                sdk.deliver(DEMO_TRIGGER_TOKEN, Bytes::from_static(BODY))
                    .delivery_id(id)
                    .send()
                    .await
                    .err()
                    .map(|error| error.kind().as_str())
            }
        })
        .await;
        let seconds = start.elapsed().as_secs_f64();
        let mut failed = BTreeMap::<&str, u64>::new();
        for kind in results.iter().flatten() {
            *failed.entry(kind).or_default() += 1;
        }
        let ledger = server.ledger();
        let requests = ledger.requests_to("POST", server::WEBHOOKS);
        let refused = requests.iter().filter(|r| r.status == Some(429)).count();
        let share = round(refused as f64 / requests.len().max(1) as f64, 4);
        let failed_total: u64 = failed.values().sum();
        let figures = json!({
            "operations_failed": failed_total,
            "operations_failed_by_kind": failed,
            "requests": requests.len(),
            "answered_429": refused,
            "share_429": share,
            "runs": ledger.total_runs(),
            "seconds": round(seconds, 2),
            "accepted_per_second": round(ledger.total_runs() as f64 / seconds, 1),
        });
        eprintln!("proxy_limit: {label} {figures}");
        if label == "sdk_default_budget" {
            judged = (failed_total, share);
        }
        report.figure(label, figures);
    }
    report.exactly("sdk_default_budget.operations_failed", judged.0 as f64, 0.0);
    report.at_most("sdk_default_budget.share_429", judged.1, 0.10);
    Ok(report)
}
