//! Classifying an answer: the verdict of its surface's retry matrix, and the error the engine
//! returns when it stops on it.
//!
//! The tables are data in `src/vendors/` (one folder per vendor), handed in as a
//! [`SurfaceProfile`]; the lookup is `matrix.rs`. This
//! module joins them for one answer and builds the final error from the matched row, the
//! profile's error-code reader and its description of a 404.

use std::time::SystemTime;

use bytes::Bytes;
use http::StatusCode;

use crate::core::answer::Answer;
use crate::core::attempt::TransportKind;
use crate::core::error::{Error, ErrorKind};
use crate::core::matrix::{Rule, Verdict, lookup};
use crate::core::profile::SurfaceProfile;

/// The longest server error code quoted in an error message, in bytes, once cleaned.
const MAX_QUOTED_CODE: usize = 100;

/// The verdict of `profile`'s retry matrix on `answer`.
pub(crate) fn verdict(profile: &SurfaceProfile, answer: &Answer) -> Verdict {
    rule_for(profile, answer).verdict
}

/// The row of `profile`'s retry matrix that covers `answer`: the most specific match.
pub(crate) fn rule_for(profile: &SurfaceProfile, answer: &Answer) -> &'static Rule {
    lookup(&profile.rules, answer, |body| profile.codes(body))
}

/// The error to return when the engine stops on `answer`: a stop of the matrix, a retryable
/// answer left when the budget ran out, or a second 401 after a token exchange.
///
/// It carries the status, the server's error body and its `Retry-After` (counted from `now`);
/// the engine adds the attempts with [`Error::with_attempts`].
pub(crate) fn final_error(profile: &SurfaceProfile, answer: &Answer, now: SystemTime) -> Error {
    let rule = rule_for(profile, answer);
    let Some(status) = answer.status() else {
        let kind = answer.transport().unwrap_or(TransportKind::Other);
        return Error::new(
            ErrorKind::Transport,
            format!("{} ({})", ErrorKind::Transport, kind.as_str()),
        );
    };
    let (kind, action) = match rule.verdict {
        Verdict::Stop(kind) => (kind, Some(rule.action)),
        _ => (left_over_kind(profile, status), None),
    };
    let what = match kind {
        ErrorKind::NotFound => profile.not_found,
        _ => kind.describe(),
    };
    let codes = profile.codes(answer.body());
    // The server's code is its own words: quoted apart from this message's, so that only it is
    // cleaned of secrets, before it is cut (`redact.rs`).
    let mut error = match codes.first() {
        Some(code) => Error::new(kind, format!("{what} ({} ", status.as_u16()))
            .quoting(code, MAX_QUOTED_CODE)
            .with_note(")"),
        None => Error::new(kind, format!("{what} ({})", status.as_u16())),
    };
    if let Some(action) = action {
        error = error.with_note(format_args!(": {}", lower_first(action)));
    }
    let mut error = error
        .with_status(status)
        .with_retry_after(answer.retry_after(now));
    if !answer.body().is_empty() {
        error = error.with_body(Bytes::copy_from_slice(answer.body()));
    }
    error
}

/// The kind of an answer the matrix would retry, when no retry is left.
fn left_over_kind(profile: &SurfaceProfile, status: StatusCode) -> ErrorKind {
    match status {
        status if profile.in_progress == Some(status.as_u16()) => ErrorKind::InProgress,
        StatusCode::UNAUTHORIZED => ErrorKind::Unauthorized,
        StatusCode::TOO_MANY_REQUESTS => ErrorKind::RateLimited,
        status if status.is_server_error() => ErrorKind::Server,
        status if status.is_client_error() => ErrorKind::ClientError,
        _ => ErrorKind::UnexpectedStatus,
    }
}

fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_lowercase().chain(chars).collect())
        .unwrap_or_default()
}
