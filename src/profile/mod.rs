//! API profiles: everything one vendor's documents fix, as data.
//!
//! A profile holds, per [`Surface`], the literal retry-matrix table, the reader of its error
//! codes, the answer limit, and which status means "the same key is still running"; per vendor,
//! the statuses whose `Retry-After` slows the whole credential, the key rules, and how a replay
//! and an answer that was not kept are read. The auth scheme is the 401 row of each table (one
//! re-exchange for Hodoflow's OAuth client credentials, whose token path is in `hodoflow.rs`; a
//! stop for Modulify's static token) and the token source the client is built with
//! ([`ClientBuilder::client_credentials`](crate::ClientBuilder::client_credentials),
//! [`bearer_token`](crate::ClientBuilder::bearer_token) or a plugged-in
//! [`TokenExchanger`](crate::TokenExchanger)); the mechanism never asks which vendor it serves. One file per vendor holds its
//! profile, to be read beside its document: `hodoflow.rs` (documents 000 and 001) and
//! `modulify.rs` (document 004); `neutral.rs` holds the vendor-neutral table of RFC 9110's
//! idempotent methods for paths no profile claims.
//!
//! The mechanism (the matrix lookup in `matrix.rs`, `classify`, the engine, the stats) takes a
//! [`SurfaceProfile`] and reads its fields; it never names a vendor or matches on a surface. So a
//! third API is a third file here, not new control flow. The only place that maps a surface to
//! its profile is [`Surface::profile`].
//!
//! # Layout, against `../shared/LAYOUT.md`
//!
//! Followed: `profile/{mod,hodoflow,modulify}.rs`; `matrix.rs` (`Rule`, `When`, `Verdict`, the
//! lookup) imports no profile; `answer.rs` holds the answer and its header names, which ends the
//! `backoff.rs` <-> `classify.rs` cycle (backoff imports the matrix, the answer imports the
//! `Retry-After` parser: one way). Departed, and why:
//! - [`Surface`] stays the public name of a table and `SurfaceProfile` is crate-private: every
//!   public API is kept, and a profile's shape can change without a semver break.
//! - `classify.rs` stays between the matrix and the profiles: it builds the final error from the
//!   matched row, the profile's code reader and its 404 wording, which `matrix.rs` must not know.
//! - [`IdempotencyKey::new`] still refuses keys outside 1 to 255 visible ASCII, a documented
//!   public contract that both vendors accept; the profile's [`KeyRules`] are checked again at
//!   send time, where a vendor with a stricter rule would refuse a key.
//! - `fleet/` stays flat files: it was not needed for a second profile, and is a move of its
//!   own. (The engine is cut into `decide.rs`, a pure step, and effects.)

use std::fmt;

use http::{HeaderMap, HeaderName};
use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::key::IdempotencyKey;
use crate::matrix::Rule;

pub(crate) mod hodoflow;
pub(crate) mod modulify;
pub(crate) mod neutral;

/// An API surface with a retry matrix of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Surface {
    /// JSON:API unsafe writes: POST, PUT, PATCH and DELETE under `/api/json`, with an
    /// `Idempotency-Key` (document 000).
    JsonApiWrite,
    /// Webhook deliveries to `/api/v1/webhooks/<token>`, with a delivery ID (document 001).
    Webhook,
    /// Reads: GET and HEAD, naturally repeatable, without a key (document 000).
    Read,
    /// GraphQL `factQuery`: read-only, without a key and without response replay (document 000).
    GraphQl,
    /// Modulify method calls, `POST /v1/<method>` (document 004): with an `Idempotency-Key`
    /// unless the catalogue says the method only reads.
    Modulify,
    /// An idempotent method of RFC 9110 (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) on a path no
    /// profile claims, as the reqwest-middleware adapter meets it: retried on no answer, 429
    /// and 5xx, without a key.
    IdempotentMethod,
    /// Any other method on a path no profile claims, with the caller's `Idempotency-Key`: the
    /// same retries, that key on every attempt. Without a key such a request is sent once.
    CallerKeyed,
}

impl Surface {
    /// The Hodoflow surfaces (documents 000 and 001).
    #[deprecated(
        since = "0.2.0",
        note = "holds only the Hodoflow surfaces; use `Surface::all()` or `Surface::HODOFLOW`"
    )]
    pub const ALL: [Surface; 4] = Self::HODOFLOW;

    /// The Hodoflow surfaces (documents 000 and 001).
    pub const HODOFLOW: [Surface; 4] = [
        Surface::JsonApiWrite,
        Surface::Webhook,
        Surface::Read,
        Surface::GraphQl,
    ];

    /// Every surface of every profile, each with a matrix of its own.
    pub const fn all() -> &'static [Surface] {
        &[
            Surface::JsonApiWrite,
            Surface::Webhook,
            Surface::Read,
            Surface::GraphQl,
            Surface::Modulify,
            Surface::IdempotentMethod,
            Surface::CallerKeyed,
        ]
    }

    /// A stable snake_case name for logs, such as `"json_api_write"`.
    pub const fn as_str(self) -> &'static str {
        self.profile().name
    }

    /// Whether requests of this surface carry an idempotency key or delivery ID. For
    /// [`Surface::Modulify`] the catalogue decides per method: every method but a read-only one
    /// carries a key, so this is true.
    pub const fn sends_key(self) -> bool {
        self.profile().sends_key
    }

    /// The profile of this surface: the one map from a surface to its vendor's data.
    pub(crate) const fn profile(self) -> &'static SurfaceProfile {
        match self {
            Self::JsonApiWrite => &hodoflow::JSON_API_WRITE,
            Self::Webhook => &hodoflow::WEBHOOK,
            Self::Read => &hodoflow::READ,
            Self::GraphQl => &hodoflow::GRAPHQL,
            Self::Modulify => &modulify::CALL,
            Self::IdempotentMethod => &neutral::IDEMPOTENT_METHOD,
            Self::CallerKeyed => &neutral::CALLER_KEYED,
        }
    }

    /// This surface's retry matrix.
    #[cfg(test)]
    pub(crate) const fn rules(self) -> &'static [Rule] {
        self.profile().rules
    }
}

impl fmt::Display for Surface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a vendor's documents fix for one surface.
#[derive(Debug)]
pub(crate) struct SurfaceProfile {
    /// The stable name of the surface in logs.
    pub(crate) name: &'static str,
    /// The vendor-wide rules.
    pub(crate) vendor: &'static Vendor,
    /// The literal retry matrix.
    pub(crate) rules: &'static [Rule],
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
    /// counts as answered (a webhook's 202: the server committed, whatever the body said).
    /// Otherwise the attempt is unanswered and retried with the same key, and a replay brings
    /// the body back.
    pub(crate) status_is_the_answer: bool,
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
    /// Statuses whose `Retry-After` slows down the whole credential (closes its gate).
    pub(crate) slow_down: &'static [u16],
    /// Which keys the server accepts.
    pub(crate) keys: KeyRules,
    /// How a replayed answer is marked, and whether its original answer was kept.
    pub(crate) replay: Replay,
}

/// The keys a vendor's server accepts; checked before anything is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyRules {
    /// The most bytes of a key.
    pub(crate) max_len: usize,
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
