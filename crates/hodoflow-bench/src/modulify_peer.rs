//! The retry loop of Modulify's "Idempotency and retries", the JavaScript `Call` function,
//! transcribed into Rust: the baseline a Modulify user starts from.
//!
//! The page's loop, as printed ("A retry loop"):
//!
//! ```js
//! const Call = async (method, body, key = randomUUID()) => {
//!     for (let attempt = 1; attempt <= 5; attempt++) {
//!         const response = await fetch(`https://api.modulify.ai/v1/${method}`, {
//!             method: 'POST',
//!             headers: {
//!                 Authorization: `Bearer ${process.env.MODULIFY_TOKEN}`,
//!                 'Idempotency-Key': key
//!             },
//!             body: JSON.stringify(body)
//!         })
//!         if (response.status === 429 || response.status === 409) {
//!             const wait = Number(response.headers.get('Retry-After') || 2)
//!             await new Promise(resolve => setTimeout(resolve, wait * 1000))
//!             continue
//!         }
//!         if (response.status >= 500) {
//!             await new Promise(resolve => setTimeout(resolve, attempt * 2000))
//!             continue
//!         }
//!         return await response.json()
//!     }
//!     throw new Error(`${method} did not complete after five attempts`)
//! }
//! ```
//!
//! [`JsCall::call`] follows it line by line; each step says which line it is, and where Node's
//! semantics are not Rust's, the transcription keeps Node's:
//!
//! - `fetch` throws on a dropped connection (undici's `TypeError: fetch failed`), so the loop
//!   ends there with an error: no retry, although the call may have run. `fetch` has no
//!   overall timeout (undici waits up to 300 s for headers); none is set here either.
//! - `response.json()` is returned for every status the two `if`s do not catch: a 4xx error
//!   body (`{"data": null, "error": …}`, a 401, a 422 `idempotency_key_reused`) comes back as if
//!   it were a result, and the caller must look inside to notice. An answer that is not JSON
//!   makes `response.json()` throw.
//! - `Number(response.headers.get('Retry-After') || 2)`: a missing header is `null` and an
//!   empty one `""`, both falsy, so both wait 2 s (`Number("")` would be 0, but `||` comes
//!   first). Any other text goes through `Number`, which [`js_number`] transcribes: `"0x10"` is
//!   16, `" 3 "` is 3, `"1e1"` is 10, `"1.5"` is 1.5, and an HTTP-date (which RFC 9110 allows) is
//!   `NaN`. Two `Retry-After` fields are joined `"1, 2"` by `headers.get`, also `NaN`.
//! - `setTimeout(resolve, ms)` with `ms` `NaN`, below 1 or above 2^31 - 1 fires after 1 ms
//!   ([`set_timeout_delay`]): an HTTP-date `Retry-After` is not waited at all.
//! - After the fifth attempt's 429, 409 or 5xx the loop still waits before it gives up.
//! - `JSON.stringify(body)` runs inside the loop, once per attempt; for an object nobody mutates
//!   meanwhile it gives the same bytes every time, so the key's fingerprint holds. Here `body`
//!   is a `serde_json::Value` borrowed for the whole call (it cannot be mutated), serialized
//!   per attempt with `serde_json`, which writes object keys sorted where `JSON.stringify` keeps
//!   insertion order: other bytes than Node's for the same object, the same on every attempt.
//! - `fetch` with a string body sends `Content-Type: text/plain;charset=UTF-8`, not JSON's; so
//!   does this transcription. `process.env.MODULIFY_TOKEN` unset would send `Bearer undefined`;
//!   here the token is given.
//! - `randomUUID()` is a default parameter: evaluated once per call, only when no key is
//!   passed, and reused by every attempt. A caller that calls `Call` again after it threw, as
//!   the document advises for a dropped connection, gets a new key unless it passed its own.
//!
//! What the loop does not do, it does not do here either: no jitter, no budget of time, no
//! check of the key before sending, no reading of `idempotency-replayed`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::HeaderValue;
use serde_json::Value;

/// Why a call of the document's loop ended without a result: what the JavaScript throws.
#[derive(Debug)]
pub(crate) enum Thrown {
    /// `fetch` rejected: no answer (a dropped connection, a refused connect).
    Fetch(reqwest::Error),
    /// `response.json()` rejected: the answer was not JSON, or its body was cut off.
    Json(String),
    /// `throw new Error(`${method} did not complete after five attempts`)`.
    DidNotComplete(String),
}

impl Thrown {
    /// A short name for reports: `fetch_failed`, `json_failed` or `five_attempts`.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Thrown::Fetch(_) => "fetch_failed",
            Thrown::Json(_) => "json_failed",
            Thrown::DidNotComplete(_) => "five_attempts",
        }
    }
}

impl std::fmt::Display for Thrown {
    /// What the JavaScript error would say.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Thrown::Fetch(error) => write!(f, "TypeError: fetch failed ({error})"),
            Thrown::Json(error) => write!(f, "SyntaxError: {error}"),
            Thrown::DidNotComplete(message) => write!(f, "Error: {message}"),
        }
    }
}

impl std::error::Error for Thrown {}

/// The `Call` function with its environment: `fetch` (a reqwest client), the base URL in
/// place of `https://api.modulify.ai`, and `process.env.MODULIFY_TOKEN`.
#[derive(Debug, Clone)]
pub(crate) struct JsCall {
    http: reqwest::Client,
    base_url: String,
    authorization: HeaderValue,
    /// What the bench observes beside the loop, without changing it: each answer's
    /// `x-request-id` and the `Retry-After` it carried.
    observed: Arc<Mutex<HashMap<String, String>>>,
}

impl JsCall {
    /// The loop against `base_url` with `token`.
    pub(crate) fn new(base_url: &str, token: &str) -> crate::Result<Self> {
        // fetch follows redirects and pools connections, as reqwest's defaults do; no
        // timeout, as fetch has none of its own.
        let http = reqwest::Client::builder()
            .retry(reqwest::retry::never())
            .build()?;
        Ok(Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            authorization: HeaderValue::from_str(&format!("Bearer {token}"))?,
            observed: Arc::default(),
        })
    }

    /// The `Retry-After` of every answer that carried one, by its `x-request-id`.
    pub(crate) fn observed_retry_after(&self) -> HashMap<String, String> {
        self.observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// `Call(method, body, key)`: `key` is `undefined` when `None`.
    pub(crate) async fn call(
        &self,
        method: &str,
        body: &Value,
        key: Option<String>,
    ) -> Result<Value, Thrown> {
        // `key = randomUUID()`: once per call, only when none is given.
        let key = key.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        // `for (let attempt = 1; attempt <= 5; attempt++) {`
        for attempt in 1..=5u32 {
            // `const response = await fetch(`https://api.modulify.ai/v1/${method}`, { … })`;
            // a rejected fetch propagates out of the async function: the call throws.
            let response = self
                .http
                .post(format!("{}/v1/{method}", self.base_url))
                .header(http::header::AUTHORIZATION, self.authorization.clone())
                .header("Idempotency-Key", key.as_str())
                // What fetch adds to a string body.
                .header(http::header::CONTENT_TYPE, "text/plain;charset=UTF-8")
                .header(http::header::ACCEPT, "*/*")
                // `body: JSON.stringify(body)`, evaluated on every attempt.
                .body(json_stringify(body))
                .send()
                .await
                .map_err(Thrown::Fetch)?;
            let status = response.status().as_u16();
            let retry_after = headers_get(response.headers(), "retry-after");
            self.observe(response.headers(), retry_after.as_deref());

            // `if (response.status === 429 || response.status === 409) {`
            if status == 429 || status == 409 {
                // `const wait = Number(response.headers.get('Retry-After') || 2)`
                let wait = match retry_after.as_deref() {
                    None | Some("") => 2.0,
                    Some(text) => js_number(text),
                };
                // `await new Promise(resolve => setTimeout(resolve, wait * 1000))`
                tokio::time::sleep(set_timeout_delay(wait * 1000.0)).await;
                // `continue` (the answer's body is left unread, as in the JavaScript)
                continue;
            }

            // `if (response.status >= 500) {`
            if status >= 500 {
                // `await new Promise(resolve => setTimeout(resolve, attempt * 2000))`
                tokio::time::sleep(set_timeout_delay(f64::from(attempt) * 2000.0)).await;
                continue;
            }

            // `return await response.json()`: whatever the status.
            let text = response
                .bytes()
                .await
                .map_err(|e| Thrown::Json(e.to_string()))?;
            return serde_json::from_slice(&text).map_err(|e| Thrown::Json(e.to_string()));
        }
        // `throw new Error(`${method} did not complete after five attempts`)`
        Err(Thrown::DidNotComplete(format!(
            "{method} did not complete after five attempts"
        )))
    }

    fn observe(&self, headers: &http::HeaderMap, retry_after: Option<&str>) {
        let (Some(id), Some(retry_after)) = (headers_get(headers, "x-request-id"), retry_after)
        else {
            return;
        };
        self.observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, retry_after.to_owned());
    }
}

/// `JSON.stringify(body)` for a JSON value (see the module docs on key order).
fn json_stringify(body: &Value) -> String {
    body.to_string()
}

/// `Headers.get(name)`: `null` when absent; several fields joined with `", "`; bytes outside
/// ASCII read as Latin-1, as undici decodes header bytes.
fn headers_get(headers: &http::HeaderMap, name: &str) -> Option<String> {
    let values: Vec<String> = headers
        .get_all(name)
        .iter()
        .map(|value| value.as_bytes().iter().map(|&b| char::from(b)).collect())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// `Number(text)` for a string: ECMAScript's StringToNumber.
///
/// Whitespace and line terminators around the number are ignored; an empty or all-space string
/// is 0; `Infinity` with an optional sign; `0x`, `0o`, `0b` integers without a sign; a decimal
/// literal with optional sign, fraction and exponent. Anything else is `NaN`: Rust's own parse
/// would accept `inf`, `nan` and `infinity` in any case, which JavaScript does not.
pub(crate) fn js_number(text: &str) -> f64 {
    let is_space = |c: char| c == '\u{FEFF}' || (c.is_whitespace() && c != '\u{85}');
    let text = text.trim_matches(is_space);
    if text.is_empty() {
        return 0.0;
    }
    match text {
        "Infinity" | "+Infinity" => return f64::INFINITY,
        "-Infinity" => return f64::NEG_INFINITY,
        _ => {}
    }
    let radix = match text.get(..2) {
        Some("0x" | "0X") => Some(16),
        Some("0o" | "0O") => Some(8),
        Some("0b" | "0B") => Some(2),
        _ => None,
    };
    if let Some(radix) = radix {
        let digits = &text[2..];
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return f64::NAN;
        }
        return digits.chars().fold(0.0, |n, c| {
            n * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
        });
    }
    if !is_decimal_literal(text) {
        return f64::NAN;
    }
    text.parse::<f64>().unwrap_or(f64::NAN)
}

/// StrDecimalLiteral: `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`.
fn is_decimal_literal(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == bytes.len()
}

/// The delay Node's `setTimeout(fn, ms)` waits: `ms` when it is at least 1 and at most
/// 2^31 - 1, otherwise (`NaN`, 0, negative, too large) 1 ms.
pub(crate) fn set_timeout_delay(ms: f64) -> Duration {
    const TIMEOUT_MAX: f64 = 2_147_483_647.0;
    if (1.0..=TIMEOUT_MAX).contains(&ms) {
        Duration::from_secs_f64(ms / 1000.0)
    } else {
        Duration::from_millis(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_reads_retry_after_as_javascript_does() {
        for (text, number) in [
            ("3", 3.0),
            (" 3 ", 3.0),
            ("\t1\n", 1.0),
            ("1.5", 1.5),
            (".5", 0.5),
            ("5.", 5.0),
            ("1e1", 10.0),
            ("+2", 2.0),
            ("-1", -1.0),
            ("0x10", 16.0),
            ("0b11", 3.0),
            ("0o17", 15.0),
            ("", 0.0),
            ("   ", 0.0),
            ("Infinity", f64::INFINITY),
        ] {
            assert_eq!(js_number(text), number, "{text:?}");
        }
        for nan in [
            "Wed, 21 Oct 2026 07:28:00 GMT",
            "1, 2",
            "inf",
            "nan",
            "infinity",
            "1_000",
            "-0x10",
            "0x",
            "e5",
            "1e",
            ".",
            "3s",
        ] {
            assert!(js_number(nan).is_nan(), "{nan:?}");
        }
    }

    #[test]
    fn set_timeout_fires_after_1_ms_for_nan_zero_negative_and_overflow() {
        assert_eq!(set_timeout_delay(2000.0), Duration::from_secs(2));
        assert_eq!(set_timeout_delay(1.5), Duration::from_micros(1500));
        for fires_at_once in [f64::NAN, 0.0, -5.0, 0.5, 2_147_483_648.0, f64::INFINITY] {
            assert_eq!(
                set_timeout_delay(fires_at_once),
                Duration::from_millis(1),
                "{fires_at_once}"
            );
        }
    }

    #[test]
    fn headers_get_joins_fields_and_is_none_when_absent() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(headers_get(&headers, "retry-after"), None);
        headers.append("retry-after", HeaderValue::from_static("1"));
        headers.append("retry-after", HeaderValue::from_static("2"));
        assert_eq!(
            headers_get(&headers, "retry-after").as_deref(),
            Some("1, 2")
        );
    }
}
