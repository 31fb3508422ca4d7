//! `memory`: what 10,000 deliveries in flight cost, and whether the body is ever copied.
//!
//! A contract server in a child process (`serve-slow`) holds every delivery 10 s before
//! handling it. A second child process (`hold`) starts 10,000 deliveries of a 1,031-byte body
//! at once through the SDK (defaults), waits for them all, and reports its own peak RSS
//! (VmHWM from /proc/self/status): the client alone, as the server is another process (which
//! also keeps the server's 10,000 sockets off the client's file limit). A third child does the
//! same with plain reqwest 0.13, built as the SDK builds it, for context. Both run twice: over
//! HTTP/1.1 (a connection per delivery in flight) and over h2c (HTTP/2 with prior knowledge:
//! every delivery a stream of one connection). The server reports how many deliveries it held
//! at the same time. While the deliveries run, the counting allocator counts allocations of
//! exactly 1,031 bytes: a copy of the body.
//! Targets: the SDK's peak RSS over h2c <= 64 MiB; over HTTP/1.1 the SDK's share over plain
//! reqwest <= 1 KiB per delivery; 0 body copies per attempt.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN};
use hodoflow_retry::{Backoff, DeliveryId, HodoflowClient, IdempotencyKey, limit::RetryBudget};
use http::StatusCode;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::body_copies::BodyCopies;
use crate::figures::round;
use crate::process::{peak_rss_bytes, status_kb};
use crate::report::Report;
use crate::server::SlowServer;
use crate::size::Size;
use crate::{Result, drive};

/// The size of one delivery's send future (the SDK's `send()`, or plain reqwest's post and
/// answer read), taken from the first delivery.
static SEND_FUTURE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// An unusual size near 1 KiB, so that no unrelated buffer has it.
const BODY_SIZE: usize = 1_031;
const MIB: f64 = 1024.0 * 1024.0;
const TARGET_PEAK_MIB: f64 = 64.0;
const TARGET_SHARE_KIB: f64 = 1.0;
/// File descriptors kept for everything but the deliveries' sockets.
const SPARE_FDS: u64 = 256;

/// The client a `hold` process measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Holder {
    /// The SDK with its defaults.
    Sdk,
    /// Plain reqwest, as the SDK builds it, no retry.
    Reqwest,
}

/// The protocol a `hold` process speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// HTTP/1.1: a connection per delivery in flight.
    Http1,
    /// HTTP/2 with prior knowledge: one connection, a stream per delivery.
    H2c,
}

impl Protocol {
    /// `"http1"` or `"h2c"`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "http1",
            Protocol::H2c => "h2c",
        }
    }
}

/// Plain reqwest 0.13 as the SDK builds it, with a token exchanged up front.
#[derive(Debug, Clone)]
struct Plain {
    http: reqwest::Client,
    url: String,
    authorization: http::HeaderValue,
}

impl Plain {
    async fn new(base_url: &str, protocol: Protocol) -> Result<Self> {
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never());
        let http = match protocol {
            Protocol::Http1 => builder,
            Protocol::H2c => builder.http2_prior_knowledge(),
        }
        .build()?;
        let authorization = crate::peers::bearer(&http, base_url).await?;
        Ok(Self {
            http,
            url: format!("{base_url}/api/v1/webhooks/{DEMO_TRIGGER_TOKEN}"),
            authorization,
        })
    }

    /// Posts `body` with `Idempotency-Key: id` and reads the answer, as the SDK does.
    async fn deliver(&self, id: &str, body: Bytes) -> Result<StatusCode> {
        let response = self
            .http
            .post(&self.url)
            .header(http::header::AUTHORIZATION, self.authorization.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header("idempotency-key", id)
            .body(body)
            .send()
            .await?;
        let status = response.status();
        let body = response.bytes().await?;
        if status == StatusCode::ACCEPTED {
            serde_json::from_slice::<Value>(&body)?;
        }
        Ok(status)
    }
}

impl Holder {
    /// `"sdk"` or `"reqwest"`.
    pub fn name(self) -> &'static str {
        match self {
            Holder::Sdk => "sdk",
            Holder::Reqwest => "reqwest",
        }
    }
}

/// A JSON body of exactly [`BODY_SIZE`] bytes.
fn body() -> Bytes {
    let pad = BODY_SIZE - r#"{"pad":""}"#.len();
    let body = format!(r#"{{"pad":"{}"}}"#, "x".repeat(pad));
    debug_assert_eq!(body.len(), BODY_SIZE);
    Bytes::from(body)
}

/// The soft limit of open files.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Starts `in_flight` deliveries at once from `holder` to the server at `base_url`, waits
/// for them all, and describes this process: peak RSS, attempts, body-sized allocations.
///
/// This is the bench binary's hidden `hold` mode; the memory scenario runs it in a child
/// process per client, so that each peak RSS is that client's alone.
///
/// # Errors
///
/// When the client cannot be built or get a token.
pub async fn hold(
    holder: Holder,
    protocol: Protocol,
    base_url: &str,
    in_flight: u64,
) -> Result<Value> {
    let body = body();
    let rss_before = status_kb("VmRSS:");
    let (results, attempts, copied, counting, took) = match holder {
        Holder::Sdk => {
            let builder = HodoflowClient::builder(base_url)
                .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
                .backoff(Backoff::default())
                .retry_budget(RetryBudget::new());
            let sdk = match protocol {
                Protocol::Http1 => builder,
                Protocol::H2c => builder.http2_prior_knowledge(),
            }
            .build()?;
            let copies = BodyCopies::start(BODY_SIZE);
            let counting = copies.works();
            let started = Instant::now();
            let client = sdk.clone();
            let results = drive::each(in_flight, in_flight as usize, move |n| {
                let (sdk, body) = (client.clone(), body.clone());
                async move {
                    let key = IdempotencyKey::from_operation_id(&format!("memory-sdk-{n}"));
                    let send = sdk
                        .deliver(DEMO_TRIGGER_TOKEN, body)
                        .delivery_id(DeliveryId::new(key))
                        .send();
                    if n == 0 {
                        SEND_FUTURE_BYTES.store(std::mem::size_of_val(&send), Ordering::Relaxed);
                    }
                    let sent = send.await;
                    sent.err().map(|e| e.kind().as_str())
                }
            })
            .await;
            let took = started.elapsed();
            let copied = copies.stop();
            (results, sdk.stats().attempts, copied, counting, took)
        }
        Holder::Reqwest => {
            let sender = Plain::new(base_url, protocol).await?;
            let copies = BodyCopies::start(BODY_SIZE);
            let counting = copies.works();
            let started = Instant::now();
            let results = drive::each(in_flight, in_flight as usize, move |n| {
                let (sender, body) = (sender.clone(), body.clone());
                async move {
                    let id = format!("memory-reqwest-{n}");
                    let send = sender.deliver(&id, body);
                    if n == 0 {
                        SEND_FUTURE_BYTES.store(std::mem::size_of_val(&send), Ordering::Relaxed);
                    }
                    match send.await {
                        Ok(StatusCode::ACCEPTED) => None,
                        Ok(_) => Some("status"),
                        Err(_) => Some("transport"),
                    }
                }
            })
            .await;
            let took = started.elapsed();
            let copied = copies.stop();
            (results, in_flight, copied, counting, took)
        }
    };
    let mut failures = std::collections::BTreeMap::<&str, u64>::new();
    for kind in results.iter().flatten() {
        *failures.entry(kind).or_default() += 1;
    }
    Ok(json!({
        "peak_rss_bytes": peak_rss_bytes(),
        "rss_before_bytes": rss_before,
        "attempts": attempts,
        "body_sized_allocations": copied,
        "allocation_counting_works": counting,
        "failures": failures,
        "seconds": took.as_secs_f64(),
        "send_future_bytes": SEND_FUTURE_BYTES.load(Ordering::Relaxed),
    }))
}

/// Runs `exe hold` for `holder` over `protocol` and returns what it printed.
async fn hold_in_child(
    exe: &Path,
    holder: Holder,
    protocol: Protocol,
    base_url: &str,
    in_flight: u64,
) -> Result<Value> {
    let output = Command::new(exe)
        .args([
            "hold",
            "--holder",
            holder.name(),
            "--protocol",
            protocol.name(),
            "--url",
            base_url,
            "--in-flight",
        ])
        .arg(in_flight.to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot start {} hold: {e}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .last()
        .ok_or("the hold process printed nothing")?;
    Ok(serde_json::from_str(line)?)
}

fn mib(bytes: &Value) -> Value {
    bytes
        .as_u64()
        .map_or(Value::Null, |b| json!(round(b as f64 / MIB, 1)))
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
    report.param("clients", "each in its own child process (hodoflow-bench hold): the SDK with defaults (attempt timeout 15 s), then plain reqwest 0.13 as the SDK builds it; over HTTP/1.1, then over h2c (http2_prior_knowledge)");
    report.param(
        "allocator",
        "tracking_allocator::Allocator<System>: each allocation carries a usize header",
    );
    if in_flight < requested {
        report.note(format!(
            "{requested} in flight do not fit the open-files limit; {in_flight} were started"
        ));
    }

    let server = SlowServer::spawn(exe, delay).await?;
    // [protocol][holder] peaks in MiB.
    let mut peaks = [[f64::NAN; 2]; 2];
    let mut sdk_copies = 0.0f64;
    let runs = [Protocol::Http1, Protocol::H2c]
        .into_iter()
        .flat_map(|p| [Holder::Sdk, Holder::Reqwest].map(|h| (p, h)));
    for (protocol, holder) in runs {
        let held = hold_in_child(exe, holder, protocol, server.base_url(), in_flight).await?;
        // The HTTP/1.1 figures keep their names of before: `sdk`, `reqwest`.
        let name = match protocol {
            Protocol::Http1 => holder.name().to_owned(),
            Protocol::H2c => format!("{}_h2c", holder.name()),
        };
        eprintln!("memory: {name} {held}");
        let peak = held["peak_rss_bytes"]
            .as_u64()
            .map_or(f64::NAN, |b| b as f64 / MIB);
        let before = held["rss_before_bytes"]
            .as_u64()
            .map_or(f64::NAN, |b| b as f64 / MIB);
        let attempts = held["attempts"].as_u64().unwrap_or(0);
        let copied = held["body_sized_allocations"].as_u64().unwrap_or(0);
        let counting = held["allocation_counting_works"] == true;
        let per_attempt = if counting {
            copied as f64 / attempts.max(1) as f64
        } else {
            f64::NAN
        };
        peaks[usize::from(protocol == Protocol::H2c)][usize::from(holder == Holder::Reqwest)] =
            peak;
        if holder == Holder::Sdk {
            sdk_copies = sdk_copies.max(per_attempt);
        }
        report.figure(
            &name,
            json!({
                "peak_rss_mib": round(peak, 1),
                "rss_before_mib": round(before, 1),
                "peak_rss_growth_per_delivery_kib": round((peak - before) * 1024.0 / in_flight.max(1) as f64, 2),
                "attempts": attempts,
                "body_sized_allocations": copied,
                "body_copies_per_attempt": round(per_attempt, 4),
                "allocation_counting_works": counting,
                "failures": held["failures"],
                "seconds": round(held["seconds"].as_f64().unwrap_or(f64::NAN), 2),
                "send_future_bytes": held["send_future_bytes"],
            }),
        );
    }
    let seen = server.finish().await?;
    eprintln!("memory: server {seen}");
    report.figure("server_held_at_once", seen["peak_held"].clone());
    report.figure("server_requests", seen["requests"].clone());
    report.figure(
        "server_process_peak_rss_mib",
        mib(&seen["server_peak_rss_bytes"]),
    );
    let share = |[sdk, reqwest]: [f64; 2]| (sdk - reqwest) * 1024.0 / in_flight.max(1) as f64;
    for (suffix, pair) in [("", peaks[0]), ("_h2c", peaks[1])] {
        report.figure(
            &format!("sdk_over_reqwest{suffix}_peak_mib"),
            round(pair[0] - pair[1], 1),
        );
        report.figure(
            &format!("sdk_over_reqwest{suffix}_per_delivery_kib"),
            round(share(pair), 2),
        );
    }
    report.note("plain reqwest holding the same deliveries is the floor of any client on reqwest 0.13: over HTTP/1.1 one connection per request in flight, over h2c one stream each; the SDK's own share is sdk_over_reqwest_*");
    report.note("body copies: the worst of the SDK's two runs");
    report.at_most(
        "sdk_h2c.peak_rss_mib",
        round(peaks[1][0], 1),
        TARGET_PEAK_MIB,
    );
    report.at_most(
        "sdk_over_reqwest_per_delivery_kib",
        round(share(peaks[0]), 2),
        TARGET_SHARE_KIB,
    );
    report.at_most("sdk.body_copies_per_attempt", sdk_copies, 0.0);
    Ok(report)
}
