//! The PostgreSQL store's wake-ups: one connection of its own that `LISTEN`s on the channel the
//! `outbox_jobs` triggers notify (schema version 3), opened when the store's first workers ask
//! for wake-ups, and opened again when it breaks.
//!
//! Each notification carries the schema of the table it came from; the listener wakes its
//! workers only for its own schema's (another outbox in the same database wakes no one here).
//! Notifications are not queued for a listener that is not connected, so every (re)connection
//! wakes the workers once: whatever was enqueued while no one listened is found by their next
//! claim. A listener that cannot connect tries again after 1 s, doubling up to 30 s (back to 1 s
//! once it listened); the workers' safety poll, and their sleep until the next due job, cover
//! the time in between.

use std::time::Duration;

use tokio::sync::watch;
use tokio_postgres::AsyncMessage;

use tokio_postgres::{Config, NoTls};

use crate::wake::Waker;

/// The channel the triggers of schema version 3 notify.
pub(super) const CHANNEL: &str = "outbox_jobs";

/// The longest wait before connecting again.
const RECONNECT_MAX: Duration = Duration::from_secs(30);

/// Listens until `closed` says the store is gone, waking `waker`'s workers on each
/// notification and on each (re)connection.
pub(super) async fn listen(
    config: Config,
    connect_timeout: Duration,
    waker: std::sync::Arc<Waker>,
    mut closed: watch::Receiver<()>,
) {
    let mut wait = Duration::from_secs(1);
    loop {
        tokio::select! {
            listened = listen_once(&config, connect_timeout, &waker) => {
                if listened {
                    wait = Duration::from_secs(1);
                }
            }
            _ = closed.changed() => return,
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = closed.changed() => return,
        }
        wait = wait.saturating_mul(2).min(RECONNECT_MAX);
    }
}

/// One connection's life: connect, `LISTEN`, wake on every notification until it breaks.
/// Whether it listened.
async fn listen_once(config: &Config, connect_timeout: Duration, waker: &Waker) -> bool {
    let (client, mut connection) = match tokio::time::timeout(
        connect_timeout,
        config.connect(NoTls),
    )
    .await
    {
        Ok(Ok(pair)) => pair,
        Ok(Err(error)) => {
            tracing::warn!(error = %error, "the outbox's wake-up listener could not connect; idle workers poll until it does");
            return false;
        }
        Err(_) => {
            tracing::warn!(
                timeout_ms = connect_timeout.as_millis() as u64,
                "the outbox's wake-up listener could not connect in time; idle workers poll until it does"
            );
            return false;
        }
    };
    // The schema of this store's tables (the first of the search path), which the triggers send:
    // another outbox's jobs in the same database wake no one here.
    let schema = std::sync::OnceLock::new();
    let listened = std::sync::atomic::AtomicBool::new(false);
    let driver = async {
        // The client's LISTEN and every notification go through this connection's messages.
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(note))) => {
                    if schema
                        .get()
                        .is_none_or(|schema: &String| note.payload() == schema)
                    {
                        waker.wake();
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::warn!(error = %error, "the outbox's wake-up listener lost its connection");
                    return;
                }
                None => return,
            }
        }
    };
    let subscribe = async {
        let listening = async {
            let row = client.query_one("SELECT current_schema()", &[]).await?;
            if let Some(name) = row.try_get::<_, Option<String>>(0)? {
                let _ = schema.set(name);
            }
            client.batch_execute(&format!("LISTEN {CHANNEL}")).await
        };
        match listening.await {
            Ok(()) => {
                listened.store(true, std::sync::atomic::Ordering::Relaxed);
                // Anything enqueued before the LISTEN took effect was not announced: look once.
                waker.wake();
                std::future::pending::<()>().await;
            }
            Err(error) => {
                tracing::warn!(error = %error, "the outbox's wake-up listener could not LISTEN");
            }
        }
    };
    tokio::select! {
        () = driver => {}
        () = subscribe => {}
    }
    listened.load(std::sync::atomic::Ordering::Relaxed)
}
