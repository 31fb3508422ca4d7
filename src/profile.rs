//! A vendor as data: the [`Profile`] of an API of this style, which a user can build, test and
//! send through the same engine as the built-in ones.
//!
//! A profile says what a vendor's documentation fixes for one kind of request: the retry
//! matrix (each row a [`When`] and its [`Verdict`]), the key rules (the header, the longest key,
//! whether a key is sent), how a replay and an in-progress key are read, and whom each signal
//! holds (the [`Reach`] a 429 or 503 closes). Hodoflow's and Modulify's tables are values of the
//! same type ([`Profile::from`] a [`Surface`]); a profile of your own, built with
//! [`Profile::builder`], runs through the same budgets, limiters and checks:
//!
//! ```
//! use hodoflow_retry::profile::{Profile, Reach, When};
//! use hodoflow_retry::{ErrorKind, Verdict};
//!
//! // An API that follows the IETF Idempotency-Key draft and nothing else.
//! let draft = Profile::builder("ietf_draft")
//!     .rule(When::NoResponse, Verdict::RetryAfterBackoff, "No answer: retry with the same key")
//!     .rule(When::Range(200, 299), Verdict::Success, "Done, or the stored answer replayed")
//!     .rule(When::Status(&[400]), Verdict::Stop(ErrorKind::ClientError), "The key is missing")
//!     .rule(When::Status(&[409]), Verdict::RetryAfterServerWait, "The original is in flight")
//!     .rule(When::Status(&[422]), Verdict::Stop(ErrorKind::KeyReused), "The key was reused")
//!     .rule(When::Status(&[429]), Verdict::RetryAfterServerWait, "After Retry-After")
//!     .rule(When::Range(500, 599), Verdict::RetryAfterBackoff, "Transient: retry")
//!     .rule(When::Other, Verdict::Stop(ErrorKind::UnexpectedStatus), "Outside the draft")
//!     .in_progress(409)
//!     .closes(429, Reach::Credential)
//!     .build()?;
//!
//! assert_eq!(draft.verdict_on_status(409), Verdict::RetryAfterServerWait);
//! assert_eq!(draft.verdict_on_status(422), Verdict::Stop(ErrorKind::KeyReused));
//! # Ok::<(), hodoflow_retry::Error>(())
//! ```
//!
//! Send with it through [`RetryingClient::request`](crate::RetryingClient::request);
//! `examples/custom_vendor.rs` runs one against a small server of the draft.
//!
//! A profile is built once, at start-up, and lives as long as the process (as the built-in
//! tables do, which are statics): keep it in a `static` `LazyLock` or pass the [`Profile`]
//! (a `Copy` handle) around; do not build one per call.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, Method, StatusCode};
use serde_json::Value;

use crate::client::RetryingClient;
use crate::core::answer::Answer;
use crate::core::call_options::{CallOptions, per_call_setters};
use crate::core::classify;
use crate::core::error::{Error, Result};
use crate::core::key::IdempotencyKey;
use crate::core::limit::ServiceKey;
use crate::core::matrix::{Matrix, Rule, Verdict, rule};
use crate::core::profile::{KeyRules, Replay, Scopes, SurfaceProfile, Vendor, always_kept};
use crate::core::redact::BodyLen;
use crate::core::request::{FixedRequest, add_headers, content_type, url_of};
use crate::core::shared::Shared;
use crate::vendors::Surface;
use crate::vendors::hodoflow::call::send_for_response;
use crate::vendors::hodoflow::outcome::Response;
use crate::vendors::hodoflow::routes::route_of;

pub use crate::core::limit::scope::Reach;
pub use crate::core::matrix::When;

/// The most bytes of a key a profile may allow: what [`IdempotencyKey::new`] accepts.
const MAX_KEY_BYTES: usize = 255;

/// What a vendor's documentation fixes for one kind of request: a `Copy` handle to data that
/// lives as long as the process. Built with [`Profile::builder`], or one of the built-in
/// tables: `Profile::from(Surface::Webhook)`.
#[derive(Clone, Copy)]
pub struct Profile(&'static SurfaceProfile);

impl Profile {
    /// A profile named `name` (snake_case: it names the surface in logs, metrics and errors).
    /// Add its retry matrix with [`rule`](ProfileBuilder::rule).
    pub fn builder(name: impl Into<String>) -> ProfileBuilder {
        ProfileBuilder::new(name.into())
    }

    /// The profile's name, as logs and metrics show it.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// Whether its requests carry an idempotency key.
    pub fn sends_key(self) -> bool {
        self.0.sends_key
    }

    /// The verdict of the profile's matrix on `answer`, as the engine reads it.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http::{HeaderMap, StatusCode};
    /// use hodoflow_retry::{ErrorKind, Profile, Surface, Verdict, transport::Answer};
    ///
    /// let reused = Answer::response(
    ///     StatusCode::CONFLICT,
    ///     HeaderMap::new(),
    ///     Bytes::from_static(br#"{"errors":[{"status":"409","code":"idempotency_key_reused"}]}"#),
    /// );
    /// let writes = Profile::from(Surface::JsonApiWrite);
    /// assert_eq!(writes.verdict(&reused), Verdict::Stop(ErrorKind::KeyReused));
    /// ```
    pub fn verdict(self, answer: &Answer) -> Verdict {
        classify::verdict(self.0, answer)
    }

    /// The verdict of the profile's matrix on an answer of `status` with an empty body (rows
    /// that read an error code need the body: use [`verdict`](Self::verdict)).
    pub fn verdict_on_status(self, status: u16) -> Verdict {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        self.verdict(&Answer::response(status, HeaderMap::new(), Bytes::new()))
    }

    pub(crate) fn table(self) -> &'static SurfaceProfile {
        self.0
    }
}

impl From<Surface> for Profile {
    fn from(surface: Surface) -> Self {
        Self(surface.profile())
    }
}

impl PartialEq for Profile {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Profile {}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Profile").field(&self.0.name).finish()
    }
}

/// Builds a [`Profile`]; [`build`](Self::build) checks it.
#[derive(Debug)]
#[must_use = "a profile builder does nothing until it is built"]
pub struct ProfileBuilder {
    name: String,
    rules: Vec<(When, Verdict, String)>,
    error_codes: fn(&Value) -> Vec<String>,
    sends_key: bool,
    key_header: HeaderName,
    key_max_len: usize,
    replay_header: HeaderName,
    in_progress: Option<u16>,
    status_is_the_answer: bool,
    answer_limit: Option<usize>,
    sits_in: Reach,
    closes: Vec<(u16, Reach)>,
}

impl ProfileBuilder {
    fn new(name: String) -> Self {
        Self {
            name,
            rules: Vec::new(),
            error_codes: |_| Vec::new(),
            sends_key: true,
            key_header: HeaderName::from_static("idempotency-key"),
            key_max_len: MAX_KEY_BYTES,
            replay_header: HeaderName::from_static("idempotency-replayed"),
            in_progress: None,
            status_is_the_answer: false,
            answer_limit: None,
            sits_in: Reach::Credential,
            closes: Vec::new(),
        }
    }

    /// A row of the retry matrix: answers `when` covers get `verdict`; `action` is the
    /// documentation's words for it, quoted in the error of a stop. The most specific row wins
    /// (a status with an error code, then a list of statuses, then a range, then
    /// [`When::Other`]), so rows can follow the documentation's order. Every matrix needs a
    /// [`When::NoResponse`] row and a [`When::Other`] row.
    pub fn rule(mut self, when: When, verdict: Verdict, action: impl Into<String>) -> Self {
        self.rules.push((when, verdict, action.into()));
        self
    }

    /// Reads the error codes of an error body, for rows of [`When::Code`].
    ///
    /// Default: none (no row matches on a code).
    pub fn error_codes(mut self, read: fn(&Value) -> Vec<String>) -> Self {
        self.error_codes = read;
        self
    }

    /// Whether requests carry an idempotency key: `false` for an API (or a kind of request)
    /// that is naturally repeatable and takes none.
    ///
    /// Default: `true`.
    pub fn sends_key(mut self, sends_key: bool) -> Self {
        self.sends_key = sends_key;
        self
    }

    /// The header the key is sent in.
    ///
    /// Default: `Idempotency-Key`.
    pub fn key_header(mut self, header: HeaderName) -> Self {
        self.key_header = header;
        self
    }

    /// The longest key, in bytes, the server accepts (1 to 255); a longer key is refused
    /// before anything is sent.
    ///
    /// Default: 255.
    pub fn key_max_len(mut self, bytes: usize) -> Self {
        self.key_max_len = bytes;
        self
    }

    /// The header whose `true` marks a replayed answer.
    ///
    /// Default: `Idempotency-Replayed`.
    pub fn replay_header(mut self, header: HeaderName) -> Self {
        self.replay_header = header;
        self
    }

    /// The status that means "the same key is still running" (the draft's 409): a call whose
    /// budget ends on it fails as [`ErrorKind::InProgress`](crate::ErrorKind::InProgress).
    ///
    /// Default: none.
    pub fn in_progress(mut self, status: u16) -> Self {
        self.in_progress = Some(status);
        self
    }

    /// Whether the status alone is the answer: a success whose body broke off or is over the
    /// answer limit still counts as answered (the server committed). Otherwise such an attempt
    /// is retried with the same key and the replay brings the body back.
    ///
    /// Default: `false`.
    pub fn status_is_the_answer(mut self, yes: bool) -> Self {
        self.status_is_the_answer = yes;
        self
    }

    /// A fixed limit on the answer bytes read.
    ///
    /// Default: the client's [`max_answer_bytes`](crate::ClientBuilder::max_answer_bytes).
    pub fn answer_limit(mut self, bytes: usize) -> Self {
        self.answer_limit = Some(bytes);
        self
    }

    /// The shared scope the profile's calls sit in: the closures of that scope hold them.
    ///
    /// Default: [`Reach::Credential`].
    pub fn sits_in(mut self, reach: Reach) -> Self {
        self.sits_in = reach;
        self
    }

    /// The scope a `status` with a `Retry-After` closes for that long: the credential (every
    /// call of the client waits), or the call alone. A status not named closes nothing.
    ///
    /// Default: nothing closed.
    pub fn closes(mut self, status: u16, reach: Reach) -> Self {
        self.closes.retain(|(named, _)| *named != status);
        self.closes.push((status, reach));
        self
    }

    /// Checks the profile and builds it.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an empty or
    /// non-snake_case name, a matrix without a [`When::NoResponse`] or a [`When::Other`] row,
    /// a success row outside 2xx, a key limit outside 1 to 255, or a status outside 100 to 599.
    pub fn build(self) -> Result<Profile> {
        self.check()?;
        let leak_str = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let name = leak_str(self.name);
        let rules: Vec<Rule> = self
            .rules
            .into_iter()
            .map(|(when, verdict, action)| rule(when, verdict, leak_str(action)))
            .collect();
        let vendor: &'static Vendor = Box::leak(Box::new(Vendor {
            keys: KeyRules {
                max_len: self.key_max_len,
                header: self.key_header,
            },
            replay: Replay {
                header: self.replay_header,
                answer_not_kept: always_kept,
            },
        }));
        let table = SurfaceProfile {
            name,
            vendor,
            rules: Matrix::new(Box::leak(rules.into_boxed_slice())),
            error_codes: self.error_codes,
            sends_key: self.sends_key,
            answer_limit: self.answer_limit,
            in_progress: self.in_progress,
            not_found: "not found",
            status_is_the_answer: self.status_is_the_answer,
            scopes: Scopes {
                sits_in: self.sits_in,
                closes: Box::leak(self.closes.into_boxed_slice()),
                route_policy: None,
                service: name,
            },
        };
        Ok(Profile(Box::leak(Box::new(table))))
    }

    fn check(&self) -> Result<()> {
        let name = &self.name;
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(Error::invalid_input(format!(
                "a profile's name is snake_case (a-z, 0-9, _), not {name:?}"
            )));
        }
        for needed in [When::NoResponse, When::Other] {
            if !self.rules.iter().any(|(when, ..)| *when == needed) {
                return Err(Error::invalid_input(format!(
                    "profile {name}: the retry matrix needs a {needed:?} row"
                )));
            }
        }
        let status_ok = |status: u16| (100..=599).contains(&status);
        for (when, verdict, _) in &self.rules {
            let statuses: Vec<u16> = match *when {
                When::Status(statuses) | When::Code(statuses, _) => statuses.to_vec(),
                When::Range(low, high) if low <= high => vec![low, high],
                When::Range(low, high) => {
                    return Err(Error::invalid_input(format!(
                        "profile {name}: the range {low}..={high} is empty"
                    )));
                }
                When::NoResponse | When::Other => Vec::new(),
            };
            if let Some(bad) = statuses.iter().find(|status| !status_ok(**status)) {
                return Err(Error::invalid_input(format!(
                    "profile {name}: {bad} is not an HTTP status"
                )));
            }
            let success_only_2xx = statuses.iter().all(|s| (200..=299).contains(s))
                && !matches!(when, When::NoResponse | When::Other);
            if *verdict == Verdict::Success && !success_only_2xx {
                return Err(Error::invalid_input(format!(
                    "profile {name}: only a 2xx answer can be a success, not {when:?}"
                )));
            }
        }
        if !(1..=MAX_KEY_BYTES).contains(&self.key_max_len) {
            return Err(Error::invalid_input(format!(
                "profile {name}: a key limit of {} bytes is outside 1 to {MAX_KEY_BYTES}",
                self.key_max_len
            )));
        }
        let named = self
            .in_progress
            .into_iter()
            .chain(self.closes.iter().map(|c| c.0));
        if let Some(bad) = named.into_iter().find(|status| !status_ok(*status)) {
            return Err(Error::invalid_input(format!(
                "profile {name}: {bad} is not an HTTP status"
            )));
        }
        Ok(())
    }
}

impl RetryingClient {
    /// A request of `profile`: `method` on `path` (under the client's base URL), retried as
    /// the profile's matrix says, with the client's budget, token, limiters and retry budget.
    ///
    /// ```no_run
    /// # async fn run(client: hodoflow_retry::RetryingClient, draft: hodoflow_retry::Profile)
    /// # -> hodoflow_retry::Result<()> {
    /// use hodoflow_retry::IdempotencyKey;
    /// use http::Method;
    ///
    /// let order = client
    ///     .request(draft, Method::POST, "/orders")
    ///     .idempotency_key(IdempotencyKey::from_operation_id("order-4711"))
    ///     .body(r#"{"sku":"a-1"}"#)
    ///     .send()
    ///     .await?;
    /// assert!(order.status().is_success());
    /// # Ok(())
    /// # }
    /// ```
    pub fn request(&self, profile: impl Into<Profile>, method: Method, path: &str) -> Request<'_> {
        Request {
            shared: &self.inner,
            profile: profile.into(),
            method,
            path: path.to_owned(),
            key: None,
            body: Bytes::new(),
            options: CallOptions::of(&self.inner),
        }
    }
}

/// A request of a [`Profile`], sent with [`send`](Request::send).
#[must_use = "a request does nothing until it is sent"]
pub struct Request<'a> {
    shared: &'a Shared,
    profile: Profile,
    method: Method,
    path: String,
    key: Option<IdempotencyKey>,
    body: Bytes,
    options: CallOptions,
}

impl fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("profile", &self.profile)
            .field("method", &self.method)
            .field("key", &self.key)
            .field("body", &BodyLen(self.body.len()))
            .finish_non_exhaustive()
    }
}

impl Request<'_> {
    /// The key sent on every attempt. Give the operation's own (derived from your ID for it)
    /// so that a later resend of the same operation, after this call ended, is safe too.
    ///
    /// Default: a random key for this call, when the profile sends keys.
    pub fn idempotency_key(mut self, key: IdempotencyKey) -> Self {
        self.key = Some(key);
        self
    }

    /// The body, sent as these bytes on every attempt. Without a `Content-Type` header it is
    /// sent as `application/json`.
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Adds headers, sent unchanged on every attempt. `Authorization` and the profile's key
    /// header are the client's own and refused.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        self.options.headers.extend(headers);
        self
    }

    per_call_setters!("request");

    /// Sends the request, retrying as the profile's matrix says.
    ///
    /// # Errors
    ///
    /// An [`Error`] whose [`kind`](Error::kind) says why it stopped and whose
    /// [`may_have_run`](Error::may_have_run) says whether the operation may have taken effect;
    /// `invalid_input`, with nothing sent, for a bad path, a refused header, a key the profile
    /// refuses or a key given to a profile that sends none.
    pub async fn send(self) -> Result<Response> {
        let shared = self.shared;
        let (request, policy) = self.fixed()?;
        send_for_response(shared, request, policy).await
    }

    fn fixed(self) -> Result<(FixedRequest, std::sync::Arc<crate::core::engine::Policy>)> {
        let table = self.profile.table();
        let keys = &table.vendor.keys;
        let url = url_of(&self.shared.base, &self.path)?;
        let mut headers = HeaderMap::new();
        add_headers(&mut headers, &self.options.headers)?;
        if headers.contains_key(&keys.header) {
            return Err(Error::invalid_input(format!(
                "the {} header is the client's own: give the key with idempotency_key",
                keys.header
            )));
        }
        let key = match (table.sends_key, self.key) {
            (true, key) => Some(key.unwrap_or_else(IdempotencyKey::random)),
            (false, None) => None,
            (false, Some(_)) => {
                return Err(Error::invalid_input(format!(
                    "profile {} sends no key: this request takes none",
                    table.name
                )));
            }
        };
        if let Some(key) = &key {
            keys.check(key)?;
            headers.insert(keys.header.clone(), key.to_header_value());
        }
        if !self.body.is_empty() {
            content_type(&mut headers, "application/json");
        }
        let request = FixedRequest::new(
            table,
            self.method,
            url,
            // Logs show the path without its query, and without a trigger token (a webhook
            // path sent through a profile is still a secret's path).
            route_of(&self.path),
            headers,
            self.body,
            key.as_ref(),
        );
        Ok((request, self.options.policy))
    }
}

impl RetryingClient {
    /// Checks `path` as [`request`](Self::request) does before it sends anything: a single
    /// leading `/`, no backslash or control character, no `.` or `..` segment in any encoding. For a sender that keeps
    /// requests to send later (an outbox checks each before storing it).
    ///
    /// # Errors
    ///
    /// `invalid_input`, saying what is wrong.
    pub fn check_path(path: &str) -> Result<()> {
        crate::core::request::normalize_path(path).map(drop)
    }

    /// How long the service `profile` speaks for (Hodoflow's webhook ingestion for
    /// [`Surface::Webhook`](crate::Surface::Webhook), its JSON:API for writes, reads and
    /// GraphQL, Modulify's API, a vendor of your own) has been down, from the onset of its
    /// outage, as this client's retry budget tells from that service's own answers; `None`
    /// while it is up. Once this passes one call's budget, a sender can stop starting calls to
    /// that service (the CLI's `batch` and the outbox's workers do): none started now could
    /// ride the outage out. Another service's outage never shows here.
    pub fn service_down_for(&self, profile: impl Into<Profile>) -> Option<Duration> {
        let engine = &self.inner.engine;
        engine.limits.retry_budget.service_down_for(ServiceKey {
            endpoint: engine.endpoint.id,
            name: profile.into().table().scopes.service,
        })
    }
}
