//! Every secret this process knows, and the one way it prints.
//!
//! The SDK keeps secrets out of what it says, but a server can say anything: an error body that
//! echoes the bearer token it received, an `x-request-id` holding the trigger token. So every
//! value this tool did not write itself (what a server said, what a store holds, the SDK's
//! error messages, a panic's message) has every known secret in it (the client secret, the
//! trigger token, each access token issued to this process) replaced by [`MARKER`] where it is
//! put into the output: [`text`] for a JSON value or a message, [`shown`] for a line of text
//! (escaped too, `sanitize.rs`), [`json`] for a server's document. The tool's own words are
//! never searched for a secret: an access token `accepted` or `workflow run` leaves
//! `accepted: workflow run …` as it is, and `"outcome":"accepted"` too. Where this tool itself
//! puts a secret into a text (the trigger token in the command a generated key is announced
//! with), it knows where it put it, and writes [`MARKER`] there (`identity.rs`).
//!
//! Standard output and standard error are written only through [`print()`], [`print_json`] and
//! [`eprint()`], and the log writer (`logging.rs`) redacts each field's value the same way;
//! each line written passes [`terminal`], which strips what no value should hold any more and
//! bounds the line. clap's own usage errors, which quote what was typed, are redacted in
//! `usage.rs`; its help prints no values (`hide_env_values`).
//!
//! A secret shorter than [`MIN_LEN`] bytes is not redacted: it protects nothing (it can be
//! guessed) and would turn short values into markers.

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

/// Forgets every secret, so that each input of the `redaction` fuzz target starts afresh.
#[cfg(fuzzing)]
pub(crate) fn forget_all() {
    KNOWN
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

/// `value`, text this tool did not write, with every known secret replaced by [`MARKER`], in one
/// pass, the longest secret first where several start at the same place.
pub(crate) fn text(value: &str) -> Cow<'_, str> {
    let known = KNOWN.read().unwrap_or_else(PoisonError::into_inner);
    replace(value, &known)
}

/// `value`, text this tool did not write, for a line of text: redacted ([`text`]), then shown
/// as it is or escaped (`sanitize::field`). Control characters cannot hide a secret by
/// splitting it: when the value without them holds one, that is the text shown, redacted.
pub(crate) fn shown(value: &str) -> String {
    let redacted = text(value);
    let stripped = crate::sanitize::strip(&redacted, false);
    if let Cow::Owned(stripped) = &stripped
        && let Cow::Owned(whole) = text(stripped)
    {
        return crate::sanitize::field(&whole).into_owned();
    }
    crate::sanitize::field(&redacted).into_owned()
}

/// `value`, a server's document, with every string in it (object keys included) redacted.
pub(crate) fn json(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(self::text(&text).into_owned()),
        Value::Array(items) => Value::Array(items.into_iter().map(json).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| (self::text(&key).into_owned(), json(value)))
                .collect(),
        ),
        other => other,
    }
}

/// Prints `lines`, this tool's words with every value in them already redacted (`shown`), on
/// standard output, through [`terminal`]. A closed pipe is not an error worth a panic.
pub(crate) fn print(lines: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{}", terminal(lines));
}

/// Prints `value` as one JSON line on standard output. Its values are redacted where they were
/// put into it (its own words never are); every control character is escaped.
pub(crate) fn print_json(value: &impl Serialize) {
    let line = serde_json::to_string(value).unwrap_or_else(|e| {
        let failure = serde_json::json!({"outcome": "error",
            "error": {"kind": "internal", "may_have_run": true, "message": text(&e.to_string())}});
        failure.to_string()
    });
    let _ = writeln!(
        std::io::stdout().lock(),
        "{}",
        crate::sanitize::escape_json_controls(&line)
    );
}

/// Prints `lines` on standard error, as [`print()`] does on standard output.
pub(crate) fn eprint(lines: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", terminal(lines));
}

/// Lines for a terminal or a log, whose values were redacted and escaped where they were put:
/// any escape sequence or control character left is removed (tab and line feed kept), and each
/// line is bounded.
pub(crate) fn terminal(lines: &str) -> String {
    let stripped = crate::sanitize::strip(lines, true);
    crate::sanitize::bound(&stripped, crate::sanitize::LINE_LIMIT).into_owned()
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
    fn a_value_is_shown_redacted_and_escaped_and_controls_cannot_split_a_secret() {
        add("cs_SHOWN_secret");
        assert_eq!(shown("x cs_SHOWN_secret y"), "x <redacted> y");
        assert_eq!(shown("\u{1b}[31mrun-1"), "\\x1b[31mrun-1");
        assert_eq!(
            shown("cs_SHOWN\u{1b}[0m_secret \u{7}"),
            "<redacted> ",
            "whole once its controls are out, and redacted"
        );
        assert_eq!(shown("plain"), "plain");
    }

    #[test]
    fn a_server_document_is_redacted_keys_included() {
        add("utcom");
        add("ok");
        let value = json(serde_json::json!({"x utcom y": ["utcom", "ok", 202]}));
        assert_eq!(
            value,
            serde_json::json!({"x <redacted> y": ["<redacted>", "ok", 202]}),
            "a secret under 4 bytes is not redacted"
        );
    }
}
