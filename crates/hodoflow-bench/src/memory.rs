//! `memory`: what 10,000 deliveries in flight cost, and whether the body is ever copied.
//!
//! A contract server in a child process (`serve-slow`) holds every delivery 10 s before
//! handling it. The SDK (defaults) starts 10,000 deliveries of a 1,031-byte body at once;
//! the server reports how many it held at the same time. Peak RSS is this process's VmHWM
//! from /proc/self/status after the run: the client alone, as the server is another process
//! (which also keeps its 10,000 sockets off this process's file limit). While the deliveries
//! run, the counting allocator counts allocations of exactly 1,031 bytes: a copy of the body.
//! Targets: peak RSS <= 64 MiB, 0 body copies per attempt.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hodoflow_mock::DEMO_TRIGGER_TOKEN;
use hodoflow_retry::{Backoff, DeliveryId, IdempotencyKey, RetryBudget};
use serde_json::json;

use crate::body_copies::BodyCopies;
use crate::figures::round;
use crate::report::Report;
use crate::scenario::Size;
use crate::server::SlowServer;
use crate::{Result, drive, peers};

/// An unusual size near 1 KiB, so that no unrelated buffer has it.
const BODY_SIZE: usize = 1_031;
const MIB: f64 = 1024.0 * 1024.0;
const TARGET_PEAK_MIB: f64 = 64.0;
/// File descriptors kept for everything but the deliveries' sockets.
const SPARE_FDS: u64 = 256;

/// A JSON body of exactly [`BODY_SIZE`] bytes.
fn body() -> Bytes {
    let pad = BODY_SIZE - r#"{"pad":""}"#.len();
    let body = format!(r#"{{"pad":"{}"}}"#, "x".repeat(pad));
    debug_assert_eq!(body.len(), BODY_SIZE);
    Bytes::from(body)
}

/// A `kB` field of /proc/self/status, in bytes.
fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Peak resident set size (VmHWM), in bytes.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    status_kb("VmHWM:")
}

/// The soft limit of open files.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

pub(crate) async fn run(size: Size, exe: &Path) -> Result<Report> {
    let requested = size.pick(10_000u64, 50);
    let delay = size.pick(Duration::from_secs(10), Duration::from_millis(300));
    let fd_limit = open_files_limit();
    let in_flight = fd_limit.map_or(requested, |limit| {
        requested.min(limit.saturating_sub(SPARE_FDS))
    });
    let mut report = Report::new("memory");
    report.param("in_flight_requested", requested);
    report.param("in_flight_started", in_flight);
    report.param("open_files_limit", fd_limit);
    report.param("body_bytes", BODY_SIZE);
    report.param("server_hold_ms", delay.as_millis() as u64);
    report.param("server", "hodoflow-mock in a child process (hodoflow-bench serve-slow), Fault::delay_then_handle on every delivery");
    report.param("sdk_config", "defaults (attempt timeout 15 s)");
    if in_flight < requested {
        report.note(format!(
            "{requested} in flight do not fit the open-files limit; {in_flight} were started"
        ));
    }

    let server = SlowServer::spawn(exe, delay).await?;
    let sdk = peers::sdk(server.base_url(), Backoff::default(), RetryBudget::new())?;
    let body = body();
    let rss_before = status_kb("VmRSS:");
    let copies = BodyCopies::start(BODY_SIZE);
    let counting = copies.works();
    let started = Instant::now();
    let client = sdk.clone();
    let results = drive::each(in_flight, in_flight as usize, move |n| {
        let (sdk, body) = (client.clone(), body.clone());
        async move {
            let id = DeliveryId::new(IdempotencyKey::from_operation_id(&format!("memory-{n}")));
            sdk.deliver(DEMO_TRIGGER_TOKEN, body)
                .delivery_id(id)
                .send()
                .await
                .err()
                .map(|e| e.kind().as_str())
        }
    })
    .await;
    let copied = copies.stop();
    let took = started.elapsed();
    let peak = peak_rss_bytes();
    let seen = server.finish().await?;
    let attempts = sdk.stats().attempts;
    let failed = results.iter().flatten().count();
    let copies_per_attempt = copied as f64 / attempts.max(1) as f64;
    let peak_mib = peak.map_or(f64::NAN, |bytes| bytes as f64 / MIB);
    eprintln!(
        "memory: peak {peak_mib:.1} MiB, {copied} copies over {attempts} attempts, server {seen}"
    );

    report.figure("peak_rss_mib", round(peak_mib, 1));
    report.figure(
        "rss_before_mib",
        rss_before.map(|b| round(b as f64 / MIB, 1)),
    );
    if let (Some(peak), Some(before)) = (peak, rss_before) {
        report.figure(
            "peak_rss_growth_per_delivery_kib",
            round(
                peak.saturating_sub(before) as f64 / 1024.0 / in_flight.max(1) as f64,
                2,
            ),
        );
    }
    report.figure("server_held_at_once", seen["peak_held"].clone());
    report.figure("server_requests", seen["requests"].clone());
    report.figure(
        "server_process_peak_rss_mib",
        seen["server_peak_rss_bytes"]
            .as_u64()
            .map(|b| round(b as f64 / MIB, 1)),
    );
    report.figure("attempts", attempts);
    report.figure("deliveries_failed", failed);
    report.figure("body_sized_allocations", copied);
    report.figure("body_copies_per_attempt", round(copies_per_attempt, 4));
    report.figure("allocation_counting_works", counting);
    report.figure("seconds", round(took.as_secs_f64(), 2));
    report.figure("failures_by_kind", json!(tally(&results)));
    report.at_most("peak_rss_mib", round(peak_mib, 1), TARGET_PEAK_MIB);
    if counting {
        report.at_most("body_copies_per_attempt", copies_per_attempt, 0.0);
    } else {
        report.note(
            "the counting allocator is not installed in this binary: body copies were not measured",
        );
        report.at_most("body_copies_per_attempt", f64::NAN, 0.0);
    }
    Ok(report)
}

fn tally(results: &[Option<&'static str>]) -> std::collections::BTreeMap<&'static str, u64> {
    let mut kinds = std::collections::BTreeMap::new();
    for kind in results.iter().flatten() {
        *kinds.entry(*kind).or_default() += 1;
    }
    kinds
}
