//! `hodoflow-send modulify` end to end: the built binary against the contract server's Modulify
//! routes on 127.0.0.1:0. Each test checks the exit status, what was printed, and the server's
//! ledger.

mod support;

use std::time::Duration;

use hodoflow_mock::{DEMO_MODULIFY_TOKEN, Fault, ModulifyTokenSeed};
use serde_json::Value;
use support::{Contract, TempFile, derived, is_uuid, run};

const SEND_MESSAGE: &str = "/v1/send_message";
const MESSAGE: &str = r#"{"projectId":"site_1","prompt":"Add a newsletter sign-up form."}"#;

/// The fields of a `modulify call --json` report: `write`'s, plus `data` and `answer_kept`.
const FIELDS: [&str; 10] = [
    "answer_kept",
    "attempts",
    "body",
    "data",
    "elapsed_ms",
    "error",
    "key",
    "outcome",
    "status",
    "workflow_run_id",
];

/// The keys of a JSON object, sorted.
fn fields(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

/// The number of attempts a report lists.
fn attempts(report: &Value) -> usize {
    report["attempts"].as_array().map_or(0, Vec::len)
}

/// `send_message` with `MESSAGE` under `key`, with `--json`.
fn send_message(contract: &Contract, key: &str) -> support::Ran {
    run(contract.modulify().args([
        "--json",
        "modulify",
        "call",
        "send_message",
        "--data",
        MESSAGE,
        "--key",
        key,
    ]))
}

#[test]
fn a_lost_answer_is_retried_with_the_same_key_into_a_replay_with_one_execution() {
    let contract = Contract::start();
    contract
        .server
        .inject(Fault::execute_then_close().on("POST", SEND_MESSAGE));

    let ran = send_message(&contract, "notify-4711");

    assert_eq!(ran.code, 0, "{ran:?}");
    let report = ran.json();
    assert_eq!(fields(&report), FIELDS);
    assert_eq!(report["outcome"], "replayed");
    assert_eq!(report["status"], 200);
    assert_eq!(report["key"], "notify-4711");
    assert_eq!(report["answer_kept"], true);
    assert!(report["data"]["execution"].is_u64(), "{report}");
    assert_eq!(report["body"]["data"], report["data"]);
    assert_eq!(report["error"], Value::Null);
    let lines = report["attempts"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{report}");
    assert_eq!(lines[0]["status"], Value::Null);
    assert!(lines[0]["error"].is_string(), "{report}");
    assert_eq!(lines[1]["status"], 200);
    let ledger = contract.ledger();
    assert_eq!(ledger.modulify_executions("notify-4711"), 1);
    assert_eq!(ledger.modulify_replays("notify-4711"), 1);
    let sent = ledger.requests_to("POST", SEND_MESSAGE);
    assert_eq!(sent.len(), 2);
    assert!(
        sent.iter()
            .all(|r| r.idempotency_key.as_deref() == Some("notify-4711")),
        "{sent:?}"
    );
    // The catalogue was read once, before the method was sent.
    assert_eq!(ledger.requests_to("GET", "/v1/tools").len(), 1);
    assert!(ledger.requests()[0].path == "/v1/tools", "{ledger:?}");
}

#[test]
fn an_answer_over_1_mb_lost_then_replayed_says_the_answer_was_not_kept() {
    let contract = Contract::start();
    contract
        .server
        .inject(Fault::execute_then_close().on("POST", SEND_MESSAGE));
    let body = TempFile::new(
        "big.json",
        br#"{"projectId":"site_1","prompt":"Export.","answer_bytes":1100000}"#,
    );

    let ran = run(contract.modulify().args([
        "--json",
        "modulify",
        "call",
        "send_message",
        "--data",
        &format!("@{}", body.arg()),
        "--event-id",
        "export-1",
    ]));

    assert_eq!(ran.code, 0, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["outcome"], "replayed");
    assert_eq!(report["answer_kept"], false);
    assert_eq!(report["data"], Value::Null);
    assert_eq!(report["key"], derived("export-1").as_str());
    assert_eq!(
        contract.ledger().modulify_executions(&derived("export-1")),
        1
    );

    let human = run(contract.modulify().args([
        "modulify",
        "call",
        "send_message",
        "--data",
        &format!("@{}", body.arg()),
        "--event-id",
        "export-1",
    ]));
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human.stdout.contains("read the current state instead"),
        "{human:?}"
    );
    assert_eq!(
        contract.ledger().modulify_executions(&derived("export-1")),
        1
    );
}

#[test]
fn a_read_only_method_is_sent_without_a_key_even_when_one_is_given() {
    let contract = Contract::start();
    let ran = run(contract
        .modulify()
        .args(["--json", "modulify", "call", "list_sites"]));
    assert_eq!(ran.code, 0, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["outcome"], "ok");
    assert_eq!(report["key"], Value::Null);
    assert!(report["data"]["sites"].is_array(), "{report}");
    assert!(!ran.stderr.contains("generated"), "{ran:?}");

    let given = run(contract.modulify().args([
        "--json",
        "modulify",
        "call",
        "list_sites",
        "--key",
        "read-1",
    ]));
    assert_eq!(given.code, 0, "{given:?}");
    assert_eq!(given.json()["key"], Value::Null);
    assert!(given.stderr.contains("sent without a key"), "{given:?}");

    let ledger = contract.ledger();
    let sent = ledger.requests_to("POST", "/v1/list_sites");
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|r| r.idempotency_key.is_none()), "{sent:?}");
}

#[test]
fn without_a_key_one_is_generated_announced_and_sent_on_every_attempt() {
    let contract = Contract::start();
    contract
        .server
        .inject(Fault::fail_execution(500).on("POST", SEND_MESSAGE).times(2));

    let ran = run(contract.modulify().args([
        "--json",
        "modulify",
        "call",
        "send_message",
        "--data",
        MESSAGE,
    ]));

    assert_eq!(ran.code, 0, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["outcome"], "ok");
    assert_eq!(attempts(&report), 3, "{report}");
    let key = report["key"].as_str().unwrap().to_owned();
    assert!(is_uuid(&key), "{key}");
    let resend = support::resend_command(&ran);
    assert!(resend.ends_with(&format!("--key {key}")), "{resend}");
    assert!(resend.contains("modulify call send_message"), "{resend}");
    let ledger = contract.ledger();
    let sent = ledger.requests_to("POST", SEND_MESSAGE);
    assert_eq!(sent.len(), 3);
    assert!(
        sent.iter()
            .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())),
        "{sent:?}"
    );
    assert_eq!(ledger.modulify_executions(&key), 1);

    // The announced command, run by a shell with the same body in FILE, repeats the call
    // under the same key: a replay.
    assert!(resend.contains(" --data @FILE "), "{resend}");
    let body = support::TempFile::new("message.json", MESSAGE.as_bytes());
    let resend = resend.replace("@FILE", &format!("@{}", body.arg()));
    let mut shell = assert_cmd::Command::new("/bin/sh");
    shell
        .env_clear()
        .env("MODULIFY_BASE_URL", contract.base_url())
        .env("MODULIFY_TOKEN", DEMO_MODULIFY_TOKEN)
        .args(["-c", &resend])
        .timeout(Duration::from_secs(60));
    let again = run(&mut shell);
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(again.json()["outcome"], "replayed");
    assert_eq!(contract.ledger().modulify_executions(&key), 1);

    let derived_key = run(contract.modulify().args([
        "--json",
        "modulify",
        "call",
        "send_message",
        "--data",
        MESSAGE,
        "--event-id",
        "order-4711:notify",
    ]));
    assert_eq!(derived_key.code, 0, "{derived_key:?}");
    assert_eq!(
        derived_key.json()["key"],
        derived("order-4711:notify").as_str()
    );
    assert!(!derived_key.stderr.contains("generated"), "{derived_key:?}");
}

#[test]
fn a_key_reused_with_another_body_is_key_reused_exit_1_after_one_attempt() {
    let contract = Contract::start();
    assert_eq!(send_message(&contract, "reuse-1").code, 0);

    let other = run(contract.modulify().args([
        "--json",
        "modulify",
        "call",
        "send_message",
        "--data",
        r#"{"projectId":"site_1","prompt":"Something else."}"#,
        "--key",
        "reuse-1",
    ]));

    assert_eq!(other.code, 1, "{other:?}");
    let report = other.json();
    assert_eq!(report["outcome"], "error");
    assert_eq!(report["status"], 422);
    assert_eq!(report["error"]["kind"], "key_reused");
    assert_eq!(report["error"]["may_have_run"], false);
    assert_eq!(report["key"], "reuse-1");
    assert_eq!(report["data"], Value::Null);
    assert_eq!(report["answer_kept"], Value::Null);
    assert_eq!(report["body"]["error"]["code"], "idempotency_key_reused");
    assert_eq!(attempts(&report), 1, "{report}");
    let ledger = contract.ledger();
    assert_eq!(ledger.requests_with_key("reuse-1").len(), 2);
    assert_eq!(ledger.modulify_executions("reuse-1"), 1);
}

#[test]
fn a_call_still_in_progress_past_the_budget_is_in_progress_exit_3() {
    let contract = Contract::start();
    contract.server.inject(
        Fault::slow_execution(Duration::from_secs(4))
            .on("POST", SEND_MESSAGE)
            .times(1),
    );
    // The first call holds the key for 4 s, in a process of its own.
    let mut first = std::process::Command::new(env!("CARGO_BIN_EXE_hodoflow-send"));
    first
        .env_clear()
        .env("MODULIFY_BASE_URL", contract.base_url())
        .env("MODULIFY_TOKEN", DEMO_MODULIFY_TOKEN)
        .args(["--json", "modulify", "call", "send_message"])
        .args(["--data", MESSAGE, "--key", "held-1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let first = first.spawn().expect("the first call starts");
    let guard = support::HangGuard::new(Duration::from_secs(20));
    while contract.ledger().requests_with_key("held-1").is_empty() {
        guard.check("the first call to arrive");
        std::thread::sleep(Duration::from_millis(20));
    }

    // The second finds the key held, with Retry-After past its 2 s budget.
    let second = run(contract.modulify().args([
        "--json",
        "--max-elapsed",
        "2s",
        "modulify",
        "call",
        "send_message",
        "--data",
        MESSAGE,
        "--key",
        "held-1",
    ]));

    assert_eq!(second.code, 3, "{second:?}");
    let report = second.json();
    assert_eq!(report["status"], 409);
    assert_eq!(report["error"]["kind"], "in_progress");
    assert_eq!(report["key"], "held-1");
    assert!(second.stdout.contains("\"in_progress\""), "{second:?}");
    let first = first.wait_with_output().expect("the first call ends");
    assert!(first.status.success(), "{first:?}");
    let first: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(first["outcome"], "ok");
    let ledger = contract.ledger();
    let statuses: Vec<Option<u16>> = ledger
        .requests_with_key("held-1")
        .iter()
        .map(|r| r.status)
        .collect();
    assert!(statuses.contains(&Some(409)), "{statuses:?}");
    assert_eq!(ledger.modulify_executions("held-1"), 1);
}

#[test]
fn a_bad_key_or_body_is_invalid_input_exit_2_and_nothing_is_sent() {
    let contract = Contract::start();
    let long = "k".repeat(256);
    for (key, says) in [
        ("has space", "--key"),
        ("", "empty"),
        ("ключ", "--key"),
        (long.as_str(), "--key"),
    ] {
        let ran = run(contract.modulify().args([
            "--json",
            "modulify",
            "call",
            "send_message",
            "--data",
            MESSAGE,
            "--key",
            key,
        ]));
        assert_eq!(ran.code, 2, "{key:?}: {ran:?}");
        let report = ran.json();
        assert_eq!(report["error"]["kind"], "invalid_input");
        assert_eq!(report["error"]["may_have_run"], false);
        assert_eq!(report["attempts"], serde_json::json!([]));
        assert_eq!(report["data"], Value::Null);
        assert!(ran.all().contains(says), "{key:?}: {ran:?}");
    }
    for data in ["[1]", "not json", ""] {
        let ran =
            run(contract
                .modulify()
                .args(["modulify", "call", "send_message", "--data", data]));
        assert_eq!(ran.code, 2, "{data:?}: {ran:?}");
        assert!(ran.all().contains("JSON object"), "{data:?}: {ran:?}");
        assert!(!ran.stderr.contains("generated"), "{data:?}: {ran:?}");
    }
    let ledger = contract.ledger();
    assert!(ledger.requests().is_empty(), "{:?}", ledger.requests());
}

#[test]
fn validation_failed_and_invalid_request_are_unprocessable_exit_1_and_release_the_key() {
    let contract = Contract::start();
    let create = |data: &str| {
        run(contract.modulify().args([
            "--json",
            "modulify",
            "call",
            "create_site",
            "--data",
            data,
            "--key",
            "site-1",
        ]))
    };

    let invalid = create(r#"{"name":""}"#);
    assert_eq!(invalid.code, 1, "{invalid:?}");
    let report = invalid.json();
    assert_eq!(report["status"], 422);
    assert_eq!(report["error"]["kind"], "unprocessable");
    assert_eq!(report["body"]["error"]["code"], "validation_failed");
    assert_eq!(attempts(&report), 1, "{report}");
    // The 422 released the key: the fixed body runs under it.
    let fixed = create(r#"{"name":"Apollo"}"#);
    assert_eq!(fixed.code, 0, "{fixed:?}");
    assert_eq!(fixed.json()["outcome"], "ok");
    assert_eq!(contract.ledger().modulify_executions("site-1"), 1);

    // The SDK and this tool refuse a body that is not an object before sending, so a 400
    // invalid_request comes from a server that disagrees.
    contract.server.inject(
        Fault::respond(400)
            .body(r#"{"data":null,"error":{"code":"invalid_request","message":"the body is not a JSON object"}}"#)
            .on("POST", SEND_MESSAGE),
    );
    let refused = send_message(&contract, "bad-request-1");
    assert_eq!(refused.code, 1, "{refused:?}");
    let report = refused.json();
    assert_eq!(report["status"], 400);
    assert_eq!(report["error"]["kind"], "unprocessable");
    assert_eq!(attempts(&report), 1, "{report}");
}

#[test]
fn a_401_is_unauthorized_exit_1_after_one_attempt() {
    let contract = Contract::start();
    // An unknown token: the catalogue read is refused.
    let unknown = run(contract
        .modulify()
        .env("MODULIFY_TOKEN", "mfy_unknown_token_77")
        .args([
            "--json",
            "modulify",
            "call",
            "send_message",
            "--data",
            MESSAGE,
        ]));
    assert_eq!(unknown.code, 1, "{unknown:?}");
    let report = unknown.json();
    assert_eq!(report["status"], 401);
    assert_eq!(report["error"]["kind"], "unauthorized");
    assert_eq!(attempts(&report), 1, "{report}");
    assert!(
        !unknown.all().contains("mfy_unknown_token_77"),
        "{unknown:?}"
    );

    // A token refused on the call itself.
    contract
        .server
        .inject(Fault::expired_token().on("POST", SEND_MESSAGE).times(5));
    let refused = send_message(&contract, "auth-1");
    assert_eq!(refused.code, 1, "{refused:?}");
    let report = refused.json();
    assert_eq!(report["status"], 401);
    assert_eq!(report["error"]["kind"], "unauthorized");
    assert_eq!(attempts(&report), 1, "{report}");
    let ledger = contract.ledger();
    assert_eq!(ledger.requests_with_key("auth-1").len(), 1);
    assert_eq!(ledger.modulify_executions("auth-1"), 0);
}

#[test]
fn a_429_or_5xx_past_the_budget_is_budget_exhausted_exit_3() {
    let contract = Contract::start();
    contract.server.inject(
        Fault::respond(429)
            .header("Retry-After", "30")
            .body(r#"{"data":null,"error":{"code":"rate_limited","message":"spent"}}"#)
            .on("POST", SEND_MESSAGE)
            .times(5),
    );
    let limited = send_message(&contract, "limited-1");
    assert_eq!(limited.code, 3, "{limited:?}");
    let report = limited.json();
    assert_eq!(report["status"], 429);
    assert_eq!(report["error"]["kind"], "budget_exhausted");
    assert_eq!(report["error"]["may_have_run"], false);
    // The 30 s wait would end past the 5 s budget: no second attempt.
    assert_eq!(attempts(&report), 1, "{report}");

    let contract = Contract::start();
    contract.server.inject(
        Fault::fail_execution(503)
            .on("POST", SEND_MESSAGE)
            .times(100),
    );
    let down = run(contract.modulify().args([
        "--json",
        "--max-attempts",
        "2",
        "modulify",
        "call",
        "send_message",
        "--data",
        MESSAGE,
        "--key",
        "down-1",
    ]));
    assert_eq!(down.code, 3, "{down:?}");
    let report = down.json();
    assert_eq!(report["status"], 503);
    assert_eq!(report["error"]["kind"], "budget_exhausted");
    assert_eq!(attempts(&report), 2, "{report}");
    let human = run(contract.modulify().args([
        "--max-attempts",
        "1",
        "modulify",
        "call",
        "send_message",
        "--data",
        MESSAGE,
        "--key",
        "down-1",
    ]));
    assert_eq!(human.code, 3, "{human:?}");
    assert!(
        human
            .stdout
            .contains("retry later with the same key down-1"),
        "{human:?}"
    );
    assert_eq!(contract.ledger().modulify_executions("down-1"), 0);
}

#[test]
fn the_token_never_reaches_stdout_or_stderr_even_when_the_server_echoes_it() {
    const TOKEN: &str = "mfy_SECRET_never_shown_4711";
    let contract = Contract::with(|builder| builder.modulify_token(ModulifyTokenSeed::new(TOKEN)));
    contract.server.inject(
        Fault::respond(500)
            .header("x-request-id", &format!("req_{TOKEN}"))
            .body(&format!(
                r#"{{"data":null,"error":{{"code":"internal_error","message":"bad token Bearer {TOKEN}"}}}}"#
            ))
            .on("POST", SEND_MESSAGE)
            .times(100),
    );
    let token_file = TempFile::new("token", format!("{TOKEN}\n").as_bytes());
    for json in [true, false] {
        for from_file in [true, false] {
            let mut command = contract.modulify();
            command
                .env("RUST_LOG", "trace")
                .env_remove("MODULIFY_TOKEN");
            if json {
                command.arg("--json");
            }
            command.args(["--max-attempts", "2", "modulify"]);
            if from_file {
                command.args(["--token-file", &token_file.arg()]);
            } else {
                command.env("MODULIFY_TOKEN", TOKEN);
            }
            command.args(["call", "send_message", "--data", MESSAGE]);
            let ran = run(&mut command);
            assert_eq!(ran.code, 3, "{ran:?}");
            assert!(
                !ran.all().contains(TOKEN),
                "json {json}, file {from_file}: {ran:?}"
            );
            assert!(
                !ran.all().contains("SECRET_never_shown"),
                "json {json}, file {from_file}: {ran:?}"
            );
            assert!(ran.all().contains("<redacted>"), "{ran:?}");
        }
    }
    let ledger = contract.ledger();
    assert_eq!(ledger.requests_to("POST", SEND_MESSAGE).len(), 8);
}

#[test]
fn tools_prints_the_catalogue_with_each_method_s_effect() {
    let contract = Contract::start();
    let ran = run(contract.modulify().args(["--json", "modulify", "tools"]));
    assert_eq!(ran.code, 0, "{ran:?}");
    let catalogue = ran.json();
    assert_eq!(fields(&catalogue), ["tools"]);
    let tools = catalogue["tools"].as_array().unwrap();
    let effect = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {catalogue}"))["effect"]
            .clone()
    };
    for tool in tools {
        assert_eq!(fields(tool), ["effect", "name"], "{tool}");
    }
    assert_eq!(effect("get_site"), "read");
    assert_eq!(effect("list_sites"), "read");
    assert_eq!(effect("rename_site"), "idempotent");
    assert_eq!(effect("set_job_enabled"), "idempotent");
    for adds in [
        "create_site",
        "duplicate_site",
        "send_message",
        "send_site_email",
        "create_backup",
    ] {
        assert_eq!(effect(adds), "adds", "{adds}");
    }
    assert_eq!(effect("delete_site"), "destructive");

    let human = run(contract.modulify().args(["modulify", "tools"]));
    assert_eq!(human.code, 0, "{human:?}");
    let line = human
        .stdout
        .lines()
        .find(|line| line.starts_with("send_message "))
        .unwrap_or_else(|| panic!("{human:?}"));
    assert!(line.contains(" adds "), "{line}");
    assert_eq!(contract.ledger().requests_to("GET", "/v1/tools").len(), 2);
}

#[test]
fn a_method_the_catalogue_lacks_is_refused_exit_2_without_being_sent() {
    let contract = Contract::start();
    let ran = run(contract.modulify().args([
        "--json",
        "modulify",
        "call",
        "send_mesage",
        "--key",
        "typo-1",
    ]));
    assert_eq!(ran.code, 2, "{ran:?}");
    let report = ran.json();
    assert_eq!(report["error"]["kind"], "invalid_input");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("send_mesage"),
        "{report}"
    );
    let ledger = contract.ledger();
    assert!(ledger.requests_to("POST", "/v1/").is_empty(), "{ledger:?}");
}

#[test]
fn the_token_is_never_accepted_as_a_flag_value() {
    let contract = Contract::start();
    for args in [
        &["modulify", "--token", "mfy_typed_on_the_line_1", "tools"][..],
        &[
            "--json",
            "modulify",
            "--token",
            "mfy_typed_on_the_line_1",
            "tools",
        ],
        &["--token", "mfy_typed_on_the_line_1", "modulify", "tools"],
    ] {
        let ran = run(contract.modulify().args(args));
        assert_eq!(ran.code, 2, "{args:?}: {ran:?}");
        assert!(ran.stderr.contains("--token"), "{args:?}: {ran:?}");
        assert!(
            !ran.all().contains("mfy_typed_on_the_line_1"),
            "{args:?}: {ran:?}"
        );
        if args[0] == "--json" {
            assert_eq!(ran.json()["error"]["kind"], "invalid_input");
        }
    }
    assert!(contract.ledger().requests().is_empty());
}

#[test]
fn the_base_url_is_modulify_s_own_never_hodoflow_s() {
    let contract = Contract::start();
    // HODOFLOW_BASE_URL is this server, MODULIFY_BASE_URL unset: no Modulify URL.
    let ran = run(contract
        .modulify()
        .env_remove("MODULIFY_BASE_URL")
        .env("HODOFLOW_BASE_URL", contract.base_url())
        .args(["modulify", "tools"]));
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.all().contains("MODULIFY_BASE_URL"), "{ran:?}");
    assert!(contract.ledger().requests().is_empty());

    // --base-url on either side of `modulify`, over a wrong MODULIFY_BASE_URL.
    for args in [
        &["--base-url", "BASE", "modulify", "tools"][..],
        &["modulify", "--base-url", "BASE", "tools"],
    ] {
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("BASE", &contract.base_url()))
            .collect();
        let ran = run(contract
            .modulify()
            .env("MODULIFY_BASE_URL", "http://127.0.0.1:9")
            .args(&args));
        assert_eq!(ran.code, 0, "{args:?}: {ran:?}");
    }
    assert_eq!(contract.ledger().requests_to("GET", "/v1/tools").len(), 2);
}
