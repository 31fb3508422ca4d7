//! The SDK's own engine as a simulated sender: a `HodoflowClient` with its defaults whose
//! attempts go through the in-memory transport seam ([`AttemptTransport`]) to the server model.
//!
//! Nothing of the engine is replaced: the decide step, the retry budget and its throttle, the
//! CUBIC limiter, the credential gate, backoff with jitter, `Retry-After` and the attempt timeout
//! all run as in production, in virtual time. The engine enforces the attempt timeout by dropping
//! the transport's future, so a timed-out attempt stays in the server's queue (wasted work), and
//! the drop is what counts it as a timeout here.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use hodoflow_retry::{
    Budget, DeliveryId, HodoflowClient, IdempotencyKey,
    limit::RetryBudget,
    transport::{Answer, AttemptFuture, AttemptTransport, Outgoing},
};
use http::{HeaderMap, HeaderValue, StatusCode};

use crate::recorder::{Count, Recorder};
use crate::server::{Clock, Reply, Server, UNKNOWN_KEY};
use crate::workload::Deliver;

/// The trigger token every simulated delivery goes to (a valid path segment).
const TRIGGER_TOKEN: &str = "sim-trigger";
/// The first-delivery answer of Hodoflow's webhook sender guide.
const ACCEPTED: &[u8] =
    br#"{"status":"accepted","workflow_run_id":"00000000-0000-4000-8000-000000000000"}"#;
/// The guide's answer to a retry of an accepted delivery.
const DUPLICATE: &[u8] = br#"{"status":"duplicate"}"#;
/// The guide's 503.
const UNAVAILABLE: &[u8] = br#"{"error":"Processing temporarily unavailable"}"#;
/// The guide's 429.
const TOO_MANY: &[u8] = br#"{"error":"Rate limit exceeded"}"#;

/// The in-memory link from one client to the server model.
#[derive(Debug)]
struct Link {
    server: Server,
    recorder: Recorder,
    clock: Clock,
}

/// Counts a timeout when the engine drops an attempt before its answer.
struct Pending<'a> {
    link: &'a Link,
    answered: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.link
                .recorder
                .count(Count::Timeout, self.link.clock.now());
        }
    }
}

impl AttemptTransport for Link {
    fn send<'a>(&'a self, attempt: Outgoing<'a>) -> AttemptFuture<'a> {
        let key = attempt
            .headers()
            .get("idempotency-key")
            .and_then(|value| value.to_str().ok())
            .and_then(|key| key.strip_prefix('e'))
            .and_then(|n| n.parse().ok())
            .unwrap_or(UNKNOWN_KEY);
        let event = event_of(attempt.body());
        Box::pin(async move {
            let mut pending = Pending {
                link: self,
                answered: false,
            };
            let reply = self.server.submit(key, event).await;
            pending.answered = true;
            answer(reply)
        })
    }
}

/// The event number in a body `{"event":N}`.
fn event_of(body: &[u8]) -> u64 {
    body.iter()
        .skip_while(|b| !b.is_ascii_digit())
        .take_while(|b| b.is_ascii_digit())
        .fold(0u64, |n, b| n * 10 + u64::from(b - b'0'))
}

fn answer(reply: Reply) -> Answer {
    let (status, body, after) = match reply {
        Reply::Accepted => (StatusCode::ACCEPTED, ACCEPTED, None),
        Reply::Duplicate => (StatusCode::ACCEPTED, DUPLICATE, None),
        Reply::Unavailable(after) => (StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE, Some(after)),
        Reply::TooMany(after) => (StatusCode::TOO_MANY_REQUESTS, TOO_MANY, Some(after)),
    };
    let mut headers = HeaderMap::new();
    if let Some(after) = after {
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from(after));
    }
    Answer::response(status, headers, Bytes::from_static(body))
}

/// One simulated sender running the SDK.
#[derive(Debug)]
pub(crate) struct SdkSender {
    client: HodoflowClient,
    retry_budget: RetryBudget,
}

impl SdkSender {
    /// A client with the SDK's defaults (`budget`) or with `RetryBudget::disabled()`, and the
    /// default attempt timeout or `attempt_timeout`, seeded with `seed`.
    pub(crate) fn new(
        budget: bool,
        attempt_timeout: Option<Duration>,
        server: Server,
        recorder: Recorder,
        clock: Clock,
        seed: u64,
    ) -> Self {
        let retry_budget = if budget {
            RetryBudget::builder()
                .seed(seed ^ 0x00b0_d6e7)
                .build()
                .expect("the default retry budget builds")
        } else {
            RetryBudget::disabled()
        };
        let mut builder = HodoflowClient::builder("http://127.0.0.1:9");
        if let Some(timeout) = attempt_timeout {
            builder = builder.budget(Budget::new().attempt_timeout(timeout));
        }
        let client = builder
            .bearer_token("sim")
            .transport(Link {
                server,
                recorder,
                clock,
            })
            .retry_budget(retry_budget.clone())
            .seed(seed)
            .build()
            .expect("the simulated client builds");
        SdkSender {
            client,
            retry_budget,
        }
    }

    async fn call(&self, event: u64) -> bool {
        let key = IdempotencyKey::new(format!("e{event}")).expect("a valid key");
        let body = Bytes::from(format!("{{\"event\":{event}}}"));
        self.client
            .deliver(TRIGGER_TOKEN, body)
            .delivery_id(DeliveryId::new(key))
            .send()
            .await
            .is_ok()
    }
}

impl Deliver for SdkSender {
    fn deliver(&self, event: u64) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(self.call(event))
    }

    fn admissions(&self) -> Option<hodoflow_retry::limit::Admissions> {
        Some(self.retry_budget.admissions())
    }
}
