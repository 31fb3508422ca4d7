//! The Modulify profile: Modulify's "Idempotency and retries", with the wire details of
//! `docs/wire-contract.md`, "Modulify".
//!
//! Where it differs from Hodoflow, on exactly the points a retry client must get right:
//! - a key reused with another method or body is **422** `idempotency_key_reused` (Hodoflow: 409);
//! - a **409** `idempotency_key_in_progress` means "the same key is still running": wait
//!   `Retry-After` (2 s when absent) and retry with the same key (Hodoflow: stop, unless opted in);
//! - a bad key is **400** `invalid_idempotency_key`, and the client checks keys before sending;
//! - the token is static: a **401** stops, there is no exchange;
//! - only successes are kept, and an answer over 1 MB is not replayed: the repeat gets
//!   `data: null` and a message, and the caller must read the current state;
//! - the catalogue `GET /v1/tools` says which methods only read, set a value, or add something
//!   ([`Effect`]), and so which need a key.
//!
//! These rules are close to the IETF `Idempotency-Key` draft (422 reuse, 409 in progress, 400 bad
//! key), so this table is the one to start from for other APIs that follow it.

use http::HeaderName;
use serde_json::Value;

use crate::core::error::ErrorKind;
use crate::core::matrix::{Matrix, Rule, Verdict, When, rule};

use crate::core::profile::{KeyRules, Reach, Replay, Scopes, SurfaceProfile, Vendor};

/// Every method is `POST /v1/<method>`.
pub(crate) const METHODS_PREFIX: &str = "/v1/";
/// The method catalogue.
pub(crate) const TOOLS_PATH: &str = "/v1/tools";
/// The largest request body the server takes (413 `payload_too_large` above).
pub(crate) const BODY_LIMIT: usize = 1_048_576;

/// What Modulify's "Idempotency and retries" fixes for the whole API.
pub(crate) static MODULIFY: Vendor = Vendor {
    // "Any value of 1 to 255 visible ASCII characters works."
    keys: KeyRules {
        max_len: 255,
        header: HeaderName::from_static("idempotency-key"),
    },
    replay: Replay {
        header: HeaderName::from_static("idempotency-replayed"),
        answer_not_kept,
    },
};

/// Whom a method call's signals hold: a `429 rate_limited` closes the token's per-minute
/// budget on this base URL (Modulify's "Idempotency and retries"), never another vendor's
/// calls; a `409`'s and a `503`'s `Retry-After` are the call's own wait (a 409 speaks for one key
/// only). Modulify states no per-route window: every exhausted `RateLimit` policy is the
/// token's (`docs/wire-contract.md`, "Whom a limit holds").
const SCOPES: Scopes = Scopes {
    sits_in: Reach::Credential,
    closes: &[
        (429, Reach::Credential),
        (409, Reach::Call),
        (503, Reach::Call),
    ],
    route_policy: None,
    service: "modulify",
};

/// A method call.
pub(crate) static CALL: SurfaceProfile = SurfaceProfile {
    name: "modulify",
    vendor: &MODULIFY,
    rules: Matrix::new(METHOD_CALLS),
    error_codes: codes,
    sends_key: true,
    answer_limit: None,
    in_progress: Some(409),
    not_found: "unknown Modulify method or object",
    status_is_the_answer: false,
    scopes: SCOPES,
};

/// Errors: `{"data": null, "error": {"code": "…", "message": "…"}}`.
fn codes(document: &Value) -> Vec<String> {
    document
        .get("error")
        .and_then(|error| error.get("code"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .into_iter()
        .collect()
}

/// A repeat of a call whose answer was over 1 MB: `{"data": null, "message": "…"}` without an
/// `error`, marked replayed.
fn answer_not_kept(document: &Value) -> bool {
    document.get("data").is_some_and(Value::is_null)
        && document.get("error").is_none_or(Value::is_null)
        && document.get("message").is_some_and(Value::is_string)
}

use ErrorKind::{
    ClientError, Forbidden, InvalidInput, KeyReused, NotFound, PayloadTooLarge, Server,
    Unauthorized, UnexpectedStatus, Unprocessable,
};
use Verdict::{RetryAfterBackoff, RetryAfterServerWait, Stop, Success};
use When::{Code, NoResponse, Other, Range, Status};

/// Modulify's "Idempotency and retries" and the table of `docs/wire-contract.md`, "Modulify",
/// for `POST /v1/<method>`. 502 and 504 are a gateway's failures, retried as for Hodoflow
/// (`docs/wire-contract.md`, "Statuses and answers no page names"); a key the client checked cannot
/// meet `invalid_idempotency_key`, so that row is a guard.
#[rustfmt::skip]
const METHOD_CALLS: &[Rule] = &[
    //   Status and error code                            Retry?                  Action
    rule(NoResponse,                                      RetryAfterBackoff,      "Repeat it with the same key; if it had succeeded, you get its answer back"),
    rule(Range(200, 299),                                 Success,                "Done; a repeat of a kept success carries idempotency-replayed: true"),
    rule(Code(&[400], "invalid_idempotency_key"),         Stop(InvalidInput),     "Fix the key: 1 to 255 visible ASCII characters"),
    rule(Code(&[400], "invalid_request"),                 Stop(Unprocessable),    "Fix the body: it must be a JSON object"),
    rule(Status(&[401]),                                  Stop(Unauthorized),     "Fix the token; it is static, there is no exchange"),
    rule(Status(&[403]),                                  Stop(Forbidden),        "The token may not call this method"),
    rule(Status(&[404]),                                  Stop(NotFound),         "Correct the method or the object"),
    rule(Code(&[409], "idempotency_key_in_progress"),     RetryAfterServerWait,   "Wait Retry-After (2 s when absent), retry with the same key"),
    rule(Status(&[413]),                                  Stop(PayloadTooLarge),  "Reduce the body to at most 1,048,576 bytes"),
    rule(Code(&[422], "idempotency_key_reused"),          Stop(KeyReused),        "New work needs a new key; do not reuse this one"),
    rule(Status(&[422]),                                  Stop(Unprocessable),    "Correct the parameters"), // validation_failed
    rule(Status(&[429]),                                  RetryAfterServerWait,   "Wait Retry-After (2 s when absent), retry with the same key"),
    rule(Status(&[500, 503]),                             RetryAfterBackoff,      "Not kept, the key is released: back off, retry with the same key"),
    rule(Status(&[502, 504]),                             RetryAfterBackoff,      "A gateway failed: back off, retry with the same key"),
    rule(Range(400, 499),                                 Stop(ClientError),      "Correct the request; never retried unchanged"),
    rule(Range(500, 599),                                 Stop(Server),           "Not a transient server error; never retried"),
    rule(Other,                                           Stop(UnexpectedStatus), "Outside the contract; never retried"),
];

/// What a method does, from the catalogue's annotations (Modulify's "Idempotency and retries",
/// "Which calls need a key"; `docs/wire-contract.md`, "The catalogue").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Effect {
    /// Only reads (`readOnlyHint`): safe to repeat as it is, sent without a key.
    Read,
    /// Ends in the same state however often it runs (`idempotentHint`), such as renaming a site:
    /// sent with a key, which still saves the second run.
    Idempotent,
    /// Adds something each time it runs, such as `create_site` or `send_message`: always sent
    /// with a key.
    Adds,
    /// Destructive (`destructiveHint`), such as `delete_site`: sent with a key.
    Destructive,
}

impl Effect {
    /// The effect in one word: `"read"`, `"idempotent"`, `"adds"` or `"destructive"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Idempotent => "idempotent",
            Self::Adds => "adds",
            Self::Destructive => "destructive",
        }
    }

    /// Whether a call of such a method carries an `Idempotency-Key`: all but reads.
    pub const fn needs_key(self) -> bool {
        !matches!(self, Self::Read)
    }

    /// The effect of a catalogue entry's `annotations`: the first that holds of `read`
    /// (`readOnlyHint`), `destructive` (`destructiveHint`), `idempotent` (`idempotentHint`),
    /// else `adds`. An absent hint takes the Model Context Protocol's default for tool
    /// annotations: `readOnlyHint` false, `destructiveHint` true, `idempotentHint` false.
    pub(crate) fn of_annotations(annotations: Option<&Value>) -> Self {
        let hint = |name: &str, default: bool| {
            annotations
                .and_then(|annotations| annotations.get(name))
                .and_then(Value::as_bool)
                .unwrap_or(default)
        };
        if hint("readOnlyHint", false) {
            Self::Read
        } else if hint("destructiveHint", true) {
            Self::Destructive
        } else if hint("idempotentHint", false) {
            Self::Idempotent
        } else {
            Self::Adds
        }
    }
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_the_effect_from_the_first_hint_that_holds() {
        let effect = |annotations: Value| Effect::of_annotations(Some(&annotations));
        let hints = |read, destructive, idempotent| json!({"readOnlyHint": read, "destructiveHint": destructive, "idempotentHint": idempotent});
        assert_eq!(effect(hints(true, true, true)), Effect::Read);
        assert_eq!(effect(hints(false, true, true)), Effect::Destructive);
        assert_eq!(effect(hints(false, false, true)), Effect::Idempotent);
        assert_eq!(effect(hints(false, false, false)), Effect::Adds);
    }

    #[test]
    fn absent_hints_take_the_model_context_protocol_defaults() {
        // destructiveHint defaults to true: a method that says nothing is destructive.
        assert_eq!(Effect::of_annotations(None), Effect::Destructive);
        assert_eq!(
            Effect::of_annotations(Some(&json!({}))),
            Effect::Destructive
        );
        let idempotent_only = json!({"idempotentHint": true});
        assert_eq!(
            Effect::of_annotations(Some(&idempotent_only)),
            Effect::Destructive
        );
        let not_destructive = json!({"destructiveHint": false});
        assert_eq!(Effect::of_annotations(Some(&not_destructive)), Effect::Adds);
        let read = json!({"readOnlyHint": true});
        assert_eq!(Effect::of_annotations(Some(&read)), Effect::Read);
    }

    #[test]
    fn only_reads_go_without_a_key() {
        for effect in [Effect::Idempotent, Effect::Adds, Effect::Destructive] {
            assert!(effect.needs_key(), "{effect}");
        }
        assert!(!Effect::Read.needs_key());
    }

    #[test]
    fn reads_modulify_error_codes_and_the_answer_not_kept() {
        let error =
            json!({"data": null, "error": {"code": "idempotency_key_reused", "message": "m"}});
        assert_eq!(codes(&error), ["idempotency_key_reused"]);
        assert!(codes(&json!({"errors": [{"code": "x"}]})).is_empty());
        assert!(!answer_not_kept(&error));
        let not_kept = json!({"data": null, "message": "the original answer was larger than 1 MB and is not kept: read the current state instead"});
        assert!(answer_not_kept(&not_kept));
        assert!(!answer_not_kept(&json!({"data": {"id": 1}})));
    }
}
