//! Pacing, said out loud: what holds the sends back, where its limit came from, how to change it.
//!
//! `batch` (with `--outbox` or without) and `outbox worker` pace deliveries by one rule, the
//! SDK's (`HodoflowBuilder::pace_triggers`, `WorkerBuilder::trigger_limit`):
//! 1. `--trigger-limit N/DUR` (or `off`), when given;
//! 2. else the server's own figures, its `RateLimit-Policy: "trigger";q=…;w=…`;
//! 3. else Hodoflow's documented default, 100 per trigger per 60 s.
//!
//! A sender held back for a minute with nothing said looks stalled. So whenever a trigger's
//! window, a trigger the server closed, or the credential's gate (a pause the server asked for)
//! holds sends for more than [`ANNOUNCE_AFTER`] (calls have waited that long, or the limit
//! stays closed that long: the pause, or an outbox's window that put a job off to later),
//! standard error says so, terminal or not, once per change of what holds them, and the
//! progress line shows the same while it lasts:
//!
//! ```text
//! paced: 100 per 60 s per trigger (Hodoflow's documented default; --trigger-limit to change); 200 events waiting
//! held: the server closed this trigger, 28 s left (its Retry-After or RateLimit field; no flag changes it); 200 events waiting
//! held: the server paused this credential, 28 s left (its Retry-After or RateLimit field; no flag changes it); 200 events waiting
//! ```
//!
//! The lines hold only this tool's words and numbers: the policy the figures come from is always
//! the one `docs/wire-contract.md` names `"trigger"`, so no server-provided text is printed.

use std::time::Duration;

use hodoflow_retry::{
    Stats,
    limit::{PacingSource, RoutePacing},
};

/// How long sends are held before it is said.
pub(crate) const ANNOUNCE_AFTER: Duration = Duration::from_secs(1);

/// Says what holds the sends, once per change.
#[derive(Debug, Default)]
pub(crate) struct Announcer {
    /// The trigger pacing last said.
    paced: Option<RoutePacing>,
    /// Whether the gate's present hold was said.
    gate: bool,
    /// Whether the present hold of a closed trigger was said.
    trigger: bool,
}

/// What has held the sends for more than [`ANNOUNCE_AFTER`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    /// A trigger's window, at this limit.
    paced: Option<RoutePacing>,
    /// The credential's gate, closed for this much longer (`None`: not known here, as for an
    /// outbox's pause another worker set).
    gate: Option<Option<Duration>>,
    /// A trigger the server closed, for this much longer (`None`: not known here).
    trigger: Option<Option<Duration>>,
    /// Whether it changed since last said: print it.
    pub(crate) changed: bool,
}

impl Announcer {
    /// What holds the sends now, by the client's `stats`; `None` when nothing holds them for
    /// more than [`ANNOUNCE_AFTER`].
    pub(crate) fn observe(&mut self, stats: &Stats) -> Option<Held> {
        let long = |held: Option<Duration>| held.is_some_and(|held| held > ANNOUNCE_AFTER);
        let paced = stats
            .route_held_by
            .filter(|_| long(stats.route_held_for) || long(stats.route_full_for));
        let gate = (long(stats.gate_held_for) || long(stats.gate_closed_for))
            .then_some(stats.gate_closed_for);
        if stats.gate_held_for.is_none() && stats.gate_closed_for.is_none() {
            self.gate = false;
        }
        // A trigger closed: a wait for it is a trigger's hold with no pacing behind it.
        // While this client paces the trigger, its window spent at the server (RateLimit's
        // r=0) is the pacing's to say.
        let closed_wait = stats.route_held_by.is_none() && long(stats.route_held_for);
        let trigger = (paced.is_none() && (closed_wait || long(stats.route_closed_for)))
            .then_some(stats.route_closed_for);
        if stats.route_closed_for.is_none() && !closed_wait {
            self.trigger = false;
        }
        if paced.is_none() && gate.is_none() && trigger.is_none() {
            return None;
        }
        let mut changed = false;
        if paced.is_some() && paced != self.paced {
            self.paced = paced;
            changed = true;
        }
        if gate.is_some() && !self.gate {
            self.gate = true;
            changed = true;
        }
        if trigger.is_some() && !self.trigger {
            self.trigger = true;
            changed = true;
        }
        Some(Held {
            paced,
            gate,
            trigger,
            changed,
        })
    }
}

impl Held {
    /// The line: each hold, then how many events wait, when known.
    pub(crate) fn text(&self, waiting: Option<u64>) -> String {
        let mut parts = Vec::new();
        if let Some(pacing) = &self.paced {
            parts.push(paced(pacing));
        }
        if let Some(closed_for) = self.trigger {
            parts.push(closed("this trigger", closed_for));
        }
        if let Some(closed_for) = self.gate {
            parts.push(gate(closed_for));
        }
        if let Some(waiting) = waiting {
            parts.push(format!("{waiting} events waiting"));
        }
        parts.join("; ")
    }
}

/// `paced: 100 per 60 s per trigger (Hodoflow's documented default; --trigger-limit to change)`.
fn paced(pacing: &RoutePacing) -> String {
    let source = match pacing.source {
        PacingSource::Caller => "set by --trigger-limit; change it there, or turn it off",
        PacingSource::Server => "the server's RateLimit-Policy; --trigger-limit to change",
        PacingSource::Documented => "Hodoflow's documented default; --trigger-limit to change",
        _ => "--trigger-limit to change",
    };
    format!(
        "paced: {} per {} per trigger ({source})",
        pacing.limit.requests(),
        span(pacing.limit.per())
    )
}

/// `held: the server paused this credential, 28 s left (…)`.
fn gate(closed_for: Option<Duration>) -> String {
    let left = left(closed_for);
    format!(
        "held: the server paused this credential{left} (its Retry-After or RateLimit field; \
         no flag changes it)"
    )
}

/// `held: the server closed this trigger, 28 s left (…)`.
fn closed(what: &str, closed_for: Option<Duration>) -> String {
    let left = left(closed_for);
    format!(
        "held: the server closed {what}{left} (its Retry-After or RateLimit field; no flag \
         changes it)"
    )
}

/// `, 28 s left`, or nothing when it is not known here.
fn left(closed_for: Option<Duration>) -> String {
    match closed_for {
        Some(left) => format!(", {} left", span(left.max(Duration::from_secs(1)))),
        None => String::new(),
    }
}

/// `60 s`, `800 ms`: whole seconds when the span is, else milliseconds.
fn span(span: Duration) -> String {
    if span.subsec_nanos() == 0 {
        format!("{} s", span.as_secs())
    } else if span >= Duration::from_secs(10) {
        format!("{} s", span.as_secs_f64().round())
    } else {
        format!("{} ms", span.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hodoflow_retry::{hodoflow::TRIGGER_LIMIT, limit::RouteLimit};

    const SECOND: Duration = Duration::from_secs(1);

    fn stats(
        trigger: Option<(Duration, RoutePacing)>,
        gate: Option<(Duration, Option<Duration>)>,
    ) -> Stats {
        let mut stats = Stats::default();
        if let Some((held, by)) = trigger {
            stats.route_held_for = Some(held);
            stats.route_held_by = Some(by);
        }
        if let Some((held, closed)) = gate {
            stats.gate_held_for = Some(held);
            stats.gate_closed_for = closed;
        }
        stats
    }

    fn documented() -> RoutePacing {
        RoutePacing::new(TRIGGER_LIMIT, PacingSource::Documented)
    }

    #[test]
    fn says_the_limit_its_source_and_how_to_change_it() {
        let held = Held {
            paced: Some(documented()),
            gate: None,
            trigger: None,
            changed: true,
        };
        assert_eq!(
            held.text(Some(200)),
            "paced: 100 per 60 s per trigger (Hodoflow's documented default; --trigger-limit \
             to change); 200 events waiting"
        );
        let server = RoutePacing::new(
            RouteLimit::new(1000, 60 * SECOND).unwrap(),
            PacingSource::Server,
        );
        assert_eq!(
            paced(&server),
            "paced: 1000 per 60 s per trigger (the server's RateLimit-Policy; --trigger-limit \
             to change)"
        );
        let caller = RoutePacing::new(
            RouteLimit::new(5, Duration::from_millis(800)).unwrap(),
            PacingSource::Caller,
        );
        assert_eq!(
            paced(&caller),
            "paced: 5 per 800 ms per trigger (set by --trigger-limit; change it there, or turn \
             it off)"
        );
        assert_eq!(
            gate(Some(Duration::from_millis(27_400))),
            "held: the server paused this credential, 27 s left (its Retry-After or RateLimit \
             field; no flag changes it)"
        );
    }

    #[test]
    fn says_nothing_for_a_second_then_once_per_change() {
        let mut announcer = Announcer::default();
        assert_eq!(announcer.observe(&Stats::default()), None);
        let short = stats(Some((SECOND / 2, documented())), None);
        assert_eq!(announcer.observe(&short), None, "a hold under a second");
        let mut put_off = Stats::default();
        put_off.route_held_by = Some(documented());
        put_off.route_full_for = Some(59 * SECOND);
        assert!(
            announcer.observe(&put_off).unwrap().changed,
            "a job put off for a minute by a full window"
        );
        announcer = Announcer::default();
        let long = stats(Some((2 * SECOND, documented())), None);
        assert!(announcer.observe(&long).unwrap().changed);
        assert!(!announcer.observe(&long).unwrap().changed, "said once");
        assert_eq!(announcer.observe(&Stats::default()), None);
        assert!(
            !announcer.observe(&long).unwrap().changed,
            "the same pacing holding again is no change"
        );
        let learned = RoutePacing::new(
            RouteLimit::new(1000, 60 * SECOND).unwrap(),
            PacingSource::Server,
        );
        let again = stats(Some((2 * SECOND, learned)), None);
        assert!(announcer.observe(&again).unwrap().changed, "a new limit");
    }

    #[test]
    fn says_each_hold_of_the_gate_once() {
        let mut announcer = Announcer::default();
        let mut just_closed = Stats::default();
        just_closed.gate_closed_for = Some(3 * SECOND);
        assert!(
            announcer.observe(&just_closed).unwrap().changed,
            "a pause of 3 s holds sends from its start"
        );
        announcer = Announcer::default();
        let closed = stats(None, Some((2 * SECOND, Some(5 * SECOND))));
        let held = announcer.observe(&closed).unwrap();
        assert!(held.changed);
        assert!(
            held.text(None)
                .starts_with("held: the server paused this credential, 5 s left")
        );
        assert!(!announcer.observe(&closed).unwrap().changed);
        assert_eq!(announcer.observe(&Stats::default()), None);
        assert!(
            announcer.observe(&closed).unwrap().changed,
            "a new pause after the gate opened"
        );
        let both = stats(Some((2 * SECOND, documented())), Some((2 * SECOND, None)));
        let held = announcer.observe(&both).unwrap();
        assert!(held.changed, "the pacing is new");
        assert_eq!(
            held.text(Some(3)),
            "paced: 100 per 60 s per trigger (Hodoflow's documented default; --trigger-limit \
             to change); held: the server paused this credential (its Retry-After or RateLimit \
             field; no flag changes it); 3 events waiting"
        );
    }
}
