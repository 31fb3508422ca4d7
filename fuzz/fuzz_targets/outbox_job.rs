//! Fuzzes the decoding of a stored outbox job (`crates/hodoflow-outbox/src/job.rs`): the
//! columns a store reads back (kind, method, route, identity, state, times) are decoded without
//! a panic, what decodes is stored again as it was, and a job's `Debug` shows neither its
//! trigger token nor its body, whatever the row holds. (`Job` is `#[non_exhaustive]`; the
//! `Debug` checked is `NewJob`'s and the target's, which `Job`'s `Debug` is made of.)
//!
//! Run with: `cargo fuzz run outbox_job` from the repository root (see fuzz/README.md).

#![no_main]

use std::time::UNIX_EPOCH;

use bytes::Bytes;
use hodoflow_outbox::fuzzing::{stored_target, stored_time, target_row, time_column};
use hodoflow_outbox::{JobState, NewJob, Target};
use hodoflow_retry::IdempotencyKey;
use libfuzzer_sys::fuzz_target;

/// What every body of this target holds, so its `Debug` can be searched for it.
const BODY_MARKER: &str = "BODY-MARKER-0b6c";

fuzz_target!(|data: &[u8]| {
    // Eight bytes of time, then the text columns separated by 0xFF (never in UTF-8).
    let Some((time, rest)) = data.split_first_chunk::<8>() else {
        return;
    };
    let millis = i64::from_le_bytes(*time);
    let columns: Vec<String> = rest
        .split(|&byte| byte == 0xFF)
        .map(|column| String::from_utf8_lossy(column).into_owned())
        .collect();
    let column = |index: usize| columns.get(index).map_or("", String::as_str);
    let (kind, method, route, identity, state) =
        (column(0), column(1), column(2), column(3), column(4));

    let at = stored_time(millis);
    assert_eq!(
        time_column(at),
        millis.max(0),
        "a stored time reads back as stored"
    );
    assert!(at >= UNIX_EPOCH);

    let parsed_state = JobState::parse(state);
    if let Some(parsed) = parsed_state {
        assert_eq!(parsed.as_str(), state);
    }
    let key = IdempotencyKey::new(identity);
    if let Ok(key) = &key {
        assert_eq!(key.as_str(), identity);
    }
    // A webhook row names its trigger by reference (`trigger:<UUID>`, in its stored form
    // only); a row from before references holds the token itself, and decodes.
    let reference_row = kind == "webhook" && route.starts_with("trigger:");
    let Ok(target) = stored_target(kind, method, route) else {
        assert!(
            kind != "modulify" && (kind != "webhook" || reference_row),
            "{kind:?} {route:?} always decodes"
        );
        return;
    };
    assert_eq!(target.kind(), kind);
    let (stored_method, stored_route) = target_row(&target);
    if kind == "webhook" && !reference_row {
        // The token is never stored again: its reference is.
        // `trigger:` and a hyphenated lowercase UUID of version 5: 36 characters, nothing of
        // the token's text.
        let reference = stored_route.strip_prefix("trigger:").unwrap_or_default();
        let bytes = reference.as_bytes();
        assert_eq!(bytes.len(), 36, "not a reference: {stored_route}");
        for (at, byte) in bytes.iter().enumerate() {
            if [8, 13, 18, 23].contains(&at) {
                assert_eq!(*byte, b'-', "{stored_route}");
            } else {
                assert!(matches!(byte, b'0'..=b'9' | b'a'..=b'f'), "{stored_route}");
            }
        }
        assert_eq!(bytes[14], b'5', "a version 5 UUID: {stored_route}");
    } else {
        assert_eq!(stored_route, route, "the route is stored again as it was");
    }
    match &target {
        Target::Webhook { .. } | Target::Modulify { .. } => assert_eq!(stored_method, "POST"),
        _ => assert_eq!(stored_method, method),
    }
    assert_eq!(
        stored_target(kind, &stored_method, &stored_route).ok(),
        Some(target.clone())
    );

    // A job as a store is given it: its `Debug` shows neither body nor trigger token.
    let Ok(identity) = key else {
        return;
    };
    let job = NewJob {
        event_id: column(5).to_owned(),
        target,
        body: Bytes::from(format!("{{\"secret\":\"{BODY_MARKER}\"}}")),
        identity,
        now: at,
    };
    let shown = format!("{job:?}");
    assert!(!shown.contains(BODY_MARKER), "a body in Debug: {shown}");
    // The event ID is shown as it is (escaped by `Debug`), and may hold the token's text by
    // chance: the token is looked for in the `Debug` of the same job under a plain event ID.
    // Exact, not a substring search (a route such as `acted> },` is found in the placeholder and
    // what follows it): a webhook's `Debug` is that of its stored reference, which holds no
    // token.
    let plain = |target: Target| {
        format!(
            "{:?}",
            NewJob {
                event_id: "-".to_owned(),
                target,
                ..job.clone()
            }
        )
    };
    if kind == "webhook" {
        let (_, reference) = target_row(&job.target);
        let by_reference =
            stored_target("webhook", "POST", &reference).expect("a stored reference decodes");
        let shown = plain(job.target.clone());
        assert_eq!(
            shown,
            plain(by_reference),
            "a trigger token in Debug: {shown}"
        );
    }
});
