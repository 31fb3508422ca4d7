//! `hodoflow-send` against a token endpoint whose tokens expire at once, and the figures its
//! messages state: the contract server says `"expires_in": 0` (`Fault::stated_expires_in`) or
//! really expires its tokens at once (`Limits::token_ttl` of zero), and its ledger counts the
//! token requests. A real process is timed by nothing here: counts and order only.

mod support;

use std::time::Duration;

use hodoflow_mock::{Fault, Limits};
use support::{Contract, TOKEN, TRIGGER, TempFile, WEBHOOKS, run};

/// A contract server whose every token answer says `"expires_in": 0`; the tokens themselves
/// live an hour.
fn stating_zero() -> Contract {
    let contract = Contract::start();
    contract.server.inject(
        Fault::stated_expires_in(serde_json::json!(0))
            .on("POST", TOKEN)
            .times(u32::MAX),
    );
    contract
}

/// How many token requests the server received.
fn token_requests(contract: &Contract) -> Vec<hodoflow_mock::RequestRecord> {
    let ledger = contract.ledger();
    ledger
        .requests_to("POST", TOKEN)
        .into_iter()
        .cloned()
        .collect()
}

/// Once 115 token requests in 5 s and no delivery: now the token of the one exchange is sent.
#[test]
fn one_webhook_with_a_5s_budget_sends_the_token_of_its_one_exchange() {
    let contract = stating_zero();
    let ran = run(contract.send().env("HODOFLOW_MAX_ELAPSED", "5s").args([
        "--json",
        "webhook",
        TRIGGER,
        "--event-id",
        "at-once-1",
        "--data",
        "{}",
    ]));
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(ran.json()["outcome"], "accepted");
    assert_eq!(token_requests(&contract).len(), 1, "one exchange, no storm");
    assert_eq!(contract.ledger().total_runs(), 1);
}

/// Once 1,139 token requests in 50 s and no delivery for `--max-elapsed 10s`: now a few a
/// second, and every event delivered.
#[test]
fn a_batch_of_50_events_makes_a_few_token_requests_a_second() {
    let contract = stating_zero();
    let lines: String = (0..50)
        .map(|n| format!("{{\"event_id\":\"storm-{n}\",\"body\":{{\"n\":{n}}}}}\n"))
        .collect();
    let events = TempFile::new("storm.ndjson", lines.as_bytes());
    let ran = run(contract.send().env("HODOFLOW_MAX_ELAPSED", "10s").args([
        "batch",
        TRIGGER,
        "--events",
        &events.arg(),
    ]));
    let arrivals = token_requests(&contract);
    let busiest = contract.ledger().busiest_second("POST", TOKEN);
    println!(
        "{} token requests, at most {busiest} in a second",
        arrivals.len()
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let results = ran.json_lines();
    assert_eq!(results.len(), 50);
    assert!(results.iter().all(|line| line["outcome"] == "accepted"));
    // The shared backoff after each (250 ms doubling to 5 s, drawn in its upper half) lets at
    // most four start in any second.
    assert!(busiest <= 4, "{busiest} token requests in one second");
    assert!(arrivals.len() <= 12, "{} token requests", arrivals.len());
    assert_eq!(contract.ledger().total_runs(), 50);
}

/// Tokens that really expire at once: the server refuses the first one as expired, and the
/// call ends at once saying why, without a second exchange.
#[test]
fn tokens_that_really_expire_at_once_end_the_call_at_once_saying_why() {
    let contract = Contract::with(|builder| {
        builder.limits(Limits {
            token_ttl: Duration::ZERO,
            ..support::limits()
        })
    });
    let ran = run(contract.send().args([
        "--json",
        "webhook",
        TRIGGER,
        "--event-id",
        "expired-1",
        "--data",
        "{}",
    ]));
    assert_eq!(ran.code, 1, "waiting cannot heal it: {ran:?}");
    let report = ran.json();
    assert_eq!(report["error"]["kind"], "configuration");
    let message = report["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "token_exchange: token exchange failed: the token endpoint issued tokens that \
             expire at once (the last one lived "
        ),
        "{message}"
    );
    assert!(
        message.contains("under the 1s a token must live"),
        "{message}"
    );
    assert_eq!(token_requests(&contract).len(), 1);
    assert_eq!(contract.ledger().requests_to("POST", WEBHOOKS).len(), 1);
    assert_eq!(contract.ledger().total_runs(), 0);
}

/// Once a 5 s budget that ran out reported "within the 15s the call allowed": the message now
/// states the time the call had, and the attempt timeout as what bounds an exchange.
#[test]
fn a_budget_that_runs_out_waiting_for_a_token_states_its_own_figures() {
    let contract = Contract::start();
    contract.server.inject(
        Fault::delay_then_handle(Duration::from_secs(60))
            .on("POST", TOKEN)
            .times(u32::MAX),
    );
    for (budget, says) in [("5s", "within the "), ("1ms", "no time left")] {
        let ran = run(contract
            .send()
            .env("HODOFLOW_MAX_ELAPSED", budget)
            .env("HODOFLOW_ATTEMPT_TIMEOUT", "15s")
            .args([
                "--json",
                "webhook",
                TRIGGER,
                "--event-id",
                "slow-1",
                "--data",
                "{}",
            ]));
        assert_eq!(ran.code, 3, "{budget}: {ran:?}");
        let report = ran.json();
        let message = report["error"]["message"].as_str().unwrap();
        // A budget of 1 ms leaves an attempt a quarter of it: the call may still wait those
        // microseconds for the token, and says so with its figure.
        let short = budget == "1ms" && message.contains("µs the call had left");
        assert!(message.contains(says) || short, "{budget}: {message}");
        assert!(!message.contains("the call allowed"), "{budget}: {message}");
        if budget == "5s" {
            let figure = message
                .split_once("within the ")
                .and_then(|(_, rest)| rest.split_once("s the call had left"))
                .map(|(figure, _)| figure.parse::<f64>().expect("seconds"))
                .unwrap_or_else(|| panic!("{message}"));
            assert!(figure <= 5.0, "the time left of 5 s: {message}");
            assert!(
                message.ends_with("(an exchange may take up to 15s, the attempt timeout)"),
                "{message}"
            );
        }
    }
    assert!(contract.ledger().requests_to("POST", WEBHOOKS).is_empty());
}

/// Once `--max-elapsed 169h` was refused "over the maximum of 168h (7 days)": each flag names
/// its own maximum, and nothing is sent.
#[test]
fn a_duration_over_its_maximum_names_the_maximum_of_its_flag() {
    let contract = Contract::start();
    for (flag, value, maximum) in [
        ("--max-elapsed", "25h", "24h"),
        ("--max-elapsed", "168h", "24h"),
        ("--max-elapsed", "169h", "24h"),
        ("--attempt-timeout", "200h", "24h"),
        ("--store-timeout", "169h", "24h"),
    ] {
        let ran = run(contract
            .send()
            .args(["--json", flag, value, "webhook", TRIGGER, "--data", "{}"]));
        assert_eq!(ran.code, 2, "{flag} {value}: {ran:?}");
        let message = ran.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(
            message.ends_with(&format!("'{value}' is over the maximum of {maximum}")),
            "{flag} {value}: {message}"
        );
    }
    let events = TempFile::new("max.ndjson", b"{\"event_id\":\"e-1\",\"body\":{}}\n");
    let dir = support::TempDir::new("max");
    let ran = run(contract.send().args([
        "--json",
        "batch",
        TRIGGER,
        "--events",
        &events.arg(),
        "--outbox",
        &dir.file("o.db"),
        "--lease",
        "169h",
    ]));
    assert_eq!(ran.code, 2, "{ran:?}");
    let message = ran.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.ends_with("'169h' is over the maximum of 168h (7 days)"),
        "{message}"
    );
    assert!(contract.ledger().requests().is_empty(), "nothing sent");
}
