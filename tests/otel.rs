//! Span fields carry OpenTelemetry's HTTP client semantic-convention names, so an exporter built
//! on `tracing-opentelemetry` shows standard attributes; the crate's own fields stay beside them.

mod support;

use std::time::Duration;

use hodoflow_mock::Fault;
use hodoflow_retry::ErrorKind;
use support::{Captured, TRIGGER, WEBHOOKS, client, delivery, server};
use tracing_subscriber::fmt::format::FmtSpan;

/// Every span closed while `run` ran, one line each with all its fields.
async fn closed_spans<F: std::future::Future<Output = ()>>(run: F) -> Vec<String> {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(captured.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    run.await;
    captured
        .text()
        .lines()
        .filter(|line| line.contains(" close "))
        .map(str::to_owned)
        .collect()
}

/// The fields of the span a close line is about: the innermost of its context.
fn closing<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let context = &line[..line.rfind("}: ")? + 1];
    let opening = format!("{name}{{");
    let start = context.rfind("hodoflow_retry.")?;
    let fields = context[start..].strip_prefix(&opening)?;
    Some(fields.strip_suffix('}').unwrap_or(fields))
}

fn attempts(spans: &[String]) -> Vec<&str> {
    spans
        .iter()
        .filter_map(|line| closing(line, "hodoflow_retry.attempt"))
        .collect()
}

fn call(spans: &[String]) -> &str {
    spans
        .iter()
        .find_map(|line| closing(line, "hodoflow_retry.request"))
        .expect("the call's span")
}

#[tokio::test]
async fn a_delivery_and_each_resend_are_spans_with_the_http_client_convention_names() {
    let server = server().await;
    server.inject(Fault::respond(503).on("POST", WEBHOOKS).times(1));
    let client = client(&server);
    let spans = closed_spans(async {
        let delivery = client
            .deliver(TRIGGER, "{}")
            .delivery_id(delivery("otel-1"));
        delivery
            .send()
            .await
            .expect("accepted on the second attempt");
    })
    .await;
    let port = server.addr().port();

    let attempts = attempts(&spans);
    assert_eq!(attempts.len(), 2, "{spans:#?}");
    for (resend, span) in attempts.iter().enumerate() {
        for field in [
            "otel.name=POST /api/v1/webhooks/<redacted>",
            "otel.kind=\"client\"",
            "http.request.method=POST",
            "server.address=\"127.0.0.1\"",
            &format!("server.port={port}"),
            "url.template=/api/v1/webhooks/<redacted>",
            &format!("url.full=http://127.0.0.1:{port}/api/v1/webhooks/<redacted>"),
        ] {
            assert!(span.contains(field), "{field} in {span}");
        }
        match resend {
            0 => {
                assert!(!span.contains("http.request.resend_count"), "{span}");
                assert!(span.contains("http.response.status_code=503"), "{span}");
                assert!(span.contains("error.type=\"503\""), "{span}");
            }
            _ => {
                assert!(span.contains("http.request.resend_count=1"), "{span}");
                assert!(span.contains("http.response.status_code=202"), "{span}");
                assert!(!span.contains("error.type"), "{span}");
            }
        }
    }
    let call = call(&spans);
    for field in [
        "http.request.method=POST",
        "url.template=/api/v1/webhooks/<redacted>",
        "http.response.status_code=202",
        "surface=\"webhook\"",
        "route=/api/v1/webhooks/<redacted>",
    ] {
        assert!(call.contains(field), "{field} in {call}");
    }
    assert!(
        !spans.concat().contains(TRIGGER),
        "the trigger token is never a field"
    );
    assert_eq!(server.ledger().total_runs(), 1);
}

#[tokio::test]
async fn a_failed_call_records_its_error_type_and_a_lost_answer_its_transport_kind() {
    let server = server().await;
    server.inject(Fault::execute_then_close().on("POST", WEBHOOKS).times(1));
    server.inject(Fault::respond(404).on("POST", WEBHOOKS));
    let client = client(&server);
    let spans = closed_spans(async {
        let delivery = client
            .deliver(TRIGGER, "{}")
            .delivery_id(delivery("otel-2"));
        let error = delivery
            .send()
            .await
            .expect_err("the second answer is a 404");
        assert_eq!(error.kind(), ErrorKind::NotFound);
        tokio::time::sleep(Duration::from_millis(1)).await;
    })
    .await;

    let attempts = attempts(&spans);
    assert_eq!(attempts.len(), 2, "{spans:#?}");
    assert!(
        attempts[0].contains("error.type=\"closed\""),
        "{}",
        attempts[0]
    );
    assert!(
        !attempts[0].contains("http.response.status_code"),
        "{}",
        attempts[0]
    );
    assert!(
        attempts[1].contains("error.type=\"404\""),
        "{}",
        attempts[1]
    );
    let call = call(&spans);
    assert!(call.contains("error.type=\"not_found\""), "{call}");
    assert!(call.contains("http.response.status_code=404"), "{call}");
    assert_eq!(server.ledger().total_runs(), 1, "the lost answer had run");
}
