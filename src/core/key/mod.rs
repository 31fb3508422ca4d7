//! Request identity: the idempotency key and the webhook delivery ID.
//!
//! A retry is only safe when it carries the same identity as the attempt it repeats. So the key is
//! fixed once per logical operation, before the first send, and reused on every attempt. The best
//! key is derived from a stable business operation ID ([`IdempotencyKey::from_operation_id`]): a
//! process that crashes and restarts derives the same key again. A random key protects retries
//! only while the caller keeps it ([`IdempotencyKey::random`]).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};
use uuid::Uuid;

use crate::core::error::{Error, Result};

pub(crate) mod value;

pub use value::IdempotencyKey;

/// The longest key the contract accepts, in bytes (Modulify's "Idempotency and retries";
/// `docs/wire-contract.md`, "Idempotency keys").
const MAX_LEN: usize = 255;

impl IdempotencyKey {
    /// The namespace of [`IdempotencyKey::from_operation_id`]: the UUIDv5 of
    /// `https://hodoflow-retry.invalid/idempotency-key` in the URL namespace. Fixed forever, so
    /// derived keys stay stable across versions.
    pub const NAMESPACE: Uuid = Uuid::from_u128(0x4dda305d_88d2_5eef_9b62_e8e4894d3469);

    /// Checks and wraps a caller's key.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) error when the value is
    /// empty, longer than 255 bytes, or holds a character outside visible ASCII.
    pub fn new(value: impl AsRef<str>) -> Result<Self> {
        let value = value.as_ref();
        if value.is_empty() {
            return Err(Error::invalid_input("idempotency key is empty"));
        }
        if value.len() > MAX_LEN {
            return Err(Error::invalid_input(format_args!(
                "idempotency key is {} bytes long; at most {MAX_LEN} are allowed",
                value.len()
            )));
        }
        if !crate::core::ascii::visible(value.as_bytes()) {
            let at = value
                .bytes()
                .position(|byte| !byte.is_ascii_graphic())
                .unwrap_or_default();
            return Err(Error::invalid_input(format_args!(
                "idempotency key has an invalid character at byte {at}: only visible ASCII is allowed"
            )));
        }
        let header = HeaderValue::from_str(value).map_err(|source| {
            Error::invalid_input("idempotency key is not a valid header value").with_source(source)
        })?;
        Ok(Self {
            text: Arc::from(value),
            header,
            blank_operation: false,
        })
    }

    /// The recommended key: a UUIDv5 of a stable business operation ID under
    /// [`IdempotencyKey::NAMESPACE`].
    ///
    /// Hodoflow's documentation: generate the key from a stable business operation ID (an order
    /// number and a step, an event ID), persist the operation, and reuse the key on every retry.
    /// The same ID always gives the same key, so even a restarted process repeats the same
    /// operation rather than starting a new one. Two different operations must have different
    /// IDs within one tenant and service account.
    ///
    /// An empty or blank ID (only whitespace) would map every such operation to one global key,
    /// so the first would run and every later one would be answered as its duplicate. Its key
    /// is refused by every send with
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput), before anything is sent.
    ///
    /// ```
    /// # async fn example(client: hodoflow_retry::HodoflowClient) {
    /// use hodoflow_retry::{DeliveryId, ErrorKind, IdempotencyKey};
    ///
    /// let blank = DeliveryId::new(IdempotencyKey::from_operation_id("  "));
    /// let error = client.deliver("trg_x", "{}").delivery_id(blank).send().await.unwrap_err();
    /// assert_eq!(error.kind(), ErrorKind::InvalidInput);
    /// # }
    /// ```
    pub fn from_operation_id(operation_id: &str) -> Self {
        Self::from_operation_id_in(Self::NAMESPACE, operation_id)
    }

    /// Like [`IdempotencyKey::from_operation_id`], under a namespace of your own, for example one
    /// per application sharing a service account.
    pub fn from_operation_id_in(namespace: Uuid, operation_id: &str) -> Self {
        Self {
            blank_operation: operation_id.trim().is_empty(),
            ..Self::from_uuid(Uuid::new_v5(&namespace, operation_id.as_bytes()))
        }
    }

    /// Refuses a key no request may carry: one derived from a blank operation ID. Sending
    /// checks it; a sender that keeps keys to send later (an outbox) checks it before storing.
    ///
    /// # Errors
    ///
    /// `invalid_input`, saying so.
    pub fn check_sendable(&self) -> Result<()> {
        if self.blank_operation {
            return Err(Error::invalid_input(
                "the operation ID is empty or blank: it would give every such operation one key; nothing was sent",
            ));
        }
        Ok(())
    }

    /// A random UUIDv4 key: the last resort.
    ///
    /// It protects retries only while the caller keeps it: persist it with the job before the
    /// first send and reuse it on every retry. Never generate a new one per attempt; that turns
    /// every retry into new work. Prefer [`IdempotencyKey::from_operation_id`].
    pub fn random() -> Self {
        Self::from_uuid(Uuid::new_v4())
    }

    fn from_uuid(uuid: Uuid) -> Self {
        let text = uuid.hyphenated().to_string();
        let header = HeaderValue::from_str(&text)
            .expect("a hyphenated UUID is hex digits and hyphens, a valid header value");
        Self {
            text: Arc::from(text),
            header,
            blank_operation: false,
        }
    }
}

impl FromStr for IdempotencyKey {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self> {
        Self::new(value)
    }
}

impl TryFrom<&str> for IdempotencyKey {
    type Error = Error;

    fn try_from(value: &str) -> Result<Self> {
        Self::new(value)
    }
}

impl TryFrom<String> for IdempotencyKey {
    type Error = Error;

    fn try_from(value: String) -> Result<Self> {
        Self::new(value)
    }
}

impl<'de> serde::Deserialize<'de> for IdempotencyKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Self::new(text).map_err(serde::de::Error::custom)
    }
}

/// A header that can carry a webhook delivery identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeliveryHeader {
    /// `Idempotency-Key`: the header a custom sender should use.
    IdempotencyKey,
    /// `X-GitHub-Delivery`, passed through by a relay.
    GitHubDelivery,
    /// `X-Shopify-Webhook-Id`, passed through by a relay.
    ShopifyWebhookId,
    /// `X-Twilio-Idempotency-Token`, passed through by a relay.
    TwilioIdempotencyToken,
}

impl DeliveryHeader {
    /// The order in which the server picks the delivery identity: the first non-empty header of
    /// these wins (Hodoflow's webhook sender guide). `X-Request-Id` is never one of them: it
    /// changes per attempt.
    pub const PRECEDENCE: &'static [DeliveryHeader] = &[
        Self::IdempotencyKey,
        Self::GitHubDelivery,
        Self::ShopifyWebhookId,
        Self::TwilioIdempotencyToken,
    ];

    /// The header name, in the lower case HTTP/2 and the `http` crate use.
    pub const fn name(self) -> &'static str {
        match self {
            Self::IdempotencyKey => "idempotency-key",
            Self::GitHubDelivery => "x-github-delivery",
            Self::ShopifyWebhookId => "x-shopify-webhook-id",
            Self::TwilioIdempotencyToken => "x-twilio-idempotency-token",
        }
    }

    /// The header name, ready to send.
    pub const fn header_name(self) -> HeaderName {
        HeaderName::from_static(self.name())
    }
}

impl fmt::Display for DeliveryHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The identity of a webhook delivery: the header that carries it and its value.
///
/// Generate it once per logical event, persist it with the outbound job, and reuse it on every
/// retry of that event (Hodoflow's webhook sender guide).
///
/// # Examples
///
/// ```
/// use hodoflow_retry::{DeliveryId, IdempotencyKey, webhook::DeliveryHeader};
/// use http::{HeaderMap, HeaderValue};
///
/// // A relay passes the provider's delivery ID through.
/// let mut headers = HeaderMap::new();
/// headers.insert("x-request-id", HeaderValue::from_static("changes-every-attempt"));
/// headers.insert("x-github-delivery", HeaderValue::from_static("72d3162e-cc78-11e3-81ab-4c9367dc0958"));
///
/// let id = DeliveryId::from_headers(&headers)?.expect("a delivery header is present");
/// assert_eq!(id.header(), DeliveryHeader::GitHubDelivery);
/// assert_eq!(id.key().as_str(), "72d3162e-cc78-11e3-81ab-4c9367dc0958");
///
/// // A custom sender derives its own from the event.
/// let own = DeliveryId::new(IdempotencyKey::from_operation_id("order-4711:shipped"));
/// assert_eq!(own.header(), DeliveryHeader::IdempotencyKey);
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeliveryId {
    header: DeliveryHeader,
    key: IdempotencyKey,
}

impl DeliveryId {
    /// A delivery ID sent as `Idempotency-Key`, the choice for a custom sender.
    pub fn new(key: IdempotencyKey) -> Self {
        Self::provider(DeliveryHeader::IdempotencyKey, key)
    }

    /// A delivery ID sent in a provider's header.
    pub fn provider(header: DeliveryHeader, key: IdempotencyKey) -> Self {
        Self { header, key }
    }

    /// Finds the delivery identity in incoming headers, as the server would: the first non-empty
    /// header in [`DeliveryHeader::PRECEDENCE`] order. `X-Request-Id` is never used.
    ///
    /// Returns `Ok(None)` when no delivery header is present.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) error when the chosen
    /// header's value is not a valid key (see [`IdempotencyKey::new`]).
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>> {
        for &header in DeliveryHeader::PRECEDENCE {
            let value = headers
                .get_all(header.name())
                .iter()
                .find(|value| !value.as_bytes().trim_ascii().is_empty());
            let Some(value) = value else { continue };
            let text = value.to_str().map_err(|_| {
                Error::invalid_input(format_args!("{header} holds a character outside ASCII"))
            })?;
            let key = IdempotencyKey::new(text.trim_ascii()).map_err(|error| {
                Error::invalid_input(format_args!("{header}: {error}")).with_source(error)
            })?;
            return Ok(Some(Self::provider(header, key)));
        }
        Ok(None)
    }

    /// The header the identity is sent in.
    pub fn header(&self) -> DeliveryHeader {
        self.header
    }

    /// The identity's value.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }
}

impl From<IdempotencyKey> for DeliveryId {
    fn from(key: IdempotencyKey) -> Self {
        Self::new(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::ErrorKind;

    fn message(result: Result<IdempotencyKey>) -> String {
        match result {
            Ok(key) => panic!("expected an error, got {key:?}"),
            Err(error) => {
                assert_eq!(error.kind(), ErrorKind::InvalidInput);
                error.to_string()
            }
        }
    }

    #[test]
    fn accepts_1_to_255_visible_ascii_characters() {
        assert!(IdempotencyKey::new("a").is_ok());
        assert!(IdempotencyKey::new("~".repeat(255)).is_ok());
        assert!(IdempotencyKey::new("dashboard-create-20260731-001").is_ok());
        let all_visible: String = (0x21u8..=0x7E).map(char::from).collect();
        assert!(IdempotencyKey::new(all_visible).is_ok());
    }

    #[test]
    fn refuses_an_empty_key() {
        assert_eq!(
            message(IdempotencyKey::new("")),
            "invalid input: idempotency key is empty"
        );
    }

    #[test]
    fn refuses_a_key_longer_than_255_bytes_and_says_how_long() {
        assert_eq!(
            message(IdempotencyKey::new("k".repeat(256))),
            "invalid input: idempotency key is 256 bytes long; at most 255 are allowed"
        );
    }

    #[test]
    fn refuses_spaces_controls_and_non_ascii_naming_the_byte() {
        assert!(message(IdempotencyKey::new("ab cd")).contains("invalid character at byte 2"));
        assert!(message(IdempotencyKey::new("ab\tcd")).contains("at byte 2"));
        assert!(message(IdempotencyKey::new("\u{7f}")).contains("at byte 0"));
        assert!(message(IdempotencyKey::new("clé")).contains("at byte 2"));
    }

    #[test]
    fn derives_the_same_uuid_v5_from_the_same_operation_id() {
        let first = IdempotencyKey::from_operation_id("order-4711:create-invoice");
        let again = IdempotencyKey::from_operation_id("order-4711:create-invoice");
        let other = IdempotencyKey::from_operation_id("order-4712:create-invoice");

        assert_eq!(first, again);
        assert_ne!(first, other);
        let uuid = Uuid::parse_str(first.as_str()).expect("a derived key is a UUID");
        assert_eq!(uuid.get_version_num(), 5);
    }

    #[test]
    fn namespace_is_the_documented_uuid_v5() {
        let derived = Uuid::new_v5(
            &Uuid::NAMESPACE_URL,
            b"https://hodoflow-retry.invalid/idempotency-key",
        );
        assert_eq!(IdempotencyKey::NAMESPACE, derived);
    }

    #[test]
    fn derived_keys_depend_on_the_namespace() {
        let mine = Uuid::new_v5(&Uuid::NAMESPACE_DNS, b"example.com");
        assert_ne!(
            IdempotencyKey::from_operation_id_in(mine, "op-1"),
            IdempotencyKey::from_operation_id("op-1")
        );
    }

    #[test]
    fn random_keys_are_uuid_v4_and_differ() {
        let first = IdempotencyKey::random();
        let second = IdempotencyKey::random();
        assert_ne!(first, second);
        let uuid = Uuid::parse_str(first.as_str()).expect("a random key is a UUID");
        assert_eq!(uuid.get_version_num(), 4);
    }

    #[test]
    fn converts_to_text_and_header_value() {
        let key: IdempotencyKey = "order-1".parse().expect("valid key");
        assert_eq!(key.to_string(), "order-1");
        assert_eq!(key.to_header_value(), "order-1");
        assert_eq!(IdempotencyKey::try_from("order-1").expect("valid key"), key);
        assert_eq!(
            IdempotencyKey::try_from(String::from("order-1")).expect("valid key"),
            key
        );
        assert_eq!(
            IdempotencyKey::from_operation_id("x").to_header_value(),
            IdempotencyKey::from_operation_id("x").as_str()
        );
    }

    #[test]
    fn round_trips_through_serde_and_validates_on_the_way_in() {
        let key = IdempotencyKey::new("job-17").expect("valid key");
        let json = serde_json::to_string(&key).expect("serializes");
        assert_eq!(json, "\"job-17\"");
        let back: IdempotencyKey = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, key);
        assert!(serde_json::from_str::<IdempotencyKey>("\"\"").is_err());
    }

    #[test]
    fn delivery_headers_follow_the_webhook_guide_s_order() {
        let names: Vec<_> = DeliveryHeader::PRECEDENCE
            .iter()
            .map(|header| header.name())
            .collect();
        assert_eq!(
            names,
            [
                "idempotency-key",
                "x-github-delivery",
                "x-shopify-webhook-id",
                "x-twilio-idempotency-token"
            ]
        );
        for header in DeliveryHeader::PRECEDENCE {
            assert_eq!(header.header_name().as_str(), header.name());
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn picks_the_first_non_empty_delivery_header_by_precedence() {
        let map = headers(&[
            ("x-twilio-idempotency-token", "twilio-1"),
            ("idempotency-key", ""),
            ("x-shopify-webhook-id", "shopify-1"),
            ("x-github-delivery", "github-1"),
        ]);
        let id = DeliveryId::from_headers(&map)
            .expect("valid")
            .expect("present");
        assert_eq!(id.header(), DeliveryHeader::GitHubDelivery);
        assert_eq!(id.key().as_str(), "github-1");
    }

    #[test]
    fn prefers_idempotency_key_when_present() {
        let map = headers(&[
            ("x-github-delivery", "github-1"),
            ("idempotency-key", "own-1"),
        ]);
        let id = DeliveryId::from_headers(&map)
            .expect("valid")
            .expect("present");
        assert_eq!(
            id,
            DeliveryId::new(IdempotencyKey::new("own-1").expect("valid"))
        );
    }

    #[test]
    fn never_uses_x_request_id_as_the_delivery_identity() {
        let map = headers(&[("x-request-id", "req-1"), ("idempotency-key", "")]);
        assert_eq!(DeliveryId::from_headers(&map).expect("valid"), None);
    }

    #[test]
    fn refuses_an_invalid_provider_delivery_id_naming_the_header() {
        let map = headers(&[("x-shopify-webhook-id", "two words")]);
        let error = DeliveryId::from_headers(&map).expect_err("invalid");
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        assert!(
            error.to_string().contains("x-shopify-webhook-id"),
            "{error}"
        );
    }
}
