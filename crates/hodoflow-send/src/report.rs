//! What a command reports, and the exit status it ends with.
//!
//! With `--json` a command prints exactly one JSON object on standard output; without it, a short
//! summary on standard output and the attempt log on standard error. Either way the exit status
//! says what to do next:
//!
//! | exit | meaning | what to do |
//! |---|---|---|
//! | 0 | `accepted`, `duplicate`, `ok` or `replayed` | nothing |
//! | 1 | permanent failure | fix the request; do not retry it unchanged |
//! | 2 | usage error or invalid input; nothing was sent | fix the command line |
//! | 3 | retryable: the budget ran out, or the outcome is unknown | retry later with the same key |
//!
//! # Error kinds
//!
//! The SDK's [`ErrorKind`] is `#[non_exhaustive]` and finer than the kinds this tool reports.
//! Each SDK kind maps onto one reported kind; the precise SDK kind starts the `message`
//! (`"server: server error (503 …)"`).
//!
//! | SDK kind | reported kind | exit |
//! |---|---|---|
//! | `forbidden` | `forbidden` | 1 |
//! | `not_found` | `not_found` | 1 |
//! | `key_reused` | `key_reused` | 1 |
//! | `in_progress` | `in_progress` | 3 |
//! | `budget_exhausted`, `retry_budget_exhausted` whose last answer was a 409 (Modulify's key still running when the budget ended) | `in_progress` | 3 |
//! | `payload_too_large` | `payload_too_large` | 1 |
//! | `unprocessable`, `client_error`, `graphql` | `unprocessable` | 1 |
//! | `unauthorized` | `unauthorized` | 1 |
//! | `token_exchange` refused with a 4xx other than 429 | `unauthorized` | 1 |
//! | `token_exchange` answered 2xx or 3xx (no `access_token`, not JSON, a redirect, an unusable token) | `configuration` | 1 |
//! | `token_exchange` unanswered, 429 or 5xx | `transport` | 3 |
//! | `budget_exhausted`, `retry_budget_exhausted`, `server`, `rate_limited` | `budget_exhausted` | 3 |
//! | `invalid_input` | `invalid_input` | 2 |
//! | `unexpected_status` with a 3xx (a redirect: the base URL is wrong) | `configuration` | 1 |
//! | `transport`, `decode`, any other `unexpected_status` | `transport` | 3 |
//! | `answer_too_large` on a 2xx (the server acted; its answer is over the limit) | `transport` | 3 |
//! | `answer_too_large` on any other status | `unprocessable` | 1 |
//! | any later kind the SDK retries | `budget_exhausted` | 3 |
//! | any later kind it does not retry | `unprocessable` | 1 |
//! | (no SDK error: the operation panicked inside this process) | `internal` | 3 |
//!
//! Any failure whose `may_have_run` is true exits 3 as well: the operation may have taken
//! effect, so the only safe next step is the same request with the same key. A panic is
//! reported `internal` with `may_have_run` true for the same reason: nothing says how far the
//! operation got.
//!
//! Everything here is printed through `redact.rs`. The values this tool did not write (a
//! request ID, a run ID, the SDK's error message, a server's body) are redacted where they
//! enter a report (`Failure::from_error`, `AttemptLine::all`, `Report::body_of`, the commands'
//! run IDs), so the report's own words never are.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use hodoflow_retry::{
    Error, ErrorKind,
    attempt::{Attempt, AttemptResult},
};
use serde::Serialize;

/// How the process ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Accepted, duplicate, ok or replayed.
    Success = 0,
    /// A permanent failure: do not retry unchanged.
    Permanent = 1,
    /// A usage error or invalid input: nothing was sent.
    Usage = 2,
    /// Retryable: retry later with the same key.
    Retryable = 3,
}

impl Exit {
    /// How bad an exit is, for a batch's worst status: a permanent failure needs a person, a
    /// usage error needs the input fixed, a retryable failure only needs a later run.
    pub(crate) fn severity(self) -> u8 {
        match self {
            Self::Success => 0,
            Self::Retryable => 1,
            Self::Usage => 2,
            Self::Permanent => 3,
        }
    }

    /// The process exit code.
    pub(crate) fn code(self) -> u8 {
        self as u8
    }
}

/// The `outcome` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// A first delivery: the server committed it and started a run.
    Accepted,
    /// A delivery the server had already accepted: no second run.
    Duplicate,
    /// A write, read, query or followed run that succeeded.
    Ok,
    /// A write or a Modulify call the server had already run, its stored answer replayed.
    Replayed,
    /// A failure; `error` says which.
    Error,
}

impl Outcome {
    /// The wire name, such as `"accepted"`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Duplicate => "duplicate",
            Self::Ok => "ok",
            Self::Replayed => "replayed",
            Self::Error => "error",
        }
    }
}

/// One entry of `attempts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct AttemptLine {
    /// 1 for the first.
    pub(crate) attempt: u32,
    /// The answer's status; `null` when no answer came back.
    pub(crate) status: Option<u16>,
    /// Why no answer came back (`timeout`, `closed`, `connect`, …); `null` when one did.
    pub(crate) error: Option<&'static str>,
    /// The answer's `x-request-id`.
    pub(crate) request_id: Option<String>,
    /// The wait before this attempt: 0 for the first.
    pub(crate) waited_ms: u64,
}

impl AttemptLine {
    /// The lines of `attempts`. The SDK records the wait chosen *after* an attempt; a line shows
    /// the wait *before* it, so each takes its predecessor's.
    pub(crate) fn all(attempts: &[Attempt]) -> Vec<Self> {
        let mut waited = Duration::ZERO;
        attempts
            .iter()
            .map(|attempt| {
                let line = Self {
                    attempt: attempt.number(),
                    status: attempt.status().map(|status| status.as_u16()),
                    error: match attempt.result() {
                        AttemptResult::Transport(kind) => Some(kind.as_str()),
                        _ => None,
                    },
                    request_id: attempt
                        .request_id()
                        .map(|id| crate::redact::text(id).into_owned()),
                    waited_ms: millis(waited),
                };
                waited = attempt.wait();
                line
            })
            .collect()
    }
}

impl std::fmt::Display for AttemptLine {
    /// `attempt 2 after 12 ms: 503 (req_…)` or `attempt 1: no answer (closed)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "attempt {}", self.attempt)?;
        if self.attempt > 1 {
            write!(f, " after {} ms", self.waited_ms)?;
        }
        match (self.status, self.error) {
            (Some(status), _) => write!(f, ": {status}")?,
            (None, error) => write!(f, ": no answer ({})", error.unwrap_or("other"))?,
        }
        if let Some(id) = &self.request_id {
            write!(f, " ({})", crate::sanitize::field(id))?;
        }
        Ok(())
    }
}

/// The `error` field, and the exit it leads to.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Failure {
    /// One of the reported kinds of the module table.
    pub(crate) kind: &'static str,
    /// Whether the operation may have taken effect despite the failure.
    pub(crate) may_have_run: bool,
    /// What happened, starting with the precise SDK kind; every value in it redacted.
    pub(crate) message: String,
    /// What happened, without the SDK kind, for the human summary.
    #[serde(skip)]
    pub(crate) detail: String,
    /// The exit status.
    #[serde(skip)]
    pub(crate) exit: Exit,
    /// The server's `Retry-After`, for the human hint.
    #[serde(skip)]
    pub(crate) retry_after: Option<Duration>,
}

impl Failure {
    /// The failure of an SDK error, through the module's table.
    pub(crate) fn from_error(error: &Error) -> Self {
        let kind = reported_kind(error);
        let may_have_run = error.may_have_run();
        // The SDK's message quotes what a server said: redacted here, where it enters.
        let detail = crate::redact::text(&error.to_string()).into_owned();
        let exit = match kind {
            "invalid_input" => Exit::Usage,
            "budget_exhausted" | "transport" | "in_progress" => Exit::Retryable,
            _ if may_have_run => Exit::Retryable,
            _ => Exit::Permanent,
        };
        Self {
            kind,
            may_have_run,
            message: format!("{}: {detail}", error.kind().as_str()),
            detail,
            exit,
            retry_after: error.retry_after(),
        }
    }

    /// Invalid input found before anything was sent: exit 2. `message` is this tool's sentence;
    /// a value it quotes from a command line or a file is the user's own, shown as it is.
    pub(crate) fn invalid_input(message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            kind: "invalid_input",
            may_have_run: false,
            detail: message.clone(),
            message,
            exit: Exit::Usage,
            retry_after: None,
        }
    }

    /// An operation that panicked inside this process: it may have run, so exit 3. `what`, the
    /// panic's message, is redacted.
    pub(crate) fn internal(what: &str) -> Self {
        let detail = format!(
            "the operation failed inside hodoflow-send ({}); it may have been sent",
            crate::redact::text(what)
        );
        Self {
            kind: "internal",
            may_have_run: true,
            message: format!("internal: {detail}"),
            detail,
            exit: Exit::Retryable,
            retry_after: None,
        }
    }

    /// An operation this tool did not start, because the SDK's retry budget would only have
    /// held it and refused it (`reason` says why): nothing was sent, so exit 3.
    pub(crate) fn not_started(reason: &str) -> Self {
        let detail = format!("not started: {reason}");
        Self {
            kind: "budget_exhausted",
            may_have_run: false,
            message: format!("retry_budget_exhausted: {detail}"),
            detail,
            exit: Exit::Retryable,
            retry_after: None,
        }
    }

    /// A permanent failure this tool finds in a definite answer: exit 1. Every value `message`
    /// quotes must be redacted already (`redact::text`).
    pub(crate) fn permanent(kind: &'static str, may_have_run: bool, message: String) -> Self {
        Self {
            kind,
            may_have_run,
            detail: message.clone(),
            message,
            exit: Exit::Permanent,
            retry_after: None,
        }
    }
}

/// The reported kind of an SDK error: the module's table.
fn reported_kind(error: &Error) -> &'static str {
    match error.kind() {
        ErrorKind::Forbidden => "forbidden",
        ErrorKind::NotFound => "not_found",
        ErrorKind::KeyReused => "key_reused",
        ErrorKind::InProgress => "in_progress",
        // The SDK ends a Modulify 409 it was waiting out with the budget's own kind; what is
        // left is the key still running, which is what the caller must know.
        ErrorKind::BudgetExhausted | ErrorKind::RetryBudgetExhausted
            if error.status().is_some_and(|s| s.as_u16() == 409) =>
        {
            "in_progress"
        }
        ErrorKind::PayloadTooLarge => "payload_too_large",
        ErrorKind::Unprocessable | ErrorKind::ClientError | ErrorKind::GraphQl => "unprocessable",
        ErrorKind::Unauthorized => "unauthorized",
        ErrorKind::TokenExchange => match error.status() {
            Some(status) if status.is_success() || status.is_redirection() => "configuration",
            Some(status) if status.is_client_error() && status.as_u16() != 429 => "unauthorized",
            _ => "transport",
        },
        ErrorKind::BudgetExhausted
        | ErrorKind::RetryBudgetExhausted
        | ErrorKind::Server
        | ErrorKind::RateLimited => "budget_exhausted",
        ErrorKind::InvalidInput => "invalid_input",
        ErrorKind::UnexpectedStatus if error.status().is_some_and(|s| s.is_redirection()) => {
            "configuration"
        }
        ErrorKind::Transport | ErrorKind::Decode | ErrorKind::UnexpectedStatus => "transport",
        // The server acted but its answer could not be read whole: like an answer lost.
        ErrorKind::AnswerTooLarge if error.status().is_some_and(|s| s.is_success()) => "transport",
        ErrorKind::AnswerTooLarge => "unprocessable",
        _ if error.is_retryable() => "budget_exhausted",
        _ => "unprocessable",
    }
}

/// What `rehearse` adds: the first delivery.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct FirstDelivery {
    /// How the server took the first delivery (`accepted`, or `duplicate` when the delivery ID
    /// was used before); `null` when nothing was sent.
    pub(crate) first_outcome: Option<Outcome>,
    /// The run the first delivery started.
    pub(crate) first_workflow_run_id: Option<String>,
    /// The attempts of the first delivery.
    pub(crate) first_attempts: Vec<AttemptLine>,
}

/// What one command reports.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// How it ended.
    pub(crate) outcome: Outcome,
    /// The status of the answer that settled it.
    pub(crate) status: Option<u16>,
    /// The workflow run a delivery started, or the run followed.
    pub(crate) workflow_run_id: Option<String>,
    /// The Idempotency-Key or delivery ID sent.
    pub(crate) key: Option<String>,
    /// Every attempt.
    pub(crate) attempts: Vec<AttemptLine>,
    /// Wall time from the start of the command to its end, token exchange included.
    pub(crate) elapsed_ms: u64,
    /// The failure, when `outcome` is `error`.
    pub(crate) error: Option<Failure>,
    /// `follow` only (absent for the other commands): the run's last state, `null` when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) state: Option<Option<&'static str>>,
    /// `rehearse`: the first delivery.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub(crate) first: Option<FirstDelivery>,
    /// `write`, `get`, `graphql` only: the last answer's body, an error body included, as JSON
    /// (a string when it is not JSON; `null` when empty or when nothing was sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) body: Option<serde_json::Value>,
    /// `modulify call` only: the answer's `data`, `null` when it is null or there is no answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) data: Option<serde_json::Value>,
    /// `modulify call` only: `false` for a replay whose original answer was over 1 MB and not
    /// kept (read the current state instead), `true` for any other success, `null` for a
    /// failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) answer_kept: Option<Option<bool>>,
}

impl Report {
    /// A success with `outcome`; the caller fills in the rest.
    pub(crate) fn success(outcome: Outcome, attempts: &[Attempt]) -> Self {
        Self {
            outcome,
            status: attempts
                .last()
                .and_then(Attempt::status)
                .map(|s| s.as_u16()),
            workflow_run_id: None,
            key: None,
            attempts: AttemptLine::all(attempts),
            elapsed_ms: 0,
            error: None,
            state: None,
            first: None,
            body: None,
            data: None,
            answer_kept: None,
        }
    }

    /// The report of an SDK error.
    pub(crate) fn failed(error: &Error) -> Self {
        Self {
            status: error.status().map(|s| s.as_u16()),
            attempts: AttemptLine::all(error.attempts()),
            ..Self::failure(Failure::from_error(error))
        }
    }

    /// The report of `failure`, with no attempt made.
    pub(crate) fn failure(failure: Failure) -> Self {
        Self {
            outcome: Outcome::Error,
            status: None,
            workflow_run_id: None,
            key: None,
            attempts: Vec::new(),
            elapsed_ms: 0,
            error: Some(failure),
            state: None,
            first: None,
            body: None,
            data: None,
            answer_kept: None,
        }
    }

    /// The JSON body of an answer, redacted: `null` when empty, a string when it is not JSON.
    pub(crate) fn body_of(body: &[u8]) -> serde_json::Value {
        if body.is_empty() {
            return serde_json::Value::Null;
        }
        crate::redact::json(serde_json::from_slice(body).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(body).into_owned())
        }))
    }

    /// Sets the key or delivery ID sent.
    pub(crate) fn with_key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }

    /// How the process ends.
    pub(crate) fn exit(&self) -> Exit {
        self.error
            .as_ref()
            .map_or(Exit::Success, |failure| failure.exit)
    }

    /// Prints the report (its values redacted where they entered it): one JSON object, or a
    /// summary on stdout and the attempts on stderr.
    pub(crate) fn print(&self, json: bool) {
        if json {
            crate::redact::print_json(self);
            return;
        }
        let mut log = Vec::new();
        if let Some(first) = &self.first {
            log.extend(
                first
                    .first_attempts
                    .iter()
                    .map(|l| format!("first delivery: {l}")),
            );
            log.extend(self.attempts.iter().map(|l| format!("resend: {l}")));
        } else {
            log.extend(self.attempts.iter().map(ToString::to_string));
        }
        if !log.is_empty() {
            crate::redact::eprint(&log.join("\n"));
        }
        crate::redact::print(&self.summary());
        if let Some(body) = self.body.as_ref().filter(|body| !body.is_null()) {
            let text = serde_json::to_string_pretty(body).unwrap_or_default();
            crate::redact::print(&crate::sanitize::escape_json_controls(&text));
        }
    }

    /// The human summary: what happened, and what to do about a failure.
    fn summary(&self) -> String {
        let key = self.key.as_deref().map(|key| format!(", key {key}"));
        let key = key.as_deref().unwrap_or("");
        let first = self
            .first
            .as_ref()
            .map_or(0, |first| first.first_attempts.len());
        let tries = match self.attempts.len() + first {
            1 => "1 attempt".to_owned(),
            n => format!("{n} attempts"),
        };
        let took = format!("{tries}, {} ms", self.elapsed_ms);
        let status = self.status.map(|s| format!("{s} ")).unwrap_or_default();
        match (&self.outcome, &self.error) {
            (_, Some(failure)) => {
                let hint = match failure.exit {
                    Exit::Usage => "nothing was sent".to_owned(),
                    Exit::Permanent => "permanent: do not retry unchanged".to_owned(),
                    Exit::Retryable | Exit::Success => {
                        let when = failure
                            .retry_after
                            .map(|wait| format!(", no earlier than {} s from now", wait.as_secs()))
                            .unwrap_or_default();
                        match &self.key {
                            Some(key) => format!("retry later with the same key {key}{when}"),
                            None => format!("retry later{when}"),
                        }
                    }
                };
                let state = self
                    .state
                    .flatten()
                    .map(|s| format!(" (run {s})"))
                    .unwrap_or_default();
                format!(
                    "error: {}{state} [{}]\n{hint} ({took}{key})",
                    crate::sanitize::field(&failure.detail),
                    failure.kind
                )
            }
            (Outcome::Accepted, None) => {
                let run = self
                    .workflow_run_id
                    .as_deref()
                    .map_or(Cow::Borrowed("(run ID unreadable)"), crate::sanitize::field);
                format!("accepted: workflow run {run} ({took}{key})")
            }
            (Outcome::Duplicate, None) => match &self.first {
                Some(first) => format!(
                    "duplicate: the resend was recognised; the first delivery was {} with run {} ({took}{key})",
                    first.first_outcome.map_or("?", Outcome::as_str),
                    first
                        .first_workflow_run_id
                        .as_deref()
                        .map_or(Cow::Borrowed("(none)"), crate::sanitize::field)
                ),
                None => format!("duplicate: already accepted earlier, no new run ({took}{key})"),
            },
            (Outcome::Replayed, None) if self.answer_kept == Some(Some(false)) => format!(
                "replayed: {status}without the original answer (it was over 1 MB and is not \
                 kept): the call ran once; read the current state instead ({took}{key})"
            ),
            (Outcome::Replayed, None) => {
                format!("replayed: {status}from the server's idempotency store ({took}{key})")
            }
            (Outcome::Ok | Outcome::Error, None) => {
                match (self.state.flatten(), &self.workflow_run_id) {
                    (Some(state), Some(run)) => {
                        let run = crate::sanitize::field(run);
                        format!("ok: workflow run {run} {state} ({took})")
                    }
                    _ => format!("ok: {status}({took}{key})"),
                }
            }
        }
    }
}

/// Whole milliseconds, saturating.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Adds the fields the command named `command` always reports, even when it failed before
/// sending: `state` for `follow`, `first_*` for `rehearse`, `body` for `write`, `get` and
/// `graphql`, and `body`, `data` and `answer_kept` for `modulify call`.
pub(crate) fn with_command_fields(mut report: Report, command: &str) -> Report {
    match command {
        "follow" => report.state = Some(report.state.flatten()),
        "rehearse" => report.first = Some(report.first.unwrap_or_default()),
        "write" | "get" | "graphql" => {
            report.body = Some(report.body.unwrap_or(serde_json::Value::Null));
        }
        "modulify call" => {
            report.body = Some(report.body.unwrap_or(serde_json::Value::Null));
            report.data = Some(report.data.unwrap_or(serde_json::Value::Null));
            report.answer_kept = Some(report.answer_kept.flatten());
        }
        _ => {}
    }
    report
}

/// Stamps the elapsed time, prints the report and returns its exit.
pub(crate) fn finish(mut report: Report, started: Instant, json: bool) -> Exit {
    report.elapsed_ms = millis(started.elapsed());
    report.print(json);
    report.exit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_failure_exits_2_and_serializes_every_field() {
        let report = Report::failure(Failure::invalid_input("no client secret"));
        assert_eq!(report.exit(), Exit::Usage);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "outcome": "error", "status": null, "workflow_run_id": null, "key": null,
                "attempts": [], "elapsed_ms": 0,
                "error": {"kind": "invalid_input", "may_have_run": false, "message": "no client secret"}
            })
        );
    }

    #[test]
    fn a_batch_is_as_bad_as_its_worst_event() {
        let mut exits = [Exit::Retryable, Exit::Success, Exit::Permanent, Exit::Usage];
        exits.sort_by_key(|exit| exit.severity());
        assert_eq!(
            exits,
            [Exit::Success, Exit::Retryable, Exit::Usage, Exit::Permanent]
        );
    }

    #[test]
    fn sdk_kinds_map_onto_the_reported_kinds() {
        let key = hodoflow_retry::IdempotencyKey::new("").unwrap_err();
        assert_eq!(reported_kind(&key), "invalid_input");
        assert_eq!(Failure::from_error(&key).exit, Exit::Usage);
        let refused = Error::token_exchange("invalid_client");
        assert_eq!(reported_kind(&refused), "transport");
        assert_eq!(Failure::from_error(&refused).exit, Exit::Retryable);
        assert!(
            Failure::from_error(&refused)
                .message
                .starts_with("token_exchange: ")
        );
    }

    #[test]
    fn a_panic_is_internal_may_have_run_and_exits_3() {
        let failure = Failure::internal("boom");
        assert_eq!(failure.kind, "internal");
        assert!(failure.may_have_run);
        assert_eq!(failure.exit, Exit::Retryable);
        assert!(
            failure.message.starts_with("internal: "),
            "{}",
            failure.message
        );
    }
}
