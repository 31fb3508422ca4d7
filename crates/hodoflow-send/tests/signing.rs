//! `--signing-secret-file` (and `HODOFLOW_SIGNING_SECRET_FILE`) on `webhook`, `rehearse`,
//! `batch` and `outbox worker`: every request to a signed trigger verifies on the contract
//! server, one run per event, and a bad file exits 2 before anything is sent, never showing a
//! secret. The outbox never holds one: its worker signs at send time.

mod support;

use hodoflow_mock::{Fault, SignatureVerdict, TriggerSeed};
use hodoflow_retry::webhook::SigningSecret;
use support::{Contract, EVENT, Ran, TRIGGER, TempFile, WEBHOOKS, derived, run};

const OLD: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const NEW: &str = "whsec_bmV4dC1zZWNyZXQtZm9yLXRoZS1yb3RhdGlvbi0wMQ==";
const WRONG: &str = "whsec_d3Jvbmctc2VjcmV0LXRoZS10cmlnZ2VyLW5ldmVyLWhhZA==";

/// A contract server whose demo trigger demands signatures with `secret`.
fn signed(secret: &str) -> Contract {
    Contract::with(|builder| builder.trigger(TriggerSeed::demo().signing_secret(secret)))
}

/// Every signature verdict the server gave, in order.
fn verdicts(contract: &Contract) -> Vec<SignatureVerdict> {
    let ledger = contract.ledger();
    ledger
        .signed_deliveries()
        .iter()
        .map(|r| r.verdict)
        .collect()
}

/// Asserts no output of `ran` shows a secret or a part of one.
#[track_caller]
fn assert_no_secret(ran: &Ran) {
    let all = ran.all();
    for secret in [OLD, NEW, WRONG] {
        assert!(!all.contains(&secret[6..20]), "{secret} shown: {all}");
    }
}

/// NDJSON of `count` events `<prefix>-<n>`.
fn events(prefix: &str, count: usize) -> String {
    (0..count)
        .map(|n| format!("{{\"event_id\":\"{prefix}-{n}\",\"body\":{{\"order\":{n}}}}}\n"))
        .collect()
}

#[test]
fn webhook_and_rehearse_sign_every_attempt_and_the_trigger_accepts_each() {
    let contract = signed(OLD);
    let secrets = TempFile::new("secrets", format!("{OLD}\n").as_bytes());
    contract
        .server
        .inject(Fault::fail_execution(503).on("POST", WEBHOOKS));

    let webhook = run(contract.send().args([
        "--json",
        "webhook",
        TRIGGER,
        "--event-id",
        "order-1",
        "--data",
        EVENT,
        "--signing-secret-file",
        &secrets.arg(),
    ]));
    let rehearse = run(contract
        .send()
        .env("HODOFLOW_SIGNING_SECRET_FILE", secrets.arg())
        .args([
            "rehearse",
            TRIGGER,
            "--event-id",
            "order-2",
            "--data",
            EVENT,
        ]));

    assert_eq!(webhook.code, 0, "{webhook:?}");
    assert_eq!(webhook.json()["attempts"].as_array().unwrap().len(), 2);
    assert_eq!(rehearse.code, 0, "{rehearse:?}");
    assert_eq!(verdicts(&contract), [SignatureVerdict::Accepted; 4]);
    let ledger = contract.ledger();
    for event in ["order-1", "order-2"] {
        assert_eq!(ledger.runs_for_delivery(&derived(event)).len(), 1);
    }
    assert_eq!(ledger.duplicates_for_delivery(&derived("order-2")), 1);
    assert_no_secret(&webhook);
    assert_no_secret(&rehearse);
}

#[test]
fn a_wrong_secret_exits_1_after_one_attempt_naming_its_fingerprint_only() {
    let contract = signed(OLD);
    let secrets = TempFile::new("wrong", WRONG.as_bytes());

    let ran = run(contract.send().args([
        "webhook",
        TRIGGER,
        "--delivery-id",
        "evt-wrong",
        "--data",
        EVENT,
        "--signing-secret-file",
        &secrets.arg(),
    ]));

    assert_eq!(ran.code, 1, "permanent: {ran:?}");
    let fingerprint = SigningSecret::new(WRONG).unwrap().fingerprint();
    assert!(ran.all().contains(&fingerprint), "{ran:?}");
    assert_eq!(contract.ledger().requests_with_key("evt-wrong").len(), 1);
    assert_eq!(verdicts(&contract), [SignatureVerdict::NoMatch]);
    assert_no_secret(&ran);
}

#[test]
fn a_bad_signing_secret_file_exits_2_before_anything_is_sent_on_every_command() {
    let contract = signed(OLD);
    let events = TempFile::new("events.ndjson", events("bad", 2).as_bytes());
    let outbox = TempFile::new("outbox.db", b"");
    let bad_files = [
        ("", "holds no secret"),
        ("\n\n", "holds no secret"),
        ("C2FVsBQIhrscChlQIMV+b5sSYspob7oD\n", "starts with whsec_"),
        ("whsec_c2hvcnQtc2VjcmV0\n", "fewer than 24"),
        (
            "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD\nwhsec_d3Jvbmc!!!\n",
            "line 2",
        ),
    ];
    for (contents, says) in bad_files {
        let file = TempFile::new("bad-secrets", contents.as_bytes());
        let path = file.arg();
        let commands: [Vec<&str>; 4] = [
            vec!["webhook", TRIGGER, "--delivery-id", "e-1", "--data", EVENT],
            vec!["rehearse", TRIGGER, "--delivery-id", "e-2", "--data", EVENT],
            vec!["batch", TRIGGER, "--events", &events.0.to_str().unwrap()],
            vec![
                "outbox",
                "--outbox",
                outbox.0.to_str().unwrap(),
                "worker",
                "--until-idle",
            ],
        ];
        for command in commands {
            let ran = run(contract
                .send()
                .args(&command)
                .args(["--signing-secret-file", &path]));
            assert_eq!(ran.code, 2, "{command:?} {contents:?}: {ran:?}");
            assert!(ran.all().contains(says), "{command:?}: {ran:?}");
            assert!(!ran.all().contains(&path), "the path is not shown");
            assert_no_secret(&ran);
        }
    }
    let missing = run(contract
        .send()
        .env(
            "HODOFLOW_SIGNING_SECRET_FILE",
            "/nonexistent/whsec_typed_here",
        )
        .args(["webhook", TRIGGER, "--delivery-id", "e-3", "--data", EVENT]));
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(!missing.all().contains("whsec_typed_here"), "{missing:?}");

    let ledger = contract.ledger();
    assert!(ledger.requests().is_empty(), "{:?}", ledger.requests());
    assert!(ledger.exchanges().is_empty(), "no token was even asked for");
}

#[test]
fn a_batch_signed_with_a_rotation_file_runs_each_event_once_and_every_request_verifies() {
    // The trigger already holds only the new secret; the sender still holds both.
    let contract = signed(NEW);
    let secrets = TempFile::new("rotation", format!("{OLD}\n{NEW}\n").as_bytes());
    let events = TempFile::new("events.ndjson", events("rot", 12).as_bytes());
    contract
        .server
        .inject(Fault::execute_then_close().on("POST", WEBHOOKS).times(2));
    contract
        .server
        .inject(Fault::fail_execution(503).on("POST", WEBHOOKS).times(1));

    let ran = run(contract.send().args([
        "--json",
        "batch",
        TRIGGER,
        "--events",
        &events.arg(),
        "--signing-secret-file",
        &secrets.arg(),
    ]));

    assert_eq!(ran.code, 0, "{ran:?}");
    let ledger = contract.ledger();
    let records = ledger.signed_deliveries();
    assert_eq!(records.len(), 12 + 3, "twelve events, three retries");
    assert!(
        records
            .iter()
            .all(|r| r.verdict == SignatureVerdict::Accepted)
    );
    for n in 0..12 {
        let id = derived(&format!("rot-{n}"));
        assert_eq!(ledger.runs_for_delivery(&id).len(), 1, "rot-{n}");
    }
    assert_no_secret(&ran);
}

#[test]
fn the_outbox_stores_no_secret_and_its_worker_signs_at_send_time() {
    let contract = signed(OLD);
    let secrets = TempFile::new("secrets", OLD.as_bytes());
    let outbox = TempFile::new("outbox.db", b"");
    std::fs::remove_file(&outbox.0).unwrap();
    let db = outbox.arg();
    let first = TempFile::new("first.ndjson", events("box", 3).as_bytes());
    let late = TempFile::new("late.ndjson", events("late", 1).as_bytes());

    // Stored and delivered by the batch's own workers, signed.
    let stored = run(contract.send().args([
        "batch",
        TRIGGER,
        "--events",
        &first.arg(),
        "--outbox",
        &db,
        "--signing-secret-file",
        &secrets.arg(),
    ]));
    // Stored without a secret: refused, and failed for good.
    let unsigned =
        run(contract
            .send()
            .args(["batch", TRIGGER, "--events", &late.arg(), "--outbox", &db]));
    let requeued = run(contract
        .send()
        .args(["outbox", "--outbox", &db, "retry", "late-0"]));
    let worker = run(contract.send().args([
        "outbox",
        "--outbox",
        &db,
        "worker",
        "--until-idle",
        "--trigger-token",
        TRIGGER,
        "--signing-secret-file",
        &secrets.arg(),
    ]));

    assert_eq!(stored.code, 0, "{stored:?}");
    assert_eq!(unsigned.code, 1, "{unsigned:?}");
    assert_eq!(requeued.code, 0, "{requeued:?}");
    assert_eq!(worker.code, 0, "{worker:?}");
    let mut expected = vec![SignatureVerdict::Accepted; 3];
    expected.push(SignatureVerdict::MissingHeader);
    expected.push(SignatureVerdict::Accepted);
    assert_eq!(verdicts(&contract), expected);
    let ledger = contract.ledger();
    for event in ["box-0", "box-1", "box-2", "late-0"] {
        assert_eq!(
            ledger.runs_for_delivery(&derived(event)).len(),
            1,
            "{event}"
        );
    }
    let stored_bytes = std::fs::read(&outbox.0).unwrap();
    let stored_text = String::from_utf8_lossy(&stored_bytes);
    assert!(
        !stored_text.contains(&OLD[6..20]),
        "the outbox holds the secret"
    );
    for ran in [&stored, &unsigned, &requeued, &worker] {
        assert_no_secret(ran);
    }
}
