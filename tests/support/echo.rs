//! A server that echoes every secret the client holds: the requests that ask it to, the client
//! that holds the secrets, and the search for any piece of one in what the client keeps. Shared
//! by the SDK's tests/echoes.rs (what a call returns) and the outbox's (what a store keeps).

use std::time::Duration;

use hodoflow_retry::{Backoff, Budget, Error, HodoflowClient, limit::RouteLimit};
use serde_json::json;

use super::hostile::{HOSTILE_SECRET, Hostile, Reply, Seen};

/// The trigger token; the webhook path holds it. The secrets are random-looking, so that no 8
/// bytes of one are the SDK's own words.
pub const TRIGGER: &str = "trg_ECHO_5b1e9a7c3d2f40";
/// The signing secret: whsec_ and the base64 of 26 bytes.
pub const SIGNING: &str = "whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=";
/// A static bearer token, with characters a form body percent-encodes.
pub const BEARER: &str = "static_6c2e9f1a/b7d3+40=";
/// The webhook route.
pub const WEBHOOK: &str = "/api/v1/webhooks/";

/// What a request asks the server to echo: which secret, where, after how many bytes.
#[derive(Debug, Clone, Copy)]
pub struct Echo {
    pub secret: &'static str,
    pub place: Place,
    pub pad: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `422` with the secret in the error code and in `x-request-id`.
    Refusal,
    /// `202 accepted` with the secret in the run ID and in `x-request-id`.
    RunId,
}

/// The secrets a test's client holds, by the name a request body gives.
pub const SECRETS: [&str; 5] = ["token", "client", "trigger", "signing", "bearer"];

/// The paddings that put a secret `len` bytes long just before, across and just after `cut`.
pub fn paddings(cut: usize, len: usize) -> Vec<usize> {
    let mut pads: Vec<usize> = [
        cut.saturating_sub(len + 1),
        cut.saturating_sub(len),
        cut.saturating_sub(len - 1),
        cut.saturating_sub(len / 2),
        cut.saturating_sub(8),
        cut.saturating_sub(7),
        cut - 1,
        cut,
    ]
    .into();
    pads.sort_unstable();
    pads.dedup();
    pads
}

/// The answer the hostile server gives to a request whose body is an [`Echo`]; the token
/// endpoint is the server's own.
pub fn echo(seen: &Seen, _: usize) -> Reply {
    let order: serde_json::Value = serde_json::from_slice(&seen.body).unwrap_or(json!({}));
    let pad = order["pad"].as_u64().unwrap_or(0) as usize;
    let bearer = seen
        .header_values("authorization")
        .first()
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let secret = match order["secret"].as_str().unwrap_or_default() {
        "token" | "bearer" => bearer,
        "client" => HOSTILE_SECRET.to_owned(),
        "trigger" => seen
            .path
            .strip_prefix(WEBHOOK)
            .unwrap_or_default()
            .to_owned(),
        "signing" => SIGNING.to_owned(),
        _ => String::new(),
    };
    let request_id = format!("{}{secret}\t-tail", "r".repeat(pad));
    let text = format!("{}{secret}\u{202e}\u{1b}[2J-tail", "x".repeat(pad));
    match order["place"].as_str() {
        Some("run_id") => Reply::json(
            202,
            &json!({"status": "accepted", "workflow_run_id": text}).to_string(),
        ),
        _ => Reply::json(422, &json!({"error": text}).to_string()),
    }
    .header("x-request-id", &request_id)
}

/// Every order a test sends: each secret, in each place, across each cut.
pub fn orders() -> Vec<Echo> {
    let mut orders = Vec::new();
    for secret in SECRETS {
        // The lengths of the echoed secrets are close enough to cut across with 30 bytes.
        for (place, cuts) in [
            (Place::Refusal, &[100, 128, 256][..]),
            (Place::RunId, &[128, 256][..]),
        ] {
            for &cut in cuts {
                for pad in paddings(cut, 30) {
                    orders.push(Echo { secret, place, pad });
                }
            }
        }
    }
    orders
}

pub fn body(order: &Echo) -> String {
    let place = match order.place {
        Place::Refusal => "refusal",
        Place::RunId => "run_id",
    };
    json!({"secret": order.secret, "place": place, "pad": order.pad}).to_string()
}

/// A client of `server` with client credentials (or the static bearer token) and the signing
/// secret.
pub fn client(server: &Hostile, bearer: bool) -> HodoflowClient {
    let builder = HodoflowClient::builder(server.url());
    let builder = if bearer {
        builder.bearer_token(BEARER)
    } else {
        builder.client_credentials("echo-sender", HOSTILE_SECRET)
    };
    // Far more deliveries to one trigger a second than Hodoflow's default window takes:
    // this test is about what is kept, not pacing.
    builder
        .trigger_limit(RouteLimit::new(100_000, Duration::from_secs(1)).unwrap())
        .signing_secret(SIGNING)
        .backoff(Backoff::new().base(Duration::from_millis(1)))
        .budget(
            Budget::new()
                .max_attempts(1)
                .max_elapsed(Duration::from_secs(10)),
        )
        .build()
        .unwrap()
}

/// The first piece of 8 bytes or more of any of `secrets` that `text` holds.
pub fn leak(text: &str, secrets: &[String]) -> Option<String> {
    secrets.iter().find_map(|secret| {
        secret
            .as_bytes()
            .windows(8)
            .find(|piece| text.as_bytes().windows(8).any(|window| window == *piece))
            .map(|piece| String::from_utf8_lossy(piece).into_owned())
    })
}

/// Every secret of a test: the tokens the server issued, the client secret, the trigger token,
/// the signing secret and the static bearer token.
pub fn secrets(server: &Hostile) -> Vec<String> {
    let mut secrets = server.issued();
    secrets.extend([HOSTILE_SECRET, TRIGGER, SIGNING, BEARER].map(str::to_owned));
    secrets
}

#[track_caller]
pub fn assert_clean(what: &str, text: &str, secrets: &[String]) {
    if let Some(piece) = leak(text, secrets) {
        panic!("{what} holds {piece:?}: {text}");
    }
    assert!(
        !text.contains(['\u{1b}', '\u{202e}', '\t']),
        "{what} holds a control or bidi character: {text:?}"
    );
}

/// What an error shows of the server, all of it.
pub fn shown_error(error: &Error) -> String {
    let ids: Vec<String> = error.attempts().iter().map(ToString::to_string).collect();
    format!("{error} | {error:?} | {}", ids.join(" | "))
}
