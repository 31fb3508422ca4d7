//! What one run simulates: the fleet, its load, the server, the trigger and the clock.
//!
//! Every figure is a function of a [`Scenario`] and a [`Policy`](crate::Policy): the same
//! scenario (seed included) gives the same arrivals, the same service times and the same jitter
//! draws to every policy, so policies are compared on the same seeded events.

use std::time::Duration;

use serde::Serialize;

/// The shape of one sender: how many of its events it has in flight at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// One event at a time; later events wait in the sender's own FIFO queue.
    Sequential,
    /// A pool of 16: at most 16 events in flight, the rest wait.
    Pool16,
    /// Every event in flight as soon as it arrives.
    AllInFlight,
}

impl Shape {
    /// Events in flight at once, `None` for no limit.
    pub fn concurrency(self) -> Option<usize> {
        match self {
            Shape::Sequential => Some(1),
            Shape::Pool16 => Some(16),
            Shape::AllInFlight => None,
        }
    }
}

/// How the senders' shapes are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mix {
    /// Shapes in turn, sequential, pool of 16, all in flight, among the shapes that can carry a
    /// sender's share of the load: a shape of concurrency k only where the sender's rate is at
    /// most k × [`Mix::EVENTS_PER_SLOT`] events a second, so no sender is saturated by its own
    /// shape while the server is healthy (10 senders at 13.3k/s are all "all in flight").
    Mixed,
    /// Every sender of one shape.
    All(Shape),
}

impl Mix {
    /// The rate one slot of a sender may carry in [`Mix::Mixed`]: 20 events a second, a tenth
    /// of what a slot serves at the healthy latency of a few milliseconds.
    pub const EVENTS_PER_SLOT: f64 = 20.0;

    /// The shape of sender `index` when each of them offers `rate` events a second.
    pub fn shape(self, index: usize, rate: f64) -> Shape {
        match self {
            Mix::All(shape) => shape,
            Mix::Mixed => {
                let fits = |shape: Shape| {
                    shape
                        .concurrency()
                        .is_none_or(|k| rate <= k as f64 * Self::EVENTS_PER_SLOT)
                };
                let shapes: Vec<Shape> = [Shape::Sequential, Shape::Pool16, Shape::AllInFlight]
                    .into_iter()
                    .filter(|shape| fits(*shape))
                    .collect();
                shapes[index % shapes.len()]
            }
        }
    }
}

/// What tips the server over.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Trigger {
    /// The server's capacity falls by `depth` (0.6: to 0.4 of capacity) for `duration`: every
    /// request that starts service meanwhile takes 1 / (1 - depth) times as long.
    Drop {
        /// When it begins, from the start of the run.
        #[serde(with = "secs")]
        start: Duration,
        /// How long it lasts.
        #[serde(with = "secs")]
        duration: Duration,
        /// The fraction of capacity lost, between 0 and 1 (exclusive).
        depth: f64,
    },
    /// The offered load is multiplied by `factor` for `duration`.
    Spike {
        /// When it begins, from the start of the run.
        #[serde(with = "secs")]
        start: Duration,
        /// How long it lasts.
        #[serde(with = "secs")]
        duration: Duration,
        /// The multiplier of the arrival rate.
        factor: f64,
    },
}

impl Trigger {
    /// When the trigger begins and ends, in seconds from the start.
    pub fn window(&self) -> (f64, f64) {
        let (start, duration) = match self {
            Trigger::Drop {
                start, duration, ..
            }
            | Trigger::Spike {
                start, duration, ..
            } => (start, duration),
        };
        (
            start.as_secs_f64(),
            start.as_secs_f64() + duration.as_secs_f64(),
        )
    }

    /// The server's capacity at `t` seconds, as a fraction of its healthy capacity.
    pub(crate) fn capacity_at(&self, t: f64) -> f64 {
        let (start, end) = self.window();
        match self {
            Trigger::Drop { depth, .. } if t >= start && t < end => 1.0 - depth,
            _ => 1.0,
        }
    }

    /// The arrival rate's multiplier at `t` seconds.
    pub(crate) fn load_at(&self, t: f64) -> f64 {
        let (start, end) = self.window();
        match self {
            Trigger::Spike { factor, .. } if t >= start && t < end => *factor,
            _ => 1.0,
        }
    }
}

/// How the server sheds load instead of queueing it. Off in the OSDI'22 case.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Shedding {
    /// Above this many queued requests a new one is answered at once `503` with `Retry-After`.
    pub queue_limit: Option<usize>,
    /// Above this many requests a second (a token bucket with a second's burst) a new one is
    /// answered at once `429` with `Retry-After`.
    pub rate_limit: Option<f64>,
    /// The `Retry-After` of both, in whole seconds.
    pub retry_after_secs: u32,
}

impl Shedding {
    /// `503` with `Retry-After: 1` above one second of queue at healthy capacity
    /// (`capacity` requests), a third of the OSDI'22 client timeout.
    pub fn queue_of_one_second(capacity: f64) -> Self {
        Shedding {
            queue_limit: Some(capacity as usize),
            rate_limit: None,
            retry_after_secs: 1,
        }
    }
}

/// One run's world.
#[derive(Debug, Clone, Serialize)]
pub struct Scenario {
    /// A short name for reports.
    pub name: String,
    /// The seed every stream of the run is derived from.
    pub seed: u64,
    /// How many senders share the load.
    pub senders: usize,
    /// Their shapes.
    pub mix: Mix,
    /// Events offered a second, over all senders, outside a spike.
    pub rate: f64,
    /// The offered load as a fraction of the server's healthy capacity.
    pub load: f64,
    /// The server's workers.
    pub workers: usize,
    /// The trigger.
    pub trigger: Trigger,
    /// How long the run lasts, in virtual time.
    #[serde(with = "secs")]
    pub duration: Duration,
    /// Load shedding at the server.
    pub shedding: Shedding,
    /// The per-attempt timeout of the peers that have none of their own (reqwest has no
    /// default timeout): the OSDI'22 artifact's 3 s. The SDK keeps its own default (15 s).
    #[serde(with = "secs")]
    pub client_timeout: Duration,
}

impl Scenario {
    /// The OSDI'22 artifact's client rate: 13.3k requests a second.
    pub const OSDI_RATE: f64 = 13_300.0;
    /// The load the model is calibrated at (see the crate docs): 0.63 of capacity, where the OSDI'22 case and its two neighbours reproduce.
    pub const LOAD: f64 = 0.63;
    /// The server's workers.
    pub const WORKERS: usize = 64;
    /// The OSDI'22 artifact's client timeout.
    pub const OSDI_TIMEOUT: Duration = Duration::from_secs(3);
    /// When triggers begin.
    pub const TRIGGER_START: Duration = Duration::from_secs(10);
    /// How long after a trigger's end a run goes on: 60 s to call it metastable, and 5 s of
    /// hold beyond.
    pub const AFTER_TRIGGER: Duration = Duration::from_secs(70);

    /// The OSDI'22 case: the server drops to 0.40 of capacity for 10 s, no shedding.
    pub fn osdi22(seed: u64, senders: usize, mix: Mix, rate: f64) -> Self {
        Self::drop(seed, senders, mix, rate, 0.6, Duration::from_secs(10))
    }

    /// A capacity drop of `depth` for `duration`, the run lasting until
    /// [`Scenario::AFTER_TRIGGER`] after it.
    pub fn drop(
        seed: u64,
        senders: usize,
        mix: Mix,
        rate: f64,
        depth: f64,
        duration: Duration,
    ) -> Self {
        Scenario {
            name: format!("drop {:.2} x {} s", depth, duration.as_secs_f64()),
            seed,
            senders,
            mix,
            rate,
            load: Self::LOAD,
            workers: Self::WORKERS,
            trigger: Trigger::Drop {
                start: Self::TRIGGER_START,
                duration,
                depth,
            },
            duration: Self::TRIGGER_START + duration + Self::AFTER_TRIGGER,
            shedding: Shedding::default(),
            client_timeout: Self::OSDI_TIMEOUT,
        }
    }

    /// The server's healthy capacity in requests a second.
    pub fn capacity(&self) -> f64 {
        self.rate / self.load
    }

    /// The mean service time of one request by one worker, in seconds.
    pub fn mean_service(&self) -> f64 {
        self.workers as f64 / self.capacity()
    }

    /// The same scenario with the server shedding above a second of queue.
    pub fn shedding(mut self) -> Self {
        self.shedding = Shedding::queue_of_one_second(self.capacity());
        self.name.push_str(", shedding");
        self
    }
}

/// Durations as seconds in JSON.
mod secs {
    use std::time::Duration;

    pub(super) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mixed_fleet_gives_small_shapes_only_to_senders_that_can_carry_their_share() {
        assert_eq!(Mix::Mixed.shape(0, 1330.0), Shape::AllInFlight);
        assert_eq!(Mix::Mixed.shape(0, 133.0), Shape::Pool16);
        assert_eq!(Mix::Mixed.shape(1, 133.0), Shape::AllInFlight);
        assert_eq!(Mix::Mixed.shape(0, 13.3), Shape::Sequential);
        assert_eq!(Mix::Mixed.shape(2, 13.3), Shape::AllInFlight);
    }

    #[test]
    fn the_osdi_case_drops_to_forty_percent_for_ten_seconds() {
        let s = Scenario::osdi22(1, 10, Mix::Mixed, 13_300.0);
        assert_eq!(s.trigger.window(), (10.0, 20.0));
        assert!((s.trigger.capacity_at(15.0) - 0.4).abs() < 1e-9);
        assert_eq!(s.trigger.capacity_at(20.0), 1.0);
        assert_eq!(s.duration, Duration::from_secs(90));
    }
}
