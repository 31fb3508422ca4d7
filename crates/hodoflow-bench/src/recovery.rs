//! `recovery`: how fast does the client come back after an outage, and does it fail an
//! operation the healed server would have taken?
//!
//! 200 senders loop for 10 s; the server answers every delivery `503` without `Retry-After` for
//! the first 5 s (`Fault::during`), then heals. Operations are put in 100 ms bins by the time
//! they ended. The recovery time is from the heal to the end of the first bin from which every
//! later bin has at least 95% of its operations succeeded. Operations failed after healing are
//! those that started after the heal and failed. The SDK runs with its defaults.
//! Targets: recovery <= 3 s; 0 failed after healing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hodoflow_mock::Fault;
use hodoflow_retry::{Backoff, limit::RetryBudget};
use serde_json::json;

use crate::drive::Op;
use crate::figures::round;
use crate::report::Report;
use crate::size::Size;
use crate::{Result, drive, peers, server};

const BIN: Duration = Duration::from_millis(100);
const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711}"#;

/// Seconds from `heal` to the end of the first bin after which every bin is >= 95% success.
fn recovery_seconds(ops: &[Op], heal: Duration, end: Duration) -> Option<f64> {
    let bins = ((end.saturating_sub(heal)).as_nanos() / BIN.as_nanos()) as usize + 1;
    let mut counts = vec![(0u64, 0u64); bins];
    for op in ops.iter().filter(|op| op.ended >= heal) {
        let bin = ((op.ended - heal).as_nanos() / BIN.as_nanos()) as usize;
        if let Some(count) = counts.get_mut(bin) {
            count.0 += 1;
            count.1 += u64::from(op.ok());
        }
    }
    let good = |(all, ok): (u64, u64)| all > 0 && ok * 100 >= all * 95;
    let mut first_good = None;
    for (index, count) in counts.iter().enumerate() {
        if good(*count) {
            first_good.get_or_insert(index);
        } else if count.0 > 0 {
            first_good = None;
        }
    }
    first_good.map(|index| (index as f64 + 1.0) * BIN.as_secs_f64())
}

pub(crate) async fn run(size: Size) -> Result<Report> {
    let senders = size.pick(200, 4);
    let outage_for = size.pick(Duration::from_secs(5), Duration::from_millis(300));
    let run_for = size.pick(Duration::from_secs(10), Duration::from_millis(900));
    let mut report = Report::new("recovery");
    report.param("senders", senders);
    report.param("outage_seconds", outage_for.as_secs_f64());
    report.param("run_seconds", run_for.as_secs_f64());
    report.param(
        "server_answer",
        "503 without Retry-After to every delivery during the outage, then healthy",
    );
    report.param("sdk_config", peers::SDK_DEFAULTS);
    report.param("bin_ms", BIN.as_millis() as u64);

    let mut judged = (f64::INFINITY, u64::MAX);
    for (label, budget) in [
        ("sdk_default_budget", RetryBudget::new()),
        (
            "sdk_plain_bucket",
            RetryBudget::builder().adaptive(false).build()?,
        ),
    ] {
        let server = server::start().await?;
        let sdk = peers::sdk(&server.base_url(), Backoff::default(), budget)?;
        let start = Instant::now();
        server.inject(
            Fault::respond(503)
                .body(r#"{"error":"Processing temporarily unavailable"}"#)
                .on("POST", server::WEBHOOKS)
                .during(outage_for),
        );
        let heal = start.elapsed() + outage_for;
        let ops = drive::loop_senders(&sdk, senders, start, run_for, "recovery", BODY).await;
        let end = ops.iter().map(|op| op.ended).max().unwrap_or(run_for);
        let after: Vec<&Op> = ops.iter().filter(|op| op.started >= heal).collect();
        let failed_after = after.iter().filter(|op| !op.ok()).count() as u64;
        let mut failed_after_by_kind = BTreeMap::<&str, u64>::new();
        for op in after.iter().filter(|op| !op.ok()) {
            *failed_after_by_kind.entry(op.outcome).or_default() += 1;
        }
        let recovery = recovery_seconds(&ops, heal, end);
        // Successes per second in each 500 ms after the heal, by end time: the ramp.
        let mut ramp = Vec::new();
        let mut from = heal;
        while from < run_for {
            let to = from + Duration::from_millis(500);
            let ok = ops
                .iter()
                .filter(|op| op.ok() && op.ended >= from && op.ended < to)
                .count();
            ramp.push(ok * 2);
            from = to;
        }
        let figures = json!({
            "ops": ops.len(),
            "ops_started_after_heal": after.len(),
            "failed_after_heal": failed_after,
            "failed_after_heal_by_kind": failed_after_by_kind,
            "recovery_seconds": recovery.map(|s| round(s, 2)),
            "successes_per_second_by_500ms_after_heal": ramp,
            "requests": server.ledger().requests_to("POST", server::WEBHOOKS).len(),
        });
        eprintln!("recovery: {label} {figures}");
        if label == "sdk_default_budget" {
            judged = (recovery.unwrap_or(f64::INFINITY), failed_after);
        }
        report.figure(label, figures);
    }
    report.note("sdk_plain_bucket is RetryBudget::builder().adaptive(false), for comparison");
    report.at_most(
        "sdk_default_budget.recovery_seconds",
        round(judged.0, 2),
        3.0,
    );
    report.at_most("sdk_default_budget.failed_after_heal", judged.1 as f64, 0.0);
    Ok(report)
}
