//! Exactly-once under chaos: 10,000 webhook deliveries, JSON:API writes and Modulify calls,
//! at high concurrency, against a contract server with seeded faults: answers lost after commit,
//! 503s (half with `Retry-After: 0`), 429s, answers delayed past the attempt timeout, tokens that
//! expire every few seconds on the server and are renewed about every second by the client,
//! and a short window in which every answer is a 503.
//!
//! The server's ledger is the judge: no identity or key executed twice, every success executed
//! exactly once, every failure executed at most once and says `may_have_run` whenever it did, and
//! no operation unaccounted for. The run is traced at TRACE level, and the trace holds no access
//! token, client secret, trigger token or body marker.
//!
//! The seed is printed; replay a failure with `CHAOS_SEED=<seed> cargo test --test chaos`.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hodoflow_mock::{
    ClientSeed, Fault, Ledger, Limits, MockServer, ModulifyTokenSeed, TriggerSeed,
};
use hodoflow_retry::{
    Backoff, Budget, DeliveryId, Error, ErrorKind, HodoflowClient, IdempotencyKey, ModulifyClient,
    auth::{AccessToken, ClientCredentials, ExchangeFuture, TokenExchanger},
    modulify::ModulifyOutcome,
    webhook::WebhookOutcome,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use support::{Captured, Recording};

const OPERATIONS: usize = 10_000;
/// One operation in five is a JSON:API write, one in ten (the fifth after each write's) a
/// Modulify call, the rest are deliveries.
const WRITE_EVERY: usize = 5;
const MODULIFY_EVERY: usize = 10;
const IN_FLIGHT: usize = 256;
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(300);

const CLIENT_ID: &str = "chaos-sender";
const CLIENT_SECRET: &str = "cs_CHAOS_SECRET_never_logged_5d1";
const TRIGGERS: [&str; 2] = ["trg_CHAOS_SECRET_alpha_0c4", "trg_CHAOS_SECRET_bravo_9e2"];
const ORGANIZATION: &str = "acme";
const BODY_MARKER: &str = "BODY_MARKER_chaos_7f3";
const MODULIFY_TOKEN: &str = "mfy_CHAOS_SECRET_static_41d";
const MODULIFY: &str = "/v1/";
const WEBHOOKS: &str = "/api/v1/webhooks/";
const JSON_API: &str = "/api/json/";

/// Which API an operation calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Delivery,
    Write,
    Modulify,
}

/// What one operation is and how it ended, as the client saw it.
struct Operation {
    api: Api,
    identity: String,
    ended: Result<Succeeded, Error>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Succeeded {
    Accepted,
    Duplicate,
    Created,
    Replayed,
    Ran,
    RepeatedWithoutAnswer,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_operations_under_seeded_faults_each_execute_at_most_once() {
    let seed = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| rand::rng().random::<u64>());
    println!("chaos seed: {seed} (replay with CHAOS_SEED={seed})");
    let trace = Captured::default();
    capture_every_trace(&trace);
    let started = Instant::now();

    let server = Arc::new(chaos_server().await);
    arm_faults(&server, seed);
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let client = chaos_client(&server, Arc::clone(&tokens));
    let modulify = modulify_client(&server);

    // A third of the way in, a window of 200 ms in which every answer is a 503, the token
    // endpoint's included. Windows are timed, not counted: a client that finds the service down
    // sends only probes, so a window of the next N answers would last as long as the client
    // holds back, which no server outage does.
    let (window, watched) = (Arc::clone(&server), client.clone());
    let outage = tokio::spawn(async move {
        while watched.stats().calls < (OPERATIONS / 3) as u64 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        window.clear_faults();
        window.inject(Fault::respond(503).during(Duration::from_millis(200)));
        arm_faults(&window, seed.wrapping_add(1));
    });

    // Two thirds of the way in, a blip: 150 ms in which every delivery is a 503.
    let (blip_server, blip_watched) = (Arc::clone(&server), client.clone());
    let blip = tokio::spawn(async move {
        while blip_watched.stats().calls < (OPERATIONS * 2 / 3) as u64 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        blip_server.inject(
            Fault::respond(503)
                .on("POST", WEBHOOKS)
                .during(Duration::from_millis(150)),
        );
    });

    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut calls = JoinSet::new();
    for n in 0..OPERATIONS {
        let (client, modulify, permits) = (client.clone(), modulify.clone(), Arc::clone(&permits));
        calls.spawn(async move {
            let _permit = permits.acquire_owned().await.expect("never closed");
            operate(&client, &modulify, n).await
        });
    }
    let mut operations = Vec::with_capacity(OPERATIONS);
    while let Some(operation) = calls.join_next().await {
        operations.push(operation.expect("no operation panicked"));
    }
    outage.await.unwrap();
    blip.await.unwrap();
    let elapsed = started.elapsed();

    let ledger = server.ledger();
    report(seed, &client, &ledger, &operations, elapsed);
    assert_exactly_once(&ledger, &operations);
    assert_blips_cost_no_operation(&operations);
    let tokens = tokens.lock().unwrap().clone();
    assert!(
        tokens.len() >= 3,
        "tokens were renewed ahead of expiry, however fast the run: {} exchanges",
        tokens.len()
    );
    let failed_for = |kind: ErrorKind| {
        operations
            .iter()
            .filter(|o| matches!(&o.ended, Err(e) if e.kind() == kind))
            .count()
    };
    assert_eq!(
        failed_for(ErrorKind::Unauthorized),
        0,
        "a renewed token is never refused; unauthorized is for a credential the server refuses"
    );
    assert_eq!(
        failed_for(ErrorKind::TokenExchange),
        0,
        "the 503 window reaches the token endpoint too; an exchange that fails is retried"
    );
    assert_trace_holds_no_secret(&trace, &tokens);
}

/// A server whose tokens live 3 s and whose triggers take any rate.
async fn chaos_server() -> MockServer {
    let mut builder = MockServer::builder()
        .limits(Limits {
            token_ttl: Duration::from_secs(3),
            webhook_rate_limit: 1_000_000,
            modulify_rate_limit: 1_000_000,
            ..Limits::default()
        })
        .client(ClientSeed::new(CLIENT_ID, CLIENT_SECRET, ORGANIZATION))
        .modulify_token(ModulifyTokenSeed::new(MODULIFY_TOKEN));
    for trigger in TRIGGERS {
        builder = builder.trigger(TriggerSeed::new(trigger, ORGANIZATION));
    }
    builder.start().await.expect("the contract server starts")
}

/// The seeded faults, on every surface: about 10% executed then dropped, 10% 503 (half with
/// `Retry-After: 0`), 5% 429 (`Retry-After: 0`) and 2% answers delayed past the attempt timeout;
/// on Modulify the 503s without `Retry-After` are 500s that release the key, and half of those
/// with it are 409s in progress, so every API fails as often.
fn arm_faults(server: &MockServer, seed: u64) {
    let mut seeds = StdRng::seed_from_u64(seed);
    let in_progress =
        r#"{"data":null,"error":{"code":"idempotency_key_in_progress","message":"running"}}"#;
    let modulify = [
        (Fault::execute_then_close(), 0.10),
        (Fault::fail_execution(500), 0.05),
        (Fault::respond(503).header("Retry-After", "0"), 0.025),
        (
            Fault::respond(409)
                .header("Retry-After", "0")
                .body(in_progress),
            0.025,
        ),
        (Fault::respond(429).header("Retry-After", "0"), 0.05),
        (Fault::execute_then_delay(ATTEMPT_TIMEOUT * 2), 0.02),
    ];
    for (fault, p) in modulify {
        server.inject(fault.on("POST", MODULIFY).probability(p, seeds.random()));
    }
    for surface in [WEBHOOKS, JSON_API] {
        let faults = [
            (Fault::execute_then_close(), 0.10),
            (Fault::respond(503).header("Retry-After", "0"), 0.05),
            (Fault::respond(503), 0.05),
            (Fault::respond(429).header("Retry-After", "0"), 0.05),
            (Fault::execute_then_delay(ATTEMPT_TIMEOUT * 2), 0.02),
        ];
        for (fault, p) in faults {
            server.inject(fault.on("POST", surface).probability(p, seeds.random()));
        }
    }
}

/// How long the client believes each token lives: a third of the server's 3 s, and the
/// shortest life the client's token cache keeps a token for (a shorter one would count as a
/// failed exchange), so it renews tokens ahead of expiry every 0.9 s of the run.
const CLAIMED_LIFETIME: Duration = Duration::from_secs(1);

/// Client credentials that remember every token and claim it lives [`CLAIMED_LIFETIME`].
struct ShortLived(Recording);

impl TokenExchanger for ShortLived {
    fn exchange(&self) -> ExchangeFuture<'_> {
        Box::pin(async move {
            let token = self.0.exchange().await?;
            Ok(AccessToken::expiring_in(
                token.secret().clone(),
                CLAIMED_LIFETIME,
            ))
        })
    }
}

/// One client for everything, with an exchanger that remembers every token it was issued.
fn chaos_client(server: &MockServer, tokens: Arc<Mutex<Vec<String>>>) -> HodoflowClient {
    let credentials = ClientCredentials::new(&server.base_url(), CLIENT_ID, CLIENT_SECRET)
        .expect("valid credentials");
    HodoflowClient::builder(server.base_url())
        .exchanger(ShortLived(Recording {
            inner: credentials,
            tokens,
        }))
        .budget(
            Budget::new()
                .max_attempts(10)
                .max_elapsed(Duration::from_secs(30))
                .attempt_timeout(ATTEMPT_TIMEOUT),
        )
        .backoff(
            Backoff::new()
                .base(Duration::from_millis(5))
                .cap(Duration::from_millis(100)),
        )
        .build()
        .expect("a valid client")
}

/// A Modulify client with the same budget and backoff, and the API's static token.
fn modulify_client(server: &MockServer) -> ModulifyClient {
    ModulifyClient::builder(server.base_url())
        .bearer_token(MODULIFY_TOKEN)
        .budget(
            Budget::new()
                .max_attempts(10)
                .max_elapsed(Duration::from_secs(30))
                .attempt_timeout(ATTEMPT_TIMEOUT),
        )
        .backoff(
            Backoff::new()
                .base(Duration::from_millis(5))
                .cap(Duration::from_millis(100)),
        )
        .build()
        .expect("a valid client")
}

/// Operation `n`: every fifth a write, every tenth (offset by five) a Modulify call, the rest
/// deliveries to one of two triggers.
async fn operate(client: &HodoflowClient, modulify: &ModulifyClient, n: usize) -> Operation {
    let key = IdempotencyKey::from_operation_id(&format!("chaos-{n}"));
    let identity = key.as_str().to_owned();
    if n % MODULIFY_EVERY == WRITE_EVERY {
        let body = format!(r#"{{"projectId":"site_{n}","prompt":"{BODY_MARKER}"}}"#);
        let ended = modulify
            .call("send_message", body)
            .key(key)
            .send()
            .await
            .map(|answer| match answer.outcome() {
                ModulifyOutcome::Ok => Succeeded::Ran,
                ModulifyOutcome::Replayed => Succeeded::Replayed,
                _ => Succeeded::RepeatedWithoutAnswer,
            });
        return Operation {
            api: Api::Modulify,
            identity,
            ended,
        };
    }
    if n.is_multiple_of(WRITE_EVERY) {
        let body = format!(
            r#"{{"data":{{"type":"notes","attributes":{{"n":{n},"marker":"{BODY_MARKER}"}}}}}}"#
        );
        let ended = client
            .create("/api/json/v1/notes", key, body)
            .send()
            .await
            .map(|response| {
                if response.replayed() {
                    Succeeded::Replayed
                } else {
                    Succeeded::Created
                }
            });
        return Operation {
            api: Api::Write,
            identity,
            ended,
        };
    }
    let body = format!(r#"{{"n":{n},"marker":"{BODY_MARKER}"}}"#);
    let ended = client
        .deliver(TRIGGERS[n % 2], body)
        .delivery_id(DeliveryId::new(key))
        .send()
        .await
        .map(|delivery| match delivery.outcome() {
            WebhookOutcome::Duplicate => Succeeded::Duplicate,
            _ => Succeeded::Accepted,
        });
    Operation {
        api: Api::Delivery,
        identity,
        ended,
    }
}

/// How often the server executed `operation`: runs for a delivery, executions for a write or a
/// Modulify call.
fn executions(ledger: &Ledger, operation: &Operation) -> usize {
    match operation.api {
        Api::Write => ledger.writes_executed(&operation.identity) as usize,
        Api::Modulify => ledger.modulify_executions(&operation.identity) as usize,
        Api::Delivery => ledger.runs_for_delivery(&operation.identity).len(),
    }
}

fn assert_exactly_once(ledger: &Ledger, operations: &[Operation]) {
    assert_eq!(operations.len(), OPERATIONS, "no operation unaccounted for");
    let mut identities = std::collections::HashSet::new();
    for operation in operations {
        assert!(identities.insert(&operation.identity), "one operation each");
        let executed = executions(ledger, operation);
        match &operation.ended {
            Ok(_) => assert_eq!(
                executed, 1,
                "a success executed exactly once: {}",
                operation.identity
            ),
            Err(error) => {
                assert!(
                    executed <= 1,
                    "{} executed {executed} times",
                    operation.identity
                );
                if executed == 1 {
                    assert!(
                        error.may_have_run(),
                        "{} executed, so its error must say it may have run: {error:?}",
                        operation.identity
                    );
                }
            }
        }
    }
    let count = |api: Api| operations.iter().filter(|o| o.api == api).count();
    let (deliveries, writes, calls) = (
        count(Api::Delivery),
        count(Api::Write),
        count(Api::Modulify),
    );
    assert!(
        calls > 0 && writes > 0 && deliveries > 0,
        "every API has its share"
    );
    assert!(
        ledger.modulify_total_executions() as usize <= calls,
        "no Modulify call outside the operations"
    );
    assert!(
        ledger.total_runs() <= deliveries,
        "no run outside the operations"
    );
    assert!(
        ledger.total_writes_executed() as usize <= writes,
        "no write outside the operations"
    );
}

/// The 200 ms window a third of the way in and the 150 ms blip at two thirds are ridden out:
/// neither client's retry budget refused an operation. The Modulify client, a tenth of the
/// operations and about 25 in flight, is covered too: in an earlier version, in about one run
/// in six its bucket was spent in the window and a lone retry was then refused; the retry floor
/// (`RetryBudget::MIN_RETRIES_PER_SEC`) lets such a retry go.
fn assert_blips_cost_no_operation(operations: &[Operation]) {
    let refused: Vec<String> = operations
        .iter()
        .filter_map(|o| Some((o.api, o.ended.as_ref().err()?)))
        .filter(|(_, e)| e.kind() == hodoflow_retry::ErrorKind::RetryBudgetExhausted)
        .map(|(api, e)| {
            format!(
                "{api:?}: {e} [{}]",
                e.attempts()
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        })
        .collect();
    assert!(
        refused.is_empty(),
        "operations refused by the retry budget: {refused:#?}"
    );
}

fn report(
    seed: u64,
    client: &HodoflowClient,
    ledger: &Ledger,
    operations: &[Operation],
    elapsed: Duration,
) {
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for operation in operations {
        let name = match &operation.ended {
            Ok(succeeded) => format!("{succeeded:?}").to_lowercase(),
            Err(error) => format!(
                "failed: {} (may have run: {})",
                error.kind().as_str(),
                error.may_have_run()
            ),
        };
        *outcomes.entry(name).or_default() += 1;
    }
    let stats = client.stats();
    let requests = ledger.requests();
    let faulted = |name: &str| {
        requests
            .iter()
            .filter(|r| r.fault.as_deref() == Some(name))
            .count()
    };
    println!("chaos seed {seed}: {OPERATIONS} operations, {IN_FLIGHT} in flight, {elapsed:.1?}");
    for (outcome, count) in &outcomes {
        println!("  {outcome:<50} {count:>6}");
    }
    let retries = stats.retries;
    println!(
        "  attempts {}; retries {}: transport {}, timeout {}, 5xx {}, 429 {}, 401 {}, in progress {}",
        stats.attempts,
        retries.total(),
        retries.transport,
        retries.timeout,
        retries.server_error,
        retries.rate_limited,
        retries.unauthorized,
        retries.in_progress,
    );
    println!(
        "  retry budget refusals {}, tokens left {:?}; exchanges {}",
        stats.retry_budget_refusals, stats.retry_budget_tokens, stats.exchanges
    );
    println!(
        "  server: {} requests; faults: executed then dropped {}, 503/429 {}, delayed {}; runs {}, writes executed {}, Modulify calls executed {}",
        requests.len(),
        faulted("execute_then_close"),
        faulted("respond"),
        faulted("execute_then_delay"),
        ledger.total_runs(),
        ledger.total_writes_executed(),
        ledger.modulify_total_executions(),
    );
}

/// Routes every trace event and `log` record of the process, at every level, into `trace`.
fn capture_every_trace(trace: &Captured) {
    tracing_log::LogTracer::init().expect("log records are routed into tracing");
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(trace.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
}

fn assert_trace_holds_no_secret(trace: &Captured, tokens: &[String]) {
    let output = trace.text();
    println!("  trace: {} bytes at TRACE level", output.len());
    assert!(
        output.contains("attempt will be retried") && output.contains("call finished"),
        "the run was traced"
    );
    assert!(
        output.contains("starting new connection"),
        "reqwest's log records are captured too"
    );
    let mut secrets = vec![CLIENT_SECRET, BODY_MARKER, MODULIFY_TOKEN];
    secrets.extend(TRIGGERS);
    secrets.extend(tokens.iter().map(String::as_str));
    for secret in secrets {
        let found = output.matches(secret).count();
        assert_eq!(found, 0, "the trace holds {secret} {found} times");
    }
}
