//! Modulify's requests: a method call, `POST /v1/<method>`, and the catalogue, `GET /v1/tools`.

use std::borrow::Cow;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, Method};

use crate::core::error::Result;
use crate::core::key::IdempotencyKey;
use crate::core::request::{FixedRequest, add_headers, content_type, url_of};
use crate::vendors::Surface;
use crate::vendors::modulify::tables;

impl FixedRequest {
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
        let path = format!("{}{method}", tables::METHODS_PREFIX);
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
        Ok(Self::new(
            Surface::Modulify.profile(),
            Method::POST,
            url,
            Cow::Owned(path),
            headers,
            body,
            key,
        ))
    }

    /// Modulify's method catalogue, `GET /v1/tools`.
    pub(crate) fn modulify_tools(base: &reqwest::Url) -> Result<Self> {
        let url = url_of(base, tables::TOOLS_PATH)?;
        Ok(Self::new(
            Surface::Modulify.profile(),
            Method::GET,
            url,
            Cow::Borrowed(tables::TOOLS_PATH),
            HeaderMap::new(),
            Bytes::new(),
            None,
        ))
    }
}
