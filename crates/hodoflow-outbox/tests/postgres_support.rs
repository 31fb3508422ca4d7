//! A fresh PostgreSQL schema per test, in the database of `OUTBOX_DATABASE_URL`, so the tests
//! run in parallel without seeing each other's jobs.
//!
//! Without the variable a test prints one line and passes, unless `CI_REQUIRES_POSTGRES=1`
//! (set by `.ci/run`, which starts a throwaway cluster): then it fails, so CI never skips.

#![allow(dead_code, reason = "each test file uses a part of the support module")]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio_postgres::{Client, NoTls};

/// The variable that holds the database URL.
pub const URL_VAR: &str = "OUTBOX_DATABASE_URL";

/// What a test prints when it skips.
pub const SKIPPED: &str =
    "skipped: set OUTBOX_DATABASE_URL to a PostgreSQL database, as .ci/run does";

/// A schema of its own for one test; [`TestDb::drop_schema`] removes it.
#[derive(Debug)]
pub struct TestDb {
    /// The database URL with the schema first in the `search_path`.
    pub url: String,
    /// The schema's name.
    pub schema: String,
    admin: Client,
}

/// A fresh schema for the test `name`, or `None` (after saying so) when no database is set.
///
/// # Panics
///
/// When no database is set and `CI_REQUIRES_POSTGRES=1`, or when the database cannot be
/// reached.
pub async fn database(name: &str) -> Option<TestDb> {
    let Ok(base) = std::env::var(URL_VAR) else {
        if std::env::var("CI_REQUIRES_POSTGRES").as_deref() == Ok("1") {
            panic!(
                "CI_REQUIRES_POSTGRES=1 but {URL_VAR} is not set: the PostgreSQL tests must not skip here"
            );
        }
        println!("{name}: {SKIPPED}");
        return None;
    };
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| since.subsec_nanos())
        .unwrap_or(0);
    let schema = format!(
        "outbox_test_{}_{}_{nanos}_{}",
        name.chars().take(24).collect::<String>(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
    .to_lowercase();
    let admin = connect(&base).await;
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap_or_else(|error| panic!("CREATE SCHEMA {schema}: {error}"));
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options=-c%20search_path%3D{schema}");
    Some(TestDb { url, schema, admin })
}

/// A client of `url`, its connection driven on a task.
pub async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|error| panic!("cannot connect to {URL_VAR}: {error}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

impl TestDb {
    /// A client whose `search_path` is the test's schema, to look at the tables directly.
    pub async fn client(&self) -> Client {
        connect(&self.url).await
    }

    /// The test's URL with `password` in it (the cluster of `.ci/run` trusts local users, so
    /// any password connects).
    pub fn url_with_password(&self, password: &str) -> String {
        let (scheme, rest) = self.url.split_once("://").expect("a postgres:// URL");
        let (user, host) = rest.split_once('@').expect("a URL with a user");
        let user = user.split(':').next().unwrap_or(user);
        format!("{scheme}://{user}:{password}@{host}")
    }

    /// Removes the schema and everything in it.
    pub async fn drop_schema(self) {
        self.admin
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema))
            .await
            .unwrap_or_else(|error| panic!("DROP SCHEMA {}: {error}", self.schema));
    }
}
