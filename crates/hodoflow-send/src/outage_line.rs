//! What this tool shows of a service the fleet holds down: `outbox status` (one line of text,
//! or one JSON object) and the status page.
//!
//! A worker that finds a service down (its retry budget crossed, or six failures in a row)
//! writes the outage to the store, and every worker then sends the service one probe at a
//! time until one is accepted. The scope is the workers' name for the service, never a secret;
//! a reader sees which service is down, since when, and when the fleet probes it next.
//!
//! ```text
//! {"scope":"hodoflow http://127.0.0.1:8080 webhook","since":"2025-01-01T12:00:05Z",
//!  "down_ms":125000,"probe_at":"2025-01-01T12:02:14Z","probe_in_ms":4000}
//! ```

use std::time::{Duration, SystemTime};

use hodoflow_outbox::ServiceOutage;
use serde::Serialize;

use crate::job_line::rfc3339;
use crate::pause_line::left;

/// One service held down, as shown.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OutageLine {
    pub(crate) scope: String,
    /// The outage's onset, RFC 3339 in UTC.
    pub(crate) since: String,
    /// How long it has been down, in milliseconds.
    pub(crate) down_ms: u64,
    /// The earliest the fleet's next probe may go, RFC 3339 in UTC.
    pub(crate) probe_at: String,
    /// How long from now until then, in milliseconds (0: the next attempt is the probe).
    pub(crate) probe_in_ms: u64,
}

impl OutageLine {
    /// The line of `down`, read at `now`.
    pub(crate) fn of(down: &ServiceOutage, now: SystemTime) -> Self {
        let (since, probe_at) = (down.outage.since(), down.outage.probe_at());
        let millis = |wait: Duration| u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        Self {
            scope: down.scope.clone(),
            since: rfc3339(since),
            down_ms: millis(now.duration_since(since).unwrap_or(Duration::ZERO)),
            probe_at: rfc3339(probe_at),
            probe_in_ms: millis(probe_at.duration_since(now).unwrap_or(Duration::ZERO)),
        }
    }

    /// How long it has been down, as a person reads it.
    pub(crate) fn down(&self) -> String {
        left(Duration::from_millis(self.down_ms))
    }

    /// How long until the next probe, as a person reads it.
    pub(crate) fn probe_in(&self) -> String {
        left(Duration::from_millis(self.probe_in_ms))
    }

    /// `scope: down since TIME (for DOWN); next probe at TIME (in WAIT)`, for `status` without
    /// `--json`.
    pub(crate) fn text(&self) -> String {
        format!(
            "{}: down since {} (for {}); next probe at {} (in {})",
            crate::sanitize::field(&self.scope),
            self.since,
            self.down(),
            self.probe_at,
            self.probe_in()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hodoflow_outbox::Outage;
    use std::time::UNIX_EPOCH;

    #[test]
    fn an_outage_shows_its_scope_onset_time_down_and_next_probe() {
        let now = UNIX_EPOCH + Duration::from_secs(1_735_732_930);
        let down = ServiceOutage::new(
            "hodoflow http://127.0.0.1:8080\nwebhook",
            Outage::new(now - Duration::from_secs(125), now + Duration::from_secs(4)),
        );
        let line = OutageLine::of(&down, now);
        assert_eq!((line.down_ms, line.probe_in_ms), (125_000, 4_000));
        assert_eq!(
            line.text(),
            "hodoflow http://127.0.0.1:8080\\nwebhook: down since 2025-01-01T12:00:05Z \
             (for 2 min 5 s); next probe at 2025-01-01T12:02:14Z (in 4 s)",
            "a control character is shown escaped, never altered"
        );
        let due = OutageLine::of(&down, now + Duration::from_secs(10));
        assert!(due.text().ends_with("(in 0 s)"), "{}", due.text());
    }
}
