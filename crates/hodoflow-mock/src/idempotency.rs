//! The Idempotency-Key store of JSON:API unsafe writes (Hodoflow's "Idempotency and
//! retries").
//!
//! A key is scoped by (tenant, service-account principal) and bound to the
//! fingerprint of its first request: method, path and raw body. A completed
//! answer is replayed; a 5xx is never stored, so the key is released.
//!
//! Modulify's calls (Modulify's "Idempotency and retries") use a store of their own with the same
//! machinery: their keys are scoped by token, only their successes are
//! completed (every other answer releases the key), and they are kept for
//! another retention, so the two stores never share an expiry queue.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use sha2::{Digest, Sha256};

/// A key in its scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ScopedKey {
    pub organization: String,
    pub principal: String,
    pub key: String,
}

/// The hash of method, path and raw body.
pub(crate) type Fingerprint = [u8; 32];

/// The fingerprint of a request.
pub(crate) fn fingerprint(method: &str, path: &str, body: &[u8]) -> Fingerprint {
    let mut hash = Sha256::new();
    for part in [method.as_bytes(), path.as_bytes()] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hash.update(body);
    hash.finalize().into()
}

/// A key is 1 to 255 visible ASCII characters (0x21 to 0x7E), on both APIs.
pub(crate) fn valid_key(key: &str) -> bool {
    (1..=255).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic())
}

/// A completed answer kept for replay.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub status: StatusCode,
    pub content_type: Option<String>,
    pub body: Bytes,
}

/// The answer of `stored` as it was first sent.
pub(crate) fn stored_response(stored: Stored) -> Response {
    let mut response = (stored.status, stored.body).into_response();
    if let Some(kind) = stored
        .content_type
        .and_then(|c| HeaderValue::from_str(&c).ok())
    {
        response.headers_mut().insert(header::CONTENT_TYPE, kind);
    }
    response
}

/// The answer of `stored` with `idempotency-replayed: true`.
pub(crate) fn replay(stored: Stored) -> Response {
    let mut response = stored_response(stored);
    response
        .headers_mut()
        .insert("idempotency-replayed", HeaderValue::from_static("true"));
    response
}

#[derive(Debug)]
enum Entry {
    Reserved {
        fingerprint: Fingerprint,
        reserved_at: SystemTime,
    },
    Completed {
        fingerprint: Fingerprint,
        stored: Stored,
        completed_at: SystemTime,
    },
}

/// What a write must do with its key.
#[derive(Debug)]
pub(crate) enum Claim {
    /// The key is now reserved: run the write, then `complete` or `release`.
    Run,
    /// Replay this answer with `idempotency-replayed: true`.
    Replay(Stored),
    /// 409 `idempotency_key_reused`.
    Reused,
    /// 409 `idempotency_key_in_progress`.
    InProgress,
}

/// Keys and their state, with expiry queues so pruning costs only what expired.
#[derive(Debug, Default)]
pub(crate) struct KeyStore {
    entries: HashMap<ScopedKey, Entry>,
    /// (reserved at, key), in time order.
    reservations: VecDeque<(SystemTime, ScopedKey)>,
    /// (completed at, key), in time order.
    completions: VecDeque<(SystemTime, ScopedKey)>,
}

impl KeyStore {
    /// Releases stale reservations and forgets expired answers.
    fn prune(&mut self, now: SystemTime, reservation_timeout: Duration, retention: Duration) {
        while let Some((at, _)) = self.reservations.front() {
            if *at + reservation_timeout > now {
                break;
            }
            if let Some((at, key)) = self.reservations.pop_front() {
                let stale = matches!(self.entries.get(&key), Some(Entry::Reserved { reserved_at, .. }) if *reserved_at == at);
                if stale {
                    self.entries.remove(&key);
                }
            }
        }
        while let Some((at, _)) = self.completions.front() {
            if *at + retention > now {
                break;
            }
            if let Some((at, key)) = self.completions.pop_front() {
                let expired = matches!(self.entries.get(&key), Some(Entry::Completed { completed_at, .. }) if *completed_at == at);
                if expired {
                    self.entries.remove(&key);
                }
            }
        }
    }

    /// Claims `key` for a request with `fingerprint`.
    pub(crate) fn claim(
        &mut self,
        key: &ScopedKey,
        fingerprint: Fingerprint,
        now: SystemTime,
        reservation_timeout: Duration,
        retention: Duration,
    ) -> Claim {
        self.prune(now, reservation_timeout, retention);
        match self.entries.get(key) {
            Some(Entry::Completed {
                fingerprint: first,
                stored,
                ..
            }) => {
                if *first == fingerprint {
                    Claim::Replay(stored.clone())
                } else {
                    Claim::Reused
                }
            }
            Some(Entry::Reserved {
                fingerprint: first, ..
            }) => {
                if *first == fingerprint {
                    Claim::InProgress
                } else {
                    Claim::Reused
                }
            }
            None => {
                self.entries.insert(
                    key.clone(),
                    Entry::Reserved {
                        fingerprint,
                        reserved_at: now,
                    },
                );
                self.reservations.push_back((now, key.clone()));
                Claim::Run
            }
        }
    }

    /// Stores the answer of a finished write under its reservation.
    pub(crate) fn complete(&mut self, key: &ScopedKey, stored: Stored, now: SystemTime) {
        if let Some(entry) = self.entries.get_mut(key)
            && let Entry::Reserved { fingerprint, .. } = *entry
        {
            *entry = Entry::Completed {
                fingerprint,
                stored,
                completed_at: now,
            };
            self.completions.push_back((now, key.clone()));
        }
    }

    /// Drops a reservation whose request was not kept (a Hodoflow 5xx, any Modulify failure).
    pub(crate) fn release(&mut self, key: &ScopedKey) {
        if matches!(self.entries.get(key), Some(Entry::Reserved { .. })) {
            self.entries.remove(key);
        }
    }

    /// How many keys are held, reserved or completed.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIVE_MIN: Duration = Duration::from_secs(300);
    const DAY: Duration = Duration::from_secs(86_400);

    fn key(k: &str) -> ScopedKey {
        ScopedKey {
            organization: "acme".into(),
            principal: "svc".into(),
            key: k.into(),
        }
    }

    fn stored() -> Stored {
        Stored {
            status: StatusCode::CREATED,
            content_type: None,
            body: Bytes::from_static(b"{}"),
        }
    }

    #[test]
    fn pruning_forgets_only_what_expired() {
        let mut store = KeyStore::default();
        let t0 = SystemTime::UNIX_EPOCH + DAY;
        let fp = fingerprint("POST", "/a", b"x");
        for i in 0..100 {
            let k = key(&format!("k{i}"));
            assert!(matches!(store.claim(&k, fp, t0, FIVE_MIN, DAY), Claim::Run));
            store.complete(&k, stored(), t0);
        }
        let later = t0 + Duration::from_secs(3600);
        assert!(matches!(
            store.claim(&key("fresh"), fp, later, FIVE_MIN, DAY),
            Claim::Run
        ));
        assert_eq!(store.len(), 101);
        store.prune(t0 + DAY, FIVE_MIN, DAY);
        assert_eq!(
            store.len(),
            0,
            "the 100 answers expired and the fresh reservation went stale"
        );
    }

    #[test]
    fn a_released_key_runs_again() {
        let mut store = KeyStore::default();
        let now = SystemTime::UNIX_EPOCH + DAY;
        let fp = fingerprint("POST", "/a", b"x");
        assert!(matches!(
            store.claim(&key("k"), fp, now, FIVE_MIN, DAY),
            Claim::Run
        ));
        store.release(&key("k"));
        assert!(matches!(
            store.claim(&key("k"), fp, now, FIVE_MIN, DAY),
            Claim::Run
        ));
    }

    #[test]
    fn fingerprint_separates_method_path_and_body() {
        let base = fingerprint("POST", "/a", b"x");
        assert_ne!(base, fingerprint("PUT", "/a", b"x"));
        assert_ne!(base, fingerprint("POST", "/b", b"x"));
        assert_ne!(base, fingerprint("POST", "/a", b"x "));
        assert_ne!(
            fingerprint("POST", "/ab", b""),
            fingerprint("POST", "/a", b"b")
        );
    }
}
