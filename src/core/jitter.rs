//! The random draws of one client: backoff jitter and the gate's spread, seedable.
//!
//! A client draws from its own small generator instead of the thread's, so that a seeded client
//! (tests, the fleet simulator) waits the same times on every run. `SmallRng` (rand's
//! Xoshiro256++) is fast and plenty for jitter; nothing here needs a cryptographic generator.

use std::fmt;
use std::sync::Mutex;

use rand::SeedableRng;
use rand::rngs::SmallRng;

/// A client's generator, behind a lock held only for one draw.
pub(crate) struct Jitter(Mutex<SmallRng>);

impl Jitter {
    /// A generator from `seed`, or from the operating system.
    pub(crate) fn new(seed: Option<u64>) -> Self {
        Self(Mutex::new(match seed {
            Some(seed) => SmallRng::seed_from_u64(seed),
            None => SmallRng::from_os_rng(),
        }))
    }

    /// Runs `draw` with the generator.
    pub(crate) fn with<R>(&self, draw: impl FnOnce(&mut SmallRng) -> R) -> R {
        let mut rng = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        draw(&mut rng)
    }
}

/// A client's generator as the plan draws from it: locked for each draw alone, so that a step
/// that draws nothing (most do) takes no lock, and no step holds the lock while it decides.
pub(crate) struct Draws<'a>(pub(crate) &'a Jitter);

impl rand::RngCore for Draws<'_> {
    fn next_u32(&mut self) -> u32 {
        self.0.with(rand::RngCore::next_u32)
    }

    fn next_u64(&mut self) -> u64 {
        self.0.with(rand::RngCore::next_u64)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.with(|rng| rng.fill_bytes(dest));
    }
}

impl fmt::Debug for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Jitter")
    }
}
