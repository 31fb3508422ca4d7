//! What this tool shows of an outbox job: one JSON line, or one line of text.
//!
//! A job holds two things that are never shown: its trigger token (a secret, as Hodoflow's
//! webhook sender guide says) and its body. [`JobLine::of`] reads neither, and adds the token to
//! the redaction set (`redact.rs`) before anything of the job is printed, so a server that put the token into an
//! `x-request-id` or an error message has it redacted here as everywhere else: the run ID, the
//! request ID and the error message, what a server said, are redacted as they enter the line.
//! The event ID is the producer's own and is shown as it is (escaped in text).
//!
//! ```text
//! {"event_id":"…","delivery_id":"…","state":"accepted","workflow_run_id":"…"|null,"calls":1,
//!  "attempts":2,"next_attempt_at":"2025-01-01T12:00:05Z"|null,"may_have_run":false,
//!  "error":null|{"kind":"transport","status":null|503,"request_id":…,"message":…}}
//! ```
//!
//! `next_attempt_at` is set only while the job is pending (when it is due) or in flight (when it
//! was claimed); it is `null` once the job is final. `may_have_run` is true once a call of the
//! job may have run it without saying so (an attempt sent and unanswered, or its key in
//! progress), and stays true: such a job is reconciled by a person, never taken as not run.

use std::time::{SystemTime, UNIX_EPOCH};

use hodoflow_outbox::{Job, JobState, LastError, Target};
use serde::Serialize;

/// One job, as shown.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct JobLine {
    pub(crate) event_id: String,
    pub(crate) delivery_id: String,
    pub(crate) state: &'static str,
    pub(crate) workflow_run_id: Option<String>,
    pub(crate) calls: u32,
    pub(crate) attempts: u32,
    pub(crate) next_attempt_at: Option<String>,
    pub(crate) may_have_run: bool,
    pub(crate) error: Option<ErrorLine>,
}

/// The last call's error of a job.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ErrorLine {
    pub(crate) kind: String,
    pub(crate) status: Option<u16>,
    pub(crate) request_id: Option<String>,
    pub(crate) message: String,
}

impl JobLine {
    /// The line of `job`, its trigger token added to the redaction set first.
    pub(crate) fn of(job: &Job) -> Self {
        remember_secret(job);
        Self {
            event_id: job.event_id.clone(),
            delivery_id: job.identity.as_str().to_owned(),
            state: job.state.as_str(),
            workflow_run_id: job.run_id.as_deref().map(redacted),
            calls: job.calls,
            attempts: job.attempts,
            next_attempt_at: (!job.state.is_final()).then(|| rfc3339(job.next_at)),
            may_have_run: job.may_have_run,
            error: job.last_error.as_ref().map(ErrorLine::of),
        }
    }

    /// `event_id  state  calls  attempts  next  error  may_have_run`, for `list` without
    /// `--json`.
    pub(crate) fn text(&self) -> String {
        let error = self.error.as_ref().map_or_else(
            || "-".to_owned(),
            |error| {
                let kind = crate::sanitize::field(&error.kind);
                match error.status {
                    Some(status) => format!("{kind} {status}"),
                    None => kind.into_owned(),
                }
            },
        );
        // Stored text, from a batch file or a server: one field each, a tab in it escaped.
        format!(
            "{}\t{}\t{}\t{}\t{}\t{error}\t{}",
            crate::sanitize::field(&self.event_id),
            self.state,
            self.calls,
            self.attempts,
            self.next_attempt_at.as_deref().unwrap_or("-"),
            if self.may_have_run { "yes" } else { "no" }
        )
    }

    /// The header of [`text`](Self::text) lines.
    pub(crate) const HEADER: &'static str =
        "event_id\tstate\tcalls\tattempts\tnext_attempt_at\tlast_error\tmay_have_run";
}

impl ErrorLine {
    fn of(error: &LastError) -> Self {
        Self {
            kind: error.kind.clone(),
            status: error.status,
            request_id: error.request_id.as_deref().map(redacted),
            message: redacted(&error.message),
        }
    }
}

/// `value`, what a server said, with every known secret in it redacted.
fn redacted(value: &str) -> String {
    crate::redact::text(value).into_owned()
}

/// Adds the trigger token of `job`, if this process knows it, to the redaction set.
pub(crate) fn remember_secret(job: &Job) {
    if let Target::Webhook { trigger } = &job.target
        && let Some(token) = trigger.token()
    {
        crate::redact::add(token.expose());
    }
}

/// Whether a job in `state` is finished well: nothing more to do for it.
pub(crate) fn delivered(state: JobState) -> bool {
    matches!(
        state,
        JobState::Accepted | JobState::Duplicate | JobState::Done
    )
}

/// `time` as RFC 3339 in UTC, to the second: `2025-01-01T12:00:05Z`.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let seconds = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let days = i64::try_from(seconds / 86_400).unwrap_or(i64::MAX / 2);
    let of_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month as u32, day as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(1_735_732_805_999)),
            "2025-01-01T12:00:05Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(4_102_444_799)),
            "2099-12-31T23:59:59Z"
        );
    }
}
