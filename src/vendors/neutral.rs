//! The vendor-neutral profile: paths no vendor's profile claims, as the reqwest-middleware
//! adapter meets them (`middleware.rs`).
//!
//! No document describes such a path, so nothing vendor-specific is assumed: no error codes, no
//! replay semantics beyond the common `idempotency-replayed` header, no "in progress" status. What
//! is known is RFC 9110's, section 9.2.2: GET, HEAD, OPTIONS, TRACE, PUT and DELETE are
//! idempotent, so repeating one leaves the server as one would. Those are retried on no answer,
//! 429 and 5xx ([`Surface::IdempotentMethod`](super::Surface::IdempotentMethod)). Any other
//! method (POST, PATCH, an extension method) is repeated only under an `Idempotency-Key` the
//! caller gave, the same on every attempt ([`Surface::CallerKeyed`](super::Surface::CallerKeyed));
//! without one it is sent once. A key is never generated for such a path: nothing says its server
//! honours one.

use http::HeaderName;
#[cfg(any(feature = "middleware", test))]
use http::Method;
use serde_json::Value;

use crate::core::error::ErrorKind;
use crate::core::matrix::{Matrix, Rule, Verdict, When, rule};

#[cfg(any(feature = "middleware", test))]
use super::Surface;
use crate::core::profile::{KeyRules, Reach, Replay, Scopes, SurfaceProfile, Vendor, always_kept};

/// RFC 9110, section 9.2.2: the methods whose repeat has the effect of one request.
#[cfg(any(feature = "middleware", test))]
pub(crate) const IDEMPOTENT_METHODS: [Method; 6] = [
    Method::GET,
    Method::HEAD,
    Method::OPTIONS,
    Method::TRACE,
    Method::PUT,
    Method::DELETE,
];

/// The surface of `method` on a path no profile claims, when the caller gave an
/// `Idempotency-Key` (`keyed`) or not; `None`: send it once, never retried.
#[cfg(any(feature = "middleware", test))]
pub(crate) fn surface(method: &Method, keyed: bool) -> Option<Surface> {
    if IDEMPOTENT_METHODS.contains(method) {
        Some(Surface::IdempotentMethod)
    } else if keyed {
        Some(Surface::CallerKeyed)
    } else {
        None
    }
}

/// What holds for every server no profile describes.
pub(crate) static NEUTRAL: Vendor = Vendor {
    keys: KeyRules {
        max_len: 255,
        header: HeaderName::from_static("idempotency-key"),
    },
    replay: Replay {
        header: HeaderName::from_static("idempotency-replayed"),
        answer_not_kept: always_kept,
    },
};

/// Whom the signals of an API no profile claims hold: a 429 speaks for the credential, a 503's
/// `Retry-After` for the call alone; it has no route windows, so every exhausted `RateLimit`
/// policy is the credential's.
const SCOPES: Scopes = Scopes {
    sits_in: Reach::Credential,
    closes: &[(429, Reach::Credential), (503, Reach::Call)],
    route_policy: None,
    service: "api",
};

/// An idempotent method (RFC 9110) on a path no profile claims.
pub(crate) static IDEMPOTENT_METHOD: SurfaceProfile = SurfaceProfile {
    name: "idempotent_method",
    vendor: &NEUTRAL,
    rules: Matrix::new(TRANSIENT_RETRIED),
    error_codes: no_codes,
    sends_key: false,
    answer_limit: None,
    in_progress: None,
    not_found: ErrorKind::NotFound.describe(),
    status_is_the_answer: false,
    scopes: SCOPES,
};

/// Any other method on a path no profile claims, with the caller's `Idempotency-Key`.
pub(crate) static CALLER_KEYED: SurfaceProfile = SurfaceProfile {
    name: "caller_keyed",
    vendor: &NEUTRAL,
    rules: Matrix::new(TRANSIENT_RETRIED),
    error_codes: no_codes,
    sends_key: true,
    answer_limit: None,
    in_progress: None,
    not_found: ErrorKind::NotFound.describe(),
    status_is_the_answer: false,
    scopes: SCOPES,
};

/// No vendor's error document is known.
fn no_codes(_: &Value) -> Vec<String> {
    Vec::new()
}

use ErrorKind::{
    ClientError, Forbidden, NotFound, PayloadTooLarge, UnexpectedStatus, Unprocessable,
};
use Verdict::{ReexchangeOnce, RetryAfterBackoff, RetryAfterServerWait, Stop, Success};
use When::{NoResponse, Other, Range, Status};

/// Retried on no answer (a timeout, a reset), 429 and 5xx; nothing else.
#[rustfmt::skip]
const TRANSIENT_RETRIED: &[Rule] = &[
    //   Result                                           Retry?                  Action
    rule(NoResponse,                                      RetryAfterBackoff,      "Idempotent or keyed: retry with bounded backoff"),
    rule(Range(200, 299),                                 Success,                "Done"),
    rule(Status(&[429]),                                  RetryAfterServerWait,   "Wait the Retry-After duration, then retry"),
    rule(Range(500, 599),                                 RetryAfterBackoff,      "Exponential backoff with jitter and a bounded attempt/time budget"),
    rule(Status(&[401]),                                  ReexchangeOnce,         "Exchange once if the client has an exchanger, then stop"),
    rule(Status(&[403]),                                  Stop(Forbidden),        "Correct the credential's permissions"),
    rule(Status(&[404]),                                  Stop(NotFound),         "Correct the path"),
    rule(Status(&[413]),                                  Stop(PayloadTooLarge),  "Correct body size"),
    rule(Status(&[422]),                                  Stop(Unprocessable),    "Correct the request"),
    rule(Range(400, 499),                                 Stop(ClientError),      "Correct the request; never retried unchanged"),
    rule(Other,                                           Stop(UnexpectedStatus), "Outside HTTP's status classes; never retried"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotent_methods_are_retried_and_others_only_with_the_callers_key() {
        for method in IDEMPOTENT_METHODS {
            assert_eq!(surface(&method, false), Some(Surface::IdempotentMethod));
            assert_eq!(surface(&method, true), Some(Surface::IdempotentMethod));
        }
        let extension = Method::from_bytes(b"PURGE").unwrap();
        for method in [Method::POST, Method::PATCH, Method::CONNECT, extension] {
            assert_eq!(surface(&method, false), None, "{method}");
            assert_eq!(
                surface(&method, true),
                Some(Surface::CallerKeyed),
                "{method}"
            );
        }
    }
}
