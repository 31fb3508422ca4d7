//! The status page (`outbox serve`, the built binary on 127.0.0.1:0) against what an attacker
//! can do from the operator's machine or browser: another `Host` (DNS rebinding), a session
//! cookie planted before a login, a flood of anonymous requests, guesses of the admin token,
//! connections that send their headers slowly or never read, a weak admin token; and against a
//! server that echoes every secret the sender holds: no secret's bytes reach the outbox's rows,
//! the page, the metrics or the sender's output, though the page's process knows none of them.

mod support;

use std::io::{BufRead as _, BufReader, ErrorKind, Read as _, Write as _};
use std::time::Duration;

use serde_json::json;
use support::hostile::{Hostile, Reply, Request};
use support::page::{
    assert_security_headers, connect, get, get_with, host, http, parse, post, serve, set_cookie,
};
use support::{Contract, TempDir, TempFile, run};

/// The page's admin token.
const ADMIN_TOKEN: &str = "admin-token-0123456789abcdef";

/// A trigger the contract server does not know: its deliveries fail on a 404.
const MISSING: &str = "trg_missing_page_security_3f1";

/// An outbox with one failed job, `missing-0`, and a file holding the admin token.
fn outbox(contract: &Contract, dir: &TempDir) -> (String, TempFile) {
    let db = dir.file("outbox.db");
    let events = TempFile::new(
        "events.ndjson",
        b"{\"event_id\":\"missing-0\",\"body\":{}}\n",
    );
    let ran = run(contract.send().args([
        "--max-attempts",
        "1",
        "batch",
        MISSING,
        "--events",
        &events.arg(),
        "--outbox",
        &db,
    ]));
    assert_eq!(ran.code, 1, "{ran:?}");
    let token = TempFile::new("admin-token", format!("{ADMIN_TOKEN}\n").as_bytes());
    (db, token)
}

/// A request to `base` whose `Host` is `host_header`.
fn with_host(
    base: &str,
    method: &str,
    path: &str,
    host_header: &str,
    extra: &str,
) -> (u16, String, String) {
    http(
        base,
        &format!(
            "{method} {path} HTTP/1.1\r\nHost: {host_header}\r\nConnection: close\r\n\
             Content-Length: 0\r\n{extra}\r\n"
        ),
    )
}

#[test]
fn a_foreign_host_gets_no_page_on_any_route() {
    let contract = Contract::start();
    let dir = TempDir::new("host");
    let (db, token) = outbox(&contract, &dir);
    let (_page, base) = serve(
        contract.child(),
        &db,
        &[
            "--admin-token-file",
            &token.arg(),
            "--admin-host",
            "status.example",
        ],
    );
    let port = host(&base).rsplit(':').next().unwrap().to_owned();
    let bearer = format!("Authorization: Bearer {ADMIN_TOKEN}\r\n");
    let routes = [
        ("GET", "/"),
        ("GET", "/jobs/missing-0"),
        ("GET", "/ready"),
        ("GET", "/style.css"),
        ("GET", "/metrics"),
        ("GET", "/no-such-page"),
        ("POST", "/login"),
        ("POST", "/logout"),
        ("POST", "/jobs/missing-0/retry"),
    ];
    // A name that a web page resolved to 127.0.0.1, with or without the page's port.
    for foreign in [
        format!("attacker.example:{port}"),
        "attacker.example".to_owned(),
        format!("127.0.0.1.attacker.example:{port}"),
        "localhost:1".to_owned(),
    ] {
        for (method, path) in routes {
            let (status, head, body) = with_host(&base, method, path, &foreign, &bearer);
            assert_eq!(status, 421, "{method} {path} with Host {foreign}: {body}");
            assert_security_headers(&head);
            assert!(body.contains("answers only to its own names"), "{body}");
            assert!(!head.contains("set-cookie"), "{head}");
        }
    }
    // Without a Host at all (HTTP/1.0): refused too.
    let (status, _, _) = http(&base, "GET /metrics HTTP/1.0\r\n\r\n");
    assert_eq!(status, 421);
    // The job was not requeued by any of them.
    let (_, _, page) = get(&base, "/jobs/missing-0");
    assert!(page.contains("id=\"job-state\">failed<"), "{page}");
    // Its own names: the address, localhost, and the name given.
    for own in [
        host(&base).to_owned(),
        format!("localhost:{port}"),
        "LocalHost".to_owned(),
        "status.example".to_owned(),
        "status.example:443".to_owned(),
    ] {
        for path in ["/", "/ready", "/metrics", "/style.css"] {
            let (status, _, body) = with_host(&base, "GET", path, &own, "");
            assert_eq!(status, 200, "{path} with Host {own}: {body}");
        }
    }
}

/// The `value` of the first hidden `csrf` field of `page`.
fn csrf_field(page: &str) -> String {
    page.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no CSRF field: {page}"))
        .to_owned()
}

/// Sends `count` GET requests over kept-alive connections, each with the headers
/// `headers(n)` gives, and returns how many were answered 200.
fn many(base: &str, count: usize, headers: impl Fn(usize) -> (String, String)) -> usize {
    let mut answered = 0;
    let mut stream = BufReader::new(connect(base));
    for n in 0..count {
        let (path, extra) = headers(n);
        let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n{extra}\r\n", host(base));
        if stream.get_mut().write_all(request.as_bytes()).is_err() {
            stream = BufReader::new(connect(base));
            stream.get_mut().write_all(request.as_bytes()).unwrap();
        }
        let mut head = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            stream.read_line(&mut line).unwrap();
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line);
        }
        let mut body = vec![0; length];
        stream.read_exact(&mut body).unwrap();
        if head.starts_with("HTTP/1.1 200") {
            answered += 1;
        }
    }
    answered
}

#[test]
fn a_login_makes_a_new_session_and_anonymous_traffic_cannot_log_the_admin_out() {
    let contract = Contract::start();
    let dir = TempDir::new("session");
    let (db, token) = outbox(&contract, &dir);
    let (_page, base) = serve(contract.child(), &db, &["--admin-token-file", &token.arg()]);
    let planted = "f".repeat(64);
    let logged_in = |cookie: &str| {
        let (status, _, body) = get_with(&base, "/", &format!("Cookie: {cookie}\r\n"));
        assert_eq!(status, 200, "{body}");
        body.contains("Logged in with the admin token")
    };

    // An anonymous read: a CSRF token for the login form, no session.
    let (status, head, page) = get_with(
        &base,
        "/",
        &format!("Cookie: hodoflow_session={planted}\r\n"),
    );
    assert_eq!(status, 200);
    assert!(set_cookie(&head, "hodoflow_session").is_none(), "{head}");
    let csrf = set_cookie(&head, "hodoflow_csrf")
        .expect("a CSRF cookie")
        .to_owned();
    assert_eq!(csrf_field(&page), csrf);
    assert!(
        head.contains("httponly") && head.contains("samesite=strict"),
        "{head}"
    );
    assert!(!logged_in(&format!("hodoflow_session={planted}")));

    // A login form without its cookie is refused.
    let (status, _, _) = post(
        &base,
        "/login",
        "",
        &format!("csrf={csrf}&token={ADMIN_TOKEN}"),
    );
    assert_eq!(status, 403);

    // The login, with the planted session cookie: a new session ID, never the planted one.
    let (status, head, _) = post(
        &base,
        "/login",
        &format!("Cookie: hodoflow_session={planted}; hodoflow_csrf={csrf}\r\n"),
        &format!("csrf={csrf}&token={ADMIN_TOKEN}&back=%2F"),
    );
    assert_eq!(status, 303, "{head}");
    let session = set_cookie(&head, "hodoflow_session")
        .expect("a session cookie at login")
        .to_owned();
    assert_eq!(session.len(), 64);
    assert_ne!(session, planted);
    let admin = format!("hodoflow_session={session}");
    assert!(logged_in(&admin));
    assert!(
        !logged_in(&format!("hodoflow_session={planted}")),
        "the planted ID opens nothing"
    );

    // 2,000 anonymous requests, with no cookie, made-up session IDs and CSRF cookies.
    let answered = many(&base, 2_000, |n| {
        let path = if n % 10 == 0 { "/" } else { "/jobs/missing-0" };
        let cookie = match n % 3 {
            0 => String::new(),
            1 => format!("Cookie: hodoflow_session={:064x}\r\n", n),
            _ => format!("Cookie: hodoflow_csrf={:064x}\r\n", n),
        };
        (path.to_owned(), cookie)
    });
    assert_eq!(answered, 2_000);
    assert!(logged_in(&admin), "the admin is still logged in");

    // Logout: the session is forgotten and its cookie cleared.
    let (_, _, page) = get_with(&base, "/", &format!("Cookie: {admin}\r\n"));
    let session_csrf = csrf_field(&page);
    assert_ne!(
        session_csrf, csrf,
        "the session has a CSRF token of its own"
    );
    let (status, head, _) = post(
        &base,
        "/logout",
        &format!("Cookie: {admin}\r\n"),
        &format!("csrf={session_csrf}"),
    );
    assert_eq!(status, 303);
    assert!(
        head.contains("hodoflow_session=; path=/; httponly; samesite=strict; max-age=0"),
        "{head}"
    );
    assert!(!logged_in(&admin), "the old ID opens nothing after logout");
}

#[test]
fn wrong_admin_tokens_are_throttled_per_client() {
    let contract = Contract::start();
    let dir = TempDir::new("throttle");
    let (db, token) = outbox(&contract, &dir);
    let (_page, base) = serve(contract.child(), &db, &["--admin-token-file", &token.arg()]);
    let (_, head, _) = get(&base, "/");
    let csrf = set_cookie(&head, "hodoflow_csrf").unwrap().to_owned();
    let cookie = format!("Cookie: hodoflow_csrf={csrf}\r\n");
    let login = |token: &str| {
        post(
            &base,
            "/login",
            &cookie,
            &format!("csrf={csrf}&token={token}"),
        )
    };

    // 20 guesses at once: two are free, the third shuts the client out, the rest are not even
    // compared.
    let guesses: Vec<u16> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..20)
            .map(|n| scope.spawn(move || login(&format!("guess-{n:04}-0123456789abcdef")).0))
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(
        guesses.iter().filter(|&&s| s == 403).count(),
        3,
        "{guesses:?}"
    );
    assert_eq!(
        guesses.iter().filter(|&&s| s == 429).count(),
        17,
        "{guesses:?}"
    );

    // Shut out: the right token is refused too, as a bearer token and in the form.
    let (status, head, body) = login(ADMIN_TOKEN);
    assert_eq!(status, 429, "{body}");
    assert!(head.contains("retry-after: "), "{head}");
    assert_security_headers(&head);
    let (status, _, _) = post(
        &base,
        "/jobs/missing-0/retry",
        &format!("Authorization: Bearer {ADMIN_TOKEN}\r\n"),
        "",
    );
    assert_eq!(status, 429);
    let (_, _, page) = get(&base, "/jobs/missing-0");
    assert!(
        page.contains("id=\"job-state\">failed<"),
        "not requeued: {page}"
    );
}

#[test]
fn a_weak_admin_token_is_refused_at_start_up_with_a_way_to_make_one() {
    let contract = Contract::start();
    let dir = TempDir::new("weak");
    let db = dir.file("outbox.db");
    for weak in ["aaaaaaaaaaaaaaaa", "0123456789abcdef", "passwordpassword"] {
        let token = TempFile::new("weak-token", format!("{weak}\n").as_bytes());
        let ran = run(contract.send().args([
            "outbox",
            "--outbox",
            &db,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-token-file",
            &token.arg(),
        ]));
        assert_eq!(ran.code, 2, "{ran:?}");
        let all = ran.all();
        assert!(
            all.contains("too weak") && all.contains("openssl rand -hex 32"),
            "{all}"
        );
        assert!(!all.contains(weak), "{all}");
        assert!(
            !std::path::Path::new(&db).exists(),
            "refused before the store is opened"
        );
    }
}

/// Reads what the connection `stream` gets until it is closed; panics when it is still open
/// after the read timeout (10 s, well past the test's timeouts of 1 and 2 s).
#[track_caller]
fn closed(stream: &mut std::net::TcpStream) -> String {
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => String::from_utf8_lossy(&answer).into_owned(),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => String::new(),
        Err(e) => panic!("the connection is still open: {e}"),
    }
}

#[test]
fn slow_and_idle_connections_are_closed_and_their_number_is_capped() {
    let contract = Contract::start();
    let dir = TempDir::new("slow");
    let (db, _token) = outbox(&contract, &dir);
    let (_page, base) = serve(
        contract.child(),
        &db,
        &["--admin-header-timeout", "1s", "--admin-idle-timeout", "2s"],
    );
    // Headers never finished: closed after the header-read timeout (1 s here).
    let mut slow = connect(&base);
    slow.write_all(format!("GET / HTTP/1.1\r\nHost: {}\r\nX-Slow: ", host(&base)).as_bytes())
        .unwrap();
    let answer = closed(&mut slow);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
    // Nothing sent at all: closed too.
    let mut silent = connect(&base);
    closed(&mut silent);
    // A body that stalls: closed after the idle timeout (2 s here).
    let mut stalled = connect(&base);
    stalled
        .write_all(
            format!(
                "POST /login HTTP/1.1\r\nHost: {}\r\nContent-Type: \
                 application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ncsrf=",
                host(&base)
            )
            .as_bytes(),
        )
        .unwrap();
    closed(&mut stalled);
    // The page still answers.
    assert_eq!(get(&base, "/ready").0, 200);

    // At most 2 connections: a third waits until one of them closes.
    let (_capped, base) = serve(
        contract.child(),
        &db,
        &[
            "--admin-max-connections",
            "2",
            "--admin-header-timeout",
            "60s",
        ],
    );
    let first = connect(&base);
    let second = connect(&base);
    let mut third = connect(&base);
    third
        .write_all(
            format!(
                "GET /ready HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                host(&base)
            )
            .as_bytes(),
        )
        .unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut byte = [0_u8; 1];
    let waiting = third.read(&mut byte).unwrap_err();
    assert!(
        matches!(waiting.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "the third connection was served beside two: {waiting}"
    );
    drop(first);
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    third.read_to_string(&mut answer).unwrap();
    let (status, _, body) = parse(&answer);
    assert_eq!((status, body.as_str()), (200, "ready\n"));
    drop(second);
}

/// The client secret the sender holds: with characters a form body percent-encodes. The
/// secrets of this test are random-looking, so that no 8 bytes of one are ordinary words.
const CLIENT_SECRET: &str = "cs_Q7v2/k9Xw+3mZp8=";
/// The trigger token.
const TRIGGER: &str = "trg_5b1e9a7c3d2f40e6";
/// What every access token the echo server issues starts with (a counter follows).
const ACCESS: &str = "hft_8d4c0f6a2e9b_";
/// The admin token of the echo test's page.
const ECHO_ADMIN_TOKEN: &str = "adm_9f2c7e41d8b3a65c0e7f";

/// The echo server's answer to `request`: a token for an exchange; else what the request's
/// body orders, the secret it names after `pad` bytes, in `x-request-id` and either the error
/// code of a `422` or the run ID of a `202`.
fn echo(request: &Request, before: &[Request]) -> Reply {
    if request.is_token_exchange() {
        let issued = before.iter().filter(|r| r.is_token_exchange()).count();
        return Reply::json(
            200,
            &json!({"access_token": format!("{ACCESS}{issued:04}"), "token_type": "Bearer",
                    "expires_in": 3600}),
        );
    }
    let order: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
    let pad = order["pad"].as_u64().unwrap_or(0) as usize;
    let secret = match order["secret"].as_str() {
        Some("token") => request
            .header("authorization")
            .and_then(|value| value.strip_prefix("Bearer "))
            .unwrap_or_default()
            .to_owned(),
        Some("client") => CLIENT_SECRET.to_owned(),
        _ => request
            .path
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
    };
    let request_id = format!("{}{secret}\t-tail", "r".repeat(pad));
    let text = format!("{}{secret}\u{202e}\u{1b}[2J-tail", "x".repeat(pad));
    let headers = [
        ("content-type", "application/json"),
        ("x-request-id", request_id.as_str()),
    ];
    match order["place"].as_str() {
        Some("run_id") => Reply::http(
            202,
            &headers,
            json!({"status": "accepted", "workflow_run_id": text})
                .to_string()
                .as_bytes(),
        ),
        _ => Reply::http(422, &headers, json!({"error": text}).to_string().as_bytes()),
    }
}

/// Every order: each secret, in each place, just before, across and just after each cut the
/// client and the outbox make (100 bytes of a quoted code, 128 of a request ID, 256 of a run
/// ID and of a stored text).
fn orders() -> Vec<serde_json::Value> {
    let mut orders = Vec::new();
    for secret in ["token", "client", "trigger"] {
        for (place, cuts) in [
            ("refusal", &[100, 128, 256][..]),
            ("run_id", &[128, 256][..]),
        ] {
            for &cut in cuts {
                for pad in [cut - 31, cut - 26, cut - 12, cut - 8, cut - 7, cut - 1, cut] {
                    orders.push(json!({"secret": secret, "place": place, "pad": pad}));
                }
            }
        }
    }
    orders
}

/// The first piece of 8 bytes or more of a secret that `text` holds.
fn leak(text: &str, secrets: &[String]) -> Option<String> {
    secrets.iter().find_map(|secret| {
        secret
            .as_bytes()
            .windows(8)
            .find(|piece| text.as_bytes().windows(8).any(|window| window == *piece))
            .map(|piece| String::from_utf8_lossy(piece).into_owned())
    })
}

#[track_caller]
fn assert_clean(what: &str, text: &str, secrets: &[String]) {
    if let Some(piece) = leak(text, secrets) {
        panic!("{what} holds {piece:?}: {text}");
    }
    assert!(
        !text.contains(['\u{202e}', '\u{1b}']),
        "{what} holds a control or bidi character as it came"
    );
}

#[test]
fn no_secret_a_server_echoes_reaches_the_outbox_the_page_the_metrics_or_the_output() {
    let server = Hostile::raw(echo);
    let dir = TempDir::new("echo");
    let db = dir.file("outbox.db");
    let orders = orders();
    let events: String = orders
        .iter()
        .enumerate()
        .map(|(n, order)| {
            format!(
                "{}\n",
                json!({"event_id": format!("echo-{n}"), "body": order})
            )
        })
        .collect();
    let events = TempFile::new("echo.ndjson", events.as_bytes());
    let mut batch = assert_cmd::Command::cargo_bin("hodoflow-send").unwrap();
    batch
        .env_clear()
        .env("HODOFLOW_BASE_URL", &server.base_url)
        .env("HODOFLOW_CLIENT_ID", "svc-echo")
        .env("HODOFLOW_CLIENT_SECRET", CLIENT_SECRET)
        .env("HODOFLOW_MAX_ATTEMPTS", "1")
        .env("RUST_LOG", "debug")
        .timeout(Duration::from_secs(120))
        .args([
            "--json",
            "batch",
            TRIGGER,
            "--events",
            &events.arg(),
            "--outbox",
            &db,
            "--trigger-limit",
            "off",
        ]);
    let ran = run(&mut batch);
    assert_eq!(ran.code, 1, "some failed: {}", ran.stderr);
    let issued = server
        .requests()
        .iter()
        .filter(|r| r.is_token_exchange())
        .count();
    assert!(issued >= 1);
    let mut secrets: Vec<String> = (0..issued).map(|n| format!("{ACCESS}{n:04}")).collect();
    secrets.extend([CLIENT_SECRET, TRIGGER, ECHO_ADMIN_TOKEN].map(str::to_owned));
    // The secrets did reach the server, and it echoed them.
    assert!(server.requests().iter().any(|r| r.path.ends_with(TRIGGER)));
    assert_clean("batch's output", &ran.all(), &secrets);

    // The stored rows, every column but the trigger's route and the body.
    let connection = rusqlite::Connection::open(&db).unwrap();
    let mut statement = connection.prepare("SELECT * FROM outbox_jobs").unwrap();
    let columns: Vec<String> = statement.column_names().map(str::to_owned).collect();
    let mut rows = statement.query([]).unwrap();
    let mut stored = 0;
    while let Some(row) = rows.next().unwrap() {
        for (at, column) in columns.iter().enumerate() {
            if column == "route" || column == "body" {
                continue;
            }
            let text = match row.get_ref(at).unwrap() {
                rusqlite::types::ValueRef::Text(bytes) | rusqlite::types::ValueRef::Blob(bytes) => {
                    String::from_utf8_lossy(bytes).into_owned()
                }
                _ => continue,
            };
            assert_clean(&format!("column {column}"), &text, &secrets);
        }
        stored += 1;
    }
    assert_eq!(stored, orders.len());

    // The page, from a process that was never given a secret: every listing, every job, the
    // metrics.
    let mut bare = std::process::Command::new(env!("CARGO_BIN_EXE_hodoflow-send"));
    bare.env_clear();
    let token = TempFile::new("admin-token", format!("{ECHO_ADMIN_TOKEN}\n").as_bytes());
    let (_page, base) = serve(bare, &db, &["--admin-token-file", &token.arg()]);
    let mut pages = vec!["/".to_owned(), "/metrics".to_owned()];
    for state in ["failed", "accepted"] {
        let mut next = Some(format!("/?state={state}"));
        while let Some(path) = next.take() {
            let (status, _, body) = get(&base, &path);
            assert_eq!(status, 200, "{path}");
            next = body
                .split(&format!("id=\"next-{state}\" href=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .map(|link| link.replace("&amp;", "&"));
            pages.push(path);
        }
    }
    pages.extend((0..orders.len()).map(|n| format!("/jobs/echo-{n}")));
    for path in &pages {
        let (status, _, body) = get(&base, path);
        assert_eq!(status, 200, "{path}: {body}");
        assert_clean(path, &body, &secrets);
    }
    let (_, _, failed) = get(&base, "/?state=failed");
    assert!(
        failed.contains("&lt;redacted&gt;"),
        "the echoes were there to redact: {failed}"
    );
    assert!(
        failed.contains("\\t-tail"),
        "a tab is shown escaped: {failed}"
    );
}
