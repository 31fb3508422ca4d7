//! `outbox enqueue --events FILE`: store a file of jobs (`job_file.rs`) in an outbox, for
//! `outbox worker` to deliver.
//!
//! The whole file is read and checked before the store is opened: one bad line is exit 2, and
//! nothing is stored or created. Then the jobs are stored in batches of `--batch-size` (10,000
//! by default), each one `Outbox::enqueue_many` call: one transaction, stored whole or not at
//! all. A store that fails midway leaves the batches before it stored; since an event ID already
//! stored is a no-op, running the same command again stores what is missing and nothing twice.
//! So is a rerun after success: it stores nothing new.
//!
//! Standard output says how many jobs were stored now and how many were there already
//! (`--json`: one object, `{"jobs":…,"stored":…,"already":…,"merged":…,"batches":…}`).
//! An event already stored with another job (body or target) keeps the stored one, and
//! standard error names it. Nothing printed holds a trigger token or a body.

use hodoflow_outbox::{Outbox, Target};
use serde::Serialize;

use crate::job_file::{FileJob, JobFile};
use crate::report::{Exit, Report};

/// What standard output says.
#[derive(Debug, Serialize)]
struct Summary {
    /// Jobs in the file (lines merged into an earlier one not counted).
    jobs: usize,
    /// Stored by this run.
    stored: usize,
    /// In the outbox already.
    already: usize,
    /// Lines that repeated an earlier line's job.
    merged: usize,
    /// `enqueue_many` transactions.
    batches: usize,
}

/// Reads and checks the file of `args`, before any store is opened.
///
/// # Errors
///
/// A sentence for the user (exit 2): a trigger token that cannot be one, an unreadable file, or
/// the file's bad lines. It never quotes the token.
pub(crate) fn prepare(args: &crate::cli::Enqueue) -> Result<JobFile, String> {
    let trigger = match args.trigger_token.as_deref() {
        Some(text) => Some(crate::trigger::Trigger::token_of(text)?),
        None => None,
    };
    let text = crate::body::read_file_or_stdin(&args.events, "--events")?;
    crate::job_file::parse(&text, trigger.as_ref())
}

/// Stores `file` in `outbox`, `batch_size` jobs a transaction, and prints the summary.
///
/// # Errors
///
/// The store's failure, after standard error said how many batches were stored before it.
pub(crate) async fn run(
    outbox: &Outbox,
    file: JobFile,
    batch_size: usize,
    json: bool,
) -> Result<Exit, Report> {
    let JobFile { jobs, merged } = file;
    let total = jobs.len();
    let mut summary = Summary {
        jobs: total,
        stored: 0,
        already: 0,
        merged,
        batches: 0,
    };
    let mut kept = Vec::new();
    let mut jobs = jobs.into_iter().peekable();
    while jobs.peek().is_some() {
        let batch: Vec<FileJob> = jobs.by_ref().take(batch_size.max(1)).collect();
        let asked: Vec<(Target, Vec<u8>)> = batch
            .iter()
            .map(|job| (job.target.clone(), job.body.clone()))
            .collect();
        let events = batch
            .into_iter()
            .map(|job| (job.event_id, job.target, job.body));
        let stored = outbox.enqueue_many(events).await.map_err(|error| {
            crate::redact::eprint(&batch_failed(&error, &summary));
            Report::failed(&error)
        })?;
        summary.batches += 1;
        for ((job, now), (target, body)) in stored.iter().zip(&asked) {
            crate::job_line::remember_secret(job);
            if *now {
                summary.stored += 1;
            } else {
                summary.already += 1;
                if job.target != *target || job.body.as_ref() != body.as_slice() {
                    kept.push(job.event_id.clone());
                }
            }
        }
    }
    if !kept.is_empty() {
        crate::redact::eprint(&crate::events::quoted(
            &format!(
                "outbox enqueue: {} event(s) were already in the outbox with another job; the \
                 stored job is kept (one event ID, one job): ",
                kept.len()
            ),
            &kept,
        ));
    }
    if json {
        crate::redact::print_json(&summary);
    } else {
        let mut text = format!(
            "outbox enqueue: {total} job(s): {} stored now, {} already there ({} batch(es))",
            summary.stored, summary.already, summary.batches
        );
        if merged > 0 {
            text.push_str(&format!(
                "; {merged} line(s) repeated an earlier line's job and were merged into it"
            ));
        }
        crate::redact::print(&text);
    }
    Ok(Exit::Success)
}

/// What standard error says when batch `summary.batches + 1` failed with `error`: what the
/// batches before it stored, and what running the same command again does.
fn batch_failed(error: &hodoflow_retry::Error, summary: &Summary) -> String {
    let why = crate::redact::text(&error.to_string()).into_owned();
    let before = match summary.batches {
        0 => "nothing was stored".to_owned(),
        batches => format!(
            "the {} job(s) of the {batches} batch(es) before it are stored",
            summary.stored + summary.already
        ),
    };
    let rerun = if error.is_retryable() {
        "run the same command again (nothing is stored twice)"
    } else {
        "a rerun fails the same way until that is fixed"
    };
    format!(
        "outbox enqueue: batch {} failed ({why}); {before}; {rerun}",
        summary.batches + 1
    )
}
