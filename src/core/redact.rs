//! What never reaches a log line: a body's bytes, and a secret, which leaves a placeholder.
//!
//! Which part of a path is a secret is a vendor's rule (Hodoflow's trigger token:
//! `vendors/hodoflow/routes.rs`).

/// A body in a `Debug` line: its length, never its bytes (never log a
/// sensitive body).
pub(crate) struct BodyLen(pub(crate) usize);

impl std::fmt::Debug for BodyLen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes>", self.0)
    }
}

/// The placeholder that stands for a removed secret.
pub(crate) const REDACTED: &str = "<redacted>";
