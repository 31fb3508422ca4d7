//! Run with: `cargo run --example quickstart`
//!
//! The SDK at work on the embedded contract server, with no setup: 1,000 webhook deliveries and
//! 200 JSON:API writes go through one client, 64 at a time, while about 10% of answers are lost
//! after the server committed, about 10% are 503s, a burst of 429s closes the webhook trigger
//! (its deliveries only: the writes go on), and the bearer token expires mid-run. Then the server's ledger checks exactly-once: one
//! workflow run per delivery ID, one execution per Idempotency-Key.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hodoflow_mock::{
    DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN, Fault, Ledger, Limits, ManualClock,
    MockServer,
};
use hodoflow_retry::{
    Backoff, Budget, DeliveryId, Error, HodoflowClient, IdempotencyKey, webhook::WebhookOutcome,
};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

const DELIVERIES: usize = 1_000;
const WRITES: usize = 200;
const IN_FLIGHT: usize = 64;
const WEBHOOKS: &str = "/api/v1/webhooks/";
const JSON_API: &str = "/api/json/";

/// What one operation ended with, as the client saw it.
enum Ended {
    Accepted,
    Duplicate,
    Created,
    Replayed,
    Failed(Error),
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();

    // 1. A contract server on 127.0.0.1 with the demo client and trigger, on a clock the demo
    //    moves. The trigger takes 10,000 requests a minute so the demo is not paced for minutes.
    let clock = ManualClock::new();
    let limits = Limits {
        webhook_rate_limit: 10_000,
        ..Limits::default()
    };
    let token_ttl = limits.token_ttl;
    let server = Arc::new(
        MockServer::builder()
            .limits(limits)
            .clock(clock.clone())
            .start()
            .await?,
    );

    // 2. Faults, seeded so every run is the same: answers lost after commit, and 503s.
    for (surface, seed) in [(WEBHOOKS, 1), (JSON_API, 2)] {
        server.inject(
            Fault::execute_then_close()
                .on("POST", surface)
                .probability(0.10, seed),
        );
    }
    server.inject(
        Fault::respond(503)
            .body(r#"{"error":"Processing temporarily unavailable"}"#)
            .on("POST", WEBHOOKS)
            .probability(0.10, 3),
    );
    server.inject(
        Fault::idempotency_unavailable()
            .on("POST", JSON_API)
            .probability(0.10, 4),
    );

    // 3. One client for everything. The backoff is in milliseconds so the demo is quick; the
    //    defaults (500 ms doubling to 30 s) suit production.
    let client = HodoflowClient::builder(server.base_url())
        .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .budget(
            Budget::new()
                .max_attempts(10)
                .max_elapsed(Duration::from_secs(20)),
        )
        .backoff(
            Backoff::new()
                .base(Duration::from_millis(10))
                .cap(Duration::from_millis(200)),
        )
        .build()?;

    // 4. A quarter of the way in, a burst of ten 429s with Retry-After: 1 closes the trigger
    //    for its deliveries (a trigger's 429 holds that trigger only); two thirds in, the server's clock passes the token's expiry.
    let (chaos, watched) = (Arc::clone(&server), client.clone());
    tokio::spawn(async move {
        let calls = DELIVERIES + WRITES;
        started_calls(&watched, calls / 4).await;
        chaos.inject(
            Fault::respond(429)
                .header("Retry-After", "1")
                .body(r#"{"error":"Rate limit exceeded"}"#)
                .on("POST", WEBHOOKS)
                .times(10),
        );
        started_calls(&watched, calls * 2 / 3).await;
        clock.advance(token_ttl + Duration::from_secs(1));
    });

    // 5. Every delivery and write, 64 in flight, each with a key derived from its business ID.
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut calls = JoinSet::new();
    for n in 0..DELIVERIES + WRITES {
        let (client, permits) = (client.clone(), Arc::clone(&permits));
        calls.spawn(async move {
            let _permit = permits.acquire_owned().await.expect("never closed");
            let ended = if n < DELIVERIES {
                deliver(&client, n).await
            } else {
                write(&client, n - DELIVERIES).await
            };
            (n, ended)
        });
    }
    let mut ended = Vec::with_capacity(DELIVERIES + WRITES);
    while let Some(call) = calls.join_next().await {
        ended.push(call?);
    }
    ended.sort_by_key(|(n, _)| *n);
    let elapsed = started.elapsed();

    // 6. What the client says, then what the server's ledger says.
    let ledger = server.ledger();
    let exactly_once = report(&client, &ledger, &ended, elapsed);
    if !exactly_once {
        return Err("the ledger shows an operation executed more than once".into());
    }
    Ok(())
}

/// Returns once `client` has started `calls` calls.
async fn started_calls(client: &HodoflowClient, calls: usize) {
    while client.stats().calls < calls as u64 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Delivers event `n` with a delivery ID derived from its business ID.
async fn deliver(client: &HodoflowClient, n: usize) -> Ended {
    let body = format!(r#"{{"order":{n},"event":"shipped"}}"#);
    let sent = client
        .deliver(DEMO_TRIGGER_TOKEN, body)
        .delivery_id(delivery_id(n))
        .send()
        .await;
    match sent {
        Ok(delivery) => match delivery.outcome() {
            WebhookOutcome::Duplicate => Ended::Duplicate,
            _ => Ended::Accepted,
        },
        Err(error) => Ended::Failed(error),
    }
}

/// Creates invoice `n` with an Idempotency-Key derived from its business ID.
async fn write(client: &HodoflowClient, n: usize) -> Ended {
    let body = format!(r#"{{"data":{{"type":"invoices","attributes":{{"order":{n}}}}}}}"#);
    match client
        .create("/api/json/v1/invoices", write_key(n), body)
        .send()
        .await
    {
        Ok(response) if response.replayed() => Ended::Replayed,
        Ok(_) => Ended::Created,
        Err(error) => Ended::Failed(error),
    }
}

fn delivery_id(n: usize) -> DeliveryId {
    DeliveryId::new(IdempotencyKey::from_operation_id(&format!(
        "order-{n}:shipped"
    )))
}

fn write_key(n: usize) -> IdempotencyKey {
    IdempotencyKey::from_operation_id(&format!("order-{n}:create-invoice"))
}

/// Prints the table and returns whether the ledger shows exactly-once.
fn report(
    client: &HodoflowClient,
    ledger: &Ledger,
    ended: &[(usize, Ended)],
    elapsed: Duration,
) -> bool {
    let count = |range: std::ops::Range<usize>, pick: fn(&Ended) -> bool| {
        ended[range].iter().filter(|(_, e)| pick(e)).count()
    };
    let all_deliveries = 0..DELIVERIES;
    let all_writes = DELIVERIES..DELIVERIES + WRITES;
    let stats = client.stats();

    println!(
        "hodoflow-retry quickstart: {DELIVERIES} deliveries and {WRITES} writes through one client, {IN_FLIGHT} in flight"
    );
    println!(
        "faults: ~10% answers lost after commit, ~10% 503, ten 429s (Retry-After: 1), the token expiring mid-run"
    );
    println!();
    println!("the client saw");
    println!(
        "  deliveries   accepted {:>5}   duplicate {:>5}   failed {:>3}",
        count(all_deliveries.clone(), |e| matches!(e, Ended::Accepted)),
        count(all_deliveries.clone(), |e| matches!(e, Ended::Duplicate)),
        count(all_deliveries.clone(), |e| matches!(e, Ended::Failed(_))),
    );
    println!(
        "  writes       created  {:>5}   replayed  {:>5}   failed {:>3}",
        count(all_writes.clone(), |e| matches!(e, Ended::Created)),
        count(all_writes.clone(), |e| matches!(e, Ended::Replayed)),
        count(all_writes.clone(), |e| matches!(e, Ended::Failed(_))),
    );
    let retries = stats.retries;
    println!(
        "  retries      {:>5}: lost answer {}, 503 {}, 429 {}, 401 re-exchange {}, timeout {}",
        retries.total(),
        retries.transport,
        retries.server_error,
        retries.rate_limited,
        retries.unauthorized,
        retries.timeout,
    );
    println!(
        "  attempts     {:>5} for {} calls",
        stats.attempts, stats.calls
    );
    println!(
        "  waited      {:>5.1} s for the closed trigger, {:.1} s at the credential's gate (summed over calls)",
        stats.route_wait.as_secs_f64(),
        stats.gate_wait.as_secs_f64(),
    );
    println!(
        "  exchanges    {:>5}; retry budget {} tokens left",
        stats.exchanges,
        stats
            .retry_budget_tokens
            .map_or("off".to_owned(), |t| t.to_string()),
    );
    for (n, end) in ended {
        if let Ended::Failed(error) = end {
            println!(
                "  failed #{n}: {error} (may have run: {})",
                error.may_have_run()
            );
            for attempt in error.attempts() {
                println!("    {attempt}");
            }
        }
    }

    // The calls' requests; the token endpoint's are counted as exchanges.
    let requests: Vec<_> = ledger
        .requests()
        .iter()
        .filter(|r| r.path != "/oauth/token")
        .collect();
    let lost = requests.iter().filter(|r| r.status.is_none()).count();
    let with = |code: u16| requests.iter().filter(|r| r.status == Some(code)).count();
    let runs: Vec<usize> = (0..DELIVERIES)
        .map(|n| {
            ledger
                .runs_for_delivery(delivery_id(n).key().as_str())
                .len()
        })
        .collect();
    let executions: Vec<u32> = (0..WRITES)
        .map(|n| ledger.writes_executed(write_key(n).as_str()))
        .collect();
    println!();
    println!("the server's ledger says");
    println!(
        "  requests     {:>5}: answer lost {lost}, 503 {}, 429 {}, 401 {}; token exchanges {}",
        requests.len(),
        with(503),
        with(429),
        with(401),
        ledger.tokens_issued(),
    );
    println!(
        "  runs         {:>5} for {DELIVERIES} delivery IDs: one {}, none {}, more than one {}",
        ledger.total_runs(),
        runs.iter().filter(|&&r| r == 1).count(),
        runs.iter().filter(|&&r| r == 0).count(),
        runs.iter().filter(|&&r| r > 1).count(),
    );
    println!(
        "  executions   {:>5} for {WRITES} keys: one {}, none {}, more than one {}",
        ledger.total_writes_executed(),
        executions.iter().filter(|&&e| e == 1).count(),
        executions.iter().filter(|&&e| e == 0).count(),
        executions.iter().filter(|&&e| e > 1).count(),
    );
    // Exactly once: no identity ran twice, and every success ran once.
    let once = runs.iter().all(|&r| r <= 1)
        && executions.iter().all(|&e| e <= 1)
        && ended.iter().all(|(n, end)| match end {
            Ended::Failed(_) => true,
            _ if *n < DELIVERIES => runs[*n] == 1,
            _ => executions[*n - DELIVERIES] == 1,
        });
    println!();
    println!(
        "exactly once: {}   ({:.1} s)",
        if once { "yes" } else { "NO" },
        elapsed.as_secs_f64()
    );
    once
}
