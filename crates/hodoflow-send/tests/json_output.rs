//! `--json`: standard output carries exactly one JSON document per result, errors included,
//! for every command and every failure path, and each refusal exits as `--help` documents
//! (2 for invalid input, with nothing sent; 1 for a store that cannot be used, a
//! `configuration` error). Each path below runs the built binary against the contract server
//! and parses what it printed; the server's ledger shows what was sent.

mod support;

use std::io::{BufRead as _, BufReader};
use std::process::Stdio;

use hodoflow_mock::Limits;
use serde_json::Value;
use support::{Contract, PROJECTS, Ran, TOKEN, TRIGGER, TempDir, TempFile, run};

/// Every line of standard output, each parsed as one JSON document; fails on any other text.
#[track_caller]
fn documents(what: &str, ran: &Ran) -> Vec<Value> {
    ran.stdout
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{what}: a line that is not JSON ({e}): {ran:?}"))
        })
        .collect()
}

/// One failure path: what it runs, and how it must end.
struct Path {
    what: &'static str,
    args: Vec<String>,
    code: i32,
    kind: &'static str,
    /// Whether the server may have seen a request (a token exchange included).
    sends: bool,
}

fn path(what: &'static str, args: &[&str], code: i32, kind: &'static str, sends: bool) -> Path {
    Path {
        what,
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        code,
        kind,
        sends,
    }
}

#[test]
fn every_failure_path_prints_one_json_document_and_exits_as_help_says() {
    let contract = Contract::start();
    let dir = TempDir::new("json-paths");
    let store = dir.file("o.db");
    let not_a_store = dir.0.display().to_string();
    let events = TempFile::new("paths.ndjson", b"{\"event_id\":\"p-1\",\"body\":{}}\n");
    let events = events.arg();
    let bad_events = TempFile::new("bad.ndjson", b"{\"event_id\":\"p-1\"}\nnot json\n");
    let bad_events = bad_events.arg();
    let jobs = TempFile::new(
        "jobs.ndjson",
        b"{\"kind\":\"frobnicate\",\"event_id\":\"j\"}\n",
    );
    let jobs = jobs.arg();
    let good_jobs = TempFile::new(
        "good-jobs.ndjson",
        b"{\"kind\":\"webhook\",\"event_id\":\"j-1\",\"body\":{}}\n",
    );
    let good_jobs = good_jobs.arg();
    let libpq = "host=127.0.0.1 user=u password=pw dbname=x";
    let on_store = |command: &[&str]| {
        let mut args = vec!["outbox", "--outbox", &not_a_store];
        args.extend_from_slice(command);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let mut paths = vec![
        path(
            "an unknown flag",
            &["webhook", TRIGGER, "--bogus"],
            2,
            "invalid_input",
            false,
        ),
        path("no trigger", &["webhook"], 2, "invalid_input", false),
        path(
            "a bare number",
            &["--max-elapsed", "30", "get", PROJECTS],
            2,
            "invalid_input",
            false,
        ),
        path(
            "an unreadable body file",
            &["webhook", TRIGGER, "--data", "@/nonexistent/body.json"],
            2,
            "invalid_input",
            false,
        ),
        path(
            "a dot segment",
            &["get", "/api/json/v1/%2e%2e/x"],
            2,
            "invalid_input",
            false,
        ),
        path(
            "a trigger that is '..'",
            &["webhook", "..", "--data", "{}"],
            2,
            "invalid_input",
            false,
        ),
        path(
            "a bad events file",
            &["batch", TRIGGER, "--events", &bad_events],
            2,
            "invalid_input",
            false,
        ),
        path(
            "a batch --outbox to a trigger that is '..'",
            &["batch", "..", "--events", &events, "--outbox", &store],
            2,
            "invalid_input",
            false,
        ),
        path(
            "a libpq string as --outbox",
            &["batch", TRIGGER, "--events", &events, "--outbox", libpq],
            2,
            "invalid_input",
            false,
        ),
        path(
            "a bad job file",
            &["outbox", "--outbox", &store, "enqueue", "--events", &jobs],
            2,
            "invalid_input",
            false,
        ),
        path(
            "the page beyond loopback without a token",
            &[
                "outbox",
                "--outbox",
                &store,
                "serve",
                "--listen",
                "0.0.0.0:0",
            ],
            2,
            "invalid_input",
            false,
        ),
        path(
            "Modulify without a base URL",
            &["modulify", "tools"],
            2,
            "invalid_input",
            false,
        ),
        path(
            "a directory as --outbox for batch",
            &[
                "batch",
                TRIGGER,
                "--events",
                &events,
                "--outbox",
                &not_a_store,
            ],
            1,
            "configuration",
            false,
        ),
        path(
            "an unknown trigger",
            &["webhook", "trg_unknown_1", "--data", "{}"],
            1,
            "not_found",
            true,
        ),
        path(
            "an unknown run",
            &["follow", "00000000-0000-4000-8000-000000000000"],
            1,
            "not_found",
            true,
        ),
        path(
            "a write the server refuses",
            &["write", "POST", PROJECTS, "--key", "k-1", "--data", "{}"],
            1,
            "unprocessable",
            true,
        ),
    ];
    for command in [
        &["status"][..],
        &["list"],
        &["retry", "p-1"],
        &["worker", "--until-idle"],
        &[
            "enqueue",
            "--events",
            &good_jobs,
            "--trigger-token",
            TRIGGER,
        ],
    ] {
        paths.push(Path {
            what: "a directory as --outbox",
            args: on_store(command),
            code: 1,
            kind: "configuration",
            sends: false,
        });
    }

    for path in &paths {
        let before = contract.ledger().requests().len();
        let ran = run(contract.send().arg("--json").args(&path.args));
        let documents = documents(path.what, &ran);
        assert_eq!(documents.len(), 1, "{}: one document: {ran:?}", path.what);
        let report = &documents[0];
        assert_eq!(ran.code, path.code, "{}: {ran:?}", path.what);
        assert_eq!(report["outcome"], "error", "{}: {report}", path.what);
        assert_eq!(
            report["error"]["kind"], path.kind,
            "{}: {report}",
            path.what
        );
        let message = report["error"]["message"].as_str().unwrap();
        if path.kind == "configuration" {
            assert!(
                !message.contains("invalid input"),
                "{}: {message}",
                path.what
            );
        }
        if !path.sends {
            assert_eq!(
                contract.ledger().requests().len(),
                before,
                "{}: nothing sent",
                path.what
            );
        }
    }
    assert!(
        !std::path::Path::new(&store).exists(),
        "no refusal created the outbox"
    );
}

#[test]
fn a_batch_through_an_outbox_says_truly_what_was_stored_and_what_a_rerun_does() {
    let contract = Contract::start();
    let dir = TempDir::new("json-rerun");
    let store = dir.file("o.db");
    let events = TempFile::new("rerun.ndjson", b"{\"event_id\":\"r-1\",\"body\":{}}\n");
    for json in [true, false] {
        let mut command = contract.send();
        if json {
            command.arg("--json");
        }
        let ran = run(command.args([
            "batch",
            "%2e%2e",
            "--events",
            &events.arg(),
            "--outbox",
            &store,
        ]));
        assert_eq!(ran.code, 2, "{ran:?}");
        assert!(!ran.all().contains("stay stored"), "{ran:?}");
        assert!(!ran.all().contains("run the same command again"), "{ran:?}");
        assert!(ran.all().contains("nothing was sent or stored"), "{ran:?}");
        if json {
            assert_eq!(ran.json()["error"]["kind"], "invalid_input");
        }
    }
    assert!(!std::path::Path::new(&store).exists());
    assert!(contract.ledger().requests().is_empty());
}

#[test]
fn results_are_json_lines_and_failures_of_a_whole_command_one_document() {
    let contract = Contract::with(|builder| {
        builder.limits(Limits {
            token_ttl: std::time::Duration::ZERO,
            ..support::limits()
        })
    });
    // Every event refused the same way: one line each, no other text.
    let events = TempFile::new(
        "two.ndjson",
        b"{\"event_id\":\"t-1\",\"body\":{}}\n{\"event_id\":\"t-2\",\"body\":{}}\n",
    );
    let ran = run(contract
        .send()
        .args(["--json", "batch", TRIGGER, "--events", &events.arg()]));
    let lines = documents("a batch whose tokens expire at once", &ran);
    assert_eq!(lines.len(), 2, "{ran:?}");
    assert!(
        lines.iter().all(|line| line["outcome"] == "error"),
        "{ran:?}"
    );
    assert_eq!(ran.code, 1, "{ran:?}");

    // The status page's address, then nothing else, for as long as it serves.
    let dir = TempDir::new("json-serve");
    let mut child = contract
        .child()
        .args([
            "--json",
            "outbox",
            "--outbox",
            &dir.file("o.db"),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let listening: Value = serde_json::from_str(&line).expect("one JSON document");
    assert!(
        listening["listening"]
            .as_str()
            .is_some_and(|url| url.starts_with("http://127.0.0.1:")),
        "{listening}"
    );
    assert!(contract.ledger().requests_to("POST", TOKEN).len() <= 2);
}
