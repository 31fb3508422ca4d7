//! The outbox as a metrics source: the exposition read by a strict OpenMetrics reader, and its figures
//! held against the contract server's ledger after an outbox run with known faults, over real
//! TCP on 127.0.0.1.

#[path = "../../../tests/support/mod.rs"]
mod support;

#[path = "../../../tests/support/openmetrics.rs"]
mod openmetrics;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, SystemTime};

use hodoflow_mock::{DEMO_TRIGGER_TOKEN, Fault, MockServer};
use hodoflow_outbox::{JobState, Outbox, Record, Target};
use hodoflow_retry::clock::ManualClock;
use hodoflow_retry::metrics::Metrics;
use hodoflow_retry::{Budget, HodoflowClient};

use openmetrics::Family;
use support::{JSON_API, PROJECTS, TOKEN, WEBHOOKS};

/// A trigger the server does not know: its deliveries fail with 404.
const UNKNOWN_TRIGGER: &str = "tok_unknown_3f9a";

/// A lease that outlasts the clients' 20 s calls.
const LEASE: Duration = Duration::from_secs(45);

/// Every family, its type, its unit and the label names its samples may carry (`le` aside).
const FAMILIES: &[(&str, &str, Option<&str>, &[&str])] = &[
    ("hodoflow_client_calls", "counter", None, &["outcome"]),
    (
        "hodoflow_client_attempts",
        "counter",
        None,
        &["status_class"],
    ),
    ("hodoflow_client_retries", "counter", None, &["cause"]),
    (
        "hodoflow_client_rate_limited_responses",
        "counter",
        None,
        &[],
    ),
    (
        "hodoflow_client_gate_closed_seconds",
        "counter",
        Some("seconds"),
        &["scope"],
    ),
    (
        "hodoflow_client_gate_closed_remaining_seconds",
        "gauge",
        Some("seconds"),
        &["scope"],
    ),
    (
        "hodoflow_client_gate_wait_seconds",
        "counter",
        Some("seconds"),
        &[],
    ),
    (
        "hodoflow_client_trigger_wait_seconds",
        "counter",
        Some("seconds"),
        &[],
    ),
    ("hodoflow_client_retry_budget_tokens", "gauge", None, &[]),
    (
        "hodoflow_client_retry_budget_throttle_ratio",
        "gauge",
        None,
        &[],
    ),
    (
        "hodoflow_client_retry_budget_refusals",
        "counter",
        None,
        &[],
    ),
    ("hodoflow_client_token_exchanges", "counter", None, &[]),
    (
        "http_client_request_duration_seconds",
        "histogram",
        Some("seconds"),
        &[
            "http_request_method",
            "http_response_status_code",
            "error_type",
            "server_address",
            "server_port",
        ],
    ),
    ("hodoflow_outbox_jobs", "gauge", None, &["state"]),
    (
        "hodoflow_outbox_jobs_may_have_run",
        "gauge",
        None,
        &["state"],
    ),
    (
        "hodoflow_outbox_oldest_due_job_age_seconds",
        "gauge",
        Some("seconds"),
        &[],
    ),
    ("hodoflow_outbox_deliveries", "counter", None, &["outcome"]),
    ("hodoflow_outbox_claims_lost", "counter", None, &[]),
    ("hodoflow_outbox_enqueued_jobs", "counter", None, &[]),
    (
        "hodoflow_outbox_enqueue_duration_seconds",
        "histogram",
        Some("seconds"),
        &["operation"],
    ),
    (
        "hodoflow_outbox_delivery_latency_seconds",
        "histogram",
        Some("seconds"),
        &["outcome"],
    ),
];

/// A fresh SQLite outbox in a directory of its own.
async fn fresh() -> Outbox {
    let dir = std::env::temp_dir().join(format!(
        "hodoflow-metrics-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    Outbox::sqlite(dir.join("outbox.db")).await.unwrap()
}

/// A client of `server` with room for every fault of a run: 10 attempts within 20 s.
fn client(server: &MockServer) -> HodoflowClient {
    support::demo(
        support::builder(server).budget(
            Budget::new()
                .max_attempts(10)
                .max_elapsed(Duration::from_secs(20))
                .attempt_timeout(Duration::from_secs(5)),
        ),
    )
}

/// A server whose trigger takes any rate, with the faults of a run: three 429s with
/// `Retry-After: 1` first, then seeded 503s, connections closed before and after executing,
/// and five lost write answers.
async fn faulty_server() -> MockServer {
    let server = support::server_where(|limits| limits.webhook_rate_limit = 1_000_000).await;
    server.inject(
        Fault::respond(429)
            .header("retry-after", "1")
            .on("POST", WEBHOOKS)
            .times(3),
    );
    server.inject(
        Fault::respond(503)
            .on("POST", WEBHOOKS)
            .probability(0.08, 11),
    );
    server.inject(
        Fault::close_before_execute()
            .on("POST", WEBHOOKS)
            .probability(0.04, 12),
    );
    server.inject(
        Fault::execute_then_close()
            .on("POST", WEBHOOKS)
            .probability(0.05, 13),
    );
    server.inject(Fault::execute_then_close().on("POST", JSON_API).times(5));
    server
}

/// The events of a run of `jobs`: one in 50 to the unknown trigger (404), one in 12 a
/// JSON:API write (done), the rest deliveries to the demo trigger.
fn events(jobs: usize) -> Vec<(String, Target, String)> {
    (0..jobs)
        .map(|n| {
            let event = format!("order-{n}:shipped");
            let body = format!(r#"{{"order":{n},"secret_body_marker":"sbm-{n}-x"}}"#);
            if n % 50 == 49 {
                (event, Target::webhook(UNKNOWN_TRIGGER), body)
            } else if n % 12 == 5 {
                let project = format!(
                    r#"{{"data":{{"type":"projects","attributes":{{"name":"sbm-{n}-x"}}}}}}"#
                );
                (event, Target::create(PROJECTS), project)
            } else {
                (event, Target::webhook(DEMO_TRIGGER_TOKEN), body)
            }
        })
        .collect()
}

/// Enqueues `events`, the first four fifths with `enqueue_many` in batches of 100, the rest
/// one by one, then delivers them until none is due; the exposition after.
async fn run(
    server: &MockServer,
    outbox: &Outbox,
    events: &[(String, Target, String)],
) -> (HodoflowClient, String) {
    let client = client(server);
    let batched = events.len() * 4 / 5;
    for batch in events[..batched].chunks(100) {
        outbox.enqueue_many(batch.iter().cloned()).await.unwrap();
    }
    for (event, target, body) in &events[batched..] {
        outbox
            .enqueue(event, target.clone(), body.clone())
            .await
            .unwrap();
    }
    // A repeat stores nothing.
    let (event, target, body) = &events[0];
    let (_, stored) = outbox
        .enqueue_new(event, target.clone(), body.clone())
        .await
        .unwrap();
    assert!(!stored);

    outbox
        .workers(client.clone())
        .trigger_limit(None)
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();
    let text = Metrics::new()
        .client(&client)
        .source(outbox.clone())
        .encode()
        .await
        .unwrap();
    (client, text)
}

/// Reads `text` strictly and checks every family against [`FAMILIES`]: present, typed, with
/// help, unit and only its label names.
fn read(text: &str) -> HashMap<String, Family> {
    let families = openmetrics::parse(text).unwrap_or_else(|error| panic!("{error}\n{text}"));
    for (name, kind, unit, labels) in FAMILIES {
        let family = families
            .get(*name)
            .unwrap_or_else(|| panic!("{name} is missing:\n{text}"));
        assert_eq!(family.kind, *kind, "{name}");
        assert_eq!(family.unit.as_deref(), *unit, "{name}");
        assert!(
            family.help.as_deref().is_some_and(|help| help.len() > 10),
            "{name} has no help"
        );
        let allowed: HashSet<&str> = labels.iter().copied().collect();
        for names in family.label_names() {
            for label in &names {
                assert!(allowed.contains(label.as_str()), "{name} has label {label}");
            }
        }
    }
    for name in families.keys() {
        assert!(
            FAMILIES.iter().any(|(known, ..)| known == name),
            "{name} is not documented in the test's (and the metrics guide's) list"
        );
    }
    families
}

/// The ledger's requests of the run (the token endpoint's aside), counted by status.
fn ledger_statuses(server: &MockServer) -> BTreeMap<Option<u16>, u64> {
    let mut statuses = BTreeMap::new();
    for record in server.ledger().requests() {
        if record.path != TOKEN {
            *statuses.entry(record.status).or_default() += 1;
        }
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_500_jobs_with_known_faults_the_counters_equal_the_ledger() {
    let server = faulty_server().await;
    let outbox = fresh().await;
    let events = events(500);

    let (_client, text) = run(&server, &outbox, &events).await;

    let families = read(&text);
    let ledger = server.ledger();
    let statuses = ledger_statuses(&server);
    let of = |status: Option<u16>| statuses.get(&status).copied().unwrap_or(0) as f64;
    let family = |name: &str| &families[name];

    // Attempts by status class, and the duration histogram by status, as the server saw them.
    let attempts = family("hodoflow_client_attempts");
    for class in 1..=5u16 {
        let seen: f64 = statuses
            .iter()
            .filter(|(status, _)| status.is_some_and(|s| s / 100 == class))
            .map(|(_, n)| *n as f64)
            .sum();
        let counted = attempts.sum(
            "hodoflow_client_attempts_total",
            &[("status_class", &format!("{class}xx"))],
        );
        assert_eq!(counted, seen, "{class}xx: {statuses:?}");
    }
    let transport = attempts.sum(
        "hodoflow_client_attempts_total",
        &[("status_class", "transport_error")],
    );
    assert_eq!(transport, of(None), "{statuses:?}");
    assert!(
        of(None) > 0.0 && of(Some(503)) > 0.0,
        "faults fired: {statuses:?}"
    );
    let durations = family("http_client_request_duration_seconds");
    let count = "http_client_request_duration_seconds_count";
    for (status, n) in &statuses {
        if let Some(status) = status {
            let code = status.to_string();
            let counted = durations.sum(count, &[("http_response_status_code", &code)]);
            assert_eq!(counted, *n as f64, "{status}");
        }
    }
    let all_durations = durations.sum(count, &[]);
    assert_eq!(all_durations, statuses.values().sum::<u64>() as f64);

    // 429s, and retries by cause: every failed attempt was retried.
    assert_eq!(of(Some(429)), 3.0);
    let rate_limited = family("hodoflow_client_rate_limited_responses");
    let rate_limited = rate_limited.sum("hodoflow_client_rate_limited_responses_total", &[]);
    assert_eq!(rate_limited, 3.0);
    let retries = family("hodoflow_client_retries");
    let retried = |cause: &str| retries.sum("hodoflow_client_retries_total", &[("cause", cause)]);
    assert_eq!(retried("rate_limited"), 3.0);
    assert_eq!(retried("server_error"), of(Some(503)));
    assert_eq!(retried("transport") + retried("timeout"), of(None));
    let closed = family("hodoflow_client_gate_closed_seconds");
    let closed = |scope| {
        closed.sum(
            "hodoflow_client_gate_closed_seconds_total",
            &[("scope", scope)],
        )
    };
    assert_eq!(
        closed("credential"),
        0.0,
        "a trigger's 429 never closes the credential"
    );
    let trigger_closed = closed("trigger");
    assert!(
        (1.0..=3.1).contains(&trigger_closed),
        "three 429s closed the trigger for 1 s each: {trigger_closed}"
    );
    let exchanges =
        family("hodoflow_client_token_exchanges").sum("hodoflow_client_token_exchanges_total", &[]);
    assert_eq!(exchanges, ledger.exchanges().len() as f64);

    // Deliveries by outcome: the server's executions, and the store's jobs by state.
    let deliveries = family("hodoflow_outbox_deliveries");
    let delivered =
        |outcome: &str| deliveries.sum("hodoflow_outbox_deliveries_total", &[("outcome", outcome)]);
    let jobs = family("hodoflow_outbox_jobs");
    let in_state = |state: &str| jobs.sum("hodoflow_outbox_jobs", &[("state", state)]);
    assert_eq!(
        delivered("accepted") + delivered("duplicate"),
        ledger.total_runs() as f64,
        "one run per delivered webhook job"
    );
    assert!(delivered("duplicate") > 0.0, "some answers were lost");
    assert_eq!(delivered("done"), f64::from(ledger.total_writes_executed()));
    assert_eq!(delivered("done"), 40.0);
    // The jobs to the unknown trigger end on its 404: failed, or needing reconciliation when
    // an attempt before the 404 went unanswered (it may have run, for all the sender knows).
    let ended_on_404 = delivered("failed") + delivered("needs_reconciliation");
    assert_eq!(ended_on_404, 10.0);
    assert_eq!(ended_on_404, of(Some(404)));
    let counts = outbox.counts().await.unwrap();
    for state in JobState::ALL {
        assert_eq!(in_state(state.as_str()), counts.of(state) as f64, "{state}");
    }
    for state in [
        "accepted",
        "duplicate",
        "done",
        "failed",
        "needs_reconciliation",
    ] {
        assert_eq!(delivered(state), in_state(state), "{state}");
        let latencies = family("hodoflow_outbox_delivery_latency_seconds").sum(
            "hodoflow_outbox_delivery_latency_seconds_count",
            &[("outcome", state)],
        );
        assert_eq!(latencies, delivered(state), "{state}");
    }
    assert_eq!(delivered("rescheduled"), in_state("pending"));
    assert_eq!(jobs.sum("hodoflow_outbox_jobs", &[]), 500.0);
    let may_have_run = outbox.may_have_run_counts().await.unwrap();
    let marked = family("hodoflow_outbox_jobs_may_have_run");
    for state in JobState::ALL {
        let shown = marked.sum(
            "hodoflow_outbox_jobs_may_have_run",
            &[("state", state.as_str())],
        );
        assert_eq!(shown, may_have_run.of(state) as f64, "{state}");
    }
    assert_eq!(
        in_state("needs_reconciliation"),
        may_have_run.needs_reconciliation as f64,
        "a job needs reconciliation here only when a call may have run it"
    );
    let oldest = family("hodoflow_outbox_oldest_due_job_age_seconds")
        .sum("hodoflow_outbox_oldest_due_job_age_seconds", &[]);
    assert_eq!(oldest, 0.0, "nothing is due after the run");

    // Enqueues: 500 jobs stored, by 4 batches and 101 single calls (the repeat included).
    let enqueued = family("hodoflow_outbox_enqueued_jobs");
    assert_eq!(
        enqueued.sum("hodoflow_outbox_enqueued_jobs_total", &[]),
        500.0
    );
    let enqueues = family("hodoflow_outbox_enqueue_duration_seconds");
    let calls = |operation: &str| {
        enqueues.sum(
            "hodoflow_outbox_enqueue_duration_seconds_count",
            &[("operation", operation)],
        )
    };
    assert_eq!((calls("enqueue_many"), calls("enqueue")), (4.0, 101.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_label_carries_a_token_a_key_an_event_id_a_path_or_a_body() {
    let server = faulty_server().await;
    let outbox = fresh().await;
    let events = events(60);

    let (client, text) = run(&server, &outbox, &events).await;

    let families = read(&text);
    let mut secrets: Vec<String> = vec![DEMO_TRIGGER_TOKEN.into(), UNKNOWN_TRIGGER.into()];
    for (event, _, body) in &events {
        let job = outbox.job(event).await.unwrap().unwrap();
        secrets.extend([
            event.clone(),
            body.clone(),
            job.identity.as_str().to_owned(),
        ]);
    }
    for record in server.ledger().requests() {
        secrets.extend(record.idempotency_key.clone());
    }
    secrets.push("sbm-".into());
    for secret in &secrets {
        assert!(
            !text.contains(secret.as_str()),
            "{secret} is in the exposition"
        );
    }
    // Every label value comes from a bounded set.
    let port = server.addr().port().to_string();
    let known_kinds = ["connect", "timeout", "closed", "body", "other", "refused"];
    let statuses = ["1xx", "2xx", "3xx", "4xx", "5xx", "transport_error"];
    let causes = [
        "timeout",
        "transport",
        "server_error",
        "rate_limited",
        "unauthorized",
        "in_progress",
    ];
    let outcomes = [
        "succeeded",
        "failed",
        "accepted",
        "duplicate",
        "done",
        "needs_reconciliation",
        "rescheduled",
    ];
    let methods = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "_OTHER",
    ];
    let is_code = |value: &str| value.len() == 3 && value.bytes().all(|b| b.is_ascii_digit());
    let mut values = 0;
    for (name, family) in &families {
        for sample in &family.samples {
            for (label, value) in &sample.labels {
                values += 1;
                let bounded = match label.as_str() {
                    "status_class" => statuses.contains(&value.as_str()),
                    "cause" => causes.contains(&value.as_str()),
                    "outcome" => outcomes.contains(&value.as_str()),
                    "state" => JobState::parse(value).is_some(),
                    "operation" => ["enqueue", "enqueue_many"].contains(&value.as_str()),
                    "scope" => ["credential", "trigger"].contains(&value.as_str()),
                    "http_request_method" => methods.contains(&value.as_str()),
                    "http_response_status_code" => is_code(value),
                    "error_type" => {
                        is_code(value) || known_kinds.contains(&value.as_str()) || value == "_OTHER"
                    }
                    "server_address" => value == "127.0.0.1",
                    "server_port" => *value == port,
                    "le" => value == "+Inf" || value.parse::<f64>().is_ok(),
                    _ => false,
                };
                assert!(
                    bounded,
                    "{name}: {label}={value:?} is not from a bounded set"
                );
                assert!(!value.contains('/'), "{name}: {label}={value:?} is a path");
            }
        }
    }
    assert!(values > 100, "labels were read: {values}");
    // What the client's Debug and stats say is not the subject here, but the exposition is all
    // of it: no family outside the documented list (checked by `read`).
    drop(client);
}

#[tokio::test]
async fn the_oldest_due_job_s_age_is_how_long_it_has_been_due() {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000);
    let clock = ManualClock::new(start);
    let outbox = fresh().await.with_clock(clock.clone());
    let metrics = Metrics::new().source(outbox.clone());
    let age = |families: &HashMap<String, Family>| {
        families["hodoflow_outbox_oldest_due_job_age_seconds"]
            .sum("hodoflow_outbox_oldest_due_job_age_seconds", &[])
    };
    assert_eq!(age(&scrape(&metrics).await), 0.0, "none is due");

    for event in ["a", "b"] {
        outbox
            .enqueue(event, Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
            .await
            .unwrap();
    }
    clock.advance(Duration::from_secs(30));
    outbox
        .enqueue("c", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    clock.advance(Duration::from_secs(60));

    let families = scrape(&metrics).await;
    assert_eq!(age(&families), 90.0);
    let jobs = &families["hodoflow_outbox_jobs"];
    assert_eq!(
        jobs.value("hodoflow_outbox_jobs", &[("state", "pending")]),
        Some(3.0)
    );
    assert!(
        !families
            .keys()
            .any(|name| name.starts_with("hodoflow_client_")),
        "no client was given"
    );
}

#[tokio::test]
async fn jobs_a_call_may_have_run_are_counted_by_state() {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000);
    let outbox = fresh().await.with_clock(ManualClock::new(start));
    let metrics = Metrics::new().source(outbox.clone());
    for event in ["unanswered", "in-progress", "answered"] {
        outbox
            .enqueue(event, Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
            .await
            .unwrap();
    }
    let claimed = outbox
        .store()
        .claim("w", start, Duration::from_secs(60), 3)
        .await
        .unwrap();
    let records = claimed
        .iter()
        .map(|job| {
            let (state, may_have_run) = match job.event_id.as_str() {
                "unanswered" => (JobState::Pending, true),
                "in-progress" => (JobState::NeedsReconciliation, true),
                _ => (JobState::Failed, false),
            };
            let record = Record {
                state,
                next_at: start,
                attempts_added: 1,
                first_sent_at: Some(start),
                run_id: None,
                last_error: None,
                finished_at: state.is_final().then_some(start),
                may_have_run,
            };
            (job.id, job.claim, record)
        })
        .collect();
    outbox.store().record_many(records).await.unwrap();

    let families = scrape(&metrics).await;
    let marked = &families["hodoflow_outbox_jobs_may_have_run"];
    let value =
        |state: &str| marked.value("hodoflow_outbox_jobs_may_have_run", &[("state", state)]);
    assert_eq!(value("pending"), Some(1.0));
    assert_eq!(value("needs_reconciliation"), Some(1.0));
    assert_eq!(
        value("failed"),
        Some(0.0),
        "every state is shown, 0 when none"
    );
    assert_eq!(marked.sum("hodoflow_outbox_jobs_may_have_run", &[]), 2.0);
}

/// `metrics`' exposition now, read strictly.
async fn scrape(metrics: &Metrics) -> HashMap<String, Family> {
    let text = metrics.encode().await.unwrap();
    openmetrics::parse(&text).unwrap_or_else(|error| panic!("{error}\n{text}"))
}
