//! Shared by the CLI tests: the contract server on 127.0.0.1:0, kept alive on a runtime of its
//! own while the test runs the built `hodoflow-send` binary, and readers of what it printed.

#![allow(dead_code, reason = "each test uses a part of the support module")]

pub mod hostile;
pub mod page;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use hodoflow_mock::{
    DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, Ledger, Limits, MockServer, MockServerBuilder,
};
use serde_json::Value;

/// The demo trigger's token.
pub const TRIGGER: &str = hodoflow_mock::DEMO_TRIGGER_TOKEN;
/// The path prefix of both webhook routes, for faults and ledger queries.
pub const WEBHOOKS: &str = "/api/v1/webhooks/";
/// The JSON:API collection the tests write to.
pub const PROJECTS: &str = "/api/json/v1/projects";
/// The token endpoint.
pub const TOKEN: &str = "/oauth/token";
/// A webhook body.
pub const EVENT: &str = r#"{"order":4711,"event":"shipped"}"#;

/// A contract server, served by a runtime that lives as long as it does.
pub struct Contract {
    /// The server; dropped before the runtime that serves it.
    pub server: MockServer,
    runtime: tokio::runtime::Runtime,
}

/// Limits with millisecond workflow runs and no webhook rate limit to speak of.
pub fn limits() -> Limits {
    Limits {
        run_queued_for: Duration::from_millis(20),
        run_running_for: Duration::from_millis(40),
        webhook_rate_limit: 1_000_000,
        ..Limits::default()
    }
}

impl Contract {
    /// The demo client and trigger, fast runs.
    pub fn start() -> Self {
        Self::with(|builder| builder)
    }

    /// A server from the default builder (fast limits) as `configure` leaves it.
    pub fn with(configure: impl FnOnce(MockServerBuilder) -> MockServerBuilder) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the contract server");
        let builder = configure(MockServer::builder().limits(limits()));
        let server = runtime
            .block_on(builder.start())
            .expect("the contract server starts on 127.0.0.1:0");
        Self { server, runtime }
    }

    /// The base URL.
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    /// What the server saw and did so far.
    pub fn ledger(&self) -> Ledger {
        self.server.ledger()
    }

    /// `hodoflow-send` with a clean environment: this server, the demo credentials (the secret
    /// from the environment), a 5 s budget.
    pub fn send(&self) -> Command {
        let mut command = self.bare();
        command
            .env("HODOFLOW_CLIENT_ID", DEMO_CLIENT_ID)
            .env("HODOFLOW_CLIENT_SECRET", DEMO_CLIENT_SECRET);
        command
    }

    /// `hodoflow-send` with this server's base URL and the 5 s budget, but no credentials.
    pub fn bare(&self) -> Command {
        let mut command = Command::cargo_bin("hodoflow-send").expect("the binary is built");
        command
            .env_clear()
            .env("HODOFLOW_BASE_URL", self.base_url())
            .env("HODOFLOW_MAX_ELAPSED", "5s")
            .env("HODOFLOW_ATTEMPT_TIMEOUT", "2s")
            .timeout(Duration::from_secs(60));
        command
    }

    /// `hodoflow-send` as a child process to start (and kill), in the environment of
    /// [`Contract::send`].
    pub fn child(&self) -> std::process::Command {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hodoflow-send"));
        command
            .env_clear()
            .env("HODOFLOW_BASE_URL", self.base_url())
            .env("HODOFLOW_MAX_ELAPSED", "5s")
            .env("HODOFLOW_ATTEMPT_TIMEOUT", "2s")
            .env("HODOFLOW_CLIENT_ID", DEMO_CLIENT_ID)
            .env("HODOFLOW_CLIENT_SECRET", DEMO_CLIENT_SECRET);
        command
    }

    /// `line` run by `/bin/sh` in the environment of [`Contract::send`], as a user would paste
    /// a command this tool printed.
    pub fn shell(&self, line: &str) -> Command {
        let mut command = Command::new("/bin/sh");
        command
            .env_clear()
            .env("HODOFLOW_BASE_URL", self.base_url())
            .env("HODOFLOW_MAX_ELAPSED", "5s")
            .env("HODOFLOW_ATTEMPT_TIMEOUT", "2s")
            .env("HODOFLOW_CLIENT_ID", DEMO_CLIENT_ID)
            .env("HODOFLOW_CLIENT_SECRET", DEMO_CLIENT_SECRET)
            .args(["-c", line])
            .timeout(Duration::from_secs(60));
        command
    }

    /// `hodoflow-send` for `modulify`: this server as Modulify (`MODULIFY_BASE_URL`), the demo
    /// Modulify token in `MODULIFY_TOKEN`, the 5 s budget, and `HODOFLOW_BASE_URL` pointing at a
    /// closed port, so a test fails if the Hodoflow URL ever serves as Modulify's.
    pub fn modulify(&self) -> Command {
        let mut command = Command::cargo_bin("hodoflow-send").expect("the binary is built");
        command
            .env_clear()
            .env("MODULIFY_BASE_URL", self.base_url())
            .env("MODULIFY_TOKEN", hodoflow_mock::DEMO_MODULIFY_TOKEN)
            .env("HODOFLOW_BASE_URL", "http://127.0.0.1:9")
            .env("HODOFLOW_MAX_ELAPSED", "5s")
            .env("HODOFLOW_ATTEMPT_TIMEOUT", "2s")
            .timeout(Duration::from_secs(60));
        command
    }

    /// The trigger URL of `token` on this server.
    pub fn trigger_url(&self, token: &str) -> String {
        format!("{}{WEBHOOKS}{token}", self.base_url())
    }
}

/// What a run of the binary printed, and how it ended.
#[derive(Debug)]
pub struct Ran {
    /// The exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Ran {
    /// The one JSON object on standard output.
    #[track_caller]
    pub fn json(&self) -> Value {
        let lines: Vec<&str> = self.stdout.lines().collect();
        assert_eq!(lines.len(), 1, "exactly one line on stdout: {self:?}");
        serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }

    /// Every line of standard output, each a JSON object.
    #[track_caller]
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect()
    }

    /// Standard output and standard error together.
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// Runs `command` to its end. Its timeout (60 s from [`Contract::send`] and the others, or
/// the test's own) is a hang guard: a run still going then is killed, and the test fails here.
#[track_caller]
pub fn run(command: &mut Command) -> Ran {
    let output = command.output().expect("the binary runs");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 stdout");
    let stderr = String::from_utf8(output.stderr).expect("UTF-8 stderr");
    let Some(code) = output.status.code() else {
        panic!(
            "the run ended by a signal ({}): it outlived its command's timeout, a hang guard, \
             or crashed\nstdout: {stdout}\nstderr: {stderr}",
            output.status
        );
    };
    Ran {
        code,
        stdout,
        stderr,
    }
}

/// A bound on a wait for real processes and sockets (a child to start listening, a page to
/// change): generous, and there only so that a wait that would never end fails the test with a
/// message instead of stalling the suite. It measures nothing: no test asserts how long
/// something took on the wall clock.
pub struct HangGuard {
    deadline: Instant,
    limit: Duration,
}

impl HangGuard {
    /// A guard that trips `limit` from now.
    pub fn new(limit: Duration) -> Self {
        Self {
            deadline: Instant::now() + limit,
            limit,
        }
    }

    /// Whether the limit has passed.
    pub fn tripped(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Fails the test, saying it still waits for `what`, once the limit has passed.
    #[track_caller]
    pub fn check(&self, what: impl std::fmt::Display) {
        assert!(
            !self.tripped(),
            "still waiting after {:?} (a hang guard): {what}",
            self.limit
        );
    }
}

/// A file in the temporary directory with `contents`, removed when dropped.
pub struct TempFile(pub PathBuf);

impl TempFile {
    /// Writes `contents` to a fresh file named after `name`.
    pub fn new(name: &str, contents: &[u8]) -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "hodoflow-send-test-{}-{unique}-{name}",
            std::process::id()
        ));
        std::fs::write(&path, contents).expect("a temporary file");
        Self(path)
    }

    /// The path as an argument.
    pub fn arg(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The command a run that generated its key printed on standard error to send the operation
/// again under it: the line after the announcement.
#[track_caller]
pub fn resend_command(ran: &Ran) -> String {
    let mut lines = ran.stderr.lines();
    lines
        .by_ref()
        .find(|line| line.contains("to send it again under the same ID, run"))
        .unwrap_or_else(|| panic!("no announcement of a generated key: {ran:?}"));
    let command = lines.next().expect("the command follows the announcement");
    assert!(command.starts_with("  "), "{command:?}");
    command.trim().to_owned()
}

/// The delivery ID `--event-id` and `batch` derive from a business event ID.
pub fn derived(event_id: &str) -> String {
    hodoflow_retry::IdempotencyKey::from_operation_id(event_id)
        .as_str()
        .to_owned()
}

/// Whether `text` is a hyphenated UUID.
pub fn is_uuid(text: &str) -> bool {
    text.len() == 36
        && text.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// A directory of its own under the temporary directory, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh directory named after `name`.
    pub fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path = std::env::temp_dir().join(format!(
            "hodoflow-send-test-{}-{name}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    /// The path of `name` in it, as an argument.
    pub fn file(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
