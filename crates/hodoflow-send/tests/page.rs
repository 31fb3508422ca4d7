//! The status page (`outbox serve`, `outbox worker --admin`) in a real browser: headless
//! Chromium driven through chromedriver (WebDriver, the `fantoccini` crate), against the page
//! served by the built binary on 127.0.0.1:0, over an outbox whose jobs the CLI delivered to the
//! contract server (accepted, failed on a 404, sent and unanswered so it may have run, paused by a
//! 429), plus one job whose stored error holds markup and a service held down. Only loopback
//! traffic.
//!
//! Needs `chromedriver` and `chromium` on the PATH (Debian: `apt-get install chromium
//! chromium-driver`; `.ci/chromium.sh` installs them). Without them the browser test prints why
//! and passes, unless `CI_REQUIRES_CHROMIUM=1` (as `.ci/run` sets): then it fails.
//! `HODOFLOW_SCREENSHOT=docs/status-page.png` keeps the overview's screenshot there (the
//! README of hodoflow-send shows it).

mod support;

use std::io::{BufRead as _, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use fantoccini::{Client, ClientBuilder, Locator};
use hodoflow_mock::Fault;
use hodoflow_outbox::{JobState, LastError, Outbox, Record, Target};

use support::page::{Running, assert_security_headers, get, host, http, post};
use support::{Contract, HangGuard, TRIGGER, TempDir, TempFile, WEBHOOKS, derived, run};

/// A trigger the server does not know: its deliveries fail on a 404. It looks like a secret,
/// and no page may show it.
const MISSING: &str = "trg_missing_SECRET_7c2a";

/// The service the workers hold down.
const DOWN: &str = "hodoflow http://127.0.0.1:8080 webhook";

/// The page's admin token.
const ADMIN_TOKEN: &str = "admin-token-0123456789abcdef";

/// What the stored error of the hostile job says.
const HOSTILE_MESSAGE: &str =
    "<script>document.title='owned'</script> & <img src=x onerror=\"document.title='owned'\">";

/// NDJSON of `count` events `<prefix>-<n>`.
fn events(prefix: &str, count: usize) -> String {
    (0..count)
        .map(|n| format!("{{\"event_id\":\"{prefix}-{n}\",\"body\":{{\"order\":{n}}}}}\n"))
        .collect()
}

/// Starts `hodoflow-send outbox serve` over `outbox` on 127.0.0.1:0 with `extra` arguments;
/// returns it and its base URL, read from the line it prints.
fn serve(contract: &Contract, outbox: &str, extra: &[&str]) -> (Running, String) {
    support::page::serve(contract.child(), outbox, extra)
}

/// A program on the PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// chromedriver on a free loopback port, and its URL; `None` (the test skips) when it is not
/// installed and CI does not require it.
fn chromedriver() -> Option<(Running, String)> {
    let Some(driver) = on_path("chromedriver") else {
        assert!(
            std::env::var("CI_REQUIRES_CHROMIUM").as_deref() != Ok("1"),
            "CI_REQUIRES_CHROMIUM=1 but chromedriver is not on the PATH (.ci/chromium.sh)"
        );
        println!("skipped: no chromedriver on the PATH (apt-get install chromium chromium-driver)");
        return None;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let running = Running(child);
    let guard = HangGuard::new(Duration::from_secs(20));
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        guard.check("chromedriver to listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some((running, format!("http://127.0.0.1:{port}")))
}

/// Headless Chromium, in a fresh profile under `profile`.
async fn browser(driver: &str, profile: &Path) -> Client {
    let mut options = serde_json::json!({
        "args": [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            "--disable-dev-shm-usage", "--window-size=1280,1000",
            format!("--user-data-dir={}", profile.display()),
        ]
    });
    if let Some(chromium) = on_path("chromium") {
        options["binary"] = chromium.display().to_string().into();
    }
    let mut capabilities = serde_json::Map::new();
    capabilities.insert("goog:chromeOptions".to_owned(), options);
    ClientBuilder::rustls()
        .expect("a WebDriver client")
        .capabilities(capabilities)
        .connect(driver)
        .await
        .expect("a Chromium session")
}

async fn text(client: &Client, css: &str) -> String {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .unwrap()
}

/// Clicks a link or a form's button, and waits until the browser has left the page it was
/// on: a click returns before the navigation it starts ends, and the next read must see the
/// new page (it once read the old one, now and then).
async fn click(client: &Client, locator: Locator<'_>) {
    let page = client.find(Locator::Css("html")).await.unwrap();
    client
        .find(locator)
        .await
        .unwrap_or_else(|e| panic!("{locator:?}: {e}"))
        .click()
        .await
        .unwrap();
    let guard = HangGuard::new(Duration::from_secs(20));
    // The old page's root goes stale once the new page replaced it.
    while page.tag_name().await.is_ok() {
        guard.check(format_args!("{locator:?} to lead to another page"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Types `token` into the page's login form and submits it.
async fn log_in(client: &Client, token: &str) {
    client
        .find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(token)
        .await
        .unwrap();
    click(client, Locator::Id("login")).await;
}

async fn state_of(outbox: &Outbox, event_id: &str) -> JobState {
    outbox.job(event_id).await.unwrap().unwrap().state
}

/// Stores failed jobs through the store's own claim and record: one whose error holds markup,
/// and the jobs `.` and `..`, whose IDs a browser would resolve away in a path.
async fn hostile_jobs(outbox: &Outbox) {
    for event_id in ["hostile-0", ".", ".."] {
        outbox
            .enqueue(event_id, Target::webhook(TRIGGER), "{}")
            .await
            .unwrap();
    }
    let now = SystemTime::now();
    let claimed = outbox
        .store()
        .claim("test", now, Duration::from_secs(60), 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3, "only the new jobs are due");
    for job in &claimed {
        let message = match job.event_id.as_str() {
            "hostile-0" => HOSTILE_MESSAGE,
            _ => "not found (404 Trigger not found)",
        };
        let record = Record {
            state: JobState::Failed,
            next_at: now,
            attempts_added: 1,
            first_sent_at: Some(now),
            run_id: None,
            last_error: Some(LastError {
                kind: "unprocessable".to_owned(),
                status: Some(422),
                request_id: Some("req-<b>bold</b>".to_owned()),
                message: message.to_owned(),
            }),
            finished_at: Some(now),
            may_have_run: false,
        };
        assert!(
            outbox
                .store()
                .record(job.id, job.claim, record)
                .await
                .unwrap()
        );
    }
}

#[test]
fn the_status_page_in_a_browser_shows_the_outbox_and_requeues_only_with_the_token() {
    let Some((_driver, driver_url)) = chromedriver() else {
        return;
    };
    let contract = Contract::start();
    let dir = TempDir::new("browser");
    let db = dir.file("outbox.db");
    let good = TempFile::new("good.ndjson", events("good", 3).as_bytes());
    let missing = TempFile::new("missing.ndjson", events("missing", 2).as_bytes());
    let slow = TempFile::new("slow.ndjson", events("slow", 1).as_bytes());
    let lost = TempFile::new("lost.ndjson", events("lost", 1).as_bytes());
    let token = TempFile::new("admin-token", format!("{ADMIN_TOKEN}\n").as_bytes());

    let batch = |trigger: &str, file: &TempFile| {
        run(contract.send().args([
            "--max-attempts",
            "1",
            "batch",
            trigger,
            "--events",
            &file.arg(),
            "--outbox",
            &db,
            "--trigger-limit",
            "off",
        ]))
    };
    assert_eq!(batch(TRIGGER, &good).code, 0);
    assert_eq!(batch(MISSING, &missing).code, 1, "404: failed");
    // Sent, and the connection closed before an answer: pending, and it may have run.
    contract
        .server
        .inject(Fault::close_before_execute().on("POST", WEBHOOKS).times(1));
    assert_eq!(batch(TRIGGER, &lost).code, 3, "pending: retry later");
    // A 429 asking for 10 minutes: the job waits, and the credential is paused.
    contract.server.inject(
        Fault::respond(429)
            .header("Retry-After", "600")
            .on("POST", WEBHOOKS)
            .times(1),
    );
    assert_eq!(batch(TRIGGER, &slow).code, 3, "pending: retry later");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outbox = runtime.block_on(Outbox::sqlite(&db)).unwrap();
    runtime.block_on(hostile_jobs(&outbox));
    // A service the workers hold down, found down 90 s ago.
    let now = SystemTime::now();
    runtime
        .block_on(
            outbox
                .store()
                .service_down(DOWN, now - Duration::from_secs(90), now),
        )
        .unwrap();

    let (_page, base) = serve(&contract, &db, &["--admin-token-file", &token.arg()]);
    let profile = TempDir::new("profile");
    let ledger = contract.ledger();

    runtime.block_on(async {
        let client = browser(&driver_url, &profile.0).await;

        // The counts, the paused scopes, the chart.
        client.goto(&format!("{base}/")).await.unwrap();
        for (state, count) in [
            ("accepted", "3"),
            ("failed", "5"),
            ("pending", "2"),
            ("in_flight", "0"),
            ("total", "10"),
        ] {
            assert_eq!(
                text(&client, &format!("#count-{state}")).await,
                count,
                "{state}"
            );
        }
        // The 429's pause: one scope, its end, the time left and why.
        let paused = client
            .find_all(Locator::Css("table.pauses tr.pause"))
            .await
            .unwrap();
        assert_eq!(paused.len(), 1);
        let until = text(&client, "tr.pause td.until").await;
        assert!(until.ends_with('Z') && until.len() == 20, "{until}");
        let left = text(&client, "tr.pause td.left").await;
        assert!(left.contains("min"), "about 10 minutes: {left}");
        assert!(!text(&client, "tr.pause td.scope").await.is_empty());
        assert!(!text(&client, "tr.pause td.why").await.is_empty());
        // The service held down: its name, since when, for how long, and the next probe.
        let down = client
            .find_all(Locator::Css("table.outages tr.outage"))
            .await
            .unwrap();
        assert_eq!(down.len(), 1);
        assert_eq!(text(&client, "tr.outage td.scope").await, DOWN);
        let since = text(&client, "tr.outage td.since").await;
        assert!(since.ends_with('Z') && since.len() == 20, "{since}");
        let held = text(&client, "tr.outage td.down").await;
        assert!(held.starts_with("1 min "), "about 90 s: {held}");
        assert_eq!(text(&client, "tr.outage td.probe-in").await, "0 s");
        // The chart, with its scales: what it counts, five times of day, a count at each step.
        let count = |css: &'static str| {
            let client = client.clone();
            async move { client.find_all(Locator::Css(css)).await.unwrap().len() }
        };
        assert_eq!(count("svg#backlog polyline").await, 1);
        assert_eq!(count("svg#backlog text.x-tick").await, 5);
        assert!(count("svg#backlog text.y-tick").await >= 2);
        let ticks = client
            .find_all(Locator::Css("svg#backlog text.x-tick"))
            .await
            .unwrap();
        let last = ticks.last().unwrap().text().await.unwrap();
        assert!(
            last.len() == 5 && last.as_bytes()[2] == b':',
            "a time of day, HH:MM: {last}"
        );
        assert_eq!(
            text(&client, "#backlog-y-title").await,
            "jobs not final (pending or in flight)"
        );
        assert!(
            text(&client, "#backlog-x-title")
                .await
                .starts_with("time (UTC)")
        );
        // The failed jobs' rows say none may have run.
        for cell in client
            .find_all(Locator::Css("section#failed td.may-have-run"))
            .await
            .unwrap()
        {
            assert_eq!(cell.text().await.unwrap(), "no");
        }
        let source = client.source().await.unwrap();
        for secret in [
            MISSING,
            TRIGGER,
            hodoflow_mock::DEMO_CLIENT_SECRET,
            ADMIN_TOKEN,
            "\"order\"",
        ] {
            assert!(!source.contains(secret), "the page shows {secret}");
        }
        assert!(!source.contains(&derived("missing-0")), "no delivery ID");
        if let Ok(path) = std::env::var("HODOFLOW_SCREENSHOT") {
            let png = client.screenshot().await.unwrap();
            assert!(png.starts_with(b"\x89PNG"));
            std::fs::write(path, png).unwrap();
        }

        // A failed job's history.
        click(&client, Locator::LinkText("missing-0")).await;
        assert!(
            client
                .current_url()
                .await
                .unwrap()
                .path()
                .ends_with("/jobs/missing-0")
        );
        assert_eq!(text(&client, "#job-state").await, "failed");
        assert_eq!(text(&client, "#job-error-status").await, "404");
        assert_eq!(text(&client, "#job-error-kind").await, "not_found");
        let request_id = text(&client, "#job-request-id").await;
        assert!(
            ledger
                .requests_to("POST", WEBHOOKS)
                .iter()
                .any(|r| r.request_id == request_id),
            "{request_id} is the server's"
        );
        assert!(!client.source().await.unwrap().contains(MISSING));

        // Retry without the token: refused, nothing changes.
        click(&client, Locator::Css("button.retry")).await;
        let refused = text(&client, "#message").await;
        assert!(refused.contains("needs the admin token"), "{refused}");
        assert_eq!(state_of(&outbox, "missing-0").await, JobState::Failed);

        // A wrong token does not log in.
        client
            .goto(&format!("{base}/jobs/missing-0"))
            .await
            .unwrap();
        log_in(&client, "not-the-admin-token-42").await;
        assert!(
            text(&client, "#message")
                .await
                .contains("not the admin token")
        );

        // With the token: the job is pending in the page and in the store.
        client
            .goto(&format!("{base}/jobs/missing-0"))
            .await
            .unwrap();
        log_in(&client, ADMIN_TOKEN).await;
        let back = client.current_url().await.unwrap();
        assert!(
            back.path().ends_with("/jobs/missing-0"),
            "back to the job: {back}"
        );
        click(&client, Locator::Css("button.retry")).await;
        assert!(
            client
                .current_url()
                .await
                .unwrap()
                .query()
                .is_some_and(|q| q.contains("requeued"))
        );
        assert_eq!(text(&client, "#job-state").await, "pending");
        assert!(text(&client, "#notice").await.starts_with("Requeued"));
        assert_eq!(state_of(&outbox, "missing-0").await, JobState::Pending);
        client.goto(&format!("{base}/")).await.unwrap();
        assert_eq!(text(&client, "#count-failed").await, "4");
        assert_eq!(text(&client, "#count-pending").await, "3");

        // The jobs `.` and `..` open from their links and are requeued like any other.
        for (event_id, path) in [(".", "/jobs/~."), ("..", "/jobs/~..")] {
            client.goto(&format!("{base}/")).await.unwrap();
            click(&client, Locator::LinkText(event_id)).await;
            let url = client.current_url().await.unwrap();
            assert_eq!(url.path(), path, "the job's own page");
            assert_eq!(text(&client, "#event-id").await, event_id);
            assert_eq!(text(&client, "#job-state").await, "failed");
            click(&client, Locator::Css("button.retry")).await;
            assert_eq!(text(&client, "#job-state").await, "pending", "{event_id}");
            assert!(text(&client, "#notice").await.starts_with("Requeued"));
            assert_eq!(state_of(&outbox, event_id).await, JobState::Pending);
        }
        client.goto(&format!("{base}/")).await.unwrap();
        assert_eq!(text(&client, "#count-failed").await, "2");
        assert_eq!(text(&client, "#count-pending").await, "5");

        // The job whose call went unanswered says it may have run.
        client.goto(&format!("{base}/jobs/lost-0")).await.unwrap();
        assert_eq!(text(&client, "#job-state").await, "pending");
        assert!(
            text(&client, "#job-may-have-run").await.starts_with("yes"),
            "marked by the unanswered call"
        );
        client
            .goto(&format!("{base}/jobs/missing-1"))
            .await
            .unwrap();
        assert_eq!(text(&client, "#job-may-have-run").await, "no");
        assert!(!client.source().await.unwrap().contains(ADMIN_TOKEN));

        // Stored markup is text: shown literally, and no element of it exists.
        client
            .goto(&format!("{base}/jobs/hostile-0"))
            .await
            .unwrap();
        assert_eq!(text(&client, "#job-error-message").await, HOSTILE_MESSAGE);
        assert_eq!(text(&client, "#job-request-id").await, "req-<b>bold</b>");
        assert!(
            client
                .find_all(Locator::Css("script"))
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            client
                .find_all(Locator::Css("main img, main b"))
                .await
                .unwrap()
                .is_empty()
        );
        assert_ne!(client.title().await.unwrap(), "owned");

        client.close().await.unwrap();
    });

    // Outside the browser: a forged POST (no session, no CSRF token) and a wrong bearer token
    // are refused; the bearer token requeues.
    let (status, head, _) = post(&base, "/jobs/missing-1/retry", "", "back=job");
    assert_eq!(status, 403);
    assert_security_headers(&head);
    let (status, _, _) = post(
        &base,
        "/jobs/missing-1/retry",
        "Authorization: Bearer admin-token-wrong-0123456\r\n",
        "",
    );
    assert_eq!(status, 403);
    assert_eq!(
        runtime.block_on(state_of(&outbox, "missing-1")),
        JobState::Failed
    );
    // As `curl -X POST -H "Authorization: Bearer …"` sends it: no form at all.
    let (status, head, _) = http(
        &base,
        &format!(
            "POST /jobs/missing-1/retry HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
             Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Length: 0\r\n\r\n",
            host(&base)
        ),
    );
    assert_eq!(status, 303, "{head}");
    assert!(
        head.contains("location: /jobs/missing-1?requeued=1"),
        "{head}"
    );
    assert_eq!(
        runtime.block_on(state_of(&outbox, "missing-1")),
        JobState::Pending
    );
    // A delivered job is not requeued.
    let (status, _, body) = post(
        &base,
        "/jobs/good-0/retry",
        &format!("Authorization: Bearer {ADMIN_TOKEN}\r\n"),
        "",
    );
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        runtime.block_on(state_of(&outbox, "good-0")),
        JobState::Accepted
    );
}

#[test]
fn a_read_only_page_on_loopback_serves_ready_and_its_headers_and_requeues_nothing() {
    let contract = Contract::start();
    let dir = TempDir::new("ready");
    let db = dir.file("outbox.db");
    let missing = TempFile::new("missing.ndjson", events("missing", 51).as_bytes());
    let ran = run(contract.send().args([
        "batch",
        MISSING,
        "--events",
        &missing.arg(),
        "--outbox",
        &db,
    ]));
    assert_eq!(ran.code, 1, "{ran:?}");
    let (_page, base) = serve(&contract, &db, &[]);

    let (status, head, body) = get(&base, "/ready");
    assert_eq!((status, body.as_str()), (200, "ready\n"));
    assert_security_headers(&head);
    let (status, head, body) = get(&base, "/");
    assert_eq!(status, 200);
    assert_security_headers(&head);
    assert!(
        !head.contains("set-cookie"),
        "a read-only page shows no form: no cookie, no session: {head}"
    );
    assert!(body.contains("Read-only"), "{body}");
    assert!(!body.contains(MISSING));
    // 51 failed jobs: 50 on the first page, one on the next.
    let rows = |body: &str| body.matches("<a href=\"/jobs/missing-").count();
    assert_eq!(rows(&body), 50);
    // The next page starts after the 50th job's keyset cursor (`<state>.<next_at>.<id>`).
    let link = body
        .split("id=\"next-failed\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("a next link: {body}"))
        .replace("&amp;", "&");
    assert!(link.starts_with("/?state=failed&after=failed."), "{link}");
    let (status, _, next) = get(&base, &link);
    assert_eq!((status, rows(&next)), (200, 1));
    assert!(
        next.contains(">first page</a>") && !next.contains(">next</a>"),
        "{next}"
    );
    let (status, _, _) = get(&base, "/?state=failed&after=pending.0.1");
    assert_eq!(status, 400, "a cursor of another state");
    assert!(
        !next.contains("needs_reconciliation</h2>"),
        "only the state asked for"
    );
    let (status, _, _) = get(&base, "/jobs/missing-0");
    assert_eq!(status, 200);
    let (status, _, _) = get(&base, "/jobs/no-such-job");
    assert_eq!(status, 404);
    // No token given: nothing is requeued, whatever the request says.
    let (status, _, _) = post(
        &base,
        "/jobs/missing-0/retry",
        "Authorization: Bearer anything-at-all-0123456\r\n",
        "",
    );
    assert_eq!(status, 403);

    // A store that no longer answers: not ready. The file is overwritten under the running
    // server (and its WAL index with it, so SQLite reads the file again).
    for file in [db.clone(), format!("{db}-shm"), format!("{db}-wal")] {
        if let Ok(meta) = std::fs::metadata(&file) {
            let garbage = vec![0x5a_u8; usize::try_from(meta.len()).unwrap().max(4096)];
            std::fs::write(&file, garbage).unwrap();
        }
    }
    let (status, _, body) = get(&base, "/ready");
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("not ready"), "{body}");
}

#[test]
fn beyond_loopback_the_page_needs_a_token_file_and_a_worker_serves_it_with_admin() {
    let contract = Contract::start();
    let dir = TempDir::new("bind");
    let db = dir.file("outbox.db");
    let refused =
        run(contract
            .send()
            .args(["outbox", "--outbox", &db, "serve", "--listen", "0.0.0.0:0"]));
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.all().contains("--admin-token-file"), "{refused:?}");
    assert!(
        !Path::new(&db).exists(),
        "refused before the store is opened"
    );
    let short = TempFile::new("short-token", b"k3Zq8w\n");
    let refused = run(contract.send().args([
        "outbox",
        "--outbox",
        &db,
        "serve",
        "--admin-token-file",
        &short.arg(),
    ]));
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.all().contains("shorter than 16"), "{refused:?}");
    assert!(!refused.all().contains("k3Zq8w"));

    // `outbox worker --admin`: the page beside the workers, its address on standard error.
    let mut worker = Running(
        contract
            .child()
            .args([
                "outbox",
                "--outbox",
                &db,
                "worker",
                "--admin",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stderr = BufReader::new(worker.0.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("status page listening on ") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the worker ended");
    }
    let base = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let (status, head, body) = get(&base, "/ready");
    assert_eq!((status, body.as_str()), (200, "ready\n"));
    assert_security_headers(&head);
    let (status, _, body) = get(&base, "/");
    assert_eq!(status, 200);
    assert!(body.contains("id=\"count-total\">0<"), "{body}");
    // `/metrics` from the same listener: the store's figures and the workers' client's.
    let (status, head, body) = get(&base, "/metrics");
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert_security_headers(&head);
    assert!(
        body.contains("hodoflow_outbox_jobs{state=\"pending\"} 0"),
        "{body}"
    );
    assert!(body.contains("hodoflow_client_calls_total"), "{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");
}
