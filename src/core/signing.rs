//! Signed deliveries: Standard Webhooks v1 signatures, made again for every attempt.
//!
//! A route may demand that deliveries prove their sender (`docs/wire-contract.md`, "Signed
//! deliveries"). Every attempt then carries `webhook-id` (the delivery ID, the same value as its
//! `Idempotency-Key`), `webhook-timestamp` (Unix seconds when this attempt is sent) and
//! `webhook-signature`: `v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`, one for each
//! secret during a rotation, space-separated.
//!
//! Why the signature is made in the attempt path, not when the request is fixed: the body bytes
//! and the delivery ID stay the same on every attempt, but the receiver refuses a timestamp more
//! than 5 minutes from its clock. A sender that signs once has its long retries refused as
//! stale; one that re-serializes its body to sign it signs other bytes than it sends. Here the
//! transport signs each attempt just before it leaves ([`Signer::sign`]), over the fixed
//! [`Bytes`](bytes::Bytes) of the request, with the time read from the crate's one clock
//! (`runtime::wall_now`), so tokio's paused time moves the timestamps too.
//!
//! Why aws-lc-rs and base64: both are already in the default dependency tree. reqwest's rustls
//! uses aws-lc-rs as its crypto provider, and its `hmac` module is a constant-time HMAC-SHA256
//! with a FIPS-validated lineage; `base64` comes with hyper-util and reqwest. Depending on them
//! directly adds no crate to a build (a separate `hmac` + `sha2` pair would add four). The
//! message is fed to the HMAC in pieces, so it is never copied into one buffer.
//!
//! Cost when unused: a client without a secret holds `None`, and an attempt of an unsigned
//! request checks that `None` and nothing else: no allocation, no clock read.
//!
//! Secrets hygiene: a [`SigningSecret`] prints only its fingerprint (the first 8 bytes of the
//! SHA-256 of the secret's text, in hex), a malformed secret's error never quotes it (nor the
//! base64 decoder's message, which would quote a byte of it), and the signature header is marked
//! sensitive, so `Debug` of a header map shows `Sensitive`.

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::{digest, hmac};
use base64::Engine as _;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::core::auth::secret::Secret;
use crate::core::error::{Error, Result};
use crate::core::redact::Prepared;

/// The prefix of a Standard Webhooks secret.
const PREFIX: &str = "whsec_";
/// The fewest key bytes a secret may decode to (`docs/wire-contract.md`, "Signed deliveries").
pub const MIN_SECRET_BYTES: usize = 24;
/// The bytes of a secret's SHA-256 its fingerprint shows.
const FINGERPRINT_BYTES: usize = 8;

/// `webhook-id`: the delivery ID.
pub(crate) const WEBHOOK_ID: HeaderName = HeaderName::from_static("webhook-id");
/// `webhook-timestamp`: Unix seconds when the attempt was sent.
pub(crate) const WEBHOOK_TIMESTAMP: HeaderName = HeaderName::from_static("webhook-timestamp");
/// `webhook-signature`: `v1,<base64>` for each secret, space-separated.
pub(crate) const WEBHOOK_SIGNATURE: HeaderName = HeaderName::from_static("webhook-signature");

/// Base64 as secrets are written: standard alphabet, padding optional.
const SECRET_BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A Standard Webhooks signing secret: `whsec_` followed by the base64 of at least 24 bytes.
///
/// `Debug` and `Display` show only its [fingerprint](Self::fingerprint).
///
/// # Examples
///
/// ```
/// use hodoflow_retry::{ErrorKind, webhook::SigningSecret};
///
/// let secret = SigningSecret::new("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")?;
/// assert_eq!(secret.fingerprint().len(), 16);
/// assert!(!format!("{secret:?}").contains("C2FVsBQI"));
///
/// // Malformed secrets are refused, and the error does not quote them.
/// let short = SigningSecret::new("whsec_c2hvcnQ=").unwrap_err();
/// assert_eq!(short.kind(), ErrorKind::InvalidInput);
/// assert!(!short.to_string().contains("c2hvcnQ"));
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Clone)]
pub struct SigningSecret {
    key: hmac::Key,
    fingerprint: [u8; FINGERPRINT_BYTES],
    /// The secret's text, to clean what a server echoes (`redact.rs`); never shown.
    text: Secret,
}

impl SigningSecret {
    /// Parses a secret.
    ///
    /// # Errors
    ///
    /// An `invalid_input` error, which never quotes the secret, when it does not start with
    /// `whsec_`, the rest is not base64, or it decodes to fewer than 24 bytes.
    pub fn new(secret: impl Into<Secret>) -> Result<Self> {
        let secret = secret.into();
        let text = secret.expose();
        let Some(encoded) = text.strip_prefix(PREFIX) else {
            return Err(Error::invalid_input(
                "a signing secret starts with whsec_ (it is not shown: it is a secret)",
            ));
        };
        // The decoder's own error would quote a byte of the secret: it is not kept.
        let key = SECRET_BASE64.decode(encoded).map_err(|_| {
            Error::invalid_input(
                "a signing secret is whsec_ followed by base64 (it is not shown: it is a secret)",
            )
        })?;
        if key.len() < MIN_SECRET_BYTES {
            return Err(Error::invalid_input(format!(
                "a signing secret decodes to {} bytes, fewer than {MIN_SECRET_BYTES} (it is not shown: it is a secret)",
                key.len()
            )));
        }
        let digest = digest::digest(&digest::SHA256, text.as_bytes());
        let mut fingerprint = [0; FINGERPRINT_BYTES];
        fingerprint.copy_from_slice(&digest.as_ref()[..FINGERPRINT_BYTES]);
        Ok(Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, &key),
            fingerprint,
            text: secret.clone(),
        })
    }

    /// The first 8 bytes of the SHA-256 of the secret's text (`whsec_` included), in 16 hex
    /// digits: it names the secret in errors and logs without giving it away. The same as
    /// `printf %s "$SECRET" | sha256sum | cut -c1-16`.
    pub fn fingerprint(&self) -> String {
        self.fingerprint
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    /// The `v1,<base64>` signature of `id`, `timestamp` and `body`.
    fn sign_into(&self, id: &[u8], timestamp: &[u8], body: &[u8], into: &mut String) {
        let mut context = hmac::Context::with_key(&self.key);
        for part in [id, b".", timestamp, b".", body] {
            context.update(part);
        }
        into.push_str("v1,");
        STANDARD.encode_string(context.sign().as_ref(), into);
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningSecret")
            .field("fingerprint", &self.fingerprint())
            .finish_non_exhaustive()
    }
}

impl fmt::Display for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "signing secret {}", self.fingerprint())
    }
}

/// The secrets one delivery is signed with: one, or several during a rotation.
#[derive(Clone)]
pub(crate) struct Signer {
    secrets: Arc<[SigningSecret]>,
    /// The secrets' texts, ready to clean what a server echoes: built once, not per delivery.
    prepared: Prepared,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.secrets.iter()).finish()
    }
}

impl Signer {
    /// Parses `secrets`; `None` when there are none.
    ///
    /// # Errors
    ///
    /// As [`SigningSecret::new`], naming which secret of how many was refused.
    pub(crate) fn parse(secrets: &[Secret]) -> Result<Option<Self>> {
        if secrets.is_empty() {
            return Ok(None);
        }
        let parsed = secrets
            .iter()
            .enumerate()
            .map(|(at, secret)| {
                SigningSecret::new(secret.clone()).map_err(|error| match secrets.len() {
                    1 => error,
                    n => Error::invalid_input(format!(
                        "signing secret {} of {n}: {}",
                        at + 1,
                        error.to_string().trim_start_matches("invalid input: ")
                    )),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let prepared = Prepared::new(parsed.iter().map(|secret| secret.text.expose()));
        Ok(Some(Self {
            secrets: parsed.into(),
            prepared,
        }))
    }

    /// The fingerprint of each secret, comma-separated.
    pub(crate) fn fingerprints(&self) -> String {
        let prints: Vec<String> = self
            .secrets
            .iter()
            .map(SigningSecret::fingerprint)
            .collect();
        prints.join(", ")
    }

    /// The secrets, ready to clean what a server echoes.
    pub(crate) fn prepared(&self) -> &Prepared {
        &self.prepared
    }

    /// How many secrets sign.
    pub(crate) fn len(&self) -> usize {
        self.secrets.len()
    }

    /// Adds `webhook-timestamp` (`now`) and `webhook-signature` over `id` and `body` to
    /// `headers`, replacing any there. The signature value is marked sensitive.
    pub(crate) fn sign(&self, headers: &mut HeaderMap, id: &str, body: &[u8], now: SystemTime) {
        let seconds = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let mut digits = [0; 20];
        let timestamp = decimal(seconds, &mut digits);
        // "v1," and 44 base64 digits a secret, and the spaces between.
        let mut signatures = String::with_capacity(48 * self.secrets.len());
        for (at, secret) in self.secrets.iter().enumerate() {
            if at > 0 {
                signatures.push(' ');
            }
            secret.sign_into(id.as_bytes(), timestamp, body, &mut signatures);
        }
        headers.insert(WEBHOOK_TIMESTAMP, HeaderValue::from(seconds));
        // Base64, digits, commas and spaces: always a valid header value.
        if let Ok(mut value) = HeaderValue::try_from(signatures) {
            value.set_sensitive(true);
            headers.insert(WEBHOOK_SIGNATURE, value);
        }
    }
}

/// `n` in decimal digits, written at the end of `digits`: a timestamp formatted without an
/// allocation.
fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[at..];
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn decimal_writes_every_digit() {
        for n in [0, 7, 10, 1_700_000_000, u64::MAX] {
            assert_eq!(decimal(n, &mut [0; 20]), n.to_string().as_bytes());
        }
    }

    /// The reference vector of the `standardwebhooks` crate's own `test_sign`.
    const REFERENCE_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    const REFERENCE_ID: &str = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
    const REFERENCE_TIMESTAMP: u64 = 1_649_367_553;
    const REFERENCE_BODY: &[u8] = br#"{"email":"test@example.com","username":"test_user"}"#;
    const REFERENCE_SIGNATURE: &str = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";

    fn signer(secrets: &[&str]) -> Signer {
        let secrets: Vec<Secret> = secrets.iter().map(|s| Secret::new(*s)).collect();
        Signer::parse(&secrets).unwrap().unwrap()
    }

    fn signed(signer: &Signer, at: u64) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let now = UNIX_EPOCH + Duration::from_secs(at);
        signer.sign(&mut headers, REFERENCE_ID, REFERENCE_BODY, now);
        headers
    }

    #[test]
    fn signs_the_standard_webhooks_reference_vector() {
        let headers = signed(&signer(&[REFERENCE_SECRET]), REFERENCE_TIMESTAMP);
        assert_eq!(headers[WEBHOOK_TIMESTAMP], "1649367553");
        assert_eq!(headers[WEBHOOK_SIGNATURE], REFERENCE_SIGNATURE);
        assert!(headers[WEBHOOK_SIGNATURE].is_sensitive());
    }

    #[test]
    fn a_rotation_sends_one_signature_per_secret_space_separated() {
        let other = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        let headers = signed(&signer(&[other, REFERENCE_SECRET]), REFERENCE_TIMESTAMP);
        let value = headers[WEBHOOK_SIGNATURE].to_str().unwrap();
        let parts: Vec<&str> = value.split(' ').collect();
        assert_eq!(parts.len(), 2, "{value}");
        assert!(parts[0].starts_with("v1,") && parts[0] != REFERENCE_SIGNATURE);
        assert_eq!(parts[1], REFERENCE_SIGNATURE);
    }

    #[test]
    fn a_later_timestamp_gives_another_signature_over_the_same_bytes() {
        let signer = signer(&[REFERENCE_SECRET]);
        let first = signed(&signer, REFERENCE_TIMESTAMP);
        let later = signed(&signer, REFERENCE_TIMESTAMP + 360);
        assert_eq!(later[WEBHOOK_TIMESTAMP], "1649367913");
        assert_ne!(first[WEBHOOK_SIGNATURE], later[WEBHOOK_SIGNATURE]);
    }

    #[test]
    fn malformed_secrets_are_refused_without_being_quoted() {
        let cases = [
            ("C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "starts with whsec_"),
            (
                "whsec_C2FVsBQI!!!scChlQIMV+b5sSYspob7oD",
                "followed by base64",
            ),
            (
                "whsec_c2hvcnQtc2VjcmV0",
                "decodes to 12 bytes, fewer than 24",
            ),
            ("", "starts with whsec_"),
        ];
        for (secret, says) in cases {
            let error = SigningSecret::new(secret).unwrap_err();
            let text = format!("{error} {error:?}");
            assert_eq!(error.kind(), crate::core::error::ErrorKind::InvalidInput);
            assert!(text.contains(says), "{text}");
            assert!(
                secret.is_empty() || !text.contains(&secret[6..12]),
                "{text}"
            );
            assert!(!text.contains("!!!"), "{text}");
        }
        let secrets = [Secret::new(REFERENCE_SECRET), Secret::new("whsec_c2hvcnQ=")];
        let error = Signer::parse(&secrets).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("invalid input: signing secret 2 of 2: "),
            "{error}"
        );
        assert!(Signer::parse(&[]).unwrap().is_none());
    }

    #[test]
    fn debug_and_display_show_the_fingerprint_only() {
        let secret = SigningSecret::new(REFERENCE_SECRET).unwrap();
        let print = secret.fingerprint();
        assert_eq!(print.len(), 16);
        assert!(print.bytes().all(|b| b.is_ascii_hexdigit()));
        let shown = format!("{secret} {secret:?} {:?}", signer(&[REFERENCE_SECRET]));
        assert!(shown.contains(&print), "{shown}");
        assert!(!shown.contains("C2FVsBQI"), "{shown}");
    }
}
