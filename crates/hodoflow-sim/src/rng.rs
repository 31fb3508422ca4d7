//! The simulator's one source of randomness: SplitMix64, seeded from the scenario's seed.
//!
//! Why not `rand`: every stream (arrivals, service times, each event's jitter) must be derived
//! from the scenario seed by a fixed rule so that the same seed gives the same figures, and each
//! draw must cost a few instructions and no allocation. SplitMix64 (Steele, Lea and Flood, OOPSLA
//! 2014) is that in ten lines; `derive` gives independent streams by mixing a label into the seed.

/// A SplitMix64 generator.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator for `stream` of the scenario seeded with `seed`.
    pub(crate) fn derive(seed: u64, stream: u64) -> Self {
        let mut rng = Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponentially distributed with `mean`.
    pub(crate) fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// Uniform in [0, n).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_and_stream_give_the_same_draws() {
        let a: Vec<u64> = (0..5).map(|_| Rng::derive(7, 3).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(Rng::derive(7, 3).next_u64(), Rng::derive(7, 4).next_u64());
    }

    #[test]
    fn exponential_draws_have_the_mean_asked_for() {
        let mut rng = Rng::derive(1, 1);
        let mean = (0..100_000).map(|_| rng.exp(2.0)).sum::<f64>() / 100_000.0;
        assert!((mean - 2.0).abs() < 0.05, "{mean}");
    }
}
