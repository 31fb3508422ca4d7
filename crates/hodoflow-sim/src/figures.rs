//! The figures of one run, computed from its per-second series.
//!
//! - **Amplification** is attempts that reached the server per event offered, over the trigger
//!   ("during") and over the 60 s after it ("after").
//! - **Recovery time** is from the trigger's end to the start of the first 5 s in which goodput
//!   holds at 95 % or more of the offered events, second by second.
//! - **Metastable**: not recovered 60 s after the trigger's end.

use serde::{Deserialize, Deserializer, Serialize};

use crate::policy::Policy;
use crate::recorder::{Count, Series};
use crate::scenario::Scenario;

/// Goodput at or above this share of the offered events counts as recovered.
pub const RECOVERED_SHARE: f64 = 0.95;
/// For this many consecutive seconds.
pub const HOLD_SECONDS: usize = 5;
/// Not recovered this long after the trigger's end: metastable.
pub const METASTABLE_AFTER: usize = 60;

/// What one policy did in one scenario.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Figures {
    /// The scenario's name.
    pub scenario: String,
    /// The policy.
    #[serde(deserialize_with = "policy_name")]
    pub policy: &'static str,
    /// The seed.
    pub seed: u64,
    /// Senders.
    pub senders: usize,
    /// Events offered.
    pub offered: u64,
    /// Attempts that reached the server, shed ones included.
    pub attempts: u64,
    /// Events delivered (the sender's call succeeded).
    pub goodput: u64,
    /// Attempts given up at their timeout.
    pub timeouts: u64,
    /// Events given up by their sender's policy.
    pub lost: u64,
    /// Events neither delivered nor given up when the run ended.
    pub unfinished: u64,
    /// Attempts shed by the server (503 or 429).
    pub shed: u64,
    /// Requests served after their client gave up.
    pub wasted: u64,
    /// Deliveries executed.
    pub executed: u64,
    /// Attempts answered `duplicate`.
    pub duplicates_answered: u64,
    /// Events executed more than once (must be 0).
    pub duplicate_executions: u64,
    /// The longest queue seen.
    pub queue_max: u64,
    /// The queue in the run's last second.
    pub queue_at_end: u64,
    /// Attempts per offered event during the trigger.
    pub amplification_during: f64,
    /// Attempts per offered event in the 60 s after the trigger.
    pub amplification_after: f64,
    /// Seconds from the trigger's end until goodput holds; `None`: not within the run.
    pub recovery_s: Option<u64>,
    /// Not recovered 60 s after the trigger's end.
    pub metastable: bool,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
    /// The SDK's attempts by the rule of its retry budget that let each go, summed over the
    /// senders; `None` for a peer, or in the lines of runs made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_by: Option<SentBy>,
}

/// The SDK's attempts by the retry budget's rule that let each go, summed over the fleet (see
/// `hodoflow_retry::limit::Admissions`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SentBy {
    /// First attempts of a service not held down.
    pub first: u64,
    /// Retries paid from a bucket.
    pub paid: u64,
    /// Retries on the floor of retries a second, the bucket short.
    pub floor: u64,
    /// Retries paced by the server's `Retry-After`.
    pub paced: u64,
    /// Probes of a service held down.
    pub probes: u64,
    /// Held attempts the ramp released.
    pub released: u64,
    /// Passes of a held or waiting attempt that ended in waiting again.
    pub wakeups: u64,
}

impl SentBy {
    /// Adds one sender's admissions.
    pub(crate) fn add(&mut self, admissions: hodoflow_retry::limit::Admissions) {
        self.first += admissions.first;
        self.paid += admissions.paid;
        self.floor += admissions.floor;
        self.paced += admissions.paced;
        self.probes += admissions.probes;
        self.released += admissions.released;
        self.wakeups += admissions.wakeups;
    }
}

impl Figures {
    /// The figures of `series`, a run of `policy` in `scenario`.
    pub(crate) fn of(
        scenario: &Scenario,
        policy: Policy,
        series: &Series,
        wall_s: f64,
        sent_by: Option<SentBy>,
    ) -> Self {
        let (start, end) = scenario.trigger.window();
        let (start, end) = (start.floor() as usize, end.ceil() as usize);
        let ratio = |from: usize, to: usize| {
            let offered = series.sum(Count::Offered, from, to);
            series.sum(Count::Attempt, from, to) as f64 / offered.max(1) as f64
        };
        let last = series.seconds().saturating_sub(1);
        let healthy = |second: usize| {
            let offered = series.at(Count::Offered, second) as f64;
            series.at(Count::Goodput, second) as f64 >= RECOVERED_SHARE * offered
        };
        let recovery_s = (end..last.saturating_sub(HOLD_SECONDS))
            .find(|&s| (s..s + HOLD_SECONDS).all(healthy))
            .map(|s| (s - end) as u64);
        let offered = series.total(Count::Offered);
        let goodput = series.total(Count::Goodput);
        let lost = series.total(Count::Lost);
        Figures {
            scenario: scenario.name.clone(),
            policy: policy.name(),
            seed: scenario.seed,
            senders: scenario.senders,
            offered,
            attempts: series.total(Count::Attempt),
            goodput,
            timeouts: series.total(Count::Timeout),
            lost,
            unfinished: offered.saturating_sub(goodput + lost),
            shed: series.total(Count::Shed),
            wasted: series.total(Count::Wasted),
            executed: series.total(Count::Executed),
            duplicates_answered: series.total(Count::DuplicateAnswered),
            duplicate_executions: series.total(Count::DuplicateExecution),
            queue_max: (0..series.seconds())
                .map(|s| series.queue(s))
                .max()
                .unwrap_or(0),
            queue_at_end: series.queue(last.saturating_sub(1)),
            amplification_during: ratio(start, end),
            amplification_after: ratio(end, end + METASTABLE_AFTER),
            recovery_s,
            metastable: recovery_s.is_none_or(|s| s > METASTABLE_AFTER as u64),
            wall_s,
            sent_by,
        }
    }
}

/// A policy's name read back from JSON, as the policy's own `&'static str`.
fn policy_name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<&'static str, D::Error> {
    let name = String::deserialize(deserializer)?;
    Policy::from_name(&name)
        .map(Policy::name)
        .ok_or_else(|| serde::de::Error::custom(format!("no policy {name}")))
}
