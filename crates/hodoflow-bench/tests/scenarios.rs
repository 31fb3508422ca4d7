//! Every scenario at a tiny size, to prove its code paths work. Nothing here asserts a
//! speed or a target: at this size the figures mean nothing.

use std::alloc::System;

use hodoflow_bench::{Options, Scenario, Size};
use serde_json::Value;
use tracking_allocator::Allocator;

// The same allocator as the bench binary, so that the memory scenario counts body copies.
#[global_allocator]
static GLOBAL: Allocator<System> = Allocator::system();

/// Runs `scenario` at smoke size and returns its JSON line, parsed.
async fn smoke(scenario: Scenario) -> Value {
    hodoflow_bench::install_body_copy_counter();
    let options = Options::new(Size::Smoke, env!("CARGO_BIN_EXE_hodoflow-bench"));
    let report = scenario.run(&options).await.expect("the scenario runs");
    assert_eq!(report.scenario(), scenario.name());
    let line = report.to_line();
    assert!(!line.contains('\n'), "one line: {line}");
    let json: Value = serde_json::from_str(&line).expect("the line is JSON");
    assert_eq!(json["scenario"], scenario.name());
    assert!(json["pass"].is_boolean(), "{json}");
    assert!(
        !json["targets"].as_array().expect("targets").is_empty(),
        "{json}"
    );
    json
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overhead_signed_reports_the_signed_over_unsigned_ratio_and_the_count_child() {
    let json = smoke(Scenario::OverheadSigned).await;
    for c in [1, 64] {
        assert!(json["figures"][format!("ratio_c{c}")].is_number(), "{json}");
        for side in ["sdk_signed", "sdk"] {
            let rate = &json["figures"][format!("{side}_rps_median_c{c}")];
            assert!(rate.is_number(), "{json}");
        }
    }
    assert_eq!(json["targets"][0]["target"], ">= 0.95", "{json}");
    assert_eq!(json["figures"]["failed_deliveries"], 0, "{json}");
    instructions_counted(&json, ["sdk_signed", "sdk"]);
}

/// The instructions of `sides` at smoke size: counted by callgrind when valgrind runs (always
/// in CI, which installs it), each side's count per delivery printed for review; the count
/// child ran either way.
fn instructions_counted(json: &Value, sides: [&str; 2]) {
    let instructions = &json["figures"]["instructions"];
    let counted = instructions["counted"]
        .as_bool()
        .expect("counted is a boolean");
    if std::env::var("CI_REQUIRES_VALGRIND").as_deref() == Ok("1") {
        assert!(
            counted,
            "CI_REQUIRES_VALGRIND=1 but nothing was counted: {json}"
        );
    }
    for side in sides {
        assert!(instructions[side].is_object(), "{json}");
    }
    let ratio = format!("{}_over_{}", sides[0], sides[1]);
    if counted {
        let per = |side: &str| instructions[side]["instructions_per_request"].as_f64();
        let (first, second) = (per(sides[0]), per(sides[1]));
        assert!(first > Some(0.0) && second > Some(0.0), "{json}");
        assert!(instructions[&ratio].is_number(), "{json}");
        eprintln!(
            "{}: instructions per delivery {} {first:?}, {} {second:?}, {ratio} {}",
            json["scenario"], sides[0], sides[1], instructions[&ratio]
        );
    } else {
        assert!(instructions[&ratio].is_null(), "{json}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overhead_reports_the_median_ratio_its_spread_and_the_count_child() {
    let json = smoke(Scenario::Overhead).await;
    for c in [1, 64] {
        assert!(json["figures"][format!("ratio_c{c}")].is_number(), "{json}");
        for at in ["min", "median", "max"] {
            assert!(
                json["figures"][format!("ratio_spread_c{c}")][at].is_number(),
                "{json}"
            );
        }
        assert!(
            json["figures"][format!("reqwest_rps_median_c{c}")].is_number(),
            "{json}"
        );
    }
    assert_eq!(json["figures"]["failed_deliveries"], 0, "{json}");
    instructions_counted(&json, ["sdk", "reqwest"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storm_counts_requests_per_operation_for_the_sdk_and_every_peer() {
    let json = smoke(Scenario::Storm).await;
    for client in [
        "sdk_default_budget",
        "sdk_budget_disabled",
        "reqwest_retry",
        "reqwest_builtin_retry",
        "backon",
    ] {
        let ops = json["figures"][client]["ops"].as_u64().expect("ops");
        assert!(ops > 0, "{json}");
        assert!(
            json["figures"][client]["requests_per_op"].is_number(),
            "{json}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_202_reads_the_runs_of_every_sender_from_the_ledger() {
    let json = smoke(Scenario::Lost202).await;
    for sender in [
        "sdk",
        "reqwest_retry_same_body",
        "reqwest_retry_stamped_body",
        "reqwest_builtin_retry_same_body",
        "reqwest_builtin_retry_stamped_body",
        "backon_same_body",
        "backon_stamped_body",
        "app_retry_rebuilt_stamped_body",
        "reqwest_no_retry",
    ] {
        assert!(
            json["figures"][sender]["runs"].as_u64().expect("runs") > 0,
            "{json}"
        );
    }
    // A correctness property, not a speed: the SDK's delivery IDs never start a second run.
    assert_eq!(json["figures"]["sdk"]["duplicate_runs"], 0, "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_pairs_each_refusal_with_the_next_attempt() {
    let json = smoke(Scenario::RetryAfter).await;
    assert!(
        json["figures"]["sdk"]["retries_after_refusal"]
            .as_u64()
            .expect("pairs")
            > 0
    );
    for peer in ["reqwest_retry", "reqwest_builtin_retry", "backon"] {
        assert!(
            json["figures"][peer]["retries_after_refusal"]
                .as_u64()
                .expect("pairs")
                > 0,
            "{json}"
        );
        assert!(json["figures"][peer]["early"].is_u64(), "{json}");
    }
    // backon's documented adjust waits the whole Retry-After.
    assert_eq!(json["figures"]["backon"]["early"], 0, "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn herd_measures_raw_and_aligned_bunching() {
    let json = smoke(Scenario::Herd).await;
    for run in [
        "budget_disabled",
        "default_budget",
        "plain_bucket",
        "reqwest_retry",
        "reqwest_builtin_retry",
        "backon",
    ] {
        assert!(
            json["figures"][run]["retries"].as_u64().expect("retries") > 0,
            "{json}"
        );
        assert!(
            json["figures"][run]["aligned"]["bunching"].is_number(),
            "{json}"
        );
        assert!(
            json["figures"][run]["raw"]["bunching"].is_number(),
            "{json}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reauth_counts_the_exchanges_of_the_burst() {
    let json = smoke(Scenario::Reauth).await;
    assert!(
        json["figures"]["token_exchanges_during_burst"].is_u64(),
        "{json}"
    );
    assert!(
        json["figures"]["answers_401"].as_u64().expect("401s") > 0,
        "{json}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_runs_against_a_slow_child_server_and_counts_allocations() {
    let json = smoke(Scenario::Memory).await;
    for holder in ["sdk", "reqwest"] {
        assert!(
            json["figures"][holder]["peak_rss_mib"].is_number(),
            "{json}"
        );
        assert_eq!(
            json["figures"][holder]["allocation_counting_works"], true,
            "{json}"
        );
    }
    assert!(
        json["figures"]["server_held_at_once"]
            .as_u64()
            .expect("held")
            > 0,
        "{json}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn herd_10k_runs_the_default_budget_and_reports_peak_rss() {
    let json = smoke(Scenario::Herd10k).await;
    assert!(
        json["figures"]["default_budget"]["retries"]
            .as_u64()
            .expect("retries")
            > 0,
        "{json}"
    );
    assert!(json["figures"]["peak_rss_mib"].is_number(), "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_compares_the_last_half_with_the_healthy_rate() {
    let json = smoke(Scenario::Outage).await;
    assert!(
        json["figures"]["healthy_requests_per_second"].is_number(),
        "{json}"
    );
    for variant in ["sdk_default_budget", "sdk_plain_bucket"] {
        assert!(
            json["figures"][variant]["over_healthy_rate"].is_number(),
            "{json}"
        );
        assert!(json["figures"][variant]["ops"].as_u64().expect("ops") > 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_counts_failures_after_the_heal() {
    let json = smoke(Scenario::Recovery).await;
    for variant in ["sdk_default_budget", "sdk_plain_bucket"] {
        assert!(
            json["figures"][variant]["failed_after_heal"].is_u64(),
            "{json}"
        );
        assert!(
            json["figures"][variant]["ops_started_after_heal"]
                .as_u64()
                .expect("ops")
                > 0,
            "{json}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_limit_counts_429s_and_failures_for_each_budget() {
    let json = smoke(Scenario::ProxyLimit).await;
    for variant in [
        "sdk_default_budget",
        "sdk_plain_bucket",
        "sdk_budget_disabled",
    ] {
        assert!(json["figures"][variant]["share_429"].is_number(), "{json}");
        assert!(json["figures"][variant]["runs"].as_u64().expect("runs") > 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modulify_measures_the_documented_js_loop_and_the_sdk_on_every_share() {
    let json = smoke(Scenario::Modulify).await;
    for share in [
        "lost_answers",
        "in_progress",
        "rate_limited",
        "server_errors",
        "retry_after_date",
    ] {
        for client in ["documented_call_loop", "sdk"] {
            let figures = &json["figures"][share][client];
            assert!(
                figures["requests"].as_u64().expect("requests") > 0,
                "{json}"
            );
            assert!(figures["events_lost"].is_u64(), "{json}");
            assert!(figures["early_retries"].is_u64(), "{json}");
            // A correctness property, not a speed: no key of the SDK runs twice.
            if client == "sdk" {
                assert_eq!(figures["duplicate_executions"], 0, "{share}: {json}");
            }
        }
    }
    // The loop reads an HTTP-date Retry-After as NaN and retries at once: every retry after
    // such a 429 is early. The SDK waits for the date.
    let date = &json["figures"]["retry_after_date"];
    let loop_early = date["documented_call_loop"]["early_retries"]
        .as_u64()
        .unwrap();
    assert!(loop_early > 0, "{json}");
    assert_eq!(date["sdk"]["early_retries"], 0, "{json}");
    // The SDK also ran the rate share with a time budget that holds the window's wait.
    assert!(
        json["figures"]["rate_limited"]["sdk_max_elapsed_5s"]["requests"]
            .as_u64()
            .unwrap()
            > 0,
        "{json}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_measures_jobs_per_second_beside_direct_calls_and_enqueue_latency() {
    let json = smoke(Scenario::Outbox).await;
    let sqlite = &json["figures"]["sqlite"];
    for figure in [
        "outbox_jobs_per_s",
        "direct_jobs_per_s",
        "ratio",
        "enqueue_p50_ms",
        "enqueue_p99_ms",
        "requests_per_job",
    ] {
        assert!(sqlite[figure].is_number(), "{figure}: {json}");
    }
    assert_eq!(
        sqlite["requests_per_job"], 1.0,
        "no faults, no retries: {json}"
    );
    // PostgreSQL runs when a database is named (as .ci/run does); else a note says why not.
    let postgres = &json["figures"]["postgres"];
    if std::env::var("OUTBOX_DATABASE_URL").is_ok_and(|url| !url.is_empty()) {
        for pools in [1, 2, 4] {
            let figure = &postgres[format!("pools_{pools}")];
            assert!(figure["ratio"].is_number(), "{json}");
            assert!(figure["transactions_per_job"].is_number(), "{json}");
        }
        assert!(postgres["four_over_one"].is_number(), "{json}");
    } else {
        assert!(
            postgres.as_str().is_some_and(|s| s.starts_with("skipped")),
            "{json}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blip_pool_reads_every_cell_from_the_ledger() {
    let json = smoke(Scenario::BlipPool).await;
    for status in ["503", "429"] {
        for blip in ["0.05s"] {
            for c in ["c1", "c8"] {
                let cell = &json["figures"][status][blip][c];
                assert!(cell["lost"].is_u64(), "{status} {blip} {c}: {json}");
                assert!(cell["requests"].as_u64().expect("requests") > 0, "{json}");
                assert!(cell["requests_during_blip"].is_u64(), "{json}");
                // Every event is delivered at most once, and each run is one the pool counted.
                let runs = cell["runs"].as_u64().expect("runs");
                let lost = cell["lost"].as_u64().expect("lost");
                assert_eq!(runs + lost, 20, "{status} {blip} {c}: {json}");
                assert_eq!(cell["duplicates_executed"], 0, "{json}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_pool_measures_each_concurrency_and_the_batch_end() {
    let json = smoke(Scenario::OutagePool).await;
    for c in ["c1", "c8"] {
        let cell = &json["figures"][c];
        assert!(
            cell["healthy_requests_per_second"].as_f64().expect("rate") > 0.0,
            "{json}"
        );
        assert!(cell["over_healthy_rate"].is_number(), "{json}");
        assert!(cell["requests_per_op"].is_number(), "{json}");
        assert!(
            cell["events_started"].as_u64().expect("started") > 0,
            "{json}"
        );
        assert_eq!(cell["runs"], 0, "the server ran nothing: {json}");
    }
    let batch = &json["figures"]["batch"];
    assert_eq!(batch["events"], 30, "{json}");
    assert!(batch["seconds"].is_number(), "{json}");
    assert_eq!(batch["runs"], 0, "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_measures_events_a_second_and_batch_latency_per_store() {
    let json = smoke(Scenario::Enqueue).await;
    let sqlite = &json["figures"]["sqlite"];
    assert!(
        sqlite["events_per_s"].as_f64().expect("rate") > 0.0,
        "{json}"
    );
    assert!(
        sqlite["batch_p99_ms"].as_f64().expect("p99") > 0.0,
        "{json}"
    );
    assert!(sqlite["repeat_batch_ms"].is_number(), "{json}");
    let postgres = &json["figures"]["postgres"];
    assert!(
        postgres.is_string() || postgres["events_per_s"].as_f64().expect("rate") > 0.0,
        "{json}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wake_measures_how_soon_a_job_enqueued_into_an_idle_outbox_starts() {
    let json = smoke(Scenario::Wake).await;
    let sqlite = &json["figures"]["sqlite_in_process"];
    assert_eq!(sqlite["jobs"], 5, "{json}");
    let p99 = sqlite["start_p99_ms"].as_f64().expect("p99");
    // Polling (30 s here) could not have started them: only the wake-up did.
    assert!(p99 < 30_000.0, "{json}");
    let postgres = &json["figures"]["postgres_notify"];
    assert!(
        json["figures"]["postgres"].is_string()
            || postgres["start_p99_ms"].as_f64().expect("p99") < 30_000.0,
        "{json}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_times_first_and_deep_pages_per_store() {
    let json = smoke(Scenario::List).await;
    let sqlite = &json["figures"]["sqlite"];
    assert_eq!(sqlite["jobs"], 2_000, "{json}");
    assert_eq!(sqlite["failed"], 120, "{json}");
    for page in [
        "first_page",
        "deep_page",
        "failed_first_page",
        "pending_deep_page",
    ] {
        assert!(
            sqlite[page]["p99_ms"].as_f64().expect("p99") > 0.0,
            "{page}: {json}"
        );
    }
    assert_eq!(sqlite["first_page"]["jobs"], 50, "{json}");
    assert_eq!(sqlite["first_page"]["next"], true, "{json}");
    assert_eq!(sqlite["deep_page"]["jobs"], 50, "{json}");
    let postgres = &json["figures"]["postgres"];
    assert!(
        postgres.is_string() || postgres["deep_page"]["jobs"] == 50,
        "{json}"
    );
}
