//! Fuzzes `hodoflow-send`'s redaction (`crates/hodoflow-send/src/redact.rs`, with the files it
//! uses, compiled here as they are) with arbitrary secret values: the first line of the input
//! is a secret the process knows (a token such as `accepted`, `workflow run`, or any text), the
//! rest a value a server sent. Checked on every input:
//!
//! - nothing panics;
//! - the tool's own sentences are written as they are whatever the secret: no word of them is
//!   ever searched for it;
//! - a value shown (text) or put in JSON holds the secret in none of the pieces between its
//!   markers, and a value shown holds no control character;
//! - a value without the secret is shown as it is, or escaped so that it reads back as itself:
//!   never altered;
//! - a trigger shown in a resend command keeps everything but its token, by position.
//!
//! Run with: `cargo fuzz run redaction` from the repository root (see fuzz/README.md).

#![no_main]

#[allow(dead_code, reason = "the CLI's own file; the target uses part of it")]
#[path = "../../crates/hodoflow-send/src/redact.rs"]
mod redact;
#[allow(dead_code, reason = "the CLI's own file; the target uses part of it")]
#[path = "../../crates/hodoflow-send/src/sanitize.rs"]
mod sanitize;
#[allow(dead_code, reason = "the CLI's own file; the target uses part of it")]
#[path = "../../crates/hodoflow-send/src/trigger.rs"]
mod trigger;

use libfuzzer_sys::fuzz_target;

/// Sentences this tool writes on its own, with `{run}`, `{key}` and `{n}` where a value goes.
const OWN: [&str; 8] = [
    "accepted: workflow run {run} (1 attempt, {n} ms, key {key})",
    "duplicate: already accepted earlier, no new run ({n} attempts, {n} ms, key {key})",
    "error: webhook trigger not found [not_found]\npermanent: do not retry unchanged (1 attempt)",
    "retry later with the same key {key}, no earlier than {n} s from now",
    "batch: {n} events, {n} accepted, {n} duplicate, {n} failed for good, {n} to retry; \
     {n} attempts in {n} ms",
    "run the same file again later: events already taken come back duplicate",
    "{\"outcome\":\"accepted\",\"status\":202,\"error\":null,\"key\":\"{key}\"}",
    "replayed: 201 from the server's idempotency store (1 attempt, {n} ms, key {key})",
];

/// `shown` read back: the escapes `sanitize::escape` writes, undone.
fn unescape(shown: &str) -> String {
    let mut out = String::new();
    let mut chars = shown.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                out.push(char::from(
                    u8::from_str_radix(&hex, 16).expect("two hex digits"),
                ));
            }
            Some('u') => {
                let hex: String = chars.by_ref().skip(1).take_while(|c| *c != '}').collect();
                let code = u32::from_str_radix(&hex, 16).expect("hex digits");
                out.push(char::from_u32(code).expect("a character"));
            }
            other => panic!("an escape that is not one: {other:?} in {shown:?}"),
        }
    }
    out
}

/// Asserts that no piece of `text` between markers holds `secret`.
#[track_caller]
fn hidden(secret: &str, text: &str) {
    for piece in text.split(redact::MARKER) {
        assert!(!piece.contains(secret), "{secret:?} in {text:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (secret, value) = text.split_once('\n').unwrap_or((text, ""));
    redact::forget_all();
    let value_alone = redact::shown(value);
    let own: Vec<String> = OWN
        .iter()
        .map(|sentence| {
            sentence
                .replace("{run}", &value_alone)
                .replace("{key}", "e06dcf35-3a83-50d0-9295-9503a82c51c0")
                .replace("{n}", "7")
        })
        .collect();
    let before: Vec<String> = own.iter().map(|line| redact::terminal(line)).collect();

    redact::add(secret);
    // The tool's own sentences, written the same whatever the secret.
    for (line, written) in own.iter().zip(&before) {
        assert_eq!(&redact::terminal(line), written, "{secret:?}");
    }
    // A server's value, as text and as JSON.
    let shown = redact::shown(value);
    assert!(
        !shown.chars().any(|c| c.is_control()),
        "a control character shown: {shown:?}"
    );
    let mut object = serde_json::Map::new();
    object.insert(value.to_owned(), serde_json::json!([value]));
    let document = redact::json(serde_json::Value::Object(object));
    let strings: Vec<&str> = document
        .as_object()
        .expect("an object")
        .iter()
        .flat_map(|(key, items)| {
            let items = items.as_array().expect("an array").iter();
            std::iter::once(key.as_str()).chain(items.map(|item| item.as_str().expect("a string")))
        })
        .collect();
    // A secret under 4 bytes is not redacted. Escaping writes letters of its own (`\x1b`), so a
    // value with a control or a bidirectional formatting character is checked in its JSON
    // values (strings, before JSON escapes them); a long one may be cut with this tool's words.
    let escaped = value
        .chars()
        .any(|c| c.is_control() || sanitize::is_bidi(c));
    if secret.len() >= 4 && value.len() <= 1_000 {
        if !escaped && !secret.contains('\\') {
            hidden(secret, &shown);
        }
        for string in strings {
            hidden(secret, string);
        }
    }
    // A value without the secret is shown as it is, or escaped to read back as itself: never
    // altered.
    if !value.contains(secret) && value.len() <= 1_000 && shown == value_alone {
        match escaped {
            false => assert_eq!(shown, value),
            // Escaping may make a short value long enough to be cut: what is kept reads back
            // as the value's start, never half an escape.
            true => match shown.rsplit_once("… (") {
                Some((kept, said)) if said.ends_with(" bytes cut)") => {
                    let start = unescape(kept);
                    assert!(value.starts_with(&start), "{shown:?}");
                }
                _ => assert_eq!(unescape(&shown), value, "{shown:?}"),
            },
        }
    }
    // A trigger URL keeps its base and route; only the token's place is marked.
    let url = format!("https://hodoflow.example/api/v1/webhooks/{secret}");
    let expected = "https://hodoflow.example/api/v1/webhooks/<redacted>";
    if !secret.is_empty() && !secret.contains(['/', '?', '#']) && url::Url::parse(&url).is_ok() {
        let shown = trigger::Trigger::shown(&url);
        if secret.trim() == secret {
            assert_eq!(shown, expected, "{secret:?}");
        } else {
            // Blanks around it are no part of a URL: one that is not read is marked whole.
            assert!(
                shown == expected || shown == redact::MARKER,
                "{secret:?}: {shown}"
            );
        }
    }
    if !secret.contains("://") {
        assert_eq!(trigger::Trigger::shown(secret), redact::MARKER);
    }
});
