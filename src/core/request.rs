//! The fixed request: everything an attempt sends, set once before the first.
//!
//! Method, URL, body bytes and every header but `Authorization` are fixed
//! here and cloned by handle on each attempt (the body is a [`Bytes`], so a
//! clone shares the bytes and nothing is ever re-serialized). Only the bearer
//! token may change between attempts, after a re-exchange, and, on a signed
//! delivery, `webhook-timestamp` and `webhook-signature`, made for each attempt
//! over the same bytes (`signing.rs`).

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use crate::core::error::{Error, Result};
use crate::core::key::IdempotencyKey;
use crate::core::limit::RouteKey;
use crate::core::map::Map;
use crate::core::profile::SurfaceProfile;
use crate::core::redact::{Cleaner, Secrets};
use crate::core::signing::Signer;

/// A request whose identity is fixed across attempts.
#[derive(Clone)]
pub(crate) struct FixedRequest {
    /// What the vendor's documents fix for this request's surface.
    pub(crate) profile: &'static SurfaceProfile,
    pub(crate) method: Method,
    pub(crate) url: reqwest::Url,
    /// The path for logs: route tokens redacted, no query.
    pub(crate) route: Cow<'static, str>,
    /// Every header but `Authorization`, the key or delivery ID included.
    pub(crate) headers: FixedHeaders,
    pub(crate) body: Bytes,
    /// The Idempotency-Key or delivery ID, for logs (keys are not secrets: Hodoflow's "Idempotency
    /// and retries"), shared with the caller's key.
    pub(crate) identity: Option<Arc<str>>,
    /// The route with a window of its own (a webhook route), by a hash of its key; `None` on
    /// the API.
    pub(crate) route_key: Option<RouteKey>,
    /// Where the route's key starts in `url`'s path (its last segment), found once.
    route_name_at: Option<u32>,
    /// The secrets a signed delivery's every attempt is signed with; `None`: unsigned.
    pub(crate) signer: Option<Signer>,
}

impl FixedRequest {
    /// A request of `profile`'s surface: `method` to `url`, logged as `route`, with its headers
    /// (the key or delivery ID included), body and identity for logs; no route of its own and
    /// unsigned until [`in_route`](Self::in_route) and [`signed`](Self::signed) say otherwise.
    pub(crate) fn new(
        profile: &'static SurfaceProfile,
        method: Method,
        url: reqwest::Url,
        route: Cow<'static, str>,
        headers: HeaderMap,
        body: Bytes,
        identity: Option<&IdempotencyKey>,
    ) -> Self {
        Self {
            profile,
            method,
            url,
            route,
            headers: FixedHeaders::of(headers),
            body,
            identity: identity.map(IdempotencyKey::shared_text),
            route_key: None,
            route_name_at: None,
            signer: None,
        }
    }

    /// The request sits in the route with `key`, a window of its own.
    pub(crate) fn in_route(mut self, key: Option<RouteKey>) -> Self {
        self.route_key = key;
        self.route_name_at = key.and_then(|_| {
            let path = self.url.path();
            let start = path.rfind('/').map_or(0, |slash| slash + 1);
            (start < path.len())
                .then_some(u32::try_from(start).ok())
                .flatten()
        });
        self
    }

    /// Every attempt is signed with `signer`'s secrets.
    pub(crate) fn signed(mut self, signer: Option<Signer>) -> Self {
        self.signer = signer;
        self
    }
}

/// Shows the route, never the URL (it may hold a route token) or the body.
impl std::fmt::Debug for FixedRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixedRequest")
            .field("surface", &self.profile.name)
            .field("method", &self.method)
            .field("route", &self.route)
            .field("identity", &self.identity)
            .field("body", &crate::core::redact::BodyLen(self.body.len()))
            .field("signer", &self.signer)
            .finish_non_exhaustive()
    }
}

/// `path` as a server resolves it, ready for a surface check: a path starting with a single `/`,
/// its unreserved characters percent-decoded (RFC 3986 §6.2.2.2: `%2e` is `.`), and no dot
/// segment.
///
/// A path holding a `.` or `..` segment, in any encoding, is refused rather than resolved: a
/// caller never means one, and resolving it (RFC 3986 §5.2.4) after a prefix check is how
/// `/api/json/%2e%2e/%2e%2e/api/v1/webhooks/<token>` once passed the write check and reached a
/// webhook. A backslash (a separator to URL parsers of `http`) and a control character (tabs and
/// newlines are dropped by them, so `.<TAB>.` would become `..`) are refused for the same
/// reason. The query and fragment are kept as they are.
///
/// # Errors
///
/// `invalid_input`, before anything is sent.
pub(crate) fn normalize_path(path: &str) -> Result<Cow<'_, str>> {
    if !path.starts_with('/') || path.starts_with("//") {
        return Err(Error::invalid_input(
            "a path must start with a single '/', such as /api/json/v1/projects",
        ));
    }
    let end = path.find(['?', '#']).unwrap_or(path.len());
    let (route, rest) = path.split_at(end);
    if route.bytes().any(|b| b == b'\\' || b.is_ascii_control()) {
        return Err(Error::invalid_input(
            "a path must not hold a backslash or a control character",
        ));
    }
    let decoded = decode_unreserved(route);
    let is_dot = |segment: &str| segment == "." || segment == "..";
    // An encoded slash or backslash separates segments too for a server or proxy that decodes
    // it: `..%2F..` is two dot segments there. (No allocation without a `%`.)
    let dotted = if decoded.contains('%') {
        ["%2F", "%2f", "%5C", "%5c"]
            .iter()
            .fold(decoded.to_string(), |text, escape| {
                text.replace(escape, "/")
            })
            .split('/')
            .any(is_dot)
    } else {
        decoded.split('/').any(is_dot)
    };
    if dotted {
        return Err(Error::invalid_input(
            "a path must not hold a '.' or '..' segment, nor an encoding of one such as %2e%2e",
        ));
    }
    Ok(match decoded {
        Cow::Borrowed(_) => Cow::Borrowed(path),
        Cow::Owned(mut decoded) => {
            decoded.push_str(rest);
            Cow::Owned(decoded)
        }
    })
}

/// `route` with every percent-encoded unreserved character (`A`-`Z`, `a`-`z`, `0`-`9`, `-`,
/// `.`, `_`, `~`) decoded; other escapes are kept as they are.
fn decode_unreserved(route: &str) -> Cow<'_, str> {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = route.as_bytes();
    let unreserved_at = |at: usize| -> Option<u8> {
        let high = hex(*bytes.get(at + 1)?)?;
        let low = hex(*bytes.get(at + 2)?)?;
        let byte = (high * 16 + low) as u8;
        (byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')).then_some(byte)
    };
    if !(0..bytes.len()).any(|at| bytes[at] == b'%' && unreserved_at(at).is_some()) {
        return Cow::Borrowed(route);
    }
    let mut out = String::with_capacity(route.len());
    let mut at = 0;
    while let Some(ch) = route[at..].chars().next() {
        match (ch, unreserved_at(at)) {
            ('%', Some(byte)) => {
                out.push(char::from(byte));
                at += 3;
            }
            _ => {
                out.push(ch);
                at += ch.len_utf8();
            }
        }
    }
    Cow::Owned(out)
}

/// Builds the URL of `path` under `base`, refusing anything but an absolute path without dot
/// segments ([`normalize_path`]).
pub(crate) fn url_of(base: &reqwest::Url, path: &str) -> Result<reqwest::Url> {
    Ok(join(base, &normalize_path(path)?))
}

/// The URLs of the routes a client sent to lately, by route under one prefix: a route's URL and
/// [`RouteKey`] are made on its first call and kept (at most [`RouteUrls::KEPT`]), not made
/// again, its path not even written and its key not hashed again, on every call. A route holds
/// its key (a secret, such as a token): `Debug` shows how many are kept, never one.
#[derive(Default)]
pub(crate) struct RouteUrls(Mutex<KeptUrls>);

#[derive(Default)]
struct KeptUrls {
    /// The prefix the kept routes are under; a call under another starts afresh.
    prefix: &'static str,
    urls: Map<Box<str>, (reqwest::Url, RouteKey)>,
}

impl std::fmt::Debug for RouteUrls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .urls
            .len();
        f.debug_struct("RouteUrls").field("kept", &kept).finish()
    }
}

impl RouteUrls {
    /// The routes kept at most; past this they are forgotten and built again.
    const KEPT: usize = 256;

    /// [`join`] of `base` and the path `prefix` then `route`, with the route's key (`key`,
    /// called on its first call only: the same route always has the same key), kept for the
    /// next call of the same route.
    pub(crate) fn join(
        &self,
        base: &reqwest::Url,
        prefix: &'static str,
        route: &str,
        key: impl FnOnce() -> RouteKey,
    ) -> (reqwest::Url, RouteKey) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.prefix != prefix {
            kept.urls.clear();
            kept.prefix = prefix;
        }
        if let Some((url, key)) = kept.urls.get(route) {
            return (url.clone(), *key);
        }
        let made = (join(base, &[prefix, route].concat()), key());
        if kept.urls.len() >= Self::KEPT {
            kept.urls.clear();
        }
        kept.urls.insert(route.into(), made.clone());
        made
    }
}

/// The URL of `path` under `base`, for a path the client built of segments it checked (a
/// delivery's route): not normalized again.
pub(crate) fn join(base: &reqwest::Url, path: &str) -> reqwest::Url {
    // The base was parsed and checked once, when the client was built: only the path and the
    // query are parsed here, so a call does not parse and IDNA-check the host again (about
    // 7,700 instructions a delivery, measured with callgrind). A fragment is never sent.
    let path = path.split('#').next().unwrap_or_default();
    let (path, query) = match path.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path, None),
    };
    let mut url = base.clone();
    match base.path().trim_end_matches('/') {
        "" => url.set_path(path),
        prefix => url.set_path(&format!("{prefix}{path}")),
    }
    url.set_query(query);
    url
}

/// One non-empty URL path segment with nothing to escape, and not a dot segment (`.`, `..`).
///
/// The one segment rule of a vendor's path tokens and names (Hodoflow's route tokens and
/// organization domains, Modulify's method names).
pub(crate) fn is_path_segment(text: &str) -> bool {
    !text.is_empty()
        && text != "."
        && text != ".."
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~'))
}

/// Headers each attempt's map adds to its request's: `Authorization`, reqwest's `Accept`, and
/// a signed delivery's timestamp and signature.
const ATTEMPT_HEADERS: usize = 4;

/// A request's header map, with room for the caller's `extra` headers and `own` more of the
/// request's. [`FixedRequest::new`] keeps its entries, not the map.
pub(crate) fn headers_with_room(extra: &HeaderMap, own: usize) -> HeaderMap {
    HeaderMap::with_capacity(extra.len() + own)
}

/// A request's own headers, the same on every attempt: its entries in order, as many as it has
/// and no index, so that a call in flight holds a few bytes an entry. Each attempt lays them
/// into a map of its own, with room for what the attempt adds
/// ([`attempt_map`](Self::attempt_map)): one allocation of the right size, where a copy of a
/// map would grow on the attempt's first header. No `Debug`: values may be secrets.
#[derive(Clone, Default)]
pub(crate) struct FixedHeaders(Box<[(HeaderName, HeaderValue)]>);

impl FixedHeaders {
    /// The entries of `map`, in its order, moved out of it.
    pub(crate) fn of(map: HeaderMap) -> Self {
        let mut entries: Vec<(HeaderName, HeaderValue)> = Vec::with_capacity(map.len());
        for (name, value) in map {
            // A name comes with its first value only; the next ones are the same name's.
            let Some(name) = name.or_else(|| entries.last().map(|(name, _)| name.clone())) else {
                continue;
            };
            entries.push((name, value));
        }
        Self(entries.into_boxed_slice())
    }

    /// The first value of `name`.
    pub(crate) fn get(&self, name: &HeaderName) -> Option<&HeaderValue> {
        self.0
            .iter()
            .find_map(|(held, value)| (held == name).then_some(value))
    }

    pub(crate) fn contains_key(&self, name: &HeaderName) -> bool {
        self.get(name).is_some()
    }

    /// Every entry, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
        self.0.iter().map(|(name, value)| (name, value))
    }

    /// An attempt's map: these entries, and room for the headers each attempt adds.
    pub(crate) fn attempt_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(self.0.len() + ATTEMPT_HEADERS);
        for (name, value) in self.iter() {
            map.append(name.clone(), value.clone());
        }
        map
    }
}

/// Adds caller headers, refusing the ones the client owns.
pub(crate) fn add_headers(into: &mut HeaderMap, extra: &HeaderMap) -> Result<()> {
    for (name, value) in extra {
        if name == AUTHORIZATION {
            return Err(Error::invalid_input(
                "the Authorization header is set by the client from its token exchanger",
            ));
        }
        if name == "idempotency-key" {
            return Err(Error::invalid_input(
                "set the Idempotency-Key with an IdempotencyKey or DeliveryId, not as a header",
            ));
        }
        into.append(name.clone(), value.clone());
    }
    Ok(())
}

pub(crate) fn content_type(headers: &mut HeaderMap, default: &'static str) {
    if !headers.contains_key(CONTENT_TYPE) {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(default));
    }
}

impl FixedRequest {
    /// Signs this attempt of a signed delivery into `headers` at `now`; nothing for any other
    /// request.
    pub(crate) fn sign(&self, headers: &mut HeaderMap, now: std::time::SystemTime) {
        if let (Some(signer), Some(id)) = (&self.signer, &self.identity) {
            signer.sign(headers, id, &self.body, now);
        }
    }

    /// A cleaner of what a server echoes to this request (`redact.rs`): the client's `shared`
    /// secrets, its signing secrets (prepared once with its signer) and its own.
    pub(crate) fn cleaner(&self, shared: Option<&Secrets>) -> Cleaner {
        let cleaner = match (shared, self.route_name()) {
            // The common case, a route's key the only secret of its own: its pattern is kept.
            (Some(shared), Some(key)) if !self.headers.contains_key(&AUTHORIZATION) => {
                Cleaner::for_route(shared, key)
            }
            _ => Cleaner::with(shared, self.secrets()),
        };
        cleaner.and(self.signer.as_ref().map(Signer::prepared))
    }

    /// The secrets this request carries beside its signer's: its route token, and the
    /// credentials of an `Authorization` of its own (a middleware stack without an exchanger
    /// sends the caller's). Never log them.
    fn secrets(&self) -> impl Iterator<Item = &str> {
        let credentials = self
            .headers
            .get(&AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split_once(' ').map_or(value, |(_, rest)| rest).trim());
        self.route_name().into_iter().chain(credentials)
    }

    /// The route's key (a delivery's route token, the last segment of its path); a secret,
    /// never logged.
    pub(crate) fn route_name(&self) -> Option<&str> {
        self.url
            .path()
            .get(usize::try_from(self.route_name_at?).ok()?..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_s_url_is_kept_and_its_key_never_shown() {
        let routes = RouteUrls::default();
        let base = reqwest::Url::parse("http://127.0.0.1:9/prefix/").unwrap();
        let key = || RouteKey::of("trg_SECRET_key_1");
        for _ in 0..2 {
            let (url, kept) = routes.join(&base, "/api/v1/webhooks/", "trg_SECRET_key_1", key);
            assert_eq!(
                url.as_str(),
                "http://127.0.0.1:9/prefix/api/v1/webhooks/trg_SECRET_key_1"
            );
            assert_eq!(kept, key(), "the route's key, made once and kept");
        }
        let (other, _) = routes.join(&base, "/other/", "trg_SECRET_key_1", key);
        assert_eq!(
            other.as_str(),
            "http://127.0.0.1:9/prefix/other/trg_SECRET_key_1",
            "a route under another prefix is another URL"
        );
        for n in 0..RouteUrls::KEPT {
            let route = format!("trg_{n}");
            routes.join(&base, "/other/", &route, || RouteKey::of(&route));
        }
        let shown = format!("{routes:?}");
        assert!(
            !shown.contains("SECRET") && !shown.contains("trg_"),
            "{shown}"
        );
        assert!(
            shown.contains("kept: 1"),
            "kept at most KEPT, then forgotten: {shown}"
        );
    }

    #[test]
    fn an_attempt_s_map_holds_the_request_s_headers_as_they_were_given() {
        let mut given = HeaderMap::new();
        given.append("x-b", HeaderValue::from_static("1"));
        given.append(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        given.append("x-b", HeaderValue::from_static("2"));
        given.append("x-a", HeaderValue::from_static("3"));
        given.append("x-b", HeaderValue::from_static("4"));
        let fixed = FixedHeaders::of(given.clone());
        assert_eq!(fixed.attempt_map(), given);
        assert_eq!(fixed.iter().count(), given.len(), "every value, each once");
        let b = HeaderName::from_static("x-b");
        assert_eq!(fixed.get(&b).unwrap(), "1", "the first value of a name");
        assert!(fixed.contains_key(&CONTENT_TYPE));
        assert!(!fixed.contains_key(&AUTHORIZATION));
        let values: Vec<_> = fixed.attempt_map().get_all(&b).iter().cloned().collect();
        assert_eq!(values, ["1", "2", "4"], "a name's values in their order");
        assert!(
            fixed.attempt_map().capacity() >= given.len() + ATTEMPT_HEADERS,
            "room for what an attempt adds"
        );
    }

    #[test]
    fn builds_the_url_a_full_parse_of_base_and_path_would() {
        let bases = [
            "http://127.0.0.1:9",
            "http://127.0.0.1:9/prefix/",
            "https://h.example/a/b",
        ];
        let paths = [
            "/api/json/v1/projects",
            "/api/json/v1/projects?filter[name]=a b&page=2",
            "/api/v1/webhooks/trg_abc-1.2~x",
            "/api/json/v1/caf\u{e9} %20 \"q\"",
            "/api/json/v1/projects?",
            "/",
        ];
        for base in bases {
            let base = reqwest::Url::parse(base).unwrap();
            for path in paths {
                let parsed =
                    reqwest::Url::parse(&format!("{}{path}", base.as_str().trim_end_matches('/')))
                        .unwrap();
                assert_eq!(url_of(&base, path).unwrap(), parsed, "{base} + {path}");
            }
            let with_fragment = url_of(&base, "/api/json/v1/p#top").unwrap();
            assert_eq!(with_fragment.fragment(), None, "a fragment is never sent");
            assert!(with_fragment.path().ends_with("/api/json/v1/p"));
        }
    }

    #[test]
    fn decodes_unreserved_escapes_and_keeps_the_rest() {
        assert_eq!(
            normalize_path("/api/json/v1/%70rojects%7E%2F?q=%2e%2e").unwrap(),
            "/api/json/v1/projects~%2F?q=%2e%2e"
        );
        assert!(matches!(
            normalize_path("/api/json/v1/p.json?x=..").unwrap(),
            Cow::Borrowed(_)
        ));
        assert_eq!(normalize_path("/a/%e9%zz%2").unwrap(), "/a/%e9%zz%2");
        assert_eq!(normalize_path("/a/caf\u{e9}%41").unwrap(), "/a/caf\u{e9}A");
    }

    #[test]
    fn the_one_segment_rule_refuses_dot_segments() {
        for segment in [".", "..", "", "a/b", "a%2e", "a b"] {
            assert!(!is_path_segment(segment), "{segment:?}");
        }
        for segment in ["trg_1", "a.b", "...", "x~y-z"] {
            assert!(is_path_segment(segment), "{segment:?}");
        }
    }
}
