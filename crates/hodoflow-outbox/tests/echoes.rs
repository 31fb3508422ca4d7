//! A server that echoes every secret the client holds, in every text the client keeps of an
//! answer (the `x-request-id`, the error code an error quotes, a webhook's run ID), at offsets
//! across the cuts an outbox makes (256 bytes of what it stores). No secret's bytes, whole or
//! any piece of 8 bytes or more, may be in the rows of either outbox store. (What a call
//! returns is the SDK's tests/echoes.rs.)
//!
//! The server is `support::hostile` on 127.0.0.1:0; each request's body says what it echoes,
//! where, and after how many bytes of padding.

#[path = "../../../tests/support/mod.rs"]
mod support;

#[cfg(feature = "postgres")]
#[path = "postgres_support.rs"]
mod pg;

use std::time::Duration;

use hodoflow_outbox::{Job, JobState, Outbox, Target};
use hodoflow_retry::limit::RouteLimit;

use support::echo::*;
use support::hostile::Hostile;

/// The stores the suite runs on.
#[derive(Debug, Clone, Copy)]
enum Backend {
    Sqlite,
    #[cfg(feature = "postgres")]
    Postgres,
}

/// A directory removed when dropped.
struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh outbox on `backend`, and the directory of a SQLite one; `None` when PostgreSQL is
/// not set up (the test says so and passes, unless CI requires it).
async fn fresh(backend: Backend) -> Option<(Outbox, Option<Dir>)> {
    match backend {
        Backend::Sqlite => {
            let dir = Dir(std::env::temp_dir().join(format!(
                "hodoflow-echoes-{}-{}",
                std::process::id(),
                rand::random::<u64>()
            )));
            std::fs::create_dir_all(&dir.0).unwrap();
            let outbox = Outbox::sqlite(dir.0.join("outbox.db")).await.unwrap();
            Some((outbox, Some(dir)))
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let db = pg::database("echoes").await?;
            Some((Outbox::postgres(&db.url).await.unwrap(), None))
        }
    }
}

/// Every text a stored job holds but its target and body (which hold the trigger token and
/// the producer's bytes by design).
fn stored_text(job: &Job) -> String {
    let error = job.last_error.as_ref();
    format!(
        "{} | {:?} | {:?} | {:?} | {:?} | {:?} | {:?}",
        job.event_id,
        job.run_id,
        error.map(|e| &e.kind),
        error.map(|e| e.status),
        error.and_then(|e| e.request_id.as_deref()),
        error.map(|e| &e.message),
        job.lease_owner,
    )
}

async fn the_stored_rows_hold_no_secret_a_server_echoes(backend: Backend) {
    let Some((outbox, _dir)) = fresh(backend).await else {
        return;
    };
    let server = Hostile::start(echo).await;
    let orders: Vec<Echo> = orders()
        .into_iter()
        .filter(|order| order.secret != "bearer")
        .collect();
    let events = orders
        .iter()
        .enumerate()
        .map(|(n, order)| (format!("echo-{n}"), Target::webhook(TRIGGER), body(order)));
    outbox.enqueue_many(events).await.unwrap();
    let report = outbox
        .workers(client(&server, false))
        .trigger_limit(Some(
            RouteLimit::new(100_000, Duration::from_secs(1)).unwrap(),
        ))
        .run_until_idle()
        .await
        .unwrap();
    let refusals = orders
        .iter()
        .filter(|order| order.place == Place::Refusal)
        .count();
    assert_eq!(report.failed as usize, refusals, "{report:?}");
    assert_eq!(report.accepted as usize, orders.len() - refusals);
    let jobs = outbox.list(None, 10_000).await.unwrap();
    assert_eq!(jobs.len(), orders.len());
    for job in &jobs {
        let text = stored_text(job);
        assert_clean(&job.event_id, &text, &secrets(&server));
        match job.state {
            JobState::Accepted => {
                assert!(job.run_id.as_ref().is_some_and(|id| id.len() <= 256));
            }
            JobState::Failed => {
                let error = job.last_error.as_ref().unwrap();
                assert!(error.request_id.as_ref().is_some_and(|id| id.len() <= 256));
                assert!(error.message.len() <= 1024);
            }
            state => panic!("{}: {state}", job.event_id),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_rows_hold_no_secret_a_server_echoes_on_sqlite() {
    the_stored_rows_hold_no_secret_a_server_echoes(Backend::Sqlite).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_rows_hold_no_secret_a_server_echoes_on_postgres() {
    the_stored_rows_hold_no_secret_a_server_echoes(Backend::Postgres).await;
}
