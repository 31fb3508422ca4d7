//! One run: a fresh current_thread runtime under paused time, the server, the senders, the
//! arrivals; then the figures.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;

use crate::figures::{Figures, SentBy};
use crate::policy::Policy;
use crate::recorder::{Recorder, Series};
use crate::scenario::Scenario;
use crate::server::{Clock, Server};
use crate::workload::{Slot, drive};

/// A run's figures and its per-second series.
#[derive(Debug, Clone)]
pub struct Run {
    /// The figures.
    pub figures: Figures,
    pub(crate) series: Series,
    window: (f64, f64),
}

impl Run {
    /// When the trigger began and ended, in seconds.
    pub fn trigger_window(&self) -> (f64, f64) {
        self.window
    }

    /// Per second: offered, attempts, goodput, queue length.
    pub fn per_second(&self) -> Vec<[u64; 4]> {
        use crate::recorder::Count;
        (0..self.series.seconds())
            .map(|s| {
                [
                    self.series.at(Count::Offered, s),
                    self.series.at(Count::Attempt, s),
                    self.series.at(Count::Goodput, s),
                    self.series.queue(s),
                ]
            })
            .collect()
    }
}

/// Runs `policy` in `scenario`. Deterministic: the same scenario gives the same figures (but
/// `wall_s`).
pub fn run(scenario: &Scenario, policy: Policy) -> Run {
    let wall = Instant::now();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current_thread runtime builds");
    let seconds = scenario.duration.as_secs() as usize;
    let recorder = Recorder::new(seconds);
    let sent_by = runtime.block_on(async {
        let clock = Clock::start();
        let server = Server::new(scenario, recorder.clone(), clock);
        let end = scenario.duration.as_secs_f64();
        tokio::spawn(server.clone().run(end));
        let rate = scenario.rate / scenario.senders as f64;
        let senders = (0..scenario.senders)
            .map(|index| Slot {
                sender: policy.sender(index, scenario, &server, &recorder, clock),
                slots: scenario
                    .mix
                    .shape(index, rate)
                    .concurrency()
                    .map(|k| Arc::new(Semaphore::new(k))),
            })
            .collect::<Vec<Slot>>();
        let budgets: Vec<_> = senders.iter().map(|slot| slot.sender.clone()).collect();
        drive(scenario, senders, recorder.clone(), clock).await;
        recorder.close();
        budgets
            .iter()
            .filter_map(|sender| sender.admissions())
            .fold(None, |sum: Option<SentBy>, admissions| {
                let mut sum = sum.unwrap_or_default();
                sum.add(admissions);
                Some(sum)
            })
    });
    drop(runtime);
    let series = recorder.series();
    let figures = Figures::of(
        scenario,
        policy,
        &series,
        wall.elapsed().as_secs_f64(),
        sent_by,
    );
    Run {
        figures,
        series,
        window: scenario.trigger.window(),
    }
}
