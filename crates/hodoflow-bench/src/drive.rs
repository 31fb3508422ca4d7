//! Running many operations at once: a fixed number of workers draining a count.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use hodoflow_retry::{DeliveryId, IdempotencyKey, RetryingClient};
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
    sdk: &RetryingClient,
    triggers: Vec<String>,
    prefix: &'static str,
    body: &'static [u8],
) -> usize {
    let count = triggers.len() as u64;
    let barrier = Arc::new(Barrier::new(triggers.len()));
    let (sdk, triggers) = (sdk.clone(), Arc::new(triggers));
    each(count, triggers.len(), move |n| {
        let (sdk, barrier, triggers) = (sdk.clone(), barrier.clone(), triggers.clone());
        async move {
            let Ok(key) = IdempotencyKey::new(format!("{prefix}-{n}")) else {
                return true;
            };
            barrier.wait().await;
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
