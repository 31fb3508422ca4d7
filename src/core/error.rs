//! The one error type of the crate.
//!
//! An [`Error`] says what went wrong ([`ErrorKind`]), what the server answered last (status,
//! `Retry-After`, error body, `x-request-id`), and what every attempt saw. [`Error::may_have_run`]
//! answers the question a sender must settle before it gives up: could the operation have taken
//! effect anyway? When it could, reconcile with the same key instead of sending new work.
//!
//! Error bodies from the server are kept ([`Error::body`]); the request body never is.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;

use crate::core::attempt::Attempt;
use crate::core::redact::Cleaner;

/// A `Result` whose error defaults to this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of failure an [`Error`] is.
///
/// New kinds may be added in minor releases, so match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// 403: the credentials lack a scope or run-as permission. Never retried.
    Forbidden,
    /// 404: unknown path, ID or object, or an unknown or deactivated webhook route. Never
    /// retried.
    NotFound,
    /// 409 `idempotency_key_reused`: the key was used before with a different request. Never
    /// retried; reconcile rather than generate a new key.
    KeyReused,
    /// 409 `idempotency_key_in_progress`: a request with the same key is still running. Retry
    /// later with the same key.
    InProgress,
    /// 413: the body is too large; a byte-identical retry cannot succeed.
    PayloadTooLarge,
    /// 422: validation, processing or route configuration failed.
    Unprocessable,
    /// 401 that a token exchange did not cure, or a webhook `401 Unauthorized`.
    Unauthorized,
    /// The call's own [`Budget`](crate::Budget) ran out: the next wait would end past the
    /// elapsed-time budget, or no time was left for an attempt.
    BudgetExhausted,
    /// The client's shared [`RetryBudget`](crate::limit::RetryBudget) had too few tokens for a retry:
    /// most calls are failing, and retrying would only add load. Retry later with the same key.
    RetryBudgetExhausted,
    /// A value given to the SDK was refused before anything was sent.
    InvalidInput,
    /// No answer came back: connect error, reset, timeout, or a body that could not be read.
    Transport,
    /// The token exchange failed.
    TokenExchange,
    /// Another 4xx answer. Never retried.
    ClientError,
    /// A GraphQL validation, parse or complexity error: permanent until the document or
    /// variables change.
    GraphQl,
    /// A 5xx answer that remained when the attempt budget ran out, or a 5xx that is never
    /// retried (such as 501).
    Server,
    /// A 429 that remained when the attempt budget ran out.
    RateLimited,
    /// A body could not be decoded into the expected shape.
    Decode,
    /// A status outside the contract, such as a redirect.
    UnexpectedStatus,
    /// The answer's body was over the client's limit and was not read (see
    /// [`ClientBuilder::max_answer_bytes`](crate::ClientBuilder::max_answer_bytes)). On a 2xx
    /// the server acted ([`Error::may_have_run`] is true): read the current state instead of
    /// sending again.
    AnswerTooLarge,
}

impl ErrorKind {
    /// A stable snake_case name for logs and metrics, such as `"key_reused"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::KeyReused => "key_reused",
            Self::InProgress => "in_progress",
            Self::PayloadTooLarge => "payload_too_large",
            Self::Unprocessable => "unprocessable",
            Self::Unauthorized => "unauthorized",
            Self::BudgetExhausted => "budget_exhausted",
            Self::RetryBudgetExhausted => "retry_budget_exhausted",
            Self::InvalidInput => "invalid_input",
            Self::Transport => "transport",
            Self::TokenExchange => "token_exchange",
            Self::ClientError => "client_error",
            Self::GraphQl => "graphql",
            Self::Server => "server",
            Self::RateLimited => "rate_limited",
            Self::Decode => "decode",
            Self::UnexpectedStatus => "unexpected_status",
            Self::AnswerTooLarge => "answer_too_large",
        }
    }

    /// The lower-case sentence an [`Error`] of this kind starts with.
    pub(crate) const fn describe(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::NotFound => "not found",
            Self::KeyReused => "idempotency key reused with a different request",
            Self::InProgress => "idempotency key in progress",
            Self::PayloadTooLarge => "payload too large",
            Self::Unprocessable => "unprocessable request",
            Self::Unauthorized => "unauthorized",
            Self::BudgetExhausted => "call budget exhausted",
            Self::RetryBudgetExhausted => "client retry budget exhausted",
            Self::InvalidInput => "invalid input",
            Self::Transport => "no answer from the server",
            Self::TokenExchange => "token exchange failed",
            Self::ClientError => "request refused",
            Self::GraphQl => "graphql document refused",
            Self::Server => "server error",
            Self::RateLimited => "rate limited",
            Self::Decode => "body could not be decoded",
            Self::UnexpectedStatus => "unexpected status",
            Self::AnswerTooLarge => "answer too large",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// The error of every fallible operation of this crate.
///
/// Cheap to clone: the cause is shared.
#[derive(Clone, thiserror::Error)]
#[error(transparent)]
pub struct Error(Box<ErrorDetails>);

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
struct ErrorDetails {
    kind: ErrorKind,
    message: Cow<'static, str>,
    /// Where the message quotes a server's words, and those words: the only part of the
    /// message a [`Cleaner`] cleans.
    quoted: Option<Quoted>,
    #[source]
    source: Option<Arc<dyn StdError + Send + Sync>>,
    status: Option<StatusCode>,
    retry_after: Option<Duration>,
    body: Option<Bytes>,
    attempts: Vec<Attempt>,
    /// The key the middleware adapter sent (generated or the caller's).
    key: Option<crate::core::key::value::IdempotencyKey>,
}

/// A server's words in an error's message: where they are shown, and what they were, redacted
/// of every secret cleaned so far (neither escaped nor bounded: that is how they are shown).
#[derive(Debug, Clone)]
struct Quoted {
    shown: std::ops::Range<usize>,
    words: String,
    limit: usize,
}

/// A server's words are kept at most this long until they are cleaned.
const QUOTED_KEPT: usize = 4096;

impl Error {
    /// An error of `kind` whose `Display` is `message`, as the SDK's own are made: for what you
    /// plug in (an outbox store, a deliverer of your own) ending as the
    /// built-in parts do. [`is_retryable`](Self::is_retryable) and
    /// [`may_have_run`](Self::may_have_run) follow the kind. Never put a secret in `message`.
    ///
    /// ```
    /// use hodoflow_retry::{Error, ErrorKind};
    ///
    /// let error = Error::new(ErrorKind::PayloadTooLarge, "the body is over the job's limit");
    /// assert_eq!(error.to_string(), "the body is over the job's limit");
    /// assert!(!error.is_retryable());
    /// ```
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Self(Box::new(ErrorDetails {
            kind,
            message: message.into(),
            quoted: None,
            source: None,
            status: None,
            retry_after: None,
            body: None,
            attempts: Vec::new(),
            key: None,
        }))
    }

    /// An [`ErrorKind::InvalidInput`] error: "invalid input: {what}". For what you plug in (a
    /// store of your own) refusing what it can never take; never put a secret in `what`.
    ///
    /// ```
    /// use hodoflow_retry::{Error, ErrorKind};
    ///
    /// let error = Error::invalid_input("a blank scope");
    /// assert_eq!(error.kind(), ErrorKind::InvalidInput);
    /// assert!(!error.is_retryable());
    /// ```
    pub fn invalid_input(what: impl fmt::Display) -> Self {
        Self::new(ErrorKind::InvalidInput, format!("invalid input: {what}"))
    }

    /// An error of an outbox store that failed (its database unreachable, a statement that
    /// failed): "the outbox's store failed: {what}", retryable, as the built-in stores' are.
    /// Add the cause with [`with_source`](Self::with_source); never put a secret in `what`.
    ///
    /// ```
    /// use hodoflow_retry::Error;
    ///
    /// let error = Error::store("the connection was closed");
    /// assert!(error.is_retryable());
    /// ```
    pub fn store(what: impl fmt::Display) -> Self {
        Self::new(
            ErrorKind::Transport,
            format!("the outbox's store failed: {what}"),
        )
    }

    /// An [`ErrorKind::TokenExchange`] error: "token exchange failed: {what}".
    ///
    /// For your own [`TokenExchanger`](crate::auth::TokenExchanger): with no status it is retryable
    /// (no answer came); add the token endpoint's with [`with_status`](Self::with_status). Never
    /// put a secret in `what`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hodoflow_retry::{Error, ErrorKind};
    ///
    /// let io = std::io::Error::other("secret store unreachable");
    /// let error = Error::token_exchange("no client secret").with_source(io);
    /// assert_eq!(error.kind(), ErrorKind::TokenExchange);
    /// assert_eq!(error.to_string(), "token exchange failed: no client secret");
    /// ```
    pub fn token_exchange(what: impl fmt::Display) -> Self {
        Self::new(
            ErrorKind::TokenExchange,
            format!("token exchange failed: {what}"),
        )
    }

    /// An [`ErrorKind::TokenExchange`] error for a token the token endpoint issued with `200 OK`
    /// that cannot be used (too short to be a secret, or a word its caller prints): "token
    /// exchange failed: the token endpoint issued an unusable token: {why}".
    ///
    /// It is not retryable (its status is the `200` that carried the token): exchanging again
    /// gets the same kind of token, so it needs a person, not a wait. Never put the token in
    /// `why`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hodoflow_retry::{Error, ErrorKind};
    ///
    /// let error = Error::unusable_token("it is a word this tool prints");
    /// assert_eq!(error.kind(), ErrorKind::TokenExchange);
    /// assert!(!error.is_retryable());
    /// ```
    pub fn unusable_token(why: impl fmt::Display) -> Self {
        Self::token_exchange(format_args!(
            "the token endpoint issued an unusable token: {why}"
        ))
        .with_status(StatusCode::OK)
    }

    /// Attaches the underlying cause, returned by `source()`.
    pub fn with_source(mut self, source: impl StdError + Send + Sync + 'static) -> Self {
        self.0.source = Some(Arc::new(source));
        self
    }

    /// Records the status of the answer the error stands for, as [`status`](Self::status)
    /// returns it.
    ///
    /// Your own [`TokenExchanger`](crate::auth::TokenExchanger) says with it how its token endpoint
    /// answered, as the built-in one does: a [`token_exchange`](Self::token_exchange) error with
    /// a `4xx` other than `429` is a refusal (a wrong client secret): not retryable, and shared
    /// by every call waiting for a token, so each fails at once instead of exchanging again; a
    /// `5xx` or `429`, or no status at all (no answer came), is retryable, and the next exchange
    /// waits the client's shared backoff (and [`with_retry_after`](Self::with_retry_after)).
    ///
    /// # Examples
    ///
    /// ```
    /// use http::StatusCode;
    /// use hodoflow_retry::Error;
    ///
    /// let refused = Error::token_exchange("invalid_client").with_status(StatusCode::UNAUTHORIZED);
    /// assert!(!refused.is_retryable());
    /// let busy = Error::token_exchange("temporarily_unavailable")
    ///     .with_status(StatusCode::SERVICE_UNAVAILABLE);
    /// assert!(busy.is_retryable());
    /// ```
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.0.status = Some(status);
        self
    }

    /// Records the wait the server asked for in its `Retry-After`, as
    /// [`retry_after`](Self::retry_after) returns it. From your own
    /// [`TokenExchanger`](crate::auth::TokenExchanger): no exchange starts before it has passed.
    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.0.retry_after = retry_after;
        self
    }

    /// Keeps the server's error body. Never pass a request body here.
    pub(crate) fn with_body(mut self, body: Bytes) -> Self {
        self.0.body = Some(body);
        self
    }

    /// Adds `note` to the end of the message. Never put a secret in it.
    pub(crate) fn with_note(mut self, note: impl fmt::Display) -> Self {
        self.0.message = Cow::Owned(format!("{}{note}", self.0.message));
        self
    }

    /// Adds `words`, a server's (or another party's) text such as an error code, to the end of
    /// the message, shown at most `limit` bytes long with its controls escaped
    /// ([`Cleaner::text`]). It is the one part of the message [`cleaned`](Self::cleaned)
    /// cleans; an error quotes one text at most (a second replaces the first's record, and is
    /// shown as it came).
    pub(crate) fn quoting(mut self, words: &str, limit: usize) -> Self {
        let words = crate::core::redact::bound(words, QUOTED_KEPT).to_owned();
        let shown = Cleaner::default().text(&words, limit);
        let mut message = self.0.message.into_owned();
        let start = message.len();
        message.push_str(&shown);
        self.0.quoted = Some(Quoted {
            shown: start..message.len(),
            words,
            limit,
        });
        self.0.message = Cow::Owned(message);
        self
    }

    /// The error with the server's words it quotes ([`quoting`](Self::quoting)) and the
    /// `x-request-id` of each of its attempts cleaned by `cleaner`: every secret it knows
    /// replaced, controls escaped, then bounded. The SDK's own words are never searched; the
    /// body ([`body`](Self::body)) stays as it came.
    pub(crate) fn cleaned(mut self, cleaner: &Cleaner) -> Self {
        let details = &mut *self.0;
        if let Some(quoted) = &mut details.quoted {
            if let Cow::Owned(redacted) = cleaner.redact(&quoted.words) {
                quoted.words = redacted;
            }
            let shown = cleaner.text(&quoted.words, quoted.limit);
            let mut message = std::mem::take(&mut details.message).into_owned();
            message.replace_range(quoted.shown.clone(), &shown);
            quoted.shown.end = quoted.shown.start + shown.len();
            details.message = Cow::Owned(message);
        }
        for attempt in &mut details.attempts {
            attempt.clean(cleaner);
        }
        self
    }

    /// Records the attempts made before the error.
    pub(crate) fn with_attempts(mut self, attempts: Vec<Attempt>) -> Self {
        self.0.attempts = attempts;
        self
    }

    /// Records the key every attempt carried.
    pub(crate) fn with_key(mut self, key: Option<crate::core::key::value::IdempotencyKey>) -> Self {
        self.0.key = key;
        self
    }

    /// The `Idempotency-Key` (or delivery ID) every attempt carried, when the
    /// `RetryMiddleware` (feature `middleware`) or a [`ModulifyClient`](crate::ModulifyClient)
    /// call sent the request: the caller's own, or the one it generated. Send the request again
    /// with it to repeat the same operation. `None` for requests without a key and for
    /// [`RetryingClient`](crate::RetryingClient) calls, whose caller chose the key.
    pub fn idempotency_key(&self) -> Option<&crate::core::key::value::IdempotencyKey> {
        self.0.key.as_ref()
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The status of the last answer, if the error comes from one.
    pub fn status(&self) -> Option<StatusCode> {
        self.0.status
    }

    /// The wait the server asked for in its last `Retry-After`, if any.
    ///
    /// For [`ErrorKind::BudgetExhausted`] this says when the server expects a retry to have a
    /// chance: schedule the same request, with the same key, no earlier than that.
    pub fn retry_after(&self) -> Option<Duration> {
        self.0.retry_after
    }

    /// The error body of the last answer, if the server sent one, as it came: a server may echo
    /// what it was sent, so treat it as untrusted text and redact before logging it. (The
    /// message's quote of the server's error code and each attempt's `x-request-id` are
    /// cleaned of the client's secrets; the body is not, so that it reads as the server wrote
    /// it.)
    pub fn body(&self) -> Option<&Bytes> {
        self.0.body.as_ref()
    }

    /// Every attempt made, in order; empty when nothing was sent.
    pub fn attempts(&self) -> &[Attempt] {
        &self.0.attempts
    }

    /// The `x-request-id` of the last attempt, if its answer had one.
    pub fn request_id(&self) -> Option<&str> {
        self.0.attempts.last().and_then(Attempt::request_id)
    }

    /// Whether the operation may have taken effect despite this error.
    ///
    /// True when some attempt was sent and no answer came back (a timeout or a reset after the
    /// request left), when the server said a request with the same key is still in progress,
    /// or when it answered 2xx with a body over the client's limit. Then reconcile or retry
    /// later with the same key; never send the work under a new key. False when every attempt
    /// got a definite answer, or when nothing was sent.
    pub fn may_have_run(&self) -> bool {
        let acted = self.0.kind == ErrorKind::AnswerTooLarge
            && self.0.status.is_some_and(|status| status.is_success());
        acted
            || self.0.kind == ErrorKind::InProgress
            || self.0.attempts.iter().any(Attempt::may_have_run)
    }

    /// Whether sending the same request again later, with the same key, may succeed.
    ///
    /// True for transport failures, 5xx and 429 answers, an exhausted call or retry budget, a key still in
    /// progress, and a token exchange that failed without a 4xx answer.
    pub fn is_retryable(&self) -> bool {
        match self.0.kind {
            ErrorKind::Transport
            | ErrorKind::Server
            | ErrorKind::RateLimited
            | ErrorKind::BudgetExhausted
            | ErrorKind::RetryBudgetExhausted
            | ErrorKind::InProgress => true,
            ErrorKind::TokenExchange => self.0.status.is_none_or(|status| {
                status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS
            }),
            _ => false,
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.0;
        f.debug_struct("Error")
            .field("kind", &inner.kind)
            .field("message", &inner.message)
            .field("status", &inner.status)
            .field("retry_after", &inner.retry_after)
            .field("attempts", &inner.attempts)
            .field("source", &inner.source)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::attempt::{Attempt, TransportKind};

    #[test]
    fn displays_the_message_and_keeps_the_source_chain() {
        let cause = std::io::Error::other("connection reset");
        let error =
            Error::new(ErrorKind::Transport, "no answer from the server").with_source(cause);

        assert_eq!(error.to_string(), "no answer from the server");
        let source = StdError::source(&error).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("connection reset"));
    }

    #[test]
    fn kind_names_are_snake_case_and_descriptions_lower_case() {
        assert_eq!(ErrorKind::KeyReused.as_str(), "key_reused");
        assert_eq!(
            ErrorKind::KeyReused.to_string(),
            "idempotency key reused with a different request"
        );
        assert_eq!(ErrorKind::BudgetExhausted.as_str(), "budget_exhausted");
    }

    #[test]
    fn may_have_run_only_when_a_sent_attempt_got_no_answer() {
        let answered = Attempt::answered(1, StatusCode::SERVICE_UNAVAILABLE, None);
        let refused = Attempt::unanswered(2, TransportKind::Connect);
        let lost = Attempt::unanswered(3, TransportKind::Timeout);

        let definite = Error::new(ErrorKind::Server, "server error")
            .with_attempts(vec![answered.clone(), refused.clone()]);
        assert!(!definite.may_have_run());

        let ambiguous =
            Error::new(ErrorKind::Server, "server error").with_attempts(vec![answered, lost]);
        assert!(ambiguous.may_have_run());

        assert!(!Error::invalid_input("empty key").may_have_run());
    }

    #[test]
    fn may_have_run_when_the_key_is_in_progress() {
        let error = Error::new(ErrorKind::InProgress, "idempotency key in progress")
            .with_attempts(vec![Attempt::answered(1, StatusCode::CONFLICT, None)]);
        assert!(error.may_have_run());
    }

    #[test]
    fn request_id_is_the_last_attempts() {
        let error = Error::new(ErrorKind::Server, "server error").with_attempts(vec![
            Attempt::answered(1, StatusCode::BAD_GATEWAY, Some("first".into())),
            Attempt::answered(2, StatusCode::BAD_GATEWAY, Some("second".into())),
        ]);
        assert_eq!(error.request_id(), Some("second"));
    }

    #[test]
    fn token_exchange_is_retryable_only_without_a_client_error() {
        let refused = Error::token_exchange("invalid_client").with_status(StatusCode::UNAUTHORIZED);
        let unavailable =
            Error::token_exchange("unavailable").with_status(StatusCode::SERVICE_UNAVAILABLE);
        let unreachable = Error::token_exchange("connect error");

        assert!(!refused.is_retryable());
        assert!(unavailable.is_retryable());
        assert!(unreachable.is_retryable());
    }

    #[test]
    fn stops_are_not_retryable() {
        for kind in [
            ErrorKind::Forbidden,
            ErrorKind::KeyReused,
            ErrorKind::GraphQl,
        ] {
            assert!(!Error::new(kind, "stop").is_retryable(), "{kind:?}");
        }
    }

    #[test]
    fn error_is_send_sync_and_clone() {
        fn assert_traits<T: Send + Sync + Clone + 'static>() {}
        assert_traits::<Error>();
    }
}
