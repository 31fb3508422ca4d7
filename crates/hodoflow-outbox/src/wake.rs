//! Wake-ups: how a store tells its idle workers that a job may have become due, so that they
//! wait on the store instead of polling it.
//!
//! An idle worker asks the store when its next job is due ([`Store::due`]) and sleeps until
//! then, or until a wake-up, or until its safety poll, whichever comes first. What wakes it:
//!
//! - **PostgreSQL**: `LISTEN`/`NOTIFY`. A trigger on `outbox_jobs` (schema version 3) notifies
//!   the channel `outbox_jobs` when a job is inserted or made pending (an enqueue, an operator's
//!   `retry`, a reschedule), by any process or by hand-written SQL; the notification is sent
//!   when the transaction commits, so a woken worker finds the job. Each store listens on one
//!   connection of its own, opened when its first workers start. The wake-up crosses processes
//!   and machines, so an idle worker needs only a slow safety poll (30 s by default) against a
//!   lost notification (a listener connection that broke and was opened again wakes everyone
//!   too).
//! - **SQLite**: an in-process signal, sent after an enqueue, a `retry` or a reschedule commits
//!   through the same store (the same [`Outbox`](super::Outbox) or its clones). Another process
//!   writing the file cannot reach it, so a SQLite worker keeps its short poll.
//!
//! [`Store::due`]: super::Store::due

use tokio::sync::watch;

/// The wake-ups of one store, for one waiting worker.
#[derive(Debug, Clone)]
pub struct Wakeups {
    receiver: watch::Receiver<u64>,
    every_process: bool,
}

impl Wakeups {
    /// Wake-ups from `receiver`; `every_process` when a write by any process sends one.
    pub(crate) fn new(receiver: watch::Receiver<u64>, every_process: bool) -> Self {
        Self {
            receiver,
            every_process,
        }
    }

    /// Whether a job enqueued by any process wakes this worker (PostgreSQL), or only one
    /// enqueued through the same store (SQLite).
    pub fn every_process(&self) -> bool {
        self.every_process
    }

    /// Forgets the wake-ups so far: call it before looking for due jobs, so that one sent
    /// while looking is not missed.
    pub fn mark_seen(&mut self) {
        self.receiver.borrow_and_update();
    }

    /// Waits for a wake-up sent since the last [`mark_seen`](Self::mark_seen). Never returns
    /// when the store stopped sending them (the worker's timers still run).
    pub async fn changed(&mut self) {
        if self.receiver.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The sending side, kept by a store: a store of your own keeps one, wakes it when a job may
/// have become due, and hands each worker its [`wakeups`](Self::wakeups).
#[derive(Debug)]
pub struct Waker {
    sender: watch::Sender<u64>,
}

impl Default for Waker {
    fn default() -> Self {
        Self::new()
    }
}

impl Waker {
    /// A waker no worker waits on yet.
    pub fn new() -> Self {
        Self {
            sender: watch::Sender::new(0),
        }
    }

    /// The wake-ups of one more worker; `every_process` when a write by any process wakes it
    /// (as PostgreSQL's `NOTIFY` does), not only one through this store.
    pub fn wakeups(&self, every_process: bool) -> Wakeups {
        Wakeups::new(self.subscribe(), every_process)
    }

    /// Wakes every waiting worker.
    pub fn wake(&self) {
        self.sender
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    /// A receiver for one more worker.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.sender.subscribe()
    }
}
