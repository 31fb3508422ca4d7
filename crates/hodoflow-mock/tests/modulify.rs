//! Modulify over real TCP: the catalogue, the reference methods and their effects, every row of
//! the error table of `docs/wire-contract.md`, "Modulify", the key store (per token, only successes
//! kept, answers over 1 MB not kept, retention), the per-minute budget that replays do not
//! spend, and the faults, each checked against the ledger.

mod support;

use std::time::Duration;

use hodoflow_mock::{
    DEMO_MODULIFY_TOKEN, Fault, Limits, MockServer, MockServerBuilder, ModulifyTokenSeed, ToolSeed,
};
use reqwest::header::HeaderValue;
use serde_json::{Value, json};
use support::{DAY, MINUTE, Reply, SECOND, clocked, http, ledger_until, send, try_send};

const NOT_KEPT: &str =
    "the original answer was larger than 1 MB and is not kept: read the current state instead";

/// A caller of the Modulify routes with one bearer token.
#[derive(Debug, Clone)]
struct Modulify {
    base: String,
    http: reqwest::Client,
    token: Option<String>,
}

impl Modulify {
    fn demo(server: &MockServer) -> Self {
        Self::with(server, DEMO_MODULIFY_TOKEN)
    }

    fn with(server: &MockServer, token: &str) -> Self {
        Self {
            base: server.base_url(),
            http: http(),
            token: Some(token.to_owned()),
        }
    }

    fn anonymous(server: &MockServer) -> Self {
        Self {
            token: None,
            ..Self::demo(server)
        }
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// `POST /v1/<method>` with `body` byte for byte and the key, if any.
    fn request(&self, method: &str, key: Option<&str>, body: &str) -> reqwest::RequestBuilder {
        let url = format!("{}/v1/{method}", self.base);
        let mut request = self
            .authorized(self.http.post(url))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        request
    }

    async fn call(&self, method: &str, key: Option<&str>, body: &str) -> Reply {
        send(self.request(method, key, body)).await
    }

    async fn keyed(&self, method: &str, key: &str, body: &str) -> Reply {
        self.call(method, Some(key), body).await
    }

    async fn tools(&self) -> Reply {
        let url = format!("{}/v1/tools", self.base);
        send(self.authorized(self.http.get(url))).await
    }

    /// Creates a site named `name` without a key; its ID.
    async fn site(&self, name: &str) -> String {
        let created = self
            .call("create_site", None, &json!({"name": name}).to_string())
            .await;
        assert_eq!(created.status, 200, "{:?}", created.body);
        created.json()["data"]["site"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// `error.code` of a Modulify failure, after checking its shape.
fn code(reply: &Reply) -> String {
    let body = reply.json();
    assert_eq!(body["data"], Value::Null, "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
    assert_eq!(reply.header("content-type"), Some("application/json"));
    body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn execution(reply: &Reply) -> u64 {
    reply.json()["data"]["execution"].as_u64().unwrap()
}

const MESSAGE: &str = r#"{"projectId":"SITE_ID","prompt":"Add a newsletter sign-up form."}"#;

async fn demo() -> (MockServer, Modulify) {
    let server = MockServer::start().await.unwrap();
    let modulify = Modulify::demo(&server);
    (server, modulify)
}

async fn started(builder: MockServerBuilder) -> (MockServer, Modulify) {
    let server = builder.start().await.unwrap();
    let modulify = Modulify::demo(&server);
    (server, modulify)
}

fn limits(change: impl FnOnce(&mut Limits)) -> Limits {
    let mut limits = Limits::default();
    change(&mut limits);
    limits
}

// The catalogue.

#[tokio::test]
async fn the_catalogue_lists_the_reference_methods_with_their_three_hints() {
    let (_server, modulify) = demo().await;
    let listed = modulify.tools().await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.header("content-type"), Some("application/json"));
    let tools = listed.json()["tools"].as_array().unwrap().clone();
    let hints = |name: &str| {
        let tool = tools.iter().find(|t| t["name"] == name).unwrap();
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()));
        let a = &tool["annotations"];
        (
            a["readOnlyHint"].as_bool().unwrap(),
            a["destructiveHint"].as_bool().unwrap(),
            a["idempotentHint"].as_bool().unwrap(),
        )
    };
    for read in ["get_site", "list_sites"] {
        assert!(hints(read).0, "{read} only reads");
        assert!(!hints(read).1, "{read} destroys nothing");
    }
    for idempotent in ["rename_site", "set_job_enabled"] {
        assert_eq!(hints(idempotent), (false, false, true), "{idempotent}");
    }
    let adding = [
        "create_site",
        "duplicate_site",
        "send_message",
        "send_site_email",
        "create_backup",
    ];
    for adds in adding {
        assert_eq!(hints(adds), (false, false, false), "{adds}");
    }
    assert_eq!(hints("delete_site"), (false, true, true));
    assert_eq!(tools.len(), 10);
}

#[tokio::test]
async fn an_extra_tool_seed_keeps_absent_hints_absent_and_runs_generically() {
    let builder = MockServer::builder()
        .modulify_tool(ToolSeed::new("publish_site").idempotent(true))
        .modulify_tool(ToolSeed::new("site_stats").read_only(true))
        .modulify_tool(ToolSeed::new("bare"));
    let (server, modulify) = started(builder).await;
    let listed = modulify.tools().await.json();
    let tool = |name: &str| {
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        tool("publish_site")["annotations"],
        json!({"idempotentHint": true})
    );
    assert_eq!(
        tool("site_stats")["annotations"],
        json!({"readOnlyHint": true})
    );
    assert_eq!(tool("bare")["annotations"], json!({}));
    assert_eq!(tool("bare")["description"], "");

    let published = modulify.keyed("publish_site", "p-1", "{}").await;
    assert_eq!(published.status, 200);
    assert_eq!(published.json()["data"]["tool"], "publish_site");
    assert_eq!(execution(&published), 1);
    let read = modulify.call("site_stats", None, "{}").await;
    assert_eq!(read.status, 200);
    assert_eq!(read.json()["data"], json!({"tool": "site_stats"}));
    modulify.call("bare", None, "{}").await;

    let ledger = server.ledger();
    assert_eq!(ledger.modulify_executions_of("publish_site"), 1);
    assert_eq!(ledger.modulify_executions("p-1"), 1);
    assert_eq!(
        ledger.modulify_executions_of("site_stats"),
        0,
        "reads are not executions"
    );
    assert_eq!(
        ledger.modulify_executions_of("bare"),
        1,
        "an absent readOnlyHint is false"
    );
    assert_eq!(ledger.modulify_total_executions(), 2);
}

// The reference methods and their effects.

#[tokio::test]
async fn sites_are_created_renamed_duplicated_and_deleted() {
    let (server, modulify) = demo().await;
    let id = modulify.site("apollo").await;
    let site = json!({"projectId": id}).to_string();
    let renamed = json!({"projectId": id, "name": "gemini"}).to_string();
    assert_eq!(
        modulify.call("rename_site", None, &renamed).await.status,
        200
    );
    let read = modulify.call("get_site", None, &site).await;
    assert_eq!(read.json()["data"]["site"]["name"], "gemini");
    assert!(
        read.json()["data"].get("execution").is_none(),
        "a read is no execution"
    );

    let copy = modulify.call("duplicate_site", None, &site).await;
    assert_eq!(copy.json()["data"]["site"]["name"], "gemini (copy)");
    let listed = modulify.call("list_sites", None, "{}").await;
    assert_eq!(listed.json()["data"]["sites"].as_array().unwrap().len(), 2);

    let deleted = modulify.call("delete_site", None, &site).await;
    assert_eq!(deleted.json()["data"]["deleted"], id.as_str());
    let gone = modulify.call("get_site", None, &site).await;
    assert_eq!((gone.status, code(&gone)), (404, "not_found".to_owned()));
    let listed = modulify.call("list_sites", None, "{}").await;
    assert_eq!(listed.json()["data"]["sites"].as_array().unwrap().len(), 1);

    let ledger = server.ledger();
    for (method, runs) in [
        ("create_site", 1),
        ("rename_site", 1),
        ("duplicate_site", 1),
        ("delete_site", 1),
        ("get_site", 0),
        ("list_sites", 0),
    ] {
        assert_eq!(ledger.modulify_executions_of(method), runs, "{method}");
    }
    assert_eq!(
        ledger.modulify_executions(""),
        4,
        "keyless runs count under \"\""
    );
}

#[tokio::test]
async fn messages_emails_backups_and_jobs_are_recorded() {
    let (server, modulify) = demo().await;
    let id = modulify.site("apollo").await;
    let message = json!({"projectId": id, "prompt": "Add a footer."}).to_string();
    let sent = modulify.keyed("send_message", "m-1", &message).await;
    assert_eq!(sent.status, 200);
    assert_eq!(sent.json()["data"]["message"]["prompt"], "Add a footer.");
    modulify.keyed("send_message", "m-2", &message).await;
    let site = json!({"projectId": id}).to_string();
    modulify.keyed("create_backup", "b-1", &site).await;
    modulify.keyed("send_site_email", "e-1", &site).await;
    let job = json!({"jobId": "nightly", "enabled": false}).to_string();
    let set = modulify.keyed("set_job_enabled", "j-1", &job).await;
    assert_eq!(
        set.json()["data"]["job"],
        json!({"id": "nightly", "enabled": false})
    );

    let read = modulify.call("get_site", None, &site).await.json();
    let counts = &read["data"]["site"];
    assert_eq!(
        (&counts["messages"], &counts["backups"], &counts["emails"]),
        (&json!(2), &json!(1), &json!(1))
    );
    // The example body of Modulify's "Idempotency and retries" names a project that need not
    // exist.
    assert_eq!(
        modulify.keyed("send_message", "m-3", MESSAGE).await.status,
        200
    );
    assert_eq!(server.ledger().modulify_executions_of("send_message"), 3);
}

#[tokio::test]
async fn calls_without_a_key_just_run_each_time() {
    let (server, modulify) = demo().await;
    let first = modulify.call("send_message", None, MESSAGE).await;
    let second = modulify.call("send_message", None, MESSAGE).await;
    assert_eq!((first.status, second.status), (200, 200));
    assert!(!second.replayed());
    assert_eq!((execution(&first), execution(&second)), (1, 2));
    let ledger = server.ledger();
    assert_eq!(ledger.modulify_executions(""), 2);
    assert_eq!(ledger.modulify_total_executions(), 2);
}

// The key store.

#[tokio::test]
async fn replays_a_kept_success_without_running_or_counting_it() {
    let (server, modulify) = demo().await;
    let first = modulify.keyed("send_message", "k-1", MESSAGE).await;
    assert_eq!(first.status, 200);
    assert!(!first.replayed());
    let again = modulify.keyed("send_message", "k-1", MESSAGE).await;
    assert_eq!(again.status, 200);
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("content-type"), Some("application/json"));

    let ledger = server.ledger();
    assert_eq!(ledger.modulify_executions("k-1"), 1);
    assert_eq!(ledger.modulify_replays("k-1"), 1);
    assert_eq!(ledger.modulify_rate_counted(), 1, "the replay is free");
    assert_eq!(ledger.requests_with_key("k-1").len(), 2);
}

#[tokio::test]
async fn keys_belong_to_the_token_that_sent_them() {
    let builder = MockServer::builder().modulify_token(ModulifyTokenSeed::new("mfy_second"));
    let (server, first) = started(builder).await;
    let second = Modulify::with(&server, "mfy_second");
    let a = first.keyed("create_site", "same", r#"{"name":"a"}"#).await;
    let b = second.keyed("create_site", "same", r#"{"name":"a"}"#).await;
    assert_eq!((a.status, b.status), (200, 200));
    assert!(!b.replayed());
    assert_ne!(
        a.json()["data"]["site"]["id"],
        b.json()["data"]["site"]["id"]
    );
    assert_eq!(server.ledger().modulify_executions("same"), 2);
    assert!(
        second
            .keyed("create_site", "same", r#"{"name":"a"}"#)
            .await
            .replayed()
    );
    assert_eq!(server.ledger().modulify_executions("same"), 2);
}

#[tokio::test]
async fn a_4xx_releases_the_key_so_the_fixed_body_runs_with_it() {
    let (server, modulify) = demo().await;
    let wrong = modulify.keyed("create_site", "k-1", r#"{"name":""}"#).await;
    assert_eq!(
        (wrong.status, code(&wrong)),
        (422, "validation_failed".to_owned())
    );
    let fixed = modulify
        .keyed("create_site", "k-1", r#"{"name":"apollo"}"#)
        .await;
    assert_eq!(fixed.status, 200, "released, not reused: {:?}", fixed.body);
    assert!(!fixed.replayed());
    let not_an_object = modulify.keyed("send_message", "k-2", "[]").await;
    assert_eq!(not_an_object.status, 400);
    assert_eq!(
        modulify.keyed("send_message", "k-2", MESSAGE).await.status,
        200
    );
    let ledger = server.ledger();
    assert_eq!(
        (
            ledger.modulify_executions("k-1"),
            ledger.modulify_executions("k-2")
        ),
        (1, 1)
    );
}

#[tokio::test]
async fn a_5xx_releases_the_key_and_runs_nothing() {
    let (server, modulify) = demo().await;
    for (status, wanted) in [(500, "internal_error"), (503, "unavailable")] {
        server.inject(Fault::fail_execution(status).on("POST", "/v1/send_message"));
        let key = format!("k-{status}");
        let failed = modulify.keyed("send_message", &key, MESSAGE).await;
        assert_eq!((failed.status, code(&failed)), (status, wanted.to_owned()));
        assert_eq!(server.ledger().modulify_executions(&key), 0);
        let retried = modulify.keyed("send_message", &key, MESSAGE).await;
        assert_eq!(retried.status, 200);
        assert!(!retried.replayed());
        assert_eq!(server.ledger().modulify_executions(&key), 1);
    }
    let ledger = server.ledger();
    let record = ledger.requests_with_key("k-500")[0];
    assert_eq!(
        (record.status, record.fault.as_deref()),
        (Some(500), Some("fail_execution"))
    );
}

#[tokio::test]
async fn an_answer_over_the_kept_limit_is_replayed_as_data_null_without_running() {
    let (server, modulify) = demo().await;
    let big = json!({"projectId": "p", "prompt": "x", "answer_bytes": 1_048_577}).to_string();
    let first = modulify.keyed("send_message", "big", &big).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.body.len(), 1_048_577);
    assert_eq!(execution(&first), 1);
    let again = modulify.keyed("send_message", "big", &big).await;
    assert_eq!(again.status, 200);
    assert!(again.replayed());
    assert_eq!(again.json(), json!({"data": null, "message": NOT_KEPT}));

    // An answer of exactly the limit is kept whole.
    let edge = json!({"projectId": "p", "prompt": "x", "answer_bytes": 1_048_576}).to_string();
    let kept = modulify.keyed("send_message", "edge", &edge).await;
    assert_eq!(kept.body.len(), 1_048_576);
    assert_eq!(
        modulify.keyed("send_message", "edge", &edge).await.body,
        kept.body
    );

    let ledger = server.ledger();
    assert_eq!(
        (
            ledger.modulify_executions("big"),
            ledger.modulify_replays("big")
        ),
        (1, 1)
    );
    assert_eq!(ledger.modulify_executions("edge"), 1);
}

#[tokio::test]
async fn a_kept_answer_is_forgotten_after_the_retention_and_runs_again() {
    let (clock, builder) = clocked();
    let (server, modulify) = started(builder).await;
    let first = modulify.keyed("send_message", "k-1", MESSAGE).await;
    clock.advance(DAY - SECOND);
    let kept = modulify.keyed("send_message", "k-1", MESSAGE).await;
    assert!(kept.replayed());
    assert_eq!(kept.body, first.body);
    clock.advance(SECOND);
    let forgotten = modulify.keyed("send_message", "k-1", MESSAGE).await;
    assert_eq!(forgotten.status, 200);
    assert!(!forgotten.replayed());
    assert_eq!(execution(&forgotten), 2);
    assert_eq!(server.ledger().modulify_executions("k-1"), 2);
}

#[tokio::test]
async fn a_retention_of_its_own_governs_modulify_keys() {
    let (clock, builder) = clocked();
    let short = limits(|l| l.modulify_retention = MINUTE);
    let (server, modulify) = started(builder.limits(short)).await;
    modulify.keyed("send_message", "k-1", MESSAGE).await;
    clock.advance(MINUTE);
    assert!(
        !modulify
            .keyed("send_message", "k-1", MESSAGE)
            .await
            .replayed()
    );
    assert_eq!(server.ledger().modulify_executions("k-1"), 2);
}

// Every row of the error table.

#[tokio::test]
async fn answers_400_invalid_idempotency_key_for_an_empty_long_or_invisible_key() {
    let (server, modulify) = demo().await;
    let long = "k".repeat(256);
    for bad in ["", long.as_str(), "with space", "tab\there"] {
        let refused = modulify.keyed("send_message", bad, MESSAGE).await;
        assert_eq!(refused.status, 400, "{bad:?}");
        assert_eq!(code(&refused), "invalid_idempotency_key");
    }
    let non_ascii = modulify.request("send_message", None, MESSAGE).header(
        "idempotency-key",
        HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
    );
    let refused = send(non_ascii).await;
    assert_eq!(
        (refused.status, code(&refused)),
        (400, "invalid_idempotency_key".to_owned())
    );
    assert_eq!(server.ledger().modulify_total_executions(), 0);

    let longest = "k".repeat(255);
    let edges = format!("!{}~", "k".repeat(253));
    for good in [longest.as_str(), edges.as_str(), "a"] {
        assert_eq!(
            modulify.keyed("send_message", good, MESSAGE).await.status,
            200
        );
    }
}

#[tokio::test]
async fn answers_400_invalid_request_when_the_body_is_not_a_json_object() {
    let (server, modulify) = demo().await;
    for body in [
        "",
        "not json",
        "[1,2]",
        "\"text\"",
        "null",
        r#"{"name":"a""#,
    ] {
        let refused = modulify.keyed("create_site", "k-1", body).await;
        assert_eq!(refused.status, 400, "{body:?}");
        assert_eq!(code(&refused), "invalid_request");
    }
    assert_eq!(server.ledger().modulify_total_executions(), 0);
}

#[tokio::test]
async fn answers_401_unauthorized_for_a_missing_or_unknown_token() {
    let (server, _) = demo().await;
    for caller in [
        Modulify::anonymous(&server),
        Modulify::with(&server, "mfy_unknown"),
    ] {
        let refused = caller.keyed("send_message", "k-1", MESSAGE).await;
        assert_eq!(
            (refused.status, code(&refused)),
            (401, "unauthorized".to_owned())
        );
        let tools = caller.tools().await;
        assert_eq!(
            (tools.status, code(&tools)),
            (401, "unauthorized".to_owned())
        );
    }
    assert_eq!(server.ledger().modulify_total_executions(), 0);
}

#[tokio::test]
async fn answers_403_forbidden_for_a_method_the_token_may_not_call() {
    let reader = ModulifyTokenSeed::new("mfy_reader").methods(&["get_site", "list_sites"]);
    let (server, demo) = started(MockServer::builder().modulify_token(reader)).await;
    let reader = Modulify::with(&server, "mfy_reader");
    let refused = reader.keyed("create_site", "k-1", r#"{"name":"a"}"#).await;
    assert_eq!(
        (refused.status, code(&refused)),
        (403, "forbidden".to_owned())
    );
    assert_eq!(reader.call("list_sites", None, "{}").await.status, 200);
    assert_eq!(reader.tools().await.status, 200);
    assert_eq!(
        demo.keyed("create_site", "k-1", r#"{"name":"a"}"#)
            .await
            .status,
        200,
        "the demo token may call every method"
    );
    assert_eq!(server.ledger().modulify_executions("k-1"), 1);
}

#[tokio::test]
async fn answers_404_not_found_for_an_unknown_method_or_object() {
    let (server, modulify) = demo().await;
    let unknown = modulify.keyed("launch_rocket", "k-1", "{}").await;
    assert_eq!(
        (unknown.status, code(&unknown)),
        (404, "not_found".to_owned())
    );
    let tools = modulify.keyed("tools", "k-2", "{}").await;
    assert_eq!(tools.status, 404, "the catalogue is no method");
    for method in ["get_site", "rename_site", "duplicate_site", "delete_site"] {
        let body = json!({"projectId": "site_missing", "name": "x"}).to_string();
        let missing = modulify.keyed(method, "k-3", &body).await;
        assert_eq!(
            (missing.status, code(&missing)),
            (404, "not_found".to_owned()),
            "{method}"
        );
    }
    assert_eq!(server.ledger().modulify_total_executions(), 0);
}

// Every other method, path and shape: Modulify's error body, never axum's bare 405 or 404.

impl Modulify {
    /// `method` on `path` (from the base URL), with the token if any and `body` as it is.
    async fn raw(&self, method: &str, path: &str, content_type: Option<&str>, body: &str) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let url = format!("{}{path}", self.base);
        let mut request = self
            .authorized(self.http.request(method, url))
            .body(body.to_owned());
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        send(request).await
    }
}

#[tokio::test]
async fn other_http_methods_on_a_method_path_answer_404_not_found_with_allow_post() {
    let (server, modulify) = demo().await;
    for method in ["GET", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "FROB"] {
        for path in ["/v1/send_message", "/v1/create_site", "/v1/launch_rocket"] {
            let refused = modulify.raw(method, path, None, "").await;
            assert_eq!(
                (refused.status, code(&refused)),
                (404, "not_found".to_owned()),
                "{method} {path}"
            );
            assert_eq!(refused.header("allow"), Some("POST"), "{method} {path}");
        }
    }
    let head = modulify.raw("HEAD", "/v1/send_message", None, "").await;
    assert_eq!(head.status, 404);
    assert!(head.body.is_empty(), "a HEAD answer has no body");
    assert_eq!(server.ledger().modulify_total_executions(), 0);
    assert_eq!(
        server.ledger().requests_to("GET", "/v1/send_message").len(),
        1,
        "an unrouted request is still recorded"
    );
}

#[tokio::test]
async fn other_http_methods_on_the_catalogue_answer_404_not_found_with_allow_get_and_post() {
    let (_server, modulify) = demo().await;
    for method in ["PUT", "PATCH", "DELETE", "OPTIONS"] {
        let refused = modulify.raw(method, "/v1/tools", None, "").await;
        assert_eq!(
            (refused.status, code(&refused)),
            (404, "not_found".to_owned()),
            "{method}"
        );
        assert_eq!(refused.header("allow"), Some("GET, POST"));
    }
    assert_eq!(
        modulify.raw("HEAD", "/v1/tools", None, "").await.status,
        200
    );
}

#[tokio::test]
async fn paths_under_v1_that_name_no_method_answer_404_not_found() {
    let (server, modulify) = demo().await;
    for path in [
        "/v1",
        "/v1/",
        "/v1/a/b",
        "/v1/a/b/c",
        "/v1/send_message/",
        "/v1//send_message",
        "/v1/tools/send_message",
    ] {
        for method in ["POST", "GET", "DELETE"] {
            let refused = modulify
                .raw(method, path, Some("application/json"), MESSAGE)
                .await;
            assert_eq!(
                (refused.status, code(&refused)),
                (404, "not_found".to_owned()),
                "{method} {path}"
            );
            assert_eq!(refused.header("allow"), None, "{method} {path}");
        }
    }
    assert_eq!(server.ledger().modulify_total_executions(), 0);
}

#[tokio::test]
async fn an_unrouted_request_without_a_token_answers_401_unauthorized_first() {
    let (_server, _) = demo().await;
    let anonymous = Modulify::anonymous(&_server);
    for (method, path) in [
        ("GET", "/v1/send_message"),
        ("DELETE", "/v1/tools"),
        ("POST", "/v1/a/b"),
        ("GET", "/v1/"),
    ] {
        let refused = anonymous.raw(method, path, None, "").await;
        assert_eq!(
            (refused.status, code(&refused)),
            (401, "unauthorized".to_owned()),
            "{method} {path}"
        );
    }
}

#[tokio::test]
async fn the_content_type_is_not_checked_only_the_body_is() {
    let (server, modulify) = demo().await;
    // The example of Modulify's "Idempotency and retries" is `curl -d`, which sends a form
    // content type.
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("application/json; charset=utf-8"),
    ] {
        let ran = modulify
            .raw("POST", "/v1/list_sites", content_type, "{}")
            .await;
        assert_eq!(ran.status, 200, "{content_type:?}");
        let form = modulify
            .raw("POST", "/v1/create_site", content_type, "name=a&x=1")
            .await;
        assert_eq!(
            (form.status, code(&form)),
            (400, "invalid_request".to_owned()),
            "{content_type:?}"
        );
    }
    let queried = modulify
        .raw("POST", "/v1/list_sites?verbose=1", None, "{}")
        .await;
    assert_eq!(
        queried.status, 200,
        "a query string does not change the method"
    );
    assert_eq!(server.ledger().modulify_total_executions(), 0);
}

#[tokio::test]
async fn answers_409_in_progress_with_retry_after_while_a_slow_execution_holds_the_key() {
    let (server, modulify) = demo().await;
    server
        .inject(Fault::slow_execution(Duration::from_millis(2500)).on("POST", "/v1/send_message"));
    let pending = tokio::spawn(send(modulify.request("send_message", Some("k-1"), MESSAGE)));
    ledger_until(&server, |l| l.requests_with_key("k-1").len() == 1).await;
    let busy = modulify.keyed("send_message", "k-1", MESSAGE).await;
    assert_eq!(
        (busy.status, code(&busy)),
        (409, "idempotency_key_in_progress".to_owned())
    );
    let wait = busy.retry_after_secs();
    assert!(
        (2..=3).contains(&wait),
        "what is left of 2.5 s, rounded up: {wait}"
    );
    let other_body = modulify
        .keyed("send_message", "k-1", r#"{"projectId":"p","prompt":"y"}"#)
        .await;
    assert_eq!(code(&other_body), "idempotency_key_reused");

    let first = pending.await.unwrap();
    assert_eq!(first.status, 200);
    let after = modulify.keyed("send_message", "k-1", MESSAGE).await;
    assert!(after.replayed());
    assert_eq!(after.body, first.body);
    assert_eq!(server.ledger().modulify_executions("k-1"), 1);
}

#[tokio::test]
async fn answers_413_payload_too_large_over_the_body_limit() {
    let small = limits(|l| l.modulify_body_limit = 64);
    let (server, modulify) = started(MockServer::builder().limits(small)).await;
    let at_limit = format!(r#"{{"name":"{}"}}"#, "a".repeat(64 - 11));
    assert_eq!(at_limit.len(), 64);
    assert_eq!(
        modulify.keyed("create_site", "k-1", &at_limit).await.status,
        200
    );
    let over = format!(r#"{{"name":"{}"}}"#, "a".repeat(64 - 10));
    let refused = modulify.keyed("create_site", "k-2", &over).await;
    assert_eq!(
        (refused.status, code(&refused)),
        (413, "payload_too_large".to_owned())
    );
    // Far past axum's buffer, still Modulify's own 413.
    let huge = format!(r#"{{"name":"{}"}}"#, "a".repeat(3 << 20));
    let refused = modulify.keyed("create_site", "k-3", &huge).await;
    assert_eq!(
        (refused.status, code(&refused)),
        (413, "payload_too_large".to_owned())
    );
    assert_eq!(server.ledger().modulify_total_executions(), 1);
}

#[tokio::test]
async fn the_default_body_limit_is_one_mebibyte() {
    let (_server, modulify) = demo().await;
    let body = |size: usize| format!(r#"{{"name":"{}"}}"#, "a".repeat(size - 11));
    assert_eq!(
        modulify
            .call("create_site", None, &body(1_048_576))
            .await
            .status,
        200
    );
    assert_eq!(
        modulify
            .call("create_site", None, &body(1_048_577))
            .await
            .status,
        413
    );
}

#[tokio::test]
async fn answers_422_idempotency_key_reused_for_another_method_or_any_other_byte() {
    let (server, modulify) = demo().await;
    let body = r#"{"name":"apollo"}"#;
    assert_eq!(modulify.keyed("create_site", "k-1", body).await.status, 200);
    for (method, other) in [
        ("create_site", r#"{"name":"gemini"}"#),
        ("create_site", r#"{"name":"apollo"} "#),
        ("create_site", r#"{ "name":"apollo"}"#),
        ("duplicate_site", body),
    ] {
        let reused = modulify.keyed(method, "k-1", other).await;
        assert_eq!(reused.status, 422, "{method} {other}");
        assert_eq!(code(&reused), "idempotency_key_reused");
        assert!(!reused.replayed());
    }
    assert!(modulify.keyed("create_site", "k-1", body).await.replayed());
    assert_eq!(server.ledger().modulify_executions("k-1"), 1);
}

#[tokio::test]
async fn answers_422_validation_failed_for_wrong_parameters() {
    let (server, modulify) = demo().await;
    for (method, body) in [
        ("create_site", "{}"),
        ("create_site", r#"{"name":7}"#),
        ("send_message", r#"{"projectId":"p"}"#),
        ("send_message", r#"{"prompt":"x"}"#),
        ("set_job_enabled", r#"{"jobId":"j","enabled":"no"}"#),
        (
            "send_message",
            r#"{"projectId":"p","prompt":"x","answer_bytes":-1}"#,
        ),
    ] {
        let refused = modulify.keyed(method, "k-1", body).await;
        assert_eq!(refused.status, 422, "{method} {body}");
        assert_eq!(code(&refused), "validation_failed");
    }
    assert_eq!(server.ledger().modulify_total_executions(), 0);
}

#[tokio::test]
async fn answers_429_when_the_budget_is_spent_and_still_replays_for_free() {
    let (clock, builder) = clocked();
    let three = limits(|l| l.modulify_rate_limit = 3);
    let (server, modulify) = started(builder.limits(three)).await;
    for key in ["k-1", "k-2", "k-3"] {
        assert_eq!(
            modulify.keyed("send_message", key, MESSAGE).await.status,
            200
        );
    }
    clock.advance(Duration::from_secs(15));
    let limited = modulify.keyed("send_message", "k-4", MESSAGE).await;
    assert_eq!(
        (limited.status, code(&limited)),
        (429, "rate_limited".to_owned())
    );
    assert_eq!(limited.retry_after_secs(), 45);
    for _ in 0..5 {
        let replayed = modulify.keyed("send_message", "k-1", MESSAGE).await;
        assert_eq!(replayed.status, 200);
        assert!(replayed.replayed());
    }
    assert_eq!(modulify.tools().await.status, 200, "the catalogue is free");
    let ledger = server.ledger();
    assert_eq!(ledger.modulify_rate_counted(), 3);
    assert_eq!(ledger.modulify_replays("k-1"), 5);
    assert_eq!(ledger.modulify_executions("k-4"), 0);

    clock.advance(Duration::from_secs(45));
    let later = modulify.keyed("send_message", "k-4", MESSAGE).await;
    assert_eq!(later.status, 200, "the key was released by the 429");
    assert_eq!(server.ledger().modulify_executions("k-4"), 1);
}

#[tokio::test]
async fn the_budget_is_per_token_and_sixty_a_minute_by_default() {
    let builder = MockServer::builder().modulify_token(ModulifyTokenSeed::new("mfy_second"));
    let (server, first) = started(builder).await;
    assert_eq!(server.limits().modulify_rate_limit, 60);
    for _ in 0..60 {
        assert_eq!(first.call("list_sites", None, "{}").await.status, 200);
    }
    assert_eq!(first.call("list_sites", None, "{}").await.status, 429);
    let second = Modulify::with(&server, "mfy_second");
    assert_eq!(second.call("list_sites", None, "{}").await.status, 200);
    assert_eq!(server.ledger().modulify_rate_counted(), 61);
}

#[tokio::test]
async fn answers_500_and_503_as_a_respond_fault_says_without_running() {
    let (server, modulify) = demo().await;
    let unavailable = Fault::respond(503)
        .header("Retry-After", "2")
        .body(r#"{"data":null,"error":{"code":"unavailable","message":"down"}}"#);
    server.inject(unavailable.on("POST", "/v1/"));
    let refused = modulify.keyed("send_message", "k-1", MESSAGE).await;
    assert_eq!(
        (refused.status, code(&refused)),
        (503, "unavailable".to_owned())
    );
    assert_eq!(refused.retry_after_secs(), 2);
    assert_eq!(server.ledger().modulify_executions("k-1"), 0);
    assert_eq!(
        modulify.keyed("send_message", "k-1", MESSAGE).await.status,
        200
    );
}

// Faults, the ledger and the request ID.

#[tokio::test]
async fn execute_then_close_keeps_the_answer_so_the_repeat_replays_it() {
    let (server, modulify) = demo().await;
    server.inject(Fault::execute_then_close().on("POST", "/v1/send_message"));
    let lost = try_send(modulify.request("send_message", Some("k-1"), MESSAGE)).await;
    assert!(lost.is_err(), "the answer is lost: {lost:?}");
    assert_eq!(server.ledger().modulify_executions("k-1"), 1);
    let again = modulify.keyed("send_message", "k-1", MESSAGE).await;
    assert!(again.replayed());
    assert_eq!(execution(&again), 1, "the answer of the lost run");
    let ledger = server.ledger();
    assert_eq!(
        (
            ledger.modulify_executions("k-1"),
            ledger.modulify_replays("k-1")
        ),
        (1, 1)
    );
    let records = ledger.requests_with_key("k-1");
    assert_eq!(records[0].status, None);
    assert_eq!(records[0].fault.as_deref(), Some("execute_then_close"));
    assert_eq!(records[1].status, Some(200));
}

#[tokio::test]
async fn close_before_execute_runs_nothing_and_leaves_the_key_free() {
    let (server, modulify) = demo().await;
    server.inject(Fault::close_before_execute().on("POST", "/v1/"));
    let lost = try_send(modulify.request("send_message", Some("k-1"), MESSAGE)).await;
    assert!(lost.is_err());
    assert_eq!(server.ledger().modulify_executions("k-1"), 0);
    let ran = modulify.keyed("send_message", "k-1", MESSAGE).await;
    assert!(!ran.replayed());
    assert_eq!(server.ledger().modulify_executions("k-1"), 1);
}

#[tokio::test]
async fn execute_then_delay_commits_before_the_client_gives_up() {
    let (server, modulify) = demo().await;
    server.inject(Fault::execute_then_delay(Duration::from_millis(800)).on("POST", "/v1/"));
    let impatient = Modulify {
        http: support::http_with_timeout(Duration::from_millis(200)),
        ..modulify.clone()
    };
    let timed_out = try_send(impatient.request("send_message", Some("k-1"), MESSAGE)).await;
    assert!(timed_out.is_err());
    assert_eq!(server.ledger().modulify_executions("k-1"), 1);
    assert!(
        modulify
            .keyed("send_message", "k-1", MESSAGE)
            .await
            .replayed()
    );
}

#[tokio::test]
async fn delay_then_handle_waits_then_runs() {
    let (server, modulify) = demo().await;
    server.inject(Fault::delay_then_handle(Duration::from_millis(500)).on("POST", "/v1/"));
    let pending = tokio::spawn(async move { modulify.keyed("send_message", "k-1", MESSAGE).await });
    // Received, and held before it runs: nothing executes while the delay lasts.
    let held = ledger_until(&server, |l| l.requests_with_key("k-1").len() == 1).await;
    assert_eq!(held.modulify_executions("k-1"), 0);
    let ran = pending.await.unwrap();
    assert_eq!(ran.status, 200);
    assert_eq!(server.ledger().modulify_executions("k-1"), 1);
}

#[tokio::test]
async fn expired_token_answers_401_in_modulify_form() {
    let (server, modulify) = demo().await;
    server.inject(Fault::expired_token().on("POST", "/v1/"));
    let refused = modulify.keyed("send_message", "k-1", MESSAGE).await;
    assert_eq!(
        (refused.status, code(&refused)),
        (401, "unauthorized".to_owned())
    );
    assert_eq!(server.ledger().modulify_executions("k-1"), 0);
    assert_eq!(
        modulify.keyed("send_message", "k-1", MESSAGE).await.status,
        200
    );
}

#[tokio::test]
async fn every_answer_carries_a_request_id() {
    let (server, modulify) = demo().await;
    let answers = [
        modulify.keyed("send_message", "k-1", MESSAGE).await,
        modulify.keyed("send_message", "k-1", MESSAGE).await,
        modulify.keyed("send_message", "", MESSAGE).await,
        modulify.keyed("launch_rocket", "k-2", "{}").await,
        Modulify::anonymous(&server).tools().await,
        modulify.tools().await,
    ];
    let mut ids: Vec<&str> = answers.iter().map(Reply::request_id).collect();
    assert!(ids.iter().all(|id| id.starts_with("req_")), "{ids:?}");
    ids.dedup();
    assert_eq!(ids.len(), answers.len());
}

#[tokio::test]
async fn requests_are_recorded_and_the_control_ledger_shows_modulify_without_a_token() {
    let builder = MockServer::builder()
        .control_routes(true)
        .modulify_token(ModulifyTokenSeed::new("mfy_s3cret_token"));
    let server = builder.start().await.unwrap();
    let modulify = Modulify::with(&server, "mfy_s3cret_token");
    modulify.keyed("send_message", "k-1", MESSAGE).await;
    modulify.keyed("send_message", "k-1", MESSAGE).await;
    let ledger = server.ledger();
    let record = &ledger.requests_to("POST", "/v1/")[0];
    assert_eq!(record.path, "/v1/send_message");
    assert_eq!(record.idempotency_key.as_deref(), Some("k-1"));
    assert_eq!(record.status, Some(200));
    assert!(record.arrived <= ledger.requests()[1].arrived);

    let shown = send(http().get(format!("{}/_mock/ledger", server.base_url()))).await;
    let text = String::from_utf8(shown.body.to_vec()).unwrap();
    assert!(!text.contains("s3cret"), "{text}");
    let shown = shown.json();
    assert_eq!(shown["modulify_executions"]["k-1"], 1);
    assert_eq!(shown["modulify_replays"]["k-1"], 1);
    assert_eq!(shown["modulify_methods"]["send_message"], 1);
    assert_eq!(shown["modulify_rate_counted"], 1);
    assert!(!format!("{server:?}").contains("s3cret"));
}
