//! `hodoflow-send`: send to a Hodoflow-style API from the command line, with safe retries.
//!
//! Every operation carries one identity on every attempt (an Idempotency-Key or a webhook
//! delivery ID), the SDK's retry matrix decides what is retried, and the exit status says what
//! to do next: 0 done, 1 do not retry unchanged, 2 nothing was sent, 3 retry later with the
//! same key. `modulify` calls a second API, Modulify. Run `hodoflow-send --help` for the
//! commands.

#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

mod base_url;
mod batch;
mod body;
mod cli;
mod client;
mod commands;
mod duration;
mod enqueue;
mod events;
mod identity;
mod internal;
mod job_file;
mod job_line;
mod limit;
mod logging;
mod modulify;
mod outage_line;
mod outbox;
mod pacing;
mod page;
mod pause_line;
mod pool;
mod redact;
mod report;
mod requeue;
mod sanitize;
mod secret;
mod trigger;
mod usage;

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    internal::install_hook();
    // Known before parsing, so a usage error that quotes a mistyped argument cannot show it.
    for name in [secret::ENV, secret::MODULIFY_ENV] {
        if let Ok(secret) = std::env::var(name) {
            redact::add(&secret);
        }
    }
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) if error.use_stderr() => return ExitCode::from(usage::refuse(&error, &args)),
        // --help and --version.
        Err(help) => help.exit(),
    };
    logging::init();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a single-threaded Tokio runtime starts");
    let exit = runtime.block_on(commands::run(cli, &args));
    ExitCode::from(exit.code())
}
