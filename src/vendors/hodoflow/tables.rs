//! The Hodoflow profile: Hodoflow's "Idempotency and retries" (JSON:API writes, reads, GraphQL,
//! the general matrix) and its webhook sender guide (webhook deliveries), with the rules of
//! `docs/wire-contract.md` where the pages leave a gap (502 and 504, error bodies, GraphQL
//! errors, statuses no page names).
//!
//! Hold a table beside its page: a row is a result, its verdict, and the page's action.
//! The routes of the Hodoflow API live here too, so that a path is written once.

use http::HeaderName;
use serde_json::Value;

use crate::core::error::ErrorKind;
use crate::core::matrix::{Matrix, Rule, Verdict, When, rule};
use crate::vendors::hodoflow::limits::WEBHOOK_ANSWER_LIMIT;

use crate::core::profile::{KeyRules, Reach, Replay, Scopes, SurfaceProfile, Vendor, always_kept};

/// The token endpoint, `POST` with a client-credentials form (`docs/wire-contract.md`).
pub(crate) const TOKEN_PATH: &str = "/oauth/token";
/// The JSON:API, reads and unsafe writes, `/api/json/v1/<type>[/<id>]`.
pub(crate) const JSON_API_PREFIX: &str = "/api/json/";
/// A workflow run, `GET /api/json/v1/workflow_runs/<id>`.
pub(crate) const WORKFLOW_RUNS: &str = "/api/json/v1/workflow_runs/";
/// GraphQL `factQuery`, read-only.
pub(crate) const GRAPHQL_PATH: &str = "/api/graphql";
/// Webhook triggers, `POST /api/v1/webhooks/<trigger_token>` (and the legacy
/// `/api/v1/webhooks/<org_domain>/<trigger_token>`).
pub(crate) const WEBHOOKS_PREFIX: &str = "/api/v1/webhooks/";
/// The `RateLimit` policy of a trigger's window (`docs/wire-contract.md`, "RateLimit fields").
pub(crate) const TRIGGER_POLICY: &str = "trigger";
/// The runtime body of a `422` from a trigger that refused a delivery's authentication, such as
/// its signature (Hodoflow's webhook sender guide; `docs/wire-contract.md`, "Signed
/// deliveries").
pub(crate) const UNSUPPORTED_AUTHENTICATION: &str = "Unsupported trigger authentication";

/// What Hodoflow's pages fix for every Hodoflow surface.
pub(crate) static HODOFLOW: Vendor = Vendor {
    // Hodoflow's "Idempotency and retries" names no limit; the crate's own rule (Modulify's)
    // holds (`docs/wire-contract.md`, "Idempotency keys").
    keys: KeyRules {
        max_len: 255,
        header: HeaderName::from_static("idempotency-key"),
    },
    // "Same key and same request: replays the stored response with idempotency-replayed: true."
    replay: Replay {
        header: HeaderName::from_static("idempotency-replayed"),
        answer_not_kept: always_kept,
    },
};

/// Whom a webhook delivery's signals hold (Hodoflow's webhook sender guide, "Limits and
/// checkpoints": 100 requests per trigger in a 60-second window). A delivery sits in its trigger's
/// window: its `429 Rate limit exceeded` and a `"trigger"` `RateLimit` policy with nothing
/// remaining close that trigger, never the credential or another trigger. A `503`'s `Retry-After`
/// is the call's own wait: webhook ingestion's health is the retry budget's to tell, by its own
/// answers.
const WEBHOOK_SCOPES: Scopes = Scopes {
    sits_in: Reach::Route,
    closes: &[(429, Reach::Route), (503, Reach::Call)],
    route_policy: Some(TRIGGER_POLICY),
    service: "webhooks",
};

/// Whom a JSON:API, read or GraphQL call's signals hold (Hodoflow's "Idempotency and retries":
/// "Respect the credential-wide rate budget"): its `429 rate_limited` closes the credential's API
/// budget, which webhook deliveries do not sit in; a `503`'s `Retry-After` is the call's own wait.
/// A `"trigger"` `RateLimit` policy is never the credential's (`docs/wire-contract.md`, "RateLimit
/// fields").
const API_SCOPES: Scopes = Scopes {
    sits_in: Reach::Credential,
    closes: &[(429, Reach::Credential), (503, Reach::Call)],
    route_policy: Some(TRIGGER_POLICY),
    service: "api",
};

/// JSON:API unsafe writes: POST, PUT, PATCH, DELETE under `/api/json`.
pub(crate) static JSON_API_WRITE: SurfaceProfile = SurfaceProfile {
    name: "json_api_write",
    vendor: &HODOFLOW,
    rules: Matrix::new(JSON_API_WRITES),
    error_codes: json_api_codes,
    sends_key: true,
    answer_limit: None,
    in_progress: Some(409),
    not_found: ErrorKind::NotFound.describe(),
    status_is_the_answer: false,
    scopes: API_SCOPES,
};

/// Webhook deliveries.
pub(crate) static WEBHOOK: SurfaceProfile = SurfaceProfile {
    name: "webhook",
    vendor: &HODOFLOW,
    rules: Matrix::new(WEBHOOK_DELIVERIES),
    error_codes: webhook_codes,
    sends_key: true,
    answer_limit: Some(WEBHOOK_ANSWER_LIMIT),
    in_progress: None,
    not_found: "webhook trigger not found",
    status_is_the_answer: true,
    scopes: WEBHOOK_SCOPES,
};

/// Reads: GET and HEAD.
pub(crate) static READ: SurfaceProfile = SurfaceProfile {
    name: "read",
    vendor: &HODOFLOW,
    rules: Matrix::new(READS),
    error_codes: json_api_codes,
    sends_key: false,
    answer_limit: None,
    in_progress: None,
    not_found: ErrorKind::NotFound.describe(),
    status_is_the_answer: false,
    scopes: API_SCOPES,
};

/// GraphQL `factQuery`.
pub(crate) static GRAPHQL: SurfaceProfile = SurfaceProfile {
    name: "graphql",
    vendor: &HODOFLOW,
    rules: Matrix::new(GRAPHQL_QUERIES),
    error_codes: graphql_codes,
    sends_key: false,
    answer_limit: None,
    in_progress: None,
    not_found: ErrorKind::NotFound.describe(),
    status_is_the_answer: false,
    scopes: API_SCOPES,
};

/// JSON:API errors: `{"errors":[{"code":…}]}`.
fn json_api_codes(document: &Value) -> Vec<String> {
    errors(document, |error| error.get("code"))
}

/// GraphQL errors: `{"errors":[{"extensions":{"code":…}}]}`.
fn graphql_codes(document: &Value) -> Vec<String> {
    errors(document, |error| error.get("extensions")?.get("code"))
}

/// Webhook errors: `{"error":"<runtime body>"}`.
fn webhook_codes(document: &Value) -> Vec<String> {
    document
        .get("error")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .into_iter()
        .collect()
}

fn errors(document: &Value, code: impl Fn(&Value) -> Option<&Value>) -> Vec<String> {
    document
        .get("errors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|error| code(error)?.as_str().map(str::to_owned))
        .collect()
}

use ErrorKind::{
    ClientError, Forbidden, GraphQl, InProgress, KeyReused, NotFound, PayloadTooLarge, Server,
    Unauthorized, UnexpectedStatus, Unprocessable,
};
use Verdict::{ReexchangeOnce, RetryAfterBackoff, RetryAfterServerWait, Stop, Success};
use When::{Code, NoResponse, Other, Range, Status};

/// Hodoflow's "Idempotency and retries", "Retry matrix", for POST, PUT, PATCH and DELETE under
/// `/api/json`.
#[rustfmt::skip]
const JSON_API_WRITES: &[Rule] = &[
    //   Result                                           Retry?                  Action
    rule(NoResponse,                                      RetryAfterBackoff,      "Retry with the same idempotency/delivery key"),
    rule(Range(200, 299),                                 Success,                "Done; a replay carries idempotency-replayed: true"),
    rule(Status(&[429]),                                  RetryAfterServerWait,   "Wait the Retry-After duration, then retry"),
    rule(Status(&[500, 502, 503, 504]),                   RetryAfterBackoff,      "Exponential backoff with jitter and a bounded attempt/time budget"),
    rule(Code(&[503], "idempotency_unavailable"),         RetryAfterBackoff,      "Nothing was written; retry with the same key"),
    rule(Status(&[401]),                                  ReexchangeOnce,         "Discard cached token, exchange, retry once; then alert"),
    rule(Status(&[403]),                                  Stop(Forbidden),        "Correct scopes or run-as permissions"),
    rule(Status(&[404]),                                  Stop(NotFound),         "Correct path/ID or object access"),
    rule(Code(&[409], "idempotency_key_reused"),          Stop(KeyReused),        "Reconcile key reuse; do not generate a new key blindly"),
    rule(Code(&[409], "idempotency_key_in_progress"),     Stop(InProgress),       "Retry later with the same key"),
    rule(Status(&[413]),                                  Stop(PayloadTooLarge),  "Correct body size"),
    rule(Status(&[422]),                                  Stop(Unprocessable),    "Correct the validation failure"),
    rule(Range(400, 499),                                 Stop(ClientError),      "Correct the request; never retried unchanged"),
    rule(Range(500, 599),                                 Stop(Server),           "Not a transient server error; never retried"),
    rule(Other,                                           Stop(UnexpectedStatus), "Outside the contract; never retried"),
];

/// Hodoflow's webhook sender guide, "Retry matrix", for webhook deliveries. The runtime body is
/// the `error` field (`docs/wire-contract.md`, "Webhook deliveries and their errors"); where a
/// row does not match on it, the page's body stands in the comment at its end.
#[rustfmt::skip]
const WEBHOOK_DELIVERIES: &[Rule] = &[
    //   Status and runtime body                          Retry?                  Action
    rule(NoResponse,                                      RetryAfterBackoff,      "Treat an unobserved 202 as ambiguous; retry with the same delivery ID"),
    rule(Status(&[202]),                                  Success,                "Stop delivery retries"), // accepted or duplicate
    rule(Range(200, 299),                                 Success,                "The server took the delivery; stop delivery retries"),
    rule(Code(&[401], "missing_credentials"),             ReexchangeOnce,         "Exchange once if expired, then retry once with the same delivery ID"),
    rule(Code(&[401], "Unauthorized"),                    Stop(Unauthorized),     "Fix selected-account, organization, or connector authentication"),
    rule(Status(&[401]),                                  Stop(Unauthorized),     "Fix authentication; only missing_credentials is exchanged"),
    rule(Status(&[403]),                                  Stop(Forbidden),        "Grant webhooks; do not retry unchanged"), // Insufficient scope
    rule(Status(&[404]),                                  Stop(NotFound),         "Confirm token and active workflow; do not retry unchanged"), // Trigger not found
    rule(Status(&[413]),                                  Stop(PayloadTooLarge),  "Reduce the body; a byte-identical retry cannot succeed"), // Request body too large
    rule(Status(&[422]),                                  Stop(Unprocessable),    "Fix payload or trigger configuration"), // Processing failed
    rule(Code(&[422], UNSUPPORTED_AUTHENTICATION),        Stop(Unprocessable),    "Fix the trigger's authentication or the signing secret; a re-signed retry with the same secret cannot succeed"),
    rule(Status(&[429]),                                  RetryAfterServerWait,   "Wait the response's Retry-After, then retry with the same ID"), // Rate limit exceeded
    rule(Status(&[503]),                                  RetryAfterBackoff,      "Wait Retry-After, back off, and retry with the same ID"), // Processing temporarily unavailable
    rule(Status(&[500, 502, 504]),                        RetryAfterBackoff,      "Exponential backoff with jitter; retry with the same ID"),
    rule(Range(400, 499),                                 Stop(ClientError),      "Correct the request; never retried unchanged"),
    rule(Range(500, 599),                                 Stop(Server),           "Not a transient server error; never retried"),
    rule(Other,                                           Stop(UnexpectedStatus), "Outside the contract; never retried"),
];

/// Hodoflow's "Idempotency and retries": "Reads are naturally repeatable, but still need bounded
/// backoff." GET and HEAD.
#[rustfmt::skip]
const READS: &[Rule] = &[
    //   Result                                           Retry?                  Action
    rule(NoResponse,                                      RetryAfterBackoff,      "Reads are naturally repeatable; retry with bounded backoff"),
    rule(Range(200, 299),                                 Success,                "Done"),
    rule(Status(&[429]),                                  RetryAfterServerWait,   "Wait the Retry-After duration, then retry"),
    rule(Status(&[500, 502, 503, 504]),                   RetryAfterBackoff,      "Exponential backoff with jitter and a bounded attempt/time budget"),
    rule(Status(&[401]),                                  ReexchangeOnce,         "Discard cached token, exchange, retry once; then alert"),
    rule(Status(&[403]),                                  Stop(Forbidden),        "Correct scopes or run-as permissions"),
    rule(Status(&[404]),                                  Stop(NotFound),         "Correct path/ID or object access"),
    rule(Range(400, 499),                                 Stop(ClientError),      "Correct the request; never retried unchanged"),
    rule(Range(500, 599),                                 Stop(Server),           "Not a transient server error; never retried"),
    rule(Other,                                           Stop(UnexpectedStatus), "Outside the contract; never retried"),
];

/// Hodoflow's "Idempotency and retries": "GraphQL factQuery is read-only ... A GraphQL validation
/// or complexity error is permanent until the document or variables change." The code is
/// `errors[].extensions.code`, on a 400 or a 200.
#[rustfmt::skip]
const GRAPHQL_QUERIES: &[Rule] = &[
    //   Result                                           Retry?                  Action
    rule(NoResponse,                                      RetryAfterBackoff,      "Read-only; retry with bounded backoff"),
    rule(Code(&[200, 400], "GRAPHQL_VALIDATION_FAILED"),  Stop(GraphQl),          "Permanent until the document or variables change"),
    rule(Code(&[200, 400], "GRAPHQL_PARSE_FAILED"),       Stop(GraphQl),          "Permanent until the document or variables change"),
    rule(Code(&[200, 400], "QUERY_COMPLEXITY_EXCEEDED"),  Stop(GraphQl),          "Permanent until the document or variables change"),
    rule(Range(200, 299),                                 Success,                "Done"),
    rule(Status(&[429]),                                  RetryAfterServerWait,   "Wait the Retry-After duration, then retry"),
    rule(Status(&[500, 502, 503, 504]),                   RetryAfterBackoff,      "Exponential backoff with jitter and a bounded attempt/time budget"),
    rule(Status(&[401]),                                  ReexchangeOnce,         "Discard cached token, exchange, retry once; then alert"),
    rule(Status(&[403]),                                  Stop(Forbidden),        "Correct scopes or run-as permissions"),
    rule(Status(&[404]),                                  Stop(NotFound),         "Correct path/ID or object access"),
    rule(Range(400, 499),                                 Stop(ClientError),      "Correct the request; never retried unchanged"),
    rule(Range(500, 599),                                 Stop(Server),           "Not a transient server error; never retried"),
    rule(Other,                                           Stop(UnexpectedStatus), "Outside the contract; never retried"),
];
