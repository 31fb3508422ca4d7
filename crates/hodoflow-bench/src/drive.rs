//! Running many operations at once: a fixed number of workers draining a count.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hodoflow_retry::{DeliveryId, HodoflowClient, IdempotencyKey};
use tokio::sync::Barrier;

/// Runs `op(0)` .. `op(count - 1)` on `concurrency` spawned workers and returns the results
/// in index order. With `concurrency >= count` every operation starts at once.
pub(crate) async fn each<T, F, Fut>(count: u64, concurrency: usize, op: F) -> Vec<T>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = T> + Send,
    T: Send + 'static,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (op, next) = (op.clone(), next.clone());
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= count {
                        return done;
                    }
                    done.push((index, op(index).await));
                }
            })
        })
        .collect();
    let mut results = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    for worker in workers {
        if let Ok(done) = worker.await {
            results.extend(done);
        }
    }
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, result)| result).collect()
}

/// Releases one delivery of `body` per trigger at the same instant, from a barrier: operation
/// `n` goes to `triggers[n]` with the delivery ID `{prefix}-{n}`. Returns how many failed.
pub(crate) async fn burst(
    sdk: &HodoflowClient,
    triggers: Vec<String>,
    prefix: &'static str,
    body: &'static [u8],
) -> usize {
    let concurrency = triggers.len();
    burst_at(sdk, triggers, prefix, body, concurrency).await
}

/// [`burst`] with at most `concurrency` operations in flight: the first `concurrency` are
/// released together from the barrier, each later one as soon as a worker is free.
pub(crate) async fn burst_at(
    sdk: &HodoflowClient,
    triggers: Vec<String>,
    prefix: &'static str,
    body: &'static [u8],
    concurrency: usize,
) -> usize {
    let count = triggers.len() as u64;
    let concurrency = concurrency.clamp(1, triggers.len().max(1));
    let barrier = Arc::new(Barrier::new(concurrency));
    let (sdk, triggers) = (sdk.clone(), Arc::new(triggers));
    each(count, concurrency, move |n| {
        let (sdk, barrier, triggers) = (sdk.clone(), barrier.clone(), triggers.clone());
        async move {
            let Ok(key) = IdempotencyKey::new(format!("{prefix}-{n}")) else {
                return true;
            };
            if (n as usize) < concurrency {
                barrier.wait().await;
            }
            sdk.deliver(triggers[n as usize].as_str(), Bytes::from_static(body))
                .delivery_id(DeliveryId::new(key))
                .send()
                .await
                .is_err()
        }
    })
    .await
    .into_iter()
    .filter(|failed| *failed)
    .count()
}

/// One operation of a sender loop: when it started and ended, from the loop's start, and what
/// it ended in (`"accepted"` or an error kind).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    pub(crate) started: Duration,
    pub(crate) ended: Duration,
    pub(crate) outcome: &'static str,
}

impl Op {
    pub(crate) fn ok(&self) -> bool {
        self.outcome == "accepted"
    }
}

/// `senders` tasks deliver to the demo trigger one operation after another until `duration`
/// has passed since `start`; every operation is recorded, in no particular order.
pub(crate) async fn loop_senders(
    sdk: &HodoflowClient,
    senders: usize,
    start: Instant,
    duration: Duration,
    prefix: &'static str,
    body: &'static [u8],
) -> Vec<Op> {
    let tasks: Vec<_> = (0..senders)
        .map(|sender| {
            let sdk = sdk.clone();
            tokio::spawn(async move {
                let mut ops = Vec::new();
                let mut n = 0u64;
                while start.elapsed() < duration {
                    let began = start.elapsed();
                    let outcome = match IdempotencyKey::new(format!("{prefix}-{sender}-{n}")) {
                        Ok(key) => match sdk
                            .deliver(hodoflow_mock::DEMO_TRIGGER_TOKEN, Bytes::from_static(body))
                            .delivery_id(DeliveryId::new(key))
                            .send()
                            .await
                        {
                            Ok(_) => "accepted",
                            Err(error) => error.kind().as_str(),
                        },
                        Err(_) => "invalid_id",
                    };
                    ops.push(Op {
                        started: began,
                        ended: start.elapsed(),
                        outcome,
                    });
                    n += 1;
                }
                ops
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        if let Ok(ops) = task.await {
            all.extend(ops);
        }
    }
    all
}

/// How long `sdk`'s retry budget has seen the service down, or `None` while it is up.
pub(crate) fn service_down_for(sdk: &HodoflowClient) -> Option<Duration> {
    sdk.service_down_for(hodoflow_retry::Surface::Webhook)
}

/// How one event of a [`batch`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Accepted, or a duplicate of an earlier acceptance.
    Delivered,
    /// The call ended in this error kind.
    Failed(&'static str),
    /// Never started: the service had been down longer than one call's budget.
    NotStarted,
}

/// What a [`batch`] came to.
#[derive(Debug, Clone)]
pub(crate) struct Batch {
    /// Each event's end, in index order.
    pub(crate) ended: Vec<Ended>,
    /// From the start to the last event's end.
    pub(crate) took: Duration,
}

impl Batch {
    /// Events that ended so.
    pub(crate) fn count(&self, which: impl Fn(Ended) -> bool) -> usize {
        self.ended.iter().filter(|ended| which(**ended)).count()
    }

    /// Events not delivered: failed or not started.
    pub(crate) fn lost(&self) -> usize {
        self.count(|ended| ended != Ended::Delivered)
    }

    /// Events started, delivered or not.
    pub(crate) fn started(&self) -> usize {
        self.count(|ended| ended != Ended::NotStarted)
    }

    /// Failures by error kind, not-started events as `"not_started"`.
    pub(crate) fn failures(&self) -> std::collections::BTreeMap<&'static str, u64> {
        let mut kinds = std::collections::BTreeMap::new();
        for ended in &self.ended {
            match ended {
                Ended::Delivered => {}
                Ended::Failed(kind) => *kinds.entry(*kind).or_default() += 1,
                Ended::NotStarted => *kinds.entry("not_started").or_default() += 1,
            }
        }
        kinds
    }
}

/// The delivery ID of event `n` of a batch with `prefix`.
pub(crate) fn batch_id(prefix: &str, n: u64) -> String {
    format!("{prefix}-{n}")
}

/// Delivers `count` events of `body` to the demo trigger, `concurrency` at a time, the way
/// `hodoflow-send batch` does: event `n` has the delivery ID [`batch_id`]`(prefix, n)`, and
/// before each event starts the pool asks how long the client has seen the service down; once
/// that is at least `max_elapsed` (one call's budget), no further event starts and each left
/// ends [`Ended::NotStarted`].
pub(crate) async fn batch(
    sdk: &HodoflowClient,
    count: u64,
    concurrency: usize,
    prefix: &str,
    body: &'static [u8],
    max_elapsed: Duration,
) -> Batch {
    let started = Instant::now();
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (sdk, prefix) = (sdk.clone(), Arc::<str>::from(prefix));
    let ended = each(count, concurrency, move |n| {
        let (sdk, prefix, stopped) = (sdk.clone(), prefix.clone(), stopped.clone());
        async move {
            if stopped.load(Ordering::Relaxed)
                || service_down_for(&sdk).is_some_and(|down| down >= max_elapsed)
            {
                stopped.store(true, Ordering::Relaxed);
                return Ended::NotStarted;
            }
            let Ok(key) = IdempotencyKey::new(batch_id(&prefix, n)) else {
                return Ended::Failed("invalid_id");
            };
            match sdk
                .deliver(hodoflow_mock::DEMO_TRIGGER_TOKEN, Bytes::from_static(body))
                .delivery_id(DeliveryId::new(key))
                .send()
                .await
            {
                Ok(_) => Ended::Delivered,
                Err(error) => Ended::Failed(error.kind().as_str()),
            }
        }
    })
    .await;
    Batch {
        ended,
        took: started.elapsed(),
    }
}
