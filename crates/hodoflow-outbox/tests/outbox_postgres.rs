//! The PostgreSQL store against a real database (`OUTBOX_DATABASE_URL`; `.ci/run` starts a
//! throwaway cluster): enqueue, claims under concurrency, leases, records, the trigger windows'
//! slots and the migrations (pauses, learned windows and the rest: the shared suite of
//! `tests/outbox.rs`, on both stores). Each test works in a schema of its own, so they run in parallel.
//!
//! Run with: `cargo test -p hodoflow-outbox --features postgres --test outbox_postgres`

// Empty without the feature, so `cargo test --workspace` passes over it.
#![cfg(feature = "postgres")]

#[path = "postgres_support.rs"]
mod pg;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hodoflow_outbox::{
    Job, JobState, LastError, NewJob, PostgresStore, Record, Slot, Store, Target,
};
use hodoflow_retry::IdempotencyKey;

/// The tests' clock: a fixed instant, moved by hand.
fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn new_job(event_id: &str, target: Target, body: &'static [u8], now: SystemTime) -> NewJob {
    NewJob {
        event_id: event_id.to_owned(),
        identity: IdempotencyKey::from_operation_id(event_id),
        target,
        body: Bytes::from_static(body),
        now,
    }
}

fn webhook(event_id: &str) -> NewJob {
    new_job(event_id, Target::webhook("trg_demo"), b"{}", t0())
}

async fn open(db: &pg::TestDb) -> PostgresStore {
    PostgresStore::connect(&db.url)
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"))
}

/// A record of a call that ended with `state`, sending `attempts` requests.
fn record(state: JobState, next_at: SystemTime, attempts: u32) -> Record {
    Record {
        state,
        next_at,
        attempts_added: attempts,
        first_sent_at: Some(t0()),
        run_id: None,
        last_error: None,
        finished_at: state.is_final().then_some(next_at),
        may_have_run: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_twice_stores_one_job_and_returns_it_the_second_time() {
    let Some(db) = pg::database("enqueue_twice").await else {
        return;
    };
    let store = open(&db).await;
    let body: &'static [u8] = b"{\"order\":4711}\0\xff";
    let first = new_job(
        "order-4711:shipped",
        Target::webhook("trg_demo"),
        body,
        t0(),
    );
    let (job, inserted) = store.enqueue(first.clone()).await.unwrap();
    assert!(inserted);
    assert_eq!(job.state, JobState::Pending);
    assert_eq!(job.event_id, "order-4711:shipped");
    assert_eq!(job.body.as_ref(), body, "the body byte for byte");
    assert_eq!(job.identity, first.identity);
    assert_eq!(job.target, Target::webhook("trg_demo"));
    assert_eq!((job.calls, job.attempts, job.claim), (0, 0, 0));
    assert_eq!(job.next_at, t0());
    assert_eq!(job.created_at, t0());
    assert_eq!(job.first_sent_at, None);

    // The second enqueue, with another target and body, later: a no-op returning the stored job.
    let again = new_job(
        "order-4711:shipped",
        Target::modulify("send_message"),
        b"other",
        t0() + secs(5),
    );
    let (existing, inserted) = store.enqueue(again).await.unwrap();
    assert!(!inserted);
    assert_eq!(existing, job);
    assert_eq!(store.counts().await.unwrap().total(), 1);

    // Every kind of target comes back as it went in.
    for (event_id, target) in [
        ("write-1", Target::create("/api/json/v1/projects")),
        ("call-1", Target::modulify("send_message")),
    ] {
        let (job, inserted) = store
            .enqueue(new_job(event_id, target.clone(), b"{}", t0()))
            .await
            .unwrap();
        assert!(inserted);
        assert_eq!(store.get(event_id).await.unwrap().unwrap().target, target);
        assert_eq!(job.target, target);
    }
    assert_eq!(store.get("never-enqueued").await.unwrap(), None);
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_concurrent_claimers_claim_each_of_1000_due_jobs_exactly_once() {
    let Some(db) = pg::database("claim_concurrent").await else {
        return;
    };
    let store = Arc::new(open(&db).await);
    // 1,000 due jobs, enqueued by 8 producers.
    let mut producers = Vec::new();
    for producer in 0..8 {
        let store = Arc::clone(&store);
        producers.push(tokio::spawn(async move {
            for n in (producer..1000).step_by(8) {
                store.enqueue(webhook(&format!("event-{n}"))).await.unwrap();
            }
        }));
    }
    for producer in producers {
        producer.await.unwrap();
    }
    assert_eq!(store.counts().await.unwrap().pending, 1000);

    // Two claimers, each its own store (its own connections), as two processes would be, each
    // with four tasks claiming 7 at a time until nothing is due.
    let claimers = [Arc::new(open(&db).await), Arc::new(open(&db).await)];
    let mut tasks = Vec::new();
    for (claimer, store) in claimers.iter().enumerate() {
        for task in 0..4 {
            let store = Arc::clone(store);
            tasks.push(tokio::spawn(async move {
                let worker = format!("claimer-{claimer}-{task}");
                let mut claimed = Vec::new();
                loop {
                    let jobs = store.claim(&worker, t0(), secs(300), 7).await.unwrap();
                    if jobs.is_empty() {
                        return claimed;
                    }
                    for job in &jobs {
                        assert_eq!(job.state, JobState::InFlight);
                        assert_eq!(job.lease_owner.as_deref(), Some(worker.as_str()));
                        assert_eq!(job.lease_until, Some(t0() + secs(300)));
                        assert_eq!(job.claim, 1);
                        assert_eq!(job.first_sent_at, Some(t0()), "claim sets first_sent_at");
                    }
                    claimed.extend(jobs.into_iter().map(|job| job.id));
                }
            }));
        }
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let unique: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(
        all.len(),
        unique.len(),
        "{} claims of {} jobs: some job was claimed twice",
        all.len(),
        unique.len()
    );
    assert_eq!(unique.len(), 1000, "every job claimed");
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.in_flight, counts.total()), (1000, 1000));

    // Eight tasks record at once, each its own store, in batches of 5 with every outcome: the
    // counts the triggers keep (no row they all update, so none waits on another's commit or
    // deadlocks) end equal to a count of the jobs themselves.
    let mut ids: Vec<i64> = unique.into_iter().collect();
    ids.sort_unstable();
    let states = [
        JobState::Accepted,
        JobState::Failed,
        JobState::Pending,
        JobState::NeedsReconciliation,
    ];
    let mut recorders = Vec::new();
    for task in 0..8 {
        let store = open(&db).await;
        let mine: Vec<i64> = ids.iter().copied().skip(task).step_by(8).collect();
        recorders.push(tokio::spawn(async move {
            for batch in mine.chunks(5) {
                let records = batch
                    .iter()
                    .map(|&id| {
                        let state = states[usize::try_from(id).unwrap() % states.len()];
                        (id, 1, record(state, t0() + secs(60), 1))
                    })
                    .collect();
                assert!(
                    store
                        .record_many(records)
                        .await
                        .unwrap()
                        .iter()
                        .all(|&ok| ok)
                );
            }
        }));
    }
    for recorder in recorders {
        recorder.await.unwrap();
    }
    let scanned = db
        .client()
        .await
        .query(
            "SELECT state, COUNT(*) FROM outbox_jobs GROUP BY state",
            &[],
        )
        .await
        .unwrap();
    let counts = store.counts().await.unwrap();
    for row in scanned {
        let (state, jobs): (String, i64) = (row.get(0), row.get(1));
        let state = JobState::parse(&state).unwrap();
        assert_eq!(counts.of(state), u64::try_from(jobs).unwrap(), "{state:?}");
    }
    assert_eq!((counts.total(), counts.in_flight), (1000, 0));
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_ran_out_is_reclaimed_and_the_old_claim_is_refused() {
    let Some(db) = pg::database("lease_reclaim").await else {
        return;
    };
    let store = open(&db).await;
    let (job, _) = store.enqueue(webhook("lease-1")).await.unwrap();
    assert_eq!(
        store
            .claim("worker-a", t0() - secs(1), secs(30), 10)
            .await
            .unwrap(),
        Vec::<Job>::new(),
        "not due before its next_at"
    );

    let first = store.claim("worker-a", t0(), secs(30), 10).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].id, first[0].claim), (job.id, 1));

    // Within the lease, nobody else gets it.
    assert!(
        store
            .claim("worker-b", t0() + secs(29), secs(30), 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Worker A died: once its lease ran out, worker B reclaims the job, one claim later.
    let second = store
        .claim("worker-b", t0() + secs(30), secs(30), 10)
        .await
        .unwrap();
    assert_eq!(second.len(), 1);
    let reclaimed = &second[0];
    assert_eq!((reclaimed.id, reclaimed.claim), (job.id, 2));
    assert_eq!(reclaimed.lease_owner.as_deref(), Some("worker-b"));
    assert_eq!(reclaimed.lease_until, Some(t0() + secs(60)));
    assert_eq!(
        reclaimed.first_sent_at,
        Some(t0()),
        "the first claim's time stays: the horizon counts from it"
    );
    assert_eq!(
        reclaimed.identity, job.identity,
        "the same identity, always"
    );

    // A's late record is refused; B's holds.
    let late = store
        .record(job.id, 1, record(JobState::Accepted, t0() + secs(31), 1))
        .await
        .unwrap();
    assert!(!late, "a record under the lost claim must be refused");
    assert_eq!(
        store.get("lease-1").await.unwrap().unwrap().state,
        JobState::InFlight
    );
    assert!(
        store
            .record(job.id, 2, record(JobState::Accepted, t0() + secs(32), 1))
            .await
            .unwrap()
    );
    // Recorded once: a second record of the same claim finds it no longer in flight.
    assert!(
        !store
            .record(job.id, 2, record(JobState::Accepted, t0() + secs(33), 1))
            .await
            .unwrap()
    );
    let done = store.get("lease-1").await.unwrap().unwrap();
    assert_eq!(
        (done.state, done.calls, done.attempts),
        (JobState::Accepted, 1, 1)
    );
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_requeue_counts_and_list_read_back_what_was_written() {
    let Some(db) = pg::database("record_requeue").await else {
        return;
    };
    let store = open(&db).await;
    for event_id in ["a", "b", "c", "d"] {
        store.enqueue(webhook(event_id)).await.unwrap();
    }
    let claimed = store.claim("worker", t0(), secs(60), 3).await.unwrap();
    let ids: Vec<i64> = claimed.iter().map(|job| job.id).collect();
    let [a, b, c] = ids[..] else {
        panic!("claimed {claimed:?}")
    };
    assert_eq!(
        claimed
            .iter()
            .map(|job| job.event_id.as_str())
            .collect::<Vec<_>>(),
        ["a", "b", "c"],
        "oldest due first"
    );

    // a: accepted with its run ID.
    let accepted = Record {
        run_id: Some("run_01".to_owned()),
        ..record(JobState::Accepted, t0() + secs(1), 2)
    };
    assert!(store.record(a, 1, accepted).await.unwrap());
    // b: rescheduled after a call of 5 attempts that ended retryable.
    let rescheduled = Record {
        last_error: Some(LastError {
            kind: "budget_exhausted".to_owned(),
            status: Some(503),
            request_id: Some("req-9".to_owned()),
            message: "call budget exhausted".to_owned(),
        }),
        ..record(JobState::Pending, t0() + secs(5), 5)
    };
    assert!(store.record(b, 1, rescheduled).await.unwrap());
    // c: failed for good.
    let failed = Record {
        last_error: Some(LastError {
            kind: "forbidden".to_owned(),
            status: Some(403),
            request_id: None,
            message: "forbidden".to_owned(),
        }),
        ..record(JobState::Failed, t0() + secs(2), 1)
    };
    assert!(store.record(c, 1, failed).await.unwrap());

    let a_job = store.get("a").await.unwrap().unwrap();
    assert_eq!(a_job.state, JobState::Accepted);
    assert_eq!(a_job.run_id.as_deref(), Some("run_01"));
    assert_eq!((a_job.calls, a_job.attempts), (1, 2));
    assert_eq!(a_job.finished_at, Some(t0() + secs(1)));
    assert_eq!((a_job.lease_owner, a_job.lease_until), (None, None));

    let b_job = store.get("b").await.unwrap().unwrap();
    assert_eq!(b_job.state, JobState::Pending);
    assert_eq!(b_job.next_at, t0() + secs(5));
    assert_eq!((b_job.calls, b_job.attempts, b_job.claim), (1, 5, 1));
    assert_eq!(b_job.last_error.as_ref().unwrap().status, Some(503));
    assert_eq!(
        b_job.last_error.as_ref().unwrap().request_id.as_deref(),
        Some("req-9")
    );
    assert_eq!(b_job.finished_at, None);

    // b's second call: the counts add up, first_sent_at stays the first.
    let again = store
        .claim("worker", t0() + secs(5), secs(60), 10)
        .await
        .unwrap();
    let mut names = again
        .iter()
        .map(|job| job.event_id.as_str())
        .collect::<Vec<_>>();
    names.sort_unstable();
    assert_eq!(
        names,
        ["b", "d"],
        "both due, the one never claimed and the rescheduled one"
    );
    let later = Record {
        first_sent_at: Some(t0() + secs(5)),
        ..record(JobState::Pending, t0() + secs(35), 5)
    };
    assert!(store.record(b, 2, later).await.unwrap());
    let b_job = store.get("b").await.unwrap().unwrap();
    assert_eq!((b_job.calls, b_job.attempts, b_job.claim), (2, 10, 2));
    assert_eq!(b_job.first_sent_at, Some(t0()), "first_sent_at is set once");

    let counts = store.counts().await.unwrap();
    assert_eq!(
        (
            counts.pending,
            counts.in_flight,
            counts.accepted,
            counts.failed,
            counts.total()
        ),
        (1, 1, 1, 1, 4)
    );
    let listed = |jobs: Vec<Job>| jobs.into_iter().map(|job| job.event_id).collect::<Vec<_>>();
    assert_eq!(
        listed(store.list(None, 10).await.unwrap()),
        ["a", "b", "c", "d"]
    );
    assert_eq!(listed(store.list(None, 2).await.unwrap()), ["a", "b"]);
    assert_eq!(
        listed(store.list(Some(JobState::Failed), 10).await.unwrap()),
        ["c"]
    );
    assert!(
        store
            .list(Some(JobState::Duplicate), 10)
            .await
            .unwrap()
            .is_empty()
    );

    // An operator requeues the failed job: pending, due now, its history kept.
    let requeued = store.requeue("c", t0() + secs(100)).await.unwrap().unwrap();
    assert_eq!(requeued.state, JobState::Pending);
    assert_eq!(requeued.next_at, t0() + secs(100));
    assert_eq!(
        requeued.first_sent_at, None,
        "an operator's retry starts the horizon again"
    );
    assert_eq!(requeued.claim, 1, "the claim counter stays");
    assert_eq!(requeued.finished_at, None);
    assert_eq!((requeued.calls, requeued.attempts), (1, 1));
    // Requeueing a job in flight takes it from its worker: the worker's record is refused.
    let d = store.requeue("d", t0() + secs(100)).await.unwrap().unwrap();
    assert_eq!(
        (d.state, d.lease_owner, d.lease_until),
        (JobState::Pending, None, None)
    );
    assert!(
        !store
            .record(
                d.id,
                d.claim,
                record(JobState::Accepted, t0() + secs(101), 1)
            )
            .await
            .unwrap()
    );
    assert_eq!(store.requeue("unknown", t0()).await.unwrap(), None);
    assert_eq!(store.counts().await.unwrap().pending, 3);
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn take_slot_grants_at_most_the_limit_across_8_concurrent_tasks() {
    let Some(db) = pg::database("take_slot").await else {
        return;
    };
    // Two stores, as two processes: up to eight transactions at once.
    let stores = [Arc::new(open(&db).await), Arc::new(open(&db).await)];
    let hold = secs(60);
    let mut tasks = Vec::new();
    for task in 0..8 {
        let store = Arc::clone(&stores[task % 2]);
        tasks.push(tokio::spawn(async move {
            let mut slots = Vec::new();
            for _ in 0..5 {
                slots.push(store.take_slot("trigger-1", 10, hold, t0()).await.unwrap());
            }
            slots
        }));
    }
    let mut granted = Vec::new();
    let mut refused = Vec::new();
    for task in tasks {
        for slot in task.await.unwrap() {
            match slot {
                Slot::Granted(id) => granted.push(id),
                Slot::FreeAt(at) => refused.push(at),
            }
        }
    }
    assert_eq!(
        granted.len(),
        10,
        "40 asked, at most 10 busy at once: {granted:?}"
    );
    assert_eq!(refused.len(), 30);
    assert!(refused.iter().all(|at| *at == t0() + hold), "{refused:?}");

    // Another scope has its own window.
    assert!(matches!(
        stores[0]
            .take_slot("trigger-2", 10, hold, t0())
            .await
            .unwrap(),
        Slot::Granted(_)
    ));

    // One answer came: its slot stays busy for the window from the answer, 5 s here.
    stores[0]
        .release_slot(granted[0], t0() + secs(5))
        .await
        .unwrap();
    assert_eq!(
        stores[1]
            .take_slot("trigger-1", 10, hold, t0() + secs(1))
            .await
            .unwrap(),
        Slot::FreeAt(t0() + secs(5)),
        "full until the first slot frees"
    );
    let Slot::Granted(_) = stores[1]
        .take_slot("trigger-1", 10, hold, t0() + secs(5))
        .await
        .unwrap()
    else {
        panic!("the released slot is free at its time")
    };
    assert!(matches!(
        stores[0]
            .take_slot("trigger-1", 10, hold, t0() + secs(5))
            .await
            .unwrap(),
        Slot::FreeAt(_)
    ));
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn migrations_run_once_under_4_concurrent_connects_and_again_on_reopen() {
    let Some(db) = pg::database("migrations").await else {
        return;
    };
    let mut opens = Vec::new();
    for _ in 0..4 {
        let url = db.url.clone();
        opens.push(tokio::spawn(
            async move { PostgresStore::connect(&url).await },
        ));
    }
    for open in opens {
        open.await
            .unwrap()
            .unwrap_or_else(|error| panic!("concurrent connect: {error}"));
    }
    let client = db.client().await;
    let versions = |rows: Vec<tokio_postgres::Row>| {
        rows.iter()
            .map(|row| row.get::<_, i32>(0))
            .collect::<Vec<_>>()
    };
    let query = "SELECT version FROM outbox_schema ORDER BY version";
    assert_eq!(
        versions(client.query(query, &[]).await.unwrap()),
        [1, 2, 3, 4, 5, 6, 7]
    );

    // Reopen: nothing to do, the data stays.
    let store = open(&db).await;
    store.enqueue(webhook("kept")).await.unwrap();
    drop(store);
    let store = open(&db).await;
    assert!(store.get("kept").await.unwrap().is_some());
    assert_eq!(
        versions(client.query(query, &[]).await.unwrap()),
        [1, 2, 3, 4, 5, 6, 7]
    );

    // A database migrated by a newer version is refused, not misread.
    client
        .execute("INSERT INTO outbox_schema (version) VALUES (99)", &[])
        .await
        .unwrap();
    let error = PostgresStore::connect(&db.url).await.unwrap_err();
    assert!(error.to_string().contains("schema version 99"), "{error}");
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_and_errors_never_show_the_password() {
    let Some(db) = pg::database("password").await else {
        return;
    };
    let store = PostgresStore::connect(&db.url_with_password("s3cret-pw"))
        .await
        .unwrap();
    let shown = format!("{store:?}");
    assert!(!shown.contains("s3cret-pw"), "{shown}");
    assert!(shown.contains("PostgresStore"), "{shown}");

    let error = PostgresStore::connect("postgres://outbox:s3cret-pw@127.0.0.1:1/outbox")
        .await
        .unwrap_err();
    assert_eq!(error.kind(), hodoflow_retry::ErrorKind::Transport);
    assert!(!error.to_string().contains("s3cret-pw"), "{error}");
    assert!(!format!("{error:?}").contains("s3cret-pw"), "{error:?}");
    db.drop_schema().await;
}

/// A keyset page is one range of an index, read in its order: `EXPLAIN` shows no sequential
/// scan and no sort, for the first page and for one after a cursor (the statement is the
/// store's `PAGE`, written out here: the store keeps it private). A final state's page reads
/// `outbox_jobs_page`; a pending one may read the claims' partial index on `(next_at, id)`
/// instead, as good a range for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_reads_one_range_of_the_page_index_and_sorts_nothing() {
    let Some(db) = pg::database("page_plan").await else {
        return;
    };
    let store = filled(&db, "plan").await;
    let (first, next) = store.list_page(None, None, 50).await.unwrap();
    assert_eq!(first.len(), 50);
    let next = next.expect("more pages");
    let (second, _) = store.list_page(None, Some(&next), 50).await.unwrap();
    assert!(second[0].id > first[49].id);
    let client = db.client().await;
    client.batch_execute("ANALYZE outbox_jobs").await.unwrap();
    for (state, next_at, id) in [
        ("pending", i64::MIN, i64::MIN),
        ("pending", 0, 10_000),
        ("failed", i64::MIN, i64::MIN),
        ("failed", 0, 10_000),
    ] {
        let plan = explain(
            &client,
            "SELECT * FROM outbox_jobs WHERE state = $1 AND (next_at, id) > ($2, $3) \
             ORDER BY next_at, id LIMIT $4",
            &[&state, &next_at, &id, &51_i64],
        )
        .await;
        let index = if state == "failed" {
            "Index Scan using outbox_jobs_page"
        } else {
            "Index Scan using outbox_jobs_"
        };
        assert!(plan.contains(index), "{plan}");
        assert!(!plan.contains("Seq Scan"), "{plan}");
        assert!(!plan.contains("Sort"), "{plan}");
    }
    db.drop_schema().await;
}

/// The jobs that may have run are counted as records mark them, from the counts the store
/// keeps: 3 of 20,000.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn may_have_run_counts_follow_the_records_that_mark_jobs() {
    let Some(db) = pg::database("may_have_run_counts").await else {
        return;
    };
    let store = filled(&db, "ran").await;
    let claimed = store.claim("w", t0(), secs(60), 3).await.unwrap();
    let marked = Record {
        may_have_run: true,
        ..record(JobState::Pending, t0(), 1)
    };
    let records = claimed
        .iter()
        .map(|job| (job.id, job.claim, marked.clone()))
        .collect();
    assert_eq!(store.record_many(records).await.unwrap(), [true; 3]);
    assert_eq!(store.may_have_run_counts().await.unwrap().pending, 3);
    assert_eq!(store.may_have_run_counts().await.unwrap().total(), 3);
    assert_eq!(store.counts().await.unwrap().pending, 20_000);
    db.drop_schema().await;
}

/// A store in `db` holding 20,000 pending webhook jobs, `<prefix>-00000` and on.
async fn filled(db: &pg::TestDb, prefix: &str) -> PostgresStore {
    let store = open(db).await;
    let jobs: Vec<NewJob> = (0..20_000)
        .map(|n| webhook(&format!("{prefix}-{n:05}")))
        .collect();
    store.enqueue_many(jobs).await.unwrap();
    store
}

/// The plan PostgreSQL chooses for `sql`, one line a node.
async fn explain(
    client: &tokio_postgres::Client,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> String {
    let rows = client
        .query(&format!("EXPLAIN {sql}"), params)
        .await
        .unwrap();
    let lines: Vec<String> = rows.iter().map(|row| row.get::<_, String>(0)).collect();
    lines.join("\n")
}
