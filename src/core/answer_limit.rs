//! How much of an answer the client reads.
//!
//! Every answer body is read into memory before it is classified, so a server that sends a
//! gigabyte, by bug or by malice, would make the client hold a gigabyte, once for each call in
//! flight. So each body is read chunk by chunk against a limit and never buffered past it: a
//! `Content-Length` over the limit is refused before the first byte is read, and a body without
//! one stops at the first chunk that crosses the limit, closing the connection.
//!
//! The limits follow what each surface needs: a vendor's profile may fix one for a surface whose
//! answers are small by contract (Hodoflow's webhook answer, `vendors/hodoflow/limits.rs`);
//! every other answer is a document of any size the caller asked for: [`DEFAULT_ANSWER_LIMIT`],
//! 8 MiB, configurable with
//! [`ClientBuilder::max_answer_bytes`](crate::ClientBuilder::max_answer_bytes). A token
//! exchanger bounds its own answer (`TOKEN_ANSWER_LIMIT`).
//!
//! An answer over its limit is not an answer the caller can use. When the matrix would retry its
//! status anyway (a 5xx, a 429) the body is not needed and the call retries; otherwise the call
//! stops with [`ErrorKind::AnswerTooLarge`](crate::ErrorKind::AnswerTooLarge), whose
//! `may_have_run` is true when the status says the server acted (2xx).

use bytes::{Bytes, BytesMut};

/// The most bytes of a token endpoint's answer read: 64 KiB.
pub(crate) const TOKEN_ANSWER_LIMIT: usize = 64 * 1024;
/// The default most bytes of an answer read, where the profile fixes none: 8 MiB.
pub const DEFAULT_ANSWER_LIMIT: usize = 8 * 1024 * 1024;

/// A body read against a limit.
#[derive(Debug)]
pub(crate) enum BodyRead {
    /// The whole body, within the limit.
    Whole(Bytes),
    /// The body is longer than the limit; what was read is dropped.
    TooLarge,
    /// The body broke off.
    Failed(reqwest::Error),
}

/// Reads `response`'s body, at most `limit` bytes of it. The response is borrowed, so that a
/// call's future holds it once, not also in this one.
pub(crate) async fn read_body(response: &mut reqwest::Response, limit: usize) -> BodyRead {
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return BodyRead::TooLarge;
    }
    // Most bodies come in one chunk: it is handed on as it is, without a copy.
    let mut first: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
    let mut length = 0usize;
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(error) => return BodyRead::Failed(error),
        };
        length = length.saturating_add(chunk.len());
        if length > limit {
            return BodyRead::TooLarge;
        }
        match (&mut first, &mut joined) {
            (None, None) => first = Some(chunk),
            (Some(_), None) => {
                let mut buffer = BytesMut::with_capacity(length);
                buffer.extend_from_slice(&first.take().unwrap_or_default());
                buffer.extend_from_slice(&chunk);
                joined = Some(buffer);
            }
            (_, Some(buffer)) => buffer.extend_from_slice(&chunk),
        }
    }
    BodyRead::Whole(match joined {
        Some(buffer) => buffer.freeze(),
        None => first.unwrap_or_default(),
    })
}
