//! `batch`: deliver many events to one trigger, with bounded concurrency, and one result line per
//! event for reconciliation.
//!
//! Every event's delivery ID is derived from its `event_id` exactly as `--event-id` derives it, so
//! running the same file twice (after a crash, or after exit 3) starts no second run: events
//! already accepted come back `duplicate`. The whole file is read and checked before anything is
//! sent: every line's JSON, its `event_id` (not blank), its body's size against the webhook
//! limit, and that an `event_id` on several lines comes with the same body on each. One bad line
//! refuses the batch with exit 2, every bad line counted at once.
//!
//! # A repeated `event_id`
//!
//! Two lines with one `event_id` are one delivery ID. With two different bodies that is a
//! conflict no retry can settle: the server keeps whichever body arrives first and answers the
//! other `duplicate`, so one of the two is never delivered while the batch says success. The
//! file is refused, both lines named.
//!
//! With byte-identical bodies the lines are the same event twice, as an export from an
//! at-least-once queue or an outbox written twice produces it, and refusing the file would make
//! the user deduplicate by hand what the delivery ID exists to make harmless. Such a line is
//! accepted and merged into the first: the event is delivered once and has one result line, and
//! standard error names the merged lines. Sending it twice instead would gain nothing (the second
//! answer is `duplicate` at best) and, with both in flight at once, would race. Bodies are compared
//! byte for byte, as they are sent: `{"a":1}` and `{ "a": 1 }` are different bodies.
//!
//! One event's failure never takes the others down: each delivery is a task of its own, and a
//! task that panics is reported as that event's `internal` result line (exit 3: it may have been
//! sent) while the others go on.
//!
//! # An outage longer than a call
//!
//! Through a blip the SDK's retry budget holds each call, sending nothing, until the service
//! answers again, so the events go through. Once the client has seen the service down for
//! longer than one call's budget (`--max-elapsed`), an event started then could only hold for
//! its whole budget and end refused, and a batch of thousands would hold wave after wave. So no
//! further event starts: each one left gets its result line at once, to retry (exit 3, kind
//! `budget_exhausted`, `may_have_run` false, a message saying how long the service has been
//! down), standard error says how many, and the events in flight end as the SDK ends them.
//! Running the same file again later sends them.
//!
//! # Pacing
//!
//! With `--outbox` or without, deliveries to the trigger follow one rule (`pacing.rs`):
//! `--trigger-limit`, else the server's `RateLimit-Policy`, else Hodoflow's documented 100 per
//! 60 s.
//! Without an outbox the client paces them (`HodoflowBuilder::pace_triggers`); with one, the
//! workers' window in the store does. Either way, a hold of more than a second is said on
//! standard error, once per change, and on the progress bar.
//!
//! Each input line is `{"event_id": "<business id>", "body": <any JSON>}`; the body is sent as the
//! bytes it has in the line, not re-serialized. Each output line, in the order deliveries finish:
//!
//! ```text
//! {"event_id":"…","delivery_id":"…","outcome":"accepted"|"duplicate"|"error","status":202,
//!  "workflow_run_id":"…"|null,"attempts":1,"error":null|{"kind":…,"may_have_run":…,"message":…}}
//! ```

use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hodoflow_outbox::{Outbox, Target};
use hodoflow_retry::{HodoflowClient, Surface};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use tokio::task::{Id, JoinError, JoinSet};

use crate::cli::{self, Cli};
use crate::events::{Event, Parsed, merged_note, parse};
use crate::report::{Exit, Failure, Outcome};
use crate::trigger::Trigger;

/// An output line.
#[derive(Debug, Serialize)]
struct ResultLine {
    event_id: String,
    delivery_id: String,
    outcome: Outcome,
    status: Option<u16>,
    workflow_run_id: Option<String>,
    attempts: usize,
    error: Option<Failure>,
}

impl ResultLine {
    fn exit(&self) -> Exit {
        self.error
            .as_ref()
            .map_or(Exit::Success, |failure| failure.exit)
    }
}

/// A batch whose input was read and checked, ready to send.
#[derive(Debug)]
pub(crate) struct Prepared {
    client: HodoflowClient,
    trigger: Arc<Trigger>,
    events: Vec<Event>,
    merged: Vec<(usize, usize)>,
    concurrency: usize,
    /// One call's budget: once the service has been down longer, no further event starts.
    max_elapsed: Duration,
    /// The longest an event waits for its trigger's window before its delivery starts.
    queue: Duration,
    /// `--outbox` and its pool's settings.
    outbox: Option<(String, crate::outbox::PoolPlan)>,
    /// `--json`: a failure of the whole batch is one JSON object.
    json: bool,
}

/// Reads and checks the events, and builds the client.
///
/// # Errors
///
/// A sentence for the user when the trigger, the file or a line is refused; nothing was sent.
pub(crate) fn prepare(cli: &Cli, batch: &cli::Batch) -> Result<Prepared, String> {
    let trigger = Trigger::parse(&batch.trigger)?;
    let text = crate::body::read_file_or_stdin(&batch.events, "--events")?;
    let outbox = match &batch.outbox {
        Some(spec) => {
            if trigger.legacy_org.is_some() {
                return Err("--outbox stores the trigger token alone: pass the token or a                      {base}/api/v1/webhooks/<token> URL, not a legacy URL with an organization"
                    .to_owned());
            }
            let mut plan = crate::outbox::PoolPlan::of(cli, &batch.pool, &batch.pacing)?;
            plan.queue = Some(batch.queue);
            Some((spec.clone(), plan))
        }
        None if batch.pool.lease.is_some() => {
            return Err("--lease needs --outbox".to_owned());
        }
        None => None,
    };
    let Parsed { events, merged } = parse(&text, crate::client::WEBHOOK_BODY_LIMIT)?;
    // The SDK's own checks of the trigger, and with `--outbox` of each job, before anything is
    // sent, stored or created: a refusal is one usage error, exit 2.
    let target = Target::webhook(trigger.token.clone());
    let refused = |e: hodoflow_retry::Error| {
        let why = e.to_string();
        let why = why
            .strip_prefix("invalid input: ")
            .unwrap_or(&why)
            .to_owned();
        format!("the batch cannot be sent: {why}; nothing was sent or stored")
    };
    Outbox::check("batch", &target, b"").map_err(refused)?;
    if outbox.is_some() {
        // Each job as the outbox will take it (its event ID printable text, …): every line
        // that it would refuse is named.
        let bad: Vec<String> = events
            .iter()
            .filter_map(|event| {
                let refused = Outbox::check(&event.event_id, &target, &event.body).err()?;
                let why = refused.to_string();
                let why = why
                    .strip_prefix("invalid input: ")
                    .unwrap_or(&why)
                    .to_owned();
                Some(format!("line {}: {why}", event.line))
            })
            .collect();
        if !bad.is_empty() {
            return Err(crate::events::quoted(
                &format!(
                    "--events has {} line(s) the outbox cannot store; nothing was sent or \
                     stored: ",
                    bad.len()
                ),
                &bad,
            ));
        }
    }
    let builder = crate::client::builder(cli, trigger.base_url.as_deref(), Some(&batch.signing))?;
    // Through an outbox the workers' shared window paces, by the same rule (`pool.rs`).
    let builder = match outbox {
        None => crate::client::paced(builder, batch.pacing.trigger_limit),
        Some(_) => builder,
    };
    let client = builder.build().map_err(|e| e.to_string())?;
    Ok(Prepared {
        client,
        trigger: Arc::new(trigger),
        events,
        merged,
        concurrency: batch.concurrency as usize,
        max_elapsed: cli.max_elapsed,
        queue: batch.queue,
        outbox,
        json: cli.json,
    })
}

impl Prepared {
    /// Delivers every event, `concurrency` at a time, printing a result line as each finishes.
    /// Returns the worst exit of any event.
    pub(crate) async fn run(self) -> Exit {
        let started = Instant::now();
        if let Some(note) = merged_note(&self.merged) {
            crate::redact::eprint(&note);
        }
        if let Some((spec, plan)) = self.outbox {
            let batch = Batch {
                trigger: &self.trigger,
                events: self.events,
                concurrency: self.concurrency,
                started,
                json: self.json,
            };
            return through_outbox(self.client, batch, &spec, plan).await;
        }
        let total = self.events.len();
        let bar = progress_bar(total as u64);
        let stdout_is_terminal = std::io::stdout().is_terminal();
        crate::logging::show_progress(bar.clone());
        let mut tally = Tally::default();
        let mut pending = self.events.into_iter();
        let mut running = JoinSet::new();
        let mut in_flight = HashMap::new();
        let finished = std::cell::Cell::new(0usize);
        let mut emit = |line: &ResultLine| {
            finished.set(finished.get() + 1);
            tally.add(line);
            let print = || crate::redact::print_json(line);
            // Hiding the bar redraws it: only when both share the terminal.
            if stdout_is_terminal {
                bar.suspend(print);
            } else {
                print();
            }
            bar.inc(1);
        };
        let mut stopped = false;
        let mut announcer = crate::pacing::Announcer::default();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            while !stopped && running.len() < self.concurrency {
                if let Some(down) = down_too_long(&self.client, self.max_elapsed) {
                    // Each event left would only hold for the service and be refused: none
                    // starts, each is listed to retry, and a later run sends it.
                    stopped = true;
                    let left: Vec<Event> = pending.by_ref().collect();
                    if !left.is_empty() {
                        crate::redact::eprint(&format!(
                            "batch: {}: {} event(s) not started, listed to retry",
                            down_reason(down, self.max_elapsed),
                            left.len()
                        ));
                    }
                    for event in left {
                        emit(&not_started(event, down, self.max_elapsed));
                    }
                    break;
                }
                let Some(event) = pending.next() else { break };
                let client = self.client.clone();
                let trigger = Arc::clone(&self.trigger);
                let event_id = event.event_id.clone();
                let queue = self.queue;
                let task =
                    running.spawn(async move { deliver(&client, &trigger, event, queue).await });
                in_flight.insert(task.id(), event_id);
            }
            if running.is_empty() {
                break;
            }
            tokio::select! {
                joined = running.join_next_with_id() => {
                    if let Some(joined) = joined {
                        emit(&settle(joined, &mut in_flight));
                    }
                }
                _ = tick.tick() => {
                    let waiting = total.saturating_sub(finished.get()) as u64;
                    say_what_holds(&mut announcer, &self.client, &bar, waiting);
                }
            }
        }
        bar.finish_and_clear();
        crate::redact::eprint(&tally.summary(total, started.elapsed()));
        tally.worst
    }
}

/// What `batch --outbox` stores and delivers, and how it reports.
struct Batch<'a> {
    trigger: &'a Trigger,
    events: Vec<Event>,
    concurrency: usize,
    started: Instant,
    json: bool,
}

/// `batch --outbox` (`outbox.rs`).
async fn through_outbox(
    client: HodoflowClient,
    batch: Batch<'_>,
    spec: &str,
    plan: crate::outbox::PoolPlan,
) -> Exit {
    let Batch {
        trigger,
        events,
        concurrency,
        started,
        json,
    } = batch;
    let outbox = match crate::outbox::open(spec, plan.store_timeout).await {
        Ok(outbox) => outbox,
        Err(report) => return crate::report::finish(report, started, json),
    };
    let pool = crate::pool::Pool {
        outbox,
        client,
        concurrency,
        lease: plan.lease,
        trigger_limit: plan.trigger_limit,
        name: crate::outbox::worker_name(),
        modulify: None,
        queue: plan.queue,
    };
    let events = events
        .into_iter()
        .map(|event| crate::outbox::BatchEvent {
            event_id: event.event_id,
            body: event.body,
        })
        .collect();
    crate::outbox::batch(pool, trigger.token.clone(), events, started, json).await
}

/// The result line of a finished task: its own, or an `internal` failure of the event it was
/// delivering when it panicked (or was cancelled).
fn settle(
    finished: Result<(Id, ResultLine), JoinError>,
    in_flight: &mut HashMap<Id, String>,
) -> ResultLine {
    match finished {
        Ok((id, line)) => {
            in_flight.remove(&id);
            line
        }
        Err(error) => {
            let event_id = in_flight.remove(&error.id()).unwrap_or_default();
            let delivery_id = crate::identity::event_delivery_id(&event_id)
                .key()
                .as_str()
                .to_owned();
            ResultLine {
                event_id,
                delivery_id,
                outcome: Outcome::Error,
                status: None,
                workflow_run_id: None,
                attempts: 0,
                error: Some(Failure::internal(&crate::internal::describe(error))),
            }
        }
    }
}

/// How long the client has seen webhook ingestion down, when that is at least one call's
/// budget `max_elapsed`: an event started now would hold for the whole of its call and end
/// refused. (Another service's outage, the JSON:API's, never holds a delivery.)
fn down_too_long(client: &HodoflowClient, max_elapsed: Duration) -> Option<Duration> {
    client
        .service_down_for(Surface::Webhook)
        .filter(|down| *down >= max_elapsed)
}

/// `the service has been down for 21.3 s, longer than one call's budget (20.0 s)`.
fn down_reason(down: Duration, max_elapsed: Duration) -> String {
    format!(
        "the service has been down for {:.1} s, longer than one call's budget ({:.1} s)",
        down.as_secs_f64(),
        max_elapsed.as_secs_f64()
    )
}

/// The result line of an event not started because the service had been down for `down`: to
/// retry, as a call the retry budget refused before sending.
fn not_started(event: Event, down: Duration, max_elapsed: Duration) -> ResultLine {
    let delivery_id = crate::identity::event_delivery_id(&event.event_id)
        .key()
        .as_str()
        .to_owned();
    ResultLine {
        event_id: event.event_id,
        delivery_id,
        outcome: Outcome::Error,
        status: None,
        workflow_run_id: None,
        attempts: 0,
        error: Some(Failure::not_started(&down_reason(down, max_elapsed))),
    }
}

/// How often the batch looks at what holds its sends (`pacing.rs`).
const TICK: Duration = Duration::from_millis(250);

/// Says on standard error, once per change, what has held the sends for more than a second
/// (terminal or not), and shows it on the bar while it lasts.
fn say_what_holds(
    announcer: &mut crate::pacing::Announcer,
    client: &HodoflowClient,
    bar: &ProgressBar,
    waiting: u64,
) {
    let Some(held) = announcer.observe(&client.stats()) else {
        bar.set_message("");
        return;
    };
    let text = held.text(Some(waiting));
    if held.changed {
        bar.suspend(|| crate::redact::eprint(&text));
    }
    bar.set_message(text);
}

/// A bar on standard error when it is a terminal; hidden otherwise, so logs stay clean.
fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{wide_bar} {pos}/{len} events {elapsed} {wide_msg}")
    {
        bar.set_style(style);
    }
    bar
}

/// Delivers one event, after it waited up to `queue` for its trigger's window, and describes
/// how it went.
async fn deliver(
    client: &HodoflowClient,
    trigger: &Trigger,
    event: Event,
    queue: Duration,
) -> ResultLine {
    let id = crate::identity::event_delivery_id(&event.event_id);
    let delivery_id = id.key().as_str().to_owned();
    match crate::trigger::deliver(client, trigger, event.body, &id, Some(queue)).await {
        Ok(delivery) => ResultLine {
            event_id: event.event_id,
            delivery_id,
            outcome: if delivery.is_duplicate() {
                Outcome::Duplicate
            } else {
                Outcome::Accepted
            },
            status: delivery
                .attempts()
                .last()
                .and_then(|a| a.status())
                .map(|s| s.as_u16()),
            workflow_run_id: delivery
                .run_id()
                .map(|run| crate::redact::text(run).into_owned()),
            attempts: delivery.attempts().len(),
            error: None,
        },
        Err(error) => ResultLine {
            event_id: event.event_id,
            delivery_id,
            outcome: Outcome::Error,
            status: error.status().map(|s| s.as_u16()),
            workflow_run_id: None,
            attempts: error.attempts().len(),
            error: Some(Failure::from_error(&error)),
        },
    }
}

/// Counts of a batch so far.
#[derive(Debug)]
struct Tally {
    accepted: usize,
    duplicate: usize,
    permanent: usize,
    retryable: usize,
    attempts: usize,
    worst: Exit,
}

impl Default for Tally {
    fn default() -> Self {
        Self {
            accepted: 0,
            duplicate: 0,
            permanent: 0,
            retryable: 0,
            attempts: 0,
            worst: Exit::Success,
        }
    }
}

impl Tally {
    fn add(&mut self, line: &ResultLine) {
        self.attempts += line.attempts;
        match line.outcome {
            Outcome::Accepted => self.accepted += 1,
            Outcome::Duplicate => self.duplicate += 1,
            _ if line.exit() == Exit::Retryable => self.retryable += 1,
            _ => self.permanent += 1,
        }
        if line.exit().severity() > self.worst.severity() {
            self.worst = line.exit();
        }
    }

    /// `batch: 1000 events, 990 accepted, 10 duplicate, 0 failed for good, 0 to retry; …`
    fn summary(&self, total: usize, took: Duration) -> String {
        let mut summary = format!(
            "batch: {total} events, {} accepted, {} duplicate, {} failed for good, {} to retry; \
             {} attempts in {} ms",
            self.accepted,
            self.duplicate,
            self.permanent,
            self.retryable,
            self.attempts,
            crate::report::millis(took)
        );
        if self.retryable > 0 {
            summary.push_str(
                "\nrun the same file again later: events already taken come back duplicate",
            );
        }
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_that_panics_is_its_events_internal_line_and_the_others_are_kept() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let lines = runtime.block_on(async {
            let mut running = JoinSet::new();
            let mut in_flight = HashMap::new();
            for n in 0..3 {
                let task = running.spawn(async move {
                    assert_ne!(n, 1, "event 1 panics");
                    ResultLine {
                        event_id: format!("e-{n}"),
                        delivery_id: "d".into(),
                        outcome: Outcome::Accepted,
                        status: Some(202),
                        workflow_run_id: None,
                        attempts: 1,
                        error: None,
                    }
                });
                in_flight.insert(task.id(), format!("e-{n}"));
            }
            let mut lines = Vec::new();
            while let Some(finished) = running.join_next_with_id().await {
                lines.push(settle(finished, &mut in_flight));
            }
            assert!(in_flight.is_empty());
            lines
        });
        assert_eq!(lines.len(), 3);
        let failed: Vec<&ResultLine> = lines.iter().filter(|l| l.error.is_some()).collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].event_id, "e-1");
        assert_eq!(
            failed[0].delivery_id,
            crate::identity::event_delivery_id("e-1").key().as_str()
        );
        let failure = failed[0].error.as_ref().unwrap();
        assert_eq!((failure.kind, failure.may_have_run), ("internal", true));
        assert_eq!(failed[0].exit(), Exit::Retryable);
        assert!(
            failure.message.contains("event 1 panics"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn an_event_not_started_in_an_outage_is_listed_to_retry_with_the_reason() {
        let event = Event {
            event_id: "e-9".into(),
            body: b"{}".to_vec(),
            line: 1,
        };
        let line = not_started(
            event,
            Duration::from_millis(21_340),
            Duration::from_secs(20),
        );
        assert_eq!(line.exit(), Exit::Retryable);
        assert_eq!(
            (line.outcome, line.attempts, line.status),
            (Outcome::Error, 0, None)
        );
        assert_eq!(
            line.delivery_id,
            crate::identity::event_delivery_id("e-9").key().as_str()
        );
        let failure = line.error.as_ref().unwrap();
        assert_eq!(
            (failure.kind, failure.may_have_run),
            ("budget_exhausted", false)
        );
        assert_eq!(
            failure.message,
            "retry_budget_exhausted: not started: the service has been down for 21.3 s, \
             longer than one call's budget (20.0 s)"
        );
        let mut tally = Tally::default();
        tally.add(&line);
        assert_eq!((tally.retryable, tally.permanent), (1, 0));
    }

    #[test]
    fn the_worst_event_decides_the_exit() {
        let line = |error: Option<Failure>| ResultLine {
            event_id: "e".into(),
            delivery_id: "d".into(),
            outcome: if error.is_some() {
                Outcome::Error
            } else {
                Outcome::Accepted
            },
            status: None,
            workflow_run_id: None,
            attempts: 1,
            error,
        };
        let mut tally = Tally::default();
        tally.add(&line(None));
        assert_eq!(tally.worst, Exit::Success);
        let mut retryable = Failure::invalid_input("x");
        retryable.exit = Exit::Retryable;
        tally.add(&line(Some(retryable)));
        assert_eq!(tally.worst, Exit::Retryable);
        tally.add(&line(Some(Failure::permanent(
            "not_found",
            false,
            "gone".into(),
        ))));
        assert_eq!(tally.worst, Exit::Permanent);
        assert_eq!(
            (tally.accepted, tally.retryable, tally.permanent),
            (1, 1, 1)
        );
    }
}
