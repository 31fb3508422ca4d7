//! The outbox's status page: `outbox serve --listen ADDR`, or `outbox worker --admin ADDR`
//! beside the workers.
//!
//! Server-rendered HTML, no front-end build step and no script at all: plain links and forms,
//! a stylesheet at `/style.css`, and the backlog chart as inline SVG drawn here.
//!
//! | Route | What |
//! | --- | --- |
//! | `GET /` | counts by state, the backlog over the last hour, every paused scope (which one, until when, why), every service the workers hold down (since when, the next probe), the failed and needs-reconciliation jobs (50 a page, `?state=S&after=CURSOR`) |
//! | `GET /jobs/{event_id}` | one job: every stored field that is safe to show |
//! | `POST /jobs/{event_id}/retry` | what `outbox retry` does, then 303 back |
//! | `POST /login`, `POST /logout` | the admin token, for this browser's session |
//! | `GET /ready` | 200 when the store answers (its migrations ran when it was opened), else 503 |
//! | `GET /style.css` | the stylesheet |
//! | `GET /metrics` | the outbox's figures (and, beside a worker, its client's) in the OpenMetrics text format, for Prometheus (`hodoflow_retry::metrics`) |
//!
//! `/metrics` is open like the pages: on loopback to anyone, elsewhere only with the admin
//! token (Prometheus sends it with `authorization: {type: Bearer, credentials_file: …}`).
//!
//! A job's path is `/jobs/` and its event ID percent-encoded as one path segment, with a `~`
//! in front when the ID is `.` or `..` or starts with `~` (a browser resolves a dot segment
//! away, even percent-encoded, so `/jobs/~..` stands for the job `..`).
//!
//! # Security model
//!
//! The page can requeue deliveries, so:
//! - It binds to loopback by default (`127.0.0.1:8089`). Any other address needs
//!   `--admin-token-file FILE`, else the command refuses to start (exit 2). The token must be
//!   strong (`secret.rs`: 16 characters or more, and about 60 bits by a conservative estimate,
//!   so `aaaaaaaaaaaaaaaa` is refused at start-up with a way to make one). On a non-loopback
//!   address every page but `/ready` and `/style.css` also needs the token: a browser logs in
//!   first.
//! - It answers only to its own names (`host.rs`): the address a connection came in on,
//!   `localhost`, and each `--admin-host NAME`; any other `Host` gets `421` on every route, so
//!   a web page that rebinds its own name to this address reads nothing.
//! - A requeue always needs the admin token, loopback or not: either the request carries
//!   `Authorization: Bearer <token>` (for scripts; a browser never sends that header on its own,
//!   so no CSRF token is needed then), or the browser logged in through the page's form (which
//!   made it a new session, `session.rs`) and the form carries the session's CSRF token. Without
//!   `--admin-token-file` the page is read-only. The token is compared in constant time and
//!   never logged, stored in a cookie or shown; wrong tokens are throttled per client with a
//!   growing wait (`throttle.rs`).
//! - Reading a page creates no session: anonymous traffic cannot fill the session table or log
//!   an admin out (`session.rs`).
//! - Connections are bounded in number and in time (`listener.rs`): a header-read timeout, an
//!   idle timeout, a request timeout and a cap on connections at once.
//! - No page shows a trigger token, a route holding one, a body, a delivery ID (the identity
//!   key), a client secret or a store password: the fields are chosen one by one (`html.rs`).
//!   What a server said (request IDs, run IDs, error codes) was cleaned of every secret of the
//!   client where the workers' client received it, before it was stored (the SDK's
//!   `redact.rs`), so the page needs to know no secret; stored text still passes this tool's
//!   redaction set, its controls and bidirectional formatting characters are shown escaped
//!   (`\x1b`, `\u{202e}`), it is bounded, and then HTML-escaped.
//! - Every response carries `Content-Security-Policy: default-src 'none'; style-src 'self';
//!   img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'` (no
//!   script may run, inline or not), `X-Content-Type-Options: nosniff`,
//!   `Referrer-Policy: no-referrer` and `Cache-Control: no-store`.
//! - The cookies are `HttpOnly; SameSite=Strict`. They are not `Secure`: the page speaks
//!   plain HTTP; serve a non-loopback page behind a TLS proxy (and name it with
//!   `--admin-host`).
//!
//! # Dependencies
//!
//! axum (already in the workspace as the contract server's, HTTP/1 only, with its form and
//! query extractors) routes the requests; `listener.rs` says why the connections are accepted
//! with hyper directly. The HTML is written with `format!` and one escaping function
//! ([`html::esc`], unit-tested) rather than a template crate: the page is five small views, and
//! askama or maud would add a proc-macro crate to every build of the CLI for them. Every value
//! that is not the page's own text goes through `esc`.

mod host;
mod html;
mod listener;
mod session;
mod throttle;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::extract::{Form, Path as UrlPath, Query, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hodoflow_outbox::{Cursor, JobState, Outbox};
use hodoflow_retry::Secret;
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderValue};
use serde::Deserialize;

pub(crate) use host::Hosts;
use html::{Listing, Viewer};
pub(crate) use listener::Limits;
use listener::Peer;
use session::Sessions;
use throttle::{Judged, Throttle};

/// Jobs per page of a listing.
const PAGE: usize = 50;

/// Points of the backlog chart over [`BACKLOG_SPAN`]: one a minute.
const BACKLOG_POINTS: usize = 61;

/// The time the backlog chart spans, up to now.
const BACKLOG_SPAN: Duration = Duration::from_secs(3600);

/// How long the backlog chart is reused: its statement reads every job not final in the last
/// hour (seconds on a million-job backlog), so a page reloaded often does not repeat it.
const BACKLOG_REUSED_FOR: Duration = Duration::from_secs(15);

/// How long `/ready` waits for the store.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// The security headers' values.
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// A page server, configured, before it binds.
#[derive(Debug)]
pub(crate) struct Admin {
    addr: SocketAddr,
    token: Option<Secret>,
    hosts: Hosts,
    limits: Limits,
}

impl Admin {
    /// Checks `addr` and reads the admin token of `token_file`, before any store is opened;
    /// the page answers to the names `hosts` and keeps within `limits`.
    ///
    /// # Errors
    ///
    /// A usage sentence: a non-loopback address without a token file, or a token file that
    /// cannot be read or holds a weak token (`secret.rs`).
    pub(crate) fn check(
        addr: SocketAddr,
        token_file: Option<&Path>,
        hosts: Hosts,
        limits: Limits,
    ) -> Result<Self, String> {
        let token = token_file.map(crate::secret::admin_token).transpose()?;
        if !addr.ip().is_loopback() && token.is_none() {
            return Err(format!(
                "{addr} is not a loopback address: the status page can requeue deliveries, so \
                 serving it there needs --admin-token-file FILE (a random token, e.g. from \
                 `openssl rand -hex 32`); or listen on 127.0.0.1"
            ));
        }
        Ok(Self {
            addr,
            token,
            hosts,
            limits,
        })
    }

    /// Binds the address; returns the listener and the address it got (port 0: a free one).
    ///
    /// # Errors
    ///
    /// A sentence naming the address, when it cannot be bound.
    pub(crate) async fn bind(&self) -> Result<(tokio::net::TcpListener, SocketAddr), String> {
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .map_err(|e| format!("the status page cannot listen on {}: {e}", self.addr))?;
        let bound = listener
            .local_addr()
            .map_err(|e| format!("the status page's address is not known: {e}"))?;
        Ok((listener, bound))
    }

    /// Serves the page of `outbox` on `listener` until `stop` resolves. `client` is the
    /// workers' client, when they run beside the page (its figures join `/metrics`).
    pub(crate) async fn serve(
        self,
        listener: tokio::net::TcpListener,
        outbox: Outbox,
        client: Option<hodoflow_retry::HodoflowClient>,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let mut metrics = hodoflow_retry::metrics::Metrics::new().source(outbox.clone());
        if let Some(client) = &client {
            metrics = metrics.client(client);
        }
        let app = App {
            outbox,
            metrics,
            open: self.addr.ip().is_loopback(),
            token: self.token,
            hosts: self.hosts,
            sessions: Sessions::default(),
            throttle: Throttle::default(),
            backlog: std::sync::Mutex::default(),
        };
        listener::serve(listener, router(Arc::new(app)), self.limits, stop).await
    }
}

/// What every handler shares.
#[derive(Debug)]
struct App {
    outbox: Outbox,
    /// What `/metrics` shows.
    metrics: hodoflow_retry::metrics::Metrics,
    /// Bound to loopback: the pages are readable without logging in.
    open: bool,
    token: Option<Secret>,
    /// The names the page answers to besides its address and `localhost`.
    hosts: Hosts,
    sessions: Sessions,
    /// Wrong admin tokens, per client.
    throttle: Throttle,
    /// The last backlog read: when, the time of its last point, and its points.
    backlog: std::sync::Mutex<Option<Backlog>>,
}

/// A backlog read: when (to reuse it), the time of its last point, and its points.
type Backlog = (std::time::Instant, SystemTime, Vec<u64>);

impl App {
    /// The backlog over the last hour and the time of its last point, read again when the
    /// last read is older than [`BACKLOG_REUSED_FOR`].
    async fn backlog(&self) -> Result<(SystemTime, Vec<u64>), hodoflow_retry::Error> {
        let last = self
            .backlog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some((at, end, points)) = last
            && at.elapsed() < BACKLOG_REUSED_FOR
        {
            return Ok((end, points));
        }
        let end = SystemTime::now();
        let points = self.outbox.backlog(BACKLOG_SPAN, BACKLOG_POINTS).await?;
        *self.backlog.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((std::time::Instant::now(), end, points.clone()));
        Ok((end, points))
    }

    /// Judges `given`, an admin token a client presented, throttled per client.
    fn judge(&self, peer: &Peer, given: &str) -> Judged {
        let Some(token) = &self.token else {
            return Judged::Wrong;
        };
        self.throttle.judge(peer.remote.ip(), Instant::now(), || {
            session::same(given.trim().as_bytes(), token.expose().as_bytes())
        })
    }
}

/// The page's routes. Every response carries the security headers; every request is checked
/// for the page's own `Host` first, and answered within [`listener::REQUEST`].
fn router(app: Arc<App>) -> Router {
    let pages = Router::new()
        .route("/", get(overview))
        .route("/jobs/{event_id}", get(job))
        .route("/jobs/{event_id}/retry", post(retry))
        .route("/login", post(login))
        .route("/logout", post(logout))
        .route("/ready", get(ready))
        .route("/style.css", get(style));
    with_metrics(pages)
        .fallback(not_found)
        .layer(axum::middleware::from_fn(within_time))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            own_host,
        ))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(app)
}

/// `/metrics`, served from the same listener with the same headers as the pages.
fn with_metrics(router: Router<Arc<App>>) -> Router<Arc<App>> {
    router.route("/metrics", get(metrics))
}

/// A plain-text response.
fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.into(),
    )
        .into_response()
}

/// The OpenMetrics exposition of the outbox (and the client beside it); 503 when the store
/// cannot be read, since a partial page would read as zeros.
async fn metrics(
    State(app): State<Arc<App>>,
    axum::Extension(peer): axum::Extension<Peer>,
    headers: HeaderMap,
) -> Response {
    match bearer(&app, &peer, &headers) {
        Some(Judged::ShutOut(wait)) => return shut_out(wait),
        Some(Judged::Right) => {}
        _ if app.open => {}
        _ => {
            return text(
                StatusCode::UNAUTHORIZED,
                "the metrics need the admin token (Authorization: Bearer)\n",
            );
        }
    }
    match app.metrics.encode().await {
        Ok(body) => (
            [(header::CONTENT_TYPE, hodoflow_retry::metrics::CONTENT_TYPE)],
            body,
        )
            .into_response(),
        Err(error) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the metrics cannot be read: the store failed ({})\n",
                error.kind().as_str()
            ),
        ),
    }
}

/// Adds the security headers to `response`.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Refuses, with `421 Misdirected Request`, a request whose `Host` is not one of the page's
/// names (`host.rs`): on every route.
async fn own_host(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok());
    let allowed = request
        .extensions()
        .get::<Peer>()
        .is_some_and(|peer| app.hosts.allows(host, peer.local));
    if !allowed {
        return text(
            StatusCode::MISDIRECTED_REQUEST,
            "this status page answers only to its own names: the address it listens on, \
             localhost, and each --admin-host NAME\n",
        );
    }
    next.run(request).await
}

/// Answers `408` when a request is not read and answered within [`listener::REQUEST`].
async fn within_time(request: Request, next: Next) -> Response {
    match tokio::time::timeout(listener::REQUEST, next.run(request)).await {
        Ok(response) => response,
        Err(_) => text(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request was not read and answered within {} s\n",
                listener::REQUEST.as_secs()
            ),
        ),
    }
}

/// An HTML response.
fn html_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// `429` for a client shut out after too many wrong admin tokens (`throttle.rs`).
fn shut_out(wait: Duration) -> Response {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let mut response = html_response(
        StatusCode::TOO_MANY_REQUESTS,
        html::message(
            "Too many wrong tokens",
            &format!(
                "Too many wrong admin tokens came from this address: try again in {seconds} s."
            ),
        ),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// The admin token a request carries as `Authorization: Bearer`, judged; `None` without one.
fn bearer(app: &App, peer: &Peer, headers: &HeaderMap) -> Option<Judged> {
    let given = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?;
    Some(app.judge(peer, given))
}

/// Who reads: an admin's session (found by its cookie) or none, the CSRF token the page's forms
/// carry, and the bearer token the request presented.
struct Visit {
    session: Option<(String, session::Session)>,
    /// The session's CSRF token, or the anonymous browser's (`session.rs`); empty when the
    /// page shows no form (it was started without an admin token).
    csrf: String,
    /// The anonymous CSRF token came with the request (not made now).
    csrf_sent: bool,
    /// A `Set-Cookie` for a new anonymous CSRF token.
    set_cookie: Option<String>,
    bearer: Option<Judged>,
}

impl Visit {
    fn of(app: &App, peer: &Peer, headers: &HeaderMap) -> Self {
        let cookies = headers
            .get(header::COOKIE)
            .and_then(|value| value.to_str().ok());
        let bearer = bearer(app, peer, headers);
        let session = app.sessions.find(cookies);
        let mut visit = Self {
            csrf: String::new(),
            csrf_sent: false,
            set_cookie: None,
            bearer,
            session: None,
        };
        if let Some((_, found)) = &session {
            visit.csrf = found.csrf.clone();
        } else if app.token.is_some() {
            match session::csrf_of(cookies) {
                Some(sent) => {
                    visit.csrf = sent.to_owned();
                    visit.csrf_sent = true;
                }
                None => {
                    visit.csrf = session::random_hex();
                    visit.set_cookie = Some(session::set_csrf_cookie(&visit.csrf));
                }
            }
        }
        visit.session = session;
        visit
    }

    /// `429` when the bearer token came from a client shut out for guessing.
    fn shut_out(&self) -> Option<Response> {
        match self.bearer {
            Some(Judged::ShutOut(wait)) => Some(shut_out(wait)),
            _ => None,
        }
    }

    /// Whether this visitor holds the admin token (a logged-in session, or a bearer header).
    fn admin(&self) -> bool {
        self.bearer == Some(Judged::Right) || self.session.is_some()
    }

    fn viewer(&self, app: &App) -> Viewer {
        Viewer {
            csrf: self.csrf.clone(),
            admin: self.admin(),
            retry_enabled: app.token.is_some(),
        }
    }

    /// `response` with the cookie of a new anonymous CSRF token, if one was made.
    fn respond(&self, mut response: Response) -> Response {
        if let Some(cookie) = &self.set_cookie
            && let Ok(value) = HeaderValue::from_str(cookie)
        {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
        response
    }

    /// The login page instead of `page`, when the pages need the token and it is not held.
    fn gate(&self, app: &App) -> Option<Response> {
        if let Some(refused) = self.shut_out() {
            return Some(refused);
        }
        if app.open || self.admin() {
            return None;
        }
        let body = html::page(
            "Log in",
            &format!(
                "<h1>Log in</h1><p>This page is served beyond loopback: the admin token is \
                 needed to read it.</p>{}",
                html::login_form(&self.csrf, "/", "")
            ),
        );
        Some(self.respond(html_response(StatusCode::UNAUTHORIZED, body)))
    }

    /// Whether `csrf` is the token of this session, or of this anonymous browser (sent back
    /// in its cookie).
    fn csrf_ok(&self, csrf: Option<&str>) -> bool {
        let sent = self.session.is_some() || self.csrf_sent;
        sent && !self.csrf.is_empty()
            && csrf.is_some_and(|csrf| session::same(csrf.as_bytes(), self.csrf.as_bytes()))
    }
}

/// A store failure as a page: its kind only (the message may name the database).
fn store_failed(error: &hodoflow_retry::Error) -> Response {
    html_response(
        StatusCode::SERVICE_UNAVAILABLE,
        html::message(
            "Store unavailable",
            &format!(
                "The outbox's store did not answer ({}); reload the page later.",
                error.kind().as_str()
            ),
        ),
    )
}

/// The query of `/`.
#[derive(Debug, Deserialize)]
struct ListQuery {
    state: Option<String>,
    /// The cursor of the job the page starts after (`Outbox::list_page`): a keyset page on
    /// `(state, next_at, id)`, as fast a million jobs deep as on the first page.
    after: Option<String>,
}

async fn overview(
    State(app): State<Arc<App>>,
    axum::Extension(peer): axum::Extension<Peer>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    let visit = Visit::of(&app, &peer, &headers);
    if let Some(gate) = visit.gate(&app) {
        return gate;
    }
    let states = match query.state.as_deref().map(JobState::parse) {
        Some(Some(state)) => vec![state],
        Some(None) => {
            return visit.respond(html_response(
                StatusCode::BAD_REQUEST,
                html::message("Unknown state", "No such job state."),
            ));
        }
        None => vec![JobState::Failed, JobState::NeedsReconciliation],
    };
    // Only a listing of one state pages on.
    let after = match (query.state.is_some(), query.after.as_deref()) {
        (true, Some(text)) => match text.parse::<Cursor>() {
            Ok(cursor) if states.contains(&cursor.state()) => Some(cursor),
            _ => {
                return visit.respond(html_response(
                    StatusCode::BAD_REQUEST,
                    html::message("Unknown page", "No such page of this listing."),
                ));
            }
        },
        _ => None,
    };
    let outbox = &app.outbox;
    let counts = match outbox.counts().await {
        Ok(counts) => counts,
        Err(error) => return visit.respond(store_failed(&error)),
    };
    let backlog = match app.backlog().await {
        Ok(backlog) => backlog,
        Err(error) => return visit.respond(store_failed(&error)),
    };
    let pauses = match outbox.pauses().await {
        Ok(pauses) => pauses,
        Err(error) => return visit.respond(store_failed(&error)),
    };
    let outages = match outbox.outages().await {
        Ok(outages) => outages,
        Err(error) => return visit.respond(store_failed(&error)),
    };
    let mut listings = Vec::new();
    for state in states {
        let (jobs, next) = match outbox.list_page(Some(state), after.as_ref(), PAGE).await {
            Ok(page) => page,
            Err(error) => return visit.respond(store_failed(&error)),
        };
        jobs.iter().for_each(crate::job_line::remember_secret);
        listings.push(Listing {
            state,
            jobs,
            paged: after.is_some(),
            next,
        });
    }
    let chart = html::Chart {
        points: &backlog.1,
        end: backlog.0,
        span: BACKLOG_SPAN,
    };
    let pauses = html::Pauses {
        pauses: &pauses,
        outages: &outages,
        now: SystemTime::now(),
    };
    let body = html::overview(&counts, &chart, &pauses, &listings, &visit.viewer(&app));
    visit.respond(html_response(StatusCode::OK, body))
}

/// The query of a job's page.
#[derive(Debug, Deserialize)]
struct JobQuery {
    requeued: Option<String>,
}

async fn job(
    State(app): State<Arc<App>>,
    axum::Extension(peer): axum::Extension<Peer>,
    UrlPath(segment): UrlPath<String>,
    headers: HeaderMap,
    Query(query): Query<JobQuery>,
) -> Response {
    let visit = Visit::of(&app, &peer, &headers);
    if let Some(gate) = visit.gate(&app) {
        return gate;
    }
    let event_id = html::event_id_of(&segment);
    match app.outbox.job(event_id).await {
        Ok(Some(job)) => {
            crate::job_line::remember_secret(&job);
            let notice = query.requeued.as_deref().map(|how| match how {
                "reconcile" => {
                    "Requeued. It had reached its deduplication horizon without a definite \
                     answer: if the server ran it, this send may start a second run."
                }
                _ => "Requeued: pending and due now.",
            });
            let body = html::job(&job, &visit.viewer(&app), notice);
            visit.respond(html_response(StatusCode::OK, body))
        }
        Ok(None) => visit.respond(html_response(
            StatusCode::NOT_FOUND,
            html::message(
                "No such job",
                &format!("No job with event ID {}.", crate::redact::shown(event_id)),
            ),
        )),
        Err(error) => visit.respond(store_failed(&error)),
    }
}

/// The form of a retry button.
#[derive(Debug, Deserialize)]
struct RetryForm {
    csrf: Option<String>,
    back: Option<String>,
}

async fn retry(
    State(app): State<Arc<App>>,
    axum::Extension(peer): axum::Extension<Peer>,
    UrlPath(segment): UrlPath<String>,
    headers: HeaderMap,
    form: Result<Form<RetryForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    // A script's POST with a bearer token may have no form at all (`curl -X POST`).
    let form = form.map_or(
        RetryForm {
            csrf: None,
            back: None,
        },
        |Form(form)| form,
    );
    let refuse = |status: StatusCode, message: &str| {
        html_response(status, html::message("Not requeued", message))
    };
    if app.token.is_none() {
        return refuse(
            StatusCode::FORBIDDEN,
            "This page is read-only: it was started without --admin-token-file.",
        );
    }
    let visit = Visit::of(&app, &peer, &headers);
    if let Some(refused) = visit.shut_out() {
        return refused;
    }
    if visit.bearer != Some(Judged::Right) {
        if !visit.csrf_ok(form.csrf.as_deref()) {
            return visit.respond(refuse(
                StatusCode::FORBIDDEN,
                "The form is stale or came from elsewhere (its CSRF token does not match this \
                 session): reload the page and press the button again.",
            ));
        }
        if visit.session.is_none() {
            return visit.respond(refuse(
                StatusCode::FORBIDDEN,
                "Requeueing needs the admin token: log in on the page first.",
            ));
        }
    }
    let event_id = html::event_id_of(&segment);
    match crate::requeue::requeue(&app.outbox, event_id).await {
        Ok((_, was)) => {
            let back = match form.back.as_deref() {
                Some("list") => "/".to_owned(),
                _ if was == JobState::NeedsReconciliation => {
                    format!("{}?requeued=reconcile", html::job_href(event_id))
                }
                _ => format!("{}?requeued=1", html::job_href(event_id)),
            };
            visit.respond((StatusCode::SEE_OTHER, [(header::LOCATION, back)]).into_response())
        }
        Err(crate::requeue::Refused::Store(error)) => visit.respond(store_failed(&error)),
        Err(refused) => visit.respond(refuse(StatusCode::CONFLICT, &refused.sentence(event_id))),
    }
}

/// The login form.
#[derive(Debug, Deserialize)]
struct LoginForm {
    csrf: Option<String>,
    token: Option<String>,
    back: Option<String>,
}

async fn login(
    State(app): State<Arc<App>>,
    axum::Extension(peer): axum::Extension<Peer>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let visit = Visit::of(&app, &peer, &headers);
    if app.token.is_none() {
        return visit.respond(html_response(
            StatusCode::FORBIDDEN,
            html::message(
                "Read-only",
                "This page was started without --admin-token-file.",
            ),
        ));
    }
    if !visit.csrf_ok(form.csrf.as_deref()) {
        return visit.respond(html_response(
            StatusCode::FORBIDDEN,
            html::message(
                "Not logged in",
                "The form is stale or came from elsewhere: reload the page and log in again.",
            ),
        ));
    }
    match app.judge(&peer, &form.token.unwrap_or_default()) {
        Judged::ShutOut(wait) => return shut_out(wait),
        Judged::Wrong => {
            return visit.respond(html_response(
                StatusCode::FORBIDDEN,
                html::message("Not logged in", "That is not the admin token."),
            ));
        }
        Judged::Right => {}
    }
    // A new session, a new ID: whatever ID the browser had before is forgotten.
    let (id, _) = app
        .sessions
        .log_in(visit.session.as_ref().map(|(id, _)| id.as_str()));
    let back = form
        .back
        .filter(|back| html::local_page(back))
        .unwrap_or_else(|| "/".to_owned());
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, back)]).into_response();
    if let Ok(cookie) = HeaderValue::from_str(&session::set_cookie(&id)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

async fn logout(
    State(app): State<Arc<App>>,
    axum::Extension(peer): axum::Extension<Peer>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let visit = Visit::of(&app, &peer, &headers);
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    if let Some((id, _)) = &visit.session
        && visit.csrf_ok(form.csrf.as_deref())
    {
        app.sessions.log_out(id);
        if let Ok(cookie) = HeaderValue::from_str(&session::clear_cookie()) {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
    }
    response
}

/// 200 when the store answers a count in time; the store was migrated when it was opened,
/// before the listener was bound.
async fn ready(State(app): State<Arc<App>>) -> Response {
    match tokio::time::timeout(READY_TIMEOUT, app.outbox.counts()).await {
        Ok(Ok(_)) => text(StatusCode::OK, "ready\n"),
        Ok(Err(error)) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: the store failed ({})\n", error.kind().as_str()),
        ),
        Err(_) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the store did not answer in 5 s\n",
        ),
    }
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("style.css"),
    )
        .into_response()
}

async fn not_found() -> Response {
    html_response(
        StatusCode::NOT_FOUND,
        html::message("Not found", "No such page."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_is_served_without_a_token() {
        let check = |addr: &str| {
            Admin::check(
                addr.parse().unwrap(),
                None,
                Hosts::default(),
                Limits::default(),
            )
        };
        assert!(check("127.0.0.1:0").is_ok());
        assert!(check("[::1]:0").is_ok());
        let error = check("0.0.0.0:8089").unwrap_err();
        assert!(error.contains("--admin-token-file"), "{error}");
    }

    /// One HTTP/1.1 GET over a fresh connection: the status line and headers, and the body.
    async fn get(addr: SocketAddr, path: &str, extra: &str) -> (String, String) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        (head.to_owned(), body.to_owned())
    }

    /// Beyond loopback (the address of `App::open`), every page but `/ready` and the
    /// stylesheet needs the admin token: a login page, 401, instead. Served here on loopback
    /// with `open` off, so the test's traffic stays on this machine.
    #[tokio::test]
    async fn beyond_loopback_reading_needs_the_token() {
        let dir = std::env::temp_dir().join(format!(
            "hodoflow-send-page-gate-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let outbox = Outbox::sqlite(dir.join("outbox.db")).await.unwrap();
        let app = App {
            metrics: hodoflow_retry::metrics::Metrics::new().source(outbox.clone()),
            outbox,
            open: false,
            token: Some(Secret::new("gate-token-0123456789")),
            hosts: Hosts::default(),
            sessions: Sessions::default(),
            throttle: Throttle::default(),
            backlog: std::sync::Mutex::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let never = std::future::pending();
            listener::serve(listener, router(Arc::new(app)), Limits::default(), never)
                .await
                .unwrap();
        });

        let (head, body) = get(addr, "/", "").await;
        assert!(head.starts_with("HTTP/1.1 401"), "{head}");
        assert!(
            body.contains("action=\"/login\"") && !body.contains("count-total"),
            "{body}"
        );
        let (head, _) = get(addr, "/jobs/any", "").await;
        assert!(head.starts_with("HTTP/1.1 401"), "{head}");
        let (head, body) = get(addr, "/ready", "").await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body, "ready\n");
        let (head, _) = get(
            addr,
            "/",
            "Authorization: Bearer wrong-token-0123456789\r\n",
        )
        .await;
        assert!(head.starts_with("HTTP/1.1 401"), "{head}");
        let (head, body) = get(addr, "/", "Authorization: Bearer gate-token-0123456789\r\n").await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(body.contains("id=\"count-total\">0<"), "{body}");
        assert!(!body.contains("gate-token"), "the token is never shown");
        let (head, _) = get(addr, "/metrics", "").await;
        assert!(head.starts_with("HTTP/1.1 401"), "{head}");
        let (head, body) = get(
            addr,
            "/metrics",
            "Authorization: Bearer gate-token-0123456789\r\n",
        )
        .await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.contains("application/openmetrics-text"),
            "the exposition's media type: {head}"
        );
        assert!(
            body.contains("\n# EOF"),
            "an OpenMetrics exposition: {body}"
        );
        assert!(!body.contains("gate-token"), "the token is never shown");
        server.abort();
        let _ = std::fs::remove_dir_all(dir);
    }
}
