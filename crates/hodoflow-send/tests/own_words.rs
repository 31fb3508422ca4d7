//! An access token that is one of this tool's own words (`accepted`, `workflow run`,
//! `permanent` …) changes no other word of the output, text or JSON: the contract server issues
//! it (`Fault::issued_token`) and accepts it like any token, and the tool redacts a secret only
//! in the values it did not write, never in its own sentences. A value that cannot be shown as
//! it is (a run ID with escape bytes) is shown escaped.

mod support;

use hodoflow_mock::Fault;
use support::{Contract, Ran, TOKEN, TRIGGER, WEBHOOKS, run};

/// A contract server whose token endpoint issues `token` on every exchange.
fn issuing(token: &str) -> Contract {
    let contract = Contract::start();
    contract
        .server
        .inject(Fault::issued_token(token).on("POST", TOKEN).times(u32::MAX));
    contract
}

/// `hodoflow-send` (with `--json` when `json`) delivering `{}` to `trigger` as `event`.
fn deliver(contract: &Contract, json: bool, trigger: &str, event: &str) -> Ran {
    let mut command = contract.send();
    command.env("HODOFLOW_MAX_ATTEMPTS", "1");
    if json {
        command.arg("--json");
    }
    run(command.args(["webhook", trigger, "--event-id", event, "--data", "{}"]))
}

/// Asserts that nothing in `ran` was redacted: the token appears in no value here.
#[track_caller]
fn nothing_redacted(token: &str, ran: &Ran) {
    assert!(!ran.all().contains("<redacted>"), "{token:?}: {ran:?}");
}

#[test]
fn a_token_that_is_a_word_of_the_tool_leaves_every_other_word_intact() {
    for token in [
        "permanent",
        "workflow run",
        "retry later",
        "accepted",
        "duplicate",
    ] {
        let contract = issuing(token);

        // accepted, then duplicate: text.
        let first = deliver(&contract, false, TRIGGER, "words-1");
        assert_eq!(first.code, 0, "{token:?}: {first:?}");
        assert!(
            first.stdout.starts_with("accepted: workflow run "),
            "{token:?}: {first:?}"
        );
        let again = deliver(&contract, false, TRIGGER, "words-1");
        assert!(
            again
                .stdout
                .starts_with("duplicate: already accepted earlier, no new run ("),
            "{token:?}: {again:?}"
        );
        // And JSON: the outcome and the run ID as the server gave it.
        let json = deliver(&contract, true, TRIGGER, "words-2");
        let report = json.json();
        assert_eq!(report["outcome"], "accepted", "{token:?}");
        let ledger = contract.ledger();
        let runs = ledger.runs_for_delivery(report["key"].as_str().unwrap());
        assert_eq!(report["workflow_run_id"], runs[0].as_str(), "{token:?}");

        // permanent: a trigger the server does not know.
        let unknown = deliver(&contract, false, "trg_unknown_0000", "words-3");
        assert_eq!(unknown.code, 1, "{token:?}: {unknown:?}");
        assert!(
            unknown
                .stdout
                .contains("[not_found]\npermanent: do not retry unchanged ("),
            "{token:?}: {unknown:?}"
        );
        let unknown_json = deliver(&contract, true, "trg_unknown_0000", "words-3");
        assert_eq!(unknown_json.json()["error"]["kind"], "not_found");

        // retry later: the trigger is unavailable, one attempt allowed.
        contract
            .server
            .inject(Fault::webhook_unavailable(7).on("POST", WEBHOOKS).times(2));
        let later = deliver(&contract, false, TRIGGER, "words-4");
        assert_eq!(later.code, 3, "{token:?}: {later:?}");
        assert!(
            later.stdout.contains("\nretry later with the same key "),
            "{token:?}: {later:?}"
        );
        let later_json = deliver(&contract, true, TRIGGER, "words-5");
        assert_eq!(later_json.json()["error"]["kind"], "budget_exhausted");
        assert_eq!(later_json.json()["outcome"], "error");

        for ran in [
            &first,
            &again,
            &json,
            &unknown,
            &unknown_json,
            &later,
            &later_json,
        ] {
            nothing_redacted(token, ran);
        }
        // The token the server issued was sent and taken: two runs, one per new event.
        assert_eq!(contract.ledger().total_runs(), 2, "{token:?}");
    }
}

#[test]
fn a_batch_summary_and_its_lines_keep_their_words_whatever_the_token() {
    for token in ["accepted", "duplicate", "failed for good", "to retry"] {
        let contract = issuing(token);
        let events = support::TempFile::new(
            "words.ndjson",
            b"{\"event_id\":\"w-1\",\"body\":{}}\n{\"event_id\":\"w-2\",\"body\":{}}\n",
        );
        let ran = run(contract
            .send()
            .args(["batch", TRIGGER, "--events", &events.arg()]));
        assert_eq!(ran.code, 0, "{token:?}: {ran:?}");
        for line in ran.json_lines() {
            assert_eq!(line["outcome"], "accepted", "{token:?}: {line}");
        }
        assert!(
            ran.stderr.contains(
                "batch: 2 events, 2 accepted, 0 duplicate, 0 failed for good, 0 to retry; "
            ),
            "{token:?}: {ran:?}"
        );
        nothing_redacted(token, &ran);
    }
}

/// A token the server echoes is still redacted where it is a value: the body of an error.
#[test]
fn a_token_that_is_a_word_is_redacted_where_a_server_echoes_it() {
    let contract = issuing("accepted-token");
    contract.server.inject(
        Fault::respond(422)
            .body(r#"{"error":"Processing failed","echo":"Bearer accepted-token"}"#)
            .on("POST", WEBHOOKS),
    );
    let ran = deliver(&contract, true, TRIGGER, "echo-1");
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(!ran.all().contains("accepted-token"), "{ran:?}");
}

/// Once a run ID with escape bytes was printed with the bytes removed, an ID that is not the
/// server's; the client now keeps it escaped where it enters (as every text of a server), so
/// text and `--json` show the same escaped ID.
#[test]
fn a_run_id_that_cannot_be_shown_as_it_is_is_shown_escaped() {
    let contract = Contract::start();
    let hostile = "\u{1b}[31mrun-1\u{7}";
    let body = serde_json::json!({"status": "accepted", "workflow_run_id": hostile}).to_string();
    contract.server.inject(
        Fault::respond(202)
            .body(&body)
            .on("POST", WEBHOOKS)
            .times(2),
    );
    let text = deliver(&contract, false, TRIGGER, "escape-1");
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout
            .starts_with("accepted: workflow run \\x1b[31mrun-1\\x07 ("),
        "{text:?}"
    );
    assert!(!text.all().contains('\u{1b}'), "{text:?}");
    let json = deliver(&contract, true, TRIGGER, "escape-2");
    assert_eq!(json.json()["workflow_run_id"], "\\x1b[31mrun-1\\x07");
    assert!(!json.stdout.contains('\u{1b}'), "{json:?}");
}
