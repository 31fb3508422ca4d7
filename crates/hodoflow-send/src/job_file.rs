//! The JSON-lines file of `outbox enqueue`: one job a line, naming its kind like the SDK's
//! `Target`, read and checked whole before anything is stored.
//!
//! ```text
//! {"kind":"webhook","event_id":"order-1:shipped","body":{"order":1}}
//! {"kind":"write","method":"POST","path":"/api/json/v1/projects","event_id":"p-1","body":{…}}
//! {"kind":"modulify","method":"send_message","event_id":"m-1","body":{"to":"…"}}
//! ```
//!
//! - `event_id`: the producer's ID of the event; the job's delivery ID or `Idempotency-Key` is
//!   derived from it, as `--event-id` derives it.
//! - The body is either `body`, any JSON value but `null`, stored byte for byte as it stands in
//!   the line (never parsed and written again: `{ "a": 1 }` stays with its spaces), or
//!   `body_text`, a JSON string whose text is the body (for a webhook body that is not JSON).
//!   One of the two, not both.
//! - A webhook line never holds the trigger token: it is a secret, and a file of events is copied
//!   and kept where a secret must not be. The token comes from `--trigger-token` or
//!   `HODOFLOW_TRIGGER_TOKEN`, and a line with a `trigger_token` field refuses the file (without
//!   quoting it).
//! - Other fields are ignored, as in `batch`'s file.
//!
//! Every line is checked with the SDK's own checks (`Outbox::check`: the event ID, the body's
//! size, the trigger token, a write's method and `/api/json/` path, a Modulify method), and an
//! event ID on two lines must come with the same job on both (then the second is merged into the
//! first, as `batch` does; otherwise the file is refused naming both lines). One bad line refuses
//! the whole file, every bad line counted and the first 20 quoted with their line numbers.

use std::collections::HashMap;

use hodoflow_outbox::{Outbox, Target};
use hodoflow_retry::Secret;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

/// One job of the file, checked.
#[derive(Debug)]
pub(crate) struct FileJob {
    pub(crate) event_id: String,
    pub(crate) target: Target,
    pub(crate) body: Vec<u8>,
}

/// The jobs of a file that was accepted.
#[derive(Debug)]
pub(crate) struct JobFile {
    /// One per event ID, in the order of their first line.
    pub(crate) jobs: Vec<FileJob>,
    /// How many lines repeated an earlier line's job and were merged into it.
    pub(crate) merged: usize,
}

/// An input line.
#[derive(Deserialize)]
struct Line<'a> {
    kind: String,
    event_id: String,
    #[serde(default, borrow)]
    body: Option<&'a RawValue>,
    #[serde(default)]
    body_text: Option<String>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    path: Option<String>,
    /// Only to refuse it: a token never belongs in the file.
    #[serde(default)]
    trigger_token: Option<IgnoredAny>,
}

/// Reads `text`: each line a job, the webhook deliveries to `trigger` (`None`: a webhook line is
/// refused, saying where the token comes from).
///
/// # Errors
///
/// One sentence naming every bad line (the first 20 quoted); nothing is stored.
pub(crate) fn parse(text: &[u8], trigger: Option<&Secret>) -> Result<JobFile, String> {
    let mut jobs: Vec<FileJob> = Vec::new();
    let mut merged = 0;
    let mut errors = Vec::new();
    // The first line of each event ID, and its job's index.
    let mut first_of: HashMap<String, (usize, usize)> = HashMap::new();
    for (number, line) in crate::events::lines(text) {
        let job = match serde_json::from_slice::<Line<'_>>(line) {
            Ok(parsed) => job_of(parsed, trigger),
            Err(e) => Err(crate::body::json_error(&e)),
        };
        let job = match job {
            Ok(job) => job,
            Err(why) => {
                errors.push(format!("line {number}: {why}"));
                continue;
            }
        };
        if let Some(&(first, at)) = first_of.get(&job.event_id) {
            let stored = &jobs[at];
            if stored.target == job.target && stored.body == job.body {
                merged += 1;
            } else {
                errors.push(format!(
                    "line {number}: event_id repeats line {first}'s with another job (one event \
                     ID is one job: the outbox keeps the first)"
                ));
            }
            continue;
        }
        first_of.insert(job.event_id.clone(), (number, jobs.len()));
        jobs.push(job);
    }
    if errors.is_empty() {
        return Ok(JobFile { jobs, merged });
    }
    Err(crate::events::quoted(
        &format!(
            "--events has {} bad line(s); nothing was stored: ",
            errors.len()
        ),
        &errors,
    ))
}

/// The job of one parsed line, checked as the SDK checks it before storing.
fn job_of(line: Line<'_>, trigger: Option<&Secret>) -> Result<FileJob, String> {
    if line.trigger_token.is_some() {
        return Err(
            "a trigger token is never in the file (it is a secret): remove the field and pass \
             --trigger-token or set HODOFLOW_TRIGGER_TOKEN"
                .to_owned(),
        );
    }
    let body = match (line.body, line.body_text) {
        (Some(body), None) => body.get().as_bytes().to_vec(),
        (None, Some(text)) => text.into_bytes(),
        (Some(_), Some(_)) => return Err("has both body and body_text: give one".to_owned()),
        (None, None) => {
            return Err("has no body: give body (any JSON but null) or body_text".to_owned());
        }
    };
    let needs = |field: Option<String>, name: &str| {
        field.ok_or_else(|| format!("a {} line needs {name}", line.kind))
    };
    let target = match line.kind.as_str() {
        "webhook" => {
            if line.method.is_some() || line.path.is_some() {
                return Err("a webhook line takes no method or path".to_owned());
            }
            let Some(token) = trigger else {
                return Err(
                    "a webhook delivery needs the trigger token: pass --trigger-token or set \
                     HODOFLOW_TRIGGER_TOKEN"
                        .to_owned(),
                );
            };
            Target::webhook(token.clone())
        }
        "write" => {
            let method = needs(line.method, "method")?;
            let path = needs(line.path, "path")?;
            let method = http::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
                .map_err(|_| "method is not an HTTP method".to_owned())?;
            Target::Write { method, path }
        }
        "modulify" => {
            if line.path.is_some() {
                return Err("a modulify line takes no path".to_owned());
            }
            Target::modulify(needs(line.method, "method")?)
        }
        _ => {
            return Err(format!(
                "kind must be webhook, write or modulify, not {:?}",
                crate::sanitize::field(&line.kind)
            ));
        }
    };
    Outbox::check(&line.event_id, &target, &body).map_err(|e| e.to_string())?;
    Ok(FileJob {
        event_id: line.event_id,
        target,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "trg_FILE_SECRET";

    fn token() -> Secret {
        Secret::new(TOKEN)
    }

    #[test]
    fn reads_each_kind_and_keeps_each_body_byte_for_byte() {
        let text = b"{\"kind\":\"webhook\",\"event_id\":\"w-1\",\"body\":{ \"a\" : 1 }}\n\
            \n\
            {\"kind\":\"write\",\"method\":\"patch\",\"path\":\"/api/json/v1/projects/7\",\"event_id\":\"p-1\",\"body\":[1]}\r\n\
            {\"kind\":\"modulify\",\"method\":\"send_message\",\"event_id\":\"m-1\",\"body_text\":\"plain\\ntext\",\"extra\":1}\n\
            {\"event_id\":\"w-1\",\"body\":{ \"a\" : 1 },\"kind\":\"webhook\"}\n";
        let file = parse(text, Some(&token())).unwrap();
        assert_eq!(file.merged, 1, "the same job twice is merged");
        let [webhook, write, modulify] = file.jobs.as_slice() else {
            panic!("{:?}", file.jobs)
        };
        assert_eq!(webhook.target, Target::webhook(TOKEN));
        assert_eq!(webhook.body, b"{ \"a\" : 1 }");
        assert_eq!(write.target.shown(), "PATCH /api/json/v1/projects/7");
        assert_eq!(write.body, b"[1]");
        assert_eq!(modulify.target, Target::modulify("send_message"));
        assert_eq!(modulify.body, b"plain\ntext");
    }

    #[test]
    fn refuses_the_whole_file_naming_every_bad_line_and_never_the_token() {
        let text = "{\"kind\":\"webhook\",\"event_id\":\"ok\",\"body\":{}}\n\
            not json\n\
            {\"kind\":\"webhook\",\"event_id\":\"t\",\"body\":{},\"trigger_token\":\"trg_IN_FILE\"}\n\
            {\"kind\":\"write\",\"method\":\"GET\",\"path\":\"/api/json/v1/p\",\"event_id\":\"g\",\"body\":{}}\n\
            {\"kind\":\"write\",\"method\":\"POST\",\"path\":\"/other\",\"event_id\":\"o\",\"body\":{}}\n\
            {\"kind\":\"modulify\",\"event_id\":\"m\",\"body\":{}}\n\
            {\"kind\":\"fax\",\"event_id\":\"f\",\"body\":{}}\n\
            {\"kind\":\"webhook\",\"event_id\":\" \",\"body\":{}}\n\
            {\"kind\":\"webhook\",\"event_id\":\"n\",\"body\":null}\n\
            {\"kind\":\"webhook\",\"event_id\":\"ok\",\"body\":{\"other\":1}}\n\
            {\"kind\":\"webhook\",\"event_id\":\"b\",\"body\":1,\"body_text\":\"x\"}\n";
        let error = parse(text.as_bytes(), Some(&token())).unwrap_err();
        assert!(
            error.starts_with("--events has 10 bad line(s); nothing was stored: line 2: "),
            "{error}"
        );
        for line in 2..=11 {
            assert!(error.contains(&format!("line {line}: ")), "{line}: {error}");
        }
        assert!(!error.contains("line 1:"), "{error}");
        assert!(
            error.contains("line 10: event_id repeats line 1's"),
            "{error}"
        );
        assert!(
            !error.contains("IN_FILE") && !error.contains(TOKEN),
            "{error}"
        );
    }

    #[test]
    fn a_webhook_line_without_a_token_says_where_it_comes_from() {
        let text = b"{\"kind\":\"write\",\"method\":\"POST\",\"path\":\"/api/json/v1/p\",\"event_id\":\"p\",\"body\":{}}\n\
            {\"kind\":\"webhook\",\"event_id\":\"w\",\"body\":{}}\n";
        let error = parse(text, None).unwrap_err();
        assert!(
            error.contains(
                "line 2: a webhook delivery needs the trigger token: pass --trigger-token"
            ),
            "{error}"
        );
        let writes_only = text.split(|&b| b == b'\n').next().unwrap();
        assert_eq!(parse(writes_only, None).unwrap().jobs.len(), 1);
    }
}
