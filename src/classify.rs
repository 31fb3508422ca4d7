//! The retry matrix, as data.
//!
//! One table per [`Surface`], each a line-by-line transcription of the tables in documents 000
//! (JSON:API writes, reads, GraphQL) and 001 (webhook deliveries), with the rules of issue 3 where
//! the documents leave a gap (502 and 504, GraphQL errors, statuses no document names). Hold a
//! table beside its document: a row is a result, its verdict, and the document's action.
//!
//! One engine loop consumes every table through [`classify`]. A second API profile is a second
//! table, not new control flow.
//!
//! Within a table the most specific matching row wins: a status with an error code in the body,
//! then a list of statuses, then a status range, then `Other`. So the rows can follow the
//! document's order.

use std::fmt;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, StatusCode, header};
use serde_json::Value;

use crate::attempt::TransportKind;
use crate::backoff::parse_retry_after;
use crate::error::{Error, ErrorKind};

/// The longest server error code quoted in an error message.
const MAX_QUOTED_CODE: usize = 100;

/// An API surface with a retry matrix of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Surface {
    /// JSON:API unsafe writes: POST, PUT, PATCH and DELETE under `/api/json`, with an
    /// `Idempotency-Key` (document 000).
    JsonApiWrite,
    /// Webhook deliveries to `/api/v1/webhooks/<token>`, with a delivery ID (document 001).
    Webhook,
    /// Reads: GET and HEAD, naturally repeatable, without a key (document 000).
    Read,
    /// GraphQL `factQuery`: read-only, without a key and without response replay (document 000).
    GraphQl,
}

impl Surface {
    /// Every surface, each with a matrix of its own.
    pub const ALL: [Surface; 4] = [
        Surface::JsonApiWrite,
        Surface::Webhook,
        Surface::Read,
        Surface::GraphQl,
    ];

    /// A stable snake_case name for logs, such as `"json_api_write"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::JsonApiWrite => "json_api_write",
            Self::Webhook => "webhook",
            Self::Read => "read",
            Self::GraphQl => "graphql",
        }
    }

    /// Whether requests of this surface carry an idempotency key or delivery ID.
    pub const fn sends_key(self) -> bool {
        matches!(self, Self::JsonApiWrite | Self::Webhook)
    }

    /// This surface's retry matrix.
    pub(crate) const fn rules(self) -> &'static [Rule] {
        match self {
            Self::JsonApiWrite => JSON_API_WRITES,
            Self::Webhook => WEBHOOK_DELIVERIES,
            Self::Read => READS,
            Self::GraphQl => GRAPHQL,
        }
    }
}

impl fmt::Display for Surface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to do about an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// Done: hand the answer to the caller.
    Success,
    /// Retry with the same key after exponential backoff with full jitter. A `Retry-After` on the
    /// answer is honoured as the least wait.
    RetryAfterBackoff,
    /// Retry with the same key after the server's `Retry-After`; after backoff when it is absent.
    RetryAfterRetryAfter,
    /// Discard the cached token, exchange a new one, and retry once with the same key.
    ReexchangeOnce,
    /// Stop: never retried unchanged.
    Stop(ErrorKind),
}

impl Verdict {
    /// Whether the verdict sends the request again (after a wait or a token exchange).
    pub const fn retries(self) -> bool {
        matches!(
            self,
            Self::RetryAfterBackoff | Self::RetryAfterRetryAfter | Self::ReexchangeOnce
        )
    }

    /// The verdict when the caller opted in to waiting for `idempotency_key_in_progress`: the
    /// in-progress stop becomes a wait for `Retry-After` (backoff when absent), within the budget.
    pub(crate) fn waiting_for_in_progress(self) -> Self {
        match self {
            Self::Stop(ErrorKind::InProgress) => Self::RetryAfterRetryAfter,
            other => other,
        }
    }
}

/// Which answers a [`Rule`] covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum When {
    /// No answer came back: connect error, reset, timeout.
    NoResponse,
    /// Any of these statuses.
    Status(&'static [u16]),
    /// Any of these statuses with this error code in the body (see [`error_codes`]).
    Code(&'static [u16], &'static str),
    /// A status in this inclusive range.
    Range(u16, u16),
    /// Any status no other row covers.
    Other,
}

impl When {
    /// Lower is more specific; the most specific matching row wins.
    const fn rank(self) -> u8 {
        match self {
            Self::NoResponse | Self::Code(..) => 0,
            Self::Status(_) => 1,
            Self::Range(..) => 2,
            Self::Other => 3,
        }
    }

    fn matches(self, status: Option<u16>, codes: &[String]) -> bool {
        match (self, status) {
            (Self::NoResponse, None) => true,
            (Self::Status(statuses), Some(status)) => statuses.contains(&status),
            (Self::Code(statuses, code), Some(status)) => {
                statuses.contains(&status) && codes.iter().any(|found| found == code)
            }
            (Self::Range(low, high), Some(status)) => (low..=high).contains(&status),
            (Self::Other, Some(_)) => true,
            _ => false,
        }
    }
}

/// One row of a retry matrix: a result, its verdict, and the document's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) when: When,
    pub(crate) verdict: Verdict,
    pub(crate) action: &'static str,
}

const fn rule(when: When, verdict: Verdict, action: &'static str) -> Rule {
    Rule {
        when,
        verdict,
        action,
    }
}

/// The verdict for a status no table covers. Every table ends in `Other`, so this is a guard.
const UNLISTED: Rule = rule(
    When::Other,
    Verdict::Stop(ErrorKind::UnexpectedStatus),
    "Outside the contract; never retried",
);

/// The verdict for an answer over the client's limit whose status does not retry: its body is
/// needed and was not read.
const TOO_LARGE: Rule = rule(
    When::Other,
    Verdict::Stop(ErrorKind::AnswerTooLarge),
    "The answer is over the client's limit; on a 2xx the server acted: read the current state",
);

use ErrorKind::{
    ClientError, Forbidden, GraphQl, InProgress, KeyReused, NotFound, PayloadTooLarge, Server,
    Unauthorized, UnexpectedStatus, Unprocessable,
};
use Verdict::{ReexchangeOnce, RetryAfterBackoff, RetryAfterRetryAfter, Stop, Success};
use When::{Code, NoResponse, Other, Range, Status};

/// Document 000, "Retry matrix", for POST, PUT, PATCH and DELETE under `/api/json`.
#[rustfmt::skip]
const JSON_API_WRITES: &[Rule] = &[
    //   Result                                           Retry?                  Action
    rule(NoResponse,                                      RetryAfterBackoff,      "Retry with the same idempotency/delivery key"),
    rule(Range(200, 299),                                 Success,                "Done; a replay carries idempotency-replayed: true"),
    rule(Status(&[429]),                                  RetryAfterRetryAfter,   "Wait the Retry-After duration, then retry"),
    rule(Status(&[500, 502, 503, 504]),                   RetryAfterBackoff,      "Exponential backoff with jitter and a bounded attempt/time budget"),
    rule(Code(&[503], "idempotency_unavailable"),         RetryAfterBackoff,      "Nothing was written; retry with the same key"),
    rule(Status(&[401]),                                  ReexchangeOnce,         "Discard cached token, exchange, retry once; then alert"),
    rule(Status(&[403]),                                  Stop(Forbidden),        "Correct scopes or run-as permissions"),
    rule(Status(&[404]),                                  Stop(NotFound),         "Correct path/ID or object access"),
    rule(Code(&[409], "idempotency_key_reused"),          Stop(KeyReused),        "Reconcile key reuse; do not generate a new key blindly"),
    rule(Code(&[409], "idempotency_key_in_progress"),     Stop(InProgress),       "Retry later with the same key"),
    rule(Status(&[413]),                                  Stop(PayloadTooLarge),  "Correct body size"),
    rule(Status(&[422]),                                  Stop(Unprocessable),    "Correct the validation failure"),
    rule(Range(400, 499),                                 Stop(ClientError),      "Correct the request; never retried unchanged"),
    rule(Range(500, 599),                                 Stop(Server),           "Not a transient server error; never retried"),
    rule(Other,                                           Stop(UnexpectedStatus), "Outside the contract; never retried"),
];

/// Document 001, "Retry matrix", for webhook deliveries. The runtime body is the `error` field;
/// where a row does not match on it, the document's body stands in the comment at its end.
#[rustfmt::skip]
const WEBHOOK_DELIVERIES: &[Rule] = &[
    //   Status and runtime body                          Retry?                  Action
    rule(NoResponse,                                      RetryAfterBackoff,      "Treat an unobserved 202 as ambiguous; retry with the same delivery ID"),
    rule(Status(&[202]),                                  Success,                "Stop delivery retries"), // accepted or duplicate
    rule(Range(200, 299),                                 Success,                "The server took the delivery; stop delivery retries"),
    rule(Code(&[401], "missing_credentials"),             ReexchangeOnce,         "Exchange once if expired, then retry once with the same delivery ID"),
    rule(Code(&[401], "Unauthorized"),                    Stop(Unauthorized),     "Fix selected-account, organization, or connector authentication"),
    rule(Status(&[401]),                                  Stop(Unauthorized),     "Fix authentication; only missing_credentials is exchanged"),
    rule(Status(&[403]),                                  Stop(Forbidden),        "Grant webhooks; do not retry unchanged"), // Insufficient scope
    rule(Status(&[404]),                                  Stop(NotFound),         "Confirm token and active workflow; do not retry unchanged"), // Trigger not found
    rule(Status(&[413]),                                  Stop(PayloadTooLarge),  "Reduce the body; a byte-identical retry cannot succeed"), // Request body too large
    rule(Status(&[422]),                                  Stop(Unprocessable),    "Fix payload or trigger configuration"), // Processing failed, Unsupported trigger authentication
    rule(Status(&[429]),                                  RetryAfterRetryAfter,   "Wait the response's Retry-After, then retry with the same ID"), // Rate limit exceeded
    rule(Status(&[503]),                                  RetryAfterBackoff,      "Wait Retry-After, back off, and retry with the same ID"), // Processing temporarily unavailable
    rule(Status(&[500, 502, 504]),                        RetryAfterBackoff,      "Exponential backoff with jitter; retry with the same ID"),
    rule(Range(400, 499),                                 Stop(ClientError),      "Correct the request; never retried unchanged"),
    rule(Range(500, 599),                                 Stop(Server),           "Not a transient server error; never retried"),
    rule(Other,                                           Stop(UnexpectedStatus), "Outside the contract; never retried"),
];

/// Document 000: "Reads are naturally repeatable, but still need bounded backoff." GET and HEAD.
#[rustfmt::skip]
const READS: &[Rule] = &[
    //   Result                                           Retry?                  Action
    rule(NoResponse,                                      RetryAfterBackoff,      "Reads are naturally repeatable; retry with bounded backoff"),
    rule(Range(200, 299),                                 Success,                "Done"),
    rule(Status(&[429]),                                  RetryAfterRetryAfter,   "Wait the Retry-After duration, then retry"),
    rule(Status(&[500, 502, 503, 504]),                   RetryAfterBackoff,      "Exponential backoff with jitter and a bounded attempt/time budget"),
    rule(Status(&[401]),                                  ReexchangeOnce,         "Discard cached token, exchange, retry once; then alert"),
    rule(Status(&[403]),                                  Stop(Forbidden),        "Correct scopes or run-as permissions"),
    rule(Status(&[404]),                                  Stop(NotFound),         "Correct path/ID or object access"),
    rule(Range(400, 499),                                 Stop(ClientError),      "Correct the request; never retried unchanged"),
    rule(Range(500, 599),                                 Stop(Server),           "Not a transient server error; never retried"),
    rule(Other,                                           Stop(UnexpectedStatus), "Outside the contract; never retried"),
];

/// Document 000: "GraphQL factQuery is read-only ... A GraphQL validation or complexity error is
/// permanent until the document or variables change." The code is `errors[].extensions.code`,
/// on a 400 or a 200.
#[rustfmt::skip]
const GRAPHQL: &[Rule] = &[
    //   Result                                           Retry?                  Action
    rule(NoResponse,                                      RetryAfterBackoff,      "Read-only; retry with bounded backoff"),
    rule(Code(&[200, 400], "GRAPHQL_VALIDATION_FAILED"),  Stop(GraphQl),          "Permanent until the document or variables change"),
    rule(Code(&[200, 400], "GRAPHQL_PARSE_FAILED"),       Stop(GraphQl),          "Permanent until the document or variables change"),
    rule(Code(&[200, 400], "QUERY_COMPLEXITY_EXCEEDED"),  Stop(GraphQl),          "Permanent until the document or variables change"),
    rule(Range(200, 299),                                 Success,                "Done"),
    rule(Status(&[429]),                                  RetryAfterRetryAfter,   "Wait the Retry-After duration, then retry"),
    rule(Status(&[500, 502, 503, 504]),                   RetryAfterBackoff,      "Exponential backoff with jitter and a bounded attempt/time budget"),
    rule(Status(&[401]),                                  ReexchangeOnce,         "Discard cached token, exchange, retry once; then alert"),
    rule(Status(&[403]),                                  Stop(Forbidden),        "Correct scopes or run-as permissions"),
    rule(Status(&[404]),                                  Stop(NotFound),         "Correct path/ID or object access"),
    rule(Range(400, 499),                                 Stop(ClientError),      "Correct the request; never retried unchanged"),
    rule(Range(500, 599),                                 Stop(Server),           "Not a transient server error; never retried"),
    rule(Other,                                           Stop(UnexpectedStatus), "Outside the contract; never retried"),
];

/// The header every answer carries to name its request (never an identity).
pub(crate) const X_REQUEST_ID: http::HeaderName = http::HeaderName::from_static("x-request-id");

/// What one attempt came back with: an answer, or none.
#[derive(Debug, Clone)]
pub struct Answer(Received);

#[derive(Debug, Clone)]
enum Received {
    Nothing(TransportKind),
    Response {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    /// The server answered, with a body over the client's limit that was not read.
    TooLarge {
        status: StatusCode,
        headers: HeaderMap,
    },
}

impl Answer {
    /// No answer came back.
    pub fn no_response(kind: TransportKind) -> Self {
        Self(Received::Nothing(kind))
    }

    /// The server answered.
    pub fn response(status: StatusCode, headers: HeaderMap, body: Bytes) -> Self {
        Self(Received::Response {
            status,
            headers,
            body,
        })
    }

    /// The server answered with a body over the client's limit, which was not read (see
    /// [`ClientBuilder::max_answer_bytes`](crate::ClientBuilder::max_answer_bytes)). Its verdict
    /// is its status's when that retries, else a stop with
    /// [`ErrorKind::AnswerTooLarge`](crate::ErrorKind::AnswerTooLarge).
    pub fn too_large(status: StatusCode, headers: HeaderMap) -> Self {
        Self(Received::TooLarge { status, headers })
    }

    /// The status, if the server answered.
    pub fn status(&self) -> Option<StatusCode> {
        match &self.0 {
            Received::Response { status, .. } | Received::TooLarge { status, .. } => Some(*status),
            Received::Nothing(_) => None,
        }
    }

    /// Why no answer came back, if none did.
    pub fn transport(&self) -> Option<TransportKind> {
        match &self.0 {
            Received::Nothing(kind) => Some(*kind),
            Received::Response { .. } | Received::TooLarge { .. } => None,
        }
    }

    /// The headers, if the server answered.
    pub fn headers(&self) -> Option<&HeaderMap> {
        match &self.0 {
            Received::Response { headers, .. } | Received::TooLarge { headers, .. } => {
                Some(headers)
            }
            Received::Nothing(_) => None,
        }
    }

    /// The body; empty when the server did not answer or its body was over the limit.
    pub fn body(&self) -> &[u8] {
        match &self.0 {
            Received::Response { body, .. } => body,
            Received::Nothing(_) | Received::TooLarge { .. } => &[],
        }
    }

    /// Whether the body was over the client's limit and not read.
    pub fn is_too_large(&self) -> bool {
        matches!(self.0, Received::TooLarge { .. })
    }

    /// The answer's `x-request-id`, if any.
    pub fn request_id(&self) -> Option<&str> {
        self.headers()?.get(&X_REQUEST_ID)?.to_str().ok()
    }

    /// The wait the answer's `Retry-After` asks for, counted from `now`; `None` when it is absent
    /// or unreadable.
    ///
    /// Both forms of RFC 9110, section 10.2.3, are read: delay-seconds (too many to count
    /// saturate at `u64::MAX` seconds) and an HTTP-date in any of its three forms. A date at or
    /// before `now` is no wait. This is the server's wait alone, without the jitter the SDK adds.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use bytes::Bytes;
    /// use http::{HeaderMap, HeaderValue, StatusCode, header};
    /// use hodoflow_retry::Answer;
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert(header::RETRY_AFTER, HeaderValue::from_static("3"));
    /// let answer = Answer::response(StatusCode::TOO_MANY_REQUESTS, headers, Bytes::new());
    /// assert_eq!(answer.retry_after(SystemTime::now()), Some(Duration::from_secs(3)));
    /// ```
    pub fn retry_after(&self, now: SystemTime) -> Option<Duration> {
        parse_retry_after(self.headers()?.get(header::RETRY_AFTER)?, now)
    }

    /// The parts of an answer, for building the outcome.
    pub(crate) fn into_parts(self) -> Option<(StatusCode, HeaderMap, Bytes)> {
        match self.0 {
            Received::Response {
                status,
                headers,
                body,
            } => Some((status, headers, body)),
            Received::Nothing(_) | Received::TooLarge { .. } => None,
        }
    }
}

/// The verdict of `surface`'s retry matrix on `answer`.
///
/// # Examples
///
/// ```
/// use bytes::Bytes;
/// use http::{HeaderMap, StatusCode};
/// use hodoflow_retry::{Answer, ErrorKind, Surface, Verdict, classify};
///
/// let reused = Answer::response(
///     StatusCode::CONFLICT,
///     HeaderMap::new(),
///     Bytes::from_static(br#"{"errors":[{"status":"409","code":"idempotency_key_reused"}]}"#),
/// );
/// assert_eq!(classify(Surface::JsonApiWrite, &reused), Verdict::Stop(ErrorKind::KeyReused));
/// ```
pub fn classify(surface: Surface, answer: &Answer) -> Verdict {
    rule_for(surface, answer).verdict
}

/// The row of `surface`'s retry matrix that covers `answer`: the most specific match.
pub(crate) fn rule_for(surface: Surface, answer: &Answer) -> &'static Rule {
    let rules = surface.rules();
    let status = answer.status().map(|status| status.as_u16());
    let needs_codes = status.is_some_and(|status| {
        rules
            .iter()
            .any(|rule| matches!(rule.when, Code(statuses, _) if statuses.contains(&status)))
    });
    let codes = if needs_codes {
        error_codes(surface, answer.body())
    } else {
        Vec::new()
    };
    let rule = rules
        .iter()
        .filter(|rule| rule.when.matches(status, &codes))
        .min_by_key(|rule| rule.when.rank())
        .unwrap_or(&UNLISTED);
    if answer.is_too_large() && !rule.verdict.retries() {
        return &TOO_LARGE;
    }
    rule
}

/// The error codes in an error body, read the way `surface` writes them:
/// JSON:API `{"errors":[{"code":…}]}`, webhook `{"error":"…"}`, GraphQL
/// `{"errors":[{"extensions":{"code":…}}]}`. Empty when the body is not such a document.
pub(crate) fn error_codes(surface: Surface, body: &[u8]) -> Vec<String> {
    let Ok(document) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let code_of = |error: &Value| -> Option<String> {
        let code = match surface {
            Surface::JsonApiWrite | Surface::Read => error.get("code"),
            Surface::GraphQl => error.get("extensions")?.get("code"),
            Surface::Webhook => None,
        };
        code?.as_str().map(str::to_owned)
    };
    match surface {
        Surface::Webhook => document
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .into_iter()
            .collect(),
        Surface::JsonApiWrite | Surface::Read | Surface::GraphQl => document
            .get("errors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(code_of)
            .collect(),
    }
}

/// The error to return when the engine stops on `answer`: a stop of the matrix, a retryable
/// answer left when the budget ran out, or a second 401 after a token exchange.
///
/// It carries the status, the server's error body and its `Retry-After` (counted from `now`);
/// the engine adds the attempts with [`Error::with_attempts`].
pub(crate) fn final_error(surface: Surface, answer: &Answer, now: SystemTime) -> Error {
    let rule = rule_for(surface, answer);
    let Some(status) = answer.status() else {
        let kind = answer.transport().unwrap_or(TransportKind::Other);
        return Error::new(
            ErrorKind::Transport,
            format!("{} ({})", ErrorKind::Transport, kind.as_str()),
        );
    };
    let (kind, action) = match rule.verdict {
        Stop(kind) => (kind, Some(rule.action)),
        _ => (left_over_kind(status), None),
    };
    let what = match (surface, kind) {
        (Surface::Webhook, NotFound) => "webhook trigger not found",
        _ => kind.describe(),
    };
    let codes = error_codes(surface, answer.body());
    let code = codes
        .first()
        .map(|code| code.chars().take(MAX_QUOTED_CODE).collect::<String>());
    let mut message = format!("{what} ({}", status.as_u16());
    if let Some(code) = code {
        message.push(' ');
        message.push_str(&code);
    }
    message.push(')');
    if let Some(action) = action {
        message.push_str(": ");
        message.push_str(&lower_first(action));
    }
    let mut error = Error::new(kind, message)
        .with_status(status)
        .with_retry_after(answer.retry_after(now));
    if !answer.body().is_empty() {
        error = error.with_body(Bytes::copy_from_slice(answer.body()));
    }
    error
}

/// The kind of an answer the matrix would retry, when no retry is left.
fn left_over_kind(status: StatusCode) -> ErrorKind {
    match status {
        StatusCode::UNAUTHORIZED => ErrorKind::Unauthorized,
        StatusCode::TOO_MANY_REQUESTS => ErrorKind::RateLimited,
        status if status.is_server_error() => ErrorKind::Server,
        status if status.is_client_error() => ErrorKind::ClientError,
        _ => ErrorKind::UnexpectedStatus,
    }
}

fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_lowercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Surface; 4] = [
        Surface::JsonApiWrite,
        Surface::Webhook,
        Surface::Read,
        Surface::GraphQl,
    ];

    fn answer(status: u16, body: &'static str) -> Answer {
        let status = StatusCode::from_u16(status).expect("valid status");
        Answer::response(
            status,
            HeaderMap::new(),
            Bytes::from_static(body.as_bytes()),
        )
    }

    fn json_api_error(code: &'static str) -> String {
        format!(r#"{{"errors":[{{"status":"409","code":"{code}","title":"t"}}]}}"#)
    }

    fn verdict(surface: Surface, status: u16, body: &'static str) -> Verdict {
        classify(surface, &answer(status, body))
    }

    #[test]
    fn retries_with_the_same_key_when_no_answer_came_back() {
        for surface in ALL {
            for kind in [
                TransportKind::Connect,
                TransportKind::Timeout,
                TransportKind::Closed,
            ] {
                let verdict = classify(surface, &Answer::no_response(kind));
                assert_eq!(verdict, RetryAfterBackoff, "{surface}");
            }
        }
    }

    #[test]
    fn waits_retry_after_on_429_everywhere() {
        for surface in ALL {
            assert_eq!(verdict(surface, 429, ""), RetryAfterRetryAfter, "{surface}");
        }
    }

    #[test]
    fn backs_off_on_500_502_503_504_everywhere() {
        for surface in ALL {
            for status in [500, 502, 503, 504] {
                assert_eq!(
                    verdict(surface, status, ""),
                    RetryAfterBackoff,
                    "{surface} {status}"
                );
            }
        }
    }

    #[test]
    fn retries_idempotency_unavailable_with_the_same_key() {
        let body = r#"{"errors":[{"status":"503","code":"idempotency_unavailable"}]}"#;
        let rule = rule_for(Surface::JsonApiWrite, &answer(503, body));
        assert_eq!(rule.verdict, RetryAfterBackoff);
        assert_eq!(rule.action, "Nothing was written; retry with the same key");
    }

    #[test]
    fn stops_on_a_5xx_that_is_not_transient() {
        for surface in ALL {
            assert_eq!(verdict(surface, 501, ""), Stop(Server), "{surface}");
        }
    }

    #[test]
    fn succeeds_on_2xx() {
        for surface in ALL {
            for status in [200, 201, 202, 204] {
                assert_eq!(verdict(surface, status, ""), Success, "{surface} {status}");
            }
        }
    }

    #[test]
    fn reexchanges_once_on_any_401_for_writes_reads_and_graphql() {
        for surface in [Surface::JsonApiWrite, Surface::Read, Surface::GraphQl] {
            assert_eq!(verdict(surface, 401, ""), ReexchangeOnce, "{surface}");
            let body = r#"{"errors":[{"code":"unauthorized"}]}"#;
            assert_eq!(verdict(surface, 401, body), ReexchangeOnce, "{surface}");
        }
    }

    #[test]
    fn reexchanges_webhook_missing_credentials_but_stops_on_unauthorized() {
        let missing = verdict(Surface::Webhook, 401, r#"{"error":"missing_credentials"}"#);
        let unauthorized = verdict(Surface::Webhook, 401, r#"{"error":"Unauthorized"}"#);
        let unreadable = verdict(Surface::Webhook, 401, "<html>401</html>");

        assert_eq!(missing, ReexchangeOnce);
        assert_eq!(unauthorized, Stop(Unauthorized));
        assert_eq!(unreadable, Stop(Unauthorized));
    }

    #[test]
    fn stops_on_403_without_retrying() {
        for surface in ALL {
            assert_eq!(verdict(surface, 403, ""), Stop(Forbidden), "{surface}");
        }
        let body = r#"{"error":"Insufficient scope"}"#;
        assert_eq!(verdict(Surface::Webhook, 403, body), Stop(Forbidden));
    }

    #[test]
    fn stops_on_404_without_retrying() {
        for surface in ALL {
            assert_eq!(verdict(surface, 404, ""), Stop(NotFound), "{surface}");
        }
    }

    #[test]
    fn tells_key_reused_from_in_progress() {
        let reused = json_api_error("idempotency_key_reused");
        let in_progress = json_api_error("idempotency_key_in_progress");
        let write = |body: &str| {
            let body = Bytes::copy_from_slice(body.as_bytes());
            classify(
                Surface::JsonApiWrite,
                &Answer::response(StatusCode::CONFLICT, HeaderMap::new(), body),
            )
        };

        assert_eq!(write(&reused), Stop(KeyReused));
        assert_eq!(write(&in_progress), Stop(InProgress));
        assert_eq!(
            write(r#"{"errors":[{"code":"version_conflict"}]}"#),
            Stop(ClientError)
        );
    }

    #[test]
    fn waits_for_in_progress_only_when_opted_in() {
        assert_eq!(
            Stop(InProgress).waiting_for_in_progress(),
            RetryAfterRetryAfter
        );
        assert_eq!(Stop(KeyReused).waiting_for_in_progress(), Stop(KeyReused));
        assert_eq!(Success.waiting_for_in_progress(), Success);
    }

    #[test]
    fn stops_on_413_and_422_without_retrying() {
        for surface in [Surface::JsonApiWrite, Surface::Webhook] {
            assert_eq!(
                verdict(surface, 413, ""),
                Stop(PayloadTooLarge),
                "{surface}"
            );
            assert_eq!(verdict(surface, 422, ""), Stop(Unprocessable), "{surface}");
        }
    }

    #[test]
    fn stops_on_any_other_4xx_without_retrying() {
        for surface in ALL {
            for status in [400, 405, 408, 410, 451] {
                assert_eq!(
                    verdict(surface, status, ""),
                    Stop(ClientError),
                    "{surface} {status}"
                );
            }
        }
    }

    #[test]
    fn stops_on_statuses_outside_the_contract() {
        for surface in ALL {
            for status in [100, 301, 302, 304, 600] {
                let verdict = verdict(surface, status, "");
                assert_eq!(verdict, Stop(UnexpectedStatus), "{surface} {status}");
            }
        }
    }

    #[test]
    fn graphql_validation_parse_and_complexity_errors_are_permanent_as_400_or_200() {
        for code in [
            "GRAPHQL_VALIDATION_FAILED",
            "GRAPHQL_PARSE_FAILED",
            "QUERY_COMPLEXITY_EXCEEDED",
        ] {
            let body =
                format!(r#"{{"errors":[{{"message":"m","extensions":{{"code":"{code}"}}}}]}}"#);
            for status in [StatusCode::OK, StatusCode::BAD_REQUEST] {
                let body = Bytes::from(body.clone());
                let answer = Answer::response(status, HeaderMap::new(), body);
                assert_eq!(
                    classify(Surface::GraphQl, &answer),
                    Stop(GraphQl),
                    "{code} {status}"
                );
            }
        }
    }

    #[test]
    fn graphql_200_with_other_errors_or_data_is_success() {
        let field_error = r#"{"data":{"factQuery":null},"errors":[{"message":"m","extensions":{"code":"NOT_FOUND"}}]}"#;
        assert_eq!(verdict(Surface::GraphQl, 200, field_error), Success);
        assert_eq!(
            verdict(Surface::GraphQl, 200, r#"{"data":{"factQuery":[]}}"#),
            Success
        );
        assert_eq!(
            verdict(Surface::GraphQl, 400, "not json"),
            Stop(ClientError)
        );
    }

    #[test]
    fn graphql_codes_on_other_surfaces_mean_nothing() {
        let body = r#"{"errors":[{"extensions":{"code":"GRAPHQL_PARSE_FAILED"}}]}"#;
        assert_eq!(verdict(Surface::Read, 200, body), Success);
    }

    #[test]
    fn reads_error_codes_the_way_each_surface_writes_them() {
        let json_api = br#"{"errors":[{"code":"a"},{"title":"no code"},{"code":"b"}]}"#;
        let webhook = br#"{"error":"Trigger not found"}"#;
        let graphql = br#"{"errors":[{"message":"m","extensions":{"code":"C"}}]}"#;

        assert_eq!(error_codes(Surface::JsonApiWrite, json_api), ["a", "b"]);
        assert_eq!(error_codes(Surface::Read, json_api), ["a", "b"]);
        assert_eq!(
            error_codes(Surface::Webhook, webhook),
            ["Trigger not found"]
        );
        assert_eq!(error_codes(Surface::GraphQl, graphql), ["C"]);
        assert!(error_codes(Surface::Webhook, b"").is_empty());
        assert!(error_codes(Surface::JsonApiWrite, b"{\"errors\":7}").is_empty());
    }

    #[test]
    fn every_table_covers_every_status_and_no_response() {
        for surface in ALL {
            let rules = surface.rules();
            assert!(
                rules.iter().any(|rule| rule.when == NoResponse),
                "{surface}"
            );
            assert!(rules.iter().any(|rule| rule.when == Other), "{surface}");
        }
    }

    #[test]
    fn no_two_rows_of_one_rank_overlap() {
        for surface in ALL {
            for status in 100..=599 {
                for codes in [Vec::new(), known_codes(surface)] {
                    let mut ranks: Vec<u8> = surface
                        .rules()
                        .iter()
                        .filter(|rule| rule.when.matches(Some(status), &codes))
                        .filter(|rule| !matches!(rule.when, Code(..)))
                        .map(|rule| rule.when.rank())
                        .collect();
                    let count = ranks.len();
                    ranks.dedup();
                    assert_eq!(ranks.len(), count, "{surface} {status}");
                }
            }
        }
    }

    fn known_codes(surface: Surface) -> Vec<String> {
        surface
            .rules()
            .iter()
            .filter_map(|rule| match rule.when {
                Code(_, code) => Some(code.to_owned()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn final_error_of_a_stop_quotes_the_code_and_the_documents_action() {
        let body = Bytes::from(json_api_error("idempotency_key_in_progress"));
        let answer = Answer::response(StatusCode::CONFLICT, HeaderMap::new(), body.clone());
        let error = final_error(Surface::JsonApiWrite, &answer, SystemTime::now());

        assert_eq!(error.kind(), InProgress);
        assert_eq!(
            error.to_string(),
            "idempotency key in progress (409 idempotency_key_in_progress): retry later with the same key"
        );
        assert_eq!(error.status(), Some(StatusCode::CONFLICT));
        assert_eq!(error.body(), Some(&body));
    }

    #[test]
    fn final_error_names_a_missing_webhook_trigger() {
        let answer = answer(404, r#"{"error":"Trigger not found"}"#);
        let error = final_error(Surface::Webhook, &answer, SystemTime::now());
        assert_eq!(error.kind(), NotFound);
        assert_eq!(
            error.to_string(),
            "webhook trigger not found (404 Trigger not found): confirm token and active workflow; do not retry unchanged"
        );
    }

    #[test]
    fn final_error_of_a_retryable_answer_keeps_retry_after() {
        let mut headers = HeaderMap::new();
        headers.insert(header::RETRY_AFTER, http::HeaderValue::from_static("7"));
        let answer = Answer::response(StatusCode::TOO_MANY_REQUESTS, headers, Bytes::new());
        let error = final_error(Surface::Webhook, &answer, SystemTime::now());

        assert_eq!(error.kind(), ErrorKind::RateLimited);
        assert_eq!(error.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(error.to_string(), "rate limited (429)");
        assert_eq!(error.body(), None);
    }

    #[test]
    fn final_error_of_a_second_401_is_unauthorized() {
        let answer = answer(401, r#"{"error":"missing_credentials"}"#);
        let error = final_error(Surface::Webhook, &answer, SystemTime::now());
        assert_eq!(error.kind(), Unauthorized);
        let error = final_error(
            Surface::JsonApiWrite,
            &super::tests::answer(401, ""),
            SystemTime::now(),
        );
        assert_eq!(error.kind(), Unauthorized);
    }

    #[test]
    fn final_error_without_an_answer_is_transport() {
        let answer = Answer::no_response(TransportKind::Timeout);
        let error = final_error(Surface::Read, &answer, SystemTime::now());
        assert_eq!(error.kind(), ErrorKind::Transport);
        assert_eq!(error.to_string(), "no answer from the server (timeout)");
        assert_eq!(error.status(), None);
    }

    #[test]
    fn final_error_of_an_exhausted_5xx_is_server() {
        let error = final_error(Surface::JsonApiWrite, &answer(503, ""), SystemTime::now());
        assert_eq!(error.kind(), Server);
        assert!(error.is_retryable());
    }

    #[test]
    fn answer_reads_request_id_and_retry_after() {
        let mut headers = HeaderMap::new();
        headers.insert("x-request-id", http::HeaderValue::from_static("req-9"));
        headers.insert(header::RETRY_AFTER, http::HeaderValue::from_static("2"));
        let answer = Answer::response(StatusCode::SERVICE_UNAVAILABLE, headers, Bytes::new());

        assert_eq!(answer.request_id(), Some("req-9"));
        assert_eq!(
            answer.retry_after(SystemTime::now()),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            Answer::no_response(TransportKind::Closed).request_id(),
            None
        );
        assert_eq!(
            Answer::no_response(TransportKind::Closed).retry_after(SystemTime::now()),
            None
        );
    }
}
