//! `hodoflow-mock`: serve the contract server for local rehearsal.
//!
//! Run with: `cargo run -p hodoflow-mock -- --listen 127.0.0.1:8080`

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use hodoflow_mock::{ClientSeed, Limits, MockServer, ModulifyTokenSeed, TriggerSeed};
use serde::Deserialize;

/// The control routes and the fault forms, under `--help`.
const FAULTS: &str = r#"Control routes (with --control, on the same address):
  POST   /_mock/faults   arm a fault (JSON below); 204, or 400 naming what it refused
  DELETE /_mock/faults   disarm every fault
  GET    /_mock/ledger   every request seen, every run started, as JSON

A fault: {"action": ACTION, "method": "POST", "path_prefix": "/api/v1/webhooks/", "firing": FIRING}
  method, path_prefix and firing are optional (any method, every path, the next request once);
  an unknown field is refused.
ACTION, a name or {name: parameters}:
  "execute_then_close"                                  commit, then drop the answer
  {"execute_then_delay": {"delay_ms": 2000}}            commit, then answer late
  {"delay_then_handle": {"delay_ms": 2000}}             wait, then handle as usual
  {"respond": {"status": 503, "headers": {"Retry-After": "1"}, "body": "..."}}
  also close_before_execute, refuse_stream, slow_execution, fail_execution and the token
  endpoint's forms: crates/hodoflow-mock/README.md lists every action with its parameters.
FIRING:
  {"times": 3}                       the next 3 matching requests
  {"probability": {"p": 0.2, "seed": 7}}
  {"during": {"window_ms": 5000}}    every matching request for 5 s from now
  {"above_rate": {"per_second": 50}} requests above 50 a second (a proxy's rate limit)

Example: lose the answer of every fifth delivery, repeatably:
  curl -s localhost:8080/_mock/faults -H 'content-type: application/json' \
    -d '{"action":"execute_then_close","method":"POST","path_prefix":"/api/v1/webhooks/",
         "firing":{"probability":{"p":0.2,"seed":7}}}'"#;

/// A Hodoflow-style contract server with fault injection, for rehearsing retries.
#[derive(Debug, Parser)]
#[command(version, after_help = FAULTS)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// A client as ID:SECRET@ORGANIZATION (every scope). Repeatable. Default: the demo client.
    #[arg(long = "client", value_parser = parse_client)]
    clients: Vec<ClientSeed>,
    /// A trigger as TOKEN@ORGANIZATION. Repeatable. Default: the demo trigger.
    #[arg(long = "trigger", value_parser = parse_trigger)]
    triggers: Vec<TriggerSeed>,
    /// A Modulify API token that may call every method. Repeatable. The demo token is always
    /// accepted.
    #[arg(long = "modulify-token")]
    modulify_tokens: Vec<String>,
    /// A JSON file with {"clients": [...], "triggers": [...], "modulify_tokens": [...]}, added
    /// to the flags.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Serve /_mock/faults and /_mock/ledger for fault injection over HTTP.
    #[arg(long)]
    control: bool,
    /// Access-token lifetime in seconds.
    #[arg(long, default_value_t = 3600)]
    token_ttl_secs: u64,
    /// Webhook requests per trigger per window (stated as `RateLimit-Policy` q).
    #[arg(long, env = "HODOFLOW_MOCK_WEBHOOK_RATE_LIMIT", default_value_t = 100)]
    webhook_rate_limit: u32,
    /// The webhook rate window in seconds (stated as `RateLimit-Policy` w).
    #[arg(long, env = "HODOFLOW_MOCK_WEBHOOK_RATE_WINDOW_SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    webhook_rate_window_secs: u64,
    /// Send no `RateLimit-Policy` and `RateLimit` fields on webhook answers, as a deployment
    /// that does not state its limits.
    #[arg(long, env = "HODOFLOW_MOCK_NO_RATELIMIT_FIELDS")]
    no_ratelimit_fields: bool,
    /// How long a new workflow run stays queued, in milliseconds.
    #[arg(long, default_value_t = 200)]
    run_queued_ms: u64,
    /// How long a workflow run stays running, in milliseconds.
    #[arg(long, default_value_t = 800)]
    run_running_ms: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedFile {
    #[serde(default)]
    clients: Vec<ClientSeed>,
    #[serde(default)]
    triggers: Vec<TriggerSeed>,
    #[serde(default)]
    modulify_tokens: Vec<ModulifyTokenSeed>,
}

fn parse_client(text: &str) -> Result<ClientSeed, String> {
    let (credentials, org) = text
        .rsplit_once('@')
        .ok_or("expected ID:SECRET@ORGANIZATION")?;
    let (id, secret) = credentials
        .split_once(':')
        .ok_or("expected ID:SECRET@ORGANIZATION")?;
    if id.is_empty() || secret.is_empty() || org.is_empty() {
        return Err("ID, SECRET and ORGANIZATION must not be empty".to_owned());
    }
    Ok(ClientSeed::new(id, secret, org))
}

fn parse_trigger(text: &str) -> Result<TriggerSeed, String> {
    match text.rsplit_once('@') {
        Some((token, org)) if !token.is_empty() && !org.is_empty() => {
            Ok(TriggerSeed::new(token, org))
        }
        _ => Err("expected TOKEN@ORGANIZATION".to_owned()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "hodoflow_mock=info".into()),
        )
        .init();
    let args = Args::parse();
    let mut seeds = match &args.config {
        Some(path) => serde_json::from_str(&std::fs::read_to_string(path)?)
            .map_err(|e| format!("{}: {e}", path.display()))?,
        None => SeedFile::default(),
    };
    seeds.clients.extend(args.clients);
    seeds.triggers.extend(args.triggers);
    let modulify_seeded = !(args.modulify_tokens.is_empty() && seeds.modulify_tokens.is_empty());
    seeds.modulify_tokens.extend(
        args.modulify_tokens
            .iter()
            .map(|token| ModulifyTokenSeed::new(token)),
    );
    let demo = seeds.clients.is_empty() && seeds.triggers.is_empty();
    let limits = Limits {
        token_ttl: Duration::from_secs(args.token_ttl_secs),
        webhook_rate_limit: args.webhook_rate_limit,
        webhook_rate_window: Duration::from_secs(args.webhook_rate_window_secs),
        webhook_rate_limit_fields: !args.no_ratelimit_fields,
        run_queued_for: Duration::from_millis(args.run_queued_ms),
        run_running_for: Duration::from_millis(args.run_running_ms),
        ..Limits::default()
    };
    let mut builder = MockServer::builder()
        .listen(args.listen)
        .limits(limits)
        .control_routes(args.control);
    for client in seeds.clients {
        builder = builder.client(client);
    }
    for trigger in seeds.triggers {
        builder = builder.trigger(trigger);
    }
    for token in seeds.modulify_tokens {
        builder = builder.modulify_token(token);
    }
    let server = builder.start().await?;
    print_banner(&server, demo, args.control);
    print_modulify(&server, modulify_seeded);
    println!();
    println!("Request log follows (trigger tokens redacted; no credentials). Ctrl-C stops.");
    tokio::signal::ctrl_c().await?;
    Ok(())
}

/// How to call it. Secrets and trigger tokens are the user's own: they are
/// named, never printed, except the published demo ones.
fn print_banner(server: &MockServer, demo: bool, control: bool) {
    let base = server.base_url();
    let (id, secret, token) = if demo {
        (
            hodoflow_mock::DEMO_CLIENT_ID,
            hodoflow_mock::DEMO_CLIENT_SECRET,
            hodoflow_mock::DEMO_TRIGGER_TOKEN,
        )
    } else {
        ("$CLIENT_ID", "$CLIENT_SECRET", "$TRIGGER_TOKEN")
    };
    println!("hodoflow-mock listening on {base}");
    println!();
    println!("  # exchange client credentials for a token");
    println!(
        "  curl -s {base}/oauth/token -d grant_type=client_credentials -d client_id={id} -d client_secret={secret}"
    );
    println!("  # deliver an event (rehearse a retry: send it twice with the same key)");
    println!(
        "  curl -s {base}/api/v1/webhooks/{token} -H \"Authorization: Bearer $TOKEN\" -H 'Idempotency-Key: evt-1' -d '{{\"order\":42}}'"
    );
    println!("  # an idempotent write");
    println!(
        "  curl -s {base}/api/json/v1/projects -H \"Authorization: Bearer $TOKEN\" -H 'Idempotency-Key: op-1' -d '{{\"data\":{{\"type\":\"projects\",\"attributes\":{{\"name\":\"x\"}}}}}}'"
    );
    if control {
        println!("  # lose the answer of the next delivery after it commits");
        println!(
            "  curl -s {base}/_mock/faults -H 'content-type: application/json' -d '{{\"action\":\"execute_then_close\",\"method\":\"POST\",\"path_prefix\":\"/api/v1/webhooks/\"}}'"
        );
        println!("  curl -s {base}/_mock/ledger");
    }
}

/// How to call Modulify. The published demo token is always accepted, so it is printed; seeded
/// tokens are the user's own and never printed.
fn print_modulify(server: &MockServer, seeded: bool) {
    let base = server.base_url();
    let token = hodoflow_mock::DEMO_MODULIFY_TOKEN;
    println!();
    if seeded {
        println!("  # Modulify: your tokens, or the demo token {token}");
    } else {
        println!("  # Modulify: the demo token is {token}");
    }
    println!("  curl -s {base}/v1/tools -H 'Authorization: Bearer {token}'");
    println!(
        "  curl -s {base}/v1/send_message -H 'Authorization: Bearer {token}' -H 'Idempotency-Key: msg-1' -d '{{\"projectId\":\"SITE_ID\",\"prompt\":\"Add a sign-up form.\"}}'"
    );
}
