//! What a successful operation hands back.
//!
//! A webhook delivery ends in a [`Delivery`]: accepted with the run it started, or recognised as
//! a duplicate of an earlier delivery. Writes, reads and GraphQL end in a [`Response`] that says
//! whether it was replayed from the server's idempotency store. Both carry the attempt records.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;

use crate::core::answer::X_REQUEST_ID;
use crate::core::attempt::Attempt;
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::key::DeliveryId;
use crate::core::redact::Cleaner;
use crate::vendors::hodoflow::tables;

/// How the server took a webhook delivery.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WebhookOutcome {
    /// The first delivery: the run was committed and enqueued, not completed. `run_id` is `None`
    /// when the `202` body could not be read; the server committed all the same. As a server's
    /// text it is at most 256 bytes, its control and bidirectional formatting characters
    /// escaped, every secret of the client replaced by `<redacted>`.
    Accepted {
        /// The ID of the workflow run the delivery started.
        run_id: Option<String>,
    },
    /// A retry of a delivery already accepted: no second run was created, and there is no run ID.
    /// Keep the run ID of the first accepted answer; if it was lost, reconcile by business
    /// identifier rather than sending a new delivery ID (Hodoflow's webhook sender guide).
    Duplicate,
}

impl WebhookOutcome {
    /// Reads a success body: `{"status":"accepted","workflow_run_id":…}` or
    /// `{"status":"duplicate"}`. Anything else, including an unreadable body, is accepted without
    /// a run ID: a 2xx means the server committed the delivery.
    pub(crate) fn from_body(body: &[u8]) -> Self {
        // The status borrowed from the body (it is only compared), unless it is escaped.
        #[derive(serde::Deserialize)]
        struct Body<'a> {
            #[serde(borrow)]
            status: Option<std::borrow::Cow<'a, str>>,
            workflow_run_id: Option<String>,
        }

        match serde_json::from_slice::<Body<'_>>(body) {
            Ok(Body {
                status: Some(status),
                ..
            }) if status == "duplicate" => Self::Duplicate,
            Ok(Body {
                workflow_run_id, ..
            }) => Self::Accepted {
                run_id: workflow_run_id,
            },
            Err(_) => Self::Accepted { run_id: None },
        }
    }

    /// The outcome with its run ID, a server's text, cleaned of every secret `cleaner` knows,
    /// its controls escaped and cut to [`MAX_RUN_ID`] bytes (`redact.rs`).
    pub(crate) fn cleaned(self, cleaner: &Cleaner) -> Self {
        match self {
            Self::Accepted {
                run_id: Some(mut id),
            } => {
                cleaner.clean(&mut id, MAX_RUN_ID);
                Self::Accepted { run_id: Some(id) }
            }
            other => other,
        }
    }
}

/// The longest run ID kept of a `202 accepted`, in bytes (a run ID is a UUID: 36).
pub(crate) const MAX_RUN_ID: usize = 256;

/// A webhook delivery the server took.
#[derive(Debug, Clone)]
pub struct Delivery {
    outcome: WebhookOutcome,
    delivery_id: DeliveryId,
    attempts: Vec<Attempt>,
}

impl Delivery {
    pub(crate) fn new(
        outcome: WebhookOutcome,
        delivery_id: DeliveryId,
        attempts: Vec<Attempt>,
    ) -> Self {
        Self {
            outcome,
            delivery_id,
            attempts,
        }
    }

    /// Whether the delivery was accepted or recognised as a duplicate.
    pub fn outcome(&self) -> &WebhookOutcome {
        &self.outcome
    }

    /// The run the delivery started, when this call saw the accepted answer and could read it.
    pub fn run_id(&self) -> Option<&str> {
        match &self.outcome {
            WebhookOutcome::Accepted { run_id } => run_id.as_deref(),
            WebhookOutcome::Duplicate => None,
        }
    }

    /// Whether the server recognised the delivery as a retry of one already accepted.
    pub fn is_duplicate(&self) -> bool {
        self.outcome == WebhookOutcome::Duplicate
    }

    /// The delivery identity sent on every attempt.
    pub fn delivery_id(&self) -> &DeliveryId {
        &self.delivery_id
    }

    /// Every attempt made, in order.
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// The `x-request-id` of the answer that settled the delivery.
    pub fn request_id(&self) -> Option<&str> {
        self.attempts.last().and_then(Attempt::request_id)
    }
}

/// A successful answer to a write, a read or a GraphQL query.
///
/// Its `Debug` shows the body's length, not the body.
#[derive(Clone)]
pub struct Response {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    attempts: Vec<Attempt>,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("replayed", &self.replayed())
            .field("body", &crate::core::redact::BodyLen(self.body.len()))
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl Response {
    pub(crate) fn new(
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
        attempts: Vec<Attempt>,
    ) -> Self {
        Self {
            status,
            headers,
            body,
            attempts,
        }
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The body, consuming the response.
    pub fn into_body(self) -> Bytes {
        self.body
    }

    /// Decodes the JSON body.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::Decode`] error when the body is not JSON of type `T`.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.body).map_err(|source| {
            Error::new(
                ErrorKind::Decode,
                format!("{}: {source}", ErrorKind::Decode),
            )
            .with_status(self.status)
            .with_source(source)
        })
    }

    /// Whether the server replayed a stored answer (`idempotency-replayed: true`): an earlier
    /// attempt with the same key had already run the write.
    pub fn replayed(&self) -> bool {
        tables::HODOFLOW.replay.replayed(&self.headers)
    }

    /// Every attempt made, in order.
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// The answer's `x-request-id`.
    pub fn request_id(&self) -> Option<&str> {
        self.headers.get(&X_REQUEST_ID)?.to_str().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::key::IdempotencyKey;
    use http::HeaderValue;

    #[test]
    fn reads_an_accepted_delivery_with_its_run_id() {
        let body =
            br#"{"status":"accepted","workflow_run_id":"550e8400-e29b-41d4-a716-446655440000"}"#;
        assert_eq!(
            WebhookOutcome::from_body(body),
            WebhookOutcome::Accepted {
                run_id: Some("550e8400-e29b-41d4-a716-446655440000".into())
            }
        );
    }

    #[test]
    fn reads_a_duplicate_without_a_run_id() {
        assert_eq!(
            WebhookOutcome::from_body(br#"{"status":"duplicate"}"#),
            WebhookOutcome::Duplicate
        );
        // A status with an escape cannot be borrowed from the body: it is read all the same.
        assert_eq!(
            WebhookOutcome::from_body(br#"{"status":"dup\u006cicate"}"#),
            WebhookOutcome::Duplicate
        );
    }

    #[test]
    fn an_unreadable_202_is_still_accepted_without_a_run_id() {
        for body in [&b""[..], b"<html>", b"{\"status\":7}", b"[]"] {
            assert_eq!(
                WebhookOutcome::from_body(body),
                WebhookOutcome::Accepted { run_id: None },
                "{body:?}"
            );
        }
    }

    #[test]
    fn delivery_reports_run_id_and_duplicates() {
        let id = DeliveryId::new(IdempotencyKey::from_operation_id("event-1"));
        let accepted = Delivery::new(
            WebhookOutcome::Accepted {
                run_id: Some("run-1".into()),
            },
            id.clone(),
            vec![Attempt::answered(
                1,
                StatusCode::ACCEPTED,
                Some("req-1".into()),
            )],
        );
        assert_eq!(accepted.run_id(), Some("run-1"));
        assert!(!accepted.is_duplicate());
        assert_eq!(accepted.request_id(), Some("req-1"));
        assert_eq!(accepted.delivery_id(), &id);

        let duplicate = Delivery::new(WebhookOutcome::Duplicate, id, Vec::new());
        assert!(duplicate.is_duplicate());
        assert_eq!(duplicate.run_id(), None);
    }

    fn response(headers: &[(&'static str, &'static str)], body: &'static str) -> Response {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_static(value));
        }
        Response::new(
            StatusCode::CREATED,
            map,
            Bytes::from_static(body.as_bytes()),
            Vec::new(),
        )
    }

    #[test]
    fn replayed_reads_the_idempotency_replayed_header() {
        assert!(response(&[("idempotency-replayed", "true")], "").replayed());
        assert!(response(&[("idempotency-replayed", "True")], "").replayed());
        assert!(!response(&[("idempotency-replayed", "false")], "").replayed());
        assert!(!response(&[], "").replayed());
    }

    #[test]
    fn decodes_json_or_says_why_not() {
        let ok = response(&[("x-request-id", "req-7")], r#"{"data":{"id":"1"}}"#);
        let value: serde_json::Value = ok.json().expect("valid JSON");
        assert_eq!(value["data"]["id"], "1");
        assert_eq!(ok.request_id(), Some("req-7"));

        let error = response(&[], "not json")
            .json::<serde_json::Value>()
            .expect_err("invalid JSON");
        assert_eq!(error.kind(), ErrorKind::Decode);
        assert!(std::error::Error::source(&error).is_some());
    }
}
