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

use std::borrow::Cow;
use std::io::Write as _;
use std::sync::{PoisonError, RwLock};

use serde::Serialize;
use serde_json::Value;

/// What a secret is replaced by.
pub(crate) const MARKER: &str = "<redacted>";

/// The shortest secret redacted.
const MIN_LEN: usize = 4;

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
                    let value = strings(value, key == "body");
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
