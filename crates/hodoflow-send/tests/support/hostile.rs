//! A hostile server for the CLI's tests: a small HTTP/1.1 server written here on a Tokio
//! `TcpListener` at 127.0.0.1:0, which can answer anything (any status, header or body, no
//! answer at all, bytes that are not HTTP) and keeps a ledger of what it received.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn is_token_exchange(&self) -> bool {
        self.path == "/oauth/token"
    }
}

/// What the server does with a request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// These bytes, then the connection is closed.
    Raw(Vec<u8>),
    /// Nothing: the connection is closed at once.
    Close,
    /// Nothing for this long, then the connection is closed.
    Hang(Duration),
}

impl Reply {
    /// A well-formed answer, with `content-length` and `connection: close` added.
    pub fn http(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Self {
        let mut raw = format!("HTTP/1.1 {status} Hostile\r\n");
        for (name, value) in headers {
            raw.push_str(&format!("{name}: {value}\r\n"));
        }
        raw.push_str(&format!(
            "content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        ));
        let mut raw = raw.into_bytes();
        raw.extend_from_slice(body);
        Self::Raw(raw)
    }

    /// A JSON answer.
    pub fn json(status: u16, body: &Value) -> Self {
        Self::http(
            status,
            &[("content-type", "application/json")],
            body.to_string().as_bytes(),
        )
    }
}

/// How the server answers: the request, and every request before it.
pub type Handler = dyn Fn(&Request, &[Request]) -> Reply + Send + Sync;

/// The hostile server, served by a runtime of its own for as long as it lives.
pub struct Hostile {
    /// Its base URL, `http://127.0.0.1:PORT`.
    pub base_url: String,
    ledger: Arc<Mutex<Vec<Request>>>,
    _runtime: tokio::runtime::Runtime,
}

impl Hostile {
    /// A server that answers every request, token exchanges included, with `answer`.
    pub fn raw(answer: impl Fn(&Request, &[Request]) -> Reply + Send + Sync + 'static) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the hostile server");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("a loopback port");
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let ledger = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Handler> = Arc::new(answer);
        let shared = Arc::clone(&ledger);
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let ledger = Arc::clone(&shared);
                let answer = Arc::clone(&answer);
                tokio::spawn(async move { serve(stream, &ledger, &*answer).await });
            }
        });
        Self {
            base_url,
            ledger,
            _runtime: runtime,
        }
    }

    /// Every request received so far, token exchanges included.
    pub fn requests(&self) -> Vec<Request> {
        self.ledger.lock().unwrap().clone()
    }
}

/// Reads one request, records it, answers it and closes the connection.
async fn serve(mut stream: TcpStream, ledger: &Mutex<Vec<Request>>, answer: &Handler) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let reply = {
        let mut ledger = ledger.lock().unwrap();
        let reply = answer(&request, &ledger);
        ledger.push(request);
        reply
    };
    match reply {
        Reply::Raw(bytes) => {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.shutdown().await;
        }
        Reply::Close => {}
        Reply::Hang(time) => tokio::time::sleep(time).await,
    }
}

/// The head and the `content-length` body of one request; `None` when the client went away.
async fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut bytes = Vec::new();
    let mut chunk = [0_u8; 8192];
    let head_end = loop {
        if let Some(at) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 || bytes.len() > 64 * 1024 {
            return None;
        }
        bytes.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut start = lines.next()?.split(' ');
    let (method, path) = (start.next()?.to_owned(), start.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = bytes[head_end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}
