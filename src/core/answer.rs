//! One attempt's answer, and the header names read from it.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};

use crate::core::attempt::{Attempt, TransportKind};
use crate::core::retry_after::parse_retry_after;

/// The header every answer carries to name its request (never an identity).
pub(crate) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// The `RateLimit` field's name (`rate_limit_field.rs`).
pub(crate) const RATE_LIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// The `RateLimit-Policy` field's name (`rate_limit_field.rs`).
pub(crate) const RATE_LIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// The fields of an answer's headers that the engine reads after each attempt, found in one
/// pass over them: a lookup by name hashes the name, and an answer carries a handful of
/// headers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fields<'h> {
    headers: &'h HeaderMap,
    retry_after: Option<&'h HeaderValue>,
    request_id: Option<&'h HeaderValue>,
    rate_limit: Lines<'h>,
    rate_limit_policy: Lines<'h>,
}

/// A field's lines: none, one, or more (then read again by name).
#[derive(Debug, Clone, Copy)]
enum Lines<'h> {
    None,
    One(&'h HeaderValue),
    Many,
}

impl<'h> Lines<'h> {
    fn add(&mut self, line: &'h HeaderValue) {
        *self = match self {
            Lines::None => Lines::One(line),
            Lines::One(_) | Lines::Many => Lines::Many,
        };
    }
}

impl<'h> Fields<'h> {
    /// The fields of `headers`, in one pass.
    pub(crate) fn of(headers: &'h HeaderMap) -> Self {
        let mut fields = Self {
            headers,
            retry_after: None,
            request_id: None,
            rate_limit: Lines::None,
            rate_limit_policy: Lines::None,
        };
        for (name, value) in headers {
            // The first line of a name, as `HeaderMap::get`.
            match name.as_str() {
                "retry-after" => {
                    fields.retry_after.get_or_insert(value);
                }
                "x-request-id" => {
                    fields.request_id.get_or_insert(value);
                }
                "ratelimit" => fields.rate_limit.add(value),
                "ratelimit-policy" => fields.rate_limit_policy.add(value),
                _ => {}
            }
        }
        fields
    }

    /// The `Retry-After` header, if any.
    pub(crate) fn retry_after(&self) -> Option<&'h HeaderValue> {
        self.retry_after
    }

    /// The `x-request-id`, if any and readable.
    pub(crate) fn request_id(&self) -> Option<&'h str> {
        self.request_id?.to_str().ok()
    }

    /// Every line of the `RateLimit` field.
    pub(crate) fn rate_limit(&self) -> impl Iterator<Item = &'h HeaderValue> + use<'h> {
        self.lines(self.rate_limit, &RATE_LIMIT)
    }

    /// Every line of the `RateLimit-Policy` field.
    pub(crate) fn rate_limit_policy(&self) -> impl Iterator<Item = &'h HeaderValue> + use<'h> {
        self.lines(self.rate_limit_policy, &RATE_LIMIT_POLICY)
    }

    /// The `RateLimit-Policy` field when it is one line.
    pub(crate) fn rate_limit_policy_line(&self) -> Option<&'h HeaderValue> {
        match self.rate_limit_policy {
            Lines::One(line) => Some(line),
            Lines::None | Lines::Many => None,
        }
    }

    fn lines(
        &self,
        lines: Lines<'h>,
        name: &HeaderName,
    ) -> impl Iterator<Item = &'h HeaderValue> + use<'h> {
        let (one, many) = match lines {
            Lines::None => (None, None),
            Lines::One(line) => (Some(line), None),
            Lines::Many => (None, Some(self.headers.get_all(name).iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

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
    /// use hodoflow_retry::transport::Answer;
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

/// The final, successful answer and every attempt that led to it.
#[derive(Debug)]
pub(crate) struct FinalAnswer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) attempts: Vec<Attempt>,
    /// Cleans what is read of the answer's body and kept, such as a run ID (`redact.rs`).
    pub(crate) cleaner: crate::core::redact::Cleaner,
}
