//! Fuzzes the NDJSON event file of `hodoflow-send batch` (`crates/hodoflow-send/src/events.rs`,
//! compiled here as it is, with the two files it uses): any bytes are read without a panic; an
//! accepted file holds events with a non-blank, unique `event_id` and a JSON body within the
//! limit, sent as the line's bytes; a refused file gets one bounded message without control
//! characters.
//!
//! Run with: `cargo fuzz run events` from the repository root (see fuzz/README.md).

#![no_main]

#[allow(dead_code, reason = "the CLI's own file; the target uses part of it")]
#[path = "../../crates/hodoflow-send/src/body.rs"]
mod body;
#[allow(dead_code, reason = "the CLI's own file; the target uses part of it")]
#[path = "../../crates/hodoflow-send/src/events.rs"]
mod events;
#[allow(dead_code, reason = "the CLI's own file; the target uses part of it")]
#[path = "../../crates/hodoflow-send/src/sanitize.rs"]
mod sanitize;

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the body limit (0 to 1020 bytes), the rest is the file.
    let Some((&pick, text)) = data.split_first() else {
        return;
    };
    let limit = usize::from(pick) * 4;
    // A leading UTF-8 byte-order mark is no part of the first line.
    let lines = text
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(text)
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.trim_ascii().is_empty())
        .count();
    match events::parse(text, limit) {
        Ok(parsed) => {
            assert_eq!(
                parsed.events.len() + parsed.merged.len(),
                lines,
                "every line is an event or merged into one"
            );
            let mut seen = HashSet::new();
            for event in &parsed.events {
                assert!(!event.event_id.trim().is_empty());
                assert!(
                    seen.insert(event.event_id.clone()),
                    "one event per event_id"
                );
                assert!(event.body.len() <= limit);
                assert!(
                    serde_json::from_slice::<serde::de::IgnoredAny>(&event.body).is_ok(),
                    "a body is JSON"
                );
                let window = text.windows(event.body.len().max(1));
                assert!(
                    event.body.is_empty() || window.into_iter().any(|w| w == event.body.as_slice()),
                    "a body is the line's own bytes"
                );
            }
            for &(line, first) in &parsed.merged {
                assert!(first < line, "merged into an earlier line");
            }
        }
        Err(message) => {
            assert!(message.starts_with("--events has "), "{message}");
            // At most 20 quoted errors, each a bounded field: the message is bounded whatever
            // the file, and holds no control character.
            assert!(message.len() < 64 * 1024, "{} bytes", message.len());
            assert!(
                !message.chars().any(|c| c.is_control() && c != '\t'),
                "{message:?}"
            );
        }
    }
});
