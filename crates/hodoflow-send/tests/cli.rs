//! `hodoflow-send` end to end: the built binary against the contract server on 127.0.0.1:0.
//! Each test checks the exit status, what was printed, and the server's ledger.

mod support;

use std::time::Duration;

use hodoflow_mock::{
    ClientSeed, DEMO_CLIENT_SECRET, DEMO_ORGANIZATION, Fault, RunOutcome, TriggerSeed,
};
use serde_json::{Value, json};
use support::{
    Contract, EVENT, PROJECTS, TOKEN, TRIGGER, TempFile, WEBHOOKS, derived, is_uuid, run,
};

/// The `key`s of a report's object, sorted.
fn fields(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

/// The fields every `--json` report has.
const FIELDS: [&str; 7] = [
    "attempts",
    "elapsed_ms",
    "error",
    "key",
    "outcome",
    "status",
    "workflow_run_id",
];

#[test]
fn webhook_is_accepted_then_duplicate_with_one_run_and_every_json_field() {
    let contract = Contract::start();
    let deliver = || {
        run(contract
            .send()
            .args([
                "--json",
                "webhook",
                TRIGGER,
                "--event-id",
                "order-4711:shipped",
            ])
            .args(["--data", EVENT]))
    };

    let first = deliver();
    assert_eq!(first.code, 0, "{first:?}");
    let report = first.json();
    assert_eq!(fields(&report), FIELDS);
    let key = derived("order-4711:shipped");
    assert_eq!(report["outcome"], "accepted");
    assert_eq!(report["status"], 202);
    assert_eq!(report["key"], key.as_str());
    assert_eq!(report["error"], Value::Null);
    assert!(report["elapsed_ms"].as_u64().is_some());
    let run_id = report["workflow_run_id"].as_str().unwrap().to_owned();
    assert!(is_uuid(&run_id), "{run_id}");
    let ledger = contract.ledger();
    let sent = ledger.requests_to("POST", WEBHOOKS);
    assert_eq!(
        report["attempts"],
        json!([{"attempt": 1, "status": 202, "error": null,
                "request_id": sent[0].request_id, "waited_ms": 0}])
    );

    let second = deliver();
    assert_eq!(second.code, 0, "{second:?}");
    let report = second.json();
    assert_eq!(report["outcome"], "duplicate");
    assert_eq!(report["status"], 202);
    assert_eq!(report["workflow_run_id"], Value::Null);

    let ledger = contract.ledger();
    assert_eq!(ledger.runs_for_delivery(&key), [run_id]);
    assert_eq!(ledger.duplicates_for_delivery(&key), 1);
    assert_eq!(ledger.total_runs(), 1);
    assert!(
        ledger
            .requests_with_key(&key)
            .iter()
            .all(|r| r.path == "/api/v1/webhooks/<redacted>"),
        "{:?}",
        ledger.requests_with_key(&key)
    );
}

#[test]
fn attempts_record_status_request_id_and_the_wait_before_each_after_a_503() {
    let contract = Contract::start();
    contract
        .server
        .inject(Fault::respond(503).on("POST", WEBHOOKS));

    let ran = run(contract.send().args([
        "--json",
        "webhook",
        TRIGGER,
        "--delivery-id",
        "evt-503",
        "--data",
        EVENT,
    ]));

    assert_eq!(ran.code, 0, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["outcome"], "accepted");
    assert_eq!(report["key"], "evt-503");
    let ledger = contract.ledger();
    let sent = ledger.requests_with_key("evt-503");
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].status, Some(503));
    let attempts = report["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[0]["status"], 503);
    assert_eq!(attempts[0]["error"], Value::Null);
    assert_eq!(attempts[0]["request_id"], sent[0].request_id.as_str());
    assert_eq!(attempts[0]["waited_ms"], 0);
    assert_eq!(attempts[1]["attempt"], 2);
    assert_eq!(attempts[1]["status"], 202);
    assert_eq!(attempts[1]["request_id"], sent[1].request_id.as_str());
    let waited = attempts[1]["waited_ms"].as_u64().unwrap();
    let gap = sent[1].arrived.duration_since(sent[0].arrived);
    assert!(
        Duration::from_millis(waited) <= gap + Duration::from_millis(1),
        "waited {waited} ms, but the server saw the retry {gap:?} after the first attempt"
    );
    assert!(report["elapsed_ms"].as_u64().unwrap() >= waited);
    assert_eq!(ledger.runs_for_delivery("evt-503").len(), 1);
}

#[test]
fn an_answer_lost_after_the_commit_is_retried_into_a_duplicate() {
    let contract = Contract::start();
    contract
        .server
        .inject(Fault::execute_then_close().on("POST", WEBHOOKS));

    let ran = run(contract.send().args([
        "--json",
        "webhook",
        TRIGGER,
        "--event-id",
        "lost-1",
        "--data",
        EVENT,
    ]));

    assert_eq!(ran.code, 0, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["outcome"], "duplicate");
    let attempts = report["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["status"], Value::Null);
    assert!(attempts[0]["error"].is_string(), "{report}");
    assert_eq!(attempts[0]["request_id"], Value::Null);
    assert_eq!(attempts[1]["status"], 202);
    assert_eq!(
        contract
            .ledger()
            .runs_for_delivery(&derived("lost-1"))
            .len(),
        1
    );
}

#[test]
fn a_trigger_url_gives_base_and_token_and_the_legacy_url_its_organization() {
    let contract = Contract::start();
    let url = contract.trigger_url(TRIGGER);
    let legacy = contract.trigger_url(&format!("{DEMO_ORGANIZATION}/{TRIGGER}"));

    // No --base-url: the trigger URL's base serves.
    let ran = run(contract.send().env_remove("HODOFLOW_BASE_URL").args([
        "--json",
        "webhook",
        &url,
        "--event-id",
        "url-1",
        "--data",
        EVENT,
    ]));
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(ran.json()["outcome"], "accepted");
    let ran = run(contract.send().args([
        "--json",
        "webhook",
        &legacy,
        "--event-id",
        "url-1",
        "--data",
        EVENT,
    ]));
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(ran.json()["outcome"], "duplicate");
    assert!(!ran.all().contains(TRIGGER), "{ran:?}");

    let ledger = contract.ledger();
    assert_eq!(ledger.runs_for_delivery(&derived("url-1")).len(), 1);
    let paths: Vec<&str> = ledger
        .requests_to("POST", WEBHOOKS)
        .iter()
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "/api/v1/webhooks/<redacted>",
            "/api/v1/webhooks/acme/<redacted>"
        ]
    );

    // A trigger URL on another server than --base-url is refused before anything is sent.
    let before = contract.ledger().requests().len();
    let ran = run(contract
        .send()
        .env("HODOFLOW_BASE_URL", "http://127.0.0.1:9")
        .args(["webhook", &url, "--event-id", "url-2", "--data", EVENT]));
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(!ran.all().contains(TRIGGER), "{ran:?}");
    assert_eq!(contract.ledger().requests().len(), before);
}

#[test]
fn write_sends_the_body_byte_for_byte_and_a_retry_with_the_key_is_replayed() {
    let contract = Contract::start();
    let body = TempFile::new(
        "project.json",
        br#"{"data": {"type":"projects", "attributes": {"name": "Apollo"}}}"#,
    );
    let data = format!("@{}", body.arg());
    let write = || {
        run(contract
            .send()
            .args([
                "--json",
                "write",
                "post",
                PROJECTS,
                "--key",
                "create-apollo",
            ])
            .args(["--data", &data]))
    };

    let first = write();
    assert_eq!(first.code, 0, "{first:?}");
    let report = first.json();
    assert_eq!(report["outcome"], "ok");
    assert_eq!(report["status"], 201);
    assert_eq!(report["key"], "create-apollo");
    assert_eq!(report["body"]["data"]["attributes"]["name"], "Apollo");

    let second = write();
    assert_eq!(second.code, 0, "{second:?}");
    let report = second.json();
    assert_eq!(report["outcome"], "replayed");
    assert_eq!(report["status"], 201);
    assert_eq!(contract.ledger().writes_executed("create-apollo"), 1);

    // The same key with other bytes (one space less, from stdin) is a different request: 409,
    // exit 1. A client that re-serialized bodies would have sent the same bytes twice.
    let changed = run(contract
        .send()
        .args([
            "--json",
            "write",
            "POST",
            PROJECTS,
            "--key",
            "create-apollo",
        ])
        .args(["--data", "@-"])
        .write_stdin(r#"{"data":{"type":"projects", "attributes": {"name": "Apollo"}}}"#));
    assert_eq!(changed.code, 1, "{changed:?}");
    let report = changed.json();
    assert_eq!(report["outcome"], "error");
    assert_eq!(report["status"], 409);
    assert_eq!(report["error"]["kind"], "key_reused");
    assert_eq!(report["error"]["may_have_run"], false);
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("key_reused: "),
        "{report}"
    );
    assert_eq!(
        report["body"]["errors"][0]["code"],
        "idempotency_key_reused"
    );
    assert_eq!(contract.ledger().writes_executed("create-apollo"), 1);
}

#[test]
fn write_without_a_key_generates_one_and_says_so() {
    let contract = Contract::start();
    let ran = run(contract
        .send()
        .args(["--json", "write", "POST", PROJECTS])
        .args([
            "--data",
            r#"{"data":{"type":"projects","attributes":{"name":"Gemini"}}}"#,
        ]));

    assert_eq!(ran.code, 0, "{ran:?}");
    let key = ran.json()["key"].as_str().unwrap().to_owned();
    assert!(is_uuid(&key), "{key}");
    assert!(ran.stderr.contains(&format!("--key {key}")), "{ran:?}");
    assert_eq!(contract.ledger().writes_executed(&key), 1);

    let derived_key = run(contract
        .send()
        .args([
            "--json",
            "write",
            "POST",
            PROJECTS,
            "--event-id",
            "gemini:create",
        ])
        .args([
            "--data",
            r#"{"data":{"type":"projects","attributes":{"name":"G2"}}}"#,
        ]));
    assert_eq!(derived_key.json()["key"], derived("gemini:create").as_str());
}

#[test]
fn get_and_graphql_read_what_was_written() {
    let contract = Contract::start();
    let created = run(contract
        .send()
        .args(["--json", "write", "POST", PROJECTS, "--key", "mercury"])
        .args([
            "--data",
            r#"{"data":{"type":"projects","attributes":{"name":"Mercury"}}}"#,
        ]));
    let id = created.json()["body"]["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let got = run(contract
        .send()
        .args(["--json", "get", &format!("{PROJECTS}/{id}")]));
    assert_eq!(got.code, 0, "{got:?}");
    let report = got.json();
    assert_eq!(report["outcome"], "ok");
    assert_eq!(report["status"], 200);
    assert_eq!(report["key"], Value::Null);
    assert_eq!(report["body"]["data"]["attributes"]["name"], "Mercury");

    let query = "query Facts($type: String!) { factQuery(type: $type) { id attributes } }";
    let queried = run(contract.send().args([
        "--json",
        "graphql",
        "--query",
        query,
        "--variables",
        r#"{"type":"projects"}"#,
    ]));
    assert_eq!(queried.code, 0, "{queried:?}");
    let report = queried.json();
    assert_eq!(report["outcome"], "ok");
    assert_eq!(report["body"]["data"]["factQuery"][0]["id"], id.as_str());

    // A document the schema refuses is permanent: exit 1, sent once.
    let refused = run(contract.send().args([
        "--json",
        "graphql",
        "--query",
        r#"{ factQuery(type: "projects") { id secret } }"#,
    ]));
    assert_eq!(refused.code, 1, "{refused:?}");
    let report = refused.json();
    assert_eq!(report["error"]["kind"], "unprocessable");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("graphql: ")
    );
    assert_eq!(
        contract.ledger().requests_to("POST", "/api/graphql").len(),
        2
    );

    // Human output: the summary and the document on stdout, the attempt log on stderr.
    let human = run(contract.send().args(["get", &format!("{PROJECTS}/{id}")]));
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human.stdout.starts_with("ok: 200 (1 attempt, "),
        "{human:?}"
    );
    assert!(human.stdout.contains("\"Mercury\""), "{human:?}");
    assert!(human.stderr.contains("attempt 1: 200 (req_"), "{human:?}");
}

#[test]
fn follow_polls_a_run_to_its_terminal_state() {
    let contract = Contract::with(|builder| {
        builder.trigger(TriggerSeed::demo()).trigger(
            TriggerSeed::new("trg_failing_1", DEMO_ORGANIZATION).run_outcome(RunOutcome::Failed),
        )
    });
    let accepted = |trigger: &str| {
        let ran = run(contract.send().args([
            "--json",
            "webhook",
            trigger,
            "--event-id",
            trigger,
            "--data",
            EVENT,
        ]));
        ran.json()["workflow_run_id"].as_str().unwrap().to_owned()
    };

    let run_id = accepted(TRIGGER);
    let followed = run(contract.send().args(["--json", "follow", &run_id]));
    assert_eq!(followed.code, 0, "{followed:?}");
    let report = followed.json();
    assert_eq!(report["outcome"], "ok");
    assert_eq!(report["state"], "succeeded");
    assert_eq!(report["workflow_run_id"], run_id.as_str());
    assert_eq!(report["status"], 200);

    let failing = accepted("trg_failing_1");
    let followed = run(contract.send().args(["--json", "follow", &failing]));
    assert_eq!(followed.code, 1, "{followed:?}");
    let report = followed.json();
    assert_eq!(report["state"], "failed");
    assert_eq!(report["outcome"], "error");
    assert_eq!(report["error"]["kind"], "unprocessable");
    assert!(
        !contract
            .ledger()
            .requests_to("GET", "/api/json/v1/workflow_runs/")
            .is_empty()
    );

    let unknown = run(contract.send().args(["--json", "follow", "no-such-run"]));
    assert_eq!(unknown.code, 1, "{unknown:?}");
    let report = unknown.json();
    assert_eq!(report["error"]["kind"], "not_found");
    assert_eq!(report["state"], Value::Null);
    assert_eq!(report["workflow_run_id"], "no-such-run");
}

#[test]
fn rehearse_succeeds_when_the_resend_is_a_duplicate() {
    let contract = Contract::start();
    let ran = run(contract.send().args([
        "--json",
        "rehearse",
        TRIGGER,
        "--event-id",
        "rehearsal-1",
        "--data",
        EVENT,
    ]));

    assert_eq!(ran.code, 0, "{ran:?}");
    let report = ran.json();
    let mut expected: Vec<&str> = FIELDS.to_vec();
    expected.extend(["first_attempts", "first_outcome", "first_workflow_run_id"]);
    expected.sort_unstable();
    assert_eq!(fields(&report), expected);
    assert_eq!(report["outcome"], "duplicate");
    assert_eq!(report["first_outcome"], "accepted");
    assert_eq!(report["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(report["first_attempts"][0]["status"], 202);
    let key = derived("rehearsal-1");
    let ledger = contract.ledger();
    assert_eq!(
        ledger.runs_for_delivery(&key),
        [report["first_workflow_run_id"].as_str().unwrap()]
    );
    assert_eq!(ledger.duplicates_for_delivery(&key), 1);

    // Refused before sending, the report still has the rehearsal's fields.
    let refused = run(contract.send().args([
        "--json",
        "rehearse",
        TRIGGER,
        "--data",
        "@/nonexistent/hodoflow/event.json",
    ]));
    assert_eq!(refused.code, 2, "{refused:?}");
    let report = refused.json();
    assert_eq!(fields(&report), expected);
    assert_eq!(report["first_outcome"], Value::Null);
    assert_eq!(report["first_attempts"], json!([]));
}

#[test]
fn rehearse_fails_when_the_resend_starts_a_second_run() {
    // A server that forgets delivery IDs at once accepts the resend as new work.
    let contract = Contract::with(|builder| {
        builder.limits(hodoflow_mock::Limits {
            delivery_retention: Duration::ZERO,
            ..support::limits()
        })
    });
    let ran = run(contract.send().args([
        "--json",
        "rehearse",
        TRIGGER,
        "--delivery-id",
        "drill-forgotten",
        "--data",
        EVENT,
    ]));

    assert_eq!(ran.code, 1, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["outcome"], "error");
    assert_eq!(report["status"], 202);
    assert_eq!(report["first_outcome"], "accepted");
    assert_eq!(report["error"]["kind"], "unprocessable");
    assert_eq!(report["error"]["may_have_run"], true);
    let runs = contract
        .ledger()
        .runs_for_delivery("drill-forgotten")
        .to_vec();
    assert_eq!(runs.len(), 2);
    assert_eq!(report["workflow_run_id"], runs[1].as_str());
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&runs[1])
    );
}

#[test]
fn an_unknown_trigger_is_a_permanent_failure() {
    let contract = Contract::start();
    let ran = run(contract.send().args([
        "--json",
        "webhook",
        "trg_unknown_0",
        "--delivery-id",
        "evt-404",
        "--data",
        EVENT,
    ]));

    assert_eq!(ran.code, 1, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["outcome"], "error");
    assert_eq!(report["status"], 404);
    assert_eq!(report["error"]["kind"], "not_found");
    assert_eq!(report["error"]["may_have_run"], false);
    assert_eq!(report["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(contract.ledger().requests_with_key("evt-404").len(), 1);
    assert_eq!(contract.ledger().total_runs(), 0);
}

#[test]
fn usage_errors_exit_2_and_send_nothing() {
    let contract = Contract::start();
    let webhook = ["webhook", TRIGGER, "--delivery-id", "evt-usage"];
    let cases: Vec<(Vec<&str>, bool, &str)> = vec![
        // (arguments, with credentials, what stderr or the report must say)
        (
            vec!["--data", "@/nonexistent/hodoflow/event.json"],
            true,
            "cannot read --data file",
        ),
        (vec!["--max-elapsed", "5x"], true, "has no unit"),
        (vec!["--attempt-timeout", "0ms"], true, "must be positive"),
        (vec!["--max-attempts", "0"], true, "--max-attempts"),
        (vec![], false, "no client secret"),
    ];
    for (extra, credentials, says) in cases {
        let mut command = if credentials {
            contract.send()
        } else {
            contract.bare()
        };
        command.env("HODOFLOW_CLIENT_ID", "demo-client");
        let ran = run(command.args(webhook).args(&extra));
        assert_eq!(ran.code, 2, "{extra:?}: {ran:?}");
        assert!(ran.all().contains(says), "{extra:?}: {ran:?}");
    }

    let bad_id = run(contract.send().args([
        "--json",
        "webhook",
        TRIGGER,
        "--delivery-id",
        "has space",
        "--data",
        EVENT,
    ]));
    assert_eq!(bad_id.code, 2, "{bad_id:?}");
    let report = bad_id.json();
    assert_eq!(report["key"], Value::Null);
    assert_eq!(report["error"]["kind"], "invalid_input");
    assert_eq!(report["error"]["may_have_run"], false);
    assert_eq!(report["attempts"], json!([]));

    let bad_key = run(contract
        .send()
        .args(["write", "POST", PROJECTS, "--key", "has space"]));
    assert_eq!(bad_key.code, 2, "{bad_key:?}");
    let client_secret_flag =
        run(contract
            .bare()
            .args(["--client-secret", "demo-secret", "get", PROJECTS]));
    assert_eq!(client_secret_flag.code, 2, "{client_secret_flag:?}");

    let ledger = contract.ledger();
    assert!(ledger.requests().is_empty(), "{:?}", ledger.requests());
    assert!(ledger.exchanges().is_empty(), "{:?}", ledger.exchanges());
}

#[test]
fn a_503_every_time_exhausts_the_budget_with_exit_3() {
    let contract = Contract::start();
    contract
        .server
        .inject(Fault::respond(503).on("POST", WEBHOOKS).times(100));

    let ran = run(contract.send().args([
        "--json",
        "--max-attempts",
        "2",
        "webhook",
        TRIGGER,
        "--delivery-id",
        "evt-down",
        "--data",
        EVENT,
    ]));

    assert_eq!(ran.code, 3, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["outcome"], "error");
    assert_eq!(report["status"], 503);
    assert_eq!(report["key"], "evt-down");
    assert_eq!(report["error"]["kind"], "budget_exhausted");
    assert_eq!(report["error"]["may_have_run"], false);
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("server: ")
    );
    let statuses: Vec<&Value> = report["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["status"])
        .collect();
    assert_eq!(statuses, [503, 503]);
    assert_eq!(contract.ledger().requests_with_key("evt-down").len(), 2);
    assert_eq!(contract.ledger().total_runs(), 0);

    // Without --json: the summary says to retry with the same key.
    let human = run(contract.send().args([
        "--max-attempts",
        "1",
        "webhook",
        TRIGGER,
        "--delivery-id",
        "evt-down",
    ]));
    assert_eq!(human.code, 3, "{human:?}");
    assert!(
        human
            .stdout
            .contains("retry later with the same key evt-down"),
        "{human:?}"
    );
    assert!(human.stderr.contains("attempt 1: 503"), "{human:?}");
}

#[test]
fn answers_lost_every_time_leave_the_outcome_unknown_with_exit_3() {
    let contract = Contract::start();
    contract
        .server
        .inject(Fault::execute_then_close().on("POST", WEBHOOKS).times(2));

    let ran = run(contract.send().args([
        "--json",
        "--max-attempts",
        "2",
        "webhook",
        TRIGGER,
        "--delivery-id",
        "evt-unknown",
        "--data",
        EVENT,
    ]));

    assert_eq!(ran.code, 3, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["error"]["kind"], "transport");
    assert_eq!(report["error"]["may_have_run"], true);
    assert_eq!(report["status"], Value::Null);
    // It did run: the retry later with the same ID must come back duplicate.
    assert_eq!(contract.ledger().runs_for_delivery("evt-unknown").len(), 1);
    let retried = run(contract.send().args([
        "--json",
        "webhook",
        TRIGGER,
        "--delivery-id",
        "evt-unknown",
        "--data",
        EVENT,
    ]));
    assert_eq!(retried.json()["outcome"], "duplicate");
    assert_eq!(contract.ledger().runs_for_delivery("evt-unknown").len(), 1);
}

#[test]
fn batch_of_1000_with_lost_answers_and_503s_starts_exactly_one_run_per_event() {
    const EVENTS: usize = 1000;
    let contract = Contract::start();
    let mut text = String::new();
    for n in 0..EVENTS {
        text.push_str(&format!(
            "{{\"event_id\":\"order-{n}:paid\",\"body\":{{\"order\":{n}}}}}\n"
        ));
    }
    let events = TempFile::new("events.ndjson", text.as_bytes());

    // About 10% of answers lost after commit, and about 10% 503s, seeded.
    contract.server.inject(
        Fault::execute_then_close()
            .on("POST", WEBHOOKS)
            .probability(0.1, 1),
    );
    contract
        .server
        .inject(Fault::respond(503).on("POST", WEBHOOKS).probability(0.1, 2));
    let trigger_url = contract.trigger_url(TRIGGER);
    // Exit 0 needs every event to end within its budget. A fifth of attempts fail, so one of
    // 1,000 events fails k attempts in a row with probability about 1,000 * 0.2^k. The
    // full-jitter waits of six or seven failures average 16 to 31 s: with 20 s, about 1 run in
    // 15 left an event "to retry" (exit 3, the ledger still right; seen twice in 27 runs). 60 s,
    // the default, holds about eight failures: about 1 run in 400.
    let ran = run(contract.send().args([
        "--max-attempts",
        "12",
        "--max-elapsed",
        "60s",
        "batch",
        &trigger_url,
        "--events",
        &events.arg(),
        "--concurrency",
        "32",
    ]));

    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let lines = ran.json_lines();
    assert_eq!(lines.len(), EVENTS);
    let ledger = contract.ledger();
    assert_eq!(ledger.total_runs(), EVENTS);
    let mut seen = std::collections::HashSet::new();
    let (mut retried, mut duplicates) = (0, 0);
    for line in &lines {
        let event_id = line["event_id"].as_str().unwrap();
        assert!(
            seen.insert(event_id.to_owned()),
            "one line per event: {event_id}"
        );
        let delivery_id = line["delivery_id"].as_str().unwrap();
        assert_eq!(delivery_id, derived(event_id));
        let runs = ledger.runs_for_delivery(delivery_id);
        assert_eq!(runs.len(), 1, "exactly one run for {event_id}");
        match line["outcome"].as_str().unwrap() {
            "accepted" => assert_eq!(line["workflow_run_id"], runs[0].as_str()),
            "duplicate" => {
                duplicates += 1;
                assert_eq!(line["workflow_run_id"], Value::Null);
            }
            other => panic!("{event_id} ended {other}: {line}"),
        }
        assert_eq!(line["status"], 202);
        assert_eq!(line["error"], Value::Null);
        if line["attempts"].as_u64().unwrap() > 1 {
            retried += 1;
        }
    }
    let requests = ledger.requests_to("POST", WEBHOOKS);
    let unanswered = requests.iter().filter(|r| r.status.is_none()).count();
    let unavailable = requests.iter().filter(|r| r.status == Some(503)).count();
    assert!(
        unanswered > 20 && unavailable > 20,
        "{unanswered} lost, {unavailable} 503"
    );
    assert!(
        duplicates > 20 && retried > duplicates,
        "{duplicates} duplicates, {retried} retried"
    );
    assert!(ran.stderr.contains("batch: 1000 events,"), "{}", ran.stderr);
}

#[test]
fn batch_exits_with_the_worst_status_and_refuses_a_bad_file_whole() {
    let contract = Contract::start();
    let events = TempFile::new(
        "mixed.ndjson",
        b"{\"event_id\":\"a\",\"body\":{\"n\":1}}\n{\"event_id\":\"b\",\"body\":{\"n\":2}}\n",
    );
    let unknown = run(contract.send().args([
        "--json",
        "batch",
        "trg_unknown_0",
        "--events",
        &events.arg(),
    ]));
    assert_eq!(unknown.code, 1, "{unknown:?}");
    let lines = unknown.json_lines();
    assert_eq!(lines.len(), 2);
    assert!(
        lines.iter().all(|l| l["error"]["kind"] == "not_found"),
        "{lines:?}"
    );

    let bad = TempFile::new(
        "bad.ndjson",
        b"{\"event_id\":\"c\",\"body\":{}}\n{\"body\":{}}\n",
    );
    let refused = run(contract
        .send()
        .args(["--json", "batch", TRIGGER, "--events", &bad.arg()]));
    assert_eq!(refused.code, 2, "{refused:?}");
    assert_eq!(refused.json()["error"]["kind"], "invalid_input");
    assert_eq!(contract.ledger().total_runs(), 0);
    assert_eq!(contract.ledger().requests_to("POST", WEBHOOKS).len(), 2);

    let from_stdin = run(contract
        .send()
        .args(["batch", TRIGGER, "--events", "-"])
        .write_stdin("{\"event_id\":\"d\",\"body\":{\"n\":4}}\n"));
    assert_eq!(from_stdin.code, 0, "{from_stdin:?}");
    assert_eq!(from_stdin.json()["outcome"], "accepted");
}

#[test]
fn batch_refuses_an_event_id_with_two_bodies_naming_both_lines_and_sends_nothing() {
    let contract = Contract::start();
    let events = TempFile::new(
        "conflict.ndjson",
        b"{\"event_id\":\"order-1:paid\",\"body\":{\"amount\":10}}\n\
          {\"event_id\":\"order-2:paid\",\"body\":{\"amount\":20}}\n\
          \n\
          {\"event_id\":\"order-1:paid\",\"body\":{\"amount\":11}}\n",
    );
    let says = "--events has 1 bad line(s); nothing was sent: line 4: event_id repeats \
                line 1's with a different body";

    let ran = run(contract
        .send()
        .args(["--json", "batch", TRIGGER, "--events", &events.arg()]));
    assert_eq!(ran.code, 2, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["outcome"], "error");
    assert_eq!(report["error"]["kind"], "invalid_input");
    assert_eq!(report["error"]["may_have_run"], false);
    let message = report["error"]["message"].as_str().unwrap();
    assert!(message.starts_with(says), "{message}");

    let human = run(contract
        .send()
        .args(["batch", TRIGGER, "--events", &events.arg()]));
    assert_eq!(human.code, 2, "{human:?}");
    assert!(human.stdout.contains(says), "{human:?}");

    let ledger = contract.ledger();
    assert!(ledger.requests().is_empty(), "{:?}", ledger.requests());
    assert!(ledger.exchanges().is_empty(), "{:?}", ledger.exchanges());
}

#[test]
fn batch_delivers_an_event_repeated_with_the_same_body_once_with_one_line() {
    let contract = Contract::start();
    let events = TempFile::new(
        "repeated.ndjson",
        b"{\"event_id\":\"order-1:paid\",\"body\":{\"amount\":10}}\n\
          {\"event_id\":\"order-2:paid\",\"body\":{\"amount\":20}}\n\
          {\"event_id\":\"order-1:paid\",\"body\":{\"amount\":10}}\n",
    );

    let ran = run(contract
        .send()
        .args(["batch", TRIGGER, "--events", &events.arg()]));

    assert_eq!(ran.code, 0, "{ran:?}");
    let lines = ran.json_lines();
    let mut ids: Vec<&str> = lines
        .iter()
        .map(|l| l["event_id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["order-1:paid", "order-2:paid"]);
    assert!(
        lines.iter().all(|l| l["outcome"] == "accepted"),
        "{lines:?}"
    );
    assert!(
        ran.stderr.contains(
            "--events: 1 line(s) repeat an earlier line's event_id and body, each event is \
             delivered once: line 3 into line 1"
        ),
        "{ran:?}"
    );
    assert!(
        ran.stderr.contains("batch: 2 events, 2 accepted"),
        "{ran:?}"
    );
    let ledger = contract.ledger();
    assert_eq!(ledger.requests_to("POST", WEBHOOKS).len(), 2);
    for event in ["order-1:paid", "order-2:paid"] {
        assert_eq!(
            ledger.requests_with_key(&derived(event)).len(),
            1,
            "{event}"
        );
        assert_eq!(
            ledger.runs_for_delivery(&derived(event)).len(),
            1,
            "{event}"
        );
    }
    assert_eq!(ledger.total_runs(), 2);
}

#[test]
fn usage_errors_clap_catches_are_one_json_object_with_json_and_clap_s_message_without() {
    let contract = Contract::start();
    let with = |fields: &[&'static str]| {
        let mut all = FIELDS.to_vec();
        all.extend(fields);
        all.sort_unstable();
        all
    };
    let cases: Vec<(Vec<&str>, &str, Vec<&str>)> = vec![
        // (arguments after --json, what the message says, the fields of the report)
        (
            vec!["webhook"],
            "the following required arguments were not provided: <TRIGGER>",
            with(&[]),
        ),
        (
            vec!["webhook", TRIGGER, "--bogus"],
            "unexpected argument '--bogus' found",
            with(&[]),
        ),
        (
            vec!["rehearse", TRIGGER, "--delivery-id", "a", "--event-id", "b"],
            "the argument '--delivery-id <ID>' cannot be used with '--event-id <BUSINESS_ID>'",
            with(&["first_attempts", "first_outcome", "first_workflow_run_id"]),
        ),
        (
            vec!["--max-elapsed", "5x", "follow", "r"],
            "'5x' has no unit",
            with(&["state"]),
        ),
        (
            vec!["write", "POST", PROJECTS, "--max-attempts", "0"],
            "--max-attempts",
            with(&["body"]),
        ),
        (
            vec!["--client-secret", "x", "get", PROJECTS],
            "unexpected argument '--client-secret'",
            with(&[]),
        ),
        (
            vec!["frobnicate"],
            "unrecognized subcommand 'frobnicate'",
            with(&[]),
        ),
        (vec![], "requires a subcommand", with(&[])),
        // A quoted argument that is the secret is redacted, as everything printed.
        (
            vec!["get", PROJECTS, DEMO_CLIENT_SECRET],
            "unexpected argument '<redacted>' found",
            with(&["body"]),
        ),
    ];
    for (args, says, expected) in &cases {
        // --json first, or last: it is found wherever it is before a `--`.
        for json_last in [false, true] {
            let mut command = contract.send();
            if json_last {
                command.args(args).arg("--json");
            } else {
                command.arg("--json").args(args);
            }
            let ran = run(&mut command);
            assert_eq!(ran.code, 2, "{args:?}: {ran:?}");
            let report = ran.json();
            assert_eq!(fields(&report), *expected, "{args:?}: {report}");
            assert_eq!(report["outcome"], "error", "{args:?}");
            assert_eq!(report["error"]["kind"], "invalid_input", "{args:?}");
            assert_eq!(report["error"]["may_have_run"], false, "{args:?}");
            assert_eq!(report["key"], Value::Null, "{args:?}");
            assert_eq!(report["attempts"], json!([]), "{args:?}");
            let message = report["error"]["message"].as_str().unwrap();
            assert!(message.contains(says), "{args:?}: {message}");
            assert!(!message.starts_with("error:"), "{message}");
            // clap's own message stays on stderr for whoever reads the terminal.
            assert!(ran.stderr.starts_with("error: "), "{args:?}: {ran:?}");
            assert!(!ran.all().contains(DEMO_CLIENT_SECRET), "{ran:?}");
        }

        // Without --json, as before: clap's message on stderr and nothing on stdout.
        let ran = run(contract.send().args(args));
        assert_eq!(ran.code, 2, "{args:?}: {ran:?}");
        assert_eq!(ran.stdout, "", "{args:?}");
        assert!(
            ran.stderr.contains("Usage:") || ran.stderr.starts_with("error: "),
            "{ran:?}"
        );
    }

    // After `--`, --json is a value: not asked for. Here an extra TRIGGER, refused by clap.
    let ran = run(contract.send().args(["webhook", TRIGGER, "--", "--json"]));
    assert_eq!(ran.code, 2, "{ran:?}");
    assert_eq!(ran.stdout, "", "{ran:?}");
    assert!(
        ran.stderr.contains("unexpected argument '--json' found"),
        "{ran:?}"
    );

    // Help and version are not errors: printed as always, exit 0, with or without --json.
    for args in [
        &["--json", "--help"][..],
        &["--json", "webhook", "--help"],
        &["batch", "-h", "--json"],
        &["--json", "help", "rehearse"],
        &["--json", "--version"],
    ] {
        let ran = run(contract.send().args(args));
        assert_eq!(ran.code, 0, "{args:?}: {ran:?}");
        assert!(
            ran.stdout.contains("Usage: hodoflow-send") || ran.stdout.starts_with("hodoflow-send "),
            "{args:?}: {ran:?}"
        );
        assert!(!ran.stdout.starts_with('{'), "{args:?}: {ran:?}");
    }

    let ledger = contract.ledger();
    assert!(ledger.requests().is_empty(), "{:?}", ledger.requests());
    assert!(ledger.exchanges().is_empty(), "{:?}", ledger.exchanges());
}

/// A JSON:API document that creates or replaces a project.
const PROJECT: &str = r#"{"data":{"type":"projects","attributes":{"name":"Hygiene"}}}"#;

#[test]
fn no_secret_reaches_stdout_or_stderr_even_at_trace_level() {
    const CLIENT_ID: &str = "svc-hygiene";
    const SECRET: &str = "cs_SECRET_never_printed_42";
    const TRIGGER_TOKEN: &str = "trg_SECRET_never_printed_77";
    let contract = Contract::with(|builder| {
        builder
            .client(ClientSeed::new(CLIENT_ID, SECRET, DEMO_ORGANIZATION))
            .trigger(TriggerSeed::new(TRIGGER_TOKEN, DEMO_ORGANIZATION))
    });
    let secret_file = TempFile::new("secret", format!("{SECRET}\n").as_bytes());
    let events = TempFile::new(
        "events.ndjson",
        b"{\"event_id\":\"s-1\",\"body\":{}}\n{\"event_id\":\"s-2\",\"body\":{}}\n",
    );
    let url = contract.trigger_url(TRIGGER_TOKEN);
    contract
        .server
        .inject(Fault::respond(503).on("POST", WEBHOOKS).times(2));
    contract
        .server
        .inject(Fault::expired_token().on("POST", WEBHOOKS));

    let by_env = |command: &mut assert_cmd::Command| {
        command
            .env("HODOFLOW_CLIENT_ID", CLIENT_ID)
            .env("HODOFLOW_CLIENT_SECRET", SECRET)
            .env("RUST_LOG", "trace");
    };
    let mut runs = Vec::new();
    for args in [
        vec!["webhook", url.as_str(), "--event-id", "s-0", "--data", "{}"],
        vec![
            "--json",
            "rehearse",
            TRIGGER_TOKEN,
            "--event-id",
            "s-3",
            "--data",
            "{}",
        ],
        vec!["batch", url.as_str(), "--events", &events.arg()],
        vec!["webhook", url.as_str(), "--data", "{}"],
        vec![
            "--json",
            "webhook",
            "http://127.0.0.1:1/api/v1/webhooks/trg_SECRET_never_printed_77/extra/x",
        ],
    ] {
        let mut command = contract.bare();
        by_env(&mut command);
        runs.push(run(command.args(&args)));
    }
    for args in [
        vec!["write", "POST", PROJECTS, "--key", "k-1", "--data", PROJECT],
        vec!["--json", "get", PROJECTS],
    ] {
        let mut command = contract.bare();
        command
            .env("HODOFLOW_CLIENT_ID", CLIENT_ID)
            .env("RUST_LOG", "trace")
            .args(["--client-secret-file", &secret_file.arg()]);
        runs.push(run(command.args(&args)));
    }

    assert_eq!(
        runs.iter().map(|r| r.code).collect::<Vec<_>>(),
        [0, 0, 0, 0, 2, 0, 0],
        "{runs:#?}"
    );
    // The generated delivery ID's resend command shows the trigger URL, its token redacted.
    assert!(
        runs[3].stderr.contains(&format!(
            "{WEBHOOKS}<redacted>' --data @FILE --delivery-id "
        )),
        "{:?}",
        runs[3]
    );
    let ledger = contract.ledger();
    // One token per run that sent, and one more after the injected expiry.
    assert_eq!(ledger.tokens_issued(), 7, "{:?}", ledger.exchanges());
    assert!(
        ledger
            .exchanges()
            .iter()
            .all(|e| e.client_id == CLIENT_ID && e.granted)
    );
    for ran in &runs {
        let all = ran.all();
        assert!(
            all.contains("TRACE") || ran.code == 2,
            "trace was on: {all}"
        );
        for secret in [SECRET, TRIGGER_TOKEN, "hft_", "Bearer "] {
            assert!(!all.contains(secret), "{secret} printed: {all}");
        }
    }
    assert_eq!(
        ledger.requests_to("POST", TOKEN).len(),
        ledger.exchanges().len()
    );
}

/// What every body of the next test carries: it must be in no output.
const BODY_MARKER: &str = "BODY_MARKER_never_printed_5f3a";

#[test]
fn no_body_reaches_stdout_or_stderr_even_at_trace_level() {
    const UNKNOWN_TRIGGER: &str = "trg_not_known_here_1234";
    let contract = Contract::start();
    let event = format!(r#"{{"order":4711,"card":"{BODY_MARKER}"}}"#);
    let body_file = TempFile::new("body.json", event.as_bytes());
    let lines = format!(
        "{{\"event_id\":\"b-1\",\"body\":{event}}}\n{{\"event_id\":\"b-2\",\"body\":{event}}}\n"
    );
    let events = TempFile::new("events.ndjson", lines.as_bytes());
    let bad_lines = format!(
        "\"{BODY_MARKER}\"\n{{\"event_id\":\"b-3\",\"body\":{{}},\"{BODY_MARKER}\":1}}\n\
         {{\"event_id\":{{\"{BODY_MARKER}\":1}},\"body\":{{}}}}\n"
    );
    let bad_events = TempFile::new("bad.ndjson", bad_lines.as_bytes());
    let outbox = TempFile::new("outbox.db", b"");
    let (db_wal, db_shm) = (
        TempFile(format!("{}-wal", outbox.arg()).into()),
        TempFile(format!("{}-shm", outbox.arg()).into()),
    );
    let document = format!(
        r#"{{"data":{{"type":"projects","attributes":{{"name":"n"}}}},"meta":{{"note":"{BODY_MARKER}"}}}}"#
    );
    let modulify_body = format!(r#"{{"note":"{BODY_MARKER}"}}"#);
    let not_an_object = format!(r#""{BODY_MARKER}""#);
    // Retries, so that every attempt's trace lines are written.
    contract
        .server
        .inject(Fault::respond(503).on("POST", WEBHOOKS).times(3));
    contract
        .server
        .inject(Fault::respond(503).on("POST", PROJECTS).times(1));

    let db = outbox.arg();
    let mut runs = Vec::new();
    for args in [
        vec!["webhook", TRIGGER, "--data", &event],
        vec!["--json", "webhook", TRIGGER, "--data", &event],
        vec!["webhook", TRIGGER, "--event-id", "w-1", "--data", &event],
        vec![
            "webhook",
            TRIGGER,
            "--data",
            &format!("@{}", body_file.arg()),
        ],
        vec!["rehearse", TRIGGER, "--data", &event],
        vec!["write", "POST", PROJECTS, "--data", &document],
        vec!["batch", TRIGGER, "--events", &events.arg()],
        vec!["--json", "batch", TRIGGER, "--events", &events.arg()],
        vec!["batch", TRIGGER, "--events", &bad_events.arg()],
        vec![
            "batch",
            UNKNOWN_TRIGGER,
            "--events",
            &events.arg(),
            "--outbox",
            &db,
        ],
        vec!["outbox", "--outbox", &db, "list"],
        vec!["--json", "outbox", "--outbox", &db, "list"],
        vec!["outbox", "--outbox", &db, "status"],
        vec!["outbox", "--outbox", &db, "retry", "b-1"],
        vec![
            "outbox",
            "--outbox",
            &db,
            "worker",
            "--until-idle",
            "--trigger-token",
            UNKNOWN_TRIGGER,
        ],
    ] {
        runs.push(run(contract.send().env("RUST_LOG", "trace").args(&args)));
    }
    for args in [
        vec![
            "modulify",
            "call",
            "send_site_email",
            "--data",
            &modulify_body,
        ],
        vec![
            "--json",
            "modulify",
            "call",
            "send_site_email",
            "--data",
            &modulify_body,
        ],
        vec![
            "modulify",
            "call",
            "send_site_email",
            "--data",
            &not_an_object,
        ],
    ] {
        runs.push(run(contract
            .modulify()
            .env("RUST_LOG", "trace")
            .args(&args)));
    }

    assert_eq!(
        runs.iter().map(|r| r.code).collect::<Vec<_>>(),
        [0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 2],
        "{runs:#?}"
    );
    // The resend line keeps every argument but the body, and says how to send the same bytes.
    let resend = support::resend_command(&runs[0]);
    assert!(
        resend.contains(" webhook '<redacted>' --data @FILE --delivery-id "),
        "{resend}"
    );
    assert!(
        runs[0]
            .stderr
            .contains("run with FILE holding the same body byte for byte (or --data @- and the same body on standard input):"),
        "{:?}",
        runs[0]
    );
    assert!(
        support::resend_command(&runs[5]).contains(" --data @FILE --key "),
        "{:?}",
        runs[5]
    );
    assert!(
        support::resend_command(&runs[15]).contains(" --data @FILE --key "),
        "{:?}",
        runs[15]
    );
    // A body given as a file is named, not shown.
    assert!(
        runs[3]
            .stderr
            .contains(&format!("--data '@{}'", body_file.arg()))
            || runs[3]
                .stderr
                .contains(&format!("--data @{}", body_file.arg())),
        "{:?}",
        runs[3]
    );
    assert!(
        runs[8].all().contains("--events has 2 bad line(s)"),
        "{:?}",
        runs[8]
    );
    // The body was sent: the server saw it, this tool printed none of it.
    let ledger = contract.ledger();
    assert!(ledger.total_runs() >= 4, "{:?}", ledger.requests());
    // Every run that sent wrote trace lines (`outbox list`, `status` and `retry` send nothing;
    // the runs refused with exit 2 sent nothing).
    let traced: Vec<bool> = runs.iter().map(|r| r.all().contains("TRACE")).collect();
    assert_eq!(traced.iter().filter(|t| **t).count(), 12, "{traced:?}");
    for ran in &runs {
        let all = ran.all();
        assert!(!all.contains(BODY_MARKER), "a body was printed: {all}");
    }
    drop((db_wal, db_shm));
}

#[test]
fn credentials_go_to_the_token_url_and_a_refused_secret_is_permanent() {
    let contract = Contract::start();
    let token_url = format!("{}{TOKEN}", contract.base_url());
    let ran = run(contract
        .send()
        .args(["--json", "--token-url", &token_url, "get", PROJECTS]));
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(contract.ledger().tokens_issued(), 1);

    // Nothing listens on port 1: the exchange gets no answer, so try again later.
    let unreachable = run(contract.send().args([
        "--json",
        "--token-url",
        "http://127.0.0.1:1/oauth/token",
        "get",
        PROJECTS,
    ]));
    assert_eq!(unreachable.code, 3, "{unreachable:?}");
    let report = unreachable.json();
    assert_eq!(report["error"]["kind"], "transport");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("token_exchange: ")
    );

    let refused = run(contract
        .send()
        .env("HODOFLOW_CLIENT_SECRET", "not-the-secret")
        .args(["--json", "get", PROJECTS]));
    assert_eq!(refused.code, 1, "{refused:?}");
    let report = refused.json();
    assert_eq!(report["error"]["kind"], "unauthorized");
    assert_eq!(report["error"]["may_have_run"], false);

    let ledger = contract.ledger();
    assert_eq!(ledger.exchanges().len(), 2);
    assert!(!ledger.exchanges()[1].granted);
    assert_eq!(ledger.requests_to("GET", PROJECTS).len(), 1);
}

#[test]
fn a_trigger_that_always_sheds_gets_exactly_max_attempts_unless_paced_retries_allow_more() {
    // `503, Retry-After: 1` on every delivery: --max-attempts is every request by default;
    // --paced-retries N lets N more retries the server paced go.
    let shed = |paced: &'static str, sent: usize| {
        let contract = Contract::start();
        contract.server.inject(
            Fault::respond(503)
                .header("Retry-After", "1")
                .body(r#"{"error":"Processing temporarily unavailable"}"#)
                .on("POST", WEBHOOKS)
                .times(100),
        );
        let key = format!("evt-shed-{paced}");
        let ran = run(contract.send().args([
            "--json",
            "--max-attempts",
            "2",
            "--paced-retries",
            paced,
            "--max-elapsed",
            "15s",
            "webhook",
            TRIGGER,
            "--delivery-id",
            &key,
            "--data",
            EVENT,
        ]));

        assert_eq!(ran.code, 3, "retry later: {ran:?}");
        let report = ran.json();
        assert_eq!(
            report["attempts"].as_array().unwrap().len(),
            sent,
            "{report}"
        );
        let ledger = contract.ledger();
        assert_eq!(
            ledger.requests_with_key(&key).len(),
            sent,
            "--paced-retries {paced}"
        );
        assert_eq!(ledger.total_runs(), 0);
    };
    // Both at once: each waits out most of its budget.
    std::thread::scope(|scope| {
        scope.spawn(|| shed("0", 2));
        shed("1", 3);
    });
}
