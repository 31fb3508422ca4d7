//! The `hodoflow-mock` binary: seeded from flags, it serves a token exchange
//! and a delivery, and its output logs each request without a secret.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use support::{Reply, credentials, http, send};

const CLIENT_ID: &str = "ci-client";
const CLIENT_SECRET: &str = "s3cret-never-logged-41";
const TRIGGER_TOKEN: &str = "trg_never_logged_7c2a";
const MODULIFY_TOKEN: &str = "mfy_never_logged_93e1";

/// Kills the binary even when an assertion fails first.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free port on 127.0.0.1, released for the binary to bind.
fn free_port() -> u16 {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap().port()
}

/// Collects a stream to its end, sending each line on `lines` as it comes.
fn collect(stream: impl Read + Send + 'static, lines: mpsc::Sender<String>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let _ = lines.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    })
}

#[tokio::test]
async fn serves_the_seeds_from_flags_and_logs_requests_without_secrets() {
    let base = format!("http://127.0.0.1:{}", free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_hodoflow-mock"))
        .args(["--listen", base.trim_start_matches("http://")])
        .args(["--client", &format!("{CLIENT_ID}:{CLIENT_SECRET}@acme")])
        .args(["--trigger", &format!("{TRIGGER_TOKEN}@acme")])
        .args(["--modulify-token", MODULIFY_TOKEN])
        .env("RUST_LOG", "hodoflow_mock=info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, seen) = mpsc::channel();
    let stdout = collect(child.stdout.take().unwrap(), lines.clone());
    let stderr = collect(child.stderr.take().unwrap(), lines);
    let running = Running(child);
    loop {
        let line = seen
            .recv_timeout(Duration::from_secs(30))
            .expect("the binary never said it listens");
        if line.contains("listening on") {
            break;
        }
    }

    let granted = send(
        http()
            .post(format!("{base}/oauth/token"))
            .form(&credentials(CLIENT_ID, CLIENT_SECRET)),
    )
    .await;
    assert_eq!(granted.status, 200);
    let token = granted.json()["access_token"].as_str().unwrap().to_owned();
    let deliver = || {
        let url = format!("{base}/api/v1/webhooks/{TRIGGER_TOKEN}");
        let request = http()
            .post(url)
            .bearer_auth(&token)
            .header("Idempotency-Key", "evt-1");
        send(request.body(r#"{"order":42}"#))
    };
    let accepted: Reply = deliver().await;
    assert_eq!(accepted.delivery_status(), "accepted");
    assert_eq!(deliver().await.delivery_status(), "duplicate");
    let refused = send(
        http()
            .post(format!("{base}/oauth/token"))
            .form(&credentials(CLIENT_ID, "wrong")),
    )
    .await;
    assert_eq!(refused.status, 401);
    let call = || {
        let request = http()
            .post(format!("{base}/v1/send_message"))
            .bearer_auth(MODULIFY_TOKEN)
            .header("Idempotency-Key", "msg-1");
        send(request.body(r#"{"projectId":"SITE_ID","prompt":"hi"}"#))
    };
    let sent = call().await;
    assert_eq!(sent.status, 200);
    assert!(call().await.replayed());
    let tools = http()
        .get(format!("{base}/v1/tools"))
        .bearer_auth(hodoflow_mock::DEMO_MODULIFY_TOKEN);
    assert_eq!(
        send(tools).await.status,
        200,
        "the demo token is always accepted"
    );

    drop(running);
    let output = stdout.join().unwrap() + &stderr.join().unwrap();
    let logged = |parts: &[&str]| {
        output
            .lines()
            .any(|line| parts.iter().all(|p| line.contains(p)))
    };
    assert!(
        logged(&["POST", "path=/oauth/token", "200"]),
        "no exchange in:\n{output}"
    );
    assert!(
        logged(&["POST", "path=/oauth/token", "401"]),
        "no refusal in:\n{output}"
    );
    let delivery = [
        "path=/api/v1/webhooks/<redacted>",
        "202",
        accepted.request_id(),
    ];
    assert!(logged(&delivery), "no delivery in:\n{output}");
    let modulify = ["path=/v1/send_message", "200", sent.request_id()];
    assert!(logged(&modulify), "no Modulify call in:\n{output}");
    assert!(
        output.contains(hodoflow_mock::DEMO_MODULIFY_TOKEN),
        "the demo Modulify token is published, so it is printed:\n{output}"
    );
    for secret in [CLIENT_SECRET, token.as_str(), TRIGGER_TOKEN, MODULIFY_TOKEN] {
        assert!(!output.contains(secret), "a secret was printed:\n{output}");
    }
}
