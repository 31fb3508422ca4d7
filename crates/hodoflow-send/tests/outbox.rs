//! `batch --outbox` and `outbox worker|status|list|retry`, the CLI as child processes against
//! the contract server in this process, over real TCP, proven from the server's ledger.
//!
//! The PostgreSQL test runs when `OUTBOX_DATABASE_URL` names a database (as `.ci/run` does) and
//! the crate is built with the `postgres` feature (a default one); otherwise it prints why it skipped, and with
//! `CI_REQUIRES_POSTGRES=1` it fails instead.

mod support;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use hodoflow_mock::{DEMO_ORGANIZATION, Fault, TriggerSeed};
use serde_json::Value;

use support::{Contract, HangGuard, Ran, TRIGGER, TempDir, TempFile, WEBHOOKS, derived, run};

/// NDJSON of `count` events `<prefix>-<n>`.
fn events(prefix: &str, count: usize) -> String {
    (0..count)
        .map(|n| format!("{{\"event_id\":\"{prefix}-{n}\",\"body\":{{\"order\":{n}}}}}\n"))
        .collect()
}

/// `outbox --outbox <db> status --json`, as an object of counts (the paused scopes and the
/// services down aside).
fn status(contract: &Contract, outbox: &str) -> HashMap<String, u64> {
    let ran = run(contract
        .send()
        .args(["--json", "outbox", "--outbox", outbox, "status"]));
    assert_eq!(ran.code, 0, "{ran:?}");
    let value = ran.json();
    value
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| !["pauses", "outages"].contains(&name.as_str()))
        .map(|(state, count)| (state.clone(), count.as_u64().unwrap()))
        .collect()
}

/// The event IDs `outbox list --state <state> --json` prints.
fn listed(contract: &Contract, outbox: &str, state: &str) -> HashSet<String> {
    let ran = run(contract.send().args([
        "--json", "outbox", "--outbox", outbox, "list", "--state", state, "--limit", "100000",
    ]));
    assert_eq!(ran.code, 0, "{ran:?}");
    ran.json()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| {
            assert_eq!(job["state"], state);
            job["event_id"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// The event IDs standard error lists `to reconcile, <state>`.
fn to_reconcile(stderr: &str, state: &str) -> HashSet<String> {
    let lead = format!("to reconcile, {state} (");
    stderr
        .lines()
        .find_map(|line| line.strip_prefix(lead.as_str()))
        .map(|rest| {
            let (_, ids) = rest.split_once("): ").expect("a list after the reason");
            ids.split(", ").map(str::to_owned).collect()
        })
        .unwrap_or_default()
}

/// Waits for `child` to exit; past `limit`, a hang guard, kills it and fails the test.
fn wait(child: &mut Child, limit: Duration) -> i32 {
    let guard = HangGuard::new(limit);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().expect("an exit code, not a signal");
        }
        if guard.tripped() {
            let _ = child.kill();
        }
        guard.check("the child to exit (killed)");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The options of the crash test's runs: a 5 s call budget of up to 10 attempts (a call ends
/// retryable, and is rescheduled 5 s later, only after about six answers lost in a row), a 6 s
/// lease, no trigger limit (the server's is a million).
fn crash_batch_args<'a>(events: &'a str, outbox: &'a str) -> Vec<&'a str> {
    vec![
        "--max-elapsed",
        "5s",
        "--max-attempts",
        "10",
        "--attempt-timeout",
        "1s",
        "batch",
        TRIGGER,
        "--events",
        events,
        "--outbox",
        outbox,
        "--lease",
        "6s",
        "--trigger-limit",
        "off",
        "--concurrency",
        "16",
    ]
}

/// Runs the batch `args` until it exits other than 3 (some events rescheduled for later: run
/// the same command again once they are due), at most three times. No run may leave an event
/// in flight: a run waits for the leases of a dead worker's jobs and sends them itself.
fn run_until_settled(contract: &Contract, args: &[&str]) -> (Ran, usize) {
    let mut runs = 0;
    loop {
        runs += 1;
        let ran = run(contract.send().args(args).timeout(Duration::from_secs(120)));
        assert!(ran.stderr.contains(", in_flight 0,"), "{}", ran.stderr);
        if ran.code != 3 || runs == 3 {
            return (ran, runs);
        }
        std::thread::sleep(Duration::from_secs(7));
    }
}

/// A batch of 2,000 events with answers lost after commit, killed (SIGKILL) once the server has
/// started some hundreds of runs, then run again: exactly one run per event, every event
/// accepted or duplicate, the duplicates listed for reconciliation, no delivery ID outside the
/// batch.
#[test]
fn a_batch_killed_midway_resumes_with_exactly_one_run_per_event() {
    const EVENTS: usize = 2000;
    const KILL_AT: usize = 400;
    let started = Instant::now();
    let contract = Contract::start();
    contract.server.inject(
        Fault::execute_then_close()
            .on("POST", WEBHOOKS)
            .probability(0.1, 14),
    );
    let dir = TempDir::new("crash");
    let outbox = dir.file("outbox.db");
    let file = TempFile::new("crash.ndjson", events("order", EVENTS).as_bytes());
    let file_arg = file.arg();
    let args = crash_batch_args(&file_arg, &outbox);

    let mut first = contract
        .child()
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while contract.ledger().total_runs() < KILL_AT {
        assert!(
            first.try_wait().unwrap().is_none(),
            "the batch ended before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    first.kill().unwrap(); // SIGKILL on Unix.
    first.wait().unwrap();
    let runs_at_kill = contract.ledger().total_runs();
    let after_kill = status(&contract, &outbox);
    assert_eq!(
        after_kill["total"], EVENTS as u64,
        "every event was stored first"
    );
    let left = after_kill["pending"] + after_kill["in_flight"];
    assert!(left > 0, "the kill left work: {after_kill:?}");

    let (resumed, reruns) = run_until_settled(&contract, &args);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed.stderr.contains(&format!(
            "batch: {EVENTS} events in the outbox: 0 stored now, {EVENTS} already there"
        )),
        "{}",
        resumed.stderr
    );

    // The server's ledger: one run per event, and nothing sent under any other ID.
    let ledger = contract.ledger();
    let ids: HashSet<String> = (0..EVENTS)
        .map(|n| derived(&format!("order-{n}")))
        .collect();
    for n in 0..EVENTS {
        let id = derived(&format!("order-{n}"));
        assert_eq!(ledger.runs_for_delivery(&id).len(), 1, "order-{n}");
    }
    assert_eq!(ledger.total_runs(), EVENTS);
    let requests = ledger.requests_to("POST", WEBHOOKS);
    for request in &requests {
        let key = request.idempotency_key.as_deref().expect("a delivery ID");
        assert!(ids.contains(key), "a delivery ID outside the batch: {key}");
    }
    let lost = requests.iter().filter(|r| r.status.is_none()).count();
    assert!(lost > 50, "{lost} answers lost");

    // Every event accepted or duplicate, and the duplicates listed for reconciliation.
    let lines = resumed.json_lines();
    assert_eq!(lines.len(), EVENTS);
    let mut duplicates = HashSet::new();
    for (n, line) in lines.iter().enumerate() {
        let event_id = format!("order-{n}");
        assert_eq!(line["event_id"], event_id.as_str(), "file order");
        assert_eq!(line["delivery_id"], derived(&event_id).as_str());
        match line["state"].as_str().unwrap() {
            "accepted" => assert_eq!(
                line["workflow_run_id"],
                ledger.runs_for_delivery(&derived(&event_id))[0].as_str()
            ),
            "duplicate" => {
                duplicates.insert(event_id);
            }
            other => panic!("{event_id} ended {other}: {line}"),
        }
    }
    let counts = status(&contract, &outbox);
    assert_eq!(
        counts["accepted"] + counts["duplicate"],
        EVENTS as u64,
        "{counts:?}"
    );
    assert_eq!(counts["duplicate"], duplicates.len() as u64);
    assert!(!duplicates.is_empty());
    assert_eq!(listed(&contract, &outbox, "duplicate"), duplicates);
    assert_eq!(to_reconcile(&resumed.stderr, "duplicate"), duplicates);

    // Once more: nothing stored, nothing sent.
    let sent = ledger.requests().len();
    let again = run(contract.send().args(&args));
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stderr.contains("0 stored now"), "{}", again.stderr);
    assert_eq!(contract.ledger().requests().len(), sent);
    assert_eq!(again.json_lines().len(), EVENTS);
    println!(
        "crash test: killed at {runs_at_kill} runs with {left} jobs left ({} in flight); \
         resumed in {reruns} run(s); {} requests, {lost} answers lost, {} duplicates; {} runs \
         for {EVENTS} events; {:.1} s",
        after_kill["in_flight"],
        requests.len(),
        duplicates.len(),
        contract.ledger().total_runs(),
        started.elapsed().as_secs_f64()
    );
}

/// A trigger token the server does not know yet: its deliveries fail 404 until it is added.
const LATE_TRIGGER: &str = "trg_late_SECRET_5e1f";

#[test]
fn status_list_and_retry_show_jobs_without_a_token_and_requeue_a_failed_one() {
    let contract = Contract::start();
    let dir = TempDir::new("ops");
    let outbox = dir.file("outbox.db");
    let good = TempFile::new("good.ndjson", events("good", 3).as_bytes());
    let late = TempFile::new("late.ndjson", events("late", 1).as_bytes());
    let mut printed = Vec::new();
    let mut keep = |ran: Ran| {
        printed.push(ran.all());
        ran
    };

    let delivered = keep(run(contract.send().args([
        "batch",
        TRIGGER,
        "--events",
        &good.arg(),
        "--outbox",
        &outbox,
        "--trigger-limit",
        "off",
    ])));
    assert_eq!(delivered.code, 0, "{delivered:?}");
    let failed = keep(run(contract.send().args([
        "batch",
        LATE_TRIGGER,
        "--events",
        &late.arg(),
        "--outbox",
        &outbox,
    ])));
    assert_eq!(failed.code, 1, "a failed job is permanent: {failed:?}");
    assert_eq!(failed.json_lines()[0]["state"], "failed");
    assert!(
        failed.stderr.contains("to reconcile, failed (1;"),
        "{}",
        failed.stderr
    );

    let counts = status(&contract, &outbox);
    assert_eq!(
        (counts["accepted"], counts["failed"], counts["total"]),
        (3, 1, 4)
    );
    let text = keep(run(contract
        .send()
        .args(["outbox", "--outbox", &outbox, "status"])));
    assert!(text.stdout.contains("accepted"), "{text:?}");

    let list = keep(run(contract.send().args([
        "--json", "outbox", "--outbox", &outbox, "list", "--state", "failed",
    ])));
    let jobs = list.json()["jobs"].as_array().unwrap().clone();
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job["event_id"], "late-0");
    assert_eq!(job["delivery_id"], derived("late-0").as_str());
    assert_eq!(
        (job["calls"].as_u64(), job["attempts"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(job["error"]["kind"], "not_found");
    assert_eq!(job["error"]["status"], 404);
    assert_eq!(job["next_attempt_at"], Value::Null);
    // The whole listing, as text: a header and one line per job, oldest first.
    let table = keep(run(contract
        .send()
        .env("HODOFLOW_OUTBOX", &outbox)
        .args(["outbox", "list"])));
    let rows: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(rows.len(), 5, "{table:?}");
    assert!(rows[0].starts_with("event_id\tstate"), "{}", rows[0]);
    assert_eq!(rows[4], "late-0\tfailed\t1\t1\t-\tnot_found 404\tno");
    assert_eq!(job["may_have_run"], false, "a 404 is a definite answer");

    // retry: none such, and a delivered job, are refused with exit 1.
    let none = keep(run(contract.send().args([
        "outbox",
        "--outbox",
        &outbox,
        "retry",
        "no-such-event",
    ])));
    assert_eq!(none.code, 1, "{none:?}");
    assert!(
        none.stdout.contains("no job with event ID no-such-event"),
        "{none:?}"
    );
    let accepted = keep(run(contract
        .send()
        .args(["outbox", "--outbox", &outbox, "retry", "good-0"])));
    assert_eq!(accepted.code, 1, "{accepted:?}");
    let requeued = keep(run(contract
        .send()
        .args(["--json", "outbox", "--outbox", &outbox, "retry", "late-0"])));
    assert_eq!(requeued.code, 0, "{requeued:?}");
    assert_eq!(requeued.json()["state"], "pending");
    assert_eq!(status(&contract, &outbox)["pending"], 1);

    // The trigger exists now: a worker delivers the requeued job, one clean JSON line.
    contract
        .server
        .put_trigger(TriggerSeed::new(LATE_TRIGGER, DEMO_ORGANIZATION));
    let worker = keep(run(contract.send().args([
        "--json",
        "outbox",
        "--outbox",
        &outbox,
        "worker",
        "--until-idle",
        "--trigger-token",
        LATE_TRIGGER,
    ])));
    assert_eq!(worker.code, 0, "{worker:?}");
    let line = worker.json();
    assert_eq!(line["event_id"], "late-0");
    assert_eq!(line["state"], "accepted");
    assert_eq!(line["calls"], 2);
    assert_eq!(
        line["workflow_run_id"],
        contract.ledger().runs_for_delivery(&derived("late-0"))[0].as_str()
    );
    assert!(
        !worker.stderr.contains('\r'),
        "no progress line off a terminal: {worker:?}"
    );
    assert!(
        worker.stderr.contains(": claimed 1: accepted 1,") && worker.stderr.contains("; idle"),
        "{}",
        worker.stderr
    );

    for text in &printed {
        for token in [TRIGGER, LATE_TRIGGER] {
            assert!(!text.contains(token), "a trigger token was printed: {text}");
        }
        assert!(!text.contains("\"order\""), "a body was printed: {text}");
    }
}

/// `outbox status` lists every paused scope with its end, time left and reason, and `outbox
/// list` says which job a call may have run: the pauses written through the SDK's store (as
/// workers write them), the job marked by a real call whose connection closed unanswered.
#[test]
fn status_lists_every_paused_scope_and_list_says_which_job_may_have_run() {
    use hodoflow_outbox::Outbox;
    use std::time::SystemTime;

    let contract = Contract::start();
    let dir = TempDir::new("scopes");
    let outbox = dir.file("outbox.db");
    let lost = TempFile::new("lost.ndjson", events("lost", 1).as_bytes());
    let good = TempFile::new("good.ndjson", events("good", 1).as_bytes());
    let batch = |file: &TempFile| {
        run(contract.send().args([
            "--max-attempts",
            "1",
            "batch",
            TRIGGER,
            "--events",
            &file.arg(),
            "--outbox",
            &outbox,
            "--trigger-limit",
            "off",
        ]))
    };
    assert_eq!(batch(&good).code, 0);
    // The request is sent and its connection closed before an answer: it may have run.
    contract
        .server
        .inject(Fault::close_before_execute().on("POST", WEBHOOKS).times(1));
    let ran = batch(&lost);
    assert_eq!(ran.code, 3, "pending, to be sent again: {ran:?}");
    assert_eq!(ran.json_lines()[0]["may_have_run"], true, "{ran:?}");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let now = SystemTime::now();
    let credential = "hodoflow http://127.0.0.1:8080";
    let trigger = "hodoflow http://127.0.0.1:8080 trigger 1a2b3c4d";
    runtime.block_on(async {
        let store = Outbox::sqlite(&outbox).await.unwrap();
        let store = store.store();
        let minutes = |n: u64| now + Duration::from_secs(60 * n);
        store
            .pause(trigger, minutes(10), "429 from the trigger\u{1b}[2J", now)
            .await
            .unwrap();
        store
            .pause(
                credential,
                minutes(2),
                "429 rate_limited from the JSON:API",
                now,
            )
            .await
            .unwrap();
        let ended = now - Duration::from_secs(5);
        store.pause("ended", ended, "over", ended).await.unwrap();
    });

    let json = run(contract
        .send()
        .args(["--json", "outbox", "--outbox", &outbox, "status"]));
    assert_eq!(json.code, 0, "{json:?}");
    let value = json.json();
    assert_eq!(
        (value["pending"].as_u64(), value["total"].as_u64()),
        (Some(1), Some(2))
    );
    let pauses = value["pauses"].as_array().unwrap();
    let scopes: Vec<&str> = pauses
        .iter()
        .map(|p| p["scope"].as_str().unwrap())
        .collect();
    assert_eq!(
        scopes,
        [credential, trigger],
        "every scope paused now, by name"
    );
    assert_eq!(pauses[0]["why"], "429 rate_limited from the JSON:API");
    assert_eq!(
        pauses[1]["why"], "429 from the trigger\u{1b}[2J",
        "JSON keeps it exact"
    );
    let left = pauses[1]["remaining_ms"].as_u64().unwrap();
    assert!(left > 0 && left <= 600_000, "{left}");
    let until = pauses[1]["until"].as_str().unwrap();
    assert!(until.ends_with('Z') && until.len() == 20, "{until}");

    let text = run(contract
        .send()
        .args(["outbox", "--outbox", &outbox, "status"]));
    assert_eq!(text.code, 0, "{text:?}");
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert!(
        lines.contains(&"paused scopes                2"),
        "{}",
        text.stdout
    );
    let trigger_line = lines
        .iter()
        .find(|line| line.starts_with(&format!("  {trigger}: until {until} (")))
        .unwrap_or_else(|| panic!("{}", text.stdout));
    assert!(
        trigger_line.ends_with(" left); 429 from the trigger\\x1b[2J")
            && !trigger_line.contains('\u{1b}'),
        "the terminal sees the escape written out, never the byte: {trigger_line:?}"
    );
    assert!(!text.stdout.contains('\u{1b}'), "{text:?}");
    assert!(!text.stdout.contains("ended"), "{}", text.stdout);

    let list = run(contract
        .send()
        .args(["--json", "outbox", "--outbox", &outbox, "list"]));
    let jobs = list.json()["jobs"].as_array().unwrap().clone();
    let marked: HashMap<&str, bool> = jobs
        .iter()
        .map(|job| {
            let id = job["event_id"].as_str().unwrap();
            (id, job["may_have_run"].as_bool().unwrap())
        })
        .collect();
    assert_eq!(marked, HashMap::from([("lost-0", true), ("good-0", false)]));
    let table = run(contract
        .send()
        .args(["outbox", "--outbox", &outbox, "list"]));
    let rows: Vec<&str> = table.stdout.lines().collect();
    assert!(
        rows[0].ends_with("\tlast_error\tmay_have_run"),
        "{}",
        rows[0]
    );
    let lost_row = rows.iter().find(|row| row.starts_with("lost-0\t")).unwrap();
    assert!(
        lost_row.starts_with("lost-0\tpending\t1\t1\t"),
        "{lost_row}"
    );
    assert!(lost_row.ends_with("\ttransport\tyes"), "{lost_row}");
    for ran in [&json, &text, &list, &table] {
        assert!(
            !ran.all().contains(TRIGGER),
            "a trigger token was printed: {ran:?}"
        );
    }
}

#[test]
fn a_worker_stops_on_sigterm_after_finishing_what_it_holds() {
    let contract = Contract::start();
    let dir = TempDir::new("term");
    let outbox = dir.file("outbox.db");
    let mut worker = contract
        .child()
        .args(["outbox", "--outbox", &outbox, "worker"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Running: it opened (and created) the outbox, and waits for work.
    let guard = HangGuard::new(Duration::from_secs(20));
    while !std::path::Path::new(&outbox).exists() {
        guard.check("the worker to open its outbox");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        worker.try_wait().unwrap().is_none(),
        "a worker without --until-idle keeps running"
    );
    let term = std::process::Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    assert_eq!(wait(&mut worker, Duration::from_secs(20)), 0);
    let output = worker.wait_with_output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("stopped by a signal"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn outbox_usage_errors_exit_2_and_send_nothing() {
    let contract = Contract::start();
    let dir = TempDir::new("usage");
    let outbox = dir.file("outbox.db");
    let file = TempFile::new("usage.ndjson", events("u", 2).as_bytes());
    for (args, says) in [
        (
            vec!["batch", TRIGGER, "--events", &file.arg(), "--lease", "30s"],
            "--lease needs --outbox",
        ),
        (
            vec![
                "batch",
                TRIGGER,
                "--events",
                &file.arg(),
                "--outbox",
                &outbox,
                "--lease",
                "2s",
            ],
            "does not outlast one call",
        ),
        (
            vec![
                "batch",
                TRIGGER,
                "--events",
                &file.arg(),
                "--outbox",
                "mysql://u:pw_SECRET@h/db",
            ],
            "--outbox takes a SQLite file path or a postgres:// URL",
        ),
        (vec!["outbox", "status"], "no outbox: pass --outbox"),
        (
            vec![
                "outbox",
                "--outbox",
                &outbox,
                "worker",
                "--trigger-limit",
                "100",
            ],
            "is not a limit",
        ),
        (
            vec!["outbox", "--outbox", &outbox, "list", "--state", "lost"],
            "is not a state",
        ),
    ] {
        let ran = run(contract.send().args(&args));
        assert_eq!(ran.code, 2, "{args:?}: {ran:?}");
        assert!(ran.all().contains(says), "{args:?}: {ran:?}");
        assert!(!ran.all().contains("pw_SECRET"), "{ran:?}");
    }
    assert_eq!(contract.ledger().requests_to("POST", WEBHOOKS).len(), 0);
    #[cfg(not(feature = "postgres"))]
    {
        let ran = run(contract.send().args([
            "outbox",
            "--outbox",
            "postgres://u:pw_SECRET@127.0.0.1:9/db",
            "status",
        ]));
        assert_eq!(ran.code, 2, "{ran:?}");
        assert!(ran.all().contains("without PostgreSQL outboxes"), "{ran:?}");
        assert!(!ran.all().contains("pw_SECRET"), "{ran:?}");
    }
}

/// Held by a test of many worker processes while they run: two such tests at once on a small
/// machine would each measure the other's load.
static PROCESSES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Four `outbox worker` processes on one PostgreSQL outbox share 1,000 jobs to one trigger
/// limited to 100 per (shortened) window of 500 ms, a window they share through the outbox: no
/// 429, every job sent under its one delivery ID and run exactly once, every job accepted, each
/// worker claiming some.
#[test]
fn four_workers_on_postgresql_share_1000_jobs_with_no_429() {
    let Some(url) = postgres_url() else {
        return;
    };
    let _alone = PROCESSES.lock().unwrap_or_else(|p| p.into_inner());
    #[cfg(feature = "postgres")]
    multi_worker::run(&url);
    #[cfg(not(feature = "postgres"))]
    let _ = url;
}

/// Twenty `outbox worker` processes on one PostgreSQL outbox, each sending about three events
/// a second, meet a 30 s outage of webhook ingestion (every delivery answered 503): over the
/// whole outage the server sees at most a tenth of the healthy rate (0.033 in our runs; 0.36
/// when each process probed alone, 0.05 to 0.15 when the fleet waited for one process's retry
/// budget to find the service down), at most a twentieth once the fleet holds it (from 3 s
/// into it), no more in the outage's first second than in a healthy one (25 in our runs against
/// 62-68; 101 when the fleet waited), and every event is delivered after it, exactly once.
#[test]
fn twenty_workers_on_postgresql_hold_an_outage_together_and_deliver_every_event_once() {
    let Some(url) = postgres_url() else {
        return;
    };
    let _alone = PROCESSES.lock().unwrap_or_else(|p| p.into_inner());
    #[cfg(feature = "postgres")]
    fleet_outage::run(&url);
    #[cfg(not(feature = "postgres"))]
    let _ = url;
}

/// `count` `outbox worker` processes on the PostgreSQL outbox `url`, named `worker-<n>`, each
/// with `args` after `outbox worker` and its standard error in `dir`.
#[cfg(feature = "postgres")]
fn pg_workers(
    contract: &Contract,
    url: &str,
    dir: &TempDir,
    count: usize,
    budget: &str,
    args: &[&str],
) -> Vec<(Child, PathBuf)> {
    (0..count)
        .map(|n| {
            let log = dir.0.join(format!("worker-{n}.log"));
            let child = contract
                .child()
                .env("HODOFLOW_OUTBOX", url)
                .env("HODOFLOW_TRIGGER_TOKEN", TRIGGER)
                .args(["--max-elapsed", budget, "outbox", "worker"])
                .args(args)
                .args(["--name", &format!("worker-{n}")])
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            (child, log)
        })
        .collect()
}

/// `outbox status` and the status page list every service the workers hold down, by name:
/// since when, how long, and the next probe (the outages written through the SDK's store, as
/// workers write them); a service found up again is gone. On SQLite, and on PostgreSQL when
/// `OUTBOX_DATABASE_URL` names one.
#[test]
fn status_and_the_page_list_every_service_the_fleet_holds_down() {
    let dir = TempDir::new("outages");
    services_down_are_listed(&dir.file("outbox.db"));
    let Some(url) = postgres_url() else {
        return;
    };
    #[cfg(feature = "postgres")]
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        services_down_are_listed(&runtime.block_on(multi_worker::fresh_schema(&url)));
    }
    #[cfg(not(feature = "postgres"))]
    let _ = url;
}

/// The outages of [`status_and_the_page_list_every_service_the_fleet_holds_down`] on the
/// outbox `outbox` (a file or a PostgreSQL URL).
fn services_down_are_listed(outbox: &str) {
    use hodoflow_outbox::Outbox;
    use std::time::SystemTime;
    use support::page::{get, serve};

    let contract = Contract::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = runtime.block_on(async {
        if outbox.contains("://") {
            #[cfg(feature = "postgres")]
            return Outbox::postgres(outbox).await.unwrap();
        }
        Outbox::sqlite(outbox).await.unwrap()
    });
    let store = store.store();
    let now = SystemTime::now();
    let webhook = "hodoflow http://127.0.0.1:8080 webhook";
    let hostile = "vendor <b>api</b>\u{1b}[2J";
    runtime.block_on(async {
        let found = now - Duration::from_secs(1);
        store
            .service_down(webhook, now - Duration::from_secs(125), found)
            .await
            .unwrap();
        store
            .take_probe(webhook, now + Duration::from_secs(30), found)
            .await
            .unwrap();
        store.service_down(hostile, found, found).await.unwrap();
        store.service_down("up again", found, found).await.unwrap();
        store.service_up("up again", now).await.unwrap();
    });

    let status = |json: bool| {
        let args: &[&str] = if json { &["--json"] } else { &[] };
        let ran = run(contract
            .send()
            .args(args)
            .args(["outbox", "--outbox", outbox, "status"]));
        assert_eq!(ran.code, 0, "{ran:?}");
        ran
    };
    let value = status(true).json();
    let outages = value["outages"].as_array().unwrap();
    let scopes: Vec<&str> = outages
        .iter()
        .map(|o| o["scope"].as_str().unwrap())
        .collect();
    assert_eq!(
        scopes,
        [webhook, hostile],
        "every service down now, by name"
    );
    let down = outages[0]["down_ms"].as_u64().unwrap();
    assert!((125_000..135_000).contains(&down), "{down}");
    let probe_in = outages[0]["probe_in_ms"].as_u64().unwrap();
    assert!(probe_in > 0 && probe_in <= 30_000, "{probe_in}");
    let since = outages[0]["since"].as_str().unwrap();
    assert!(since.ends_with('Z') && since.len() == 20, "{since}");
    assert_eq!(
        outages[1]["probe_in_ms"], 0,
        "its first probe may go at once"
    );

    let text = status(false);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert!(
        lines.contains(&"services down                2"),
        "{}",
        text.stdout
    );
    assert!(
        lines.iter().any(|line| line
            .starts_with(&format!("  {webhook}: down since {since} (for 2 min "))
            && line.contains("; next probe at ")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("  vendor <b>api</b>\\x1b[2J: down since "),
        "the terminal sees the escape written out, never the byte: {}",
        text.stdout
    );
    assert!(!text.stdout.contains('\u{1b}') && !text.stdout.contains("up again"));

    let (_page, base) = serve(contract.child(), outbox, &[]);
    let (code, _, body) = get(&base, "/");
    assert_eq!(code, 200, "{body}");
    assert_eq!(body.matches("<tr class=\"outage\">").count(), 2, "{body}");
    assert!(
        body.contains(&format!(
            "<td class=\"scope\">{webhook}</td><td class=\"since\">{since}</td>"
        )),
        "{body}"
    );
    assert!(
        body.contains("vendor &lt;b&gt;api&lt;/b&gt;") && !body.contains("<b>api"),
        "the page shows markup as text: {body}"
    );
    assert!(!body.contains("up again"), "{body}");

    runtime.block_on(async {
        for scope in [webhook, hostile] {
            store.service_up(scope, SystemTime::now()).await.unwrap();
        }
    });
    let value = status(true).json();
    assert_eq!(value["outages"], serde_json::json!([]), "{value}");
    assert!(
        status(false)
            .stdout
            .contains("services down                0")
    );
    let (_, _, body) = get(&base, "/");
    assert!(
        body.contains("<p id=\"no-outages\">") && !body.contains("class=\"outage\""),
        "{body}"
    );
}

/// The database of the PostgreSQL test, or `None` after saying why it skips.
fn postgres_url() -> Option<String> {
    let required = std::env::var("CI_REQUIRES_POSTGRES").as_deref() == Ok("1");
    if !cfg!(feature = "postgres") {
        assert!(
            !required,
            "CI_REQUIRES_POSTGRES=1 but hodoflow-send was built without its postgres feature"
        );
        println!("skipped: built without the postgres feature (cargo test --features postgres)");
        return None;
    }
    match std::env::var("OUTBOX_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                !required,
                "CI_REQUIRES_POSTGRES=1 but OUTBOX_DATABASE_URL is not set"
            );
            println!("skipped: set OUTBOX_DATABASE_URL to a PostgreSQL database, as .ci/run does");
            None
        }
    }
}

#[cfg(feature = "postgres")]
mod multi_worker {
    use super::*;

    use hodoflow_mock::Limits;
    use hodoflow_outbox::{Outbox, Target};

    /// Ten full windows of jobs: the four workers meet at the limit window after window.
    const JOBS: usize = 1_000;
    const WORKERS: usize = 4;
    const LIMIT: u32 = 100;
    /// The server's window, and the workers' shared one: shortened from 60 s so that 1,000
    /// jobs at 100 per window take at least 5 s rather than 10 minutes.
    const WINDOW: Duration = Duration::from_millis(500);

    pub(super) fn run(url: &str) {
        let started = Instant::now();
        let contract = Contract::with(|builder| {
            builder.limits(Limits {
                webhook_rate_limit: LIMIT,
                webhook_rate_window: WINDOW,
                ..support::limits()
            })
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let url = runtime.block_on(fresh_schema(url));
        runtime.block_on(enqueue(&url));
        let enqueued = started.elapsed();
        eprintln!("multi-worker test: {JOBS} jobs enqueued in {enqueued:?}");

        let dir = TempDir::new("pg");
        // A call's budget covers its wait for a slot of the shared window: 10 s, where 64 calls
        // in flight against 100 slots a window each get one within about a second, so no job's
        // wait ends its call (which would reschedule it 5 s later, after the workers went
        // idle). The lease is twice the budget, as by default (120 s for 60 s), so each worker
        // claims a pool's worth ahead and starts those jobs though its next claim finds none.
        let limit = format!("{LIMIT}/{}ms", WINDOW.as_millis());
        let mut workers = pg_workers(
            &contract,
            &url,
            &dir,
            WORKERS,
            "10s",
            &[
                "--until-idle",
                "--concurrency",
                "16",
                "--lease",
                "20s",
                "--trigger-limit",
                &limit,
            ],
        );
        let mut claimed = Vec::new();
        for (child, log) in &mut workers {
            let code = wait(child, Duration::from_secs(300));
            let stderr = std::fs::read_to_string(&*log).unwrap();
            assert_eq!(code, 0, "{stderr}");
            let count: u64 = stderr
                .split(": claimed ")
                .nth(1)
                .and_then(|rest| rest.split(':').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no summary: {stderr}"));
            claimed.push(count);
        }
        let delivered = started.elapsed() - enqueued;

        let ledger = contract.ledger();
        let by_key: HashMap<String, String> = (0..JOBS)
            .map(|n| (derived(&format!("job-{n}")), format!("job-{n}")))
            .collect();
        let requests = ledger.requests_to("POST", WEBHOOKS);
        let mut keys = HashSet::new();
        for request in &requests {
            let key = request.idempotency_key.clone().expect("a delivery ID");
            assert!(by_key.contains_key(&key), "a delivery ID of no job: {key}");
            keys.insert(key);
        }
        assert_eq!(keys.len(), JOBS, "every job sent, each under its one ID");
        for key in by_key.keys() {
            assert_eq!(ledger.runs_for_delivery(key).len(), 1, "{}", by_key[key]);
        }
        let throttled = requests.iter().filter(|r| r.status == Some(429)).count();
        assert_eq!(throttled, 0, "429s across the four workers");
        let counts = status(&contract, &url);
        assert_eq!(
            counts["accepted"] + counts["duplicate"],
            JOBS as u64,
            "{counts:?}"
        );
        for (n, count) in claimed.iter().enumerate() {
            assert!(*count > 0, "worker-{n} claimed nothing: {claimed:?}");
        }
        println!(
            "multi-worker test: {JOBS} jobs, {} requests, {} runs, {throttled} answers of 429; \
             claimed {claimed:?}; enqueued in {:.1} s, delivered in {:.1} s",
            requests.len(),
            ledger.total_runs(),
            enqueued.as_secs_f64(),
            delivered.as_secs_f64()
        );
    }

    /// Stores the jobs through the SDK, 16 at a time.
    async fn enqueue(url: &str) {
        let outbox = Outbox::postgres(url).await.unwrap();
        let mut running = tokio::task::JoinSet::new();
        for n in 0..JOBS {
            if running.len() >= 16 {
                running.join_next().await.unwrap().unwrap();
            }
            let outbox = outbox.clone();
            running.spawn(async move {
                outbox
                    .enqueue(
                        &format!("job-{n}"),
                        Target::webhook(TRIGGER),
                        format!("{{\"job\":{n}}}"),
                    )
                    .await
                    .unwrap();
            });
        }
        while let Some(done) = running.join_next().await {
            done.unwrap();
        }
    }

    /// A schema of its own for the test in the database `url` names (as tests/support/postgres.rs
    /// of the SDK does); the URL whose `search_path` is that schema.
    pub(super) async fn fresh_schema(url: &str) -> String {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("OUTBOX_DATABASE_URL is reachable");
        tokio::spawn(connection);
        let schema = format!(
            "outbox_cli_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        client
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await
            .unwrap();
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}options=-c%20search_path%3D{schema}")
    }
}

/// A file of `webhooks` webhook deliveries, `writes` JSON:API creates and `calls` Modulify
/// `send_message` calls, each kind in its own run of lines, the event IDs `<prefix>-w|p|m-<n>`.
fn job_file(prefix: &str, webhooks: usize, writes: usize, calls: usize) -> String {
    let mut text = String::new();
    for n in 0..webhooks {
        text.push_str(&format!(
            "{{\"kind\":\"webhook\",\"event_id\":\"{prefix}-w-{n}\",\"body\":{{\"order\":{n}}}}}\n"
        ));
    }
    for n in 0..writes {
        text.push_str(&format!(
            "{{\"kind\":\"write\",\"method\":\"POST\",\"path\":\"/api/json/v1/projects\",\
             \"event_id\":\"{prefix}-p-{n}\",\"body\":{{\"data\":{{\"type\":\"projects\",\
             \"attributes\":{{\"name\":\"P{n}\"}}}}}}}}\n"
        ));
    }
    for n in 0..calls {
        text.push_str(&format!(
            "{{\"kind\":\"modulify\",\"method\":\"send_message\",\"event_id\":\"{prefix}-m-{n}\",\
             \"body\":{{\"projectId\":\"site_1\",\"prompt\":\"Order {n}.\"}}}}\n"
        ));
    }
    text
}

/// `outbox enqueue --events <file> --json` on `outbox`, the token from the environment.
fn enqueue(contract: &Contract, outbox: &str, file: &str, batch: &str) -> Ran {
    run(contract
        .send()
        .env("HODOFLOW_TRIGGER_TOKEN", TRIGGER)
        .args([
            "--json",
            "outbox",
            "--outbox",
            outbox,
            "enqueue",
            "--events",
            file,
            "--batch-size",
            batch,
        ]))
}

#[test]
fn enqueue_stores_a_mixed_file_once_and_a_rerun_stores_nothing_new() {
    let contract = Contract::start();
    let dir = TempDir::new("enqueue");
    let outbox = dir.file("outbox.db");
    let file = TempFile::new("jobs.ndjson", job_file("mix", 30, 20, 10).as_bytes());

    let first = enqueue(&contract, &outbox, &file.arg(), "25");
    assert_eq!(first.code, 0, "{first:?}");
    let summary = first.json();
    assert_eq!(
        (&summary["jobs"], &summary["stored"], &summary["already"]),
        (&Value::from(60), &Value::from(60), &Value::from(0)),
        "{summary}"
    );
    assert_eq!(summary["batches"], 3, "60 jobs, 25 a transaction");
    let counts = status(&contract, &outbox);
    assert_eq!((counts["pending"], counts["total"]), (60, 60));

    // Again, the token as a flag this time, text output: nothing new.
    let again = run(contract.send().args([
        "outbox",
        "--outbox",
        &outbox,
        "enqueue",
        "--events",
        &file.arg(),
        "--trigger-token",
        &contract.trigger_url(TRIGGER),
    ]));
    assert_eq!(again.code, 0, "{again:?}");
    assert!(
        again
            .stdout
            .contains("60 job(s): 0 stored now, 60 already there (1 batch(es))"),
        "{again:?}"
    );
    assert_eq!(status(&contract, &outbox)["total"], 60);

    // Each job as its line says: its kind, its delivery ID derived from its event ID.
    let listed = run(contract.send().args([
        "--json", "outbox", "--outbox", &outbox, "list", "--limit", "1000",
    ]));
    let jobs = listed.json()["jobs"].as_array().unwrap().clone();
    assert_eq!(jobs.len(), 60);
    assert_eq!(listed.json()["next"], Value::Null);
    for job in &jobs {
        let event_id = job["event_id"].as_str().unwrap();
        assert_eq!(job["delivery_id"], derived(event_id).as_str());
    }
    // Page by page: 25, 25, 10, each job once, the cursor on standard error without --json.
    let mut after: Option<String> = None;
    let mut paged = Vec::new();
    for page in 0.. {
        let mut command = contract.send();
        command.args([
            "--json", "outbox", "--outbox", &outbox, "list", "--limit", "25",
        ]);
        if let Some(cursor) = &after {
            command.args(["--after", cursor]);
        }
        let ran = run(&mut command);
        assert_eq!(ran.code, 0, "{ran:?}");
        let json = ran.json();
        paged.extend(
            json["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|job| job["event_id"].as_str().unwrap().to_owned()),
        );
        match json["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => {
                assert_eq!(page, 2, "three pages");
                break;
            }
        }
    }
    let unique: HashSet<&String> = paged.iter().collect();
    assert_eq!((paged.len(), unique.len()), (60, 60));
    let text = run(contract
        .send()
        .args(["outbox", "--outbox", &outbox, "list", "--limit", "25"]));
    assert_eq!(text.stdout.lines().count(), 26, "{text:?}");
    assert!(
        text.stderr
            .contains("more jobs follow: the next page is --after pending."),
        "{text:?}"
    );
    let bad = run(contract.send().args([
        "outbox",
        "--outbox",
        &outbox,
        "list",
        "--after",
        "later.1.2",
    ]));
    assert_eq!(bad.code, 2, "{bad:?}");
    for ran in [&first, &again, &listed, &text] {
        assert!(!ran.all().contains(TRIGGER), "a token was printed: {ran:?}");
        assert!(
            !ran.all().contains("\"order\""),
            "a body was printed: {ran:?}"
        );
    }
    assert!(contract.ledger().requests().is_empty(), "nothing was sent");
}

#[test]
fn enqueue_refuses_a_file_whose_last_line_is_bad_and_stores_nothing() {
    let contract = Contract::start();
    let dir = TempDir::new("enqueue-bad");
    let outbox = dir.file("outbox.db");
    let mut text = job_file("bad", 1_000, 500, 500);
    text.push_str(
        "{\"kind\":\"write\",\"method\":\"POST\",\"path\":\"/not/json/api\",\"event_id\":\"last\",\"body\":{}}\n",
    );
    let file = TempFile::new("bad.ndjson", text.as_bytes());

    let refused = enqueue(&contract, &outbox, &file.arg(), "100");
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused
            .stdout
            .contains("--events has 1 bad line(s); nothing was stored: line 2001: "),
        "{refused:?}"
    );
    assert!(
        !std::path::Path::new(&outbox).exists(),
        "no store was even created"
    );
    assert_eq!(status(&contract, &outbox)["total"], 0, "nothing stored");

    // A token in the file refuses it without showing it; webhooks need the token.
    let leaked = TempFile::new(
        "leaked.ndjson",
        format!(
            "{{\"kind\":\"webhook\",\"event_id\":\"t\",\"body\":{{}},\"trigger_token\":\"{TRIGGER}\"}}\n"
        )
        .as_bytes(),
    );
    let refused = enqueue(&contract, &outbox, &leaked.arg(), "100");
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused
            .stdout
            .contains("line 1: a trigger token is never in the file")
    );
    let no_token = run(contract.send().args([
        "outbox",
        "--outbox",
        &outbox,
        "enqueue",
        "--events",
        &file.arg(),
    ]));
    assert_eq!(no_token.code, 2, "{no_token:?}");
    assert!(
        no_token
            .stdout
            .contains("line 1: a webhook delivery needs the trigger token"),
        "{no_token:?}"
    );
    for ran in [&refused, &no_token] {
        assert!(!ran.all().contains(TRIGGER), "a token was printed: {ran:?}");
    }
    assert_eq!(status(&contract, &outbox)["total"], 0, "nothing stored");
    assert!(contract.ledger().requests().is_empty(), "nothing was sent");
}

#[test]
fn enqueued_jobs_of_each_kind_are_executed_once_by_a_worker() {
    let contract = Contract::start();
    let dir = TempDir::new("enqueue-worker");
    let outbox = dir.file("outbox.db");
    let file = TempFile::new("jobs.ndjson", job_file("e2e", 5, 4, 3).as_bytes());
    let stored = enqueue(&contract, &outbox, &file.arg(), "10000");
    assert_eq!(stored.json()["stored"], 12, "{stored:?}");

    let worker = run(contract
        .send()
        .env("HODOFLOW_TRIGGER_TOKEN", TRIGGER)
        .env("MODULIFY_BASE_URL", contract.base_url())
        .env("MODULIFY_TOKEN", hodoflow_mock::DEMO_MODULIFY_TOKEN)
        .args([
            "outbox",
            "--outbox",
            &outbox,
            "worker",
            "--until-idle",
            "--trigger-limit",
            "off",
        ]));
    assert_eq!(worker.code, 0, "{worker:?}");
    let counts = status(&contract, &outbox);
    assert_eq!(
        (counts["accepted"], counts["done"], counts["total"]),
        (5, 7, 12),
        "{counts:?}"
    );
    // A second worker finds nothing to do.
    let idle = run(contract
        .send()
        .args(["outbox", "--outbox", &outbox, "worker", "--until-idle"]));
    assert!(idle.stderr.contains(": claimed 0"), "{idle:?}");

    let ledger = contract.ledger();
    for n in 0..5 {
        let id = derived(&format!("e2e-w-{n}"));
        assert_eq!(ledger.runs_for_delivery(&id).len(), 1, "webhook {n}");
    }
    for n in 0..4 {
        assert_eq!(
            ledger.writes_executed(&derived(&format!("e2e-p-{n}"))),
            1,
            "write {n}"
        );
    }
    for n in 0..3 {
        assert_eq!(
            ledger.modulify_executions(&derived(&format!("e2e-m-{n}"))),
            1,
            "call {n}"
        );
    }
    assert_eq!(ledger.total_runs(), 5);
    assert_eq!(ledger.total_writes_executed(), 4);
    assert_eq!(ledger.modulify_total_executions(), 3);
    assert!(!worker.all().contains(TRIGGER), "{worker:?}");
}

#[cfg(feature = "postgres")]
mod fleet_outage {
    use super::*;

    use hodoflow_outbox::{Outbox, Target};

    const WORKERS: usize = 20;
    /// Events a second across the fleet: about three a worker.
    const RATE: u64 = 60;
    /// Healthy traffic before the outage, the outage, healthy traffic after it.
    const BEFORE: Duration = Duration::from_secs(8);
    const OUTAGE: Duration = Duration::from_secs(30);
    const AFTER: Duration = Duration::from_secs(5);

    pub(super) fn run(url: &str) {
        let contract = Contract::start();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let url = runtime.block_on(multi_worker::fresh_schema(url));
        // Opened once, so the workers start on a migrated store.
        let outbox = runtime.block_on(Outbox::postgres(&url)).unwrap();

        let dir = TempDir::new("fleet");
        // A call's budget of a minute outlasts the outage: a call started in it holds until
        // the service is back, or its budget ends and its job is put off.
        let mut workers = pg_workers(
            &contract,
            &url,
            &dir,
            WORKERS,
            "60s",
            &["--concurrency", "8"],
        );

        // Events at a steady rate, from before the outage to after it.
        let started = Instant::now();
        let total = RATE * (BEFORE + OUTAGE + AFTER).as_secs();
        let mut outage_from = None;
        runtime.block_on(async {
            let mut tick = tokio::time::interval(Duration::from_millis(1000 / RATE));
            for n in 0..total {
                tick.tick().await;
                if outage_from.is_none() && started.elapsed() >= BEFORE {
                    contract
                        .server
                        .inject(Fault::respond(503).on("POST", WEBHOOKS).during(OUTAGE));
                    outage_from = Some(Instant::now());
                }
                let outbox = outbox.clone();
                tokio::spawn(async move {
                    outbox
                        .enqueue(
                            &format!("fleet-{n}"),
                            Target::webhook(TRIGGER),
                            format!("{{\"n\":{n}}}"),
                        )
                        .await
                        .unwrap();
                });
            }
        });
        let outage_from = outage_from.expect("the outage began");
        let outage_to = outage_from + OUTAGE;

        // Every event delivered: wait for the outbox to say so.
        let guard = HangGuard::new(Duration::from_secs(180));
        loop {
            let counts = status(&contract, &url);
            let done = counts.get("accepted").copied().unwrap_or(0)
                + counts.get("duplicate").copied().unwrap_or(0);
            if done == total {
                break;
            }
            assert_eq!(
                counts.get("failed").copied().unwrap_or(0)
                    + counts.get("needs_reconciliation").copied().unwrap_or(0),
                0,
                "{counts:?}"
            );
            guard.check(format!("every event delivered: {counts:?}"));
            std::thread::sleep(Duration::from_millis(500));
        }
        let drained = outage_to.elapsed();
        for (child, _) in &workers {
            let term = std::process::Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(term.success());
        }
        for (child, log) in &mut workers {
            let code = wait(child, Duration::from_secs(60));
            let stderr = std::fs::read_to_string(&*log).unwrap();
            assert_eq!(code, 0, "{stderr}");
            assert!(!stderr.contains(TRIGGER), "a trigger token was logged");
        }

        let ledger = contract.ledger();
        let requests = ledger.requests_to("POST", WEBHOOKS);
        let within = |from: Instant, to: Instant| {
            requests
                .iter()
                .filter(|r| r.arrived >= from && r.arrived < to)
                .count() as f64
        };
        // The healthy rate: the second second of the run to the outage (the first warms up).
        let warm = started + Duration::from_secs(2);
        let healthy = within(warm, outage_from) / (outage_from - warm).as_secs_f64();
        let during = within(outage_from, outage_to) / OUTAGE.as_secs_f64();
        let first_second = within(outage_from, outage_from + Duration::from_secs(1));
        let held_from = outage_from + Duration::from_secs(3);
        let held = within(held_from, outage_to) / (outage_to - held_from).as_secs_f64();
        let by_second: Vec<usize> = (0..OUTAGE.as_secs() + 10)
            .map(|n| {
                let from = outage_from + Duration::from_secs(n);
                within(from, from + Duration::from_secs(1)) as usize
            })
            .collect();
        eprintln!("requests by second from the outage's start: {by_second:?}");
        for n in 0..total {
            let key = derived(&format!("fleet-{n}"));
            assert_eq!(ledger.runs_for_delivery(&key).len(), 1, "fleet-{n}");
        }
        println!(
            "fleet outage test: {WORKERS} workers, {total} events; healthy {healthy:.1} requests/s, \
             during the outage {during:.2}/s ({:.3} of healthy; {first_second} in its first second), \
             once held {held:.2}/s ({:.3}); {} requests in all; every event delivered once, \
             {:.1} s after the outage",
            during / healthy,
            held / healthy,
            requests.len(),
            drained.as_secs_f64()
        );
        assert!(
            first_second <= healthy,
            "{first_second} requests in the outage's first second against {healthy:.1} a healthy \
             second: the fleet did not hold the outage on its first failures"
        );
        assert!(
            during <= 0.1 * healthy,
            "{during:.2} requests/s during the outage against {healthy:.1} healthy"
        );
        assert!(
            held <= 0.05 * healthy,
            "{held:.2} requests/s in the held part of the outage against {healthy:.1} healthy"
        );
    }
}
