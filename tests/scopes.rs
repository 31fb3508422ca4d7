//! Every limit knows whom it holds: a server's signal closes exactly the scope it speaks for
//! (one trigger, the credential's API budget, one call), in every shape a sender runs in (one
//! call at a time, a pool of 64, everything in flight), over real TCP against the contract
//! server's ledger.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hodoflow_mock::{DEMO_MODULIFY_TOKEN, DEMO_ORGANIZATION, Fault, MockServer, TriggerSeed};
use hodoflow_retry::{
    Budget, ErrorKind, HodoflowClient, ModulifyClient, Result, Surface, webhook::WebhookOutcome,
};
use support::{EVENT, JSON_API, PROJECTS, TRIGGER, WEBHOOKS, builder, delivery, demo, server};

/// The second trigger of the organization, beside the demo one.
const TRIGGER_B: &str = "trg_second_5e1f";

/// The shapes a sender runs in.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// One call at a time.
    Sequential,
    /// A pool of workers taking the next call as one ends.
    Pool(usize),
    /// Every call spawned at once.
    AllInFlight,
}

const SHAPES: [Shape; 3] = [Shape::Sequential, Shape::Pool(64), Shape::AllInFlight];

/// Runs `count` calls `call(n)` in `shape`, and returns their results in the order of `n`.
async fn in_shape<T, F, Fut>(shape: Shape, count: usize, call: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    let call = Arc::new(call);
    let mut ended: Vec<(usize, T)> = Vec::new();
    match shape {
        Shape::Sequential => {
            for n in 0..count {
                ended.push((n, call(n).await));
            }
        }
        Shape::Pool(workers) => {
            let next = Arc::new(AtomicUsize::new(0));
            let pool: Vec<_> = (0..workers)
                .map(|_| {
                    let (call, next) = (Arc::clone(&call), Arc::clone(&next));
                    tokio::spawn(async move {
                        let mut done = Vec::new();
                        loop {
                            let n = next.fetch_add(1, Ordering::Relaxed);
                            if n >= count {
                                return done;
                            }
                            done.push((n, call(n).await));
                        }
                    })
                })
                .collect();
            for worker in pool {
                ended.extend(worker.await.expect("no worker panicked"));
            }
        }
        Shape::AllInFlight => {
            let calls: Vec<_> = (0..count)
                .map(|n| {
                    let call = Arc::clone(&call);
                    tokio::spawn(async move { (n, call(n).await) })
                })
                .collect();
            for spawned in calls {
                ended.push(spawned.await.expect("no call panicked"));
            }
        }
    }
    ended.sort_by_key(|(n, _)| *n);
    ended.into_iter().map(|(_, result)| result).collect()
}

/// A server with a second trigger, `TRIGGER_B`, beside the demo one.
async fn two_triggers() -> MockServer {
    let server = server().await;
    server.put_trigger(TriggerSeed::new(TRIGGER_B, DEMO_ORGANIZATION));
    server
}

/// The demo trigger answers its next delivery `429 Rate limit exceeded` with `Retry-After: 60`.
fn trigger_a_limited() -> Fault {
    Fault::respond(429)
        .header("Retry-After", "60")
        .body(r#"{"error":"Rate limit exceeded"}"#)
        .on("POST", &format!("{WEBHOOKS}{TRIGGER}"))
        .times(1)
}

/// A delivery to trigger B (even `n`) or a JSON:API read (odd `n`): how many attempts it sent.
async fn b_or_read(client: HodoflowClient, n: usize) -> Result<usize> {
    if n.is_multiple_of(2) {
        let id = delivery(&format!("to-b-{n}"));
        let sent = client.deliver(TRIGGER_B, EVENT).delivery_id(id).send();
        sent.await.map(|delivery| delivery.attempts().len())
    } else {
        let read = client.get(PROJECTS).send().await;
        read.map(|response| response.attempts().len())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_triggers_429_holds_that_trigger_and_nothing_else_in_every_shape() {
    for shape in SHAPES {
        let server = two_triggers().await;
        let budget = Budget::new().max_elapsed(Duration::from_secs(10));
        let client = demo(builder(&server).budget(budget));
        server.inject(trigger_a_limited());

        // Trigger A's own 429: its Retry-After is past the call's budget, so it stops at once.
        let limited = client
            .deliver(TRIGGER, EVENT)
            .delivery_id(delivery("to-a"))
            .send()
            .await
            .expect_err("trigger A is limited for 60 s");
        assert_eq!(limited.kind(), ErrorKind::BudgetExhausted, "{limited}");
        assert_eq!(limited.attempts().len(), 1);
        let closed = client.closed_scopes();
        assert_eq!(closed.len(), 1, "{closed:?}");
        assert!(closed[0].scope.starts_with("trigger "), "{closed:?}");
        assert!(closed[0].remaining > Duration::from_secs(50), "{closed:?}");

        // Trigger B and the JSON:API are sent at once: one attempt each, no wait anywhere.
        let ended = in_shape(shape, 128, {
            let client = client.clone();
            move |n| b_or_read(client.clone(), n)
        })
        .await;
        for (n, attempts) in ended.into_iter().enumerate() {
            let attempts = attempts.unwrap_or_else(|e| panic!("{shape:?}: call {n}: {e}"));
            assert_eq!(attempts, 1, "{shape:?}: call {n}");
        }
        let stats = client.stats();
        assert_eq!(stats.gate_wait, Duration::ZERO, "{shape:?}");
        assert_eq!(stats.route_wait, Duration::ZERO, "{shape:?}");
        assert_eq!(stats.gate_closed_for, None, "the credential stays open");

        // Trigger A stays closed: a second delivery to it is refused, nothing sent.
        let again = client
            .deliver(TRIGGER, EVENT)
            .delivery_id(delivery("to-a-again"))
            .send()
            .await
            .expect_err("still closed");
        assert_eq!(again.kind(), ErrorKind::BudgetExhausted, "{again}");
        assert!(again.attempts().is_empty(), "nothing sent: {again}");
        assert!(!again.may_have_run());
        assert!(
            again
                .retry_after()
                .is_some_and(|wait| wait > Duration::from_secs(50))
        );
        // The ledger's paths hide trigger tokens: the delivery IDs tell the triggers apart.
        let ledger = server.ledger();
        let to_a = |event: &str| {
            ledger
                .requests_with_key(delivery(event).key().as_str())
                .len()
        };
        assert_eq!(to_a("to-a"), 1, "{shape:?}: the limited delivery reached A");
        assert_eq!(to_a("to-a-again"), 0, "{shape:?}: nothing more reached A");
        let deliveries = ledger.requests_to("POST", WEBHOOKS);
        assert_eq!(deliveries.len(), 65, "{shape:?}: A's one and B's 64");
        assert_eq!(
            deliveries.iter().filter(|r| r.status == Some(202)).count(),
            64,
            "{shape:?}"
        );
        assert_eq!(ledger.requests_to("GET", JSON_API).len(), 64, "{shape:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_api_429_holds_the_credentials_api_calls_and_no_delivery() {
    let server = server().await;
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "60")
            .body(r#"{"errors":[{"status":"429","code":"rate_limited","title":"Too many"}]}"#)
            .on("GET", JSON_API)
            .times(1),
    );
    let budget = Budget::new().max_elapsed(Duration::from_secs(10));
    let client = demo(builder(&server).budget(budget));
    let limited = client.get(PROJECTS).send().await.expect_err("limited");
    assert_eq!(limited.kind(), ErrorKind::BudgetExhausted, "{limited}");
    assert!(client.stats().gate_closed_for.is_some(), "the credential");

    for shape in SHAPES {
        let ended = in_shape(shape, 32, {
            let client = client.clone();
            move |n| {
                let client = client.clone();
                async move {
                    let id = delivery(&format!("{n}-while-the-api-is-limited"));
                    client.deliver(TRIGGER, EVENT).delivery_id(id).send().await
                }
            }
        })
        .await;
        for delivered in ended {
            let delivered = delivered.expect("webhook deliveries do not sit in the API budget");
            assert_eq!(delivered.attempts().len(), 1);
        }
    }
    // API calls still wait for the credential's reopening: refused past their budget.
    let read = client.get(PROJECTS).send().await.expect_err("still closed");
    assert_eq!(read.kind(), ErrorKind::BudgetExhausted);
    assert!(read.attempts().is_empty());
    let ledger = server.ledger();
    assert_eq!(ledger.requests_to("GET", JSON_API).len(), 1);
    assert_eq!(client.stats().gate_wait, Duration::ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_outage_never_holds_the_json_api_in_every_shape() {
    let server = server().await;
    server.inject(
        Fault::respond(503)
            .body(r#"{"error":"Processing temporarily unavailable"}"#)
            .on("POST", WEBHOOKS)
            .probability(1.0, 7),
    );
    let budget = Budget::new()
        .max_attempts(2)
        .max_elapsed(Duration::from_secs(5));
    let client = demo(builder(&server).budget(budget));
    // Enough refused deliveries for the retry budget to call webhook ingestion down.
    let failed = in_shape(Shape::AllInFlight, 20, {
        let client = client.clone();
        move |n| {
            let client = client.clone();
            async move {
                let id = delivery(&format!("in-the-outage-{n}"));
                client.deliver(TRIGGER, EVENT).delivery_id(id).send().await
            }
        }
    })
    .await;
    for ended in &failed {
        assert!(ended.is_err(), "{ended:?}");
    }
    assert!(client.service_down_for(Surface::Webhook).is_some());
    assert_eq!(client.service_down_for(Surface::JsonApiWrite), None);
    let refused_before = client.stats().retry_budget_local_rejections;

    for shape in SHAPES {
        let written = in_shape(shape, 64, {
            let client = client.clone();
            move |n| {
                let client = client.clone();
                async move {
                    let key = support::key(&format!("{shape:?}-write-{n}"));
                    let body = format!(
                        r#"{{"data":{{"type":"projects","attributes":{{"name":"p{n}"}}}}}}"#
                    );
                    client.create(PROJECTS, key, body).send().await
                }
            }
        })
        .await;
        for (n, write) in written.into_iter().enumerate() {
            let write = write.unwrap_or_else(|e| panic!("{shape:?}: write {n}: {e}"));
            assert_eq!(write.attempts().len(), 1, "{shape:?}: sent at once");
        }
    }
    assert_eq!(server.ledger().requests_to("POST", JSON_API).len(), 192);
    assert_eq!(
        client.stats().retry_budget_local_rejections,
        refused_before,
        "no write was held or refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modulify_429_never_holds_the_hodoflow_client_on_the_same_server() {
    let server = server().await;
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "60")
            .body(r#"{"data":null,"error":{"code":"rate_limited","message":"spent"}}"#)
            .on("POST", "/v1/send_message")
            .times(1),
    );
    let budget = Budget::new().max_elapsed(Duration::from_secs(10));
    let modulify = ModulifyClient::builder(server.base_url())
        .bearer_token(DEMO_MODULIFY_TOKEN)
        .budget(budget)
        .build()
        .unwrap();
    let limited = modulify
        .call("send_message", r#"{"projectId":"site_1","prompt":"hi"}"#)
        .operation_id("limited")
        .send()
        .await
        .expect_err("the token is limited for 60 s");
    assert_eq!(limited.kind(), ErrorKind::BudgetExhausted, "{limited}");
    let hodoflow = demo(builder(&server).budget(budget));
    for shape in SHAPES {
        let ended = in_shape(shape, 16, {
            let hodoflow = hodoflow.clone();
            move |n| b_or_read(hodoflow.clone(), n * 2 + 1)
        })
        .await;
        assert!(
            ended.iter().all(|ended| matches!(ended, Ok(1))),
            "{ended:?}"
        );
    }
}

#[tokio::test]
async fn an_in_progress_answer_the_budget_cut_short_may_have_run() {
    let server = server().await;
    let in_progress =
        r#"{"data":null,"error":{"code":"idempotency_key_in_progress","message":"running"}}"#;
    server.inject(
        Fault::respond(409)
            .header("Retry-After", "30")
            .body(in_progress)
            .on("POST", "/v1/send_message")
            .probability(1.0, 7),
    );
    let budget = Budget::new().max_elapsed(Duration::from_secs(10));
    let modulify = ModulifyClient::builder(server.base_url())
        .bearer_token(DEMO_MODULIFY_TOKEN)
        .budget(budget)
        .build()
        .unwrap();
    let error = modulify
        .call("send_message", r#"{"projectId":"site_1","prompt":"hi"}"#)
        .operation_id("running-elsewhere")
        .send()
        .await
        .expect_err("30 s is past the budget");
    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert_eq!(error.status().map(|s| s.as_u16()), Some(409));
    assert!(error.may_have_run(), "the server said it is running");

    // The same on Hodoflow's JSON:API for a caller that waits for a key in progress.
    server.clear_faults();
    server.inject(
        Fault::respond(409)
            .header("Retry-After", "30")
            .body(r#"{"errors":[{"status":"409","code":"idempotency_key_in_progress","title":"In progress"}]}"#)
            .on("POST", JSON_API)
            .probability(1.0, 7),
    );
    let client = demo(builder(&server).budget(budget.wait_for_in_progress(true)));
    let error = client
        .create(PROJECTS, support::key("running"), r#"{"data":{}}"#)
        .send()
        .await
        .expect_err("30 s is past the budget");
    assert_eq!(error.kind(), ErrorKind::BudgetExhausted, "{error}");
    assert!(error.may_have_run());
}

#[tokio::test]
async fn a_202_with_a_70_kb_body_is_an_accepted_delivery() {
    let server = server().await;
    let padding = "x".repeat(70 * 1024);
    let body = format!(
        r#"{{"status":"accepted","workflow_run_id":"550e8400-e29b-41d4-a716-446655440000","padding":"{padding}"}}"#
    );
    server.inject(
        Fault::respond(202)
            .body(&body)
            .on("POST", WEBHOOKS)
            .times(1),
    );
    let client = demo(builder(&server));
    let delivered = client
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery("large-answer"))
        .send()
        .await
        .expect("a 202 is accepted, however long its body");
    assert_eq!(
        delivered.outcome(),
        &WebhookOutcome::Accepted { run_id: None },
        "the body was not read: its run ID is unknown"
    );
    assert_eq!(delivered.attempts().len(), 1);
    assert_eq!(server.ledger().requests_to("POST", WEBHOOKS).len(), 1);
}
