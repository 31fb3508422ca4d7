//! Shared by the integration tests: a contract server on 127.0.0.1:0, clients for it, and the
//! assertions every feature file makes about outcomes, attempts and the server's ledger.

#![allow(dead_code, reason = "each test file uses a part of the support module")]

use std::cell::Cell;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod echo;
pub mod hostile;

use hodoflow_mock::{
    ClientSeed, DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANIZATION, Limits, MockServer,
    MockServerBuilder, Scope,
};
use hodoflow_retry::{
    Backoff, Budget, DeliveryId, Error, ErrorKind, HodoflowClient, IdempotencyKey, ModulifyClient,
    attempt::Attempt,
    auth::{AccessToken, ClientCredentials, ExchangeFuture, TokenExchanger},
    hodoflow::HodoflowBuilder,
    modulify::ModulifyBuilder,
    webhook::Delivery,
};
use tracing_subscriber::fmt::MakeWriter;

/// The demo webhook trigger's token.
pub const TRIGGER: &str = hodoflow_mock::DEMO_TRIGGER_TOKEN;

/// The JSON:API collection the tests write to.
pub const PROJECTS: &str = "/api/json/v1/projects";
/// The path prefix of every JSON:API route, for faults and ledger queries.
pub const JSON_API: &str = "/api/json/";
/// The path prefix of both webhook routes, for faults and ledger queries.
pub const WEBHOOKS: &str = "/api/v1/webhooks/";
/// The token endpoint.
pub const TOKEN: &str = "/oauth/token";
/// The GraphQL route.
pub const GRAPHQL: &str = "/api/graphql";

/// The protocol a test's clients and servers speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 on plain TCP, the default.
    Http1,
    /// HTTP/2 with prior knowledge on plain TCP; the servers refuse HTTP/1.1, so a client that
    /// fell back to it fails the test.
    H2c,
}

thread_local! {
    static PROTOCOL: Cell<Protocol> = const { Cell::new(Protocol::Http1) };
}

/// The protocol of the running test: HTTP/1.1, or h2c under [`over_h2c!`].
pub fn protocol() -> Protocol {
    PROTOCOL.with(Cell::get)
}

/// Runs `test`, a `#[tokio::test]` function (it starts its runtime and runs its body on this
/// thread), with `protocol` for every server and client the support module makes for it.
pub fn run_over(protocol: Protocol, test: fn()) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            PROTOCOL.with(|cell| cell.set(Protocol::Http1));
        }
    }
    PROTOCOL.with(|cell| cell.set(protocol));
    let _reset = Reset;
    test();
}

/// Runs each named `#[tokio::test]` of the file a second time, as `over_h2c::<name>`, with its
/// servers and clients on HTTP/2 with prior knowledge. A test that builds its clients or servers
/// without the support module stays on HTTP/1.1 and fails under h2c: use `builder`,
/// `server_with` and `http_client`.
#[allow(unused_macros, reason = "not every test file runs over h2c")]
macro_rules! over_h2c {
    ($($test:ident),+ $(,)?) => {
        mod over_h2c {
            $(
                #[test]
                fn $test() {
                    crate::support::run_over(crate::support::Protocol::H2c, super::$test);
                }
            )+
        }
    };
}
#[allow(unused_imports, reason = "not every test file runs over h2c")]
pub(crate) use over_h2c;

/// A reqwest client as the SDK builds it, speaking [`protocol`], for exchangers and checks that
/// need their own.
pub fn http_client() -> reqwest::Client {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never());
    match protocol() {
        Protocol::Http1 => builder,
        Protocol::H2c => builder.http2_prior_knowledge(),
    }
    .build()
    .expect("a reqwest client")
}

/// Millisecond backoff, so real-socket tests stay fast.
pub fn fast_backoff() -> Backoff {
    Backoff::new()
        .base(Duration::from_millis(5))
        .cap(Duration::from_millis(40))
}

/// A budget of `attempts` with room to spare in time.
pub fn budget(attempts: u32) -> Budget {
    Budget::new()
        .max_attempts(attempts)
        .max_elapsed(Duration::from_secs(20))
        .attempt_timeout(Duration::from_secs(5))
}

/// Limits with millisecond workflow runs.
pub fn fast_limits() -> Limits {
    Limits {
        run_queued_for: Duration::from_millis(20),
        run_running_for: Duration::from_millis(40),
        ..Limits::default()
    }
}

/// A server with the demo seeds and fast runs.
pub async fn server() -> MockServer {
    server_with(MockServer::builder().limits(fast_limits())).await
}

/// A server from `builder`, serving only h2c when the test runs over it.
pub async fn server_with(builder: MockServerBuilder) -> MockServer {
    builder
        .http1(protocol() == Protocol::Http1)
        .start()
        .await
        .expect("the contract server starts on 127.0.0.1:0")
}

/// A server with the demo seeds and [`fast_limits`] as `change` leaves them.
pub async fn server_where(change: impl FnOnce(&mut Limits)) -> MockServer {
    let mut limits = fast_limits();
    change(&mut limits);
    server_with(MockServer::builder().limits(limits)).await
}

/// A builder for `server` with fast backoff and a 5-attempt budget, but no token source yet,
/// speaking the test's [`protocol`].
pub fn builder(server: &MockServer) -> HodoflowBuilder {
    builder_for(server, protocol())
}

/// [`builder`] speaking `protocol`.
pub fn builder_for(server: &MockServer, protocol: Protocol) -> HodoflowBuilder {
    let builder = HodoflowClient::builder(server.base_url())
        .backoff(fast_backoff())
        .budget(budget(5));
    match protocol {
        Protocol::Http1 => builder,
        Protocol::H2c => builder.http2_prior_knowledge(),
    }
}

/// A Modulify client builder for `server` with fast backoff and a 5-attempt budget, but no token
/// yet, speaking the test's [`protocol`].
pub fn modulify_builder(server: &MockServer) -> ModulifyBuilder {
    let builder = ModulifyClient::builder(server.base_url())
        .backoff(fast_backoff())
        .budget(budget(5));
    match protocol() {
        Protocol::Http1 => builder,
        Protocol::H2c => builder.http2_prior_knowledge(),
    }
}

/// A client of `server` with the demo credentials, fast backoff and a 5-attempt budget.
pub fn client(server: &MockServer) -> HodoflowClient {
    client_with(server, budget(5))
}

/// A client of `server` with `budget`.
pub fn client_with(server: &MockServer, budget: Budget) -> HodoflowClient {
    demo(builder(server).budget(budget))
}

/// Builds a client from `builder` with the demo credentials.
pub fn demo(builder: HodoflowBuilder) -> HodoflowClient {
    builder
        .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .build()
        .expect("a valid client")
}

/// A server whose only service account may be granted no more than `scopes`, and a client of it.
pub async fn scoped(scopes: &[Scope]) -> (MockServer, HodoflowClient) {
    const ID: &str = "scoped-client";
    const SECRET: &str = "scoped-secret";
    let account = ClientSeed::new(ID, SECRET, DEMO_ORGANIZATION).scopes(scopes);
    let server = server_with(MockServer::builder().client(account)).await;
    let client = builder(&server)
        .client_credentials(ID, SECRET)
        .build()
        .expect("a valid client");
    (server, client)
}

/// A token exchanger that hands out a token no server issued, without asking any.
#[derive(Debug)]
pub struct Forged;

impl TokenExchanger for Forged {
    fn exchange(&self) -> ExchangeFuture<'_> {
        let token = AccessToken::expiring_in("hft_forged", Duration::from_secs(600));
        Box::pin(async { Ok(token) })
    }
}

/// The body of a webhook event.
pub const EVENT: &[u8] = br#"{"order":4711,"event":"shipped"}"#;

/// Delivers [`EVENT`] to the demo trigger as the business event `event`, and expects it taken.
pub async fn deliver(client: &HodoflowClient, event: &str) -> Delivery {
    client
        .deliver(TRIGGER, EVENT)
        .delivery_id(delivery(event))
        .send()
        .await
        .expect("the delivery is taken")
}

/// The identity the server's ledger keys `delivery` by.
pub fn identity(delivery: &Delivery) -> String {
    delivery.delivery_id().key().as_str().to_owned()
}

/// The run an accepted `delivery` started.
pub fn run_id(delivery: &Delivery) -> String {
    let run_id = delivery.run_id().expect("accepted with a run ID");
    run_id.to_owned()
}

/// The idempotency key of a business operation.
pub fn key(operation: &str) -> IdempotencyKey {
    IdempotencyKey::from_operation_id(operation)
}

/// The delivery ID of a business event, sent as `Idempotency-Key`.
pub fn delivery(event: &str) -> DeliveryId {
    DeliveryId::new(key(event))
}

/// A JSON:API document that creates a project called `name`.
pub fn project(name: &str) -> String {
    format!(r#"{{"data":{{"type":"projects","attributes":{{"name":"{name}"}}}}}}"#)
}

/// The status of each attempt; `None` where no answer came back.
pub fn statuses(attempts: &[Attempt]) -> Vec<Option<u16>> {
    attempts
        .iter()
        .map(|attempt| attempt.status().map(|status| status.as_u16()))
        .collect()
}

/// The error stopped after its single attempt with `kind`, on a definite answer: the operation
/// did not run, and the server saw no request after the one that was refused.
#[track_caller]
pub fn assert_stopped_at_once(error: &Error, kind: ErrorKind, server: &MockServer) {
    assert_eq!(error.kind(), kind, "{error}");
    assert_eq!(error.attempts().len(), 1, "exactly one attempt: {error:?}");
    assert!(!error.may_have_run(), "a definite answer: {error:?}");
    let ledger = server.ledger();
    let last = ledger
        .requests()
        .iter()
        .rev()
        .find(|request| request.path != TOKEN)
        .expect("the refused request reached the server");
    assert_eq!(Some(last.request_id.as_str()), error.request_id());
    assert_eq!(last.status, error.status().map(|status| status.as_u16()));
}

/// The error came after `attempts` attempts that were all sent and never answered: the operation
/// may have run.
#[track_caller]
pub fn assert_every_answer_lost(error: &Error, attempts: usize) {
    assert_eq!(error.kind(), ErrorKind::Transport, "{error}");
    assert!(error.may_have_run(), "sent, and no answer came back");
    assert_eq!(statuses(error.attempts()), vec![None; attempts]);
}

/// The error was raised before anything was sent: no attempt, and no request, not even a token
/// exchange, reached the server.
#[track_caller]
pub fn assert_nothing_sent(error: &Error, kind: ErrorKind, server: &MockServer) {
    assert_eq!(error.kind(), kind, "{error}");
    assert!(error.attempts().is_empty(), "{error:?}");
    assert!(!error.may_have_run(), "{error:?}");
    let ledger = server.ledger();
    assert!(ledger.requests().is_empty(), "{:?}", ledger.requests());
    assert!(ledger.exchanges().is_empty(), "{:?}", ledger.exchanges());
}

/// Polls `condition` every few milliseconds until it holds; panics after 10 s.
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < give_up, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Everything a tracing subscriber wrote, for the tests that prove no secret is logged.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Captures every event and span at `level` and below on this thread until the guard drops.
    pub fn on_this_thread(level: tracing::Level) -> (Self, tracing::subscriber::DefaultGuard) {
        let captured = Self::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(captured.clone())
            .finish();
        (captured, tracing::subscriber::set_default(subscriber))
    }

    /// Captures every event and span at `level` and below on every thread, for the rest of the
    /// process: once per test binary. A thread's own subscriber can miss a library's events
    /// (a callsite that first registered with no subscriber listening keeps a cached "never").
    pub fn everywhere(level: tracing::Level) -> Self {
        let captured = Self::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(captured.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("one global subscriber per test binary");
        captured
    }

    /// What was written so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Client credentials that remember every token they were issued.
pub struct Recording {
    /// The real exchanger.
    pub inner: ClientCredentials,
    /// Every access token issued, in order.
    pub tokens: Arc<Mutex<Vec<String>>>,
}

impl TokenExchanger for Recording {
    fn exchange(&self) -> ExchangeFuture<'_> {
        Box::pin(async move {
            let token = self.inner.exchange().await?;
            let secret = token.secret().expose().to_owned();
            self.tokens.lock().unwrap().push(secret);
            Ok(token)
        })
    }
}
