//! Counting body copies: allocations whose size is exactly the body's.
//!
//! A copy of a request body needs a buffer of the body's size. The bench binary installs
//! `tracking_allocator::Allocator` as its global allocator; this tracker counts, while counting
//! is on, every allocation of one chosen size. Pick an unusual size (1,031 bytes) so that
//! unrelated buffers do not collide. A buffer that grows past the size (a `Vec` extended in
//! steps) is not counted: this finds whole copies, not bytes appended to a larger buffer.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tracking_allocator::{AllocationGroupId, AllocationRegistry, AllocationTracker};

static SIZE: AtomicUsize = AtomicUsize::new(0);
static COUNT: AtomicU64 = AtomicU64::new(0);

struct SizeTracker;

impl AllocationTracker for SizeTracker {
    fn allocated(&self, _addr: usize, size: usize, _wrapped: usize, _group: AllocationGroupId) {
        if size == SIZE.load(Ordering::Relaxed) {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn deallocated(
        &self,
        _addr: usize,
        _size: usize,
        _wrapped: usize,
        _source: AllocationGroupId,
        _current: AllocationGroupId,
    ) {
    }
}

/// Installs the tracker. Call it once at start, in a binary whose global allocator is
/// `tracking_allocator::Allocator`; later calls do nothing.
pub fn install_body_copy_counter() {
    // Only the first call installs; a second tracker is refused, which is what we want.
    let _ = AllocationRegistry::set_global_tracker(SizeTracker);
}

/// Counts allocations of one size from [`BodyCopies::start`] until [`BodyCopies::stop`].
///
/// One counter runs at a time in a process.
#[derive(Debug)]
pub struct BodyCopies {
    size: usize,
}

impl BodyCopies {
    /// Starts counting allocations of exactly `size` bytes, from zero.
    pub fn start(size: usize) -> Self {
        SIZE.store(size, Ordering::Relaxed);
        COUNT.store(0, Ordering::Relaxed);
        AllocationRegistry::enable_tracking();
        Self { size }
    }

    /// Stops counting and returns the count.
    pub fn stop(self) -> u64 {
        AllocationRegistry::disable_tracking();
        SIZE.store(0, Ordering::Relaxed);
        COUNT.load(Ordering::Relaxed)
    }

    /// Whether allocations are really being counted: the tracker and the tracking allocator
    /// are installed. Allocates one buffer of the size and looks for it in the count.
    pub fn works(&self) -> bool {
        let before = COUNT.load(Ordering::Relaxed);
        let probe = std::hint::black_box(vec![0u8; self.size]);
        drop(probe);
        let works = COUNT.load(Ordering::Relaxed) > before;
        // Take the probe back out, so that the count is only what was measured.
        if works {
            COUNT.fetch_sub(1, Ordering::Relaxed);
        }
        works
    }
}
