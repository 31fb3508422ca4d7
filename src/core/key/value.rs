//! The idempotency key as a value: what it holds and how it is shown and sent. How a key is
//! made and checked (which can fail with an [`Error`](crate::Error)) is `mod.rs`; this file
//! imports no error, so an error can carry the key its attempts sent without a circle.

use std::fmt;
use std::sync::Arc;

use http::HeaderValue;

/// An idempotency key: 1 to 255 visible ASCII characters (`0x21..=0x7E`).
///
/// Cheap to clone. Keys are not secrets, but never put a credential or tenant secret in one
/// (Hodoflow's "Idempotency and retries").
///
/// # Examples
///
/// ```
/// use hodoflow_retry::IdempotencyKey;
///
/// // Derived from the business operation: the same ID gives the same key after a restart.
/// let key = IdempotencyKey::from_operation_id("invoice-2026-0042:create");
/// assert_eq!(key, IdempotencyKey::from_operation_id("invoice-2026-0042:create"));
///
/// // A caller's own value is checked before anything is sent.
/// assert!(IdempotencyKey::new("dashboard-create-20260731-001").is_ok());
/// assert!(IdempotencyKey::new("has a space").is_err());
/// ```
#[derive(Clone)]
pub struct IdempotencyKey {
    pub(super) text: Arc<str>,
    pub(super) header: HeaderValue,
    /// Derived from an empty or blank operation ID: every send refuses it (see
    /// [`IdempotencyKey::from_operation_id`]).
    pub(super) blank_operation: bool,
}

impl IdempotencyKey {
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The key as text, shared rather than copied.
    pub(crate) fn shared_text(&self) -> Arc<str> {
        Arc::clone(&self.text)
    }

    /// The key as a header value, ready to send.
    pub fn to_header_value(&self) -> HeaderValue {
        self.header.clone()
    }
}

impl PartialEq for IdempotencyKey {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for IdempotencyKey {}

impl std::hash::Hash for IdempotencyKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("IdempotencyKey")
            .field(&self.as_str())
            .finish()
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for IdempotencyKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}
