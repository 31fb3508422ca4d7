//! No bearer token, client secret, trigger token, signing secret, webhook signature or request
//! body reaches any trace output, at any level, through a run with faults and retries.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hodoflow_mock::{ClientSeed, DEMO_MODULIFY_TOKEN, Fault, MockServer, TriggerSeed};
use hodoflow_retry::{
    Backoff, Budget, DeliveryId, HodoflowClient, IdempotencyKey, ModulifyClient, Surface,
    auth::ClientCredentials, hodoflow::TRIGGER_LIMIT, webhook::SigningSecret,
};
use support::{Captured, Recording};

const CLIENT_SECRET: &str = "cs_SECRET_never_logged_42";
const TRIGGER_TOKEN: &str = "trg_SECRET_never_logged_77";
const WEBHOOK_BODY: &str = r#"{"marker":"BODY_SECRET_webhook_9c2"}"#;
const WRITE_BODY: &str =
    r#"{"data":{"type":"notes","attributes":{"text":"BODY_SECRET_write_5e1"}}}"#;
const GRAPHQL_MARKER: &str = "BODY_SECRET_graphql_3a7";

/// The contract server with this file's client secret and `trigger`.
async fn seeded_server(trigger: TriggerSeed) -> MockServer {
    MockServer::builder()
        .client(ClientSeed::new("sender-1", CLIENT_SECRET, "acme"))
        .trigger(trigger)
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn trace_output_at_trace_level_holds_no_token_secret_trigger_token_or_body() {
    tracing_log::LogTracer::init().expect("log records are routed into tracing");
    let (captured, _guard) = Captured::on_this_thread(tracing::Level::TRACE);

    let server = seeded_server(TriggerSeed::new(TRIGGER_TOKEN, "acme")).await;
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let exchanger = Recording {
        inner: ClientCredentials::new(&server.base_url(), "sender-1", CLIENT_SECRET).unwrap(),
        tokens: tokens.clone(),
    };
    let client = HodoflowClient::builder(server.base_url())
        .exchanger(exchanger)
        .trigger_limit_for(TRIGGER_TOKEN, TRIGGER_LIMIT)
        .backoff(
            Backoff::new()
                .base(Duration::from_millis(2))
                .cap(Duration::from_millis(10)),
        )
        .budget(
            Budget::new()
                .max_attempts(4)
                .max_elapsed(Duration::from_secs(20)),
        )
        .build()
        .unwrap();
    let id = |op: &str| DeliveryId::new(IdempotencyKey::from_operation_id(op));

    // A lost 202, an expired token, a 503 with Retry-After: 0 and the legacy route.
    server.inject(Fault::execute_then_close().on("POST", "/api/v1/webhooks/"));
    server.inject(Fault::expired_token().on("POST", "/api/v1/webhooks/"));
    server.inject(Fault::webhook_unavailable(0).on("POST", "/api/v1/webhooks/"));
    let delivery = client
        .deliver(TRIGGER_TOKEN, WEBHOOK_BODY)
        .delivery_id(id("e-1"))
        .send()
        .await
        .unwrap();
    assert!(delivery.is_duplicate());
    client
        .deliver(TRIGGER_TOKEN, WEBHOOK_BODY)
        .delivery_id(id("e-2"))
        .legacy_org("acme")
        .send()
        .await
        .unwrap();
    // A write whose answer is lost, then a 500 during execution.
    server.inject(Fault::execute_then_close().on("POST", "/api/json/"));
    server.inject(Fault::fail_execution(500).on("POST", "/api/json/"));
    let key = IdempotencyKey::from_operation_id("note-1");
    let written = client
        .create("/api/json/v1/notes", key, WRITE_BODY)
        .send()
        .await
        .unwrap();
    assert!(written.replayed());
    // A GraphQL query with a marker in its variables, and a permanent 401 on a read.
    let query = "query($t: String!) { factQuery(type: $t) { id } }";
    let _ = client
        .graphql(query, serde_json::json!({"t": GRAPHQL_MARKER}))
        .send()
        .await;
    server.inject(Fault::expired_token().on("GET", "/api/json/").times(10));
    let error = client.get("/api/json/v1/notes").send().await.unwrap_err();
    // What a caller might log: the error, the outcomes, the client, the unsent builders.
    let pending_delivery = client
        .deliver(TRIGGER_TOKEN, WEBHOOK_BODY)
        .delivery_id(id("e-3"));
    let pending_write = client.create("/api/json/v1/notes", IdempotencyKey::random(), WRITE_BODY);
    let stats = client.stats();
    tracing::error!(
        ?stats,
        ?error,
        %error,
        ?delivery,
        ?written,
        ?client,
        ?pending_delivery,
        ?pending_write,
        "caller logs everything it has"
    );
    drop(_guard);

    let output = captured.text();
    let tokens = tokens.lock().unwrap().clone();
    assert!(
        tokens.len() >= 3,
        "tokens were exchanged and re-exchanged: {}",
        tokens.len()
    );
    assert!(
        output.contains("attempt will be retried"),
        "the attempts were traced"
    );
    assert!(
        output.contains("/api/v1/webhooks/<redacted>"),
        "routes are traced, redacted"
    );
    assert!(output.contains("x-request-id") || output.contains("request_id=req_"));
    assert!(
        output.contains("call finished") && output.contains("retry_tokens_left=500"),
        "each call ends with the client's counters as tracing fields"
    );
    assert!(
        output.contains("starting new connection"),
        "reqwest's log records are captured too"
    );
    let mut secrets = vec![CLIENT_SECRET, TRIGGER_TOKEN, "BODY_SECRET", GRAPHQL_MARKER];
    secrets.extend(tokens.iter().map(String::as_str));
    for secret in secrets {
        assert!(!output.contains(secret), "trace output leaks {secret}");
    }
}

#[tokio::test]
async fn trace_output_at_trace_level_holds_no_modulify_token_or_body() {
    let (captured, _guard) = Captured::on_this_thread(tracing::Level::TRACE);
    let server = MockServer::start().await.unwrap();
    let modulify = ModulifyClient::builder(server.base_url())
        .bearer_token(DEMO_MODULIFY_TOKEN)
        .backoff(Backoff::new().base(Duration::from_millis(5)))
        .build()
        .unwrap();
    server.inject(
        Fault::fail_execution(500)
            .on("POST", "/v1/send_message")
            .times(1),
    );
    server.inject(
        Fault::expired_token()
            .on("POST", "/v1/create_site")
            .times(1),
    );
    let secret_prompt = "prompt-4f1c-secret-words";

    let body = format!(r#"{{"projectId":"site_1","prompt":"{secret_prompt}"}}"#);
    modulify
        .call("send_message", body)
        .operation_id("order-11:notify")
        .send()
        .await
        .unwrap();
    let error = modulify
        .call("create_site", r#"{"name":"Hidden"}"#)
        .send()
        .await
        .unwrap_err();

    let text = captured.text();
    assert!(
        text.contains("attempt will be retried"),
        "the retry is logged: {text}"
    );
    assert_eq!(
        error.kind(),
        hodoflow_retry::ErrorKind::Unauthorized,
        "{error}"
    );
    assert!(text.contains("attempt finished"), "the stop is logged");
    for secret in [DEMO_MODULIFY_TOKEN, secret_prompt] {
        assert!(!text.contains(secret), "{secret} logged");
        assert!(!format!("{error} {error:?}").contains(secret));
    }
}

/// A webhook path sent through a profile ([`HodoflowClient::request`]) is still a secret's path:
/// its trigger token and its query reach no trace, error or `Debug` output.
#[tokio::test]
async fn a_trigger_token_in_a_profiles_request_path_reaches_no_trace_or_error() {
    const UNKNOWN: &str = "trg_SECRET_unknown_trigger_51";
    const QUERY: &str = "QUERY_SECRET_never_logged_8";
    let (captured, _guard) = Captured::on_this_thread(tracing::Level::TRACE);
    let server = seeded_server(TriggerSeed::new(TRIGGER_TOKEN, "acme")).await;
    let client = HodoflowClient::builder(server.base_url())
        .client_credentials("sender-1", CLIENT_SECRET)
        .backoff(Backoff::new().base(Duration::from_millis(2)))
        .build()
        .unwrap();
    server.inject(Fault::execute_then_close().on("POST", "/api/v1/webhooks/"));

    let send = |path: String| {
        client
            .client()
            .request(Surface::Webhook, http::Method::POST, &path)
            .body(WEBHOOK_BODY)
            .send()
    };
    let accepted = send(format!("/api/v1/webhooks/{TRIGGER_TOKEN}"))
        .await
        .unwrap();
    let refused = send(format!("/api/v1/webhooks/{UNKNOWN}?signature={QUERY}"))
        .await
        .unwrap_err();

    assert_eq!(accepted.attempts().len(), 2, "the lost answer was retried");
    assert_eq!(
        server.ledger().total_runs(),
        1,
        "one run: the retry kept its key"
    );
    assert_eq!(refused.status().map(|s| s.as_u16()), Some(404), "{refused}");
    let text = captured.text();
    assert!(
        text.contains("webhooks/<redacted>"),
        "the route is logged: {text}"
    );
    let shown = format!("{text} {refused} {refused:?} {accepted:?}");
    for secret in [TRIGGER_TOKEN, UNKNOWN, QUERY, "BODY_SECRET_webhook_9c2"] {
        assert!(!shown.contains(secret), "{secret} shown");
    }
}

#[tokio::test]
async fn signing_secrets_and_signatures_reach_no_trace_error_or_debug_output() {
    const SIGNING_SECRET: &str = "whsec_U0lHTklOR19TRUNSRVRfbmV2ZXJfbG9nZ2VkXzE=";
    const NEXT_SECRET: &str = "whsec_U0lHTklOR19TRUNSRVRfbmV2ZXJfbG9nZ2VkXzI=";
    const WRONG_SECRET: &str = "whsec_V1JPTkdfU0lHTklOR19TRUNSRVRfbmV2ZXJfbG9nZ2Vk";
    let (captured, _guard) = Captured::on_this_thread(tracing::Level::TRACE);
    let server =
        seeded_server(TriggerSeed::new(TRIGGER_TOKEN, "acme").signing_secret(NEXT_SECRET)).await;
    let builder = HodoflowClient::builder(server.base_url())
        .client_credentials("sender-1", CLIENT_SECRET)
        .signing_secrets([SIGNING_SECRET, NEXT_SECRET])
        .backoff(Backoff::new().base(Duration::from_millis(2)));
    let shown_builder = format!("{builder:?}");
    let client = builder.build().unwrap();
    let id = |op: &str| DeliveryId::new(IdempotencyKey::from_operation_id(op));

    // A 503 from the handler, a lost 202, then a wrong secret refused.
    server.inject(Fault::fail_execution(503).on("POST", "/api/v1/webhooks/"));
    server.inject(Fault::execute_then_close().on("POST", "/api/v1/webhooks/"));
    let delivery = client
        .deliver(TRIGGER_TOKEN, WEBHOOK_BODY)
        .delivery_id(id("signed-1"))
        .send()
        .await
        .unwrap();
    let pending = client
        .deliver(TRIGGER_TOKEN, WEBHOOK_BODY)
        .delivery_id(id("signed-2"))
        .signing_secret(WRONG_SECRET);
    let shown_pending = format!("{pending:?}");
    let error = pending.send().await.unwrap_err();
    let malformed = client
        .deliver(TRIGGER_TOKEN, WEBHOOK_BODY)
        .delivery_id(id("signed-3"))
        .signing_secret("whsec_U0lHTklOR19TRUNSRVRfc2hvcnQ")
        .send()
        .await
        .unwrap_err();
    let secret = SigningSecret::new(SIGNING_SECRET).unwrap();
    tracing::error!(
        ?delivery,
        ?error,
        %error,
        ?malformed,
        %malformed,
        ?client,
        %secret,
        ?secret,
        shown_builder,
        shown_pending,
        "caller logs everything it has"
    );
    drop(_guard);

    let output = captured.text();
    assert_eq!(delivery.attempts().len(), 3, "{delivery:?}");
    assert!(
        output.contains("attempt will be retried"),
        "the attempts were traced"
    );
    assert!(
        error
            .to_string()
            .contains(&SigningSecret::new(WRONG_SECRET).unwrap().fingerprint())
    );
    let ledger = server.ledger();
    let signatures: Vec<String> = ledger
        .signed_deliveries()
        .iter()
        .flat_map(|record| {
            let value = record.headers()["webhook-signature"].to_str().unwrap();
            value
                .split(' ')
                .map(|s| s.trim_start_matches("v1,").to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        signatures.len(),
        2 * 3 + 1,
        "three attempts of two signatures, then one"
    );
    let mut hidden = vec![
        SIGNING_SECRET,
        NEXT_SECRET,
        WRONG_SECRET,
        "U0lHTklOR19TRUNSRVRf",
        "V1JPTkdfU0lHTklOR19TRUNSRVRf",
        TRIGGER_TOKEN,
        CLIENT_SECRET,
        "BODY_SECRET",
    ];
    hidden.extend(signatures.iter().map(String::as_str));
    for secret in hidden {
        assert!(!output.contains(secret), "the output shows {secret}");
    }
}
