//! The command line: clap types only.
//!
//! There is no `--client-secret` flag on purpose: a flag's value is visible to every user of
//! the machine in the process list and stays in shell history. The secret comes from
//! `--client-secret-file` or `HODOFLOW_CLIENT_SECRET` (see `secret.rs`). Signing secrets, the
//! same way, come only from a file: `--signing-secret-file` or `HODOFLOW_SIGNING_SECRET_FILE`.
//!
//! Every option read from the environment hides its value in `--help` (`hide_env_values`): the
//! help is printed to whoever asks, and `HODOFLOW_BASE_URL` may hold a password.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Sends to a Hodoflow-style API with safe retries: one identity per operation, the documented
/// retry matrix, and an attempt budget.
///
/// Exit status: 0 success (accepted, duplicate, ok, replayed); 1 permanent failure or
/// configuration, such as an outbox that cannot be used (do not retry unchanged); 2 usage error
/// or invalid input (nothing was sent); 3 retryable failure (the budget ran out or the outcome
/// is unknown: retry later with the same key).
#[derive(Debug, Parser)]
#[command(name = "hodoflow-send", version)]
pub(crate) struct Cli {
    /// The API's base URL, such as `https://hodoflow.example`.
    #[arg(
        long,
        env = "HODOFLOW_BASE_URL",
        hide_env_values = true,
        global = true,
        value_name = "URL"
    )]
    pub(crate) base_url: Option<String>,

    /// The client ID of the service account.
    #[arg(
        long,
        env = "HODOFLOW_CLIENT_ID",
        hide_env_values = true,
        global = true,
        value_name = "ID"
    )]
    pub(crate) client_id: Option<String>,

    /// A file holding the client secret (a trailing newline is trimmed). Without it, the
    /// secret is read from HODOFLOW_CLIENT_SECRET; it is never accepted as a flag value.
    #[arg(
        long,
        env = "HODOFLOW_CLIENT_SECRET_FILE",
        hide_env_values = true,
        global = true,
        value_name = "PATH"
    )]
    pub(crate) client_secret_file: Option<PathBuf>,

    /// The token endpoint. [default: {base-url}/oauth/token]
    #[arg(
        long,
        env = "HODOFLOW_TOKEN_URL",
        hide_env_values = true,
        global = true,
        value_name = "URL"
    )]
    pub(crate) token_url: Option<String>,

    /// The most requests of one operation, every one counted: the first, those the server
    /// paced with Retry-After, and the retry budget's probes while the service is down, unless
    /// --paced-retries allows some of those beyond it (at most 1000).
    #[arg(
        long,
        env = "HODOFLOW_MAX_ATTEMPTS",
        hide_env_values = true,
        global = true,
        default_value_t = 5,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=1000)
    )]
    pub(crate) max_attempts: u32,

    /// Retries beyond --max-attempts for those paced by someone else: the server's Retry-After
    /// of a second or more (load shedding), or a probe sent by an operation's final attempt
    /// while the retry budget holds the service down. Each draws one while some is left, then counts against --max-attempts; one
    /// operation sends at most --max-attempts plus this many requests. The library's default is
    /// 10; this tool's is 0, so --max-attempts is every request (at most 1000).
    #[arg(
        long,
        env = "HODOFLOW_PACED_RETRIES",
        hide_env_values = true,
        global = true,
        default_value_t = 0,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(0..=1000)
    )]
    pub(crate) paced_retries: u32,

    /// The time budget of one operation, from its start to its result, every wait included (a
    /// trigger's window, a scope the server closed); no attempt starts with less than 1s of it
    /// left, or a quarter of a shorter budget (DUR: 500ms, 30s, 2m, 1h; at most 24h).
    #[arg(
        long,
        env = "HODOFLOW_MAX_ELAPSED",
        hide_env_values = true,
        global = true,
        default_value = "60s",
        value_name = "DUR",
        value_parser = crate::duration::parse_call
    )]
    pub(crate) max_elapsed: Duration,

    /// The timeout of one attempt (DUR, at most 24h).
    #[arg(
        long,
        env = "HODOFLOW_ATTEMPT_TIMEOUT",
        hide_env_values = true,
        global = true,
        default_value = "15s",
        value_name = "DUR",
        value_parser = crate::duration::parse_call
    )]
    pub(crate) attempt_timeout: Duration,

    /// The longest wait for a PostgreSQL outbox (DUR): to open a connection, and for each
    /// store operation. A database that accepts the connection and never answers is a
    /// transport error (exit 3) after this long, never a hang.
    #[arg(
        long,
        env = "HODOFLOW_STORE_TIMEOUT",
        hide_env_values = true,
        global = true,
        default_value = "10s",
        value_name = "DUR",
        value_parser = crate::duration::parse_call
    )]
    pub(crate) store_timeout: Duration,

    /// Print exactly one JSON object on standard output (batch: one JSON line per event).
    #[arg(long, global = true)]
    pub(crate) json: bool,

    /// What to send.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Deliver one event; TRIGGER is a trigger token or a full trigger URL.
    Webhook(Delivery),
    /// One JSON:API write (POST, PUT, PATCH, DELETE) with an Idempotency-Key.
    Write(Write),
    /// One JSON:API read.
    Get {
        /// The path, such as /api/json/v1/projects/42.
        path: String,
    },
    /// One GraphQL factQuery.
    Graphql {
        /// The GraphQL document.
        #[arg(long, value_name = "Q")]
        query: String,
        /// The variables, a JSON object.
        #[arg(long, value_name = "JSON")]
        variables: Option<String>,
    },
    /// Poll a workflow run until it reaches a terminal state (within --max-elapsed).
    Follow {
        /// The workflow run ID, as an accepted delivery reports it.
        run_id: String,
    },
    /// Deliver, then resend with the same delivery ID; succeeds only when the second answer is
    /// `duplicate`.
    Rehearse(Delivery),
    /// Deliver NDJSON events ({"event_id": ..., "body": ...} a line), one result line per
    /// event on standard output.
    Batch(Batch),
    /// Call Modulify: a second API with its own base URL and a static token.
    Modulify(Modulify),
    /// A durable outbox (a SQLite file or a PostgreSQL database): run a worker, show counts,
    /// list jobs, requeue one.
    Outbox(Outbox),
}

impl Command {
    /// The command's name on the command line, such as `"webhook"`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Webhook(_) => "webhook",
            Self::Write(_) => "write",
            Self::Get { .. } => "get",
            Self::Graphql { .. } => "graphql",
            Self::Follow { .. } => "follow",
            Self::Rehearse(_) => "rehearse",
            Self::Batch(_) => "batch",
            Self::Modulify(_) => "modulify",
            Self::Outbox(_) => "outbox",
        }
    }
}

/// The arguments of `webhook` and `rehearse`.
#[derive(Debug, Args)]
pub(crate) struct Delivery {
    /// A trigger token, or the trigger URL `{base}/api/v1/webhooks/<token>`. A secret: never
    /// printed.
    pub(crate) trigger: String,
    /// The body, sent byte for byte: @FILE, @- (standard input) or the text itself.
    #[arg(long, value_name = "@FILE|@-|TEXT")]
    pub(crate) data: Option<String>,
    /// The stable delivery ID of this event, sent as Idempotency-Key. Without it or --event-id
    /// a random ID is generated, sent on every attempt and printed (on standard error with the
    /// command that resends under it, and as `key` with --json): resend with it.
    #[arg(long, value_name = "ID", conflicts_with = "event_id")]
    pub(crate) delivery_id: Option<String>,
    /// Derive the delivery ID from this business identifier (the same ID always gives the same
    /// delivery ID).
    #[arg(long, value_name = "BUSINESS_ID")]
    pub(crate) event_id: Option<String>,
    /// How the delivery is signed.
    #[command(flatten)]
    pub(crate) signing: Signing,
}

/// The signing secrets of `webhook`, `rehearse`, `batch` and `outbox worker`.
#[derive(Debug, Args)]
pub(crate) struct Signing {
    /// A file of Standard Webhooks signing secrets (whsec_ followed by base64 of 24 bytes or
    /// more), one a line; during a rotation both the old and the new one, and every attempt
    /// carries a signature of each. Every attempt is signed as it is sent (webhook-id,
    /// webhook-timestamp, webhook-signature). Never accepted as a flag value. [default:
    /// unsigned]
    #[arg(
        long,
        env = "HODOFLOW_SIGNING_SECRET_FILE",
        hide_env_values = true,
        value_name = "PATH"
    )]
    pub(crate) signing_secret_file: Option<PathBuf>,
}

/// The arguments of `write`.
#[derive(Debug, Args)]
pub(crate) struct Write {
    /// The method.
    #[arg(value_enum, ignore_case = true)]
    pub(crate) method: WriteMethod,
    /// The path, such as /api/json/v1/projects.
    pub(crate) path: String,
    /// The body, sent byte for byte: @FILE, @- (standard input) or the text itself.
    #[arg(long, value_name = "@FILE|@-|TEXT")]
    pub(crate) data: Option<String>,
    /// The Idempotency-Key. Without it or --event-id a random key is generated, sent on every
    /// attempt and printed (on standard error with the command that retries under it, and as
    /// `key` with --json): retry with it.
    #[arg(long, value_name = "KEY", conflicts_with = "event_id")]
    pub(crate) key: Option<String>,
    /// Derive the key from this business identifier.
    #[arg(long, value_name = "BUSINESS_ID")]
    pub(crate) event_id: Option<String>,
}

/// An unsafe JSON:API method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum WriteMethod {
    /// Create.
    #[value(name = "POST")]
    Post,
    /// Replace.
    #[value(name = "PUT")]
    Put,
    /// Change.
    #[value(name = "PATCH")]
    Patch,
    /// Delete.
    #[value(name = "DELETE")]
    Delete,
}

impl WriteMethod {
    /// The HTTP method.
    pub(crate) fn method(self) -> http::Method {
        match self {
            Self::Post => http::Method::POST,
            Self::Put => http::Method::PUT,
            Self::Patch => http::Method::PATCH,
            Self::Delete => http::Method::DELETE,
        }
    }
}

/// The arguments of `modulify`.
///
/// Its `--base-url` has the id of the global one, so clap does not propagate the global
/// option into this command (two `--base-url`s would clash) and `--base-url` works on either
/// side of `modulify`. A value clap fills in from `HODOFLOW_BASE_URL` still reaches this field
/// when `MODULIFY_BASE_URL` is unset; `modulify.rs` takes the field only when the option was
/// typed or `MODULIFY_BASE_URL` is set, so a Hodoflow URL never serves as Modulify's.
#[derive(Debug, Args)]
pub(crate) struct Modulify {
    /// Modulify's base URL, such as `https://api.modulify.ai` (its paths start with /v1/).
    #[arg(
        id = "base_url",
        long = "base-url",
        env = MODULIFY_BASE_URL,
        hide_env_values = true,
        value_name = "URL"
    )]
    pub(crate) base_url: Option<String>,
    /// A file holding the API token (a trailing newline is trimmed). Without it, the token is
    /// read from MODULIFY_TOKEN; it is never accepted as a flag value.
    #[arg(long, value_name = "PATH")]
    pub(crate) token_file: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: ModulifyCommand,
}

/// The environment variable of Modulify's base URL.
pub(crate) const MODULIFY_BASE_URL: &str = "MODULIFY_BASE_URL";

/// The commands of `modulify`.
#[derive(Debug, Subcommand)]
pub(crate) enum ModulifyCommand {
    /// Call one method: `POST /v1/<METHOD>`. The catalogue (GET /v1/tools, read once) decides
    /// the key: a read-only method is sent without one, every other with one, the same on
    /// every attempt.
    Call(MethodCall),
    /// Print the catalogue: each method's name, effect (read, idempotent, adds, destructive)
    /// and description.
    Tools,
}

impl ModulifyCommand {
    /// The command's name on the command line, such as `"call"`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Call(_) => "call",
            Self::Tools => "tools",
        }
    }
}

/// The arguments of `modulify call`.
#[derive(Debug, Args)]
pub(crate) struct MethodCall {
    /// The method, such as send_message.
    pub(crate) method: String,
    /// The JSON body, sent byte for byte: @FILE, @- (standard input) or the text itself.
    /// [default: {}]
    #[arg(long, value_name = "@FILE|@-|TEXT")]
    pub(crate) data: Option<String>,
    /// The Idempotency-Key. Without it or --event-id a random key is generated, sent on every
    /// attempt and printed (on standard error with the command that retries under it, and as
    /// `key` with --json): retry with it. A read-only method is sent without a key.
    #[arg(long, value_name = "KEY", conflicts_with = "event_id")]
    pub(crate) key: Option<String>,
    /// Derive the key from this business identifier.
    #[arg(long, value_name = "BUSINESS_ID")]
    pub(crate) event_id: Option<String>,
}

/// The arguments of `batch`.
#[derive(Debug, Args)]
pub(crate) struct Batch {
    /// A trigger token, or the trigger URL. A secret: never printed.
    pub(crate) trigger: String,
    /// The NDJSON events: a file, or - for standard input. Each line's delivery ID is derived
    /// from its event_id, like --event-id.
    #[arg(long, value_name = "FILE|-")]
    pub(crate) events: PathBuf,
    /// How many deliveries are in flight at once.
    #[arg(
        long,
        env = "HODOFLOW_CONCURRENCY",
        hide_env_values = true,
        default_value_t = 8,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=1024)
    )]
    pub(crate) concurrency: u32,
    /// Deliver through a durable outbox, a SQLite file PATH or a postgres:// URL: the events
    /// are stored first (an event already stored is not stored again), then delivered by a
    /// worker pool until none is due or in flight. A run killed midway and run again resumes
    /// where it stopped, under the same delivery IDs. Not read from HODOFLOW_OUTBOX: a batch
    /// stores nothing unless asked here.
    #[arg(long, value_name = "PATH|URL")]
    pub(crate) outbox: Option<String>,
    /// The longest an event waits for a slot of its trigger's window before its delivery
    /// starts (DUR, at most 24h): events queue, not deliveries, so each starts with its whole
    /// budget; one that gets no slot in time is listed to retry, nothing sent (with --outbox,
    /// its job's lease bounds the wait too).
    #[arg(long, value_name = "DUR", default_value = "1h", value_parser = crate::duration::parse_call)]
    pub(crate) queue: Duration,
    /// How the outbox's workers hold their jobs (only with --outbox).
    #[command(flatten)]
    pub(crate) pool: PoolOptions,
    /// How the deliveries to the trigger are paced, with --outbox or without.
    #[command(flatten)]
    pub(crate) pacing: Pacing,
    /// How the deliveries are signed (with --outbox too: the store never holds a secret).
    #[command(flatten)]
    pub(crate) signing: Signing,
}

/// The options of an outbox's worker pool, for `batch --outbox` and `outbox worker`.
#[derive(Debug, Args)]
pub(crate) struct PoolOptions {
    /// How long a worker holds a job it claimed (DUR); a job whose worker died is sent again,
    /// under its same delivery ID, once its lease has ended. It must outlast one call:
    /// --max-elapsed plus 1 s at least, 168h (7 days) at most. [default: 120s, or --max-elapsed
    /// plus 30s if longer]
    #[arg(long, value_name = "DUR", value_parser = crate::duration::parse)]
    pub(crate) lease: Option<Duration>,
}

/// The pacing of `batch` (with --outbox or without) and `outbox worker`: one rule for all three.
#[derive(Debug, Args)]
pub(crate) struct Pacing {
    /// The most deliveries per trigger per window: N/DUR, or off. It wins over the server's
    /// figures; an outbox's workers share it through the store. [default: the server's
    /// `RateLimit-Policy`, else 100/60s, Hodoflow's documented default]
    #[arg(long, value_name = "N/DUR|off", value_parser = crate::limit::parse)]
    pub(crate) trigger_limit: Option<TriggerLimitArg>,
}

use crate::limit::TriggerLimitArg;

/// The status page's address when `--listen` is not given: loopback only.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:8089";

/// The arguments of `outbox`.
#[derive(Debug, Args)]
pub(crate) struct Outbox {
    /// The outbox: a SQLite file PATH (created if absent) or a postgres:// URL.
    #[arg(
        long,
        env = "HODOFLOW_OUTBOX",
        hide_env_values = true,
        global = true,
        value_name = "PATH|URL"
    )]
    pub(crate) outbox: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: OutboxCommand,
}

/// The commands of `outbox`.
#[derive(Debug, Subcommand)]
pub(crate) enum OutboxCommand {
    /// Deliver the outbox's due jobs until stopped (SIGINT or SIGTERM: stop claiming, finish
    /// the deliveries in flight, exit 0), or with --until-idle until none is due or in flight.
    /// A job names its trigger by reference: the worker sends the jobs of the triggers whose
    /// tokens it is given (--trigger-token), and never prints one. On a terminal, standard error
    /// shows the counts every second; with --json, one JSON line per job finished.
    Worker(Worker),
    /// Print how many jobs are in each state, every paused scope (which credential, trigger or
    /// endpoint a server's 429 or Retry-After closed, until when, the time left and why) and
    /// every service the workers hold down (since when, and when they probe it next) (--json:
    /// one object, the scopes under `pauses` and the services under `outages`).
    Status,
    /// Store the jobs of a JSON-lines file, one a line naming its kind: webhook deliveries,
    /// JSON:API writes and Modulify calls. The whole file is checked first (exit 2 and nothing
    /// stored for any bad line); then the jobs are stored in transactions of --batch-size. An
    /// event ID already stored is left as it is, so running the same file again stores
    /// nothing new. Deliver them with `outbox worker`.
    Enqueue(Enqueue),
    /// Print a page of jobs, by state (pending first), then next attempt time, then ID: event
    /// ID, state, calls, attempts, next attempt time, the last error's kind and status, and
    /// whether a call may have run the job (never a trigger token nor a body). When more jobs
    /// follow, standard error says the --after CURSOR of the next page (--json: `next`).
    List {
        /// Only jobs in this state: pending, in_flight, accepted, duplicate, done, failed or
        /// needs_reconciliation. [default: every state]
        #[arg(long, value_name = "S", value_parser = parse_state)]
        state: Option<hodoflow_outbox::JobState>,
        /// The most jobs printed.
        #[arg(long, value_name = "N", default_value_t = 100)]
        limit: usize,
        /// Start after this cursor, as the page before printed it.
        #[arg(long, value_name = "CURSOR", value_parser = parse_cursor)]
        after: Option<hodoflow_outbox::Cursor>,
    },
    /// Make one failed, pending or needs-reconciliation job pending and due now; exit 1 when
    /// there is no such job, or when it was delivered or is in flight.
    Retry {
        /// The job's event ID.
        event_id: String,
    },
    /// Serve the outbox's status page: counts, the backlog over the last hour, every paused
    /// scope, the failed jobs with a retry button, each job's history, and /ready. Loopback by
    /// default; the bound address is printed on standard output. A retry needs the admin token.
    /// The page answers only to its own names (its address, localhost, --admin-host). Reading
    /// creates no session; a login makes a new session (a new ID, 12 h at most) and a logout
    /// forgets it.
    Serve {
        /// The address to listen on, IP:PORT (port 0: a free one). Any address but loopback
        /// needs --admin-token-file.
        #[arg(long, value_name = "IP:PORT", default_value = DEFAULT_LISTEN)]
        listen: std::net::SocketAddr,
        /// Who may requeue.
        #[command(flatten)]
        admin: AdminOptions,
    },
}

/// The admin token, names and limits of the status page (`outbox serve`, `outbox worker
/// --admin`).
#[derive(Debug, Args)]
pub(crate) struct AdminOptions {
    /// A file holding the page's admin token (a trailing newline is trimmed): 16 characters or
    /// more and about 60 bits of strength (no runs like aaaa or 1234, no repeated stretch;
    /// `openssl rand -hex 32` makes one). Needed to requeue a job from the page (log in with
    /// it, or send it as `Authorization: Bearer`), and to listen anywhere but loopback. Never
    /// shown or logged. Wrong tokens are throttled per client address: after 2 in a row, a
    /// wait of 5 s, doubling to 60 s (429).
    #[arg(long, value_name = "FILE")]
    pub(crate) admin_token_file: Option<PathBuf>,
    /// Another name the page answers to, as a browser or a proxy sends it in `Host` (NAME or
    /// NAME:PORT; repeat for more). The page answers only to the address a connection came in
    /// on, localhost and these names; any other Host gets 421 (DNS rebinding).
    #[arg(long = "admin-host", value_name = "NAME")]
    pub(crate) admin_hosts: Vec<String>,
    /// How long a client has to send a request's line and headers, counted from the
    /// connection's start or the end of the previous answer (also how long a kept-alive
    /// connection may wait for its next request); then the connection is closed.
    #[arg(
        long,
        value_name = "DUR",
        default_value = "10s",
        value_parser = crate::duration::parse
    )]
    pub(crate) admin_header_timeout: std::time::Duration,
    /// How long a connection may move no byte, either way (a stalled body, an answer not
    /// read), before it is closed. A request not read and answered within 30 s gets 408.
    #[arg(
        long,
        value_name = "DUR",
        default_value = "60s",
        value_parser = crate::duration::parse
    )]
    pub(crate) admin_idle_timeout: std::time::Duration,
    /// The most connections the page serves at once; further ones wait in the listen queue
    /// until one closes.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 256,
        value_parser = clap::value_parser!(u32).range(1..=65_536)
    )]
    pub(crate) admin_max_connections: u32,
}

impl AdminOptions {
    /// The page's names besides its address and localhost, and its connections' limits.
    ///
    /// # Errors
    ///
    /// A usage sentence naming an `--admin-host` that is not a name.
    pub(crate) fn page(&self) -> Result<(crate::page::Hosts, crate::page::Limits), String> {
        let hosts = crate::page::Hosts::new(&self.admin_hosts)?;
        let limits = crate::page::Limits {
            header_read: self.admin_header_timeout,
            idle: self.admin_idle_timeout,
            max_connections: self.admin_max_connections as usize,
        };
        Ok((hosts, limits))
    }
}

/// Parses a cursor a listing printed.
fn parse_cursor(text: &str) -> Result<hodoflow_outbox::Cursor, String> {
    text.parse()
        .map_err(|e: hodoflow_retry::Error| e.to_string())
}

/// The arguments of `outbox enqueue`.
#[derive(Debug, Args)]
pub(crate) struct Enqueue {
    /// The jobs, one JSON object a line: a file, or - for standard input. Each line is
    /// {"kind":"webhook","event_id":…,"body":…}, {"kind":"write","method":"POST",
    /// "path":"/api/json/v1/…","event_id":…,"body":…} or {"kind":"modulify",
    /// "method":"send_message","event_id":…,"body":…}; body_text (a string) instead of body
    /// stores that text as the body. Never a trigger token.
    #[arg(long, value_name = "FILE|-")]
    pub(crate) events: PathBuf,
    /// The trigger token of the file's webhook deliveries, or the trigger URL. A secret: never
    /// printed nor stored (each job stores the trigger's reference): give the same token to
    /// `outbox worker`.
    #[arg(
        long,
        env = "HODOFLOW_TRIGGER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN|URL"
    )]
    pub(crate) trigger_token: Option<String>,
    /// How many jobs each transaction stores: each batch is stored whole or not at all.
    #[arg(
        long,
        default_value_t = 10_000,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=100_000)
    )]
    pub(crate) batch_size: u32,
}

/// Parses a job state's name.
fn parse_state(text: &str) -> Result<hodoflow_outbox::JobState, String> {
    use hodoflow_outbox::JobState;
    JobState::parse(text.trim()).ok_or_else(|| {
        let names: Vec<&str> = JobState::ALL.iter().map(|state| state.as_str()).collect();
        format!("'{text}' is not a state: one of {}", names.join(", "))
    })
}

/// The arguments of `outbox worker`.
#[derive(Debug, Args)]
pub(crate) struct Worker {
    /// How many deliveries are in flight at once.
    #[arg(
        long,
        env = "HODOFLOW_CONCURRENCY",
        hide_env_values = true,
        default_value_t = 16,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=1024)
    )]
    pub(crate) concurrency: u32,
    /// Exit once no job is due and none is in flight (a job a dead worker held counts as in
    /// flight until its lease ends, then it is claimed and sent).
    #[arg(long)]
    pub(crate) until_idle: bool,
    /// The worker's name in the outbox's leases. [default: hodoflow-send-{pid}-{random}]
    #[arg(long, value_name = "NAME")]
    pub(crate) name: Option<String>,
    /// The token (or trigger URL) of each trigger whose jobs this worker delivers, comma
    /// separated or the flag repeated. A job stores its trigger's reference, never the token:
    /// a job whose token is not given here is not sent, and waits, pending. A secret: never
    /// printed; pass it in the environment rather than on the command line.
    #[arg(
        long,
        env = "HODOFLOW_TRIGGER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN|URL",
        value_delimiter = ','
    )]
    pub(crate) trigger_token: Vec<String>,
    /// How the workers hold their jobs.
    #[command(flatten)]
    pub(crate) pool: PoolOptions,
    /// How the deliveries are paced.
    #[command(flatten)]
    pub(crate) pacing: Pacing,
    /// How the deliveries are signed, as each attempt is sent: the outbox never holds a secret.
    #[command(flatten)]
    pub(crate) signing: Signing,
    /// Serve the status page and /ready on this address, IP:PORT, beside the workers (as
    /// `outbox serve` does; the bound address is printed on standard error).
    #[arg(long, value_name = "IP:PORT")]
    pub(crate) admin: Option<std::net::SocketAddr>,
    /// Who may requeue from the status page.
    #[command(flatten)]
    pub(crate) admin_options: AdminOptions,
    /// Modulify's base URL, for the outbox's Modulify jobs (`outbox enqueue`, kind modulify);
    /// the token comes from --modulify-token-file or MODULIFY_TOKEN. Without it, a Modulify job
    /// fails ("no client of these workers delivers a modulify job"; `outbox retry` requeues it).
    #[arg(
        long,
        env = "MODULIFY_BASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub(crate) modulify_base_url: Option<String>,
    /// A file holding Modulify's API token (a trailing newline is trimmed), for
    /// --modulify-base-url. Without it, the token is read from MODULIFY_TOKEN; it is never
    /// accepted as a flag value.
    #[arg(long, value_name = "PATH", requires = "modulify_base_url")]
    pub(crate) modulify_token_file: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn each_command_knows_its_name_on_the_command_line() {
        let lines: [&[&str]; 9] = [
            &["webhook", "t"],
            &["write", "POST", "/p"],
            &["get", "/p"],
            &["graphql", "--query", "q"],
            &["follow", "r"],
            &["rehearse", "t"],
            &["batch", "t", "--events", "-"],
            &["modulify", "tools"],
            &["outbox", "status"],
        ];
        let mut names = Vec::new();
        for line in lines {
            let cli = Cli::try_parse_from(std::iter::once("s").chain(line.iter().copied()))
                .unwrap_or_else(|e| panic!("{line:?}: {e}"));
            assert_eq!(cli.command.name(), line[0]);
            names.push(line[0]);
        }
        let command = Cli::command();
        let mut known: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
        known.sort_unstable();
        names.sort_unstable();
        assert_eq!(known, names);
    }

    #[test]
    fn no_flag_takes_a_client_secret() {
        let command = Cli::command();
        let mut names = Vec::new();
        for command in std::iter::once(&command).chain(command.get_subcommands()) {
            names.extend(command.get_arguments().filter_map(|a| a.get_long()));
        }
        assert!(names.contains(&"client-secret-file"));
        assert!(!names.contains(&"client-secret"), "{names:?}");
    }

    #[test]
    fn no_flag_takes_the_modulify_token() {
        let mut command = Cli::command();
        command.build();
        let modulify = command.find_subcommand("modulify").unwrap();
        let mut names = Vec::new();
        for command in std::iter::once(modulify).chain(modulify.get_subcommands()) {
            names.extend(command.get_arguments().filter_map(|a| a.get_long()));
        }
        assert!(names.contains(&"token-file"), "{names:?}");
        assert!(!names.contains(&"token"), "{names:?}");
        let env: Vec<_> = modulify
            .get_arguments()
            .filter_map(|a| a.get_env())
            .collect();
        assert!(!env.iter().any(|e| *e == "MODULIFY_TOKEN"), "{env:?}");
    }

    #[test]
    fn modulify_takes_its_base_url_on_either_side_and_its_own_options() {
        let parse = |line: &[&str]| {
            let cli = Cli::try_parse_from(std::iter::once("s").chain(line.iter().copied()))
                .unwrap_or_else(|e| panic!("{line:?}: {e}"));
            match cli.command {
                Command::Modulify(modulify) => modulify,
                other => panic!("{other:?}"),
            }
        };
        let after = parse(&["modulify", "--base-url", "http://m", "tools"]);
        assert_eq!(after.base_url.as_deref(), Some("http://m"));
        assert_eq!(after.command.name(), "tools");
        let before = parse(&["--base-url", "http://m", "modulify", "tools"]);
        assert_eq!(before.base_url.as_deref(), Some("http://m"));
        let call = parse(&[
            "--max-attempts",
            "2",
            "modulify",
            "--token-file",
            "/t",
            "call",
            "send_message",
            "--data",
            "{}",
            "--event-id",
            "e",
        ]);
        assert_eq!(call.token_file.as_deref(), Some(std::path::Path::new("/t")));
        let ModulifyCommand::Call(method) = call.command else {
            panic!("call")
        };
        assert_eq!(method.method, "send_message");
        assert_eq!(method.event_id.as_deref(), Some("e"));
        assert!(
            Cli::try_parse_from([
                "s",
                "modulify",
                "call",
                "m",
                "--key",
                "k",
                "--event-id",
                "e"
            ])
            .is_err()
        );
        assert!(Cli::try_parse_from(["s", "modulify", "--token", "t", "tools"]).is_err());
    }

    #[test]
    fn help_shows_no_value_from_the_environment() {
        let mut command = Cli::command();
        command.build();
        let mut with_env = 0;
        for command in std::iter::once(&command).chain(command.get_subcommands()) {
            for arg in command.get_arguments().filter(|a| a.get_env().is_some()) {
                with_env += 1;
                assert!(arg.is_hide_env_values_set(), "{:?}", arg.get_id());
            }
        }
        assert!(with_env >= 8, "{with_env} options from the environment");
    }

    #[test]
    fn options_come_from_the_environment_names() {
        let command = Cli::command();
        let env = |long: &str| {
            command
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .and_then(|a| a.get_env())
                .map(|e| e.to_string_lossy().into_owned())
        };
        assert_eq!(env("base-url").as_deref(), Some("HODOFLOW_BASE_URL"));
        assert_eq!(env("client-id").as_deref(), Some("HODOFLOW_CLIENT_ID"));
        assert_eq!(env("token-url").as_deref(), Some("HODOFLOW_TOKEN_URL"));
        assert_eq!(
            env("max-attempts").as_deref(),
            Some("HODOFLOW_MAX_ATTEMPTS")
        );
        assert_eq!(
            env("paced-retries").as_deref(),
            Some("HODOFLOW_PACED_RETRIES")
        );
        assert_eq!(env("max-elapsed").as_deref(), Some("HODOFLOW_MAX_ELAPSED"));
        assert_eq!(
            env("attempt-timeout").as_deref(),
            Some("HODOFLOW_ATTEMPT_TIMEOUT")
        );
    }
}
