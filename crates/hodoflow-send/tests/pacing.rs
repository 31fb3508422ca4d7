//! `batch` with and without `--outbox` paces by one rule (`--trigger-limit`, else the server's
//! `RateLimit-Policy`, else Hodoflow's documented 100 per 60 s) and says so on standard error
//! when it holds sends for more than a second, terminal or not. Child processes against the
//! contract server over real TCP; what was sent, and when, read from its ledger: pacing is
//! shown by the server's arrival times, never by how long a run took.

mod support;

use std::time::Duration;

use hodoflow_mock::{Fault, Limits, RequestRecord};

use support::{Contract, Ran, TRIGGER, TempFile, WEBHOOKS, run};

/// A server whose triggers admit `limit` per `window`, stating it in RateLimit fields or not.
fn contract(limit: u32, window: Duration, fields: bool) -> Contract {
    Contract::with(|builder| {
        builder.limits(Limits {
            webhook_rate_limit: limit,
            webhook_rate_window: window,
            webhook_rate_limit_fields: fields,
            ..support::limits()
        })
    })
}

/// NDJSON of `count` events `<prefix>-<n>`.
fn events(prefix: &str, count: usize) -> TempFile {
    let text: String = (0..count)
        .map(|n| format!("{{\"event_id\":\"{prefix}-{n}\",\"body\":{{\"n\":{n}}}}}\n"))
        .collect();
    TempFile::new(&format!("{prefix}.ndjson"), text.as_bytes())
}

/// The two ways to send a batch: straight, and through an outbox (a fresh SQLite file).
#[derive(Debug, Clone, Copy)]
enum Mode {
    Straight,
    Outbox,
}

const MODES: [Mode; 2] = [Mode::Straight, Mode::Outbox];

/// `batch TRIGGER --events FILE [--outbox DB] extra…`; its 60 s timeout is a hang guard.
fn batch(contract: &Contract, mode: Mode, file: &TempFile, extra: &[&str]) -> Ran {
    let outbox = TempFile::new("pacing.db", b"");
    std::fs::remove_file(&outbox.0).unwrap();
    let file = file.arg();
    let mut args = vec!["batch", TRIGGER, "--events", &file];
    let db = outbox.arg();
    if let Mode::Outbox = mode {
        args.extend(["--outbox", &db]);
    }
    args.extend(extra);
    run(contract.send().args(&args).timeout(Duration::from_secs(60)))
}

/// The deliveries of the last `count` the server saw, in arrival order.
fn last_deliveries(contract: &Contract, count: usize) -> Vec<RequestRecord> {
    let all: Vec<RequestRecord> = contract
        .ledger()
        .requests_to("POST", WEBHOOKS)
        .into_iter()
        .cloned()
        .collect();
    all[all.len().saturating_sub(count)..].to_vec()
}

/// The most arrivals in any span of `window`, sliding.
fn most_in_any(requests: &[RequestRecord], window: Duration) -> usize {
    (0..requests.len())
        .map(|first| {
            requests[first..]
                .iter()
                .take_while(|later| later.arrived.duration_since(requests[first].arrived) < window)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// The lines of standard error that start with `lead`.
fn lines_starting<'a>(ran: &'a Ran, lead: &str) -> Vec<&'a str> {
    ran.stderr
        .lines()
        .filter(|line| line.starts_with(lead))
        .collect()
}

#[test]
fn a_server_that_states_1000_a_minute_gets_300_events_without_a_stall_with_and_without_the_outbox()
{
    for mode in MODES {
        let contract = contract(1000, Duration::from_secs(60), true);
        let file = events(&format!("fast-{mode:?}"), 300);
        let ran = batch(&contract, mode, &file, &[]);

        assert_eq!(ran.code, 0, "{mode:?}: {ran:?}");
        let sent = last_deliveries(&contract, 300);
        assert!(sent.iter().all(|r| r.status == Some(202)), "{mode:?}");
        let most = most_in_any(&sent, Duration::from_secs(60));
        assert!(
            most > 100,
            "{mode:?}: paced at the stated 1000 a minute, not the documented 100: at most {most} \
             arrived in a minute"
        );
        assert!(
            lines_starting(&ran, "paced:").is_empty(),
            "{mode:?}: {ran:?}"
        );
        assert_eq!(contract.ledger().total_runs(), 300);
    }
}

#[test]
fn a_server_that_states_100_per_2_s_paces_both_batches_alike_and_says_so_once() {
    let window = Duration::from_secs(2);
    for mode in MODES {
        // A server per mode: the other run's last window would still count at the server.
        let contract = contract(100, window, true);
        let file = events(&format!("paced-{mode:?}"), 250);
        let ran = batch(&contract, mode, &file, &[]);

        assert_eq!(ran.code, 0, "{mode:?}: {ran:?}");
        let sent = last_deliveries(&contract, 250);
        let refused = sent.iter().filter(|r| r.status != Some(202)).count();
        assert_eq!(refused, 0, "{mode:?}: no 429");
        assert!(most_in_any(&sent, window) <= 100, "{mode:?}");
        // Three windows: the 201st arrived two whole windows after the first.
        let spread = sent[200].arrived.duration_since(sent[0].arrived);
        assert!(
            spread >= 2 * window,
            "{mode:?}: the 201st arrived {spread:?} after the first, within two windows"
        );
        let said = lines_starting(&ran, "paced:");
        assert_eq!(said.len(), 1, "{mode:?}: once: {}", ran.stderr);
        assert!(
            said[0].starts_with(
                "paced: 100 per 2 s per trigger (the server's RateLimit-Policy; \
                 --trigger-limit to change); "
            ) && said[0].ends_with(" events waiting"),
            "{mode:?}: {}",
            said[0]
        );
    }
}

#[test]
fn a_server_that_states_nothing_is_paced_at_the_documented_default_with_and_without_the_outbox() {
    for mode in MODES {
        // It admits a million a minute but does not say so: the documented 100 applies. A
        // server per mode: each run spends the minute's window.
        let contract = contract(1_000_000, Duration::from_secs(60), false);
        let file = events(&format!("silent-{mode:?}"), 101);
        let ran = batch(
            &contract,
            mode,
            &file,
            &["--max-elapsed", "2s", "--queue", "2s"],
        );

        assert_eq!(ran.code, 3, "{mode:?}: the 101st is left to retry: {ran:?}");
        let sent = contract.ledger().requests_to("POST", WEBHOOKS).len();
        assert_eq!(sent, 100, "{mode:?}: 100 in the first minute");
        let said = lines_starting(&ran, "paced:");
        assert_eq!(said.len(), 1, "{mode:?}: {}", ran.stderr);
        assert!(
            said[0].starts_with(
                "paced: 100 per 60 s per trigger (Hodoflow's documented default; \
                 --trigger-limit to change); "
            ),
            "{mode:?}: {}",
            said[0]
        );
    }
}

#[test]
fn the_flag_wins_over_the_server_s_figures_with_and_without_the_outbox() {
    let window = Duration::from_secs(1);
    let contract = contract(1000, Duration::from_secs(60), true);
    for mode in MODES {
        let file = events(&format!("flag-{mode:?}"), 12);
        let ran = batch(&contract, mode, &file, &["--trigger-limit", "5/1s"]);

        assert_eq!(ran.code, 0, "{mode:?}: {ran:?}");
        let sent = last_deliveries(&contract, 12);
        assert!(most_in_any(&sent, window) <= 5, "{mode:?}");
        // Three windows: the 11th arrived two whole windows after the first.
        let spread = sent[10].arrived.duration_since(sent[0].arrived);
        assert!(
            spread >= 2 * window,
            "{mode:?}: the 11th arrived {spread:?} after the first, within two windows"
        );
        let said = lines_starting(&ran, "paced:");
        assert_eq!(said.len(), 1, "{mode:?}: {}", ran.stderr);
        assert!(
            said[0].starts_with(
                "paced: 5 per 1 s per trigger (set by --trigger-limit; change it there, or turn \
                 it off); "
            ),
            "{mode:?}: {}",
            said[0]
        );
    }
}

#[test]
fn a_pause_the_server_asked_for_is_said_once_with_the_time_left() {
    let contract = contract(1000, Duration::from_secs(60), true);
    contract.server.inject(
        Fault::respond(429)
            .header("Retry-After", "3")
            .body(r#"{"error":"Rate limit exceeded"}"#)
            .on("POST", WEBHOOKS)
            .times(1),
    );
    let file = events("paused", 30);
    let ran = batch(&contract, Mode::Straight, &file, &[]);

    assert_eq!(ran.code, 0, "{ran:?}");
    // The refused event is sent again only once the 3 s the server asked for have passed since
    // it arrived.
    let ledger = contract.ledger();
    let sent = ledger.requests_to("POST", WEBHOOKS);
    let refused = sent
        .iter()
        .find(|r| r.status == Some(429))
        .expect("the refusal");
    let again = sent
        .iter()
        .find(|r| r.seq > refused.seq && r.idempotency_key == refused.idempotency_key)
        .expect("the refused event sent again");
    let paused = again.arrived.duration_since(refused.arrived);
    assert!(
        paused >= Duration::from_secs(3),
        "the refused event was sent again {paused:?} after its 429, before the 3 s asked for"
    );
    let said = lines_starting(&ran, "held:");
    assert_eq!(said.len(), 1, "{}", ran.stderr);
    assert!(
        said[0].starts_with("held: the server closed this trigger, ")
            && said[0].contains(" left (its Retry-After or RateLimit field; no flag changes it); ")
            && said[0].ends_with(" events waiting"),
        "{}",
        said[0]
    );
    assert_eq!(sent.len(), 31, "the refused one, then each once");
}

#[test]
fn on_a_terminal_the_progress_bar_shows_the_pacing_too() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: no `script` to run the batch on a pseudo-terminal");
        return;
    }
    let contract = contract(100, Duration::from_secs(2), true);
    let file = events("terminal", 150);
    let line = format!(
        "stty cols 200 2>/dev/null; {} batch {TRIGGER} --events {} >/dev/null",
        env!("CARGO_BIN_EXE_hodoflow-send"),
        file.arg()
    );
    let output = std::process::Command::new("script")
        .args(["-qefc", &line, "/dev/null"])
        .env_clear()
        .env("HODOFLOW_BASE_URL", contract.base_url())
        .env("HODOFLOW_MAX_ELAPSED", "5s")
        .env("HODOFLOW_ATTEMPT_TIMEOUT", "2s")
        .env("HODOFLOW_CLIENT_ID", hodoflow_mock::DEMO_CLIENT_ID)
        .env("HODOFLOW_CLIENT_SECRET", hodoflow_mock::DEMO_CLIENT_SECRET)
        .env("TERM", "xterm")
        .output()
        .expect("script runs");
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{shown}");
    let said = "paced: 100 per 2 s per trigger (the server's RateLimit-Policy";
    assert!(
        shown.matches(said).count() >= 2,
        "the line once, and the bar: {shown:?}"
    );
}
