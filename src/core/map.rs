//! The maps a client reads on every call (a route's URL, window and redaction pattern, a
//! service's throttle), hashed with `foldhash` rather than std's SipHash, which cost more than
//! the lookups themselves on the happy path.
//!
//! `foldhash` is hashbrown's default hasher, maintained with it and already in most trees that
//! hold a hash map. Its `fast` flavour is seeded per process, so keys cannot be chosen to
//! collide by someone who cannot see the process; the keys here are the caller's own routes
//! and services anyway, never a server's words.

use std::collections::HashMap;

/// A `HashMap` with the per-process seeded `foldhash`.
pub(crate) type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
