//! The durable outbox over real TCP against the contract server's ledger, the same suite on
//! both stores: SQLite always, PostgreSQL when `OUTBOX_DATABASE_URL` names a database (as
//! `.ci/run` does; with `CI_REQUIRES_POSTGRES=1` a missing URL fails instead of skipping).

#[path = "../../../tests/support/mod.rs"]
mod support;

#[cfg(feature = "postgres")]
#[path = "postgres_support.rs"]
mod pg;

#[allow(
    dead_code,
    reason = "the example's main and helpers are the example's, not the tests'"
)]
#[path = "../../../examples/custom_vendor.rs"]
mod draft;

use std::time::{Duration, SystemTime};

use bytes::Bytes;

use hodoflow_mock::{DEMO_MODULIFY_TOKEN, DEMO_TRIGGER_TOKEN, Fault, Limits, MockServer};
use hodoflow_outbox::{
    Cursor, Job, JobState, MAX_SCOPE, Outbox, Pause, Record, SqliteStore, Target, conformance,
};
use hodoflow_retry::{
    Budget, ErrorKind, HodoflowClient,
    clock::{Clock, ManualClock},
    limit::RouteLimit,
};

const WEBHOOKS: &str = "/api/v1/webhooks/";

/// The stores the suite runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

/// Runs each named test on both stores, as `<name>::sqlite` and `<name>::postgres`.
macro_rules! on_both_stores {
    ($($test:ident),+ $(,)?) => {
        $(
            mod $test {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$test(super::Backend::Sqlite).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    if !cfg!(feature = "postgres") {
                        assert!(
                            std::env::var("CI_REQUIRES_POSTGRES").as_deref() != Ok("1"),
                            "CI_REQUIRES_POSTGRES=1 but the tests were built without the postgres feature"
                        );
                        println!("skipped: built without the postgres feature");
                        return;
                    }
                    if super::postgres_url().is_none() {
                        return;
                    }
                    super::$test(super::Backend::Postgres).await;
                }
            }
        )+
    };
}

on_both_stores!(
    enqueueing_an_event_again_returns_the_stored_job,
    enqueue_many_of_100_000_with_1_000_repeats_stores_99_000_and_changes_none_of_the_rest,
    enqueue_many_checks_every_event_before_it_stores_any,
    bad_jobs_are_refused_before_anything_is_stored,
    event_ids_with_a_nul_or_a_control_are_refused_and_never_found,
    lost_answers_end_accepted_or_duplicate_with_one_run_each,
    writes_and_modulify_calls_go_through_the_same_job_shape,
    a_call_that_ends_retryable_is_rescheduled_on_the_long_schedule,
    a_retry_after_past_the_budget_reschedules_at_least_that_late_and_pauses_the_trigger,
    a_job_failing_past_its_horizon_needs_reconciliation_and_is_never_sent_again,
    a_job_whose_worker_died_is_reclaimed_after_its_lease,
    a_permanent_error_fails_the_job_with_its_kind_and_last_attempt,
    two_worker_pools_share_one_trigger_window_and_meet_no_429,
    four_worker_pools_probe_an_outage_as_one_and_deliver_every_job_once,
    one_vendors_429_never_delays_the_other_vendors_due_jobs,
    workers_without_a_limit_share_the_window_the_server_states,
    a_restarted_worker_resumes_at_the_rate_the_server_stated,
    an_operator_retry_requeues_a_failed_job,
    spawned_workers_deliver_what_is_enqueued_while_they_run_and_stop_with_nothing_in_flight,
    workers_stopped_midway_finish_every_job_they_claimed,
    a_wedged_lease_is_taken_as_expired_and_the_job_recovers,
    the_store_counts_what_is_due_without_listing_a_job,
    an_idle_worker_is_woken_by_an_enqueue_and_a_retry_not_by_its_poll,
    a_pool_that_claimed_ahead_starts_its_queued_jobs_though_its_next_claim_found_none,
    a_job_enqueued_with_the_callers_identity_meets_its_direct_send_and_runs_once,
    a_job_stores_its_triggers_reference_and_only_a_worker_given_the_token_sends_it,
    the_oldest_due_job_is_the_least_next_at_of_the_jobs_a_claim_would_take,
    the_backlog_counts_the_jobs_not_final_at_each_time,
    paging_through_1_050_jobs_lists_each_once_in_order_across_states,
    paging_lists_a_job_that_moves_between_pages_as_the_cursor_documents,
    pauses_keep_the_later_end_with_its_reason_and_list_every_scope_paused,
    scopes_are_opaque_text_of_at_most_200_bytes,
    a_learned_window_is_the_latest_stated_and_a_store_opened_later_reads_it,
    may_have_run_is_kept_across_calls_and_an_operator_requeue,
    a_permanent_answer_after_a_call_that_may_have_run_needs_reconciliation_not_failure,
    a_store_of_the_previous_schema_migrates_in_place,
    a_vendor_of_your_own_is_delivered_through_its_profile_once_per_job,
    the_store_keeps_the_contract_a_store_of_your_own_is_checked_by,
    a_deliver_of_your_own_sends_the_jobs_it_takes,
    a_modulify_client_alone_runs_the_workers_of_modulify_jobs,
);

/// A pool whose lease is twice its calls' budget claims a pool's worth ahead. When its next
/// claim finds nothing, it still starts the jobs it holds as deliveries finish: polling is
/// hourly, so a pool that slept on its empty claim would start them only when their leases
/// ended, claimed twice (a queued job whose lease no longer covers a call is left for its
/// lease to end).
async fn a_pool_that_claimed_ahead_starts_its_queued_jobs_though_its_next_claim_found_none(
    backend: Backend,
) {
    const JOBS: usize = 8;
    let server = support::server().await;
    let outbox = fresh(backend).await;
    // Each delivery is in flight a while, so jobs wait in the pool's queue.
    server.inject(
        Fault::delay_then_handle(Duration::from_millis(150))
            .on("POST", WEBHOOKS)
            .times(JOBS as u32),
    );
    for n in 0..JOBS {
        outbox
            .enqueue(
                &format!("ahead-{n}"),
                Target::webhook(DEMO_TRIGGER_TOKEN),
                "{}",
            )
            .await
            .unwrap();
    }
    let client = support::demo(
        support::builder(&server).budget(
            Budget::new()
                .max_attempts(3)
                .max_elapsed(Duration::from_secs(2))
                .attempt_timeout(Duration::from_secs(1)),
        ),
    );
    let workers = outbox
        .workers(client)
        .trigger_limit(None)
        .concurrency(2)
        .lease(Duration::from_secs(4))
        .poll_interval(Duration::from_secs(3600))
        .safety_poll(Duration::from_secs(3600))
        .spawn()
        .unwrap();
    // A guard against a hang only: the leases end at 4 s, the polls in an hour.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while outbox.counts().await.unwrap().accepted < JOBS as u64 {
        assert!(
            std::time::Instant::now() < deadline,
            "the queued jobs were never started: {:?}",
            outbox.counts().await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = workers.stop().await.unwrap();

    assert_eq!(
        report.claimed, JOBS as u64,
        "each job claimed once: {report:?}"
    );
    assert_eq!(report.accepted, JOBS as u64, "{report:?}");
    let ledger = server.ledger();
    assert_eq!(ledger.requests_to("POST", WEBHOOKS).len(), JOBS);
    for n in 0..JOBS {
        let job = outbox.job(&format!("ahead-{n}")).await.unwrap().unwrap();
        assert_eq!(job.calls, 1, "{job:?}");
        assert_eq!(ledger.runs_for_delivery(job.identity.as_str()).len(), 1);
    }
}

/// A service that sends an event directly under an identity of its own, then through the
/// outbox with the same identity: the job's delivery is a duplicate, the event ran once; a
/// second event's derived identity is the one `enqueue` documents.
async fn a_job_enqueued_with_the_callers_identity_meets_its_direct_send_and_runs_once(
    backend: Backend,
) {
    let server = support::server().await;
    let outbox = fresh(backend).await;
    let client = client(&server, 3);
    let own = hodoflow_retry::IdempotencyKey::new("orders-v2:4711:shipped").unwrap();
    let direct = client
        .deliver(DEMO_TRIGGER_TOKEN, "{}")
        .delivery_id(hodoflow_retry::DeliveryId::new(own.clone()))
        .send()
        .await
        .unwrap();
    assert!(!direct.is_duplicate());

    let job = outbox
        .enqueue_with_identity(
            "order-4711-shipped",
            own.clone(),
            Target::webhook(DEMO_TRIGGER_TOKEN),
            "{}",
        )
        .await
        .unwrap();
    assert_eq!(job.identity, own);
    let again = outbox
        .enqueue_with_identity(
            "order-4711-shipped",
            hodoflow_retry::IdempotencyKey::new("another").unwrap(),
            Target::webhook(DEMO_TRIGGER_TOKEN),
            "{}",
        )
        .await
        .unwrap();
    assert_eq!(again.identity, own, "a stored job keeps its identity");
    let derived = outbox
        .enqueue(
            "order-4712-shipped",
            Target::webhook(DEMO_TRIGGER_TOKEN),
            "{}",
        )
        .await
        .unwrap();
    assert_eq!(
        derived.identity,
        hodoflow_retry::IdempotencyKey::from_operation_id("order-4712-shipped")
    );
    outbox
        .workers(client)
        .trigger_limit(None)
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();

    let job = outbox.job("order-4711-shipped").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Duplicate, "{job:?}");
    let ledger = server.ledger();
    assert_eq!(ledger.requests_with_key(own.as_str()).len(), 2);
    assert_eq!(ledger.runs_for_delivery(own.as_str()).len(), 1);
    assert_eq!(ledger.runs_for_delivery(derived.identity.as_str()).len(), 1);
    assert_eq!(ledger.total_runs(), 2);
}

/// A webhook job stores its trigger's reference, never the token: a worker process that was
/// not given the token sends nothing and leaves the job pending with the reason; given it, it
/// delivers the job once. Afterwards no byte of the store (the SQLite file and its journal,
/// every PostgreSQL row) holds the token.
async fn a_job_stores_its_triggers_reference_and_only_a_worker_given_the_token_sends_it(
    backend: Backend,
) {
    let server = support::server().await;
    let (producer, at) = fresh_at(backend).await;
    for n in 0..3 {
        producer
            .enqueue(
                &format!("ref-{n}"),
                Target::webhook(DEMO_TRIGGER_TOKEN),
                "{}",
            )
            .await
            .unwrap();
    }
    producer
        .enqueue(
            "ref-write",
            Target::create("/api/json/v1/projects"),
            r#"{"data":{"type":"projects","attributes":{"name":"Ref"}}}"#,
        )
        .await
        .unwrap();
    // Another process: its own handle on the store, on a clock of its own.
    let clock = ManualClock::new(start());
    let worker = reopen(backend, &at).await.with_clock(clock.clone());
    let workers = || {
        worker
            .workers(client(&server, 3))
            .trigger_limit(None)
            .lease(LEASE)
    };
    workers().run_until_idle().await.unwrap();

    let ledger = server.ledger();
    assert!(
        ledger.requests_to("POST", WEBHOOKS).is_empty(),
        "sent without its token"
    );
    assert_eq!(
        ledger.total_writes_executed(),
        1,
        "the write needs no trigger"
    );
    let job = worker.job("ref-0").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Pending, "{job:?}");
    assert_eq!(job.attempts, 0);
    let error = job.last_error.as_ref().expect("the reason");
    assert!(
        error.message.contains("no token is known here"),
        "{error:?}"
    );
    let Target::Webhook { trigger } = &job.target else {
        panic!("{job:?}")
    };
    assert!(trigger.token().is_none(), "read from the store: no token");
    assert_eq!(
        trigger.reference(),
        match Target::webhook(DEMO_TRIGGER_TOKEN) {
            Target::Webhook { trigger } => trigger.reference(),
            _ => unreachable!(),
        }
    );

    assert!(worker.add_trigger_token("not/one segment").is_err());
    worker.add_trigger_token(DEMO_TRIGGER_TOKEN).unwrap();
    clock.advance(Duration::from_secs(61));
    workers().run_until_idle().await.unwrap();

    let ledger = server.ledger();
    for n in 0..3 {
        let job = worker.job(&format!("ref-{n}")).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Accepted, "{job:?}");
        assert_eq!(ledger.runs_for_delivery(job.identity.as_str()).len(), 1);
    }
    assert_eq!(ledger.requests_to("POST", WEBHOOKS).len(), 3);
    let token = DEMO_TRIGGER_TOKEN.as_bytes();
    match backend {
        Backend::Sqlite => {
            let mut files = 0;
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let Ok(bytes) = std::fs::read(format!("{at}{suffix}")) else {
                    continue;
                };
                files += 1;
                assert!(
                    !bytes.windows(token.len()).any(|window| window == token),
                    "{at}{suffix} holds the trigger token"
                );
            }
            assert!(files >= 2, "the database and its write-ahead log were read");
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let client = pg::connect(&at).await;
            let tables = client
                .query(
                    "SELECT table_name::text FROM information_schema.tables \
                     WHERE table_schema = current_schema()",
                    &[],
                )
                .await
                .unwrap();
            assert!(tables.len() >= 3, "{tables:?}");
            let text = String::from_utf8_lossy(token);
            for table in tables {
                let name: String = table.get(0);
                let rows = client
                    .query(&format!("SELECT t::text FROM \"{name}\" t"), &[])
                    .await
                    .unwrap();
                for row in rows {
                    let row: String = row.get(0);
                    assert!(!row.contains(&*text), "{name} holds the trigger token");
                }
            }
        }
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => unreachable!("the postgres tests return early without the feature"),
    }
}

/// The PostgreSQL server of the suite, if any.
fn postgres_url() -> Option<String> {
    match std::env::var("OUTBOX_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI_REQUIRES_POSTGRES").as_deref() != Ok("1"),
                "CI_REQUIRES_POSTGRES=1 but OUTBOX_DATABASE_URL is not set"
            );
            println!("skipped: set OUTBOX_DATABASE_URL to a PostgreSQL database, as .ci/run does");
            None
        }
    }
}

/// A fresh, empty outbox on `backend`.
async fn fresh(backend: Backend) -> Outbox {
    match backend {
        Backend::Sqlite => {
            let dir = std::env::temp_dir().join(format!(
                "hodoflow-outbox-{}-{}",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            Outbox::sqlite(dir.join("outbox.db")).await.unwrap()
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let db = pg::database("outbox").await.expect("checked by the caller");
            Outbox::postgres(&db.url).await.unwrap()
        }
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => unreachable!("the postgres tests return early without the feature"),
    }
}

/// A fresh outbox on `backend`, and a second handle on the same jobs: on PostgreSQL another
/// connection to the same schema (as another process would open it); on SQLite a clone (an
/// in-process wake-up is what SQLite promises).
async fn fresh_pair(backend: Backend) -> (Outbox, Outbox) {
    match backend {
        Backend::Sqlite => {
            let outbox = fresh(backend).await;
            (outbox.clone(), outbox)
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let db = pg::database("wake").await.expect("checked by the caller");
            let first = Outbox::postgres(&db.url).await.unwrap();
            (first, Outbox::postgres(&db.url).await.unwrap())
        }
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => unreachable!("the postgres tests return early without the feature"),
    }
}

/// A client of `server` with a budget of `attempts` and millisecond backoff.
fn client(server: &MockServer, attempts: u32) -> HodoflowClient {
    support::demo(
        support::builder(server).budget(
            Budget::new()
                .max_attempts(attempts)
                .max_elapsed(Duration::from_secs(5))
                .attempt_timeout(Duration::from_secs(2)),
        ),
    )
}

/// A lease that outlasts the clients' 5 s calls.
const LEASE: Duration = Duration::from_secs(6);

fn start() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000)
}

async fn enqueueing_an_event_again_returns_the_stored_job(backend: Backend) {
    let outbox = fresh(backend).await;
    let (first, new) = outbox
        .enqueue_new(
            "order-1:shipped",
            Target::webhook(DEMO_TRIGGER_TOKEN),
            "{\"n\":1}",
        )
        .await
        .unwrap();
    assert!(new);
    assert_eq!(first.state, JobState::Pending);

    let (again, new) = outbox
        .enqueue_new(
            "order-1:shipped",
            Target::webhook(DEMO_TRIGGER_TOKEN),
            "{\"n\":2}",
        )
        .await
        .unwrap();

    assert!(!new, "the second enqueue is a no-op");
    assert_eq!(again.id, first.id);
    assert_eq!(again.body, first.body, "the stored body stays");
    assert_eq!(again.identity, first.identity);
    assert_eq!(
        again.identity,
        hodoflow_retry::IdempotencyKey::from_operation_id("order-1:shipped")
    );
    assert_eq!(outbox.counts().await.unwrap().total(), 1);
}

async fn enqueue_many_of_100_000_with_1_000_repeats_stores_99_000_and_changes_none_of_the_rest(
    backend: Backend,
) {
    let outbox = fresh(backend).await;
    let write = || Target::create("/api/json/v1/orders");
    // 1,000 events stored before, one by one.
    let mut before = Vec::new();
    for n in (0..100_000).step_by(100) {
        before.push(
            outbox
                .enqueue(&format!("order-{n}"), write(), "old")
                .await
                .unwrap(),
        );
    }
    assert_eq!(before.len(), 1_000);

    let events = (0..100_000).map(|n| (format!("order-{n}"), write(), format!(r#"{{"n":{n}}}"#)));
    let stored = outbox.enqueue_many(events).await.unwrap();

    assert_eq!(stored.len(), 100_000);
    let new = stored.iter().filter(|(_, now)| *now).count();
    assert_eq!(new, 99_000, "the 1,000 repeats are no-ops");
    for (n, (job, now)) in stored.iter().enumerate() {
        assert_eq!(job.event_id, format!("order-{n}"), "in the order asked");
        assert_eq!(*now, n % 100 != 0, "{}", job.event_id);
    }
    for old in &before {
        let (again, now) = &stored[old.event_id[6..].parse::<usize>().unwrap()];
        assert!(!now);
        assert_eq!(again, old, "a repeat changes nothing of the stored job");
        let kept = outbox.job(&old.event_id).await.unwrap().unwrap();
        assert_eq!(kept.body, Bytes::from_static(b"old"));
        assert_eq!(kept.id, old.id);
    }
    let counts = outbox.counts().await.unwrap();
    assert_eq!(counts.total(), 100_000);
    assert_eq!(counts.pending, 100_000);
    // A repeat inside one batch: the first is stored, the second returns it.
    let twice = outbox
        .enqueue_many([("late", write(), "a"), ("late", write(), "b")])
        .await
        .unwrap();
    assert_eq!(
        twice.iter().map(|(_, now)| *now).collect::<Vec<_>>(),
        [true, false]
    );
    assert_eq!(twice[0].0, twice[1].0);
    assert_eq!(twice[1].0.body, Bytes::from_static(b"a"));
}

async fn enqueue_many_checks_every_event_before_it_stores_any(backend: Backend) {
    let outbox = fresh(backend).await;
    let events = vec![
        ("fine-1", Target::create("/api/json/v1/orders"), "{}"),
        ("fine-2", Target::webhook(DEMO_TRIGGER_TOKEN), "{}"),
        ("bad", Target::create("/not/json/api"), "{}"),
    ];
    let error = outbox.enqueue_many(events).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    assert_eq!(outbox.counts().await.unwrap().total(), 0, "nothing stored");
    let none: Vec<(String, Target, Bytes)> = Vec::new();
    assert!(outbox.enqueue_many(none).await.unwrap().is_empty());
}

async fn bad_jobs_are_refused_before_anything_is_stored(backend: Backend) {
    let outbox = fresh(backend).await;
    let webhook = || Target::webhook(DEMO_TRIGGER_TOKEN);
    let cases = [
        ("  ", webhook(), "{}".to_owned(), ErrorKind::InvalidInput),
        (
            "e1",
            Target::webhook("a/b"),
            "{}".to_owned(),
            ErrorKind::InvalidInput,
        ),
        (
            "e2",
            Target::create("/elsewhere"),
            "{}".to_owned(),
            ErrorKind::InvalidInput,
        ),
        (
            "e3",
            Target::modulify("../x"),
            "{}".to_owned(),
            ErrorKind::InvalidInput,
        ),
        (
            "e5",
            Target::modulify(".."),
            "{}".to_owned(),
            ErrorKind::InvalidInput,
        ),
        // Dot segments in any encoding, and dot trigger tokens, never enter.
        (
            "e6",
            Target::create(format!(
                "/api/json/%2e%2e/%2e%2e/api/v1/webhooks/{DEMO_TRIGGER_TOKEN}"
            )),
            "{}".to_owned(),
            ErrorKind::InvalidInput,
        ),
        (
            "e7",
            Target::create("/api/json/../../oauth/token"),
            "{}".to_owned(),
            ErrorKind::InvalidInput,
        ),
        (
            "e8",
            Target::webhook(".."),
            "{}".to_owned(),
            ErrorKind::InvalidInput,
        ),
        (
            "e9",
            Target::webhook("."),
            "{}".to_owned(),
            ErrorKind::InvalidInput,
        ),
        (
            "e4",
            webhook(),
            "x".repeat(1_048_577),
            ErrorKind::PayloadTooLarge,
        ),
        (
            &"e".repeat(1025),
            webhook(),
            "{}".to_owned(),
            ErrorKind::InvalidInput,
        ),
    ];
    for (event_id, target, body, kind) in cases {
        let error = outbox.enqueue(event_id, target, body).await.unwrap_err();
        assert_eq!(error.kind(), kind, "{error}");
        assert!(!error.to_string().contains(DEMO_TRIGGER_TOKEN));
    }
    assert_eq!(outbox.counts().await.unwrap().total(), 0);
}

async fn event_ids_with_a_nul_or_a_control_are_refused_and_never_found(backend: Backend) {
    let outbox = fresh(backend).await;
    let webhook = || Target::webhook(DEMO_TRIGGER_TOKEN);
    for (event_id, named) in [
        ("order\u{0}7", "a NUL character (U+0000) at byte 5"),
        ("order-7\n", "a control character (U+000A) at byte 7"),
        ("\u{1b}[2Jorder", "a control character (U+001B) at byte 0"),
        ("order\u{9b}7", "a control character (U+009B) at byte 5"),
        ("order\t7", "a control character (U+0009) at byte 5"),
    ] {
        let error = outbox.enqueue(event_id, webhook(), "{}").await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        assert_eq!(
            error.to_string(),
            format!("invalid input: the event ID holds {named}: an event ID is printable text")
        );
        let many = outbox
            .enqueue_many([("fine", webhook(), "{}"), (event_id, webhook(), "{}")])
            .await
            .unwrap_err();
        assert_eq!(many.kind(), ErrorKind::InvalidInput, "{many}");
        // A store asked directly checks too.
        let direct = outbox
            .store()
            .enqueue(hodoflow_outbox::NewJob {
                event_id: event_id.to_owned(),
                identity: hodoflow_retry::IdempotencyKey::from_operation_id(event_id),
                target: webhook(),
                body: Bytes::from_static(b"{}"),
                now: SystemTime::now(),
            })
            .await
            .unwrap_err();
        assert_eq!(direct.kind(), ErrorKind::InvalidInput, "{direct}");
        // Looked up, it is no job (PostgreSQL would refuse to compare a NUL).
        assert!(outbox.job(event_id).await.unwrap().is_none());
        assert!(outbox.retry(event_id).await.unwrap().is_none());
    }
    let error = outbox
        .enqueue(&format!("order-{DEMO_TRIGGER_TOKEN}"), webhook(), "{}")
        .await
        .unwrap_err();
    assert!(error.to_string().contains("trigger token"), "{error}");
    assert!(!error.to_string().contains(DEMO_TRIGGER_TOKEN));
    assert_eq!(outbox.counts().await.unwrap().total(), 0, "nothing stored");
    // Printable text of any script is an event ID.
    outbox
        .enqueue("commande-été-東京", webhook(), "{}")
        .await
        .unwrap();
}

async fn lost_answers_end_accepted_or_duplicate_with_one_run_each(backend: Backend) {
    // A trigger that takes any rate: this test is about lost answers, not pacing.
    let server = support::server_where(|limits| limits.webhook_rate_limit = 1_000_000).await;
    let outbox = fresh(backend).await;
    server.inject(
        Fault::execute_then_close()
            .on("POST", WEBHOOKS)
            .probability(0.3, 7),
    );
    for n in 0..200 {
        outbox
            .enqueue(
                &format!("lost-{n}"),
                Target::webhook(DEMO_TRIGGER_TOKEN),
                format!("{{\"n\":{n}}}"),
            )
            .await
            .unwrap();
    }

    let finished = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&finished);
    let report = outbox
        .workers(client(&server, 10))
        .trigger_limit(None)
        .lease(LEASE)
        .on_finished(move |job| seen.lock().unwrap().push((job.event_id.clone(), job.state)))
        .run_until_idle()
        .await
        .unwrap();

    let counts = outbox.counts().await.unwrap();
    assert_eq!(
        counts.accepted + counts.duplicate,
        200,
        "{counts:?} {report:?}"
    );
    assert!(
        counts.duplicate > 0,
        "some answers were lost after the run: {counts:?}"
    );
    let ledger = server.ledger();
    for job in outbox.list(None, 1000).await.unwrap() {
        assert_eq!(
            ledger.runs_for_delivery(job.identity.as_str()).len(),
            1,
            "{}",
            job.event_id
        );
        if job.state == JobState::Accepted {
            assert!(job.run_id.is_some());
        }
    }
    assert_eq!(ledger.total_runs(), 200);
    let reconcile = outbox.reconciliation(1000).await.unwrap();
    assert_eq!(
        reconcile.len() as u64,
        counts.duplicate,
        "duplicates are listed"
    );
    assert_eq!(
        report.attempts,
        ledger.requests_to("POST", WEBHOOKS).len() as u64
    );
    let mut finished = finished.lock().unwrap().clone();
    finished.sort();
    finished.dedup_by(|a, b| a.0 == b.0);
    assert_eq!(
        finished.len(),
        200,
        "every job was reported once it was recorded"
    );
}

async fn writes_and_modulify_calls_go_through_the_same_job_shape(backend: Backend) {
    let server = support::server().await;
    let outbox = fresh(backend).await;
    server.inject(
        Fault::execute_then_close()
            .on("POST", "/api/json/")
            .times(1),
    );
    server.inject(
        Fault::execute_then_close()
            .on("POST", "/v1/send_message")
            .times(1),
    );
    let project = r#"{"data":{"type":"projects","attributes":{"name":"Atlas"}}}"#;
    outbox
        .enqueue(
            "project:atlas",
            Target::create("/api/json/v1/projects"),
            project,
        )
        .await
        .unwrap();
    outbox
        .enqueue(
            "order-9:notify",
            Target::modulify("send_message"),
            r#"{"projectId":"site_1","prompt":"Hi."}"#,
        )
        .await
        .unwrap();
    let modulify = support::modulify_builder(&server)
        .bearer_token(DEMO_MODULIFY_TOKEN)
        .build()
        .unwrap();

    outbox
        .workers(client(&server, 5))
        .deliver(modulify)
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();

    let write = outbox.job("project:atlas").await.unwrap().unwrap();
    let call = outbox.job("order-9:notify").await.unwrap().unwrap();
    assert_eq!((write.state, call.state), (JobState::Done, JobState::Done));
    assert_eq!(
        (write.attempts, call.attempts),
        (2, 2),
        "a lost answer, then the replay"
    );
    let ledger = server.ledger();
    assert_eq!(ledger.writes_executed(write.identity.as_str()), 1);
    assert_eq!(ledger.modulify_executions(call.identity.as_str()), 1);
}

/// Workers with a Hodoflow client and a Modulify client on one store: a 429 from one vendor
/// (`Retry-After: 30`, past the calls' 5 s budget) pauses that vendor's scope in the store and
/// puts off its jobs, and the other vendor's due jobs go at once, first attempt accepted. One
/// worker at a time: a job after the 429 meets the pause it left in the store, or, claimed
/// ahead while the 429 was on its way, the client's closed scope; either way it sends nothing and
/// waits what is left of the 30 s.
async fn one_vendors_429_never_delays_the_other_vendors_due_jobs(backend: Backend) {
    let server = support::server().await;
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    let modulify = || {
        support::modulify_builder(&server)
            .bearer_token(DEMO_MODULIFY_TOKEN)
            .budget(Budget::new().max_elapsed(Duration::from_secs(5)))
            .build()
            .unwrap()
    };
    let workers = || {
        outbox
            .workers(client(&server, 5))
            .deliver(modulify())
            .concurrency(1)
            .lease(LEASE)
    };
    let message = r#"{"projectId":"site_1","prompt":"Hi."}"#;
    let project = r#"{"data":{"type":"projects","attributes":{"name":"Atlas"}}}"#;

    // Modulify limits its token: the Modulify jobs wait, the Hodoflow jobs do not.
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "30")
            .body(r#"{"data":null,"error":{"code":"rate_limited","message":"spent"}}"#)
            .on("POST", "/v1/send_message")
            .times(1),
    );
    outbox
        .enqueue("m-1", Target::modulify("send_message"), message)
        .await
        .unwrap();
    clock.advance(Duration::from_millis(1));
    outbox
        .enqueue("m-2", Target::modulify("send_message"), message)
        .await
        .unwrap();
    for n in 0..5 {
        clock.advance(Duration::from_millis(1));
        outbox
            .enqueue(&format!("h-{n}"), Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
            .await
            .unwrap();
        outbox
            .enqueue(
                &format!("w-{n}"),
                Target::create("/api/json/v1/projects"),
                project,
            )
            .await
            .unwrap();
    }
    workers().run_until_idle().await.unwrap();

    for n in 0..5 {
        let delivery = outbox.job(&format!("h-{n}")).await.unwrap().unwrap();
        let write = outbox.job(&format!("w-{n}")).await.unwrap().unwrap();
        assert_eq!((delivery.state, delivery.attempts), (JobState::Accepted, 1));
        assert_eq!((write.state, write.attempts), (JobState::Done, 1));
    }
    for id in ["m-1", "m-2"] {
        let job = outbox.job(id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Pending, "{job:?}");
        // The client's scope tells what is left of the 30 s by its own clock, a few
        // milliseconds behind the store's manual one.
        assert!(job.next_at >= start() + Duration::from_secs(29), "{job:?}");
    }
    let ledger = server.ledger();
    assert_eq!(
        ledger.requests_to("POST", "/v1/send_message").len(),
        1,
        "the second Modulify job met the pause and sent nothing"
    );
    let pauses = outbox.pauses().await.unwrap();
    assert_eq!(pauses.len(), 1, "{pauses:?}");
    assert!(pauses[0].scope.starts_with("modulify "), "{pauses:?}");

    // The reverse: Hodoflow limits the credential's JSON:API and a trigger; the Modulify jobs,
    // due again, go at once, and the Hodoflow jobs wait.
    clock.advance(Duration::from_secs(60));
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "30")
            .body(r#"{"errors":[{"status":"429","code":"rate_limited","title":"Too many"}]}"#)
            .on("POST", "/api/json/")
            .times(1),
    );
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "30")
            .body(r#"{"error":"Rate limit exceeded"}"#)
            .on("POST", WEBHOOKS)
            .times(1),
    );
    outbox
        .enqueue(
            "w-limited",
            Target::create("/api/json/v1/projects"),
            project,
        )
        .await
        .unwrap();
    outbox
        .enqueue("h-limited", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    clock.advance(Duration::from_millis(1));
    outbox
        .enqueue("m-3", Target::modulify("send_message"), message)
        .await
        .unwrap();
    workers().run_until_idle().await.unwrap();

    for id in ["m-1", "m-2", "m-3"] {
        let job = outbox.job(id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Done, "{job:?}");
    }
    let third = outbox.job("m-3").await.unwrap().unwrap();
    assert_eq!(third.attempts, 1, "sent at once: {third:?}");
    for id in ["w-limited", "h-limited"] {
        let job = outbox.job(id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Pending, "{job:?}");
    }
    let mut paused: Vec<String> = outbox
        .pauses()
        .await
        .unwrap()
        .into_iter()
        .map(|pause| pause.scope.split(' ').next().unwrap().to_owned())
        .collect();
    paused.sort();
    assert_eq!(paused, ["api", "webhooks"], "the Modulify pause has ended");
}

async fn a_call_that_ends_retryable_is_rescheduled_on_the_long_schedule(backend: Backend) {
    let server = support::server().await;
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    server.inject(Fault::respond(503).on("POST", WEBHOOKS).times(2));
    outbox
        .enqueue("blip-1", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    let workers = || outbox.workers(client(&server, 2)).lease(LEASE);

    let report = workers().run_until_idle().await.unwrap();

    assert_eq!(report.rescheduled, 1, "{report:?}");
    let job = outbox.job("blip-1").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Pending);
    assert_eq!((job.calls, job.attempts), (1, 2));
    let wait = job.next_at.duration_since(start()).unwrap();
    assert!(
        (Duration::from_secs(4)..=Duration::from_secs(6)).contains(&wait),
        "5 s ± 20%: {wait:?}"
    );
    let error = job.last_error.expect("the call's error is kept");
    assert_eq!(error.status, Some(503));
    assert!(error.request_id.is_some());

    // Not due yet: nothing is sent.
    workers().run_until_idle().await.unwrap();
    assert_eq!(server.ledger().requests_to("POST", WEBHOOKS).len(), 2);
    clock.advance(Duration::from_secs(7));
    workers().run_until_idle().await.unwrap();
    let job = outbox.job("blip-1").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Accepted);
    assert_eq!((job.calls, job.attempts), (2, 3));
    assert_eq!(
        server
            .ledger()
            .runs_for_delivery(job.identity.as_str())
            .len(),
        1
    );
}

async fn a_retry_after_past_the_budget_reschedules_at_least_that_late_and_pauses_the_trigger(
    backend: Backend,
) {
    let server = support::server().await;
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "120")
            .on("POST", WEBHOOKS)
            .times(1),
    );
    outbox
        .enqueue("slow-1", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();

    outbox
        .workers(client(&server, 5))
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();

    let job = outbox.job("slow-1").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Pending);
    assert_eq!(
        job.attempts, 1,
        "the 120 s wait is past the 5 s budget: not waited in the call"
    );
    assert_eq!(server.ledger().requests_to("POST", WEBHOOKS).len(), 1);
    assert_eq!(server.ledger().total_runs(), 0);
    assert!(
        job.next_at >= start() + Duration::from_secs(120),
        "{:?}",
        job.next_at
    );
    // The trigger's 429 closed that trigger, for every worker of the store, and nothing else.
    let pauses = outbox.pauses().await.unwrap();
    assert_eq!(pauses.len(), 1, "{pauses:?}");
    let pause = &pauses[0];
    assert!(
        pause.scope.starts_with("webhooks http://127.0.0.1:") && pause.scope.contains(" trigger "),
        "{pause:?}"
    );
    assert!(
        !pause.scope.contains(DEMO_TRIGGER_TOKEN),
        "a trigger is named by a hash of its token"
    );
    assert!(
        pause.until >= start() + Duration::from_secs(120),
        "{pause:?}"
    );
    assert_eq!(pause.why, "the server's 429 with Retry-After");
}

async fn a_job_failing_past_its_horizon_needs_reconciliation_and_is_never_sent_again(
    backend: Backend,
) {
    let server = support::server().await;
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    // An outage that outlasts the horizon: a 503 on every attempt, nothing ever runs.
    server.inject(Fault::respond(503).on("POST", WEBHOOKS).times(u32::MAX));
    outbox
        .enqueue("outage-1", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    let horizon = Duration::from_secs(7 * 24 * 3600);
    let mut sends_at = Vec::new();
    let mut rounds = 0;
    loop {
        let before = server.ledger().requests_to("POST", WEBHOOKS).len();
        outbox
            .workers(client(&server, 1))
            .lease(LEASE)
            .run_until_idle()
            .await
            .unwrap();
        if server.ledger().requests_to("POST", WEBHOOKS).len() > before {
            sends_at.push(clock.wall());
        }
        let job = outbox.job("outage-1").await.unwrap().unwrap();
        if job.state != JobState::Pending {
            assert_eq!(job.state, JobState::NeedsReconciliation);
            break;
        }
        clock.advance(job.next_at.duration_since(clock.wall()).unwrap_or_default());
        rounds += 1;
        assert!(rounds < 200, "the horizon ends the job");
    }
    let job = outbox.job("outage-1").await.unwrap().unwrap();
    let first = job.first_sent_at.expect("it was sent");
    let last = *sends_at.last().unwrap();
    assert!(
        last + Duration::from_secs(5) < first + horizon,
        "the last call ended before the horizon: {:?} after the first",
        last.duration_since(first).unwrap()
    );
    assert!(
        last.duration_since(first).unwrap() > Duration::from_secs(6 * 24 * 3600),
        "it was retried for most of the 7 days: {:?}",
        last.duration_since(first).unwrap()
    );
    assert!(
        outbox
            .reconciliation(10)
            .await
            .unwrap()
            .iter()
            .any(|j| j.event_id == "outage-1")
    );

    // Days later, with the server healed, a worker still sends nothing.
    let sent = server.ledger().requests_to("POST", WEBHOOKS).len();
    server.clear_faults();
    clock.advance(Duration::from_secs(30 * 24 * 3600));
    outbox
        .workers(client(&server, 1))
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();
    assert_eq!(server.ledger().requests_to("POST", WEBHOOKS).len(), sent);
    assert_eq!(server.ledger().total_runs(), 0);
}

async fn a_job_whose_worker_died_is_reclaimed_after_its_lease(backend: Backend) {
    let server = support::server().await;
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    outbox
        .enqueue("orphan-1", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    // A worker claims it and dies before recording anything.
    let claimed = outbox
        .store()
        .claim("dead-worker", start(), LEASE, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let dead = claimed[0].clone();
    assert_eq!(dead.state, JobState::InFlight);

    // While the lease holds, nobody else takes it.
    let report = outbox
        .workers(client(&server, 5))
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();
    assert_eq!(report.claimed, 0);
    clock.advance(LEASE + Duration::from_secs(1));
    let report = outbox
        .workers(client(&server, 5))
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();

    assert_eq!(report.claimed, 1);
    let job = outbox.job("orphan-1").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Accepted);
    assert_eq!(job.claim, dead.claim + 1);
    let stale = hodoflow_outbox::Record {
        state: JobState::Failed,
        next_at: start(),
        attempts_added: 0,
        first_sent_at: None,
        run_id: None,
        last_error: None,
        finished_at: None,
        may_have_run: false,
    };
    assert!(
        !outbox
            .store()
            .record(dead.id, dead.claim, stale)
            .await
            .unwrap(),
        "the dead worker's claim is refused"
    );
    assert_eq!(
        outbox.job("orphan-1").await.unwrap().unwrap().state,
        JobState::Accepted
    );
}

async fn a_permanent_error_fails_the_job_with_its_kind_and_last_attempt(backend: Backend) {
    let server = support::server().await;
    let outbox = fresh(backend).await;
    outbox
        .enqueue(
            "unknown-trigger",
            Target::webhook("trg_no_such_trigger"),
            "{}",
        )
        .await
        .unwrap();

    let report = outbox
        .workers(client(&server, 5))
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();

    assert_eq!(report.failed, 1);
    let job = outbox.job("unknown-trigger").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.attempts, 1);
    let error = job.last_error.unwrap();
    assert_eq!(error.kind, "not_found");
    assert_eq!(error.status, Some(404));
    let ledger = server.ledger();
    let last = ledger.requests_to("POST", WEBHOOKS);
    assert_eq!(
        error.request_id.as_deref(),
        Some(last[0].request_id.as_str())
    );
    assert!(
        !error.message.contains("trg_no_such_trigger"),
        "{}",
        error.message
    );
}

async fn two_worker_pools_share_one_trigger_window_and_meet_no_429(backend: Backend) {
    let window = Duration::from_millis(400);
    let server = support::server_with(MockServer::builder().limits(Limits {
        webhook_rate_limit: 20,
        webhook_rate_window: window,
        ..support::fast_limits()
    }))
    .await;
    let outbox = fresh(backend).await;
    for n in 0..100 {
        outbox
            .enqueue(
                &format!("paced-{n}"),
                Target::webhook(DEMO_TRIGGER_TOKEN),
                "{}",
            )
            .await
            .unwrap();
    }
    let limit = RouteLimit::new(20, window).unwrap();
    // Two pools with two clients: as two processes would be, nothing in memory is shared.
    // The server states its 400 ms window in whole seconds (`w=1`, `t=1`), so the fleet holds
    // the trigger up to a second when a window is spent: 100 events take about 5 s, longer
    // than one call's 5 s budget less its least attempt time. A lease with room for the queue
    // lets each event wait for its slot before its call starts, as events should.
    let pools = [0, 1].map(|n| {
        outbox
            .workers(client(&server, 5))
            .name(format!("pool-{n}"))
            .trigger_limit(Some(limit))
            .lease(Duration::from_secs(30))
            .poll_interval(Duration::from_millis(20))
    });
    let [a, b] = pools;
    let (a, b) = tokio::join!(a.run_until_idle(), b.run_until_idle());
    let (a, b) = (a.unwrap(), b.unwrap());

    let counts = outbox.counts().await.unwrap();
    let pending = outbox.list(Some(JobState::Pending), 10).await.unwrap();
    let why: Vec<_> = pending.iter().map(|job| &job.last_error).collect();
    assert_eq!(counts.accepted, 100, "{counts:?} {a:?} {b:?} {why:?}");
    assert_eq!((a.rescheduled, b.rescheduled), (0, 0), "{a:?} {b:?}");
    assert!(
        a.claimed > 0 && b.claimed > 0,
        "both pools worked: {a:?} {b:?}"
    );
    let refused = server
        .ledger()
        .requests()
        .iter()
        .filter(|request| request.status == Some(429))
        .count();
    assert_eq!(
        refused, 0,
        "the shared window kept both pools under the trigger's limit"
    );
}

/// Four pools with four clients (as four processes: no retry budget shared in memory) meet a
/// 6 s outage of webhook ingestion. Once one finds the service down the store holds it down for
/// all, and one probe of the fleet goes at a time: the server sees about one client's probes,
/// not four clients'. Every job is delivered after the outage, once.
async fn four_worker_pools_probe_an_outage_as_one_and_deliver_every_job_once(backend: Backend) {
    const JOBS: usize = 40;
    const OUTAGE: Duration = Duration::from_secs(6);
    let server = support::server_with(MockServer::builder().limits(support::fast_limits())).await;
    let outbox = fresh(backend).await;
    for n in 0..JOBS {
        let target = Target::webhook(DEMO_TRIGGER_TOKEN);
        outbox
            .enqueue(&format!("held-{n}"), target, "{}")
            .await
            .unwrap();
    }
    server.inject(Fault::respond(503).on("POST", WEBHOOKS).during(OUTAGE));
    let from = std::time::Instant::now();
    // A call's budget of 20 s outlasts the outage: each holds until the service is back.
    let pools = [0, 1, 2, 3].map(|n| {
        let client = support::demo(
            support::builder(&server).budget(
                Budget::new()
                    .max_elapsed(Duration::from_secs(20))
                    .attempt_timeout(Duration::from_secs(2)),
            ),
        );
        outbox
            .workers(client)
            .name(format!("pool-{n}"))
            .lease(Duration::from_secs(40))
            .poll_interval(Duration::from_millis(20))
            .run_until_idle()
    });
    let [a, b, c, d] = pools;
    let ran = tokio::join!(a, b, c, d);
    for report in [ran.0, ran.1, ran.2, ran.3] {
        report.unwrap();
    }

    let ledger = server.ledger();
    let requests = ledger.requests_to("POST", WEBHOOKS);
    // From 1.5 s into the outage, when every pool holds it: one client's probes there are
    // about three (three quarters of the outage's age apart: at about 1.9, 3.3 and 5.7 s of
    // it), besides the last chances of calls whose time runs out. Four pools probing alone
    // send four times that, and their probes spend their calls' attempts so that most calls
    // end early (and leave their jobs for later).
    let held_from = from + Duration::from_millis(1500);
    let probes = requests
        .iter()
        .filter(|r| r.arrived >= held_from && r.arrived < from + OUTAGE)
        .count();
    assert!(
        probes <= 27,
        "{probes} requests in the held part of the outage, from four pools"
    );
    let counts = outbox.counts().await.unwrap();
    assert_eq!(counts.accepted, JOBS as u64, "{counts:?}");
    for n in 0..JOBS {
        let job = outbox.job(&format!("held-{n}")).await.unwrap().unwrap();
        assert_eq!(
            ledger.runs_for_delivery(job.identity.as_str()).len(),
            1,
            "held-{n}"
        );
    }
    println!(
        "four pools in a 6 s outage: {probes} requests in its last 4.5 s, {} in all for {JOBS} jobs",
        requests.len()
    );
}

/// No `trigger_limit`: the pools' shared window follows the server's `RateLimit-Policy`
/// (20 per second here), not Hodoflow's documented 100 per minute, which would let all 60 through
/// at once into 429s.
async fn workers_without_a_limit_share_the_window_the_server_states(backend: Backend) {
    let window = Duration::from_secs(1);
    let server = support::server_with(MockServer::builder().limits(Limits {
        webhook_rate_limit: 20,
        webhook_rate_window: window,
        ..support::fast_limits()
    }))
    .await;
    let outbox = fresh(backend).await;
    outbox
        .enqueue("first", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    let sender = client(&server, 5);
    // One job first: its answer states the figures.
    outbox
        .workers(sender.clone())
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();
    for n in 0..60 {
        let event = format!("learned-{n}");
        let target = Target::webhook(DEMO_TRIGGER_TOKEN);
        outbox.enqueue(&event, target, "{}").await.unwrap();
    }
    let pools = [0, 1].map(|n| {
        outbox
            .workers(sender.clone())
            .name(format!("pool-{n}"))
            .lease(LEASE)
            .poll_interval(Duration::from_millis(20))
    });
    let [a, b] = pools;
    let (a, b) = tokio::join!(a.run_until_idle(), b.run_until_idle());
    let _ = (a.unwrap(), b.unwrap());

    assert_eq!(outbox.counts().await.unwrap().accepted, 61);
    let ledger = server.ledger();
    let deliveries = ledger.requests_to("POST", WEBHOOKS);
    assert_eq!(deliveries.len(), 61, "each sent once");
    assert!(deliveries.iter().all(|request| request.status == Some(202)));
    let stats = sender.stats();
    assert_eq!(
        stats.route_held_by.map(|p| (p.limit.requests(), p.source)),
        Some((20, hodoflow_retry::limit::PacingSource::Server)),
        "{stats:?}"
    );
}

/// A worker killed mid-batch (its runtime, its tasks, its connections and what it learned
/// gone, as a killed process's), and a new one started: the server states 10,000 a minute, and
/// the killed worker left that figure in the store with the window's slots, so the new worker
/// paces at it from its first claim. (Paced at the documented 100 a minute while the killed
/// worker's slots filled the window, it sent nothing for a minute.)
async fn a_restarted_worker_resumes_at_the_rate_the_server_stated(backend: Backend) {
    let server = support::server_with(MockServer::builder().limits(Limits {
        webhook_rate_limit: 10_000,
        webhook_rate_window: Duration::from_secs(60),
        ..support::fast_limits()
    }))
    .await;
    let (outbox, at) = fresh_at(backend).await;
    let events = 400;
    for n in 0..events {
        let target = Target::webhook(DEMO_TRIGGER_TOKEN);
        outbox
            .enqueue(&format!("restart-{n}"), target, "{}")
            .await
            .unwrap();
    }
    let base = server.base_url();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let outbox = reopen(backend, &at).await;
            // Another process: it learns the token from its configuration.
            outbox.add_trigger_token(DEMO_TRIGGER_TOKEN).unwrap();
            let client = support::demo(
                HodoflowClient::builder(base).budget(
                    Budget::new()
                        .max_elapsed(Duration::from_secs(5))
                        .attempt_timeout(Duration::from_secs(2)),
                ),
            );
            let workers = outbox.workers(client).concurrency(4).lease(LEASE).spawn();
            let _running = workers.unwrap();
            while outbox.counts().await.unwrap().accepted < 100 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        // Killed: its tasks dropped where they stood.
        runtime.shutdown_background();
    })
    .join()
    .unwrap();
    let before_the_restart = server.ledger().requests_to("POST", WEBHOOKS).len();
    let restarted = client(&server, 5);
    outbox
        .workers(restarted.clone())
        .concurrency(4)
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();

    let deliveries = server.ledger().requests_to("POST", WEBHOOKS).len();
    let after = deliveries - before_the_restart;
    assert!(after > 200, "{after} sent after the restart");
    // No stall: the new worker was never held by a limit other than the one the server stated
    // (paced at the documented 100 a minute, it would have been, for a minute).
    let pacing = restarted.stats().route_held_by;
    assert!(
        pacing.is_none_or(|pacing| pacing.limit.requests() == 10_000),
        "{pacing:?}"
    );
    // The killed worker's claims come back when their leases end; then every event has run
    // once, whoever sent it.
    tokio::time::sleep(LEASE).await;
    outbox
        .workers(restarted)
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();
    let counts = outbox.counts().await.unwrap();
    assert_eq!(
        counts.accepted + counts.duplicate,
        events as u64,
        "{counts:?}"
    );
    assert_eq!(server.ledger().total_runs(), events, "each event ran once");
    assert!(deliveries <= server.ledger().requests_to("POST", WEBHOOKS).len());
}

async fn an_operator_retry_requeues_a_failed_job(backend: Backend) {
    let server = support::server().await;
    let outbox = fresh(backend).await;
    server.inject(Fault::respond(422).on("POST", WEBHOOKS).times(1));
    outbox
        .enqueue("fix-me", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    let run = || {
        outbox
            .workers(client(&server, 5))
            .lease(LEASE)
            .run_until_idle()
    };
    run().await.unwrap();
    assert_eq!(
        outbox.job("fix-me").await.unwrap().unwrap().state,
        JobState::Failed
    );

    let requeued = outbox.retry("fix-me").await.unwrap().unwrap();
    assert_eq!(requeued.state, JobState::Pending);
    run().await.unwrap();

    let job = outbox.job("fix-me").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Accepted);
    assert_eq!(job.calls, 2);
    let ledger = server.ledger();
    assert_eq!(
        ledger.requests_to("POST", WEBHOOKS).len(),
        2,
        "the 422, then the requeued send"
    );
    assert_eq!(ledger.runs_for_delivery(job.identity.as_str()).len(), 1);
    assert!(outbox.retry("no-such-event").await.unwrap().is_none());
}

async fn spawned_workers_deliver_what_is_enqueued_while_they_run_and_stop_with_nothing_in_flight(
    backend: Backend,
) {
    let server = support::server_where(|limits| limits.webhook_rate_limit = 1_000_000).await;
    let outbox = fresh(backend).await;
    let workers = outbox
        .workers(client(&server, 5))
        .trigger_limit(None)
        .concurrency(8)
        .lease(LEASE)
        .poll_interval(Duration::from_millis(10))
        .spawn()
        .unwrap();
    for n in 0..300 {
        outbox
            .enqueue(
                &format!("live-{n}"),
                Target::webhook(DEMO_TRIGGER_TOKEN),
                "{}",
            )
            .await
            .unwrap();
        if n % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    support::eventually("every job is delivered", || {
        server.ledger().total_runs() == 300
    })
    .await;
    // Give the recorder its last batch, then stop.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while outbox.counts().await.unwrap().accepted < 300 {
        assert!(
            std::time::Instant::now() < deadline,
            "the results are recorded"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = workers.stop().await.unwrap();

    let counts = outbox.counts().await.unwrap();
    assert_eq!(counts.accepted, 300, "{counts:?}");
    assert_eq!(
        counts.in_flight, 0,
        "stop leaves nothing claimed: {counts:?}"
    );
    assert_eq!(report.claimed, 300, "{report:?}");
    assert_eq!(report.accepted, 300, "{report:?}");
}

async fn workers_stopped_midway_finish_every_job_they_claimed(backend: Backend) {
    let server = support::server_where(|limits| limits.webhook_rate_limit = 1_000_000).await;
    server.inject(
        Fault::delay_then_handle(Duration::from_millis(20))
            .on("POST", WEBHOOKS)
            .times(u32::MAX),
    );
    let outbox = fresh(backend).await;
    for n in 0..400 {
        outbox
            .enqueue(
                &format!("midway-{n}"),
                Target::webhook(DEMO_TRIGGER_TOKEN),
                "{}",
            )
            .await
            .unwrap();
    }
    let workers = outbox
        .workers(client(&server, 5))
        .trigger_limit(None)
        .concurrency(8)
        .lease(LEASE)
        .spawn()
        .unwrap();
    support::eventually("some jobs are delivered", || {
        server.ledger().total_runs() >= 40
    })
    .await;

    let report = workers.stop().await.unwrap();

    let counts = outbox.counts().await.unwrap();
    assert_eq!(
        counts.in_flight, 0,
        "every claimed job was delivered and recorded: {counts:?}"
    );
    assert_eq!(counts.accepted, report.claimed, "{counts:?} {report:?}");
    assert_eq!(counts.accepted + counts.pending, 400, "{counts:?}");
    assert!(counts.pending > 0, "stopped midway: {counts:?}");
    assert_eq!(server.ledger().total_runs() as u64, counts.accepted);
}

/// `--max-elapsed 5000000000000h` once claimed jobs under a lease ending at `i64::MAX`
/// milliseconds, and no later run sent them. A lease past the year 9999 is now refused before it
/// is written, and a job in flight under a lease ending more than `MAX_LEASE` from now (as one
/// written before that) is taken as expired and delivered.
async fn a_wedged_lease_is_taken_as_expired_and_the_job_recovers(backend: Backend) {
    let server = support::server().await;
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    outbox
        .enqueue("wedged-1", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    let absurd = Duration::from_secs(5_000_000_000_000 * 3600);
    let error = outbox
        .store()
        .claim("wedging-worker", start(), absurd, 10)
        .await
        .expect_err("a lease past the year 9999 is never written");
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    assert_eq!(
        outbox.job("wedged-1").await.unwrap().unwrap().state,
        JobState::Pending
    );
    let error = outbox
        .workers(client(&server, 5))
        .lease(hodoflow_outbox::MAX_LEASE + Duration::from_secs(1))
        .run_until_idle()
        .await
        .expect_err("a lease over the maximum is refused");
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");

    // A lease far past any a worker can hold, as one written before leases were bounded: a
    // claim a century ahead of the outbox's clock.
    let century = Duration::from_secs(100 * 365 * 24 * 3600);
    let wedged = outbox
        .store()
        .claim("wedging-worker", start() + century, LEASE, 10)
        .await
        .unwrap();
    assert_eq!(wedged.len(), 1);
    assert_eq!(wedged[0].state, JobState::InFlight);

    let report = outbox
        .workers(client(&server, 5))
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();
    assert_eq!(report.claimed, 1, "the wedged lease is taken as expired");
    let job = outbox.job("wedged-1").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Accepted, "{job:?}");
    assert_eq!(server.ledger().total_runs(), 1);
}

async fn the_store_counts_what_is_due_without_listing_a_job(backend: Backend) {
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    assert_eq!(outbox.due(None).await.unwrap().next_at, None);
    assert!(outbox.due(None).await.unwrap().is_idle());
    for event in ["due-a", "due-b", "due-c"] {
        outbox
            .enqueue(event, Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
            .await
            .unwrap();
    }
    let due = outbox.due(None).await.unwrap();
    assert_eq!((due.due, due.in_flight, due.next_at), (3, 0, Some(start())));
    assert!(!due.is_idle());

    let claimed = outbox
        .store()
        .claim("w", start(), Duration::from_secs(60), 1)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let due = outbox.due(None).await.unwrap();
    assert_eq!((due.due, due.in_flight, due.next_at), (2, 1, Some(start())));

    // Among some events only: the claimed one is in flight, due again at its lease's end.
    let only = |events: &[&str]| -> Option<std::sync::Arc<[String]>> {
        Some(events.iter().map(|event| (*event).to_owned()).collect())
    };
    let mine = outbox.due(only(&[&claimed[0].event_id])).await.unwrap();
    assert_eq!(
        (mine.due, mine.in_flight, mine.next_at),
        (0, 1, Some(start() + Duration::from_secs(60)))
    );
    let other = if claimed[0].event_id == "due-c" {
        "due-b"
    } else {
        "due-c"
    };
    let theirs = outbox.due(only(&[other, "no-such-event"])).await.unwrap();
    assert_eq!((theirs.due, theirs.in_flight), (1, 0));
    assert!(
        outbox
            .due(only(&["no-such-event"]))
            .await
            .unwrap()
            .is_idle()
    );
}

async fn an_idle_worker_is_woken_by_an_enqueue_and_a_retry_not_by_its_poll(backend: Backend) {
    let server = support::server().await;
    let (outbox, producer) = fresh_pair(backend).await;
    // The workers' handle did not enqueue the jobs: it is told the token.
    outbox.add_trigger_token(DEMO_TRIGGER_TOKEN).unwrap();
    server.inject(Fault::respond(422).on("POST", WEBHOOKS).times(1));
    // The workers poll once an hour: only a wake-up starts these jobs at all (the wait below is
    // a guard against a hang, far shorter than the poll).
    let workers = outbox
        .workers(client(&server, 3))
        .lease(LEASE)
        .poll_interval(Duration::from_secs(3600))
        .safety_poll(Duration::from_secs(3600))
        .spawn()
        .unwrap();
    let settled = |event: &'static str, state: JobState| {
        let outbox = outbox.clone();
        async move {
            let started = std::time::Instant::now();
            loop {
                let job = outbox.job(event).await.unwrap();
                if job.as_ref().is_some_and(|job| job.state == state) {
                    return started.elapsed();
                }
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "{event} is not {state:?}: no wake-up started it (polling is hourly): {job:?}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    // Idle first: the workers' first claim found nothing and they sleep.
    tokio::time::sleep(Duration::from_millis(300)).await;

    producer
        .enqueue("wake-1", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    settled("wake-1", JobState::Failed).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    producer.retry("wake-1").await.unwrap().unwrap();
    let took = settled("wake-1", JobState::Accepted).await;
    workers.stop().await.unwrap();

    let ledger = server.ledger();
    assert_eq!(
        ledger.requests_to("POST", WEBHOOKS).len(),
        2,
        "the 422, then the retry's send"
    );
    let job = outbox.job("wake-1").await.unwrap().unwrap();
    assert_eq!(ledger.runs_for_delivery(job.identity.as_str()).len(), 1);
    println!("{backend:?}: a retried job was delivered {took:?} after its retry");
}

async fn the_oldest_due_job_is_the_least_next_at_of_the_jobs_a_claim_would_take(backend: Backend) {
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    let store = outbox.store();
    let at = |seconds: u64| start() + Duration::from_secs(seconds);
    assert_eq!(store.oldest_due(at(0)).await.unwrap(), None, "empty");
    let webhook = || Target::webhook(DEMO_TRIGGER_TOKEN);
    outbox.enqueue("first", webhook(), "{}").await.unwrap();
    clock.advance(Duration::from_secs(10));
    outbox.enqueue("second", webhook(), "{}").await.unwrap();

    assert_eq!(store.oldest_due(at(10)).await.unwrap(), Some(at(0)));
    assert_eq!(store.oldest_due(at(5)).await.unwrap(), Some(at(0)));
    let before = start() - Duration::from_secs(1);
    assert_eq!(store.oldest_due(before).await.unwrap(), None, "not due yet");
    // Claimed, both are due again only when their lease ends.
    let lease = Duration::from_secs(60);
    let claimed = store.claim("w1", at(10), lease, 10).await.unwrap();
    assert_eq!(claimed.len(), 2);
    assert_eq!(store.oldest_due(at(10)).await.unwrap(), None, "leased");
    assert_eq!(store.oldest_due(at(100)).await.unwrap(), Some(at(70)));
}

async fn the_backlog_counts_the_jobs_not_final_at_each_time(backend: Backend) {
    let server = support::server().await;
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    let minutes = |n: u64| Duration::from_secs(60 * n);
    let enqueue = |event_id: &'static str| {
        let outbox = outbox.clone();
        async move {
            outbox
                .enqueue(event_id, Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
                .await
                .unwrap();
        }
    };
    enqueue("at-0-a").await;
    enqueue("at-0-b").await;
    clock.advance(minutes(10));
    enqueue("at-10").await;
    clock.advance(minutes(10));
    outbox
        .workers(client(&server, 5))
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();
    assert_eq!(outbox.counts().await.unwrap().accepted, 3);
    clock.advance(minutes(10));
    enqueue("at-30").await;

    // Points at -10, 0, 10, 20 (all three delivered then) and 30 minutes.
    let from = start() - minutes(10);
    let backlog = outbox.store().backlog(from, minutes(10), 5).await.unwrap();
    assert_eq!(backlog, vec![0, 2, 3, 0, 1]);
    assert_eq!(outbox.backlog(minutes(40), 5).await.unwrap(), backlog);
    // A point between two: the two first jobs at 5 minutes.
    let between = outbox
        .store()
        .backlog(start() + minutes(5), minutes(1), 1)
        .await;
    assert_eq!(between.unwrap(), vec![2]);
}

/// 1,050 webhook jobs enqueued in 35 batches of 30, a second apart (ties of `next_at` within a
/// batch, so the ID decides, and pages of 100 end inside a tie); then the 300 oldest claimed: 100
/// failed, 100 done, 100 left in flight. Returns the outbox and its clock.
async fn paging_outbox(backend: Backend) -> (Outbox, ManualClock) {
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    for batch in 0..35 {
        let events = (0..30).map(|n| {
            (
                format!("page-{:04}", batch * 30 + n),
                Target::webhook(DEMO_TRIGGER_TOKEN),
                "{}",
            )
        });
        outbox.enqueue_many(events).await.unwrap();
        clock.advance(Duration::from_secs(1));
    }
    let claimed = outbox
        .store()
        .claim("pager", clock.wall(), LEASE, 300)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 300);
    for (n, job) in claimed.iter().enumerate().take(200) {
        clock.advance(Duration::from_millis(3));
        let state = if n < 100 {
            JobState::Failed
        } else {
            JobState::Done
        };
        assert!(
            outbox
                .store()
                .record(job.id, job.claim, final_record(state, clock.wall()))
                .await
                .unwrap()
        );
    }
    (outbox, clock)
}

fn final_record(state: JobState, now: SystemTime) -> Record {
    Record {
        state,
        next_at: now,
        attempts_added: 1,
        first_sent_at: Some(now),
        run_id: None,
        last_error: None,
        finished_at: Some(now),
        may_have_run: false,
    }
}

/// The place of `job` in a listing's order.
fn page_key(job: &Job) -> (usize, SystemTime, i64) {
    let state = JobState::ALL.iter().position(|s| *s == job.state).unwrap();
    (state, job.next_at, job.id)
}

/// Every page of a walk over `state` (all when `None`), `limit` at a time, with `between` run
/// after each page; the jobs as read.
async fn walk_pages<F, Fut>(
    outbox: &Outbox,
    state: Option<JobState>,
    limit: usize,
    mut between: F,
) -> Vec<Job>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut read = Vec::new();
    let mut after: Option<Cursor> = None;
    for page in 1.. {
        let (jobs, next) = outbox
            .list_page(state, after.as_ref(), limit)
            .await
            .unwrap();
        assert!(jobs.len() <= limit);
        if let Some(next) = next {
            assert_eq!(jobs.len(), limit, "only the last page is short");
            let printed: Cursor = next.to_string().parse().unwrap();
            assert_eq!(printed, next, "a cursor survives its text form");
            assert_eq!(Cursor::after(jobs.last().unwrap()), next);
        }
        read.extend(jobs);
        between(page).await;
        match next {
            Some(next) => after = Some(next),
            None => break,
        }
        assert!(page < 100, "the walk ends");
    }
    read
}

async fn paging_through_1_050_jobs_lists_each_once_in_order_across_states(backend: Backend) {
    let (outbox, _clock) = paging_outbox(backend).await;
    let mut expected = outbox.list(None, 10_000).await.unwrap();
    assert_eq!(expected.len(), 1_050);
    expected.sort_by_key(page_key);

    let read = walk_pages(&outbox, None, 100, |_| async {}).await;

    let ids: Vec<&str> = read.iter().map(|job| job.event_id.as_str()).collect();
    let want: Vec<&str> = expected.iter().map(|job| job.event_id.as_str()).collect();
    assert_eq!(ids, want, "each job once, by (state, next_at, id)");
    let states: Vec<JobState> = read.iter().map(|job| job.state).collect();
    assert_eq!(states[0], JobState::Pending);
    assert_eq!(states[749], JobState::Pending);
    assert_eq!(states[750], JobState::InFlight);
    assert_eq!(states[850], JobState::Done);
    assert_eq!(states[950], JobState::Failed);

    // One state alone; its cursor does not continue another state's listing.
    let failed = walk_pages(&outbox, Some(JobState::Failed), 30, |_| async {}).await;
    assert_eq!(failed.len(), 100);
    assert!(failed.iter().all(|job| job.state == JobState::Failed));
    assert!(failed.windows(2).all(|w| page_key(&w[0]) < page_key(&w[1])));
    let (_, next) = outbox
        .list_page(Some(JobState::Failed), None, 10)
        .await
        .unwrap();
    let error = outbox
        .list_page(Some(JobState::Done), next.as_ref(), 10)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    // An exact fit ends with no cursor; an empty state is one empty page.
    let (all, next) = outbox
        .list_page(Some(JobState::InFlight), None, 100)
        .await
        .unwrap();
    assert_eq!((all.len(), next), (100, None));
    let (none, next) = outbox
        .list_page(Some(JobState::Duplicate), None, 100)
        .await
        .unwrap();
    assert!(none.is_empty() && next.is_none());
}

async fn paging_lists_a_job_that_moves_between_pages_as_the_cursor_documents(backend: Backend) {
    let (outbox, clock) = paging_outbox(backend).await;
    // Pending, in order: page-0300 (the oldest not claimed) to page-1049.
    let behind: std::collections::HashSet<String> =
        (300..310).map(|n| format!("page-{n:04}")).collect();
    let read = walk_pages(&outbox, None, 100, |page| {
        let (outbox, clock) = (outbox.clone(), clock.clone());
        async move {
            if page != 2 {
                return;
            }
            // The cursor is in the pending part, after page-0499. The 10 oldest pending jobs
            // (read already) are claimed and done: they move ahead of the cursor.
            clock.advance(Duration::from_secs(60));
            let claimed = outbox
                .store()
                .claim("pager", clock.wall(), LEASE, 10)
                .await
                .unwrap();
            for job in &claimed {
                outbox
                    .store()
                    .record(
                        job.id,
                        job.claim,
                        final_record(JobState::Done, clock.wall()),
                    )
                    .await
                    .unwrap();
            }
            // A failed job and a pending one not read yet are requeued: due now, still ahead.
            outbox.retry("page-0000").await.unwrap().unwrap();
            outbox.retry("page-0900").await.unwrap().unwrap();
        }
    })
    .await;

    let mut seen: std::collections::HashMap<&str, Vec<JobState>> = std::collections::HashMap::new();
    for job in &read {
        seen.entry(job.event_id.as_str())
            .or_default()
            .push(job.state);
    }
    assert_eq!(seen.len(), 1_050, "no job is missed");
    for (event_id, states) in &seen {
        if behind.contains(*event_id) {
            assert_eq!(
                states,
                &[JobState::Pending, JobState::Done],
                "{event_id}: read, then moved ahead of the cursor: listed again"
            );
        } else {
            assert_eq!(states.len(), 1, "{event_id}: {states:?}");
        }
    }
    assert_eq!(
        seen["page-0000"],
        [JobState::Pending],
        "requeued ahead: once"
    );
    assert_eq!(seen["page-0900"], [JobState::Pending]);
    assert_eq!(read.len(), 1_060);
    // The walk never went back: every job after the one before it, in the order as read.
    assert!(
        read.windows(2).all(|w| page_key(&w[0]) < page_key(&w[1])),
        "a walk along the order"
    );
}

/// A fresh store on `backend`, and where it is (a SQLite file's path, a PostgreSQL URL), to
/// open it again as a restarted process would ([`reopen`]).
async fn fresh_at(backend: Backend) -> (Outbox, String) {
    match backend {
        Backend::Sqlite => {
            let dir = std::env::temp_dir().join(format!(
                "hodoflow-outbox-{}-{}",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("outbox.db").display().to_string();
            (Outbox::sqlite(&path).await.unwrap(), path)
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let db = pg::database("reopen").await.expect("checked by the caller");
            (Outbox::postgres(&db.url).await.unwrap(), db.url.clone())
        }
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => unreachable!("the postgres tests return early without the feature"),
    }
}

/// A new SQLite outbox, and the journal files SQLite makes beside it, are readable by their
/// owner only: jobs hold bodies and routes.
#[cfg(unix)]
#[tokio::test]
async fn a_new_sqlite_outbox_and_its_journal_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;

    let (outbox, path) = fresh_at(Backend::Sqlite).await;
    outbox
        .enqueue("private-1", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    let mut files = 0;
    for suffix in ["", "-wal", "-shm"] {
        let file = format!("{path}{suffix}");
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        files += 1;
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o600,
            "{file} is {:o}",
            meta.permissions().mode() & 0o777
        );
    }
    assert!(files >= 2, "the database and its write-ahead log");
}

/// The store at `at` ([`fresh_at`]), opened anew.
async fn reopen(backend: Backend, at: &str) -> Outbox {
    match backend {
        Backend::Sqlite => Outbox::sqlite(at).await.unwrap(),
        #[cfg(feature = "postgres")]
        Backend::Postgres => Outbox::postgres(at).await.unwrap(),
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => unreachable!("the postgres tests return early without the feature"),
    }
}

/// Scopes as workers name them: a credential, one of its triggers, a Modulify endpoint.
const CREDENTIAL: &str = "hodoflow http://127.0.0.1:8080";
const TRIGGER_A: &str = "hodoflow http://127.0.0.1:8080 trigger 1a2b3c4d";
const MODULIFY: &str = "modulify http://127.0.0.1:8081 token 9f8e7d6c";

async fn pauses_keep_the_later_end_with_its_reason_and_list_every_scope_paused(backend: Backend) {
    let (first, second) = fresh_pair(backend).await;
    let clock = ManualClock::new(start());
    let first = first.with_clock(clock.clone());
    let (store, other) = (first.store(), second.store());
    let at = |secs: u64| start() + Duration::from_secs(secs);
    assert_eq!(store.pauses(at(0)).await.unwrap(), []);
    assert_eq!(store.paused_until(TRIGGER_A, at(0)).await.unwrap(), None);

    store
        .pause(TRIGGER_A, at(60), "429 from trigger 1a2b3c4d", at(0))
        .await
        .unwrap();
    store
        .pause(TRIGGER_A, at(30), "a shorter one", at(0))
        .await
        .unwrap();
    assert_eq!(
        other.pauses(at(0)).await.unwrap(),
        [Pause::new(TRIGGER_A, at(60), "429 from trigger 1a2b3c4d")],
        "a shorter pause neither shortens a longer one nor replaces its reason"
    );
    store
        .pause(TRIGGER_A, at(90), "429 again", at(0))
        .await
        .unwrap();
    store
        .pause(
            CREDENTIAL,
            at(10),
            "429 rate_limited from the JSON:API",
            at(0),
        )
        .await
        .unwrap();
    store
        .pause(MODULIFY, at(45), "Modulify 429 for this token", at(0))
        .await
        .unwrap();

    // Every scope, seen by another handle (on PostgreSQL, another connection), by its text.
    let all = vec![
        Pause::new(CREDENTIAL, at(10), "429 rate_limited from the JSON:API"),
        Pause::new(TRIGGER_A, at(90), "429 again"),
        Pause::new(MODULIFY, at(45), "Modulify 429 for this token"),
    ];
    assert_eq!(other.pauses(at(0)).await.unwrap(), all);
    assert_eq!(first.pauses().await.unwrap(), all, "on the outbox's clock");
    assert_eq!(
        other.paused_until(CREDENTIAL, at(9)).await.unwrap(),
        Some(at(10))
    );
    // One scope closed says nothing of another.
    assert_eq!(
        other
            .paused_until("hodoflow http://127.0.0.1:8080 trigger 5e6f7a8b", at(0))
            .await
            .unwrap(),
        None
    );
    // A pause ends at its time.
    assert_eq!(other.paused_until(CREDENTIAL, at(10)).await.unwrap(), None);
    assert_eq!(other.pauses(at(10)).await.unwrap(), all[1..]);
    clock.advance(Duration::from_secs(50));
    assert_eq!(first.pauses().await.unwrap(), [all[1].clone()]);

    // Writing a pause removes those ended (of any scope): the credential's, ended at 10 s, is
    // gone even when read as of before its end.
    let trigger_b = "hodoflow http://127.0.0.1:8080 trigger 5e6f7a8b";
    store
        .pause(trigger_b, at(100), "429 from trigger 5e6f7a8b", at(30))
        .await
        .unwrap();
    let kept = other.pauses(at(0)).await.unwrap();
    let scopes: Vec<&str> = kept.iter().map(|pause| pause.scope.as_str()).collect();
    assert_eq!(scopes, [TRIGGER_A, trigger_b, MODULIFY], "{kept:?}");

    // A long reason is cut at a character's start; the pause is kept.
    let long = "é".repeat(150);
    store
        .pause(CREDENTIAL, at(120), &long, at(30))
        .await
        .unwrap();
    let kept = other.pauses(at(30)).await.unwrap();
    assert_eq!(kept[0].scope, CREDENTIAL);
    assert_eq!(kept[0].why, "é".repeat(100), "200 bytes");
}

async fn scopes_are_opaque_text_of_at_most_200_bytes(backend: Backend) {
    let outbox = fresh(backend).await;
    let store = outbox.store();
    let t0 = start();
    let later = t0 + Duration::from_secs(60);
    let minute = Duration::from_secs(60);
    // Quotes, markup, a non-ASCII character: kept and returned as written.
    let odd = "hodoflow http://h.example/ trigger 'ab' <b>ü</b> \"q\"";
    store.pause(odd, later, "why", t0).await.unwrap();
    store.learn_window(odd, 5, minute, t0).await.unwrap();
    assert_eq!(store.paused_until(odd, t0).await.unwrap(), Some(later));
    assert_eq!(store.window(odd).await.unwrap(), Some((5, minute)));
    let longest = "s".repeat(MAX_SCOPE);
    store.pause(&longest, later, "why", t0).await.unwrap();
    store.learn_window(&longest, 5, minute, t0).await.unwrap();
    assert_eq!(store.paused_until(&longest, t0).await.unwrap(), Some(later));

    for refused in ["".to_owned(), "s".repeat(MAX_SCOPE + 1)] {
        let errors = [
            store.pause(&refused, later, "why", t0).await.unwrap_err(),
            store.paused_until(&refused, t0).await.unwrap_err(),
            store
                .learn_window(&refused, 5, minute, t0)
                .await
                .unwrap_err(),
            store.window(&refused).await.unwrap_err(),
        ];
        for error in errors {
            assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        }
    }
    let scopes: Vec<String> = store
        .pauses(t0)
        .await
        .unwrap()
        .into_iter()
        .map(|pause| pause.scope)
        .collect();
    assert_eq!(
        scopes,
        [odd.to_owned(), longest],
        "nothing refused was kept"
    );
}

async fn a_learned_window_is_the_latest_stated_and_a_store_opened_later_reads_it(backend: Backend) {
    let (outbox, at) = fresh_at(backend).await;
    let store = outbox.store();
    let t = |secs: u64| start() + Duration::from_secs(secs);
    let secs = Duration::from_secs;
    assert_eq!(store.window(TRIGGER_A).await.unwrap(), None);

    store
        .learn_window(TRIGGER_A, 10_000, secs(60), t(5))
        .await
        .unwrap();
    assert_eq!(
        store.window(TRIGGER_A).await.unwrap(),
        Some((10_000, secs(60)))
    );
    // A worker that read the server earlier writes after: the later reading stays.
    store
        .learn_window(TRIGGER_A, 100, secs(60), t(1))
        .await
        .unwrap();
    assert_eq!(
        store.window(TRIGGER_A).await.unwrap(),
        Some((10_000, secs(60)))
    );
    store
        .learn_window(TRIGGER_A, 20_000, Duration::from_millis(30_500), t(9))
        .await
        .unwrap();
    store
        .learn_window(MODULIFY, 60, secs(60), t(9))
        .await
        .unwrap();
    assert_eq!(
        store.window(CREDENTIAL).await.unwrap(),
        None,
        "never stated"
    );

    // Nothing a window could be.
    for (requests, per) in [
        (0, secs(60)),
        (10, Duration::ZERO),
        (10, Duration::from_micros(900)),
    ] {
        let error = store
            .learn_window(TRIGGER_A, requests, per, t(20))
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    }

    // A worker started later, on a store opened anew, reads what the server stated.
    drop(outbox);
    let restarted = reopen(backend, &at).await;
    assert_eq!(
        restarted.store().window(TRIGGER_A).await.unwrap(),
        Some((20_000, Duration::from_millis(30_500)))
    );
    assert_eq!(
        restarted.store().window(MODULIFY).await.unwrap(),
        Some((60, secs(60)))
    );
}

async fn may_have_run_is_kept_across_calls_and_an_operator_requeue(backend: Backend) {
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    let store = outbox.store();
    for event_id in ["unanswered", "answered"] {
        outbox
            .enqueue(event_id, Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
            .await
            .unwrap();
    }
    assert!(
        !outbox
            .job("unanswered")
            .await
            .unwrap()
            .unwrap()
            .may_have_run
    );
    let pending = |may_have_run: bool| Record {
        state: JobState::Pending,
        next_at: start(),
        finished_at: None,
        may_have_run,
        ..final_record(JobState::Pending, start())
    };
    let claim = |at: SystemTime| async move {
        let mut jobs = store.claim("w", at, LEASE, 10).await.unwrap();
        jobs.sort_by(|a, b| a.event_id.cmp(&b.event_id));
        jobs
    };

    // A call sent and unanswered marks its job; one answered does not.
    let jobs = claim(start()).await;
    let (answered, unanswered) = (&jobs[0], &jobs[1]);
    assert!(!unanswered.may_have_run);
    let written = store
        .record_many(vec![
            (unanswered.id, unanswered.claim, pending(true)),
            (
                answered.id,
                answered.claim,
                final_record(JobState::Done, start()),
            ),
        ])
        .await
        .unwrap();
    assert_eq!(written, [true, true]);
    assert!(
        outbox
            .job("unanswered")
            .await
            .unwrap()
            .unwrap()
            .may_have_run
    );
    assert!(!outbox.job("answered").await.unwrap().unwrap().may_have_run);
    let counts = outbox.may_have_run_counts().await.unwrap();
    assert_eq!((counts.pending, counts.total()), (1, 1));

    // A later call with a definite answer does not clear it, nor does the job's end.
    clock.advance(Duration::from_secs(1));
    let jobs = claim(clock.wall()).await;
    assert_eq!(jobs.len(), 1);
    assert!(jobs[0].may_have_run, "a claim reads it");
    assert!(
        store
            .record(jobs[0].id, jobs[0].claim, pending(false))
            .await
            .unwrap()
    );
    assert!(
        outbox
            .job("unanswered")
            .await
            .unwrap()
            .unwrap()
            .may_have_run
    );
    clock.advance(Duration::from_secs(1));
    let jobs = claim(clock.wall()).await;
    let failed = Record {
        may_have_run: false,
        ..final_record(JobState::Failed, clock.wall())
    };
    assert!(
        store
            .record(jobs[0].id, jobs[0].claim, failed)
            .await
            .unwrap()
    );
    let job = outbox.job("unanswered").await.unwrap().unwrap();
    assert_eq!(
        job.state,
        JobState::Failed,
        "the store writes what the worker decided"
    );
    assert!(job.may_have_run);
    assert_eq!(job.calls, 3);

    // An operator's requeue keeps it, and every listing shows it.
    let requeued = outbox.retry("unanswered").await.unwrap().unwrap();
    assert_eq!(requeued.state, JobState::Pending);
    assert!(requeued.may_have_run);
    let (page, _) = outbox.list_page(None, None, 10).await.unwrap();
    let marked: Vec<(&str, bool)> = page
        .iter()
        .map(|job| (job.event_id.as_str(), job.may_have_run))
        .collect();
    assert!(marked.contains(&("unanswered", true)), "{marked:?}");
    assert!(marked.contains(&("answered", false)), "{marked:?}");
    assert!(
        outbox
            .list(None, 10)
            .await
            .unwrap()
            .iter()
            .any(|job| job.may_have_run),
        "list reads it too"
    );
    let counts = outbox.may_have_run_counts().await.unwrap();
    assert_eq!(
        (counts.pending, counts.in_flight, counts.total()),
        (1, 0, 1)
    );
}

async fn a_permanent_answer_after_a_call_that_may_have_run_needs_reconciliation_not_failure(
    backend: Backend,
) {
    let server = support::server().await;
    let clock = ManualClock::new(start());
    let outbox = fresh(backend).await.with_clock(clock.clone());
    // One call of one attempt each: the first call's answer decides what the job is marked.
    let run = || async {
        outbox
            .workers(client(&server, 1))
            .lease(LEASE)
            .run_until_idle()
            .await
            .unwrap()
    };
    let due_again = |event_id: &'static str| {
        let (outbox, clock) = (outbox.clone(), clock.clone());
        async move {
            let job = outbox.job(event_id).await.unwrap().unwrap();
            assert_eq!(job.state, JobState::Pending, "{event_id}");
            clock.advance(job.next_at.duration_since(clock.wall()).unwrap_or_default());
            job
        }
    };

    // The request was sent and its connection closed before any answer: it may have run.
    outbox
        .enqueue("unanswered", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    server.inject(Fault::close_before_execute().on("POST", WEBHOOKS).times(1));
    run().await;
    let job = due_again("unanswered").await;
    assert!(job.may_have_run, "{:?}", job.last_error);
    server.inject(Fault::respond(422).on("POST", WEBHOOKS).times(1));
    let report = run().await;
    let job = outbox.job("unanswered").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::NeedsReconciliation);
    assert!(job.may_have_run);
    assert_eq!((job.calls, job.attempts), (2, 2));
    assert_eq!(job.last_error.as_ref().and_then(|e| e.status), Some(422));
    assert_eq!((report.needs_reconciliation, report.failed), (1, 0));
    assert!(
        outbox
            .reconciliation(10)
            .await
            .unwrap()
            .iter()
            .any(|job| job.event_id == "unanswered")
    );

    // The same permanent answer after a definite 503: nothing ran, the job fails.
    outbox
        .enqueue("answered", Target::webhook(DEMO_TRIGGER_TOKEN), "{}")
        .await
        .unwrap();
    server.inject(Fault::respond(503).on("POST", WEBHOOKS).times(1));
    run().await;
    assert!(!due_again("answered").await.may_have_run);
    server.inject(Fault::respond(422).on("POST", WEBHOOKS).times(1));
    let report = run().await;
    let job = outbox.job("answered").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert!(!job.may_have_run);
    assert_eq!((report.needs_reconciliation, report.failed), (0, 1));

    assert_eq!(server.ledger().requests_to("POST", WEBHOOKS).len(), 4);
    assert_eq!(server.ledger().total_runs(), 0, "no call ran anything");
    let counts = outbox.may_have_run_counts().await.unwrap();
    assert_eq!((counts.needs_reconciliation, counts.total()), (1, 1));
}

/// SQLite's schema at version 2, as the migrations of the release before wrote it.
const SQLITE_SCHEMA_2: &str = r#"
    CREATE TABLE outbox_schema (version INTEGER NOT NULL);
    CREATE TABLE outbox_jobs (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id        TEXT NOT NULL UNIQUE,
        kind            TEXT NOT NULL,
        method          TEXT NOT NULL,
        route           TEXT NOT NULL,
        body            BLOB NOT NULL,
        identity        TEXT NOT NULL,
        state           TEXT NOT NULL,
        calls           INTEGER NOT NULL DEFAULT 0,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_at         INTEGER NOT NULL,
        created_at      INTEGER NOT NULL,
        first_sent_at   INTEGER,
        finished_at     INTEGER,
        lease_owner     TEXT,
        lease_until     INTEGER,
        claim           INTEGER NOT NULL DEFAULT 0,
        run_id          TEXT,
        last_kind       TEXT,
        last_status     INTEGER,
        last_request_id TEXT,
        last_message    TEXT
    );
    CREATE INDEX outbox_jobs_due ON outbox_jobs (state, next_at);
    CREATE TABLE outbox_pauses (
        scope    TEXT PRIMARY KEY,
        until_ms INTEGER NOT NULL
    );
    CREATE TABLE outbox_slots (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        scope      TEXT NOT NULL,
        busy_until INTEGER NOT NULL
    );
    CREATE INDEX outbox_slots_scope ON outbox_slots (scope, busy_until);
    UPDATE outbox_jobs SET next_at = lease_until WHERE state = 'in_flight';
    CREATE INDEX outbox_jobs_claimable ON outbox_jobs (next_at, id)
        WHERE state IN ('pending', 'in_flight');
    INSERT INTO outbox_schema (version) VALUES (1), (2);
"#;

/// PostgreSQL's schema at version 4, as the migrations of the release before wrote it.
#[cfg(feature = "postgres")]
const POSTGRES_SCHEMA_4: &str = "
    CREATE TABLE outbox_schema (version INTEGER PRIMARY KEY);
    CREATE TABLE outbox_jobs (
        id              BIGSERIAL PRIMARY KEY,
        event_id        TEXT NOT NULL UNIQUE,
        kind            TEXT NOT NULL,
        method          TEXT NOT NULL,
        route           TEXT NOT NULL,
        body            BYTEA NOT NULL,
        identity        TEXT NOT NULL,
        state           TEXT NOT NULL,
        calls           BIGINT NOT NULL DEFAULT 0,
        attempts        BIGINT NOT NULL DEFAULT 0,
        next_at         BIGINT NOT NULL,
        created_at      BIGINT NOT NULL,
        first_sent_at   BIGINT,
        finished_at     BIGINT,
        lease_owner     TEXT,
        lease_until     BIGINT,
        claim           BIGINT NOT NULL DEFAULT 0,
        run_id          TEXT,
        last_kind       TEXT,
        last_status     INTEGER,
        last_request_id TEXT,
        last_message    TEXT
    );
    CREATE TABLE outbox_pauses (
        scope    TEXT PRIMARY KEY,
        until_ms BIGINT NOT NULL
    );
    CREATE TABLE outbox_slots (
        id         BIGSERIAL PRIMARY KEY,
        scope      TEXT NOT NULL,
        busy_until BIGINT NOT NULL
    );
    CREATE INDEX outbox_slots_scope_busy_until ON outbox_slots (scope, busy_until);
    CREATE INDEX outbox_jobs_claimable ON outbox_jobs (next_at, id)
        WHERE state IN ('pending', 'in_flight');
    CREATE FUNCTION outbox_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('outbox_jobs', TG_TABLE_SCHEMA);
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER outbox_jobs_inserted AFTER INSERT ON outbox_jobs
        FOR EACH STATEMENT EXECUTE FUNCTION outbox_jobs_notify();
    CREATE TRIGGER outbox_jobs_pending AFTER UPDATE OF state ON outbox_jobs
        FOR EACH ROW WHEN (NEW.state = 'pending') EXECUTE FUNCTION outbox_jobs_notify();
    CREATE INDEX outbox_jobs_page ON outbox_jobs (state, next_at, id);
    INSERT INTO outbox_schema (version) VALUES (1), (2), (3), (4);
";

/// What a store of the previous schema holds: a failed job, a pending one and a pause, as
/// that release wrote them (`$1`: the pending job's identity; `$2`: now in milliseconds).
const OLD_ROWS: [&str; 3] = [
    "INSERT INTO outbox_jobs (event_id, kind, method, route, body, identity, state, calls, \
     attempts, next_at, created_at, first_sent_at, finished_at, last_kind, last_status, \
     last_message) VALUES ('old-failed', 'webhook', 'POST', 'trg_old', '{}', $1, 'failed', 1, 1, \
     $2, $2, $2, $2, 'not_found', 404, 'webhook trigger not found')",
    "INSERT INTO outbox_jobs (event_id, kind, method, route, body, identity, state, next_at, \
     created_at) VALUES ('old-pending', 'webhook', 'POST', 'trg_old', '{}', $1, 'pending', $2, $2)",
    "INSERT INTO outbox_pauses (scope, until_ms) VALUES ('credential:old', CAST($2 AS BIGINT) + 60000)",
];

async fn a_store_of_the_previous_schema_migrates_in_place(backend: Backend) {
    let identity = hodoflow_retry::IdempotencyKey::from_operation_id("old");
    let now = start();
    let now_ms = i64::try_from(
        now.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    // The previous schema and rows, written by hand; then opened by this build.
    let (outbox, versions) = match backend {
        Backend::Sqlite => {
            let (_, at) = fresh_at(backend).await;
            let path = format!("{at}.old");
            let connection = rusqlite::Connection::open(&path).unwrap();
            connection.execute_batch(SQLITE_SCHEMA_2).unwrap();
            for row in OLD_ROWS {
                // A statement's parameters count to its highest number: both fit every row.
                let row = row.replace('$', "?").replace("'{}'", "X'7B7D'");
                connection
                    .execute(&row, rusqlite::params![identity.as_str(), now_ms])
                    .unwrap();
            }
            drop(connection);
            let outbox = Outbox::sqlite(&path).await.unwrap();
            let connection = rusqlite::Connection::open(&path).unwrap();
            let versions: Vec<i64> = connection
                .prepare("SELECT version FROM outbox_schema ORDER BY version")
                .unwrap()
                .query_map([], |row| row.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            (outbox, versions)
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let db = pg::database("old_schema")
                .await
                .expect("checked by the caller");
            let client = db.client().await;
            client.batch_execute(POSTGRES_SCHEMA_4).await.unwrap();
            for row in OLD_ROWS {
                if row.contains("$1") {
                    client
                        .execute(row, &[&identity.as_str(), &now_ms])
                        .await
                        .unwrap();
                } else {
                    client
                        .execute(&row.replace("$2", "$1"), &[&now_ms])
                        .await
                        .unwrap();
                }
            }
            let outbox = Outbox::postgres(&db.url).await.unwrap();
            let versions: Vec<i64> = client
                .query("SELECT version FROM outbox_schema ORDER BY version", &[])
                .await
                .unwrap()
                .iter()
                .map(|row| i64::from(row.get::<_, i32>(0)))
                .collect();
            (outbox, versions)
        }
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => unreachable!("the postgres tests return early without the feature"),
    };
    let latest = match backend {
        Backend::Sqlite => vec![1, 2, 3, 4, 5],
        Backend::Postgres => vec![1, 2, 3, 4, 5, 6, 7],
    };
    assert_eq!(versions, latest, "migrated once, in place");

    // What was stored reads as before: no job was run before, no reason was kept.
    let outbox = outbox.with_clock(ManualClock::new(now));
    let failed = outbox.job("old-failed").await.unwrap().unwrap();
    assert_eq!(failed.state, JobState::Failed);
    assert_eq!(failed.last_error.as_ref().and_then(|e| e.status), Some(404));
    assert!(!failed.may_have_run);
    // The counts kept from now on start from the jobs stored before.
    let counts = outbox.counts().await.unwrap();
    assert_eq!((counts.total(), counts.failed, counts.pending), (2, 1, 1));
    assert_eq!(outbox.may_have_run_counts().await.unwrap().total(), 0);
    assert_eq!(
        outbox.pauses().await.unwrap(),
        [Pause::new(
            "credential:old",
            now + Duration::from_secs(60),
            ""
        )]
    );

    // And the new columns and table work on it.
    let store = outbox.store();
    let claimed = store.claim("w", now, LEASE, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let record = Record {
        state: JobState::Pending,
        finished_at: None,
        may_have_run: true,
        ..final_record(JobState::Pending, now)
    };
    assert!(
        store
            .record(claimed[0].id, claimed[0].claim, record)
            .await
            .unwrap()
    );
    assert!(
        outbox
            .job("old-pending")
            .await
            .unwrap()
            .unwrap()
            .may_have_run
    );
    assert_eq!(outbox.may_have_run_counts().await.unwrap().pending, 1);
    store
        .pause(
            "credential:old",
            now + Duration::from_secs(90),
            "a reason",
            now,
        )
        .await
        .unwrap();
    assert_eq!(outbox.pauses().await.unwrap()[0].why, "a reason");
    store
        .learn_window(TRIGGER_A, 10_000, Duration::from_secs(60), now)
        .await
        .unwrap();
    assert_eq!(
        store.window(TRIGGER_A).await.unwrap(),
        Some((10_000, Duration::from_secs(60)))
    );
}

/// A third vendor's jobs (`examples/custom_vendor.rs`, the IETF Idempotency-Key draft) name
/// their vendor and route, and the workers deliver them through the client and profile
/// registered under that name: every order's first attempt times out while the server runs it,
/// the retry meets it in flight (409), waits, and gets the one answer; each order runs once,
/// keyed by the job's identity. A job of a vendor no worker knows fails, nothing sent.
async fn a_vendor_of_your_own_is_delivered_through_its_profile_once_per_job(backend: Backend) {
    let hodoflow = support::server().await;
    let draft_server = draft::draft_server::start(true).await.unwrap();
    let outbox = fresh(backend).await;
    let orders = ["order-a", "order-b", "order-c"];
    for (n, order) in orders.iter().enumerate() {
        let target = Target::route("ietf-draft", http::Method::POST, "/orders");
        let body = format!(r#"{{"sku":"s-{n}"}}"#);
        outbox.enqueue(order, target, body).await.unwrap();
    }
    let stranger = Target::route("stranger", http::Method::POST, "/orders");
    outbox.enqueue("order-x", stranger, "{}").await.unwrap();
    for refused in ["webhook", "Draft", "", "1st", "a b"] {
        let error = outbox
            .enqueue(
                "refused",
                Target::route(refused, http::Method::POST, "/orders"),
                "{}",
            )
            .await
            .unwrap_err();
        assert_eq!(
            error.kind(),
            ErrorKind::InvalidInput,
            "{refused:?}: {error}"
        );
    }
    let draft_client = draft::client(&draft_server.base, Duration::from_millis(100)).unwrap();

    outbox
        .workers(client(&hodoflow, 5))
        .vendor("ietf-draft", draft_client, *draft::DRAFT)
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();

    let mut identities = Vec::new();
    for order in orders {
        let job = outbox.job(order).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Done, "{order}: {:?}", job.last_error);
        assert_eq!(
            job.target,
            Target::route("ietf-draft", http::Method::POST, "/orders"),
            "the row reads back as it was stored"
        );
        assert!(job.attempts >= 2, "{order}: a timeout, then the answer");
        identities.push(job.identity.as_str().to_owned());
    }
    let stranger = outbox.job("order-x").await.unwrap().unwrap();
    assert_eq!(stranger.state, JobState::Failed);
    assert_eq!(stranger.attempts, 0, "nothing sent");
    assert_eq!(stranger.last_error.unwrap().kind, "invalid_input");
    let mut executed = draft_server.executed();
    executed.sort();
    identities.sort();
    assert_eq!(
        executed, identities,
        "each order once, keyed by its job's identity"
    );
    assert!(hodoflow.ledger().requests_to("POST", WEBHOOKS).is_empty());
}

/// Both stores keep the contract a store of your own is checked by
/// (`outbox::conformance::check`), each rule on a store opened empty.
async fn the_store_keeps_the_contract_a_store_of_your_own_is_checked_by(backend: Backend) {
    let held = match backend {
        Backend::Sqlite => {
            conformance::check(|| async {
                let dir = std::env::temp_dir().join(format!(
                    "hodoflow-conformance-{}-{}",
                    std::process::id(),
                    uuid::Uuid::new_v4().simple()
                ));
                std::fs::create_dir_all(&dir).unwrap();
                SqliteStore::open(dir.join("outbox.db")).await.unwrap()
            })
            .await
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            conformance::check(|| async {
                let db = pg::database("conformance")
                    .await
                    .expect("checked by the caller");
                hodoflow_outbox::PostgresStore::connect(&db.url)
                    .await
                    .unwrap()
            })
            .await
        }
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => unreachable!("the postgres tests return early without the feature"),
    };
    assert_eq!(held, Ok(15), "every rule holds");
}

/// A `Deliver` of your own, registered with the workers, sends the jobs it takes (here the IETF
/// draft's orders, through the job's ready request) and says how each ended; the workers record
/// it. Jobs it does not take go to the built-in clients.
async fn a_deliver_of_your_own_sends_the_jobs_it_takes(backend: Backend) {
    use hodoflow_outbox::{Deliver, DeliverFuture, Delivered, JobCall, Sent};
    use std::sync::atomic::{AtomicU32, Ordering};

    #[derive(Debug)]
    struct Orders {
        client: hodoflow_retry::RetryingClient,
        calls: std::sync::Arc<AtomicU32>,
    }

    impl Deliver for Orders {
        fn delivers(&self, target: &Target) -> bool {
            target.kind() == "orders"
        }

        fn deliver<'a>(&'a self, job: JobCall<'a>) -> DeliverFuture<'a> {
            Box::pin(async move {
                self.calls.fetch_add(1, Ordering::SeqCst);
                let answer = job
                    .request(&self.client, *draft::DRAFT, http::Method::POST, "/orders")
                    .send()
                    .await?;
                Ok(Sent::new(Delivered::Done, answer.attempts().len() as u32))
            })
        }
    }

    let hodoflow = support::server().await;
    let draft_server = draft::draft_server::start(false).await.unwrap();
    let outbox = fresh(backend).await;
    for n in 0..4 {
        let target = Target::route("orders", http::Method::POST, "/orders");
        let body = format!(r#"{{"sku":"s-{n}"}}"#);
        outbox
            .enqueue(&format!("order-{n}"), target, body)
            .await
            .unwrap();
    }
    outbox
        .enqueue("hook", Target::webhook(support::TRIGGER), support::EVENT)
        .await
        .unwrap();
    let calls = std::sync::Arc::new(AtomicU32::new(0));
    let orders = Orders {
        client: draft::client(&draft_server.base, Duration::from_secs(2)).unwrap(),
        calls: std::sync::Arc::clone(&calls),
    };

    let report = outbox
        .workers(client(&hodoflow, 5))
        .deliver(orders)
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();

    assert_eq!(report.failed, 0, "{report:?}");
    let mut identities = Vec::new();
    for n in 0..4 {
        let job = outbox.job(&format!("order-{n}")).await.unwrap().unwrap();
        assert_eq!((job.state, job.attempts), (JobState::Done, 1), "order-{n}");
        identities.push(job.identity.as_str().to_owned());
    }
    let hook = outbox.job("hook").await.unwrap().unwrap();
    assert_eq!(
        hook.state,
        JobState::Accepted,
        "the built-in client took the webhook"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    let mut executed = draft_server.executed();
    executed.sort();
    identities.sort();
    assert_eq!(
        executed, identities,
        "each order once, under its job's identity"
    );
}

/// A Modulify-only sender runs its workers on its Modulify client, no Hodoflow client needed:
/// a lost answer, then the replay, the call run once.
async fn a_modulify_client_alone_runs_the_workers_of_modulify_jobs(backend: Backend) {
    let server = support::server().await;
    server.inject(
        Fault::execute_then_close()
            .on("POST", "/v1/send_message")
            .times(1),
    );
    let outbox = fresh(backend).await;
    let prompt = r#"{"projectId":"site_1","prompt":"Hi."}"#;
    outbox
        .enqueue("notify-1", Target::modulify("send_message"), prompt)
        .await
        .unwrap();
    let modulify = support::modulify_builder(&server)
        .bearer_token(DEMO_MODULIFY_TOKEN)
        .budget(Budget::new().max_elapsed(Duration::from_secs(5)))
        .build()
        .unwrap();

    let report = outbox
        .workers(modulify)
        .lease(LEASE)
        .run_until_idle()
        .await
        .unwrap();

    assert_eq!(report.failed, 0, "{report:?}");
    let job = outbox.job("notify-1").await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.attempts),
        (JobState::Done, 2),
        "lost, then replayed"
    );
    let ledger = server.ledger();
    assert_eq!(ledger.modulify_executions(job.identity.as_str()), 1);
}
