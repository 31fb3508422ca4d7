//! The `RateLimit` field of draft-ietf-httpapi-ratelimit-headers-09.
//!
//! `RateLimit: "default";r=0;t=30` says the policy named `default` has 0 requests remaining
//! and resets in 30 seconds. The field is a structured-field list (RFC 9651) of policy names,
//! each with integer parameters `r` (remaining) and `t` (seconds to reset). A remaining of 0
//! closes the gate until the reset. `RateLimit-Policy` describes the quotas themselves; the
//! reset the gate needs is in `RateLimit`, so that field is not read.
//!
//! A field that does not parse is ignored whole: a malformed header never holds a call back.

use std::time::Duration;

use http::HeaderMap;

/// The field's name.
const RATE_LIMIT: http::HeaderName = http::HeaderName::from_static("ratelimit");

/// The longest reset honoured: a larger `t` is taken as malformed (RFC 9651 integers have at
/// most 15 digits; a day is more than any documented window).
const MAX_RESET: Duration = Duration::from_secs(86_400);

/// How long the server asks the credential to send nothing: the latest reset among the
/// policies with nothing remaining. `None` when no policy is exhausted or the field is absent
/// or malformed.
pub(crate) fn exhausted_for(headers: &HeaderMap) -> Option<Duration> {
    let mut members = Vec::new();
    for value in headers.get_all(&RATE_LIMIT) {
        members.extend(split_members(value.to_str().ok()?)?);
    }
    let mut closed: Option<Duration> = None;
    for member in members {
        let policy = parse_member(member)?;
        if policy.remaining == Some(0)
            && let Some(reset) = policy.reset
        {
            closed = Some(closed.map_or(reset, |longest| longest.max(reset)));
        }
    }
    closed
}

/// One list member: a policy name and the parameters this crate reads.
#[derive(Debug, PartialEq, Eq)]
struct Policy {
    remaining: Option<u64>,
    reset: Option<Duration>,
}

/// Splits a list at the commas outside strings; `None` when a string is unterminated.
fn split_members(text: &str) -> Option<Vec<&str>> {
    let mut members = Vec::new();
    let (mut start, mut in_string, mut escaped) = (0, false, false);
    for (at, byte) in text.bytes().enumerate() {
        match byte {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b',' if !in_string => {
                members.push(text[start..at].trim());
                start = at + 1;
            }
            _ => {}
        }
    }
    if in_string {
        return None;
    }
    members.push(text[start..].trim());
    Some(members)
}

/// Parses `"name";r=0;t=30` (the name may also be a token); `None` when malformed.
fn parse_member(member: &str) -> Option<Policy> {
    let rest = skip_bare_item(member)?;
    let mut policy = Policy {
        remaining: None,
        reset: None,
    };
    for parameter in rest.split(';').skip(1) {
        let parameter = parameter.trim_start_matches(' ');
        let Some((key, value)) = parameter.split_once('=') else {
            // A bare key is a boolean: valid, and not one this crate reads.
            if is_key(parameter) {
                continue;
            }
            return None;
        };
        match key {
            "r" => policy.remaining = Some(integer(value)?),
            "t" => {
                let reset = Duration::from_secs(integer(value)?);
                if reset > MAX_RESET {
                    return None;
                }
                policy.reset = Some(reset);
            }
            _ if is_key(key) => {}
            _ => return None,
        }
    }
    if !rest.is_empty() && !rest.starts_with(';') {
        return None;
    }
    Some(policy)
}

/// The text after the member's name: a quoted string or a token.
fn skip_bare_item(member: &str) -> Option<&str> {
    if let Some(quoted) = member.strip_prefix('"') {
        let mut escaped = false;
        for (at, byte) in quoted.bytes().enumerate() {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => return Some(&quoted[at + 1..]),
                _ => {}
            }
        }
        return None;
    }
    let first = member.bytes().next()?;
    if !(first.is_ascii_alphabetic() || first == b'*') {
        return None;
    }
    let end = member
        .bytes()
        .position(|byte| !is_token_byte(byte))
        .unwrap_or(member.len());
    Some(&member[end..])
}

/// A non-negative structured-field integer: 1 to 15 digits.
fn integer(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 15 || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A structured-field parameter key: `lcalpha / "*"`, then `lcalpha / DIGIT / "_-.*"`.
fn is_key(text: &str) -> bool {
    let mut bytes = text.bytes();
    bytes
        .next()
        .is_some_and(|first| first.is_ascii_lowercase() || first == b'*')
        && bytes.all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"_-.*".contains(&byte)
        })
}

fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(RATE_LIMIT, value.parse().unwrap());
        }
        headers
    }

    fn closed(values: &[&str]) -> Option<Duration> {
        exhausted_for(&headers(values))
    }

    #[test]
    fn a_remaining_of_zero_closes_until_the_reset() {
        assert_eq!(
            closed(&[r#""default";r=0;t=30"#]),
            Some(Duration::from_secs(30))
        );
        assert_eq!(closed(&["default;t=1;r=0"]), Some(Duration::from_secs(1)));
    }

    #[test]
    fn requests_remaining_keep_the_gate_open() {
        assert_eq!(closed(&[r#""default";r=5;t=30"#]), None);
        assert_eq!(closed(&[r#""default";t=30"#]), None, "no r: nothing said");
        assert_eq!(closed(&[r#""default";r=0"#]), None, "no t: no instant");
        assert_eq!(closed(&[]), None);
    }

    #[test]
    fn the_longest_exhausted_policy_wins_across_members_and_lines() {
        assert_eq!(
            closed(&[r#""burst";r=0;t=2, "day";r=0;t=600, "hour";r=9;t=9000"#]),
            Some(Duration::from_secs(600))
        );
        assert_eq!(
            closed(&[r#""burst";r=0;t=2"#, r#""day";r=0;t=60"#]),
            Some(Duration::from_secs(60))
        );
    }

    #[test]
    fn keeps_commas_and_semicolons_inside_policy_names() {
        assert_eq!(
            closed(&[r#""a,b;c=\"d\"";r=0;t=4"#]),
            Some(Duration::from_secs(4))
        );
    }

    #[test]
    fn other_parameters_are_ignored() {
        assert_eq!(
            closed(&[r#""default";r=0;t=3;pk=:YWJj:;x"#]),
            Some(Duration::from_secs(3))
        );
        assert_eq!(closed(&[r#""default";r=0;t=3;Bad=1"#]), None);
    }

    #[test]
    fn a_malformed_field_is_ignored_whole() {
        for value in [
            r#""default";r=0;t=-1"#,
            r#""default";r=zero;t=5"#,
            r#""default;r=0;t=5"#,
            r#""default";r=0;t=1.5"#,
            r#""default"junk;r=0;t=5"#,
            r#""default";R=0;t=5"#,
            "1abc;r=0;t=5",
            r#""default";r=0;t=9999999999999999"#,
            r#""default";r=0;t=86401"#,
            "limit=100, remaining=0, reset=30",
        ] {
            assert_eq!(closed(&[value]), None, "{value}");
        }
        assert_eq!(
            closed(&[r#""ok";r=0;t=5"#, "garbage;;"]),
            None,
            "one bad line spoils the field"
        );
    }
}
