//! Tracing on standard error, filtered by `RUST_LOG` (default `warn`).
//!
//! The SDK records no bearer token, client secret, trigger token or body at any level, and this
//! tool adds none. `log` records of the HTTP stack are not bridged into tracing: reqwest's own
//! trace lines show full URLs, and a webhook URL holds the trigger token.

use std::io::Write;
use std::sync::OnceLock;

use indicatif::ProgressBar;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// The batch's progress bar, hidden while a log line is written so the two do not tear.
static PROGRESS: OnceLock<ProgressBar> = OnceLock::new();

/// Installs the subscriber.
pub(crate) fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Stderr)
        .init();
}

/// Writes log lines around `bar` from now on.
pub(crate) fn show_progress(bar: ProgressBar) {
    let _ = PROGRESS.set(bar);
}

/// Standard error, around the progress bar if one is shown.
#[derive(Debug, Clone, Copy)]
struct Stderr;

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Stderr;

    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

impl Write for Stderr {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match PROGRESS.get() {
            Some(bar) => bar.suspend(|| std::io::stderr().write(bytes)),
            None => std::io::stderr().write(bytes),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
