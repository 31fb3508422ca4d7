//! Run with: `cargo run --example opentelemetry`
//!
//! Exports the SDK's spans with `tracing-opentelemetry` to stdout: a delivery that meets one
//! 503 shows as the call's span and one client span per attempt, carrying the attributes of
//! OpenTelemetry's HTTP client semantic conventions (`http.request.method`,
//! `http.response.status_code`, `http.request.resend_count`, `server.address`, `url.template`,
//! `error.type`). Swap the stdout exporter for an OTLP one to send them to a collector.

use std::time::Duration;

use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_TRIGGER_TOKEN, Fault, MockServer};
use hodoflow_retry::{Backoff, DeliveryId, HodoflowClient, IdempotencyKey};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. An OpenTelemetry tracer that prints every finished span on stdout.
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
        .build();
    let tracer = provider.tracer("hodoflow-retry-example");

    // 2. The SDK's spans become OpenTelemetry spans (reqwest's and hyper's own events stay out).
    tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("hodoflow_retry=info"))
        .with(tracing_opentelemetry::layer().with_tracer(tracer))
        .init();

    // 3. The contract server on 127.0.0.1:0, answering the first delivery with a 503.
    let server = MockServer::builder().start().await?;
    server.inject(Fault::respond(503).on("POST", "/api/v1/webhooks/").times(1));

    // 4. One delivery: a 503, then 202. Two client spans, the second with resend_count 1.
    let client = HodoflowClient::builder(server.base_url())
        .client_credentials(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
        .backoff(Backoff::new().base(Duration::from_millis(20)))
        .build()?;
    let id = DeliveryId::new(IdempotencyKey::from_operation_id("otel-example:order-1"));
    let delivery = client
        .deliver(DEMO_TRIGGER_TOKEN, r#"{"order":1}"#)
        .delivery_id(id)
        .send()
        .await?;
    println!("accepted, run {:?}", delivery.run_id());

    // 5. Flush what the exporter holds before the process ends.
    provider.shutdown()?;
    Ok(())
}
