//! The named scenarios of `cargo run -p hodoflow-sim -- <scenario>` and a runner that spreads
//! their runs over threads (each run keeps its own current_thread runtime, so results do not
//! depend on the thread count).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::policy::Policy;
use crate::run::{Run, run};
use crate::scenario::{Mix, Scenario, Shape};

/// The sizes of a suite: full, or tiny for tests and `--smoke`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size {
    /// Events a second offered by the whole fleet.
    pub rate: f64,
    /// The fleet sizes of the N sweep.
    pub fleets: &'static [usize],
}

impl Size {
    /// The OSDI'22 artifact's 13.3k events a second, N = 10 to 10,000.
    pub const FULL: Size = Size {
        rate: Scenario::OSDI_RATE,
        fleets: &[10, 100, 1_000, 10_000],
    };
    /// A tenth of the rate (capacity scaled with it), N = 10 to 1,000.
    pub const SMOKE: Size = Size {
        rate: Scenario::OSDI_RATE / 10.0,
        fleets: &[10, 100, 1_000],
    };
    /// The rate of the depth × duration maps: a tenth of the OSDI'22 rate, N = 100. The
    /// capacity scales with the rate, so queue delays (length over capacity) in seconds are
    /// the same as at full rate; only the noise is larger.
    pub const MAP_RATE: f64 = Scenario::OSDI_RATE / 10.0;
}

/// One run to do.
#[derive(Debug, Clone)]
pub struct Job {
    /// Its scenario.
    pub scenario: Scenario,
    /// Its policy.
    pub policy: Policy,
}

/// The OSDI'22 case at every fleet size, mixed shapes, plus as many small sequential senders as
/// the largest fleet and as many open-loop (all in flight) senders, for every policy in
/// `policies`; and, for the naive client, the case and its two neighbours (9 s at 0.40, 10 s at
/// 0.45) with open-loop senders, as in the artifact.
pub fn osdi22(size: Size, seed: u64, policies: &[Policy]) -> Vec<Job> {
    let mut jobs = Vec::new();
    let largest = *size.fleets.last().expect("at least one fleet");
    let mut fleets: Vec<(usize, Mix)> = size.fleets.iter().map(|&n| (n, Mix::Mixed)).collect();
    fleets.push((largest, Mix::All(Shape::Sequential)));
    fleets.push((largest, Mix::All(Shape::AllInFlight)));
    for (senders, mix) in fleets {
        let mut scenario = Scenario::osdi22(seed, senders, mix, size.rate);
        scenario.name = format!("osdi22 N={senders} {}", mix_name(mix));
        for &policy in policies {
            jobs.push(Job {
                scenario: scenario.clone(),
                policy,
            });
        }
    }
    let n = 100;
    for (depth, secs) in [(0.6, 10), (0.6, 9), (0.55, 10)] {
        let open = Mix::All(Shape::AllInFlight);
        let mut scenario =
            Scenario::drop(seed, n, open, size.rate, depth, Duration::from_secs(secs));
        scenario.name = format!(
            "osdi22 calibration {:.2} of capacity x {secs} s N={n} all-in-flight",
            1.0 - depth
        );
        jobs.push(Job {
            scenario,
            policy: Policy::Osdi22,
        });
    }
    jobs
}

/// The depths of the maps: the fraction of capacity lost.
pub const DEPTHS: [f64; 4] = [0.2, 0.4, 0.6, 0.8];
/// The durations of the maps, seconds.
pub const DURATIONS: [u64; 5] = [1, 3, 10, 20, 30];

/// The depth × duration map for every policy at 100 open-loop senders (all in flight, the
/// artifact's client shape and the hardest: a mixed fleet's sequential senders and pools hold
/// their backlog at home and do not resend it), with or without shedding.
pub fn sweep(seed: u64, shedding: bool, policies: &[Policy]) -> Vec<Job> {
    let mut jobs = Vec::new();
    for &policy in policies {
        for depth in DEPTHS {
            for secs in DURATIONS {
                let mut scenario = Scenario::drop(
                    seed,
                    100,
                    Mix::All(Shape::AllInFlight),
                    Size::MAP_RATE,
                    depth,
                    Duration::from_secs(secs),
                );
                if shedding {
                    scenario = scenario.shedding();
                }
                scenario.name = format!(
                    "map{} depth={depth} duration={secs}",
                    if shedding { " shedding" } else { "" }
                );
                jobs.push(Job { scenario, policy });
            }
        }
    }
    jobs
}

/// The scale target: 10,000 senders (mixed) × 120 s at 13.3k events a second, the OSDI'22
/// trigger, the SDK's defaults.
pub fn scale(seed: u64) -> Job {
    let mut scenario = Scenario::osdi22(seed, 10_000, Mix::Mixed, Scenario::OSDI_RATE);
    scenario.duration = Duration::from_secs(120);
    scenario.name = "scale N=10000 mixed 120 s".into();
    Job {
        scenario,
        policy: Policy::Sdk,
    }
}

fn mix_name(mix: Mix) -> &'static str {
    match mix {
        Mix::Mixed => "mixed",
        Mix::All(Shape::Sequential) => "sequential",
        Mix::All(Shape::Pool16) => "pools-of-16",
        Mix::All(Shape::AllInFlight) => "all-in-flight",
    }
}

/// Runs `jobs` on `threads` threads; the runs come back in the jobs' order.
pub fn run_all(jobs: &[Job], threads: usize, each: impl Fn(&Run) + Sync) -> Vec<Run> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<Run>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(index) else { break };
                    let result = run(&job.scenario, job.policy);
                    each(&result);
                    done.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)[index] = Some(result);
                }
            });
        }
    });
    done.into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .map(|run| run.expect("every job ran"))
        .collect()
}
