//! `modulify`: call Modulify (`docs/wire-contract.md`, "Modulify") and print its catalogue.
//!
//! Modulify is a second API with its own base URL (`--base-url` or `MODULIFY_BASE_URL`, never
//! `HODOFLOW_BASE_URL`) and a static API token (`--token-file` or `MODULIFY_TOKEN`, read by
//! `secret.rs` and redacted like the client secret; there is no exchange). The global budget
//! options apply; the Hodoflow credentials do not.
//!
//! `call` reads the catalogue (`GET /v1/tools`) once, before the method is sent, because the
//! catalogue decides the key: a read-only method goes without one; every other method goes
//! with the key given (`--key`), derived (`--event-id`) or generated, the same on every
//! attempt. So a generated key is announced on standard error, with the command that resends
//! under it, after the catalogue was read and before the method's first attempt, and only when
//! it is sent. A method the catalogue lacks (after one refresh) is refused before it is sent,
//! exit 2. The SDK's `ModulifyClient` shares the catalogue it read, so the call does not read it
//! again.
//!
//! `call` reports the fields of `write` (the answer's whole body as `body`) plus `data` (the
//! answer's `data`) and `answer_kept`: `false` for a replay whose original answer was over 1 MB
//! and not kept, where `data` is `null` and the caller must read the current state.

use std::ffi::OsString;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use clap::CommandFactory as _;
use clap::parser::ValueSource;
use hodoflow_retry::{
    Budget, Error, ModulifyClient,
    modulify::{Effect, MethodAnswer, ModulifyOutcome},
};
use serde::Serialize;

use crate::base_url::BaseUrl;
use crate::cli::{self, Cli, MethodCall, ModulifyCommand};
use crate::identity::{Identity, Operation};
use crate::report::{Exit, Failure, Outcome, Report};

/// Runs `modulify`, parsed from `args` (the program first), and returns how the process ends.
pub(crate) async fn run(cli: &Cli, modulify: &cli::Modulify, args: &[OsString]) -> Exit {
    let started = Instant::now();
    let json = cli.json;
    let name = format!("modulify {}", modulify.command.name());
    let report = match &modulify.command {
        ModulifyCommand::Tools => match client(cli, modulify, args) {
            Ok(client) => match tools(client, json).await {
                Ok(()) => return Exit::Success,
                Err(report) => report,
            },
            Err(message) => Report::failure(Failure::invalid_input(message)),
        },
        ModulifyCommand::Call(call) => match prepare(cli, modulify, call, args) {
            Ok(prepared) => {
                let sent = Arc::clone(&prepared.sent);
                match tokio::spawn(prepared.send()).await {
                    Ok(report) => report,
                    Err(error) => {
                        let report =
                            Report::failure(Failure::internal(&crate::internal::describe(error)));
                        match sent.get() {
                            Some(key) => report.with_key(key),
                            None => report,
                        }
                    }
                }
            }
            Err(message) => Report::failure(Failure::invalid_input(message)),
        },
    };
    crate::report::finish(
        crate::report::with_command_fields(report, &name),
        started,
        json,
    )
}

/// The Modulify client the options describe: base URL, token and the global budget.
///
/// # Errors
///
/// A sentence for the user, with no secret in it, when an option is missing or refused.
fn client(
    cli: &Cli,
    modulify: &cli::Modulify,
    args: &[OsString],
) -> Result<ModulifyClient, String> {
    let what = "--base-url (MODULIFY_BASE_URL)";
    let base_url = base_url(modulify, args)
        .ok_or("no Modulify base URL: pass modulify --base-url URL or set MODULIFY_BASE_URL")?;
    build(cli, base_url, what, modulify.token_file.as_deref())
}

/// A Modulify client of `base_url` (its option named `what` in errors), its token from
/// `token_file` or `MODULIFY_TOKEN`, under the global budget; for `modulify` and for the
/// Modulify jobs of `outbox worker`.
///
/// # Errors
///
/// A sentence for the user, with no secret in it, when the URL or the token is refused.
pub(crate) fn build(
    cli: &Cli,
    base_url: &str,
    what: &str,
    token_file: Option<&std::path::Path>,
) -> Result<ModulifyClient, String> {
    let base_url = BaseUrl::parse(base_url, what)?;
    let token = crate::secret::modulify_token(token_file)?;
    let budget = Budget::new()
        .max_attempts(cli.max_attempts)
        .paced_retries(cli.paced_retries)
        .max_elapsed(cli.max_elapsed)
        .attempt_timeout(cli.attempt_timeout);
    ModulifyClient::builder(base_url.as_str())
        .bearer_token(token)
        .budget(budget)
        .build()
        .map_err(|e| e.to_string())
}

/// The base URL text: `--base-url` when it was typed (on either side of `modulify`), else
/// `MODULIFY_BASE_URL`. clap may have filled the field from `HODOFLOW_BASE_URL` (see
/// `cli::Modulify`), so where the value came from is asked of a parse of `args`.
fn base_url<'a>(modulify: &'a cli::Modulify, args: &[OsString]) -> Option<&'a str> {
    let typed = Cli::command()
        .try_get_matches_from(args)
        .ok()
        .and_then(|matches| {
            matches
                .subcommand_matches("modulify")
                .and_then(|m| m.value_source("base_url"))
        })
        == Some(ValueSource::CommandLine);
    if typed || std::env::var_os(cli::MODULIFY_BASE_URL).is_some() {
        modulify.base_url.as_deref()
    } else {
        None
    }
}

/// `tools`: prints the catalogue, or returns the report of why it could not be read.
async fn tools(client: ModulifyClient, json: bool) -> Result<(), Report> {
    let catalogue = client.tools().await.map_err(|e| Report::failed(&e))?;
    // The catalogue is the server's text: redacted as it enters the listing.
    let tools: Vec<ToolLine> = catalogue
        .tools()
        .iter()
        .map(|tool| ToolLine {
            name: crate::redact::text(tool.name()).into_owned(),
            effect: tool.effect().as_str(),
            description: crate::redact::text(tool.description()).into_owned(),
        })
        .collect();
    if json {
        crate::redact::print_json(&Tools { tools });
        return Ok(());
    }
    let width = tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
    let lines: Vec<String> = tools
        .iter()
        .map(|t| {
            format!(
                "{:width$}  {:11}  {}",
                crate::sanitize::field(&t.name),
                t.effect,
                crate::sanitize::field(t.description.lines().next().unwrap_or(""))
            )
        })
        .collect();
    crate::redact::print(&lines.join("\n"));
    Ok(())
}

/// What `tools --json` prints.
#[derive(Debug, Serialize)]
struct Tools {
    tools: Vec<ToolLine>,
}

/// One method of the catalogue.
#[derive(Debug, Serialize)]
struct ToolLine {
    name: String,
    effect: &'static str,
    /// For the human table only.
    #[serde(skip)]
    description: String,
}

/// A `call` whose input was checked, ready to read the catalogue and send.
#[derive(Debug)]
struct Prepared {
    client: ModulifyClient,
    method: String,
    body: Vec<u8>,
    identity: Identity,
    /// The key once it is known to be sent, for the report of a panic.
    sent: Arc<OnceLock<String>>,
    /// The announcement of a generated key, if the key is sent.
    announcement: Option<String>,
    /// Whether the key was given (`--key`) or derived (`--event-id`) rather than generated.
    key_asked_for: bool,
}

/// Checks the input of `call` and builds the client, or says what is wrong. Nothing is sent.
fn prepare(
    cli: &Cli,
    modulify: &cli::Modulify,
    call: &MethodCall,
    args: &[OsString],
) -> Result<Prepared, String> {
    if call.method.trim().is_empty() {
        return Err("the method is empty: name one, such as send_message".to_owned());
    }
    let identity = Identity::resolve(
        Operation::Write,
        call.key.as_deref(),
        call.event_id.as_deref(),
    )?;
    let body = match call.data.as_deref() {
        None => b"{}".to_vec(),
        data => crate::body::read(data)?,
    };
    // The SDK refuses any other body before sending, but only after the catalogue was read and
    // a generated key announced; checked here, nothing is read or announced for it.
    if let Err(e) = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&body) {
        return Err(format!(
            "--data must be a JSON object ({}); nothing was sent",
            crate::body::json_error(&e)
        ));
    }
    let client = client(cli, modulify, args)?;
    let announcement = identity.announcement(args, call.data.as_deref() == Some("@-"));
    Ok(Prepared {
        client,
        method: call.method.clone(),
        body,
        key_asked_for: call.key.is_some() || call.event_id.is_some(),
        identity,
        sent: Arc::new(OnceLock::new()),
        announcement,
    })
}

impl Prepared {
    /// Reads the catalogue, decides the key, sends, and reports.
    async fn send(self) -> Report {
        let catalogue = match self.client.tools().await {
            Ok(catalogue) => catalogue,
            Err(error) => return Report::failed(&error),
        };
        let mut effect = catalogue.get(&self.method).map(|tool| tool.effect());
        if effect.is_none() {
            effect = match self.client.refresh_tools().await {
                Ok(catalogue) => catalogue.get(&self.method).map(|tool| tool.effect()),
                Err(error) => return Report::failed(&error),
            };
        }
        let Some(effect) = effect else {
            return Report::failure(Failure::invalid_input(format!(
                "the catalogue (GET /v1/tools) has no method {}: nothing was sent",
                self.method
            )));
        };
        let mut calling = self.client.call(&self.method, self.body);
        let key = if matches!(effect, Effect::Read) {
            if self.key_asked_for {
                crate::redact::eprint(&format!(
                    "{} only reads (the catalogue's readOnlyHint): it is sent without a key",
                    self.method
                ));
            }
            None
        } else {
            let key = self.identity.key.clone();
            let _ = self.sent.set(key.as_str().to_owned());
            if let Some(announcement) = &self.announcement {
                crate::redact::eprint(announcement);
            }
            calling = calling.key(key.clone());
            Some(key)
        };
        let report = answered(calling.send().await);
        match key {
            Some(key) => report.with_key(key.as_str()),
            None => report,
        }
    }
}

/// The report of a method call.
fn answered(result: Result<MethodAnswer, Error>) -> Report {
    match result {
        Ok(answer) => {
            let outcome = match answer.outcome() {
                ModulifyOutcome::Replayed | ModulifyOutcome::ReplayedWithoutAnswer => {
                    Outcome::Replayed
                }
                _ => Outcome::Ok,
            };
            Report {
                status: Some(answer.status().as_u16()),
                body: Some(Report::body_of(answer.body())),
                data: Some(crate::redact::json(
                    answer.data().unwrap_or(serde_json::Value::Null),
                )),
                answer_kept: Some(Some(answer.answer_kept())),
                ..Report::success(outcome, answer.attempts())
            }
        }
        Err(error) => Report {
            body: error.body().map(|body| Report::body_of(body)),
            ..Report::failed(&error)
        },
    }
}
