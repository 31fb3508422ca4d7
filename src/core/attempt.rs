//! The record of one attempt.
//!
//! Hodoflow's webhook sender guide asks a sender to record, for every attempt, the response status,
//! the `x-request-id` when present, and the stable delivery ID. Every outcome and every error of
//! this crate carries these records, so a caller can log or reconcile without tracing enabled.

use std::fmt;
use std::time::Duration;

use http::StatusCode;

use crate::core::redact::Cleaner;

/// What one attempt came back with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttemptResult {
    /// The server answered with this status.
    Status(StatusCode),
    /// No answer came back.
    Transport(TransportKind),
}

/// Why no answer came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportKind {
    /// The connection could not be opened: the request was never sent.
    Connect,
    /// The attempt timed out; the request may have reached the server.
    Timeout,
    /// The connection was closed or reset after the request left.
    Closed,
    /// The status arrived but the body could not be read.
    Body,
    /// Any other transport failure.
    Other,
    /// The server refused the HTTP/2 stream unprocessed: a `RST_STREAM` with `REFUSED_STREAM`,
    /// or a `GOAWAY` whose last stream ID is below the request's (RFC 9113 section 8.7). The
    /// request did not run, and is retried like a failed connect.
    Refused,
}

impl TransportKind {
    /// Every kind.
    pub const ALL: [TransportKind; 6] = [
        TransportKind::Connect,
        TransportKind::Timeout,
        TransportKind::Closed,
        TransportKind::Body,
        TransportKind::Other,
        TransportKind::Refused,
    ];

    /// Sorts a `reqwest` error into a kind. A connect failure wins over a timeout, since a connect
    /// timeout means nothing was sent; an HTTP/2 refusal wins over the rest, since the server
    /// said it processed nothing.
    pub(crate) fn of(error: &reqwest::Error) -> Self {
        if error.is_connect() {
            Self::Connect
        } else if refused_by_http2(error) {
            Self::Refused
        } else if error.is_timeout() {
            Self::Timeout
        } else if error.is_body() || error.is_decode() {
            Self::Body
        } else if error.is_request() {
            Self::Closed
        } else {
            Self::Other
        }
    }

    /// A stable snake_case name for logs, such as `"timeout"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Timeout => "timeout",
            Self::Closed => "closed",
            Self::Body => "body",
            Self::Other => "other",
            Self::Refused => "refused",
        }
    }

    /// Whether the request may have reached the server's application: every kind but a failed
    /// connect and an HTTP/2 refusal.
    pub const fn may_have_run(self) -> bool {
        !matches!(self, Self::Connect | Self::Refused)
    }
}

/// Whether the error's source chain holds the peer's HTTP/2 word that the stream was not
/// processed. reqwest wraps hyper-util's error, which wraps hyper's, which wraps `h2::Error`;
/// the chain is walked whole so another layer does not hide it.
///
/// - `RST_STREAM` from the peer with `REFUSED_STREAM`;
/// - a `GOAWAY` from the peer: h2 fails with it only the streams above the frame's last stream
///   ID and those opened after it, which the server did not process whatever the error code.
///   Streams at or below that ID that are cut off end with an I/O error instead.
fn refused_by_http2(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = error.source();
    while let Some(error) = cause {
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            let refused_stream = h2.is_reset() && h2.reason() == Some(h2::Reason::REFUSED_STREAM);
            return h2.is_remote() && (refused_stream || h2.is_go_away());
        }
        cause = error.source();
    }
    false
}

/// Why the SDK waited after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum WaitReason {
    /// No wait followed: the attempt was the last one.
    #[default]
    None,
    /// Exponential backoff with full jitter.
    Backoff,
    /// The server's `Retry-After`, plus a small positive jitter.
    RetryAfter,
    /// The token was exchanged before the next attempt; no wait.
    Reexchange,
    /// The server asked for a `Retry-After` it did not give: the backoff's fallback, plus the
    /// jitter of a `Retry-After` (see
    /// [`Backoff::retry_after_fallback`](crate::Backoff::retry_after_fallback)).
    RetryAfterFallback,
    /// The attempt was the retry budget's probe of a service it holds down, and was refused:
    /// no backoff; the retry budget paces the next attempt (it holds it until its next probe,
    /// or until the service is back).
    Probe,
}

impl WaitReason {
    /// A stable snake_case name for logs, such as `"retry_after"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Backoff => "backoff",
            Self::RetryAfter => "retry_after",
            Self::Reexchange => "reexchange",
            Self::RetryAfterFallback => "retry_after_fallback",
            Self::Probe => "probe",
        }
    }
}

/// The longest `x-request-id` kept of an answer, in bytes: a server's header of any length is
/// cut here (on a character boundary), so a call's records stay small.
pub(crate) const MAX_REQUEST_ID: usize = 128;

/// How much of an `x-request-id` an attempt holds until its call ends and it is cleaned
/// ([`Attempt::clean`]): the cut to [`MAX_REQUEST_ID`] comes after the cleaning, so a secret
/// across it is removed whole.
const HEARD_REQUEST_ID: usize = 4096;

/// The record of one attempt: its number, what came back, and the wait chosen after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    number: u32,
    result: AttemptResult,
    request_id: Option<String>,
    wait: Duration,
    wait_reason: WaitReason,
    /// The server answered that a request with the same key is still running.
    running: bool,
}

impl Attempt {
    /// An attempt the server answered with `status`.
    pub(crate) fn answered(number: u32, status: StatusCode, request_id: Option<String>) -> Self {
        Self::with_result(number, AttemptResult::Status(status), request_id)
    }

    /// An attempt that got no answer.
    pub(crate) fn unanswered(number: u32, kind: TransportKind) -> Self {
        Self::with_result(number, AttemptResult::Transport(kind), None)
    }

    fn with_result(number: u32, result: AttemptResult, request_id: Option<String>) -> Self {
        Self {
            number,
            result,
            request_id: request_id.map(|id| bounded(id, HEARD_REQUEST_ID)),
            wait: Duration::ZERO,
            wait_reason: WaitReason::None,
            running: false,
        }
    }

    /// The server answered that a request with the same key is still running: the operation
    /// may be running now.
    pub(crate) fn mark_running(&mut self) {
        self.running = true;
    }

    /// Cleans the `x-request-id` the server sent of every secret `cleaner` knows, escapes its
    /// controls, then cuts it to [`MAX_REQUEST_ID`] bytes (`redact.rs`). Until then it is the
    /// server's text as it came, shown cut.
    pub(crate) fn clean(&mut self, cleaner: &Cleaner) {
        if let Some(id) = &mut self.request_id {
            cleaner.clean(id, MAX_REQUEST_ID);
        }
    }

    /// Records the wait chosen after this attempt.
    pub(crate) fn set_wait(&mut self, wait: Duration, reason: WaitReason) {
        self.wait = wait;
        self.wait_reason = reason;
    }

    /// The attempt number, 1 for the first.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// What the attempt came back with.
    pub fn result(&self) -> AttemptResult {
        self.result
    }

    /// The answer's status, if there was an answer.
    pub fn status(&self) -> Option<StatusCode> {
        match self.result {
            AttemptResult::Status(status) => Some(status),
            AttemptResult::Transport(_) => None,
        }
    }

    /// The answer's `x-request-id`, if any. It identifies this attempt only, never the operation.
    ///
    /// At most 128 bytes, control and bidirectional formatting characters escaped (`\x1b`,
    /// `\u{202e}`), and every secret the client holds replaced by `<redacted>`, whole or in
    /// part: a server may echo the bearer token it was sent.
    pub fn request_id(&self) -> Option<&str> {
        self.request_id
            .as_deref()
            .map(|id| crate::core::redact::bound(id, MAX_REQUEST_ID))
    }

    /// The wait chosen after this attempt; zero when none followed.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Why the wait after this attempt was chosen.
    pub fn wait_reason(&self) -> WaitReason {
        self.wait_reason
    }

    /// Whether the operation may have taken effect by this attempt: it was sent and no answer
    /// came back (not after a failed connect or an HTTP/2 refusal,
    /// [`TransportKind::may_have_run`]), or the server answered that a request with the same key
    /// is still running.
    pub fn may_have_run(&self) -> bool {
        self.running || matches!(self.result, AttemptResult::Transport(kind) if kind.may_have_run())
    }
}

/// `id` cut to `limit` bytes, on a character boundary.
fn bounded(mut id: String, limit: usize) -> String {
    let end = crate::core::redact::bound(&id, limit).len();
    id.truncate(end);
    id
}

/// `attempt 1: 503 (req_…), waited 1.02s (retry_after)` or `attempt 2: no answer (closed)`.
impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "attempt {}: ", self.number)?;
        match self.result {
            AttemptResult::Status(status) => write!(f, "{}", status.as_u16())?,
            AttemptResult::Transport(kind) => write!(f, "no answer ({})", kind.as_str())?,
        }
        if let Some(id) = self.request_id() {
            write!(f, " ({id})")?;
        }
        if self.wait_reason != WaitReason::None {
            write!(
                f,
                ", waited {:.2?} ({})",
                self.wait,
                self.wait_reason.as_str()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_failure_never_ran_but_a_timeout_may_have() {
        assert!(!Attempt::unanswered(1, TransportKind::Connect).may_have_run());
        assert!(Attempt::unanswered(1, TransportKind::Timeout).may_have_run());
        assert!(Attempt::unanswered(1, TransportKind::Closed).may_have_run());
        assert!(Attempt::unanswered(1, TransportKind::Body).may_have_run());
        assert!(Attempt::unanswered(1, TransportKind::Other).may_have_run());
    }

    #[test]
    fn an_http2_refusal_never_ran() {
        assert!(!Attempt::unanswered(1, TransportKind::Refused).may_have_run());
        assert_eq!(
            Attempt::unanswered(3, TransportKind::Refused).to_string(),
            "attempt 3: no answer (refused)"
        );
    }

    #[test]
    fn finds_a_remote_refusal_at_any_depth_of_the_source_chain() {
        #[derive(Debug)]
        struct Wrap(Box<dyn std::error::Error + Send + Sync>);
        impl fmt::Display for Wrap {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl std::error::Error for Wrap {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&*self.0)
            }
        }
        // `h2::Error::from(Reason)` is a reset the local side chose, not the peer's word.
        let local = Wrap(Box::new(Wrap(Box::new(h2::Error::from(
            h2::Reason::REFUSED_STREAM,
        )))));
        assert!(!refused_by_http2(&local));
        let unrelated = Wrap(Box::new(std::io::Error::other("reset by peer")));
        assert!(!refused_by_http2(&unrelated));
    }

    #[test]
    fn an_answer_that_the_key_is_still_running_may_have_run() {
        let mut attempt = Attempt::answered(1, StatusCode::CONFLICT, None);
        attempt.mark_running();
        assert!(attempt.may_have_run());
    }

    #[test]
    fn keeps_at_most_128_bytes_of_a_request_id() {
        let long = "\u{e9}".repeat(200);
        let attempt = Attempt::answered(1, StatusCode::OK, Some(long));
        let kept = attempt.request_id().unwrap();
        assert_eq!(
            kept.len(),
            MAX_REQUEST_ID,
            "two-byte characters fit exactly"
        );
    }

    #[test]
    fn a_request_id_is_cleaned_before_it_is_cut() {
        let token = "hft_a_token_that_is_long_enough";
        let cleaner = Cleaner::new([token]);
        for at in 100..140 {
            let id = format!("{}{token}\u{202e}", "r".repeat(at));
            let mut attempt = Attempt::answered(1, StatusCode::OK, Some(id));
            attempt.clean(&cleaner);
            let kept = attempt.request_id().unwrap();
            assert!(kept.len() <= MAX_REQUEST_ID, "{at}");
            assert!(!kept.contains("hft_a_to"), "{at}: {kept}");
        }
        let mut attempt = Attempt::answered(1, StatusCode::OK, Some("req\u{1b}[2J".into()));
        attempt.clean(&cleaner);
        assert_eq!(attempt.request_id(), Some("req\\x1b[2J"));
    }

    #[test]
    fn an_answered_attempt_is_definite() {
        let attempt = Attempt::answered(2, StatusCode::CONFLICT, Some("req-2".into()));
        assert!(!attempt.may_have_run());
        assert_eq!(attempt.status(), Some(StatusCode::CONFLICT));
        assert_eq!(attempt.request_id(), Some("req-2"));
        assert_eq!(attempt.number(), 2);
    }

    #[test]
    fn displays_status_request_id_and_wait() {
        let mut attempt =
            Attempt::answered(1, StatusCode::SERVICE_UNAVAILABLE, Some("req-1".into()));
        attempt.set_wait(Duration::from_millis(1500), WaitReason::RetryAfter);
        assert_eq!(
            attempt.to_string(),
            "attempt 1: 503 (req-1), waited 1.50s (retry_after)"
        );
        let lost = Attempt::unanswered(2, TransportKind::Closed);
        assert_eq!(lost.to_string(), "attempt 2: no answer (closed)");
    }

    #[test]
    fn records_the_wait_and_its_reason() {
        let mut attempt = Attempt::answered(1, StatusCode::TOO_MANY_REQUESTS, None);
        assert_eq!(attempt.wait_reason(), WaitReason::None);

        attempt.set_wait(Duration::from_secs(3), WaitReason::RetryAfter);
        assert_eq!(attempt.wait(), Duration::from_secs(3));
        assert_eq!(attempt.wait_reason(), WaitReason::RetryAfter);
    }
}
