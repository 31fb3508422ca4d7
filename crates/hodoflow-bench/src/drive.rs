//! Running many operations at once: a fixed number of workers draining a count.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
