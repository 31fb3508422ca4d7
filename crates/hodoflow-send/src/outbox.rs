//! `outbox` and `batch --outbox`: a durable outbox from the command line.
//!
//! `--outbox` names the store: a SQLite file path (created if absent; the embedded default) or a
//! `postgres://` / `postgresql://` URL (many worker processes on many machines; needs the
//! `postgres` feature). A password in the URL is added to the redaction set before the store is
//! opened, so no error or log line shows it. A PostgreSQL store waits at most `--store-timeout`
//! to connect and for each operation. A libpq key/value string (`host=… dbname=…`) is refused
//! with a hint to write it as a URL (exit 2), before anything is created: it was once taken for a
//! file name. A SQLite path no wait can heal (a directory, a device, not a database, read-only,
//! impossible to create) is a `configuration` error, exit 1, with the reason.
//!
//! `batch --outbox` stores every event of the file as a job (its delivery ID derived from its
//! `event_id`, as without `--outbox`), then runs a worker pool until none of them is due or in
//! flight, and prints one line per event in file order (`job_line.rs`). Enqueueing is
//! idempotent: a rerun stores nothing new and delivers only what the last run left, so a run
//! killed midway and run again resumes where it stopped, and an event is never sent under a
//! second identity. An event already stored with another body or trigger keeps the stored job,
//! and standard error says so.
//!
//! `outbox enqueue --events FILE` stores a file of jobs of every kind (`enqueue.rs`,
//! `job_file.rs`); `outbox list` prints one keyset page (`Outbox::list_page`) and the cursor
//! of the next (`--after`).
//!
//! Exit status of `batch --outbox`: 0 when every event is accepted or duplicate; 3 when some
//! are still pending or in flight (run the same command again later); 1 when some failed or
//! need reconciliation (a person decides). `outbox worker` exits 0 when stopped or idle.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use hodoflow_outbox::{Counts, Cursor, Job, JobState, Outbox, Target};
use hodoflow_retry::{ErrorKind, Secret};
use tokio::task::JoinSet;

use crate::cli::{Cli, OutboxCommand, Pacing, PoolOptions};
use crate::job_line::{JobLine, delivered};
use crate::limit::TriggerLimitArg;
use crate::outage_line::OutageLine;
use crate::pause_line::PauseLine;
use crate::pool::{Pool, Until};
use crate::report::finish;
use crate::report::{Exit, Failure, Report};

/// How many store statements a command keeps going at once while it enqueues or reads jobs.
const STORE_CONCURRENCY: usize = 16;

/// Opens the outbox `spec` names; a PostgreSQL store waits at most `timeout` to connect and
/// for each operation (`--store-timeout`).
///
/// # Errors
///
/// The report of the failure: a usage error for a URL that is not PostgreSQL's (or PostgreSQL
/// in a build without it), the store's error otherwise.
pub(crate) async fn open(spec: &str, timeout: std::time::Duration) -> Result<Outbox, Report> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(usage(
            "--outbox needs a SQLite file path or a postgres:// URL",
        ));
    }
    let lower = spec.to_ascii_lowercase();
    if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        if let Ok(url) = url::Url::parse(spec)
            && let Some(password) = url.password()
        {
            crate::redact::add(password);
            // The URL holds it percent-encoded; a driver's message may quote it decoded.
            let plus_kept = password.replace('+', "%2B");
            if let Some((_, decoded)) =
                url::form_urlencoded::parse(format!("p={plus_kept}").as_bytes()).next()
            {
                crate::redact::add(&decoded);
            }
        }
        return postgres(spec, timeout).await;
    }
    if spec.contains("://") {
        return Err(usage(
            "--outbox takes a SQLite file path or a postgres:// URL (the value is not shown: \
             it may hold a password)",
        ));
    }
    if looks_like_libpq(spec) {
        for word in spec.split_whitespace() {
            if let Some((key, password)) = word.split_once('=')
                && key.eq_ignore_ascii_case("password")
            {
                crate::redact::add(password.trim_matches(['\'', '"']));
            }
        }
        return Err(usage(
            "--outbox looks like a libpq connection string (host=… dbname=…): write it as a \
             URL, postgres://user:password@host:port/database (the value is not shown: it may \
             hold a password; no file was created)",
        ));
    }
    Outbox::sqlite(spec).await.map_err(|e| match e.kind() {
        // A directory, a device, a file that is not SQLite, a read-only file: no wait heals it.
        // The input was valid; the store it names cannot be used: a configuration error.
        ErrorKind::InvalidInput => {
            let why = e.to_string();
            let why = why.strip_prefix("invalid input: ").unwrap_or(&why);
            Report::failure(Failure::permanent(
                "configuration",
                false,
                format!(
                    "configuration: the --outbox file cannot be used: {}",
                    crate::redact::text(why)
                ),
            ))
        }
        _ => Report::failed(&e),
    })
}

/// Whether `spec` is a libpq key/value connection string, such as
/// `host=db user=outbox password=… dbname=outbox`, rather than a file path: one of its
/// whitespace-separated words sets a libpq keyword.
fn looks_like_libpq(spec: &str) -> bool {
    const KEYWORDS: [&str; 12] = [
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "passfile",
        "sslmode",
        "connect_timeout",
        "options",
        "application_name",
        "service",
    ];
    spec.split_whitespace().any(|word| {
        word.split_once('=')
            .is_some_and(|(key, _)| KEYWORDS.contains(&key.trim().to_ascii_lowercase().as_str()))
    })
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str, timeout: std::time::Duration) -> Result<Outbox, Report> {
    let timeouts = hodoflow_outbox::StoreTimeouts::new()
        .connect(timeout)
        .statement(timeout);
    Outbox::postgres_with(url, timeouts)
        .await
        .map_err(|e| Report::failed(&e))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_url: &str, _timeout: std::time::Duration) -> Result<Outbox, Report> {
    Err(usage(
        "this hodoflow-send was built without PostgreSQL outboxes (feature postgres); \
         use a SQLite file path",
    ))
}

fn usage(message: &str) -> Report {
    Report::failure(Failure::invalid_input(message))
}

/// The settings a worker pool takes from the command line.
#[derive(Debug)]
pub(crate) struct PoolPlan {
    pub(crate) lease: std::time::Duration,
    /// `--trigger-limit`; `None`: the rule's default (the server's figures, else Hodoflow's
    /// documented default).
    pub(crate) trigger_limit: Option<TriggerLimitArg>,
    /// `--store-timeout`: the longest wait for a PostgreSQL store.
    pub(crate) store_timeout: std::time::Duration,
    /// `batch --queue`: the longest a job waits for its trigger's window; `None`: its lease's.
    pub(crate) queue: Option<std::time::Duration>,
}

impl PoolPlan {
    /// Reads `options` and `pacing` under the budget of `cli`.
    ///
    /// # Errors
    ///
    /// A usage sentence for a lease shorter than a call.
    pub(crate) fn of(cli: &Cli, options: &PoolOptions, pacing: &Pacing) -> Result<Self, String> {
        Ok(Self {
            lease: crate::pool::lease(options.lease, cli.max_elapsed)?,
            trigger_limit: pacing.trigger_limit,
            store_timeout: cli.store_timeout,
            queue: None,
        })
    }
}

/// A default worker name: `hodoflow-send-<pid>-<8 hex digits>`.
pub(crate) fn worker_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    format!("hodoflow-send-{}-{nanos:08x}", std::process::id())
}

/// Runs `outbox COMMAND`.
pub(crate) async fn run(cli: &Cli, outbox: &crate::cli::Outbox) -> Exit {
    let started = Instant::now();
    let json = cli.json;
    let Some(spec) = outbox.outbox.as_deref() else {
        return finish(
            usage("no outbox: pass --outbox PATH|URL or set HODOFLOW_OUTBOX"),
            started,
            json,
        );
    };
    // Checked before the store is opened: a usage error opens nothing.
    let worker = match &outbox.command {
        OutboxCommand::Worker(worker) => {
            let plan = PoolPlan::of(cli, &worker.pool, &worker.pacing).and_then(|plan| {
                let client = crate::client::build(cli, None, Some(&worker.signing))?;
                let modulify = match worker.modulify_base_url.as_deref() {
                    Some(url) => Some(crate::modulify::build(
                        cli,
                        url,
                        "--modulify-base-url (MODULIFY_BASE_URL)",
                        worker.modulify_token_file.as_deref(),
                    )?),
                    None => None,
                };
                Ok((plan, client, modulify))
            });
            match plan {
                Ok(plan) => Some(plan),
                Err(message) => return finish(usage(&message), started, json),
            }
        }
        _ => None,
    };
    let admin = match admin_of(&outbox.command) {
        Ok(admin) => admin,
        Err(message) => return finish(usage(&message), started, json),
    };
    let mut file = match &outbox.command {
        OutboxCommand::Enqueue(args) => match crate::enqueue::prepare(args) {
            Ok(file) => Some(file),
            Err(message) => return finish(usage(&message), started, json),
        },
        _ => None,
    };
    let triggers = match &outbox.command {
        OutboxCommand::Worker(args) => match trigger_tokens(&args.trigger_token) {
            Ok(triggers) => triggers,
            Err(message) => return finish(usage(&message), started, json),
        },
        _ => Vec::new(),
    };
    let store = match open(spec, cli.store_timeout).await {
        Ok(store) => store,
        Err(report) => return finish(report, started, json),
    };
    for token in triggers {
        if let Err(error) = store.add_trigger_token(token) {
            return finish(usage(&format!("--trigger-token: {error}")), started, json);
        }
    }
    let done = match (&outbox.command, worker) {
        (OutboxCommand::Worker(args), Some((plan, client, modulify))) => {
            let page = match admin {
                Some(admin) => match Page::start(admin, &store, &client).await {
                    Ok(page) => Some(page),
                    Err(report) => return finish(report, started, json),
                },
                None => None,
            };
            let pool = Pool {
                outbox: store,
                client,
                concurrency: args.concurrency as usize,
                lease: plan.lease,
                trigger_limit: plan.trigger_limit,
                name: args.name.clone().unwrap_or_else(worker_name),
                modulify,
                queue: plan.queue,
            };
            let done = work(pool, args.until_idle, json).await;
            if let Some(page) = page {
                page.stop().await;
            }
            done
        }
        (OutboxCommand::Serve { .. }, _) => match admin {
            Some(admin) => serve(admin, store, json).await,
            None => unreachable!("serve's address is checked above"),
        },
        (OutboxCommand::Status, _) => status(&store, json).await,
        (OutboxCommand::Enqueue(args), _) => {
            let file = file.take().expect("read above");
            crate::enqueue::run(&store, file, args.batch_size as usize, json).await
        }
        (
            OutboxCommand::List {
                state,
                limit,
                after,
            },
            _,
        ) => list(&store, *state, after.as_ref(), *limit, json).await,
        (OutboxCommand::Retry { event_id }, _) => retry(&store, event_id, json).await,
        (OutboxCommand::Worker(_), None) => unreachable!("a worker's plan is read above"),
    };
    match done {
        Ok(exit) => exit,
        Err(report) => finish(report, started, json),
    }
}

/// The status page of `outbox serve` or `outbox worker --admin`, checked (before the store
/// is opened); `None` for a worker without `--admin` and the other commands.
fn admin_of(command: &OutboxCommand) -> Result<Option<crate::page::Admin>, String> {
    use crate::page::Admin;
    match command {
        OutboxCommand::Serve { listen, admin } => {
            let (hosts, limits) = admin.page()?;
            Admin::check(*listen, admin.admin_token_file.as_deref(), hosts, limits).map(Some)
        }
        OutboxCommand::Worker(worker) => {
            let options = &worker.admin_options;
            match (worker.admin, &options.admin_token_file) {
                (Some(addr), file) => {
                    let (hosts, limits) = options.page()?;
                    Admin::check(addr, file.as_deref(), hosts, limits).map(Some)
                }
                (None, Some(_)) => Err("--admin-token-file needs --admin IP:PORT".to_owned()),
                (None, None) if !options.admin_hosts.is_empty() => {
                    Err("--admin-host needs --admin IP:PORT".to_owned())
                }
                (None, None) => Ok(None),
            }
        }
        _ => Ok(None),
    }
}

/// `outbox serve`: the status page until SIGINT or SIGTERM. Standard output says where it
/// listens (`--json`: `{"listening":"http://…/"}`).
async fn serve(admin: crate::page::Admin, outbox: Outbox, json: bool) -> Result<Exit, Report> {
    let (listener, bound) = admin.bind().await.map_err(|m| usage(&m))?;
    let address = format!("http://{bound}/");
    if json {
        crate::redact::print_json(&serde_json::json!({ "listening": address }));
    } else {
        crate::redact::print(&format!("listening on {address}"));
    }
    admin
        .serve(listener, outbox, None, signalled())
        .await
        .map_err(|e| {
            Report::failure(Failure::permanent(
                "configuration",
                false,
                format!(
                    "the status page stopped: {}",
                    crate::redact::text(&e.to_string())
                ),
            ))
        })?;
    Ok(Exit::Success)
}

/// Resolves on SIGINT or SIGTERM.
async fn signalled() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The status page served beside a worker pool (`outbox worker --admin`).
struct Page {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Page {
    /// Binds and starts serving; the bound address goes to standard error (standard output
    /// holds the worker's JSON lines).
    async fn start(
        admin: crate::page::Admin,
        outbox: &Outbox,
        client: &hodoflow_retry::HodoflowClient,
    ) -> Result<Self, Report> {
        let (listener, bound) = admin.bind().await.map_err(|m| usage(&m))?;
        crate::redact::eprint(&format!("status page listening on http://{bound}/"));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let serving = admin.serve(listener, outbox.clone(), Some(client.clone()), async move {
            let _ = stopped.await;
        });
        let task = tokio::spawn(serving);
        Ok(Self { stop, task })
    }

    /// Stops serving: open connections get a second to finish.
    async fn stop(self) {
        let _ = self.stop.send(());
        let abort = self.task.abort_handle();
        if tokio::time::timeout(std::time::Duration::from_secs(1), self.task)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
}

/// `outbox worker`.
async fn work(pool: Pool, until_idle: bool, json: bool) -> Result<Exit, Report> {
    let name = pool.name.clone();
    let until = if until_idle {
        Until::Idle
    } else {
        Until::Stopped
    };
    let ended = pool
        .run(until, json)
        .await
        .map_err(|e| Report::failed(&e))?;
    let why = if ended.signalled {
        "stopped by a signal"
    } else {
        "idle"
    };
    crate::redact::eprint(&format!(
        "outbox worker {name}: {}; {why}",
        crate::pool::report_text(&ended.report)
    ));
    Ok(Exit::Success)
}

/// `outbox status`: the counts by state, every paused scope (`pause_line.rs`) and every
/// service the fleet holds down (`outage_line.rs`).
async fn status(outbox: &Outbox, json: bool) -> Result<Exit, Report> {
    let counts = outbox.counts().await.map_err(|e| Report::failed(&e))?;
    let pauses = outbox.pauses().await.map_err(|e| Report::failed(&e))?;
    let outages = outbox.outages().await.map_err(|e| Report::failed(&e))?;
    let now = std::time::SystemTime::now();
    let pauses: Vec<PauseLine> = pauses
        .iter()
        .map(|pause| PauseLine::of(pause, now))
        .collect();
    let outages: Vec<OutageLine> = outages
        .iter()
        .map(|down| OutageLine::of(down, now))
        .collect();
    if json {
        let mut object = counts_object(&counts);
        object["pauses"] = serde_json::json!(pauses);
        object["outages"] = serde_json::json!(outages);
        crate::redact::print_json(&object);
    } else {
        let mut text: Vec<String> = JobState::ALL
            .iter()
            .map(|state| format!("{:<22}{:>8}", state.as_str(), counts.of(*state)))
            .collect();
        text.push(format!("{:<22}{:>8}", "total", counts.total()));
        text.push(format!("{:<22}{:>8}", "paused scopes", pauses.len()));
        text.extend(pauses.iter().map(|pause| format!("  {}", pause.text())));
        text.push(format!("{:<22}{:>8}", "services down", outages.len()));
        text.extend(outages.iter().map(|down| format!("  {}", down.text())));
        crate::redact::print(&text.join("\n"));
    }
    Ok(Exit::Success)
}

/// `{"pending":0,…,"needs_reconciliation":0,"total":0}`.
fn counts_object(counts: &Counts) -> serde_json::Value {
    let mut object = serde_json::Map::new();
    for state in JobState::ALL {
        object.insert(state.as_str().to_owned(), counts.of(state).into());
    }
    object.insert("total".to_owned(), counts.total().into());
    serde_json::Value::Object(object)
}

/// `outbox list`: one page, and the cursor of the next on standard error (`--json`: `next`).
async fn list(
    outbox: &Outbox,
    state: Option<JobState>,
    after: Option<&Cursor>,
    limit: usize,
    json: bool,
) -> Result<Exit, Report> {
    let (jobs, next) = outbox
        .list_page(state, after, limit)
        .await
        .map_err(|e| Report::failed(&e))?;
    let lines: Vec<JobLine> = jobs.iter().map(JobLine::of).collect();
    let next = next.map(|cursor| cursor.to_string());
    if json {
        crate::redact::print_json(&serde_json::json!({ "jobs": lines, "next": next }));
    } else {
        let mut text = vec![JobLine::HEADER.to_owned()];
        text.extend(lines.iter().map(JobLine::text));
        crate::redact::print(&text.join("\n"));
        if let Some(next) = next {
            crate::redact::eprint(&format!(
                "more jobs follow: the next page is --after {next}"
            ));
        }
    }
    Ok(Exit::Success)
}

/// `outbox retry EVENT_ID`.
async fn retry(outbox: &Outbox, event_id: &str, json: bool) -> Result<Exit, Report> {
    let (job, was) = match crate::requeue::requeue(outbox, event_id).await {
        Ok(done) => done,
        Err(crate::requeue::Refused::Store(error)) => return Err(Report::failed(&error)),
        Err(refused @ crate::requeue::Refused::NotFound) => {
            return Err(Report::failure(Failure::permanent(
                "not_found",
                false,
                refused.sentence(event_id),
            )));
        }
        Err(refused) => {
            return Err(Report::failure(Failure::permanent(
                "unprocessable",
                false,
                refused.sentence(event_id),
            )));
        }
    };
    if was == JobState::NeedsReconciliation {
        crate::redact::eprint(&format!(
            "warning: {} reached its deduplication horizon without a definite answer; \
             requeued as asked, with its horizon started again: if the server ran it, this \
             send may start a second run",
            crate::sanitize::field(event_id)
        ));
    }
    let line = JobLine::of(&job);
    if json {
        crate::redact::print_json(&line);
    } else {
        crate::redact::print(&format!(
            "requeued {}: {}, due {}",
            crate::sanitize::field(event_id),
            line.state,
            line.next_attempt_at.as_deref().unwrap_or("now")
        ));
    }
    Ok(Exit::Success)
}

/// One event of a batch.
#[derive(Debug)]
pub(crate) struct BatchEvent {
    pub(crate) event_id: String,
    pub(crate) body: Vec<u8>,
}

/// `batch --outbox`: stores the events, delivers them, and reports each. A failure before the
/// events' lines (the store refused them, or could not read them back) is one report, a JSON
/// object with `json`.
pub(crate) async fn batch(
    pool: Pool,
    trigger: Secret,
    events: Vec<BatchEvent>,
    started: Instant,
    json: bool,
) -> Exit {
    let total = events.len();
    let outbox = pool.outbox.clone();
    // Store every event first: a crash from here on loses nothing.
    let mut stored_now = 0;
    let mut kept: Vec<String> = Vec::new();
    let target = Target::webhook(trigger);
    let order: Vec<String> = events.iter().map(|e| e.event_id.clone()).collect();
    let enqueued = each(events, |event| {
        let outbox = outbox.clone();
        let target = target.clone();
        async move {
            let (job, new) = outbox
                .enqueue_new(&event.event_id, target.clone(), event.body.clone())
                .await?;
            let other =
                !new && (job.body.as_ref() != event.body.as_slice() || job.target != target);
            Ok::<_, hodoflow_retry::Error>((event.event_id, new, other))
        }
    })
    .await;
    let mut refused = None;
    for result in enqueued {
        match result {
            Ok((_, true, _)) => stored_now += 1,
            Ok((event_id, false, other)) => {
                if other {
                    kept.push(event_id);
                }
            }
            Err(error) => refused = Some(error),
        }
    }
    if let Some(error) = refused {
        crate::redact::eprint(&not_all_stored(&error, stored_now, total));
        return finish(Report::failed(&error), started, json);
    }
    crate::redact::eprint(&format!(
        "batch: {total} events in the outbox: {stored_now} stored now, {} already there",
        total - stored_now
    ));
    if !kept.is_empty() {
        crate::redact::eprint(&crate::events::quoted(
            &format!(
                "batch: {} event(s) were already in the outbox with another body or trigger; \
                 the stored job is kept (one event ID, one delivery): ",
                kept.len()
            ),
            &kept,
        ));
    }
    let ids: Arc<HashSet<String>> = Arc::new(order.iter().cloned().collect());
    let ended = match pool.run(Until::Settled(Arc::clone(&ids)), false).await {
        Ok(ended) => Some(ended),
        Err(error) => {
            crate::redact::eprint(&format!(
                "batch: the workers stopped: {}",
                crate::redact::text(&error.to_string())
            ));
            None
        }
    };
    let jobs = match fetch(&outbox, &order).await {
        Ok(jobs) => jobs,
        Err(error) => {
            crate::redact::eprint(
                "batch: the jobs could not be read back: their events are stored; run the \
                 same command again to read them (nothing is stored or sent twice)",
            );
            let report = Report::failed(&error);
            finish(report, started, json);
            return Exit::Retryable;
        }
    };
    let mut counts = Counts::default();
    let mut worst = Exit::Success;
    let mut to_reconcile: HashMap<JobState, Vec<String>> = HashMap::new();
    for event_id in &order {
        let Some(job) = jobs.get(event_id) else {
            continue;
        };
        crate::redact::print_json(&JobLine::of(job));
        counts_add(&mut counts, job.state);
        let exit = match job.state {
            state if delivered(state) => Exit::Success,
            JobState::Pending | JobState::InFlight => Exit::Retryable,
            _ => Exit::Permanent,
        };
        if exit.severity() > worst.severity() {
            worst = exit;
        }
        if matches!(
            job.state,
            JobState::Duplicate | JobState::NeedsReconciliation | JobState::Failed
        ) {
            to_reconcile
                .entry(job.state)
                .or_default()
                .push(crate::sanitize::field(event_id).into_owned());
        }
    }
    if ended.is_none() && worst == Exit::Success {
        worst = Exit::Retryable;
    }
    let states: Vec<String> = JobState::ALL
        .iter()
        .filter(|state| **state != JobState::Done)
        .map(|state| format!("{state} {}", counts.of(*state)))
        .collect();
    let mut summary = format!("batch: {total} events: {}", states.join(", "));
    if let Some(ended) = &ended {
        summary.push_str(&format!(
            "; this run {}; {} ms",
            crate::pool::report_text(&ended.report),
            crate::report::millis(started.elapsed())
        ));
        if ended.signalled {
            summary.push_str("\nstopped by a signal");
        }
    }
    for (state, why) in [
        (
            JobState::NeedsReconciliation,
            "no definite answer before the deduplication horizon: not sent again; find out \
             whether the server ran them",
        ),
        (
            JobState::Duplicate,
            "accepted on an attempt whose answer was lost: one run each, its run ID unknown here",
        ),
        (
            JobState::Failed,
            "stopped on a permanent error: `hodoflow-send outbox list --state failed` shows why",
        ),
    ] {
        if let Some(events) = to_reconcile.get(&state) {
            summary.push_str(&format!(
                "\nto reconcile, {state} ({}; {why}): {}",
                events.len(),
                events.join(", ")
            ));
        }
    }
    if worst == Exit::Retryable {
        summary.push_str(
            "\nsome events are still pending or in flight: run the same command again later \
             (nothing is stored twice, nothing is sent under a second ID)",
        );
    }
    crate::redact::eprint(&summary);
    worst
}

/// What standard error says when `error` kept the events of a batch of `total` from being all
/// stored, `stored` of them stored now: what is in the outbox, and what a rerun does.
fn not_all_stored(error: &hodoflow_retry::Error, stored: usize, total: usize) -> String {
    let why = crate::redact::text(&error.to_string()).into_owned();
    let what = match stored {
        0 => format!("batch: no event was stored ({why}); nothing was sent"),
        _ => format!(
            "batch: {stored} of {total} events were stored before the store refused one ({why}); \
             they stay stored, and nothing was sent"
        ),
    };
    let rerun = if error.is_retryable() {
        "run the same command again: nothing is stored twice"
    } else {
        "a rerun fails the same way until that is fixed"
    };
    format!("{what}; {rerun}")
}

fn counts_add(counts: &mut Counts, state: JobState) {
    let one = |count: &mut u64| *count += 1;
    match state {
        JobState::Pending => one(&mut counts.pending),
        JobState::InFlight => one(&mut counts.in_flight),
        JobState::Accepted => one(&mut counts.accepted),
        JobState::Duplicate => one(&mut counts.duplicate),
        JobState::Done => one(&mut counts.done),
        JobState::Failed => one(&mut counts.failed),
        _ => one(&mut counts.needs_reconciliation),
    }
}

/// The jobs of `event_ids`.
async fn fetch(
    outbox: &Outbox,
    event_ids: &[String],
) -> Result<HashMap<String, Job>, hodoflow_retry::Error> {
    let found = each(event_ids.to_vec(), |event_id| {
        let outbox = outbox.clone();
        async move { outbox.job(&event_id).await }
    })
    .await;
    let mut jobs = HashMap::new();
    for job in found {
        if let Some(job) = job? {
            jobs.insert(job.event_id.clone(), job);
        }
    }
    Ok(jobs)
}

/// `work` on each item, [`STORE_CONCURRENCY`] at a time; results in no particular order.
async fn each<T, R, F, Fut>(items: Vec<T>, work: F) -> Vec<R>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = R> + Send + 'static,
{
    let mut running = JoinSet::new();
    let mut results = Vec::with_capacity(items.len());
    let settle = |joined: Result<R, tokio::task::JoinError>| match joined {
        Ok(result) => result,
        // A bug: let the panic hook report it, as for any panic outside an operation.
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(error) => panic!("a store task was cancelled: {error}"),
    };
    for item in items {
        if running.len() >= STORE_CONCURRENCY
            && let Some(joined) = running.join_next().await
        {
            results.push(settle(joined));
        }
        running.spawn(work(item));
    }
    while let Some(joined) = running.join_next().await {
        results.push(settle(joined));
    }
    results
}

/// The tokens of the worker's `--trigger-token`s: the jobs store references only, which these
/// resolve.
///
/// # Errors
///
/// A sentence for the user (exit 2), never quoting the token.
fn trigger_tokens(given: &[String]) -> Result<Vec<hodoflow_retry::Secret>, String> {
    given
        .iter()
        .filter(|text| !text.trim().is_empty())
        .map(|text| crate::trigger::Trigger::token_of(text))
        .collect()
}
