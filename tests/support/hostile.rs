//! A hostile server: raw HTTP/1.1 on 127.0.0.1:0 that answers whatever a test scripts, however
//! wrong: any status, any header, bodies of a gigabyte, bytes that are not HTTP at all.
//!
//! It issues real tokens at `/oauth/token` (unless a test scripts that route too) and judges the
//! bearer token of every other request on its own clock, so a test can see a stale token sent.
//! Its ledger is every request it read, in order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The client secret the hostile server's token endpoint accepts.
pub const HOSTILE_SECRET: &str = "cs_HOSTILE_secret_31";
/// Every token it issues starts with this, so a test can search output for any of them.
pub const HOSTILE_TOKEN_PREFIX: &str = "hft_HOSTILE_";

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Header names lower-cased, in order, repeats kept.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
    /// The bearer token's standing on the server's clock.
    pub bearer: Bearer,
}

impl Seen {
    /// Every value of header `name`.
    pub fn header_values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// What the server makes of a request's bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bearer {
    /// Issued by this server and not expired.
    Valid,
    /// Issued by this server, expired when the request arrived.
    Expired,
    /// Not one this server issued, or no bearer token.
    Unknown,
}

/// A body to send.
#[derive(Debug, Clone)]
pub enum Body {
    Bytes(Vec<u8>),
    /// `len` bytes of filler, written in 64 KiB chunks until the client stops reading; with a
    /// `Content-Length` or delimited by closing the connection.
    Endless {
        len: u64,
        content_length: bool,
    },
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    Http {
        status: u16,
        headers: Vec<(String, String)>,
        body: Body,
    },
    /// These bytes and nothing else, then the connection closes.
    Raw(Vec<u8>),
    /// Close the connection without answering.
    Hangup,
}

impl Reply {
    pub fn status(status: u16) -> Self {
        Self::Http {
            status,
            headers: Vec::new(),
            body: Body::Bytes(Vec::new()),
        }
    }

    pub fn json(status: u16, body: &str) -> Self {
        Self::status(status)
            .header("content-type", "application/json")
            .body(body.as_bytes().to_vec())
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        if let Self::Http { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    pub fn body(mut self, bytes: Vec<u8>) -> Self {
        if let Self::Http { body, .. } = &mut self {
            *body = Body::Bytes(bytes);
        }
        self
    }

    pub fn endless(mut self, len: u64, content_length: bool) -> Self {
        if let Self::Http { body, .. } = &mut self {
            *body = Body::Endless {
                len,
                content_length,
            };
        }
        self
    }
}

type Handler = dyn Fn(&Seen, usize) -> Reply + Send + Sync;

#[derive(Default)]
struct Tokens {
    issued: Vec<(String, Instant, Duration)>,
}

impl Tokens {
    fn judge(&self, headers: &[(String, String)], now: Instant) -> Bearer {
        let Some(token) = headers
            .iter()
            .find(|(n, _)| n == "authorization")
            .and_then(|(_, v)| v.strip_prefix("Bearer "))
        else {
            return Bearer::Unknown;
        };
        match self.issued.iter().find(|(issued, ..)| issued == token) {
            Some((_, at, ttl)) if now.duration_since(*at) < *ttl => Bearer::Valid,
            Some(_) => Bearer::Expired,
            None => Bearer::Unknown,
        }
    }
}

struct Shared {
    handler: Box<Handler>,
    scripts_tokens: bool,
    token_ttl: Duration,
    tokens: Mutex<Tokens>,
    seen: Mutex<Vec<Seen>>,
    api_requests: AtomicU64,
    /// Body bytes written, for tests that bound what a client read.
    written: AtomicU64,
}

/// How a hostile server starts.
pub struct HostileBuilder {
    scripts_tokens: bool,
    token_ttl: Duration,
}

impl HostileBuilder {
    /// The handler answers `/oauth/token` too.
    pub fn scripts_tokens(mut self) -> Self {
        self.scripts_tokens = true;
        self
    }

    /// Tokens it issues expire after `ttl` on its clock (and say so in `expires_in`, rounded
    /// up to whole seconds).
    pub fn token_ttl(mut self, ttl: Duration) -> Self {
        self.token_ttl = ttl;
        self
    }

    /// Starts on 127.0.0.1:0; `handler` gets each request and its number among the requests
    /// it answers (0 first).
    pub async fn start(
        self,
        handler: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static,
    ) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            handler: Box::new(handler),
            scripts_tokens: self.scripts_tokens,
            token_ttl: self.token_ttl,
            tokens: Mutex::new(Tokens::default()),
            seen: Mutex::new(Vec::new()),
            api_requests: AtomicU64::new(0),
            written: AtomicU64::new(0),
        });
        let accepting = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let shared = Arc::clone(&accepting);
                tokio::spawn(async move {
                    let _ = serve(stream, &shared).await;
                });
            }
        });
        Hostile { addr, shared, task }
    }
}

/// A running hostile server; it stops when dropped.
pub struct Hostile {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hostile {
    pub fn builder() -> HostileBuilder {
        HostileBuilder {
            scripts_tokens: false,
            token_ttl: Duration::from_secs(3600),
        }
    }

    /// A server whose token endpoint is real and whose other answers come from `handler`.
    pub async fn start(handler: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static) -> Self {
        Self::builder().start(handler).await
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request read, the token endpoint's included, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// The requests whose path starts with `prefix`.
    pub fn seen_under(&self, prefix: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|seen| seen.path.starts_with(prefix))
            .collect()
    }

    /// Every token the server issued.
    pub fn issued(&self) -> Vec<String> {
        let tokens = self.shared.tokens.lock().unwrap();
        tokens.issued.iter().map(|(t, ..)| t.clone()).collect()
    }

    /// Body bytes the server managed to write.
    pub fn written(&self) -> u64 {
        self.shared.written.load(Ordering::Relaxed)
    }
}

static ISSUED: AtomicU64 = AtomicU64::new(0);

async fn serve(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let Some(seen) = read_request(&mut stream, shared).await? else {
        return Ok(());
    };
    let is_token = seen.path.starts_with("/oauth/token");
    shared.seen.lock().unwrap().push(seen.clone());
    let reply = if is_token && !shared.scripts_tokens {
        issue(shared, &seen)
    } else {
        let n = shared.api_requests.fetch_add(1, Ordering::SeqCst) as usize;
        (shared.handler)(&seen, n)
    };
    write_reply(&mut stream, reply, shared).await
}

fn issue(shared: &Shared, seen: &Seen) -> Reply {
    let form = String::from_utf8_lossy(&seen.body);
    if !form.contains(&format!("client_secret={HOSTILE_SECRET}")) {
        return Reply::json(401, r#"{"error":"invalid_client"}"#);
    }
    let n = ISSUED.fetch_add(1, Ordering::Relaxed);
    let token = format!("{HOSTILE_TOKEN_PREFIX}{n}_{:08x}", rand::random::<u32>());
    let ttl = shared.token_ttl;
    let expires_in = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    shared
        .tokens
        .lock()
        .unwrap()
        .issued
        .push((token.clone(), Instant::now(), ttl));
    Reply::json(
        200,
        &format!(
            r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":{expires_in},"scope":"api_read api_write webhooks"}}"#
        ),
    )
}

async fn read_request(stream: &mut TcpStream, shared: &Shared) -> std::io::Result<Option<Seen>> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let read = stream.read(&mut chunk).await?;
        if read == 0 || buffer.len() > 1 << 20 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    let at = Instant::now();
    let bearer = shared.tokens.lock().unwrap().judge(&headers, at);
    Ok(Some(Seen {
        method,
        path,
        headers,
        body,
        at,
        bearer,
    }))
}

async fn write_reply(stream: &mut TcpStream, reply: Reply, shared: &Shared) -> std::io::Result<()> {
    let (status, headers, body) = match reply {
        Reply::Hangup => return Ok(()),
        Reply::Raw(bytes) => {
            stream.write_all(&bytes).await?;
            return stream.shutdown().await;
        }
        Reply::Http {
            status,
            headers,
            body,
        } => (status, headers, body),
    };
    let mut head = format!("HTTP/1.1 {status} Hostile\r\nconnection: close\r\n");
    for (name, value) in &headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match &body {
        Body::Bytes(bytes) => head.push_str(&format!("content-length: {}\r\n", bytes.len())),
        Body::Endless {
            len,
            content_length: true,
        } => head.push_str(&format!("content-length: {len}\r\n")),
        Body::Endless { .. } => {}
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    match body {
        Body::Bytes(bytes) => {
            stream.write_all(&bytes).await?;
            shared
                .written
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
        Body::Endless { len, .. } => {
            let filler = vec![b'x'; 64 * 1024];
            let mut left = len;
            while left > 0 {
                let n = left.min(filler.len() as u64) as usize;
                stream.write_all(&filler[..n]).await?;
                shared.written.fetch_add(n as u64, Ordering::Relaxed);
                left -= n as u64;
            }
        }
    }
    stream.shutdown().await
}
