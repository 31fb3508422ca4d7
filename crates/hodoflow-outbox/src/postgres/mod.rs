//! The PostgreSQL store: many sender processes on many machines share one outbox.
//!
//! # Why `FOR UPDATE SKIP LOCKED`
//!
//! A claim selects the oldest due jobs and marks them in flight in one statement. Under plain
//! `FOR UPDATE`, a second worker claiming at the same moment would wait for the first one's rows
//! and then find them taken; under `SKIP LOCKED` it passes over the rows another claim holds and
//! takes the next ones, so workers never wait for each other and never claim one job twice.
//!
//! # Why advisory locks, for the trigger windows and for the migrations
//!
//! A trigger's window is "at most `limit` slots busy": a count, then an insert. Two workers
//! counting at once under `READ COMMITTED` would both see room for the last slot. There is no
//! row to lock before the first slot exists, so [`take_slot`](Store::take_slot) takes a
//! transaction-scoped advisory lock on the scope's hash first (`pg_advisory_xact_lock`): every
//! worker of every process taking a slot of that scope waits its turn for a few milliseconds,
//! and the lock ends with the transaction, even when the worker dies. Migrations take one too,
//! so four processes opening a fresh database at once migrate it once, and the others find it
//! migrated.
//!
//! # Why milliseconds in `BIGINT`
//!
//! Every time is the outbox's clock (a test's, injected), never the database's `now()`: the
//! SQLite store stores the same integers, the schedule and the horizon are tested on a clock
//! that moves when told to, and no time zone or clock skew between machines enters a row.
//!
//! # Connections
//!
//! A small pool of its own (four connections, opened as needed; `pool.rs`): a statement waits
//! only when four are running already, and a transaction holds its connection alone. Each
//! connection prepares each statement once. A connection that broke is replaced at its next use.
//!
//! # Timeouts
//!
//! A database that accepts the TCP connection and never answers must not hang a worker or a
//! command: the driver's `connect_timeout` covers the TCP connect only. So every wait on the
//! database is bounded ([`StoreTimeouts`]): opening a connection (its TCP connect, TLS-less
//! startup and authentication) by the connect timeout, 10 s by default, and each store
//! operation (the wait for a pooled connection, the statements and the transaction) by the
//! statement timeout, 30 s by default. One that runs out is a `transport` error that says which
//! wait ran out; the pool then drops its idle connections, since one may hold a statement the
//! server never answered. A worker treats it as any store failure: it logs it and tries again
//! at its next poll.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Config, Row};

use hodoflow_retry::IdempotencyKey;
use hodoflow_retry::{Error, ErrorKind, Result};

mod listen;
mod pool;

use pool::{CONNECTIONS, ConnectionPool};

use super::check_event_id;
use super::job::{
    Counts, Due, Job, JobState, LastError, NewJob, Outage, Pause, Probe, Record, ServiceOutage,
    Slot, Target,
};
use super::page::{Cursor, page_of, walk};
use super::store::{Store, StoreFuture};
use super::wake::{Waker, Wakeups};
use super::{
    check_record, check_scope, claim_bounds, from_millis, millis, pause_reason, stored_millis,
    window_of, window_row,
};

/// The first key of the outbox's advisory locks (`"hodo"`), so that they do not meet an
/// application's own; the second is [`MIGRATION_LOCK`] or a scope's hash.
const LOCK_SPACE: i32 = 0x686f_646f;

/// The second key of the migrations' advisory lock (a scope's hash may equal it: the two then
/// wait for each other, which is harmless).
const MIGRATION_LOCK: i32 = 0;

/// The migrations, in order: version `i + 1` is `MIGRATIONS[i]`. Never edit one that shipped;
/// add the next.
const MIGRATIONS: &[&str] = &[
    "
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
    CREATE INDEX outbox_jobs_state_next_at ON outbox_jobs (state, next_at);
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
",
    "
    UPDATE outbox_jobs SET next_at = lease_until WHERE state = 'in_flight';
    CREATE INDEX outbox_jobs_claimable ON outbox_jobs (next_at, id)
        WHERE state IN ('pending', 'in_flight');
",
    // Wake-ups (listen.rs): a job inserted, or made pending (an operator's retry, a
    // reschedule), notifies `outbox_jobs` when its transaction commits, whoever wrote it, with
    // the table's schema (several outboxes may share a database). A claim (to in flight) and a
    // final record do not.
    "
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
",
    // Keyset pages on (state, next_at, id): the ID in the index, so a page is one range read in
    // order (SQLite's index on (state, next_at) ends in the rowid already). It serves all that
    // the index on (state, next_at) served, which goes.
    "
    CREATE INDEX outbox_jobs_page ON outbox_jobs (state, next_at, id);
    DROP INDEX outbox_jobs_state_next_at;
",
    // Scopes and ambiguity (store.rs): the job's sticky mark, a pause's reason, the windows'
    // stated limits. A column added with a constant default rewrites no row (PostgreSQL 11+).
    "
    ALTER TABLE outbox_jobs ADD COLUMN may_have_run BOOLEAN NOT NULL DEFAULT false;
    CREATE INDEX outbox_jobs_may_have_run ON outbox_jobs (state) WHERE may_have_run;
    ALTER TABLE outbox_pauses ADD COLUMN why TEXT NOT NULL DEFAULT '';
    CREATE TABLE outbox_windows (
        scope      TEXT PRIMARY KEY,
        requests   BIGINT NOT NULL,
        per_ms     BIGINT NOT NULL,
        learned_at BIGINT NOT NULL
    );
",
    // Jobs by state, kept as they change (the status page and the metrics read them without a
    // scan). Many workers change jobs at once, so no shared row is updated as they do: each
    // statement appends its net change per state to `outbox_count_deltas` (statement triggers
    // over the transition tables: one row per state a statement touched, no lock another
    // writer waits for), and a reader folds the deltas into `outbox_counts`. The triggers go
    // first: creating them locks out writers until the counts below are read and committed.
    "
    CREATE TABLE outbox_counts (
        state        TEXT NOT NULL,
        may_have_run BOOLEAN NOT NULL,
        jobs         BIGINT NOT NULL,
        PRIMARY KEY (state, may_have_run)
    );
    CREATE TABLE outbox_count_deltas (
        id           BIGSERIAL PRIMARY KEY,
        state        TEXT NOT NULL,
        may_have_run BOOLEAN NOT NULL,
        jobs         BIGINT NOT NULL
    );
    -- The backlog chart's history by second (milliseconds rounded up), kept the same way:
    -- jobs created, jobs finished (final with a finish time). See store.rs.
    CREATE TABLE outbox_backlog (
        second   BIGINT PRIMARY KEY,
        entered  BIGINT NOT NULL,
        finished BIGINT NOT NULL
    );
    CREATE TABLE outbox_backlog_deltas (
        id       BIGSERIAL PRIMARY KEY,
        second   BIGINT NOT NULL,
        entered  BIGINT NOT NULL,
        finished BIGINT NOT NULL
    );
    CREATE INDEX outbox_jobs_final_unfinished ON outbox_jobs (id)
        WHERE state NOT IN ('pending', 'in_flight') AND finished_at IS NULL;
    CREATE FUNCTION outbox_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO outbox_count_deltas (state, may_have_run, jobs)
            SELECT state, may_have_run, COUNT(*) FROM new_jobs GROUP BY 1, 2;
        INSERT INTO outbox_backlog_deltas (second, entered, finished)
            SELECT (created_at + 999) / 1000, COUNT(*), 0 FROM new_jobs GROUP BY 1;
        RETURN NULL;
    END $$;
    CREATE FUNCTION outbox_count_updated() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO outbox_count_deltas (state, may_have_run, jobs)
            SELECT state, may_have_run, SUM(n)
            FROM (SELECT state, may_have_run, -1 AS n FROM old_jobs
                  UNION ALL SELECT state, may_have_run, 1 FROM new_jobs) AS changed
            GROUP BY 1, 2 HAVING SUM(n) <> 0;
        INSERT INTO outbox_backlog_deltas (second, entered, finished)
            SELECT second, 0, SUM(n)
            FROM (SELECT (finished_at + 999) / 1000 AS second, -1 AS n FROM old_jobs
                  WHERE state NOT IN ('pending', 'in_flight') AND finished_at IS NOT NULL
                  UNION ALL
                  SELECT (finished_at + 999) / 1000, 1 FROM new_jobs
                  WHERE state NOT IN ('pending', 'in_flight') AND finished_at IS NOT NULL)
                AS changed
            GROUP BY 1 HAVING SUM(n) <> 0;
        RETURN NULL;
    END $$;
    CREATE FUNCTION outbox_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO outbox_count_deltas (state, may_have_run, jobs)
            SELECT state, may_have_run, -COUNT(*) FROM old_jobs GROUP BY 1, 2;
        INSERT INTO outbox_backlog_deltas (second, entered, finished)
            SELECT second, SUM(entered), SUM(finished)
            FROM (SELECT (created_at + 999) / 1000 AS second, -1 AS entered, 0 AS finished
                  FROM old_jobs
                  UNION ALL
                  SELECT (finished_at + 999) / 1000, 0, -1 FROM old_jobs
                  WHERE state NOT IN ('pending', 'in_flight') AND finished_at IS NOT NULL)
                AS gone
            GROUP BY 1;
        RETURN NULL;
    END $$;
    CREATE TRIGGER outbox_count_insert AFTER INSERT ON outbox_jobs
        REFERENCING NEW TABLE AS new_jobs
        FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_inserted();
    CREATE TRIGGER outbox_count_update AFTER UPDATE ON outbox_jobs
        REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
        FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_updated();
    CREATE TRIGGER outbox_count_delete AFTER DELETE ON outbox_jobs
        REFERENCING OLD TABLE AS old_jobs
        FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_deleted();
    INSERT INTO outbox_counts (state, may_have_run, jobs)
        SELECT state, may_have_run, COUNT(*) FROM outbox_jobs GROUP BY 1, 2;
    INSERT INTO outbox_backlog (second, entered, finished)
        SELECT second, SUM(entered), SUM(finished)
        FROM (SELECT (created_at + 999) / 1000 AS second, 1 AS entered, 0 AS finished
              FROM outbox_jobs
              UNION ALL
              SELECT (finished_at + 999) / 1000, 0, 1 FROM outbox_jobs
              WHERE state NOT IN ('pending', 'in_flight') AND finished_at IS NOT NULL) AS history
        GROUP BY 1;
",
    // Services the fleet holds down (store.rs: `outage`, `service_down`, `service_up`,
    // `take_probe`): one row a service, its onset while down, when it was last found down and up, and
    // the earliest the fleet's next probe may go.
    "
    CREATE TABLE outbox_services (
        scope         TEXT PRIMARY KEY,
        down_since_ms BIGINT,
        down_at_ms    BIGINT NOT NULL,
        up_at_ms      BIGINT NOT NULL,
        probe_at_ms   BIGINT NOT NULL
    );
",
];

const ENQUEUE: &str = "
    INSERT INTO outbox_jobs (event_id, kind, method, route, body, identity, state, next_at, created_at)
    VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7)
    ON CONFLICT (event_id) DO NOTHING
    RETURNING *";

const GET: &str = "SELECT * FROM outbox_jobs WHERE event_id = $1";

/// The most bytes of the URL parser's message quoted in an error.
const MAX_PARSER_QUOTE: usize = 512;

/// Many jobs in one statement: `$1`..`$6` the columns as arrays, `$7` now; a repeated event ID
/// (stored, or earlier in the arrays) is skipped. It returns the ID of each job stored: a job
/// stored now is what its `NewJob` says, so only the others are read back.
const ENQUEUE_MANY: &str = "
    INSERT INTO outbox_jobs (event_id, kind, method, route, body, identity, state, next_at, created_at)
    SELECT e, k, m, r, b, i, 'pending', $7, $7
    FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[])
        AS t(e, k, m, r, b, i)
    ON CONFLICT (event_id) DO NOTHING
    RETURNING id, event_id";

const GET_MANY: &str = "SELECT * FROM outbox_jobs WHERE event_id = ANY($1)";

/// The most jobs of one `ENQUEUE_MANY` statement: bounded arrays, bounded memory per round trip.
const ENQUEUE_CHUNK: usize = 5_000;

/// `$1` worker, `$2` lease end, `$3` now, `$4` limit, `$5` the latest lease end a worker can
/// hold (now plus `MAX_LEASE`; a job in flight under a later one was wedged, and is due). The horizon counts from the first claim
/// (`first_sent_at`), which is never after the first send: conservative, and safe across a crash
/// between the claim and the send. A job in flight is due again at its lease's end
/// (`next_at = lease_until`), so the due jobs are one range of the partial index
/// `outbox_jobs_claimable`, read in order however long the backlog.
const CLAIM: &str = "
    UPDATE outbox_jobs
    SET state = 'in_flight', lease_owner = $1, lease_until = $2, next_at = $2,
        claim = claim + 1, first_sent_at = COALESCE(first_sent_at, $3)
    WHERE id IN (
        SELECT id FROM outbox_jobs
        WHERE state IN ('pending', 'in_flight')
            AND (next_at <= $3 OR (state = 'in_flight' AND next_at > $5))
        ORDER BY next_at, id
        LIMIT $4
        FOR UPDATE SKIP LOCKED
    )
    RETURNING *";

/// Many records in one statement: the columns of each record as arrays, joined by position.
const RECORD_MANY: &str = "
    UPDATE outbox_jobs AS j
    SET state = v.state, next_at = v.next_at, attempts = j.attempts + v.added,
        calls = j.calls + 1, first_sent_at = COALESCE(j.first_sent_at, v.first_sent_at),
        run_id = v.run_id, last_kind = v.last_kind, last_status = v.last_status,
        last_request_id = v.last_request_id, last_message = v.last_message,
        finished_at = v.finished_at, lease_owner = NULL, lease_until = NULL,
        may_have_run = j.may_have_run OR v.may_have_run
    FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[],
                $6::bigint[], $7::text[], $8::text[], $9::int[], $10::text[], $11::text[],
                $12::bigint[], $13::bool[])
        AS v(id, claim, state, next_at, added, first_sent_at, run_id, last_kind, last_status,
             last_request_id, last_message, finished_at, may_have_run)
    WHERE j.id = v.id AND j.claim = v.claim AND j.state = 'in_flight'
    RETURNING j.id, j.claim";

const COUNTS: &str = "
    SELECT state, SUM(jobs)::BIGINT
    FROM (SELECT state, jobs FROM outbox_counts
          UNION ALL SELECT state, jobs FROM outbox_count_deltas) AS kept
    GROUP BY state";

/// Folds the deltas the triggers appended into `outbox_counts`, before a read of the counts:
/// the rows this statement sees go, their sums are added. A delta committed meanwhile stays for
/// the next fold; two folds at once never move one row twice (the second skips what the first
/// deleted).
const FOLD_COUNTS: &str = "
    WITH moved AS (DELETE FROM outbox_count_deltas RETURNING state, may_have_run, jobs)
    INSERT INTO outbox_counts AS kept (state, may_have_run, jobs)
    SELECT state, may_have_run, SUM(jobs)::BIGINT FROM moved GROUP BY 1, 2
    ON CONFLICT (state, may_have_run) DO UPDATE SET jobs = kept.jobs + EXCLUDED.jobs";

/// Folds the backlog's deltas into `outbox_backlog`, as [`FOLD_COUNTS`] does the counts'.
const FOLD_BACKLOG: &str = "
    WITH moved AS (DELETE FROM outbox_backlog_deltas RETURNING second, entered, finished)
    INSERT INTO outbox_backlog AS kept (second, entered, finished)
    SELECT second, SUM(entered)::BIGINT, SUM(finished)::BIGINT FROM moved GROUP BY 1
    ON CONFLICT (second) DO UPDATE
    SET entered = kept.entered + EXCLUDED.entered, finished = kept.finished + EXCLUDED.finished";

/// `$1` a second: the backlog's history after it.
const BACKLOG_AFTER: &str = "
    SELECT second, SUM(entered)::BIGINT, SUM(finished)::BIGINT
    FROM (SELECT second, entered, finished FROM outbox_backlog WHERE second > $1
          UNION ALL
          SELECT second, entered, finished FROM outbox_backlog_deltas WHERE second > $1) AS kept
    GROUP BY second";

/// The jobs not finished now: pending and in flight, from the kept counts, and any final job
/// without a finish time (none, unless a store of an old schema kept one), from its index.
const NOT_FINISHED: &str = "
    SELECT ((SELECT COALESCE(SUM(jobs), 0)
             FROM (SELECT jobs FROM outbox_counts WHERE state IN ('pending', 'in_flight')
                   UNION ALL
                   SELECT jobs FROM outbox_count_deltas WHERE state IN ('pending', 'in_flight'))
                 AS kept)
          + (SELECT COUNT(*) FROM outbox_jobs
             WHERE state NOT IN ('pending', 'in_flight') AND finished_at IS NULL))::BIGINT";

/// The jobs a call may have run, by state: as [`COUNTS`], of the jobs marked.
const MAY_HAVE_RUN_COUNTS: &str = "
    SELECT state, SUM(jobs)::BIGINT
    FROM (SELECT state, jobs FROM outbox_counts WHERE may_have_run
          UNION ALL SELECT state, jobs FROM outbox_count_deltas WHERE may_have_run) AS kept
    GROUP BY state";

/// `$1` now: the pending jobs due, the jobs in flight, the next due time; each a range of an
/// index (`outbox_jobs_page` on `(state, next_at, id)` for the counts, `outbox_jobs_claimable`
/// for the minimum).
const DUE: &str = "
    SELECT (SELECT COUNT(*) FROM outbox_jobs WHERE state = 'pending' AND next_at <= $1),
           (SELECT COUNT(*) FROM outbox_jobs WHERE state = 'in_flight'),
           (SELECT MIN(next_at) FROM outbox_jobs WHERE state IN ('pending', 'in_flight'))";

/// [`DUE`] among the jobs of the event IDs `$2`, each found by its unique index.
const DUE_AMONG: &str = "
    SELECT COUNT(*) FILTER (WHERE state = 'pending' AND next_at <= $1),
           COUNT(*) FILTER (WHERE state = 'in_flight'),
           MIN(next_at) FILTER (WHERE state IN ('pending', 'in_flight'))
    FROM outbox_jobs WHERE event_id = ANY($2)";
/// `$1` now: the least `next_at` of the due jobs, from the partial index `outbox_jobs_claimable`.
const OLDEST_DUE: &str = "
    SELECT MIN(next_at) FROM outbox_jobs
    WHERE state IN ('pending', 'in_flight') AND next_at <= $1";

const LIST: &str = "SELECT * FROM outbox_jobs ORDER BY id LIMIT $1";

const LIST_STATE: &str = "SELECT * FROM outbox_jobs WHERE state = $1 ORDER BY id LIMIT $2";

/// `$1` state, `$2` and `$3` the `(next_at, id)` to read after, `$4` limit: one range of
/// `outbox_jobs_page`, read in order (`EXPLAIN`, checked in `tests/outbox_postgres.rs`).
const PAGE: &str = "
    SELECT * FROM outbox_jobs
    WHERE state = $1 AND (next_at, id) > ($2, $3)
    ORDER BY next_at, id
    LIMIT $4";

/// Forgets `first_sent_at` (an operator's retry starts the horizon again) and keeps the claim
/// counter (a record of the claim before stays refused).
const REQUEUE: &str = "
    UPDATE outbox_jobs
    SET state = 'pending', next_at = $2, lease_owner = NULL, lease_until = NULL,
        finished_at = NULL, first_sent_at = NULL
    WHERE event_id = $1
    RETURNING *";

/// `$1` scope, `$2` end, `$3` reason, `$4` now: removes the other scopes' ended pauses (not
/// this scope's row, which the upsert may change in the same statement) and keeps the later
/// end of this one, with its reason (the right-hand sides read the row as it was).
const PAUSE: &str = "
    WITH ended AS (DELETE FROM outbox_pauses WHERE until_ms <= $4 AND scope <> $1)
    INSERT INTO outbox_pauses (scope, until_ms, why) VALUES ($1, $2, $3)
    ON CONFLICT (scope) DO UPDATE SET
        why = CASE WHEN EXCLUDED.until_ms > outbox_pauses.until_ms
                   THEN EXCLUDED.why ELSE outbox_pauses.why END,
        until_ms = GREATEST(outbox_pauses.until_ms, EXCLUDED.until_ms)";

/// `$1` scope, `$2` onset, `$3` now: down unless found up at or after now, since the
/// earliest onset; a new outage's first probe may go at once.
const SERVICE_DOWN: &str = "INSERT INTO outbox_services AS s \
    (scope, down_since_ms, down_at_ms, up_at_ms, probe_at_ms) \
    VALUES ($1, $2, $3, 0, $3) ON CONFLICT (scope) DO UPDATE SET \
    probe_at_ms = CASE WHEN s.down_since_ms IS NULL AND s.up_at_ms < EXCLUDED.down_at_ms \
        THEN EXCLUDED.probe_at_ms ELSE s.probe_at_ms END, \
    down_since_ms = CASE \
        WHEN s.down_since_ms IS NOT NULL THEN LEAST(s.down_since_ms, EXCLUDED.down_since_ms) \
        WHEN s.up_at_ms < EXCLUDED.down_at_ms THEN EXCLUDED.down_since_ms END, \
    down_at_ms = GREATEST(s.down_at_ms, EXCLUDED.down_at_ms)";

/// `$1` scope, `$2` now: up unless found down after now.
const SERVICE_UP: &str = "INSERT INTO outbox_services AS s \
    (scope, down_since_ms, down_at_ms, up_at_ms, probe_at_ms) \
    VALUES ($1, NULL, 0, $2, 0) ON CONFLICT (scope) DO UPDATE SET \
    down_since_ms = CASE WHEN s.down_at_ms > EXCLUDED.up_at_ms THEN s.down_since_ms END, \
    up_at_ms = GREATEST(s.up_at_ms, EXCLUDED.up_at_ms)";

const OUTAGE: &str = "SELECT down_since_ms, probe_at_ms FROM outbox_services \
    WHERE scope = $1 AND down_since_ms IS NOT NULL";

const OUTAGES: &str = "SELECT scope, down_since_ms, probe_at_ms FROM outbox_services \
    WHERE down_since_ms IS NOT NULL ORDER BY scope COLLATE \"C\"";

/// `$1` scope, `$2` next, `$3` now: whether the turn was taken, and when the next may go
/// (read before the turn was taken; `NULL` when the service is not down). Of two workers at
/// once, the second waits for the first's row lock and finds the turn taken.
const TAKE_PROBE: &str = "WITH taken AS (UPDATE outbox_services SET probe_at_ms = $2 \
    WHERE scope = $1 AND down_since_ms IS NOT NULL AND probe_at_ms <= $3 RETURNING 1) \
    SELECT (SELECT COUNT(*) FROM taken), \
    (SELECT probe_at_ms FROM outbox_services WHERE scope = $1 AND down_since_ms IS NOT NULL)";

const PAUSED_UNTIL: &str = "SELECT until_ms FROM outbox_pauses WHERE scope = $1 AND until_ms > $2";

const PAUSES: &str = "SELECT scope, until_ms, why FROM outbox_pauses WHERE until_ms > $1 ORDER BY scope COLLATE \"C\"";

/// `$1` scope, `$2` requests, `$3` window in milliseconds, `$4` when stated: the latest
/// statement wins.
const LEARN_WINDOW: &str = "
    INSERT INTO outbox_windows (scope, requests, per_ms, learned_at) VALUES ($1, $2, $3, $4)
    ON CONFLICT (scope) DO UPDATE SET requests = EXCLUDED.requests, per_ms = EXCLUDED.per_ms,
        learned_at = EXCLUDED.learned_at
    WHERE EXCLUDED.learned_at >= outbox_windows.learned_at";

const WINDOW: &str = "SELECT requests, per_ms FROM outbox_windows WHERE scope = $1";

const SLOT_LOCK: &str = "SELECT pg_advisory_xact_lock($1, hashtext($2))";

/// Frees the scope's slots whose time ran out, and reads what stays busy (the statement's
/// snapshot still holds the deleted rows, hence the filter).
const SLOT_BUSY: &str = "
    WITH freed AS (DELETE FROM outbox_slots WHERE scope = $1 AND busy_until <= $2)
    SELECT COUNT(*), MIN(busy_until) FROM outbox_slots WHERE scope = $1 AND busy_until > $2";

const SLOT_TAKE: &str = "INSERT INTO outbox_slots (scope, busy_until) VALUES ($1, $2) RETURNING id";

const SLOT_RELEASE: &str = "UPDATE outbox_slots SET busy_until = $2 WHERE id = $1";

/// How long a [`PostgresStore`] waits for its database; see the module docs.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_outbox::StoreTimeouts;
///
/// let timeouts = StoreTimeouts::new()
///     .connect(Duration::from_secs(3))
///     .statement(Duration::from_secs(5));
/// assert_eq!(timeouts.connect_timeout(), Duration::from_secs(3));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct StoreTimeouts {
    connect: Duration,
    statement: Duration,
}

impl StoreTimeouts {
    /// The default connect timeout: 10 s.
    pub const DEFAULT_CONNECT: Duration = Duration::from_secs(10);
    /// The default statement timeout: 30 s.
    pub const DEFAULT_STATEMENT: Duration = Duration::from_secs(30);

    /// The defaults: 10 s to open a connection, 30 s for each store operation.
    pub const fn new() -> Self {
        Self {
            connect: Self::DEFAULT_CONNECT,
            statement: Self::DEFAULT_STATEMENT,
        }
    }

    /// Sets the longest wait to open a connection: TCP connect, startup and authentication.
    /// A zero duration is taken as 1 ms.
    ///
    /// Default: 10 s.
    pub const fn connect(mut self, timeout: Duration) -> Self {
        self.connect = at_least_a_millisecond(timeout);
        self
    }

    /// Sets the longest wait of one store operation, a connection's opening included.
    /// A zero duration is taken as 1 ms.
    ///
    /// Default: 30 s.
    pub const fn statement(mut self, timeout: Duration) -> Self {
        self.statement = at_least_a_millisecond(timeout);
        self
    }

    /// The connect timeout.
    pub const fn connect_timeout(&self) -> Duration {
        self.connect
    }

    /// The statement timeout.
    pub const fn statement_timeout(&self) -> Duration {
        self.statement
    }
}

impl Default for StoreTimeouts {
    fn default() -> Self {
        Self::new()
    }
}

const fn at_least_a_millisecond(timeout: Duration) -> Duration {
    if timeout.is_zero() {
        Duration::from_millis(1)
    } else {
        timeout
    }
}

/// The outbox's jobs and fleet state in a PostgreSQL database.
///
/// `Debug` shows the user, host, port and database, never the password.
///
/// # Examples
///
/// ```no_run
/// # async fn example() -> hodoflow_retry::Result<()> {
/// use hodoflow_outbox::{Outbox, PostgresStore};
///
/// let store = PostgresStore::connect("postgres://outbox:secret@127.0.0.1/outbox").await?;
/// let outbox = Outbox::new(store);
/// # let _ = outbox;
/// # Ok(())
/// # }
/// ```
pub struct PostgresStore {
    pool: ConnectionPool,
    timeouts: StoreTimeouts,
    waker: Arc<Waker>,
    /// Set once the wake-up listener runs; dropping it (with the store) ends the listener.
    listening: Mutex<Option<watch::Sender<()>>>,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("database", &self.pool.shown)
            .field("connections", &CONNECTIONS)
            .field("timeouts", &self.timeouts)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`, or
    /// the `host=… dbname=…` form; no TLS) and applies the migrations it lacks, in one
    /// transaction under an advisory lock, so processes opening it at once migrate it once.
    ///
    /// The tables are created in the first schema of the `search_path` (set it with
    /// `?options=-c%20search_path%3Dname` to keep several outboxes in one database).
    ///
    /// Every wait is bounded by the default [`StoreTimeouts`]; see
    /// [`connect_with`](Self::connect_with).
    ///
    /// # Errors
    ///
    /// `invalid_input` when `url` cannot be parsed; `transport` when the database cannot be
    /// reached or migrated, or does not answer in time. No message holds the password.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, StoreTimeouts::new()).await
    }

    /// [`connect`](Self::connect) with these timeouts, for the connection and the migrations
    /// as for every later operation.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    pub async fn connect_with(url: &str, timeouts: StoreTimeouts) -> Result<Self> {
        let config: Config = url.parse().map_err(|error: tokio_postgres::Error| {
            // The parser's messages name an option, never its value; cleaned of the password
            // anyway, escaped and bounded.
            let said = error.to_string();
            let said = match url_password(url) {
                Some(password) if password.len() >= 4 => said.replace(&password, "<redacted>"),
                _ => said,
            };
            let said = hodoflow_retry::text::escape(&said);
            Error::invalid_input(format!(
                "the outbox database URL: {}",
                hodoflow_retry::text::bound(&said, MAX_PARSER_QUOTE)
            ))
        })?;
        let pool = ConnectionPool::new(config, timeouts.connect);
        let store = Self {
            pool,
            timeouts,
            waker: Arc::new(Waker::new()),
            listening: Mutex::new(None),
        };
        store.bounded(store.migrate()).await?;
        Ok(store)
    }

    /// `work`, a store operation, bounded by the statement timeout.
    async fn bounded<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        let limit = self.timeouts.statement;
        match tokio::time::timeout(limit, work).await {
            Ok(result) => result,
            Err(_) => {
                self.pool.discard();
                Err(store_message(format!(
                    "the database at {} did not answer within {limit:?} (the store's statement timeout)",
                    self.pool.shown
                )))
            }
        }
    }

    /// `work` boxed as a [`StoreFuture`], bounded by the statement timeout.
    fn boxed<'a, T: 'a>(
        &'a self,
        work: impl Future<Output = Result<T>> + Send + 'a,
    ) -> StoreFuture<'a, T> {
        Box::pin(self.bounded(work))
    }

    /// Applies the migrations the database lacks.
    async fn migrate(&self) -> Result<()> {
        let mut conn = self.pool.get().await?;
        let shown = &self.pool.shown;
        let fail = |error| migration_error(shown, error);
        let transaction = conn.client.transaction().await.map_err(fail)?;
        transaction
            .execute(
                "SELECT pg_advisory_xact_lock($1, $2)",
                &[&LOCK_SPACE, &MIGRATION_LOCK],
            )
            .await
            .map_err(fail)?;
        transaction
            .batch_execute("CREATE TABLE IF NOT EXISTS outbox_schema (version INTEGER PRIMARY KEY)")
            .await
            .map_err(fail)?;
        let applied: i32 = transaction
            .query_one("SELECT COALESCE(MAX(version), 0) FROM outbox_schema", &[])
            .await
            .map_err(fail)?
            .get(0);
        let applied = usize::try_from(applied).unwrap_or(0);
        if applied > MIGRATIONS.len() {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "invalid input: the outbox database at {shown} is at schema version {applied}, newer than this version of the crate knows ({})",
                    MIGRATIONS.len()
                ),
            ));
        }
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
            let version = i32::try_from(index + 1).unwrap_or(i32::MAX);
            transaction.batch_execute(migration).await.map_err(fail)?;
            transaction
                .execute(
                    "INSERT INTO outbox_schema (version) VALUES ($1)",
                    &[&version],
                )
                .await
                .map_err(fail)?;
        }
        transaction.commit().await.map_err(fail)?;
        Ok(())
    }

    /// Runs the prepared statement `sql` once and returns how many rows it changed.
    async fn execute(&self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let mut conn = self.pool.get().await?;
        let statement = conn.prepare(sql).await?;
        conn.client
            .execute(&statement, params)
            .await
            .map_err(store_error)
    }

    /// The counts of a statement's rows of state and count.
    async fn counts_by_state(&self, sql: &'static str) -> Result<Counts> {
        self.query(FOLD_COUNTS, &[]).await?;
        let mut counts = Counts::default();
        for row in self.query(sql, &[]).await? {
            let name: &str = row.try_get(0).map_err(store_error)?;
            let count: i64 = row.try_get(1).map_err(store_error)?;
            let state = JobState::parse(name).ok_or_else(|| {
                store_message(format!("a stored job has an unknown state {name:?}"))
            })?;
            counts.add(state, u64::try_from(count).unwrap_or(0));
        }
        Ok(counts)
    }

    /// Runs the prepared statement `sql` once and returns its rows.
    async fn query(&self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        let mut conn = self.pool.get().await?;
        let statement = conn.prepare(sql).await?;
        conn.client
            .query(&statement, params)
            .await
            .map_err(store_error)
    }
}

impl Store for PostgresStore {
    fn enqueue(&self, job: NewJob) -> StoreFuture<'_, (Job, bool)> {
        self.boxed(async move {
            check_event_id(&job.event_id)?;
            let (method, route) = job.target.to_row();
            let now = millis(job.now);
            let inserted = self
                .query(
                    ENQUEUE,
                    &[
                        &job.event_id,
                        &job.target.kind(),
                        &method,
                        &route,
                        &job.body.as_ref(),
                        &job.identity.as_str(),
                        &now,
                    ],
                )
                .await?;
            if let Some(row) = inserted.first() {
                return Ok((job_of(row)?, true));
            }
            // It existed (or was inserted by another producer since): the stored job wins.
            let existing = self.query(GET, &[&job.event_id]).await?;
            let row = existing.first().ok_or_else(|| {
                store_message("a job that conflicted on its event ID is gone".to_owned())
            })?;
            Ok((job_of(row)?, false))
        })
    }

    fn enqueue_many(&self, jobs: Vec<NewJob>) -> StoreFuture<'_, Vec<(Job, bool)>> {
        self.boxed(async move {
            for job in &jobs {
                check_event_id(&job.event_id)?;
            }
            // One creation time for the batch, as the statement writes it.
            let Some(now) = jobs.first().map(|job| millis(job.now)) else {
                return Ok(Vec::new());
            };
            // An event ID given twice in the batch is read back: which of its jobs the statement
            // stored is not said.
            let mut given = HashSet::with_capacity(jobs.len());
            let repeated: HashSet<&str> = jobs
                .iter()
                .map(|job| job.event_id.as_str())
                .filter(|id| !given.insert(*id))
                .collect();
            let mut conn = self.pool.get().await?;
            let insert = conn.prepare(ENQUEUE_MANY).await?;
            let get = conn.prepare(GET_MANY).await?;
            let transaction = conn.client.transaction().await.map_err(store_error)?;
            // Stored now and given once: their IDs. Stored before, or given twice: their rows.
            let mut inserted: HashMap<String, i64> = HashMap::with_capacity(jobs.len());
            let mut read: HashMap<String, Job> = HashMap::new();
            let mut repeats_inserted: HashSet<String> = HashSet::new();
            for chunk in jobs.chunks(ENQUEUE_CHUNK) {
                let rows: Vec<(String, String)> =
                    chunk.iter().map(|job| job.target.to_row()).collect();
                let event_ids: Vec<&str> = chunk.iter().map(|job| job.event_id.as_str()).collect();
                let kinds: Vec<&str> = chunk.iter().map(|job| job.target.kind()).collect();
                let methods: Vec<&str> = rows.iter().map(|(method, _)| method.as_str()).collect();
                let routes: Vec<&str> = rows.iter().map(|(_, route)| route.as_str()).collect();
                let bodies: Vec<&[u8]> = chunk.iter().map(|job| job.body.as_ref()).collect();
                let identities: Vec<&str> = chunk.iter().map(|job| job.identity.as_str()).collect();
                let returned = transaction
                    .query(
                        &insert,
                        &[
                            &event_ids,
                            &kinds,
                            &methods,
                            &routes,
                            &bodies,
                            &identities,
                            &now,
                        ],
                    )
                    .await
                    .map_err(store_error)?;
                for row in &returned {
                    let id: i64 = row.try_get(0).map_err(store_error)?;
                    let event_id: String = row.try_get(1).map_err(store_error)?;
                    if repeated.contains(event_id.as_str()) {
                        repeats_inserted.insert(event_id);
                    } else {
                        inserted.insert(event_id, id);
                    }
                }
                let others: Vec<&str> = event_ids
                    .iter()
                    .copied()
                    .filter(|id| !inserted.contains_key(*id) && !read.contains_key(*id))
                    .collect();
                if !others.is_empty() {
                    for row in &transaction
                        .query(&get, &[&others])
                        .await
                        .map_err(store_error)?
                    {
                        let job = job_of(row)?;
                        read.insert(job.event_id.clone(), job);
                    }
                }
            }
            transaction.commit().await.map_err(store_error)?;
            // In the order asked: the first of a repeated event ID stored now, if any was.
            let mut stored = Vec::with_capacity(jobs.len());
            for job in jobs {
                if let Some(&id) = inserted.get(&job.event_id) {
                    stored.push((Job::stored(id, job, now), true));
                    continue;
                }
                let row = read.get(&job.event_id).ok_or_else(|| {
                    store_message("a job that conflicted on its event ID is gone".to_owned())
                })?;
                let first = repeats_inserted.remove(&job.event_id);
                stored.push((row.clone(), first));
            }
            Ok(stored)
        })
    }

    fn claim(
        &self,
        worker: &str,
        now: SystemTime,
        lease: Duration,
        limit: usize,
    ) -> StoreFuture<'_, Vec<Job>> {
        let worker = worker.to_owned();
        self.boxed(async move {
            let (now, lease_until, wedged_after) = claim_bounds(now, lease)?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = self
                .query(CLAIM, &[&worker, &lease_until, &now, &limit, &wedged_after])
                .await?;
            let mut jobs = rows.iter().map(job_of).collect::<Result<Vec<_>>>()?;
            // RETURNING keeps no order: by ID (the claim took the oldest due).
            jobs.sort_by_key(|job| job.id);
            Ok(jobs)
        })
    }

    fn record(&self, id: i64, claim: u64, record: Record) -> StoreFuture<'_, bool> {
        self.boxed(async move {
            let written = self.record_many(vec![(id, claim, record)]).await?;
            Ok(written.first().copied().unwrap_or(false))
        })
    }

    fn record_many(&self, records: Vec<(i64, u64, Record)>) -> StoreFuture<'_, Vec<bool>> {
        self.boxed(async move {
            if records.is_empty() {
                return Ok(Vec::new());
            }
            for (_, _, record) in &records {
                check_record(record)?;
            }
            let mut ids = Vec::with_capacity(records.len());
            let mut claims = Vec::with_capacity(records.len());
            let mut states = Vec::with_capacity(records.len());
            let mut next = Vec::with_capacity(records.len());
            let mut added = Vec::with_capacity(records.len());
            let mut first = Vec::with_capacity(records.len());
            let mut runs = Vec::with_capacity(records.len());
            let mut kinds = Vec::with_capacity(records.len());
            let mut statuses = Vec::with_capacity(records.len());
            let mut request_ids = Vec::with_capacity(records.len());
            let mut messages = Vec::with_capacity(records.len());
            let mut finished = Vec::with_capacity(records.len());
            let mut may_have_run = Vec::with_capacity(records.len());
            for (id, claim, record) in &records {
                let last = record.last_error.as_ref();
                ids.push(*id);
                claims.push(i64::try_from(*claim).unwrap_or(i64::MAX));
                states.push(record.state.as_str());
                next.push(millis(record.next_at));
                added.push(i64::from(record.attempts_added));
                first.push(record.first_sent_at.map(millis));
                runs.push(record.run_id.as_deref());
                kinds.push(last.map(|last| last.kind.as_str()));
                statuses.push(last.and_then(|last| last.status).map(i32::from));
                request_ids.push(last.and_then(|last| last.request_id.as_deref()));
                messages.push(last.map(|last| last.message.as_str()));
                finished.push(record.finished_at.map(millis));
                may_have_run.push(record.may_have_run);
            }
            let rows = self
                .query(
                    RECORD_MANY,
                    &[
                        &ids,
                        &claims,
                        &states,
                        &next,
                        &added,
                        &first,
                        &runs,
                        &kinds,
                        &statuses,
                        &request_ids,
                        &messages,
                        &finished,
                        &may_have_run,
                    ],
                )
                .await?;
            let written: std::collections::HashSet<(i64, i64)> = rows
                .iter()
                .map(|row| (row.get::<_, i64>(0), row.get::<_, i64>(1)))
                .collect();
            Ok(ids
                .iter()
                .zip(&claims)
                .map(|(id, claim)| written.contains(&(*id, *claim)))
                .collect())
        })
    }

    fn get(&self, event_id: &str) -> StoreFuture<'_, Option<Job>> {
        let event_id = event_id.to_owned();
        self.boxed(async move {
            // PostgreSQL text holds no NUL: no job has such an ID, and asking would fail.
            if event_id.contains('\0') {
                return Ok(None);
            }
            let rows = self.query(GET, &[&event_id]).await?;
            rows.first().map(job_of).transpose()
        })
    }

    fn counts(&self) -> StoreFuture<'_, Counts> {
        self.boxed(async move { self.counts_by_state(COUNTS).await })
    }

    fn may_have_run_counts(&self) -> StoreFuture<'_, Counts> {
        self.boxed(async move { self.counts_by_state(MAY_HAVE_RUN_COUNTS).await })
    }

    fn oldest_due(&self, now: SystemTime) -> StoreFuture<'_, Option<SystemTime>> {
        self.boxed(async move {
            let rows = self.query(OLDEST_DUE, &[&millis(now)]).await?;
            let oldest: Option<i64> = match rows.first() {
                Some(row) => row.try_get(0).map_err(store_error)?,
                None => None,
            };
            Ok(oldest.map(from_millis))
        })
    }

    fn list(&self, state: Option<JobState>, limit: usize) -> StoreFuture<'_, Vec<Job>> {
        self.boxed(async move {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = match state {
                Some(state) => self.query(LIST_STATE, &[&state.as_str(), &limit]).await?,
                None => self.query(LIST, &[&limit]).await?,
            };
            rows.iter().map(job_of).collect()
        })
    }

    fn list_page(
        &self,
        state: Option<JobState>,
        after: Option<&Cursor>,
        limit: usize,
    ) -> StoreFuture<'_, (Vec<Job>, Option<Cursor>)> {
        let walk = walk(state, after);
        self.boxed(async move {
            let mut read = Vec::new();
            for (state, after) in walk? {
                let wanted =
                    i64::try_from(limit.saturating_add(1) - read.len()).unwrap_or(i64::MAX);
                let (next_at, id) = after.unwrap_or((i64::MIN, i64::MIN));
                let rows = self
                    .query(PAGE, &[&state.as_str(), &next_at, &id, &wanted])
                    .await?;
                for row in &rows {
                    read.push(job_of(row)?);
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
        self.boxed(async move {
            if event_id.contains('\0') {
                return Ok(None);
            }
            let rows = self.query(REQUEUE, &[&event_id, &millis(now)]).await?;
            rows.first().map(job_of).transpose()
        })
    }

    fn due(&self, now: SystemTime, events: Option<Arc<[String]>>) -> StoreFuture<'_, Due> {
        self.boxed(async move {
            let now = millis(now);
            let rows = match &events {
                None => self.query(DUE, &[&now]).await?,
                Some(events) => {
                    let events: Vec<&str> = events.iter().map(String::as_str).collect();
                    self.query(DUE_AMONG, &[&now, &events]).await?
                }
            };
            let row = rows
                .first()
                .ok_or_else(|| store_message("the due counts returned no row".to_owned()))?;
            let count = |index: usize| -> Result<u64> {
                let count: Option<i64> = row.try_get(index).map_err(store_error)?;
                Ok(u64::try_from(count.unwrap_or(0)).unwrap_or(0))
            };
            let next_at: Option<i64> = row.try_get(2).map_err(store_error)?;
            Ok(Due {
                due: count(0)?,
                in_flight: count(1)?,
                next_at: next_at.map(from_millis),
            })
        })
    }

    fn wakeups(&self) -> Wakeups {
        let mut listening = self
            .listening
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if listening.is_none() {
            let (alive, closed) = watch::channel(());
            let (config, connect_timeout) = self.pool.config();
            tokio::spawn(listen::listen(
                config.clone(),
                connect_timeout,
                Arc::clone(&self.waker),
                closed,
            ));
            *listening = Some(alive);
        }
        Wakeups::new(self.waker.subscribe(), true)
    }

    fn pause(
        &self,
        scope: &str,
        until: SystemTime,
        why: &str,
        now: SystemTime,
    ) -> StoreFuture<'_, ()> {
        let (scope, why) = (scope.to_owned(), pause_reason(why).to_owned());
        self.boxed(async move {
            check_scope(&scope)?;
            let until = stored_millis(until, "pause end")?;
            self.execute(PAUSE, &[&scope, &until, &why, &millis(now)])
                .await?;
            Ok(())
        })
    }

    fn paused_until(&self, scope: &str, now: SystemTime) -> StoreFuture<'_, Option<SystemTime>> {
        let scope = scope.to_owned();
        self.boxed(async move {
            check_scope(&scope)?;
            let rows = self.query(PAUSED_UNTIL, &[&scope, &millis(now)]).await?;
            match rows.first() {
                Some(row) => Ok(Some(from_millis(row.try_get(0).map_err(store_error)?))),
                None => Ok(None),
            }
        })
    }

    fn pauses(&self, now: SystemTime) -> StoreFuture<'_, Vec<Pause>> {
        self.boxed(async move {
            let rows = self.query(PAUSES, &[&millis(now)]).await?;
            rows.iter()
                .map(|row| {
                    let scope: String = row.try_get(0).map_err(store_error)?;
                    let until: i64 = row.try_get(1).map_err(store_error)?;
                    let why: String = row.try_get(2).map_err(store_error)?;
                    Ok(Pause::new(scope, from_millis(until), why))
                })
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
        let scope = scope.to_owned();
        self.boxed(async move {
            check_scope(&scope)?;
            let (requests, per_ms) = window_row(requests, per)?;
            let now = stored_millis(now, "time the window was stated")?;
            self.execute(LEARN_WINDOW, &[&scope, &requests, &per_ms, &now])
                .await?;
            Ok(())
        })
    }

    fn window(&self, scope: &str) -> StoreFuture<'_, Option<(u32, Duration)>> {
        let scope = scope.to_owned();
        self.boxed(async move {
            check_scope(&scope)?;
            let rows = self.query(WINDOW, &[&scope]).await?;
            match rows.first() {
                Some(row) => Ok(Some(window_of(
                    row.try_get(0).map_err(store_error)?,
                    row.try_get(1).map_err(store_error)?,
                ))),
                None => Ok(None),
            }
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
        self.boxed(async move {
            let busy_until = millis(now.checked_add(hold).unwrap_or(now));
            let now = millis(now);
            let mut conn = self.pool.get().await?;
            let lock = conn.prepare(SLOT_LOCK).await?;
            let busy = conn.prepare(SLOT_BUSY).await?;
            let take = conn.prepare(SLOT_TAKE).await?;
            let transaction = conn.client.transaction().await.map_err(store_error)?;
            transaction
                .execute(&lock, &[&LOCK_SPACE, &scope])
                .await
                .map_err(store_error)?;
            let row = transaction
                .query_one(&busy, &[&scope, &now])
                .await
                .map_err(store_error)?;
            let count: i64 = row.try_get(0).map_err(store_error)?;
            let first_free: Option<i64> = row.try_get(1).map_err(store_error)?;
            let slot = if count < i64::from(limit) {
                let row = transaction
                    .query_one(&take, &[&scope, &busy_until])
                    .await
                    .map_err(store_error)?;
                Slot::Granted(row.try_get(0).map_err(store_error)?)
            } else {
                // `limit` 0 with no slot busy: nothing ever frees; say "now" rather than never.
                Slot::FreeAt(from_millis(first_free.unwrap_or(now)))
            };
            transaction.commit().await.map_err(store_error)?;
            Ok(slot)
        })
    }

    fn release_slot(&self, id: i64, busy_until: SystemTime) -> StoreFuture<'_, ()> {
        self.boxed(async move {
            self.execute(SLOT_RELEASE, &[&id, &millis(busy_until)])
                .await?;
            Ok(())
        })
    }

    fn outage(&self, scope: &str) -> StoreFuture<'_, Option<Outage>> {
        let scope = scope.to_owned();
        self.boxed(async move {
            check_scope(&scope)?;
            let rows = self.query(OUTAGE, &[&scope]).await?;
            match rows.first() {
                Some(row) => Ok(Some(Outage::new(
                    from_millis(row.try_get(0).map_err(store_error)?),
                    from_millis(row.try_get(1).map_err(store_error)?),
                ))),
                None => Ok(None),
            }
        })
    }

    fn outages(&self) -> StoreFuture<'_, Vec<ServiceOutage>> {
        self.boxed(async move {
            let rows = self.query(OUTAGES, &[]).await?;
            rows.iter()
                .map(|row| {
                    let scope: String = row.try_get(0).map_err(store_error)?;
                    let since: i64 = row.try_get(1).map_err(store_error)?;
                    let probe_at: i64 = row.try_get(2).map_err(store_error)?;
                    let outage = Outage::new(from_millis(since), from_millis(probe_at));
                    Ok(ServiceOutage::new(scope, outage))
                })
                .collect()
        })
    }

    fn service_down(&self, scope: &str, since: SystemTime, now: SystemTime) -> StoreFuture<'_, ()> {
        let scope = scope.to_owned();
        self.boxed(async move {
            check_scope(&scope)?;
            let since = stored_millis(since, "outage onset")?;
            let now = stored_millis(now, "time the outage was found")?;
            self.execute(SERVICE_DOWN, &[&scope, &since, &now]).await?;
            Ok(())
        })
    }

    fn service_up(&self, scope: &str, now: SystemTime) -> StoreFuture<'_, ()> {
        let scope = scope.to_owned();
        self.boxed(async move {
            check_scope(&scope)?;
            let now = stored_millis(now, "time of the answer")?;
            self.execute(SERVICE_UP, &[&scope, &now]).await?;
            Ok(())
        })
    }

    fn take_probe(&self, scope: &str, next: SystemTime, now: SystemTime) -> StoreFuture<'_, Probe> {
        let scope = scope.to_owned();
        self.boxed(async move {
            check_scope(&scope)?;
            let next = stored_millis(next, "next probe")?;
            let now = stored_millis(now, "time of the probe")?;
            let rows = self.query(TAKE_PROBE, &[&scope, &next, &now]).await?;
            let row = rows
                .first()
                .ok_or_else(|| store_message("no row from a probe's turn".to_owned()))?;
            let taken: i64 = row.try_get(0).map_err(store_error)?;
            let at: Option<i64> = row.try_get(1).map_err(store_error)?;
            Ok(match (taken, at) {
                (1.., _) => Probe::Granted,
                (_, Some(at)) => Probe::NotBefore(from_millis(at)),
                (_, None) => Probe::Up,
            })
        })
    }

    fn backlog(
        &self,
        from: SystemTime,
        step: Duration,
        points: usize,
    ) -> StoreFuture<'_, Vec<u64>> {
        let (from, step) = (millis(from), super::store::backlog_step(step));
        self.boxed(async move {
            self.query(FOLD_BACKLOG, &[]).await?;
            let rows = self.query(NOT_FINISHED, &[]).await?;
            let now: i64 = match rows.first() {
                Some(row) => row.try_get(0).map_err(store_error)?,
                None => 0,
            };
            let rows = self.query(BACKLOG_AFTER, &[&from.div_euclid(1000)]).await?;
            let mut history = Vec::with_capacity(rows.len());
            for row in &rows {
                let get = |at: usize| -> Result<i64> { row.try_get(at).map_err(store_error) };
                history.push((get(0)?, get(1)?, get(2)?));
            }
            Ok(super::store::backlog_from_history(
                now, history, from, step, points,
            ))
        })
    }
}

/// The job of a row of `outbox_jobs`.
fn job_of(row: &Row) -> Result<Job> {
    let get_i64 = |name: &str| -> Result<i64> { row.try_get(name).map_err(store_error) };
    let get_opt = |name: &str| -> Result<Option<i64>> { row.try_get(name).map_err(store_error) };
    let text = |name: &str| -> Result<String> { row.try_get(name).map_err(store_error) };
    let opt_text =
        |name: &str| -> Result<Option<String>> { row.try_get(name).map_err(store_error) };
    let count =
        |name: &str| -> Result<u32> { Ok(u32::try_from(get_i64(name)?).unwrap_or(u32::MAX)) };

    let kind = text("kind")?;
    let state = text("state")?;
    let body: Vec<u8> = row.try_get("body").map_err(store_error)?;
    let last_error = match opt_text("last_kind")? {
        Some(kind) => {
            let status: Option<i32> = row.try_get("last_status").map_err(store_error)?;
            Some(LastError {
                kind,
                status: status.and_then(|status| u16::try_from(status).ok()),
                request_id: opt_text("last_request_id")?,
                message: opt_text("last_message")?.unwrap_or_default(),
            })
        }
        None => None,
    };
    Ok(Job {
        id: get_i64("id")?,
        event_id: text("event_id")?,
        target: Target::from_row(&kind, &text("method")?, &text("route")?)?,
        body: body.into(),
        identity: IdempotencyKey::new(text("identity")?)?,
        state: JobState::parse(&state)
            .ok_or_else(|| store_message(format!("a stored job has an unknown state {state:?}")))?,
        calls: count("calls")?,
        attempts: count("attempts")?,
        next_at: from_millis(get_i64("next_at")?),
        created_at: from_millis(get_i64("created_at")?),
        first_sent_at: get_opt("first_sent_at")?.map(from_millis),
        finished_at: get_opt("finished_at")?.map(from_millis),
        run_id: opt_text("run_id")?,
        last_error,
        lease_owner: opt_text("lease_owner")?,
        lease_until: get_opt("lease_until")?.map(from_millis),
        claim: u64::try_from(get_i64("claim")?).unwrap_or(0),
        may_have_run: row.try_get("may_have_run").map_err(store_error)?,
    })
}

/// A driver error as the crate's. The driver's messages never hold the URL.
fn store_error(error: tokio_postgres::Error) -> Error {
    store_message(error.to_string()).with_source(error)
}

/// A store failure.
fn store_message(what: String) -> Error {
    Error::new(
        ErrorKind::Transport,
        format!("the outbox's PostgreSQL store failed: {what}"),
    )
}

fn migration_error(shown: &str, error: tokio_postgres::Error) -> Error {
    Error::new(
        ErrorKind::Transport,
        format!("the outbox database at {shown} could not be migrated: {error}"),
    )
    .with_source(error)
}

/// The password of a `postgres://user:password@…` URL, to keep it out of error messages.
fn url_password(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))?;
    let userinfo = &rest[..rest.find('@')?];
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty()).then(|| password.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_password_of_a_url_to_redact_it() {
        assert_eq!(
            url_password("postgres://outbox:s3cr%40t@db:5432/outbox").as_deref(),
            Some("s3cr%40t")
        );
        assert_eq!(url_password("postgres://outbox@db/outbox"), None);
        assert_eq!(url_password("host=db user=outbox"), None);
    }

    /// A port that accepts TCP and never answers (`outbox status` once hung for more than 150 s
    /// on one) is a `transport` error within the connect timeout.
    #[tokio::test]
    async fn a_database_that_never_answers_is_an_error_within_the_connect_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let url = format!("postgres://outbox:s3cret@127.0.0.1:{port}/outbox?connect_timeout=3");
        let timeouts = StoreTimeouts::new()
            .connect(Duration::from_millis(300))
            .statement(Duration::from_secs(1));
        let started = std::time::Instant::now();
        let error = PostgresStore::connect_with(&url, timeouts)
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "{error}");
        assert_eq!(error.kind(), ErrorKind::Transport);
        assert!(error.to_string().contains("connect timeout"), "{error}");
        assert!(!error.to_string().contains("s3cret"), "{error}");
    }

    #[tokio::test]
    async fn an_unparsable_url_is_invalid_input_without_its_password() {
        let error = PostgresStore::connect("postgres://outbox:s3cret@db:notaport/outbox")
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        assert!(!error.to_string().contains("s3cret"), "{error}");
    }
}
