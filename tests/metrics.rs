//! The `metrics` feature: the clients' exposition read by a strict OpenMetrics reader, over real
//! TCP on 127.0.0.1. (An outbox's families, and the figures held against the contract server's
//! ledger after a run with known faults, are the `hodoflow-outbox` crate's tests/metrics.rs.)

mod support;

#[path = "support/openmetrics.rs"]
mod openmetrics;

use std::collections::HashMap;

use hodoflow_mock::{DEMO_MODULIFY_TOKEN, DEMO_TRIGGER_TOKEN, Fault};
use hodoflow_retry::metrics::{CONTENT_TYPE, Metrics};
use hodoflow_retry::{DeliveryId, IdempotencyKey, limit::RetryBudget};

use openmetrics::Family;

/// `metrics`' exposition now, read strictly.
async fn scrape(metrics: &Metrics) -> HashMap<String, Family> {
    let text = metrics.encode().await.unwrap();
    openmetrics::parse(&text).unwrap_or_else(|error| panic!("{error}\n{text}"))
}

#[tokio::test]
async fn a_client_without_a_retry_budget_shows_no_budget_gauges_and_no_outbox() {
    let server = support::server().await;
    let client = support::demo(support::builder(&server).retry_budget(RetryBudget::disabled()));
    let id = DeliveryId::new(IdempotencyKey::from_operation_id("order-1:shipped"));
    let delivery = client.deliver(DEMO_TRIGGER_TOKEN, "{}").delivery_id(id);
    delivery.send().await.unwrap();

    let families = scrape(&Metrics::new().client(&client)).await;

    assert!(!families.contains_key("hodoflow_client_retry_budget_tokens"));
    assert!(!families.contains_key("hodoflow_client_retry_budget_throttle_ratio"));
    assert!(
        !families
            .keys()
            .any(|name| name.starts_with("hodoflow_outbox_"))
    );
    let attempts = &families["hodoflow_client_attempts"];
    assert_eq!(
        attempts.value("hodoflow_client_attempts_total", &[("status_class", "2xx")]),
        Some(1.0)
    );
    assert_eq!(
        CONTENT_TYPE,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
}

#[tokio::test]
async fn two_clients_in_one_exposition_are_told_apart_by_their_client_label() {
    let server = support::server().await;
    let hodoflow = support::client(&server);
    let modulify = support::modulify_builder(&server)
        .bearer_token(DEMO_MODULIFY_TOKEN)
        .build()
        .unwrap();
    server.inject(Fault::respond(503).on("POST", "/v1/send_message").times(1));
    let id = DeliveryId::new(IdempotencyKey::from_operation_id("order-2:shipped"));
    let delivery = hodoflow.deliver(DEMO_TRIGGER_TOKEN, "{}").delivery_id(id);
    delivery.send().await.unwrap();
    let prompt = r#"{"projectId":"site_1","prompt":"Hi."}"#;
    let call = modulify.call("send_message", prompt);
    let key = IdempotencyKey::from_operation_id("message-1");
    call.key(key).send().await.unwrap();

    let metrics = Metrics::new()
        .named_client("hodoflow", &hodoflow)
        .named_client("modulify", &modulify);

    let families = scrape(&metrics).await;
    let attempts = &families["hodoflow_client_attempts"];
    let of = |client: &str, class: &str| {
        let labels = [("client", client), ("status_class", class)];
        attempts.value("hodoflow_client_attempts_total", &labels)
    };
    assert_eq!(
        (of("hodoflow", "2xx"), of("hodoflow", "5xx")),
        (Some(1.0), Some(0.0))
    );
    // Modulify's answers, its catalogue's read included.
    let ledger = server.ledger();
    let modulify_ok = ledger
        .requests()
        .iter()
        .filter(|record| record.path.starts_with("/v1/"))
        .filter(|record| record.status.is_some_and(|status| status / 100 == 2))
        .count();
    assert!(modulify_ok >= 1);
    let expected = (Some(modulify_ok as f64), Some(1.0));
    assert_eq!((of("modulify", "2xx"), of("modulify", "5xx")), expected);
    let exchanges = &families["hodoflow_client_token_exchanges"];
    let exchanged = |client: &str| {
        exchanges.value(
            "hodoflow_client_token_exchanges_total",
            &[("client", client)],
        )
    };
    // The server's exchanges are the Hodoflow client's; the Modulify client's static token
    // counts as its own.
    let static_token = modulify.client().stats().exchanges as f64;
    let expected = (Some(ledger.exchanges().len() as f64), Some(static_token));
    assert_eq!((exchanged("hodoflow"), exchanged("modulify")), expected);
    for (name, family) in &families {
        if name.starts_with("hodoflow_client_") || name.starts_with("http_client_") {
            for sample in &family.samples {
                assert!(sample.labels.contains_key("client"), "{name}: {sample:?}");
            }
        }
    }

    // A second client of the same name replaces the first.
    let metrics = Metrics::new().named_client("one", &hodoflow);
    let families = scrape(&metrics.named_client("one", modulify.client())).await;
    let attempts = &families["hodoflow_client_attempts"];
    let labels = [("client", "one"), ("status_class", "5xx")];
    assert_eq!(
        attempts.value("hodoflow_client_attempts_total", &labels),
        Some(1.0)
    );
    assert_eq!(attempts.samples.len(), 5, "one client's classes");
}

#[test]
fn the_strict_reader_refuses_what_openmetrics_refuses() {
    let good = "# HELP a_seconds A.\n# TYPE a_seconds histogram\n# UNIT a_seconds seconds\n\
        a_seconds_sum 1.5\na_seconds_count 2\na_seconds_bucket{le=\"1.0\"} 1\n\
        a_seconds_bucket{le=\"2.0\"} 1\na_seconds_bucket{le=\"+Inf\"} 2\n# TYPE b counter\nb_total{x=\"1\"} 3\n# EOF\n";
    openmetrics::parse(good).unwrap();
    let broken = [
        (good.replace("# EOF\n", ""), "no EOF"),
        (good.replace("_count 2", "_count 3"), "+Inf is not _count"),
        (
            good.replace("le=\"1.0\"} 1", "le=\"1.0\"} 3"),
            "a falling bucket",
        ),
        (good.replace("le=\"2.0\"", "le=\"0.5\""), "le does not rise"),
        (
            good.replace("b_total", "b"),
            "a counter sample without _total",
        ),
        (
            good.replace("# UNIT a_seconds seconds", "# UNIT a_seconds bytes"),
            "a unit not in the name",
        ),
        (good.replace("x=\"1\"", "x=\"1\",x=\"2\""), "a label twice"),
        (
            good.replace("x=\"1\"", "__x=\"1\""),
            "a reserved label name",
        ),
        (good.replace("x=\"1\"", "x=\"\\t\""), "a bad escape"),
        (
            good.replace(
                "b_total{x=\"1\"} 3\n",
                "b_total{x=\"1\"} 3\nb_total{x=\"1\"} 4\n",
            ),
            "a repeated series",
        ),
        (
            good.replace("b_total{x=\"1\"} 3", "b_total{x=\"1\"} -3"),
            "a negative counter",
        ),
        (
            good.replace("# TYPE b counter\n", "# TYPE b counter\n\n"),
            "an empty line",
        ),
        (format!("{good}a_seconds_sum 1\n"), "a line after EOF"),
        (
            good.replace(
                "# TYPE b counter\nb_total{x=\"1\"} 3\n",
                "# TYPE b counter\nb_total{x=\"1\"} 3\na_seconds_sum 2\n",
            ),
            "an interleaved family",
        ),
    ];
    for (text, why) in broken {
        assert!(
            openmetrics::parse(&text).is_err(),
            "{why} was read:\n{text}"
        );
    }
}
