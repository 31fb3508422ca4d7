//! The SQLite store: one file, in WAL mode, the embedded default.
//!
//! One connection per store, behind a mutex, each statement run on tokio's blocking pool: SQLite
//! has one writer at a time anyway, and a single connection makes every statement of this
//! process atomic with respect to the others. Processes sharing the file (a worker restarted
//! after a crash, or two on one machine) are kept apart by SQLite's own locks: every write is a
//! `BEGIN IMMEDIATE` transaction, and a busy file is waited for (`busy_timeout`) rather than
//! failed. WAL lets readers (`status`, `list`) run while a worker writes.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use hodoflow_retry::IdempotencyKey;
use hodoflow_retry::{Error, ErrorKind, Result};

use super::job::{
    Counts, Due, Job, JobState, LastError, NewJob, Outage, Pause, Probe, Record, ServiceOutage,
    Slot, Target,
};
use super::page::{Cursor, page_of, walk};
use super::store::{Store, StoreFuture, second_of};
use super::wake::{Waker, Wakeups};
use super::{
    check_record, check_scope, claim_bounds, from_millis, millis, pause_reason, stored_millis,
    window_of, window_row,
};

/// How long a statement waits for another process's lock on the file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The migrations, in order; `outbox_schema` records how many ran.
const MIGRATIONS: &[&str] = &[
    r#"
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
"#,
    r#"
    UPDATE outbox_jobs SET next_at = lease_until WHERE state = 'in_flight';
    CREATE INDEX outbox_jobs_claimable ON outbox_jobs (next_at, id)
        WHERE state IN ('pending', 'in_flight');
"#,
    // Scopes and ambiguity (store.rs): the job's sticky mark, a pause's reason, the windows'
    // stated limits. Added columns with a constant default: no row is rewritten.
    r#"
    ALTER TABLE outbox_jobs ADD COLUMN may_have_run INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX outbox_jobs_may_have_run ON outbox_jobs (state) WHERE may_have_run;
    ALTER TABLE outbox_pauses ADD COLUMN why TEXT NOT NULL DEFAULT '';
    CREATE TABLE outbox_windows (
        scope      TEXT PRIMARY KEY,
        requests   INTEGER NOT NULL,
        per_ms     INTEGER NOT NULL,
        learned_at INTEGER NOT NULL
    );
"#,
    // Jobs by state, kept as they change (the status page and the metrics read them without
    // a scan): one row per state and mark, made for every state first, so the counting only
    // adds and takes away. SQLite writes one transaction at a time, so a shared row holds no
    // one up. A new job is counted by `enqueue_many`, once per batch (`COUNT_ENQUEUED`): a
    // trigger per inserted row cost two thirds of the enqueue rate. A change of state is
    // counted by the triggers.
    r#"
    CREATE TABLE outbox_counts (
        state        TEXT NOT NULL,
        may_have_run INTEGER NOT NULL,
        jobs         INTEGER NOT NULL,
        PRIMARY KEY (state, may_have_run)
    ) WITHOUT ROWID;
    INSERT INTO outbox_counts (state, may_have_run, jobs)
        SELECT s.state, m.mark, 0
        FROM (SELECT 'pending' AS state UNION ALL SELECT 'in_flight' UNION ALL SELECT 'accepted'
              UNION ALL SELECT 'duplicate' UNION ALL SELECT 'done' UNION ALL SELECT 'failed'
              UNION ALL SELECT 'needs_reconciliation') AS s,
             (SELECT 0 AS mark UNION ALL SELECT 1) AS m;
    INSERT OR IGNORE INTO outbox_counts (state, may_have_run, jobs)
        SELECT DISTINCT state, may_have_run != 0, 0 FROM outbox_jobs;
    UPDATE outbox_counts SET jobs = (
        SELECT COUNT(*) FROM outbox_jobs
        WHERE outbox_jobs.state = outbox_counts.state
          AND (outbox_jobs.may_have_run != 0) = outbox_counts.may_have_run);
    CREATE TRIGGER outbox_counts_update AFTER UPDATE OF state, may_have_run ON outbox_jobs
        WHEN OLD.state IS NOT NEW.state OR (OLD.may_have_run != 0) IS NOT (NEW.may_have_run != 0)
    BEGIN
        UPDATE outbox_counts SET jobs = jobs - 1
        WHERE state = OLD.state AND may_have_run = (OLD.may_have_run != 0);
        UPDATE outbox_counts SET jobs = jobs + 1
        WHERE state = NEW.state AND may_have_run = (NEW.may_have_run != 0);
    END;
    CREATE TRIGGER outbox_counts_delete AFTER DELETE ON outbox_jobs BEGIN
        UPDATE outbox_counts SET jobs = jobs - 1
        WHERE state = OLD.state AND may_have_run = (OLD.may_have_run != 0);
    END;
    -- The backlog chart's history, by second (a time's second is its milliseconds rounded
    -- up): jobs created, and jobs finished (final with a finish time). The backlog at a whole
    -- second is the jobs not finished now, less those created after it, plus those finished
    -- after it: an hour is 3,600 rows at most, however many jobs. New jobs are counted by
    -- `enqueue_many` (`BACKLOG_ENQUEUED`), finishes by the triggers.
    CREATE TABLE outbox_backlog (
        second   INTEGER PRIMARY KEY,
        entered  INTEGER NOT NULL,
        finished INTEGER NOT NULL
    );
    INSERT INTO outbox_backlog (second, entered, finished)
        SELECT second, SUM(entered), SUM(finished)
        FROM (SELECT (created_at + 999) / 1000 AS second, 1 AS entered, 0 AS finished
              FROM outbox_jobs
              UNION ALL
              SELECT (finished_at + 999) / 1000, 0, 1 FROM outbox_jobs
              WHERE state NOT IN ('pending', 'in_flight') AND finished_at IS NOT NULL)
        GROUP BY second;
    CREATE INDEX outbox_jobs_final_unfinished ON outbox_jobs (id)
        WHERE state NOT IN ('pending', 'in_flight') AND finished_at IS NULL;
    CREATE TRIGGER outbox_backlog_update AFTER UPDATE OF state, finished_at ON outbox_jobs BEGIN
        UPDATE outbox_backlog SET finished = finished - 1
        WHERE second = (OLD.finished_at + 999) / 1000
          AND OLD.state NOT IN ('pending', 'in_flight') AND OLD.finished_at IS NOT NULL;
        INSERT INTO outbox_backlog (second, entered, finished)
            SELECT (NEW.finished_at + 999) / 1000, 0, 1
            WHERE NEW.state NOT IN ('pending', 'in_flight') AND NEW.finished_at IS NOT NULL
            ON CONFLICT (second) DO UPDATE SET finished = finished + 1;
    END;
    CREATE TRIGGER outbox_backlog_delete AFTER DELETE ON outbox_jobs BEGIN
        UPDATE outbox_backlog SET entered = entered - 1
        WHERE second = (OLD.created_at + 999) / 1000;
        UPDATE outbox_backlog SET finished = finished - 1
        WHERE second = (OLD.finished_at + 999) / 1000
          AND OLD.state NOT IN ('pending', 'in_flight') AND OLD.finished_at IS NOT NULL;
    END;
"#,
    // Services the fleet holds down (store.rs: `outage`, `service_down`, `service_up`,
    // `take_probe`): one row a service, its onset while down, when it was last found down and up, and
    // the earliest the fleet's next probe may go.
    r#"
    CREATE TABLE outbox_services (
        scope         TEXT PRIMARY KEY,
        down_since_ms INTEGER,
        down_at_ms    INTEGER NOT NULL,
        up_at_ms      INTEGER NOT NULL,
        probe_at_ms   INTEGER NOT NULL
    );
"#,
];

/// `?1` scope, `?2` onset, `?3` now: down unless found up at or after now, since the
/// earliest onset; a new outage's first probe may go at once.
const SERVICE_DOWN: &str = "INSERT INTO outbox_services \
    (scope, down_since_ms, down_at_ms, up_at_ms, probe_at_ms) \
    VALUES (?1, ?2, ?3, 0, ?3) ON CONFLICT (scope) DO UPDATE SET \
    probe_at_ms = CASE WHEN down_since_ms IS NULL AND up_at_ms < excluded.down_at_ms \
        THEN excluded.probe_at_ms ELSE probe_at_ms END, \
    down_since_ms = CASE \
        WHEN down_since_ms IS NOT NULL THEN MIN(down_since_ms, excluded.down_since_ms) \
        WHEN up_at_ms < excluded.down_at_ms THEN excluded.down_since_ms END, \
    down_at_ms = MAX(down_at_ms, excluded.down_at_ms)";

/// `?1` scope, `?2` now: up unless found down after now.
const SERVICE_UP: &str = "INSERT INTO outbox_services \
    (scope, down_since_ms, down_at_ms, up_at_ms, probe_at_ms) \
    VALUES (?1, NULL, 0, ?2, 0) ON CONFLICT (scope) DO UPDATE SET \
    down_since_ms = CASE WHEN down_at_ms > excluded.up_at_ms THEN down_since_ms END, \
    up_at_ms = MAX(up_at_ms, excluded.up_at_ms)";

/// The columns of a job, in the order [`job_of`] reads them.
const COLUMNS: &str = "id, event_id, kind, method, route, body, identity, state, calls, attempts, \
    next_at, created_at, first_sent_at, finished_at, lease_owner, lease_until, claim, run_id, \
    last_kind, last_status, last_request_id, last_message, may_have_run";

/// `?1` worker, `?2` lease end, `?3` now, `?4` limit, `?5` the latest lease end a worker can
/// hold (now plus `MAX_LEASE`): the due jobs are one range of the partial index
/// `outbox_jobs_claimable`, read in order, and a job in flight under a lease ending past `?5`
/// was wedged by a lease no worker can hold, so it is due too.
const CLAIM: &str = "UPDATE outbox_jobs SET state = 'in_flight', lease_owner = ?1, \
    lease_until = ?2, next_at = ?2, claim = claim + 1, \
    first_sent_at = COALESCE(first_sent_at, ?3) \
    WHERE id IN (SELECT id FROM outbox_jobs INDEXED BY outbox_jobs_claimable \
        WHERE state IN ('pending', 'in_flight') \
        AND (next_at <= ?3 OR (state = 'in_flight' AND next_at > ?5)) \
        ORDER BY next_at, id LIMIT ?4) \
    RETURNING id, event_id, kind, method, route, body, identity, state, calls, attempts, \
    next_at, created_at, first_sent_at, finished_at, lease_owner, lease_until, claim, run_id, \
    last_kind, last_status, last_request_id, last_message, may_have_run";

/// `?1` now: the pending jobs due, the jobs in flight, the next due time; each a range of an
/// index (`outbox_jobs_due` for the counts, `outbox_jobs_claimable` for the minimum).
const DUE: &str = "SELECT \
    (SELECT COUNT(*) FROM outbox_jobs WHERE state = 'pending' AND next_at <= ?1), \
    (SELECT COUNT(*) FROM outbox_jobs WHERE state = 'in_flight'), \
    (SELECT MIN(next_at) FROM outbox_jobs WHERE state IN ('pending', 'in_flight'))";

/// [`DUE`] among the jobs of the event IDs of the JSON array `?2`, each found by its unique
/// index.
const DUE_AMONG: &str = "SELECT \
    SUM(state = 'pending' AND next_at <= ?1), SUM(state = 'in_flight'), \
    MIN(CASE WHEN state IN ('pending', 'in_flight') THEN next_at END) \
    FROM outbox_jobs WHERE event_id IN (SELECT value FROM json_each(?2))";

/// `?1` state, `?2` and `?3` the `(next_at, id)` to read after, `?4` limit: one range of
/// `outbox_jobs_due` on `(state, next_at)`, whose entries end in the rowid (the job's ID), so
/// the order is the index's and no sort runs (`EXPLAIN QUERY PLAN`, checked in the tests below).
const PAGE: &str = "SELECT id, event_id, kind, method, route, body, identity, state, calls, \
    attempts, next_at, created_at, first_sent_at, finished_at, lease_owner, lease_until, claim, \
    run_id, last_kind, last_status, last_request_id, last_message, may_have_run \
    FROM outbox_jobs WHERE state = ?1 AND (next_at, id) > (?2, ?3) \
    ORDER BY next_at, id LIMIT ?4";

/// `?1` id, `?2` claim, then the record's fields.
const RECORD: &str = "UPDATE outbox_jobs SET state = ?3, next_at = ?4, \
    attempts = attempts + ?5, calls = calls + 1, \
    first_sent_at = COALESCE(first_sent_at, ?6), run_id = ?7, \
    last_kind = ?8, last_status = ?9, last_request_id = ?10, last_message = ?11, \
    finished_at = ?12, lease_owner = NULL, lease_until = NULL, \
    may_have_run = may_have_run OR ?13 \
    WHERE id = ?1 AND claim = ?2 AND state = 'in_flight'";

/// Writes one record with the cached [`RECORD`] statement.
fn write_record(
    connection: &Connection,
    id: i64,
    claim: u64,
    record: &Record,
) -> rusqlite::Result<bool> {
    let error = record.last_error.as_ref();
    let mut statement = connection.prepare_cached(RECORD)?;
    let updated = statement.execute(params![
        id,
        i64::try_from(claim).unwrap_or(i64::MAX),
        record.state.as_str(),
        millis(record.next_at),
        i64::from(record.attempts_added),
        record.first_sent_at.map(millis),
        record.run_id,
        error.map(|e| e.kind.clone()),
        error.and_then(|e| e.status).map(i64::from),
        error.and_then(|e| e.request_id.clone()),
        error.map(|e| e.message.clone()),
        record.finished_at.map(millis),
        record.may_have_run,
    ])?;
    Ok(updated == 1)
}

/// An outbox store in one SQLite file.
///
/// Clones share the connection and the wake-ups: a job enqueued through one wakes the idle
/// workers of every clone, at once (see [`Wakeups`]).
#[derive(Clone)]
pub struct SqliteStore {
    connection: Arc<Mutex<Connection>>,
    path: Arc<str>,
    waker: Arc<Waker>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (or creates) the outbox at `path`, in WAL mode, and applies the migrations it has
    /// not seen. On Unix a file it creates is readable and writable by its owner only (`0600`),
    /// as are the journal files SQLite makes beside it; an existing file keeps its permissions.
    ///
    /// # Errors
    ///
    /// `invalid_input`, with the reason, when waiting cannot help: the path is a directory or
    /// not a regular file (a device such as `/dev/null`, a pipe), the file is not an SQLite
    /// database, or it cannot be created or written (read-only, a missing directory, no
    /// permission). `transport` when the file cannot be opened or migrated for another reason
    /// (it is locked past the busy timeout).
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let shown: Arc<str> = path.display().to_string().into();
        let connection = tokio::task::spawn_blocking(move || -> Result<Connection> {
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => {
                    return Err(Error::invalid_input(
                        "the outbox path is a directory, not an SQLite file",
                    ));
                }
                Ok(meta) if !meta.is_file() => {
                    return Err(Error::invalid_input(
                        "the outbox path is not a regular file (a device, a pipe or a socket)",
                    ));
                }
                Ok(_) => {}
                // A new file is readable by its owner only: jobs hold bodies and routes.
                // SQLite gives its journal files the database file's permissions. A failure
                // here (a missing directory, no permission) is the open's to report.
                Err(_) => {
                    #[cfg(unix)]
                    {
                        use std::os::unix::fs::OpenOptionsExt as _;
                        let _ = std::fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .mode(0o600)
                            .open(&path);
                    }
                }
            }
            let mut connection = Connection::open(&path).map_err(open_error)?;
            connection.busy_timeout(BUSY_TIMEOUT).map_err(open_error)?;
            connection
                .pragma_update(None, "journal_mode", "WAL")
                .map_err(open_error)?;
            connection
                .pragma_update(None, "synchronous", "NORMAL")
                .map_err(open_error)?;
            plan_once(&connection).map_err(open_error)?;
            migrate(&mut connection, open_error)?;
            Ok(connection)
        })
        .await
        .map_err(|_| Error::new(ErrorKind::Transport, "the SQLite open task panicked"))??;
        Ok(Self {
            connection: Arc::new(Mutex::new(connection)),
            path: shown,
            waker: Arc::new(Waker::new()),
        })
    }

    /// `work`, then a wake-up for the idle workers when `woke` says its result made a job due.
    fn waking<'a, T: Send + 'a>(
        &'a self,
        work: StoreFuture<'a, T>,
        woke: impl FnOnce(&T) -> bool + Send + 'a,
    ) -> StoreFuture<'a, T> {
        Box::pin(async move {
            let done = work.await?;
            if woke(&done) {
                self.waker.wake();
            }
            Ok(done)
        })
    }

    /// Runs `work` on the connection, on the blocking pool.
    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let connection = Arc::clone(&self.connection);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut connection = connection
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                work(&mut connection).map_err(sqlite_error)
            })
            .await
            .map_err(|_| Error::new(ErrorKind::Transport, "an SQLite task panicked"))?
        })
    }
}

/// Applies the migrations not yet applied, in one transaction.
fn migrate(connection: &mut Connection, sqlite_error: fn(rusqlite::Error) -> Error) -> Result<()> {
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite_error)?;
    transaction
        .execute_batch("CREATE TABLE IF NOT EXISTS outbox_schema (version INTEGER NOT NULL)")
        .map_err(sqlite_error)?;
    let applied: i64 = transaction
        .query_row("SELECT COUNT(*) FROM outbox_schema", [], |row| row.get(0))
        .map_err(sqlite_error)?;
    let applied = usize::try_from(applied).unwrap_or(0);
    if applied > MIGRATIONS.len() {
        return Err(Error::invalid_input(format!(
            "the outbox's schema is at version {applied}, newer than this build's {}",
            MIGRATIONS.len()
        )));
    }
    for (version, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
        transaction.execute_batch(migration).map_err(sqlite_error)?;
        transaction
            .execute(
                "INSERT INTO outbox_schema (version) VALUES (?1)",
                params![version as i64 + 1],
            )
            .map_err(sqlite_error)?;
    }
    transaction.commit().map_err(sqlite_error)
}

/// An SQLite failure while the store opens: `invalid_input` with the reason when waiting
/// cannot help (not a database, read-only, cannot be created), else [`sqlite_error`].
fn open_error(error: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode;
    let why = match error.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => "the outbox file is not an SQLite database",
        Some(ErrorCode::ReadOnly) => "the outbox file is read-only",
        Some(ErrorCode::CannotOpen) => {
            "the outbox file cannot be opened or created (is its directory there and writable?)"
        }
        Some(ErrorCode::PermissionDenied) => "the outbox file may not be opened (permission)",
        Some(ErrorCode::DatabaseCorrupt) => "the outbox file is corrupt",
        _ => return sqlite_error(error),
    };
    Error::invalid_input(format!("{why} ({error})"))
}

/// An SQLite failure as the crate's error.
fn sqlite_error(error: rusqlite::Error) -> Error {
    Error::new(
        ErrorKind::Transport,
        format!("the outbox's SQLite store failed: {error}"),
    )
}

/// A row of `outbox_jobs`, selected with [`COLUMNS`].
fn job_of(row: &Row<'_>) -> rusqlite::Result<Job> {
    let kind: String = row.get(2)?;
    let method: String = row.get(3)?;
    let route: String = row.get(4)?;
    let target = Target::from_row(&kind, &method, &route).map_err(|error| {
        rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, error.into())
    })?;
    let identity: String = row.get(6)?;
    let identity = IdempotencyKey::new(&identity).map_err(|error| {
        rusqlite::Error::FromSqlConversionFailure(6, rusqlite::types::Type::Text, error.into())
    })?;
    let state: String = row.get(7)?;
    let state = JobState::parse(&state).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            7,
            rusqlite::types::Type::Text,
            format!("unknown job state {state:?}").into(),
        )
    })?;
    let time = |index: usize| -> rusqlite::Result<Option<SystemTime>> {
        Ok(row.get::<_, Option<i64>>(index)?.map(from_millis))
    };
    let last_kind: Option<String> = row.get(18)?;
    let last_error = match last_kind {
        None => None,
        Some(kind) => Some(LastError {
            kind,
            status: row
                .get::<_, Option<i64>>(19)?
                .and_then(|status| u16::try_from(status).ok()),
            request_id: row.get(20)?,
            message: row.get::<_, Option<String>>(21)?.unwrap_or_default(),
        }),
    };
    Ok(Job {
        id: row.get(0)?,
        event_id: row.get(1)?,
        target,
        body: Bytes::from(row.get::<_, Vec<u8>>(5)?),
        identity,
        state,
        calls: u32::try_from(row.get::<_, i64>(8)?).unwrap_or(u32::MAX),
        attempts: u32::try_from(row.get::<_, i64>(9)?).unwrap_or(u32::MAX),
        next_at: from_millis(row.get(10)?),
        created_at: from_millis(row.get(11)?),
        first_sent_at: time(12)?,
        finished_at: time(13)?,
        lease_owner: row.get(14)?,
        lease_until: time(15)?,
        claim: u64::try_from(row.get::<_, i64>(16)?).unwrap_or(0),
        run_id: row.get(17)?,
        last_error,
        may_have_run: row.get(22)?,
    })
}

/// The counts of `sql`'s rows of state and count.
fn counts_by_state(connection: &Connection, sql: &str) -> rusqlite::Result<Counts> {
    let mut statement = connection.prepare_cached(sql)?;
    let rows = statement.query_map([], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
    })?;
    let mut counts = Counts::default();
    for row in rows {
        let (state, count) = row?;
        if let Some(state) = JobState::parse(&state) {
            counts.add(state, u64::try_from(count).unwrap_or(0));
        }
    }
    Ok(counts)
}

/// Makes `connection` plan each statement once: from the statement alone, not from the values
/// bound to it, and with room to keep every statement the store prepares.
///
/// SQLite otherwise reads a bound `LIMIT` when it plans, and plans the statement again whenever
/// the value changes, as a claim's does on almost every call: that was about a tenth of the
/// machine's time while a pool delivered through the outbox. The plans the queries rely on are
/// checked in the tests below (`EXPLAIN QUERY PLAN`), on a connection made the same way.
fn plan_once(connection: &Connection) -> rusqlite::Result<()> {
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    connection.set_prepared_statement_cache_capacity(STATEMENTS_KEPT);
    Ok(())
}

fn select_job(connection: &Connection, event_id: &str) -> rusqlite::Result<Option<Job>> {
    connection
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM outbox_jobs WHERE event_id = ?1"
        ))?
        .query_row(params![event_id], job_of)
        .optional()
}

/// `?1` scope, `?2` end, `?3` reason: the later end wins, with its reason (the right-hand
/// sides read the row as it was).
const PAUSE: &str = "INSERT INTO outbox_pauses (scope, until_ms, why) VALUES (?1, ?2, ?3) \
    ON CONFLICT (scope) DO UPDATE SET \
    why = CASE WHEN excluded.until_ms > until_ms THEN excluded.why ELSE why END, \
    until_ms = MAX(until_ms, excluded.until_ms)";

/// `?1` scope, `?2` requests, `?3` window in milliseconds, `?4` when stated: the latest
/// statement wins.
const LEARN_WINDOW: &str = "INSERT INTO outbox_windows (scope, requests, per_ms, learned_at) \
    VALUES (?1, ?2, ?3, ?4) ON CONFLICT (scope) DO UPDATE SET requests = excluded.requests, \
    per_ms = excluded.per_ms, learned_at = excluded.learned_at \
    WHERE excluded.learned_at >= outbox_windows.learned_at";

/// The jobs by state: `outbox_counts`, which triggers keep as jobs change, not a scan.
const COUNTS: &str = "SELECT state, SUM(jobs) FROM outbox_counts GROUP BY state";

/// The jobs a call may have run, by state: their rows of `outbox_counts`.
const MAY_HAVE_RUN_COUNTS: &str = "SELECT state, jobs FROM outbox_counts WHERE may_have_run = 1";

/// A job, unless its event ID is stored.
/// The prepared statements a connection keeps: more than the store's distinct statements.
const STATEMENTS_KEPT: usize = 64;

/// A new job, or nothing when its event ID is stored. A job stored now is what its `NewJob`
/// says with the row's ID, so only a job stored before is read back. (`RETURNING id` in its
/// place made a batch slower by about half.)
const INSERT: &str = "INSERT INTO outbox_jobs (event_id, kind, method, route, body, identity, \
    state, next_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?7) \
    ON CONFLICT (event_id) DO NOTHING";

/// `?1` jobs just stored, all pending and unmarked: added to their count in the same
/// transaction.
const COUNT_ENQUEUED: &str =
    "UPDATE outbox_counts SET jobs = jobs + ?1 WHERE state = 'pending' AND may_have_run = 0";

/// `?1` a second, `?2` jobs created in it just now: added to the backlog's history.
const BACKLOG_ENQUEUED: &str = "INSERT INTO outbox_backlog (second, entered, finished) \
    VALUES (?1, ?2, 0) ON CONFLICT (second) DO UPDATE SET entered = entered + excluded.entered";

/// `?1` a second: the backlog's history after it.
const BACKLOG_AFTER: &str =
    "SELECT second, entered, finished FROM outbox_backlog WHERE second > ?1";

/// The jobs not finished now: pending and in flight, from the kept counts, and any final job
/// without a finish time (none, unless a store of an old schema kept one), from its index.
const NOT_FINISHED: &str = "SELECT \
    (SELECT COALESCE(SUM(jobs), 0) FROM outbox_counts WHERE state IN ('pending', 'in_flight')) \
    + (SELECT COUNT(*) FROM outbox_jobs \
       WHERE state NOT IN ('pending', 'in_flight') AND finished_at IS NULL)";

impl Store for SqliteStore {
    fn enqueue(&self, job: NewJob) -> StoreFuture<'_, (Job, bool)> {
        let one = self.enqueue_many(vec![job]);
        Box::pin(async move {
            one.await?.pop().ok_or_else(|| {
                Error::invalid_input("the store returned no job for the one enqueued")
            })
        })
    }

    fn enqueue_many(&self, jobs: Vec<NewJob>) -> StoreFuture<'_, Vec<(Job, bool)>> {
        if let Err(error) = jobs
            .iter()
            .try_for_each(|job| super::check_event_id(&job.event_id))
        {
            return Box::pin(std::future::ready(Err(error)));
        }
        let stored = self.run(move |connection| {
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut stored = Vec::with_capacity(jobs.len());
            {
                let mut insert = transaction.prepare_cached(INSERT)?;
                let mut select = transaction.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM outbox_jobs WHERE event_id = ?1"
                ))?;
                for job in jobs {
                    let (method, route) = job.target.to_row();
                    let now = millis(job.now);
                    let inserted = insert.execute(params![
                        job.event_id,
                        job.target.kind(),
                        method,
                        route,
                        job.body.as_ref(),
                        job.identity.as_str(),
                        now
                    ])?;
                    stored.push(if inserted == 1 {
                        (Job::stored(transaction.last_insert_rowid(), job, now), true)
                    } else {
                        (select.query_row(params![job.event_id], job_of)?, false)
                    });
                }
            }
            let added = stored.iter().filter(|(_, new)| *new).count();
            if added > 0 {
                transaction
                    .prepare_cached(COUNT_ENQUEUED)?
                    .execute(params![i64::try_from(added).unwrap_or(i64::MAX)])?;
                let mut by_second = std::collections::BTreeMap::<i64, i64>::new();
                for (job, _) in stored.iter().filter(|(_, new)| *new) {
                    *by_second
                        .entry(second_of(millis(job.created_at)))
                        .or_default() += 1;
                }
                let mut entered = transaction.prepare_cached(BACKLOG_ENQUEUED)?;
                for (second, jobs) in by_second {
                    entered.execute(params![second, jobs])?;
                }
            }
            transaction.commit()?;
            Ok(stored)
        });
        self.waking(stored, |stored| stored.iter().any(|(_, now)| *now))
    }

    fn claim(
        &self,
        worker: &str,
        now: SystemTime,
        lease: Duration,
        limit: usize,
    ) -> StoreFuture<'_, Vec<Job>> {
        let worker = worker.to_owned();
        let (now, until, wedged_after) = match claim_bounds(now, lease) {
            Ok(bounds) => bounds,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |connection| {
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut jobs = {
                let mut statement = transaction.prepare_cached(CLAIM)?;
                statement
                    .query_map(params![worker, until, now, limit, wedged_after], job_of)?
                    .collect::<rusqlite::Result<Vec<Job>>>()?
            };
            transaction.commit()?;
            jobs.sort_by_key(|job| job.id);
            Ok(jobs)
        })
    }

    fn record(&self, id: i64, claim: u64, record: Record) -> StoreFuture<'_, bool> {
        if let Err(error) = check_record(&record) {
            return Box::pin(std::future::ready(Err(error)));
        }
        let pending = record.state == JobState::Pending;
        let written = self.run(move |connection| write_record(connection, id, claim, &record));
        self.waking(written, move |written| pending && *written)
    }

    fn record_many(&self, records: Vec<(i64, u64, Record)>) -> StoreFuture<'_, Vec<bool>> {
        if let Err(error) = records
            .iter()
            .try_for_each(|(_, _, record)| check_record(record))
        {
            return Box::pin(std::future::ready(Err(error)));
        }
        let pending: Vec<bool> = records
            .iter()
            .map(|(_, _, record)| record.state == JobState::Pending)
            .collect();
        let written = self.run(move |connection| {
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let written = records
                .iter()
                .map(|(id, claim, record)| write_record(&transaction, *id, *claim, record))
                .collect::<rusqlite::Result<Vec<bool>>>()?;
            transaction.commit()?;
            Ok(written)
        });
        // A job rescheduled wakes the idle workers: the next due time may have moved closer.
        self.waking(written, move |written| {
            written
                .iter()
                .zip(pending)
                .any(|(written, pending)| *written && pending)
        })
    }

    fn get(&self, event_id: &str) -> StoreFuture<'_, Option<Job>> {
        let event_id = event_id.to_owned();
        self.run(move |connection| select_job(connection, &event_id))
    }

    fn counts(&self) -> StoreFuture<'_, Counts> {
        self.run(|connection| counts_by_state(connection, COUNTS))
    }

    fn may_have_run_counts(&self) -> StoreFuture<'_, Counts> {
        self.run(|connection| counts_by_state(connection, MAY_HAVE_RUN_COUNTS))
    }

    fn oldest_due(&self, now: SystemTime) -> StoreFuture<'_, Option<SystemTime>> {
        let now = millis(now);
        self.run(move |connection| {
            let oldest: Option<i64> = connection.query_row(
                "SELECT MIN(next_at) FROM outbox_jobs INDEXED BY outbox_jobs_claimable \
                 WHERE state IN ('pending', 'in_flight') AND next_at <= ?1",
                params![now],
                |row| row.get(0),
            )?;
            Ok(oldest.map(from_millis))
        })
    }

    fn list(&self, state: Option<JobState>, limit: usize) -> StoreFuture<'_, Vec<Job>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |connection| {
            let mut statement = connection.prepare(&format!(
                "SELECT {COLUMNS} FROM outbox_jobs WHERE ?1 IS NULL OR state = ?1 \
                 ORDER BY id LIMIT ?2"
            ))?;
            statement
                .query_map(params![state.map(JobState::as_str), limit], job_of)?
                .collect()
        })
    }

    fn list_page(
        &self,
        state: Option<JobState>,
        after: Option<&Cursor>,
        limit: usize,
    ) -> StoreFuture<'_, (Vec<Job>, Option<Cursor>)> {
        let walk = match walk(state, after) {
            Ok(walk) => walk,
            Err(error) => return Box::pin(async move { Err(error) }),
        };
        self.run(move |connection| {
            let mut read = Vec::new();
            for (state, after) in walk {
                let wanted =
                    i64::try_from(limit.saturating_add(1) - read.len()).unwrap_or(i64::MAX);
                // The walk's first part starts after the cursor's (next_at, id); the others
                // at their state's first job. A row value: one range of `outbox_jobs_due`.
                let (next_at, id) = after.unwrap_or((i64::MIN, i64::MIN));
                let mut statement = connection.prepare_cached(PAGE)?;
                let rows =
                    statement.query_map(params![state.as_str(), next_at, id, wanted], job_of)?;
                for row in rows {
                    read.push(row?);
                }
                if read.len() > limit {
                    break;
                }
            }
            Ok(page_of(read, limit))
        })
    }

    fn requeue(&self, event_id: &str, now: SystemTime) -> StoreFuture<'_, Option<Job>> {
        let event_id = event_id.to_owned();
        let requeued = self.run(move |connection| {
            connection
                .prepare_cached(
                    "UPDATE outbox_jobs SET state = 'pending', next_at = ?2, lease_owner = NULL, \
                 lease_until = NULL, finished_at = NULL, first_sent_at = NULL WHERE event_id = ?1",
                )?
                .execute(params![event_id, millis(now)])?;
            select_job(connection, &event_id)
        });
        self.waking(requeued, Option::is_some)
    }

    fn due(&self, now: SystemTime, events: Option<Arc<[String]>>) -> StoreFuture<'_, Due> {
        let now = millis(now);
        self.run(move |connection| {
            let row = |row: &Row<'_>| -> rusqlite::Result<Due> {
                Ok(Due {
                    due: u64::try_from(row.get::<_, Option<i64>>(0)?.unwrap_or(0)).unwrap_or(0),
                    in_flight: u64::try_from(row.get::<_, Option<i64>>(1)?.unwrap_or(0))
                        .unwrap_or(0),
                    next_at: row.get::<_, Option<i64>>(2)?.map(from_millis),
                })
            };
            match events {
                None => connection.prepare_cached(DUE)?.query_row(params![now], row),
                Some(events) => {
                    let events = serde_json::to_string(&*events)
                        .map_err(|error| rusqlite::Error::ToSqlConversionFailure(error.into()))?;
                    connection
                        .prepare_cached(DUE_AMONG)?
                        .query_row(params![now, events], row)
                }
            }
        })
    }

    fn wakeups(&self) -> Wakeups {
        Wakeups::new(self.waker.subscribe(), false)
    }

    fn pause(
        &self,
        scope: &str,
        until: SystemTime,
        why: &str,
        now: SystemTime,
    ) -> StoreFuture<'_, ()> {
        let checked = check_scope(scope).and_then(|()| stored_millis(until, "pause end"));
        let until = match checked {
            Ok(until) => until,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let (scope, why, now) = (scope.to_owned(), pause_reason(why).to_owned(), millis(now));
        self.run(move |connection| {
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            transaction
                .prepare_cached("DELETE FROM outbox_pauses WHERE until_ms <= ?1")?
                .execute(params![now])?;
            transaction
                .prepare_cached(PAUSE)?
                .execute(params![scope, until, why])?;
            transaction.commit()
        })
    }

    fn paused_until(&self, scope: &str, now: SystemTime) -> StoreFuture<'_, Option<SystemTime>> {
        if let Err(error) = check_scope(scope) {
            return Box::pin(std::future::ready(Err(error)));
        }
        let scope = scope.to_owned();
        self.run(move |connection| {
            let until: Option<i64> = connection
                .prepare_cached(
                    "SELECT until_ms FROM outbox_pauses WHERE scope = ?1 AND until_ms > ?2",
                )?
                .query_row(params![scope, millis(now)], |row| row.get(0))
                .optional()?;
            Ok(until.map(from_millis))
        })
    }

    fn pauses(&self, now: SystemTime) -> StoreFuture<'_, Vec<Pause>> {
        self.run(move |connection| {
            let mut statement = connection.prepare_cached(
                "SELECT scope, until_ms, why FROM outbox_pauses WHERE until_ms > ?1 ORDER BY scope",
            )?;
            statement
                .query_map(params![millis(now)], |row| {
                    Ok(Pause::new(
                        row.get::<_, String>(0)?,
                        from_millis(row.get(1)?),
                        row.get::<_, String>(2)?,
                    ))
                })?
                .collect()
        })
    }

    fn learn_window(
        &self,
        scope: &str,
        requests: u32,
        per: Duration,
        now: SystemTime,
    ) -> StoreFuture<'_, ()> {
        let checked = check_scope(scope).and_then(|()| {
            Ok((
                window_row(requests, per)?,
                stored_millis(now, "time the window was stated")?,
            ))
        });
        let ((requests, per_ms), now) = match checked {
            Ok(row) => row,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let scope = scope.to_owned();
        self.run(move |connection| {
            connection
                .prepare_cached(LEARN_WINDOW)?
                .execute(params![scope, requests, per_ms, now])?;
            Ok(())
        })
    }

    fn window(&self, scope: &str) -> StoreFuture<'_, Option<(u32, Duration)>> {
        if let Err(error) = check_scope(scope) {
            return Box::pin(std::future::ready(Err(error)));
        }
        let scope = scope.to_owned();
        self.run(move |connection| {
            connection
                .prepare_cached("SELECT requests, per_ms FROM outbox_windows WHERE scope = ?1")?
                .query_row(params![scope], |row| {
                    Ok(window_of(row.get(0)?, row.get(1)?))
                })
                .optional()
        })
    }

    fn take_slot(
        &self,
        scope: &str,
        limit: u32,
        hold: Duration,
        now: SystemTime,
    ) -> StoreFuture<'_, Slot> {
        let scope = scope.to_owned();
        let now = millis(now);
        let busy_until = now.saturating_add(i64::try_from(hold.as_millis()).unwrap_or(i64::MAX));
        self.run(move |connection| {
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            transaction
                .prepare_cached("DELETE FROM outbox_slots WHERE scope = ?1 AND busy_until <= ?2")?
                .execute(params![scope, now])?;
            let (busy, first_free): (i64, Option<i64>) = transaction
                .prepare_cached(
                    "SELECT COUNT(*), MIN(busy_until) FROM outbox_slots WHERE scope = ?1",
                )?
                .query_row(params![scope], |row| Ok((row.get(0)?, row.get(1)?)))?;
            let slot = if busy < i64::from(limit) {
                transaction
                    .prepare_cached("INSERT INTO outbox_slots (scope, busy_until) VALUES (?1, ?2)")?
                    .execute(params![scope, busy_until])?;
                Slot::Granted(transaction.last_insert_rowid())
            } else {
                Slot::FreeAt(from_millis(first_free.unwrap_or(now)))
            };
            transaction.commit()?;
            Ok(slot)
        })
    }

    fn release_slot(&self, id: i64, busy_until: SystemTime) -> StoreFuture<'_, ()> {
        self.run(move |connection| {
            connection
                .prepare_cached("UPDATE outbox_slots SET busy_until = ?2 WHERE id = ?1")?
                .execute(params![id, millis(busy_until)])?;
            Ok(())
        })
    }

    fn outage(&self, scope: &str) -> StoreFuture<'_, Option<Outage>> {
        if let Err(error) = check_scope(scope) {
            return Box::pin(std::future::ready(Err(error)));
        }
        let scope = scope.to_owned();
        self.run(move |connection| {
            connection
                .prepare_cached(
                    "SELECT down_since_ms, probe_at_ms FROM outbox_services \
                     WHERE scope = ?1 AND down_since_ms IS NOT NULL",
                )?
                .query_row(params![scope], |row| {
                    Ok(Outage::new(
                        from_millis(row.get(0)?),
                        from_millis(row.get(1)?),
                    ))
                })
                .optional()
        })
    }

    fn outages(&self) -> StoreFuture<'_, Vec<ServiceOutage>> {
        self.run(move |connection| {
            let mut statement = connection.prepare_cached(
                "SELECT scope, down_since_ms, probe_at_ms FROM outbox_services \
                 WHERE down_since_ms IS NOT NULL ORDER BY scope",
            )?;
            statement
                .query_map([], |row| {
                    Ok(ServiceOutage::new(
                        row.get::<_, String>(0)?,
                        Outage::new(from_millis(row.get(1)?), from_millis(row.get(2)?)),
                    ))
                })?
                .collect()
        })
    }

    fn service_down(&self, scope: &str, since: SystemTime, now: SystemTime) -> StoreFuture<'_, ()> {
        let checked = check_scope(scope).and_then(|()| {
            Ok((
                stored_millis(since, "outage onset")?,
                stored_millis(now, "time the outage was found")?,
            ))
        });
        let (since, now) = match checked {
            Ok(times) => times,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let scope = scope.to_owned();
        self.run(move |connection| {
            connection
                .prepare_cached(SERVICE_DOWN)?
                .execute(params![scope, since, now])?;
            Ok(())
        })
    }

    fn service_up(&self, scope: &str, now: SystemTime) -> StoreFuture<'_, ()> {
        let checked = check_scope(scope).and_then(|()| stored_millis(now, "time of the answer"));
        let now = match checked {
            Ok(now) => now,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let scope = scope.to_owned();
        self.run(move |connection| {
            connection
                .prepare_cached(SERVICE_UP)?
                .execute(params![scope, now])?;
            Ok(())
        })
    }

    fn take_probe(&self, scope: &str, next: SystemTime, now: SystemTime) -> StoreFuture<'_, Probe> {
        let checked = check_scope(scope).and_then(|()| {
            Ok((
                stored_millis(next, "next probe")?,
                stored_millis(now, "time of the probe")?,
            ))
        });
        let (next, now) = match checked {
            Ok(times) => times,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let scope = scope.to_owned();
        self.run(move |connection| {
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let taken = transaction
                .prepare_cached(
                    "UPDATE outbox_services SET probe_at_ms = ?2 \
                     WHERE scope = ?1 AND down_since_ms IS NOT NULL AND probe_at_ms <= ?3",
                )?
                .execute(params![scope, next, now])?;
            let probe = if taken > 0 {
                Probe::Granted
            } else {
                let at: Option<i64> = transaction
                    .prepare_cached(
                        "SELECT probe_at_ms FROM outbox_services \
                         WHERE scope = ?1 AND down_since_ms IS NOT NULL",
                    )?
                    .query_row(params![scope], |row| row.get(0))
                    .optional()?;
                at.map_or(Probe::Up, |at| Probe::NotBefore(from_millis(at)))
            };
            transaction.commit()?;
            Ok(probe)
        })
    }

    fn backlog(
        &self,
        from: SystemTime,
        step: Duration,
        points: usize,
    ) -> StoreFuture<'_, Vec<u64>> {
        let (from, step) = (millis(from), super::store::backlog_step(step));
        self.run(move |connection| {
            let transaction = connection.transaction()?;
            let now: i64 = transaction.query_row(NOT_FINISHED, [], |row| row.get(0))?;
            let rows = transaction
                .prepare_cached(BACKLOG_AFTER)?
                .query_map(params![from.div_euclid(1000)], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })?
                .collect::<rusqlite::Result<Vec<(i64, i64, i64)>>>()?;
            transaction.commit()?;
            Ok(super::store::backlog_from_history(
                now, rows, from, step, points,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What no wait can heal is `invalid_input` with its reason, never `transport`.
    #[tokio::test]
    async fn a_path_no_wait_can_heal_is_invalid_input_with_its_reason() {
        let dir = std::env::temp_dir().join(format!(
            "hodoflow-sqlite-open-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let text = dir.join("notes.txt");
        std::fs::write(&text, "not a database\n".repeat(100)).unwrap();
        for (path, says) in [
            (dir.clone(), "directory"),
            (std::path::PathBuf::from("/dev/null"), "not a regular file"),
            (text, "not an SQLite database"),
            (
                dir.join("missing").join("o.db"),
                "cannot be opened or created",
            ),
        ] {
            let error = SqliteStore::open(&path).await.unwrap_err();
            assert_eq!(error.kind(), ErrorKind::InvalidInput, "{path:?}: {error}");
            assert!(error.to_string().contains(says), "{path:?}: {error}");
        }
        assert!(SqliteStore::open(dir.join("o.db")).await.is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A page is one range of `outbox_jobs_due`, in its order: no scan, no sort of the table.
    #[test]
    fn a_page_reads_one_range_of_the_index_and_sorts_nothing() {
        let mut connection = Connection::open_in_memory().unwrap();
        plan_once(&connection).unwrap();
        migrate(&mut connection, sqlite_error).unwrap();
        let plan: Vec<String> = connection
            .prepare(&format!("EXPLAIN QUERY PLAN {PAGE}"))
            .unwrap()
            .query_map(params!["pending", 0, 0, 50], |row| row.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let plan = plan.join("\n");
        assert!(
            plan.contains("SEARCH outbox_jobs USING INDEX outbox_jobs_due (state=? AND next_at>?)"),
            "{plan}"
        );
        assert!(!plan.contains("SCAN"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }

    /// A claim is planned once, whatever limit each claim binds.
    #[tokio::test]
    async fn a_claim_is_planned_once_whatever_its_limit() {
        let store = SqliteStore::open(":memory:").await.unwrap();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let jobs = (0..40)
            .map(|n| NewJob {
                event_id: format!("e-{n}"),
                target: Target::create("/api/json/v1/things"),
                body: Bytes::from_static(b"{}"),
                identity: IdempotencyKey::from_operation_id(&format!("e-{n}")),
                now,
            })
            .collect();
        store.enqueue_many(jobs).await.unwrap();
        let mut claimed = 0;
        for limit in [1, 2, 3, 5, 8, 13] {
            let jobs = store
                .claim("w", now, Duration::from_secs(60), limit)
                .await
                .unwrap();
            assert_eq!(jobs.len(), limit);
            claimed += jobs.len();
        }
        assert_eq!(claimed, 32);
        let connection = store.connection.lock().unwrap();
        let statement = connection.prepare_cached(CLAIM).unwrap();
        assert_eq!(
            statement.get_status(rusqlite::StatementStatus::RePrepare),
            0,
            "the claim was planned again for another limit"
        );
    }

    /// The jobs by state, and those that may have run, are read from the counts the triggers
    /// keep, never from the jobs' table or an index of it.
    #[test]
    fn counts_read_the_kept_counts_not_the_jobs() {
        let mut connection = Connection::open_in_memory().unwrap();
        plan_once(&connection).unwrap();
        migrate(&mut connection, sqlite_error).unwrap();
        for sql in [COUNTS, MAY_HAVE_RUN_COUNTS] {
            let plan: Vec<String> = connection
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap()
                .query_map([], |row| row.get::<_, String>(3))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            let plan = plan.join("\n");
            assert!(plan.contains("outbox_counts"), "{plan}");
            assert!(!plan.contains("outbox_jobs"), "{plan}");
        }
    }
}
