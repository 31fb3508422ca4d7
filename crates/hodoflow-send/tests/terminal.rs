//! Terminal safety: a server that answers with escape sequences and control characters in its
//! error bodies, titles, messages, catalogue and stored errors gets none of them onto the
//! operator's terminal in text mode (a value holding them is shown escaped, `\x1b[2J`), while
//! `--json` stays exact JSON. Each test runs the built
//! binary against the contract server on 127.0.0.1:0 and reads the ledger.

mod support;

use hodoflow_mock::{Fault, ToolSeed};
use serde_json::{Value, json};
use support::{Contract, PROJECTS, Ran, TRIGGER, TempFile, WEBHOOKS, run};

/// Every class of sequence: erase the screen, move the cursor home and up, erase a line, set the
/// window title (OSC 0, BEL-terminated), write the clipboard (OSC 52, ST-terminated), a
/// hyperlink, a carriage return, 8-bit CSI and OSC, a bell and a NUL. `VISIBLE` must survive.
const HOSTILE: &str = "\u{1b}[2J\u{1b}[H\u{1b}]0;pwned title\u{7}\u{1b}]52;c;cm0gLXJmIH4=\u{1b}\\\
                       \u{1b}[3A\u{1b}[2K\u{1b}]8;;http://evil.example\u{7}\u{9b}2J\u{9d}0;t\u{9c}\
                       \rVISIBLE\u{7}\u{0}\nFORGED LINE";

/// A body in every error shape this tool reads: JSON:API `errors`, problem+json `title` and
/// `detail`, Modulify's `error`, and a `message`.
fn hostile_body() -> String {
    json!({
        "errors": [{"status": "422", "code": HOSTILE, "title": HOSTILE, "detail": HOSTILE}],
        "title": HOSTILE,
        "detail": HOSTILE,
        "message": HOSTILE,
        "data": null,
        "error": {"code": "validation_failed", "message": HOSTILE},
    })
    .to_string()
}

/// That `ran` printed no control character other than tab and line feed (no ESC, so no
/// sequence; no CR, BEL or NUL), no C1 control (8-bit CSI, OSC, ST), and no line a server
/// began. A body printed as JSON keeps its sequences as inert `\u001b` escapes.
#[track_caller]
fn assert_inert(ran: &Ran) {
    let all = ran.all();
    let bad: Vec<char> = all
        .chars()
        .filter(|&c| {
            (c.is_control() && c != '\t' && c != '\n') || ('\u{80}'..='\u{9f}').contains(&c)
        })
        .collect();
    assert!(
        bad.is_empty(),
        "control characters {bad:?} printed: {ran:?}"
    );
    for line in all.lines() {
        assert!(
            !line.starts_with("FORGED LINE"),
            "a server forged a line: {ran:?}"
        );
    }
}

#[test]
fn error_bodies_titles_and_messages_reach_text_mode_inert() {
    let contract = Contract::start();
    let body = hostile_body();
    for (method, path) in [("POST", PROJECTS), ("POST", WEBHOOKS), ("GET", PROJECTS)] {
        contract.server.inject(
            Fault::respond(422)
                .on(method, path)
                .header("content-type", "application/problem+json")
                .body(&body)
                .times(2),
        );
    }
    let document = r#"{"data":{"type":"projects","attributes":{"name":"n"}}}"#;
    let runs = [
        run(contract.send().env("RUST_LOG", "debug").args([
            "write", "POST", PROJECTS, "--key", "k-1", "--data", document,
        ])),
        run(contract.send().env("RUST_LOG", "debug").args([
            "webhook",
            TRIGGER,
            "--event-id",
            "e-1",
            "--data",
            "{}",
        ])),
        run(contract
            .send()
            .env("RUST_LOG", "debug")
            .args(["get", PROJECTS])),
    ];
    for ran in &runs {
        assert_eq!(ran.code, 1, "{ran:?}");
        assert!(ran.stdout.starts_with("error: "), "{ran:?}");
        assert_inert(ran);
    }
    // What the server said is still shown, made inert: the visible text stays.
    assert!(runs[0].all().contains("VISIBLE"), "{:?}", runs[0]);

    // --json is exact JSON: the body is the server's, escape sequences and all, escaped.
    let exact = run(contract.send().args([
        "--json", "write", "POST", PROJECTS, "--key", "k-2", "--data", document,
    ]));
    assert_eq!(exact.code, 1, "{exact:?}");
    let report = exact.json();
    let served: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(report["body"], served, "{exact:?}");
    assert!(
        !exact.stdout.contains('\u{1b}'),
        "JSON escapes ESC: {exact:?}"
    );
    let ledger = contract.ledger();
    assert_eq!(ledger.requests_to("POST", PROJECTS).len(), 2);
    assert_eq!(ledger.requests_to("POST", WEBHOOKS).len(), 1);
    assert_eq!(ledger.total_writes_executed(), 0);
    assert_eq!(ledger.total_runs(), 0);
}

#[test]
fn modulify_errors_and_catalogue_descriptions_reach_text_mode_inert() {
    let contract = Contract::with(|builder| {
        builder.modulify_tool(ToolSeed::new("hostile_tool").description(HOSTILE))
    });
    contract.server.inject(
        Fault::respond(422)
            .on("POST", "/v1/send_site_email")
            .body(&hostile_body()),
    );
    let call = run(contract.modulify().env("RUST_LOG", "trace").args([
        "modulify",
        "call",
        "send_site_email",
        "--data",
        "{}",
        "--key",
        "k-1",
    ]));
    assert_eq!(call.code, 1, "{call:?}");
    assert_inert(&call);
    let tools = run(contract.modulify().args(["modulify", "tools"]));
    assert_eq!(tools.code, 0, "{tools:?}");
    assert!(tools.stdout.contains("hostile_tool"), "{tools:?}");
    assert_inert(&tools);
    let hostile = tools
        .stdout
        .lines()
        .find(|line| line.starts_with("hostile_tool"))
        .unwrap();
    // Its first line, shown escaped: every byte there, none of them a control.
    assert!(
        hostile.ends_with(
            "destructive  \\x1b[2J\\x1b[H\\x1b]0;pwned title\\x07\\x1b]52;c;cm0gLXJmIH4=\\x1b\\\\\
             \\x1b[3A\\x1b[2K\\x1b]8;;http://evil.example\\x07\\u{9b}2J\\u{9d}0;t\\u{9c}\\rVISIBLE\\x07\\x00"
        ),
        "the description, made inert: {hostile:?}"
    );
    assert_eq!(
        contract
            .ledger()
            .requests_to("POST", "/v1/send_site_email")
            .len(),
        1
    );
}

/// An event ID with control characters never enters the outbox: the line is named, nothing
/// is stored or sent. One with a bidirectional override (printable text) is stored, and is
/// listed escaped in text and as `\u202e` in JSON, with the stored hostile error inert.
#[test]
fn an_outbox_job_with_a_hostile_event_id_and_stored_error_lists_inert() {
    let contract = Contract::start();
    contract.server.inject(
        Fault::respond(422)
            .on("POST", WEBHOOKS)
            .header("content-type", "application/problem+json")
            .body(&hostile_body()),
    );
    let outbox = TempFile::new("outbox.db", b"");
    let _journal = (
        TempFile(format!("{}-wal", outbox.arg()).into()),
        TempFile(format!("{}-shm", outbox.arg()).into()),
    );
    let batch = |event_id: &str| {
        let fine = json!({"event_id": "evt-fine", "body": {}}).to_string();
        let line = json!({"event_id": event_id, "body": {}}).to_string();
        let events = TempFile::new("hostile.ndjson", format!("{fine}\n{line}\n").as_bytes());
        run(contract.send().env("RUST_LOG", "debug").args([
            "batch",
            TRIGGER,
            "--events",
            &events.arg(),
            "--outbox",
            &outbox.arg(),
        ]))
    };
    let refused = batch(&format!("evt-{HOSTILE}"));
    assert_eq!(refused.code, 2, "{refused:?}");
    assert_inert(&refused);
    assert!(
        refused.stdout.contains(
            "line 2: the event ID holds a control character (U+001B) at byte 4: an event ID is \
             printable text"
        ),
        "{refused:?}"
    );
    assert!(contract.ledger().requests_to("POST", WEBHOOKS).is_empty());

    let spoofed = "evt-\u{202e}4pm.exe";
    let batch = batch(spoofed);
    assert_eq!(batch.code, 1, "{batch:?}");
    assert_inert(&batch);
    for args in [
        vec!["list"],
        vec!["status"],
        vec!["list", "--state", "failed"],
    ] {
        let ran = run(contract
            .send()
            .args(["outbox", "--outbox", &outbox.arg()])
            .args(&args));
        assert_eq!(ran.code, 0, "{ran:?}");
        assert_inert(&ran);
        assert!(!ran.all().contains('\u{202e}'), "{ran:?}");
    }
    let listed = run(contract
        .send()
        .args(["outbox", "--outbox", &outbox.arg(), "list"]));
    assert!(listed.stdout.contains("evt-\\u{202e}4pm.exe"), "{listed:?}");
    // --json keeps the stored event ID exactly, the override written as an escape.
    let exact = run(contract
        .send()
        .args(["--json", "outbox", "--outbox", &outbox.arg(), "list"]));
    assert!(exact.stdout.contains("evt-\\u202e4pm.exe"), "{exact:?}");
    let jobs = exact.json();
    let ids: Vec<&str> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["event_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&spoofed), "{exact:?}");
    assert_eq!(contract.ledger().requests_to("POST", WEBHOOKS).len(), 2);
}
