//! The contract of a [`Store`], as checks any store runs: SQLite's and PostgreSQL's run them in
//! this crate's tests, and a store of your own runs them in its own.
//!
//! Each rule runs on a store of its own, opened empty by the caller's function, and calls the
//! store's methods directly with fixed times (no clock is read, nothing sleeps): what the
//! workers and the status page rely on, in the store's words. [`check`] returns the number of
//! rules held, or the first [`Violation`]. An event ID a store keeps is one
//! [`Outbox::check`](super::Outbox::check) accepts: a store refuses any other as invalid input,
//! a batch whole.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use hodoflow_outbox::{SqliteStore, conformance};
//!
//! let dir = std::env::temp_dir().join(format!("conformance-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let mut n = 0;
//! let held = conformance::check(|| {
//!     n += 1;
//!     let path = dir.join(format!("store-{n}.db"));
//!     async move { SqliteStore::open(path).await.expect("a store") }
//! })
//! .await?;
//! assert!(held >= 10);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::target::Target;
use hodoflow_retry::ErrorKind;
use hodoflow_retry::IdempotencyKey;

use super::MAX_SCOPE;
use super::job::{Job, JobState, NewJob, Outage, Pause, Probe, Record, ServiceOutage, Slot};
use super::page::Cursor;
use super::store::Store;

/// A rule of the contract a store broke: which, and what it did instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule, as named in this module.
    pub rule: &'static str,
    /// What the store did.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the store breaks {}: {}", self.rule, self.detail)
    }
}

impl std::error::Error for Violation {}

/// What a rule finds: nothing, or what broke it.
type Held = Result<(), String>;

/// Fails the rule with a message unless `cond`.
macro_rules! ensure {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err(format!($($why)+));
        }
    };
}

/// A store's error as a rule's failure.
fn failed(what: &str) -> impl FnOnce(hodoflow_retry::Error) -> String + '_ {
    move |error| format!("{what} failed: {error}")
}

/// Runs every rule of the contract, each on a store `fresh` opens empty; the number of rules
/// held, or the first one broken.
///
/// # Errors
///
/// The first [`Violation`]: the rule and what the store did.
pub async fn check<S, F, Fut>(mut fresh: F) -> Result<usize, Violation>
where
    S: Store,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    let mut held = 0;
    macro_rules! rules {
        ($($rule:ident),+ $(,)?) => {
            $(
                let store = fresh().await;
                $rule(&store).await.map_err(|detail| Violation {
                    rule: stringify!($rule),
                    detail,
                })?;
                held += 1;
            )+
        };
    }
    rules!(
        an_event_is_stored_once,
        a_batch_is_stored_in_order_repeats_changing_nothing,
        a_batch_with_an_event_no_store_keeps_stores_nothing,
        a_claim_takes_each_due_job_once_oldest_first,
        a_record_is_written_only_under_its_claim,
        counts_and_due_read_every_job,
        a_requeue_makes_a_job_due_again_and_forgets_its_first_send,
        may_have_run_is_never_cleared,
        a_pause_is_never_shortened,
        the_latest_stated_window_wins,
        a_window_grants_at_most_its_limit,
        a_service_is_down_for_every_worker_until_one_finds_it_up,
        outages_list_every_service_down_by_scope,
        pages_list_every_job_once_in_order,
        the_backlog_counts_the_jobs_not_final,
    );
    Ok(held)
}

/// A fixed time of the rules: `seconds` after a moment in 2023.
fn at(seconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000 + seconds)
}

/// A write job of `event_id`, due at `now`.
fn job(event_id: &str, body: &'static str, now: SystemTime) -> NewJob {
    NewJob {
        event_id: event_id.to_owned(),
        target: Target::create("/api/json/v1/things"),
        body: Bytes::from_static(body.as_bytes()),
        identity: IdempotencyKey::from_operation_id(event_id),
        now,
    }
}

/// A record of a finished call in `state` at `now`, of one attempt.
fn record(state: JobState, now: SystemTime) -> Record {
    let last = matches!(state, JobState::Pending | JobState::InFlight);
    Record {
        state,
        next_at: now,
        attempts_added: 1,
        first_sent_at: Some(now),
        run_id: None,
        last_error: None,
        finished_at: (!last).then_some(now),
        may_have_run: false,
    }
}

/// Stores `new`: the job as stored, and whether it was inserted now.
async fn put(store: &dyn Store, new: NewJob) -> Result<(Job, bool), String> {
    store.enqueue(new).await.map_err(failed("enqueue"))
}

/// Claims up to `limit` jobs due at `now` for `worker` under `lease`.
async fn claim(
    store: &dyn Store,
    worker: &str,
    now: SystemTime,
    lease: Duration,
    limit: usize,
) -> Result<Vec<Job>, String> {
    store
        .claim(worker, now, lease, limit)
        .await
        .map_err(failed("claim"))
}

async fn stored(store: &dyn Store, event_id: &str) -> Result<Job, String> {
    store
        .get(event_id)
        .await
        .map_err(failed("get"))?
        .ok_or_else(|| format!("{event_id} is not found"))
}

async fn an_event_is_stored_once(store: &dyn Store) -> Held {
    let (first, new) = put(store, job("e-1", "one", at(0))).await?;
    ensure!(new, "a new event is not reported inserted");
    ensure!(
        first.state == JobState::Pending && first.next_at == at(0) && first.body == "one",
        "a new job is not pending, due at its creation, with its body: {first:?}"
    );
    ensure!(
        first.attempts == 0 && first.calls == 0 && first.claim == 0 && !first.may_have_run,
        "a new job has calls or claims: {first:?}"
    );
    let (again, new) = put(store, job("e-1", "two", at(1))).await?;
    ensure!(!new, "a repeated event is reported inserted");
    ensure!(
        again.id == first.id && again.body == "one",
        "a repeated event changed the stored job: {again:?}"
    );
    ensure!(
        stored(store, "e-1").await? == first,
        "get returns another job than enqueue did"
    );
    let missing = store.get("e-2").await.map_err(failed("get"))?;
    ensure!(missing.is_none(), "get finds a job never stored");
    Ok(())
}

async fn a_batch_is_stored_in_order_repeats_changing_nothing(store: &dyn Store) -> Held {
    put(store, job("a", "a", at(0))).await?;
    // A time between two milliseconds: a store that keeps milliseconds returns what it kept.
    let now = at(1) + Duration::from_micros(1_500);
    let batch = ["b", "a", "c", "b"]
        .map(|id| job(id, "batch", now))
        .to_vec();
    let answered = store
        .enqueue_many(batch)
        .await
        .map_err(failed("enqueue_many"))?;
    let shape: Vec<(&str, bool)> = answered
        .iter()
        .map(|(job, new)| (job.event_id.as_str(), *new))
        .collect();
    ensure!(
        shape == [("b", true), ("a", false), ("c", true), ("b", false)],
        "enqueue_many answers {shape:?}"
    );
    ensure!(
        answered[1].0.body == "a",
        "a repeat in a batch changed the stored job"
    );
    for (job, _) in &answered {
        ensure!(
            stored(store, &job.event_id).await? == *job,
            "enqueue_many answered {job:?}, not the job stored"
        );
    }
    let counts = store.counts().await.map_err(failed("counts"))?;
    ensure!(counts.pending == 3 && counts.total() == 3, "{counts:?}");
    Ok(())
}

async fn a_batch_with_an_event_no_store_keeps_stores_nothing(store: &dyn Store) -> Held {
    let batch = vec![job("fine", "x", at(0)), job("nul\0inside", "x", at(0))];
    let refused = store.enqueue_many(batch).await;
    ensure!(
        refused.is_err_and(|error| error.kind() == ErrorKind::InvalidInput),
        "a batch holding an event ID with a NUL is not refused as invalid input"
    );
    let stored = store.get("fine").await.map_err(failed("get"))?;
    ensure!(stored.is_none(), "a refused batch stored its first job");
    let counts = store.counts().await.map_err(failed("counts"))?;
    ensure!(counts.total() == 0, "a refused batch left {counts:?}");
    Ok(())
}

async fn a_claim_takes_each_due_job_once_oldest_first(store: &dyn Store) -> Held {
    for (n, id) in ["j1", "j2", "j3"].into_iter().enumerate() {
        put(store, job(id, "x", at(n as u64))).await?;
    }
    put(store, job("later", "x", at(60))).await?;
    let lease = Duration::from_secs(30);
    let first = claim(store, "w1", at(10), lease, 2).await?;
    let ids: Vec<&str> = first.iter().map(|job| job.event_id.as_str()).collect();
    ensure!(
        ids == ["j1", "j2"],
        "a claim of 2 takes {ids:?}, not the 2 due longest"
    );
    ensure!(
        first.iter().all(|job| job.state == JobState::InFlight
            && job.lease_owner.as_deref() == Some("w1")
            && job.lease_until == Some(at(40))
            && job.claim == 1),
        "a claimed job is not in flight under its worker's lease: {first:?}"
    );
    let second = claim(store, "w2", at(10), lease, 10).await?;
    let ids: Vec<&str> = second.iter().map(|job| job.event_id.as_str()).collect();
    ensure!(ids == ["j3"], "a second claim takes {ids:?}");
    let none = claim(store, "w3", at(20), lease, 10).await?;
    ensure!(
        none.is_empty(),
        "a claim takes jobs under a live lease or not due"
    );
    let reclaimed = claim(store, "w4", at(41), lease, 10).await?;
    let mut ids: Vec<&str> = reclaimed.iter().map(|job| job.event_id.as_str()).collect();
    ids.sort_unstable();
    ensure!(
        ids == ["j1", "j2", "j3"],
        "after their leases end, a claim takes {ids:?}"
    );
    ensure!(
        reclaimed.iter().all(|job| job.claim == 2),
        "a reclaimed job's claim count did not rise: {reclaimed:?}"
    );
    Ok(())
}

async fn a_record_is_written_only_under_its_claim(store: &dyn Store) -> Held {
    put(store, job("r", "x", at(0))).await?;
    let claimed = claim(store, "w", at(1), Duration::from_secs(30), 1).await?;
    let [claimed] = claimed.as_slice() else {
        return Err(format!("a claim of one due job took {}", claimed.len()));
    };
    let stale = store
        .record(claimed.id, claimed.claim + 1, record(JobState::Done, at(2)))
        .await
        .map_err(failed("record"))?;
    ensure!(!stale, "a record under another claim is written");
    let mut again_later = record(JobState::Pending, at(2));
    again_later.next_at = at(100);
    let written = store
        .record(claimed.id, claimed.claim, again_later)
        .await
        .map_err(failed("record"))?;
    ensure!(written, "a record under its claim is refused");
    let job = stored(store, "r").await?;
    ensure!(
        job.state == JobState::Pending
            && job.next_at == at(100)
            && job.attempts == 1
            // The first claim sent it first; a record never moves that.
            && job.first_sent_at == Some(at(1))
            && job.lease_owner.is_none(),
        "a rescheduled job reads {job:?}, first sent {:?}, leased by {:?}",
        job.first_sent_at,
        job.lease_owner
    );
    let late = store
        .record(claimed.id, claimed.claim, record(JobState::Done, at(3)))
        .await
        .map_err(failed("record"))?;
    ensure!(!late, "a second record of one claim is written");
    let claimed = claim(store, "w", at(100), Duration::from_secs(30), 1).await?;
    let ids: Vec<(i64, u64)> = claimed.iter().map(|job| (job.id, job.claim)).collect();
    let many = store
        .record_many(vec![
            (ids[0].0, ids[0].1, record(JobState::Done, at(101))),
            (ids[0].0, ids[0].1 + 7, record(JobState::Failed, at(101))),
        ])
        .await
        .map_err(failed("record_many"))?;
    ensure!(many == [true, false], "record_many answers {many:?}");
    let job = stored(store, "r").await?;
    ensure!(
        job.state == JobState::Done && job.finished_at == Some(at(101)) && job.attempts == 2,
        "a finished job reads {job:?}"
    );
    Ok(())
}

async fn counts_and_due_read_every_job(store: &dyn Store) -> Held {
    for (id, due) in [("d1", 0), ("d2", 0), ("d3", 100)] {
        put(store, job(id, "x", at(due))).await?;
    }
    let taken = claim(store, "w", at(1), Duration::from_secs(30), 1).await?;
    ensure!(taken.len() == 1, "a claim of one took {}", taken.len());
    let counts = store.counts().await.map_err(failed("counts"))?;
    ensure!(
        counts.pending == 2 && counts.in_flight == 1 && counts.total() == 3,
        "{counts:?}"
    );
    let due = store.due(at(1), None).await.map_err(failed("due"))?;
    ensure!(
        due.due == 1 && due.in_flight == 1 && due.next_at == Some(at(0)),
        "due at 1 s reads {due:?}"
    );
    let only = store
        .due(at(1), Some(vec!["d3".to_owned()].into()))
        .await
        .map_err(failed("due"))?;
    ensure!(
        only.due == 0 && only.in_flight == 0 && only.next_at == Some(at(100)),
        "due of one event reads {only:?}"
    );
    let oldest = store
        .oldest_due(at(1))
        .await
        .map_err(failed("oldest_due"))?;
    ensure!(
        oldest == Some(at(0)),
        "the oldest due job is due since {oldest:?}"
    );
    Ok(())
}

async fn a_requeue_makes_a_job_due_again_and_forgets_its_first_send(store: &dyn Store) -> Held {
    put(store, job("q", "x", at(0))).await?;
    let claimed = claim(store, "w", at(1), Duration::from_secs(30), 1).await?;
    let claimed = claimed.first().ok_or("a due job was not claimed")?;
    store
        .record(claimed.id, claimed.claim, record(JobState::Failed, at(2)))
        .await
        .map_err(failed("record"))?;
    let requeued = store
        .requeue("q", at(50))
        .await
        .map_err(failed("requeue"))?;
    let requeued = requeued.ok_or("requeue finds no job")?;
    ensure!(
        requeued.state == JobState::Pending
            && requeued.next_at == at(50)
            && requeued.first_sent_at.is_none(),
        "a requeued job reads {requeued:?}"
    );
    let missing = store
        .requeue("none", at(50))
        .await
        .map_err(failed("requeue"))?;
    ensure!(missing.is_none(), "requeue of no job finds one");
    Ok(())
}

async fn may_have_run_is_never_cleared(store: &dyn Store) -> Held {
    put(store, job("m", "x", at(0))).await?;
    for (n, may_have_run) in [true, false].into_iter().enumerate() {
        let now = at(10 * (n as u64 + 1));
        let claimed = claim(store, "w", now, Duration::from_secs(5), 1).await?;
        let claimed = claimed.first().ok_or("a due job was not claimed")?;
        let mut rescheduled = record(JobState::Pending, now);
        rescheduled.may_have_run = may_have_run;
        store
            .record(claimed.id, claimed.claim, rescheduled)
            .await
            .map_err(failed("record"))?;
        let counts = store
            .may_have_run_counts()
            .await
            .map_err(failed("may_have_run_counts"))?;
        ensure!(
            counts.pending == 1 && counts.total() == 1,
            "after a record with may_have_run {may_have_run}: {counts:?}"
        );
    }
    ensure!(
        stored(store, "m").await?.may_have_run,
        "a later record cleared may_have_run"
    );
    Ok(())
}

async fn a_pause_is_never_shortened(store: &dyn Store) -> Held {
    let pause = |scope: &'static str, until: u64, why: &'static str| async move {
        store
            .pause(scope, at(until), why, at(0))
            .await
            .map_err(failed("pause"))
    };
    pause("s", 60, "first").await?;
    pause("s", 30, "second").await?;
    let until = store
        .paused_until("s", at(0))
        .await
        .map_err(failed("paused_until"))?;
    ensure!(
        until == Some(at(60)),
        "a shorter pause changed the end to {until:?}"
    );
    let pauses = store.pauses(at(0)).await.map_err(failed("pauses"))?;
    ensure!(
        pauses == [Pause::new("s", at(60), "first")],
        "pauses reads {pauses:?}"
    );
    pause("s", 90, "third").await?;
    pause("r", 20, "other").await?;
    let pauses = store.pauses(at(0)).await.map_err(failed("pauses"))?;
    ensure!(
        pauses
            == [
                Pause::new("r", at(20), "other"),
                Pause::new("s", at(90), "third")
            ],
        "a longer pause, and a second scope, read {pauses:?}"
    );
    let ended = store
        .paused_until("s", at(100))
        .await
        .map_err(failed("paused_until"))?;
    ensure!(ended.is_none(), "an ended pause still holds: {ended:?}");
    ensure!(
        store
            .pauses(at(100))
            .await
            .map_err(failed("pauses"))?
            .is_empty(),
        "ended pauses are listed"
    );
    let long = "x".repeat(MAX_SCOPE + 1);
    for scope in ["", long.as_str()] {
        let refused = store.pause(scope, at(10), "why", at(0)).await;
        ensure!(
            refused.is_err_and(|error| error.kind() == ErrorKind::InvalidInput),
            "a scope of {} bytes is not refused",
            scope.len()
        );
    }
    Ok(())
}

async fn the_latest_stated_window_wins(store: &dyn Store) -> Held {
    let none = store.window("w").await.map_err(failed("window"))?;
    ensure!(none.is_none(), "a window never stated reads {none:?}");
    let learn = |requests: u32, per: u64, now: u64| async move {
        store
            .learn_window("w", requests, Duration::from_secs(per), at(now))
            .await
            .map_err(failed("learn_window"))
    };
    learn(10, 60, 10).await?;
    learn(5, 1, 0).await?;
    let window = store.window("w").await.map_err(failed("window"))?;
    ensure!(
        window == Some((10, Duration::from_secs(60))),
        "an earlier reading replaced a later one: {window:?}"
    );
    learn(7, 2, 20).await?;
    let window = store.window("w").await.map_err(failed("window"))?;
    ensure!(
        window == Some((7, Duration::from_secs(2))),
        "a later reading was not kept: {window:?}"
    );
    let refused = store
        .learn_window("w", 0, Duration::from_secs(1), at(30))
        .await;
    ensure!(
        refused.is_err_and(|error| error.kind() == ErrorKind::InvalidInput),
        "a window of no request is not refused"
    );
    Ok(())
}

async fn a_window_grants_at_most_its_limit(store: &dyn Store) -> Held {
    let hold = Duration::from_secs(10);
    let mut granted = Vec::new();
    for _ in 0..2 {
        match store
            .take_slot("w", 2, hold, at(0))
            .await
            .map_err(failed("take_slot"))?
        {
            Slot::Granted(id) => granted.push(id),
            full => {
                return Err(format!(
                    "a window of 2 refused a first or second slot: {full:?}"
                ));
            }
        }
    }
    let full = store
        .take_slot("w", 2, hold, at(1))
        .await
        .map_err(failed("take_slot"))?;
    ensure!(
        matches!(full, Slot::FreeAt(free) if free > at(1) && free <= at(10)),
        "a third slot of a window of 2 reads {full:?}"
    );
    store
        .release_slot(granted[0], at(2))
        .await
        .map_err(failed("release_slot"))?;
    let freed = store
        .take_slot("w", 2, hold, at(3))
        .await
        .map_err(failed("take_slot"))?;
    ensure!(
        matches!(freed, Slot::Granted(_)),
        "a slot released to 2 s is not free at 3 s: {freed:?}"
    );
    let other = store
        .take_slot("v", 1, hold, at(3))
        .await
        .map_err(failed("take_slot"))?;
    ensure!(
        matches!(other, Slot::Granted(_)),
        "another scope's window is full: {other:?}"
    );
    Ok(())
}

async fn a_service_is_down_for_every_worker_until_one_finds_it_up(store: &dyn Store) -> Held {
    let outage = || async move { store.outage("s").await.map_err(failed("outage")) };
    let down = |since: u64, now: u64| async move {
        store
            .service_down("s", at(since), at(now))
            .await
            .map_err(failed("service_down"))
    };
    let probe = |next: u64, now: u64| async move {
        store
            .take_probe("s", at(next), at(now))
            .await
            .map_err(failed("take_probe"))
    };
    let none = outage().await?;
    ensure!(none.is_none(), "a service never found down reads {none:?}");
    let up = probe(11, 10).await?;
    ensure!(
        up == Probe::Up,
        "a service never found down gives a probe's turn: {up:?}"
    );
    down(8, 10).await?;
    down(5, 12).await?;
    let held = outage().await?;
    ensure!(
        held == Some(Outage::new(at(5), at(10))),
        "down since 8 and 5, found at 10 and 12, reads {held:?} (the earliest onset, the first probe at once)"
    );
    let granted = probe(13, 12).await?;
    ensure!(
        granted == Probe::Granted,
        "the first probe's turn reads {granted:?}"
    );
    let taken = probe(14, 12).await?;
    ensure!(
        taken == Probe::NotBefore(at(13)),
        "a second turn before the next probe's time reads {taken:?}"
    );
    let other = store.outage("t").await.map_err(failed("outage"))?;
    ensure!(other.is_none(), "another service is down: {other:?}");
    store
        .service_up("s", at(11))
        .await
        .map_err(failed("service_up"))?;
    let still = outage().await?;
    ensure!(
        still.is_some(),
        "an answer accepted at 11 ended an outage found at 12"
    );
    store
        .service_up("s", at(20))
        .await
        .map_err(failed("service_up"))?;
    let ended = outage().await?;
    ensure!(ended.is_none(), "an answer accepted at 20 left {ended:?}");
    let up = probe(21, 20).await?;
    ensure!(
        up == Probe::Up,
        "a service found up gives a probe's turn: {up:?}"
    );
    down(5, 19).await?;
    let stale = outage().await?;
    ensure!(
        stale.is_none(),
        "a refusal heard at 19 took down a service found up at 20: {stale:?}"
    );
    down(5, 30).await?;
    let again = outage().await?;
    ensure!(
        again == Some(Outage::new(at(5), at(30))),
        "a refusal heard at 30 after an accept at 20 reads {again:?}"
    );
    Ok(())
}

async fn outages_list_every_service_down_by_scope(store: &dyn Store) -> Held {
    let outages = || async move { store.outages().await.map_err(failed("outages")) };
    let none = outages().await?;
    ensure!(none.is_empty(), "no service found down lists {none:?}");
    for (scope, since, now) in [("s", 5, 10), ("r", 7, 8)] {
        store
            .service_down(scope, at(since), at(now))
            .await
            .map_err(failed("service_down"))?;
    }
    let listed = outages().await?;
    ensure!(
        listed
            == [
                ServiceOutage::new("r", Outage::new(at(7), at(8))),
                ServiceOutage::new("s", Outage::new(at(5), at(10))),
            ],
        "two services found down list {listed:?} (by scope, each with its onset and first probe)"
    );
    store
        .service_up("s", at(9))
        .await
        .map_err(failed("service_up"))?;
    let still = outages().await?;
    ensure!(
        still.len() == 2,
        "an answer accepted at 9 ended an outage found at 10: {still:?}"
    );
    store
        .service_up("s", at(20))
        .await
        .map_err(failed("service_up"))?;
    let left = outages().await?;
    ensure!(
        left == [ServiceOutage::new("r", Outage::new(at(7), at(8)))],
        "an answer accepted at 20 left {left:?}"
    );
    Ok(())
}

async fn pages_list_every_job_once_in_order(store: &dyn Store) -> Held {
    const JOBS: u64 = 25;
    for n in 0..JOBS {
        // Two jobs per instant: the ID orders them.
        put(store, job(&format!("p-{n:02}"), "x", at(n / 2))).await?;
    }
    let taken = claim(store, "w", at(100), Duration::from_secs(30), 5).await?;
    ensure!(taken.len() == 5, "a claim of 5 took {}", taken.len());
    let mut seen = Vec::new();
    let mut after: Option<Cursor> = None;
    loop {
        let (page, next) = store
            .list_page(None, after.as_ref(), 10)
            .await
            .map_err(failed("list_page"))?;
        ensure!(page.len() <= 10, "a page of 10 holds {}", page.len());
        seen.extend(page.iter().map(|job| (job.state, job.next_at, job.id)));
        match next {
            Some(cursor) => after = Some(cursor),
            None => break,
        }
        ensure!(seen.len() <= JOBS as usize, "the pages never end");
    }
    let mut sorted = seen.clone();
    sorted.sort_by_key(|&(state, next_at, id)| (state as u8, next_at, id));
    sorted.dedup();
    ensure!(
        seen.len() == JOBS as usize && seen == sorted,
        "the pages list {} jobs, not each once in (state, next_at, id) order",
        seen.len()
    );
    let pending = store
        .list_page(Some(JobState::Pending), None, 100)
        .await
        .map_err(failed("list_page"))?;
    ensure!(
        pending.0.len() == 20 && pending.1.is_none(),
        "the pending page lists {} jobs",
        pending.0.len()
    );
    let listed = store
        .list(Some(JobState::InFlight), 100)
        .await
        .map_err(failed("list"))?;
    ensure!(
        listed.len() == 5,
        "list of in-flight jobs lists {}",
        listed.len()
    );
    Ok(())
}

async fn the_backlog_counts_the_jobs_not_final(store: &dyn Store) -> Held {
    put(store, job("b1", "x", at(0))).await?;
    put(store, job("b2", "x", at(10))).await?;
    let claimed = claim(store, "w", at(20), Duration::from_secs(30), 2).await?;
    let first = claimed
        .iter()
        .find(|job| job.event_id == "b1")
        .ok_or("b1 was not claimed")?;
    store
        .record(first.id, first.claim, record(JobState::Done, at(30)))
        .await
        .map_err(failed("record"))?;
    let backlog = store
        .backlog(at(5), Duration::from_secs(10), 4)
        .await
        .map_err(failed("backlog"))?;
    ensure!(
        backlog == [1, 2, 2, 1],
        "the backlog at 5, 15, 25 and 35 s reads {backlog:?}"
    );
    Ok(())
}
