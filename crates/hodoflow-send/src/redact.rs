//! Every secret this process knows, and the one way it prints.
//!
//! The SDK keeps secrets out of what it says, but a server can say anything: an error body that
//! echoes the bearer token it received, an `x-request-id` holding the trigger token. So the
//! redaction happens last, on what is about to be written, whoever put the secret there: every
//! known secret (the client secret, the trigger token, each access token issued to this process)
//! becomes [`MARKER`]. Standard output and standard error are written only through [`print()`],
//! [`print_json`] and [`eprint()`], and the log writer (`logging.rs`) passes its lines through
//! [`terminal`], which also removes escape sequences (`sanitize.rs`) in text mode. clap's own usage errors are redacted in `usage.rs`; its help prints no values
//! (`hide_env_values`).
//!
//! JSON is redacted value by value, before it is serialized, so the output stays valid JSON
//! whatever the secrets look like (a token of digits never touches a number), and this tool's
//! own field names are left alone: object keys are redacted only inside `body`, the one place a
//! server's keys appear. A secret shorter than [`MIN_LEN`] bytes is not redacted: it protects
//! nothing (it can be guessed) and would turn words such as `ok` into markers.
//!
//! Redaction never rewrites the tool's own words: the enumerated fields of a report
//! ([`OWN_FIELDS`]: `outcome`, `kind`, `state` …) hold only values this tool chose, never a
//! secret, and are left alone, as are the batch summary's counts. An access token that is, or
//! is part of, a word the tool prints ([`OWN_WORDS`]) is refused where it is issued
//! (`client.rs`): a token server issuing `access_token: "accepted"` once made `--json` print
//! `"outcome":"<redacted>"` and the batch summary `5 <redacted>`.

use std::borrow::Cow;
use std::io::Write as _;
use std::sync::{PoisonError, RwLock};

use serde::Serialize;
use serde_json::Value;

/// What a secret is replaced by.
pub(crate) const MARKER: &str = "<redacted>";

/// The shortest secret redacted.
const MIN_LEN: usize = 4;

/// The report fields whose values are this tool's own enumerated words, never redacted.
const OWN_FIELDS: [&str; 4] = ["outcome", "first_outcome", "kind", "state"];

/// The words this tool prints on its own: outcomes, reported kinds, job and run states, and
/// the field names of its reports. A secret inside one of them would corrupt its output.
pub(crate) const OWN_WORDS: &[&str] = &[
    "accepted",
    "duplicate",
    "replayed",
    "replayed_without_answer",
    "error",
    "forbidden",
    "not_found",
    "key_reused",
    "in_progress",
    "payload_too_large",
    "unprocessable",
    "unauthorized",
    "budget_exhausted",
    "retry_budget_exhausted",
    "invalid_input",
    "transport",
    "configuration",
    "internal",
    "pending",
    "in_flight",
    "done",
    "failed",
    "needs_reconciliation",
    "succeeded",
    "running",
    "queued",
    "cancelled",
    "outcome",
    "first_outcome",
    "first_workflow_run_id",
    "first_attempts",
    "status",
    "workflow_run_id",
    "attempts",
    "elapsed_ms",
    "may_have_run",
    "message",
    "event_id",
    "delivery_id",
    "request_id",
    "waited_ms",
    "attempt",
    "calls",
    "state",
    "kind",
    "body",
    "key",
    "effect",
    "timeout",
    "closed",
    "connect",
    "<redacted>",
    "redacted",
    "events",
    "to retry",
    "failed for good",
    "attempts in",
];

/// Whether `secret` is, or is part of, one of [`OWN_WORDS`].
pub(crate) fn is_own_word(secret: &str) -> bool {
    !secret.is_empty() && OWN_WORDS.iter().any(|word| word.contains(secret))
}

/// The forms of every known secret, longest first.
static KNOWN: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Adds a secret to the redaction set: its text, and the forms it takes percent-encoded in a
/// form body or a path and escaped in a JSON or Rust string, as a server or a log may quote it.
pub(crate) fn add(secret: &str) {
    if secret.len() < MIN_LEN {
        return;
    }
    let quoted = |text: String| text[1..text.len() - 1].to_owned();
    let forms = [
        secret.to_owned(),
        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect(),
        url::form_urlencoded::byte_serialize(secret.as_bytes())
            .collect::<String>()
            .replace('+', "%20"),
        serde_json::to_string(secret).map_or_else(|_| secret.to_owned(), quoted),
        quoted(format!("{secret:?}")),
    ];
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    for form in forms {
        if !form.is_empty() && !known.contains(&form) {
            known.push(form);
        }
    }
    known.sort_by_key(|form| std::cmp::Reverse(form.len()));
}

/// `text` with every known secret replaced by [`MARKER`], in one pass, the longest secret
/// first where several start at the same place.
pub(crate) fn text(text: &str) -> Cow<'_, str> {
    let known = KNOWN.read().unwrap_or_else(PoisonError::into_inner);
    replace(text, &known)
}

/// `value`, a server's document, with every string in it (object keys included) redacted.
pub(crate) fn json(value: Value) -> Value {
    strings(value, true)
}

/// A report or result line of this tool, redacted: every string value, and the keys of `body`.
fn report(value: Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| {
                    if OWN_FIELDS.contains(&key.as_str()) {
                        return (key, value);
                    }
                    let value = match (key.as_str(), value) {
                        // The error object: its kind is this tool's, its message may quote a
                        // server.
                        ("error", Value::Object(fields)) => Value::Object(
                            fields
                                .into_iter()
                                .map(|(name, value)| match OWN_FIELDS.contains(&name.as_str()) {
                                    true => (name, value),
                                    false => (name, strings(value, false)),
                                })
                                .collect(),
                        ),
                        (key, value) => strings(value, key == "body"),
                    };
                    (key, value)
                })
                .collect(),
        ),
        other => strings(other, false),
    }
}

/// `value` with its strings redacted, and its keys when `keys`.
fn strings(value: Value, keys: bool) -> Value {
    match value {
        Value::String(text) => Value::String(self::text(&text).into_owned()),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| strings(v, keys)).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| {
                    let key = if keys {
                        self::text(&key).into_owned()
                    } else {
                        key
                    };
                    (key, strings(value, keys))
                })
                .collect(),
        ),
        other => other,
    }
}

/// Prints `line` on standard output, made inert and redacted (`sanitize.rs`). A closed pipe is
/// not an error worth a panic.
pub(crate) fn print(line: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{}", terminal(line));
}

/// Prints `value` as one JSON line on standard output, redacted.
pub(crate) fn print_json(value: &impl Serialize) {
    let value = serde_json::to_value(value).unwrap_or_else(|e| {
        serde_json::json!({"outcome": "error", "error": {"kind": "internal", "message": e.to_string()}})
    });
    let line = report(value).to_string();
    let _ = writeln!(
        std::io::stdout().lock(),
        "{}",
        crate::sanitize::escape_json_controls(&line)
    );
}

/// Prints `line` on standard error, made inert and redacted.
pub(crate) fn eprint(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", terminal(line));
}

/// Text for a terminal or a log: its escape sequences and control characters removed first (so
/// none can split a secret to hide it from the redaction), then redacted, then each line
/// bounded (after the redaction, so a cut never leaves half a secret).
pub(crate) fn terminal(lines: &str) -> String {
    let stripped = crate::sanitize::strip(lines, true);
    let redacted = text(&stripped);
    crate::sanitize::bound(&redacted, crate::sanitize::LINE_LIMIT).into_owned()
}

/// Prints `line`, made only of this tool's own words and counts (a summary), on standard error
/// as it is: there is no secret in it to redact, and redacting would corrupt it.
pub(crate) fn eprint_own(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The replacement of [`text`], over an explicit set sorted longest first.
fn replace<'a>(text: &'a str, known: &[String]) -> Cow<'a, str> {
    if !known.iter().any(|secret| text.contains(secret.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(next) = rest.chars().next() {
        match known
            .iter()
            .find(|secret| rest.starts_with(secret.as_str()))
        {
            Some(secret) => {
                out.push_str(MARKER);
                rest = &rest[secret.len()..];
            }
            None => {
                out.push(next);
                rest = &rest[next.len_utf8()..];
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(secrets: &[&str]) -> Vec<String> {
        let mut known: Vec<String> = secrets.iter().map(|s| (*s).to_owned()).collect();
        known.sort_by_key(|form| std::cmp::Reverse(form.len()));
        known
    }

    #[test]
    fn every_occurrence_is_replaced_and_other_text_kept() {
        let known = set(&["hft_abc", "trg_xyz"]);
        assert_eq!(
            replace(
                "Bearer hft_abc on /webhooks/trg_xyz, again hft_abc.",
                &known
            ),
            "Bearer <redacted> on /webhooks/<redacted>, again <redacted>."
        );
        assert!(matches!(replace("nothing here", &known), Cow::Borrowed(_)));
    }

    #[test]
    fn the_longest_secret_wins_and_the_marker_is_never_redacted_again() {
        let known = set(&["abc", "abcdef", "red"]);
        assert_eq!(replace("xabcdefy abc", &known), "x<redacted>y <redacted>");
        assert_eq!(replace("é red é", &known), "é <redacted> é");
    }

    #[test]
    fn encoded_forms_and_json_strings_are_redacted() {
        add("cs_REDACT/+ \"TEST\"");
        for shown in [
            "cs_REDACT/+ \"TEST\"",
            "cs_REDACT%2F%2B+%22TEST%22",
            "cs_REDACT%2F%2B%20%22TEST%22",
            "cs_REDACT/+ \\\"TEST\\\"",
        ] {
            assert_eq!(text(&format!("<{shown}>")), "<<redacted>>", "{shown}");
        }
        let value = json(serde_json::json!({"a": ["x cs_REDACT/+ \"TEST\" y", 202], "b": null}));
        assert_eq!(
            value,
            serde_json::json!({"a": ["x <redacted> y", 202], "b": null})
        );
    }

    #[test]
    fn a_report_keeps_its_own_enumerated_words_whatever_the_secrets() {
        // A stand-in for an enumerated word that is also a known secret; the global set is
        // shared with the other tests, so not a real word of the tool.
        add("enum_word_SECRET");
        let value = report(serde_json::json!({
            "outcome": "enum_word_SECRET",
            "first_outcome": "enum_word_SECRET",
            "state": "enum_word_SECRET",
            "error": {"kind": "enum_word_SECRET", "message": "server said enum_word_SECRET"},
            "body": {"echo": "enum_word_SECRET"},
            "attempts": 2,
        }));
        assert_eq!(value["outcome"], "enum_word_SECRET");
        assert_eq!(value["first_outcome"], "enum_word_SECRET");
        assert_eq!(value["state"], "enum_word_SECRET");
        assert_eq!(value["error"]["kind"], "enum_word_SECRET");
        assert_eq!(value["error"]["message"], "server said <redacted>");
        assert_eq!(value["body"]["echo"], "<redacted>");
        assert_eq!(value["attempts"], 2);
    }

    #[test]
    fn a_secret_inside_an_own_word_is_told_apart() {
        for word in [
            "accepted",
            "ccepte",
            "budget_exhausted",
            "in_flight",
            "<redacted>",
        ] {
            assert!(is_own_word(word), "{word}");
        }
        for secret in ["hft_abc123", "accepted!", ""] {
            assert!(!is_own_word(secret), "{secret}");
        }
    }

    #[test]
    fn a_report_keeps_its_own_field_names_and_a_short_secret_is_kept() {
        add("utcom");
        add("ok");
        let value = report(serde_json::json!({
            "outcome": "ok",
            "error": {"message": "x utcom y"},
            "body": {"utcom": ["utcom"]},
        }));
        assert_eq!(
            value,
            serde_json::json!({
                "outcome": "ok",
                "error": {"message": "x <redacted> y"},
                "body": {"<redacted>": ["<redacted>"]},
            })
        );
    }
}
