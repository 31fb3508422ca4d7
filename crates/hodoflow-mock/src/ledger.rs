//! What the server received and what it executed, for tests to read.
//!
//! Requests and executions are counted apart: a request dropped after its
//! write committed is one request with no answer and one execution. That
//! difference is what proves exactly-once.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant, SystemTime};

use axum::http::HeaderMap;
use bytes::Bytes;
use serde::Serialize;

use crate::signature::SignatureVerdict;

/// One request as the server saw it.
#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    /// Arrival order, from 0.
    pub seq: u64,
    /// The HTTP method.
    pub method: String,
    /// The path, trigger tokens redacted, without the query.
    pub path: String,
    /// When it arrived on the real monotonic clock (for measuring gaps).
    #[serde(skip)]
    pub arrived: Instant,
    /// When it arrived on the server's clock.
    pub at: SystemTime,
    /// The `x-request-id` the server gave it.
    pub request_id: String,
    /// The `Idempotency-Key` header, if any.
    pub idempotency_key: Option<String>,
    /// The status answered, or `None` when the connection was closed without an answer
    /// (or the answer is still pending).
    pub status: Option<u16>,
    /// The injected fault that handled it, if any.
    pub fault: Option<String>,
    /// The protocol it came over: `"HTTP/1.1"` or `"HTTP/2.0"`.
    pub version: String,
}

/// One delivery to a signed trigger as the server received it, and the verdict of its
/// signature check: what a test needs to verify the sender's signature with a verifier of its
/// own. Kept only for triggers with signing secrets.
///
/// `Debug` and the ledger's JSON show the verdict, the ID and the timestamp, never the
/// signature or the body.
#[derive(Clone, Serialize)]
pub struct SignedRecord {
    /// `webhook-id`, if present.
    pub webhook_id: Option<String>,
    /// `webhook-timestamp`, if present and an integer.
    pub timestamp: Option<i64>,
    /// The verdict: accepted, or why it was refused.
    pub verdict: SignatureVerdict,
    /// The server's clock when it checked, a skew injected included.
    pub checked_at: SystemTime,
    /// The three `webhook-*` headers as they came (nothing else: no bearer token).
    #[serde(skip)]
    headers: HeaderMap,
    /// The raw body bytes.
    #[serde(skip)]
    body: Bytes,
}

impl SignedRecord {
    pub(crate) fn new(
        headers: &HeaderMap,
        body: &Bytes,
        verdict: SignatureVerdict,
        checked_at: SystemTime,
    ) -> Self {
        let mut kept = HeaderMap::new();
        for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
            if let Some(value) = headers.get(name) {
                kept.insert(name, value.clone());
            }
        }
        let text = |name: &str| kept.get(name).and_then(|v| v.to_str().ok());
        Self {
            webhook_id: text("webhook-id").map(str::to_owned),
            timestamp: text("webhook-timestamp").and_then(|t| t.trim().parse().ok()),
            verdict,
            checked_at,
            headers: kept,
            body: body.clone(),
        }
    }

    /// The `webhook-id`, `webhook-timestamp` and `webhook-signature` headers received, for a
    /// verifier. The signature is a credential of the moment: do not log it.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body bytes received.
    pub fn body(&self) -> &Bytes {
        &self.body
    }
}

impl fmt::Debug for SignedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignedRecord")
            .field("webhook_id", &self.webhook_id)
            .field("timestamp", &self.timestamp)
            .field("verdict", &self.verdict)
            .field("checked_at", &self.checked_at)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// One client-credentials exchange.
#[derive(Debug, Clone, Serialize)]
pub struct ExchangeRecord {
    /// The client ID presented.
    pub client_id: String,
    /// Whether a token was issued.
    pub granted: bool,
    /// When, on the server's clock.
    pub at: SystemTime,
}

/// Everything recorded so far.
///
/// Executions, runs and exchanges are all kept. Request records are kept up to
/// [`Limits::ledger_requests_kept`](crate::Limits::ledger_requests_kept) and at
/// most twice that, the oldest dropped in bulk, so recording costs the same
/// after a million requests as after ten.
#[derive(Debug, Clone, Serialize)]
pub struct Ledger {
    requests: Vec<RequestRecord>,
    /// Records dropped from the front of `requests`.
    dropped: u64,
    #[serde(skip)]
    keep: usize,
    /// Idempotency-Key (or `""` for a keyless write) -> writes executed.
    writes: HashMap<String, u32>,
    /// Delivery identity -> runs created.
    deliveries: HashMap<String, Vec<String>>,
    /// Delivery identity -> answers `duplicate`.
    duplicates: HashMap<String, u32>,
    exchanges: Vec<ExchangeRecord>,
    /// HTTP/2 connections refused with GOAWAY before any request was processed.
    go_aways: u64,
    /// Modulify: Idempotency-Key (or `""` without one) -> method runs that executed.
    modulify_executions: HashMap<String, u32>,
    /// Modulify: method name -> runs that executed, with or without a key.
    modulify_methods: HashMap<String, u32>,
    /// Modulify: Idempotency-Key -> kept answers replayed (with or without the answer).
    modulify_replays: HashMap<String, u32>,
    /// Modulify: calls counted against the per-token per-minute budgets.
    modulify_rate_counted: u32,
    /// Deliveries to signed triggers and their verdicts, kept like `requests`.
    signed: Vec<SignedRecord>,
}

impl Ledger {
    pub(crate) fn new(keep: usize) -> Self {
        Self {
            requests: Vec::new(),
            dropped: 0,
            keep: keep.max(1),
            writes: HashMap::new(),
            deliveries: HashMap::new(),
            duplicates: HashMap::new(),
            exchanges: Vec::new(),
            go_aways: 0,
            modulify_executions: HashMap::new(),
            modulify_methods: HashMap::new(),
            modulify_replays: HashMap::new(),
            modulify_rate_counted: 0,
            signed: Vec::new(),
        }
    }

    /// Records a delivery to a signed trigger and its verdict.
    pub(crate) fn signature_checked(&mut self, record: SignedRecord) {
        if self.signed.len() >= 2 * self.keep {
            let excess = self.signed.len() - self.keep;
            self.signed.drain(..excess);
        }
        self.signed.push(record);
    }

    /// Every delivery to a signed trigger kept, in arrival order, with its verdict.
    pub fn signed_deliveries(&self) -> &[SignedRecord] {
        &self.signed
    }

    /// The deliveries to signed triggers with `webhook-id: id`, in arrival order.
    pub fn signed_deliveries_with_id(&self, id: &str) -> Vec<&SignedRecord> {
        self.signed
            .iter()
            .filter(|record| record.webhook_id.as_deref() == Some(id))
            .collect()
    }

    /// Records a request; its `seq`, for [`answer`](Self::answer).
    pub(crate) fn push_request(&mut self, mut record: RequestRecord) -> u64 {
        if self.requests.len() >= 2 * self.keep {
            let excess = self.requests.len() - self.keep;
            self.requests.drain(..excess);
            self.dropped += excess as u64;
        }
        let seq = self.dropped + self.requests.len() as u64;
        record.seq = seq;
        self.requests.push(record);
        seq
    }

    /// Records the status answered to request `seq` (`None`: closed without an answer).
    pub(crate) fn answer(&mut self, seq: u64, status: Option<u16>) {
        let index = seq
            .checked_sub(self.dropped)
            .and_then(|i| usize::try_from(i).ok());
        if let Some(record) = index.and_then(|i| self.requests.get_mut(i)) {
            record.status = status;
        }
    }

    pub(crate) fn write_executed(&mut self, key: Option<&str>) {
        *self
            .writes
            .entry(key.unwrap_or_default().to_owned())
            .or_default() += 1;
    }

    pub(crate) fn run_created(&mut self, identity: &str, run_id: &str) {
        self.deliveries
            .entry(identity.to_owned())
            .or_default()
            .push(run_id.to_owned());
    }

    pub(crate) fn duplicate_answered(&mut self, identity: &str) {
        *self.duplicates.entry(identity.to_owned()).or_default() += 1;
    }

    pub(crate) fn exchanged(&mut self, record: ExchangeRecord) {
        self.exchanges.push(record);
    }

    pub(crate) fn went_away(&mut self) {
        self.go_aways += 1;
    }

    /// Records a Modulify run that executed; its server-wide number, from 1.
    pub(crate) fn modulify_executed(&mut self, method: &str, key: Option<&str>) -> u32 {
        *self
            .modulify_executions
            .entry(key.unwrap_or_default().to_owned())
            .or_default() += 1;
        *self.modulify_methods.entry(method.to_owned()).or_default() += 1;
        self.modulify_total_executions()
    }

    pub(crate) fn modulify_replayed(&mut self, key: &str) {
        *self.modulify_replays.entry(key.to_owned()).or_default() += 1;
    }

    pub(crate) fn modulify_counted(&mut self) {
        self.modulify_rate_counted += 1;
    }

    /// HTTP/2 connections refused with GOAWAY before any of their requests was processed (see
    /// [`MockServer::go_away_connections`](crate::MockServer::go_away_connections)).
    pub fn go_aways(&self) -> u64 {
        self.go_aways
    }

    /// Every request kept, in arrival order.
    pub fn requests(&self) -> &[RequestRecord] {
        &self.requests
    }

    /// Requests with `method` whose (redacted) path starts with `prefix`.
    pub fn requests_to(&self, method: &str, prefix: &str) -> Vec<&RequestRecord> {
        self.requests
            .iter()
            .filter(|r| r.method == method && r.path.starts_with(prefix))
            .collect()
    }

    /// The most requests with `method` under `prefix` that arrived within any one second (on
    /// the real monotonic clock): how hard a client pressed on a route, such as the token
    /// endpoint.
    pub fn busiest_second(&self, method: &str, prefix: &str) -> usize {
        let arrivals: Vec<Instant> = self
            .requests_to(method, prefix)
            .iter()
            .map(|request| request.arrived)
            .collect();
        arrivals
            .iter()
            .map(|from| {
                arrivals
                    .iter()
                    .filter(|at| **at >= *from && at.duration_since(*from) < Duration::from_secs(1))
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    /// Requests that carried `Idempotency-Key: key`, in arrival order.
    pub fn requests_with_key(&self, key: &str) -> Vec<&RequestRecord> {
        self.requests
            .iter()
            .filter(|r| r.idempotency_key.as_deref() == Some(key))
            .collect()
    }

    /// Writes that executed (committed) under `key`. Replays, conflicts,
    /// refusals and failed (5xx) executions do not count.
    pub fn writes_executed(&self, key: &str) -> u32 {
        self.writes.get(key).copied().unwrap_or(0)
    }

    /// Writes that executed in all, keyed or not.
    pub fn total_writes_executed(&self) -> u32 {
        self.writes.values().sum()
    }

    /// Workflow runs created for a delivery identity: the header value, or
    /// `hash:<hex>` for a header-less delivery.
    pub fn runs_for_delivery(&self, identity: &str) -> &[String] {
        self.deliveries.get(identity).map_or(&[], Vec::as_slice)
    }

    /// Runs created by every delivery.
    pub fn total_runs(&self) -> usize {
        self.deliveries.values().map(Vec::len).sum()
    }

    /// How many times a delivery identity was answered `duplicate`.
    pub fn duplicates_for_delivery(&self, identity: &str) -> u32 {
        self.duplicates.get(identity).copied().unwrap_or(0)
    }

    /// Every client-credentials exchange, granted or not.
    pub fn exchanges(&self) -> &[ExchangeRecord] {
        &self.exchanges
    }

    /// Modulify method runs that executed under `Idempotency-Key: key` (`""`: without a key).
    /// Replays, refusals, failed runs and read-only methods do not count.
    pub fn modulify_executions(&self, key: &str) -> u32 {
        self.modulify_executions.get(key).copied().unwrap_or(0)
    }

    /// Kept Modulify answers replayed for `key`, those replayed without the answer included.
    pub fn modulify_replays(&self, key: &str) -> u32 {
        self.modulify_replays.get(key).copied().unwrap_or(0)
    }

    /// Modulify method runs that executed in all, keyed or not.
    pub fn modulify_total_executions(&self) -> u32 {
        self.modulify_executions.values().sum()
    }

    /// Runs of the Modulify `method` that executed, keyed or not.
    pub fn modulify_executions_of(&self, method: &str) -> u32 {
        self.modulify_methods.get(method).copied().unwrap_or(0)
    }

    /// Modulify calls counted against the per-token per-minute budgets; replays are not.
    pub fn modulify_rate_counted(&self) -> u32 {
        self.modulify_rate_counted
    }

    /// Exchanges that issued a token.
    pub fn tokens_issued(&self) -> usize {
        self.exchanges.iter().filter(|e| e.granted).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> RequestRecord {
        RequestRecord {
            seq: 0,
            method: "GET".into(),
            path: "/".into(),
            arrived: Instant::now(),
            at: SystemTime::UNIX_EPOCH,
            request_id: String::new(),
            idempotency_key: None,
            status: None,
            fault: None,
            version: "HTTP/1.1".into(),
        }
    }

    #[test]
    fn keeps_between_one_and_two_times_the_configured_records_and_answers_by_seq() {
        let mut ledger = Ledger::new(10);
        let seqs: Vec<u64> = (0..25).map(|_| ledger.push_request(record())).collect();
        assert_eq!(seqs, (0..25).collect::<Vec<_>>());
        assert!((10..=20).contains(&ledger.requests().len()));
        ledger.answer(24, Some(200));
        ledger.answer(0, Some(500));
        let last = ledger.requests().last().unwrap();
        assert_eq!((last.seq, last.status), (24, Some(200)));
        assert!(
            ledger
                .requests()
                .iter()
                .all(|r| r.seq == 24 || r.status.is_none())
        );
    }
}
