//! The shape of a vendor's data: what the mechanism reads of a profile, vendor-blind.
//!
//! A vendor (`src/vendors/<name>/`) fills these in from its documents: per surface, the literal
//! retry-matrix table, the reader of its error codes, the answer limit, which status means
//! "the same key is still running", and whom each of its signals holds ([`Scopes`]: which
//! scope a 429 or 503 closes, which `RateLimit` policy is a route's, which service its answers
//! speak for); per vendor, the key rules, and how a replay and an answer that was not kept are
//! read. The
//! engine, the classifier and the transport take a [`SurfaceProfile`] and read its fields; none
//! of them asks which vendor it serves.

use http::{HeaderMap, HeaderName};
use serde_json::Value;

use crate::core::error::{Error, ErrorKind, Result};
use crate::core::key::IdempotencyKey;
pub(crate) use crate::core::limit::scope::{Reach, Scopes};
use crate::core::matrix::Matrix;

/// What a vendor's documents fix for one surface.
#[derive(Debug)]
pub(crate) struct SurfaceProfile {
    /// The stable name of the surface in logs.
    pub(crate) name: &'static str,
    /// The vendor-wide rules.
    pub(crate) vendor: &'static Vendor,
    /// The literal retry matrix.
    pub(crate) rules: Matrix,
    /// The error codes of an error body, the way this surface writes them.
    pub(crate) error_codes: fn(&Value) -> Vec<String>,
    /// Whether its requests carry an idempotency key or delivery ID.
    pub(crate) sends_key: bool,
    /// A fixed limit on the answer bytes read; `None`: the client's `max_answer_bytes`.
    pub(crate) answer_limit: Option<usize>,
    /// The status that means "the same key is still running": its retries count as
    /// `in_progress`, and one left when the budget ends is [`ErrorKind::InProgress`].
    pub(crate) in_progress: Option<u16>,
    /// How a 404 is described in an error message.
    pub(crate) not_found: &'static str,
    /// Whether the status alone is the answer, so that a body that broke off mid-read still
    /// counts as answered (a webhook's 202: the server committed, whatever the body said), and
    /// so does a success whose body is over the answer limit. Otherwise the attempt is
    /// unanswered and retried with the same key, and a replay brings the body back.
    pub(crate) status_is_the_answer: bool,
    /// Whom the surface's signals hold.
    pub(crate) scopes: Scopes,
}

impl SurfaceProfile {
    /// The error codes in `body`; empty when it is not an error document of this surface.
    pub(crate) fn codes(&self, body: &[u8]) -> Vec<String> {
        match serde_json::from_slice::<Value>(body) {
            Ok(document) => (self.error_codes)(&document),
            Err(_) => Vec::new(),
        }
    }
}

/// What a vendor's documents fix for all of its surfaces.
#[derive(Debug)]
pub(crate) struct Vendor {
    /// Which keys the server accepts.
    pub(crate) keys: KeyRules,
    /// How a replayed answer is marked, and whether its original answer was kept.
    pub(crate) replay: Replay,
}

/// The keys a vendor's server accepts; checked before anything is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyRules {
    /// The most bytes of a key.
    pub(crate) max_len: usize,
    /// The header a key is sent in.
    pub(crate) header: HeaderName,
}

impl KeyRules {
    /// An `invalid_input` error when `key` is one this vendor's server refuses. Every key is
    /// already 1 or more visible ASCII characters ([`IdempotencyKey::new`]).
    pub(crate) fn check(&self, key: &IdempotencyKey) -> Result<()> {
        key.check_sendable()?;
        if key.as_str().len() > self.max_len {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "invalid input: idempotency key is {} bytes long; at most {} are allowed",
                    key.as_str().len(),
                    self.max_len
                ),
            ));
        }
        Ok(())
    }
}

/// How a vendor marks a replayed answer, and one whose original answer was not kept.
#[derive(Debug)]
pub(crate) struct Replay {
    /// The header that says the answer was replayed (`true`, any case).
    pub(crate) header: HeaderName,
    /// Whether a replayed body says the original answer was not kept.
    pub(crate) answer_not_kept: fn(&Value) -> bool,
}

impl Replay {
    /// Whether `headers` mark a replay.
    pub(crate) fn replayed(&self, headers: &HeaderMap) -> bool {
        headers
            .get(&self.header)
            .is_some_and(|value| value.as_bytes().trim_ascii().eq_ignore_ascii_case(b"true"))
    }

    /// Whether a replayed answer's body says the original answer was not kept.
    pub(crate) fn answer_not_kept(&self, body: &[u8]) -> bool {
        serde_json::from_slice::<Value>(body)
            .is_ok_and(|document| (self.answer_not_kept)(&document))
    }
}

/// Never kept: a vendor that replays every answer it stored.
pub(crate) fn always_kept(_: &Value) -> bool {
    false
}
