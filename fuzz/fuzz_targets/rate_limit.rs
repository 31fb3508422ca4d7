//! Fuzzes the `RateLimit` and `RateLimit-Policy` field parser: any header values are read without
//! a panic, a field that is not visible ASCII is ignored whole, a gate it closes is closed for at
//! most a day and only by a policy with nothing remaining, and a trigger's learned window is a
//! quota of 1 to 1,000,000 per 1 s to a day, stated by a `"trigger"` policy with `q` and `w`.
//!
//! Run with: `cargo fuzz run rate_limit` from the repository root (see fuzz/README.md).

#![no_main]

use std::time::Duration;

use hodoflow_retry::fuzzing::{rate_limit_exhausted_for, rate_limit_trigger_window};
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

/// The longest reset the parser honours.
const DAY: Duration = Duration::from_secs(86_400);

fuzz_target!(|data: &[u8]| {
    // Each line is one `RateLimit` field value, so several fields combine as one list; the
    // same lines are the `RateLimit-Policy` field too.
    let name = HeaderName::from_static("ratelimit");
    let policy = HeaderName::from_static("ratelimit-policy");
    let mut headers = HeaderMap::new();
    let mut texts = Vec::new();
    let mut ascii = true;
    for line in data.split(|&byte| byte == b'\n').take(8) {
        let Ok(value) = HeaderValue::from_bytes(line) else {
            continue;
        };
        match value.to_str() {
            Ok(text) => texts.push(text.to_owned()),
            Err(_) => ascii = false,
        }
        headers.append(policy.clone(), value.clone());
        headers.append(name.clone(), value);
    }
    let closed = rate_limit_exhausted_for(&headers);
    if !ascii {
        assert_eq!(
            closed, None,
            "a field outside visible ASCII is ignored whole"
        );
    }
    if let Some(wait) = closed {
        assert!(wait <= DAY, "{wait:?} from {texts:?}");
        let all = texts.join(",");
        // RFC 9651: `-0` is an integer, and it is 0.
        let spent = all.contains("r=0") || all.contains("r=-0");
        assert!(spent, "closed without r=0: {all:?}");
        assert!(all.contains("t="), "closed without t: {all:?}");
    }
    let (limit, spent_for) = rate_limit_trigger_window(&headers);
    if !ascii {
        assert_eq!((limit, spent_for), (None, None), "ignored whole");
    }
    let all = texts.join(",");
    if let Some((quota, window)) = limit {
        assert!((1..=1_000_000).contains(&quota), "{quota} from {all:?}");
        assert!(
            window >= Duration::from_secs(1) && window <= DAY,
            "{window:?}"
        );
        assert!(
            all.contains("trigger") && all.contains("q=") && all.contains("w="),
            "learned without a trigger policy: {all:?}"
        );
    }
    if let Some(reset) = spent_for {
        assert!(reset <= DAY, "{reset:?} from {all:?}");
        let spent = all.contains("r=0") || all.contains("r=-0");
        assert!(all.contains("trigger") && spent, "{all:?}");
    }
    // The same fields again give the same answer: nothing is kept between reads.
    assert_eq!(rate_limit_exhausted_for(&headers), closed);
    assert_eq!(rate_limit_trigger_window(&headers), (limit, spent_for));
});
