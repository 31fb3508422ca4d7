//! `hodoflow-bench`: benchmarks of the SDK against plain reqwest and its retrying peers.
//!
//! Run with: `cargo run --release -p hodoflow-bench -- <scenario>|all`. Each scenario prints
//! one JSON line on stdout; progress goes to stderr. See BENCHMARKS.md.

#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

use std::alloc::System;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use hodoflow_bench::{Holder, Options, Protocol, Scenario, Size};
use tracking_allocator::Allocator;

// Counts body-sized allocations for the memory scenario; it passes every call to the system
// allocator, with a small header, and tracks only while a count runs.
#[global_allocator]
static GLOBAL: Allocator<System> = Allocator::system();

/// Benchmarks of hodoflow-retry on the contract server over loopback.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// The scenario to run, or `all` for every one in turn.
    what: What,
    /// Run at a tiny size, to check that the scenarios work; the figures mean nothing.
    #[arg(long)]
    smoke: bool,
    /// How long `serve-slow` holds each delivery.
    #[arg(long, hide = true, default_value_t = 10_000)]
    delay_ms: u64,
    /// The client `hold` or `count` measures.
    #[arg(long, hide = true, default_value = "sdk")]
    holder: HolderArg,
    /// The protocol `hold` speaks.
    #[arg(long, hide = true, default_value = "http1")]
    protocol: ProtocolArg,
    /// The server `hold` or `count` delivers to.
    #[arg(long, hide = true, default_value = "")]
    url: String,
    /// How many deliveries `hold` starts at once.
    #[arg(long, hide = true, default_value_t = 0)]
    in_flight: u64,
    /// How many deliveries `count` sends.
    #[arg(long, hide = true, default_value_t = 0)]
    requests: u64,
    /// Whether `count`'s SDK signs every delivery (`overhead_signed`).
    #[arg(long, hide = true)]
    signed: bool,
    /// How many of `count`'s deliveries are in flight at once (1: one after another), to
    /// profile a client under concurrency.
    #[arg(long, hide = true, default_value_t = 1)]
    concurrency: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum HolderArg {
    Sdk,
    Reqwest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProtocolArg {
    Http1,
    H2c,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum What {
    #[value(name = "overhead")]
    Overhead,
    #[value(name = "overhead_signed")]
    OverheadSigned,
    #[value(name = "storm")]
    Storm,
    #[value(name = "lost_202")]
    Lost202,
    #[value(name = "retry_after")]
    RetryAfter,
    #[value(name = "herd")]
    Herd,
    #[value(name = "reauth")]
    Reauth,
    #[value(name = "memory")]
    Memory,
    #[value(name = "herd_10k")]
    Herd10k,
    #[value(name = "outage")]
    Outage,
    #[value(name = "recovery")]
    Recovery,
    #[value(name = "proxy_limit")]
    ProxyLimit,
    #[value(name = "modulify")]
    Modulify,
    #[value(name = "outbox")]
    Outbox,
    #[value(name = "blip_pool")]
    BlipPool,
    #[value(name = "outage_pool")]
    OutagePool,
    #[value(name = "enqueue")]
    Enqueue,
    #[value(name = "wake")]
    Wake,
    #[value(name = "list")]
    List,
    #[value(name = "all")]
    All,
    /// The memory scenario's slow server, run as a child process.
    #[value(name = "serve-slow", hide = true)]
    ServeSlow,
    /// The memory scenario's client, run as a child process.
    #[value(name = "hold", hide = true)]
    Hold,
    /// The overhead scenario's client under callgrind, run as a child process.
    #[value(name = "count", hide = true)]
    Count,
}

impl What {
    fn scenarios(self) -> Vec<Scenario> {
        match self {
            What::Overhead => vec![Scenario::Overhead],
            What::OverheadSigned => vec![Scenario::OverheadSigned],
            What::Storm => vec![Scenario::Storm],
            What::Lost202 => vec![Scenario::Lost202],
            What::RetryAfter => vec![Scenario::RetryAfter],
            What::Herd => vec![Scenario::Herd],
            What::Reauth => vec![Scenario::Reauth],
            What::Memory => vec![Scenario::Memory],
            What::Herd10k => vec![Scenario::Herd10k],
            What::Outage => vec![Scenario::Outage],
            What::Recovery => vec![Scenario::Recovery],
            What::ProxyLimit => vec![Scenario::ProxyLimit],
            What::Modulify => vec![Scenario::Modulify],
            What::Outbox => vec![Scenario::Outbox],
            What::BlipPool => vec![Scenario::BlipPool],
            What::OutagePool => vec![Scenario::OutagePool],
            What::Enqueue => vec![Scenario::Enqueue],
            What::Wake => vec![Scenario::Wake],
            What::List => vec![Scenario::List],
            What::All => Scenario::ALL.to_vec(),
            What::ServeSlow | What::Hold | What::Count => Vec::new(),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime starts");
    if cli.what == What::ServeSlow {
        return match runtime.block_on(hodoflow_bench::serve_slow(Duration::from_millis(
            cli.delay_ms,
        ))) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("serve-slow: {error}");
                ExitCode::FAILURE
            }
        };
    }
    let holder = match cli.holder {
        HolderArg::Sdk => Holder::Sdk,
        HolderArg::Reqwest => Holder::Reqwest,
    };
    if cli.what == What::Count {
        let counted = hodoflow_bench::count_requests(
            holder,
            cli.signed,
            &cli.url,
            cli.requests,
            cli.concurrency,
        );
        return match runtime.block_on(counted) {
            Ok(0) => ExitCode::SUCCESS,
            Ok(failed) => {
                eprintln!("count: {failed} of {} deliveries failed", cli.requests);
                ExitCode::FAILURE
            }
            Err(error) => {
                eprintln!("count: {error}");
                ExitCode::FAILURE
            }
        };
    }
    hodoflow_bench::install_body_copy_counter();
    if cli.what == What::Hold {
        let protocol = match cli.protocol {
            ProtocolArg::Http1 => Protocol::Http1,
            ProtocolArg::H2c => Protocol::H2c,
        };
        let held = hodoflow_bench::hold(holder, protocol, &cli.url, cli.in_flight);
        return match runtime.block_on(held) {
            Ok(held) => {
                println!("{held}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("hold: {error}");
                ExitCode::FAILURE
            }
        };
    }
    let exe = std::env::current_exe().expect("the bench binary knows its path");
    let options = Options::new(if cli.smoke { Size::Smoke } else { Size::Full }, exe);
    let mut all_passed = true;
    for scenario in cli.what.scenarios() {
        let name = scenario.name();
        eprintln!("== {name}");
        let started = std::time::Instant::now();
        match runtime.block_on(scenario.run(&options)) {
            Ok(report) => {
                all_passed &= report.passed();
                println!("{}", report.to_line());
                eprintln!("== {name} took {:.1} s", started.elapsed().as_secs_f64());
            }
            Err(error) => {
                all_passed = false;
                eprintln!("== {name} could not run: {error}");
                let line = serde_json::json!({"scenario": name, "pass": false, "error": error.to_string()});
                println!("{line}");
            }
        }
    }
    if all_passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
