//! A third vendor, for tests only: an API that follows the IETF Idempotency-Key draft
//! (draft-ietf-httpapi-idempotency-key-header) and nothing else. Its whole vendor is this file
//! and one line in `src/vendors/mod.rs`; it runs through the same engine with no change under
//! `src/core/`. Its tests, against a small server of the draft over real TCP, are `tests.rs`.

use std::borrow::Cow;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, Method};

use crate::core::error::{ErrorKind, Result};
use crate::core::key::IdempotencyKey;
use crate::core::matrix::{Rule, Verdict, When, rule};
use crate::core::profile::{KeyRules, Reach, Replay, Scopes, SurfaceProfile, Vendor, always_kept};
use crate::core::request::{FixedRequest, content_type, url_of};

#[cfg(test)]
mod tests;

#[rustfmt::skip]
static RULES: &[Rule] = &[
    rule(When::NoResponse,            Verdict::RetryAfterBackoff,    "No answer: retry with the same key"),
    rule(When::Range(200, 299),       Verdict::Success,              "Done, or the stored answer replayed"),
    rule(When::Status(&[400]),        Verdict::Stop(ErrorKind::ClientError), "The key is missing: MUST reply 400"),
    rule(When::Status(&[409]),        Verdict::RetryAfterServerWait, "The original is in flight: MUST reply 409; retry it later"),
    rule(When::Status(&[422]),        Verdict::Stop(ErrorKind::KeyReused), "The key was reused with another payload: MUST reply 422"),
    rule(When::Status(&[429]),        Verdict::RetryAfterServerWait, "Too many requests: after Retry-After"),
    rule(When::Status(&[500, 502, 503, 504]), Verdict::RetryAfterBackoff, "Transient: retry with the same key"),
    rule(When::Other,                 Verdict::Stop(ErrorKind::UnexpectedStatus), "Outside the draft"),
];

static DRAFT: Vendor = Vendor {
    keys: KeyRules { max_len: 255 },
    // The draft names no replay marker: a replay is the stored answer, as it was.
    replay: Replay {
        header: HeaderName::from_static("idempotency-replayed"),
        answer_not_kept: always_kept,
    },
};

pub(crate) static KEYED_POST: SurfaceProfile = SurfaceProfile {
    name: "ietf_draft_post",
    vendor: &DRAFT,
    rules: RULES,
    error_codes: |_| Vec::new(),
    sends_key: true,
    answer_limit: None,
    in_progress: Some(409),
    not_found: "not found",
    status_is_the_answer: false,
    // A 429 speaks for the credential; a 409 for its key alone.
    scopes: Scopes {
        sits_in: Reach::Credential,
        closes: &[
            (429, Reach::Credential),
            (409, Reach::Call),
            (503, Reach::Call),
        ],
        route_policy: None,
        service: "ietf_draft",
    },
};

/// `POST path` with `body`, and `key` as its `Idempotency-Key` (none: the draft's 400).
pub(crate) fn post(
    base: &reqwest::Url,
    path: &str,
    key: Option<&IdempotencyKey>,
    body: Bytes,
) -> Result<FixedRequest> {
    let mut headers = HeaderMap::new();
    if let Some(key) = key {
        DRAFT.keys.check(key)?;
        headers.insert(
            HeaderName::from_static("idempotency-key"),
            key.to_header_value(),
        );
    }
    content_type(&mut headers, "application/json");
    Ok(FixedRequest {
        profile: &KEYED_POST,
        method: Method::POST,
        url: url_of(base, path)?,
        route: Cow::Owned(path.to_owned()),
        headers,
        body,
        identity: key.map(|key| key.as_str().to_owned()),
        route_key: None,
        signer: None,
    })
}
