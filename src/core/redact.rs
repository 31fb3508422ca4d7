//! What never reaches a log line or a kept record: a body's bytes, and a secret, which leaves a
//! placeholder.
//!
//! Which part of a path is a secret is a vendor's rule (Hodoflow's route token:
//! `vendors/hodoflow/routes.rs`).
//!
//! # What a server says is cleaned where it enters
//!
//! A server, or a proxy in front of it, may echo what it was sent: the bearer token in an
//! `x-request-id`, the route token in an error code, the client secret in a run ID. So every
//! text the SDK keeps of an answer (the `x-request-id` of each attempt, the error code an error
//! quotes, a webhook's run ID, the OAuth error code of a refused exchange) passes a
//! [`Cleaner`] where it enters the record that keeps it, before anything reads it:
//!
//! 1. every secret the client holds is replaced by [`REDACTED`]: whole, in the forms it takes
//!    percent-encoded (a form body, a path) or escaped in a JSON or Rust string, and any piece of
//!    [`PIECE`] bytes or more of any of those forms (a proxy that cut it, a server that quoted
//!    half of it);
//! 2. control characters and the bidirectional formatting characters (which reorder what a
//!    reader sees) are escaped visibly, Rust-style (`\x1b`, `\n`, `\u{202e}`), a backslash
//!    doubled whenever anything is escaped, so the text reads back as the value it is;
//! 3. only then is it bounded, on a character boundary: a secret across the cut was removed
//!    whole before.
//!
//! Only the server's part is cleaned: the SDK's own words around it are never searched, so a
//! token that happens to read `accepted` cannot rewrite a message ([`Error`](crate::Error)
//! keeps where its quote of the server sits).
//!
//! The secrets are the client's [`Secrets`] (what its exchanger declares it holds, such as a
//! client secret or a static token; every access token it was issued, the last
//! [`TOKENS_KEPT`]; the client's signing secrets) and, per call, its route token, its own
//! signing secrets and the request's own `Authorization` (a middleware stack without an
//! exchanger sends the caller's).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::ops::Range;
use std::sync::{Arc, PoisonError, RwLock};

use crate::core::map::Map;

/// A body in a `Debug` line: its length, never its bytes (never log a
/// sensitive body).
pub(crate) struct BodyLen(pub(crate) usize);

impl std::fmt::Debug for BodyLen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes>", self.0)
    }
}

/// The placeholder that stands for a removed secret.
pub(crate) const REDACTED: &str = "<redacted>";

/// The fewest bytes of a secret (in any of its forms) recognised as a piece of it.
pub(crate) const PIECE: usize = 8;

/// A secret shorter than this is not cleaned: it protects nothing (it can be guessed) and would
/// turn short words into markers. From [`MIN_SECRET`] to [`PIECE`] bytes, a form is matched
/// whole only.
const MIN_SECRET: usize = 4;

/// How many of the access tokens a client was issued are kept to clean with: the current one
/// and those before it, which a server may still echo from a request in flight.
pub(crate) const TOKENS_KEPT: usize = 16;

/// The secrets a client holds, shared by its clones: to clean what a server echoes.
///
/// `Debug` prints how many there are, never one of them.
#[derive(Clone, Default)]
pub(crate) struct Secrets(Arc<RwLock<Known>>);

#[derive(Default)]
struct Known {
    /// The client secret, a static token, the client's signing secrets.
    fixed: Vec<Box<str>>,
    /// The last [`TOKENS_KEPT`] access tokens, the newest last.
    tokens: VecDeque<Box<str>>,
    /// Both, ready to scan with.
    pattern: Arc<Pattern>,
    /// The patterns of the routes' keys the client sent to lately, each merged with
    /// `pattern`, by key: built once a route rather than once a call (at most
    /// [`ROUTES_KEPT`]), and again when the client's secrets change.
    routes: Map<Box<str>, Arc<Pattern>>,
}

/// The routes' patterns kept at most; past this they are forgotten and built again.
const ROUTES_KEPT: usize = 256;

impl Known {
    fn rebuild(&mut self) {
        let mut pattern = Pattern::default();
        for secret in self.fixed.iter().chain(&self.tokens) {
            pattern.add(secret);
        }
        pattern.finish();
        self.pattern = Arc::new(pattern);
        self.routes.clear();
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known = self.0.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Secrets")
            .field("fixed", &known.fixed.len())
            .field("tokens", &known.tokens.len())
            .finish()
    }
}

impl Secrets {
    /// Adds a secret the client holds for as long as it lives.
    pub(crate) fn add(&self, secret: &str) {
        if secret.len() < MIN_SECRET {
            return;
        }
        let mut known = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if known.fixed.iter().any(|known| &**known == secret) {
            return;
        }
        known.fixed.push(secret.into());
        known.rebuild();
    }

    /// Adds an access token the client was issued; the oldest of more than [`TOKENS_KEPT`] is
    /// forgotten.
    pub(crate) fn add_token(&self, token: &str) {
        if token.len() < MIN_SECRET {
            return;
        }
        let mut known = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if known.tokens.iter().any(|known| &**known == token) {
            return;
        }
        if known.tokens.len() == TOKENS_KEPT {
            known.tokens.pop_front();
        }
        known.tokens.push_back(token.into());
        known.rebuild();
    }

    fn pattern(&self) -> Arc<Pattern> {
        Arc::clone(
            &self
                .0
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .pattern,
        )
    }

    /// The client's pattern merged with the pattern of a route's `key` (a secret, such as a
    /// token), built on the route's first call and kept, so a text is scanned once for both.
    fn with_route(&self, key: &str) -> Arc<Pattern> {
        {
            let known = self.0.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(route) = known.routes.get(key) {
                return Arc::clone(route);
            }
        }
        let own = Pattern::of([key]);
        let mut known = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if known.routes.len() >= ROUTES_KEPT {
            known.routes.clear();
        }
        let route = Arc::new(known.pattern.merged(&own));
        known.routes.insert(key.into(), Arc::clone(&route));
        route
    }
}

/// Every form of some secrets, ready to find in a text: each [`PIECE`]-byte window of each
/// form as an integer (sorted, for a binary search), and the forms too short for a window.
///
/// A text is cleaned on every answer (its `x-request-id`, a run ID), so finding nothing must be
/// cheap: `seen` has one bit set per window (of [`SEEN_BITS`], by a hash of it), and a window of
/// the text whose bit is clear is no piece of a secret without a search. With a client secret
/// and a few tokens (some hundreds of windows) a window that is no piece of one searches about
/// once in twenty.
struct Pattern {
    windows: Vec<u64>,
    seen: [u64; SEEN_BITS / 64],
    short: Vec<Box<str>>,
}

impl Default for Pattern {
    fn default() -> Self {
        Self {
            windows: Vec::new(),
            seen: [0; SEEN_BITS / 64],
            short: Vec::new(),
        }
    }
}

impl Pattern {
    /// Every form of `secrets`, ready to find.
    fn of<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut pattern = Self::default();
        for secret in secrets {
            pattern.add(secret);
        }
        pattern.finish();
        pattern
    }

    fn add(&mut self, secret: &str) {
        if secret.len() < MIN_SECRET {
            return;
        }
        for form in forms(secret) {
            if form.len() >= PIECE {
                self.windows
                    .extend(form.as_bytes().windows(PIECE).map(window));
            } else if !self.short.iter().any(|short| **short == *form) {
                self.short.push(form.into());
            }
        }
    }

    /// The forms of both `self` and `other`, found in one scan.
    fn merged(&self, other: &Pattern) -> Self {
        let mut windows = self.windows.clone();
        windows.extend_from_slice(&other.windows);
        let mut short = self.short.clone();
        for form in &other.short {
            if !short.contains(form) {
                short.push(form.clone());
            }
        }
        let mut pattern = Self {
            windows,
            seen: [0; SEEN_BITS / 64],
            short,
        };
        pattern.finish();
        pattern
    }

    fn finish(&mut self) {
        self.windows.sort_unstable();
        self.windows.dedup();
        for window in &self.windows {
            let bit = bit(*window);
            self.seen[bit / 64] |= 1 << (bit % 64);
        }
        self.short.sort_by_key(|form| std::cmp::Reverse(form.len()));
    }

    fn is_empty(&self) -> bool {
        self.windows.is_empty() && self.short.is_empty()
    }

    /// Whether `window` is a window of a form of a secret: its bit first, then the windows.
    fn holds(&self, window: u64) -> bool {
        let bit = bit(window);
        self.seen[bit / 64] & (1 << (bit % 64)) != 0 && self.windows.binary_search(&window).is_ok()
    }

    /// Adds to `found` the byte ranges of `text` that are a form of a secret of `patterns`, or a
    /// piece of one: each window of the text is read and hashed once for every pattern.
    fn find_any(patterns: &[&Pattern], text: &str, found: &mut Vec<Range<usize>>) {
        match patterns {
            [] => {}
            // One pattern (the usual cleaner: the client's secrets and a route's key): no loop
            // over the patterns inside the loop over the windows.
            [pattern] if !pattern.windows.is_empty() => {
                scan(text, found, |window| pattern.holds(window));
            }
            [_] => {}
            _ => scan(text, found, |window| {
                patterns.iter().any(|pattern| pattern.holds(window))
            }),
        }
        for form in patterns.iter().flat_map(|pattern| &pattern.short) {
            found.extend(
                text.match_indices(&**form)
                    .map(|(at, form)| at..at + form.len()),
            );
        }
    }
}

/// Adds to `found` the range of each window of `text` that `holds`.
fn scan(text: &str, found: &mut Vec<Range<usize>>, holds: impl Fn(u64) -> bool) {
    for (at, bytes) in text.as_bytes().windows(PIECE).enumerate() {
        if holds(window(bytes)) {
            found.push(at..at + PIECE);
        }
    }
}

/// A window of [`PIECE`] bytes as one integer.
fn window(bytes: &[u8]) -> u64 {
    let mut word = [0; PIECE];
    word.copy_from_slice(bytes);
    u64::from_ne_bytes(word)
}

/// The bits of [`Pattern::seen`]: 4,096, half a kilobyte a pattern.
const SEEN_BITS: usize = 4096;

/// Which of the [`SEEN_BITS`] bits of [`Pattern::seen`] stands for `window`: the top twelve
/// bits of a multiplicative hash, so every byte of the window moves it.
fn bit(window: u64) -> usize {
    (window.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SEEN_BITS.trailing_zeros())) as usize
}

/// Whether every form of `secret` is `secret` itself: only letters, digits and `*-._`, which
/// percent-encoding, JSON and Rust strings all leave as they are (most tokens are such).
fn plain(secret: &str) -> bool {
    secret
        .bytes()
        .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'*' | b'-' | b'.' | b'_'))
}

/// The forms a server or a proxy may quote `secret` in: as it is, percent-encoded as in a form
/// body (`+` or `%20` for a space, upper- or lower-case hex), and escaped in a JSON or a Rust
/// string.
fn forms(secret: &str) -> Vec<String> {
    if plain(secret) {
        return vec![secret.to_owned()];
    }
    let quoted = |text: String| text[1..text.len() - 1].to_owned();
    let mut forms = vec![
        secret.to_owned(),
        percent(secret, "+", false),
        percent(secret, "%20", false),
        percent(secret, "+", true),
        serde_json::to_string(secret).map_or_else(|_| secret.to_owned(), quoted),
        quoted(format!("{secret:?}")),
    ];
    forms.sort();
    forms.dedup();
    forms
}

/// `text` percent-encoded as `application/x-www-form-urlencoded` writes it: letters, digits and
/// `*-._` as they are, a space as `space`, every other byte `%XX`.
fn percent(text: &str, space: &str, lower: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(char::from(byte));
            }
            b' ' => out.push_str(space),
            byte if lower => {
                let _ = write!(out, "%{byte:02x}");
            }
            byte => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}

/// Secrets fixed when they are set, ready to clean with: a signer's, whose pattern is built
/// once rather than on every call.
#[derive(Clone, Default)]
pub(crate) struct Prepared(Arc<Pattern>);

impl Prepared {
    /// `secrets`, ready to clean with.
    pub(crate) fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        Self(Arc::new(Pattern::of(secrets)))
    }
}

/// Cleans a server's text against the secrets of one call (see the module docs).
#[derive(Clone)]
pub(crate) struct Cleaner {
    /// The client's secrets, as they were when the call ended.
    shared: Arc<Pattern>,
    /// The call's prepared ones: its signing secrets, if it signs.
    prepared: Option<Arc<Pattern>>,
    /// The call's own: its route token, `Authorization`.
    own: Arc<Pattern>,
}

impl std::fmt::Debug for Cleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cleaner")
    }
}

/// The pattern of no secret, shared: a call whose cleaner lacks a part holds no allocation
/// (with its half-kilobyte `seen`) for it.
fn no_pattern() -> Arc<Pattern> {
    static NONE: std::sync::LazyLock<Arc<Pattern>> = std::sync::LazyLock::new(Arc::default);
    Arc::clone(&NONE)
}

/// A cleaner of no secret.
impl Default for Cleaner {
    fn default() -> Self {
        Self {
            shared: no_pattern(),
            prepared: None,
            own: no_pattern(),
        }
    }
}

impl Cleaner {
    /// A cleaner of `secrets` alone.
    pub(crate) fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        Self::with(None, secrets)
    }

    /// A cleaner of the client's `shared` secrets and of `own`.
    pub(crate) fn with<'a>(
        shared: Option<&Secrets>,
        own: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        Self {
            shared: shared.map_or_else(no_pattern, Secrets::pattern),
            prepared: None,
            own: Arc::new(Pattern::of(own)),
        }
    }

    /// A cleaner of the client's `shared` secrets and of one route's `key`, whose pattern the
    /// client keeps from the route's first call.
    pub(crate) fn for_route(shared: &Secrets, key: &str) -> Self {
        Self {
            shared: shared.with_route(key),
            prepared: None,
            own: no_pattern(),
        }
    }

    /// This cleaner, cleaning the `prepared` secrets too.
    pub(crate) fn and(mut self, prepared: Option<&Prepared>) -> Self {
        if let Some(Prepared(pattern)) = prepared {
            self.prepared = Some(Arc::clone(pattern));
        }
        self
    }

    /// `text`, a server's words, with every secret (whole, encoded, or a piece of
    /// [`PIECE`] bytes or more) replaced by [`REDACTED`]; neither escaped nor bounded.
    pub(crate) fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut patterns: [&Pattern; 3] = [&self.shared, &self.own, &self.shared];
        let mut count = 0;
        for pattern in [Some(&self.shared), self.prepared.as_ref(), Some(&self.own)]
            .into_iter()
            .flatten()
            .filter(|pattern| !pattern.is_empty())
        {
            patterns[count] = pattern;
            count += 1;
        }
        let mut found = Vec::new();
        Pattern::find_any(&patterns[..count], text, &mut found);
        if found.is_empty() {
            return Cow::Borrowed(text);
        }
        found.sort_unstable_by_key(|range| range.start);
        let mut out = String::with_capacity(text.len());
        let mut kept = 0;
        let mut ranges = found.into_iter().peekable();
        while let Some(range) = ranges.next() {
            let mut end = range.end;
            // Overlapping and touching pieces are one secret's.
            while let Some(next) = ranges.next_if(|next| next.start <= end) {
                end = end.max(next.end);
            }
            let start = floor_boundary(text, range.start.max(kept));
            let end = ceil_boundary(text, end);
            out.push_str(&text[kept..start]);
            out.push_str(REDACTED);
            kept = end;
        }
        out.push_str(&text[kept..]);
        Cow::Owned(out)
    }

    /// `text`, a server's words as kept: redacted ([`redact`](Self::redact)), escaped
    /// ([`escape`]), then bounded to `limit` bytes ([`bound`]).
    pub(crate) fn text(&self, text: &str, limit: usize) -> String {
        let redacted = self.redact(text);
        let escaped = escape(&redacted);
        bound(&escaped, limit).to_owned()
    }

    /// [`text`](Self::text) in place: `text` is left as it is, not copied, when nothing in
    /// it is a secret, hidden or past `limit` (the usual request or run ID).
    pub(crate) fn clean(&self, text: &mut String, limit: usize) {
        let cleaned = {
            let redacted = self.redact(text);
            let escaped = escape(&redacted);
            let kept = bound(&escaped, limit);
            (matches!(redacted, Cow::Owned(_))
                || matches!(escaped, Cow::Owned(_))
                || kept.len() < text.len())
            .then(|| kept.to_owned())
        };
        if let Some(cleaned) = cleaned {
            *text = cleaned;
        }
    }
}

/// Whether `c` is escaped in a server's text: a C0 or C1 control, DEL, a bidirectional
/// formatting character (marks, embeddings, overrides, isolates), or a line or paragraph
/// separator.
pub(crate) fn is_hidden(c: char) -> bool {
    matches!(c,
        '\0'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        | '\u{2028}' | '\u{2029}')
}

/// `text` as it is when no character of it is hidden (a control, a bidirectional override, a
/// line or paragraph separator); otherwise each such character written as an escape (`\n`, `\r`, `\t`, `\x1b`, `\u{202e}`) and each backslash
/// doubled, so what is shown reads back as the value, and no escape in it can be taken for
/// another.
pub fn escape(text: &str) -> Cow<'_, str> {
    // Printable ASCII holds no hidden character: most texts are read eight bytes at a time
    // only.
    if crate::core::ascii::printable(text.as_bytes()) || !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0'..='\u{1f}' | '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if is_hidden(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` cut to at most `limit` bytes on a character boundary, and before a `<redacted>`
/// marker the cut would split.
pub fn bound(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let end = floor_boundary(text, limit);
    let from = floor_boundary(text, end.saturating_sub(REDACTED.len() - 1));
    let split = text[from..end]
        .match_indices('<')
        .map(|(at, _)| from + at)
        .find(|&at| text[at..].starts_with(REDACTED) && at + REDACTED.len() > end);
    &text[..split.unwrap_or(end)]
}

/// The largest character boundary of `text` at or before `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest character boundary of `text` at or after `at`.
fn ceil_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "hft_TOKEN_0123456789abcdef";
    const CLIENT_SECRET: &str = "cs_SECRET/with+and=";

    fn cleaner() -> Cleaner {
        let secrets = Secrets::default();
        secrets.add(CLIENT_SECRET);
        secrets.add_token(TOKEN);
        Cleaner::with(Some(&secrets), ["trg_ROUTE_token_77"])
    }

    #[test]
    fn every_secret_is_replaced_whole_and_other_text_kept() {
        let cleaner = cleaner();
        assert_eq!(
            cleaner.redact(&format!(
                "req {TOKEN} on trg_ROUTE_token_77, again {TOKEN}."
            )),
            "req <redacted> on <redacted>, again <redacted>."
        );
        assert!(matches!(cleaner.redact("req_1234 plain"), Cow::Borrowed(_)));
        assert!(matches!(Cleaner::default().redact(TOKEN), Cow::Borrowed(_)));
    }

    #[test]
    fn a_route_s_kept_pattern_cleans_a_token_issued_after_it_was_built() {
        let secrets = Secrets::default();
        secrets.add(CLIENT_SECRET);
        secrets.add_token(TOKEN);
        let route = "trg_ROUTE_token_77";
        let text = |token: &str| format!("{token} {route} {CLIENT_SECRET} plain");
        let first = Cleaner::for_route(&secrets, route);
        assert_eq!(
            first.redact(&text(TOKEN)),
            "<redacted> <redacted> <redacted> plain"
        );
        let newer = "hft_NEWER_fedcba9876543210";
        secrets.add_token(newer);
        let second = Cleaner::for_route(&secrets, route);
        assert_eq!(
            second.redact(&text(newer)),
            "<redacted> <redacted> <redacted> plain"
        );
        assert_eq!(
            second.redact(&text(TOKEN)),
            "<redacted> <redacted> <redacted> plain",
            "the token before it too"
        );
        assert!(matches!(second.redact("req_4711 plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_piece_of_eight_bytes_or_more_is_a_secret_and_a_shorter_one_is_not() {
        let cleaner = cleaner();
        assert_eq!(
            cleaner.redact(&format!("x{}y", &TOKEN[5..13])),
            "x<redacted>y"
        );
        assert_eq!(cleaner.redact(&format!("x{}", &TOKEN[..20])), "x<redacted>");
        assert_eq!(
            cleaner.redact(&TOKEN[3..10]),
            &TOKEN[3..10],
            "7 bytes: no piece"
        );
    }

    #[test]
    fn encoded_and_escaped_forms_are_redacted() {
        let cleaner = cleaner();
        for form in [
            "cs_SECRET%2Fwith%2Band%3D",
            "cs_SECRET%2fwith%2band%3d",
            "cs_SECRET/with+and=",
        ] {
            assert_eq!(
                cleaner.redact(&format!("<{form}>")),
                "<<redacted>>",
                "{form}"
            );
        }
        let quoted = Cleaner::new(["a \"quoted\" secret"]);
        assert_eq!(
            quoted.redact(r#"{"e":"a \"quoted\" secret"}"#),
            r#"{"e":"<redacted>"}"#
        );
    }

    #[test]
    fn a_plain_secret_is_its_only_form_and_any_other_has_each_encoding() {
        assert_eq!(forms("trg_demo-Token.1*"), ["trg_demo-Token.1*"]);
        let forms = forms("a b/\"c");
        for form in [
            "a b/\"c",
            "a+b%2F%22c",
            "a%20b%2F%22c",
            "a+b%2f%22c",
            "a b/\\\"c",
        ] {
            assert!(forms.iter().any(|f| f == form), "{form} in {forms:?}");
        }
    }

    #[test]
    fn short_secrets_are_matched_whole_and_tiny_ones_not_at_all() {
        let cleaner = Cleaner::new(["abcde", "xy"]);
        assert_eq!(cleaner.redact("1abcde2 xy"), "1<redacted>2 xy");
    }

    #[test]
    fn a_secret_across_the_cut_is_removed_before_the_text_is_bounded() {
        let cleaner = cleaner();
        for at in 90..110 {
            let text = format!("{}{TOKEN}tail", "r".repeat(at));
            let kept = cleaner.text(&text, 100);
            assert!(kept.len() <= 100, "{at}");
            assert!(!kept.contains("hft_"), "{at}: {kept}");
            assert!(
                kept.ends_with('r') || kept.ends_with(REDACTED),
                "a marker is never cut: {at}: {kept}"
            );
        }
    }

    #[test]
    fn controls_and_bidi_characters_are_escaped_visibly() {
        assert_eq!(escape("plain é"), "plain é");
        assert_eq!(escape("a\u{1b}[2J\nb"), "a\\x1b[2J\\nb");
        assert_eq!(
            escape("x\u{202e}y\u{2066}z\u{9b}"),
            "x\\u{202e}y\\u{2066}z\\u{9b}"
        );
        assert_eq!(escape("\\n and \0"), "\\\\n and \\x00");
        assert_eq!(escape(&escape("a\u{7}")), escape("a\u{7}"), "idempotent");
    }

    #[test]
    fn bounds_on_a_character_boundary() {
        assert_eq!(bound("ééé", 5), "éé");
        assert_eq!(bound("short", 100), "short");
        assert_eq!(bound("ab<redacted>cd", 5), "ab");
        assert_eq!(bound("ab<redacted>cd", 12), "ab<redacted>");
    }

    #[test]
    fn the_oldest_of_too_many_tokens_is_forgotten() {
        let secrets = Secrets::default();
        let token = |n: usize| char::from(b'a' + n as u8).to_string().repeat(12);
        for n in 0..=TOKENS_KEPT {
            secrets.add_token(&token(n));
        }
        let cleaner = Cleaner::with(Some(&secrets), []);
        assert_eq!(cleaner.redact(&token(TOKENS_KEPT)), REDACTED);
        assert_eq!(cleaner.redact(&token(1)), REDACTED);
        assert_eq!(cleaner.redact(&token(0)), token(0), "forgotten");
        assert!(!format!("{secrets:?}").contains("aaaa"));
    }
}
