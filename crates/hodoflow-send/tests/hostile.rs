//! `hodoflow-send` against a hostile server (`support/hostile.rs`: a small HTTP/1.1 server on a
//! Tokio `TcpListener` at 127.0.0.1:0, which can answer anything and keeps a ledger of what it
//! received). Each test drives the built binary and checks the exit status, what was printed
//! (never a secret), and the ledger (nothing sent when the input is refused).

mod support;

use std::time::Duration;

use assert_cmd::Command;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::Value;
use support::hostile::{Hostile, Reply, Request};
use support::{Ran, TempFile, run};

/// The client secret the CLI is given: with characters a form body percent-encodes.
const CLIENT_SECRET: &str = "cs_HOSTILE/secret+42=";
/// The trigger token.
const TRIGGER: &str = "trg_HOSTILE_trigger_77";
/// What every access token the server issues starts with (a counter follows).
const ACCESS: &str = "hft_HOSTILE_access_";
/// Every secret, or the start of one, that must never be printed.
const SECRETS: [&str; 4] = [CLIENT_SECRET, "cs_HOSTILE", TRIGGER, ACCESS];
/// The webhook route.
const WEBHOOKS: &str = "/api/v1/webhooks/";

impl Reply {
    /// A good token answer with the `n`th token.
    fn token(n: usize) -> Self {
        Self::json(
            200,
            &serde_json::json!({"access_token": format!("{ACCESS}{n}"), "token_type": "Bearer",
                                "expires_in": 3600}),
        )
    }

    /// A webhook's `202 accepted`.
    fn accepted() -> Self {
        Self::json(
            202,
            &serde_json::json!({"status": "accepted",
                                "workflow_run_id": "7a4c1f0e-0000-4000-8000-000000000001"}),
        )
    }
}

impl Hostile {
    /// A server that answers token exchanges with good tokens and everything else with
    /// `answer`.
    fn start(answer: impl Fn(&Request, &[Request]) -> Reply + Send + Sync + 'static) -> Self {
        Self::raw(move |request, before| {
            if request.is_token_exchange() {
                let issued = before.iter().filter(|r| r.is_token_exchange()).count();
                return Reply::token(issued);
            }
            answer(request, before)
        })
    }

    /// The trigger URL of [`TRIGGER`] on this server.
    fn trigger_url(&self) -> String {
        format!("{}{WEBHOOKS}{TRIGGER}", self.base_url)
    }

    /// `hodoflow-send` with a clean environment: this server, the client credentials (the
    /// secret from the environment), tracing at `trace`, and a short budget.
    fn send(&self) -> Command {
        let mut command = Command::cargo_bin("hodoflow-send").expect("the binary is built");
        command
            .env_clear()
            .env("HODOFLOW_BASE_URL", &self.base_url)
            .env("HODOFLOW_CLIENT_ID", "svc-hostile")
            .env("HODOFLOW_CLIENT_SECRET", CLIENT_SECRET)
            .env("HODOFLOW_MAX_ATTEMPTS", "2")
            .env("HODOFLOW_MAX_ELAPSED", "2s")
            .env("HODOFLOW_ATTEMPT_TIMEOUT", "500ms")
            .env("RUST_LOG", "trace")
            .timeout(Duration::from_secs(30));
        command
    }
}

/// Asserts that nothing `ran` printed holds a secret, and returns it.
#[track_caller]
fn no_secret(ran: Ran) -> Ran {
    let all = ran.all();
    for secret in SECRETS {
        assert!(!all.contains(secret), "{secret} printed: {all}");
    }
    ran
}

/// Asserts that the server received nothing at all, not even a token exchange.
#[track_caller]
fn nothing_sent(server: &Hostile, ran: &Ran) {
    assert_eq!(ran.code, 2, "{ran:?}");
    let requests = server.requests();
    assert!(requests.is_empty(), "{requests:?} after {ran:?}");
}

#[test]
fn help_never_prints_a_value_from_the_environment() {
    for args in [
        vec!["--help"],
        vec!["webhook", "--help"],
        vec!["batch", "--help"],
    ] {
        let ran = run(Command::cargo_bin("hodoflow-send")
            .unwrap()
            .env_clear()
            .env("HODOFLOW_BASE_URL", "http://user:hunter2pass@127.0.0.1:1")
            .env("HODOFLOW_CLIENT_ID", "svc-id-hunter2")
            .env("HODOFLOW_CLIENT_SECRET_FILE", "/tmp/hunter2-file")
            .env("HODOFLOW_TOKEN_URL", "http://u:hunter2tok@127.0.0.1:1/t")
            .env("HODOFLOW_CONCURRENCY", "17")
            .args(&args));
        assert_eq!(ran.code, 0, "{args:?}: {ran:?}");
        assert!(ran.stdout.contains("[env: HODOFLOW_BASE_URL]"), "{ran:?}");
        assert!(!ran.all().contains("hunter2"), "{args:?}: {}", ran.all());
        assert!(!ran.all().contains("=17"), "{args:?}: {}", ran.all());
    }
}

#[test]
fn base_trigger_and_token_urls_that_break_the_rules_are_refused_before_sending() {
    let server = Hostile::start(|_, _| Reply::accepted());
    let port = server.base_url.rsplit(':').next().unwrap().to_owned();
    let webhook = ["--json", "webhook", TRIGGER, "--event-id", "e-1"];
    for (base, says) in [
        (
            format!("http://user:pa55word@127.0.0.1:{port}"),
            "user name or password",
        ),
        (
            format!("http://pa55word@127.0.0.1:{port}"),
            "user name or password",
        ),
        (format!("http://127.0.0.1:{port}/?pa55word=1"), "query"),
        (format!("http://127.0.0.1:{port}/#pa55word"), "fragment"),
        (format!("ftp://127.0.0.1:{port}/pa55word"), "http or https"),
        ("file:///pa55word".to_owned(), "http or https"),
        ("pa55word".to_owned(), "not a URL"),
    ] {
        for by_flag in [false, true] {
            let mut command = server.send();
            if by_flag {
                command.args(["--base-url", &base]);
            } else {
                command.env("HODOFLOW_BASE_URL", &base);
            }
            let ran = no_secret(run(command.args(webhook)));
            nothing_sent(&server, &ran);
            let report = ran.json();
            assert_eq!(report["error"]["kind"], "invalid_input");
            let message = report["error"]["message"].as_str().unwrap();
            assert!(message.contains(says), "{base}: {message}");
            assert!(!ran.all().contains("pa55word"), "{base}: {ran:?}");
        }
    }

    let with_userinfo = format!("http://u:pa55word@127.0.0.1:{port}{WEBHOOKS}{TRIGGER}");
    let ran = no_secret(run(server.send().env_remove("HODOFLOW_BASE_URL").args([
        "webhook",
        &with_userinfo,
        "--event-id",
        "e-2",
    ])));
    nothing_sent(&server, &ran);
    assert!(ran.stdout.contains("user name or password"), "{ran:?}");
    assert!(!ran.all().contains("pa55word"), "{ran:?}");

    let token_url = format!("http://u:pa55word@127.0.0.1:{port}/oauth/token");
    let ran = no_secret(run(server
        .send()
        .args(["--token-url", &token_url])
        .args(webhook)));
    nothing_sent(&server, &ran);
    assert!(!ran.all().contains("pa55word"), "{ran:?}");
}

#[test]
fn hosts_compare_case_insensitively_and_other_servers_are_refused() {
    let server = Hostile::start(|_, _| Reply::accepted());
    let port = server.base_url.rsplit(':').next().unwrap().to_owned();
    let trigger = format!("http://localhost:{port}{WEBHOOKS}{TRIGGER}");

    let other = run(server
        .send()
        .args([
            "--base-url",
            &format!("http://LOCALHOST:{}", port.parse::<u16>().unwrap() ^ 1),
        ])
        .args(["webhook", &trigger, "--event-id", "e-1"]));
    let other = no_secret(other);
    nothing_sent(&server, &other);
    assert!(
        other
            .stdout
            .contains("the trigger URL is on http://localhost:"),
        "{other:?}"
    );

    let ran = no_secret(run(server
        .send()
        .args(["--json", "--base-url", &format!("http://LocalHost:{port}/")])
        .args(["webhook", &trigger, "--event-id", "e-1"])));
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(ran.json()["outcome"], "accepted");
    let sent: Vec<String> = server
        .requests()
        .into_iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        sent,
        [
            "POST /oauth/token".to_owned(),
            format!("POST {WEBHOOKS}{TRIGGER}")
        ]
    );
}

/// A server that echoes every secret it has seen: the bearer token it received (in the body
/// and in `x-request-id`), the trigger token in the path, and the token request's form body
/// with the client secret, raw and decoded.
fn echo(request: &Request, before: &[Request], status: u16) -> Reply {
    let authorization = request.header("authorization").unwrap_or("none").to_owned();
    let form = before
        .iter()
        .find(|r| r.is_token_exchange())
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .unwrap_or_default();
    let body = serde_json::json!({
        "errors": [{"code": "echo", "detail": format!("you sent {authorization} to {}", request.path)}],
        "form": form,
        "secret": CLIENT_SECRET,
        "data": {"id": request.path, "attributes": {"echo": authorization}},
    });
    let mut body = body;
    body["data"]["attributes"][CLIENT_SECRET] = Value::String(authorization.clone());
    let token = authorization.trim_start_matches("Bearer ").to_owned();
    Reply::http(
        status,
        &[
            ("content-type", "application/json"),
            ("x-request-id", &token),
        ],
        body.to_string().as_bytes(),
    )
}

#[test]
fn secrets_a_server_echoes_are_redacted_from_every_output() {
    for status in [200, 503] {
        let server = Hostile::start(move |request, before| echo(request, before, status));
        let secret_file = TempFile::new("secret", format!("{CLIENT_SECRET}\n").as_bytes());
        let events = TempFile::new(
            "events.ndjson",
            b"{\"event_id\":\"s-1\",\"body\":{}}\n{\"event_id\":\"s-2\",\"body\":{}}\n",
        );
        let (url, events) = (server.trigger_url(), events.arg());
        let project = r#"{"data":{"type":"projects"}}"#;
        let commands: [Vec<&str>; 7] = [
            vec!["webhook", TRIGGER, "--event-id", "s-0", "--data", "{}"],
            vec!["webhook", &url, "--delivery-id", "s-0"],
            vec!["rehearse", TRIGGER, "--event-id", "s-0"],
            vec![
                "write",
                "POST",
                "/api/json/v1/projects",
                "--key",
                "k-1",
                "--data",
                project,
            ],
            vec!["get", "/api/json/v1/projects"],
            vec!["graphql", "--query", "{ factQuery(type: \"p\") { id } }"],
            vec!["batch", &url, "--events", &events],
        ];
        for (n, args) in commands.iter().enumerate() {
            for json in [true, false] {
                let mut command = server.send();
                if json {
                    command.arg("--json");
                }
                // The secret from the file every other run.
                if (n + usize::from(json)) % 2 == 0 {
                    command
                        .env_remove("HODOFLOW_CLIENT_SECRET")
                        .args(["--client-secret-file", &secret_file.arg()]);
                }
                let ran = no_secret(run(command.args(args)));
                assert!(matches!(ran.code, 0..=3), "{args:?}: {ran:?}");
                assert!(
                    ran.all().contains("TRACE"),
                    "{args:?}: trace is on: {ran:?}"
                );
                if json {
                    assert!(!ran.json_lines().is_empty(), "{args:?}: {ran:?}");
                }
                // The server did echo (a batch's result lines have no request ID to show it).
                if args[0] != "batch" {
                    assert!(ran.all().contains("<redacted>"), "{args:?}: {ran:?}");
                }
            }
        }
        assert!(
            server.requests().iter().any(|r| r
                .header("authorization")
                .is_some_and(|a| a.contains(ACCESS))),
            "the bearer token was sent"
        );
    }
}

#[test]
fn a_client_secret_file_that_cannot_be_read_is_not_named() {
    let server = Hostile::start(|_, _| Reply::accepted());
    let typed = std::env::temp_dir().join("cs_HOSTILE_typed_as_a_path");
    let ran = no_secret(run(server
        .send()
        .env_remove("HODOFLOW_CLIENT_SECRET")
        .args(["--client-secret-file", typed.to_str().unwrap()])
        .args(["webhook", TRIGGER, "--event-id", "e-1"])));
    nothing_sent(&server, &ran);
    assert!(
        ran.stdout
            .contains("the client secret file could not be read: entity not found"),
        "{ran:?}"
    );
    assert!(!ran.all().contains("typed_as_a_path"), "{ran:?}");
}

#[test]
fn blank_operation_ids_are_refused_before_anything_is_sent() {
    let server = Hostile::start(|_, _| Reply::accepted());
    let write = ["write", "POST", "/api/json/v1/projects", "--data", "{}"];
    let mut cases: Vec<Vec<&str>> = Vec::new();
    for blank in ["", " ", "  \t "] {
        for option in ["--event-id", "--delivery-id"] {
            cases.push(vec!["webhook", TRIGGER, option, blank, "--data", "{}"]);
            cases.push(vec!["rehearse", TRIGGER, option, blank]);
        }
        for option in ["--event-id", "--key"] {
            let mut args = write.to_vec();
            args.extend([option, blank]);
            cases.push(args);
        }
    }
    for args in &cases {
        let ran = no_secret(run(server.send().arg("--json").args(args)));
        nothing_sent(&server, &ran);
        let report = ran.json();
        assert_eq!(report["error"]["kind"], "invalid_input", "{args:?}");
        let message = report["error"]["message"].as_str().unwrap();
        assert!(message.contains("is empty or blank"), "{args:?}: {message}");
    }

    for id in ["\"\"", "\" \"", "\"\\t\\n\""] {
        let text =
            format!("{{\"event_id\":\"ok-1\",\"body\":{{}}}}\n{{\"event_id\":{id},\"body\":1}}\n");
        let events = TempFile::new("blank.ndjson", text.as_bytes());
        let ran = no_secret(run(server.send().args([
            "--json",
            "batch",
            TRIGGER,
            "--events",
            &events.arg(),
        ])));
        nothing_sent(&server, &ran);
        let message = ran.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(
            message.contains("line 2: event_id is empty or blank"),
            "{message}"
        );
    }
}

#[test]
fn a_batch_is_checked_whole_and_every_bad_line_is_named_before_the_first_send() {
    let server = Hostile::start(|_, _| Reply::accepted());
    // A body is the line's raw JSON value: a string of N characters is N + 2 bytes.
    let over = "x".repeat(1_048_576 - 2);
    let text = format!(
        "{{\"event_id\":\"a\",\"body\":{{}}}}\n\
         {{\"event_id\":\"b\",\"body\":\"{over}\"}}\n\
         {{\"event_id\":\"c\",\"body\":\"{over}x\"}}\n\
         {{\"event_id\":\" \",\"body\":{{}}}}\n\
         {{\"event_id\":\"a\",\"body\":{{\"again\":true}}}}\n\
         not json\n\
         {{\"event_id\":\"d\",\"body\":{{}}}}\n"
    );
    let events = TempFile::new("whole.ndjson", text.as_bytes());
    let ran = no_secret(run(server.send().args([
        "--json",
        "batch",
        &server.trigger_url(),
        "--events",
        &events.arg(),
    ])));
    nothing_sent(&server, &ran);
    let message = ran.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with("--events has 4 bad line(s); nothing was sent"),
        "{message}"
    );
    for says in [
        "line 3: the body is 1048577 bytes, over the 1048576-byte webhook limit",
        "line 4: event_id is empty or blank",
        "line 5: event_id repeats line 1's with a different body",
        "line 6: ",
    ] {
        assert!(message.contains(says), "{says}: {message}");
    }
    assert!(
        !message.contains("line 2:"),
        "a body at the limit is fine: {message}"
    );
}

/// The `Retry-After` that overflowed `Instant + Duration` in an earlier version of the SDK.
const HUGE: &str = "18446744073709551615";

#[test]
fn a_batch_survives_events_that_panic_with_one_line_for_each() {
    let server = Hostile::start(|_, _| Reply::http(429, &[("retry-after", HUGE)], b"slow down"));
    let mut text = String::new();
    for n in 0..20 {
        text.push_str(&format!(
            "{{\"event_id\":\"huge-{n}\",\"body\":{{\"n\":{n}}}}}\n"
        ));
    }
    let events = TempFile::new("huge.ndjson", text.as_bytes());
    let ran = no_secret(run(server.send().args([
        "batch",
        &server.trigger_url(),
        "--events",
        &events.arg(),
        "--concurrency",
        "4",
    ])));

    assert_eq!(ran.code, 3, "{ran:?}");
    let lines = ran.json_lines();
    assert_eq!(lines.len(), 20, "{ran:?}");
    let mut ids: Vec<&str> = lines
        .iter()
        .map(|l| l["event_id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 20, "{lines:?}");
    for line in &lines {
        assert_eq!(line["outcome"], "error", "{line}");
        // Before the SDK's checked arithmetic this was a panic, and the batch died with no line;
        // the panic isolation itself is unit-tested in batch.rs with a task that panics.
        assert_eq!(line["error"]["kind"], "budget_exhausted", "{line}");
        assert_eq!(
            line["delivery_id"],
            support::derived(line["event_id"].as_str().unwrap())
        );
    }
    assert!(ran.stderr.contains("batch: 20 events"), "{}", ran.stderr);
}

#[test]
fn a_huge_retry_after_never_ends_a_single_command_without_a_report() {
    let server = Hostile::start(|_, _| Reply::http(429, &[("retry-after", HUGE)], b"slow down"));
    for command in [
        vec!["--json", "webhook", TRIGGER, "--event-id", "huge-1"],
        vec![
            "--json",
            "write",
            "POST",
            "/api/json/v1/projects",
            "--key",
            "k-huge",
            "--data",
            "{}",
        ],
    ] {
        let ran = no_secret(run(server.send().args(&command)));
        assert_eq!(ran.code, 3, "{ran:?}");
        let report = ran.json();
        assert_eq!(report["error"]["kind"], "budget_exhausted", "{report}");
        assert!(report["key"].is_string(), "the key to retry with: {report}");
    }
}

#[test]
fn a_huge_retry_after_exhausts_the_budget_at_once() {
    let server = Hostile::start(|_, _| Reply::http(429, &[("retry-after", HUGE)], b"slow down"));
    let ran = no_secret(run(server.send().args([
        "--json",
        "webhook",
        TRIGGER,
        "--event-id",
        "huge-1",
    ])));
    assert_eq!(ran.code, 3, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["error"]["kind"], "budget_exhausted", "{report}");
    assert_eq!(report["attempts"].as_array().unwrap().len(), 1, "{report}");
    assert!(!ran.stderr.contains("internal error"), "{ran:?}");
}

#[test]
fn redirects_and_unusable_token_answers_are_configuration_errors_exit_1() {
    let redirect = || Reply::http(302, &[("location", "http://127.0.0.1:9/elsewhere")], b"");
    let server = Hostile::start(move |_, _| redirect());
    for args in [
        vec!["--json", "webhook", TRIGGER, "--event-id", "e-1"],
        vec!["--json", "get", "/api/json/v1/projects"],
        vec![
            "--json",
            "write",
            "POST",
            "/api/json/v1/projects",
            "--key",
            "k-1",
        ],
    ] {
        let ran = no_secret(run(server.send().args(&args)));
        assert_eq!(ran.code, 1, "{args:?}: {ran:?}");
        let report = ran.json();
        assert_eq!(report["status"], 302);
        assert_eq!(report["error"]["kind"], "configuration", "{report}");
        assert!(
            report["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("unexpected_status: ")
        );
    }

    let token_answers: [(Reply, i32, &str); 6] = [
        (
            Reply::json(200, &serde_json::json!({"token_type": "Bearer"})),
            1,
            "configuration",
        ),
        (Reply::http(200, &[], b"not json"), 1, "configuration"),
        (
            Reply::json(200, &serde_json::json!({"access_token": ""})),
            1,
            "configuration",
        ),
        (redirect(), 1, "configuration"),
        (
            Reply::json(
                503,
                &serde_json::json!({"error": "temporarily_unavailable"}),
            ),
            3,
            "transport",
        ),
        (
            Reply::http(429, &[("retry-after", "1")], b""),
            3,
            "transport",
        ),
    ];
    for (answer, code, kind) in token_answers {
        let server = Hostile::raw(move |request, _| {
            if request.is_token_exchange() {
                answer.clone()
            } else {
                Reply::accepted()
            }
        });
        let ran = no_secret(run(server.send().args([
            "--json",
            "webhook",
            TRIGGER,
            "--event-id",
            "e-1",
        ])));
        assert_eq!(ran.code, code, "{ran:?}");
        let report = ran.json();
        assert_eq!(report["error"]["kind"], kind, "{report}");
        assert!(
            report["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("token_exchange: ")
        );
        assert!(server.requests().iter().all(|r| r.is_token_exchange()));
    }
}

/// A seeded answer for one request: derived from the seed, the request's key and how many
/// requests with that key came before it, so a run is the same whatever the concurrency.
fn random_answer(seed: u64, request: &Request, before: &[Request]) -> Reply {
    let key = request
        .header("idempotency-key")
        .unwrap_or(&request.path)
        .to_owned();
    let earlier = before
        .iter()
        .filter(|r| r.header("idempotency-key").unwrap_or(&r.path) == key)
        .count();
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    for byte in key.bytes().chain(earlier.to_le_bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut rng = StdRng::seed_from_u64(seed ^ hash);
    let bearer = request.header("authorization").unwrap_or("").to_owned();
    let pick =
        |rng: &mut StdRng, items: &[&str]| items[rng.random_range(0..items.len())].to_owned();
    match rng.random_range(0..100) {
        0..=3 => return Reply::Close,
        4..=5 => return Reply::Hang(Duration::from_millis(400)),
        6..=8 => {
            let garbage: Vec<u8> = (0..rng.random_range(1..200))
                .map(|_| rng.random())
                .collect();
            return Reply::Raw(garbage);
        }
        9..=10 => {
            // Promises more body than it sends.
            return Reply::Raw(
                b"HTTP/1.1 202 Accepted\r\ncontent-length: 500\r\n\r\n{\"status\"".to_vec(),
            );
        }
        _ => {}
    }
    let status = if rng.random_bool(0.3) {
        rng.random_range(100..=599)
    } else {
        let common = [
            200, 201, 202, 202, 202, 204, 301, 302, 400, 401, 403, 404, 409, 413, 422, 429, 429,
            500, 502, 503, 503, 504,
        ];
        common[rng.random_range(0..common.len())]
    };
    let mut headers: Vec<(String, String)> = Vec::new();
    if rng.random_bool(0.12) {
        let wait = pick(
            &mut rng,
            &[
                "0",
                "1",
                "-1",
                "abc",
                HUGE,
                "9223372036854775807",
                "99999999999",
                "Wed, 21 Oct 2015 07:28:00 GMT",
                "Fri, 31 Dec 9999 23:59:59 GMT",
                "",
                "0.5",
            ],
        );
        headers.push(("retry-after".into(), wait));
    }
    if rng.random_bool(0.04) {
        let field = pick(
            &mut rng,
            &[
                "\"default\";r=0;t=1",
                "\"default\";r=0;t=999999999999999",
                "\"x\";r=0;t=-1",
                "garbage;;;",
                "\"default\";r=5;t=1",
            ],
        );
        headers.push(("ratelimit".into(), field));
    }
    if rng.random_bool(0.5) {
        let id = if rng.random_bool(0.5) {
            bearer.clone()
        } else {
            format!("req_{}", rng.random::<u32>())
        };
        headers.push(("x-request-id".into(), id));
    }
    if rng.random_bool(0.7) {
        let kind = pick(
            &mut rng,
            &[
                "application/json",
                "application/vnd.api+json",
                "text/plain",
                "application/json; charset=utf-8",
                "\u{1}garbage",
            ],
        );
        headers.push(("content-type".into(), kind));
    }
    if rng.random_bool(0.1) {
        headers.push(("idempotency-replayed".into(), "true".into()));
    }
    if rng.random_bool(0.1) {
        headers.push((
            "location".into(),
            format!("http://u:{CLIENT_SECRET}@127.0.0.1:9/"),
        ));
    }
    let body: Vec<u8> = match rng.random_range(0..12) {
        0 => Vec::new(),
        1 | 2 => {
            br#"{"status":"accepted","workflow_run_id":"3f2a0000-0000-4000-8000-000000000009"}"#
                .to_vec()
        }
        3 => br#"{"status":"duplicate"}"#.to_vec(),
        4 => format!(
            r#"{{"errors":[{{"code":"{}","detail":"{bearer} {}"}}]}}"#,
            pick(
                &mut rng,
                &[
                    "idempotency_key_in_progress",
                    "idempotency_key_reused",
                    "missing_credentials",
                    "x"
                ]
            ),
            request.path
        )
        .into_bytes(),
        5 => (0..rng.random_range(0..2000))
            .map(|_| rng.random())
            .collect(),
        6 => "[".repeat(5000).into_bytes(),
        7 => format!(r#"{{"data":{{"id":"{CLIENT_SECRET}","attributes":{{"{bearer}":1}}}}}}"#)
            .into_bytes(),
        8 => vec![b'x'; rng.random_range(10_000..200_000)],
        9 => br#"{"data":null,"errors":[{"message":"Cannot query field"}]}"#.to_vec(),
        10 => br#"{"data":{"id":"r","attributes":{"state":"succeeded"}}}"#.to_vec(),
        _ => b"null".to_vec(),
    };
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    Reply::http(status, &headers, &body)
}

#[test]
fn random_answers_end_in_a_report_never_a_panic_and_never_print_a_secret() {
    const SEEDS: [u64; 4] = [0x5eed_0001, 0x5eed_0002, 0x5eed_0003, 0x5eed_0004];
    const EVENTS: usize = 160;
    type Kinds = std::collections::BTreeMap<String, usize>;
    // One seed's server and runs: how many answers it gave, the exits and the batch's kinds.
    let one_seed = |seed: u64| -> (usize, [usize; 4], Kinds) {
        let mut exits = [0_usize; 4];
        let mut kinds = Kinds::new();
        let server = Hostile::start(move |request, before| random_answer(seed, request, before));
        let mut text = String::new();
        for n in 0..EVENTS {
            text.push_str(&format!(
                "{{\"event_id\":\"fuzz-{seed}-{n}\",\"body\":{{\"n\":{n}}}}}\n"
            ));
        }
        let events = TempFile::new("fuzz.ndjson", text.as_bytes());
        let ran = no_secret(run(server
            .send()
            .env("HODOFLOW_MAX_ATTEMPTS", "3")
            .env("HODOFLOW_MAX_ELAPSED", "1500ms")
            .env("HODOFLOW_ATTEMPT_TIMEOUT", "300ms")
            .args([
                "batch",
                &server.trigger_url(),
                "--events",
                &events.arg(),
                "--concurrency",
                "50",
                // The 160 events pass the trigger's documented 100 a minute: those past it queue
                // a second for a slot, then are listed to retry, as a refused delivery is.
                "--queue",
                "1s",
            ])));
        assert!(matches!(ran.code, 0..=3), "seed {seed}: {ran:?}");
        exits[ran.code as usize] += 1;
        let lines = ran.json_lines();
        assert_eq!(lines.len(), EVENTS, "seed {seed}: {}", ran.stderr);
        for line in &lines {
            let kind = line["error"]["kind"].as_str().unwrap_or("none").to_owned();
            *kinds.entry(kind).or_default() += 1;
            assert!(
                ["accepted", "duplicate", "error"].contains(&line["outcome"].as_str().unwrap()),
                "{line}"
            );
        }

        let project = r#"{"data":{"type":"projects"}}"#;
        for n in 0..2 {
            let key = format!("fuzz-key-{seed}-{n}");
            let event = format!("fuzz-single-{seed}-{n}");
            for args in [
                vec![
                    "--json",
                    "write",
                    "PATCH",
                    "/api/json/v1/projects/1",
                    "--key",
                    &key,
                    "--data",
                    project,
                ],
                vec!["--json", "get", "/api/json/v1/projects"],
                vec!["webhook", TRIGGER, "--event-id", &event],
            ] {
                let ran = no_secret(run(server
                    .send()
                    .env("HODOFLOW_MAX_ATTEMPTS", "3")
                    .env("HODOFLOW_MAX_ELAPSED", "800ms")
                    .env("HODOFLOW_ATTEMPT_TIMEOUT", "300ms")
                    .args(&args)));
                assert!(matches!(ran.code, 0..=3), "seed {seed} {args:?}: {ran:?}");
                exits[ran.code as usize] += 1;
                if args[0] == "--json" {
                    ran.json();
                }
            }
        }
        (server.requests().len(), exits, kinds)
    };
    // The seeds at once, each against its own server.
    let mut answers = 0;
    let mut exits = [0_usize; 4];
    let mut kinds = Kinds::new();
    std::thread::scope(|scope| {
        let runs: Vec<_> = SEEDS
            .iter()
            .map(|&seed| scope.spawn(move || one_seed(seed)))
            .collect();
        for run in runs {
            let (seen, seed_exits, seed_kinds) = run.join().expect("a seed's run panicked");
            answers += seen;
            for (total, count) in exits.iter_mut().zip(seed_exits) {
                *total += count;
            }
            for (kind, count) in seed_kinds {
                *kinds.entry(kind).or_default() += count;
            }
        }
    });
    // Most random answers are failures, so the retry budget soon finds the service down and
    // holds every attempt but its probes: how many answers a run meets depends on that, and
    // the floor only proves the generator was reached a few hundred times.
    assert!(answers >= 200, "{answers} answers");
    eprintln!("{answers} random answers; exits 0/1/2/3: {exits:?}; batch kinds: {kinds:?}");
}

/// The hostile-input audit's traversal forms against the contract server: each write and trigger
/// is refused as invalid input, exit 2, and the server's ledger shows no request, no exchange,
/// no run and no write. `write POST /api/json/%2e%2e/%2e%2e/api/v1/webhooks/<TOKEN>` once
/// passed the write check and executed a webhook delivery there.
#[test]
fn dot_segments_never_leave_their_surface_on_the_contract_server() {
    let contract = support::Contract::start();
    let token = support::TRIGGER;
    let writes = [
        format!("/api/json/%2e%2e/%2e%2e/api/v1/webhooks/{token}"),
        format!("/api/json/%2E%2E/%2E%2E/api/v1/webhooks/{token}"),
        format!("/api/json/.%2e/%2e./api/v1/webhooks/{token}"),
        format!("/api/json/../../api/v1/webhooks/{token}"),
        "/api/json/../../oauth/token".to_owned(),
        format!("/api/json/..\\..\\api/v1/webhooks/{token}"),
    ];
    for path in &writes {
        let ran = run(contract
            .send()
            .args(["--json", "write", "POST", path, "--key", "traversal"])
            .args(["--data", "{}"]));
        assert_eq!(ran.code, 2, "{path}: {ran:?}");
        assert_eq!(ran.json()["error"]["kind"], "invalid_input", "{path}");
    }
    for dots in [".", ".."] {
        let ran = run(contract
            .send()
            .args(["--json", "webhook", dots, "--event-id", "traversal"])
            .args(["--data", "{}"]));
        assert_eq!(ran.code, 2, "{dots}: {ran:?}");
        assert!(!ran.all().contains(token));
    }
    let ledger = contract.ledger();
    assert!(ledger.requests().is_empty(), "{:?}", ledger.requests());
    assert!(ledger.exchanges().is_empty());
    assert_eq!(ledger.total_runs(), 0, "no webhook ran");
    assert_eq!(ledger.total_writes_executed(), 0, "no write ran");
}

/// A port on 127.0.0.1 that accepts every connection and never answers nor closes one.
fn silent_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    port
}

/// A PostgreSQL outbox that accepts TCP and never answers hung `outbox status` and
/// `batch --outbox` for more than 150 s, whatever `--max-elapsed` and `connect_timeout` said
/// (found by the hostile-input audit). Each now ends after `--store-timeout` with a transport
/// error, exit 3, that names the store's 1 s limit as what ended it (not the URL's 3 s
/// `connect_timeout`, nor the 3 s budget). The command's 30 s timeout ([`Hostile::send`]) is the
/// hang guard.
#[test]
fn a_silent_postgres_outbox_ends_within_the_store_timeout() {
    let server = Hostile::start(|_, _| Reply::accepted());
    let port = silent_port();
    let url = format!("postgres://u:pw_SILENT_db@127.0.0.1:{port}/db?connect_timeout=3");
    let events = TempFile::new(
        "silent-postgres.ndjson",
        b"{\"event_id\":\"e-1\",\"body\":{}}\n",
    );
    let events = events.arg();
    let status = [
        "--json",
        "--store-timeout",
        "1s",
        "outbox",
        "--outbox",
        &url,
        "status",
    ];
    let batch = [
        "--max-elapsed",
        "3s",
        "--store-timeout",
        "1s",
        "batch",
        TRIGGER,
        "--events",
        &events,
        "--outbox",
        &url,
    ];
    for args in [&status[..], &batch[..]] {
        let ran = no_secret(run(server.send().args(args)));
        assert_eq!(ran.code, 3, "{args:?}: {ran:?}");
        assert!(
            ran.all()
                .contains("no answer within 1s (the store's connect timeout)"),
            "{args:?}: {ran:?}"
        );
        assert!(!ran.all().contains("pw_SILENT_db"), "{ran:?}");
    }
    assert!(
        server.requests().is_empty(),
        "nothing is sent without the outbox"
    );
}

/// A duration over its documented maximum is a usage error where it enters, flag or
/// environment (`--max-elapsed 5000000000000h batch … --outbox o.db` was once accepted and
/// wedged the outbox), and nothing is sent or stored.
#[test]
fn a_duration_over_its_maximum_is_a_usage_error_and_stores_nothing() {
    let server = Hostile::start(|_, _| Reply::accepted());
    let dir =
        std::env::temp_dir().join(format!("hodoflow-send-hostile-dur-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let outbox = dir.join("o.db").display().to_string();
    let events = TempFile::new("dur.ndjson", b"{\"event_id\":\"e-1\",\"body\":{}}\n");
    let events = events.arg();
    let batch = ["batch", TRIGGER, "--events", &events, "--outbox", &outbox];
    for (flag, value) in [
        ("--max-elapsed", "5000000000000h"),
        ("--max-elapsed", "25h"),
        ("--attempt-timeout", "86400001ms"),
        ("--store-timeout", "25h"),
        ("--lease", "169h"),
    ] {
        let ran = no_secret(run(server
            .send()
            .arg("--json")
            .args(batch)
            .args([flag, value])));
        nothing_sent(&server, &ran);
        assert!(ran.all().contains("maximum"), "{flag} {value}: {ran:?}");
    }
    let ran = run(server
        .send()
        .env("HODOFLOW_MAX_ELAPSED", "5000000000000h")
        .args(batch));
    nothing_sent(&server, &ran);
    assert!(
        !std::path::Path::new(&outbox).exists(),
        "no outbox was created"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An outbox wedged by an old build (a job in flight under a lease ending at `i64::MAX`
/// milliseconds, written directly into the SQLite file) recovers: `outbox retry` requeues it
/// instead of refusing it as in flight, and a worker takes a wedged lease as expired.
#[test]
fn a_wedged_outbox_recovers_through_retry_and_the_worker() {
    let contract = support::Contract::start();
    let dir = std::env::temp_dir().join(format!(
        "hodoflow-send-hostile-wedge-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let outbox = dir.join("o.db").display().to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let stored = hodoflow_outbox::Outbox::sqlite(&outbox).await.unwrap();
        for event in ["wedged-1", "wedged-2"] {
            stored
                .enqueue(
                    event,
                    hodoflow_outbox::Target::webhook(support::TRIGGER),
                    "{}",
                )
                .await
                .unwrap();
        }
    });
    let db = rusqlite::Connection::open(&outbox).unwrap();
    let wedged = db
        .execute(
            "UPDATE outbox_jobs SET state = 'in_flight', lease_owner = 'old-build', \
             lease_until = 9223372036854775807, next_at = 9223372036854775807, \
             claim = claim + 1, first_sent_at = created_at",
            [],
        )
        .unwrap();
    assert_eq!(wedged, 2);
    drop(db);

    let retry = run(contract
        .send()
        .args(["--json", "outbox", "--outbox", &outbox, "retry", "wedged-1"]));
    assert_eq!(retry.code, 0, "a wedged job is requeued: {retry:?}");
    let worker = run(contract
        .send()
        .env("HODOFLOW_TRIGGER_TOKEN", support::TRIGGER)
        .args(["outbox", "--outbox", &outbox, "worker", "--until-idle"]));
    assert_eq!(worker.code, 0, "{worker:?}");
    let status = run(contract
        .send()
        .args(["--json", "outbox", "--outbox", &outbox, "status"]));
    assert_eq!(status.code, 0, "{status:?}");
    let counts = status.json();
    assert_eq!(counts["accepted"], 2, "{counts}");
    assert_eq!(contract.ledger().total_runs(), 2, "each event ran once");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A token server issuing a token with CR/LF, NUL or ESC once gave 12 exchanges over 58 s, then
/// exit 3. Each is now refused at its first exchange as an unusable token (`configuration`, exit
/// 1: waiting cannot heal it), nothing is sent to the API, and the report's own words are intact.
/// A token that is one of the tool's words (`accepted`) is no longer refused: the tool's own
/// words are never redacted (`tests/own_words.rs`).
#[test]
fn an_unusable_access_token_is_a_configuration_error_at_once() {
    for token in [
        "ok",
        "tok-0001\r\nX-Injected: 1",
        "tok-0001\u{0}padding",
        "\u{1b}[31mtoken-with-escape",
    ] {
        let issued = token.to_owned();
        let server = Hostile::raw(move |request, _| {
            if request.is_token_exchange() {
                return Reply::json(
                    200,
                    &serde_json::json!({"access_token": issued, "token_type": "Bearer",
                                        "expires_in": 3600}),
                );
            }
            Reply::accepted()
        });
        // At once: the first answer ends the call as a configuration error, with no second
        // exchange (two attempts are allowed) and not on its 20 s budget (`budget_exhausted`).
        let ran = no_secret(run(server.send().env("HODOFLOW_MAX_ELAPSED", "20s").args(
            [
                "--json",
                "webhook",
                TRIGGER,
                "--event-id",
                "e-1",
                "--data",
                "{}",
            ],
        )));
        assert_eq!(ran.code, 1, "{token:?}: {ran:?}");
        let report = ran.json();
        assert_eq!(report["outcome"], "error", "{token:?}: {report}");
        assert_eq!(
            report["error"]["kind"], "configuration",
            "{token:?}: {report}"
        );
        let message = report["error"]["message"].as_str().unwrap();
        assert!(message.contains("unusable token"), "{message}");
        assert!(
            !ran.stdout.contains("<redacted>"),
            "{token:?}: {}",
            ran.stdout
        );
        let requests = server.requests();
        assert_eq!(
            requests.len(),
            1,
            "one exchange, nothing else: {requests:?}"
        );
        assert!(requests[0].is_token_exchange());
    }
}

/// An `--outbox` that no wait can heal was once reported `[transport]`, exit 3. A directory, a
/// device, a file that is not SQLite and a file in a missing directory are now a `configuration`
/// error, exit 1, with the reason; a libpq connection string is refused with a hint to write a
/// `postgres://` URL, exit 2, and no file named after it (password included) is created. Nothing
/// is sent.
#[test]
fn an_outbox_that_cannot_heal_is_a_configuration_error_with_its_reason() {
    let server = Hostile::start(|_, _| Reply::accepted());
    let dir =
        std::env::temp_dir().join(format!("hodoflow-send-hostile-box-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_sqlite = dir.join("notes.txt");
    std::fs::write(&not_sqlite, "these are notes, not a database\n".repeat(200)).unwrap();
    let events = TempFile::new("box.ndjson", b"{\"event_id\":\"e-1\",\"body\":{}}\n");
    let events = events.arg();
    for (outbox, says) in [
        (dir.display().to_string(), "directory"),
        ("/dev/null".to_owned(), "not a regular file"),
        (not_sqlite.display().to_string(), "not an SQLite database"),
        (
            dir.join("missing").join("o.db").display().to_string(),
            "cannot be opened or created",
        ),
    ] {
        let status = run(server
            .send()
            .args(["--json", "outbox", "--outbox", &outbox, "status"]));
        let batch = run(server.send().args([
            "--json", "batch", TRIGGER, "--events", &events, "--outbox", &outbox,
        ]));
        for ran in [status, batch] {
            assert_eq!(ran.code, 1, "{outbox}: {ran:?}");
            assert!(ran.all().contains("configuration"), "{outbox}: {ran:?}");
            assert!(ran.all().contains(says), "{outbox}: {ran:?}");
            assert!(!ran.all().contains("[transport]"), "{outbox}: {ran:?}");
        }
    }
    let libpq = "host=127.0.0.1 user=u password=pw_LIBPQ_secret dbname=x";
    let ran = no_secret(run(server
        .send()
        .current_dir(&dir)
        .args(["--json", "outbox", "--outbox", libpq, "status"])));
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.all().contains("postgres://"), "{ran:?}");
    assert!(!ran.all().contains("pw_LIBPQ_secret"), "{ran:?}");
    let created: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(
        created,
        vec![std::ffi::OsString::from("notes.txt")],
        "no file created"
    );
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    let _ = std::fs::remove_dir_all(&dir);
}

/// An events file that starts with a UTF-8 byte-order mark was once refused with a JSON parse
/// error at line 1, column 1; it is now read, with CRLF line ends too.
#[test]
fn an_events_file_with_a_byte_order_mark_and_crlf_is_delivered() {
    let server = Hostile::start(|_, _| Reply::accepted());
    let events = TempFile::new(
        "bom.ndjson",
        b"\xEF\xBB\xBF{\"event_id\":\"e-1\",\"body\":{}}\r\n{\"event_id\":\"e-2\",\"body\":{}}\r\n",
    );
    let ran = no_secret(run(server.send().args([
        "--json",
        "batch",
        TRIGGER,
        "--events",
        &events.arg(),
    ])));
    assert_eq!(ran.code, 0, "{ran:?}");
    let lines = ran.json_lines();
    assert_eq!(lines.len(), 2, "{ran:?}");
    assert!(
        lines.iter().all(|line| line["outcome"] == "accepted"),
        "{ran:?}"
    );
}
