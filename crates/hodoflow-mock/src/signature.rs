//! Signed deliveries (`docs/wire-contract.md`, "Signed deliveries"): the Standard Webhooks v1 check
//! a trigger with signing secrets makes before anything else about the delivery is decided.
//!
//! A delivery is accepted when `webhook-id`, `webhook-timestamp` and `webhook-signature` are
//! all present, the timestamp is within [`TOLERANCE`] of the server's clock (either side), and
//! any one `v1` signature matches any one of the trigger's secrets. The comparison is aws-lc-rs's
//! constant-time one: the time it takes says nothing about how much of a forged signature was
//! right. HMAC-SHA256 and base64 come from aws-lc-rs and `base64`, both already in the
//! workspace's tree as reqwest's TLS stack's, so the server adds no crate of its own.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::{constant_time, hmac};
use axum::http::HeaderMap;
use base64::Engine as _;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use serde::Serialize;

/// How far a timestamp may be from the server's clock, either side.
pub const TOLERANCE: Duration = Duration::from_secs(300);

/// A secret's prefix.
const PREFIX: &str = "whsec_";

/// Base64 as secrets are written: standard alphabet, padding optional.
const SECRET_BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Why a signed delivery was refused, or that it was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignatureVerdict {
    /// Every header present, the timestamp in the window, a signature matched.
    Accepted,
    /// `webhook-id`, `webhook-timestamp` or `webhook-signature` is missing or not text.
    MissingHeader,
    /// `webhook-timestamp` is not an integer.
    BadTimestamp,
    /// The timestamp is more than 300 s before the server's clock.
    Stale,
    /// The timestamp is more than 300 s after the server's clock.
    Future,
    /// No `v1` signature matched any of the trigger's secrets.
    NoMatch,
}

impl SignatureVerdict {
    /// A short name for the ledger and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::MissingHeader => "missing_header",
            Self::BadTimestamp => "bad_timestamp",
            Self::Stale => "stale",
            Self::Future => "future",
            Self::NoMatch => "no_match",
        }
    }
}

impl fmt::Display for SignatureVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The HMAC key of a `whsec_` secret; `None` when it is not one.
pub(crate) fn key_of(secret: &str) -> Option<hmac::Key> {
    let encoded = secret.strip_prefix(PREFIX)?;
    let bytes = SECRET_BASE64.decode(encoded).ok()?;
    Some(hmac::Key::new(hmac::HMAC_SHA256, &bytes))
}

/// Checks a delivery's signature headers against `secrets` at `now`.
pub(crate) fn verify(
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[String],
    now: SystemTime,
) -> SignatureVerdict {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let (Some(id), Some(timestamp), Some(signatures)) = (
        text("webhook-id"),
        text("webhook-timestamp"),
        text("webhook-signature"),
    ) else {
        return SignatureVerdict::MissingHeader;
    };
    let Ok(seconds) = timestamp.trim().parse::<i64>() else {
        return SignatureVerdict::BadTimestamp;
    };
    let now = match now.duration_since(UNIX_EPOCH) {
        Ok(since) => i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_secs()).unwrap_or(i64::MAX),
    };
    let tolerance = TOLERANCE.as_secs() as i64;
    if seconds < now.saturating_sub(tolerance) {
        return SignatureVerdict::Stale;
    }
    if seconds > now.saturating_add(tolerance) {
        return SignatureVerdict::Future;
    }
    let offered: Vec<Vec<u8>> = signatures
        .split(' ')
        .filter_map(|part| part.strip_prefix("v1,"))
        .filter_map(|encoded| STANDARD.decode(encoded).ok())
        .collect();
    let matched = secrets
        .iter()
        .filter_map(|secret| key_of(secret))
        .any(|key| {
            let mut context = hmac::Context::with_key(&key);
            for part in [id.as_bytes(), b".", timestamp.as_bytes(), b".", body] {
                context.update(part);
            }
            let expected = context.sign();
            offered.iter().any(|signature| {
                constant_time::verify_slices_are_equal(expected.as_ref(), signature).is_ok()
            })
        });
    if matched {
        SignatureVerdict::Accepted
    } else {
        SignatureVerdict::NoMatch
    }
}

/// Signs `body` as a Standard Webhooks sender does: `v1,<base64>`. For tests and rehearsals.
pub fn sign_delivery(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = key_of(secret)?;
    let mut context = hmac::Context::with_key(&key);
    for part in [
        id.as_bytes(),
        b".",
        timestamp.to_string().as_bytes(),
        b".",
        body,
    ] {
        context.update(part);
    }
    Some(format!("v1,{}", STANDARD.encode(context.sign().as_ref())))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    const OTHER: &str = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    const BODY: &[u8] = br#"{"email":"test@example.com","username":"test_user"}"#;
    const AT: i64 = 1_649_367_553;

    fn headers(timestamp: i64, signature: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let id = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
        headers.insert("webhook-id", HeaderValue::from_static(id));
        headers.insert("webhook-timestamp", HeaderValue::from(timestamp));
        headers.insert("webhook-signature", signature.parse().unwrap());
        headers
    }

    fn at(seconds: i64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds as u64)
    }

    #[test]
    fn accepts_the_standard_webhooks_reference_signature() {
        let signature = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";
        let id = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
        assert_eq!(
            sign_delivery(SECRET, id, AT, BODY).as_deref(),
            Some(signature)
        );
        let verdict = verify(&headers(AT, signature), BODY, &[SECRET.into()], at(AT));
        assert_eq!(verdict, SignatureVerdict::Accepted);
    }

    #[test]
    fn accepts_within_300_seconds_either_side_and_no_further() {
        let id = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
        let signed = |ts| headers(ts, &sign_delivery(SECRET, id, ts, BODY).unwrap());
        let secrets = [SECRET.to_owned()];
        let check = |ts, now| verify(&signed(ts), BODY, &secrets, at(now));
        assert_eq!(check(AT, AT + 300), SignatureVerdict::Accepted);
        assert_eq!(check(AT, AT - 300), SignatureVerdict::Accepted);
        assert_eq!(check(AT, AT + 301), SignatureVerdict::Stale);
        assert_eq!(check(AT, AT - 301), SignatureVerdict::Future);
    }

    #[test]
    fn any_listed_signature_may_match_any_secret() {
        let id = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
        let ours = sign_delivery(SECRET, id, AT, BODY).unwrap();
        let theirs = sign_delivery(OTHER, id, AT, BODY).unwrap();
        let both = format!("{theirs} {ours}");
        let rotated = [OTHER.to_owned(), SECRET.to_owned()];
        assert_eq!(
            verify(&headers(AT, &both), BODY, &[SECRET.into()], at(AT)),
            SignatureVerdict::Accepted
        );
        assert_eq!(
            verify(&headers(AT, &ours), BODY, &rotated, at(AT)),
            SignatureVerdict::Accepted
        );
        assert_eq!(
            verify(&headers(AT, &theirs), BODY, &[SECRET.into()], at(AT)),
            SignatureVerdict::NoMatch
        );
        let other_body = verify(&headers(AT, &ours), b"{}", &[SECRET.into()], at(AT));
        assert_eq!(other_body, SignatureVerdict::NoMatch);
        let v2 = ours.replacen("v1,", "v2,", 1);
        let unknown_version = verify(&headers(AT, &v2), BODY, &[SECRET.into()], at(AT));
        assert_eq!(unknown_version, SignatureVerdict::NoMatch);
    }

    #[test]
    fn a_missing_header_or_a_bad_timestamp_is_refused() {
        let mut missing = headers(AT, "v1,x");
        missing.remove("webhook-id");
        let secrets = [SECRET.to_owned()];
        assert_eq!(
            verify(&missing, BODY, &secrets, at(AT)),
            SignatureVerdict::MissingHeader
        );
        let mut bad = headers(AT, "v1,x");
        bad.insert("webhook-timestamp", HeaderValue::from_static("soon"));
        assert_eq!(
            verify(&bad, BODY, &secrets, at(AT)),
            SignatureVerdict::BadTimestamp
        );
    }
}
