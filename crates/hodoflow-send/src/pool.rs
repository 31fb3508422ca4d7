//! A worker pool of an outbox, run from the command line: until a signal, until the outbox is
//! idle, or until the events of one batch are settled.
//!
//! The SDK's [`Workers`](hodoflow_outbox::Workers) claim, deliver and record; this module
//! watches the store beside them, every [`TICK`]:
//!
//! - **When to stop.** Idle means no pending job is due and no job is in flight, under this
//!   worker's lease or any other's: a job a dead worker held stays in flight until its lease
//!   ends, then this pool claims it and sends it again under its same identity. The store
//!   counts both in one statement from its indexes (`Outbox::due`), so the check lists no job
//!   and costs the same with a backlog of a million; one statement reads one snapshot, so a
//!   job claimed meanwhile is seen pending or in flight, never neither. SIGINT or SIGTERM stops the
//!   pool too; a second one exits at once (130), leaving the jobs in flight to their lease.
//! - **Progress.** On a terminal, standard error shows the outbox's counts, one line redrawn every
//!   second; elsewhere nothing, so logs and `--json` output stay clean.
//! - **Pacing, said.** The workers' shared trigger window follows `--trigger-limit`, else the
//!   server's `RateLimit-Policy`, else Hodoflow's documented 100 per 60 s (`pacing.rs`). When it,
//!   or the credential's pause, has held sends for more than a second, standard error says which
//!   limit, where it came from and how to change it, once per change, terminal or not; the progress
//!   line shows it too.
//! - **JSON lines.** With `--json`, one line per job this pool brought to a final state (the
//!   SDK's `on_finished`), read back from the store as `job_line.rs` shows it; a job rescheduled
//!   for later gets its line when it ends.

use std::collections::HashSet;
use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hodoflow_outbox::{Outbox, RunReport};
use hodoflow_retry::HodoflowClient;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::job_line::JobLine;
use crate::limit::TriggerLimitArg;

/// How often the store is read beside the workers.
const TICK: Duration = Duration::from_millis(250);

/// How often the progress line is redrawn, and the `--json` lines gathered.
const EVERY_SECOND: Duration = Duration::from_secs(1);

/// The lease when none is given: [`DEFAULT_LEASE`] or the budget plus 30 s, the longer.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(120);

/// The lease of `--lease`, or its default for a call budget of `max_elapsed`.
///
/// # Errors
///
/// A usage sentence when the lease does not outlast one call.
pub(crate) fn lease(given: Option<Duration>, max_elapsed: Duration) -> Result<Duration, String> {
    let least = max_elapsed.saturating_add(Duration::from_secs(1));
    match given {
        None => Ok(DEFAULT_LEASE.max(max_elapsed.saturating_add(Duration::from_secs(30)))),
        Some(lease) if lease < least => Err(format!(
            "--lease {} ms does not outlast one call of --max-elapsed {} ms plus 1 s: another \
             worker would send the job again while it runs",
            crate::report::millis(lease),
            crate::report::millis(max_elapsed)
        )),
        Some(lease) => Ok(lease),
    }
}

/// A worker pool, configured.
#[derive(Debug)]
pub(crate) struct Pool {
    pub(crate) outbox: Outbox,
    pub(crate) client: HodoflowClient,
    pub(crate) concurrency: usize,
    pub(crate) lease: Duration,
    /// `--trigger-limit`; `None`: the SDK's rule, the server's figures else the documented default.
    pub(crate) trigger_limit: Option<TriggerLimitArg>,
    pub(crate) name: String,
    /// The client of the outbox's Modulify jobs (`outbox worker --modulify-base-url`); without
    /// one, the SDK fails such a job, saying no client delivers it.
    pub(crate) modulify: Option<hodoflow_retry::ModulifyClient>,
    /// `batch --queue`: the longest a job waits for its trigger's window; `None`: its lease's.
    pub(crate) queue: Option<Duration>,
}

/// When the pool stops, a signal aside.
#[derive(Debug)]
pub(crate) enum Until {
    /// Only on a signal.
    Stopped,
    /// When the whole outbox is idle.
    Idle,
    /// When none of these events is due or in flight.
    Settled(Arc<HashSet<String>>),
}

/// How a pool ended.
#[derive(Debug)]
pub(crate) struct Ended {
    /// What its workers did.
    pub(crate) report: RunReport,
    /// Whether a signal stopped it.
    pub(crate) signalled: bool,
}

impl Pool {
    /// Runs the pool until `until` or a signal, printing a JSON line per finished job when
    /// `json_lines`.
    ///
    /// # Errors
    ///
    /// The SDK's error: a refused configuration, or a store that failed.
    pub(crate) async fn run(
        self,
        until: Until,
        json_lines: bool,
    ) -> Result<Ended, hodoflow_retry::Error> {
        let outbox = self.outbox.clone();
        let (sender, mut finished) = tokio::sync::mpsc::unbounded_channel::<String>();
        let client = self.client.clone();
        let mut builder = outbox
            .workers(self.client)
            .concurrency(self.concurrency)
            .lease(self.lease)
            .name(self.name);
        if let Some(modulify) = self.modulify {
            builder = builder.deliver(modulify);
        }
        if let Some(queue) = self.queue {
            builder = builder.queue(queue);
        }
        if let Some(TriggerLimitArg(limit)) = self.trigger_limit {
            builder = builder.trigger_limit(limit);
        }
        if json_lines {
            builder = builder.on_finished(move |done| {
                if done.state.is_final() {
                    let _ = sender.send(done.event_id.clone());
                }
            });
        }
        let workers = builder.spawn()?;
        let bar = progress_line();
        crate::logging::show_progress(bar.clone());
        let mut signals = Signals::new();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_second = Instant::now();
        let mut signalled = false;
        let mut failed = None;
        let mut announcer = crate::pacing::Announcer::default();
        let among: Option<Arc<[String]>> = match &until {
            Until::Settled(events) => Some(events.iter().cloned().collect()),
            Until::Stopped | Until::Idle => None,
        };
        loop {
            tokio::select! {
                () = signals.next() => {
                    signalled = true;
                    break;
                }
                Some(event_id) = finished.recv() => {
                    if let Err(error) = print_line(&outbox, &event_id).await {
                        failed = Some(error);
                        break;
                    }
                    continue;
                }
                _ = tick.tick() => {}
            }
            let held = say_what_holds(&mut announcer, &client, &outbox, &bar).await;
            if last_second.elapsed() >= EVERY_SECOND {
                last_second = Instant::now();
                if !bar.is_hidden()
                    && let Ok(counts) = outbox.counts().await
                {
                    let mut text = progress_text(&counts, &workers.report());
                    if let Some(held) = held {
                        text = format!("{text} | {}", held.text(None));
                    }
                    bar.set_message(crate::redact::terminal(&text));
                }
            }
            // The store counts what is due and in flight from its indexes: no job is listed.
            let idle = match &until {
                Until::Stopped => Ok(false),
                Until::Idle | Until::Settled(_) => {
                    outbox.due(among.clone()).await.map(|due| due.is_idle())
                }
            };
            match idle {
                Ok(true) => break,
                Ok(false) => {}
                Err(error) => {
                    failed = Some(error);
                    break;
                }
            }
        }
        // A job put off by a full window just before the end is said too.
        say_what_holds(&mut announcer, &client, &outbox, &bar).await;
        if signalled {
            bar.set_message("stopping: no new claims; finishing the deliveries in flight");
        }
        let stopped = tokio::select! {
            stopped = workers.stop() => stopped,
            () = signals.next() => {
                bar.finish_and_clear();
                crate::redact::eprint(
                    "hodoflow-send: a second signal: exiting now; the jobs in flight are sent \
                     again once their lease ends",
                );
                std::process::exit(130);
            }
        };
        bar.finish_and_clear();
        while let Ok(event_id) = finished.try_recv() {
            print_line(&outbox, &event_id).await?;
        }
        if let Some(error) = failed {
            return Err(error);
        }
        Ok(Ended {
            report: stopped?,
            signalled,
        })
    }
}

/// Says on standard error, once per change, what has held the sends for more than a second
/// (terminal or not), with the jobs waiting; returns it for the progress line.
async fn say_what_holds(
    announcer: &mut crate::pacing::Announcer,
    client: &HodoflowClient,
    outbox: &Outbox,
    bar: &ProgressBar,
) -> Option<crate::pacing::Held> {
    let held = announcer.observe(&client.stats())?;
    if held.changed {
        let waiting = outbox
            .counts()
            .await
            .ok()
            .map(|counts| counts.pending + counts.in_flight);
        bar.suspend(|| crate::redact::eprint(&held.text(waiting)));
    }
    Some(held)
}

/// Prints the `--json` line of the job of `event_id`, as stored now.
async fn print_line(outbox: &Outbox, event_id: &str) -> Result<(), hodoflow_retry::Error> {
    if let Some(job) = outbox.job(event_id).await? {
        crate::redact::print_json(&JobLine::of(&job));
    }
    Ok(())
}

/// A one-line progress display on standard error when it is a terminal; hidden otherwise.
fn progress_line() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
        bar.set_style(style);
    }
    bar.set_message("starting");
    bar.enable_steady_tick(EVERY_SECOND);
    bar
}

/// `pending 12, in flight 16, accepted 970, duplicate 3, failed 0, to reconcile 0 | here:
/// claimed 990, 1012 attempts`: short enough for one line of a terminal.
fn progress_text(counts: &hodoflow_outbox::Counts, report: &RunReport) -> String {
    format!(
        "pending {}, in flight {}, accepted {}, duplicate {}, done {}, failed {}, to reconcile {} \
         | here: claimed {}, {} attempts",
        counts.pending,
        counts.in_flight,
        counts.accepted,
        counts.duplicate,
        counts.done,
        counts.failed,
        counts.needs_reconciliation,
        report.claimed,
        report.attempts
    )
}

/// The summary of what a pool did, for standard error.
pub(crate) fn report_text(report: &RunReport) -> String {
    format!(
        "claimed {}: accepted {}, duplicate {}, done {}, failed {}, rescheduled {}, \
         needs_reconciliation {}, claims lost {}; {} attempts",
        report.claimed,
        report.accepted,
        report.duplicate,
        report.done,
        report.failed,
        report.rescheduled,
        report.needs_reconciliation,
        report.claims_lost,
        report.attempts
    )
}

/// SIGINT and SIGTERM.
#[derive(Debug)]
struct Signals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self {
                interrupt: signal(SignalKind::interrupt()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// The next signal.
    async fn next(&mut self) {
        #[cfg(unix)]
        {
            let interrupt = async {
                match &mut self.interrupt {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            };
            let terminate = async {
                match &mut self.terminate {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = interrupt => {}
                _ = terminate => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_names_every_state_and_this_pool() {
        let mut counts = hodoflow_outbox::Counts::default();
        counts.pending = 12;
        counts.needs_reconciliation = 2;
        let text = progress_text(&counts, &RunReport::default());
        assert_eq!(
            text,
            "pending 12, in flight 0, accepted 0, duplicate 0, done 0, failed 0, to reconcile 2 \
             | here: claimed 0, 0 attempts"
        );
    }

    #[test]
    fn the_lease_outlasts_a_call() {
        let s = Duration::from_secs;
        assert_eq!(lease(None, s(60)), Ok(s(120)));
        assert_eq!(lease(None, s(300)), Ok(s(330)));
        assert_eq!(lease(Some(s(3)), s(2)), Ok(s(3)));
        let refused = lease(Some(s(2)), s(2)).unwrap_err();
        assert!(
            refused.starts_with("--lease 2000 ms does not outlast"),
            "{refused}"
        );
    }
}
