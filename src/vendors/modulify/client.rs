//! Modulify method calls (Modulify's "Idempotency and retries"; `docs/wire-contract.md`,
//! "Modulify"): any method, the catalogue deciding the key.
//!
//! Every Modulify method is `POST /v1/<method>` with a JSON body. Whether a call needs an
//! `Idempotency-Key` is a fact of the method, published in the catalogue `GET /v1/tools`
//! ([`Effect`]): a method that only reads is sent without one; every other method (one that sets
//! a value, one that adds something each time, a destructive one) with one, the same on every
//! attempt. The key is the caller's ([`MethodCall::key`]), one derived from a stable business
//! operation ID ([`MethodCall::operation_id`]), or a random UUIDv4 made once per call, as
//! Modulify's "Idempotency and retries" recommends; the same call never sends two keys.
//!
//! The catalogue is read once per [`ModulifyClient`] (and its clones), on the first call, and
//! cached; [`ModulifyClient::refresh_tools`] reads it again. A method the cached catalogue lacks
//! makes the client read it again once (at most every [`CATALOGUE_REFRESH_MIN`]), for a method
//! deployed after it was read; a method still missing is refused with `invalid_input` before
//! anything is sent. It is refused rather than sent with a key because the catalogue is what
//! says whether the method adds something: a method it does not list is either a typo, which
//! the server would answer 404, or one this client cannot classify, and a clear refusal costs
//! nothing while a guess would hide the mistake.
//!
//! The retry rules are Modulify's table (`src/vendors/modulify/tables.rs`), run by the same
//! engine as Hodoflow's: a 409 in progress and a 429 wait `Retry-After` (2 s when absent), 5xx and
//! dropped connections back off with jitter, all with the same key; a 401 stops (the token is
//! static); 422 `idempotency_key_reused` stops with [`ErrorKind::KeyReused`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::client::RetryingClient;
use crate::core::attempt::Attempt;
use crate::core::call_options::{CallOptions, per_call_setters};
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::key::IdempotencyKey;
use crate::core::redact::BodyLen;
use crate::core::request::FixedRequest;
use crate::core::runtime;
use crate::core::transport::Http;
use crate::vendors::Surface;
use crate::vendors::modulify::tables::{BODY_LIMIT, Effect, MODULIFY};

/// The least age of a cached catalogue before a call to a method it lacks reads it again.
pub const CATALOGUE_REFRESH_MIN: Duration = Duration::from_secs(5);

/// A client for Modulify's API: any method, with the catalogue deciding the key.
///
/// Wraps a [`RetryingClient`] built for the Modulify base URL with its static API token
/// ([`ClientBuilder::bearer_token`](crate::ClientBuilder::bearer_token)), so budgets, backoff,
/// the retry budget and the credential's gate are configured there. Cheap to clone: clones
/// share the client and the cached catalogue.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use hodoflow_mock::{DEMO_MODULIFY_TOKEN, Fault, MockServer};
/// use hodoflow_retry::{IdempotencyKey, ModulifyClient, modulify::ModulifyOutcome};
///
/// let server = MockServer::start().await?;
/// let modulify = ModulifyClient::builder(server.base_url())
///     .bearer_token(DEMO_MODULIFY_TOKEN)
///     .build()?;
///
/// // The network loses the first answer after the server ran the call.
/// server.inject(Fault::execute_then_close().on("POST", "/v1/send_message").times(1));
/// let answer = modulify
///     .call("send_message", r#"{"projectId":"site_1","prompt":"Add a sign-up form."}"#)
///     .operation_id("order-4711:notify")
///     .send()
///     .await?;
///
/// assert_eq!(answer.outcome(), ModulifyOutcome::Replayed);
/// let key = IdempotencyKey::from_operation_id("order-4711:notify");
/// assert_eq!(server.ledger().modulify_executions(key.as_str()), 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ModulifyClient {
    client: RetryingClient,
    catalogue: Arc<Mutex<Option<Cached>>>,
}

/// The catalogue as last read, and when.
type Cached = (Arc<Catalogue>, Instant);

impl AsRef<RetryingClient> for ModulifyClient {
    fn as_ref(&self) -> &RetryingClient {
        &self.client
    }
}

impl ModulifyClient {
    /// Calls Modulify through `client`, whose base URL is Modulify's and whose token is
    /// Modulify's: for a client built with settings the [`builder`](Self::builder) does not
    /// offer. Prefer the builder.
    pub fn new(client: RetryingClient) -> Self {
        Self {
            client,
            catalogue: Arc::new(Mutex::new(None)),
        }
    }

    /// The client the calls go through: its [`stats`](RetryingClient::stats) count them.
    pub fn client(&self) -> &RetryingClient {
        &self.client
    }

    /// Checks a method's name as [`call`](Self::call) does before it sends anything: one URL
    /// path segment of letters, digits, `_`, `-`, `.` and `~`. For a sender that keeps calls to
    /// make later (an outbox checks each before storing it).
    ///
    /// # Errors
    ///
    /// `invalid_input`, saying what a name may hold.
    pub fn check_method(method: &str) -> Result<()> {
        check_method(method)
    }

    /// A call of `method`, `POST /v1/<method>`, with `body` sent byte for byte on every attempt.
    pub fn call(&self, method: &str, body: impl Into<Bytes>) -> MethodCall<'_> {
        MethodCall {
            modulify: self,
            method: method.to_owned(),
            body: body.into(),
            key: None,
            options: CallOptions::of(&self.client.inner),
        }
    }

    /// The catalogue, read once (`GET /v1/tools`, retried as a read) and cached.
    ///
    /// # Errors
    ///
    /// The read's error when it fails; [`ErrorKind::Decode`] when the answer is not a catalogue.
    pub async fn tools(&self) -> Result<Arc<Catalogue>> {
        let mut cached = self.catalogue.lock().await;
        if let Some((catalogue, _)) = cached.as_ref() {
            return Ok(Arc::clone(catalogue));
        }
        let catalogue = Arc::new(self.read_tools().await?);
        *cached = Some((Arc::clone(&catalogue), runtime::now()));
        Ok(catalogue)
    }

    /// Reads the catalogue again and caches it.
    ///
    /// # Errors
    ///
    /// As for [`tools`](Self::tools); the cached catalogue stays when the read fails.
    pub async fn refresh_tools(&self) -> Result<Arc<Catalogue>> {
        let mut cached = self.catalogue.lock().await;
        let catalogue = Arc::new(self.read_tools().await?);
        *cached = Some((Arc::clone(&catalogue), runtime::now()));
        Ok(catalogue)
    }

    /// The effect of `method`: from the cached catalogue, or from one read again when it lacks
    /// the method and is older than [`CATALOGUE_REFRESH_MIN`].
    async fn effect_of(&self, method: &str) -> Result<Effect> {
        let catalogue = self.tools().await?;
        if let Some(tool) = catalogue.get(method) {
            return Ok(tool.effect);
        }
        let stale = {
            let cached = self.catalogue.lock().await;
            cached.as_ref().is_some_and(|(_, read)| {
                runtime::now().saturating_duration_since(*read) >= CATALOGUE_REFRESH_MIN
            })
        };
        if stale && let Some(tool) = self.refresh_tools().await?.get(method) {
            return Ok(tool.effect);
        }
        Err(Error::invalid_input(format!(
            "the Modulify method {method:?} is not in the catalogue (GET /v1/tools); nothing was sent"
        )))
    }

    async fn read_tools(&self) -> Result<Catalogue> {
        let inner = &self.client.inner;
        let request = FixedRequest::modulify_tools(&inner.base)?;
        let answered = inner
            .engine
            .run(&request, &inner.policy, &mut Http(&inner.http))
            .await?;
        Catalogue::from_json(&answered.body).map_err(|source| {
            // The decoder may quote the server's text: cleaned as a server's words are.
            Error::new(
                ErrorKind::Decode,
                format!("{}: the catalogue: ", ErrorKind::Decode),
            )
            .quoting(&source.to_string(), MAX_DECODE_QUOTE)
            .cleaned(&answered.cleaner)
            .with_status(answered.status)
            .with_source(source)
        })
    }
}

/// One Modulify method call, sent with [`send`](MethodCall::send).
#[must_use = "a call does nothing until it is sent"]
pub struct MethodCall<'a> {
    modulify: &'a ModulifyClient,
    method: String,
    body: Bytes,
    key: Option<IdempotencyKey>,
    options: CallOptions,
}

impl fmt::Debug for MethodCall<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MethodCall")
            .field("method", &self.method)
            .field("key", &self.key)
            .field("body", &BodyLen(self.body.len()))
            .finish_non_exhaustive()
    }
}

impl MethodCall<'_> {
    /// Sends every attempt with this key, unless the method only reads.
    ///
    /// Default: a random UUIDv4, made once for this call and reused on every attempt.
    pub fn key(mut self, key: IdempotencyKey) -> Self {
        self.key = Some(key);
        self
    }

    /// Derives the key from a stable business operation ID
    /// ([`IdempotencyKey::from_operation_id`]), so that a resend after a restart repeats the same
    /// operation.
    ///
    /// Default: a random key, made once for this call.
    pub fn operation_id(self, operation_id: &str) -> Self {
        self.key(IdempotencyKey::from_operation_id(operation_id))
    }

    /// Adds headers, sent unchanged on every attempt. `Authorization` and `Idempotency-Key` are
    /// the client's own and refused.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        self.options.headers.extend(headers);
        self
    }

    per_call_setters!("call");

    /// Sends the call, retrying as Modulify's table says, with the same key on every
    /// attempt.
    ///
    /// Cancellation is safe: dropping the future stops sending; an attempt already on the wire
    /// may still run, so call again with the same key.
    ///
    /// # Errors
    ///
    /// Before anything is sent: `invalid_input` for a method name that is not one path segment,
    /// a method the catalogue lacks, a key the server would refuse, or a body that is not a JSON
    /// object; `payload_too_large` for a body over 1,048,576 bytes; the catalogue read's own
    /// error. After: an [`Error`] whose [`may_have_run`](Error::may_have_run) says whether the
    /// call may have taken effect, and whose [`idempotency_key`](Error::idempotency_key) is the
    /// key to call again with.
    pub async fn send(mut self) -> Result<MethodAnswer> {
        check_method(&self.method)?;
        check_body(&self.body)?;
        if let Some(key) = &self.key {
            MODULIFY.keys.check(key)?;
        }
        // The catalogue read, and the wait for another caller's, is part of the call: it is
        // bounded by the call's budget, and the attempts get what it leaves.
        let started = runtime::now();
        let max_elapsed = self.options.policy.budget.max_elapsed;
        let read = runtime::timeout(max_elapsed, self.modulify.effect_of(&self.method))
            .await
            .ok();
        let left = max_elapsed.saturating_sub(runtime::now().saturating_duration_since(started));
        let effect = match read {
            Some(effect) => effect?,
            None => return Err(catalogue_late(max_elapsed)),
        };
        if left.is_zero() {
            return Err(catalogue_late(max_elapsed));
        }
        let policy = self.options.policy_mut();
        policy.budget = policy.budget.max_elapsed(left);
        let key = effect
            .needs_key()
            .then(|| self.key.unwrap_or_else(IdempotencyKey::random));
        let inner = &self.modulify.client.inner;
        let request = FixedRequest::modulify(
            &inner.base,
            &self.method,
            key.as_ref(),
            self.body,
            &self.options.headers,
        )?;
        let then = |answered, _| answered;
        let answered = (inner.engine)
            .run_boxed(request, self.options.policy, Http(&inner.http), then)
            .await;
        let answered = match answered {
            Ok(answered) => answered,
            Err(error) => return Err(error.with_key(key)),
        };
        let replay = &Surface::Modulify.profile().vendor.replay;
        let outcome = match replay.replayed(&answered.headers) {
            false => ModulifyOutcome::Ok,
            true if replay.answer_not_kept(&answered.body) => {
                ModulifyOutcome::ReplayedWithoutAnswer
            }
            true => ModulifyOutcome::Replayed,
        };
        Ok(MethodAnswer {
            outcome,
            effect,
            key,
            status: answered.status,
            headers: answered.headers,
            body: answered.body,
            attempts: answered.attempts,
        })
    }
}

/// The most bytes of a decoder's message about the catalogue quoted in an error.
const MAX_DECODE_QUOTE: usize = 256;

/// The call's budget ran out while it read the catalogue: nothing was sent to the method.
fn catalogue_late(max_elapsed: Duration) -> Error {
    Error::new(
        ErrorKind::BudgetExhausted,
        format!(
            "call budget exhausted: the catalogue read (GET /v1/tools) did not end within the call's {max_elapsed:?}; the method was not called"
        ),
    )
}

/// A method name is one path segment, by the rule trigger tokens follow
/// ([`is_path_segment`](crate::core::request::is_path_segment)): letters, digits, `_`, `-`, `.` and
/// `~`, and neither `.` nor `..`.
pub(crate) fn check_method(method: &str) -> Result<()> {
    if crate::core::request::is_path_segment(method) {
        return Ok(());
    }
    Err(Error::invalid_input(
        "a Modulify method name is one path segment of letters, digits, '_', '-', '.' and '~', such as send_message",
    ))
}

/// The body is a JSON object of at most [`BODY_LIMIT`] bytes (the 400 `invalid_request` and 413
/// rows of `docs/wire-contract.md`, "Modulify", checked before anything is sent).
fn check_body(body: &[u8]) -> Result<()> {
    if body.len() > BODY_LIMIT {
        return Err(Error::new(
            ErrorKind::PayloadTooLarge,
            format!(
                "payload too large: the body of {} bytes is over Modulify's {BODY_LIMIT}-byte limit; nothing was sent",
                body.len()
            ),
        ));
    }
    // Only the shape is checked: the bytes sent are the caller's, never re-serialized.
    serde_json::from_slice::<std::collections::BTreeMap<String, IgnoredAny>>(body)
        .map(drop)
        .map_err(|source| {
            Error::invalid_input(format!(
                "a Modulify body must be a JSON object ({source}); nothing was sent"
            ))
        })
}

/// How a Modulify call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ModulifyOutcome {
    /// The method ran on this call.
    Ok,
    /// An earlier attempt (or call) with the same key had run it: the server replayed its
    /// answer (`idempotency-replayed: true`) and did not run it again.
    Replayed,
    /// An earlier attempt had run it, but its answer was over 1 MB and not kept: the server did
    /// not run it again and sent no data. Read the current state to learn the result.
    ReplayedWithoutAnswer,
}

impl ModulifyOutcome {
    /// `"ok"`, `"replayed"` or `"replayed_without_answer"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Replayed => "replayed",
            Self::ReplayedWithoutAnswer => "replayed_without_answer",
        }
    }
}

impl fmt::Display for ModulifyOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The successful answer to a Modulify call. Its `Debug` shows the body's length, not the body.
#[derive(Clone)]
pub struct MethodAnswer {
    outcome: ModulifyOutcome,
    effect: Effect,
    key: Option<IdempotencyKey>,
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    attempts: Vec<Attempt>,
}

impl fmt::Debug for MethodAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MethodAnswer")
            .field("outcome", &self.outcome)
            .field("effect", &self.effect)
            .field("key", &self.key)
            .field("status", &self.status)
            .field("body", &BodyLen(self.body.len()))
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl MethodAnswer {
    /// Ran now, replayed, or replayed without the answer.
    pub fn outcome(&self) -> ModulifyOutcome {
        self.outcome
    }

    /// The method's effect, from the catalogue.
    pub fn effect(&self) -> Effect {
        self.effect
    }

    /// The key every attempt carried; `None` for a method that only reads.
    pub fn key(&self) -> Option<&IdempotencyKey> {
        self.key.as_ref()
    }

    /// Whether the answer holds the method's result: false only for
    /// [`ModulifyOutcome::ReplayedWithoutAnswer`].
    pub fn answer_kept(&self) -> bool {
        self.outcome != ModulifyOutcome::ReplayedWithoutAnswer
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body, as the server sent it.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The answer's `data`; `None` when it is null or absent (as in a replay without the
    /// answer) or the body is not JSON.
    pub fn data(&self) -> Option<Value> {
        let mut document: Value = serde_json::from_slice(&self.body).ok()?;
        match document.get_mut("data").map(Value::take) {
            Some(Value::Null) | None => None,
            Some(data) => Some(data),
        }
    }

    /// Every attempt made, in order.
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// The `x-request-id` of the answer.
    pub fn request_id(&self) -> Option<&str> {
        self.attempts.last().and_then(Attempt::request_id)
    }
}

/// Modulify's method catalogue, `GET /v1/tools`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalogue {
    tools: Vec<Tool>,
}

impl Catalogue {
    /// Every method listed, in the server's order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The method named `name`, if listed.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    fn from_json(body: &[u8]) -> serde_json::Result<Self> {
        #[derive(Deserialize)]
        struct Listed {
            tools: Vec<Entry>,
        }
        #[derive(Deserialize)]
        struct Entry {
            name: String,
            #[serde(default)]
            description: String,
            #[serde(default)]
            annotations: Option<Value>,
        }
        let listed: Listed = serde_json::from_slice(body)?;
        let tools = listed
            .tools
            .into_iter()
            .map(|entry| Tool {
                effect: Effect::of_annotations(entry.annotations.as_ref()),
                name: entry.name,
                description: entry.description,
            })
            .collect();
        Ok(Self { tools })
    }
}

/// One method of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    name: String,
    description: String,
    effect: Effect,
}

impl Tool {
    /// The method's name, as in `POST /v1/<name>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The catalogue's description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// What the method does, and so whether it needs a key.
    pub fn effect(&self) -> Effect {
        self.effect
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_is_one_path_segment() {
        for ok in ["send_message", "create-site", "v2.get_site"] {
            assert!(check_method(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a/b",
            "..",
            ".",
            "send message",
            "x?y=1",
            "x#y",
            "caf\u{e9}",
        ] {
            assert_eq!(
                check_method(bad).unwrap_err().kind(),
                ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_body_must_be_a_json_object_within_the_limit() {
        assert!(check_body(b"{}").is_ok());
        assert!(check_body(br#" {"a": [1, {"b": null}]} "#).is_ok());
        for bad in [&b""[..], b"[]", b"1", b"{", b"null", br#""{}""#] {
            assert_eq!(
                check_body(bad).unwrap_err().kind(),
                ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
        let big = format!(r#"{{"a":"{}"}}"#, "x".repeat(BODY_LIMIT));
        assert_eq!(
            check_body(big.as_bytes()).unwrap_err().kind(),
            ErrorKind::PayloadTooLarge
        );
    }

    #[test]
    fn reads_a_catalogue_and_classifies_each_method() {
        let body = br#"{"tools": [
            {"name": "get_site", "description": "d", "annotations": {"readOnlyHint": true}},
            {"name": "rename_site", "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true}},
            {"name": "send_message", "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false}},
            {"name": "delete_site", "annotations": {"destructiveHint": true, "idempotentHint": true}},
            {"name": "mystery"}
        ]}"#;
        let catalogue = Catalogue::from_json(body).unwrap();
        let effect = |name: &str| catalogue.get(name).map(Tool::effect);
        assert_eq!(effect("get_site"), Some(Effect::Read));
        assert_eq!(effect("rename_site"), Some(Effect::Idempotent));
        assert_eq!(effect("send_message"), Some(Effect::Adds));
        assert_eq!(effect("delete_site"), Some(Effect::Destructive));
        assert_eq!(effect("mystery"), Some(Effect::Destructive));
        assert_eq!(effect("absent"), None);
        assert_eq!(catalogue.tools().len(), 5);
        assert!(Catalogue::from_json(b"{\"tools\": 3}").is_err());
    }
}
