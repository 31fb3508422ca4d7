//! Tracing on standard error, filtered by `RUST_LOG` (default `warn`).
//!
//! The SDK records no bearer token, client secret, trigger token or body at any level, and this
//! tool adds none; each field's value is redacted all the same (`redact.rs`), since a field can
//! hold text a server sent, and each line is made inert (`sanitize.rs`) before it is written.
//! The event's message, the SDK's own words, is never searched for a secret. `log` records of
//! the HTTP stack are not bridged into tracing: reqwest's own trace lines show full URLs, and a
//! webhook URL holds the trigger token.

use std::fmt;
use std::io::Write;
use std::sync::OnceLock;

use indicatif::ProgressBar;
use tracing::field::Field;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::MakeExt as _;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::{self, FormatFields, Writer};

/// The batch's progress bar, hidden while a log line is written so the two do not tear.
static PROGRESS: OnceLock<ProgressBar> = OnceLock::new();

/// Installs the subscriber.
pub(crate) fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(redacted_fields())
        .with_writer(Stderr)
        // Colours are escape sequences, which every line written loses (`sanitize.rs`).
        .with_ansi(false)
        .init();
}

/// The fields of an event or a span as `name=value`, each value redacted; the message as it
/// is.
fn redacted_fields() -> impl for<'w> FormatFields<'w> + 'static {
    format::debug_fn(
        |writer: &mut Writer<'_>, field: &Field, value: &dyn fmt::Debug| {
            if field.name() == "message" {
                write!(writer, "{value:?}")
            } else {
                let value = format!("{value:?}");
                write!(writer, "{}={}", field.name(), crate::redact::text(&value))
            }
        },
    )
    .delimited(" ")
}

/// Writes log lines around `bar` from now on.
pub(crate) fn show_progress(bar: ProgressBar) {
    let _ = PROGRESS.set(bar);
}

/// Standard error, around the progress bar if one is shown: each event's line is gathered,
/// then redacted and written whole.
#[derive(Debug, Clone, Copy)]
struct Stderr;

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Line;

    fn make_writer(&'a self) -> Self::Writer {
        Line(Vec::new())
    }
}

/// One log event's text, written when dropped.
#[derive(Debug)]
struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        // One event is one line: a line break inside a field cannot forge another.
        let text = String::from_utf8_lossy(&self.0);
        let line = crate::sanitize::strip(text.trim_end_matches('\n'), false);
        let text = format!("{}\n", crate::redact::terminal(&line));
        let write = || {
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(text.as_bytes());
            let _ = stderr.flush();
        };
        match PROGRESS.get() {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }
}
