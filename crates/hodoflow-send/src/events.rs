//! The NDJSON event file of `batch` (its rules are in `batch.rs`'s module docs): each line
//! `{"event_id": "<business id>", "body": <any JSON>}`, read and checked whole before anything
//! is sent.
//!
//! Apart from `batch.rs` so that it depends on nothing but `body.rs` and `sanitize.rs`: the
//! fuzz target `events` (`fuzz/fuzz_targets/events.rs`) compiles these three files as they are.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;

/// The most bad lines (or merged lines) one message quotes; all are counted.
const QUOTED_ERRORS: usize = 20;

/// The events of a file that was accepted.
#[derive(Debug)]
pub(crate) struct Parsed {
    /// One per `event_id`, in the order of their first line.
    pub(crate) events: Vec<Event>,
    /// `(line, first line)` of each line merged into an earlier one with the same event.
    pub(crate) merged: Vec<(usize, usize)>,
}

/// One event to deliver.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) event_id: String,
    pub(crate) body: Vec<u8>,
    /// The line it was read from (from 1), to name it in a refusal.
    pub(crate) line: usize,
}

/// An input line.
#[derive(Deserialize)]
struct Line<'a> {
    event_id: String,
    #[serde(borrow)]
    body: &'a RawValue,
}

/// Parses NDJSON events and checks each against the rules of `batch.rs`'s module docs and a
/// body limit of `limit` bytes; blank lines are skipped, and a line repeating an earlier one's event and
/// body is merged into it.
pub(crate) fn parse(text: &[u8], limit: usize) -> Result<Parsed, String> {
    let mut events = Vec::new();
    let mut merged = Vec::new();
    let mut errors = Vec::new();
    // The first line of each event_id, and its body.
    let mut first_of: HashMap<String, (usize, &[u8])> = HashMap::new();
    for (number, line) in lines(text) {
        let parsed = match serde_json::from_slice::<Line<'_>>(line) {
            Ok(parsed) => parsed,
            Err(e) => {
                errors.push(format!("line {number}: {}", crate::body::json_error(&e)));
                continue;
            }
        };
        let body = parsed.body.get().as_bytes();
        let mut refused = false;
        if parsed.event_id.trim().is_empty() {
            errors.push(format!("line {number}: event_id is empty or blank"));
            refused = true;
        } else if let Some(&(first, first_body)) = first_of.get(&parsed.event_id) {
            if first_body != body {
                errors.push(format!(
                    "line {number}: event_id repeats line {first}'s with a different body \
                     (one delivery ID, two bodies: the server keeps whichever arrives first)"
                ));
            } else {
                merged.push((number, first));
            }
            // Refused or merged, the line is not an event of its own.
            refused = true;
        } else {
            first_of.insert(parsed.event_id.clone(), (number, body));
        }
        if body.len() > limit {
            errors.push(format!(
                "line {number}: the body is {} bytes, over the {limit}-byte webhook limit",
                body.len()
            ));
            refused = true;
        }
        if !refused {
            events.push(Event {
                event_id: parsed.event_id,
                body: body.to_vec(),
                line: number,
            });
        }
    }
    if errors.is_empty() {
        return Ok(Parsed { events, merged });
    }
    Err(quoted(
        &format!(
            "--events has {} bad line(s); nothing was sent: ",
            errors.len()
        ),
        &errors,
    ))
}

/// The lines of a JSON-lines file that are not blank, trimmed, with their numbers (from 1). A
/// UTF-8 byte-order mark, as some editors write, is no part of the first line; a CR before each
/// LF is trimmed with the line's other whitespace.
pub(crate) fn lines(text: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    text.split(|&b| b == b'\n')
        .enumerate()
        .map(|(index, line)| (index + 1, line.trim_ascii()))
        .filter(|(_, line)| !line.is_empty())
}

/// `lead` and the first [`QUOTED_ERRORS`] of `items`, with a count of the rest; each item is
/// one field (`sanitize.rs`): an event ID is stored text.
pub(crate) fn quoted(lead: &str, items: &[String]) -> String {
    let shown: Vec<_> = items[..items.len().min(QUOTED_ERRORS)]
        .iter()
        .map(|item| crate::sanitize::field(item))
        .collect();
    let mut message = format!("{lead}{}", shown.join("; "));
    let more = items.len() - shown.len();
    if more > 0 {
        message.push_str(&format!("; and {more} more"));
    }
    message
}

/// What standard error says of the lines merged, or `None` when there are none.
pub(crate) fn merged_note(merged: &[(usize, usize)]) -> Option<String> {
    if merged.is_empty() {
        return None;
    }
    let lines: Vec<String> = merged
        .iter()
        .map(|(line, first)| format!("line {line} into line {first}"))
        .collect();
    Some(quoted(
        &format!(
            "--events: {} line(s) repeat an earlier line's event_id and body, each event is \
             delivered once: ",
            merged.len()
        ),
        &lines,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_a_byte_order_mark_and_accepts_crlf_line_ends() {
        let text = b"\xEF\xBB\xBF{\"event_id\":\"e-1\",\"body\":{}}\r\n{\"event_id\":\"e-2\",\"body\":[1]}\r\n";
        let Parsed { events, .. } = parse(text, 1024).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].event_id, "e-1");
        assert_eq!(events[1].body, b"[1]");
        assert!(
            parse(b"x\xEF\xBB\xBF{}", 1024).is_err(),
            "only a leading mark is skipped"
        );
    }

    #[test]
    fn parses_events_and_keeps_each_body_byte_for_byte() {
        let text = b"{\"event_id\":\"e-1\",\"body\":{ \"b\" : 1 }}\n\n{\"body\":[1,2],\"event_id\":\"e-2\",\"extra\":true}\r\n";
        let Parsed { events, merged } = parse(text, 1024).unwrap();
        assert_eq!(events.len(), 2);
        assert!(merged.is_empty());
        assert_eq!(events[0].event_id, "e-1");
        assert_eq!(events[0].body, b"{ \"b\" : 1 }");
        assert_eq!(events[1].body, b"[1,2]");
    }

    #[test]
    fn refuses_the_whole_file_naming_bad_lines() {
        let text = b"{\"event_id\":\"e-1\",\"body\":{}}\nnot json\n{\"event_id\":\"\",\"body\":1}\n{\"body\":1}\n";
        let error = parse(text, 1024).unwrap_err();
        assert!(
            error.starts_with("--events has 3 bad line(s); nothing was sent"),
            "{error}"
        );
        assert!(error.contains("line 2: "), "{error}");
        assert!(error.contains("line 3: event_id is empty"), "{error}");
        assert!(
            error.contains("line 4: missing field `event_id`"),
            "{error}"
        );
    }

    #[test]
    fn blank_and_repeated_ids_and_bodies_over_the_limit_are_all_found_at_once() {
        let text = b"{\"event_id\":\"a\",\"body\":\"12345678\"}\n\
            {\"event_id\":\" \\t \",\"body\":1}\n\
            {\"event_id\":\"b\",\"body\":\"123456789\"}\n\
            {\"event_id\":\"a\",\"body\":2}\n\
            {\"event_id\":\"\",\"body\":\"123456789\"}\n";
        let error = parse(text, 10).unwrap_err();
        assert!(error.starts_with("--events has 5 bad line(s)"), "{error}");
        for says in [
            "line 2: event_id is empty or blank",
            "line 3: the body is 11 bytes, over the 10-byte webhook limit",
            "line 4: event_id repeats line 1's with a different body",
            "line 5: event_id is empty or blank",
            "line 5: the body is 11 bytes",
        ] {
            assert!(error.contains(says), "{says}: {error}");
        }
        assert!(!error.contains("line 1:"), "{error}");
        assert_eq!(
            parse(b"{\"event_id\":\"a\",\"body\":\"12345678\"}", 10)
                .unwrap()
                .events
                .len(),
            1
        );
    }

    #[test]
    fn a_repeated_event_with_the_same_body_is_merged_into_its_first_line() {
        let text = b"{\"event_id\":\"a\",\"body\":{\"n\":1}}\n\
            {\"event_id\":\"b\",\"body\":{\"n\":2}}\n\
            {\"body\":{\"n\":1},\"event_id\":\"a\"}\n\
            \n\
            {\"event_id\":\"a\",\"body\":{\"n\":1}}\n";
        let Parsed { events, merged } = parse(text, 1024).unwrap();
        let ids: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(events[0].body, b"{\"n\":1}");
        assert_eq!(merged, [(3, 1), (5, 1)]);
        assert_eq!(
            merged_note(&merged).unwrap(),
            "--events: 2 line(s) repeat an earlier line's event_id and body, each event is \
             delivered once: line 3 into line 1; line 5 into line 1"
        );
        assert_eq!(merged_note(&[]), None);
    }

    #[test]
    fn a_repeated_event_with_another_body_refuses_the_file_naming_both_lines() {
        // The same JSON value, other bytes: a different body, as it would be sent.
        for other in ["{\"n\":2}", "{ \"n\": 1 }"] {
            let text = format!(
                "{{\"event_id\":\"a\",\"body\":{{\"n\":1}}}}\n\
                 {{\"event_id\":\"b\",\"body\":{{}}}}\n\
                 {{\"event_id\":\"a\",\"body\":{other}}}\n"
            );
            let error = parse(text.as_bytes(), 1024).unwrap_err();
            assert_eq!(
                error,
                "--events has 1 bad line(s); nothing was sent: line 3: event_id repeats line 1's \
                 with a different body (one delivery ID, two bodies: the server keeps \
                 whichever arrives first)"
            );
        }
    }
}
