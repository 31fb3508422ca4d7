//! One rule for every operation's identity: without `--delivery-id`, `--key` or `--event-id`,
//! `webhook`, `rehearse` and `write` generate a random ID once, send it on every attempt, and
//! print it with the command that sends the operation again under it. Each test runs the built
//! binary against the contract server, then the printed command through `/bin/sh`, and reads
//! the server's ledger.

mod support;

use hodoflow_mock::Fault;
use support::{
    Contract, EVENT, PROJECTS, TRIGGER, TempFile, WEBHOOKS, is_uuid, resend_command, run,
};

#[test]
fn webhook_without_an_id_sends_one_generated_id_on_every_attempt_and_its_resend_is_a_duplicate() {
    let contract = Contract::start();
    // The first attempt commits, then its answer is lost: only the same ID on the retry keeps
    // the run single.
    contract
        .server
        .inject(Fault::execute_then_close().on("POST", WEBHOOKS));
    let trigger_url = contract.trigger_url(TRIGGER);

    let ran = run(contract.send().env_remove("HODOFLOW_BASE_URL").args([
        "--json",
        "webhook",
        &trigger_url,
        "--data",
        EVENT,
    ]));

    assert_eq!(ran.code, 0, "{ran:?}");
    let report = ran.json();
    let key = report["key"].as_str().unwrap().to_owned();
    assert!(is_uuid(&key), "{key}");
    assert_eq!(report["outcome"], "duplicate");
    assert_eq!(report["attempts"].as_array().unwrap().len(), 2);
    let ledger = contract.ledger();
    let sent = ledger.requests_to("POST", WEBHOOKS);
    assert_eq!(sent.len(), 2);
    assert!(
        sent.iter()
            .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())),
        "{sent:?}"
    );
    assert_eq!(sent[0].status, None);
    assert_eq!(ledger.runs_for_delivery(&key).len(), 1);
    assert_eq!(ledger.total_runs(), 1);

    // Announced with the command to resend: this binary, the arguments as given, the ID added,
    // the trigger token shown as <redacted>.
    assert!(
        ran.stderr.contains(&format!(
            "no --delivery-id or --event-id: generated the delivery ID {key}, the same on every attempt"
        )),
        "{ran:?}"
    );
    assert!(!ran.all().contains(TRIGGER), "{ran:?}");
    let resend = resend_command(&ran);
    assert!(
        resend.ends_with(&format!("--delivery-id {key}")),
        "{resend}"
    );
    assert!(resend.contains("/api/v1/webhooks/<redacted>"), "{resend}");
    // The body is not shown: FILE stands for it, to hold the same bytes.
    assert!(resend.contains(" --data @FILE "), "{resend}");
    assert!(!ran.all().contains(EVENT), "{ran:?}");
    let body = TempFile::new("event.json", EVENT.as_bytes());
    let again = run(contract
        .shell(
            &resend
                .replace("<redacted>", TRIGGER)
                .replace("@FILE", &format!("@{}", body.arg())),
        )
        .env_remove("HODOFLOW_BASE_URL"));

    assert_eq!(again.code, 0, "{again:?}");
    let report = again.json();
    assert_eq!(report["outcome"], "duplicate");
    assert_eq!(report["key"], key.as_str());
    assert!(
        !again.stderr.contains("generated"),
        "nothing generated: {again:?}"
    );
    let ledger = contract.ledger();
    assert_eq!(ledger.requests_with_key(&key).len(), 3);
    assert_eq!(ledger.requests_to("POST", WEBHOOKS).len(), 3);
    assert_eq!(ledger.runs_for_delivery(&key).len(), 1);
    assert_eq!(ledger.duplicates_for_delivery(&key), 2);
    assert_eq!(ledger.total_runs(), 1);
}

#[test]
fn rehearse_without_an_id_uses_one_generated_id_for_both_deliveries_and_every_retry() {
    let contract = Contract::start();
    contract
        .server
        .inject(Fault::respond(503).on("POST", WEBHOOKS));

    // Without --json: the summary names the key, the announcement is on stderr all the same.
    let ran = run(contract.send().args(["rehearse", TRIGGER, "--data", EVENT]));

    assert_eq!(ran.code, 0, "{ran:?}");
    let ledger = contract.ledger();
    let sent = ledger.requests_to("POST", WEBHOOKS);
    let statuses: Vec<Option<u16>> = sent.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [Some(503), Some(202), Some(202)]);
    let key = sent[0].idempotency_key.clone().unwrap();
    assert!(is_uuid(&key), "{key}");
    assert!(
        sent.iter()
            .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())),
        "{sent:?}"
    );
    assert_eq!(ledger.runs_for_delivery(&key).len(), 1);
    assert_eq!(ledger.duplicates_for_delivery(&key), 1);
    assert!(
        ran.stdout
            .starts_with("duplicate: the resend was recognised")
            && ran.stdout.contains(&format!("key {key})")),
        "{ran:?}"
    );
    assert!(
        ran.stderr.contains("first delivery: attempt 1: 503"),
        "{ran:?}"
    );

    let resend = resend_command(&ran);
    assert!(
        resend.ends_with(&format!("--delivery-id {key}")),
        "{resend}"
    );
    assert!(
        resend.contains(" rehearse '<redacted>' --data @FILE "),
        "{resend}"
    );
    // The same bytes on standard input, as the announcement offers.
    let resend = resend.replace("<redacted>", TRIGGER).replace("@FILE", "@-");
    let again = run(contract.shell(&resend).write_stdin(EVENT));
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.starts_with("duplicate: "), "{again:?}");
    let ledger = contract.ledger();
    assert_eq!(ledger.requests_with_key(&key).len(), 5);
    assert_eq!(ledger.runs_for_delivery(&key).len(), 1);
    assert_eq!(ledger.total_runs(), 1);
}

#[test]
fn each_run_without_an_id_is_a_new_delivery_and_an_id_given_is_announced_nowhere() {
    let contract = Contract::start();
    let deliver = |extra: &[&str]| {
        run(contract
            .send()
            .args(["--json", "webhook", TRIGGER, "--data", EVENT])
            .args(extra))
    };

    let keys: Vec<String> = (0..2)
        .map(|_| {
            let ran = deliver(&[]);
            assert_eq!(ran.json()["outcome"], "accepted", "{ran:?}");
            ran.json()["key"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_ne!(keys[0], keys[1]);
    assert_eq!(contract.ledger().total_runs(), 2);

    for given in [
        &["--delivery-id", "evt-given"][..],
        &["--event-id", "order-1:given"],
    ] {
        let ran = deliver(given);
        assert_eq!(ran.code, 0, "{ran:?}");
        assert!(!ran.stderr.contains("generated"), "{given:?}: {ran:?}");
    }

    // Refused before sending: no ID is announced that was never sent.
    let refused = run(contract.send().args([
        "webhook",
        TRIGGER,
        "--data",
        "@/nonexistent/hodoflow/event.json",
    ]));
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(!refused.all().contains("generated"), "{refused:?}");
    assert_eq!(contract.ledger().requests_to("POST", WEBHOOKS).len(), 4);
}

#[test]
fn write_without_a_key_follows_the_same_rule_and_its_retry_is_replayed() {
    let contract = Contract::start();
    contract
        .server
        .inject(Fault::execute_then_close().on("POST", PROJECTS));
    let body = r#"{"data":{"type":"projects","attributes":{"name":"Gemini"}}}"#;

    let ran = run(contract
        .send()
        .args(["--json", "write", "POST", PROJECTS, "--data", body]));

    assert_eq!(ran.code, 0, "{ran:?}");
    let report = ran.json();
    let key = report["key"].as_str().unwrap().to_owned();
    assert!(is_uuid(&key), "{key}");
    assert_eq!(report["outcome"], "replayed");
    assert!(
        ran.stderr.contains(&format!(
            "no --key or --event-id: generated the Idempotency-Key {key}, the same on every attempt"
        )),
        "{ran:?}"
    );
    let resend = resend_command(&ran);
    assert!(resend.ends_with(&format!("--key {key}")), "{resend}");
    assert!(!ran.stderr.contains("Gemini"), "{ran:?}");
    let file = TempFile::new("project.json", body.as_bytes());

    let again = run(&mut contract.shell(&resend.replace("@FILE", &format!("@{}", file.arg()))));
    assert_eq!(again.code, 0, "{again:?}");
    let report = again.json();
    assert_eq!(report["outcome"], "replayed");
    assert_eq!(report["status"], 201);
    assert_eq!(report["body"]["data"]["attributes"]["name"], "Gemini");
    let ledger = contract.ledger();
    assert_eq!(ledger.requests_with_key(&key).len(), 3);
    assert_eq!(ledger.writes_executed(&key), 1);
    assert_eq!(ledger.total_writes_executed(), 1);
    assert_eq!(
        ledger
            .requests_to("POST", PROJECTS)
            .iter()
            .filter(|r| r.idempotency_key.as_deref() != Some(key.as_str()))
            .count(),
        0
    );
}

#[test]
fn help_says_an_id_is_generated_and_printed() {
    let contract = Contract::start();
    for (command, option) in [
        ("webhook", "--delivery-id"),
        ("rehearse", "--delivery-id"),
        ("write", "--key"),
    ] {
        let ran = run(contract.bare().args([command, "--help"]));
        assert_eq!(ran.code, 0, "{ran:?}");
        let help: String = ran.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(help.contains(option), "{help}");
        for says in [
            "is generated, sent on every attempt and printed",
            "as `key` with --json",
        ] {
            assert!(help.contains(says), "{command}: {says}: {help}");
        }
    }
}
