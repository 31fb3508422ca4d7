//! `reauth`: one expired token, many calls, how many exchanges?
//!
//! The server's clock is a `ManualClock`. One delivery makes the SDK exchange and cache a
//! token; the clock then moves past `Limits::token_ttl`, so the server answers the cached
//! token `401 missing_credentials` (expired) while the SDK still thinks it valid. 1,000 calls
//! are then released at once from a barrier, each to its own trigger, whose first request
//! the server holds 300 ms before handling it: without the hold, the first 401 comes back
//! and the SDK has a new token before most calls have sent anything, and those calls never
//! meet the expired token. Token exchanges made during the burst are read from the server's
//! ledger (`tokens_issued`). The SDK runs with its defaults.
//! Target: 1 exchange.

use std::time::Duration;

use bytes::Bytes;
use hodoflow_mock::{DEMO_TRIGGER_TOKEN, Fault, ManualClock};
use hodoflow_retry::{Backoff, DeliveryId, IdempotencyKey, limit::RetryBudget};

use crate::report::Report;
use crate::size::Size;
use crate::{Result, drive, peers, server};

const BODY: &[u8] = br#"{"event":"order.shipped","order_id":4711}"#;

pub(crate) async fn run(size: Size) -> Result<Report> {
    let calls = size.pick(1_000u64, 20);
    let clock = ManualClock::new();
    let server = server::start_on(clock.clone()).await?;
    let ttl = server.limits().token_ttl;
    let sdk = peers::sdk(&server.base_url(), Backoff::default(), RetryBudget::new())?;
    let id = DeliveryId::new(IdempotencyKey::from_operation_id("reauth-first"));
    sdk.deliver(DEMO_TRIGGER_TOKEN, Bytes::from_static(BODY))
        .delivery_id(id)
        .send()
        .await?;
    let before = server.ledger().tokens_issued();
    clock.advance(ttl + Duration::from_secs(1));
    let hold = size.pick(Duration::from_millis(300), Duration::from_millis(100));
    let triggers = server::triggers(&server, "trg_reauth", calls);
    for token in triggers.iter() {
        server.inject(
            Fault::delay_then_handle(hold)
                .on("POST", &format!("{}{token}", server::WEBHOOKS))
                .times(1),
        );
    }

    let failed = drive::burst(&sdk, triggers, "reauth", BODY).await;
    let ledger = server.ledger();
    let exchanges = ledger.tokens_issued() - before;
    let unauthorized = ledger
        .requests_to("POST", server::WEBHOOKS)
        .iter()
        .filter(|r| r.status == Some(401))
        .count();
    eprintln!("reauth: {exchanges} exchanges, {unauthorized} answers 401, {failed} calls failed");

    let mut report = Report::new("reauth");
    report.param("calls", calls);
    report.param("concurrency", calls);
    report.param("expiry", format!("server ManualClock advanced by token_ttl ({} s) + 1 s after the first token was cached", ttl.as_secs()));
    report.param("first_attempt_hold_ms", hold.as_millis() as u64);
    report.param("sdk_config", "defaults");
    report.figure("token_exchanges_during_burst", exchanges);
    report.figure("answers_401", unauthorized);
    report.figure("calls_failed", failed);
    report.figure("sdk_exchanges_total", sdk.stats().exchanges);
    report.exactly("token_exchanges_during_burst", exchanges as f64, 1.0);
    Ok(report)
}
