//! Hodoflow's requests: a JSON:API write, a read, a GraphQL document and a webhook delivery,
//! each a [`FixedRequest`] of its surface, checked before anything is sent.

use std::borrow::Cow;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, Method};

use crate::core::error::{Error, Result};
use crate::core::key::{DeliveryId, IdempotencyKey};
use crate::core::limit::RouteKey;
use crate::core::request::{
    FixedRequest, add_headers, content_type, headers_with_room, normalize_path, url_of,
};
use crate::core::signing::{Signer, WEBHOOK_ID, WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP};
use crate::vendors::Surface;
use crate::vendors::hodoflow::routes::route_of;
use crate::vendors::hodoflow::tables::{GRAPHQL_PATH, JSON_API_PREFIX};

/// The JSON:API media type of write bodies.
const JSON_API: &str = "application/vnd.api+json";

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

impl FixedRequest {
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
        let mut headers = headers_with_room(extra, 2);
        add_headers(&mut headers, extra)?;
        headers.insert(
            HeaderName::from_static("idempotency-key"),
            key.to_header_value(),
        );
        if !body.is_empty() {
            content_type(&mut headers, JSON_API);
        }
        Ok(Self::new(
            Surface::JsonApiWrite.profile(),
            method,
            url,
            route_of(path),
            headers,
            body,
            Some(key),
        ))
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
        let mut headers = headers_with_room(extra, 0);
        add_headers(&mut headers, extra)?;
        Ok(Self::new(
            Surface::Read.profile(),
            method,
            url,
            route_of(path),
            headers,
            Bytes::new(),
            None,
        ))
    }

    /// A GraphQL document for `POST /api/graphql`; read-only, without a key.
    pub(crate) fn graphql(base: &reqwest::Url, body: Bytes) -> Result<Self> {
        let url = url_of(base, GRAPHQL_PATH)?;
        let mut headers = HeaderMap::new();
        content_type(&mut headers, "application/json");
        let route = Cow::Owned(url.path().to_owned());
        Ok(Self::new(
            Surface::GraphQl.profile(),
            Method::POST,
            url,
            route,
            headers,
            body,
            None,
        ))
    }

    /// A webhook delivery to a trigger, identified by `id`, signed when `signer` is set.
    ///
    /// `url` holds the trigger token: it is only ever logged as `route`, its path with the token
    /// redacted ([`route_of`]).
    pub(crate) fn webhook(
        url: reqwest::Url,
        route: Cow<'static, str>,
        trigger: RouteKey,
        id: &DeliveryId,
        body: Bytes,
        extra: &HeaderMap,
        signer: Option<Signer>,
    ) -> Result<Self> {
        Surface::Webhook.profile().vendor.keys.check(id.key())?;
        // The delivery ID, `Content-Type`, and the signed `webhook-id`.
        let mut headers = headers_with_room(extra, 2 + usize::from(signer.is_some()));
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
        Ok(Self::new(
            Surface::Webhook.profile(),
            Method::POST,
            url,
            route,
            headers,
            body,
            Some(id.key()),
        )
        .in_route(Some(trigger))
        .signed(signer))
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use http::header::CONTENT_TYPE;

    use super::*;
    use crate::core::request::join;
    use crate::vendors::hodoflow::routes::trigger_key;

    const IDEMPOTENCY_KEY: http::HeaderName = http::HeaderName::from_static("idempotency-key");

    fn base() -> reqwest::Url {
        reqwest::Url::parse("http://127.0.0.1:9/prefix/").unwrap()
    }

    fn key() -> IdempotencyKey {
        IdempotencyKey::new("op-1").unwrap()
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
                join(&base(), "/api/v1/webhooks/trg_1"),
                route_of("/api/v1/webhooks/trg_1"),
                trigger_key("trg_1"),
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
        assert_eq!(request.headers.get(&IDEMPOTENCY_KEY).unwrap(), "op-1");
        assert_eq!(request.headers.get(&CONTENT_TYPE).unwrap(), JSON_API);
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
            join(&base(), "/api/v1/webhooks/trg_secret"),
            route_of("/api/v1/webhooks/trg_secret"),
            trigger_key("trg_secret"),
            &id,
            Bytes::from_static(b"{}"),
            &HeaderMap::new(),
            None,
        )
        .unwrap();
        assert!(!request.route.contains("trg_secret"));
        assert_eq!(request.headers.get(&IDEMPOTENCY_KEY).unwrap(), "op-1");
    }
}
