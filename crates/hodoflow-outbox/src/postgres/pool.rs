//! The PostgreSQL store's connection pool: at most [`CONNECTIONS`] connections, opened as
//! needed, each leased to one task at a time and prepared statement by statement.
//!
//! Why not `deadpool-postgres` or `bb8`: four connections, one lease type and a timeout epoch
//! are about 150 lines, and either crate would add a dependency tree to the `postgres`
//! feature for less control over what a timed-out lease does (here: the pool forgets every
//! connection leased before the timeout, since one may hold a statement the server never
//! answered).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, NoTls, Statement};

use hodoflow_retry::{Error, ErrorKind, Result};

use super::{store_error, store_message};

/// The most connections a store opens.
pub(super) const CONNECTIONS: usize = 4;

/// One connection and the statements it prepared.
pub(super) struct Conn {
    pub(super) client: Client,
    statements: HashMap<&'static str, Statement>,
}

impl Conn {
    /// The statement `sql`, prepared on this connection once.
    pub(super) async fn prepare(&mut self, sql: &'static str) -> Result<Statement> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql).await.map_err(store_error)?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }
}

/// At most [`CONNECTIONS`] connections, opened as needed, each used by one task at a time.
pub(super) struct ConnectionPool {
    config: Config,
    /// `user@host:port/database`, for messages and `Debug`.
    pub(super) shown: String,
    idle: Mutex<Vec<Conn>>,
    permits: Semaphore,
    /// The longest wait to open a connection.
    connect_timeout: Duration,
    /// Bumped when an operation timed out: a connection leased before it is not reused.
    epoch: AtomicU64,
}

impl ConnectionPool {
    pub(super) fn new(config: Config, connect_timeout: Duration) -> Self {
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(host)) => host.clone(),
            #[cfg(unix)]
            Some(Host::Unix(path)) => path.display().to_string(),
            None => "localhost".to_owned(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let user = config.get_user().unwrap_or("");
        let database = config.get_dbname().unwrap_or(user);
        Self {
            shown: format!("{user}@{host}:{port}/{database}"),
            config,
            idle: Mutex::new(Vec::with_capacity(CONNECTIONS)),
            permits: Semaphore::new(CONNECTIONS),
            connect_timeout,
            epoch: AtomicU64::new(0),
        }
    }

    /// What the pool connects with, and its connect timeout: for a connection of another use
    /// (the wake-up listener).
    pub(super) fn config(&self) -> (&Config, Duration) {
        (&self.config, self.connect_timeout)
    }

    /// Forgets every idle connection and every one leased now: after a timeout, one of them may
    /// hold a statement the server never answered.
    pub(super) fn discard(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
    }

    /// A connection for this task alone: an idle one, or a new one.
    pub(super) async fn get(&self) -> Result<Lease<'_>> {
        let permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| store_message("the connection pool is closed".to_owned()))?;
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        let conn = match idle {
            Some(conn) if !conn.client.is_closed() => conn,
            _ => self.open().await?,
        };
        Ok(Lease {
            pool: self,
            conn: Some(conn),
            epoch: self.epoch.load(Ordering::Acquire),
            _permit: permit,
        })
    }

    async fn open(&self) -> Result<Conn> {
        let limit = self.connect_timeout;
        let connected = tokio::time::timeout(limit, self.config.connect(NoTls))
            .await
            .map_err(|_| {
                Error::new(
                    ErrorKind::Transport,
                    format!(
                        "could not connect to the outbox database at {}: no answer within {limit:?} (the store's connect timeout)",
                        self.shown
                    ),
                )
            })?;
        let (client, connection) = connected.map_err(|error| {
            Error::new(
                ErrorKind::Transport,
                format!(
                    "could not connect to the outbox database at {}: {error}",
                    self.shown
                ),
            )
            .with_source(error)
        })?;
        // The connection's task ends when the client is dropped or the server goes away; a
        // failed query reports the error, so the task has nothing to add.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            client,
            statements: HashMap::new(),
        })
    }
}

/// A connection taken from the [`ConnectionPool`]; back to it when dropped.
pub(super) struct Lease<'a> {
    pool: &'a ConnectionPool,
    conn: Option<Conn>,
    /// The pool's epoch when leased: the connection goes back only if it has not moved since.
    epoch: u64,
    _permit: SemaphorePermit<'a>,
}

impl std::ops::Deref for Lease<'_> {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        self.conn
            .as_ref()
            .expect("a lease holds its connection until dropped")
    }
}

impl std::ops::DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("a lease holds its connection until dropped")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let current = self.pool.epoch.load(Ordering::Acquire) == self.epoch;
        if let Some(conn) = self
            .conn
            .take()
            .filter(|conn| current && !conn.client.is_closed())
        {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(conn);
        }
    }
}
