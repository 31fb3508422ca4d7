//! `batch` in an outage: through a blip every event is delivered, once; once the service has been
//! down longer than one call's budget no further event starts, and the batch ends within its
//! budget, every event to retry, nothing run. Proven from the server's ledger.

mod support;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use hodoflow_mock::Fault;
use serde_json::Value;
use support::{Contract, Ran, TRIGGER, TempFile, WEBHOOKS, derived, run};

const UNAVAILABLE: &str = r#"{"error":"Processing temporarily unavailable"}"#;

/// NDJSON of `count` events `<prefix>-<n>`.
fn events(prefix: &str, count: usize) -> TempFile {
    let text: String = (0..count)
        .map(|n| format!("{{\"event_id\":\"{prefix}-{n}\",\"body\":{{\"order\":{n}}}}}\n"))
        .collect();
    TempFile::new(&format!("{prefix}.ndjson"), text.as_bytes())
}

/// A contract server answering every delivery 503 without `Retry-After`.
fn down() -> Contract {
    let contract = Contract::start();
    contract.server.inject(
        Fault::respond(503)
            .body(UNAVAILABLE)
            .on("POST", WEBHOOKS)
            .times(u32::MAX),
    );
    contract
}

/// Runs `batch` of `file` at `concurrency` with a call budget of `max_elapsed`; its 120 s
/// timeout is a hang guard.
fn batch(
    contract: &Contract,
    file: &TempFile,
    concurrency: usize,
    max_elapsed: &str,
    more: &[&str],
) -> Ran {
    let (file, concurrency) = (file.arg(), concurrency.to_string());
    let mut args = vec![
        "--max-elapsed",
        max_elapsed,
        "--attempt-timeout",
        "500ms",
        "batch",
        TRIGGER,
        "--events",
        &file,
        "--concurrency",
        &concurrency,
    ];
    args.extend_from_slice(more);
    run(contract
        .send()
        .args(&args)
        .timeout(Duration::from_secs(120)))
}

/// How long the batch took by its own account: the `… attempts in <ms> ms` of its summary on
/// standard error, from the start of its sending to its summary (starting the process, reading
/// the file and building the client aside).
fn reported(ran: &Ran) -> Duration {
    let millis = ran
        .stderr
        .lines()
        .filter(|line| line.starts_with("batch: "))
        .find_map(|line| line.split(" attempts in ").nth(1))
        .and_then(|rest| rest.strip_suffix(" ms"))
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no summary with the time taken: {}", ran.stderr));
    Duration::from_millis(millis)
}

/// The batch of `events` in a sustained outage, with a call budget of `budget` seconds: exit 3,
/// every event listed to retry (nothing may have run), the requests each line reports being the
/// server's, none run; the events not started say why, with one summary line. Ordered and
/// counted, not timed: the batch takes events in file order, and once it holds one back (the
/// service down longer than a call's budget) it starts none after it, since the outage only
/// grows; each event sends at most `--max-attempts` requests. That each call ends within its
/// budget, and so the batch within about two, is proven in paused time by the library's tests.
fn stops_starting_events(concurrency: usize, events_count: usize, budget: u64) {
    #[allow(non_snake_case, reason = "read as the constant it was")]
    let EVENTS = events_count;
    let contract = down();
    let file = events(&format!("down-c{concurrency}-{budget}s"), EVENTS);

    let ran = batch(&contract, &file, concurrency, &format!("{budget}s"), &[]);

    assert_eq!(ran.code, 3, "{}", ran.stderr);
    let lines = ran.json_lines();
    assert_eq!(lines.len(), EVENTS, "one line per event");
    let mut ids = HashSet::new();
    let mut attempts = 0;
    let mut not_started = 0;
    // Events the batch held back itself, of those: the others waited for the trigger's window
    // and were refused there, when the outage passed their budget.
    let mut held_back = 0;
    // The file positions of the events that sent a request, and of those held back.
    let (mut sent_at, mut held_at) = (Vec::new(), Vec::new());
    let prefix = format!("down-c{concurrency}-{budget}s-");
    for line in &lines {
        let id = line["event_id"].as_str().unwrap();
        assert!(ids.insert(id.to_owned()));
        let position: usize = id.strip_prefix(&prefix).unwrap().parse().unwrap();
        assert_eq!(line["outcome"], "error", "{line}");
        assert_eq!(line["error"]["kind"], "budget_exhausted", "{line}");
        assert_eq!(line["error"]["may_have_run"], false, "{line}");
        let sent = line["attempts"].as_u64().unwrap() as usize;
        assert!(sent <= MAX_ATTEMPTS, "{line}");
        attempts += sent;
        if sent > 0 {
            sent_at.push(position);
        }
        let message = line["error"]["message"].as_str().unwrap();
        if message.contains("not started") {
            not_started += 1;
            if !message.contains("while it queued") {
                held_back += 1;
                held_at.push(position);
            }
            assert_eq!(line["attempts"], 0, "{line}");
            assert!(
                message.starts_with(
                    "retry_budget_exhausted: not started: the service has been down for "
                ) && message.contains(&format!(" s, longer than one call's budget ({budget}.0 s)")),
                "{message}"
            );
        }
    }
    let started = EVENTS - not_started;
    let first_held = held_at.iter().min().copied();
    let last_sent = sent_at.iter().max().copied();
    assert!(
        first_held.is_some() && last_sent < first_held,
        "an event sent after the batch held one back (last sent {last_sent:?}, first held back {first_held:?}): {}",
        ran.stderr
    );
    assert!(
        held_back == 0
            || ran.stderr.contains(&format!(
                "s, longer than one call's budget ({budget}.0 s): {held_back} event(s) not \
                 started, listed to retry"
            )),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains(&format!(
            "batch: {EVENTS} events, 0 accepted, 0 duplicate, 0 failed for good, {EVENTS} to retry"
        )),
        "{}",
        ran.stderr
    );
    let ledger = contract.ledger();
    let requests = ledger.requests_to("POST", WEBHOOKS).len();
    assert_eq!(ledger.total_runs(), 0, "nothing ran");
    assert_eq!(
        attempts, requests,
        "the lines' attempts are the server's requests"
    );
    eprintln!(
        "concurrency {concurrency}: {started} events started, {requests} requests, \
         {not_started} not started, {:?} by the batch's account",
        reported(&ran)
    );
}

/// The tool's default `--max-attempts`, every request of a call (`--paced-retries` is 0).
const MAX_ATTEMPTS: usize = 5;

// Every event that starts is bounded by its budget, the outage is measured from its first
// refused answer, and a retry whose call the outage has outlived is refused at once rather than
// coming back as the next probe: so a batch stops starting events one budget into the outage,
// whatever its concurrency.

#[test]
fn a_sequential_batch_of_100_in_an_outage_stops_starting_events_and_lists_every_event_to_retry() {
    stops_starting_events(1, 100, 3);
}

#[test]
fn a_batch_of_300_at_concurrency_64_in_an_outage_stops_starting_events_all_to_retry() {
    stops_starting_events(64, 300, 3);
}

#[test]
fn a_batch_through_a_blip_of_1_5_s_delivers_every_event_once_at_the_default_budget() {
    const EVENTS: usize = 300;
    let contract = Contract::start();
    let file = events("blip-1500", EVENTS);
    contract.server.inject(
        Fault::respond(503)
            .body(UNAVAILABLE)
            .on("POST", WEBHOOKS)
            .during(Duration::from_millis(1_500)),
    );

    let ran = batch(&contract, &file, 64, "60s", &[]);

    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let lines = ran.json_lines();
    assert_eq!(lines.len(), EVENTS);
    let ledger = contract.ledger();
    assert_eq!(ledger.total_runs(), EVENTS, "every event ran, none twice");
    for line in &lines {
        let event_id = line["event_id"].as_str().unwrap();
        let runs = ledger.runs_for_delivery(&derived(event_id));
        assert_eq!(runs.len(), 1, "exactly one run for {event_id}");
        assert_eq!(line["outcome"], "accepted", "{line}");
        assert_eq!(line["workflow_run_id"], runs[0].as_str());
        assert_eq!(line["error"], Value::Null);
    }
    let refused = ledger
        .requests_to("POST", WEBHOOKS)
        .iter()
        .filter(|r| r.status == Some(503))
        .count();
    assert!(refused > 0, "the blip was met");
}

#[test]
fn a_batch_through_the_outbox_in_an_outage_reschedules_the_jobs_it_does_not_start() {
    const EVENTS: usize = 100;
    let contract = down();
    let file = events("down-outbox", EVENTS);
    let db = TempFile::new("down-outbox.db", b"");
    let db_arg = db.arg();
    let started = std::time::SystemTime::now();

    let ran = batch(
        &contract,
        &file,
        16,
        "2s",
        &["--outbox", &db_arg, "--trigger-limit", "off"],
    );

    assert_eq!(ran.code, 3, "{}", ran.stderr);
    let lines = ran.json_lines();
    assert_eq!(lines.len(), EVENTS);
    let mut states = HashMap::<String, usize>::new();
    let mut not_started = 0;
    for line in &lines {
        *states
            .entry(line["state"].as_str().unwrap().to_owned())
            .or_default() += 1;
        // Due again later, never before this run began.
        let next: &str = line["next_attempt_at"]
            .as_str()
            .expect("pending: a next time");
        let next = rfc3339_of(next);
        assert!(next >= started, "{line}");
        let message = line["error"]["message"].as_str().unwrap_or_default();
        if message.contains("not started: the service has been down for ") {
            not_started += 1;
            assert_eq!(line["attempts"], 0, "{line}");
            assert_eq!(line["error"]["kind"], "retry_budget_exhausted", "{line}");
        }
    }
    assert_eq!(states, HashMap::from([("pending".to_owned(), EVENTS)]));
    assert!(not_started > 0, "no job was held back: {}", ran.stderr);
    let ledger = contract.ledger();
    assert_eq!(ledger.total_runs(), 0);
    let requests = ledger.requests_to("POST", WEBHOOKS).len();
    let sent: u64 = lines.iter().map(|l| l["attempts"].as_u64().unwrap()).sum();
    assert_eq!(
        sent as usize, requests,
        "the jobs' attempts are the server's requests"
    );
    eprintln!("outbox: {requests} requests, {not_started} jobs not started");
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{db_arg}{suffix}"));
    }
}

/// An RFC 3339 UTC time (`2025-01-01T12:00:05Z`, fractions allowed) as a `SystemTime`.
fn rfc3339_of(text: &str) -> std::time::SystemTime {
    let (date, time) = text
        .trim_end_matches('Z')
        .split_once('T')
        .expect("RFC 3339");
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let (hms, _) = time.split_once('.').unwrap_or((time, ""));
    let t: Vec<u64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe - 719_468) as u64;
    std::time::UNIX_EPOCH + Duration::from_secs(days * 86_400 + t[0] * 3_600 + t[1] * 60 + t[2])
}
