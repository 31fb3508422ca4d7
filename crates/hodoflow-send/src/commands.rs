//! Each command: check its input, send through the SDK, and report.
//!
//! Input is checked before the client is built, so a usage error sends nothing, not even a
//! token exchange. The key or delivery ID of `write`, `webhook` and `rehearse` follows the one
//! rule of `identity.rs`: given, derived from `--event-id`, or generated and announced on
//! standard error, with the command that resends under it, before the first attempt.
//!
//! The operation runs in a task of its own, so a panic under it (a bug here or in the SDK) is
//! reported as an `internal` failure, exit 3 with the key to retry with, not as exit 101 and
//! no report.

use std::time::Instant;

use std::ffi::OsString;

use hodoflow_retry::{
    DeliveryId, Error, HodoflowClient, IdempotencyKey, Response,
    webhook::{Delivery, RunState},
};

use crate::cli::{self, Cli, Command};
use crate::identity::{Identity, Operation};
use crate::report::{Exit, Failure, FirstDelivery, Outcome, Report, finish, with_command_fields};
use crate::trigger::{Trigger, deliver};

/// Runs the command line, parsed from `args` (the program first), and returns how the process
/// ends.
pub(crate) async fn run(cli: Cli, args: &[OsString]) -> Exit {
    let started = Instant::now();
    let json = cli.json;
    if let Command::Modulify(modulify) = &cli.command {
        return crate::modulify::run(&cli, modulify, args).await;
    }
    if let Command::Outbox(outbox) = &cli.command {
        return crate::outbox::run(&cli, outbox).await;
    }
    if let Command::Batch(batch) = &cli.command {
        return match crate::batch::prepare(&cli, batch) {
            Ok(prepared) => prepared.run().await,
            Err(message) => finish(
                Report::failure(Failure::invalid_input(message)),
                started,
                json,
            ),
        };
    }
    let report = match prepare(&cli, args) {
        Ok(prepared) => {
            if let Some(announcement) = &prepared.announcement {
                crate::redact::eprint(announcement);
            }
            let key = prepared.action.key();
            match tokio::spawn(prepared.send()).await {
                Ok(report) => report,
                Err(error) => {
                    let report =
                        Report::failure(Failure::internal(&crate::internal::describe(error)));
                    match key {
                        Some(key) => report.with_key(&key),
                        None => report,
                    }
                }
            }
        }
        Err(message) => Report::failure(Failure::invalid_input(message)),
    };
    finish(
        with_command_fields(report, cli.command.name()),
        started,
        json,
    )
}

/// A command whose input was checked, ready to send.
#[derive(Debug)]
struct Prepared {
    client: HodoflowClient,
    action: Action,
    /// The generated key or delivery ID and how to resend with it, for standard error.
    announcement: Option<String>,
}

/// What to send.
#[derive(Debug)]
enum Action {
    /// `webhook`, or `rehearse` when `rehearse` is set.
    Deliver {
        trigger: Trigger,
        body: Vec<u8>,
        id: DeliveryId,
        rehearse: bool,
    },
    /// `write`.
    Write {
        method: http::Method,
        path: String,
        key: IdempotencyKey,
        body: Vec<u8>,
    },
    /// `get`.
    Get { path: String },
    /// `graphql`.
    GraphQl {
        query: String,
        variables: serde_json::Value,
    },
    /// `follow`.
    Follow { run_id: String },
}

impl Action {
    /// The key or delivery ID the action sends, known before it is sent.
    fn key(&self) -> Option<String> {
        match self {
            Self::Deliver { id, .. } => Some(id.key().as_str().to_owned()),
            Self::Write { key, .. } => Some(key.as_str().to_owned()),
            Self::Get { .. } | Self::GraphQl { .. } | Self::Follow { .. } => None,
        }
    }
}

/// Checks every input and builds the client, or says what is wrong. `args` is the command line,
/// the program first, for the announcement of a generated key.
fn prepare(cli: &Cli, args: &[OsString]) -> Result<Prepared, String> {
    let (action, trigger_base, identity, signing) = match &cli.command {
        Command::Webhook(delivery) | Command::Rehearse(delivery) => {
            let rehearse = matches!(cli.command, Command::Rehearse(_));
            let trigger = Trigger::parse(&delivery.trigger)?;
            let identity = delivery_identity(delivery)?;
            let body = crate::body::read(delivery.data.as_deref())?;
            let base = trigger.base_url.clone();
            let action = Action::Deliver {
                trigger,
                body,
                id: DeliveryId::new(identity.key.clone()),
                rehearse,
            };
            let signing = Some(&delivery.signing);
            (action, base, Some((identity, &delivery.data)), signing)
        }
        Command::Write(write) => {
            let (action, identity) = write_action(write)?;
            (action, None, Some((identity, &write.data)), None)
        }
        Command::Get { path } => (Action::Get { path: path.clone() }, None, None, None),
        Command::Graphql { query, variables } => {
            let variables = match variables {
                None => serde_json::json!({}),
                Some(text) => match serde_json::from_str(text) {
                    Ok(value @ serde_json::Value::Object(_)) => value,
                    Ok(_) => return Err("--variables must be a JSON object".to_owned()),
                    Err(e) => {
                        let e = crate::body::json_error(&e);
                        return Err(format!("--variables is not JSON: {e}"));
                    }
                },
            };
            let action = Action::GraphQl {
                query: query.clone(),
                variables,
            };
            (action, None, None, None)
        }
        Command::Follow { run_id } => (
            Action::Follow {
                run_id: run_id.clone(),
            },
            None,
            None,
            None,
        ),
        Command::Batch(_) => unreachable!("batch is prepared by batch.rs"),
        Command::Modulify(_) => unreachable!("modulify is prepared by modulify.rs"),
        Command::Outbox(_) => unreachable!("outbox is run by outbox.rs"),
    };
    let client = crate::client::build(cli, trigger_base.as_deref(), signing)?;
    // Only now, when nothing can refuse the command any more: an ID announced must be sent.
    let announcement = identity
        .and_then(|(identity, data)| identity.announcement(args, data.as_deref() == Some("@-")));
    Ok(Prepared {
        client,
        action,
        announcement,
    })
}

/// The delivery ID of `webhook` and `rehearse`: given, derived, or generated (see `identity.rs`).
fn delivery_identity(delivery: &cli::Delivery) -> Result<Identity, String> {
    Identity::resolve(
        Operation::Delivery,
        delivery.delivery_id.as_deref(),
        delivery.event_id.as_deref(),
    )
}

/// The write's key: given, derived, or generated (see `identity.rs`).
fn write_action(write: &cli::Write) -> Result<(Action, Identity), String> {
    let identity = Identity::resolve(
        Operation::Write,
        write.key.as_deref(),
        write.event_id.as_deref(),
    )?;
    let action = Action::Write {
        method: write.method.method(),
        path: write.path.clone(),
        key: identity.key.clone(),
        body: crate::body::read(write.data.as_deref())?,
    };
    Ok((action, identity))
}

impl Prepared {
    /// Sends the action and reports.
    async fn send(self) -> Report {
        let client = &self.client;
        match self.action {
            Action::Deliver {
                trigger,
                body,
                id,
                rehearse: false,
            } => delivered(deliver(client, &trigger, body, &id, None).await, &id),
            Action::Deliver {
                trigger,
                body,
                id,
                rehearse: true,
            } => rehearse(client, &trigger, body, &id).await,
            Action::Write {
                method,
                path,
                key,
                body,
            } => {
                let sent = client.write(method, &path, key.clone(), body).send().await;
                answered(sent, true).with_key(key.as_str())
            }
            Action::Get { path } => answered(client.get(&path).send().await, false),
            Action::GraphQl { query, variables } => {
                answered(client.graphql(&query, variables).send().await, false)
            }
            Action::Follow { run_id } => follow(client, &run_id).await,
        }
    }
}

/// The report of a delivery.
fn delivered(result: Result<Delivery, Error>, id: &DeliveryId) -> Report {
    let key = id.key().as_str();
    match result {
        Ok(delivery) => {
            let outcome = if delivery.is_duplicate() {
                Outcome::Duplicate
            } else {
                Outcome::Accepted
            };
            Report {
                workflow_run_id: delivery.run_id().map(redacted),
                ..Report::success(outcome, delivery.attempts())
            }
            .with_key(key)
        }
        Err(error) => Report::failed(&error).with_key(key),
    }
}

/// Delivers, then resends with the same delivery ID: success only when the resend is answered
/// `duplicate`. The report describes the step that decided; `first_*` the first delivery.
async fn rehearse(
    client: &HodoflowClient,
    trigger: &Trigger,
    body: Vec<u8>,
    id: &DeliveryId,
) -> Report {
    let first = deliver(client, trigger, body.clone(), id, None).await;
    let first_report = delivered(first, id);
    if first_report.error.is_some() {
        let attempts = first_report.attempts.clone();
        return Report {
            attempts: Vec::new(),
            first: Some(FirstDelivery {
                first_outcome: Some(first_report.outcome),
                first_workflow_run_id: None,
                first_attempts: attempts,
            }),
            ..first_report
        };
    }
    let first = FirstDelivery {
        first_outcome: Some(first_report.outcome),
        first_workflow_run_id: first_report.workflow_run_id,
        first_attempts: first_report.attempts,
    };
    let mut second = delivered(deliver(client, trigger, body, id, None).await, id);
    if second.outcome == Outcome::Accepted {
        let run = second
            .workflow_run_id
            .as_deref()
            .unwrap_or("with an unreadable ID");
        second.outcome = Outcome::Error;
        second.error = Some(Failure::permanent(
            "unprocessable",
            true,
            format!(
                "rehearsal failed: the resend with the same delivery ID was accepted as new work \
                 (a second run {run}); the server does not deduplicate this trigger"
            ),
        ));
    }
    Report {
        first: Some(first),
        ..second
    }
}

/// The report of a write, read or query.
fn answered(result: Result<Response, Error>, write: bool) -> Report {
    match result {
        Ok(response) => {
            let outcome = if write && response.replayed() {
                Outcome::Replayed
            } else {
                Outcome::Ok
            };
            Report {
                status: Some(response.status().as_u16()),
                body: Some(Report::body_of(response.body())),
                ..Report::success(outcome, response.attempts())
            }
        }
        Err(error) => Report {
            body: error.body().map(|body| Report::body_of(body)),
            ..Report::failed(&error)
        },
    }
}

/// Follows a run: success only when it succeeds; a failed or cancelled run is a permanent
/// failure of what was asked for.
async fn follow(client: &HodoflowClient, run_id: &str) -> Report {
    let run = match client.follow_run(run_id).send().await {
        Ok(run) => run,
        Err(error) => {
            return Report {
                workflow_run_id: Some(run_id.to_owned()),
                ..Report::failed(&error)
            };
        }
    };
    let state = run.state().as_str();
    let run_id = redacted(run.id());
    let mut report = Report {
        workflow_run_id: Some(run_id.clone()),
        state: Some(Some(state)),
        ..Report::success(Outcome::Ok, run.attempts())
    };
    if *run.state() != RunState::Succeeded {
        report.outcome = Outcome::Error;
        report.error = Some(Failure::permanent(
            "unprocessable",
            false,
            format!(
                "workflow run {run_id} ended {state} after {} polls",
                run.polls()
            ),
        ));
    }
    report
}

/// `value`, a server's, with every known secret in it redacted, as it enters a report.
fn redacted(value: &str) -> String {
    crate::redact::text(value).into_owned()
}
