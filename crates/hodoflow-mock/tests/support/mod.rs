//! Shared helpers of the contract tests: a server on `127.0.0.1:0` and plain
//! reqwest calls to it over real TCP.
//!
//! Each test file compiles this module on its own and uses a part of it.
#![allow(dead_code)]

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hodoflow_mock::{
    DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN, Fault, Ledger, ManualClock, MockServer,
    MockServerBuilder,
};
use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder};
use serde_json::Value;
use tokio::task::JoinHandle;

/// The JSON:API collection most tests write to.
pub const PROJECTS: &str = "/api/json/v1/projects";
/// The JSON:API media type.
pub const JSON_API: &str = "application/vnd.api+json";
/// A second organization, for isolation tests.
pub const OTHER_ORG: &str = "globex";
/// A client of [`OTHER_ORG`].
pub const OTHER_CLIENT: (&str, &str) = ("globex-client", "globex-secret");
/// A trigger of [`OTHER_ORG`].
pub const OTHER_TRIGGER: &str = "trg_globex_77aa";
/// A second client of the demo organization (another service-account principal).
pub const SECOND_CLIENT: (&str, &str) = ("acme-batch", "acme-batch-secret");

pub const MINUTE: Duration = Duration::from_secs(60);
pub const HOUR: Duration = Duration::from_secs(3600);
pub const DAY: Duration = Duration::from_secs(24 * 3600);
pub const SECOND: Duration = Duration::from_secs(1);

/// A plain client that never goes through a proxy.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A plain client whose requests give up after `timeout`.
pub fn http_with_timeout(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .build()
        .unwrap()
}

/// A server with the defaults and the demo seeds.
pub async fn start() -> MockServer {
    MockServer::start().await.unwrap()
}

/// A server with the defaults and the demo seeds, and the demo client with a token.
pub async fn demo() -> (MockServer, Caller) {
    let server = start().await;
    let caller = Caller::demo(&server).await;
    (server, caller)
}

/// A manual clock aligned on a two-hour (and so a day's) boundary, and a
/// builder that uses it.
pub fn clocked() -> (ManualClock, MockServerBuilder) {
    let clock = ManualClock::at(aligned_start());
    (clock.clone(), MockServer::builder().clock(clock))
}

/// 2026-02-17T00:00:00Z, a multiple of two hours since the epoch.
pub fn aligned_start() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_771_286_400)
}

/// The demo client and trigger plus [`SECOND_CLIENT`], and a client and a
/// trigger of [`OTHER_ORG`].
pub fn two_orgs(builder: MockServerBuilder) -> MockServerBuilder {
    use hodoflow_mock::{ClientSeed, TriggerSeed};
    builder
        .client(ClientSeed::demo())
        .client(ClientSeed::new(
            SECOND_CLIENT.0,
            SECOND_CLIENT.1,
            hodoflow_mock::DEMO_ORGANIZATION,
        ))
        .client(ClientSeed::new(OTHER_CLIENT.0, OTHER_CLIENT.1, OTHER_ORG))
        .trigger(TriggerSeed::demo())
        .trigger(TriggerSeed::new(OTHER_TRIGGER, OTHER_ORG))
}

/// An answer read to the end.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `errors[0].code` of a JSON:API error document.
    pub fn api_code(&self) -> String {
        self.json()["errors"][0]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// `errors[0].title` of a JSON:API error document.
    pub fn api_title(&self) -> String {
        self.json()["errors"][0]["title"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The runtime body of a webhook error, `{"error": "..."}`.
    pub fn webhook_error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_default().to_owned()
    }

    /// `status` of a webhook answer: `accepted` or `duplicate`.
    pub fn delivery_status(&self) -> String {
        self.json()["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// `workflow_run_id` of an accepted delivery.
    pub fn run_id(&self) -> Option<String> {
        self.json()["workflow_run_id"].as_str().map(str::to_owned)
    }

    /// `data.id` of a JSON:API document.
    pub fn data_id(&self) -> String {
        self.json()["data"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Whether the answer is a JSON:API replay.
    pub fn replayed(&self) -> bool {
        self.header("idempotency-replayed") == Some("true")
    }

    /// `Retry-After` in delay-seconds.
    pub fn retry_after_secs(&self) -> u64 {
        self.header("retry-after").unwrap().parse().unwrap()
    }

    /// The `x-request-id` the server stamped.
    pub fn request_id(&self) -> &str {
        self.header("x-request-id").unwrap_or_default()
    }
}

/// Sends a request and reads the whole answer; a transport error is returned.
pub async fn try_send(request: RequestBuilder) -> reqwest::Result<Reply> {
    let response = request.send().await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await?;
    Ok(Reply {
        status,
        headers,
        body,
    })
}

/// Sends a request and reads the whole answer.
pub async fn send(request: RequestBuilder) -> Reply {
    try_send(request).await.unwrap()
}

/// `POST /oauth/token` with this form.
pub async fn exchange(server: &MockServer, form: &[(&str, &str)]) -> Reply {
    let url = format!("{}/oauth/token", server.base_url());
    send(http().post(url).form(form)).await
}

/// The form of a client-credentials exchange.
pub fn credentials<'a>(client_id: &'a str, secret: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("grant_type", "client_credentials"),
        ("client_id", client_id),
        ("client_secret", secret),
    ]
}

/// A JSON:API create document of a project.
pub fn project(name: &str) -> String {
    format!(r#"{{"data":{{"type":"projects","attributes":{{"name":"{name}"}}}}}}"#)
}

/// A JSON:API document of a project with an ID, for PUT and PATCH.
pub fn project_update(id: &str, attributes: &str) -> String {
    format!(r#"{{"data":{{"type":"projects","id":"{id}","attributes":{attributes}}}}}"#)
}

/// A JSON document of exactly `size` bytes (at least 8).
pub fn json_of_size(size: usize) -> String {
    format!(r#"{{"p":"{}"}}"#, "x".repeat(size - 8))
}

/// A service account with a bearer token, talking to one server.
#[derive(Debug, Clone)]
pub struct Caller {
    pub base: String,
    pub http: reqwest::Client,
    pub token: String,
    client_id: String,
    secret: String,
    scope: Option<String>,
}

impl Caller {
    /// The demo client with every scope.
    pub async fn demo(server: &MockServer) -> Caller {
        Caller::of(server, DEMO_CLIENT_ID, DEMO_CLIENT_SECRET).await
    }

    /// A seeded client with every scope it may have.
    pub async fn of(server: &MockServer, client_id: &str, secret: &str) -> Caller {
        Caller::new(server, client_id, secret, None).await
    }

    /// The demo client with only `scope` (space separated).
    pub async fn scoped(server: &MockServer, scope: &str) -> Caller {
        Caller::new(server, DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, Some(scope)).await
    }

    async fn new(
        server: &MockServer,
        client_id: &str,
        secret: &str,
        scope: Option<&str>,
    ) -> Caller {
        let mut caller = Caller {
            base: server.base_url(),
            http: http(),
            token: String::new(),
            client_id: client_id.to_owned(),
            secret: secret.to_owned(),
            scope: scope.map(str::to_owned),
        };
        caller.refresh().await;
        caller
    }

    /// Exchanges the credentials again (after the clock passed the token's TTL).
    pub async fn refresh(&mut self) {
        let mut form = credentials(&self.client_id, &self.secret);
        if let Some(scope) = &self.scope {
            form.push(("scope", scope));
        }
        let url = format!("{}/oauth/token", self.base);
        let granted = send(self.http.post(url).form(&form)).await;
        assert_eq!(granted.status, 200, "exchange refused: {:?}", granted.body);
        self.token = granted.json()["access_token"].as_str().unwrap().to_owned();
    }

    /// The same account with another bearer token (e.g. an unknown one).
    pub fn with_token(&self, token: &str) -> Caller {
        Caller {
            token: token.to_owned(),
            ..self.clone()
        }
    }

    /// The same account on a client whose requests give up after `timeout`.
    pub fn with_timeout(&self, timeout: Duration) -> Caller {
        Caller {
            http: http_with_timeout(timeout),
            ..self.clone()
        }
    }

    /// A request to `path` with the bearer token.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    /// A JSON:API write, with an `Idempotency-Key` when `key` is given.
    pub fn write_request(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: &str,
    ) -> RequestBuilder {
        let mut request = self
            .request(method, path)
            .header("content-type", JSON_API)
            .body(body.to_owned());
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        request
    }

    /// A JSON:API write, answered.
    pub async fn write(&self, method: Method, path: &str, key: Option<&str>, body: &str) -> Reply {
        send(self.write_request(method, path, key, body)).await
    }

    /// `POST /api/json/v1/projects` with `key`, answered.
    pub async fn create(&self, key: &str, body: &str) -> Reply {
        self.write(Method::POST, PROJECTS, Some(key), body).await
    }

    /// Creates a project under `key`; its ID and path.
    pub async fn create_project(&self, key: &str, name: &str) -> (String, String) {
        let id = self.create(key, &project(name)).await.data_id();
        let path = format!("{PROJECTS}/{id}");
        (id, path)
    }

    /// How many resources a `GET` of the collection `path` lists.
    pub async fn count(&self, path: &str) -> usize {
        self.get(path).await.json()["data"]
            .as_array()
            .unwrap()
            .len()
    }

    /// A `GET` of `path`, answered.
    pub async fn get(&self, path: &str) -> Reply {
        send(self.request(Method::GET, path)).await
    }

    /// A delivery to the token-only route of `trigger`.
    pub fn delivery(&self, trigger: &str, headers: &[(&str, &str)], body: &str) -> RequestBuilder {
        let path = format!("/api/v1/webhooks/{trigger}");
        self.delivery_to(&path, headers, body)
    }

    /// A delivery to a webhook `path` (token-only or legacy).
    pub fn delivery_to(&self, path: &str, headers: &[(&str, &str)], body: &str) -> RequestBuilder {
        let mut request = self
            .request(Method::POST, path)
            .header("content-type", "application/json")
            .body(body.to_owned());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request
    }

    /// A delivery to the demo trigger, answered.
    pub async fn deliver(&self, headers: &[(&str, &str)], body: &str) -> Reply {
        send(self.delivery(DEMO_TRIGGER_TOKEN, headers, body)).await
    }

    /// A delivery with `Idempotency-Key: key` to the demo trigger.
    pub fn keyed_delivery(&self, key: &str) -> RequestBuilder {
        self.delivery(
            DEMO_TRIGGER_TOKEN,
            &[("idempotency-key", key)],
            r#"{"order":42}"#,
        )
    }

    /// A delivery with `Idempotency-Key: key` to the demo trigger, answered.
    pub async fn deliver_keyed(&self, key: &str) -> Reply {
        send(self.keyed_delivery(key)).await
    }

    /// A `POST /api/graphql` with `query` and `variables`, answered.
    pub async fn graphql(&self, query: &str, variables: Value) -> Reply {
        let body = serde_json::json!({"query": query, "variables": variables});
        send(self.request(Method::POST, "/api/graphql").json(&body)).await
    }
}

/// Waits until `done` holds of the ledger, polling every few milliseconds.
///
/// The deadline is generous: it only bounds a test that would otherwise hang.
pub async fn ledger_until(server: &MockServer, done: impl Fn(&Ledger) -> bool) -> Ledger {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ledger = server.ledger();
        if done(&ledger) {
            return ledger;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the ledger never got there: {ledger:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Starts a project write under `key` that the server holds for `delay` in
/// `slow_execution`, and returns once the server has received it.
pub async fn start_slow_write(
    server: &MockServer,
    caller: &Caller,
    key: &str,
    delay: Duration,
) -> JoinHandle<Reply> {
    server.inject(Fault::slow_execution(delay).on("POST", PROJECTS));
    let write = caller.write_request(Method::POST, PROJECTS, Some(key), &project("apollo"));
    let pending = tokio::spawn(send(write));
    ledger_until(server, |l| l.requests_with_key(key).len() == 1).await;
    pending
}

/// Runs `scenario` until it reports it was not overtaken by a race it cannot
/// control (e.g. a concurrent duplicate that arrived before the first claimed
/// its key), at most five times; the last answer is returned.
pub async fn without_lost_races<F, Fut, T>(mut scenario: F) -> T
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for round in 0..5 {
        if let Some(outcome) = scenario(round).await {
            return outcome;
        }
    }
    panic!("lost the race five times in a row");
}
