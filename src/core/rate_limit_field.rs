//! The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers, in the shape
//! `docs/wire-contract.md` fixes): `RateLimit-Policy` states a quota, `RateLimit` what is left of
//! it.
//!
//! ```text
//! RateLimit-Policy: "route";q=100;w=60     100 requests per 60-second window
//! RateLimit: "route";r=0;t=30              0 remaining; the window resets in 30 s
//! ```
//!
//! Both are Structured Field lists (RFC 9651): items named by a policy (a string or a token),
//! each with parameters. This file parses them strictly: a field that is not a valid list, a
//! member that is an inner list, or a parameter this crate reads holding something other than
//! a non-negative integer (`r`, `t`) or a positive one (`q`, `w`) makes the field ignored
//! whole. A malformed field never holds a call back, and is never an error. Unknown parameters
//! are skipped (once they parse).
//!
//! Two readers, one per scope, in one pass over each field and without allocating ([`read`]).
//! Which policy speaks for a route is the vendor's to name (its profile's `route_policy`,
//! `"route"` in the example above; `docs/wire-contract.md` names Hodoflow's; other names never
//! speak for a route):
//! - the credential's gate: a policy other than the route's with nothing remaining closes it
//!   until its reset (`limit/gate.rs`);
//! - the route's own window: its quota and window pace the route (`limit/window.rs`), and its
//!   `r=0` holds that route alone until the reset. A route's spent window never closes the
//!   credential's gate: other routes and the API have windows of their own.

use std::borrow::Cow;
use std::time::Duration;

use http::HeaderValue;

use crate::core::answer::Fields;
use crate::core::limit::figures::RouteLimit;

/// The longest reset honoured: a larger `t` is taken as malformed (RFC 9651 integers have at
/// most 15 digits; a day is more than any documented window).
const MAX_RESET: Duration = Duration::from_secs(86_400);

/// The longest window learned from `w`: a day, as for a reset. A longer one is ignored.
const MAX_WINDOW: Duration = MAX_RESET;

/// The largest quota learned from `q`: more is no limit to speak of, and is read as this.
pub(crate) const MAX_QUOTA: u32 = 1_000_000;

/// What an answer says of its route's window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RouteWindow {
    /// The quota and window of the route's policy (`RateLimit-Policy`); the smallest rate
    /// when the field names it more than once.
    pub(crate) limit: Option<RouteLimit>,
    /// Until the window resets, when nothing remains in it (`RateLimit`, `r=0`).
    pub(crate) spent_for: Option<Duration>,
}

/// Both readers over one parse of each field, with no allocation but for a policy name with
/// an escape: the route's window, when the answer is a route's and `route_policy` names its
/// policy (else the default, saying nothing); and how long the server asks the credential to
/// send nothing, the latest reset among the policies other than the route's with nothing
/// remaining (`None` when none is exhausted). A field that is absent or malformed says
/// nothing.
#[cfg(any(test, fuzzing))]
pub(crate) fn read(
    headers: &http::HeaderMap,
    route_policy: Option<&str>,
    in_route: bool,
) -> (RouteWindow, Option<Duration>) {
    read_with(&Fields::of(headers), route_policy, in_route, None)
}

/// [`read`], the route's policy through `memo`: a `RateLimit-Policy` line the same as the last
/// one read is not parsed again.
pub(crate) fn read_with(
    fields: &Fields<'_>,
    route_policy: Option<&str>,
    in_route: bool,
    memo: Option<&PolicyMemo>,
) -> (RouteWindow, Option<Duration>) {
    let route = route_policy.filter(|_| in_route);
    let mut window = RouteWindow::default();
    if let Some(policy) = route {
        window.limit = match memo {
            Some(memo) => memo.route_limit(fields, policy),
            None => route_limit(fields, policy),
        };
    }
    let (spent_for, credential) = exhausted(fields, route_policy).unwrap_or_default();
    if route.is_some() {
        window.spent_for = spent_for;
    }
    (window, credential)
}

/// The last `RateLimit-Policy` line a client read, by its bytes, and what it said of a route's
/// policy. A server sends the same line on answer after answer until its policy changes, so
/// the line is compared, not parsed, on most answers. Only a field of one line is kept. A
/// memo another answer is reading is not waited for: the line is parsed.
#[derive(Debug, Default)]
pub(crate) struct PolicyMemo(std::sync::Mutex<Option<Memo>>);

#[derive(Debug)]
struct Memo {
    line: Box<[u8]>,
    policy: Box<str>,
    limit: Option<RouteLimit>,
}

impl PolicyMemo {
    /// [`route_limit`], read from the memo when `fields` hold the line it keeps.
    fn route_limit(&self, fields: &Fields<'_>, policy: &str) -> Option<RouteLimit> {
        let Some(line) = fields.rate_limit_policy_line() else {
            return route_limit(fields, policy);
        };
        let Ok(mut memo) = self.0.try_lock() else {
            return route_limit(fields, policy);
        };
        if let Some(known) = &*memo
            && *known.line == *line.as_bytes()
            && *known.policy == *policy
        {
            return known.limit;
        }
        let limit = route_limit(fields, policy);
        *memo = Some(Memo {
            line: line.as_bytes().into(),
            policy: policy.into(),
            limit,
        });
        limit
    }
}

/// The `RateLimit` field's exhausted policies: the latest reset of the route's (`route_policy`)
/// and of the others, each `r` a non-negative integer and each `t` one of at most a day; `None`
/// when the field is malformed.
fn exhausted(
    fields: &Fields<'_>,
    route_policy: Option<&str>,
) -> Option<(Option<Duration>, Option<Duration>)> {
    // The usual answer has quota left: it says nothing here, whether it parses or not.
    if !fields
        .rate_limit()
        .any(|line| may_be_spent(line.as_bytes()))
    {
        return Some((None, None));
    }
    parse_exhausted(fields, route_policy)
}

/// [`exhausted`], every line parsed.
fn parse_exhausted(
    fields: &Fields<'_>,
    route_policy: Option<&str>,
) -> Option<(Option<Duration>, Option<Duration>)> {
    let (mut route, mut credential) = (None::<Duration>, None::<Duration>);
    let mut malformed = false;
    each(fields.rate_limit(), |member| {
        let (Some(remaining), Some(reset)) = (optional(&member.r), optional(&member.t)) else {
            malformed = true;
            return;
        };
        let reset = reset.map(Duration::from_secs);
        if reset.is_some_and(|reset| reset > MAX_RESET) {
            malformed = true;
            return;
        }
        if let (Some(0), Some(reset)) = (remaining, reset) {
            let latest = if Some(&*member.name) == route_policy {
                &mut route
            } else {
                &mut credential
            };
            *latest = Some(latest.map_or(reset, |known| known.max(reset)));
        }
    })?;
    (!malformed).then_some((route, credential))
}

/// Whether a `RateLimit` line may hold a member with nothing remaining: an `r=` followed by
/// an integer of zeros (`r=0`, `r=00`, `r=-0`). A line without one has no such member, however
/// it parses. Any other `r=0` (of a key ending in `r`, in a string) is only a false alarm: the
/// line is parsed.
fn may_be_spent(line: &[u8]) -> bool {
    (1..line.len()).any(|at| {
        line[at] == b'=' && line[at - 1] == b'r' && {
            let value = &line[at + 1..];
            let digits = value.strip_prefix(b"-").unwrap_or(value);
            let width = digits.iter().take_while(|b| b.is_ascii_digit()).count();
            width > 0 && digits[..width].iter().all(|b| *b == b'0')
        }
    })
}

/// The route policy's members' quota and window, the smallest rate of them; `None` when there is
/// none, or one without a positive integer `q` and `w` (or with a `w` over a day).
fn route_limit(fields: &Fields<'_>, policy: &str) -> Option<RouteLimit> {
    let mut strictest: Option<RouteLimit> = None;
    let mut malformed = false;
    each(fields.rate_limit_policy(), |member| {
        if member.name != policy || malformed {
            return;
        }
        let Some(limit) = limit_of(&member) else {
            malformed = true;
            return;
        };
        // a/b < c/d, as a·d < c·b: both fit in u128.
        let slower = |a: &RouteLimit, b: &RouteLimit| {
            u128::from(a.requests()) * b.per().as_nanos()
                < u128::from(b.requests()) * a.per().as_nanos()
        };
        if strictest.is_none_or(|known| slower(&limit, &known)) {
            strictest = Some(limit);
        }
    })?;
    strictest.filter(|_| !malformed)
}

/// The quota and window of one member of `RateLimit-Policy`: a positive integer `q` and `w`,
/// `w` at most a day.
fn limit_of(member: &Member<'_>) -> Option<RouteLimit> {
    let quota = positive(member.q.as_ref()?)?;
    let window = Duration::from_secs(positive(member.w.as_ref()?)?);
    if window > MAX_WINDOW {
        return None;
    }
    let quota = u32::try_from(quota).unwrap_or(MAX_QUOTA).min(MAX_QUOTA);
    RouteLimit::new(quota, window).ok()
}

/// `Some(None)` when the parameter is absent, `Some(Some(n))` for a non-negative integer,
/// `None` (the field is malformed) for anything else.
fn optional(value: &Option<Bare>) -> Option<Option<u64>> {
    match value {
        None => Some(None),
        Some(value) => non_negative(value).map(Some),
    }
}

fn non_negative(value: &Bare) -> Option<u64> {
    match value {
        Bare::Integer(n) => u64::try_from(*n).ok(),
        Bare::Other => None,
    }
}

fn positive(value: &Bare) -> Option<u64> {
    non_negative(value).filter(|n| *n > 0)
}

/// One list member: a policy name and the parameters this crate reads (`q`, `w`, `r`, `t`),
/// the later of a repeated key winning; other parameters are parsed and dropped.
#[derive(Debug)]
struct Member<'a> {
    name: Cow<'a, str>,
    q: Option<Bare>,
    w: Option<Bare>,
    r: Option<Bare>,
    t: Option<Bare>,
}

/// A bare item: an integer, the only kind of value this crate reads, or any other.
#[derive(Debug, PartialEq, Eq)]
enum Bare {
    Integer(i64),
    Other,
}

/// Every member of every line of a field, combined into one list (RFC 9651, 4.2), to `visit`;
/// `None` when any line is not visible ASCII or the list does not parse (the members visited
/// before say nothing then). A member that is an inner list is malformed here: a policy is an
/// item.
fn each<'h>(
    lines: impl Iterator<Item = &'h HeaderValue>,
    mut visit: impl FnMut(Member<'h>),
) -> Option<()> {
    for value in lines {
        let text = value.to_str().ok()?;
        if text.trim_matches([' ', '\t']).is_empty() {
            continue;
        }
        Parser::new(text).list(&mut visit)?;
    }
    Some(())
}

/// A parser of RFC 9651's list, over one field line.
struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, at: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let matched = self.peek() == Some(byte);
        if matched {
            self.at += 1;
        }
        matched
    }

    fn skip(&mut self, what: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&what) {
            self.at += 1;
        }
    }

    /// `sf-list`: members separated by commas with optional white space around them.
    fn list(mut self, visit: &mut impl FnMut(Member<'a>)) -> Option<()> {
        self.skip(|b| b == b' ');
        while self.peek().is_some() {
            visit(self.member()?);
            self.skip(|b| b == b' ' || b == b'\t');
            if self.peek().is_none() {
                return Some(());
            }
            if !self.eat(b',') {
                return None;
            }
            self.skip(|b| b == b' ' || b == b'\t');
            // A trailing comma.
            self.peek()?;
        }
        Some(())
    }

    /// An item whose bare item is a policy name (a string or a token), then its parameters.
    fn member(&mut self) -> Option<Member<'a>> {
        let name = match self.peek()? {
            b'"' => self.string()?,
            b if b.is_ascii_alphabetic() || b == b'*' => Cow::Borrowed(self.token()),
            // A number, a byte sequence, a boolean, an inner list...: not a policy.
            _ => return None,
        };
        let mut member = Member {
            name,
            q: None,
            w: None,
            r: None,
            t: None,
        };
        while self.eat(b';') {
            self.skip(|b| b == b' ');
            let key = self.key()?;
            let value = if self.eat(b'=') {
                self.bare()?
            } else {
                Bare::Other
            };
            let slot = match key {
                "q" => &mut member.q,
                "w" => &mut member.w,
                "r" => &mut member.r,
                "t" => &mut member.t,
                _ => continue,
            };
            *slot = Some(value);
        }
        Some(member)
    }

    /// `key`: `lcalpha / "*"`, then `lcalpha / DIGIT / "_" / "-" / "." / "*"`.
    fn key(&mut self) -> Option<&'a str> {
        let start = self.at;
        if !self
            .peek()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'*')
        {
            return None;
        }
        self.skip(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.*".contains(&b));
        Some(&self.text[start..self.at])
    }

    /// A bare item of any kind.
    fn bare(&mut self) -> Option<Bare> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string().map(|_| Bare::Other),
            b':' => self.bytes(),
            b'?' => {
                self.at += 1;
                (self.eat(b'0') || self.eat(b'1')).then_some(Bare::Other)
            }
            b'@' => {
                self.at += 1;
                match self.number()? {
                    Bare::Integer(_) => Some(Bare::Other),
                    Bare::Other => None,
                }
            }
            b'%' => self.display_string(),
            b if b.is_ascii_alphabetic() || b == b'*' => {
                self.token();
                Some(Bare::Other)
            }
            _ => None,
        }
    }

    /// An integer (at most 15 digits) or a decimal (at most 12 digits, a dot, 1 to 3 digits).
    fn number(&mut self) -> Option<Bare> {
        let negative = self.eat(b'-');
        let start = self.at;
        self.skip(|b| b.is_ascii_digit());
        let whole = &self.text[start..self.at];
        if whole.is_empty() {
            return None;
        }
        if self.eat(b'.') {
            let fraction = self.at;
            self.skip(|b| b.is_ascii_digit());
            let digits = self.at - fraction;
            return (whole.len() <= 12 && (1..=3).contains(&digits)).then_some(Bare::Other);
        }
        if whole.len() > 15 {
            return None;
        }
        // At most 15 ASCII digits: no overflow, and no general parser's checks.
        let value = whole
            .bytes()
            .fold(0i64, |value, digit| value * 10 + i64::from(digit - b'0'));
        Some(Bare::Integer(if negative { -value } else { value }))
    }

    /// A string: visible ASCII and space, `\"` and `\\` the only escapes. Returns its value,
    /// borrowed from the field when it has no escape.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.at;
        let plain = self.text.as_bytes()[start..]
            .iter()
            .position(|b| !matches!(b, 0x20..=0x7e) || *b == b'"' || *b == b'\\');
        if let Some(end) = plain
            && self.text.as_bytes()[start + end] == b'"'
        {
            self.at = start + end + 1;
            return Some(Cow::Borrowed(&self.text[start..start + end]));
        }
        let mut value = String::new();
        loop {
            match self.peek()? {
                b'\\' => {
                    self.at += 1;
                    let escaped = self.peek().filter(|b| *b == b'"' || *b == b'\\')?;
                    value.push(char::from(escaped));
                }
                b'"' => {
                    self.at += 1;
                    return Some(Cow::Owned(value));
                }
                b @ 0x20..=0x7e => value.push(char::from(b)),
                _ => return None,
            }
            self.at += 1;
        }
    }

    /// A token: `ALPHA / "*"`, then `tchar / ":" / "/"`.
    fn token(&mut self) -> &'a str {
        let start = self.at;
        self.at += 1;
        self.skip(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b));
        &self.text[start..self.at]
    }

    /// A byte sequence: base64 between colons.
    fn bytes(&mut self) -> Option<Bare> {
        self.eat(b':');
        self.skip(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
        self.eat(b':').then_some(Bare::Other)
    }

    /// A display string: `%"`, then visible ASCII and space with `%xx` (lower-case hex) for
    /// anything else, UTF-8 once decoded, then `"`.
    fn display_string(&mut self) -> Option<Bare> {
        self.eat(b'%');
        if !self.eat(b'"') {
            return None;
        }
        let mut decoded = Vec::new();
        loop {
            match self.peek()? {
                b'%' => {
                    let hex = self.text.get(self.at + 1..self.at + 3)?;
                    if !hex
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                    {
                        return None;
                    }
                    decoded.push(u8::from_str_radix(hex, 16).ok()?);
                    self.at += 3;
                }
                b'"' => {
                    self.at += 1;
                    return std::str::from_utf8(&decoded).ok().map(|_| Bare::Other);
                }
                b @ 0x20..=0x7e => {
                    decoded.push(b);
                    self.at += 1;
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderMap;

    use super::*;
    use crate::core::answer::{RATE_LIMIT, RATE_LIMIT_POLICY};

    /// A vendor's name for a route's policy, as Hodoflow's.
    const ROUTE: &str = "route";

    fn headers(name: &http::HeaderName, values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(name, value.parse().unwrap());
        }
        headers
    }

    fn closed(values: &[&str]) -> Option<Duration> {
        read(&headers(&RATE_LIMIT, values), Some(ROUTE), false).1
    }

    fn policy(values: &[&str]) -> Option<(u32, u64)> {
        read(&headers(&RATE_LIMIT_POLICY, values), Some(ROUTE), true)
            .0
            .limit
            .map(|limit| (limit.requests(), limit.per().as_secs()))
    }

    #[test]
    fn a_memo_reads_each_policy_line_as_a_parse_does() {
        let memo = PolicyMemo::default();
        let lines: &[&[&str]] = &[
            &[r#""route";q=100;w=60"#],
            &[r#""route";q=100;w=60"#],
            &[r#""route";q=50;w=60"#],
            &[r#""route";q=50;w=60"#, r#""route";q=10;w=60"#],
            &[r#""route";q=50;w=60"#],
            &[r#""route";q=0;w=60"#],
            &[r#""other";q=5;w=1"#],
            &[],
            &[r#""route";q=50;w=60"#],
        ];
        for policy in ["route", "other", "route"] {
            for values in lines {
                let headers = headers(&RATE_LIMIT_POLICY, values);
                assert_eq!(
                    read_with(&Fields::of(&headers), Some(policy), true, Some(&memo)),
                    read(&headers, Some(policy), true),
                    "{values:?} for {policy}"
                );
            }
        }
        let kept = memo.0.lock().unwrap();
        let kept = kept.as_ref().expect("a line of one field line is kept");
        assert_eq!(&*kept.line, br#""route";q=50;w=60"#);
        assert_eq!(kept.limit.map(|limit| limit.requests()), Some(50));
    }

    #[test]
    fn a_line_without_a_zero_remaining_is_not_parsed_and_one_with_is() {
        for spent in [
            r#""route";r=0;t=5"#,
            r#""route";r=00;t=5"#,
            r#""route";r=-0;t=5"#,
            r#"a;r=1, "route";r=0"#,
        ] {
            assert!(may_be_spent(spent.as_bytes()), "{spent}");
        }
        for left in [
            r#""route";r=10;t=5"#,
            r#""route";r=01;t=5"#,
            r#""route";r;t=0"#,
            r#""route";t=0"#,
            "",
        ] {
            assert!(!may_be_spent(left.as_bytes()), "{left}");
        }
    }

    proptest::proptest! {
        /// The quick look says "nothing spent" only of fields whose parse says so too.
        #[test]
        fn the_quick_look_never_misses_a_spent_policy(
            members in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["\"route\"", "a", "\"b;r=0\"", "*x"]),
                    proptest::collection::vec(
                        (
                            proptest::sample::select(vec!["r", "t", "r", "t", "q", "hr", "r0"]),
                            proptest::prop_oneof![
                                9 => proptest::sample::select(vec!["0", "00", "-0", "1", "10", "01"]),
                                1 => proptest::sample::select(vec!["0.0", "\"0\"", "?0", "", "-1"]),
                            ],
                        ),
                        0..4,
                    ),
                ),
                0..4,
            ),
            lines in 1usize..3,
        ) {
            let member = |(name, parameters): &(&str, Vec<(&str, &str)>)| {
                let parameters: String = parameters
                    .iter()
                    .map(|(key, value)| match *value {
                        "" => format!(";{key}"),
                        value => format!(";{key}={value}"),
                    })
                    .collect();
                format!("{name}{parameters}")
            };
            let list: Vec<String> = members.iter().map(member).collect();
            let per_line = list.len().div_ceil(lines).max(1);
            let values: Vec<String> = list.chunks(per_line).map(|chunk| chunk.join(", ")).collect();
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            let headers = headers(&RATE_LIMIT, &values);
            for policy in [Some(ROUTE), None] {
                proptest::prop_assert_eq!(
                    exhausted(&Fields::of(&headers), policy).unwrap_or_default(),
                    parse_exhausted(&Fields::of(&headers), policy).unwrap_or_default(),
                    "{:?}", values
                );
            }
        }
    }

    #[test]
    fn a_remaining_of_zero_closes_until_the_reset() {
        assert_eq!(
            closed(&[r#""default";r=0;t=30"#]),
            Some(Duration::from_secs(30))
        );
        assert_eq!(closed(&["default;t=1;r=0"]), Some(Duration::from_secs(1)));
        assert_eq!(
            closed(&[r#""default";r=-0;t=5"#]),
            Some(Duration::from_secs(5)),
            "RFC 9651: -0 is the integer 0 (found by the fuzz target)"
        );
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
        assert_eq!(
            closed(&[r#""default";r=0;t=3;n="a;b";d=1.5;b=?1;at=@1700000000;s=%"caf%c3%a9""#]),
            Some(Duration::from_secs(3)),
            "a string holding a semicolon, a decimal, a boolean, a date, a display string"
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
            r#""default";r=0;t=5,"#,
            r#"("default");r=0;t=5"#,
            r#""default";r=0;t=5;n="a\x""#,
            r#""default";r=0;t=5;s=%"%ff""#,
            r#""default";r=0;t=5;p=:YW"#,
        ] {
            assert_eq!(closed(&[value]), None, "{value}");
        }
        assert_eq!(
            closed(&[r#""ok";r=0;t=5"#, "garbage;;"]),
            None,
            "one bad line spoils the field"
        );
    }

    #[test]
    fn a_route_s_spent_window_holds_the_route_not_the_credential() {
        let spent = headers(&RATE_LIMIT, &[r#""route";r=0;t=7"#]);
        assert_eq!(read(&spent, Some(ROUTE), true).1, None);
        assert_eq!(
            read(&spent, Some(ROUTE), true).0.spent_for,
            Some(Duration::from_secs(7))
        );
        let left = headers(&RATE_LIMIT, &[r#""route";r=3;t=7, "api";r=0;t=2"#]);
        assert_eq!(read(&left, Some(ROUTE), true).0.spent_for, None);
        assert_eq!(
            read(&left, Some(ROUTE), true).1,
            Some(Duration::from_secs(2))
        );
    }

    #[test]
    fn reads_the_route_policy_s_quota_and_window() {
        assert_eq!(policy(&[r#""route";q=1000;w=60"#]), Some((1000, 60)));
        assert_eq!(policy(&["route;w=2;q=5;pk=:YWJj:"]), Some((5, 2)));
        assert_eq!(
            policy(&[r#""api";q=10;w=1, "route";q=100;w=60"#]),
            Some((100, 60)),
            "another policy's figures are not the route's"
        );
        assert_eq!(policy(&[r#""api";q=10;w=1"#]), None);
        assert_eq!(policy(&[]), None);
    }

    #[test]
    fn of_two_route_policies_the_slower_paces() {
        assert_eq!(
            policy(&[r#""route";q=100;w=60"#, r#""route";q=10;w=1"#]),
            Some((100, 60)),
            "100 per 60 s is slower than 10 per second"
        );
        assert_eq!(
            policy(&[r#""route";q=20;w=1, "route";q=1000;w=60"#]),
            Some((1000, 60)),
            "1000 per 60 s is slower than 20 per second"
        );
    }

    #[test]
    fn an_absurd_quota_is_bounded_and_a_bad_policy_is_ignored() {
        assert_eq!(
            policy(&[r#""route";q=999999999999999;w=60"#]),
            Some((MAX_QUOTA, 60))
        );
        for value in [
            r#""route";q=0;w=60"#,
            r#""route";q=100;w=0"#,
            r#""route";q=-1;w=60"#,
            r#""route";q=100"#,
            r#""route";w=60"#,
            r#""route";q=1.5;w=60"#,
            r#""route";q=100;w=86401"#,
            r#""route";q=100;w=60;;"#,
            r#""route";q="100";w=60"#,
            r#""route";q=1000000000000000;w=60"#,
        ] {
            assert_eq!(policy(&[value]), None, "{value}");
        }
    }

    #[test]
    fn a_field_outside_visible_ascii_is_ignored() {
        let mut map = HeaderMap::new();
        map.append(
            RATE_LIMIT_POLICY,
            http::HeaderValue::from_bytes("\"route\";q=5;w=1;n=\"é\"".as_bytes()).unwrap(),
        );
        assert_eq!(read(&map, Some(ROUTE), true).0.limit, None);
    }
}
