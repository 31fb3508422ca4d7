//! `outage`: does the client cut its load when the service is really down, first attempts
//! included?
//!
//! 200 senders loop, one operation after another, for 5 s against a healthy server (the
//! senders' healthy rate: the server's webhook requests per second), then, with a fresh client
//! and a fresh server, for 10 s against a server that answers every delivery `503` without
//! `Retry-After`. The figure is the server's webhook requests per second in the last 5 s of the
//! outage over the healthy rate. The SDK runs with its defaults.
//! Target: <= 0.10.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hodoflow_mock::Fault;
use hodoflow_retry::{Backoff, limit::RetryBudget};
use serde_json::json;

use crate::figures::round;
use crate::report::Report;
use crate::size::Size;
use crate::{Result, drive, peers, server};

const TARGET: f64 = 0.10;
const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711}"#;

pub(crate) async fn run(size: Size) -> Result<Report> {
    let senders = size.pick(200, 4);
    let healthy_for = size.pick(Duration::from_secs(5), Duration::from_millis(200));
    let outage_for = size.pick(Duration::from_secs(10), Duration::from_millis(400));
    let mut report = Report::new("outage");
    report.param("senders", senders);
    report.param("healthy_seconds", healthy_for.as_secs_f64());
    report.param("outage_seconds", outage_for.as_secs_f64());
    report.param("server_answer", "503 without Retry-After to every delivery");
    report.param("sdk_config", peers::sdk_defaults(size));
    // The default at full size. Against the server that is down every call is held for most of
    // its budget, so at smoke size a short one ends the run within seconds.
    let call_budget = size.call_budget();

    let healthy = server::start().await?;
    let sdk = peers::sdk_within(
        &healthy.base_url(),
        Backoff::default(),
        RetryBudget::new(),
        call_budget,
    )?;
    let start = Instant::now();
    drive::loop_senders(&sdk, senders, start, healthy_for, "outage-healthy", BODY).await;
    let healthy_rps = healthy.ledger().requests_to("POST", server::WEBHOOKS).len() as f64
        / start.elapsed().as_secs_f64();

    let mut per_variant = BTreeMap::new();
    for (label, budget) in [
        ("sdk_default_budget", RetryBudget::new()),
        (
            "sdk_plain_bucket",
            RetryBudget::builder().adaptive(false).build()?,
        ),
    ] {
        let failing = server::start().await?;
        failing.inject(
            Fault::respond(503)
                .body(r#"{"error":"Processing temporarily unavailable"}"#)
                .on("POST", server::WEBHOOKS)
                .times(u32::MAX),
        );
        let sdk = peers::sdk_within(&failing.base_url(), Backoff::default(), budget, call_budget)?;
        let start = Instant::now();
        let ops = drive::loop_senders(&sdk, senders, start, outage_for, "outage", BODY).await;
        let last_from = outage_for / 2;
        let ledger = failing.ledger();
        let requests = ledger.requests_to("POST", server::WEBHOOKS);
        let in_last = requests
            .iter()
            .filter(|r| {
                let at = r.arrived.saturating_duration_since(start);
                at >= last_from && at < outage_for
            })
            .count();
        let last_rps = in_last as f64 / (outage_for - last_from).as_secs_f64();
        let mut outcomes = BTreeMap::<&str, u64>::new();
        for op in &ops {
            *outcomes.entry(op.outcome).or_default() += 1;
        }
        let stats = sdk.stats();
        let ratio = round(last_rps / healthy_rps.max(1.0), 4);
        let figures = json!({
            "ops": ops.len(),
            "requests": requests.len(),
            "requests_per_op": round(requests.len() as f64 / ops.len().max(1) as f64, 3),
            "requests_per_second_last_half": round(last_rps, 1),
            "over_healthy_rate": ratio,
            "outcomes": outcomes,
            "local_rejections": stats.retry_budget_local_rejections,
            "throttle_permille_at_end": stats.retry_budget_throttle_permille,
        });
        eprintln!("outage: {label} {figures}");
        per_variant.insert(label, ratio);
        report.figure(label, figures);
    }
    report.figure("healthy_requests_per_second", round(healthy_rps, 0));
    report.note("the healthy rate is the same senders' against a fresh healthy server, with a fresh client; the outage runs get a fresh client and server each");
    report.note("sdk_plain_bucket is RetryBudget::builder().adaptive(false): the fixed bucket of earlier releases, for comparison");
    report.at_most(
        "sdk_default_budget.over_healthy_rate",
        per_variant["sdk_default_budget"],
        TARGET,
    );
    Ok(report)
}
