//! The adaptive retry budget over real TCP, judged by the server's ledger: a blip costs no
//! operation, retries the server paced with `Retry-After` are never refused nor early, and an
//! operation that starts after an outage healed is never refused.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hodoflow_mock::Fault;
use hodoflow_mock::{Limits, MockServer};
use hodoflow_retry::{Error, HodoflowClient, attempt::WaitReason, webhook::Delivery};
use support::{EVENT, TRIGGER, WEBHOOKS, builder, delivery, demo, server_where};
use tokio::sync::Barrier;

/// A server whose trigger takes any rate, so only the injected faults refuse.
async fn server() -> MockServer {
    server_where(|limits: &mut Limits| limits.webhook_rate_limit = u32::MAX).await
}

/// Delivers `count` distinct events at once, named `{prefix}-{n}`: every call is spawned and
/// waiting at a barrier before any is sent.
async fn burst(
    client: &HodoflowClient,
    prefix: &str,
    count: usize,
) -> Vec<Result<Delivery, Error>> {
    let barrier = Arc::new(Barrier::new(count));
    let calls: Vec<_> = (0..count)
        .map(|n| {
            let (client, barrier) = (client.clone(), Arc::clone(&barrier));
            let id = delivery(&format!("{prefix}-{n}"));
            tokio::spawn(async move {
                barrier.wait().await;
                client.deliver(TRIGGER, EVENT).delivery_id(id).send().await
            })
        })
        .collect();
    let mut done = Vec::new();
    for call in calls {
        done.push(call.await.expect("the call did not panic"));
    }
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blip_of_300_503s_against_300_concurrent_deliveries_costs_no_operation() {
    let server = server().await;
    let client = demo(builder(&server));
    // A sender at work: its token is cached, so the 300 calls send at once.
    support::deliver(&client, "before-the-blip").await;
    server.inject(
        Fault::webhook_unavailable(0)
            .on("POST", WEBHOOKS)
            .times(300),
    );

    let delivered = burst(&client, "blip", 300).await;

    for outcome in &delivered {
        let delivery = outcome.as_ref().expect("every delivery is taken");
        assert!(delivery.run_id().is_some());
    }
    let ledger = server.ledger();
    assert_eq!(ledger.total_runs(), 301, "one run per event, none twice");
    let refused = ledger
        .requests_to("POST", WEBHOOKS)
        .iter()
        .filter(|r| r.status == Some(503))
        .count();
    assert_eq!(refused, 300, "the blip was met in full");
    let stats = client.stats();
    assert_eq!((stats.succeeded, stats.failed), (301, 0));
    assert_eq!(stats.retry_budget_refusals, 0);
    assert_eq!(stats.retry_budget_waiting, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_200_429s_with_retry_after_1_ends_with_200_runs_none_early() {
    let server = server().await;
    let client = demo(builder(&server));
    support::deliver(&client, "before-the-burst").await;
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "1")
            .body(r#"{"error":"Rate limit exceeded"}"#)
            .on("POST", WEBHOOKS)
            .times(200),
    );

    let delivered = burst(&client, "paced", 200).await;

    assert!(delivered.iter().all(Result::is_ok), "no operation failed");
    let ledger = server.ledger();
    assert_eq!(ledger.total_runs(), 201);
    // Every 429 was followed by a retry planned for its Retry-After (that the engine sleeps no
    // less than it plans: tests/paused_time.rs).
    let mut retried = 0;
    for delivery in delivered.iter().map(|outcome| outcome.as_ref().unwrap()) {
        let refused = delivery
            .attempts()
            .iter()
            .filter(|attempt| attempt.status().map(|s| s.as_u16()) == Some(429));
        for attempt in refused {
            assert_eq!(attempt.wait_reason(), WaitReason::RetryAfter, "{attempt}");
            assert!(attempt.wait() >= Duration::from_secs(1), "{attempt}");
            retried += 1;
        }
    }
    let answered_429 = ledger
        .requests_to("POST", WEBHOOKS)
        .iter()
        .filter(|request| request.status == Some(429))
        .count();
    assert_eq!(
        retried, answered_429,
        "each 429 the server gave was retried"
    );
    assert!(retried >= 200, "every refusal was retried: {retried}");
    assert_eq!(client.stats().retry_budget_refusals, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_400_ms_outage_costs_no_operation_and_one_started_after_the_heal_is_never_refused() {
    let server = server().await;
    let client = demo(builder(&server));
    let outage = Duration::from_millis(400);
    let start = Instant::now();
    server.inject(Fault::respond(503).on("POST", WEBHOOKS).during(outage));

    let senders: Vec<_> = (0..50)
        .map(|sender| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut ops = Vec::new();
                let mut n = 0;
                while start.elapsed() < Duration::from_millis(1200) {
                    let began = start.elapsed();
                    let id = delivery(&format!("heal-{sender}-{n}"));
                    let sent = client.deliver(TRIGGER, EVENT).delivery_id(id).send().await;
                    ops.push((
                        began,
                        sent.map(|_| ()).map_err(|e| {
                            (
                                e.kind(),
                                format!(
                                    "{e} {:?}",
                                    e.attempts()
                                        .iter()
                                        .map(|a| (a.to_string(), a.wait()))
                                        .collect::<Vec<_>>()
                                ),
                            )
                        }),
                    ));
                    n += 1;
                }
                ops
            })
        })
        .collect();
    let mut ops = Vec::new();
    for sender in senders {
        ops.extend(sender.await.unwrap());
    }

    let before: Vec<_> = ops.iter().filter(|(began, _)| *began < outage).collect();
    let after: Vec<_> = ops.iter().filter(|(began, _)| *began >= outage).collect();
    let failed_before = before.iter().filter(|(_, ended)| ended.is_err()).count();
    let failed_after: Vec<_> = after.iter().filter(|(_, ended)| ended.is_err()).collect();
    println!(
        "outage then heal: {} operations before the heal ({failed_before} failed), {} after",
        before.len(),
        after.len()
    );
    let ledger = server.ledger();
    let refused = ledger
        .requests()
        .iter()
        .filter(|request| request.status == Some(503))
        .count();
    assert!(
        refused >= 50,
        "the outage was felt: {refused} answers of 503"
    );
    // A blip of 400 ms costs no operation: those held through it are released when it heals
    // (an earlier rule refused them after three refused probes, about 300 ms).
    let failed: Vec<_> = before.iter().filter(|(_, ended)| ended.is_err()).collect();
    assert_eq!(failed_before, 0, "the blip cost operations: {failed:?}");
    assert!(!after.is_empty());
    assert!(failed_after.is_empty(), "{failed_after:?}");
    let ok = ops.iter().filter(|(_, ended)| ended.is_ok()).count();
    assert_eq!(
        ledger.total_runs(),
        ok,
        "every success ran once, no failure ran"
    );
}

/// Runs `events` deliveries through `workers` sequential senders, each call of 6 s with 3
/// attempts of 1 s, the first `blip` of them answered 503; checks that none failed and each ran
/// once, and returns the server's ledger.
async fn pool_through_a_blip(
    workers: usize,
    events: usize,
    blip: Duration,
) -> hodoflow_mock::Ledger {
    let budget = hodoflow_retry::Budget::new()
        .max_attempts(3)
        .max_elapsed(Duration::from_secs(6))
        .attempt_timeout(Duration::from_secs(1));
    let server = server().await;
    let client = demo(builder(&server).budget(budget));
    support::deliver(&client, "before-the-blip").await;
    server.inject(Fault::respond(503).on("POST", WEBHOOKS).during(blip));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..workers)
        .map(|_| {
            let (client, next) = (client.clone(), Arc::clone(&next));
            tokio::spawn(async move {
                let mut failed = Vec::new();
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= events {
                        return failed;
                    }
                    let id = delivery(&format!("pool-{n}"));
                    let sent = client.deliver(TRIGGER, EVENT).delivery_id(id).send().await;
                    failed.extend(sent.err().map(|e| e.to_string()));
                }
            })
        })
        .collect();
    let mut failed = Vec::new();
    for worker in workers {
        failed.extend(worker.await.unwrap());
    }
    assert!(failed.is_empty(), "the blip cost events: {failed:?}");
    let ledger = server.ledger();
    assert_eq!(
        ledger.total_runs(),
        events + 1,
        "one run per event, none twice"
    );
    ledger
}

/// A pool of 7 drains a backlog through a blip timed in seconds, longer than its calls' attempts
/// last at the backoff's pace: the calls spend their spare attempts as the retry budget's
/// probes (seven in the blip's first 2 s), then every call is on its final attempt, held: none
/// spends it while its hold lasts, a probe finds the service back, and the ramp releases the
/// others before their time runs out. No event is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_7_rides_out_a_2_s_blip_with_every_call_on_its_final_attempt() {
    let ledger = pool_through_a_blip(7, 40, Duration::from_secs(2)).await;
    let refused = ledger
        .requests_to("POST", WEBHOOKS)
        .iter()
        .filter(|r| r.status == Some(503))
        .count();
    assert!(
        refused >= 14,
        "every call spent its spare attempts in the blip: {refused} answers of 503"
    );
}

/// A blip that ends as the pool's holds end: calls of 6 s with 1 s attempts hold 4.5 s, then
/// have half a second left to go. The heal is found by one of their last chances, and the ramp
/// that follows lets them all go at once, not at its steps a tenth of a second apart, which
/// would outlast their time. No event is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_8_rides_out_a_blip_that_ends_as_its_holds_end() {
    pool_through_a_blip(8, 24, Duration::from_millis(4800)).await;
}

/// The same blip with every call in flight at once: 64 calls whose holds all end together, as
/// the service heals. No event is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_calls_in_flight_ride_out_a_blip_that_ends_as_their_holds_end() {
    pool_through_a_blip(64, 64, Duration::from_millis(4800)).await;
}

/// A sequential sender meets a 2 s blip that outlasts its first call's attempts at the backoff's
/// pace: the call keeps its final attempt for after the outage (a refused probe would spend it,
/// and lose the event), probing meanwhile on its allowance of paced retries, and the event is
/// delivered after the blip. No event is lost; the call sends at most `max_attempts +
/// paced_retries` requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequential_sender_keeps_its_final_attempt_for_after_a_2_s_blip() {
    let server = server().await;
    let budget = hodoflow_retry::Budget::new()
        .max_elapsed(Duration::from_secs(8))
        .attempt_timeout(Duration::from_secs(1));
    let client = demo(builder(&server).budget(budget));
    support::deliver(&client, "before-the-blip").await;
    let blip = Duration::from_secs(2);
    server.inject(Fault::respond(503).on("POST", WEBHOOKS).during(blip));
    for n in 0..10 {
        let id = delivery(&format!("sequential-{n}"));
        client
            .deliver(TRIGGER, EVENT)
            .delivery_id(id)
            .send()
            .await
            .unwrap_or_else(|e| panic!("event {n} lost to the blip: {e}"));
    }
    let ledger = server.ledger();
    assert_eq!(ledger.total_runs(), 11, "one run per event, none twice");
    let first = ledger.requests_with_key(delivery("sequential-0").key().as_str());
    let most = hodoflow_retry::Budget::DEFAULT_MAX_ATTEMPTS
        + hodoflow_retry::Budget::DEFAULT_PACED_RETRIES;
    assert!(
        first.len() >= hodoflow_retry::Budget::DEFAULT_MAX_ATTEMPTS as usize
            && first.len() <= most as usize,
        "{first:?}"
    );
    assert!(
        first.iter().rev().skip(1).all(|r| r.status == Some(503)),
        "every request but the last met the blip"
    );
    // The server answers 503 for as long as the blip lasts: the 202 says the final attempt went
    // after it.
    let last = first.last().unwrap();
    assert_eq!(last.status, Some(202));
}
