//! The contract server as the scenarios use it: in-process on `127.0.0.1:0`, or, for the
//! memory scenario, in a child process so that the client's memory and sockets are its own.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use hodoflow_mock::{DEMO_ORGANIZATION, Fault, Limits, ManualClock, MockServer, TriggerSeed};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::Result;

/// The webhook path prefix, for faults and ledger queries.
pub(crate) const WEBHOOKS: &str = "/api/v1/webhooks/";

/// The documented limits, except the ones a throughput run must lift: no per-trigger rate
/// limit (the documented 100 per 60 s would answer 429 to everything after the 100th), and a
/// ledger that keeps every request of a run.
pub(crate) fn bench_limits() -> Limits {
    Limits {
        webhook_rate_limit: u32::MAX,
        ledger_requests_kept: 1_000_000,
        ..Limits::default()
    }
}

/// Starts a contract server with [`bench_limits`] on `127.0.0.1:0`.
pub(crate) async fn start() -> Result<MockServer> {
    Ok(MockServer::builder().limits(bench_limits()).start().await?)
}

/// Starts a contract server with [`bench_limits`] whose windows run on `clock`.
pub(crate) async fn start_on(clock: ManualClock) -> Result<MockServer> {
    Ok(MockServer::builder()
        .limits(bench_limits())
        .clock(clock)
        .start()
        .await?)
}

/// Adds `count` triggers of the demo organization, `{prefix}_00000` and on, and returns
/// their tokens. A fault `.on("POST", &format!("{WEBHOOKS}{token}"))` then hits one
/// operation's requests only: the fixed width keeps any token from being a prefix of another.
pub(crate) fn triggers(server: &MockServer, prefix: &str, count: u64) -> Vec<String> {
    (0..count)
        .map(|n| {
            let token = format!("{prefix}_{n:05}");
            server.put_trigger(TriggerSeed::new(&token, DEMO_ORGANIZATION));
            token
        })
        .collect()
}

/// Runs a contract server that holds every delivery `delay` before handling it, until its
/// standard input closes; then prints what it saw as one JSON line and returns.
///
/// This is the bench binary's hidden `serve-slow` mode. Its first line on stdout is the base
/// URL. The memory scenario starts it as a child process, so that the 10,000 server-side
/// sockets and buffers count against neither the client's file limit nor its memory.
///
/// # Errors
///
/// When the server cannot bind or stdout cannot be written.
pub async fn serve_slow(delay: Duration) -> Result<()> {
    use std::io::Write as _;

    let server = start().await?;
    server.inject(
        Fault::delay_then_handle(delay)
            .on("POST", WEBHOOKS)
            .times(u32::MAX),
    );
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{}", server.base_url())?;
    stdout.flush()?;
    // Wait until the parent closes stdin (or dies).
    let mut sink = Vec::new();
    tokio::io::stdin().read_to_end(&mut sink).await?;
    let ledger = server.ledger();
    let arrivals: Vec<Instant> = ledger
        .requests_to("POST", WEBHOOKS)
        .iter()
        .map(|r| r.arrived)
        .collect();
    let seen = json!({
        "requests": arrivals.len(),
        "peak_held": peak_held(&arrivals, delay),
        "server_peak_rss_bytes": crate::process::peak_rss_bytes(),
    });
    writeln!(stdout, "{seen}")?;
    stdout.flush()?;
    Ok(())
}

/// The most requests held at once: each is held `delay` from its arrival.
fn peak_held(arrivals: &[Instant], delay: Duration) -> usize {
    let mut sorted = arrivals.to_vec();
    sorted.sort();
    let mut peak = 0;
    let mut first = 0;
    for (last, at) in sorted.iter().enumerate() {
        while sorted[first] + delay <= *at {
            first += 1;
        }
        peak = peak.max(last + 1 - first);
    }
    peak
}

/// A `serve-slow` child process.
#[derive(Debug)]
pub(crate) struct SlowServer {
    child: Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    base_url: String,
}

impl SlowServer {
    /// Starts `exe serve-slow --delay-ms D` and reads its base URL.
    pub(crate) async fn spawn(exe: &Path, delay: Duration) -> Result<Self> {
        let mut child = Command::new(exe)
            .arg("serve-slow")
            .arg("--delay-ms")
            .arg(delay.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {} serve-slow: {e}", exe.display()))?;
        let stdout = child.stdout.take().ok_or("the child has no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let base_url = lines
            .next_line()
            .await?
            .ok_or("the slow server exited before printing its address")?;
        if !base_url.starts_with("http://127.0.0.1:") {
            return Err(format!("the slow server printed {base_url:?}, not a loopback URL").into());
        }
        Ok(Self {
            child,
            lines,
            base_url,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub(crate) fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Closes its stdin, reads what it saw, and waits for it to exit.
    pub(crate) async fn finish(mut self) -> Result<Value> {
        drop(self.child.stdin.take());
        let line = self
            .lines
            .next_line()
            .await?
            .ok_or("the slow server exited without its summary")?;
        self.child.wait().await?;
        Ok(serde_json::from_str(&line)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_held_counts_requests_whose_hold_overlaps() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let delay = Duration::from_millis(100);
        assert_eq!(peak_held(&[at(0), at(50), at(99), at(150)], delay), 3);
        assert_eq!(peak_held(&[at(0), at(100), at(200)], delay), 1);
        assert_eq!(peak_held(&[], delay), 0);
    }
}
