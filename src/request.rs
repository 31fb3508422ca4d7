//! The fixed request: everything an attempt sends, set once before the first.
//!
//! Method, URL, body bytes and every header but `Authorization` are fixed
//! here and cloned by handle on each attempt (the body is a [`Bytes`], so a
//! clone shares the bytes and nothing is ever re-serialized). Only the bearer
//! token may change between attempts, after a re-exchange, and, on a signed
//! delivery, `webhook-timestamp` and `webhook-signature`, made for each attempt
//! over the same bytes (`signing.rs`).

use std::borrow::Cow;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use crate::error::{Error, Result};
use crate::key::{DeliveryId, IdempotencyKey};
use crate::profile::Surface;
use crate::profile::hodoflow::{GRAPHQL_PATH, JSON_API_PREFIX, WEBHOOKS_PREFIX};
use crate::profile::modulify;
use crate::redact::redact_path;
use crate::signing::{Signer, WEBHOOK_ID, WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP};
use crate::trigger_limit::TriggerKey;

/// The JSON:API media type of write bodies.
const JSON_API: &str = "application/vnd.api+json";

/// A request whose identity is fixed across attempts.
#[derive(Clone)]
pub(crate) struct FixedRequest {
    pub(crate) surface: Surface,
    pub(crate) method: Method,
    pub(crate) url: reqwest::Url,
    /// The path for logs: trigger tokens redacted, no query.
    pub(crate) route: Cow<'static, str>,
    /// Every header but `Authorization`, the key or delivery ID included.
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// The Idempotency-Key or delivery ID, for logs (keys are not secrets, document 000).
    pub(crate) identity: Option<String>,
    /// Whose rate limit a 429 speaks for.
    /// The webhook trigger, for its limiter; `None` on the API.
    pub(crate) trigger: Option<TriggerKey>,
    /// The secrets a signed delivery's every attempt is signed with; `None`: unsigned.
    pub(crate) signer: Option<Signer>,
}

/// Shows the route, never the URL (it may hold a trigger token) or the body.
impl std::fmt::Debug for FixedRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixedRequest")
            .field("surface", &self.surface)
            .field("method", &self.method)
            .field("route", &self.route)
            .field("identity", &self.identity)
            .field("body", &crate::redact::BodyLen(self.body.len()))
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
fn url_of(base: &reqwest::Url, path: &str) -> Result<reqwest::Url> {
    let path = normalize_path(path)?;
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
    Ok(url)
}

/// An `invalid_input` error unless `method` is an unsafe write and `path`, normalized
/// ([`normalize_path`]), is under `/api/json/`.
pub(crate) fn check_write(method: &Method, path: &str) -> Result<()> {
    if ![Method::POST, Method::PUT, Method::PATCH, Method::DELETE].contains(method) {
        return Err(Error::invalid_input(format!(
            "{method} is not an unsafe write: use POST, PUT, PATCH or DELETE"
        )));
    }
    if !normalize_path(path)?.starts_with(JSON_API_PREFIX) {
        return Err(Error::invalid_input("JSON:API writes go under /api/json/"));
    }
    Ok(())
}

/// An `invalid_input` error unless the trigger token is one URL path segment. The message never
/// quotes it: it is a secret.
pub(crate) fn check_trigger_token(token: &str) -> Result<()> {
    if is_path_segment(token) {
        return Ok(());
    }
    Err(Error::invalid_input(
        "the trigger token must be one non-empty URL path segment (it is not shown: it is a secret)",
    ))
}

/// One non-empty URL path segment with nothing to escape, and not a dot segment (`.`, `..`).
///
/// The one segment rule of trigger tokens, organization domains and Modulify method names.
pub(crate) fn is_path_segment(text: &str) -> bool {
    !text.is_empty()
        && text != "."
        && text != ".."
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~'))
}

/// Adds caller headers, refusing the ones the client owns.
fn add_headers(into: &mut HeaderMap, extra: &HeaderMap) -> Result<()> {
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

/// The path as it may be logged: no query, trigger token redacted.
pub(crate) fn route_of(path: &str) -> Cow<'static, str> {
    // The common webhook route needs no work: the whole token goes.
    const TOKEN_ONLY: &str = "/api/v1/webhooks/<redacted>";
    if let Some(token) = path.strip_prefix(WEBHOOKS_PREFIX)
        && !token.is_empty()
        && !token.contains(['/', '?', '#'])
    {
        return Cow::Borrowed(TOKEN_ONLY);
    }
    Cow::Owned(redact_path(
        path.split(['?', '#']).next().unwrap_or_default(),
    ))
}

fn content_type(headers: &mut HeaderMap, default: &'static str) {
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

    /// The trigger token of a delivery, the last segment of its path; a secret, never logged.
    pub(crate) fn trigger_token(&self) -> Option<&str> {
        self.trigger
            .is_some()
            .then(|| self.url.path().rsplit('/').next())
            .flatten()
            .filter(|token| !token.is_empty())
    }

    /// A JSON:API unsafe write: POST, PUT, PATCH or DELETE under `/api/json`, with its key.
    pub(crate) fn write(
        base: &reqwest::Url,
        method: Method,
        path: &str,
        key: &IdempotencyKey,
        body: Bytes,
        extra: &HeaderMap,
    ) -> Result<Self> {
        check_write(&method, path)?;
        Surface::JsonApiWrite.profile().vendor.keys.check(key)?;
        let url = url_of(base, path)?;
        let mut headers = HeaderMap::new();
        add_headers(&mut headers, extra)?;
        headers.insert(
            HeaderName::from_static("idempotency-key"),
            key.to_header_value(),
        );
        if !body.is_empty() {
            content_type(&mut headers, JSON_API);
        }
        Ok(Self {
            surface: Surface::JsonApiWrite,
            route: route_of(path),
            method,
            url,
            headers,
            body,
            identity: Some(key.as_str().to_owned()),
            trigger: None,
            signer: None,
        })
    }

    /// A read: GET or HEAD, without a key.
    pub(crate) fn read(
        base: &reqwest::Url,
        method: Method,
        path: &str,
        extra: &HeaderMap,
    ) -> Result<Self> {
        if method != Method::GET && method != Method::HEAD {
            return Err(Error::invalid_input(format!(
                "{method} is not a read: use GET or HEAD"
            )));
        }
        let url = url_of(base, path)?;
        let mut headers = HeaderMap::new();
        add_headers(&mut headers, extra)?;
        Ok(Self {
            surface: Surface::Read,
            route: route_of(path),
            method,
            url,
            headers,
            body: Bytes::new(),
            identity: None,
            trigger: None,
            signer: None,
        })
    }

    /// A GraphQL document for `POST /api/graphql`; read-only, without a key.
    pub(crate) fn graphql(base: &reqwest::Url, body: Bytes) -> Result<Self> {
        let url = url_of(base, GRAPHQL_PATH)?;
        let mut headers = HeaderMap::new();
        content_type(&mut headers, "application/json");
        Ok(Self {
            surface: Surface::GraphQl,
            route: Cow::Owned(url.path().to_owned()),
            method: Method::POST,
            url,
            headers,
            body,
            identity: None,
            trigger: None,
            signer: None,
        })
    }

    /// A Modulify method call, `POST /v1/<method>` with its JSON body as it is, and the key
    /// unless the method only reads.
    pub(crate) fn modulify(
        base: &reqwest::Url,
        method: &str,
        key: Option<&IdempotencyKey>,
        body: Bytes,
        extra: &HeaderMap,
    ) -> Result<Self> {
        // `MethodCall::send` checked the key against the profile's rules before it read the
        // catalogue, so that a bad key sends nothing at all.
        let path = format!("{}{method}", modulify::METHODS_PREFIX);
        let url = url_of(base, &path)?;
        let mut headers = HeaderMap::new();
        add_headers(&mut headers, extra)?;
        if let Some(key) = key {
            headers.insert(
                HeaderName::from_static("idempotency-key"),
                key.to_header_value(),
            );
        }
        content_type(&mut headers, "application/json");
        Ok(Self {
            surface: Surface::Modulify,
            route: Cow::Owned(path),
            method: Method::POST,
            url,
            headers,
            body,
            identity: key.map(|key| key.as_str().to_owned()),
            trigger: None,
            signer: None,
        })
    }

    /// Modulify's method catalogue, `GET /v1/tools`.
    pub(crate) fn modulify_tools(base: &reqwest::Url) -> Result<Self> {
        let url = url_of(base, modulify::TOOLS_PATH)?;
        Ok(Self {
            surface: Surface::Modulify,
            route: Cow::Borrowed(modulify::TOOLS_PATH),
            method: Method::GET,
            url,
            headers: HeaderMap::new(),
            body: Bytes::new(),
            identity: None,
            trigger: None,
            signer: None,
        })
    }

    /// A webhook delivery to a trigger, identified by `id`, signed when `signer` is set.
    ///
    /// `path` holds the trigger token: it is only ever logged as `route`, redacted.
    pub(crate) fn webhook(
        base: &reqwest::Url,
        path: &str,
        trigger: TriggerKey,
        id: &DeliveryId,
        body: Bytes,
        extra: &HeaderMap,
        signer: Option<Signer>,
    ) -> Result<Self> {
        Surface::Webhook.profile().vendor.keys.check(id.key())?;
        let url = url_of(base, path)?;
        let mut headers = HeaderMap::new();
        add_headers(&mut headers, extra)?;
        headers.insert(id.header().header_name(), id.key().to_header_value());
        if signer.is_some() {
            // A relay's own signature headers would be sent beside, or instead of, ours.
            for name in [WEBHOOK_ID, WEBHOOK_TIMESTAMP, WEBHOOK_SIGNATURE] {
                if headers.contains_key(&name) {
                    return Err(Error::invalid_input(format!(
                        "a signed delivery sets {name} itself: do not pass it as a header"
                    )));
                }
            }
            // The one signed header that is the same on every attempt.
            headers.insert(WEBHOOK_ID, id.key().to_header_value());
        }
        content_type(&mut headers, "application/json");
        Ok(Self {
            surface: Surface::Webhook,
            route: route_of(path),
            method: Method::POST,
            url,
            headers,
            body,
            identity: Some(id.key().as_str().to_owned()),
            trigger: Some(trigger),
            signer,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> reqwest::Url {
        reqwest::Url::parse("http://127.0.0.1:9/prefix/").unwrap()
    }

    fn key() -> IdempotencyKey {
        IdempotencyKey::new("op-1").unwrap()
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
    fn refuses_keys_of_blank_operation_ids_before_building_a_request() {
        for blank in ["", " ", "\t\n"] {
            let key = IdempotencyKey::from_operation_id(blank);
            let write = FixedRequest::write(
                &base(),
                Method::POST,
                "/api/json/v1/projects",
                &key,
                Bytes::new(),
                &HeaderMap::new(),
            );
            let error = write.expect_err("a blank operation ID is refused");
            assert_eq!(error.kind(), crate::ErrorKind::InvalidInput);
            assert!(error.to_string().contains("blank"), "{error}");
            let delivery = FixedRequest::webhook(
                &base(),
                "/api/v1/webhooks/trg_1",
                TriggerKey::of("trg_1"),
                &DeliveryId::new(key),
                Bytes::new(),
                &HeaderMap::new(),
                None,
            );
            assert!(delivery.is_err());
        }
        assert!(
            IdempotencyKey::from_operation_id("order-1")
                .check_sendable()
                .is_ok()
        );
    }

    #[test]
    fn keeps_the_base_path_and_the_body_bytes() {
        let body = Bytes::from_static(br#"{"data":{"type":"projects"}}"#);
        let request = FixedRequest::write(
            &base(),
            Method::POST,
            "/api/json/v1/projects",
            &key(),
            body.clone(),
            &HeaderMap::new(),
        )
        .unwrap();
        assert_eq!(
            request.url.as_str(),
            "http://127.0.0.1:9/prefix/api/json/v1/projects"
        );
        assert_eq!(
            request.body.as_ptr(),
            body.as_ptr(),
            "the bytes are shared, not copied"
        );
        assert_eq!(request.headers["idempotency-key"], "op-1");
        assert_eq!(request.headers[CONTENT_TYPE], JSON_API);
    }

    #[test]
    fn refuses_authorization_and_key_headers_from_the_caller() {
        for name in ["authorization", "idempotency-key"] {
            let mut extra = HeaderMap::new();
            extra.insert(HeaderName::from_static(name), HeaderValue::from_static("x"));
            let error =
                FixedRequest::read(&base(), Method::GET, "/api/json/v1/p", &extra).unwrap_err();
            assert_eq!(error.kind(), crate::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn refuses_paths_that_could_leave_the_base_url() {
        for path in [
            "api/json/v1/p",
            "//evil.example/api/json/v1/p",
            "http://evil.example/",
        ] {
            let error =
                FixedRequest::read(&base(), Method::GET, path, &HeaderMap::new()).unwrap_err();
            assert_eq!(error.kind(), crate::ErrorKind::InvalidInput, "{path}");
        }
    }

    #[test]
    fn refuses_a_read_method_as_a_write_and_a_write_outside_json_api() {
        let empty = HeaderMap::new();
        let get = FixedRequest::write(
            &base(),
            Method::GET,
            "/api/json/v1/p",
            &key(),
            Bytes::new(),
            &empty,
        );
        assert!(get.is_err());
        let outside = FixedRequest::write(
            &base(),
            Method::POST,
            "/api/v1/x",
            &key(),
            Bytes::new(),
            &empty,
        );
        assert!(outside.is_err());
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
    fn refuses_dot_segments_in_every_encoding_and_backslashes() {
        for path in [
            "/api/json/../../oauth/token",
            "/api/json/%2e%2e/%2e%2e/api/v1/webhooks/t",
            "/api/json/%2E%2e/x",
            "/api/json/.%2E/x",
            "/api/json/%2e/x",
            "/api/json/v1/.",
            "/api/json/v1/..?q",
            "/api/json/..\\x",
            "/api/json/.\t./x",
            "/api/json/.\n./x",
            "/api/json/v1/\0",
            "/api/json/..%2F..%2Fapi/v1/webhooks/t",
            "/api/json/%2e%2e%2f%2e%2e%5Coauth/token",
        ] {
            let error = normalize_path(path).unwrap_err();
            assert_eq!(error.kind(), crate::ErrorKind::InvalidInput, "{path:?}");
            let write = check_write(&Method::POST, path).unwrap_err();
            assert_eq!(write.kind(), crate::ErrorKind::InvalidInput, "{path:?}");
        }
        for fine in [
            "/api/json/v1/a..b",
            "/api/json/v1/.well-known",
            "/api/json/v1/...",
        ] {
            assert!(normalize_path(fine).is_ok(), "{fine}");
        }
    }

    #[test]
    fn the_one_segment_rule_refuses_dot_segments() {
        for segment in [".", "..", "", "a/b", "a%2e", "a b"] {
            assert!(!is_path_segment(segment), "{segment:?}");
            assert!(check_trigger_token(segment).is_err());
            assert!(crate::modulify::check_method(segment).is_err());
        }
        for segment in ["trg_1", "a.b", "...", "x~y-z"] {
            assert!(is_path_segment(segment), "{segment:?}");
            assert!(crate::modulify::check_method(segment).is_ok());
        }
    }

    #[test]
    fn a_route_never_holds_a_trigger_token_or_a_query() {
        assert_eq!(
            route_of("/api/v1/webhooks/trg_1"),
            "/api/v1/webhooks/<redacted>"
        );
        assert_eq!(
            route_of("/api/v1/webhooks/acme/trg_1"),
            "/api/v1/webhooks/acme/<redacted>"
        );
        assert_eq!(
            route_of("/api/v1/webhooks/trg_1?via=relay"),
            "/api/v1/webhooks/<redacted>"
        );
        assert_eq!(route_of("/api/v1/webhooks/"), "/api/v1/webhooks/<redacted>");
        assert_eq!(
            route_of("/api/json/v1/projects?filter[name]=x"),
            "/api/json/v1/projects"
        );
    }

    #[test]
    fn logs_the_webhook_route_without_the_trigger_token() {
        let id = DeliveryId::new(key());
        let request = FixedRequest::webhook(
            &base(),
            "/api/v1/webhooks/trg_secret",
            TriggerKey::of("trg_secret"),
            &id,
            Bytes::from_static(b"{}"),
            &HeaderMap::new(),
            None,
        )
        .unwrap();
        assert!(!request.route.contains("trg_secret"));
        assert_eq!(request.headers["idempotency-key"], "op-1");
    }
}
