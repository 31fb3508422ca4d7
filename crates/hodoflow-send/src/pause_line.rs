//! What this tool shows of a paused scope: `outbox status` (one line of text, or one JSON
//! object) and the status page.
//!
//! A server's 429 or `Retry-After` closes only what it names: a credential's rate budget, one
//! webhook trigger's window, one vendor endpoint. The workers keep each such pause in the store
//! under a scope, their name for what was closed (never a secret), with the end and the reason,
//! so a reader sees which work waits, until when and why, while the rest goes on.
//!
//! ```text
//! {"scope":"hodoflow http://127.0.0.1:8080 trigger 1a2b3c4d","until":"2025-01-01T12:10:05Z",
//!  "remaining_ms":598000,"why":"the server asked to slow down"}
//! ```

use std::time::{Duration, SystemTime};

use hodoflow_outbox::Pause;
use serde::Serialize;

use crate::job_line::rfc3339;

/// One paused scope, as shown.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PauseLine {
    pub(crate) scope: String,
    /// The end, RFC 3339 in UTC.
    pub(crate) until: String,
    /// How long from now until the end, in milliseconds.
    pub(crate) remaining_ms: u64,
    pub(crate) why: String,
}

impl PauseLine {
    /// The line of `pause`, read at `now`.
    pub(crate) fn of(pause: &Pause, now: SystemTime) -> Self {
        let remaining = pause.until.duration_since(now).unwrap_or(Duration::ZERO);
        Self {
            scope: pause.scope.clone(),
            until: rfc3339(pause.until),
            remaining_ms: u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX),
            why: pause.why.clone(),
        }
    }

    /// `scope: until TIME (LEFT left); why`, for `status` without `--json`.
    pub(crate) fn text(&self) -> String {
        let why = if self.why.is_empty() {
            "no reason was kept".into()
        } else {
            crate::sanitize::field(&self.why)
        };
        format!(
            "{}: until {} ({} left); {why}",
            crate::sanitize::field(&self.scope),
            self.until,
            left(Duration::from_millis(self.remaining_ms))
        )
    }
}

/// A wait as a person reads it, to the second: `45 s`, `9 min 58 s`, `2 h 5 min`.
pub(crate) fn left(wait: Duration) -> String {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min {} s", seconds / 60, seconds % 60),
        _ => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn a_pause_shows_its_scope_end_time_left_and_reason() {
        let now = UNIX_EPOCH + Duration::from_secs(1_735_732_200);
        let pause = Pause::new(
            "hodoflow http://127.0.0.1:8080 trigger 1a2b3c4d",
            now + Duration::from_millis(597_400),
            "the server asked\nto slow down",
        );
        let line = PauseLine::of(&pause, now);
        assert_eq!(line.remaining_ms, 597_400);
        assert_eq!(line.until, "2025-01-01T11:59:57Z");
        assert_eq!(
            line.text(),
            "hodoflow http://127.0.0.1:8080 trigger 1a2b3c4d: until 2025-01-01T11:59:57Z \
             (9 min 58 s left); the server asked\\nto slow down",
            "a control character is shown escaped, never altered"
        );
        let ended = PauseLine::of(&Pause::new("s", now, ""), now + Duration::from_secs(1));
        assert_eq!(ended.remaining_ms, 0);
        assert!(ended.text().ends_with("(0 s left); no reason was kept"));
    }

    #[test]
    fn a_wait_reads_in_seconds_minutes_or_hours() {
        assert_eq!(left(Duration::from_millis(44_001)), "45 s");
        assert_eq!(left(Duration::from_secs(60)), "1 min 0 s");
        assert_eq!(left(Duration::from_secs(7_500)), "2 h 5 min");
    }
}
