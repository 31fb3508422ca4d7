//! The server: routes, the observing and fault-injecting middleware, and an
//! accept loop that can close a connection without answering.
//!
//! One port serves HTTP/1.1 and HTTP/2 with prior knowledge (h2c): hyper-util's auto builder
//! reads the first bytes of a connection and picks the protocol.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tower::ServiceExt;

use crate::clock::{Clock, SystemClock};
use crate::config::{ClientSeed, Limits, ModulifyTokenSeed, TriggerSeed};
use crate::fault::{Fault, FaultAction};
use crate::gate::Denial;
use crate::ledger::{Ledger, RequestRecord};
use crate::modulify::ToolSeed;
use crate::modulify::store::ModulifySeeds;
use crate::redact::redact_path;
use crate::state::Shared;

/// Marks a response that must not be sent: over HTTP/1.1 the connection is closed instead;
/// over HTTP/2 the stream is reset, with `REFUSED_STREAM` when `refused` (nothing was
/// processed) and `INTERNAL_ERROR` otherwise.
#[derive(Debug, Clone, Copy)]
struct CloseConnection {
    refused: bool,
}

/// The error the accept loop hands hyper so it drops the answer: hyper closes an HTTP/1.1
/// connection, and resets an HTTP/2 stream with the reason of the `h2::Error` in the source
/// chain (`INTERNAL_ERROR` when there is none).
#[derive(Debug)]
struct ConnectionDropped(Option<h2::Error>);

impl fmt::Display for ConnectionDropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("answer dropped by an injected fault")
    }
}

impl std::error::Error for ConnectionDropped {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.as_ref().map(|e| e as _)
    }
}

/// The HTTP/2 connection window: room for 10,000 unread 1 KiB bodies and more.
const H2_CONNECTION_WINDOW: u32 = 64 << 20;

/// Builds a [`MockServer`].
#[derive(Debug)]
#[must_use]
pub struct MockServerBuilder {
    listen: SocketAddr,
    limits: Limits,
    clock: Arc<dyn Clock>,
    clients: Vec<ClientSeed>,
    triggers: Vec<TriggerSeed>,
    modulify: ModulifySeeds,
    control_routes: bool,
    http1: bool,
}

impl Default for MockServerBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl MockServerBuilder {
    /// A server on `127.0.0.1:0` with the documented limits, the real clock,
    /// and the demo client and trigger unless others are added.
    pub fn new() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            limits: Limits::default(),
            clock: Arc::new(SystemClock),
            clients: Vec::new(),
            triggers: Vec::new(),
            modulify: ModulifySeeds::default(),
            control_routes: false,
            http1: true,
        }
    }

    /// The address to listen on. Default: `127.0.0.1:0`.
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Every limit and window. Default: [`Limits::default`].
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The clock of every window. Default: [`SystemClock`].
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Adds a client. Default: only [`ClientSeed::demo`].
    pub fn client(mut self, client: ClientSeed) -> Self {
        self.clients.push(client);
        self
    }

    /// Adds a trigger. Default: only [`TriggerSeed::demo`].
    pub fn trigger(mut self, trigger: TriggerSeed) -> Self {
        self.triggers.push(trigger);
        self
    }

    /// Adds a Modulify API token. Default: only
    /// [`DEMO_MODULIFY_TOKEN`](crate::DEMO_MODULIFY_TOKEN), which is always accepted and may
    /// call every method.
    pub fn modulify_token(mut self, token: ModulifyTokenSeed) -> Self {
        self.modulify.tokens.push(token);
        self
    }

    /// Adds a method to the Modulify catalogue, or replaces the entry of a reference method
    /// with the same name. Default: only the reference methods.
    pub fn modulify_tool(mut self, tool: ToolSeed) -> Self {
        self.modulify.tools.push(tool);
        self
    }

    /// Serves `/_mock/faults` and `/_mock/ledger` for fault injection over HTTP.
    /// Default: off.
    pub fn control_routes(mut self, enabled: bool) -> Self {
        self.control_routes = enabled;
        self
    }

    /// Serves HTTP/1.1 beside HTTP/2 with prior knowledge (h2c). Off, only h2c is served, so a
    /// client that was meant to speak HTTP/2 and fell back to HTTP/1.1 fails loudly.
    /// Default: on.
    pub fn http1(mut self, enabled: bool) -> Self {
        self.http1 = enabled;
        self
    }

    /// Binds and starts serving in the background.
    ///
    /// # Errors
    ///
    /// When the address cannot be bound.
    pub async fn start(mut self) -> io::Result<MockServer> {
        if self.clients.is_empty() {
            self.clients.push(ClientSeed::demo());
        }
        if self.triggers.is_empty() {
            self.triggers.push(TriggerSeed::demo());
        }
        let shared = Arc::new(Shared::new(
            self.clock,
            self.limits,
            self.clients,
            self.triggers,
            self.modulify,
        ));
        let app = app(shared.clone(), self.control_routes);
        let listener = bind(self.listen)?;
        let addr = listener.local_addr()?;
        let mut protocols = auto::Builder::new(TokioExecutor::new());
        // hyper's default of 200 streams would queue a load test's deliveries in the client, and
        // its 1 MiB connection window would stall the bodies of requests held unread (a
        // `delay_then_handle` fault): the client then sends them in slivers as the window
        // reopens, and h2's guard against floods of small DATA frames closes the connection.
        protocols
            .http2()
            .max_concurrent_streams(None)
            .initial_connection_window_size(H2_CONNECTION_WINDOW);
        if !self.http1 {
            protocols = protocols.http2_only();
        }
        let accept = tokio::spawn(accept_loop(
            listener,
            app,
            shared.clone(),
            Arc::new(protocols),
        ));
        Ok(MockServer {
            addr,
            shared,
            accept,
        })
    }
}

/// Every route, behind the middleware that records each request and applies its fault.
fn app(shared: Arc<Shared>, control_routes: bool) -> Router {
    let limits = &shared.limits;
    let body_limit = limits
        .api_body_limit
        .max(limits.webhook_body_limit)
        .max(limits.modulify_body_limit)
        .saturating_mul(2)
        .max(2 << 20);
    let mut app = api_routes()
        .layer(middleware::from_fn_with_state(shared.clone(), observe))
        .layer(DefaultBodyLimit::max(body_limit));
    if control_routes {
        app = app.merge(crate::control::routes());
    }
    app.with_state(shared)
}

fn api_routes() -> Router<Arc<Shared>> {
    use crate::{auth, graphql, jsonapi, modulify, runs, webhook};
    modulify::routes()
        .route("/oauth/token", post(auth::exchange))
        .route("/api/json/v1/workflow_runs/{id}", get(runs::show))
        .route(
            "/api/json/v1/{kind}",
            get(jsonapi::list).post(jsonapi::create),
        )
        .route(
            "/api/json/v1/{kind}/{id}",
            get(jsonapi::show)
                .put(jsonapi::change)
                .patch(jsonapi::change)
                .delete(jsonapi::change),
        )
        .route("/api/graphql", post(graphql::query))
        .route("/api/v1/webhooks/{token}", post(webhook::deliver))
        .route(
            "/api/v1/webhooks/{org}/{token}",
            post(webhook::deliver_legacy),
        )
}

async fn accept_loop(
    listener: TcpListener,
    app: Router,
    shared: Arc<Shared>,
    protocols: Arc<auto::Builder<TokioExecutor>>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (app, shared, protocols) = (app.clone(), shared.clone(), protocols.clone());
        tokio::spawn(async move {
            if shared.go_aways.load(Ordering::Relaxed) > 0
                && crate::goaway::is_h2c(&stream).await
                && take_one(&shared.go_aways)
            {
                let refusing = || crate::lock(&shared.ledger).went_away();
                if let Ok(stream) = crate::goaway::refuse(stream, refusing).await {
                    crate::goaway::drain(stream).await;
                }
                return;
            }
            let service = hyper::service::service_fn(move |request| {
                let app = app.clone();
                async move {
                    let response = match app.oneshot(request).await {
                        Ok(response) => response,
                        Err(never) => match never {},
                    };
                    if let Some(close) = response.extensions().get::<CloseConnection>() {
                        let reason = close
                            .refused
                            .then(|| h2::Error::from(h2::Reason::REFUSED_STREAM));
                        return Err(ConnectionDropped(reason));
                    }
                    Ok::<_, ConnectionDropped>(response)
                }
            });
            // An error here is a closed connection or a reset stream, injected or the client's.
            let _ = protocols
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Takes one from `counter` unless it is zero.
fn take_one(counter: &std::sync::atomic::AtomicU32) -> bool {
    counter
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

fn closed() -> Response {
    dropped(false)
}

/// An answer that is never sent: see [`CloseConnection`].
fn dropped(refused: bool) -> Response {
    let mut response = StatusCode::INTERNAL_SERVER_ERROR.into_response();
    response
        .extensions_mut()
        .insert(CloseConnection { refused });
    response
}

/// Records the request in the ledger, applies a matching fault, stamps
/// `x-request-id`, records the answer and logs one redacted line.
async fn observe(State(shared): State<Arc<Shared>>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let request_id = format!("req_{}", uuid::Uuid::new_v4().simple());
    let method = request.method().as_str().to_owned();
    let raw_path = request.uri().path().to_owned();
    let path = redact_path(&raw_path);
    let action = crate::lock(&shared.faults).take(&method, &raw_path);
    let fault = action.as_ref().map(|a| a.name());
    let seq = crate::lock(&shared.ledger).push_request(RequestRecord {
        seq: 0,
        method: method.clone(),
        path: path.clone(),
        arrived: started,
        at: shared.clock.now(),
        request_id: request_id.clone(),
        idempotency_key: request
            .headers()
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        status: None,
        fault: fault.map(str::to_owned),
        version: format!("{:?}", request.version()),
    });
    let mut response = match &action {
        None => next.run(request).await,
        Some(FaultAction::Respond {
            status,
            headers,
            body,
        }) => respond(*status, headers, body),
        Some(FaultAction::CloseBeforeExecute) => closed(),
        Some(FaultAction::RefuseStream) => dropped(true),
        Some(FaultAction::ExecuteThenClose) => {
            next.run(request).await;
            closed()
        }
        Some(FaultAction::ExecuteThenDelay { delay_ms }) => {
            let response = next.run(request).await;
            tokio::time::sleep(*delay_ms).await;
            response
        }
        Some(FaultAction::DelayThenHandle { delay_ms }) => {
            tokio::time::sleep(*delay_ms).await;
            next.run(request).await
        }
        Some(FaultAction::ExpiredToken) => {
            if raw_path.starts_with("/v1/") {
                crate::modulify::unauthorized()
            } else if raw_path.starts_with("/api/v1/webhooks/") {
                Denial::Expired.webhook_response()
            } else {
                Denial::Expired.api_response()
            }
        }
        Some(
            execution @ (FaultAction::SlowExecution { .. }
            | FaultAction::FailExecution { .. }
            | FaultAction::SkewedClock { .. }
            | FaultAction::RotatedSecret
            | FaultAction::StatedExpiresIn { .. }
            | FaultAction::IssuedToken { .. }),
        ) => {
            request.extensions_mut().insert(execution.clone());
            next.run(request).await
        }
    };
    let answered = response.extensions().get::<CloseConnection>().is_none();
    let status = answered.then(|| response.status().as_u16());
    crate::lock(&shared.ledger).answer(seq, status);
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", value);
    }
    tracing::info!(
        target: "hodoflow_mock::request",
        %method,
        %path,
        status = status.map_or_else(|| "closed".to_owned(), |s| s.to_string()),
        %request_id,
        fault = fault.unwrap_or("-"),
        elapsed_ms = started.elapsed().as_millis() as u64,
    );
    response
}

fn respond(
    status: u16,
    headers: &std::collections::BTreeMap<String, String>,
    body: &str,
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, body.to_owned()).into_response();
    if serde_json::from_str::<serde::de::IgnoredAny>(body).is_ok() {
        response
            .headers_mut()
            .insert("content-type", HeaderValue::from_static("application/json"));
    }
    for (name, value) in headers {
        let name = axum::http::HeaderName::try_from(name.as_str());
        if let (Ok(name), Ok(value)) = (name, HeaderValue::from_str(value)) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// A running contract server. Dropping it stops accepting connections.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use hodoflow_mock::MockServer;
///
/// let server = MockServer::start().await?;
/// assert!(server.base_url().starts_with("http://127.0.0.1:"));
/// assert_eq!(server.ledger().requests().len(), 0);
/// # Ok(())
/// # }
/// ```
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

/// Shows the address only: the state holds secrets and tokens.
impl fmt::Debug for MockServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl MockServer {
    /// A builder with the documented defaults.
    pub fn builder() -> MockServerBuilder {
        MockServerBuilder::new()
    }

    /// Starts a server with the defaults and the demo seeds on `127.0.0.1:0`.
    ///
    /// # Errors
    ///
    /// When the address cannot be bound.
    pub async fn start() -> io::Result<Self> {
        MockServerBuilder::new().start().await
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://<addr>/v1/<method>`, a Modulify method.
    pub fn modulify_url(&self, method: &str) -> String {
        format!("{}/v1/{method}", self.base_url())
    }

    /// The token-only trigger URL of `token`.
    pub fn webhook_url(&self, token: &str) -> String {
        format!("{}/api/v1/webhooks/{token}", self.base_url())
    }

    /// Arms a fault.
    pub fn inject(&self, fault: Fault) {
        crate::lock(&self.shared.faults).push(fault);
    }

    /// The next `n` HTTP/2 connections are refused with `GOAWAY` naming last stream ID 0, below
    /// their first request's, and closed: RFC 9113 section 6.8 says such a request was not
    /// processed, so a client may send it again on a new connection. Nothing reaches the
    /// routes or the ledger's requests; [`Ledger::go_aways`] counts them. HTTP/1.1
    /// connections are served as usual and do not count.
    pub fn go_away_connections(&self, n: u32) {
        self.shared.go_aways.store(n, Ordering::Relaxed);
    }

    /// Disarms every fault.
    pub fn clear_faults(&self) {
        crate::lock(&self.shared.faults).clear();
    }

    /// A copy of the ledger as it is now.
    pub fn ledger(&self) -> Ledger {
        crate::lock(&self.shared.ledger).clone()
    }

    /// Adds a trigger, or replaces the one with the same token (e.g. to deactivate it).
    pub fn put_trigger(&self, trigger: TriggerSeed) {
        crate::lock(&self.shared.triggers).insert(trigger.token.clone(), trigger);
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The most connections waiting to be accepted that the server asks the kernel for (which caps
/// it at `net.core.somaxconn`, 4,096 on Linux): tokio's `bind` asks for 1,024, and thousands of
/// connections opened at once overflowed it, each then waiting out the client's SYN retries
/// (1 s, 3 s, 7 s, ...), which spread a test's simultaneous requests over tens of seconds.
const ACCEPT_BACKLOG: u32 = 65_535;

/// A listener on `addr` with [`ACCEPT_BACKLOG`].
fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

#[cfg(test)]
mod tests {
    //! The delay faults in virtual time: the middleware sleeps on tokio's clock, so under
    //! `start_paused` a hold is exact, and what happened before it ends can be read from the
    //! ledger. (Over TCP, `tests/faults.rs` checks what each fault does, not for how long.)

    use std::time::Duration;

    use axum::body::Body;
    use tokio::time::Instant;

    use super::*;
    use crate::config::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET};

    /// The server's state with the demo seeds and `fault` armed, and its routes.
    fn armed(fault: Fault) -> (Arc<Shared>, Router) {
        let shared = Arc::new(Shared::new(
            Arc::new(SystemClock),
            Limits::default(),
            vec![ClientSeed::demo()],
            vec![TriggerSeed::demo()],
            ModulifySeeds::default(),
        ));
        crate::lock(&shared.faults).push(fault.on("POST", "/oauth/token"));
        let routes = app(shared.clone(), false);
        (shared, routes)
    }

    /// A token exchange with the demo credentials.
    fn exchange() -> Request {
        let form = format!(
            "grant_type=client_credentials&client_id={DEMO_CLIENT_ID}&client_secret={DEMO_CLIENT_SECRET}"
        );
        Request::builder()
            .method("POST")
            .uri("/oauth/token")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from(form))
            .unwrap()
    }

    /// Whether the exchange ran (the ledger holds it) and whether it was answered.
    fn ran_and_answered(shared: &Shared) -> (bool, bool) {
        let ledger = crate::lock(&shared.ledger);
        assert_eq!(ledger.requests().len(), 1, "the request arrived at once");
        let answered = ledger.requests()[0].status.is_some();
        (!ledger.exchanges().is_empty(), answered)
    }

    const DELAY: Duration = Duration::from_millis(150);

    #[tokio::test(start_paused = true)]
    async fn delay_then_handle_runs_the_request_only_once_its_delay_has_passed() {
        let (shared, routes) = armed(Fault::delay_then_handle(DELAY));
        let started = Instant::now();
        let answer = tokio::spawn(routes.oneshot(exchange()));
        tokio::time::sleep(DELAY - Duration::from_millis(1)).await;
        assert_eq!(ran_and_answered(&shared), (false, false), "still held");

        let answer = answer.await.unwrap().unwrap();
        assert_eq!(started.elapsed(), DELAY);
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(ran_and_answered(&shared), (true, true));
    }

    #[tokio::test(start_paused = true)]
    async fn execute_then_delay_runs_the_request_at_once_and_holds_its_answer_the_delay() {
        let (shared, routes) = armed(Fault::execute_then_delay(DELAY));
        let started = Instant::now();
        let answer = tokio::spawn(routes.oneshot(exchange()));
        tokio::time::sleep(DELAY - Duration::from_millis(1)).await;
        assert_eq!(ran_and_answered(&shared), (true, false), "ran, answer held");

        let answer = answer.await.unwrap().unwrap();
        assert_eq!(started.elapsed(), DELAY);
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(ran_and_answered(&shared), (true, true));
    }
}
